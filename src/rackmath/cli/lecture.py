"""`rackmath lecture`: every claim of the lecture (R1…R43) reproduced, chapter by chapter.

Each chapter opens with its one-sentence story, then a row per claim: rackmath's value, the
lecture's, their ratio, the tolerance the lecture's wording supports, and the verdict. Where
the lecture's premises and real hardware part ways there are two rows: "lecture" (its
inputs → its number, the row that counts) and "real" (a real chip or model → its own
number). Every row with a note or a reason for differing has it printed under the table.
"""

from __future__ import annotations

from pathlib import Path

import typer

from .common import JSON_OPT

_COUNTS = {"sequences", "replicas", "GPUs", "experts/GPU", "tokens/s", "params", "tokens", "B params"}


def _count(v: float) -> str:
    for div, suf in ((1e15, " quadrillion"), (1e12, "T"), (1e9, "B"), (1e6, "M")):
        if abs(v) >= div:
            return f"{v / div:.3g}{suf}"
    return f"{v:,.0f}" if abs(v) >= 10 else f"{v:.3g}"


def human(v, unit: str = "") -> str:
    """A claim value in human units: 23.2 ms, 640 GB, 103K tok/s, 2.6 quadrillion tokens, 1.09×."""
    from ..explain import fmt

    if isinstance(v, (tuple, list)):
        return "–".join(human(x, unit) for x in v)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    v = float(v)
    if v != v:
        return "n/a"
    if v in (float("inf"), float("-inf")):
        return "∞"
    if unit == "s":
        return fmt(v, "s")
    if unit in ("B",):
        return fmt(v, "B")
    if unit == "tok/s":
        return _count(v).replace(",", ",") + " tok/s"
    if unit.startswith("×") or unit == "x":
        num = f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"
        return f"{num}{unit}" if unit != "×" else f"{num}×"
    if unit.startswith("%"):
        return f"{v:.3g}{unit}"
    if unit in _COUNTS or unit.endswith("s") and unit not in ("",):
        return f"{_count(v)} {unit}"
    return f"{v:.3g}" + (f" {unit}" if unit else "")


def _verdict(c, rich: bool) -> str:
    v = c.verdict
    if c.kind == "real":
        v = "real: within" if c.agrees else "real: differs"
    if not rich:
        return v
    colour = {"agrees": "green", "differs": "red", "real: within": "cyan", "real: differs": "yellow",
              "not discriminated": "magenta"}.get(v, "dim")
    return f"[{colour}]{v}[/]"


def _ratio(c) -> str:
    r = c.ratio
    return "–" if r is None else f"{r:.3g}"


def _groups(claims):
    from ..claims import CHAPTERS

    out: dict[str, list] = {}
    for c in claims:
        out.setdefault(c.chapter, []).append(c)
    order = list(CHAPTERS)
    return sorted(out.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else 99)


def _short(c) -> str:
    """The terminal table's claim text: the claim's short title (distinct for every row of one claim ID; the full
    title is kept in --markdown/--json)."""
    return c.display_title


def _tag(c) -> str:
    """' (real)', ' (lookup)', …: the row kind after a claim ID in notes; nothing for lecture rows."""
    return "" if c.kind == "lecture" else f" ({c.kind})"


def _notes(c) -> list[str]:
    out = []
    if c.reason:
        out.append(("why it differs: " if not c.agrees and c.discriminated else "") + c.reason)
    if c.note:
        out.append(c.note)
    return out


