"""The Python API: the CLI's commands as functions, with the CLI's vocabulary, strings and defaults.

    import rackmath
    r = rackmath.roofline("deepseek-v3", "gb200-nvl72", batch="1:4096:log8", context="8K")
    rackmath.serve("deepseek-v3", "gb200-nvl72", isl="1K", osl="1K", concurrency=256)
    rackmath.train("llama-3.1-70b", "hgx-h100", gpus=10_000, tokens="15T")
    rackmath.layout("deepseek-v3", "gb200-nvl72", gpus=72)
    rackmath.price("gemini-3.1-pro")
    rackmath.max_context("qwen3-235b-a22b", "hgx-h200", gpus=8)

Every numeric argument accepts what the CLI accepts: numbers, numpy arrays, lists, and strings such as "8K"
(8,000), "8Ki" (8,192), "1:4096:log8" (a range; the points of a whole-number quantity such as batch, gpus, tp or
context are rounded and de-duplicated, as in the CLI), "$2.5/h". A fractional batch, gpus, concurrency, tp, ep, pp,
dp, … (given as a number, an array or a string such as "2.5") raises ``InputError`` naming the field. Defaults are the
CLI's (batch 1, context 8192). ``gpus`` is the chip count everywhere (``chips`` is accepted too).
``efficiency``: None → the command's default (roofline/layout: the ideal bound; serve: "auto"), "auto" → for a
deployment of a stack version with fitted times (``framework="sglang"``, ``"vllm@0.13"``, …) the
measured silicon with that version's own times, else the chip's calibrated preset ("preset"), "measured", a preset
name, or ``ideal=True``. Results are SI (seconds, bytes,
dollars) unless a field's name says otherwise (``tpot_ms``); every result has ``as_dict()``, ``to_frame()`` and a
concise repr.
"""

from __future__ import annotations
from . import units
from .analyses.lecture import pricing as pr
from .analyses.lecture.context import max_context as _max_context
from .analyses.serving.serve import serve as _serve
from .analyses.training.model import Parallelism, search_training_layout, train as _train
from .bounds import _check_whole, WHOLE
from .engine.efficiency import efficiency_for
from .engine.roofline import roofline as _roofline
from .engine.search import search_layouts
from .errors import InputError
from .options import energy_of, parse_range, power_capped, priced, serve_energy, training_energy
from .specs.hardware import hardware_ratio, load_chip, load_hardware
from .specs.models import load_model
from .specs.prices import load_price_sheet

__all__ = ["roofline", "serve", "train", "layout", "price", "max_context"]


def _values(v, field: str, kind: str = "count"):
    """A number, array, list or CLI string ('8K', '1,8,64', '1:4096:log') -> float or numpy array.

    As in the CLI (``cli.common.parse_range``), a range of a whole-number quantity (batch, gpus, context, …:
    ``INTEGER_FIELDS``) is rounded and de-duplicated; a value spelled out ('2.5', '1.5,4') must be whole for
    the quantities the API requires whole (``bounds.WHOLE``), like a number passed directly."""
    import numpy as np

    if v is None:
        return None
    if isinstance(v, str):
        a = parse_range(v, field, kind)
        _whole(a, field)
        return float(a[0]) if a.size == 1 and ":" not in v and "," not in v else a
    if isinstance(v, (list, tuple)):
        parts = [_values(x, field, kind) for x in v]
        if any(isinstance(x, str) for x in v):  # strings may be lists or ranges: one flat array, in order
            return np.concatenate([np.atleast_1d(np.asarray(x, dtype=float)) for x in parts]) if parts else \
                np.array([], dtype=float)
        return np.array(parts, dtype=float)
    return v


def _whole(v, field: str) -> None:
    if field in WHOLE:
        _check_whole(v, field)


def _scalar(v, field: str, kind: str = "count"):
    if v is None or not isinstance(v, str):
        return v
    x = units.parse_quantity(v, kind, field)
    _whole(x, field)
    return x


def _count(v, field: str):
    """A whole number (a number or a string such as '8', '1K'): refused, not truncated, when fractional."""
    if v is None:
        return None
    x = _scalar(v, field)
    _check_whole(x, field)
    return int(x)


def _gpus(gpus, chips):
    if gpus is not None and chips is not None and gpus != chips:
        raise InputError("gpus", "both gpus and chips given", "one of them (chips is an alias)")
    return gpus if gpus is not None else chips


def _eff(hardware, efficiency, ideal, default):
    return efficiency_for(hardware, efficiency, ideal, default=default)


def _priced(hardware, usd_per_gpu_hour):
    return priced(hardware, _scalar(usd_per_gpu_hour, "usd_per_gpu_hour", "usd_per_hour"))


def _capped(hardware, power_cap):
    return power_capped(hardware, power_cap)


