"""Benchmark: `rackmath validate` and `rackmath validate --cv` — figures and timings.

    python benchmarks/bench_validate.py [--schemes source,hardware,model] [--records DIR] [--json FILE] [--jobs N]

Prints the in-sample accuracy of the shipped presets (what `rackmath validate` reports), the
in-sample accuracy of a full refit, and the out-of-group errors of `validate --cv`: leave one
source out, one hardware family out, one model family out — overall and by held-out group — with
the number of fitted parameters, records and independent sources; then how long each step takes
(`validate()`, one full fit, the whole cross-validation). Pins numpy to one thread.
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
    return (f'median {s["median_abs_error"]:6.1%}  p90 {s["p90_abs_error"]:7.1%}  within 2× {s["within_2x"]:3d}/'
            f'{s["n"]:<3d} worst {s["worst_ratio"]:5.2f}× ({s["worst"]["id"]})')


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--schemes", default="source,hardware,model")
    ap.add_argument("--records", action="append", default=[], help="extra records directory (repeatable)")
    ap.add_argument("--json", help="write the cross-validation result to this file")
    ap.add_argument("--jobs", type=int, default=None, help="worker processes for the folds (default: the CPUs)")
    args = ap.parse_args()

    t0 = time.perf_counter()
    from rackmath.analyses.fitting import calibration, crossval
    from rackmath.analyses.fitting import validation

    t_import = time.perf_counter() - t0
    recs = validation.records(tuple(args.records))
    t0 = time.perf_counter()
    v = validation.validate(recs=recs)
    t_validate = time.perf_counter() - t0
    t0 = time.perf_counter()
    f = calibration.fit(calibration.fitted_records(recs))
    t_fit = time.perf_counter() - t0
    schemes = tuple(s for s in args.schemes.split(",") if s)
    t0, c0 = time.perf_counter(), time.process_time()
    cv = crossval.cross_validate(recs, schemes=schemes, jobs=args.jobs)
    t_cv, c_cv = time.perf_counter() - t0, time.process_time() - c0

    print(calibration.describe_counts(cv["counts"]))
    print(f"shipped presets (`rackmath validate`): {_fmt(v['summary'])}")
    for fam, s in v["summary_by_hardware_family"].items():
        print(f"   {fam:10s} {_fmt(s)}")
    print(f"in-sample refit:                       {_fmt(cv['in_sample']['summary'])}")
    for scheme in schemes:
        c = cv[scheme]
        print(f"{crossval.SCHEME_LABEL[scheme]:38s} {_fmt(c['summary'])}")
        for g, s in c["summary_by_group"].items():
            print(f"   {g:34s} {_fmt(s)}")
    print(f"full refit: {json.dumps(f.as_dict()['per_family'])}")
    print(f"timings (s): import {t_import:.2f}; validate() {t_validate:.2f}; one full fit {t_fit:.2f}; "
          f"cross-validation ({', '.join(schemes)}: {sum(len(cv[s]['folds']) for s in schemes)} refits) "
          f"{t_cv:.2f} wall, {c_cv:.2f} CPU of the parent ({cv['jobs']} worker processes); "
          f"{cv['predictions_evaluated']:,} record predictions; "
          f"load average {os.getloadavg()[0]:.1f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(cv, fh, indent=1)


if __name__ == "__main__":
    main()
