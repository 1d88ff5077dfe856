"""Deployments: how a model is cut across chips, scale-up domains and racks (lecture 00:32–01:18).

A deployment is ``chips`` chips of a :class:`~rackmath.specs.hardware.System`
(scale-up domains of ``system.scaleup_size``), cut by the serving frameworks'
flags (``reference/conventions.md``):

* ``tp`` — attention tensor-parallel degree: the chips one pipeline stage of one
  replica spans. A replica spans ``tp · pp`` chips; replicas ``dp = chips // (tp·pp)``.
* ``ep`` — expert-parallel degree of the MoE layers within those ``tp`` chips; the
  MoE layers are split ``ep`` ways by experts and ``moe_tp = tp/ep`` ways by tensor
  parallelism ("TP8 EP2" = attention TP8, MoE TP4 × EP2).
* ``attention_dp`` — attention is data-parallel over the ``tp`` chips: each chip
  holds its own sequences and their KV, attention weights are replicated, no
  attention all-reduce ("DEP8" = ``tp=8, ep=8, attention_dp=True``). This is the
  lecture's layout ("the same perfect sharding of the contexts across GPUs in a rack").
* ``pp`` — pipeline stages; in inference ``pp`` micro-batches are in flight (01:03:37).
* ``redundant_experts`` — extra expert slots (DeepSeek: 256 + 32 = 288 slots).

This module holds the layout's equations and :func:`evaluate`, the vectorized one-pass evaluation on plain
numbers (``engine/numbers.py``: :class:`ModelNumbers`, :class:`HwNumbers`) and numpy arrays of degrees: every
layout of a search at once. Around it: ``engine/deployment.py`` (``Deployment``: one validated layout of a real
model on a real system, and the layout rules) and ``engine/search.py`` (the grid of valid layouts and the Pareto
frontier).

Modelling choices (stated once; docs/racks.md has the full list):

* The most-loaded chip sets the pace: ``ceil(slots/ep)`` experts, ``ceil(layers/pp)`` layers.
* A group of ``ep ≤ scaleup_size`` chips sits inside one domain; an EP group of ``ep >
  S`` chips spans ``ep/S`` domains and a share ``1 − S/ep`` of its all-to-all traffic
  leaves the domain (two racks: half).
* Compute, memory and communication overlap by default (``overlap="max"``: DeepSeek's
  dual micro-batch overlap); ``overlap="sum"`` adds communication serially. Hop
  latency between racks always adds: decode is sequential across stages (01:12).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import InputError
from ..explain import Derivation, fmt
from ..specs.records import WEIGHT_LAYOUTS
from .comms import (WS2D_COLLECTIVES, allgather_time, alltoall_dedup_scaleout_bytes, alltoall_dedup_time,
                    alltoall_split_time, hierarchical_allreduce_scaleout_bytes, hierarchical_allreduce_time,
                    moe_alltoall_bytes, moe_fanout, p2p_time, scaleout_share, ws2d_exchange_time, ws2d_split)
from .efficiency import load_efficiency
from .numbers import HwNumbers, ModelNumbers, moe_compute_law_of, moe_stream_rate_of
from .roofline import usd_per_mtok
from .step import ELEMENTWISE_KERNELS_PER_LAYER, MLA_EAGER_KERNEL_SCALE, Op, attention_kernels, compose, op_kernels

OVERLAP_MODES = ("max", "sum")

#: Fixed latency of one collective (all-reduce, or one direction of the MoE all-to-all) inside a
#: scale-up domain. Small-message NVLink collectives take a few µs (2–20 µs); the lecture's ideal
#: roofline has none, but reference/examples.md lists ignoring per-layer collective latency as a
#: mistake at small batch. Override with ``collective_latency_s``.
COLLECTIVE_LATENCY_S = 5e-6

BOUND_NAMES = np.array(["compute", "weights", "kv", "comm", "hop latency", "latency"])


# --------------------------------------------------------------------------------------
# Pure-number equations (one per function; all broadcast over numpy arrays)
# --------------------------------------------------------------------------------------


def experts_per_chip(n_slots, ep):
    """Experts on the most-loaded chip: ceil(slots / EP)  (lecture 00:32: 256 on 64 GPUs → 4)."""
    return np.ceil(np.asarray(n_slots, dtype=float) / np.asarray(ep, dtype=float))


def layers_on_stage(n_layers, pp):
    """Layers on the most-loaded pipeline stage: ceil(layers / P)  (lecture 00:47)."""
    return np.ceil(np.asarray(n_layers, dtype=float) / np.asarray(pp, dtype=float))


def pipeline_hops(pp, tp, scaleup_size):
    """Domain boundaries one token crosses per decode cycle (wrap-around included; lecture 01:12).

    Stages pack into domains (``max(1, S // TP)`` stages per domain); with more than one
    domain per replica a token crosses ``ceil(P / stages_per_domain)`` boundaries per cycle.
    """
    pp = np.asarray(pp, dtype=float)
    per_dom = np.maximum(1.0, np.floor(scaleup_size / np.asarray(tp, dtype=float)))
    n_dom = np.ceil(pp / per_dom)
    return np.where((pp > 1) & (n_dom > 1), n_dom, 0.0)


def binding_term(t_compute, t_weights, t_kv, t_comm, t_hops, t_latency=0.0):
    """Name of the largest term of TPOT: compute, memory (weights or kv, whichever is larger), comm, hop latency
    or fixed latency (kernel launches, collective latencies, scheduler)."""
    terms = np.stack(np.broadcast_arrays(t_compute, np.asarray(t_weights) + t_kv, t_comm, t_hops, t_latency))
    i = np.argmax(terms, axis=0)
    mem_name = np.where(np.asarray(t_weights) >= np.asarray(t_kv), 1, 2)
    return BOUND_NAMES[np.choose(i, [np.zeros_like(mem_name), mem_name, np.full_like(mem_name, 3),
                                     np.full_like(mem_name, 4), np.full_like(mem_name, 5)])]


def ep_rank_load(assignments, ep, n_experts, redundant=0.0):
    """Busiest EP rank's load over the mean under random routing: 1 + √(2 ln EP) · √((1 − 1/EP) · EP / N) · E/(E + r).

    N token→expert assignments land on EP ranks at random (uniform, independent); the
    expected maximum of EP binomial loads is about μ + σ√(2 ln EP) (Gaussian extreme value;
    balls into bins, Raab & Steger 1998). Redundant expert replicas (DeepSeek EPLB, 32 extra
    slots) let the balancer spread the excess: it shrinks by E / (E + r). 1 when EP = 1;
    capped at EP (everything on one rank).
    """
    n = np.maximum(np.asarray(assignments, dtype=float), 1e-9)
    ep = np.asarray(ep, dtype=float)
    z = np.sqrt(2.0 * np.log(np.maximum(ep, 1.0)))
    excess = z * np.sqrt(np.maximum(1.0 - 1.0 / np.maximum(ep, 1.0), 0.0) * ep / n)
    excess = excess * float(n_experts) / (float(n_experts) + np.asarray(redundant, dtype=float)) \
        if n_experts else excess
    return np.where(ep > 1, np.minimum(1.0 + excess, ep), 1.0)


def attention_dp_imbalance(seqs, ranks):
    """Busiest attention-DP rank over the mean: ceil(b / R) / (b / R) (sequences are placed round-robin).

    With fewer sequences than ranks some ranks idle and the busiest holds one (SGLang / vLLM
    data-parallel attention schedule requests per rank; their step waits for the slowest).
    """
    b = np.maximum(np.asarray(seqs, dtype=float), 1e-9)
    r = np.maximum(np.asarray(ranks, dtype=float), 1.0)
    return np.ceil(b / r - 1e-9) / (b / r)


def attention_ranks(tp, attention_dp, size=0):
    """Attention-DP groups R (arrays broadcast): the group count given (> 0) under attention DP, TP under attention
    DP with none given (every chip its own sequences), 1 without attention DP (plain TP attention)."""
    tp = np.asarray(tp, dtype=float)
    size = np.asarray(size if size is not None else 0, dtype=float)
    return np.where(np.asarray(attention_dp, dtype=bool), np.where(size > 0, size, tp), 1.0)


def attention_tp(tp, ranks):
    """Chips one attention-DP group splits its attention over: TP / R (SGLang ``--tp T --dp R
    --enable-dp-attention``: R groups of T/R chips, each with its own sequences and KV; R = T is full attention
    DP, every chip its own sequences; R = 1 is plain TP)."""
    return np.asarray(tp, dtype=float) / np.maximum(np.asarray(ranks, dtype=float), 1.0)


def _effective(hw, efficiency, collective_latency_s):
    """The Efficiency a layout is costed with; the layout chapter's ideal keeps a 5 µs collective latency."""
    eff = load_efficiency(efficiency if efficiency is not None else getattr(hw, "efficiency", None))
    if collective_latency_s is not None:
        return replace(eff, collective_latency_s=float(collective_latency_s))
    if eff.ideal:
        return replace(eff, collective_latency_s=COLLECTIVE_LATENCY_S)
    return eff


def tp_allreduces_per_layer(parallel_block=False):
    """Tensor-parallel all-reduces per transformer layer: 2 (after attention, after the FFN; Megatron-LM, Shoeybi et
    al. 2019), or 1 with a parallel block y = x + Attn(LN(x)) + FFN(LN(x)), whose two partial outputs are summed in
    one all-reduce (PaLM, Chowdhery et al. 2022 §2; Pope et al. 2022 §3.5)."""
    return 1.0 if parallel_block else 2.0


def weight_gather_workspace(stage_weight_bytes, layers):
    """Weight-gathered layout: two gathered layers held at once (one running, the next arriving) = 2·W_stage / L.

    Pope et al. 2022 §3.2.3 (weight-gathered layouts): weights are stored sharded and all-gathered per layer, so
    the resident cost is the shard plus the layers in flight.
    """
    return 2.0 * np.asarray(stage_weight_bytes, dtype=float) / np.maximum(np.asarray(layers, dtype=float), 1.0)


def c_mem(weight_bytes, kv_bytes_per_seq, micro_batch, ep, pp):
    """The lecture's memory per chip (01:03:37): c_mem = N_total/(E·P) + (P·b)·len·bytes/(E·P) = N/(E·P) + b·len·bytes/E.

    ``kv_bytes_per_seq`` = len_ctx × bytes per token; P micro-batches of b sequences are in
    flight, so the KV term does not fall with P.
    """
    ep = np.asarray(ep, dtype=float)
    pp = np.asarray(pp, dtype=float)
    return weight_bytes / (ep * pp) + pp * np.asarray(micro_batch, dtype=float) * kv_bytes_per_seq / (ep * pp)


def check_weight_layout(layout, model_name="", is_moe=False):
    """A weight layout (or an array of them) validated against :data:`WEIGHT_LAYOUTS`, as a numpy string array; a
    mixture of experts (``is_moe``) takes 1d only (its experts are sharded over EP, not gathered or split 2D)."""
    wl = np.asarray(layout)
    if wl.dtype.kind not in "UO":
        raise InputError("weight_layout", f"unknown {layout!r}", ", ".join(WEIGHT_LAYOUTS))
    wl = wl.astype(str)
    known = np.zeros(wl.shape, dtype=bool)
    for name in WEIGHT_LAYOUTS:
        known |= wl == name
    if not np.all(known):
        raise InputError("weight_layout", f"unknown {str(wl[~known].flat[0])!r}", ", ".join(WEIGHT_LAYOUTS))
    if is_moe and np.any(wl != "1d"):
        raise InputError("weight_layout", f"{str(wl[wl != '1d'].flat[0])} for {model_name}, a mixture of experts",
                         "1d (its experts are sharded over EP, not gathered or split 2D)")
    return wl


# --------------------------------------------------------------------------------------
# The vectorized evaluation
# --------------------------------------------------------------------------------------


@dataclass
class LayoutArrays:
    """Every quantity of :func:`evaluate`, as numpy arrays broadcast from the inputs (per most-loaded chip)."""

    model: ModelNumbers
    hw: HwNumbers
    overlap: str
    act_bytes: float
    values: dict = field(default_factory=dict)

    def __getattr__(self, name):
        try:
            v = self.__dict__["values"][name]
        except KeyError:
            raise AttributeError(name) from None
        shape = np.shape(self.__dict__["values"]["tpot_s"])
        return v if np.shape(v) == shape else np.broadcast_to(v, shape)  # fields are stored unbroadcast

    def __len__(self):
        return int(np.asarray(self.values["tpot_s"]).size)

    def take(self, idx) -> "LayoutArrays":
        """A subset of the layouts (boolean mask or indices), flattened."""
        shape = np.shape(self.values["tpot_s"])
        vals = {k: np.broadcast_to(v, shape).reshape(-1)[idx] for k, v in self.values.items()}
        return LayoutArrays(self.model, self.hw, self.overlap, self.act_bytes, vals)

    def row(self, i=0) -> dict:
        shape = np.shape(self.values["tpot_s"])
        out = {}
        for k, v in self.values.items():
            x = np.broadcast_to(v, shape).reshape(-1)[i]
            out[k] = x.item() if hasattr(x, "item") else x
        return out

    def as_dict(self) -> dict:
        shape = np.shape(self.values["tpot_s"])
        return {k: np.broadcast_to(v, shape).tolist() for k, v in self.values.items()}

    def explain(self, i=0):
        """The derivation of layout ``i`` (the equations with its numbers)."""
        return explain_layout(self, i)


@dataclass(frozen=True)
class _Shape:
    """A layout's degrees (float arrays) and what they put on the most-loaded chip; the parts of :func:`evaluate`
    read it."""

    tp: np.ndarray
    ep: np.ndarray
    pp: np.ndarray
    b: np.ndarray  # sequences per micro-batch per replica
    adp: np.ndarray  # attention DP (bool)
    R: np.ndarray  # attention-DP groups of the TP group
    ta: np.ndarray  # chips one group's attention (and dense FFN) is split over
    S: float  # scale-up domain size
    chips: np.ndarray  # billed
    dp: np.ndarray  # replicas
    moe_tp: np.ndarray
    pl: np.ndarray  # tokens per sequence this step (may be an array)
    wl: np.ndarray  # weight layout names
    wg: np.ndarray  # weight-gathered rows
    w2: np.ndarray  # 2D weight-stationary rows
    redundant: np.ndarray  # redundant expert slots
    slots: np.ndarray  # expert slots
    L_stage: np.ndarray  # layers on the most-loaded stage
    s_frac: np.ndarray  # its share of the layers
    L_moe: np.ndarray  # MoE layers on it
    L_dense: np.ndarray  # dense-FFN layers on it
    e_chip: np.ndarray  # expert slots on the most-loaded chip
    kv_shard: np.ndarray  # ways one sequence's KV is split: R groups × min(TP/R, KV heads)
    w_stage: np.ndarray  # one stage's dense weights, whole
    tokens: np.ndarray  # tokens of one micro-batch through one stage


def _shape(mn: ModelNumbers, hw: HwNumbers, tp, ep, pp, micro_batch, attention_dp, adp_ranks, chips,
           redundant_experts, weight_layout) -> _Shape:
    """The degrees of :func:`evaluate` as arrays, validated, and the layers and experts on the most-loaded chip."""
    f = lambda x: np.asarray(x, dtype=float)  # noqa: E731
    tp, ep, pp, b = f(tp), f(ep), f(pp), f(micro_batch)
    adp = np.asarray(attention_dp, dtype=bool)
    R = attention_ranks(tp, adp, adp_ranks)
    ta = attention_tp(tp, R)
    chips = tp * pp if chips is None else f(chips)
    pl = np.asarray(mn.pass_len, dtype=float)
    wl = check_weight_layout(weight_layout, mn.name, mn.is_moe)
    wg, w2 = wl == "gathered", wl == "2d"
    if np.any(w2 & adp):
        raise InputError("weight_layout", "2d with attention DP", "2d without attention DP, or 1d")
    L_stage = layers_on_stage(mn.n_layers, pp)
    s_frac = L_stage / mn.n_layers
    redundant = f(redundant_experts)
    slots = mn.n_experts + redundant
    if mn.is_moe:
        L_moe = layers_on_stage(mn.n_moe_layers, pp)
        e_chip = experts_per_chip(slots, ep)
    else:
        L_moe = np.zeros_like(pp)
        e_chip = np.zeros_like(ep)
    return _Shape(tp=tp, ep=ep, pp=pp, b=b, adp=adp, R=R, ta=ta, S=float(hw.scaleup_size), chips=chips,
                  dp=np.floor(chips / (tp * pp)), moe_tp=tp / ep, pl=pl, wl=wl, wg=wg, w2=w2, redundant=redundant,
                  slots=slots, L_stage=L_stage, s_frac=s_frac, L_moe=L_moe,
                  L_dense=np.maximum(L_stage - L_moe, 0.0) if mn.is_moe else L_stage, e_chip=e_chip,
                  kv_shard=R * np.minimum(ta, mn.kv_heads),
                  w_stage=(mn.dense_weight_bytes + mn.other_weight_bytes) * s_frac, tokens=b * pl)


def _memory(mn: ModelNumbers, hw: HwNumbers, sh: _Shape, act_bytes, usable_fraction, reserve_bytes) -> dict:
    """Memory per most-loaded chip (c_mem, 01:03:37): weights, KV, workspace, headroom and the largest micro-batch
    that fits. Attention DP replicates attention/dense weights over the R groups, split TP/R ways in each."""
    w_dense = (mn.dense_weight_bytes + mn.other_weight_bytes) * sh.s_frac / sh.ta
    w_exp = sh.L_moe * sh.e_chip * mn.expert_weight_bytes / sh.moe_tp
    w_chip = w_dense + w_exp
    kv_chip = sh.pp * sh.b * mn.kv_bytes_per_seq * sh.s_frac / sh.kv_shard  # P·b sequences in flight per replica
    tok_chip = sh.b * sh.pl / sh.R  # tokens whose activations a chip holds
    ws_per_tok = (4.0 + 2.0 * mn.experts_per_token) * mn.d_model * act_bytes
    ws_chip = tok_chip * ws_per_tok + reserve_bytes + np.where(sh.wg, weight_gather_workspace(sh.w_stage, sh.L_stage),
                                                               0.0)
    mem = w_chip + kv_chip + ws_chip
    cap = hw.hbm_bytes * usable_fraction
    headroom = cap - mem
    per_b = sh.pp * mn.kv_bytes_per_seq * sh.s_frac / sh.kv_shard + sh.pl / sh.R * ws_per_tok
    max_b = np.maximum(0.0, np.floor((cap - w_chip - reserve_bytes) / np.maximum(per_b, 1e-300)))
    return dict(weight_bytes_per_chip=w_chip, kv_bytes_per_chip=kv_chip, workspace_bytes_per_chip=ws_chip,
                mem_per_chip=mem, mem_capacity=np.asarray(cap), headroom_bytes=headroom,
                fits=(headroom >= 0) & (sh.dp >= 1), max_micro_batch=max_b, max_concurrency=sh.dp * sh.pp * max_b)


def _compute_ops(mn: ModelNumbers, hw: HwNumbers, sh: _Shape, eff, t_attn, adp_imb) -> list:
    """The operators of one stage step on the most-loaded chip (engine/step.py): the dense components, attention,
    the routed experts and the elementwise kernels. ``t_attn``: tokens one chip's attention/dense GEMMs see."""
    b, adp, R, ta, pl = sh.b, sh.adp, sh.R, sh.ta, sh.pl
    ht = np.asarray(mn.head_tokens_per_seq, dtype=float)
    head_tok = np.where(ht < 0, pl, ht)
    n_dense_ffn = mn.n_dense_ffn_layers or max(mn.n_layers - mn.n_moe_layers, 0)
    frac = {"qkv_o": sh.s_frac, "dense_ffn": sh.L_dense / max(n_dense_ffn, 1),
            "router": sh.L_moe / max(mn.n_moe_layers, 1), "shared_experts": sh.L_moe / max(mn.n_moe_layers, 1),
            "lm_head": 1.0 / sh.pp, "dense": sh.s_frac}
    layers = {"qkv_o": sh.L_stage, "dense_ffn": sh.L_dense, "router": sh.L_moe, "shared_experts": sh.L_moe,
              "lm_head": 1.0 / sh.pp, "dense": sh.L_stage}
    comps = mn.components
    if not comps:  # a hand-built ModelNumbers: one operator holds every dense weight
        dense_params = np.maximum(mn.flops_per_seq - mn.expert_flops_per_seq - mn.attn_flops_per_seq, 0.0) / (2.0 * pl)
        comps = (("dense", mn.dense_weight_bytes, dense_params),)
    mla = eff.mla_kernel_scale if mn.mla else 1.0  # an MLA block's kernels relative to the CUDA stacks' count
    eager = MLA_EAGER_KERNEL_SCALE if mn.mla else None  # ... and those its host dispatches in an eager step
    ops = []
    for name, nbytes, params in comps:  # attention DP: each group runs its own sequences on weights split TP/R ways
        tok = np.where(adp, b * head_tok / R * adp_imb, b * head_tok) if name == "lm_head" else t_attn
        n_k = op_kernels("qkv_o_mla" if name == "qkv_o" and mn.mla else name, nbytes, params, mla) * layers[name]
        ops.append(Op(name, flops=2.0 * tok * params * frac[name] / ta,
                      bytes=np.where(sh.wg, nbytes * frac[name], nbytes * frac[name] / ta),
                      peak=hw.peak_flops, m=np.where(sh.wg, tok / ta, tok), kernels=n_k,
                      eager_kernels=n_k * eager if eager is not None and name == "qkv_o" else None))
    n_k = attention_kernels(mn.dsa, mla) * sh.L_stage  # heads split TP/R ways in a group, sequences over groups
    ops.append(Op("attention", flops=b * mn.attn_flops_per_seq * sh.s_frac / sh.tp * adp_imb,
                  bytes=b * mn.kv_read_bytes_per_seq * sh.s_frac / sh.kv_shard * adp_imb,
                  peak=hw.attn_peak_flops or hw.peak_flops, kernels=n_k, kv=True, mla=bool(mn.mla),
                  eager_kernels=None if eager is None else n_k * eager))
    if mn.is_moe:
        k = mn.experts_per_token
        busiest = ep_rank_load(sh.tokens * k, sh.ep, mn.n_experts, sh.redundant)
        t_routed = sh.tokens * k * (sh.e_chip / sh.slots) * busiest  # token-expert pairs on the busiest chip, per layer
        hit = mn.expert_hit_share(sh.tokens, getattr(eff, "moe_routing", ()))  # s(T) · uniform where measured
        active = np.maximum(sh.e_chip * hit, 1e-9)  # experts with work on that chip
        p_exp = mn.expert_params or mn.expert_flops_per_seq / np.maximum(2.0 * k * mn.n_moe_layers * pl, 1e-300)
        law = _experts_law(mn, sh, eff, hw)
        ops.append(Op("experts", flops=2.0 * t_routed * p_exp * sh.L_moe / sh.moe_tp,
                      bytes=sh.L_moe * sh.e_chip * hit * mn.expert_weight_bytes / sh.moe_tp, peak=hw.peak_flops,
                      m=np.maximum(t_routed / active, 1e-9),
                      kernels=op_kernels("experts", mn.expert_weight_bytes, p_exp) * sh.L_moe,
                      law=law, eta_m=moe_stream_rate_of(mn, getattr(eff, "moe_stream", ()))))
    ops.append(Op("elementwise", kernels=ELEMENTWISE_KERNELS_PER_LAYER * sh.L_stage))
    return ops


def wide_ep(attention_dp, ep):
    """Whether the experts are reached by an all-to-all over attention-DP ranks (attention DP and EP > 1: DeepEP,
    TensorRT-LLM's wide-EP): every rank's tokens meet the experts, and a prompt pass's dispatch sizes its buffers from
    per-rank counts the host reads back (``serving.steps.synced_prompt_pass``)."""
    return np.asarray(attention_dp, dtype=bool) & (np.asarray(ep, dtype=float) > 1)


def _experts_law(mn: ModelNumbers, sh: _Shape, eff, hw: HwNumbers):
    """The compute law (η_c, M½, source, applies) the routed experts run at (``Op.law``), or None (the preset's dense
    GEMM law η_c(M) everywhere).

    The measured grouped-GEMM law of the chip's MoE tables (``moe_compute_law_of``) where the experts meet many
    tokens each: a prompt pass, and a decode step under attention DP with experts spread over EP > 1 ranks (every
    rank's tokens are dispatched to the experts: DeepEP / TensorRT-LLM wide-EP; a GB200 DEP8 pool at C = 2,252
    puts ~145 tokens on each expert, where TensorRT-LLM's wide-EP MoE takes 0.35–0.39 ms per layer at 512 tokens per
    rank (aiconfigurator's wideep_moe table), the MoE law 0.40 ms and the dense law 0.15 ms). Elsewhere a decode
    step's few tokens per expert run the stacks' fused low-latency MoE kernels, at the dense law their fitted step
    times were made with (docs/stacks.md, "The routed experts' compute, measured")."""
    law = moe_compute_law_of(mn, getattr(eff, "moe_compute", ()), hw.compute_dtype)
    if law is None or mn.prefill:
        return None if law is None else (law[3], law[4], law[5], True)
    wide = wide_ep(sh.adp, sh.ep)
    if not np.any(wide):
        return None
    return (np.where(wide, law[3], eff.eta_compute), np.where(wide, law[4], eff.gemm_half_tokens), law[5], wide)


def _collective_ops(mn: ModelNumbers, hw: HwNumbers, sh: _Shape, t_attn, act_bytes):
    """The collectives of one stage step: (ops, scale-out share of the MoE all-to-all, scale-out bytes per chip).

    TP all-reduces after attention and the FFN; under attention DP only the attention (and dense FFN) all-reduces
    inside a group of TP/R > 1 chips remain, and the MoE layers dispatch (all-to-all). 2D weight-stationary rows
    exchange instead of all-reducing; weight-gathered rows all-gather each layer's weights.
    """
    tp, adp, S, w2, wg, tokens = sh.tp, sh.adp, sh.S, sh.w2, sh.wg, sh.tokens
    ar_group = np.where(adp, sh.ta, tp)
    ar_bytes = np.where(adp, t_attn, tokens) * mn.d_model * act_bytes
    n_ar = np.where(wg | (ar_group <= 1), 0.0, np.where(adp, sh.L_stage + sh.L_dense,
                                                        tp_allreduces_per_layer(mn.parallel_block) * sh.L_stage))
    t_ar = hierarchical_allreduce_time(ar_bytes, ar_group, S, hw.scaleup_bw, hw.scaleout_bw)
    tp_bw = np.where(tp <= S, hw.scaleup_bw, hw.scaleout_bw)  # a 2D exchange or weight gather over the TP chips
    if np.any(w2):  # 2D weight-stationary: each all-reduce becomes a 4-collective exchange along both split axes
        t_ar = np.where(w2, ws2d_exchange_time(tokens, tp, mn.d_model, mn.ffn_width, act_bytes, tp_bw), t_ar)
    n_coll = np.where(w2, WS2D_COLLECTIVES * n_ar, n_ar)
    ops = [Op("allreduce", net_s=n_ar * t_ar, collectives=n_coll,
              scaleout_collectives=np.where(ar_group > S, n_coll, 0.0),
              message_bytes=ar_bytes, group=np.where(w2 | (ar_group > S), 0, ar_group))]
    if np.any(wg):  # weight-gathered: each layer's weights (attention block, FFN) gathered from the TP chips
        n_ag = np.where(wg & (tp > 1), 2.0 * sh.L_stage, 0.0)
        t_ag = allgather_time(sh.w_stage, tp, tp_bw)
        ops.append(Op("allgather", net_s=np.where(wg, t_ag, 0.0), collectives=n_ag,
                      scaleout_collectives=np.where(tp > S, n_ag, 0.0)))
    if mn.is_moe:
        k, L_moe = mn.experts_per_token, sh.L_moe
        fan = moe_fanout(k, sh.ep, sh.moe_tp)
        a2a_tok = t_attn / sh.ta  # each chip of a group dispatches its share of the group's tokens
        a2a_bytes = moe_alltoall_bytes(a2a_tok, fan, mn.d_model, act_bytes)  # per chip, per MoE layer
        n_a2a = np.where(adp & (tp > 1), 2.0 * L_moe, 0.0)
        if mn.prefill:  # prompt passes dispatch once per remote domain, then forward inside it (DeepEP normal)
            t_a2a_layer = alltoall_dedup_time(a2a_tok, k, fan, mn.d_model, act_bytes, tp, S, hw.scaleup_bw,
                                              hw.scaleout_bw)
            so_layer = alltoall_dedup_scaleout_bytes(a2a_tok, k, mn.d_model, act_bytes, tp, S)
        else:  # decode: low-latency kernels send every copy straight to its chip
            t_a2a_layer = alltoall_split_time(a2a_bytes, tp, S, hw.scaleup_bw, hw.scaleout_bw)
            so_layer = a2a_bytes * scaleout_share(tp, S)
        ops.append(Op("alltoall", net_s=np.where(n_a2a > 0, L_moe * t_a2a_layer, 0.0), collectives=n_a2a,
                      scaleout_collectives=np.where(tp > S, n_a2a, 0.0)))
        out_share = np.where(adp, scaleout_share(tp, S), 0.0)
        so_bytes = np.where(adp, L_moe * so_layer, 0.0)
    else:
        out_share = np.zeros_like(tokens)
        so_bytes = np.zeros_like(tokens)
    so_bytes = so_bytes + np.where(w2, np.where(tp > S, n_ar * t_ar * hw.scaleout_bw, 0.0),
                                   n_ar * hierarchical_allreduce_scaleout_bytes(ar_bytes, ar_group, S))
    return ops, out_share, so_bytes


def _pipeline(mn: ModelNumbers, hw: HwNumbers, sh: _Shape, act_bytes, eta_comm, hop):
    """Pipeline hand-offs and hop latency per decode cycle (01:12): (hops, t_handoff, t_hops). Each chip sends its
    share of the activations; ``hops`` boundaries cross the scale-out network, the rest stay in the domain."""
    hops = pipeline_hops(sh.pp, sh.tp, sh.S)
    handoff_bytes = sh.tokens * mn.d_model * act_bytes / sh.tp
    n_inner = np.where(sh.pp > 1, sh.pp - hops, 0.0)
    t_handoff = hops * p2p_time(handoff_bytes, hw.scaleout_bw) + n_inner * p2p_time(handoff_bytes, hw.scaleup_bw)
    return hops, t_handoff / eta_comm, hops * hop


def _time_fields(hw: HwNumbers, sh: _Shape, times, ops, t_handoff, t_hops, hops, out_share, so_bytes) -> dict:
    """The step's time terms, throughput, $/Mtok, scale-out traffic and binding term from the composed operators
    (``times``)."""
    pp = sh.pp
    t_compute, t_weights, t_kv = times.t_compute, times.t_weights, times.t_kv
    zero = np.zeros_like(sh.tokens)
    colls = ("allreduce", "alltoall", "allgather")  # network and latency terms of those this step ran, else 0
    net, lat = ({c: terms.get(c, zero) for c in colls} for terms in (times.net, times.latency))
    t_ar, t_a2a, t_ag = (net[c] + lat[c] for c in colls)
    t_comm = t_ar + t_a2a + t_ag
    t_lat = times.t_latency - sum(lat.values())  # kernels' latencies; the collectives' are in t_comm
    tpot = times.step
    tps = sh.dp * (pp * sh.b) * sh.pl / tpot
    return dict(
        t_compute_s=t_compute, t_weights_s=t_weights, t_kv_s=t_kv, t_memory_s=t_weights + t_kv, t_alltoall_s=t_a2a,
        t_allreduce_s=t_ar, t_allgather_s=t_ag, t_comm_s=t_comm, weight_layout=sh.wl,
        t_stage_s=(times.step - t_handoff - t_hops - times.t_sched) / pp,
        t_allreduce_net_s=net["allreduce"], t_allgather_net_s=net["allgather"],  # the rest is latency
        t_handoff_s=t_handoff, hops=hops,
        t_latency_s=t_lat, t_sched_s=times.t_sched,
        weight_bytes_read_per_chip=sum(np.asarray(o.bytes, dtype=float) for o in ops if not o.kv),
        t_hop_latency_s=t_hops, tpot_s=tpot, tokens_per_s_per_user=sh.pl / tpot, tokens_per_s=tps,
        tokens_per_s_per_chip=tps / sh.chips,
        usd_per_mtok=usd_per_mtok(sh.chips, hw.usd_per_chip_hour, np.maximum(tps, 1e-300)),
        scaleout_share=out_share, scaleout_bytes_per_chip=so_bytes,
        bound=binding_term(pp * t_compute, pp * t_weights, pp * t_kv, pp * t_comm, t_hops + t_handoff,
                           pp * t_lat + times.t_sched),
    )


def evaluate(mn: ModelNumbers, hw: HwNumbers, *, tp, ep, pp, micro_batch, attention_dp=False, adp_ranks=None,
             chips=None, redundant_experts=0, overlap=None, act_bytes=2.0, hop_latency_s=None, usable_fraction=1.0,
             reserve_bytes=0.0, collective_latency_s=None, efficiency=None, sched_overlap=False,
             adp_imbalance=None, weight_layout="1d") -> LayoutArrays:
    """Evaluate layouts (arrays broadcast together): memory per chip, communication and step time.

    More than twelve parameters: its keywords are a layout's degrees (a ``search.layout_grid`` dict is passed as
    ``**grid``) and the costing options serve, plan and the search set one by one.

    ``micro_batch`` b is sequences per micro-batch per replica; ``pp`` micro-batches are in flight,
    so a replica serves B = P·b sequences (lecture 01:03:37). ``chips`` (default: one replica,
    ``tp·pp``) are billed; replicas ``dp = chips // (tp·pp)``. The step is the step model of
    ``engine/step.py`` on the busiest chip's operators, costed with ``efficiency`` (default: the
    one ``hw`` carries, else the ideal roofline); ``overlap`` "max"/"sum" overrides its composition.
    ``adp_imbalance`` (attention DP) replaces the busiest rank's share of the step's tokens over the mean
    (default :func:`attention_dp_imbalance` of the micro-batch's sequences; a mixed prefill step passes its own).
    ``adp_ranks`` R (attention DP): the attention data-parallel groups of the TP group (default TP: every chip
    its own sequences); each group runs attention tensor-parallel over TP / R chips (:func:`attention_tp`).
    ``weight_layout`` (:data:`WEIGHT_LAYOUTS`; "2d" and "gathered" for dense models without attention DP): "2d"
    replaces the all-reduces by 2D weight-stationary exchanges (``comms.ws2d_exchange_time``, Pope et al. 2022
    §3.2.2); "gathered" splits the batch instead of the weights and all-gathers each layer's weights before running
    it (``comms.allgather_time``, :func:`weight_gather_workspace`; §3.2.3).
    """
    if overlap is not None and overlap not in OVERLAP_MODES:
        raise InputError("overlap", f"unknown mode {overlap!r}", "max (overlapped) or sum (serial)")
    hop = hw.hop_latency_s if hop_latency_s is None else float(hop_latency_s)
    sh = _shape(mn, hw, tp, ep, pp, micro_batch, attention_dp, adp_ranks, chips, redundant_experts, weight_layout)
    mem = _memory(mn, hw, sh, act_bytes, usable_fraction, reserve_bytes)

    eff = _effective(hw, efficiency, collective_latency_s)
    adp_imb = np.where(sh.adp, attention_dp_imbalance(sh.b, sh.R) if adp_imbalance is None
                       else np.asarray(adp_imbalance, dtype=float), 1.0)
    t_attn = np.where(sh.adp, sh.tokens / sh.R * adp_imb, sh.tokens)  # tokens one chip's attention/dense GEMMs see
    coll, out_share, so_bytes = _collective_ops(mn, hw, sh, t_attn, act_bytes)
    ops = _compute_ops(mn, hw, sh, eff, t_attn, adp_imb) + coll
    hops, t_handoff, t_hops = _pipeline(mn, hw, sh, act_bytes, eff.eta_comm, hop)
    times = compose(ops, hw.hbm_bw, eff, scale=sh.pp, fixed={"handoff": t_handoff + t_hops},
                    composition=None if overlap is None else ("overlap" if overlap == "max" else "serial"),
                    sched_overlap=sched_overlap)

    vals = dict(
        tp=sh.tp, ep=sh.ep, pp=sh.pp, dp=sh.dp, attention_dp=sh.adp, attention_dp_size=sh.R, micro_batch=sh.b,
        batch=sh.pp * sh.b, concurrency=sh.dp * (sh.pp * sh.b), chips_billed=sh.chips,
        chips_used=sh.dp * sh.tp * sh.pp, idle_chips=sh.chips - sh.dp * sh.tp * sh.pp, moe_tp=sh.moe_tp,
        experts_per_chip=sh.e_chip, layers_per_stage=sh.L_stage, moe_layers_per_stage=sh.L_moe,
    ) | mem | _time_fields(hw, sh, times, ops, t_handoff, t_hops, hops, out_share, so_bytes)
    shape = np.broadcast_shapes(*(np.shape(v) for v in vals.values()))
    vals["tpot_s"] = np.broadcast_to(vals["tpot_s"], shape)  # the full shape; other fields broadcast on access
    out = LayoutArrays(mn, hw, times.composition, float(act_bytes), vals)
    out.__dict__["times"] = times
    out.__dict__["scale"] = sh.pp
    return out


def explain_layout(res: LayoutArrays, i=0):
    """Derivation of one evaluated layout: c_mem, the stage roofline, communication, TPOT and $/Mtok."""
    r = res.row(i)
    mn, hw = res.model, res.hw
    adp_txt = "" if not r["attention_dp"] else " attention-DP" if r["attention_dp_size"] == r["tp"] else \
        f" attention-DP over {r['attention_dp_size']:g} groups of {r['tp'] / r['attention_dp_size']:g}"
    d = Derivation(f"{mn.name} on {int(r['chips_billed'])} × {hw.name}: TP{int(r['tp'])} EP{int(r['ep'])} "
                   f"PP{int(r['pp'])}{adp_txt}, b = {r['micro_batch']:g}")
    d.add("dp", "floor(chips / (TP·PP))", f"floor({r['chips_billed']:g} / ({r['tp']:g}·{r['pp']:g}))", r["dp"], "",
          "replicas (conventions.md)")
    d.add("B", "P · b", f"{r['pp']:g} · {r['micro_batch']:g}", r["batch"], "",
          "P micro-batches in flight per replica (01:03:37)")
    if mn.is_moe:
        d.add("experts/chip", "ceil((E + redundant) / EP)", f"ceil(… / {r['ep']:g})", r["experts_per_chip"], "",
              "most-loaded chip (00:32)")
    d.add("w_chip", "dense·(L_stage/L)/(TP/R) + L_moe_stage·experts/chip·expert_bytes/(TP/EP)", "",
          r["weight_bytes_per_chip"], "B", "weights ÷ (EP·TP·PP); R attention-DP groups (1 without attention DP) "
          "replicate attention and dense weights")
    d.add("kv_chip", "P·b · kv_seq(L) · (L_stage/L) / KV shards, shards = R · min(TP/R, KV heads)", "",
          r["kv_bytes_per_chip"], "B", "does not fall with P (01:03:37)")
    d.add("c_mem", "w_chip + kv_chip + workspace", f"{fmt(r['weight_bytes_per_chip'], 'B')} + "
          f"{fmt(r['kv_bytes_per_chip'], 'B')} + {fmt(r['workspace_bytes_per_chip'], 'B')}", r["mem_per_chip"], "B",
          ("fits" if r["fits"] else "does NOT fit") + f" in {fmt(r['mem_capacity'], 'B')}")
    d.add("t_compute", "FLOPs_stage / (TP · FLOP/s)", "", r["t_compute_s"], "s")
    d.add("t_weights", "weight bytes read per chip / HBM BW", "", r["t_weights_s"], "s",
          "expected experts hit at this micro-batch")
    d.add("t_kv", "b · kv_read(L) · (L_stage/L) / shards / HBM BW", "", r["t_kv_s"], "s")
    if mn.is_moe:
        if mn.prefill:
            d.add("t_a2a", "L_moe_stage · max(T·fanout·(1 − 1/G)·d·bytes·2/BW_up, T·D_remote·d·bytes·2/BW_out), "
                  "D_remote = (D − 1)(1 − (1 − 1/D)^k)", "", r["t_alltoall_s"], "s",
                  "a prompt pass: one copy per remote domain over the NIC, forwarded inside it (DeepEP normal)")
        else:
            d.add("t_a2a", "L_moe_stage · max(bytes·in/BW_up, bytes·out/BW_out), bytes = (b/TP)·fanout·d·bytes·2, "
                  "fanout ≈ k", "", r["t_alltoall_s"], "s", f"scale-out share {r['scaleout_share']:.3g}")
    def net_lat(op):  # a collective's network and latency terms in this row (their sum is its reported time)
        net = float(r[f"t_{op}_net_s"])
        return net, float(r[f"t_{op}_s"]) - net

    if r["weight_layout"] == "2d":
        x, yz = (float(v) for v in ws2d_split(r["tp"], mn.d_model, mn.ffn_width))
        net, lat = net_lat("allreduce")
        d.add("t_allreduce", "n_ex · [2·(YZ−1)/YZ · T·E/X + 2·(X−1)/X · T·F/YZ] · bytes / (BW · η_comm) + "
              "4 · n_ex · τ_c, X | TP moving least (√(TP·E/F) where it divides TP), YZ = TP/X",
              f"X = {x:.3g}, YZ = {yz:.3g}: {fmt(net, 's')} + {fmt(lat, 's')}",
              r["t_allreduce_s"], "s", "2D weight-stationary (Pope et al. 2022 §3.2.2): weights split over d_model "
              "(X) and d_ff (YZ); each of the n_ex all-reduces a 1D layout runs becomes all-gather, reduce-scatter, "
              "all-gather, reduce-scatter; ≈ 8·T·E·bytes/(√TP·BW) for F = 4E", expr=f"{net!r} + {lat!r}")
    else:
        d.add("t_allreduce", "2 · L_stage · allreduce(b·d·bytes, TP) (1 · L_stage with a parallel block); attention "
              "DP: (L_stage + L_dense) · allreduce((b/R)·d·bytes, TP/R)", "", r["t_allreduce_s"], "s",
              "0 with attention DP on every chip (R = TP); TP > S: reduce-scatter on NVLink, 1/S of the bytes over "
              "the NIC, all-gather")
    if r["weight_layout"] == "gathered":
        net, lat = net_lat("allgather")
        d.add("t_allgather", "(TP − 1)/TP · W_stage / (BW · η_comm) + 2 · L_stage · τ_c",
              f"{fmt(net, 's')} + {fmt(lat, 's')}", r["t_allgather_s"], "s",
              "weight-gathered: each chip runs b/TP sequences on every weight, gathered layer by layer "
              "(Pope et al. 2022 §3.2.3); no activation all-reduce", expr=f"{net!r} + {lat!r}")
    d.add("t_stage", "max(Σ compute, Σ memory, Σ network) + latencies" if res.overlap == "overlap"
          else "Σ_ops [latency + max(compute, memory, network)]", "", r["t_stage_s"], "s",
          f"composition = {res.overlap} (engine/step.py)")
    d.add("TPOT", "P · t_stage + hand-offs + hops · hop latency + scheduler",
          f"{r['pp']:g} · {fmt(r['t_stage_s'], 's')} + {fmt(r['t_handoff_s'], 's')} + {fmt(r['t_hop_latency_s'], 's')}"
          f" + {fmt(r['t_sched_s'], 's')}", r["tpot_s"], "s", "hop latency: a few ms, ±10× (01:12)")
    d.add("tok/s/user", "1 / TPOT", "", r["tokens_per_s_per_user"], "tok/s")
    d.add("tok/s", "dp · B / TPOT", "", r["tokens_per_s"], "tok/s")
    d.add("$/Mtok", "chips · $/chip-h / 3600 / tok/s · 1e6",
          f"{r['chips_billed']:g} · {hw.usd_per_chip_hour:g} / 3600 / {r['tokens_per_s']:.4g} · 1e6", r["usd_per_mtok"], "$")
    d.conclusion = f"binding term: {r['bound']}"
    return d


__all__ = [
    "LayoutArrays", "evaluate", "explain_layout", "experts_per_chip", "layers_on_stage", "pipeline_hops",
    "binding_term", "ep_rank_load", "attention_dp_imbalance", "attention_ranks", "attention_tp",
    "tp_allreduces_per_layer", "weight_gather_workspace", "c_mem", "check_weight_layout", "COLLECTIVE_LATENCY_S",
    "OVERLAP_MODES",
]
