"""`rackmath layout` (the layout search), `rackmath racks …` (chapters two and three), `rackmath plot pareto`."""

from __future__ import annotations

from pathlib import Path

import typer

from ..units import human

from .common import (EFF_OPT, EXPLAIN_OPT, FORCE_OPT, IDEAL_OPT, JSON_OPT, KVDT_OPT, MODEL_ARG, USD_OPT, WDT_OPT,
                     context_opt, dtype_check, gpus_opt, hardware_opt, output_opt)

HW_OPT = hardware_opt()
CTX_OPT = context_opt()
OVERLAP_OPT = typer.Option("max", "--overlap",
                           help="How compute, memory and communication combine: max (overlapped, default) or sum.")
HOP_OPT = typer.Option(None, "--hop-latency", help="Rack-to-rack hop latency (default: the system's, 'a few ms').")

racks_app = typer.Typer(help="The lecture's rack and pipeline analyses (00:32–01:18).", no_args_is_help=True)


def _count(text, field):
    from .. import units

    return units.parse_count(text, field)


MAX_CHIPS = 1e6  # more chips than any deployment; also bounds the layout enumeration


def _int(text, field, maximum: float = MAX_CHIPS):
    from ..errors import InputError

    v = _count(text, field)
    if v != int(v) or v < 1:
        raise InputError(field, f"{text!r} is not a positive whole number", "1, 2, 8, 72 …")
    if v > maximum:
        raise InputError(field, f"{text!r} is out of range", f"a whole number from 1 up to {maximum:g}")
    return int(v)


def _search(model, hardware, chips, context, batch, max_pp, weights_dtype, kv_dtype, efficiency, overlap, hop_latency,
            min_speed, redundant, ideal=False, price=None, weight_layouts="1d"):
    """engine.layout.search_layouts with the option strings of `layout` and `plot pareto` parsed (one parameter per
    option they forward)."""
    from .. import units
    from ..engine.search import search_layouts
    from .common import efficiency_for, parse_range, priced

    efficiency = efficiency_for(hardware, efficiency, ideal, default="ideal")
    hardware = priced(hardware, price)

    from ..errors import check_positive

    mb = parse_range(batch, "batch", integer=True) if batch is not None else None
    if mb is not None:
        check_positive(mb, "batch", "micro-batches per replica", maximum=1e9)
    check_positive(float(min_speed or 0.0), "min_speed", "tokens/s per user", allow_zero=True)
    return search_layouts(model, hardware, _int(chips, "gpus"), context=_count(context, "context"),
                          weights_dtype=weights_dtype, kv_dtype=kv_dtype, efficiency=efficiency, overlap=overlap,
                          micro_batches=mb, max_pp=max_pp,
                          hop_latency_s=units.parse_duration(hop_latency, "hop_latency") if hop_latency else None,
                          min_tokens_per_s_per_user=float(min_speed or 0.0), redundant_experts=redundant,
                          weight_layouts=_weight_layouts(weight_layouts))


def _weight_layouts(text) -> tuple:
    """--weight-layout: a comma list of 1d, 2d, gathered, or all (checked by the layout search)."""
    from ..specs.records import WEIGHT_LAYOUTS

    parts = [p.strip().lower() for p in str(text or "1d").split(",") if p.strip()] or ["1d"]
    return tuple(WEIGHT_LAYOUTS) if parts == ["all"] else tuple(dict.fromkeys(parts))


def _layout_label(r) -> str:
    s = f"TP{int(r['tp'])}"
    if r["ep"] > 1:
        s += f"·EP{int(r['ep'])}"
    if r["attention_dp"]:
        s += "·aDP"
    if r["pp"] > 1:
        s += f"·PP{int(r['pp'])}"
    s += {"2d": "·2D", "gathered": "·gathered"}.get(r.get("weight_layout", "1d"), "")
    return s + f"×{int(r['dp'])}"


