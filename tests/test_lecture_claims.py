"""Issue 16: the lecture, faithfully. Expected numbers are derived by hand from the lecture's premises and the
catalog's published specs (GB200: 186 GB, 8 TB/s per GPU, 72 per rack; Rubin: 288 GB, 20 TB/s), never copied
from the code's output."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from conftest import run_cli
from rackmath.analyses.lecture import batching as ba
from rackmath.claims import all_claims, summary

GB200_RACK_HBM = 72 * 186e9  # 13.392 TB
GB200_RACK_BW = 72 * 8e12  # 576 TB/s
DRAIN_GB200 = GB200_RACK_HBM / GB200_RACK_BW  # 23.25 ms
DRAIN_RUBIN = 288e9 / 20e12  # 14.4 ms, the lecture's "about 15 ms"


@pytest.fixture(scope="module")
def claims():
    return all_claims()


def _numbers(d):
    for v in d.values():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            yield float(v)
        elif isinstance(v, (list, tuple)):
            yield from (float(x) for x in v if isinstance(x, (int, float)) and not isinstance(x, bool))


def test_no_claim_value_equals_one_of_its_inputs(claims):
    """Generic: a claim whose value is one of its own inputs reproduces nothing."""
    for c in claims:
        if c.kind in ("definition", "cited") or not isinstance(c.value, (int, float)):
            continue
        for x in _numbers(c.inputs):
            assert not math.isclose(float(c.value), x, rel_tol=1e-9), (c.id, c.title, x)


def test_every_row_has_a_tolerance_and_every_difference_a_reason(claims):
    for c in claims:
        assert c.tolerance, c.id
        assert c.kind in ("lecture", "real", "definition", "cited", "lookup")
        if c.kind == "lecture" and not c.agrees:
            assert len(c.reason) > 30, c.id
        if isinstance(c.value, (int, float)) and isinstance(c.lecture_value, (int, float)):
            assert c.ratio == pytest.approx(c.value / c.lecture_value)


def test_definitions_and_citations_are_not_counted(claims):
    by = {(c.id, c.kind): c for c in claims}
    assert by[("R8", "definition")].verdict == "definition"
    assert by[("R26", "cited")].verdict == "cited"
    s = summary(claims)
    assert s["agree"] + s["differ"] + s["not_discriminated"] == s["lecture_rows"]
    assert s["lecture_rows"] == sum(c.kind == "lecture" for c in claims)
    assert s["definition"] == 1 and s["cited"] == 1


def _row(claims, cid, kind="lecture"):
    return next(c for c in claims if c.id == cid and c.kind == kind)


def test_twenty_ms_step_emerges_from_memory_capacity(claims):
    """Lecture premises (all weights, batch 300 × 256/32 = 2,400, HBM full of KV): the step reads all of HBM once."""
    op = ba.operating_point("deepseek-v3", "gb200-nvl72", batch=2400, weight_read="all", usable=1.0)
    assert op.step_s == pytest.approx(DRAIN_GB200, rel=0.01)
    assert _row(claims, "R9").value == pytest.approx(2 * DRAIN_GB200, rel=0.01)  # 46.5 ms vs "40 ms"
    assert _row(claims, "R10").value == pytest.approx(DRAIN_RUBIN, rel=0.01)  # 14.4 ms vs "15 ms"
    assert _row(claims, "R12").value == pytest.approx(2400 / DRAIN_GB200, rel=0.01)  # 103K vs 128K
    assert _row(claims, "R28").value == pytest.approx(DRAIN_GB200 + 4 * 0.002, rel=0.02)  # + 4 hops of 2 ms
    # a real rack: 90% of HBM, DeepSeek-V3 at 8K (MLA 61 layers × 576 × 2 B = 70.3 KB/token) → memory-bound batch
    real = ba.operating_point("deepseek-v3", "gb200-nvl72", context=8192)
    kv_seq = 61 * 576 * 2 * 8193
    assert real.limited_by == "memory capacity"
    assert real.batch == pytest.approx((0.9 * GB200_RACK_HBM - 688.6e9) / kv_seq, rel=0.02)
    assert real.step_s == pytest.approx(0.9 * DRAIN_GB200, rel=0.03)


def test_r1_fast_mode_is_derived_not_fed_back(claims):
    """With HBM full, weights are W/C = 671 GB / 13.39 TB = 5.0% of a step's bytes. 2.5× speed: t/t_op = 0.4 =
    w + (1 − w)·x → x = 0.368, cost = 0.4/x = 1.09× — not the lecture's 6×."""
    w = 671e9 / GB200_RACK_HBM
    x = (0.4 - w) / (1 - w)
    r1 = _row(claims, "R1")
    assert r1.value == pytest.approx(0.4 / x, rel=0.03)
    assert not r1.agrees and "6×" in r1.reason
    # the answer no longer depends on an operating multiple typed in
    assert "operating_multiple" not in r1.inputs
    # batching prices 2.5× speed at 6× only where weights are (6 − 1)/(6·2.5 − 1) = 5/14 of a memory-bound step
    assert float(ba.sheet_weights_share(6.0, 2.5)) == pytest.approx(5 / 14)
    assert "36%" in r1.reason


