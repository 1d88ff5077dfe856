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

:func:`cross_validate` measures how well that generalises: the same fitter refitted without
each record (leave one out) or each source (leave one source out), predicting what it left out
(``rackmath validate --cv``; figures in docs/validation.md, "How far to trust it").
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


class PredictionCache:
    """Predictions of records at candidate parameter sets, evaluated in vectorized batches and memoised.

    ``table(recs, X)`` returns the (len(recs), K) predictions of each record at each row of ``X``
    (PARAMS order). Candidates not seen before for a record are evaluated together in one
    ``predict_many(record, X_missing, name)`` call (``validation.predict_many``: the engine
    broadcasts the efficiency's fields). The grid is rounded (``_grid``), so refits on
    overlapping subsets of records — cross-validation folds — meet the same candidates and reuse
    them; the cache changes how often the model is evaluated, never a value.
    """

    def __init__(self, name="fit", predict_many=None):
        if predict_many is None:
            from .validation import predict_many
        self.name = name
        self._many = predict_many
        self._memo = {}  # (record id, candidate tuple) -> prediction
        self.evaluated = 0  # predictions computed (not memoised)

    def table(self, recs, X) -> np.ndarray:
        X = np.atleast_2d(np.asarray(X, dtype=float))
        keys = [tuple(float(v) for v in x) for x in X]
        out = np.empty((len(recs), len(keys)))
        for i, rec in enumerate(recs):
            missing = [j for j, k in enumerate(keys) if (rec.id, k) not in self._memo]
            if missing:
                vals = np.asarray(self._many(rec, X[missing], self.name), dtype=float).reshape(-1)
                self.evaluated += len(missing)
                for j, v in zip(missing, vals):
                    self._memo[(rec.id, keys[j])] = float(v)
            out[i] = [self._memo[(rec.id, k)] for k in keys]
        return out


def fit_preset(recs, name="fit", x0=(0.6, 0.8, 0.6, 0.002), rounds=4, predict=None, cache=None):
    """Fit (η_c, η_m, η_comm, overhead) on ``recs`` by coordinate descent; returns (Efficiency, objective).

    What is fitted: the four numbers of one preset, on exactly the records ``recs`` (a family's
    measured records, or any subset of them: cross-validation passes a family without its held-out
    records). How: start at ``x0``; each round sweeps the four parameters in turn, scoring the 9 grid
    values of :func:`_grid` around the current value (the others held) with :func:`objective`, and
    keeps the first strictly better one; the grid width halves each round (η ± 0.4, 0.2, 0.1, 0.05;
    overhead ± 8, 4, 2, 1 ms). The 9 candidates of a sweep are predicted in one vectorized call per
    record (:class:`PredictionCache`), which picks exactly what scoring them one by one would.

    ``predict(record, efficiency) -> value`` replaces ``validation.predict`` (scored one by one);
    ``cache`` (a :class:`PredictionCache` named ``name``) shares predictions between fits.
    """
    if cache is None:
        many = None
        if predict is not None:
            def many(rec, X, nm):
                return np.array([predict(rec, _eff(nm, x)) for x in X])
        cache = PredictionCache(name, many)
    recs = list(recs)
    if not recs:
        from ..errors import InputError

        raise InputError("records", "no records to fit on", "at least one measured record")
    meas = np.array([r.measured for r in recs], dtype=float)

    def scores(X):
        P = cache.table(recs, X)
        return [objective(P[:, j], meas) for j in range(P.shape[1])]

    x = [float(v) for v in x0]
    best = scores([x])[0]
    width = 0.4
    for _ in range(rounds):
        for i in range(4):
            cands = []
            for v in _grid(i, x[i], width):
                cand = list(x)
                cand[i] = float(v)
                cands.append(cand)
            for cand, s in zip(cands, scores(cands)):  # as if scored one by one: the first strict improvement
                if s < best - 1e-12:
                    best, x = s, cand
        width /= 2.0
    return _eff(name, x), best


