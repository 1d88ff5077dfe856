"""Communication primitives: time to move bytes over the scale-up and scale-out networks.

All vectorized. Bandwidths are per chip, per direction (bytes/s). Latencies are
per message/hop (seconds). These are the standard alpha-beta collective costs
(e.g. Thakur et al. 2005; the JAX scaling book, "Sharded Matrices" chapter).
"""

from __future__ import annotations

import numpy as np


def p2p_time(nbytes, bw, latency=0.0):
    """Point-to-point send: t = latency + bytes / bw (pipeline stage hand-off, lecture 01:12)."""
    return latency + np.asarray(nbytes, dtype=float) / bw


def allreduce_time(nbytes, n, bw, latency=0.0):
    """Ring all-reduce of ``nbytes`` per chip over ``n`` chips.

    t = 2 (n-1)/n · bytes / bw + 2 (n-1) · latency   (reduce-scatter + all-gather).
    Zero when n = 1.
    """
    n = np.asarray(n, dtype=float)
    frac = np.where(n > 1, 2 * (n - 1) / np.maximum(n, 1), 0.0)
    return frac * np.asarray(nbytes, dtype=float) / bw + np.where(n > 1, 2 * (n - 1), 0.0) * latency


def allgather_time(nbytes, n, bw, latency=0.0):
    """Ring all-gather (or reduce-scatter) producing ``nbytes`` per chip: t = (n-1)/n · bytes / bw + (n-1)·latency."""
    n = np.asarray(n, dtype=float)
    frac = np.where(n > 1, (n - 1) / np.maximum(n, 1), 0.0)
    return frac * np.asarray(nbytes, dtype=float) / bw + np.where(n > 1, n - 1, 0.0) * latency


def alltoall_time(nbytes_out, bw, latency=0.0):
    """All-to-all where each chip sends ``nbytes_out`` to other chips over a full crossbar: t = latency + bytes / bw.

    On a switched scale-up domain (NVLink) every chip sends and receives at its own
    link rate at once (lecture 00:32: "a perfect fit for the all-to-all").
    """
    return latency + np.asarray(nbytes_out, dtype=float) / bw
