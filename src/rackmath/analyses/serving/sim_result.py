"""What a simulation measured (:class:`SimResult`): per-request TTFT, TPOT, E2E and queue wait, their
percentiles, throughput over the steady-state window, goodput against SLOs, utilization and cost.

The stack's host time per request (tokenizing, admission, detokenizing) runs beside the GPU: it adds to each
request's TTFT and E2E, not to the steps (as serve's TTFT: ``serve.steady_state``). Queueing identities the tests
check: M/D/1 waiting time at low load (:func:`mdl_waiting_time`), Little's law (mean running sequences =
throughput × time in service).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...engine.roofline import usd_per_mtok
from ...results import ResultMixin
from ...units import counted
from .replica import Out


# --------------------------------------------------------------------------------------
# Statistics
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


# --------------------------------------------------------------------------------------
# The statistics of a run
# --------------------------------------------------------------------------------------


def _counted(out: Out, arr, closed, warmup, notes: list) -> tuple:
    """Which requests the statistics count, and their arrival times. A closed loop leaves out its warm-up (the
    earliest-admitted 20% by default) and the last ``closed`` requests (the drain); a burst (at most one request
    per user) counts every request over the whole run."""
    n = len(out.finish)
    finish, admit = np.asarray(out.finish), np.asarray(out.admit)
    # closed loop: a request arrives when its user's previous one finished (first ones at 0)
    arrival = np.asarray(out.arrival) if closed is not None else arr
    count = np.isfinite(finish)
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
    return count, arrival, burst


def _window(finish, arrival, count, closed, burst) -> tuple:
    """The throughput window (t_a, t_b) and the requests completing inside it: a closed loop's counted completions
    (steady state); an open loop's completions while requests keep arriving (the drain after the last arrival is
    not steady state); otherwise first arrival → last completion."""
    done = np.isfinite(finish)
    n_ok = int(count.sum())
    if closed is not None and n_ok > 1 and not burst:
        t_a = float(np.nanmin(np.where(count, finish, np.nan)))
        t_b = float(np.nanmax(np.where(count, finish, np.nan)))
        return t_a, t_b, done & (finish > t_a) & (finish <= t_b)
    if n_ok > 1 and np.nanmax(np.where(count, arrival, np.nan)) > np.nanmin(np.where(count, arrival, np.nan)):
        t_a = float(np.nanmin(np.where(count, arrival, np.nan)))
        t_b = float(np.nanmax(np.where(count, arrival, np.nan)))
        return t_a, t_b, count & (finish <= t_b)
    if n_ok:
        return float(np.nanmin(np.where(count, arrival, np.nan))), float(np.nanmax(np.where(count, finish, np.nan))), \
            count
    return 0.0, 0.0, count


def _summary(st, lat: dict, out: Out, osl_a, isl_a, count, window: tuple, traffic, stats: tuple,
             gpus: int, B: int) -> dict:
    """The result's summary: counts, throughput, latency percentiles, goodput, utilization and cost."""
    ttft, tpot, e2e, qwait = lat["ttft"], lat["tpot"], lat["e2e"], lat["qwait"]
    dstats, pstats = stats
    t_a, t_b, inside = window
    span = max(t_b - t_a, 1e-12)
    out_tok, in_tok, n_in, n_ok = float(np.sum(osl_a[inside])), float(np.sum(isl_a[inside])), int(inside.sum()), \
        int(count.sum())
    good = count.copy()
    if traffic.ttft_slo is not None:
        good &= ttft <= traffic.ttft_slo
    if traffic.tpot_slo is not None:
        good &= ~(tpot > traffic.tpot_slo)
    spans = max(sum(s["span_s"] for s in dstats), 1e-12)
    area = sum(s["batch_area"] for s in dstats)
    x_out, price = out_tok / span, st.usd_per_gpu_hour
    summary = dict(
        completed=int(np.isfinite(np.asarray(out.finish)).sum()), counted=n_ok,
        rejected=int(sum(s["rejected"] for s in dstats + pstats)), preemptions=int(sum(out.preempted)),
        duration_s=span, request_rate=n_in / span, output_tok_s=x_out, total_tok_s=(out_tok + in_tok) / span,
        output_tok_s_per_gpu=x_out / gpus, ttft_s=percentiles(ttft), tpot_s=percentiles(tpot),
        e2e_s=percentiles(e2e), queue_wait_s=percentiles(qwait),
        tokens_per_s_per_user=1.0 / float(np.nanmean(tpot)) if np.isfinite(tpot).any() else math.nan,
        goodput_req_s=n_in / span * int(good.sum()) / max(n_ok, 1),
        goodput_tok_s=out_tok / span * float(np.sum(osl_a[good])) / max(float(np.sum(osl_a[count])), 1e-300),
        slo_attainment=int(good.sum()) / max(n_ok, 1), ttft_slo_s=traffic.ttft_slo, tpot_slo_s=traffic.tpot_slo,
        utilization=sum(s["busy_s"] for s in dstats) / spans, mean_running=area / spans * len(dstats),
        running_per_replica=area / spans, batch_occupancy=area / spans / B,
        usd_per_hour=gpus * price, usd_per_mtok_output=float(usd_per_mtok(gpus, price, max(x_out, 1e-300))),
        usd_per_gpu_hour=price,
    )
    if pstats:
        summary["prefill_utilization"] = sum(s["busy_s"] for s in pstats) / max(sum(s["span_s"] for s in pstats),
                                                                                1e-12)
    return summary


