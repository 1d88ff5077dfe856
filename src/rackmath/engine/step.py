"""The one step-time model: a step is a sequence of kernels, each costed on the roofline.

Every engine path (``roofline``, ``layout.evaluate``, serving) describes a step as
operators (:class:`Op`: FLOPs, HBM bytes, network time, kernels, collectives, GEMM rows)
and calls :func:`compose`. Each operator costs

    t_op = n_kernels · τ_kernel + n_coll · τ_coll + n_out · τ_out
           + max(F / (peak · η_c(M)), B / (BW · η_m), t_net / η_comm)

with η_c(M) = η_c · M / (M + M½) for GEMMs of M rows (tokens); n_out of the operator's collectives leave the
scale-up domain and pay τ_out more (NIC, switch and proxy hops). The step is

    serial:  t_step = Σ_op t_op + t_sched                     (kernels one after another)
    overlap: t_step = max(Σ F/(peak·η_c), Σ B/(BW·η_m), Σ t_net/η_comm) + Σ latencies + t_sched

The lecture's roofline (00:00, R3) is the special case η = 1, τ = 0, M½ = 0, overlap:
t = max(F / peak, (W + KV) / BW). Sources: the roofline model (Williams, Waterman &
Patterson 2009); kernel-serial execution of a decode step as in TensorRT-LLM / vLLM /
SGLang (one CUDA graph of per-layer kernels); alpha-beta collectives (Thakur et al. 2005).
Everything broadcasts over numpy arrays (layouts × candidate efficiencies).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from ..errors import InputError
from ..explain import fmt

#: Kernels per layer that carry no weight GEMM (norms, RoPE, activation, residual adds, KV write).
ELEMENTWISE_KERNELS_PER_LAYER = 4

#: Kernels each operator launches per layer (per step, for the LM head), as the decode graphs of vLLM / SGLang /
#: TensorRT-LLM run them:
#:
#: * GQA projections = fused QKV GEMM, RoPE, O GEMM (3).
#: * MLA projections (absorbed, vLLM ``MLACommonImpl`` / SGLang ``forward_absorb``) = the fused q_a + kv_a GEMM,
#:   the q_a and kv_a norms, the q_b GEMM, the W_UK BMM and the transpose copy of its output, RoPE, the
#:   concatenation of the latent and RoPE query, the W_UV BMM and its transpose copy, the O GEMM (11).
#: * Decode attention = a split-KV kernel and the kernel that merges its partial softmaxes (2): FlashMLA's
#:   ``splitkv_mla`` + ``combine``, FlashAttention's ``splitkv`` + ``combine``, FlashInfer's decode + merge-states,
#:   TensorRT-LLM XQA's multi-block reduction — decode batches split the KV to fill the SMs.
#: * DeepSeek sparse attention (DSA, V3.2) adds its lightning indexer (``dsa_indexer``, 10): the wq_b and wk
#:   GEMMs, the key LayerNorm, RoPE, the Hadamard rotation and FP8 quantisation of query and key, the index-key
#:   cache write, the weights GEMM, the FP8 MQA logits and the top-k (DeepSeek-V3.2-Exp ``inference/model.py``
#:   ``Indexer.forward``; the stacks fuse a few of them).
#: * Router = gate GEMM, softmax/top-k, grouped top-k (3); routed experts = permute, grouped up-GEMM,
#:   activation, grouped down-GEMM, un-permute, combine (6); gated FFN = gate-up GEMM, activation, down GEMM (3);
#:   LM head = GEMM and sampling (2).
#:
#: The MLA, attention and indexer counts were raised from 8, 1 and 0 on 2026-11-26: refitted, leave one source out
#: went from 17.3 % to 14.9 % (172 → 178 records within 2×; docs/history.md).
KERNELS = {"qkv_o": 3, "qkv_o_mla": 11, "attention": 2, "dsa_indexer": 10, "router": 3, "dense_ffn": 3,
           "shared_experts": 3, "experts": 6, "lm_head": 2, "dense": 6}

#: Weight GEMMs each operator runs per layer (the rest of its kernels are norms, RoPE, activations, routing). MLA's
#: 5 are the fused q_a + kv_a, q_b and O GEMMs and the W_UK / W_UV BMMs of its 11 kernels (SGLang quantises the
#: BMMs' input too: ``per_tensor_quant_mla_fp8`` + ``bmm_fp8``, ``DeepseekV2AttentionMLA.forward_absorb``).
GEMMS = {"qkv_o": 2, "qkv_o_mla": 5, "attention": 0, "router": 0, "dense_ffn": 2, "shared_experts": 2,
         "experts": 2, "lm_head": 0, "dense": 4}

#: Kernels a GEMM with quantised activations adds: FP8 / FP4 weight-and-activation GEMMs (DeepSeek's FP8 blocks,
#: NVFP4, per-tensor FP8) quantise their input in a kernel of their own before the GEMM (vLLM
#: ``per_token_group_quant_fp8``, SGLang ``sglang_per_token_group_quant_fp8``, TensorRT-LLM FP8 quantize).
#: 0 in the shipped model: with 1, the refit's leave-one-source-out median rose from 14.7 % to 17.4 % on the kernel
#: counts above (179 records within 2× either way; on earlier models 17.4 % → 18.9 %, 18.9 % → 20.2 % and
#: 22.8 % → 29.3 %; docs/history.md) — the per-kernel latency already prices what these kernels cost.
QUANT_KERNELS_PER_GEMM = 0

#: Kernels an MLA block's host dispatches in an eager step (prefill, mixed and ``--eager`` steps: no CUDA graph)
#: relative to its decode-graph count (11 projections + 2 attention). Eagerly, its FP8 GEMMs and BMMs each run the
#: activation quantisation of their input as a kernel of its own, and a prompt takes the un-absorbed (MHA) path: the
#: fused q_a + kv_a GEMM, two norms, the q_b GEMM, the kv_b GEMM expanding the latent to per-head K and V, RoPE,
#: three copies assembling q and k, two latent-cache writes, the KV-pool store and the O GEMM (13; SGLang
#: ``forward_normal_prepare`` / ``forward_normal_core``, vLLM ``MLACommonImpl._forward_prefill``) + 4 quantisations
#: + 2 attention = 19 ≈ 1.5 × 13; the absorbed decode path eagerly: 11 + 5 + 2 = 18 (a DSA indexer's kernels, in the
#: attention operator, are scaled with them; AMD's ``mla_kernel_scale`` applies first). Screened against a fitted
#: scale (15.2 % leave one source out, two basins) and against counting every quantised GEMM's quantisation in eager
#: steps (14.8 %): 1.5 on MLA blocks alone gave 13.0 % (docs/history.md, 2026-11-26).
MLA_EAGER_KERNEL_SCALE = 1.5


def op_kernels(name: str, weight_bytes=0.0, params=0.0, mla_scale=1.0):
    """Kernels one operator launches per layer: ``KERNELS[name]``, plus :data:`QUANT_KERNELS_PER_GEMM` per weight
    GEMM when its weights are quantised: under 1.5 bytes per parameter (``weight_bytes < 1.5 · params``), so that
    FP8 / FP4 projections with their BF16 norms count. MLA's projections (``qkv_o_mla``) are multiplied by
    ``mla_scale`` (the preset's ``mla_kernel_scale``: the counts are the CUDA paths', ROCm's runs more)."""
    scale = mla_scale if name == "qkv_o_mla" else 1.0
    if not QUANT_KERNELS_PER_GEMM:
        return float(KERNELS[name]) * scale
    quantised = np.asarray(weight_bytes, dtype=float) < 1.5 * np.asarray(params, dtype=float)
    return (KERNELS[name] + np.where(quantised, GEMMS[name] * QUANT_KERNELS_PER_GEMM, 0.0)) * scale


def attention_kernels(dsa=False, mla_scale=1.0):
    """Kernels of a layer's attention operator: the split-KV decode kernel and its merge, plus DSA's indexer;
    × ``mla_scale`` for an MLA model's (:func:`op_kernels`)."""
    return float(KERNELS["attention"] + (KERNELS["dsa_indexer"] if dsa else 0)) * mla_scale


#: Display order and which layer type each operator belongs to (``--ops``).
OP_ORDER = ("qkv_o", "attention", "router", "dense_ffn", "shared_experts", "experts", "dense", "lm_head",
            "elementwise", "allreduce", "allgather", "alltoall", "handoff", "draft", "scheduler")
LAYER_TYPE = {"qkv_o": "attention", "attention": "attention", "router": "moe", "dense_ffn": "dense ffn",
              "shared_experts": "moe", "experts": "moe", "dense": "dense", "lm_head": "head",
              "elementwise": "all layers", "allreduce": "collective", "allgather": "collective",
              "alltoall": "collective", "handoff": "pipeline", "draft": "draft (MTP)", "scheduler": "host"}


@dataclass
class Op:
    """One operator of a step on the busiest chip (arrays broadcast).

    ``flops`` at ``peak`` FLOP/s, ``bytes`` from HBM, ``net_s`` network time at full link
    bandwidth, ``kernels`` and ``collectives`` launched per step, ``m`` GEMM rows (None: not a
    GEMM, no small-M penalty), ``latency_s`` other fixed time (hop latency).
    """

    name: str
    flops: object = 0.0
    bytes: object = 0.0
    peak: object = 1.0
    net_s: object = 0.0
    kernels: object = 0.0
    collectives: object = 0.0
    scaleout_collectives: object = 0.0  # of ``collectives``, those that leave the scale-up domain
    m: object = None
    latency_s: object = 0.0
    kv: bool = False  # bytes are KV-cache reads (reported as t_kv rather than t_weights)
    mla: bool = False  # those KV reads are an MLA latent cache (η_m,mla where measured; else GQA / MHA: η_m,kv)
    eager_kernels: object = None  # kernels the host dispatches when the step is not graph-captured (None: ``kernels``)
    #: a TP all-reduce's message per chip (bytes) and group (chips; 0 where no measured curve may price it: a 2D
    #: exchange, a group beyond the scale-up domain): ``Efficiency.allreduce_curves`` reads its time there
    message_bytes: object = None
    group: object = None
    #: a measured compute law of its own (η_c, M½, source, applies): the routed experts' grouped GEMM from the chip's
    #: MoE tables (``Efficiency.moe_compute``), η_c and M½ arrays holding the dense law's values where ``applies``
    #: (bool, broadcast) is False; None: the dense GEMM law η_c(M) of the preset everywhere
    law: tuple | None = None
    #: a measured streaming rate of its own (η_m, source): the routed experts' MoE curve of their weight format
    #: (``Efficiency.moe_stream``); None: η_m,moe (the chip's fastest MoE curve) for the experts, else η_m
    eta_m: tuple | None = None


def gemm_efficiency(eta_c, m, half):
    """η_c(M) = η_c · M / (M + M½): a GEMM of M rows reaches half its large-M efficiency at M = M½."""
    m = np.asarray(m, dtype=float)
    half = np.asarray(half, dtype=float)
    return eta_c * np.where(half > 0, m / np.maximum(m + half, 1e-300), 1.0)


def kernel_time(flops, nbytes, peak, bw, eta_c, eta_m, latency=0.0):
    """t = latency + max(F / (peak · η_c), B / (BW · η_m)) — one kernel on the roofline (lecture 00:00)."""
    return latency + np.maximum(np.asarray(flops, dtype=float) / (peak * eta_c),
                                np.asarray(nbytes, dtype=float) / (bw * eta_m))


def _small_m_penalty(eff) -> bool:
    """Whether η_c(M) depends on M: a non-zero M½ (the ideal and presets without a small-GEMM curve skip it)."""
    half = eff.gemm_half_tokens
    return bool(np.any(np.asarray(half) != 0))


def memory_efficiency(op: Op, eff):
    """η_m of an operator's bytes: the routed experts' weight reads stream at the measured MoE rate of their weight
    format where the chip has a table in it (``Op.eta_m``), else at the chip's fastest MoE rate η_m,moe,
    a decode step's KV-cache reads at its measured decode-attention rate (η_m,mla for an MLA latent cache, η_m,kv for
    GQA / MHA) where the preset has one (``--efficiency measured`` on a chip with those curves), every other read
    at η_m."""
    if op.eta_m is not None:
        return op.eta_m[0]
    if op.name == "experts":
        own = getattr(eff, "eta_memory_moe", 0.0)
    elif op.kv:
        own = getattr(eff, "eta_memory_mla" if op.mla else "eta_memory_kv", 0.0)
    else:
        return eff.eta_memory
    return own if np.all(np.asarray(own) > 0) else eff.eta_memory


def collective_latency(op: Op, eff):
    """Fixed time of one of an operator's collectives: a TP all-reduce costs the stacks' custom all-reduce α_AR where
    the preset has one (``--efficiency measured`` on a chip with those curves), every other collective τ_c."""
    ar = getattr(eff, "allreduce_latency_s", 0.0)
    if op.name == "allreduce" and np.all(np.asarray(ar) > 0):
        return ar
    return eff.collective_latency_s


def measured_allreduce_time(curves, nbytes, group):
    """t_AR(B, n): one all-reduce of B bytes per chip over n chips read off the chip's measured curve for n chips
    (``Efficiency.allreduce_curves``), interpolated log–log between its message sizes (held at its ends); NaN where
    no curve of n chips was measured. The stacks' one-shot / two-shot custom all-reduce is no ring: on 8 H200 at
    369 kB it takes 13.3 µs where α_AR + 2(n − 1)/n · B / BW gives 4.5 µs (docs/stacks.md)."""
    b = np.log(np.maximum(np.asarray(nbytes, dtype=float), 1.0))
    n = np.asarray(group, dtype=float)
    out = np.full(np.broadcast_shapes(b.shape, n.shape), np.nan)
    for gpus, xs, ts, _where in curves:
        t = np.exp(np.interp(b, np.log(xs), np.log(ts)))
        out = np.where(n == gpus, t, out)
    return out


def op_terms(op: Op, hbm_bw, eff):
    """One operator's terms (s): compute F / (peak · η_c(M)), memory B / (BW · η_m), network net / η_comm, and
    latency kernels · τ_k + collectives · τ_c + scale-out collectives · τ_so + fixed."""
    if op.law is not None:  # the routed experts at the measured grouped GEMM's law
        eta = gemm_efficiency(op.law[0], op.m, op.law[1])
    elif op.m is None or not _small_m_penalty(eff):
        eta = eff.eta_compute
    else:
        eta = gemm_efficiency(eff.eta_compute, op.m, eff.gemm_half_tokens)
    c = np.asarray(op.flops, dtype=float) / (op.peak * eta)
    m = np.asarray(op.bytes, dtype=float) / (hbm_bw * memory_efficiency(op, eff))
    n = np.asarray(op.net_s, dtype=float) / eff.eta_comm
    lat = (np.asarray(op.kernels, dtype=float) * eff.kernel_latency_s
           + np.asarray(op.collectives, dtype=float) * collective_latency(op, eff)
           + np.asarray(op.scaleout_collectives, dtype=float) * eff.scaleout_latency_s + op.latency_s)
    curves = getattr(eff, "allreduce_curves", ())
    if curves and op.message_bytes is not None:  # each all-reduce at its measured time, where a curve has its group
        t_ar = measured_allreduce_time(curves, op.message_bytes, op.group)
        ok = np.isfinite(t_ar)
        n = np.where(ok, 0.0, n)
        lat = np.where(ok, np.asarray(op.collectives, dtype=float) * np.where(ok, t_ar, 0.0) + op.latency_s, lat)
    return c, m, n, lat


@dataclass
class OpTimes:
    """The composed step and its column sums; the per-operator terms (``compute``, ``memory``, ``net``,
    ``latency``, ``time``: {op name: seconds}) are computed when first read (``--ops``, ``--explain``, the
    collectives' split), so a sweep that needs only the step does not hold one array per operator and term."""

    ops: list
    step: object
    composition: str
    t_compute: object
    t_weights: object
    t_kv: object
    t_net: object
    t_latency: object
    t_sched: object
    extra: dict = field(default_factory=dict)
    hbm_bw: object = 1.0
    eff: object = None
    scale: object = 1.0
    sched_overlap: bool = False

    def _terms(self) -> dict:
        if "_per_op" not in self.__dict__:
            tc, tm, tn, tl, t = {}, {}, {}, {}, {}
            for op in self.ops:
                c, m, n, lat = op_terms(op, self.hbm_bw, self.eff)
                tc[op.name], tm[op.name], tn[op.name], tl[op.name] = c, m, n, lat
                t[op.name] = lat + np.maximum(np.maximum(c, m), n)
            self.__dict__["_per_op"] = dict(compute=tc, memory=tm, net=tn, latency=tl, time=t)
        return self.__dict__["_per_op"]

    compute = property(lambda self: self._terms()["compute"], doc="{op: F / (peak · η_c(M))}")
    memory = property(lambda self: self._terms()["memory"], doc="{op: B / (BW · η_m)}")
    net = property(lambda self: self._terms()["net"], doc="{op: net / η_comm}")
    latency = property(lambda self: self._terms()["latency"], doc="{op: kernels · τ_k + collectives · τ_c + …}")
    time = property(lambda self: self._terms()["time"], doc="{op: latency + max of its terms} (serial time)")

    def binding(self, name):
        """Which term binds one operator: compute, memory, network or latency."""
        terms = np.stack(np.broadcast_arrays(self.compute[name], self.memory[name], self.net[name],
                                             self.latency[name]))
        return np.array(["compute", "memory", "network", "latency"])[np.argmax(terms, axis=0)]


def _is(x, value: float) -> bool:
    """x is the plain number ``value`` (not an array): adding 0 or multiplying by 1 may be skipped."""
    return np.ndim(x) == 0 and float(x) == value


def _plus(a, b):
    """a + b (= b + a), without a pass over a sweep's arrays when b is a plain 0 (the ideal: no latency, no
    scheduler; the first term of a sum)."""
    return a if _is(b, 0.0) else a + b


def compose(ops, hbm_bw, eff, *, scale=1.0, fixed=None, composition=None, sched_overlap=False) -> OpTimes:
    """Cost every operator and compose the step (module docstring).

    ``scale`` multiplies the per-stage operators (pipeline: PP stages run one after another);
    ``fixed`` ({name: seconds}) is added after scaling (hand-offs, hop latency); the preset's
    per-step scheduler time ``step_overhead_s`` is added once — or, with ``sched_overlap`` (a stack
    that schedules step n+1 while the GPU runs step n: SGLang's overlap scheduler, TensorRT-LLM's
    PyTorch backend), only where it exceeds the GPU time: t = max(t_gpu, t_sched).
    Each operator costs :func:`op_terms`; only the column sums are kept (the per-operator terms on demand).
    """
    fixed = dict(fixed or {})
    fixed_s = sum(fixed.values()) if fixed else 0.0
    comp = composition or eff.composition
    if comp not in ("serial", "overlap"):
        raise InputError("composition", f"unknown {comp!r}", "serial or overlap")
    sum_c = sum_w = sum_kv = sum_n = sum_l = serial = 0.0
    for op in ops:
        c, m, n, lat = op_terms(op, hbm_bw, eff)
        if comp == "serial":
            serial = _plus(serial, _plus(np.maximum(np.maximum(c, m), n), lat))
        sum_c = _plus(c, sum_c)
        if op.kv:
            sum_kv = _plus(m, sum_kv)
        else:
            sum_w = _plus(m, sum_w)
        sum_n = _plus(n, sum_n)
        sum_l = _plus(lat, sum_l)
    if comp == "serial":
        stage = serial
    else:
        stage = _plus(np.maximum(np.maximum(sum_c, sum_w + sum_kv), sum_n), sum_l)
    sched = np.asarray(eff.step_overhead_s, dtype=float)
    gpu = _plus(stage if _is(scale, 1.0) else np.asarray(scale, dtype=float) * stage, fixed_s)
    if sched_overlap:
        step = np.maximum(gpu, sched)
        sched = step - gpu  # the part of the scheduler time that shows
    else:
        step = _plus(gpu, sched)
    return OpTimes(list(ops), step, comp, sum_c, sum_w, sum_kv, sum_n, sum_l, sched, fixed, hbm_bw, eff, scale,
                   sched_overlap)


def step_working(times: OpTimes, index: int = 0) -> str:
    """The step of configuration ``index`` written out from its operators, so that it adds up to ``times.step``
    (``--explain``): serial — (t_op + …) · PP + fixed + t_sched; overlapped — max(ΣF/…, ΣB/…, Σnet) + Σlatency;
    an overlap scheduler — max(t_gpu, t_sched)."""
    def at(x):
        a = np.asarray(x, dtype=float)
        return float(np.broadcast_to(a, np.broadcast_shapes(a.shape, np.shape(times.step))).ravel()[index])

    if times.composition == "serial":
        stage = "(" + " + ".join(f"{fmt(at(times.time[op.name]), 's')} [{op.name}]" for op in times.ops) + ")"
    else:
        stage = (f"max({fmt(at(times.t_compute), 's')} [compute], {fmt(at(times.t_weights), 's')} [weights] + "
                 f"{fmt(at(times.t_kv), 's')} [KV], {fmt(at(times.t_net), 's')} [network]) + "
                 f"{fmt(at(times.t_latency), 's')} [latencies]")
    scale = at(times.scale)
    gpu = stage if scale == 1.0 else f"{stage} · {scale:g}"
    gpu += "".join(f" + {fmt(at(v), 's')} [{k}]" for k, v in times.extra.items() if at(v) != 0.0)
    sched = at(times.eff.step_overhead_s)
    if times.sched_overlap:
        return f"max({gpu}, {fmt(sched, 's')} [scheduler])" if sched else gpu
    return f"{gpu} + {fmt(sched, 's')} [scheduler]" if sched else gpu


#: How ``--explain`` labels a silicon number a chip took from the measured chips (``specs.kernels.transferred``).
TRANSFERRED = "transferred from the measured chips (not measured)"


def measured_points(times: OpTimes, index: int = 0) -> list[dict]:
    """The measured curve points behind a step's silicon terms (``--explain`` under ``--efficiency measured``: the
    preset's ``silicon_from``): per GEMM operator, η_c(M) = η_c·M/(M+M½) at its rows M (``op`` set), then each
    silicon number once with the curve, table and package version it was read from (``op`` None).
    [] for a preset whose silicon is fitted."""
    import re

    src = dict(getattr(times.eff, "silicon_from", ()) or ())
    if not src:
        return []
    eff = times.eff

    def at(x):
        a = np.asarray(x, dtype=float)
        return float(a.reshape(-1)[index]) if a.size > 1 else float(a)

    def curve(k):
        m = re.search(r'"([^"]+)"', src.get(k, ""))
        return f"the {m.group(1)} curve" if m else ("the measured chips' median" if how(k) == TRANSFERRED else k)

    def how(k):
        return ("inferred from serving records" if " inferred from " in src[k] else
                TRANSFERRED if src[k].startswith("transferred:") else "measured kernel curve")

    eta_c, half = at(eff.eta_compute), at(eff.gemm_half_tokens)
    kv_rates = {"eta_memory_mla" if op.mla else "eta_memory_kv" for op in times.ops if op.kv}  # the one attention read
    own_moe = any(op.eta_m is not None for op in times.ops)  # the experts at their format's rate, not η_m,moe
    rows = []
    for op in times.ops:
        if op.law is not None and at(op.law[3]) and at(op.flops) > 0:  # the routed experts: their MoE curve's law
            m, e, h, where = at(op.m), at(op.law[0]), at(op.law[1]), op.law[2]
            rows.append(dict(op=op.name, symbol=f"η_c,moe(M={m:.4g})", working=f"{e:.4f} · {m:.4g} / ({m:.4g} + "
                                                                                f"{h:.2f})",
                             value=float(gemm_efficiency(e, m, h)), unit="",
                             source=f"η_c,moe·M/(M+M½) per expert, {where}"))
        elif op.m is not None and at(op.flops) > 0 and "eta_compute" in src:
            m = at(op.m)
            rows.append(dict(op=op.name, symbol=f"η_c(M={m:.4g})", working=f"{eta_c:.4f} · {m:.4g} / ({m:.4g} + "
                                                                              f"{half:.2f})",
                             value=float(gemm_efficiency(eta_c, m, half)), unit="",
                             source=f"η_c·M/(M+M½), {curve('eta_compute')}"))
        if op.eta_m is not None and at(op.bytes) > 0:  # the experts' bytes at their weight format's MoE curve
            rows.append(dict(op=op.name, symbol="η_m,moe", working="", value=float(op.eta_m[0]), unit="",
                             how="measured kernel curve", source=op.eta_m[1]))
        curves = getattr(eff, "allreduce_curves", ())
        if curves and op.message_bytes is not None and at(op.collectives) > 0:  # each all-reduce at its measured time
            b, g = at(op.message_bytes), at(op.group)
            t = float(measured_allreduce_time(curves, b, g))
            if np.isfinite(t):
                where = next(r[3] for r in curves if r[0] == g)
                rows.append(dict(op=op.name, symbol=f"t_AR(B={fmt(b, 'B')}, {g:g} GPUs)", working="", value=t,
                                 unit="s", how="one all-reduce, measured custom all-reduce curve",
                                 source=f"log–log between the measured points, {where}"))
    for k, sym, unit in (("eta_compute", "η_c", ""), ("gemm_half_tokens", "M½", ""), ("eta_memory", "η_m", ""),
                         ("eta_memory_moe", "η_m,moe (experts)", ""),
                         ("eta_memory_kv", "η_m,kv (GQA attention)", ""),
                         ("eta_memory_mla", "η_m,mla (MLA attention)", ""),
                         ("kernel_latency_s", "τ_k", "s"), ("collective_latency_s", "τ_c", "s"),
                         ("allreduce_latency_s", "α_AR (TP all-reduce)", "s"),
                         ("eta_comm", "η_comm", ""), ("mla_kernel_scale", "MLA kernel scale", "")):
        if k in src and (k not in ("eta_memory_kv", "eta_memory_mla") or k in kv_rates) \
                and (k != "eta_memory_moe" or not own_moe):
            rows.append(dict(op=None, symbol=sym, working="", value=at(getattr(eff, k)), unit=unit, source=src[k],
                             how=how(k)))
    return rows


def ops_table(times: OpTimes, scale=1.0, index=0) -> list[dict]:
    """One row per operator (``--ops``): FLOPs, bytes, arithmetic intensity, time and binding term.

    Times are per step (× ``scale`` for the pipeline stages); in a serial composition the rows
    plus the scheduler row sum to the step (tested); in an overlapped one the step is the max
    of the columns' sums and the rows show each operator's own roofline time.
    """
    def at(x):
        a = np.asarray(x, dtype=float)
        return float(a.reshape(-1)[index]) if a.size > 1 else float(a)

    s = at(scale)
    rows = []
    for op in times.ops:
        f, b = at(op.flops) * s, at(op.bytes) * s
        t = at(times.time[op.name]) * s
        bind = np.asarray(times.binding(op.name)).reshape(-1)
        rows.append({"op": op.name, "layer_type": LAYER_TYPE.get(op.name, op.name), "flops": f, "bytes": b,
                     "intensity": f / b if b else float("inf") if f else 0.0, "time_s": t,
                     "binding": str(bind[index if bind.size > 1 else 0]) if t > 0 else "—"})
    for name, v in times.extra.items():
        rows.append({"op": name, "layer_type": LAYER_TYPE.get(name, name), "flops": 0.0, "bytes": 0.0,
                     "intensity": 0.0, "time_s": at(v), "binding": "network"})
    rows.append({"op": "scheduler", "layer_type": LAYER_TYPE["scheduler"], "flops": 0.0, "bytes": 0.0,
                 "intensity": 0.0, "time_s": at(times.t_sched), "binding": "latency"})
    return rows


__all__ = ["Op", "OpTimes", "attention_kernels", "compose", "op_terms", "step_working", "measured_points", "gemm_efficiency", "kernel_time", "ops_table", "KERNELS",
           "ELEMENTWISE_KERNELS_PER_LAYER", "OP_ORDER", "LAYER_TYPE"]
