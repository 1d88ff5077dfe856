"""Chapter two (lecture 00:32:09–00:47:12): how MoE models are laid out on GPU racks. Claims R16–R22."""

from __future__ import annotations

from ..analyses.lecture import racks as ra
from ..explain import Derivation, fmt
from ..specs.hardware import load_hardware
from ..specs.models import load_model
from . import ABOUT, Claim, agree, qualitative, within_factor

RACK = "gb200-nvl72"
HOPPER = "hgx-h100"
MODEL = "deepseek-v3"
CHAIN = ("hgx-h100", "gb200-nvl72", "vr-nvl72", "rubin-ultra-nvl576")


def r16_experts_per_gpu() -> Claim:
    m, hw = load_model(MODEL), load_hardware(RACK)
    E, S = int(m.n_experts), int(hw.scaleup_size)
    d = Derivation(f"{m.name}'s {E} experts on one {hw.name} ({S} GPUs)")
    d.add("E/S", "E / S", f"{E} / {S}", E / S, "", "does not divide: the divisibility problem")
    g = d.add("GPUs used", "largest divisor of E ≤ S", f"divisors of {E} ≤ {S}", ra.gpus_for_even_experts(E, S), "",
              "'only use 64 of them. Just ignore the other eight'")
    e = d.add("experts/GPU", "E / GPUs used", f"{E} / {g}", float(ra.experts_per_gpu(E, g)), "")
    d.add("most-loaded (all 72)", "ceil(E / S)", f"ceil({E}/{S})", float(ra.experts_per_gpu(E, S)), "",
          "the alternative: model the most-loaded GPU")
    return Claim("R16", "DeepSeek's 256 experts on a 72-GPU rack: GPUs used and experts per GPU", e, "experts/GPU", 4.0,
                 qualitative(e == 4.0 and g == 64, "exactly 64 GPUs, 4 experts each"), {"model": m.name, "hardware": hw.name, "experts": E, "GPUs used": g,
                                        "redundant to use all 72": float(ra.redundant_experts_to_fill(E, S))},
                 note="DeepSeek's own decode deployment adds 32 redundant experts instead: 288 slots on 144 GPUs = 2 each "
                      "(published.md D3).", derivation=d)


def r17_two_racks() -> Claim:
    hw = load_hardware(RACK)
    d = ra.two_rack_analysis(hw)
    slow = d.steps[-1].value
    return Claim("R17", "MoE all-to-all: one full-crossbar rack vs two racks (slowdown of one MoE layer)", slow, "×",
                 "substantial bottleneck", qualitative(slow > 2.0, "> 2× slower"),
                 {"hardware": hw.name, "scale-out share across two racks": 0.5},
                 note="Half the tokens leave the rack; their share over the slow NIC binds the all-to-all.", derivation=d)


def r18_rack_size() -> Claim:
    lim = ra.rack_limits("gb200-nvl72")
    n = min(lim.max_gpus.values())
    return Claim("R18", "GPUs one rack can hold: the binding physical limit (GB200 NVL72 rack model)", n, "GPUs", 64,
                 within_factor(n, 64, ABOUT, "'typically about 64'"),
                 {"hardware": "gb200-nvl72", "binding limit": lim.binding},
                 note="Power, weight, copper reach and switch radix each bound the rack; " + lim.summary + " Why not "
                      "one bigger switch: doubling the GPUs doubles the cable density into the backplane, and "
                      "connector density and cable bend radius cap it; a hierarchy of switches manages the cabling "
                      "(00:37–00:40).",
                 derivation=lim.derivation)


