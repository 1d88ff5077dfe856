"""A plan evaluated under an efficiency: the serving numbers (:func:`evaluate`) and their result (:class:`ServeResult`).

:func:`evaluate` prices the plan's steps (``serving/steps.py``: the decode step with its speculation and eager
dispatch, the mixed steps, a prefill pool's passes) and hands the step times to the schedule
(``serving/schedule.py``: the steady state, waves, a closed-loop client's first wave, disaggregated TTFT).
``ServeResult.explain()`` is ``serving/explain.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ...engine.efficiency import for_stack, load_efficiency, resolve, stack_eager_s, stack_request_s, stack_warm_s
from ...engine.roofline import usd_per_mtok  # the one $/Mtok formula
from ...explain import Derivation
from ...results import ResultMixin
from .inputs import Plan
from .schedule import (CLOSED_LOOP_PROMPTS_PER_CLIENT, MAX_NUM_TOKENS, closed_loop_prefill, closed_loop_ttft,
                       disaggregated_output_rate, disaggregated_wave_ttft, first_wave_pass, first_wave_share,
                       kv_transfer_time, median_ttft, output_tokens_per_s, prefill_chunks, saturated_ttft,
                       steady_state, tokens_per_s_per_user, total_tokens_per_s, tpot, wave_schedule, waves_persist)
from .steps import (eager_step, mixed_numbers, prefill_speed_step, prompt_pass_time, run_step, speculative_step,
                    step_kernels)
from .explain import derive, ops
from ..fitting.evidence import nearest
from ...specs.hardware import load_hardware


# --------------------------------------------------------------------------------------
# The result
# --------------------------------------------------------------------------------------

FIELDS = ("output_tok_s_per_gpu", "total_tok_s_per_gpu", "tpot_ms", "ttft_ms", "step_ms", "bottleneck",
          "tokens_per_s_per_user", "usd_per_mtok_output", "usd_per_mtok_total", "output_tok_s", "total_tok_s",
          "concurrency", "fits", "mem_per_gpu_gb", "max_concurrency")


@dataclass(repr=False)
class ServeResult(ResultMixin):
    """Steady-state serving numbers (arrays broadcast over concurrency; scalars for one point)."""

    _SUMMARY = (("output_tok_s_per_gpu", "tok/s"), ("tpot_ms", "ms"), ("usd_per_mtok_output", "$"))

    model: str
    hardware: str
    mode: str  # "aggregated" | "disaggregated"
    gpus: int
    isl: float
    osl: float
    layout: dict
    layout_chosen: bool
    efficiency: str
    weights_dtype: str
    kv_dtype: str
    mtp: int
    acceptance: float
    cached_share: float
    usd_per_gpu_hour: float
    values: dict
    prefill: dict | None = None
    notes: list = field(default_factory=list)
    framework: str = "generic"
    efficiency_label: str = ""
    arrivals: str = "steady"
    compute_dtype: str = ""  # the dtype whose peak the weight GEMMs run at (Chip.gemm_dtype)
    stack_version: str = "generic"  # h34: stack@version assumed (specs/stacks.py), the stack name if unversioned
    recv_interval: int = 1  # decode steps between the scheduler's receives (Stack.recv_interval)
    _derivation: object = None

    @property
    def efficiency_used(self):
        """The Efficiency the numbers were computed with — a stack version's times and band applied
        (``engine.efficiency.for_stack``), which its name alone does not carry; None for a result built by hand."""
        return self.__dict__.get("_eff")

    def __getattr__(self, name):
        try:
            return self.__dict__["values"][name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, key):
        return self.as_dict()[key]

    def as_dict(self) -> dict:
        out = {}
        for k in FIELDS:
            v = self.values[k]
            a = np.asarray(v)
            out[k] = a.item() if a.ndim == 0 else a.tolist()
        out.update(framework=self.framework, stack_version=self.stack_version, recv_interval=self.recv_interval,
                   efficiency_label=self.efficiency_label)
        out.update(model=self.model, hardware=self.hardware, mode=self.mode, gpus=self.gpus, isl=self.isl,
                   osl=self.osl, layout=self.layout, layout_chosen=self.layout_chosen, efficiency=self.efficiency,
                   weights_dtype=self.weights_dtype, kv_dtype=self.kv_dtype, mtp=self.mtp,
                   acceptance=self.acceptance, cached_share=self.cached_share, arrivals=self.arrivals,
                   compute_dtype=self.compute_dtype, usd_per_gpu_hour=self.usd_per_gpu_hour, notes=list(self.notes))
        for k in ("ttft_median_ms", "mem_short_gb", "t_compute_ms", "t_weights_ms", "t_kv_ms", "t_comm_ms",
                  "t_latency_ms", "overhead_ms", "prefill_tokens_per_step", "decode_step_ms", "mixed_step_ms"):
            if k in self.values:
                a = np.asarray(self.values[k])
                out[k] = a.item() if a.ndim == 0 else a.tolist()
        if self.prefill is not None:
            out["prefill"] = self.prefill
        return out

    def explain(self) -> Derivation:
        if self._derivation is None:
            self._derivation = derive(self)
        return self._derivation

    def ops(self, index=0) -> list[dict]:
        """Per-operator breakdown of the decode step (``--ops``)."""
        return ops(self, index=index)

    def nearest_measured(self, k: int = 2) -> dict | None:
        """The ``k`` shipped measurements nearest to this configuration, each with rackmath's prediction of it out
        of sample (``analyses/fitting/evidence.py``); None for a sweep over concurrency."""
        c = np.asarray(self.values["concurrency"])
        if c.ndim:
            return None
        plan = self.__dict__.get("_plan")
        try:
            chip = plan.system.chip.name if plan is not None else load_hardware(self.hardware).chip.name
            return nearest(self.model, chip, gpus=self.gpus, isl=self.isl, osl=self.osl, concurrency=float(c),
                           framework=self.framework, k=k)
        except (OSError, ValueError, KeyError):  # the table missing or unreadable (a broken install): no evidence rows
            return None



# --------------------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------------------


def _short_note(res, stack) -> str:
    """The note of a configuration that does not fit: memory needed per GPU against the stack's share of HBM, the GB
    short, and the largest concurrency that fits (h34, issue 34: rackmath predicts it anyway — it ran in practice)."""
    need = float(np.max(np.asarray(res.mem_per_chip, dtype=float)))
    cap = float(np.min(np.asarray(res.mem_capacity, dtype=float)))
    short = max(float(np.max(-np.asarray(res.headroom_bytes, dtype=float))), 0.0)
    return (f"does not fit (fits = false): {need / 1e9:,.1f} GB per GPU needed (weights, KV, workspace) of "
            f"{cap / 1e9:,.1f} GB usable ({stack.mem_fraction:.0%} of HBM, {stack.version_label}): {short / 1e9:,.1f} GB "
            f"short; at most about {float(np.min(res.max_concurrency)):g} sequences fit — predicted anyway")



def prefill_pool_rate(p, lp, eff):
    """Prompt tokens/s of a disaggregated prefill pool of layout ``lp``: X_P = dp · n_seq · c / t_pass.

    Each replica's pass carries n_seq = ⌊budget / c⌋ prompt chunks of c tokens (× TP under attention DP, one
    scheduler per rank) and runs eagerly (:func:`~.steps.prompt_pass_step`: host and GPU serial where the experts'
    all-to-all syncs them, :func:`~.steps.synced_prompt_pass`). The prefill pool's layout is the valid layout with
    the highest X_P (ties: the shortest one-prompt pass): the pool exists to keep the decode pool fed.
    """
    chunk = p.chunk()
    seqs = max(1.0, np.floor((p.stack.max_num_tokens or MAX_NUM_TOKENS) / chunk)) * lp.attention_ranks
    res_p = run_step(p, p.numbers("prefill"), lp, eff, seqs)
    t_pass = prompt_pass_time(res_p, eff, p.stack.name, lp.attention_dp, lp.ep)
    return lp.dp * seqs * chunk / t_pass



def evaluate(p: Plan, efficiency=None) -> ServeResult:
    """Serving numbers of a plan under an efficiency preset (its numeric fields may be arrays of K candidates,
    broadcasting against the concurrency): time-sliced prefill and decode, MoE realities, speculation.

    ``efficiency`` None: the preset the plan was made with; a name ('auto', 'preset', 'measured', 'ideal', a preset)
    or an Efficiency."""
    if isinstance(efficiency, str):  # 'auto' as the plan's: the stack version's measured path where it has one
        efficiency = resolve(p.system.chip.name, efficiency, stack=p.stack)
    eff = for_stack(load_efficiency(efficiency if efficiency is not None else p.efficiency), p.stack)  # issue 34
    notes = list(p.notes) + ([eff.note] if getattr(eff, "note", "") else [])  # e.g. --efficiency measured, no curves
    dec = _decode(p, eff, notes)
    info = dict(t_decode=dec["t_dec"], t_verify=dec["t_verify"], t_draft=dec["t_draft"], b=dec["b"],
                t_decode_gpu=dec["res_d"].tpot_s, t_request=stack_request_s(eff, p.stack.name),
                t_warm=stack_warm_s(eff, p.stack.name),
                res_draft=dec["res_k"], t_draft_gpu=None if dec["res_k"] is None else dec["res_k"].tpot_s)
    if p.disaggregated:
        out = _disaggregated(p, eff, dec, info, notes)
    else:
        out = _aggregated(p, eff, dec, info, notes)
    return _result(p, eff, dec, out, info, notes)


def _decode(p: Plan, eff, notes: list) -> dict:
    """The decode step of b = C / (dp · PP) sequences per micro-batch (capped by the stack's max batch per scheduler
    × the R attention-DP ranks, each of which schedules its own, as ``simulate``):
    t_decode = t_verify + k · t_draft (:func:`~.steps.speculative_step`), eager where the stack runs no CUDA graphs."""
    lay, st, k = p.layout, p.stack, p.workload.mtp
    b = np.maximum(p.workload.concurrency / (lay.dp * lay.pp), 1.0)
    cap = st.max_batch_size * lay.attention_ranks  # one scheduler per attention-DP rank, each with its max batch
    if np.any(b > cap):
        notes.append(f"more than {cap} sequences per replica ({st.name} max batch {st.max_batch_size} per "
                     f"scheduler × {lay.attention_ranks}): the rest wait")
        b = np.minimum(b, cap)
    res_d = run_step(p, p.numbers("decode"), lay, eff, b)
    t_verify, t_draft, res_k = res_d.tpot_s, 0.0, None
    if k:
        # each draft pass is a forward of its own: where the host cannot hide behind the GPU (a serial stack, or
        # SGLang, whose overlap scheduler speculation turns off) it prepares and launches each one, t_host per pass
        res_k = run_step(p, p.numbers("draft"), replace(lay, pp=1), eff, b, sched=not st.overlap_scheduler)
        t_draft = res_k.tpot_s
    if not st.cuda_graphs:  # --eager: the host dispatches every kernel of the decode step too
        tau_e = stack_eager_s(eff, st.name)
        t_verify = eager_step(t_verify, step_kernels(res_d), tau_e)
        t_draft = eager_step(t_draft, step_kernels(res_k), tau_e) if k else 0.0
    fits = np.asarray(res_d.fits)
    if not np.all(fits):  # h34 (issue 34): say by how much, and predict anyway
        notes.append(_short_note(res_d, st))
    return dict(b=b, res_d=res_d, res_k=res_k, t_verify=t_verify, t_draft=t_draft, fits=fits,
                t_dec=speculative_step(t_verify, t_draft, k))


def _disaggregated(p: Plan, eff, dec: dict, info: dict, notes: list) -> dict:
    """A decode pool fed by a prefill pool: X_out = min(decode capacity, what the prefill pool feeds
    (:func:`~.schedule.disaggregated_output_rate`), Little's law over a request's cycle
    (:func:`~.schedule.closed_loop_rate`)); TTFT = prefill + KV hand-off + t_request + the closed loop's wait for
    the prefill pool (:func:`~.schedule.closed_loop_wait`), at least Little's law's where the decode pool's batch is
    capped below C (:func:`~.schedule.saturated_ttft`); a closed-loop client's first wave queues at the prefill
    pool."""
    w, st, lp, t_dec, t_req = p.workload, p.stack, p.prefill_layout, dec["t_dec"], info["t_request"]
    C, A = w.concurrency, w.acceptance
    running = dec["b"] * p.layout.dp * p.layout.pp  # sequences the decode pool runs (its max batch caps b)
    cap_out = output_tokens_per_s(running, t_dec, A)
    pf_tok_s = prefill_pool_rate(p, lp, eff)
    tau_e = stack_eager_s(eff, st.name)
    x_cap = disaggregated_output_rate(cap_out, pf_tok_s, w.isl, w.osl, w.cached_share)
    prefill_bound = x_cap < cap_out
    n_chunks = float(prefill_chunks(w.isl_new, p.chunk()))
    res_1 = run_step(p, p.numbers("prefill"), lp, eff, 1.0)
    t_pf = prompt_pass_time(res_1, eff, st.name, lp.attention_dp, lp.ep) * n_chunks
    kv_bytes = float(np.asarray(p.model.kv_cache_bytes(w.isl, p.kv_dtype)))
    t_xfer = kv_transfer_time(kv_bytes, p.system.chip.scaleout_bw * lp.tp * eff.eta_comm)
    # the prefill pool's queue, a closed loop of the running requests: a prompt takes a share S = ISL_new / X_P of the
    # pool; ahead of the wait, its own pass, the hand-off and the host
    t_tpot = tpot(t_dec, A)
    service = w.isl_new / pf_tok_s
    loop = closed_loop_prefill(running, service, t_pf + t_xfer + t_req, w.osl, t_tpot)
    x_out = np.minimum(x_cap, loop["rate"])
    capped = running < C * (1.0 - 1e-9)  # the decode pool's batch is capped below the requests
    saturated = prefill_bound | capped  # … or the prefill pool binds
    ttft, queue = saturated_ttft(loop["ttft_open"], saturated, C, x_out, w.osl, t_tpot)
    info.update(ttft_open=loop["ttft_open"], queue=queue, saturated=saturated, capped=capped, service=service,
                cycle_rest=loop["rest"], wait=loop["wait"], loop_requests=running)
    if w.arrivals == "closed-loop":  # the first wave queues at the prefill pool (closed_loop_ttft)
        share = first_wave_share(CLOSED_LOOP_PROMPTS_PER_CLIENT * C, C)
        eta_w = eff.eta_wave  # the first wave's passes at η_wave of the pool's steady speed (first_wave_pass)
        ttft_wave = disaggregated_wave_ttft(first_wave_pass(t_pf, eta_w), t_xfer, w.isl_new, pf_tok_s * eta_w, C,
                                            t_req)
        info.update(ttft_steady=ttft, ttft_wave=ttft_wave, wave_share=share)
        ttft = closed_loop_ttft(ttft_wave, ttft, share, info["t_warm"])
    info.update(prefill_one=res_1, n_chunks=n_chunks, tau_eager=tau_e,
                prefill=dict(gpus=lp.gpus, layout=dict(tp=lp.tp, ep=lp.ep, pp=lp.pp, attention_dp=lp.attention_dp,
                                                       dp=lp.dp, label=lp.label()),
                             input_tok_s=pf_tok_s, input_tok_s_per_gpu=pf_tok_s / lp.gpus, prefill_s=t_pf,
                             kv_transfer_s=t_xfer))
    if np.any(prefill_bound):
        notes.append("the prefill pool limits throughput: the decode pool idles part of the time")
    return dict(t_bar=t_dec, t_tpot=t_tpot, x_out=x_out, prefill_bound=prefill_bound, ttft=ttft, t_mix=t_dec)


def _aggregated(p: Plan, eff, dec: dict, info: dict, notes: list) -> dict:
    """Prefill time-sliced into the decode stream (:func:`~.schedule.steady_state` with the mixed step priced here),
    then a closed-loop client's first wave or lock-step waves where the arrivals say so."""
    w, lay, st, k = p.workload, p.layout, p.stack, p.workload.mtp
    b, t_dec, t_draft, ranks = dec["b"], dec["t_dec"], dec["t_draft"], lay.attention_ranks
    tau_e = stack_eager_s(eff, st.name)
    mn_d = p.numbers("decode")

    def mixed_step(sch):
        mn_m = mixed_numbers(mn_d, p.model, extra_tokens_per_seq=sch["c_tot"] / b, isl=w.isl, chunk=sch["c_rank"],
                             cached_share=w.cached_share, kv_dtype=p.kv_dtype)
        res_m = run_step(p, mn_m, lay, eff, b, adp_imbalance=sch["imbalance"] if lay.attention_dp else None)
        n_eager = step_kernels(res_m)
        t_gpu = prefill_speed_step(res_m.tpot_s, dec["res_d"].tpot_s, eff.eta_prefill)  # the prompt tokens at η_pf
        return speculative_step(eager_step(t_gpu, n_eager, tau_e), t_draft, k), (n_eager, res_m)

    ss = steady_state(b, ranks, w.isl_new, w.osl, t_dec, mixed_step, acceptance=w.acceptance, mtp=k,
                      budget=st.max_num_tokens, t_request=info["t_request"], arrivals=w.arrivals,
                      queued=w.concurrency / (lay.dp * lay.pp), recv_interval=st.recv_interval)
    sch, t_mix, (n_eager, res_m) = ss["schedule"], ss["t_mixed"], ss["mixed_extra"]
    info.update(ttft_open=ss["ttft_open_s"], queue=ss["queue_s"], saturated=ss["saturated"], capped=ss["capped"],
                service=ss["service_s"], cycle_rest=ss["cycle_rest_s"], wait=ss["wait_s"], loop_requests=b,
                t_recv=ss["recv_s"])
    info.update(chunk=sch["c_rank"], chunk_total=sch["c_tot"], prefill_per_step=sch["p"], t_mixed=t_mix,
                n_mixed=ss["n_mixed"], budget_left=sch["left"], eager_kernels_mixed=n_eager,
                schedule=sch, res_mixed=res_m, tau_eager=tau_e)
    out = dict(t_bar=ss["step_s"], t_tpot=ss["tpot_s"], x_out=ss["out_tok_s"] * lay.dp * lay.pp,
               prefill_bound=ss["prefill_bound"], ttft=ss["ttft_s"], t_mix=t_mix)
    if w.arrivals == "closed-loop":  # the first C start together (one wave), the rest see the steady loop
        wv = _waves(p, eff, mn_d, b, ranks, t_dec, info["t_request"], dec["res_d"].tpot_s, eta_wave=eff.eta_wave)
        share = first_wave_share(CLOSED_LOOP_PROMPTS_PER_CLIENT * w.concurrency, w.concurrency)
        info.update(wave=wv, ttft_steady=out["ttft"], ttft_wave=wv["ttft"], wave_share=share)
        out["ttft"] = closed_loop_ttft(wv["ttft"], out["ttft"], share, info["t_warm"])
        notes.append("closed-loop client: the first C requests start together and wait for one another's prefills "
                     f"(1 in {CLOSED_LOOP_PROMPTS_PER_CLIENT} of its requests); TPOT and throughput are the "
                     "steady state's")
    if w.arrivals == "waves":
        _lock_step(p, eff, mn_d, dec, info, out, notes)
    if np.any(out["prefill_bound"]):
        notes.append(f"the prefill budget ({st.max_num_tokens} tokens per step) binds: prompts wait")
    return out


