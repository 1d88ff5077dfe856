"""Validation records as catalog data, `rackmath validate`, the generic fitter and out-of-group cross-validation.

Expected values are published figures (reference/published.md §1, typed here by hand) or hand-derived answers of
synthetic problems, never the code's own output.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np
import pytest

from conftest import run_cli
from rackmath.analyses.fitting import calibration
from rackmath.analyses.fitting import cache
from rackmath.analyses.fitting import crossval
from rackmath.analyses.fitting import validation
from rackmath.errors import CatalogError, InputError
from rackmath.specs import records as R


@pytest.fixture(scope="module")
def recs():
    return R.shipped_records()


@pytest.fixture(scope="module")
def result():
    return validation.validate()


# --------------------------------------------------------------------------------------
# The shipped records
# --------------------------------------------------------------------------------------


def test_shipped_records_parse_and_cover_sources_chips_models(recs):
    ids = [r.id for r in recs]
    assert len(ids) == len(set(ids)) and len(ids) >= 190
    fitted = [r for r in recs if r.fitted]
    assert {r.hardware_family for r in fitted} == {"hopper", "blackwell", "amd", "tpu"}
    assert {r.model_family for r in fitted} >= {"deepseek", "qwen", "llama", "gpt-oss", "kimi", "palm"}
    assert len({r.source_group for r in fitted}) >= 25
    assert {r.framework for r in fitted} >= {"trtllm", "vllm", "sglang", "atom", "jax"}
    assert {r.chip for r in fitted} >= {"h100", "h200", "h800", "b200", "gb200", "mi300x", "mi355x", "tpu-v4",
                                         "tpu-v6e"}
    for r in recs:
        assert r.source and r.source_group and r.status in R.STATUSES
        # every shipped record names where it is written up (InferenceMAX: reference/inferencemax/README.md)
        assert "published.md" in r.source or "reference/inferencemax/README.md" in r.source
        if r.status == "approximate":  # an approximate record says why
            assert r.assumptions
    assert {r.id for r in recs if r.exclude} == {"C10-c1-eagle-tpot", "C14-c1-tpot", "C36-c1-out", "C37-c1-out"}
    assert {r.id for r in recs if r.status == "derived"} == {"SB2", "SB6"}


def test_arrivals_follow_one_rule(recs):
    """Lock-step waves exactly where every client starts together with identical requests (docs/validation.md); the
    InferenceMAX client (10 × conc prompts, --max-concurrency conc, lengths that differ) is closed-loop."""
    waves_groups = {"dstack-deepseek-r1", "amd-rocm-vllm", "oci-mi300x", "trtllm-h100", "trtllm-h200", "trtllm-b200",
                    "trtllm-gb200", "vllm-recipes-kimi-k2", "vllm-pr-16458"}
    for r in recs:
        if r.kind != "serve":
            assert "arrivals" not in r.inputs, r.id
            continue
        one = r.inputs["concurrency"] == 1
        want = "waves" if one or r.source_group in waves_groups else "steady"
        if r.source_group.startswith("inferencemax-"):
            want = "closed-loop"
        assert r.inputs.get("arrivals", "steady") == want, r.id


def test_launch_token_budgets_reach_serve(recs):
    """A token budget the source's launch sets (max_num_tokens) is passed to serve, not the stack's default."""
    by = {r.id: r for r in recs}
    assert validation.serve_kwargs(by["C40-out"])["max_num_tokens"] == 512  # --max-num-batched-tokens 512
    assert validation.serve_kwargs(by["C4-c4-ttft"])["max_num_tokens"] == 16384  # trtllm-serve --max_num_tokens
    assert "max_num_tokens" not in validation.serve_kwargs(by["C6-1k1k-c1-tpot"])  # not stated: the stack default


def test_measured_values_are_the_published_ones(recs):
    """Each value as published.md prints it (SI units), not as rackmath computes it."""
    by = {r.id: r for r in recs}
    expect = {
        "T1-H100": 6378 / 2, "T5-B200": 8020 / 4, "T11-H100": 9677 / 8, "T10-B200": 42391 / 8,  # §1e totals ÷ GPUs
        "M1": 24524.9 / 8, "M2-tpot": 0.155, "M2-ttft": 0.276,  # §1d
        "P4": 0.29, "P7": 0.09375, "D-prefill": 73.7e3 / 8, "D-decode": 1 / 21,  # §1a, §1b
        "AMD1": 13212.5 / 8, "AMD8": 2153.7 / 8, "AMD-lat-b2": 17.934, "OCI5": 4.375, "OCI9": 17.750,  # §1h
        "C1-c128-tpot": 0.10907, "C4-c128-out": 835.20 / 8, "C32-10k1k-c32-tpot": 0.02144,  # §1i
        "C33-c1-tpot": 0.00231, "C23-decode": 24000 / 8, "C40-out": 945.80,
    }
    for rid, v in expect.items():
        assert by[rid].value == pytest.approx(v, rel=1e-5), rid


def test_variable_length_records_use_the_runs_token_totals(recs):
    by = {r.id: r for r in recs}
    c7 = by["C7-8k1k-c64-tpot"]  # 320 prompts = 1,273,893 in / 169,680 out (published.md C7)
    assert (c7.inputs["isl"], c7.inputs["osl"]) == (round(1273893 / 320), round(169680 / 320))
    assert c7.status == "approximate" and any("token totals" in a for a in c7.assumptions)
    c1 = by["C1-c4-tpot"]  # --random-range-ratio 1: fixed 3200/800, measured
    assert (c1.inputs["isl"], c1.inputs["osl"], c1.status) == (3200, 800, "measured")


def test_trtllm_records_keep_their_layout_and_framework(recs):
    by = {r.id: r for r in recs}
    assert by["T5-H100"].inputs["tp"] == 8 and by["T5-H100"].framework == "trtllm"
    assert by["C4-c128-tpot"].inputs["ep"] == 4 and by["C5-c4-tpot"].inputs["attention_dp"] is True
    assert by["C12-c1-eagle-tpot"].inputs["mtp"] == 3 and by["C12-c1-eagle-tpot"].inputs["acceptance"] == 2.46
    # Pope et al. Table 2: P6 ran XYZ weight-gathered, P4, P5 and P7 2D weight-stationary
    assert by["P6"].inputs["weight_layout"] == "gathered"
    assert all(by[p].inputs["weight_layout"] == "2d" for p in ("P4", "P5", "P7"))


def test_weight_gathered_p6_is_compute_bound_and_faster_than_tp64(recs):
    """P6 (512 × 2,048 tokens, 85.2 s at 76 % MFU): in its published layout the pass is compute-bound and the
    all-gathers (3.9 s at the link rate) replace 118 activation all-reduces of 38.7 GB (33 s)."""
    from dataclasses import replace

    p6 = next(r for r in recs if r.id == "P6")
    wg, info = validation.predict(p6)
    ws, info_ws = validation.predict(replace(p6, inputs={k: v for k, v in p6.inputs.items()
                                                         if k != "weight_layout"}))
    assert info["bottleneck"] == "compute"
    assert wg < ws / 1.25
    assert 0.5 < wg / 85.2 < 2.0


# --------------------------------------------------------------------------------------
# Schema: one-line errors naming the file, the record and the field
# --------------------------------------------------------------------------------------

GOOD = dict(id="x1", title="t", metric="tpot_s", value=0.01, status="measured", source="me", source_group="lab",
            model="llama-3.1-8b", hardware="h100", gpus=1, isl=100, osl=100, concurrency=4)


def _err(**change) -> str:
    t = {**GOOD, **change}
    t = {k: v for k, v in t.items() if v is not None}
    with pytest.raises(CatalogError) as ei:
        R.parse_record(t, "mine.toml", 3)
    msg = str(ei.value)
    assert "\n" not in msg and msg.startswith("mine.toml: record[3]")
    return msg


def test_the_older_weight_gathered_spelling_is_read_as_the_gathered_layout():
    pre = dict(GOOD, kind="prefill", metric="prefill_s", model="llama-3.1-70b", batch=64)
    del pre["osl"], pre["concurrency"]
    assert R.parse_record(dict(pre, weight_gathered=True), "mine.toml", 0).inputs["weight_layout"] == "gathered"
    assert R.parse_record(dict(pre, weight_gathered=True, weight_layout="gathered"), "mine.toml", 0) \
        .inputs["weight_layout"] == "gathered"
    assert "weight_layout" not in R.parse_record(dict(pre, weight_gathered=False), "mine.toml", 0).inputs
    assert R.parse_record(dict(pre, weight_layout="2d"), "mine.toml", 0).inputs["weight_layout"] == "2d"


def test_schema_errors_are_one_line_and_name_the_field():
    m = _err(isll=5)
    assert ".isll: unknown field; did you mean 'isl'?" in m
    assert ".value:" in _err(value=-1) and ".value:" in _err(value="fast") and ".value:" in _err(value=float("nan"))
    assert ".gpus:" in _err(gpus=1.5) and ".gpus:" in _err(gpus=True)
    assert ".source_group: missing" in _err(source_group=None)
    assert ".metric: 'prefill_s' is not a metric of kind = 'serve'" in _err(metric="prefill_s")
    assert ".status:" in _err(status="guess")
    assert ".framework:" in _err(framework="tensorrt")
    assert ".concurrency:" in _err(concurrency="lots")
    assert ".kv_dtype:" in _err(kv_dtype="fp7")
    assert ".batch: not used by kind = 'serve'" in _err(batch=8)
    assert ".weight_gathered: not used by kind = 'serve'" in _err(weight_gathered=True)
    assert ".weight_layout: not used by kind = 'serve'" in _err(weight_layout="2d")
    pre = dict(kind="prefill", metric="prefill_s", osl=None, concurrency=None)
    assert ".weight_gathered: mixtral-8x7b is a mixture of experts" in _err(model="mixtral-8x7b", weight_gathered=True,
                                                                            **pre)
    assert ".weight_layout: mixtral-8x7b is a mixture of experts" in _err(model="mixtral-8x7b", weight_layout="2d",
                                                                          **pre)
    assert ".weight_layout: '3d'" in _err(weight_layout="3d", **pre)
    assert ".weight_gathered: true contradicts weight_layout = '2d'" in _err(weight_layout="2d", weight_gathered=True,
                                                                             **pre)
    assert ".acceptance:" in _err(mtp=1, acceptance=3.5)
    assert ".model: unknown model 'llama-9'" in _err(model="llama-9")
    assert ".hardware: unknown" in _err(hardware="h900")
    assert ".context: missing" in _err(kind="step", metric="step_s", batch=4, isl=None, osl=None, concurrency=None)
    assert ".id:" in _err(id="bad id with spaces")


def test_duplicate_ids_and_unknown_tables_are_refused(tmp_path):
    with pytest.raises(CatalogError, match=r"record\[1\] 'x1'\.id: duplicate id"):
        R.parse_records({"record": [GOOD, GOOD]}, "f.toml")
    with pytest.raises(CatalogError, match="unknown table"):
        R.parse_records({"records": [GOOD]}, "f.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[[record]]\nid = \n")
    with pytest.raises(CatalogError, match="malformed TOML"):
        R.read_records_file(bad)


def test_excluded_records_need_no_catalog_names():
    r = R.parse_record({**GOOD, "hardware": "h20", "exclude": "not in the catalog"}, "f.toml")
    assert r.exclude and not r.fitted and r.chip == ""


def test_record_toml_round_trip(recs):
    import tomllib

    for r in recs:
        back = R.parse_records(tomllib.loads(r.to_toml()), r.path)[0]
        assert back == r, r.id


def test_families():
    assert [R.hardware_family(c) for c in ("h800", "gb200", "mi355x", "tpu-v6e")] == \
        ["hopper", "blackwell", "amd", "tpu"]
    assert [R.model_family(m) for m in ("deepseek-v3.2", "qwen2.5-72b", "llama-4-maverick", "gpt-oss-20b",
                                         "kimi-k2")] == ["deepseek", "qwen", "llama", "gpt-oss", "kimi"]


# --------------------------------------------------------------------------------------
# Prediction
# --------------------------------------------------------------------------------------


def test_every_record_predicted_with_a_signed_error(result):
    assert result["counts"]["excluded"] == 4 and result["counts"]["derived"] == 2
    assert result["summary"]["n"] == result["counts"]["fitted"] >= 190
    for r in result["records"]:
        assert r["error"] == pytest.approx(r["predicted"] / r["measured"] - 1.0)
        assert r["predicted"] > 0
    s = result["summary"]
    assert s["within_2x"] <= s["n"] and s["worst_ratio"] >= 1
    assert set(result["summary_by_hardware_family"]) == {"hopper", "blackwell", "amd", "tpu"}


def test_scaling_book_records_keep_their_stated_efficiency(result):
    by = {r["id"]: r for r in result["records"]}
    # SB2: 112 GB / (8 × 8.1e11 B/s) = 17.3 ms on the ideal roofline (published.md SB2: "≈ 17 ms")
    assert by["SB2"]["predicted"] == pytest.approx(0.0173, rel=0.05)
    # SB6: 2 · 70e9 · 8192 / (16 · 1.97e14 · 0.4) = 0.91 s at the stated 40% MFU; rackmath counts the model's
    # 70.6e9 parameters plus attention FLOPs, so a few percent above
    assert by["SB6"]["predicted"] == pytest.approx(0.91, rel=0.35)


def test_predict_many_equals_predict_for_every_record(recs):
    """The vectorized prediction (one engine call for K efficiencies) is the public serve() one, record by record."""
    from rackmath.engine.efficiency import Efficiency

    rng = np.random.default_rng(7)
    X = np.column_stack([rng.uniform(0.05, 1.0, (2, 3)), rng.uniform(0.0, 0.05, 2)])
    for rec in recs:
        if rec.exclude or rec.efficiency is not None:
            continue
        many = validation.predict_many(rec, X, calibration.PARAMS)
        one = [validation.predict(rec, efficiency=Efficiency("fit", *x))[0] for x in X]
        assert many == pytest.approx(one, rel=1e-9), rec.id
    # every record is vectorized: a serving record's plan (its layout, chosen once when not given) is memoised and
    # serving.evaluate(plan, efficiency) broadcasts the efficiency's fields
    assert {r.id for r in recs if not r.exclude and r.efficiency is None and not validation.vectorizable(r)} == set()


def test_max_load_rule_is_memory_or_the_cap():
    c = validation.max_load_concurrency("llama-3.3-70b", "hgx-h200", gpus=1, tp=1, isl=1000, osl=1000,
                                        weights_dtype="fp8", kv_dtype="fp8")
    # 0.9 × 141 GB − 70.6 GB of weights, over 1,500 tokens × 163,840 B (FP8 KV)
    assert c == pytest.approx((0.9 * 141e9 - 70.6e9) / (1500 * 163840), rel=0.03)
    assert validation.max_load_concurrency("llama-3.1-8b", "hgx-h200", gpus=1, tp=1, isl=128, osl=128,
                                           weights_dtype="fp8", kv_dtype="fp8") == 2048
    assert validation.max_load_concurrency("llama-3.1-8b", "hgx-h200", gpus=1, tp=1, isl=128, osl=128,
                                           weights_dtype="fp8", kv_dtype="fp8", max_batch=512) == 512
    # TensorRT-LLM admits a request only with KV blocks for its whole ISL + OSL (GUARANTEED_NO_EVICT, trtllm-bench's
    # default): 2,000 tokens a sequence instead of 1,500
    t = validation.max_load_concurrency("llama-3.3-70b", "hgx-h200", gpus=1, tp=1, isl=1000, osl=1000,
                                        weights_dtype="fp8", kv_dtype="fp8", framework="trtllm")
    assert t == pytest.approx((0.9 * 141e9 - 70.6e9) / (2000 * 163840), rel=0.03)
    assert validation.max_load_concurrency("llama-3.3-70b", "hgx-h200", gpus=1, tp=1, isl=1000, osl=1000,
                                           weights_dtype="fp8", kv_dtype="fp8", framework="vllm") == c


def test_validate_explains_a_record_and_every_printed_step_reproduces_it():
    """``rackmath validate --id … --explain``: the derivation of each selected record's prediction (serve's, or the
    single pass's layout derivation), then predicted, measured and their ratio; ``check()`` replays every step that
    states its computation. One record of each kind and several metrics."""
    recs = validation.records()
    for rid in ("C3-c8-ttft", "T11-B200", "C12-c1-eagle-tpot", "P4", "P5", "P6", "D-prefill", "AMD-lat-b1"):
        rec = validation.select(recs, [rid])[0]
        d = validation.explain(rec)
        assert d.check() == [], rid
        by = {st.symbol: st.value for st in d.steps}
        pred = validation.predict(rec)[0]
        assert by["predicted"] == pytest.approx(pred, rel=1e-12) and by["measured"] == rec.value
        assert by["ratio"] == pytest.approx(pred / rec.value, rel=1e-12)
    assert [r.id for r in validation.select(recs, ["P*"])] == ["P5", "P7", "P4", "P6"]
    code, out, err = run_cli("validate", "--id", "P4,C3-c8-ttft", "--explain")
    assert code == 0, err
    assert out.count("ratio = predicted / measured") == 2 and "outside 2×" in out and "X = 4, YZ = 16" in out
    code, out, err = run_cli("validate", "--id", "C3-c8-*", "--json")
    assert code == 0 and {r["id"] for r in json.loads(out)["records"]} == {"C3-c8-tpot", "C3-c8-out", "C3-c8-ttft"}
    for args, field in ((("--id", "C9"), "id: no record matches 'C9'"), (("--explain",), "explain: --explain without"),
                        (("--id", "C10-c1-eagle-tpot", "--explain"), "id: only excluded records"),
                        (("--id", "P4", "--cv"), "id: --id with --cv"), (("--id", " , "), "id:")):
        code, out, err = run_cli("validate", *args)
        assert code == 2 and field in err and len(err.strip().splitlines()) == 1, (args, err)


def test_serve_holds_tensorrt_llms_kv_for_the_whole_request():
    """``serve --framework trtllm`` sizes memory as TensorRT-LLM admits: each sequence holds KV for ISL + OSL, not the
    mean context. Llama 3.1 8B (32 layers × 8 KV heads × 128 × 2 × 2 B = 131,072 B a token, BF16) on one H100 at
    1,000 + 1,000 tokens and C = 100: 100 × 131,072 B × (2,000 − 1,500) = 6.5536 GB more per GPU; the largest C
    falls by 1,500/2,000 (same room). The step reads the same KV either way (the mean context)."""
    from rackmath import serve

    kw = dict(gpus=1, tp=1, isl=1000, osl=1000, concurrency=100)
    v, t = (serve("llama-3.1-8b", "h100", framework=f, **kw) for f in ("vllm", "trtllm"))
    assert t.mem_per_gpu_gb - v.mem_per_gpu_gb == pytest.approx(100 * 131072 * 500 / 1e9, rel=1e-9)
    assert abs(t.max_concurrency - v.max_concurrency * 1500 / 2000) < 1
    assert t.t_kv_ms == pytest.approx(v.t_kv_ms, rel=1e-12)
    assert any("ISL + OSL = 2,000 tokens" in n for n in t.notes) and not any("ISL + OSL =" in n for n in v.notes)


# --------------------------------------------------------------------------------------
# The generic fitter and cross-validation, on a synthetic problem with a known answer
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Syn:
    id: str
    value: float
    source_group: str
    hardware_family: str
    model_family: str
    work: float
    status: str = "measured"
    fitted: bool = True


def _syn_predictor(rec, X, names):
    # time = work / η + overhead: η per family, overhead shared
    return rec.work / X[:, 0] + X[:, 1]


SPEC = calibration.ParamSpec((calibration.Param("eta", 0.05, 1.0, 0.6, 0.4),
                              calibration.Param("ovh", 0.0, 1.0, 0.5, 0.4, per_family=False)), rounds=6, sweeps=20)
TRUE = {"A": 0.5, "B": 0.25}
OVH = 0.1


def _syn_records():
    # z1, z2 have no work: their time is the overhead alone (they pin the shared parameter in every fold)
    rows = [("a1", "s1", "A", "m1", 1.0), ("a2", "s1", "A", "m2", 2.0), ("a3", "s2", "A", "m1", 4.0),
            ("b1", "s3", "B", "m1", 1.0), ("b2", "s3", "B", "m2", 3.0), ("z1", "s1", "A", "m2", 0.0),
            ("z2", "s3", "B", "m1", 0.0)]
    return [Syn(i, w / TRUE[f] + OVH, s, f, m, w) for i, s, f, m, w in rows]


def test_fit_recovers_known_per_family_and_shared_parameters():
    f = calibration.fit(_syn_records(), SPEC, predictor=_syn_predictor)
    assert f.values == {("eta", "A"): 0.5, ("eta", "B"): 0.25, ("ovh", None): 0.1}
    assert f.n_params == 3 and f.objective == pytest.approx(0.0, abs=1e-12)
    assert f.as_dict()["per_family"] == {"A": {"eta": 0.5}, "B": {"eta": 0.25}}
    from dataclasses import replace

    g = calibration.fit(_syn_records(), replace(SPEC, weighting="source"), predictor=_syn_predictor)
    assert g.values == f.values  # consistent data: the weighting changes nothing


def test_a_parameter_fitted_for_some_families_holds_its_start_elsewhere():
    """Param.families: η fitted for family B only; A keeps x0 = 0.6 (its records then misfit: w/0.6 + 0.1 against
    w/0.5 + 0.1), B recovers 0.25; 2 fitted parameters, not 3; the cross-family fit holds η at x0 too, and the counts
    line names the restriction."""
    from dataclasses import replace

    spec = replace(SPEC, params=(replace(SPEC.params[0], families=("B",)), SPEC.params[1]))
    f = calibration.fit(_syn_records(), spec, predictor=_syn_predictor)
    assert f.values[("eta", "A")] == 0.6 and f.values[("eta", "B")] == pytest.approx(0.25, abs=1e-3)
    assert f.n_params == 2 and spec.describe()[0]["sharing"] == "per family (B only)"
    c = f.cross_family()
    assert c.values[("eta", None)] == 0.6 and c.n_params == 1
    cv = crossval.cross_validate(_syn_records(), spec, predictor=_syn_predictor, schemes=("source",))
    assert cv["counts"]["fitted_params"] == 2 and cv["counts"]["params_per_family"] == 0
    assert calibration.describe_counts(cv["counts"]) == (
        "2 fitted parameters (0 per hardware family × 2 families + eta for B only + 1 shared) on 7 records from 3 "
        "independent sources, 2 model families")


def test_source_weighting_decides_between_disagreeing_sources():
    """ParamSpec.weighting: the loss is an L1 in log space, so the fit is a weighted median of the records. Source s1
    has 4 records at 1.0, sources s2–s4 one record each at 1.2: per record 4 > 3 (→ 1.0); weighted 1/sqrt(n) a
    record, s1 weighs 4/2 = 2 < 3 (→ 1.2); weighted 1/n, 1 < 3 (→ 1.2)."""
    from dataclasses import replace

    recs = [Syn(f"a{i}", 1.0, "s1", "A", "m1", 0.0) for i in range(4)] + \
           [Syn(f"b{i}", 1.2, f"s{i + 2}", "A", "m1", 0.0) for i in range(3)]
    spec = calibration.ParamSpec((calibration.Param("ovh", 0.5, 2.0, 1.1, 0.4, per_family=False),), rounds=6, sweeps=20)
    level = lambda w: calibration.fit(recs, replace(spec, weighting=w), predictor=lambda r, X, n: X[:, 0]).values
    assert level("record")[("ovh", None)] == pytest.approx(1.0)
    assert level("sqrt")[("ovh", None)] == pytest.approx(1.2)
    assert level("source")[("ovh", None)] == pytest.approx(1.2)
    with pytest.raises(InputError, match="weighting"):
        calibration.fit(recs, replace(spec, weighting="log"), predictor=lambda r, X, n: X[:, 0])


def test_a_prior_pulls_a_family_toward_its_measured_value_and_only_that_family():
    """Param.prior: the fit minimises the records' loss + w·(log(θ/θ₀)/σ)² per prior (a ridge toward a measured
    value)."""
    from dataclasses import replace

    recs = _syn_records()
    assert calibration.fit(recs, SPEC, predictor=_syn_predictor).values[("eta", "B")] == 0.25  # the records' value
    eta = replace(SPEC.params[0], prior=(("B", 0.5),), prior_sigma=0.1, prior_weight=0.5)
    f = calibration.fit(recs, replace(SPEC, params=(eta, SPEC.params[1])), predictor=_syn_predictor)
    assert f.values[("eta", "A")] == 0.5 and f.values[("ovh", None)] == 0.1  # family A: no prior, unchanged
    # family B's coordinate, by brute force over a fine grid of the same objective (records b1, b2, z2 + penalty)
    b = [r for r in recs if r.hardware_family == "B"]
    grid = np.linspace(0.2, 0.6, 40001)
    total = sum(calibration._logerr(r.work / grid + 0.1, r.value) for r in b) + eta.penalty(grid, "B")
    best = grid[np.argmin(total)]
    assert 0.25 < best < 0.5 and f.values[("eta", "B")] == pytest.approx(best, abs=2e-3)
    # the reported objective is the records' mean loss at the fitted values, the penalty not in it
    pred = np.array([r.work / f.values[("eta", r.hardware_family)] + 0.1 for r in recs])
    assert f.objective == pytest.approx(float(np.mean(calibration._logerr(pred, np.array([r.value for r in recs])))))
    # a prior with family None applies to every family and to a shared parameter; none: no penalty
    assert replace(eta, prior=((None, 0.5),)).penalty(0.25, "A") == pytest.approx(0.5 * (np.log(0.5) / 0.1) ** 2)
    assert eta.penalty(0.25, "A") == 0.0 and SPEC.params[0].penalty(0.25, "B") == 0.0
    assert calibration.default_spec().describe()[1]["prior"] == {"hopper": 0.85}  # η_m, measured on an H200


def test_extra_starts_find_the_better_basin():
    """ParamSpec.starts: the descent is repeated from each start and the lowest objective kept (two basins)."""
    from dataclasses import replace

    def two_basins(rec, X, names):  # |log(pred/meas)| = min(|a − 0.2| + 0.1, |a − 0.8|): minima at 0.2 and 0.8
        a = X[:, 0]
        return rec.value * np.exp(np.minimum(np.abs(a - 0.2) + 0.1, np.abs(a - 0.8)))

    recs = [Syn("r1", 1.0, "s1", "A", "m1", 0.0), Syn("r2", 2.0, "s2", "A", "m1", 0.0)]
    spec = calibration.ParamSpec((calibration.Param("a", 0.0, 1.0, 0.1, 0.05, per_family=False),), rounds=6,
                                 sweeps=5)
    local = calibration.fit(recs, spec, predictor=two_basins)
    assert local.values[("a", None)] == pytest.approx(0.2, abs=1e-3) and local.objective == pytest.approx(0.1, abs=1e-3)
    both = calibration.fit(recs, replace(spec, starts=({"a": 0.9},)), predictor=two_basins)
    assert both.values[("a", None)] == pytest.approx(0.8, abs=1e-3) and both.objective == pytest.approx(0.0, abs=1e-3)
    with pytest.raises(InputError, match="starts"):
        calibration.fit(recs, replace(spec, starts=({"b": 0.5},)), predictor=two_basins)
    # a start beyond a bound begins at the bound: with a ≤ 0.5 the start 0.9 descends from 0.5 to the basin at 0.2
    # (unclipped, it sat at 0.9, outside the bounds, where no grid point improved on it)
    capped = replace(spec, params=(replace(spec.params[0], hi=0.5),), starts=({"a": 0.9},))
    f = calibration.fit(recs, capped, predictor=two_basins)
    assert f.values[("a", None)] == pytest.approx(0.2, abs=1e-3) and f.objective == pytest.approx(0.1, abs=1e-3)
    assert calibration.default_spec().starts  # the shipped model declares one (engine.efficiency.FIT_STARTS)


def test_cross_validation_groups_and_errors_are_the_hand_derived_ones():
    cv = crossval.cross_validate(_syn_records(), SPEC, predictor=_syn_predictor,
                                    schemes=("source", "hardware", "model", "loo"))
    assert cv["counts"] == {"records": 7, "sources": 3, "hardware_families": 2, "model_families": 2,
                            "fitted_params": 3, "params_per_family": 1, "params_some_families": {},
                            "shared_params": 1, "records_by_stack": {"unstated": 7},
                            "params_by_stack": {"unstated": []}}
    src = cv["source"]
    assert [f["held_out"] for f in src["folds"]] == [["a1", "a2", "z1"], ["a3"], ["b1", "b2", "z2"]]
    # leaving s1 or s2 out leaves family A a record: exact; leaving s3 out leaves no B record, so B is predicted
    # with the cross-family fit (on A only: η = 0.5, overhead 0.1): b = w/0.5 + 0.1 vs w/0.25 + 0.1
    by = {r["id"]: r for r in src["records"]}
    for rid in ("a1", "a2", "a3", "z1"):
        assert by[rid]["error"] == pytest.approx(0.0, abs=1e-9) and by[rid]["params_from"] == "family"
    assert by["z2"]["error"] == pytest.approx(0.0, abs=1e-9) and by["z2"]["params_from"] == "cross-family"
    for rid, w in (("b1", 1.0), ("b2", 3.0)):
        assert by[rid]["params_from"] == "cross-family"
        assert by[rid]["error"] == pytest.approx((w / 0.5 + 0.1) / (w / 0.25 + 0.1) - 1, rel=1e-6)
    assert src["summary_by_group"]["s3"]["n"] == 3 and src["summary_by_group"]["s1"]["median_abs_error"] < 1e-9
    hw = cv["hardware"]["summary_by_group"]
    assert set(hw) == {"A", "B"}
    # leaving family A out: B alone fits η = 0.25, overhead 0.1; A records predicted w/0.25 + 0.1 vs w/0.5 + 0.1
    a_err = [abs((w / 0.25 + 0.1) / (w / 0.5 + 0.1) - 1) for w in (1.0, 2.0, 4.0, 0.0)]
    assert hw["A"]["n"] == 4 and hw["A"]["median_abs_error"] == pytest.approx(np.median(a_err), rel=1e-6)
    assert hw["A"]["worst_ratio"] == pytest.approx(max((w / 0.25 + 0.1) / (w / 0.5 + 0.1) for w in (1, 2, 4)))
    assert set(cv["model"]["summary_by_group"]) == {"m1", "m2"}
    assert cv["model"]["summary"]["median_abs_error"] == pytest.approx(0.0, abs=1e-9)
    assert len(cv["loo"]["folds"]) == 7


def test_cross_validation_in_worker_processes_equals_the_serial_run():
    """Folds refit in forked workers (--jobs) give exactly the serial result: the fitter is deterministic."""
    kw = dict(spec=SPEC, predictor=_syn_predictor, schemes=("source", "hardware", "loo"))
    one = crossval.cross_validate(_syn_records(), jobs=1, **kw)
    two = crossval.cross_validate(_syn_records(), jobs=2, **kw)
    for scheme in ("source", "hardware", "loo"):
        assert [r["predicted"] for r in two[scheme]["records"]] == [r["predicted"] for r in one[scheme]["records"]]
        assert [f["group"] for f in two[scheme]["folds"]] == [f["group"] for f in one[scheme]["folds"]]
    assert one["jobs"] == 1 and two["jobs"] == 2
    from rackmath.errors import InputError

    with pytest.raises(InputError, match="jobs"):
        crossval.cross_validate(_syn_records(), jobs=0, **kw)


def test_folds_run_in_lockstep_equal_each_fold_fitted_alone():
    """cross_validate runs the full fit and every fold (with its cross-family fit) in lockstep on one prediction
    cache; each equals fit() and predict_with() run alone on a fresh cache, value for value."""
    recs = _syn_records()
    cv = crossval.cross_validate(recs, SPEC, predictor=_syn_predictor, schemes=("source", "hardware"), jobs=1)
    assert cv["in_sample"]["fit"] == calibration.fit(recs, SPEC, predictor=_syn_predictor).as_dict()
    for scheme, key in (("source", "source_group"), ("hardware", "hardware_family")):
        rows = {r["id"]: r for r in cv[scheme]["records"]}
        for info in cv[scheme]["folds"]:
            train = [r for r in recs if getattr(r, key) != info["group"]]
            held = [r for r in recs if getattr(r, key) == info["group"]]
            alone = calibration.fit(train, SPEC, predictor=_syn_predictor)
            assert info["fit"] == alone.as_dict()
            p, how = calibration.predict_with(alone, held, cache.PredictionCache(SPEC.names, _syn_predictor))
            assert [rows[r.id]["predicted"] for r in held] == list(p)
            assert [rows[r.id]["params_from"] for r in held] == how
    assert {r["params_from"] for r in cv["hardware"]["records"]} == {"cross-family"}


def test_a_prediction_depends_on_its_own_candidate_vector_only(recs):
    """What lets the fitter batch and memoise candidates across folds: predict_many of a record at K vectors equals,
    bit for bit, its prediction at each vector alone or among others (a serving, a step and a prefill record)."""
    spec = calibration.default_spec()
    x0 = np.array([p.x0 for p in spec.params])
    X = x0 * np.random.default_rng(1).uniform(0.8, 1.2, (12, len(x0)))
    fitted = calibration.fitted_records(recs)
    some = [next(r for r in fitted if r.kind == k) for k in ("serve", "step", "prefill")] + fitted[::40]
    for r in some:
        many = validation.predict_many(r, X, spec.names)
        assert np.all(np.isfinite(many))
        assert list(validation.predict_many(r, X[5:9], spec.names)) == list(many[5:9])
        assert [validation.predict_many(r, X[k:k + 1], spec.names)[0] for k in (0, 11)] == [many[0], many[11]]
    # the records of one serving run (throughput, TPOT, TTFT …) are read from one evaluation, value for value
    runs = {}
    for r in fitted:
        if validation.evaluation_key(r) is not None:
            runs.setdefault(validation.evaluation_key(r), []).append(r)
    run = max(runs.values(), key=len)
    assert len(run) >= 2 and len({r.metric for r in run}) >= 2
    together = validation.predict_many_records(run, X, spec.names)
    assert [list(row) for row in together] == [list(validation.predict_many(r, X, spec.names)) for r in run]


def test_refit_toml_round_trips_through_the_catalog(tmp_path):
    import tomllib

    from rackmath.engine.efficiency import load_efficiency
    from rackmath.specs import catalog

    f = calibration.fit(_syn_records(), SPEC, predictor=_syn_predictor)
    presets = [dict(name="syn-a", chips=["h100"], regime="serving", composition="serial", eta_compute=0.5,
                    eta_memory=0.25, eta_comm=1.0, step_overhead_s=0.001, description="d", fitted_on=["a1"],
                    objective_mean_abs_log=f.objective)]
    text = calibration.as_toml(presets, header="header\nline 2")
    (tmp_path / "p.toml").write_text(text)
    assert tomllib.loads(text)["efficiency"][0]["eta_memory"] == 0.25
    try:
        catalog.add_catalog_dir(tmp_path)
        e = load_efficiency("syn-a")
        assert (e.eta_compute, e.eta_memory, e.eta_comm, e.step_overhead_s) == (0.5, 0.25, 1.0, 0.001)
    finally:
        catalog._user_dirs.clear()
        catalog.clear_caches()


def test_cross_validate_on_real_records_reports_counts():
    """A small real subset (TensorRT-LLM B200 and GB200 columns): one family, the declared vector, two sources."""
    sub = [r for r in R.shipped_records() if r.source_group in ("trtllm-b200", "trtllm-gb200")]
    cv = crossval.cross_validate(sub, schemes=("source",))
    # one family (Blackwell): every parameter once, but the MLA kernel scale, fitted for AMD only
    n_params = sum(p.fitted_for("blackwell") or p.fitted_for(None) for p in calibration.default_spec().params)
    assert n_params == len(calibration.default_spec().params) - 1
    assert cv["counts"]["records"] == 16 and cv["counts"]["sources"] == 2 and cv["counts"]["fitted_params"] == n_params
    assert set(cv["source"]["summary_by_group"]) == {"trtllm-b200", "trtllm-gb200"}
    # the same workloads on the sibling chip transfer well (published B200 vs GB200 differ by ≤ 18%)
    assert cv["source"]["summary"]["median_abs_error"] <= 0.15


def test_cross_validate_rejects_unknown_schemes():
    from rackmath.errors import InputError

    with pytest.raises(InputError, match="scheme"):
        crossval.cross_validate(_syn_records(), SPEC, predictor=_syn_predictor, schemes=("bogus",))


# --------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------

USER = """
[[record]]
id = "my-h100-8b"
title = "Llama 3.1 8B on one H100, my vLLM run"
metric = "tpot_s"
value = 0.007
status = "measured"
source = "my lab notebook"
source_group = "my-lab"
framework = "vllm"
model = "llama-3.1-8b"
hardware = "h100"
gpus = 1
tp = 1
isl = 1000
osl = 1000
concurrency = 16

