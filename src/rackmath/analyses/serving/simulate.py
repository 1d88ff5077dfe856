"""Discrete-event simulation of one deployment under an arrival process (issue 12).

The steady-state ``serve`` model answers "how fast at C sequences in flight"; real traffic
arrives at random, queues, bursts and preempts. This module replays requests through the
scheduler that vLLM, SGLang and TensorRT-LLM share, one replica at a time:

* **Continuous batching** with at most ``max_batch`` sequences running per scheduler
  (``--max-num-seqs`` / ``--max-running-requests`` / ``max_batch_size``; a replica with attention-DP
  over T GPUs has T schedulers, so T·max_batch sequences and T·budget tokens per step).
* **Chunked prefill**: each scheduler iteration has a token budget (``--max-num-batched-tokens``
  / ``--chunked-prefill-size`` / ``max_num_tokens``); decoding sequences take one token each,
  waiting prompts fill the rest in arrival order.
* **KV capacity**: a request is admitted when its prompt's KV fits beside the running ones;
  when decode growth overflows the cache the most recently admitted sequence is preempted
  and recomputed later (vLLM's recompute preemption).
* **Disaggregated P/D**: a prefill pool (prompts in passes of the budget) hands the KV over the
  NICs to a decode pool (no prefill there).
* **The lecture's train schedule** (00:20, "a train departs every ~20 ms whether or not you're
  on it"): ``cadence`` makes steps leave on a fixed clock; a request waits for the next train.

Step times come from :mod:`rackmath.analyses.serving.step_table` (the serving step model tabulated
once over batch and context). The event loop does not walk token by token: all running
sequences advance one step together, so between two events (an arrival that can be admitted,
a completion, a prefill chunk, the cache filling up) the batch is constant and k steps are
taken at once, costing k · t(b, L̄ + A(k − 1)/2) (the context grows by A tokens a step).
Each request costs a few events, each a handful of Python operations and a heap push/pop,
which is what makes 10⁶ requests take seconds.

Queueing identities the tests check: M/D/1 waiting time at low load (Pollaczek–Khinchine,
W = ρ·D / (2 (1 − ρ))), Little's law (mean running sequences = throughput × time in service).
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from ...results import ResultMixin

from ...bounds import MAX_REQUESTS  # requests one call simulates (bounded memory: ~2 GB at the maximum)
from ...engine.roofline import usd_per_mtok
from ...errors import InputError
from ...units import counted

#: Defaults of the generic stack when no ``framework`` is named: vLLM's ``max_num_seqs`` (256) and the
#: 8,192-token step budget (TensorRT-LLM ``max_num_tokens``, SGLang ``chunked_prefill_size`` on large GPUs).
DEFAULT_MAX_BATCH = 256
DEFAULT_BUDGET = 8192



# --------------------------------------------------------------------------------------
# Workload: request lengths and arrival processes
# --------------------------------------------------------------------------------------

_LEN_ACCEPTED = ("a number of tokens (1000), a uniform range LO:HI (500:1500), 'exp:MEAN', "
                 "or 'lognormal:MEDIAN:SIGMA'")


def parse_lengths(text, field: str) -> tuple:
    """'1000' → ('fixed', 1000); '500:1500' → ('uniform', 500, 1500); 'exp:800'; 'lognormal:1000:0.6'."""
    from ... import units

    if isinstance(text, (int, float, np.integer, np.floating)):
        v = float(text)
        if not math.isfinite(v) or v < 1 or v > 1e7:
            raise InputError(field, f"{v:g} tokens", _LEN_ACCEPTED + " from 1 to 10⁷")
        return ("fixed", float(round(v)))
    s = str(text).strip().lower()
    parts = s.split(":")
    try:
        if len(parts) == 1:
            return parse_lengths(units.parse_count(parts[0], field), field)
        if parts[0] in ("exp", "exponential") and len(parts) == 2:
            spec = ("exp", units.parse_count(parts[1], field))
        elif parts[0] in ("lognormal", "lognorm") and len(parts) == 3:
            spec = ("lognormal", units.parse_count(parts[1], field), float(parts[2]))
            if not 0 <= spec[2] <= 5:
                raise InputError(field, f"sigma {spec[2]:g}", "a log-space sigma from 0 to 5")
        elif len(parts) == 2:
            lo, hi = units.parse_count(parts[0], field), units.parse_count(parts[1], field)
            if not 1 <= lo <= hi:
                raise InputError(field, f"range {text!r} is empty or below 1 token", _LEN_ACCEPTED)
            spec = ("uniform", float(round(lo)), float(round(hi)))
        else:
            raise ValueError
    except InputError:
        raise
    except ValueError:
        raise InputError(field, f"cannot read {text!r}", _LEN_ACCEPTED) from None
    if any(not (1 <= x <= 1e7) for x in spec[1:2]):
        raise InputError(field, f"{text!r} is out of range", _LEN_ACCEPTED + " from 1 to 10⁷ tokens")
    return spec


def sample_lengths(spec: tuple, n: int, rng) -> np.ndarray:
    """``n`` lengths (whole tokens ≥ 1) drawn from a :func:`parse_lengths` spec."""
    kind = spec[0]
    if kind == "fixed":
        x = np.full(n, spec[1])
    elif kind == "uniform":
        x = rng.integers(int(spec[1]), int(spec[2]) + 1, size=n).astype(float)
    elif kind == "exp":
        x = rng.exponential(spec[1], size=n)
    else:
        x = spec[1] * np.exp(spec[2] * rng.standard_normal(n))
    return np.clip(np.round(x), 1, 1e7)


def mean_length(spec: tuple) -> float:
    """Mean of a length spec (tokens)."""
    kind = spec[0]
    if kind == "fixed":
        return spec[1]
    if kind == "uniform":
        return (spec[1] + spec[2]) / 2.0
    if kind == "exp":
        return spec[1]
    return spec[1] * math.exp(spec[2] ** 2 / 2.0)


def max_length(spec: tuple) -> float:
    """A length that almost every request stays below (the 99.9th percentile for unbounded specs)."""
    kind = spec[0]
    if kind == "fixed":
        return spec[1]
    if kind == "uniform":
        return spec[2]
    if kind == "exp":
        return spec[1] * 6.9
    return spec[1] * math.exp(3.1 * spec[2])


def poisson_arrivals(rate: float, n: int, rng) -> np.ndarray:
    """Arrival times of a Poisson process: cumulative sums of exponential gaps of mean 1/λ."""
    return np.cumsum(rng.exponential(1.0 / rate, size=n))


def gamma_arrivals(rate: float, n: int, rng, cv: float) -> np.ndarray:
    """Bursty arrivals: gamma gaps of mean 1/λ and coefficient of variation ``cv`` (shape 1/cv²; cv = 1 is Poisson)."""
    k = 1.0 / (cv * cv)
    return np.cumsum(rng.gamma(k, 1.0 / (rate * k), size=n))


_TRACE_FIELDS = {
    "arrival_s": ("arrival_s", "arrival", "timestamp", "time", "t", "arrival_time"),
    "isl": ("isl", "input_tokens", "input_length", "prompt_tokens", "input_len"),
    "osl": ("osl", "output_tokens", "output_length", "completion_tokens", "output_len"),
}


def parse_trace(text: str, name: str = "trace") -> dict:
    """A request trace (CSV with a header, or JSON lines): arrival time (s), ISL, OSL per row.

    Column names accepted: arrival_s|arrival|timestamp|time, isl|input_tokens|prompt_tokens,
    osl|output_tokens|completion_tokens. Times are sorted; a bad row is an error naming the
    row (1-based, header = row 1 for CSV) and the field.
    """
    import csv
    import io
    import json

    lines = [("" if ln.lstrip().startswith("#") else ln) for ln in text.splitlines()]  # '#' comment lines
    body = next((ln for ln in lines if ln.strip()), None)
    if body is None:
        raise InputError(name, "empty trace", "CSV with a header arrival_s,isl,osl or JSON lines")

    def columns_of(keys):
        cols = {}
        for f, names in _TRACE_FIELDS.items():
            hit = [k for k in names if k in keys]
            if not hit:
                raise InputError(name, f"no {f} column (columns: {', '.join(sorted(keys))})", " or ".join(names))
            cols[f] = hit[0]
        return cols

    rownum = []  # 1-based line number of each request
    raw = {f: [] for f in _TRACE_FIELDS}
    if body.lstrip().startswith("{"):
        cols = None
        for i, ln in enumerate(lines, 1):
            if not ln.strip():
                continue
            try:
                obj = json.loads(ln)
            except json.JSONDecodeError as e:
                raise InputError(f"{name} row {i}", f"not JSON ({e.msg})", "one JSON object per line") from None
            except RecursionError:
                raise InputError(f"{name} row {i}", "nested too deeply to read",
                                 '{"arrival_s": 0.1, "isl": 1000, "osl": 200}, one flat object per line') from None
            if not isinstance(obj, dict):
                raise InputError(f"{name} row {i}", "not a JSON object", '{"arrival_s": 0.1, "isl": 1000, "osl": 200}')
            if cols is None:
                obj = {str(k).strip().lower(): v for k, v in obj.items()}
                cols = columns_of(obj.keys())
            elif any(c not in obj for c in cols.values()):
                obj = {str(k).strip().lower(): v for k, v in obj.items()}
            rownum.append(i)
            for f, c in cols.items():
                v = obj.get(c)
                raw[f].append(v if isinstance(v, (int, float)) and not isinstance(v, bool) else
                              (v if isinstance(v, str) else repr(v)))
            if len(rownum) > MAX_REQUESTS:
                raise InputError(name, f"more than {MAX_REQUESTS:,} requests", f"at most {MAX_REQUESTS:,} requests")
    else:
        reader = csv.reader(io.StringIO("\n".join(lines)))
        idx = None
        width = 0
        for i, rec in enumerate(reader, 1):
            if not rec or not any(c.strip() for c in rec):
                continue
            if idx is None:
                header = [c.strip().lower() for c in rec]
                cols = columns_of(header)
                idx = {f: header.index(c) for f, c in cols.items()}
                width = len(header)
                continue
            if len(rec) != width:
                raise InputError(f"{name} row {i}", f"{len(rec)} fields, the header has {width}",
                                 "one value per header column")
            rownum.append(i)
            for f, k in idx.items():
                raw[f].append(rec[k])
            if len(rownum) > MAX_REQUESTS:
                raise InputError(name, f"more than {MAX_REQUESTS:,} requests", f"at most {MAX_REQUESTS:,} requests")
        if idx is None:
            raise InputError(name, "no header", "a header row naming arrival_s, isl, osl")
        cols = {f: header[k] for f, k in idx.items()}
    if not rownum:
        raise InputError(name, "no requests", "at least one row")
    out = {}
    for f, vals in raw.items():
        col = cols[f]
        acc = "seconds from 0 to 10⁹" if f == "arrival_s" else "a whole number of tokens from 1 to 10⁷"
        try:
            v = np.asarray(vals, dtype=float)
        except (TypeError, ValueError):  # find the first value that is not a number, for the error
            for r, x in zip(rownum, vals):
                try:
                    float(x)
                except (TypeError, ValueError):
                    raise InputError(f"{name} row {r} field {col}", f"{x!r} is not a number", acc) from None
            raise  # pragma: no cover
        if f == "arrival_s":
            bad = ~np.isfinite(v) | (v < 0) | (v > 1e9)
        else:
            bad = ~np.isfinite(v) | (v < 1) | (v > 1e7) | (v != np.round(v))
        if bad.any():
            k = int(np.argmax(bad))
            raise InputError(f"{name} row {rownum[k]} field {col}", f"{vals[k]!r}", acc)
        out[f] = v
    o = np.argsort(out["arrival_s"], kind="stable")
    return {f: v[o] for f, v in out.items()}


def example_trace_text() -> str:
    """The example trace shipped with the package (CSV: arrival_s, isl, osl)."""
    from pathlib import Path

    return (Path(__file__).resolve().parents[2] / "specs" / "data" / "traces" / "example.csv").read_text()


# --------------------------------------------------------------------------------------
# The event loop (one replica)
# --------------------------------------------------------------------------------------


@dataclass
class _Out:
    """Per-request times (indexed by request id) shared by the replicas of one pool."""

    admit: list
    first: list
    finish: list
    preempted: list
    arrival: list | None = None
    _state: tuple | None = None

    def state(self):
        """Scheduler state per request id (generation, context offset, finish step, steps left), made once."""
        if self._state is None:
            n = len(self.finish)
            self._state = ([0] * n, [0.0] * n, [-1] * n, [0] * n)
        return self._state


def run_replica(table, a_t: list, a_id: list, isl: list, osl: list, out: _Out, *, max_batch: int, budget: int,
                kv_tokens: float, acceptance: float = 1.0, cadence: float = 0.0, prefill: bool = True,
                closed_next=None, think_s: float = 0.0, progress=None, timeline_points: int = 2000,
                reserve_whole: bool = False) -> dict:
    """Simulate one replica: requests ``a_id`` arriving at sorted times ``a_t`` (lists, appended to in closed loop).

    ``table`` answers ``decode(b, L)``, ``prefill(P)`` and ``mixed(b, L, P)`` in seconds (a
    :class:`~rackmath.analyses.serving.step_table.StepTable`). ``prefill=False`` is a disaggregated decode
    pool: requests arrive with their KV and decode at once. ``closed_next`` (an iterator of
    request ids) makes it a closed loop: each completion brings the next request ``think_s`` later.
    ``reserve_whole``: a request is admitted only when KV for all of its ISL + OSL fits beside what the running
    ones reserved, and is never preempted (TensorRT-LLM's GUARANTEED_NO_EVICT; ``Stack.reserves_whole_request``).
    Fills ``out`` and returns the replica's totals and timeline.
    """
    A = float(acceptance)
    B = int(max_batch)
    T = int(budget)
    K = float(kv_tokens)
    decode_t = table.decode
    mixed_t = table.mixed
    heappush, heappop = heapq.heappush, heapq.heappop
    admit, first, finish, npre = out.admit, out.first, out.finish, out.preempted

    t = a_t[0] if a_t else 0.0
    if cadence:
        t = math.ceil(t / cadence) * cadence
    t0 = t
    n = 0  # decode steps taken by this replica
    heap = []  # (finish step, generation, rid)
    stack = []  # decoding rids in admission order (LIFO preemption), lazily cleaned
    # per-request state in lists indexed by request id (shared by a pool's replicas: their ids are disjoint)
    gen, ctx0, fin_step, steps_left = out.state()  # heap-entry generation; context − A·(step joined); finish step
    dec = 0
    S0 = 0.0
    pfq = deque()  # [rid, tokens left, tokens total]
    npf = 0
    pf_res = 0.0  # KV reserved by requests in prefill
    held = 0.0  # reserve_whole: KV tokens reserved for the whole of every admitted, unfinished request
    requeue = deque()  # preempted: (rid, tokens to recompute)
    nxt = 0
    busy = 0.0
    area = 0.0
    rejected = 0
    n_done = 0
    tl_t, tl_q, tl_b = [], [], []
    na = len(a_t)
    span_guess = (a_t[-1] - a_t[0]) if na > 1 else 1.0
    rec_dt = max(span_guess, 1e-3) / timeline_points
    next_rec = t
    iters = 0

    def complete(rid, when):
        nonlocal n_done, na, held
        finish[rid] = when
        n_done += 1
        if reserve_whole:
            held -= isl[rid] + osl[rid]
        if closed_next is not None:
            nid = next(closed_next, None)
            if nid is not None:
                a_t.append(when + think_s)
                a_id.append(nid)
                na += 1
                out.arrival[nid] = when + think_s

    while True:
        iters += 1
        # ---- admission at this step boundary
        kv_blocked = False
        while dec + npf < B and (requeue or (nxt < na and a_t[nxt] <= t)):
            if requeue:
                rid, need = requeue[0]
                src = 1
            elif nxt < na and a_t[nxt] <= t:
                rid = a_id[nxt]
                need = isl[rid]
                src = 2
            else:
                break
            if (held + isl[rid] + osl[rid] if reserve_whole else S0 + dec * A * n + pf_res + need) > K:
                if dec == 0 and not pfq:  # can never fit: refused
                    rejected += 1
                    finish[rid] = math.nan
                    if src == 1:
                        requeue.popleft()
                    else:
                        nxt += 1
                    continue
                kv_blocked = True
                break
            if reserve_whole:
                held += isl[rid] + osl[rid]
            if src == 1:
                requeue.popleft()
            else:
                nxt += 1
                admit[rid] = t
                steps_left[rid] = max(0, math.ceil((osl[rid] - 1) / A))
            if prefill or src == 1:
                pfq.append([rid, need, need])
                npf += 1
                pf_res += need
            else:  # disaggregated decode pool: the KV arrives with the request
                first[rid] = t
                s = steps_left[rid]
                if s == 0:
                    complete(rid, t)
                    continue
                g = gen[rid] + 1
                gen[rid] = g
                ctx0[rid] = need - A * n
                S0 += need - A * n
                dec += 1
                fin_step[rid] = n + s
                heappush(heap, (n + s, g, rid))
                stack.append(rid)

        if t >= next_rec:
            q = bisect.bisect_right(a_t, t, nxt) - nxt + len(requeue)
            tl_t.append(t)
            tl_q.append(q)
            tl_b.append(dec + npf)
            next_rec = t + rec_dt
            if len(tl_t) > 2 * timeline_points:
                tl_t, tl_q, tl_b = tl_t[::2], tl_q[::2], tl_b[::2]
                rec_dt *= 2.0

        if npf:
            # ---- one iteration carrying a prefill chunk (and every decoding sequence)
            room = T - dec
            used = 0
            for e in pfq:
                take = e[1] if e[1] < room - used else room - used
                e[1] -= take
                used += take
                if used >= room:
                    break
            L = S0 / dec + A * n if dec else 0.0
            dt = mixed_t(dec, L, used)
            if cadence:
                dt = math.ceil(dt / cadence - 1e-9) * cadence
            area += (dec + npf) * dt
            t += dt
            busy += dt
            if dec:
                n += 1
            while pfq and pfq[0][1] <= 0:
                rid, _, need = pfq.popleft()
                npf -= 1
                pf_res -= need
                if first[rid] != first[rid]:  # NaN: first token of this request
                    first[rid] = t
                s = steps_left[rid]
                if s <= 0:
                    complete(rid, t)
                    continue
                g = gen[rid] + 1
                gen[rid] = g
                ctx0[rid] = need - A * n
                S0 += need - A * n
                dec += 1
                fin_step[rid] = n + s
                heappush(heap, (n + s, g, rid))
                stack.append(rid)
        elif dec:
            # ---- k identical decode steps up to the next event
            while heap[0][1] != gen[heap[0][2]]:
                heappop(heap)
            k = heap[0][0] - n
            free = K - (S0 + dec * A * n + pf_res)
            k_kv = k if reserve_whole else int(free // (dec * A))  # reserved: the growth always fits
            if k_kv < 1 and dec > 1 and not reserve_whole:
                # ---- preempt the most recently admitted decoding sequence (recompute later)
                while True:
                    rid = stack.pop()
                    if fin_step[rid] >= 0:
                        break
                ctx = ctx0[rid] + A * n
                steps_left[rid] = fin_step[rid] - n
                fin_step[rid] = -1
                S0 -= ctx0[rid]
                dec -= 1
                gen[rid] += 1
                npre[rid] += 1
                requeue.appendleft((rid, ctx))
                continue
            if k_kv >= 1 and k_kv < k:
                k = k_kv
            dt1 = 0.0
            if (not kv_blocked) and dec + npf < B and nxt < na:
                dt1 = decode_t(dec, S0 / dec + A * n)
                if cadence:
                    dt1 = math.ceil(dt1 / cadence - 1e-9) * cadence
                k_arr = math.ceil((a_t[nxt] - t) / dt1)
                if k_arr < 1:
                    k_arr = 1
                if k_arr < k:
                    k = k_arr
            if k > 4 or dt1 == 0.0:  # the context grows A tokens a step: price the segment at its middle
                dt1 = decode_t(dec, S0 / dec + A * (n + (k - 1) * 0.5))
                if cadence:
                    dt1 = math.ceil(dt1 / cadence - 1e-9) * cadence
            dt = k * dt1
            area += dec * dt
            t += dt
            busy += dt
            n += k
            while heap and heap[0][0] <= n:
                fs, g, rid = heappop(heap)
                if g != gen[rid]:
                    continue
                fin_step[rid] = -1
                S0 -= ctx0[rid]
                dec -= 1
                complete(rid, t)
        else:
            if requeue:  # pragma: no cover - a preempted request always fits an empty replica
                rid, _ = requeue.popleft()
                rejected += 1
                finish[rid] = math.nan
                continue
            if nxt < na:
                if a_t[nxt] > t:
                    t = a_t[nxt]
                    if cadence:
                        t = math.ceil(t / cadence - 1e-9) * cadence
                continue
            break
        if progress is not None and (iters & 4095) == 0:
            progress(n_done)
    if progress is not None:
        progress(n_done)
    return dict(busy_s=busy, span_s=t - t0, batch_area=area, rejected=rejected, decode_steps=n,
                timeline=(tl_t, tl_q, tl_b), t_start=t0, t_end=t)


# --------------------------------------------------------------------------------------
# A deployment: replicas, pools, statistics
# --------------------------------------------------------------------------------------


def percentiles(x: np.ndarray) -> dict:
    """p50 / p90 / p99 and the mean of the finite values of ``x`` (NaN when none)."""
    x = x[np.isfinite(x)]
    if x.size == 0:
        return dict(mean=math.nan, p50=math.nan, p90=math.nan, p99=math.nan)
    p = np.percentile(x, [50, 90, 99])
    return dict(mean=float(x.mean()), p50=float(p[0]), p90=float(p[1]), p99=float(p[2]))


def mdl_waiting_time(rate: float, service_s: float) -> float:
    """M/D/1 mean wait in queue (Pollaczek–Khinchine with deterministic service): W = ρ·D / (2 (1 − ρ)), ρ = λ·D."""
    rho = rate * service_s
    if rho >= 1:
        return math.inf
    return rho * service_s / (2.0 * (1.0 - rho))


def _merge_timelines(tls: list, points: int = 1000):
    """Sum per-replica step-function timelines (t, queue, batch) on one common time grid."""
    starts = [tl[0][0] for tl in tls if tl[0]]
    ends = [tl[0][-1] for tl in tls if tl[0]]
    if not starts:
        return dict(t_s=[], queue=[], batch=[])
    grid = np.linspace(min(starts), max(ends), points)
    q = np.zeros(points)
    b = np.zeros(points)
    for tt, qq, bb in tls:
        if not tt:
            continue
        tt = np.asarray(tt)
        i = np.searchsorted(tt, grid, side="right") - 1
        ok = i >= 0
        q[ok] += np.asarray(qq, dtype=float)[i[ok]]
        b[ok] += np.asarray(bb, dtype=float)[i[ok]]
    return dict(t_s=grid.tolist(), queue=q.tolist(), batch=b.tolist())


@dataclass(repr=False)
class SimResult(ResultMixin):
    """What a simulation measured: latency percentiles, throughput, goodput, utilization, timeline.
    ``to_frame()``: one row per request (arrival, first token, finish, TTFT, TPOT, end-to-end, seconds)."""

    _SUMMARY = (("ttft_s", "s"), ("tpot_s", "s"), ("e2e_s", "s"))
    _ROW = "request"

    def _frame_dict(self) -> dict:
        per = {k: getattr(self, k) for k in ("arrival_s", "first_token_s", "finish_s", "ttft_s", "tpot_s", "e2e_s")
               if getattr(self, k) is not None}
        scal = {k: v for k, v in self.config.items() if isinstance(v, (int, float, str, bool))}
        return scal | {k: np.asarray(v, dtype=float) for k, v in per.items()}

    summary: dict
    config: dict
    timeline: dict
    ttft_s: np.ndarray = field(repr=False, default=None)
    tpot_s: np.ndarray = field(repr=False, default=None)
    e2e_s: np.ndarray = field(repr=False, default=None)
    notes: list = field(default_factory=list)
    arrival_s: np.ndarray = field(repr=False, default=None)
    first_token_s: np.ndarray = field(repr=False, default=None)
    finish_s: np.ndarray = field(repr=False, default=None)

    def __getitem__(self, k):
        return self.summary[k]

    def as_dict(self, timeline: bool = True) -> dict:
        d = dict(self.summary, config=self.config, notes=list(self.notes))
        if timeline:
            d["timeline"] = self.timeline
        return d


def _pool_run(table, arr, ids, isl, osl, out, *, replicas, max_batch, budget, acceptance, cadence, prefill,
              closed=None, think_s=0.0, progress=None, reserve_whole=False):
    """Round-robin the requests over ``replicas`` identical replicas and run each; returns the per-replica totals."""
    stats = []
    ids = np.asarray(ids)
    arr = np.asarray(arr, dtype=float)
    isl_l = isl if isinstance(isl, list) else list(isl)
    osl_l = osl if isinstance(osl, list) else list(osl)
    done_before = [0]

    for r in range(replicas):
        if closed is not None:
            mine = ids[r::replicas]
            c = closed
            a_t = [0.0] * min(c, len(mine))
            a_id = mine[:c].tolist()
            it = iter(mine[c:].tolist())
        else:
            a_t = arr[r::replicas].tolist()
            a_id = ids[r::replicas].tolist()
            it = None
        if not a_id:
            continue
        cb = None
        if progress is not None:
            base = done_before[0]

            def cb(k, base=base):
                progress(base + k)
        s = run_replica(table, a_t, a_id, isl_l, osl_l, out, max_batch=max_batch, budget=budget,
                        kv_tokens=table.kv_tokens, acceptance=acceptance, cadence=cadence, prefill=prefill,
                        closed_next=it, think_s=think_s, progress=cb, reserve_whole=reserve_whole)
        done_before[0] += len(a_id) + (0 if it is None else len(mine) - len(a_id))
        stats.append(s)
    return stats


def simulate(model, hardware, *, gpus=None, rate=None, concurrency=None, trace=None, requests=10000, isl="1000",
             osl="1000", arrivals="poisson", burstiness=2.0, tp=None, ep=None, pp=None, attention_dp=None,
             attention_dp_size=None, prefill_gpus=None, decode_gpus=None, prefill_layout=None, max_batch=None,
             budget=None, cadence=None, weights_dtype=None, kv_dtype=None, mtp=0, acceptance=None, efficiency=None,
             ideal=False,
             usd_per_gpu_hour=None, framework=None, ttft_slo=None, tpot_slo=None, seed=0, warmup=None,
             progress=None, think_s=0.0, compute_dtype=None) -> SimResult:
    """Simulate one deployment of ``model`` on ``gpus`` GPUs of ``hardware`` (module docstring).

    Traffic: ``rate`` (requests/s, Poisson, or gamma with ``arrivals='gamma'`` and coefficient of
    variation ``burstiness``), or ``concurrency`` (closed loop: that many users, each sending its
    next request when the last completes, ``think_s`` later; their progress spread out, or with
    ``arrivals='waves'`` all starting together), or ``trace`` (dict of arrays
    ``arrival_s, isl, osl`` from :func:`parse_trace`). ``isl``/``osl``: fixed or distributions
    (:func:`parse_lengths`). Layout flags describe one replica (decode pool when disaggregated);
    omitted, the layout with the highest throughput per GPU at ``max_batch`` is chosen. ``attention_dp_size`` R:
    attention DP over R groups of TP/R GPUs, each group its own scheduler (as ``serve``).
    ``cadence`` (s): the lecture's fixed train schedule. SLOs (s) set goodput.
    """
    from . import step_table as stt

    modes = [x is not None for x in (rate, concurrency, trace)]
    if sum(modes) != 1:
        raise InputError("rate", "give exactly one of a rate, a concurrency or a trace",
                         "--rate R, --concurrency C or --trace FILE")
    st = stt.stack(model, hardware, weights_dtype=weights_dtype, kv_dtype=kv_dtype, mtp=mtp, acceptance=acceptance,
                   efficiency=efficiency, ideal=ideal, usd_per_gpu_hour=usd_per_gpu_hour, framework=framework,
                   compute_dtype=compute_dtype)
    fw = framework_defaults(framework)
    B = int(fw["max_batch"] if max_batch is None else max_batch)
    T = int(fw["budget"] if budget is None else budget)
    for name, v, lo, hi in (("max_batch", B, 1, 65536), ("budget", T, 1, 10**7)):
        if not lo <= v <= hi:
            raise InputError(name, f"{v}", f"a whole number from {lo} to {hi}")
    if T < B:
        raise InputError("budget", f"{T} tokens per step is below max batch {B}",
                         "a step budget ≥ the max batch (every running sequence decodes one token a step)")
    if cadence is not None and not (0 < cadence <= 10):
        raise InputError("cadence", f"{cadence!r} s", "a step period from 0 to 10 s, e.g. 0.02")
    for name, v in (("ttft_slo", ttft_slo), ("tpot_slo", tpot_slo)):
        if v is not None and not (0 < v <= 1e5):
            raise InputError(name, f"{v!r} s", "a positive time in seconds")
    rng = np.random.default_rng(seed)

    # ---- the requests
    if trace is not None:
        arr = np.asarray(trace["arrival_s"], dtype=float)
        isl_a = np.asarray(trace["isl"], dtype=float)
        osl_a = np.asarray(trace["osl"], dtype=float)
        n = int(arr.size)
        src = f"trace of {n} requests"
        isl_spec = osl_spec = None
    else:
        n = int(requests)
        if not 1 <= n <= MAX_REQUESTS:
            raise InputError("requests", f"{requests!r}", f"a whole number from 1 to {MAX_REQUESTS:,}")
        isl_spec, osl_spec = parse_lengths(isl, "isl"), parse_lengths(osl, "osl")
        isl_a = sample_lengths(isl_spec, n, rng)
        osl_a = sample_lengths(osl_spec, n, rng)
        if rate is not None:
            if not (0 < float(rate) <= 1e7):
                raise InputError("rate", f"{rate!r}", "requests per second, above 0 and up to 10⁷")
            if arrivals == "poisson":
                arr = poisson_arrivals(float(rate), n, rng)
            elif arrivals == "gamma":
                if not 0.05 <= float(burstiness) <= 20:
                    raise InputError("burstiness", f"{burstiness!r}", "a coefficient of variation from 0.05 to 20")
                arr = gamma_arrivals(float(rate), n, rng, float(burstiness))
            else:
                raise InputError("arrivals", f"{arrivals!r}", "poisson or gamma")
            src = f"{arrivals} arrivals at {float(rate):g} req/s"
        else:
            c = float(concurrency)
            if not (1 <= c <= 1e6) or c != int(c):
                raise InputError("concurrency", f"{concurrency!r}", "a whole number of users from 1 to 10⁶")
            if arrivals not in ("poisson", "steady", "waves"):
                raise InputError("arrivals", f"{str(arrivals)[:80]!r} with a closed loop",
                                 "steady (the users' progress spread out) or waves (they start together)")
            arr = np.zeros(n)
            src = f"closed loop, {int(c)} users" + (", starting together" if arrivals == "waves" else "")
    disagg = prefill_gpus is not None or decode_gpus is not None
    if disagg and (prefill_gpus is None or decode_gpus is None):
        raise InputError("prefill_gpus" if prefill_gpus is None else "decode_gpus", "given alone",
                         "both --prefill-gpus and --decode-gpus")
    if disagg and concurrency is not None:
        raise InputError("concurrency", "closed-loop traffic is simulated for aggregated deployments",
                         "--rate or --trace with --prefill-gpus/--decode-gpus")
    n_dec = int(decode_gpus) if disagg else int(gpus or st.system.scaleup_size)
    if gpus is not None and disagg and int(gpus) != int(prefill_gpus) + int(decode_gpus):
        raise InputError("gpus", f"{gpus} ≠ prefill {prefill_gpus} + decode {decode_gpus}",
                         "--gpus = --prefill-gpus + --decode-gpus")
    for name, v in (("gpus", n_dec), ("prefill_gpus", prefill_gpus)):
        if v is not None and not (1 <= int(v) <= 1e5 and int(v) == v):
            raise InputError(name, f"{v!r}", "a whole number of GPUs from 1 to 10⁵")

    max_ctx = float(np.max(isl_a + osl_a))
    mean_isl = float(np.mean(isl_a))
    mean_ctx = float(np.mean(isl_a + osl_a / 2.0))

    # ---- layouts and step tables
    lay = _pick_layout(st, n_dec, dict(tp=tp, ep=ep, pp=pp, attention_dp=attention_dp,
                                       attention_dp_size=attention_dp_size), B, mean_ctx)
    g = int(lay["tp"] * lay["pp"])
    # the frameworks' max running sequences and step budget are per scheduler: one per attention-DP rank
    ranks = int(stt.attention_ranks(lay))
    B_rank, T_rank = B, T
    B, T = B * ranks, T * ranks
    if n_dec % g:
        raise InputError("gpus", f"{n_dec} GPUs is not a whole number of TP·PP = {g} replicas", f"a multiple of {g}")
    R = n_dec // g
    table = stt.StepTable(st, lay, max_batch=B, max_context=max_ctx, prompt=mean_isl, budget=T,
                          kv_context=mean_ctx)
    notes = []
    if closed := (int(concurrency) if concurrency is not None else None):
        if closed % R:
            notes.append(f"{closed} users over {R} replicas: {closed // R}–{-(-closed // R)} per replica")
    total_gpus = n_dec
    cfg = dict(model=st.model.name, hardware=st.system.name, chip=st.chip, mode="disaggregated" if disagg else
               "aggregated", traffic=src, requests=n, replicas=R, layout=table.as_dict()["layout"], max_batch=B,
               budget=T, max_batch_per_rank=B_rank, budget_per_rank=T_rank, schedulers_per_replica=ranks,
               kv_tokens_per_replica=table.kv_tokens, cadence_s=cadence, efficiency=st.efficiency,
               header=st.label, weights_dtype=st.weights_label, kv_dtype=st.kv_dtype, mtp=st.mtp,
               acceptance=st.acceptance, framework=framework or "generic", seed=seed, t_request_s=st.t_request)

    out = _Out(admit=[math.nan] * n, first=[math.nan] * n, finish=[math.nan] * n, preempted=[0] * n,
               arrival=[0.0] * n)
    ids = np.arange(n)
    if closed is not None and arrivals != "waves":
        # staggered start: the first request of user j of a replica is cut to (j + 1)/c of its OSL, so the users'
        # progress is spread evenly from the first step (steady state at once; these requests are warm-up).
        # arrivals="waves": every user starts at 0 with the same request, as a benchmark client does (lock-step
        # waves at fixed lengths: serving.wave_schedule)
        c = max(1, -(-closed // R))
        for r in range(R):
            first_ids = ids[r::R][:c]
            frac = (np.arange(first_ids.size) + 1.0) / first_ids.size
            osl_a[first_ids] = np.maximum(1.0, np.round(osl_a[first_ids] * frac))
    isl_l, osl_l = isl_a.tolist(), osl_a.tolist()
    whole = st.serving_stack.reserves_whole_request
    pstats = []
    if disagg:
        n_pf = int(prefill_gpus)
        lay_p = prefill_layout or _pick_prefill_layout(st, n_pf, T_rank, mean_isl)
        gp = int(lay_p["tp"] * lay_p["pp"])
        if n_pf % gp:
            raise InputError("prefill_gpus", f"{n_pf} is not a multiple of the prefill replica's {gp} GPUs",
                             f"a multiple of {gp}")
        Rp = n_pf // gp
        Tp = T_rank * int(stt.attention_ranks(lay_p))
        ptable = stt.StepTable(st, lay_p, max_batch=max(1, min(Tp, 4096)), max_context=max_ctx, prompt=mean_isl,
                               budget=Tp, role="prefill", n_context=4)
        pout = _Out(admit=[math.nan] * n, first=[math.nan] * n, finish=[math.nan] * n, preempted=[0] * n)
        one = [1.0] * n
        pstats = _pool_run(ptable, arr, ids, isl_l, one, pout, replicas=Rp, max_batch=max(1, min(Tp, 4096)), budget=Tp,
                           acceptance=1.0, cadence=0.0, prefill=True, progress=progress and
                           (lambda k: progress(k // 2)), reserve_whole=whole)
        pf_done = np.asarray(pout.finish)
        xfer = stt.kv_transfer_s(st, isl_a, lay_p["tp"])
        arr2 = pf_done + xfer
        ok = np.isfinite(arr2)
        o = np.argsort(np.where(ok, arr2, np.inf), kind="stable")[: int(ok.sum())]
        dstats = _pool_run(table, arr2[o], ids[o], isl_l, osl_l, out, replicas=R, max_batch=B, budget=T,
                           acceptance=st.acceptance, cadence=cadence or 0.0, prefill=False,
                           progress=progress and (lambda k: progress(n // 2 + k // 2)), reserve_whole=whole)
        total_gpus = n_pf + n_dec
        cfg.update(prefill_replicas=Rp, prefill_layout=ptable.as_dict()["layout"], prefill_gpus=n_pf,
                   decode_gpus=n_dec, kv_transfer_s=float(np.mean(xfer)))
        admit0 = np.asarray(pout.admit)
    else:
        dstats = _pool_run(table, arr, ids, isl_l, osl_l, out, replicas=R, max_batch=B, budget=T,
                           acceptance=st.acceptance, cadence=cadence or 0.0, prefill=True,
                           closed=None if closed is None else max(1, -(-closed // R)), think_s=think_s,
                           progress=progress, reserve_whole=whole)
        admit0 = np.asarray(out.admit)
    cfg["gpus"] = total_gpus

    # ---- statistics
    finish = np.asarray(out.finish)
    first = np.asarray(out.first)
    admit = np.asarray(out.admit)
    if closed is not None:  # closed loop: a request arrives when its user's previous one finished (first ones at 0)
        arrival = np.asarray(out.arrival)
    else:
        arrival = arr
    done = np.isfinite(finish)
    count = done.copy()
    burst = closed is not None and n <= closed  # every user sends one request: a finite burst, no steady state
    if warmup is None:
        warmup = 0.2 if closed is not None and not burst else 0.0
    if burst:
        notes.append(f"a burst: {counted(n, 'request')} sent at once, at most one per user — every "
                     "request counted, from the first arrival to the last completion (as a benchmark client reports "
                     "a run); no steady state")
    elif warmup:
        order = np.argsort(np.where(np.isfinite(admit), admit, np.inf), kind="stable")
        k0 = int(warmup * n)
        k1 = n - (closed if closed is not None else 0)
        keep = np.zeros(n, dtype=bool)
        keep[order[k0:max(k0 + 1, k1)]] = True
        count &= keep
    # the stack's host time per request (tokenizing, admission, detokenizing) runs beside the GPU: it adds to each
    # request's TTFT and E2E, not to the steps (as serve's TTFT: serving.steady_state)
    t_req = float(st.t_request)
    ttft = np.where(count, first - arrival + t_req, np.nan)
    e2e = np.where(count, finish - arrival + t_req, np.nan)
    tpot = np.where(count & (osl_a > 1), (finish - first) / np.maximum(osl_a - 1, 1), np.nan)
    qwait = np.where(count, admit0 - arrival, np.nan)
    # throughput: requests completing inside the window of the counted requests' completions (steady state for a
    # closed loop); an open loop counts from the first arrival to the last completion (the whole run)
    n_ok = int(count.sum())
    if closed is not None and n_ok > 1 and not burst:
        t_a = float(np.nanmin(np.where(count, finish, np.nan)))
        t_b = float(np.nanmax(np.where(count, finish, np.nan)))
        inside = done & (finish > t_a) & (finish <= t_b)
    elif n_ok > 1 and np.nanmax(np.where(count, arrival, np.nan)) > np.nanmin(np.where(count, arrival, np.nan)):
        # open loop: completions while requests keep arriving (the drain after the last arrival is not steady state)
        t_a = float(np.nanmin(np.where(count, arrival, np.nan)))
        t_b = float(np.nanmax(np.where(count, arrival, np.nan)))
        inside = count & (finish <= t_b)
    elif n_ok:
        t_a = float(np.nanmin(np.where(count, arrival, np.nan)))
        t_b = float(np.nanmax(np.where(count, finish, np.nan)))
        inside = count
    else:
        t_a, t_b, inside = 0.0, 0.0, count
    span = max(t_b - t_a, 1e-12)
    out_tok = float(np.sum(osl_a[inside]))
    in_tok = float(np.sum(isl_a[inside]))
    n_in = int(inside.sum())
    good = count.copy()
    if ttft_slo is not None:
        good &= ttft <= ttft_slo
    if tpot_slo is not None:
        good &= ~(tpot > tpot_slo)
    busy = sum(s["busy_s"] for s in dstats)
    spans = sum(s["span_s"] for s in dstats)
    area = sum(s["batch_area"] for s in dstats)
    x_out = out_tok / span
    price = st.usd_per_gpu_hour
    summary = dict(
        completed=int(done.sum()), counted=n_ok, rejected=int(sum(s["rejected"] for s in dstats + pstats)),
        preemptions=int(sum(out.preempted)), duration_s=span,
        request_rate=n_in / span, output_tok_s=x_out, total_tok_s=(out_tok + in_tok) / span,
        output_tok_s_per_gpu=x_out / total_gpus, ttft_s=percentiles(ttft), tpot_s=percentiles(tpot),
        e2e_s=percentiles(e2e), queue_wait_s=percentiles(qwait),
        tokens_per_s_per_user=1.0 / float(np.nanmean(tpot)) if np.isfinite(tpot).any() else math.nan,
        goodput_req_s=n_in / span * int(good.sum()) / max(n_ok, 1),
        goodput_tok_s=out_tok / span * float(np.sum(osl_a[good])) / max(float(np.sum(osl_a[count])), 1e-300),
        slo_attainment=int(good.sum()) / max(n_ok, 1), ttft_slo_s=ttft_slo, tpot_slo_s=tpot_slo,
        utilization=busy / max(spans, 1e-12), mean_running=area / max(spans, 1e-12) * len(dstats),
        running_per_replica=area / max(spans, 1e-12), batch_occupancy=area / max(spans, 1e-12) / B,
        usd_per_hour=total_gpus * price, usd_per_mtok_output=float(usd_per_mtok(total_gpus, price, max(x_out, 1e-300))),
        usd_per_gpu_hour=price,
    )
    if pstats:
        summary["prefill_utilization"] = sum(s["busy_s"] for s in pstats) / max(sum(s["span_s"] for s in pstats),
                                                                                1e-12)
    if summary["rejected"]:
        notes.append(f"{summary['rejected']} requests could never fit the KV cache of one replica and were refused")
    if summary["preemptions"]:
        notes.append(f"{summary['preemptions']} preemptions (KV cache full; recomputed)")
    if closed is None and summary["utilization"] > 0.98 and summary["queue_wait_s"]["p90"] > 10 * (
            summary["e2e_s"]["p50"] - summary["queue_wait_s"]["p50"] + 1e-9):
        notes.append("overloaded: the queue grows through the run (arrival rate above capacity)")
    tl = _merge_timelines([s["timeline"] for s in dstats])
    return SimResult(summary=summary, config=cfg, timeline=tl, ttft_s=ttft, tpot_s=tpot, e2e_s=e2e, notes=notes,
                     arrival_s=np.asarray(arrival, dtype=float), first_token_s=first, finish_s=finish)


def framework_defaults(framework) -> dict:
    """Scheduler defaults of a serving stack: max running sequences and the step token budget (per scheduler).

    The stacks' numbers are the serving model's (``serving.load_stack``: the same presets ``serve
    --framework`` uses); the generic stack (no framework) runs at most 256 sequences and 8,192 tokens a step.
    """
    from . import serve as serving
    from .launch import framework_info

    if framework is None:
        return dict(max_batch=DEFAULT_MAX_BATCH, budget=DEFAULT_BUDGET, name="generic")
    key = str(framework).strip().lower()  # serve's own presets (vllm-v0 included), else the launch catalog's names
    if "@" in key:  # h34 (issue 34): a stack version (specs/stacks.py), as serve --framework takes it
        s = serving.load_stack(framework)
    else:
        s = serving.load_stack(key if key in serving.STACKS else framework_info(framework)["name"])
    return dict(max_batch=int(min(s.max_batch_size, 65536)), budget=int(s.max_num_tokens or DEFAULT_BUDGET),
                name=s.name)


def _pick_layout(st, gpus, given, max_batch, context):
    """The replica layout: the given flags, or the highest output tokens/s per GPU at ``max_batch`` that fits."""
    from . import step_table as stt

    if any(v is not None for v in given.values()):
        from ...engine.deployment import check_attention_dp_size

        tp = int(given["tp"]) if given["tp"] is not None else min(int(gpus), int(st.system.scaleup_size))
        size = given.get("attention_dp_size")
        lay = dict(tp=tp, ep=int(given["ep"] or 1), pp=int(given["pp"] or 1),
                   attention_dp=bool(given["attention_dp"]) or size is not None)
        for k in ("tp", "ep", "pp"):
            if lay[k] < 1:
                raise InputError(k, f"{lay[k]}", "a parallel degree ≥ 1")
        if lay["tp"] % lay["ep"]:
            raise InputError("ep", f"EP {lay['ep']} does not divide TP {lay['tp']}", "a divisor of --tp")
        lay["attention_dp_size"] = check_attention_dp_size(size, tp)  # R | TP (0: every GPU its own sequences)
        return lay
    lays = stt.replica_layouts(st, gpus)
    ok = (gpus % lays["gpus"]) == 0
    if not ok.any():
        raise InputError("gpus", f"no replica layout divides {gpus} GPUs", "a power of two or a multiple of 8")
    lays = {k: v[ok] for k, v in lays.items()}
    return stt.layout_row(lays, decode_grid_best(st, lays, max_batch, context))


def decode_grid_best(st, lays, max_batch, context) -> int:
    """Index of the layout with the most decode tokens/s per GPU at up to ``max_batch`` sequences (fits memory)."""
    from . import step_table as stt

    bs = np.unique(np.round(np.geomspace(1, max_batch, 12)))
    grid = stt.decode_grid(st, {k: v[:, None] for k, v in lays.items()}, bs[None, :], context)
    b = np.minimum(bs[None, :], grid["max_batch"])
    thr = np.where(grid["fits"] & (b >= 1), b / grid["step_s"], 0.0) / lays["gpus"][:, None]
    best = thr.max(axis=1)
    if not (best > 0).any():
        raise InputError("gpus", f"the model does not fit any replica layout of these GPUs on {st.chip}",
                         "more GPUs, or a smaller weights dtype")
    return int(np.argmax(best - 1e-9 * lays["gpus"]))


def _pick_prefill_layout(st, gpus, budget, prompt):
    """Prefill replica layout: the most prompt tokens/s per GPU for passes of ``budget`` tokens that fits memory."""
    from . import step_table as stt

    lays = stt.replica_layouts(st, gpus)
    ok = (gpus % lays["gpus"]) == 0
    lays = {k: v[ok] for k, v in lays.items()}
    fit = stt.decode_grid(st, lays, 1.0, prompt)["fits"]
    t = stt.prefill_grid(st, lays, budget, prompt)
    thr = np.where(fit, budget / t / lays["gpus"], 0.0)
    if not (thr > 0).any():
        raise InputError("prefill_gpus", f"the model does not fit {gpus} × {st.chip}", "more prefill GPUs")
    return stt.layout_row(lays, int(np.argmax(thr - 1e-9 * lays["gpus"])))


__all__ = ["simulate", "SimResult", "parse_trace", "parse_lengths", "sample_lengths", "poisson_arrivals",
           "gamma_arrivals", "run_replica", "mdl_waiting_time", "percentiles", "example_trace_text",
           "framework_defaults", "DEFAULT_MAX_BATCH", "DEFAULT_BUDGET"]
