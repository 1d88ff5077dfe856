"""`rackmath serve` (`rackmath validate` lives in cli/validate.py)."""

from __future__ import annotations

import typer

from .common import (CDT_OPT, EFF_OPT, EXPLAIN_OPT, IDEAL_OPT, JSON_OPT, MODEL_ARG, POWER_CAP_OPT, PUE_OPT, USD_OPT,
                     USD_PER_KWH_OPT, gpus_opt, hardware_opt)
from ..options import serve_energy  # noqa: F401 (moved to the library; the old name stays importable)


def _count(text, field, integer=True):
    from .. import units
    from ..errors import InputError

    if text is None:
        return None
    v = units.parse_count(text, field)
    if integer and int(v) != v:
        raise InputError(field, f"{text!r} is not a whole number", "a whole number")
    return int(v) if integer else v


def _layout(gpus, tp, ep, pp, attention_dp, attention_dp_size, prefill_gpus, decode_gpus, redundant, uneven,
            weight_layout):
    """The ``Layout`` the flags give (strings parsed; a disaggregated deployment's decode pool with its ``prefill``
    pool). One argument per layout flag of the command (the reason for eleven)."""
    from ..analyses.serving.inputs import Layout, attention_groups, split_pools

    n, pg = split_pools(_count(gpus, "gpus"), _count(prefill_gpus, "prefill_gpus"), _count(decode_gpus, "decode_gpus"))
    size = attention_groups(_count(attention_dp_size, "attention_dp_size"), _count(tp, "tp"))
    return Layout(n, _count(tp, "tp"), _count(ep, "ep"), _count(pp, "pp"), True if attention_dp else None,
                  _count(redundant, "redundant_experts") or 0, uneven,
                  attention_dp_size=size,
                  weight_layout=weight_layout.strip().lower(), prefill=None if pg is None else Layout(pg))


def _context_limits(r, model, hardware, weights_dtype, kv_dtype, redundant) -> dict:
    """The one max-context answer (analyses.lecture.context.max_context) for the decode layout serve used, and warnings
    when the request (ISL + OSL) or the memory limit passes the model's own context limit."""
    from ..analyses.lecture.context import context_warning, max_context
    from ..analyses.serving.serve import USABLE_MEMORY_FRACTION
    from ..errors import InputError

    out = {"max_context": None, "model_max_context": None, "warnings": []}
    lay = r.as_dict().get("layout") or {}
    try:
        mc = max_context(model, hardware, gpus=lay.get("gpus"), concurrency=float(r.concurrency),
                         weights_dtype=weights_dtype, kv_dtype=kv_dtype, tp=lay.get("tp"), ep=lay.get("ep", 1),
                         pp=lay.get("pp", 1), attention_dp=bool(lay.get("attention_dp")),
                         attention_dp_size=lay.get("attention_dp_size") if lay.get("attention_dp") else None,
                         redundant_experts=redundant,
                         uneven_experts=True, allow_idle=True, usable_fraction=USABLE_MEMORY_FRACTION)
    except (InputError, TypeError, ValueError):
        return out
    w = context_warning(r.model if hasattr(r.model, "name") else __import__(
        "rackmath.specs.models", fromlist=["load_model"]).load_model(model), float(r.isl) + float(r.osl))
    out.update(max_context=mc.tokens, model_max_context=mc.model_limit, warnings=[x for x in (w,) if x])
    return out


def _nearest_rows(near) -> list[list[str]]:
    """'nearest measured' rows of the serve table (analyses/fitting/evidence.sentences)."""
    from ..analyses.fitting.evidence import sentences

    return [["nearest measured", line] for line in sentences(near)]


