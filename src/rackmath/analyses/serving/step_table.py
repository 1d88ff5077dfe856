"""The one adapter between the serving step model and the simulator / planner.

Everything ``simulate``, ``plan`` and ``compare`` know about how long a step takes, how much
KV a replica holds and whether a layout fits comes from this module, which calls the serving
model (``analyses/serving/``: ``inputs``, ``steps``, ``schedule``) and nothing else of the model. The event loop,
the planner's search, the launch emitters and the CLI only see the plain numbers below, so a
new step model changes this file and nothing else.

What it provides (all plain SI floats):

* :class:`Stack` — the fixed inputs: model, system, dtypes, speculative settings, the
  efficiency preset (calibrated by default, ``ideal=True`` for the lecture's roofline).
* :func:`replica_layouts` — every valid replica layout (TP, EP, PP, attention-DP) of a chip
  up to a number of GPUs per replica (arrays).
* :func:`decode_grid` / :func:`prefill_grid` — step times broadcast over layouts × batch at one
  context (the planner's vectorized search), with memory fit and the largest batch that fits.
* :class:`StepTable` — one layout tabulated once over (batch, context) for decode steps and
  over the token budget for prefill chunks, with the replica's KV capacity in tokens; scalar
  look-ups cost well under a microsecond's worth of arithmetic, so the event loop stays cheap.

Scheduler composition (stated once): a scheduler iteration that carries a prefill chunk of P
tokens beside b decoding sequences is one forward pass (chunked prefill as vLLM, SGLang and
TensorRT-LLM run it): the weights are read once, FLOPs add, MoE experts hit and collectives use
all b·(k + 1) + P tokens, attention reads the decoding sequences' KV. A decode step emits A tokens
per sequence under speculative decoding (``acceptance``).

Mapping to the serving model (``analyses/serving/``), the one-step model of issue 9 (plan/evaluate):

=====================  ===============================================================
here                   serving API
=====================  ===============================================================
presets, stack         ``engine.efficiency.resolve(chip, efficiency, ideal)``,
                       ``inputs.load_stack(framework)`` (scheduler time and overlap)
one step               ``steps.run_step`` on ``decode_numbers`` / ``mixed_numbers`` /
                       ``prefill_numbers`` / ``draft_numbers``, ``speculative_step``
                       (one engine call per context over the (b, P) grid and the layouts)
steady state (plan)    ``schedule.steady_state`` (serve's: schedule, TTFT with t_request)
KV capacity            the engine's ``max_micro_batch`` at context L × PP × L (tokens)
KV hand-off            ``schedule.kv_transfer_time`` over the prefill replica's scale-out NICs
=====================  ===============================================================

"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np

from ...errors import InputError
from .inputs import load_stack, on_chip, receiving, speculating
from .schedule import kv_transfer_time, steady_state as serving_steady_state
from .steps import (decode_numbers, draft_numbers, eager_step, mixed_numbers, prefill_numbers, prefill_speed_step,
                    prompt_pass_time, run_step, speculative_step, step_kernels)
from ... import units
from ...engine.deployment import with_attention_groups
from ...engine.efficiency import for_stack, resolve, stack_eager_s, stack_request_s
from ...engine.layout import attention_ranks as ranks
from ...engine.numbers import HwNumbers
from ...engine.search import layout_grid
from ...specs.hardware import load_hardware
from ...specs.models import load_model


@dataclass
class Stack:
    """The fixed inputs of every step-time query (model, chip, dtypes, speculation, preset)."""

    model: object
    system: object
    weights_dtype: str | None
    kv_dtype: str
    compute_dtype: str
    mtp: int
    acceptance: float
    eff_decode: object
    eff_prefill: object
    eff_serving: object
    usd_per_gpu_hour: float
    framework: str | None = None
    serving_stack: object = None  # serving.Stack: scheduler overlap, the stack's budget and batch cap

    @property
    def chip(self) -> str:
        return str(self.system.chip.name)

    @property
    def efficiency(self) -> str:
        return str(self.eff_serving.name)

    @property
    def label(self) -> str:
        """'ideal roofline — a lower bound on time' or 'calibrated prediction, preset X (validated error ±Y%)'."""
        if callable(getattr(self.eff_serving, "label", None)):
            return self.eff_serving.label()
        if self.eff_serving.name == "ideal":
            return "ideal roofline — a lower bound on time"
        return f"calibrated prediction, preset {self.eff_serving.name}"

    def hw(self):
        """The system's plain numbers at this compute dtype (the step model applies the efficiency)."""
        if not hasattr(self, "_hw"):
            self._hw = HwNumbers.from_system(self.system, self.compute_dtype, None, self.kv_dtype)
        return self._hw

    @property
    def t_request(self) -> float:
        """The stack's host time per request before its first token (``engine.efficiency.stack_request_s``), s."""
        return stack_request_s(self.eff_serving, self.serving_stack.name)

    @property
    def weights_label(self) -> str:
        return self.weights_dtype or str(self.model.native_dtype)


