"""`rackmath web` in a real headless Chromium, as a person uses it.

One server (uvicorn, loopback, a free port) and one browser for the module. For each page: load it, see numbers,
charts and the derivation; move a slider with the keyboard (or pick a select); see the number, the chart and the
address bar change; reload the address and see the same view; no console errors. Screenshots land in
``test-artifacts/web/`` (gitignored).

Chromium is Debian's ``chromium`` (``.ci/run`` installs it with apt), driven by Playwright's Python API with
``executable_path``; set ``RACKMATH_CHROMIUM`` to use another binary. Without a browser the tests skip with the
reason shown (``-rs``); under CI (``CI`` set) a missing browser is a failure, never a skip.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts" / "web"

# page -> (control to move, how, the number that must change)
MOVES = {
    "batch": ("batch", "slider", "step_s"),
    "racks": ("batch", "slider", "w_read"),
    "pipeline": ("stages", "slider", "w_chip"),
    "training": ("tokens", "slider", "time"),
    "pricing": ("hold_s", "slider", "cheapest_cost"),
    "context": ("context", "slider", "usd_per_mtok"),
    "revnet": ("seq", "slider", "stored_standard"),
    "serve": ("concurrency", "slider", "output_tok_s_per_gpu"),
    "plan": ("isl", "slider", "usd_mtok"),
    "validate": ("family", "select", "median_filter"),
}


def _unavailable(reason: str):
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the browser tests: {reason}")
    pytest.skip(reason)


def _chromium() -> str:
    for c in (os.environ.get("RACKMATH_CHROMIUM"), shutil.which("chromium"), "/usr/bin/chromium",
              shutil.which("chromium-browser"), shutil.which("google-chrome")):
        if c and Path(c).exists():
            return c
    _unavailable("no Chromium found (apt-get install chromium, or set RACKMATH_CHROMIUM)")


@pytest.fixture(scope="module")
def server():
    pytest.importorskip("fastapi", reason="the web extra is not installed: pip install '.[web]'")
    import uvicorn

    from rackmath.web import create_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(create_app(), host="127.0.0.1", port=port, log_level="warning"))
    t = threading.Thread(target=srv.run, daemon=True)
    t.start()
    deadline = time.time() + 20
    while not srv.started and time.time() < deadline:
        time.sleep(0.05)
    assert srv.started, "uvicorn did not start"
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    t.join(10)


@pytest.fixture(scope="module")
def browser():
    exe = _chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install '.[test]')")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-dev-shm-usage"])
        yield b
        b.close()


@pytest.fixture
def page(browser):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    pg.errors, pg.requests = [], []
    pg.on("request", lambda r: pg.requests.append(r.url))
    pg.on("console", lambda m: pg.errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    yield pg
    ctx.close()


def _renders(pg) -> int:
    return int(pg.evaluate("Number(document.body.dataset.renders || 0)"))


def _wait_render(pg, after: int):
    pg.wait_for_function(f"Number(document.body.dataset.renders || 0) > {after}", timeout=20000)


def _number(pg, key) -> str:
    return pg.locator(f'.number[data-key="{key}"] .v').inner_text()


def _chart_data(pg) -> str:
    return pg.evaluate("JSON.stringify([...document.querySelectorAll('#charts .chart')].map(d => d.data))")


def _shot(pg, name):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    pg.screenshot(path=str(ARTIFACTS / f"{name}.png"))


@pytest.mark.parametrize("pid", list(MOVES))
def test_page_moves_with_its_inputs(server, page, pid):
    control, how, key = MOVES[pid]
    page.goto(f"{server}/p/{pid}")
    _wait_render(page, 0)
    assert page.locator("#charts .chart .main-svg").count() >= 1, "no Plotly chart drawn"
    assert page.locator(".number").count() >= 3
    if pid not in ("validate", "plan"):
        assert page.locator(".derivation tr").count() >= 3, "no derivation panel"
    before, chart_before = _number(page, key), _chart_data(page)

    n = _renders(page)
    ctl = page.locator(f"#in-{control}")
    if how == "slider":
        ctl.focus()
        for _ in range(8):
            page.keyboard.press("ArrowRight")
    else:
        ctl.select_option(index=1)
    _wait_render(page, n)
    page.wait_for_function("document.body.dataset.busy === '0'", timeout=20000)  # the last key's answer is drawn
    assert not page.locator("#error").is_visible(), page.locator("#error").inner_text()
    after = _number(page, key)
    assert after != before, f"{key} did not change when {control} moved"
    assert _chart_data(page) != chart_before, "the chart did not change"
    assert f"{control}=" in page.url, "the address bar does not hold the input"
    _shot(page, pid)

    # the link reproduces the view
    url = page.url
    page.goto("about:blank")
    page.goto(url)
    _wait_render(page, 0)
    assert _number(page, key) == after
    assert page.errors == [], page.errors
    outside = [u for u in page.requests if not u.startswith((server, "about:", "data:"))]
    assert outside == [], f"requests left the machine (no CDN allowed): {outside}"


def test_index_lists_every_chapter(server, page):
    page.goto(server + "/")
    page.wait_for_selector("#pages li a")
    titles = page.locator("#pages li a").all_inner_texts()
    assert len(titles) == len(MOVES)
    assert "The context wall" in titles and "Reversible networks" in titles
    _shot(page, "index")
    assert page.errors == []


def test_bad_link_shows_one_line_error(server, page):
    """A hand-edited link with a bad value shows the library's one-line message, and the page still works."""
    page.goto(f"{server}/p/batch?batch=-5")
    page.wait_for_selector("#error:not([hidden])")
    assert page.locator("#error").inner_text().startswith("batch:")
    _shot(page, "batch-bad-link")


