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
validation errors and unknown query parameters included; each request's work is bounded (capped
grids, a time limit, a few computations at a time, slow ones in worker processes: ``pool.py``);
no request names a file: models, hardware, price sheets and presets are catalog names only, and the
catalog directories are fixed at start-up. HEAD is answered as GET without the body.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from pathlib import Path

import anyio
from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import InputError, RackmathError
from . import views, work
from .inputs import MAX_POINTS, unknown_parameter
from .pool import Pool, WorkerDied

STATIC = Path(__file__).parent / "static"
TIMEOUT_S = 10.0  # the most one request may take, waiting for a worker included
MAX_QUERY = 4096  # bytes of query string accepted
log = logging.getLogger("rackmath.web")

# Work that can take seconds runs in worker processes (pool.py); everything else in a thread of the server.
HEAVY = {"serve", "plan", "train", "validate"}
HEAVY_PAGES = {"serve", "plan", "training", "validate"}


def plotly_js() -> Path:
    """plotly.min.js shipped inside the installed plotly Python package (package_data)."""
    import plotly

    return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


def json_response(body: bytes, status: int = 200) -> Response:
    return Response(body, status_code=status, media_type="application/json")


def error(status: int, message: str) -> Response:
    return json_response(work.to_json({"error": message}), status)


def _field_of(loc) -> str:
    parts = [str(x) for x in loc if x not in ("query", "path", "body")]
    return ".".join(parts) or "request"


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def host_name(host: str) -> str:
    """The name in a Host header, compared as DNS compares it: without the port, lower-case, no trailing dot."""
    host = host.strip()
    if host.startswith("["):  # [::1]:8000
        name = host[: host.find("]") + 1] if "]" in host else host
    else:
        name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    return name.lower().rstrip(".")


def _timeout_hint(name: str, kw: dict) -> tuple[str, str]:
    """(field, what would be faster) for a request that ran past its time limit: the input that makes it slow."""
    if name == "view":
        page, q = kw["page_id"], kw["query"]
        name, kw = {"serve": "serve", "plan": "plan", "training": "train"}.get(page, page), q
    if name == "roofline":
        return "batch × context", "fewer batch × context points"
    if name == "serve":
        if kw.get("gpus"):
            return "gpus", f"fewer GPUs than {kw['gpus']} (the layout search grows with them), or a fixed tp/ep/pp"
        return "concurrency", "fewer concurrency points"
    if name == "plan":
        return "hardware", "fewer chips to compare, or fewer users"
    if name == "train":
        return "gpus", "fewer GPUs (the layout search grows with their divisors)"
    return "request", "try again: the server is loaded"


class Guard:
    """Checks before routing, as plain ASGI (no per-request wrapper objects: cheap requests stay cheap): query size,
    method (GET; HEAD is served as GET without the body, its Content-Length that of the GET), the Host name on a
    loopback server, no parameters for static files; and ``X-Content-Type-Options: nosniff`` on every answer."""

    def __init__(self, app, hosts=None):
        self.app, self.hosts = app, hosts

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        refusal = self.refusal(scope)
        if refusal is not None:
            return await error(*refusal)(scope, receive, send)
        head = scope["method"] == "HEAD"
        if head:
            scope = dict(scope, method="GET")

        async def sender(message):
            if message["type"] == "http.response.start":
                message = dict(message, headers=[*message.get("headers", []), (b"x-content-type-options", b"nosniff")])
            elif head and message["type"] == "http.response.body":
                message = dict(message, body=b"")
            await send(message)

        await self.app(scope, receive, sender)

    def refusal(self, scope) -> tuple[int, str] | None:
        query = scope.get("query_string", b"").decode("latin-1")
        if len(query) > MAX_QUERY:
            return 400, f"query: {len(query)} bytes (accepted: at most {MAX_QUERY})"
        if scope["method"] not in ("GET", "HEAD"):
            return 405, f"method: {scope['method'][:20]} (accepted: GET or HEAD)"
        if self.hosts is not None:
            host = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"host"), "")
            if host_name(host) not in self.hosts:
                return 400, f"host: {host[:60]!r} not served (accepted: {', '.join(self.hosts)})"
        path = scope.get("path", "")
        if query and (path.startswith("/static/") or path == "/openapi.json"):
            from urllib.parse import parse_qsl

            name = next((k for k, _ in parse_qsl(query, keep_blank_values=True)), query)
            return 400, f"{name[:40]}: unknown parameter (accepted: no parameters)"
        return None