def test_r2_premise_stated_and_derived(claims):
    """The lecture's premise: B = 1 against the cost floor with the KV term disregarded (as in its B*): the penalty
    is (N·b/BW)/(2·N_active/FLOP/s) = ratio × sparsity = 300 × 256/32 = 2,400 — 'a thousand times' to within the
    order-of-magnitude tolerance. Real DeepSeek-V3 rows: all weights at 8K, cost(1)/cost(B_mem) ≈ W·B_mem/C ≈ 1,110;
    experts hit < 100."""
    lec = _row(claims, "R2")
    assert lec.value == pytest.approx(300 * 256 / 32) and lec.agrees and lec.inputs["ratio"] == 300
    real = [c for c in claims if c.id == "R2" and c.kind == "real"]
    assert [c.inputs["context"] for c in real] == [0.0, 8192, 8192]
    b_mem = (GB200_RACK_HBM - 688.6e9) / (61 * 576 * 2 * 8193)
    assert real[1].value == pytest.approx(671e9 * b_mem / GB200_RACK_HBM, rel=0.05)
    assert real[0].value > 4000  # no KV, every weight: ratio × real sparsity (~312 × 18)
    assert real[2].value < 100  # experts hit: ~ratio×, not ratio × sparsity


def test_contradictions_are_reported(claims):
    r42 = _row(claims, "R42")
    assert r42.inputs["model"] == "frontier-100b" and r42.value > 1 and not r42.agrees
    assert "faster" in r42.reason
    assert [c.kind for c in claims if c.id == "R35"] == ["lookup", "lookup"]  # both price steps
    assert [c.value for c in claims if c.id == "R35"] == pytest.approx([50.0, 100.0])  # output ×1.5, input ×2


def test_verdicts_mean_what_they_say(claims):
    """Issue 37 item 3."""
    from rackmath.claims import summary

    # data look-ups are look-ups, never agreements
    for cid in ("R4", "R35", "R38", "R39", "R40"):
        rows = [c for c in claims if c.id == cid]
        assert rows and all(c.kind == "lookup" and c.verdict.startswith("lookup") for c in rows), cid
        assert all("computed" not in c.tolerance for c in rows), cid
    s = summary(claims)
    assert s["lookup"] == 6 and s["agree"] + s["differ"] + s["not_discriminated"] == s["lecture_rows"]
    # R3: the lecture gave a formula, not a number — no ratio against rackmath's own hand computation
    r3 = _row(claims, "R3")
    assert isinstance(r3.lecture_value, str) and r3.ratio is None and r3.agrees
    # R24 judges the engine's most-loaded stage: 16 of 61 layers on each of 4 stages → 16·4/61 = 1.049 (KV), and the
    # weights 0.25 × 1.049 = 0.262 (layers on the busiest stage); both within ±10% of the lecture's 1 and 1/4
    assert _row(claims, "R24").value == pytest.approx(64 / 61, rel=0.01) and _row(claims, "R24").agrees
    assert _row(claims, "R24-b").value == pytest.approx(0.25 * 64 / 61, rel=0.02) and _row(claims, "R24-b").agrees
    # R24's step is derived: GB200 HBM drain 186 GB / 8 TB/s = 23.25 ms, in its derivation
    st = next(x for x in _row(claims, "R24").derivation.steps if x.symbol == "t_step")
    assert st.value == pytest.approx(186e9 / 8e12) and "drain" in st.substituted
    # rows labelled "lecture" use the lecture's inputs; real-world inputs sit in "real" rows
    r13 = _row(claims, "R13")
    assert r13.value == pytest.approx((100e6 / (2400 / DRAIN_GB200), 1e9 / (2400 / DRAIN_GB200)), rel=0.01)
    assert r13.agrees and _row(claims, "R13", "real").inputs["global rate"] == 494e6
    assert _row(claims, "R42-q").inputs["model"] == "frontier-100b"
    assert _row(claims, "R42-q", "real").inputs["model"] == "llama-3.1-405b"
    # R19 on the lecture's rack (GB200 NVL72): 900 GB/s NVLink ÷ 50 GB/s NIC = 18×, not ~8×; H100 (9×) is the real row
    r19 = _row(claims, "R19")
    assert r19.value == pytest.approx(18.0) and not r19.agrees and "18×" in r19.reason
    assert _row(claims, "R19", "real").value == pytest.approx(9.0) and _row(claims, "R19", "real").agrees
    # R41-ttl: the rule `cache` and docs/pricing.md use (distinct tiers by drain time) gives the lecture's flash/disk
    ttl = _row(claims, "R41-ttl")
    assert ttl.value == "flash/disk" and ttl.agrees
    code, out, err = run_cli("cache", "claude-opus-4.6", "--json")
    assert code == 0, err
    prem = json.loads(out)["premiums"]
    assert f"{prem['5m']['tier_distinct']}/{prem['1h']['tier_distinct']}" == ttl.value
    # R27: a 1.3% cost gap under a model that charges neither TP's nor EP's overheads cannot discriminate
    r27 = _row(claims, "R27")
    if not r27.agrees:
        assert r27.verdict == "not discriminated" and not r27.counted
        assert r27.inputs["its $/Mtok"] / r27.inputs["cheapest $/Mtok"] < 1.10


