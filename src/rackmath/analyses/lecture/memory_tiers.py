"""Chapter five: which memory tier holds a prompt cache (lecture 01:47–02:04, claims R39–R41).

A token's KV can be *rematerialized* (recomputed from token IDs: a retrieve cost, no
hold cost) or *held* in HBM, host DDR, flash or disk (a hold cost per second, plus a
retrieve cost to bring it back into HBM). Per byte of KV, a tier with hold rate u
($ per byte-second of its capacity) and drain time d = capacity / bandwidth costs

    hold      = b · u · t_hold                        (fraction of capacity × tier $/s × time)
    retrieve  = (b / bandwidth) · (capacity · u) = b · u · d   (fraction of bandwidth-time × tier $/s)
    total     = b · u · (t_hold + d)

so the two are equal when t_retrieve = t_hold × fraction of capacity, i.e. t_hold = d
(lecture 01:58: pick the tier you "can read the whole memory once per" hold time).
HBM's rate is the lecture's: chip $/s × the fraction of HBM used, and retrieving from
it costs nothing (it is where inference reads). Pure functions first; adapters take a chip.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...errors import InputError, check_positive
from ...explain import Derivation, fmt
from .batching import drain_time  # capacity / bandwidth (R10/R41), written once in the foundation

HOUR = 3600.0
GB = 1e9
TTLS = {"5m": 300.0, "1h": 3600.0}


# --------------------------------------------------------------------------- equations


def usd_per_byte_s(usd_per_gb_hour):
    """Hold rate in SI: u [$ / (byte·s)] = ($/GB-hour) / (1e9 · 3600)."""
    return np.asarray(usd_per_gb_hour, dtype=float) / (GB * HOUR)


def hbm_hold_rate(chip_usd_per_hour, hbm_bytes):
    """HBM hold rate the lecture's way (01:52): u = (chip $/s) / HBM capacity — holding b bytes for
    t seconds uses fraction b/capacity of a chip you cannot otherwise use."""
    return np.asarray(chip_usd_per_hour, dtype=float) / HOUR / np.asarray(hbm_bytes, dtype=float)


def hold_cost(bytes_per_token, t_hold, rate):
    """$ per token to hold it: b · u · t_hold (01:53, "a cost per second")."""
    return np.asarray(bytes_per_token, dtype=float) * np.asarray(rate, dtype=float) * np.asarray(t_hold, dtype=float)


def retrieve_cost(bytes_per_token, drain_s, rate):
    """$ per token to copy it back into HBM: (b / bandwidth) · (capacity · u) = b · u · d (01:54)."""
    return np.asarray(bytes_per_token, dtype=float) * np.asarray(rate, dtype=float) * np.asarray(drain_s, dtype=float)


def remat_cost(n_active, peak_flops, chip_usd_per_hour, efficiency=1.0):
    """$ per token to recompute its KV: (2 · N_active / (FLOP/s · η)) · chip $/s (01:50: "run a forward
    pass on the whole model … multiply by my GPU dollars per second"). No hold cost."""
    return (2.0 * np.asarray(n_active, dtype=float) / (np.asarray(peak_flops, dtype=float)
                                                        * np.asarray(efficiency, dtype=float))
            * np.asarray(chip_usd_per_hour, dtype=float) / HOUR)


def balanced_hold_time(drain_s):
    """t_retrieve = t_hold × fraction of capacity (R41, 02:00) → with t_retrieve = b/bw and fraction =
    b/capacity, t_hold = capacity/bandwidth = the drain time."""
    return np.asarray(drain_s, dtype=float)


def break_even_hold(rate_fast, drain_fast, rate_slow, drain_slow):
    """Hold time where a faster, dearer tier and a slower, cheaper one cost the same per byte:
    u_f (t + d_f) = u_s (t + d_s)  →  t = (u_s d_s − u_f d_f) / (u_f − u_s)."""
    uf, df = np.asarray(rate_fast, dtype=float), np.asarray(drain_fast, dtype=float)
    us, ds = np.asarray(rate_slow, dtype=float), np.asarray(drain_slow, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (us * ds - uf * df) / (uf - us)


def remat_break_even_hold(remat_usd, bytes_per_token, rate, drain_s):
    """Hold time beyond which recomputing beats holding in a tier: c_remat = b · u · (t + d) →
    t = c_remat / (b · u) − d (negative: the tier never beats recomputation)."""
    return np.asarray(remat_usd, dtype=float) / (np.asarray(bytes_per_token, dtype=float)
                                                 * np.asarray(rate, dtype=float)) - np.asarray(drain_s, dtype=float)


def cost_per_token_hour(bytes_per_token, rate):
    """$ to hold one token's KV for an hour: b · u · 3600."""
    return np.asarray(bytes_per_token, dtype=float) * np.asarray(rate, dtype=float) * HOUR


def stripe_factor(ttl_s, drain_s):
    """How many times more bandwidth per byte held a tier needs for its drain time to equal the TTL: d / TTL."""
    return np.asarray(drain_s, dtype=float) / np.asarray(ttl_s, dtype=float)


# --------------------------------------------------------------------------- tiers


@dataclass(frozen=True)
class Tier:
    """One place to keep a token's KV, per chip: capacity, bandwidth into HBM, hold rate."""

    name: str
    capacity: float  # bytes
    bandwidth: float  # bytes/s
    rate: float  # $ per byte-second held
    retrieve: bool = True  # False for HBM (already where inference reads it)
    source: str = ""

    @property
    def drain_s(self) -> float:
        return float(drain_time(self.capacity, self.bandwidth))

    @property
    def usd_per_gb_hour(self) -> float:
        return self.rate * GB * HOUR

    def cost(self, bytes_per_token, t_hold):
        """$ per token: hold + retrieve."""
        c = hold_cost(bytes_per_token, t_hold, self.rate)
        return c + retrieve_cost(bytes_per_token, self.drain_s, self.rate) if self.retrieve else c

    def as_dict(self) -> dict:
        return {"name": self.name, "capacity": self.capacity, "bandwidth": self.bandwidth,
                "usd_per_gb_hour": self.usd_per_gb_hour, "drain_s": self.drain_s, "retrieve": self.retrieve,
                "source": self.source}


def make_tier(name, capacity, bandwidth, usd_per_gb_hour, source="", retrieve=True) -> Tier:
    check_positive(capacity, f"{name} capacity", "a size such as '2 TB'")
    check_positive(bandwidth, f"{name} bandwidth", "a rate such as '600 GB/s'")
    check_positive(usd_per_gb_hour, f"{name} $/GB-hour", "a price per GB-hour such as 0.0001")
    return Tier(name, float(capacity), float(bandwidth), float(usd_per_byte_s(usd_per_gb_hour)), retrieve, source)


def tiers_for(chip, names=("hbm", "ddr", "flash", "disk")) -> list[Tier]:
    """The chip's tiers (its share of each): HBM priced at chip $/h ÷ capacity, the others from the
    chip's ``memory_tiers`` catalog entries (``chip.tier(name)``, $/GB-hour with sources)."""
    out = []
    for n in names:
        if n == "hbm":
            out.append(Tier("hbm", float(chip.hbm_bytes), float(chip.hbm_bw),
                            float(hbm_hold_rate(chip.usd_per_hour, chip.hbm_bytes)), False,
                            f"{chip.name}: ${chip.usd_per_hour:g}/h over {fmt(chip.hbm_bytes, 'B')}"))
            continue
        try:
            t = chip.tier(n)
        except InputError:
            continue
        if t.usd_per_gb_hour is None:
            continue
        out.append(Tier(n, float(t.capacity), float(t.bandwidth), float(usd_per_byte_s(t.usd_per_gb_hour)), True,
                        t.source))
    return out


def tier_costs(bytes_per_token, t_hold, tiers, remat_usd=None):
    """$ per token for each option over hold times: array (n_options, *t_hold.shape); names alongside.

    Options are "recompute" (if ``remat_usd`` is given; flat in t_hold) then each tier.
    """
    t = np.asarray(t_hold, dtype=float)
    rows, names = [], []
    if remat_usd is not None:
        rows.append(np.broadcast_to(np.asarray(remat_usd, dtype=float), t.shape).astype(float))
        names.append("recompute")
    for tier in tiers:
        rows.append(np.broadcast_to(tier.cost(bytes_per_token, t), t.shape).astype(float))
        names.append(tier.name)
    return names, np.stack(rows)


def cheapest(bytes_per_token, t_hold, tiers, remat_usd=None):
    """Name of the cheapest option at each hold time (vectorized), and its cost."""
    names, costs = tier_costs(bytes_per_token, t_hold, tiers, remat_usd)
    i = np.argmin(costs, axis=0)
    return np.array(names)[i], np.take_along_axis(costs, i[None], 0)[0]


def tier_for_ttl(ttl_s, tiers):
    """The tier whose drain time is closest (in log) to a cache lifetime — the lecture's rule (R41, 01:58):
    "given that I know I'm going to be holding something for five minutes, I would like to pick a memory
    that I can read every five minutes"."""
    d = np.array([t.drain_s for t in tiers])
    i = int(np.argmin(np.abs(np.log(d / float(ttl_s)))))
    return tiers[i]


def assign_ttls(ttls_s, tiers):
    """Distinct tiers for several cache lifetimes (R41, 02:00: "the two tiers are flash and spinning disk").

    A provider offering two TTLs presumably uses two tiers, longer TTL on the slower one: among
    increasing tier sequences (by drain time) pick the one minimizing Σ |ln(d / TTL)|. Returns tiers
    in the order of ``ttls_s``.
    """
    from itertools import combinations

    order = sorted(range(len(ttls_s)), key=lambda i: ttls_s[i])
    ts = sorted(tiers, key=lambda t: t.drain_s)
    if len(ts) < len(ttls_s):
        return [tier_for_ttl(t, tiers) for t in ttls_s]
    best = min(combinations(ts, len(ttls_s)),
               key=lambda combo: sum(abs(np.log(c.drain_s / ttls_s[i])) for c, i in zip(combo, order)))
    out = [None] * len(ttls_s)
    for c, i in zip(best, order):
        out[i] = c
    return out


def _hold_or_never(t) -> float | None:
    """A break-even hold time, or None ("never") where the formula's t is not a positive finite time: the faster
    tier is also the cheaper one at every hold (negative t), or the two never cost the same (division by zero)."""
    t = float(t)
    return t if math.isfinite(t) and t > 0 else None


def break_even_table(tiers, bytes_per_token=None, remat_usd=None):
    """Break-even hold times between consecutive tiers (fast → slow) and, given b and c_remat, against recomputation.
    ``hold_s`` is None where the break-even is never reached (JSON null; the table says "never")."""
    rows = []
    for a, b in zip(tiers, tiers[1:]):
        da = a.drain_s if a.retrieve else 0.0
        rows.append({"faster": a.name, "slower": b.name,
                     "hold_s": _hold_or_never(break_even_hold(a.rate, da, b.rate, b.drain_s))})
    if remat_usd is not None and bytes_per_token is not None:
        for t in tiers:
            rows.append({"faster": t.name, "slower": "recompute",
                         "hold_s": _hold_or_never(remat_break_even_hold(remat_usd, bytes_per_token, t.rate,
                                                                        t.drain_s if t.retrieve else 0.0))})
    return rows


# --------------------------------------------------------------------------- what a price sheet implies


@dataclass
class CacheDeduction:
    sheet: str
    read_fraction: float | None
    premiums: dict  # ttl -> {"premium": $/token, "per_token_hour": $, "usd_per_gb_hour": $, "tier_by_drain": name}
    tiers: list
    bytes_per_token: float
    assumptions: dict
    derivation: Derivation

    def as_dict(self) -> dict:
        return {"sheet": self.sheet, "read_fraction": self.read_fraction, "premiums": self.premiums,
                "tiers": [t.as_dict() for t in self.tiers], "bytes_per_token": self.bytes_per_token,
                "assumptions": self.assumptions, "derivation": self.derivation.as_dict()}


def write_premium_rate(write_price, base_price, ttl_s):
    """Hold price a cache-write premium implies: (write − base) / TTL, in $ per token-second (R40).

    Base input pays for computing the KV (remat); the premium pays for keeping it the TTL.
    Opus: ($6.25 − $5)/Mtok over 5 min = $15/Mtok-hour; ($10 − $5) over 1 h = $5/Mtok-hour.
    """
    return (np.asarray(write_price, dtype=float) - np.asarray(base_price, dtype=float)) / np.asarray(ttl_s, dtype=float)


def implied_usd_per_gb_hour(premium_rate, bytes_per_token):
    """$/GB-hour a hold price implies for KV of b bytes/token: (premium $/token-s) · 3600 · 1e9 / b."""
    return np.asarray(premium_rate, dtype=float) * HOUR * GB / np.asarray(bytes_per_token, dtype=float)


def deduce_cache(sheet, tiers, *, bytes_per_token=1667.0) -> CacheDeduction:
    """Read a sheet's cache prices: hit discount (R39), write premiums as hold prices (R40), the tier each
    TTL points to by drain time (R41), and the $/GB-hour the premium implies at b bytes/token."""
    check_positive(bytes_per_token, "bytes per token", "KV bytes per token, e.g. 1.7KB or 70KB")
    if not tiers:
        raise InputError("tiers", "no memory tiers to compare with", "a chip with memory_tiers or --tier options")
    d = Derivation(f"Cache prices → memory tier ({sheet.name}, {sheet.provider})")
    base = sheet.input
    d.add("base", "input price (= cost to recompute the KV, 'remat')", "", base * 1e6, "$/Mtok")
    read_frac = None
    if sheet.cache_read is not None:
        read_frac = d.add("read/base", "cache read / base input", f"{sheet.cache_read * 1e6:.4g} / {base * 1e6:.4g}",
                          sheet.cache_read / base, "×", "R39: hits ~10× cheaper than recomputing")
    for t in tiers:
        d.add(f"d_{t.name}", "capacity / bandwidth (drain time)",
              f"{fmt(t.capacity, 'B')} / {fmt(t.bandwidth, 'B/s')}", t.drain_s, "s",
              f"${t.usd_per_gb_hour:.3g}/GB-h")
    prem = {}
    keys = [k for k, f in (("5m", "cache_write_5m"), ("1h", "cache_write_1h")) if getattr(sheet, f) is not None]
    distinct = dict(zip(keys, assign_ttls([TTLS[k] for k in keys], tiers))) if keys else {}
    for key, field_ in (("5m", "cache_write_5m"), ("1h", "cache_write_1h")):
        w = getattr(sheet, field_)
        if w is None:
            continue
        ttl = TTLS[key]
        rate = float(write_premium_rate(w, base, ttl))
        d.add(f"hold_{key}", f"(write_{key} − base) / TTL",
                      f"({w * 1e6:.4g} − {base * 1e6:.4g}) $/Mtok / {fmt(ttl, 's')}", rate * HOUR * 1e6, "$/Mtok-h")
        gbh = d.add(f"$/GB-h_{key}", "hold price · 1e9 / b", f"at b = {fmt(bytes_per_token, 'B')}/token",
                    float(implied_usd_per_gb_hour(rate, bytes_per_token)), "$/GB-h")
        tier = tier_for_ttl(ttl, tiers)
        d.add(f"tier_{key}", "tier with drain time closest to TTL", f"d_{tier.name} = {fmt(tier.drain_s, 's')}",
              tier.name, "", f"needs {float(stripe_factor(ttl, tier.drain_s)):.3g}× its bandwidth per byte to drain in "
                             f"{fmt(ttl, 's')}" if tier.drain_s > ttl * 1.5 else "")
        dt = distinct[key]
        if len(keys) > 1:
            d.add(f"tier_{key}'", "distinct tiers, longer TTL slower: min Σ|ln(d/TTL)|", f"d_{dt.name} = "
                  f"{fmt(dt.drain_s, 's')} vs TTL {fmt(ttl, 's')}", dt.name, "",
                  f"drain/TTL = {float(stripe_factor(ttl, dt.drain_s)):.3g}")
        prem[key] = {"ttl_s": ttl, "premium": (w - base), "per_token_hour": rate * HOUR, "usd_per_gb_hour": gbh,
                     "tier_by_drain": tier.name, "drain_s": tier.drain_s, "tier_distinct": dt.name,
                     "distinct_drain_s": dt.drain_s,
                     "cheapest_by_cost": str(cheapest(bytes_per_token, ttl, tiers)[0])}
    d.conclusion = ("→ nearest drain time: " + "; ".join(f"{k} ↔ {v['tier_by_drain']}" for k, v in prem.items())
                    + ("; as two distinct tiers: " + ", ".join(f"{k} ↔ {v['tier_distinct']} (drain "
                                                                 f"{fmt(v['distinct_drain_s'], 's')})"
                                                                 for k, v in prem.items()) if len(prem) > 1 else "")
                    if prem else "→ no cache-write prices on this sheet")
    assumptions = {"bytes_per_token": float(bytes_per_token),
                   "pricing": "base input = remat cost; write premium = hold cost for the TTL; prices ∝ cost",
                   "tier_rule": "TTL ≈ drain time (t_retrieve = t_hold × fraction of capacity)"}
    return CacheDeduction(sheet.name, read_frac, prem, list(tiers), float(bytes_per_token), assumptions, d)