[[record]]
id = "T1-H100"
title = "replaces the shipped record of this id"
metric = "output_tok_s_per_gpu"
value = 3000.0
status = "measured"
source = "my rerun"
source_group = "my-lab"
model = "llama-3.3-70b"
hardware = "hgx-h100"
gpus = 2
tp = 2
isl = 128
osl = 128
concurrency = 512
weights_dtype = "fp8"
"""


@pytest.fixture
def user_dir(tmp_path):
    d = tmp_path / "mine"
    d.mkdir()
    (d / "runs.toml").write_text(USER)
    return d


def test_cli_validate_json(result):
    code, out, err = run_cli("validate", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["summary"]["n"] == result["summary"]["n"]
    assert {"id", "measured", "predicted", "error", "source_group", "hardware_family"} <= set(d["records"][0])


def test_cli_validate_table():
    code, out, _ = run_cli("validate")
    assert code == 0 and "median |error|" in out and "by hardware family" in out


def test_cli_records_dir_adds_and_replaces(user_dir):
    code, out, err = run_cli("validate", "--records", str(user_dir), "--json")
    assert code == 0, err
    d = json.loads(out)
    by = {r["id"]: r for r in d["records"]}
    assert by["my-h100-8b"]["measured"] == 0.007 and by["T1-H100"]["measured"] == 3000.0
    assert d["counts"]["records"] == len(R.shipped_records()) + 1
    code, out, err = run_cli("validate", "--records", str(user_dir), "--only-records", "--json")
    assert code == 0, err
    assert sorted(r["id"] for r in json.loads(out)["records"]) == ["T1-H100", "my-h100-8b"]


def test_cli_bad_records_are_one_line_exit_2(tmp_path):
    (tmp_path / "bad.toml").write_text(USER.replace("osl = 1000", "osll = 1000", 1))
    code, out, err = run_cli("validate", "--records", str(tmp_path))
    assert code == 2 and "osll: unknown field; did you mean 'osl'?" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    code, _, err = run_cli("validate", "--records", str(tmp_path / "nowhere"))
    assert code == 2 and "no such file or directory" in err
    code, _, err = run_cli("validate", "--only-records")
    assert code == 2 and "--records" in err


def test_cli_refit_writes_presets_and_never_overwrites(user_dir, tmp_path):
    out_file = tmp_path / "presets.toml"
    code, out, err = run_cli("validate", "--records", str(user_dir), "--only-records", "--refit", "-o",
                             str(out_file))
    assert code == 0, err
    assert f"wrote {out_file}" in err
    text = out_file.read_text()
    assert 'name = "user-hopper-fit"' in text and "my-h100-8b" in text
    code, _, err = run_cli("validate", "--records", str(user_dir), "--only-records", "--refit", "-o", str(out_file))
    assert code == 2 and "--force" in err
    assert out_file.read_text() == text
    # the written presets are catalog data: serve can use them
    cat = tmp_path / "cat"
    cat.mkdir()
    (cat / "presets.toml").write_text(text)
    code, out, err = run_cli("--catalog", str(cat), "serve", "--model", "llama-3.1-8b", "--hardware", "h100",
                             "--gpus", "1", "--isl", "1000", "--osl", "1000", "-c", "16",
                             "--efficiency", "user-hopper-fit", "--json")
    assert code == 0, err
    assert json.loads(out)["efficiency"] == "user-hopper-fit"


def test_cli_refit_header_counts_and_warns_when_records_are_fewer_than_parameters(user_dir, tmp_path):
    """Two user records cannot pin ~20 parameters: the header says so (and stderr), with singulars right."""
    code, out, err = run_cli("validate", "--records", str(user_dir), "--only-records", "--refit")
    assert code == 0, err
    head = out.split("[[efficiency]]")[0]
    assert "on 2 records from 1 source\n" in head
    n = int(head.split("(")[1].split(" parameters")[0])
    assert n > 2 and f"fewer records (2) than fitted parameters ({n})" in head and "note: fewer records (2)" in err
    one = tmp_path / "one"
    one.mkdir()
    (one / "r.toml").write_text(USER.split("[[record]]")[0] + "[[record]]" + USER.split("[[record]]")[1])
    code, out, err = run_cli("validate", "--records", str(one), "--only-records", "--refit")
    assert code == 0, err
    assert "on 1 record from 1 source\n" in out and "fewer records (1)" in out


def test_validate_reports_the_held_out_error_beside_the_in_sample_one(user_dir):
    """`validate` (default presets) also scores each shipped record as predicted by the presets refitted without its
    source (the held-out table): issue 9's leave-one-source-out figure, within its 15% target and above the in-sample
    one; nothing under --ideal; a user's record that replaces a shipped one (T1-H100 at 3,000 tok/s) leaves it."""
    from rackmath.analyses.fitting import evidence

    v = validation.validate()
    h, n_table = v["summary_held_out"], len(evidence.table())
    assert h["n"] == n_table and 0.0 < h["median_abs_error"] <= 0.15
    assert h["median_abs_error"] > v["summary"]["median_abs_error"] and h["within_2x"] <= h["n"]
    assert validation.validate(ideal=True)["summary_held_out"] == {"n": 0}
    mine = validation.validate(recs=validation.records((str(user_dir),)))
    assert mine["summary_held_out"]["n"] == n_table - 1  # T1-H100 replaced; my-h100-8b is not in the table
    code, out, err = run_cli("validate")
    assert code == 0 and "With each record's source left out of the fit (rackmath validate --cv): median |error| " \
        f"{h['median_abs_error']:.1%} over {n_table} records" in " ".join(out.split())


