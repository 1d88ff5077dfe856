"""`rackmath batching …`: chapter one's analyses (lecture 00:00–00:32)."""

from __future__ import annotations

import typer

from ..units import human

from .common import EFF_OPT, EXPLAIN_OPT, IDEAL_OPT, JSON_OPT, KVDT_OPT, MODEL_ARG, USD_OPT, WDT_OPT, context_opt, \
    dtype_check, hardware_opt

batching_app = typer.Typer(help="Chapter one: how batch size sets latency and cost (lecture 00:00–00:32).",
                           no_args_is_help=True)

HW_OPT = hardware_opt("gb200-nvl72", "System or chip name.")
CTX_OPT = context_opt("8192", "Context length (tokens)")


def _weight_read_check(value):
    from ..engine.roofline import check_weight_read

    return check_weight_read(value) if value is not None else value


WR_OPT = typer.Option("hit", "--weight-read", callback=_weight_read_check, metavar="hit|all",
                      help="Weights read per step: hit = only the experts the batch routes to (real); "
                           "all = every weight every step (the lecture's premise).")
USABLE_OPT = typer.Option(None, "--usable-hbm", help="Share of HBM for weights + KV (default 0.9, vLLM's; "
                                                     "the lecture's premise is 1).")


def _eff(hardware, efficiency, ideal):
    from .common import efficiency_for

    return efficiency_for(hardware, efficiency, ideal, default="ideal")


def _count(text, field):
    from .. import units

    return units.parse_count(text, field)


def _out(d: dict, derivation, json: bool, explain: bool, rows: list[tuple[str, str]], title: str, eff=None):
    from .common import mode_dict, mode_label, print_derivation, print_json, table

    if eff is not None:
        d = mode_dict(eff) | d
        title = f"{title}\n{mode_label(eff)}"
    if json:
        if explain and derivation is not None:
            d = d | {"derivation": derivation.as_dict()}
        print_json(d)
    elif explain and derivation is not None:
        print_derivation(derivation)
    else:
        table(title, ["quantity", "value"], [list(r) for r in rows])


@batching_app.command("ratio")
def ratio_cmd(
    hardware: str = typer.Option(None, "--hardware", "-H", help="One chip/system (default: every chip)."),
    dtype: str = typer.Option(None, "--dtype", callback=dtype_check("dtype"), help="Weights dtype (default: bf16, fp8, fp4 where the chip has them)."),
    json: bool = JSON_OPT,
):
    """The hardware ratio (FLOP/s ÷ 2) ÷ (bytes/s ÷ bytes per param) per chip and dtype (00:15, R5), and drain time."""
    from ..explain import fmt
    from ..specs.hardware import chips, hardware_ratio, load_chip
    from .common import print_json, table

    cs = [load_chip(hardware)] if hardware else chips().values()
    recs = []
    for c in cs:
        dts = [dtype] if dtype else [d for d in ("bf16", "fp8", "fp4") if d in c.flops]
        for d in dts:
            recs.append({"chip": c.name, "dtype": d, "compute_dtype": c.gemm_dtype(d),
                         "ratio": hardware_ratio(c, d), "drain_time_s": c.drain_time_s})
    if json:
        print_json(recs)
        return
    table("Hardware ratio (dimensionless, lecture 00:15) and HBM drain time (00:25)",
          ["chip", "weights", "ratio", "drain time"],
          [[r["chip"], r["dtype"], f"{r['ratio']:.0f}", fmt(r["drain_time_s"], "s")] for r in recs])


