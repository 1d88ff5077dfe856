"""Pipeline parallelism across racks, in inference and in training (lecture 00:47:12–01:18:59).

One function per equation; plain SI floats; numpy in, numpy out. No I/O, no printing.
The training bubble formula lives in :mod:`rackmath.analyses.training.equations` and is imported here.
"""

from __future__ import annotations

import numpy as np

from ...engine.layout import c_mem  # noqa: F401 (the lecture's c_mem, re-exported)
from ...errors import InputError
from ...explain import Derivation, fmt
from ..training.equations import inflight_microbatches, interleaved_activation_factor, pipeline_bubble_fraction

# ----------------------------------------------------------------------------- the pipeline condition (R23)


def pipeline_condition(scaleout_bw, scaleup_bw, experts_per_token, layers_per_stage):
    """Scale-up time over scale-out time at a rack boundary (00:47, R23):

    t_up / t_out = (BW_out / BW_up) · k · layers_per_stage · 2  ≥ 1 wanted.

    A token crosses the rack boundary once per stage but fans out to k experts, twice
    (dispatch and combine), in every MoE layer of the stage. "There's just a factor of 8
    we need to overcome."
    """
    return (np.asarray(scaleout_bw, dtype=float) / np.asarray(scaleup_bw, dtype=float)
            * np.asarray(experts_per_token, dtype=float) * np.asarray(layers_per_stage, dtype=float) * 2.0)


def min_layers_per_stage(scaleout_bw, scaleup_bw, experts_per_token):
    """Fewest MoE layers per stage that keep scale-out off the critical path: ceil(BW_up / (BW_out · k · 2))  (R23)."""
    return np.maximum(1.0, np.ceil(np.asarray(scaleup_bw, dtype=float)
                                   / (np.asarray(scaleout_bw, dtype=float) * np.asarray(experts_per_token, dtype=float)
                                      * 2.0) - 1e-12))


def max_pipeline_stages(n_moe_layers, min_layers):
    """Most stages the condition allows: floor(MoE layers / min layers per stage)  (00:47: "one rack does one layer")."""
    return np.maximum(1.0, np.floor(np.asarray(n_moe_layers, dtype=float) / np.asarray(min_layers, dtype=float)))


# ----------------------------------------------------------------------------- pipelining in inference (R24, R28)


def pipelined_token_latency(t_step, stages, hop_latency):
    """Per-token latency with P stages: t_step + P · t_hop  (01:12, R28: 20 ms → ~30 ms with 4 stages).

    Latency-neutral apart from the hops: "if it were all on one rack, we would just slide
    all the boxes down … and the latency would be the same" (00:47). The P-th hop takes
    the new token back to the first stage. One stage: no hop.
    """
    P = np.asarray(stages, dtype=float)
    return np.asarray(t_step, dtype=float) + np.where(P > 1, P, 0.0) * np.asarray(hop_latency, dtype=float)


def microbatches_in_flight(stages):
    """Micro-batches in flight in pipelined decode: M = P ("proof by visual", 01:03:37)."""
    return np.asarray(stages, dtype=float)


def global_batch(micro_batch, stages):
    """Sequences in flight: B = M · b = P · b, b the hardware-set "20 ms train" (01:03:37)."""
    return microbatches_in_flight(stages) * np.asarray(micro_batch, dtype=float)


def weight_bytes_per_chip(weight_bytes, ep, stages):
    """Weight memory per chip: N_total·bytes / (E · P)  (01:03:37, R24): falls with P."""
    return np.asarray(weight_bytes, dtype=float) / (np.asarray(ep, dtype=float) * np.asarray(stages, dtype=float))


def kv_bytes_per_chip(micro_batch, kv_bytes_per_seq, ep, stages):
    """KV memory per chip: (P·b) · len · bytes / (E · P) = b · len · bytes / E  (01:03:37, R24): P cancels."""
    P = np.asarray(stages, dtype=float)
    return global_batch(micro_batch, P) * np.asarray(kv_bytes_per_seq, dtype=float) / (np.asarray(ep, dtype=float) * P)


def throughput_per_chip(micro_batch, t_step, stages, hop_latency, chips_per_stage):
    """Tokens/s per chip with P stages: P·b / (latency · P · chips_per_stage) — batch-neutral, hop latency aside."""
    P = np.asarray(stages, dtype=float)
    return global_batch(micro_batch, P) / (pipelined_token_latency(t_step, P, hop_latency) * P * chips_per_stage)


# ----------------------------------------------------------------------------- pipelining in training


