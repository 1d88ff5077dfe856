"""`rackmath measure`: the lecture's roofline measured on this machine (needs the optional extra rackmath[torch])."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import JSON_OPT


def _progress(enabled: bool):
    """rich progress bars on stderr (stdout stays clean for --json); a no-op when disabled or when stderr is not
    a terminal (a log or a pipe gets no bar lines, and an error stays the one line it is)."""
    import sys

    if not enabled or not sys.stderr.isatty():
        return None, None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    prog = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=Console(stderr=True), transient=False)

    def stage(task, total):
        tid = prog.add_task(task, total=total)
        return lambda n=1: prog.advance(tid, n)

    return prog, stage


def register(app: typer.Typer) -> None:
    app.command("measure")(measure_cmd)


def measure_cmd(
    model: str = typer.Argument("llama-3.1-8b", help="Model (catalog name or HF config.json) to scale down "
                                                     "and decode with random weights."),
    device: str = typer.Option("auto", "--device", help="cpu, cuda or auto (cuda when torch sees a GPU)."),
    dtype: str = typer.Option("bf16,fp32", "--dtype", help="Matmul dtypes to benchmark (comma list of bf16, "
                                                           "fp16, fp32); the first one runs the decode sweep."),
    quick: bool = typer.Option(False, "--quick", help="Small sizes: under 30 s on a 2-core CPU."),
    batch: str = typer.Option(None, "--batch", "-b", help="Batch sizes of the sweep (list or range; default "
                                                          "1…512 on CPU quick, more otherwise)."),
    context: str = typer.Option(None, "--context", "-L", help="Context lengths of the sweep (default two: "
                                                             "128 and 1024 on CPU quick; 8K = 8,000, 8Ki = 8,192)."),
    weight_budget: str = typer.Option(None, "--weight-budget", help="Weight bytes of the scaled-down model "
                                                                   "(default 256 MB quick / 1 GB on CPU)."),
    threads: str = typer.Option(None, "--threads", help="CPU threads for torch (default: torch's choice less the cores busy with other work, "
                                                  "from the load average; at least 1)."),
    name: str = typer.Option(None, "--name", help="Chip name to save under (default measured-cpu or "
                                                 "measured-<gpu>)."),
    save: Path = typer.Option(None, "--save", help="Directory to write <chip>.toml (chip, system, model, "
                                                   "preset) and <chip>-records.toml; use with --catalog DIR."),
    output: Path = typer.Option(None, "--output", "-o", help="Plot file (.png or .svg); with --save the "
                                                             "default is DIR/<chip>.png."),
    force: bool = typer.Option(False, "--force", help="Overwrite existing output files."),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bars (they show only on a terminal)."),
    curves: bool = typer.Option(False, "--curves", help="Measure kernel curves instead (GEMM vs M, the kernel floor, "
                                                        "decode attention and MLA vs context) in the format of the "
                                                        "shipped ones, and compare them with the chip's current "
                                                        "curves; --save DIR writes DIR/kernels/<chip>.toml."),
    json: bool = JSON_OPT,
):
    """Measure matmul FLOP/s, memory bandwidth and a real decode sweep; compare with this machine's roofline.
    \f
    One parameter per option of `rackmath measure` (typer reads them from the signature).
    """
    from ..measuring import measure
    from ..specs.models import load_model

    if curves:
        return _curves_cmd(device, quick, name, save, force, no_progress, json,
                           unused={"batch": batch, "context": context, "weight_budget": weight_budget,
                                   "threads": threads, "output": output,
                                   "dtype": None if dtype == "bf16,fp32" else dtype})
    dts, b, c, wb, th = _parse_sizes(dtype, batch, context, weight_budget, threads)
    _check_outputs(output, save, name, force)
    _check_device(device)  # before the progress bar starts: one clean line
    load_model(model)  # an unknown model is one line too, before any output
    prog, stage = _progress(not no_progress)
    if prog is not None:
        prog.start()
    try:
        res = measure(model, device=device, dtypes=dts, quick=quick, name=name, batches=b, contexts=c,
                      weight_budget=wb, threads=th, progress=stage)
    finally:
        if prog is not None:
            prog.stop()
    if res["device"].get("warning"):
        typer.echo(f"warning: {res['device']['warning']}", err=True)
    for p in _write_outputs(res, save, output, force):
        typer.echo(f"wrote {p}", err=True)
    if json:
        from .common import print_json

        print_json({k: v for k, v in res.items() if not k.startswith("_")})
        return
    _render(res)


def _check_device(device: str) -> None:
    """--device: cpu, cuda or auto (checked before any torch import or output)."""
    from ..errors import InputError

    if device not in ("cpu", "cuda", "auto"):
        raise InputError("device", f"unknown {device!r}", "cpu, cuda or auto")


def _parse_sizes(dtype: str, batch, context, weight_budget, threads):
    """--dtype, --batch, --context, --weight-budget and --threads, checked: (dtypes, batches, contexts, weight
    bytes, threads), None where not given."""
    import os

    from .. import units
    from ..errors import InputError
    from .common import parse_range

    dts = [d.strip() for d in dtype.split(",") if d.strip()]
    if not dts:
        raise InputError("dtype", "empty", "a comma list such as bf16,fp32")
    for d in dts:
        units.normalize_dtype(d, "dtype")
    b = [int(x) for x in parse_range(batch, "batch", integer=True)] if batch else None
    c = [int(x) for x in parse_range(context, "context", integer=True)] if context else None
    if b and max(b) > 65536:
        raise InputError("batch", f"{max(b):g} sequences", "at most 65536")
    if c and min(c) < 1:
        raise InputError("context", f"{min(c):g} tokens", "at least 1 token of KV per decode step (up to 1M)")
    if c and max(c) > 1_048_576:
        raise InputError("context", f"{max(c):g} tokens", "at most 1M tokens")
    wb = units.parse_bytes(weight_budget, "weight_budget") if weight_budget else None
    if wb is not None and not 1e6 <= wb <= 1e12:
        raise InputError("weight_budget", units.format_bytes(wb), "1 MB to 1 TB")
    th = None
    if threads is not None:
        th = units.parse_count(threads, "threads")
        cpus = os.cpu_count() or 1
        if th != int(th) or not 1 <= th <= cpus:
            raise InputError("threads", f"{threads!r}", f"a whole number from 1 to {cpus} (this machine's CPUs: "
                             "more threads only contend for them)")
        th = int(th)
    return dts, b, c, wb, th


def _check_outputs(output, save, name, force: bool) -> None:
    """Before the run: the plot file, the --save directory (or its nearest existing ancestor) and the files --name
    would write there, none overwritten without --force."""
    from ..errors import InputError
    from ..measuring import check_name
    from .common import check_output

    if output is not None:
        check_output(output, force, "output", (".png", ".svg", ".pdf"))
    if save is not None:
        up = save
        while not up.exists() and up.parent != up:  # the directory is created later: its nearest existing
            up = up.parent                          # ancestor must be a directory, checked before the run
        if not up.is_dir():
            raise InputError("save", f"{up} exists and is not a directory", "a directory (created when missing)")
    check_name(name)  # before any file name is built from it
    if save is not None and name:
        for p in (save / f"{name}.toml", save / f"{name}-records.toml"):
            if p.exists() and not force:
                raise InputError("save", f"{p} exists and would be overwritten", "another --save DIR, or --force")


def _write_outputs(res: dict, save, output, force: bool) -> list:
    """--save's catalog and records, and the plot (--output, or DIR/<chip>.png with --save): the paths written."""
    from ..measuring import save as save_result
    from .common import check_output

    written = []
    if save is not None:
        written += save_result(res, save, force=force)
    plot_path = output
    if plot_path is None and save is not None:
        plot_path = check_output(save / f"{res['_system'].chip.name}.png", force, "output")
    if plot_path is not None:
        from ..plotting.measure import plot_measure

        plot_measure(res, plot_path)
        written.append(plot_path)
    return written