@batching_app.command("balance")
def balance_cmd(
    model: str = MODEL_ARG,
    hardware: str = HW_OPT,
    context: str = typer.Option("0,8192,32K,128K", "--context", "-L",
                               help="Context lengths (list or range; 8K = 8,000, 8Ki = 8,192)."),
    weights_dtype: str = WDT_OPT,
    kv_dtype: str = KVDT_OPT,
    efficiency: str = EFF_OPT,
    ideal: bool = IDEAL_OPT,
    weight_read: str = WR_OPT,
    json: bool = JSON_OPT,
    explain: bool = EXPLAIN_OPT,
):
    """Balance batch B* = ratio × N_total/N_active (R6) and B* with the KV term, solved numerically (R7), and the
    most sequences memory holds at each context."""
    efficiency = _eff(hardware, efficiency, ideal)
    from ..analyses.lecture.batching import balance_batch, balance_batch_for
    from ..explain import Derivation
    from ..specs.hardware import hardware_ratio, load_hardware
    from ..specs.models import load_model
    from .common import parse_range

    m, hw = load_model(model), load_hardware(hardware)
    wdt = weights_dtype or m.native_dtype
    ratio = hardware_ratio(hw.chip, wdt)
    simple = float(balance_batch(ratio, m.total_params, m.active_params))
    ctx = parse_range(context, "context")
    full = balance_batch_for(m, hw, context=ctx, weights_dtype=weights_dtype, kv_dtype=kv_dtype,
                             efficiency=efficiency, weight_read=weight_read)
    from ..analyses.lecture.batching import memory_batch_limit

    bmem = memory_batch_limit(m, hw, context=ctx, weights_dtype=weights_dtype, kv_dtype=kv_dtype)
    d = Derivation(f"Balance batch for {m.name} on {hw.name} (weight read: {weight_read})")
    d.add("ratio", "(FLOP/s ÷ 2) / (BW ÷ bytes per param)", f"{hw.chip.name}, {wdt}", ratio, "")
    d.add("B*", "ratio × N_total / N_active", f"{human(ratio)} × {human(m.total_params)} / {human(m.active_params)}", simple, "")
    for L, b in zip(ctx, full):
        d.add(f"B*(L={L:g})", "smallest B with t_compute ≥ t_weights + t_kv (full roofline)", "", b, "")
    for L, bm in zip(ctx, bmem):
        d.add(f"B_mem(L={L:g})", "(0.9 · HBM − W) / KV(L): most sequences that fit", "", float(bm), "")
    rec = {"model": m.name, "hardware": hw.name, "weight_read": weight_read, "ratio": ratio,
           "balance_batch_lecture": simple, "context": ctx.tolist(), "balance_batch": full.tolist(),
           "memory_batch_limit": bmem.tolist(), "fits": (full <= bmem).tolist()}
    rows = [("hardware ratio", f"{human(ratio)}"), ("B* = ratio × N_total/N_active", f"{human(simple)}")]
    rows += [(f"B* with KV at context {L:g} (memory holds {human(bm)})",
              (f"{human(b)}" + ("" if b <= bm else " — does NOT fit in memory")) if b != float("inf")
              else "∞ (the KV fetch outruns compute at any batch)")
             for L, b, bm in zip(ctx, full, bmem)]
    _out(rec, d, json, explain, rows, f"Balance batch: {m.name} on {hw.name}", eff=efficiency)


