"""`rackmath serve` (`rackmath validate` lives in cli/validate.py)."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import EXPLAIN_OPT, JSON_OPT


def _count(text, field, integer=True):
    from .. import units
    from ..errors import InputError

    if text is None:
        return None
    v = units.parse_count(text, field)
    if integer and int(v) != v:
        raise InputError(field, f"{text!r} is not a whole number", "a whole number")
    return int(v) if integer else v


def register(app: typer.Typer) -> None:
    from .plot import plot_app

    @app.command("serve")
    def serve_cmd(
        model: str = typer.Option(..., "--model", "-m", help="Model name or HuggingFace config.json path."),
        hardware: str = typer.Option(..., "--hardware", "-H", help="System name (hgx-h100, gb200-nvl72, …)."),
        gpus: str = typer.Option(None, "--gpus", help="Every GPU of the deployment (prefill + decode pools)."),
        isl: str = typer.Option(..., "--isl", help="Input (prompt) tokens per request."),
        osl: str = typer.Option(..., "--osl", help="Output tokens per request."),
        concurrency: str = typer.Option(..., "--concurrency", "-c", help="Sequences in flight across the deployment."),
        tp: str = typer.Option(None, "--tp", help="Attention tensor-parallel degree (GPUs per replica stage)."),
        ep: str = typer.Option(None, "--ep", help="Expert-parallel degree within the TP GPUs (default 1)."),
        pp: str = typer.Option(None, "--pp", help="Pipeline stages."),
        attention_dp: bool = typer.Option(False, "--attention-dp", help="Attention data-parallel over the TP GPUs."),
        weights_dtype: str = typer.Option(None, "--weights-dtype", help="bf16, fp8, fp4, nvfp4, mxfp4 … (default: as published)."),
        kv_dtype: str = typer.Option(None, "--kv-dtype", help="KV-cache dtype (default bf16)."),
        mtp: str = typer.Option("0", "--mtp", help="Speculative / MTP draft tokens per step (k)."),
        acceptance: str = typer.Option(None, "--acceptance", help="Mean tokens emitted per verification step (1 … k+1)."),
        prefill_gpus: str = typer.Option(None, "--prefill-gpus", help="Disaggregated: GPUs of the prefill pool."),
        decode_gpus: str = typer.Option(None, "--decode-gpus", help="Disaggregated: GPUs of the decode pool."),
        cached_share: float = typer.Option(0.0, "--cached-share", help="Share of each prompt found in the prefix cache."),
        redundant_experts: str = typer.Option("0", "--redundant-experts",
                                              help="Extra expert replicas spread over the EP GPUs (DeepSeek: 32)."),
        uneven_experts: bool = typer.Option(False, "--uneven-experts",
                                            help="Allow experts that do not divide over EP; model the most-loaded GPU."),
        ideal: bool = typer.Option(False, "--ideal", help="The lecture's ideal roofline (no calibration)."),
        efficiency: str = typer.Option(None, "--efficiency", help="Efficiency preset (default: calibrated for the chip)."),
        price: str = typer.Option(None, "--usd-per-gpu-hour", help="$/GPU-hour (default: the chip's catalog price)."),
        json: bool = JSON_OPT,
        explain: bool = EXPLAIN_OPT,
    ):
        """Steady-state serving: tokens/s per GPU, TPOT, TTFT and $/Mtok for a request shape and concurrency."""
        from .. import units
        from ..analyses.serving import serve
        from ..explain import fmt
        from .common import print_derivation, print_json, table

        acc = None if acceptance is None else float(units.parse_count(acceptance, "acceptance"))
        r = serve(model, hardware, gpus=_count(gpus, "gpus"), isl=_count(isl, "isl", False),
                  osl=_count(osl, "osl", False), concurrency=_count(concurrency, "concurrency", False),
                  tp=_count(tp, "tp"), ep=_count(ep, "ep"), pp=_count(pp, "pp"),
                  attention_dp=True if attention_dp else None, weights_dtype=weights_dtype, kv_dtype=kv_dtype,
                  mtp=_count(mtp, "mtp"), acceptance=acc, prefill_gpus=_count(prefill_gpus, "prefill_gpus"),
                  decode_gpus=_count(decode_gpus, "decode_gpus"), cached_share=cached_share, ideal=ideal,
                  efficiency=efficiency, redundant_experts=_count(redundant_experts, "redundant_experts") or 0,
                  uneven_experts=uneven_experts,
                  usd_per_gpu_hour=None if price is None else units.parse_usd_per_hour(price, "usd_per_gpu_hour"))
        if json:
            d = r.as_dict()
            if explain:
                d["derivation"] = r.explain().as_dict()
            print_json(d)
            return
        if explain:
            print_derivation(r.explain())
            return
        d = r.as_dict()
        rows = [["output tok/s per GPU", fmt(d["output_tok_s_per_gpu"], "")],
                ["total tok/s per GPU", fmt(d["total_tok_s_per_gpu"], "")],
                ["TPOT", f'{d["tpot_ms"]:.4g} ms'], ["TTFT", f'{d["ttft_ms"]:.4g} ms'],
                ["step", f'{d["step_ms"]:.4g} ms'], ["tokens/s per user", f'{d["tokens_per_s_per_user"]:.4g}'],
                ["$/Mtok (output)", f'{d["usd_per_mtok_output"]:.4g} at ${d["usd_per_gpu_hour"]:g}/GPU-h'],
                ["bottleneck", d["bottleneck"]], ["layout", d["layout"]["label"] + (" (chosen)" if d["layout_chosen"] else "")],
                ["memory per GPU", f'{d["mem_per_gpu_gb"]:.4g} GB ({"fits" if d["fits"] else "does NOT fit"}; '
                                   f'max ≈ {d["max_concurrency"]:g} sequences)'],
                ["efficiency", d["efficiency"]]]
        if d.get("prefill"):
            p = d["prefill"]
            rows.append(["prefill pool", f'{p["gpus"]} GPUs, {fmt(p["input_tok_s_per_gpu"], "")} input tok/s per GPU'])
        table(f'{d["model"]} on {d["gpus"]} × {d["hardware"]} ({d["mode"]}), ISL {d["isl"]:g} / OSL {d["osl"]:g}, '
              f'C = {d["concurrency"]:g}', ["quantity", "value"], rows,
              caption="; ".join(d["notes"]) or None)
