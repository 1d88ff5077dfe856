"""Shared CLI plumbing: one vocabulary of options, one table, one number format, one way to write files.

Interfaces hold no math: commands parse strings, call the engine or an analysis, and render what comes back.
Every command module uses these, so that flags, tables, units and files behave the same everywhere
(docs/architecture.md, "CLI"):

* options: ``MODEL_ARG``, ``hardware_opt()``, ``gpus_opt()`` (``--gpus/-n``; ``--chips`` is a hidden alias),
  ``USD_OPT`` (``--usd-per-gpu-hour``), ``EFF_OPT`` + ``IDEAL_OPT`` (resolved by :func:`efficiency_for`),
  ``context_opt()`` (8K = 8,000; 8Ki = 8,192), ``batch_opt()``, ``WDT_OPT``, ``KVDT_OPT``, ``JSON_OPT``,
  ``EXPLAIN_OPT``, ``output_opt()`` + ``FORCE_OPT``;
* output: :func:`table` (fits the terminal: fewer columns by priority, ``--wide``/``--columns`` for all; numbers
  never cut), :func:`human` (the one number formatter: ``24.7 h``, ``$7.65M``), :func:`print_json`,
  :func:`print_derivation`, :func:`mode_label` / :func:`mode_dict` (ideal bound vs calibrated prediction);
* files: :func:`check_output` (never overwrite without ``--force``; a missing directory is an error naming the
  field), :func:`open_output` (``-`` = stdout), :func:`wrote` (``wrote PATH`` on stderr);
* :func:`parse_range` (integer quantities stay integers), :func:`cite` (sources by their public names);
* energy (roofline, serve, plan, train): ``PUE_OPT``, ``USD_PER_KWH_OPT``, ``POWER_CAP_OPT``; :func:`power_capped`
  (the hardware with its compute peaks scaled by the cap, so every model sees it), :func:`energy_of` (J/token,
  tokens/kWh, electricity $/Mtok and share), :func:`energy_line` (the compact line every command prints).
"""

from __future__ import annotations

import contextlib
import json as _json
import math
import os
import re
import sys
from dataclasses import dataclass

import typer

from ..errors import InputError
from ..options import (INTEGER_FIELDS, MEAN_LENGTH_FIELDS, energy_dict, energy_of, mode_dict,  # noqa: F401
                       mode_label, parse_int, parse_power, parse_pue, parse_range, parse_usd, parse_usd_per_kwh,
                       power_capped, priced, validated_error)
from ..results import plain_json
from ..units import human

__all__ = [
    "JSON_OPT", "EXPLAIN_OPT", "MODEL_ARG", "USD_OPT", "EFF_OPT", "IDEAL_OPT", "FORCE_OPT", "WDT_OPT", "KVDT_OPT",
    "hardware_opt", "gpus_opt", "context_opt", "batch_opt", "output_opt", "Col", "table", "human", "print_json",
    "print_derivation", "console", "efficiency_for", "mode_label", "mode_dict", "check_output", "open_output",
    "wrote", "parse_range", "parse_int", "parse_usd", "priced", "cite", "dtype_check", "TABLE_SETTINGS",
    "PUE_OPT", "USD_PER_KWH_OPT", "POWER_CAP_OPT", "parse_power", "parse_usd_per_kwh", "power_capped", "energy_of",
    "energy_line",
]

# --- options: one vocabulary (COORD.md) ------------------------------------------------------------------------------

JSON_OPT = typer.Option(False, "--json", help="Print machine-readable JSON.")
EXPLAIN_OPT = typer.Option(False, "--explain", help="Print each formula with the numbers substituted.")
MODEL_ARG = typer.Argument(..., metavar="MODEL",
                           help="Model: a catalog name (deepseek-v3), a shipped HuggingFace config (hf:openai/gpt-oss-120b) "
                                "or a path to a config.json.")
USD_OPT = typer.Option(None, "--usd-per-gpu-hour", metavar="$/H",
                       help="Price per GPU (chip) hour, e.g. 2.5 or '$2.5/h' (default: the chip's catalog price).")
EFF_OPT = typer.Option(None, "--efficiency", metavar="PRESET|auto|preset|measured",
                       help="Calibrated efficiency preset by name; 'preset' for the chip's own; 'measured' for silicon "
                            "from the chip's measured kernel curves and host times per stack version; 'auto' (serve, "
                            "plan, simulate, compare: the default) 'measured' for a --framework version with fitted "
                            "times, else 'preset' (docs/serving.md, docs/stacks.md).")