@batching_app.command("floor")
def floor_cmd(
    model: str = MODEL_ARG,
    hardware: str = HW_OPT,
    context: str = CTX_OPT,
    weights_dtype: str = WDT_OPT,
    kv_dtype: str = KVDT_OPT,
    weight_read: str = WR_OPT,
    usable_hbm: float = USABLE_OPT,
    json: bool = JSON_OPT,
    explain: bool = EXPLAIN_OPT,
):
    """Latency floor (one-token step's weight fetch, R29), HBM drain time (R10), and the memory-bounded
    operating step with its train schedule (R9). The floor equals `roofline -b 1 -L 0`'s step under the same
    --weight-read."""
    from ..analyses.lecture.batching import (USABLE_HBM, drain_time, latency_floor_for, operating_point,
                                     train_schedule)
    from ..errors import check_positive
    from ..explain import Derivation, fmt
    from ..specs.hardware import load_hardware
    from ..specs.models import load_model

    usable = USABLE_HBM if usable_hbm is None else usable_hbm
    check_positive(usable, "usable_hbm", maximum=1.0)
    m, hw = load_model(model), load_hardware(hardware)
    floor, w, _ = latency_floor_for(m, hw, weights_dtype=weights_dtype, weight_read=weight_read)
    d = Derivation(f"Latency floor: {m.name} on {hw.name} (weight read: {weight_read})")
    d.add("W_read", "weights one token reads" + (" (all of them: the lecture)" if weight_read == "all" else
                                                 " (dense + k routed experts per MoE layer)"), "", w, "B")
    d.add("t_floor", "W_read / (scale-up size × BW per chip)",
          f"{fmt(w, 'B')} / ({hw.scaleup_size} × {fmt(hw.chip.hbm_bw, 'B/s')})", floor, "s",
          "= roofline -b 1 -L 0 (compute at B = 1 is negligible)")
    drain = d.add("t_drain", "HBM capacity / HBM bandwidth", f"{fmt(hw.chip.hbm_bytes, 'B')} / "
                  f"{fmt(hw.chip.hbm_bw, 'B/s')}", float(drain_time(hw.chip.hbm_bytes, hw.chip.hbm_bw)), "s")
    from ..errors import InputError

    rec = {"model": m.name, "hardware": hw.name, "weight_read": weight_read, "weight_bytes_read": w,
           "latency_floor_s": floor, "drain_time_s": drain}
    rows = [("weights read at B = 1", fmt(w, "B")), ("latency floor", fmt(floor, "s")),
            ("HBM drain time", fmt(drain, "s"))]
    try:
        op = operating_point(m, hw, context=_count(context, "context"), weights_dtype=weights_dtype,
                             kv_dtype=kv_dtype, weight_read=weight_read, usable=usable)
    except InputError as e:  # the weights (plus one sequence) do not fit: no operating point on this system
        rec.update(operating_batch=None, operating_step_s=None, operating_limited_by=f"does not fit: {e}")
        rows.append(("operating point", "none: weights + one sequence exceed usable HBM (pipeline or more chips)"))
    else:
        d.steps.extend(op.derivation.steps)
        worst, mean = (float(x) for x in train_schedule(op.step_s))
        d.add("worst latency", "2 × t_step (wait for the next train, then ride it)", f"2 × {fmt(op.step_s, 's')}",
              worst, "s")
        d.add("mean latency", "1.5 × t_step", f"1.5 × {fmt(op.step_s, 's')}", mean, "s")
        rec.update(operating_batch=op.batch, operating_step_s=op.step_s, operating_limited_by=op.limited_by,
                   worst_latency_s=worst, mean_latency_s=mean)
        rows += [(f"operating batch at {op.context:g} context", f"{op.batch:,.0f} ({op.limited_by})"),
                 ("operating step", fmt(op.step_s, "s")),
                 ("train schedule: worst / mean", f"{fmt(worst, 's')} / {fmt(mean, 's')}")]
    _out(rec, d, json, explain, rows, f"Latency floor: {m.name} on {hw.name} (weight read: {weight_read})")


@batching_app.command("penalty")
def penalty_cmd(
    model: str = MODEL_ARG,
    hardware: str = HW_OPT,
    context: str = CTX_OPT,
    weights_dtype: str = WDT_OPT,
    kv_dtype: str = KVDT_OPT,
    efficiency: str = EFF_OPT,
    ideal: bool = IDEAL_OPT,
    price: str = USD_OPT,
    weight_read: str = WR_OPT,
    json: bool = JSON_OPT,
):
    """The cost penalty of not batching: cost per token at B = 1 over the cheapest batch that fits in memory
    (R2: "a thousand times worse")."""
    efficiency = _eff(hardware, efficiency, ideal)
    from .common import priced

    hardware = priced(hardware, price)
    from ..analyses.lecture.batching import unbatched_penalty

    pen, best_b, c1, cb = unbatched_penalty(model, hardware, context=_count(context, "context"),
                                            weights_dtype=weights_dtype, kv_dtype=kv_dtype, efficiency=efficiency,
                                            weight_read=weight_read)
    rec = {"penalty": pen, "best_batch": best_b, "usd_per_mtok_batch1": c1, "usd_per_mtok_best": cb,
           "weight_read": weight_read}
    from .common import human

    _out(rec, None, json, False, [("cost at B=1", human(c1, "$/Mtok")), ("cheapest batch that fits in memory", human(best_b)),
                                  ("cost there", human(cb, "$/Mtok")), ("penalty", human(pen, "x"))],
         "Cost of not batching", eff=efficiency)


