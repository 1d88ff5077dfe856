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

Two layers of API:

* :func:`evaluate` — the vectorized core on plain numbers (:class:`ModelNumbers`,
  :class:`HwNumbers`) and numpy arrays of degrees: every layout of a search at once.
* :class:`Deployment` — one validated layout of a real model on a real system, with
  derived quantities, memory (c_mem), communication and step time, each explainable.

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

from ..results import ResultMixin

from ..errors import InputError
from ..specs.records import WEIGHT_LAYOUTS
from .comms import (alltoall_split_time, moe_alltoall_bytes, moe_fanout, scaleout_share,  # noqa: F401 (re-exported)
                    scaleup_share, ws2d_split)
from .comms import divisors as _divisors
from .roofline import usd_per_mtok

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


def expert_imbalance(n_slots, ep):
    """Most-loaded over mean experts per chip: ceil(slots/EP) / (slots/EP)  (1 when EP divides)."""
    n = np.asarray(n_slots, dtype=float)
    ep = np.asarray(ep, dtype=float)
    return np.where(n > 0, experts_per_chip(n, ep) / np.maximum(n / ep, 1e-300), 1.0)


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
    from dataclasses import replace as _replace

    from .efficiency import load_efficiency

    eff = load_efficiency(efficiency if efficiency is not None else getattr(hw, "efficiency", None))
    if collective_latency_s is not None:
        return _replace(eff, collective_latency_s=float(collective_latency_s))
    if eff.ideal:
        return _replace(eff, collective_latency_s=COLLECTIVE_LATENCY_S)
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


# --------------------------------------------------------------------------------------
# Plain-number views of a model and a system
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelNumbers:
    """The numbers of a model that a layout needs, at one context length (plain SI floats)."""

    name: str
    n_layers: int
    d_model: int
    n_experts: int = 0
    experts_per_token: int = 0
    n_moe_layers: int = 0
    kv_heads: int = 1  # KV shards under attention TP (1 for MLA latents / MQA: replicated)
    n_heads: int = 0  # attention (query) heads: attention TP must divide them (0: unknown, not checked)
    dense_weight_bytes: float = 0.0  # read every step: attention, dense FFN, shared experts, head
    expert_weight_bytes: float = 0.0  # one routed expert, one layer
    other_weight_bytes: float = 0.0  # stored, not streamed (input embedding table)
    kv_bytes_per_seq: float = 0.0  # KV one sequence holds at `context`
    kv_read_bytes_per_seq: float = 0.0  # KV one decode step reads for one sequence
    flops_per_seq: float = 0.0  # FLOPs one step spends on one sequence (pass_len tokens)
    expert_flops_per_seq: float = 0.0  # part of flops_per_seq in routed experts
    context: float = 0.0
    pass_len: int = 1
    expert_width: int = 0  # d_ff of one routed expert (0: unknown)
    hit_fraction: object = None  # callable tokens -> expected share of experts hit, or None (formula)
    # per-operator view (engine/step.py); empty = one "dense" operator holding every dense weight
    components: tuple = ()  # ((op name, weight bytes all layers, params all layers), …) of the dense weights
    attn_flops_per_seq: float = 0.0  # attention FLOPs one sequence's pass spends (part of flops_per_seq)
    expert_params: float = 0.0  # one routed expert of one layer (params)
    head_tokens_per_seq: float = -1.0  # tokens per sequence through the LM head (-1: pass_len)
    n_dense_ffn_layers: int = 0
    mla: bool = False  # multi-head latent attention (more, smaller kernels per layer)
    dsa: bool = False  # DeepSeek sparse attention: the lightning indexer's kernels in every layer
    prefill: bool = False  # a prompt pass: MoE dispatch deduplicated by domain (DeepEP normal kernels)
    parallel_block: bool = False  # attention and FFN read the same input and sum into it: one TP all-reduce a layer
    d_ff: int = 0  # dense FFN width (0: unknown; :attr:`ffn_width` then takes 4 · d_model)

    @property
    def tp_heads(self) -> int:
        """The heads attention TP must divide: the query heads, or 0 (not checked) for multi-query attention, whose
        single KV head lets attention shard over the batch instead (Pope et al. 2022 §3.3: PaLM's 48 heads on 64
        chips); MLA's latent is one KV shard too, but its heads are split by TP in every stack."""
        return self.n_heads if (self.kv_heads > 1 or self.mla) else 0

    @property
    def ffn_width(self) -> int:
        """F of a 2D weight-stationary split: the dense FFN width, 4 · d_model where the config does not give it."""
        return self.d_ff or 4 * self.d_model

    @property
    def weight_bytes(self) -> float:
        return self.dense_weight_bytes + self.other_weight_bytes + self.n_moe_layers * self.n_experts * self.expert_weight_bytes

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0 and self.n_moe_layers > 0

    def expert_hit_share(self, tokens):
        """Expected share of one layer's experts hit by ``tokens`` tokens (engine's expected_experts_hit / E)."""
        if not self.is_moe:
            return np.zeros_like(np.asarray(tokens, dtype=float))
        if self.hit_fraction is not None:
            return self.hit_fraction(tokens)
        return _expected_experts_hit(self.n_experts, self.experts_per_token, tokens) / self.n_experts

    @classmethod
    def from_model(cls, model, context, *, pass_len=1, weights_dtype=None, kv_dtype=None,
                   prefill=False) -> "ModelNumbers":
        """Read a ``specs.models.ModelSpec`` at one context (uses the roofline engine's building blocks).

        ``prefill``: the pass is a prompt chunk, its attention in the prefill form (MLA un-absorbed,
        ``ModelSpec.prefill_attention_flops_per_attended_token``)."""
        from ..units import dtype_bytes
        from .roofline import attention_flops, step_flops

        ctx = float(context)
        n_exp = int(getattr(model, "n_experts", 0) or 0)
        n_moe = int(getattr(model, "n_moe_layers", 0) or 0)
        k = int(getattr(model, "experts_per_token", 0) or 0)
        eb = float(model.expert_weight_bytes(weights_dtype)) if n_exp and n_moe else 0.0
        dense = float(model.dense_weight_bytes(weights_dtype))
        total = float(model.weight_bytes(weights_dtype))
        other = max(0.0, total - dense - n_moe * n_exp * eb)
        attn = float(np.asarray(attention_flops(model, 1, ctx, pass_len, prefill=prefill)))
        flops = float(np.asarray(step_flops(model, 1, ctx, pass_len, prefill=prefill)))
        expert_params = float(model.expert_weight_bytes("bf16")) / dtype_bytes("bf16") if n_exp and n_moe else 0.0
        expert_flops = 2.0 * k * n_moe * expert_params * pass_len
        from ..units import dtype_bytes as _db

        pb = model.param_breakdown

        def wb(c):
            return float(pb[c] * model._dtype_of(c, weights_dtype))

        head_p = pb["lm_head"] + (pb["embedding"] if model.tie_embeddings else 0.0)
        head_b = wb("lm_head") + (wb("embedding") if model.tie_embeddings else 0.0)
        comps = (("qkv_o", wb("attention") + wb("norms"), pb["attention"]),
                 ("dense_ffn", wb("dense_ffn"), pb["dense_ffn"]),
                 ("router", wb("router"), pb["router"]),
                 ("shared_experts", wb("shared_experts"), pb["shared_experts"]),
                 ("lm_head", head_b, head_p))
        comps = tuple(c for c in comps if c[1] > 0 or c[2] > 0)
        del _db
        return cls(
            name=str(model.name),
            n_layers=int(model.n_layers),
            d_model=int(model.d_model),
            n_experts=n_exp,
            experts_per_token=k,
            n_moe_layers=n_moe,
            kv_heads=_kv_shards(model),
            n_heads=int(getattr(model, "n_heads", 0) or 0),
            dense_weight_bytes=dense,
            expert_weight_bytes=eb,
            other_weight_bytes=other,
            kv_bytes_per_seq=float(model.kv_cache_bytes(ctx, kv_dtype)),
            kv_read_bytes_per_seq=_kv_step_bytes_per_seq(model, ctx, pass_len, kv_dtype),
            flops_per_seq=flops,
            expert_flops_per_seq=min(expert_flops, flops),
            context=ctx,
            pass_len=int(pass_len),
            expert_width=int(getattr(model, "moe_d_ff", 0) or 0),
            components=comps,
            attn_flops_per_seq=attn,
            expert_params=expert_params,
            n_dense_ffn_layers=int(model.n_dense_layers),
            mla=str(getattr(model, "attention", "")) == "mla",
            dsa=bool(getattr(model, "sparse_attention", False)),
            prefill=bool(prefill),
            parallel_block=bool(getattr(model, "parallel_block", False)),
            d_ff=int(getattr(model, "d_ff", 0) or 0),
        )


