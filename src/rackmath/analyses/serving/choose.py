"""Making a plan: the typed inputs checked together, dtypes fixed, and the layouts a request leaves open chosen.

:func:`make_plan` is the one place a :class:`~.inputs.Plan` is made (``serve``, ``plan``, validation, ``plan
--explain``): the stack as it runs (speculation may turn its overlap scheduler off), the dtypes, the efficiency
preset, then the decode pool's layout (:func:`decode_pool`: the flags given, or the best layout that satisfies
them: :func:`choose_layout` ranks decode steps, :func:`best_serving_layout` scores the finalists with prefill
time-sliced in) and a disaggregated deployment's prefill pool (:func:`prefill_pool`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...engine.efficiency import resolve
from ...engine.deployment import (Deployment, check_attention_dp_size, check_attention_tp, ep_way_out,
                                  with_attention_groups)
from ...engine.layout import attention_ranks, check_weight_layout, evaluate as layout_evaluate
from ...engine.numbers import HwNumbers
from ...engine.search import layout_grid
from ...errors import InputError
from ...specs.hardware import load_hardware
from ...specs.models import load_model
from ... import units
from .evaluate import evaluate, prefill_pool_rate
from .inputs import (Layout, Plan, Stack, Workload, check_price, check_receive, load_stack, on_chip, pool,
                     speculating)
from .schedule import USABLE_MEMORY_FRACTION
from ..lecture.context import does_not_fit, spec_or_none


def choose_layout(mn, system, eff, gpus, concurrency, *, hw=None, constraints=None, max_pp=8, sched_overlap=False,
                  top=1, usable_fraction=USABLE_MEMORY_FRACTION):
    """Best valid layout of ``gpus`` GPUs for this step: the lowest step time that fits memory.

    Enumerates TP (powers of two and multiples of the domain), EP dividing TP, attention DP over every
    group count R dividing TP (SGLang ``--tp T --dp R --enable-dp-attention``; R = T: every GPU its own
    sequences) and PP ≤ ``max_pp`` (one vectorized call of the step model); keeps only layouts that satisfy
    the given flags (``constraints``: any of tp, ep, pp, attention_dp, attention_dp_size) and use every GPU;
    with C fixed, the shortest step is both the highest throughput and the lowest TPOT. ``top`` > 1 returns
    the ``top`` best (a list, best first) for a caller that scores them further (:func:`plan` scores the
    full time-sliced step, prefill included: :func:`best_serving_layout`), and beside them the ``top`` best with 1 < R < TP: a layout
    that was a finalist before partial attention DP was enumerated stays one.
    """
    hw = hw or HwNumbers.from_system(system, "bf16")
    g = layout_grid(mn, int(gpus), int(system.scaleup_size), micro_batches=[1.0], max_pp=max_pp,
                    uneven_experts=False)
    tp, ep, pp, adp = g["tp"], g["ep"], g["pp"], g["attention_dp"]
    ok = (gpus % (tp * pp)) == 0
    size = (constraints or {}).get("attention_dp_size")
    if not mn.is_moe and size is None:
        ok &= ~adp  # attention DP replicates a dense model's FFN too: never better than DP replicas
    for k, v in (constraints or {}).items():
        if v is None:
            continue
        if k == "attention_dp_size":  # R groups of TP/R GPUs: R must divide TP
            ok &= adp & (tp % int(v) == 0)
        else:
            ok &= (g[k] == v) if k != "attention_dp" else (adp == bool(v))
    ep_given = (constraints or {}).get("ep")
    if not ok.any() and ep_given and mn.is_moe and mn.n_experts % int(ep_given):
        raise InputError("ep", f"{mn.n_experts} experts do not divide over ep={ep_given} GPUs "
                         f"({mn.n_experts / ep_given:.3g} each)", ep_way_out(mn.n_experts, int(ep_given)))
    if not ok.any():
        raise InputError("tp", f"no layout of {gpus} × {system.chip.name} satisfies "
                         + ", ".join(f"{k}={v}" for k, v in (constraints or {}).items() if v is not None),
                         "flags whose degrees divide the GPUs (TP·PP | GPUs, EP | TP, EP ≤ experts)")
    tp, ep, pp, adp = tp[ok], ep[ok], pp[ok], adp[ok]
    if size is None:  # attention DP over every group count R that divides TP (R = TP: every chip its own sequences)
        tp, ep, pp, adp, ranks = with_attention_groups(tp, ep, pp, adp, mn.tp_heads)
    else:
        ranks = attention_ranks(tp, adp, size)
    dp = np.floor(gpus / (tp * pp))
    b = np.maximum(np.asarray(concurrency, dtype=float) / (dp * pp), 1.0)
    res = layout_evaluate(mn, hw, tp=tp, ep=ep, pp=pp, attention_dp=adp, adp_ranks=ranks, micro_batch=b, chips=gpus,
                          usable_fraction=usable_fraction, efficiency=eff, sched_overlap=sched_overlap)
    fits = np.asarray(res.fits)
    if not fits.any():
        if float(mn.weight_bytes) > gpus * float(system.chip.hbm_bytes):  # the weights alone exceed the whole HBM
            # not one sequence: say what the weights need and what would hold them (issue 35)

            raise InputError("gpus", *does_not_fit(spec_or_none(mn.name), system, gpus, mn.weight_bytes,
                                                   usable_fraction))
        # issue 34: weights that fit the GPUs' whole HBM but not the stack's usable share ran in practice
        # (DeepSeek-R1 FP8 on 4 × B200 / GB200): rank every layout; the evaluation says fits = false and by how much
        fits = np.ones_like(fits, dtype=bool)
    score = np.where(fits, np.asarray(res.tpot_s, dtype=float), np.inf) + 1e-9 * tp * pp  # ties: smaller group
    ranked = [int(i) for i in np.argsort(score, kind="stable") if np.isfinite(score[i])]
    # the `top` best of plain TP and full attention DP stay finalists; the `top` best with 1 < R < TP join them
    partial = adp & (ranks < tp)
    n = max(int(top), 1)
    order = sorted([i for i in ranked if not partial[i]][:n] + [i for i in ranked if partial[i]][:n], key=ranked.index)
    order = order[:1] if top == 1 else order
    out = [dict(tp=int(tp[i]), ep=int(ep[i]), pp=int(pp[i]), attention_dp=bool(adp[i]),
                attention_dp_size=0 if not adp[i] or int(ranks[i]) == int(tp[i]) else int(ranks[i])) for i in order]
    return out[0] if top == 1 else out


#: Layouts the decode-step ranking keeps for the full serving evaluation (prefill time-sliced in).
LAYOUT_FINALISTS = 8


def make_plan(model, hardware, workload: Workload, layout: Layout | None = None, stack=None, efficiency=None) -> Plan:
    """Check the inputs together and fix what does not depend on the efficiency: stack, dtypes, layout(s).

    ``layout`` None: the best layout of one scale-up domain; ``stack`` a :class:`Stack`, a name (``sglang@0.5.7``)
    or None (the generic stack); ``efficiency`` None/'auto' (``engine.efficiency.resolve``: the measured silicon and
    the stack version's fitted times where it has them, else the chip's calibrated preset),
    'preset', 'measured', 'ideal', a preset name or an ``Efficiency``: the preset layouts are chosen with. The price
    is the hardware chip's ``usd_per_hour``.
    Each input is checked here (``Workload.checked``, ``Layout.checked``, ``Stack.checked``, the price).
    """
    m, system = load_model(model), load_hardware(hardware)
    check_price(system.chip.usd_per_hour)
    workload = workload.checked()
    layout = (Layout() if layout is None else layout).checked()
    lay_p = layout.prefill
    st = on_chip(load_stack(stack), system.chip).checked()
    spec = speculating(st, workload.mtp)
    wdt, kvdt, cdt = plan_dtypes(m, system.chip, st)
    eff = resolve(system.chip.name, efficiency, stack=st)  # auto: the version's own times where it has them
    if workload.arrivals == "waves" and lay_p is not None:
        raise InputError("arrivals", "waves with separate prefill and decode pools",
                         "steady (aggregated deployments only for waves)")
    n_dec = int(layout.gpus) if layout.gpus is not None else int(system.scaleup_size)
    gpus = n_dec + (int(lay_p.gpus) if lay_p is not None else 0)
    p = Plan(m, system, workload, pool(n_dec, dict(tp=1)), spec, wdt, kvdt, cdt, gpus, system.chip.usd_per_hour,
             prefill_gpus=None if lay_p is None else int(lay_p.gpus), kv_shards=layout.kv_shards, efficiency=eff)
    dep_note = _dp_attention_ep(layout)
    if dep_note:
        p.notes.append(dep_note)
        layout = replace(layout, tp=layout.ep)
    if spec is not st:
        p.notes.append(f"speculative decoding turns {spec.name}'s overlap scheduler off: its host time adds to "
                       "every step")
    if spec.reserves_whole_request:
        p.notes.append(f"memory holds each sequence's KV for the whole request, ISL + OSL = "
                       f"{workload.isl + workload.osl:,.0f} tokens: {spec.name} admits a request only with KV blocks "
                       "for all of it (GUARANTEED_NO_EVICT)")
    p.layout = decode_pool(p, layout, eff)
    if p.layout.chosen:
        p.notes.append(f"layout chosen: {p.layout.label()} (the shortest step that fits; give --tp/--ep/--pp/"
                       "--attention-dp/--attention-dp-size to fix it)")
    if lay_p is not None:
        p.prefill_layout = prefill_pool(p, lay_p, eff)
    _check_receive(p)
    return p


def _check_receive(p: Plan) -> None:
    """A receive interval above 1 (``Stack.recv_interval``, SGLang's ``--scheduler-recv-interval``) with its layout:
    refused with attention DP on the servers that run decode steps (the aggregated replicas, a decode pool), which
    SGLang refuses (``SchedulerRecvSkipper`` asserts it is off); on a disaggregated deployment, noted: TTFT is the
    prefill pool's, whose steps are prefills, after which SGLang receives at once."""
    n = p.stack.recv_interval
    check_receive(n, p.layout.attention_dp, p.layout.label())
    if n > 1 and p.disaggregated:
        p.notes.append(f"receive interval {n}: no wait on TTFT here — the prefill pool receives after each of its "
                       "steps, which are prefills (SGLang's count jumps to the interval after a prefill)")


def plan_dtypes(m, chip, stack: Stack) -> tuple:
    """(weights, KV, GEMM) dtypes of a plan: the stack's, else the model's published weights (None), its KV dtype or
    bf16, and the dtype the chip multiplies those weights in (``Chip.gemm_dtype``)."""
    wdt = units.normalize_dtype(stack.weights_dtype, "weights_dtype") if stack.weights_dtype else None
    kvdt = units.normalize_dtype(stack.kv_dtype or getattr(m, "kv_dtype", None) or "bf16", "kv_dtype")
    return wdt, kvdt, chip.gemm_dtype(wdt or m.native_dtype, stack.compute_dtype)


def _dp_attention_ep(layout: Layout) -> str | None:
    """h34 (issue 34): SGLang's DP-attention + EP, ``--tp 1 --ep N --dp-attention``, is conventions.md's ``--tp N --ep N
    --attention-dp``: the note saying so, or None where the layout is not spelled that way."""
    tp, ep = layout.tp, layout.ep
    if layout.attention_dp and tp is not None and ep is not None and int(tp) == 1 and int(ep) > 1 \
            and not layout.attention_dp_size:
        return (f"tp 1, ep {int(ep)}, attention DP (SGLang's spelling of DP-attention + EP) is read as attention "
                f"data-parallel over the {int(ep)} EP ranks: TP{int(ep)} EP{int(ep)} attention-DP (conventions.md)")
    return None


def _checked_request(p: Plan, req: Layout) -> tuple:
    """The decode pool's flags checked against the model and the GPUs: (attention_dp, R, weight layout, experts)."""
    m, n_dec = p.model, p.layout.gpus
    rx, adp, size, tp = int(req.redundant_experts or 0), req.attention_dp, req.attention_dp_size or None, req.tp
    if not m.n_experts and (rx or req.uneven_experts):  # before the layout choice, which would blame the ep it picks
        raise InputError("redundant_experts" if rx else "uneven_experts", f"{m.name} is dense (no experts to place)",
                         "expert placement flags only for a mixture-of-experts model")
    adp_size = 0  # attention DP over R groups (0: over every TP GPU)
    if size is not None:  # R must divide TP (the TP given, or the TP chosen below)
        adp_size = check_attention_dp_size(size, int(tp) if tp is not None else size)
        if size > n_dec:
            raise InputError("attention_dp_size", f"{size:g} groups on {n_dec} GPUs",
                             f"a divisor of tp, at most the {n_dec} GPUs")
        adp = True
    wlay = str(check_weight_layout(req.weight_layout, m.name, bool(m.n_experts)))
    if wlay != "1d":
        why = ("without --tp (the layout search keeps 1D)" if tp is None else "with attention DP" if adp
               else "with a disaggregated deployment" if p.disaggregated else "")
        if why:
            raise InputError("weight_layout", f"{wlay} {why}", "1d, or 2d / gathered with --tp for a dense model, "
                             "aggregated, without attention DP")
    return adp, adp_size, wlay, rx


def decode_pool(p: Plan, req: Layout, eff) -> Layout:
    """The decode pool's layout: built from the flags with ``tp`` given (TP must split the heads unless attention
    DP keeps them whole), else the best layout that satisfies the flags given — ``--ep 72 --attention-dp`` on 72
    GPUs is attention DP over 72 ranks with EP 72 (:func:`choose_layout`, then :func:`best_serving_layout`); with a
    receive interval above 1 the choice keeps to layouts without attention DP."""
    n_dec, m = p.layout.gpus, p.model
    adp, adp_size, wlay, rx = _checked_request(p, req)
    tp, ep, pp = req.tp, req.ep, req.pp
    if tp is not None:
        if not adp:  # TP must split the heads (issue 35); attention DP keeps them whole
            check_attention_tp(p.numbers("decode"), int(tp), n_dec)
        lay = dict(tp=int(tp), ep=int(ep or 1), pp=int(pp or 1), attention_dp=bool(adp), attention_dp_size=adp_size)
        chosen = False
    else:
        no_adp = p.stack.recv_interval > 1  # SGLang has no receive interval under attention DP (_check_receive)
        cons = dict(ep=ep, pp=pp, attention_dp=True if adp else False if no_adp else None,
                    attention_dp_size=req.attention_dp_size or None)
        if rx == 0 and not req.uneven_experts:
            cands = choose_layout(p.numbers("decode"), p.system, eff, n_dec, float(np.max(p.workload.concurrency)),
                                  hw=p.hw(), constraints=cons, sched_overlap=p.stack.overlap_scheduler,
                                  top=LAYOUT_FINALISTS, usable_fraction=p.stack.mem_fraction)
            lay = cands[0] if p.disaggregated or len(cands) == 1 else best_serving_layout(p, cands, n_dec, eff)
        else:  # redundant / uneven expert placement: TP = EP = the GPUs the flags give, attention DP
            tp = int(ep or n_dec)
            lay = dict(tp=tp, ep=int(ep or tp), pp=int(pp or 1), attention_dp=True)
        chosen = not all(v is not None for v in (ep, pp, adp))
    Deployment.build(p.system, n_dec, **lay, redundant_experts=rx, uneven_experts=req.uneven_experts, model=m)
    return pool(n_dec, lay, redundant_experts=rx, uneven_experts=bool(req.uneven_experts), chosen=chosen,
                weight_layout=wlay)


def prefill_pool(p: Plan, req: Layout, eff) -> Layout:
    """A disaggregated deployment's prefill pool: as launched with ``tp`` given (``tp 1, ep N, attention DP`` is
    SGLang's DP-attention + EP over N ranks), else the valid layout with the highest prompt tokens/s
    (:func:`~.evaluate.prefill_pool_rate`; ties: the first of equals, the shortest pass)."""
    n = int(req.gpus)
    if req.tp is not None:  # h34 (issue 34): the prefill pool's layout as launched
        ptp, pep, padp = int(req.tp), int(req.ep or 1), bool(req.attention_dp)
        if padp and ptp == 1 and pep > 1:  # SGLang's DP-attention + EP spelling (as for the decode pool)
            ptp = pep
        lay = dict(tp=ptp, ep=pep, pp=1, attention_dp=padp, attention_dp_size=0)
    else:
        cands = choose_layout(p.numbers("prefill"), p.system, eff, n, 1.0, hw=p.hw(),
                              sched_overlap=p.stack.overlap_scheduler, top=10**6, usable_fraction=p.stack.mem_fraction)
        lay = max(cands, key=lambda c: float(np.max(prefill_pool_rate(p, pool(n, c), eff))))
    Deployment.build(p.system, n, **lay, model=p.model)
    return pool(n, lay, chosen=req.tp is None)


def best_serving_layout(p: Plan, cands, n_dec, eff):
    """Of the decode-step finalists, the layout with the least time per output token per sequence at the highest
    concurrency asked, prefill time-sliced in: max(TPOT, C / X_out) (= TPOT unless the prefill budget binds; at a
    fixed C the least is also the highest output rate). An attention-DP layout's cheaper decode step may lose to its
    costlier mixed steps."""
    C = float(np.max(p.workload.concurrency))
    best, best_x = cands[0], np.inf
    for lay in cands:
        try:
            Deployment.build(p.system, n_dec, **lay, model=p.model)
        except InputError:
            continue
        q = replace(p, workload=replace(p.workload, concurrency=np.asarray(C)), layout=pool(n_dec, lay),
                    notes=[], _cache=p._cache)
        r = evaluate(q, eff)
        v = {k: float(np.asarray(r.values[k]).reshape(-1)[0]) for k in ("tpot_ms", "output_tok_s")}
        x = max(v["tpot_ms"] / 1e3, C / max(v["output_tok_s"], 1e-300))
        if x < best_x * (1 - 1e-9):
            best, best_x = lay, x
    return best
