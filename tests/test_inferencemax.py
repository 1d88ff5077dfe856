"""InferenceMAX records, stack versions as an input, configurations never refused, reports by metric (issue 34).

Expected values are the rows' own numbers (reference/inferencemax/rows.jsonl, typed here by hand where used),
hand-derived memory arithmetic, or invariants — never the code's output.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from conftest import run_cli
from rackmath.analyses.fitting import crossval
from rackmath.analyses.fitting import validation
from rackmath.specs import records as R
from rackmath.specs import stacks as S

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def imx():
    return [r for r in R.shipped_records() if r.id.startswith("IMX-")]


# --------------------------------------------------------------------------------------
# The records
# --------------------------------------------------------------------------------------


def test_every_row_is_four_records_with_its_stack_version_and_the_stated_assumptions(imx):
    assert len(imx) == 4 * 345 and len({r.id for r in imx}) == 1380
    assert {r.metric_class for r in imx} == {"output tok/s/GPU", "TPOT", "TTFT", "TTFT median"}
    listed = set(S.known_labels())
    for r in imx:
        assert r.stack in listed, r.id  # framework@stack_version, a listed version (its container image)
        assert not r.fit and not r.fitted and r.status == "approximate" and r.group
        assert "reference/inferencemax/README.md" in r.source and "run_" in r.source
        assert any("0.9 × nominal" in a for a in r.assumptions)
        disagg = "decode_gpus" in r.inputs
        if r.metric_class == "output tok/s/GPU":
            assert r.metric == ("output_tok_s_per_decode_gpu" if disagg else "output_tok_s_per_gpu"), r.id
        if disagg:
            assert any("per DECODE GPU" in a for a in r.assumptions)
    by = {r.id: r for r in imx}
    # IMX-S000: DeepSeek-R1 NVFP4 on 4 × B200, SGLang 0.5.6 TP4 EP4, 1024/8192 at c4, 115.43 output tok/s/GPU
    r = by["IMX-S000-out"]
    assert r.value == pytest.approx(115.42567968948822) and r.stack == "sglang@0.5.6"
    assert r.inputs["isl"] == pytest.approx(0.9 * 1024) and r.inputs["osl"] == pytest.approx(0.9 * 8192)
    assert (r.inputs["gpus"], r.inputs["tp"], r.inputs["ep"], r.inputs["weights_dtype"]) == (4, 4, 4, "nvfp4")
    # IMX-S017: GB200 Dynamo-SGLang, 4 prefill + 8 decode GPUs, 2 decode workers of 4 with DP attention
    r = by["IMX-S017-out"]
    assert r.value == pytest.approx(62.56084213988763) and r.stack == "dynamo-sglang@0.5.5.post2"
    assert (r.inputs["prefill_gpus"], r.inputs["decode_gpus"], r.inputs["tp"], r.inputs["ep"]) == (4, 8, 4, 4)
    assert r.inputs["attention_dp"] is True and r.group == "dsr1-fp4 × gb200 × dynamo-sglang"


def test_every_shipped_inferencemax_record_is_predicted_finite_and_positive(imx):
    """No configuration of rows.jsonl is refused: every record is predicted (issue 34, Done when)."""
    for r in imx:
        p, info = validation.predict(r)
        assert math.isfinite(p) and p > 0, r.id


def test_a_disaggregated_record_reads_output_per_decode_gpu(imx):
    """Invariant: output per decode GPU = serve's output per GPU (over every GPU) × (P + D) / D."""
    r = next(x for x in imx if x.id == "IMX-S017-out")
    p, _ = validation.predict(r)
    d = validation._serve_dict(validation._key(validation.serve_kwargs(r)), "preset", False)
    assert p == pytest.approx(d["output_tok_s_per_gpu"] * 12 / 8, rel=1e-9)
    assert d["stack_version"] == "dynamo-sglang@0.5.5.post2"