def fast_mode_rows(ans, sens) -> tuple[list, list]:
    """The fast-mode answer's table rows and the table of the same question under other assumptions (shared
    by `batching fast-mode` and `price … -m`, so both print one answer the same way)."""
    rows = []
    if ans.speedup is not None:
        rows.append((f"{ans.speedup:g}× speed costs", f"{human(ans.by_speed.cost_multiple, 'x')} per token at batch "
                     f"{human(ans.by_speed.batch)}" if ans.by_speed else
                     f"out of reach by batching (best {human(ans.max_speedup, 'x')}, at batch 1)"))
    if ans.price is not None:
        rows.append((f"{ans.price:g}× price buys", f"{human(ans.by_price.speedup, 'x')} speed at batch "
                     f"{human(ans.by_price.batch)}"))
    rows.append(("assumption (the answer depends on it)", ans.assumption))
    if ans.speedup is not None and ans.price is not None and ans.price > 1:
        from ..analyses.lecture.batching import sheet_weights_share

        rows.append((f"{ans.price:g}× for {ans.speedup:g}× by batching needs",
                     f"weights {float(sheet_weights_share(ans.price, ans.speedup)):.0%} of a memory-bound step's "
                     "reads, no compute headroom: (1 − w)/(1 − w·s) = p"))
    other = []
    for a in sens:
        c, w, k = a.shares
        other.append([a.label, human(a.operating.batch), "0 (B*=∞)" if a.headroom == 0 else human(a.headroom, "x"),
                      f"{w:.0%}",
                      *([human(a.by_speed.cost_multiple, "x") if a.by_speed else "out of reach"]
                        if ans.speedup is not None else []),
                      *([human(a.by_price.speedup, "x")] if ans.price is not None else [])])
    return rows, other


