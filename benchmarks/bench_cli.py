"""Benchmark: CLI cold start (`rackmath --help` and one roofline answer), median of N fresh processes.

    python benchmarks/bench_cli.py [--runs 15]

Target (issue 2): a CLI answer in ≤ 0.3 s cold.
"""

from __future__ import annotations

import argparse
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
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    exe = shutil.which("rackmath")
    base = [exe] if exe else [sys.executable, "-m", "rackmath"]
    for label, argv in COMMANDS.items():
        ts = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            p = subprocess.run(base + argv, capture_output=True)
            ts.append(time.perf_counter() - t0)
            assert p.returncode == 0, p.stderr.decode()
        print(f"{label}: median {statistics.median(ts) * 1e3:.0f} ms, min {min(ts) * 1e3:.0f} ms "
              f"({args.runs} runs)")


if __name__ == "__main__":
    main()
