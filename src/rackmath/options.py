"""Option values shared by every interface — the CLI, the Python API and the web app — as library functions.

Strings a user typed become SI values here, and hardware is adjusted to them, so that ``rackmath.api`` and
``rackmath.web`` need nothing from ``rackmath.cli`` (which re-exports these names; docs/architecture.md, "Layers"):

* :func:`parse_range` (integer quantities stay integers: ``INTEGER_FIELDS``), :func:`parse_int`, :func:`parse_usd`;
* :func:`priced` (the hardware with its chip rented at ``--usd-per-gpu-hour``), :func:`power_capped` (compute peaks
  scaled by ``--power-cap``), :func:`parse_power`, :func:`parse_pue`, :func:`parse_usd_per_kwh`;
* energy of a result: :func:`energy_of` (J/token, tokens/kWh, electricity $/Mtok and share), :func:`energy_dict`,
  :func:`serve_energy`, :func:`training_energy`;
* the efficiency preset's label: :func:`mode_label`, :func:`mode_dict`, :func:`validated_error`
  (the ``--efficiency``/``--ideal`` rule itself is ``engine.efficiency.resolve``).

No typer, no printing; numpy and the analyses are imported where used.
"""

from __future__ import annotations

import math
import re

from .errors import InputError
from . import units
from .analyses.lecture.energy import capped_clock_fraction, capped_system, energy, run_energy
from .bounds import check_points
from .engine.efficiency import load_efficiency
from .specs.catalog import entries
from .specs.hardware import load_hardware, priced as at_price


def validated_error(eff) -> float | None:
    """The preset's validated error as a fraction (e.g. 0.15 for ±15%), from its catalog entry: a
    ``validated_error`` key, or the fit's 'mean |log error| X' (→ e^X − 1); None when not recorded."""
    if eff is None or getattr(eff, "name", "ideal") == "ideal":
        return None
    v = getattr(eff, "validated_error", None)
    if v is None:
        v = getattr(eff, "error_band", None)
    if v is not None:
        return float(v)
    try:
        for e in entries("efficiency"):
            if e.data.get("name") == eff.name and e.data.get("validated_error") is not None:
                return float(e.data["validated_error"])
    except Exception:  # noqa: BLE001 - a label must never fail the answer
        pass
    return None  # a fit's in-sample 'mean |log error|' is not a validated band (issue 35)


def fitted_on(eff) -> int | None:
    """How many records a `validate --refit` preset was fitted on (from its source line), or None."""
    src = getattr(eff, "source", "") or ""
    if not src.startswith("fitted by rackmath validate --refit") or "on records:" not in src:
        return None
    ids = src.split("on records:", 1)[1]
    more = re.search(r"\(\+(\d+)\)\s*$", ids)
    return len([x for x in re.sub(r"….*$", "", ids).split(",") if x.strip()]) + (int(more.group(1)) if more else 0)


def mode_label(eff) -> str:
    """'ideal roofline — a lower bound on time' or 'calibrated prediction, preset X (validated error ±Y%)'."""
    if eff is None or isinstance(eff, str):
        eff = load_efficiency(None if eff in (None, "ideal") else eff)
    if eff.name == "ideal":
        return "ideal roofline — a lower bound on time"
    err = validated_error(eff)
    if str(eff.name).startswith("measured-"):  # issue 34: the silicon as measured_efficiency took it, a version's times
        return eff.label()
    if getattr(eff, "cross_family", False):
        return (f"calibrated prediction, cross-family preset {eff.name} — no preset fitted on this chip's family "
                + (f"(validated error ±{err:.0%} across families)" if err is not None else "(not validated)"))
    n = fitted_on(eff) if err is None else None
    return (f"calibrated prediction, preset {eff.name} "
            + (f"(validated error ±{err:.0%})" if err is not None else
               f"(fitted on {n} record{'s' * (n != 1)}, in sample only: no validated error band)" if n else
               "(validation error not recorded)"))


def mode_dict(eff) -> dict:
    """The same, for JSON: {'prediction': 'ideal'|'calibrated', 'efficiency': name, 'label': …, 'validated_error'}."""
    if eff is None or isinstance(eff, str):
        eff = load_efficiency(None if eff in (None, "ideal") else eff)
    return {"prediction": "ideal" if eff.name == "ideal" else "calibrated", "efficiency": eff.name,
            "label": mode_label(eff), "validated_error": validated_error(eff)}


INTEGER_FIELDS = {"batch", "context", "pass_len", "chips", "gpus", "concurrency", "experts", "isl", "osl", "seq",
                  "micro_batch", "microbatches", "tp", "pp", "ep", "dp"}


