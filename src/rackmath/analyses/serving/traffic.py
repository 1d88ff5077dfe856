"""Traffic for the simulator: request lengths, arrival processes and request traces (issue 12).

A length is fixed (``1000``), uniform (``500:1500``), exponential (``exp:800``) or lognormal
(``lognormal:MEDIAN:SIGMA``); arrivals are a Poisson process (exponential gaps of mean 1/λ) or gamma gaps of
the same mean and a chosen coefficient of variation (bursty traffic); a trace gives each request's arrival time,
ISL and OSL (CSV with a header, or JSON lines). No I/O here: a trace is parsed from its text
(:func:`parse_trace`); the CLI reads the file.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import numpy as np

from ... import units
from ...bounds import MAX_REQUESTS  # requests one call simulates (bounded memory: ~2 GB at the maximum)
from ...errors import InputError

_LEN_ACCEPTED = ("a number of tokens (1000), a uniform range LO:HI (500:1500), 'exp:MEAN', "
                 "or 'lognormal:MEDIAN:SIGMA'")


# --------------------------------------------------------------------------------------
# Request lengths
# --------------------------------------------------------------------------------------


def parse_lengths(text, field: str) -> tuple:
    """'1000' → ('fixed', 1000); '500:1500' → ('uniform', 500, 1500); 'exp:800'; 'lognormal:1000:0.6'."""
    if isinstance(text, (int, float, np.integer, np.floating)):
        v = float(text)
        if not math.isfinite(v) or v < 1 or v > 1e7:
            raise InputError(field, f"{v:g} tokens", _LEN_ACCEPTED + " from 1 to 10⁷")
        return ("fixed", float(round(v)))
    parts = str(text).strip().lower().split(":")
    try:
        if len(parts) == 1:
            return parse_lengths(units.parse_count(parts[0], field), field)
        spec = _length_spec(parts, text, field)
    except InputError:
        raise
    except ValueError:
        raise InputError(field, f"cannot read {text!r}", _LEN_ACCEPTED) from None
    if any(not (1 <= x <= 1e7) for x in spec[1:2]):
        raise InputError(field, f"{text!r} is out of range", _LEN_ACCEPTED + " from 1 to 10⁷ tokens")
    return spec


def _length_spec(parts: list, text, field: str) -> tuple:
    """A distribution from ``KIND:ARGS`` split on ':' (ValueError when it is not one :func:`parse_lengths` reads)."""
    if parts[0] in ("exp", "exponential") and len(parts) == 2:
        return ("exp", units.parse_count(parts[1], field))
    if parts[0] in ("lognormal", "lognorm") and len(parts) == 3:
        spec = ("lognormal", units.parse_count(parts[1], field), float(parts[2]))
        if not 0 <= spec[2] <= 5:
            raise InputError(field, f"sigma {spec[2]:g}", "a log-space sigma from 0 to 5")
        return spec
    if len(parts) == 2:
        lo, hi = units.parse_count(parts[0], field), units.parse_count(parts[1], field)
        if not 1 <= lo <= hi:
            raise InputError(field, f"range {text!r} is empty or below 1 token", _LEN_ACCEPTED)
        return ("uniform", float(round(lo)), float(round(hi)))
    raise ValueError


def sample_lengths(spec: tuple, n: int, rng) -> np.ndarray:
    """``n`` lengths (whole tokens ≥ 1) drawn from a :func:`parse_lengths` spec."""
    kind = spec[0]
    if kind == "fixed":
        x = np.full(n, spec[1])
    elif kind == "uniform":
        x = rng.integers(int(spec[1]), int(spec[2]) + 1, size=n).astype(float)
    elif kind == "exp":
        x = rng.exponential(spec[1], size=n)
    else:
        x = spec[1] * np.exp(spec[2] * rng.standard_normal(n))
    return np.clip(np.round(x), 1, 1e7)


# --------------------------------------------------------------------------------------
# Arrival processes
# --------------------------------------------------------------------------------------


def poisson_arrivals(rate: float, n: int, rng) -> np.ndarray:
    """Arrival times of a Poisson process: cumulative sums of exponential gaps of mean 1/λ."""
    return np.cumsum(rng.exponential(1.0 / rate, size=n))


def gamma_arrivals(rate: float, n: int, rng, cv: float) -> np.ndarray:
    """Bursty arrivals: gamma gaps of mean 1/λ and coefficient of variation ``cv`` (shape 1/cv²; cv = 1 is Poisson)."""
    k = 1.0 / (cv * cv)
    return np.cumsum(rng.gamma(k, 1.0 / (rate * k), size=n))


def open_loop_arrivals(rate, arrivals: str, burstiness, n: int, rng) -> tuple:
    """``n`` arrival times at ``rate`` requests/s (``arrivals`` 'poisson' or 'gamma' with CV ``burstiness``) and the
    traffic's description."""
    if not (0 < float(rate) <= 1e7):
        raise InputError("rate", f"{rate!r}", "requests per second, above 0 and up to 10⁷")
    if arrivals == "poisson":
        arr = poisson_arrivals(float(rate), n, rng)
    elif arrivals == "gamma":
        if not 0.05 <= float(burstiness) <= 20:
            raise InputError("burstiness", f"{burstiness!r}", "a coefficient of variation from 0.05 to 20")
        arr = gamma_arrivals(float(rate), n, rng, float(burstiness))
    else:
        raise InputError("arrivals", f"{arrivals!r}", "poisson or gamma")
    return arr, f"{arrivals} arrivals at {float(rate):g} req/s"


