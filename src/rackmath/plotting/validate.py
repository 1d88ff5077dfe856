"""`rackmath plot validate`: predicted vs measured for every public record (log-log, y = x and ±20% bands)."""

from __future__ import annotations

import numpy as np

from . import pyplot, save

_COLORS = {"hopper": "C0", "blackwell": "C2", "tpu-v4": "C3", "tpu-v5e": "C4"}


def plot_validate(result: dict, path="validate.png", ideal: dict | None = None):
    """Left: predicted/measured per record (calibrated, and ideal if given). Right: predicted vs measured."""
    rows = result["records"]
    plt = pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(14, max(6, 0.22 * len(rows))), gridspec_kw={"width_ratios": [1.3, 1]})
    y = np.arange(len(rows))[::-1]
    ratio = np.array([r["predicted"] / r["measured"] for r in rows])
    cols = [_COLORS.get(r["family"], "k") for r in rows]
    a1.axvspan(0.8, 1.2, color="0.9", label="±20%")
    a1.axvline(1.0, color="k", lw=0.8)
    a1.scatter(ratio, y, c=cols, s=28, zorder=3, label="calibrated")
    if ideal is not None:
        ir = np.array([r["predicted"] / r["measured"] for r in ideal["records"]])
        a1.scatter(ir, y, facecolors="none", edgecolors=cols, s=28, zorder=3, label="ideal roofline")
    a1.set_yticks(y, [f'{r["id"]}{" (derived)" if r["kind"] == "derived" else ""}' for r in rows], fontsize=7)
    a1.set(xscale="log", xlabel="predicted / measured", title="Every public record")
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    a1.xaxis.set_minor_formatter(NullFormatter())
    a1.xaxis.set_major_formatter(ScalarFormatter())
    a1.set_xticks([0.25, 0.5, 0.8, 1.0, 1.25, 2.0, 4.0])
    a1.grid(True, which="both", axis="x", alpha=0.3)
    a1.legend(fontsize=8, loc="lower right")
    meas = np.array([r["measured"] for r in rows])
    pred = np.array([r["predicted"] for r in rows])
    for fam in sorted({r["family"] for r in rows}):
        idx = [i for i, r in enumerate(rows) if r["family"] == fam]
        a2.scatter(meas[idx], pred[idx], c=_COLORS.get(fam, "k"), s=24, label=fam)
    lo, hi = 1e-2, 1e6
    xs = np.geomspace(lo, hi, 10)
    a2.plot(xs, xs, "k-", lw=0.8)
    a2.fill_between(xs, 0.8 * xs, 1.2 * xs, color="0.9")
    a2.set(xscale="log", yscale="log", xlabel="measured (record's unit)", ylabel="predicted",
           title="Predicted vs measured")
    a2.grid(True, which="both", alpha=0.3)
    a2.legend(fontsize=8)
    s = result["summary"]
    fig.suptitle(f"rackmath validate: median |error| {s['median_abs_error']:.1%} over {s['n']} measured records, "
                 f"worst {s['worst']['id']} ({s['worst']['error']:+.0%})")
    return save(fig, path)
