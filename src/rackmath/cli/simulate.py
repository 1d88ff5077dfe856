"""`rackmath simulate`: a discrete-event simulation of one deployment under traffic (issue 12)."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import typer

from ..bounds import MAX_REQUESTS
from .common import CDT_OPT, EFF_OPT, IDEAL_OPT, JSON_OPT, KVDT_OPT, WDT_OPT


def _num(text, field, integer=False, kind="count"):
    from .. import units
    from ..errors import InputError

    if text is None:
        return None
    v = units.parse_quantity(text, kind, field)
    if integer and int(v) != v:
        raise InputError(field, f"{text!r} is not a whole number", "a whole number")
    return int(v) if integer else v


def _price(text, hardware):
    """'2.1' or '$2.1/h', or the multi-chip form 'h100=2.1,b200=4' (the entry for this chip is used)."""
    from .. import units

    if text is None:
        return None
    if "=" not in str(text):
        return units.parse_usd_per_hour(text, "usd_per_gpu_hour")
    from ..analyses.serving.plan import parse_prices
    from ..errors import InputError
    from ..specs.hardware import load_hardware

    prices = parse_prices(text)
    system = load_hardware(hardware)
    for k in (system.chip.name.lower(), system.name.lower(), "*"):
        if k in prices:
            return prices[k]
    raise InputError("usd_per_gpu_hour", f"no price for {system.chip.name} in {text!r}",
                     f"{system.chip.name}=PRICE or one number")


def _ms(v):
    from ..units import format_duration

    return "—" if v is None or v != v else format_duration(v)


def _read_trace(trace: str | None):
    """``--trace``: 'example' (shipped), or a CSV/JSONL file read as UTF-8 text (at most MAX_TRACE_BYTES), parsed."""
    from ..analyses.serving.traffic import example_trace_text, parse_trace
    from ..bounds import MAX_TRACE_BYTES
    from ..errors import InputError

    if trace is None:
        return None
    if trace == "example":
        return parse_trace(example_trace_text(), "trace")
    p = Path(trace)
    if not p.is_file():
        raise InputError("trace", f"{trace} is not a file", "a CSV or JSONL trace file, or 'example'")
    if p.stat().st_size > MAX_TRACE_BYTES:
        raise InputError("trace", f"{trace} is larger than {MAX_TRACE_BYTES / 1e6:,.0f} MB",
                         f"a trace of at most {MAX_TRACE_BYTES / 1e6:,.0f} MB")
    try:
        text = p.read_text(encoding="utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise InputError(f"trace {p.name}", f"not UTF-8 text (byte {exc.start})",
                         "a CSV or JSONL trace in UTF-8") from None
    return parse_trace(text, f"trace {p.name}")


@contextmanager
def _progress_bar(total: int, show: bool):
    """A progress bar on stderr for runs of ≥ 10⁵ requests on a terminal; yields the callback (or None)."""
    import sys

    if not (show and total >= 100_000 and sys.stderr.isatty()):
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("simulating"), BarColumn(), TextColumn("{task.completed:,}/{task.total:,} requests"),
                   TimeElapsedColumn(), console=Console(stderr=True), transient=True)
    task = bar.add_task("sim", total=total)
    bar.start()
    try:
        yield lambda k: bar.update(task, completed=min(k, total))
    finally:
        bar.stop()


def _rows(r) -> list:
    """The table's rows: deployment, scheduler, latencies, throughput, utilization, cost, goodput, preemptions."""
    from .. import units

    s, c = r.summary, r.config
    lay = c["layout"]["label"]
    dep = (f"{c['prefill_gpus']} prefill ({c['prefill_replicas']} × {c['prefill_layout']['label']}) + "
           f"{c['decode_gpus']} decode ({c['replicas']} × {lay})") if c["mode"] == "disaggregated" else \
        f"{c['replicas']} × {lay}"
    rows = [["deployment", dep],
            ["scheduler", f"max {c['max_batch']} running / replica, {c['budget']:,} tokens per step, KV "
                          f"{units.format_si(c['kv_tokens_per_replica'])} tokens / replica"
                          + (f", train every {c['cadence_s'] * 1e3:g} ms" if c["cadence_s"] else "")],
            ["requests", f"{s['counted']:,} counted of {s['completed']:,} completed"
                         + (f", {s['rejected']} refused" if s["rejected"] else "")],
            ["TTFT p50 / p90 / p99", " / ".join(_ms(s["ttft_s"][k]) for k in ("p50", "p90", "p99"))],
            ["TPOT p50 / p90 / p99", " / ".join(_ms(s["tpot_s"][k]) for k in ("p50", "p90", "p99"))],
            ["E2E p50 / p90 / p99", " / ".join(_ms(s["e2e_s"][k]) for k in ("p50", "p90", "p99"))],
            ["queue wait p50 / p99", " / ".join(_ms(s["queue_wait_s"][k]) for k in ("p50", "p99"))],
            ["throughput", f"{s['request_rate']:.4g} req/s, {units.format_si(s['output_tok_s'])} output tok/s "
                           f"({s['output_tok_s_per_gpu']:.4g} per GPU)"],
            ["tokens/s per user", f"{s['tokens_per_s_per_user']:.4g}"],
            ["GPU utilization", f"{s['utilization']:.1%} of the time a step is running; on average "
                                f"{s['running_per_replica']:.4g} of {c['max_batch']:,} sequence slots per replica "
                                f"used ({s['batch_occupancy']:.0%})"],
            ["cost", f"${s['usd_per_hour']:.4g}/h, ${s['usd_per_mtok_output']:.4g}/Mtok output at "
                     f"${s['usd_per_gpu_hour']:g}/GPU-h"]]
    if s["ttft_slo_s"] is not None or s["tpot_slo_s"] is not None:
        rows.append(["goodput", f"{s['goodput_req_s']:.4g} req/s ({s['slo_attainment']:.1%} of requests meet "
                                f"TTFT ≤ {_ms(s['ttft_slo_s'])}, TPOT ≤ {_ms(s['tpot_slo_s'])})"])
    if s["preemptions"]:
        rows.append(["preemptions", f"{s['preemptions']:,}"])
    return rows