def test_api_reference_renders_offline(server, page):
    """/docs is rendered from /openapi.json by our own script: no CDN, no console errors."""
    page.goto(server + "/docs")
    page.wait_for_selector("section.op")
    heads = page.locator("section.op h3").all_inner_texts()
    assert any("GET /api/roofline" in h for h in heads) and any("GET /api/serve" in h for h in heads)
    assert all(u.startswith(server) for u in page.requests), page.requests
    assert page.errors == []


# --------------------------------------------------------------------------- issue 35 items 10–16


def _loaded(pg):
    pg.wait_for_function("Number(document.body.dataset.renders || 0) > 0 || "
                         "Number(document.body.dataset.failures || 0) > 0", timeout=20000)


def test_no_chart_button_sends_data_off_the_machine(server, page):
    """Item 10: Plotly's mode bar offered "Share chart…" (an upload to Plotly's cloud). Every chart's mode bar now
    holds only local actions (download PNG, zoom, pan, reset)."""
    for pid in ("batch", "serve"):
        page.goto(f"{server}/p/{pid}")
        _wait_render(page, 0)
        page.hover("#charts .chart")
        titles = page.evaluate("[...document.querySelectorAll('.modebar-btn')].map(b => b.getAttribute('data-title'))")
        assert "Download plot as a PNG" in titles
        bad = [t for t in titles if any(w in t.lower() for w in ("share", "cloud", "studio", "edit", "plotly"))]
        assert bad == [], bad
        assert page.evaluate("[...document.querySelectorAll('.chart')].every(d => d._context.showSendToCloud === false"
                             " && d._context.displaylogo === false && !d._context.showLink)")
        assert page.locator(".modebar a[href]").count() == 0


