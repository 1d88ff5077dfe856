"""The serving pages: serve (a deployment's throughput vs interactivity), plan (the planner) and validate."""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from .choices import (IDEAL, chip_names, common, dtype_inputs, efficiency_header, hardware, kvdt, model, model_names,
                      price_input, wdt)
from .figures import as_list, chart, derivation, line, marker, num, shown
from .inputs import select, slider


# --------------------------------------------------------------------------- serve


def _layout(lay) -> str:
    if isinstance(lay, dict):
        return str(lay.get("label") or ", ".join(f"{k} {v}" for k, v in lay.items()))
    return str(lay)


def serve_inputs():
    return common() + [
        slider("gpus", "GPUs", 0, 4096, 0, log=True, zero="one domain", unit="GPUs"),
        slider("isl", "input tokens per request (ISL)", 16, 1048576, 1024, log=True, unit="tokens"),
        slider("osl", "output tokens per request (OSL)", 1, 131072, 1024, log=True, unit="tokens"),
        slider("concurrency", "concurrency (sequences in flight)", 1, 65536, 256, log=True, unit="sequences"),
        *dtype_inputs(), select("framework", "serving stack", _frameworks(), ""),
        select("efficiency", "efficiency", _serve_presets(), ""), price_input()]


def _frameworks() -> list:
    """The serving stacks a page offers, as ``--framework`` takes them: none (the generic stack), each engine (its
    newest listed build for the chip) and every listed ``stack@version``."""
    from ..specs.stacks import known_labels

    labels = known_labels()
    engines = list(dict.fromkeys(v.partition("@")[0] for v in labels))
    return [["", "generic (no stack named)"]] + [[e, f"{e} (its newest build for the chip)"] for e in engines] + labels


def _serve_presets() -> list:
    from ..engine.efficiency import presets

    return [["", "auto: the stack version's measured silicon and fitted times where it has them, else the chip's "
                 "calibrated preset"], ["preset", "preset: the chip's calibrated preset"],
            ["measured", "measured: silicon from kernel curves, the stack version's times"],
            ["ideal", "ideal roofline (a lower bound on time)"]] + \
        [n for n in presets().names() if n != "ideal"]


def _blame_gpus(e, m, hw, p):
    """A deployment that holds not one sequence is the GPU count's fault, not the concurrency's: the library's
    'at most about 0 sequences' becomes a gpus error saying what the weights need (other errors pass through)."""
    if getattr(e, "field", "") != "concurrency" or "about 0 sequences" not in str(e):
        return e
    from ..units import format_si

    n = int(p["gpus"] or hw.scaleup_size)
    w, hbm = float(m.weight_bytes(wdt(p))), float(hw.chip.hbm_bytes)
    return InputError("gpus", f"{n} × {hw.chip.name} ({format_si(n * hbm, 'B')} of HBM) cannot hold {m.name}: its "
                              f"weights alone need {format_si(w, 'B')}",
                      f"more GPUs (at least {int(np.ceil(w / hbm))} for the weights, more for the KV cache), "
                      "or a smaller weights dtype")


def serve_view(p):
    import rackmath

    from ..errors import RackmathError

    kw = dict(gpus=p["gpus"] or None, isl=p["isl"], osl=p["osl"], weights_dtype=wdt(p), kv_dtype=kvdt(p),
              framework=p["framework"] or None, efficiency=p["efficiency"] or None,
              usd_per_gpu_hour=p["usd_per_gpu_hour"] or None)
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
                       "x": as_list(np.where(ok, sweep["tokens_per_s_per_user"], np.nan)),
                       "y": as_list(np.where(ok, sweep["output_tok_s_per_gpu"], np.nan)),
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
    header = efficiency_header(r.efficiency_used or d.get("efficiency") or None)  # the one it ran (its band)
    der = r.explain()
    from ..analyses.fitting.evidence import sentences

    return {"header": header, "numbers": numbers, "charts": charts, "derivations": [derivation(der)] if der else [],
            "notes": list(d.get("notes", [])) + [f"nearest measured: {x}" for x in sentences(r.nearest_measured())]}


# --------------------------------------------------------------------------- plan


PLAN_CHIPS = ["h100", "h200", "b200", "gb200", "mi300x", "mi355x", "tpu-v5e", "tpu-v6e"]


def plan_inputs():
    choices = [["h100,h200,b200,mi355x", "compare h100, h200, b200, mi355x"]] + \
        [c for c in PLAN_CHIPS if c in chip_names()]
    return [select("model", "model", model_names(), "deepseek-v3"),
            select("hardware", "chips", choices, "h100,h200,b200,mi355x"),
            slider("isl", "input tokens per request (ISL)", 16, 262144, 1024, log=True, unit="tokens"),
            slider("osl", "output tokens per request (OSL)", 1, 65536, 1024, log=True, unit="tokens"),
            slider("users", "concurrent users", 1, 1048576, 1024, log=True, unit="users"),
            slider("tok_s_user", "at least tokens/s per user", 1, 1000, 20, log=True, unit="tok/s"),
            slider("ttft_s", "TTFT at most", 0, 60, 0, step=0.1, integer=False, zero="no limit", unit="s"),
            *dtype_inputs(), price_input()]


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
             tok_s_user=p["tok_s_user"], ttft=p["ttft_s"] or None, confirm=False, weights_dtype=wdt(p),
             kv_dtype=kvdt(p), **({"usd_per_gpu_hour": p["usd_per_gpu_hour"]} if p["usd_per_gpu_hour"] else {}))
    d = r.as_dict()
    traces, notes, numbers = [], list(d.get("notes", [])), []
    for chip, pts in (d.get("pareto") or {}).items():  # front: indices of the Pareto frontier (engine.layout)
        xs, ys = pts.get("tok_s_user", []), pts.get("usd_per_mtok", [])
        idx = sorted(pts.get("front") or range(len(xs)), key=lambda i: xs[i])
        traces.append({"type": "scatter", "mode": "lines+markers", "name": f"{chip}: aggregated serving",
                       "marker": {"size": 4},
                       "x": as_list([xs[i] for i in idx]), "y": as_list([ys[i] for i in idx])})
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
    return sorted({r.get("family", "") for r in validate_cached(False)["records"]} - {""})


_VALIDATE: dict = {}


def validate_cached(ideal: bool) -> dict:
    if ideal not in _VALIDATE:
        from ..analyses.fitting.validation import validate

        _VALIDATE[ideal] = validate(ideal=ideal)
    return _VALIDATE[ideal]


def validate_view(p):
    ideal = p["efficiency"] == "ideal"
    res = validate_cached(ideal)
    rows = [r for r in res["records"] if not p["family"] or r.get("family") == p["family"]]
    traces = []
    for kind in sorted({r.get("status", "measured") for r in rows}):  # measured / approximate / derived
        rs = [r for r in rows if r.get("status", "measured") == kind]
        traces.append({"type": "scatter", "mode": "markers", "name": kind,
                       "x": as_list([r["measured"] for r in rs]), "y": as_list([r["predicted"] for r in rs]),
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
