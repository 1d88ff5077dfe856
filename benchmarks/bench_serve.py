"""Benchmark: `rackmath serve` cold (fresh process), median of N runs, for a dense and a MoE deployment.

    python benchmarks/bench_serve.py [--runs 9]

Target (issue 9): serve ≤ 0.5 s cold (layout chosen, calibrated preset, time-sliced prefill, --ops). Prints the
wall time and the process's CPU time (user + system: what the wall time is on an idle core).
"""

from __future__ import annotations

import argparse
import statistics

from bench_cli import timed_runs  # one timing loop for every cold-start benchmark (benchmarks/ is on sys.path)

COMMANDS = {
    "rackmath serve llama-3.3-70b -H hgx-h100 --gpus 8 --isl 1000 --osl 1000 -c 256 --json":
        ["serve", "llama-3.3-70b", "-H", "hgx-h100", "--gpus", "8", "--isl", "1000", "--osl", "1000", "-c", "256",
         "--json"],
    "rackmath serve deepseek-v3 -H hgx-h200 --gpus 8 --isl 3200 --osl 800 -c 64 --framework sglang --json":
        ["serve", "deepseek-v3", "-H", "hgx-h200", "--gpus", "8", "--isl", "3200", "--osl", "800", "-c", "64",
         "--framework", "sglang", "--json"],
    "rackmath serve deepseek-v3 -H gb200-nvl72 --gpus 72 --ep 72 --attention-dp --redundant-experts 32 ... --ops":
        ["serve", "deepseek-v3", "-H", "gb200-nvl72", "--gpus", "72", "--ep", "72", "--attention-dp",
         "--redundant-experts", "32", "--isl", "2000", "--osl", "1000", "-c", "8192", "--ops"],
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=9)
    args = ap.parse_args()
    for label, argv in COMMANDS.items():
        ts, cpu = timed_runs(argv, args.runs)
        print(f"{label}: wall median {statistics.median(ts) * 1e3:.0f} ms (min {min(ts) * 1e3:.0f}), "
              f"CPU median {statistics.median(cpu) * 1e3:.0f} ms ({args.runs} runs)")


if __name__ == "__main__":
    main()
