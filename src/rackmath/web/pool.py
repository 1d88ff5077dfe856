"""Worker processes for the slow requests (layout searches, the planner, validation).

A slow request in a thread of the server would hold Python's interpreter lock and make every cheap request wait;
in a worker process it only uses a CPU (at a lower scheduling priority than the server). At most ``size`` run at
once; a request waits for a free worker within its time limit, and a worker still computing at the limit is killed
(its work stops) and replaced by a fresh one on the next request.

The protocol is a pipe of length-prefixed pickles between this process and a child it started itself
(``python -c 'from rackmath.web.pool import worker_main; worker_main()'``): nothing else can write to it.
"""

from __future__ import annotations

import atexit
import logging
import os
import pickle
import struct
import subprocess
import sys
import threading
import weakref
from pathlib import Path

log = logging.getLogger("rackmath.web")
_HEADER = struct.Struct(">I")


class WorkerDied(RuntimeError):
    """The worker process ended without an answer (killed at the time limit, or out of memory)."""


def _send(f, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    f.write(_HEADER.pack(len(data)) + data)
    f.flush()


def _recv(f):
    head = f.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise EOFError
    (n,) = _HEADER.unpack(head)
    data = f.read(n)
    if len(data) < n:
        raise EOFError
    return pickle.loads(data)


def worker_main() -> None:  # pragma: no cover - runs in the child process (exercised by the web tests)
    """The child: read (name, kwargs), answer ("ok", json bytes) | ("error", message) | ("bug", text); exit on EOF."""
    out, inp = sys.stdout.buffer, sys.stdin.buffer
    sys.stdout = sys.stderr  # nothing the library prints may corrupt the pipe
    try:
        os.nice(15)  # the server (cheap requests) goes first; slow work takes what CPU is left
    except (AttributeError, OSError):
        pass
    from ..errors import RackmathError
    from . import work

    while True:
        try:
            name, kwargs = _recv(inp)
        except EOFError:
            return
        try:
            answer = ("ok", work.call(name, kwargs))
        except RackmathError as e:
            answer = ("error", str(e))
        except MemoryError:
            answer = ("error", "request: needs more memory than this machine has (accepted: smaller inputs)")
        except Exception as e:  # noqa: BLE001 - a bug of ours: one line to the client, the traceback to the log
            import traceback

            traceback.print_exc()
            answer = ("bug", type(e).__name__)
        _send(out, answer)


class Worker:
    def __init__(self):
        import rackmath

        src = str(Path(rackmath.__file__).resolve().parents[1])
        env = dict(os.environ, PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.proc = subprocess.Popen([sys.executable, "-c", "from rackmath.web.pool import worker_main; "
                                                            "worker_main()"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def call(self, name: str, kwargs: dict):
        """Blocking: one request to the child and its answer (runs in a thread of the server)."""
        try:
            _send(self.proc.stdin, (name, kwargs))
            return _recv(self.proc.stdout)
        except (EOFError, OSError, pickle.UnpicklingError):
            raise WorkerDied(f"worker exited with status {self.proc.poll()}") from None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:  # pragma: no cover
                pass


class Pool:
    """At most ``size`` worker processes, started when first needed; see the module docstring."""

    def __init__(self, size: int):
        self.size = size
        self.idle: list[Worker] = []
        self.busy: set[Worker] = set()
        self._lock = threading.Lock()
        self._limiter = None
        self._threads = None
        weakref.finalize(self, Pool._close_all, self.idle, self.busy)
        atexit.register(Pool._close_all, self.idle, self.busy)

    @staticmethod
    def _close_all(idle, busy) -> None:
        for w in list(idle) + list(busy):
            w.kill()
        idle.clear()
        busy.clear()

    def close(self) -> None:
        Pool._close_all(self.idle, self.busy)

    def _take(self) -> Worker:
        with self._lock:
            while self.idle:
                w = self.idle.pop()
                if w.alive():
                    self.busy.add(w)
                    return w
                w.kill()
        w = Worker()
        with self._lock:
            self.busy.add(w)
        return w

    def prestart(self) -> None:
        """Start the workers and load the library and catalogs in each (the server calls this in a thread at start-up,
        so the first slow request does not also pay for the imports)."""
        for _ in range(self.size):
            w = Worker()
            try:
                w.call("models", {})
            except WorkerDied:
                w.kill()
                continue
            self._give_back(w, keep=True)

    def _give_back(self, w: Worker, keep: bool) -> None:
        with self._lock:
            self.busy.discard(w)
            if keep and w.alive() and len(self.idle) < self.size:
                self.idle.append(w)
                return
        w.kill()

    async def run(self, name: str, kwargs: dict, state: dict):
        """Run ``work.FUNCS[name](**kwargs)`` in a worker; ``state['phase']`` says whether it is waiting for a
        worker or computing (the caller's time-out message names which). Cancelling kills the worker."""
        import anyio

        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.size)
            self._threads = anyio.CapacityLimiter(2 * self.size)
        state["phase"] = "waiting"
        async with self._limiter:
            state["phase"] = "computing"
            w = await anyio.to_thread.run_sync(self._take, limiter=self._threads)
            ok = False
            try:
                answer = await anyio.to_thread.run_sync(w.call, name, kwargs, limiter=self._threads,
                                                        abandon_on_cancel=True)
                ok = True
                return answer
            finally:
                self._give_back(w, keep=ok)
