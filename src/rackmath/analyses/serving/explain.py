"""``serve --explain``: the blackboard derivation of a serve result, written from the values the engine computed.

Every line carries the expression it evaluates (``explain.Derivation.add(…, expr=…)``), so its working adds up to
its value (``tests/test_explain.py``); the steps are written out from their operators (``engine.step.step_working``).
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np

from ...engine.efficiency import stack_eager_s
from ...engine.numbers import distinct_experts_hit, routing_curve, routing_share_at
from ...engine.step import MLA_EAGER_KERNEL_SCALE, measured_points, ops_table, step_working
from ...explain import Derivation, fmt
from .schedule import CLOSED_LOOP_PROMPTS_PER_CLIENT, mean_decode_context
from .steps import prefill_speed_step, run_step, step_kernels, synced_prompt_pass


def _f(x, i=0):
    a = np.asarray(x, dtype=float).ravel()
    return float(a[i] if a.size > i else a[0])


def derive(r) -> Derivation:
    """The blackboard derivation of a ``ServeResult``'s first configuration; every step carries the expression it
    computes."""
    p, eff, info = r._plan, r._eff, r._info
    w, lay = p.workload, p.layout
    v = {kk: _f(x) for kk, x in r.values.items() if kk not in ("fits", "bottleneck")}
    gemm = "" if p.compute_dtype == p.system.chip.compute_dtype(r.weights_dtype) else f", GEMMs in {p.compute_dtype}"
    d = Derivation(f"Serving {r.model} on {r.gpus} × {p.system.chip.name} ({r.mode}, layout {lay.label()}, "
                   f"stack {p.stack.version_label}, weights {r.weights_dtype}{gemm}, KV {r.kv_dtype}; {eff.label()})")
    d.add("L̄", "ISL + OSL/2", f"{w.isl:g} + {w.osl:g}/2", float(mean_decode_context(w.isl, w.osl)), "tokens",
          "mean context of an in-flight sequence", expr=f"{w.isl!r} + {w.osl!r}/2")
    d.add("C", "sequences in flight", "", v["concurrency"], "", key="C")
    b = d.add("b", "min(max(C / (dp · PP), 1), max batch · R)", "", _f(info["b"]), "",
              "sequences per micro-batch per replica (R attention-DP ranks, one scheduler each)",
              expr=f"min(max(C / ({lay.dp} * {lay.pp}), 1), {p.stack.max_batch_size * lay.attention_ranks})",
              key="b")
    mla = p.numbers("decode").mla
    x = SimpleNamespace(d=d, r=r, p=p, eff=eff, info=info, w=w, lay=lay, v=v, b=b, k=w.mtp, A=w.acceptance,
                        R=lay.attention_ranks, tau_e=_f(stack_eager_s(eff, p.stack.name)),
                        eager_note=(f" (an MLA block dispatches {MLA_EAGER_KERNEL_SCALE:g} × its graph kernels: FP8 "
                                    "input quantisations, a prompt's un-absorbed path; engine/step.py)" if mla else ""))
    _decode_lines(x, mla)
    if r.mode == "aggregated" and w.arrivals == "waves" and bool(np.asarray(info["waves"]).ravel()[0]):
        return _derive_waves(d, r, v, b)
    if r.mode == "aggregated":
        _schedule_lines(x)
        _aggregated_rates(x)
        _aggregated_ttft(x)
    else:
        _disaggregated_rates(x)
        _disaggregated_ttft(x)
    _cost_line(d, r, v)
    d.conclusion = f"→ {fmt(v['output_tok_s_per_gpu'], 'tok/s')} per GPU at {v['tokens_per_s_per_user']:.3g} " \
                   f"tok/s per user; {str(np.asarray(r.values['bottleneck']).ravel()[0])}-bound" + \
                   ("; " + "; ".join(r.notes) if r.notes else "")
    return d


def _cost_line(d: Derivation, r, v: dict) -> None:
    d.add("$/Mtok", "N_GPU · $/GPU-h / 3600 / X_out · 10⁶", "", v["usd_per_mtok_output"], "$/Mtok", "output tokens",
          expr=f"{r.gpus} * {r.usd_per_gpu_hour!r} / 3600 / X * 1e6")


def _decode_lines(x, mla: bool) -> None:
    """t_verify (t_gpu under --eager), the measured curve points, t_draft, t_decode."""
    d, p, eff, info, k, res = x.d, x.p, x.eff, x.info, x.k, x.r._res
    scale = _f(eff.mla_kernel_scale)
    note = f"; the MLA blocks' kernels × {scale:g} ({eff.name}'s mla_kernel_scale)" if mla and scale != 1.0 else ""
    tau_e, eager_note = x.tau_e, x.eager_note
    kv_rate = "η_m,mla" if mla else "η_m,kv"
    if _f(getattr(eff, "eta_memory_mla" if mla else "eta_memory_kv", 0.0)) > 0:
        note += f"; the KV cache's bytes at {kv_rate} (measured decode attention)"
    if _f(getattr(eff, "eta_memory_moe", 0.0)) > 0:
        note += ("; the routed experts' bytes at η_m,moe (measured MoE curves of their weight format where the chip "
                 "has one)")
    if getattr(eff, "allreduce_curves", ()):
        note += "; each TP all-reduce at t_AR(B) of its message and group (measured curves; α_AR where none)"
    elif _f(getattr(eff, "allreduce_latency_s", 0.0)) > 0:
        note += "; a TP all-reduce's n_coll at α_AR (measured curves)"
    if routing_curve(p.numbers("decode"), getattr(eff, "moe_routing", ())) is not None:
        note += "; the distinct experts at s_route(T) of uniform routing's (measured power-law MoE rows)"
    d.add("t_verify" if p.stack.cuda_graphs else "t_gpu",
          "Σ_ops [n_kernels·τ_k + n_coll·τ_c + n_out·τ_out + max(F/(peak·η_c(M)), B/(BW·η_m), net/η_comm)] "
          "· PP + t_sched", step_working(res.__dict__["times"]), _f(info["t_decode_gpu"]), "s",
          f"decode step of b sequences × {k + 1} tokens, {res.overlap} (engine/step.py; --ops for each operator)"
          + note, key="t_verify" if p.stack.cuda_graphs else "t_gpu")
    for pt in measured_points(res.__dict__["times"]):  # --efficiency measured: the curve point each operator used
        d.add(pt["symbol"] + (f" [{pt['op']}]" if pt["op"] else ""),
              pt.get("how", "η_c · M / (M + M½)" if pt["op"] else "measured kernel curve"), pt["working"],
              pt["value"], pt["unit"], pt["source"])
    _routing_lines(x)
    if not p.stack.cuda_graphs:
        d.add("n_kernels", "kernels the decode step dispatches", "", _f(step_kernels(res)), "", key="n_k")
        d.add("τ_eager", f"host time per eagerly dispatched kernel ({p.stack.name})", "", tau_e, "s", key="tau_e")
        d.add("t_verify", "max(GPU time, n_kernels · τ_eager)", "", _f(info["t_verify"]), "s",
              "--eager: no CUDA graph, the host dispatches every kernel of the decode step" + eager_note,
              expr="max(t_gpu, n_k * tau_e)", key="t_verify")
    if k:
        res_k = info["res_draft"]
        d.add("t_draft" if p.stack.cuda_graphs else "t_draft,gpu", "one draft/MTP layer + LM head, 1 token per sequence"
              + ("" if p.stack.overlap_scheduler else " + t_host (a pass of its own, host work not overlapped)"),
              step_working(res_k.__dict__["times"]), _f(info["t_draft_gpu"]), "s",
              key="t_draft" if p.stack.cuda_graphs else "t_draft_gpu")
        if not p.stack.cuda_graphs:
            d.add("n_kernels,draft", "kernels a draft pass dispatches", "", _f(step_kernels(res_k)), "", key="n_kd")
            d.add("t_draft", "max(GPU time, n_kernels · τ_eager)", "", _f(info["t_draft"]), "s",
                  expr="max(t_draft_gpu, n_kd * tau_e)", key="t_draft")
    d.add("t_decode", "t_verify + k · t_draft", "", _f(info["t_decode"]), "s",
          expr=f"t_verify + {k} * t_draft" if k else "t_verify", key="t_decode")


def _routing_lines(x) -> None:
    """--efficiency measured, a model whose expert shape has a measured routing curve: the decode step's tokens T, the
    share s(T) of uniform routing's distinct experts (the curve point) and the distinct experts H its experts read."""
    d, p, eff = x.d, x.p, x.eff
    mn = p.numbers("decode")
    c = routing_curve(mn, getattr(eff, "moe_routing", ())) if mn.is_moe else None
    if c is None:
        if mn.is_moe and getattr(eff, "moe_routing", ()):  # the chip has routing curves, none of this model's
            d.add("s_route [experts]", "uniform routing", "", 1.0, "", f"no measured routing curve for {mn.name}'s "
                  f"experts ({mn.d_model} × {mn.expert_width}, {mn.n_experts} experts, top-{mn.experts_per_token})")
        return
    E, k = mn.n_experts, mn.experts_per_token
    t = d.add("T_moe", "b · (k + 1)", "", _f(x.b) * mn.pass_len, "tokens", "tokens through each MoE layer per step",
              expr=f"b * {mn.pass_len}", key="T_moe")
    d.add("s_route(T) [experts]", "share of uniform routing's distinct experts (measured, held beyond its points)",
          f"T = {t:.4g}", float(routing_share_at(c, t)), "", c[3], key="s_route")
    d.add("H [experts]", "min(E, s_route · E · (1 − (1 − k/E)^T))", "",
          float(distinct_experts_hit(E, k, t, routing_share_at(c, t))), "experts",
          "distinct experts each MoE layer streams (engine/numbers.distinct_experts_hit)",
          expr=f"min({E}, s_route * {E} * (1 - (1 - {k} / {E}) ** T_moe))", key="H_route")