def stack(model, hardware, *, weights_dtype=None, kv_dtype=None, mtp=0, acceptance=None, efficiency=None,
          ideal=False, usd_per_gpu_hour=None, framework=None, compute_dtype=None, recv_interval=None) -> Stack:
    """Resolve names once: model and system from the catalog, dtypes (the weight GEMMs' by ``Chip.gemm_dtype``,
    ``compute_dtype`` overriding their activations'), the efficiency preset, the serving stack (with its receive
    interval, ``inputs.receiving``)."""
    m = load_model(model) if isinstance(model, str) else model
    system = load_hardware(hardware) if isinstance(hardware, str) else hardware
    wdt = units.normalize_dtype(weights_dtype, "weights_dtype") if weights_dtype else None
    kvdt = units.normalize_dtype(kv_dtype or getattr(m, "kv_dtype", None) or "bf16", "kv_dtype")
    mtp = int(mtp or 0)
    if mtp < 0 or mtp > 16:
        raise InputError("mtp", f"{mtp} draft tokens", "a whole number from 0 to 16")
    a = 1.0 if acceptance is None else float(acceptance)
    if not 1.0 <= a <= mtp + 1:
        raise InputError("acceptance", f"{a:g} is outside [1, k + 1] = [1, {mtp + 1}]",
                         "the mean tokens emitted per verification step, between 1 and k + 1")
    price = float(system.chip.usd_per_hour) if usd_per_gpu_hour is None else float(usd_per_gpu_hour)
    if not math.isfinite(price) or price < 0 or price > 1e4:
        raise InputError("usd_per_gpu_hour", f"{price:g}", "a price in $ per GPU-hour from 0 to 10⁴")
    cdt = system.chip.gemm_dtype(wdt or m.native_dtype, compute_dtype)

    sstack = speculating(on_chip(load_stack(receiving(framework, recv_interval)), system.chip), mtp)
    eff = for_stack(resolve(system.chip.name, efficiency, ideal, stack=sstack), sstack)  # as serve.evaluate
    return Stack(model=m, system=system, weights_dtype=wdt, kv_dtype=kvdt, compute_dtype=cdt, mtp=mtp, acceptance=a,
                 eff_decode=eff, eff_prefill=eff, eff_serving=eff, usd_per_gpu_hour=price, framework=framework,
                 serving_stack=sstack)


# --------------------------------------------------------------------------------------
# Model numbers of one step (the serving API's per-sequence numbers)
# --------------------------------------------------------------------------------------


def _decode_numbers(st: Stack, context: float):
    return decode_numbers(st.model, max(float(context), 1.0), st.mtp, st.weights_dtype, st.kv_dtype)


def _draft_numbers(st: Stack, context: float):
    return draft_numbers(st.model, max(float(context), 1.0), st.weights_dtype, st.kv_dtype)


