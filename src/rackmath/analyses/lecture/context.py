"""Chapter five: the context-length wall (lecture 00:13, 01:47–01:52, claim R42).

Per token of decode at large batch, with weights amortized (lecture 01:33 roofline):

    t/token = max( (2·N_active + F_attn(L)) / FLOP/s ,  (N_total·bytes_per_param/B + KV_read(L)) / BW )

Compute barely moves with L; the KV read grows with L (dense: L·b; sliding window:
capped at the window; DeepSeek sparse top-k: k·b + L·b_index; the "square root" the
lecture mentions: ∝ √L). Everything here is written relative to the compute time per
token, t_compute = 2·N_active/FLOP/s, in the lecture's parameter-unit ratio
r = (FLOP/s/2)/(BW/bytes_per_param) (``analyses.lecture.pricing`` explains the units), so

    cost(L) / cost_compute = max(1 + L/L_q,  B*/B + r·KV_read(L)/(bytes_per_param·N_active))

with L_q the context where attention FLOPs equal the matmul FLOPs. Multiply by
t_compute × $/s for dollars. Pure functions first; ``*_for`` adapters use the roofline.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import check_positive
from ...explain import Derivation, fmt
from ...units import format_si
from .pricing import LECTURE_N_ACTIVE, LECTURE_RATIO, balance_batch
from ...engine.deployment import Deployment
from ...engine.roofline import roofline
from ...specs.models import load_model

DSA_TOP_K = 2048.0  # DeepSeek-V3.2 sparse attention selects 2,048 tokens (arXiv 2512.02556)
DSA_INDEXER_FRACTION = 0.2  # indexer key (128 fp8 + scale ≈ 132 B/layer) over the MLA entry (≈ 656 B/layer) [D]


def _n(x) -> str:
    return format_si(float(x), "")


# --------------------------------------------------------------------------- KV read per decode token


def kv_read_dense(context, bytes_per_token):
    """Dense attention reads the whole context: KV_read = L · b (lecture 00:05)."""
    return np.asarray(context, dtype=float) * np.asarray(bytes_per_token, dtype=float)


def kv_read_windowed(context, global_bytes_per_token, local_bytes_per_token, window):
    """Global layers read all L tokens, sliding-window layers at most W: b_g · L + b_w · min(L, W)."""
    L = np.asarray(context, dtype=float)
    return (np.asarray(global_bytes_per_token, dtype=float) * L
            + np.asarray(local_bytes_per_token, dtype=float) * np.minimum(L, np.asarray(window, dtype=float)))


def kv_read_topk(context, bytes_per_token, top_k=DSA_TOP_K, indexer_bytes_per_token=0.0):
    """DeepSeek sparse attention: k selected tokens' KV plus an index key per token: b · min(L, k) + b_idx · L."""
    L = np.asarray(context, dtype=float)
    return (np.asarray(bytes_per_token, dtype=float) * np.minimum(L, np.asarray(top_k, dtype=float))
            + np.asarray(indexer_bytes_per_token, dtype=float) * L)


def kv_read_sqrt(context, bytes_per_token, knee=8192.0):
    """The lecture's "square root in this term" (00:13, 01:50): KV_read = b · √(L · L_knee) past the knee, L·b below."""
    L = np.asarray(context, dtype=float)
    return np.asarray(bytes_per_token, dtype=float) * np.where(L <= knee, L, np.sqrt(L * knee))


# --------------------------------------------------------------------------- cost vs context


def dense_attention_flops_per_ctx_token(n_layers, n_heads, d_head):
    """Attention FLOPs per generated token per context token: 4 · n_layers · n_q_heads · d_head
    (QKᵀ and AV, 2 FLOPs per multiply-accumulate each)."""
    return 4.0 * np.asarray(n_layers, dtype=float) * np.asarray(n_heads, dtype=float) * np.asarray(d_head, dtype=float)