def _lock_step(p: Plan, eff, mn_d, dec: dict, info: dict, out: dict, notes: list) -> None:
    """Lock-step waves where they persist (:func:`~.schedule.waves_persist`): the wave schedule replaces the steady
    one there (``out`` updated in place)."""
    lay, st, b, t_dec = p.layout, p.stack, dec["b"], dec["t_dec"]
    ranks = lay.attention_ranks
    keep = waves_persist(st.prefill_first, b, ranks, p.workload.isl_new, st.max_num_tokens)
    info.update(waves=keep)
    if np.any(keep):  # the wave's prefill pass is evaluated only where a wave persists
        wv = _waves(p, eff, mn_d, b, ranks, t_dec, info["t_request"], dec["res_d"].tpot_s)
        out.update(ttft=np.where(keep, wv["ttft"], out["ttft"]), t_tpot=np.where(keep, wv["tpot"], out["t_tpot"]),
                   x_out=np.where(keep, wv["x_rep"] * lay.dp * lay.pp, out["x_out"]),
                   t_bar=np.where(keep, t_dec, out["t_bar"]),
                   prefill_bound=np.where(keep, False, out["prefill_bound"]))
        info.update(wave=wv)
    if np.all(keep):
        notes.append("arrivals in lock-step waves: each wave's prompts are prefilled before it decodes")
    elif np.any(keep):
        notes.append("clients start together: lock-step waves where a wave fits one prefill pass, the steady "
                     "schedule where it spreads out")
    else:
        notes.append("clients start together, but this stack mixes prefill into decode steps and a wave takes "
                     "several passes: the waves spread out (steady schedule)")


