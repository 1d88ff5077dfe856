"""Chapters two and three's figures: the layout Pareto frontier, latency floors by scale-up size, pipeline memory."""

from __future__ import annotations

import numpy as np

from . import pyplot, save

_BOUND_COLORS = {"compute": "C0", "weights": "C1", "kv": "C2", "comm": "C3", "hop latency": "C4"}


def pareto_figure(search, path, title=""):
    """$ per million output tokens vs tokens/s per user: every fitting layout (grey) and the frontier, coloured by bound."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    res = search.layouts
    ok = np.asarray(search.fits).reshape(-1)
    x = np.asarray(res.tokens_per_s_per_user).reshape(-1)[ok]
    y = np.asarray(res.usd_per_mtok).reshape(-1)[ok]
    ax.scatter(x, y, s=3, color="0.8", label="layouts that fit")
    f = search.frontier
    fx, fy, fb = np.asarray(f.tokens_per_s_per_user), np.asarray(f.usd_per_mtok), np.asarray(f.bound)
    ax.plot(fx, fy, color="k", lw=1.0)
    for b, c in _BOUND_COLORS.items():
        sel = fb == b
        if sel.any():
            ax.scatter(fx[sel], fy[sel], s=24, color=c, label=f"frontier: {b}-bound", zorder=3)
    ax.set(xscale="log", yscale="log", xlabel="tokens/s per user", ylabel="$ per million output tokens",
           title=title or "Layout search: cost vs speed")
    ax.legend(fontsize=8)
    return save(fig, path)


def latency_floor_figure(grid, path):
    """Weight-load latency floor (one domain) for each system and model size; hollow markers = does not fit."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    xs = np.arange(len(grid["systems"]))
    for j, p in enumerate(grid["params"]):
        t = grid["t_floor_s"][:, j] * 1e3
        fits = grid["fits"][:, j]
        ax.plot(xs, t, marker="o", color=f"C{j}", label=f"{p / 1e12:g}T params (fp8)")
        ax.scatter(xs[~fits], t[~fits], s=80, facecolors="white", edgecolors=f"C{j}", zorder=3)
    ax.set_xticks(xs, [f"{n}\n({int(s)})" for n, s in zip(grid["systems"], grid["scaleup_size"])], fontsize=8)
    ax.set(yscale="log", ylabel="weight-load floor per token (ms)",
           title="Why scale-up size matters: bandwidth, not capacity (hollow: needs pipelining to fit)")
    ax.legend(fontsize=8)
    return save(fig, path)


def pipeline_memory_figure(stages, weight_per_chip, kv_per_chip, path, title=""):
    """Memory per chip vs pipeline stages: weights fall as 1/P, KV stays flat (lecture 01:03:37)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    P = np.asarray(stages)
    w = np.broadcast_to(weight_per_chip, P.shape) / 1e9
    k = np.broadcast_to(kv_per_chip, P.shape) / 1e9
    ax.stackplot(P, w, k, labels=["weights / (E·P)", "KV: (P·b)·len·bytes / (E·P)"], colors=["C1", "C2"], alpha=0.8)
    ax.set(xlabel="pipeline stages P", ylabel="GB per chip", title=title or "Pipelining cuts weights, not KV")
    ax.legend(fontsize=8)
    return save(fig, path)