def _schedule_lines(x) -> None:
    """An aggregated stream's prefill schedule: p, left, c_r, f, n_any, c (Poisson: s, c, c_r), the mixed step, n, t̄."""
    d, p, info, w, k, A, R, b, v = x.d, x.p, x.info, x.w, x.k, x.A, x.R, x.b, x.v
    tau_e, eager_note = x.tau_e, x.eager_note
    sch = info["schedule"]
    d.add("p", "b · ISL_new · A / OSL", f"{b:g} · {w.isl_new:g} · {A:g} / {w.osl:g}", _f(info["prefill_per_step"]),
          "tokens", "prompt tokens needed per decode step", expr=f"b * {w.isl_new!r} * {A!r} / {w.osl!r}", key="p")
    poisson = w.arrivals == "poisson"
    bud = float(p.stack.max_num_tokens or np.inf)
    imb = _f(sch["imb_decode"])
    d.add("left", "max(budget − imb · b·(k+1)/R, min(ISL_new, budget))"
          + ("" if R > 1 else "  (R = 1: imb = 1)"), "", _f(sch["left"]), "tokens",
          f"prompt tokens one rank may add beside its busiest decode tokens (budget {p.stack.max_num_tokens or '∞'}, "
          f"R = {R} attention ranks)",
          expr=(f"max({bud!r} - {imb!r} * b * {k + 1} / {R}, min({w.isl_new!r}, {bud!r}))" if R > 1 else
                f"max({bud!r} - b * {k + 1}, min({w.isl_new!r}, {bud!r}))"), key="left")
    cr, c = ("c_r0", "c0") if poisson else ("c_r", "c")
    n_recv = p.stack.recv_interval  # > 1: the prompts of N_recv decode steps are received together (prefill_schedule)
    d.add("c_r", "min(left, max(ISL_new, " + ("N_recv·" if n_recv > 1 else "") + "p/R))", "",
          _f(sch.get("c_rank_steady", sch["c_rank"])), "tokens",
          "whole waiting prompts, " + (f"received together every N_recv = {n_recv} decode steps, " if n_recv > 1
                                       else "") + "within the budget",
          expr=f"min(left, max({w.isl_new!r}, " + (f"{n_recv} * " if n_recv > 1 else "") + f"p / {R}))", key=cr)
    d.add("f", "min(1, p/(R·c_r))", "", _f(sch["f"]), "", "share of steps in which one rank prefills",
          expr=f"min(1, p / ({R} * {cr}))", key="f")
    if R > 1:
        d.add("n_any", "1 − (1 − f)^R", "", _f(sch["n_any"]), "", "share of steps in which any rank prefills "
              "(the ranks step together)", expr=f"1 - (1 - f) ** {R}", key="n_any")
    d.add("c", "R·f·c_r/n_any (f < 1) else R·c_r", "", _f(info["chunk_total"] if not poisson else
                                                           sch.get("c_tot_steady", sch["c_tot"])), "tokens",
          "prefill tokens per mixed step",
          expr=(f"{R} * f * {cr} / n_any if f < 1 else {R} * {cr}" if R > 1 else cr),
          key=c)
    if poisson:
        d.add("s", "share of steps that carry prefill under Poisson arrivals (poisson_mixed_share: the fixed point "
              "of the mixed/decode Markov chain)", "", _f(sch["share"]), "", key="s")
        inside = bool(np.asarray(sch["inside"]).ravel()[0])
        d.add("c", "min(p/s, R·left)  (where 0 < p/c < 1; else unchanged)", "", _f(info["chunk_total"]), "tokens",
              "prompts that arrive during a mixed step ride the next one together",
              expr=f"min(p / s, {R} * left)" if inside else "c0", key="c")
        d.add("c_r", "min(max(c_r, c/R), left)  (where 0 < p/c < 1)", "", _f(info["chunk"]), "tokens",
              expr=f"min(max(c_r0, c / {R}), left)" if inside else "c_r0", key="c_r")
    d.add("t_gpu,mixed", "the decode step carrying c prefill tokens (the chunk at its prompt's context)",
          step_working(info["res_mixed"].__dict__["times"]), _f(info["res_mixed"].tpot_s), "s", key="t_gm")
    gm = _prefill_speed_lines(x, "t_gpu,mixed", "t_gm", _f(info["res_mixed"].tpot_s),
                              ("t_verify" if p.stack.cuda_graphs else "t_gpu", _f(info["t_decode_gpu"])))
    d.add("n_eager", "kernels the mixed step dispatches", "", _f(info["eager_kernels_mixed"]), "", key="n_e")
    d.add("τ_eager", f"host time per eagerly dispatched kernel ({p.stack.name})", "", tau_e, "s", key="tau_e")
    d.add("t_mixed", "max(t_gpu,mixed, n_eager · τ_eager) + k · t_draft", "", _f(info["t_mixed"]), "s",
          "an eager step: no CUDA graph, the host dispatches every kernel" + eager_note,
          expr=f"max({gm}, n_e * tau_e)" + (f" + {k} * t_draft" if k else ""), key="t_mixed")
    d.add("n", "p / c", "", _f(info["n_mixed"]), "", "mixed steps per decode step", expr="p / c", key="n")
    d.add("t̄", "t_decode + n·(t_mixed − t_decode) if n ≤ 1 else t_mixed", "", v["step_ms"] / 1e3, "s",
          "time-sliced prefill (Sarathi-Serve)",
          expr="t_decode + n * (t_mixed - t_decode) if n <= 1 else t_mixed", key="tbar")