IDEAL_OPT = typer.Option(False, "--ideal", help="The lecture's ideal roofline: a lower bound on time.")
FORCE_OPT = typer.Option(False, "--force", help="Overwrite an existing output file.")
CONTEXT_HELP = "8K = 8,000 tokens, 8Ki = 8,192"


def dtype_check(field: str):
    """A typer option callback: an unknown dtype is an error naming ``field`` (the value itself is unchanged)."""

    def check(value):
        if value is not None:
            from .. import units

            units.normalize_dtype(value, field)
        return value

    return check


#: Warning lines of the command ``main`` is running, printed after it succeeds (a command that fails prints its one
#: error line only); None outside ``main``, where :func:`warn` writes at once.
PENDING: list | None = None


def warn(line: str) -> None:
    """A ``warning: …`` line on stderr: held by ``main`` until the command succeeds (:data:`PENDING`)."""
    if PENDING is not None:
        PENDING.append(line)
    else:
        sys.stderr.write(f"warning: {line}\n")


def dtype_rate_warning(hardware, weights_dtype, compute_dtype=None, echo: bool = True) -> str | None:
    """The sentence when the chip runs the weight GEMMs at a wider dtype's rate than ``weights_dtype`` asks
    ('h100 has no FP4 tensor cores: …', ``Chip.gemm_fallback_note``; None: no fallback), also written as a
    'warning: …' line on stderr when ``echo`` (a command that does not print it in its table)."""
    from ..specs.hardware import load_hardware

    note = load_hardware(hardware).chip.gemm_fallback_note(weights_dtype, compute_dtype)
    if note and echo:
        warn(note)
    return note


WDT_OPT = typer.Option(None, "--weights-dtype", callback=dtype_check("weights_dtype"),
                       help="bf16, fp8, int8, fp4, mxfp4, nvfp4 … (default: as published).")
KVDT_OPT = typer.Option(None, "--kv-dtype", callback=dtype_check("kv_dtype"),
                        help="KV-cache dtype (default: the model's own, bf16 for published models).")
CDT_OPT = typer.Option(None, "--compute-dtype", callback=dtype_check("compute_dtype"),
                       help="Dtype the weight GEMMs multiply in, where the stack quantises the activations of a "
                            "weight-only format (e.g. fp8 for INT4 × FP8); default: the wider of the weights' and "
                            "their activations' (W8A8 fp8 at the FP8 rate, AWQ int4 at the BF16 rate, mxfp4 at FP8 on "
                            "chips with FP4 tensor cores and BF16 elsewhere).")


def hardware_opt(default=..., help: str = "System or chip name (a chip means its standard scale-up system)."):
    return typer.Option(default, "--hardware", "-H", help=help)


def gpus_opt(default=None, help: str = "GPUs (chips) working together (default: one scale-up domain)."):
    """``--gpus/-n``; ``--chips`` is accepted as a hidden alias (rewritten by :func:`normalize_argv`)."""
    return typer.Option(default, "--gpus", "-n", help=help)


def context_opt(default="8192", help: str = "Tokens in each sequence's KV cache"):
    return typer.Option(default, "--context", "-L", help=f"{help} ({CONTEXT_HELP}).")


def batch_opt(default="1", help: str = "Sequences: a value, a list '1,8,64' or a range '1:4096:log'"):
    return typer.Option(default, "--batch", "-b", help=f"{help}.")


def output_opt(default, help: str = "Output file (.png, .svg or .pdf; never overwritten without --force)."):
    return typer.Option(default, "--output", "-o", help=help)


_ALIASES = {"--chips": "--gpus", "--usd-per-hour": "--usd-per-gpu-hour", "--chip-hours": "--gpu-hours",
            "--tokens-per-chip": "--tokens-per-gpu"}  # hidden aliases: old spellings keep working, help shows one vocabulary
_HOISTED = {"--wide": 0, "--columns": 1}  # table options valid anywhere on the line; moved before the command


# commands whose model used to be an option: `--model X` / `-m X` still works (hidden), X becomes the positional
_MODEL_WAS_OPTION = {("serve",), ("context",), ("racks", "pipeline")}


