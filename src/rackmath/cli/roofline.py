"""`rackmath roofline`, `rackmath sweep`, `rackmath plot batch|context`."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import EXPLAIN_OPT, JSON_OPT, dtype_check

HW_OPT = typer.Option(..., "--hardware", "-H", help="System or chip name (a chip means its standard scale-up system).")
CHIPS_OPT = typer.Option(None, "--chips", help="Chips working together (default: one scale-up domain).")
WDT_OPT = typer.Option(None, "--weights-dtype", callback=dtype_check("weights_dtype"), help="bf16, fp8, int8, fp4, mxfp4, nvfp4 … (default: as published).")
KVDT_OPT = typer.Option(None, "--kv-dtype", callback=dtype_check("kv_dtype"), help="KV-cache dtype (default: the model's own, bf16 for published models).")
EFF_OPT = typer.Option(None, "--efficiency", help="Efficiency preset (default: the ideal roofline).")


def _wr_opt():
    from .batching import WR_OPT

    return WR_OPT


WR_OPT = _wr_opt()


def _inputs(batch, context, pass_len, chips):
    from .common import parse_range

    b = parse_range(batch, "batch")
    c = parse_range(context, "context")
    p = parse_range(pass_len, "pass_len")
    n = parse_range(chips, "chips") if chips is not None else None
    return b, c, p, n


def _grid(*arrays):
    """Cartesian product of 1-D arrays as broadcastable arrays (None passes through)."""
    import numpy as np

    present = [a for a in arrays if a is not None]
    mesh = np.meshgrid(*present, indexing="ij")
    it = iter(m.ravel() for m in mesh)
    return [next(it) if a is not None else None for a in arrays]


def _check_output(path: Path, force: bool, field: str = "output", suffixes=(".png", ".svg", ".pdf")) -> None:
    from .common import check_output

    check_output(path, force, field, suffixes)


def _figure(draw, output, force, model, hardware, chips, *, sweep, fixed, **kw):
    """Check the output, parse one swept range and one fixed value, draw, say where it went."""
    from .common import parse_range

    _check_output(output, force)
    n = float(parse_range(chips, "chips")[0]) if chips else None
    (xs, xtext), (fs, ftext) = sweep, fixed
    p = draw(model, hardware, chips=n, path=output, **{xs: parse_range(xtext, xs)},
             **{fs: float(parse_range(ftext, fs)[0])}, **kw)
    typer.echo(f"wrote {p}")


def register(app: typer.Typer) -> None:
    from .plot import plot_app

    @app.command("roofline")
    def roofline_cmd(
        model: str = typer.Argument(..., help="Model name or path to a HuggingFace config.json."),
        hardware: str = HW_OPT,
        chips: str = CHIPS_OPT,
        batch: str = typer.Option("1", "--batch", "-b", help="Sequences: a value, a list '1,8,64' or a range '1:4096:log'."),
        context: str = typer.Option("8192", "--context", "-L", help="Tokens already in each sequence's KV cache."),
        pass_len: str = typer.Option("1", "--pass-len", help="Tokens per sequence this pass: 1 = decode, >1 = prefill chunk."),
        weights_dtype: str = WDT_OPT,
        kv_dtype: str = KVDT_OPT,
        efficiency: str = EFF_OPT,
        weight_read: str = WR_OPT,
        json: bool = JSON_OPT,
        explain: bool = EXPLAIN_OPT,
    ):
        """Roofline step time, throughput and cost: max(compute, weight fetch + KV fetch)."""
        from ..engine.roofline import roofline
        from ..explain import fmt
        from .common import print_derivation, print_json, table

        b, c, p, n = _grid(*_inputs(batch, context, pass_len, chips))
        if b.size == 1:  # a single configuration prints scalars, not one-element lists
            b, c, p = float(b[0]), float(c[0]), float(p[0])
            n = None if n is None else float(n[0])
        r = roofline(model, hardware, chips=n, batch=b, context=c, pass_len=p, weights_dtype=weights_dtype,
                     kv_dtype=kv_dtype, efficiency=efficiency, weight_read=weight_read)
        size = r.step_s.size
        if json:
            d = r.as_dict()
            if explain:
                d["derivation"] = [r.explain(i).as_dict() for i in range(min(size, 16))]
            print_json(d)
            return
        if explain:
            for i in range(min(size, 16)):
                print_derivation(r.explain(i))
                print()
            return
        rows = []
        for i in range(size):
            q = r.at(i)
            rows.append([f"{q['chips']:g}", f"{q['batch']:g}", f"{q['context']:g}", f"{q['pass_len']:g}",
                         fmt(q["t_compute_s"], "s"), fmt(q["t_weights_s"], "s"), fmt(q["t_kv_s"], "s"),
                         fmt(q["step_s"], "s"), q["bound"], fmt(q["tokens_per_s_per_chip"], ""),
                         fmt(q["tokens_per_s_per_seq"], ""), f"{q['usd_per_mtok']:.4g}", f"{q['mfu']:.1%}",
                         "yes" if q["fits"] else "NO"])
        table(f"{r.model.name} on {r.hardware.name} ({r.hardware.chip.name}; weights {r.weights_dtype}, "
              f"KV {r.kv_dtype}, {r.efficiency.name}, weight read {weight_read})",
              ["chips", "batch", "context", "pass", "t_compute", "t_weights", "t_kv", "step", "bound",
               "tok/s/chip", "tok/s/seq", "$/Mtok", "MFU", "fits"], rows)

    @app.command("sweep")
    def sweep_cmd(
        model: str = typer.Argument(..., help="Model name or path to a HuggingFace config.json."),
        hardware: str = HW_OPT,
        chips: str = CHIPS_OPT,
        batch: str = typer.Option("1:16384:log", "--batch", "-b", help="Range 'LO:HI:log', 'LO:HI:logN', 'LO:HI:N' or a list."),
        context: str = typer.Option("8192", "--context", "-L", help="Range or list of context lengths."),
        pass_len: str = typer.Option("1", "--pass-len", help="Range or list of pass lengths."),
        weights_dtype: str = WDT_OPT,
        kv_dtype: str = KVDT_OPT,
        efficiency: str = EFF_OPT,
        weight_read: str = WR_OPT,
        csv: Path = typer.Option(..., "--csv", help="CSV file to write (never overwritten without --force)."),
        force: bool = typer.Option(False, "--force", help="Overwrite an existing output file."),
    ):
        """Evaluate the roofline over the cartesian product of ranges, as one vectorized call, into a CSV."""
        import numpy as np

        from ..engine.roofline import roofline

        _check_output(csv, force, "csv", None)
        b, c, p, n = _grid(*_inputs(batch, context, pass_len, chips))
        r = roofline(model, hardware, chips=n, batch=b, context=c, pass_len=p, weights_dtype=weights_dtype,
                     kv_dtype=kv_dtype, efficiency=efficiency, weight_read=weight_read)
        cols = ["chips", "batch", "context", "pass_len", "t_compute_s", "t_weights_s", "t_kv_s", "step_s",
                "tokens_per_s", "tokens_per_s_per_chip", "tokens_per_s_per_seq", "usd_per_mtok", "mfu", "mbu"]
        shape = r.step_s.shape
        data = np.column_stack([np.broadcast_to(np.asarray(getattr(r, k), dtype=float), shape).ravel() for k in cols])
        csv.parent.mkdir(parents=True, exist_ok=True)
        with open(csv, "w") as fh:
            fh.write(",".join(cols + ["bound"]) + "\n")
            bound = np.broadcast_to(r.bound, shape).ravel()
            lines = (",".join(f"{x:.6g}" for x in row) + "," + bnd for row, bnd in zip(data, bound))
            fh.write("\n".join(lines) + "\n")
        typer.echo(f"wrote {data.shape[0]} configurations to {csv}")

    @plot_app.command("batch")
    def plot_batch(
        model: str = typer.Argument(...),
        hardware: str = HW_OPT,
        chips: str = CHIPS_OPT,
        context: str = typer.Option("8192", "--context", "-L"),
        batch: str = typer.Option("1:65536:log200", "--batch", "-b"),
        weights_dtype: str = WDT_OPT,
        kv_dtype: str = KVDT_OPT,
        efficiency: str = EFF_OPT,
        weight_read: str = typer.Option("hit", "--weight-read", metavar="hit|all|both",
                                        help="Weights read per step: hit (experts routed to, default), all (the "
                                             "lecture's every weight: a flat line), or both drawn."),
        output: Path = typer.Option(Path("batch.png"), "--output", "-o", help=".png or .svg"),
        force: bool = typer.Option(False, "--force"),
    ):
        """Latency and cost per token vs batch, each term drawn (lecture 00:05–00:12)."""
        from ..plotting.batching import plot_batch as draw

        _figure(draw, output, force, model, hardware, chips, sweep=("batch", batch), fixed=("context", context),
                weights_dtype=weights_dtype, kv_dtype=kv_dtype, efficiency=efficiency, weight_read=weight_read)

    @plot_app.command("context")
    def plot_context(
        model: str = typer.Argument(...),
        hardware: str = HW_OPT,
        chips: str = CHIPS_OPT,
        batch: str = typer.Option("256", "--batch", "-b"),
        context: str = typer.Option("1K:2M:log200", "--context", "-L"),
        weights_dtype: str = WDT_OPT,
        kv_dtype: str = KVDT_OPT,
        efficiency: str = EFF_OPT,
        weight_read: str = typer.Option("hit", "--weight-read", metavar="hit|all|both",
                                        help="Weights read per step: hit (experts routed to, default), all (the "
                                             "lecture's every weight: a flat line), or both drawn."),
        output: Path = typer.Option(Path("context.png"), "--output", "-o", help=".png or .svg"),
        force: bool = typer.Option(False, "--force"),
    ):
        """Cost per token vs context length, each term drawn (lecture 01:35)."""
        from ..plotting.batching import plot_context as draw

        _figure(draw, output, force, model, hardware, chips, sweep=("context", context), fixed=("batch", batch),
                weights_dtype=weights_dtype, kv_dtype=kv_dtype, efficiency=efficiency, weight_read=weight_read)