def _aggregated_rates(x) -> None:
    """TPOT and tok/s/user of an aggregated stream (X_out after TTFT_open: :func:`_aggregated_output`)."""
    d, A, v = x.d, x.A, x.v
    d.add("TPOT", "(t_decode + n·(b − 1)/b·(t_mixed − t_decode)) / A  (n ≤ 1; else t_mixed / A)", "",
          v["tpot_ms"] / 1e3, "s", "other requests' prefills stall the stream; a request's own prefill is its TTFT",
          expr=f"(t_decode + n * max(b - 1, 0) / max(b, 1) * (t_mixed - t_decode)) / {A!r} if n <= 1 "
               f"else t_mixed / {A!r}", key="tpot")
    d.add("tok/s/user", "1 / TPOT", "", v["tokens_per_s_per_user"], "tok/s", expr="1 / tpot")


def _aggregated_output(x) -> None:
    """X_out (decode, the prefill budget, Little's law over the cycle) and per GPU, after TTFT_open."""
    d, w, lay, A, v = x.d, x.w, x.lay, x.A, x.v
    n = lay.dp * lay.pp
    dec, pf = f"b * {A!r} / tbar", f"c * {w.osl!r} / ({max(w.isl_new, 1e-9)!r} * t_mixed)"
    d.add("X_out", "dp·PP · min(b·A/t̄, c·OSL/(ISL_new·t_mixed), b·OSL/(TTFT_open + (OSL − 1)·TPOT))", "",
          v["output_tok_s"], "tok/s", "decode, the prefill budget, or the closed loop's cycle (closed_loop_rate)",
          expr=f"{n} * min({dec}, {pf}, b * {w.osl!r} / (ttft_o + ({w.osl!r} - 1) * tpot))", key="X")
    _per_gpu(x)