_ROOT_VALUE_OPTIONS = {"--catalog", "--columns"}


def _model_option_to_positional(argv: list[str]) -> list[str]:
    start = 0
    while start < len(argv) and argv[start].startswith("-"):  # root options before the command
        start += 2 if argv[start] in _ROOT_VALUE_OPTIONS else 1
    head, argv = argv[:start], argv[start:]
    path = []
    for a in argv:
        if a.startswith("-"):
            break
        path.append(a)
    n = next((len(c) for c in _MODEL_WAS_OPTION if tuple(path[:len(c)]) == c), 0)
    if not n:
        return head + argv
    rest, model, i = [], None, n
    while i < len(argv):
        a = argv[i]
        if a in ("--model", "-m") and i + 1 < len(argv) and model is None:
            model, i = argv[i + 1], i + 2
            continue
        if a.startswith("--model=") and model is None:
            model, i = a.split("=", 1)[1], i + 1
            continue
        rest.append(a)
        i += 1
    return head + argv[:n] + ([model] if model is not None else []) + rest


def normalize_argv(argv: list[str]) -> list[str]:
    """Rewrite hidden aliases (``--chips`` → ``--gpus``; ``serve --model X`` → ``serve X``) and move the table
    options ``--wide``/``--columns X`` (accepted anywhere, documented in ``rackmath --help``) in front of the
    command, where the root takes them."""
    out, front, i = [], [], 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            out += argv[i:]
            break
        name, eq, val = a.partition("=")
        if name in _ALIASES:
            a = _ALIASES[name] + eq + val
        if name in _HOISTED:
            if _HOISTED[name] and not eq and i + 1 < len(argv):
                front += [a, argv[i + 1]]
                i += 2
                continue
            front.append(a)
        else:
            out.append(a)
        i += 1
    return front + _model_option_to_positional(out)


# --- efficiency: ideal bound vs calibrated prediction ---------------------------------------------------------------

def efficiency_for(hardware, efficiency: str | None, ideal: bool, default: str = "ideal"):
    """The ``--efficiency PRESET|auto`` / ``--ideal`` pair: ``engine.efficiency.efficiency_for`` (one rule for every
    command, the API and the web app; kept here under its old name)."""
    from ..engine.efficiency import efficiency_for as resolve_for

    return resolve_for(hardware, efficiency, ideal, default=default)


# --- JSON and derivations --------------------------------------------------------------------------------------------

def _default(o):
    try:
        import numpy as np

        if isinstance(o, np.ndarray):
            return o.tolist()
        if isinstance(o, np.generic):
            return o.item()
    except ImportError:  # pragma: no cover
        pass
    if hasattr(o, "as_dict"):
        return o.as_dict()
    if isinstance(o, set):
        return sorted(o)
    return str(o)


def print_json(obj) -> None:
    text = _json.dumps(obj, default=_default)
    sys.stdout.write(_json.dumps(plain_json(_json.loads(text), cite), indent=2, ensure_ascii=False) + "\n")


def console(**kw):
    from rich.console import Console

    return Console(**kw)


def print_derivation(derivation) -> None:
    console().print(cite(derivation.render()), highlight=False, markup=False, soft_wrap=True)


# --- tables ----------------------------------------------------------------------------------------------------------

TABLE_SETTINGS = {"wide": False, "columns": None}  # set by `rackmath --wide / --columns` (see normalize_argv)


@dataclass
class Col:
    """A table column. ``priority`` 0 is always shown; higher numbers are hidden first when the terminal is narrow.
    ``text`` columns wrap; numeric ones (the default for cells that read as numbers) are never wrapped or cut."""

    name: str
    priority: int = 1
    text: bool | None = None  # None: decided from the cells
    justify: str | None = None
    min_width: int = 0  # a text column narrower than this hides lower-priority columns first


_NUMLIKE = re.compile(r"^[\s$−+\-–~≈<>]*[\d.,]+[\d.,\s%×x]*(\s*[A-Za-zµ/$·\-]{0,14}){0,3}\s*$")


def _is_numeric(cells) -> bool:
    vals = [c for c in cells if c not in ("", "—", "–", "n/a", "∞")]
    return bool(vals) and all(_NUMLIKE.match(c) for c in vals)


