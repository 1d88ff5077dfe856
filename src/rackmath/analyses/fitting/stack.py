"""The staged fit of issue 34: silicon from measured kernel curves, the stack as what is left, per stack version.

Stage 1 fixes every record's silicon (τ, η_c, M½, η_m, α_coll, η_comm) from its chip's measured curves
(``engine.efficiency.measured_efficiency``; a chip without curves keeps its fitted preset). Stage 2 fits, per stack
version, only its five stack times — the per-step scheduler time t_sched, the per-sequence time τ_seq, the eager
dispatch time per kernel τ_eager, the per-request time t_request and the stack's time per kernel τ_stack on top of
the silicon's floor (τ_k = τ_silicon + τ_stack: launch gaps in its graphs, work it does not fuse; what the fitted
presets' single τ mixed with the silicon) — on that version's records, minimising the
robust mean |log error| (``calibration._logerr``) by coordinate descent on shrinking grids, every candidate of a
grid evaluated in one broadcast engine call per record (``validation.predict_many``). Five parameters and one
version's records make a fit cheap (seconds), so leaving one InferenceMAX group out (model × chip × framework) and
leaving one stack version out refit only what they touch:

* a group out: each version in the group is refitted on its other records; a version with no other record takes
  its engine's fit on every other version's records (the group left out);
* a version out: its records are predicted with its engine's fit on every other version's records (the year-old
  published builds included) — transfer to a release never seen.

A record's stack version is ``Record.stack`` (``sglang@0.5.7``; a published record that states no version is its
framework alone, ``sglang``: a version of its own). No I/O here: ``benchmarks/stack_fit.py`` prints and writes.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

#: (field, lower, upper, initial grid half-width) of each fitted host time (physical ranges as ``FIT_PARAMS``).
STACK_PARAMS = (("sched", 0.0, 5e-3, 2e-3), ("seq", 0.0, 1e-4, 4e-5), ("eager", 0.0, 1e-4, 4e-5),
                ("request", 0.0, 0.3, 0.12), ("kernel", 0.0, 2e-5, 8e-6))
#: Engines whose host-time fields a candidate sets (every record reads only its own engine's, or their mean).
_ENGINES = ("trtllm", "vllm", "sglang", "vllm_v0")
#: Coordinate-descent rounds and grid points per coordinate.
ROUNDS, POINTS = 4, 9
#: At most this many records fit an engine's host times (a version left out, or a group's only version): every n-th
#: record of the engine's other versions, in file order — what keeps a fold to a minute on one core.
MAX_ENGINE_RECORDS = 160
#: Weight of the pull towards the start (the engine's preset values), per squared initial half-width: breaks ties
#: of a parameter the version's records do not identify (TTFT alone identifies t_request) without moving the others.
PRIOR = 1e-3


def version_of(rec) -> str:
    """A record's stack version: ``framework@version``, the framework alone if it states none, else generic."""
    return rec.stack or "generic"


def engine_of(label: str) -> str:
    """The engine whose host-time fields a stack version uses (``trtllm``, ``vllm``, ``sglang``, ``vllm_v0``,
    ``generic``)."""
    from ...engine.efficiency import STACK_HOST_OF
    from ..serving.serve import load_stack

    from ...errors import InputError

    try:
        name = load_stack(None if label == "generic" else label).name
    except InputError:  # a version the stack list does not name (a published record's): its framework's engine
        name = load_stack(label.partition("@")[0]).name
    return STACK_HOST_OF.get(name, name)


def silicon_efficiency(rec, measured: bool = True):
    """The efficiency whose silicon a record is predicted with: its chip's measured one (``measured``) or the
    chip's calibrated preset."""
    from ...engine.efficiency import default_efficiency, measured_efficiency
    from ...specs.hardware import load_hardware

    if not measured:
        return default_efficiency(rec.chip)
    return replace(measured_efficiency(load_hardware(rec.chip).chip), per_version=False)


