"""Model specs: parameter counts, KV-cache bytes and FLOPs per token from architecture facts.

A :class:`ModelSpec` holds the architecture (the same field names in catalog TOML),
and derives everything the engine needs. Every ``context``-dependent member is
vectorized: pass a numpy array of 10^6 contexts and get an array back (loops are over
layer *types*, never over elements).

The catalog entries and HuggingFace ``config.json`` files that build one are read by
``specs/models.py`` (``load_model``, ``from_hf_config``). The formulas and
the conventions (what "active" counts, MTP modules excluded, the DSA indexer cache in
fp8) are documented in ``docs/models.md``.

Conventions
-----------
* **Total params** = every stored weight of the main model (embedding, LM head unless
  tied, attention incl. norms/biases/sinks/DSA indexer, FFNs, all experts, routers,
  norms). DeepSeek's multi-token-prediction module (``mtp_layers``, 14B in V3) is
  *not* counted: DeepSeek's 671B excludes it (the HF checkpoint's 685B includes it).
* **Active params** = params used per token: everything except the routed experts not
  selected (k of E per MoE layer). Publishers differ on the input embedding table:
  DeepSeek (37B), Qwen3 (22B, 3.3B), Mixtral (12.9B), Kimi K2 (32.6B) include it;
  OpenAI's gpt-oss (5.1B, 3.6B) excludes it (its model card counts the unembedding
  only). ``active_counts_embedding`` records the publisher's choice so that
  ``active_params`` matches the published figure.
* ``matmul_flops_per_token`` = 2 × (params used in matmuls per token) = 2 × (active
  params − input embedding table, when counted), the LM head included even when tied.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from functools import cached_property

from .. import units
from ..errors import InputError

_COMPONENTS = ("embedding", "lm_head", "attention", "norms", "dense_ffn", "shared_experts", "routed_experts", "router")


@dataclass(frozen=True)
class ModelSpec:
    """A transformer's architecture, with the derived quantities the engine needs.

    Attention: ``attention = "gqa"`` covers MHA (n_kv_heads = n_heads), GQA and MQA
    (n_kv_heads = 1); ``"mla"`` is DeepSeek's multi-head latent attention
    (q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim).
    ``layer_types`` lists "full"/"sliding" per layer (empty = all full); sliding layers
    hold ``sliding_window`` tokens. ``kv_share`` layers share one KV cache (1 = none).
    ``index_topk`` > 0 turns on DeepSeek sparse attention (DSA) with its indexer.
    MoE: ``n_experts`` routed experts of width ``moe_d_ff``, ``experts_per_token``
    selected, ``n_shared_experts`` always on; layers ``i >= first_k_dense`` with
    ``i % moe_layer_freq == 0`` are MoE (or the explicit ``moe_layer_ids``).
    """

    name: str
    model_type: str
    n_layers: int
    d_model: int
    vocab_size: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_ff: int = 0  # dense FFN width (dense layers)
    ffn_matrices: int = 3  # 3 for gated (SwiGLU/GeGLU), 2 for a plain MLP
    # attention
    attention: str = "gqa"  # "gqa" (MHA/GQA/MQA) or "mla"
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    attention_bias: bool = False
    attention_sinks: bool = False
    qk_norm: bool = False
    norms_per_layer: int = 2
    layer_types: tuple = ()  # per layer: "full" | "sliding"; () = all full
    sliding_window: int = 0
    kv_share: int = 1  # layers sharing one KV cache (Character.AI / lecture R37)
    # DeepSeek sparse attention (V3.2)
    index_topk: int = 0
    index_n_heads: int = 0
    index_head_dim: int = 0
    index_dtype: str = "fp8"
    # MoE
    n_experts: int = 0
    experts_per_token: int = 0
    n_shared_experts: int = 0
    moe_d_ff: int = 0
    first_k_dense: int = 0
    moe_layer_freq: int = 1
    moe_layer_ids: tuple = ()  # explicit MoE layer indices (overrides first_k_dense / freq)
    expert_bias: bool = False
    router_bias: bool = False
    # misc
    tie_embeddings: bool = False
    parallel_block: bool = False
    native_dtype: str = "bf16"
    component_dtypes: dict = field(default_factory=dict, compare=False, hash=False)
    kv_dtype: str = "bf16"  # KV dtype used when a kv_dtype argument is None
    active_counts_embedding: bool = True
    mtp_layers: int = 0  # multi-token-prediction modules, not counted
    max_context: int = 0
    description: str = ""
    aliases: tuple = ()
    status: str = "published"  # or "hypothetical"
    notes: str = ""
    sources: dict = field(default_factory=dict, compare=False, hash=False)
    path: str = field(default="", compare=False)

    # ---------------------------------------------------------------- layout helpers
    @cached_property
    def moe_mask(self) -> tuple:
        """Per layer: True where the FFN is a MoE block."""
        if not self.n_experts:
            return (False,) * self.n_layers
        if self.moe_layer_ids:
            ids = set(self.moe_layer_ids)
            return tuple(i in ids for i in range(self.n_layers))
        return tuple(i >= self.first_k_dense and i % self.moe_layer_freq == 0 for i in range(self.n_layers))

    @property
    def n_moe_layers(self) -> int:
        return sum(self.moe_mask)

    @property
    def n_dense_layers(self) -> int:
        return self.n_layers - self.n_moe_layers

    @property
    def sparse_attention(self) -> bool:
        """DeepSeek sparse attention (DSA): a lightning indexer picks ``index_topk`` tokens per query."""
        return self.index_topk > 0

    @cached_property
    def window_groups(self) -> tuple:
        """((window or 0 for full, n_layers, n_unique_kv_caches), …): one entry per layer type."""
        types = self.layer_types or ("full",) * self.n_layers
        out = []
        for t in ("full", "sliding"):
            n = sum(1 for x in types if x == t)
            if n:
                w = 0 if t == "full" else self.sliding_window
                out.append((w, n, math.ceil(n / self.kv_share)))
        return tuple(out)

    @property
    def n_kv_caches(self) -> int:
        """Distinct per-layer KV caches (layers / kv_share, per layer type)."""
        return sum(u for _, _, u in self.window_groups)

    # ---------------------------------------------------------------- parameters
    @cached_property
    def param_breakdown(self) -> dict:
        """Stored parameters by component (floats)."""
        d, L = self.d_model, self.n_layers
        p = dict.fromkeys(_COMPONENTS, 0.0)
        p["embedding"] = float(self.vocab_size * d)
        p["lm_head"] = 0.0 if self.tie_embeddings else float(self.vocab_size * d)
        p["attention"] = float(self._attention_params())
        p["norms"] = float(L * self.norms_per_layer * d + d + (L * 2 * self.head_dim if self.qk_norm else 0))
        p["dense_ffn"] = float(self.n_dense_layers * self.ffn_matrices * d * self.d_ff)
        nm = self.n_moe_layers
        p["shared_experts"] = float(nm * self.n_shared_experts * self.expert_params)
        p["routed_experts"] = float(nm * self.n_experts * self.expert_params)
        p["router"] = float(nm * (d * self.n_experts + (self.n_experts if self.router_bias else 0)))
        return p

    @property
    def expert_params(self) -> float:
        """One expert of one MoE layer: ffn_matrices · d_model · moe_d_ff (+ biases)."""
        d, f = self.d_model, self.moe_d_ff
        bias = ((self.ffn_matrices - 1) * f + d) if self.expert_bias else 0
        return float(self.ffn_matrices * d * f + bias)

    def _attention_params(self) -> float:
        """All layers' attention weights (projections, biases, sinks, LoRA norms, DSA indexer)."""
        d, H = self.d_model, self.n_heads
        if self.attention == "mla":
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            if self.q_lora_rank:
                q = d * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * H * qk
            else:
                q = d * H * qk
            kv = d * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank \
                + self.kv_lora_rank * H * (self.qk_nope_head_dim + self.v_head_dim)
            o = H * self.v_head_dim * d
            per = q + kv + o
            if self.index_topk:
                qsrc = self.q_lora_rank or d
                per += qsrc * self.index_n_heads * self.index_head_dim + d * self.index_head_dim \
                    + 2 * self.index_head_dim + d * self.index_n_heads
            return float(self.n_layers * per)
        hd = self.head_dim
        q_o = 2 * d * H * hd + ((H * hd + d) if self.attention_bias else 0) + (H if self.attention_sinks else 0)
        kv = 2 * d * self.n_kv_heads * hd + (2 * self.n_kv_heads * hd if self.attention_bias else 0)
        # With cross-layer sharing only the layers that write a KV cache own K/V projections.
        return float(self.n_layers * q_o + self.n_kv_caches * kv)

    @property
    def total_params(self) -> float:
        """All stored weights of the main model (MTP modules excluded)."""
        return float(sum(self.param_breakdown.values()))

    @property
    def embedding_params(self) -> float:
        """The input embedding table, vocab_size · d_model (a lookup: no FLOPs, not streamed)."""
        return self.param_breakdown["embedding"]

    @property
    def active_params(self) -> float:
        """Params per token, as the publisher counts them.

        N_active = N_total − (E − k)/E · N_routed  [− N_embedding if the publisher excludes it].
        """
        p = self.param_breakdown
        unused = p["routed_experts"] * (1 - self.experts_per_token / self.n_experts) if self.n_experts else 0.0
        act = self.total_params - unused
        if not self.active_counts_embedding:
            act -= p["embedding"]
        return float(act)

    @property
    def matmul_params(self) -> float:
        """Params multiplied per token: active params without the input embedding table, LM head
        included (a tied table is both the lookup and the LM-head matmul)."""
        act = self.active_params - (self.embedding_params if self.active_counts_embedding else 0.0)
        if self.tie_embeddings:
            act += self.embedding_params
        return float(act)

    @property
    def matmul_flops_per_token(self) -> float:
        """F_mm = 2 · N_matmul: one multiply-add per weight used (lecture 00:00, "2 × active params").

        N_matmul = N_active − N_embedding (when the publisher counts it), LM head included.
        For MLA this is the un-absorbed projection count; the absorbed decode form
        differs by < 1% of the total for DeepSeek-V3.
        """
        return 2.0 * self.matmul_params

    # ---------------------------------------------------------------- weight bytes
    def _dtype_of(self, component: str, dtype) -> float:
        if dtype is not None:
            return units.dtype_bytes(dtype, "weights_dtype")
        return units.dtype_bytes(self.component_dtypes.get(component, self.native_dtype), "native_dtype")

    def weight_bytes(self, dtype=None) -> float:
        """All stored weights: Σ_components params × bytes/param (dtype None = the checkpoint's dtypes)."""
        return float(sum(n * self._dtype_of(c, dtype) for c, n in self.param_breakdown.items()))

    def dense_weight_bytes(self, dtype=None) -> float:
        """Weights read every step whatever the routing: attention, norms, dense FFNs, shared
        experts, routers and the LM head (the tied table when tied) — not the input embedding
        lookup, not routed experts."""
        p = self.param_breakdown
        total = sum(p[c] * self._dtype_of(c, dtype)
                    for c in ("attention", "norms", "dense_ffn", "shared_experts", "router", "lm_head"))
        if self.tie_embeddings:
            total += p["embedding"] * self._dtype_of("embedding", dtype)
        return float(total)

    def expert_weight_bytes(self, dtype=None) -> float:
        """One routed expert of one MoE layer (0 for a dense model)."""
        if not self.n_experts:
            return 0.0
        return float(self.expert_params * self._dtype_of("routed_experts", dtype))

    # ---------------------------------------------------------------- KV cache
    def _kv_dtype_bytes(self, kv_dtype) -> float:
        return units.dtype_bytes(kv_dtype or self.kv_dtype, "kv_dtype")

    @property
    def kv_elements_per_layer(self) -> int:
        """KV elements one token stores in one layer's cache.

        GQA/MHA/MQA: 2 · n_kv_heads · head_dim (K and V). MLA: kv_lora_rank + qk_rope_head_dim
        (the compressed latent plus the decoupled rope key; DeepSeek-V2 §2.1, V3 config).
        """
        if self.attention == "mla":
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.n_kv_heads * self.head_dim

    @property
    def index_bytes_per_layer(self) -> float:
        """DSA indexer key bytes per token per layer: index_head_dim in ``index_dtype`` (fp8 in
        DeepSeek's V3.2 inference code) plus one fp32 scale per 128-element block."""
        if not self.index_topk:
            return 0.0
        return self.index_head_dim * units.dtype_bytes(self.index_dtype) + 4.0 * math.ceil(self.index_head_dim / 128)

    def kv_cache_bytes(self, context, kv_dtype=None):
        """KV bytes one sequence holds at ``context`` tokens.

        M_KV(L) = Σ_layer-types U_t · e · b · min(L, W_t) + n_layers · b_idx · L, where U_t is the
        number of distinct caches of that type (layers / kv_share), e = kv_elements_per_layer,
        b the KV dtype's bytes, W_t the window (∞ for full attention) and b_idx the DSA
        indexer's bytes per token per layer (0 without DSA). Lecture 00:00 / R37.
        """
        L = _context(context)
        b = self._kv_dtype_bytes(kv_dtype)
        e = self.kv_elements_per_layer
        out = 0.0
        for w, _n, u in self.window_groups:
            out = out + u * e * b * (L if not w else _np().minimum(L, w))
        if self.index_topk:
            out = out + self.n_layers * self.index_bytes_per_layer * L
        return _ret(out, L)

    def kv_bytes_per_token(self, context=8192, kv_dtype=None):
        """kv_cache_bytes(L) / L: bytes per token of context at context length L."""
        L = _context(context)
        np = _np()
        if np.any(np.asarray(L) <= 0):
            raise InputError("context", "must be > 0 for bytes per token", "a positive number of tokens")
        return _ret(self.kv_cache_bytes(L, kv_dtype) / L, L)

    def kv_read_bytes(self, context, kv_dtype=None):
        """KV bytes one decode step reads for one sequence at ``context``.

        Dense attention reads everything it holds (shared caches once, as the lecture assumes
        in R37). DSA reads min(L, index_topk) latent entries per layer plus all L indexer keys:
        R_KV(L) = n_layers · (e · b · min(L, k) + b_idx · L)  (DeepSeek-V3.2 tech report).
        """
        if not self.index_topk:
            return self.kv_cache_bytes(context, kv_dtype)
        L = _context(context)
        b = self._kv_dtype_bytes(kv_dtype)
        np = _np()
        out = self.n_layers * (self.kv_elements_per_layer * b * np.minimum(L, self.index_topk)
                               + self.index_bytes_per_layer * L)
        return _ret(out, L)

    # ---------------------------------------------------------------- attention FLOPs
    @property
    def attention_flops_per_attended_token(self) -> float:
        """FLOPs per layer per (query token, attended token) pair.

        GQA/MHA/MQA: 2 · n_heads · head_dim (QKᵀ) + 2 · n_heads · head_dim (AV).
        MLA, absorbed form DeepSeek uses in decode (W_UK folded into q, W_UV into o):
        2 · n_heads · (kv_lora_rank + qk_rope_head_dim) for scores + 2 · n_heads · kv_lora_rank
        for values.
        """
        H = self.n_heads
        if self.attention == "mla":
            return 2.0 * H * (self.kv_lora_rank + self.qk_rope_head_dim) + 2.0 * H * self.kv_lora_rank
        return 4.0 * H * self.head_dim

    @property
    def prefill_attention_flops_per_attended_token(self) -> float:
        """FLOPs per layer per (query token, attended token) pair in a prefill pass.

        MLA prefill runs un-absorbed, as multi-head attention on up-projected keys and values
        (DeepSeek-V2 §2.1.2 absorbs W_UK / W_UV for decode only; vLLM's MLA backend and SGLang's
        ``forward_normal`` compute prefill in this "MHA mode"): 2 · n_heads · (qk_nope + qk_rope) for
        scores + 2 · n_heads · v_head_dim for values — 81,920 for DeepSeek-V3 against 278,528 absorbed.
        MLA with DSA (DeepSeek-V3.2) runs its sparse attention in the absorbed "MQA mode" for prefill
        too (V3.2 report §2.1), and every other attention is the same in both passes.
        """
        if self.attention == "mla" and not self.index_topk and self.qk_nope_head_dim and self.v_head_dim:
            H = self.n_heads
            return 2.0 * H * (self.qk_nope_head_dim + self.qk_rope_head_dim) + 2.0 * H * self.v_head_dim
        return self.attention_flops_per_attended_token

    def attention_flops_per_token(self, context, prefill=False):
        """FLOPs for one token attending to ``context`` earlier tokens, all layers.

        F_attn(L) = Σ_layer-types n_t · f · min(L, W_t) with f = attention_flops_per_attended_token
        (every layer attends, shared caches or not; ``prefill``: f =
        prefill_attention_flops_per_attended_token, MLA's un-absorbed form). With DSA the main
        attention sees min(L, index_topk) tokens and the indexer scores all L: + n_layers · 2 ·
        index_n_heads · index_head_dim · L (its ReLU/weighting adds O(index_n_heads · L), ignored).
        """
        L = _context(context)
        np = _np()
        f = self.prefill_attention_flops_per_attended_token if prefill else self.attention_flops_per_attended_token
        if self.index_topk:
            out = self.n_layers * (f * np.minimum(L, self.index_topk)
                                   + 2.0 * self.index_n_heads * self.index_head_dim * L)
            return _ret(out, L)
        out = 0.0
        for w, n, _u in self.window_groups:
            out = out + n * f * (L if not w else np.minimum(L, w))
        return _ret(out, L)

    # ---------------------------------------------------------------- output
    def describe(self, context=8192, kv_dtype=None) -> dict:
        """Everything `model show --json` prints (plain floats)."""
        kvdt = units.normalize_dtype(kv_dtype or self.kv_dtype, "kv_dtype")
        L = float(context)
        arch = {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in ("name", "description", "sources", "notes", "path", "aliases", "status")}
        arch["layer_types"] = _compress_types(self.layer_types)
        return {
            "name": self.name,
            "model_type": self.model_type,
            "description": self.description,
            "status": self.status,
            "aliases": list(self.aliases),
            "total_params": self.total_params,
            "active_params": self.active_params,
            "embedding_params": self.embedding_params,
            "n_moe_layers": self.n_moe_layers,
            "matmul_flops_per_token": self.matmul_flops_per_token,
            "context": L,
            "kv_dtype": kvdt,
            "kv_bytes_per_token": float(self.kv_bytes_per_token(L, kvdt)),
            "kv_cache_bytes": float(self.kv_cache_bytes(L, kvdt)),
            "kv_read_bytes": float(self.kv_read_bytes(L, kvdt)),
            "attention_flops_per_token": float(self.attention_flops_per_token(L)),
            "weight_bytes": self.weight_bytes(),
            "dense_weight_bytes": self.dense_weight_bytes(),
            "expert_weight_bytes": self.expert_weight_bytes(),
            "param_breakdown": dict(self.param_breakdown),
            "architecture": arch,
            "notes": self.notes,
            "sources": dict(self.sources),
            "path": self.path,
        }


def _np():
    import numpy

    return numpy


def _context(context):
    """Validate a context (scalar or array): finite and ≥ 0 tokens; returns a float or float array."""
    np = _np()
    arr = np.asarray(context, dtype=float)
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        bad = arr[~np.isfinite(arr) | (arr < 0)].flat[0] if arr.ndim else arr
        raise InputError("context", f"{float(bad)!r} is not a non-negative finite number of tokens",
                         "a number of tokens ≥ 0, such as 8192 or '128K'")
    return arr if arr.ndim else float(arr)


def _ret(value, like):
    np = _np()
    if np.ndim(like) == 0:
        return float(value)
    return np.broadcast_to(np.asarray(value, dtype=float), np.shape(like)).astype(float)


def _compress_types(types: tuple):
    """Show a repeating layer_types list as its pattern."""
    if not types:
        return []
    for p in range(1, len(types) + 1):
        if len(types) % p == 0 and tuple(types[:p]) * (len(types) // p) == tuple(types):
            return {"pattern": list(types[:p]), "repeats": len(types) // p} if p < len(types) else list(types)
    return list(types)


__all__ = ["ModelSpec"]
