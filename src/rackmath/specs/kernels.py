"""Measured kernel curves per chip (issue 34): ``specs/data/kernels/<chip>.toml``.

Written by ``benchmarks/reduce_aiconfigurator.py`` from NVIDIA's aiconfigurator-core tables (Apache-2.0; notice in
``specs/data/kernels/NOTICE-aiconfigurator.md``): GEMM time versus M per dtype, decode attention and MLA versus
context, MoE grouped GEMM versus tokens, NCCL collectives versus bytes per group size, the floor latency of a small
kernel — each curve with the package, its version, the table and the framework version that measured it. rackmath
reads only these TOML files (never aiconfigurator). ``hardware show`` names their provenance; the step model does
not read them yet (they are to become its priors).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ..errors import CatalogError

DIR = Path(__file__).parent / "data" / "kernels"

#: What a chip without measured curves has instead, by vendor.
WITHOUT = {"amd": "none measured: vendor figures and the serving records only (aiconfigurator-core measures NVIDIA "
                  "GPUs only)",
           "google": "none measured: vendor figures and the records only",
           "": "none measured: vendor figures only"}


@lru_cache(maxsize=64)
def kernel_table(chip: str) -> dict | None:
    """``{"meta": {...}, "curves": [...]}`` of a catalog chip, or None when no curves are shipped for it."""
    from .catalog import _read_toml

    p = DIR / f"{chip}.toml"
    if not p.exists():
        return None
    doc = _read_toml(p)
    meta, curves = doc.get("_meta"), doc.get("_curve", [])
    if not isinstance(meta, dict) or not isinstance(curves, list):
        raise CatalogError(str(p), "_meta", "expected [_meta] and [[_curve]] tables")
    for i, c in enumerate(curves):
        for k in ("op", "name", "x", "x_values", "time_s", "framework", "framework_version", "table"):
            if k not in c:
                raise CatalogError(str(p), f"_curve[{i}].{k}", "missing")
        if len(c["x_values"]) != len(c["time_s"]) or any(not t > 0 for t in c["time_s"]):
            raise CatalogError(str(p), f"_curve[{i}].time_s", "one positive time per x value")
    return {"meta": meta, "curves": curves}


def provenance(chip: str, vendor: str = "") -> dict:
    """Where a chip's kernel curves come from: the package, version, license, tables and stack versions, and the
    operators covered — or, for a chip without, what it has instead."""
    t = kernel_table(chip)
    if t is None:
        return {"measured": False, "note": WITHOUT.get(str(vendor).lower(), WITHOUT[""])}
    m, cs = t["meta"], t["curves"]
    ops = {}
    for c in cs:
        ops[c["op"]] = ops.get(c["op"], 0) + 1
    return {"measured": True, "package": m.get("package"), "package_version": m.get("package_version"),
            "license": m.get("license"), "system": m.get("system"), "device": m.get("device"),
            "source": m.get("source"), "curves": len(cs), "ops": ops,
            "measured_with": sorted({f'{c["framework"]}@{c["framework_version"]}' for c in cs}),
            "tables": sorted({c["table"] for c in cs}), "file": f"specs/data/kernels/{chip}.toml"}


def summary_line(chip: str, vendor: str = "") -> str:
    """One line for ``hardware show``."""
    p = provenance(chip, vendor)
    if not p["measured"]:
        return p["note"]
    ops = ", ".join(f"{k} {v}" for k, v in p["ops"].items())
    return (f'{p["curves"]} curves ({ops}) from {p["package"]} {p["package_version"]} ({p["license"]}), measured on '
            f'{p["device"]} with {", ".join(p["measured_with"])}; {p["file"]} (not yet used by the step model)')


__all__ = ["kernel_table", "provenance", "summary_line", "DIR"]