def quadratic_onset_context(n_active, attn_flops_per_ctx_token):
    """L_q = 2 · N_active / a: the context where attention FLOPs equal the weight matmuls (R42, 01:50:
    "you start to notice the effect of the quadratic … up in the millions of tokens")."""
    return 2.0 * np.asarray(n_active, dtype=float) / np.asarray(attn_flops_per_ctx_token, dtype=float)


def attention_slope_ratio(attn_flops_per_ctx_token, kv_read_per_ctx_token, peak_flops, mem_bw):
    """Compute slope over memory slope of cost vs context: (a / FLOP/s) / (b / BW) (01:51: compute is "forced by
    fundamental principles to be a much smaller slope than the memory bandwidth cost")."""
    return (np.asarray(attn_flops_per_ctx_token, dtype=float) / np.asarray(peak_flops, dtype=float)) / (
        np.asarray(kv_read_per_ctx_token, dtype=float) / np.asarray(mem_bw, dtype=float))


def relative_cost(kv_read_bytes, context=0.0, *, batch, n_active=LECTURE_N_ACTIVE, n_total=None, ratio=LECTURE_RATIO,
                  bytes_per_param=1.0, quadratic_onset=np.inf):
    """cost(L) / cost_compute = max(1 + L/L_q, B*/B + r · KV_read / (bytes_per_param · N_active)) (R42)."""
    n_total = n_active if n_total is None else n_total
    mem = (balance_batch(ratio, n_total, n_active) / np.asarray(batch, dtype=float)
           + np.asarray(ratio, dtype=float) * np.asarray(kv_read_bytes, dtype=float)
           / (np.asarray(bytes_per_param, dtype=float) * np.asarray(n_active, dtype=float)))
    comp = 1.0 + np.asarray(context, dtype=float) / np.asarray(quadratic_onset, dtype=float)
    return np.maximum(comp, mem)


def context_curves(context, *, batch=1e4, n_active=LECTURE_N_ACTIVE, n_total=None, ratio=LECTURE_RATIO,
                   bytes_per_param=1.0, bytes_per_token=1667.0, window=4096.0, global_fraction=1 / 6,
                   top_k=DSA_TOP_K, indexer_fraction=DSA_INDEXER_FRACTION, sqrt_knee=8192.0,
                   quadratic_onset=np.inf):
    """Relative cost per token vs context for four attention kinds sharing the same stored KV per token b:
    dense; sliding window (``global_fraction`` of the KV in global layers, the rest windowed at W);
    DeepSeek top-k (reads k tokens + an index key of ``indexer_fraction``·b per token); √L.

    Keyword parameters, one per premise of the lecture's context chapter (each with the lecture's value as default):
    a reason for more than twelve: they stay flat rather than grouped.
    """
    L = np.asarray(context, dtype=float)
    reads = {
        "dense": kv_read_dense(L, bytes_per_token),
        "sliding-window": kv_read_windowed(L, global_fraction * bytes_per_token,
                                           (1 - global_fraction) * bytes_per_token, window),
        "sparse top-k": kv_read_topk(L, bytes_per_token, top_k, indexer_fraction * bytes_per_token),
        "sqrt": kv_read_sqrt(L, bytes_per_token, sqrt_knee),
    }
    return {k: relative_cost(v, L, batch=batch, n_active=n_active, n_total=n_total, ratio=ratio,
                             bytes_per_param=bytes_per_param, quadratic_onset=quadratic_onset)
            for k, v in reads.items()}


def crossover_dense(*, batch, n_active=LECTURE_N_ACTIVE, n_total=None, ratio=LECTURE_RATIO, bytes_per_param=1.0,
                    bytes_per_token=1667.0):
    """Context where dense decode turns memory-bound at batch B: B*/B + L·r·b/(bpp·N) = 1 →
    L* = (1 − B*/B) · bpp · N_active / (r · b) (0 if the weights alone are memory-bound)."""
    n_total = n_active if n_total is None else n_total
    rest = 1.0 - balance_batch(ratio, n_total, n_active) / np.asarray(batch, dtype=float)
    return np.maximum(rest, 0.0) * bytes_per_param * np.asarray(n_active, dtype=float) / (
        np.asarray(ratio, dtype=float) * np.asarray(bytes_per_token, dtype=float))


