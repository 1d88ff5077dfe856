"""The staged fit of issue 34: silicon from measured kernel curves, the stack as what is left, per stack version.

Stage 1 fixes every record's silicon (τ, η_c, M½, η_m, α_coll, η_comm) from its chip's measured curves
(``engine.efficiency.measured_efficiency``; a chip without curves keeps its fitted preset). Stage 2 fits, per stack
version, only its seven stack numbers — the per-step scheduler time t_sched, the per-sequence time τ_seq, the eager
dispatch time per kernel τ_eager, the per-request time t_request, the first wave's warm-up t_warm and the speed of its
passes η_wave, and the stack's time per kernel τ_stack on top of the silicon's floor (τ_k = τ_silicon + τ_stack:
launch gaps in its graphs, work it does not fuse; what the fitted presets' single τ mixed with the silicon) — on that
version's records, minimising the robust mean |log error| (``calibration._logerr``) by coordinate descent on shrinking
grids, each grid's candidates in one broadcast engine call per record (``validation.predict_many``): the four step
times on the throughput and TPOT records, then t_request on the median-TTFT records and t_warm with η_wave on the
mean-TTFT ones (:func:`fit_hosts` says why). Seven parameters and one version's records make a fit cheap (seconds), so
one InferenceMAX group out (model × chip × framework) and one stack version out refit only what they touch:

* a group out: each version in the group is refitted on its other records; a version with no other record is an
  unseen build (below);
* a version out: its records are predicted as an unseen build — transfer to a release never seen.

An unseen build (:func:`fit_version`) takes, time by time, the median of the own fits of its engine's listed builds
(today's releases) for the same platform (ROCm or CUDA) and deployment mode (aggregated or disaggregated) for its
step times (:func:`unseen_step_times`; its engine's pooled fit over the builds of its platform where no such build
has records), and the median over its engine's builds of its platform for t_request, t_warm and η_wave
(:func:`unseen_ttft_times`).

Stage 1 for a chip with records in two or more groups and silicon no curve measures (:func:`fields_of`): without
curves its floor time per kernel τ_k and its MLA kernel scale — the two silicon numbers serving records identify;
the rest stays its preset's — and on a measured AMD chip (MI355X: AITER's tables) the MLA kernel scale alone are
fitted on its own records with every stack at its engine's preset times (:func:`fit_silicon`), before stage 2;
leaving a group out refits them without the group (``specs.kernels.inferred`` ships the in-sample values; they are
stated as inferred, never as measured). Why: the AMD preset's τ_k × MLA scale (4.9 µs × 4.6) was fitted on
early-2025 ROCm builds of MI300X; MI355X's current builds run DeepSeek's decode step in a third of that, and no stack
time (all ≥ 0, added to the silicon's) can take time away. A held chip with such silicon whose hardware family leaves
no record (a hardware family out: :func:`orphans`) takes the measured chips' values of it
(``specs.kernels.transferred``), not its family's preset, which the records left out fitted.

A record's stack version is ``Record.stack`` (``sglang@0.5.7``; naming none: its source's build, :func:`version_of`).
No I/O here: ``benchmarks/stack_fit.py`` prints and writes.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from .calibration import _logerr
from .validation import predict_many
from ..serving.serve import load_stack
from ...engine.efficiency import (default_efficiency, measured_efficiency, NUMERIC, SILICON_TABLES, stack_eager_s,
                                  STACK_HOST_OF, stack_request_s, stack_sched_s, stack_seq_s, stack_warm_s)
from ...errors import InputError
from ...specs.hardware import load_hardware
from ...specs.kernels import inferable_fields, kernel_table, not_read, transferred
from ...specs.stacks import known_labels, month_of, release_months

#: (field, lower, upper, initial grid half-width) of each fitted host time (physical ranges as ``FIT_PARAMS``).
STACK_PARAMS = (("sched", 0.0, 5e-3, 2e-3), ("seq", 0.0, 1e-4, 4e-5), ("eager", 0.0, 1e-4, 4e-5),
                ("request", 0.0, 0.3, 0.12), ("kernel", 0.0, 2e-5, 8e-6), ("warm", 0.0, 30.0, 8.0),
                ("prefill", 0.05, 2.0, 0.5), ("wave", 0.05, 2.0, 0.5))
#: Index in :data:`STACK_PARAMS` of the version's prefill speed η_pf (a share of the curves' speed, not a time:
#: ``Efficiency.eta_prefill``, ``serving.steps.prefill_speed_step``).
PREFILL = 6
#: Index in :data:`STACK_PARAMS` of the speed of a closed-loop client's first wave's passes relative to the steady
#: ones, η_wave (``Efficiency.eta_wave``, ``serving.schedule.first_wave_pass``).
WAVE = 7
#: Whether the fit frees each version's prefill speed η_pf (``benchmarks/stack_fit.py --prefill``). Off: fitted per
#: version it did not transfer between the groups of one build (docs/stacks.md, "The prefill pool's speed"), so
#: every version keeps the curves' speed (η_pf = 1) and the shipped fit is unchanged.
FIT_PREFILL = False


def fitted_count() -> int:
    """Stack times the fit frees per version (η_pf only under :data:`FIT_PREFILL`)."""
    return len(STACK_PARAMS) - (0 if FIT_PREFILL else 1)


#: Indices in :data:`STACK_PARAMS` of the times that are ``<name>_<engine>_s`` fields of a preset (τ_stack adds to
#: the silicon's τ_k instead).
_ENGINE_FIELDS = (0, 1, 2, 3, 5)
#: Engines whose host-time fields a candidate sets (every record reads only its own engine's, or their mean).
_ENGINES = ("trtllm", "vllm", "sglang", "vllm_v0")
#: (Efficiency field, lower, upper, initial grid half-width) of the silicon inferred for a chip without curves.
SILICON_PARAMS = (("kernel_latency_s", 5e-7, 1.2e-5, 3e-6), ("mla_kernel_scale", 0.5, 8.0, 2.0))
#: A chip's silicon is inferred from records only when they span at least this many InferenceMAX groups (so a group
#: left out still leaves the chip's own records to infer it from).
MIN_GROUPS = 2
#: Coordinate-descent rounds and grid points per coordinate.
ROUNDS, POINTS = 4, 9
#: At most this many records fit an engine's host times (a version left out, or a group's only version): every n-th
#: record of the engine's other versions, in file order — what keeps a fold to a minute on one core.
MAX_ENGINE_RECORDS = 160
#: Weight of the pull towards the start (the engine's preset values), per squared initial half-width: breaks ties
#: of a parameter the version's records do not identify (TTFT alone identifies t_request) without moving the others.
PRIOR = 1e-3


#: A fitted record stating no version ran its source's build, not one shared by its framework (docs/stacks.md).
BUILD_PER_SOURCE = True


def version_of(rec) -> str:
    """A record's stack version: ``framework@version``; a fitted record stating none its source's build
    (``framework@source_group``, :data:`BUILD_PER_SOURCE`), else the framework alone; generic without a framework."""
    v = rec.stack or "generic"
    return f"{v}@{rec.source_group}" if BUILD_PER_SOURCE and "@" not in v and rec.fit and rec.source_group else v


def engine_of(label: str) -> str:
    """The engine whose host-time fields a stack version uses (``trtllm``, ``vllm``, ``sglang``, ``vllm_v0``,
    ``generic``)."""
    try:
        name = load_stack(None if label == "generic" else label).name
    except InputError:  # a version the stack list does not name (a published record's): its framework's engine
        name = load_stack(label.partition("@")[0]).name
    return STACK_HOST_OF.get(name, name)


def silicon_efficiency(rec, measured: bool = True):
    """The efficiency whose silicon a record is predicted with: its chip's measured one (``measured``) or the
    chip's calibrated preset."""
    if not measured:
        return default_efficiency(rec.chip)
    return replace(measured_efficiency(load_hardware(rec.chip).chip), per_version=False)