#: Two rows of reference/inferencemax/rows.jsonl, typed here by hand (the fields the converter reads): IMX-S000
#: (aggregated) and IMX-S017 (disaggregated). The tests read no ../shared file.
ROW_S000 = dict(id="IMX-S000", hw="b200", framework="sglang", image="lmsysorg/sglang:v0.5.6-cu129-amd64",
                model="nvidia/DeepSeek-R1-0528-FP4-V2", infmax_model_prefix="dsr1", precision="fp4",
                spec_decoding="none", disagg=False, isl=1024, osl=8192, conc=4, tp=4, ep=4, dp_attention="false",
                output_tput_per_gpu=115.42567968948822, mean_ttft=0.19594112809281797,
                median_ttft=0.14996397960931063,
                mean_tpot=0.008511688570450279, mean_e2el=62.0010570729617, run="run_20621824084")
ROW_S017 = dict(id="IMX-S017", hw="gb200", framework="dynamo-sglang", image="lmsysorg/sglang:v0.5.5.post2",
                model="deepseek-ai/DeepSeek-R1", infmax_model_prefix="dsr1", precision="fp4", spec_decoding="none",
                disagg=True, isl=1024, osl=1024, conc=4, prefill_tp=1, prefill_ep=1, prefill_dp_attention="true",
                prefill_num_workers=1, decode_tp=1, decode_ep=1, decode_dp_attention="true", decode_num_workers=2,
                num_prefill_gpu=4, num_decode_gpu=8, output_tput_per_gpu=62.56084213988763,
                mean_ttft=0.22575995295774193, median_ttft=0.21467791497707367,
                mean_tpot=0.007488533579132299, mean_e2el=7.222042228467762,
                run="run_20413316138")


def _converter():
    import runpy
    from types import SimpleNamespace

    return SimpleNamespace(**runpy.run_path(str(ROOT / "benchmarks" / "convert_inferencemax.py"), run_name="imx"))


def test_the_length_and_per_decode_gpu_assumptions_on_two_rows():
    """Little's law, output tokens/s = C · mean OSL / mean E2E, on the rows' own numbers. S000 (aggregated, 4 GPUs):
    115.43 · 4 · 62.00 / (4 · 8192) = 0.874 of nominal (0.9 assumed: lengths drawn between 0.8× and 1×; all 238
    aggregated rows give 0.865–0.901, docs/stacks.md). S017 (4 prefill + 8 decode GPUs): 4 · 0.9 · 1024 / 7.222 =
    510.4 tok/s against 62.56 · 8 = 500.5 over the decode GPUs (2% apart) and 62.56 · 12 = 750.7 over every GPU."""
    r = ROW_S000
    assert r["output_tput_per_gpu"] * 4 * r["mean_e2el"] / (4 * 8192) == pytest.approx(0.874, abs=0.001)
    r = ROW_S017
    little = 4 * 0.9 * 1024 / r["mean_e2el"]
    assert little / (r["output_tput_per_gpu"] * 8) == pytest.approx(1.02, abs=0.005)
    assert little / (r["output_tput_per_gpu"] * 12) == pytest.approx(0.68, abs=0.005)


def test_the_converter_writes_what_is_shipped_for_two_rows(imx):
    """The converter's records of the two hand-typed rows equal the shipped ones (inputs, values, stack, group)."""
    conv = _converter()
    out = {r["id"]: r for r in conv.convert([ROW_S000, ROW_S017])}
    assert len(out) == 8
    shipped = {r.id: r for r in imx}
    for rid, rec in out.items():
        s = shipped[rid]
        assert rec["value"] == s.value and rec["metric"] == s.metric and rec["stack_version"] == s.stack_version
        assert rec["group"] == s.group and rec["fit"] is False and s.fit is False
        assert {k: v for k, v in rec.items() if k in R.INPUTS} == s.inputs, rid
    # S017's decode pool: 2 workers of 4 GPUs with DP attention → TP4 EP4 attention-DP; the prefill pool DEP4
    assert {k: out["IMX-S017-out"][k] for k in ("tp", "ep", "attention_dp", "prefill_tp", "prefill_ep")} == \
        dict(tp=4, ep=4, attention_dp=True, prefill_tp=4, prefill_ep=4)
    # the other length assumption: nominal lengths
    full = {r["id"]: r for r in conv.convert([ROW_S000], length_ratio=1.0)}
    assert full["IMX-S000-out"]["isl"] == 1024 and full["IMX-S000-out"]["osl"] == 8192


# --------------------------------------------------------------------------------------
# The stack version as an input
# --------------------------------------------------------------------------------------