def first_crossing(context, curve, level=1.0 + 1e-9):
    """First context (log-interpolated on a grid) where ``curve`` rises above ``level``; inf if never."""
    L = np.asarray(context, dtype=float)
    c = np.asarray(curve, dtype=float)
    above = c > level
    if not above.any():
        return float("inf")
    i = int(np.argmax(above))
    if i == 0:
        return float(L[0])
    f = (level - c[i - 1]) / (c[i] - c[i - 1])
    return float(np.exp(np.log(L[i - 1]) + f * (np.log(L[i]) - np.log(L[i - 1]))))


def max_context_fit(hbm_bytes, weight_bytes, batch, kv_bytes_per_token):
    """Longest context that fits a scale-up domain: L_max = (HBM − weights) / (B · b) (R42)."""
    free = np.asarray(hbm_bytes, dtype=float) - np.asarray(weight_bytes, dtype=float)
    return np.maximum(free, 0.0) / (np.asarray(batch, dtype=float) * np.asarray(kv_bytes_per_token, dtype=float))


def bandwidth_for_context(context, kv_read_per_token, n_active, peak_flops):
    """HBM bandwidth that keeps the KV read no slower than compute at context L (today's cost per token):
    BW = KV_read(L) · FLOP/s / (2 · N_active)   (KV_read for dense = L · b)."""
    return (np.asarray(kv_read_per_token, dtype=float) * np.asarray(peak_flops, dtype=float)
            / (2.0 * np.asarray(n_active, dtype=float)))


def capacity_for_context(context, kv_bytes_per_token, batch=1.0):
    """HBM capacity for B sequences of L tokens: B · L · b."""
    return np.asarray(batch, dtype=float) * np.asarray(context, dtype=float) * np.asarray(kv_bytes_per_token, dtype=float)


# --------------------------------------------------------------------------- the wall, with its arithmetic


@dataclass
class ContextWall:
    crossover: float
    l_quadratic: float
    target_context: float
    bandwidth_needed: float
    bandwidth_multiple: float
    capacity_needed: float
    capacity_multiple: float
    max_context: float
    assumptions: dict
    derivation: Derivation

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("crossover", "l_quadratic", "target_context", "bandwidth_needed",
                                              "bandwidth_multiple", "capacity_needed", "capacity_multiple",
                                              "max_context", "assumptions")} | {
            "derivation": self.derivation.as_dict()}


