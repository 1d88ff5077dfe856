"""The calibrated training step (issue 38): what Megatron-LM / NeMo and FSDP stacks do per optimizer step.

One function per term, each vectorized over any number of configurations (numpy arrays broadcast: records × K
candidate parameter vectors in the fit, layouts in the search). Inputs are per-configuration arrays in a dict
(:func:`step_inputs` builds it from a model, a chip and a layout); parameters a dict of arrays (a ``TrainPreset``'s
fields, :data:`TRAIN_PARAMS`). Everything is per GPU, per optimizer step, in seconds. :func:`step_terms` sums them.
"""

from __future__ import annotations

import numpy as np

from ...engine.comms import allreduce_time, alltoall_split_time
from ...engine.step import gemm_efficiency
from ...errors import InputError
from .equations import RECOMPUTE, tp_allreduce_time

#: FlashAttention's backward runs 5 matmuls to the forward's 2: 2.5× the forward FLOPs (Dao 2023, "FlashAttention-2",
#: §3.1–3.2), so a step of attention costs (1 + 2.5) × forward, one more forward when recomputed.
FLASH_BACKWARD_FACTOR = 2.5
#: Quantisation of one GEMM input element: read 16-bit (2 B) + write the low-precision copy, done for the forward,
#: the data-gradient and the weight-gradient GEMMs (Transformer Engine's cast kernels; Micikevicius et al. 2022 "FP8
#: formats for deep learning" §4; OCP MX spec v1.0: one 8-bit scale per 32 elements; NVFP4: one FP8 scale per 16
#: 4-bit elements).
QUANT_BYTES = {"bf16": 0.0, "fp8": 3.0, "mxfp8": 2.0 + 1.0 + 1.0 / 32, "nvfp4": 2.0 + 0.5 + 1.0 / 16}
#: GEMM peak each training precision runs at (chip.peak_flops key).
PEAK_KEY = {"bf16": "bf16", "fp8": "fp8", "mxfp8": "fp8", "nvfp4": "fp4"}
TRAIN_DTYPES = tuple(QUANT_BYTES)
#: Optimizer step bytes per parameter an Adam update moves: read fp32 master, m, v and the fp32 gradient (16 B), write
#: master, m, v (12 B) and the 16-bit weight (2 B) — a memory-bound kernel (ZeRO §3.1's 16 B of state, touched twice).
ADAM_STEP_BYTES = 30.0
#: Bytes per parameter a data-parallel step reduces: Megatron's distributed optimizer reduce-scatters fp32 gradients
#: (4 B) and all-gathers 16-bit weights (2 B) — the mean of the two halves of an all-reduce (Megatron-LM
#: distrib_optimizer.md); FSDP all-gathers 16-bit weights and reduce-scatters fp32 gradients the same way.
DP_BYTES_PER_PARAM = 3.0
SHARDINGS = ("none", "shard_grad_op", "full_shard")
FRAMEWORKS = ("megatron", "fsdp")
_RECOMPUTE_CODE = {"none": 0, "selective": 1, "full": 2}
_SHARD_CODE = {"none": 0, "shard_grad_op": 1, "full_shard": 2}




def gemm_time(flops, peak, eta, rows, rows_half, width, width_half):
    """t = F / (peak · η_c(M) · w/(w + w½)): a GEMM on the roofline at the serving model's small-GEMM efficiency
    (``engine.step.gemm_efficiency``: η_c(M) = η_c·M/(M + M½), M rows = tokens) and the same ramp over the GEMM's
    width per GPU (a narrow GEMM — a small model, or one split TP ways — fills fewer tiles per wave)."""
    eff = gemm_efficiency(eta, rows, rows_half) * gemm_efficiency(1.0, width, width_half)
    return np.asarray(flops, float) / (np.asarray(peak, float) * eff)


def attention_step_flops(f_attn_fwd, recompute_code):
    """FLOPs of one training step's causal attention per token: F_fwd · (1 + 2.5 + r), r = 1 when recomputed
    (selective recompute re-runs core attention, full recompute the whole layer; Korthikanti et al. 2022 §5;
    FlashAttention-2's 2.5× backward, :data:`FLASH_BACKWARD_FACTOR`)."""
    r = np.where(np.asarray(recompute_code) >= 1, 1.0, 0.0)
    return np.asarray(f_attn_fwd, float) * (1.0 + FLASH_BACKWARD_FACTOR + r)