def roofline(model, hardware, *, gpus=None, chips=None, batch=1, context=8192, pass_len=1, weights_dtype=None,
             kv_dtype=None, efficiency=None, ideal=False, usd_per_gpu_hour=None, weight_read="hit", pue=1.2,
             usd_per_kwh=0.08, power_cap=None):
    """Roofline step time, throughput and cost (``rackmath roofline``). Inputs broadcast as numpy arrays; a
    string range such as ``batch="1:4096:log"`` becomes one. Default: the ideal roofline (a lower bound on time).
    ``weight_read``: "hit" (the experts the batch routes to) or "all" (every weight every step, the lecture).
    Its keywords are ``rackmath roofline``'s options one for one (a reason for more than twelve).
    Returns an ``engine.roofline.RooflineResult``; its ``energy`` attribute is an ``analyses.lecture.energy.EnergyResult``
    (J/token, tokens/kWh, electricity $/Mtok and share at ``pue`` and ``usd_per_kwh``). ``power_cap`` (W per GPU)
    scales the compute peaks by the clock the cap allows (docs/energy.md)."""
    r = _roofline(model, _capped(_priced(hardware, usd_per_gpu_hour), power_cap),
                  chips=_values(_gpus(gpus, chips), "gpus"),
                  batch=_values(batch, "batch"), context=_values(context, "context"),
                  pass_len=_values(pass_len, "pass_len"), weights_dtype=weights_dtype, kv_dtype=kv_dtype,
                  efficiency=_eff(hardware, efficiency, ideal, "ideal"), weight_read=weight_read)
    # energy on demand (r.energy): the inputs are checked now, on one scalar point; the arrays when first read
    energy_of(r.hardware, chips=1.0, step_s=1.0, tokens_per_step=1.0, usd_per_mtok=1.0, pue=pue,
              usd_per_kwh=usd_per_kwh, power_cap=power_cap)
    r.extras["energy_of"] = lambda res: energy_of(res.hardware, chips=res.chips, step_s=res.step_s,
                                                  tokens_per_step=res.tokens, usd_per_mtok=res.usd_per_mtok, pue=pue,
                                                  usd_per_kwh=usd_per_kwh, power_cap=power_cap)
    return r


def serve(model, hardware, workload=None, layout=None, stack=None, efficiency=None, *, chips=None, pue=1.2,
          usd_per_kwh=0.08, power_cap=None, **flat):
    """Steady-state serving (``rackmath serve``): tokens/s per GPU, TPOT, TTFT, $/Mtok. Default: the chip's
    calibrated preset. Typed: ``serve(model, hardware, rackmath.Workload(isl=1000, osl=1000, concurrency=64),
    rackmath.Layout(gpus=8, tp=8), "sglang@0.5.7")`` (``analyses.serving.serve.serve``); flat: ``isl=``, ``osl=``,
    ``concurrency=`` and the CLI's other flags as keywords (gpus, tp, ep, pp, attention_dp, mtp, framework,
    usd_per_gpu_hour, ideal, …), strings such as "1K" or "1:256:log" accepted — they only build those objects.
    The result's ``energy`` is an ``analyses.lecture.energy.EnergyResult`` per output token (every GPU of the
    deployment); ``power_cap`` (W per GPU) scales the compute peaks (docs/energy.md)."""
    if chips is not None or "gpus" in flat:
        flat["gpus"] = _count(_gpus(flat.get("gpus"), chips), "gpus")
    for k in ("tp", "ep", "pp", "mtp", "prefill_gpus", "decode_gpus", "redundant_experts"):
        if isinstance(flat.get(k), str):
            flat[k] = _count(flat[k], k)
    for k in ("isl", "osl"):
        if k in flat:
            flat[k] = _scalar(flat[k], k)
    if "concurrency" in flat:
        flat["concurrency"] = _values(flat["concurrency"], "concurrency")
    if "usd_per_gpu_hour" in flat:
        flat["usd_per_gpu_hour"] = _scalar(flat["usd_per_gpu_hour"], "usd_per_gpu_hour", "usd_per_hour")
    if workload is not None:  # sequences in flight are whole in the API, as the keyword is (bounds.WHOLE)
        _whole(workload.concurrency, "concurrency")
    r = _serve(model, _capped(hardware, power_cap), workload, layout, stack, efficiency, **flat)
    r.energy = serve_energy(r, hardware, pue=pue, usd_per_kwh=usd_per_kwh, power_cap=power_cap)
    return r


