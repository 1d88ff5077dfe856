"""What each API endpoint computes, as plain functions of the request's values (no FastAPI here).

``app.py`` checks a request and hands one of these to a thread (cheap work) or to a worker process
(``HEAVY``: layout searches, the planner, validation), so a slow request never holds the server's event
loop or the interpreter lock that cheap requests need. Each returns plain data; :func:`to_json` encodes it.
"""

from __future__ import annotations

import json

from ..errors import InputError
from ..results import plain_json
from . import views
from .inputs import MAX_POINTS, parse_grid, parse_params


def to_json(content) -> bytes:
    return json.dumps(plain_json(content), ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def _count(text, field):
    from .. import units

    return units.parse_count(text, field)


def _usd(text, field="usd_per_gpu_hour"):
    from .. import units

    return units.parse_usd_per_hour(text, field) if text else None


# --------------------------------------------------------------------------- pages


def describe(page_id: str | None = None):
    def one(p):
        return {"id": p.id, "title": p.title, "chapter": p.chapter, "blurb": p.blurb, "cli": p.cli,
                "inputs": [i.spec() for i in p.inputs()]}

    return [one(p) for p in views.PAGES.values()] if page_id is None else one(page(page_id))


def page(page_id: str):
    if page_id not in views.PAGES:
        raise InputError("page", f"unknown page {page_id[:40]!r}", "one of " + ", ".join(views.PAGES))
    return views.PAGES[page_id]


def view(page_id: str, query: dict):
    """A page's numbers, figures and derivations, with the values its inputs took (``inputs``)."""
    p = page(page_id)
    values = parse_params(p.inputs(), query)
    out = p.view(values)
    for c in out["charts"]:
        c["summary"] = views.summary(c)  # the chart in words (screen readers; page.js puts it under the chart)
    return out | {"inputs": values}


# --------------------------------------------------------------------------- catalogs


def models():
    from ..specs.models import models as catalog

    return [m.describe() for m in catalog().values()]


def hardware():
    from ..specs.hardware import chips, systems

    return {"systems": [{"name": s.name, "chip": s.chip.name, "scaleup_size": s.scaleup_size}
                        for s in systems().values()],
            "chips": [{"name": c.name, "vendor": c.vendor, "hbm_bytes": c.hbm_bytes, "hbm_bw": c.hbm_bw,
                       "flops": c.flops, "usd_per_hour": c.usd_per_hour} for c in chips().values()]}


# --------------------------------------------------------------------------- the library, mirrored


def roofline(*, model, hardware, batch, context, gpus, chips, pass_len, weights_dtype, kv_dtype, efficiency, ideal,
             usd_per_gpu_hour, explain):
    """/api/roofline: the roofline over batch × context (one keyword per query parameter of the route)."""
    import numpy as np

    import rackmath

    B = parse_grid(batch, "batch")
    L = parse_grid(context, "context")
    if B.size * L.size > 4 * MAX_POINTS:
        raise InputError("batch × context", f"{B.size} × {L.size} points",
                         f"at most {4 * MAX_POINTS} points per request")
    n = gpus if gpus is not None else chips
    r = rackmath.roofline(views.model(model), views.hardware(hardware), batch=B[:, None], context=L[None, :],
                          gpus=_count(n, "gpus") if n else None, pass_len=_count(pass_len, "pass_len"),
                          weights_dtype=weights_dtype or None, kv_dtype=kv_dtype or None,
                          efficiency=efficiency or None, ideal=ideal, usd_per_gpu_hour=usd_per_gpu_hour or None)
    out = r.as_dict()
    out["shape"] = list(np.shape(r.step_s))
    out["header"] = views.efficiency_header(r.efficiency)
    if explain:
        out["derivation"] = views.derivation(r.explain(0))
    return out


def serve(*, model, hardware, isl, osl, concurrency, gpus, tp, ep, pp, weights_dtype, kv_dtype, ideal, efficiency,
          usd_per_gpu_hour, explain, framework=None):
    """`rackmath serve`: the page's controls as serve's objects (Workload, Layout, Stack; the price on the hardware);
    one keyword per query parameter of the route."""
    from dataclasses import replace

    import rackmath
    from ..engine.efficiency import resolve
    from ..options import priced

    eff = resolve(None, efficiency or None, True) if ideal else (efficiency or None)  # one rule: --ideal vs a preset
    r = rackmath.serve(views.model(model), priced(views.hardware(hardware), _usd(usd_per_gpu_hour)),
                       rackmath.Workload(_count(isl, "isl"), _count(osl, "osl"),
                                         parse_grid(concurrency, "concurrency")),
                       rackmath.Layout(int(_count(gpus, "gpus")) if gpus else None, tp, ep, pp),
                       replace(rackmath.load_stack(framework or None), weights_dtype=weights_dtype or None,
                               kv_dtype=kv_dtype or None),
                       eff)
    out = r.as_dict()
    if explain and r.explain() is not None:
        out["derivation"] = views.derivation(r.explain())
    return out


def train(*, model, hardware, tokens, gpus, mfu, usd_per_gpu_hour, explain):
    """`rackmath train … --mfu`: the same layout search as the command (analyses.training.model.search_training_layout)."""
    from ..errors import check_positive

    n = int(check_positive(_count(gpus, "gpus"), "gpus", "a number of GPUs", maximum=1e7))
    r, par, searched = views.train_searched(views.model(model), views.hardware(hardware), chips=n,
                                            tokens=check_positive(_count(tokens, "tokens"), "tokens",
                                                                  "a token count", maximum=1e17),
                                            mfu=mfu, usd_per_hour=_usd(usd_per_gpu_hour))
    out = r.as_dict() | {"layout_search": searched}
    if explain:
        out["derivation"] = views.derivation(r.derivation)
    return out


def plan(*, model, hardware, isl, osl, users, rate, tok_s_user, ttft, usd_per_gpu_hour, weights_dtype, kv_dtype):
    from ..analyses.serving.plan import plan as library_plan
    from ..specs.hardware import load_chip

    names = [h.strip() for h in hardware.split(",") if h.strip()]
    if not 1 <= len(names) <= 8:
        raise InputError("hardware", f"{len(names)} chips", "1 to 8 chip names, comma-separated")
    chips_ = ",".join(load_chip(h).name for h in names)  # catalog names only
    return library_plan(views.model(model).name, chips_, isl=_count(isl, "isl"), osl=_count(osl, "osl"),
                        users=_count(users, "users") if users else None, rate=_count(rate, "rate") if rate else None,
                        tok_s_user=tok_s_user, ttft=ttft, usd_per_gpu_hour=usd_per_gpu_hour or None,
                        weights_dtype=weights_dtype or None, kv_dtype=kv_dtype or None, confirm=False).as_dict()


def revnet(*, model, seq, batch, dtype, flash):
    from .. import units
    from ..analyses.lecture import revnet as rv
    from ..errors import check_positive

    m = views.model(model)
    return rv.compare(n_layers=m.n_layers, d_model=m.d_model, n_heads=m.n_heads,
                      seq_len=check_positive(_count(seq, "seq"), "seq", "tokens", maximum=1e9),
                      batch=check_positive(_count(batch, "batch"), "batch", "sequences", maximum=1e7),
                      bytes_per_elem=units.dtype_bytes(dtype, "dtype"), flash=flash, name=m.name).as_dict()


def price(*, sheet, hardware, n_active):
    from ..analyses.lecture import pricing as pr
    from ..specs.hardware import hardware_ratio, load_chip
    from ..specs.prices import load_price_sheet

    s, c = load_price_sheet(sheet), load_chip(hardware)
    st = s.step("output") or s.step("input")
    if st is None:
        raise InputError("sheet", f"{s.name} has no long-context price step", "a sheet with a context tier")
    ded = pr.deduce_from_step(st[0], st[1], n_active=_count(n_active, "n_active"),
                              ratio=float(hardware_ratio(c, "fp8")), bytes_per_param=1.0, source=s.name)
    return {"sheet": s.describe(), "step": ded.as_dict()}


def overtrain(*, traffic, lifetime_days, models, active):
    from ..analyses.lecture.lifetime import overtrain as library_overtrain

    return library_overtrain(rate=_count(traffic, "traffic"), lifetime_s=lifetime_days * 86400, n_models=models,
                             active=_count(active, "active")).as_dict()


def context(*, model, hardware, batch, gpus, kv_dtype):
    from ..errors import check_positive

    q = {"model": model, "hardware": hardware, "batch": batch, "kv_dtype": kv_dtype or ""}
    if gpus:
        q["gpus"] = str(int(check_positive(_count(gpus, "gpus"), "gpus", "GPUs", maximum=4096)))
    v = views.PAGES["context"].view(parse_params(views.PAGES["context"].inputs(), q))
    return {"numbers": {n["key"]: n["value"] for n in v["numbers"]}, "derivations": v["derivations"]}


def validate(*, ideal):
    return views.validate_cached(ideal)


FUNCS = {f.__name__: f for f in (describe, view, models, hardware, roofline, serve, train, plan, revnet, price,
                                 overtrain, context, validate)}


def call(name: str, kwargs: dict) -> bytes:
    """One endpoint's work, encoded as JSON (what a worker process sends back)."""
    return to_json(FUNCS[name](**kwargs))
