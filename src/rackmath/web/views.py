"""The web pages: one per lecture chapter plus serve, plan and validate.

A page is a list of :class:`~rackmath.web.inputs.Input` and a view function that takes
the checked values and returns ``{"header", "numbers", "charts", "derivations", "notes"}``.
Views hold no math: they call the library (engine and analyses) and arrange what comes
back into Plotly figures (plain dicts) and the same :class:`~rackmath.explain.Derivation`
objects ``--explain`` prints.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..errors import InputError
from ..explain import fmt
from .inputs import Input, check, select, slider

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


def _sheet_names() -> list[str]:
    from ..specs.prices import price_sheets

    return price_sheets().names()


def _preset_names() -> list:
    from ..engine.efficiency import presets

    return [["", "ideal (lecture)"], ["auto", "auto: the chip's calibrated preset"]] + \
        [n for n in presets().names() if n != "ideal"]


# --------------------------------------------------------------------------- output helpers


def shown(value, unit: str = "") -> str:
    """A number for a person: units.human (three significant figures, SI prefixes with the unit: '46.6 GB',
    '7.49 ms', '6.83e24 FLOP'); a price keeps three significant figures ('$1.00/Mtok', not '$1/Mtok'), and a price
    per Mtok under $0.001 moves to a larger unit ('$1.23/Ttok', not '$0.000001225')."""
    from ..units import human

    try:
        v = float(value)
    except (TypeError, ValueError):
        return str(value)
    if unit.startswith("$") and np.isfinite(v) and v != 0:
        per = unit[1:]
        if per == "/Mtok":
            for scale, name in ((1.0, "/Mtok"), (1e3, "/Btok"), (1e6, "/Ttok")):
                if abs(v) * scale >= 1e-2 or name == "/Ttok":
                    v, per = v * scale, name
                    break
        if abs(v) < 1000:
            return ("−" if v < 0 else "") + "$" + f"{abs(v):#.3g}".rstrip(".") + per
        return human(v, "$") + per
    if np.isfinite(v) and v != int(v) and unit != "%":
        v = float(f"{v:.3g}")  # three significant figures (units.human keeps four for plain numbers)
    return human(v, unit)


def num(label, value, unit="", key=None):
    """One headline number: its raw value and how a person reads it (:func:`shown`)."""
    try:
        v = float(value)
        raw = v if np.isfinite(v) else str(v)
    except (TypeError, ValueError):
        raw = str(value)
    return {"key": key or label, "label": label, "value": raw, "shown": shown(value, unit) if isinstance(raw, float)
            else str(value), "unit": unit}


SI_AXIS_UNITS = {"s", "B", "B/s", "FLOP", "FLOP/s", "W"}


def axis(title: str, unit: str = "", log: bool = True, values=()) -> dict:
    """A Plotly axis as people read it. A log axis gets its ticks written here in units.human's units (100 GB,
    5 ms, $0.2, 15T: never Plotly's '100B' for bytes, nor its bare '5, 2' between decades); a linear one SI
    prefixes with the unit, '$', or counts as the CLI writes them (8k, 1M, 15B)."""
    a = {"title": {"text": title}, "type": "log" if log else "linear"}
    if log:
        a.update(_log_ticks(values, unit))
    elif unit.startswith("$"):
        a.update(tickprefix="$", separatethousands=True)
    elif unit in SI_AXIS_UNITS:
        a.update(exponentformat="SI", ticksuffix=" " + unit)
    else:
        a.update(exponentformat="B")
    return a


def _log_ticks(values, unit: str) -> dict:
    """Tick values and their text for a log axis over ``values``: every decade when the data spans more than four
    (every few on a very wide axis), 1-2-5 over two to four, 1…9 within about a decade; one decade beyond each end
    (Plotly draws the ticks in view)."""
    from ..units import human

    v = np.asarray([x for x in values if isinstance(x, (int, float)) and np.isfinite(x) and x > 0], float)
    if v.size == 0:
        return {}
    lo, hi = int(np.floor(np.log10(v.min()))) - 1, int(np.ceil(np.log10(v.max()))) + 1
    span = float(np.log10(v.max() / v.min()))
    every = max(1, int(np.ceil(span / 8)))
    mult = (1,) if span > 4 else (1, 2, 5) if span > 1.3 else tuple(range(1, 10))
    ticks = [m * 10.0 ** k for k in range(lo, hi + 1) if (k - lo) % every == 0 for m in mult]
    u = "$" if unit.startswith("$") else unit if unit in SI_AXIS_UNITS else ""
    return {"tickmode": "array", "tickvals": ticks, "ticktext": [human(t, u) for t in ticks]}


def _values(traces, key):
    return [x for t in traces for x in (t.get(key) or []) if isinstance(x, (int, float))]


def derivation(d) -> dict:
    """A Derivation as a dict for the panel, each step with its value formatted like ``--explain``."""
    out = d.as_dict()
    for s, step in zip(out["steps"], d.steps):
        s["shown"] = fmt(step.value, step.unit)
    out["text"] = d.render()
    return out


def _list(a):
    a = np.asarray(a, dtype=float).ravel()
    return [None if not np.isfinite(x) else float(x) for x in a]


def line(x, y, name, **kw) -> dict:
    return {"type": "scatter", "mode": "lines", "x": _list(x), "y": _list(y), "name": name, **kw}


def marker(x, y, name="this view", **kw) -> dict:
    return {"type": "scatter", "mode": "markers", "x": _list(np.atleast_1d(x)), "y": _list(np.atleast_1d(y)),
            "name": name, "marker": {"size": 11, "symbol": "circle-open", "line": {"width": 2.5}, "color": "#d62728"},
            **kw}


def chart(cid, title, traces, xtitle, ytitle, xlog=True, ylog=True, xunit="", yunit="", **layout) -> dict:
    lay = {"title": {"text": title}, "xaxis": axis(xtitle, xunit, xlog, _values(traces, "x")),
           "yaxis": axis(ytitle, yunit, ylog, _values(traces, "y")),
           "margin": {"l": 70, "r": 20, "t": 50, "b": 55}, "legend": {"orientation": "h", "y": -0.25},
           "hovermode": "closest"}
    lay.update(layout)
    return {"id": cid, "data": traces, "layout": lay, "units": {"x": xunit, "y": yunit}}


def bars(cid, title, x, series, ytitle, yunit="", ylog=False, **layout) -> dict:
    """A bar chart: ``series`` is [(name, values, extra trace keys), …] over the categories ``x``."""
    data = [{"type": "bar", "x": list(x), "y": _list(y), "name": name, **extra} for name, y, extra in series]
    lay = {"title": {"text": title}, "yaxis": axis(ytitle, yunit, ylog, _values(data, "y")),
           "margin": {"l": 70, "r": 20, "t": 50, "b": 50}}
    lay.update(layout)
    return {"id": cid, "data": data, "layout": lay, "units": {"x": "", "y": yunit}}


def summary(c: dict) -> str:
    """A chart in words, for a screen reader and for anyone who cannot see it: the title, then each trace's first
    and last point (each bar's value), the marked point ('this view') included, in the axis units."""
    ux, uy = c.get("units", {}).get("x", ""), c.get("units", {}).get("y", "")
    parts = []
    for t in c["data"]:
        xs, ys = t.get("x") or [], t.get("y") or []
        pts = [(x, y) for x, y in zip(xs, ys) if x is not None and y is not None]
        if not pts:
            continue
        if t.get("type") == "bar":
            parts.append(f"{t.get('name', '')}: " + ", ".join(f"{x} {shown(y, uy)}" for x, y in pts))
        elif len(pts) == 1:
            parts.append(f"{t.get('name', 'point')}: {shown(pts[0][1], uy)} at {shown(pts[0][0], ux)}")
        else:
            (x0, y0), (x1, y1) = pts[0], pts[-1]
            parts.append(f"{t.get('name', '')}: from {shown(y0, uy)} at {shown(x0, ux)} to {shown(y1, uy)} at "
                         f"{shown(x1, ux)}")
    lay = c["layout"]
    axes = "; ".join(f"{k[0]}: {lay[k]['title']['text']}" + (" (log scale)" if lay[k].get("type") == "log" else "")
                     for k in ("xaxis", "yaxis") if lay.get(k, {}).get("title"))
    return f"{lay.get('title', {}).get('text', c['id'])}. " + (f"{axes}. " if axes else "") + "; ".join(parts) + "."


def _efficiency_header(eff) -> str:
    """The CLI's header: 'ideal roofline — a lower bound on time' or 'calibrated prediction, preset X (…)'."""
    from ..options import mode_label

    return mode_label(eff)


def _supports(fn, name: str) -> bool:
    """Whether a library function takes keyword ``name`` (pages offer only what the library has)."""
    import inspect

    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _weight_read_inputs() -> list[Input]:
    from ..api import roofline as api_roofline
    from ..engine.roofline import roofline as engine_roofline

    if not (_supports(api_roofline, "weight_read") or _supports(engine_roofline, "weight_read")):
        return []
    return [select("weight_read", "weight reads", [["hit", "experts the batch routes to"],
                                                   ["all", "all N_total weights (the lecture)"]], "hit")]


def _weight_read(p) -> dict:
    return {"weight_read": p["weight_read"]} if p.get("weight_read") else {}


def _roofline(m, hw, *, gpus, usd_per_gpu_hour, efficiency, weight_read=None, **kw):
    """rackmath.roofline (the public API); the engine's when a weight-read mode is asked for that only it takes."""
    import rackmath

    from ..api import roofline as api_roofline

    if weight_read is None or _supports(api_roofline, "weight_read"):
        extra = {} if weight_read is None else {"weight_read": weight_read}
        return rackmath.roofline(m, hw, gpus=gpus, usd_per_gpu_hour=usd_per_gpu_hour, efficiency=efficiency,
                                 **kw, **extra)
    from ..engine.efficiency import efficiency_for
    from ..options import priced
    from ..engine.roofline import roofline as engine_roofline

    return engine_roofline(m, priced(hw, usd_per_gpu_hour), chips=gpus, efficiency=efficiency_for(hw, efficiency,
                                                                                                  False),
                           weight_read=weight_read, **kw)


def _wdt(p):
    return p.get("weights_dtype") or None


def _kvdt(p):
    return p.get("kv_dtype") or None


# --------------------------------------------------------------------------- shared inputs


def _common(model_default="deepseek-v3", hw_default="gb200-nvl72") -> list[Input]:
    return [select("model", "model", model_names(), model_default),
            select("hardware", "hardware", hardware_names(), hw_default)]


def _dtype_inputs() -> list[Input]:
    return [select("weights_dtype", "weights dtype", dtypes(), ""), select("kv_dtype", "KV dtype", dtypes(), "")]


def _gpus_input(label="GPUs", hi=4096) -> Input:
    return slider("gpus", label, 0, hi, 0, log=True, help="GPUs (chips) working together; 0 means one scale-up domain",
                  zero="one domain", unit="GPUs")


def _price_input() -> Input:
    return slider("usd_per_gpu_hour", "$ per GPU-hour", 0, 20, 0, step=0.1, integer=False, unit="$/h",
                  zero="catalog price")


def _price_of(p, chip) -> float:
    return float(p["usd_per_gpu_hour"]) if p.get("usd_per_gpu_hour") else float(chip.usd_per_hour)


# --------------------------------------------------------------------------- chapter 1: batch size and cost


def batch_inputs():
    return _common() + [
        slider("batch", "batch (sequences)", 1, 65536, 64, log=True, unit="sequences"),
        slider("context", "context (tokens)", 128, 1048576, 8192, log=True, unit="tokens"),
        _gpus_input(), *_dtype_inputs(), *_weight_read_inputs(),
        select("efficiency", "efficiency", _preset_names(), ""), _price_input()]


@lru_cache(maxsize=512)
def _balance_batch(model_name, hw_name, context, chips, wdt, kvdt, eff, weight_read=None) -> float:
    """B* does not depend on the batch slider: solved once per (model, hardware, context, …), then cached."""
    from ..analyses.lecture.batching import balance_batch_for

    extra = {"weight_read": weight_read} if weight_read and _supports(balance_batch_for, "weight_read") else {}
    return float(np.asarray(balance_batch_for(model(model_name), hardware(hw_name), context=context, chips=chips,
                                              weights_dtype=wdt, kv_dtype=kvdt,
                                              efficiency=None if eff == "ideal" else eff, **extra)).ravel()[0])


def batch_view(p):
    m, hw = model(p["model"]), hardware(p["hardware"])
    gpus = p["gpus"] or None
    grid = np.unique(np.concatenate([np.geomspace(1, 65536, GRID).round(), [p["batch"]]]))  # whole sequences
    r = _roofline(m, hw, gpus=gpus, batch=grid, context=p["context"], weights_dtype=_wdt(p), kv_dtype=_kvdt(p),
                  efficiency=p["efficiency"] or None, usd_per_gpu_hour=p["usd_per_gpu_hour"] or None,
                  **_weight_read(p))
    i = int(np.searchsorted(grid, p["batch"]))
    pt = r.at(i)
    bstar = _balance_batch(m.name, hw.name, p["context"], gpus, _wdt(p), _kvdt(p), r.efficiency.name,
                           p.get("weight_read"))
    B = p["batch"]
    numbers = [num("step time", pt["step_s"], "s", "step_s"), num("binding term", pt["bound"], key="bound"),
               num("$ per million output tokens", pt["usd_per_mtok"], "$/Mtok", "usd_per_mtok"),
               num("tokens/s per chip", pt["tokens_per_s_per_chip"], "tok/s", "tok_s_chip"),
               num("tokens/s per sequence", pt["tokens_per_s_per_seq"], "tok/s", "tok_s_seq"),
               num("MFU", pt["mfu"], "%", "mfu"),
               num("memory per chip", pt["memory_bytes_per_chip"], "B", "mem"),
               num("fits in HBM", "yes" if pt["fits"] else "NO", key="fits"),
               num("balance batch B* (compute = memory)", bstar if np.isfinite(bstar) else
                   "∞ (KV fetch outruns compute)", "", "bstar")]
    t1 = chart("time", f"Step time vs batch: {m.name}, {int(np.asarray(r.chips).ravel()[0])} × {hw.chip.name}",
               [line(grid, r.t_compute_s, "compute"), line(grid, r.t_weights_s, "weight fetch"),
                line(grid, r.t_kv_s, "KV fetch"), line(grid, r.step_s, "step = max(compute, memory)",
                                                       line={"width": 3, "color": "black"}),
                marker(B, pt["step_s"])], "batch (sequences)", "time per step", yunit="s")
    t2 = chart("cost", "Cost per token vs batch (00:10: rent × time ÷ batch)",
               [line(grid, r.usd_per_mtok, "$ / Mtok"), marker(B, pt["usd_per_mtok"])],
               "batch (sequences)", "$ per million output tokens", yunit="$/Mtok")
    return {"header": _efficiency_header(r.efficiency), "numbers": numbers, "charts": [t1, t2],
            "derivations": [derivation(r.explain(i))], "notes": []}


# --------------------------------------------------------------------------- chapter 2: racks and MoE


def racks_inputs():
    return _common() + [slider("batch", "tokens per step", 1, 65536, 32, log=True, unit="tokens"),
                        select("weights_dtype", "weights dtype", dtypes(), ""),
                        slider("tokens_per_chip", "tokens per chip per MoE layer (all-to-all)", 1, 4096, 32, log=True,
                               unit="tokens")]


def racks_view(p):
    from ..analyses.lecture import racks as ra
    from ..engine.roofline import expected_experts_hit, weights_read_bytes
    from ..specs.hardware import systems

    m, hw = model(p["model"]), hardware(p["hardware"])
    grid = np.unique(np.concatenate([np.geomspace(1, 65536, GRID).round(), [p["batch"]]]))  # whole sequences
    wdt = _wdt(p)
    w_read = weights_read_bytes(m, grid, wdt)
    w_all = float(m.weight_bytes(wdt))
    traces = [line(grid, np.asarray(w_read) / w_all, "weights read per step ÷ all weights"),
              marker(p["batch"], float(np.asarray(weights_read_bytes(m, p["batch"], wdt))) / w_all)]
    numbers = [num("weights (all)", w_all, "B", "w_all"),
               num("weights read this step", float(np.asarray(weights_read_bytes(m, p["batch"], wdt))), "B", "w_read")]
    if m.n_experts:
        hit = expected_experts_hit(m.n_experts, m.experts_per_token, grid)
        traces.insert(1, line(grid, np.asarray(hit) / m.n_experts, "distinct experts hit ÷ experts (E_hit/E)",
                              line={"dash": "dot"}))
        numbers.append(num("distinct experts hit per layer",
                           float(expected_experts_hit(m.n_experts, m.experts_per_token, p["batch"])), "", "e_hit"))
    c1 = chart("experts", f"Weights a step reads vs tokens — {m.name} ({m.n_experts or 'dense'} experts)", traces,
               "tokens per step", "fraction", ylog=False)
    syss = systems().values()
    bpp = float(w_all / m.total_params)
    g = ra.latency_floor_grid([m.total_params], syss, bpp)
    names = g["systems"]
    c2 = bars("floor", f"Weight-load latency floor W / (S · HBM BW) for {m.name} (01:15)", names,
              [("latency floor", np.asarray(g["t_floor_s"])[:, 0],
                {"marker": {"color": ["#d62728" if n == hw.name else "#1f77b4" for n in names]}})],
              "time per step (one domain)", "s", ylog=True, margin={"l": 70, "r": 20, "t": 50, "b": 110})
    k = int(m.experts_per_token or 8)
    mem = ra.scaleup_memory_analysis(hw, params=float(m.total_params), bytes_per_param=bpp)
    ders, notes = [derivation(mem)], []
    if int(hw.scaleup_size) > 1:
        two = ra.two_rack_analysis(hw, tokens_per_chip=float(p["tokens_per_chip"]), k=k, d_model=int(m.d_model))
        numbers.append(num("two-rack all-to-all slowdown", two.steps[-1].value, "x", "slowdown"))
        ders.insert(0, derivation(two))
    else:
        notes.append(f"{hw.name} is one chip per scale-up domain: no in-rack all-to-all to compare a second rack with")
    numbers += [num("latency floor on one domain", mem.steps[-1].value, "s", "floor"),
                num("fits one domain", "yes" if mem.steps[3].value else "NO", key="fits")]
    return {"header": IDEAL, "numbers": numbers, "charts": [c1, c2], "derivations": ders, "notes": notes}


# --------------------------------------------------------------------------- chapter 3: pipelining and memory


def pipeline_inputs():
    return _common() + [
        slider("stages", "pipeline stages P", 1, 64, 4, unit="stages"),
        slider("micro_batch", "sequences per micro-batch b", 1, 65536, 256, log=True, unit="sequences"),
        slider("context", "context (tokens)", 128, 1048576, 8192, log=True, unit="tokens"),
        slider("t_step_ms", "decode step without pipelining (ms)", 1, 1000, 20, unit="ms"),
        slider("microbatches", "training micro-batches M", 1, 1024, 16, log=True, unit="micro-batches"),
        select("schedule", "training schedule", ["1f1b", "gpipe", "interleaved"], "1f1b"),
        slider("chunks", "chunks per stage v (interleaved)", 1, 16, 2, unit="chunks")]


def pipeline_view(p):
    from ..analyses.lecture import pipeline as pl

    m, hw = model(p["model"]), hardware(p["hardware"])
    ep = int(hw.scaleup_size)
    kv_seq = float(np.asarray(m.kv_cache_bytes(p["context"])))
    w = float(m.weight_bytes())
    hop = float(hw.hop_latency_s)
    t_step = p["t_step_ms"] / 1e3
    cond = pl.pipeline_condition_analysis(hw, int(m.experts_per_token or 1), 1, int(m.n_moe_layers or m.n_layers))
    inf = pl.inference_pipelining_analysis(t_step=t_step, stages=p["stages"], hop_latency=hop, weight_bytes=w,
                                           kv_bytes_per_seq=kv_seq, micro_batch=p["micro_batch"], ep=ep)
    chunks = p["chunks"] if p["schedule"] == "interleaved" else 1
    trn = pl.training_pipeline_analysis(stages=p["stages"], microbatches=p["microbatches"], chunks=chunks,
                                        schedule=p["schedule"])
    P = np.arange(1, 65)
    wchip = pl.weight_bytes_per_chip(w, ep, P)
    kvchip = pl.kv_bytes_per_chip(p["micro_batch"], kv_seq, ep, P)
    by_p = float(np.asarray(pl.weight_bytes_per_chip(w, ep, p["stages"]))) + float(
        np.asarray(pl.kv_bytes_per_chip(p["micro_batch"], kv_seq, ep, p["stages"])))
    c1 = chart("memory", f"Memory per chip vs stages — {m.name}, EP {ep} per stage (00:47)",
               [line(P, wchip, "weights / chip"), line(P, np.broadcast_to(kvchip, P.shape), "KV / chip"),
                line(P, np.asarray(wchip) + kvchip, "total", line={"width": 3, "color": "black"}),
                line(P, np.full(P.shape, hw.chip.hbm_bytes), "HBM per chip", line={"dash": "dash"}),
                marker(p["stages"], by_p)],
               "pipeline stages P", "bytes per chip", xlog=False, yunit="B")
    M = np.unique(np.geomspace(1, 1024, 60).round())
    c2 = chart("bubble", f"Training bubble (P − 1)/(v·M + P − 1), P = {p['stages']}",
               [line(M, pl.bubble_fraction(p["stages"], M, 1), "GPipe / 1F1B"),
                line(M, pl.bubble_fraction(p["stages"], M, p["chunks"]), f"interleaved, v = {p['chunks']}"),
                marker(p["microbatches"], float(pl.bubble_fraction(p["stages"], p["microbatches"], chunks)))],
               "micro-batches M", "bubble fraction", ylog=False)
    by = {s.symbol: s for s in inf.steps + trn.steps + cond.steps}
    numbers = [num("token latency t_step + P·t_hop", by["t_token"].value, "s", "t_token"),
               num("weights per chip", by["w/chip"].value, "B", "w_chip"),
               num("KV per chip", by["kv/chip"].value, "B", "kv_chip"),
               num("global batch P·b", by["B"].value, "", "global_batch"),
               num("training bubble", by["bubble"].value, "%", "bubble"),
               num("fewest MoE layers per stage", by["layers/stage_min"].value, "", "layers_min")]
    return {"header": IDEAL, "numbers": numbers, "charts": [c1, c2],
            "derivations": [derivation(cond), derivation(inf), derivation(trn)], "notes": []}


# --------------------------------------------------------------------------- chapter 4: training economics


def training_inputs():
    return _common("llama-3.1-70b", "hgx-h100") + [
        slider("tokens", "training tokens D", 1e9, 1e14, 15e12, log=True, unit="tokens"),
        slider("gpus", "GPUs", 8, 131072, 2048, log=True, unit="GPUs"),
        slider("mfu", "MFU", 0.05, 0.9, 0.4, step=0.01, integer=False, unit="%"),
        _price_input(),
        slider("traffic", "fleet traffic (tokens/s)", 1e6, 1e10, 500e6, log=True, unit="tok/s"),
        slider("lifetime_days", "model lifetime (days)", 1, 1000, 61, unit="days"),
        slider("models", "models sharing the traffic", 1, 100, 10, unit="models")]


def train_searched(m, hw, *, chips, tokens, mfu, usd_per_hour=None):
    """`rackmath train MODEL -H HW --gpus N --tokens D --mfu F`: the command's own layout search
    (analyses.training.model.search_training_layout, with the command's defaults), so the page and the command agree."""
    from ..analyses.training.model import search_training_layout

    return search_training_layout(m, hw, chips=int(chips), tokens=float(tokens), mfu_given=mfu,
                                  usd_per_hour=usd_per_hour,
                                  fixed={"ep": 1, "schedule": "1f1b", "v": 1, "optimizer": "adam-mixed",
                                         "sequence_parallel": True})


def _layout_label(par) -> str:
    return (f"DP {par.dp} · TP {par.tp} · PP {par.pp}; ZeRO-{par.zero_stage}; recompute {par.recompute}")


def training_view(p):
    from ..analyses.lecture.lifetime import overtrain
    from ..analyses.training.model import train

    m, hw = model(p["model"]), hardware(p["hardware"])
    price = _price_of(p, hw.chip)
    r, par, searched = train_searched(m, hw, chips=p["gpus"], tokens=p["tokens"], mfu=p["mfu"], usd_per_hour=price)
    D = np.geomspace(1e9, 1e14, 16)
    runs = [train(m, hw, chips=int(p["gpus"]), tokens=float(x), mfu_given=p["mfu"], par=par, usd_per_hour=price)
            for x in D]  # 16 scalar calls at the searched layout (it does not depend on D): one configuration each
    c1 = chart("train", f"Training {m.name} on {int(p['gpus'])} × {hw.chip.name} at MFU {p['mfu']:.0%}",
               [{**line(D, [x.time_s / 86400 for x in runs], "days"),
                 "text": [f"{shown(x.time_s, 's')}, {shown(x.usd, '$')}, {shown(x.chip_hours)} GPU-hours"
                          for x in runs], "hovertemplate": "%{x:.3s} tokens: %{text}<extra></extra>"},
                marker(p["tokens"], r.time_s / 86400, text=[shown(r.usd, "$")])], "training tokens D", "days",
               xunit="tokens", yunit="days")
    o = overtrain(rate=p["traffic"], lifetime_s=p["lifetime_days"] * 86400, n_models=p["models"],
                  active=float(m.active_params))
    c2 = bars("split", f"Lifetime compute split for {shown(m.active_params)} active (01:18)",
              ["pretraining", "RL", "inference"],
              [("FLOP-equivalents", [o.costs["pretrain"], o.costs["rl"], o.costs["inference"]], {})],
              "pretraining-FLOP equivalents")
    mem = r.memory
    fit = "" if mem["fits"] else " — DOES NOT FIT: no layout fits; more GPUs"
    numbers = [num("training FLOPs", r.flops_total, "FLOP", "flops"), num("time", r.time_s, "s", "time"),
               num("GPU-hours", r.chip_hours, "", "chip_hours"), num("cost", r.usd, "$", "usd"),
               num("memory per GPU", mem["total_bytes"], "B", "mem"),
               num("layout (searched, as `rackmath train`)", _layout_label(par), key="layout"),
               num("fits in HBM", "yes" if mem["fits"] else "NO", key="fits"),
               num("pretraining tokens (lifetime split)", o.D_pre, "tokens", "d_pre"),
               num("over-training vs Chinchilla", o.overtrain, "x", "overtrain"),
               num("cost-optimal N at the same loss", o.optimum["N_opt"], "params", "n_opt")]
    notes = [f"layout: the fastest of {searched['evaluated']} layouts ({searched['fit']} fit in "
             f"{shown(mem['hbm_bytes'], 'B')}) — `rackmath train {m.name} -H {hw.name} --gpus {int(p['gpus'])} "
             f"--tokens {shown(p['tokens'])} --mfu {p['mfu']:g}` searches the same{fit}"]
    return {"header": "measured-efficiency mode: time = 6·N·D (+ attention) / (GPUs · peak · MFU)",
            "numbers": numbers, "charts": [c1, c2], "derivations": [derivation(r.derivation), derivation(o.derivation)],
            "notes": notes}


# --------------------------------------------------------------------------- chapter 5: prices read backwards, tiers


def pricing_inputs():
    return [select("sheet", "price sheet", _sheet_names(), "gemini-3.1-pro"),
            select("hardware", "chip", [c for c in hardware_names() if c in _chip_names()], "h100"),
            slider("n_active", "active parameters", 1e9, 1e13, 100e9, log=True, unit="params"),
            slider("kv_bytes", "KV bytes per token", 0, 200000, 0, step=100, zero="from the price step", unit="B"),
            slider("hold_s", "hold time", 1, 1e6, 300, log=True, unit="s")]


def _chip_names():
    from ..specs.hardware import chips

    return set(chips().names())


def pricing_view(p):
    from ..analyses.lecture import memory_tiers as mt
    from ..analyses.lecture import pricing as pr
    from ..errors import RackmathError
    from ..specs.hardware import hardware_ratio, load_chip
    from ..specs.prices import load_price_sheet

    s, c = load_price_sheet(p["sheet"]), load_chip(p["hardware"])
    ders, numbers, notes = [], [], []
    st = s.step("output") or s.step("input")
    b = float(p["kv_bytes"]) or None
    if st is not None:
        ded = pr.deduce_from_step(st[0], st[1], n_active=p["n_active"], ratio=float(hardware_ratio(c, "fp8")),
                                  bytes_per_param=1.0, source=s.name)
        ders.append(derivation(ded.derivation))
        numbers += [num("tier boundary", st[0], "tokens", "boundary"), num("price step", st[1], "x", "step"),
                    num("crossover L*", ded.crossover, "tokens", "crossover"),
                    num("KV bytes per token (deduced)", ded.kv_bytes_per_token, "B", "kv_bytes")]
        b = b or float(ded.kv_bytes_per_token)
    else:
        notes.append(f"{s.name} has no long-context price step; KV bytes per token default to the lecture's 1,667 B")
    b = b or 1667.0
    tiers = mt.tiers_for(c)
    remat = float(mt.remat_cost(p["n_active"], c.peak_flops("fp8"), c.usd_per_hour))
    t = np.geomspace(1, 1e6, GRID)
    names, costs = mt.tier_costs(b, t, tiers, remat)
    traces = [line(t, costs[j] * 1e6, n) for j, n in enumerate(names)]
    best, best_cost = mt.cheapest(b, np.asarray([p["hold_s"]]), tiers, remat)
    traces.append(marker(p["hold_s"], float(best_cost[0]) * 1e6, f"cheapest: {best[0]}"))
    c1 = chart("tiers", f"Holding a token's KV ({fmt(b, 'B')}/token) on {c.name}: hold + retrieve (01:47)", traces,
               "hold time", "$ per million tokens", xunit="s", yunit="$/Mtok")
    numbers += [num("cheapest place at this hold time", str(best[0]), key="cheapest"),
                num("its cost", float(best_cost[0]) * 1e6, "$/Mtok", "cheapest_cost"),
                num("recompute cost", remat * 1e6, "$/Mtok", "remat")]
    try:
        ders.append(derivation(mt.deduce_cache(s, tiers, bytes_per_token=b).derivation))
    except RackmathError as e:  # a sheet without cache prices has nothing to deduce
        notes.append(str(e))
    return {"header": IDEAL, "numbers": numbers, "charts": [c1], "derivations": ders, "notes": notes}


# --------------------------------------------------------------------------- chapter 6: the context wall


def context_inputs():
    return _common("deepseek-v3", "gb200-nvl72") + [
        slider("batch", "batch (sequences)", 1, 65536, 8192, log=True, unit="sequences"),
        slider("context", "context (tokens)", 128, 16777216, 8192, log=True, unit="tokens"),
        _gpus_input(), select("kv_dtype", "KV dtype", dtypes(), ""), _price_input()]


def context_view(p):
    import rackmath

    from ..analyses.lecture import context as cx
    from ..specs.hardware import hardware_ratio

    m, hw = model(p["model"]), hardware(p["hardware"])
    chips = p["gpus"] or None
    n = chips or int(hw.scaleup_size)
    grid = np.unique(np.concatenate([np.geomspace(128, 16777216, GRID), [p["context"]]]))
    r = rackmath.roofline(m, hw, gpus=chips, batch=p["batch"], context=grid, kv_dtype=_kvdt(p),
                          usd_per_gpu_hour=p["usd_per_gpu_hour"] or None)
    i = int(np.searchsorted(grid, p["context"]))
    pt = r.at(i)
    cross = cx.crossover_for(m, hw, batch=p["batch"], chips=chips, kv_dtype=_kvdt(p))
    lmax = cx.max_context_for(m, hw, batch=p["batch"], chips=n, kv_dtype=_kvdt(p) or "bf16")
    lq = cx.quadratic_onset_for(m)
    c1 = chart("cost", f"Cost per token vs context — {m.name}, batch {p['batch']:g}, {n} × {hw.chip.name} (R42)",
               [line(grid, r.usd_per_mtok, "$ / Mtok"), marker(p["context"], pt["usd_per_mtok"])],
               "context (tokens)", "$ per million output tokens", yunit="$/Mtok",
               shapes=[{"type": "line", "x0": lmax, "x1": lmax, "yref": "paper", "y0": 0, "y1": 1,
                        "line": {"dash": "dash", "color": "gray"}}] if 0 < lmax < 1e12 else [])
    c2 = chart("time", "Step time terms vs context",
               [line(grid, r.t_compute_s, "compute"), line(grid, r.t_weights_s, "weight fetch"),
                line(grid, r.t_kv_s, "KV fetch"), line(grid, r.step_s, "step", line={"width": 3, "color": "black"}),
                marker(p["context"], pt["step_s"])], "context (tokens)", "time per step", yunit="s")
    c = hw.chip
    w_bytes = float(m.weight_bytes())
    wall = cx.context_wall(n_active=m.active_params, n_total=m.total_params,
                           bytes_per_token=float(np.asarray(m.kv_read_bytes(200e3, _kvdt(p) or "bf16"))) / 200e3,
                           batch=p["batch"], ratio=float(hardware_ratio(c, m.native_dtype)),
                           bytes_per_param=w_bytes / m.total_params, peak_flops=c.gemm_flops(m.native_dtype),
                           mem_bw=c.hbm_bw, hbm_bytes=c.hbm_bytes * n, chips=n, weight_bytes=w_bytes,
                           attn_flops_per_ctx_token=float(m.attention_flops_per_token(1e6)) / 1e6, label=m.name)
    if cross <= 100:
        cross = "memory-bound at any context (batch below B*)"
    elif not np.isfinite(cross):
        cross = "compute-bound at every context shown"
    numbers = [num("$ per million output tokens", pt["usd_per_mtok"], "$/Mtok", "usd_per_mtok"),
               num("binding term", pt["bound"], key="bound"), num("step time", pt["step_s"], "s", "step_s"),
               num("memory-bound beyond (roofline crossover)", cross, "tokens", "crossover"),
               num("longest context that fits (this batch)", lmax, "tokens", "max_context"),
               num("attention FLOPs = matmul FLOPs at", lq, "tokens", "l_q"),
               num("fits in HBM", "yes" if pt["fits"] else "NO", key="fits")]
    # one crossover on the page: the roofline's (the model's own attention and KV, as the charts), so the wall's
    # dense-formula L* (an average KV per token, no attention FLOPs) is left out of its derivation here
    wd = wall.derivation
    wd.steps = [st for st in wd.steps if st.symbol != "L*"]
    wd.conclusion = (f"→ a {shown(wall.target_context)}-token context at today's cost per token needs "
                     f"{wall.bandwidth_multiple:.3g}× today's HBM bandwidth")
    return {"header": IDEAL, "numbers": numbers, "charts": [c1, c2],
            "derivations": [derivation(r.explain(i)), derivation(wd)],
            "notes": ["crossover: where the step's memory terms (weights + KV) overtake compute in the roofline "
                      "charted here (analyses.lecture.context.crossover_for, as `rackmath context -m` prints it as "
                      "roofline_crossover)"]}


# --------------------------------------------------------------------------- chapter 7: reversible networks


def revnet_inputs():
    return [select("model", "model (shape)", model_names(), "llama-3.1-70b"),
            slider("seq", "sequence length", 128, 1048576, 8192, log=True, unit="tokens"),
            slider("batch", "sequences per micro-batch", 1, 1024, 1, log=True, unit="sequences"),
            select("dtype", "activation dtype", ["bf16", "fp16", "fp8", "fp32"], "bf16"),
            check("flash", "flash attention (no s² scores stored)", True)]


def revnet_view(p):
    from .. import units
    from ..analyses.lecture import revnet

    m = model(p["model"])
    r = revnet.compare(n_layers=m.n_layers, seq_len=p["seq"], batch=p["batch"], d_model=m.d_model, n_heads=m.n_heads,
                       bytes_per_elem=units.dtype_bytes(p["dtype"]), flash=p["flash"], name=m.name)
    schemes = [x["scheme"] for x in r.rows]
    c1 = bars("memory", f"Activation memory for {m.name} ({m.n_layers} layers), seq {shown(p['seq'])} (02:04)",
              schemes, [("stored activations", [x["stored_bytes"] for x in r.rows], {}),
                        ("peak", [x["peak_bytes"] for x in r.rows], {})], "activation memory", "B", ylog=True,
              barmode="group")
    c2 = bars("flops", "Compute paid for the memory: training FLOPs ÷ standard (4F/3F)", schemes,
              [("training FLOPs ÷ standard", [x["flops_vs_standard"] for x in r.rows], {})], "×")
    numbers = [num(f"stored: {x['scheme']}", x["stored_bytes"], "B", f"stored_{x['scheme']}") for x in r.rows]
    numbers.append(num("memory saved by reversible layers", r.rows[0]["stored_bytes"] / r.rows[2]["stored_bytes"],
                       "x", "saving"))
    return {"header": "activation memory of one micro-batch (Korthikanti et al. 2022 counts)", "numbers": numbers,
            "charts": [c1, c2], "derivations": [derivation(r.derivation)], "notes": []}


# --------------------------------------------------------------------------- serve


def _layout(lay) -> str:
    if isinstance(lay, dict):
        return str(lay.get("label") or ", ".join(f"{k} {v}" for k, v in lay.items()))
    return str(lay)


def serve_inputs():
    return _common() + [
        slider("gpus", "GPUs", 0, 4096, 0, log=True, zero="one domain", unit="GPUs"),
        slider("isl", "input tokens per request (ISL)", 16, 1048576, 1024, log=True, unit="tokens"),
        slider("osl", "output tokens per request (OSL)", 1, 131072, 1024, log=True, unit="tokens"),
        slider("concurrency", "concurrency (sequences in flight)", 1, 65536, 256, log=True, unit="sequences"),
        *_dtype_inputs(), select("efficiency", "efficiency", _serve_presets(), ""), _price_input()]


def _serve_presets() -> list:
    from ..engine.efficiency import presets

    return [["", "auto: the chip's calibrated preset"], ["ideal", "ideal roofline (a lower bound on time)"]] + \
        [n for n in presets().names() if n != "ideal"]


def _blame_gpus(e, m, hw, p):
    """A deployment that holds not one sequence is the GPU count's fault, not the concurrency's: the library's
    'at most about 0 sequences' becomes a gpus error saying what the weights need (other errors pass through)."""
    if getattr(e, "field", "") != "concurrency" or "about 0 sequences" not in str(e):
        return e
    from ..units import format_si

    n = int(p["gpus"] or hw.scaleup_size)
    w, hbm = float(m.weight_bytes(_wdt(p))), float(hw.chip.hbm_bytes)
    return InputError("gpus", f"{n} × {hw.chip.name} ({format_si(n * hbm, 'B')} of HBM) cannot hold {m.name}: its "
                              f"weights alone need {format_si(w, 'B')}",
                      f"more GPUs (at least {int(np.ceil(w / hbm))} for the weights, more for the KV cache), "
                      "or a smaller weights dtype")


def serve_view(p):
    import rackmath

    from ..errors import RackmathError

    kw = dict(gpus=p["gpus"] or None, isl=p["isl"], osl=p["osl"], weights_dtype=_wdt(p), kv_dtype=_kvdt(p),
              efficiency=p["efficiency"] or None, usd_per_gpu_hour=p["usd_per_gpu_hour"] or None)
    m, hw = model(p["model"]), hardware(p["hardware"])
    try:
        r = rackmath.serve(m, hw, concurrency=p["concurrency"], **kw)
    except InputError as e:
        raise _blame_gpus(e, m, hw, p) from None
    d = r.as_dict()
    grid = np.unique(np.geomspace(1, 65536, 49).round())
    lay = {k: d["layout"][k] for k in ("tp", "ep", "pp", "attention_dp") if k in d.get("layout", {})}
    if lay.get("attention_dp"):  # the chosen attention-DP group count R (R = TP: every GPU its own sequences)
        lay["attention_dp_size"] = d["layout"]["attention_dp_size"]
    try:  # the same layout across concurrency
        sweep = rackmath.serve(m, hw, concurrency=grid, **kw, **lay).as_dict()
    except RackmathError:  # the layout cannot be fixed this way: show the single point only
        sweep = None
    traces = []
    if sweep is not None:
        ok = np.asarray(sweep["fits"], bool)
        traces.append({"type": "scatter", "mode": "lines+markers", "name": f"concurrency sweep ({_layout(lay)})",
                       "x": _list(np.where(ok, sweep["tokens_per_s_per_user"], np.nan)),
                       "y": _list(np.where(ok, sweep["output_tok_s_per_gpu"], np.nan)),
                       "text": [f"concurrency {c:g}" for c in grid], "marker": {"size": 4}})
    traces.append(marker(d["tokens_per_s_per_user"], d["output_tok_s_per_gpu"], f"concurrency {p['concurrency']:g}"))
    c1 = chart("pareto", f"Throughput vs interactivity — {d['model']} on {d['gpus']} × {hw.chip.name}", traces,
               "tokens/s per user", "output tokens/s per GPU", xunit="tok/s", yunit="tok/s")
    charts = [c1]
    if sweep is not None:
        ok = np.asarray(sweep["fits"], bool)
        lat = [line(grid, np.where(ok, np.asarray(sweep[k], float) / 1e3, np.nan), lab)
               for k, lab in (("tpot_ms", "TPOT"), ("ttft_ms", "TTFT")) if k in sweep]
        lat.append(marker(p["concurrency"], float(np.asarray(d["tpot_ms"]).ravel()[0]) / 1e3, "TPOT here"))
        charts.append(chart("latency", "Time per output token and time to first token vs concurrency", lat,
                            "concurrency (sequences in flight)", "time", yunit="s"))
    keys = [("output tokens/s per GPU", "output_tok_s_per_gpu", "tok/s"), ("TPOT", "tpot_ms", "ms"),
            ("TTFT", "ttft_ms", "ms"), ("tokens/s per user", "tokens_per_s_per_user", "tok/s"),
            ("$ per million output tokens", "usd_per_mtok_output", "$/Mtok"), ("bottleneck", "bottleneck", ""),
            ("memory per GPU", "mem_per_gpu_gb", "GB"), ("largest concurrency that fits", "max_concurrency",
                                                           "sequences")]
    scale = {"ms": (1e-3, "s"), "GB": (1e9, "B")}  # the library's ms and GB as SI for shown()
    numbers = [num(lab, np.asarray(d[k]).ravel()[0] * scale[u][0] if u in scale else d[k], scale.get(u, (1, u))[1], k)
               for lab, k, u in keys if k in d]
    numbers.append(num("layout", _layout(d.get("layout", {})), key="layout"))
    header = _efficiency_header(d.get("efficiency") or None)
    der = r.explain()
    from ..analyses.fitting.evidence import sentences

    return {"header": header, "numbers": numbers, "charts": charts, "derivations": [derivation(der)] if der else [],
            "notes": list(d.get("notes", [])) + [f"nearest measured: {x}" for x in sentences(r.nearest_measured())]}


# --------------------------------------------------------------------------- plan


PLAN_CHIPS = ["h100", "h200", "b200", "gb200", "mi300x", "mi355x", "tpu-v5e", "tpu-v6e"]


def plan_inputs():
    choices = [["h100,h200,b200,mi355x", "compare h100, h200, b200, mi355x"]] + \
        [c for c in PLAN_CHIPS if c in _chip_names()]
    return [select("model", "model", model_names(), "deepseek-v3"),
            select("hardware", "chips", choices, "h100,h200,b200,mi355x"),
            slider("isl", "input tokens per request (ISL)", 16, 262144, 1024, log=True, unit="tokens"),
            slider("osl", "output tokens per request (OSL)", 1, 65536, 1024, log=True, unit="tokens"),
            slider("users", "concurrent users", 1, 1048576, 1024, log=True, unit="users"),
            slider("tok_s_user", "at least tokens/s per user", 1, 1000, 20, log=True, unit="tok/s"),
            slider("ttft_s", "TTFT at most", 0, 60, 0, step=0.1, integer=False, zero="no limit", unit="s"),
            *_dtype_inputs(), _price_input()]


def _plan_note(chip, dep, pts) -> str:
    """What the chart shows, true of the point it shows: where the planned deployment sits against its own chip's
    curve (each chip's cheapest aggregated layouts at full load, engine.layout's Pareto front) at the same speed."""
    x, y = dep.get("tokens_per_s_per_user"), dep.get("usd_per_mtok")
    head = (f"curves: each chip's cheapest aggregated-serving layouts at full load (steady state); circle: the planned "
            f"{chip} deployment ({dep.get('mode')}, whole replicas at the offered load)")
    if not pts or x is None or y is None:
        return head
    xs, ys = np.asarray(pts.get("tok_s_user", []), float), np.asarray(pts.get("usd_per_mtok", []), float)
    idx = np.asarray(sorted(pts.get("front") or range(len(xs)), key=lambda i: xs[i]), int)
    if idx.size == 0 or not (xs[idx[0]] <= x <= xs[idx[-1]]):
        return head + f" at {shown(x, 'tok/s')} per user, outside the speeds the {chip} curve spans"
    on_curve = float(np.exp(np.interp(x, xs[idx], np.log(ys[idx]))))
    ratio = y / on_curve
    if abs(ratio - 1) < 0.02:
        where = "on"
    elif ratio < 1:
        where = f"{1 / ratio:.3g}× below (cheaper than)"
    else:
        where = f"{ratio:.3g}× above (dearer than)"
    return head + (f" sits {where} the {chip} curve at its {shown(x, 'tok/s')} per user "
                   f"({shown(y, '$/Mtok')} vs {shown(on_curve, '$/Mtok')})")


def plan_view(p):
    """The library planner (`rackmath plan`): the cheapest deployment per chip meeting the SLOs, and each chip's
    $/Mtok-vs-speed front. The simulator replay (`--confirm`) is left out to keep one request bounded."""
    from ..analyses.serving.plan import plan
    from ..specs.hardware import load_chip

    chips_ = [load_chip(c).name for c in str(p["hardware"]).split(",")]  # catalog names only
    r = plan(model(p["model"]).name, ",".join(chips_), users=p["users"], isl=p["isl"], osl=p["osl"],
             tok_s_user=p["tok_s_user"], ttft=p["ttft_s"] or None, confirm=False, weights_dtype=_wdt(p),
             kv_dtype=_kvdt(p), **({"usd_per_gpu_hour": p["usd_per_gpu_hour"]} if p["usd_per_gpu_hour"] else {}))
    d = r.as_dict()
    traces, notes, numbers = [], list(d.get("notes", [])), []
    for chip, pts in (d.get("pareto") or {}).items():  # front: indices of the Pareto frontier (engine.layout)
        xs, ys = pts.get("tok_s_user", []), pts.get("usd_per_mtok", [])
        idx = sorted(pts.get("front") or range(len(xs)), key=lambda i: xs[i])
        traces.append({"type": "scatter", "mode": "lines+markers", "name": f"{chip}: aggregated serving",
                       "marker": {"size": 4},
                       "x": _list([xs[i] for i in idx]), "y": _list([ys[i] for i in idx])})
    ranking = d.get("ranking", [])
    best = next((row for row in ranking if row.get("deployment")), None)
    for row in ranking:
        if not row.get("deployment") and row.get("why"):
            notes.append(f"{row.get('chip')}: {row['why']}")
    if best:
        dep = best["deployment"]
        traces.append(marker(dep.get("tokens_per_s_per_user"), dep.get("usd_per_mtok"), f"cheapest: {best['chip']}"))
        notes.append(_plan_note(best["chip"], dep, (d.get("pareto") or {}).get(best["chip"])))
        lay = dep.get("layout", {})
        numbers = [num("cheapest chip", best.get("chip"), key="chip"), num("GPUs", dep.get("gpus"), "", "gpus"),
                   num("mode", dep.get("mode"), key="mode"),
                   num("layout", lay.get("label") if isinstance(lay, dict) else lay, key="layout"),
                   num("$ per hour", dep.get("usd_per_hour"), "$/h", "usd_h"),
                   num("$ per million output tokens", dep.get("usd_per_mtok"), "$/Mtok", "usd_mtok"),
                   num("tokens/s per user", dep.get("tokens_per_s_per_user"), "tok/s", "tok_s_user"),
                   num("TTFT", dep.get("ttft_s"), "s", "ttft")]
    else:
        notes.append("no chip has a deployment meeting these targets")
    numbers.append(num("chips with a deployment meeting the targets",
                       f"{sum(1 for row in ranking if row.get('deployment'))} of {len(ranking)}", key="meeting"))
    traces.append({"type": "scatter", "mode": "lines", "x": [p["tok_s_user"]] * 2, "y": [1e-3, 1e4],
                   "name": "per-user target", "line": {"dash": "dash", "color": "gray"}})
    c1 = chart("pareto", f"Cost vs speed per chip for {d.get('model', p['model'])}", traces,
               "tokens/s per user", "$ per million output tokens", xunit="tok/s", yunit="$/Mtok")
    header = "; ".join(f"{row.get('chip')}: {row.get('header')}" for row in ranking if row.get("header"))
    return {"header": header or "the library planner (`rackmath plan`)", "numbers": numbers, "charts": [c1],
            "derivations": [], "notes": notes}


# --------------------------------------------------------------------------- validate


def validate_inputs():
    return [select("efficiency", "prediction", [["", "calibrated (auto preset)"], "ideal"], ""),
            select("family", "hardware family", [["", "all"]] + _families(), "")]


def _families():
    return sorted({r.get("family", "") for r in _validate_cached(False)["records"]} - {""})


_VALIDATE: dict = {}


def _validate_cached(ideal: bool) -> dict:
    if ideal not in _VALIDATE:
        from ..analyses.fitting.validation import validate

        _VALIDATE[ideal] = validate(ideal=ideal)
    return _VALIDATE[ideal]


def validate_view(p):
    ideal = p["efficiency"] == "ideal"
    res = _validate_cached(ideal)
    rows = [r for r in res["records"] if not p["family"] or r.get("family") == p["family"]]
    traces = []
    for kind in sorted({r.get("status", "measured") for r in rows}):  # measured / approximate / derived
        rs = [r for r in rows if r.get("status", "measured") == kind]
        traces.append({"type": "scatter", "mode": "markers", "name": kind,
                       "x": _list([r["measured"] for r in rs]), "y": _list([r["predicted"] for r in rs]),
                       "text": [f"{r['id']}: {r.get('title', '')}<br>{r.get('metric', '')} measured "
                                f"{r['measured']:.4g} {r.get('unit', '')}, predicted {r['predicted']:.4g} "
                                f"({r.get('error', 0):+.0%})<br>source: {str(r.get('source', ''))[:160]}"
                                for r in rs],
                       "hovertemplate": "%{text}<extra></extra>", "marker": {"size": 9}})
    vals = [v for r in rows for v in (r["measured"], r["predicted"]) if v and v > 0]
    lo, hi = (min(vals) / 2, max(vals) * 2) if vals else (1e-2, 1e6)
    traces.append(line([lo, hi], [lo, hi], "predicted = measured", line={"color": "black", "width": 1}))
    traces.append(line([lo, hi], [lo * 1.2, hi * 1.2], "+20%", line={"color": "gray", "dash": "dot", "width": 1}))
    traces.append(line([lo, hi], [lo * 0.8, hi * 0.8], "−20%", line={"color": "gray", "dash": "dot", "width": 1}))
    c1 = chart("validate", f"Predicted vs measured, {len(rows)} public records (hover for the source)", traces,
               "measured", "predicted")
    s = res["summary"]
    errs = np.abs([r["error"] for r in rows if r.get("fitted", True)])
    numbers = [num("fitted records (measured + approximate)", s.get("n", 0), "", "n"),
               num("median |error| (all fitted)", s.get("median_abs_error", float("nan")), "%", "median"),
               num("within ±20% (all fitted)", s.get("within_20pct", 0), "", "within20"),
               num("median |error| (this filter)", float(np.median(errs)) if errs.size else float("nan"), "%",
                   "median_filter")]
    notes = []
    if not ideal:  # the figure that measures transfer: each record predicted by a fit that never saw its source
        from ..analyses.fitting.validation import held_out_summary

        h = held_out_summary([r for r in rows if r.get("fitted", True)])
        numbers.append(num("median |error| with its source left out (this filter)",
                           h.get("median_abs_error", float("nan")), "%", "median_heldout"))
        notes.append(f"held out: {h['n']} serving records each predicted by the presets refitted without its "
                     f"source (rackmath validate --cv; docs/validation.md)")
    return {"header": IDEAL if ideal else "calibrated prediction (auto preset per chip family)", "numbers": numbers,
            "charts": [c1], "derivations": [], "notes": notes}


# --------------------------------------------------------------------------- the page table


@dataclass
class Page:
    id: str
    title: str
    chapter: str
    blurb: str
    inputs: object  # () -> list[Input]
    view: object  # (params) -> dict
    cli: str = ""


PAGES = {p.id: p for p in [
    Page("batch", "Batch size, latency and cost", "00:00", "time = max(compute, memory); cost per token falls with "
         "batch until compute binds.", batch_inputs, batch_view, "rackmath roofline --explain"),
    Page("racks", "Racks and mixture of experts", "00:32", "how many experts a batch touches, what a second rack "
         "costs the all-to-all, and the weight-load latency floor per system.", racks_inputs, racks_view,
         "rackmath racks moe-2racks / scaleup"),
    Page("pipeline", "Pipelining and memory", "00:47", "stages divide the weights, not the KV; training pays a "
         "bubble.", pipeline_inputs, pipeline_view, "rackmath racks pipeline / bubble"),
    Page("training", "Training economics", "01:18", "6·N·D at an MFU, and how serving traffic sets over-training.",
         training_inputs, training_view, "rackmath train / overtrain"),
    Page("pricing", "Prices read backwards and memory tiers", "01:33", "a long-context price step gives KV bytes "
         "per token; cache prices pick a memory tier.", pricing_inputs, pricing_view, "rackmath price / cache"),
    Page("context", "The context wall", "01:50", "past the crossover, cost per token grows with context.",
         context_inputs, context_view, "rackmath context"),
    Page("revnet", "Reversible networks", "02:04", "spend 4/3 the compute to store two activations instead of L.",
         revnet_inputs, revnet_view, "rackmath revnet"),
    Page("serve", "Serving a workload", "", "throughput per GPU vs tokens per user for a real deployment "
         "(calibrated).", serve_inputs, serve_view, "rackmath serve"),
    Page("plan", "Plan a deployment", "", "the GPU count and concurrency with the best throughput that meets a "
         "per-user speed.", plan_inputs, plan_view, "rackmath plan"),
    Page("validate", "Validation: predicted vs measured", "", "every public measurement, predicted; hover for the "
         "source.", validate_inputs, validate_view, "rackmath validate"),
]}
