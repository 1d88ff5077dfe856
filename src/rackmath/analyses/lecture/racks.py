"""How MoE models are laid out on GPU racks, and why scale-up size matters (lecture 00:32:09–00:47:12, 01:12–01:18).

One function per equation; plain SI floats; numpy in, numpy out. No I/O, no printing.
Analyses that a user can ``--explain`` return a :class:`~rackmath.explain.Derivation`.
"""

from __future__ import annotations

import numpy as np

from ...engine.comms import alltoall_split_time, moe_alltoall_bytes, scaleout_share
from ...engine.layout import experts_per_chip
from ...errors import InputError
from ...explain import Derivation, fmt

# ----------------------------------------------------------------------------- expert placement (R16)


def experts_per_gpu(n_experts, gpus):
    """Experts per GPU on the most-loaded GPU: ceil(E / GPUs)  (00:32: 256 experts on 64 GPUs → 4)."""
    return experts_per_chip(n_experts, gpus)


def gpus_for_even_experts(n_experts: int, gpus: int) -> int:
    """The lecture's way out of the divisibility problem: the largest divisor of E not above the GPUs.

    00:32: "256 experts … 72 GPUs … we'll just simplify and say we're only going to use 64 of them."
    """
    n_experts, gpus = int(n_experts), int(gpus)
    if n_experts < 1 or gpus < 1:
        raise InputError("experts", f"{n_experts} experts on {gpus} GPUs", "positive integers")
    return max(d for d in range(1, min(n_experts, gpus) + 1) if n_experts % d == 0)


def redundant_experts_to_fill(n_experts, gpus):
    """Redundant expert slots that make E divide evenly: ceil(E/GPUs)·GPUs − E (DeepSeek: 256 + 32 on 144 → 2 each)."""
    n = np.asarray(n_experts, dtype=float)
    g = np.asarray(gpus, dtype=float)
    return np.ceil(n / g) * g - n


# ----------------------------------------------------------------------------- domain memory (R21, R22, R25)


def domain_memory(hbm_bytes_per_chip, scaleup_size):
    """HBM of one scale-up domain: S · HBM per chip  (~00:40: "eight Hoppers … 640 gigabytes")."""
    return np.asarray(scaleup_size, dtype=float) * np.asarray(hbm_bytes_per_chip, dtype=float)


def weight_bytes(params, bytes_per_param):
    """Weight bytes: N_total · bytes/param  (~01:00: "a trillion-parameter model only needs 1 TB" at 1 byte)."""
    return np.asarray(params, dtype=float) * np.asarray(bytes_per_param, dtype=float)


def domain_demand(weight_bytes_, kv_bytes_per_seq, batch):
    """Memory one domain must hold: N_total·bytes + B · len · bytes/token  (01:03:37, before any parallelism)."""
    return np.asarray(weight_bytes_, dtype=float) + np.asarray(batch, dtype=float) * np.asarray(kv_bytes_per_seq, dtype=float)


def max_params_in_domain(domain_bytes, bytes_per_param, kv_bytes_per_seq=0.0, batch=0.0):
    """Largest model one domain holds with KV for B sequences: (S·HBM − B·kv_seq) / bytes/param  (R22).

    "The total parameters are limited by the scale-up size" (~00:46). Negative → KV alone overflows.
    """
    return (np.asarray(domain_bytes, dtype=float) - np.asarray(batch, dtype=float) * kv_bytes_per_seq) / bytes_per_param


def max_batch_in_domain(domain_bytes, weight_bytes_, kv_bytes_per_seq):
    """Sequences whose KV fits beside the weights in one domain: floor((S·HBM − W) / kv_seq)."""
    room = np.asarray(domain_bytes, dtype=float) - np.asarray(weight_bytes_, dtype=float)
    return np.where(room > 0, np.floor(room / np.maximum(np.asarray(kv_bytes_per_seq, dtype=float), 1e-300)), 0.0)


# ----------------------------------------------------------------------------- latency floor (R29)


