"""Chapter three (lecture 00:47:12–01:18:59): pipeline parallelism across racks, in inference and training. Claims R23–R29."""

from __future__ import annotations

import numpy as np

from ..analyses.lecture import pipeline as pl
from ..analyses.lecture import racks as ra
from ..engine.deployment import Deployment
from ..engine.search import search_layouts
from ..explain import Derivation, fmt
from ..specs.hardware import load_hardware
from ..specs.models import load_model
from . import ABOUT, Claim, agree, not_discriminated, qualitative, within_factor
from .ch1_batching import lecture_op, real_op
from ..analyses.lecture.batching import drain_time

RACK = "gb200-nvl72"
MODEL = "deepseek-v3"
CTX = 8192
# Cost gaps smaller than this cannot discriminate layouts: the ideal roofline leaves out TP's all-reduce and
# small-matmul inefficiency and EP's routing skew, each of which costs more than this on real stacks.
R27_UNCERTAINTY = 0.10


def r23_pipeline_condition() -> Claim:
    m, hw = load_model(MODEL), load_hardware(RACK)
    k = int(m.experts_per_token)
    d = Derivation("Pipeline condition with the lecture's numbers (00:47)")
    r = d.add("t_up/t_out", "(BW_out/BW_up) · k · layers/stage · 2", f"(1/8) · {k} · 1 · 2",
              float(pl.pipeline_condition(1.0, 8.0, k, 1)), "", "≥ 1 wanted")
    d.add("k·layers·2 needed", "BW_up/BW_out", "8", 8.0, "", "'just a factor of 8 we need to overcome'")
    d.add("layers/stage_min", "ceil(8 / (k · 2))", f"ceil(8 / ({k} · 2))", float(pl.min_layers_per_stage(1.0, 8.0, k)),
          "")
    real = pl.pipeline_condition_analysis(hw, k, 1, int(m.n_moe_layers))
    d.extend(real)
    return Claim("R23", "Pipeline condition (1/8)·k·layers/stage·2 at k = 8, one layer per stage", r, "", "≥ 1",
                 qualitative(r >= 1.0, "≥ 1"), {"k (DeepSeek-V3)": k, f"min layers/stage on {hw.name}": f"{real.steps[2].value:g} MoE layers"},
                 note=f"On {hw.name} (18× NVLink/NIC) two MoE layers per stage are needed; with the lecture's 8×, one.",
                 derivation=d)


def r24_pipeline_memory() -> list[Claim]:
    m = load_model(MODEL)
    W = float(m.weight_bytes())
    kv = float(m.kv_cache_bytes(CTX))
    E, b = 64, 2400
    w1, w4 = (float(pl.weight_bytes_per_chip(W, E, P)) for P in (1, 4))
    k1, k4 = (float(pl.kv_bytes_per_chip(b, kv, E, P)) for P in (1, 4))
    hw = load_hardware(RACK)
    # the step is derived, not typed: a step reads all of HBM once (drain time = capacity / bandwidth, 00:25, R10)
    t_step = float(drain_time(hw.chip.hbm_bytes, hw.chip.hbm_bw))
    d = pl.inference_pipelining_analysis(t_step=t_step, stages=4, hop_latency=hw.hop_latency_s,
                                         weight_bytes=W, kv_bytes_per_seq=kv, micro_batch=b, ep=E,
                                         t_step_note=f"HBM drain time {fmt(hw.chip.hbm_bytes, 'B')} / "
                                                     f"{fmt(hw.chip.hbm_bw, 'B/s')} ({hw.chip.name})")
    # the engine: the layout model's most-loaded stage holds ceil(61/4) = 16 of 61 layers
    dep1 = Deployment.build(hw, 72, tp=64, ep=64, pp=1, attention_dp=True, allow_idle=True, model=m)
    dep4 = Deployment.build(hw, 288, tp=64, ep=64, pp=4, attention_dp=True, allow_idle=True, model=m)
    e1 = dep1.evaluate(m, micro_batch=b, context=CTX).row(0)
    e4 = dep4.evaluate(m, micro_batch=b, context=CTX).row(0)
    kv_eng = e4["kv_bytes_per_chip"] / e1["kv_bytes_per_chip"]
    w_eng = e4["weight_bytes_per_chip"] / e1["weight_bytes_per_chip"]
    d.add("kv/chip P=4 ÷ P=1 (engine)", "layout model, most-loaded stage", "ceil(61/4) = 16 of 61 layers", kv_eng, "×",
          f"closed form {k4 / k1:g}")
    d.add("w/chip P=4 ÷ P=1 (engine)", "layout model, most-loaded stage", "", w_eng, "×", f"closed form {w4 / w1:g}")
    inputs = {"model": m.name, "E": E, "b": b, "context": CTX, "t_step (drain time)": t_step}
    why = ("Pipelining's only inference benefit: 'we're just moving the memory time from one chip to another' "
           "(00:53); it saves weight capacity per rack but not KV, because P stages need P micro-batches in flight.")
    return [
        Claim("R24", "Pipelining in inference: KV memory per GPU, 4 stages ÷ 1 stage (layout engine, most-loaded "
                     "stage)", kv_eng, "×", 1.0,
              agree(kv_eng, 1.0, why="'the P's cancel'; uneven stages (16 of 61 layers) within it"), inputs,
              note="c_mem = N/(E·P) + b·len·bytes/E: P micro-batches in flight, so P cancels in the KV term "
                   f"(closed form {k4 / k1:g}×); the engine's most-loaded stage holds 16 of 61 layers, "
                   f"16·4/61 = {64 / 61:.3f}×. " + why, derivation=d),
        Claim("R24-b", "Pipelining in inference: weight memory per GPU, 4 stages ÷ 1 stage (layout engine, "
                       "most-loaded stage)", w_eng, "×", 0.25,
              agree(w_eng, 0.25, why="'you only need a quarter of the model'"), inputs, derivation=d,
              note=f"Closed form N/(E·P): {w4 / w1:g}×; the engine's most-loaded stage holds 16 of 61 layers."),
    ]