#: Whole-number fields whose given values may still be means (ISL/OSL of a variable-length run: totals ÷ prompts).
MEAN_LENGTH_FIELDS = {"isl", "osl"}


def parse_range(text: str, field: str, kind: str = "count", integer: bool | None = None):
    """'1:16384:log' -> log-spaced values; '1:100:10' -> 10 linear points; '1,2,4' -> a list; '8' -> [8].

    Integer quantities (batch, context, chips, … or ``integer=True``) stay integers: a range's points are
    rounded and de-duplicated (in order)."""
    import numpy as np

    if integer is None:
        integer = field in INTEGER_FIELDS
    s = str(text).strip()
    try:
        if ":" in s:
            parts = s.split(":")
            if len(parts) not in (2, 3):
                raise ValueError
            lo = units.parse_quantity(parts[0], kind, field)
            hi = units.parse_quantity(parts[1], kind, field)
            spec = parts[2].strip() if len(parts) == 3 else "log"
            if len(spec) > 24:
                raise ValueError
            if spec.startswith("log"):
                n = int(spec[3:] or 0) or max(2, int(round(4 * math.log2(max(hi / max(lo, 1e-300), 2)))) + 1)
                check_points(n, field)
                if lo <= 0:
                    raise InputError(field, f"a log range cannot start at {lo:g}", "a range 'LO:HI:log' with LO > 0")
                vals = np.geomspace(lo, hi, n)
            else:
                vals = np.linspace(lo, hi, check_points(int(spec), field))
            if integer:
                vals = np.round(vals)
                _, first = np.unique(vals, return_index=True)
                vals = vals[np.sort(first)]
        else:
            items = [p for p in s.split(",") if p.strip()]
            check_points(len(items), field)
            vals = np.array([units.parse_quantity(p, kind, field) for p in items])
    except InputError:
        raise
    except (ValueError, ZeroDivisionError):
        raise InputError(field, f"cannot read range {text!r}",
                         "a value, a list '1,2,4', or a range 'LO:HI:log', 'LO:HI:logN' or 'LO:HI:N'") from None
    if vals.size == 0:
        raise InputError(field, "empty", "at least one value")
    if integer and field not in MEAN_LENGTH_FIELDS:
        frac = vals[np.isfinite(vals) & (vals != np.round(vals))]
        if frac.size:
            raise InputError(field, f"{frac[0]:g} is not a whole number", "whole numbers (e.g. 1,8,64 or 1:4096:log)")
    return vals.astype(float)


def parse_int(text, field: str, maximum: float = 1e7, minimum: int = 1) -> int | None:
    """A whole number ≥ ``minimum`` ('8', '1K', '8Ki'); None passes through."""
    if text is None:
        return None
    v = units.parse_count(text, field)
    if v != int(v) or v < minimum or v > maximum:
        raise InputError(field, f"{text!r} is not a whole number from {minimum} to {maximum:g}", "1, 2, 8, 72 …")
    return int(v)


def priced(hardware, usd_per_gpu_hour):
    """``hardware`` (a name or System) with its chip rented at ``--usd-per-gpu-hour`` (text or number); unchanged
    when None. Every analysis that prices chip time then uses the user's price."""
    return at_price(hardware, parse_usd(usd_per_gpu_hour) if isinstance(usd_per_gpu_hour, str) else usd_per_gpu_hour)


def parse_usd(text, field: str = "usd_per_gpu_hour") -> float | None:
    """``--usd-per-gpu-hour``: '2.5', '$2.5/h'; None passes through."""
    return None if text is None else units.parse_usd_per_hour(text, field)


def _number(text, field: str, accepted: str, units_: dict) -> float | None:
    if text is None:
        return None
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        v = float(text)
    else:
        m = re.match(r"^\s*\$?\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z/$ ]*?)\s*$", str(text))
        unit = m.group(2).replace(" ", "").lower() if m else None
        if not m or unit not in units_:
            raise InputError(field, f"cannot read {text!r}", accepted)
        v = float(m.group(1)) * units_[unit]
    if not math.isfinite(v):
        raise InputError(field, f"{text!r} is not a finite number", accepted)
    return v


def parse_power(text, field: str = "power_cap") -> float | None:
    """'500', '500 W', '0.5 kW' → watts; None passes through."""
    return _number(text, field, "a power such as 500, '500 W' or '0.5 kW'", {"": 1.0, "w": 1.0, "kw": 1e3})


