"""The lecture's claims (R1…R43), reproduced.

Each chapter module in this package (``ch1_batching``, ``ch2_racks``, …) defines

* ``claims() -> list[Claim]``: rackmath's value for each claim it covers, with the
  inputs, the lecture's value and whether they agree;
* optionally ``plots(outdir: Path) -> list[Path]``: the chapter's blackboard figures.

Modules are discovered by name (``ch<N>_*``), so a chapter is added by adding a file.
Claim IDs are the stable IDs of the lecture claims list (R1…R43; docs/lecture.md).
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field

from ..explain import Derivation


# What kind of row a claim is. Only "lecture" rows count towards agreement.
#   lecture    — the lecture's premises run through rackmath → compared with the lecture's number
#   real       — the same question on real hardware / a real model (shown next to its lecture row)
#   definition — true by definition (nothing to reproduce; shown, not counted)
#   cited      — quoted by the lecture, not derivable here (shown, not counted)
#   lookup     — a number read off data (a model card, a price sheet) and compared with the lecture's: nothing is
#                derived, so it is shown with its match and not counted as an agreement
KINDS = ("lecture", "real", "definition", "cited", "lookup")


@dataclass
class Agreement:
    """The outcome of comparing a value with the lecture's, and the tolerance it was held to.

    ``discriminated=False``: the model cannot tell the lecture's answer from the alternative
    (their gap is inside the model's own uncertainty) — the verdict is "not discriminated",
    neither an agreement nor a difference.
    """

    ok: bool
    tolerance: str
    discriminated: bool = True

    def __bool__(self):
        return bool(self.ok)


@dataclass
class Claim:
    id: str  # "R6"
    title: str
    value: object  # rackmath's number (float) or a short string
    unit: str
    lecture_value: object  # the lecture's number, a (lo, hi) range, or a string
    agrees: bool
    inputs: dict = field(default_factory=dict)
    note: str = ""
    chapter: str = ""
    derivation: Derivation | None = None
    tolerance: str = ""  # e.g. "±10% (computed)", "×/÷3.2 (order of magnitude: '~')", "in range", "qualitative"
    kind: str = "lecture"
    reason: str = ""  # why it differs (required when a lecture row does not agree)
    short: str = ""  # the terminal table's text: distinct for every row of one claim ID (default: title before " (")
    discriminated: bool = True  # False: the gap is inside the model's uncertainty ("not discriminated")

    def __post_init__(self):
        if isinstance(self.agrees, Agreement):
            self.tolerance = self.tolerance or self.agrees.tolerance
            self.discriminated = self.discriminated and self.agrees.discriminated
            self.agrees = self.agrees.ok
        self.agrees = bool(self.agrees)
        if not self.tolerance:
            self.tolerance = "qualitative"

    @property
    def ratio(self):
        """rackmath ÷ lecture where both are numbers (a range: ÷ its geometric middle); else None."""
        import math

        v, lv = self.value, self.lecture_value
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            try:
                v = float(v)
            except (TypeError, ValueError):
                return None
        if isinstance(lv, (tuple, list)):
            lo, hi = (float(x) for x in lv)
            if lo > 0 and math.isfinite(hi):
                lv = math.sqrt(lo * hi)
            else:
                return None
        if not isinstance(lv, (int, float)) or not lv:
            return None
        return float(v) / float(lv)

    @property
    def counted(self) -> bool:
        return self.kind == "lecture" and self.discriminated

    @property
    def verdict(self) -> str:
        if self.kind in ("definition", "cited"):
            return self.kind
        if self.kind == "lookup":
            return "lookup: matches" if self.agrees else "lookup: differs"
        if not self.discriminated:
            return "not discriminated"
        return "agrees" if self.agrees else "differs"

    @property
    def display_title(self) -> str:
        """The title the terminal table shows: ``short`` or the title without its parenthetical detail."""
        return self.short or self.title.split(" (")[0]

    def as_dict(self) -> dict:
        def plain(v):
            if isinstance(v, tuple):
                return [plain(x) for x in v]
            try:
                import numpy as np

                if isinstance(v, np.generic):
                    return v.item()
            except ImportError:  # pragma: no cover
                pass
            return v

        return {
            "id": self.id,
            "title": self.title,
            "value": plain(self.value),
            "unit": self.unit,
            "lecture_value": plain(self.lecture_value),
            "agrees": bool(self.agrees),
            "verdict": self.verdict,
            "kind": self.kind,
            "short": self.display_title,
            "tolerance": self.tolerance,
            "ratio": self.ratio,
            "reason": self.reason,
            "inputs": {k: plain(v) for k, v in self.inputs.items()},
            "note": self.note,
            "chapter": self.chapter,
            "derivation": self.derivation.as_dict() if self.derivation else None,
        }


# Tolerances follow the lecture's own wording:
COMPUTED = 0.10  # the lecture does the arithmetic on the board: ±10%
ABOUT = 1.5  # "about", "around", "typically", "similar": within a factor of 1.5
ORDER = 10 ** 0.5  # "~", "on the order of", "a thousand times": the same power of ten (×/÷3.16)


def agree(value: float, lecture, rel: float = COMPUTED, why: str = "") -> Agreement:
    """Agreement with the lecture: within ``rel`` of a number, or inside a (lo, hi) range it states."""
    if isinstance(lecture, (tuple, list)):
        lo, hi = lecture
        return Agreement(lo <= value <= hi, f"in the stated range{' (' + why + ')' if why else ''}")
    ok = abs(value - lecture) <= rel * abs(lecture)
    return Agreement(ok, f"±{rel:.0%}" + (f" ({why})" if why else (" (computed)" if rel == COMPUTED else "")))


def within_factor(value: float, lecture: float, factor: float, why: str = "") -> Agreement:
    """Agreement within a multiplicative factor: lecture/f ≤ value ≤ lecture·f."""
    ok = lecture / factor <= value <= lecture * factor
    tag = why or ("order of magnitude: '~'" if abs(factor - ORDER) < 1e-9 else "'about'" if factor == ABOUT else "")
    return Agreement(ok, f"×/÷{factor:.2g}" + (f" ({tag})" if tag else ""))


def qualitative(ok: bool, test: str) -> Agreement:
    """A claim the lecture makes as an inequality or a direction, tested as one."""
    return Agreement(bool(ok), f"qualitative: {test}")


def lookup(agreement: Agreement, source: str) -> Agreement:
    """A data look-up compared with the lecture's number: the same test, labelled as a look-up of ``source``."""
    return Agreement(agreement.ok, f"lookup ({source}): {agreement.tolerance}")


def not_discriminated(test: str) -> Agreement:
    """The model cannot separate the lecture's answer from the alternative: neither agrees nor differs."""
    return Agreement(False, f"not discriminated: {test}", discriminated=False)


def chapter_modules():
    """Chapter modules in lecture order (ch1_…, ch2_…, …)."""
    names = sorted(
        (m.name for m in pkgutil.iter_modules(__path__) if m.name.startswith("ch")),
        key=lambda n: int("".join(ch for ch in n.split("_")[0][2:] if ch.isdigit()) or 0),
    )
    return [importlib.import_module(f"{__name__}.{n}") for n in names]


def all_claims() -> list[Claim]:
    out: list[Claim] = []
    for mod in chapter_modules():
        for c in mod.claims():
            c.chapter = c.chapter or mod.__name__.rsplit(".", 1)[-1]
            out.append(c)
    return sorted(out, key=lambda c: (int(c.id[1:].split("-")[0].split(".")[0]), c.id, c.kind != "lecture"))


CHAPTERS = {
    "ch1_batching": ("00:00 How batch size affects token cost and speed",
                     "Every step reads the weights once, so batching many users amortizes that read until compute "
                     "binds; memory capacity caps the batch, and a full HBM read per step is why a step takes ~20 ms."),
    "ch2_racks": ("00:32 How MoE models are laid out across GPU racks",
                  "Experts spread across one rack's all-to-all scale-up network; the rack bounds how big an expert "
                  "layer (and so total parameters) can be."),
    "ch3_pipeline": ("00:47 Pipeline parallelism across racks — and why 'pipelining is not wise'",
                     "Pipelining splits the weights across racks but not the KV cache, is latency-neutral in inference "
                     "apart from the hops, and costs bubbles and constraints in training."),
    "ch4_overtraining": ("01:19 Because of RL, models may be 100× over-trained beyond Chinchilla",
                         "Equalizing pretraining, RL and inference cost puts pretraining tokens near lifetime inference "
                         "tokens — about 100× the Chinchilla 20·N."),
    "ch5_pricing": ("01:33 Deducing long-context memory costs from API pricing",
                    "Price tiers sit where the KV fetch overtakes compute, output costs more because decode is "
                    "memory-bound, and cache TTLs match the drain times of slower memory tiers."),
    "ch7_revnet": ("02:04 Convergent evolution between neural nets and cryptography",
                   "Feistel rounds make any layer invertible, so RevNets recompute activations instead of storing "
                   "them: compute spent to save memory, the opposite of the KV cache."),
}


def summary(claims) -> dict:
    """Counts by verdict; only "lecture" rows count towards agreement ("not discriminated" rows count as
    neither)."""
    lec = [c for c in claims if c.kind == "lecture"]
    real = [c for c in claims if c.kind == "real"]
    look = [c for c in claims if c.kind == "lookup"]
    judged = [c for c in lec if c.discriminated]
    return {"lecture_rows": len(lec), "agree": sum(c.agrees for c in judged),
            "differ": sum(not c.agrees for c in judged), "not_discriminated": len(lec) - len(judged),
            "real_rows": len(real), "real_within_tolerance": sum(c.agrees for c in real),
            "lookup": len(look), "lookup_matches": sum(c.agrees for c in look),
            "definition": sum(c.kind == "definition" for c in claims),
            "cited": sum(c.kind == "cited" for c in claims)}
