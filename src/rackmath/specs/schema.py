"""Catalog schemas: every field of every catalog kind, with its type and range, checked in one place.

:func:`check_entry` runs on every ``[[chip]]``, ``[[system]]``, ``[[model]]``, ``[[price_sheet]]``,
``[[efficiency]]`` and ``[[memory_tier]]`` table before the kind's parser sees it (called by
:func:`rackmath.specs.catalog.entries`), and :func:`check_hf_config` on every HuggingFace
``config.json`` before the importer reads it. The rules:

* an unknown field is an error naming the closest known field (a typo is never ignored);
* booleans are not numbers (``hbm_bandwidth = true`` is refused, not read as 1 B/s);
* every number is finite, not denormal, and inside a physically sensible range (``rackmath.bounds``);
* every count and list length is bounded *before* anything is expanded (``n_layers = 1e9`` is an error,
  not a billion-element tuple);
* names and aliases are non-empty strings of bounded length (``aliases = "abc"`` is not three aliases).

Cross-entry rules (duplicate names in one file, an alias taking another entry's name) live in
:mod:`rackmath.specs.catalog`; cross-field rules of one entry (moe_layer_ids within n_layers, an fp4 peak
not below bf16) in the kind's parser.
"""

from __future__ import annotations

import difflib
import functools
import math
from dataclasses import dataclass, fields

from .. import bounds, units
from ..errors import CatalogError, InputError


@dataclass(frozen=True)
class F:
    """One field: ``type`` is int, float, bool, str, quantity (a units string or number of ``kind``),
    names (list of names), strs, ints, table, tables (array of tables with schema ``sub``), map
    (a table of any keys whose values follow ``value``), or any."""

    type: str
    lo: float | None = None
    hi: float | None = None
    kind: str | None = None
    required: bool = False
    choices: tuple = ()
    sub: str | None = None
    value: "F | None" = None
    max_len: int | None = None


_NAME = F("str", required=True, max_len=bounds.MAX_NAME_LEN)
_TEXT = F("str", max_len=100_000)
_NAMES = F("names")
_SOURCES = F("map", value=_TEXT)

