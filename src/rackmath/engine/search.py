"""The layout search: every valid (TP, EP, PP, attention DP, micro-batch) of a model on a chip budget at once,
and the Pareto frontier of $/Mtok against tokens/s per user (lecture 00:32–01:18; ``rackmath layout``).

:func:`layout_grid` enumerates the valid layouts (the rules of ``engine/deployment.py``), one call of
``engine/layout.evaluate`` costs them all, :func:`pareto_front` keeps the frontier.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..bounds import MAX_INT_OPTION, MAX_LAYOUTS
from ..errors import InputError
from ..results import ResultMixin
from ..specs.hardware import load_hardware
from ..units import dtype_bytes
from .comms import divisors as _divisors
from .deployment import attention_tp_ok, check_chips
from .layout import LayoutArrays, check_weight_layout, evaluate
from .numbers import HwNumbers, ModelNumbers, load_model_any


def candidate_degrees(chips: int, scaleup_size: int) -> np.ndarray:
    """TP candidates: powers of two, the domain size and its multiples, up to ``chips``."""
    c = {1 << i for i in range(0, 20) if (1 << i) <= chips}
    c |= {m * scaleup_size for m in range(1, chips // scaleup_size + 1)}
    c |= {d for d in _divisors(scaleup_size) if d <= chips}
    return np.array(sorted(x for x in c if x <= chips), dtype=float)


#: Narrowest expert shard the search will consider (columns of d_ff per chip): below one 128-wide
#: tensor-core tile a matmul wastes most of its work. This is the lecture's "the experts are so small
#: now that [tensor parallelism within an expert] is not a profitable optimization" (01:10).
MIN_EXPERT_SHARD = 128


def layout_grid(mn: ModelNumbers, chips: int, scaleup_size: int, *, micro_batches=None, max_pp=None,
                redundant_experts=0, uneven_experts=True, attention_dp=(False, True),
                min_expert_shard=MIN_EXPERT_SHARD, weight_layouts=("1d",)) -> dict:
    """Arrays (tp, ep, pp, attention_dp, micro_batch; weight_layout where more than 1D is asked for) of every valid
    layout for ``chips`` chips.

    Valid: TP·PP ≤ chips, TP divides the attention heads without attention DP (:func:`attention_tp_ok`), EP
    divides TP, EP ≤ expert slots (and divides them unless uneven placement is allowed), experts not cut narrower
    than ``min_expert_shard`` columns, PP ≤ layers. ``weight_layouts``
    (:data:`WEIGHT_LAYOUTS`): 2D and weight-gathered rows for dense models, TP > 1, without attention DP.
    """
    wls = [str(w) for w in check_weight_layout(np.atleast_1d(np.asarray(weight_layouts)), mn.name, mn.is_moe)]
    tps = candidate_degrees(chips, scaleup_size)
    max_pp = max_pp or min(mn.n_layers, 16)
    pps = np.array([p for p in range(1, max_pp + 1) if p <= chips], dtype=float)
    if micro_batches is None:
        micro_batches = np.unique(np.round(np.geomspace(1, 8192, 49)))
    micro_batches = np.asarray(micro_batches, dtype=float)
    rows = []
    slots = mn.n_experts + redundant_experts
    limit = max(1, MAX_LAYOUTS // max(len(micro_batches), 1))  # checked while enumerating, before evaluating
    for tp in tps:
        if len(rows) > limit:
            raise InputError("chips", f"more than {MAX_LAYOUTS:,} layouts × batches to evaluate for {chips} chips",
                             "fewer chips, a smaller --max-pp or fewer --batch values")
        eps = [d for d in _divisors(int(tp))] if mn.is_moe else [1]
        if mn.is_moe:  # an expert cut over TP/EP chips: its width must split evenly (2,048 over 3 does not)
            eps = [e for e in eps if e <= slots and (uneven_experts or slots % e == 0)
                   and (not mn.expert_width or (mn.expert_width / (tp / e) >= min_expert_shard
                                                and mn.expert_width % (tp // e) == 0))]
        for ep in eps:
            for p in pps:
                if tp * p > chips:
                    continue
                for adp in attention_dp:
                    if adp and tp == 1:
                        continue
                    if not adp and not attention_tp_ok(int(tp), mn.tp_heads, mn.kv_heads):
                        continue  # TP24 over 128 heads: no stack runs it (attention DP keeps each head whole)
                    for w, wl in enumerate(wls):
                        if wl == "1d" or (tp > 1 and not adp):
                            rows.append((tp, ep, p, adp, w))
    if not rows:
        raise InputError("chips", f"no layout fits {chips} chips", "at least 1 chip")
    g = np.array(rows, dtype=float)
    n_l, n_b = len(g), len(micro_batches)
    out = dict(tp=np.repeat(g[:, 0], n_b), ep=np.repeat(g[:, 1], n_b), pp=np.repeat(g[:, 2], n_b),
               attention_dp=np.repeat(g[:, 3].astype(bool), n_b), micro_batch=np.tile(micro_batches, n_l))
    if wls != ["1d"]:
        out["weight_layout"] = np.repeat(np.array(wls)[g[:, 4].astype(int)], n_b)
    return out


def pareto_front(cost, speed, tiebreak=None) -> np.ndarray:
    """Indices of the Pareto frontier: no other point is both cheaper and faster (sorted by speed).

    Ties (same speed and cost) go to the smallest ``tiebreak`` (the search uses communication time).
    """
    cost = np.asarray(cost, dtype=float)
    speed = np.asarray(speed, dtype=float)
    tb = np.zeros_like(cost) if tiebreak is None else np.asarray(tiebreak, dtype=float)
    order = np.lexsort((tb, cost, -speed))  # fastest first, then cheapest, then least communication
    best = np.minimum.accumulate(cost[order])
    prev = np.concatenate(([np.inf], best[:-1]))
    keep = cost[order] < prev
    return order[keep][::-1]


@dataclass(repr=False)
class SearchResult(ResultMixin):
    """All evaluated layouts, the ones that fit and the Pareto frontier ($/Mtok vs tokens/s per user).
    ``to_frame()``: one row per frontier layout."""

    _SUMMARY = (("tokens_per_s_per_user", "tok/s"), ("usd_per_mtok", "$"))
    _ROW = "frontier layout"

    def _frame_dict(self) -> dict:
        return {"model": self.layouts.model.name, "hardware": self.layouts.hw.name} | self.frontier.as_dict()

    layouts: LayoutArrays
    fits: np.ndarray
    frontier: LayoutArrays
    n_evaluated: int
    seconds: float

    def as_dict(self) -> dict:
        return {"n_evaluated": self.n_evaluated, "n_fit": int(self.fits.sum()), "seconds": self.seconds,
                "frontier": self.frontier.as_dict()}


def search_layouts(model, system, chips, *, context, weights_dtype=None, kv_dtype=None, efficiency=None,
                   overlap=None, act_dtype="bf16", micro_batches=None, max_pp=None, redundant_experts=0,
                   uneven_experts=True, hop_latency_s=None, usable_fraction=1.0, min_tokens_per_s_per_user=0.0,
                   collective_latency_s=None, weight_layouts=("1d",)) -> SearchResult:
    """Enumerate every valid layout of ``model`` on ``chips`` chips of ``system``; return the Pareto frontier.

    More than twelve parameters: its keywords are ``rackmath layout``'s options one for one (and the public
    ``rackmath.layout(**kw)``'s names), split between :func:`layout_grid` and ``engine.layout.evaluate``.

    ``weight_layouts``: the ways a TP group may hold a dense model's weights (:data:`WEIGHT_LAYOUTS`; default 1D
    weight-stationary only) — ("1d", "2d", "gathered") puts Pope et al. 2022's three layouts on one frontier.

    Vectorized: one call of ``engine.layout.evaluate`` on arrays of all layouts (≥ 10⁵ layouts/s,
    benchmarks/bench_layout.py).
    """
    system = load_hardware(system)
    chips = check_chips(system, int(chips))
    if chips > MAX_INT_OPTION:  # the TP candidates alone would be chips / scale-up domain integers (10 GB at 10⁹)
        raise InputError("chips", f"{chips:,} chips is too many to search", f"at most {MAX_INT_OPTION:,} (the CLI's "
                                                                           f"limit)")
    model = load_model_any(model)
    mn = model if isinstance(model, ModelNumbers) else ModelNumbers.from_model(
        model, context, weights_dtype=weights_dtype, kv_dtype=kv_dtype)
    dtype = weights_dtype or getattr(model, "native_dtype", None) or "bf16"
    hw = HwNumbers.from_system(system, dtype, efficiency)
    t0 = time.perf_counter()
    g = layout_grid(mn, chips, hw.scaleup_size, micro_batches=micro_batches, max_pp=max_pp,
                    redundant_experts=redundant_experts, uneven_experts=uneven_experts,
                    weight_layouts=weight_layouts)
    res = evaluate(mn, hw, chips=chips, redundant_experts=redundant_experts, overlap=overlap,
                   act_bytes=dtype_bytes(act_dtype), hop_latency_s=hop_latency_s, usable_fraction=usable_fraction,
                   collective_latency_s=collective_latency_s, **g)
    ok = res.fits & (res.tokens_per_s_per_user >= min_tokens_per_s_per_user)
    idx = np.flatnonzero(ok)
    front = idx[pareto_front(res.usd_per_mtok[idx], res.tokens_per_s_per_user[idx], res.t_comm_s[idx])] \
        if idx.size else idx
    dt = time.perf_counter() - t0
    return SearchResult(res, ok, res.take(front), len(res), dt)


__all__ = ["SearchResult", "search_layouts", "layout_grid", "pareto_front", "candidate_degrees", "MIN_EXPERT_SHARD"]