def _waves(p, eff, mn_d, b, ranks, t_dec, t_request, t_dec_gpu, eta_wave=1.0) -> dict:
    """The wave schedule of an aggregated plan: a prefill pass of c_r prompt tokens per rank (an eager step), its
    prompt tokens at the version's prefill speed (t_dec_gpu: the decode step's own time); ``eta_wave``: a closed-loop
    client's first wave, its passes at η_wave of that speed (:func:`~.schedule.first_wave_pass`)."""
    w, st = p.workload, p.stack
    isl_new = w.isl_new
    c_rank = np.minimum(np.maximum(b / ranks, 1.0) * isl_new, float(st.max_num_tokens or np.inf))
    mn_w = mixed_numbers(mn_d, p.model, extra_tokens_per_seq=ranks * c_rank / b, isl=w.isl,
                         chunk=np.minimum(isl_new, c_rank), cached_share=w.cached_share, kv_dtype=p.kv_dtype)
    res_w = run_step(p, mn_w, p.layout, eff, b)
    tau_e = stack_eager_s(eff, st.name)
    t_steady = eager_step(prefill_speed_step(res_w.tpot_s, t_dec_gpu, eff.eta_prefill), step_kernels(res_w), tau_e)
    t_pass = first_wave_pass(t_steady, eta_wave)
    ttft, tpot_s, x_rep, t_wave = wave_schedule(b, ranks, isl_new, w.osl, c_rank, t_pass, t_dec, w.acceptance,
                                                t_request)
    return dict(ttft=ttft, tpot=tpot_s, x_rep=x_rep, t_wave=t_wave, t_pass=t_pass, t_pass_steady=t_steady,
                chunk=c_rank, res_pass=res_w, kernels_pass=step_kernels(res_w), tau_eager=tau_e)