def r25_trillion_needs_tb() -> Claim:
    hw = load_hardware(RACK)
    w = float(ra.weight_bytes(1e12, 1.0))
    dom = float(ra.domain_memory(hw.chip.hbm_bytes, hw.scaleup_size))
    d = Derivation("A trillion-parameter model's weights")
    d.add("W", "N · bytes/param", "1e12 · 1 B (fp8)", w, "B")
    d.add("rack HBM", "S · HBM", f"{hw.scaleup_size} · {fmt(hw.chip.hbm_bytes, 'B')}", dom, "B")
    d.add("share", "W / rack HBM", "", w / dom, "")
    return Claim("R25", "A trillion-parameter model needs ~1 TB (fp8); a Blackwell rack holds many TB", w, "B", 1e12,
                 agree(w, 1e12) if dom > 10 * w else qualitative(False, "rack HBM > 10× the weights"), {"rack": hw.name, "rack HBM": dom},
                 note="'Many tens of TB' is generous: GB200 NVL72 13.4 TB, GB300 NVL72 20.7 TB (HBM only).", derivation=d)


def r26_memory_capex() -> Claim:
    return Claim("R26", "Hyperscalers spend ~50% of 2026 capex on memory (cited, not derived)", "not modelled", "",
                 "50%", False, {}, kind="cited", tolerance="cited, not derivable",
                 note=("Cited from Dylan Patel via Dwarkesh; rackmath has no capex model, so it neither confirms nor "
                       "refutes it: shown, not counted."))


def r27_inference_practice() -> Claim:
    m, hw = load_model(MODEL), load_hardware(RACK)
    sr = search_layouts(m, hw, 288, context=CTX, min_tokens_per_s_per_user=20.0)
    res = sr.layouts
    ok = sr.fits
    cost = np.where(ok, res.usd_per_mtok, np.inf)
    i = int(np.argmin(cost))
    ep_heavy = ok & (res.ep >= 32) & (res.ep >= res.moe_tp)
    j = int(np.argmin(np.where(ep_heavy, cost, np.inf)))
    r, rj = res.row(i), res.row(j)

    def label(x):
        return f"TP{int(x['tp'])} EP{int(x['ep'])}{' attnDP' if x['attention_dp'] else ''} PP{int(x['pp'])}"

    premium = rj["usd_per_mtok"] / r["usd_per_mtok"]
    ep_cheapest = r["ep"] >= 32 and r["ep"] >= r["moe_tp"]
    test = "cheapest layout has PP ≤ 2 and EP ≥ 32 ≥ expert TP"
    if r["pp"] <= 2 and not ep_cheapest and premium <= 1 + R27_UNCERTAINTY:
        ok = not_discriminated(f"{test}; the EP-heavy layout is within {R27_UNCERTAINTY:.0%} of the cheapest, inside "
                               "what an ideal roofline can tell apart")
    else:
        ok = qualitative(r["pp"] <= 2 and ep_cheapest, test)
    reason = "" if ok else (
        f"{'Not discriminated' if not ok.discriminated else 'Contradiction'}: the cheapest layout found is "
        f"{label(r)} (expert TP {int(r['moe_tp'])}) and the EP-heavy {label(rj)} costs {premium:.3g}× it, a "
        f"{premium - 1:.1%} gap. Under the ideal roofline at the cheapest (KV-bound) point, sharding an expert by TP "
        "or placing whole experts by EP reads the same bytes in the same time, and 256 experts over 72 GPUs load EP "
        "slightly unevenly; the lecture's case against TP (small experts make TP's per-layer all-reduces and small "
        "matmuls inefficient) and EP's routing skew are not charged by an ideal roofline, so a gap this small "
        f"(< {R27_UNCERTAINTY:.0%}) cannot decide between them. Pipelining never pays in cost (the PP half of the "
        "claim holds).")
    return Claim("R27", "Inference practice: little PP, EP up to the domain (cheapest layout ≥ 20 tok/s/user, 4 racks)",
                 label(r), "", "EP ≈ domain, PP 0–2, no TP", ok,
                 {"model": m.name, "hardware": hw.name, "chips": 288,
                  "cheapest $/Mtok": r["usd_per_mtok"], "cheapest with EP ≥ 32": label(rj),
                  "its $/Mtok": rj["usd_per_mtok"], "binding": r["bound"], "layouts searched": sr.n_evaluated},
                 note="DeepSeek reports EP across the domain and little PP (01:10); TP 'was cutting up within an expert, "
                      "but the experts are so small now that that is not a profitable optimization'. Pipelining is 'a "
                      "massive hassle' (Ilya Sutskever; Horace He: it constrains the architecture) for a benefit — "
                      "weight capacity per rack — a Blackwell rack rarely needs.",
                 reason=reason, derivation=res.explain(j))


