"""``train --explain``: every term of the calibrated training step (:func:`analyses.training.step.step_terms`) with its
working (issue 38: every term shown with its number; issue 33: every printed line adds up).

Each step states its computation as an expression over the configuration's numbers and the earlier steps
(:meth:`explain.Derivation.add` ``expr``), so the printed working is generated from the numbers the step model used
and the tests re-evaluate it against the model's own value (``Derivation.check``). Scalar configurations only (one
layout): the model itself is the vectorized :func:`~analyses.training.step.step_terms`.
"""

from __future__ import annotations

import math

from ...explain import Derivation
from .step import ADAM_STEP_BYTES, DP_BYTES_PER_PARAM, FLASH_BACKWARD_FACTOR


def _n(v) -> str:
    """A number as an expression literal."""
    return repr(float(v))


def _allreduce(n, parts: str, bw) -> str | None:
    """Working of a ring all-reduce of ``parts`` bytes over ``n`` chips (``engine.comms.allreduce_time``):
    2·(n−1)/n · bytes / BW; None when n ≤ 1 (no traffic)."""
    if n <= 1:
        return None
    return f"2 * {_n(n - 1)} / {_n(n)} * {parts} / {_n(bw)}"


def _dp_grad(params, group, in_domain, up_bw, out_bw, bytes_per_param) -> list[str]:
    """Working fragments of ``training.dp_grad_time`` (hierarchical: inside the NVLink domain, then 1/S of the bytes
    across the domains) before the division by η_comm."""
    if params <= 0:
        return []
    s = min(group, in_domain)
    d = math.ceil(group / max(s, 1.0))
    parts = f"{_n(bytes_per_param)} * {_n(params)}"
    frags = [_allreduce(s, parts, up_bw), _allreduce(d, f"{parts} / {_n(max(s, 1.0))}", out_bw)]
    return [f for f in frags if f]


def add_step_terms(d: Derivation, x: dict, p: dict, terms: dict, M: float) -> None:
    """Append the step model's terms to ``d``: ``x`` the (scalar) inputs of ``step_terms``, ``p`` the preset's
    parameters, ``terms`` its result (the values printed), ``M`` the micro-batches (a step keyed "M" before)."""
    w = _Working(d, x, p, terms)
    _compute_terms(w)
    _comm_terms(w)
    _pipeline_terms(w)
    _data_parallel_terms(w)


class _Working:
    """The numbers every step term's working reads (``x`` as floats, the layout's derived degrees) and the two ways of
    adding a line: :meth:`term` (a value the model returns, checked against it) and :meth:`part` (an intermediate)."""

    def __init__(self, d: Derivation, x: dict, p: dict, terms: dict):
        self.d, self.p, self.terms = d, p, terms
        self.f = f = {k: float(v) for k, v in x.items()}
        self.gpus, self.tp, self.pp, self.cp, self.ep, self.vp = (f[k] for k in ("gpus", "tp", "pp", "cp", "ep", "vp"))
        self.B, self.s, self.mb = f["global_batch"], f["seq"], f["micro_batch"]
        self.dp = self.gpus / (self.tp * self.pp * self.cp)
        self.dom, self.up, self.out = f["domain"], f["up_bw"], f["out_bw"]
        self.eta_c = _n(p["eta_comm"])
        self.lps = f["n_layers"] / self.pp

    def ramp(self, rows, width) -> str:
        """The small-GEMM ramps M/(M + M½) · w/(w + w½) (``engine.step.gemm_efficiency``); none when M½ = 0."""
        p = self.p
        r = f" * {_n(rows)} / ({_n(rows)} + {_n(p['rows_half'])})" if p["rows_half"] > 0 else ""
        return r + (f" * {_n(width)} / ({_n(width)} + {_n(p['width_half'])})" if p["width_half"] > 0 else "")

    def term(self, key, symbol, formula, note, expr) -> None:
        """A term the model returns (``terms[key]``): its expr is checked against it."""
        self.d.add(symbol, formula, "", self.terms[key], "s", note, expr=expr, key=key.removesuffix("_s"))

    def part(self, symbol, formula, unit, note, expr, key) -> None:
        """An intermediate the model does not return apart: its value is its expr (the term it feeds is checked)."""
        self.d.add(symbol, formula, "", self.d.evaluate(expr), unit, note, expr=expr, key=key)


