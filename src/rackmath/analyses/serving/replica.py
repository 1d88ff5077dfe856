"""The simulator's event loop: one replica's continuous-batching scheduler (issue 12; module docstring of
:mod:`rackmath.analyses.serving.simulate` for the rules it follows).

All running sequences advance one step together, so between two events (an arrival that can be admitted, a
completion, a prefill chunk, the cache filling up) the batch is constant and k steps are taken at once, costing
k · t(b, L̄ + A(k − 1)/2) (the context grows by A tokens a step). Each request costs a few events, each a handful of
Python operations and a heap push/pop.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class Scheduler:
    """One replica's scheduler: at most ``max_batch`` running sequences and ``budget`` tokens a step (over all of
    its attention-DP ranks), ``kv_tokens`` of KV cache; ``acceptance`` tokens per decode step (speculation);
    ``cadence`` (s, 0 = off): steps leave on a fixed clock (the lecture's train, 00:20); ``prefill`` False: a
    disaggregated decode pool (requests arrive with their KV); ``reserve_whole``: a request is admitted only when KV
    for all of its ISL + OSL fits beside what the running ones reserved and is never preempted (TensorRT-LLM's
    GUARANTEED_NO_EVICT; ``Stack.reserves_whole_request``); ``recv_interval`` N: new requests are received every N
    decode steps, at once after a prefill step or when idle (SGLang's ``--scheduler-recv-interval``,
    ``schedule.receive_wait``)."""

    max_batch: int
    budget: int
    kv_tokens: float
    acceptance: float = 1.0
    cadence: float = 0.0
    prefill: bool = True
    reserve_whole: bool = False
    recv_interval: int = 1


@dataclass
class Out:
    """Per-request times (indexed by request id) shared by the replicas of one pool."""

    admit: list
    first: list
    finish: list
    preempted: list
    arrival: list | None = None
    _state: tuple | None = None

    @classmethod
    def empty(cls, n: int, arrival: bool = False) -> "Out":
        """NaN times and no preemptions for ``n`` requests (``arrival``: closed-loop arrival times too)."""
        nan = math.nan
        return cls(admit=[nan] * n, first=[nan] * n, finish=[nan] * n, preempted=[0] * n,
                   arrival=[0.0] * n if arrival else None)

    def state(self):
        """Scheduler state per request id (generation, context offset, finish step, steps left), made once."""
        if self._state is None:
            n = len(self.finish)
            self._state = ([0] * n, [0.0] * n, [-1] * n, [0] * n)
        return self._state


def on_clock(dt: float, cadence: float) -> float:
    """A step of ``dt`` seconds rounded up to the train's period: ⌈dt / τ⌉ · τ."""
    return math.ceil(dt / cadence - 1e-9) * cadence


def _clocked(decode_t, mixed_t, cadence: float) -> tuple:
    """The decode and mixed step-time functions with steps leaving on the train's clock (:func:`on_clock`)."""
    ceil = math.ceil

    def decode(b, L):
        return ceil(decode_t(b, L) / cadence - 1e-9) * cadence

    def mixed(b, L, P):
        return ceil(mixed_t(b, L, P) / cadence - 1e-9) * cadence
    return decode, mixed


class Replica:
    """One replica's queues and per-request state; :meth:`run` is the event loop."""

    def __init__(self, table, a_t: list, a_id: list, isl: list, osl: list, out: Out, sched: Scheduler,
                 closed_next=None, think_s: float = 0.0, timeline_points: int = 2000):
        self.table, self.sched, self.out = table, sched, out
        self.a_t, self.a_id, self.isl, self.osl = a_t, a_id, isl, osl
        self.closed_next, self.think_s = closed_next, think_s
        self.A = float(sched.acceptance)
        # heap entry generation; context − A·(step joined); finish step; decode steps left (by request id)
        self.gen, self.ctx0, self.fin_step, self.steps_left = out.state()
        self.heap = []  # (finish step, generation, rid)
        self.stack = []  # decoding rids in admission order (LIFO preemption), lazily cleaned
        self.pfq = deque()  # [rid, tokens left, tokens total]
        self.requeue = deque()  # preempted: (rid, tokens to recompute)
        self.held = 0.0  # reserve_whole: KV tokens reserved for the whole of every admitted, unfinished request
        self.rejected = 0
        self.points = timeline_points
        self.tl = ([], [], [])  # time, queue, running
        span_guess = (a_t[-1] - a_t[0]) if len(a_t) > 1 else 1.0
        self.rec_dt = max(span_guess, 1e-3) / timeline_points
        self.complete, self.join, self.fill_chunk = self._completer(), self._joiner(), self._chunker()

    # the per-request steps, as closures over the replica's lists (cheaper per call than methods)

    def _completer(self):
        """``complete(rid, when)``: the request finishes; in a closed loop its user sends the next one ``think_s``
        later."""
        finish, isl, osl, whole, arrival = self.out.finish, self.isl, self.osl, self.sched.reserve_whole, \
            self.out.arrival
        closed_next, think_s, a_t, a_id = self.closed_next, self.think_s, self.a_t, self.a_id

        def complete(rid: int, when: float) -> None:
            finish[rid] = when
            if whole:
                self.held -= isl[rid] + osl[rid]
            if closed_next is not None:
                nid = next(closed_next, None)
                if nid is not None:
                    a_t.append(when + think_s)
                    a_id.append(nid)
                    arrival[nid] = when + think_s
        return complete

    def _joiner(self):
        """``join(rid, need, n, s)``: the request starts decoding at step ``n`` with ``need`` tokens of context and
        ``s`` steps left; returns its context offset (context − A·n, what the running sum S0 gains)."""
        gen, ctx0, fin_step, heap, push, A, heappush = self.gen, self.ctx0, self.fin_step, self.heap, \
            self.stack.append, self.A, heapq.heappush

        def join(rid: int, need: float, n: int, s: int) -> float:
            g = gen[rid] + 1
            gen[rid] = g
            c = need - A * n
            ctx0[rid] = c
            fin_step[rid] = n + s
            heappush(heap, (n + s, g, rid))
            push(rid)
            return c
        return join

    def _chunker(self):
        """``fill_chunk(room)``: prompt tokens of the waiting prefills taken into a step with ``room`` tokens free,
        in arrival order."""
        pfq = self.pfq

        def fill_chunk(room: int) -> int:
            used = 0
            for e in pfq:
                take = e[1] if e[1] < room - used else room - used
                e[1] -= take
                used += take
                if used >= room:
                    break
            return used
        return fill_chunk

    def preempt(self, n: int) -> float:
        """Preempt the most recently admitted decoding sequence (recomputed later, vLLM's recompute preemption);
        returns its context offset (what S0 loses)."""
        stack, fin_step = self.stack, self.fin_step
        while True:
            rid = stack.pop()
            if fin_step[rid] >= 0:
                break
        self.steps_left[rid] = fin_step[rid] - n
        fin_step[rid] = -1
        self.gen[rid] += 1
        self.out.preempted[rid] += 1
        self.requeue.appendleft((rid, self.ctx0[rid] + self.A * n))
        return self.ctx0[rid]

    def refuse(self, rid: int, preempted: bool = False, nxt: int = 0) -> int:
        """A request that can never fit an empty replica's KV cache is refused (taken off the preempted queue, or
        past as the next arrival: returns the next arrival's index)."""
        self.rejected += 1
        self.out.finish[rid] = math.nan
        if preempted:
            self.requeue.popleft()
            return nxt
        return nxt + 1

    def arrive_decoding(self, rid: int, t: float) -> bool:
        """A request reaches a disaggregated decode pool with its KV: its first token is out; False when it needs
        no decode step (it completes here)."""
        self.out.first[rid] = t
        if self.steps_left[rid] == 0:
            self.complete(rid, t)
            return False
        return True

    def record(self, t: float, nxt: int, running: int) -> float:
        """A timeline point (queue, running) at ``t``; thinned 2× when full. Returns the next recording time."""
        tl_t, tl_q, tl_b = self.tl
        tl_t.append(t)
        tl_q.append(bisect.bisect_right(self.a_t, t, nxt) - nxt + len(self.requeue))
        tl_b.append(running)
        next_rec = t + self.rec_dt
        if len(tl_t) > 2 * self.points:
            self.tl = (tl_t[::2], tl_q[::2], tl_b[::2])
            self.rec_dt *= 2.0
        return next_rec

    def loop_inputs(self) -> tuple:
        """What the loop reads, as local variables: the scheduler's limits, the step times (rounded up to the train's
        period when there is one), the requests, queues and per-request state."""
        sch, table, out = self.sched, self.table, self.out
        decode_t, mixed_t, cadence = table.decode, table.mixed, sch.cadence
        if cadence:
            decode_t, mixed_t = _clocked(decode_t, mixed_t, cadence)
        return (self.A, int(sch.max_batch), int(sch.budget), float(sch.kv_tokens), cadence, sch.reserve_whole,
                sch.prefill, decode_t, mixed_t, self.a_t, self.a_id, self.isl, self.osl, self.heap, self.pfq,
                self.requeue, out.admit, out.first, self.gen, self.ctx0, self.fin_step, self.steps_left)

    def run(self, progress=None) -> dict:
        """Run until every request finished or was refused; fills ``out``, returns the replica's totals and timeline.

        One function for the loop on purpose (over ~80 lines): the per-event state (time, step, running sequences
        and their summed context, the prefill queue) stays in local variables, which keeps an event at a handful of
        Python operations; the rare or per-request work is in the methods above."""
        (A, B, T, K, cadence, whole, pf_all, decode_t, mixed_t, a_t, a_id, isl, osl, heap, pfq, requeue, admit, first,
         gen, ctx0, fin_step, steps_left) = self.loop_inputs()
        complete, join, fill_chunk, heappop = self.complete, self.join, self.fill_chunk, heapq.heappop
        t = a_t[0] if a_t else 0.0
        if cadence:
            t = math.ceil(t / cadence) * cadence
        t0 = next_rec = t
        R = int(self.sched.recv_interval)  # decode steps between receives; `since` counts them (R: receive now)
        since = R
        n = dec = npf = nxt = iters = 0  # decode steps taken; decoding and prefilling sequences; next arrival
        S0 = pf_res = busy = area = 0.0  # Σ context offsets; KV reserved by prefills; busy time; ∫ running dt
        na, grows = len(a_t), self.closed_next is not None  # a closed loop's completions append arrivals
        while True:
            iters += 1
            if grows:
                na = len(a_t)
            kv_blocked = False
            recv = R <= 1 or since >= R or not (dec or npf)  # the scheduler receives new requests at this boundary
            if recv:
                since = 0
            while dec + npf < B and (requeue or (recv and nxt < na and a_t[nxt] <= t)):  # ---- admission here
                if requeue:
                    rid, need = requeue[0]
                    src = 1
                else:
                    rid = a_id[nxt]
                    need = isl[rid]
                    src = 2
                if (self.held + isl[rid] + osl[rid] if whole else S0 + dec * A * n + pf_res + need) > K:
                    if dec or pfq:
                        kv_blocked = True
                        break
                    nxt = self.refuse(rid, src == 1, nxt)  # can never fit
                    continue
                if whole:
                    self.held += isl[rid] + osl[rid]
                if src == 1:
                    requeue.popleft()
                else:
                    nxt += 1
                    admit[rid] = t
                    steps_left[rid] = max(0, math.ceil((osl[rid] - 1) / A))
                if pf_all or src == 1:
                    pfq.append([rid, need, need])
                    npf += 1
                    pf_res += need
                elif self.arrive_decoding(rid, t):  # disaggregated decode pool: the KV arrives with the request
                    S0 += join(rid, need, n, steps_left[rid])
                    dec += 1
            if t >= next_rec:
                next_rec = self.record(t, nxt, dec + npf)
            if npf:  # ---- one iteration carrying a prefill chunk (and every decoding sequence)
                dt = mixed_t(dec, S0 / dec + A * n if dec else 0.0, fill_chunk(T - dec))
                area += (dec + npf) * dt
                t += dt
                busy += dt
                since = R  # after a prefill step the scheduler receives at once
                if dec:
                    n += 1
                while pfq and pfq[0][1] <= 0:
                    rid, _, need = pfq.popleft()
                    npf -= 1
                    pf_res -= need
                    if first[rid] != first[rid]:  # NaN: first token of this request
                        first[rid] = t
                    if steps_left[rid] <= 0:
                        complete(rid, t)
                        continue
                    S0 += join(rid, need, n, steps_left[rid])
                    dec += 1
            elif dec:  # ---- k identical decode steps up to the next event
                while heap[0][1] != gen[heap[0][2]]:
                    heappop(heap)
                k = heap[0][0] - n
                k_kv = k if whole else int((K - (S0 + dec * A * n + pf_res)) // (dec * A))  # reserved: growth fits
                if k_kv < 1 and dec > 1 and not whole:
                    S0 -= self.preempt(n)
                    dec -= 1
                    continue
                if k_kv >= 1 and k_kv < k:
                    k = k_kv
                dt1 = 0.0
                if (not kv_blocked) and dec + npf < B and nxt < na:
                    dt1 = decode_t(dec, S0 / dec + A * n)
                    k_arr = math.ceil((a_t[nxt] - t) / dt1)
                    if k_arr < 1:
                        k_arr = 1
                    if R > 1:  # … received at the first receive (every R decode steps) at or after it arrives
                        j0 = R - since
                        k_arr = j0 if k_arr <= j0 else j0 + -(-(k_arr - j0) // R) * R
                    if k_arr < k:
                        k = k_arr
                if k > 4 or dt1 == 0.0:  # the context grows A tokens a step: price the segment at its middle
                    dt1 = decode_t(dec, S0 / dec + A * (n + (k - 1) * 0.5))
                dt = k * dt1
                area += dec * dt
                t += dt
                busy += dt
                n += k
                since += k  # the scheduler received every R steps of the run: the count since the last receive
                if since > R:
                    since = since % R or R
                while heap and heap[0][0] <= n:
                    _, g, rid = heappop(heap)
                    if g == gen[rid]:
                        fin_step[rid] = -1
                        S0 -= ctx0[rid]
                        dec -= 1
                        complete(rid, t)
            elif requeue:  # pragma: no cover - a preempted request always fits an empty replica
                self.refuse(requeue[0][0], True)
            elif nxt < na:
                if a_t[nxt] > t:
                    t = on_clock(a_t[nxt], cadence) if cadence else a_t[nxt]
            else:
                break
            if progress is not None and (iters & 4095) == 0:  # done: arrived, neither running, waiting nor refused
                progress(nxt - npf - dec - len(requeue) - self.rejected)
        if progress is not None:
            progress(nxt - npf - dec - len(requeue) - self.rejected)
        return dict(busy_s=busy, span_s=t - t0, batch_area=area, rejected=self.rejected, decode_steps=n,
                    timeline=self.tl, t_start=t0, t_end=t)


def run_replica(table, a_t: list, a_id: list, isl: list, osl: list, out: Out, sched: Scheduler, *, closed_next=None,
                think_s: float = 0.0, progress=None, timeline_points: int = 2000) -> dict:
    """Simulate one replica: requests ``a_id`` arriving at sorted times ``a_t`` (lists, appended to in closed loop).

    ``table`` answers ``decode(b, L)``, ``prefill(P)`` and ``mixed(b, L, P)`` in seconds (a
    :class:`~rackmath.analyses.serving.step_table.StepTable`); ``sched`` the replica's :class:`Scheduler`.
    ``closed_next`` (an iterator of request ids) makes it a closed loop: each completion brings the next request
    ``think_s`` later. Fills ``out`` and returns the replica's totals and timeline.
    """
    return Replica(table, a_t, a_id, isl, osl, out, sched, closed_next, think_s, timeline_points).run(progress)


__all__ = ["Scheduler", "Out", "Replica", "run_replica", "on_clock"]
