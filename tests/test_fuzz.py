"""Fuzz slice (CI): hostile command lines over every command and option of the app, in-process.

The command tree is enumerated from the click app (tests/fuzzlib.py), so an option another module adds is
fuzzed too. Each invocation runs ``rackmath.cli.main.main`` inside typer's ``CliRunner`` isolation with a
wall-clock limit; the outcome must be ``ok`` (exit 0) or ``clean`` (exit 2, one ``error: …`` line): never a
traceback, a bug-report line, a hang, or a file overwritten without ``--force``. Derandomized so CI is
stable; ``benchmarks/fuzz.py`` runs ≥ 10⁴ invocations in forked children with a memory limit. Known long-running
computations (``fuzzlib.LONG_FLAGS``: ``validate --cv`` / ``--refit``) are left out here to keep the slice fast;
the benchmark runs them with their own time limit (``fuzzlib.LONG_TIMEOUT``). ``measure`` is always ``--quick``.
"""

from __future__ import annotations

import signal
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fuzzlib

LIMIT_S = 20  # per invocation: a hang, not a slow command


@pytest.fixture(autouse=True, scope="module")
def _in_a_scratch_directory(tmp_path_factory):
    """Fuzzed commands that succeed write their default outputs (validate.png, batch.png, …) into the working
    directory: keep them out of the checkout."""
    import os

    old = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("fuzz-cwd"))
    yield
    os.chdir(old)


class _Timeout(BaseException):
    """Raised by the alarm: a BaseException, so the CLI's funnel (which catches Exception) lets it through."""


def _alarm(signum, frame):
    raise _Timeout()


def run(argv: list) -> tuple[int | None, str, str, bool]:
    """main(argv) in-process under CliRunner's isolation; returns (code, stdout, stderr, timed_out)."""
    from typer.testing import CliRunner

    from rackmath.cli.main import main
    from rackmath.specs import catalog

    runner = CliRunner()
    code, timed_out = 0, False
    old = signal.signal(signal.SIGALRM, _alarm)
    with runner.isolation() as streams:  # (stdout, stderr[, combined]) depending on click's version
        out, err = streams[0], streams[1]
        signal.setitimer(signal.ITIMER_REAL, LIMIT_S, 0.5)  # re-fires: an alarm swallowed by a gc callback recurs
        try:
            main([str(a) for a in argv])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except _Timeout:
            code, timed_out = None, True
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
            catalog._user_dirs.clear()
            catalog.clear_caches()
        import sys

        sys.stdout.flush()
        sys.stderr.flush()
        stdout = out.getvalue().decode(errors="replace")
        stderr = err.getvalue().decode(errors="replace") if err is not None else ""
    return code, stdout, stderr, timed_out


TREE = fuzzlib.command_tree()


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    """Commands with default output names (plot validate → validate.png) write into a scratch directory."""
    monkeypatch.chdir(tmp_path)


def _check(inv: fuzzlib.Invocation):
    import os

    old = os.getcwd()
    if inv.cwd:
        os.chdir(inv.cwd)  # where a figure written to '-' would land (./-.png: a sentinel there)
    try:
        code, out, err, timed_out = run(inv.argv)
    finally:
        os.chdir(old)
    cls = fuzzlib.classify(code, err, inv.sentinels, timed_out)
    assert cls in ("ok", "clean"), f"{cls}: rackmath {' '.join(map(str, inv.argv))} [{inv.note}]\n{err[-3000:]}"
    assert not (code == 0 and fuzzlib.nonfinite_json(out)), f"NaN/Infinity in JSON: {' '.join(map(str, inv.argv))}"


def test_long_running_computations_get_their_own_time_limit(tmp_path):
    """validate --cv / --refit take minutes by design: the benchmark gives them LONG_TIMEOUT (600 s), other runs
    the default; the CI slice never generates them."""
    validate = next(c for c in TREE if c.path == ["validate"])
    assert {"--cv", "--refit"} <= {p.name for p in validate.params}  # the flags still exist in the app
    inv = fuzzlib.Invocation(["--catalog", "d", "validate", "--json", "--cv"], [], command=("validate",))
    assert fuzzlib.is_long(inv) and fuzzlib.timeout_for(inv, 60) == 600
    assert fuzzlib.timeout_for(fuzzlib.Invocation(["validate", "--json"], [], command=("validate",)), 60) == 60
    assert fuzzlib.timeout_for(fuzzlib.Invocation(["roofline", "--cv"], [], command=("roofline",)), 60) == 60
    seen_long = 0
    for i in range(200):  # the same seeds with and without long runs: only the long flags differ
        a = fuzzlib.invocation(fuzzlib.RandomChooser(f"v-{i}"), [validate], tmp_path)
        b = fuzzlib.invocation(fuzzlib.RandomChooser(f"v-{i}"), [validate], tmp_path, long_running=False)
        seen_long += fuzzlib.is_long(a)
        assert not fuzzlib.is_long(b)
        assert [x for x in a.argv if x not in ("--cv", "--refit")] == b.argv
    assert seen_long > 50  # each flag drawn at 25 %: about 44 % of validate runs are long
    # measure benchmarks the machine: always --quick (the full sweep took over 600 s on 2 cores), with the long limit
    measure = next(c for c in TREE if c.path == ["measure"])
    assert fuzzlib.timeout_for(fuzzlib.Invocation(["measure", "--quick"], [], command=("measure",)), 60) == 180
    for i in range(50):
        for long_running in (True, False):
            inv = fuzzlib.invocation(fuzzlib.RandomChooser(f"m-{i}"), [measure], tmp_path, long_running=long_running)
            assert inv.argv.count("--quick") == 1


