"""The model catalog: :class:`~rackmath.specs.model_spec.ModelSpec` entries from catalog TOML and HuggingFace
``config.json`` files, validated, and the public loader :func:`load_model`.

The spec itself (parameter counts, KV-cache bytes and FLOPs per token from architecture facts, and its conventions)
is ``specs/model_spec.py``; sources of the built-in entries are in ``specs/data/models/*.toml`` ([model.sources]);
HuggingFace ``config.json`` files are read by :func:`from_hf_config`. ``docs/models.md`` documents the formulas.
"""

from __future__ import annotations

import json
from dataclasses import fields, replace
from functools import lru_cache
from pathlib import Path

from .. import units
from ..errors import CatalogError, InputError, UnknownNameError
from .catalog import Entry, Index, build_index, register_cache
from .model_spec import _COMPONENTS, ModelSpec
from .schema import check_hf_config, register_dataclass
from ..bounds import MAX_FILE_BYTES, MAX_NESTING, MODEL_INT_MAX

__all__ = ["ModelSpec", "load_model", "models", "from_hf_config", "model_from_entry"]

# --------------------------------------------------------------------------------------
# Catalog TOML
# --------------------------------------------------------------------------------------

register_dataclass("model", ModelSpec)
_INT_FIELDS = {f.name for f in fields(ModelSpec) if f.type in ("int",)}
_BOOL_FIELDS = {f.name for f in fields(ModelSpec) if f.type in ("bool",)}
_STR_FIELDS = {"name", "model_type", "attention", "index_dtype", "native_dtype", "kv_dtype", "description",
               "status", "notes"}
_REQUIRED = ("name", "n_layers", "d_model", "vocab_size", "n_heads")
_ALLOWED = {f.name for f in fields(ModelSpec)} - {"path"} | {"hf_config", "layer_pattern"}


def _expand_types(types, n_layers: int, path: str, fld: str) -> tuple:
    """'sliding'/'full' (or HF's 'sliding_attention'/'full_attention'), repeated cyclically to n_layers."""
    out = []
    for t in types:
        s = str(t).lower()
        if s.startswith("sliding") or s in ("local", "swa"):
            out.append("sliding")
        elif s.startswith("full") or s in ("global",):
            out.append("full")
        else:
            raise CatalogError(path, fld, f"unknown layer type {t!r} (accepted: sliding, full)")
    if not out:
        return ()
    # a pattern that does not divide n_layers is repeated and truncated (gemma3's 5:1 over 62 layers)
    reps = -(-n_layers // len(out))
    return tuple((out * reps)[:n_layers])



def _str_list(v, path, field) -> tuple:
    """A catalog list of names (aliases): a TOML array of strings."""
    if not isinstance(v, (list, tuple)) or not all(isinstance(a, str) for a in v):
        raise CatalogError(path, field, f"expected a list of strings, got {v!r}")
    return tuple(v)

def model_from_entry(entry: Entry) -> ModelSpec:
    """A ModelSpec from one ``[[model]]`` catalog table (ModelSpec field names, or ``hf_config``)."""
    d = dict(entry.data)
    path = str(entry.path)
    unknown = [k for k in d if k not in _ALLOWED]
    if unknown:
        raise CatalogError(path, f"model.{unknown[0]}", "unknown field (accepted: ModelSpec field names, see "
                                                        "docs/models.md)")
    if "hf_config" in d:
        hf = d.pop("hf_config")
        if not isinstance(hf, dict):
            raise CatalogError(path, "model.hf_config", "expected an inline table of config.json keys")
        if "name" not in d:
            raise CatalogError(path, "model.name", "missing")
        spec = from_hf_config(hf, path=path, name=str(d.pop("name")))
        extra = {}
        for k, v in d.items():
            if k in ("aliases",):
                v = _str_list(v, path, f"model.{k}")
            extra[k] = v
        return _validate(replace(spec, **extra), path)
    for k in _REQUIRED:
        if k not in d:
            raise CatalogError(path, f"model.{k}", f"missing (entry {d.get('name', '?')!r})")
    kw = {}
    for k, v in d.items():
        if k in _INT_FIELDS:
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise CatalogError(path, f"model.{k}", f"expected a non-negative integer, got {v!r}")
        elif k in _BOOL_FIELDS:
            if not isinstance(v, bool):
                raise CatalogError(path, f"model.{k}", f"expected true or false, got {v!r}")
        elif k in _STR_FIELDS:
            if not isinstance(v, str):
                raise CatalogError(path, f"model.{k}", f"expected a string, got {v!r}")
        kw[k] = v
    n_layers = kw["n_layers"]
    pattern = kw.pop("layer_pattern", None)
    types = kw.pop("layer_types", None)
    if pattern is not None or types is not None:
        kw["layer_types"] = _expand_types(pattern if pattern is not None else types, n_layers, path,
                                          "model.layer_pattern" if pattern is not None else "model.layer_types")
        if types is not None and len(types) != n_layers and pattern is None:
            raise CatalogError(path, "model.layer_types", f"has {len(types)} entries for {n_layers} layers "
                                                          "(use layer_pattern for a repeating pattern)")
    kw.setdefault("model_type", "custom")
    kw.setdefault("n_kv_heads", kw["n_heads"])
    if "head_dim" not in kw:
        kw["head_dim"] = kw["d_model"] // kw["n_heads"] if kw["n_heads"] else 0
    if "aliases" in kw:
        kw["aliases"] = _str_list(kw["aliases"], path, "model.aliases")
    if "moe_layer_ids" in kw:
        ids = kw["moe_layer_ids"]
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0
                                                for i in ids):
            raise CatalogError(path, "model.moe_layer_ids", f"expected a list of layer indices, got {ids!r}")
        kw["moe_layer_ids"] = tuple(ids)
    for k in ("component_dtypes", "sources"):
        if k in kw and not isinstance(kw[k], dict):
            raise CatalogError(path, f"model.{k}", "expected a table")
    kw["path"] = path
    return _validate(ModelSpec(**kw), path)


