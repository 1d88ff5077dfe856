"""Hardware: chips, scale-up systems and the memory tiers behind them.

Everything is stored as plain SI floats (FLOP/s dense, bytes, bytes/s, $/h).
Catalog TOML uses human strings ("3.35 TB/s", "989.4 TFLOP/s") parsed by
:mod:`rackmath.units`; every number carries a source in ``sources``.

Bandwidth conventions (stated once, used everywhere):

* ``scaleup_bw`` and ``scaleout_bw`` are **per chip, per direction** (bytes/s one
  way). NVIDIA quotes NVLink bidirectionally: H100's "900 GB/s" is 450 GB/s
  each way. A 400 Gb/s NIC is 50 GB/s each way.
* FLOP/s are **dense** peaks per dtype (2:4-sparse headline figures halved).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from .. import units
from ..errors import CatalogError, InputError
from .catalog import Entry, Index, entries, register_cache, require

# Wider dtypes a chip falls back to when it has no peak for the requested one.
_FALLBACK = {
    "fp4": ("fp4", "fp8", "bf16"),
    "mxfp4": ("fp4", "fp8", "bf16"),
    "nvfp4": ("fp4", "fp8", "bf16"),
    "int4": ("int4", "int8", "fp8", "bf16"),
    "fp8": ("fp8", "bf16"),
    "int8": ("int8", "fp8", "bf16"),
    "bf16": ("bf16",),
    "fp16": ("bf16",),
    "fp32": ("fp32", "bf16"),
    "tf32": ("tf32", "bf16"),
}


@dataclass(frozen=True)
class MemoryTier:
    """One tier of memory available to a chip: capacity and bandwidth are the chip's share."""

    tier: str  # "hbm", "ddr", "flash", "disk"
    capacity: float  # bytes per chip
    bandwidth: float  # bytes/s per chip (read)
    usd_per_gb_hour: float | None = None
    description: str = ""
    source: str = ""

    @property
    def drain_time_s(self) -> float:
        """Drain time = capacity / bandwidth (lecture ~00:25, R10/R41)."""
        return self.capacity / self.bandwidth


@dataclass(frozen=True)
class Chip:
    name: str
    vendor: str
    description: str
    flops: dict  # dtype -> dense FLOP/s
    hbm_bytes: float
    hbm_bw: float
    scaleup_bw: float  # per chip, per direction
    scaleout_bw: float  # per chip, per direction
    usd_per_hour: float
    default_system: str
    aliases: tuple = ()
    memory_tiers: tuple = ()  # host tiers below HBM (MemoryTier), chip's share
    status: str = "shipping"  # or "announced"
    sources: dict = field(default_factory=dict, compare=False, hash=False)

    def compute_dtype(self, dtype: str) -> str:
        """The dtype whose peak is used for matmuls with operands of ``dtype`` (fp4 on H100 -> fp8)."""
        d = units.normalize_dtype(dtype)
        for cand in _FALLBACK.get(d, (d, "bf16")):
            if cand in self.flops:
                return cand
        raise InputError("dtype", f"{self.name} has no FLOP/s figure for {dtype!r}", "one of " + ", ".join(self.flops))

    def peak_flops(self, dtype: str = "bf16") -> float:
        """Dense peak FLOP/s for matmuls in ``dtype`` (falling back to a wider dtype the chip has)."""
        return self.flops[self.compute_dtype(dtype)]

    def tier(self, name: str) -> MemoryTier:
        """A memory tier by name; 'hbm' is always available."""
        if name == "hbm":
            return MemoryTier("hbm", self.hbm_bytes, self.hbm_bw, None, "on-package HBM", self.sources.get("hbm", ""))
        for t in self.memory_tiers:
            if t.tier == name:
                return t
        raise InputError("tier", f"{self.name} has no {name!r} tier",
                         "one of hbm, " + ", ".join(t.tier for t in self.memory_tiers))

    @property
    def drain_time_s(self) -> float:
        """HBM drain time = capacity / bandwidth (lecture ~00:25, R10)."""
        return self.hbm_bytes / self.hbm_bw


@dataclass(frozen=True)
class System:
    """A scale-up domain product (HGX box, NVL72 rack, TPU pod) built from one chip."""

    name: str
    chip: Chip
    scaleup_size: int  # chips in one scale-up (NVLink/ICI) domain
    description: str = ""
    aliases: tuple = ()
    max_chips: int | None = None  # largest deployment sold as one system (a pod); None = scale-out freely
    dies_per_chip: int = 1
    hop_latency_s: float = 2e-3  # scale-out hop between domains (lecture 01:12: "a few ms", ±10x)
    topology: str = "switched"  # "switched" (all-to-all crossbar) or "torus"
    sources: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def hbm_bytes(self) -> float:
        return self.chip.hbm_bytes * self.scaleup_size

    @property
    def hbm_bw(self) -> float:
        return self.chip.hbm_bw * self.scaleup_size


def _q(entry: Entry, key: str, kind: str, required: bool = True, default=None):
    if key not in entry.data:
        if required:
            require(entry, key)
        return default
    try:
        return units.parse_quantity(entry.data[key], kind, f"{entry.kind}.{key}")
    except InputError as exc:
        raise CatalogError(str(entry.path), f"{entry.kind}.{key}", exc.problem) from None