SCHEMAS: dict[str, dict[str, F]] = {
    "chip": {
        "name": _NAME, "vendor": _TEXT, "description": _TEXT, "aliases": _NAMES, "sources": _SOURCES,
        "flops": F("map", required=True, value=F("quantity", 1e9, 1e19, kind="flops")),
        "hbm": F("quantity", 1e6, 1e15, kind="bytes", required=True),
        "hbm_bandwidth": F("quantity", 1e6, 1e16, kind="bandwidth", required=True),
        "scaleup_bandwidth": F("quantity", 1e3, 1e16, kind="bandwidth", required=True),
        "scaleout_bandwidth": F("quantity", 1e3, 1e16, kind="bandwidth", required=True),
        "usd_per_hour": F("quantity", 0, 1e5, kind="usd_per_hour", required=True),
        "default_system": F("str", required=True, max_len=bounds.MAX_NAME_LEN),
        "memory_tiers": F("tables", sub="chip.memory_tiers"),
        "status": F("str", choices=("shipping", "announced")),
        "generation": F("str", max_len=100), "memory_kind": F("str", max_len=32),
        "tdp_w": F("float", 0, 1e7), "host_power_w": F("float", 0, 1e7), "typical_power_w": F("float", 0, 1e7),
    },
    "chip.memory_tiers": {
        "tier": F("str", required=True, choices=("ddr", "flash", "disk")),
        "capacity": F("quantity", 1, 1e18, kind="bytes", required=True),
        "bandwidth": F("quantity", 1, 1e16, kind="bandwidth", required=True),
        "usd_per_gb_hour": F("float", 0, 1e6), "description": _TEXT, "source": _TEXT,
    },
    "system": {
        "name": _NAME, "description": _TEXT, "aliases": _NAMES, "sources": _SOURCES,
        "chip": F("str", required=True, max_len=bounds.MAX_NAME_LEN),
        "scaleup_size": F("int", 1, bounds.MAX_SCALEUP, required=True),
        "max_chips": F("int", 1, 1e8), "dies_per_chip": F("int", 1, 64),
        "hop_latency": F("quantity", 0, 60, kind="duration"),
        "topology": F("str", choices=("switched", "torus")),
        "system_power_w": F("float", 0, 1e8),
    },
    "memory_tier": {
        "name": _NAME, "description": _TEXT, "aliases": _NAMES, "sources": _SOURCES, "source": _TEXT,
        "tier": F("str", choices=("hbm", "ddr", "flash", "disk")),
        "capacity": F("quantity", 1, 1e18, kind="bytes"), "bandwidth": F("quantity", 1, 1e16, kind="bandwidth"),
        "usd_per_gb_hour": F("float", 0, 1e6),
    },
    "price_sheet": {
        "name": _NAME, "aliases": _NAMES, "note": _TEXT, "status": F("str", choices=("V", "S", "D", "M")),
        "provider": F("str", required=True, max_len=1000), "model": F("str", required=True, max_len=1000),
        "date": F("str", required=True, max_len=100), "source": F("str", required=True, max_len=100_000),
        "input": F("float", 0, 1e6, required=True), "output": F("float", 0, 1e6, required=True),
        "cache_read": F("float", 0, 1e6), "cache_write_5m": F("float", 0, 1e6), "cache_write_1h": F("float", 0, 1e6),
        "cache_storage_per_hour": F("float", 0, 1e6),
        "tiers": F("tables", sub="price_sheet.tiers"), "fast_mode": F("table", sub="price_sheet.fast_mode"),
    },
    "price_sheet.tiers": {
        "above": F("quantity", 0, 1e12, kind="count", required=True),
        "input": F("float", 0, 1e6), "output": F("float", 0, 1e6), "cache_read": F("float", 0, 1e6),
        "cache_write_5m": F("float", 0, 1e6), "cache_write_1h": F("float", 0, 1e6),
    },
    "price_sheet.fast_mode": {
        "input": F("float", 0, 1e6, required=True), "output": F("float", 0, 1e6, required=True),
        "speed_multiple": F("float", 1e-3, 1e4, required=True), "tiers": F("tables", sub="price_sheet.fast_tiers"),
        "status": F("str", choices=("V", "S", "D", "M")), "source": _TEXT, "note": _TEXT,
    },
    "price_sheet.fast_tiers": {
        "above": F("quantity", 0, 1e12, kind="count", required=True),
        "input": F("float", 0, 1e6), "output": F("float", 0, 1e6),
    },
    "efficiency": {
        "name": _NAME, "aliases": _NAMES, "description": _TEXT, "source": _TEXT,
        "eta_compute": F("float", 1e-6, 1), "eta_memory": F("float", 1e-6, 1), "eta_comm": F("float", 1e-6, 1),
        "eta_memory_moe": F("float", 0, 1), "eta_memory_kv": F("float", 0, 1), "eta_memory_mla": F("float", 0, 1),
        "step_overhead_s": F("float", 0, 10),
        "chips": F("strs"), "composition": _TEXT, "regime": _TEXT,
    },
}
"""Field schemas by kind (sub-tables as 'kind.field'). ModelSpec fields are added below from the dataclass."""

_MODEL_EXTRA = {
    "name": _NAME, "aliases": _NAMES, "description": _TEXT, "notes": _TEXT, "sources": _SOURCES,
    "model_type": F("str", max_len=100), "attention": F("str", choices=("gqa", "mla")),
    "status": F("str", choices=("published", "hypothetical")),
    "layer_types": F("strs", max_len=bounds.MODEL_INT_MAX["n_layers"]),
    "layer_pattern": F("strs", max_len=bounds.MODEL_INT_MAX["n_layers"]),
    "moe_layer_ids": F("ints", 0, bounds.MODEL_INT_MAX["n_layers"] - 1, max_len=bounds.MODEL_INT_MAX["n_layers"]),
    "component_dtypes": F("map", value=F("str", max_len=32)),
    "hf_config": F("table"),
    "native_dtype": F("str", max_len=32), "kv_dtype": F("str", max_len=32), "index_dtype": F("str", max_len=32),
}