def _compute_terms(w: _Working) -> None:
    """t_GEMM (dense and expert groups), t_head, t_attn, t_elem and t_quant (``step._step_terms``)."""
    f, p, tp, cp = w.f, w.p, w.tp, w.cp
    base = 4.0 if f["lora"] > 0 else 6.0
    full = 2.0 * min(max(f["recompute"] - 1.0, 0.0), 1.0)
    gemm_fl = _n(base) if not full else f"({_n(base)} + {_n(full)})"
    eta_low = _n(p["eta_gemm"]) + (f" * {_n(p['lowp_ratio'])}" if f["lowp"] > 0 else "")
    w.part("tokens/GPU", "B · s / chips", "tokens", "token-work per GPU per step",
           f"{_n(w.B)} * {_n(w.s)} / {_n(w.gpus)}", "tok_gpu")
    rows = w.mb * w.s / cp
    body = (f"tok_gpu * {gemm_fl} * {_n(f['n_dense'])} / ({_n(f['peak'])} * {eta_low}"
            f"{w.ramp(rows, f['d_model'] / tp)})")
    gemm_formula = ("tokens/GPU · (6 + 2·full)·N_body / (peak_dtype · η·r_lowp · M/(M+M½) · w/(w+w½))")
    gemm_note = "weight GEMMs at the dtype's rate, small-GEMM ramp of engine.step.gemm_efficiency"
    if f["n_expert"] > 0:  # the two GEMM groups apart; their sum is checked against the model's t_GEMM
        rows_e = rows * f["k"] * w.ep / max(f["n_experts"], 1.0)
        experts = (f"tok_gpu * {gemm_fl} * {_n(f['n_expert'])} / ({_n(f['peak'])} * {eta_low}"
                   f"{w.ramp(rows_e, f['moe_d_ff'])})")
        w.part("t_GEMM,dense", gemm_formula.replace("N_body", "N_dense"), "s",
               "attention projections, dense and shared FFNs", body, "t_body")
        w.part("t_GEMM,experts", "tokens/GPU · (6 + 2·full)·N_experts,active / (peak_dtype · η·r_lowp · "
               "M_e/(M_e+M½) · w_e/(w_e+w½))", "s", "routed experts: M_e = tokens · k · ep / E rows each", experts,
               "t_exp")
        w.term("t_gemm_s", "t_GEMM", "t_GEMM,dense + t_GEMM,experts", gemm_note, "t_body + t_exp")
    else:
        w.term("t_gemm_s", "t_GEMM", gemm_formula, gemm_note, body)
    w.term("t_head_s", "t_head", "tokens/GPU · (6 + 2·full)·V·h / (peak_bf16 · η · M/(M+M½) · w/(w+w½))",
           "LM head GEMM in BF16",
           f"tok_gpu * {gemm_fl} * {_n(f['n_head'])} / ({_n(f['peak_bf16'])} * {_n(p['eta_gemm'])}"
           f"{w.ramp(rows, f['d_model'] / tp)})")
    r = 1.0 if f["recompute"] >= 1 else 0.0
    w.term("t_attention_s", "t_attn", "tokens/GPU · F̄_attn · (1 + 2.5 + recompute) / (peak_bf16 · η_attn)",
           "causal FlashAttention, backward 2.5× forward (Dao 2023)",
           f"tok_gpu * {_n(f['f_attn'])} * (1 + {_n(FLASH_BACKWARD_FACTOR)} + {_n(r)}) / ({_n(f['peak_bf16'])} * "
           f"{_n(p['eta_attn'])})")
    w.part("tokens·layers/GPU", "B · s · L / (dp · cp · pp)", "", "token-layers per tensor-parallel group",
           f"{_n(w.B)} * {_n(w.s)} * {_n(f['n_layers'])} / ({_n(w.dp)} * {_n(cp)} * {_n(w.pp)})", "tl")
    sp = max(tp, 1.0)
    w.term("t_elementwise_s", "t_elem", "k · A_layer/t · tokens·layers/GPU / BW_HBM",
           "norms, activations, MoE permutation",
           f"{_n(p['k_elem'])} * {_n(f['act_bytes'])} / {_n(sp)} * tl / {_n(f['hbm_bw'])}")
    w.term("t_quantisation_s", "t_quant", "3 · Σ GEMM inputs/t · bytes cast · tokens·layers/GPU / BW_HBM",
           "FP8/MXFP8/NVFP4 casts (none in BF16)",
           f"3 * {_n(f['gemm_in'])} / {_n(sp)} * {_n(f['quant_bytes'])} * tl / {_n(f['hbm_bw'])}")


