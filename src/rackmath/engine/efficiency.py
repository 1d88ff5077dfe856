"""Efficiency presets: how far a real stack falls short of the ideal roofline.

The lecture's roofline is the ideal: η = 1 everywhere and no fixed costs. A preset
scales peak FLOP/s (η_compute), HBM bandwidth (η_memory) and network bandwidth
(η_comm), and adds a fixed time per step (kernel launches, scheduling). Presets are
data (``[[efficiency]]`` tables in the catalog), each with its source.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from ..errors import CatalogError, InputError
from ..specs.catalog import Index, build_index, register_cache


@dataclass(frozen=True)
class Efficiency:
    name: str = "ideal"
    eta_compute: float = 1.0
    eta_memory: float = 1.0
    eta_comm: float = 1.0
    step_overhead_s: float = 0.0
    description: str = "the lecture's ideal roofline: peak FLOP/s and bandwidth, no fixed costs"
    source: str = "lecture 00:00 (roofline)"
    aliases: tuple = field(default=(), compare=False)


IDEAL = Efficiency()


def _parse(e) -> Efficiency:
    d = e.data
    try:
        eff = Efficiency(
            name=str(d["name"]),
            eta_compute=float(d.get("eta_compute", 1.0)),
            eta_memory=float(d.get("eta_memory", 1.0)),
            eta_comm=float(d.get("eta_comm", 1.0)),
            step_overhead_s=float(d.get("step_overhead_s", 0.0)),
            description=str(d.get("description", "")),
            source=str(d.get("source", "")),
            aliases=tuple(str(a) for a in d.get("aliases", ())),
        )
    except KeyError as exc:
        raise CatalogError(str(e.path), f"efficiency.{exc.args[0]}", "missing") from None
    except (TypeError, ValueError) as exc:
        raise CatalogError(str(e.path), "efficiency", f"{d.get('name', '?')!r}: a non-numeric value ({exc})") from None
    for f in ("eta_compute", "eta_memory", "eta_comm"):
        v = getattr(eff, f)
        if not 0 < v <= 1:  # also rejects NaN
            raise CatalogError(str(e.path), f"efficiency.{f}", f"{v} outside (0, 1]")
    if not 0 <= eff.step_overhead_s < 10:  # also rejects NaN
        raise CatalogError(str(e.path), "efficiency.step_overhead_s", f"{eff.step_overhead_s} outside [0, 10) s")
    return eff


@register_cache
@lru_cache(maxsize=1)
def presets() -> Index:
    idx = Index("efficiency", "ideal or a calibrated preset such as hopper-serving, blackwell-serving "
                              "(see docs/serving.md)")
    idx.add(IDEAL, "ideal")
    return build_index("efficiency", "efficiency", "", _parse, idx)


def load_efficiency(eff=None) -> Efficiency:
    """None -> the ideal roofline; a name -> a catalog preset; an Efficiency -> itself."""
    if eff is None:
        return IDEAL
    if isinstance(eff, Efficiency):
        return eff
    if isinstance(eff, str):
        return presets().get(eff)
    raise InputError("efficiency", f"cannot use {eff!r}", "None, a preset name or an Efficiency")
