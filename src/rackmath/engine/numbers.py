"""Plain-number views of a model and a system: what a layout's equations read (plain SI floats).

:class:`ModelNumbers` holds a model's numbers at one context length (weights by component, KV bytes, FLOPs per
sequence, expert counts), read from a ``specs.models.ModelSpec`` with the roofline engine's building blocks;
:class:`HwNumbers` a system's per-chip numbers. ``engine/layout.evaluate`` costs a layout from these two.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..specs.models import load_model
from ..units import dtype_bytes
from .efficiency import load_efficiency
from .roofline import attention_flops, expected_experts_hit, kv_step_bytes, step_flops


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
    expert_format: str = ""  # the routed experts' weight format ("mxfp4", "nvfp4", "fp8", …; "": unknown)

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

    def expert_hit_share(self, tokens, routing=()):
        """Expected share of one layer's experts hit by ``tokens`` tokens: H(T) / E (:func:`distinct_experts_hit`),
        uniform routing unless ``routing`` (``Efficiency.moe_routing``: ``--efficiency measured``) has a measured
        share s(T) for this model's expert shape (:func:`routing_curve`)."""
        if not self.is_moe:
            return np.zeros_like(np.asarray(tokens, dtype=float))
        if self.hit_fraction is not None:
            return self.hit_fraction(tokens)
        c = routing_curve(self, routing)
        share = 1.0 if c is None else routing_share_at(c, tokens)
        return distinct_experts_hit(self.n_experts, self.experts_per_token, tokens, share) / self.n_experts

    @classmethod
    def from_model(cls, model, context, *, pass_len=1, weights_dtype=None, kv_dtype=None,
                   prefill=False) -> "ModelNumbers":
        """Read a ``specs.models.ModelSpec`` at one context (uses the roofline engine's building blocks).

        ``prefill``: the pass is a prompt chunk, its attention in the prefill form (MLA un-absorbed,
        ``ModelSpec.prefill_attention_flops_per_attended_token``)."""
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
            expert_format=_expert_format(model, weights_dtype) if n_exp and n_moe else "",
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
    """Distinct experts ``tokens`` tokens hit (``roofline.expected_experts_hit``), as a float array."""
    return np.asarray(expected_experts_hit(n_experts, k, np.asarray(tokens, dtype=float)), dtype=float)


def distinct_experts_hit(n_experts, k, tokens, share=1.0):
    """H(T) = min(E, s · E · (1 − (1 − k/E)^T)): the distinct experts T tokens hit when the router hits a share s
    of uniform routing's count (s = 1: uniform and independent, ``roofline.expected_experts_hit``, lecture; s(T)
    measured under a skewed token distribution: ``engine.numbers.routing_share``, aiconfigurator-core's MoE tables)."""
    return np.minimum(np.asarray(n_experts, dtype=float),
                      np.asarray(share, dtype=float) * _expected_experts_hit(n_experts, k, tokens))


def routing_share(t_skewed, t_balanced, tau, experts, topk, tokens):
    """s(T) = min(1, (t_skew − τ) / (t_bal − τ)) · min(E, T·k) / (E · (1 − (1 − k/E)^T)): the share of uniform
    routing's distinct experts that T tokens hit under a skewed router, from one grouped-GEMM MoE kernel timed at T
    tokens under both token distributions (aiconfigurator-core's ``moe_perf`` "power_law_1.2" and "balanced" rows;
    ``benchmarks/reduce_aiconfigurator.py``). A memory-bound kernel's time above the floor τ is proportional to the
    distinct experts it streams; the balanced rows hit min(E, T·k) (each token's k experts distinct from the
    others' until all E are hit), more than any skewed router, so the ratio is capped at 1; uniform routing hits
    E · (1 − (1 − k/E)^T) (``engine.roofline.expected_experts_hit``). Where the skewed kernel is no longer
    memory-bound (its busiest experts' tokens cost compute) the capped ratio overstates the share: s → 1."""
    r = np.minimum(1.0, (np.asarray(t_skewed, float) - tau) / np.maximum(np.asarray(t_balanced, float) - tau, 1e-30))
    t = np.asarray(tokens, float)
    return r * np.minimum(experts, t * topk) / _expected_experts_hit(experts, topk, t)


def routing_curve(mn: ModelNumbers, routing):
    """The routing curve of ``routing`` (``Efficiency.moe_routing``: ((hidden, inter, experts, top-k), tokens, s,
    source), …) whose expert shape is the model's — d_model, expert width, experts, experts per token — or None
    (uniform routing: a model no table measured)."""
    key = (mn.d_model, mn.expert_width, mn.n_experts, mn.experts_per_token)
    return next((r for r in routing or () if tuple(r[0]) == key), None)


def moe_compute_law_of(mn: ModelNumbers, laws, dtype: str):
    """The measured compute law (``Efficiency.moe_compute``: (dtype, hidden, inter, η_c,moe, M½,moe, source), …) of
    the routed experts in compute dtype ``dtype``: the one measured at the model's expert shape (d_model, expert
    width), else the fastest measured in that dtype (what the silicon's grouped GEMM reaches), else None (the dense
    GEMM law: no MoE table in that dtype)."""
    mine = [x for x in laws or () if x[0] == dtype]
    if not mine:
        return None
    same = [x for x in mine if (x[1], x[2]) == (mn.d_model, mn.expert_width)]
    return (same or [max(mine, key=lambda x: x[3])])[0]


def moe_stream_rate_of(mn: ModelNumbers, streams):
    """The measured streaming rate (η_m,moe, source) of the routed experts' weight format: the fastest MoE curve of the
    chip in that format (``Efficiency.moe_stream``: (format, η_m,moe, source), …) — the kernel a stack runs for those
    weights (an MXFP4 expert on Hopper is dequantised to BF16: w4a16, 0.58 of H200's HBM; on Blackwell it meets MXFP8
    activations: 0.78 of B200's) — or None (no table in that format: the chip's fastest MoE curve, η_m,moe)."""
    return next(((x[1], x[2]) for x in streams or () if x[0] == mn.expert_format), None)


def _expert_format(model, weights_dtype) -> str:
    """The routed experts' weight format: the requested weights dtype, else the checkpoint's dtype of its routed
    experts (``ModelSpec.component_dtypes``, else its native dtype)."""
    if weights_dtype is not None:
        return str(weights_dtype)
    return str(getattr(model, "component_dtypes", {}).get("routed_experts", getattr(model, "native_dtype", "")) or "")


def routing_share_at(curve, tokens):
    """s(T) of a routing curve at T tokens: linear between its measured points, held beyond the first and last."""
    return np.interp(np.asarray(tokens, dtype=float), curve[1], curve[2])


def _kv_step_bytes_per_seq(model, context, pass_len, kv_dtype) -> float:
    """KV bytes one sequence's step reads at ``context`` (``roofline.kv_step_bytes`` at batch 1)."""
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
    compute_dtype: str = ""  # the dtype of peak_flops (its GEMMs'); "" for a hand-built one
    efficiency: object = None  # engine.efficiency.Efficiency the step is costed with (None = ideal)

    @classmethod
    def from_system(cls, system, dtype="bf16", efficiency=None, kv_dtype=None) -> "HwNumbers":
        """From a ``specs.hardware.System`` at peak; the efficiency preset is applied by the step model."""
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
            compute_dtype=str(dtype),
            efficiency=eff,
        )


__all__ = ["ModelNumbers", "HwNumbers", "load_model_any", "distinct_experts_hit", "routing_share", "routing_curve",
           "moe_compute_law_of", "moe_stream_rate_of",
           "routing_share_at"]
