"""Notebook-friendly results: one mixin gives every result object the same face.

    r = rackmath.roofline("deepseek-v3", "gb200-nvl72", batch="1:4096:log8")
    r                 # a concise one-line summary (ranges of the key fields)
    r.as_dict()       # every field, arrays broadcast to one shape (JSON-ready lists)
    r.to_frame()      # a pandas DataFrame, one row per configuration (pandas is optional)
    r                 # in Jupyter: an HTML table (_repr_html_)

A result class inherits :class:`ResultMixin`, is declared ``@dataclass(repr=False)`` and has ``as_dict()``;
``_SUMMARY`` names the fields its repr shows, ``_frame_dict()`` may pick what ``to_frame`` tabulates.
Units follow the engine (SI: seconds, bytes, $) unless the field name says otherwise (``tpot_ms``).
"""

from __future__ import annotations

import html
import math

import numpy as np
from .units import human

__all__ = ["ResultMixin", "broadcast_fields", "INTEGER_COLUMNS", "plain_json"]


def _is_array_like(v) -> bool:
    if isinstance(v, np.ndarray):
        return True
    if isinstance(v, (list, tuple)) and v and all(isinstance(x, (int, float, bool, str, np.generic)) or x is None
                                                   for x in v):
        return True
    return False


def broadcast_fields(d: dict, keys) -> dict:
    """``d`` with the entries named in ``keys`` broadcast to their common shape (lists; scalars when 0-d)."""
    arrs = {k: np.asarray(d[k]) for k in keys if k in d}
    shape = np.broadcast_shapes(*[a.shape for a in arrs.values()]) if arrs else ()
    out = dict(d)
    for k, a in arrs.items():
        b = np.broadcast_to(a, shape)
        out[k] = b.item() if shape == () else b.tolist()
    return out


def plain_json(x, text=None):
    """Plain JSON, the one cleaner both interfaces use (`--json`, the web app): numpy scalars and arrays to Python,
    tuples to lists, dict keys to strings, non-finite floats (inf, nan) to null (JSON has neither), anything else
    to its ``str``; ``text`` (e.g. the CLI's ``cite``), when given, rewrites every string value."""
    if isinstance(x, dict):
        return {str(k): plain_json(v, text) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain_json(v, text) for v in x]
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, str):
        return text(x) if text is not None else x
    if isinstance(x, (int, bool)) or x is None:
        return x
    if hasattr(x, "tolist"):  # numpy scalar or array
        return plain_json(x.tolist(), text)
    return str(x)


def _short(v, unit: str = "") -> str:
    return human(v, unit)


#: Fields that count whole things: ``to_frame()`` gives them integer columns (the README's promise).
INTEGER_COLUMNS = frozenset({"batch", "context", "chips", "gpus", "pass_len", "concurrency", "isl", "osl", "tp", "ep",
                             "pp", "dp", "replicas", "micro_batch", "microbatches"})


