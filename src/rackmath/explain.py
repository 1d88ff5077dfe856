"""Derivations: every result can show its working, like the blackboard.

A :class:`Derivation` is an ordered list of :class:`Step`: a symbol, the formula,
the formula with the numbers substituted, the value and its unit. Analyses build
one alongside their numbers; interfaces render it (``--explain``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from .units import format_duration, format_si, human


def fmt(value, unit: str = "") -> str:
    """Format one number for a derivation: the same human units as every table (``units.human``), with four
    significant figures for plain numbers (a derivation shows its working)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    if unit == "s":
        return format_duration(v)
    if unit in ("", "x", "×"):
        return human(v, "", digits=4 if 1e-3 <= abs(v) < 1e5 else 3)
    if unit.startswith("$"):
        return human(v, "$", digits=4) + unit[1:]
    return format_si(v, unit)


_PREFIX = {"E": 1e18, "P": 1e15, "T": 1e12, "G": 1e9, "M": 1e6, "k": 1e3, "": 1.0, "m": 1e-3, "µ": 1e-6, "u": 1e-6,
           "n": 1e-9}
_TIME = {"s": 1.0, "min": 60.0, "h": 3600.0, "days": 86400.0, "day": 86400.0, "years": 365.25 * 86400.0}
_UNITS = ("FLOP/s", "FLOP", "B/s", "B", "W", "Hz", "J", "tok/s", "tokens", "tok", "s")
_NUMBER = re.compile(r"(?P<usd>\$)?(?P<num>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[-+]?\d+)?)(?P<suffix>[TBMK](?![A-Za-z]))?"
                     r"(?P<unit>\s+(?:years|days|day|min|h(?![A-Za-z])|"
                     r"[EPTGMkmµun]?(?:FLOP/s|FLOP|B/s|B|W|Hz|J|tok/s|tokens|tok|s))(?![A-Za-z]|/[A-Za-z]))?"
                     r"(?P<per>/(?:h|Mtok|GPU-hour|chip-hour)(?![A-Za-z]))?(?P<pct>%)?")


def working_value(text: str):
    """The value of a derivation's substituted working, as printed (numbers with their units, ·, ×, ÷, −, ^,
    max/min/ceil/sqrt): '64 · 1' → 64.0, '10.3 TFLOP / (8 · 989 TFLOP/s · 0.65)' → 0.00200. None when the text is not
    arithmetic (words, '…'). Square-bracketed labels ('[bf16]', '[qkv_o]') are read as comments."""
    t = re.sub(r"\[[^\]]*\]", "", str(text))
    if "…" in t or not t.strip():
        return None
    t = re.sub(r"(∞|\binf\b)(\s+[A-Za-z/]+)?", " ∞ ", t)
    sup = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")
    t = re.sub(r"([⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+)", lambda m: "^" + m.group(1).translate(sup), t)

    def number(m):
        v = float(m.group("num").replace(",", ""))
        if m.group("suffix"):
            v *= {"T": 1e12, "B": 1e9, "M": 1e6, "K": 1e3}[m.group("suffix")]
        unit = (m.group("unit") or "").strip()
        if unit in _TIME:
            v *= _TIME[unit]
        elif unit:
            base = next(u for u in _UNITS if unit.endswith(u))
            v *= _PREFIX[unit[: len(unit) - len(base)]]
        if m.group("pct"):
            v /= 100.0
        return f"({v!r})"

    expr = _NUMBER.sub(number, t)
    expr = (expr.replace("·", "*").replace("×", "*").replace("÷", "/").replace("−", "-").replace("^", "**")
            .replace("∞", "inf"))
    if re.search(r"(?<![\d.])[A-Za-z_]", re.sub(r"\b(max|min|ceil|sqrt|inf)\b", "", expr)):  # words: not arithmetic
        return None
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return float(eval(expr, {"__builtins__": {}}, {"max": max, "min": min, "ceil": math.ceil,  # noqa: S307
                                                           "sqrt": math.sqrt, "inf": math.inf}))
    except Exception:  # noqa: BLE001 - not arithmetic after all
        return None


_OPS = {"Add": (" + ", 1), "Sub": (" − ", 1), "Mult": (" · ", 2), "Div": (" / ", 2), "Pow": ("^", 3)}