def test_versions_order_and_resolve():
    assert S.version_key("1.2.0rc2") < S.version_key("1.2.0") < S.version_key("1.2.0.post1")
    assert S.version_key("0.5.6") < S.version_key("0.5.6.post1") < S.version_key("0.5.6.post2") < \
        S.version_key("0.5.7") < S.version_key("0.5.10")
    assert S.resolve("sglang@0.5.6")[1].label == "sglang@0.5.6"  # exact beats the 0.5.6.postN it prefixes
    assert S.resolve("vllm@0.13")[1].label == "vllm@0.13.0"
    assert S.resolve("trtllm@1.2")[1].label == "trtllm@1.2.0rc2"
    assert S.resolve("sglang")[1].label == "sglang@0.5.7-rocm700-mi35x"  # the newest listed
    # a ROCm build is a build of its own (its image tag is its version); a stack named without a version takes the
    # newest build for the chip's platform
    assert S.resolve("sglang", "cuda")[1].label == "sglang@0.5.6"
    assert S.resolve("sglang", "rocm")[1].label == "sglang@0.5.7-rocm700-mi35x"
    assert S.resolve("sglang@0.5.7")[1].label == "sglang@0.5.7-rocm700-mi35x"  # the only 0.5.7 listed
    assert S.resolve("sglang@0.5.5")[1].label == "sglang@0.5.5.post3-rocm700-mi35x"
    assert S.resolve("dynamo-trt")[1].label == "dynamo-trtllm@0.5.1-rc0.pre3"
    assert S.resolve("vllm-v0") == ("vllm-v0", None)  # an unversioned stack
    from rackmath.errors import InputError

    with pytest.raises(InputError, match="sglang@0.5.6"):
        S.resolve("sglang@0.4")


def test_a_records_stack_version_is_the_one_its_source_states():
    """stack_version is never invented: the version appears in the record's title or source (the published run's
    own words, or its container image); 2025 builds are versions of their own (sglang@0.4.2, vllm-v0@0.7.3 …)."""
    recs = R.shipped_records()
    versioned = [r for r in recs if r.stack_version]
    assert len(versioned) >= 1380 + 100
    for r in versioned:
        assert r.stack_version in r.title + r.source, r.id
    stacks = {r.stack for r in recs}
    assert {"sglang@0.4.2", "vllm-v0@0.7.3", "trtllm@0.17", "sglang@0.5.7", "trtllm@1.2.0rc2"} <= stacks


def test_every_listed_version_has_shipped_records():
    """`--framework STACK` means the newest version WITH records: every listed version has some."""
    have = {r.stack for r in R.shipped_records()}
    assert set(S.known_labels()) <= have


@pytest.mark.parametrize("given, label, engine", [("sglang@0.5.6", "sglang@0.5.6", "sglang"),
                                                  ("vllm@0.13", "vllm@0.13.0", "vllm"),
                                                  ("trtllm@1.2", "trtllm@1.2.0rc2", "trtllm"),
                                                  ("atom", "atom@0.1.1", "vllm"),
                                                  ("sglang", "sglang@0.5.6", "sglang")])  # on B200: the newest CUDA build