def gemm_step_flops(n_matmul, recompute_code, lora=0.0):
    """FLOPs of one step's weight GEMMs per token: 6·N (forward 2·N, backward 4·N; Kaplan et al. 2020), plus 2·N when
    full recompute re-runs every forward (Chen et al. 2016; Korthikanti et al. 2022 §5: "33% overhead"), 2·f·N when a
    share f of the layers is fully recomputed on top of selective (recompute code 1 + f). LoRA freezes
    the base weights: no weight gradients, 4·N (Hu et al. 2021; the adapters' own FLOPs are negligible)."""
    full = 2.0 * np.clip(np.asarray(recompute_code, float) - 1.0, 0.0, 1.0)  # code 1 + f: a share f of layers full
    return np.asarray(n_matmul, float) * (np.where(np.asarray(lora) > 0, 4.0, 6.0) + full)


def layer_activation_bytes(d_model, ffn_width, ffn_matrices, k=0.0):
    """Bytes of activations one layer writes per token (16-bit), Korthikanti et al. 2022 Table 2 generalised:
    34·h for a GPT layer = 15·h (attention block and norms) + 19·h (MLP: input 2·h, fc1 and GELU outputs 2·4h each,
    dropout mask h). Here the MLP part is 2·h + 2·m·f (m matrices, f = the FFN width a token runs through: d_ff, or
    k·d_ff_expert + shared for a MoE layer) plus a MoE layer's permuted and un-permuted token copies, 2·2·k·h."""
    h = np.asarray(d_model, float)
    return 15.0 * h + 2.0 * h + 2.0 * ffn_matrices * np.asarray(ffn_width, float) + 4.0 * k * h


def elementwise_time(token_layers, act_bytes, tp_split, hbm_bw, k_elem):
    """Memory-bound layer work (norms, activations, residuals, RoPE, dropout, MoE permutation) per GPU:
    t = k · A/t_sp · (tokens · layers) / BW_HBM — the activations each layer writes (:func:`layer_activation_bytes`,
    split t ways by sequence parallelism), streamed k times over the step (k fitted: written forward, read back and
    written again as gradients)."""
    return k_elem * np.asarray(act_bytes, float) / tp_split * token_layers / hbm_bw


def quantisation_time(token_layers, gemm_input_width, tp_split, quant_bytes, hbm_bw):
    """FP8/MXFP8/NVFP4 cast kernels: t = 3 GEMMs · (Σ GEMM input width / t) · bytes per element cast · tokens·layers /
    BW_HBM (:data:`QUANT_BYTES`; 0 for BF16). A low-precision step also pays its LM head and attention in BF16."""
    return 3.0 * np.asarray(gemm_input_width, float) / tp_split * quant_bytes * token_layers / hbm_bw


def tp_comm_time(tokens_per_replica, d_model, layers_per_stage, tp, bw, eta_comm):
    """Tensor parallelism with sequence parallelism: per layer per step two all-gathers and two reduce-scatters
    forward, the same backward = 4 all-reduce volumes (Korthikanti et al. 2022 §4.2.2, :func:`tp_allreduce_time`),
    at the fitted share η_comm of the link (the part that is not overlapped with GEMMs)."""
    return tp_allreduce_time(tokens_per_replica, d_model, layers_per_stage, tp, bw) / eta_comm


def cp_ring_time(seqs_per_replica, seq, cp, tp, kv_bytes_token_layer, layers_per_stage, bw, eta_comm):
    """Context parallelism (ring attention; Liu et al. 2023; Megatron-Core CP): each of cp − 1 ring steps sends the
    KV chunk of s/cp tokens forward, KV and dKV backward: bytes = 3·(cp − 1)·b·(s/cp)·KV_token_layer/t · L/P per
    step. Overlapped with the attention of the chunk in flight: exposed = max(0, t_ring − t_attention)."""
    cp = np.asarray(cp, float)
    nbytes = (3.0 * (cp - 1.0) * seqs_per_replica * np.asarray(seq, float) / cp * kv_bytes_token_layer / tp
              * layers_per_stage)
    return np.where(cp > 1, nbytes / (bw * eta_comm), 0.0)