def weight_load_time(weight_bytes_, scaleup_size, hbm_bw_per_chip):
    """Latency floor of one decode step: t_mem = N_total·bytes / (S · HBM BW per chip)  (~01:15, R29).

    "I can use all the GPUs in my scale-up domain in parallel to load the weights"; pipeline
    stages cannot be used in parallel, so the floor is set by one domain.
    """
    return np.asarray(weight_bytes_, dtype=float) / (np.asarray(scaleup_size, dtype=float) * hbm_bw_per_chip)


def domains_needed(weight_bytes_, domain_bytes):
    """Pipeline stages (domains) needed just to hold the weights: ceil(W / (S·HBM))  (01:03:37)."""
    return np.maximum(1.0, np.ceil(np.asarray(weight_bytes_, dtype=float) / np.asarray(domain_bytes, dtype=float)))


def latency_floor_grid(params, systems, bytes_per_param=1.0, kv_bytes_per_seq=0.0, batch=0.0):
    """Latency floor (weight-load time on one domain) and fit for each model size × system (R21, R22, R29).

    ``params``: array of total parameter counts; ``systems``: System objects. Returns a dict of
    arrays shaped (len(systems), len(params)); per system, ``kv_bytes`` (B · kv_seq), ``kv_fits`` (whether the KV
    alone fits one domain) and ``max_params`` (R22, 0 where the KV alone overflows: no model fits beside it).
    """
    p = np.asarray(params, dtype=float)[None, :]
    S = np.array([s.scaleup_size for s in systems], dtype=float)[:, None]
    bw = np.array([s.chip.hbm_bw for s in systems], dtype=float)[:, None]
    hbm = np.array([s.chip.hbm_bytes for s in systems], dtype=float)[:, None]
    w = weight_bytes(p, bytes_per_param)
    dom = domain_memory(hbm, S)
    demand = domain_demand(w, kv_bytes_per_seq, batch)
    return {
        "systems": [s.name for s in systems],
        "scaleup_size": S[:, 0],
        "params": p[0],
        "domain_bytes": dom[:, 0],
        "weight_bytes": w[0],
        "t_floor_s": weight_load_time(w, S, bw),
        "fits": demand <= dom,
        "domains_needed": domains_needed(demand, dom),
        "kv_bytes": np.broadcast_to(np.asarray(batch, dtype=float) * kv_bytes_per_seq, S[:, 0].shape).copy(),
        "kv_fits": (np.asarray(batch, dtype=float) * kv_bytes_per_seq <= dom)[:, 0],
        "max_params": np.maximum(0.0, max_params_in_domain(dom, bytes_per_param, kv_bytes_per_seq, batch)[:, 0]),
    }


# ----------------------------------------------------------------------------- scale-up vs scale-out (R17, R19)


def scaleout_slowdown(scaleup_bw, scaleout_bw):
    """How much slower scale-out is than scale-up, per chip: BW_up / BW_out  (00:32: "about eight times slower")."""
    return np.asarray(scaleup_bw, dtype=float) / np.asarray(scaleout_bw, dtype=float)


def moe_layer_alltoall_time(tokens_per_chip, k, d_model, act_bytes, ep, scaleup_size, scaleup_bw, scaleout_bw):
    """One MoE layer's dispatch + combine on one chip when EP spans ``ep`` chips (00:32).

    bytes = tokens · k · d_model · bytes · 2; t = max(bytes·in/BW_up, bytes·out/BW_out),
    out = max(0, 1 − S/EP): one rack → 0, two racks → ½ ("half the tokens want to leave the rack").
    """
    nbytes = moe_alltoall_bytes(tokens_per_chip, k, d_model, act_bytes)
    return alltoall_split_time(nbytes, ep, scaleup_size, scaleup_bw, scaleout_bw)


def two_rack_slowdown(scaleup_size, scaleup_bw, scaleout_bw):
    """All-to-all slowdown of one MoE layer across two racks vs one: t(EP = 2S) / t(EP = S)  (00:32, R17).

    = max(((S−1)/2S)/BW_up, (1/2)/BW_out) / (((S−1)/S)/BW_up) ≈ ½ · BW_up/BW_out for a slow scale-out.
    """
    one = alltoall_split_time(1.0, scaleup_size, scaleup_size, scaleup_bw, scaleout_bw)
    two = alltoall_split_time(1.0, 2 * np.asarray(scaleup_size), scaleup_size, scaleup_bw, scaleout_bw)
    return two / one


