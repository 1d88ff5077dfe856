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
        lat: list[float] = []
        errors: list[str] = []
        lock = threading.Lock()

        def client(part: list[str]):
            conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=30)
            mine, errs = [], []
            for u in part:
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
                    conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=30)
                mine.append(time.perf_counter() - t0)
            with lock:
                lat.extend(mine)
                errors.extend(errs)

        for u in todo[:20]:  # warm the catalogs (not counted)
            c = http.client.HTTPConnection("127.0.0.1", args.port)
            c.request("GET", u)
            c.getresponse().read()
        threads = [threading.Thread(target=client, args=(todo[i::args.clients],)) for i in range(args.clients)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
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
