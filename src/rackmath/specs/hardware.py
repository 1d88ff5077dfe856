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
from ..errors import CatalogError, InputError, UnknownNameError
from .catalog import Entry, Index, Problem, build_index, is_shipped, norm, register_cache, require
from .schema import register_dataclass

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
    memory_kind: str = "HBM"  # the main memory behind `hbm_bytes`/`hbm_bw`: HBM, or GDDR on PCIe/consumer cards
    generation: str = ""  # architecture generation ("Hopper", "CDNA 3", "Trillium" …), for grouping
    tdp_w: float | None = None  # board power (TDP/TGP), W
    host_power_w: float | None = None  # the chip's share of the rest of its server at full load, W
    typical_power_w: float | None = None  # measured draw while serving, W (None: a share of tdp_w, analyses/lecture/energy)

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

    def gemm_dtype(self, weights_dtype: str, compute_dtype: str | None = None) -> str:
        """The dtype whose peak a weight GEMM runs at on this chip: ``units.gemm_dtype`` (the wider of weights and
        activations; MXFP4 against MXFP8 where the chip has FP4 tensor cores), then the chip's own fallback."""
        return self.compute_dtype(units.gemm_dtype(weights_dtype, compute_dtype, fp4_chip="fp4" in self.flops))

    def gemm_flops(self, weights_dtype: str, compute_dtype: str | None = None) -> float:
        """Dense peak FLOP/s of a weight GEMM with ``weights_dtype`` weights: the peak of :meth:`gemm_dtype`."""
        return self.flops[self.gemm_dtype(weights_dtype, compute_dtype)]

    def gemm_fallback_note(self, weights_dtype: str | None, compute_dtype: str | None = None) -> str | None:
        """A sentence when this chip has no tensor cores for the dtype the weight GEMMs would multiply in and runs
        them at a wider dtype's rate (fp4 on an H100 → the fp8 rate), else None; the weights still take their
        own bytes in memory. Printed as a warning by the commands that take ``--weights-dtype``."""
        if weights_dtype is None:
            return None
        want = units.gemm_dtype(weights_dtype, compute_dtype, fp4_chip="fp4" in self.flops)
        got = self.gemm_dtype(weights_dtype, compute_dtype)
        if units.element_bits(got) <= units.element_bits(want):  # its own rate (NVFP4 on FP4 tensor cores)
            return None
        return (f"{self.name} has no {want.upper()} tensor cores: {units.normalize_dtype(weights_dtype)} weights take "
                f"{units.dtype_bytes(weights_dtype) * 8:g} bits each in memory but multiply at the {got} rate")

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

    def source(self, key: str) -> str:
        """The source of one figure ('flops.bf16', 'hbm', 'hbm_bandwidth', ...); '' when none is given."""
        return self.sources.get(key, "")

    def describe(self) -> dict:
        """Every figure in SI units with its source (for `hardware show --json`)."""
        return {
            "name": self.name,
            "kind": "chip",
            "vendor": self.vendor,
            "description": self.description,
            "status": self.status,
            "aliases": list(self.aliases),
            "default_system": self.default_system,
            "flops": dict(self.flops),
            "hbm_bytes": self.hbm_bytes,
            "hbm_bw": self.hbm_bw,
            "scaleup_bw": self.scaleup_bw,
            "scaleout_bw": self.scaleout_bw,
            "usd_per_hour": self.usd_per_hour,
            "generation": self.generation,
            "memory_kind": self.memory_kind,
            "tdp_w": self.tdp_w,
            "host_power_w": self.host_power_w,
            "typical_power_w": self.typical_power_w,
            "drain_time_s": self.drain_time_s,
            "hardware_ratio": {dt: hardware_ratio(self, dt) for dt in self.flops},
            "memory_tiers": [
                {"tier": t.tier, "capacity": t.capacity, "bandwidth": t.bandwidth,
                 "usd_per_gb_hour": t.usd_per_gb_hour, "drain_time_s": t.drain_time_s,
                 "description": t.description, "source": t.source}
                for t in self.memory_tiers
            ],
            "sources": dict(self.sources),
        }


