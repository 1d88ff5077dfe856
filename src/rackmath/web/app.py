"""The FastAPI application behind `rackmath web`.

Routes:
  /                       the chapter index (static HTML)
  /p/{page}               one page (a generic HTML shell; static/page.js builds it from /api/pages/{page})
  /api/pages              every page's title and inputs;  /api/pages/{page}: one page's inputs
  /api/view/{page}        a page's numbers, Plotly charts and derivations for the query's inputs
  /api/roofline, /api/serve, /api/train, /api/revnet, /api/price, /api/overtrain, /api/context, /api/validate,
  /api/models, /api/hardware
                          the library, mirrored (JSON; /openapi.json, rendered offline at /docs)
  /static/…               our page files and plotly.min.js from the installed plotly package (no CDN)

Safety: errors a request can cause are HTTP 400 with the library's one-line message
(``{"error": "batch: -1 is not a positive finite number (accepted: …)"}``), FastAPI's
validation errors included; each request's work is bounded (capped grids, a timeout,
a few computations at a time); no request names a file: models, hardware, price sheets
and presets are catalog names only, and the catalog directories are fixed at start-up.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import anyio
from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import InputError, RackmathError
from . import views
from .inputs import MAX_POINTS, parse_grid, parse_params

STATIC = Path(__file__).parent / "static"
TIMEOUT_S = 10.0  # the most one request may compute
MAX_QUERY = 4096  # bytes of query string accepted
log = logging.getLogger("rackmath.web")


def plotly_js() -> Path:
    """plotly.min.js shipped inside the installed plotly Python package (package_data)."""
    import plotly

    return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


def clean(x):
    """Plain JSON: numpy scalars and arrays to Python, non-finite floats (inf, nan) to null."""
    if isinstance(x, dict):
        return {str(k): clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean(v) for v in x]
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, (str, int, bool)) or x is None:
        return x
    if hasattr(x, "tolist"):  # numpy scalar or array
        return clean(x.tolist())
    return str(x)


class SafeJSON(JSONResponse):
    """JSON that never fails on inf/nan or numpy values (the library returns both)."""

    def render(self, content) -> bytes:
        return json.dumps(clean(content), ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def error(status: int, message: str) -> JSONResponse:
    return SafeJSON({"error": message}, status_code=status)


def _field_of(loc) -> str:
    parts = [str(x) for x in loc if x not in ("query", "path", "body")]
    return ".".join(parts) or "request"


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]", "::1")


def create_app(timeout_s: float = TIMEOUT_S, concurrency: int = 4, allowed_hosts=None) -> FastAPI:
    """The app. ``allowed_hosts``: Host header names accepted (None = any); `rackmath web` on a loopback address
    passes the loopback names, so a web page elsewhere cannot reach the server by DNS rebinding."""
    app = FastAPI(title="rackmath web", version=__import__("rackmath").__version__, docs_url=None, redoc_url=None,
                  description="The lecture's blackboard, live: every chapter's equations on real chips, models and "
                              "prices. Numbers accept the CLI's strings ('8K', '$2/h'). Errors are HTTP 400 with one "
                              "line naming the field and what is accepted.")
    limiter = anyio.CapacityLimiter(concurrency)

    async def compute(fn, *args):
        """Run library work in a worker thread, at most ``concurrency`` at once, at most ``timeout_s`` each."""
        try:
            with anyio.fail_after(timeout_s):
                return SafeJSON(await anyio.to_thread.run_sync(fn, *args, limiter=limiter, abandon_on_cancel=True))
        except TimeoutError:
            raise InputError("request", f"took longer than {timeout_s:g} s",
                             "fewer points or a smaller range") from None

    # ---- errors: one line, never a traceback
    @app.exception_handler(RackmathError)
    async def _rackmath_error(request: Request, exc: RackmathError):
        return error(400, str(exc))

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError):
        e = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        return error(400, f"{_field_of(e.get('loc', ()))}: {e.get('msg', 'invalid')} (accepted: see /docs)")

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException):
        msg = exc.detail if isinstance(exc.detail, str) else "error"
        if exc.status_code == 404:
            msg = f"path: {request.url.path[:80]!r} not found (accepted: /, /p/PAGE, /api/…, /docs)"
        return error(exc.status_code, msg)

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception):  # a bug of ours: one line, logged with its traceback
        log.exception("internal error on %s", request.url.path)
        return error(500, f"internal error: {type(exc).__name__} (please report the URL)")

    @app.middleware("http")
    async def _limits(request: Request, call_next):
        if len(request.url.query) > MAX_QUERY:
            return error(400, f"query: {len(request.url.query)} bytes (accepted: at most {MAX_QUERY})")
        if request.method not in ("GET", "HEAD"):
            return error(405, f"method: {request.method} (accepted: GET)")
        if allowed_hosts is not None:
            host = request.headers.get("host", "")
            name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
            if name not in allowed_hosts:
                return error(400, f"host: {host[:60]!r} not served (accepted: {', '.join(allowed_hosts)})")
        response = await call_next(request)
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response

    # ---- pages
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/", include_in_schema=False)
    async def index():
        return FileResponse(STATIC / "index.html")

    @app.get("/docs", include_in_schema=False)
    async def api_docs():  # our own reference page: FastAPI's /docs fetches Swagger UI from a CDN (no internet here)
        return FileResponse(STATIC / "api.html")

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon():
        return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml")

    @app.get("/vendor/plotly.min.js", include_in_schema=False)
    async def plotly():
        return FileResponse(plotly_js(), media_type="application/javascript",
                            headers={"Cache-Control": "max-age=86400"})

    @app.get("/p/{page}", include_in_schema=False)
    async def page(page: str):
        if page not in views.PAGES:
            raise InputError("page", f"unknown page {page[:40]!r}", "one of " + ", ".join(views.PAGES))
        return FileResponse(STATIC / "page.html")

    @app.get("/p", include_in_schema=False)
    async def pages_root():
        return RedirectResponse("/")

    def _page(page: str):
        if page not in views.PAGES:
            raise InputError("page", f"unknown page {page[:40]!r}", "one of " + ", ".join(views.PAGES))
        return views.PAGES[page]

    def _describe(p) -> dict:
        return {"id": p.id, "title": p.title, "chapter": p.chapter, "blurb": p.blurb, "cli": p.cli,
                "inputs": [i.spec() for i in p.inputs()]}

    @app.get("/api/pages", tags=["pages"], summary="Every page: title, lecture timestamp, inputs")
    async def api_pages():
        return await compute(lambda: [_describe(p) for p in views.PAGES.values()])

    @app.get("/api/pages/{page}", tags=["pages"], summary="One page's inputs (controls, ranges, defaults)")
    async def api_page(page: str):
        return await compute(lambda: _describe(_page(page)))

    @app.get("/api/view/{page}", tags=["pages"],
             summary="A page's numbers, Plotly figures and derivations for the inputs in the query string",
             description="The query parameters are the page's inputs, listed with their ranges by /api/pages/{page}; "
                         "unknown parameters are refused.")
    async def api_view(page: str, request: Request):
        p = _page(page)
        query = dict(request.query_params)

        def run():
            return p.view(parse_params(p.inputs(), query))

        return await compute(run)

    # ---- the library, mirrored
    @app.get("/api/models", tags=["catalog"], summary="Catalog models (names usable in every endpoint)")
    async def api_models():
        def run():
            from ..specs.models import models

            return [m.describe() for m in models().values()]

        return await compute(run)

    @app.get("/api/hardware", tags=["catalog"], summary="Catalog systems and chips")
    async def api_hardware():
        def run():
            from ..specs.hardware import chips, systems

            return {"systems": [{"name": s.name, "chip": s.chip.name, "scaleup_size": s.scaleup_size}
                                for s in systems().values()],
                    "chips": [{"name": c.name, "vendor": c.vendor, "hbm_bytes": c.hbm_bytes, "hbm_bw": c.hbm_bw,
                               "flops": c.flops, "usd_per_hour": c.usd_per_hour} for c in chips().values()]}

        return await compute(run)

    @app.get("/api/roofline", tags=["library"], summary="rackmath.roofline: step time, binding term, cost")
    async def api_roofline(
        model: str = Query(..., max_length=100, description="catalog model name, e.g. deepseek-v3"),
        hardware: str = Query(..., max_length=100, description="system or chip name, e.g. gb200-nvl72"),
        batch: str = Query("1", max_length=4000, description=f"list '1,64,4096' or range '1:16384:log' "
                                                             f"(≤ {MAX_POINTS} points)"),
        context: str = Query("8192", max_length=4000, description="list or range, e.g. '8K' or '1K:1M:log'"),
        gpus: str | None = Query(None, max_length=20, description="GPUs (default: one scale-up domain)"),
        chips: str | None = Query(None, max_length=20, description="alias of gpus"),
        pass_len: str = Query("1", max_length=20, description="tokens per sequence this pass (1 = decode)"),
        weights_dtype: str | None = Query(None, max_length=20),
        kv_dtype: str | None = Query(None, max_length=20),
        efficiency: str | None = Query(None, max_length=60, description="preset name or 'auto' (default: ideal)"),
        ideal: bool = Query(False, description="the lecture's ideal roofline (the default)"),
        usd_per_gpu_hour: str | None = Query(None, max_length=20, description="e.g. 2.5 or '$2.5/h'"),
        explain: bool = Query(False, description="include the derivation of the first point"),
    ):
        def run():
            import numpy as np

            import rackmath

            from .. import units

            B = parse_grid(batch, "batch")
            L = parse_grid(context, "context")
            if B.size * L.size > 4 * MAX_POINTS:
                raise InputError("batch × context", f"{B.size} × {L.size} points",
                                 f"at most {4 * MAX_POINTS} points per request")
            n = gpus if gpus is not None else chips
            r = rackmath.roofline(views.model(model), views.hardware(hardware), batch=B[:, None], context=L[None, :],
                                  gpus=units.parse_count(n, "gpus") if n else None,
                                  pass_len=units.parse_count(pass_len, "pass_len"),
                                  weights_dtype=weights_dtype or None, kv_dtype=kv_dtype or None,
                                  efficiency=efficiency or None, ideal=ideal,
                                  usd_per_gpu_hour=usd_per_gpu_hour or None)
            out = r.as_dict()
            out["shape"] = list(np.shape(r.step_s))
            out["header"] = views._efficiency_header(r.efficiency)
            if explain:
                out["derivation"] = views.derivation(r.explain(0))
            return out

        return await compute(run)

    @app.get("/api/serve", tags=["library"], summary="rackmath.serve: steady-state serving (calibrated by default)")
    async def api_serve(
        model: str = Query(..., max_length=100), hardware: str = Query(..., max_length=100),
        isl: str = Query(..., max_length=20, description="input tokens per request"),
        osl: str = Query(..., max_length=20, description="output tokens per request"),
        concurrency: str = Query("1", max_length=4000, description="list or range (≤ 512 points)"),
        gpus: str | None = Query(None, max_length=20), tp: int | None = Query(None, ge=1, le=4096),
        ep: int | None = Query(None, ge=1, le=4096), pp: int | None = Query(None, ge=1, le=512),
        weights_dtype: str | None = Query(None, max_length=20), kv_dtype: str | None = Query(None, max_length=20),
        ideal: bool = Query(False), efficiency: str | None = Query(None, max_length=60),
        usd_per_gpu_hour: str | None = Query(None, max_length=20), explain: bool = Query(False),
    ):
        def run():
            import rackmath

            from .. import units

            r = rackmath.serve(views.model(model), views.hardware(hardware),
                               gpus=int(units.parse_count(gpus, "gpus")) if gpus else None,
                               isl=units.parse_count(isl, "isl"), osl=units.parse_count(osl, "osl"),
                               concurrency=parse_grid(concurrency, "concurrency"), tp=tp, ep=ep, pp=pp,
                               weights_dtype=weights_dtype or None, kv_dtype=kv_dtype or None, ideal=ideal,
                               efficiency=efficiency or None,
                               usd_per_gpu_hour=units.parse_usd_per_hour(usd_per_gpu_hour, "usd_per_gpu_hour")
                               if usd_per_gpu_hour else None)
            out = r.as_dict()
            if explain and r.explain() is not None:
                out["derivation"] = views.derivation(r.explain())
            return out

        return await compute(run)

    @app.get("/api/train", tags=["library"], summary="training time, GPU-hours and cost at a given MFU")
    async def api_train(
        model: str = Query(..., max_length=100), hardware: str = Query("hgx-h100", max_length=100),
        tokens: str = Query(..., max_length=20, description="training tokens, e.g. 15T"),
        gpus: str = Query(..., max_length=20), mfu: float = Query(0.4, gt=0, le=1),
        usd_per_gpu_hour: str | None = Query(None, max_length=20), explain: bool = Query(False),
    ):
        def run():
            from .. import units
            from ..analyses.training import Parallelism, train
            from ..errors import check_positive

            n = int(check_positive(units.parse_count(gpus, "gpus"), "gpus", "a number of GPUs", maximum=1e7))
            r = train(views.model(model), views.hardware(hardware), chips=n,
                      tokens=check_positive(units.parse_count(tokens, "tokens"), "tokens", "a token count",
                                            maximum=1e17),
                      mfu_given=mfu, par=Parallelism(dp=n),
                      usd_per_hour=units.parse_usd_per_hour(usd_per_gpu_hour, "usd_per_gpu_hour")
                      if usd_per_gpu_hour else None)
            out = r.as_dict()
            if explain:
                out["derivation"] = views.derivation(r.derivation)
            return out

        return await compute(run)

    @app.get("/api/plan", tags=["library"], summary="rackmath.plan: the cheapest deployment per chip meeting SLOs")
    async def api_plan(
        model: str = Query(..., max_length=100),
        hardware: str = Query("h100,h200,b200,mi355x", max_length=200, description="chip names, comma list (≤ 8)"),
        isl: str = Query("1024", max_length=20), osl: str = Query("1024", max_length=20),
        users: str | None = Query(None, max_length=20, description="concurrent users (or rate)"),
        rate: str | None = Query(None, max_length=20, description="requests per second (or users)"),
        tok_s_user: float | None = Query(None, gt=0, le=1e5), ttft: float | None = Query(None, gt=0, le=1e5),
        usd_per_gpu_hour: str | None = Query(None, max_length=200, description="2.5 or 'h100=2.1,b200=4'"),
        weights_dtype: str | None = Query(None, max_length=20), kv_dtype: str | None = Query(None, max_length=20),
    ):
        def run():
            from .. import units
            from ..analyses.planner import plan
            from ..specs.hardware import load_chip

            names = [h.strip() for h in hardware.split(",") if h.strip()]
            if not 1 <= len(names) <= 8:
                raise InputError("hardware", f"{len(names)} chips", "1 to 8 chip names, comma-separated")
            chips_ = ",".join(load_chip(h).name for h in names)  # catalog names only
            return plan(views.model(model).name, chips_, isl=units.parse_count(isl, "isl"),
                        osl=units.parse_count(osl, "osl"),
                        users=units.parse_count(users, "users") if users else None,
                        rate=units.parse_count(rate, "rate") if rate else None, tok_s_user=tok_s_user, ttft=ttft,
                        usd_per_gpu_hour=usd_per_gpu_hour or None, weights_dtype=weights_dtype or None,
                        kv_dtype=kv_dtype or None, confirm=False).as_dict()

        return await compute(run)

    @app.get("/api/revnet", tags=["library"], summary="activation memory: standard vs recompute vs reversible")
    async def api_revnet(model: str = Query(..., max_length=100), seq: str = Query("8192", max_length=20),
                         batch: str = Query("1", max_length=20), dtype: str = Query("bf16", max_length=20),
                         flash: bool = Query(True)):
        def run():
            from .. import units
            from ..analyses import revnet
            from ..errors import check_positive

            m = views.model(model)
            return revnet.compare(n_layers=m.n_layers, d_model=m.d_model, n_heads=m.n_heads,
                                  seq_len=check_positive(units.parse_count(seq, "seq"), "seq", "tokens", maximum=1e9),
                                  batch=check_positive(units.parse_count(batch, "batch"), "batch", "sequences",
                                                       maximum=1e7),
                                  bytes_per_elem=units.dtype_bytes(dtype, "dtype"), flash=flash, name=m.name).as_dict()

        return await compute(run)

    @app.get("/api/price", tags=["library"], summary="a price sheet read backwards: tier step → KV bytes/token")
    async def api_price(sheet: str = Query(..., max_length=100, description="price sheet, e.g. gemini-3.1-pro"),
                        hardware: str = Query("h100", max_length=100, description="chip whose ratio to use"),
                        n_active: str = Query("100B", max_length=20, description="active parameters")):
        def run():
            from .. import units
            from ..analyses import pricing as pr
            from ..specs.hardware import hardware_ratio, load_chip
            from ..specs.prices import load_price_sheet

            s, c = load_price_sheet(sheet), load_chip(hardware)
            st = s.step("output") or s.step("input")
            if st is None:
                raise InputError("sheet", f"{s.name} has no long-context price step", "a sheet with a context tier")
            ded = pr.deduce_from_step(st[0], st[1], n_active=units.parse_count(n_active, "n_active"),
                                      ratio=float(hardware_ratio(c, "fp8")), bytes_per_param=1.0, source=s.name)
            return {"sheet": s.describe(), "step": ded.as_dict()}

        return await compute(run)

    @app.get("/api/overtrain", tags=["library"], summary="pretraining/RL/inference split and over-training")
    async def api_overtrain(traffic: str = Query("500M", max_length=20, description="fleet tokens/s"),
                            lifetime_days: float = Query(61, gt=0, le=36500), models: float = Query(10, gt=0, le=1e6),
                            active: str = Query("100B", max_length=20, description="active parameters")):
        def run():
            from .. import units
            from ..analyses.lifetime import overtrain

            return overtrain(rate=units.parse_count(traffic, "traffic"), lifetime_s=lifetime_days * 86400,
                             n_models=models, active=units.parse_count(active, "active")).as_dict()

        return await compute(run)

    @app.get("/api/context", tags=["library"], summary="the context wall for a model on a system (R42)")
    async def api_context(model: str = Query(..., max_length=100), hardware: str = Query(..., max_length=100),
                          batch: str = Query("8192", max_length=20), gpus: str | None = Query(None, max_length=20),
                          kv_dtype: str | None = Query(None, max_length=20)):
        def run():
            from .. import units
            from ..errors import check_positive

            q = {"model": model, "hardware": hardware, "batch": batch, "kv_dtype": kv_dtype or ""}
            if gpus:
                q["gpus"] = str(int(check_positive(units.parse_count(gpus, "gpus"), "gpus", "GPUs", maximum=4096)))
            v = views.PAGES["context"].view(parse_params(views.PAGES["context"].inputs(), q))
            return {"numbers": {n["key"]: n["value"] for n in v["numbers"]}, "derivations": v["derivations"]}

        return await compute(run)

    @app.get("/api/validate", tags=["library"], summary="every public record predicted vs measured")
    async def api_validate(ideal: bool = Query(False)):
        return await compute(views._validate_cached, ideal)

    return app