def test_cli_validate_and_plot_with_derived_records_only(tmp_path):
    """Records a user marks "derived" are shown, not scored: with nothing else (--only-records) `validate` prints them
    and says so (it raised KeyError 'within_20pct' before); `plot validate` refuses in one line, exit 2, no file."""
    d = tmp_path / "derived"
    d.mkdir()
    (d / "runs.toml").write_text(USER.replace('status = "measured"', 'status = "derived"'))
    code, out, err = run_cli("validate", "--records", str(d), "--only-records")
    assert code == 0, err
    assert "derived (not fitted)" in out and "no measured or approximate record to score" in " ".join(out.split())
    png = tmp_path / "v.png"
    code, out, err = run_cli("plot", "validate", "--records", str(d), "--only-records", "-o", str(png))
    assert code == 2 and "records: no measured or approximate record to plot" in err and err.count("\n") <= 1
    assert not png.exists()


def test_cli_cv_text_with_a_scheme_nothing_is_left_to_fit_on(user_dir):
    """Two records of one source: leaving it out leaves nothing to fit on — the table prints n/a for that scheme
    (it raised KeyError 'within_2x' before), and the counts line names only what this fit has (one family, no AMD)."""
    code, out, err = run_cli("validate", "--records", str(user_dir), "--only-records", "--cv", "--scheme", "source")
    assert code == 0, err
    row = next(ln for ln in out.splitlines() if ln.startswith("leave one source out"))
    assert row.split()[4:] == ["0", "n/a", "n/a", "n/a", "n/a"] and "nothing left to fit on" in out
    n = sum(not p.per_family or not p.families for p in calibration.default_spec().params)
    assert f"{n} fitted parameters (3 per hardware family × 1 family + {n - 3} shared) on 2 records from 1" \
        in " ".join(out.split())