def bubble_fraction(stages, microbatches, chunks=1):
    """Idle share of a training step: (P − 1)/(v·M + P − 1)  (GPipe / 1F1B v = 1; interleaved v chunks).

    Imported from :func:`rackmath.analyses.training.equations.pipeline_bubble_fraction` (one formula, one place);
    lecture 00:47 ("the bubble … zero bubble or one-forward-one-backward").
    """
    return pipeline_bubble_fraction(stages, microbatches, chunks)


def zero_bubble_fraction(stages, microbatches, t_f=1.0, t_b=1.0, t_w=1.0, schedule="zb-h1"):
    """Idle share of a training step with a zero-bubble schedule (Qi et al. 2024, "Zero Bubble Pipeline
    Parallelism", ICLR, arXiv 2401.10241; lecture 00:55: "zero bubble … you can do the weight gradient step").

    The backward pass splits into B (gradient w.r.t. the input, on the critical path) and W
    (gradient w.r.t. the weights, needed only by the optimizer step), so W work fills the
    bubble. With forward/B/W times T_F, T_B, T_W per micro-batch and stage:

        1F1B:  bubble = (P − 1)·(T_F + T_B + T_W)
        ZB-H1: bubble = (P − 1)·(T_F + T_B − T_W)     (1F1B's memory)
        ZB-H2: bubble ≈ 0                              (≈2× 1F1B's activation memory, and the
                                                        optimizer's global checks made post hoc)
        f = bubble / (M·(T_F + T_B + T_W) + bubble)

    At T_F = T_B = T_W, ZB-H1 gives f = (P − 1)/(3M + P − 1): a third of 1F1B's bubble time.
    """
    P = np.asarray(stages, dtype=float)
    M = np.asarray(microbatches, dtype=float)
    work = M * (t_f + t_b + t_w)
    if schedule == "zb-h2":
        return np.zeros(np.broadcast_shapes(P.shape, M.shape))
    if schedule == "1f1b":
        bubble = (P - 1.0) * (t_f + t_b + t_w)
    elif schedule == "zb-h1":
        bubble = (P - 1.0) * np.maximum(t_f + t_b - t_w, 0.0)
    else:
        raise InputError("schedule", f"{schedule!r} is not a schedule", "1f1b, zb-h1 or zb-h2")
    return bubble / (work + bubble)


def schedule_bubbles(stages, microbatches, chunks=2):
    """Bubble fraction of every schedule the lecture names, side by side: GPipe, 1F1B, interleaved (v chunks),
    ZB-H1, ZB-H2 (T_F = T_B = T_W)."""
    return {
        "GPipe": float(bubble_fraction(stages, microbatches)),
        "1F1B": float(bubble_fraction(stages, microbatches)),
        f"interleaved 1F1B (v = {chunks})": float(bubble_fraction(stages, microbatches, chunks)),
        "zero bubble ZB-H1": float(zero_bubble_fraction(stages, microbatches, schedule="zb-h1")),
        "zero bubble ZB-H2": float(zero_bubble_fraction(stages, microbatches, schedule="zb-h2")),
    }


def training_activation_bytes(act_bytes_per_microbatch_stage, stages, microbatches, schedule="1f1b", chunks=1):
    """Activation memory of the first stage at its peak: in-flight micro-batches × activations of one.

    GPipe holds all M; 1F1B holds min(P, M); interleaved × (1 + (P−1)/(P·v)) (Narayanan et al. 2021;
    Korthikanti et al. 2022). Inference holds none of this: it keeps KV instead (01:03:37).
    """
    m = inflight_microbatches(stages, microbatches, schedule)
    f = interleaved_activation_factor(stages, chunks) if schedule == "interleaved" else 1.0
    return np.asarray(act_bytes_per_microbatch_stage, dtype=float) * m * f


# ----------------------------------------------------------------------------- explainable summaries