def layout_cmd(
    model: str = MODEL_ARG,
    hardware: str = HW_OPT,
    chips: str = gpus_opt(..., "GPU budget (all are billed, idle ones included)."),
    context: str = CTX_OPT,
    batch: str = typer.Option(None, "--batch", "-b",
                              help="Micro-batches per replica to try (default 1:8192:log49)."),
    max_pp: int = typer.Option(None, "--max-pp", min=1, help="Most pipeline stages to try (default min(layers, 16))."),
    min_speed: float = typer.Option(0.0, "--min-speed", help="Only layouts with at least this many tok/s per user."),
    redundant_experts: int = typer.Option(0, "--redundant-experts", min=0, help="Extra expert slots (DeepSeek: 32)."),
    weights_dtype: str = WDT_OPT,
    kv_dtype: str = KVDT_OPT,
    efficiency: str = EFF_OPT,
    ideal: bool = IDEAL_OPT,
    price: str = USD_OPT,
    overlap: str = OVERLAP_OPT,
    hop_latency: str = HOP_OPT,
    weight_layout: str = typer.Option("1d", "--weight-layout",
                                      help="How a TP group holds a dense model's weights, a comma list: 1d "
                                           "(weight-stationary, default), 2d (weight-stationary over d_model and "
                                           "d_ff), gathered (all-gathered per layer), or all (Pope et al. 2022 "
                                           "§3.2)."),
    json: bool = JSON_OPT,
    explain: bool = EXPLAIN_OPT,
):
    """Pareto frontier of $ per million output tokens vs tokens/s per user over every valid layout.
    \f
    One parameter per option (typer reads the command's options from its signature)."""
    from .common import Col, efficiency_for, human, mode_dict, mode_label, print_derivation, print_json, table

    eff = efficiency_for(hardware, efficiency, ideal, default="ideal")
    sr = _search(model, hardware, chips, context, batch, max_pp, weights_dtype, kv_dtype, eff, overlap,
                 hop_latency, min_speed, redundant_experts, price=price, weight_layouts=weight_layout)
    f = sr.frontier
    if json:
        d = mode_dict(eff) | {"usd_per_gpu_hour": sr.layouts.hw.usd_per_chip_hour} | sr.as_dict()
        if explain:
            d["derivations"] = [f.explain(i).as_dict() for i in range(len(f))]
        print_json(d)
        return
    rows = []
    for i in range(len(f)):
        r = f.row(i)
        rows.append([human(r['tokens_per_s_per_user']), human(r['usd_per_mtok'], "$"), _layout_label(r),
                     human(r['micro_batch']), human(r['concurrency']), human(r["mem_per_chip"], "B"),
                     human(r["tpot_s"], "s"), r["bound"]])
    table(f"{sr.layouts.model.name} on {chips} × {sr.layouts.hw.name}: Pareto frontier\n{mode_label(eff)}",
          [Col("tok/s/user", 0), Col("$/Mtok", 0), Col("layout", 0), Col("b", 2), Col("concurrency", 1),
           Col("mem/GPU", 2), Col("TPOT", 1), Col("binding", 3)], rows,
          caption=f"{sr.n_evaluated} layouts evaluated in {sr.seconds * 1e3:.0f} ms, {int(sr.fits.sum())} fit; "
                  f"overlap = {overlap}; $ at {human(sr.layouts.hw.usd_per_chip_hour, '$')}/GPU-hour")
    if explain and len(f):
        import numpy as np

        print_derivation(f.explain(int(np.argmin(f.usd_per_mtok))))


