"""`rackmath plan`: the cheapest deployment meeting SLOs on each chip, and its launch command (issue 12)."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import (CDT_OPT, EFF_OPT, EXPLAIN_OPT, IDEAL_OPT, JSON_OPT, KVDT_OPT, POWER_CAP_OPT, PUE_OPT,
                     USD_PER_KWH_OPT, WDT_OPT)


def _ms(v):
    from ..units import format_duration

    return "—" if v is None or v != v else format_duration(v)


def _pct(v):
    return "—" if v is None else f"{v:+.1%}"


def _choices(r) -> list[str]:
    """One line per chip on why aggregated or disaggregated won: GPUs, $/hour and mean TTFT of both (issue 35)."""
    out = []
    for row in r.rows:
        opts, d = row.get("options") or {}, row.get("deployment")
        if not d:
            continue
        other = opts.get("disaggregated" if d["mode"] == "aggregated" else "aggregated")
        if other is None:
            if r.workload.get("modes", 2) and len(opts) == 1:
                out.append(f"{row['chip']}: {d['mode']} — the only mode searched or meeting the SLOs")
            continue
        dg, dc = d["gpus"] - other["gpus"], d["usd_per_hour"] - other["usd_per_hour"]
        them = f"{other['mode']} ({other['gpus']} GPUs, ${other['usd_per_hour']:,.4g}/h)"
        why = (f"{abs(dg)} fewer GPU{'s' * (dg != -1)} (${abs(dc):,.4g}/h less) than {them}" if dc < 0 else
               f"the same cost as {them}, " + ("without a KV hand-off" if d["mode"] == "aggregated" else
                                               "at a lower TPOT"))
        out.append(f"{row['chip']}: {d['mode']} — {why}; mean TTFT {_ms(d['ttft_s'])} against "
                   f"{_ms(other['ttft_s'])}")
    return out


def _modes(mode: str) -> tuple:
    """--mode: aggregated, disaggregated or both."""
    from ..errors import InputError

    modes = {"both": ("aggregated", "disaggregated"), "aggregated": ("aggregated",),
             "disaggregated": ("disaggregated",)}.get(mode)
    if modes is None:
        raise InputError("mode", f"{mode!r}", "aggregated, disaggregated or both")
    return modes


def _print_derivations(r) -> None:
    """plan --explain: each chip's aggregated deployment derived as serve --explain does."""
    from .common import print_derivation

    for chip, der in r.derivations.items():
        typer.echo(f"\n{chip}: the aggregated deployment, one replica at the concurrency the plan priced")
        print_derivation(der)


def _launch(r, emit, kv_dtype, mtp: int):
    """--emit: the launch command of the cheapest deployment (None without --emit or a deployment)."""
    from ..analyses.serving.launch import emit as emit_fn

    launch = None
    best = r.best
    if emit is not None and best is not None:
        d = best["deployment"]
        dep = dict(d, model=r.model, kv_dtype=kv_dtype or "bf16", mtp=mtp, recv_interval=r.workload["recv_interval"])
        launch = emit_fn(emit, dep)
        launch["chip"] = best["chip"]
    return launch


def _plot(r, plot) -> None:
    """--plot: each chip's Pareto front ($/Mtok vs tok/s/user), its aggregated deployment marked."""
    from ..plotting.sizing import plot_pareto

    marks = {row["chip"]: (row["deployment"]["tokens_per_s_per_user"], row["deployment"]["usd_per_mtok"])
             for row in r.rows if row.get("deployment") and row["deployment"]["mode"] == "aggregated"}
    p = plot_pareto(r.pareto, plot, title=f"{r.model}: $/Mtok vs tok/s/user (ISL {r.workload['isl']:g}, "
                                          f"OSL {r.workload['osl']:g})", marks=marks,
                    target=None if r.slo["tpot_s"] is None else 1.0 / r.slo["tpot_s"])
    typer.echo(f"wrote {p}", err=True)


