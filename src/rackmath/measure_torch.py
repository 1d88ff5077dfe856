"""`rackmath measure`'s PyTorch side (optional extra: ``pip install rackmath[torch]``): micro-benchmarks and a
real decode sweep. Import this module only when torch is installed; the math lives in
:mod:`rackmath.analyses.fitting.measure`.

What is timed
-------------
* **matmul peak** per dtype: square M = K = N GEMMs of a few sizes; the best FLOP/s is the chip's peak.
* **small-M curve**: M tokens through every weight matrix of the decode model, back to back (a "GEMM pass",
  no attention), M = 1, 2, 4, … (tokens per GEMM); fitted to η(M) = η_max · M / (M + M_half).
* **memory bandwidth**: a reduction (``x.sum()``, reads the buffer once) and a copy (reads + writes) over a
  buffer at least as large as the decode model's weights; the best is the chip's bandwidth.
* **attention**: the attention core of one layer (GEMVs against the KV cache, softmax) over a cache of a few
  tens of MB: the rate at which it reads KV.
* **dispatch time**: one small operator (what a decode step pays per kernel when weights are tiny).
* **collective** (CUDA, > 1 device): a peer copy device 0 → device 1 and a ``torch.cuda.comm.reduce_add``.
* **decode sweep**: :class:`DecodeModel` (GQA/MHA/MQA or absorbed MLA attention; dense SwiGLU/GELU or MoE
  FFN; RMSNorm; random weights) decodes autoregressively with a preallocated KV cache at every batch size
  and context; the median time of one step (the cache grows by one token per step) is the measurement.

CUDA timings synchronise the device around each timed region. Nothing is downloaded.
"""

from __future__ import annotations

import math
import time

import torch
from torch import nn

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def resolve_device(device: str = "auto") -> torch.device:
    """'auto' → cuda when available, else cpu; 'cuda' without a GPU is an error naming the field."""
    from .errors import InputError

    d = (device or "auto").lower()
    if d == "auto":
        d = "cuda" if torch.cuda.is_available() else "cpu"
    if d not in ("cpu", "cuda"):
        raise InputError("device", f"unknown {device!r}", "cpu, cuda or auto")
    if d == "cuda" and not torch.cuda.is_available():
        raise InputError("device", "cuda requested but torch sees no CUDA device", "cpu or auto")
    return torch.device(d)


def device_info(dev: torch.device) -> dict:
    """Name, memory and count of the device(s)."""
    import os
    import platform

    if dev.type == "cuda":
        p = torch.cuda.get_device_properties(0)
        return {"type": "cuda", "name": p.name, "memory_bytes": float(p.total_memory),
                "count": torch.cuda.device_count(), "torch": torch.__version__}
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        mem = float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        mem = 16e9
    return {"type": "cpu", "name": name, "memory_bytes": mem, "count": 1, "threads": torch.get_num_threads(),
            "torch": torch.__version__}


def _sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def timeit(fn, dev, *, min_time: float = 0.05, reps: int = 3, warmup: int = 1) -> float:
    """Best-of-``reps`` seconds per call; each rep repeats ``fn`` until ``min_time`` has passed."""
    for _ in range(warmup):
        fn()
    _sync(dev)
    best = math.inf
    for _ in range(reps):
        n, t0 = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            _sync(dev)
            el = time.perf_counter() - t0
            if el >= min_time:
                break
        best = min(best, el / n)
    return best


def _rand(shape, dtype, dev, scale=1.0):
    return (torch.randn(shape, device=dev, dtype=torch.float32) * scale).to(dtype)


# --------------------------------------------------------------------------------------------- micro-benchmarks


