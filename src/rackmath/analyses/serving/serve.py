"""Serving real workloads: continuous batching, disaggregated prefill/decode, speculative decoding.

The lecture's roofline (00:00) prices one forward pass. A serving stack runs passes back to back for a stream of
requests of ISL input and OSL output tokens, with C sequences in flight across the deployment
(``reference/conventions.md``). ``serve`` turns the one-pass roofline into steady-state serving numbers:

* **Continuous batching** (aggregated). Every step each in-flight sequence decodes (k + 1 tokens under
  speculative decoding) at the mean context L̄ = ISL + OSL/2, and the step also carries a chunk of prefill: in
  steady state the prompts of the requests that replace finished ones (h = cached-prefix share). Weights are read
  once for both (lecture 01:40: prefill rides on the decode's weight fetch).
* **Disaggregated** serving: a prefill pool and a decode pool; the deployment serves min(decode capacity, prefill
  capacity · OSL / ISL).

The package, by what each part is:

* ``inputs.py`` — the typed inputs :class:`Workload`, :class:`Layout`, :class:`Stack` (``load_stack``) and the
  :class:`Plan`; ``from_flat`` builds them from the flat keywords;
* ``choose.py`` — ``make_plan``: the inputs checked together, dtypes, and the layouts left open chosen;
* ``steps.py`` — what a step carries and its time (one call of ``engine.layout.evaluate`` → ``engine.step``);
* ``schedule.py`` — the steady state, chunked prefill, waves, TTFT (one equation per function);
* ``evaluate.py`` — ``evaluate(plan, efficiency) -> ServeResult``; ``explain.py`` — ``--explain`` and ``--ops``;
* this module — the public calls: ``serve = evaluate ∘ plan`` and the single passes validation measures.

The names of those modules stay importable from here (``serving.steady_state``, ``serving.load_stack``, …).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...engine.efficiency import load_efficiency, resolve
from ...engine.deployment import Deployment
from ...engine.roofline import usd_per_mtok  # noqa: F401 (the one $/Mtok formula, re-exported: serving.usd_per_mtok)
from ...specs.hardware import load_hardware
from ...specs.models import load_model
from .choose import LAYOUT_FINALISTS, choose_layout, make_plan, plan_dtypes
from .evaluate import FIELDS, ServeResult, evaluate, prefill_pool_rate
from .explain import ops
from .inputs import (FLAT_KEYS, STACKS, Layout, Plan, Stack, Workload, from_flat, load_stack, pool,
                     speculating)
from .schedule import (CLOSED_LOOP_PROMPTS_PER_CLIENT, MAX_BATCH_SIZE, MAX_NUM_TOKENS, USABLE_MEMORY_FRACTION,
                       batch_arrivals, closed_loop_ttft, disaggregated_output_rate, disaggregated_ttft,
                       disaggregated_wave_ttft, first_wave_share, held_context, kv_transfer_time, little_concurrency,
                       mean_decode_context, median_ttft, mixed_step_imbalance, mixed_step_share, mixed_steps_per_decode,
                       output_tokens_per_s, poisson_mixed_share, prefill_attended_context, prefill_chunks,
                       prefill_schedule, prefill_tokens_per_seq_step, prefill_wait, steady_state, steps_per_request,
                       time_sliced_schedule, tokens_per_s_per_user, total_tokens_per_s, tpot, wave_schedule,
                       waves_persist)
from .steps import (decode_numbers, draft_numbers, eager_step, mixed_numbers, prefill_numbers, prefill_speed_step,
                    prompt_pass_step, prompt_pass_time, run_step, speculative_step, step_kernels, synced_eager_step,
                    synced_prompt_pass)


def serve(model, hardware, workload: Workload | None = None, layout: Layout | None = None, stack=None,
          efficiency=None, **flat) -> ServeResult:
    """Steady-state serving of ``model`` on ``hardware``: ``evaluate(plan(...))``.

    The typed call: ``serve(model, hardware, Workload(isl=1000, osl=1000, concurrency=64), Layout(gpus=8, tp=8),
    "sglang@0.5.7", efficiency="auto")``. ``workload``: ISL/OSL, C sequences in flight (may be a numpy array),
    arrivals, prefix-cache share, speculation (:class:`Workload`); ``layout``: the pools' parallelism, None fields
    chosen (:class:`Layout`; None: the best layout of one scale-up domain); ``stack``: a :class:`Stack` or its name
    (``load_stack``: framework@version), with the budget, ``--eager`` and the dtypes; ``efficiency``: None/'auto'
    (the chip's calibrated preset, a cross-family preset, named, for chips without their own), 'ideal' (the
    lecture's roofline), a preset name or an ``Efficiency``. The price is the hardware's
    (``specs.hardware.priced``).

    The flat form (notebooks, README, docs): ``serve("llama-3.1-70b", "h100", isl=1000, osl=1000, concurrency=64,
    tp=8)`` — the keywords of ``inputs.FLAT_KEYS`` (the CLI's flags: gpus, tp, ep, pp, attention_dp,
    attention_dp_size, prefill_gpus/decode_gpus, prefill_tp/ep/attention_dp, mtp, acceptance, cached_share,
    arrivals, framework, max_num_tokens, eager, weights_dtype, kv_dtype, compute_dtype, weight_layout,
    redundant_experts, uneven_experts, kv_shards, usd_per_gpu_hour, ideal) only build those objects
    (``inputs.from_flat``).
    """
    return evaluate(plan(model, hardware, workload, layout, stack, efficiency, **flat))


def plan(model, hardware, workload: Workload | None = None, layout: Layout | None = None, stack=None,
         efficiency=None, **flat) -> Plan:
    """Everything ``serve`` fixes before an efficiency is applied (``choose.make_plan``): the same arguments as
    :func:`serve`, typed or flat; ``evaluate(plan, efficiency)`` then gives the numbers under any preset."""
    hardware, workload, layout, stack, efficiency = from_flat(hardware, workload, layout, stack, efficiency, **flat)
    return make_plan(model, hardware, workload, layout, stack, efficiency)


# --------------------------------------------------------------------------------------
# Single passes (records that measured one phase: Pope et al.'s Table 2, DeepSeek's units, measured steps)
# --------------------------------------------------------------------------------------

#: The keywords :func:`decode_step` and :func:`prefill_time` take for the layout and the stack (a record's inputs).
PASS_KEYS = ("tp", "ep", "pp", "attention_dp", "kv_shards", "redundant_experts", "weight_layout", "framework",
             "weights_dtype", "kv_dtype", "compute_dtype")


def decode_step(model, hardware, *, chips, batch, context, mtp=0, efficiency=None, ideal=False, **flat):
    """Time of one decode step of ``batch`` sequences at ``context`` on ``chips`` chips: (s, layout result, efficiency).

    ``flat``: :data:`PASS_KEYS` — the layout (``tp`` default ``chips``; ``weight_layout`` "1d" weight-stationary,
    "2d" or "gathered", Pope et al. 2022 §3.2) and the stack (``framework``, dtypes), as a record states them."""
    layout, stack = _pass_inputs(chips, flat)
    return single_pass(model, hardware, layout, stack, _pass_efficiency(hardware, efficiency, ideal, "decode"),
                       regime="decode", seqs=batch, tokens=context, mtp=mtp)


def prefill_time(model, hardware, *, chips, batch, isl, cached_share=0.0, efficiency=None, ideal=False, **flat):
    """Time to prefill ``batch`` prompts of ``isl`` tokens in one pass on ``chips`` chips: (s, result, efficiency).

    ``flat``: as :func:`decode_step`; ``weight_layout`` "2d" exchanges activations along both split axes (Pope et
    al. 2022's low-latency layout), "gathered" splits the batch and all-gathers each layer's weights (their
    large-batch prefill layout); ``engine.layout.WEIGHT_LAYOUTS``."""
    layout, stack = _pass_inputs(chips, flat)
    return single_pass(model, hardware, layout, stack, _pass_efficiency(hardware, efficiency, ideal, "prefill"),
                       regime="prefill", seqs=batch, tokens=isl, cached_share=cached_share)


def _pass_inputs(chips, flat: dict) -> tuple:
    """(Layout, Stack) of a single pass from its keywords: TP = the chips unless given, EP = PP = 1, no attention DP."""
    unknown = sorted(set(flat) - set(PASS_KEYS))
    if unknown:
        raise TypeError(f"decode_step() / prefill_time() got an unexpected keyword argument {unknown[0]!r}")
    g = flat.get
    layout = Layout(int(chips), g("tp") or int(chips), g("ep", 1), g("pp", 1), bool(g("attention_dp", False)),
                    g("redundant_experts", 0) or 0, weight_layout=str(g("weight_layout", "1d")),
                    kv_shards=g("kv_shards"))
    over = {k: g(k) for k in ("weights_dtype", "kv_dtype", "compute_dtype") if g(k) is not None}
    st = load_stack(g("framework"))
    return layout, (replace(st, **over) if over else st)


def _pass_efficiency(hardware, efficiency, ideal, regime):
    """A single pass's efficiency: an Efficiency as given, else ``resolve`` (None: the chip's preset for the regime)."""
    if not isinstance(efficiency, (str, type(None))):
        return load_efficiency(efficiency)
    return load_efficiency(resolve(load_hardware(hardware).chip.name, efficiency, ideal, regime))


def single_pass(model, hardware, layout: Layout, stack: Stack, eff, *, regime, seqs, tokens, mtp=0,
                cached_share=0.0):
    """One decode step ('decode': ``seqs`` sequences at context ``tokens``, ``mtp`` draft tokens verified) or one
    prefill pass ('prefill': ``seqs`` prompts of ``tokens``, a share ``cached_share`` cached) on ``layout``, through
    the one step model (``steps.run_step``): (step time, layout result, efficiency)."""
    m, system = load_model(model), load_hardware(hardware)
    wdt, kvdt, cdt = plan_dtypes(m, system.chip, stack)
    lay = layout
    dep = Deployment.build(system, int(lay.gpus), tp=lay.tp, ep=lay.ep, pp=lay.pp, attention_dp=lay.attention_dp,
                           redundant_experts=lay.redundant_experts, model=m)
    if regime == "decode":
        mn = decode_numbers(m, tokens, mtp, wdt, kvdt, lay.kv_shards)
    else:
        mn = prefill_numbers(m, isl=tokens, chunk=float(tokens) * (1.0 - cached_share), weights_dtype=wdt,
                             kv_dtype=kvdt, cached_share=cached_share, kv_shards=lay.kv_shards)
    p = Plan(m, system, Workload(float(tokens), 1.0, 1.0, acceptance=1.0),
             pool(dep.chips, dict(tp=dep.tp, ep=dep.ep, pp=dep.pp, attention_dp=dep.attention_dp),
                  redundant_experts=dep.redundant_experts, weight_layout=str(lay.weight_layout)),
             stack, wdt, kvdt, cdt, dep.chips, 0.0)
    res = run_step(p, mn, p.layout, eff, np.asarray(seqs, dtype=float) / dep.pp)
    res.values["bound"] = np.broadcast_to(res.bound, np.shape(res.values["tpot_s"]))
    return res.tpot_s, res, eff


__all__ = ["serve", "plan", "evaluate", "make_plan", "from_flat", "FLAT_KEYS", "Plan", "Workload", "Layout", "Stack",
           "STACKS", "load_stack", "speculating", "ServeResult", "FIELDS", "choose_layout", "LAYOUT_FINALISTS",
           "decode_step", "prefill_time", "single_pass", "PASS_KEYS", "ops", "prefill_pool_rate",
           "time_sliced_schedule", "mixed_steps_per_decode", "prefill_wait", "prefill_schedule", "steady_state",
           "disaggregated_ttft", "mixed_step_share", "mixed_step_imbalance", "wave_schedule", "waves_persist",
           "speculative_step", "eager_step", "prefill_speed_step", "synced_prompt_pass", "synced_eager_step",
           "prompt_pass_step", "prompt_pass_time", "step_kernels", "run_step", "poisson_mixed_share", "batch_arrivals",
           "first_wave_share", "closed_loop_ttft", "median_ttft", "disaggregated_wave_ttft",
           "CLOSED_LOOP_PROMPTS_PER_CLIENT",
           "mean_decode_context", "held_context", "steps_per_request", "prefill_tokens_per_seq_step",
           "prefill_attended_context", "tpot", "output_tokens_per_s", "total_tokens_per_s", "tokens_per_s_per_user",
           "usd_per_mtok", "prefill_chunks", "kv_transfer_time", "disaggregated_output_rate", "little_concurrency",
           "decode_numbers", "draft_numbers", "prefill_numbers", "mixed_numbers", "MAX_NUM_TOKENS", "MAX_BATCH_SIZE",
           "USABLE_MEMORY_FRACTION"]
