"""Benchmark: a 10⁶-configuration decode sweep through the Python API, as one vectorized call.

    python benchmarks/bench_roofline.py [--n 1000000] [--repeat 5]

Target (issue 2): ≥ 10⁷ configurations per second on one core; issue 33: ≥ 3 × 10⁷ for Llama-3.1-70B on 8 × H100
(``--model llama-3.1-70b --hardware hgx-h100 --repeat 3``; before/after: bench_roofline_ab.py). Pins numpy to one
thread (OMP/OPENBLAS/MKL_NUM_THREADS=1) before importing it.
"""

from __future__ import annotations

import argparse
import os
import time

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")

import numpy as np  # noqa: E402

import rackmath  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--model", default="deepseek-v3")
    ap.add_argument("--hardware", default="gb200-nvl72")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    batch = rng.integers(1, 16384, args.n).astype(float)
    context = rng.integers(0, 262144, args.n).astype(float)
    model, hw = rackmath.load_model(args.model), rackmath.load_hardware(args.hardware)
    rackmath.roofline(model, hw, batch=batch[:10], context=context[:10])  # warm caches
    times, cpu = [], []
    for _ in range(args.repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        r = rackmath.roofline(model, hw, batch=batch, context=context)
        _ = (r.step_s, r.bound_code, r.usd_per_mtok, r.tokens_per_s_per_chip)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    best, med = min(times), float(np.median(times))
    print(f"model={model.name} hardware={hw.name} n={args.n:,} decode configurations (batch × context random)")
    print(f"best {best * 1e3:.1f} ms, median {med * 1e3:.1f} ms over {args.repeat} runs")
    print(f"throughput: {args.n / best:,.0f} configurations/s (best), {args.n / med:,.0f} (median)")
    print(f"cpu: {args.n / min(cpu):,.0f} configurations/s per CPU-second (best; a shared machine's waits left out)")


if __name__ == "__main__":
    main()
