"""The figure of `rackmath measure`: measured decode step time vs batch next to this machine's roofline,
knees marked; and the GEMM efficiency curve η(M) with its fit."""

from __future__ import annotations


def plot_measure(result: dict, path):
    """Left: step time vs batch per context (measured points, ideal roofline, calibrated prediction, knees).
    Right: matmul FLOP/s vs tokens per GEMM with η(M) = η_max · M / (M + M_half). Returns the path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from ..analyses.fitting import measure as am
    from ..engine.roofline import roofline

    spec, system, dtype = result["_spec"], result["_system"], result["dtype"]
    preset = result["preset"]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 5.2), gridspec_kw={"width_ratios": [1.6, 1]})
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    rows = result["sweep"]
    bmax = max(r["batch"] for r in rows)
    grid = np.geomspace(1, bmax * 1.5, 200)
    for i, k in enumerate(result["knees"]):
        c = colors[i % len(colors)]
        L = k["context"]
        sel = [r for r in rows if r["context"] == L]
        ax.plot([r["batch"] for r in sel], [r["measured_s"] * 1e3 for r in sel], "o", color=c, ms=6,
                label=f"measured, context {L:,}")
        r = roofline(spec, system, chips=1, batch=grid, context=L, weights_dtype=dtype, kv_dtype=dtype)
        ax.plot(grid, r.step_s * 1e3, "-", color=c, lw=1.6, label=f"ideal roofline (measured peaks), {L:,}")
        ct = am.calibrated_times(spec, system, grid, L, dtype, eta_max=preset["eta_compute"],
                                 m_half=preset["gemm_half_tokens"], eta_memory=preset["eta_memory"],
                                 eta_kv=preset.get("eta_kv"), elementwise_s_per_seq=preset.get("elementwise_s_per_seq", 0.0),
                                 overhead_s=preset["step_overhead_s"])
        ax.plot(grid, ct["step_s"] * 1e3, "--", color=c, lw=1.2, alpha=0.8, label=f"calibrated (micro-benchmarks), {L:,}")
        if k.get("measured"):
            ax.axvline(k["measured"], color=c, lw=1.0, alpha=0.7)
            ax.annotate(f"knee {k['measured']:.0f}", (k["measured"], 0), xycoords=(
                "data", "axes fraction"), xytext=(3, 4 + 14 * i), textcoords="offset points", color=c, fontsize=8)
        if k.get("predicted"):
            ax.axvline(k["predicted"], color=c, lw=1.0, ls=":", alpha=0.9)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch (sequences decoding together)")
    ax.set_ylabel("time per decode step (ms)")
    dev = result["device"]
    ax.set_title(f"{spec.name} on {dev['name'][:40]} ({dev['type']}, {dtype})\n"
                 "solid line: ideal roofline — a lower bound; vertical: knee measured (solid) / roofline (dotted)",
                 fontsize=9)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, loc="upper left")

    g = result["gemm_curve"]
    M = np.array([r["m"] for r in g["rows"]], dtype=float)
    F = np.array([r["flops_per_s"] for r in g["rows"]], dtype=float)
    peak = result["peak_flops"][g["dtype"]]
    ax2.plot(M, F / 1e9, "o", label="measured: the model's weight matrices")
    mm = np.geomspace(M.min(), M.max(), 200)
    fit = g["fit"]
    ax2.plot(mm, am.gemm_efficiency(mm, fit["eta_max"], fit["m_half"]) * peak / 1e9, "-",
             label=f"η(M) = {fit['eta_max']:.2f}·M/(M + {fit['m_half']:.0f})")
    ax2.axhline(peak / 1e9, color="grey", ls=":", lw=1, label=f"peak {peak / 1e9:,.0f} GFLOP/s")
    ax2.set_xscale("log", base=2)
    ax2.set_yscale("log")
    ax2.set_xlabel("tokens per GEMM (M)")
    ax2.set_ylabel("GFLOP/s")
    ax2.set_title(f"GEMM efficiency vs tokens ({g['dtype']})", fontsize=9)
    ax2.grid(True, which="both", alpha=0.25)
    ax2.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