def _width() -> int | None:
    """Terminal width to fit, or None (a pipe or file without COLUMNS: every column, nothing wrapped)."""
    cols = os.environ.get("COLUMNS", "").strip()
    if cols.isdigit() and int(cols) > 0:
        return int(cols)
    con = console()
    return con.width if con.is_terminal else None


def table(title: str, columns: list, rows: list[list], caption: str | None = None) -> None:
    """Print a table that fits the terminal.

    ``columns``: names or :class:`Col`. Plain names get priority 0 for the first column and 1 for the others.
    When the table is too wide, columns are hidden from the highest priority number down (the caption says which);
    ``--wide`` shows every column (cells may then run past the terminal), ``--columns a,b`` picks them.
    Numbers are never cut or wrapped; only text columns wrap.
    """
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    cols = [c if isinstance(c, Col) else Col(str(c), priority=0 if i == 0 else 1) for i, c in enumerate(columns)]
    styled = {}  # cells given as rich Text (e.g. a coloured verdict) keep their style; the rest are plain text
    for ri, r in enumerate(rows):
        for ci, x in enumerate(r):
            if isinstance(x, Text):
                styled[ri, ci] = x
    rows = [[x.plain if isinstance(x, Text) else cite(str(x)) for x in r] for r in rows]
    numeric = [(not c.text) if c.text is not None else _is_numeric([r[i] for r in rows if i < len(r)])
               for i, c in enumerate(cols)]
    keep = _picked_columns(title, cols)
    if keep is None:
        return
    width = _width()
    widths = {i: _col_width(cols[i], [r[i] for r in rows if i < len(r)], numeric[i]) for i in range(len(cols))}
    hidden = [] if TABLE_SETTINGS.get("wide") or width is None else _hide_to_fit(cols, keep, widths, width)
    caps = _text_caps(cols, rows, keep, numeric, widths, width)
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, expand=False)
    for i in keep:
        c = cols[i]
        if numeric[i]:
            t.add_column(c.name, justify=c.justify or "right", no_wrap=True, min_width=widths[i], overflow="fold")
        else:  # wraps at spaces; a word longer than 30 characters (a URL) may be folded
            t.add_column(c.name, justify=c.justify or "left", overflow="fold",
                         min_width=min(widths[i], caps.get(i, widths[i])), max_width=caps.get(i))
    for ri, r in enumerate(rows):  # no markup parsing: sources hold "[M]"
        t.add_row(*[styled.get((ri, i)) or Text(r[i]) if i < len(r) else Text("") for i in keep])
    con = Console(width=_console_width(cols, rows, keep, widths, width), highlight=False)
    if title:
        con.print(Text(cite(title), style="bold"))
    con.print(t)
    notes = ([cite(caption)] if caption else []) + (
        [f"hidden to fit {width} columns: {', '.join(hidden)} (show all with --wide, or pick with --columns A,B)"]
        if hidden else [])
    for n in notes:
        con.print(Text(n, style="dim"))
    con.print()  # tables printed one after another stay apart
    TABLE_SETTINGS["printed"] = TABLE_SETTINGS.get("printed", 0) + 1


def _picked_columns(title: str, cols: list) -> list[int] | None:
    """The columns to show: all, or the first and those ``--columns`` names (None: skip this table, said so)."""
    from rich.text import Text

    pick = TABLE_SETTINGS.get("columns")
    if not pick:
        return list(range(len(cols)))
    want = [w.strip().lower() for w in str(pick).split(",") if w.strip()]
    names = [c.name.lower() for c in cols]
    chosen = [i for i, n in enumerate(names) if n in want]
    if not chosen and TABLE_SETTINGS.get("printed"):  # a later table of the same command: skipped, said so
        console().print(Text(f"{cite(title).splitlines()[0] if title else 'a table'}: none of the --columns "
                             f"{pick!r} (its columns: {', '.join(c.name for c in cols)})", style="dim"),
                        highlight=False)
        return None
    if not chosen:
        raise InputError("columns", f"none of {pick!r} is a column of this table",
                         "a comma list of: " + ", ".join(c.name for c in cols))
    return sorted(set([0] + chosen))


def _col_width(c: Col, cells: list[str], numeric: bool) -> int:
    """A column's width: a number column its widest cell; a text column its longest word (at most 30), its name's
    longest word, and its ``min_width`` (at most its widest cell)."""
    if numeric:
        return max([len(x) for x in cells] + [len(c.name), 1])
    words = [len(x) for cell in cells for x in cell.split()] or [1]
    natural = max([len(x) for x in cells] + [1])
    return max(max(len(x) for x in c.name.split() or [""]), min(max(words), 30), min(c.min_width, natural), 1)


