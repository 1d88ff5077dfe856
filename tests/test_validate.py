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


# --------------------------------------------------------------------------------------
# Cross-validation of the calibration (`rackmath validate --cv`)
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cv():
    """The full cross-validation, as `validate --cv` runs it (~10 s on the 2-core development machine)."""
    from rackmath.analyses.calibration import cross_validate

    return cross_validate()


def _measured():
    return [r for r in validation.records() if r.kind == "measured"]


def test_predict_many_equals_predict_for_every_record():
    """The vectorized prediction (one engine call for K efficiencies) is the scalar one, record by record."""
    import numpy as np

    from rackmath.engine.efficiency import Efficiency

    rng = np.random.default_rng(7)
    X = np.column_stack([rng.uniform(0.05, 1.0, (4, 3)), rng.uniform(0.0, 0.05, 4)])
    for rec in _measured():
        many = validation.predict_many(rec, X, "hopper-serving")
        one = [validation.predict(rec, efficiency=Efficiency("hopper-serving", *x))[0] for x in X]
        assert many == pytest.approx(one, rel=1e-12), rec.id
    # vectorized (not looped) for every record but the three whose layout rackmath chooses
    assert {r.id for r in _measured() if not validation._vectorizable(r)} == {"M1", "M2-tpot", "M2-ttft"}


def test_batched_fit_equals_scoring_candidates_one_by_one():
    from rackmath.analyses.calibration import family_records, fit_preset

    spec = next(s for s in PRESETS if s.name == "tpu-v4-pope")
    recs = family_records(spec)
    e_batch, o_batch = fit_preset(recs, name=spec.name)
    e_one, o_one = fit_preset(recs, name=spec.name,
                              predict=lambda rec, eff: validation.predict(rec, efficiency=eff)[0])
    assert e_batch == e_one and o_batch == o_one
    assert (e_batch.eta_compute, e_batch.eta_memory, e_batch.eta_comm, e_batch.step_overhead_s) == \
        pytest.approx((1.0, 0.4, 0.825, 0.00425))


def test_full_refit_is_the_shipped_presets(cv, result):
    ins = cv["in_sample"]
    assert [p["name"] for p in ins["presets"]] == ["hopper-serving", "blackwell-serving", "tpu-v4-pope"]
    assert all(p["matches_catalog"] for p in ins["presets"])
    assert ins["summary"]["median_abs_error"] == pytest.approx(result["summary"]["median_abs_error"], rel=1e-9)


def test_leave_one_out_holds_out_each_record(cv):
    from rackmath.engine.efficiency import Efficiency

    n_fam = {f: s["n"] for f, s in cv["in_sample"]["summary_by_family"].items()}
    assert n_fam == {"blackwell": 16, "hopper": 27, "tpu-v4": 4}
    folds = cv["loo"]["folds"]
    assert len(folds) == 47 and all(len(f["held_out"]) == 1 and f["n_train"] == n_fam[f["family"]] - 1
                                    for f in folds)
    recs = {r.id: r for r in _measured()}
    moved = 0
    for f, row in zip(folds, cv["loo"]["records"]):
        assert row["id"] == f["held_out"][0]
        if row["id"] in ("T9-H100", "T11-B200", "P5"):  # the held-out prediction is the fold's refit's
            eff = Efficiency(row["preset"], *(f[k] for k in ("eta_compute", "eta_memory", "eta_comm",
                                                              "step_overhead_s")))
            assert row["predicted"] == pytest.approx(validation.predict(recs[row["id"]], efficiency=eff)[0],
                                                     rel=1e-12)
        moved += row["error"] != row["in_sample_error"]
    assert moved >= 40  # refits without the record predict it differently from the in-sample fit


def test_out_of_sample_error_is_bounded(cv):
    """Measured (docs/validation.md): LOO 8.4% (hopper 8.4%, blackwell 7.9%, TPU v4 23.1%); LOSO 9.0%."""
    loo, src = cv["loo"], cv["source"]
    assert loo["summary"]["n"] == 47
    assert loo["summary"]["median_abs_error"] <= 0.15
    assert loo["summary"]["within_20pct"] >= 30
    assert loo["summary_by_family"]["hopper"]["median_abs_error"] <= 0.15
    assert loo["summary_by_family"]["blackwell"]["median_abs_error"] <= 0.15
    assert loo["summary_by_family"]["tpu-v4"]["median_abs_error"] <= 0.40  # 4 records for 4 numbers
    assert src["summary"]["n"] == 43  # Pope et al. is TPU v4's only source: nothing left to fit on
    assert [f["group"] for f in src["not_predictable"]] == ["pope-2022"]
    assert src["summary"]["median_abs_error"] <= 0.15
    assert src["summary_by_family"]["hopper"]["median_abs_error"] <= 0.20
    assert set(src["summary_by_source"]) == {"deepseek-day6", "mlperf-v4.1", "trtllm-h100", "trtllm-h200",
                                             "trtllm-b200", "trtllm-gb200"}
    for f in src["folds"]:  # a whole source held out, the rest of the family fitted on
        assert f["n_train"] + len(f["held_out"]) == cv["in_sample"]["summary_by_family"][f["family"]]["n"]
        assert all(validation.source_group(r) == f["group"] for r in _measured() if r.id in f["held_out"])


def test_cross_validate_rejects_unknown_names():
    from rackmath.analyses.calibration import cross_validate
    from rackmath.errors import InputError

    with pytest.raises(InputError, match="family"):
        cross_validate(families=["tpu-v9"])
    with pytest.raises(InputError, match="scheme"):
        cross_validate(schemes=("kfold",))


@pytest.fixture
def tpu_only_cv(monkeypatch):
    """`validate --cv` restricted to TPU v4 (real refits, a second instead of ten)."""
    from rackmath.analyses import calibration

    real = calibration.cross_validate
    monkeypatch.setattr(calibration, "cross_validate", lambda **kw: real(families=["tpu-v4"], **kw))


def test_cli_validate_json_shape_unchanged_without_cv():
    code, out, err = run_cli("validate", "--json")
    assert code == 0, err
    assert set(json.loads(out)) == {"records", "summary", "summary_derived", "summary_by_family"}


def test_cli_validate_cv_json(tpu_only_cv):
    code, out, err = run_cli("validate", "--cv", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert set(d) == {"records", "summary", "summary_derived", "summary_by_family", "cross_validation"}
    c = d["cross_validation"]
    assert c["rounds"] == 4 and c["loo"]["summary"]["n"] == 4
    assert 0.1 <= c["loo"]["summary"]["median_abs_error"] <= 0.40  # 23.1%: 4 numbers fitted on 3 records
    assert c["loo"]["summary"]["median_abs_error"] > c["in_sample"]["summary"]["median_abs_error"]
    assert c["source"]["summary"]["n"] == 0 and c["source"]["not_predictable"][0]["group"] == "pope-2022"


def test_cli_validate_cv_table(tpu_only_cv):
    code, out, err = run_cli("validate", "--cv")
    assert code == 0, err
    assert "LOO" in out and "LOSO" in out and "pope-2022" in out and "23.1%" in out


def test_cli_validate_cv_with_ideal_is_one_line_error():
    code, out, err = run_cli("validate", "--cv", "--ideal")
    assert code == 2 and err.strip().startswith("error:") and len(err.strip().splitlines()) == 1
