"""`rackmath validate`: every public record predicted; the summary holds median |error| ≤ 20%."""

from __future__ import annotations

import json
import re

import pytest

from conftest import run_cli
from rackmath.analyses import validation
from rackmath.analyses.calibration import PRESETS, objective
from rackmath.engine.efficiency import load_efficiency


@pytest.fixture(scope="module")
def result():
    return validation.validate()


def test_median_error_within_20_percent(result):
    s = result["summary"]
    assert s["n"] >= 40
    assert s["median_abs_error"] <= 0.20
    assert s["worst"]["id"] in {r["id"] for r in result["records"]}


def test_every_record_has_inputs_source_and_signed_error(result):
    for r in result["records"]:
        for k in ("id", "measured", "predicted", "error", "inputs", "source", "unit"):
            assert k in r
        assert r["error"] == pytest.approx(r["predicted"] / r["measured"] - 1.0)
        assert "published.md" in r["source"]


def test_calibration_beats_the_ideal_roofline(result):
    ideal = validation.validate(ideal=True)["summary"]
    assert ideal["median_abs_error"] > 2 * result["summary"]["median_abs_error"]


def test_measured_values_are_the_published_ones(shared):
    """Each record's measured value is read from published.md, not from rackmath."""
    text = (shared / "reference" / "published.md").read_text()
    recs = {r.id: r for r in validation.records()}
    # TensorRT-LLM table: total tok/s over the row's GPUs
    for rid, total, gpus in (("T1-H200", "3,803", 1), ("T1-H100", "6,378", 2), ("T5-B200", "8,020", 4),
                             ("T11-H100", "9,677", 8), ("T10-B200", "42,391", 8)):
        assert total in text
        assert recs[rid].measured == pytest.approx(float(total.replace(",", "")) / gpus)
    assert "24,524.9 tok/s" in text and recs["M1"].measured == pytest.approx(24524.9 / 8)
    assert "mean TPOT 155 ms" in text and recs["M2-tpot"].measured == 155.0
    assert "**0.29 s**" in text and recs["P4"].measured == 0.29
    assert re.search(r"93\.75 ms/step", text) and recs["P7"].measured == 93.75
    assert "~73.7k input tokens/s" in text and recs["D-prefill"].measured == pytest.approx(73.7e3 / 8)


def test_presets_are_data_fitted_on_the_records_only():
    ids = {r.id for r in validation.records() if r.kind == "measured"}
    for spec in PRESETS:
        eff = load_efficiency(spec.name)
        for f in ("eta_compute", "eta_memory", "eta_comm"):
            assert 0 < getattr(eff, f) <= 1
        assert 0 <= eff.step_overhead_s < 0.05
        fitted = re.findall(r"[A-Z][\w-]*-?\w*", eff.source.split("records:")[-1])
        assert fitted and set(fitted) <= ids
    # derived (model-computed) scaling-book examples are never fitted on
    assert all(r.kind == "derived" for r in validation.records() if r.id.startswith("SB"))


def test_objective_is_symmetric():
    assert objective([2.0], [1.0]) == pytest.approx(objective([0.5], [1.0]))


def test_max_load_rule_is_memory_or_2048():
    c = validation.max_load_concurrency("llama-3.3-70b", "hgx-h200", gpus=1, tp=1, isl=1000, osl=1000,
                                        weights_dtype="fp8", kv_dtype="fp8")
    # 0.9 × 141 GB − 70.6 GB of weights, over 1,500 tokens × 163,840 B (FP8 KV, published.md C7d halved)
    expected = (0.9 * 141e9 - 70.6e9) / (1500 * 163840)
    assert c == pytest.approx(expected, rel=0.03)
    assert validation.max_load_concurrency("llama-3.1-8b", "hgx-h200", gpus=1, tp=1, isl=128, osl=128,
                                           weights_dtype="fp8", kv_dtype="fp8") == 2048


def test_cli_validate_json():
    code, out, err = run_cli("validate", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert set(d) >= {"records", "summary"}
    assert d["summary"]["median_abs_error"] <= 0.20
    assert {"id", "measured", "predicted", "error"} <= set(d["records"][0])


def test_cli_validate_table():
    code, out, _ = run_cli("validate")
    assert code == 0 and "median |error|" in out


def test_plot_validate(tmp_path):
    p = tmp_path / "v.png"
    code, out, err = run_cli("plot", "validate", "--output", str(p))
    assert code == 0, err
    assert p.stat().st_size > 10_000
    code, _, err = run_cli("plot", "validate", "--output", str(p))
    assert code == 2  # never overwritten without --force