def _comm_terms(w: _Working) -> None:
    """t_TP, t_EP and the exposed t_CP (``step.tp_comm_time``, ``ep_alltoall_step_time``, ``cp_ring_time``)."""
    f, tp, cp, ep, dp, dom, up, out, eta_c = w.f, w.tp, w.cp, w.ep, w.dp, w.dom, w.up, w.out, w.eta_c
    B, s = w.B, w.s
    tp_bw = up if tp <= dom else out
    ar = _allreduce(tp, f"{_n(B)} * {_n(s)} / ({_n(dp)} * {_n(cp)}) * {_n(f['d_model'])} * 2", tp_bw)
    w.term("t_tp_s", "t_TP", "4 · L/P · 2·(t−1)/t · (tokens/replica · h · 2 B) / BW / η_comm",
           "TP + sequence parallelism" + ("" if ar else "; none at tp = 1"),
           f"4 * {_n(w.lps)} * {ar} / {eta_c}" if ar else "0")
    group = ep * tp
    if f["n_moe"] > 0 and ep > 1 and group > 1:
        w.part("V_EP", "4 · L_moe/P · tokens/(dp·cp·t) · k · h · 2 B · (ep−1)/ep", "B",
               "all-to-all bytes each GPU sends per step",
               f"4 * {_n(f['n_moe'])} / {_n(w.pp)} * {_n(B)} * {_n(s)} / ({_n(dp)} * {_n(cp)} * {_n(tp)}) * "
               f"{_n(f['k'])} * {_n(f['d_model'])} * 2 * {_n(ep - 1)} / {_n(ep)}", "v_ep")
        inside = f"v_ep * {_n(min(group, dom) - 1.0)} / {_n(group)} / {_n(up)}"
        ep_expr = (f"max({inside}, v_ep * (1 - {_n(dom)} / {_n(group)}) / {_n(out)}) / {eta_c}" if group > dom else
                   f"{inside} / {eta_c}")
    else:
        ep_expr = "0"
    w.term("t_ep_s", "t_EP", "max(V·share_in / BW_up, V·share_out / BW_out) / η_comm",
           "EP all-to-all, forced balance" + ("" if ep_expr != "0" else "; none without expert parallelism"), ep_expr)
    if cp > 1:
        cp_bw = up if tp * cp <= dom else out
        w.part("t_CP,ring", "3·(cp−1) · (B/dp)·(s/cp) · KV/t · L/P / (BW · η_comm)", "s",
               "KV chunks around the ring",
               f"3 * {_n(cp - 1)} * {_n(B)} / {_n(dp)} * {_n(s)} / {_n(cp)} * {_n(f['kv_bytes'])} / {_n(tp)} * "
               f"{_n(w.lps)} / ({_n(cp_bw)} * {eta_c})", "t_cp_ring")
        w.term("t_cp_exposed_s", "t_CP", "max(0, t_CP,ring − t_attn)", "ring attention, overlapped with attention",
               "max(0, t_cp_ring - t_attention)")
    else:
        w.term("t_cp_exposed_s", "t_CP", "max(0, 3·(cp−1)·KV chunk · L/P / BW / η_comm − t_attn)",
               "ring attention; none at cp = 1", "0")


