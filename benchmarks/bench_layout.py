"""Benchmark: the layout search (every TP × EP × PP × attention-DP × micro-batch), layouts evaluated per second.

    python benchmarks/bench_layout.py [--repeat 5] [--model deepseek-v3] [--hardware gb200-nvl72] [--chips 288]

Target (issue 3): ≥ 10⁵ layouts per second on one core. Times ``search_layouts`` end to end (grid
enumeration, vectorized evaluation, memory fit, Pareto frontier) after one warm-up call, and the
vectorized core ``evaluate`` alone. Pins numpy to one thread before importing it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

TARGET = 1e5


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--model", default="deepseek-v3")
    ap.add_argument("--hardware", default="gb200-nvl72")
    ap.add_argument("--chips", type=int, default=288)
    ap.add_argument("--context", type=float, default=8192)
    args = ap.parse_args()

    from rackmath.engine.layout import evaluate
    from rackmath.engine.numbers import HwNumbers, ModelNumbers
    from rackmath.engine.search import layout_grid, search_layouts
    from rackmath.specs.hardware import load_hardware
    from rackmath.specs.models import load_model

    model, system = load_model(args.model), load_hardware(args.hardware)
    search_layouts(model, system, args.chips, context=args.context)  # warm-up (imports, caches)
    rates, n = [], 0
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        sr = search_layouts(model, system, args.chips, context=args.context)
        dt = time.perf_counter() - t0
        n = sr.n_evaluated
        rates.append(n / dt)
    mn = ModelNumbers.from_model(model, args.context)
    hw = HwNumbers.from_system(system, model.native_dtype)
    g = layout_grid(mn, args.chips, hw.scaleup_size)
    core = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        evaluate(mn, hw, chips=args.chips, **g)
        core.append(g["tp"].size / (time.perf_counter() - t0))
    med = statistics.median(rates)
    print(f"search_layouts {args.model} on {args.chips} × {args.hardware}: {n} layouts, "
          f"median {med:,.0f} layouts/s (min {min(rates):,.0f}); frontier {len(sr.frontier)} points")
    print(f"evaluate() alone: median {statistics.median(core):,.0f} layouts/s")
    print(f"target ≥ {TARGET:,.0f} layouts/s: {'met' if med >= TARGET else 'NOT met'}")


if __name__ == "__main__":
    main()