def _names():
    return tuple(NUMERIC)


def host_vector(eff, engine: str) -> np.ndarray:
    """(sched, seq, eager, request, τ_stack = 0, warm, η_pf, η_wave) of an engine in a preset (the generic stack: the
    three engines' mean)."""
    st = {"vllm_v0": "vllm-v0"}.get(engine, engine)
    return np.array([stack_sched_s(eff, st), stack_seq_s(eff, st), stack_eager_s(eff, st),
                     stack_request_s(eff, st) - eff.request_overhead_s, 0.0, stack_warm_s(eff, st),
                     float(eff.eta_prefill), float(eff.eta_wave)])


def _matrix(eff, H: np.ndarray) -> np.ndarray:
    """(K, P) candidate matrix: ``eff``'s numeric fields, the host times of every engine replaced by rows of H."""
    names = _names()
    base = np.array([float(getattr(eff, n)) for n in names])
    X = np.tile(base, (len(H), 1))
    X[:, names.index("kernel_latency_s")] += H[:, 4]  # τ_k = τ_silicon + τ_stack
    X[:, names.index("eta_prefill")] = H[:, PREFILL]  # the version's prefill speed
    X[:, names.index("eta_wave")] = H[:, WAVE]  # the speed of its first wave's passes
    for j in _ENGINE_FIELDS:
        k = STACK_PARAMS[j][0]
        for e in _ENGINES:
            n = f"{k}_{e}_s"
            if n in names:
                X[:, names.index(n)] = H[:, j]
    return X


