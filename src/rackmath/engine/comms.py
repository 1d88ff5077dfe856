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


def _domain_split(n, scaleup_size):
    """(S, D): chips of one domain in the group, min(n, S), and domains the group spans, ⌈n / S⌉."""
    n = np.asarray(n, dtype=float)
    return np.minimum(n, float(scaleup_size)), np.ceil(n / np.maximum(float(scaleup_size), 1.0))


def hierarchical_allreduce_time(nbytes, n, scaleup_size, scaleup_bw, scaleout_bw, latency=0.0):
    """All-reduce of ``nbytes`` per chip over ``n`` chips that span ⌈n/S⌉ scale-up domains of S chips.

    Reduce-scatter inside each domain, all-reduce of the 1/S shards across the D = ⌈n/S⌉ domains
    (every chip over its own NIC, D chips per ring), all-gather inside the domain:

        t = 2 (S−1)/S · bytes / BW_up + 2 (D−1)/D · (bytes / S) / BW_out

    so only 1/S of the message crosses the NIC (hierarchical all-reduce: Sergeev & Del Balso 2018,
    Horovod; the 2D all-reduce of Ying et al. 2018; NCCL's rings through one NIC per GPU move the same
    share). With n ≤ S it is the ring all-reduce over the scale-up network.
    """
    s, d = _domain_split(n, scaleup_size)
    nbytes = np.asarray(nbytes, dtype=float)
    return (allreduce_time(nbytes, s, scaleup_bw, latency)
            + allreduce_time(nbytes / np.maximum(s, 1.0), d, scaleout_bw, latency))


def hierarchical_allreduce_scaleout_bytes(nbytes, n, scaleup_size):
    """Bytes one chip sends over its NIC in :func:`hierarchical_allreduce_time`: 2 (D−1)/D · bytes / S."""
    s, d = _domain_split(n, scaleup_size)
    share = np.where(d > 1, 2.0 * (d - 1) / np.maximum(d, 1.0), 0.0)
    return share * np.asarray(nbytes, dtype=float) / np.maximum(s, 1.0)


def allgather_time(nbytes, n, bw, latency=0.0):
    """Ring all-gather (or reduce-scatter) producing ``nbytes`` per chip: t = (n-1)/n · bytes / bw + (n-1)·latency."""
    n = np.asarray(n, dtype=float)
    frac = np.where(n > 1, (n - 1) / np.maximum(n, 1), 0.0)
    return frac * np.asarray(nbytes, dtype=float) / bw + np.where(n > 1, n - 1, 0.0) * latency


def ws2d_split(n, d_model, d_ff):
    """2D weight-stationary split of n chips: X chips along d_model, YZ = n/X along d_ff, X the divisor of n whose
    exchange (:func:`ws2d_exchange_time`) moves least — Pope et al. 2022's optimum X = √(n·E/F) where it divides n
    (§3.2.2: X = √n/2 = 4, YZ = 16 on 64 chips when F = 4E). Vectorized over n (one divisor search per distinct n)."""
    n = np.maximum(np.rint(np.asarray(n, dtype=float)), 1.0)
    uniq, inv = np.unique(n, return_inverse=True)
    x = np.array([min(divisors(int(u)), key=lambda d: _ws2d_volume(d, u / d, d_model, d_ff)) for u in uniq],
                 dtype=float)[inv].reshape(n.shape)
    return x, n / x


def _ws2d_volume(x, yz, d_model, d_ff):
    """Activation volumes (units of T·bytes) one 2D exchange moves per chip: 2·(YZ−1)/YZ·E/X + 2·(X−1)/X·F/YZ."""
    return 2.0 * (yz - 1.0) / yz * d_model / x + 2.0 * (x - 1.0) / x * d_ff / yz


def divisors(n: int) -> list[int]:
    """Divisors of n, ascending (O(√n): n may be a million chips): the group sizes a split of n chips can take."""
    import math

    n = int(n)
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0] if n > 0 else []
    return sorted(set(small) | {n // d for d in small})


def ws2d_exchange_time(tokens, n, d_model, d_ff, act_bytes, bw):
    """Activation traffic of one FFN in a 2D weight-stationary layout over n chips (Pope et al. 2022 §3.2.2).

    The weights are split E over X chips and F over YZ (:func:`ws2d_split`); the T-token input is all-gathered
    over YZ, the hidden reduce-scattered over X, all-gathered over X, the output reduce-scattered over YZ:

        t = [2·(YZ−1)/YZ · T·E/X + 2·(X−1)/X · T·F/YZ] · bytes / BW  ≈ 8·T·E·bytes / (√n · BW)  for F = 4E

    against 2·T·E·bytes / BW for 1D weight-stationary (the all-reduce): 2D is cheaper past 16 chips, and its
    traffic falls as 1/√n. Pope's count: a gated FFN's second hidden branch is not counted."""
    x, yz = ws2d_split(n, d_model, d_ff)
    return np.asarray(tokens, dtype=float) * act_bytes * _ws2d_volume(x, yz, d_model, d_ff) / bw


#: Collectives one 2D weight-stationary exchange launches: all-gather, reduce-scatter, all-gather, reduce-scatter.
WS2D_COLLECTIVES = 4


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


def domains_hit_remote(k, group, scaleup_size):
    """Other scale-up domains one token's k experts land in: (D − 1) · (1 − (1 − 1/D)^k), D = G/S domains.

    A dispatch that deduplicates by domain sends a token across the scale-out network once per destination
    domain, then forwards it over the scale-up links to the chips there (DeepEP's normal kernels, the ones
    prefill uses; DeepSeek-V3 §3.2.2: "transmitted via IB to the GPUs with the same in-node index on the target
    nodes … then forwarded via NVLink"). Experts uniformly spread over the group; 0 inside one domain.
    """
    g = np.asarray(group, dtype=float)
    d = np.maximum(g / float(scaleup_size), 1.0)
    return np.where(g > scaleup_size, (d - 1.0) * -np.expm1(k * np.log1p(-1.0 / np.maximum(d, 1.0 + 1e-12))), 0.0)


def alltoall_dedup_time(tokens, k, fanout, d_model, act_bytes, group, scaleup_size, scaleup_bw, scaleout_bw):
    """MoE dispatch + combine of one layer deduplicated by domain (DeepEP normal mode, prefill):

    t = max(T · fanout · (1 − 1/G) · d · bytes · 2 / BW_up,  T · D_remote · d · bytes · 2 / BW_out)

    Every copy to another chip crosses the scale-up links once (sent there, or forwarded there after the NIC);
    the scale-out network carries one copy per remote domain hit (:func:`domains_hit_remote`), not one per chip.
    """
    g = np.asarray(group, dtype=float)
    others = np.where(g > 1, 1.0 - 1.0 / np.maximum(g, 1.0), 0.0)  # copies to another chip, not to itself
    t_up = moe_alltoall_bytes(tokens, fanout, d_model, act_bytes) * others / scaleup_bw
    t_out = alltoall_dedup_scaleout_bytes(tokens, k, d_model, act_bytes, g, scaleup_size) / scaleout_bw
    return np.where(g > 1, np.maximum(t_up, t_out), 0.0)


def alltoall_dedup_scaleout_bytes(tokens, k, d_model, act_bytes, group, scaleup_size):
    """Bytes one chip sends over the scale-out network for a deduplicated dispatch + combine of one MoE layer:
    T · D_remote · d · bytes · 2 (:func:`domains_hit_remote`)."""
    return moe_alltoall_bytes(tokens, domains_hit_remote(k, group, scaleup_size), d_model, act_bytes)


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
