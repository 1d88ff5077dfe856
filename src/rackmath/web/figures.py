"""Web output helpers: numbers written for people, Plotly figures as plain dicts, derivations for the panel.

Every page (``lecture_pages``, ``serving_pages``) builds its answer with these; nothing here computes a model.
"""

from __future__ import annotations

import numpy as np

from ..explain import fmt


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


def as_list(a):
    a = np.asarray(a, dtype=float).ravel()
    return [None if not np.isfinite(x) else float(x) for x in a]


def line(x, y, name, **kw) -> dict:
    return {"type": "scatter", "mode": "lines", "x": as_list(x), "y": as_list(y), "name": name, **kw}


def marker(x, y, name="this view", **kw) -> dict:
    return {"type": "scatter", "mode": "markers", "x": as_list(np.atleast_1d(x)), "y": as_list(np.atleast_1d(y)),
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
    data = [{"type": "bar", "x": list(x), "y": as_list(y), "name": name, **extra} for name, y, extra in series]
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