def lecture_cmd(
    json: bool = JSON_OPT,
    plots: Path = typer.Option(None, "--plots", metavar="DIR",
                               help="Also write the chapters' figures (ch*-*.png) into DIR (created if missing). "
                                    "Re-running regenerates the figures an earlier run wrote there, if unchanged "
                                    "(DIR/.rackmath-plots lists them); any other existing file of the same name "
                                    "is not overwritten without --force."),
    force: bool = typer.Option(False, "--force", help="Overwrite existing figures in --plots DIR."),
    only: str = typer.Option(None, "--only", help="Comma-separated claim IDs, e.g. R6,R10 (R41 includes R41-ddr, …)."),
    explain: bool = typer.Option(False, "--explain", help="Print each claim's derivation and the chapters' "
                                                          "reasoning in words."),
    markdown: bool = typer.Option(False, "--markdown", help="Print Markdown tables (docs/lecture.md)."),
):
    """The lecture's numbers reproduced: rackmath's value, the lecture's, ratio, tolerance, verdict — by chapter."""
    from ..claims import CHAPTERS, all_claims, chapter_modules, summary
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
    if plots is not None:
        _write_plots(plots, force, chapter_modules())
    tally = summary(claims)
    if json:
        print_json([c.as_dict() for c in claims])
        return
    if markdown:
        _markdown(claims, tally)
        return

    con = console()
    con.print("[bold]The math behind how LLMs are trained and served — reproduced by rackmath[/]  "
              "(ideal roofline — a lower bound on time)", highlight=False)
    con.print("lecture = the lecture's own premises run through rackmath (these rows count); real = the same "
              "question on a real chip or model. ratio = rackmath ÷ lecture.", highlight=False, style="dim")
    for chap, cs in _groups(claims):
        title, story = CHAPTERS.get(chap, (chap, ""))
        con.print(f"\n[bold]{title}[/]", highlight=False)
        if story:
            con.print(story, highlight=False, style="italic")
        from rich.text import Text

        from .common import Col, table

        table("", [Col("ID", 0), Col("claim", 0, text=True, min_width=22), Col("rackmath", 0),
                   Col("lecture", 0), Col("ratio", 1), Col("tolerance", 1, text=True),
                   Col("verdict", 0, text=False, justify="left")],
              [[c.id, _short(c), human(c.value, c.unit), human(c.lecture_value, c.unit), _ratio(c),
                c.tolerance.split(":")[0].split(" (")[0], Text.from_markup(_verdict(c, True))] for c in cs])
        for c in cs:
            for n in _notes(c):
                con.print(f"  [bold]{c.id}[/]{_tag(c)}: {n}", highlight=False)
    con.print(f"\n{tally['agree']} of {tally['lecture_rows']} lecture-premise claims agree within the lecture's "
              f"stated tolerance, {tally['differ']} differ (reasons above), {tally['not_discriminated']} not "
              f"discriminated by the model; {tally['real_rows']} real-hardware rows shown beside them "
              f"({tally['real_within_tolerance']} within the same tolerance); {tally['lookup']} data look-ups "
              f"({tally['lookup_matches']} match), {tally['definition']} true by definition and {tally['cited']} "
              "cited, not counted.", highlight=False)
    if explain:
        from ..claims.reasoning import REASONING

        for c in claims:
            if c.derivation:
                con.print(f"\n[bold]{c.id}[/]{_tag(c)} {c.title}", highlight=False)
                con.print(c.derivation.render(), markup=False, highlight=False)
        con.print("\n[bold]The reasoning the lecture gives in words[/]", highlight=False)
        for head, text in REASONING:
            con.print(f"\n[bold]{head}[/]", highlight=False)
            con.print(text, markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    app.command("lecture")(lecture_cmd)


#: The list of figures `lecture --plots DIR` wrote into DIR, with their SHA-256: a re-run may replace exactly these
#: (unchanged since), never a file a user put or edited there.
MANIFEST = ".rackmath-plots"


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _manifest(outdir: Path) -> dict:
    import json

    try:
        d = json.loads((outdir / MANIFEST).read_text())
        return {str(k): str(v) for k, v in d.get("figures", {}).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def _write_plots(outdir: Path, force: bool, modules) -> list[str]:
    """Draw every chapter's figures in a scratch directory, then move them into ``outdir`` — all or nothing: if any
    would overwrite an existing file and not ``force``, nothing is written (error naming --plots). A file this
    command wrote on an earlier run and nobody changed since (same SHA-256 as in ``outdir/.rackmath-plots``) is
    rackmath's own: it is regenerated, so the README's first command can be run again."""
    import json
    import shutil
    import tempfile

    from ..errors import InputError
    from .common import wrote

    if outdir.exists() and not outdir.is_dir():
        raise InputError("plots", f"{outdir} is not a directory", "a directory for the figures")
    ours = _manifest(outdir)
    with tempfile.TemporaryDirectory() as tmp:
        made = []
        for mod in modules:
            if hasattr(mod, "plots"):
                made += [Path(p) for p in mod.plots(Path(tmp))]
        clash = [outdir / p.name for p in made if (outdir / p.name).exists()
                 and not (p.name in ours and (outdir / p.name).is_file() and _sha256(outdir / p.name) == ours[p.name])]
        if clash and not force:
            raise InputError("plots", f"{clash[0]} exists, was not written by an earlier `rackmath lecture --plots` "
                             "(or was changed since), and would be overwritten"
                             + (f" (and {len(clash) - 1} more)" if len(clash) > 1 else ""), "a new directory, or --force")
        outdir.mkdir(parents=True, exist_ok=True)
        out = []
        for p in made:
            shutil.move(str(p), outdir / p.name)
            out.append(str(outdir / p.name))
            ours[p.name] = _sha256(outdir / p.name)
    (outdir / MANIFEST).write_text(json.dumps({"written_by": "rackmath lecture --plots", "figures": ours}, indent=1,
                                              sort_keys=True) + "\n")
    wrote(outdir, f"{len(out)} figures")
    return out


def _markdown(claims, tally) -> None:
    from ..claims import CHAPTERS

    for chap, cs in _groups(claims):
        title, story = CHAPTERS.get(chap, (chap, ""))
        print(f"\n### {title}\n\n{story}\n")
        print("| ID | row | claim | rackmath | lecture | ratio | tolerance | verdict |")
        print("|---|---|---|---|---|---|---|---|")
        for c in cs:
            cells = [c.id, c.kind, c.title, human(c.value, c.unit), human(c.lecture_value, c.unit), _ratio(c),
                     c.tolerance, _verdict(c, False) if c.agrees or c.kind != "lecture" or not c.discriminated
                     else "**differs**"]
            print("| " + " | ".join(str(x).replace("|", "/") for x in cells) + " |")
        notes = [(c, n) for c in cs for n in _notes(c)]
        if notes:
            print()
            for c, n in notes:
                print(f"* **{c.id}**{_tag(c)}: {n}")
    print(f"\n**{tally['agree']} of {tally['lecture_rows']}** lecture-premise claims agree within the stated "
          f"tolerance, **{tally['differ']}** differ (reasons given), {tally['not_discriminated']} not discriminated "
          f"by the model; {tally['real_rows']} real-hardware rows ({tally['real_within_tolerance']} within "
          f"tolerance); {tally['lookup']} data look-ups ({tally['lookup_matches']} match), {tally['definition']} "
          f"definition and {tally['cited']} cited rows not counted.")