def _values(p: Plan, eff, dec: dict, out: dict, info: dict) -> dict:
    """The result's numbers: per GPU, per user, $/Mtok, memory, the decode step's terms (ms)."""
    lay, w, res_d, ms, gp = p.layout, p.workload, dec["res_d"], 1e3, p.gpus
    ppd, x_out, t_tpot = lay.pp, out["x_out"], out["t_tpot"]
    x_tot = total_tokens_per_s(x_out, w.isl, w.osl)
    ttft = np.asarray(out["ttft"])
    # the median request: a closed-loop client's later requests (its first wave is one in ten); else every request
    ttft_median = median_ttft(ttft, info["ttft_steady"], info["wave_share"]) if "wave_share" in info else ttft
    values = dict(
        output_tok_s=x_out, total_tok_s=x_tot, output_tok_s_per_gpu=x_out / gp, total_tok_s_per_gpu=x_tot / gp,
        tpot_ms=t_tpot * ms, ttft_ms=ttft * ms, ttft_median_ms=np.asarray(ttft_median) * ms,
        step_ms=np.asarray(out["t_bar"]) * ms,
        bottleneck=np.where(out["prefill_bound"], "prefill", np.asarray(res_d.bound).astype(object)),
        tokens_per_s_per_user=tokens_per_s_per_user(t_tpot),
        usd_per_mtok_output=usd_per_mtok(gp, p.usd_per_gpu_hour, x_out),
        usd_per_mtok_total=usd_per_mtok(gp, p.usd_per_gpu_hour, x_tot),
        concurrency=w.concurrency, fits=dec["fits"], mem_per_gpu_gb=np.asarray(res_d.mem_per_chip) / 1e9,
        mem_short_gb=np.maximum(-np.asarray(res_d.headroom_bytes, dtype=float), 0.0) / 1e9,  # h34: GB short per GPU
        max_concurrency=np.asarray(res_d.max_concurrency),
        decode_step_ms=np.asarray(dec["t_dec"]) * ms, mixed_step_ms=np.asarray(out["t_mix"]) * ms,
        t_compute_ms=np.asarray(res_d.t_compute_s) * ppd * ms, t_weights_ms=np.asarray(res_d.t_weights_s) * ppd * ms,
        t_kv_ms=np.asarray(res_d.t_kv_s) * ppd * ms, t_comm_ms=np.asarray(res_d.t_comm_s) * ppd * ms,
        t_latency_ms=np.asarray(res_d.t_latency_s) * ppd * ms, overhead_ms=np.asarray(res_d.t_sched_s) * ms,
        prefill_tokens_per_step=np.asarray(info.get("prefill_per_step", 0.0)) * lay.dp,
    )
    if np.ndim(w.concurrency) == 0 and np.ndim(np.asarray(eff.eta_compute)) == 0:
        values = {kk: (np.asarray(v).item() if np.asarray(v).size == 1 else v) for kk, v in values.items()}
    return values