class Predictor:
    """Predictions of records under candidate host times with each record's silicon fixed (memoised silicon).
    ``silicon``: {chip: {Efficiency field: value}} replacing a chip's (the inferred silicon of a fold)."""

    def __init__(self, measured: bool = True, silicon: dict | None = None):
        self.measured = measured
        self.silicon = dict(silicon or {})
        self._eff = {}

    def eff(self, rec):
        if rec.chip not in self._eff:
            e = silicon_efficiency(rec, self.measured)
            self._eff[rec.chip] = replace(e, **self.silicon[rec.chip]) if rec.chip in self.silicon else e
        return self._eff[rec.chip]

    def with_silicon(self, chip: str, values: dict) -> "Predictor":
        """This predictor with ``chip``'s silicon replaced by ``values``."""
        return Predictor(self.measured, {**self.silicon, chip: dict(values)})

    def silicon_candidates(self, rec, S: np.ndarray, hosts, params=SILICON_PARAMS) -> np.ndarray:
        """Predictions of ``rec`` under K candidate silicon rows S (columns: ``params``, of :data:`SILICON_PARAMS`),
        the host times ``hosts`` fixed (τ_k = the candidate's τ_silicon + the hosts' τ_stack, as :func:`_matrix`)."""
        names = _names()
        hosts = np.asarray(hosts, dtype=float)
        X = _matrix(self.eff(rec), np.tile(hosts, (len(S), 1)))
        for j, (n, *_r) in enumerate(params):
            X[:, names.index(n)] = S[:, j] + (hosts[4] if n == "kernel_latency_s" else 0.0)
        return predict_many(rec, X, names, name="staged", extra=self._extra(rec))

    def __call__(self, rec, H) -> np.ndarray:
        return predict_many(rec, _matrix(self.eff(rec), np.atleast_2d(H)), _names(), name="staged",
                            extra=self._extra(rec))

    def _extra(self, rec) -> dict:
        """The record's silicon that is not a number: the chip's measured routing shares, MoE compute laws and
        all-reduce curves, where it has them."""
        e = self.eff(rec)
        return {k: getattr(e, k) for k in SILICON_TABLES if getattr(e, k, ())}


def _descend(x, params, predictions, meas, prior: float = 0.0, free=None, rounds: int = ROUNDS) -> np.ndarray:
    """Coordinate descent of the robust mean |log error| of ``predictions(C)`` ((records, K) under K candidate rows
    C) against ``meas``, from ``x``, on grids of :data:`POINTS` per coordinate that halve each of :data:`ROUNDS`
    rounds; ``params``: (name, lower, upper, initial half-width) per coordinate; ``prior``: the weight of the pull
    towards the start, per squared initial half-width; ``free``: the indices of the coordinates that move (default
    all).

    Each round's grid lies on a fixed lattice, lo + k · (half-width / 4), centred on the lattice point nearest the
    current value: a start moved by less than a grid step (a preset refitted: t_request 0.101 → 0.105 s) starts the
    same descent. With the grid centred on the start itself, that move of the presets moved the fit one group out
    by 2 points of TPOT (13.6 → 15.5%, 2026-11-28; docs/stacks.md)."""
    x = np.array(x, dtype=float)
    x0 = x.copy()
    widths = np.array([w for *_r, w in params])
    for _ in range(rounds):
        for j, (_n, lo, hi, w0) in enumerate(params):
            if free is not None and j not in free:
                continue
            grid = _lattice(x[j], lo, hi, widths[j])  # on the lattice lo + k · width / 4, whatever the start
            C = np.tile(x, (len(grid), 1))
            C[:, j] = grid
            loss = _logerr(predictions(C), meas[:, None]).mean(axis=0)
            if prior:
                loss = loss + prior * (((grid - x0[j]) / w0) ** 2)
            x[j] = grid[int(np.argmin(loss))]
        widths = widths / 2.0
    return x


def _lattice(value, lo, hi, width) -> np.ndarray:
    """The :data:`POINTS` grid of :func:`_descend` around ``value``: the lattice lo + k · (width / 4) nearest it."""
    half = (POINTS - 1) // 2
    step = width / half
    centre = lo + np.round((value - lo) / step) * step
    return np.unique(np.clip(centre + step * np.arange(-half, half + 1), lo, hi))


def _descend_jointly(x, params, predictions, meas, pair, rounds: int = ROUNDS) -> np.ndarray:
    """:func:`_descend` of two coordinates ``pair`` searched together: each round the product of their grids (as
    :func:`_lattice`, halving each round), every pair of values in one call of ``predictions``. For two numbers that
    trade against each other — the first wave's warm-up and the speed of its passes both add to the mean TTFT —
    one at a time zig-zags: the first coordinate takes what the second should have, and the shrinking grids cannot
    walk back (records made at a known t_warm and η_wave were fitted 1.2 s and 1.5 for 1.0 s and 0.4)."""
    x = np.array(x, dtype=float)
    i, j = pair
    widths = [params[i][3], params[j][3]]
    for _ in range(rounds):
        gi = _lattice(x[i], params[i][1], params[i][2], widths[0])
        gj = _lattice(x[j], params[j][1], params[j][2], widths[1])
        C = np.tile(x, (len(gi) * len(gj), 1))
        C[:, i], C[:, j] = np.repeat(gi, len(gj)), np.tile(gj, len(gi))
        k = int(np.argmin(_logerr(predictions(C), meas[:, None]).mean(axis=0)))
        x[i], x[j] = C[k, i], C[k, j]
        widths = [w / 2.0 for w in widths]
    return x