def test_serve_names_the_stack_version_in_its_header_and_json(given, label, engine):
    args = ("serve", "gpt-oss-120b", "-H", "hgx-b200", "--gpus", "1", "--tp", "1", "--isl", "1000", "--osl", "1000",
            "-c", "8", "--framework", given)
    code, out, err = run_cli(*args, "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["stack_version"] == label and d["framework"] == engine
    code, out, err = run_cli(*args)
    assert code == 0 and f"stack {label}" in out.splitlines()[0]


def test_an_unknown_version_is_one_line_listing_the_known_ones():
    code, out, err = run_cli("serve", "gpt-oss-120b", "-H", "hgx-b200", "--gpus", "1", "--isl", "1000", "--osl",
                             "1000", "-c", "8", "--framework", "vllm@0.6")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "framework" in err and "vllm@0.11.2" in err and "vllm@0.13.0" in err


# --------------------------------------------------------------------------------------
# Configurations that run in practice are never refused
# --------------------------------------------------------------------------------------


def test_sglang_dp_attention_with_ep_spelled_tp1_is_attention_dp_over_the_ep_ranks():
    """SGLang's DEP4, `--tp 1 --ep 4 --attention-dp`, is conventions.md's `--tp 4 --ep 4 --attention-dp`. DeepSeek-R1
    FP8 on 4 × GB200: weights 673 GB / 4 = 168 GB a GPU, more than 90% of 186 GB = 167.4 GB — fits = false, and by
    how much, predicted anyway."""
    base = ("serve", "deepseek-r1", "-H", "gb200-nvl72", "--gpus", "4", "--isl", "1024", "--osl", "1024", "-c", "64",
            "--framework", "sglang@0.5.6", "--json")
    code, out, err = run_cli(*base, "--tp", "1", "--ep", "4", "--attention-dp")
    assert code == 0, err
    d = json.loads(out)
    code, out2, err = run_cli(*base, "--tp", "4", "--ep", "4", "--attention-dp")
    d2 = json.loads(out2)
    assert (d["layout"]["tp"], d["layout"]["ep"], d["layout"]["attention_dp"]) == (4, 4, True)
    assert d["tpot_ms"] == pytest.approx(d2["tpot_ms"]) and any("SGLang's spelling" in n for n in d["notes"])
    hbm = 13.4e12 / 72 / 1e9  # GB200 NVL72: 13.4 TB over 72 GPUs
    assert d["fits"] is False and d["mem_short_gb"] >= 672.99 / 4 - 0.9 * hbm - 0.5
    assert math.isfinite(d["output_tok_s_per_gpu"]) and d["output_tok_s_per_gpu"] > 0
    assert any("GB short" in n and "predicted anyway" in n for n in d["notes"])


def test_deepseek_r1_fp8_on_four_b200_is_predicted_with_fits_false_and_the_shortfall():
    """4 × B200 (180 GB each): weights alone 672.99 GB / 4 = 168.2 GB > 0.9 × 180 = 162 GB, so at least 6.2 GB short,
    with or without --tp (the layout search no longer refuses when nothing fits)."""
    for extra in (("--tp", "4"), ()):
        code, out, err = run_cli("serve", "deepseek-r1", "-H", "hgx-b200", "--gpus", "4", "--isl", "1024", "--osl",
                                 "1024", "-c", "16", "--framework", "sglang", "--json", *extra)
        assert code == 0, err
        d = json.loads(out)
        assert d["fits"] is False and d["mem_short_gb"] >= 672.99 / 4 - 162.0 - 0.01
        assert math.isfinite(d["tpot_ms"]) and d["tpot_ms"] > 0
    code, out, err = run_cli("serve", "deepseek-r1", "-H", "hgx-b200", "--gpus", "4", "--tp", "4", "--isl", "1024",
                             "--osl", "1024", "-c", "16", "--framework", "sglang")
    assert code == 0 and "does NOT fit" in out and "GB short" in out


# --------------------------------------------------------------------------------------
# Validation by metric and by stack version; the two new folds
# --------------------------------------------------------------------------------------


def _row(i, mc, stack, chip, err):
    return {"id": i, "metric_class": mc, "stack": stack, "chip": chip, "source_group": "s", "error": err}


def test_metric_report_never_pools_metrics():
    rows = [_row("a", "TPOT", "sglang@0.5.6", "b200", 0.1), _row("b", "TPOT", "sglang@0.5.7", "b200", -0.3),
            _row("c", "TTFT", "sglang@0.5.6", "h200", 1.0), _row("d", "TPOT", "sglang@0.5.6", "h200", 0.5)]
    rep = validation.metric_report(rows)
    assert set(rep["summary_by_metric"]) == {"TPOT", "TTFT"}
    assert rep["summary_by_metric"]["TPOT"]["n"] == 3
    assert rep["summary_by_metric"]["TPOT"]["median_abs_error"] == pytest.approx(0.3)
    assert rep["by_metric_and_stack"]["TPOT"]["sglang@0.5.6"]["median_abs_error"] == pytest.approx(0.3)  # 0.1, 0.5
    assert rep["by_metric_and_chip"]["TTFT"]["h200"]["within_2x"] == 1  # +100% is 2×: within
    assert rep["counts"]["by_stack"] == {"sglang@0.5.6": 3, "sglang@0.5.7": 1}


def test_validate_reports_inferencemax_apart_by_metric_and_stack():
    v = validation.validate(recs=[r for r in R.shipped_records()
                                  if r.id.startswith(("IMX-S000-", "IMX-S017-", "T1-"))])
    nf = v["not_fitted"]
    assert nf["summary"]["n"] == 8 and v["counts"]["not_fitted"] == 8
    assert set(nf["summary_by_metric"]) == {"output tok/s/GPU", "TPOT", "TTFT", "TTFT median"}
    assert set(nf["by_metric_and_stack"]["TPOT"]) == {"sglang@0.5.6", "dynamo-sglang@0.5.5.post2"}
    assert all(not r.startswith("IMX") for r in {x["id"] for x in v["records"] if x["fitted"]})


from test_validate import SPEC, Syn, _syn_predictor  # noqa: E402  (the synthetic fitting problem)


@pytest.fixture()
def syn_stacked():
    """test_validate's synthetic records with a stack version and an InferenceMAX group each (z1, z2: no group)."""
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class SynS(Syn):
        stack: str = "x@1"
        group: str | None = None
        metric_class: str = "TPOT"
        chip: str = "c"

    true = {"A": 0.5, "B": 0.25}
    rows = [("a1", "s1", "A", "m1", 1.0, "sglang@0.5.6", "g1"), ("a2", "s1", "A", "m2", 2.0, "sglang@0.5.6", "g1"),
            ("a3", "s2", "A", "m1", 4.0, "vllm@0.13.0", "g2"), ("b1", "s3", "B", "m1", 1.0, "vllm@0.13.0", "g3"),
            ("b2", "s3", "B", "m2", 3.0, "sglang@0.5.6", "g3"), ("z1", "s1", "A", "m2", 0.0, "vllm@0.13.0", None),
            ("z2", "s3", "A", "m1", 0.0, "sglang@0.5.6", None)]
    return [SynS(i, w / true[f] + 0.1, s, f, m, w, stack=st, group=g) for i, s, f, m, w, st, g in rows]


def test_leave_one_stack_version_and_one_group_out_folds(syn_stacked):
    cv = crossval.cross_validate(syn_stacked, SPEC, predictor=_syn_predictor, schemes=("stack", "group"))
    st = cv["stack"]
    assert [f["group"] for f in st["folds"]] == ["sglang@0.5.6", "vllm@0.13.0"]
    assert [f["held_out"] for f in st["folds"]] == [["a1", "a2", "b2", "z2"], ["a3", "b1", "z1"]]
    gr = cv["group"]
    # records without a group (z1, z2) are never held out: they always train
    assert [f["held_out"] for f in gr["folds"]] == [["a1", "a2"], ["a3"], ["b1", "b2"]]
    assert {r["id"] for r in gr["records"]} == {"a1", "a2", "a3", "b1", "b2"}
    # holding g3 out leaves no family-B record, so B is predicted with the cross-family fit (on A: η = 0.5, 0.1):
    by = {r["id"]: r for r in gr["records"]}
    for rid, w in (("b1", 1.0), ("b2", 3.0)):
        assert by[rid]["error"] == pytest.approx((w / 0.5 + 0.1) / (w / 0.25 + 0.1) - 1, rel=1e-6)
    assert by["a1"]["error"] == pytest.approx(0.0, abs=1e-9)
    assert set(gr["by_metric"]["summary_by_metric"]) == {"TPOT"}
    assert cv["counts"]["records_by_stack"] == {"sglang@0.5.6": 4, "vllm@0.13.0": 3}
    assert set(cv["counts"]["params_by_stack"]["sglang@0.5.6"]) <= {p.name for p in SPEC.params}


def test_cv_cli_accepts_the_new_schemes_and_with_unfitted_needs_cv():
    code, out, err = run_cli("validate", "--with-unfitted")
    assert code == 2 and "with_unfitted" in err
    code, out, err = run_cli("validate", "--cv", "--scheme", "stack,bogus")
    assert code == 2 and "stack" in err and "group" in err


# --------------------------------------------------------------------------------------
# Measured kernel curves (aiconfigurator-core tables, reduced)
# --------------------------------------------------------------------------------------


def test_kernel_curves_name_their_source_and_respect_the_chips_peaks():
    """Every shipped curve names its package, version, table and the stack version that measured it; the measured
    numbers stay under the catalog's peaks: a GEMM's FLOP/s under the chip's dense peak of its dtype, an M = 1 GEMM
    of 8192 × 8192 (larger than any L2) no faster than streaming its weights from HBM, a large all-reduce's bus
    bandwidth 2(n−1)/n · bytes / t within 10% of the scale-up link (per direction)."""
    from rackmath.specs.hardware import load_chip
    from rackmath.specs.kernels import DIR, kernel_table

    files = sorted(DIR.glob("*.toml"))
    assert {f.stem for f in files} >= {"h100", "h200", "b200", "gb200"}
    assert (DIR / "NOTICE-aiconfigurator.md").exists() and (DIR / "LICENSE-Apache-2.0.txt").exists()
    assert (DIR / "NOTICE-aiter.md").exists()
    peak_dtype = {"bf16": "bf16", "fp8": "fp8", "fp8_block": "fp8", "nvfp4": "fp4", "mxfp4": "fp4"}
    wbytes = {"bf16": 2.0, "fp8": 1.0, "fp8_block": 1.0, "nvfp4": 0.5, "mxfp4": 0.5}
    for f in files:
        chip, t = load_chip(f.stem), kernel_table(f.stem)
        aiter = t["meta"]["package"] == "amd-aiter"  # AMD's tuned-kernel tables: GEMMs, the floor and MoE only
        assert (t["meta"]["package"], t["meta"]["license"]) in (("aiconfigurator-core", "Apache-2.0"),
                                                                ("amd-aiter", "MIT"))
        system = t["meta"]["system"]
        ops = {c["op"] for c in t["curves"]}
        assert ops >= ({"gemm", "kernel_floor"} if aiter else {"gemm", "kernel_floor", "attention_decode",
                                                                "all_reduce"}), f.stem
        for c in t["curves"]:
            where = "aiter/configs/" if aiter else f"systems/data/{system}/"
            assert c["table"].startswith(where) and c["framework_version"], (f.stem, c["name"])
            if c["op"] == "gemm" and c["dtype"] in peak_dtype:
                assert max(c["flops_per_s"]) <= chip.peak_flops(peak_dtype[c["dtype"]]) * 1.001, (f.stem, c["name"])
                if c["n"] == c["k"] == 8192:
                    assert c["time_s"][0] >= 8192 * 8192 * wbytes[c["dtype"]] / (chip.hbm_bw * 1.1), f.stem
            if c["op"] == "all_reduce" and c["gpus"] <= 8 and chip.name != "l40s":  # L40S: PCIe, no NVLink domain
                n, b, s = c["gpus"], c["x_values"][-1], c["time_s"][-1]
                assert 2 * (n - 1) / n * b / s <= chip.scaleup_bw * 1.1, (f.stem, c["name"])


def test_hardware_show_names_the_measured_curves_provenance():
    code, out, err = run_cli("hardware", "show", "h200", "--json")
    assert code == 0, err
    k = json.loads(out)["measured_kernels"]
    assert k["measured"] and k["package"] == "aiconfigurator-core" and k["package_version"] == "0.12.0"
    assert k["license"] == "Apache-2.0" and "trtllm@1.3.0rc20" in k["measured_with"] and k["ops"]["gemm"] >= 2
    code, out, err = run_cli("hardware", "show", "mi300x", "--json")
    k = json.loads(out)["measured_kernels"]
    assert {x: k[x] for x in ("measured", "note")} == {"measured": False, "note": "none measured: vendor figures and "
                                                       "the serving records only (aiconfigurator-core measures "
                                                       "NVIDIA GPUs only; AITER's shipped tables measure MI355X's, "
                                                       "and only DeepSeek's small GEMMs on gfx942)"}
    assert k["efficiency_measured"].startswith("no measured kernel curves for mi300x: the silicon of its fitted "
                                               "preset amd-serving")
    code, out, err = run_cli("hardware", "show", "mi355x", "--json")  # AITER's curves; its MLA kernel scale inferred
    k = json.loads(out)["measured_kernels"]
    assert k["measured"] is True and k["package"] == "amd-aiter" and k["license"] == "MIT"
    assert set(k["inferred"]) >= {"mla_kernel_scale", "source"} and "kernel_latency_s" not in k["inferred"]
    code, out, err = run_cli("hardware", "show", "gb200-nvl72", env={"COLUMNS": "400"})
    assert code == 0 and "aiconfigurator-core 0.12.0 (Apache-2.0)" in out


def _mine(rid, stack, version, value) -> dict:
    """One user record of Llama 3.1 8B on one H100 under ``stack@version`` (fit = false, with a group)."""
    return dict(id=rid, title=f"Llama 3.1 8B on one H100, my {stack} {version} run, c16", metric="tpot_s",
                value=value, status="measured", source="my lab notebook", source_group="my-lab", framework=stack,
                stack_version=version, group=f"llama × h100 × {stack}", fit=False, model="llama-3.1-8b",
                hardware="h100", gpus=1, tp=1, isl=1000, osl=1000, concurrency=16)


MINE = "\n".join("[[record]]\n" + "".join(f"{k} = {R.toml_value(v)}\n" for k, v in rec.items())
                  for rec in (_mine("a-tpot", "sglang", "0.5.6", 0.007), _mine("b-tpot", "vllm", "0.13.0", 0.008)))


def test_cv_cli_on_user_records_with_stack_versions_and_groups(tmp_path):
    """The new record fields through the CLI: fit = false records are left out of --cv unless --with-unfitted (the
    group scheme then says why it has nothing), and fitted and held out with it: one fold per stack version and per
    group."""
    (tmp_path / "mine.toml").write_text(MINE)
    base = ("validate", "--records", str(tmp_path), "--only-records", "--cv", "--json", "--scheme", "stack,group")
    code, out, err = run_cli(*base)
    assert code == 2 and "records" in err  # no fitted record at all
    code, out, err = run_cli(*base, "--with-unfitted")
    assert code == 0, err
    d = json.loads(out)
    assert [f["group"] for f in d["stack"]["folds"]] == ["sglang@0.5.6", "vllm@0.13.0"]
    assert [f["group"] for f in d["group"]["folds"]] == ["llama × h100 × sglang", "llama × h100 × vllm"]
    assert d["counts"]["records_by_stack"] == {"sglang@0.5.6": 1, "vllm@0.13.0": 1}
    assert "sched_sglang_s" in d["counts"]["params_by_stack"]["sglang@0.5.6"]
    assert set(d["stack"]["by_metric"]["summary_by_metric"]) == {"TPOT"}
    (tmp_path / "mine.toml").write_text("\n".join(x for x in MINE.splitlines()
                                                if not x.startswith(("fit =", "group ="))))
    code, out, err = run_cli(*base)  # fitted, no groups: the group scheme says why it predicts nothing
    assert code == 0, err
    assert json.loads(out)["group"]["not_predictable"][0]["reason"].startswith("no fitted record has a group")
    (tmp_path / "mine.toml").write_text(MINE)
    code, out, err = run_cli("validate", "--records", str(tmp_path), "--only-records", "--json")
    v = json.loads(out)
    assert v["counts"]["not_fitted"] == 2 and v["not_fitted"]["summary"]["n"] == 2
    assert set(v["not_fitted"]["by_metric_and_stack"]["TPOT"]) == {"sglang@0.5.6", "vllm@0.13.0"}


def test_validate_says_whether_the_inferencemax_rows_are_in_sample():
    """The presets were not fitted on the fit = false rows (out of sample); --efficiency measured's stack times per
    version were (in sample): the by-metric tables say which."""
    ids = "IMX-S000-out,IMX-S000-tpot,IMX-S000-ttft,IMX-S000-ttft-median"
    code, out, err = run_cli("validate", "--id", ids)
    assert code == 0, err
    out = " ".join(out.split())  # titles wrap at the terminal's width
    assert "out of sample: presets not fitted on them" in out and "in sample: --efficiency measured" not in out
    code, out, err = run_cli("validate", "--id", ids, "--efficiency", "measured")
    assert code == 0, err
    out = " ".join(out.split())
    assert "in sample: --efficiency measured" in out and "presets not fitted" not in out
    assert "TTFT median" in out
