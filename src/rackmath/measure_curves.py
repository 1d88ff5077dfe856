"""`rackmath measure --curves`'s PyTorch side (optional extra ``rackmath[torch]``): a chip's kernel curves, timed on
this machine's GPU in the format of ``specs/data/kernels/<chip>.toml`` (issue 34, item 1: "``rackmath measure`` on
a GPU adds or checks a chip's curves, in the same format").

What is timed, and how each curve compares with the shipped (aiconfigurator-core) ones:

* ``gemm``: y = x·Wᵀ for an M×K activation and an N×K weight, M = 1 … 32768, at the two shipped shapes
  (N, K) = (8192, 8192) and (2048, 7168), in BF16 (``torch.matmul``) and per-tensor FP8 (``torch._scaled_mm``,
  where the device has it). The weight is cycled through enough distinct copies that the copies together exceed
  twice the L2 cache, so a decode-size GEMM reads its weight from HBM as in a real step.
* ``kernel_floor``: the shortest GEMM (M = 8, N = 64, K = 32, BF16), the time of one small kernel inside a CUDA graph.
* ``attention_decode``: one query per sequence against a BF16 KV cache, 64 query heads over 8 KV heads of 128
  (``scaled_dot_product_attention`` with ``enable_gqa``, PyTorch's own kernel choice), batch 1, 8 and 64.
* ``mla_decode``: DeepSeek's absorbed MLA at TP 8 (16 heads; latent 512 + rope 64; BF16 cache) as three
  ``torch.matmul`` calls and a softmax (``measure_torch.mla_core``): a plain-PyTorch implementation, not a fused
  MLA kernel, and named so in the curve.

Not timed here: MoE grouped GEMMs (no fused MoE kernel in plain PyTorch) and collectives (one GPU). Every GPU time
is the best of several replays of a CUDA graph holding the kernel many times over (as serving stacks replay decode
steps), timed with CUDA events, divided by the kernels in the graph. On a CPU the same code runs with a wall clock
(a smoke test; the CPU is no chip of the catalog).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .measure_torch import _rand, mla_core, timeit

#: The grids of the shipped curves (``benchmarks/reduce_aiconfigurator.py``), so the two compare point by point.
GEMM_SHAPES = ((8192, 8192), (2048, 7168))
GEMM_M = tuple(float(2**i) for i in range(16))  # 1 … 32768
ATTN_BATCH_CONTEXT = ((1, 15), (8, 15), (64, 12))  # (batch, number of contexts 2^i − 1 from 1)
MLA_BATCH_CONTEXT = ((1, 17), (64, 17))
QUICK = {"gemm_m": 13, "attn": 12, "mla": 13}  # --quick: M up to 4096, contexts up to 4095


def graph_replay_time(fn, reps: int, iters: int = 5) -> float:
    """Seconds of one ``fn()`` on a GPU: three warm-up calls on a side stream, then ``reps`` calls captured in one CUDA
    graph, the best of ``iters`` replays timed with CUDA events, divided by ``reps`` (how a serving stack replays a
    decode step; also ``benchmarks/gpu_kernels.py``)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps):
            fn()
    g.replay()
    torch.cuda.synchronize()
    best = math.inf
    for _ in range(iters):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        g.replay()
        e1.record()
        torch.cuda.synchronize()
        best = min(best, e0.elapsed_time(e1) / 1e3 / reps)
    del g
    return best


def timer(dev, *, target_s: float = 2e-3, iters: int = 5):
    """``time(fn)`` → seconds of one ``fn()``: on a GPU, :func:`graph_replay_time` with ``reps`` sized from one timed
    call so the graph runs ~``target_s``; on a CPU, the best of ``iters`` wall-clock calls."""

    def time_cpu(fn) -> float:  # one warm-up call, then the best of ``iters`` single calls
        return timeit(fn, dev, min_time=0.0, reps=iters, warmup=1)

    def time_cuda(fn) -> float:
        fn()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        torch.cuda.synchronize()
        once = max(e0.elapsed_time(e1) / 1e3, 1e-6)
        return graph_replay_time(fn, int(min(200, max(1, target_s / once))), iters)

    return time_cuda if dev.type == "cuda" else time_cpu


def _l2_bytes(dev) -> float:
    if dev.type != "cuda":
        return 32e6
    return float(getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 50e6) or 50e6)


def _fp8_ok(dev) -> bool:
    return dev.type == "cuda" and hasattr(torch, "_scaled_mm") and torch.cuda.get_device_capability(dev) >= (8, 9)


