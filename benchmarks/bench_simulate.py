"""Benchmark: `simulate` — simulated requests per second of wall time on one core, and a 10⁶-request trace.

    python benchmarks/bench_simulate.py [--requests 200000] [--trace-requests 1000000] [--quick]

Targets (issue 12): ≥ 10⁵ simulated requests per second of wall time on one core; a 10⁶-request trace in
under 30 s end to end (parse the CSV text + simulate + statistics). Workloads: (a) Poisson at ~80% of capacity (capacity from a closed loop at 256 users: 18.2 req/s) on
one H100 replica of Llama-3.1-8B, ISL 1000 / OSL 200 fixed; (b) the same with lognormal ISL and exponential
OSL; (c) a 10⁶-request CSV trace (generated here, Poisson at 100 req/s, lognormal ISL, exponential OSL: ~75% load) on 8 × H100.
Pins numpy to one thread before importing it.
"""

from __future__ import annotations

import argparse
import os
import time

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--trace-requests", type=int, default=1_000_000)
    ap.add_argument("--quick", action="store_true", help="10× fewer requests (a smoke run)")
    args = ap.parse_args()
    if args.quick:
        args.requests //= 10
        args.trace_requests //= 10

    import numpy as np

    from rackmath.analyses.serving.simulate import parse_trace, simulate

    simulate("llama-3.1-8b", "h100", gpus=1, tp=1, rate=5, requests=1000)  # warm-up (imports, catalog)
    cases = [
        ("fixed ISL 1000 / OSL 200, 1 replica", dict(gpus=1, tp=1, rate=14.5, isl=1000, osl=200)),
        ("lognormal ISL / exp OSL, 1 replica", dict(gpus=1, tp=1, rate=13.0, isl="lognormal:800:0.8",
                                                     osl="exp:200")),
        ("fixed 1000/200, 8 replicas", dict(gpus=8, tp=1, rate=116.0, isl=1000, osl=200)),
    ]
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (wall time suffers when the "
          "machine is shared; CPU time is what one idle core would take)")
    for name, kw in cases:
        t0, c0 = time.perf_counter(), time.process_time()
        r = simulate("llama-3.1-8b", "h100", requests=args.requests, **kw)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        s = r.summary
        print(f"{name}: {args.requests:,} requests in {dt:.2f} s wall = {args.requests / dt:,.0f} req/s; "
              f"{dc:.2f} s CPU = {args.requests / dc:,.0f} req/s per CPU-second "
              f"(utilization {s['utilization']:.0%}, TTFT p99 {s['ttft_s']['p99'] * 1e3:.3g} ms)")

    n = args.trace_requests
    rng = np.random.default_rng(7)
    t = np.cumsum(rng.exponential(1 / 100.0, n))
    isl = np.clip(np.round(rng.lognormal(np.log(800), 0.8, n)), 1, 32000).astype(int)
    osl = np.clip(np.round(rng.exponential(200, n)), 1, 4000).astype(int)
    text = "arrival_s,isl,osl\n" + "\n".join(f"{a:.6f},{b},{c}" for a, b, c in zip(t, isl, osl)) + "\n"
    t0, c0 = time.perf_counter(), time.process_time()
    tr = parse_trace(text, "trace")
    t1 = time.perf_counter()
    r = simulate("llama-3.1-8b", "h100", gpus=8, tp=1, trace=tr)
    t2, c2 = time.perf_counter(), time.process_time()
    print(f"{n:,}-request trace on 8 × H100: parse {t1 - t0:.2f} s + simulate {t2 - t1:.2f} s = {t2 - t0:.2f} s wall, "
          f"{c2 - c0:.2f} s CPU ({n / (t2 - t1):,.0f} req/s simulated; {r.summary['completed']:,} completed)")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