def _per_gpu(x) -> None:
    d, v, r, w = x.d, x.v, x.r, x.w
    d.add("X_out/GPU", "X_out / N_GPU", f"{fmt(v['output_tok_s'], 'tok/s')} / {r.gpus}", v["output_tok_s_per_gpu"],
          "tok/s", "every GPU counted, prefill pool included", expr=f"X / {r.gpus}")
    d.add("X_total/GPU", "X_out · (1 + ISL/OSL) / N_GPU", "", v["total_tok_s_per_gpu"], "tok/s",
          expr=f"X * (1 + {w.isl!r} / {w.osl!r}) / {r.gpus}")


def _aggregated_ttft(x) -> None:
    """t_prefill, t_request, S, Z, W, TTFT_open, X_out, Q, TTFT of an aggregated stream (a closed-loop client's first
    wave after it)."""
    d, p, info, w, R = x.d, x.p, x.info, x.w, x.R
    t_req = _f(info["t_request"])
    tp = _f(np.ceil(w.isl_new / info["chunk"]) * info["t_mixed"])
    d.add("t_prefill", "⌈ISL_new / c_r⌉ · t_mixed", "", tp, "s", "the prompt's own chunks",
          expr=f"ceil({w.isl_new!r} / c_r) * t_mixed", key="t_pf")
    d.add("t_request", f"host time per request ({p.stack.name}'s)", "", t_req, "s", key="t_req")
    d.add("S", "ISL_new · t_mixed / (R · left)", "", _f(info["service"]), "s",
          "a prompt's share of the prefill budget (R · left prompt tokens per mixed step)",
          expr=f"max({w.isl_new!r}, 1.0) * t_mixed / ({R} * left)", key="S")
    n_recv = p.stack.recv_interval
    recv, recv_text = "", ""
    if n_recv > 1:  # schedule.receive_wait: SGLang's --scheduler-recv-interval
        d.add("t_recv", "(N_recv − 1)/2 · t_decode", "", _f(info["t_recv"]), "s",
              f"the scheduler receives new requests every N_recv = {n_recv} decode steps (SGLang "
              "--scheduler-recv-interval; at once after a prefill): a request waits (N_recv − 1)/2 steps more",
              expr=f"0.5 * ({n_recv} - 1) * t_decode", key="t_recv")
        recv, recv_text = " + t_recv", " + t_recv"
    _closed_loop_wait_lines(x, f"tbar / 2{recv} + t_pf + t_req", f"t̄/2{recv_text} + t_prefill + t_request")
    d.add("TTFT_open", f"t̄/2{recv_text} + t_prefill + t_request + W", "", _f(info["ttft_open"]), "s",
          "half a step to the next schedule" + (", the receive interval" if recv else "") + ", the prompt's chunks, "
          "the host, the queue; before any saturation queue",
          expr=f"tbar / 2{recv} + t_pf + t_req + W", key="ttft_o")
    _aggregated_output(x)
    why = (f"the running batch is capped at {p.stack.max_batch_size} per scheduler" if _f(info["capped"])
           else "the prefill budget binds")
    _queue_line(x, why)