def memory_cmd(
    model: str = MODEL_ARG,
    hardware: str = HW_OPT,
    chips: str = gpus_opt(),
    tp: str = typer.Option(None, "--tp", help="Attention TP degree (default: chips / pp)."),
    ep: str = typer.Option("1", "--ep", help="Expert-parallel degree within the TP group."),
    pp: str = typer.Option("1", "--pp", help="Pipeline stages."),
    attention_dp: bool = typer.Option(False, "--attention-dp", help="Attention data-parallel over the TP group."),
    attention_dp_size: str = typer.Option(None, "--attention-dp-size",
                                          help="Attention data-parallel over R groups of TP/R GPUs (implies "
                                               "--attention-dp; default: every GPU its own sequences)."),
    redundant_experts: int = typer.Option(0, "--redundant-experts", min=0, help="Extra expert slots."),
    uneven: bool = typer.Option(False, "--uneven", help="Allow experts that do not divide (most-loaded GPU)."),
    allow_idle: bool = typer.Option(False, "--allow-idle", help="Leave chips idle when TP·PP does not divide."),
    concurrency: str = typer.Option("1", "--concurrency", "-c", help="Sequences in flight over the deployment."),
    context: str = CTX_OPT,
    weights_dtype: str = WDT_OPT,
    kv_dtype: str = KVDT_OPT,
    json: bool = JSON_OPT,
    explain: bool = EXPLAIN_OPT,
):
    """Memory per chip (c_mem): weights ÷ (EP·TP·PP) + KV in flight + workspace; fit, largest batch and context.
    \f
    One parameter per option (typer reads the command's options from its signature)."""
    from ..engine.deployment import Deployment
    from ..specs.models import load_model
    from .common import human, print_derivation, print_json, table

    m = load_model(model)
    dep = Deployment.build(hardware, _int(chips, "gpus") if chips else None, tp=_int(tp, "tp") if tp else None,
                           ep=_int(ep, "ep"), pp=_int(pp, "pp"), attention_dp=attention_dp,
                           attention_dp_size=_int(attention_dp_size, "attention_dp_size")
                           if attention_dp_size is not None else None,
                           redundant_experts=redundant_experts, uneven_experts=uneven, allow_idle=allow_idle,
                           model=m)
    from ..analyses.lecture.context import context_warning, max_context

    conc, ctx = _count(concurrency, "concurrency"), _count(context, "context")
    fit = dep.memory(m, concurrency=conc, context=ctx, weights_dtype=weights_dtype, kv_dtype=kv_dtype)
    mc = max_context(m, hardware, concurrency=conc, weights_dtype=weights_dtype, kv_dtype=kv_dtype, deployment=dep)
    warnings = [w for w in (context_warning(m, ctx), mc.warning) if w]
    if json:
        d = fit.as_dict() | {"max_context": mc.tokens, "model_max_context": mc.model_limit,
                             "usable_context": mc.usable, "warnings": warnings}
        if explain:
            d["derivation"] = fit.derivation.as_dict()
        print_json(d)
        return
    lim = f"{mc.model_limit:,.0f} tokens" if mc.model_limit else "not published"
    table(f"{m.name} on {dep.chips} × {dep.system.name}: {dep.label()}, {human(conc)} sequences at "
          f"{human(ctx)} tokens", ["quantity", "per GPU"], [
        ["weights", human(fit.weight_bytes, "B")], ["KV in flight", human(fit.kv_bytes, "B")],
        ["workspace", human(fit.workspace_bytes, "B")], ["total c_mem", human(fit.total_bytes, "B")],
        ["HBM", human(fit.capacity_bytes, "B")], ["headroom", human(fit.headroom_bytes, "B")],
        ["fits", "yes" if fit.fits else "NO"], ["largest concurrency", human(fit.max_concurrency)],
        ["longest context (memory)", f"{human(mc.tokens)} tokens"], ["model's own limit", lim]],
          caption="; ".join(f"WARNING: {w}" for w in warnings) or None)
    if explain:
        print_derivation(fit.derivation)


def pipeline_cmd(
    model: str = typer.Argument("deepseek-v3", metavar="[MODEL]", help="Model (its k and MoE layers)."),
    hardware: str = HW_OPT,
    k: int = typer.Option(None, "--k", min=1, help="Activated experts per token (overrides the model's)."),
    layers: int = typer.Option(1, "--layers-per-stage", min=1, help="MoE layers per stage for the condition."),
    stages: int = typer.Option(4, "--stages", "-P", min=1, help="Pipeline stages for the inference latency and memory."),
    t_step: str = typer.Option(None, "--t-step", help="Decode step time without pipelining (default: the chip's "
                                                      "HBM drain time, capacity / bandwidth — the lecture's "
                                                      "~20 ms step that reads all of HBM once)."),
    hop_latency: str = HOP_OPT,
    ep: int = typer.Option(64, "--ep", min=1, help="Expert parallelism within a rack (E)."),
    micro_batch: str = typer.Option("2400", "--micro-batch", help="Sequences per micro-batch (b)."),
    context: str = CTX_OPT,
    json: bool = JSON_OPT,
    explain: bool = EXPLAIN_OPT,
):
    """The pipeline condition (R23) and pipelining in inference: latency (R28), weights ÷ P, KV unchanged (R24)."""
    from .. import units
    from ..analyses.lecture import pipeline as pl
    from ..explain import fmt
    from ..specs.hardware import load_hardware
    from ..specs.models import load_model
    from .common import print_derivation, print_json, table

    hw = load_hardware(hardware)
    m = load_model(model or "deepseek-v3")
    kk = k or int(m.experts_per_token or 1)
    cond = pl.pipeline_condition_analysis(hw, kk, layers, int(m.n_moe_layers or m.n_layers))
    hop = units.parse_duration(hop_latency, "hop_latency") if hop_latency else hw.hop_latency_s
    if t_step is None:
        from ..analyses.lecture.batching import drain_time

        step = float(drain_time(hw.chip.hbm_bytes, hw.chip.hbm_bw))
        note = f"HBM drain time {fmt(hw.chip.hbm_bytes, 'B')} / {fmt(hw.chip.hbm_bw, 'B/s')} ({hw.chip.name})"
    else:
        step, note = units.parse_duration(t_step, "t_step"), "--t-step"
    inf = pl.inference_pipelining_analysis(
        t_step=step, t_step_note=note, stages=stages, hop_latency=hop,
        weight_bytes=float(m.weight_bytes()), kv_bytes_per_seq=float(m.kv_cache_bytes(_count(context, "context"))),
        micro_batch=_count(micro_batch, "micro_batch"), ep=ep)
    if json:
        print_json({"condition": cond.as_dict(), "inference": inf.as_dict()})
        return
    table(f"Pipelining {m.name} on {hw.name}", ["quantity", "value"],
          [[s.symbol, fmt(s.value, s.unit)] for s in cond.steps + inf.steps])
    if explain:
        print_derivation(cond)
        print_derivation(inf)


