"""Training compute, time and memory: the one-line equations (lecture 01:18:59, "6ND"; Korthikanti et al. 2022; ZeRO).

Pure functions of numbers (N, D, FLOP/s, chips, degrees of parallelism), all vectorized with numpy; every
function's docstring is its equation and source. The calibrated step model is :mod:`.step`; ``train`` and the
layout search are :mod:`.model`.

Units: FLOPs, FLOP/s (dense), bytes, bytes/s, seconds.

Bytes per parameter of mixed-precision Adam training (Rajbhandari et al. 2020, "ZeRO",
§3.1 and Fig. 1: "2Ψ + 2Ψ + KΨ" with K = 12): bf16 weights 2 B, bf16 gradients 2 B,
fp32 master weights 4 B, fp32 Adam first moment 4 B, fp32 Adam second moment 4 B =
**16 bytes per parameter**. (Gradients reduced in fp32 add 2 B → 18; see
``OPTIMIZER_BYTES``.)
"""

from __future__ import annotations

import numpy as np

from ...engine.comms import allreduce_time
from ...errors import InputError

# --------------------------------------------------------------------------------------
# compute
# --------------------------------------------------------------------------------------


def training_flops(n_active, tokens):
    """C = 6 · N · D: forward 2·N + backward 4·N FLOPs per token per active parameter.

    Kaplan et al. 2020 §2.1; Hoffmann et al. 2022 (Chinchilla) §3; lecture 01:18:59
    ("the famous 6ND formula"). N is the *active* parameter count for MoE.
    """
    return 6.0 * np.asarray(n_active, dtype=float) * np.asarray(tokens, dtype=float)


def forward_flops(n_active, tokens):
    """C_fwd = 2 · N · D (one multiply-add per parameter per token; lecture 01:18:59 "forward alone is 2")."""
    return 2.0 * np.asarray(n_active, dtype=float) * np.asarray(tokens, dtype=float)


def dense_attention_flops_per_token(n_layers, d_attn, context):
    """Forward attention FLOPs of one token attending to ``context`` earlier tokens:

    F_attn(c) = 4 · L · c · d_attn   (QKᵀ: 2·c·d_attn, softmax·V: 2·c·d_attn, per layer;
    d_attn = n_heads · head_dim). Kaplan et al. 2020, Table 1 ("2·n_layer·n_ctx·d_attn"
    is this at the causal mean c = n_ctx/2).
    """
    return 4.0 * np.asarray(n_layers, float) * np.asarray(context, float) * np.asarray(d_attn, float)


def causal_mean_context(seq_len):
    """Mean context of a token in a causal sequence of length s: c̄ = (s − 1)/2 ≈ s/2."""
    return (np.asarray(seq_len, dtype=float) - 1.0) / 2.0


def attention_training_flops(attn_fwd_flops_per_token, tokens):
    """C_attn = 3 · F_attn · D: backward of QKᵀ and softmax·V costs twice the forward (Kaplan et al. 2020 §2.1).

    ``attn_fwd_flops_per_token`` is the forward attention FLOPs per token averaged over
    the positions of a training sequence (see :func:`causal_mean_context`).
    """
    return 3.0 * np.asarray(attn_fwd_flops_per_token, float) * np.asarray(tokens, float)


def train_time(total_flops, chips, flops_per_chip):
    """T = C / (n_chips · F_achieved), F_achieved = MFU · peak (FLOP/s actually delivered per chip)."""
    return np.asarray(total_flops, float) / (np.asarray(chips, float) * np.asarray(flops_per_chip, float))


def chip_hours(total_flops, flops_per_chip):
    """Chip-hours = C / F_achieved / 3600 s."""
    return np.asarray(total_flops, float) / np.asarray(flops_per_chip, float) / 3600.0


def achieved_flops_per_chip(total_flops, chip_hours_):
    """F_achieved = C / (chip-hours · 3600): the per-chip FLOP/s a reported chip-hour total implies."""
    return np.asarray(total_flops, float) / (np.asarray(chip_hours_, float) * 3600.0)


def mfu(achieved_flops, peak_flops):
    """MFU = model FLOP/s achieved / peak dense FLOP/s (Chowdhery et al. 2022, PaLM, App. B)."""
    return np.asarray(achieved_flops, float) / np.asarray(peak_flops, float)


# --------------------------------------------------------------------------------------
# pipeline bubble
# --------------------------------------------------------------------------------------

