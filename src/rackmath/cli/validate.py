"""`rackmath validate` and `rackmath plot validate`: predicted vs measured on validation records."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import EXPLAIN_OPT, JSON_OPT

RECORDS_OPT = typer.Option(None, "--records", help="A directory (or file) of [[record]] TOML tables: your own "
                                                   "measurements, added to the shipped records (same id replaces). "
                                                   "Repeatable.")
ONLY_OPT = typer.Option(False, "--only-records", help="Use only the --records files, not the shipped records.")


def _percent(x, sign: str = "") -> str:
    """An error as a percentage: '12.3%', '+1.2e+05%' past 10⁴ % (never a 300-digit number), '—' if not finite."""
    import math

    x = float(x)
    if not math.isfinite(x):
        return "—"
    return f"{x:{sign}.1%}" if abs(x) < 100 else f"{100 * x:{sign}.2g}%"


def _warn_skipped(v) -> None:
    """One stderr line per user record the model refused (validation.record_problem), after the tables."""
    for sk in v.get("skipped", ()):
        typer.echo(f"warning: {sk['problem']} (record skipped)", err=True)


def _pct(s, k="median_abs_error"):
    return _percent(s[k]) if s.get("n") else "n/a"


def _worst(s):
    import math

    if not s.get("n"):
        return "n/a"
    w = float(s["worst_ratio"])
    return (f"{w:.2f}×" if w < 1e4 else f"{w:.2g}×" if math.isfinite(w) else "—") + f' ({s["worst"]["id"]})'


def _summary_line(s, sources):
    """The in-sample caption of `rackmath validate` (or why there is none)."""
    if not s.get("n"):
        return "no measured or approximate record to score (derived records are shown, not scored)"
    return (f'median |error| {_pct(s)} over {s["n"]} records from {sources} sources; p90 {_pct(s, "p90_abs_error")}; '
            f'within ±20%: {s["within_20pct"]}, within 2×: {s["within_2x"]}; worst {_worst(s)}')


def _held_out_line(h):
    """The in-sample caption's second half: the same records, each predicted with its source left out of the fit."""
    if not h.get("n"):
        return ""
    return (f' (in sample: the presets were fitted on these records). With each record\'s source left out of the fit '
            f'(rackmath validate --cv): median |error| {_pct(h)} over {h["n"]} records, within 2×: {h["within_2x"]}')


def _within_2x(s):
    return f'{s["within_2x"]}' if s.get("n") else "n/a"


def _fmt_value(v, unit):
    from ..units import human

    return human(v, unit, digits=4)


def _bound_line(b: dict) -> str:
    """One record faster than the ideal bound, with its likely causes (analyses.fitting.validation.below_ideal_bound)."""
    from ..units import human

    causes = "; ".join(f"{what} would allow {_fmt_value(v, b['unit'])}" for what, v in b["causes"])
    return (f"{b['id']}: measured {b['metric']} {_fmt_value(b['measured'], b['unit'])} beats rackmath's ideal "
            f"roofline {_fmt_value(b['bound'], b['unit'])} ({human(b['ratio'])}×) for the inputs it states — no "
            f"run beats the bound: check the record's dtype, model, GPU count and lengths"
            + (f" (likely: {causes})" if causes else ""))


def _flag_below_bound(recs, echo: bool) -> list[dict]:
    """Every record faster than the ideal bound; with ``echo`` each as a 'warning:' line on stderr, before any fit
    (the table says it in its status column and caption)."""
    from ..analyses.fitting.validation import below_ideal_bound

    flags = [b for b in (below_ideal_bound(r) for r in recs) if b]
    for b in flags if echo else ():
        typer.echo(f"warning: {_bound_line(b)}", err=True)
    return flags


def _group_rows(by: dict) -> list[list]:
    return [[g, str(s["n"]), _pct(s), _pct(s, "p90_abs_error"), f'{s["within_2x"]}/{s["n"]}', _worst(s)]
            for g, s in by.items()]