def _render(res: dict) -> None:
    """The measured peaks, the decode sweep and the knees, in the tables every command prints (common.table: fit the
    terminal, no boxes, --wide/--columns)."""
    from ..explain import fmt
    from .common import Col, table

    dev = res["device"]
    chip = res["chip"]
    rows = [[d, fmt(v, "FLOP/s")] for d, v in res["peak_flops"].items()]
    bw = res["bandwidth"]
    g = res["gemm_curve"]
    rows += [["memory bandwidth", f"{fmt(bw['bytes_per_s'], 'B/s')} (read {fmt(bw['read_bytes_per_s'], 'B/s')}, "
                                  f"copy {fmt(bw['copy_bytes_per_s'], 'B/s')}, {fmt(bw['buffer_bytes'], 'B')} buffer)"],
             ["GEMM η(M) fit", f"η_max {g['fit']['eta_max']:.3f}, M_half {g['fit']['m_half']:.3g} tokens "
                               f"({len(g['shapes'])} weight shapes of the model, {g['dtype']}; rms error {g['fit']['rms_rel_error']:.1%})"],
             ["attention (KV read)", f"{fmt(res['attention']['kv_bytes_per_s'], 'B/s')} (batch "
                                     f"{res['attention']['batch']}, context {res['attention']['context']:,})"],
             ["elementwise", f"{fmt(res['elementwise']['bytes_per_s'], 'B/s')} × "
                             f"{fmt(res['elementwise']['bytes_per_seq'], 'B')} of activations per sequence per step"],
             ["dispatch / op", f"{fmt(res['dispatch_s'], 's')} × {res['ops_per_step']} ops per decode step"],
             ["hardware ratio", f"{chip['hardware_ratio'].get(res['dtype'], 0):.0f} ({res['dtype']})"]]
    if res.get("collective"):
        co = res["collective"]
        rows.append(["peer copy", f"{fmt(co['p2p_bytes_per_s'], 'B/s')} ({co['devices']} devices)"])
    thr = f", {dev['threads']} threads, load average {dev.get('load_average')}" if dev["type"] == "cpu" else ""
    table(f"{chip['name']}: {dev['name']} ({dev['type']}, torch {dev['torch']}{thr}) — measured peaks",
          [Col("quantity", 0), Col("value", 0, text=True)], rows)
    m = res["model"]
    p = res["preset"]
    sweep = [[f"{r['context']:,}", f"{r['batch']:,}", fmt(r["measured_s"], "s"), fmt(r["roofline_s"], "s"), r["bound"],
              f"{r['measured_s'] / r['roofline_s']:.2f}×", fmt(r["calibrated_s"], "s"), f"{r['error_calibrated']:+.0%}"]
             for r in res["sweep"]]
    s = res["summary"]
    table(f"decode sweep: {m['name']} ({m['description']}) — ideal roofline from the measured peaks (a lower bound "
          f"on time) and calibrated prediction, preset {p['name']} (from micro-benchmarks only)",
          [Col("context", 0), Col("batch", 0), Col("measured", 0), Col("ideal roofline", 0), Col("bound", 1),
           Col("measured/ideal", 1), Col("calibrated", 0), Col("cal. error", 0)],
          sweep, caption=f"median |log error|: ideal {s['median_abs_log_error_ideal']:.2f}, calibrated "
                         f"{s['median_abs_log_error_calibrated']:.2f} over {s['points']} points; "
                         f"{res['seconds']:.1f} s in all")
    kn = [[f"{k['context']:,}", "—" if k["measured"] is None else f"{k['measured']:.0f}",
           "none (memory-bound)" if k["predicted"] is None else f"{k['predicted']:.0f}",
           "—" if k["predicted_calibrated"] is None else f"{k['predicted_calibrated']:.0f}"] for k in res["knees"]]
    table("knee (batch where compute catches up with the fixed memory time)",
          ["context", "measured", "ideal roofline", "calibrated"], kn)


