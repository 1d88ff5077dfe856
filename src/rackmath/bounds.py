"""Bounds: the largest count, range and size rackmath accepts, in one place.

Every limit a user can run into is a named constant here, checked *before* anything is
allocated or enumerated, and reported as a one-line :class:`~rackmath.errors.InputError`
naming the field (CLI: ``error: field: problem (accepted: …)``, exit status 2). The limits
are far beyond any real deployment, model or price sheet; they exist so that a typo
(``-b 1:2:log1000000000``, ``--max-pp 9223372036854775808``, ``n_layers = 1e9``) is an
error rather than a 7 GiB allocation, an endless loop or an ``OverflowError``.

The same limits are documented in docs/architecture.md ("Bounds and errors").
"""

from __future__ import annotations

import contextlib
import functools
import math
import re
import sys
import warnings

from .errors import CatalogError, InputError, RackmathError

# ---------------------------------------------------------------------------------- ranges
MAX_RANGE_POINTS = 10_000
"""Values in one range option ('LO:HI:logN', 'LO:HI:N' or a comma list)."""

MAX_GRID_POINTS = 1_000_000
"""Points in one broadcast grid (range × range × …) an analysis may evaluate (`sweep --csv`)."""

MAX_LAYOUTS = 1_000_000
"""Layouts × micro-batches one layout search evaluates (`layout`, `plot pareto`): ~8 s and ~0.6 GB here."""

MAX_TABLE_ROWS = 10_000
"""Configurations a command prints as a table or JSON (`roofline`); `sweep --csv` takes up to MAX_GRID_POINTS."""

MAX_REQUESTS = 3_000_000
"""Requests one simulation replays (`simulate --requests`, a trace's rows): ~440 bytes each at peak, so the largest
run fits well inside 2 GB (peak RSS at 4·10⁶ requests: 1.4–1.8 GB, issue 36; the limit was 2·10⁷, 3.9 GB at 10⁷)."""

MAX_TRACE_BYTES = 256_000_000
"""Largest `simulate --trace` file read (256 MB: ~8·10⁶ rows of 30 bytes; more rows than MAX_REQUESTS are refused)."""

# ---------------------------------------------------------------------------------- CLI integers
MAX_INT_OPTION = 1_000_000
"""Default maximum of every integer CLI option (chips, stages, experts, layers …)."""

INT_OPTION_MAX = {
    "--max-pp": 4096,
    "--zero": 3,
    "--layers": 100_000,
    "--d-model": 10_000_000,
    "--heads": 100_000,
    "--k": 100_000,
    "--redundant-experts": 100_000,
}
"""Integer options with a tighter maximum than :data:`MAX_INT_OPTION` (by option name)."""

MAX_FLOAT_OPTION = 1e30
"""Largest magnitude of a plain float CLI option (speed-ups, prices, ratios, fractions)."""


# ---------------------------------------------------------------------------------- quantities
from .limits import MIN_MAGNITUDE, QUANTITY_MAX  # noqa: E402,F401 (defined below errors: no import cycle)

# ---------------------------------------------------------------------------------- catalogs
MODEL_INT_MAX = {
    "n_layers": 10_000,
    "d_model": 1_000_000,
    "vocab_size": 100_000_000,
    "n_heads": 100_000,
    "n_kv_heads": 100_000,
    "head_dim": 100_000,
    "d_ff": 10_000_000,
    "ffn_matrices": 3,
    "q_lora_rank": 1_000_000,
    "kv_lora_rank": 1_000_000,
    "qk_nope_head_dim": 100_000,
    "qk_rope_head_dim": 100_000,
    "v_head_dim": 100_000,
    "norms_per_layer": 16,
    "sliding_window": 1_000_000_000,
    "kv_share": 10_000,
    "index_topk": 1_000_000_000,
    "index_n_heads": 100_000,
    "index_head_dim": 100_000,
    "n_experts": 100_000,
    "experts_per_token": 100_000,
    "n_shared_experts": 100_000,
    "moe_d_ff": 10_000_000,
    "first_k_dense": 10_000,
    "moe_layer_freq": 10_000,
    "mtp_layers": 10_000,
    "max_context": 1_000_000_000_000,
}
"""Largest value of each integer field of a model (catalog TOML or HuggingFace config.json)."""

