"""Training compute, time and memory (lecture 01:18:59, "6ND"; Korthikanti et al. 2022; ZeRO).

Pure functions of numbers first (N, D, FLOP/s, chips, degrees of parallelism), all
vectorized with numpy; thin adapters at the bottom take a ``ModelSpec`` and a
``System``/``Chip``. Every function's docstring is its equation and source.

Units: FLOPs, FLOP/s (dense), bytes, bytes/s, seconds.

Bytes per parameter of mixed-precision Adam training (Rajbhandari et al. 2020, "ZeRO",
§3.1 and Fig. 1: "2Ψ + 2Ψ + KΨ" with K = 12): bf16 weights 2 B, bf16 gradients 2 B,
fp32 master weights 4 B, fp32 Adam first moment 4 B, fp32 Adam second moment 4 B =
**16 bytes per parameter**. (Gradients reduced in fp32 add 2 B → 18; see
``OPTIMIZER_BYTES``.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..results import ResultMixin

from ..errors import InputError, check_positive
from ..explain import Derivation, fmt

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


def dp_gradient_sync_time(grad_bytes_per_chip, dp, bw, zero_stage=0, latency=0.0):
    """Data-parallel gradient synchronisation per step (ring collectives, engine.comms).

    ZeRO 0–2: one all-reduce (or reduce-scatter + all-gather of updated weights, the same
    volume): t = 2·(dp−1)/dp · bytes/bw.  ZeRO-3/FSDP: all-gather weights forward, again
    backward, reduce-scatter gradients = 1.5× that volume (Rajbhandari et al. 2020 §7.2.2:
    "3Ψ vs 2Ψ").
    """
    from ..engine.comms import allreduce_time

    t = allreduce_time(grad_bytes_per_chip, dp, bw, latency)
    return t * (1.5 if zero_stage == 3 else 1.0)


def tp_allreduce_time(tokens_per_replica, d_model, layers_per_stage, tp, bw, act_bytes=2.0, latency=0.0):
    """Megatron tensor parallelism: 4 all-reduces of the activations per layer per step.

    Two in the forward (after attention and after the MLP) and two in the backward
    (Shoeybi et al. 2019, Megatron-LM §3, Fig. 4); sequence parallelism replaces each with a
    reduce-scatter + all-gather of the same total volume (Korthikanti et al. 2022 §4.2.2).
    t = 4 · L/P · allreduce(tokens · h · bytes, tp, bw).
    """
    from ..engine.comms import allreduce_time

    nbytes = np.asarray(tokens_per_replica, float) * np.asarray(d_model, float) * act_bytes
    return 4.0 * np.asarray(layers_per_stage, float) * allreduce_time(nbytes, tp, bw, latency)


def ep_alltoall_time(tokens_per_chip, d_model, moe_layers_per_stage, experts_per_token, ep, bw,
                     act_bytes=2.0, latency=0.0):
    """Expert parallelism: 4 all-to-alls per MoE layer per step (dispatch + combine, forward and backward).

    Each chip sends the fraction (ep−1)/ep of its tokens' k routed copies:
    t = 4 · L_moe/P · (tokens · k · h · bytes · (ep−1)/ep) / bw   (engine.comms.alltoall_time).
    """
    from ..engine.comms import alltoall_time

    ep = np.asarray(ep, float)
    out = (np.asarray(tokens_per_chip, float) * experts_per_token * np.asarray(d_model, float) * act_bytes
           * np.where(ep > 1, (ep - 1) / np.maximum(ep, 1), 0.0))
    return 4.0 * np.asarray(moe_layers_per_stage, float) * np.where(ep > 1, alltoall_time(out, bw, latency), 0.0)


# --------------------------------------------------------------------------------------
# a deployment: step time, MFU, memory (adapter layer over the pure functions)
# --------------------------------------------------------------------------------------


@dataclass
class Parallelism:
    """Degrees of parallelism; chips = dp · tp · pp (experts are split ep ways inside dp · tp)."""

    dp: int = 1
    tp: int = 1
    pp: int = 1
    ep: int = 1
    microbatches: int = 1  # M, per pipeline per step
    schedule: str = "1f1b"
    v: int = 1  # interleaved chunks per stage
    zero_stage: int = 1
    optimizer: str = "adam-mixed"
    recompute: str = "selective"
    sequence_parallel: bool = True

    @property
    def chips(self) -> int:
        return self.dp * self.tp * self.pp

    def validate(self, n_layers: int | None = None) -> None:
        for name in ("dp", "tp", "pp", "ep", "microbatches", "v"):
            val = getattr(self, name)
            if not (isinstance(val, (int, np.integer)) and val >= 1):
                raise InputError(name, f"{val!r} is not a positive integer", "an integer ≥ 1")
        if self.schedule not in SCHEDULES:
            raise InputError("schedule", f"unknown pipeline schedule {self.schedule!r}", ", ".join(SCHEDULES))
        if self.schedule != "interleaved" and self.v != 1:
            raise InputError("v", "model chunks per stage > 1 need the interleaved schedule", "--schedule interleaved")
        if self.recompute not in RECOMPUTE:
            raise InputError("recompute", f"unknown recomputation {self.recompute!r}", ", ".join(RECOMPUTE))
        if self.optimizer not in OPTIMIZER_BYTES:
            raise InputError("optimizer", f"unknown optimizer {self.optimizer!r}", ", ".join(OPTIMIZER_BYTES))
        if self.zero_stage not in ZERO_STAGES:
            raise InputError("zero", f"unknown ZeRO stage {self.zero_stage!r}", "0, 1, 2 or 3 (3 = FSDP full shard)")
        if self.ep > self.dp * self.tp:
            raise InputError("ep", f"expert parallelism {self.ep} exceeds dp·tp = {self.dp * self.tp}",
                             "ep ≤ dp · tp (experts are split across the data/tensor-parallel ranks of a stage)")
        if n_layers is not None and self.pp > n_layers:
            raise InputError("pp", f"{self.pp} pipeline stages for {n_layers} layers", f"pp ≤ {n_layers}")


@dataclass(repr=False)
class TrainingResult(ResultMixin):
    _SUMMARY = (("time_s", "s"), ("chip_hours", ""), ("usd", "$"), ("mfu", "%"))

    model: str
    hardware: str
    chips: int
    tokens: float
    seq_len: float
    flops_dense: float  # 6·N·D
    flops_attention: float  # 3·F_attn·D
    flops_total: float
    peak_flops: float  # per chip
    achieved_flops: float  # per chip, given (MFU/TFLOP/s) or predicted bottom-up
    mfu: float
    time_s: float
    chip_hours: float
    usd: float
    step: dict = field(default_factory=dict)  # bottom-up step breakdown
    memory: dict = field(default_factory=dict)  # bytes per chip
    parallelism: dict = field(default_factory=dict)
    mode: str = "given"
    derivation: Derivation | None = None

    def as_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k != "derivation"}
        d["derivation"] = self.derivation.as_dict() if self.derivation else None
        return d


def step_breakdown(*, flops_per_step, chips, peak, eta_compute, bubble, t_tp, t_dp, t_ep, dp_overlap):
    """Bottom-up step time:

      t_math   = C_step / (chips · peak · η)
      t_pipe   = t_math / (1 − f_bubble)           (pipeline idles a fraction f of the step)
      t_step   = t_pipe + t_tp + t_ep + max(0, t_dp − overlap · t_pipe)
    TP and EP collectives are on the critical path (no overlap assumed); the DP gradient
    sync overlaps the backward pass by the fraction ``dp_overlap``.
    """
    t_math = np.asarray(flops_per_step, float) / (chips * peak * eta_compute)
    t_pipe = t_math / (1.0 - bubble)
    t_dp_exposed = np.maximum(0.0, t_dp - dp_overlap * t_pipe)
    t_step = t_pipe + t_tp + t_ep + t_dp_exposed
    return {"t_math_s": t_math, "t_bubble_s": t_pipe - t_math, "t_tp_s": t_tp, "t_ep_s": t_ep,
            "t_dp_s": t_dp, "t_dp_exposed_s": t_dp_exposed, "t_step_s": t_step,
            "bubble_fraction": bubble, "mfu": t_math * eta_compute / t_step}


def _f(x) -> float:
    return float(np.asarray(x))


def mean_attention_flops_per_token(model, seq_len, samples: int = 257):
    """F̄_attn(s) = (1/s) Σ_{i<s} F_attn(i): forward attention FLOPs averaged over a causal training sequence.

    Uses ``model.attention_flops_per_token(context)`` (windows and sparse attention
    included), averaged with the trapezoid rule over ``samples`` positions; exact for
    dense attention, where it equals F_attn(s/2).
    """
    pos = np.linspace(0.0, float(seq_len) - 1.0, samples)
    vals = np.asarray(model.attention_flops_per_token(pos), dtype=float)
    if samples < 2 or pos[-1] <= 0:
        return float(vals[0])
    area = float(np.sum(0.5 * (vals[1:] + vals[:-1]) * np.diff(pos)))
    return area / float(pos[-1] - pos[0])


def train(model, hardware, *, chips: int | None = None, tokens: float, seq_len: float = 8192,
          global_batch_tokens: float | None = None, mfu_given: float | None = None,
          flops_per_chip: float | None = None, chip_hours_given: float | None = None, dtype: str = "bf16", par: Parallelism | None = None,
          eta_compute: float = 1.0, dp_overlap: float = 1.0, include_attention: bool = True,
          usd_per_hour: float | None = None) -> TrainingResult:
    """Training time, chip-hours, cost, MFU and memory per chip for ``model`` on ``hardware``.

    Adapter over the pure functions above. ``model`` is a ModelSpec, ``hardware`` a System
    (or Chip). With ``mfu_given`` or ``flops_per_chip`` the run time is C / (chips · F)
    (measured-efficiency mode); otherwise the bottom-up step model sets F.
    """
    chip = getattr(hardware, "chip", hardware)
    scaleup = int(getattr(hardware, "scaleup_size", 1) or 1)
    par = par or Parallelism()
    if chips is None:
        chips = par.chips
    check_positive(chips, "chips", "a positive number of chips")
    check_positive(tokens, "tokens", "training tokens, e.g. '15T'")
    check_positive(seq_len, "seq", "a sequence length in tokens, e.g. '8192'")
    if par.chips == 1 and chips > 1:
        par.dp = int(chips)
    if par.chips != int(chips):
        raise InputError("chips", f"{chips:g} chips but dp·tp·pp = {par.dp}·{par.tp}·{par.pp} = {par.chips}",
                         "chips = dp × tp × pp (give --dp or leave it out to fill the chips)")
    par.validate(getattr(model, "n_layers", None))
    peak = float(chip.peak_flops(dtype))
    d = Derivation(f"Training {model.name} on {chips:g} × {chip.name}")
    n_act = float(model.active_params)
    c_dense = d.add("C_dense", "6 · N_active · D", f"6 · {fmt(n_act)} · {fmt(tokens)}",
                    _f(training_flops(n_act, tokens)), "", "FLOP; Kaplan 2020; lecture 01:18:59")
    c_attn = 0.0
    if include_attention:
        f_attn = mean_attention_flops_per_token(model, seq_len)
        c_attn = d.add("C_attn", "3 · F̄_attn(s) · D", f"3 · {fmt(f_attn)} · {fmt(tokens)}",
                       _f(attention_training_flops(f_attn, tokens)), "",
                       f"FLOP; forward attention FLOPs/token averaged over a causal sequence of {seq_len:g}")
    c = d.add("C", "C_dense + C_attn", f"{fmt(c_dense)} + {fmt(c_attn)}", c_dense + c_attn, "", "FLOP")

    # ---- bottom-up step model -------------------------------------------------------
    gbt = float(global_batch_tokens or max(seq_len * par.dp, 4e6))
    seqs_per_replica = gbt / seq_len / par.dp
    micro_seqs = max(seqs_per_replica / par.microbatches, 1e-9)
    layers = float(getattr(model, "n_layers", 1))
    h = float(getattr(model, "d_model", 0) or 0)
    heads = float(getattr(model, "n_heads", 0) or 1)
    moe_layers = float(getattr(model, "n_moe_layers", 0) or 0)
    k_exp = float(getattr(model, "experts_per_token", 0) or 0)
    flops_per_step = _f(c) / tokens * gbt
    bubble = _f(pipeline_bubble_fraction(par.pp, par.microbatches, par.v))
    tp_bw = chip.scaleup_bw if par.tp <= scaleup else chip.scaleout_bw
    t_tp = _f(tp_allreduce_time(gbt / par.dp, h, layers / par.pp, par.tp, tp_bw))
    ep_bw = chip.scaleup_bw if par.ep * par.tp <= scaleup else chip.scaleout_bw
    t_ep = _f(ep_alltoall_time(gbt / (par.dp), h, moe_layers / par.pp, k_exp, par.ep, ep_bw)) / max(par.tp, 1)
    total = float(model.total_params)
    expert_params = _expert_params(model)
    dense_params = total - expert_params
    ppc = _f(params_per_chip(dense_params, expert_params, par.tp, par.pp, par.ep))
    _, g_bytes, _ = OPTIMIZER_BYTES.get(par.optimizer, (2.0, 2.0, 12.0))
    dp_bw = chip.scaleup_bw if par.chips <= scaleup else chip.scaleout_bw
    t_dp = _f(dp_gradient_sync_time(ppc * g_bytes, par.dp, dp_bw, par.zero_stage))
    step = {k: _f(v) for k, v in step_breakdown(
        flops_per_step=flops_per_step, chips=chips, peak=peak, eta_compute=eta_compute, bubble=bubble,
        t_tp=t_tp, t_dp=t_dp, t_ep=t_ep, dp_overlap=dp_overlap).items()}
    step.update({"global_batch_tokens": gbt, "microbatch_seqs": micro_seqs, "flops_per_step": flops_per_step})

    # ---- memory per chip ----------------------------------------------------------------
    state = ppc * _f(model_state_bytes_per_param(par.dp, par.zero_stage, par.optimizer))
    per_layer = _f(activation_bytes_per_layer(seq_len, micro_seqs, h, heads, par.tp, par.sequence_parallel,
                                              par.recompute))
    acts = _f(activation_bytes_per_chip(per_layer, layers, par.pp, par.microbatches, par.schedule, par.v))
    memory = {"params_per_chip": ppc, "model_state_bytes": state, "activation_bytes_per_layer": per_layer,
              "activation_bytes": acts, "total_bytes": state + acts, "hbm_bytes": float(chip.hbm_bytes),
              "fits": bool(state + acts <= chip.hbm_bytes),
              "bytes_per_param": _f(model_state_bytes_per_param(par.dp, par.zero_stage, par.optimizer))}

    # ---- the headline: measured-efficiency mode or bottom-up -------------------------
    if sum(x is not None for x in (flops_per_chip, mfu_given, chip_hours_given)) > 1:
        raise InputError("mfu", "give at most one of --mfu, --tflops, --chip-hours", "one of them, or none for "
                         "the bottom-up estimate")
    if chip_hours_given is not None:
        check_positive(chip_hours_given, "chip-hours", "reported chip-hours, e.g. '2.664M'")
        achieved = d.add("F", "C / (chip-hours · 3600)", f"{fmt(c)} / ({fmt(chip_hours_given)} · 3600)",
                         _f(achieved_flops_per_chip(c, chip_hours_given)), "FLOP/s", "implied by reported chip-hours")
        mode = "implied by chip-hours"
    elif flops_per_chip is not None:
        check_positive(flops_per_chip, "tflops", "achieved FLOP/s per chip, e.g. '400 TFLOP/s'")
        achieved, mode = float(flops_per_chip), "given TFLOP/s per chip"
        d.add("F", "given", "", achieved, "FLOP/s")
    elif mfu_given is not None:
        check_positive(mfu_given, "mfu", "a model FLOP utilisation in (0, 1]", maximum=1.0)
        achieved = d.add("F", "MFU · peak", f"{mfu_given:g} · {fmt(peak, 'FLOP/s')}", mfu_given * peak, "FLOP/s")
        mode = "given MFU"
    else:
        d.add("t_step", "t_math/(1 − f_bubble) + t_TP + t_EP + exposed t_DP",
              f"{fmt(step['t_math_s'], 's')}/(1 − {step['bubble_fraction']:.3f}) + {fmt(t_tp, 's')} + "
              f"{fmt(t_ep, 's')} + {fmt(step['t_dp_exposed_s'], 's')}", step["t_step_s"], "s",
              f"bottom-up, η_compute = {eta_compute:g}")
        achieved = d.add("F", "C_step / (chips · t_step)", f"{fmt(flops_per_step)} / ({chips:g} · "
                         f"{fmt(step['t_step_s'], 's')})", flops_per_step / (chips * step["t_step_s"]), "FLOP/s")
        mode = "bottom-up"
    m = d.add("MFU", "F / peak", f"{fmt(achieved, 'FLOP/s')} / {fmt(peak, 'FLOP/s')}", _f(mfu(achieved, peak)))
    t = d.add("T", "C / (chips · F)", f"{fmt(c)} / ({chips:g} · {fmt(achieved, 'FLOP/s')})",
              _f(train_time(c, chips, achieved)), "s")
    ch = d.add("chip-hours", "chips · T / 3600", f"{chips:g} · {fmt(t, 's')} / 3600", chips * t / 3600.0)
    price = float(chip.usd_per_hour if usd_per_hour is None else usd_per_hour)
    usd = d.add("cost", "chip-hours · $/chip-hour", f"{fmt(ch)} · ${price:g}", ch * price, "$")
    d.conclusion = (f"{fmt(t / 86400)} days, {fmt(ch)} chip-hours at MFU {m:.1%}; memory/chip "
                    f"{fmt(state + acts, 'B')} of {fmt(chip.hbm_bytes, 'B')}")
    return TrainingResult(
        model=model.name, hardware=getattr(hardware, "name", chip.name), chips=int(chips), tokens=float(tokens),
        seq_len=float(seq_len), flops_dense=c_dense, flops_attention=c_attn, flops_total=c, peak_flops=peak,
        achieved_flops=achieved, mfu=m, time_s=t, chip_hours=ch, usd=usd, step=step, memory=memory,
        parallelism=dict(par.__dict__), mode=mode, derivation=d)


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


#: What a layout search varies: an InputError naming one of these rules out that layout; any other is the input's.
LAYOUT_FIELDS = frozenset({"tp", "pp", "dp", "ep", "chips", "gpus", "microbatches", "v", "zero", "recompute"})


def check_train_inputs(fixed: dict | None = None, *, tokens=None, seq_len=8192, **_) -> None:
    """The inputs no layout can fix, checked once before a layout search (issue 36): the token count, the sequence
    length and the named choices (optimizer, schedule, recompute, ZeRO) — so a bad one is reported under its own
    name rather than as "no layout of N chips is valid"."""
    check_positive(tokens, "tokens", "training tokens, e.g. '15T'")
    check_positive(seq_len, "seq", "a sequence length in tokens, e.g. '8192'")
    Parallelism(**{k: v for k, v in (fixed or {}).items() if k not in ("tp", "pp", "dp", "ep")}).validate()


def search_training_layout(model, hardware, *, chips: int, fixed: dict | None = None, **train_kw):
    """The fastest layout that fits, as ``serve`` chooses a serving layout: every TP (a divisor of the chips up to
    the scale-up domain), PP (powers of two up to the layers), ZeRO stage (1, 3) and recomputation (selective,
    full) with DP = chips / (TP·PP), ranked by the bottom-up step time among those whose memory per chip fits.
    ``fixed`` holds the degrees the user gave (tp, pp, dp, ep, zero_stage, recompute, …), which are kept.
    Returns ``(TrainingResult, Parallelism, {"evaluated": n, "fit": k})``; if nothing fits, the layout with the
    least memory per chip (its result says it does not fit)."""
    fixed = dict(fixed or {})
    chip = getattr(hardware, "chip", hardware)
    scaleup = int(getattr(hardware, "scaleup_size", 1) or 1)
    layers = int(getattr(model, "n_layers", 1) or 1)
    chips = int(chips)
    tps = [fixed["tp"]] if fixed.get("tp") else [t for t in (1, 2, 4, 8, 16, 32, 64, 72, 128)
                                                  if t <= max(scaleup, 1) and chips % t == 0]
    pps = [fixed["pp"]] if fixed.get("pp") else [p for p in (1, 2, 4, 8, 16, 32, 64) if p <= layers]
    zeros = [fixed["zero_stage"]] if fixed.get("zero_stage") is not None else [1, 3]
    recs = [fixed["recompute"]] if fixed.get("recompute") else ["selective", "full"]
    check_train_inputs(fixed, **train_kw)
    best, smallest, n_eval, n_fit = None, None, 0, 0
    for tp in tps:
        for pp in pps:
            if chips % (tp * pp):
                continue
            dp = chips // (tp * pp)
            if fixed.get("dp") and fixed["dp"] != dp:
                continue
            for z in zeros:
                for rc in recs:
                    kw = {k: v for k, v in fixed.items() if k not in ("tp", "pp", "dp", "zero_stage", "recompute")}
                    kw.setdefault("microbatches", 4 * pp)
                    par = Parallelism(dp=dp, tp=tp, pp=pp, zero_stage=z, recompute=rc, **kw)
                    try:
                        r = train(model, hardware, chips=chips, par=par, **train_kw)
                    except InputError as exc:
                        if exc.field not in LAYOUT_FIELDS:  # the input's fault, not this layout's
                            raise
                        continue
                    n_eval += 1
                    key = (r.step["t_step_s"], tp * pp, z, rc != "selective")
                    if r.memory["fits"]:
                        n_fit += 1
                        if best is None or key < best[0]:
                            best = (key, r, par)
                    mem = r.memory["total_bytes"]
                    if smallest is None or mem < smallest[0]:
                        smallest = (mem, r, par)
    if best is None and smallest is None:
        raise InputError("gpus", f"no layout of {chips} chips is valid for {model.name}",
                         "a chip count that divides by TP·PP, or explicit --tp/--pp/--dp")
    _, r, par = best or smallest
    return r, par, {"evaluated": n_eval, "fit": n_fit}
