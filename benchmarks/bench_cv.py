"""Benchmark (issue 33): `rackmath validate --cv`, before and after a change — wall, CPU, peak RSS, same figures.

    python benchmarks/bench_cv.py --before /tmp/base/src --after src [--scheme hardware] [--jobs 2] [--timeout 1500]

Runs ``rackmath validate --cv --scheme SCHEME --json --jobs N`` once per source tree (before first, then after), each
in a fresh process under ``/usr/bin/time -v`` (numpy pinned to one thread), and reports per tree the wall time, the
CPU time (user + system, the workers included) and the peak resident memory: of the largest process (the parent
or one forked worker: ``time -v``'s maximum RSS) and of all of them together (sampled from /proc every 0.5 s).
Then compares the two JSON outputs: every figure (predictions, errors, summaries, fitted parameters) must be
identical; the bookkeeping fields ``predictions_evaluated`` and ``jobs`` may differ. A tree is a directory holding
the ``rackmath`` package (e.g. ``git archive <commit> src | tar -x -C /tmp/base``). ``--before`` may be omitted to
time one tree; ``--keep DIR`` keeps the JSON outputs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BOOKKEEPING = ("predictions_evaluated", "jobs")


def run(src: str, scheme: str, jobs: int, timeout: int, out: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(Path(src).resolve()), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1")
    cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "rackmath", "validate", "--cv", "--scheme", scheme, "--json",
           "--jobs", str(jobs)]
    tree_peak = 0
    with open(out, "w") as fh, tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen(cmd, stdout=fh, stderr=err, text=True, env=env)
        t0 = time.monotonic()
        while p.poll() is None:
            tree_peak = max(tree_peak, tree_rss(p.pid))
            if time.monotonic() - t0 > timeout:
                p.kill()
                raise SystemExit(f"{src}: over {timeout} s")
            time.sleep(0.5)
        err.seek(0)
        stderr = err.read()
    if p.returncode:
        raise SystemExit(f"{src}: exit {p.returncode}\n{stderr[-2000:]}")

    def field(name):
        return re.search(rf"{re.escape(name)}: (.+)", stderr).group(1).strip()

    h, m, s = ([0, 0] + [float(x) for x in field("Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":")])[-3:]
    cpu = float(field("User time (seconds)")) + float(field("System time (seconds)"))
    return {"wall_s": h * 3600 + m * 60 + s, "cpu_s": cpu, "tree_rss_mb": tree_peak / 1024,
            "peak_rss_mb": int(field("Maximum resident set size (kbytes)")) / 1024}


def tree_rss(root: int) -> int:
    """Resident memory (kB) of ``root`` and every process below it, summed (read from /proc; 0 where unreadable)."""
    parent, rss = {}, {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            parent[int(d.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            rss[int(d.name)] = next((int(ln.split()[1]) for ln in (d / "status").read_text().splitlines()
                                     if ln.startswith("VmRSS:")), 0)
        except (OSError, ValueError, IndexError):
            continue
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo += [c for c, pp in parent.items() if pp == pid]
    return total


def diff(a, b, path="") -> list:
    """Paths where two JSON values differ (bookkeeping fields skipped), with the largest relative difference."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}/{k}: only in one" for k in set(a) ^ set(b)]
        for k in a.keys() & b.keys():
            if not (path == "" and k in BOOKKEEPING):
                out += diff(a[k], b[k], f"{path}/{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: length {len(a)} vs {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in diff(x, y, f"{path}[{i}]")]
    if a != b and not (a != a and b != b):  # NaN equals NaN here
        if isinstance(a, float) and isinstance(b, float):
            return [f"{path}: {a!r} vs {b!r} (rel {abs(a - b) / max(abs(a), abs(b), 1e-300):.1e})"]
        return [f"{path}: {a!r} vs {b!r}"]
    return []


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before")
    ap.add_argument("--after", required=True)
    ap.add_argument("--scheme", default="hardware")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=1500)
    ap.add_argument("--keep", help="directory for the JSON outputs (default: a temporary one)")
    a = ap.parse_args()
    d = Path(a.keep or tempfile.mkdtemp(prefix="bench_cv_"))
    d.mkdir(parents=True, exist_ok=True)
    res = {}
    for name in ("before", "after"):
        src = getattr(a, name)
        if src:
            res[name] = run(src, a.scheme, a.jobs, a.timeout, d / f"{name}.json")
            r = res[name]
            print(f"{name:6s} {src}: wall {r['wall_s']:7.1f} s  CPU {r['cpu_s']:7.1f} s  peak RSS "
                  f"{r['peak_rss_mb']:7.0f} MB (largest process), {r['tree_rss_mb']:7.0f} MB (all processes)",
                  flush=True)
    print(f"rackmath validate --cv --scheme {a.scheme} --json --jobs {a.jobs}; load average "
          f"{os.getloadavg()[0]:.1f}; JSON in {d}")
    if len(res) == 2:
        b, f = (json.loads((d / f"{n}.json").read_text()) for n in ("before", "after"))
        ds = diff(b, f)
        print("figures identical (bit for bit)" if not ds else f"{len(ds)} differences:\n  " + "\n  ".join(ds[:30]))
        print(f"speed-up: wall {res['before']['wall_s'] / res['after']['wall_s']:.1f}×, CPU "
              f"{res['before']['cpu_s'] / res['after']['cpu_s']:.1f}×; peak RSS "
              f"{res['before']['peak_rss_mb']:.0f} → {res['after']['peak_rss_mb']:.0f} MB (largest process), "
              f"{res['before']['tree_rss_mb']:.0f} → {res['after']['tree_rss_mb']:.0f} MB (all processes)")


if __name__ == "__main__":
    main()