def _need(widths: dict, idx: list[int]) -> int:
    return sum(widths[i] for i in idx) + 3 * (len(idx) - 1)


def _hide_to_fit(cols: list, keep: list[int], widths: dict, width: int) -> list[str]:
    """Drop columns from ``keep`` (in place), highest priority number first, until the rest fit ``width``; returns
    the names dropped."""
    hidden = []
    order = sorted((i for i in keep if cols[i].priority > 0), key=lambda i: (-cols[i].priority, -i))
    while _need(widths, keep) > width and order:
        drop = order.pop(0)
        keep.remove(drop)
        hidden.append(cols[drop].name)
    return hidden


def _text_caps(cols, rows, keep, numeric, widths, width) -> dict:
    """Text columns share what the numbers leave (by their natural widths); longer words fold."""
    texts = [i for i in keep if not numeric[i]]
    if width is None or TABLE_SETTINGS.get("wide") or not texts:
        return {}
    squeeze = _need(widths, keep) > width
    avail = width - sum(widths[i] for i in keep if numeric[i]) - 3 * (len(keep) - 1)
    natural = {i: max([len(r[i]) for r in rows if i < len(r)] + [len(cols[i].name), 1]) for i in texts}
    if sum(natural.values()) <= avail:
        return {}
    floor = {i: min(widths[i], natural[i]) if not squeeze else 6 for i in texts}
    spare = max(0, avail - sum(floor.values()))
    extra = {i: natural[i] - floor[i] for i in texts}
    tot = sum(extra.values()) or 1
    return {i: max(6, floor[i] + int(spare * extra[i] / tot)) for i in texts}


def _console_width(cols, rows, keep, widths, width) -> int:
    """The width to render at: the terminal's; with ``--wide`` or into a pipe, every column at its natural width."""
    total = _need(widths, keep)
    full = sum(max([len(r[i]) for r in rows if i < len(r)] + [len(cols[i].name)]) for i in keep) + 3 * len(keep)
    if width is None:
        return max(max(80, total), min(full, 400))
    if TABLE_SETTINGS.get("wide"):  # every column at its natural width: nothing wrapped or cut
        return max(width, total, min(full, 1000))
    return width


# --- sources ---------------------------------------------------------------------------------------------------------

_TAG = {"V": "verified", "S": "secondary source", "D": "derived", "M": "unverified"}
_TAGS = re.compile(r"\[([VSDM])\]")  # published.md's status tags, written out
_PUB = re.compile(r"(?:\.\./shared/reference/|(?<![/\w]))published\.md")


def cite(text: str) -> str:
    """Sources by names a reader has: 'published.md H1 [V]: glennklockwood.com…' → 'glennklockwood.com… (verified;
    docs/reference/published.md H1)'. The compilation itself ships as docs/reference/published.md."""
    if not text or ("published.md" not in text and "]" not in text):
        return text
    if "published.md" not in text:
        return _TAGS.sub(lambda m: f"[{_TAG[m.group(1)]}]", text)

    def one(m):
        ref, tag, rest = m.group(1).strip(), m.group(2), m.group(3).strip()
        where = "docs/reference/published.md" + (f" {ref}" if ref else "")
        label = "; ".join(x for x in (_TAG.get(tag or "", ""), where) if x)
        return f"{rest} ({label})" if rest else label

    out = re.sub(r"(?:\.\./shared/reference/|(?<![/\w]))published\.md\s*([^\[\]:;()]{0,24}?)\s*(?:\[([VSDM])\])?\s*:\s*"
                 r"([^;\n]*)", one, text)
    return _TAGS.sub(lambda m: f"[{_TAG[m.group(1)]}]", _PUB.sub("docs/reference/published.md", out))


# --- files -----------------------------------------------------------------------------------------------------------

#: Text formats whose writers take '-' as standard output (CSV, JSON, TOML); a figure never goes to stdout.
TEXT_SUFFIXES = (".csv", ".json", ".jsonl", ".toml", ".txt")