def _slo(text, field):
    from .. import units

    return None if text is None else units.parse_duration(text, field, unit_required=True)


def simulate_cmd(
    model: str = typer.Argument(..., help="Model name or HuggingFace config.json path."),
    hardware: str = typer.Option(..., "--hardware", "-H", help="Chip or system name (h100, hgx-b200, …)."),
    gpus: str = typer.Option(None, "--gpus", "-n", help="GPUs of the deployment (default: one scale-up domain)."),
    rate: str = typer.Option(None, "--rate", help="Arrival rate, requests/s (Poisson unless --arrivals gamma)."),
    concurrency: str = typer.Option(None, "--concurrency", "-c",
                                    help="Closed loop: users each keeping one request in flight."),
    trace: str = typer.Option(None, "--trace", help="Trace file (CSV or JSONL: arrival_s, isl, osl), or "
                                                    "'example' for the one shipped with rackmath."),
    requests: str = typer.Option("10000", "--requests", help="Requests to simulate (rate / concurrency); at most "
                                                     f"{MAX_REQUESTS:,} (about 1.4 GB at the most)."),
    isl: str = typer.Option("1000", "--isl", help="Input tokens: N, LO:HI (uniform), exp:MEAN, lognormal:MEDIAN:SIGMA."),
    osl: str = typer.Option("1000", "--osl", help="Output tokens (same forms as --isl)."),
    arrivals: str = typer.Option("poisson", "--arrivals", help="With --rate: poisson or gamma (bursty). With "
                                 "--concurrency: steady (the users' progress spread out, the default) or waves "
                                 "(they start together, as a benchmark client does)."),
    burstiness: float = typer.Option(2.0, "--burstiness", help="Gamma arrivals: coefficient of variation of the gaps."),
    tp: str = typer.Option(None, "--tp", help="Tensor-parallel degree of a replica (decode pool)."),
    ep: str = typer.Option(None, "--ep", help="Expert-parallel degree within TP."),
    pp: str = typer.Option(None, "--pp", help="Pipeline stages."),
    attention_dp: bool = typer.Option(False, "--attention-dp", help="Attention data-parallel over the TP GPUs."),
    attention_dp_size: str = typer.Option(None, "--attention-dp-size",
                                          help="Attention data-parallel over R groups of TP/R GPUs (SGLang "
                                               "--dp R --enable-dp-attention; implies --attention-dp)."),
    prefill_gpus: str = typer.Option(None, "--prefill-gpus", help="Disaggregated: GPUs of the prefill pool."),
    decode_gpus: str = typer.Option(None, "--decode-gpus", help="Disaggregated: GPUs of the decode pool."),
    max_batch: str = typer.Option(None, "--max-batch", help="Max running sequences per replica (default: the "
                                                            "framework's, generic 256)."),
    budget: str = typer.Option(None, "--budget", help="Token budget per step, chunked prefill (default 8192)."),
    cadence: str = typer.Option(None, "--cadence", help="The lecture's train schedule: a step leaves every "
                                                        "PERIOD (e.g. 20ms) whether or not you are on it."),
    weights_dtype: str = WDT_OPT,
    compute_dtype: str = CDT_OPT,
    kv_dtype: str = KVDT_OPT,
    mtp: str = typer.Option("0", "--mtp", help="Speculative / MTP draft tokens per step (k)."),
    acceptance: str = typer.Option(None, "--acceptance", help="Mean tokens emitted per verification step."),
    efficiency: str = EFF_OPT,
    ideal: bool = IDEAL_OPT,
    framework: str = typer.Option(None, "--framework", help="trtllm, vllm or sglang: its scheduler defaults."),
    recv_interval: str = typer.Option(None, "--recv-interval", help="SGLang --scheduler-recv-interval N: new "
                                      "requests are received every N decode steps (at once after a prefill "
                                      "step); default 1. SGLang stacks only, not with attention DP."),
    price: str = typer.Option(None, "--usd-per-gpu-hour", "--price", help="$/GPU-hour (default: catalog)."),
    ttft: str = typer.Option(None, "--ttft", help="TTFT SLO for goodput (e.g. 1s, 500ms)."),
    tpot: str = typer.Option(None, "--tpot", help="TPOT SLO for goodput (e.g. 20ms)."),
    seed: int = typer.Option(0, "--seed", help="Random seed (arrivals and lengths)."),
    plot: Path = typer.Option(None, "--plot", help="Write queue and batch over time to this figure (.png/.svg)."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing --plot file."),
    json: bool = JSON_OPT,
):
    """Replay traffic through one deployment: TTFT/TPOT/E2E percentiles, goodput, queue, utilization.
    \f
    One parameter per CLI option (typer's form): they become the simulator's typed inputs here. Longer than 80 lines: its signature is the option list."""
    from .. import units
    from ..analyses.serving.serve import Workload
    from ..analyses.serving.inputs import receiving
    from ..analyses.serving.simulate import Deployment, Traffic, layout_from_flags, run
    from .common import check_output, efficiency_for, print_json, table

    if ideal:  # --ideal with --efficiency X is an error, as on every command (common.efficiency_for)
        efficiency = efficiency_for(None, efficiency, True)
    if plot is not None:
        check_output(plot, force, "plot", (".png", ".svg", ".pdf"))
    tr = _read_trace(trace)
    n_req = _num(requests, "requests", integer=True)
    pools = {k: _num(v, k, True) for k, v in (("gpus", gpus), ("prefill_gpus", prefill_gpus),
                                              ("decode_gpus", decode_gpus), ("max_batch", max_batch),
                                              ("budget", budget))}
    layout = layout_from_flags(_num(tp, "tp", True), _num(ep, "ep", True), _num(pp, "pp", True),
                               True if attention_dp else None, _num(attention_dp_size, "attention_dp_size", True))
    acc = _num(acceptance, "acceptance")
    workload = Workload(isl=isl, osl=osl, concurrency=_num(concurrency, "concurrency", True), mtp=_num(mtp, "mtp", True),
                        acceptance=1.0 if acc is None else acc, arrivals=arrivals)
    dep = Deployment(**pools, cadence=None if cadence is None else units.parse_duration(cadence, "cadence"),
                     weights_dtype=weights_dtype, kv_dtype=kv_dtype, compute_dtype=compute_dtype,
                     usd_per_gpu_hour=_price(price, hardware))
    traffic = Traffic(rate=_num(rate, "rate"), trace=tr, requests=n_req, burstiness=burstiness, seed=seed,
                      ttft_slo=_slo(ttft, "ttft"), tpot_slo=_slo(tpot, "tpot"))
    with _progress_bar(len(tr["isl"]) if tr is not None else n_req, not json) as progress:
        r = run(model, hardware, workload, traffic, dep, layout,
                receiving(framework, _num(recv_interval, "recv_interval", True)), efficiency, progress=progress)
    if plot is not None:
        from ..plotting.sizing import plot_timeline

        typer.echo(f"wrote {plot_timeline(r, plot)}", err=True)
    if json:
        print_json(r.as_dict())
        return
    c = r.config
    table(f"simulate {c['model']} on {c['gpus']} × {c['chip']} ({c['mode']}), {c['traffic']} — {c['header']}",
          ["quantity", "value"], _rows(r), caption="; ".join(r.notes) or None)


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate_cmd)