def _deployment_row(row) -> list:
    """One chip's table row: its cheapest deployment (or why it has none), cost, energy, TTFT, TPOT, simulation."""
    from .common import human

    d = row.get("deployment")
    if not d:
        return [row["chip"], "—", row.get("why", ""), "", "", "", "", "", ""]
    if d["mode"] == "disaggregated":
        shape = (f"disagg P {d['prefill_replicas']}×{d['prefill_layout']['label']} + D {d['replicas']}×"
                 f"{d['layout']['label']} (P:D {d['pd_ratio']} GPUs)")
    else:
        shape = f"aggregated {d['replicas']}×{d['layout']['label']}"
    shape += f", {d['concurrency_per_replica']:.0f} seqs/replica"
    sim = d.get("simulated")
    tail = "" if not sim else (f"{_ms(sim['ttft_p50_s'])} / {_ms(sim['ttft_p99_s'])} / "
                               f"{_ms(sim['tpot_p99_s'])}, {sim['slo_attainment']:.0%} ok")
    en = d["energy"]
    return [row["chip"], str(d["gpus"]), shape, f"${d['usd_per_hour']:,.4g}", f"${d['usd_per_mtok']:.3g}",
            "—" if en is None else f"{human(en['j_per_token'], 'J')} ({human(en['elec_share'], '%')})",
            f"{_ms(d['ttft_s'])} ({_pct(d['margin']['ttft'])})",
            f"{_ms(d['tpot_s'])} ({_pct(d['margin']['tpot'])})", tail]


def _print_table(r, pue, usd_per_kwh, power_cap) -> None:
    """The plan table, cheapest first, with why each mode won and what the columns mean."""
    from .common import human, parse_power, parse_pue, parse_usd_per_kwh, table

    rows = [_deployment_row(row) for row in r.rows]
    effs = {row["chip"]: row["header"] for row in r.rows}  # the label of the efficiency its step table ran
    w = r.workload
    traffic = f"{w['rate']:g} req/s" if w["rate"] is not None else f"{w['users']:g} users"
    slo = ", ".join(x for x in (f"TTFT ≤ {_ms(r.slo['ttft_s'])}" + (" (default objective: MLPerf's server "
                                                                    "TTFT; set --ttft)" if r.slo.get("ttft_default")
                                                                    else "") if r.slo["ttft_s"] else "",
                                f"TPOT ≤ {_ms(r.slo['tpot_s'])}" if r.slo["tpot_s"] else "") if x) or "no SLO"
    eff = "; ".join(f"{k}: {v}" for k, v in effs.items())
    table(f"plan {r.model}: {traffic}, ISL {w['isl']:g} / OSL {w['osl']:g}, {slo} — cheapest first",
          ["chip", "GPUs", "deployment", "$/hour", "$/Mtok", "J/tok (elec)", "mean TTFT (margin)",
           "TPOT (margin)", "simulated TTFT p50 / p99 / TPOT p99"], rows,
          caption="\n".join(_choices(r)) + ("\n" if _choices(r) else "")
                  + f"{eff}. mean TTFT and TPOT: the planning model's means at the offered load (queueing: half "
                    f"a step" + (f", (N − 1)/2 decode steps of the scheduler's receive interval N = "
                                 f"{w['recv_interval']}" if w.get("recv_interval", 1) > 1 else "")
                  + f" and the closed loop's wait for the prefill budget, or the prefill pool's M/D/1 wait at "
                    f"its design load, + the prefill + KV hand-off); margin = (SLO − "
                    f"mean) / SLO; simulated: the same deployment replayed request by request (discrete-event), "
                    f"its percentiles — a hot prefill pool's analytic mean can exceed the simulated p99. "
                  f"J/tok: energy per output token at the meter, every GPU of the deployment (board + host, "
                  f"PUE {parse_pue(pue):g}); elec = electricity's share of $/Mtok at "
                  f"${parse_usd_per_kwh(usd_per_kwh):g}/kWh"
                  + ("" if power_cap is None else f"; GPUs power-capped at {human(parse_power(power_cap), 'W')}"
                                                  " (compute peaks scaled)"))