def _curves_cmd(device: str, quick: bool, name, save, force: bool, no_progress: bool, json: bool, unused: dict):
    """``measure --curves``: measure, compare with the chip's current curves, write DIR/kernels/<chip>.toml."""
    from ..errors import InputError
    from ..measuring import check_name, curves_path, measure_curves, save_curves

    given = [k for k, v in unused.items() if v is not None]
    if given:
        opt = "--" + given[0].replace("_", "-")
        raise InputError(given[0], f"{opt} does not apply to --curves", "--device, --quick, --name, --save, --force, "
                                                                     "--json with --curves")
    _check_device(device)
    check_name(name)
    if save is not None:
        curves_path(save, name, force)
    show = (lambda label: typer.echo(f"measuring {label}", err=True)) if not no_progress and not json else None
    res = measure_curves(device=device, quick=quick, name=name, progress=show, save=save, force=force)
    if save is not None:
        for p in save_curves(res, save, force=force):
            typer.echo(f"wrote {p}", err=True)
    if json:
        from .common import print_json

        print_json(res)
        return
    _render_curves(res)


def _render_curves(res: dict) -> None:
    """Each measured curve's ratio to the chip's current curve, and the silicon numbers from each."""
    from ..explain import fmt
    from .common import Col, table

    rows = []
    for c in res["comparison"] or [{"name": c["name"], "reference": None} for c in res["curves"]]:
        if c.get("median_ratio") is None:
            rows.append([c["name"], "—", "—", "no curve of this shape to compare"])
        else:
            rows.append([c["name"], f"{c['points']}", f"{c['median_ratio']:.2f}×",
                         f"{c['min_ratio']:.2f}–{c['max_ratio']:.2f}×  vs “{c['reference']}”"])
    ref = res["reference"] or "none (the chip has no curves: these are its first)"
    table(f"{res['chip']}: kernel curves measured on {res['device']['name']} (torch {res['device']['torch']}) beside "
          f"its current curves ({ref}); ratio = measured / current time",
          [Col("curve", 0, text=True), Col("points", 0), Col("median ratio", 0), Col("range", 0, text=True)], rows,
          caption=f"{res['seconds']:.1f} s in all")
    sm, sr = res["silicon"]["measured"], res["silicon"]["reference"]
    if sm:
        names = {"kernel_latency_s": "τ (kernel floor)", "eta_memory": "η_m (M = 1, BF16)",
                 "eta_memory_kv": "η_m,kv (GQA decode attention)", "eta_memory_mla": "η_m,mla (MLA decode)"}
        names.update({k: ("η_c " if k.startswith("eta") else "M½ (rows) ") + k.rsplit("_", 1)[-1]
                      for k in sorted(set(sm) | set(sr or {})) if k.startswith(("eta_compute_", "gemm_half_"))})

        def cell(d, k):
            if not d or k not in d:
                return "—"
            return fmt(d[k], "s") if k == "kernel_latency_s" else f"{d[k]:.3g}"

        srows = [[label, cell(sm, k), cell(sr, k)] for k, label in names.items()]
        table("silicon numbers of --efficiency measured, from each set of curves (specs/kernels.silicon)",
              [Col("number", 0, text=True), Col("measured here", 0), Col("current", 0)], srows)