def parse_usd_per_kwh(text, field: str = "usd_per_kwh") -> float | None:
    """'0.08', '$0.08/kWh', '80 $/MWh' → $ per kWh; None passes through."""
    return _number(text, field, "a price such as 0.08 or '$0.08/kWh'",
                   {"": 1.0, "/kwh": 1.0, "$/kwh": 1.0, "usd/kwh": 1.0, "/mwh": 1e-3, "$/mwh": 1e-3})


def parse_pue(text, field: str = "pue") -> float:
    v = _number(text, field, "a number from 1.0 to 3.0, e.g. 1.2", {"": 1.0})
    if v is None or not (1.0 <= v <= 3.0):
        raise InputError(field, f"{text!r} is not accepted", "a number from 1.0 to 3.0, e.g. 1.2")
    return v


def power_capped(hardware, power_cap):
    """``hardware`` (a name or System) with its chips power-capped at ``power_cap`` W (text or number): every
    compute peak × the clock fraction of analyses.lecture.energy's cube law, memory bandwidth unchanged. Unchanged when
    None. Done on the hardware, so roofline, the serving step model and training all see the capped peak."""
    cap = parse_power(power_cap)
    if cap is None:
        return hardware

    return capped_system(load_hardware(hardware), cap)


def energy_of(hardware, *, chips, step_s, tokens_per_step, usd_per_mtok=None, pue="1.2", usd_per_kwh="0.08",
              power_cap=None, load: str = "serving"):
    """J/token, tokens/kWh, electricity $/Mtok and its share of ``usd_per_mtok`` for ``chips`` chips of
    ``hardware`` emitting ``tokens_per_step`` tokens every ``step_s`` (analyses.lecture.energy.energy; inputs broadcast)."""
    hw = load_hardware(hardware)
    if hw.chip.tdp_w is None and power_cap is None:  # a user catalog without power figures: no energy, no error
        pue, usd_per_kwh = parse_pue(pue), parse_usd_per_kwh(usd_per_kwh)  # still checked
        return None
    return energy(hw.chip, chips=chips, step_s=step_s, tokens_per_step=tokens_per_step, usd_per_mtok=usd_per_mtok,
                  pue=parse_pue(pue), usd_per_kwh=parse_usd_per_kwh(usd_per_kwh), power_cap_w=parse_power(power_cap),
                  load=load)


def energy_dict(e, power_cap=None, hardware=None) -> dict | None:
    """The energy result for JSON, with the cap and the clock fraction it implies (None: no power figures)."""
    if e is None:
        return None
    d = e.as_dict()
    cap = parse_power(power_cap)
    d["power_cap_w"] = cap
    if cap is not None and hardware is not None:
        d["clock_fraction"] = float(capped_clock_fraction(cap, load_hardware(hardware).chip.tdp_w))
    return d


def serve_energy(r, hardware, *, pue="1.2", usd_per_kwh="0.08", power_cap=None):
    """Energy per output token of a serving result: every GPU of the deployment (both pools) at the serving draw
    for the output tokens it emits: E = P / (output tok/s per GPU) (analyses.lecture.energy; prefill rides on the output)."""
    d = r.as_dict()
    return energy_of(hardware, chips=1, step_s=1.0, tokens_per_step=d["output_tok_s_per_gpu"],
                     usd_per_mtok=d["usd_per_mtok_output"], pue=pue, usd_per_kwh=usd_per_kwh, power_cap=power_cap)


def training_energy(r, hw, *, pue="1.2", usd_per_kwh="0.08", power_cap=None) -> dict:
    """The run's energy (analyses.lecture.energy.run_energy: every GPU at TDP + host, × PUE, for the run's time), with the
    CLI's strings parsed; 'result' holds the EnergyResult (for --explain)."""
    if hw.chip.tdp_w is None and power_cap is None:  # a user catalog without power figures
        parse_pue(pue), parse_usd_per_kwh(usd_per_kwh)
        return {"result": None}
    e, tot = run_energy(hw.chip, chips=r.chips, time_s=r.time_s, tokens=r.tokens, usd=r.usd, pue=parse_pue(pue),
                        usd_per_kwh=parse_usd_per_kwh(usd_per_kwh), power_cap_w=parse_power(power_cap))
    return energy_dict(e, power_cap, hw) | tot | {"result": e}


__all__ = ["INTEGER_FIELDS", "MEAN_LENGTH_FIELDS", "parse_range", "parse_int", "parse_usd", "priced", "parse_power",
           "parse_usd_per_kwh", "parse_pue", "power_capped", "energy_of", "energy_dict", "serve_energy",
           "training_energy", "mode_label", "mode_dict", "validated_error"]
