"""Measure the step model's per-kernel constants on one GPU, the way serving stacks run decode (CUDA graphs).

    python benchmarks/gpu_kernels.py --out kernels.json            # on a machine with a GPU (torch + CUDA)
    python benchmarks/gpu_kernels.py --device cpu --small --out x.json   # a smoke run of the same code on a CPU
    python benchmarks/fit_kernels.py kernels.json                   # fit the constants (numpy only, any machine)

The step model costs every kernel as (engine/step.py, ``kernel_time``)

    t = τ + max(F / (peak · η_c(M)), B / (BW · η_m)),    η_c(M) = η_c · M / (M + M½)

and this script records the raw timings that pin τ, η_m, η_c and M½ down on real silicon:

* ``tiny``: one-element in-place adds, thousands back to back in one CUDA graph — the shortest kernel: τ_min.
* ``eager``: the same add launched from Python without a graph — what an eager (uncaptured) step pays per kernel.
* ``gemv``: decode GEMMs (M = 1) over weight matrices of 0.25 MB to 512 MB, cycling through enough distinct
  copies that no weight is re-read from L2 (as in a decode step, every layer's weights are different):
  t(B) = τ + B / (BW · η_m) gives τ for a real GEMM and the achieved share of HBM bandwidth.
* ``gemm``: the same with M = 1 … 8192 tokens on three decode-relevant shapes (a Llama-70B TP8 shard,
  a DeepSeek-V3 expert, a square 8192): η_c and M½.
* ``attention``: decode attention (one query per sequence, GQA) over KV caches of several sizes: the achieved
  KV read bandwidth.
* ``copy``: a 4 GB device-to-device copy: the achievable HBM bandwidth.

Every GPU timing is the best of ``--iters`` graph replays, timed with CUDA events, divided by the kernels in
the graph. Output: one JSON file of raw rows plus the device's name, memory and torch version.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # this checkout's rackmath, installed or not

from rackmath.measure_curves import graph_replay_time  # noqa: E402


def _timer(dev):
    """Seconds of fn() (best of iters): CUDA graph replay timed with events on a GPU, wall clock on a CPU."""

    def run(fn, reps: int, iters: int, graph: bool = True) -> float:
        if dev.type != "cuda":
            fn()
            best = math.inf
            for _ in range(iters):
                t0 = time.perf_counter()
                for _ in range(reps):
                    fn()
                best = min(best, (time.perf_counter() - t0) / reps)
            return best
        if not graph:
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            best = math.inf
            for _ in range(iters):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                for _ in range(reps):
                    fn()
                e1.record()
                torch.cuda.synchronize()
                best = min(best, e0.elapsed_time(e1) / 1e3 / reps)
            return best
        return graph_replay_time(fn, reps, iters)

    return run


def _weights(k: int, n: int, dtype, dev, pool: float):
    """Enough distinct K×N weight matrices that cycling through them streams ``pool`` bytes (no L2 reuse)."""
    per = k * n * torch.finfo(dtype).bits // 8
    copies = max(2, min(64, math.ceil(pool / per)))
    return [torch.randn(k, n, dtype=dtype, device=dev) * 0.02 for _ in range(copies)]


def bench_gemv(dev, dtype, sizes, pool, iters, timer):
    rows = []
    for k, n in sizes:
        ws = _weights(k, n, dtype, dev, pool)
        x = torch.randn(1, k, dtype=dtype, device=dev)
        outs = [torch.empty(1, n, dtype=dtype, device=dev) for _ in ws]

        def fn():
            for w, o in zip(ws, outs):
                torch.matmul(x, w, out=o)

        t = timer(fn, 1, iters) / len(ws)
        nb = k * n * torch.finfo(dtype).bits / 8
        rows.append({"k": k, "n": n, "m": 1, "bytes": nb, "flops": 2.0 * k * n, "copies": len(ws), "s": t})
        del ws, outs
    return rows


def bench_gemm(dev, dtype, shapes, ms, pool, iters, timer):
    rows = []
    for k, n in shapes:
        ws = _weights(k, n, dtype, dev, pool)
        for m in ms:
            x = torch.randn(m, k, dtype=dtype, device=dev)
            outs = [torch.empty(m, n, dtype=dtype, device=dev) for _ in ws]

            def fn():
                for w, o in zip(ws, outs):
                    torch.matmul(x, w, out=o)

            t = timer(fn, 1, iters) / len(ws)
            b = torch.finfo(dtype).bits / 8
            rows.append({"k": k, "n": n, "m": m, "bytes": b * (k * n + m * k + m * n), "flops": 2.0 * m * k * n,
                         "copies": len(ws), "s": t})
            del x, outs
        del ws
    return rows


def bench_gemm_fp8(dev, shapes, ms, pool, iters, timer):
    """FP8 (e4m3) GEMMs through ``torch._scaled_mm`` with per-tensor scales (M padded to 16, as stacks pad)."""
    rows = []
    f8 = torch.float8_e4m3fn
    one = torch.ones((), dtype=torch.float32, device=dev)
    for k, n in shapes:
        copies = max(2, min(64, math.ceil(pool / (k * n))))
        ws = [torch.randn(n, k, device=dev).to(f8).t() for _ in range(copies)]  # column-major K×N
        for m in ms:
            mp = max(16, m)
            x = torch.randn(mp, k, device=dev).to(f8)

            def fn():
                for w in ws:
                    torch._scaled_mm(x, w, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

            t = timer(fn, 1, iters) / len(ws)
            rows.append({"k": k, "n": n, "m": m, "bytes": float(k * n + mp * k + 2 * mp * n),
                         "flops": 2.0 * m * k * n, "copies": len(ws), "s": t})
            del x
        del ws
    return rows


def bench_attention(dev, dtype, cases, iters, timer):
    """Decode attention: one query per head against K, V (B, Hkv, L, D); bytes = the K and V read.

    The Hq/Hkv query heads that share a KV head are laid out as that head's queries (q: B, Hkv, Hq/Hkv, D), as
    decode kernels do: each KV byte is read once per group, and SDPA's flash kernel takes it without GQA support.
    """
    import torch.nn.functional as F

    rows = []
    for B, L, hq, hkv, d in cases:
        q = torch.randn(B, hkv, hq // hkv, d, dtype=dtype, device=dev)
        k = torch.randn(B, hkv, L, d, dtype=dtype, device=dev)
        v = torch.randn(B, hkv, L, d, dtype=dtype, device=dev)

        def fn():
            F.scaled_dot_product_attention(q, k, v)

        try:
            t = timer(fn, 4, iters)
            how = "graph"
        except Exception as e:  # noqa: BLE001 - a backend that cannot be captured: time it eagerly
            t = timer(fn, 4, iters, graph=False)
            how = f"eager ({type(e).__name__})"
        nb = 2.0 * B * hkv * L * d * torch.finfo(dtype).bits / 8
        rows.append({"batch": B, "context": L, "hq": hq, "hkv": hkv, "head_dim": d, "kv_bytes": nb, "s": t,
                     "how": how})
        del q, k, v
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--small", action="store_true", help="tiny sizes (a smoke run of the code on a CPU)")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    dev = torch.device(a.device)
    timer = _timer(dev)
    dt = torch.bfloat16
    res = {"torch": torch.__version__, "device": a.device, "dtype": "bf16", "started": time.time()}
    if dev.type == "cuda":
        p = torch.cuda.get_device_properties(0)
        res.update(name=p.name, memory_bytes=float(p.total_memory), sms=p.multi_processor_count,
                   l2_bytes=float(getattr(p, "L2_cache_size", 0) or 0))
    small = a.small
    pool = 8e6 if small else 512e6

    x = torch.zeros(1, device=dev)
    reps = 50 if small else 2000
    res["tiny"] = {"reps": reps, "s": timer(lambda: x.add_(1.0), reps, a.iters)}
    res["eager"] = {"reps": reps, "s": timer(lambda: x.add_(1.0), reps, a.iters, graph=False)}
    print("tiny", res["tiny"], "eager", res["eager"], flush=True)

    if small:
        gemv_sizes = [(256, 256), (512, 512), (1024, 512)]
    else:  # 0.25 MB … 512 MB of bf16 weights
        gemv_sizes = [(1024, 128), (1024, 512), (2048, 1024), (4096, 1024), (4096, 2048), (8192, 1024),
                      (8192, 2048), (8192, 3584), (7168, 4096), (8192, 7168), (8192, 14336), (8192, 28672),
                      (16384, 16384)]
    res["gemv"] = bench_gemv(dev, dt, gemv_sizes, pool, a.iters, timer)
    print("gemv", len(res["gemv"]), flush=True)

    if small:
        shapes, ms = [(256, 512)], [1, 4, 16, 64]
    else:  # Llama-3-70B TP8 down-proj shard, DeepSeek-V3 expert up/gate, a square
        shapes = [(3584, 8192), (7168, 4096), (8192, 8192)]
        ms = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]
    res["gemm"] = bench_gemm(dev, dt, shapes, ms, pool, a.iters, timer)
    print("gemm", len(res["gemm"]), flush=True)

    if dev.type == "cuda":
        try:
            res["gemm_fp8"] = bench_gemm_fp8(dev, shapes, ms, pool, a.iters, timer)
        except Exception as e:  # noqa: BLE001 - a chip or build without FP8 GEMMs: say so, go on
            res["gemm_fp8_error"] = f"{type(e).__name__}: {e}"
        print("gemm_fp8", len(res.get("gemm_fp8", [])), res.get("gemm_fp8_error", ""), flush=True)

    if small:
        cases = [(2, 64, 8, 1, 64)]
    else:  # Llama-70B at TP8 (8 q heads, 1 KV head per GPU), Llama-8B (32/8), over batch × context
        cases = [(B, L, hq, hkv, 128) for hq, hkv in ((8, 1), (32, 8)) for B, L in
                 ((1, 1024), (1, 8192), (1, 65536), (8, 8192), (32, 4096), (64, 8192), (128, 8192), (256, 2048))]
    res["attention"] = bench_attention(dev, dt, cases, a.iters, timer)
    print("attention", len(res["attention"]), flush=True)

    n = int((8e6 if small else 4e9) // 2)
    src = torch.empty(n, dtype=dt, device=dev)
    dst = torch.empty_like(src)
    t = timer(lambda: dst.copy_(src), 1, a.iters)
    res["copy"] = {"bytes_moved": 2.0 * n * 2, "s": t, "bytes_per_s": 2.0 * n * 2 / t}
    print("copy", res["copy"], flush=True)
    res["seconds"] = time.time() - res.pop("started")
    with open(a.out, "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