class ResultMixin:
    """``to_frame()``, concise ``__repr__``, ``_repr_html_`` and ``__len__`` from ``as_dict()``."""

    _SUMMARY: tuple = ()  # ((field, unit), …) shown by repr
    _ROW = "configuration"  # what one row of to_frame() is

    def _frame_dict(self) -> dict:
        return self.as_dict()

    def _columns(self) -> tuple[dict, tuple]:
        d = self._frame_dict()
        arrays = {k: np.asarray(v) for k, v in d.items() if _is_array_like(v)}
        shape = np.broadcast_shapes(*[a.shape for a in arrays.values()]) if arrays else ()
        cols = {}
        for k, v in d.items():
            if k in arrays:
                cols[k] = np.broadcast_to(arrays[k], shape).ravel()
            elif isinstance(v, (int, float, str, bool, np.generic)) or v is None:
                cols[k] = v
        return cols, shape

    def __len__(self) -> int:
        _, shape = self._columns()
        return int(np.prod(shape)) if shape else 1

    def to_frame(self):
        """A pandas DataFrame with one row per configuration (array fields flattened in C order; scalar fields
        repeated). Whole-number quantities (batch, context, chips, …: :data:`INTEGER_COLUMNS`) are integer columns
        where every value is whole. pandas is optional: ``pip install pandas``."""
        try:
            import pandas as pd
        except ImportError:  # pragma: no cover - depends on the environment
            raise ImportError("to_frame() needs pandas: pip install pandas (as_dict() needs nothing)") from None
        cols, shape = self._columns()
        n = int(np.prod(shape)) if shape else 1
        out = {}
        for k, v in cols.items():
            a = np.asarray(v if isinstance(v, np.ndarray) else [v] * n)
            if k in INTEGER_COLUMNS and a.dtype.kind == "f" and a.size and np.all(np.isfinite(a)) \
                    and np.all(a == np.round(a)) and np.all(np.abs(a) < 2**62):
                a = a.astype(np.int64)
            out[k] = a
        return pd.DataFrame(out)

    def index(self, **where) -> int:
        """The flat index of the configuration whose fields equal ``where`` (``r.index(batch=64, context=8192)``),
        for ``r.at(i)``, ``r.explain(i)`` (which also takes the values directly: ``r.explain(batch=64)``). A value
        that no configuration has is a ValueError naming the values there are."""
        cols, _ = self._columns()
        n = len(self)
        ok = np.ones(n, dtype=bool)
        for k, v in where.items():
            if k not in cols:
                raise ValueError(f"{k!r} is not a field of this result (fields: {', '.join(cols)})")
            a = np.broadcast_to(np.asarray(cols[k]), (n,))
            hit = np.isclose(a.astype(float), float(v), rtol=1e-9, atol=0) if a.dtype.kind in "fiu" else a == v
            if not hit.any():
                have = ", ".join(f"{x:g}" if isinstance(x, (float, np.floating)) else str(x)
                                 for x in list(dict.fromkeys(a.tolist()))[:12])
                more = " …" if len(set(a.tolist())) > 12 else ""
                raise ValueError(f"no configuration has {k} = {v!r} (it has {have}{more})")
            ok &= hit
        if not ok.any():
            raise ValueError(f"no configuration has {where}")
        return int(np.flatnonzero(ok)[0])

    def _title(self) -> str:
        d = self._frame_dict()
        parts = [str(d[k]) for k in ("model", "hardware") if isinstance(d.get(k), str)]
        return " on ".join(parts)

    def __repr__(self) -> str:
        cols, shape = self._columns()
        n = int(np.prod(shape)) if shape else 1
        bits = [self._title() or type(self).__name__, f"{n} {self._ROW}{'s' * (n != 1)}"]
        eff = cols.get("efficiency")
        if isinstance(eff, str):
            bits.append("ideal roofline" if eff == "ideal" else f"calibrated ({eff})")
        for f, unit in self._SUMMARY:
            v = cols.get(f)
            if v is None or isinstance(v, str):
                continue
            a = np.asarray(v)
            if a.dtype.kind not in "fiub" or a.size == 0:
                continue
            a = a.astype(float)
            fin = a[np.isfinite(a)]
            if fin.size == 0:
                continue
            lo, hi = float(fin.min()), float(fin.max())
            bits.append(f"{f} {_short(lo, unit)}" + ("" if math.isclose(lo, hi) else f" … {_short(hi, unit)}"))
        return f"{type(self).__name__}({'; '.join(bits)})"

    def _repr_html_(self) -> str:
        try:
            return self.to_frame().to_html(max_rows=20, max_cols=30)
        except ImportError:
            cols, _ = self._columns()
            rows = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v)[:200])}</td></tr>"
                           for k, v in cols.items())
            return f"<table><caption>{html.escape(repr(self))}</caption>{rows}</table>"