def _names():
    from ...engine.efficiency import NUMERIC

    return tuple(NUMERIC)


def host_vector(eff, engine: str) -> np.ndarray:
    """(sched, seq, eager, request, τ_stack = 0) of an engine in a preset (the generic stack: the three engines'
    mean)."""
    from ...engine.efficiency import stack_eager_s, stack_request_s, stack_sched_s, stack_seq_s

    st = {"vllm_v0": "vllm-v0"}.get(engine, engine)
    return np.array([stack_sched_s(eff, st), stack_seq_s(eff, st), stack_eager_s(eff, st),
                     stack_request_s(eff, st) - eff.request_overhead_s, 0.0])


def _matrix(eff, H: np.ndarray) -> np.ndarray:
    """(K, P) candidate matrix: ``eff``'s numeric fields, the host times of every engine replaced by rows of H."""
    names = _names()
    base = np.array([float(getattr(eff, n)) for n in names])
    X = np.tile(base, (len(H), 1))
    X[:, names.index("kernel_latency_s")] += H[:, 4]  # τ_k = τ_silicon + τ_stack
    for j, (k, *_r) in enumerate(STACK_PARAMS[:4]):
        for e in _ENGINES:
            n = f"{k}_{e}_s"
            if n in names:
                X[:, names.index(n)] = H[:, j]
    return X


class Predictor:
    """Predictions of records under candidate host times with each record's silicon fixed (memoised silicon)."""

    def __init__(self, measured: bool = True):
        self.measured = measured
        self._eff = {}

    def eff(self, rec):
        if rec.chip not in self._eff:
            self._eff[rec.chip] = silicon_efficiency(rec, self.measured)
        return self._eff[rec.chip]

    def __call__(self, rec, H) -> np.ndarray:
        from .validation import predict_many

        return predict_many(rec, _matrix(self.eff(rec), np.atleast_2d(H)), _names(), name="staged")


def fit_hosts(recs, predictor: Predictor, start, prior: float = PRIOR) -> np.ndarray:
    """The stack times (sched, seq, eager, request, τ_stack) minimising mean robust |log error| over ``recs``, by coordinate
    descent from ``start`` on grids of :data:`POINTS` that halve each of :data:`ROUNDS` rounds."""
    from .calibration import _logerr

    x = np.array(start, dtype=float)
    if not recs:
        return x
    x0 = x.copy()
    meas = np.array([r.value for r in recs])
    widths = np.array([w for *_r, w in STACK_PARAMS])
    for _ in range(ROUNDS):
        for j, (_k, lo, hi, _w) in enumerate(STACK_PARAMS):
            grid = np.unique(np.clip(x[j] + np.linspace(-widths[j], widths[j], POINTS), lo, hi))
            H = np.tile(x, (len(grid), 1))
            H[:, j] = grid
            P = np.stack([predictor(r, H) for r in recs])  # (records, K)
            loss = _logerr(P, meas[:, None]).mean(axis=0) + prior * (((grid - x0[j]) / STACK_PARAMS[j][3]) ** 2)
            x[j] = grid[int(np.argmin(loss))]
        widths = widths / 2.0
    return x


def predict(recs, predictor: Predictor, hosts: dict) -> np.ndarray:
    """Each record's prediction under ``hosts`` ({version label: host vector})."""
    return np.array([predictor(r, hosts[version_of(r)])[0] for r in recs])


def _by(recs, key):
    out = {}
    for r in recs:
        out.setdefault(key(r), []).append(r)
    return out


def fit_all(recs, predictor: Predictor, starts: dict) -> dict:
    """{version: host vector} fitted on each version's records (``starts``: {engine: start vector})."""
    return {v: fit_hosts(rs, predictor, starts[engine_of(v)]) for v, rs in _by(recs, version_of).items()}


