"""Benchmark: `rackmath validate`, the calibration refit and its cross-validation — figures and timings.

    python benchmarks/bench_validate.py [--rounds 4] [--compare-serial] [--json FILE]

Prints the in-sample accuracy of the calibrated presets (what `rackmath validate` reports), the
out-of-sample accuracy from leave-one-out (LOO) and leave-one-source-out (LOSO) refits
(`rackmath validate --cv`), overall and per family, and how long each step takes: `validate()`,
a full refit of the three presets (`validate --refit`) and the whole cross-validation.
``--compare-serial`` also times the refit with candidates scored one at a time (the fitter before
it was vectorized, ~20 s) and checks that both give the same presets. Pins numpy to one thread.
"""

from __future__ import annotations

import argparse
import json
import os
import time

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")


def _fmt(s):
    if not s.get("n"):
        return "n/a"
    return f'{s["median_abs_error"]:6.1%} (n={s["n"]:2d}, {s["within_20pct"]:2d} within ±20%, worst ' \
           f'{s["worst"]["id"]} {s["worst"]["error"]:+.1%})'


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=4, help="refinement rounds per refit (shipped presets: 4)")
    ap.add_argument("--compare-serial", action="store_true", help="also time the one-candidate-at-a-time refit")
    ap.add_argument("--json", help="write the cross-validation result to this file")
    args = ap.parse_args()

    t0 = time.perf_counter()
    from rackmath.analyses import calibration, validation

    t_import = time.perf_counter() - t0
    t0 = time.perf_counter()
    v = validation.validate()
    t_validate = time.perf_counter() - t0
    t0 = time.perf_counter()
    presets = calibration.fit_all()
    t_refit = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), time.process_time()
    cv = calibration.cross_validate(rounds=args.rounds)
    t_cv, c_cv = time.perf_counter() - t0, time.process_time() - c0

    print(f"in-sample (shipped presets, `rackmath validate`): {_fmt(v['summary'])}")
    for scheme, label in (("in_sample", "in-sample refit"), ("loo", "leave-one-out"),
                          ("source", "leave-one-source-out")):
        c = cv[scheme]
        print(f"{label:22s} all      : {_fmt(c['summary'])}")
        for fam, s in c["summary_by_family"].items():
            print(f"{'':22s} {fam:9s}: {_fmt(s)}")
    for f in cv["source"]["not_predictable"]:
        print(f"  LOSO not predictable: {f['group']} ({f['reason']})")
    print("leave-one-source-out, by held-out source:")
    for src, s in cv["source"]["summary_by_source"].items():
        print(f"  {src:14s}: {_fmt(s)}")
    same = all(p["matches_catalog"] for p in cv["in_sample"]["presets"])
    print(f"full refit equals the shipped presets: {same}")
    for fam in ("hopper", "blackwell", "tpu-v4"):
        folds = [f for f in cv["loo"]["folds"] if f["family"] == fam]
        if folds:
            rng = ", ".join(f"{k} {min(f[k] for f in folds):.4g}…{max(f[k] for f in folds):.4g}"
                            for k in calibration.PARAMS)
            print(f"LOO refits, {fam}: {rng}")
    print(f"timings (s): import {t_import:.2f}; validate() {t_validate:.2f}; refit of 3 presets {t_refit:.2f}; "
          f"cross-validation (full refit + {len(cv['loo']['folds'])} LOO + {len(cv['source']['folds'])} LOSO "
          f"refits, {cv['rounds']} rounds) {t_cv:.2f} wall, {c_cv:.2f} CPU; "
          f"{cv['predictions_evaluated']:,} record predictions; load average {os.getloadavg()[0]:.1f}")
    if args.compare_serial:
        def one(rec, eff):
            return validation.predict(rec, efficiency=eff)[0]

        t0 = time.perf_counter()
        serial = []
        for spec in calibration.PRESETS:
            recs = calibration.family_records(spec)
            eff, _ = calibration.fit_preset(recs, name=spec.name, predict=one)
            serial.append(eff)
        t_serial = time.perf_counter() - t0
        ok = all(abs(e.eta_compute - p["eta_compute"]) + abs(e.eta_memory - p["eta_memory"])
                 + abs(e.eta_comm - p["eta_comm"]) + abs(e.step_overhead_s - p["step_overhead_s"]) == 0
                 for e, p in zip(serial, presets))
        print(f"refit scoring candidates one at a time: {t_serial:.2f} s (vectorized {t_refit:.2f} s); "
              f"same presets: {ok}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(cv, fh, indent=1)


if __name__ == "__main__":
    main()
