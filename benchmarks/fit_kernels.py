"""Fit the step model's kernel constants to ``gpu_kernels.py``'s raw timings and set them beside the preset.

    python benchmarks/fit_kernels.py benchmarks/data/h200-kernels.json [--chip h200] [--json]

The step model (engine/step.py) costs a kernel as t = τ + max(F / (peak · η_c(M)), B / (BW · η_m)). From the
timings of one GPU this prints

* τ_min: the shortest kernel in a CUDA graph (a one-element add);
* τ_gemm and η_m: :func:`rackmath.analyses.fitting.measure.fit_kernel_line`, the line t = τ + B / (BW · η_m) through
  the decode GEMMs (M = 1) in relative error, over weight matrices of 0.25 to 512 MB;
* η_c and M½ per dtype and shape: :func:`rackmath.analyses.fitting.measure.fit_gemm_efficiency` on the GEMMs at
  M = 1 … 8192, bf16 and FP8 (FLOP/s over the catalog's dense peak of that dtype; points at the
  weight-streaming floor are left out by that function);
* η_kv: decode attention's KV bytes/s over the catalog bandwidth, for caches of 256 MB and more;

next to the same fields of the shipped preset for the chip (fitted to published serving records, not to
these timings). Numbers come from the JSON and the catalog only; nothing here needs a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from rackmath.analyses.fitting.measure import fit_gemm_efficiency, fit_kernel_line  # noqa: E402
from rackmath.engine.efficiency import default_efficiency  # noqa: E402
from rackmath.specs.hardware import load_chip  # noqa: E402


def fit(res: dict, chip_name: str) -> dict:
    chip = load_chip(chip_name)
    bw, peak = chip.hbm_bw, chip.flops["bf16"]
    line = fit_kernel_line([r["bytes"] for r in res["gemv"]], [r["s"] for r in res["gemv"]], bw)
    tau_gemv, eta_m, rms = line["tau_s"], line["eta_memory"], line["rms_rel_error"]
    gemm = {}
    for key, dtype in (("gemm", "bf16"), ("gemm_fp8", "fp8")):
        for k, n in sorted({(r["k"], r["n"]) for r in res.get(key, [])}):
            sel = [r for r in res[key] if (r["k"], r["n"]) == (k, n)]
            f = fit_gemm_efficiency([r["m"] for r in sel], [r["flops"] / r["s"] for r in sel], chip.flops[dtype])
            gemm[f"{dtype} {k}x{n}"] = {"eta_c": f["eta_max"], "m_half": f["m_half"], "rms": f["rms_rel_error"],
                                        "best_eta": max(r["flops"] / r["s"] for r in sel) / chip.flops[dtype]}
    big = [r for r in res["attention"] if r["kv_bytes"] >= 256e6]
    eta_kv = float(np.median([r["kv_bytes"] / r["s"] / bw for r in big])) if big else None
    eff = default_efficiency(chip_name)
    return {
        "device": res.get("name"), "torch": res.get("torch"), "chip": chip_name,
        "catalog": {"hbm_bandwidth": bw, "flops_bf16": peak},
        "measured": {"tau_min_s": res["tiny"]["s"], "eager_dispatch_s": res["eager"]["s"],
                     "tau_gemm_s": tau_gemv, "eta_memory": eta_m, "gemv_rms": rms, "gemm": gemm,
                     "eta_kv": eta_kv, "copy_bytes_per_s": res["copy"]["bytes_per_s"]},
        "preset": {"name": eff.name, "kernel_latency_s": eff.kernel_latency_s, "eta_memory": eff.eta_memory,
                   "eta_compute": eff.eta_compute, "gemm_half_tokens": eff.gemm_half_tokens},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kernels_json")
    ap.add_argument("--chip", default="h200", help="catalog chip the timings were taken on (default h200)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    out = fit(json.loads(Path(a.kernels_json).read_text()), a.chip)
    if a.json:
        print(json.dumps(out, indent=1))
        return
    m, p = out["measured"], out["preset"]
    print(f"{out['device']} (torch {out['torch']}), catalog chip {out['chip']}: "
          f"{out['catalog']['hbm_bandwidth'] / 1e12:.2f} TB/s, {out['catalog']['flops_bf16'] / 1e12:.0f} TFLOP/s bf16")
    print(f"{'constant':34s} {'measured':>14s} {'preset ' + p['name']:>26s}")
    print(f"{'τ_min (graph, 1-element add)':34s} {m['tau_min_s'] * 1e6:10.2f} µs")
    print(f"{'eager dispatch per kernel':34s} {m['eager_dispatch_s'] * 1e6:10.2f} µs")
    print(f"{'τ of a decode GEMM (line fit)':34s} {m['tau_gemm_s'] * 1e6:10.2f} µs {p['kernel_latency_s'] * 1e6:26.2f} µs")
    print(f"{'η_m (decode GEMM weight stream)':34s} {m['eta_memory']:12.3f} {p['eta_memory']:28.3f}"
          f"   (line rms {m['gemv_rms']:.1%})")
    for s, g in m["gemm"].items():
        print(f"{'η_c, M½ of ' + s:34s} {g['eta_c']:7.3f}, {g['m_half']:4.0f} {p['eta_compute']:22.3f}, "
              f"{p['gemm_half_tokens']:.0f}   (best FLOP/s: η {g['best_eta']:.3f}; fit rms {g['rms']:.1%})")
    if m["eta_kv"] is not None:
        print(f"{'η_kv (decode attention, ≥256 MB)':34s} {m['eta_kv']:12.3f}")
    print(f"{'copy (read + write)':34s} {m['copy_bytes_per_s'] / 1e12:9.2f} TB/s")


if __name__ == "__main__":
    main()
