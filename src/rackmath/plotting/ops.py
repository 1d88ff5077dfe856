"""Per-operator breakdown of a step as a stacked bar (``--ops-plot FILE``, ``rackmath plot ops``)."""

from __future__ import annotations

import numpy as np

from . import pyplot, save


def plot_ops(rows: list[dict], path="ops.png", title: str = ""):
    """One bar per layer type (attention, MoE, dense FFN, head, collectives, host…), stacked by operator time."""
    plt = pyplot()
    types = list(dict.fromkeys(r["layer_type"] for r in rows))
    fig, ax = plt.subplots(figsize=(10, 5.5))
    cmap = plt.get_cmap("tab20")
    bottoms = np.zeros(len(types))
    for i, r in enumerate(rows):
        h = np.array([r["time_s"] * 1e3 if r["layer_type"] == t else 0.0 for t in types])
        ax.bar(types, h, bottom=bottoms, color=cmap(i % 20), edgecolor="k", linewidth=0.3,
               label=f'{r["op"]} ({r["binding"]})')
        bottoms += h
    total = sum(r["time_s"] for r in rows) * 1e3
    ax.set(ylabel="time per step (ms)", title=title or f"Step time by operator: {total:.3g} ms")
    ax.legend(fontsize=8, ncol=2)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return save(fig, path)  # the one figure writer: refuses a path without a figure suffix ('-' → ./-.png)