def r19_scaleout_slower() -> list[Claim]:
    ratios = {}
    for n in ("hgx-h100", "gb200-nvl72", "gb300-nvl72", "vr-nvl72"):
        c = load_hardware(n).chip
        ratios[n] = float(ra.scaleout_slowdown(c.scaleup_bw, c.scaleout_bw))
    d = Derivation("Scale-up ÷ scale-out bandwidth per GPU, per direction")
    for n, r in ratios.items():
        c = load_hardware(n).chip
        d.add(n, "BW_up / BW_out", f"{fmt(c.scaleup_bw, 'B/s')} / {fmt(c.scaleout_bw, 'B/s')}", r, "x")
    gb, b = ratios["gb200-nvl72"], load_hardware(RACK).chip
    lec = Claim("R19", "Scale-out is ~8× slower than scale-up on the lecture's rack (GB200 NVL72: NVLink vs one "
                       "400 Gb/s NIC per GPU)", gb, "×", 8.0, within_factor(gb, 8.0, ABOUT, "'about eight times slower'"),
                {"NVLink per direction": b.scaleup_bw, "NIC": b.scaleout_bw}, derivation=d,
                short="Scale-out ÷ scale-up bandwidth — lecture's rack, GB200 NVL72",
                reason=("GB200's NVLink 5 gives 900 GB/s per direction against one 400 Gb/s (50 GB/s) NIC per GPU: "
                        f"{gb:.0f}×, not ~8×. '8×' is Hopper's ratio (450 GB/s vs 400 Gb/s: 9×) and GB300's (800 Gb/s "
                        "NICs: 9×); Rubin's 1.6 Tb/s NICs bring it to 4.5×.") if not 8 / ABOUT <= gb <= 8 * ABOUT
                else "")
    h = ratios["hgx-h100"]
    real = Claim("R19", "Scale-out ÷ scale-up on H100 (NVLink 4 vs one 400 Gb/s NIC)", h, "×", 8.0,
                 within_factor(h, 8.0, ABOUT, "'about eight times slower'"), kind="real",
                 inputs={"H100 NVLink per direction": load_hardware("hgx-h100").chip.scaleup_bw,
                         "H100 NIC": load_hardware("hgx-h100").chip.scaleout_bw},
                 short="Scale-out ÷ scale-up bandwidth — real H100",
                 note="Between 4.5× (Rubin, 1.6 Tb/s NICs) and 18× (GB200 with one 400 Gb/s NIC per GPU).",
                 derivation=d)
    return [lec, real]


def r20_scaleup_growth() -> Claim:
    d = Derivation("Scale-up domain sizes (dies and packages)")
    sizes = {}
    for n in CHAIN:
        s = load_hardware(n)
        dies = s.scaleup_size * s.dies_per_chip
        sizes[n] = (s.scaleup_size, dies)
        d.add(n, "packages · dies/package", f"{s.scaleup_size} · {s.dies_per_chip}", dies, "dies")
    bw, ru = sizes["gb200-nvl72"], sizes["rubin-ultra-nvl576"]
    g = d.add("genuine growth", "packages(Rubin Ultra)/packages(Blackwell) … dies", f"{ru[0]}/{bw[0]} packages, "
              f"{ru[1]}/{bw[1]} dies", ru[1] / bw[1], "x", "'at least a genuine 4×'")
    value = f"{sizes['hgx-h100'][0]} → {bw[0]} → {ru[1]} dies"
    return Claim("R20", "Scale-up domain: Hopper 8 → Blackwell 72 → Rubin '500-something'", value, "GPUs",
                 "8 → 72 → 500-something",
                 qualitative(sizes["hgx-h100"][0] == 8 and bw[0] == 72 and 500 <= ru[1] < 600 and g >= 4,
                             "8, 72, 500–599 dies, ≥ 4× genuine growth"),
                 {n: f"{p} packages, {dd} dies" for n, (p, dd) in sizes.items()},
                 note=f"'Jensen math' compares NVL72's {bw[0]} packages with NVL576's {ru[1]} dies ({ru[1] / bw[0]:g}×). "
                      f"Like for like, NVL576 ({ru[0]} four-die packages) is {g:g}× Blackwell's {bw[1]} dies — the "
                      f"lecture's 'genuine 4×' — and {ru[0] / bw[0]:g}× its {bw[0]} packages; the new rack (Kyber) "
                      "doubles the packages one NVLink domain cables together.", derivation=d)