def _render(node, env: dict, units: dict, parent: int = 0) -> str:
    """One expression node as a working line: names → their values with units, constants → numbers."""
    import ast

    if isinstance(node, ast.IfExp):
        taken = eval(compile(ast.Expression(node.test), "<test>", "eval"),  # noqa: S307 (our own strings)
                     {"__builtins__": {}}, {"max": max, "min": min, "ceil": math.ceil, "inf": math.inf, **env})
        return _render(node.body if taken else node.orelse, env, units, parent)
    if isinstance(node, ast.BinOp):
        sym, prec = _OPS[type(node.op).__name__]
        text = _render(node.left, env, units, prec) + sym + _render(node.right, env, units, prec + 1)
        return f"({text})" if prec < parent else text
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return "−" + _render(node.operand, env, units, 3)
    if isinstance(node, ast.Call):
        return f"{node.func.id}(" + ", ".join(_render(a, env, units) for a in node.args) + ")"
    if isinstance(node, ast.Name):
        if node.id in env:
            return fmt(env[node.id], units.get(node.id, ""))
        if node.id == "inf":
            return "∞"
        raise KeyError(node.id)
    if isinstance(node, ast.Constant):
        return fmt(node.value)
    raise TypeError(type(node).__name__)


@dataclass
class Step:
    symbol: str
    formula: str
    substituted: str
    value: object
    unit: str = ""
    note: str = ""
    expr: str = ""  # the computation as a Python expression over earlier steps' keys (checked by tests)
    key: str = ""  # name other steps' ``expr`` use for this value (default: the symbol)

    def render(self) -> str:
        line = f"{self.symbol} = {self.formula}"
        if self.substituted and self.substituted not in (self.formula, fmt(self.value, self.unit)):
            line += f"\n    = {self.substituted}"
        line += f"\n    = {fmt(self.value, self.unit)}"
        if self.note:
            line += f"   [{self.note}]"
        return line

    def as_dict(self) -> dict:
        try:
            value = float(self.value)
        except (TypeError, ValueError):
            value = str(self.value)
        return {"symbol": self.symbol, "formula": self.formula, "substituted": self.substituted,
                "value": value, "unit": self.unit, "note": self.note}


@dataclass
class Derivation:
    title: str = ""
    steps: list[Step] = field(default_factory=list)
    conclusion: str = ""

    def add(self, symbol: str, formula: str, substituted: str, value, unit: str = "", note: str = "",
            expr: str = "", key: str = ""):
        """Append a step and return its value (so derivations read like the formulas they record).

        ``expr`` states the computation over earlier steps' ``key`` s (Python syntax); tests check that
        evaluating it reproduces ``value`` (:meth:`check`)."""
        if expr and not substituted:
            substituted = self.working(expr)
        self.steps.append(Step(symbol, formula, substituted, value, unit, note, expr, key))
        return value

    def _env(self) -> tuple[dict, dict]:
        env, units = {}, {}
        for s in self.steps:
            try:
                env[s.key or s.symbol] = float(s.value)
                units[s.key or s.symbol] = s.unit
            except (TypeError, ValueError):
                pass
        return env, units

    def working(self, expr: str) -> str:
        """``expr`` (over earlier steps' keys) printed with the numbers it computes with: the substituted line is
        generated from the computation, so it adds up to the value (a conditional shows the branch taken)."""
        import ast

        env, units = self._env()
        try:
            tree = ast.parse(expr, mode="eval").body
            return _render(tree, env, units)
        except Exception:  # noqa: BLE001 - a display must never fail the answer
            return ""

    def evaluate(self, expr: str) -> float:
        """``expr`` (over earlier steps' keys) evaluated on their values, as :meth:`check` evaluates a step's."""
        env, _ = self._env()
        return float(eval(expr, {"__builtins__": {}}, {"max": max, "min": min, "ceil": math.ceil,  # noqa: S307
                                                       "sqrt": math.sqrt, "inf": math.inf, **env}))

    def check(self, rel: float = 1e-6) -> list[str]:
        """Steps whose ``expr``, evaluated on the earlier steps' values, does not reproduce their value."""
        import math

        env, bad = {"max": max, "min": min, "ceil": math.ceil, "sqrt": math.sqrt, "inf": math.inf}, []
        for s in self.steps:
            if s.expr:
                try:
                    got = float(eval(s.expr, {"__builtins__": {}}, dict(env)))  # noqa: S307 (our own strings)
                except Exception as exc:  # noqa: BLE001
                    bad.append(f"{s.symbol}: {s.expr} failed ({exc})")
                    got = None
                try:
                    want = float(s.value)
                except (TypeError, ValueError):
                    want = None
                if got is not None and want is not None and not math.isclose(got, want, rel_tol=rel, abs_tol=1e-15):
                    bad.append(f"{s.symbol}: {s.expr} = {got!r}, printed {want!r}")
            try:
                env[s.key or s.symbol] = float(s.value)
            except (TypeError, ValueError):
                pass
        return bad

    def extend(self, other: "Derivation") -> "Derivation":
        self.steps.extend(other.steps)
        return self

    def render(self) -> str:
        out = [self.title] if self.title else []
        out += [s.render() for s in self.steps]
        if self.conclusion:
            out.append(self.conclusion)
        return "\n".join(out)

    def as_dict(self) -> dict:
        return {"title": self.title, "steps": [s.as_dict() for s in self.steps], "conclusion": self.conclusion}

    def __str__(self) -> str:
        return self.render()