def test_cli_cv_text_lists_the_records_outside_2x(user_dir):
    """--cv (text) lists each scheme's held-out predictions off by more than 2×, worst first, in the records' units:
    a third lab that measured the same run as my-h100-8b 100× slower cannot be predicted from my-lab's records."""
    (user_dir / "other.toml").write_text(USER.split("[[record]]")[1].join(["[[record]]", ""]).replace(
        'id = "my-h100-8b"', 'id = "their-h100-8b"').replace("value = 0.007", "value = 0.7").replace(
        'source_group = "my-lab"', 'source_group = "their-lab"'))
    code, out, err = run_cli("validate", "--records", str(user_dir), "--only-records", "--cv", "--scheme", "source",
                             "--jobs", "1")
    assert code == 0, err
    text = out.split("records outside 2× when their group is held out")[1]
    row = next(ln for ln in text.splitlines() if "their-h100-8b" in ln)
    assert "their-lab" in row and "tpot_s" in row and "700 ms" in row
    ratio = float(row.split()[-1].rstrip("×"))
    assert ratio < 0.5


def test_cli_cv_json_on_user_records(user_dir):
    code, out, err = run_cli("validate", "--records", str(user_dir), "--only-records", "--cv", "--json",
                             "--scheme", "source,loo")
    assert code == 0, err
    d = json.loads(out)
    # every declared parameter is fitted for the one (Hopper) family of these records, but the MLA scale (AMD only)
    params = calibration.default_spec().params
    assert d["counts"]["records"] == 2 and d["counts"]["fitted_params"] == len(params) - 1
    assert [p.name for p in params if not p.fitted_for("hopper") and not p.fitted_for(None)] == ["mla_kernel_scale"]
    assert d["source"]["not_predictable"] == [{"group": "my-lab", "reason": "nothing left to fit on"}]
    assert len(d["loo"]["records"]) == 2
    assert [p.get("prior") for p in d["spec"] if p["name"] == "eta_memory"] == [{"hopper": 0.85}]
    code, out, err = run_cli("validate", "--records", str(user_dir), "--only-records", "--cv", "--scheme", "loo",
                             "--jobs", "1")
    assert code == 0, err
    assert "priors measured on silicon: eta_memory (hopper) 0.85" in " ".join(out.split())
    code, _, err = run_cli("validate", "--cv", "--scheme", "planets")
    assert code == 2 and "scheme" in err
    code, _, err = run_cli("validate", "--cv", "--ideal")
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_plot_validate(tmp_path, user_dir):
    p = tmp_path / "v.png"
    code, out, err = run_cli("plot", "validate", "--output", str(p), "--records", str(user_dir), "--only-records")
    assert code == 0, err
    assert p.stat().st_size > 10_000
    code, _, err = run_cli("plot", "validate", "--output", str(p))
    assert code == 2  # never overwritten without --force


