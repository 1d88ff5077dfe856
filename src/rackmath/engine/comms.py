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


# --------------------------------------------------------------------------------------
# MoE all-to-all across scale-up domains (lecture 00:32 and 00:47)
# --------------------------------------------------------------------------------------


def scaleout_share(group, scaleup_size):
    """Share of all-to-all traffic that leaves the domain: max(0, 1 − S/G) for a group of G chips (lecture 00:32: two racks → ½)."""
    g = np.asarray(group, dtype=float)
    return np.where(g > scaleup_size, 1.0 - scaleup_size / np.maximum(g, 1.0), 0.0)


def scaleup_share(group, scaleup_size):
    """Share of all-to-all traffic to other chips inside the domain: (min(G, S) − 1)/G."""
    g = np.asarray(group, dtype=float)
    return (np.minimum(g, scaleup_size) - 1.0) / np.maximum(g, 1.0)


def moe_fanout(k, ep, moe_tp=1):
    """Distinct chips one token is sent to in a MoE layer: moe_tp · EP · (1 − (1 − 1/EP)^k).

    ≈ k when EP ≫ k (the lecture's "number of activated experts", 00:47); 1 with EP = 1
    (experts on the same chips); × moe_tp because an expert split by TP needs the token on
    every one of its shards.
    """
    ep = np.asarray(ep, dtype=float)
    e2 = np.maximum(ep, 2.0)
    groups = np.where(ep > 1, e2 * -np.expm1(k * np.log1p(-1.0 / e2)), 1.0)
    return np.asarray(moe_tp, dtype=float) * groups


def moe_alltoall_bytes(tokens, k, d_model, act_bytes):
    """MoE dispatch + combine bytes for one MoE layer: tokens · k · d_model · bytes · 2  (lecture 00:47)."""
    return np.asarray(tokens, dtype=float) * k * d_model * act_bytes * 2.0


def alltoall_split_time(nbytes, group, scaleup_size, scaleup_bw, scaleout_bw, latency=0.0):
    """All-to-all time when part of the traffic leaves the domain (lecture 00:32).

    t = max(bytes · share_in / BW_up, bytes · share_out / BW_out): the NVLink and the NIC
    run at once, the slower of the two binds. G ≤ S: share_out = 0, scale-out untouched.
    ``nbytes`` is what one chip sends (to itself included: its share is dropped).
    """
    nbytes = np.asarray(nbytes, dtype=float)
    t_up = alltoall_time(nbytes * scaleup_share(group, scaleup_size), scaleup_bw, latency)
    t_out = alltoall_time(nbytes * scaleout_share(group, scaleup_size), scaleout_bw, latency)
    return np.where(np.asarray(group) > 1, np.maximum(t_up, t_out), 0.0)
