"""Chapter one: how batch size sets the latency and the cost of every token (lecture 00:00–00:32).

One function per equation. Pure functions of numbers first; the ``*_for`` adapters
take a model and hardware and call the roofline engine.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...engine.roofline import roofline
from ...explain import Derivation, fmt
from ...specs.hardware import hardware_ratio  # noqa: F401  (re-exported: the lecture's ratio, R5)
from ...errors import InputError
from ...specs.hardware import load_hardware
from ...specs.models import load_model

# --------------------------------------------------------------------------- pure equations


def balance_batch(ratio, n_total, n_active):
    """B* = ratio × N_total / N_active (lecture 00:15, R6).

    Equate the weight fetch time N_total·b/BW with the weight multiply time
    2·B·N_active/FLOPs and solve for B: the hardware ratio (FLOP/s ÷ 2) / (BW ÷ b)
    times the model's sparsity N_total/N_active. "Batch size needs to be bigger than
    approximately 300 times sparsity."
    """
    return np.asarray(ratio, dtype=float) * np.asarray(n_total, dtype=float) / np.asarray(n_active, dtype=float)


def latency_floor(weight_bytes, scaleup_size, bandwidth_per_chip):
    """t_floor = weight bytes / (scale-up size × per-chip HBM bandwidth) (lecture 01:15, R29).

    The fastest a decode step can be: every weight read once, using every chip of the
    scale-up domain's bandwidth in parallel.
    """
    return np.asarray(weight_bytes, dtype=float) / (np.asarray(scaleup_size, dtype=float) * bandwidth_per_chip)


def drain_time(capacity, bandwidth):
    """t_drain = capacity / bandwidth (lecture ~00:25, R10): "read all of memory once per forward pass"."""
    return np.asarray(capacity, dtype=float) / np.asarray(bandwidth, dtype=float)


def train_schedule(step_s):
    """The "train departs every step" schedule (lecture ~00:25, R9).

    A batch departs every t_step whether full or not. A request waits U(0, t_step) for
    the next departure and then rides one step: worst-case latency 2·t_step, mean
    1.5·t_step. Returns (worst, mean).
    """
    s = np.asarray(step_s, dtype=float)
    return 2.0 * s, 1.5 * s


def system_throughput(batch, step_s):
    """Tokens/s of one serving system = B / t_step (lecture ~00:27, R12: "2,000 × 64 ≈ 128K tokens/s")."""
    return np.asarray(batch, dtype=float) / np.asarray(step_s, dtype=float)


def systems_needed(global_rate, per_system_rate):
    """How many such systems a global rate needs: N = rate / per-system rate (lecture ~00:27, R13)."""
    return np.asarray(global_rate, dtype=float) / np.asarray(per_system_rate, dtype=float)


# --------------------------------------------------------------------------- adapters (model + hardware)


def _bisect_log(fn, lo, hi, iters=80):
    """Vectorized bisection in log space for fn(x) changing sign from negative to positive on [lo, hi]."""
    lo = np.full(np.shape(fn(np.asarray(lo, dtype=float))), float(lo))
    hi = np.full_like(lo, float(hi))
    for _ in range(iters):
        mid = np.sqrt(lo * hi)
        neg = fn(mid) < 0
        lo = np.where(neg, mid, lo)
        hi = np.where(neg, hi, mid)
    return np.sqrt(lo * hi)


# The share of HBM a serving engine hands to weights + KV cache. vLLM's default
# ``gpu_memory_utilization = 0.9`` (the rest: activations, CUDA graphs, fragmentation).
# The lecture's premise is 1.0 ("we want to use all of the memory capacity we have", ~00:25).
USABLE_HBM = 0.9


def balance_batch_for(model, hardware, *, context=0.0, chips=None, weights_dtype=None, kv_dtype=None,
                      efficiency=None, max_batch=1e8, weight_read="hit"):
    """B* solved numerically on the full roofline: the smallest B with t_compute ≥ t_weights + t_kv.

    With context = 0 this is the lecture's weights-only balance (R6), refined by the
    expected number of distinct experts read (``weight_read="hit"``) or with every
    weight read (``"all"``, the lecture). With the KV term included B* grows (R7):
    KV bandwidth leaves less for the weights, so more batch is needed to amortize them.
    Returns inf where the KV fetch alone outruns compute (never compute-bound).
    ``context`` broadcasts. B* is a bandwidth balance: whether it fits in memory is
    :func:`memory_batch_limit`'s question.
    """
    ctx = np.asarray(context, dtype=float)

    def gap(b):
        r = roofline(model, hardware, chips=chips, batch=b, context=ctx, weights_dtype=weights_dtype,
                     kv_dtype=kv_dtype, efficiency=efficiency, weight_read=weight_read)
        return r.t_compute_s - (r.t_weights_s + r.t_kv_s)

    big = gap(np.full(np.shape(ctx), max_batch))
    b = _bisect_log(lambda x: gap(np.broadcast_to(x, np.shape(ctx))), 1.0, max_batch)
    return np.where(big >= 0, b, np.inf)


def _model_hw(model, hardware):
    return load_model(model), load_hardware(hardware)


def usable_memory(hardware, chips=None, usable=USABLE_HBM):
    """C = chips · HBM per chip · usable share (bytes for weights + KV)."""
    n = hardware.scaleup_size if chips is None else chips
    return np.asarray(n, dtype=float) * hardware.chip.hbm_bytes * usable


def memory_batch_limit(model, hardware, *, context, chips=None, weights_dtype=None, kv_dtype=None,
                       usable=USABLE_HBM):
    """B_mem = (C − W) / KV(L): the most sequences whose weights + KV fit in usable HBM (lecture 01:03:
    "the demand on memory is N_total … then we need to fit the KVs as well: B · len · bytes").

    Every batch optimization (cheapest batch, operating point, slow mode) is bounded by
    it. 0 where the weights alone do not fit. ``context`` broadcasts.
    """
    m, hw = _model_hw(model, hardware)
    cap = usable_memory(hw, chips, usable)
    w = m.weight_bytes(weights_dtype)
    kv = np.asarray(m.kv_cache_bytes(np.asarray(context, dtype=float) + 1.0, kv_dtype or m.kv_dtype), dtype=float)
    return np.maximum(np.floor((cap - w) / kv), 0.0)


def fill_context(model, hardware, *, batch, chips=None, weights_dtype=None, kv_dtype=None, usable=USABLE_HBM):
    """L_fill: the context at which ``batch`` sequences' KV fills what the weights leave of usable HBM.

    Solves W + B · KV(L) = C (lecture ~00:25: "we're going to use all of that memory
    capacity to store the weights or the KVs"). nan where the weights alone do not fit.
    """
    m, hw = _model_hw(model, hardware)
    room = float(usable_memory(hw, chips, usable)) - m.weight_bytes(weights_dtype)
    if room <= 0:
        return float("nan")
    kvdt = kv_dtype or m.kv_dtype

    def over(L):
        return float(batch) * np.asarray(m.kv_cache_bytes(L, kvdt), dtype=float) - room

    return float(_bisect_log(over, 1.0, 1e10))


@dataclass
class OperatingPoint:
    """Where a serving system runs: the batch, context and step the roofline and memory capacity give."""

    batch: float
    context: float
    step_s: float
    bound: str
    limited_by: str  # "memory capacity" | "compute floor" | "given"
    memory_limit: float  # B_mem at this context
    balance_batch: float  # B* with KV at this context (inf: KV-bound at any batch)
    weight_read: str
    usable: float
    derivation: Derivation

    @property
    def tokens_per_s(self):
        return self.batch / self.step_s

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("batch", "context", "step_s", "bound", "limited_by", "memory_limit",
                                              "balance_batch", "weight_read", "usable")} | {
            "tokens_per_s": self.tokens_per_s, "derivation": self.derivation.as_dict()}


def operating_point(model, hardware, *, context=8192, batch=None, chips=None, multiple=None, weights_dtype=None,
                    kv_dtype=None, efficiency=None, weight_read="hit", usable=USABLE_HBM) -> OperatingPoint:
    """The operating point, bounded by memory capacity (lecture ~00:25: why the step is ~20 ms).

    Cost per token never rises with batch, so a cost-minded server takes the smallest
    batch that reaches the cost floor (B*, with the KV term) — unless weights + KV fill
    usable HBM first: B_op = min(B*, B_mem). When the KV outruns compute at any batch
    (B* = ∞), HBM fills with KV and the step is ≈ C/BW, the drain time: that is the
    lecture's 15–20 ms. ``multiple`` (optional) operates at multiple × B* instead
    ("double or triple it"), still capped by memory. ``batch`` given: the lecture's way
    round — that batch, with the context that fills HBM (:func:`fill_context`).
    """
    m, hw = _model_hw(model, hardware)
    kw = dict(chips=chips, weights_dtype=weights_dtype, kv_dtype=kv_dtype, efficiency=efficiency,
              weight_read=weight_read)
    d = Derivation(f"Operating point: {m.name} on {hw.name} (weight read {weight_read}, "
                   f"{usable:.0%} of HBM usable)")
    cap = float(usable_memory(hw, chips, usable))
    d.add("C", "chips · HBM · usable", f"{hw.scaleup_size if chips is None else chips} · "
          f"{fmt(hw.chip.hbm_bytes, 'B')} · {usable:g}", cap, "B")
    w = d.add("W", "weights stored", "", m.weight_bytes(weights_dtype), "B")
    if batch is not None:
        L = fill_context(m, hw, batch=batch, chips=chips, weights_dtype=weights_dtype, kv_dtype=kv_dtype,
                         usable=usable)
        if not np.isfinite(L):
            raise InputError("operating_batch", f"{m.name}'s weights alone do not fit in {fmt(cap, 'B')} of usable "
                             "HBM, so no context fills it", "more usable HBM, more chips or a smaller dtype")
        d.add("L_fill", "W + B·KV(L) = C", f"B = {batch:g}", L, "tokens", "the context that fills HBM")
        b_mem = float(memory_batch_limit(m, hw, context=L, chips=chips, weights_dtype=weights_dtype,
                                         kv_dtype=kv_dtype, usable=usable))
        b_star = float("nan")
        b_op, why = float(batch), "given"
    else:
        L = float(context)
        b_mem = d.add("B_mem", "(C − W) / KV(L)", f"({fmt(cap, 'B')} − {fmt(w, 'B')}) / "
                      f"{fmt(float(m.kv_cache_bytes(L + 1, kv_dtype or m.kv_dtype)), 'B')}",
                      float(memory_batch_limit(m, hw, context=L, chips=chips, weights_dtype=weights_dtype,
                                               kv_dtype=kv_dtype, usable=usable)), "sequences")
        b_star = d.add("B*", "smallest B with t_compute ≥ t_weights + t_kv", f"context {L:g}",
                       float(balance_batch_for(m, hw, context=L, **kw)), "sequences", "")
        want = b_star * multiple if (multiple and np.isfinite(b_star)) else b_star
        if b_mem < 1:
            raise InputError("context", f"{m.name}'s weights plus one sequence at {L:g} tokens do not fit in "
                             f"{fmt(cap, 'B')}", "a shorter context, more chips or a smaller dtype")
        b_op, why = (want, "compute floor") if want <= b_mem else (b_mem, "memory capacity")
        d.add("B_op", "min(B*" + (f" × {multiple:g}" if multiple else "") + ", B_mem)", "", b_op, "sequences",
              f"limited by {why}")
    r = roofline(m, hw, batch=b_op, context=L, **kw)
    step = d.add("t_step", "max(t_compute, t_weights + t_kv) at B_op", f"{fmt(float(r.t_compute_s), 's')} vs "
                 f"{fmt(float(r.t_weights_s), 's')} + {fmt(float(r.t_kv_s), 's')}", float(r.step_s), "s",
                 f"{r.bound} binds; drain time C/BW = {fmt(cap / ((hw.scaleup_size if chips is None else chips) * hw.chip.hbm_bw), 's')}")
    d.add("tokens/s", "B_op / t_step", "", b_op / step, "tok/s")
    return OperatingPoint(b_op, L, step, str(r.bound), why, b_mem, b_star, weight_read, usable, d)


def latency_floor_for(model, hardware, *, chips=None, weights_dtype=None, weight_read="hit"):
    """The engine's latency floor: the weight-fetch time of a one-token step (B = 1, no context).

    ``weight_read="all"``: every weight over the domain's bandwidth (the lecture's floor,
    R29); ``"hit"``: the dense weights plus the k experts one token routes to. Equals
    ``roofline(..., batch=1, context=0).t_weights_s`` by construction, and the weight line
    of the batch plot at B = 1.
    """
    r = roofline(model, hardware, chips=chips, batch=1.0, context=0.0, weights_dtype=weights_dtype,
                 weight_read=weight_read)
    return float(r.t_weights_s), float(r.weight_bytes_read), r


def unbatched_penalty(model, hardware, *, context=8192, chips=None, weights_dtype=None, kv_dtype=None,
                      efficiency=None, max_batch=None, weight_read="hit", usable=USABLE_HBM):
    """Cost per token at B = 1 over the best cost per token at any batch that fits (lecture 00:03, R2:
    "a thousand times worse").

    Searches B on a log grid from 1 to the memory limit B_mem (weights + KV ≤ usable
    HBM; ``max_batch`` can only lower it). Returns (penalty, best batch, cost at B=1, best cost).
    """
    b_mem = float(memory_batch_limit(model, hardware, context=context, chips=chips, weights_dtype=weights_dtype,
                                     kv_dtype=kv_dtype, usable=usable))
    if b_mem < 1:
        raise InputError("context", "weights plus one sequence do not fit in HBM", "a shorter context or more chips")
    top = min(b_mem, max_batch or 1e8)  # at context 0 a tiny KV admits ~10⁹ sequences: the floor is reached far below
    grid = np.unique(np.concatenate([np.geomspace(1, max(top, 1.0), 400), [top]]))
    r = roofline(model, hardware, chips=chips, batch=grid, context=context, weights_dtype=weights_dtype,
                 kv_dtype=kv_dtype, efficiency=efficiency, weight_read=weight_read)
    cost = r.usd_per_mtok
    i = int(np.argmin(cost * (1 + 1e-9 * np.arange(grid.size))))  # first point at the floor
    return float(cost[0] / cost[i]), float(grid[i]), float(cost[0]), float(cost[i])


@dataclass
class FastMode:
    """A point on the latency/cost trade-off relative to an operating point."""

    operating_batch: float
    batch: float
    speedup: float  # tokens/s per sequence, relative to the operating point
    cost_multiple: float  # $ per token, relative to the operating point
    operating_step_s: float
    step_s: float
    derivation: Derivation
    context: float = 0.0

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("operating_batch", "batch", "speedup", "cost_multiple",
                                              "operating_step_s", "step_s", "context")} | {
            "derivation": self.derivation.as_dict()}


# The operating point fast mode is measured from, everywhere (`batching fast-mode`, `price … -m`, R1's real row and
# the docs): the lecture's "take this and maybe double or triple it" (00:16) — 2.5 × B*, capped by memory capacity.
FAST_OPERATING_MULTIPLE = 2.5


def fast_mode_closed(compute, weights, kv, *, speedup=None, price=None):
    """Fast mode by batching in closed form, from the operating point's three terms (lecture 00:05–00:12, R1).

    With the step at the operating point normalised to 1 = max(c, w + k) (c = t_compute,
    w = t_weights, k = t_kv, each ÷ t_step), shrinking the batch to x·B_op keeps the
    weight fetch and scales the other two: t(x) = max(c·x, w + k·x), cost/token ∝ t(x)/x.

    * speed s: T = 1/s, x = min(T/c, (T − w)/k), cost multiple = T/x (out of reach if T ≤ w:
      the weight fetch alone takes longer);
    * price p: cost(x) = max(c, w/x + k) = p ⇒ x = w/(p − k), speed = 1/t(x).

    Only the weight fetch is amortized by batching; compute and KV are "unique per batch"
    (00:12), so the cost of speed is set by the weights' share w. Returns (x, speed, cost
    multiple); nan where out of reach. Broadcasts.
    """
    c, w, k = (np.asarray(v, dtype=float) for v in (compute, weights, kv))
    with np.errstate(divide="ignore", invalid="ignore"):
        if speedup is not None:
            T = 1.0 / np.asarray(speedup, dtype=float)
            x_c = np.where(c > 0, T / c, np.inf)
            x_m = np.where(k > 0, (T - w) / k, np.where(T >= w, np.inf, np.nan))
            x = np.minimum(np.minimum(x_c, x_m), 1.0)
            x = np.where(T > w, x, np.nan)
            return x, 1.0 / T + 0 * x, T / x
        p = np.asarray(price, dtype=float)
        x = np.where(p > k, w / (p - k), np.nan)
        x = np.where(x <= 1.0, x, np.nan)
        t = np.maximum(c * x, w + k * x)
        return x, 1.0 / t, p + 0 * x


def sheet_weights_share(price, speedup):
    """The weights' share w of a memory-bound step (no compute headroom) at which batching alone prices
    ``speedup`` at ``price`` (R1): (1 − w)/(1 − w·s) = p ⇒ w = (p − 1)/(p·s − 1).

    The lecture's 6× for 2.5×: w = 5/14 ≈ 36% of the bytes a step reads are weights.
    """
    p, s = np.asarray(price, dtype=float), np.asarray(speedup, dtype=float)
    return (p - 1.0) / (p * s - 1.0)


def _fast_grid(model, hardware, operating_batch, context, chips, weights_dtype, kv_dtype, efficiency, weight_read):
    grid = np.geomspace(1.0, operating_batch, 2000)
    r = roofline(model, hardware, chips=chips, batch=grid, context=context, weights_dtype=weights_dtype,
                 kv_dtype=kv_dtype, efficiency=efficiency, weight_read=weight_read)
    step = r.step_s
    speed = step[-1] / step  # relative per-sequence speed
    cost = (step / grid) / (step[-1] / grid[-1])  # relative $ per token
    return grid, step, speed, cost, r


def _fast_setup(model, hardware, context, chips, operating_multiple, operating_batch, weights_dtype, kv_dtype,
                efficiency, weight_read, usable):
    """The operating point fast mode is measured from (:func:`operating_point`: ``operating_batch`` given, else
    ``operating_multiple`` × B* at ``context``) and the batch grid below it (:func:`_fast_grid`): (op, grid)."""
    where = (dict(batch=operating_batch) if operating_batch is not None else
             dict(context=context, multiple=operating_multiple))
    op = operating_point(model, hardware, chips=chips, weights_dtype=weights_dtype, kv_dtype=kv_dtype,
                         efficiency=efficiency, weight_read=weight_read, usable=usable, **where)
    return op, _fast_grid(model, hardware, op.batch, op.context, chips, weights_dtype, kv_dtype, efficiency,
                          weight_read)


def _name(model):
    return getattr(model, "name", model)


def _by_speed(model, op, g, speedup):
    grid, step, speed, cost, _ = g
    if not speedup <= speed[0]:
        return None
    # speed decreases with batch: interpolate on the reversed (increasing) arrays
    b = float(np.interp(speedup, speed[::-1], grid[::-1]))
    cm = float(np.interp(speedup, speed[::-1], cost[::-1]))
    st = float(np.interp(speedup, speed[::-1], step[::-1]))
    d = Derivation(f"Fast mode by batching: {speedup:g}× speed on {_name(model)}")
    d.steps.extend(op.derivation.steps)
    d.add("max speed-up", "t_step(B_op) / t_step(1)", f"{fmt(step[-1], 's')} / {fmt(step[0], 's')}", speed[0], "×")
    d.add("B_fast", f"B with t_step(B_op)/t_step(B) = {speedup:g}", "", b, "")
    d.add("cost multiple", "(t_step(B)/B) / (t_step(B_op)/B_op)", "", cm, "×")
    d.conclusion = f"→ {speedup:g}× speed costs {cm:.3g}× per token at batch {b:.4g}"
    return FastMode(op.batch, b, float(speedup), cm, float(step[-1]), st, d, op.context)


def _by_price(model, op, g, price_multiple):
    grid, step, speed, cost, _ = g
    reachable = price_multiple <= cost[0]
    b = float(np.interp(price_multiple, cost[::-1], grid[::-1])) if reachable else 1.0
    sp = float(np.interp(price_multiple, cost[::-1], speed[::-1])) if reachable else float(speed[0])
    st = float(np.interp(price_multiple, cost[::-1], step[::-1])) if reachable else float(step[0])
    d = Derivation(f"What {price_multiple:g}× price buys by batching on {_name(model)}")
    d.steps.extend(op.derivation.steps)
    d.add("B_fast", f"B with cost(B)/cost(B_op) = {price_multiple:g}", "", b, "")
    d.add("speed-up", "t_step(B_op) / t_step(B_fast)", f"{fmt(step[-1], 's')} / {fmt(st, 's')}", sp, "×")
    d.conclusion = f"→ {price_multiple:g}× price buys {sp:.3g}× speed at batch {b:.4g}"
    return FastMode(op.batch, b, sp, float(price_multiple), float(step[-1]), st, d, op.context)


def fast_mode_from_speedup(model, hardware, speedup, *, context=8192, chips=None,
                           operating_multiple=FAST_OPERATING_MULTIPLE, operating_batch=None, weights_dtype=None,
                           kv_dtype=None, efficiency=None, weight_read="hit", usable=USABLE_HBM) -> FastMode:
    """Fast mode by batching alone: the batch that gives ``speedup`` × the operating point's per-sequence
    speed, and the cost multiple it implies (lecture 00:00–00:12, R1).

    The operating point is :func:`operating_point` at min(``operating_multiple`` × B*, B_mem)
    (default 2.5, as :func:`fast_mode`; ``operating_batch`` given: that batch with the
    context that fills HBM). speed(B) = 1 / t_step(B);
    cost(B) ∝ t_step(B) / B, each user keeping its context. Shrinking the batch shortens
    the step only down to the latency floor, so the largest speed-up batching can buy is
    t_step(B_op) / t_step(1): beyond it, a one-line error. :func:`fast_mode` is the one
    entry point the commands use (both directions, the assumption, other operating points).
    """
    op, g = _fast_setup(model, hardware, context, chips, operating_multiple, operating_batch, weights_dtype, kv_dtype,
                        efficiency, weight_read, usable)
    fm = _by_speed(model, op, g, speedup)
    if fm is None:  # an unreachable result is a one-line error, never NaN (issue 11)

        best = g[2][0]
        raise InputError("speedup", f"{speedup:g}× is out of reach by batching alone on {_name(model)}"
                                    f" (the roofline's best is {best:.3g}×, at batch 1)", f"a speed-up up to {best:.3g}")
    return fm


def fast_mode_from_price(model, hardware, price_multiple, *, context=8192, chips=None,
                         operating_multiple=FAST_OPERATING_MULTIPLE, operating_batch=None, weights_dtype=None,
                         kv_dtype=None, efficiency=None, weight_read="hit", usable=USABLE_HBM) -> FastMode:
    """The reverse: what batch and speed-up a ``price_multiple`` × price buys by batching alone (R1).

    Finds B < B_op whose cost per token is ``price_multiple`` × the operating point's,
    and the speed-up it gives.
    """
    op, g = _fast_setup(model, hardware, context, chips, operating_multiple, operating_batch, weights_dtype, kv_dtype,
                        efficiency, weight_read, usable)
    return _by_price(model, op, g, price_multiple)


@dataclass
class FastModeAnswer:
    """Fast mode by batching, both ways, with the operating point it is measured from (R1).

    ``shares`` are the operating step's compute, weight-fetch and KV-fetch times ÷ the step:
    they decide the answer (only the weight fetch is amortized by batching), so every
    command prints them beside it as ``assumption``.
    """

    by_speed: FastMode | None  # None: the speed-up is out of reach by batching alone
    by_price: FastMode | None
    speedup: float | None
    price: float | None
    max_speedup: float  # t_step(B_op) / t_step(1)
    operating: OperatingPoint
    operating_multiple: float | None
    shares: tuple  # (compute, weights, kv) ÷ t_step at the operating point
    headroom: float  # B_op / B* (> 1: compute-bound, the speed below it is free)
    closed: dict  # the closed form from the shares (fast_mode_closed): cost multiple, speed
    label: str = ""

    @property
    def assumption(self) -> str:
        op, (c, w, k) = self.operating, self.shares
        how = ("batch given" if op.limited_by == "given" else
               f"min({self.operating_multiple:g} × B*, B_mem)" if self.operating_multiple not in (None, float("inf"))
               else "B_mem: HBM full" if self.operating_multiple == float("inf") else "min(B*, B_mem)")
        hr = "0 (B* = ∞: the KV fetch outruns compute at any batch)" if self.headroom == 0 else f"{self.headroom:.3g}"
        return (f"operating batch {op.batch:,.0f} ({how}, limited by {op.limited_by}) at {op.context:,.0f} context, "
                f"weight read {op.weight_read}; B_op/B* = {hr}; the step is {c:.0%} compute, "
                f"{w:.0%} weight fetch, {k:.0%} KV fetch")

    def as_dict(self) -> dict:
        c, w, k = self.shares
        return {"speedup": self.speedup, "price": self.price, "max_speedup": self.max_speedup,
                "by_speed": self.by_speed.as_dict() if self.by_speed else None,
                "by_price": self.by_price.as_dict() if self.by_price else None,
                "cost_multiple": self.by_speed.cost_multiple if self.by_speed else None,
                "speedup_bought": self.by_price.speedup if self.by_price else None,
                "operating_multiple": self.operating_multiple, "headroom": self.headroom,
                "shares": {"compute": c, "weights": w, "kv": k}, "closed_form": self.closed,
                "assumption": self.assumption, "operating": self.operating.as_dict(), "label": self.label}


def fast_mode(model, hardware, *, speedup=None, price=None, context=8192, chips=None,
              operating_multiple=FAST_OPERATING_MULTIPLE, operating_batch=None, weights_dtype=None, kv_dtype=None,
              efficiency=None, weight_read="hit", usable=USABLE_HBM, label="") -> FastModeAnswer:
    """Fast mode by batching alone — the one answer every command and doc gives (lecture 00:00–00:12, R1).

    From the operating point (default min(2.5 × B*, B_mem): the lecture's "double or
    triple it", capped by memory; ``operating_batch`` given: that batch with the context
    that fills HBM, the lecture's 20 ms premise), the cost multiple a ``speedup`` costs and
    the speed a ``price`` multiple buys, on the engine's roofline. The answer is set by the
    operating step's shares (compute headroom above B* is free speed; below it only the
    weight fetch is amortized), returned with it as ``assumption``, and checked against the
    closed form :func:`fast_mode_closed`.

    Its keywords are ``rackmath batching fast-mode``'s options one for one (the CLI and web forward them): a reason
    for more than twelve.
    """
    op, g = _fast_setup(model, hardware, context, chips, operating_multiple, operating_batch, weights_dtype, kv_dtype,
                        efficiency, weight_read, usable)
    r = g[4]
    t = float(g[1][-1])
    shares = (float(r.t_compute_s[-1]) / t, float(r.t_weights_s[-1]) / t, float(r.t_kv_s[-1]) / t)
    bs = float(op.balance_batch) if not np.isnan(op.balance_batch) else float(
        balance_batch_for(model, hardware, context=op.context, chips=chips, weights_dtype=weights_dtype,
                          kv_dtype=kv_dtype, efficiency=efficiency, weight_read=weight_read))
    closed = {}
    if speedup is not None:
        closed["cost_multiple"] = float(fast_mode_closed(*shares, speedup=speedup)[2])
    if price is not None:
        closed["speedup"] = float(fast_mode_closed(*shares, price=price)[1])
    by_speed = _by_speed(model, op, g, speedup) if speedup is not None else None
    by_price = _by_price(model, op, g, price) if price is not None else None
    c, w, k = shares
    for fm, key, what in ((by_speed, "cost_multiple", "cost multiple"), (by_price, "speedup", "speed-up")):
        if fm is None:
            continue
        fm.derivation.add("c", "t_compute / t_step at B_op", "", c, "")
        fm.derivation.add("w", "t_weights / t_step at B_op", "", w, "",
                          "only the weight fetch is amortized by batching; compute and KV are per sequence (00:12)")
        fm.derivation.add("k", "t_kv / t_step at B_op", "", k, "")
        fm.derivation.add(f"{what} (closed form)", "t(x) = max(c·x, w + k·x), cost ∝ t(x)/x (every weight read)",
                          "", closed[key], "×", "the engine's number differs where fewer experts are hit at small B")
    return FastModeAnswer(by_speed, by_price, speedup, price, float(g[2][0]), op,
                          None if operating_batch is not None else operating_multiple, shares,
                          float(op.batch / bs) if bs > 0 else float("inf"), closed, label)


def fast_mode_sensitivity(model, hardware, *, speedup=None, price=None, context=8192, **kw) -> list[FastModeAnswer]:
    """The same fast-mode question under the assumptions the answer depends on (R1): the operating point at
    B* (the cost floor, no compute headroom), at 2.5 × B* (the default) and with HBM full (B_mem, the ~20 ms
    step); and the default point at a short (1,024) and a long (131,072) context. Points that do not fit
    (weights plus one sequence over HBM) are left out."""
    kw = {k: v for k, v in kw.items() if k not in ("operating_multiple", "operating_batch", "label")}
    out = []
    for m, L, lab in ((1.0, context, "at B* (the cost floor)"),
                      (FAST_OPERATING_MULTIPLE, context, f"at {FAST_OPERATING_MULTIPLE:g} × B* (default)"),
                      (float("inf"), context, "HBM full (B_mem)"),
                      (FAST_OPERATING_MULTIPLE, 1024, f"at {FAST_OPERATING_MULTIPLE:g} × B*, 1,024 context"),
                      (FAST_OPERATING_MULTIPLE, 131072, f"at {FAST_OPERATING_MULTIPLE:g} × B*, 131,072 context")):
        try:
            out.append(fast_mode(model, hardware, speedup=speedup, price=price, context=L, operating_multiple=m,
                                 label=lab, **kw))
        except InputError:
            continue
    return out


def slow_mode_floor(model, hardware, *, context=8192, chips=None, operating_multiple=None, weights_dtype=None,
                    kv_dtype=None, efficiency=None, weight_read="hit", usable=USABLE_HBM):
    """The cost floor a slow mode can reach: cost per token at the largest batch that fits in memory,
    relative to the operating point (lecture 00:12: "what is the minimum work you can do per batch after
    amortizing everything else away?"). ≤ 1; 1 when the operating point is already memory-limited.
    """
    op = operating_point(model, hardware, context=context, chips=chips, multiple=operating_multiple,
                         weights_dtype=weights_dtype, kv_dtype=kv_dtype, efficiency=efficiency,
                         weight_read=weight_read, usable=usable)
    r = roofline(model, hardware, chips=chips, batch=np.array([op.batch, max(op.memory_limit, op.batch)]),
                 context=context, weights_dtype=weights_dtype, kv_dtype=kv_dtype, efficiency=efficiency,
                 weight_read=weight_read)
    c = r.usd_per_mtok
    return float(c[1] / c[0])


def prefill_decode_costs(model, hardware, pass_len, *, batch=1, context=8192, chips=None, weights_dtype=None,
                         kv_dtype=None, efficiency=None, weight_read="hit"):
    """Cost per token vs pass length (lecture 01:40–01:47, R38): decode is P = 1, prefill P ≫ 1.

    cost/token = t_step(B, P) / (B · P): the weight and KV fetches are divided by P, so
    prefill becomes compute-bound while decode stays memory-bound. The ratio
    cost(P = 1) / cost(P) is what an output/input price ratio reflects.
    """
    return roofline(model, hardware, chips=chips, batch=batch, context=context, pass_len=pass_len,
                    weights_dtype=weights_dtype, kv_dtype=kv_dtype, efficiency=efficiency, weight_read=weight_read)
