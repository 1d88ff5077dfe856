"""The lecture's roofline measured on the machine in front of you (issue 14): the math, no I/O, no torch.

``rackmath measure`` (interfaces: ``cli/measure.py``; the torch side: ``measure_torch.py``) measures
peak matmul FLOP/s, memory bandwidth and a real decode sweep, then compares the sweep with rackmath's
roofline for a chip built from those measured peaks. This module holds the equations it uses:

* :func:`gemm_efficiency` — the GEMM efficiency vs tokens per GEMM, η(M) = η_max · M / (M + M_half),
  and :func:`fit_gemm_efficiency` (a closed-form weighted least-squares fit of 1/η against 1/M);
* :func:`scale_model` — a catalog or HuggingFace model shrunk to fit the machine, same family;
* :func:`measured_system` — a :class:`~rackmath.specs.hardware.Chip` (and a one-chip system) from peaks;
* :func:`predicted_knee` / :func:`measured_knee` — where the step time leaves its flat (memory) floor;
* :func:`preset_from_microbenchmarks` — an efficiency preset from micro-benchmarks only (never the sweep);
* :func:`catalog_toml` / :func:`records_toml` — the saved files (chip + system + model + preset; records).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ...errors import InputError
from ... import units
from ...engine.roofline import (attention_flops, compute_time, expected_experts_hit, kv_step_bytes, matmul_flops,
                                memory_time, roofline, step_time, weights_read_bytes)
from ...engine.step import gemm_efficiency as engine_gemm_efficiency
from ...specs.hardware import Chip, System
from ...specs.kernels import curve_key
from ...specs.records import toml_value
from ...specs.schema import schema

# --------------------------------------------------------------------------------------------- GEMM efficiency


def gemm_efficiency(tokens, eta_max, m_half):
    """Fraction of peak FLOP/s a GEMM reaches with ``tokens`` rows against a fixed weight matrix.

    η(M) = η_max · M / (M + M_half)

    Where it comes from: a GEMM of M tokens against a K×N weight of b bytes per element takes
    t(M) ≈ 2·M·K·N / (η_max·peak) + K·N·b / BW when streaming the weight and doing the math do not
    overlap, so FLOP/s = 2·M·K·N / t = η_max·peak · M / (M + M_half) with M_half = η_max·peak·b / (2·BW):
    the lecture's hardware ratio (00:15, R5). Perfect overlap would instead give the roofline's sharp
    corner min(1, M / ratio); a measured M_half between the two says how well the kernel overlaps.
    """
    return engine_gemm_efficiency(eta_max, tokens, m_half)


def fit_gemm_efficiency(tokens, flops_per_s, peak):
    """Fit η(M) = η_max · M / (M + M_half) to measured GEMM FLOP/s (η = FLOP/s ÷ peak).

    1/η = 1/η_max + (M_half/η_max) · (1/M) is linear in 1/M: a weighted least-squares line
    (weights 1/y², i.e. relative errors) gives both parameters in closed form.

    Only the points above the weight-streaming floor are fitted. The same matrices are timed at every M, so
    the time of a pass is t ∝ M / FLOP/s; where t is within 10 % of the shortest one, the pass is bound by
    streaming the weights (η_memory's business: a GPU runs small-M GEMMs at a flat time until the math
    catches up), and η(M) = FLOP/s ÷ peak there would read as η ∝ M and push η_max above 1. A CPU that does
    not overlap math with streaming has t ∝ M + M_half from the first M: dropping its flat head leaves the
    same line. With fewer than two points above the floor, the two largest M are fitted.
    Returns ``{"eta_max", "m_half", "rms_rel_error", "n"}``.
    """
    M = np.asarray(tokens, dtype=float)
    eta = np.asarray(flops_per_s, dtype=float) / float(peak)
    ok = (M > 0) & np.isfinite(eta) & (eta > 0)
    M, eta = M[ok], eta[ok]
    if M.size < 2:
        raise InputError("tokens", "fewer than two measured GEMM sizes", "at least two token counts M")
    t = M / eta  # ∝ the time of each pass
    above = t > 1.1 * t.min()
    if above.sum() < 2:
        above = M >= np.sort(M)[-2]
    M, eta = M[above], eta[above]
    x, y = 1.0 / M, 1.0 / eta
    w = 1.0 / y**2
    A = np.column_stack([np.ones_like(x), x]) * np.sqrt(w)[:, None]
    (a, b), *_ = np.linalg.lstsq(A, y * np.sqrt(w), rcond=None)
    if a <= 0:  # no saturation within the measured range: the largest M bounds η_max from below
        a = 1.0 / eta.max()
    eta_max = 1.0 / a
    m_half = max(b * eta_max, 0.0)
    pred = gemm_efficiency(M, eta_max, m_half)
    rms = float(np.sqrt(np.mean((pred / eta - 1.0) ** 2)))
    return {"eta_max": float(eta_max), "m_half": float(m_half), "rms_rel_error": rms, "n": int(M.size)}


def fit_kernel_line(nbytes, seconds, bandwidth) -> dict:
    """Fit t = τ + B / (BW · η_m) to memory-bound kernels (decode GEMMs at M = 1) of B bytes each.

    The step model's kernel time at the weight-streaming floor (engine.step.kernel_time with no compute):
    a fixed time τ per kernel (launch gap, ramp, tail) plus the bytes at a share η_m of the peak bandwidth.
    Least squares in relative error (weights 1/t). Returns ``{"tau_s", "eta_memory", "rms_rel_error", "n"}``.
    """
    b = np.asarray(nbytes, dtype=float)
    t = np.asarray(seconds, dtype=float)
    ok = np.isfinite(b) & np.isfinite(t) & (b > 0) & (t > 0)
    b, t = b[ok], t[ok]
    if b.size < 2 or np.ptp(b) == 0:
        raise InputError("bytes", "fewer than two distinct kernel sizes", "at least two sizes")
    A = np.column_stack([np.ones_like(b), b]) / t[:, None]
    (tau, slope), *_ = np.linalg.lstsq(A, np.ones_like(t), rcond=None)
    pred = tau + slope * b
    return {"tau_s": float(tau), "eta_memory": float(1.0 / (slope * float(bandwidth))),
            "rms_rel_error": float(np.sqrt(np.mean((pred / t - 1.0) ** 2))), "n": int(b.size)}


# --------------------------------------------------------------------------------------------- the model


def _round_to(x: float, q: int, lo: int) -> int:
    return max(lo, int(round(x / q)) * q)


def _shrunk(spec, f: float, n_layers: int, dtype: str, vocab_cap: int, max_experts: int):
    """``spec`` with every width multiplied by ``f`` and ``n_layers`` layers (see :func:`scale_model`)."""
    kw = {}
    H, kvh = spec.n_heads, max(1, spec.n_kv_heads)
    if spec.attention == "mla":
        H_new = max(1, int(round(H * f)))
        kw.update(n_heads=H_new, n_kv_heads=H_new,
                  q_lora_rank=_round_to(spec.q_lora_rank * f, 32, 32) if spec.q_lora_rank else 0,
                  kv_lora_rank=_round_to(spec.kv_lora_rank * f, 32, 32),
                  qk_nope_head_dim=min(spec.qk_nope_head_dim, 128), qk_rope_head_dim=min(spec.qk_rope_head_dim, 64),
                  v_head_dim=min(spec.v_head_dim, 128), head_dim=min(spec.head_dim, 192))
    else:
        G = max(1, H // kvh)  # query heads per KV head: the GQA ratio is kept
        kv_new = max(1, int(round(kvh * f)))
        hd = min(spec.head_dim, 128)
        d_new = _round_to(spec.d_model * f, 64, 64)
        if kv_new * G * hd > d_new:  # narrower than one KV group of full heads: narrower heads, same ratio
            hd = max(16, (d_new // (kv_new * G)) // 16 * 16)
        kw.update(n_heads=kv_new * G, n_kv_heads=kv_new, head_dim=hd)
    d = _round_to(spec.d_model * f, 64, 64)
    kw.update(d_model=d, d_ff=_round_to(spec.d_ff * f, 64, 64) if spec.d_ff else 0,
              vocab_size=min(spec.vocab_size, vocab_cap, 8 * d), n_layers=n_layers)
    if spec.n_experts:
        E = min(spec.n_experts, max_experts)
        k = spec.experts_per_token if E == spec.n_experts else \
            max(1, min(E // 2, int(round(spec.experts_per_token * E / spec.n_experts))))
        kw.update(n_experts=E, experts_per_token=k, moe_d_ff=_round_to(spec.moe_d_ff * f, 64, 64),
                  n_shared_experts=min(spec.n_shared_experts, 1), first_k_dense=min(spec.first_k_dense, 1)
                  if n_layers > 1 else 0, moe_layer_ids=())
        if kw["first_k_dense"] and not spec.d_ff:
            kw["first_k_dense"] = 0
    # Features the measured model does not run are switched off, so that the roofline describes it exactly.
    kw.update(layer_types=(), sliding_window=0, kv_share=1, index_topk=0, index_n_heads=0, index_head_dim=0,
              attention_sinks=False, attention_bias=False, qk_norm=False, expert_bias=False, router_bias=False,
              parallel_block=False, mtp_layers=0, native_dtype=dtype, component_dtypes={}, kv_dtype=dtype,
              active_counts_embedding=True, norms_per_layer=2, max_context=0, aliases=(), sources={},
              status="hypothetical", path="")
    return replace(spec, **kw)


def scale_model(spec, weight_budget_bytes: float, dtype: str, *, min_layers: int = 4, vocab_cap: int = 16384,
                max_experts: int = 16, name: str | None = None):
    """The widest same-family copy of ``spec`` with at least ``min_layers`` layers whose weights fit the budget.

    Widths (d_model, d_ff, moe_d_ff, KV heads, MLA ranks) are multiplied by f = 1, ½, ¼, … (head dims kept,
    capped at 128, narrowed only when one KV group would be wider than d_model; query heads per KV head
    kept: GQA stays GQA with the same ratio, MQA stays MQA); then as many layers as
    the budget allows (at most the original count). MoE keeps its routing (at most ``max_experts``
    routed experts, top-k scaled to keep k/E, one shared expert kept); MLA keeps its latent KV cache;
    the vocabulary is capped at ``vocab_cap`` and at 8 × d_model (sampling over the vocabulary is
    work the roofline does not count). Sliding windows, DSA, attention sinks, biases and
    QK-norm are dropped (documented in docs/measure.md): the returned spec describes exactly the
    network that ``measure_torch`` runs, so the roofline of the spec is the roofline of what is timed.
    """
    dtype = units.normalize_dtype(dtype, "dtype")
    budget = float(weight_budget_bytes)
    if not budget > 0:
        raise InputError("weight budget", f"{budget!r} bytes", "a positive number of bytes")
    want = min(min_layers, spec.n_layers)
    best = None
    for k in range(12):
        f = 0.5**k
        one = _shrunk(spec, f, 1, dtype, vocab_cap, max_experts)
        if one.weight_bytes() > budget:
            continue
        lo, hi = 1, spec.n_layers  # largest layer count within budget (weights grow with layers)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if _shrunk(spec, f, mid, dtype, vocab_cap, max_experts).weight_bytes() <= budget:
                lo = mid
            else:
                hi = mid - 1
        cand = _shrunk(spec, f, lo, dtype, vocab_cap, max_experts)
        if best is None:
            best = cand
        if lo >= want:
            best = cand
            break
    if best is None:
        raise InputError("weight budget", f"{units.format_bytes(budget)} is too small for one layer of {spec.name}",
                         "a larger budget")
    f_final = best.d_model / spec.d_model
    label = name or f"{spec.name}-measure-d{best.d_model}-l{best.n_layers}"
    desc = (f"{spec.name} scaled for `rackmath measure`: width ×{f_final:.3g}, {best.n_layers} of "
            f"{spec.n_layers} layers, vocab {best.vocab_size}, {dtype}; random weights")
    return replace(best, name=label, description=desc, notes=f"scaled from {spec.name}")


def gemm_shapes(spec) -> list[tuple[str, int, int, int]]:
    """The weight matrices one decode step multiplies by: (name, K, N, count per step).

    The small-M efficiency curve is measured on exactly these matrices, back to back (one "GEMM pass"),
    so that η(M) describes the shapes a decode step streams (narrow K, the LM head) rather than one
    square matrix. Routed experts count k per MoE layer (the experts one token uses); the MLA
    up-projections absorbed into attention (W_UK, W_UV) are attention work and are not included.
    """
    d, nm, nd = spec.d_model, spec.n_moe_layers, spec.n_dense_layers
    L = spec.n_layers
    g = 2 if spec.ffn_matrices == 3 else 1
    out = []
    if spec.attention == "mla":
        qk = spec.qk_nope_head_dim + spec.qk_rope_head_dim
        if spec.q_lora_rank:
            out += [("q_a", d, spec.q_lora_rank, L), ("q_b", spec.q_lora_rank, spec.n_heads * qk, L)]
        else:
            out += [("q", d, spec.n_heads * qk, L)]
        out += [("kv_a", d, spec.kv_lora_rank + spec.qk_rope_head_dim, L), ("o", spec.n_heads * spec.v_head_dim, d, L)]
    else:
        hd = spec.head_dim
        out += [("qkv", d, (spec.n_heads + 2 * spec.n_kv_heads) * hd, L), ("o", spec.n_heads * hd, d, L)]
    if nd:
        out += [("ffn_up", d, spec.d_ff * g, nd), ("ffn_down", spec.d_ff, d, nd)]
    if nm:
        per = spec.experts_per_token + spec.n_shared_experts
        out += [("router", d, spec.n_experts, nm), ("expert_up", d, spec.moe_d_ff * g, nm * per),
                ("expert_down", spec.moe_d_ff, d, nm * per)]
    out.append(("lm_head", d, spec.vocab_size, 1))
    return out


# --------------------------------------------------------------------------------------------- the machine


def measured_system(name: str, flops: dict, bandwidth: float, memory_bytes: float, *, description: str = "",
                    vendor: str = "", scaleup_bw: float | None = None, devices: int = 1, sources: dict | None = None):
    """A Chip whose peaks are the measured ones, in a system of ``devices`` such chips.

    FLOP/s per dtype = the best measured dense matmul; HBM bandwidth = the measured memory bandwidth;
    HBM capacity = the device's memory. A single device has no scale-up link: ``scaleup_bw`` defaults to
    the memory bandwidth (moving data within one device) and says so in its source.
    """
    fl = {k: float(v) for k, v in flops.items()}
    if "bf16" not in fl:  # the catalog needs a bf16 peak: take the best measured dtype's, labelled
        fl["bf16"] = max(fl.values())
    src = dict(sources or {})
    chip = Chip(name=name, vendor=vendor, description=description, flops=fl, hbm_bytes=float(memory_bytes),
                hbm_bw=float(bandwidth), scaleup_bw=float(scaleup_bw or bandwidth), scaleout_bw=1.25e9,
                usd_per_hour=0.0, default_system=f"{name}-x{devices}", sources=src)
    return System(name=f"{name}-x{devices}", chip=chip, scaleup_size=int(devices),
                  description=f"{devices} × {name} as measured by rackmath measure", sources=src)


# --------------------------------------------------------------------------------------------- knees


def predicted_knee(model, system, context, dtype: str, efficiency=None, b_max: float = 1e6) -> float:
    """Batch at which the roofline's compute time overtakes its memory time (weights + KV): the knee.

    t_compute(B) = t_weights(B) + t_kv(B), solved on a log grid of B (MoE weight reads grow with B)
    and interpolated; ``inf`` when memory binds at every batch (long contexts: KV grows as fast as
    compute).
    """
    B = np.geomspace(1.0, b_max, 2001)
    r = roofline(model, system, chips=1, batch=B, context=float(context), weights_dtype=dtype, kv_dtype=dtype,
                 efficiency=efficiency)
    return knee_of(B, r.t_compute_s, r.t_memory_s)


def ops_per_step(model, batch, ops_1: float, ops_b: float, b: int) -> np.ndarray:
    """Operators one eager decode step dispatches at ``batch`` sequences, from counts at 1 and ``b`` sequences.

    A dense model dispatches the same operators at every batch: ops(B) = ops(1). The measured MoE runs the
    experts the batch routes to, one after another (``measure_torch.MoE``), so its operators grow with the
    expected experts hit, E_hit(B) = E · (1 − (1 − k/E)^B) (random routing; engine.roofline):

        ops(B) = ops(1) + (ops(b) − ops(1)) · (E_hit(B) − E_hit(1)) / (E_hit(b) − E_hit(1))
    """
    B = np.asarray(batch, dtype=float)
    if not model.n_experts or b <= 1:
        return np.full_like(B, float(ops_1))
    hit = lambda n: expected_experts_hit(model.n_experts, model.experts_per_token, n)  # noqa: E731
    span = hit(float(b)) - hit(1.0)
    share = (hit(B) - hit(1.0)) / span if span > 0 else 0.0 * B
    return ops_1 + (ops_b - ops_1) * share


def estimated_seconds(model, peak_flops: float, bandwidth: float, tokens, points, steps: int, dtype: str,
                      min_time: float) -> float:
    """A lower bound on the time ``rackmath measure`` spends in its GEMM pass and decode sweep, from the
    measured peak and bandwidth (the lecture's roofline, nothing else):

        GEMM pass: Σ_M max(min_time, 3 · (2·M·N_params / peak + W / BW))     (three timed passes per M)
        sweep:     Σ_(B, L) steps · max(2·B·N_active / peak, (W + B·KV(L)) / BW)

    Real runs add dispatch and elementwise time, so the true figure is larger; a dtype the device has no fast
    matmul for (fp16 on most CPUs: ~100× below bf16) shows up here before it runs for an hour.
    """
    W = float(model.weight_bytes(dtype))
    n_params = float(model.total_params)
    n_active = float(model.active_params)
    gemm = sum(max(min_time, 3.0 * (2.0 * m * n_params / peak_flops + W / bandwidth)) for m in tokens)
    sweep = sum(steps * float(step_time(2.0 * B * n_active / peak_flops, W / bandwidth,
                                        B * float(model.kv_cache_bytes(L, dtype)) / bandwidth))
                for B, L in points)
    return gemm + sweep


def calibrated_times(model, system, batch, context, dtype: str, eta_max: float, m_half: float, eta_memory: float,
                     eta_kv: float | None = None, overhead_s: float = 0.0,
                     elementwise_s_per_seq: float = 0.0) -> dict:
    """The roofline with the measured efficiencies: GEMMs follow η(M), memory streams at η_memory · BW.

    t_compute = F_dense / (P · η(B)) + F_experts / (P · η(B·k / E_hit)) + F_attn / (P · η_max)
                + B · t_elementwise (norms, activations, softmax, sampling: activation bytes ÷ elementwise BW)
    t_memory  = W_read(B) / (BW · η_memory) + KV_read(B, L) / (BW · η_kv)
    t_step    = max(t_compute, t_memory) + overhead

    M (tokens per GEMM) is the batch for dense matrices and the tokens routed to one expert,
    B·k / E_hit(B), for routed experts; attention runs at η_max. All arrays broadcast.
    """
    chip = system.chip
    B = np.asarray(batch, dtype=float)
    L = np.asarray(context, dtype=float)
    P = chip.peak_flops(dtype)
    f_mm = matmul_flops(model, B)
    if model.n_experts:
        hit = expected_experts_hit(model.n_experts, model.experts_per_token, B)
        f_exp = B * model.n_moe_layers * model.experts_per_token * 2.0 * model.expert_params
        m_exp = B * model.experts_per_token / np.maximum(hit, 1e-9)
    else:
        f_exp, m_exp = 0.0 * B, B
    f_dense = f_mm - f_exp
    t_c = (compute_time(f_dense, 1, P, gemm_efficiency(B, eta_max, m_half))
           + compute_time(f_exp, 1, P, gemm_efficiency(m_exp, eta_max, m_half))
           + compute_time(attention_flops(model, B, L), 1, chip.peak_flops(dtype), eta_max)
           + B * elementwise_s_per_seq)
    t_m = (memory_time(weights_read_bytes(model, B, dtype), 1, chip.hbm_bw, eta_memory)
           + memory_time(kv_step_bytes(model, B, L, 1, dtype), 1, chip.hbm_bw, eta_kv or eta_memory))
    t_c, t_m = np.broadcast_arrays(t_c, t_m)
    return {"t_compute_s": t_c, "t_memory_s": t_m, "step_s": np.maximum(t_c, t_m) + overhead_s}


def knee_of(batch, t_compute, t_memory) -> float:
    """First batch where t_compute ≥ t_memory on a sorted batch grid (log-interpolated); inf when never."""
    B = np.asarray(batch, dtype=float)
    gap = np.log(np.asarray(t_compute, dtype=float)) - np.log(np.asarray(t_memory, dtype=float))
    idx = np.nonzero(gap >= 0)[0]
    if idx.size == 0:
        return math.inf
    i = int(idx[0])
    if i == 0:
        return float(B[0])
    lb0, lb1 = np.log(B[i - 1]), np.log(B[i])
    return float(np.exp(lb0 + (lb1 - lb0) * (-gap[i - 1]) / (gap[i] - gap[i - 1])))


def measured_knee(batch, step_s, tail: int = 3) -> dict:
    """The knee of a measured step-time curve: where the batch-proportional time catches up with the fixed time.

    s_∞ = slope of the least-squares line through the ``tail`` largest batches (seconds per extra sequence
    once the batch is large); t₀ = median over the three smallest batches of t(B) − s_∞ · B (the step time
    with no batch: weights + fixed costs). B* = t₀ / s_∞. For the lecture's roofline, max(W/BW, B·c), this is exactly its knee W/(BW·c);
    for a curve with no sharp corner (t ≈ t₀ + s·B, kernels that do not overlap math with weight
    streaming, as eager PyTorch on a CPU) it is the batch at which the step time has doubled.
    Returns ``{"knee", "t0_s", "slope_s"}`` (knee None when the large-batch slope is not positive).
    """
    B = np.asarray(batch, dtype=float)
    t = np.asarray(step_s, dtype=float)
    order = np.argsort(B)
    B, t = B[order], t[order]
    k = min(tail, B.size)
    x, y = B[-k:], t[-k:]
    slope = float(np.polyfit(x, y, 1)[0]) if k >= 2 else 0.0
    if not slope > 0:
        return {"knee": None, "t0_s": float(t[0]), "slope_s": slope}
    t0 = float(np.median((t - slope * B)[: min(3, B.size)]))  # median over the 3 smallest batches (noise)
    if not t0 > 0:
        return {"knee": None, "t0_s": t0, "slope_s": slope}
    return {"knee": t0 / slope, "t0_s": t0, "slope_s": slope}


# --------------------------------------------------------------------------------------------- preset


def preset_from_microbenchmarks(name: str, chip_name: str, gemm_fit: dict, gemv_bandwidth: float,
                                bandwidth: float, ops_per_step: int, dispatch_s: float,
                                kv_bandwidth: float | None = None, elementwise_s_per_seq: float = 0.0) -> dict:
    """An ``[[efficiency]]`` preset from the micro-benchmarks alone (the decode sweep is kept for validation):

    η_compute = η_max of the GEMM fit (large-M matmul FLOP/s over the peak), capped at 1;
    gemm_half_tokens = M_half of the same fit (tokens per GEMM at which η = η_max / 2; read by the η(M) model);
    η_memory  = weight-streaming bandwidth of the M = 1 GEMM (a GEMV) over the peak bandwidth, capped at 1;
    η_kv      = KV bytes/s of the attention core over a cache of tens of MB, over the peak bandwidth, capped
                at 1 (read by :func:`calibrated_times`; the engine's roofline uses η_memory for KV too);
    overhead  = operators per decode step × measured dispatch time of one small operator;
    elementwise_s_per_seq = activation bytes the non-matmul operators move per sequence (counted by
                instrumenting one step) ÷ measured elementwise bandwidth (read by :func:`calibrated_times`).
    """
    return {
        "name": name,
        "chips": [chip_name],
        "regime": "decode",
        "composition": "overlap",
        "eta_compute": round(min(1.0, max(gemm_fit["eta_max"], 1e-3)), 4),
        "gemm_half_tokens": float(f"{gemm_fit['m_half']:.4g}"),
        "eta_memory": round(min(1.0, max(gemv_bandwidth / bandwidth, 1e-3)), 4),
        "eta_kv": round(min(1.0, max((kv_bandwidth or gemv_bandwidth) / bandwidth, 1e-3)), 4),
        "elementwise_s_per_seq": float(f"{max(elementwise_s_per_seq, 0.0):.4g}"),
        "eta_comm": 1.0,
        "step_overhead_s": float(f"{min(max(ops_per_step * dispatch_s, 0.0), 9.0):.4g}"),
        "description": f"{chip_name} as measured by rackmath measure (decode, framework: eager PyTorch)",
        "source": (f"rackmath measure micro-benchmarks: GEMM fit η_max {gemm_fit['eta_max']:.3f} "
                   f"(M_half {gemm_fit['m_half']:.3g}); GEMV {gemv_bandwidth / 1e9:.3g} GB/s of "
                   f"{bandwidth / 1e9:.3g} GB/s; attention reads KV at "
                   f"{(kv_bandwidth or gemv_bandwidth) / 1e9:.3g} GB/s; {ops_per_step} ops/step × {dispatch_s * 1e6:.3g} µs dispatch"),
    }


# --------------------------------------------------------------------------------------------- TOML out


def _tv(v) -> str:
    """A TOML value (strings JSON-quoted, which TOML basic strings accept)."""
    import json

    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise InputError("value", f"{v!r} cannot be written to TOML", "a finite number")
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_tv(x) for x in v) + "]"
    return json.dumps(str(v), ensure_ascii=False)


def _table(header: str, d: dict) -> list[str]:
    lines = [header]
    subs = []
    for k, v in d.items():
        if isinstance(v, dict):
            subs.append((k, v))
        elif v is not None:
            lines.append(f"{_tq(k)} = {_tv(v)}")
    for k, v in subs:
        lines.append("")
        lines.append(f"[{header.strip('[]')}.{k}]")
        lines += [f"{_tq(kk)} = {_tv(vv)}" for kk, vv in v.items()]
    return lines


def _tq(key: str) -> str:
    import re

    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _tv(key)


def model_table(spec) -> dict:
    """A ModelSpec as a ``[[model]]`` table: every field that differs from the default."""
    from dataclasses import MISSING, fields

    out = {}
    for f in fields(spec):
        if f.name in ("path", "sources", "component_dtypes"):
            continue
        v = getattr(spec, f.name)
        default = f.default if f.default is not MISSING else (f.default_factory() if f.default_factory is not MISSING
                                                               else MISSING)
        if default is not MISSING and v == default and f.name not in ("native_dtype", "kv_dtype"):
            continue
        out[f.name] = list(v) if isinstance(v, tuple) else v
    return out


def catalog_toml(system, model, preset: dict, header: str) -> str:
    """The chip, its one-device system, the scaled model and the preset as one catalog file."""
    chip = system.chip
    lines = ["# " + ln for ln in header.splitlines()] + [""]
    lines += _table("[[chip]]", {
        "name": chip.name, "vendor": chip.vendor, "description": chip.description, "status": "shipping",
        "hbm": units.format_si(chip.hbm_bytes, "B", 4),
        "hbm_bandwidth": units.format_si(chip.hbm_bw, "B/s", 4),
        "scaleup_bandwidth": units.format_si(chip.scaleup_bw, "B/s", 4),
        "scaleout_bandwidth": units.format_si(chip.scaleout_bw, "B/s", 4),
        "usd_per_hour": "$0/h", "default_system": system.name,
        "flops": {k: units.format_si(v, "FLOP/s", 4) for k, v in chip.flops.items()},
        "sources": dict(chip.sources),
    })
    lines += [""] + _table("[[system]]", {
        "name": system.name, "chip": chip.name, "scaleup_size": system.scaleup_size,
        "description": system.description,
    })
    lines += [""] + _table("[[model]]", model_table(model))
    try:  # fields this installation's preset schema does not know (yet) go into a comment, not the table
        known = set(schema("efficiency"))
    except ImportError:  # pragma: no cover
        known = set(preset)
    extra = {k: v for k, v in preset.items() if k not in known}
    lines += [""]
    if extra:
        lines.append("# measured too (not preset fields here): " + ", ".join(f"{k} = {_tv(v)}" for k, v in extra.items()))
    lines += _table("[[efficiency]]", {k: v for k, v in preset.items() if k in known})
    return "\n".join(lines) + "\n"


def step_records(rows, *, model: str, hardware: str, dtype: str, source: str, source_group: str,
                 assumptions: str, id_prefix: str, date: str | None = None) -> list[dict]:
    """``[[record]]`` tables (kind = "step") for measured decode steps: one per (batch, context)."""
    out = []
    for r in rows:
        out.append({
            "id": f"{id_prefix}-b{int(r['batch'])}-L{int(r['context'])}",
            "title": f"decode step, batch {int(r['batch'])}, context {int(r['context'])}: {model} on {hardware} "
                     f"(eager PyTorch, measured by rackmath measure)",
            "kind": "step",
            "framework": "torch",
            "source": source,
            "source_group": source_group,
            **({"date": date} if date else {}),
            "status": "measured",
            "assumptions": assumptions,
            "model": model,
            "hardware": hardware,
            "gpus": 1,
            "batch": int(r["batch"]),
            "context": int(r["context"]),
            "weights_dtype": dtype,
            "kv_dtype": dtype,
            "metric": "step_s",
            "value": float(f"{r['measured_s']:.6g}"),
        })
    return out


def records_toml(records: list[dict], header: str) -> str:
    lines = ["# " + ln for ln in header.splitlines()] + [""]
    for rec in records:
        lines += _table("[[record]]", rec) + [""]
    return "\n".join(lines)


def significant(xs, digits: int = 5) -> list[float]:
    """Each value rounded to ``digits`` significant digits: what a reduced kernel-curve file stores
    (``benchmarks/reduce_aiconfigurator.py``, ``benchmarks/reduce_aiter.py``)."""
    return [float(f"{float(x):.{digits}g}") for x in xs]


def curves_toml(meta: dict, curves: list, comments: list) -> str:
    """A kernel-curve file: ``# comments``, ``[_meta]`` and one ``[[_curve]]`` per curve (the format
    ``specs.kernels.kernel_table`` reads; written by ``benchmarks/reduce_aiconfigurator.py``,
    ``benchmarks/reduce_aiter.py`` and ``rackmath measure --curves``)."""
    def val(v):
        return toml_value(int(v) if isinstance(v, int) and not isinstance(v, bool) else v)

    lines = [f"# {c}" for c in comments] + ["", "[_meta]"] + [f"{k} = {val(v)}" for k, v in meta.items()] + [""]
    for c in curves:
        lines += ["[[_curve]]"] + [f"{k} = {val(v)}" for k, v in c.items()] + [""]
    return "\n".join(lines)


def compare_curves(measured: list, reference: list) -> list[dict]:
    """Each measured curve beside the reference curve of the same operator and shape (``specs.kernels.curve_key``): the
    ratio r = t_measured / t_reference at every x value both have, its median, min and max (r < 1: faster here).
    A measured curve with no reference of that shape gets ``reference = None`` and no ratios."""
    out = []
    for c in measured:
        ref = next((r for r in reference if curve_key(r) == curve_key(c)), None)
        row = {"op": c["op"], "name": c["name"], "reference": None if ref is None else ref["name"], "points": 0,
               "median_ratio": None, "min_ratio": None, "max_ratio": None, "x": [], "ratio": []}
        if ref is not None:
            t_ref = dict(zip(ref["x_values"], ref["time_s"]))
            pairs = [(x, t / t_ref[x]) for x, t in zip(c["x_values"], c["time_s"]) if x in t_ref]
            if pairs:
                r = np.array([p[1] for p in pairs])
                row.update(points=len(pairs), median_ratio=float(np.median(r)), min_ratio=float(r.min()),
                           max_ratio=float(r.max()), x=[p[0] for p in pairs], ratio=[float(v) for v in r])
        out.append(row)
    return out