def check_output(path, force: bool, field: str = "output", suffixes: tuple[str, ...] | None = None,
                 create_dirs: bool = False):
    """An output file a command may write: not empty, not a directory, never an existing file unless ``force``
    (nothing a user wrote is overwritten), in an existing writable directory (a missing one is an error naming
    ``field``, unless ``create_dirs`` — documented by the command). '-' (stdout) passes only for a text output
    (``suffixes`` None or all in :data:`TEXT_SUFFIXES`): a figure given '-' is refused, before any work (matplotlib
    would write ``./-.png``). Returns the path."""
    from pathlib import Path

    text = str(path).strip()
    if text == "-":
        if suffixes is None or all(s in TEXT_SUFFIXES for s in suffixes):
            return path
        raise InputError(field, "'-' (standard output) cannot take a figure",
                         "a file name ending in " + " or ".join(suffixes))
    if not text or text == ".":
        raise InputError(field, "empty file name", "a file name such as out.png")
    p = Path(path)
    if p.is_dir():
        raise InputError(field, f"{p} is a directory", "a file name")
    if suffixes is not None and p.suffix.lower() not in suffixes:
        raise InputError(field, f"unsupported format {p.suffix!r} in {p}", " or ".join(suffixes))
    if p.exists() and not force:
        raise InputError(field, f"{p} exists and would be overwritten", "a new file name, or --force")
    parent = p.absolute().parent
    if not parent.exists() and not create_dirs:
        raise InputError(field, f"directory {p.parent} does not exist", "a file in an existing directory")
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(field, f"cannot write into {parent}", "a file in a writable directory")
    return p


@contextlib.contextmanager
def open_output(path, force: bool = False, field: str = "output", what: str = ""):
    """Open a text output: '-' is stdout; a file is checked with :func:`check_output`, written under a temporary
    name in the same directory and renamed into place only when complete (an interrupted or failed run leaves no
    partial file, and nothing existing is touched until then), and announced with :func:`wrote` (``what`` says
    what it holds)."""
    import tempfile

    if str(path).strip() == "-":
        yield sys.stdout
        return
    p = check_output(path, force, field)
    if p.exists() and not p.is_file():  # a device or pipe (/dev/stdout, /dev/full): written in place, never renamed
        with open(p, "w") as fh:
            yield fh
        wrote(p, what)
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".part", dir=p.absolute().parent)
    try:
        mask = os.umask(0)
        os.umask(mask)
        os.fchmod(fd, 0o666 & ~mask)  # as open() would create it (mkstemp's is 0600)
        with os.fdopen(fd, "w") as fh:
            yield fh
        check_output(p, force, field)  # still not there (unless --force): another writer did not win the race
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    wrote(p, what)


def write_json(obj, fh, chunk: int = 65_536) -> None:
    """:func:`print_json` to ``fh``, streamed: numpy arrays anywhere in ``obj`` are written ``chunk`` values at a
    time (non-finite → null, as :func:`print_json`), so a 10⁶-point result never becomes Python lists; the rest
    goes through the same cleaning (:func:`~rackmath.results.plain_json` with :func:`cite`). Arrays are written
    flat (``.ravel()``)."""
    import numpy as np

    def array(a, indent):
        a = np.asarray(a).ravel()
        fh.write("[")
        for i in range(0, a.size, chunk):
            part = a[i:i + chunk]
            if part.dtype.kind == "f":
                vals = part.tolist()
                text = ", ".join(repr(x) if math.isfinite(x) else "null" for x in vals)
            elif part.dtype.kind == "b":
                text = ", ".join("true" if x else "false" for x in part.tolist())
            elif part.dtype.kind in "iu":
                text = ", ".join(map(str, part.tolist()))
            else:
                text = ", ".join(_json.dumps(plain_json(_default(x), cite), ensure_ascii=False)
                                 for x in part.tolist())
            fh.write(("" if i == 0 else ", ") + text)
        fh.write("]")

    def value(o, indent):
        if isinstance(o, np.ndarray):
            return array(o, indent)
        if isinstance(o, dict):
            if not o:
                fh.write("{}")
                return
            fh.write("{")
            for j, (k, v) in enumerate(o.items()):
                fh.write(("," if j else "") + "\n" + " " * (indent + 2) + _json.dumps(str(k), ensure_ascii=False)
                         + ": ")
                value(v, indent + 2)
            fh.write("\n" + " " * indent + "}")
            return
        plain = plain_json(_json.loads(_json.dumps(o, default=_default)), cite)
        text = _json.dumps(plain, indent=2, ensure_ascii=False)
        fh.write(text.replace("\n", "\n" + " " * indent))

    value(obj, 0)
    fh.write("\n")


