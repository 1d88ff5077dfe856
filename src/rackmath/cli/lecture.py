"""`rackmath lecture`: every claim of the lecture (R1…R43) reproduced, chapter by chapter."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import JSON_OPT


def _show(v) -> str:
    from ..explain import fmt

    if isinstance(v, (tuple, list)):
        return "–".join(_show(x) for x in v)
    if isinstance(v, (int, float)):
        return fmt(v)
    return str(v)


def _write_plots(outdir: Path, force: bool, modules) -> list[str]:
    """Draw every chapter's figures in a scratch directory, then move them into ``outdir`` — all or nothing:
    if any would overwrite an existing file and not ``force``, nothing is written (error naming --plots)."""
    import shutil
    import tempfile

    from ..errors import InputError
    from .common import wrote

    if outdir.exists() and not outdir.is_dir():
        raise InputError("plots", f"{outdir} is not a directory", "a directory for the figures")
    with tempfile.TemporaryDirectory() as tmp:
        made = []
        for mod in modules:
            if hasattr(mod, "plots"):
                made += [Path(p) for p in mod.plots(Path(tmp))]
        clash = [outdir / p.name for p in made if (outdir / p.name).exists()]
        if clash and not force:
            raise InputError("plots", f"{clash[0]} exists and would be overwritten"
                             + (f" (and {len(clash) - 1} more)" if len(clash) > 1 else ""), "a new directory, or --force")
        outdir.mkdir(parents=True, exist_ok=True)
        out = []
        for p in made:
            shutil.move(str(p), outdir / p.name)
            out.append(str(outdir / p.name))
    wrote(outdir, f"{len(out)} figures")
    return out


def register(app: typer.Typer) -> None:
    @app.command("lecture")
    def lecture_cmd(
        json: bool = JSON_OPT,
        plots: Path = typer.Option(None, "--plots", metavar="DIR",
                                   help="Also write the chapters' figures (ch*-*.png) into DIR (created if missing; "
                                        "existing figures are not overwritten without --force)."),
        force: bool = typer.Option(False, "--force", help="Overwrite existing figures in --plots DIR."),
        only: str = typer.Option(None, "--only", help="Comma-separated claim IDs, e.g. R6,R10 (R41 includes R41-ddr, …)."),
        explain: bool = typer.Option(False, "--explain", help="Print each claim's derivation."),
        markdown: bool = typer.Option(False, "--markdown", help="Print a Markdown table (docs/lecture.md)."),
    ):
        """The lecture's numbers reproduced: rackmath's value, its inputs, the lecture's value, agreement."""
        from ..claims import all_claims, chapter_modules
        from .common import console, print_json

        claims = all_claims()
        if only:
            want = {s.strip().upper() for s in only.split(",") if s.strip()}
            known = {c.id.upper() for c in claims} | {c.id.upper().split("-")[0] for c in claims}
            unknown = sorted(want - known)
            if unknown:
                from ..errors import UnknownNameError

                raise UnknownNameError("claim", unknown[0], known, "claim IDs R1 … R43 (see `rackmath lecture`)")
            claims = [c for c in claims if c.id.upper() in want or c.id.upper().split("-")[0] in want]
        written = []
        if plots is not None:
            written = _write_plots(plots, force, chapter_modules())
        if json:
            print_json([c.as_dict() for c in claims])
            return
        if markdown:
            print("| ID | claim | rackmath | unit | lecture | agrees | inputs |")
            print("|---|---|---|---|---|---|---|")
            for c in claims:
                inputs = "; ".join(f"{k} = {_show(v)}" for k, v in c.inputs.items()).replace("|", "/")
                print(f"| {c.id} | {c.title} | {_show(c.value)} | {c.unit} | {_show(c.lecture_value)} | "
                      f"{'yes' if c.agrees else '**no**'} | {inputs} |")
            notes = [c for c in claims if c.note]
            if notes:
                print()
                for c in notes:
                    print(f"* **{c.id}**: {c.note}")
            return
        from rich.table import Table

        t = Table(title="The math behind how LLMs are trained and served — reproduced by rackmath")
        for col in ("ID", "claim", "rackmath", "unit", "lecture", "agrees", "inputs"):
            t.add_column(col, overflow="fold")
        for c in claims:
            inputs = ", ".join(f"{k}={_show(v)}" for k, v in list(c.inputs.items())[:5])
            t.add_row(c.id, c.title, _show(c.value), c.unit, _show(c.lecture_value),
                      "[green]yes[/]" if c.agrees else "[red]no[/]", inputs)
        con = console()
        con.print(t)
        agree = sum(c.agrees for c in claims)
        con.print(f"{agree} of {len(claims)} claims agree with the lecture.")
        for c in claims:
            if c.note and not c.agrees:
                con.print(f"[bold]{c.id}[/]: {c.note}", highlight=False)
        if explain:
            for c in claims:
                if c.derivation:
                    con.print(f"\n[bold]{c.id}[/] {c.title}")
                    con.print(c.derivation.render(), markup=False, highlight=False)