def test_shipped_presets_name_records_that_exist(recs):
    from rackmath.engine.efficiency import load_efficiency

    ids = {r.id for r in recs}
    for name in ("hopper-serving", "blackwell-serving", "tpu-v4-pope"):
        src = load_efficiency(name).source
        fitted = re.findall(r"[A-Z][\w-]*", src.split("records:")[-1])
        assert fitted and set(fitted) <= ids, name


def test_the_efficiency_model_declares_the_fitted_vector(monkeypatch):
    """engine.efficiency.FIT_PARAMS replaces the default spec: names, bounds, shared vs per family."""
    from rackmath.engine import efficiency as E

    monkeypatch.setattr(E, "FIT_PARAMS", [
        {"name": "eta_memory", "lo": 0.05, "hi": 1.0, "x0": 0.6, "width": 0.4},
        {"name": "step_overhead_s", "lo": 0.0, "hi": 0.05, "x0": 0.002, "width": 0.008, "per_family": False,
         "decimals": 6}], raising=False)
    spec = calibration.default_spec()
    assert spec.names == ("eta_memory", "step_overhead_s") and [p.per_family for p in spec.params] == [True, False]
    sub = [r for r in R.shipped_records() if r.source_group in ("trtllm-h200", "trtllm-b200")]
    f = calibration.fit(sub)
    assert f.n_params == 3 and set(f.values) == {("eta_memory", "hopper"), ("eta_memory", "blackwell"),
                                                 ("step_overhead_s", None)}


