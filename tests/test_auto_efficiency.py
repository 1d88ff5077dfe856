"""`--efficiency auto` (the default of serve, plan, simulate, compare): a deployment of a listed stack version with
fitted times and no speculative decoding runs on the measured path (measured silicon, the version's own times);
everything else on the chip's calibrated preset (docs/serving.md, "The default")."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli

import rackmath
from rackmath.analyses.serving.serve import load_stack
from rackmath.engine.efficiency import default_efficiency, resolve, versioned

ROCM = "sglang@0.5.5.post3-rocm700-mi35x"


@pytest.mark.parametrize("framework,measured", [
    ("sglang@0.5.6", True), ("vllm", True), ("trtllm", True), ("atom", True), ("dynamo-sglang", True),
    ("generic", False), ("vllm-v0", False), (None, False)])
def test_auto_takes_the_version_where_it_has_fitted_times(framework, measured):
    st = load_stack(framework)
    assert versioned(st) is measured
    eff = resolve("h200", None, stack=st)
    assert eff.name == ("measured-h200" if measured else default_efficiency("h200").name)
    assert resolve("h200", "preset", stack=st).name == default_efficiency("h200").name  # 'preset': always the preset
    assert resolve("h200", "auto").name == default_efficiency("h200").name  # no stack: the preset, as before


def _serve(*extra):
    code, out, err = run_cli("serve", "deepseek-r1", "-H", "mi355x", "--gpus", "8", "--tp", "8", "--isl", "1024",
                             "--osl", "1024", "-c", "64", "--json", *extra)
    assert code == 0, err
    return json.loads(out)


def test_serve_default_is_the_measured_path_for_a_listed_version():
    """InferenceMAX IMX-S193: DeepSeek-R1 FP8 on 8 × MI355X, TP 8, SGLang 0.5.5.post3 (ROCm), 1k/1k, C = 64 —
    304.0 output tok/s/GPU and 25.9 ms mean TPOT measured. The default is `--efficiency measured`'s number, within
    15% of the run (the version's times were fitted on that build's runs: a regression check against a published
    measurement, not an out-of-sample figure); the preset puts it 62% low."""
    auto, measured, preset = _serve("--framework", ROCM), _serve("--framework", ROCM, "--efficiency", "measured"), \
        _serve("--framework", ROCM, "--efficiency", "preset")
    assert auto["efficiency"] == measured["efficiency"] == "measured-mi355x"
    assert auto["output_tok_s_per_gpu"] == pytest.approx(measured["output_tok_s_per_gpu"], rel=1e-12)
    assert auto["output_tok_s_per_gpu"] == pytest.approx(304.0, rel=0.15)
    assert auto["tpot_ms"] == pytest.approx(25.9, rel=0.15)
    assert preset["efficiency"] == "amd-serving" and preset["output_tok_s_per_gpu"] < 0.5 * 304.0
    assert _serve()["efficiency"] == "amd-serving"  # no --framework: the generic stack, the preset


def test_speculation_takes_the_same_path_and_its_records_hold():
    """MTP on and off are one model under auto (a comparison of the two is not one of two presets). Published: the
    SGLang cookbook's DeepSeek-V3.2 on 8 × B200, SGLang 0.5.6, EAGLE 3 steps accepting 2.46, C = 1: 9.09 ms TPOT
    (C12-c1-eagle); LMSYS's DeepSeek-R1 decode on 16 × H20, MTP 1 and MTP 3 at batch 1 (C17): auto predicts them
    within 10% (C12's build was fitted on runs including it: a regression check, not an out-of-sample figure)."""
    from rackmath.analyses.fitting.validation import predict, shipped_records

    kw = dict(gpus=8, tp=8, isl=1024, osl=1024, concurrency=1, framework="sglang")
    on = rackmath.serve("deepseek-r1", "hgx-h200", mtp=3, acceptance=2.5, **kw)
    off = rackmath.serve("deepseek-r1", "hgx-h200", **kw)
    assert on.efficiency == off.efficiency == "measured-h200"
    recs = {r.id: r for r in shipped_records()}
    for rid in ("C12-c1-eagle-tpot", "C17-mtp1-bs1-tpot", "C17-mtp3-bs1-tpot"):
        p, _ = predict(recs[rid], "auto")
        assert p == pytest.approx(recs[rid].value, rel=0.10), rid


def test_validate_keeps_the_presets_unless_asked():
    from rackmath.analyses.fitting.validation import predict, shipped_records

    rec = next(r for r in shipped_records() if r.id == "C29-1k1k-c1-tpot")  # SGLang 0.5.6 on B200: a listed build
    default, info = predict(rec)
    assert info["efficiency"] == default_efficiency("b200").name
    assert predict(rec, "preset")[0] == pytest.approx(default, rel=1e-12)
    auto, info_auto = predict(rec, "auto")
    assert info_auto["efficiency"] == "measured-b200" and auto != pytest.approx(default, rel=1e-3)


def test_the_web_serve_page_and_api_take_a_stack():
    """One vocabulary: the serve page has the CLI's --framework (none, each engine, each listed build), and the API
    applies the same default to it; an unknown stack is a 400 naming the field."""
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from rackmath.web.app import create_app

    c = TestClient(create_app(), raise_server_exceptions=False)
    page = c.get("/api/pages/serve").json()
    fw = next(i for i in page["inputs"] if i["name"] == "framework")
    assert fw["default"] == "" and "sglang@0.5.6" in fw["options"] and ["vllm", "vllm (its newest build for the chip)"] \
        in fw["options"]
    q = dict(model="deepseek-r1", hardware="hgx-h200", isl="1024", osl="1024", concurrency="64", gpus="8", tp=8)
    listed = c.get("/api/serve", params=dict(q, framework="sglang")).json()
    generic = c.get("/api/serve", params=q).json()
    assert (listed["efficiency"], listed["stack_version"]) == ("measured-h200", "sglang@0.5.6")
    assert (generic["efficiency"], generic["stack_version"]) == (default_efficiency("h200").name, "generic")
    bad = c.get("/api/serve", params=dict(q, framework="sglang@9"))
    assert bad.status_code == 400 and bad.json()["error"].startswith("framework: unknown stack version")
    view = c.get("/api/view/serve", params=dict(framework="vllm", model="llama-3.1-70b", hardware="hgx-h100")).json()
    assert view["header"].startswith("calibrated prediction, measured-h100")


def test_the_measured_path_prints_its_versions_held_out_band():
    """serve's header on the measured path carries the version's out-of-sample band (stack_heldout.toml: its runs'
    median |error| with each run's group left out), as a preset's carries its held-out band."""
    from rackmath.options import mode_dict
    from rackmath.specs.stacks import heldout

    band = heldout("sglang@0.5.6")
    assert band["records"] == 88 and 0.05 < band["error"] < 0.3  # the version's 22 runs × 4 metrics
    r = rackmath.serve("deepseek-r1", "hgx-h200", gpus=8, tp=8, isl=1024, osl=1024, concurrency=64,
                       framework="sglang")
    d = mode_dict(r._eff)
    assert d["validated_error"] == pytest.approx(band["error"])
    assert f"±{band['error'] * 100:.0f}%" in d["label"] and "group left out" in d["label"]
    assert heldout("generic") == {}


def test_heldout_by_version_is_the_median_of_a_versions_records(tmp_path, monkeypatch):
    import importlib.util
    from pathlib import Path

    from rackmath.analyses.fitting import stack as S
    from rackmath.analyses.fitting.validation import records

    bench = Path(__file__).resolve().parents[1] / "benchmarks"
    monkeypatch.syspath_prepend(str(bench))  # as when run: the script imports stack_fit beside it
    spec = importlib.util.spec_from_file_location("hbv", bench / "heldout_by_version.py")
    hbv = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hbv)
    imx = hbv.inferencemax(records())
    a, b = [r for r in imx if S.version_of(r) == "vllm@0.13.0"][:2]
    c = next(r for r in imx if S.version_of(r) == "atom@0.1.1")
    dump = {a.id: {"one_group_out": 1.1 * a.value}, b.id: {"one_group_out": 0.7 * b.value},
            c.id: {"one_group_out": 2.0 * c.value}}
    table = hbv.by_version(dump, imx)
    assert table["vllm@0.13.0"] == (pytest.approx(0.2), 2) and table["atom@0.1.1"] == (pytest.approx(1.0), 1)
    bad = tmp_path / "d.json"
    bad.write_text("[1, 2]")
    assert hbv.main([str(bad)]) == 2


def test_a_malformed_heldout_file_names_its_field(tmp_path, monkeypatch):
    from rackmath.errors import CatalogError
    from rackmath.specs import stacks

    f = tmp_path / "stack_heldout.toml"
    f.write_text('[[_stack_heldout]]\nstack_version = "vllm@0.13.0"\nheldout_error = -1\nrecords = 3\n')
    monkeypatch.setattr(stacks, "HELDOUT", f)
    stacks._heldout_table.cache_clear()
    try:
        with pytest.raises(CatalogError, match=r"_stack_heldout\[0\]\.heldout_error"):
            stacks.heldout("vllm@0.13.0")
    finally:
        stacks._heldout_table.cache_clear()