def _closed_loop_wait_lines(x, before: str, before_text: str) -> None:
    """Z and W: the rest of a request's cycle and its wait for the prefill server in a closed loop of C requests
    (``schedule.closed_loop_wait``, Schweitzer's mean value analysis); ``before`` the TTFT terms ahead of the wait
    (an expression on earlier keys) and their text."""
    d, info, w = x.d, x.info, x.w
    C = _f(info["loop_requests"])
    d.add("Z", f"max({before_text} + (OSL − 1) · TPOT − S, 0)", "", _f(info["cycle_rest"]), "s",
          "the rest of a request's cycle", expr=f"max({before} + ({w.osl!r} - 1) * tpot - S, 0.0)", key="Z")
    d.add("W", "½ · [(n·S − Z) + √((n·S − Z)² + 4·S·Z)] − S", "", _f(info["wait"]), "s",
          f"the wait of n = {C:.6g} requests in a closed loop for the prefill server (closed_loop_wait: Schweitzer's "
          "mean value analysis)",
          expr=f"max(0.5 * (({C!r} * S - Z) + sqrt(({C!r} * S - Z) ** 2 + 4 * S * Z)) - S, 0.0)", key="W")


def _queue_line(x, why: str) -> None:
    """Q, the saturation queue (``schedule.saturated_ttft``), and the steady TTFT = TTFT_open + Q (then a closed-loop
    client's first wave)."""
    d, info, w, v, r = x.d, x.info, x.w, x.v, x.r
    sat = bool(np.asarray(info["saturated"]).ravel()[0])
    if sat and _f(info["queue"]) > 1e-9 * max(_f(info["ttft_open"]), 1e-300):
        d.add("Q", "max(C·OSL/X_out − (OSL − 1)·TPOT − TTFT_open, 0)", "", _f(info["queue"]), "s",
              f"saturated ({why}): throughput stays flat as C grows and the extra requests wait — Little's law "
              "(saturated_ttft)", expr=f"max(C * {w.osl!r} / X - ({w.osl!r} - 1) * tpot - ttft_o, 0)", key="Q")
    elif sat:  # saturated, and the closed loop's wait already makes C = X · (TTFT + (OSL − 1) · TPOT)
        d.add("Q", "0 (saturated, and TTFT_open already meets Little's law: the closed loop's wait W holds them)", "",
              0.0, "s", f"saturated ({why}): saturated_ttft", expr="0", key="Q")
    else:
        d.add("Q", "0 (not saturated: every request in flight is served)", "", _f(info["queue"]), "s",
              "saturated_ttft", expr="0", key="Q")
    cl = w.arrivals == "closed-loop"
    d.add("TTFT_steady" if cl else "TTFT", "TTFT_open + Q", "", _f(info["ttft_steady"]) if cl else v["ttft_ms"] / 1e3,
          "s", "serving.saturated_ttft", expr="ttft_o + Q", key="ttft_ss" if cl else "")
    if cl:
        _derive_closed_loop(d, r, v)


def _disaggregated_rates(x) -> None:
    """t̄, TPOT, tok/s/user, X_prefill of a decode pool fed by a prefill pool (X_out after TTFT_open:
    :func:`_disaggregated_output`)."""
    d, info, A, v = x.d, x.info, x.A, x.v
    d.add("t̄", "t_decode (the decode pool runs decode only)", "", v["step_ms"] / 1e3, "s", expr="t_decode",
          key="tbar")
    d.add("TPOT", "t̄ / A", "", v["tpot_ms"] / 1e3, "s", expr=f"tbar / {A!r}", key="tpot")
    d.add("tok/s/user", "1 / TPOT", "", v["tokens_per_s_per_user"], "tok/s", expr="1 / tpot")
    pf = info["prefill"]
    d.add("X_prefill", "the prefill pool's prompt tokens/s (prefill_pool_rate)", "", _f(pf["input_tok_s"]),
          "tok/s", key="X_P")