def _run_notes(summary: dict, closed) -> list:
    """Notes on refused requests, preemptions and an overloaded open loop."""
    notes = []
    if summary["rejected"]:
        notes.append(f"{summary['rejected']} requests could never fit the KV cache of one replica and were refused")
    if summary["preemptions"]:
        notes.append(f"{summary['preemptions']} preemptions (KV cache full; recomputed)")
    if closed is None and summary["utilization"] > 0.98 and summary["queue_wait_s"]["p90"] > 10 * (
            summary["e2e_s"]["p50"] - summary["queue_wait_s"]["p50"] + 1e-9):
        notes.append("overloaded: the queue grows through the run (arrival rate above capacity)")
    return notes


def result(st, cfg: dict, notes: list, out: Out, arr, isl_a, osl_a, admit0, stats: tuple, closed, traffic,
            B: int) -> SimResult:
    """Per-request latencies and the summary of a finished run (the stack's host time per request added to each
    TTFT and E2E: module docstring); ``stats`` the decode and prefill pools' per-replica totals."""
    count, arrival, burst = _counted(out, arr, closed, traffic.warmup, notes)
    finish, first = np.asarray(out.finish), np.asarray(out.first)
    t_req = float(st.t_request)
    lat = dict(ttft=np.where(count, first - arrival + t_req, np.nan),
               e2e=np.where(count, finish - arrival + t_req, np.nan),
               tpot=np.where(count & (osl_a > 1), (finish - first) / np.maximum(osl_a - 1, 1), np.nan),
               qwait=np.where(count, admit0 - arrival, np.nan))
    window = _window(finish, arrival, count, closed, burst)
    summary = _summary(st, lat, out, osl_a, isl_a, count, window, traffic, stats, cfg["gpus"], B)
    notes += _run_notes(summary, closed)
    return SimResult(summary=summary, config=cfg, timeline=_merge_timelines([s["timeline"] for s in stats[0]]),
                     ttft_s=lat["ttft"], tpot_s=lat["tpot"], e2e_s=lat["e2e"], notes=notes,
                     arrival_s=np.asarray(arrival, dtype=float), first_token_s=first, finish_s=finish)


__all__ = ["SimResult", "percentiles", "mdl_waiting_time", "result"]