register_dataclass("chip", Chip)


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
    system_power_w: float | None = None  # published maximum power of one scale-up system, W

    @property
    def hbm_bytes(self) -> float:
        return self.chip.hbm_bytes * self.scaleup_size

    @property
    def hbm_bw(self) -> float:
        return self.chip.hbm_bw * self.scaleup_size

    def peak_flops(self, dtype: str = "bf16") -> float:
        """Dense peak FLOP/s of the whole scale-up domain."""
        return self.chip.peak_flops(dtype) * self.scaleup_size

    @property
    def dies(self) -> int:
        return self.dies_per_chip * self.scaleup_size

    @property
    def scaleup_to_scaleout(self) -> float:
        """Per-chip scale-up over scale-out bandwidth (lecture R19: 'about 8x')."""
        return self.chip.scaleup_bw / self.chip.scaleout_bw

    def describe(self) -> dict:
        """The system and its chip, every figure in SI units with its source."""
        return {
            "name": self.name,
            "kind": "system",
            "description": self.description,
            "aliases": list(self.aliases),
            "chip": self.chip.name,
            "scaleup_size": self.scaleup_size,
            "max_chips": self.max_chips,
            "dies_per_chip": self.dies_per_chip,
            "dies": self.dies,
            "topology": self.topology,
            "hop_latency_s": self.hop_latency_s,
            "system_power_w": self.system_power_w,
            "hbm_bytes": self.hbm_bytes,
            "hbm_bw": self.hbm_bw,
            "flops": {dt: self.peak_flops(dt) for dt in self.chip.flops},
            "scaleup_bw_total": self.chip.scaleup_bw * self.scaleup_size,
            "scaleup_to_scaleout": self.scaleup_to_scaleout,
            "usd_per_hour": self.chip.usd_per_hour * self.scaleup_size,
            "sources": dict(self.sources),
            "chip_spec": self.chip.describe(),
        }


register_dataclass("system", System)


def _q(entry: Entry, key: str, kind: str, required: bool = True, default=None, allow_zero: bool = False):
    if key not in entry.data:
        if required:
            require(entry, key)
        return default
    try:
        v = units.parse_quantity(entry.data[key], kind, f"{entry.kind}.{key}")
    except InputError as exc:
        raise CatalogError(str(entry.path), f"{entry.kind}.{key}", exc.problem) from None
    if v == 0 and not allow_zero:
        raise CatalogError(str(entry.path), f"{entry.kind}.{key}", f"{entry.data[key]!r} must be positive")
    return v


def _names(entry: Entry, key: str = "aliases") -> tuple:
    v = entry.data.get(key, ())
    if isinstance(v, str) or not isinstance(v, (list, tuple)) or not all(isinstance(a, str) for a in v):
        raise CatalogError(str(entry.path), f"{entry.kind}.{key}", "expected a list of strings")
    return tuple(v)


def _sources(entry: Entry) -> dict:
    v = entry.data.get("sources", {})
    if not isinstance(v, dict):
        raise CatalogError(str(entry.path), f"{entry.kind}.sources", "expected a table of field = \"source\"")
    return {str(k): str(x) for k, x in v.items()}


#: Architecture generations in release order within each vendor (for `hardware list`).
GENERATIONS = ("Ampere", "Ada", "Hopper", "Blackwell", "Blackwell Ultra", "Rubin", "Rubin Ultra",
               "CDNA 3", "CDNA 4", "TPU v4", "TPU v5e", "TPU v5p", "Trillium", "Ironwood", "Gaudi 3", "Trainium 2")

_TIERS = ("ddr", "flash", "disk")
_MEMORY_KINDS = ("HBM", "GDDR6", "GDDR6X", "GDDR7")
_STATUS = ("shipping", "announced")
_TOPOLOGY = ("switched", "torus")


def _choice(entry: Entry, key: str, choices: tuple, default: str) -> str:
    v = entry.data.get(key, default)
    if not isinstance(v, str) or v not in choices:
        raise CatalogError(str(entry.path), f"{entry.kind}.{key}",
                           f"{v!r} is not accepted (accepted: {', '.join(choices)})")
    return v