def _disaggregated_output(x) -> None:
    """X_out (the decode pool, the prefill pool's feed, Little's law over the cycle) and per GPU, after TTFT_open."""
    d, info, w, A, v = x.d, x.info, x.w, x.A, x.v
    n = _f(info["loop_requests"])
    dec, feed = f"{n!r} * {A!r} / t_decode", f"X_P * {w.osl!r} / ({w.isl!r} * (1 - {w.cached_share!r}))"
    d.add("X_out", "min(n·A/t_decode, X_prefill · OSL / (ISL · (1 − h)), n·OSL/(TTFT_open + (OSL − 1)·TPOT))", "",
          v["output_tok_s"], "tok/s", f"n = {n:.6g} sequences the decode pool runs; decode, the prefill pool's feed, "
          "or the closed loop's cycle (closed_loop_rate)",
          expr=f"min({dec}, {feed}, {n!r} * {w.osl!r} / (ttft_o + ({w.osl!r} - 1) * tpot))", key="X")
    _per_gpu(x)


def _disaggregated_ttft(x) -> None:
    """The prefill pass, KV hand-off, t_request, the closed loop's wait for the pool (S, Z, W), TTFT_open, X_out, Q,
    TTFT of a disaggregated deployment."""
    d, p, info, w = x.d, x.p, x.info, x.w
    t_req = _f(info["t_request"])
    pf = info["prefill"]
    d.add("t_gpu,prefill", "one prompt's prefill pass on the prefill layout",
          step_working(info["prefill_one"].__dict__["times"]), _f(info["prefill_one"].tpot_s), "s", key="t_p1")
    for pt in measured_points(info["prefill_one"].__dict__["times"]):  # the prompt pass's experts: the MoE law
        if pt["op"] == "experts" and pt["symbol"].startswith("η_c,moe"):
            d.add(pt["symbol"] + " [experts, prefill]", "η_c,moe · M / (M + M½)", pt["working"], pt["value"], "",
                  pt["source"])
    p1 = _prefill_speed_lines(x, "t_gpu,prefill", "t_p1", _f(info["prefill_one"].tpot_s))
    d.add("n_kernels", "kernels the prefill pass dispatches", "", _f(step_kernels(info["prefill_one"])), "",
          key="n_p")
    d.add("τ_eager", f"host time per eagerly dispatched kernel ({p.stack.name})", "", _f(info["tau_eager"]), "s",
          key="tau_e")
    lp = p.prefill_layout
    if bool(np.asarray(synced_prompt_pass(lp.attention_dp, lp.ep)).ravel()[0]):  # the all-to-all syncs the host
        d.add("t_prefill", "chunks · (t_gpu,prefill + n_kernels · τ_eager)", "", _f(pf["prefill_s"]), "s",
              "the experts' all-to-all over attention-DP ranks syncs host and GPU at every MoE layer "
              "(synced_prompt_pass)", expr=f"{_f(info['n_chunks'])!r} * ({p1} + n_p * tau_e)", key="t_pf")
    else:
        d.add("t_prefill", "chunks · max(t_gpu,prefill, n_kernels · τ_eager)", "", _f(pf["prefill_s"]), "s",
              expr=f"{_f(info['n_chunks'])!r} * max({p1}, n_p * tau_e)", key="t_pf")
    d.add("t_KV", "the KV cache's hand-off to the decode pool (kv_transfer_time)", "", _f(pf["kv_transfer_s"]),
          "s", key="t_kv")
    d.add("t_request", f"host time per request ({p.stack.name}'s)", "", t_req, "s", key="t_req")
    d.add("S", "ISL_new / X_prefill", "", _f(info["service"]), "s", "a prompt's share of the prefill pool",
          expr=f"{w.isl_new!r} / X_P", key="S")
    _closed_loop_wait_lines(x, "t_pf + t_kv + t_req", "t_prefill + t_KV + t_request")
    d.add("TTFT_open", "t_prefill + t_KV + t_request + W", "", _f(info["ttft_open"]), "s",
          "before any saturation queue", expr="t_pf + t_kv + t_req + W", key="ttft_o")
    _disaggregated_output(x)
    why = (f"the decode pool's running batch is capped at {p.stack.max_batch_size} per scheduler" if _f(info["capped"])
           else "the prefill pool feeds fewer requests than the decode pool serves")
    _queue_line(x, why)