@batching_app.command("fast-mode")
def fast_mode_cmd(
    model: str = MODEL_ARG,
    hardware: str = HW_OPT,
    speedup: float = typer.Option(None, "--speedup", help="Speed multiple wanted (e.g. 2.5)."),
    price: float = typer.Option(None, "--price", help="Price multiple paid (e.g. 6)."),
    context: str = CTX_OPT,
    operating_multiple: float = typer.Option(2.5, "--operating-multiple",
                                             help="Operate at this multiple of B*, capped by memory (lecture 00:16: "
                                                  "'double or triple it'); 1 = the cost floor B*."),
    operating_batch: str = typer.Option(None, "--operating-batch",
                                        help="Operate at this batch with the context that fills HBM instead (the "
                                             "lecture's premise: 2400, with --weight-read all --usable-hbm 1)."),
    weights_dtype: str = WDT_OPT,
    kv_dtype: str = KVDT_OPT,
    efficiency: str = EFF_OPT,
    ideal: bool = IDEAL_OPT,
    weight_read: str = WR_OPT,
    usable_hbm: float = USABLE_OPT,
    json: bool = JSON_OPT,
    explain: bool = EXPLAIN_OPT,
):
    """Fast mode by batching alone (R1): the cost multiple of a speed-up and the speed a price multiple buys, with
    the operating point that decides it and the same question under other assumptions. The same function answers
    `price SHEET -m MODEL` and `lecture`'s R1.
    \f
    One parameter per option (typer reads the command's options from its signature)."""
    efficiency = _eff(hardware, efficiency, ideal)
    from ..analyses.lecture.batching import USABLE_HBM, fast_mode, fast_mode_sensitivity, slow_mode_floor
    from ..errors import InputError, check_positive

    if speedup is None and price is None:
        raise InputError("--speedup/--price", "give one or both", "--speedup 2.5, --price 6, or both")
    check_positive(operating_multiple, "operating_multiple", maximum=1e3)
    usable = USABLE_HBM if usable_hbm is None else usable_hbm
    check_positive(usable, "usable_hbm", maximum=1.0)
    if speedup is not None:
        check_positive(speedup, "speedup", maximum=1e4)
    if price is not None:
        check_positive(price, "price", maximum=1e6)
    ctx = _count(context, "context")
    ob = _count(operating_batch, "operating_batch") if operating_batch is not None else None
    if ob is not None:
        check_positive(ob, "operating_batch", maximum=1e8)
    kw = dict(context=ctx, weights_dtype=weights_dtype, kv_dtype=kv_dtype, efficiency=efficiency,
              weight_read=weight_read, usable=usable)
    ans = fast_mode(model, hardware, speedup=speedup, price=price, operating_multiple=operating_multiple,
                    operating_batch=ob, **kw)
    if speedup is not None and ans.by_speed is None:  # out of reach: a one-line error, as fast_mode_from_speedup
        raise InputError("speedup", f"{speedup:g}× is out of reach by batching alone on {model} (the roofline's best "
                                    f"is {ans.max_speedup:.3g}×, at batch 1)", f"a speed-up up to {ans.max_speedup:.3g}")
    sens = fast_mode_sensitivity(model, hardware, speedup=speedup, price=price, **kw)
    floor = slow_mode_floor(model, hardware, operating_multiple=operating_multiple, **kw)
    rows, other = fast_mode_rows(ans, sens)
    rec = ans.as_dict() | {"slow_mode_cost_floor": floor, "sensitivity": [a.as_dict() for a in sens]}
    rows.append(("slow-mode cost floor (largest batch that fits)", f"{human(floor, 'x')} the operating cost"))
    der = ans.by_speed.derivation if ans.by_speed else ans.by_price.derivation if ans.by_price else None
    if json or explain:
        _out(rec, der, json, explain, rows, "", eff=efficiency)
        return
    _out(rec, der, json, explain, rows, f"Fast mode by batching alone: {model} on {hardware}", eff=efficiency)
    from .common import table

    table("The same question under other assumptions", ["operating point", "batch", "B_op/B*", "weights share",
                                                          *([f"{speedup:g}× speed costs"] if speedup else []),
                                                          *([f"{price:g}× price buys"] if price else [])], other,
          caption="only the weight fetch is amortized by batching (compute and KV are per sequence): speed is "
                  "cheap where compute has headroom above B* or KV dominates the step")


