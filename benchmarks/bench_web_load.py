"""Cheap requests under load from slow ones (issue 35 item 13): /api/roofline latency while slow serves run.

    python benchmarks/bench_web_load.py [--requests 2000] [--clients 8] [--slow 2] [--port 8766] [--max-seconds 300]
                                        [--src PATH]

Starts `python -m rackmath web --port PORT` (one uvicorn process on 127.0.0.1, its default two worker processes for
slow work) as a child, waits until it answers, then runs together:

* ``--slow`` clients, each sending one slow request after another (serve on a million GPUs: its layout search takes
  seconds) until the cheap clients are done;
* ``--clients`` cheap clients, each with its own keep-alive connection, sending ``--requests`` /api/roofline GETs in
  total (varied batch and context so nothing is cached).

Reports the cheap requests' p50/p90/p99/max latency as the client sees it, their errors (any status but 200), and
how many slow requests finished and how (200, or the one-line time-out). Loopback only; bounded: at most 10⁵ cheap
requests and ``--max-seconds`` of wall time (the slow clients stop then too). Target: p99 ≤ 50 ms.
Exit status 1 when a cheap request failed or the p99 missed the target.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_web import run_clients, urls, wait_up, warm  # noqa: E402

SLOW = ("/api/serve?model=deepseek-v3&hardware=gb200-nvl72&isl=1K&osl=1K&gpus=1000000", "")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--slow", type=int, default=2, help="clients sending slow serve requests meanwhile")
    ap.add_argument("--port", type=int, default=8766)
    ap.add_argument("--max-seconds", type=float, default=300.0)
    ap.add_argument("--target-ms", type=float, default=50.0)
    ap.add_argument("--src", default=str(ROOT / "src"), help="the rackmath source to serve (another checkout's src/ "
                                                             "to compare)")
    args = ap.parse_args()
    n = max(1, min(args.requests, 100_000))
    env = dict(os.environ, PYTHONPATH=args.src + os.pathsep + os.environ.get("PYTHONPATH", ""))
    srv = subprocess.Popen([sys.executable, "-m", "rackmath", "web", "--port", str(args.port)], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + args.max_seconds
    stop = threading.Event()
    lat: list[float] = []
    errors: list[str] = []
    wall = 1.0
    slow: list[tuple[float, int, str]] = []
    lock = threading.Lock()
    try:
        wait_up(args.port)
        todo = urls(n, "/api/roofline")

        def slow_client(i: int):
            conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=60)
            k = 0
            while not stop.is_set() and time.time() < deadline:
                u = SLOW[0] + f"&concurrency={1 + 7 * i + k % 5}"  # vary it: nothing is cached
                k += 1
                t0 = time.perf_counter()
                try:
                    conn.request("GET", u)
                    r = conn.getresponse()
                    body = r.read()
                    what = "ok" if r.status == 200 else json.loads(body).get("error", "")[:100]
                    status = r.status
                except (OSError, http.client.HTTPException) as e:
                    status, what = 0, type(e).__name__
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=60)
                with lock:
                    slow.append((time.perf_counter() - t0, status, what))

        warm(args.port, todo)
        slows = [threading.Thread(target=slow_client, args=(i,)) for i in range(args.slow)]
        for t in slows:
            t.start()
        time.sleep(1.0)  # the slow requests are running before the first cheap one
        lat, errors, wall = run_clients(args.port, todo, args.clients, deadline)
        stop.set()
        for t in slows:
            t.join(70)
    finally:
        stop.set()
        srv.terminate()
        srv.wait(10)
    lat.sort()

    def pct(q):
        return lat[min(len(lat) - 1, int(q * len(lat)))] * 1e3 if lat else float("nan")

    print(f"/api/roofline: {len(lat)} requests from {args.clients} clients while {args.slow} clients sent slow serve "
          f"requests (gpus=1000000); loopback, one uvicorn process, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f} at the end")
    print(f"errors: {len(errors)}")
    for e in errors[:5]:
        print("  ", e)
    print(f"latency ms: p50 {pct(0.50):.1f}  p90 {pct(0.90):.1f}  p99 {pct(0.99):.1f}  max {pct(1.0):.1f}")
    print(f"throughput: {len(lat) / wall:.0f} requests/s over {wall:.1f} s")
    done = [s for s in slow if s[1] == 200]
    print(f"slow requests: {len(slow)} finished, {len(done)} with 200"
          + (f" (mean {sum(s[0] for s in done) / len(done):.2f} s)" if done else "")
          + "".join([f"; {s[1]}: {s[2]}" for s in slow if s[1] != 200][:3]))
    ok = not errors and pct(0.99) <= args.target_ms
    print(f"target p99 ≤ {args.target_ms:g} ms: {'met' if ok else 'NOT met'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