def r28_hop_latency() -> list[Claim]:
    hw = load_hardware(RACK)
    hop = hw.hop_latency_s
    out = []
    for kind, op in (("lecture", lecture_op()), ("real", real_op())):
        t = float(pl.pipelined_token_latency(op.step_s, 4, hop))
        d = Derivation("Per-token latency with 4 pipeline stages (01:12)")
        d.steps.extend(op.derivation.steps)
        d.add("t_token", "t_step + P · t_hop", f"{fmt(op.step_s, 's')} + 4 · {fmt(hop, 's')}", t, "s",
              "pipelining is latency-neutral apart from the hops; hop 'a few ms, could be off by an order of magnitude'")
        lo, hi = (float(pl.pipelined_token_latency(op.step_s, 4, h)) for h in (hop / 10, hop * 10))
        out.append(Claim("R28", "Decode latency per token with 4 pipeline stages"
                         + (" (lecture premises: step from HBM full of KV)" if kind == "lecture"
                            else f" (real: {MODEL}, 8K, experts hit)"),
                         t, "s", 0.030, within_factor(t, 0.030, ABOUT, "'from 20 to 30, or something like that'"),
                         {"step without pipelining": op.step_s, "hop latency (catalog)": hop,
                          "range for hop ÷10…×10": f"{lo * 1e3:.1f}–{hi * 1e3:.0f} ms"},
                         kind=kind, derivation=d,
                         short="Decode latency per token, 4 pipeline stages — "
                               + ("lecture premises" if kind == "lecture" else "real DeepSeek-V3, 8K")))
    return out


def r29_bandwidth_not_capacity() -> Claim:
    h, b = load_hardware("hgx-h100"), load_hardware(RACK)
    d = Derivation("Weight-load latency floor of a 2T-parameter fp8 model (01:15)")
    th = d.add("t_floor Hopper", "W / (8 · BW)", f"2 TB / (8 · {fmt(h.chip.hbm_bw, 'B/s')})",
               float(ra.weight_load_time(2e12, h.scaleup_size, h.chip.hbm_bw)), "s")
    tb = d.add("t_floor Blackwell", "W / (72 · BW)", f"2 TB / (72 · {fmt(b.chip.hbm_bw, 'B/s')})",
               float(ra.weight_load_time(2e12, b.scaleup_size, b.chip.hbm_bw)), "s")
    g_su = d.add("scale-up growth", "72 / 8", "", b.scaleup_size / h.scaleup_size, "x", "lecture: 8×")
    g_bw = d.add("per-GPU BW growth", "BW_B / BW_H", "", b.chip.hbm_bw / h.chip.hbm_bw, "x", "lecture: 1.5–2× per gen")
    d.add("floor ratio", "t_H / t_B", "", th / tb, "x")
    return Claim("R29", "Weight-load floor uses scale-up × per-GPU BW: scale-up growth Hopper → Blackwell", g_su, "×",
                 8.0, within_factor(g_su, 8.0, ABOUT, "'increased by a factor of 8'"),
                 {"per-GPU HBM BW growth": g_bw, "2T fp8 floor Hopper": th, "2T fp8 floor Blackwell": tb},
                 note="The bigger domain, not the bigger HBM, cut the latency floor: 9× from scale-up, 2.4× from BW.",
                 derivation=d)


def claims() -> list[Claim]:
    return [r23_pipeline_condition(), *r24_pipeline_memory(), r25_trillion_needs_tb(), r26_memory_capex(),
            r27_inference_practice(), *r28_hop_latency(), r29_bandwidth_not_capacity()]


def plots(outdir):
    from pathlib import Path

    from ..plotting import racks as pr

    outdir = Path(outdir)
    m = load_model(MODEL)
    P = np.arange(1, 9)
    W, kv = float(m.weight_bytes()), float(m.kv_cache_bytes(CTX))
    return [pr.pipeline_memory_figure(P, pl.weight_bytes_per_chip(W, 64, P), pl.kv_bytes_per_chip(2400, kv, 64, P),
                                      outdir / "ch3-pipeline-memory.png", title=f"{m.name}, E = 64, b = 2400, {CTX} ctx")]
