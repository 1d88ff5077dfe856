"""Reduce aiconfigurator-core's measured per-operator tables to compact kernel curves per chip (issue 34).

    python3 -m venv /work/aic-venv                                   # its OWN venv: never rackmath's
    /work/aic-venv/bin/pip install aiconfigurator-core==0.12.0       # (or the wheel file)
    /work/aic-venv/bin/python benchmarks/reduce_aiconfigurator.py            # prints a summary
    /work/aic-venv/bin/python benchmarks/reduce_aiconfigurator.py --write    # src/rackmath/specs/data/kernels/*.toml

NVIDIA's aiconfigurator-core (PyPI, Apache-2.0) ships per-operator latencies measured on each GPU under
TensorRT-LLM, SGLang and vLLM (``systems/data/<system>/<op>/<framework>/<version>/*.parquet``). This script reads
them (an optional dependency of this script only: rackmath never imports aiconfigurator) and writes, per catalog
chip, the compact curves the step model will use as priors, each with the package, its version, the table and the
framework + version that measured it:

* ``gemm``: time and achieved FLOP/s versus M (tokens) at two (N, K) shapes, per dtype (bf16, fp8, fp8_block,
  nvfp4 where measured);
* ``kernel_floor``: the shortest GEMM measured (M = N = K smallest): the floor latency of a small kernel;
* ``attention_decode``: GQA decode attention (64 query / 8 KV heads, head_dim 128, BF16 KV) time versus context at
  batch 1, 8, 64;
* ``mla_decode``: MLA decode attention (DeepSeek, 128 heads / TP) time versus context at batch 1 and 64, TP 8;
* ``moe``: grouped-GEMM MoE time versus tokens for DeepSeek-V3's experts (7168 × 2048, 256 experts, top-8) at EP 8
  and gpt-oss-120b's (2880 × 2880, 128 experts, top-4) at EP 1, balanced routing;
* ``moe_routing``: the share of uniform routing's distinct experts that a skewed router hits, s(T), versus tokens,
  per model shape (gpt-oss-120b's and DeepSeek-V3's experts at EP 1), from the same MoE tables' rows measured under
  the ``power_law_1.2`` token distribution (aiconfigurator-core's default for MoE layers) beside the ``balanced`` ones:

      s(T) = min(1, (t_power(T) − τ) / (t_balanced(T) − τ)) · min(E, T·k) / (E · (1 − (1 − k/E)^T))

  (``engine.numbers.routing_share``; τ = the chip's ``kernel_floor`` curve). A memory-bound grouped GEMM's time above
  the floor is proportional to the distinct experts it streams; the balanced rows hit min(E, T·k) of them, uniform
  routing E·(1 − (1 − k/E)^T). Points T ≤ 512 (a decode step's tokens). A table is used only where its two
  distributions were timed by the same kernel: within 15% at T = 1 (both route the token to k distinct experts),
  and no power-law row more than 15% slower than the balanced one up to T = E/k (the balanced rows stream the most
  experts there), and whose balanced rows stream the experts they hit (≥ 1.3× the time per doubling of T from 4
  tokens to E/k). SGLang 0.5.14's and vLLM 0.24's DeepSeek rows on B200 are 1.1–1.4× slower under the power law at
  2–16 tokens, and vLLM 0.24's balanced DeepSeek rows on L40S take 1.1× as long at 16 tokens as at 8: neither is
  used. Each curve keeps both measured times and τ;
* ``all_reduce``, ``all_gather``, ``reduce_scatter``, ``alltoall``: NCCL time versus bytes per group size;
* ``custom_all_reduce``: the stacks' own one-shot all-reduce in a CUDA graph (TensorRT-LLM's where measured) versus
  bytes per group size.

Latencies in the tables are milliseconds; the curves are SI (seconds, bytes, FLOP/s).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # rackmath's light spec helpers (no rackmath install needed in this venv)

from rackmath.analyses.fitting.measure import curves_toml, significant as _floats  # noqa: E402
from rackmath.engine.numbers import routing_share  # noqa: E402
from rackmath.specs.kernels import ROUTING_DISTRIBUTION  # noqa: E402
from rackmath.specs.stacks import version_key  # noqa: E402

TARGET = ROOT / "src" / "rackmath" / "specs" / "data" / "kernels"
PACKAGE = "aiconfigurator-core"

#: aiconfigurator system directory → rackmath catalog chip (only chips the catalog has).
SYSTEMS = {"h100_sxm": "h100", "h200_sxm": "h200", "b200_sxm": "b200", "gb200": "gb200", "gb300": "gb300",
           "a100_sxm": "a100-sxm-80gb", "l40s": "l40s"}
#: Preferred frameworks, in order (the newest version of the first that measured a table is used).
FRAMEWORKS = ("trtllm", "sglang", "vllm")
DTYPE = {"bfloat16": "bf16", "float16": "fp16", "fp8": "fp8", "fp8_block": "fp8_block", "nvfp4": "nvfp4",
         "w4a16_mxfp4": "w4a16_mxfp4", "w4a8_mxfp4_mxfp8": "w4a8_mxfp4_mxfp8", "half": "fp16", "int8": "int8"}
ELEM_BYTES = {"half": 2, "bfloat16": 2, "float16": 2, "int8": 1, "fp8": 1}


def tables(sysdir: Path, op: str, filename: str, frameworks=FRAMEWORKS) -> list:
    """Every (framework, version, path) of ``op/<fw>/<v>/filename``: the preferred framework first, newest first."""
    out = []
    for fw in frameworks:
        d = sysdir / op / fw
        if d.is_dir():
            vs = sorted((p for p in d.iterdir() if (p / filename).exists()), key=lambda p: version_key(p.name))
            out += [(fw, v.name, v / filename) for v in reversed(vs)]
    return out


def newest_table(sysdir: Path, op: str, filename: str, frameworks=FRAMEWORKS):
    """(framework, version, path) of the newest version of the first framework that has ``op/<fw>/<v>/filename``."""
    t = tables(sysdir, op, filename, frameworks)
    return t[0] if t else None



def curve(op, name, pkg_root, hit, x, xs, ys, **extra):
    fw, ver, path = hit
    c = {"op": op, "name": name, "x": x, "x_values": _floats(xs, 8), "time_s": _floats(ys)}
    c.update(extra)
    c.update(framework=fw, framework_version=ver, table=str(path.relative_to(pkg_root)))
    return c


def gemm_curves(sysdir, pkg_root):
    import pandas as pd

    hit = newest_table(sysdir, "gemm", "gemm_perf.parquet")
    if not hit:
        return []
    df = pd.read_parquet(hit[2])
    out = []
    ms_all = sorted(df.m.unique())
    pow2 = [m for m in ms_all if m & (m - 1) == 0]
    for dt in sorted(df.gemm_dtype.unique()):
        d = df[df.gemm_dtype == dt]
        shapes = set(zip(d.n, d.k))
        for n, k in ((8192, 8192), (2048, 7168)):
            if (n, k) not in shapes:
                continue
            s = d[(d.n == n) & (d.k == k)].groupby("m").latency.min()
            ms = [m for m in pow2 if m in s.index]
            t = [s[m] * 1e-3 for m in ms]
            flops = [2.0 * m * n * k / x for m, x in zip(ms, t)]
            out.append(curve("gemm", f"gemm {DTYPE.get(dt, dt)} N={n} K={k}", pkg_root, hit, "m", ms, t,
                             dtype=DTYPE.get(dt, dt), n=int(n), k=int(k), flops_per_s=_floats(flops)))
    small = df[df.gemm_dtype == ("bfloat16" if "bfloat16" in set(df.gemm_dtype) else df.gemm_dtype.iloc[0])]
    row = small.loc[small.latency.idxmin()]
    out.append(curve("kernel_floor", "shortest GEMM measured", pkg_root, hit, "m", [row.m], [row.latency * 1e-3],
                     dtype=DTYPE.get(row.gemm_dtype, row.gemm_dtype), n=int(row.n), k=int(row.k)))
    return out


def attention_curves(sysdir, pkg_root):
    import pandas as pd

    out = []
    hit = newest_table(sysdir, "attention", "generation_attention_perf.parquet")
    if hit:
        df = pd.read_parquet(hit[2])
        d = df[(df.num_heads == 64) & (df.num_key_value_heads == 8) & (df.head_dim == 128)
               & (df.kv_cache_dtype == "bfloat16") & (df.window_size == 0)]
        for b in (1, 8, 64):
            s = d[d.batch_size == b].groupby("step").latency.min()
            if len(s) >= 3:
                out.append(curve("attention_decode", f"GQA decode attention 64q/8kv × 128, BF16 KV, batch {b}",
                                 pkg_root, hit, "context", list(s.index), [x * 1e-3 for x in s.values],
                                 batch=b, heads=64, kv_heads=8, head_dim=128, kv_dtype="bf16"))
    hit = newest_table(sysdir, "mla", "generation_mla_perf.parquet")
    if hit:
        df = pd.read_parquet(hit[2])
        d = df[(df.tp_size == 8) & (df.kv_cache_dtype == "bfloat16")]
        for b in (1, 64):
            s = d[d.batch_size == b].groupby("step").latency.min()
            if len(s) >= 3:
                out.append(curve("mla_decode", f"MLA decode attention (DeepSeek, TP 8), BF16 KV, batch {b}", pkg_root,
                                 hit, "context", list(s.index), [x * 1e-3 for x in s.values], batch=b, tp=8,
                                 kv_dtype="bf16"))
    return out


def moe_curves(sysdir, pkg_root):
    import pandas as pd

    out = []
    frames = [(hit, pd.read_parquet(hit[2])) for hit in tables(sysdir, "moe", "moe_perf.parquet")]
    for model, h, i, e, k, ep in (("deepseek-v3", 7168, 2048, 256, 8, 8), ("gpt-oss-120b", 2880, 2880, 128, 4, 1)):
        for hit, df in frames:  # the newest table (preferred framework first) that measured this configuration
            d = df[(df.hidden_size == h) & (df.inter_size == i) & (df.num_experts == e) & (df.topk == k)
                   & (df.moe_ep_size == ep) & (df.moe_tp_size == 1) & (df.distribution == "balanced")]
            if len(d):
                break
        else:
            continue
        for dt in sorted(d.moe_dtype.unique()):
            s = d[d.moe_dtype == dt].groupby("num_tokens").latency.min()
            if len(s) >= 3:
                out.append(curve("moe", f"MoE {model} experts {DTYPE.get(dt, dt)}, EP {ep}, balanced", pkg_root, hit,
                                 "tokens", list(s.index), [x * 1e-3 for x in s.values], dtype=DTYPE.get(dt, dt),
                                 model=model, hidden=h, inter=i, experts=e, topk=k, ep=ep))
    return out


#: Model expert shapes whose routing is reduced: (model, hidden, inter, experts, top-k, weight dtypes in order of
#: preference). EP 1 only: with the experts split over ranks a skewed router also unbalances the ranks, and the
#: measured rank's time no longer counts distinct experts.
ROUTING_SHAPES = (("gpt-oss-120b", 2880, 2880, 128, 4, ("w4a16_mxfp4", "w4a8_mxfp4_mxfp8")),
                  ("deepseek-v3", 7168, 2048, 256, 8, ("fp8_block", "nvfp4", "fp8", "bfloat16")))
#: Largest tokens per step kept in a routing curve (a decode step's; the share is held beyond it).
ROUTING_MAX_TOKENS = 512
#: Largest |t_power / t_balanced − 1| at T = 1, and t_power / t_balanced − 1 at any T ≤ E/k, for a table's two
#: distributions to be compared, and the least growth of a balanced row's time when T doubles (from 4 tokens to
#: E/k: it streams twice the experts) for it to count the experts it streams (module docstring).
ROUTING_SAME_KERNEL = 0.15
ROUTING_DOUBLING = 1.3


def routing_curves(sysdir, pkg_root, tau):
    """One ``moe_routing`` curve per model shape: s(T) from the first table (preferred framework, newest first) and
    dtype whose balanced and power-law rows were timed by the same kernel (module docstring)."""
    import pandas as pd

    out = []
    frames = [(hit, pd.read_parquet(hit[2])) for hit in tables(sysdir, "moe", "moe_perf.parquet")]
    for model, h, i, e, k, dtypes in ROUTING_SHAPES:
        found = None
        for hit, df in frames:
            d = df[(df.hidden_size == h) & (df.inter_size == i) & (df.num_experts == e) & (df.topk == k)
                   & (df.moe_ep_size == 1) & (df.moe_tp_size == 1)]
            for dt in (x for x in dtypes if x in set(d.moe_dtype)):
                bal, pw = (d[(d.moe_dtype == dt) & (d.distribution == dist)].groupby("num_tokens").latency.min()
                           for dist in ("balanced", ROUTING_DISTRIBUTION))
                ts = [t for t in bal.index if t in pw.index and t <= ROUTING_MAX_TOKENS]
                if len(ts) >= 3 and 1 in ts and abs(pw[1] / bal[1] - 1) <= ROUTING_SAME_KERNEL \
                        and all(pw[t] <= (1 + ROUTING_SAME_KERNEL) * bal[t] for t in ts if t <= e / k) \
                        and all(bal[2 * t] >= ROUTING_DOUBLING * bal[t] for t in ts if 4 <= t and 2 * t in ts
                                and 2 * t <= e / k):
                    found = (hit, dt, ts, bal, pw)
                    break
            if found:
                break
        if not found:
            continue
        hit, dt, ts, bal, pw = found
        tb, tp = [bal[t] * 1e-3 for t in ts], [pw[t] * 1e-3 for t in ts]
        share = [float(routing_share(a, b, tau, e, k, t)) for a, b, t in zip(tp, tb, ts)]
        out.append(curve("moe_routing", f"MoE routing {model} experts ({h} × {i}, {e} experts, top-{k}), "
                                        f"{ROUTING_DISTRIBUTION} vs balanced, {DTYPE.get(dt, dt)}, EP 1", pkg_root,
                         hit, "tokens", ts, tp, balanced_time_s=_floats(tb), floor_s=float(f"{tau:.5g}"),
                         share=_floats(share, 4), distribution=ROUTING_DISTRIBUTION, dtype=DTYPE.get(dt, dt),
                         model=model, hidden=h, inter=i, experts=e, topk=k, ep=1))
    return out


def comm_curves(sysdir, pkg_root):
    import pandas as pd

    hit = newest_table(sysdir, "comm", "nccl_perf.parquet", frameworks=("nccl",))
    if not hit:
        return []
    df = pd.read_parquet(hit[2])
    out = []
    for op in ("all_reduce", "all_gather", "reduce_scatter", "alltoall"):
        for g in sorted(df[df.op_name == op].num_gpus.unique()):
            d = df[(df.op_name == op) & (df.num_gpus == g) & (df.nccl_dtype == "half")]
            s = d.groupby("message_size").latency.min()
            if len(s) >= 3:
                out.append(curve(op, f"NCCL {op} over {g} GPUs (FP16 elements)", pkg_root, hit, "bytes",
                                 [m * 2 for m in s.index], [x * 1e-3 for x in s.values], gpus=int(g),
                                 nccl_version=hit[1]))
    return out


def custom_allreduce_curves(sysdir, pkg_root):
    """The stacks' own one-shot all-reduce (TensorRT-LLM's, else SGLang's or vLLM's custom all-reduce) inside a CUDA
    graph, per group size: what a decode step's small all-reduces cost on NVLink (NCCL's are ~5× slower there)."""
    import pandas as pd

    hit = newest_table(sysdir, "comm", "custom_allreduce_perf.parquet")
    if not hit:
        return []
    df = pd.read_parquet(hit[2])
    how = next(c for c in ("backend", "implementation", "kernel_source") if c in df)
    df = df[~df[how].astype(str).str.contains("eager")]  # graph-captured rows only (what a decode step replays)
    out = []
    for g in sorted(df.num_gpus.unique()):
        d = df[(df.num_gpus == g) & (df.allreduce_dtype == "bfloat16")]
        s = d.groupby("message_size").latency.min()
        if len(s) >= 3:
            out.append(curve("custom_all_reduce", f"custom all-reduce ({hit[0]}, CUDA graph) over {g} GPUs (BF16 "
                                                  "elements)", pkg_root, hit, "bytes", [m * 2 for m in s.index],
                             [x * 1e-3 for x in s.values], gpus=int(g)))
    return out


def render(chip, system, device, version, curves) -> str:
    comments = [f"Measured kernel curves of {chip} ({device}), reduced by benchmarks/reduce_aiconfigurator.py from",
                f"{PACKAGE} {version} (NVIDIA, Apache License 2.0: specs/data/kernels/NOTICE-aiconfigurator.md).",
                "Changes: the package's per-operator tables reduced to these curves (a few shapes each, the minimum",
                "latency per point, SI units). Do not edit by hand. Keys starting with \"_\" are not catalog kinds.",
                "The silicon of --efficiency measured: specs/kernels.silicon derives the step model's tau, eta_c, "
                "M_half, eta_m, collective latency and eta_comm from these curves."]
    meta = {"chip": chip, "package": PACKAGE, "package_version": version, "license": "Apache-2.0", "system": system,
            "device": device, "source": f"{PACKAGE} {version} (PyPI), systems/data/{system}/: per-operator latencies "
                                        f"measured by NVIDIA on {device}"}
    return curves_toml(meta, curves, comments)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help=f"write {TARGET.relative_to(ROOT)}/<chip>.toml")
    args = ap.parse_args(argv)
    try:
        import aiconfigurator_core
        from importlib.metadata import version as pkg_version
    except ImportError:
        print("error: aiconfigurator-core is not installed in this Python (use its own venv: see the docstring)",
              file=sys.stderr)
        return 2
    version = pkg_version(PACKAGE)
    pkg_root = Path(aiconfigurator_core.__file__).parent
    data = pkg_root / "systems" / "data"
    import numpy as np  # noqa: F401  (pandas needs it; imported here so a missing one fails early)

    for system, chip in SYSTEMS.items():
        sysdir = data / system
        if not sysdir.is_dir() or not any(sysdir.rglob("*.parquet")):
            print(f"{system}: no measured tables", file=sys.stderr)
            continue
        curves = gemm_curves(sysdir, pkg_root) + attention_curves(sysdir, pkg_root) + moe_curves(sysdir, pkg_root)
        floor = next((c for c in curves if c["op"] == "kernel_floor"), None)
        curves += (routing_curves(sysdir, pkg_root, floor["time_s"][0]) if floor else []) \
            + comm_curves(sysdir, pkg_root) + custom_allreduce_curves(sysdir, pkg_root)
        if not curves:
            continue
        import pandas as pd

        device = str(pd.read_parquet(next(sysdir.rglob("*.parquet"))).device.iloc[0])
        text = render(chip, system, device, version, curves)
        ops = sorted({c["op"] for c in curves})
        print(f"{chip:14s} {system:12s} {len(curves):3d} curves: {', '.join(ops)}")
        if args.write:
            TARGET.mkdir(parents=True, exist_ok=True)
            (TARGET / f"{chip}.toml").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
