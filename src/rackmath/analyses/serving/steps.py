"""What one serving step carries and how long it takes.

A decode (verification) step of b sequences at the mean context, one draft/MTP layer, a prefill pass, and a decode
step that also carries a prefill chunk are each a ``ModelNumbers`` (per-sequence FLOPs, bytes, KV); one call of
the one step model prices it on a layout (:func:`run_step`: ``engine.layout.evaluate`` → ``engine.step.compose``,
with the stack's host time); :func:`eager_step` and :func:`speculative_step` are the stack's two realities on top.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...engine.efficiency import host_step_s, stack_eager_s
from ...engine.layout import evaluate as layout_evaluate, wide_ep
from ...engine.numbers import ModelNumbers


def decode_numbers(model, context, mtp=0, weights_dtype=None, kv_dtype="bf16", kv_shards=None):
    """ModelNumbers of a decode (verification) step: k + 1 tokens per sequence at context L̄."""
    mn = ModelNumbers.from_model(model, float(context), pass_len=int(mtp) + 1, weights_dtype=weights_dtype,
                                 kv_dtype=kv_dtype)
    return replace(mn, kv_heads=int(kv_shards)) if kv_shards else mn


def draft_numbers(model, context, weights_dtype=None, kv_dtype="bf16", kv_shards=None):
    """ModelNumbers of one draft/MTP layer: one transformer layer (MoE if the model's are) + the LM head, 1 token."""
    mn = ModelNumbers.from_model(model, float(context), pass_len=1, weights_dtype=weights_dtype, kv_dtype=kv_dtype)
    L, nm = mn.n_layers, mn.n_moe_layers
    moe = nm > 0
    nd = max(mn.n_dense_ffn_layers, 1)
    comps = []
    for name, nbytes, params in mn.components:
        div = {"qkv_o": L, "dense_ffn": nd, "router": max(nm, 1), "shared_experts": max(nm, 1), "lm_head": 1}[name]
        if name == "dense_ffn" and moe:
            continue
        comps.append((name, nbytes / div, params / div))
    out = replace(mn, name=mn.name + " draft layer", n_layers=1, n_moe_layers=1 if moe else 0,
                  n_dense_ffn_layers=0 if moe else 1, components=tuple(comps),
                  attn_flops_per_seq=mn.attn_flops_per_seq / L, kv_read_bytes_per_seq=mn.kv_read_bytes_per_seq / L,
                  kv_bytes_per_seq=mn.kv_bytes_per_seq / L, expert_flops_per_seq=mn.expert_flops_per_seq / max(nm, 1),
                  flops_per_seq=mn.flops_per_seq / L, dense_weight_bytes=sum(c[1] for c in comps),
                  other_weight_bytes=0.0)
    return replace(out, kv_heads=int(kv_shards)) if kv_shards else out


def prefill_numbers(model, *, isl, chunk, weights_dtype=None, kv_dtype="bf16", cached_share=0.0, kv_shards=None):
    """ModelNumbers of a prefill pass: one sequence pushing ``chunk`` prompt tokens (only the last reaches the head).

    Attention at the mean context h·ISL + (ISL_new − 1)/2; the pass reads the cached prefix's KV once.
    """
    prefix = float(cached_share) * float(isl)
    mn = ModelNumbers.from_model(model, prefix, pass_len=max(float(chunk), 1.0), weights_dtype=weights_dtype,
                                 kv_dtype=kv_dtype, prefill=True)
    kv_read = float(np.asarray(model.kv_read_bytes(prefix, kv_dtype))) if prefix > 0 else 0.0
    out = replace(mn, kv_read_bytes_per_seq=kv_read, head_tokens_per_seq=1.0,
                  kv_bytes_per_seq=float(model.kv_cache_bytes(max(float(isl), 1.0), kv_dtype)))
    return replace(out, kv_heads=int(kv_shards)) if kv_shards else out


def mixed_numbers(mn_decode, model, *, extra_tokens_per_seq, isl, chunk, cached_share=0.0, kv_dtype="bf16"):
    """A decode step that also carries prefill: q extra prompt tokens per in-flight sequence (arrays broadcast).

    The chunk's tokens attend to the prompt's earlier part (h·ISL + (ISL_new − c)/2 on average)
    and read that part's KV once per chunk.
    """
    q = np.asarray(extra_tokens_per_seq, dtype=float)
    chunk = np.asarray(chunk, dtype=float)
    isl_new = max(float(isl) * (1.0 - cached_share), 1.0)
    piece = np.minimum(chunk, isl_new)  # one prompt's part of the chunk (a chunk may hold several prompts)
    prefix = float(cached_share) * float(isl) + np.maximum(isl_new - piece, 0.0) / 2.0
    ctx = prefix + (piece - 1.0) / 2.0
    attn_tok = np.asarray(model.attention_flops_per_token(np.maximum(ctx, 0.0), prefill=True), dtype=float)
    kv_chunk = np.asarray(model.kv_read_bytes(prefix, kv_dtype), dtype=float)
    pl = float(mn_decode.pass_len)
    exp_tok = mn_decode.expert_flops_per_seq / pl
    return replace(mn_decode, pass_len=pl + q, attn_flops_per_seq=mn_decode.attn_flops_per_seq + q * attn_tok,
                   flops_per_seq=mn_decode.flops_per_seq + q * (model.matmul_flops_per_token + attn_tok),
                   expert_flops_per_seq=mn_decode.expert_flops_per_seq + q * exp_tok,
                   kv_read_bytes_per_seq=mn_decode.kv_read_bytes_per_seq + q / piece * kv_chunk,
                   head_tokens_per_seq=pl)



def run_step(plan, mn, layout, eff, micro_batch, *, gpus=None, sched=True, adp_imbalance=None):
    """One step of ``layout`` on ``mn`` (engine/layout.evaluate → engine/step.compose); ``plan`` gives the stack and
    the hardware numbers (``plan.stack``, ``plan.hw()``), ``sched`` False leaves out the host's time per step."""
    if not sched:
        eff = replace(eff, step_overhead_s=0.0)
    else:  # the stack's own host time (per step + per sequence) on top of the chip family's host time
        ranks = np.asarray(layout.attention_ranks, dtype=float)
        per_sched = np.asarray(micro_batch, dtype=float) / ranks  # each attention-DP rank has its own scheduler
        extra = host_step_s(eff, plan.stack.name, per_sched)
        if np.any(np.asarray(extra) != 0):
            eff = replace(eff, step_overhead_s=eff.step_overhead_s + extra)
    return layout_evaluate(mn, plan.hw(), tp=layout.tp, ep=layout.ep, pp=layout.pp, micro_batch=micro_batch,
                           attention_dp=layout.attention_dp, adp_ranks=layout.attention_ranks,
                           chips=gpus or layout.gpus,
                           redundant_experts=layout.redundant_experts, usable_fraction=plan.stack.mem_fraction,
                           efficiency=eff, sched_overlap=plan.stack.overlap_scheduler, adp_imbalance=adp_imbalance,
                           weight_layout=layout.weight_layout)



def eager_step(t_gpu, n_kernels, tau_eager):
    """A step that is not graph-captured: t = max(t_gpu, n_kernels · τ_eager).

    SGLang and vLLM capture CUDA graphs for decode batches only (vLLM V1's piecewise graphs leave
    attention eager); prefill and mixed prefill+decode steps are dispatched kernel by kernel from
    Python. The host runs ahead of the GPU (launches are asynchronous), so the step takes the longer
    of the GPU's time and the host's dispatch time — a short prompt through many layers is
    dispatch-bound, a long chunk is GPU-bound.
    """
    return np.maximum(np.asarray(t_gpu, dtype=float),
                      np.asarray(n_kernels, dtype=float) * np.asarray(tau_eager, dtype=float))


def synced_prompt_pass(attention_dp, ep) -> object:
    """Whether a prompt pass syncs its host with the GPU at every MoE layer: its experts are reached by an all-to-all
    over attention-DP ranks (attention DP and EP > 1). The dispatch of a prompt pass — DeepEP's normal kernels in
    SGLang, the stacks' attention-DP all-to-all — sizes its buffers from each rank's receive counts, which the host
    reads back from the GPU (DeepEP README: the normal kernels need a CPU–GPU sync and cannot be graph-captured), so
    the host cannot dispatch ahead across layers: :func:`synced_eager_step`. A tensor-parallel pass (all-reduce, no
    per-rank counts) overlaps as :func:`eager_step`. What shows it: InferenceMAX's saturated prefill pools —
    tensor-parallel ones run at the overlapped model's rate (0.98–1.03×), attention-DP ones at 0.45–0.66 of it and
    at 0.7–1.04 of the serial one (docs/stacks.md, "A prompt pass's host sync")."""
    return wide_ep(attention_dp, ep)


def synced_eager_step(t_gpu, n_kernels, tau_eager):
    """A prompt pass that syncs its host with the GPU at every MoE layer (:func:`synced_prompt_pass`):
    t = t_gpu + n_kernels · τ_eager — the host's dispatch no longer hides behind the GPU's work (:func:`eager_step`
    takes the max of the two)."""
    return np.asarray(t_gpu, dtype=float) + np.asarray(n_kernels, dtype=float) * np.asarray(tau_eager, dtype=float)


def prompt_pass_step(t_gpu, n_kernels, tau_eager, synced):
    """An eager prompt pass: :func:`synced_eager_step` where ``synced`` (:func:`synced_prompt_pass`), else
    :func:`eager_step`."""
    return np.where(synced, synced_eager_step(t_gpu, n_kernels, tau_eager), eager_step(t_gpu, n_kernels, tau_eager))


def prefill_speed_step(t_gpu, t_decode_gpu, eta_prefill):
    """GPU time of a step that carries prefill, at the stack version's prefill speed: t = t_d + (t_gpu − t_d) / η_pf.

    t_gpu is the step's time from the silicon's kernel curves, t_d the same step without its prompt tokens (0 for a
    prefill pass alone), η_pf the stack version's prefill speed relative to those curves (``Efficiency.eta_prefill``:
    1 in every preset; a version's fitted one under ``--efficiency measured``, ``stack_hosts.toml``). The curves are
    one stack's kernels (aiconfigurator-core's TensorRT-LLM tables); another build's prefill kernels — its MoE
    grouped GEMMs and dispatch at thousands of tokens, its prefill attention — can run far slower, which a
    disaggregated prefill pool shows directly: InferenceMAX's saturated runs (throughput flat as C grows) give the
    pool's prompt tokens/s (docs/stacks.md, "The prefill pool's speed"). Only the prompt tokens' share of the step is
    scaled: the decode part is what the step times (sched, seq, eager, τ_stack) describe.
    """
    t, t_d, eta = (np.asarray(x, dtype=float) for x in (t_gpu, t_decode_gpu, eta_prefill))
    return np.where(eta == 1.0, t, t_d + np.maximum(t - t_d, 0.0) / eta)  # η_pf = 1: the curves' time, exactly


def step_kernels(res) -> object:
    """Kernels and collectives one step of an evaluated layout dispatches from the host when it runs eagerly (every
    PP stage's): each operator's ``eager_kernels`` where it has them (MLA blocks: ``step.MLA_EAGER_KERNEL_SCALE`` ×
    their graph kernels), else its kernels."""
    times = res.__dict__["times"]
    n = sum(np.asarray(op.kernels if op.eager_kernels is None else op.eager_kernels, dtype=float)
            + np.asarray(op.collectives, dtype=float) for op in times.ops)
    return n * np.asarray(res.__dict__["scale"], dtype=float)


def prompt_pass_time(res, eff, stack: str, attention_dp, ep):
    """Time of a prompt pass evaluated as ``res`` (a prefill pass alone: a disaggregated pool's, or plan's prefill
    grid): its GPU time at the stack version's prefill speed (:func:`prefill_speed_step`) composed with its eager
    dispatch, serial where the experts' all-to-all syncs host and GPU (:func:`prompt_pass_step`,
    :func:`synced_prompt_pass`)."""
    return prompt_pass_step(prefill_speed_step(res.tpot_s, 0.0, eff.eta_prefill), step_kernels(res),
                            stack_eager_s(eff, stack), synced_prompt_pass(attention_dp, ep))


def speculative_step(t_verify, t_draft, mtp):
    """Speculative decoding / MTP step: t = t_verify(k + 1 tokens per sequence) + k · t_draft.

    The draft (MTP module, EAGLE head) is a real transformer layer plus the LM head, run k times
    one after another for one token per sequence; the target verifies the k + 1 tokens in one
    pass; A tokens are accepted per step (TPOT = t / A). Where the host's work is not overlapped
    (a serial stack; SGLang, which turns its overlap scheduler off under speculation) each draft pass
    pays the stack's host time like the verification does (``evaluate.evaluate``): t_draft = t_gpu + t_host.
    Leviathan et al. 2023; DeepSeek-V3 MTP (arXiv 2412.19437 §2.2); EAGLE (Li et al. 2024).
    """
    return np.asarray(t_verify, dtype=float) + np.asarray(mtp, dtype=float) * np.asarray(t_draft, dtype=float)
