"""Training records: published training throughput as catalog data (issue 38).

``[[train_record]]`` tables in ``rackmath/specs/data/training/*.toml`` (written by
``benchmarks/convert_training.py`` from the compilation in ``../shared/reference/training``), one per published
row: the run's inputs as rackmath reads them, what it measured, and its source. The schema is :data:`FIELDS`
(name → (type, required, meaning)); an unknown or mistyped field is a :class:`~rackmath.errors.CatalogError`
naming the file, the record and the field. A record rackmath cannot predict keeps ``exclude`` (one line why);
``holdout`` records are predicted but never fitted.

Measured metric: ``tokens_per_s_per_gpu`` where the source prints it; otherwise TFLOP/s/GPU (or MFU × peak) in
the source's own FLOP formula (``flop_formula``: :data:`FLOP_FORMULAS`), which
``analyses.fitting.training`` turns into tokens/s with that same formula — never another source's.
"""

from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from ..errors import CatalogError, UnknownNameError
from .records import hardware_family as family, model_family as serving_family

DATA = Path(__file__).parent / "data" / "training"

FRAMEWORKS = ("megatron", "fsdp")  # Megatron-LM / NeMo / Megatron-Bridge; FSDP-only stacks (llm-foundry)
SHARDINGS = ("none", "shard_grad_op", "full_shard")
RECOMPUTES = ("none", "selective", "full")
FLOP_FORMULAS = ("megatron", "megatron-bridge", "nemo", "narayanan-recompute", "korthikanti", "mosaic", "causal-6nd")
TRAIN_DTYPES = ("bf16", "fp8", "mxfp8", "nvfp4")

#: name → (python type, required, meaning)
FIELDS = {
    "id": (str, True, "unique record id (the compilation's)"),
    "source_group": (str, True, "the publication: megatron-bridge, nemo-24.07, llm-foundry, megatron-lm, papers"),
    "software": (str, True, "software release (container or commit): the unit of leave-one-release-out"),
    "task": (str, True, "pretrain, sft or lora"),
    "model_in_source": (str, True, "the model's name as the source prints it"),
    "model": (str, False, "catalog model name"),
    "chip": (str, False, "catalog chip name"),
    "nvlink_domain": (int, True, "GPUs per NVLink (scale-up) domain: 8 for HGX/DGX boxes, 72 for NVL72 racks"),
    "system_in_source": (str, False, "the system as the source names it"),
    "gpus": (int, False, "GPUs of the run"),
    "dtype": (str, False, "GEMM precision: bf16, fp8 (tensor-scaled), mxfp8, nvfp4"),
    "dtype_in_source": (str, False, "the precision as printed"),
    "seq": (int, False, "sequence length (tokens)"),
    "global_batch": (float, False, "sequences per optimizer step"),
    "micro_batch": (int, False, "sequences per micro-batch"),
    "tp": (int, True, "tensor-parallel degree"), "pp": (int, True, "pipeline stages"),
    "cp": (int, True, "context-parallel degree"), "ep": (int, True, "expert-parallel degree"),
    "vp": (int, True, "virtual (interleaved) stages per pipeline rank; 0 = not stated (analyses.training.model.default_vp)"),
    "dp": (int, False, "data-parallel degree = GPUs / (TP·PP·CP)"),
    "sharding": (str, True, "none, shard_grad_op (ZeRO-2) or full_shard (ZeRO-3 / FSDP)"),
    "fsdp_group": (int, False, "GPUs a Megatron-FSDP sharding group spans"),
    "recompute": (str, True, "activation recompute: none, selective or full"),
    "layout": (str, False, "searched: the source ran its best layout without saying which (rackmath's search)"),
    "grad_accum": (int, False, "gradient-accumulation steps as printed"),
    "framework": (str, True, "megatron (Megatron-LM / NeMo / Megatron-Bridge) or fsdp (llm-foundry)"),
    "optimizer": (str, False, "adam (default) or muon"),
    "tokens_per_s_per_gpu": (float, False, "measured tokens/s per GPU"),
    "tflops_per_gpu": (float, False, "measured TFLOP/s per GPU in the source's FLOP formula"),
    "mfu_pct": (float, False, "MFU in % with the source's definition"),
    "hfu_pct": (float, False, "hardware FLOP utilisation in % (recompute counted)"),
    "step_time_s": (float, False, "seconds per optimizer step as printed"),
    "flop_formula": (str, True, "the FLOP formula of tflops_per_gpu / mfu_pct"),
    "mfu_definition": (str, False, "the source's MFU definition, verbatim from the compilation"),
    "status": (str, False, "V (read in the primary source), S (secondary), D (derived)"),
    "source": (str, True, "repository path commit"),
    "url": (str, False, "URL"), "section": (str, False, "section / table of the source"),
    "notes": (str, False, "notes"), "assumptions": (list, False, "inputs the source does not state, as assumed"),
    "holdout": (str, False, "predicted, never fitted (why)"),
    "exclude": (str, False, "not predicted (why)"),
}