def ep_alltoall_step_time(tokens_per_gpu, d_model, moe_layers_per_stage, k, ep, group, domain, up_bw, out_bw,
                          eta_comm, act_bytes=2.0):
    """Expert parallelism with forced balance (every expert gets T·k/E tokens, none dropped: NVIDIA's MoE rows):
    dispatch and combine, forward and backward = 4 all-to-alls per MoE layer, each GPU sending its tokens' k copies
    but the (1/ep) that stay: bytes = 4·L_moe/P · T·k·h·2·(ep−1)/ep; the share past the NVLink domain at scale-out
    bandwidth (``engine.comms.alltoall_split_time``)."""
    ep = np.asarray(ep, float)
    nbytes = (4.0 * moe_layers_per_stage * tokens_per_gpu * k * np.asarray(d_model, float) * act_bytes
              * np.where(ep > 1, (ep - 1.0) / np.maximum(ep, 1.0), 0.0))
    return alltoall_split_time(nbytes, group, domain, up_bw, out_bw) / eta_comm


def pipeline_p2p_time(seqs_per_replica, seq, cp, tp, d_model, vp, bw, act_bytes=2.0):
    """Pipeline hand-offs: each stage boundary of each of the v chunks sends the micro-batch's activations forward and
    their gradient backward: bytes = 2·v·(B/dp)·(s/cp)·h·2/t (Narayanan et al. 2021 §4.1, scatter/gather across
    the tensor ranks)."""
    return (2.0 * vp * seqs_per_replica * np.asarray(seq, float) / cp * np.asarray(d_model, float) * act_bytes / tp
            / bw)


def dp_grad_time(params_per_gpu, group, ranks_in_domain, up_bw, out_bw, eta_comm):
    """Data-parallel gradient reduce-scatter + parameter all-gather (Megatron's distributed optimizer, ZeRO-1),
    hierarchical over the NVLink domain and the NICs (``engine.comms.hierarchical_allreduce_time``) of
    :data:`DP_BYTES_PER_PARAM` per parameter."""
    nbytes = np.asarray(params_per_gpu, float) * DP_BYTES_PER_PARAM
    s = np.minimum(np.asarray(group, float), ranks_in_domain)  # the same formula, the domain size per configuration
    d = np.ceil(np.asarray(group, float) / np.maximum(s, 1.0))
    return (allreduce_time(nbytes, s, up_bw) + allreduce_time(nbytes / np.maximum(s, 1.0), d, out_bw)) / eta_comm


def fsdp_time(params_per_gpu_unsharded, group, ranks_in_domain, up_bw, out_bw, sharding_code, microbatches,
              eta_comm):
    """FSDP / ZeRO-3 per step: every micro-batch all-gathers the 16-bit weights for its forward, again for its
    backward (FULL_SHARD; SHARD_GRAD_OP keeps them) and reduce-scatters fp32 gradients (Zhao et al. 2023, PyTorch
    FSDP §3; Rajbhandari et al. 2020 §5.3): (g−1)/g · P · (2·n_ag + 4) bytes, n_ag = 2 or 1 — the volume of an
    all-reduce of P·(n_ag + 2) bytes, over the domain and the NICs as :func:`dp_grad_time`."""
    n_ag = np.where(np.asarray(sharding_code) >= 2, 2.0, 1.0)
    per_param = (n_ag + 2.0) / DP_BYTES_PER_PARAM  # dp_grad_time moves DP_BYTES_PER_PARAM per parameter
    return microbatches * dp_grad_time(np.asarray(params_per_gpu_unsharded, float) * per_param, group,
                                       ranks_in_domain, up_bw, out_bw, eta_comm)


def optimizer_time(params_per_gpu, shard, hbm_bw):
    """Optimizer step: :data:`ADAM_STEP_BYTES` per parameter this GPU updates (its 1/shard of what it holds), memory
    bound."""
    return ADAM_STEP_BYTES * np.asarray(params_per_gpu, float) / shard / hbm_bw