GROUP_COLS = ["group", "n", "median |err|", "p90 |err|", "within 2×", "worst ratio"]
OUTSIDE_COLS = ["record", "source", "metric", "measured", "predicted (held out)", "ratio"]


def _outside_2x_rows(recs: list, limit: int = 20) -> tuple[list[list], int]:
    """Held-out predictions off by more than 2× (either way), worst first: at most ``limit`` rows, and how many more."""
    out = [r for r in recs if r.get("predicted") and r.get("measured")
           and max(r["predicted"] / r["measured"], r["measured"] / r["predicted"]) > 2.0]
    out.sort(key=lambda r: -max(r["predicted"] / r["measured"], r["measured"] / r["predicted"]))
    from ..specs.records import UNITS

    rows = [[r["id"], r["source_group"], r["metric"], _fmt_value(r["measured"], UNITS.get(r["metric"], "")),
             _fmt_value(r["predicted"], UNITS.get(r["metric"], "")), f'{r["predicted"] / r["measured"]:.2f}×']
            for r in out[:limit]]
    return rows, max(len(out) - limit, 0)


def _print_by_metric(rep: dict, what: str, table) -> None:
    """h34 (issue 34): one table per metric class — output tok/s/GPU, TPOT, TTFT, never pooled — by stack version
    (with the record counts), then by chip (``validation.metric_report``)."""
    for m, s in rep["summary_by_metric"].items():
        rows = [[f"all ({m})", str(s["n"]), _pct(s), _pct(s, "p90_abs_error"), f'{s["within_2x"]}/{s["n"]}',
                 _worst(s)]]
        rows += [[f"stack {k}"] + r[1:] for k, r in zip(rep["by_metric_and_stack"][m],
                                                        _group_rows(rep["by_metric_and_stack"][m]))]
        rows += [[f"chip {k}"] + r[1:] for k, r in zip(rep["by_metric_and_chip"][m],
                                                       _group_rows(rep["by_metric_and_chip"][m]))]
        table(f"rackmath validate, {m}: {what}", GROUP_COLS, rows)