def test_racks_pipeline_step_is_derived():
    """`racks pipeline` no longer types 20 ms: its default step is the HBM drain time (GB200: 186 GB / 8 TB/s)."""
    code, out, err = run_cli("racks", "pipeline", "-H", "gb200-nvl72", "--json")
    assert code == 0, err
    steps = {s["symbol"]: s["value"] for s in json.loads(out)["inference"]["steps"]}
    assert steps["t_step"] == pytest.approx(186e9 / 8e12)
    assert steps["t_token"] == pytest.approx(186e9 / 8e12 + 4 * 0.002, rel=0.01)
    code, out, _ = run_cli("racks", "pipeline", "-H", "gb200-nvl72", "--t-step", "30ms", "--json")
    assert {s["symbol"]: s["value"] for s in json.loads(out)["inference"]["steps"]}["t_step"] == pytest.approx(0.03)


def test_one_fast_mode_answer_everywhere(claims):
    """Issue 37 item 2 / issue 35 item 8: `batching fast-mode`, `price … -m`, `lecture` (R1) and the docs give one
    answer, from one function, with the operating point that decides it printed beside it."""
    code, out, err = run_cli("batching", "fast-mode", "frontier-100b", "--price", "6", "--speedup", "2.5", "--json")
    assert code == 0, err
    b = json.loads(out)
    code, out, err = run_cli("price", "claude-opus-4.6", "-m", "frontier-100b", "--json")
    assert code == 0, err
    p = json.loads(out)["fast_mode"]
    assert b["speedup_bought"] == pytest.approx(p["speedup_bought"], rel=1e-9)
    assert b["cost_multiple"] == pytest.approx(p["cost_multiple"], rel=1e-9)
    assert b["assumption"] == p["assumption"] and "2.5 × B*" in b["assumption"]
    # from 2.5 × B* (compute-bound) shrinking to B* is free: 2.5× speed costs ~1×; 6× price buys a little more
    assert b["cost_multiple"] == pytest.approx(1.0, abs=0.01) and 2.5 <= b["speedup_bought"] < 2.7
    # at B* itself (no headroom) the step is the weight fetch: 6× buys almost nothing
    sens = {a["label"]: a for a in b["sensitivity"]}
    assert sens["at B* (the cost floor)"]["speedup_bought"] < 1.1
    # the lecture's row: the same function with the lecture's operating point, reproducible by the command it names
    r1 = _row(claims, "R1")
    code, out, err = run_cli(*r1.inputs["command"].split()[1:], "--json")
    assert code == 0, err
    assert json.loads(out)["cost_multiple"] == pytest.approx(r1.value, rel=1e-9)
    real = _row(claims, "R1", "real")
    code, out, err = run_cli(*real.inputs["command"].split()[1:], "--json")
    assert json.loads(out)["cost_multiple"] == pytest.approx(real.value, rel=1e-9)
    # text output prints the assumption beside the answer
    code, out, _ = run_cli("batching", "fast-mode", "frontier-100b", "--price", "6")
    assert "2.55×" in out and "assumption" in out and "B_op/B*" in out
    # the docs give the same numbers, with the assumption
    from pathlib import Path

    docs = Path(__file__).resolve().parents[1] / "docs"
    roof = (docs / "roofline.md").read_text()
    assert f"{b['speedup_bought']:.3g}×" in roof and "2.5 × B\\*" in roof and "6× the price buys 2.6×" not in roof
    assert f"{r1.value:.3g}×" in (docs / "lecture.md").read_text()
    assert f"{p['speedup_bought']:.3g}×" in (docs / "pricing.md").read_text()


