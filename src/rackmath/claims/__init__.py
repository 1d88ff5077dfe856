"""The lecture's claims (R1…R43), reproduced.

Each chapter module in this package (``ch1_batching``, ``ch2_racks``, …) defines

* ``claims() -> list[Claim]``: rackmath's value for each claim it covers, with the
  inputs, the lecture's value and whether they agree;
* optionally ``plots(outdir: Path) -> list[Path]``: the chapter's blackboard figures.

Modules are discovered by name (``ch<N>_*``), so a chapter is added by adding a file.
Claim IDs are the stable IDs of ``../shared/lecture/claims.md``.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field

from ..explain import Derivation


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
            "inputs": {k: plain(v) for k, v in self.inputs.items()},
            "note": self.note,
            "chapter": self.chapter,
            "derivation": self.derivation.as_dict() if self.derivation else None,
        }


def agree(value: float, lecture, rel: float = 0.1) -> bool:
    """Agreement with the lecture: within ``rel`` of a number, or inside a (lo, hi) range."""
    if isinstance(lecture, (tuple, list)):
        lo, hi = lecture
        return lo <= value <= hi
    return abs(value - lecture) <= rel * abs(lecture)


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
    return sorted(out, key=lambda c: (int(c.id[1:].split("-")[0].split(".")[0]), c.id))
