"""Calibration: fit efficiency parameters on validation records, and measure how well they transfer.

Generic over the parameter vector the efficiency model declares. A :class:`ParamSpec` lists
the parameters (:class:`Param`: name = an ``Efficiency`` field, bounds, start, initial grid
half-width, and whether it is **shared** by every hardware family or fitted **per family**);
a *predictor* ``predictor(record, X, names) -> (K,)`` predicts one record under K candidate
parameter vectors at once (default :func:`validation.predict_many`, which builds
``Efficiency(**dict(zip(names, columns)))`` and lets the engine broadcast). Nothing here knows
what the parameters mean.

* :func:`fit` — minimise the mean |log(predicted / measured)| over the records by coordinate
  descent on a grid (each coordinate: 9 values around the current one, within bounds; the grid
  half-width halves each round). Free coordinates: one per shared parameter, one per
  (per-family parameter, family present). A family absent from the records (a chip never
  fitted) uses the **cross-family** values: the same parameters fitted with every family tied.
* :func:`.crossval.cross_validate` — out-of-group errors: leave one source out (``source_group``), one
  hardware family out (hopper / blackwell / amd / tpu …), one model family out (deepseek,
  qwen, llama, gpt-oss, kimi …), and leave one record out on request. Each fold refits on what
  remains and predicts what was left out; median, p90, worst ratio overall and by group, with
  the number of fitted parameters next to the number of records and independent sources.

Objective: symmetric in over- and under-prediction; the mean (not the median) keeps every record
pulling. Nothing is fitted per record: the unpublished inputs (concurrency at max load, KV dtype,
mean lengths of variable-length runs) follow the rules written on the records.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ...errors import InputError
from .cache import PredictionCache, drive, together
from .validation import records
from ...engine import efficiency as E
from ...specs.hardware import chips as catalog_chips
from ...specs.records import HARDWARE_FAMILIES, toml_value
from ...units import counted

# --------------------------------------------------------------------------------------
# The parameter vector
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """One fitted parameter: an efficiency field, its bounds, start, initial grid half-width, sharing."""

    name: str
    lo: float
    hi: float
    x0: float
    width: float  # initial half-width of the 9-point grid (halves each round)
    per_family: bool = True  # False: one value shared by every hardware family
    decimals: int = 4  # grid values are rounded (so folds meet the same candidates and reuse predictions)
    description: str = ""
    prior: tuple = ()  # ((family or None, value), …): values measured on silicon that the fit is pulled toward
    prior_sigma: float = 0.1  # width of a prior in log units (0.1 ≈ ±10 %)
    prior_weight: float = 2.0  # a prior weighs as this many records at |log(θ/θ₀)| = σ
    families: tuple = ()  # per-family parameter fitted only for these families (the others hold x0); () = all

    def fitted_for(self, family) -> bool:
        """Whether the fit adjusts this parameter for ``family`` (None: the shared value)."""
        if family is None:
            return not self.per_family
        return self.per_family and (not self.families or family in self.families)

    def penalty(self, theta, family=None):
        """Prior penalty w · (log(θ/θ₀) / σ)² of this parameter at θ for one family (0 where no prior).

        A Gaussian prior in log space (a ridge toward a measurement): where the records identify the
        parameter the prior barely moves it; where a fold leaves few records that do, the measured value
        holds instead of whatever the remaining records tolerate. A prior with family None applies to
        every family (and to a shared parameter).
        """
        theta = np.asarray(theta, dtype=float)
        for fam, value in self.prior:
            if fam is None or fam == family:
                t = np.maximum(theta, 1e-300)
                return self.prior_weight * (np.log(t / float(value)) / self.prior_sigma) ** 2
        return np.zeros_like(theta)

    def grid(self, center: float, width: float, points: int = 9) -> np.ndarray:
        lo, hi = max(self.lo, center - width), min(self.hi, center + width)
        return np.unique(np.round(np.linspace(lo, hi, points), self.decimals))


@dataclass(frozen=True)
class ParamSpec:
    """The parameters a fit adjusts, which are per family, and how records are grouped into families."""

    params: tuple
    family_of: str = "hardware_family"  # Record attribute naming a record's family
    rounds: int = 4
    points: int = 9
    name: str = "fit"
    sweeps: int = 1  # sweeps over every coordinate per round (more: coupled parameters converge further)
    weighting: str = "record"  # "record": every record counts 1; "source": every source_group counts 1 in total;
    # "sqrt": a source of n records counts sqrt(n) in total
    starts: tuple = ()  # extra starting points ({param name: x0}, …): the fit keeps the best descent of all
    outside_2x_slope: float = 0.0  # loss added per unit of |log(p/m)| beyond log 2 (0: off; see _logerr)

    @property
    def names(self) -> tuple:
        return tuple(p.name for p in self.params)

    def family(self, rec) -> str:
        return str(getattr(rec, self.family_of))

    def tied(self) -> "ParamSpec":
        """Every parameter shared (the cross-family fit); one fitted for some families only holds its x0 there (a
        chip of no known family is not assumed to share their difference)."""
        return replace(self, params=tuple(replace(p, per_family=False, families=(),
                                                  **({"lo": p.x0, "hi": p.x0} if p.families else {}))
                                          for p in self.params))

    def describe(self) -> list[dict]:
        return [{"name": p.name, "lo": p.lo, "hi": p.hi, "x0": p.x0,
                 "sharing": ("per family" + (f" ({', '.join(p.families)} only)" if p.families else "")
                             if p.per_family else "shared"), "description": p.description,
                 **({"prior": {fam or "all": v for fam, v in p.prior}, "prior_sigma": p.prior_sigma,
                     "prior_weight": p.prior_weight} if p.prior else {})}
                for p in self.params]


#: Today's efficiency model (``engine.efficiency.Efficiency``): four numbers per hardware family.
DEFAULT_SPEC = ParamSpec((
    Param("eta_compute", 0.05, 1.0, 0.6, 0.4, description="achieved share of peak FLOP/s"),
    Param("eta_memory", 0.05, 1.0, 0.8, 0.4, description="achieved share of HBM bandwidth"),
    Param("eta_comm", 0.05, 1.0, 0.6, 0.4, description="achieved share of network bandwidth"),
    Param("step_overhead_s", 0.0, 0.05, 0.002, 0.008, decimals=6, description="fixed time per step (s)"),
))

PARAMS = DEFAULT_SPEC.names


def default_spec() -> ParamSpec:
    """The parameter vector the efficiency model declares.

    ``engine.efficiency.FIT_PARAMS`` (if the efficiency model defines it): a sequence of dicts
    ``{"name", "lo", "hi", "x0", "width", "per_family" (default True), "decimals" (default 4),
    "description"}`` — one per fitted ``Efficiency`` field; optional ``FIT_FAMILY_OF`` (a record
    attribute, default ``"hardware_family"``), ``FIT_ROUNDS``, ``FIT_SWEEPS``. Otherwise
    :data:`DEFAULT_SPEC` (today's four per-family numbers).
    """
    declared = getattr(E, "FIT_PARAMS", None)
    if not declared:
        return DEFAULT_SPEC
    params = tuple(Param(d["name"], float(d["lo"]), float(d["hi"]), float(d["x0"]), float(d["width"]),
                         bool(d.get("per_family", True)), int(d.get("decimals", 4)), str(d.get("description", "")),
                         prior=tuple((fam, float(v)) for fam, v in dict(d.get("prior", {})).items()),
                         prior_sigma=float(d.get("prior_sigma", 0.1)), prior_weight=float(d.get("prior_weight", 2.0)),
                         families=tuple(d.get("families", ())))
                   for d in declared)
    names = {p.name for p in params}
    starts = tuple(s for s in ({k: float(v) for k, v in dict(x).items() if k in names}
                               for x in getattr(E, "FIT_STARTS", ())) if s)  # those of the declared parameters
    return ParamSpec(params, family_of=getattr(E, "FIT_FAMILY_OF", "hardware_family"),
                     rounds=int(getattr(E, "FIT_ROUNDS", 4)), sweeps=int(getattr(E, "FIT_SWEEPS", 1)),
                     starts=starts)


def describe_counts(n: dict) -> str:
    """The line every report opens with: fitted parameters, how they are shared, records, sources (``counts``)."""
    some = n.get("params_some_families") or {}
    extra = "".join(f" + {p} for {', '.join(fams)} only" for p, fams in some.items())
    return (f'{counted(n["fitted_params"], "fitted parameter")} ({n["params_per_family"]} per '
            f'hardware family × {counted(n["hardware_families"], "family", "families")}{extra} + '
            f'{n["shared_params"]} shared) on {counted(n["records"], "record")} from '
            f'{counted(n["sources"], "independent source")}, '
            f'{counted(n["model_families"], "model family", "model families")}')


def objective(predicted, measured):
    """Mean |log(predicted / measured)| (symmetric in over- and under-prediction)."""
    p = np.asarray(predicted, dtype=float)
    m = np.asarray(measured, dtype=float)
    return float(np.mean(np.abs(np.log(np.maximum(p, 1e-300) / m))))


def _logerr(p, m, outside_2x_slope=0.0):
    """Per-record loss: |log(p/m)|, robust past the efficiency model's ``FIT_ROBUST_CAP`` (if it declares one).

    Beyond the cap c a record's loss grows as c + 0.1·log(1 + |log| − c): a record the model cannot
    describe (a stack far off every other, a mislabelled metric) still pulls, but cannot drag the
    parameters that serve every other record (a soft-L1 / Cauchy-type M-estimator).
    ``outside_2x_slope`` s adds s·max(0, |log| − log 2): a record outside 2× pulls again (issue 9's
    "every record within 2×" as a loss term; 0 in the shipped fit, docs/validation.md).
    """
    p = np.asarray(p, dtype=float)
    ok = np.isfinite(p) & (p > 0)
    e = np.where(ok, np.abs(np.log(np.where(ok, p, 1.0) / m)), 50.0)  # a failed prediction is very wrong

    cap = getattr(E, "FIT_ROBUST_CAP", None)
    if cap:
        c = np.where(e < cap, e, cap + 0.1 * np.log1p(np.maximum(e - cap, 0.0)))
    else:
        c = e
    if outside_2x_slope:
        c = c + float(outside_2x_slope) * np.maximum(e - np.log(2.0), 0.0)
    return c


# The fit
# --------------------------------------------------------------------------------------


@dataclass
class Fit:
    """A fitted parameter vector: shared values, per-family values, and how to get cross-family ones."""

    spec: ParamSpec
    values: dict  # (param name, family or None) -> value
    families: tuple
    objective: float
    record_ids: tuple
    sources: tuple
    _records: list = field(default_factory=list, repr=False)
    _cache: object = field(default=None, repr=False)
    _cross: "Fit | None" = field(default=None, repr=False)

    @property
    def n_params(self) -> int:
        """Free parameters fitted: shared ones + per-family ones × the families present they are fitted for."""
        by = {p.name: p for p in self.spec.params}
        return sum(by[n].fitted_for(f) and by[n].lo < by[n].hi for (n, f) in self.values)

    def cross_family(self) -> "Fit":
        """The same parameters fitted with every family tied (for a family absent from the records)."""
        if self._cross is None:
            if all(f is None for (_, f) in self.values):
                self._cross = self
            else:
                self._cross = fit(self._records, self.spec.tied(), cache=self._cache)
        return self._cross

    def vector_for(self, family: str) -> tuple[np.ndarray, str]:
        """The parameter vector of one family and where it came from ('family' or 'cross-family')."""
        if family in self.families or all(not p.per_family for p in self.spec.params):
            return np.array([self.values[(p.name, family if p.per_family else None)] for p in self.spec.params]), \
                "family"
        cross = self.cross_family()
        return np.array([cross.values[(p.name, None)] for p in self.spec.params]), "cross-family"

    def as_dict(self) -> dict:
        shared = {n: v for (n, f), v in self.values.items() if f is None}
        per = {fam: {n: v for (n, f), v in self.values.items() if f == fam} for fam in self.families}
        return {"params": list(self.spec.names), "shared": shared, "per_family": {k: v for k, v in per.items() if v},
                "objective_mean_abs_log": self.objective, "n_params": self.n_params,
                "n_records": len(self.record_ids), "n_sources": len(self.sources), "families": list(self.families)}


def fit(recs, spec: ParamSpec | None = None, predictor=None, cache: PredictionCache | None = None,
        rounds: int | None = None) -> Fit:
    """Fit ``spec``'s parameters on ``recs`` by coordinate descent on a grid; returns a :class:`Fit`.

    Coordinates are swept parameter by parameter (per-family ones family by family); each sweep
    scores the grid's candidates, predicted in one batched call per affected record, and keeps
    a candidate whenever it is strictly better than the best so far (what scoring them one by one
    would do). ``predictor`` (see :class:`PredictionCache`) or a shared ``cache`` may be given.
    The descent starts from every parameter's ``x0`` and, in turn, from each of ``spec.starts`` (the
    ``x0`` of the parameters it names replaced); the fit with the lowest objective (records' loss plus
    priors) is returned — coupled host-time parameters have more than one basin. The descents run in
    lockstep (their candidates predicted in the same engine calls).
    """
    spec = default_spec() if spec is None else spec
    if cache is None:
        cache = PredictionCache(spec.names, predictor)
    elif tuple(cache.names) != spec.names:
        raise InputError("cache", f"a cache for {cache.names}", f"one for {spec.names}")
    return drive(_fit_steps(recs, spec, rounds, cache), cache)


def _fit_steps(recs, spec: ParamSpec, rounds, cache) -> Fit:
    """:func:`fit` as a request generator (``cache`` is only recorded on the Fit, for its cross-family refit)."""
    recs = [r for r in recs]
    if not recs:
        raise InputError("records", "no records to fit on", "at least one measured or approximate record")
    rounds = spec.rounds if rounds is None else rounds
    _check_fit_args(spec, rounds)
    fams = tuple(sorted({spec.family(r) for r in recs}))
    keys = []  # every (parameter, family) value; the descent moves those the parameter is fitted for
    for p in spec.params:
        keys += [(p.name, f) for f in fams] if p.per_family else [(p.name, None)]
    coords = [(n, f) for (n, f) in keys if spec.params[spec.names.index(n)].fitted_for(f)]
    for start in spec.starts:
        unknown = set(start) - set(spec.names)
        if unknown:
            raise InputError("starts", f"unknown parameter(s) {sorted(unknown)}", f"names of {spec.names}")
    descents = []
    for start in ({},) + tuple(spec.starts):
        # a start (or an x0) outside a parameter's bounds begins at the nearest bound: the grid never leaves them
        x0 = {p.name: min(max(float(start.get(p.name, p.x0)), p.lo), p.hi) for p in spec.params}
        descents.append(_descend(recs, spec, rounds, fams, coords, {c: x0[c[0]] for c in keys}))
    best_fit = None
    for f in (yield from together(descents)):  # the first start wins ties, as when they ran one after another
        if best_fit is None or f[1] < best_fit[1] - 1e-12:
            best_fit = f
    theta, _, objective = best_fit
    return Fit(spec=spec, values=dict(theta), families=fams, objective=objective,
               record_ids=tuple(r.id for r in recs), sources=tuple(sorted({r.source_group for r in recs})),
               _records=recs, _cache=cache)


def _check_fit_args(spec: ParamSpec, rounds) -> None:
    if not (np.isfinite(spec.outside_2x_slope) and spec.outside_2x_slope >= 0):
        raise InputError("outside_2x_slope", f"{spec.outside_2x_slope!r}", "a finite number ≥ 0")
    if int(rounds) != rounds or rounds < 1:
        raise InputError("rounds", f"{rounds!r}", "a whole number of refinement rounds ≥ 1")
    if spec.weighting not in ("record", "source", "sqrt"):
        raise InputError("weighting", f"{spec.weighting!r}", "record, source or sqrt")


def _descend(recs, spec, rounds, fams, coords, theta):
    """One coordinate descent from ``theta`` (a request generator): (values, penalised objective, records' mean
    loss)."""
    meas = np.array([r.value for r in recs], dtype=float)
    rec_fam = [spec.family(r) for r in recs]
    N = len(recs)
    members = {f: np.array([i for i in range(N) if rec_fam[i] == f]) for f in fams}
    everyone = np.arange(N)
    col = {p.name: j for j, p in enumerate(spec.params)}
    # each family's current vector (a record's vector is its family's)
    vec = {f: np.array([theta[(p.name, f if p.per_family else None)] for p in spec.params], dtype=float)
           for f in fams}
    if spec.weighting in ("source", "sqrt"):  # a source of n records weighs n^-1 (or n^-1/2) a record
        counts = {}
        for r in recs:
            counts[r.source_group] = counts.get(r.source_group, 0) + 1
        power = 1.0 if spec.weighting == "source" else 0.5
        w = np.array([counts[r.source_group] ** -power for r in recs])
        w = w * (N / w.sum())  # mean weight 1
    else:
        w = np.ones(N)
    hinge = spec.outside_2x_slope
    first = yield [(r, vec[rec_fam[i]][None, :]) for i, r in enumerate(recs)]
    loss = w * _logerr(np.array([a[0] for a in first]), meas, hinge)
    pen = {c: float(spec.params[col[c[0]]].penalty(theta[c], c[1])) for c in coords}
    best = float((loss.sum() + sum(pen.values())) / N)  # the records' mean loss + the priors' penalties / N
    for rnd in range(int(rounds)):
        scale = 0.5 ** rnd
        for _sweep in range(spec.sweeps):
            before = dict(theta)
            for (name, fam) in coords:
                j = col[name]
                prm = spec.params[j]
                cands = prm.grid(theta[(name, fam)], prm.width * scale, spec.points)
                idx = everyone if fam is None else members[fam]
                Xf = {}
                for f in (fams if fam is None else (fam,)):
                    X = np.tile(vec[f], (len(cands), 1))
                    X[:, j] = cands
                    Xf[f] = X
                got = yield [(recs[i], Xf[rec_fam[i]]) for i in idx]
                L = w[idx, None] * _logerr(np.array(got).reshape(len(idx), len(cands)), meas[idx, None], hinge)
                rest = loss.sum() - loss[idx].sum() + sum(pen.values()) - pen[(name, fam)]
                pc = prm.penalty(cands, fam)
                scores = (rest + L.sum(axis=0) + pc) / N
                for k, sc in enumerate(scores):  # as if scored one by one: keep each strict improvement
                    if sc < best - 1e-12:
                        best = float(sc)
                        theta[(name, fam)] = float(cands[k])
                        loss[idx] = L[:, k]
                        pen[(name, fam)] = float(pc[k])
                for f in (fams if fam is None else (fam,)):
                    vec[f][j] = theta[(name, fam)]
            if theta == before:
                break
    return theta, best, float(loss.mean())


def predict_with(fit_: Fit, recs, cache: PredictionCache) -> tuple[np.ndarray, list]:
    """Predictions of ``recs`` with a fit (per family, or cross-family for an unseen family)."""
    return drive(_predict_steps(fit_, recs), cache)


def _predict_steps(fit_: Fit, recs):
    """:func:`predict_with` as a request generator (a cross-family fit it needs is fitted first, if not given)."""
    recs = list(recs)
    vs = [fit_.vector_for(fit_.spec.family(r)) for r in recs]
    got = yield [(r, v[None, :]) for r, (v, _) in zip(recs, vs)]
    return np.array([a[0] for a in got], dtype=float).reshape(len(recs)), [h for _, h in vs]


# --------------------------------------------------------------------------------------
# Presets out of a fit (what `validate --refit` writes)
# --------------------------------------------------------------------------------------


def presets_from_fit(f: Fit, prefix: str = "", regime: str = "serving") -> list[dict]:
    """One preset per family (chips: every catalog chip of that family) plus the cross-family one."""
    known = set(catalog_chips().names())

    recs_by_fam = {}
    for r in f._records:
        recs_by_fam.setdefault(f.spec.family(r), []).append(r)
    out = []
    pre = f"{prefix}-" if prefix else ""
    for fam in f.families:
        v, _ = f.vector_for(fam)
        rs = recs_by_fam.get(fam, [])
        chips = sorted({r.chip for r in rs if r.chip} | {c for c, fm in HARDWARE_FAMILIES.items()
                                                          if fm == fam and c in known})
        if fam == "tpu":
            chips = sorted({r.chip for r in rs if r.chip})
        out.append(dict(name=f"{pre}{fam}-fit", chips=chips, regime=regime, composition="serial",
                        **{n: float(x) for n, x in zip(f.spec.names, v)},
                        description=f"fitted on {len(rs)} {fam} records from "
                                    f"{len({r.source_group for r in rs})} sources",
                        fitted_on=[r.id for r in rs], objective_mean_abs_log=f.objective))
    if any(p.per_family for p in f.spec.params):
        c = f.cross_family()
        v = [c.values[(p.name, None)] for p in f.spec.params]
        out.append(dict(name=f"{pre}cross-family-fit", chips=[], regime=regime, composition="serial",
                        **{n: float(x) for n, x in zip(f.spec.names, v)},
                        description=f"every family tied: for chips without a fitted preset ({len(f.record_ids)} "
                                    f"records, {len(f.sources)} sources)",
                        fitted_on=list(f.record_ids), objective_mean_abs_log=c.objective))
    return out


def as_toml(presets: list[dict], header: str = "") -> str:
    """Presets as ``[[efficiency]]`` TOML tables (loadable with --catalog DIR)."""
    skip = {"fitted_on", "objective_mean_abs_log"}
    lines = [f"# {ln}" for ln in header.splitlines()] + ([""] if header else [])
    for p in presets:
        lines.append("[[efficiency]]")
        for k, v in p.items():
            if k in skip:
                continue
            lines.append(f"{k} = {toml_value(float(f'{v:.6g}') if isinstance(v, float) else v)}")
        ids = p.get("fitted_on", [])
        shown = ", ".join(ids[:60]) + (f" … (+{len(ids) - 60})" if len(ids) > 60 else "")
        lines.append("source = " + toml_value(f"fitted by rackmath validate --refit (mean |log error| "
                                              f"{p.get('objective_mean_abs_log', float('nan')):.3f}) on records: {shown}"))
        lines.append("")
    return "\n".join(lines)


def fitted_records(recs=None, include_unfitted: bool = False) -> list:
    """The records a fit uses: measured and approximate, not derived, not excluded; ``include_unfitted`` adds the
    ``fit = false`` records (a campaign the shipped presets were not fitted on: ``validate --cv --with-unfitted``)."""
    return [r for r in (records() if recs is None else recs)
            if r.fitted or (include_unfitted and r.exclude is None and r.status != "derived")]



__all__ = ["Param", "ParamSpec", "DEFAULT_SPEC", "default_spec", "PARAMS", "Fit", "fit", "predict_with", "fitted_records",
           "presets_from_fit", "as_toml", "objective"]