def train(model, hardware="hgx-h100", *, gpus=None, chips=None, tokens, seq_len=8192, tp=None, pp=None, dp=None,
          zero_stage=None, recompute=None, usd_per_gpu_hour=None, pue=1.2, usd_per_kwh=0.08, power_cap=None, **kw):
    """Training time, GPU-hours, cost, MFU and memory (``rackmath train``). Without tp/pp/dp/zero_stage/recompute
    the fastest layout that fits is searched; the result's ``parallelism`` says which. Other keywords as
    ``analyses.training.model.train`` (mfu_given, flops_per_chip, global_batch_tokens, eta_compute, …). The result's
    ``energy`` is a dict (energy_mwh, electricity_usd, j_per_token, tokens_per_kwh, elec_share: every GPU at TDP
    + host, × ``pue``); ``power_cap`` (W per GPU) scales the compute peaks (docs/energy.md). Its keywords are
    ``rackmath train``'s options one for one (a reason for more than twelve)."""
    m, hw = load_model(model), load_hardware(_capped(_priced(hardware, usd_per_gpu_hour), power_cap))
    n = _gpus(gpus, chips)
    n = _count(n, "gpus")
    given = {"tp": tp, "pp": pp, "dp": dp, "zero_stage": zero_stage, "recompute": recompute}
    given = {k: (_count(v, k) if isinstance(v, str) and k != "recompute" else v) for k, v in given.items()}
    if n is None:
        n = (given["dp"] or max(1, hw.scaleup_size // ((given["tp"] or 1) * (given["pp"] or 1)))) * \
            (given["tp"] or 1) * (given["pp"] or 1)
    tk = dict(tokens=_scalar(tokens, "tokens"), seq_len=_scalar(seq_len, "seq"), **kw)
    if all(v is not None for v in given.values()):
        par = Parallelism(dp=given["dp"], tp=given["tp"], pp=given["pp"], zero_stage=given["zero_stage"],
                          recompute=given["recompute"], microbatches=4 * given["pp"])
        r = _train(m, hw, chips=n, par=par, **tk)
    else:
        r, _, _ = search_training_layout(m, hw, chips=n, fixed={k: v for k, v in given.items() if v is not None}, **tk)

    en = training_energy(r, hw, pue=pue, usd_per_kwh=usd_per_kwh, power_cap=power_cap)
    r.energy = {k: v for k, v in en.items() if k != "result"} if en["result"] is not None else None
    return r


def layout(model, hardware, *, gpus=None, chips=None, context=8192, batch=None, efficiency=None, ideal=False,
           usd_per_gpu_hour=None, **kw):
    """Every valid layout on ``gpus`` chips and the Pareto frontier of $/Mtok vs tokens/s per user
    (``rackmath layout``). Default: the ideal roofline. Returns an ``engine.search.SearchResult``."""
    n = _gpus(gpus, chips)
    if n is None:
        raise InputError("gpus", "missing", "the GPU budget, e.g. gpus=72")
    mb = _values(batch, "batch")
    return search_layouts(model, _priced(hardware, usd_per_gpu_hour), _count(n, "gpus"),
                          context=_scalar(context, "context"), micro_batches=None if mb is None else mb,
                          efficiency=_eff(hardware, efficiency, ideal, "ideal"), **kw)


def price(sheet, *, n_active="100B", n_total=None, hardware=None, weights_dtype="fp8", context="8K",
          kv_dtype="fp8") -> dict:
    """Read a price sheet backwards (``rackmath price``): the long-context step → KV bytes per token (R35–R37)
    and the output/input ratio → decode (R38). Returns a dict (the same as ``rackmath price SHEET --json``)."""
    s = load_price_sheet(sheet)
    bpp = units.dtype_bytes(weights_dtype, "weights_dtype")
    if hardware:
        ratio = float(hardware_ratio(load_chip(hardware), weights_dtype))
    else:
        ratio = pr.LECTURE_RATIO
    nact = _scalar(n_active, "n_active")
    ntot = _scalar(n_total, "n_total") if n_total is not None else nact
    out = {"sheet": s.describe(), "assumptions": {"n_active": nact, "n_total": ntot, "ratio": ratio,
                                                  "bytes_per_param": bpp}}
    st = s.step("output") or s.step("input")
    kvb = None
    if st is not None:
        ded = pr.deduce_from_step(st[0], st[1], n_active=nact, ratio=ratio, bytes_per_param=bpp, kv_dtype=kv_dtype,
                                  source=s.name)
        out["step"] = ded.as_dict()
        kvb = ded.kv_bytes_per_token
    rd = pr.deduce_from_ratio(s.output / s.input, context=_scalar(context, "context"), n_total=ntot, n_active=nact,
                              kv_bytes_per_token=kvb or 1667.0, ratio=ratio, bytes_per_param=bpp, source=s.name)
    out["out_in"] = rd.as_dict()
    return out


def max_context(model, hardware, *, gpus=None, chips=None, concurrency=1, weights_dtype=None, kv_dtype=None,
                **layout_degrees):
    """The longest context ``concurrency`` sequences can hold in memory, next to the model's own limit (with a
    warning past it): the one answer ``racks memory``, ``context`` and ``serve`` use."""
    n = _gpus(gpus, chips)
    return _max_context(model, hardware, gpus=_count(n, "gpus"),
                        concurrency=_scalar(concurrency, "concurrency"), weights_dtype=weights_dtype,
                        kv_dtype=kv_dtype, **layout_degrees)
