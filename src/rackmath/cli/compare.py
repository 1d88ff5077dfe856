"""`rackmath compare`: $/Mtok and tok/s/user side by side across chips at a target interactivity (issue 12)."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import CDT_OPT, EFF_OPT, IDEAL_OPT, JSON_OPT, KVDT_OPT, WDT_OPT


def compare_cmd(
    model: str = typer.Argument(..., help="Model name or HuggingFace config.json path."),
    hardware: str = typer.Option("h100,h200,b200,mi355x", "--hardware", "-H", help="Comma list of chips/systems."),
    all_chips: bool = typer.Option(False, "--all", help="Every available chip of the catalog."),
    tok_s_user: str = typer.Option("50", "--tok-s-user", help="Target interactivity: tokens/s per user."),
    isl: str = typer.Option("1000", "--isl", help="Input tokens per request."),
    osl: str = typer.Option("1000", "--osl", help="Output tokens per request."),
    price: str = typer.Option(None, "--usd-per-gpu-hour", "--price",
                              help="$/GPU-hour per chip: 'h100=2.1,b200=4' (or one number for all)."),
    framework: str = typer.Option(None, "--framework", help="trtllm, vllm or sglang: scheduler defaults."),
    weights_dtype: str = WDT_OPT,
    compute_dtype: str = CDT_OPT,
    kv_dtype: str = KVDT_OPT,
    efficiency: str = EFF_OPT,
    ideal: bool = IDEAL_OPT,
    plot: Path = typer.Option(None, "--plot", help="Write $/Mtok vs tok/s/user per chip to this figure."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing --plot file."),
    json: bool = JSON_OPT,
):
    """Cheapest $/Mtok per chip at ≥ the target tok/s/user (steady state), one table and one plot.
    \f
    One parameter per option (typer reads the command's options from its signature)."""
    from .. import units
    from ..analyses.serving.plan import all_chips as catalog_chips, compare
    from .common import check_output, print_json, table

    if ideal:  # --ideal with --efficiency X is an error, as on every command (common.efficiency_for)
        from .common import efficiency_for

        efficiency_for(None, efficiency, True)
    if plot is not None:
        check_output(plot, force, "plot", (".png", ".svg", ".pdf"))
    hw = ",".join(catalog_chips()) if all_chips else hardware
    target = units.parse_count(tok_s_user, "tok_s_user")
    r = compare(model, hw, tok_s_user=target, isl=units.parse_count(isl, "isl"), osl=units.parse_count(osl, "osl"),
                usd_per_gpu_hour=price, weights_dtype=weights_dtype, kv_dtype=kv_dtype, efficiency=efficiency,
                ideal=ideal, framework=framework, compute_dtype=compute_dtype)
    if plot is not None:
        from ..plotting.sizing import plot_pareto

        marks = {row["chip"]: (row["tok_s_user"], row["usd_per_mtok"]) for row in r["rows"] if row["usd_per_mtok"]}
        p = plot_pareto(r["pareto"], plot, marks=marks, target=target,
                        title=f"{r['model']}: $/Mtok vs tok/s/user (ISL {r['isl']:g}, OSL {r['osl']:g})")
        typer.echo(f"wrote {p}", err=True)
    if json:
        print_json(r)
        return
    rows = []
    for row in r["rows"]:
        if row["usd_per_mtok"] is None:
            rows.append([row["chip"], f"${row['usd_per_gpu_hour']:g}", "—", "—", "—", "—",
                         f"{row['max_tok_s_user']:.4g}" if row["max_tok_s_user"] else "—", row["efficiency"]])
            continue
        rows.append([row["chip"], f"${row['usd_per_gpu_hour']:g}", f"${row['usd_per_mtok']:.3g}",
                     f"{row['tok_s_user']:.4g}", f"{row['output_tok_s_per_gpu']:.4g}",
                     f"{row['layout']} @ {row['concurrency_per_replica']:g} seqs", f"{row['max_tok_s_user']:.4g}",
                     row["efficiency"]])
    table(f"compare {r['model']} at ≥ {target:g} tok/s/user, ISL {r['isl']:g} / OSL {r['osl']:g} — cheapest first",
          ["chip", "$/GPU-h", "$/Mtok", "tok/s/user", "out tok/s/GPU", "replica", "max tok/s/user", "efficiency"],
          rows, caption="steady state, aggregated continuous batching; calibrated unless efficiency says ideal "
                        "(ideal roofline — a lower bound on time)")


def register(app: typer.Typer) -> None:
    app.command("compare")(compare_cmd)
