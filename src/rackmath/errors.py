"""Errors a user can cause. Each renders as one line naming the field and what is accepted.

The CLI catches :class:`RackmathError` and prints ``error: <message>`` with exit
status 2; nothing a user types should produce a traceback.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable
from .limits import MIN_MAGNITUDE, QUANTITY_MAX


class RackmathError(ValueError):
    """Base class of every error caused by input (names, numbers, files)."""


class InputError(RackmathError):
    """A bad value: ``field`` is what was wrong, ``accepted`` what would be right."""

    def __init__(self, field: str, problem: str, accepted: str | None = None):
        self.field, self.problem, self.accepted = field, problem, accepted
        msg = f"{field}: {problem}"
        if accepted:
            msg += f" (accepted: {accepted})"
        super().__init__(msg)


class UnknownNameError(InputError):
    """An unknown catalog name, with the closest known names offered."""

    def __init__(self, field: str, name: str, known: Iterable[str], hint: str | None = None):
        known = sorted(set(known))
        close = difflib.get_close_matches(str(name).lower(), known, n=3, cutoff=0.4)
        problem = f"unknown {field} {name!r}"
        if close:
            problem += "; closest: " + ", ".join(close)
        accepted = hint or ("one of " + ", ".join(known[:40]) + (" …" if len(known) > 40 else ""))
        self.closest = close
        super().__init__(field, problem, accepted)


class CatalogError(RackmathError):
    """A catalog file (TOML, HuggingFace JSON) that fails validation: path, field and reason."""

    def __init__(self, path: str, field: str, problem: str):
        self.path, self.field, self.problem = str(path), field, problem
        super().__init__(f"{path}: {field}: {problem}")


def check_positive(value, field: str, accepted: str = "a positive finite number", allow_zero: bool = False,
                   maximum: float | None = None):
    """Validate scalars or arrays: finite, > 0 (or >= 0), and not absurd (<= maximum). Returns value."""
    import numpy as np

    if value is None:  # np.asarray(None, float) is nan: say what is wrong
        raise InputError(field, "missing", accepted)
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise InputError(field, f"{str(value)[:40]!r} is not a number", accepted) from None
    limit = QUANTITY_MAX["count"] if maximum is None else maximum
    if arr.size > 64:  # a sweep: two passes (min, max) decide almost always; NaN or a bad value falls through
        lo, hi = float(arr.min()), float(arr.max())
        if math.isfinite(lo) and math.isfinite(hi) and hi <= limit and (
                lo >= MIN_MAGNITUDE or (allow_zero and lo == 0.0 and not np.any((arr > 0) & (arr < MIN_MAGNITUDE)))):
            return value
    bad = ~np.isfinite(arr) | (arr < 0) | ((arr == 0) & (not allow_zero)) | ((arr > 0) & (arr < MIN_MAGNITUDE))
    bad |= arr > limit
    if np.any(bad):
        first = float(arr[bad].flat[0] if arr.ndim else arr)
        if first > limit:
            problem = f"{first:g} is out of range"
        elif 0 < first < MIN_MAGNITUDE:
            problem = f"{first:g} is too small (non-zero values start at {MIN_MAGNITUDE:g})"
        else:
            problem = f"{first:g} is not {'a non-negative' if allow_zero else 'a positive'} finite number"
        raise InputError(field, problem, accepted + (f" up to {maximum:g}" if maximum is not None else ""))
    return value
