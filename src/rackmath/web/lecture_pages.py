"""The lecture's chapter pages: batch, racks, pipeline, training, pricing, context, revnet.

A page is its ``*_inputs()`` and its ``*_view(p)`` (the checked values in; numbers, charts, derivations out).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..explain import fmt
from .choices import (GRID, IDEAL, chip_names, common, dtype_inputs, dtypes, efficiency_header, gpus_input, hardware,
                      hardware_names, kvdt, model, model_names, preset_names, price_input, price_of, roofline,
                      sheet_names, supports, wdt, weight_read, weight_read_inputs)
from .figures import bars, chart, derivation, line, marker, num, shown
from .inputs import check, select, slider


# --------------------------------------------------------------------------- chapter 1: batch size and cost


def batch_inputs():
    return common() + [
        slider("batch", "batch (sequences)", 1, 65536, 64, log=True, unit="sequences"),
        slider("context", "context (tokens)", 128, 1048576, 8192, log=True, unit="tokens"),
        gpus_input(), *dtype_inputs(), *weight_read_inputs(),
        select("efficiency", "efficiency", preset_names(), ""), price_input()]


@lru_cache(maxsize=512)
def _balance_batch(model_name, hw_name, context, chips, wdt, kvdt, eff, weight_read=None) -> float:
    """B* does not depend on the batch slider: solved once per (model, hardware, context, …), then cached."""
    from ..analyses.lecture.batching import balance_batch_for

    extra = {"weight_read": weight_read} if weight_read and supports(balance_batch_for, "weight_read") else {}
    return float(np.asarray(balance_batch_for(model(model_name), hardware(hw_name), context=context, chips=chips,
                                              weights_dtype=wdt, kv_dtype=kvdt,
                                              efficiency=None if eff == "ideal" else eff, **extra)).ravel()[0])


def batch_view(p):
    m, hw = model(p["model"]), hardware(p["hardware"])
    gpus = p["gpus"] or None
    grid = np.unique(np.concatenate([np.geomspace(1, 65536, GRID).round(), [p["batch"]]]))  # whole sequences
    r = roofline(m, hw, gpus=gpus, batch=grid, context=p["context"], weights_dtype=wdt(p), kv_dtype=kvdt(p),
                  efficiency=p["efficiency"] or None, usd_per_gpu_hour=p["usd_per_gpu_hour"] or None,
                  **weight_read(p))
    i = int(np.searchsorted(grid, p["batch"]))
    pt = r.at(i)
    bstar = _balance_batch(m.name, hw.name, p["context"], gpus, wdt(p), kvdt(p), r.efficiency.name,
                           p.get("weight_read"))
    B = p["batch"]
    numbers = [num("step time", pt["step_s"], "s", "step_s"), num("binding term", pt["bound"], key="bound"),
               num("$ per million output tokens", pt["usd_per_mtok"], "$/Mtok", "usd_per_mtok"),
               num("tokens/s per chip", pt["tokens_per_s_per_chip"], "tok/s", "tok_s_chip"),
               num("tokens/s per sequence", pt["tokens_per_s_per_seq"], "tok/s", "tok_s_seq"),
               num("MFU", pt["mfu"], "%", "mfu"),
               num("memory per chip", pt["memory_bytes_per_chip"], "B", "mem"),
               num("fits in HBM", "yes" if pt["fits"] else "NO", key="fits"),
               num("balance batch B* (compute = memory)", bstar if np.isfinite(bstar) else
                   "∞ (KV fetch outruns compute)", "", "bstar")]
    t1 = chart("time", f"Step time vs batch: {m.name}, {int(np.asarray(r.chips).ravel()[0])} × {hw.chip.name}",
               [line(grid, r.t_compute_s, "compute"), line(grid, r.t_weights_s, "weight fetch"),
                line(grid, r.t_kv_s, "KV fetch"), line(grid, r.step_s, "step = max(compute, memory)",
                                                       line={"width": 3, "color": "black"}),
                marker(B, pt["step_s"])], "batch (sequences)", "time per step", yunit="s")
    t2 = chart("cost", "Cost per token vs batch (00:10: rent × time ÷ batch)",
               [line(grid, r.usd_per_mtok, "$ / Mtok"), marker(B, pt["usd_per_mtok"])],
               "batch (sequences)", "$ per million output tokens", yunit="$/Mtok")
    return {"header": efficiency_header(r.efficiency), "numbers": numbers, "charts": [t1, t2],
            "derivations": [derivation(r.explain(i))], "notes": []}


# --------------------------------------------------------------------------- chapter 2: racks and MoE


def racks_inputs():
    return common() + [slider("batch", "tokens per step", 1, 65536, 32, log=True, unit="tokens"),
                        select("weights_dtype", "weights dtype", dtypes(), ""),
                        slider("tokens_per_chip", "tokens per chip per MoE layer (all-to-all)", 1, 4096, 32, log=True,
                               unit="tokens")]


def racks_view(p):
    from ..analyses.lecture import racks as ra
    from ..engine.roofline import expected_experts_hit, weights_read_bytes
    from ..specs.hardware import systems

    m, hw = model(p["model"]), hardware(p["hardware"])
    grid = np.unique(np.concatenate([np.geomspace(1, 65536, GRID).round(), [p["batch"]]]))  # whole sequences
    w_dtype = wdt(p)
    w_read = weights_read_bytes(m, grid, w_dtype)
    w_all = float(m.weight_bytes(w_dtype))
    traces = [line(grid, np.asarray(w_read) / w_all, "weights read per step ÷ all weights"),
              marker(p["batch"], float(np.asarray(weights_read_bytes(m, p["batch"], w_dtype))) / w_all)]
    numbers = [num("weights (all)", w_all, "B", "w_all"),
               num("weights read this step", float(np.asarray(weights_read_bytes(m, p["batch"], w_dtype))), "B",
                   "w_read")]
    if m.n_experts:
        hit = expected_experts_hit(m.n_experts, m.experts_per_token, grid)
        traces.insert(1, line(grid, np.asarray(hit) / m.n_experts, "distinct experts hit ÷ experts (E_hit/E)",
                              line={"dash": "dot"}))
        numbers.append(num("distinct experts hit per layer",
                           float(expected_experts_hit(m.n_experts, m.experts_per_token, p["batch"])), "", "e_hit"))
    c1 = chart("experts", f"Weights a step reads vs tokens — {m.name} ({m.n_experts or 'dense'} experts)", traces,
               "tokens per step", "fraction", ylog=False)
    syss = systems().values()
    bpp = float(w_all / m.total_params)
    g = ra.latency_floor_grid([m.total_params], syss, bpp)
    names = g["systems"]
    c2 = bars("floor", f"Weight-load latency floor W / (S · HBM BW) for {m.name} (01:15)", names,
              [("latency floor", np.asarray(g["t_floor_s"])[:, 0],
                {"marker": {"color": ["#d62728" if n == hw.name else "#1f77b4" for n in names]}})],
              "time per step (one domain)", "s", ylog=True, margin={"l": 70, "r": 20, "t": 50, "b": 110})
    k = int(m.experts_per_token or 8)
    mem = ra.scaleup_memory_analysis(hw, params=float(m.total_params), bytes_per_param=bpp)
    ders, notes = [derivation(mem)], []
    if int(hw.scaleup_size) > 1:
        two = ra.two_rack_analysis(hw, tokens_per_chip=float(p["tokens_per_chip"]), k=k, d_model=int(m.d_model))
        numbers.append(num("two-rack all-to-all slowdown", two.steps[-1].value, "x", "slowdown"))
        ders.insert(0, derivation(two))
    else:
        notes.append(f"{hw.name} is one chip per scale-up domain: no in-rack all-to-all to compare a second rack with")
    numbers += [num("latency floor on one domain", mem.steps[-1].value, "s", "floor"),
                num("fits one domain", "yes" if mem.steps[3].value else "NO", key="fits")]
    return {"header": IDEAL, "numbers": numbers, "charts": [c1, c2], "derivations": ders, "notes": notes}


# --------------------------------------------------------------------------- chapter 3: pipelining and memory


def pipeline_inputs():
    return common() + [
        slider("stages", "pipeline stages P", 1, 64, 4, unit="stages"),
        slider("micro_batch", "sequences per micro-batch b", 1, 65536, 256, log=True, unit="sequences"),
        slider("context", "context (tokens)", 128, 1048576, 8192, log=True, unit="tokens"),
        slider("t_step_ms", "decode step without pipelining (ms)", 1, 1000, 20, unit="ms"),
        slider("microbatches", "training micro-batches M", 1, 1024, 16, log=True, unit="micro-batches"),
        select("schedule", "training schedule", ["1f1b", "gpipe", "interleaved"], "1f1b"),
        slider("chunks", "chunks per stage v (interleaved)", 1, 16, 2, unit="chunks")]


def pipeline_view(p):
    from ..analyses.lecture import pipeline as pl

    m, hw = model(p["model"]), hardware(p["hardware"])
    ep = int(hw.scaleup_size)
    kv_seq = float(np.asarray(m.kv_cache_bytes(p["context"])))
    w = float(m.weight_bytes())
    hop = float(hw.hop_latency_s)
    t_step = p["t_step_ms"] / 1e3
    cond = pl.pipeline_condition_analysis(hw, int(m.experts_per_token or 1), 1, int(m.n_moe_layers or m.n_layers))
    inf = pl.inference_pipelining_analysis(t_step=t_step, stages=p["stages"], hop_latency=hop, weight_bytes=w,
                                           kv_bytes_per_seq=kv_seq, micro_batch=p["micro_batch"], ep=ep)
    chunks = p["chunks"] if p["schedule"] == "interleaved" else 1
    trn = pl.training_pipeline_analysis(stages=p["stages"], microbatches=p["microbatches"], chunks=chunks,
                                        schedule=p["schedule"])
    P = np.arange(1, 65)
    wchip = pl.weight_bytes_per_chip(w, ep, P)
    kvchip = pl.kv_bytes_per_chip(p["micro_batch"], kv_seq, ep, P)
    by_p = float(np.asarray(pl.weight_bytes_per_chip(w, ep, p["stages"]))) + float(
        np.asarray(pl.kv_bytes_per_chip(p["micro_batch"], kv_seq, ep, p["stages"])))
    c1 = chart("memory", f"Memory per chip vs stages — {m.name}, EP {ep} per stage (00:47)",
               [line(P, wchip, "weights / chip"), line(P, np.broadcast_to(kvchip, P.shape), "KV / chip"),
                line(P, np.asarray(wchip) + kvchip, "total", line={"width": 3, "color": "black"}),
                line(P, np.full(P.shape, hw.chip.hbm_bytes), "HBM per chip", line={"dash": "dash"}),
                marker(p["stages"], by_p)],
               "pipeline stages P", "bytes per chip", xlog=False, yunit="B")
    M = np.unique(np.geomspace(1, 1024, 60).round())
    c2 = chart("bubble", f"Training bubble (P − 1)/(v·M + P − 1), P = {p['stages']}",
               [line(M, pl.bubble_fraction(p["stages"], M, 1), "GPipe / 1F1B"),
                line(M, pl.bubble_fraction(p["stages"], M, p["chunks"]), f"interleaved, v = {p['chunks']}"),
                marker(p["microbatches"], float(pl.bubble_fraction(p["stages"], p["microbatches"], chunks)))],
               "micro-batches M", "bubble fraction", ylog=False)
    by = {s.symbol: s for s in inf.steps + trn.steps + cond.steps}
    numbers = [num("token latency t_step + P·t_hop", by["t_token"].value, "s", "t_token"),
               num("weights per chip", by["w/chip"].value, "B", "w_chip"),
               num("KV per chip", by["kv/chip"].value, "B", "kv_chip"),
               num("global batch P·b", by["B"].value, "", "global_batch"),
               num("training bubble", by["bubble"].value, "%", "bubble"),
               num("fewest MoE layers per stage", by["layers/stage_min"].value, "", "layers_min")]
    return {"header": IDEAL, "numbers": numbers, "charts": [c1, c2],
            "derivations": [derivation(cond), derivation(inf), derivation(trn)], "notes": []}


# --------------------------------------------------------------------------- chapter 4: training economics


def training_inputs():
    return common("llama-3.1-70b", "hgx-h100") + [
        slider("tokens", "training tokens D", 1e9, 1e14, 15e12, log=True, unit="tokens"),
        slider("gpus", "GPUs", 8, 131072, 2048, log=True, unit="GPUs"),
        slider("mfu", "MFU", 0.05, 0.9, 0.4, step=0.01, integer=False, unit="%"),
        price_input(),
        slider("traffic", "fleet traffic (tokens/s)", 1e6, 1e10, 500e6, log=True, unit="tok/s"),
        slider("lifetime_days", "model lifetime (days)", 1, 1000, 61, unit="days"),
        slider("models", "models sharing the traffic", 1, 100, 10, unit="models")]


def train_searched(m, hw, *, chips, tokens, mfu, usd_per_hour=None):
    """`rackmath train MODEL -H HW --gpus N --tokens D --mfu F`: the command's own layout search
    (analyses.training.model.search_training_layout, with the command's defaults), so the page and the command agree."""
    from ..analyses.training.model import search_training_layout

    return search_training_layout(m, hw, chips=int(chips), tokens=float(tokens), mfu_given=mfu,
                                  usd_per_hour=usd_per_hour,
                                  fixed={"ep": 1, "schedule": "1f1b", "v": 1, "optimizer": "adam-mixed",
                                         "sequence_parallel": True})


def _layout_label(par) -> str:
    return (f"DP {par.dp} · TP {par.tp} · PP {par.pp}; ZeRO-{par.zero_stage}; recompute {par.recompute}")


def training_view(p):
    from ..analyses.lecture.lifetime import overtrain
    from ..analyses.training.model import train

    m, hw = model(p["model"]), hardware(p["hardware"])
    price = price_of(p, hw.chip)
    r, par, searched = train_searched(m, hw, chips=p["gpus"], tokens=p["tokens"], mfu=p["mfu"], usd_per_hour=price)
    D = np.geomspace(1e9, 1e14, 16)
    runs = [train(m, hw, chips=int(p["gpus"]), tokens=float(x), mfu_given=p["mfu"], par=par, usd_per_hour=price)
            for x in D]  # 16 scalar calls at the searched layout (it does not depend on D): one configuration each
    c1 = chart("train", f"Training {m.name} on {int(p['gpus'])} × {hw.chip.name} at MFU {p['mfu']:.0%}",
               [{**line(D, [x.time_s / 86400 for x in runs], "days"),
                 "text": [f"{shown(x.time_s, 's')}, {shown(x.usd, '$')}, {shown(x.chip_hours)} GPU-hours"
                          for x in runs], "hovertemplate": "%{x:.3s} tokens: %{text}<extra></extra>"},
                marker(p["tokens"], r.time_s / 86400, text=[shown(r.usd, "$")])], "training tokens D", "days",
               xunit="tokens", yunit="days")
    o = overtrain(rate=p["traffic"], lifetime_s=p["lifetime_days"] * 86400, n_models=p["models"],
                  active=float(m.active_params))
    c2 = bars("split", f"Lifetime compute split for {shown(m.active_params)} active (01:18)",
              ["pretraining", "RL", "inference"],
              [("FLOP-equivalents", [o.costs["pretrain"], o.costs["rl"], o.costs["inference"]], {})],
              "pretraining-FLOP equivalents")
    mem = r.memory
    fit = "" if mem["fits"] else " — DOES NOT FIT: no layout fits; more GPUs"
    numbers = [num("training FLOPs", r.flops_total, "FLOP", "flops"), num("time", r.time_s, "s", "time"),
               num("GPU-hours", r.chip_hours, "", "chip_hours"), num("cost", r.usd, "$", "usd"),
               num("memory per GPU", mem["total_bytes"], "B", "mem"),
               num("layout (searched, as `rackmath train`)", _layout_label(par), key="layout"),
               num("fits in HBM", "yes" if mem["fits"] else "NO", key="fits"),
               num("pretraining tokens (lifetime split)", o.D_pre, "tokens", "d_pre"),
               num("over-training vs Chinchilla", o.overtrain, "x", "overtrain"),
               num("cost-optimal N at the same loss", o.optimum["N_opt"], "params", "n_opt")]
    notes = [f"layout: the fastest of {searched['evaluated']} layouts ({searched['fit']} fit in "
             f"{shown(mem['hbm_bytes'], 'B')}) — `rackmath train {m.name} -H {hw.name} --gpus {int(p['gpus'])} "
             f"--tokens {shown(p['tokens'])} --mfu {p['mfu']:g}` searches the same{fit}"]
    return {"header": "measured-efficiency mode: time = 6·N·D (+ attention) / (GPUs · peak · MFU)",
            "numbers": numbers, "charts": [c1, c2], "derivations": [derivation(r.derivation), derivation(o.derivation)],
            "notes": notes}


# --------------------------------------------------------------------------- chapter 5: prices read backwards, tiers


def pricing_inputs():
    return [select("sheet", "price sheet", sheet_names(), "gemini-3.1-pro"),
            select("hardware", "chip", [c for c in hardware_names() if c in chip_names()], "h100"),
            slider("n_active", "active parameters", 1e9, 1e13, 100e9, log=True, unit="params"),
            slider("kv_bytes", "KV bytes per token", 0, 200000, 0, step=100, zero="from the price step", unit="B"),
            slider("hold_s", "hold time", 1, 1e6, 300, log=True, unit="s")]


def pricing_view(p):
    from ..analyses.lecture import memory_tiers as mt
    from ..analyses.lecture import pricing as pr
    from ..errors import RackmathError
    from ..specs.hardware import hardware_ratio, load_chip
    from ..specs.prices import load_price_sheet

    s, c = load_price_sheet(p["sheet"]), load_chip(p["hardware"])
    ders, numbers, notes = [], [], []
    st = s.step("output") or s.step("input")
    b = float(p["kv_bytes"]) or None
    if st is not None:
        ded = pr.deduce_from_step(st[0], st[1], n_active=p["n_active"], ratio=float(hardware_ratio(c, "fp8")),
                                  bytes_per_param=1.0, source=s.name)
        ders.append(derivation(ded.derivation))
        numbers += [num("tier boundary", st[0], "tokens", "boundary"), num("price step", st[1], "x", "step"),
                    num("crossover L*", ded.crossover, "tokens", "crossover"),
                    num("KV bytes per token (deduced)", ded.kv_bytes_per_token, "B", "kv_bytes")]
        b = b or float(ded.kv_bytes_per_token)
    else:
        notes.append(f"{s.name} has no long-context price step; KV bytes per token default to the lecture's 1,667 B")
    b = b or 1667.0
    tiers = mt.tiers_for(c)
    remat = float(mt.remat_cost(p["n_active"], c.peak_flops("fp8"), c.usd_per_hour))
    t = np.geomspace(1, 1e6, GRID)
    names, costs = mt.tier_costs(b, t, tiers, remat)
    traces = [line(t, costs[j] * 1e6, n) for j, n in enumerate(names)]
    best, best_cost = mt.cheapest(b, np.asarray([p["hold_s"]]), tiers, remat)
    traces.append(marker(p["hold_s"], float(best_cost[0]) * 1e6, f"cheapest: {best[0]}"))
    c1 = chart("tiers", f"Holding a token's KV ({fmt(b, 'B')}/token) on {c.name}: hold + retrieve (01:47)", traces,
               "hold time", "$ per million tokens", xunit="s", yunit="$/Mtok")
    numbers += [num("cheapest place at this hold time", str(best[0]), key="cheapest"),
                num("its cost", float(best_cost[0]) * 1e6, "$/Mtok", "cheapest_cost"),
                num("recompute cost", remat * 1e6, "$/Mtok", "remat")]
    try:
        ders.append(derivation(mt.deduce_cache(s, tiers, bytes_per_token=b).derivation))
    except RackmathError as e:  # a sheet without cache prices has nothing to deduce
        notes.append(str(e))
    return {"header": IDEAL, "numbers": numbers, "charts": [c1], "derivations": ders, "notes": notes}


# --------------------------------------------------------------------------- chapter 6: the context wall


def context_inputs():
    return common("deepseek-v3", "gb200-nvl72") + [
        slider("batch", "batch (sequences)", 1, 65536, 8192, log=True, unit="sequences"),
        slider("context", "context (tokens)", 128, 16777216, 8192, log=True, unit="tokens"),
        gpus_input(), select("kv_dtype", "KV dtype", dtypes(), ""), price_input()]


def context_view(p):
    import rackmath

    from ..analyses.lecture import context as cx
    from ..specs.hardware import hardware_ratio

    m, hw = model(p["model"]), hardware(p["hardware"])
    chips = p["gpus"] or None
    n = chips or int(hw.scaleup_size)
    grid = np.unique(np.concatenate([np.geomspace(128, 16777216, GRID), [p["context"]]]))
    r = rackmath.roofline(m, hw, gpus=chips, batch=p["batch"], context=grid, kv_dtype=kvdt(p),
                          usd_per_gpu_hour=p["usd_per_gpu_hour"] or None)
    i = int(np.searchsorted(grid, p["context"]))
    pt = r.at(i)
    cross = cx.crossover_for(m, hw, batch=p["batch"], chips=chips, kv_dtype=kvdt(p))
    lmax = cx.max_context_for(m, hw, batch=p["batch"], chips=n, kv_dtype=kvdt(p) or "bf16")
    lq = cx.quadratic_onset_for(m)
    c1 = chart("cost", f"Cost per token vs context — {m.name}, batch {p['batch']:g}, {n} × {hw.chip.name} (R42)",
               [line(grid, r.usd_per_mtok, "$ / Mtok"), marker(p["context"], pt["usd_per_mtok"])],
               "context (tokens)", "$ per million output tokens", yunit="$/Mtok",
               shapes=[{"type": "line", "x0": lmax, "x1": lmax, "yref": "paper", "y0": 0, "y1": 1,
                        "line": {"dash": "dash", "color": "gray"}}] if 0 < lmax < 1e12 else [])
    c2 = chart("time", "Step time terms vs context",
               [line(grid, r.t_compute_s, "compute"), line(grid, r.t_weights_s, "weight fetch"),
                line(grid, r.t_kv_s, "KV fetch"), line(grid, r.step_s, "step", line={"width": 3, "color": "black"}),
                marker(p["context"], pt["step_s"])], "context (tokens)", "time per step", yunit="s")
    c = hw.chip
    w_bytes = float(m.weight_bytes())
    wall = cx.context_wall(n_active=m.active_params, n_total=m.total_params,
                           bytes_per_token=float(np.asarray(m.kv_read_bytes(200e3, kvdt(p) or "bf16"))) / 200e3,
                           batch=p["batch"], ratio=float(hardware_ratio(c, m.native_dtype)),
                           bytes_per_param=w_bytes / m.total_params, peak_flops=c.gemm_flops(m.native_dtype),
                           mem_bw=c.hbm_bw, hbm_bytes=c.hbm_bytes * n, chips=n, weight_bytes=w_bytes,
                           attn_flops_per_ctx_token=float(m.attention_flops_per_token(1e6)) / 1e6, label=m.name)
    if cross <= 100:
        cross = "memory-bound at any context (batch below B*)"
    elif not np.isfinite(cross):
        cross = "compute-bound at every context shown"
    numbers = [num("$ per million output tokens", pt["usd_per_mtok"], "$/Mtok", "usd_per_mtok"),
               num("binding term", pt["bound"], key="bound"), num("step time", pt["step_s"], "s", "step_s"),
               num("memory-bound beyond (roofline crossover)", cross, "tokens", "crossover"),
               num("longest context that fits (this batch)", lmax, "tokens", "max_context"),
               num("attention FLOPs = matmul FLOPs at", lq, "tokens", "l_q"),
               num("fits in HBM", "yes" if pt["fits"] else "NO", key="fits")]
    # one crossover on the page: the roofline's (the model's own attention and KV, as the charts), so the wall's
    # dense-formula L* (an average KV per token, no attention FLOPs) is left out of its derivation here
    wd = wall.derivation
    wd.steps = [st for st in wd.steps if st.symbol != "L*"]
    wd.conclusion = (f"→ a {shown(wall.target_context)}-token context at today's cost per token needs "
                     f"{wall.bandwidth_multiple:.3g}× today's HBM bandwidth")
    return {"header": IDEAL, "numbers": numbers, "charts": [c1, c2],
            "derivations": [derivation(r.explain(i)), derivation(wd)],
            "notes": ["crossover: where the step's memory terms (weights + KV) overtake compute in the roofline "
                      "charted here (analyses.lecture.context.crossover_for, as `rackmath context -m` prints it as "
                      "roofline_crossover)"]}


# --------------------------------------------------------------------------- chapter 7: reversible networks


def revnet_inputs():
    return [select("model", "model (shape)", model_names(), "llama-3.1-70b"),
            slider("seq", "sequence length", 128, 1048576, 8192, log=True, unit="tokens"),
            slider("batch", "sequences per micro-batch", 1, 1024, 1, log=True, unit="sequences"),
            select("dtype", "activation dtype", ["bf16", "fp16", "fp8", "fp32"], "bf16"),
            check("flash", "flash attention (no s² scores stored)", True)]


def revnet_view(p):
    from .. import units
    from ..analyses.lecture import revnet

    m = model(p["model"])
    r = revnet.compare(n_layers=m.n_layers, seq_len=p["seq"], batch=p["batch"], d_model=m.d_model, n_heads=m.n_heads,
                       bytes_per_elem=units.dtype_bytes(p["dtype"]), flash=p["flash"], name=m.name)
    schemes = [x["scheme"] for x in r.rows]
    c1 = bars("memory", f"Activation memory for {m.name} ({m.n_layers} layers), seq {shown(p['seq'])} (02:04)",
              schemes, [("stored activations", [x["stored_bytes"] for x in r.rows], {}),
                        ("peak", [x["peak_bytes"] for x in r.rows], {})], "activation memory", "B", ylog=True,
              barmode="group")
    c2 = bars("flops", "Compute paid for the memory: training FLOPs ÷ standard (4F/3F)", schemes,
              [("training FLOPs ÷ standard", [x["flops_vs_standard"] for x in r.rows], {})], "×")
    numbers = [num(f"stored: {x['scheme']}", x["stored_bytes"], "B", f"stored_{x['scheme']}") for x in r.rows]
    numbers.append(num("memory saved by reversible layers", r.rows[0]["stored_bytes"] / r.rows[2]["stored_bytes"],
                       "x", "saving"))
    return {"header": "activation memory of one micro-batch (Korthikanti et al. 2022 counts)", "numbers": numbers,
            "charts": [c1, c2], "derivations": [derivation(r.derivation)], "notes": []}
