"""Figures of the sizing commands: queue and batch over time (simulate), $/Mtok vs tok/s/user per chip
(plan's Pareto fronts, compare). Interfaces layer: draws what the analyses computed."""

from __future__ import annotations

import numpy as np

from . import pyplot, save


def plot_timeline(result, path="simulate.png", title=""):
    """Requests waiting and sequences running (all replicas) over simulated time, with TTFT/TPOT percentiles."""
    plt = pyplot()
    tl = result.timeline
    fig, ax = plt.subplots(figsize=(8, 4.6))
    t = np.asarray(tl["t_s"])
    ax.step(t, tl["batch"], where="post", color="C0", lw=1.4, label="running sequences (batch, all replicas)")
    ax.step(t, tl["queue"], where="post", color="C3", lw=1.4, label="waiting requests (queue)")
    s = result.summary
    cfg = result.config
    txt = (f"TTFT p50/p90/p99 {s['ttft_s']['p50'] * 1e3:.4g}/{s['ttft_s']['p90'] * 1e3:.4g}/"
           f"{s['ttft_s']['p99'] * 1e3:.4g} ms\nTPOT p50/p90/p99 {s['tpot_s']['p50'] * 1e3:.4g}/"
           f"{s['tpot_s']['p90'] * 1e3:.4g}/{s['tpot_s']['p99'] * 1e3:.4g} ms\nutilization {s['utilization']:.0%}")
    ax.text(0.01, 0.98, txt, transform=ax.transAxes, va="top", fontsize=8, family="monospace",
            bbox=dict(facecolor="white", alpha=0.8, edgecolor="0.8"))
    ax.set(xlabel="simulated time (s)", ylabel="requests",
           title=title or f"{cfg['model']} on {cfg['gpus']} × {cfg['chip']} ({cfg['mode']}), {cfg['traffic']}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    return save(fig, path)


def plot_pareto(pareto: dict, path="pareto.png", title="", marks=None, target=None):
    """$/Mtok vs tok/s/user per chip: every fitting (layout, concurrency) as dots, the Pareto front as a line.

    ``marks`` = {chip: (tok/s/user, $/Mtok)} circles the chosen deployments; ``target`` draws the
    interactivity asked for.
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for i, (chip, p) in enumerate(pareto.items()):
        x = np.asarray(p["tok_s_user"])
        y = np.asarray(p["usd_per_mtok"])
        if x.size == 0:
            continue
        ax.scatter(x, y, s=4, color=f"C{i}", alpha=0.25)
        f = np.asarray(p["front"], dtype=int)
        o = np.argsort(x[f])
        ax.plot(x[f][o], y[f][o], color=f"C{i}", lw=2, label=chip)
        if marks and chip in marks and marks[chip] is not None:
            ax.scatter([marks[chip][0]], [marks[chip][1]], s=90, facecolors="none", edgecolors=f"C{i}", lw=2)
    if target:
        ax.axvline(target, color="0.4", ls="--", lw=1, label=f"target {target:g} tok/s/user")
    ax.set(xscale="log", yscale="log", xlabel="tokens/s per user (1 / TPOT)", ylabel="$ per million output tokens",
           title=title or "Cost vs interactivity per chip (Pareto fronts)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return save(fig, path)
