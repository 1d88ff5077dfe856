"""Static figures (matplotlib, imported lazily, Agg backend). Interfaces layer: no math here.

Each module draws one chapter's blackboard curves from analysis results.
"""

from __future__ import annotations

from pathlib import Path


def pyplot():
    """matplotlib.pyplot on the non-interactive Agg backend (imported only when a plot is asked for)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, path) -> Path:
    """Write a figure (format from the suffix: .png or .svg) and close it. Never overwrites a non-figure file."""
    from ..errors import InputError

    p = Path(path)
    if p.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise InputError("output", f"unsupported figure format {p.suffix!r}", ".png, .svg or .pdf")
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p, dpi=120, bbox_inches="tight")
    pyplot().close(fig)
    return p