def _prefill_numbers(st: Stack, tokens: float, prompt: float):
    return prefill_numbers(st.model, isl=max(float(prompt), 1.0), chunk=max(float(tokens), 1.0),
                           weights_dtype=st.weights_dtype, kv_dtype=st.kv_dtype)


def attention_ranks(lay: dict):
    """Attention-DP groups R of a layout dict of arrays (``engine.layout.attention_ranks``)."""
    return ranks(lay["tp"], lay["attention_dp"], lay.get("attention_dp_size", 0))


def _eval(st: Stack, mn, eff, lay: dict, micro_batch, sched: bool = True, adp_imbalance=None):
    """One call of the step model on one replica of each layout, composed exactly as ``serve`` composes it
    (``steps.run_step``: engine/layout.evaluate → engine/step, the stack's scheduler time and overlap).

    Returns (layout result, step time, bound).
    """
    from types import SimpleNamespace

    tp = np.asarray(lay["tp"], dtype=float)
    pp = np.asarray(lay["pp"], dtype=float)
    layout = SimpleNamespace(tp=tp, ep=np.asarray(lay["ep"], dtype=float), pp=pp, attention_dp=lay["attention_dp"],
                             attention_ranks=attention_ranks(lay),
                             gpus=tp * pp, redundant_experts=0, weight_layout="1d")
    plan = SimpleNamespace(stack=st.serving_stack, hw=st.hw)
    res = run_step(plan, mn, layout, eff, micro_batch, sched=sched, adp_imbalance=adp_imbalance)
    return res, np.asarray(res.tpot_s, dtype=float), res.bound


def _eager(st: Stack, eff, res, t):
    """A prefill or mixed step runs without a CUDA graph: ``serving.eager_step`` (max of GPU and dispatch time)."""
    return eager_step(t, step_kernels(res), stack_eager_s(eff, st.serving_stack.name))


def _speculative_step(t_verify, t_draft, mtp):
    return speculative_step(t_verify, t_draft, mtp)


def _draft_time(st: Stack, lay: dict, b, L: float):
    """Time of one draft token for b sequences (speculative decoding: k of them per step), 0 without --mtp."""
    if not st.mtp:
        return 0.0
    lay1 = dict(lay, pp=np.ones_like(np.asarray(lay["pp"], dtype=float)))
    # as serve: a draft pass pays the stack's host time where the host cannot hide behind the GPU (a serial stack)
    _, t, _ = _eval(st, _draft_numbers(st, L), st.eff_decode, lay1, np.maximum(np.asarray(b, dtype=float), 1.0),
                    sched=not st.serving_stack.overlap_scheduler)
    return t


# --------------------------------------------------------------------------------------
# Replica layouts and vectorized grids (the planner)
# --------------------------------------------------------------------------------------