def _int(entry: Entry, key: str, default):
    if key not in entry.data:
        return default
    v = entry.data[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise CatalogError(str(entry.path), f"{entry.kind}.{key}", f"{v!r} is not a positive integer")
    return v


def _float(entry: Entry, key: str):
    if key not in entry.data:
        return None
    v = entry.data[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (v >= 0) or v == float("inf"):
        raise CatalogError(str(entry.path), f"{entry.kind}.{key}", f"{v!r} is not a non-negative number")
    return float(v)


#: Largest power figure accepted in a catalog (W): a whole NVL576-class rack is ~600 kW.
MAX_POWER_W = 1e7


def _power(entry: Entry, key: str, allow_zero: bool = False):
    """A power figure in watts (a plain number), or None when absent."""
    v = _float(entry, key)
    if v is None:
        return None
    if (v == 0 and not allow_zero) or v > MAX_POWER_W:
        raise CatalogError(str(entry.path), f"{entry.kind}.{key}",
                           f"{v!r} W is not accepted (accepted: {'0' if allow_zero else 'above 0'} to {MAX_POWER_W:.0e} W)")
    return v


def _parse_tiers(entry: Entry) -> tuple:
    raw = entry.data.get("memory_tiers", [])
    if not isinstance(raw, list):
        raise CatalogError(str(entry.path), "chip.memory_tiers", "expected an array of tables ([[chip.memory_tiers]])")
    tiers = []
    for i, t in enumerate(raw):
        if not isinstance(t, dict):
            raise CatalogError(str(entry.path), f"chip.memory_tiers[{i}]", "expected a table")
        sub = Entry(f"chip.memory_tiers[{i}]", t, entry.path)
        tiers.append(MemoryTier(
            tier=_choice(sub, "tier", _TIERS, None),
            capacity=_q(sub, "capacity", "bytes"),
            bandwidth=_q(sub, "bandwidth", "bandwidth"),
            usd_per_gb_hour=_float(sub, "usd_per_gb_hour"),
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
    for dt, v in flops.items():  # a narrower format never runs slower than bf16 (a typo or a sparse figure)
        if units.DTYPE_BYTES[dt] < units.DTYPE_BYTES["bf16"] and v < flops["bf16"]:
            raise CatalogError(str(entry.path), f"chip.flops.{dt}",
                               f"{v:.4g} FLOP/s is below the bf16 peak {flops['bf16']:.4g} "
                               f"(accepted: a dense {dt} peak ≥ the bf16 peak)")
    return Chip(
        name=str(require(entry, "name", (str,))),
        vendor=str(d.get("vendor", "")),
        description=str(d.get("description", "")),
        flops=flops,
        hbm_bytes=_q(entry, "hbm", "bytes"),
        hbm_bw=_q(entry, "hbm_bandwidth", "bandwidth"),
        scaleup_bw=_q(entry, "scaleup_bandwidth", "bandwidth"),
        scaleout_bw=_q(entry, "scaleout_bandwidth", "bandwidth"),
        usd_per_hour=_q(entry, "usd_per_hour", "usd_per_hour", allow_zero=True),
        default_system=str(require(entry, "default_system", (str,))),
        aliases=_names(entry),
        memory_tiers=_parse_tiers(entry),
        status=_choice(entry, "status", _STATUS, "shipping"),
        sources=_sources(entry),
        generation=str(d.get("generation", "")),
        memory_kind=_choice(entry, "memory_kind", _MEMORY_KINDS, "HBM"),
        tdp_w=_power(entry, "tdp_w"),
        host_power_w=_power(entry, "host_power_w", allow_zero=True),
        typical_power_w=_power(entry, "typical_power_w"),
    )


def _parse_system(entry: Entry, cidx: Index) -> System:
    d = entry.data
    name = str(require(entry, "name", (str,)))
    chip_name = require(entry, "chip", (str,))
    if cidx.is_bad(chip_name):  # a skipped user chip: the system is unusable for the chip's reason
        e = cidx.bad[norm(chip_name)].error
        raise CatalogError(getattr(e, "path", str(entry.path)), getattr(e, "field", "system.chip"),
                           f"{getattr(e, 'problem', e)} (chip {chip_name!r} of system {name!r})")
    if chip_name not in cidx:
        raise CatalogError(str(entry.path), "system.chip",
                           f"unknown chip {chip_name!r} (accepted: one of {', '.join(cidx.primary)})")
    size = require(entry, "scaleup_size", (int,))
    if isinstance(size, bool) or size < 1:
        raise CatalogError(str(entry.path), "system.scaleup_size", f"{size!r} is not a positive integer")
    max_chips = _int(entry, "max_chips", None)
    if max_chips is not None and max_chips < size:
        raise CatalogError(str(entry.path), "system.max_chips", f"{max_chips} is smaller than scaleup_size {size}")
    return System(
        name=name,
        chip=cidx.get(chip_name),
        scaleup_size=int(size),
        description=str(d.get("description", "")),
        aliases=_names(entry),
        max_chips=max_chips,
        dies_per_chip=_int(entry, "dies_per_chip", 1),
        hop_latency_s=_q(entry, "hop_latency", "duration", required=False, default=2e-3, allow_zero=True),
        topology=_choice(entry, "topology", _TOPOLOGY, "switched"),
        sources=_sources(entry),
        system_power_w=_power(entry, "system_power_w"),
    )


_chip_paths: dict[str, str] = {}
_CHIP_HINT = "a chip name such as h100, b200, tpu-v5e (see `rackmath hardware list`)"


@register_cache
@lru_cache(maxsize=1)
def _parsed_chips() -> Index:
    """Every chip entry that parses (the systems are built from these)."""
    _chip_paths.clear()

    def parse(e):
        c = _parse_chip(e)
        _chip_paths[c.name] = str(e.path)
        return c

    return build_index("chip", "chip", _CHIP_HINT, parse)


@register_cache
@lru_cache(maxsize=1)
def chips() -> Index:
    """All chips (shipped and user catalogs), by name and alias. A user chip that is bad, or whose standard
    system (``default_system``) is unknown or skipped, is skipped: its name raises the error and enumerating
    the index reports it (shipped data is checked strictly: it raises)."""
    raw, sidx = _parsed_chips(), systems()
    idx = Index("chip", _CHIP_HINT)
    for c in raw.primary.values():
        p = sidx.chip_problems.get(c.name)
        if p is not None:
            idx.skip(p)
        else:
            idx.add(c, c.name, c.aliases, where=_chip_paths.get(c.name))
    for p in raw.skipped:
        idx.skip(p)
    return idx


@register_cache
@lru_cache(maxsize=1)
def systems() -> Index:
    """All scale-up systems by name and alias; every chip name and alias maps to its default system.

    A bad user system, a system built from a skipped chip, and a user chip whose default system is unknown or
    skipped are left out: their names raise their errors (shipped data is checked strictly)."""
    cidx = _parsed_chips()
    idx = Index("hardware", "a system or chip name such as hgx-h100, gb200-nvl72, tpu-v5e "
                            "(see `rackmath hardware list`)")
    idx.chip_problems = {}  # chip name -> why it has no usable standard system
    sys_paths: dict[str, str] = {}

    def parse(e):
        sysobj = _parse_system(e, cidx)
        sys_paths[sysobj.name] = str(e.path)
        return sysobj

    build_index("system", "hardware", "", parse, idx)
    for p in cidx.skipped:  # a skipped chip's names mean its system: they raise the chip's error here too
        idx.skip(p, warn=False)
    # A chip name means that chip in its standard scale-up system.
    for c in cidx.primary.values():
        path = _chip_paths.get(c.name, "catalog")
        names = (c.name, *c.aliases)
        err, shipped = None, is_shipped(path)
        if idx.is_bad(c.default_system):
            shipped = False  # a user entry replaced the system badly
            e = idx.bad[norm(c.default_system)].error
            err = CatalogError(getattr(e, "path", path), getattr(e, "field", "chip.default_system"),
                               f"{getattr(e, 'problem', e)} (system {c.default_system!r}, the default_system of "
                               f"chip {c.name!r})")
        elif c.default_system not in idx:
            err = CatalogError(path, "chip.default_system", f"{c.name}: unknown system {c.default_system!r} "
                                                            f"(accepted: one of {', '.join(idx.primary)})")
        else:
            sysobj = idx.get(c.default_system)
            if sysobj.chip.name != c.name:
                shipped = shipped and is_shipped(sys_paths.get(sysobj.name, ""))
                err = CatalogError(path, "chip.default_system", f"{c.name}: system {sysobj.name!r} is built from "
                                                                f"{sysobj.chip.name!r}, not {c.name!r}")
        if err is not None:
            if shipped:  # a bug in the package's own data
                raise err
            p = Problem(path, "chip", c.name, err, tuple(c.aliases))
            idx.chip_problems[c.name] = p
            idx.skip(p, warn=False, names=names)
            continue
        for n in names:
            if n not in idx:
                idx.by_name[norm(n)] = sysobj
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
    idx = systems()
    if name in idx:
        return idx.get(name)
    idx.check_bad(name)  # a skipped user entry of that name: its own error
    # Offer chip names too: a chip name means its standard system.
    raise UnknownNameError(idx.field, name, [*idx.primary, *chips().primary], idx.hint)


def priced(hardware, usd_per_hour) -> System:
    """``hardware`` (a name or System) with its chip rented at ``usd_per_hour`` dollars per GPU-hour (a number);
    unchanged when None. The price is the hardware's: every analysis that prices chip time reads the chip's
    ``usd_per_hour`` (``options.priced`` parses ``--usd-per-gpu-hour`` and calls this)."""
    if usd_per_hour is None:
        return hardware
    import dataclasses

    hw = load_hardware(hardware)
    return dataclasses.replace(hw, chip=dataclasses.replace(hw.chip, usd_per_hour=float(usd_per_hour)))


def hardware_ratio(chip: Chip, dtype: str = "bf16") -> float:
    """The lecture's dimensionless hardware ratio (00:15, R5).

    ratio = (FLOP/s / 2) / (bytes/s / bytes_per_param): multiply-accumulates per
    second over parameters streamed per second, for weights stored in ``dtype``
    and multiplied at the peak of :meth:`Chip.gemm_dtype` (W8A8 FP8 at the FP8 rate; weight-only INT4 at the
    BF16 rate). "On most GPUs this ends up ~300."
    """
    bpp = units.dtype_bytes(dtype)
    return (chip.gemm_flops(dtype) / 2) / (chip.hbm_bw / bpp)