def create_app(timeout_s: float = TIMEOUT_S, concurrency: int = 4, allowed_hosts=None, workers: int = 2) -> FastAPI:
    """The app. ``allowed_hosts``: Host header names accepted (None = any); `rackmath web` on a loopback address
    passes the loopback names, so a web page elsewhere cannot reach the server by DNS rebinding. ``concurrency``:
    cheap computations at once (threads); ``workers``: slow ones at once (worker processes)."""
    def bracketed(h: str) -> str:  # '::1' and '[::1]' are one name
        n = host_name(h)
        return f"[{n}]" if ":" in n and not n.startswith("[") else n

    hosts = None if allowed_hosts is None else list(dict.fromkeys(bracketed(h) for h in allowed_hosts))

    app = FastAPI(title="rackmath web", version=__import__("rackmath").__version__, docs_url=None, redoc_url=None,
                  description="The lecture's blackboard, live: every chapter's equations on real chips, models and "
                              "prices. Numbers accept the CLI's strings ('8K', '$2/h'). Errors are HTTP 400 with one "
                              "line naming the field and what is accepted; unknown parameters are refused.",
                  dependencies=[Depends(_known_parameters)], lifespan=_lifespan)
    app.state.pool = Pool(workers)
    compute = _computer(app.state.pool, timeout_s, concurrency, workers)
    _error_handlers(app)
    app.add_middleware(Guard, hosts=hosts)
    _static_routes(app)
    _page_routes(app, compute)
    _library_routes(app, compute)
    _lecture_routes(app, compute)
    return app


def _computer(pool: Pool, timeout_s: float, concurrency: int, workers: int):
    """The ``compute(name, **kw)`` every API route awaits (below)."""
    light_limiter = anyio.CapacityLimiter(concurrency)
    light_threads = anyio.CapacityLimiter(4 * concurrency)  # abandoned (timed-out) threads finish on their own

    async def compute(name: str, **kw):
        """``work.FUNCS[name](**kw)`` as JSON: slow work in a worker process, cheap work in a thread; at most
        ``timeout_s`` including the wait for a free slot."""
        heavy = name in HEAVY or (name == "view" and kw.get("page_id") in HEAVY_PAGES)
        state = {"phase": "waiting"}
        try:
            with anyio.fail_after(timeout_s):
                if heavy:
                    answer = await pool.run(name, kw, state)
                else:
                    async with light_limiter:
                        state["phase"] = "computing"
                        answer = ("ok", await anyio.to_thread.run_sync(lambda: work.call(name, kw),
                                                                       limiter=light_threads, abandon_on_cancel=True))
        except TimeoutError:
            if state["phase"] == "waiting":
                return error(503, f"request: the server is busy ({workers if heavy else concurrency} computations "
                                  f"running); waited {timeout_s:g} s (accepted: try again shortly)")
            field, hint = _timeout_hint(name, kw)
            raise InputError(field, f"computing this took longer than {timeout_s:g} s", hint) from None
        except WorkerDied:
            return error(500, "internal error: the worker computing this request ended (please report the URL)")
        if answer[0] == "ok":
            return json_response(answer[1])
        if answer[0] == "error":
            return error(400, answer[1])
        return error(500, f"internal error: {answer[1]} (please report the URL)")

    return compute


def _error_handlers(app: FastAPI) -> None:
    """Errors: one line, never a traceback."""

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


def _static_routes(app: FastAPI) -> None:
    """The files: our pages, the API reference, plotly.min.js; /p/{page} is a page's HTML shell."""
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
    async def page(page: str, request: Request):
        """The page shell. Its query is the page's inputs: a value that does not parse, or an unknown name, is a
        400 whose body is still the page (which then shows the one-line error beside its controls)."""
        p = work.page(page)
        try:
            from .inputs import parse_params

            parse_params(p.inputs(), dict(request.query_params))
        except RackmathError:
            return FileResponse(STATIC / "page.html", status_code=400)
        return FileResponse(STATIC / "page.html")

    @app.get("/p", include_in_schema=False)
    async def pages_root():
        return RedirectResponse("/")