SCHEDULES = ("gpipe", "1f1b", "interleaved")


def pipeline_bubble_fraction(P, M, v=1):
    """Fraction of a step a pipeline stage idles: f = (P − 1) / (v·M + P − 1).

    GPipe and 1F1B (PipeDream-Flush): v = 1, f = (P−1)/(M+P−1) (Huang et al. 2019,
    GPipe §2.2; Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on
    GPU Clusters Using Megatron-LM", §2.2.1). Interleaved 1F1B with v model chunks per
    stage: the bubble shrinks v-fold, f = (P−1)/(v·M + P−1) (same paper, §2.2.2:
    bubble time / ideal time = (1/v)·(P−1)/M). P stages, M microbatches per step.
    """
    P = np.asarray(P, dtype=float)
    M = np.asarray(M, dtype=float)
    v = np.asarray(v, dtype=float)
    return (P - 1.0) / (v * M + P - 1.0)


def inflight_microbatches(P, M, schedule="1f1b"):
    """Microbatches whose activations the first stage holds at its peak.

    GPipe: all M (every forward before any backward; Huang et al. 2019).
    1F1B and interleaved: min(P, M) (Narayanan et al. 2021 §2.2.1).
    """
    P = np.asarray(P, float)
    M = np.asarray(M, float)
    if schedule == "gpipe":
        return M
    if schedule in ("1f1b", "interleaved"):
        return np.minimum(P, M)
    raise InputError("schedule", f"unknown pipeline schedule {schedule!r}", ", ".join(SCHEDULES))


def interleaved_activation_factor(P, v):
    """Extra activation memory of the interleaved schedule: 1 + (P − 1)/(P · v).

    Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
    Models", §4.2.3 (v model chunks per stage; v = 1 would be 1F1B's 1 with this term
    dropped).
    """
    P = np.asarray(P, float)
    return 1.0 + (P - 1.0) / (P * np.asarray(v, float))


# --------------------------------------------------------------------------------------
# memory: parameters, gradients, optimizer state
# --------------------------------------------------------------------------------------

# bytes per parameter: (weights, gradients, optimizer states incl. fp32 master)
OPTIMIZER_BYTES = {
    # Rajbhandari et al. 2020 (ZeRO) §3.1: mixed-precision Adam, 2 + 2 + 12 = 16 B/param
    "adam-mixed": (2.0, 2.0, 12.0),
    # the same with gradients accumulated/reduced in fp32 (Megatron's default main_grads)
    "adam-mixed-fp32grad": (2.0, 4.0, 12.0),
    # pure fp32 Adam: weights 4, grads 4, m 4, v 4
    "adam-fp32": (4.0, 4.0, 8.0),
    # bf16 weights + fp32 master + momentum-only optimizer (SGD-momentum, Muon): 2 + 2 + 8
    "momentum-mixed": (2.0, 2.0, 8.0),
}

ZERO_STAGES = (0, 1, 2, 3)


def model_state_bytes_per_param(dp, zero_stage=0, optimizer="adam-mixed"):
    """Bytes of model state per parameter per chip under ZeRO sharding across dp data-parallel ranks.

    Rajbhandari et al. 2020 (ZeRO), Fig. 1, with (w, g, K) = OPTIMIZER_BYTES[optimizer]:
      stage 0 (plain DP):        w + g + K
      stage 1 (P_os):            w + g + K/dp
      stage 2 (P_os+g):          w + (g + K)/dp
      stage 3 (P_os+g+p; FSDP):  (w + g + K)/dp
    FSDP "full shard" is stage 3; "shard grad op" is stage 2 (Zhao et al. 2023, PyTorch FSDP).
    """
    if optimizer not in OPTIMIZER_BYTES:
        raise InputError("optimizer", f"unknown optimizer {optimizer!r}", ", ".join(OPTIMIZER_BYTES))
    w, g, k = OPTIMIZER_BYTES[optimizer]
    dp = np.asarray(dp, float)
    if zero_stage == 0:
        return w + g + k + 0 * dp
    if zero_stage == 1:
        return w + g + k / dp
    if zero_stage == 2:
        return w + (g + k) / dp
    if zero_stage == 3:
        return (w + g + k) / dp
    raise InputError("zero", f"unknown ZeRO stage {zero_stage!r}", "0, 1, 2 or 3 (3 = FSDP full shard)")