def _print_ops(r, ops, ops_plot, force, json) -> bool:
    """``--ops`` (table or JSON) and ``--ops-plot``: the decode step by operator. True when the command is done."""
    from .common import check_output, human, print_json, print_ops, wrote

    rows = r.ops()
    if ops_plot:
        from ..plotting.ops import plot_ops

        plot_ops(rows, check_output(ops_plot, force, "ops_plot", (".png", ".svg", ".pdf")),
                 f"{r.model} on {r.gpus} × {r.hardware}: decode step by operator")
        wrote(ops_plot)
    if not ops:
        return False
    if json:
        print_json({"ops": rows, "decode_step_s": float(r.as_dict()["decode_step_ms"]) / 1e3,
                    "efficiency": r.efficiency, "label": r.efficiency_label})
    else:
        print_ops(rows, f"{r.model} on {r.gpus} × {r.hardware}, layout {r.layout['label']}: decode step "
                        f"of {human(float(r.as_dict()['decode_step_ms']) / 1e3, 's')} by operator\n"
                        f"{r.efficiency_label}")
    return True


def _ttft_cell(d: dict, human) -> str:
    """The mean TTFT, and the median request's where they differ (a closed-loop client's first wave)."""
    mean, median = d["ttft_ms"], d.get("ttft_median_ms", d["ttft_ms"])
    if abs(mean - median) <= 1e-9 * abs(mean):
        return human(mean / 1e3, "s")
    return f'{human(mean / 1e3, "s")} mean, {human(median / 1e3, "s")} median request (the first wave waits)'


def _print_table(d: dict, mode: dict, e, power_cap, near) -> None:
    """The serve table: throughput, latency, cost, layout, memory, context, stack, energy, nearest measurements."""
    from .common import energy_dict, energy_line, human, table

    rows = [["output tok/s per GPU", human(d["output_tok_s_per_gpu"])],
            ["total tok/s per GPU", human(d["total_tok_s_per_gpu"])],
            ["TPOT", human(d["tpot_ms"] / 1e3, "s")], ["TTFT", _ttft_cell(d, human)],
            ["step", human(d["step_ms"] / 1e3, "s")], ["tokens/s per user", human(d["tokens_per_s_per_user"])],
            ["$/Mtok (output)", f'{human(d["usd_per_mtok_output"], "$")} at '
                                f'{human(d["usd_per_gpu_hour"], "$")}/GPU-hour'],
            ["bottleneck", d["bottleneck"]], ["layout", d["layout"]["label"] + (" (chosen)" if d["layout_chosen"] else "")],
            ["memory per GPU", f'{human(d["mem_per_gpu_gb"] * 1e9, "B")} ({"fits" if d["fits"] else "does NOT fit"}'
                               + ("" if d["fits"] else f': {human(d.get("mem_short_gb", 0.0) * 1e9, "B")} short')
                               + '; '
                               f'max ≈ {human(d["max_concurrency"])} sequences)'],
            ["longest context at this concurrency",
             "—" if mode["max_context"] is None else
             f'{human(mode["max_context"])} tokens (model limit '
             f'{human(mode["model_max_context"]) if mode["model_max_context"] else "not published"})'],
            ["efficiency", d["efficiency"]], ["serving stack", d["stack_version"] + (
                f' (receives every {d["recv_interval"]} decode steps)' if d["recv_interval"] > 1 else "")],
            ["energy", energy_line(e, per="token").removeprefix("energy: ").replace("/token", "/output token", 1)
             + ("" if power_cap is None else f"; power cap {human(energy_dict(e, power_cap)['power_cap_w'], 'W')} per GPU (compute peaks "
                                         "scaled)")]]
    if d.get("prefill"):
        p = d["prefill"]
        rows.append(["prefill pool", f'{p["gpus"]} GPUs, {human(p["input_tok_s_per_gpu"])} input tok/s per GPU'])
    rows += _nearest_rows(near)
    table(f'{d["model"]} on {d["gpus"]} × {d["hardware"]} ({d["mode"]}), ISL {human(d["isl"])} / '
          f'OSL {human(d["osl"])}, C = {human(d["concurrency"])}, stack {d["stack_version"]}\n{mode["label"]}',
          ["quantity", "value"], rows,
          caption="; ".join(d["notes"] + [f"WARNING: {w}" for w in mode["warnings"]]) or None)


