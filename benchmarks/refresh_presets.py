"""Refit the shipped efficiency presets from a cross-validation run (maintainers' tool).

    rackmath validate --cv --json > cv.json
    python benchmarks/refresh_presets.py cv.json            # prints the new serving.toml
    python benchmarks/refresh_presets.py cv.json --write    # replaces src/rackmath/specs/data/efficiency/serving.toml

Per hardware family: the in-sample fit of every shipped record (``cv["in_sample"]["fit"]``), named
``<family>-serving``, with the catalog chips of that family, and ``error_band`` = the leave-one-source-out median
|error| of the family's records. The cross-family preset (chips without a fitted family) is the same fit with every
family tied (refitted here, ~30 s), with ``error_band`` = the leave-one-hardware-family-out median over all records.
Nothing is tuned by hand: the numbers are the fitter's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

TARGET = ROOT / "src" / "rackmath" / "specs" / "data" / "efficiency" / "serving.toml"
HEADER = """Efficiency presets of the step model (engine/step.py), fitted on the records of specs/data/records by
benchmarks/refresh_presets.py from `rackmath validate --cv --json` (docs/validation.md). error_band: the
leave-one-source-out median |error| of the family's records; cross-family: the leave-one-hardware-family-out median."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cv_json", type=Path)
    ap.add_argument("--write", action="store_true", help=f"replace {TARGET.relative_to(ROOT)}")
    a = ap.parse_args()
    from rackmath.analyses import calibration as cal
    from rackmath.specs.hardware import chips as catalog_chips
    from rackmath.specs.records import HARDWARE_FAMILIES

    import tomllib

    cv = json.loads(a.cv_json.read_text())
    # aliases are names users and records refer to (e.g. tpu-v4-pope): carried over from the current file
    aliases = {e["name"]: e["aliases"] for e in tomllib.loads(TARGET.read_text()).get("efficiency", [])
               if e.get("aliases")}
    spec = cal.default_spec()
    fit = cv["in_sample"]["fit"]
    if fit["params"] != list(spec.names):
        sys.exit(f"the CV run fitted {fit['params']}, the efficiency model declares {list(spec.names)}: rerun --cv")
    recs = cal.fitted_records()
    loso = {r["id"]: abs(r["error"]) for r in cv["source"]["records"]}
    known = set(catalog_chips().names())
    presets = []
    for fam, vals in sorted(fit["per_family"].items()):
        rs = [r for r in recs if r.hardware_family == fam]
        chips = sorted({c for c, f in HARDWARE_FAMILIES.items() if f == fam and c in known} |
                       {r.chip for r in rs if r.chip})
        if fam == "tpu":  # as calibration.presets_from_fit: only the TPU generations measured get the TPU fit
            chips = sorted({r.chip for r in rs if r.chip})
        band = statistics.median(loso[r.id] for r in rs if r.id in loso)
        presets.append(dict(name=f"{fam}-serving", chips=chips, regime="serving", composition="serial",
                            **{n: float(fit["shared"].get(n, vals.get(n))) for n in spec.names},
                            description=f"fitted on {len(rs)} {fam} records from "
                                        f"{len({r.source_group for r in rs})} sources",
                            fitted_on=[r.id for r in rs], objective_mean_abs_log=fit["objective_mean_abs_log"],
                            family=fam, error_band=round(band, 3)))
    tied = cal.fit(recs, spec.tied())
    presets.append(dict(name="cross-family-serving", chips=[], regime="serving", composition="serial",
                        **{n: float(tied.values[(n, None)]) for n in spec.names},
                        description=f"every family tied: for chips without a fitted preset ({len(recs)} records, "
                                    f"{len(tied.sources)} sources)",
                        fitted_on=[r.id for r in recs], objective_mean_abs_log=tied.objective, family="all",
                        cross_family=True,
                        error_band=round(cv["hardware"]["summary"]["median_abs_error"], 3)))
    for p in presets:
        if p["name"] in aliases:
            p["aliases"] = aliases[p["name"]]
    text = cal.as_toml(presets, header=HEADER)
    if a.write:
        TARGET.write_text(text)
        print(f"wrote {TARGET}", file=sys.stderr)
    else:
        print(text)


if __name__ == "__main__":
    main()