def _model_schema() -> dict[str, F]:
    """[[model]] fields: every ModelSpec field (ints bounded by bounds.MODEL_INT_MAX), plus hf_config/layer_pattern.
    ModelSpec is registered by specs/models.py (:func:`register_dataclass`)."""
    if "model" not in _DATACLASS:
        raise RuntimeError("rackmath.specs.models is not imported: [[model]] has no schema yet")
    out: dict[str, F] = {}
    for f in fields(_DATACLASS["model"]):
        if f.name == "path":
            continue
        t = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "any")
        if f.name in _MODEL_EXTRA:
            out[f.name] = _MODEL_EXTRA[f.name]
        elif t == "int":
            out[f.name] = F("int", 0, bounds.MODEL_INT_MAX.get(f.name, 10**9))
        elif t == "bool":
            out[f.name] = F("bool")
        elif t == "float":
            out[f.name] = F("float", 0, 1e30)
        elif t == "str":
            out[f.name] = _TEXT
        else:
            out[f.name] = F("any")
    out.update({k: v for k, v in _MODEL_EXTRA.items() if k not in out})
    for k in ("name", "n_layers", "d_model", "vocab_size", "n_heads"):
        out[k] = F(out[k].type, out[k].lo, out[k].hi, required=True, max_len=out[k].max_len)
    return out


# Kinds whose dataclass may grow fields in other modules: a new dataclass field is accepted in TOML under its own
# name, typed from its annotation (float/int/bool/str; "| None" allowed), so adding a field needs no change here.
# Fields the TOML spells differently (hbm -> hbm_bytes …) are excluded so a misspelling is still an error.
# The dataclass of each kind is registered by the module that defines it (``register_dataclass``: specs/models.py,
# specs/hardware.py, specs/prices.py, engine/efficiency.py), which reads its entries through catalog.entries, so
# this module imports none of them (no import cycle: catalog → schema, never schema → models).
_SKIP = {"chip": {"hbm_bytes", "hbm_bw", "scaleup_bw", "scaleout_bw"}, "system": {"hop_latency_s", "dies"},
         "efficiency": set(), "price_sheet": {"path"}, "model": set()}
_DATACLASS: dict[str, type] = {}


def register_dataclass(kind: str, cls: type) -> type:
    """Declare the dataclass a catalog kind parses into (its fields widen the kind's schema); returns ``cls``."""
    _DATACLASS[kind] = cls
    schema.cache_clear()
    return cls


def _with_dataclass_fields(kind: str, base: dict[str, F]) -> dict[str, F]:
    skip = _SKIP.get(kind, set())
    out = dict(base)
    dc = _DATACLASS.get(kind)
    if dc is None:  # the defining module is not imported: nothing reads this kind yet
        return out
    for f in fields(dc):
        if f.name in out or f.name in skip:
            continue
        t = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "any")
        t = t.split("|")[0].strip()
        out[f.name] = {"float": F("float", 0, 1e12), "int": F("int", 0, 10**9), "bool": F("bool"),
                       "str": _TEXT}.get(t, F("any"))
    return out


def has_schema(kind: str) -> bool:
    """Whether this module checks ``kind`` (``record`` tables are checked by specs/records.py)."""
    return kind in SCHEMAS or kind == "model"


@functools.lru_cache(maxsize=None)
def schema(kind: str) -> dict[str, F]:
    """The field schema of one catalog kind (or sub-table 'kind.field')."""
    if kind == "model":
        return _model_schema()
    if kind in _SKIP:
        return _with_dataclass_fields(kind, SCHEMAS[kind])
    return SCHEMAS[kind]


# ---------------------------------------------------------------------------------- checking
def check_entry(kind: str, data, path: str, where: str | None = None) -> None:
    """Check one catalog table against its kind's schema; raise CatalogError(path, 'kind.field', problem)."""
    where = where or kind
    if not isinstance(data, dict):
        raise CatalogError(path, where, f"expected a table ([[{kind}]]), got {type(data).__name__}")
    sch = schema(kind)
    for key, value in data.items():
        if key not in sch:
            close = difflib.get_close_matches(str(key), list(sch), n=1, cutoff=0.6)
            hint = f"; closest: {close[0]}" if close else ""
            raise CatalogError(path, f"{where}.{key}", f"unknown field{hint} (accepted: {', '.join(sorted(sch))})")
        _check(sch[key], value, path, f"{where}.{key}")
    for key, f in sch.items():
        if f.required and key not in data:
            if kind == "model" and key != "name" and "hf_config" in data:
                continue  # an hf_config entry takes the architecture from the config
            raise CatalogError(path, f"{where}.{key}", f"missing (entry {str(data.get('name', '?'))[:60]!r})")


def _bad(path, where, problem):
    raise CatalogError(path, where, problem)