def _derive_closed_loop(d: Derivation, r, v: dict) -> None:
    """The TTFT of a closed-loop benchmark client (``schedule.closed_loop_ttft``): its first wave, then the steady loop."""
    info, C = r._info, float(np.asarray(r.values["concurrency"]).ravel()[0])
    how = ("the first C prompts queued at the prefill pool (disaggregated_wave_ttft)" if r.mode == "disaggregated"
           else "the first C prompts queued against the prefill budget (wave_schedule)")
    eta, wv = _f(r._eff.eta_wave), info.get("wave")  # the aggregated wave's passes (none on a prefill pool)
    if wv is not None:
        d.add("t_pass", "a prefill pass of the wave: the mixed step carrying c_r prompt tokens per rank", "",
              _f(wv["t_pass_steady"]), "s", f"c_r = {fmt(_f(wv['chunk']), 'tokens')} (the budget or the wave's "
              "prompts), eager", key="t_pass")
    if eta != 1.0:
        d.add("η_wave", "the first wave's passes' speed relative to the steady ones", "", eta, "",
              f"{r._plan.stack.version_label}'s wave_eta (stack_hosts.toml) or the preset's eta_wave "
              "(schedule.first_wave_pass)", key="eta_wave")
        if wv is not None:
            d.add("t_pass,wave", "t_pass / η_wave", "", _f(wv["t_pass"]), "s",
                  "a first-wave pass (first_wave_pass)", expr="t_pass / eta_wave", key="t_pass_w")
        else:
            how += f"; the pool at η_wave = {eta:.3g} of its rate"
    d.add("TTFT_wave", "the first wave's mean TTFT", "", _f(info["ttft_wave"]), "s", how, key="ttft_w")
    d.add("w", "C / N  (N = 10 · C requests: the client's --num-prompts)", "", _f(info["wave_share"]), "",
          "first_wave_share", expr=f"min({C!r} / {CLOSED_LOOP_PROMPTS_PER_CLIENT * C!r}, 1.0)", key="w_wave")
    d.add("t_warm", f"warm-up paid once by the first wave ({r._plan.stack.name}'s)", "", _f(info["t_warm"]), "s",
          "kernels compiled and graphs captured the first time a batch of that size runs", key="t_warm")
    d.add("TTFT", "w · (TTFT_wave + t_warm) + (1 − w) · TTFT_steady", "", v["ttft_ms"] / 1e3, "s",
          "serving.closed_loop_ttft (mean over the client's requests)",
          expr="w_wave * (ttft_w + t_warm) + (1 - w_wave) * ttft_ss")
    d.add("TTFT_median", "TTFT_steady  (w < 1/2: the median request is a later one)", "",
          v["ttft_median_ms"] / 1e3, "s", "serving.median_ttft", expr="ttft_ss")


def _prefill_speed_lines(x, symbol: str, key: str, t_gpu: float, decode: tuple | None = None) -> str:
    """Where the stack version's prefill speed η_pf is not 1 (``--efficiency measured``, a version with a fitted one):
    its line and the step's GPU time at it, t_d + (t_gpu − t_d)/η_pf (``serving.steps.prefill_speed_step``; t_d the
    decode step's line ``decode`` = (key, value), none for a prefill pass alone). Returns the key of the GPU time the
    step's eager max reads."""
    eta = _f(x.eff.eta_prefill)
    if eta == 1.0:
        return key
    d = x.d
    if not any(st.key == "eta_pf" for st in d.steps):
        d.add("η_pf", "the stack version's prefill speed relative to the kernel curves", "", eta, "",
              f"{x.p.stack.version_label}'s prefill_eta (stack_hosts.toml) or the preset's eta_prefill "
              "(serving.steps.prefill_speed_step)", key="eta_pf")
    t_d, dk = (decode[1], decode[0]) if decode else (0.0, None)
    d.add(f"{symbol} at η_pf", "t_d + (t_gpu − t_d) / η_pf" if decode else "t_gpu / η_pf", "",
          _f(prefill_speed_step(t_gpu, t_d, eta)), "s", "the prompt tokens at the stack's prefill speed",
          expr=f"{dk} + max({key} - {dk}, 0) / eta_pf" if decode else f"{key} / eta_pf", key=f"{key}_pf")
    return f"{key}_pf"