def _page_routes(app: FastAPI, compute) -> None:
    """A page's inputs and its view (/api/pages, /api/view/{page}); the catalogs (/api/models, /api/hardware)."""

    @app.get("/api/pages", tags=["pages"], summary="Every page: title, lecture timestamp, inputs")
    async def api_pages():
        return await compute("describe")

    @app.get("/api/pages/{page}", tags=["pages"], summary="One page's inputs (controls, ranges, defaults)")
    async def api_page(page: str):
        return await compute("describe", page_id=page)

    @app.get("/api/view/{page}", tags=["pages"],
             summary="A page's numbers, Plotly figures and derivations for the inputs in the query string",
             description="The query parameters are the page's inputs, listed with their ranges by /api/pages/{page}; "
                         "unknown parameters are refused. `inputs` in the answer holds the value each input took.")
    async def api_view(page: str, request: Request):
        work.page(page)
        return await compute("view", page_id=page, query=dict(request.query_params))

    @app.get("/api/models", tags=["catalog"], summary="Catalog models (names usable in every endpoint)")
    async def api_models():
        return await compute("models")

    @app.get("/api/hardware", tags=["catalog"], summary="Catalog systems and chips")
    async def api_hardware():
        return await compute("hardware")


def _library_routes(app: FastAPI, compute) -> None:
    """The library, mirrored: roofline, serve, train, plan."""

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
        """Step time, binding term and cost over the query's batch × context (``rackmath.roofline``).\f

        One parameter per query parameter (more than twelve): FastAPI reads the endpoint's inputs from its
        signature; the text after the form feed stays out of the OpenAPI description."""
        return await compute("roofline", model=model, hardware=hardware, batch=batch, context=context, gpus=gpus,
                             chips=chips, pass_len=pass_len, weights_dtype=weights_dtype, kv_dtype=kv_dtype,
                             efficiency=efficiency, ideal=ideal, usd_per_gpu_hour=usd_per_gpu_hour, explain=explain)

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
        framework: str | None = Query(None, max_length=80, description="serving stack: sglang, vllm@0.13.0, … "
                                                                        "(default: the generic stack)"),
    ):
        """Steady-state serving over the query's concurrencies (``rackmath.serve``).\f

        One parameter per query parameter (more than twelve): FastAPI reads the endpoint's inputs from its
        signature; the text after the form feed stays out of the OpenAPI description."""
        return await compute("serve", model=model, hardware=hardware, isl=isl, osl=osl, concurrency=concurrency,
                             gpus=gpus, tp=tp, ep=ep, pp=pp, weights_dtype=weights_dtype, kv_dtype=kv_dtype,
                             ideal=ideal, efficiency=efficiency, usd_per_gpu_hour=usd_per_gpu_hour, explain=explain,
                             framework=framework)

    @app.get("/api/train", tags=["library"],
             summary="`rackmath train --mfu`: the fastest layout that fits, its time, GPU-hours and cost")
    async def api_train(
        model: str = Query(..., max_length=100), hardware: str = Query("hgx-h100", max_length=100),
        tokens: str = Query(..., max_length=20, description="training tokens, e.g. 15T"),
        gpus: str = Query(..., max_length=20), mfu: float = Query(0.4, gt=0, le=1),
        usd_per_gpu_hour: str | None = Query(None, max_length=20), explain: bool = Query(False),
    ):
        return await compute("train", model=model, hardware=hardware, tokens=tokens, gpus=gpus, mfu=mfu,
                             usd_per_gpu_hour=usd_per_gpu_hour, explain=explain)

    @app.get("/api/plan", tags=["library"], summary="rackmath.plan: the cheapest deployment per chip meeting SLOs")
    async def api_plan(
        model: str = Query(..., max_length=100),
        hardware: str = Query("h100,h200,b200,mi355x", max_length=200, description="chip names, comma list (≤ 8)"),
        isl: str = Query("1024", max_length=20), osl: str = Query("1024", max_length=20),
        users: str | None = Query(None, max_length=20, description="concurrent users (or rate)"),
        rate: str | None = Query(None, max_length=20, description="requests per second (or users)"),
        tok_s_user: float | None = Query(None, gt=0, le=1e5), ttft: float | None = Query(None, ge=1e-12, le=1e5),
        usd_per_gpu_hour: str | None = Query(None, max_length=200, description="2.5 or 'h100=2.1,b200=4'"),
        weights_dtype: str | None = Query(None, max_length=20), kv_dtype: str | None = Query(None, max_length=20),
    ):
        return await compute("plan", model=model, hardware=hardware, isl=isl, osl=osl, users=users, rate=rate,
                             tok_s_user=tok_s_user, ttft=ttft, usd_per_gpu_hour=usd_per_gpu_hour,
                             weights_dtype=weights_dtype, kv_dtype=kv_dtype)