def pipeline_condition_analysis(system, experts_per_token, layers_per_stage=1, n_moe_layers=None) -> Derivation:
    """Derivation of R23 on a real system: the ratio at ``layers_per_stage`` and the fewest layers per stage."""
    c = system.chip
    d = Derivation(f"Pipeline condition on {system.name} (lecture 00:47)")
    r = d.add("BW_out/BW_up", "scale-out ÷ scale-up per chip", f"{fmt(c.scaleout_bw, 'B/s')} / {fmt(c.scaleup_bw, 'B/s')}",
              c.scaleout_bw / c.scaleup_bw, "", "lecture: 1/8")
    d.add("t_up/t_out", "(BW_out/BW_up) · k · layers/stage · 2", f"{r:.4g} · {experts_per_token} · {layers_per_stage} · 2",
          float(pipeline_condition(c.scaleout_bw, c.scaleup_bw, experts_per_token, layers_per_stage)), "",
          "≥ 1: scale-out is not the bottleneck")
    n_min = d.add("layers/stage_min", "ceil(BW_up / (BW_out · k · 2))", f"ceil(1 / ({r:.4g} · {experts_per_token} · 2))",
                  float(min_layers_per_stage(c.scaleout_bw, c.scaleup_bw, experts_per_token)), "")
    if n_moe_layers:
        d.add("P_max", "floor(MoE layers / layers/stage_min)", f"floor({n_moe_layers} / {n_min:g})",
              float(max_pipeline_stages(n_moe_layers, n_min)), "")
    d.conclusion = "a few MoE layers per stage overcome the scale-out penalty"
    return d


def inference_pipelining_analysis(*, t_step, stages, hop_latency, weight_bytes, kv_bytes_per_seq, micro_batch,
                                  ep, t_step_note="") -> Derivation:
    """Derivation of R24/R28: latency with P stages; weight memory ÷ P; KV memory per chip unchanged.

    ``t_step`` is the decode step without pipelining; callers derive it (the HBM drain time
    capacity/bandwidth, lecture 00:25) and say how in ``t_step_note``.
    """
    P = int(stages)
    if P < 1:
        raise InputError("stages", f"{stages!r}", "a positive integer")
    d = Derivation(f"Pipelining decode over {P} stages (lecture 00:47–01:18)")
    if t_step_note:
        d.add("t_step", "one stage's decode step", t_step_note, float(t_step), "s")
    d.add("M", "P", f"{P}", float(microbatches_in_flight(P)), "", "micro-batches in flight = stages")
    d.add("B", "P · b", f"{P} · {micro_batch:g}", float(global_batch(micro_batch, P)), "")
    d.add("t_token", "t_step + P · t_hop", f"{fmt(t_step, 's')} + {P} · {fmt(hop_latency, 's')}",
          float(pipelined_token_latency(t_step, P, hop_latency)), "s", "hop: a few ms, ±10× (01:12)")
    d.add("w/chip", "N·bytes / (E · P)", f"{fmt(weight_bytes, 'B')} / ({ep} · {P})",
          float(weight_bytes_per_chip(weight_bytes, ep, P)), "B", f"÷{P} vs one stage")
    d.add("kv/chip", "(P·b) · kv_seq / (E · P) = b · kv_seq / E",
          f"{P * micro_batch:g} · {fmt(kv_bytes_per_seq, 'B')} / ({ep} · {P})",
          float(kv_bytes_per_chip(micro_batch, kv_bytes_per_seq, ep, P)), "B", "unchanged by P")
    d.conclusion = "pipelining cuts weight memory, not KV memory, and adds only hop latency"
    return d


def training_pipeline_analysis(*, stages, microbatches, chunks=1, act_bytes_per_microbatch_stage=0.0,
                               schedule="1f1b") -> Derivation:
    """Derivation: bubble fraction and in-flight activation memory of a training pipeline."""
    d = Derivation(f"Training pipeline, P = {stages}, M = {microbatches}, v = {chunks} ({schedule})")
    d.add("bubble", "(P − 1) / (v·M + P − 1)", f"({stages} − 1) / ({chunks}·{microbatches} + {stages} − 1)",
          float(bubble_fraction(stages, microbatches, chunks)), "", "GPipe / 1F1B (v = 1), interleaved (v chunks)")
    d.add("in flight", "GPipe: M; 1F1B: min(P, M)", "", float(inflight_microbatches(stages, microbatches, schedule)), "")
    if act_bytes_per_microbatch_stage:
        d.add("activations", "in flight · act/micro-batch (· interleave factor)", "",
              float(training_activation_bytes(act_bytes_per_microbatch_stage, stages, microbatches, schedule, chunks)),
              "B")
    return d


__all__ = [
    "pipeline_condition", "min_layers_per_stage", "max_pipeline_stages", "pipelined_token_latency",
    "microbatches_in_flight", "global_batch", "weight_bytes_per_chip", "kv_bytes_per_chip", "throughput_per_chip",
    "bubble_fraction", "training_activation_bytes", "pipeline_condition_analysis", "inference_pipelining_analysis",
    "training_pipeline_analysis", "c_mem",
]
