"""An independent check, on a GPU, of the MoE law a prompt pass's experts are priced with (docs/stacks.md, "The routed
experts' compute, measured"): PyTorch's own grouped GEMM (``torch._grouped_mm``, BF16) for DeepSeek-V3's experts on
one EP-8 rank, against dense GEMMs of the same rows on the same GPU.

    PYTHONPATH=src python benchmarks/probe_grouped_gemm.py --json out.json      # needs torch and a CUDA GPU

A rank holds E/EP = 32 experts (hidden 7168, expert width 2048); T tokens routed top-8 over 256 experts give each
local expert M = T·8/256 rows (balanced). One MoE layer is the gate+up GEMM (N = 2·2048, K = 7168) and the down GEMM
(N = 7168, K = 2048) of every local expert: F = 32·M·6·7168·2048 FLOPs. Timed as ``measure --curves`` times (CUDA
graph replays, ``rackmath.measure_curves.timer``). Printed per T: the grouped GEMM's and the dense GEMMs' FLOP/s and
their share of the BF16 peak, and the ratio grouped / dense — the quantity the shipped MoE law says is 0.25–0.75 at
128–512 rows per expert (TensorRT-LLM's FP8 and FP4 kernels, aiconfigurator-core's tables).
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from rackmath.measure_curves import timer

HIDDEN, INTER, E_LOCAL, TOPK, EXPERTS = 7168, 2048, 32, 8, 256
TOKENS = (1024, 2048, 4096, 8192, 16384, 32768)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", metavar="PATH")
    a = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    time_fn = timer(dev)
    w1 = torch.randn(E_LOCAL, 2 * INTER, HIDDEN, device=dev, dtype=torch.bfloat16).transpose(-2, -1)  # (E, K, N)
    w2 = torch.randn(E_LOCAL, HIDDEN, INTER, device=dev, dtype=torch.bfloat16).transpose(-2, -1)
    peak = 989.4e12  # H100 / H200 dense BF16 (specs/data: published.md H1, H2)
    rows = []
    for t in TOKENS:
        m = t * TOPK // EXPERTS
        x = torch.randn(E_LOCAL * m, HIDDEN, device=dev, dtype=torch.bfloat16)
        h = torch.randn(E_LOCAL * m, INTER, device=dev, dtype=torch.bfloat16)
        offs = torch.arange(m, E_LOCAL * m + 1, m, device=dev, dtype=torch.int32)

        def grouped(x=x, h=h, offs=offs):
            torch._grouped_mm(x, w1, offs=offs)
            torch._grouped_mm(h, w2, offs=offs)

        xs, hs = x.view(E_LOCAL, m, HIDDEN), h.view(E_LOCAL, m, INTER)

        def dense(xs=xs, hs=hs):  # the same rows as one batched dense GEMM per projection
            torch.bmm(xs, w1)
            torch.bmm(hs, w2)

        flops = E_LOCAL * m * 6.0 * HIDDEN * INTER
        row = {"tokens": t, "rows_per_expert": m, "flops": flops}
        for name, fn in (("grouped", grouped), ("dense", dense)):
            try:
                s = time_fn(fn)
                row[f"{name}_s"], row[f"{name}_eta"] = s, flops / s / peak
            except (RuntimeError, TypeError) as exc:  # a torch without _grouped_mm for this GPU
                row[f"{name}_error"] = str(exc)[:200]
        if "grouped_s" in row and "dense_s" in row:
            row["grouped_over_dense"] = row["dense_s"] / row["grouped_s"]
        rows.append(row)
        print(f"T = {t:6d}  M = {m:5d}  grouped η {row.get('grouped_eta', float('nan')):.3f}  dense η "
              f"{row.get('dense_eta', float('nan')):.3f}  grouped/dense {row.get('grouped_over_dense', float('nan')):.2f}")
        del x, h, xs, hs, grouped, dense
    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "peak_bf16": peak, "rows": rows}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