MAX_SCALEUP = 1_000_000
"""Chips in one scale-up domain or system (system.scaleup_size, max_chips, dies_per_chip)."""

MAX_NAME_LEN = 200
"""Characters in a catalog name or alias."""

MAX_ALIASES = 64
"""Aliases of one catalog entry."""

MAX_FILE_BYTES = 20_000_000
"""Largest catalog TOML or config.json file read (20 MB)."""

MAX_NESTING = 64
"""Deepest nesting of tables/arrays in a catalog or config file."""


# ---------------------------------------------------------------------------------- checks
def check_int(value, field: str, lo: int = 1, hi: int = MAX_INT_OPTION, accepted: str | None = None) -> int:
    """A whole number in [lo, hi] (bools and fractions refused). Returns it as an int."""
    ok = isinstance(value, int) and not isinstance(value, bool)
    if not ok and isinstance(value, float) and math.isfinite(value) and value == int(value):
        value, ok = int(value), True
    if not ok:
        raise InputError(field, f"{_show(value)} is not a whole number", accepted or f"an integer from {lo} to {hi:,}")
    if not lo <= value <= hi:
        raise InputError(field, f"{_show(value)} is out of range", accepted or f"an integer from {lo} to {hi:,}")
    return value


def check_float(value, field: str, lo: float = 0.0, hi: float = MAX_FLOAT_OPTION, allow_zero: bool = True,
                accepted: str | None = None) -> float:
    """A finite float in [lo, hi]; a non-zero magnitude below :data:`MIN_MAGNITUDE` is refused."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(field, f"{_show(value)} is not a number", accepted or f"a number from {lo:g} to {hi:g}")
    v = float(value)
    acc = accepted or f"a finite number from {lo:g} to {hi:g}"
    if not math.isfinite(v):
        raise InputError(field, f"{v!r} is not a finite number", acc)
    if v == 0 and not allow_zero:
        raise InputError(field, "0 is not accepted here", acc.replace(f"from {lo:g}", f"above {lo:g}"))
    if v != 0 and abs(v) < MIN_MAGNITUDE:
        raise InputError(field, f"{v:g} is too small (below {MIN_MAGNITUDE:g})", acc)
    if not lo <= v <= hi:
        raise InputError(field, f"{v:g} is out of range", acc)
    return v


def check_quantity(value: float, kind: str, field: str, accepted: str, allow_zero: bool) -> float:
    """A parsed quantity (units.parse_*): finite, ≥ 0 (or > 0), not denormal, at most QUANTITY_MAX[kind]."""
    hi = QUANTITY_MAX.get(kind, QUANTITY_MAX["count"])
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise InputError(field, f"{value!r} is not a positive finite number", accepted)
    if 0 < value < MIN_MAGNITUDE:
        raise InputError(field, f"{value:g} is too small (non-zero values start at {MIN_MAGNITUDE:g})", accepted)
    if value > hi:
        raise InputError(field, f"{value:g} is out of range (at most {hi:g})", accepted)
    return value


def check_points(n, field: str, maximum: int = MAX_RANGE_POINTS) -> int:
    """The number of points a range asks for: 1 ≤ n ≤ maximum, checked before allocating."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise InputError(field, f"{n!r} points", f"a range of 1 to {maximum:,} points")
    if n > maximum:
        raise InputError(field, f"{n:,} points is too many", f"a range of at most {maximum:,} points")
    return n


def check_grid(shape, field: str = "ranges", maximum: int = MAX_GRID_POINTS, hint: str = "use shorter ranges") -> None:
    """A broadcast grid of ranges: at most ``maximum`` points in all."""
    n = 1
    for s in shape:
        n *= int(s)
    if n > maximum:
        raise InputError(field, f"{n:,} combinations is too many", f"at most {maximum:,}; {hint}")