def context_wall(*, n_active=LECTURE_N_ACTIVE, n_total=None, bytes_per_token=1667.0, batch=1e4, ratio=LECTURE_RATIO,
                 bytes_per_param=1.0, peak_flops=1978.9e12, mem_bw=3.35e12, hbm_bytes=80e9 * 8, chips=8,
                 weight_bytes=None, target_context=100e6, target_batch=1.0, attn_flops_per_ctx_token=None,
                 label="") -> ContextWall:
    """R42 on numbers: crossover context, the quadratic onset, the longest context that fits one scale-up
    domain at batch B, and what HBM bandwidth and capacity a ``target_context`` needs at today's cost per token.

    ``peak_flops`` and ``mem_bw`` are per chip; ``hbm_bytes`` is the whole domain's HBM.

    Keyword parameters, one per premise of the wall (model, chip, deployment, target), each defaulting to the
    lecture's: a reason for more than twelve: they stay flat rather than grouped.
    """
    n_total = n_active if n_total is None else n_total
    for v, f in ((n_active, "active params"), (bytes_per_token, "bytes per token"), (batch, "batch"),
                 (target_context, "target context"), (peak_flops, "FLOP/s"), (mem_bw, "bandwidth")):
        check_positive(v, f)
    weight_bytes = n_total * bytes_per_param if weight_bytes is None else weight_bytes
    d = Derivation(f"The context wall{(' — ' + label) if label else ''}")
    bstar = d.add("B*", "r · N_total / N_active", f"{ratio:.4g} · {_n(n_total)} / {_n(n_active)}",
                  float(balance_batch(ratio, n_total, n_active)), "")
    lstar = d.add("L*", "(1 − B*/B) · bpp · N_active / (r · b)",
                  f"(1 − {bstar:.4g}/{_n(batch)}) · {bytes_per_param:g} · {_n(n_active)} / ({ratio:.4g} · "
                  f"{fmt(bytes_per_token, 'B')})",
                  float(crossover_dense(batch=batch, n_active=n_active, n_total=n_total, ratio=ratio,
                                        bytes_per_param=bytes_per_param, bytes_per_token=bytes_per_token)),
                  "tokens", "past this, cost per token grows ∝ L (memory-bandwidth wall)")
    if attn_flops_per_ctx_token is None:
        lq = float("inf")
    else:
        lq = d.add("L_q", "2 · N_active / a  (attention FLOPs = matmul FLOPs)",
                   f"2 · {_n(n_active)} / {_n(attn_flops_per_ctx_token)}",
                   float(quadratic_onset_context(n_active, attn_flops_per_ctx_token)), "tokens")
        d.add("slope", "(a / FLOP/s) / (b / BW)  compute slope over memory slope",
              f"({_n(attn_flops_per_ctx_token)} / {fmt(peak_flops, 'FLOP/s')}) / ({fmt(bytes_per_token, 'B')} / "
              f"{fmt(mem_bw, 'B/s')})",
              float(attention_slope_ratio(attn_flops_per_ctx_token, bytes_per_token, peak_flops, mem_bw)), "×")
    lmax = d.add("L_max", "(HBM − weights) / (B · b)",
                 f"({fmt(hbm_bytes, 'B')} − {fmt(weight_bytes, 'B')}) / ({_n(batch)} · {fmt(bytes_per_token, 'B')})",
                 float(max_context_fit(hbm_bytes, weight_bytes, batch, bytes_per_token)), "tokens",
                 f"one scale-up domain ({chips:g} chips) at batch {_n(batch)}")
    bw = d.add("BW_needed", "L · b · FLOP/s / (2 · N_active)  per chip",
               f"{_n(target_context)} · {fmt(bytes_per_token, 'B')} · {fmt(peak_flops, 'FLOP/s')} / (2 · {_n(n_active)})",
               float(bandwidth_for_context(target_context, target_context * bytes_per_token, n_active, peak_flops)),
               "B/s", "keeps the KV read no slower than compute: today's cost per token")
    bwm = d.add("× today", "BW_needed / BW", f"{fmt(bw, 'B/s')} / {fmt(mem_bw, 'B/s')}", bw / mem_bw, "×")
    cap = d.add("HBM_needed", "B · L · b", f"{_n(target_batch)} · {_n(target_context)} · {fmt(bytes_per_token, 'B')}",
                float(capacity_for_context(target_context, bytes_per_token, target_batch)), "B")
    capm = d.add("× domain", "HBM_needed / (HBM − weights)", f"{fmt(cap, 'B')} / {fmt(hbm_bytes - weight_bytes, 'B')}",
                 cap / max(hbm_bytes - weight_bytes, 1.0), "×")
    d.conclusion = (f"→ cost per token turns up past {_n(lstar)} tokens; a {_n(target_context)}-token context at "
                    f"today's cost per token needs {bwm:.3g}× today's HBM bandwidth")
    assumptions = {"n_active": float(n_active), "n_total": float(n_total), "kv_bytes_per_token": float(bytes_per_token),
                   "batch": float(batch), "ratio": float(ratio), "bytes_per_param": float(bytes_per_param),
                   "batch_regime": f"decode at batch {batch:g}; KV read fully each step (dense attention)"}
    return ContextWall(lstar, lq, float(target_context), bw, bwm, cap, capm, lmax, assumptions, d)