def _validate(m: ModelSpec, path: str) -> ModelSpec:
    def bad(fld, problem):
        raise CatalogError(path, f"model.{fld}", problem)

    for k, hi in MODEL_INT_MAX.items():  # every count bounded (a Python-API ModelSpec too)
        v = getattr(m, k)
        if isinstance(v, bool) or not isinstance(v, int):
            bad(k, f"expected an integer, got {v!r}")
        if not 0 <= v <= hi:
            bad(k, f"{v:,} is out of range (accepted: 0 to {hi:,})")
    for k in ("n_layers", "d_model", "vocab_size", "n_heads", "head_dim"):
        if getattr(m, k) <= 0:
            bad(k, "must be a positive integer")
    if m.moe_layer_ids and (max(m.moe_layer_ids) >= m.n_layers or min(m.moe_layer_ids) < 0):
        bad("moe_layer_ids", f"a layer index is outside 0..{m.n_layers - 1} (n_layers = {m.n_layers})")
    if m.moe_layer_ids and not m.n_experts:
        bad("moe_layer_ids", "given for a model without experts (n_experts = 0)")
    if m.first_k_dense > m.n_layers:
        bad("first_k_dense", f"{m.first_k_dense} is more than n_layers ({m.n_layers})")
    if m.attention not in ("gqa", "mla"):
        bad("attention", f"unknown {m.attention!r} (accepted: gqa, mla)")
    if m.attention == "mla":
        for k in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            if getattr(m, k) <= 0:
                bad(k, "missing (required for attention = 'mla')")
    elif m.n_kv_heads <= 0:
        bad("n_kv_heads", "must be a positive integer")
    elif m.n_heads % m.n_kv_heads:  # grouped-query attention: each KV head serves n_heads / n_kv_heads query heads
        bad("n_kv_heads", f"{m.n_kv_heads} does not divide n_heads = {m.n_heads} (config.json: num_key_value_heads, "
                          "num_attention_heads)")
    if m.kv_share < 1:
        bad("kv_share", "must be ≥ 1")
    if m.layer_types and len(m.layer_types) != m.n_layers:
        bad("layer_types", f"has {len(m.layer_types)} entries for {m.n_layers} layers")
    if "sliding" in m.layer_types and m.sliding_window <= 0:
        bad("sliding_window", "missing (sliding layers need a window)")
    if m.n_experts:
        if not 0 < m.experts_per_token <= m.n_experts:
            bad("experts_per_token", f"must be in 1..n_experts ({m.n_experts})")
        if m.moe_d_ff <= 0:
            bad("moe_d_ff", "missing (required when n_experts > 0)")
        if m.moe_layer_freq < 1:
            bad("moe_layer_freq", "must be ≥ 1")
    if m.n_dense_layers and m.d_ff <= 0:
        bad("d_ff", "missing (dense FFN layers need a width)")
    if m.index_topk and (m.attention != "mla" or m.index_head_dim <= 0 or m.index_n_heads <= 0):
        bad("index_topk", "DSA needs attention = 'mla', index_n_heads and index_head_dim")
    for k in ("native_dtype", "kv_dtype", "index_dtype"):
        try:
            units.normalize_dtype(getattr(m, k), k)
        except InputError as exc:
            bad(k, exc.problem)
    for comp, dt in m.component_dtypes.items():
        if comp not in _COMPONENTS:
            bad(f"component_dtypes.{comp}", "unknown component (accepted: " + ", ".join(_COMPONENTS) + ")")
        try:
            units.normalize_dtype(dt)
        except InputError as exc:
            bad(f"component_dtypes.{comp}", exc.problem)
    return m


