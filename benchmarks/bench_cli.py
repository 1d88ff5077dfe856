"""Benchmark: CLI cold start (`rackmath --help` and one roofline answer), median of N fresh processes.

    python benchmarks/bench_cli.py [--runs 15]

Target (issue 2): a CLI answer in ≤ 0.3 s cold.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "rackmath --help": ["--help"],
    "rackmath roofline llama-3.1-70b -H h100 --batch 64 --json": ["roofline", "llama-3.1-70b", "-H", "h100",
                                                                 "--batch", "64", "--json"],
    "rackmath model show deepseek-v3 --json": ["model", "show", "deepseek-v3", "--json"],
    "rackmath roofline llama-3.1-70b -H h100 --batch 64 (table)": ["roofline", "llama-3.1-70b", "-H", "h100",
                                                                  "--batch", "64"],
}


def rackmath_cmd() -> list[str]:
    """The installed `rackmath` command, else `python -m rackmath`."""
    exe = shutil.which("rackmath")
    return [exe] if exe else [sys.executable, "-m", "rackmath"]


def timed_runs(argv: list[str], runs: int, env: dict | None = None) -> tuple[list[float], list[float]]:
    """Run `rackmath ARGV` ``runs`` times in fresh processes: (wall seconds, CPU seconds user + sys) per run."""
    base = rackmath_cmd()
    ts, cpu = [], []
    for _ in range(runs):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        p = subprocess.run(base + argv, capture_output=True, env=env)
        ts.append(time.perf_counter() - t0)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
        assert p.returncode == 0, p.stderr.decode()
    return ts, cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    for label, argv in COMMANDS.items():
        ts, cpu = timed_runs(argv, args.runs, env=os.environ | {"COLUMNS": "100"})
        # CPU time (user + sys) is what the process needs; on a loaded machine wall time also counts waiting
        print(f"{label}: median {statistics.median(ts) * 1e3:.0f} ms, min {min(ts) * 1e3:.0f} ms wall; "
              f"median {statistics.median(cpu) * 1e3:.0f} ms CPU ({args.runs} runs; load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