def serve_cmd(
    model: str = MODEL_ARG,
    hardware: str = hardware_opt(..., "System name (hgx-h100, gb200-nvl72, …)."),
    gpus: str = gpus_opt(None, "Every GPU of the deployment (prefill + decode pools)."),
    isl: str = typer.Option(..., "--isl", help="Input (prompt) tokens per request."),
    osl: str = typer.Option(..., "--osl", help="Output tokens per request."),
    concurrency: str = typer.Option(..., "--concurrency", "-c", help="Sequences in flight across the deployment."),
    tp: str = typer.Option(None, "--tp", help="Attention tensor-parallel degree (GPUs per replica stage)."),
    ep: str = typer.Option(None, "--ep", help="Expert-parallel degree within the TP GPUs (default 1)."),
    pp: str = typer.Option(None, "--pp", help="Pipeline stages."),
    attention_dp: bool = typer.Option(False, "--attention-dp", help="Attention data-parallel over the TP GPUs."),
    attention_dp_size: str = typer.Option(None, "--attention-dp-size",
                                          help="Attention data-parallel over R groups of TP/R GPUs (SGLang "
                                               "--dp R --enable-dp-attention; implies --attention-dp; "
                                               "default: every GPU its own sequences)."),
    weights_dtype: str = typer.Option(None, "--weights-dtype", help="bf16, fp8, fp4, nvfp4, mxfp4 … (default: as published)."),
    kv_dtype: str = typer.Option(None, "--kv-dtype", help="KV-cache dtype (default bf16)."),
    compute_dtype: str = CDT_OPT,
    mtp: str = typer.Option("0", "--mtp", help="Speculative / MTP draft tokens per step (k)."),
    acceptance: str = typer.Option(None, "--acceptance", help="Mean tokens emitted per verification step (1 … k+1)."),
    prefill_gpus: str = typer.Option(None, "--prefill-gpus", help="Disaggregated: GPUs of the prefill pool."),
    decode_gpus: str = typer.Option(None, "--decode-gpus", help="Disaggregated: GPUs of the decode pool."),
    cached_share: float = typer.Option(0.0, "--cached-share", help="Share of each prompt found in the prefix cache."),
    redundant_experts: str = typer.Option("0", "--redundant-experts",
                                          help="Extra expert replicas spread over the EP GPUs (DeepSeek: 32)."),
    uneven_experts: bool = typer.Option(False, "--uneven-experts",
                                        help="Allow experts that do not divide over EP; model the most-loaded GPU."),
    framework: str = typer.Option(None, "--framework", help="Serving stack and version: trtllm, vllm, sglang, "
                                                            "vllm-v0, atom, dynamo-sglang, dynamo-trtllm, each "
                                                            "optionally @VERSION (sglang@0.5.6, vllm@0.13; none: "
                                                            "the newest version with records) — prefill budget, "
                                                            "batch cap, scheduler overlap, host times; default: a "
                                                            "generic stack, named in the output."),
    arrivals: str = typer.Option("steady", "--arrivals", help="steady: requests arrive spread out evenly, one "
                                 "prompt per mixed step; poisson: independent arrivals (a production stream, "
                                 "simulate --rate), prompts that arrive during a mixed step share the next; "
                                 "waves: lock-step, C prompts at once (a closed-loop benchmark client at fixed "
                                 "lengths, a fixed-length burst, C = 1); closed-loop: a benchmark client "
                                 "(--max-concurrency C, 10 × C prompts): the first C start together, then C stay "
                                 "in flight; mean TTFT = 1/10 · the first wave's + 9/10 · steady."),
    eager: bool = typer.Option(False, "--eager", help="The stack runs without CUDA graphs (vLLM --enforce-eager, "
                               "SGLang --disable-cuda-graph): decode steps take max(GPU time, kernels · host "
                               "dispatch time)."),
    recv_interval: str = typer.Option(None, "--recv-interval", help="SGLang --scheduler-recv-interval N: the "
                                      "scheduler receives new requests every N decode steps (default 1, every "
                                      "step); a new request waits (N − 1)/2 decode steps more. SGLang stacks "
                                      "only, not with attention DP."),
    weight_layout: str = typer.Option("1d", "--weight-layout", help="How the --tp GPUs hold a dense model's "
                                      "weights: 1d (weight-stationary, default), 2d (weight-stationary over "
                                      "d_model and d_ff), gathered (all-gathered per layer); Pope et al. 2022."),
    ideal: bool = IDEAL_OPT,
    efficiency: str = EFF_OPT,
    price: str = USD_OPT,
    ops: bool = typer.Option(False, "--ops", help="Per-operator breakdown of the decode step (FLOPs, bytes, "
                                                  "intensity, time, binding term)."),
    ops_plot: str = typer.Option(None, "--ops-plot", help="Write the per-operator breakdown as a stacked bar "
                                                          "(.png/.svg/.pdf)."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing --ops-plot file."),
    pue: str = PUE_OPT,
    usd_per_kwh: str = USD_PER_KWH_OPT,
    power_cap: str = POWER_CAP_OPT,
    json: bool = JSON_OPT,
    explain: bool = EXPLAIN_OPT,
):
    """Steady-state serving: tokens/s per GPU, TPOT, TTFT, $/Mtok and energy for a request shape and
    concurrency.\f

    One parameter per option (typer reads the command's options from its signature), hence more than twelve and
    longer than 80 lines (the signature is the option list); the body builds serve's typed inputs and prints
    (:func:`_emit`)."""
    from dataclasses import replace

    from .. import units
    from ..analyses.serving.serve import Workload, load_stack, serve
    from .common import power_capped, priced

    if ideal:  # --ideal with --efficiency X is an error, as on every command (common.efficiency_for)
        from .common import efficiency_for

        efficiency_for(None, efficiency, True)
    if ops_plot:  # before any work ('-' and existing files refused)
        from .common import check_output

        check_output(ops_plot, force, "ops_plot", (".png", ".svg", ".pdf"))
    r = serve(model, priced(power_capped(hardware, power_cap), price),
              Workload(_count(isl, "isl", False), _count(osl, "osl", False),
                       _count(concurrency, "concurrency", False), _count(mtp, "mtp"),
                       None if acceptance is None else float(units.parse_count(acceptance, "acceptance")),
                       cached_share, arrivals),
              _layout(gpus, tp, ep, pp, attention_dp, attention_dp_size, prefill_gpus, decode_gpus,
                      redundant_experts, uneven_experts, weight_layout),
              replace(load_stack(framework), cuda_graphs=not eager, weights_dtype=weights_dtype,
                      kv_dtype=kv_dtype, compute_dtype=compute_dtype,
                      recv_interval=1 if recv_interval is None else _count(recv_interval, "recv_interval")),
              "ideal" if ideal else efficiency)
    if (ops or ops_plot) and _print_ops(r, ops, ops_plot, force, json):
        return
    _emit(r, model, hardware, weights_dtype, kv_dtype, compute_dtype, redundant_experts, pue, usd_per_kwh, power_cap,
          json, explain)


def _emit(r, model, hardware, weights_dtype, kv_dtype, compute_dtype, redundant_experts, pue, usd_per_kwh, power_cap,
          json, explain) -> None:
    """Print a serve result: --json, --explain, or the table (with energy, the context limits and the nearest
    measured record)."""
    from .common import dtype_rate_warning, energy_dict, mode_dict, print_derivation, print_json

    rate_note = dtype_rate_warning(hardware, weights_dtype, compute_dtype, echo=json or explain)
    mode = mode_dict(r.efficiency_used or r.efficiency)  # the efficiency it ran with (a version's band)
    mode |= _context_limits(r, model, hardware, weights_dtype, kv_dtype,
                            _count(redundant_experts, "redundant_experts") or 0)
    e = serve_energy(r, hardware, pue=pue, usd_per_kwh=usd_per_kwh, power_cap=power_cap)
    if rate_note:
        mode["warnings"] = mode["warnings"] + [rate_note]
    near = r.nearest_measured()
    if json:
        d = mode | r.as_dict() | {"energy": energy_dict(e, power_cap, hardware), "nearest_measured": near}
        if explain:
            d["derivation"] = r.explain().as_dict()
            if e is not None:
                d["energy_derivation"] = e.explain().as_dict()
        print_json(d)
        return
    if explain:
        print_derivation(r.explain())
        if e is not None:
            print()
            print_derivation(e.explain())
        return
    _print_table(r.as_dict(), mode, e, power_cap, near)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_cmd)