# --------------------------------------------------------------------------------------
# HuggingFace config.json
# --------------------------------------------------------------------------------------

HF_MODEL_TYPES = ("llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "deepseek_v3", "deepseek_v32",
                  "kimi_k2", "gpt_oss", "gemma2", "gemma3", "gemma3_text", "llama4", "llama4_text", "glm4_moe")
# Architectures recognised but refused, with the reason (a one-line error rather than a wrong number).
HF_REFUSED = {
    "qwen3_next": "mixes Gated DeltaNet linear-attention layers with full attention; linear-attention state is not "
                  "modelled, so its KV cache and attention FLOPs would be wrong",
    "qwen3_next_moe": "mixes linear-attention layers with full attention (not modelled)",
}
# HuggingFace's Gemma3TextConfig defaults: the multimodal configs' text_config leaves these out.
_GEMMA3_TEXT_DEFAULTS = {"vocab_size": 262_208, "head_dim": 256, "num_attention_heads": 8, "num_key_value_heads": 4,
                         "sliding_window": 4096, "max_position_embeddings": 131_072}
_TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def _deepseek_moe_fields(kw: dict, req, opt) -> None:
    """The DeepSeek-style MoE fields of an HF config (DeepSeek-V3/V3.2, Kimi K2, GLM-4.5): dense FFN width, routed
    and shared experts, expert width, leading dense layers and MTP layers (read, not counted as weights)."""
    kw["d_ff"] = req("intermediate_size")
    kw["n_experts"] = req("n_routed_experts")
    kw["experts_per_token"] = req("num_experts_per_tok")
    kw["n_shared_experts"] = int(opt("n_shared_experts", 0))
    kw["moe_d_ff"] = req("moe_intermediate_size")
    kw["first_k_dense"] = int(opt("first_k_dense_replace", 0))
    kw["mtp_layers"] = int(opt("num_nextn_predict_layers", 0))


class _HfFields:
    """Typed reads of one HF config's keys: ``req`` (present, of the type, at least ``lo``) and ``opt`` (a default
    when absent, else of the default's type); each failure is a CatalogError naming the key."""

    def __init__(self, cfg: dict, path, mt: str):
        self.cfg, self.path, self.mt = cfg, path, mt

    def req(self, key, types=(int,), lo=1):
        cfg, path, mt = self.cfg, self.path, self.mt
        if key not in cfg or cfg[key] is None:
            raise CatalogError(path, key, f"missing (required for model_type {mt!r})")
        v = cfg[key]
        if not isinstance(v, types) or isinstance(v, bool):
            raise CatalogError(path, key, f"wrong type {type(v).__name__} (expected "
                                            + ("an integer)" if types == (int,) else "a number)"))
        if lo is not None and v < lo:
            raise CatalogError(path, key, f"{v} is below {lo} (required for model_type {mt!r})")
        return v

    def opt(self, key, default):
        v = self.cfg.get(key)
        if v is None:
            return default
        if isinstance(default, bool):
            ok, want = isinstance(v, bool), "true or false"
        elif isinstance(default, int):
            ok, want = isinstance(v, int) and not isinstance(v, bool), "an integer"
        elif isinstance(default, list):
            ok, want = isinstance(v, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in v), \
                "a list of integers"
        elif isinstance(default, str):
            ok, want = isinstance(v, str), "a string"
        else:
            ok, want = True, ""
        if not ok:
            raise CatalogError(self.path, key, f"wrong type {type(v).__name__} (expected {want})")
        return v