def bubble_factor(pp, vp, microbatches):
    """1F1B and interleaved pipelines stretch a step by 1 + (P − 1)/(v·M) (Narayanan et al. 2021 §2.2.1–2.2.2:
    bubble / ideal time = (1/v)·(P − 1)/M)."""
    pp = np.asarray(pp, float)
    return 1.0 + (pp - 1.0) / (np.asarray(vp, float) * np.asarray(microbatches, float))


def expert_overhead_time(local_experts, moe_layers_per_stage, microbatches, tau):
    """Fixed time per local expert per MoE layer per micro-batch (its grouped-GEMM slices forward, data- and
    weight-gradient, routing bookkeeping): τ_e · (E/ep) · L_moe/P · M. Fine-grained MoEs (Qwen3 30B-A3B: 128 experts
    of width 768) pay it most."""
    return tau * np.asarray(local_experts, float) * moe_layers_per_stage * microbatches


def layer_overhead_time(layers_per_stage, microbatches, tau):
    """Fixed host/launch time per layer per micro-batch (forward + backward kernels, synchronisations): τ · L/P · M."""
    return tau * layers_per_stage * microbatches


#: Fitted parameters of a training preset: name → (lo, hi, start, ideal, scope, meaning). Scope: "group" = one value
#: per hardware family × framework family (what the stack does on that silicon), "family" = one per hardware family
#: (a property of the chip: how much of its BF16 efficiency its FP8/FP4 tensor cores keep), "shared" = one for all.
TRAIN_PARAMS = {
    "eta_gemm": (0.2, 1.0, 0.7, 1.0, "group", "achieved share of the dtype's peak by a large training GEMM"),
    "tau_layer_s": (0.0, 2e-3, 5e-5, 0.0, "group", "fixed time per layer per micro-batch (launches, syncs), s"),
    "rows_half": (0.0, 4096.0, 256.0, 0.0, "shared", "GEMM rows (tokens) at half efficiency"),
    "width_half": (0.0, 2048.0, 128.0, 0.0, "shared", "GEMM width per GPU at half efficiency"),
    "eta_attn": (0.1, 1.0, 0.5, 1.0, "group", "achieved share of the BF16 peak by the stack's FlashAttention kernel"),
    "k_elem": (0.0, 20.0, 3.0, 0.0, "shared", "times the layer activations stream through HBM per step"),
    "eta_comm": (0.1, 1.0, 0.6, 1.0, "shared", "achieved share of link bandwidth by exposed collectives"),
    "tau_expert_s": (0.0, 2e-4, 2e-5, 0.0, "shared", "fixed time per local expert per MoE layer per micro-batch, s"),
    "lowp_ratio": (0.3, 1.0, 0.8, 1.0, "family", "share of its BF16 efficiency a low-precision GEMM reaches"),
}
IDEAL_PARAMS = {k: v[3] for k, v in TRAIN_PARAMS.items()}


def step_terms(x: dict, p: dict) -> dict:
    """Every term of one optimizer step per GPU (seconds), vectorized: ``x`` from :func:`step_inputs` (arrays of
    configurations), ``p`` the preset (:data:`TRAIN_PARAMS`; arrays broadcast against ``x``).

      t_work = t_GEMM + t_head + t_attn + t_elem + t_quant + t_TP + t_EP + exposed t_CP + t_layer + t_expert
      t_step = t_work · (1 + (P−1)/(v·M)) + t_p2p + exposed t_DP/FSDP + t_optimizer
    """
    with np.errstate(all="ignore"):
        return _step_terms(x, p)