@batching_app.command("throughput")
def throughput_cmd(
    model: str = MODEL_ARG,
    hardware: str = HW_OPT,
    context: str = CTX_OPT,
    global_rate: str = typer.Option("500M", "--global-rate", help="A global token rate (tokens/s) to serve."),
    weights_dtype: str = WDT_OPT,
    kv_dtype: str = KVDT_OPT,
    efficiency: str = EFF_OPT,
    ideal: bool = IDEAL_OPT,
    weight_read: str = WR_OPT,
    usable_hbm: float = USABLE_OPT,
    json: bool = JSON_OPT,
    explain: bool = EXPLAIN_OPT,
):
    """System throughput at the memory-bounded operating point, B_op/t_step (R12), and systems needed for a
    global rate (R13)."""
    efficiency = _eff(hardware, efficiency, ideal)
    from ..analyses.lecture.batching import USABLE_HBM, operating_point, system_throughput, systems_needed
    from ..errors import check_positive
    from ..explain import fmt

    ctx = _count(context, "context")
    rate = _count(global_rate, "global_rate")
    usable = USABLE_HBM if usable_hbm is None else usable_hbm
    check_positive(usable, "usable_hbm", maximum=1.0)
    op = operating_point(model, hardware, context=ctx, weights_dtype=weights_dtype, kv_dtype=kv_dtype,
                         efficiency=efficiency, weight_read=weight_read, usable=usable)
    b, step, d = op.batch, op.step_s, op.derivation
    tput = d.add("throughput", "B_op / t_step", f"{human(b)} / {fmt(step, 's')}", float(system_throughput(b, step)),
                 "tok/s")
    n = d.add("systems", "global rate / throughput", f"{fmt(rate, 'tok/s')} / {fmt(tput, 'tok/s')}",
              float(systems_needed(rate, tput)), "")
    rec = {"operating_batch": b, "limited_by": op.limited_by, "balance_batch": op.balance_batch,
           "memory_batch_limit": op.memory_limit, "step_s": step, "tokens_per_s": tput, "global_rate": rate,
           "systems_needed": n, "weight_read": weight_read}
    _out(rec, d, json, explain, [("operating batch", f"{human(b)} ({op.limited_by})"), ("step", fmt(step, "s")),
                                 ("tokens/s", fmt(tput, "tok/s")), (f"systems for {fmt(rate, 'tok/s')}", f"{human(n)}")],
         "Throughput at the memory-bounded operating point", eff=efficiency)


@batching_app.command("prefill")
def prefill_cmd(
    model: str = MODEL_ARG,
    hardware: str = HW_OPT,
    batch: str = typer.Option("64", "--batch", "-b"),
    context: str = CTX_OPT,
    pass_len: str = typer.Option("1,16,128,1024,8192", "--pass-len", help="Pass lengths (list or range)."),
    weights_dtype: str = WDT_OPT,
    kv_dtype: str = KVDT_OPT,
    efficiency: str = EFF_OPT,
    ideal: bool = IDEAL_OPT,
    price: str = USD_OPT,
    weight_read: str = WR_OPT,
    json: bool = JSON_OPT,
):
    """Cost per token of prefill vs decode as the pass length grows (R38: the output/input price ratio)."""
    efficiency = _eff(hardware, efficiency, ideal)
    from .common import priced

    hardware = priced(hardware, price)
    from ..analyses.lecture.batching import prefill_decode_costs
    from .common import parse_range, print_json, table

    p = parse_range(pass_len, "pass_len")
    r = prefill_decode_costs(model, hardware, p, batch=_count(batch, "batch"), context=_count(context, "context"),
                             weights_dtype=weights_dtype, kv_dtype=kv_dtype, efficiency=efficiency,
                             weight_read=weight_read)
    cost = r.usd_per_mtok
    decode = cost[0] if p[0] == 1 else None
    recs = [{"pass_len": float(x), "usd_per_mtok": float(c), "bound": str(b),
             "decode_over_this": (float(decode / c) if decode else None)}
            for x, c, b in zip(p, cost, r.bound)]
    from .common import human, mode_dict, mode_label

    if json:
        print_json(mode_dict(efficiency) | {"usd_per_gpu_hour": r.usd_per_chip_hour, "rows": recs})
        return
    table(f"Cost per token vs pass length: {r.model.name} on {r.hardware.name}\n{mode_label(efficiency)}",
          ["pass length", "$/Mtok", "bound", "decode ÷ this"],
          [[human(x['pass_len']), human(x['usd_per_mtok'], "$"), x["bound"],
            human(x['decode_over_this'], "x") if x["decode_over_this"] else "–"] for x in recs],
          caption=f"$ at {human(r.usd_per_chip_hour, '$')}/GPU-hour")


def register(app: typer.Typer) -> None:
    app.add_typer(batching_app, name="batching")
