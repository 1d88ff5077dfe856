"""Benchmark: `plan` — the full analytic search over five chips, and with the simulator's confirmation.

    python benchmarks/bench_plan.py [--repeat 5]

Target (issue 12): the full search over five chips answers in under 1 s. Question: Llama-3.1-70B to 1,000 users
at 50 tok/s each, TTFT < 1 s, ISL/OSL 1000/1000, on h100, h200, b200, gb200, mi355x (aggregated and
disaggregated; every replica layout × 40 concurrencies per chip). Times `plan(..., confirm=False)` (the search)
and `plan(..., confirm=True)` (the search + one short simulation per chip). Pins numpy to one thread.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

CHIPS = "h100,h200,b200,gb200,mi355x"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--model", default="llama-3.1-70b")
    args = ap.parse_args()

    from rackmath.analyses.serving.plan import plan

    kw = dict(users=1000, isl=1000, osl=1000, ttft=1.0, tok_s_user=50)
    t0 = time.perf_counter()
    plan(args.model, CHIPS, confirm=False, **kw)
    cold = time.perf_counter() - t0
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        r = plan(args.model, CHIPS, confirm=False, **kw)
        times.append(time.perf_counter() - t0)
    n = sum(row["candidates"] for row in r.rows)
    print(f"search over 5 chips ({n:,} fitting aggregated candidates + disaggregated pools): first call "
          f"{cold:.2f} s, then median {statistics.median(times):.3f} s (min {min(times):.3f} s)")
    t0 = time.perf_counter()
    plan(args.model, CHIPS, confirm=True, **kw)
    print(f"search + simulator confirmation of the 5 winners: {time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    main()