def _show(v) -> str:
    s = repr(v)
    return s if len(s) <= 40 else s[:37] + "…"


# ---------------------------------------------------------------------------------- nesting
def nesting_depth(obj, limit: int = MAX_NESTING) -> int:
    """Depth of nested dicts/lists, iteratively (no recursion), stopping once past ``limit``."""
    stack = [(obj, 1)]
    deepest = 0
    while stack:
        o, d = stack.pop()
        if d > deepest:
            deepest = d
            if deepest > limit:
                return deepest
        if isinstance(o, dict):
            stack.extend((v, d + 1) for v in o.values())
        elif isinstance(o, (list, tuple)):
            stack.extend((v, d + 1) for v in o)
    return deepest


def check_document(doc, path: str, what: str = "file") -> None:
    """A parsed TOML/JSON document: not nested deeper than :data:`MAX_NESTING`."""
    if nesting_depth(doc) > MAX_NESTING:
        raise CatalogError(path, what, f"nested deeper than {MAX_NESTING} levels")


# ---------------------------------------------------------------------------------- numpy quiet
@contextlib.contextmanager
def quiet():
    """Numerical warnings never reach the user: numpy's errstate off (when numpy is loaded) and
    RuntimeWarnings/UserWarnings silenced. Results are checked instead (NaN/inf become errors)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np = sys.modules.get("numpy")
        if np is None:
            yield
        else:
            with np.errstate(all="ignore"):
                yield


# ---------------------------------------------------------------------------------- CLI tree
def bound_cli(command) -> None:
    """Give every integer option of a click command tree a maximum and every float option a finite range.

    Integer options get ``INT_OPTION_MAX[name]`` (default :data:`MAX_INT_OPTION`) unless they already
    have a smaller maximum; float options refuse NaN, ±inf, denormals and magnitudes above
    :data:`MAX_FLOAT_OPTION`. Applied by ``rackmath.cli.main`` to the whole app, so an option added
    later is bounded too.
    """
    import click

    _BoundedInt, _FiniteFloat = _click_types()
    stack = [command]
    while stack:
        c = stack.pop()
        if isinstance(c, click.Group):
            stack.extend(c.commands.values())
        for p in getattr(c, "params", ()):
            t = p.type
            if isinstance(t, (click.types.IntParamType,)) and not isinstance(t, _BoundedInt):
                longest = max(p.opts, key=len) if p.opts else (p.name or "")
                hi = INT_OPTION_MAX.get(longest, MAX_INT_OPTION)
                lo = getattr(t, "min", None)
                old_hi = getattr(t, "max", None)
                if old_hi is not None:
                    hi = min(hi, old_hi)
                p.type = _BoundedInt(lo, hi, getattr(t, "min_open", False), getattr(t, "max_open", False))
            elif isinstance(t, click.types.FloatParamType) and not isinstance(t, _FiniteFloat):
                p.type = _FiniteFloat(getattr(t, "min", None), getattr(t, "max", None),
                                      getattr(t, "min_open", False), getattr(t, "max_open", False))


@functools.lru_cache(maxsize=1)
def _click_types():
    import click

    class BoundedInt(click.IntRange):
        """An integer with a maximum (so 10^400 is a usage error, not an OverflowError later)."""

        name = "integer"

        def convert(self, value, param, ctx):
            if isinstance(value, str) and len(value.strip().lstrip("+-")) > 30:
                self.fail(f"{value[:20]}… is out of range (at most {self.max:,})", param, ctx)
            return super().convert(value, param, ctx)

    class FiniteFloat(click.FloatRange):
        """A float that is finite, not denormal, and at most MAX_FLOAT_OPTION in magnitude."""

        name = "float"

        def _describe_range(self) -> str:  # no '[x<=None]' in --help for an option without a range
            return "" if self.min is None and self.max is None else super()._describe_range()

        def convert(self, value, param, ctx):
            rv = super().convert(value, param, ctx)
            if not math.isfinite(rv):
                self.fail(f"{rv!r} is not a finite number", param, ctx)
            if rv != 0 and abs(rv) < MIN_MAGNITUDE:
                self.fail(f"{rv:g} is too small (non-zero values start at {MIN_MAGNITUDE:g})", param, ctx)
            if abs(rv) > MAX_FLOAT_OPTION:
                self.fail(f"{rv:g} is out of range (at most {MAX_FLOAT_OPTION:g})", param, ctx)
            return rv

    return BoundedInt, FiniteFloat


# ---------------------------------------------------------------------------------- Python API
# Whole-number arguments of the public API: a fractional value (number, array or string) raises InputError.
# (context, isl and osl are whole only in ranges, where they are rounded: a model's context may be a real grid.)
WHOLE = ("batch", "concurrency", "chips", "gpus", "tp", "ep", "pp", "dp", "prefill_gpus", "decode_gpus", "mtp",
         "redundant_experts", "pass_len", "zero_stage", "microbatches", "micro_batches", "max_pp", "kv_shards",
         "max_num_tokens")


#: Internal parameter names and the argument a caller gave for them (``gpus=``; ``chips=`` is an alias).
API_NAMES = {"chips": "gpus"}

#: Arguments that name a catalog entry (or are its object): a number, a boolean or raw bytes is a wrong call.
NAMED = ("model", "hardware", "sheet", "name", "efficiency", "framework")

_BUILTIN_ATTR = re.compile(r"^'(int|float|bool|complex|bytes|bytearray|str|list|tuple|dict|set|NoneType)' object has "
                           r"no attribute")


def api(fn):
    """Wrap a public API function (``rackmath.<name>``): arguments are checked *before* the call, by name —
    raw bytes anywhere, a number where a model or hardware name belongs, more than :data:`MAX_GRID_POINTS` values
    in an array (or in the broadcast of all of them: the CLI's sweep limit), fractional whole-number quantities
    (:data:`WHOLE`) — each an :class:`~rackmath.errors.InputError` naming the argument; numpy warnings are
    silenced; arithmetic failures from absurd inputs (Overflow/ZeroDivision/Memory, a builtin without the
    attribute an object should have) are raised as InputError rather than bare Python errors. An error the
    engine raises for ``chips`` names ``gpus`` when that is what the caller wrote (:data:`API_NAMES`)."""
    import inspect

    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # pragma: no cover - builtins
        sig = None

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        given = _arguments(sig, args, kwargs)
        check_api_arguments(given)
        try:
            with quiet():
                return fn(*args, **kwargs)
        except InputError as exc:
            typed = API_NAMES.get(exc.field)
            if typed and exc.field not in given and str(exc).startswith(exc.field + ": "):
                exc.args = (typed + str(exc)[len(exc.field):],) + exc.args[1:]
                exc.field = typed
            raise
        except RackmathError:
            raise
        except (OverflowError, ZeroDivisionError, FloatingPointError) as exc:
            raise InputError("input", f"a value is outside the range this can compute ({exc})",
                             "physically sensible, finite values") from None
        except MemoryError:
            raise InputError("input", "needs more memory than this machine has",
                             f"smaller arrays or counts (at most {MAX_GRID_POINTS:,} points)") from None
        except AttributeError as exc:
            if not _BUILTIN_ATTR.match(str(exc)):  # an attribute missing from rackmath's own objects: a bug
                raise
            raise InputError("input", f"wrong type ({exc})", "numbers, arrays of numbers or names") from None
        except TypeError as exc:
            if "argument" in str(exc) and fn.__name__ in str(exc):  # a wrong call: let Python report it
                raise
            raise InputError("input", f"wrong type ({exc})", "numbers, arrays of numbers or names") from None
        except ValueError as exc:  # numpy's "could not convert string to float" and the like
            raise InputError("input", str(exc)[:200], "numbers, arrays of numbers or names") from None

    wrapper.__wrapped_api__ = True
    return wrapper


def _arguments(sig, args, kwargs) -> dict:
    """The call's arguments by parameter name (``**kw`` flattened); the keywords alone when they do not bind
    (Python then reports the wrong call)."""
    if sig is None:
        return dict(kwargs)
    try:
        bound = sig.bind_partial(*args, **kwargs)
    except TypeError:
        return dict(kwargs)
    out = {}
    for k, v in bound.arguments.items():
        p = sig.parameters[k]
        if p.kind is p.VAR_KEYWORD:
            out.update(v)
        elif p.kind is not p.VAR_POSITIONAL:
            out[k] = v
    return out


def check_api_arguments(given: dict) -> None:
    """The argument checks of :func:`api`, by name (see there). Raises InputError naming the first bad one."""
    import numpy as np

    arrays = {}
    for k, v in given.items():
        if isinstance(v, (bytes, bytearray, memoryview)):
            raise InputError(k, f"{_show(v)} is bytes", "text (str), e.g. '8K', or numbers; decode bytes first")
        if k in NAMED and (isinstance(v, (bool, int, float, complex, np.number)) or
                           (k in ("model", "hardware") and isinstance(v, (dict, set)))):
            raise InputError(k, f"{_show(v)} is not a {k} name",
                             f"a catalog name such as {'llama-3.1-8b' if k == 'model' else 'h100'}"
                             + (", a config.json path or a ModelSpec" if k == "model" else
                                ", or a System/Chip object" if k == "hardware" else ""))
        n = _size(v)
        if n is not None:
            if n > MAX_GRID_POINTS:
                raise InputError(k, f"{n:,} values is too many", f"at most {MAX_GRID_POINTS:,} (the CLI's sweep limit)")
            if n > 1 and isinstance(v, np.ndarray):
                arrays[k] = v.shape
    if len(arrays) > 1:
        try:
            shape = np.broadcast_shapes(*arrays.values())
        except ValueError:
            return  # not broadcastable: the function says so
        total = math.prod(shape)
        if total > MAX_GRID_POINTS:
            raise InputError(", ".join(arrays), f"{total:,} combinations is too many",
                             f"at most {MAX_GRID_POINTS:,} (the CLI's sweep limit)")
    for k in WHOLE:  # strings (and lists holding them) are parsed, then checked, by api.py
        v = given.get(k)
        if v is not None and not isinstance(v, str) and \
                not (isinstance(v, (list, tuple)) and any(isinstance(x, str) for x in v)):
            _check_whole(v, k)


def _size(v) -> int | None:
    """Values in an array argument (numpy array, list or tuple; nested lists counted without building them)."""
    import numpy as np

    if isinstance(v, np.ndarray):
        return int(v.size)
    if isinstance(v, (list, tuple)):
        n, stack = 0, [v]
        while stack:
            x = stack.pop()
            if isinstance(x, (list, tuple)):
                if len(x) > MAX_GRID_POINTS:
                    return len(x)
                stack.extend(x)
            elif isinstance(x, np.ndarray):
                n += int(x.size)
            else:
                n += 1
            if n > MAX_GRID_POINTS:
                return n
        return n
    return None


def _check_whole(v, field: str) -> None:
    import numpy as np

    try:
        a = np.asarray(v, dtype=float)
    except OverflowError:
        raise InputError(field, f"{_show(v)} is out of range", "a whole number up to 1e30") from None
    except (TypeError, ValueError):
        raise InputError(field, f"{_show(v)} is not a number", "a whole number") from None
    bad = ~np.isfinite(a) | (a != np.round(a))
    if np.any(bad):
        first = float(a[bad].flat[0] if a.ndim else a)
        raise InputError(field, f"{first!r} is not a whole number", f"whole numbers of {field.replace('_', ' ')}")