def wrote(path, what: str = "") -> None:
    """Announce a written file, one style everywhere: 'wrote PATH' (+ what) on stderr."""
    sys.stderr.write(f"wrote {path}" + (f" ({what})" if what else "") + "\n")


def as_typed(exc, argv: list[str], cmd) -> str:
    """The one-line message of a RackmathError, its field named as the user typed it: an engine or analysis names
    its own parameter (``chips``, ``tokens_per_chip``), the command line has the option (``--gpus``,
    ``--tokens-per-gpu``). The option is read from the click tree ``cmd`` (``cli.main.command()``): the invoked
    command's parameter of that name."""
    field = getattr(exc, "field", None)
    msg = str(exc)
    if not isinstance(field, str) or not msg.startswith(field + ": ") or getattr(exc, "path", None) is not None:
        return msg
    import click

    for tok in argv:
        if isinstance(cmd, click.Group) and tok in cmd.commands:
            cmd = cmd.commands[tok]
    for p in getattr(cmd, "params", ()):
        if p.name == field and isinstance(p, click.Option):
            longest = max(p.opts, key=len)
            if longest.startswith("--"):
                typed = longest[2:].replace("-", "_")
                return typed + msg[len(field):] if typed != field else msg
    return msg


# --- input -----------------------------------------------------------------------------------------------------------


# --- energy: --pue, --usd-per-kwh, --power-cap (docs/energy.md) -------------------------------------------------------

PUE_OPT = typer.Option("1.2", "--pue", metavar="PUE",
                       help="Power usage effectiveness: facility ÷ IT power, 1.0–3.0 (default 1.2).")
USD_PER_KWH_OPT = typer.Option("0.08", "--usd-per-kwh", metavar="$/KWH",
                               help="Electricity price, e.g. 0.08 or '$0.08/kWh' (default: US industrial average).")
POWER_CAP_OPT = typer.Option(None, "--power-cap", metavar="W",
                             help="Board power cap per GPU, e.g. 500 or '500 W': compute peaks scale by the clock "
                                  "a cap allows (cube law); memory bandwidth unchanged.")


def energy_line(e, i: int | None = None, per: str = "token") -> str:
    """'energy: 0.69 J/token · 5.2M tokens/kWh · electricity $0.015/Mtok = 5.1% of $/Mtok (1,278 W/GPU at the meter:
    PUE 1.2, $0.08/kWh)' for configuration ``i`` (None: a scalar result)."""
    import numpy as np

    if e is None:
        return "energy: — (the catalog gives no board power, tdp_w, for this chip)"

    def at(x):
        a = np.asarray(x, dtype=float)
        return float(a.reshape(-1)[i or 0]) if a.ndim else float(a)

    share = "" if e.elec_share is None else f" = {human(at(e.elec_share), '%')} of $/Mtok"
    return (f"energy: {human(at(e.j_per_token), 'J')}/{per} · {human(at(e.tokens_per_kwh))} {per}s/kWh · electricity "
            f"{human(at(e.elec_usd_per_mtok), '$')}/M{per[:3]}{share} ({human(e.facility_w_per_chip, 'W')}/GPU at the "
            f"meter with host and PUE {e.pue:g}; ${e.usd_per_kwh:g}/kWh)")
def print_ops(rows: list[dict], title: str) -> None:
    """The per-operator table of ``--ops``: operator, layer type, FLOPs, bytes, FLOP/B, time, binding term."""
    total = sum(r["time_s"] for r in rows)
    out = [[r["op"], r["layer_type"], human(r["flops"], "FLOP") if r["flops"] == r["flops"] else "—",
            human(r["bytes"], "B") if r["bytes"] == r["bytes"] else "—",
            f'{r["intensity"]:.3g}' if r["intensity"] == r["intensity"] and r["intensity"] != float("inf") else "—",
            human(r["time_s"], "s"), f'{100 * r["time_s"] / total:.1f}%' if total else "—", r["binding"]]
           for r in rows]
    out.append(["total", "", "", "", "", human(total, "s"), "100%", ""])
    table(title, ["operator", "layer type", "FLOPs", "bytes", "FLOP/B", "time", "share", "binds"], out)