def test_fast_mode_closed_form_matches_engine():
    """With every weight read the engine's answer is the closed form from the operating step's three shares."""
    a = ba.fast_mode("deepseek-v3", "gb200-nvl72", speedup=2.5, price=6.0, operating_batch=2400, weight_read="all",
                     usable=1.0)
    assert a.by_speed.cost_multiple == pytest.approx(a.closed["cost_multiple"], rel=0.01)
    assert a.by_price.speedup == pytest.approx(a.closed["speedup"], rel=0.01)
    # hand: memory-bound, w = 0.05, k = 0.95: cost of 2.5× = (1 − w)/(1 − 2.5w) = 0.95/0.875
    x, s, c = ba.fast_mode_closed(0.5, 0.05, 0.95, speedup=2.5)
    assert float(c) == pytest.approx(0.95 / 0.875)
    x, s, c = ba.fast_mode_closed(1.0, 0.39, 0.03, price=6.0)  # compute-bound at 2.5 × B*
    x_hand = 0.39 / (6.0 - 0.03)  # w/(p − k)
    assert float(x) == pytest.approx(x_hand) and float(s) == pytest.approx(1 / max(x_hand, 0.39 + 0.03 * x_hand))


def test_lecture_titles_distinguish_every_row(claims):
    """Item 5: at 100 columns the table's claim text tells every row of one ID apart (the two R12 rows)."""
    from collections import Counter

    n = Counter((c.id, c.display_title) for c in claims)
    assert max(n.values()) == 1, [k for k, v in n.items() if v > 1]
    import os

    code, out, err = run_cli("lecture", env={**os.environ, "COLUMNS": "100"})
    assert code == 0, err
    words = set(out.split())
    for c in claims:  # every word of every short title is printed (wrapped, never cut off)
        assert set(c.display_title.split()) <= words, (c.id, c.display_title)
    code, out, err = run_cli("lecture", "--only", "R12", env={**os.environ, "COLUMNS": "100"})
    assert "lecture premises" in out and "real DeepSeek-V3" in out


@pytest.mark.parametrize("mode,hand", [("all", 671e9 / GB200_RACK_BW), ("hit", 37.7e9 / GB200_RACK_BW)])
def test_floor_roofline_and_plot_agree_under_each_weight_read(mode, hand):
    """`batching floor`, `roofline -b 1 -L 0` and the batch plot's weight line at B = 1 give one number per mode."""
    from rackmath.plotting.batching import batch_curves

    code, out, err = run_cli("batching", "floor", "deepseek-v3", "-H", "gb200-nvl72", "--weight-read", mode, "--json")
    assert code == 0, err
    floor = json.loads(out)["latency_floor_s"]
    code, out, err = run_cli("roofline", "deepseek-v3", "-H", "gb200-nvl72", "-b", "1", "-L", "0", "--weight-read",
                             mode, "--json")
    assert code == 0, err
    step = json.loads(out)["step_s"]
    plot = float(batch_curves("deepseek-v3", "gb200-nvl72", batch=np.array([1.0, 64.0]), context=0.0,
                              weight_read=mode)[mode].t_weights_s[0])
    assert floor == pytest.approx(step, rel=1e-9) == pytest.approx(plot, rel=1e-9)
    assert floor == pytest.approx(hand, rel=0.03)


def test_no_batch_optimization_exceeds_memory():
    for model, ctx in (("deepseek-v3", 8192), ("frontier-100b", 8192), ("llama-3.1-70b", 32768)):
        cap = 0.9 * GB200_RACK_HBM
        from rackmath.specs.models import load_model

        m = load_model(model)
        need = lambda b: m.weight_bytes() + b * float(m.kv_cache_bytes(ctx + 1))  # noqa: E731
        _, best, _, _ = ba.unbatched_penalty(model, "gb200-nvl72", context=ctx)
        op = ba.operating_point(model, "gb200-nvl72", context=ctx)
        fm = ba.fast_mode_from_price(model, "gb200-nvl72", 6.0, context=ctx)
        for b in (best, op.batch, fm.operating_batch, op.memory_limit):
            assert need(b) <= cap * (1 + 1e-9), (model, b)
    code, out, _ = run_cli("batching", "penalty", "frontier-100b", "--json")
    assert json.loads(out)["best_batch"] < 1e6  # was 10⁶ sequences: 576 PB of KV on a 13.4 TB rack