def hardware_family(chip: str) -> str:
    """ampere / hopper / blackwell from a catalog chip name: ``records.hardware_family``, the one chip → family table
    (other chips are their own family)."""
    return family(chip)


#: Model families of the training records that the serving records' ``records.model_family`` does not know.
_TRAIN_MODEL_FAMILIES = (("mpt", "mpt"), ("megatron-gpt", "gpt"), ("gpt-oss", "gpt-oss"), ("gpt", "gpt"),
                         ("nemotron", "nemotron"))


def model_family(model: str) -> str:
    """mpt, gpt (GPT-3 and the Megatron GPTs), nemotron, then ``records.model_family`` (llama, deepseek, qwen, …)."""
    m = str(model).lower()
    return next((fam for p, fam in _TRAIN_MODEL_FAMILIES if m.startswith(p)), None) or serving_family(m)


@dataclass(frozen=True)
class TrainRecord:
    id: str
    source_group: str
    software: str
    task: str
    model_in_source: str
    source: str
    flop_formula: str
    framework: str = "megatron"
    model: str = ""
    chip: str = ""
    nvlink_domain: int = 8
    system_in_source: str = ""
    gpus: int | None = None
    dtype: str = ""
    dtype_in_source: str = ""
    seq: int | None = None
    global_batch: float | None = None
    micro_batch: int | None = None
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    vp: int = 1
    dp: int | None = None
    sharding: str = "none"
    fsdp_group: int | None = None
    recompute: str = "selective"
    layout: str = ""
    grad_accum: int | None = None
    optimizer: str = "adam"
    tokens_per_s_per_gpu: float | None = None
    tflops_per_gpu: float | None = None
    mfu_pct: float | None = None
    hfu_pct: float | None = None
    step_time_s: float | None = None
    mfu_definition: str = ""
    status: str = ""
    url: str = ""
    section: str = ""
    notes: str = ""
    assumptions: tuple = ()
    holdout: str = ""
    exclude: str = ""
    path: str = field(default="", compare=False)

    @property
    def hardware_family(self) -> str:
        return hardware_family(self.chip)

    @property
    def model_family(self) -> str:
        return model_family(self.model or self.model_in_source)

    @property
    def modelled(self) -> bool:
        return not self.exclude

    @property
    def fitted(self) -> bool:
        return not self.exclude and not self.holdout


def _check(data: dict, path: str) -> dict:
    rid = str(data.get("id", "?"))
    out = {}
    for k, v in data.items():
        if k not in FIELDS:
            near = difflib.get_close_matches(k, FIELDS, n=1)
            raise CatalogError(path, f"train_record.{k}", f"{rid!r}: unknown field"
                               + (f" (did you mean {near[0]}?)" if near else ""))
        typ = FIELDS[k][0]
        if typ is float and isinstance(v, int) and not isinstance(v, bool):
            v = float(v)
        if typ is list:
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise CatalogError(path, f"train_record.{k}", f"{rid!r}: expected a list of strings")
            v = tuple(v)
        elif isinstance(v, bool) or not isinstance(v, typ):
            raise CatalogError(path, f"train_record.{k}", f"{rid!r}: expected {typ.__name__}, got {v!r}")
        if typ in (int, float) and not (v >= 0):
            raise CatalogError(path, f"train_record.{k}", f"{rid!r}: {v!r} is negative")
        out[k] = v
    for k, (_, req, _) in FIELDS.items():
        if req and k not in out:
            raise CatalogError(path, f"train_record.{k}", f"{rid!r}: missing")
    for k, allowed in (("framework", FRAMEWORKS), ("sharding", SHARDINGS), ("recompute", RECOMPUTES),
                       ("flop_formula", FLOP_FORMULAS)):
        if out[k] not in allowed:
            raise CatalogError(path, f"train_record.{k}", f"{rid!r}: {out[k]!r} (accepted: {', '.join(allowed)})")
    if out.get("dtype") and out["dtype"] not in TRAIN_DTYPES:
        raise CatalogError(path, "train_record.dtype", f"{rid!r}: {out['dtype']!r} (accepted: {', '.join(TRAIN_DTYPES)})")
    for k in ("tp", "pp", "cp", "ep", "nvlink_domain"):
        if out[k] < 1:
            raise CatalogError(path, f"train_record.{k}", f"{rid!r}: must be ≥ 1")
    return out