def load_model_any(model):
    """A ModelSpec (or ModelNumbers) as given, or a model name / config path loaded from the catalog."""
    if isinstance(model, str):
        from ..specs.models import load_model

        return load_model(model)
    return model


def _kv_shards(model) -> int:
    """How many ways attention TP can split one sequence's KV: KV heads (1 for MLA latents / MQA)."""
    for attr in ("kv_lora_rank", "mla_kv_rank"):
        if getattr(model, attr, 0):
            return 1
    if str(getattr(model, "attention_type", "")).lower() in ("mla", "dsa"):
        return 1
    return max(1, int(getattr(model, "n_kv_heads", 1) or 1))


def _expected_experts_hit(n_experts, k, tokens):
    from .roofline import expected_experts_hit

    return np.asarray(expected_experts_hit(n_experts, k, np.asarray(tokens, dtype=float)), dtype=float)


def _kv_step_bytes_per_seq(model, context, pass_len, kv_dtype) -> float:
    from .roofline import kv_step_bytes

    return float(np.asarray(kv_step_bytes(model, 1, context, pass_len, kv_dtype)))


@dataclass(frozen=True)
class HwNumbers:
    """The numbers of a system that a layout needs (per chip; bandwidths per direction)."""

    name: str
    scaleup_size: int
    hbm_bytes: float
    hbm_bw: float
    peak_flops: float
    scaleup_bw: float
    scaleout_bw: float
    usd_per_chip_hour: float
    hop_latency_s: float = 2e-3
    max_chips: int | None = None
    attn_peak_flops: float = 0.0  # FLOP/s of attention (the KV dtype's); 0 = peak_flops
    efficiency: object = None  # engine.efficiency.Efficiency the step is costed with (None = ideal)

    @classmethod
    def from_system(cls, system, dtype="bf16", efficiency=None, kv_dtype=None) -> "HwNumbers":
        """From a ``specs.hardware.System`` at peak; the efficiency preset is applied by the step model."""
        from .efficiency import load_efficiency

        eff = load_efficiency(efficiency)
        c = system.chip
        return cls(
            name=system.name,
            scaleup_size=int(system.scaleup_size),
            hbm_bytes=float(c.hbm_bytes),
            hbm_bw=float(c.hbm_bw),
            peak_flops=float(c.peak_flops(dtype)),
            scaleup_bw=float(c.scaleup_bw),
            scaleout_bw=float(c.scaleout_bw),
            usd_per_chip_hour=float(c.usd_per_hour),
            hop_latency_s=float(getattr(system, "hop_latency_s", 2e-3)),
            max_chips=getattr(system, "max_chips", None),
            attn_peak_flops=float(c.peak_flops(kv_dtype or "bf16")),
            efficiency=eff,
        )


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


