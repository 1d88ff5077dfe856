"""`rackmath roofline`, `rackmath sweep`, `rackmath plot batch|context`."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from .common import (EFF_OPT, EXPLAIN_OPT, FORCE_OPT, IDEAL_OPT, JSON_OPT, KVDT_OPT, MODEL_ARG, POWER_CAP_OPT, PUE_OPT,
                     USD_OPT, USD_PER_KWH_OPT, WDT_OPT, batch_opt, context_opt, gpus_opt, hardware_opt, output_opt)

HW_OPT = hardware_opt()
CHIPS_OPT = gpus_opt()


def _inputs(batch, context, pass_len, chips):
    from .common import parse_range

    b = parse_range(batch, "batch")
    c = parse_range(context, "context")
    p = parse_range(pass_len, "pass_len")
    n = parse_range(chips, "gpus") if chips is not None else None
    return b, c, p, n


def _grid(*arrays, maximum=None, hint="use shorter ranges"):
    """Cartesian product of 1-D arrays as broadcastable arrays (None passes through), at most ``maximum`` points
    (rackmath.bounds.MAX_GRID_POINTS by default), checked before allocating."""
    import numpy as np

    from ..bounds import MAX_GRID_POINTS, check_grid

    present = [a for a in arrays if a is not None]
    check_grid([a.size for a in present], "ranges", maximum or MAX_GRID_POINTS, hint)
    mesh = np.meshgrid(*present, indexing="ij")
    it = iter(m.ravel() for m in mesh)
    return [next(it) if a is not None else None for a in arrays]


def _wr_opt():
    from .batching import WR_OPT

    return WR_OPT


WR_OPT = _wr_opt()
WR_PLOT_OPT = typer.Option("hit", "--weight-read", metavar="hit|all|both",
                           help="Weights read per step: hit (experts routed to, default), all (the lecture's every "
                                "weight: a flat line), or both drawn.")


def _roofline(model, hardware, chips, b, c, p, weights_dtype, kv_dtype, efficiency, ideal, price, weight_read="hit",
              power_cap=None):
    """The engine's roofline with the CLI's efficiency pair (default: ideal), price, weight-read mode and power cap
    (one parameter per option the commands forward)."""
    from ..engine.roofline import roofline
    from .common import efficiency_for, power_capped, priced

    eff = efficiency_for(hardware, efficiency, ideal, default="ideal")
    return roofline(model, power_capped(priced(hardware, price), power_cap), chips=chips, batch=b, context=c,
                    pass_len=p, weights_dtype=weights_dtype, kv_dtype=kv_dtype, efficiency=eff, weight_read=weight_read)


def _warnings(r, weights_dtype, echo: bool) -> list[str]:
    """What the user should know before reading the numbers (the table's caption; on stderr when ``echo``): a
    context past the model's own limit (analyses.lecture.context.context_warning, naming it) and weight GEMMs run at a
    wider dtype's rate than asked (common.dtype_rate_warning)."""
    from ..analyses.lecture.context import context_warning
    from .common import dtype_rate_warning, warn

    ctx = context_warning(r.model, r.context)
    if ctx and echo:
        warn(ctx)
    return [w for w in (ctx, dtype_rate_warning(r.hardware, weights_dtype, echo=echo)) if w]


def _fixed(q: dict) -> float:
    """What the step takes beyond its terms: t_fixed = t_step − max(t_compute, t_weights + t_kv) (0 for the ideal
    bound; a calibrated preset's latency, host time and serial composition otherwise)."""
    return max(0.0, q["step_s"] - max(q["t_compute_s"], q["t_weights_s"] + q["t_kv_s"]))


def _payload(r, e=False, power_cap=None) -> dict:
    from .common import energy_dict, mode_dict

    d = mode_dict(r.efficiency) | {"usd_per_gpu_hour": r.usd_per_chip_hour} | r.as_dict()
    if e is not False:  # None: the chip has no power figures
        d["energy"] = energy_dict(e, power_cap, r.hardware)
    return d


def _stream_payload(r, fh) -> None:
    """:func:`_payload` of a large result (``sweep --json``, up to bounds.MAX_GRID_POINTS points) written as it is
    read: the per-point fields stay numpy arrays, streamed by ``common.write_json`` (the same JSON as
    ``print_json(_payload(r))``, in ~0.7 GB at 10⁶ points instead of 5 GB)."""
    import copy

    import numpy as np

    from .common import write_json

    shape = np.shape(r.step_s)
    head = copy.copy(r)
    head.FIELDS = ()  # as_dict's scalars only, from the one place that writes them; the per-point fields follow
    d = _payload(head)
    for f in r.FIELDS:
        v = np.asarray(getattr(r, f))
        d[f] = np.broadcast_to(v, shape) if shape else v.item()
    write_json(d, fh)


def _energy(r, pue, usd_per_kwh, power_cap):
    """Energy per token of a roofline result: every chip draws P for t_step while B·P tokens come out."""
    from .common import energy_of

    return energy_of(r.hardware, chips=r.chips, step_s=r.step_s, tokens_per_step=r.tokens, usd_per_mtok=r.usd_per_mtok,
                     pue=pue, usd_per_kwh=usd_per_kwh, power_cap=power_cap)


def _at(x, i):
    import numpy as np

    a = np.asarray(x, dtype=float)
    return float(np.broadcast_to(a, a.shape).reshape(-1)[i]) if a.ndim else float(a)


def _figure(draw, output, force, model, hardware, chips, *, sweep, fixed, json=False, efficiency=None, ideal=False,
            price=None, **kw):
    """Check the output, parse one swept range and one fixed value, draw, say where it went (--json: the data).
    One parameter per option the two plot commands forward."""
    from .common import check_output, efficiency_for, parse_range, print_json, priced, wrote

    check_output(output, force, "output", (".png", ".svg", ".pdf"))
    n = float(parse_range(chips, "gpus")[0]) if chips else None
    (xs, xtext), (fs, ftext) = sweep, fixed
    eff = efficiency_for(hardware, efficiency, ideal, default="ideal")
    hw = priced(hardware, price)
    x, f = parse_range(xtext, xs), float(parse_range(ftext, fs)[0])
    p = draw(model, hw, chips=n, path=output, efficiency=eff, **{xs: x}, **{fs: f}, **kw)
    wrote(p)
    if json:
        wr = kw.get("weight_read", "hit")
        r = _roofline(model, hw, n, x if xs == "batch" else f, x if xs == "context" else f, 1.0,
                      kw.get("weights_dtype"), kw.get("kv_dtype"), eff, False, None, "hit" if wr == "both" else wr)
        print_json({"output": str(p)} | _payload(r))


def roofline_cmd(
    model: str = MODEL_ARG,
    hardware: str = HW_OPT,
    chips: str = CHIPS_OPT,
    batch: str = batch_opt("1"),
    context: str = context_opt("8192"),
    pass_len: str = typer.Option("1", "--pass-len", help="Tokens per sequence this pass: 1 = decode, >1 = prefill chunk."),
    weights_dtype: str = WDT_OPT,
    kv_dtype: str = KVDT_OPT,
    efficiency: str = EFF_OPT,
    ideal: bool = IDEAL_OPT,
    price: str = USD_OPT,
    pue: str = PUE_OPT,
    usd_per_kwh: str = USD_PER_KWH_OPT,
    power_cap: str = POWER_CAP_OPT,
    weight_read: str = WR_OPT,
    ops: bool = typer.Option(False, "--ops", help="Per-operator breakdown of the (first) configuration: FLOPs, "
                                                  "bytes, intensity, time, binding term."),
    ops_plot: str = typer.Option(None, "--ops-plot", help="Write the per-operator breakdown as a stacked bar."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing --ops-plot file."),
    json: bool = JSON_OPT,
    explain: bool = EXPLAIN_OPT,
):
    """Roofline step time, throughput, cost and energy: max(compute, weight fetch + KV fetch). Default: the
    ideal bound.
    \f
    One parameter per option (typer reads the command's options from its signature)."""
    from ..bounds import MAX_TABLE_ROWS

    if ops_plot:  # before any work ('-' and existing files refused)
        from .common import check_output

        check_output(ops_plot, force, "ops_plot", (".png", ".svg", ".pdf"))
    b, c, p, n = _grid(*_inputs(batch, context, pass_len, chips), maximum=MAX_TABLE_ROWS,
                       hint="use `rackmath sweep --csv` for more")
    if b.size == 1:  # a single configuration prints scalars, not one-element lists
        b, c, p = float(b[0]), float(c[0]), float(p[0])
        n = None if n is None else float(n[0])
    r = _roofline(model, hardware, n, b, c, p, weights_dtype, kv_dtype, efficiency, ideal, price, weight_read,
                  power_cap)
    warnings = _warnings(r, weights_dtype, echo=json or explain or ops or bool(ops_plot))
    e = _energy(r, pue, usd_per_kwh, power_cap)
    if ops or ops_plot:
        _print_ops(r, ops, ops_plot, force, json)
        if ops:
            return
    if json:
        _print_json(r, e, power_cap, warnings, explain)
        return
    if explain:
        _print_explained(r, e)
        return
    _print_table(r, e, power_cap, warnings, weight_read)


def _print_ops(r, ops: bool, ops_plot, force: bool, json: bool) -> None:
    """--ops (the first configuration's step by operator: a table, or JSON) and --ops-plot (a stacked bar)."""
    from .common import check_output, human, mode_label, print_json, print_ops, wrote

    rows = r.ops(0)
    title = (f"{r.model.name} on {r.hardware.name}, batch {human(r.at(0)['batch'])}, context "
             f"{human(r.at(0)['context'])}: step of {human(r.at(0)['step_s'], 's')} by operator")
    if ops_plot:
        from ..plotting.ops import plot_ops

        plot_ops(rows, check_output(ops_plot, force, "ops_plot", (".png", ".svg", ".pdf")), title)
        wrote(ops_plot)
    if ops:
        if json:
            print_json({"ops": rows, "step_s": r.at(0)["step_s"], "composition": r.extras["times"].composition,
                        "efficiency": r.efficiency.name})
        else:
            print_ops(rows, title + "\n" + mode_label(r.efficiency)
                      + ("  (overlapped: the step is max of the columns' sums, not the rows' sum)"
                         if r.extras["times"].composition == "overlap" else ""))


def _print_json(r, e, power_cap, warnings: list, explain: bool) -> None:
    """roofline --json: every point, its fixed time, the energy; with --explain the first 16 derivations."""
    from .common import print_json

    size = r.step_s.size
    d = _payload(r, e, power_cap) | {"warnings": warnings}
    d["t_fixed_s"] = [_fixed(r.at(i)) for i in range(size)] if size > 1 else _fixed(r.at(0))
    if explain:
        d["derivation"] = [r.explain(i).as_dict() for i in range(min(size, 16))]
        if e is not None:
            d["energy_derivation"] = [e.explain(i).as_dict() for i in range(min(size, 16))]
    print_json(d)


def _print_explained(r, e) -> None:
    """roofline --explain: the derivation of each of the first 16 points (and its energy's)."""
    from .common import mode_label, print_derivation

    size = r.step_s.size
    print(mode_label(r.efficiency))
    for i in range(min(size, 16)):
        print_derivation(r.explain(i))
        print()
        if e is not None:
            print_derivation(e.explain(i))
            print()


def _print_table(r, e, power_cap, warnings: list, weight_read) -> None:
    """The roofline table: each point's terms, step, binding term, throughput, cost, MFU, fit and energy."""
    import numpy as np

    from .common import Col, energy_line, human, mode_label, parse_power, table

    size = r.step_s.size
    rows = []
    fixed = [_fixed(r.at(i)) for i in range(size)]
    show_fixed = any(f > 0 for f in fixed)  # the ideal bound has none: its step is the max of its terms
    for i in range(size):
        q = r.at(i)
        rows.append([human(q["chips"]), human(q["batch"]), human(q["context"]), human(q["pass_len"]),
                     human(q["t_compute_s"], "s"), human(q["t_weights_s"], "s"), human(q["t_kv_s"], "s")]
                    + ([human(fixed[i], "s")] if show_fixed else []) +
                    [human(q["step_s"], "s"), q["bound"], human(q["tokens_per_s_per_chip"]),
                     human(q["tokens_per_s_per_seq"]), human(q["usd_per_mtok"], "$"), human(q["mfu"], "%"),
                     "yes" if q["fits"] else "NO"] + (["—"] * 3 if e is None else [
                     human(_at(e.j_per_token, i), "J"), human(_at(e.tokens_per_kwh, i)),
                     human(_at(e.elec_share, i), "%")]))
    binding = {str(x) for x in np.asarray(r.bound).ravel()}  # the binding term's column is never hidden
    cols = [Col("GPUs", 3), Col("batch", 0), Col("context", 1), Col("pass", 4),
            Col("t_compute", 0 if "compute" in binding else 2), Col("t_weights", 0 if "weights" in binding else 2),
            Col("t_kv", 0 if "kv" in binding else 2)] + ([Col("fixed", 0)] if show_fixed else []) + [
            Col("step", 0), Col("bound", 1),
            Col("tok/s/GPU", 1), Col("tok/s/seq", 2), Col("$/Mtok", 0), Col("MFU", 3), Col("fits", 1),
            Col("J/tok", 1), Col("tok/kWh", 3), Col("elec $", 2)]
    cap = "" if power_cap is None else (f"; power-capped at {human(parse_power(power_cap), 'W')} per GPU "
                                        f"(compute peaks scaled)")
    table(f"{r.model.name} on {r.hardware.name} ({r.hardware.chip.name}; weights {r.weights_dtype}, "
          f"KV {r.kv_dtype}; weight read {weight_read})\n{mode_label(r.efficiency)}", cols, rows,
          caption=("fixed = step − max(t_compute, t_weights + t_kv): the preset's fixed costs (kernel and "
                   "collective latency, host time) and the time its terms do not overlap (--explain derives "
                   "it). " if show_fixed else "")
          + f"$ at {human(r.usd_per_chip_hour, '$')}/GPU-hour (--usd-per-gpu-hour); " + (
              energy_line(e) if e is None else
              f"J/tok at {human(e.facility_w_per_chip, 'W')}/GPU at the meter (board + host, PUE {e.pue:g}); "
              f"elec $ = electricity's share of $/Mtok at ${e.usd_per_kwh:g}/kWh{cap}"
              + (f"\n{energy_line(e)}" if size == 1 else ""))
          + "".join(f"\nWARNING: {w}" for w in warnings))


def sweep_cmd(
    model: str = MODEL_ARG,
    hardware: str = HW_OPT,
    chips: str = CHIPS_OPT,
    batch: str = batch_opt("1:16384:log", "Range 'LO:HI:log', 'LO:HI:logN', 'LO:HI:N' or a list"),
    context: str = context_opt("8192", "Range or list of context lengths"),
    pass_len: str = typer.Option("1", "--pass-len", help="Range or list of pass lengths."),
    weights_dtype: str = WDT_OPT,
    kv_dtype: str = KVDT_OPT,
    efficiency: str = EFF_OPT,
    ideal: bool = IDEAL_OPT,
    price: str = USD_OPT,
    weight_read: str = WR_OPT,
    csv: str = typer.Option(None, "--csv", metavar="FILE|-",
                            help="CSV file to write ('-' = stdout; never overwritten without --force)."),
    force: bool = FORCE_OPT,
    json: bool = JSON_OPT,
):
    """Evaluate the roofline over the cartesian product of ranges, as one vectorized call, into CSV or JSON.
    \f
    One parameter per option (typer reads the command's options from its signature)."""
    import numpy as np

    from ..errors import InputError
    from .common import check_output, open_output

    if csv is None and not json:
        raise InputError("csv", "no output chosen", "--csv FILE, --csv - (stdout) or --json")
    if csv is not None:
        check_output(csv, force, "csv")
    b, c, p, n = _grid(*_inputs(batch, context, pass_len, chips))
    r = _roofline(model, hardware, n, b, c, p, weights_dtype, kv_dtype, efficiency, ideal, price, weight_read)
    cols = ["chips", "batch", "context", "pass_len", "t_compute_s", "t_weights_s", "t_kv_s", "step_s",
            "tokens_per_s", "tokens_per_s_per_chip", "tokens_per_s_per_seq", "usd_per_mtok", "mfu", "mbu"]
    shape = r.step_s.shape
    data = np.column_stack([np.broadcast_to(np.asarray(getattr(r, k), dtype=float), shape).ravel() for k in cols])
    bound = np.broadcast_to(r.bound, shape).ravel()
    if csv is not None:
        with open_output(csv, force, "csv", f"{data.shape[0]:,} configurations") as fh:
            fh.write(",".join(cols + ["bound"]) + "\n")
            for i in range(0, data.shape[0], 65_536):  # streamed: a chunk of rows in memory at a time
                fh.write("".join(",".join(f"{x:.6g}" for x in row) + "," + bnd + "\n"
                                 for row, bnd in zip(data[i:i + 65_536].tolist(), bound[i:i + 65_536])))
    if json:
        _stream_payload(r, sys.stdout)


def plot_batch(
    model: str = MODEL_ARG,
    hardware: str = HW_OPT,
    chips: str = CHIPS_OPT,
    context: str = context_opt("8192"),
    batch: str = batch_opt("1:65536:log200", "Batch range to draw"),
    weights_dtype: str = WDT_OPT,
    kv_dtype: str = KVDT_OPT,
    efficiency: str = EFF_OPT,
    ideal: bool = IDEAL_OPT,
    price: str = USD_OPT,
    weight_read: str = WR_PLOT_OPT,
    output: Path = output_opt(Path("batch.png")),
    force: bool = FORCE_OPT,
    json: bool = JSON_OPT,
):
    """Latency and cost per token vs batch, each term drawn (lecture 00:05–00:12).
    \f
    One parameter per option (typer reads the command's options from its signature)."""
    from ..plotting.batching import plot_batch as draw

    _figure(draw, output, force, model, hardware, chips, sweep=("batch", batch), fixed=("context", context),
            json=json, efficiency=efficiency, ideal=ideal, price=price, weights_dtype=weights_dtype,
            kv_dtype=kv_dtype, weight_read=weight_read)


def plot_context(
    model: str = MODEL_ARG,
    hardware: str = HW_OPT,
    chips: str = CHIPS_OPT,
    batch: str = batch_opt("256", "Sequences in the batch"),
    context: str = context_opt("1K:2M:log200", "Context range to draw"),
    weights_dtype: str = WDT_OPT,
    kv_dtype: str = KVDT_OPT,
    efficiency: str = EFF_OPT,
    ideal: bool = IDEAL_OPT,
    price: str = USD_OPT,
    weight_read: str = WR_PLOT_OPT,
    output: Path = output_opt(Path("context.png")),
    force: bool = FORCE_OPT,
    json: bool = JSON_OPT,
):
    """Cost per token vs context length, each term drawn (lecture 01:35).
    \f
    One parameter per option (typer reads the command's options from its signature)."""
    from ..plotting.batching import plot_context as draw

    _figure(draw, output, force, model, hardware, chips, sweep=("context", context), fixed=("batch", batch),
            json=json, efficiency=efficiency, ideal=ideal, price=price, weights_dtype=weights_dtype,
            kv_dtype=kv_dtype, weight_read=weight_read)


def register(app: typer.Typer) -> None:
    from .plot import plot_app

    app.command("roofline")(roofline_cmd)
    app.command("sweep")(sweep_cmd)
    plot_app.command("batch")(plot_batch)
    plot_app.command("context")(plot_context)