def params_per_chip(dense_params, expert_params, tp=1, pp=1, ep=1):
    """Parameters one chip holds before DP sharding: N_dense/(tp·pp) + N_experts/(tp·pp·ep).

    Megatron-style: tensor parallelism splits every matrix tp ways, pipeline parallelism
    splits layers pp ways, expert parallelism splits routed experts ep ways (the MoE
    layers' TP is folded into tp here).
    """
    tp = np.asarray(tp, float)
    pp = np.asarray(pp, float)
    return np.asarray(dense_params, float) / (tp * pp) + np.asarray(expert_params, float) / (tp * pp * ep)


# --------------------------------------------------------------------------------------
# memory: activations (Korthikanti et al. 2022, Table 2)
# --------------------------------------------------------------------------------------

RECOMPUTE = ("none", "selective", "full")


def activation_bytes_per_layer(s, b, h, a, tp=1, sequence_parallel=False, recompute="none"):
    """Activation bytes one transformer layer stores for the backward pass, 16-bit activations.

    Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
    Models" (arXiv 2205.05198), §4 and Table 2 (s sequence length, b microbatch size in
    sequences, h hidden size, a attention heads, t tensor-parallel degree; dropout masks
    included; GPT block with a 4h GeLU MLP):

      none, no TP:           s·b·h · (34 + 5·a·s/h)
      none, TP:              s·b·h · (10 + 24/t + 5·a·s/(h·t))
      none, TP + SP:         s·b·h/t · (34 + 5·a·s/h)
      selective, TP:         s·b·h · (10 + 24/t)
      selective, TP + SP:    s·b·h · 34/t
      full recompute:        2·s·b·h  (only the layer input is kept)

    Selective recomputation drops the 5·a·s²·b attention-score terms (softmax, dropout).
    FlashAttention never stores those scores either, so "selective" is also the right
    figure for a FlashAttention stack.
    """
    s = np.asarray(s, float)
    b = np.asarray(b, float)
    h = np.asarray(h, float)
    a = np.asarray(a, float)
    t = np.asarray(tp, float)
    sbh = s * b * h
    if recompute == "full":
        return 2.0 * sbh / np.where(sequence_parallel, t, 1.0)
    attn = 5.0 * a * s / h
    if recompute == "selective":
        attn = 0.0 * attn
    elif recompute != "none":
        raise InputError("recompute", f"unknown recomputation {recompute!r}", ", ".join(RECOMPUTE))
    if sequence_parallel:
        return sbh / t * (34.0 + attn)
    return sbh * (10.0 + 24.0 / t + attn / t)


def activation_bytes_per_chip(per_layer_bytes, n_layers, pp=1, microbatches=1, schedule="1f1b", v=1):
    """Peak activation bytes on the first pipeline stage:

      A = per_layer · (L/P) · n_inflight · k,  n_inflight from :func:`inflight_microbatches`,
      k = :func:`interleaved_activation_factor` for the interleaved schedule, else 1.

    With 1F1B and M ≥ P this is per_layer · L, "independent of the pipeline degree"
    (Korthikanti et al. 2022 §4.2.3).
    """
    layers = np.asarray(n_layers, float) / np.asarray(pp, float)
    n = inflight_microbatches(pp, microbatches, schedule)
    k = interleaved_activation_factor(pp, v) if schedule == "interleaved" else 1.0
    return np.asarray(per_layer_bytes, float) * layers * n * k


# --------------------------------------------------------------------------------------
# communication
# --------------------------------------------------------------------------------------


def tp_allreduce_time(tokens_per_replica, d_model, layers_per_stage, tp, bw, act_bytes=2.0, latency=0.0):
    """Megatron tensor parallelism: 4 all-reduces of the activations per layer per step.

    Two in the forward (after attention and after the MLP) and two in the backward
    (Shoeybi et al. 2019, Megatron-LM §3, Fig. 4); sequence parallelism replaces each with a
    reduce-scatter + all-gather of the same total volume (Korthikanti et al. 2022 §4.2.2).
    t = 4 · L/P · allreduce(tokens · h · bytes, tp, bw).
    """
    nbytes = np.asarray(tokens_per_replica, float) * np.asarray(d_model, float) * act_bytes
    return 4.0 * np.asarray(layers_per_stage, float) * allreduce_time(nbytes, tp, bw, latency)