def evaluate(mn: ModelNumbers, hw: HwNumbers, *, tp, ep, pp, micro_batch, attention_dp=False, adp_ranks=None,
             chips=None, redundant_experts=0, overlap=None, act_bytes=2.0, hop_latency_s=None, usable_fraction=1.0,
             reserve_bytes=0.0, collective_latency_s=None, efficiency=None, sched_overlap=False,
             adp_imbalance=None, weight_layout="1d") -> LayoutArrays:
    """Evaluate layouts (arrays broadcast together): memory per chip, communication and step time.

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
    f = lambda x: np.asarray(x, dtype=float)  # noqa: E731
    tp, ep, pp, b = f(tp), f(ep), f(pp), f(micro_batch)
    adp = np.asarray(attention_dp, dtype=bool)
    R = attention_ranks(tp, adp, adp_ranks)  # attention-DP groups of the TP group
    ta = attention_tp(tp, R)  # chips one group's attention (and dense FFN) is split over
    S = float(hw.scaleup_size)
    chips = tp * pp if chips is None else f(chips)
    dp = np.floor(chips / (tp * pp))
    chips_used = dp * tp * pp
    moe_tp = tp / ep
    pl = np.asarray(mn.pass_len, dtype=float)  # tokens per sequence this step (may be an array)
    hop = hw.hop_latency_s if hop_latency_s is None else float(hop_latency_s)
    wl = check_weight_layout(weight_layout, mn.name, mn.is_moe)
    wg, w2 = wl == "gathered", wl == "2d"
    if np.any(w2 & adp):
        raise InputError("weight_layout", "2d with attention DP", "2d without attention DP, or 1d")

    # --- layers and experts on the most-loaded chip
    L_stage = layers_on_stage(mn.n_layers, pp)
    s_frac = L_stage / mn.n_layers
    slots = mn.n_experts + f(redundant_experts)
    if mn.is_moe:
        L_moe = layers_on_stage(mn.n_moe_layers, pp)
        e_chip = experts_per_chip(slots, ep)
    else:
        L_moe = np.zeros_like(pp)
        e_chip = np.zeros_like(ep)

    # --- memory per chip (c_mem, 01:03:37)
    dense_shard = ta  # attention DP replicates attention/dense weights over the groups, split TP/R ways in each
    w_dense = (mn.dense_weight_bytes + mn.other_weight_bytes) * s_frac / dense_shard
    w_exp = L_moe * e_chip * mn.expert_weight_bytes / moe_tp
    w_chip = w_dense + w_exp
    kv_shard = R * np.minimum(ta, mn.kv_heads)  # sequences over the R groups, KV heads over each group's chips
    B = pp * b  # sequences in flight per replica
    kv_chip = B * mn.kv_bytes_per_seq * s_frac / kv_shard
    tok_chip = b * pl / R  # tokens whose activations a chip holds
    ws_per_tok = (4.0 + 2.0 * mn.experts_per_token) * mn.d_model * act_bytes
    w_stage = (mn.dense_weight_bytes + mn.other_weight_bytes) * s_frac  # one stage's weights, whole
    ws_chip = tok_chip * ws_per_tok + reserve_bytes + np.where(wg, weight_gather_workspace(w_stage, L_stage), 0.0)
    mem = w_chip + kv_chip + ws_chip
    cap = hw.hbm_bytes * usable_fraction
    headroom = cap - mem
    per_b = pp * mn.kv_bytes_per_seq * s_frac / kv_shard + pl / R * ws_per_tok
    max_b = np.maximum(0.0, np.floor((cap - w_chip - reserve_bytes) / np.maximum(per_b, 1e-300)))

    # --- one stage step on the most-loaded chip: per-layer operators (engine/step.py)
    from .comms import (WS2D_COLLECTIVES, allgather_time, alltoall_dedup_scaleout_bytes, alltoall_dedup_time,
                        hierarchical_allreduce_scaleout_bytes, hierarchical_allreduce_time, p2p_time,
                        ws2d_exchange_time)
    from .step import (ELEMENTWISE_KERNELS_PER_LAYER, MLA_EAGER_KERNEL_SCALE, Op, attention_kernels, compose,
                       op_kernels)

    eff = _effective(hw, efficiency, collective_latency_s)
    comp = None if overlap is None else ("overlap" if overlap == "max" else "serial")
    tokens = b * pl  # tokens of one micro-batch through one stage
    ashard = ta  # attention DP: each group runs its own sequences on weights split TP/R ways
    adp_imb = np.where(adp, attention_dp_imbalance(b, R) if adp_imbalance is None else f(adp_imbalance), 1.0)
    t_attn = np.where(adp, tokens / R * adp_imb, tokens)  # tokens one chip's attention/dense GEMMs see
    ht = np.asarray(mn.head_tokens_per_seq, dtype=float)
    head_tok = np.where(ht < 0, pl, ht)
    n_dense_ffn = mn.n_dense_ffn_layers or max(mn.n_layers - mn.n_moe_layers, 0)
    L_dense = np.maximum(L_stage - L_moe, 0.0) if mn.is_moe else L_stage
    frac = {"qkv_o": s_frac, "dense_ffn": L_dense / max(n_dense_ffn, 1),
            "router": L_moe / max(mn.n_moe_layers, 1), "shared_experts": L_moe / max(mn.n_moe_layers, 1),
            "lm_head": 1.0 / pp, "dense": s_frac}
    layers = {"qkv_o": L_stage, "dense_ffn": L_dense, "router": L_moe, "shared_experts": L_moe, "lm_head": 1.0 / pp,
              "dense": L_stage}
    comps = mn.components
    if not comps:  # a hand-built ModelNumbers: one operator holds every dense weight
        dense_params = np.maximum(mn.flops_per_seq - mn.expert_flops_per_seq - mn.attn_flops_per_seq, 0.0) / (2.0 * pl)
        comps = (("dense", mn.dense_weight_bytes, dense_params),)
    mla = eff.mla_kernel_scale if mn.mla else 1.0  # an MLA block's kernels relative to the CUDA stacks' count
    eager = MLA_EAGER_KERNEL_SCALE if mn.mla else None  # ... and those its host dispatches in an eager step
    ops = []
    for name, nbytes, params in comps:
        tok = np.where(adp, b * head_tok / R * adp_imb, b * head_tok) if name == "lm_head" else t_attn
        n_k = op_kernels("qkv_o_mla" if name == "qkv_o" and mn.mla else name, nbytes, params, mla) * layers[name]
        ops.append(Op(name, flops=2.0 * tok * params * frac[name] / ashard,
                      bytes=np.where(wg, nbytes * frac[name], nbytes * frac[name] / ashard),
                      peak=hw.peak_flops, m=np.where(wg, tok / ashard, tok), kernels=n_k,
                      eager_kernels=n_k * eager if eager is not None and name == "qkv_o" else None))
    head_shard = tp  # attention: heads split TP/R ways within a group, sequences R ways over the groups
    n_k = attention_kernels(mn.dsa, mla) * L_stage
    ops.append(Op("attention", flops=b * mn.attn_flops_per_seq * s_frac / head_shard * adp_imb,
                  bytes=b * mn.kv_read_bytes_per_seq * s_frac / kv_shard * adp_imb,
                  peak=hw.attn_peak_flops or hw.peak_flops, kernels=n_k, kv=True,
                  eager_kernels=None if eager is None else n_k * eager))
    if mn.is_moe:
        k = mn.experts_per_token
        busiest = ep_rank_load(tokens * k, ep, mn.n_experts, f(redundant_experts))
        t_routed = tokens * k * (e_chip / slots) * busiest  # token-expert pairs on the busiest chip, per layer
        hit = mn.expert_hit_share(tokens)
        active = np.maximum(e_chip * hit, 1e-9)  # experts with work on that chip
        p_exp = mn.expert_params or mn.expert_flops_per_seq / np.maximum(2.0 * k * mn.n_moe_layers * pl, 1e-300)
        ops.append(Op("experts", flops=2.0 * t_routed * p_exp * L_moe / moe_tp,
                      bytes=L_moe * e_chip * hit * mn.expert_weight_bytes / moe_tp, peak=hw.peak_flops,
                      m=np.maximum(t_routed / active, 1e-9),
                      kernels=op_kernels("experts", mn.expert_weight_bytes, p_exp) * L_moe))
    ops.append(Op("elementwise", kernels=ELEMENTWISE_KERNELS_PER_LAYER * L_stage))

    # --- collectives per stage step: TP all-reduces after attention and the FFN; under attention DP only the
    # attention (and dense FFN) all-reduces inside a group of TP/R > 1 chips remain, the MoE layers dispatch
    ar_group = np.where(adp, ta, tp)
    ar_bytes = np.where(adp, t_attn, tokens) * mn.d_model * act_bytes
    n_ar = np.where(wg | (ar_group <= 1), 0.0, np.where(adp, L_stage + L_dense,
                                                        tp_allreduces_per_layer(mn.parallel_block) * L_stage))
    t_ar = hierarchical_allreduce_time(ar_bytes, ar_group, S, hw.scaleup_bw, hw.scaleout_bw)
    tp_bw = np.where(tp <= S, hw.scaleup_bw, hw.scaleout_bw)  # a 2D exchange or weight gather over the TP chips
    if np.any(w2):  # 2D weight-stationary: each all-reduce becomes a 4-collective exchange along both split axes
        t_ar = np.where(w2, ws2d_exchange_time(tokens, tp, mn.d_model, mn.ffn_width, act_bytes, tp_bw),
                        t_ar)
    n_coll = np.where(w2, WS2D_COLLECTIVES * n_ar, n_ar)
    ops.append(Op("allreduce", net_s=n_ar * t_ar, collectives=n_coll,
                  scaleout_collectives=np.where(ar_group > S, n_coll, 0.0)))
    if np.any(wg):  # weight-gathered: each layer's weights (attention block, FFN) gathered from the TP chips
        n_ag = np.where(wg & (tp > 1), 2.0 * L_stage, 0.0)
        t_ag = allgather_time(w_stage, tp, tp_bw)
        ops.append(Op("allgather", net_s=np.where(wg, t_ag, 0.0), collectives=n_ag,
                      scaleout_collectives=np.where(tp > S, n_ag, 0.0)))
    if mn.is_moe:
        fan = moe_fanout(mn.experts_per_token, ep, moe_tp)
        a2a_tok = t_attn / ta  # each chip of a group dispatches its share of the group's tokens
        a2a_bytes = moe_alltoall_bytes(a2a_tok, fan, mn.d_model, act_bytes)  # per chip, per MoE layer
        n_a2a = np.where(adp & (tp > 1), 2.0 * L_moe, 0.0)
        if mn.prefill:  # prompt passes dispatch once per remote domain, then forward inside it (DeepEP normal)
            t_a2a_layer = alltoall_dedup_time(a2a_tok, mn.experts_per_token, fan, mn.d_model, act_bytes, tp, S,
                                              hw.scaleup_bw, hw.scaleout_bw)
            so_layer = alltoall_dedup_scaleout_bytes(a2a_tok, mn.experts_per_token, mn.d_model, act_bytes, tp, S)
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

    # --- pipeline: hand-offs and hop latency (01:12)
    hops = pipeline_hops(pp, tp, S)
    handoff_bytes = tokens * mn.d_model * act_bytes / tp  # each chip sends its share of the activations
    n_inner = np.where(pp > 1, pp - hops, 0.0)
    t_handoff = hops * p2p_time(handoff_bytes, hw.scaleout_bw) + n_inner * p2p_time(handoff_bytes, hw.scaleup_bw)
    t_handoff = t_handoff / eff.eta_comm
    t_hops = hops * hop

    times = compose(ops, hw.hbm_bw, eff, scale=pp, fixed={"handoff": t_handoff + t_hops}, composition=comp,
                    sched_overlap=sched_overlap)
    stage = (times.step - t_handoff - t_hops - times.t_sched) / pp
    tpot = times.step
    t_compute, t_weights, t_kv = times.t_compute, times.t_weights, times.t_kv
    t_mem = t_weights + t_kv
    zero = np.zeros_like(tokens)
    colls = ("allreduce", "alltoall", "allgather")  # network and latency terms of those this step ran, else 0
    net, lat = ({c: terms.get(c, zero) for c in colls} for terms in (times.net, times.latency))
    t_ar, t_a2a, t_ag = (net[c] + lat[c] for c in colls)
    t_comm = t_ar + t_a2a + t_ag
    ar_net, ag_net = net["allreduce"], net["allgather"]
    t_lat = times.t_latency - sum(lat.values())  # kernels' latencies; the collectives' are in t_comm
    t_stage = stage
    w_read = sum(np.asarray(o.bytes, dtype=float) for o in ops if not o.kv)

    tps_user = pl / tpot
    tps = dp * B * pl / tpot
    usd = usd_per_mtok(chips, hw.usd_per_chip_hour, np.maximum(tps, 1e-300))

    bound = binding_term(pp * t_compute, pp * t_weights, pp * t_kv, pp * t_comm, t_hops + t_handoff,
                         pp * t_lat + times.t_sched)

    vals = dict(
        tp=tp, ep=ep, pp=pp, dp=dp, attention_dp=adp, attention_dp_size=R, micro_batch=b, batch=B,
        concurrency=dp * B, chips_billed=chips, chips_used=chips_used, idle_chips=chips - chips_used, moe_tp=moe_tp,
        experts_per_chip=e_chip, layers_per_stage=L_stage, moe_layers_per_stage=L_moe,
        weight_bytes_per_chip=w_chip, kv_bytes_per_chip=kv_chip, workspace_bytes_per_chip=ws_chip,
        mem_per_chip=mem, mem_capacity=np.asarray(cap), headroom_bytes=headroom, fits=(headroom >= 0) & (dp >= 1),
        max_micro_batch=max_b, max_concurrency=dp * pp * max_b,
        t_compute_s=t_compute, t_weights_s=t_weights, t_kv_s=t_kv, t_memory_s=t_mem, t_alltoall_s=t_a2a,
        t_allreduce_s=t_ar, t_allgather_s=t_ag, t_comm_s=t_comm, weight_layout=wl, t_stage_s=t_stage,
        t_allreduce_net_s=ar_net, t_allgather_net_s=ag_net,  # the network terms of the two (the rest is latency)
        t_handoff_s=t_handoff, hops=hops,
        t_latency_s=t_lat, t_sched_s=times.t_sched, weight_bytes_read_per_chip=w_read,
        t_hop_latency_s=t_hops, tpot_s=tpot, tokens_per_s_per_user=tps_user, tokens_per_s=tps,
        tokens_per_s_per_chip=tps / chips, usd_per_mtok=usd, scaleout_share=out_share,
        scaleout_bytes_per_chip=so_bytes, bound=bound,
    )
    shape = np.broadcast_shapes(*(np.shape(v) for v in vals.values()))
    vals["tpot_s"] = np.broadcast_to(vals["tpot_s"], shape)  # the full shape; other fields broadcast on access
    out = LayoutArrays(mn, hw, times.composition, float(act_bytes), vals)
    out.__dict__["times"] = times
    out.__dict__["scale"] = pp
    return out


def explain_layout(res: LayoutArrays, i=0):
    """Derivation of one evaluated layout: c_mem, the stage roofline, communication, TPOT and $/Mtok."""
    from ..explain import Derivation, fmt

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


# --------------------------------------------------------------------------------------
# Validation and the lecture's ways out
# --------------------------------------------------------------------------------------


def ep_way_out(n_slots: int, ep: int) -> str:
    """The lecture's ways out when experts do not divide over EP chips (00:32: 256 experts on 72 GPUs)."""
    n_slots, ep = int(n_slots), int(ep)
    fit = max(d for d in _divisors(n_slots) if d <= ep)
    r = -(-n_slots // ep) * ep - n_slots
    return (f"use ep={fit} ({fit} of the {ep} GPUs, {n_slots // fit} experts each), "
            f"or add {r} redundant experts ({n_slots + r} = {(n_slots + r) // ep} × {ep}), "
            f"or allow uneven placement (the most-loaded GPU holds {-(-n_slots // ep)})")


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


def check_attention_dp_size(size, tp) -> int:
    """The attention-DP group count a user gave, validated: a positive divisor of TP (0 = TP, the default)."""
    if size is None:
        return 0
    accepted = "a divisor of tp: " + ", ".join(str(d) for d in _divisors(int(tp)))
    if isinstance(size, bool) or not isinstance(size, (int, float, np.integer, np.floating)) or int(size) != size \
            or size < 1:
        raise InputError("attention_dp_size", f"{size!r} is not a positive integer", accepted)
    size = int(size)
    if tp % size:
        raise InputError("attention_dp_size", f"{size} attention-DP groups do not divide TP {tp}", accepted)
    return 0 if size == tp else size


def with_attention_groups(tp, ep, pp, adp, heads: int = 0):
    """Layout rows with attention DP repeated once per group count R dividing TP, 2 ≤ R ≤ TP (SGLang ``--tp T --dp R
    --enable-dp-attention``); rows without attention DP keep R = 1. Returns (tp, ep, pp, adp, R). With ``heads``
    (the model's attention heads) a group's TP/R chips must divide them (:func:`attention_tp_ok`)."""
    tp, ep, pp, adp = (np.asarray(x) for x in (tp, ep, pp, adp))
    reps = [[d for d in _divisors(int(t)) if d > 1 and attention_tp_ok(int(t) // d, heads)] if a else [1]
            for t, a in zip(tp, adp)]
    idx = np.repeat(np.arange(len(tp)), [len(r) for r in reps])
    ranks = np.array([r for rs in reps for r in rs], dtype=float)
    return tp[idx], ep[idx], pp[idx], adp[idx], ranks


def attention_tp_ok(tp: int, heads: int, kv_heads: int = 1) -> bool:
    """Whether attention splits over ``tp`` chips: TP divides the query heads (every serving stack requires it:
    vLLM, SGLang, TensorRT-LLM), and the KV heads split evenly or are replicated (KV | TP or TP | KV). ``heads``
    0 = unknown (not checked)."""
    if tp <= 1 or heads <= 0:
        return True
    return heads % tp == 0 and (kv_heads <= 1 or kv_heads % tp == 0 or tp % kv_heads == 0)


def check_attention_tp(mn, tp: int, gpus: int) -> None:
    """An explicit attention TP the model's heads cannot split over is a one-line error naming the TPs that can
    (:func:`attention_tp_ok`)."""
    if attention_tp_ok(int(tp), mn.tp_heads, mn.kv_heads):
        return
    ways = [str(d) for d in range(1, int(gpus) + 1) if attention_tp_ok(d, mn.tp_heads, mn.kv_heads)]
    kv = f" and {mn.kv_heads} KV heads" if mn.kv_heads > 1 else ""
    raise InputError("tp", f"tp={tp} does not split {mn.name}'s {mn.n_heads} attention heads{kv}",
                     f"a TP that does ({', '.join(ways)}), or --attention-dp")


def attention_dp_label(size, tp) -> str:
    """``attnDP`` (every chip its own sequences) or ``attnDP{R}`` (R groups of TP/R chips)."""
    return "attnDP" if not size or size == tp else f"attnDP{int(size)}"


@dataclass(frozen=True)
class Deployment:
    """One validated layout: ``chips`` chips of ``system`` cut TP × EP × PP, replicated ``dp`` times.

    Build with :meth:`Deployment.build` (validates); evaluate with :meth:`evaluate`.
    """

    system: object  # specs.hardware.System
    chips: int
    tp: int = 1
    ep: int = 1
    pp: int = 1
    attention_dp: bool = False
    redundant_experts: int = 0
    uneven_experts: bool = False
    allow_idle: bool = False
    attention_dp_size: int = 0  # attention-DP groups R of the TP group (0: TP, every chip its own sequences)

    # ---- construction and validation
    @classmethod
    def build(cls, system, chips=None, *, tp=None, ep=1, pp=1, attention_dp=False, redundant_experts=0,
              uneven_experts=False, allow_idle=False, model=None, attention_dp_size=None) -> "Deployment":
        """Validate and build. ``chips`` defaults to one scale-up domain; ``tp`` to chips / pp.

        ``attention_dp_size`` R (implies ``attention_dp``): attention runs data-parallel over R groups of TP/R
        chips (SGLang's ``--tp T --dp R --enable-dp-attention``); it must divide TP. R = TP (the default; None or
        0) is every chip its own sequences.
        """
        from ..specs.hardware import load_hardware

        system = load_hardware(system)
        S = int(system.scaleup_size)
        chips = S if chips is None else chips
        for name, v in (("chips", chips), ("ep", ep), ("pp", pp), ("redundant_experts", redundant_experts)):
            if v is None:
                continue
            if int(v) != v or v < (0 if name == "redundant_experts" else 1):
                raise InputError(name, f"{v!r} is not a {'non-negative' if name == 'redundant_experts' else 'positive'} "
                                 "integer", "a whole number of GPUs" if name != "redundant_experts" else "0 or more")
        chips, ep, pp, redundant_experts = int(chips), int(ep), int(pp), int(redundant_experts)
        if tp is None:
            if chips % pp:
                raise InputError("pp", f"{pp} stages do not divide {chips} chips", f"a divisor of {chips}")
            tp = chips // pp
        if int(tp) != tp or tp < 1:
            raise InputError("tp", f"{tp!r} is not a positive integer", "a whole number of GPUs")
        tp = int(tp)
        if system.max_chips is not None and chips > system.max_chips:
            raise InputError("chips", f"{chips} exceeds the {system.max_chips} chips of one {system.name}",
                             f"at most {system.max_chips}")
        if tp * pp > chips:
            raise InputError("chips", f"TP·PP = {tp}·{pp} = {tp * pp} needs more than the {chips} chips",
                             f"chips ≥ {tp * pp}, or smaller tp/pp")
        if chips % (tp * pp) and not allow_idle:
            used = chips // (tp * pp) * tp * pp
            raise InputError("chips", f"{chips} chips is not a multiple of TP·PP = {tp * pp}",
                             f"chips = {tp * pp}·n; or use {used} of the {chips} (allow_idle) as the lecture does "
                             "with 64 of 72 GPUs")
        if tp % ep:
            raise InputError("ep", f"EP {ep} does not divide TP {tp} (EP runs within the TP group, conventions.md)",
                             "a divisor of tp: " + ", ".join(str(d) for d in _divisors(tp)))
        given = attention_dp_size not in (None, 0)  # 0: the default, every chip its own sequences
        adp_size = check_attention_dp_size(attention_dp_size if given else None, tp)
        if model is not None:
            model = load_model_any(model)
            cls._validate_model(model, tp, ep, pp, redundant_experts, uneven_experts)
        return cls(system, chips, tp, ep, pp, bool(attention_dp) or given, redundant_experts,
                   bool(uneven_experts), bool(allow_idle), adp_size)

    @staticmethod
    def _validate_model(model, tp, ep, pp, redundant, uneven):
        n_exp = int(getattr(model, "n_experts", 0) or 0)
        n_layers = int(model.n_layers)
        if pp > n_layers:
            raise InputError("pp", f"{pp} stages for {n_layers} layers", f"at most {n_layers}")
        if not n_exp:
            if ep > 1:
                raise InputError("ep", f"{model.name} is dense (no experts) but ep={ep}", "ep=1 for dense models")
            if redundant:
                raise InputError("redundant_experts", f"{model.name} has no experts", "0")
            return
        slots = n_exp + redundant
        if ep > slots:
            raise InputError("ep", f"ep={ep} GPUs for {slots} expert slots leaves GPUs without experts",
                             f"ep ≤ {slots}, or add redundant experts")
        if slots % ep and not uneven:
            raise InputError("ep", f"{slots} experts do not divide over ep={ep} GPUs ({slots / ep:.3g} each)",
                             ep_way_out(slots, ep))

    def validate_for(self, model) -> "Deployment":
        self._validate_model(model, self.tp, self.ep, self.pp, self.redundant_experts, self.uneven_experts)
        return self

    # ---- derived quantities
    @property
    def scaleup_size(self) -> int:
        return int(self.system.scaleup_size)

    @property
    def chips_per_replica(self) -> int:
        """tp · pp (conventions.md: replicas = GPUs ÷ (T·PP))."""
        return self.tp * self.pp

    @property
    def dp(self) -> int:
        """Replicas: chips // (tp · pp)."""
        return self.chips // self.chips_per_replica

    @property
    def chips_used(self) -> int:
        return self.dp * self.chips_per_replica

    @property
    def idle_chips(self) -> int:
        return self.chips - self.chips_used

    @property
    def moe_tp(self) -> int:
        """MoE tensor-parallel degree within the TP group: tp / ep."""
        return self.tp // self.ep

    @property
    def attention_ranks(self) -> int:
        """Attention-DP groups R of the TP group (:func:`attention_ranks`)."""
        return int(attention_ranks(self.tp, self.attention_dp, self.attention_dp_size))

    @property
    def domains_per_replica(self) -> int:
        """Scale-up domains one replica spans: ceil(tp·pp / S) (at least 1)."""
        return max(1, -(-self.chips_per_replica // self.scaleup_size))

    @property
    def ep_spans_domains(self) -> bool:
        """Whether the EP all-to-all leaves the scale-up domain (ep > S)."""
        return self.ep > self.scaleup_size

    def experts_per_chip(self, model) -> int:
        """Routed experts (slots) per layer on the most-loaded chip: ceil((E + redundant) / ep)."""
        n = int(getattr(model, "n_experts", 0) or 0)
        return int(experts_per_chip(n + self.redundant_experts, self.ep)) if n else 0

    def label(self) -> str:
        parts = [f"TP{self.tp}"]
        if self.ep > 1:
            parts.append(f"EP{self.ep}")
        if self.attention_dp:
            parts.append(attention_dp_label(self.attention_dp_size, self.tp))
        if self.pp > 1:
            parts.append(f"PP{self.pp}")
        parts.append(f"×{self.dp}")
        return " ".join(parts)

    def as_dict(self) -> dict:
        return {"system": self.system.name, "chips": self.chips, "tp": self.tp, "ep": self.ep, "pp": self.pp,
                "dp": self.dp, "attention_dp": self.attention_dp, "attention_dp_size": self.attention_ranks,
                "redundant_experts": self.redundant_experts,
                "moe_tp": self.moe_tp, "chips_per_replica": self.chips_per_replica, "idle_chips": self.idle_chips,
                "domains_per_replica": self.domains_per_replica, "ep_spans_domains": self.ep_spans_domains}

    # ---- evaluation
    def hw_numbers(self, weights_dtype=None, model=None, efficiency=None) -> HwNumbers:
        dtype = weights_dtype or (getattr(model, "native_dtype", None) if model is not None else None) or "bf16"
        return HwNumbers.from_system(self.system, dtype, efficiency)

    def evaluate(self, model, *, concurrency=None, micro_batch=None, context, pass_len=1, weights_dtype=None,
                 kv_dtype=None, efficiency=None, overlap=None, act_dtype="bf16", hop_latency_s=None,
                 usable_fraction=1.0, reserve_bytes=0.0, collective_latency_s=None) -> LayoutArrays:
        """Memory, communication and step time of this deployment serving ``model``.

        Give ``concurrency`` (sequences in flight over the whole deployment, conventions.md) or the
        per-replica ``micro_batch`` b (B = P·b per replica). Vectorized in both (not in ``context``).
        """
        from ..units import dtype_bytes

        model = load_model_any(model)
        self.validate_for(model)
        mn = model if isinstance(model, ModelNumbers) else ModelNumbers.from_model(
            model, context, pass_len=pass_len, weights_dtype=weights_dtype, kv_dtype=kv_dtype)
        if micro_batch is None:
            if concurrency is None:
                raise InputError("concurrency", "missing", "sequences in flight (or micro_batch per replica)")
            micro_batch = np.asarray(concurrency, dtype=float) / (self.dp * self.pp)
        hw = self.hw_numbers(weights_dtype, model, efficiency)
        return evaluate(mn, hw, tp=self.tp, ep=self.ep, pp=self.pp, micro_batch=micro_batch,
                        attention_dp=self.attention_dp, adp_ranks=self.attention_ranks, chips=self.chips,
                        redundant_experts=self.redundant_experts, overlap=overlap, act_bytes=dtype_bytes(act_dtype), hop_latency_s=hop_latency_s,
                        usable_fraction=usable_fraction, reserve_bytes=reserve_bytes,
                        collective_latency_s=collective_latency_s)

    def memory(self, model, *, concurrency, context, weights_dtype=None, kv_dtype=None, **kw) -> "MemoryFit":
        """Memory per chip (c_mem), whether it fits, headroom, largest concurrency and longest context that fit."""
        res = self.evaluate(model, concurrency=concurrency, context=context, weights_dtype=weights_dtype,
                            kv_dtype=kv_dtype, **kw)
        r = res.row(0)
        max_ctx = self.max_context(model, concurrency=concurrency, weights_dtype=weights_dtype, kv_dtype=kv_dtype, **kw)
        return MemoryFit(self, r["weight_bytes_per_chip"], r["kv_bytes_per_chip"], r["workspace_bytes_per_chip"],
                         r["mem_per_chip"], r["mem_capacity"], r["headroom_bytes"], bool(r["fits"]),
                         r["max_concurrency"], max_ctx, res.explain(0))

    def max_context(self, model, *, concurrency, weights_dtype=None, kv_dtype=None, hi=1e8, **kw) -> float:
        """Longest context (tokens) at which ``concurrency`` sequences still fit (bisection on log-context)."""
        def fits(ctx):
            return bool(self.evaluate(model, concurrency=concurrency, context=ctx, weights_dtype=weights_dtype,
                                      kv_dtype=kv_dtype, **kw).row(0)["fits"])

        lo = 1.0
        if not fits(lo):
            return 0.0
        if fits(hi):
            return float(hi)
        for _ in range(40):
            mid = np.sqrt(lo * hi)
            lo, hi = (mid, hi) if fits(mid) else (lo, mid)
            if hi / lo < 1.001:
                break
        return float(np.floor(lo))


@dataclass
class MemoryFit:
    """Memory per chip of a deployment (lecture c_mem, 01:03:37)."""

    deployment: Deployment
    weight_bytes: float
    kv_bytes: float
    workspace_bytes: float
    total_bytes: float
    capacity_bytes: float
    headroom_bytes: float
    fits: bool
    max_concurrency: float
    max_context: float
    derivation: object = None

    def as_dict(self) -> dict:
        out = {k: getattr(self, k) for k in ("weight_bytes", "kv_bytes", "workspace_bytes", "total_bytes",
                                             "capacity_bytes", "headroom_bytes", "fits", "max_concurrency",
                                             "max_context")}
        out["deployment"] = self.deployment.as_dict()
        return out


# --------------------------------------------------------------------------------------
# Layout search: every valid (TP, EP, PP, attention DP, micro-batch) at once
# --------------------------------------------------------------------------------------


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
    from ..bounds import MAX_LAYOUTS

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

    ``weight_layouts``: the ways a TP group may hold a dense model's weights (:data:`WEIGHT_LAYOUTS`; default 1D
    weight-stationary only) — ("1d", "2d", "gathered") puts Pope et al. 2022's three layouts on one frontier.

    Vectorized: one call of :func:`evaluate` on arrays of all layouts (≥ 10⁵ layouts/s,
    benchmarks/bench_layout.py).
    """
    import time

    from ..specs.hardware import load_hardware
    from ..units import dtype_bytes

    system = load_hardware(system)
    chips = int(chips)
    if chips < 1:
        raise InputError("chips", f"{chips} is not a positive integer", "a whole number of GPUs")
    if system.max_chips is not None and chips > system.max_chips:
        raise InputError("chips", f"{chips} exceeds the {system.max_chips} chips of one {system.name}",
                         f"at most {system.max_chips}")
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


__all__ = [
    "Deployment", "MemoryFit", "ModelNumbers", "HwNumbers", "LayoutArrays", "SearchResult", "evaluate",
    "search_layouts", "layout_grid", "pareto_front", "experts_per_chip", "expert_imbalance", "layers_on_stage",
    "scaleout_share", "scaleup_share", "moe_alltoall_bytes", "moe_fanout", "COLLECTIVE_LATENCY_S",
    "alltoall_split_time", "pipeline_hops", "ep_rank_load", "attention_dp_imbalance", "attention_ranks",
    "attention_tp", "check_attention_dp_size", "attention_dp_label", "with_attention_groups", "check_weight_layout",
    "WEIGHT_LAYOUTS", "c_mem", "MIN_EXPERT_SHARD", "load_model_any", "ep_way_out", "explain_layout",
    "candidate_degrees", "replace",
]
