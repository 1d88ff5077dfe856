"""rackmath: the math behind how LLMs are trained and served, as software.

    >>> import rackmath
    >>> r = rackmath.roofline("deepseek-v3", "gb200-nvl72", batch=[1, 64, 4096], context="8K")
    >>> r.step_s, r.bound, r.usd_per_mtok      # arrays, SI units
    >>> r.to_frame()                           # a pandas DataFrame (pandas optional)

The top-level functions are the CLI's commands with the same names, strings ("8K", "1:4096:log") and defaults
(batch 1, context 8192): roofline, serve, train, layout, price, max_context, validate, and — where installed —
plan, simulate, compare, measure. They are imported lazily (``import rackmath`` stays fast); ``dir(rackmath)``
lists them. Layers: specs (units, hardware, models, prices) -> engine (roofline, layout, comms) -> analyses (one
module per lecture chapter) -> interfaces (CLI, web).
"""

from __future__ import annotations

__version__ = "0.1.0"

# name -> (module, attribute). To expose a new function, add one line here; a name whose module is not in this
# checkout (yet) is left out of dir() and raises AttributeError when used.
_LAZY = {
    "roofline": ("rackmath.api", "roofline"),
    "serve": ("rackmath.api", "serve"),
    "train": ("rackmath.api", "train"),
    "layout": ("rackmath.api", "layout"),
    "price": ("rackmath.api", "price"),
    "max_context": ("rackmath.api", "max_context"),
    "validate": ("rackmath.analyses.fitting.validation", "validate"),
    "plan": ("rackmath.analyses.serving.plan", "plan"),
    "simulate": ("rackmath.analyses.serving.simulate", "simulate"),
    "compare": ("rackmath.analyses.serving.plan", "compare"),
    "measure": ("rackmath.measuring", "measure"),  # needs the optional extra rackmath[torch]
    "Workload": ("rackmath.analyses.serving.inputs", "Workload"),  # serve's typed inputs
    "Layout": ("rackmath.analyses.serving.inputs", "Layout"),
    "Stack": ("rackmath.analyses.serving.inputs", "Stack"),
    "load_stack": ("rackmath.analyses.serving.inputs", "load_stack"),
    "load_model": ("rackmath.specs.models", "load_model"),
    "load_hardware": ("rackmath.specs.hardware", "load_hardware"),
    "load_chip": ("rackmath.specs.hardware", "load_chip"),
    "load_efficiency": ("rackmath.engine.efficiency", "load_efficiency"),
    "add_catalog_dir": ("rackmath.specs.catalog", "add_catalog_dir"),
    "human": ("rackmath.units", "human"),
    "RackmathError": ("rackmath.errors", "RackmathError"),
    "InputError": ("rackmath.errors", "InputError"),
}


def _available(name: str) -> bool:
    import importlib.util

    mod = _LAZY[name][0]
    try:
        return importlib.util.find_spec(mod) is not None
    except ModuleNotFoundError:
        return False


def __getattr__(name):  # lazy: `import rackmath` stays fast
    if name in _LAZY:
        import importlib

        mod, attr = _LAZY[name]
        try:
            obj = getattr(importlib.import_module(mod), attr)
        except (ModuleNotFoundError, AttributeError):
            if _available(name) and hasattr(importlib.import_module(mod), attr):
                raise
            raise AttributeError(f"rackmath.{name} is not available in this version ({mod}.{attr} not found)") \
                from None
        if callable(obj) and not isinstance(obj, type):
            from .bounds import api  # bad inputs raise rackmath's errors; fractional batches refused

            obj = api(obj)
        globals()[name] = obj
        return obj
    raise AttributeError(f"module 'rackmath' has no attribute {name!r}")


def __dir__():
    return sorted((set(globals()) - {"annotations"}) | {n for n in _LAZY if _available(n)})


__all__ = sorted(_LAZY)