def _number_ok(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check(f: F, v, path: str, where: str) -> None:
    t = f.type
    if t == "any":
        return
    if t == "bool":
        if not isinstance(v, bool):
            _bad(path, where, f"expected true or false, got {_show(v)}")
    elif t == "int":
        if not isinstance(v, int) or isinstance(v, bool):
            _bad(path, where, f"expected an integer, got {_show(v)}")
        _range(f, v, path, where)
    elif t == "float":
        if not _number_ok(v):
            _bad(path, where, f"expected a number, got {_show(v)}")
        if not math.isfinite(v):
            _bad(path, where, f"{v!r} is not a finite number")
        if v != 0 and abs(v) < bounds.MIN_MAGNITUDE:
            _bad(path, where, f"{v!r} is too small (non-zero values start at {bounds.MIN_MAGNITUDE:g})")
        _range(f, v, path, where)
    elif t == "quantity":
        if not (_number_ok(v) or isinstance(v, str)) or (isinstance(v, str) and len(v) > 200):
            _bad(path, where, f"expected a quantity such as '3.35 TB/s' or a number, got {_show(v)}")

        try:
            q = units.parse_quantity(v, f.kind, where)
        except InputError as exc:
            _bad(path, where, exc.problem + (f" (accepted: {exc.accepted})" if exc.accepted else ""))
        _range(f, q, path, where, shown=v)
    elif t == "str":
        if not isinstance(v, str):
            _bad(path, where, f"expected a string, got {_show(v)}")
        if f.max_len is not None and len(v) > f.max_len:
            _bad(path, where, f"longer than {f.max_len:,} characters")
        if f.choices and v not in f.choices:
            _bad(path, where, f"{_show(v)} is not accepted (accepted: {', '.join(f.choices)})")
    elif t in ("names", "strs"):
        if not isinstance(v, list) or not all(isinstance(a, str) for a in v):
            _bad(path, where, f"expected a list of strings, got {_show(v)}")
        limit = bounds.MAX_ALIASES if t == "names" else (f.max_len or 100_000)
        if len(v) > limit:
            _bad(path, where, f"{len(v):,} entries is too many (at most {limit:,})")
        if t == "names":
            for a in v:
                if not a.strip() or len(a) > bounds.MAX_NAME_LEN:
                    _bad(path, where, f"{_show(a)} is not a name (accepted: 1 to {bounds.MAX_NAME_LEN} characters)")
    elif t == "ints":
        if not isinstance(v, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in v):
            _bad(path, where, f"expected a list of integers, got {_show(v)}")
        if f.max_len is not None and len(v) > f.max_len:
            _bad(path, where, f"{len(v):,} entries is too many (at most {f.max_len:,})")
        for i in v:
            _range(f, i, path, where)
        if len(set(v)) != len(v):
            _bad(path, where, "lists an entry twice")
    elif t == "table":
        if not isinstance(v, dict):
            _bad(path, where, f"expected a table, got {_show(v)}")
        if f.sub:
            check_entry(f.sub, v, path, where)
    elif t == "tables":
        if not isinstance(v, list):
            _bad(path, where, f"expected an array of tables ([[{where}]]), got {_show(v)}")
        if len(v) > 10_000:
            _bad(path, where, f"{len(v):,} tables is too many")
        for i, x in enumerate(v):
            check_entry(f.sub, x, path, f"{where}[{i}]")
    elif t == "map":
        if not isinstance(v, dict):
            _bad(path, where, f"expected a table, got {_show(v)}")
        if len(v) > 10_000:
            _bad(path, where, f"{len(v):,} keys is too many")
        for k, x in v.items():
            _check(f.value, x, path, f"{where}.{k}")


def _range(f: F, v, path, where, shown=None) -> None:
    shown = _show(v if shown is None else shown)
    if f.lo is not None and v < f.lo:
        _bad(path, where, f"{shown} is below {f.lo:g} (accepted: {f.lo:g} to {f.hi:g})" if f.hi is not None
             else f"{shown} is below {f.lo:g}")
    if f.hi is not None and v > f.hi:
        _bad(path, where, f"{shown} is out of range (accepted: {f.lo if f.lo is not None else 0:g} to {f.hi:g})")


def _show(v) -> str:
    s = repr(v)
    return s if len(s) <= 60 else s[:57] + "…"


# ---------------------------------------------------------------------------------- HuggingFace config.json
HF_INT = {
    "hidden_size": "d_model", "num_hidden_layers": "n_layers", "num_attention_heads": "n_heads",
    "num_key_value_heads": "n_kv_heads", "head_dim": "head_dim", "vocab_size": "vocab_size",
    "intermediate_size": "d_ff", "intermediate_size_mlp": "d_ff", "moe_intermediate_size": "moe_d_ff",
    "shared_expert_intermediate_size": "moe_d_ff",
    "num_local_experts": "n_experts", "num_experts": "n_experts", "n_routed_experts": "n_experts",
    "num_experts_per_tok": "experts_per_token", "experts_per_token": "experts_per_token",
    "n_shared_experts": "n_shared_experts", "first_k_dense_replace": "first_k_dense",
    "moe_layer_freq": "moe_layer_freq", "decoder_sparse_step": "moe_layer_freq",
    "interleave_moe_layer_step": "moe_layer_freq", "num_nextn_predict_layers": "mtp_layers",
    "q_lora_rank": "q_lora_rank", "kv_lora_rank": "kv_lora_rank", "qk_nope_head_dim": "qk_nope_head_dim",
    "qk_rope_head_dim": "qk_rope_head_dim", "v_head_dim": "v_head_dim", "index_topk": "index_topk",
    "index_n_heads": "index_n_heads", "index_head_dim": "index_head_dim", "sliding_window": "sliding_window",
    "sliding_window_pattern": "kv_share", "attention_chunk_size": "sliding_window",
    "max_position_embeddings": "max_context", "full_attention_interval": "n_layers",
}
"""config.json integer keys and the ModelSpec field whose bound (rackmath.bounds.MODEL_INT_MAX) applies."""

HF_BOOL = ("tie_word_embeddings", "attention_bias", "use_sliding_window", "use_qk_norm")
HF_INT_LISTS = ("mlp_only_layers", "moe_layers", "no_rope_layers")
HF_STR_LISTS = ("layer_types",)
HF_TABLES = ("quantization_config", "text_config", "rope_scaling")


def check_hf_config(cfg, path: str) -> None:
    """Types and ranges of the config.json keys the importer reads (other keys are HF's business and
    ignored): integers are integers (not bools, not floats) within the ModelSpec bounds, booleans are
    booleans, lists are lists of the right element type and at most n_layers long, sub-configs are objects."""
    if not isinstance(cfg, dict):
        raise CatalogError(path, "config", f"expected a JSON object, got {type(cfg).__name__}")
    bounds.check_document(cfg, path, "config")
    for key, fld in HF_INT.items():
        v = cfg.get(key)
        if v is None:
            continue
        if isinstance(v, float) and v.is_integer() and key == "sliding_window":
            v = int(v)
        if not isinstance(v, int) or isinstance(v, bool):
            raise CatalogError(path, key, f"wrong type {type(v).__name__} (expected an integer)")
        hi = bounds.MODEL_INT_MAX.get(fld, 10**9)
        if not 0 <= v <= hi:
            raise CatalogError(path, key, f"{v} is out of range (accepted: 0 to {hi:,})")
    for key in HF_BOOL:
        v = cfg.get(key)
        if v is not None and not isinstance(v, bool):
            raise CatalogError(path, key, f"wrong type {type(v).__name__} (expected true or false)")
    n_max = bounds.MODEL_INT_MAX["n_layers"]
    for key in HF_INT_LISTS + HF_STR_LISTS:
        v = cfg.get(key)
        if v is None:
            continue
        want = str if key in HF_STR_LISTS else int
        if not isinstance(v, list) or not all(isinstance(i, want) and not isinstance(i, bool) for i in v):
            raise CatalogError(path, key, f"wrong type (expected a list of {'strings' if want is str else 'integers'})")
        if len(v) > n_max:
            raise CatalogError(path, key, f"{len(v):,} entries is too many (at most {n_max:,})")
    for key in HF_TABLES:
        v = cfg.get(key)
        if v is not None and not isinstance(v, dict):
            raise CatalogError(path, key, f"wrong type {type(v).__name__} (expected a JSON object)")
    if cfg.get("model_type") is not None and not isinstance(cfg["model_type"], str):
        raise CatalogError(path, "model_type", f"wrong type {type(cfg['model_type']).__name__} (expected a string)")