def bubble_cmd(
    stages: int = typer.Option(..., "--stages", "-P", min=1, help="Pipeline stages."),
    microbatches: int = typer.Option(..., "--microbatches", "-M", min=1, help="Micro-batches per training step."),
    chunks: int = typer.Option(1, "--chunks", "-v", min=1, help="Model chunks per stage (interleaved schedule)."),
    schedule: str = typer.Option("1f1b", "--schedule", help="gpipe, 1f1b or interleaved."),
    activations: str = typer.Option(None, "--activations", help="Activation bytes of one micro-batch on one stage."),
    json: bool = JSON_OPT,
):
    """Training pipeline: bubble fraction (P−1)/(v·M+P−1) and activation memory of micro-batches in flight."""
    from .. import units
    from ..analyses.lecture import pipeline as pl
    from ..explain import fmt
    from .common import print_json, table

    d = pl.training_pipeline_analysis(stages=stages, microbatches=microbatches, chunks=chunks, schedule=schedule,
                                      act_bytes_per_microbatch_stage=units.parse_bytes(activations, "activations")
                                      if activations else 0.0)
    if json:
        print_json(d.as_dict())
        return
    table(d.title, ["quantity", "formula", "value"], [[s.symbol, s.formula, fmt(s.value, s.unit)] for s in d.steps])


def scaleup_cmd(
    params: str = typer.Option("1T,2T,5T", "--params", help="Total parameters of the models."),
    systems: str = typer.Option("hgx-h100,gb200-nvl72,vr-nvl72,rubin-ultra-nvl576,tpu-v5p-pod,tpu-v7-pod",
                                "--systems", help="Comma-separated systems."),
    weights_dtype: str = typer.Option("fp8", "--weights-dtype", callback=dtype_check("weights_dtype"), help="Weight dtype."),
    batch: str = typer.Option("0", "--batch", help="Sequences whose KV must also fit (B)."),
    kv_per_seq: str = typer.Option("0", "--kv-per-seq", help="KV bytes per sequence at the context (e.g. 576MB)."),
    json: bool = JSON_OPT,
):
    """Why scale-up size matters: latency floor and fit in one domain for 1T/2T/5T models (R21, R22, R29)."""
    from .. import units
    from ..analyses.lecture import racks as ra
    from ..explain import fmt
    from ..specs.hardware import load_hardware
    from .common import print_json, table

    ps = [units.parse_count(p.strip(), "params") for p in params.split(",") if p.strip()]
    sys_ = [load_hardware(s.strip()) for s in systems.split(",") if s.strip()]
    b = _count(batch, "batch")
    g = ra.latency_floor_grid(ps, sys_, units.dtype_bytes(weights_dtype), units.parse_bytes(kv_per_seq, "kv_per_seq"),
                              b)
    if json:
        print_json({k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in g.items()})
        return
    from ..bounds import INT_OPTION_MAX

    most = INT_OPTION_MAX["--max-pp"]  # more pipeline stages than any layout search tries: does not fit

    def stages(n):
        return f" (PP≥{int(n)})" if n <= most else f" (not in {most:,} domains)"

    rows = []
    for i, s in enumerate(g["systems"]):
        room = (f"{human(g['max_params'][i] / 1e12)}T" if g["kv_fits"][i] else
                f"none (KV {fmt(g['kv_bytes'][i], 'B')} > HBM)")
        row = [s, f"{int(g['scaleup_size'][i])}", fmt(g["domain_bytes"][i], "B"), room]
        row += [fmt(g["t_floor_s"][i, j], "s") + ("" if g["fits"][i, j] else stages(g["domains_needed"][i, j]))
                for j in range(len(ps))]
        rows.append(row)
    full = [s for s, ok in zip(g["systems"], g["kv_fits"]) if not ok]
    note = (f"\nnothing fits one domain of {', '.join(full)}: the KV cache of B = {human(b)} "
            f"sequences alone ({fmt(g['kv_bytes'][0], 'B')}) is more than its HBM" if full else "")
    table(f"Weight-load latency floor on one domain ({weights_dtype} weights)",
          ["system", "scale-up", "HBM/domain", "max params"] + [f"{p / 1e12:g}T" for p in ps], rows,
          caption="floor = W / (S · HBM BW per chip) (01:15); (PP≥n): needs n domains to hold it" + note)