# --------------------------------------------------------------------------- adapters (model / hardware)


def cost_vs_context_for(model, hardware, context, *, batch, chips=None, weights_dtype=None, kv_dtype=None,
                        efficiency=None):
    """$ per Mtok vs context for a catalog model on a system: the roofline with ``context`` as the array (R42).
    The model's own attention (windows, sparse top-k, shared KV) is in its ``kv_read_bytes``."""
    return roofline(model, hardware, chips=chips, batch=batch, context=context, weights_dtype=weights_dtype,
                    kv_dtype=kv_dtype, efficiency=efficiency)


def crossover_for(model, hardware, *, batch, chips=None, weights_dtype=None, kv_dtype=None, efficiency=None,
                  lo=1e2, hi=1e9, n=600):
    """Context where the roofline turns from compute-bound to memory-bound at batch B (inf if never, lo if always)."""
    grid = np.geomspace(lo, hi, n)
    r = cost_vs_context_for(model, hardware, grid, batch=batch, chips=chips, weights_dtype=weights_dtype,
                            kv_dtype=kv_dtype, efficiency=efficiency)
    ratio_ = (np.asarray(r.t_weights_s) + np.asarray(r.t_kv_s)) / np.asarray(r.t_compute_s)
    return first_crossing(grid, ratio_, 1.0)


def max_context_for(model, hardware, *, batch, chips=None, weights_dtype=None, kv_dtype="bf16", lo=1.0, hi=1e10,
                    n=2000):
    """Longest context whose KV for B sequences fits the domain's HBM beside the weights (model's own KV sizes)."""
    grid = np.geomspace(lo, hi, n)
    n_chips = chips or getattr(hardware, "scaleup_size", 1)
    hbm = float(hardware.chip.hbm_bytes) * n_chips if hasattr(hardware, "chip") else float(hardware.hbm_bytes)
    free = hbm - float(model.weight_bytes(weights_dtype))
    need = float(batch) * np.asarray(model.kv_cache_bytes(grid, kv_dtype), dtype=float)
    ok = need <= free
    return float(grid[ok][-1]) if ok.any() else 0.0


def quadratic_onset_for(model, context=1e6):
    """L_q for a catalog model: 2·N_active / (attention FLOPs per token per context token, at ``context``)."""
    a = float(model.attention_flops_per_token(float(context))) / float(context)
    return float(quadratic_onset_context(model.active_params, a)) if a > 0 else float("inf")


@dataclass
class MaxContext:
    """The longest context a deployment can hold, and the model's own limit next to it."""

    tokens: float  # longest context whose KV for ``concurrency`` sequences fits beside the weights
    model_limit: float | None  # the model's own maximum (max_position_embeddings); None when not published
    concurrency: float
    deployment: str
    warning: str | None = None

    @property
    def usable(self) -> float:
        """What a user can actually run: the memory limit, capped at the model's own."""
        return min(self.tokens, self.model_limit) if self.model_limit else self.tokens

    def as_dict(self) -> dict:
        return {"max_context": self.tokens, "model_max_context": self.model_limit, "usable_context": self.usable,
                "concurrency": self.concurrency, "deployment": self.deployment, "warning": self.warning}


def model_context_limit(model) -> float | None:
    """The model's own context limit (its config's max_position_embeddings / catalog max_context), or None."""
    v = float(getattr(model, "max_context", 0) or 0)
    return v if v > 0 else None


def context_warning(model, context) -> str | None:
    """A warning when ``context`` (tokens; the largest of an array) is past the model's own limit, else None."""
    lim = model_context_limit(model)
    c = float(np.max(np.asarray(context, dtype=float)))
    if lim and c > lim:
        return (f"{c:,.0f} tokens is past {model.name}'s own limit of {lim:,.0f} tokens "
                f"(max_position_embeddings): the numbers are the hardware's, the model cannot use that context")
    return None