def _derive_waves(d: Derivation, r, v: dict, b: float) -> Derivation:
    """The rest of the derivation under lock-step waves (``schedule.wave_schedule``)."""
    p, wv = r._plan, r._info["wave"]
    w, lay, A = p.workload, p.layout, p.workload.acceptance
    R = lay.attention_ranks
    bud = float(p.stack.max_num_tokens or np.inf)
    d.add("waves", "the waves persist: a prefill-first stack, or a wave's prompts fit one prefill pass", "", 1.0, "",
          f"{p.stack.name}: prefill first = {p.stack.prefill_first} (waves_persist)")
    d.add("c_r", "min(max(b/R, 1) · ISL_new, budget)", "", _f(wv["chunk"]), "tokens",
          f"prompt tokens one rank carries per prefill pass (R = {R}, budget {p.stack.max_num_tokens or '∞'})",
          expr=f"min(max(b / {R}, 1) * {w.isl_new!r}, {bud!r})", key="c_r")
    d.add("t_gpu,pass", "the step carrying R·c_r prompt tokens", step_working(wv["res_pass"].__dict__["times"]),
          _f(wv["res_pass"].tpot_s), "s", key="t_gp")
    gp = _prefill_speed_lines(SimpleNamespace(d=d, p=p, eff=r._eff), "t_gpu,pass", "t_gp", _f(wv["res_pass"].tpot_s),
                              ("t_verify" if p.stack.cuda_graphs else "t_gpu", _f(r._info["t_decode_gpu"])))
    d.add("n_kernels", "kernels the prefill pass dispatches", "", _f(wv["kernels_pass"]), "", key="n_kp")
    d.add("τ_eager", f"host time per eagerly dispatched kernel ({p.stack.name})", "", _f(wv["tau_eager"]), "s",
          key="tau_e")
    d.add("t_pass", "max(t_gpu,pass, n_kernels · τ_eager)", "", _f(wv["t_pass"]),
          "s", "an eager step: no CUDA graph, the host dispatches every kernel", expr=f"max({gp}, n_kp * tau_e)",
          key="t_pass")
    d.add("n", "ISL_new / c_r", "", max(w.isl_new, 1.0) / _f(wv["chunk"]), "", "prefill passes per prompt",
          expr=f"{max(w.isl_new, 1.0)!r} / c_r", key="n")
    d.add("t_wave", "b_r·n · t_pass", "", _f(wv["t_wave"]), "s",
          "every prompt of the wave prefilled (b_r = max(b/R, 1) per rank; the last pass partial)",
          expr=f"max(max(b / {R}, 1) * n, 1) * t_pass", key="t_wave")
    d.add("TTFT_wave", "min(max(⌈n⌉, n·(b_r + 1)/2 + 1/2) · t_pass, t_wave)", "",
          (v["ttft_ms"] / 1e3) - _f(r._info["t_request"]), "s", "mean over the wave: prompt i is done after ⌈i·n⌉ passes",
          expr=f"min(max(ceil(n), n * (max(b / {R}, 1) + 1) / 2 + 0.5) * t_pass, t_wave)", key="ttft_w")
    d.add("t̄", "t_decode (a wave decodes with no prefill beside it)", "", v["step_ms"] / 1e3, "s", expr="t_decode",
          key="tbar")
    d.add("TPOT", "(t_wave − TTFT_wave + (OSL − 1)/A · t_decode) / (OSL − 1)", "", v["tpot_ms"] / 1e3, "s",
          "a prompt's decode waits for the rest of its wave's prefill",
          expr=f"(t_wave - ttft_w + ({w.osl!r} - 1) / {A!r} * t_decode) / max({w.osl!r} - 1, 1)", key="tpot")
    d.add("tok/s/user", "1 / TPOT", "", v["tokens_per_s_per_user"], "tok/s", expr="1 / tpot")
    t_req = _f(r._info["t_request"])
    d.add("X_out", "dp·PP·b·OSL / (t_request + t_wave + (OSL − 1)/A · t_decode)", "", v["output_tok_s"], "tok/s",
          f"one wave's output over one wave's period (= E2E: Little's law); t_request = {fmt(t_req, 's')}", key="X",
          expr=f"{lay.dp * lay.pp} * b * {w.osl!r} / ({t_req!r} + t_wave + ({w.osl!r} - 1) / {A!r} * t_decode)")
    d.add("X_out/GPU", "X_out / N_GPU", f"{fmt(v['output_tok_s'], 'tok/s')} / {r.gpus}", v["output_tok_s_per_gpu"],
          "tok/s", "every GPU counted", expr=f"X / {r.gpus}")
    d.add("X_total/GPU", "X_out · (1 + ISL/OSL) / N_GPU", "", v["total_tok_s_per_gpu"], "tok/s",
          expr=f"X * (1 + {w.isl!r} / {w.osl!r}) / {r.gpus}")
    d.add("TTFT", "TTFT_wave + t_request", "", v["ttft_ms"] / 1e3, "s",
          f"t_request = {fmt(t_req, 's')} host time per request ({p.stack.name}'s)",
          expr=f"ttft_w + {t_req!r}")
    _cost_line(d, r, v)
    d.conclusion = f"→ {fmt(v['output_tok_s_per_gpu'], 'tok/s')} per GPU at {v['tokens_per_s_per_user']:.3g} " \
                   f"tok/s per user in lock-step waves" + ("; " + "; ".join(r.notes) if r.notes else "")
    return d


def ops(result, which="decode", index=0) -> list[dict]:
    """Per-operator breakdown of a serve result's decode step (``--ops``): rows sum to the step (tested)."""
    res = result._res
    rows = ops_table(res.times, scale=res.scale, index=index)
    k = result.mtp
    if k:
        p = result._plan
        dres = run_step(p, p.numbers("draft"), replace(p.layout, pp=1), result._eff, result._info["b"], sched=False)
        rows.insert(-1, {"op": "draft", "layer_type": "draft (MTP)", "flops": float("nan"), "bytes": float("nan"),
                         "intensity": float("nan"), "time_s": k * _f(dres.tpot_s, index), "binding": str(
                             np.asarray(dres.bound).ravel()[0])})
    return rows
