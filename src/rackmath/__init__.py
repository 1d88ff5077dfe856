"""rackmath: the math behind how LLMs are trained and served, as software.

    >>> import rackmath
    >>> r = rackmath.roofline("deepseek-v3", "gb200-nvl72", batch=[1, 64, 4096], context=8192)
    >>> r.step_s, r.bound

Layers: specs (units, hardware, models, prices) -> engine (roofline, layout,
comms) -> analyses (one module per lecture chapter) -> interfaces (CLI).
"""

from __future__ import annotations

__version__ = "0.1.0"

_LAZY = {
    "load_model": ("rackmath.specs.models", "load_model"),
    "load_hardware": ("rackmath.specs.hardware", "load_hardware"),
    "load_chip": ("rackmath.specs.hardware", "load_chip"),
    "roofline": ("rackmath.engine.roofline", "roofline"),
    "serve": ("rackmath.analyses.serving", "serve"),
    "measure": ("rackmath.measuring", "measure"),  # needs the optional extra rackmath[torch]
    "add_catalog_dir": ("rackmath.specs.catalog", "add_catalog_dir"),
    "RackmathError": ("rackmath.errors", "RackmathError"),
}

__all__ = sorted(_LAZY)


def __getattr__(name):  # lazy: `import rackmath` stays fast
    if name in _LAZY:
        import importlib

        mod, attr = _LAZY[name]
        return getattr(importlib.import_module(mod), attr)
    raise AttributeError(f"module 'rackmath' has no attribute {name!r}")