def gemm_curve(dev, time_fn, dtype: str, n: int, k: int, ms) -> dict | None:
    """One GEMM curve: t(M) of an M×K by K×N product (weights cycled past the L2), FLOP/s = 2·M·N·K / t."""
    wbytes = n * k * (1 if dtype == "fp8" else 2)
    copies = int(min(16, max(1, math.ceil(2 * _l2_bytes(dev) / wbytes))))
    if dtype == "fp8":
        ws = [_rand((n, k), torch.bfloat16, dev, 0.05).to(torch.float8_e4m3fn) for _ in range(copies)]
        one = torch.ones((), device=dev, dtype=torch.float32)
    else:
        ws = [_rand((n, k), torch.bfloat16, dev, 0.05) for _ in range(copies)]
    xs, ts = [], []
    for m in ms:
        x = _rand((int(m), k), torch.bfloat16, dev)
        if dtype == "fp8":
            x = x.to(torch.float8_e4m3fn)

            def calls(x=x):
                for w in ws:
                    torch._scaled_mm(x, w.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        else:
            def calls(x=x):
                for w in ws:
                    torch.matmul(x, w.t())
        try:
            t = time_fn(calls) / copies
        except (RuntimeError, TypeError):  # a shape the FP8 kernel refuses: the point is left out
            continue
        finally:
            del x
        xs.append(float(m))
        ts.append(t)
    if not xs:
        return None
    return {"op": "gemm", "name": f"gemm {dtype} N={n} K={k}", "x": "m", "x_values": xs, "time_s": ts,
            "dtype": dtype, "n": n, "k": k, "flops_per_s": [2.0 * m * n * k / t for m, t in zip(xs, ts)],
            "weight_copies": copies}


def floor_curve(dev, time_fn) -> dict:
    """The floor of a small kernel: the shortest GEMM of the shipped tables (8 × 32 by 32 × 64, BF16)."""
    x, w = _rand((8, 32), torch.bfloat16, dev), _rand((64, 32), torch.bfloat16, dev)
    t = time_fn(lambda: torch.matmul(x, w.t()))
    return {"op": "kernel_floor", "name": "shortest GEMM measured", "x": "m", "x_values": [8.0], "time_s": [t],
            "dtype": "bf16", "n": 64, "k": 32}


def attention_curve(dev, time_fn, batch: int, contexts) -> dict:
    """GQA decode attention (64 q / 8 kv heads × 128, BF16 KV): t(context) of one step's attention at ``batch``."""
    xs, ts = [], []
    q = _rand((batch, 64, 1, 128), torch.bfloat16, dev)
    for L in contexts:
        kv = _rand((2, batch, 8, int(L), 128), torch.bfloat16, dev)
        t = time_fn(lambda kv=kv: F.scaled_dot_product_attention(q, kv[0], kv[1], enable_gqa=True))
        del kv
        xs.append(float(L))
        ts.append(t)
    return {"op": "attention_decode", "name": f"GQA decode attention 64q/8kv × 128, BF16 KV, batch {batch} "
                                             "(torch scaled_dot_product_attention)",
            "x": "context", "x_values": xs, "time_s": ts, "batch": batch, "heads": 64, "kv_heads": 8,
            "head_dim": 128, "kv_dtype": "bf16"}


def mla_curve(dev, time_fn, batch: int, contexts) -> dict:
    """DeepSeek absorbed MLA decode at TP 8 (16 heads, latent 512, rope 64, BF16 cache), plain PyTorch."""
    xs, ts = [], []
    ql, qr = _rand((batch, 16, 512), torch.bfloat16, dev), _rand((batch, 16, 64), torch.bfloat16, dev)
    scale = 1.0 / math.sqrt(192.0)
    for L in contexts:
        c, r = _rand((batch, int(L), 512), torch.bfloat16, dev), _rand((batch, int(L), 64), torch.bfloat16, dev)
        t = time_fn(lambda c=c, r=r: mla_core(ql, qr, c, r, scale))
        del c, r
        xs.append(float(L))
        ts.append(t)
    return {"op": "mla_decode", "name": f"MLA decode attention (DeepSeek, TP 8), BF16 KV, batch {batch} "
                                       "(plain torch.matmul + softmax, not a fused MLA kernel)",
            "x": "context", "x_values": xs, "time_s": ts, "batch": batch, "tp": 8, "kv_dtype": "bf16"}


def measure_curves(dev, *, quick: bool = False, progress=None) -> list[dict]:
    """Every curve this module times (see the module docstring), in the kernels TOML schema; ``framework`` is
    ``torch`` at its version. ``progress(label)`` is called before each curve."""
    time_fn = timer(dev)
    cpu = dev.type != "cuda"
    n_m = 8 if cpu else (QUICK["gemm_m"] if quick else len(GEMM_M))
    shapes = ((512, 512),) if cpu else GEMM_SHAPES
    dtypes = ["bf16"] + (["fp8"] if _fp8_ok(dev) else [])
    plan = [("kernel floor", lambda: floor_curve(dev, time_fn))]
    plan += [(f"gemm {d} {n}×{k}", lambda d=d, n=n, k=k: gemm_curve(dev, time_fn, d, n, k, GEMM_M[:n_m]))
             for d in dtypes for n, k in shapes]

    def ctx(count, cap):
        return [float(2**i - 1) for i in range(1, 1 + (min(count, 6) if cpu else min(count, cap)))]

    plan += [(f"attention batch {b}", lambda b=b, c=c: attention_curve(dev, time_fn, b, ctx(c, QUICK["attn"] if quick
                                                                                          else c)))
             for b, c in ATTN_BATCH_CONTEXT]
    plan += [(f"mla batch {b}", lambda b=b, c=c: mla_curve(dev, time_fn, b, ctx(c, QUICK["mla"] if quick else c)))
             for b, c in MLA_BATCH_CONTEXT]
    out = []
    for label, run in plan:
        if progress is not None:
            progress(label)
        c = run()
        if c is not None:
            c.update(framework="torch", framework_version=torch.__version__.split("+")[0],
                     table=f"rackmath measure --curves{' --quick' if quick else ''} (torch {torch.__version__})")
            out.append(c)
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    return out


__all__ = ["measure_curves", "timer", "graph_replay_time", "gemm_curve", "floor_curve", "attention_curve", "mla_curve"]