def test_records_in_a_catalog_dir_and_other_kinds_skipped(tmp_path):
    from rackmath.specs import catalog

    (tmp_path / "both.toml").write_text(USER + '\n[[efficiency]]\nname = "x-eff"\neta_compute = 0.5\n')
    assert [r.id for r in R.read_records_file(tmp_path / "both.toml")] == ["my-h100-8b", "T1-H100"]
    try:
        catalog.add_catalog_dir(tmp_path)
        ids = [r.id for r in validation.records()]
        assert "my-h100-8b" in ids and len(ids) == len(R.shipped_records()) + 1
    finally:
        catalog._user_dirs.clear()
        catalog.clear_caches()
    with pytest.raises(CatalogError, match=r"records: unknown table in a records file; did you mean \[\[record\]\]"):
        R.parse_records({"records": [GOOD]}, "f.toml")


def test_validate_names_the_preset_each_record_used(result):
    by = result["summary_by_efficiency"]
    assert by["hopper-serving"]["n"] > 50 and by["blackwell-serving"]["n"] > 30
    assert sum(s["n"] for s in by.values()) == result["summary"]["n"]


def _screen_module():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "screen.py"
    spec = importlib.util.spec_from_file_location("screen", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_outside_2x_hinge_adds_loss_beyond_2x_only():
    """ParamSpec.outside_2x_slope s: the loss gains s·(|log r| − log 2) beyond 2× (hand values: r = 4 under the
    0.4 cap is 0.4 + 0.1·ln(1 + ln 4 − 0.4) = 0.46862, + ln 2 with s = 1); within 2× nothing changes. Fitted,
    it trades records inside 2× for one outside: a level shared by records at 1 (×3) and 3 goes from the median
    of the records (1) to the level that brings 3 within 2× (1.5) once s beats the three records' slope (s = 4 > 3)."""
    from dataclasses import replace

    e = calibration._logerr(np.array([4.0, 1.5, 0.5, 2.0]), 1.0, 1.0)
    assert e[0] == pytest.approx(0.4 + 0.1 * np.log1p(np.log(4) - 0.4) + np.log(2), rel=1e-12)
    assert e[0] == pytest.approx(1.16177, abs=1e-5)
    assert list(e[1:]) == pytest.approx(list(calibration._logerr(np.array([1.5, 0.5, 2.0]), 1.0)), rel=1e-12)
    recs = [Syn(f"a{i}", 1.0, f"s{i}", "A", "m1", 0.0) for i in range(3)] + [Syn("b", 3.0, "s9", "A", "m1", 0.0)]
    spec = calibration.ParamSpec((calibration.Param("ovh", 0.5, 4.0, 1.1, 0.4, per_family=False),), rounds=8,
                                 sweeps=20)
    level = lambda s: calibration.fit(recs, replace(spec, outside_2x_slope=s), predictor=lambda r, X, n: X[:, 0])
    assert level(0.0).values[("ovh", None)] == pytest.approx(1.0, abs=0.01)
    assert level(2.0).values[("ovh", None)] == pytest.approx(1.0, abs=0.01)  # s = 2 < 3: still the median
    assert level(4.0).values[("ovh", None)] == pytest.approx(1.5, abs=0.01)
    with pytest.raises(InputError, match="outside_2x_slope"):
        level(float("nan"))


def test_screen_builds_the_variant_it_is_asked_for():
    """benchmarks/screen.py: the shipped spec with the command line's changes, nothing else; an extra start stays
    inside a bound the variant lowers."""
    import argparse

    screen = _screen_module()
    args = argparse.Namespace(param=["eager_sglang_s:hi=3e-5,per_family=true", "eta_memory:prior=[[null, 0.8]]"],
                              drop=["gemm_half_tokens"], rounds=3, sweeps=None, weighting="sqrt", no_starts=False)
    spec = screen.variant(args)
    shipped = calibration.default_spec()
    byname = {p.name: p for p in spec.params}
    assert "gemm_half_tokens" not in byname and len(spec.params) == len(shipped.params) - 1
    assert byname["eager_sglang_s"].hi == 3e-5 and byname["eager_sglang_s"].per_family
    assert byname["eta_memory"].prior == ((None, 0.8),)
    assert (spec.rounds, spec.sweeps, spec.weighting) == (3, shipped.sweeps, "sqrt")
    assert shipped.starts[0]["eager_sglang_s"] > 3e-5 and spec.starts[0]["eager_sglang_s"] == 3e-5  # clipped
    assert spec.starts[0]["eager_vllm_s"] == shipped.starts[0]["eager_vllm_s"]
    unchanged = {p.name: p for p in shipped.params}
    assert all(byname[n] == unchanged[n] for n in byname if n not in ("eager_sglang_s", "eta_memory"))
    assert screen.variant(argparse.Namespace(param=[], drop=[], rounds=None, sweeps=None, weighting=None,
                                             no_starts=True)).starts == ()
    every = screen.variant(argparse.Namespace(param=["mla_kernel_scale:families=[]"], drop=[], rounds=None,
                                              sweeps=None, weighting=None, no_starts=False))
    assert unchanged["mla_kernel_scale"].families == ("amd",)
    assert {p.name: p for p in every.params}["mla_kernel_scale"].families == ()  # fitted for every family


@pytest.mark.parametrize("argv, field", [(["--param", "nope:hi=1"], "unknown parameter 'nope'"),
                                         (["--param", "eta_compute:lo=2"], "lo ≤ x0 ≤ hi"),
                                         (["--param", "eta_compute:width=nan"], "width > 0"),
                                         (["--param", "eta_compute:bogus=1"], "FIELD one of"),
                                         (["--drop", "nope"], "--drop 'nope'"), (["--rounds", "0"], "--rounds 0"),
                                         (["--schemes", "foo"], "--schemes 'foo'"), (["--rounds", "x"], "invalid int"),
                                         (["--json", "README.md"], "exists"),
                                         (["--param", "eta_memory:prior=5"], "prior is a JSON list"),
                                         (["--param", "eta_memory:prior_sigma=0"], "above 0"),
                                         (["--param", "eta_memory:decimals=2.5"], "whole number"),
                                         (["--json", "no-such-folder/x.json"], "no folder"),
                                         (["--base", "pyproject.toml"], "not a readable"),
                                         (["--hinge", "-1"], "--hinge -1.0"), (["--hinge", "nan"], "--hinge nan"),
                                         (["--param", "mla_kernel_scale:families=5"], "families is a JSON list")])
def test_screen_bad_arguments_are_one_line_exit_2(argv, field):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    p = subprocess.run([sys.executable, str(root / "benchmarks" / "screen.py"), *argv], capture_output=True, text=True,
                       cwd=root, timeout=60)
    assert p.returncode == 2 and field in p.stderr and p.stdout == ""
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