def family_records(spec: PresetSpec, recs=None) -> list:
    """The measured records a preset is fitted on (``recs`` default: every public record)."""
    from .validation import records

    return [r for r in (records() if recs is None else recs) if r.kind == "measured" and r.family in spec.families]


def fit_all(progress=None, cache=None) -> list[dict]:
    """Fit every preset of :data:`PRESETS` on its family's measured records (no I/O; returns dicts).

    ``cache`` maps a preset name to its :class:`PredictionCache` (shared with a cross-validation run).
    """
    out = []
    for spec in PRESETS:
        recs = family_records(spec)
        if not recs:
            continue
        c = None if cache is None else cache.setdefault(spec.name, PredictionCache(spec.name))
        eff, obj = fit_preset(recs, name=spec.name, cache=c)
        if progress:
            progress(spec.name, obj)
        out.append(dict(name=spec.name, chips=list(spec.chips), regime=spec.regime, composition="serial",
                        eta_compute=eff.eta_compute, eta_memory=eff.eta_memory, eta_comm=eff.eta_comm,
                        step_overhead_s=eff.step_overhead_s, description=spec.description,
                        fitted_on=[r.id for r in recs], objective_mean_abs_log=obj))
    return out


CV_SCHEMES = ("loo", "source")


def cross_validate(schemes=CV_SCHEMES, rounds=4, families=None, progress=None) -> dict:
    """Out-of-sample error of the calibration: refit without the held-out records, predict them.

    What is fitted: for every fold, the held-out records' family preset, refitted by
    :func:`fit_preset` (the same fitter, grid and ``rounds`` as the shipped presets) on the
    family's other measured records; the held-out records are then predicted with that refit.
    Nothing else changes between folds (concurrency rules, KV dtype and request shapes are fixed
    rules, not fitted). Schemes:

    * ``"loo"`` — leave one record out: one fold per measured record.
    * ``"source"`` — leave one source out: every record of one publication / table is held out
      together (``validation.source_group``: Pope et al., DeepSeek, MLPerf, one TensorRT-LLM hardware
      column), since records of one source share a stack, a harness and its biases. A source that
      is its family's only one (Pope et al. for TPU v4) leaves nothing to fit: it is listed under
      ``not_predictable`` and not in the summaries.

    ``families`` limits the run to those families (e.g. ``["tpu-v4"]``). Returns a dict:
    ``in_sample`` (the full-family refit: its presets, whether they equal the shipped catalog
    presets, its ``records`` and the summaries of its in-sample errors) and one entry per scheme with ``records``
    (held-out predictions and errors), ``summary``, ``summary_by_family``, ``folds`` (each fold's
    refit) and, for ``"source"``, ``summary_by_source``. Summaries are ``validation.summarize``
    (median |error|, mean |log ratio|, within ±20%, worst).
    """
    from ..engine.efficiency import load_efficiency
    from ..errors import InputError, RackmathError
    from .validation import error, source_group, summarize

    if int(rounds) != rounds or rounds < 1:
        raise InputError("rounds", f"{rounds!r}", "a whole number of refinement rounds ≥ 1 (shipped presets: 4)")
    bad = [s for s in schemes if s not in CV_SCHEMES]
    if bad:
        raise InputError("schemes", f"unknown cross-validation scheme {bad[0]!r}", ", ".join(CV_SCHEMES))
    specs = [sp for sp in PRESETS if families is None or any(f in families for f in sp.families)]
    if families is not None:
        known = {f for sp in PRESETS for f in sp.families}
        unknown = [f for f in families if f not in known]
        if unknown:
            raise InputError("families", f"no preset is fitted on family {unknown[0]!r}", ", ".join(sorted(known)))

    def pdict(eff):
        return {k: float(getattr(eff, k)) for k in PARAMS}

    def row(rec, pred, spec, fit_err=None):
        r = {"id": rec.id, "family": rec.family, "source": source_group(rec), "preset": spec.name,
             "measured": rec.measured, "unit": rec.unit, "predicted": float(pred),
             "error": float(error(pred, rec.measured))}
        if fit_err is not None:
            r["in_sample_error"] = fit_err
        return r

    caches, fams = {}, {}
    in_rows, presets = [], []
    for spec in specs:
        recs = family_records(spec)
        if not recs:
            continue
        cache = caches[spec.name] = PredictionCache(spec.name)
        eff, obj = fit_preset(recs, name=spec.name, rounds=rounds, cache=cache)
        x = [[eff.eta_compute, eff.eta_memory, eff.eta_comm, eff.step_overhead_s]]
        pred = cache.table(recs, x)[:, 0]
        try:
            shipped = load_efficiency(spec.name)
            same = all(abs(float(getattr(shipped, k)) - v) <= 5e-4 * max(abs(v), 1e-3)
                       for k, v in pdict(eff).items())
        except RackmathError:  # a user catalog without the preset
            same = False
        presets.append(dict(name=spec.name, **pdict(eff), objective_mean_abs_log=obj, n=len(recs),
                            matches_catalog=same))
        fams[spec.name] = (spec, recs, {r.id: float(e) for r, e in zip(recs, error(pred, [r.measured for r in recs]))})
        in_rows += [row(r, p, spec) for r, p in zip(recs, pred)]
        if progress:
            progress("in-sample", spec.name)

    def by(rows, key):
        return {k: summarize([r for r in rows if r[key] == k]) for k in sorted({r[key] for r in rows})}

    out = {"method": "refit each family's preset without the held-out records (same fitter, grid and rounds as "
                     "the shipped presets), predict the held-out records",
           "rounds": int(rounds),
           "in_sample": {"presets": presets, "records": in_rows, "summary": summarize(in_rows),
                         "summary_by_family": by(in_rows, "family")}}
    for scheme in schemes:
        rows, folds, skipped = [], [], []
        for name, (spec, recs, fit_errs) in fams.items():
            if scheme == "loo":
                groups = [(r.id, [r]) for r in recs]
            else:
                order = list(dict.fromkeys(source_group(r) for r in recs))
                groups = [(g, [r for r in recs if source_group(r) == g]) for g in order]
            for g, held in groups:
                ids = {r.id for r in held}
                train = [r for r in recs if r.id not in ids]
                if not train:
                    skipped.append({"held_out": sorted(ids), "family": spec.families[0], "group": g,
                                    "reason": f"no other {spec.families[0]} record to fit {spec.name} on"})
                    continue
                eff, obj = fit_preset(train, name=spec.name, rounds=rounds, cache=caches[name])
                x = [[eff.eta_compute, eff.eta_memory, eff.eta_comm, eff.step_overhead_s]]
                pred = caches[name].table(held, x)[:, 0]
                rows += [row(r, p, spec, fit_errs[r.id]) for r, p in zip(held, pred)]
                folds.append({"group": g, "family": spec.families[0], "held_out": [r.id for r in held],
                              "n_train": len(train), **pdict(eff), "objective_mean_abs_log": obj})
                if progress:
                    progress(scheme, g)
        order = {r["id"]: i for i, r in enumerate(in_rows)}
        rows.sort(key=lambda r: order[r["id"]])
        res = {"records": rows, "summary": summarize(rows), "summary_by_family": by(rows, "family"),
               "folds": folds, "not_predictable": skipped}
        if scheme == "source":
            res["summary_by_source"] = by(rows, "source")
        out[scheme] = res
    out["predictions_evaluated"] = int(sum(c.evaluated for c in caches.values()))
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


__all__ = ["PRESETS", "PresetSpec", "PredictionCache", "fit_preset", "fit_all", "family_records", "cross_validate",
           "CV_SCHEMES", "objective", "as_toml"]