def parse(text: str, path: str = "<string>") -> list[TrainRecord]:
    """``[[train_record]]`` tables of one TOML text → records (a duplicate id is an error)."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(path, "toml", f"malformed TOML: {exc}") from None
    seen, out = set(), []
    for d in doc.get("train_record", []):
        r = TrainRecord(**_check(d, path), path=path)
        if r.id in seen:
            raise CatalogError(path, "train_record.id", f"{r.id!r} defined twice")
        seen.add(r.id)
        out.append(r)
    return out


@lru_cache(maxsize=1)
def shipped() -> tuple[TrainRecord, ...]:
    """Every shipped training record (specs/data/training/*.toml)."""
    out = []
    for p in sorted(DATA.glob("*.toml")):
        if p.name == "presets.toml":
            continue
        out.extend(parse(p.read_text(), str(p)))
    return tuple(out)


__all__ = ["TrainRecord", "FIELDS", "FRAMEWORKS", "SHARDINGS", "RECOMPUTES", "parse", "shipped", "hardware_family",
           "model_family"]


# --------------------------------------------------------------------------------------
# Training presets: the fitted parameters of the step model per hardware family × framework family
# --------------------------------------------------------------------------------------

PRESET_NUMERIC = ("eta_gemm", "tau_layer_s", "eta_attn", "lowp_ratio", "rows_half", "width_half", "k_elem",
                  "eta_comm", "tau_expert_s")


@dataclass(frozen=True)
class TrainPreset:
    """``[[train_preset]]`` (specs/data/training/presets.toml): the step model's parameters
    (``analyses.training.step.TRAIN_PARAMS``) for one hardware family and framework family, with what they were fitted on
    and their validated error (leave-one-source-out median |error| of the group's records)."""

    name: str
    family: str = ""
    framework: str = ""
    params: dict = field(default_factory=dict)
    records: int = 0
    error_band: float | None = None
    cross_family: bool = False
    description: str = ""
    source: str = ""

    def label(self) -> str:
        how = "leave-one-hardware-family-out" if self.cross_family else "leave-one-source-out"
        band = f"validated error ±{self.error_band * 100:.0f}% {how}" if self.error_band else "not validated"
        what = "cross-family preset (no preset fitted on this family and framework)" if self.cross_family else "preset"
        return f"calibrated prediction, {what} {self.name} ({band})"


def parse_presets(text: str, path: str = "<string>") -> list[TrainPreset]:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(path, "toml", f"malformed TOML: {exc}") from None
    out = []
    for d in doc.get("train_preset", []):
        name = d.get("name")
        if not isinstance(name, str) or not name:
            raise CatalogError(path, "train_preset.name", "missing")
        params = {}
        for k in PRESET_NUMERIC:
            v = d.get(k)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
                raise CatalogError(path, f"train_preset.{k}", f"{name!r}: expected a number ≥ 0, got {v!r}")
            params[k] = float(v)
        extra = set(d) - set(PRESET_NUMERIC) - {"name", "family", "framework", "records", "error_band",
                                                 "cross_family", "description", "source"}
        if extra:
            raise CatalogError(path, f"train_preset.{sorted(extra)[0]}", f"{name!r}: unknown field")
        out.append(TrainPreset(name=name, family=str(d.get("family", "")), framework=str(d.get("framework", "")),
                               params=params, records=int(d.get("records", 0)), error_band=d.get("error_band"),
                               cross_family=bool(d.get("cross_family", False)),
                               description=str(d.get("description", "")), source=str(d.get("source", ""))))
    return out


@lru_cache(maxsize=1)
def presets() -> tuple[TrainPreset, ...]:
    p = DATA / "presets.toml"
    return tuple(parse_presets(p.read_text(), str(p))) if p.exists() else ()


def preset_for(chip: str, framework: str = "megatron") -> TrainPreset | None:
    """The preset of the chip's family and the framework family; else the cross-family preset; None if neither."""
    fam = hardware_family(chip)
    cross = None
    for p in presets():
        if p.family == fam and p.framework == framework:
            return p
        if p.cross_family and cross is None:
            cross = p
    return cross


def load_preset(name: str) -> TrainPreset:
    for p in presets():
        if p.name == name.lower():
            return p
    raise UnknownNameError("efficiency", name, [p.name for p in presets()]) if presets() else \
        CatalogError(str(DATA / "presets.toml"), "train_preset", "no training presets shipped")
