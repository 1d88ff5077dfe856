"""Calibration: fit the efficiency presets on the public records (and only on them).

A preset has four numbers (``engine.efficiency.Efficiency``): η_compute, η_memory and
η_comm scale peak FLOP/s, HBM bandwidth and network bandwidth; ``step_overhead_s`` is a
fixed time per step (kernel launches, scheduling, sampling). Calibrated presets
compose the terms kernel-serially (``serving.serial_stage_time``).

One preset per hardware family (the serving stacks differ more between families than
between regimes within a family, and the per-regime records are too few to fit apart):

* ``hopper-serving`` — H100 / H200 / H800: TensorRT-LLM perf-overview rows, MLPerf v4.1
  Llama 2 70B, DeepSeek's decode and prefill units.
* ``blackwell-serving`` — B200 / GB200: TensorRT-LLM perf-overview rows.
* ``tpu-v4-pope`` — TPU v4: Pope et al.'s four Table 2 rows.

Method (docs/validation.md): minimise the mean |log(predicted / measured)| over the
family's measured records by coordinate descent on a grid (η in [0.05, 1], overhead in
[0, 50 ms]), a few rounds with the grid refined around the best point. The log error
treats over- and under-prediction alike; the mean (not the median) keeps every record
pulling. Nothing is fitted per record: one preset per family, and the unpublished
inputs (concurrency at max load, KV dtype) follow one documented rule per table.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PARAMS = ("eta_compute", "eta_memory", "eta_comm", "step_overhead_s")


@dataclass(frozen=True)
class PresetSpec:
    name: str
    families: tuple  # validation Record.family values it is fitted on
    chips: tuple  # chips it is the default for
    regime: str
    description: str


PRESETS = (
    PresetSpec("hopper-serving", ("hopper",), ("h100", "h200", "h800", "h20"), "serving",
               "Hopper GPUs under TensorRT-LLM-class serving stacks (continuous batching, FP8)"),
    PresetSpec("blackwell-serving", ("blackwell",), ("b200", "gb200", "b300", "gb300"), "serving",
               "Blackwell GPUs under TensorRT-LLM (continuous batching, NVFP4)"),
    PresetSpec("tpu-v4-pope", ("tpu-v4",), ("tpu-v4",), "serving",
               "TPU v4 running PaLM 540B with Pope et al.'s partitioned JAX inference"),
)


def objective(predicted, measured):
    """Mean |log(predicted / measured)| (symmetric in over- and under-prediction)."""
    p = np.asarray(predicted, dtype=float)
    m = np.asarray(measured, dtype=float)
    return float(np.mean(np.abs(np.log(np.maximum(p, 1e-300) / m))))


def _eff(name, x):
    from ..engine.efficiency import Efficiency

    return Efficiency(name=name, eta_compute=float(x[0]), eta_memory=float(x[1]), eta_comm=float(x[2]),
                      step_overhead_s=float(x[3]))


def _grid(i, center, width):
    """Candidate values of parameter ``i`` around ``center`` (η in [0.05, 1], overhead in [0, 50 ms])."""
    if i < 3:
        lo, hi = max(0.05, center - width), min(1.0, center + width)
        return np.unique(np.round(np.linspace(lo, hi, 9), 4))
    w = width * 0.02  # seconds
    return np.unique(np.round(np.clip(np.linspace(center - w, center + w, 9), 0.0, 0.05), 6))


def fit_preset(recs, name="fit", x0=(0.6, 0.8, 0.6, 0.002), rounds=4, predict=None):
    """Fit (η_c, η_m, η_comm, overhead) on ``recs`` by coordinate descent; returns (Efficiency, objective).

    ``predict(record, efficiency) -> value`` defaults to ``validation.predict``.
    """
    if predict is None:
        from .validation import predict as _p

        def predict(rec, eff):
            return _p(rec, efficiency=eff)[0]

    meas = np.array([r.measured for r in recs], dtype=float)

    def score(x):
        e = _eff(name, x)
        return objective([predict(r, e) for r in recs], meas)

    x = list(x0)
    best = score(x)
    width = 0.4
    for _ in range(rounds):
        for i in range(4):
            for v in _grid(i, x[i], width):
                cand = list(x)
                cand[i] = float(v)
                s = score(cand)
                if s < best - 1e-12:
                    best, x = s, cand
        width /= 2.0
    return _eff(name, x), best


def fit_all(progress=None) -> list[dict]:
    """Fit every preset of :data:`PRESETS` on its family's measured records (no I/O; returns dicts)."""
    from .validation import records

    out = []
    for spec in PRESETS:
        recs = [r for r in records() if r.kind == "measured" and r.family in spec.families]
        if not recs:
            continue
        eff, obj = fit_preset(recs, name=spec.name)
        if progress:
            progress(spec.name, obj)
        out.append(dict(name=spec.name, chips=list(spec.chips), regime=spec.regime, composition="serial",
                        eta_compute=eff.eta_compute, eta_memory=eff.eta_memory, eta_comm=eff.eta_comm,
                        step_overhead_s=eff.step_overhead_s, description=spec.description,
                        fitted_on=[r.id for r in recs], objective_mean_abs_log=obj))
    return out


def as_toml(presets: list[dict]) -> str:
    """The fitted presets as ``[[efficiency]]`` TOML tables (what ships in specs/data/efficiency/)."""
    lines = []
    for p in presets:
        lines += ["[[efficiency]]", f'name = "{p["name"]}"',
                  "chips = [" + ", ".join(f'"{c}"' for c in p["chips"]) + "]",
                  f'regime = "{p["regime"]}"', f'composition = "{p["composition"]}"',
                  f'eta_compute = {p["eta_compute"]:.4g}', f'eta_memory = {p["eta_memory"]:.4g}',
                  f'eta_comm = {p["eta_comm"]:.4g}', f'step_overhead_s = {p["step_overhead_s"]:.4g}',
                  f'description = "{p["description"]}"',
                  f'source = "fitted by rackmath.analyses.calibration (mean |log error| {p["objective_mean_abs_log"]:.3f}) '
                  f'on published.md §1 records: {", ".join(p["fitted_on"])}"', ""]
    return "\n".join(lines)


__all__ = ["PRESETS", "PresetSpec", "fit_preset", "fit_all", "objective", "as_toml"]