def _hf_language_config(cfg: dict, path) -> tuple[dict, str]:
    """The language model's config of a HF ``config.json`` and its model_type, checked: a multimodal checkpoint's
    ``text_config`` (vision tower not counted); refused, unknown and linear-attention architectures are errors."""
    check_hf_config(cfg, str(path))
    mt = cfg.get("model_type")
    if mt is None:
        raise CatalogError(path, "model_type", "missing (accepted: " + ", ".join(HF_MODEL_TYPES) + ")")
    if "text_config" in cfg and mt in ("gemma3", "llama4"):
        tc = cfg["text_config"]
        if not isinstance(tc, dict):
            raise CatalogError(path, "text_config", f"wrong type {type(tc).__name__} (expected a JSON object)")
        inner = {k: cfg[k] for k in ("torch_dtype", "quantization_config", "tie_word_embeddings", "architectures")
                 if k in cfg}
        defaults = _GEMMA3_TEXT_DEFAULTS if mt == "gemma3" else {}
        cfg = {**defaults, **inner, **tc, "model_type": mt}
        check_hf_config(cfg, f"{path} text_config")
    if mt in HF_REFUSED:
        raise CatalogError(path, "model_type", f"{mt!r} is not supported: {HF_REFUSED[mt]} "
                                               "(accepted: " + ", ".join(HF_MODEL_TYPES) + ")")
    if mt not in HF_MODEL_TYPES:
        raise CatalogError(path, "model_type", f"unsupported {str(mt)[:60]!r} (accepted: "
                           + ", ".join(HF_MODEL_TYPES) + ")")
    lt = cfg.get("layer_types")
    if isinstance(lt, list) and any("linear" in str(t).lower() for t in lt):
        raise CatalogError(path, "layer_types", "linear-attention layers are not modelled (their state is not a KV "
                                                "cache), so the KV and attention figures would be wrong (accepted: "
                                                "full and sliding attention layers)")
    return cfg, mt