def _lecture_routes(app: FastAPI, compute) -> None:
    """The lecture's analyses and validation, mirrored: revnet, price, overtrain, context, validate."""

    @app.get("/api/revnet", tags=["library"], summary="activation memory: standard vs recompute vs reversible")
    async def api_revnet(model: str = Query(..., max_length=100), seq: str = Query("8192", max_length=20),
                         batch: str = Query("1", max_length=20), dtype: str = Query("bf16", max_length=20),
                         flash: bool = Query(True)):
        return await compute("revnet", model=model, seq=seq, batch=batch, dtype=dtype, flash=flash)

    @app.get("/api/price", tags=["library"], summary="a price sheet read backwards: tier step → KV bytes/token")
    async def api_price(sheet: str = Query(..., max_length=100, description="price sheet, e.g. gemini-3.1-pro"),
                        hardware: str = Query("h100", max_length=100, description="chip whose ratio to use"),
                        n_active: str = Query("100B", max_length=20, description="active parameters")):
        return await compute("price", sheet=sheet, hardware=hardware, n_active=n_active)

    @app.get("/api/overtrain", tags=["library"], summary="pretraining/RL/inference split and over-training")
    async def api_overtrain(traffic: str = Query("500M", max_length=20, description="fleet tokens/s"),
                            lifetime_days: float = Query(61, gt=0, le=36500), models: float = Query(10, gt=0, le=1e6),
                            active: str = Query("100B", max_length=20, description="active parameters")):
        return await compute("overtrain", traffic=traffic, lifetime_days=lifetime_days, models=models, active=active)

    @app.get("/api/context", tags=["library"], summary="the context wall for a model on a system (R42)")
    async def api_context(model: str = Query(..., max_length=100), hardware: str = Query(..., max_length=100),
                          batch: str = Query("8192", max_length=20), gpus: str | None = Query(None, max_length=20),
                          kv_dtype: str | None = Query(None, max_length=20)):
        return await compute("context", model=model, hardware=hardware, batch=batch, gpus=gpus, kv_dtype=kv_dtype)

    @app.get("/api/validate", tags=["library"], summary="every public record predicted vs measured")
    async def api_validate(ideal: bool = Query(False)):
        return await compute("validate", ideal=ideal)


@contextlib.asynccontextmanager
async def _lifespan(app):
    """Under a server (uvicorn): start the worker processes in the background; stop them at shutdown."""
    threading.Thread(target=app.state.pool.prestart, daemon=True).start()
    yield
    app.state.pool.close()


def _allowed(route, request: Request) -> list[str] | None:
    """The query parameters a route takes: its declared ones, or a page's inputs for /api/view/{page} (None: the
    route checks them itself)."""
    if route.path == "/p/{page}":
        return None  # the page route answers 400 with the page itself, which shows the error
    if route.path == "/api/view/{page}":
        pid = request.path_params.get("page", "")
        return [i.name for i in views.PAGES[pid].inputs()] if pid in views.PAGES else None
    return [f.alias for f in route.dependant.query_params]


async def _known_parameters(request: Request):
    """Every route refuses a parameter it does not take, naming the closest one (``weight_dtype`` → ``weights_dtype``)
    — a misspelt input must not silently give the default's answer."""
    route = request.scope.get("route")
    if route is None or not request.query_params:
        return
    known = _allowed(route, request)
    if known is None:
        return
    for name in request.query_params:
        if name not in known:
            unknown_parameter(name, known)