def engine_fit(recs, predictor: Predictor, starts: dict, engine: str, exclude) -> np.ndarray:
    """One host vector for an engine, fitted on the records of its versions not excluded (``exclude(rec)``; at most
    :data:`MAX_ENGINE_RECORDS`, evenly spaced)."""
    train = [r for r in recs if engine_of(version_of(r)) == engine and not exclude(r)]
    step = max(1, -(-len(train) // MAX_ENGINE_RECORDS))
    return fit_hosts(train[::step], predictor, starts[engine])


#: Weight of the engine's pooled times as the prior of each version's in the hierarchical fit (``hierarchical``).
HIERARCHICAL_PRIOR = 0.02


def fit_version(recs, predictor: Predictor, starts: dict, version: str, exclude=lambda r: False,
                hierarchical: bool = False) -> np.ndarray:
    """One version's times on its records not excluded; with none, its engine's pooled fit. ``hierarchical``: the
    engine's pooled fit (same exclusion) is the start and the prior (weight :data:`HIERARCHICAL_PRIOR`) of the
    version's own."""
    train = [r for r in recs if version_of(r) == version and not exclude(r)]
    e = engine_of(version)
    if not train:
        return engine_fit(recs, predictor, starts, e, exclude)
    if hierarchical:
        pooled = engine_fit(recs, predictor, starts, e, exclude)
        return fit_hosts(train, predictor, pooled, prior=HIERARCHICAL_PRIOR)
    return fit_hosts(train, predictor, starts[e])


def leave_one_group_out(recs, predictor: Predictor, starts: dict, groups=None, hierarchical: bool = False) -> dict:
    """{record id: prediction} of every InferenceMAX record with its group (``Record.group``) left out of the fit."""
    out = {}
    by_group = _by([r for r in recs if r.group], lambda r: r.group)
    for g in groups or sorted(by_group):
        held = by_group[g]
        hosts = {v: fit_version(recs, predictor, starts, v, lambda r: r.group == g, hierarchical)
                 for v in {version_of(r) for r in held}}
        out.update(zip((r.id for r in held), predict(held, predictor, hosts)))
    return out


def leave_one_version_out(recs, predictor: Predictor, starts: dict, versions=None) -> dict:
    """{record id: prediction} of every record of each listed version with that version left out (its engine's
    fit on the other versions' records)."""
    out = {}
    by_v = _by(recs, version_of)
    for v in versions or sorted(by_v):
        e = engine_of(v)
        h = engine_fit(recs, predictor, starts, e, lambda r: version_of(r) == v)
        out.update(zip((r.id for r in by_v[v]), predict(by_v[v], predictor, {v: h})))
    return out


#: Metric classes of the report: output tokens/s per GPU (per decode GPU on a disaggregated row), TPOT, TTFT.
METRIC_CLASS = {"output_tok_s_per_gpu": "output tok/s/GPU", "output_tok_s_per_decode_gpu": "output tok/s/GPU",
                "tpot_s": "TPOT", "ttft_s": "TTFT"}


def report(recs, predicted: dict) -> dict:
    """{metric class: {records, median_abs, median_signed, within_2x}} of the records predicted."""
    out = {}
    for r in recs:
        c = METRIC_CLASS.get(r.metric, r.metric)
        p = predicted.get(r.id)
        if p is not None:
            out.setdefault(c, []).append(p / r.value - 1.0)
    res = {}
    for c, e in out.items():
        e = np.asarray(e, dtype=float)
        ratio = e + 1.0
        ok = np.isfinite(ratio) & (ratio > 0)
        res[c] = {"records": len(e), "median_abs": float(np.median(np.abs(np.where(ok, e, np.inf)))),
                  "median_signed": float(np.median(np.where(ok, e, np.inf))),
                  "within_2x": int(np.sum(ok & (ratio <= 2.0) & (ratio >= 0.5)))}
    return res


__all__ = ["STACK_PARAMS", "Predictor", "fit_hosts", "fit_all", "leave_one_group_out", "leave_one_version_out",
           "report", "version_of", "engine_of", "host_vector"]
