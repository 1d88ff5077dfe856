"""Chapter one: how batch size sets the latency and the cost of every token (lecture 00:00–00:32).

One function per equation. Pure functions of numbers first; the ``*_for`` adapters
take a model and hardware and call the roofline engine.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..engine.roofline import roofline
from ..explain import Derivation, fmt
from ..specs.hardware import hardware_ratio  # noqa: F401  (re-exported: the lecture's ratio, R5)

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


def balance_batch_for(model, hardware, *, context=0.0, chips=None, weights_dtype=None, kv_dtype=None,
                      efficiency=None, max_batch=1e8):
    """B* solved numerically on the full roofline: the smallest B with t_compute ≥ t_weights + t_kv.

    With context = 0 this is the lecture's weights-only balance (R6), refined by the
    expected number of distinct experts read. With the KV term included B* grows (R7):
    KV bandwidth leaves less for the weights, so more batch is needed to amortize them.
    Returns inf where the KV fetch alone outruns compute (never compute-bound).
    ``context`` broadcasts.
    """
    ctx = np.asarray(context, dtype=float)

    def gap(b):
        r = roofline(model, hardware, chips=chips, batch=b, context=ctx, weights_dtype=weights_dtype,
                     kv_dtype=kv_dtype, efficiency=efficiency)
        return r.t_compute_s - (r.t_weights_s + r.t_kv_s)

    big = gap(np.full(np.shape(ctx), max_batch))
    b = _bisect_log(lambda x: gap(np.broadcast_to(x, np.shape(ctx))), 1.0, max_batch)
    return np.where(big >= 0, b, np.inf)


def cost_curves(model, hardware, batch, *, context=8192, chips=None, pass_len=1, weights_dtype=None, kv_dtype=None,
                efficiency=None):
    """Latency and cost per token vs batch with the three terms kept separate (lecture 00:05–00:12).

    Returns the roofline result; its t_compute_s, t_weights_s, t_kv_s divided by B are
    the three cost curves (compute flat, weights a hyperbola, KV flat).
    """
    return roofline(model, hardware, chips=chips, batch=batch, context=context, pass_len=pass_len,
                    weights_dtype=weights_dtype, kv_dtype=kv_dtype, efficiency=efficiency)


def unbatched_penalty(model, hardware, *, context=8192, chips=None, weights_dtype=None, kv_dtype=None,
                      efficiency=None, max_batch=1e6):
    """Cost per token at B = 1 over the best cost per token at any batch (lecture 00:03, R2: "~1000× worse").

    Searches B on a log grid (the cheapest point is at or beyond B*; beyond it cost is flat).
    Returns (penalty, best batch, cost at B=1, best cost).
    """
    grid = np.geomspace(1, max_batch, 400)
    r = roofline(model, hardware, chips=chips, batch=grid, context=context, weights_dtype=weights_dtype,
                 kv_dtype=kv_dtype, efficiency=efficiency)
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

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("operating_batch", "batch", "speedup", "cost_multiple",
                                              "operating_step_s", "step_s")} | {"derivation": self.derivation.as_dict()}


def _fast_grid(model, hardware, operating_batch, context, chips, weights_dtype, kv_dtype, efficiency):
    grid = np.geomspace(1.0, operating_batch, 2000)
    r = roofline(model, hardware, chips=chips, batch=grid, context=context, weights_dtype=weights_dtype,
                 kv_dtype=kv_dtype, efficiency=efficiency)
    step = r.step_s
    speed = step[-1] / step  # relative per-sequence speed
    cost = (step / grid) / (step[-1] / grid[-1])  # relative $ per token
    return grid, step, speed, cost


def operating_point(model, hardware, *, context=8192, chips=None, multiple=2.5, weights_dtype=None, kv_dtype=None,
                    efficiency=None):
    """The cost-optimal operating batch: ``multiple`` × B* (lecture 00:17: "take this and maybe double or triple it")."""
    b_star = float(balance_batch_for(model, hardware, context=context, chips=chips, weights_dtype=weights_dtype,
                                     kv_dtype=kv_dtype, efficiency=efficiency))
    if not np.isfinite(b_star):  # KV-bound at any batch: operate at the weights-only balance
        b_star = float(balance_batch_for(model, hardware, context=0.0, chips=chips, weights_dtype=weights_dtype,
                                         kv_dtype=kv_dtype, efficiency=efficiency))
    return multiple * b_star, b_star


def fast_mode_from_speedup(model, hardware, speedup, *, context=8192, chips=None, operating_multiple=2.5,
                           weights_dtype=None, kv_dtype=None, efficiency=None) -> FastMode:
    """Fast mode by batching alone: the batch that gives ``speedup`` × the operating point's per-sequence
    speed, and the cost multiple it implies (lecture 00:00–00:12, R1).

    speed(B) = P / t_step(B); cost(B) ∝ t_step(B) / B. Shrinking the batch below the
    operating point shortens the step only down to the latency floor (weights + KV of
    the remaining batch), so the largest speed-up batching can buy is
    t_step(B_op) / t_step(B → 1). Returns nan batch where the speed-up is out of reach.
    """
    b_op, b_star = operating_point(model, hardware, context=context, chips=chips, multiple=operating_multiple,
                                   weights_dtype=weights_dtype, kv_dtype=kv_dtype, efficiency=efficiency)
    grid, step, speed, cost = _fast_grid(model, hardware, b_op, context, chips, weights_dtype, kv_dtype, efficiency)
    reachable = speedup <= speed[0]
    if not reachable:  # an unreachable result is a one-line error, never NaN (issue 11)
        from ..errors import InputError

        raise InputError("speedup", f"{speedup:g}× is out of reach by batching alone on {getattr(model, 'name', model)}"
                                    f" (the roofline's best is {speed[0]:.3g}×, at batch 1)",
                         f"a speed-up up to {speed[0]:.3g}")
    # speed decreases with batch: interpolate on the reversed (increasing) arrays
    b = float(np.interp(speedup, speed[::-1], grid[::-1]))
    cm = float(np.interp(speedup, speed[::-1], cost[::-1]))
    st = float(np.interp(speedup, speed[::-1], step[::-1]))
    d = Derivation(f"Fast mode by batching: {speedup:g}× speed on {getattr(model, 'name', model)}")
    d.add("B*", "balance batch (t_compute = t_weights + t_kv)", f"context {context:g}", b_star, "")
    d.add("B_op", "multiple × B*", f"{operating_multiple:g} × {b_star:.4g}", b_op, "")
    d.add("t_op", "t_step(B_op)", "", step[-1], "s")
    d.add("max speed-up", "t_step(B_op) / t_step(1)", f"{fmt(step[-1], 's')} / {fmt(step[0], 's')}", speed[0], "×")
    d.add("B_fast", f"B with t_step(B_op)/t_step(B) = {speedup:g}", "", b, "")
    d.add("cost multiple", "(t_step(B)/B) / (t_step(B_op)/B_op)", "", cm, "×")
    d.conclusion = ("→ out of reach by batching alone" if not reachable else
                    f"→ {speedup:g}× speed costs {cm:.3g}× per token at batch {b:.4g}")
    return FastMode(b_op, b, float(speedup), cm, float(step[-1]), st, d)


def fast_mode_from_price(model, hardware, price_multiple, *, context=8192, chips=None, operating_multiple=2.5,
                         weights_dtype=None, kv_dtype=None, efficiency=None) -> FastMode:
    """The reverse: what batch and speed-up a ``price_multiple`` × price buys by batching alone (R1).

    Finds B < B_op whose cost per token is ``price_multiple`` × the operating point's,
    and the speed-up it gives. "Does 6× price for 2.5× speed fit pure batching?" compares
    that speed-up with 2.5.
    """
    b_op, b_star = operating_point(model, hardware, context=context, chips=chips, multiple=operating_multiple,
                                   weights_dtype=weights_dtype, kv_dtype=kv_dtype, efficiency=efficiency)
    grid, step, speed, cost = _fast_grid(model, hardware, b_op, context, chips, weights_dtype, kv_dtype, efficiency)
    reachable = price_multiple <= cost[0]
    # cost decreases with batch
    b = float(np.interp(price_multiple, cost[::-1], grid[::-1])) if reachable else 1.0
    sp = float(np.interp(price_multiple, cost[::-1], speed[::-1])) if reachable else float(speed[0])
    st = float(np.interp(price_multiple, cost[::-1], step[::-1])) if reachable else float(step[0])
    d = Derivation(f"What {price_multiple:g}× price buys by batching on {getattr(model, 'name', model)}")
    d.add("B*", "balance batch", f"context {context:g}", b_star, "")
    d.add("B_op", "multiple × B*", f"{operating_multiple:g} × {b_star:.4g}", b_op, "")
    d.add("B_fast", f"B with cost(B)/cost(B_op) = {price_multiple:g}", "", b, "")
    d.add("speed-up", "t_step(B_op) / t_step(B_fast)", f"{fmt(step[-1], 's')} / {fmt(st, 's')}", sp, "×")
    d.conclusion = f"→ {price_multiple:g}× price buys {sp:.3g}× speed at batch {b:.4g}"
    return FastMode(b_op, b, sp, float(price_multiple), float(step[-1]), st, d)


def slow_mode_floor(model, hardware, *, context=8192, chips=None, operating_multiple=2.5, weights_dtype=None,
                    kv_dtype=None, efficiency=None, max_batch=1e7):
    """The cost floor a slow mode can reach: cost per token as B → ∞ relative to the operating point.

    At large batch the weight fetch is amortized away and cost per token tends to
    max(compute, KV fetch) per token (lecture 00:12: "what is the minimum work you can
    do per batch after amortizing everything else away?"). Returns (floor / operating cost).
    """
    b_op, _ = operating_point(model, hardware, context=context, chips=chips, multiple=operating_multiple,
                              weights_dtype=weights_dtype, kv_dtype=kv_dtype, efficiency=efficiency)
    r = roofline(model, hardware, chips=chips, batch=np.array([b_op, max_batch]), context=context,
                 weights_dtype=weights_dtype, kv_dtype=kv_dtype, efficiency=efficiency)
    c = r.usd_per_mtok
    return float(c[1] / c[0])


def prefill_decode_costs(model, hardware, pass_len, *, batch=1, context=8192, chips=None, weights_dtype=None,
                         kv_dtype=None, efficiency=None):
    """Cost per token vs pass length (lecture 01:40–01:47, R38): decode is P = 1, prefill P ≫ 1.

    cost/token = t_step(B, P) / (B · P): the weight and KV fetches are divided by P, so
    prefill becomes compute-bound while decode stays memory-bound. The ratio
    cost(P = 1) / cost(P) is what an output/input price ratio reflects.
    """
    return roofline(model, hardware, chips=chips, batch=batch, context=context, pass_len=pass_len,
                    weights_dtype=weights_dtype, kv_dtype=kv_dtype, efficiency=efficiency)