def test_tree_is_enumerated_from_the_app():
    paths = {" ".join(c.path) for c in TREE}
    assert {"roofline", "serve", "layout", "model show", "plot batch", "racks moe-2racks"} <= paths
    # every option of every command is visible to the fuzzer
    serve = next(c for c in TREE if c.path == ["serve"])
    assert {"--concurrency", "--tp", "--usd-per-gpu-hour"} <= {p.name for p in serve.params}


@pytest.mark.parametrize("cmd", TREE, ids=[" ".join(c.path) for c in TREE])
def test_every_command_hostile(cmd):
    """Each command, twice: once mostly plausible, once mostly hostile (fixed seeds)."""
    for seed, hostile in ((1, 0.15), (2, 0.8)):
        ch = fuzzlib.RandomChooser(f"{' '.join(cmd.path)}-{seed}")
        with tempfile.TemporaryDirectory(prefix="rmfz") as d:
            inv = fuzzlib.invocation(ch, [cmd], Path(d), hostile=hostile, long_running=False)
            _check(inv)


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.data())
def test_fuzz_slice(data):
    ch = fuzzlib.HypothesisChooser(data)
    with tempfile.TemporaryDirectory(prefix="rmfz") as d:
        _check(fuzzlib.invocation(ch, TREE, Path(d), long_running=False))


@pytest.mark.parametrize("args", [
    ("roofline", "llama-3.1-8b", "-H", "h100", "-b", "1:2:log1000000000"),
    ("layout", "llama-3.1-8b", "-H", "h100", "--chips", "8", "--max-pp", "9223372036854775808"),
    ("racks", "moe-2racks", "-H", "gb200-nvl72", "--k", "1" + "0" * 400),
    ("racks", "bubble", "-P", "1" + "0" * 400, "-M", "4"),
    ("revnet", "--layers", "1" + "0" * 400, "--d-model", "64", "--heads", "4"),
    ("racks", "pipeline", "-H", "gb200-nvl72", "--stages", "1" + "0" * 400),
    ("scaling", "chinchilla", "-C", "5e-324"),
    ("scaling", "chinchilla", "-N", "0"),
    ("overtrain", "--traffic", "1e-320"),
    ("price", "gemini-3.1-pro", "--ratio", "inf"),
    ("price", "gemini-3.1-pro", "--ratio", "nan"),
    ("price", "gemini-3.1-pro", "--kv-bytes", "1e308"),
    ("racks", "moe-2racks", "-H", "gb200-nvl72", "--tokens-per-chip", "1e-320"),
    ("plot", "batch", "llama-3.1-8b", "-H", "h100", "-b", "1e-320", "-o", "x.png"),
    ("batching", "fast-mode", "frontier-100b", "-H", "gb200-nvl72", "--speedup", "100"),
    ("sweep", "llama-3.1-8b", "-H", "h100", "--csv", "/dev/full", "--force"),
])
def test_issue_cases_are_one_line_errors(args, tmp_path, monkeypatch):
    """The cases listed in issue 11, each once a traceback, a hang, a 7 GiB allocation or NaN on exit 0."""
    monkeypatch.chdir(tmp_path)
    code, out, err, timed_out = run(list(args))
    assert not timed_out
    assert code == 2, (out, err)
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err, err
    assert "nan" not in out.lower()


def test_bug_report_line_not_traceback(monkeypatch):
    """An unexpected exception (a bug) is one line with the version, exit 3."""
    import rackmath.cli.main as m

    def boom(*a, **k):
        raise KeyError("surprise")

    monkeypatch.setattr(m, "command", lambda argv=None: type("C", (), {"main": staticmethod(boom)})())
    code, out, err, _ = run(["hardware", "list"])
    assert code == 3
    assert err.count("\n") == 1 and "internal error in rackmath 0." in err and "KeyError" in err, err


