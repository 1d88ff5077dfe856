"""Benchmark and record `rackmath train` (issue 38): the validation figures of the training step model and the time
of `train` cold (fresh process).

    python benchmarks/bench_train.py [--runs 7] [--no-validate]

Targets: a single answer (layout given) < 0.5 s cold; a layout search < 2 s; leave one source out median |error|
≤ 15% with ≥ 95% of records within 2×, leave one hardware family out ≤ 25%, ≥ 90% of the pretraining rows
modelled; Llama 3.1 405B on 16,384 H100 (TP 8, PP 16, 16M tokens a batch) within 15% of 400 TFLOP/s/GPU. Prints
wall and CPU time (user + system: what the wall time is on an idle core).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from bench_cli import timed_runs  # one timing loop for every cold-start benchmark (benchmarks/ is on sys.path)

META = ["train", "llama-3.1-405b", "-H", "hgx-h100", "--gpus", "16384", "--tokens", "15.6T", "--tp", "8", "--pp",
        "16", "--global-batch", "16M"]
COMMANDS = {
    "single answer: rackmath train llama-3.1-405b -H hgx-h100 --gpus 16384 --tokens 15.6T --tp 8 --pp 16 "
    "--global-batch 16M --fsdp none --recompute full --dp 128 --json":
        META + ["--fsdp", "none", "--recompute", "full", "--dp", "128", "--json"],
    "layout search (recompute, sharding): the same without --fsdp/--recompute/--dp": META + ["--json"],
    "layout search (everything): rackmath train llama-3.1-70b -H hgx-h100 --gpus 1024 --tokens 15T --json":
        ["train", "llama-3.1-70b", "-H", "hgx-h100", "--gpus", "1024", "--tokens", "15T", "--json"],
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--no-validate", action="store_true")
    args = ap.parse_args()
    for label, argv in COMMANDS.items():
        ts, cpu = timed_runs(argv, args.runs, env=os.environ | {"COLUMNS": "100"})
        print(f"{label}: wall median {statistics.median(ts) * 1e3:.0f} ms (min {min(ts) * 1e3:.0f}), CPU median "
              f"{statistics.median(cpu) * 1e3:.0f} ms ({args.runs} runs; load {os.getloadavg()[0]:.1f})")
    import subprocess

    from bench_cli import rackmath_cmd

    out = json.loads(subprocess.run(rackmath_cmd() + META + ["--json"], capture_output=True, check=True).stdout)
    print(f"Llama 3.1 405B, 16,384 H100, TP 8 PP 16, 16M tokens a batch: {out['achieved_flops'] / 1e12:.0f} TFLOP/s/GPU "
          f"({out['achieved_flops'] / 400e12 - 1:+.1%} vs Meta's 400), {out['preset']}, layout "
          f"vp {out['parallelism']['v']}, recompute {out['parallelism']['recompute']}")
    if args.no_validate:
        return
    from rackmath.analyses.fitting.training import validate_training

    t0, c0 = time.perf_counter(), time.process_time()
    v = validate_training()
    print(f"validate --train: {time.perf_counter() - t0:.1f} s wall, {time.process_time() - c0:.1f} s CPU "
          "(fit + 4 cross-validation schemes)")
    cov, c = v["coverage"], v["counts"]
    print(f"rows: {cov['rows']}, modelled {cov['modelled']}; pretraining {cov['pretrain_modelled']}/"
          f"{cov['pretrain_rows']} = {cov['pretrain_modelled'] / cov['pretrain_rows']:.1%}")
    print(f"fit: {c['fitted_params']} parameters ({c['params_per_group']} × {len(c['groups'])} groups + "
          f"{c['params_per_family']} × {len(c['families'])} hardware families + {c['shared_params']} shared) on "
          f"{c['records']} records, {c['sources']} sources")
    s = v["in_sample"]
    print(f"in sample: median {s['median_abs_error']:.1%}, within 2× {s['within_2x']}/{s['n']}")
    for k, x in v["cross_validation"].items():
        o = x["overall"]
        print(f"leave one {k} out: median {o['median_abs_error']:.1%}, p90 {o['p90_abs_error']:.1%}, within 2× "
              f"{o['within_2x']}/{o['n']} ({o['within_2x'] / o['n']:.1%}), geomean {o['geomean_ratio']:.2f}×")
    for h in v["held_out"]:
        print(f"held out {h['id']} ({h['gpus']} GPUs): measured {h['measured_tflops']:g} TFLOP/s, predicted "
              f"{h['predicted_tflops']:.0f} ({h['error']:+.1%})")


if __name__ == "__main__":
    main()
