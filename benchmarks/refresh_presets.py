"""Refit the shipped efficiency presets from a cross-validation run (maintainers' tool).

    rackmath validate --cv --json > cv.json
    python benchmarks/refresh_presets.py cv.json            # prints the new serving.toml
    python benchmarks/refresh_presets.py cv.json --write    # replaces src/rackmath/specs/data/efficiency/serving.toml
                                                            # and src/rackmath/analyses/fitting/data/heldout.json
    python benchmarks/refresh_presets.py cv.json --heldout-only --write   # the held-out table alone (a LOSO-only run)

Per hardware family: the in-sample fit of every shipped record (``cv["in_sample"]["fit"]``), named
``<family>-serving``, with the catalog chips of that family, and ``error_band`` = the leave-one-source-out median
|error| of the family's records. The cross-family preset (chips without a fitted family) is the same fit with every
family tied (refitted here, ~30 s), with ``error_band`` = the leave-one-hardware-family-out median over all records.
Nothing is tuned by hand: the numbers are the fitter's.

The held-out table (``analyses/fitting/evidence.py``: what ``serve`` prints as "nearest measured") is every fitted serving
record's configuration, measured value, in-sample prediction and leave-one-source-out prediction from the same run.
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
HELDOUT = ROOT / "src" / "rackmath" / "analyses" / "fitting" / "data" / "heldout.json"
HEADER = """Efficiency presets of the step model (engine/step.py), fitted on the records of specs/data/records by
benchmarks/refresh_presets.py from `rackmath validate --cv --json` (docs/validation.md). error_band: the
leave-one-source-out median |error| of the family's records; cross-family: the leave-one-hardware-family-out median."""


def heldout_table(cv: dict) -> str:
    """The held-out table (JSON: machine-written derived data, read on every ``serve``, where JSON parses 20× faster
    than TOML): every fitted serving record in ``cv`` with its in-sample and leave-one-source-out predictions."""
    from rackmath.analyses.fitting import calibration as cal
    from rackmath.analyses.fitting.validation import serve_kwargs
    from rackmath.specs.models import load_model

    ins = {r["id"]: r for r in cv["in_sample"]["records"]}
    out = {r["id"]: r for r in cv["source"]["records"]}
    rows = []
    for rec in cal.fitted_records():
        if rec.kind != "serve" or rec.id not in out or rec.id not in ins:
            continue
        kw = serve_kwargs(rec)
        m = load_model(rec.inputs["model"])
        row = {"id": rec.id, "title": rec.title, "source_group": rec.source_group,
               "framework": rec.framework or "other", "model": rec.inputs["model"], "model_family": rec.model_family,
               "total_params": float(m.total_params), "active_params": float(m.active_params),
               "hardware": rec.inputs["hardware"], "hardware_family": rec.hardware_family,
               "gpus": int(kw["gpus"]), "concurrency": float(kw["concurrency"]), "isl": float(kw["isl"]),
               "osl": float(kw["osl"]), "metric": rec.metric, "measured": float(rec.value),
               "predicted": float(ins[rec.id]["predicted"]),
               "predicted_out_of_sample": float(out[rec.id]["predicted"])}
        rows.append(row)
    if not rows:
        sys.exit("no serving record with both in-sample and leave-one-source-out predictions in the CV JSON")
    about = ("Derived data: every fitted serving record with its in-sample and leave-one-source-out predictions, "
             "written by benchmarks/refresh_presets.py from one `rackmath validate --cv --json` run "
             "(analyses/fitting/evidence.py; docs/validation.md). Regenerate it with the presets; never edit by hand.")
    return json.dumps({"about": about, "heldout": rows}, indent=1, ensure_ascii=False) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cv_json", type=Path)
    ap.add_argument("--write", action="store_true", help=f"replace {TARGET.relative_to(ROOT)} and "
                                                         f"{HELDOUT.relative_to(ROOT)}")
    ap.add_argument("--heldout-only", action="store_true", help="only the held-out table (a LOSO-only CV JSON will do)")
    a = ap.parse_args()
    if a.heldout_only:
        text = heldout_table(json.loads(a.cv_json.read_text()))
        if a.write:
            HELDOUT.write_text(text)
            print(f"wrote {HELDOUT}", file=sys.stderr)
        else:
            print(text)
        return
    from rackmath.analyses.fitting import calibration as cal
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
        HELDOUT.write_text(heldout_table(cv))
        print(f"wrote {HELDOUT}", file=sys.stderr)
    else:
        print(text)


if __name__ == "__main__":
    main()