def r21_domain_memory() -> list[Claim]:
    h, b, b3 = load_hardware(HOPPER), load_hardware(RACK), load_hardware("gb300-nvl72")
    hop = float(ra.domain_memory(h.chip.hbm_bytes, h.scaleup_size))
    d = Derivation("HBM of one scale-up domain")
    d.add("Hopper box", "8 · 80 GB", f"{h.scaleup_size} · {fmt(h.chip.hbm_bytes, 'B')}", hop, "B")
    c1 = Claim("R21", "HBM of an 8-GPU Hopper box", hop, "B", 640e9, agree(hop, 640e9), {"hardware": h.name},
               derivation=d)
    bw = float(ra.domain_memory(b.chip.hbm_bytes, b.scaleup_size))
    bw3 = float(ra.domain_memory(b3.chip.hbm_bytes, b3.scaleup_size))
    m5 = ra.scaleup_memory_analysis(b, params=5e12, bytes_per_param=1.0)
    left = bw - 5e12
    c2 = Claim("R21-b", "HBM of a Blackwell rack, and room for a 5T model (fp8) plus KV", bw, "B", (10e12, 20e12),
               agree(bw, (10e12, 20e12), "'on the order of 10–20 terabytes'") if left > 0 else
               qualitative(False, "5T fp8 fits"),
               {"gb300-nvl72": bw3, "left for KV after 5T fp8 weights": left,
                "DeepSeek-V3 sequences at 8K context in that room": float(
                    ra.max_batch_in_domain(bw, 5e12, load_model(MODEL).kv_cache_bytes(8192)))},
               note="GB200 NVL72 13.4 TB, GB300 NVL72 20.7 TB: a 5T fp8 model leaves ~8 TB of KV.", derivation=m5)
    return [c1, c2]


def r22_total_params_limit() -> Claim:
    kv = float(load_model(MODEL).kv_cache_bytes(8192))
    batch = 1024
    d = Derivation(f"Largest fp8 model one domain holds with KV for {batch} sequences at 8K (DeepSeek MLA KV)")
    out = {}
    for n in CHAIN:
        s = load_hardware(n)
        dom = float(ra.domain_memory(s.chip.hbm_bytes, s.scaleup_size))
        out[n] = d.add(f"N_max {n}", "(S·HBM − B·kv_seq) / 1 B", f"({fmt(dom, 'B')} − {batch}·{fmt(kv, 'B')})",
                       float(ra.max_params_in_domain(dom, 1.0, kv, batch)), "")
    v = out["gb200-nvl72"] / max(out["hgx-h100"], 1.0)
    return Claim("R22", "Total params limited by scale-up size: largest model per domain, Blackwell rack ÷ Hopper box",
                 v, "×", "limited by scale-up size",
                 qualitative(out["hgx-h100"] < 1e12 < 5e12 < out["gb200-nvl72"], "Hopper < 1T < 5T < Blackwell rack"),
                 {k: f"{val / 1e12:.3g}T params" for k, val in out.items()},
                 note="A Hopper box cannot hold a GPT-4-sized (~1.8T) model with a serving batch of KV; a Blackwell "
                      "rack holds 5T+. Pipelining lifts the weight limit (R24) but not the latency floor (R29).",
                 derivation=d)


def claims() -> list[Claim]:
    return [r16_experts_per_gpu(), r17_two_racks(), r18_rack_size(), *r19_scaleout_slower(), r20_scaleup_growth(),
            *r21_domain_memory(), r22_total_params_limit()]


def plots(outdir):
    from pathlib import Path

    from ..plotting import racks as pr

    outdir = Path(outdir)
    systems = [load_hardware(n) for n in CHAIN] + [load_hardware("tpu-v7-pod")]
    return [pr.latency_floor_figure(ra.latency_floor_grid([1e12, 2e12, 5e12], systems), outdir / "ch2-latency-floor.png")]