#: Indices in :data:`STACK_PARAMS` of the per-request time t_request and the warm-up t_warm: with η_wave, the stack
#: numbers TTFT alone identifies.
REQUEST, WARM = 3, 5
#: The first wave's two numbers, fitted together on the mean TTFTs (:func:`fit_hosts`).
FIRST_WAVE = (WARM, WAVE)
#: Extra coordinate-descent rounds of t_warm (its range spans 30 s; a mean TTFT carries a tenth of it).
WARM_ROUNDS = ROUNDS + 2


def fit_hosts(recs, predictor: Predictor, start, prior: float = PRIOR) -> np.ndarray:
    """The stack times (sched, seq, eager, request, τ_stack, warm, η_wave; η_pf under :data:`FIT_PREFILL`) minimising
    mean robust |log error|, by coordinate descent from ``start`` (:func:`_descend`), in three steps: the step times
    (sched, seq, eager, τ_stack, η_pf) on the records of throughput and TPOT; then t_request on the median-TTFT
    records with them fixed (on the mean-TTFT records where a version has no median); then the first wave's t_warm
    and η_wave together on the mean-TTFT records with the rest fixed.

    Why in steps: a run's mean TTFT carries what no step time describes — a saturated closed loop's queue, which is
    its throughput error amplified by Little's law (``serving.schedule.saturated_ttft``: a 10% error in X is tens
    of % in C·OSL/X − (OSL − 1)·TPOT), and the first wave's warm-up (runs whose mean TTFT is many times their
    median: ``serving.schedule.closed_loop_ttft``) — and fitted jointly it bent the eager dispatch time that also
    prices every mixed step, so TPOT and throughput paid for TTFT. The step times are what TPOT and throughput
    measure; the median request's TTFT is the steady loop's (``serving.schedule.median_ttft``), which t_request
    adds to every request; the mean over the median is then the first wave's, which t_warm adds to one request in
    ten. A mean alone cannot tell the two apart (every InferenceMAX run has the same first-wave share), so t_warm
    is fitted only where medians fixed t_request, and stays at the start (0) elsewhere. The first wave's two numbers
    are told apart by C: t_warm is the same at every C, the wave's passes (η_wave) grow with the C prompts that
    queue for them (``serving.schedule.first_wave_pass``; η_wave stays at the start, 1, where t_warm does). Each
    TTFT number is searched over its whole range (the first grid spans it; no pull towards the start: TTFT
    identifies it). A version with no TTFT record (or only TTFT records) fits all of them on what it has.

    Why η_pf stays at the start (1, the curves' speed) unless :data:`FIT_PREFILL`: a disaggregated prefill pool's
    saturated throughput is its prompt tokens/s measured on their own, and SGLang's GB200 pools run at a third to a
    sixth of what the curves give — but fitted per version it did not transfer from one group of a build to the
    other (the FP8 group's 4-GPU pool, 23 GB short of HBM by rackmath's own count, set a speed the FP4 group's pools
    do not have: one group out its TTFT went from 81% to 291%), and fitted for the aggregated builds too it traded
    with the eager and scheduler times (docs/stacks.md, "The prefill pool's speed")."""
    if not recs:
        return np.array(start, dtype=float)
    means = [r for r in recs if r.metric == "ttft_s"]
    medians = [r for r in recs if r.metric == "ttft_median_s"]
    steps = [r for r in recs if r.metric not in ("ttft_s", "ttft_median_s")]

    def descend(x, rs, free, params=STACK_PARAMS, prior=prior, rounds=ROUNDS, jointly=False):
        meas = np.array([r.value for r in rs])
        predictions = lambda H: np.stack([predictor(r, H) for r in rs])  # noqa: E731
        if jointly:  # the coordinates ``free`` (two) on one product grid
            return _descend_jointly(x, params, predictions, meas, free, rounds)
        return _descend(x, params, predictions, meas, prior, free, rounds)

    free = [j for j in range(len(STACK_PARAMS)) if j != PREFILL or FIT_PREFILL]
    if not (means or medians) or not steps:
        return descend(start, recs, free)
    x = descend(start, steps, [j for j in free if j not in (REQUEST, *FIRST_WAVE)])
    params = list(STACK_PARAMS)
    for j in (REQUEST, *FIRST_WAVE):  # their whole range searched (the first grid spans it), no prior
        name, lo, hi, _w = STACK_PARAMS[j]
        params[j] = (name, lo, hi, (hi - lo) / 2.0)
    x[REQUEST] = (params[REQUEST][1] + params[REQUEST][2]) / 2.0
    x = descend(x, medians or means, [REQUEST], params, 0.0)
    if medians and means:
        x[WARM] = (params[WARM][1] + params[WARM][2]) / 2.0
        x = descend(x, means, FIRST_WAVE, params, 0.0, WARM_ROUNDS, jointly=True)
    return x


def fields_of(chip: str) -> tuple:
    """The silicon numbers a chip's records are to identify (``specs.kernels.inferable_fields``)."""
    return inferable_fields(chip, load_hardware(chip).chip.vendor)