def replica_layouts(st: Stack, gpus_per_replica=None, *, max_pp: int = 4) -> dict:
    """Every valid layout of one replica: arrays tp, ep, pp, attention_dp, attention_dp_size, gpus (= TP·PP).

    Replica sizes are powers of two and multiples of the scale-up domain up to ``gpus_per_replica``
    (default: two domains); within a size, the layout engine's grid (EP dividing TP with experts
    placed evenly, expert shards ≥ 128 columns; attention-DP only for MoE models, over every group count R dividing
    TP: ``attention_dp_size`` R, 0 where R = TP, every GPU its own sequences; none with a receive interval above 1,
    which SGLang refuses under attention DP).
    """
    S = int(st.system.scaleup_size)
    top = int(gpus_per_replica or max(8, 2 * S))
    sizes = sorted({1 << i for i in range(0, 12) if (1 << i) <= top} | {m * S for m in range(1, top // S + 1)})
    mn = _decode_numbers(st, 1024.0)
    rows = []
    for g in sizes:
        try:
            grid = layout_grid(mn, g, S, micro_batches=[1.0], max_pp=max_pp, uneven_experts=False)
        except InputError:
            continue
        keep = (grid["tp"] * grid["pp"] == g)
        if not mn.is_moe or st.serving_stack.recv_interval > 1:  # SGLang has no receive interval under attention DP
            keep &= ~grid["attention_dp"]
        tp, ep, pp, adp, R = with_attention_groups(*(grid[k][keep] for k in ("tp", "ep", "pp", "attention_dp")),
                                                 heads=mn.tp_heads)
        size = np.where(adp & (R < tp), R, 0.0)  # attention DP over R groups; 0: every GPU its own sequences
        rows += list(zip(tp, ep, pp, adp, size))
    rows = sorted(set(rows))
    if not rows:
        raise InputError("gpus", f"no replica layout of up to {top} × {st.chip}", "more GPUs per replica")
    g = np.array(rows, dtype=float)
    return dict(tp=g[:, 0], ep=g[:, 1], pp=g[:, 2], attention_dp=g[:, 3].astype(bool), attention_dp_size=g[:, 4],
                gpus=g[:, 0] * g[:, 2])


def layout_label(lay: dict) -> str:
    """'TP4 EP4 PP2 attention-DP ×2 groups': a replica layout dict as the tables print it."""
    s = f"TP{lay['tp']}"
    if lay["ep"] > 1:
        s += f" EP{lay['ep']}"
    if lay["pp"] > 1:
        s += f" PP{lay['pp']}"
    if lay["attention_dp"]:
        size = int(lay.get("attention_dp_size") or 0)
        s += " attention-DP" if not size or size == int(lay["tp"]) else f" attention-DP ×{size} groups"
    return s


def layout_row(lays: dict, i) -> dict:
    """Layout ``i`` of :func:`replica_layouts`' arrays as plain ints and a bool (tp, ep, pp, attention_dp,
    attention_dp_size)."""
    return {k: (bool(lays[k][i]) if k == "attention_dp" else int(lays[k][i]))
            for k in ("tp", "ep", "pp", "attention_dp", "attention_dp_size")}


def decode_grid(st: Stack, lay: dict, batch, context: float) -> dict:
    """Decode step over layouts × batch (arrays broadcast): ``step_s``, ``fits``, ``max_batch`` (per replica).

    ``batch`` is the sequences in flight per replica (PP micro-batches of batch/PP each). Under
    speculative decoding the step is ``serving.speculative_step``: verification of k + 1 tokens plus k drafts.
    """
    mn = _decode_numbers(st, context)
    pp = np.asarray(lay["pp"], dtype=float)
    b = np.maximum(np.asarray(batch, dtype=float) / pp, 1.0)
    res, step, _ = _eval(st, mn, st.eff_decode, lay, b)
    step = _speculative_step(step, _draft_time(st, lay, b, context), st.mtp)
    return dict(step_s=np.asarray(step, dtype=float), fits=np.asarray(res.fits, dtype=bool),
                max_batch=np.asarray(res.max_micro_batch, dtype=float) * pp)


def prefill_grid(st: Stack, lay: dict, tokens, prompt: float) -> np.ndarray:
    """Time of one prefill pass of ``tokens`` prompt tokens per layout (s): ⌈tokens / ISL⌉ prompts of ISL tokens
    each (or one chunk of a longer prompt). ``tokens`` is one number or one per layout."""
    tok = np.asarray(tokens, dtype=float)
    shape = np.broadcast_shapes(tok.shape, np.shape(lay["tp"]))
    out = np.empty(shape)
    tokb = np.broadcast_to(tok, shape)
    for v in np.unique(tokb):
        sel = tokb == v
        sub = {k: np.broadcast_to(np.asarray(x), shape)[sel] for k, x in lay.items()}
        piece = min(float(v), max(float(prompt), 1.0))
        res, step, _ = _eval(st, _prefill_numbers(st, piece, prompt), st.eff_prefill, sub, max(1.0, float(v) / piece))
        out[sel] = prompt_pass_time(res, st.eff_prefill, st.serving_stack.name, sub["attention_dp"], sub["ep"])
    return out if out.ndim else float(out)


def kv_bytes_per_token(st: Stack, context: float = 8192.0) -> float:
    """KV bytes one token of context holds (the model at ``context``, this KV dtype)."""
    return float(np.asarray(st.model.kv_cache_bytes(float(context), st.kv_dtype))) / float(context)


def kv_transfer_s(st: Stack, prompt_tokens, prefill_tp) -> np.ndarray:
    """Disaggregated KV hand-off of one prompt: KV bytes / (scale-out NIC bandwidth × prefill TP × η_comm)."""
    kvb = np.asarray(prompt_tokens, dtype=float) * kv_bytes_per_token(st, float(np.max(prompt_tokens)))
    bw = float(st.system.chip.scaleout_bw) * np.asarray(prefill_tp, dtype=float) * float(st.eff_serving.eta_comm)
    return kv_transfer_time(kvb, bw)


def _mixed_grid(st: Stack, lay: dict, b, P, L, prompt: float, role: str = "aggregated", chunk=None,
                imbalance=None) -> np.ndarray:
    """Step time of b decoding sequences at context L plus a prefill chunk of P tokens (arrays broadcast).

    One scheduler iteration is one forward pass: ``serving.mixed_numbers`` adds the chunk's P/b tokens per
    decoding sequence to the decode step (weights read once, FLOPs, experts hit and collectives over every
    token; the chunk attends to its prompt's earlier part). b = 0 is a prefill pass alone
    (``serving.prefill_numbers``). Under speculative decoding, ``serving.speculative_step`` adds k drafts.
    A step that carries prefill is eager (``serving.eager_step``). ``chunk`` (default P / attention ranks) is
    one rank's prompt tokens, ``imbalance`` the busiest attention-DP rank's share (``serving.prefill_schedule``).
    """
    b, P, L = (np.asarray(x, dtype=float) for x in (b, P, L))
    lay_shape = np.shape(np.asarray(lay["tp"]))
    shape = np.broadcast_shapes(lay_shape, b.shape, P.shape, L.shape)
    out = np.zeros(shape)
    bb, PP, LL = (np.broadcast_to(x, shape) for x in (b, P, L))
    CH = None if chunk is None else np.broadcast_to(np.asarray(chunk, dtype=float), shape)
    IM = None if imbalance is None else np.broadcast_to(np.asarray(imbalance, dtype=float), shape)
    lays = {k: np.broadcast_to(np.asarray(v), shape) for k, v in lay.items()}
    ranks = attention_ranks(lays)
    prompt = max(float(prompt), 1.0)
    eff = st.eff_prefill if role == "prefill" else st.eff_decode
    for c in np.unique(LL):
        sel = (LL == c) & (bb > 0)
        if sel.any():
            sub = {k: v[sel] for k, v in lays.items()}
            bs, Ps = bb[sel], PP[sel]
            mn_d = _decode_numbers(st, float(c))
            ch = np.maximum(Ps / ranks[sel] if CH is None else CH[sel], 1.0)  # one rank's prompt tokens
            mn = mixed_numbers(mn_d, st.model, extra_tokens_per_seq=Ps / bs, isl=prompt, chunk=ch,
                               kv_dtype=st.kv_dtype)
            pp = np.asarray(sub["pp"], dtype=float)
            res, t, _ = _eval(st, mn, eff, sub, np.maximum(bs / pp, 1.0),
                              adp_imbalance=None if IM is None else IM[sel])
            if np.any(np.asarray(eff.eta_prefill) != 1.0) and np.any(Ps > 0):  # the prompt tokens at η_pf
                t_d = _eval(st, mn_d, eff, sub, np.maximum(bs / pp, 1.0))[1]
                t = np.where(Ps > 0, prefill_speed_step(t, t_d, eff.eta_prefill), t)
            t = np.where(Ps > 0, _eager(st, eff, res, t), t)
            out[sel] = speculative_step(t, _draft_time(st, sub, np.maximum(bs / pp, 1.0), float(c)), st.mtp)
    for v in np.unique(PP[(bb == 0) & (PP > 0)]):
        sel = (bb == 0) & (PP == v)
        sub = {k: x[sel] for k, x in lays.items()}
        out[sel] = prefill_grid(st, sub, float(v), prompt)
    return out


def steady_state(st: Stack, lay: dict, n, isl: float, osl: float, budget) -> dict:
    """Steady state of a replica at n sequences in flight: ``serving.steady_state``, the function ``serve`` uses
    (arrays broadcast), on this adapter's step times.

    A replica of PP stages runs PP streams of b = n / PP sequences (as ``serve``: b = C / (dp · PP)); the
    TTFT includes the stack's host time per request (``Stack.t_request``). Returns mean step, TPOT, TTFT, output
    tokens/s per replica and the prefill-bound mask.
    """
    n = np.asarray(n, dtype=float)
    pp = np.asarray(lay["pp"], dtype=float)
    b = n / pp
    L = float(isl) + float(osl) / 2.0
    isl_new = max(float(isl), 1.0)
    Lg = np.full_like(b * pp, L)
    t_dec = _mixed_grid(st, lay, b * pp, np.zeros_like(Lg), Lg, isl_new)

    def mixed_step(sch):  # the stream's chunk c rides with its b sequences: P = c per micro-batch, c·PP per replica
        return _mixed_grid(st, lay, b * pp, sch["c_tot"] * pp, Lg, isl_new, chunk=sch["c_rank"],
                           imbalance=sch["imbalance"]), None

    ss = serving_steady_state(b, attention_ranks(lay), isl_new, float(osl), t_dec, mixed_step,
                              acceptance=st.acceptance, mtp=st.mtp, budget=budget, t_request=st.t_request,
                              queued=b, recv_interval=st.serving_stack.recv_interval)
    return dict(step_s=ss["step_s"], tpot_s=ss["tpot_s"], ttft_s=ss["ttft_s"], out_tok_s=ss["out_tok_s"] * pp,
                prefill_bound=ss["prefill_bound"])


# --------------------------------------------------------------------------------------
# One layout, tabulated for the event loop
# --------------------------------------------------------------------------------------


class StepTable:
    """Step times of one replica layout, tabulated once; scalar look-ups for the event loop.

    ``decode(b, L)``: one decode step of ``b`` sequences at mean context ``L`` (linear in L between
    grid points). ``prefill(P)``: one prefill chunk of ``P`` tokens (linear between grid points).
    ``mixed(b, L, P)``: both in one scheduler iteration, time-sliced (module docstring).
    ``kv_tokens``: tokens of KV the replica holds beside its weights (the scheduler's capacity).
    """

    def __init__(self, st: Stack, layout: dict, *, max_batch: int, max_context: float, prompt: float,
                 budget: int, n_context: int = 24, role: str = "aggregated", kv_context: float | None = None):
        self.stack = st
        self.layout = {k: (bool(v) if k == "attention_dp" else int(v)) for k, v in layout.items() if k != "gpus"}
        self.gpus = int(self.layout["tp"] * self.layout["pp"])
        self.max_batch = int(max_batch)
        self.budget = int(budget)
        self.role = role
        lay = {k: np.asarray(v) for k, v in self.layout.items()}
        pp = float(self.layout["pp"])
        # context grid: geometric from 16 tokens to the longest sequence
        top = max(float(max_context), 32.0)
        ctx = np.unique(np.round(np.geomspace(16.0, top * 1.05, n_context)))
        self.ctx = [float(c) for c in ctx]
        # KV capacity in tokens: the engine's largest batch at a context near the mean sequence, times that context
        kv_at = float(prompt if kv_context is None else kv_context)
        res_kv, _, _ = _eval(st, _decode_numbers(st, kv_at), st.eff_decode, lay, 1.0)
        self.kv_tokens = float(np.asarray(res_kv.max_micro_batch).ravel()[0]) * pp * kv_at
        # one vectorized engine call over (batch, prefill tokens, context): a step of b decoding sequences and a
        # prefill chunk of P tokens is ONE forward pass (weights read once, FLOPs and tokens added)
        ptoks = [0.0] + [float(p) for p in np.unique(np.round(np.geomspace(16.0, max(float(self.budget), 32.0), 11)))]
        self._ptok = ptoks
        # batches: every integer up to 64, then a geometric grid; linear in b in between
        bg = np.unique(np.concatenate([np.arange(0, min(self.max_batch, 64) + 1),
                                       np.round(np.geomspace(64, max(self.max_batch, 64), 40))])).astype(float)
        bg = bg[bg <= self.max_batch]
        tg = _mixed_grid(st, lay, bg[:, None, None], np.asarray(ptoks)[None, :, None], ctx[None, None, :],
                         float(prompt), role)
        b = np.arange(0, self.max_batch + 1, dtype=float)
        i = np.clip(np.searchsorted(bg, b, side="right") - 1, 0, len(bg) - 1)
        i1 = np.minimum(i + 1, len(bg) - 1)
        w = np.where(i1 > i, (b - bg[i]) / np.maximum(bg[i1] - bg[i], 1e-300), 0.0)[:, None, None]
        tab = tg[i] * (1.0 - w) + tg[i1] * w
        self.table = tab
        self._rows = tab.tolist()
        slope = np.zeros_like(tab)
        if len(ctx) > 1:
            slope[..., :-1] = np.diff(tab, axis=-1) / np.diff(ctx)
            slope[..., -1] = slope[..., -2]
        self._slopes = slope.tolist()
        if not self.kv_tokens > 0:
            raise InputError("gpus", f"the weights leave no room for KV on layout {self.label()} of {st.chip}",
                             "more GPUs per replica, a smaller weights dtype, or another layout")

    def label(self) -> str:
        return layout_label(self.layout)

    def decode(self, b: int, L: float) -> float:
        """One decode step of ``b`` sequences at mean context ``L`` (s)."""
        ctx = self.ctx
        j = bisect.bisect_right(ctx, L) - 1
        if j < 0:
            j = 0
        return self._rows[b][0][j] + (L - ctx[j]) * self._slopes[b][0][j]

    def mixed(self, b: int, L: float, tokens: float) -> float:
        """One scheduler iteration: ``b`` decoding sequences at mean context ``L`` and a prefill chunk of ``tokens``."""
        if tokens <= 0:
            return self.decode(b, L)
        ctx = self.ctx
        j = bisect.bisect_right(ctx, L) - 1
        if j < 0:
            j = 0
        pt = self._ptok
        q = bisect.bisect_right(pt, tokens) - 1
        rows, slopes = self._rows[b], self._slopes[b]
        lo = rows[q][j] + (L - ctx[j]) * slopes[q][j]
        if q >= len(pt) - 1:  # beyond the budget: proportionally longer (a whole prompt in one pass)
            return lo * tokens / pt[q]
        hi = rows[q + 1][j] + (L - ctx[j]) * slopes[q + 1][j]
        return lo + (tokens - pt[q]) / (pt[q + 1] - pt[q]) * (hi - lo)

    def prefill(self, tokens: float) -> float:
        """One prefill pass of ``tokens`` prompt tokens alone (s)."""
        return self.mixed(0, self.ctx[0], tokens)

    def as_dict(self) -> dict:
        return dict(layout=dict(self.layout, label=self.label(), gpus=self.gpus), max_batch=self.max_batch,
                    budget=self.budget, kv_tokens=self.kv_tokens, role=self.role,
                    efficiency=self.stack.efficiency)


__all__ = ["Stack", "stack", "replica_layouts", "layout_row", "decode_grid", "prefill_grid", "steady_state", "kv_bytes_per_token",
           "kv_transfer_s", "StepTable"]