def _step_terms(x: dict, p: dict) -> dict:
    f = lambda k: np.asarray(x[k], float)  # noqa: E731
    gpus, tp, pp, cp, ep, vp = f("gpus"), f("tp"), f("pp"), f("cp"), f("ep"), f("vp")
    B, s, mb = f("global_batch"), f("seq"), f("micro_batch")
    dp = gpus / (tp * pp * cp)
    M = np.maximum(B / (dp * mb), 1.0)
    rc = f("recompute")
    lowp = f("lowp")
    eta_lowp = p["eta_gemm"] * np.where(lowp > 0, p["lowp_ratio"], 1.0)
    tokens = B * s  # per step, whole job
    tok_gpu = tokens / gpus  # token-work per GPU (balanced over TP, PP, CP, EP)
    lora = f("lora")
    t_body = gemm_time(tok_gpu * gemm_step_flops(f("n_dense"), rc, lora), f("peak"), eta_lowp, mb * s / cp,
                       p["rows_half"], f("d_model") / tp, p["width_half"])
    rows_exp = mb * s / cp * f("k") * ep / np.maximum(f("n_experts"), 1.0)
    t_exp = np.where(f("n_expert") > 0, gemm_time(tok_gpu * gemm_step_flops(f("n_expert"), rc, lora), f("peak"), eta_lowp,
                                                 rows_exp, p["rows_half"], f("moe_d_ff"), p["width_half"]), 0.0)
    t_head = gemm_time(tok_gpu * gemm_step_flops(f("n_head"), rc, lora), f("peak_bf16"), p["eta_gemm"], mb * s / cp,
                       p["rows_half"], f("d_model") / tp, p["width_half"])
    t_attn = tok_gpu * attention_step_flops(f("f_attn"), rc) / (f("peak_bf16") * p["eta_attn"])
    sp = np.maximum(tp, 1.0)
    token_layers = tokens * f("n_layers") / (dp * cp * pp)
    t_elem = elementwise_time(token_layers, f("act_bytes"), sp, f("hbm_bw"), p["k_elem"])
    t_quant = quantisation_time(token_layers, f("gemm_in"), sp, f("quant_bytes"), f("hbm_bw"))
    dom = f("domain")
    tp_bw = np.where(tp <= dom, f("up_bw"), f("out_bw"))
    lps = f("n_layers") / pp
    t_tp = tp_comm_time(tokens / (dp * cp), f("d_model"), lps, tp, tp_bw, p["eta_comm"])
    cp_bw = np.where(tp * cp <= dom, f("up_bw"), f("out_bw"))
    t_cp_ring = cp_ring_time(B / dp, s, cp, tp, f("kv_bytes"), lps, cp_bw, p["eta_comm"])
    t_cp = np.maximum(0.0, t_cp_ring - t_attn)
    t_ep = np.where(f("n_moe") > 0, ep_alltoall_step_time(tokens / (dp * cp * tp), f("d_model"), f("n_moe") / pp,
                                                          f("k"), ep, ep * tp, dom, f("up_bw"), f("out_bw"),
                                                          p["eta_comm"]), 0.0)
    t_layer = layer_overhead_time(lps, M, p["tau_layer_s"])
    t_expert = np.where(f("n_moe") > 0, expert_overhead_time(f("n_experts") / ep, f("n_moe") / pp, M,
                                                             p["tau_expert_s"]), 0.0)
    t_work = t_body + t_exp + t_head + t_attn + t_elem + t_quant + t_tp + t_ep + t_cp + t_layer + t_expert
    bub = bubble_factor(pp, vp, M)
    p2p_bw = np.where(tp * cp * pp <= dom, f("up_bw"), f("out_bw"))
    t_p2p = np.where(pp > 1, pipeline_p2p_time(B / dp, s, cp, tp, f("d_model"), vp, p2p_bw), 0.0)
    # data parallel: Megatron's distributed optimizer (sharding none) or FSDP (shard_grad_op / full_shard)
    shard = f("sharding")
    trainable = np.where(lora > 0, 0.0, 1.0)  # LoRA reduces and updates only its adapters (negligible)
    p_dense = f("params_dense") / (tp * pp) * trainable
    p_exp = f("params_expert") / (ep * pp) * trainable
    n_dense = dp * cp
    n_exp = np.maximum(dp * cp * tp / ep, 1.0)
    in_dom = np.maximum(np.minimum(np.floor(dom / (tp * cp)), n_dense), 1.0)
    # the expert-data-parallel group: Megatron-Core places the EP ranks consecutively and an expert's replicas ep ranks
    # apart (expert TP 1), so only dom/ep of them share an NVLink domain (EP 8 on an 8-GPU node: none)
    in_dom_exp = np.maximum(np.minimum(np.floor(dom / ep), n_exp), 1.0)
    t_dp_full = (dp_grad_time(p_dense, n_dense, in_dom, f("up_bw"), f("out_bw"), p["eta_comm"])
                 + dp_grad_time(p_exp, n_exp, in_dom_exp, f("up_bw"), f("out_bw"), p["eta_comm"]))
    group = np.where(f("fsdp_group") > 0, f("fsdp_group"), n_dense)
    t_fsdp = fsdp_time(p_dense + p_exp, group, np.minimum(in_dom, group), f("up_bw"), f("out_bw"), shard, M,
                       p["eta_comm"])
    window = t_work / M  # Megatron overlaps the reduction with the last micro-batch's backward
    t_dp = np.where(shard > 0, np.maximum(0.0, t_fsdp - t_work), np.maximum(0.0, t_dp_full - window))
    t_opt = optimizer_time(p_dense + p_exp, np.where(shard > 0, group, n_dense), f("hbm_bw"))
    t_step = t_work * bub + t_p2p + t_dp + t_opt
    return {"t_gemm_s": t_body + t_exp, "t_head_s": t_head, "t_attention_s": t_attn, "t_elementwise_s": t_elem,
            "t_quantisation_s": t_quant, "t_tp_s": t_tp, "t_ep_s": t_ep, "t_cp_exposed_s": t_cp,
            "t_layer_overhead_s": t_layer, "t_expert_overhead_s": t_expert, "t_work_s": t_work, "t_bubble_s": t_work * (bub - 1.0),
            "t_p2p_s": t_p2p, "t_dp_exposed_s": t_dp, "t_dp_total_s": np.where(shard > 0, t_fsdp, t_dp_full),
            "t_optimizer_s": t_opt, "t_step_s": t_step, "microbatches": M + 0 * t_step, "dp": dp + 0 * t_step,
            "tokens_per_s_per_gpu": tokens / (gpus * t_step)}


