"""What the pages share: catalog lookups (names only, never paths), the common inputs, and the library calls
more than one page makes."""

from __future__ import annotations

from .inputs import Input, select, slider

IDEAL = "ideal roofline — a lower bound on time"
GRID = 97  # points on the x axis of a sweep chart

# --------------------------------------------------------------------------- catalog lookups (names only, never paths)


def model(name):
    """A catalog model by name or alias. Paths are not names: requests never reach the file system."""
    from ..specs.models import models

    return models().get(name)


def hardware(name):
    from ..specs.hardware import load_hardware

    return load_hardware(name)


def model_names() -> list[str]:
    from ..specs.models import models

    return models().names()


def hardware_names() -> list[str]:
    from ..specs.hardware import chips, systems

    return systems().names() + chips().names()


def dtypes() -> list:
    from ..units import DTYPE_BYTES

    return [["", "as published"]] + [d for d in DTYPE_BYTES if d not in ("fp32", "tf32")]


def sheet_names() -> list[str]:
    from ..specs.prices import price_sheets

    return price_sheets().names()


def chip_names() -> set[str]:
    from ..specs.hardware import chips

    return set(chips().names())


def preset_names() -> list:
    from ..engine.efficiency import presets

    return [["", "ideal (lecture)"], ["auto", "auto: the chip's calibrated preset"]] + \
        [n for n in presets().names() if n != "ideal"]
def efficiency_header(eff) -> str:
    """The CLI's header: 'ideal roofline — a lower bound on time' or 'calibrated prediction, preset X (…)'."""
    from ..options import mode_label

    return mode_label(eff)


def supports(fn, name: str) -> bool:
    """Whether a library function takes keyword ``name`` (pages offer only what the library has)."""
    import inspect

    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def weight_read_inputs() -> list[Input]:
    from ..api import roofline as api_roofline
    from ..engine.roofline import roofline as engine_roofline

    if not (supports(api_roofline, "weight_read") or supports(engine_roofline, "weight_read")):
        return []
    return [select("weight_read", "weight reads", [["hit", "experts the batch routes to"],
                                                   ["all", "all N_total weights (the lecture)"]], "hit")]


def weight_read(p) -> dict:
    return {"weight_read": p["weight_read"]} if p.get("weight_read") else {}


def roofline(m, hw, *, gpus, usd_per_gpu_hour, efficiency, weight_read=None, **kw):
    """rackmath.roofline (the public API); the engine's when a weight-read mode is asked for that only it takes."""
    import rackmath

    from ..api import roofline as api_roofline

    if weight_read is None or supports(api_roofline, "weight_read"):
        extra = {} if weight_read is None else {"weight_read": weight_read}
        return rackmath.roofline(m, hw, gpus=gpus, usd_per_gpu_hour=usd_per_gpu_hour, efficiency=efficiency,
                                 **kw, **extra)
    from ..engine.efficiency import efficiency_for
    from ..options import priced
    from ..engine.roofline import roofline as engine_roofline

    return engine_roofline(m, priced(hw, usd_per_gpu_hour), chips=gpus, efficiency=efficiency_for(hw, efficiency,
                                                                                                  False),
                           weight_read=weight_read, **kw)


def wdt(p):
    return p.get("weights_dtype") or None


def kvdt(p):
    return p.get("kv_dtype") or None


# --------------------------------------------------------------------------- shared inputs


def common(model_default="deepseek-v3", hw_default="gb200-nvl72") -> list[Input]:
    return [select("model", "model", model_names(), model_default),
            select("hardware", "hardware", hardware_names(), hw_default)]


def dtype_inputs() -> list[Input]:
    return [select("weights_dtype", "weights dtype", dtypes(), ""), select("kv_dtype", "KV dtype", dtypes(), "")]


def gpus_input(label="GPUs", hi=4096) -> Input:
    return slider("gpus", label, 0, hi, 0, log=True, help="GPUs (chips) working together; 0 means one scale-up domain",
                  zero="one domain", unit="GPUs")


def price_input() -> Input:
    return slider("usd_per_gpu_hour", "$ per GPU-hour", 0, 20, 0, step=0.1, integer=False, unit="$/h",
                  zero="catalog price")


def price_of(p, chip) -> float:
    return float(p["usd_per_gpu_hour"]) if p.get("usd_per_gpu_hour") else float(chip.usd_per_hour)