def two_rack_analysis(system, *, tokens_per_chip=32.0, k=8, d_model=7168, act_bytes=2.0) -> Derivation:
    """Derivation: one MoE layer on one rack vs across two racks of ``system`` (00:32, R17)."""
    c = system.chip
    S = int(system.scaleup_size)
    d = Derivation(f"One MoE layer on one vs two {system.name} domains (lecture 00:32)")
    nbytes = d.add("bytes/chip", "tokens · k · d_model · bytes · 2",
                   f"{tokens_per_chip:g} · {k} · {d_model} · {act_bytes:g} · 2",
                   float(moe_alltoall_bytes(tokens_per_chip, k, d_model, act_bytes)), "B", "dispatch + combine")
    d.add("BW_up/BW_out", "scale-up ÷ scale-out per chip", f"{fmt(c.scaleup_bw, 'B/s')} / {fmt(c.scaleout_bw, 'B/s')}",
          float(scaleout_slowdown(c.scaleup_bw, c.scaleout_bw)), "x", "lecture: ~8")
    t1 = d.add("t(1 rack)", "bytes · (S−1)/S / BW_up", "", float(alltoall_split_time(nbytes, S, S, c.scaleup_bw,
                                                                                       c.scaleout_bw)), "s")
    d.add("share out", "1 − S/EP", f"1 − {S}/{2 * S}", float(scaleout_share(2 * S, S)), "",
          "half the tokens leave the rack")
    t2 = d.add("t(2 racks)", "max(bytes·in/BW_up, bytes·out/BW_out)", "",
               float(alltoall_split_time(nbytes, 2 * S, S, c.scaleup_bw, c.scaleout_bw)), "s")
    d.add("slowdown", "t(2 racks) / t(1 rack)", f"{fmt(t2, 's')} / {fmt(t1, 's')}", t2 / t1, "x")
    d.conclusion = "the scale-out share binds the all-to-all: one rack bounds the size of an expert layer"
    return d


# ----------------------------------------------------------------------------- explainable summaries


def scaleup_memory_analysis(system, *, params, bytes_per_param=1.0, kv_bytes_per_seq=0.0, batch=0.0) -> Derivation:
    """Derivation: does a model with KV for B sequences fit one domain of ``system``; its latency floor (R21, R22, R29)."""
    c = system.chip
    S = int(system.scaleup_size)
    d = Derivation(f"{params / 1e12:.3g}T-parameter model on one {system.name} domain")
    dom = d.add("HBM_domain", "S · HBM/chip", f"{S} · {fmt(c.hbm_bytes, 'B')}", float(domain_memory(c.hbm_bytes, S)),
                "B", "~00:40: Hopper 8 → 640 GB")
    w = d.add("W", "N_total · bytes/param", f"{params:.4g} · {bytes_per_param:g}",
              float(weight_bytes(params, bytes_per_param)), "B")
    need = d.add("demand", "W + B · kv_seq", f"{fmt(w, 'B')} + {batch:g} · {fmt(kv_bytes_per_seq, 'B')}",
                 float(domain_demand(w, kv_bytes_per_seq, batch)), "B")
    d.add("fits", "demand ≤ HBM_domain", f"{fmt(need, 'B')} ≤ {fmt(dom, 'B')}", float(need <= dom), "",
          "1 = fits one domain")
    d.add("N_max", "(HBM_domain − B·kv_seq) / bytes/param", "",
          float(max_params_in_domain(dom, bytes_per_param, kv_bytes_per_seq, batch)), "", "R22")
    d.add("t_floor", "W / (S · HBM BW/chip)", f"{fmt(w, 'B')} / ({S} · {fmt(c.hbm_bw, 'B/s')})",
          float(weight_load_time(w, S, c.hbm_bw)), "s", "~01:15: bandwidth, not capacity (R29)")
    d.conclusion = "pipelining solves capacity; scale-up size sets the weight-load latency floor"
    return d


