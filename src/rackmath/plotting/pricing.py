"""Chapter five's blackboard figures: cost vs context under a price sheet's tiers; cost vs hold time per tier."""

from __future__ import annotations

import numpy as np

from . import pyplot, save


def plot_price_context(context, curves: dict, *, sheet=None, kind="output", crossover=None, title="",
                       path="price_context.png"):
    """Relative cost per token vs context for each attention kind (lecture 01:35), with the sheet's price tiers
    drawn over it as price / price at short context (the provider's "two-tier pricing structure")."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for i, (name, y) in enumerate(curves.items()):
        ax.plot(context, y, color=f"C{i}", lw=2.2 if name == "dense" else 1.4, label=f"cost: {name} attention")
    if sheet is not None:
        p = np.asarray(sheet.price(kind, context), dtype=float)
        ax.step(context, p / p[0], where="post", color="k", lw=2, ls="--",
                label=f"price: {sheet.name} {kind} / short-context price")
    if crossover is not None and np.isfinite(crossover):
        ax.axvline(crossover, color="0.5", ls=":", label=f"crossover L* = {crossover:,.0f}")
    ax.set(xscale="log", yscale="log", xlabel="context length (tokens)",
           ylabel="cost per token ÷ compute cost per token",
           title=title or "Cost vs context, with price tiers")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return save(fig, path)


def plot_tiers(hold_s, names, costs, *, ttls=(300.0, 3600.0), bytes_per_token=None, title="", path="tiers.png"):
    """$ per million tokens vs hold time for recompute and each memory tier (lecture 01:52–02:02), with the
    cheapest option drawn thick and the 5-minute / 1-hour cache lifetimes marked."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for i, (n, c) in enumerate(zip(names, costs)):
        ax.plot(hold_s, c * 1e6, color=f"C{i}", lw=1.4, label=n)
    ax.plot(hold_s, costs.min(axis=0) * 1e6, color="k", lw=2.6, alpha=0.5, label="cheapest")
    for t, lab in zip(ttls, ("5 min", "1 h")):
        ax.axvline(t, color="0.4", ls=":")
        ax.text(t, np.nanmax(costs) * 1e6, f" {lab}", va="top", fontsize=8)
    ax.set(xscale="log", yscale="log", xlabel="hold time (s)", ylabel="$ per million tokens (hold + retrieve)",
           title=title or (f"Where to keep a KV cache (b = {bytes_per_token:,.0f} B/token)" if bytes_per_token
                           else "Where to keep a KV cache"))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return save(fig, path)


def price_context_figure(path, sheet="gemini-3.1-pro", *, batch=1e4, bytes_per_token=1667.0):
    """The lecture's picture with its own numbers (claims plot)."""
    from ..analyses.lecture import context as cx
    from ..specs.prices import load_price_sheet

    L = np.geomspace(1e3, 1e7, 300)
    curves = cx.context_curves(L, batch=batch, bytes_per_token=bytes_per_token)
    lstar = float(cx.crossover_dense(batch=batch, bytes_per_token=bytes_per_token))
    return plot_price_context(L, curves, sheet=load_price_sheet(sheet), crossover=lstar,
                              title=f"100B active, ratio 300, b = {bytes_per_token:,.0f} B/token, batch {batch:,.0f}",
                              path=path)


def tiers_figure(path, chip="h100", *, bytes_per_token=1667.0, n_active=100e9):
    from ..analyses.lecture import memory_tiers as mt
    from ..specs.hardware import load_chip

    c = load_chip(chip)
    tiers = mt.tiers_for(c)
    remat = float(mt.remat_cost(n_active, c.peak_flops("fp8"), c.usd_per_hour))
    t = np.geomspace(1e-3, 1e7, 300)
    names, costs = mt.tier_costs(bytes_per_token, t, tiers, remat)
    return plot_tiers(t, names, costs, bytes_per_token=bytes_per_token,
                      title=f"{c.name}: hold vs retrieve, b = {bytes_per_token:,.0f} B/token", path=path)