def max_context(model, hardware, *, gpus=None, concurrency=1.0, weights_dtype=None, kv_dtype=None,
                deployment=None, usable_fraction=1.0, **layout) -> MaxContext:
    """The one answer to "max context": the longest context at which ``concurrency`` sequences fit in memory
    (weights sharded over the deployment, KV, workspace: ``Deployment.max_context``, lecture c_mem 01:03:37),
    with the model's own limit beside it and a warning when memory allows more than the model can use.
    ``deployment`` (an ``engine.deployment.Deployment``) or ``gpus`` + layout degrees (tp, ep, pp, attention_dp, …;
    default: one scale-up domain, TP over all of it). ``usable_fraction``: the share of HBM the stack may fill
    (``serve`` passes its own 0.9, so that its memory line and this answer agree). Used by ``racks memory``,
    ``context`` and ``serve``."""
    m = load_model(model)
    dep = deployment or Deployment.build(hardware, gpus, model=m, **layout)
    tokens = float(dep.max_context(m, concurrency=float(concurrency), weights_dtype=weights_dtype,
                                   kv_dtype=kv_dtype, usable_fraction=usable_fraction))
    lim = model_context_limit(m)
    warning = None
    if lim and tokens > lim:
        warning = (f"memory holds {tokens:,.0f} tokens per sequence, past {m.name}'s own limit of {lim:,.0f} "
                   f"(max_position_embeddings): usable context {lim:,.0f}")
    return MaxContext(tokens, lim, float(concurrency), f"{dep.chips} × {dep.system.name} {dep.label()}", warning)


def gpus_to_hold(weight_bytes, hbm_bytes, usable_fraction=1.0):
    """Fewest GPUs whose usable HBM holds the weights alone, sharded evenly: N = ceil(W / (f · HBM)) (lecture
    01:03 c_mem: the weights are the floor of memory; the KV needs more)."""
    return int(np.ceil(float(weight_bytes) / (float(hbm_bytes) * float(usable_fraction)) - 1e-9))


def does_not_fit(model, system, gpus, weight_bytes, usable_fraction=1.0) -> tuple[str, str]:
    """Why a deployment holds no sequence, and what would, as (problem, accepted) for a one-line error: the weights
    alone need W against gpus · f · HBM available (or leave less than one sequence's KV), the GPUs that hold them at
    this dtype and at narrower ones. ``model`` (a ModelSpec, or None) gives the narrower dtypes' sizes."""
    chip = system.chip
    hbm, g = float(chip.hbm_bytes), int(gpus)
    avail = g * hbm * usable_fraction
    where = (f"{format_si(avail, 'B')} available on {g} × {chip.name} ({usable_fraction:.0%} of "
             f"{format_si(hbm, 'B')} HBM each)")
    if weight_bytes >= avail:
        problem = f"the weights alone need {format_si(weight_bytes, 'B')} against {where}"
    else:
        problem = (f"the weights take {format_si(weight_bytes, 'B')} of {where}: the rest holds less than one "
                   "sequence's KV cache")
    n = max(gpus_to_hold(weight_bytes, hbm, usable_fraction), g + 1 if weight_bytes < avail else 1)
    ways = [f"at least {n} GPUs"]
    for dt in ("fp8", "fp4"):
        try:
            w = float(model.weight_bytes(dt)) if model is not None else None
        except Exception:  # noqa: BLE001 - a hint must never fail the error it explains
            w = None
        if w is not None and w < 0.95 * weight_bytes:
            k = gpus_to_hold(w, hbm, usable_fraction)
            ways.append(f"--weights-dtype {dt} ({format_si(w, 'B')}: " + (f"fits {g} GPUs)" if k <= g else
                                                                         f"≥ {k} GPUs)"))
    return problem, ", or ".join(ways)


def spec_or_none(name):
    """The catalog model of this name, or None (a hint's optional detail)."""
    try:
        return load_model(name)
    except Exception:  # noqa: BLE001
        return None