def closed_loop_arrivals(concurrency, arrivals: str, n: int) -> tuple:
    """A closed loop of ``concurrency`` users: arrival times (all 0 here; the event loop sets each next request's
    when its user's previous one finishes) and the traffic's description."""
    c = float(concurrency)
    if not (1 <= c <= 1e6) or c != int(c):
        raise InputError("concurrency", f"{concurrency!r}", "a whole number of users from 1 to 10⁶")
    if arrivals not in ("poisson", "steady", "waves"):
        raise InputError("arrivals", f"{str(arrivals)[:80]!r} with a closed loop",
                         "steady (the users' progress spread out) or waves (they start together)")
    return np.zeros(n), f"closed loop, {int(c)} users" + (", starting together" if arrivals == "waves" else "")


def draw_requests(isl, osl, requests, rate, concurrency, arrivals: str, burstiness, rng) -> tuple:
    """``requests`` requests of lengths ``isl``/``osl`` (:func:`parse_lengths` forms) arriving at ``rate`` or from
    ``concurrency`` users: (arrival times, ISL, OSL, description)."""
    n = int(requests)
    if not 1 <= n <= MAX_REQUESTS:
        raise InputError("requests", f"{requests!r}", f"a whole number from 1 to {MAX_REQUESTS:,}")
    isl_spec, osl_spec = parse_lengths(isl, "isl"), parse_lengths(osl, "osl")
    isl_a = sample_lengths(isl_spec, n, rng)
    osl_a = sample_lengths(osl_spec, n, rng)
    if rate is not None:
        arr, src = open_loop_arrivals(rate, arrivals, burstiness, n, rng)
    else:
        arr, src = closed_loop_arrivals(concurrency, arrivals, n)
    return arr, isl_a, osl_a, src


# --------------------------------------------------------------------------------------
# Traces
# --------------------------------------------------------------------------------------

_TRACE_FIELDS = {
    "arrival_s": ("arrival_s", "arrival", "timestamp", "time", "t", "arrival_time"),
    "isl": ("isl", "input_tokens", "input_length", "prompt_tokens", "input_len"),
    "osl": ("osl", "output_tokens", "output_length", "completion_tokens", "output_len"),
}
_TOO_MANY = f"at most {MAX_REQUESTS:,} requests"


def parse_trace(text: str, name: str = "trace") -> dict:
    """A request trace (CSV with a header, or JSON lines): arrival time (s), ISL, OSL per row.

    Column names accepted: arrival_s|arrival|timestamp|time, isl|input_tokens|prompt_tokens,
    osl|output_tokens|completion_tokens. Times are sorted; a bad row is an error naming the
    row (1-based, header = row 1 for CSV) and the field.
    """
    lines = [("" if ln.lstrip().startswith("#") else ln) for ln in text.splitlines()]  # '#' comment lines
    body = next((ln for ln in lines if ln.strip()), None)
    if body is None:
        raise InputError(name, "empty trace", "CSV with a header arrival_s,isl,osl or JSON lines")
    rows = _json_rows if body.lstrip().startswith("{") else _csv_rows
    cols, rownum, raw = rows(lines, name)
    if not rownum:
        raise InputError(name, "no requests", "at least one row")
    out = {f: _trace_column(name, f, cols[f], rownum, vals) for f, vals in raw.items()}
    o = np.argsort(out["arrival_s"], kind="stable")
    return {f: v[o] for f, v in out.items()}