def model_numbers(model, seq) -> dict:
    """The model's numbers the step model needs at sequence length ``seq`` (scalars): matmul parameters per token
    split into dense body, routed experts and LM head; layers; widths; mean causal attention FLOPs per token
    (:func:`mean_attention_flops_per_token`); KV bytes per token per layer; parameter totals."""
    L = float(model.n_layers)
    d = float(model.d_model)
    V = float(getattr(model, "vocab_size", 0) or 0)
    n_matmul = float(model.matmul_flops_per_token) / 2.0
    experts = _expert_params(model)
    n_exp_tot = float(getattr(model, "n_experts", 0) or 0)
    k = float(getattr(model, "experts_per_token", 0) or 0)
    n_expert = experts / n_exp_tot * k if n_exp_tot > 0 else 0.0
    n_head = V * d
    dff = float(getattr(model, "d_ff", 0) or 0)
    moe_dff = float(getattr(model, "moe_d_ff", 0) or 0)
    n_moe = float(getattr(model, "n_moe_layers", 0) or 0)
    mats = float(getattr(model, "ffn_matrices", 3) or 3)
    dense_ffn_layers = L - n_moe
    shared = float(getattr(model, "n_shared_experts", 0) or 0)
    ffn_in = (dense_ffn_layers * (d * (mats - 1) + dff) + n_moe * (k + shared) * (d * (mats - 1) + moe_dff)) / L
    act = (dense_ffn_layers * layer_activation_bytes(d, dff or 4 * d, mats)
           + n_moe * layer_activation_bytes(d, (k + shared) * moe_dff, mats, k)) / L
    return {"n_dense": max(n_matmul - n_expert - n_head, 0.0), "n_expert": n_expert, "n_head": n_head,
            "n_layers": L, "d_model": d, "n_moe": n_moe, "k": k, "n_experts": n_exp_tot,
            "moe_d_ff": moe_dff or dff or 4 * d, "gemm_in": 2.0 * d + ffn_in, "act_bytes": float(act),
            "f_attn": mean_attention_flops_per_token(model, seq),
            "kv_bytes": float(model.kv_bytes_per_token(context=max(int(seq), 1))) / L,
            "params_dense": float(model.total_params) - experts, "params_expert": experts}