def moe2_cmd(
    hardware: str = HW_OPT,
    tokens_per_chip: str = typer.Option("32", "--tokens-per-gpu", help="Tokens each GPU dispatches per layer."),
    k: int = typer.Option(8, "--k", min=1, help="Activated experts per token."),
    d_model: int = typer.Option(7168, "--d-model", min=1, help="Model width."),
    act_dtype: str = typer.Option("bf16", "--act-dtype", callback=dtype_check("act_dtype"), help="Activation dtype on the wire."),
    json: bool = JSON_OPT,
):
    """One MoE layer across two racks: the all-to-all slowdown from the scale-out share (R17)."""
    from .. import units
    from ..analyses.lecture import racks as ra
    from ..specs.hardware import load_hardware
    from .common import print_derivation, print_json

    from ..errors import check_positive

    d = ra.two_rack_analysis(load_hardware(hardware),
                             tokens_per_chip=check_positive(_count(tokens_per_chip, "tokens_per_chip"),
                                                            "tokens_per_chip", "tokens per chip such as 32"),
                             k=k, d_model=d_model, act_bytes=units.dtype_bytes(act_dtype))
    if json:
        print_json(d.as_dict())
        return
    print_derivation(d)


def plot_pareto(
    model: str = MODEL_ARG,
    hardware: str = HW_OPT,
    chips: str = gpus_opt(..., "GPU budget."),
    context: str = CTX_OPT,
    batch: str = typer.Option(None, "--batch", "-b", help="Micro-batches to try."),
    max_pp: int = typer.Option(None, "--max-pp", min=1, help="Most pipeline stages."),
    weights_dtype: str = WDT_OPT,
    kv_dtype: str = KVDT_OPT,
    efficiency: str = EFF_OPT,
    ideal: bool = IDEAL_OPT,
    price: str = USD_OPT,
    overlap: str = OVERLAP_OPT,
    output: Path = output_opt(Path("pareto.png")),
    force: bool = FORCE_OPT,
    json: bool = JSON_OPT,
):
    """$ per million output tokens vs tokens/s per user: all layouts and the Pareto frontier.
    \f
    One parameter per option (typer reads the command's options from its signature)."""
    from ..errors import InputError
    from ..plotting.racks import pareto_figure
    from .common import check_output, efficiency_for, mode_dict, mode_label, print_json, wrote

    check_output(output, force, "output", (".png", ".svg", ".pdf"))
    eff = efficiency_for(hardware, efficiency, ideal, default="ideal")
    sr = _search(model, hardware, chips, context, batch, max_pp, weights_dtype, kv_dtype, eff, overlap, None,
                 0.0, 0, price=price)
    if not sr.fits.any():
        raise InputError("gpus", f"no layout of {sr.layouts.model.name} fits in memory on {chips} GPUs",
                         "more --gpus, a shorter --context or smaller --batch")
    p = pareto_figure(sr, output, title=f"{sr.layouts.model.name} on {chips} × {sr.layouts.hw.name} "
                                        f"({mode_label(eff)})")
    wrote(p)
    if json:
        print_json({"output": str(p)} | mode_dict(eff) | sr.as_dict())


def register(app: typer.Typer) -> None:
    from .plot import plot_app

    app.add_typer(racks_app, name="racks")
    app.command("layout")(layout_cmd)
    racks_app.command("memory")(memory_cmd)
    racks_app.command("pipeline")(pipeline_cmd)
    racks_app.command("bubble")(bubble_cmd)
    racks_app.command("scaleup")(scaleup_cmd)
    racks_app.command("moe-2racks")(moe2_cmd)
    plot_app.command("pareto")(plot_pareto)