def _trace_columns(name: str, keys) -> dict:
    """The column each trace field is read from (the first accepted name present)."""
    cols = {}
    for f, names in _TRACE_FIELDS.items():
        hit = [k for k in names if k in keys]
        if not hit:
            raise InputError(name, f"no {f} column (columns: {', '.join(sorted(keys))})", " or ".join(names))
        cols[f] = hit[0]
    return cols


def _json_rows(lines: list, name: str) -> tuple:
    """JSON lines → (columns, 1-based line of each request, raw values per field)."""
    cols, rownum, raw = None, [], {f: [] for f in _TRACE_FIELDS}
    for i, ln in enumerate(lines, 1):
        if not ln.strip():
            continue
        obj = _json_object(ln, f"{name} row {i}")
        if cols is None:
            obj = {str(k).strip().lower(): v for k, v in obj.items()}
            cols = _trace_columns(name, obj.keys())
        elif any(c not in obj for c in cols.values()):
            obj = {str(k).strip().lower(): v for k, v in obj.items()}
        rownum.append(i)
        for f, c in cols.items():
            v = obj.get(c)
            raw[f].append(v if isinstance(v, (int, float)) and not isinstance(v, bool) else
                          (v if isinstance(v, str) else repr(v)))
        if len(rownum) > MAX_REQUESTS:
            raise InputError(name, f"more than {MAX_REQUESTS:,} requests", _TOO_MANY)
    return cols, rownum, raw


def _json_object(line: str, where: str) -> dict:
    """One JSON-lines row as a dict (an error naming the row otherwise)."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise InputError(where, f"not JSON ({e.msg})", "one JSON object per line") from None
    except RecursionError:
        raise InputError(where, "nested too deeply to read",
                         '{"arrival_s": 0.1, "isl": 1000, "osl": 200}, one flat object per line') from None
    if not isinstance(obj, dict):
        raise InputError(where, "not a JSON object", '{"arrival_s": 0.1, "isl": 1000, "osl": 200}')
    return obj


def _csv_rows(lines: list, name: str) -> tuple:
    """CSV with a header → (columns, 1-based line of each request, raw values per field)."""
    idx, header, width, rownum, raw = None, None, 0, [], {f: [] for f in _TRACE_FIELDS}
    for i, rec in enumerate(csv.reader(io.StringIO("\n".join(lines))), 1):
        if not rec or not any(c.strip() for c in rec):
            continue
        if idx is None:
            header = [c.strip().lower() for c in rec]
            idx = {f: header.index(c) for f, c in _trace_columns(name, header).items()}
            width = len(header)
            continue
        if len(rec) != width:
            raise InputError(f"{name} row {i}", f"{len(rec)} fields, the header has {width}",
                             "one value per header column")
        rownum.append(i)
        for f, k in idx.items():
            raw[f].append(rec[k])
        if len(rownum) > MAX_REQUESTS:
            raise InputError(name, f"more than {MAX_REQUESTS:,} requests", _TOO_MANY)
    if idx is None:
        raise InputError(name, "no header", "a header row naming arrival_s, isl, osl")
    return {f: header[k] for f, k in idx.items()}, rownum, raw


def _trace_column(name: str, f: str, col: str, rownum: list, vals: list) -> np.ndarray:
    """One field's values as floats, each checked (seconds 0…10⁹; whole tokens 1…10⁷), errors naming row and column."""
    acc = "seconds from 0 to 10⁹" if f == "arrival_s" else "a whole number of tokens from 1 to 10⁷"
    try:
        v = np.asarray(vals, dtype=float)
    except (TypeError, ValueError):  # find the first value that is not a number, for the error
        for r, x in zip(rownum, vals):
            try:
                float(x)
            except (TypeError, ValueError):
                raise InputError(f"{name} row {r} field {col}", f"{x!r} is not a number", acc) from None
        raise  # pragma: no cover
    if f == "arrival_s":
        bad = ~np.isfinite(v) | (v < 0) | (v > 1e9)
    else:
        bad = ~np.isfinite(v) | (v < 1) | (v > 1e7) | (v != np.round(v))
    if bad.any():
        k = int(np.argmax(bad))
        raise InputError(f"{name} row {rownum[k]} field {col}", f"{vals[k]!r}", acc)
    return v


def example_trace_text() -> str:
    """The example trace shipped with the package (CSV: arrival_s, isl, osl)."""
    return (Path(__file__).resolve().parents[2] / "specs" / "data" / "traces" / "example.csv").read_text()


__all__ = ["parse_lengths", "sample_lengths", "poisson_arrivals", "gamma_arrivals",
           "open_loop_arrivals", "closed_loop_arrivals", "draw_requests", "parse_trace", "example_trace_text"]
