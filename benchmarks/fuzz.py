"""Fuzz the CLI with hostile input: ≥ 10⁴ invocations, each in a forked child with a memory limit and a timeout.

    PYTHONPATH=src python benchmarks/fuzz.py -n 10000 --workers 2

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


def run_one(argv: list, tmp: Path, timeout: float, mem: int) -> tuple[int | None, str, str, bool, int | None]:
    """Fork, limit memory, run main(argv) with stdout/stderr to files; returns (code, out, err, timed_out, signal)."""
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
    while True:
        wpid, status = os.waitpid(pid, os.WNOHANG)
        if wpid:
            break
        if time.monotonic() - t0 > timeout:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            timed_out, status = True, None
            break
        time.sleep(0.003)
    read = lambda p: p.read_text(errors="replace") if p.exists() else ""  # noqa: E731
    out, err = read(out_f), read(err_f)
    if timed_out:
        return None, out, err, True, None
    if os.WIFSIGNALED(status):
        return None, out, err, False, os.WTERMSIG(status)
    return os.WEXITSTATUS(status), out, err, False, None


def worker(seed: int, n: int, timeout: float, mem: int, failures: str | None, q=None,
           long_running: bool = True) -> Counter:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401 - warm the fork parent
    import numpy  # noqa: F401

    tree = fuzzlib.command_tree()
    counts: Counter = Counter()
    fails = open(failures + f".{seed}", "w") if failures else None
    for i in range(n):
        ch = fuzzlib.RandomChooser(f"{seed}-{i}")
        with tempfile.TemporaryDirectory(prefix="rmfuzz") as d:
            tmp = Path(d)
            inv = fuzzlib.invocation(ch, tree, tmp, long_running=long_running)
            limit = fuzzlib.timeout_for(inv, timeout)
            counts["long limit"] += fuzzlib.is_long(inv)
            code, out, err, to, sig = run_one(inv.argv, tmp, limit, mem)
            cls = fuzzlib.classify(code, err, inv.sentinels, to, sig)
            if cls == "ok" and any(w in out for w in (" nan", "nan×", "NaN")):
                counts["ok (nan in output)"] += 1
            counts[cls] += 1
            if cls not in ("ok", "clean") and fails:
                fails.write(json.dumps({"class": cls, "argv": inv.argv, "note": inv.note, "code": code,
                                        "timeout_s": limit, "stderr": err[-2000:]}) + "\n")
                fails.flush()
    if fails:
        fails.close()
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=10_000, help="invocations in all (default 10000)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per invocation before it counts as a hang")
    ap.add_argument("--mem", type=float, default=2.0, help="GiB of address space each run may add (RLIMIT_AS)")
    ap.add_argument("--failures", default=None, help="write failing runs to FILE.<worker> as JSON lines")
    ap.add_argument("--no-long", action="store_true",
                    help="leave out the flags of known long-running computations (fuzzlib.LONG_FLAGS)")
    a = ap.parse_args()
    from concurrent.futures import ProcessPoolExecutor

    t0 = time.time()
    per = [a.n // a.workers + (1 if i < a.n % a.workers else 0) for i in range(a.workers)]
    total: Counter = Counter()
    mem = int(a.mem * 2**30)
    if a.workers == 1:
        total = worker(a.seed * 1000, per[0], a.timeout, mem, a.failures, long_running=not a.no_long)
    else:
        import multiprocessing as mp

        with ProcessPoolExecutor(a.workers, mp_context=mp.get_context("fork")) as ex:
            futs = [ex.submit(worker, a.seed * 1000 + i, k, a.timeout, mem, a.failures, None, not a.no_long)
                    for i, k in enumerate(per)]
            for f in futs:
                total.update(f.result())
    wall = time.time() - t0
    print(f"rackmath CLI fuzz: {a.n} invocations, {a.workers} workers, seed {a.seed}, timeout {a.timeout:g} s, "
          f"memory +{a.mem:g} GiB per run, {wall:.0f} s")
    for k in ("ok", "ok (nan in output)", "clean", "traceback", "hang", "oom", "overwritten"):
        print(f"  {k:20s} {total.get(k, 0):7d}")
    longs = ", ".join([f"{' '.join(c)} {'/'.join(f)}" for c, f in fuzzlib.LONG_FLAGS.items()]
                      + [" ".join(c) for c in sorted(fuzzlib.LONG_COMMANDS)])
    print(f"  ({total.get('long limit', 0)} runs were known long-running computations ({longs}) with their own "
          f"limits, {', '.join(' '.join(c) + f' {v} s' for c, v in fuzzlib.LONG_TIMEOUT.items())})" if not a.no_long
          else f"  (flags of long-running computations left out: "
               f"{', '.join(' '.join(c) + ' ' + '/'.join(f) for c, f in fuzzlib.LONG_FLAGS.items())})")
    bad = sum(total.get(k, 0) for k in ("traceback", "hang", "oom", "overwritten"))
    print("PASS: 0 tracebacks, 0 hangs, 0 out-of-memory, 0 overwritten" if not bad else f"FAIL: {bad} bad runs")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