def bench_matmul(dev, dtype: str, sizes=(512, 1024, 2048), min_time=0.05) -> list[dict]:
    """Square GEMMs: FLOP/s = 2·N³ / t."""
    dt = DTYPES[dtype]
    out = []
    for n in sizes:
        a, b = _rand((n, n), dt, dev), _rand((n, n), dt, dev)
        s = timeit(lambda: a @ b, dev, min_time=min_time)
        out.append({"m": n, "k": n, "n": n, "seconds": s, "flops_per_s": 2.0 * n**3 / s})
        del a, b
    return out


def bench_gemm_pass(dev, dtype: str, shapes, tokens=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
                    min_time=0.02, reps=2) -> list[dict]:
    """One "GEMM pass" per token count M: an M×K activation times every weight matrix in ``shapes``
    ((name, K, N, count) — count distinct matrices of each shape, as in the model), back to back.

    As in a decode step every matrix is a different one, so at small M the pass streams all of them from
    memory. Returns FLOP/s = Σ 2·M·K·N / t and the weight bytes streamed per second, per M.
    """
    dt = DTYPES[dtype]
    esz = torch.finfo(dt).bits // 8
    mats = [(k, _rand((n, k), dt, dev, 0.02)) for _name, k, n, c in shapes for _ in range(c)]
    flops_per_m = sum(2.0 * k * w.shape[0] for k, w in mats)
    wbytes = float(sum(w.numel() for _k, w in mats) * esz)
    out = []
    for m in tokens:
        xs = {k: _rand((m, k), dt, dev) for k in {k for k, _w in mats}}

        def gemm_pass():
            for k, w in mats:
                xs[k] @ w.T

        s = timeit(gemm_pass, dev, min_time=min_time, reps=reps)
        out.append({"m": int(m), "seconds": s, "flops_per_s": m * flops_per_m / s, "weight_bytes_per_s": wbytes / s})
    del mats
    return out


