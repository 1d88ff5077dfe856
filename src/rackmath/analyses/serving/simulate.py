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
once over batch and context). The event loop (:mod:`~rackmath.analyses.serving.replica`) does not walk
token by token: all running sequences advance one step together, so between two events (an arrival
that can be admitted, a completion, a prefill chunk, the cache filling up) the batch is constant and
k steps are taken at once, costing k · t(b, L̄ + A(k − 1)/2) (the context grows by A tokens a step).
Each request costs a few events, each a handful of Python operations and a heap push/pop,
which is what makes 10⁶ requests take seconds. Request lengths, arrivals and traces:
:mod:`~rackmath.analyses.serving.traffic`.

The typed call is :func:`run` (``Workload``, ``Layout`` and the stack as ``serve`` takes them, plus
:class:`Traffic` and :class:`Deployment` for what only a simulation has); :func:`simulate` is the flat
keyword form (notebooks, ``plan --confirm``).

Queueing identities the tests check: M/D/1 waiting time at low load (Pollaczek–Khinchine,
W = ρ·D / (2 (1 − ρ))), Little's law (mean running sequences = throughput × time in service).
"""


from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from ...engine.efficiency import resolve
from ...engine.deployment import check_attention_dp_size
from ...errors import InputError
from . import step_table as stt
from .replica import Out, Scheduler, run_replica
from .sim_result import SimResult, mdl_waiting_time, percentiles, result  # noqa: F401 (SimResult, … importable here)
from .inputs import Layout, Stack, Workload, check_receive, load_stack, receiving
from .traffic import (draw_requests, example_trace_text, gamma_arrivals, parse_lengths, parse_trace,  # noqa: F401
                      poisson_arrivals, sample_lengths)

#: Defaults of the generic stack when no ``framework`` is named: vLLM's ``max_num_seqs`` (256) and the
#: 8,192-token step budget (TensorRT-LLM ``max_num_tokens``, SGLang ``chunked_prefill_size`` on large GPUs).
DEFAULT_MAX_BATCH = 256
DEFAULT_BUDGET = 8192


# --------------------------------------------------------------------------------------
# Typed inputs: what only a simulation has (Workload, Layout and the stack are serve's)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Traffic:
    """How requests arrive and how the run is scored — what only a simulation has.

    Exactly one source: ``rate`` (requests/s, an open loop: Poisson, or gamma gaps of coefficient of variation
    ``burstiness`` with ``Workload.arrivals='gamma'``), ``trace`` (:func:`parse_trace`'s arrays ``arrival_s, isl,
    osl``) or ``Workload.concurrency`` (a closed loop: each user sends its next request ``think_s`` after its last
    completes). ``requests`` are drawn with ``seed``; ``warmup`` is the share of the earliest-admitted requests
    left out of the statistics (default 0.2 in a closed loop, else 0); ``ttft_slo``/``tpot_slo`` (s) set goodput."""

    rate: float | None = None
    trace: dict | None = None
    requests: int = 10000
    burstiness: float = 2.0
    think_s: float = 0.0
    seed: int = 0
    warmup: float | None = None
    ttft_slo: float | None = None
    tpot_slo: float | None = None


@dataclass(frozen=True)
class Deployment:
    """The GPUs and schedulers of a simulated deployment.

    ``gpus`` (aggregated; default one scale-up domain), or ``prefill_gpus`` + ``decode_gpus`` (disaggregated; the
    prefill replica's ``prefill_layout`` a :class:`Layout` or a dict of tp/ep/pp/attention_dp/attention_dp_size,
    default the most prompt tokens/s per GPU); ``max_batch`` / ``budget``: running sequences and tokens a step per
    scheduler (default the stack's, :func:`framework_defaults`); ``cadence`` (s): the lecture's train schedule;
    dtypes and $/GPU-hour as ``serve`` takes them."""

    gpus: int | None = None
    prefill_gpus: int | None = None
    decode_gpus: int | None = None
    prefill_layout: object = None
    max_batch: int | None = None
    budget: int | None = None
    cadence: float | None = None
    weights_dtype: str | None = None
    kv_dtype: str | None = None
    compute_dtype: str | None = None
    usd_per_gpu_hour: float | None = None

    @property
    def disaggregated(self) -> bool:
        return self.prefill_gpus is not None or self.decode_gpus is not None


def layout_from_flags(tp=None, ep=None, pp=None, attention_dp=None, attention_dp_size=None) -> Layout | None:
    """The replica layout the layout flags give, None when no flag is given (the simulator then chooses). A flag
    left out: TP one scale-up domain capped at the pool's GPUs (``tp=None``), EP 1, PP 1; ``attention_dp_size`` R
    (a positive whole number, a divisor of TP) implies attention DP. ``Layout.gpus`` is not read: the pool's GPUs
    are :class:`Deployment`'s."""
    if all(v is None for v in (tp, ep, pp, attention_dp, attention_dp_size)):
        return None
    size = attention_dp_size
    if size is not None and (isinstance(size, bool) or not isinstance(size, numbers.Real) or not size >= 1
                             or int(size) != size):  # 0 would read as Layout's default (TP): refuse it here
        if isinstance(tp, (int, np.integer)) and not isinstance(tp, bool) and tp >= 1:
            check_attention_dp_size(size, int(tp))
        raise InputError("attention_dp_size", f"{size!r} is not a positive integer", "a divisor of tp")
    return Layout(gpus=0, tp=tp, ep=ep or 1, pp=pp or 1, attention_dp=bool(attention_dp) or size is not None,
                  attention_dp_size=size or 0)


def _layout_dict(lay) -> dict:
    """A Layout as the step table's dict (tp, ep, pp, attention_dp, attention_dp_size); a dict is taken as it is."""
    if lay is None or isinstance(lay, dict):
        return lay
    return dict(tp=int(lay.tp), ep=int(lay.ep), pp=int(lay.pp), attention_dp=bool(lay.attention_dp),
                attention_dp_size=int(lay.attention_dp_size))


# --------------------------------------------------------------------------------------
# The stack's scheduler defaults; the replica layouts
# --------------------------------------------------------------------------------------


def framework_defaults(framework) -> dict:
    """Scheduler defaults of a serving stack: max running sequences and the step token budget (per scheduler).

    The stack is resolved by ``serve.load_stack`` (the one resolver: ``serve --framework`` names and aliases, each
    optionally ``@VERSION``, or a ``Stack``); the generic stack (no framework) runs at most 256 sequences and
    8,192 tokens a step."""
    if framework is None:
        return dict(max_batch=DEFAULT_MAX_BATCH, budget=DEFAULT_BUDGET, name="generic")
    s = load_stack(framework)
    return dict(max_batch=int(min(s.max_batch_size, 65536)), budget=int(s.max_num_tokens or DEFAULT_BUDGET),
                name=s.name)


def _pick_layout(st, gpus, layout, max_batch, context):
    """The replica layout: the given :class:`Layout`, or the highest output tokens/s per GPU at ``max_batch`` that
    fits."""
    if layout is not None:
        return _given_layout(st, gpus, layout)
    lays = stt.replica_layouts(st, gpus)
    ok = (gpus % lays["gpus"]) == 0
    if not ok.any():
        raise InputError("gpus", f"no replica layout divides {gpus} GPUs", "a power of two or a multiple of 8")
    lays = {k: v[ok] for k, v in lays.items()}
    return stt.layout_row(lays, decode_grid_best(st, lays, max_batch, context))


def _given_layout(st, gpus, layout: Layout) -> dict:
    """A given layout checked, as the step table's dict (``tp`` None: one scale-up domain, at most ``gpus``)."""
    tp = int(layout.tp) if layout.tp is not None else min(int(gpus), int(st.system.scaleup_size))
    size = layout.attention_dp_size or None
    lay = dict(tp=tp, ep=int(layout.ep or 1), pp=int(layout.pp or 1),
               attention_dp=bool(layout.attention_dp) or size is not None)
    for k in ("tp", "ep", "pp"):
        if lay[k] < 1:
            raise InputError(k, f"{lay[k]}", "a parallel degree ≥ 1")
    if lay["tp"] % lay["ep"]:
        raise InputError("ep", f"EP {lay['ep']} does not divide TP {lay['tp']}", "a divisor of --tp")
    lay["attention_dp_size"] = check_attention_dp_size(size, tp)  # R | TP (0: every GPU its own sequences)
    return lay


def decode_grid_best(st, lays, max_batch, context) -> int:
    """Index of the layout with the most decode tokens/s per GPU at up to ``max_batch`` sequences (fits memory)."""
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
    lays = stt.replica_layouts(st, gpus)
    ok = (gpus % lays["gpus"]) == 0
    lays = {k: v[ok] for k, v in lays.items()}
    fit = stt.decode_grid(st, lays, 1.0, prompt)["fits"]
    t = stt.prefill_grid(st, lays, budget, prompt)
    thr = np.where(fit, budget / t / lays["gpus"], 0.0)
    if not (thr > 0).any():
        raise InputError("prefill_gpus", f"the model does not fit {gpus} × {st.chip}", "more prefill GPUs")
    return stt.layout_row(lays, int(np.argmax(thr - 1e-9 * lays["gpus"])))


# --------------------------------------------------------------------------------------
# A deployment: inputs checked, pools run
# --------------------------------------------------------------------------------------


def _scheduler_limits(stack, dep: Deployment, traffic: Traffic) -> tuple:
    """Max running sequences B and step budget T per scheduler (given, else the stack's), checked with the train
    period and the SLOs."""
    fw = framework_defaults(stack)
    B = int(fw["max_batch"] if dep.max_batch is None else dep.max_batch)
    T = int(fw["budget"] if dep.budget is None else dep.budget)
    for name, v, lo, hi in (("max_batch", B, 1, 65536), ("budget", T, 1, 10**7)):
        if not lo <= v <= hi:
            raise InputError(name, f"{v}", f"a whole number from {lo} to {hi}")
    if T < B:
        raise InputError("budget", f"{T} tokens per step is below max batch {B}",
                         "a step budget ≥ the max batch (every running sequence decodes one token a step)")
    if dep.cadence is not None and not (0 < dep.cadence <= 10):
        raise InputError("cadence", f"{dep.cadence!r} s", "a step period from 0 to 10 s, e.g. 0.02")
    for name, v in (("ttft_slo", traffic.ttft_slo), ("tpot_slo", traffic.tpot_slo)):
        if v is not None and not (0 < v <= 1e5):
            raise InputError(name, f"{v!r} s", "a positive time in seconds")
    return B, T


def _requests(workload: Workload, traffic: Traffic) -> tuple:
    """The requests: (arrival times, ISL, OSL, description), from the trace or drawn with the seed."""
    if traffic.trace is not None:
        tr = traffic.trace
        arr = np.asarray(tr["arrival_s"], dtype=float)
        return arr, np.asarray(tr["isl"], dtype=float), np.asarray(tr["osl"], dtype=float), \
            f"trace of {int(arr.size)} requests"
    return draw_requests(workload.isl, workload.osl, traffic.requests, traffic.rate, workload.concurrency,
                         workload.arrivals, traffic.burstiness, np.random.default_rng(traffic.seed))


def _decode_gpus(st, concurrency, dep: Deployment) -> int:
    """GPUs of the decode pool (of the whole deployment when aggregated), checked against the other pool."""
    disagg, pf, dc, gpus = dep.disaggregated, dep.prefill_gpus, dep.decode_gpus, dep.gpus
    if disagg and (pf is None or dc is None):
        raise InputError("prefill_gpus" if pf is None else "decode_gpus", "given alone",
                         "both --prefill-gpus and --decode-gpus")
    if disagg and concurrency is not None:
        raise InputError("concurrency", "closed-loop traffic is simulated for aggregated deployments",
                         "--rate or --trace with --prefill-gpus/--decode-gpus")
    n_dec = int(dc) if disagg else int(gpus or st.system.scaleup_size)
    if gpus is not None and disagg and int(gpus) != int(pf) + int(dc):
        raise InputError("gpus", f"{gpus} ≠ prefill {pf} + decode {dc}", "--gpus = --prefill-gpus + --decode-gpus")
    for name, v in (("gpus", n_dec), ("prefill_gpus", pf)):
        if v is not None and not (1 <= int(v) <= 1e5 and int(v) == v):
            raise InputError(name, f"{v!r}", "a whole number of GPUs from 1 to 10⁵")
    return n_dec


def _decode_pool(st, n_dec: int, layout, B: int, T: int, isl_a, osl_a) -> dict:
    """The decode (or aggregated) pool: its replica layout, replica count and step table. The frameworks' max
    running sequences and step budget are per scheduler: one per attention-DP rank."""
    max_ctx = float(np.max(isl_a + osl_a))
    mean_isl = float(np.mean(isl_a))
    mean_ctx = float(np.mean(isl_a + osl_a / 2.0))
    lay = _pick_layout(st, n_dec, layout, B, mean_ctx)
    g = int(lay["tp"] * lay["pp"])
    ranks = int(stt.attention_ranks(lay))
    if n_dec % g:
        raise InputError("gpus", f"{n_dec} GPUs is not a whole number of TP·PP = {g} replicas", f"a multiple of {g}")
    table = stt.StepTable(st, lay, max_batch=B * ranks, max_context=max_ctx, prompt=mean_isl, budget=T * ranks,
                          kv_context=mean_ctx)
    return dict(table=table, replicas=n_dec // g, ranks=ranks, B=B * ranks, T=T * ranks, B_rank=B, T_rank=T,
                gpus=n_dec, max_ctx=max_ctx, mean_isl=mean_isl)


def _receive_notes(n: int, pool: dict, disagg: bool) -> list:
    """A receive interval N > 1 (SGLang's ``--scheduler-recv-interval``) with the pool: refused under attention DP
    (SGLang asserts it off there, as ``serve``), noted where disaggregated (TTFT is the prefill pool's, which
    receives after each prefill step; the decode pool is simulated receiving every step)."""
    if n <= 1:
        return []
    check_receive(n, pool["ranks"] > 1, pool["table"].as_dict()["layout"]["label"])
    return [f"receive interval {n}: the prefill pool receives after each of its prefill steps, the decode pool "
            "is simulated receiving every step"] if disagg else []


def _config(st, pool: dict, disagg: bool, src: str, n: int, cadence, stack, seed) -> dict:
    """What was simulated (the result's ``config``)."""
    table = pool["table"]
    label = stack.version_label if isinstance(stack, Stack) else (stack or "generic")
    return dict(model=st.model.name, hardware=st.system.name, chip=st.chip,
                mode="disaggregated" if disagg else "aggregated", traffic=src, requests=n, replicas=pool["replicas"],
                layout=table.as_dict()["layout"], max_batch=pool["B"], budget=pool["T"],
                max_batch_per_rank=pool["B_rank"], budget_per_rank=pool["T_rank"],
                schedulers_per_replica=pool["ranks"], kv_tokens_per_replica=table.kv_tokens, cadence_s=cadence,
                efficiency=st.efficiency, header=st.label, weights_dtype=st.weights_label, kv_dtype=st.kv_dtype,
                mtp=st.mtp, acceptance=st.acceptance, framework=label, seed=seed, t_request_s=st.t_request,
                recv_interval=st.serving_stack.recv_interval)


def _stagger(osl_a: np.ndarray, closed: int, replicas: int) -> None:
    """Closed loop, staggered start: the first request of user j of a replica is cut to (j + 1)/c of its OSL, so the
    users' progress is spread evenly from the first step (steady state at once; these requests are warm-up)."""
    ids = np.arange(osl_a.size)
    c = max(1, -(-closed // replicas))
    for r in range(replicas):
        first_ids = ids[r::replicas][:c]
        frac = (np.arange(first_ids.size) + 1.0) / first_ids.size
        osl_a[first_ids] = np.maximum(1.0, np.round(osl_a[first_ids] * frac))


def _pool_run(table, arr, ids, isl, osl, out: Out, sched: Scheduler, replicas: int, *, closed=None, think_s=0.0,
              progress=None) -> list:
    """Round-robin the requests over ``replicas`` identical replicas and run each; returns the per-replica totals.
    ``closed`` users per replica: each replica's first ``closed`` requests start at 0, the rest follow completions."""
    stats = []
    ids = np.asarray(ids)
    arr = np.asarray(arr, dtype=float)
    isl_l = isl if isinstance(isl, list) else list(isl)
    osl_l = osl if isinstance(osl, list) else list(osl)
    done_before = 0
    for r in range(replicas):
        mine = ids[r::replicas]
        if closed is not None:
            a_t, a_id, it = [0.0] * min(closed, len(mine)), mine[:closed].tolist(), iter(mine[closed:].tolist())
        else:
            a_t, a_id, it = arr[r::replicas].tolist(), mine.tolist(), None
        if not a_id:
            continue
        cb = None if progress is None else (lambda k, base=done_before: progress(base + k))
        stats.append(run_replica(table, a_t, a_id, isl_l, osl_l, out, sched, closed_next=it, think_s=think_s,
                                 progress=cb))
        done_before += len(a_id) + (0 if it is None else len(mine) - len(a_id))
    return stats


def _aggregated(st, pool: dict, arr, isl_a, osl_a, out: Out, cadence, closed, think_s, progress) -> tuple:
    """Run the aggregated pool: (per-replica totals, [] for no prefill pool, admission times)."""
    R = pool["replicas"]
    sched = Scheduler(max_batch=pool["B"], budget=pool["T"], kv_tokens=pool["table"].kv_tokens,
                      acceptance=st.acceptance, cadence=cadence or 0.0, prefill=True,
                      reserve_whole=st.serving_stack.reserves_whole_request,
                      recv_interval=st.serving_stack.recv_interval)
    dstats = _pool_run(pool["table"], arr, np.arange(arr.size), isl_a.tolist(), osl_a.tolist(), out, sched, R,
                       closed=None if closed is None else max(1, -(-closed // R)), think_s=think_s, progress=progress)
    return dstats, [], np.asarray(out.admit)


def _disaggregated(st, pool: dict, dep: Deployment, arr, isl_a, osl_a, out: Out, cfg: dict, progress) -> tuple:
    """Run the prefill pool, hand each prompt's KV over the NICs, run the decode pool: (decode totals, prefill
    totals, admission times to prefill). Adds the prefill pool to ``cfg``."""
    n, ids, whole = arr.size, np.arange(arr.size), st.serving_stack.reserves_whole_request
    n_pf, isl_l = int(dep.prefill_gpus), isl_a.tolist()
    lay_p = _layout_dict(dep.prefill_layout) or _pick_prefill_layout(st, n_pf, pool["T_rank"], pool["mean_isl"])
    gp = int(lay_p["tp"] * lay_p["pp"])
    if n_pf % gp:
        raise InputError("prefill_gpus", f"{n_pf} is not a multiple of the prefill replica's {gp} GPUs",
                         f"a multiple of {gp}")
    Tp = pool["T_rank"] * int(stt.attention_ranks(lay_p))
    Bp = max(1, min(Tp, 4096))
    ptable = stt.StepTable(st, lay_p, max_batch=Bp, max_context=pool["max_ctx"], prompt=pool["mean_isl"], budget=Tp,
                           role="prefill", n_context=4)
    pout = Out.empty(n)
    psched = Scheduler(max_batch=Bp, budget=Tp, kv_tokens=ptable.kv_tokens, prefill=True, reserve_whole=whole)
    pstats = _pool_run(ptable, arr, ids, isl_l, [1.0] * n, pout, psched, n_pf // gp,
                       progress=progress and (lambda k: progress(k // 2)))
    xfer = stt.kv_transfer_s(st, isl_a, lay_p["tp"])
    arr2 = np.asarray(pout.finish) + xfer
    ok = np.isfinite(arr2)
    o = np.argsort(np.where(ok, arr2, np.inf), kind="stable")[: int(ok.sum())]
    dsched = Scheduler(max_batch=pool["B"], budget=pool["T"], kv_tokens=pool["table"].kv_tokens,
                       acceptance=st.acceptance, cadence=dep.cadence or 0.0, prefill=False, reserve_whole=whole)
    dstats = _pool_run(pool["table"], arr2[o], ids[o], isl_l, osl_a.tolist(), out, dsched, pool["replicas"],
                       progress=progress and (lambda k: progress(n // 2 + k // 2)))
    cfg.update(prefill_replicas=n_pf // gp, prefill_layout=ptable.as_dict()["layout"], prefill_gpus=n_pf,
               decode_gpus=pool["gpus"], kv_transfer_s=float(np.mean(xfer)))
    return dstats, pstats, np.asarray(pout.admit)


# --------------------------------------------------------------------------------------
# The public calls
# --------------------------------------------------------------------------------------


def run(model, hardware, workload: Workload, traffic: Traffic, deployment: Deployment | None = None,
        layout: Layout | None = None, stack=None, efficiency=None, *, progress=None) -> SimResult:
    """Simulate one deployment of ``model`` on ``hardware`` under ``traffic`` (module docstring).

    ``workload``: ISL/OSL (a number or a :func:`parse_lengths` distribution), ``concurrency`` (closed-loop users;
    None for a rate or a trace), speculation (``mtp``, ``acceptance``) and ``arrivals`` ('poisson' or 'gamma' at a
    rate — name it: Workload's default 'steady' is a closed loop's; 'steady', the users' progress spread out, or
    'waves', all starting together, in a closed loop).
    ``layout``: one replica (the decode pool's when disaggregated; :func:`layout_from_flags`), None for the
    highest throughput per GPU at the max batch. ``stack``: a ``--framework`` name or a ``Stack``; ``efficiency``:
    a preset name, 'auto', 'ideal' or an ``Efficiency``. ``progress(k)`` is called with requests done."""
    dep = deployment or Deployment()
    if sum(x is not None for x in (traffic.rate, workload.concurrency, traffic.trace)) != 1:
        raise InputError("rate", "give exactly one of a rate, a concurrency or a trace",
                         "--rate R, --concurrency C or --trace FILE")
    st = stt.stack(model, hardware, weights_dtype=dep.weights_dtype, kv_dtype=dep.kv_dtype, mtp=workload.mtp,
                   acceptance=workload.acceptance, efficiency=efficiency, usd_per_gpu_hour=dep.usd_per_gpu_hour,
                   framework=stack, compute_dtype=dep.compute_dtype)
    B, T = _scheduler_limits(stack, dep, traffic)
    arr, isl_a, osl_a, src = _requests(workload, traffic)
    pool = _decode_pool(st, _decode_gpus(st, workload.concurrency, dep), layout, B, T, isl_a, osl_a)
    closed = int(workload.concurrency) if workload.concurrency is not None else None
    notes = _receive_notes(st.serving_stack.recv_interval, pool, dep.disaggregated)
    if closed and closed % pool["replicas"]:
        notes.append(f"{closed} users over {pool['replicas']} replicas: {closed // pool['replicas']}–"
                     f"{-(-closed // pool['replicas'])} per replica")
    cfg = _config(st, pool, dep.disaggregated, src, int(arr.size), dep.cadence, stack, traffic.seed)
    out = Out.empty(int(arr.size), arrival=True)
    if closed is not None and workload.arrivals != "waves":  # waves: every user starts at 0 with the same request,
        _stagger(osl_a, closed, pool["replicas"])           # as a benchmark client does (serve.wave_schedule)
    if dep.disaggregated:
        dstats, pstats, admit0 = _disaggregated(st, pool, dep, arr, isl_a, osl_a, out, cfg, progress)
        cfg["gpus"] = int(dep.prefill_gpus) + pool["gpus"]
    else:
        dstats, pstats, admit0 = _aggregated(st, pool, arr, isl_a, osl_a, out, dep.cadence, closed, traffic.think_s,
                                             progress)
        cfg["gpus"] = pool["gpus"]
    return result(st, cfg, notes, out, arr, isl_a, osl_a, admit0, (dstats, pstats), closed, traffic, pool["B"])


def simulate(model, hardware, *, gpus=None, rate=None, concurrency=None, trace=None, requests=10000, isl="1000",
             osl="1000", arrivals="poisson", burstiness=2.0, tp=None, ep=None, pp=None, attention_dp=None,
             attention_dp_size=None, prefill_gpus=None, decode_gpus=None, prefill_layout=None, max_batch=None,
             budget=None, cadence=None, weights_dtype=None, kv_dtype=None, mtp=0, acceptance=None, efficiency=None,
             ideal=False, usd_per_gpu_hour=None, framework=None, ttft_slo=None, tpot_slo=None, seed=0, warmup=None,
             progress=None, think_s=0.0, compute_dtype=None, recv_interval=None) -> SimResult:
    """Simulate one deployment of ``model`` on ``gpus`` GPUs of ``hardware`` (module docstring): the flat keyword
    form of :func:`run`, one keyword per field of its inputs (hence over 12 parameters; notebooks, ``plan``).

    Traffic: ``rate`` (requests/s, Poisson, or gamma with ``arrivals='gamma'`` and coefficient of
    variation ``burstiness``), or ``concurrency`` (closed loop: that many users, each sending its
    next request when the last completes, ``think_s`` later; their progress spread out, or with
    ``arrivals='waves'`` all starting together), or ``trace`` (dict of arrays
    ``arrival_s, isl, osl`` from :func:`parse_trace`). ``isl``/``osl``: fixed or distributions
    (:func:`parse_lengths`). Layout flags describe one replica (decode pool when disaggregated);
    omitted, the layout with the highest throughput per GPU at ``max_batch`` is chosen. ``attention_dp_size`` R:
    attention DP over R groups of TP/R GPUs, each group its own scheduler (as ``serve``).
    ``cadence`` (s): the lecture's fixed train schedule. SLOs (s) set goodput. ``recv_interval`` N: the scheduler
    receives new requests every N decode steps (SGLang's ``--scheduler-recv-interval``; SGLang stacks only).
    """
    if ideal:  # --ideal with a preset or 'auto' is one error naming both (engine.efficiency.resolve)
        efficiency = resolve(None, efficiency, True)
    workload = Workload(isl=isl, osl=osl, concurrency=concurrency, mtp=mtp,
                        acceptance=1.0 if acceptance is None else acceptance, arrivals=arrivals)
    traffic = Traffic(rate=rate, trace=trace, requests=requests, burstiness=burstiness, think_s=think_s, seed=seed,
                      warmup=warmup, ttft_slo=ttft_slo, tpot_slo=tpot_slo)
    dep = Deployment(gpus=gpus, prefill_gpus=prefill_gpus, decode_gpus=decode_gpus, prefill_layout=prefill_layout,
                     max_batch=max_batch, budget=budget, cadence=cadence, weights_dtype=weights_dtype,
                     kv_dtype=kv_dtype, compute_dtype=compute_dtype, usd_per_gpu_hour=usd_per_gpu_hour)
    return run(model, hardware, workload, traffic, dep, layout_from_flags(tp, ep, pp, attention_dp, attention_dp_size),
               receiving(framework, recv_interval), efficiency, progress=progress)


__all__ = ["simulate", "run", "Traffic", "Deployment", "layout_from_flags", "SimResult", "parse_trace",
           "parse_lengths", "sample_lengths", "poisson_arrivals", "gamma_arrivals", "run_replica", "mdl_waiting_time",
           "percentiles", "example_trace_text", "framework_defaults", "DEFAULT_MAX_BATCH", "DEFAULT_BUDGET"]
