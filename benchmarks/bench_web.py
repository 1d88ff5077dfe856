"""Loopback load test of `rackmath web`: N requests to /api/roofline, errors and latency percentiles.

    python benchmarks/bench_web.py [--requests 10000] [--clients 4] [--port 8765] [--path /api/roofline]

Starts `python -m rackmath web --port PORT` (uvicorn, one process, 127.0.0.1) as a child process, waits until it
answers, then ``--clients`` threads, each with its own keep-alive HTTP connection, send ``--requests`` GETs in
total (varied batch and context so nothing is cached), and the server is stopped. Bounded: at most 10⁵ requests.
Reports errors (any status other than 200, or a connection failure), p50/p90/p99/max latency per request as the
client sees it, and requests per second. Target (issue 13): 0 errors, p99 < 50 ms on /api/roofline.
"""

from __future__ import annotations

import argparse
import http.client
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def wait_up(port: int, timeout: float = 30.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/api/pages")
            if c.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"server on port {port} did not answer within {timeout:g} s")


def urls(n: int, path: str) -> list[str]:
    models = ["deepseek-v3", "llama-3.1-70b", "gpt-oss-120b", "qwen3-235b-a22b"]
    hws = ["gb200-nvl72", "hgx-h100", "tpu-v5e", "hgx-b200"]
    out = []
    for i in range(n):
        if path == "/api/roofline":
            out.append(f"{path}?model={models[i % 4]}&hardware={hws[(i // 4) % 4]}&batch={1 + i % 4096}"
                       f"&context={1024 + 37 * i % 200000}")
        else:
            out.append(path)
    return out


def send_all(port: int, part: list[str], deadline: float | None = None) -> tuple[list[float], list[str]]:
    """GET each URL in turn on one keep-alive connection: (latency of each in s, an error line per failure; any
    status but 200 is one). Stops at ``deadline`` (time.time()), reporting the URLs not sent."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    lat, errs = [], []
    for u in part:
        if deadline is not None and time.time() > deadline:
            errs.append("not sent: the time limit was reached")
            break
        t0 = time.perf_counter()
        try:
            conn.request("GET", u)
            r = conn.getresponse()
            body = r.read()
            if r.status != 200:
                errs.append(f"{r.status} {u}: {body[:120]!r}")
        except (OSError, http.client.HTTPException) as e:
            errs.append(f"{type(e).__name__} {u}")
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        lat.append(time.perf_counter() - t0)
    return lat, errs


def warm(port: int, todo: list[str]) -> None:
    """Load the catalogs with a few requests first (not counted)."""
    for u in todo[:20]:
        c = http.client.HTTPConnection("127.0.0.1", port)
        c.request("GET", u)
        c.getresponse().read()


def run_clients(port: int, todo: list[str], clients: int, deadline: float | None = None):
    """``clients`` threads, each with its own connection, share ``todo``: (latencies, errors, wall seconds)."""
    lat: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()

    def client(part: list[str]):
        mine, errs = send_all(port, part, deadline)
        with lock:
            lat.extend(mine)
            errors.extend(errs)

    threads = [threading.Thread(target=client, args=(todo[i::clients],)) for i in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return lat, errors, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--path", default="/api/roofline")
    args = ap.parse_args()
    n = max(1, min(args.requests, 100_000))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    srv = subprocess.Popen([sys.executable, "-m", "rackmath", "web", "--port", str(args.port)], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_up(args.port)
        todo = urls(n, args.path)
        warm(args.port, todo)
        lat, errors, wall = run_clients(args.port, todo, args.clients)
    finally:
        srv.terminate()
        srv.wait(10)
    lat.sort()

    def pct(q):
        return lat[min(len(lat) - 1, int(q * len(lat)))] * 1e3

    print(f"{args.path}: {len(lat)} requests, {args.clients} clients, loopback, one uvicorn process")
    print(f"errors: {len(errors)}")
    for e in errors[:5]:
        print("  ", e)
    print(f"latency ms: p50 {pct(0.50):.1f}  p90 {pct(0.90):.1f}  p99 {pct(0.99):.1f}  max {lat[-1] * 1e3:.1f}")
    print(f"throughput: {len(lat) / wall:.0f} requests/s over {wall:.1f} s")
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
