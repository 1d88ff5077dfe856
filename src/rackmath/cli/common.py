"""Shared CLI plumbing: output (table / JSON / derivation) and input parsing.

Interfaces hold no math: commands parse strings, call the engine or an analysis,
and render what comes back.
"""

from __future__ import annotations

import json as _json
import math
import sys

import typer

from ..errors import InputError

JSON_OPT = typer.Option(False, "--json", help="Print machine-readable JSON.")
EXPLAIN_OPT = typer.Option(False, "--explain", help="Print each formula with the numbers substituted.")


def dtype_check(field: str):
    """A typer option callback: an unknown dtype is an error naming ``field`` (the value itself is unchanged)."""

    def check(value):
        if value is not None:
            from .. import units

            units.normalize_dtype(value, field)
        return value

    return check


def check_output(path, force: bool, field: str = "output", suffixes: tuple[str, ...] | None = None):
    """An output file a command may write: not empty, not a directory, in a writable place, and never an existing
    file unless ``force`` (nothing a user wrote is overwritten). Returns the path."""
    import os
    from pathlib import Path

    text = str(path).strip()
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
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(field, f"cannot write into {parent}", "a file in a writable directory")
    return p


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


def _clean(o):
    """JSON has no NaN/inf: map them to null."""
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if isinstance(o, dict):
        return {k: _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    return o


def print_json(obj) -> None:
    text = _json.dumps(obj, default=_default)
    sys.stdout.write(_json.dumps(_clean(_json.loads(text)), indent=2) + "\n")


def console():
    from rich.console import Console

    return Console()


def table(title: str, columns: list[str], rows: list[list], caption: str | None = None) -> None:
    from rich.table import Table

    t = Table(title=title, caption=caption)
    for c in columns:
        t.add_column(c)
    for r in rows:
        t.add_row(*[str(x) for x in r])
    console().print(t)


def print_derivation(derivation) -> None:
    console().print(derivation.render(), highlight=False, markup=False)


def parse_range(text: str, field: str, kind: str = "count", integer: bool = False):
    """'1:16384:log' -> log-spaced values; '1:100:10' -> 10 linear points; '1,2,4' -> a list; '8' -> [8]."""
    import numpy as np

    from .. import units
    from ..bounds import check_points

    s = str(text).strip()
    try:
        if ":" in s:
            parts = s.split(":")
            if len(parts) not in (2, 3):
                raise ValueError
            lo = units.parse_quantity(parts[0], kind, field)
            hi = units.parse_quantity(parts[1], kind, field)
            spec = parts[2].strip() if len(parts) == 3 else "log"
            if len(spec) > 24:
                raise ValueError
            if spec.startswith("log"):
                n = int(spec[3:] or 0) or max(2, int(round(4 * math.log2(max(hi / max(lo, 1e-300), 2)))) + 1)
                check_points(n, field)
                if lo <= 0:
                    raise InputError(field, f"a log range cannot start at {lo:g}", "a range 'LO:HI:log' with LO > 0")
                vals = np.geomspace(lo, hi, n)
            else:
                vals = np.linspace(lo, hi, check_points(int(spec), field))
        else:
            items = [p for p in s.split(",") if p.strip()]
            check_points(len(items), field)
            vals = np.array([units.parse_quantity(p, kind, field) for p in items])
    except InputError:
        raise
    except (ValueError, ZeroDivisionError):
        raise InputError(field, f"cannot read range {text!r}",
                         "a value, a list '1,2,4', or a range 'LO:HI:log', 'LO:HI:logN' or 'LO:HI:N'") from None
    if vals.size == 0:
        raise InputError(field, "empty", "at least one value")
    if integer:
        vals = np.unique(np.maximum(1, np.round(vals))).astype(float)
    return vals