def validate_cmd(
    json: bool = JSON_OPT,
    ideal: bool = typer.Option(False, "--ideal", help="Predict with the ideal roofline instead of the presets."),
    efficiency: str = typer.Option(None, "--efficiency", metavar="PRESET|preset|auto|measured",
                                   help="Predict every record with this preset (one of the catalog's, or yours "
                                        "from `validate --refit` via --catalog DIR) instead of each chip's own "
                                        "('preset', the default); 'auto' as serve chooses (a listed stack version: "
                                        "the measured path); 'measured' the kernel curves and each version's "
                                        "times."),
    records: list[Path] = RECORDS_OPT,
    only_records: bool = ONLY_OPT,
    refit: bool = typer.Option(False, "--refit", help="Fit the efficiency parameters on the records and print "
                                                      "them as [[efficiency]] TOML (or write them: --output)."),
    output: Path = typer.Option(None, "--output", "-o", "--save",
                                help="With --refit: write the presets TOML here ('-' = stdout)."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing --output file."),
    prefix: str = typer.Option(None, "--prefix", help="With --refit: preset name prefix (default 'user' with "
                                                      "--records, none otherwise)."),
    cv: bool = typer.Option(False, "--cv", help="Out-of-group errors: leave one source / hardware family / "
                                               "model family out, refit, predict what was left out."),
    scheme: str = typer.Option("source,hardware,model", "--scheme",
                               help="With --cv: comma list of source, hardware, model, loo, stack (one stack "
                                    "version), group (one InferenceMAX model × chip × framework group)."),
    with_unfitted: bool = typer.Option(False, "--with-unfitted",
                                       help="With --cv: fit and hold out the fit = false records too (the "
                                            "InferenceMAX campaign the shipped presets were not fitted on)."),
    jobs: int = typer.Option(None, "--jobs", "-j", min=1, max=64,
                             help="With --cv: worker processes for the folds (default: the CPUs, at most 8)."),
    ids: str = typer.Option(None, "--id", help="Only these records: a comma list of ids or globs (C3-*, "
                                                "*-ttft)."),
    explain: bool = EXPLAIN_OPT,
    train: bool = typer.Option(False, "--train", help="The training records instead: fit the training step "
                                                      "model and cross-validate it (cli/train.py)."),
):
    """Every validation record: inputs, measured, predicted, signed error; summaries by source and family.
    \f
    One parameter per option (typer reads the command's options from its signature)."""
    if train:
        from .train import validate_train_cmd

        return validate_train_cmd(json=json, ideal=ideal, refit=refit, output=output, force=force, ids=ids,
                                  explain=explain, others={"records": records, "only_records": only_records,
                                                           "cv": cv, "jobs": jobs, "prefix": prefix,
                                                           "scheme": scheme != "source,hardware,model"})
    from .common import check_output, print_json

    ideal, efficiency = _check_flags(ideal=ideal, efficiency=efficiency, records=records,
                                     only_records=only_records, refit=refit, output=output, force=force,
                                     prefix=prefix, cv=cv, scheme=scheme, with_unfitted=with_unfitted, jobs=jobs,
                                     ids=ids, explain=explain)
    from ..analyses.fitting.validation import records as load, select

    recs = load(tuple(records or ()), only=only_records)
    if ids is not None:
        recs = select(recs, _id_patterns(ids))
    if explain:
        _print_explained(recs, efficiency, ideal, json)
        return
    flags = _flag_below_bound(recs, echo=refit or json) if not cv else []
    if refit:
        _refit(recs, output, force, prefix if prefix is not None else ("user" if records else ""), json,
               check_output, print_json, flags)
        return
    if cv:
        _run_cv(recs, scheme, jobs, with_unfitted, json)
        return
    from ..analyses.fitting.validation import validate

    choice = None if efficiency is None else efficiency.strip()
    if choice is not None and choice.lower() in ("preset", "auto", "measured"):
        choice = choice.lower()
    eff = None if choice == "preset" else choice  # None: each record's chip's preset
    v = validate(efficiency=eff, ideal=ideal, recs=recs)
    v["below_ideal_bound"] = flags
    if json:
        print_json(v)
        _warn_skipped(v)
        return
    _print_validation(v, flags, ideal, eff)


def _id_patterns(ids: str) -> list[str]:
    """--id: a comma list of record ids or globs."""
    from ..errors import InputError

    pats = [x.strip() for x in ids.split(",") if x.strip()]
    if not pats:
        raise InputError("id", f"{ids!r} names no record", "a comma list of record ids or globs")
    return pats


def _check_flags(*, ideal, efficiency, records, only_records, refit, output, force, prefix, cv, scheme,
                 with_unfitted, jobs, ids, explain):
    """The combinations of validate's options that are errors (one line each, exit 2); returns ``(ideal,
    efficiency)`` with ``--efficiency ideal`` read as ``--ideal``. One keyword per option of the command."""
    from ..errors import InputError

    if only_records and not records:
        raise InputError("only_records", "--only-records without --records", "--records DIR --only-records")
    if ideal:  # --ideal with --efficiency X is an error, as on every command (common.efficiency_for)
        from .common import efficiency_for

        efficiency_for(None, efficiency, True)
    if efficiency is not None and efficiency.strip().lower() == "ideal":  # the same as --ideal
        ideal, efficiency = True, None
    if efficiency is not None and (cv or refit):
        flag = "--cv" if cv else "--refit"
        raise InputError("efficiency", f"--efficiency with {flag}",
                         "one of them (--cv and --refit fit presets; --efficiency validates one)")
    if efficiency is not None and efficiency.strip().lower() not in ("auto", "preset", "measured"):
        from ..engine.efficiency import load_efficiency

        load_efficiency(efficiency)  # an unknown preset: one line naming the closest
    if (cv or refit) and ideal:
        raise InputError("ideal", f"--ideal with {'--cv' if cv else '--refit'}",
                         "one of them (the ideal roofline has nothing fitted)")
    if cv and refit:
        raise InputError("cv", "--cv with --refit", "one of them")
    if jobs is not None and not cv:
        raise InputError("jobs", "--jobs without --cv", "--cv --jobs N")
    if with_unfitted and not cv:
        raise InputError("with_unfitted", "--with-unfitted without --cv", "--cv --with-unfitted")
    if scheme != "source,hardware,model" and not cv:
        raise InputError("scheme", "--scheme without --cv", "--cv --scheme source,hardware,model,loo")
    if (output is not None or force or prefix is not None) and not refit:
        raise InputError("output", "--output/--force/--prefix without --refit", "--refit --output FILE")
    if (cv or refit) and (ids is not None or explain):
        flag = "--id" if ids is not None else "--explain"
        raise InputError(flag[2:], f"{flag} with {'--cv' if cv else '--refit'}",
                         "--id/--explain on the predictions, or --cv/--refit over every record")
    if explain and ids is None:
        raise InputError("explain", "--explain without --id", "--id ID[,ID…] --explain (one derivation a record)")
    return ideal, efficiency


def _print_explained(recs, efficiency, ideal, json) -> None:
    """``validate --id … --explain``: each predicted record's derivation."""
    from ..analyses.fitting.validation import explain as derive
    from ..errors import InputError
    from .common import print_derivation, print_json

    ds = [derive(r, efficiency=efficiency, ideal=ideal) for r in recs if r.exclude is None]
    if not ds:
        raise InputError("id", "only excluded records match", "a record that is predicted")
    if json:
        print_json({"derivations": [d.as_dict() for d in ds]})
        return
    for d in ds:
        print_derivation(d)


def _run_cv(recs, scheme, jobs, with_unfitted, json) -> None:
    """``validate --cv``: the out-of-group errors of each scheme."""
    from ..analyses.fitting.crossval import CV_SCHEMES, cross_validate
    from ..errors import InputError
    from .common import print_json, table

    schemes = [s.strip() for s in scheme.split(",") if s.strip()]
    bad = [s for s in schemes if s not in CV_SCHEMES]
    if bad or not schemes:
        raise InputError("scheme", f"{(bad or [scheme])[0]!r}", "a comma list of " + ", ".join(CV_SCHEMES))
    c = _cv_with_progress(cross_validate, recs, tuple(schemes), jobs, with_unfitted)
    if json:
        print_json(c)
        return
    _print_cv(c, schemes, table)


def _print_validation(v: dict, flags: list, ideal: bool, eff) -> None:
    """The validation tables: every record, then the summaries by preset, family and source, and by metric."""
    from .common import Col, table

    flagged = {b["id"] for b in flags}
    rows = [[r["id"], r["source_group"], r["hardware_family"], r["metric"], _fmt_value(r["measured"], r["unit"]),
             _fmt_value(r["predicted"], r["unit"]), _percent(r["error"], "+"),
             r["status"] + ("" if r["fitted"] else " (not fitted)")
             + (", below the ideal bound" if r["id"] in flagged else "")] for r in v["records"]]
    s, n = v["summary"], v["counts"]
    # what a validation table is for stays at any width: id, measured, predicted, error, status
    table("rackmath validate" + (" (ideal roofline — a lower bound on time)" if ideal else
                                 f" (calibrated prediction: preset {eff} for every record)" if eff else
                                 " (calibrated prediction: each chip's default preset)"),
          [Col("id", 0), Col("source", 3), Col("hw family", 4), Col("metric", 2), Col("measured", 0),
           Col("predicted", 0), Col("error", 0), Col("status", 0, text=True, min_width=8)], rows,
          caption=_summary_line(s, n["sources"]) + _held_out_line(v["summary_held_out"])
          + "".join(f"\nWARNING: {_bound_line(b)}" for b in flags))
    for key, title in (("summary_by_efficiency", "by the efficiency preset each record was predicted with "
                                                 "(ideal = no preset for that chip)"),
                       ("summary_by_hardware_family", "by hardware family"),
                       ("summary_by_model_family", "by model family"), ("summary_by_source", "by source")):
        table(f"rackmath validate, {title}", GROUP_COLS, _group_rows(v[key]))
    _print_by_metric(v["by_metric"], "fitted records, in sample", table)
    if v["not_fitted"]["summary"].get("n"):
        measured = isinstance(eff, str) and eff.strip().lower() == "measured"
        _print_by_metric(v["not_fitted"], "fit = false records (InferenceMAX), " + (
            "in sample: --efficiency measured's stack times per version were fitted on them" if measured
            else "out of sample: presets not fitted on them"), table)
    if v["excluded"]:
        table("excluded records (kept as data, not predicted)", ["id", "reason"],
              [[e["id"], e["reason"]] for e in v["excluded"]])
    _warn_skipped(v)


def _cv_with_progress(cross_validate, recs, schemes, jobs, with_unfitted=False):
    """Cross-validation with a progress bar on stderr (a terminal only; stdout stays clean for --json)."""
    import sys

    if not sys.stderr.isatty():
        return cross_validate(recs, schemes=schemes, jobs=jobs, include_unfitted=with_unfitted)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..analyses.fitting.calibration import fitted_records
    from ..analyses.fitting.crossval import SCHEME_KEY

    use = fitted_records(recs, with_unfitted)
    total = sum(len({getattr(r, SCHEME_KEY[s], None) for r in use} - {None}) for s in schemes)
    bar = Progress(TextColumn("cross-validating (refit per fold)"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.description}"), TimeElapsedColumn(), console=Console(stderr=True),
                   transient=True)
    task = bar.add_task("full fit", total=total)
    bar.start()
    try:
        return cross_validate(recs, schemes=schemes, jobs=jobs, include_unfitted=with_unfitted,
                              progress=lambda sc, g: bar.update(task, advance=0 if sc == "in-sample" else 1,
                                                                description=f"{sc}: {g}"))
    finally:
        bar.stop()


def _refit(recs, output, force, prefix, json, check_output, print_json, flags=()):
    import math

    from ..analyses.fitting.calibration import as_toml, fit, fitted_records, presets_from_fit

    use = fitted_records(recs)
    f = fit(use)
    presets = presets_from_fit(f, prefix=prefix)
    if json and output is None:
        print_json({"fit": f.as_dict(), "presets": presets, "below_ideal_bound": list(flags)})
        return
    from ..units import counted

    header = (f"Efficiency presets fitted by `rackmath validate --refit` on {counted(len(use), 'record')} from "
              f"{counted(len(f.sources), 'source')}\n({counted(f.n_params, 'parameter')}; mean |log error| "
              f"{f.objective:.3f}). Use with: rackmath --catalog DIR …")
    # what is true of this fit, said plainly (issue 35): how well it reproduces its own records (in sample: no
    # out-of-sample band exists until records it was not fitted on are predicted), and what it cannot know
    typical = math.expm1(f.objective)
    notes = [(f"in sample the presets reproduce these records within about ±{typical:.0%} (mean |log error| "
              f"{f.objective:.3f})" if f.objective <= math.log(1.25) else
              f"the presets do NOT reproduce these records: mean |log error| {f.objective:.3f}, a typical record "
              f"off by ±{typical:.0%} in sample")
             + f"; fitted on {counted(len(use), 'record')}, they have no validated error band (predict records "
               "left out of the fit, or run validate --cv, to measure one)"]
    if flags:
        notes.append(f"{counted(len(flags), 'record')} ({', '.join(b['id'] for b in flags)}) "
                     f"{'is' if len(flags) == 1 else 'are'} faster than the ideal bound: no efficiency reaches "
                     "them; fix their inputs (dtype, model, GPUs, lengths) or leave them out")
    if f.n_params > len(use):
        notes.append(f"fewer records ({len(use)}) than fitted parameters ({f.n_params}): the parameters they do "
                     "not constrain are arbitrary — predict other configurations with care, or add records")
    for warn in notes:
        header += f"\nNote: {warn}."
        typer.echo(f"note: {warn}", err=True)
    text = as_toml(presets, header=header)
    if output is None or str(output) == "-":
        typer.echo(text)
        return
    check_output(output, force, "output", (".toml",))
    output.write_text(text)
    typer.echo(f"wrote {output}", err=True)


def _print_cv(c, schemes, table):
    from ..analyses.fitting.calibration import describe_counts
    from ..analyses.fitting.crossval import SCHEME_LABEL

    head = describe_counts(c["counts"])
    priors = [f'{p["name"]} ({fam}) {v:g}' for p in c.get("spec", []) for fam, v in p.get("prior", {}).items()]
    if priors:
        head += f'; priors measured on silicon: {", ".join(priors)}'
    rows = [["in-sample (no hold-out)", str(c["in_sample"]["summary"]["n"]), _pct(c["in_sample"]["summary"]),
             _pct(c["in_sample"]["summary"], "p90_abs_error"),
             _within_2x(c["in_sample"]["summary"]), _worst(c["in_sample"]["summary"])]]
    for s in schemes:
        x = c[s]["summary"]
        rows.append([SCHEME_LABEL[s], str(x["n"]), _pct(x), _pct(x, "p90_abs_error"), _within_2x(x), _worst(x)])
    table("rackmath validate --cv: out-of-group error (refit without the group, predict it)",
          ["scheme", "n", "median |err|", "p90 |err|", "within 2×", "worst ratio"], rows, caption=head)
    for s in schemes:
        table(f"{SCHEME_LABEL[s]}: by held-out group", GROUP_COLS, _group_rows(c[s]["summary_by_group"]),
              caption="; ".join(f'{f["group"]}: {f["reason"]}' for f in c[s]["not_predictable"]) or None)
    for s in schemes:
        _print_by_metric(c[s]["by_metric"], f"{SCHEME_LABEL[s]}, held out", table)
    for s in schemes:
        rows, more = _outside_2x_rows(c[s].get("records", []))
        if rows:
            table(f"{SCHEME_LABEL[s]}: records outside 2× when their group is held out", OUTSIDE_COLS, rows,
                  caption=f"… and {more} more (--json lists every record)" if more else None)


def plot_validate_cmd(
    output: Path = typer.Option(Path("validate.png"), "--output", "-o", help="Figure file (.png or .svg)."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing file."),
    records: list[Path] = RECORDS_OPT,
    only_records: bool = ONLY_OPT,
    json: bool = JSON_OPT,
):
    """Predicted vs measured for every validation record, colored by source."""
    from ..analyses.fitting.validation import records as load
    from ..analyses.fitting.validation import validate
    from ..plotting.validate import plot_validate
    from .common import check_output

    check_output(output, force, "output", (".png", ".svg", ".pdf"))
    recs = load(tuple(records or ()), only=only_records)
    v = validate(recs=recs)
    # the ideal overlay is drawn for the fitted records only (the plot's points): predict only those
    p = plot_validate(v, output, ideal=validate(ideal=True, recs=[r for r in recs if r.fitted]))
    typer.echo(f"wrote {p}", err=True)
    if json:
        from .common import print_json

        print_json({"output": str(p)} | v)


def register(app: typer.Typer) -> None:
    from .plot import plot_app

    app.command("validate")(validate_cmd)
    plot_app.command("validate")(plot_validate_cmd)