def _hf_common_fields(f: _HfFields, name) -> dict:
    """The fields every HF architecture gives: layers, widths, heads, vocabulary, context, dtypes."""
    cfg, path, mt = f.cfg, f.path, f.mt
    d = f.req("hidden_size")
    n_layers = f.req("num_hidden_layers")
    H = f.req("num_attention_heads")
    if H < 1:
        raise CatalogError(path, "num_attention_heads", f"{H} is not a positive integer")
    kw = dict(
        name=name or _name_from_path(path),
        model_type=mt,
        n_layers=n_layers,
        d_model=d,
        vocab_size=f.req("vocab_size"),
        n_heads=H,
        n_kv_heads=int(f.opt("num_key_value_heads", H)),
        head_dim=int(f.opt("head_dim", d // H)),
        max_context=int(f.opt("max_position_embeddings", 0)),
        tie_embeddings=bool(f.opt("tie_word_embeddings", mt.startswith("gemma"))),
        path=str(path),
        description=f"from {Path(str(path)).name} ({', '.join(_arch_names(cfg.get('architectures')) or [mt])})",
    )
    tdt = _TORCH_DTYPES.get(str(cfg.get("torch_dtype", "bfloat16")), "bf16")
    kw["native_dtype"] = tdt
    kw["kv_dtype"] = "bf16" if tdt == "fp32" else tdt
    return kw


def _hf_llama(kw: dict, f: _HfFields) -> None:
    """Llama, Mistral, Qwen2/3 (dense GQA) and Mixtral (every layer MoE); Mistral's sliding window."""
    mt, cfg = f.mt, f.cfg
    kw["attention_bias"] = bool(f.opt("attention_bias", mt == "qwen2"))
    kw["qk_norm"] = mt == "qwen3"
    if mt == "mixtral":
        kw["n_experts"] = f.req("num_local_experts")
        kw["experts_per_token"] = f.req("num_experts_per_tok")
        kw["moe_d_ff"] = f.req("intermediate_size")
    else:
        kw["d_ff"] = f.req("intermediate_size")
    sw = cfg.get("sliding_window")
    use_sw = cfg.get("use_sliding_window", mt in ("mistral", "mixtral"))
    if sw and use_sw:
        kw["sliding_window"] = f.req("sliding_window")
        kw["layer_types"] = ("sliding",) * kw["n_layers"]


def _hf_qwen3_moe(kw: dict, f: _HfFields) -> None:
    """Qwen3 MoE: QK norm; MoE every decoder_sparse_step-th layer except mlp_only_layers (dense)."""
    n_layers = kw["n_layers"]
    kw["qk_norm"] = True
    kw["attention_bias"] = bool(f.opt("attention_bias", False))
    kw["n_experts"] = f.req("num_experts")
    kw["experts_per_token"] = f.req("num_experts_per_tok")
    kw["moe_d_ff"] = f.req("moe_intermediate_size")
    step = int(f.opt("decoder_sparse_step", 1))
    if step < 1:
        raise CatalogError(f.path, "decoder_sparse_step", f"{step} is not a positive integer")
    only = set(f.opt("mlp_only_layers", []))
    ids = tuple(i for i in range(n_layers) if i not in only and (i + 1) % step == 0)
    if len(ids) != n_layers:
        kw["moe_layer_ids"] = ids
        kw["d_ff"] = f.req("intermediate_size")


def _hf_deepseek(kw: dict, f: _HfFields) -> None:
    """DeepSeek-V3/V3.2 and Kimi K2: MLA (low-rank KV latent), DeepSeek MoE, V3.2's sparse-attention indexer."""
    kw["attention"] = "mla"
    kw["q_lora_rank"] = int(f.opt("q_lora_rank", 0))
    for k in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
        kw[k] = f.req(k)
    kw["head_dim"] = kw["qk_nope_head_dim"] + kw["qk_rope_head_dim"]
    kw["n_kv_heads"] = kw["n_heads"]
    _deepseek_moe_fields(kw, f.req, f.opt)
    kw["moe_layer_freq"] = int(f.opt("moe_layer_freq", 1))
    kw["router_bias"] = f.opt("topk_method", "") == "noaux_tc"  # e_score_correction_bias
    if f.mt == "deepseek_v32" or "index_topk" in f.cfg:
        kw["index_topk"] = f.req("index_topk")
        kw["index_n_heads"] = f.req("index_n_heads")
        kw["index_head_dim"] = f.req("index_head_dim")


def _hf_gpt_oss(kw: dict, f: _HfFields) -> None:
    """gpt-oss: biased attention with sinks, MoE in every layer, alternating sliding and full layers."""
    n_layers, cfg = kw["n_layers"], f.cfg
    kw["attention_bias"] = bool(f.opt("attention_bias", True))
    kw["attention_sinks"] = True
    kw["n_experts"] = f.req("num_local_experts")
    kw["experts_per_token"] = f.req("num_experts_per_tok") if cfg.get("num_experts_per_tok") is not None \
        else f.req("experts_per_token")
    kw["moe_d_ff"] = f.req("intermediate_size")
    kw["expert_bias"] = True
    kw["router_bias"] = True
    kw["active_counts_embedding"] = False  # OpenAI's 5.1B / 3.6B exclude the embedding table
    kw["sliding_window"] = f.req("sliding_window")
    types = cfg.get("layer_types") or [("sliding" if i % 2 == 0 else "full") for i in range(n_layers)]
    kw["layer_types"] = _hf_types(types, n_layers, f.path)


def _hf_llama4(kw: dict, f: _HfFields) -> None:
    """Llama 4 (HF Llama4TextConfig): MoE every interleave_moe_layer_step-th layer (or moe_layers), one shared
    expert of the routed width, dense layers of intermediate_size_mlp; RoPE layers use chunked attention
    (attention_chunk_size tokens: held like a sliding window of that size), NoPE layers attend globally."""
    n_layers, cfg, path = kw["n_layers"], f.cfg, f.path
    kw["attention_bias"] = bool(f.opt("attention_bias", False))
    kw["n_experts"] = f.req("num_local_experts")
    kw["experts_per_token"] = f.req("num_experts_per_tok")
    kw["moe_d_ff"] = f.req("intermediate_size")
    kw["n_shared_experts"] = 1
    step = int(f.opt("interleave_moe_layer_step", 1))
    if step < 1:
        raise CatalogError(path, "interleave_moe_layer_step", f"{step} is not a positive integer")
    ids = cfg.get("moe_layers")
    ids = tuple(ids) if ids is not None else tuple(range(step - 1, n_layers, step))
    if any(i >= n_layers for i in ids):
        raise CatalogError(path, "moe_layers", f"a layer index is not below num_hidden_layers ({n_layers})")
    if len(ids) != n_layers:
        kw["moe_layer_ids"] = ids
        kw["d_ff"] = f.req("intermediate_size_mlp")
    chunk = cfg.get("attention_chunk_size")
    if chunk:
        rope = cfg.get("no_rope_layers") or [int((i + 1) % 4 != 0) for i in range(n_layers)]
        if len(rope) != n_layers:
            raise CatalogError(path, "no_rope_layers", f"expected a list of {n_layers} entries")
        kw["sliding_window"] = f.req("attention_chunk_size")
        kw["layer_types"] = tuple("sliding" if r else "full" for r in rope)


def _hf_glm4_moe(kw: dict, f: _HfFields) -> None:
    """GLM-4.5 (HF Glm4MoeConfig): GQA with biases and optional QK norm, DeepSeek-style MoE (first_k_dense_replace
    dense layers, shared experts, e_score_correction_bias), MTP layers not counted."""
    kw["attention_bias"] = bool(f.opt("attention_bias", False))
    kw["qk_norm"] = bool(f.opt("use_qk_norm", False))
    _deepseek_moe_fields(kw, f.req, f.opt)
    kw["router_bias"] = True


def _hf_gemma(kw: dict, f: _HfFields) -> None:
    """Gemma 2/3: four norms a layer, QK norm (3), sliding layers — Gemma 2's every other, Gemma 3's all but every
    sliding_window_pattern-th — unless layer_types lists them."""
    n_layers, cfg, mt = kw["n_layers"], f.cfg, f.mt
    kw["norms_per_layer"] = 4
    kw["d_ff"] = f.req("intermediate_size")
    kw["attention_bias"] = bool(f.opt("attention_bias", False))
    kw["qk_norm"] = mt != "gemma2"
    kw["sliding_window"] = int(f.req("sliding_window"))
    if cfg.get("layer_types"):
        kw["layer_types"] = _hf_types(cfg["layer_types"], n_layers, f.path)
    elif mt == "gemma2":  # HF Gemma2: layer i is sliding when i is even
        kw["layer_types"] = tuple("sliding" if i % 2 == 0 else "full" for i in range(n_layers))
    else:  # gemma3: every sliding_window_pattern-th layer is global
        pat = int(f.opt("sliding_window_pattern", 6))
        if pat < 1:
            raise CatalogError(f.path, "sliding_window_pattern", f"{pat} is not a positive integer")
        kw["layer_types"] = tuple("full" if (i + 1) % pat == 0 else "sliding" for i in range(n_layers))


#: The reader of each HF model_type's own fields.
_HF_FAMILY = {"llama": _hf_llama, "mistral": _hf_llama, "qwen2": _hf_llama, "qwen3": _hf_llama,
              "mixtral": _hf_llama, "qwen3_moe": _hf_qwen3_moe, "deepseek_v3": _hf_deepseek,
              "deepseek_v32": _hf_deepseek, "kimi_k2": _hf_deepseek, "gpt_oss": _hf_gpt_oss, "llama4": _hf_llama4,
              "llama4_text": _hf_llama4, "glm4_moe": _hf_glm4_moe, "gemma2": _hf_gemma, "gemma3": _hf_gemma,
              "gemma3_text": _hf_gemma}


def _hf_quantization(kw: dict, cfg: dict, path) -> None:
    """The checkpoint's quantization_config: fp8 (DeepSeek/Kimi) or mxfp4 (gpt-oss) weights; others refused."""
    q = cfg.get("quantization_config") or {}
    if not isinstance(q, dict):
        raise CatalogError(path, "quantization_config", f"wrong type {type(q).__name__} (expected a JSON object)")
    method = str(q.get("quant_method", "")).lower()
    if method == "fp8":
        # DeepSeek/Kimi: every Linear in fp8 (128x128 block scales, ~0.02%, ignored); embedding,
        # LM head, router gate and norms stay bf16.
        kw["native_dtype"] = "fp8"
        kw["component_dtypes"] = {"embedding": "bf16", "lm_head": "bf16", "router": "bf16", "norms": "bf16"}
    elif method == "mxfp4":
        # gpt-oss: MoE experts mxfp4, everything in modules_to_not_convert bf16.
        kw["native_dtype"] = "mxfp4"
        kw["component_dtypes"] = {c: "bf16" for c in _COMPONENTS if c != "routed_experts"}
    elif method:
        raise CatalogError(path, "quantization_config.quant_method",
                           f"unsupported {method!r} (accepted: fp8, mxfp4, or none)")


def from_hf_config(cfg: dict, path: str = "config.json", name: str | None = None) -> ModelSpec:
    """A ModelSpec from a HuggingFace ``config.json`` dict (see HF_MODEL_TYPES)."""
    cfg, mt = _hf_language_config(cfg, path)
    f = _HfFields(cfg, path, mt)
    kw = _hf_common_fields(f, name)
    _HF_FAMILY[mt](kw, f)
    _hf_quantization(kw, cfg, path)
    return _validate(ModelSpec(**kw), str(path))


def _arch_names(v) -> list:
    """HF ``architectures`` (informational): a list of names; anything else is ignored."""
    return [str(a) for a in v] if isinstance(v, list) else []


def _hf_types(types, n_layers, path):
    if not isinstance(types, list) or len(types) != n_layers:
        raise CatalogError(path, "layer_types", f"expected a list of {n_layers} layer types")
    return _expand_types(types, n_layers, path, "layer_types")


def _name_from_path(path) -> str:
    p = Path(str(path))
    stem = p.parent.name if p.name == "config.json" else p.stem
    return stem.split("__")[-1].lower()


def read_hf_config(path) -> ModelSpec:
    """Read a HuggingFace config.json (or a directory holding one)."""
    p = Path(path).expanduser()
    if p.is_dir():
        p = p / "config.json"
    try:
        with open(p, "rb") as fh:
            text = fh.read(MAX_FILE_BYTES + 1).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CatalogError(str(p), "json", f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except FileNotFoundError:
        raise CatalogError(str(p), "file", "not found (accepted: a config.json path, a directory holding one, "
                                           "or a catalog name)") from None
    except OSError as exc:
        raise CatalogError(str(p), "file", f"cannot read: {exc.strerror}") from None

    if len(text) > MAX_FILE_BYTES:
        raise CatalogError(str(p), "file", f"larger than {MAX_FILE_BYTES:,} bytes (accepted: a config.json)")
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CatalogError(str(p), "json", f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") \
            from None
    except RecursionError:
        raise CatalogError(str(p), "json", f"nested too deeply (accepted: at most {MAX_NESTING} levels)") from None
    except ValueError as exc:  # e.g. an integer past Python's digit limit
        raise CatalogError(str(p), "json", f"malformed JSON: {str(exc)[:200]}") from None
    return from_hf_config(cfg, path=str(p))


# --------------------------------------------------------------------------------------
# Catalog index and the public loader
# --------------------------------------------------------------------------------------

@register_cache
@lru_cache(maxsize=1)
def models() -> Index:
    """All catalog models (shipped and user TOML), by name and alias."""
    return build_index("model", "model", "a model name such as deepseek-v3, llama-3.1-70b, gpt-oss-120b (see "
                       "`rackmath model list`), or a path to a HuggingFace config.json", model_from_entry)


HF_CONFIGS = Path(__file__).parent / "data" / "hf-configs"


def shipped_configs() -> dict[str, Path]:
    """The HuggingFace config.json files shipped with rackmath (specs/data/hf-configs, sources in its README.md),
    by repository name: {'openai/gpt-oss-120b': path, …}."""
    return {p.stem.replace("__", "/", 1): p for p in sorted(HF_CONFIGS.glob("*.json"))}


def shipped_config(name: str) -> Path:
    """'hf:openai/gpt-oss-120b' (or 'hf:gpt-oss-120b', case-insensitive) -> the shipped config.json path."""
    key = str(name).strip()[3:].strip().lower()
    known = shipped_configs()
    for repo, path in known.items():
        if key in (repo.lower(), repo.split("/", 1)[-1].lower()):
            return path
    raise UnknownNameError("model", name, ["hf:" + r for r in known],
                           "hf:ORG/NAME of a shipped HuggingFace config (see `rackmath model list --hf`)")


def load_model(name_or_path) -> ModelSpec:
    """A ModelSpec from a catalog name/alias (case-insensitive), a config.json path or a directory
    holding one; a ModelSpec is returned as is."""
    if isinstance(name_or_path, ModelSpec):
        return name_or_path
    if isinstance(name_or_path, str) and name_or_path.strip().lower().startswith("hf:"):
        return read_hf_config(shipped_config(name_or_path))
    if isinstance(name_or_path, Path) or str(name_or_path).endswith(".json"):
        return read_hf_config(name_or_path)
    s = str(name_or_path)
    if ("/" in s or s.startswith(".")) and Path(s).expanduser().is_dir():
        return read_hf_config(s)
    return models().get(s)