def plan_cmd(
    model: str = typer.Argument(..., help="Model name or HuggingFace config.json path."),
    rate: str = typer.Option(None, "--rate", help="Requests per second to serve."),
    users: str = typer.Option(None, "--users", help="Concurrent users (each with one request in flight)."),
    isl: str = typer.Option(..., "--isl", help="Input tokens per request."),
    osl: str = typer.Option(..., "--osl", help="Output tokens per request."),
    ttft: str = typer.Option(None, "--ttft", help="TTFT SLO (e.g. 1s, 500ms)."),
    tpot: str = typer.Option(None, "--tpot", help="TPOT SLO (e.g. 20ms)."),
    tok_s_user: str = typer.Option(None, "--tok-s-user", help="Interactivity SLO: tokens/s per user (= 1/TPOT)."),
    hardware: str = typer.Option("h100,h200,b200,mi355x", "--hardware", "-H", help="Comma list of chips/systems."),
    price: str = typer.Option(None, "--usd-per-gpu-hour", "--price",
                              help="$/GPU-hour: one number, or per chip 'h100=2.1,b200=4'."),
    mode: str = typer.Option("both", "--mode", help="aggregated, disaggregated or both."),
    framework: str = typer.Option(None, "--framework", help="trtllm, vllm or sglang: scheduler defaults."),
    recv_interval: str = typer.Option(None, "--recv-interval", help="SGLang --scheduler-recv-interval N: new "
                                      "requests are received every N decode steps (default 1); no attention-DP "
                                      "layouts then. SGLang stacks only."),
    emit: str = typer.Option(None, "--emit", help="Print the launch command of the cheapest deployment: "
                                                 "vllm, sglang or trtllm."),
    budget: str = typer.Option(None, "--budget", help="Token budget per step (default: the framework's, 8192)."),
    weights_dtype: str = WDT_OPT,
    compute_dtype: str = CDT_OPT,
    kv_dtype: str = KVDT_OPT,
    mtp: str = typer.Option("0", "--mtp", help="Speculative / MTP draft tokens per step (k)."),
    acceptance: str = typer.Option(None, "--acceptance", help="Mean tokens emitted per verification step."),
    efficiency: str = EFF_OPT,
    ideal: bool = IDEAL_OPT,
    no_confirm: bool = typer.Option(False, "--no-confirm", help="Skip replaying the winners in the simulator."),
    plot: Path = typer.Option(None, "--plot", help="Write the Pareto fronts ($/Mtok vs tok/s/user) to this figure."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing --plot file."),
    pue: str = PUE_OPT,
    usd_per_kwh: str = USD_PER_KWH_OPT,
    power_cap: str = POWER_CAP_OPT,
    json: bool = JSON_OPT,
    explain: bool = EXPLAIN_OPT,
):
    """Cheapest deployment per chip meeting TTFT/TPOT SLOs: GPUs, P:D, layouts, $/hour, $/Mtok, energy, margins.
    --explain derives each chip's aggregated deployment as serve --explain does (the same steady state).
    \f
    One parameter per option (typer reads the command's options from its signature). Longer than 80 lines: its signature is the option list."""
    from .. import units
    from ..analyses.serving.launch import check_framework, render
    from ..analyses.serving.plan import plan
    from .common import check_output, parse_power, parse_pue, parse_usd_per_kwh, print_json

    if ideal:  # --ideal with --efficiency X is an error, as on every command (common.efficiency_for)
        from .common import efficiency_for

        efficiency_for(None, efficiency, True)
    if plot is not None:
        check_output(plot, force, "plot", (".png", ".svg", ".pdf"))
    if emit is not None:
        check_framework(emit)
    modes = _modes(mode)
    num = lambda t, f: None if t is None else units.parse_count(t, f)  # noqa: E731
    dur = lambda t, f: None if t is None else units.parse_duration(t, f, unit_required=True)  # noqa: E731
    r = plan(model, hardware, rate=num(rate, "rate"), users=num(users, "users"), isl=num(isl, "isl"),
             osl=num(osl, "osl"), ttft=dur(ttft, "ttft"), tpot=dur(tpot, "tpot"),
             tok_s_user=num(tok_s_user, "tok_s_user"), usd_per_gpu_hour=price, weights_dtype=weights_dtype,
             kv_dtype=kv_dtype, mtp=int(num(mtp, "mtp") or 0), acceptance=num(acceptance, "acceptance"),
             efficiency=efficiency, ideal=ideal, framework=framework, modes=modes,
             budget=None if budget is None else int(num(budget, "budget")), confirm=not no_confirm,
             pue=parse_pue(pue), usd_per_kwh=parse_usd_per_kwh(usd_per_kwh), power_cap_w=parse_power(power_cap),
             compute_dtype=compute_dtype, explain=explain, recv_interval=num(recv_interval, "recv_interval"))
    from .common import dtype_rate_warning

    for row in r.rows:  # one line per chip that runs the weight GEMMs at a wider dtype's rate
        dtype_rate_warning(row["hardware"], weights_dtype, compute_dtype)
    launch = _launch(r, emit, kv_dtype, int(num(mtp, "mtp") or 0))
    if plot is not None:
        _plot(r, plot)
    if json:
        d = r.as_dict()
        if launch is not None:
            d["launch"] = launch
        if explain:
            d["derivations"] = {chip: der.as_dict() for chip, der in r.derivations.items()}
        print_json(d)
        return
    _print_table(r, pue, usd_per_kwh, power_cap)
    if explain:
        _print_derivations(r)
    if launch is not None:
        typer.echo(render(launch), nl=False)


def register(app: typer.Typer) -> None:
    app.command("plan")(plan_cmd)