def mean_attention_flops_per_token(model, seq_len, samples: int = 257):
    """F̄_attn(s) = (1/s) Σ_{i<s} F_attn(i): forward attention FLOPs averaged over a causal training sequence.

    Uses ``model.attention_flops_per_token(context, prefill=True)`` (windows and sparse attention
    included; MLA in its un-absorbed training form), averaged with the trapezoid rule over ``samples`` positions; exact for
    dense attention, where it equals F_attn(s/2).
    """
    pos = np.linspace(0.0, float(seq_len) - 1.0, samples)
    try:  # training runs the prompt (un-absorbed) form of MLA, as a prefill does
        vals = np.asarray(model.attention_flops_per_token(pos, prefill=True), dtype=float)
    except TypeError:  # a duck-typed model without the prefill form
        vals = np.asarray(model.attention_flops_per_token(pos), dtype=float)
    if samples < 2 or pos[-1] <= 0:
        return float(vals[0])
    area = float(np.sum(0.5 * (vals[1:] + vals[:-1]) * np.diff(pos)))
    return area / float(pos[-1] - pos[0])


def _expert_params(model) -> float:
    """Routed-expert parameters of a ModelSpec (0 for dense): n_moe_layers · n_experts · (one expert of one layer)."""
    n_exp = float(getattr(model, "n_experts", 0) or 0)
    n_moe = float(getattr(model, "n_moe_layers", 0) or 0)
    if n_exp <= 0 or n_moe <= 0:
        return 0.0
    one = getattr(model, "expert_params", None)
    if one is None or callable(one):
        one = float(model.expert_weight_bytes("bf16")) / 2.0
    return float(one) * n_exp * n_moe


#: The layout inputs of :func:`step_inputs` and their defaults (degrees may be arrays: a layout grid).
STEP_LAYOUT = {"micro_batch": 1, "tp": 1, "pp": 1, "cp": 1, "ep": 1, "vp": 1, "recompute": "selective",
               "sharding": "none", "fsdp_group": 0, "recompute_fraction": 0.0}


def step_inputs(model, chip, *, domain, gpus, global_batch, seq, dtype="bf16", lora=False, **layout) -> dict:
    """Inputs of :func:`step_terms` for one model on one chip; ``layout`` holds any of :data:`STEP_LAYOUT` (micro_batch,
    tp, pp, cp, ep, vp, recompute, sharding, fsdp_group, recompute_fraction), the rest take its defaults."""
    unknown = set(layout) - set(STEP_LAYOUT)
    if unknown:
        raise TypeError(f"step_inputs() got unexpected keyword arguments {sorted(unknown)}")
    lay = {**STEP_LAYOUT, **layout}
    recompute, sharding = lay.pop("recompute"), lay.pop("sharding")
    if dtype not in QUANT_BYTES:
        raise InputError("dtype", f"{dtype!r} is not a training precision", ", ".join(TRAIN_DTYPES))
    if recompute not in _RECOMPUTE_CODE:
        raise InputError("recompute", f"unknown recomputation {recompute!r}", ", ".join(RECOMPUTE))
    if sharding not in _SHARD_CODE:
        raise InputError("fsdp", f"unknown sharding {sharding!r}", ", ".join(SHARDINGS))
    frac, fsdp_group = lay.pop("recompute_fraction"), lay.pop("fsdp_group")
    x = model_numbers(model, seq)
    x.update(gpus=gpus, global_batch=global_batch, seq=seq, **lay,
             recompute=_RECOMPUTE_CODE[recompute] + (frac if recompute == "selective" else 0.0),
             sharding=_SHARD_CODE[sharding], fsdp_group=fsdp_group or 0,
             lowp=0.0 if dtype == "bf16" else 1.0, quant_bytes=QUANT_BYTES[dtype], lora=1.0 if lora else 0.0,
             peak=float(chip.peak_flops(PEAK_KEY[dtype])), peak_bf16=float(chip.peak_flops("bf16")),
             hbm_bw=float(chip.hbm_bw), up_bw=float(chip.scaleup_bw), out_bw=float(chip.scaleout_bw),
             domain=float(domain))
    return x