def test_weight_read_flag_validated_and_explained():
    code, _, err = run_cli("roofline", "deepseek-v3", "-H", "gb200-nvl72", "--weight-read", "some")
    assert code == 2 and "weight_read" in err
    code, out, _ = run_cli("roofline", "deepseek-v3", "-H", "gb200-nvl72", "--weight-read", "all", "--explain")
    assert code == 0 and "every expert, every step" in out


def test_zero_bubble_and_rack_size_models():
    from rackmath.analyses.lecture.pipeline import schedule_bubbles, zero_bubble_fraction
    from rackmath.analyses.lecture.racks import rack_limits

    b = schedule_bubbles(4, 8, chunks=2)
    assert b["1F1B"] == pytest.approx(3 / 11) and b["interleaved 1F1B (v = 2)"] == pytest.approx(3 / 19)
    assert b["zero bubble ZB-H1"] == pytest.approx(3 / 27) and b["zero bubble ZB-H2"] == 0.0
    # unequal phases: T_F = 1, T_B = 2, T_W = 1 → bubble 3·2 over 8·4 + 6
    assert float(zero_bubble_fraction(4, 8, 1, 2, 1)) == pytest.approx(6 / 38)
    nvl72, nvl576 = rack_limits("gb200-nvl72"), rack_limits("rubin-ultra-nvl576")
    assert nvl72.binding == "switch radix" and nvl72.max_gpus["switch radix"] == 72
    assert nvl72.max_gpus["power"] == pytest.approx(72 * 132 / 120)
    assert nvl576.binding == "power"


def test_derated_inference_and_chinchilla_rules():
    from rackmath.analyses.lecture.lifetime import derated_inference_tokens

    assert float(derated_inference_tokens(263e12, 0.5)) == pytest.approx(131.5e12)
    code, out, err = run_cli("scaling", "chinchilla", "-C", "1e24", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["rule"].startswith("lecture") and d["N_opt"] == pytest.approx((1e24 / 120) ** 0.5, rel=1e-6)
    assert d["D_opt"] == pytest.approx(20 * d["N_opt"]) and 80 < d["tokens_per_param_fitted"] < 120


def test_lecture_table_and_explain():
    code, out, err = run_cli("lecture", "--only", "R9,R27", "--explain")
    assert code == 0, err
    for words in ("lecture-premise claims agree", "zero bubble", "Feistel", "switch radix", "derate", "discriminated"):
        assert words.lower() in out.lower(), words
    code, out, _ = run_cli("lecture", "--json", "--only", "R12")
    rows = json.loads(out)
    assert {r["kind"] for r in rows} == {"lecture", "real"}
    assert all({"tolerance", "ratio", "verdict", "reason"} <= set(r) for r in rows)


def test_lecture_plots_never_overwrite(tmp_path):
    d = tmp_path / "figs"
    d.mkdir()
    (d / "ch1-latency-cost-vs-batch.png").write_bytes(b"mine")
    code, _, err = run_cli("lecture", "--only", "R5", "--plots", str(d))
    assert code == 2 and "--force" in err
    assert (d / "ch1-latency-cost-vs-batch.png").read_bytes() == b"mine"


def test_reasoning_in_words_in_docs_and_explain(claims):
    """Issue 37 item 4: the lecture's reasoning, in its words and with timestamps, in docs/lecture.md (the same text
    `lecture --explain` prints) and the 2 + 4 split of 6·N·D in the user docs."""
    from pathlib import Path

    from rackmath.claims.reasoning import REASONING

    docs = Path(__file__).resolve().parents[1] / "docs"
    lec = (docs / "lecture.md").read_text()
    text = " ".join(t for _, t in REASONING)
    for quote in ("They're unique per batch", "read all of HBM twice", "the minimum tends to be where the costs are "
                  "equalized", "Pipelining is a massive hassle", "Horace He", "Ilya", "bend radius",
                  "That's a product decision", "cabling congestion", "genuine 4×"):
        assert quote in text, quote
        assert quote in lec, quote
    for stamp in ("00:12", "00:24", "01:19", "00:52", "00:35"):
        assert stamp in text
    # R20's note and the racks reasoning tell one story: NVL576 = 144 packages = 2× NVL72's 72, 4× its 144 dies
    r20 = _row(claims, "R20")
    assert "4× Blackwell's 144 dies" in r20.note and "2× its 72 packages" in r20.note
    assert "4× Blackwell's 144 dies" in text and "2× its 72 packages" in text
    train = (docs / "training.md").read_text()
    assert "## Why 6·N·D: 2 for the forward pass, 4 for the backward" in train and "Forward alone is 2" in train