def inferable_chips(recs) -> list[str]:
    """Chips with silicon to infer (:func:`fields_of`) whose records span at least :data:`MIN_GROUPS` InferenceMAX
    groups."""
    groups = {}
    for r in recs:
        if r.group:
            groups.setdefault(r.chip, set()).add(r.group)
    return sorted(c for c, g in groups.items() if len(g) >= MIN_GROUPS and fields_of(c))


def preset_silicon(chip: str) -> dict:
    """The chip's preset values of its inferable fields (:func:`fields_of`: the start of :func:`fit_silicon`, and what
    a fold keeps when none of the chip's records is left)."""
    pre, fields = default_efficiency(chip), fields_of(chip)
    return {n: float(getattr(pre, n)) for n, *_r in SILICON_PARAMS if n in fields}


def fit_silicon(recs, predictor: Predictor, starts: dict, chip: str, exclude=lambda r: False) -> dict:
    """Stage 1 for a chip with silicon to infer (:func:`fields_of`: τ_k and the MLA kernel scale without curves, the
    MLA kernel scale alone on a measured AMD chip) minimising mean robust |log error| over the chip's records not
    excluded, every stack at its engine's start times; the start is the chip's preset (:func:`preset_silicon`), the
    measured numbers its curves'. Coordinate descent as :func:`fit_hosts`. {} when no record is left."""
    train = [r for r in recs if r.chip == chip and not exclude(r)]
    if not train:
        return {}
    params = tuple(p for p in SILICON_PARAMS if p[0] in fields_of(chip))
    base = Predictor(predictor.measured)  # the preset's silicon as the start, whatever the predictor holds
    meas = np.array([r.value for r in train])
    x = _descend(list(preset_silicon(chip).values()), params,
                 lambda C: np.stack([base.silicon_candidates(r, C, starts[engine_of(version_of(r))], params)
                                     for r in train]), meas)
    return {n: float(v) for (n, *_r), v in zip(params, x)}


def borrowed(chip: str) -> tuple:
    """The silicon numbers of a chip that no curve of its measures — those its records infer (:func:`fields_of`)
    and those its preset gives (every one without curves; on a measured chip those its curve file does not read:
    ``specs.kernels.not_read``, MI355X's GEMM compute law) — of the ones the measured chips share
    (``specs.kernels.transferred``): what a fold with nothing left of its family transfers."""
    t = kernel_table(chip)
    return tuple(k for k in transferred() if t is None or k in fields_of(chip) or k in not_read(t))


def orphans(recs, held, exclude) -> list[str]:
    """The held chips with silicon no curve measures (:func:`borrowed`) none of whose hardware family's records the
    fold leaves (a hardware family out): nothing is left to infer it from, and their family's preset was fitted on
    the records left out."""
    left = {r.hardware_family for r in recs if not exclude(r)}
    return sorted({r.chip for r in held if borrowed(r.chip) and r.hardware_family not in left})


#: A fold's orphan chips (:func:`orphans`) take the measured chips' silicon (``specs.kernels.transferred``), not
#: their family's preset (docs/stacks.md, "A chip with nothing left of its family").
ORPHANS_TRANSFERRED = True


def without(recs, predictor: Predictor, starts: dict, held, exclude) -> Predictor:
    """``predictor`` for a fold that leaves out the records ``exclude`` marks (``held``: those of them predicted):
    the inferred silicon of each held chip refitted without them (:func:`fit_silicon`), its preset's if none of its
    records is left — never the shipped values, which were fitted on them; a held chip with no record of its
    hardware family left (:func:`orphans`) takes the measured chips' values (``specs.kernels.transferred``) of the
    silicon no curve of its measures (:func:`borrowed`)."""
    lost = orphans(recs, held, exclude) if ORPHANS_TRANSFERRED else []
    chips = ({r.chip for r in held} & set(inferable_chips(recs))) | set(lost)
    if not chips:
        return predictor
    pr = Predictor(predictor.measured, {k: v for k, v in predictor.silicon.items() if k not in chips})
    for chip in sorted(chips):
        if chip in lost:  # the measured chips' values of what no curve of its measures (all of them without curves)
            pr = pr.with_silicon(chip, {k: transferred()[k]["value"] for k in borrowed(chip)})
        else:
            pr = pr.with_silicon(chip, fit_silicon(recs, pr, starts, chip, exclude) or preset_silicon(chip))
    return pr


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


def platform_of(rec) -> str:
    """The build platform a record ran: ``rocm`` on AMD GPUs, ``cuda`` on NVIDIA's, else its chip's family."""
    fam = rec.hardware_family
    return "rocm" if fam == "amd" else ("cuda" if fam in ("ampere", "hopper", "blackwell", "rubin") else fam)


def _same_platform(rs, platform):
    """The records of ``rs`` built for ``platform`` where there are any (else all of them): a ROCm build's nearest
    builds are the engine's other ROCm builds (eager dispatch 10–13 µs per kernel against the CUDA builds' 66–100 µs,
    stack_hosts.toml), not the CUDA ones."""
    mine = [r for r in rs if platform_of(r) == platform] if platform else []
    return mine or list(rs)