def test_numpy_warnings_never_reach_the_user():
    code, out, err, _ = run(["roofline", "llama-3.1-8b", "-H", "h100", "-L", "0", "-b", "1,2"])
    assert code == 0 and err == "", err


# ----------------------------------------------------------------------------- issue 36

_M = "llama-3.1-8b"


@pytest.mark.parametrize("args", [
    # 1. '-' is stdout only for text: a figure given '-' is refused (it wrote ./-.png over the user's)
    ("roofline", _M, "-H", "h100", "--ops-plot", "-"),
    ("serve", _M, "-H", "h100", "--isl", "100", "--osl", "100", "-c", "8", "--ops-plot", "-", "--force"),
    ("plot", "batch", _M, "-H", "h100", "-o", "-"),
    # 2. the option typed
    ("train", _M, "--tokens", "1T", "--optimizer", "bogus"),
    ("serve", _M, "-H", "h100", "--isl", "100", "--osl", "100", "-c", "8", "--uneven-experts"),
    ("roofline", _M, "-H", "h100", "--gpus", "1:1e10:log8"),
    ("racks", "moe-2racks", "-H", "gb200-nvl72", "--tokens-per-gpu", "x"),
    # 5. the limits the machine can meet
    ("simulate", _M, "-H", "h100", "--concurrency", "8", "--requests", "2e7"),
])
def test_issue36_cases(args, tmp_path):
    """Each one an overwrite, a misattributed error or an unmeetable limit before issue 36: now one line naming
    the option typed, exit 2, and the './-*' files untouched."""
    inv = fuzzlib.Invocation(list(args), [], "issue 36", cwd=str(tmp_path))
    for name in fuzzlib.DASH_FILES:
        (tmp_path / name).write_text(fuzzlib.SENTINEL)
        inv.sentinels.append(str(tmp_path / name))
    import os

    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        code, out, err, timed_out = run(inv.argv)
    finally:
        os.chdir(old)
    assert fuzzlib.classify(code, err, inv.sentinels, timed_out) == "clean", err
    typed = {"--ops-plot": "ops_plot", "-o": "output", "--optimizer": "optimizer", "--uneven-experts": "uneven_experts",
             "--gpus": "gpus", "--tokens-per-gpu": "tokens_per_gpu", "--requests": "requests"}
    field = next(v for k, v in typed.items() if k in args)
    assert err.startswith(f"error: {field}: "), err


def test_issue36_json_has_no_nonfinite_numbers():
    """3. JSON holds no NaN/Infinity and no negative 'never': cache's break-even hold, scaleup's max params."""
    for args in (("cache", "--tier", "hbm=1e15,1e15,1e-9", "--json"),
                 ("racks", "scaleup", "--batch", "1000", "--kv-per-seq", "1GB", "--json")):
        code, out, err, _ = run(list(args))
        assert code == 0 and not fuzzlib.nonfinite_json(out), err
        d = __import__("json").loads(out)
        vals = [r["hold_s"] for r in d.get("break_even", [])] + list(d.get("max_params", []))
        assert vals and all(v is None or v >= 0 for v in vals), vals
    assert fuzzlib.nonfinite_json('{"a": [1, NaN]}') and not fuzzlib.nonfinite_json('{"a": [1, null]}')


@pytest.mark.parametrize("seed", range(12))
def test_malformed_files(seed, tmp_path):
    """4. A malformed catalog, config.json, --records or --trace file: exit 0 (the bad entry skipped, with a warning
    naming it) or one error line naming the file — never a traceback."""
    _check(fuzzlib.file_invocation(fuzzlib.RandomChooser(f"file-{seed}"), tmp_path))


def test_web_slice():
    """Hostile GETs to every /api/ route (as benchmarks/fuzz.py --web): never a 500, never NaN in JSON."""
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from rackmath.web import create_app
    from rackmath.web.views import PAGES

    app = create_app(timeout_s=20)
    client = TestClient(app, raise_server_exceptions=False)
    routes = [(r.path, [p.name for p in r.dependant.query_params]) for r in app.routes
              if getattr(r, "path", "").startswith("/api/") and "GET" in getattr(r, "methods", ())]
    assert len(routes) > 10
    for i in range(40):
        url, params, headers = fuzzlib.web_request(fuzzlib.RandomChooser(f"web-{i}"), routes, [str(p) for p in PAGES])
        r = client.get(url, params=params, headers=headers)
        assert r.status_code < 500 or r.status_code in (503, 504), (url, params, r.status_code, r.text[-500:])
        assert "Traceback" not in r.text
        assert not (r.status_code == 200 and fuzzlib.nonfinite_json(r.text)), (url, params)
