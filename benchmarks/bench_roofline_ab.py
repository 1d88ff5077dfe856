"""Benchmark (issue 33): the ideal roofline sweep, before and after a change, interleaved on one machine.

    python benchmarks/bench_roofline_ab.py --before /tmp/base/src --after src [--rounds 5] [--n 1000000]

Each round runs ``benchmarks/bench_roofline.py --model llama-3.1-70b --hardware hgx-h100 --repeat 3`` (one
vectorized ``rackmath.roofline`` call over 10⁶ random (batch, context) decode configurations on 8 × H100, ideal,
best of three) once per source tree, alternating, in fresh processes; so a shared machine's load falls on both
alike. Prints each tree's best and median throughput over the rounds (configurations per second, wall clock and
CPU time). Target: ≥ 3 × 10⁷ configurations/s. A tree is a directory holding the ``rackmath`` package
(e.g. ``git archive <commit> src | tar -x -C /tmp/base``).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def one(src: str, n: int, model: str, hardware: str) -> tuple[float, float]:
    env = dict(os.environ, PYTHONPATH=str(Path(src).resolve()), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1")
    out = subprocess.run([sys.executable, str(HERE / "bench_roofline.py"), "--n", str(n), "--repeat", "3",
                          "--model", model, "--hardware", hardware], capture_output=True, text=True, env=env,
                         check=True).stdout
    wall = float(re.search(r"throughput: ([\d,]+) configurations/s \(best\)", out).group(1).replace(",", ""))
    cpu = float(re.search(r"cpu: ([\d,]+) configurations/s", out).group(1).replace(",", ""))
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--model", default="llama-3.1-70b")
    ap.add_argument("--hardware", default="hgx-h100")
    a = ap.parse_args()
    res = {"before": [], "after": []}
    for r in range(a.rounds):
        for name in ("before", "after") if r % 2 == 0 else ("after", "before"):
            res[name].append(one(getattr(a, name), a.n, a.model, a.hardware))
    print(f"{a.model} on {a.hardware}, {a.n:,} ideal decode configurations per call, best of 3 per process, "
          f"{a.rounds} rounds interleaved")
    for name, runs in res.items():
        wall, cpu = [w for w, _ in runs], [c for _, c in runs]
        print(f"{name:6s} {getattr(a, name)}: wall best {max(wall):.3g}/s median {statistics.median(wall):.3g}/s; "
              f"cpu best {max(cpu):.3g}/s median {statistics.median(cpu):.3g}/s")


if __name__ == "__main__":
    main()