def _result(p: Plan, eff, dec: dict, out: dict, info: dict, notes: list) -> ServeResult:
    """The :class:`ServeResult` of an evaluated plan (with what ``explain`` and ``ops`` read: plan, preset, steps)."""
    m, w, lay, st = p.model, p.workload, p.layout, p.stack
    layout = dict(tp=lay.tp, ep=lay.ep, pp=lay.pp, attention_dp=lay.attention_dp,
                  attention_dp_size=lay.attention_ranks, dp=lay.dp, gpus=lay.gpus, label=lay.label())
    r = ServeResult(model=m.name, hardware=p.system.name, mode="disaggregated" if p.disaggregated else "aggregated",
                    gpus=p.gpus, isl=w.isl, osl=w.osl, layout=layout, layout_chosen=lay.chosen, efficiency=eff.name,
                    weights_dtype=p.weights_dtype or m.native_dtype, kv_dtype=p.kv_dtype, mtp=w.mtp,
                    acceptance=w.acceptance, cached_share=w.cached_share, usd_per_gpu_hour=p.usd_per_gpu_hour,
                    values=_values(p, eff, dec, out, info), prefill=info.get("prefill"), notes=notes,
                    arrivals=w.arrivals, compute_dtype=p.compute_dtype)
    r.framework = st.name
    r.stack_version = st.version_label  # h34 (issue 34): the stack version assumed (sglang@0.5.7, or the name)
    r.recv_interval = st.recv_interval
    r.efficiency_label = eff.label()
    r._plan, r._eff, r._res, r._info = p, eff, dec["res_d"], info
    return r
