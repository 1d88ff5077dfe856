"""Chapter one's blackboard figures: latency and cost vs batch, cost vs context, cost vs pass length."""

from __future__ import annotations

import numpy as np

from ..engine.roofline import usd_per_mtok
from . import pyplot, save


def _terms(ax, x, r, per_token: bool):
    div = r.tokens if per_token else 1.0
    scale = 1e3 if not per_token else 1.0
    if per_token:  # $ per million tokens, each term priced at the chips' rent
        k = usd_per_mtok(r.chips, r.usd_per_chip_hour, div)  # $/Mtok per second of step
        ys = [r.t_compute_s * k, r.t_weights_s * k, r.t_kv_s * k, r.t_memory_s * k, r.step_s * k]
    else:
        ys = [r.t_compute_s * scale, r.t_weights_s * scale, r.t_kv_s * scale, r.t_memory_s * scale,
              r.step_s * scale]
    labels = ["compute", "weight fetch", "KV fetch", "weights + KV", "step = max(…)"]
    styles = [("C0", "--"), ("C1", "--"), ("C2", "--"), ("C3", ":"), ("k", "-")]
    for y, lab, (c, ls) in zip(ys, labels, styles):
        ax.plot(x, np.broadcast_to(y, np.shape(x)), color=c, ls=ls, lw=2.4 if lab.startswith("step") else 1.4,
                label=lab)


def _modes(weight_read):
    if weight_read not in ("hit", "all", "both"):
        from ..errors import InputError

        raise InputError("weight_read", f"{weight_read!r} is not a weight-read mode", "hit, all or both")
    return ("hit", "all") if weight_read == "both" else (weight_read,)


def _lecture_overlay(ax, x, r_all, per_token: bool):
    """The lecture's premise drawn over the real one: every weight read every step (flat weight line)."""
    if per_token:
        k = usd_per_mtok(r_all.chips, r_all.usd_per_chip_hour, r_all.tokens)
        ys = [r_all.t_weights_s * k, r_all.step_s * k]
    else:
        ys = [r_all.t_weights_s * 1e3, r_all.step_s * 1e3]
    ax.plot(x, np.broadcast_to(ys[0], np.shape(x)), color="C1", ls="-.", lw=1.4, label="weight fetch, all (lecture)")
    ax.plot(x, np.broadcast_to(ys[1], np.shape(x)), color="0.45", ls="-.", lw=1.8, label="step, all weights (lecture)")


def batch_curves(model, hardware, *, batch, context=8192, chips=None, weights_dtype=None, kv_dtype=None,
                 efficiency=None, weight_read="hit"):
    """The roofline result(s) the batch plot draws, one per weight-read mode ({"hit": r, "all": r})."""
    from ..engine.roofline import roofline

    return {m: roofline(model, hardware, chips=chips, batch=batch, context=context, weights_dtype=weights_dtype,
                        kv_dtype=kv_dtype, efficiency=efficiency, weight_read=m) for m in _modes(weight_read)}


def plot_batch(model, hardware, *, batch, context=8192, chips=None, weights_dtype=None, kv_dtype=None,
               efficiency=None, path="batch.png", weight_read="hit"):
    """Two panels: step time vs batch, and $ per million output tokens vs batch (log-log).

    ``weight_read``: "hit" (experts routed to), "all" (the lecture: a flat weight line),
    or "both" (hit drawn in full, the lecture's all-weights lines dash-dotted over it).
    """
    rs = batch_curves(model, hardware, batch=batch, context=context, chips=chips, weights_dtype=weights_dtype,
                      kv_dtype=kv_dtype, efficiency=efficiency, weight_read=weight_read)
    r = rs.get("hit", rs.get("all"))
    plt = pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5))
    _terms(a1, batch, r, per_token=False)
    if len(rs) == 2:
        _lecture_overlay(a1, batch, rs["all"], per_token=False)
    a1.set(xscale="log", yscale="log", xlabel="batch (sequences)", ylabel="time per decode step (ms)",
           title="Latency vs batch")
    _terms(a2, batch, r, per_token=True)
    if len(rs) == 2:
        _lecture_overlay(a2, batch, rs["all"], per_token=True)
    a2.set(xscale="log", yscale="log", xlabel="batch (sequences)", ylabel="$ per million output tokens",
           title="Cost per token vs batch")
    from ..analyses.lecture.batching import memory_batch_limit

    bmem = float(memory_batch_limit(r.model, r.hardware, context=context, chips=chips, weights_dtype=weights_dtype,
                                    kv_dtype=kv_dtype))
    for a in (a1, a2):
        a.grid(True, which="both", alpha=0.3)
        if 0 < bmem < float(np.max(batch)):
            a.axvspan(bmem, float(np.max(batch)), color="0.85", alpha=0.5, zorder=0)
            a.axvline(bmem, color="0.3", lw=1, ls=":", label=f"memory full: B_mem = {bmem:,.0f}")
        a.legend(fontsize=8)
    fig.suptitle(f"{r.model.name} on {r.hardware.name}, context {context:g}, weights {r.weights_dtype}, "
                 f"KV {r.kv_dtype}, weight read: {' + '.join(rs)}")
    return save(fig, path)


def plot_context(model, hardware, *, context, batch=256, chips=None, weights_dtype=None, kv_dtype=None,
                 efficiency=None, path="context.png", weight_read="hit"):
    """$ per million output tokens vs context length at a fixed batch, each term drawn (lecture 01:35)."""
    from ..engine.roofline import roofline

    rs = {m: roofline(model, hardware, chips=chips, batch=batch, context=context, weights_dtype=weights_dtype,
                      kv_dtype=kv_dtype, efficiency=efficiency, weight_read=m) for m in _modes(weight_read)}
    r = rs.get("hit", rs.get("all"))
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    _terms(ax, context, r, per_token=True)
    if len(rs) == 2:
        _lecture_overlay(ax, context, rs["all"], per_token=True)
    ax.set(xscale="log", yscale="log", xlabel="context length (tokens)", ylabel="$ per million output tokens",
           title=f"{r.model.name} on {r.hardware.name}, batch {batch:g}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return save(fig, path)


def plot_pass_len(model, hardware, *, pass_len, batch=1, context=8192, chips=None, weights_dtype=None,
                  kv_dtype=None, efficiency=None, path="pass_len.png", weight_read="hit"):
    """$ per million tokens vs pass length: decode (P = 1) is memory-bound, prefill compute-bound (R38)."""
    from ..engine.roofline import roofline

    r = roofline(model, hardware, chips=chips, batch=batch, context=context, pass_len=pass_len,
                 weights_dtype=weights_dtype, kv_dtype=kv_dtype, efficiency=efficiency, weight_read=weight_read)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    _terms(ax, pass_len, r, per_token=True)
    ax.set(xscale="log", yscale="log", xlabel="pass length (tokens per sequence per pass)",
           ylabel="$ per million tokens", title=f"Prefill vs decode: {r.model.name}, batch {batch:g}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return save(fig, path)