def engine_fit(recs, predictor: Predictor, starts: dict, engine: str, exclude, platform: str | None = None
               ) -> np.ndarray:
    """One host vector for an engine, fitted on the records of its versions not excluded (``exclude(rec)``; at most
    :data:`MAX_ENGINE_RECORDS`, evenly spaced); ``platform``: on its builds for that platform where there are
    any (:func:`_same_platform`). Both deployment modes pool: restricted to an aggregated build's own mode, the
    unseen TensorRT-LLM gpt-oss build on B200 pooled over the 2025 published builds alone, and its TPOT one group out
    went from 76% to 147% (2026-11-27 late)."""
    train = _same_platform([r for r in recs if engine_of(version_of(r)) == engine and not exclude(r)], platform)
    step = max(1, -(-len(train) // MAX_ENGINE_RECORDS))
    return fit_hosts(train[::step], predictor, starts[engine])


#: An unseen aggregated build whose engine has no listed aggregated build with records on its platform takes its
#: step times, t_request and first-wave speed η_wave from the median of every engine's listed aggregated builds there
#: (:func:`fit_version`), not its engine's pooled fit over the 2024–25 builds of the published records.
UNSEEN_FROM_CURRENT = True
#: Weight of the engine's pooled times as the prior of each version's in the hierarchical fit (``hierarchical``).
HIERARCHICAL_PRIOR = 0.02


def _own_fits(rs, predictor: Predictor, start, cache: dict, keep=lambda metrics: True) -> dict:
    """{version: its own fit} (:func:`fit_hosts` on its records among ``rs``) of each version whose records' metrics
    ``keep`` accepts; ``cache`` keeps each fit under its version and the records it was fitted on (a version whose
    records span platforms is fitted on each platform's apart)."""
    out = {}
    for v, vr in _by(rs, version_of).items():
        if keep({r.metric for r in vr}):
            key = (v, tuple(r.id for r in vr))
            if key not in cache:
                cache[key] = fit_hosts(vr, predictor, start)
            out[v] = cache[key]
    return out


def _fits_by_engine(rs, predictor: Predictor, starts: dict, cache: dict, keep=lambda metrics: True) -> dict:
    """:func:`_own_fits` of builds of several engines, each from its own engine's start."""
    out = {}
    for e, er in _by(rs, lambda r: engine_of(version_of(r))).items():
        out.update(_own_fits(er, predictor, starts[e], cache, keep))
    return out


#: The builds that vote for an unseen one do so with their fit on the records the fold leaves (a build with records
#: on both sides of a hardware family out votes with its fit on the other families'), not only builds none of whose
#: records the fold holds.
VOTE_ON_WHAT_IS_LEFT = True


def _voting(recs, exclude):
    """The predicate of the records a fold lets vote for an unseen build: those it does not exclude
    (:data:`VOTE_ON_WHAT_IS_LEFT`), else those of the builds none of whose records it excludes."""
    if VOTE_ON_WHAT_IS_LEFT:
        return lambda r: not exclude(r)
    held = {version_of(r) for r in recs if exclude(r)}
    return lambda r: version_of(r) not in held


#: An unseen build older than its engine's listed builds takes its :data:`CONTEMPORARIES` builds nearest in date
#: (:func:`contemporaries`), not today's.
UNSEEN_FROM_CONTEMPORARIES = True
#: How many builds nearest in date vote for an old unseen build (one vote each, the median of their fits).
CONTEMPORARIES = 3


def build_dates(recs) -> dict:
    """{version: when it was current} (months, ``specs.stacks.month_of``): a listed build's release (``stacks.toml``'s
    ``date``), else the median publication date of its records; a build none of whose records is dated is absent."""
    ds = {}
    for r in recs:
        if r.date:
            ds.setdefault(version_of(r), []).append(month_of(r.date))
    return {v: float(np.median(m)) for v, m in ds.items()} | release_months()


def older_than_listed(version: str, recs) -> float | None:
    """The date of a build older than every listed build of its engine (of every engine where it has none), else
    None: which unseen builds :func:`contemporaries` predicts (:data:`UNSEEN_FROM_CONTEMPORARIES`)."""
    d = build_dates(recs).get(version) if UNSEEN_FROM_CONTEMPORARIES else None
    if d is None:
        return None
    listed = release_months()
    mine = [m for v, m in listed.items() if engine_of(v) == engine_of(version)] or list(listed.values())
    return d if d < min(mine) else None


def contemporaries(rs, recs, date: float) -> list:
    """The records of ``rs`` whose builds are the :data:`CONTEMPORARIES` dated builds nearest ``date``.

    Why: a build a year old is best described by the builds of its own time. dstack's March 2025 runs (vLLM 0.7 V0,
    SGLang 0.4, TensorRT-LLM 0.17) took today's listed builds' times — 1.2–2.5 ms schedulers, 0–23 ms per request —
    against their own 5 ms and 300 ms (stack_fit.py's in-sample table); their 2025 neighbours (vLLM V0 0.7.3 of
    another source, TensorRT-LLM's MLPerf v4.1 and 1.0 builds, Tenstorrent's and LMSYS's mid-2025 SGLang) are
    nearer: the published records one source out 21.1 → 19.2% (dstack's 64.8 → 44.1%; docs/stacks.md). Only
    for builds older than every listed build of their engine (:func:`older_than_listed`): for the others the listed
    builds, a hundred records each, vote as before (the InferenceMAX folds are unchanged), where a median of the
    nearest dated builds would take sources of two to ten records (tried for every unseen build: one group out mean
    TTFT 29.4 → 34.8%)."""
    dates = build_dates(recs)
    dated = sorted((abs(dates[v] - date), v) for v in _by(rs, version_of) if v in dates)
    keep = {v for _, v in dated[:CONTEMPORARIES]}
    return [r for r in rs if version_of(r) in keep]


def _current_builds(recs, exclude, engine: str | None, platform: str | None, disagg: bool | None,
                    date: float | None = None) -> list:
    """The records of the listed builds (``specs/data/launch/stacks.toml``: today's releases) of ``engine`` (None:
    every engine) for ``platform`` and deployment mode ``disagg`` (None: either) that vote (:func:`_voting`); with a
    ``date`` (an old build's, :func:`older_than_listed`), its :func:`contemporaries` among all their builds."""
    listed = set(known_labels())
    votes = _voting(recs, exclude)
    rs = [r for r in recs if (engine is None or engine_of(version_of(r)) == engine) and votes(r)
          and (date is not None or version_of(r) in listed) and (platform is None or platform_of(r) == platform)
          and (disagg is None or disaggregated(r) == disagg)]
    return rs if date is None else contemporaries(rs, recs, date)


def unseen_ttft_times(recs, predictor: Predictor, starts: dict, engine: str | None, exclude, cache: dict,
                      platform: str | None = None, disagg: bool | None = None, date: float | None = None) -> dict:
    """{index: value} of the TTFT numbers of a version none of whose records is seen: t_request, t_warm and η_wave,
    each the median of the engine's other builds' own fits (one vote per build with TTFT records; t_warm and η_wave
    from the builds whose median and mean TTFT both identify them, else 0 and 1), the builds of ``platform`` where
    there are any.

    Why not the engine's pooled fit: the TTFT times are per build, and pooled over builds they take the shape of the
    largest — the disaggregated versions' queues (300 ms per request) set SGLang's pooled t_request, which priced an
    aggregated MI355X build at three times its measured median (0.35 vs 0.11 s). A median over builds is what a
    build of that engine typically adds. Why per platform: the warm-up is the kernels a build compiles the first
    time it runs a batch of a new size, and that is the platform's way of building kernels — SGLang's ROCm 7 builds
    take 0.9–4.6 s (AITER's just-in-time modules), its CUDA builds 1.5 s, vLLM's and TensorRT-LLM's 0–0.1 s
    (stack_hosts.toml). Each build votes with its fit on the records the fold leaves (never on what is held
    out; :func:`_voting`); ``cache`` keeps those fits across folds. ``engine`` None: the listed builds of every
    engine for ``platform`` and mode ``disagg`` (an engine with no current build there, :func:`fit_version`); with a
    ``date`` (an old build's), the :func:`contemporaries` of those builds."""
    if engine is None:
        mine = _current_builds(recs, exclude, None, platform, disagg, date)
    else:
        votes = _voting(recs, exclude)
        mine = _same_platform([r for r in recs if engine_of(version_of(r)) == engine and votes(r)], platform)
        mine = mine if date is None else contemporaries(mine, recs, date)
    ttft = {"ttft_s", "ttft_median_s"}
    request = [h[REQUEST] for h in _fits_by_engine(mine, predictor, starts, cache, lambda m: m & ttft).values()]
    first = np.array([h[list(FIRST_WAVE)] for h in _fits_by_engine(mine, predictor, starts, cache,
                                                                   lambda m: ttft <= m).values()])
    out = dict(zip(FIRST_WAVE, np.median(first, axis=0))) if len(first) else {WARM: 0.0, WAVE: 1.0}
    return {j: float(v) for j, v in out.items()} | ({REQUEST: float(np.median(request))} if request else {})


def disaggregated(rec) -> bool:
    """Whether a record measures a disaggregated deployment (prefill and decode pools)."""
    return "decode_gpus" in rec.inputs


def unseen_step_times(recs, predictor: Predictor, starts: dict, engine: str, exclude, cache: dict,
                      platform: str | None = None, disagg: bool | None = None, date: float | None = None) -> dict:
    """{index: value} of the step times (t_sched, τ_seq, τ_eager, τ_stack, η_pf) of a build none of whose records is
    seen:
    the median, time by time, of the own fits of the engine's **listed** builds (``specs/data/launch/stacks.toml``:
    today's releases, not the 2024–25 builds the published records ran — "a year-old build is its own version, so it
    no longer drags the physics", issue 34) for its ``platform`` and deployment mode (``disagg``); {} when none has
    records.

    Why a median of builds and not their pooled fit: a pool follows its largest build. SGLang's ROCm pool was the
    disaggregated mori dev build's 164 records, whose eager dispatch (100 µs per kernel) priced the aggregated ROCm
    builds' prefill (10–13 µs) — and their median TTFT — at four times the measured. Why the same mode: a
    disaggregated build's times carry its pools' wide-EP steps (docs/stacks.md: its fit sits at the 5 ms scheduler
    bound), which priced an aggregated TensorRT-LLM build's TPOT 63% too long. Each build votes with its fit on the
    records the fold leaves (:func:`_voting`); ``cache`` keeps those fits across folds. ``engine`` None: every
    engine's listed builds there. ``date``: an old build's (:func:`older_than_listed`), whose
    :func:`contemporaries` vote instead of the listed builds."""
    mine = _current_builds(recs, exclude, engine, platform, disagg, date)
    votes = list(_fits_by_engine(mine, predictor, starts, cache,
                                 lambda m: bool(m - {"ttft_s", "ttft_median_s"})).values())
    if not votes:
        return {}
    med = np.median(np.array(votes), axis=0)
    return {j: float(med[j]) for j in range(len(STACK_PARAMS)) if j not in (REQUEST, *FIRST_WAVE)}


def fit_version(recs, predictor: Predictor, starts: dict, version: str, exclude=lambda r: False,
                hierarchical: bool = False, cache: dict | None = None) -> np.ndarray:
    """One version's times on its records not excluded; with none, an unseen build's: :func:`unseen_step_times` for
    the step times and :func:`unseen_ttft_times` for t_request, t_warm and η_wave, over its engine's builds. Where its
    engine has no listed build of its platform and mode with records: an aggregated build takes its step times,
    t_request and η_wave from every engine's listed aggregated builds of its platform, its warm-up still from its
    engine's builds (:data:`UNSEEN_FROM_CURRENT`; TensorRT-LLM 1.2's gpt-oss runs left out: the engine's pooled fit
    is the 2024–25 builds', a 5 ms scheduler and 84 ms per request, TPOT +74% and median TTFT +283% one group out,
    against −9% and −19% from today's vLLM and SGLang builds; η_wave from its engine's builds, Dynamo-TensorRT-LLM's
    pools at 1.1, put its mean TTFT at −35%. The warm-up is what a build compiles: taken from today's builds too,
    ATOM left out took SGLang's ROCm builds' 4 s against its own 0.1 s, mean TTFT +324%); a disaggregated one its
    engine's pooled fit over the builds of its platform (:func:`_same_platform`: a disaggregated build's times carry
    its pools' queues, 248 ms per request for Dynamo-SGLang, and priced Dynamo-TensorRT-LLM's mean TTFT at +213%).
    ``hierarchical``: the engine's pooled fit (same exclusion) is the start and the prior (weight
    :data:`HIERARCHICAL_PRIOR`) of the version's own. ``cache``: the other versions' fits (shared by the folds of one
    cross-validation)."""
    train = [r for r in recs if version_of(r) == version and not exclude(r)]
    e = engine_of(version)
    if not train:  # an unseen build: its engine's builds for the platform (and mode) its records ran
        mine = [r for r in recs if version_of(r) == version]
        platform = platform_of(mine[0]) if mine else None
        disagg = disaggregated(mine[0]) if mine else None
        c = {} if cache is None else cache
        date = older_than_listed(version, recs)  # an old build: its contemporaries vote, not today's builds
        steps = unseen_step_times(recs, predictor, starts, e, exclude, c, platform, disagg, date)
        ttft = unseen_ttft_times(recs, predictor, starts, e, exclude, c, platform, date=date)
        if not steps and not disagg and UNSEEN_FROM_CURRENT:  # no current build of its engine: every engine's
            steps = unseen_step_times(recs, predictor, starts, None, exclude, c, platform, disagg, date)
            if steps:  # t_request and η_wave too; t_warm stays its engine's (the kernels its builds compile)
                current = unseen_ttft_times(recs, predictor, starts, None, exclude, c, platform, disagg, date)
                ttft.update({j: current[j] for j in (REQUEST, WAVE) if j in current})
        h = np.array(starts[e], dtype=float) if steps else engine_fit(recs, predictor, starts, e, exclude, platform)
        for j, v in (steps | ttft).items():
            h[j] = v
        return h
    if hierarchical:
        pooled = engine_fit(recs, predictor, starts, e, exclude)
        return fit_hosts(train, predictor, pooled, prior=HIERARCHICAL_PRIOR)
    return fit_hosts(train, predictor, starts[e])


__all__ = ["STACK_PARAMS", "SILICON_PARAMS", "fit_silicon", "preset_silicon", "inferable_chips", "without", "Predictor",
           "fit_hosts", "fit_all", "fit_version", "predict", "version_of", "engine_of", "host_vector"]
