"""Probe (issue 34, not shipped in the model): is gpt-oss-120b's TPOT on B200 too long because of the MoE kernel's
streaming rate, or because fewer distinct experts are hit than uniform routing says?

    python benchmarks/probe_moe_routing.py                       # the MoE curves' η and the vLLM gpt-oss rows as is
    python benchmarks/probe_moe_routing.py --hit-share 0.66 --eta-moe b200=0.76,h200=0.57
    python benchmarks/probe_moe_routing.py --routing             # the measured routing shares s(T)

Part 1 reads every shipped MoE curve (``specs/data/kernels/<chip>.toml``, aiconfigurator-core's balanced-routing
tables) and prints the share of HBM bandwidth the grouped GEMM reaches when it streams the experts it hits:
η_m,moe(T) = hits(T) · bytes per expert / (BW · (t(T) − τ)), hits(T) = min(E, T · k) / ep (the tables route
balanced: every token's k experts distinct from the others' until all E are hit), at its best T.

Part 2 predicts the InferenceMAX vLLM gpt-oss-120b rows on B200 and H200 (``--efficiency measured``, the shipped
stack host times, not refitted) with two changes one can switch on: routing over a share of the experts only
(``--hit-share s``: the T tokens pick uniformly among s · E experts, so the expected distinct experts hit is
s·E · (1 − (1 − k/(s·E))^T), nearly unchanged at small T and s · E at large T), and the chip's η_m replaced by
the MoE curve's (``--eta-moe``: for the whole step, a rough stand-in for an η of the expert weights alone).
Median |TPOT error| per chip, and the signed error by concurrency at TP 1. ``--routing``: the chips' measured routing
shares instead (``engine.numbers.routing_share``: aiconfigurator-core's power_law_1.2 rows against its balanced ones,
``moe_routing`` curves; off by default in rackmath, docs/stacks.md).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import rackmath.engine.numbers as N  # noqa: E402
from rackmath.analyses.serving.serve import serve  # noqa: E402
from rackmath.engine.efficiency import resolve  # noqa: E402
from rackmath.engine.roofline import expected_experts_hit  # noqa: E402
from rackmath.specs.hardware import load_chip  # noqa: E402
from rackmath.specs.kernels import kernel_table, moe_memory_efficiency  # noqa: E402
from rackmath.specs.records import shipped_records  # noqa: E402

def moe_eta(chip: str) -> list:
    """(curve name, η_m,moe, best T) of each of a chip's MoE curves (``specs.kernels.moe_memory_efficiency``)."""
    t, c0 = kernel_table(chip), load_chip(chip)
    tau = next(c for c in t["curves"] if c["op"] == "kernel_floor")["time_s"][0]
    out = []
    for c in (c for c in t["curves"] if c["op"] == "moe"):
        per_t = [moe_memory_efficiency(dict(c, x_values=[x], time_s=[y]), c0.hbm_bw, tau)
                 for x, y in zip(c["x_values"], c["time_s"])]
        best = max(range(len(per_t)), key=per_t.__getitem__)
        out.append((c["name"], per_t[best], c["x_values"][best]))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hit-share", type=float, default=1.0)
    ap.add_argument("--routing", action="store_true", help="the chips' measured routing shares s(T) (moe_routing "
                                                           "curves; off by default in rackmath)")
    ap.add_argument("--eta-moe", default="", help="chip=eta,… (e.g. b200=0.76,h200=0.57)")
    a = ap.parse_args(argv)
    for chip in ("h100", "h200", "b200", "gb200"):
        for name, eta, at in moe_eta(chip):
            print(f"{chip:6s} {name:58s} η_m,moe = {eta:.2f} (best at T = {at:g})")
    if a.routing:
        import rackmath.specs.kernels as K

        K.MEASURED_ROUTING = True
    s = a.hit_share
    if s != 1.0:
        N._expected_experts_hit = lambda E, k, T: np.asarray(expected_experts_hit(
            np.maximum(np.round(np.asarray(E, float) * s), k), k, np.asarray(T, float)), float)
    eta_moe = dict((kv.split("=")[0], float(kv.split("=")[1])) for kv in a.eta_moe.split(",") if kv)
    for chip in ("b200", "h200"):
        eff = resolve(chip, "measured")
        if chip in eta_moe:
            eff = replace(eff, eta_memory=eta_moe[chip])
        errs = []
        for r in shipped_records():
            i = r.inputs
            if not r.id.startswith("IMX") or r.metric != "tpot_s" or i.get("model") != "gpt-oss-120b" \
                    or r.framework != "vllm" or r.chip != chip:
                continue
            res = serve("gpt-oss-120b", chip, gpus=i["gpus"], tp=i.get("tp", 1), isl=i["isl"], osl=i["osl"],
                        concurrency=i["concurrency"], weights_dtype="mxfp4", framework=f"vllm@{r.stack_version}",
                        efficiency=eff, arrivals="closed-loop")
            errs.append((i.get("tp", 1), i["concurrency"], res["tpot_ms"] / 1e3 / r.value - 1))
        e = np.array([x[2] for x in errs])
        tp1 = ", ".join(f"c{c} {x:+.0%}" for t, c, x in sorted(errs) if t == 1)
        print(f"{chip}: {len(e)} TPOT rows, median |error| {np.median(np.abs(e)):.1%} (signed {np.median(e):+.1%}); "
              f"TP 1: {tp1}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