__all__ = [
    "experts_per_gpu", "gpus_for_even_experts", "redundant_experts_to_fill", "domain_memory", "weight_bytes",
    "domain_demand", "max_params_in_domain", "max_batch_in_domain", "weight_load_time", "domains_needed",
    "latency_floor_grid", "scaleout_slowdown", "moe_layer_alltoall_time", "two_rack_slowdown", "two_rack_analysis",
    "scaleup_memory_analysis",
]


# --------------------------------------------------------------------------- why racks are the size they are


def _rack_data() -> dict:
    import tomllib
    from pathlib import Path

    with open(Path(__file__).parent / "data" / "rack_limits.toml", "rb") as fh:
        return {r["name"]: r for r in tomllib.load(fh)["rack"]}


def max_by_budget(budget, used, n):
    """Most accelerators a budget allows at the per-accelerator share actually used: n · budget / used."""
    return np.asarray(n, dtype=float) * np.asarray(budget, dtype=float) / np.asarray(used, dtype=float)


def max_by_radix(switch_ports, links_per_gpu_per_switch=1):
    """A one-tier full crossbar (every GPU one hop from every switch) holds at most ports / links accelerators."""
    return np.asarray(switch_ports, dtype=float) / links_per_gpu_per_switch


class RackLimits:
    """Per-limit maximum accelerators per rack and which binds (lecture 00:35: "power delivery, weight, and cooling
    … the cabling congestion")."""

    def __init__(self, name, max_gpus: dict, binding: str, derivation: Derivation, data: dict):
        self.name, self.max_gpus, self.binding, self.derivation, self.data = name, max_gpus, binding, derivation, data

    @property
    def summary(self) -> str:
        n = self.data["accelerators"]
        parts = ", ".join(f"{k} {v:,.0f}" for k, v in self.max_gpus.items())
        return f"{self.name}: {n} accelerators; most each limit allows: {parts} → {self.binding} binds."


def rack_limits(name: str) -> RackLimits:
    """Which physical limit sets the rack size: power, weight, copper reach or switch radix (R18, R20).

    power: n · P_limit / P_rack; weight: n · W_limit / W_rack; copper reach: unlimited
    while the longest in-rack run is within passive-copper reach, else the share that is
    (n · reach / run); radix: switch ports / links per GPU per switch. The smallest binds.
    """
    data = _rack_data()
    if name not in data:
        raise InputError("rack", f"no rack-limit data for {name!r}", ", ".join(sorted(data)))
    r = data[name]
    n = r["accelerators"]
    d = Derivation(f"Why {name} holds {n} accelerators (approximate public figures)")
    out = {}
    out["power"] = d.add("N_power", "n · P_limit / P_rack", f"{n} · {r['power_limit_kw']:g} kW / {r['power_kw']:g} kW",
                         float(max_by_budget(r["power_limit_kw"], r["power_kw"], n)), "")
    out["weight"] = d.add("N_weight", "n · W_limit / W_rack", f"{n} · {r['weight_limit_kg']:g} kg / {r['weight_kg']:g} kg",
                          float(max_by_budget(r["weight_limit_kg"], r["weight_kg"], n)), "")
    out["copper reach"] = d.add("N_reach", "n · reach / longest run", f"{n} · {r['copper_reach_m']:g} m / "
                                f"{r['cable_run_m']:g} m", float(max_by_budget(r["copper_reach_m"], r["cable_run_m"], n)),
                                "", "a rack taller or wider than copper reach needs optics (power, cost)")
    out["switch radix"] = d.add("N_radix", "switch ports / links per GPU per switch",
                                f"{r['switch_ports']} / {r['links_per_gpu_per_switch']}",
                                float(max_by_radix(r["switch_ports"], r["links_per_gpu_per_switch"])), "",
                                "one-tier all-to-all: every GPU two hops from every other")
    binding = min(out, key=out.get)
    d.conclusion = (f"→ {binding} binds ({out[binding]:,.0f}); next: "
                    f"{sorted(out, key=out.get)[1]} ({sorted(out.values())[1]:,.0f}). Status: {r['status']}. "
                    f"Sources: {r['source']}")
    return RackLimits(name, out, binding, d, r)