def _parse_tiers(entry: Entry) -> tuple:
    tiers = []
    for i, t in enumerate(entry.data.get("memory_tiers", [])):
        sub = Entry(f"chip.memory_tiers[{i}]", t, entry.path)
        tiers.append(MemoryTier(
            tier=str(require(sub, "tier", (str,))),
            capacity=_q(sub, "capacity", "bytes"),
            bandwidth=_q(sub, "bandwidth", "bandwidth"),
            usd_per_gb_hour=float(t["usd_per_gb_hour"]) if "usd_per_gb_hour" in t else None,
            description=str(t.get("description", "")),
            source=str(t.get("source", "")),
        ))
    return tuple(tiers)


def _parse_chip(entry: Entry) -> Chip:
    d = entry.data
    flops_tbl = require(entry, "flops", (dict,))
    flops = {}
    for dt, v in flops_tbl.items():
        try:
            key = units.normalize_dtype(dt, f"chip.flops.{dt}")
            flops[key] = units.parse_flops(v, f"chip.flops.{dt}")
        except InputError as exc:
            raise CatalogError(str(entry.path), f"chip.flops.{dt}", exc.problem) from None
    if "bf16" not in flops:
        raise CatalogError(str(entry.path), "chip.flops.bf16", "missing (every chip needs a dense bf16 peak)")
    return Chip(
        name=str(require(entry, "name", (str,))),
        vendor=str(d.get("vendor", "")),
        description=str(d.get("description", "")),
        flops=flops,
        hbm_bytes=_q(entry, "hbm", "bytes"),
        hbm_bw=_q(entry, "hbm_bandwidth", "bandwidth"),
        scaleup_bw=_q(entry, "scaleup_bandwidth", "bandwidth"),
        scaleout_bw=_q(entry, "scaleout_bandwidth", "bandwidth"),
        usd_per_hour=_q(entry, "usd_per_hour", "usd_per_hour"),
        default_system=str(require(entry, "default_system", (str,))),
        aliases=tuple(d.get("aliases", ())),
        memory_tiers=_parse_tiers(entry),
        status=str(d.get("status", "shipping")),
        sources=dict(d.get("sources", {})),
    )


@lru_cache(maxsize=1)
@register_cache
def chips() -> Index:
    idx = Index("chip", "a chip name such as h100, b200, tpu-v5e (see `rackmath hardware list`)")
    for e in entries("chip"):
        c = _parse_chip(e)
        idx.add(c, c.name, c.aliases)
    return idx


@lru_cache(maxsize=1)
@register_cache
def systems() -> Index:
    cidx = chips()
    idx = Index("hardware", "a system or chip name such as hgx-h100, gb200-nvl72, tpu-v5e (see `rackmath hardware list`)")
    for e in entries("system"):
        d = e.data
        chip_name = require(e, "chip", (str,))
        if chip_name not in cidx:
            raise CatalogError(str(e.path), "system.chip", f"unknown chip {chip_name!r}")
        size = require(e, "scaleup_size", (int,))
        if size < 1:
            raise CatalogError(str(e.path), "system.scaleup_size", "must be a positive integer")
        s = System(
            name=str(require(e, "name", (str,))),
            chip=cidx.get(chip_name),
            scaleup_size=int(size),
            description=str(d.get("description", "")),
            aliases=tuple(d.get("aliases", ())),
            max_chips=int(d["max_chips"]) if "max_chips" in d else None,
            dies_per_chip=int(d.get("dies_per_chip", 1)),
            hop_latency_s=_q(e, "hop_latency", "duration", required=False, default=2e-3),
            topology=str(d.get("topology", "switched")),
            sources=dict(d.get("sources", {})),
        )
        idx.add(s, s.name, s.aliases)
    # A chip name means that chip in its standard scale-up system.
    for c in cidx.values():
        if c.default_system not in idx:
            raise CatalogError("catalog", f"chip.default_system", f"{c.name}: unknown system {c.default_system!r}")
        sysobj = idx.get(c.default_system)
        for n in (c.name, *c.aliases):
            if n not in idx:
                idx.by_name[n.lower().replace("_", "-").replace(" ", "-")] = sysobj
    return idx


def load_chip(name) -> Chip:
    """A chip by name or alias (case-insensitive); a System gives its chip."""
    if isinstance(name, Chip):
        return name
    if isinstance(name, System):
        return name.chip
    return chips().get(name)


def load_hardware(name) -> System:
    """A scale-up system by name; a chip name means that chip in its standard system."""
    if isinstance(name, System):
        return name
    if isinstance(name, Chip):
        return systems().get(name.default_system)
    return systems().get(name)


def hardware_ratio(chip: Chip, dtype: str = "bf16") -> float:
    """The lecture's dimensionless hardware ratio (00:15, R5).

    ratio = (FLOP/s / 2) / (bytes/s / bytes_per_param): multiply-accumulates per
    second over parameters streamed per second, for weights stored in ``dtype``
    and multiplied at that dtype's peak. "On most GPUs this ends up ~300."
    """
    bpp = units.dtype_bytes(dtype)
    return (chip.peak_flops(dtype) / 2) / (chip.hbm_bw / bpp)