def _pipeline_terms(w: _Working) -> None:
    """t_layer, t_expert, their sum t_work, the bubble and the pipeline hand-offs t_p2p."""
    f, p, tp, pp, cp, ep, vp = w.f, w.p, w.tp, w.pp, w.cp, w.ep, w.vp
    w.term("t_layer_overhead_s", "t_layer", "τ_layer · L/P · M", "fixed time per layer per micro-batch",
           f"{_n(p['tau_layer_s'])} * {_n(w.lps)} * M")
    w.term("t_expert_overhead_s", "t_expert", "τ_expert · E/ep · L_moe/P · M", "fixed time per local expert",
           f"{_n(p['tau_expert_s'])} * {_n(f['n_experts'])} / {_n(ep)} * {_n(f['n_moe'])} / {_n(pp)} * M"
           if f["n_moe"] > 0 else "0")
    work = ("t_gemm", "t_head", "t_attention", "t_elementwise", "t_quantisation", "t_tp", "t_ep", "t_cp_exposed",
            "t_layer_overhead", "t_expert_overhead")
    w.term("t_work_s", "t_work", "t_GEMM + t_head + t_attn + t_elem + t_quant + t_TP + t_EP + t_CP + t_layer + "
           "t_expert", "one pipeline stage's work per step", " + ".join(work))
    w.term("t_bubble_s", "t_bubble", "t_work · (P − 1)/(v · M)", "1F1B / interleaved bubble (Narayanan et al. 2021)",
           f"t_work * {_n(pp - 1)} / ({_n(vp)} * M)")
    p2p_bw = w.up if tp * cp * pp <= w.dom else w.out
    w.term("t_p2p_s", "t_p2p", "2·v·(B/dp)·(s/cp)·h·2 B/t / BW", "pipeline hand-offs" + ("" if pp > 1 else
                                                                                           "; none at pp = 1"),
           f"2 * {_n(vp)} * {_n(w.B)} / {_n(w.dp)} * {_n(w.s)} / {_n(cp)} * {_n(f['d_model'])} * 2 / {_n(tp)} / "
           f"{_n(p2p_bw)}" if pp > 1 else "0")


def _data_parallel_terms(w: _Working) -> None:
    """Data parallelism — Megatron's distributed optimizer (reduce-scatter + all-gather, 3 B/param) or FSDP — its
    exposed part, the optimizer step and t_step (``step.dp_grad_time``, ``fsdp_time``, ``optimizer_time``)."""
    f, tp, pp, cp, ep, dp, up, out, eta_c = w.f, w.tp, w.pp, w.cp, w.ep, w.dp, w.up, w.out, w.eta_c
    trainable = 0.0 if f["lora"] > 0 else 1.0
    p_dense = f["params_dense"] / (tp * pp) * trainable
    p_exp = f["params_expert"] / (ep * pp) * trainable
    n_dense = dp * cp
    n_exp = max(dp * cp * tp / ep, 1.0)
    in_dom = max(min(math.floor(w.dom / (tp * cp)), n_dense), 1.0)
    if f["sharding"] > 0:
        fsdp_group = f["fsdp_group"] if f["fsdp_group"] > 0 else n_dense
        n_ag = 2.0 if f["sharding"] >= 2 else 1.0
        frags = _dp_grad(p_dense + p_exp, fsdp_group, min(in_dom, fsdp_group), up, out, n_ag + 2.0)
        total = f"M * ({' + '.join(frags)}) / {eta_c}" if frags else "0"
        formula = "M · all-reduce volume of (n_ag + 2) B/param over the sharding group (FSDP) / η_comm"
        window, wexpr, shard_n = "t_work", "t_work", fsdp_group
    else:
        frags = (_dp_grad(p_dense, n_dense, in_dom, up, out, DP_BYTES_PER_PARAM)
                 + _dp_grad(p_exp, n_exp, min(in_dom, n_exp), up, out, DP_BYTES_PER_PARAM))
        total = f"({' + '.join(frags)}) / {eta_c}" if frags else "0"
        formula = "all-reduce volume of 3 B/param, inside the domain then across domains (dense + experts) / η_comm"
        window, wexpr, shard_n = "t_work / M", "t_work / M", n_dense
    w.d.add("t_DP,total", formula, "", float(w.terms["t_dp_total_s"]), "s", "reduce-scatter + all-gather of the "
            "gradients and weights", expr=total, key="t_dp_total")
    w.term("t_dp_exposed_s", "t_DP", f"max(0, t_DP,total − {window})", "exposed past the overlap with the backward",
           f"max(0, t_dp_total - {wexpr})")
    w.term("t_optimizer_s", "t_opt", "30 B · params/GPU / shard / BW_HBM", "Adam step, memory bound",
           f"{_n(ADAM_STEP_BYTES)} * {_n(p_dense + p_exp)} / {_n(shard_n)} / {_n(f['hbm_bw'])}")
    w.term("t_step_s", "t_step", "t_work + t_bubble + t_p2p + t_DP + t_opt", "one optimizer step",
           "t_work + t_bubble + t_p2p + t_dp_exposed + t_optimizer")