def test_an_error_clears_the_stale_results_and_names_its_input(server, page):
    """Item 11: moving the GPU slider of /p/serve to one GPU (which cannot hold DeepSeek-V3) used to leave the old
    numbers and charts under a banner blaming `concurrency`."""
    page.goto(f"{server}/p/serve")
    _wait_render(page, 0)
    assert page.locator(".number").count() > 3
    ctl = page.locator("#in-gpus")
    ctl.focus()
    page.keyboard.press("Home")  # 0: one domain
    page.keyboard.press("ArrowRight")  # 1 GPU
    page.wait_for_function("Number(document.body.dataset.failures || 0) > 0", timeout=20000)
    err = page.locator("#error")
    assert err.get_attribute("role") == "alert" and err.inner_text().startswith("gpus:")
    assert "concurrency" not in err.inner_text().split("(")[0]
    assert page.locator(".number").count() == 0 and page.locator(".derivation").count() == 0
    assert "stale" in page.locator("#results").get_attribute("class")
    assert ctl.get_attribute("aria-invalid") == "true"
    assert ctl.get_attribute("aria-valuetext") == "1 GPU" and "gpus=1" in page.url
    _shot(page, "serve-one-gpu")
    n = _renders(page)
    page.keyboard.press("End")  # 4,096 GPUs hold it: the results come back, the error goes
    _wait_render(page, n)
    assert not err.is_visible() and page.locator(".number").count() > 3
    assert "stale" not in (page.locator("#results").get_attribute("class") or "")


@pytest.mark.parametrize("query, field, hint", [
    ("weight_dtype=int8", "weight_dtype", "weights_dtype"),
    ("batch=abc", "batch", "abc"),
])
def test_a_bad_link_shows_its_error_instead_of_the_default(server, page, query, field, hint):
    """Item 12: an unknown parameter (a misspelt weights_dtype) or text in a number field used to give the
    default's answer silently."""
    page.goto(f"{server}/p/batch?{query}")
    _loaded(page)
    err = page.locator("#error")
    assert err.is_visible() and err.inner_text().startswith(f"{field}:") and hint in err.inner_text()
    assert page.locator(".number").count() == 0


def test_a_link_in_the_clis_units_sets_the_sliders(server, page):
    """'8K' in a link is 8,000 sequences (the CLI's reading), shown on the slider; not the default 64."""
    page.goto(f"{server}/p/batch?batch=8K")
    _wait_render(page, 0)
    page.wait_for_function("document.getElementById('in-batch').getAttribute('aria-valuetext') === '8,000 sequences'",
                           timeout=20000)
    assert not page.locator("#error").is_visible()


def test_sliders_announce_their_value_and_reach_round_numbers(server, page):
    """Item 16: aria-valuetext is the value with its unit ("64 sequences", not the slider position "6"); ISL 1000 is
    one key press from 1024; each chart has a text summary tied to it; the error box is an alert."""
    page.goto(f"{server}/p/batch")
    _wait_render(page, 0)
    assert page.locator("#in-batch").get_attribute("aria-valuetext") == "64 sequences"
    assert page.locator("#in-context").get_attribute("aria-valuetext") == "8,192 tokens"
    for fig in page.locator("#charts figure").all():
        chart, cap = fig.locator(".chart"), fig.locator("figcaption")
        assert chart.get_attribute("role") == "img" and chart.get_attribute("aria-label")
        assert chart.get_attribute("aria-describedby") == cap.get_attribute("id") and len(cap.inner_text()) > 40
    assert page.locator("#error").get_attribute("role") == "alert"
    page.goto(f"{server}/p/serve")
    _wait_render(page, 0)
    n = _renders(page)
    isl = page.locator("#in-isl")
    isl.focus()
    page.keyboard.press("ArrowLeft")
    _wait_render(page, n)
    assert isl.get_attribute("aria-valuetext") == "1,000 tokens" and "isl=1000" in page.url


def test_axes_read_in_units(server, page):
    """Item 14: byte axes in GB (not Plotly's '100B'), dollar axes with '$' on every tick, no bare '5, 2' ticks."""
    page.goto(f"{server}/p/pipeline")
    _wait_render(page, 0)
    ticks = page.evaluate("[...document.querySelectorAll('#chart-memory .ytick text')].map(t => t.textContent)")
    assert ticks and all(t.endswith("B") and t[-2] in " kMGT" for t in ticks if t != "0"), ticks
    page.goto(f"{server}/p/batch")
    _wait_render(page, 0)
    ticks = page.evaluate("[...document.querySelectorAll('#chart-cost .ytick text')].map(t => t.textContent)")
    assert ticks and all(t.startswith("$") for t in ticks), ticks