def bench_bandwidth(dev, nbytes: float, min_time=0.05) -> dict:
    """Read bandwidth (sum over a buffer) and copy bandwidth (read + write) of an ``nbytes`` fp32 buffer."""
    n = max(1 << 20, int(nbytes) // 4)
    x = torch.empty(n, device=dev, dtype=torch.float32).uniform_()
    y = torch.empty_like(x)
    t_read = timeit(lambda: x.sum(), dev, min_time=min_time)
    t_copy = timeit(lambda: y.copy_(x), dev, min_time=min_time)
    del x, y
    read, copy = 4.0 * n / t_read, 2 * 4.0 * n / t_copy
    return {"buffer_bytes": 4.0 * n, "read_bytes_per_s": read, "copy_bytes_per_s": copy,
            "bytes_per_s": max(read, copy)}


def bench_dispatch(dev, min_time=0.05) -> float:
    """Seconds per small operator (an in-place add on 256 elements): the per-kernel floor of a decode step."""
    x = torch.zeros(256, device=dev)

    def chain():
        for _ in range(50):
            x.add_(1.0)

    return timeit(chain, dev, min_time=min_time) / 50


def bench_collective(dev, nbytes: float = 256e6, min_time=0.05) -> dict | None:
    """CUDA with > 1 device: peer copy 0 → 1 (bytes/s one way) and reduce_add over all devices."""
    if dev.type != "cuda" or torch.cuda.device_count() < 2:
        return None
    n = int(nbytes) // 2
    ndev = torch.cuda.device_count()
    src = torch.empty(n, device="cuda:0", dtype=torch.bfloat16).uniform_()
    dst = torch.empty(n, device="cuda:1", dtype=torch.bfloat16)

    def p2p():
        dst.copy_(src, non_blocking=True)
        torch.cuda.synchronize(1)

    t = timeit(p2p, dev, min_time=min_time)
    parts = [torch.empty(n, device=f"cuda:{i}", dtype=torch.bfloat16).uniform_() for i in range(ndev)]
    t_red = timeit(lambda: torch.cuda.comm.reduce_add(parts, destination=0), dev, min_time=min_time)
    return {"devices": ndev, "p2p_bytes_per_s": 2.0 * n / t, "reduce_add_s": t_red,
            "reduce_add_bytes_per_s": 2.0 * n * (ndev - 1) / t_red}


# --------------------------------------------------------------------------------------------- the decode model


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * self.weight


class FFN(nn.Module):
    """SwiGLU (3 matrices) or GELU MLP (2 matrices)."""

    def __init__(self, d, f, matrices):
        super().__init__()
        self.gated = matrices == 3
        self.up = nn.Linear(d, f * (2 if self.gated else 1), bias=False)
        self.down = nn.Linear(f, d, bias=False)

    def forward(self, x):
        h = self.up(x)
        if self.gated:
            g, u = h.chunk(2, dim=-1)
            h = nn.functional.silu(g) * u
        else:
            h = nn.functional.gelu(h)
        return self.down(h)


class MoE(nn.Module):
    """Top-k routed experts (+ shared experts): only the experts the batch routes to are read."""

    def __init__(self, d, f, matrices, n_experts, k, n_shared):
        super().__init__()
        self.k = k
        self.router = nn.Linear(d, n_experts, bias=False)
        self.experts = nn.ModuleList([FFN(d, f, matrices) for _ in range(n_experts)])
        self.shared = FFN(d, f * n_shared, matrices) if n_shared else None

    def forward(self, x):  # x: [T, d]
        logits = self.router(x).float()
        w, idx = torch.topk(torch.softmax(logits, -1), self.k, dim=-1)
        out = self.shared(x) if self.shared is not None else torch.zeros_like(x)
        flat = idx.flatten()
        tok = torch.arange(x.shape[0], device=x.device).repeat_interleave(self.k)
        wf = w.flatten().to(x.dtype)
        for e in torch.unique(flat).tolist():  # the experts hit this step
            sel = flat == e
            t = tok[sel]
            out.index_add_(0, t, self.experts[e](x[t]) * wf[sel, None])
        return out


def gqa_core(qg, K, V):
    """softmax(q·Kᵀ/√d)·V for q [B, kvh, G, hd] against K, V [B, kvh, L, hd]: one GEMV per KV head, so each
    cached key and value is read once per step."""
    s = torch.matmul(qg, K.transpose(-1, -2)) * (1.0 / math.sqrt(qg.shape[-1]))
    p = torch.softmax(s.float(), dim=-1).to(qg.dtype)
    return torch.matmul(p, V)


def mla_core(q_lat, q_rope, C, R, scale):
    """Absorbed MLA: scores = q_lat·Cᵀ + q_rope·Rᵀ over the latent cache C [B, L, r] and rope keys R [B, L, p];
    output = softmax(scores)·C (the latent; W_UV is applied by the caller)."""
    s = (torch.matmul(q_lat, C.transpose(1, 2)) + torch.matmul(q_rope, R.transpose(1, 2))) * scale
    p = torch.softmax(s.float(), dim=-1).to(q_lat.dtype)
    return torch.matmul(p, C)


def bench_attention(dev, dtype: str, spec, kv_bytes: float = 64e6, context: int = 512, min_time=0.02) -> dict:
    """The attention core of one layer of ``spec`` over a KV cache of about ``kv_bytes`` (batch × ``context``
    tokens): KV bytes read per second (what the roofline's KV term assumes runs at the memory bandwidth)."""
    dt = DTYPES[dtype]
    esz = torch.finfo(dt).bits // 8
    L = int(context)
    if spec.attention == "mla":
        per_seq = L * (spec.kv_lora_rank + spec.qk_rope_head_dim) * esz
        B = max(1, int(kv_bytes // per_seq))
        H, r, p = spec.n_heads, spec.kv_lora_rank, spec.qk_rope_head_dim
        C, R = torch.full((B, L, r), 0.01, dtype=dt, device=dev), torch.full((B, L, p), 0.01, dtype=dt, device=dev)
        q_lat, q_rope = _rand((B, H, r), dt, dev), _rand((B, H, p), dt, dev)

        def fn():
            return mla_core(q_lat, q_rope, C, R, 0.1)
    else:
        kvh, hd, G = spec.n_kv_heads, spec.head_dim, spec.n_heads // spec.n_kv_heads
        per_seq = 2 * L * kvh * hd * esz
        B = max(1, int(kv_bytes // per_seq))
        K = torch.full((B, kvh, L, hd), 0.01, dtype=dt, device=dev)
        V = torch.full((B, kvh, L, hd), 0.01, dtype=dt, device=dev)
        qg = _rand((B, kvh, G, hd), dt, dev)

        def fn():
            return gqa_core(qg, K, V)

    t = timeit(fn, dev, min_time=min_time)
    return {"batch": B, "context": L, "kv_bytes": float(B * per_seq), "seconds": t,
            "kv_bytes_per_s": B * per_seq / t}


class GQAAttention(nn.Module):
    """Multi-/grouped-query/multi-query attention over a preallocated KV cache (rotary embedding omitted)."""

    def __init__(self, d, H, kvh, hd):
        super().__init__()
        self.H, self.kvh, self.hd = H, kvh, hd
        self.qkv = nn.Linear(d, (H + 2 * kvh) * hd, bias=False)
        self.o = nn.Linear(H * hd, d, bias=False)

    def new_cache(self, B, L_max, dtype, dev):
        return (torch.full((B, self.kvh, L_max, self.hd), 0.01, dtype=dtype, device=dev),
                torch.full((B, self.kvh, L_max, self.hd), 0.01, dtype=dtype, device=dev))

    def forward(self, x, cache, pos):  # x: [B, d]; the new token's K/V go to ring slot ``pos``; attends to all L
        B = x.shape[0]
        H, kvh, hd = self.H, self.kvh, self.hd
        q, k, v = self.qkv(x).split([H * hd, kvh * hd, kvh * hd], dim=-1)
        K, V = cache
        K[:, :, pos] = k.reshape(B, kvh, hd)
        V[:, :, pos] = v.reshape(B, kvh, hd)
        out = gqa_core(q.view(B, kvh, H // kvh, hd), K, V).reshape(B, H * hd)
        return self.o(out)


class MLAAttention(nn.Module):
    """DeepSeek multi-head latent attention in its absorbed decode form (W_UK into q, W_UV into o).

    Caches the normalised latent c_KV (kv_lora_rank) and the shared rotary key (qk_rope_head_dim) per token;
    the rotary rotation itself is omitted. Same weights as rackmath counts (q LoRA, kv_a, kv_b, o).
    """

    def __init__(self, d, H, q_rank, kv_rank, nope, rope, vdim):
        super().__init__()
        self.H, self.r, self.nope, self.rope, self.vdim = H, kv_rank, nope, rope, vdim
        qk = nope + rope
        if q_rank:
            self.q_a = nn.Linear(d, q_rank, bias=False)
            self.q_norm = RMSNorm(q_rank)
            self.q_b = nn.Linear(q_rank, H * qk, bias=False)
        else:
            self.q_a, self.q_b = None, nn.Linear(d, H * qk, bias=False)
        self.kv_a = nn.Linear(d, kv_rank + rope, bias=False)
        self.kv_norm = RMSNorm(kv_rank)
        self.kv_b = nn.Parameter(torch.empty(kv_rank, H, nope + vdim))  # W_UK | W_UV
        self.o = nn.Linear(H * vdim, d, bias=False)

    def new_cache(self, B, L_max, dtype, dev):
        return (torch.full((B, L_max, self.r), 0.01, dtype=dtype, device=dev),
                torch.full((B, L_max, self.rope), 0.01, dtype=dtype, device=dev))

    def forward(self, x, cache, pos):
        B, H = x.shape[0], self.H
        q = self.q_b(self.q_norm(self.q_a(x))) if self.q_a is not None else self.q_b(x)
        q = q.view(B, H, self.nope + self.rope)
        q_nope, q_rope = q[..., : self.nope], q[..., self.nope:]
        ckv, kr = self.kv_a(x).split([self.r, self.rope], dim=-1)
        C, R = cache
        C[:, pos] = self.kv_norm(ckv)
        R[:, pos] = kr
        w_uk, w_uv = self.kv_b[..., : self.nope], self.kv_b[..., self.nope:]
        q_lat = torch.einsum("bhn,rhn->bhr", q_nope, w_uk)
        o_lat = mla_core(q_lat, q_rope, C, R, 1.0 / math.sqrt(self.nope + self.rope))  # [B, H, r]
        o = torch.einsum("bhr,rhv->bhv", o_lat, w_uv).reshape(B, H * self.vdim)
        return self.o(o)


class Block(nn.Module):
    def __init__(self, spec, moe: bool):
        super().__init__()
        s = spec
        self.n1, self.n2 = RMSNorm(s.d_model), RMSNorm(s.d_model)
        if s.attention == "mla":
            self.attn = MLAAttention(s.d_model, s.n_heads, s.q_lora_rank, s.kv_lora_rank, s.qk_nope_head_dim,
                                     s.qk_rope_head_dim, s.v_head_dim)
        else:
            self.attn = GQAAttention(s.d_model, s.n_heads, s.n_kv_heads, s.head_dim)
        if moe:
            self.ffn = MoE(s.d_model, s.moe_d_ff, s.ffn_matrices, s.n_experts, s.experts_per_token,
                           s.n_shared_experts)
        else:
            self.ffn = FFN(s.d_model, s.d_ff, s.ffn_matrices)

    def forward(self, x, cache, pos):
        x = x + self.attn(self.n1(x), cache, pos)
        return x + self.ffn(self.n2(x))


class DecodeModel(nn.Module):
    """The network a (scaled) :class:`~rackmath.specs.models.ModelSpec` describes, for decoding only."""

    def __init__(self, spec):
        super().__init__()
        self.spec = spec
        self.embed = nn.Embedding(spec.vocab_size, spec.d_model)
        self.blocks = nn.ModuleList([Block(spec, m) for m in spec.moe_mask])
        self.norm = RMSNorm(spec.d_model)
        self.head = None if spec.tie_embeddings else nn.Linear(spec.d_model, spec.vocab_size, bias=False)

    def new_cache(self, B, L_max, dtype, dev):
        return [b.attn.new_cache(B, L_max, dtype, dev) for b in self.blocks]

    def forward(self, tokens, caches, pos):  # tokens: [B] → next tokens [B]
        x = self.embed(tokens)
        for b, c in zip(self.blocks, caches):
            x = b(x, c, pos)
        x = self.norm(x)
        logits = self.head(x) if self.head is not None else x @ self.embed.weight.T
        return torch.topk(logits, 1, dim=-1).indices[:, 0]  # greedy (topk: faster than argmax on CPU)


def build_model(spec, dtype: str, dev) -> DecodeModel:
    """Random weights (normal, std 0.02; norms 1) in ``dtype`` on ``dev``; no downloads."""
    torch.manual_seed(0)
    with torch.device("meta"):
        m = DecodeModel(spec)
    m = m.to_empty(device=dev).to(DTYPES[dtype])
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("weight") and p.dim() == 1:
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.02)
    return m.eval()


def param_bytes(model) -> float:
    return float(sum(p.numel() * p.element_size() for p in model.parameters()))


_MATMULS = {"mm", "bmm", "addmm", "matmul", "linear", "baddbmm", "einsum"}


def _storage(t) -> int | None:
    """Address of a tensor's storage (None where it has none): two tensors with the same one alias."""
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return None


def count_ops(model, dev, dtype: str, context: int, batch: int = 8) -> dict:
    """What one decode step dispatches, counted (not timed): aten operators (each one a kernel launch on a
    GPU) at batch 1 and at ``batch`` (an MoE runs more experts there), and the activation bytes the non-matmul
    operators (norms, activations, residual adds, softmax, top-1, cache writes) read and write per sequence,
    counted at ``batch`` sequences."""
    from torch.utils._python_dispatch import TorchDispatchMode

    def nbytes(x):
        return x.numel() * x.element_size() if isinstance(x, torch.Tensor) else 0

    class Count(TorchDispatchMode):
        n = 0
        moved = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.n += 1
            out = func(*args, **(kwargs or {}))
            name = func.__name__.split(".")[0]
            outs = out if isinstance(out, (tuple, list)) else (out,)
            # a view (select, transpose, split, …) moves nothing: its output shares an input's storage; an
            # in-place op (name ending in "_": cache writes, index_add_) writes into its input and does move data
            inputs = {_storage(a) for a in args if isinstance(a, torch.Tensor)}
            fresh = [o for o in outs if isinstance(o, torch.Tensor)
                     and (name.endswith("_") or _storage(o) not in inputs)]
            if name not in _MATMULS and fresh:
                Count.moved += sum(nbytes(a) for a in args) + sum(nbytes(o) for o in fresh)
            return out

    res = {}
    for B in (1, batch):
        Count.n, Count.moved = 0, 0
        caches = model.new_cache(B, max(1, int(context)), DTYPES[dtype], dev)
        # distinct tokens (as in the sweep), so that an MoE routes the sequences to different experts
        vocab = getattr(getattr(model, "spec", None), "vocab_size", 1)
        tok = torch.randint(0, vocab, (B,), generator=torch.Generator().manual_seed(0)).to(dev)
        with torch.inference_mode(), Count():
            model(tok, caches, 0)
        res[B] = (Count.n, Count.moved)
        del caches
    return {"ops": res[1][0], "ops_at_batch": res[batch][0], "batch": batch,
            "elementwise_bytes_per_seq": (res[batch][1] - res[1][1]) / max(batch - 1, 1)}


def bench_elementwise(dev, dtype: str, shape=None, min_time=0.02) -> float:
    """Bytes/s of elementwise work: silu(x) · x on ``shape`` (reads 3, writes 2 tensors).

    Default shape: activation-sized (256 × 4096) on a CPU, where caches make that the relevant rate; 8192 ×
    8192 on a GPU, where a 2 MB tensor times the launch of two kernels rather than the bandwidth (the launches
    are already counted, as operators × dispatch time)."""
    shape = shape or ((8192, 8192) if dev.type == "cuda" else (256, 4096))
    x = _rand(shape, DTYPES[dtype], dev)
    t = timeit(lambda: nn.functional.silu(x) * x, dev, min_time=min_time)
    return 5.0 * x.numel() * x.element_size() / t


def decode_steps(model, dev, dtype: str, batch: int, context: int, steps: int, warmup: int = 1) -> list[float]:
    """Seconds per decode step for ``batch`` sequences each attending to ``context`` cached tokens.

    The cache holds exactly ``context`` tokens per sequence, filled with a constant (a step's time does not
    depend on the values; no prefill is run). ``warmup + steps`` tokens are then decoded autoregressively
    (each step's argmax is the next input); each new token's key/value overwrites the oldest slot (a ring
    buffer), so every timed step reads exactly ``context`` tokens of KV — the roofline's context.
    """
    context = max(1, int(context))
    caches = model.new_cache(batch, context, DTYPES[dtype], dev)
    tok = torch.randint(0, model.spec.vocab_size, (batch,), device=dev)
    times = []
    with torch.inference_mode():
        for i in range(warmup + steps):
            _sync(dev)
            t0 = time.perf_counter()
            tok = model(tok, caches, i % context)
            _sync(dev)
            if i >= warmup:
                times.append(time.perf_counter() - t0)
    del caches
    return times
