"""Fuzz the CLI with hostile input: ≥ 10⁴ invocations, each in a forked child with a memory limit and a timeout.

    PYTHONPATH=src python benchmarks/fuzz.py -n 10000 --workers 2
    PYTHONPATH=src python benchmarks/fuzz.py --acceptance          # issue 36: 3,000 CLI + 600 file + 1,000 web + limits
    PYTHONPATH=src python benchmarks/fuzz.py -n 200 --files 60 --web 100 --limits   # a short check (~5 min)

Phases (all counted in one table): ``-n`` hostile command lines; ``--files`` runs of the commands that read user
files, each given a malformed one (catalog TOML, HuggingFace config.json, --records, --trace:
``fuzzlib.file_invocation``); ``--web`` hostile GET requests to the FastAPI app in-process (TestClient in a forked,
memory-limited child: random /api/ routes and parameters, unknown parameters, traversal paths, Host headers); and
``--limits``, the documented maxima themselves (``sweep`` at bounds.MAX_GRID_POINTS as JSON and CSV, ``simulate``
at bounds.MAX_REQUESTS), which must succeed within the memory limit — their peak RSS is printed. Besides the outcome
classes below it counts JSON outputs holding NaN/Infinity ("non-finite JSON"), and reports the largest peak RSS of
any run (``wait4``'s ru_maxrss, the forked parent's pages included).

Every command and option of the app (enumerated from the click tree, tests/fuzzlib.py) gets plausible and
hostile values (negative, 0, NaN, ±inf, 1e308, 1e-320, 10⁴⁰⁰, unicode, malformed ranges), mutated catalog TOML
(``--catalog``) and HuggingFace configs, and output paths (existing files without --force, directories,
/dev/full, missing directories). Each run is a child forked from a warm parent (rackmath, numpy, matplotlib
imported) with RLIMIT_AS = parent's size + ``--mem`` and killed after ``--timeout`` seconds. Prints counts
per outcome class: ok, clean error, traceback, hang, OOM, overwritten; the target is 0 in the last four.
Failing command lines are written to ``--failures`` (JSON lines) for replay.

Known long-running computations are not hangs: a run whose argv holds a flag of ``fuzzlib.LONG_FLAGS``, and every
run of ``fuzzlib.LONG_COMMANDS``, gets ``fuzzlib.LONG_TIMEOUT`` seconds instead of ``--timeout`` (the larger of the
two); ``fuzzlib.FORCED_FLAGS`` are always given:

    LONG_FLAGS    = {("validate",): ("--cv", "--refit")}   # leave-one-group-out refits, a full refit
    LONG_COMMANDS = {("measure",)}                         # a benchmark of this machine (~30-60 s --quick, 2 cores)
    FORCED_FLAGS  = {("measure",): ("--quick",)}           # the full sweep took over 600 s on 2 cores
    LONG_TIMEOUT  = {("validate",): 600, ("measure",): 180}

They are still fuzzed (hostile values, paths, catalogs), only with that limit; ``--no-long`` leaves the
LONG_FLAGS out instead (a quicker smoke). The summary counts how many runs had the long limit.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

import fuzzlib  # noqa: E402


def _vm_bytes() -> int:
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


PEAK = {"rss": 0}  # the largest ru_maxrss (bytes) of any run of this process


def run_one(argv: list, tmp: Path, timeout: float, mem: int) -> tuple[int | None, str, str, bool, int | None]:
    """Fork, limit memory, run main(argv) with stdout/stderr to files; returns (code, out, err, timed_out, signal).
    The child's peak RSS goes to ``PEAK['last']`` (and the maximum to ``PEAK['rss']``)."""
    out_f, err_f = tmp / "_stdout", tmp / "_stderr"
    pid = os.fork()
    if pid == 0:  # child
        code = 1
        try:
            limit = _vm_bytes() + mem
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            fo = os.open(out_f, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            fe = os.open(err_f, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fo, 1)
            os.dup2(fe, 2)
            os.chdir(tmp)
            from rackmath.cli.main import main

            try:
                main(argv)
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # noqa: BLE001 - a traceback escaped main(): record it
            import traceback

            try:
                traceback.print_exc()
            except BaseException:  # noqa: BLE001
                pass
            code = 1
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except BaseException:  # noqa: BLE001
                pass
            os._exit(code if 0 <= code < 256 else 1)
    t0 = time.monotonic()
    timed_out = False
    rss = 0
    while True:
        wpid, status, usage = os.wait4(pid, os.WNOHANG)
        if wpid:
            rss = usage.ru_maxrss * 1024
            break
        if time.monotonic() - t0 > timeout:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            timed_out, status = True, None
            break
        time.sleep(0.003)
    PEAK["last"] = rss
    PEAK["rss"] = max(PEAK["rss"], rss)
    read = lambda p: p.read_text(errors="replace") if p.exists() else ""  # noqa: E731
    out, err = read(out_f), read(err_f)
    if timed_out:
        return None, out, err, True, None
    if os.WIFSIGNALED(status):
        return None, out, err, False, os.WTERMSIG(status)
    return os.WEXITSTATUS(status), out, err, False, None


def _count(inv, code, out, err, to, sig, limit, counts: Counter, fails) -> str:
    cls = fuzzlib.classify(code, err, inv.sentinels, to, sig)
    if cls == "ok" and any(w in out for w in (" nan", "nan×", "NaN")):
        counts["ok (nan in output)"] += 1
    if code == 0 and fuzzlib.nonfinite_json(out):
        counts["non-finite JSON"] += 1
        cls_fail = "non-finite JSON"
    else:
        cls_fail = None
    counts[cls] += 1
    bad = cls if cls not in ("ok", "clean") else cls_fail
    if bad and fails:
        fails.write(json.dumps({"class": bad, "argv": inv.argv, "note": inv.note, "code": code,
                                "timeout_s": limit, "stderr": err[-2000:]}) + "\n")
        fails.flush()
    return cls


def _warm() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401 - warm the fork parent
    import numpy  # noqa: F401


def worker(seed: int, n: int, timeout: float, mem: int, failures: str | None, q=None,
           long_running: bool = True, n_files: int = 0) -> Counter:
    """``n`` hostile command lines, then ``n_files`` runs with a malformed user file."""
    _warm()
    tree = fuzzlib.command_tree()
    counts: Counter = Counter()
    fails = open(failures + f".{seed}", "w") if failures else None
    for i in range(n + n_files):
        ch = fuzzlib.RandomChooser(f"{seed}-{i}" if i < n else f"file-{seed}-{i}")
        with tempfile.TemporaryDirectory(prefix="rmfuzz") as d:
            tmp = Path(d)
            inv = fuzzlib.invocation(ch, tree, tmp, long_running=long_running) if i < n else \
                fuzzlib.file_invocation(ch, tmp)
            limit = fuzzlib.timeout_for(inv, timeout)
            counts["long limit"] += fuzzlib.is_long(inv)
            counts["cli runs" if i < n else "file runs"] += 1
            code, out, err, to, sig = run_one(inv.argv, tmp, limit, mem)
            _count(inv, code, out, err, to, sig, limit, counts, fails)
    if fails:
        fails.close()
    counts["peak rss"] = PEAK["rss"]
    return counts


def web_worker(seed: int, n: int, mem: int, failures: str | None, timeout: float = 30.0) -> Counter:
    """``n`` hostile GET requests to the app, in this (forked, memory-limited) process: a 500 or a traceback in the
    body is a failure, as is NaN/Infinity in a JSON body."""
    import resource as _r

    limit = _vm_bytes() + mem
    _r.setrlimit(_r.RLIMIT_AS, (limit, limit))
    counts: Counter = Counter()
    try:
        from fastapi.testclient import TestClient

        from rackmath.web import create_app
        from rackmath.web.views import PAGES
    except ImportError as exc:  # the web extra is not installed
        counts["web skipped (" + str(exc)[:40] + ")"] += 1
        return counts
    app = create_app(timeout_s=timeout)
    client = TestClient(app, raise_server_exceptions=False)
    routes = []
    for r in app.routes:
        if getattr(r, "path", "").startswith("/api/") and "GET" in getattr(r, "methods", ()):
            routes.append((r.path, [p.name for p in r.dependant.query_params]))
    pages = list(PAGES) if not isinstance(PAGES, dict) else list(PAGES.keys())
    fails = open(failures + f".web{seed}", "w") if failures else None
    for i in range(n):
        ch = fuzzlib.RandomChooser(f"web-{seed}-{i}")
        url, params, headers = fuzzlib.web_request(ch, routes, [str(p) for p in pages])
        counts["web requests"] += 1
        try:
            r = client.get(url, params=params, headers=headers)
            status, body = r.status_code, r.text
        except MemoryError:
            status, body = -1, "MemoryError"
        except Exception as exc:  # noqa: BLE001 - a client-side failure is the app's fault here
            status, body = 500, f"{type(exc).__name__}: {exc}"
        if status == -1:
            cls = "oom"
        elif status >= 500 and status not in (503, 504) or "Traceback" in body:
            cls = "traceback"
        elif status == 200 and fuzzlib.nonfinite_json(body):
            cls = "non-finite JSON"
        else:
            cls = "web ok" if status == 200 else "web refused"
        counts[cls] += 1
        if cls in ("traceback", "oom", "non-finite JSON") and fails:
            fails.write(json.dumps({"class": cls, "url": url, "params": params, "headers": headers,
                                    "status": status, "body": body[-1000:]}) + "\n")
            fails.flush()
    if fails:
        fails.close()
    return counts


def limit_cases() -> list:
    """The documented maxima: each must run to completion inside the memory limit (issue 36)."""
    from rackmath.bounds import MAX_GRID_POINTS, MAX_REQUESTS

    side = int(round(MAX_GRID_POINTS ** 0.5))
    grid = ["sweep", "llama-3.1-8b", "-H", "h100", "-b", f"1:1e6:{side}", "-L", f"1:1e6:{side}"]
    return [grid + ["--json"], grid + ["--csv", "grid.csv"],
            ["simulate", "llama-3.1-8b", "-H", "h100", "--concurrency", "256", "--requests", str(MAX_REQUESTS),
             "--json"]]


def run_limits(mem: int, timeout: float) -> Counter:
    _warm()
    counts: Counter = Counter()
    for argv in limit_cases():
        with tempfile.TemporaryDirectory(prefix="rmfuzz") as d:
            t0 = time.time()
            code, out, err, to, sig = run_one(argv, Path(d), timeout, mem)
            ok = code == 0 and not to and sig is None
            counts["limit ok" if ok else "oom" if sig or "memory" in err else "limit failed"] += 1
            print(f"  limit: rackmath {' '.join(argv)}: exit {code}, {time.time() - t0:.0f} s, peak RSS "
                  f"{PEAK['last'] / 2**30:.2f} GiB" + ("" if ok else f" — {err.strip()[-200:]}"), flush=True)
    counts["peak rss"] = PEAK["rss"]
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=10_000, help="hostile command lines in all (default 10000)")
    ap.add_argument("--files", type=int, default=0, help="runs with a malformed user file (catalog, config.json, "
                                                         "--records, --trace)")
    ap.add_argument("--web", type=int, default=0, help="hostile requests to the web app (in-process)")
    ap.add_argument("--limits", action="store_true", help="run the documented maxima within the memory limit")
    ap.add_argument("--acceptance", action="store_true",
                    help="issue 36's acceptance run: -n 3000 --files 600 --web 1000 --limits (unless given)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per invocation before it counts as a hang")
    ap.add_argument("--mem", type=float, default=2.0, help="GiB of address space each run may add (RLIMIT_AS)")
    ap.add_argument("--failures", default=None, help="write failing runs to FILE.<worker> as JSON lines")
    ap.add_argument("--no-long", action="store_true",
                    help="leave out the flags of known long-running computations (fuzzlib.LONG_FLAGS)")
    argv = sys.argv[1:]
    a = ap.parse_args(argv)
    if a.acceptance:
        given = {x.split("=")[0] for x in argv}
        a.n = a.n if "-n" in given else 3000
        a.files = a.files if "--files" in given else 600
        a.web = a.web if "--web" in given else 1000
        a.limits = True
    from concurrent.futures import ProcessPoolExecutor

    import multiprocessing as mp

    t0 = time.time()
    split = lambda k: [k // a.workers + (1 if i < k % a.workers else 0) for i in range(a.workers)]  # noqa: E731
    per, per_files, per_web = split(a.n), split(a.files), split(a.web)
    total: Counter = Counter()
    mem = int(a.mem * 2**30)
    peak = 0
    with ProcessPoolExecutor(a.workers, mp_context=mp.get_context("fork")) as ex:
        futs = [ex.submit(worker, a.seed * 1000 + i, k, a.timeout, mem, a.failures, None, not a.no_long,
                          per_files[i]) for i, k in enumerate(per)]
        for f in futs:
            c = f.result()
            peak = max(peak, c.pop("peak rss", 0))
            total.update(c)
    if a.web:
        with ProcessPoolExecutor(a.workers, mp_context=mp.get_context("fork")) as ex:
            for f in [ex.submit(web_worker, a.seed * 1000 + i, k, mem, a.failures) for i, k in enumerate(per_web)]:
                try:
                    total.update(f.result())
                except Exception as exc:  # noqa: BLE001 - the web child died (out of memory): count it
                    total["oom"] += 1
                    print(f"  web worker failed: {type(exc).__name__}: {exc}")
    if a.limits:
        with ProcessPoolExecutor(1, mp_context=mp.get_context("fork")) as ex:
            c = ex.submit(run_limits, mem, max(a.timeout, 300.0)).result()
        peak = max(peak, c.pop("peak rss", 0))
        total.update(c)
    wall = time.time() - t0
    print(f"rackmath fuzz: {total.get('cli runs', 0)} hostile command lines, {total.get('file runs', 0)} malformed "
          f"files, {total.get('web requests', 0)} web requests, limits {'run' if a.limits else 'not run'}; "
          f"{a.workers} workers, seed {a.seed}, timeout {a.timeout:g} s, memory +{a.mem:g} GiB per run, {wall:.0f} s")
    for k in ("ok", "ok (nan in output)", "clean", "web ok", "web refused", "limit ok", "traceback", "hang", "oom",
              "overwritten", "non-finite JSON", "limit failed"):
        print(f"  {k:20s} {total.get(k, 0):7d}")
    for k in sorted(k for k in total if k.startswith("web skipped")):
        print(f"  {k}")
    print(f"  largest peak RSS of any run: {peak / 2**30:.2f} GiB (forked parent's pages included)")
    longs = ", ".join([f"{' '.join(c)} {'/'.join(f)}" for c, f in fuzzlib.LONG_FLAGS.items()]
                      + [" ".join(c) for c in sorted(fuzzlib.LONG_COMMANDS)])
    print(f"  ({total.get('long limit', 0)} runs were known long-running computations ({longs}) with their own "
          f"limits, {', '.join(' '.join(c) + f' {v} s' for c, v in fuzzlib.LONG_TIMEOUT.items())})" if not a.no_long
          else f"  (flags of long-running computations left out: "
               f"{', '.join(' '.join(c) + ' ' + '/'.join(f) for c, f in fuzzlib.LONG_FLAGS.items())})")
    bad_keys = ("traceback", "hang", "oom", "overwritten", "non-finite JSON", "limit failed")
    bad = sum(total.get(k, 0) for k in bad_keys)
    print("PASS: 0 tracebacks, 0 hangs, 0 out-of-memory (> 2 GiB), 0 overwritten, 0 non-finite JSON"
          + (", every limit met" if a.limits else "") if not bad else f"FAIL: {bad} bad runs")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
