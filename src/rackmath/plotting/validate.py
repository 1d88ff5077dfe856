"""`rackmath plot validate`: predicted vs measured for every validation record, colored by source."""

from __future__ import annotations

import numpy as np

from . import pyplot, save

_MARKERS = {"hopper": "o", "blackwell": "s", "amd": "D", "tpu": "^", "rubin": "P"}


def _colors(groups):
    import matplotlib

    cmap = matplotlib.colormaps["tab20"]
    return {g: cmap(i % 20) for i, g in enumerate(groups)}


def plot_validate(result: dict, path="validate.png", ideal: dict | None = None):
    """Left: predicted vs measured (log-log, y = x, ±20% and 2× bands), one color per source, one marker per
    hardware family. Right: predicted / measured of each record, by source (filled: calibrated; hollow: ideal)."""
    rows = [r for r in result["records"] if r.get("fitted", True)]
    if not rows:
        from ..errors import InputError

        raise InputError("records", "no measured or approximate record to plot",
                         "at least one (derived records are not scored)")
    plt = pyplot()
    groups = list(dict.fromkeys(r["source_group"] for r in rows))
    col = _colors(groups)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(16, max(7, 0.3 * len(groups) + 2)),
                                 gridspec_kw={"width_ratios": [1, 1.1]})
    meas = np.array([r["measured"] for r in rows])
    pred = np.array([r["predicted"] for r in rows])
    for g in groups:
        for fam in sorted({r["hardware_family"] for r in rows}):
            idx = [i for i, r in enumerate(rows) if r["source_group"] == g and r["hardware_family"] == fam]
            if idx:
                a1.scatter(meas[idx], pred[idx], color=col[g], marker=_MARKERS.get(fam, "o"), s=22,
                           edgecolors="k", linewidths=0.3)
    lo, hi = 0.5 * max(min(meas.min(), pred.min()), 1e-6), 2 * max(meas.max(), pred.max())
    xs = np.geomspace(lo, hi, 10)
    a1.plot(xs, xs, "k-", lw=0.8)
    a1.fill_between(xs, 0.8 * xs, 1.2 * xs, color="0.88", label="±20%")
    a1.plot(xs, 2 * xs, "k:", lw=0.6, label="2×")
    a1.plot(xs, xs / 2, "k:", lw=0.6)
    for fam, mk in _MARKERS.items():
        if any(r["hardware_family"] == fam for r in rows):
            a1.scatter([], [], marker=mk, color="0.5", label=fam)
    a1.set(xscale="log", yscale="log", xlabel="measured (the record's metric, SI: s or tok/s)", ylabel="predicted",
           title="Predicted vs measured (color = source, marker = hardware family)")
    a1.grid(True, which="both", alpha=0.3)
    a1.legend(fontsize=8, loc="upper left")
    y = {g: i for i, g in enumerate(groups[::-1])}
    ratio = pred / meas
    jitter = np.random.default_rng(0).uniform(-0.25, 0.25, len(rows))
    a2.axvspan(0.8, 1.2, color="0.88")
    a2.axvline(1.0, color="k", lw=0.8)
    for v in (0.5, 2.0):
        a2.axvline(v, color="k", ls=":", lw=0.6)
    ys = np.array([y[r["source_group"]] for r in rows]) + jitter
    a2.scatter(ratio, ys, c=[col[r["source_group"]] for r in rows], s=18, zorder=3, edgecolors="k", linewidths=0.3,
               label="calibrated")
    if ideal is not None:
        ir = {r["id"]: r["predicted"] / r["measured"] for r in ideal["records"]}
        iv = np.array([ir.get(r["id"], np.nan) for r in rows])
        a2.scatter(iv, ys, facecolors="none", edgecolors=[col[r["source_group"]] for r in rows], s=18, zorder=2,
                   label="ideal roofline")
    a2.set_yticks(list(y.values()), list(y.keys()), fontsize=7)
    a2.set(xscale="log", xlabel="predicted / measured", title="Every record, by source")
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    a2.xaxis.set_minor_formatter(NullFormatter())
    a2.xaxis.set_major_formatter(ScalarFormatter())
    ticks = [0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 10.0, 30.0]
    a2.set_xticks(ticks)
    a2.grid(True, which="both", axis="x", alpha=0.3)
    a2.legend(fontsize=8, loc="lower right")
    s = result["summary"]
    fig.suptitle(f"rackmath validate: median |error| {s['median_abs_error']:.1%} over {s['n']} records from "
                 f"{len(groups)} sources, worst {s['worst']['id']} ({s['worst_ratio']:.2f}×)")
    fig.tight_layout()
    return save(fig, path)
