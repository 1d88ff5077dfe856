"""Derivations: every result can show its working, like the blackboard.

A :class:`Derivation` is an ordered list of :class:`Step`: a symbol, the formula,
the formula with the numbers substituted, the value and its unit. Analyses build
one alongside their numbers; interfaces render it (``--explain``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .units import format_duration, format_si, human


def fmt(value, unit: str = "") -> str:
    """Format one number for a derivation: the same human units as every table (``units.human``), with four
    significant figures for plain numbers (a derivation shows its working)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return str(value)
    if unit == "s":
        return format_duration(v)
    if unit in ("", "x", "×"):
        return human(v, "", digits=4 if 1e-3 <= abs(v) < 1e5 else 3)
    if unit.startswith("$"):
        return human(v, "$", digits=4) + unit[1:]
    return format_si(v, unit)


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
        if self.substituted and self.substituted != self.formula:
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
        self.steps.append(Step(symbol, formula, substituted, value, unit, note, expr, key))
        return value

    def check(self, rel: float = 1e-6) -> list[str]:
        """Steps whose ``expr``, evaluated on the earlier steps' values, does not reproduce their value."""
        import math

        env, bad = {"max": max, "min": min, "ceil": math.ceil, "sqrt": math.sqrt}, []
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
