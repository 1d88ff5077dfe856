"""Page inputs: what a page lets a person change, and how a request's strings are checked.

Every value a request carries is validated here before any library call: names must be
catalog names (never paths: a request cannot make rackmath read a file), numbers must
parse (``8K``, ``$2/h``) and lie inside the input's range, lists and grids are capped.
A bad value raises the library's own one-line :class:`~rackmath.errors.InputError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import InputError

MAX_POINTS = 512  # the most points any list or grid a request asks for may have
MAX_TEXT = 200  # the longest string value accepted for one parameter


@dataclass
class Input:
    """One control on a page: ``kind`` is select, slider or check. Sliders with ``log`` move in powers of 2."""

    name: str
    label: str
    kind: str
    default: object
    options: list = field(default_factory=list)  # select: [value, …] or [[value, label], …]
    lo: float = 0.0
    hi: float = 1.0
    step: float = 1.0
    log: bool = False
    integer: bool = False
    unit: str = ""
    help: str = ""
    zero: str = ""  # what 0 means on a slider whose 0 is "the default" (e.g. "one domain")

    def spec(self) -> dict:
        out = {k: getattr(self, k) for k in ("name", "label", "kind", "default", "options", "lo", "hi", "step", "log",
                                              "integer", "unit", "help", "zero")}
        if self.kind == "slider" and self.log:
            out["stops"] = stops(self.lo, self.hi, self.integer, self.default)
        return out

    def values(self) -> list[str]:
        return [o[0] if isinstance(o, (list, tuple)) else o for o in self.options]

    def parse(self, text):
        """The checked value of this input from a request string (None/'' means the default)."""
        if text is None:
            return self.default
        text = str(text).strip()
        if len(text) > MAX_TEXT:
            raise InputError(self.name, f"value of {len(text)} characters", f"at most {MAX_TEXT} characters")
        if self.kind == "check":
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off", ""):
                return False
            raise InputError(self.name, f"cannot read {text!r}", "true or false (1 or 0)")
        if self.kind == "select":
            allowed = self.values()
            if text in allowed:
                return text
            low = {str(v).lower(): v for v in allowed}
            if text.lower() in low:
                return low[text.lower()]
            from ..errors import UnknownNameError

            raise UnknownNameError(self.name, text, [v for v in allowed if v], "one of " + ", ".join(
                v or "(default)" for v in allowed[:40]))
        if text == "":
            return self.default
        from .. import units

        v = units.parse_count(text, self.name)
        if not (self.lo <= v <= self.hi):
            raise InputError(self.name, f"{v:g} is out of range", f"a number from {self.lo:g} to {self.hi:g}")
        return int(round(v)) if self.integer else v


NICE = (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8)  # per decade: the values people type (1000, 1500, 2000, …)


def stops(lo: float, hi: float, integer: bool, default=None) -> list:
    """The values a log slider moves through: the round numbers of each decade (ISL 1000, batch 500) and, for
    integer sliders up to 2^24, the powers of two (1024, 8192); 0 first where the range starts at 0 (the default)."""
    import math

    base = lo if lo > 0 else (1.0 if integer else 0.1)  # the first value past a 0 ("the default")
    out = {float(base), float(hi)} | ({float(default)} if default else set())
    for k in range(math.floor(math.log10(base)), math.ceil(math.log10(hi)) + 1):
        out |= {m * 10.0 ** k for m in NICE}
    if integer and hi <= 2 ** 24:
        out |= {2.0 ** k for k in range(25)}
    vals = sorted({(round(v) if integer else float(f"{v:.6g}")) for v in out if base <= v <= hi})
    return ([0] if lo == 0 else []) + vals


def select(name, label, options, default, help=""):
    return Input(name, label, "select", default, options=list(options), help=help)


def slider(name, label, lo, hi, default, *, log=False, step=1.0, integer=True, unit="", help="", zero=""):
    return Input(name, label, "slider", default, lo=lo, hi=hi, step=step, log=log, integer=integer, unit=unit,
                 help=help, zero=zero)


def check(name, label, default=False, help=""):
    return Input(name, label, "check", default, help=help)


def unknown_parameter(name: str, known) -> None:
    """Refuse a query parameter a route does not take, naming the closest it does (``weight_dtype`` →
    ``weights_dtype``): a misspelt input must never silently give the default's answer."""
    import difflib

    known = list(known)
    name = str(name)[:40]
    close = difflib.get_close_matches(name.lower(), known, n=1, cutoff=0.6)
    problem = "unknown parameter" + (f"; did you mean {close[0]}?" if close else "")
    raise InputError(name, problem, ("one of " + ", ".join(known)) if known else "no parameters")


def parse_params(inputs: list[Input], query: dict) -> dict:
    """Check a request's parameters against a page's inputs: unknown names are refused too."""
    known = {i.name: i for i in inputs}
    for k in query:
        if k not in known:
            unknown_parameter(k, known)
    return {n: i.parse(query.get(n)) for n, i in known.items()}


def parse_grid(text, field: str, kind: str = "count", cap: int = MAX_POINTS):
    """A list '1,64,4096' or a range 'LO:HI:log', 'LO:HI:logN', 'LO:HI:N' (as the CLI), at most ``cap`` points.

    The point count is checked before anything is allocated."""
    s = str(text).strip()
    if len(s) > 4000:
        raise InputError(field, f"value of {len(s)} characters", "a shorter list or a range 'LO:HI:logN'")
    if ":" in s:
        parts = s.split(":")
        spec = parts[2].strip() if len(parts) == 3 else "log"
        digits = spec[3:] if spec.startswith("log") else spec
        if digits and (not digits.isdigit() or len(digits) > 6 or int(digits) > cap):
            raise InputError(field, f"{digits!r} points", f"at most {cap} points per request")
    elif s.count(",") >= cap:
        raise InputError(field, f"{s.count(',') + 1} values", f"at most {cap} values per request")
    from ..options import parse_range

    vals = parse_range(s, field, kind)
    if vals.size > cap:
        raise InputError(field, f"{vals.size} points", f"at most {cap} points per request")
    return vals
