"""Training compute, time and memory (lecture 01:18:59, "6ND"; Korthikanti et al. 2022; ZeRO).

Pure functions of numbers first (N, D, FLOP/s, chips, degrees of parallelism), all
vectorized with numpy; thin adapters take a ``ModelSpec`` and a ``System``/``Chip``. Every
function's docstring is its equation and source. The calibrated training step (issue 38) is
at the bottom: :func:`step_terms` (one function per term) with the fitted parameters of
``specs/data/training/presets.toml``; :func:`train` and :func:`search_training_layout` are
what `rackmath train` (and the web page) call.

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

from ...results import ResultMixin

from ...errors import InputError, check_positive
from ...explain import Derivation, fmt

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
    from ...engine.comms import allreduce_time

    nbytes = np.asarray(tokens_per_replica, float) * np.asarray(d_model, float) * act_bytes
    return 4.0 * np.asarray(layers_per_stage, float) * allreduce_time(nbytes, tp, bw, latency)


# --------------------------------------------------------------------------------------
# a deployment: step time, MFU, memory (adapter layer over the pure functions)
# --------------------------------------------------------------------------------------


@dataclass
class Parallelism:
    """Degrees of parallelism; chips = dp · tp · pp · cp (experts are split ep ways inside dp · cp · tp).

    ``micro_batch`` sequences per micro-batch and ``microbatches`` M per pipeline per step (gradient-accumulation
    steps): give one (None: micro-batch 1), the other follows from the global batch. ``sharding`` is the data-parallel
    sharding (none = Megatron's distributed optimizer, ZeRO-1; shard_grad_op = ZeRO-2; full_shard = FSDP / ZeRO-3);
    None follows ``zero_stage``. ``fsdp_group``: GPUs a sharding group spans (0 = all data-parallel ranks, HSDP
    otherwise)."""

    dp: int = 1
    tp: int = 1
    pp: int = 1
    ep: int = 1
    cp: int = 1
    microbatches: int | None = None  # M, per pipeline per step
    micro_batch: float | None = None  # sequences per micro-batch
    schedule: str = "1f1b"
    v: int = 1  # interleaved chunks (virtual stages) per stage
    zero_stage: int = 1
    sharding: str | None = None
    fsdp_group: int = 0
    optimizer: str = "adam-mixed"
    recompute: str = "selective"
    recompute_layers: int = 0  # layers per pipeline stage fully recomputed on top of selective (Megatron
    # --recompute-method block --recompute-num-layers): the least that makes a layout fit
    sequence_parallel: bool = True

    @property
    def chips(self) -> int:
        return self.dp * self.tp * self.pp * self.cp

    @property
    def sharding_mode(self) -> str:
        if self.sharding is not None:
            return self.sharding
        return {3: "full_shard", 2: "shard_grad_op"}.get(self.zero_stage, "none")

    @property
    def zero_equivalent(self) -> int:
        """The ZeRO stage whose memory this sharding has (full_shard 3, shard_grad_op 2, else ``zero_stage``)."""
        return {"full_shard": 3, "shard_grad_op": 2}.get(self.sharding_mode, self.zero_stage)

    def validate(self, n_layers: int | None = None) -> None:
        for name in ("dp", "tp", "pp", "ep", "cp", "v"):
            val = getattr(self, name)
            if not (isinstance(val, (int, np.integer)) and val >= 1):
                raise InputError(name, f"{val!r} is not a positive integer", "an integer ≥ 1")
        if self.microbatches is not None and not (isinstance(self.microbatches, (int, np.integer))
                                                  and self.microbatches >= 1):
            raise InputError("microbatches", f"{self.microbatches!r} is not a positive integer", "an integer ≥ 1")
        if self.micro_batch is not None and not self.micro_batch > 0:
            raise InputError("micro_batch", f"{self.micro_batch!r} is not positive", "sequences per micro-batch ≥ 1")
        if self.schedule not in SCHEDULES:
            raise InputError("schedule", f"unknown pipeline schedule {self.schedule!r}", ", ".join(SCHEDULES))
        if self.schedule != "interleaved" and self.v != 1:
            raise InputError("v", "model chunks per stage > 1 need the interleaved schedule", "--schedule interleaved")
        if self.recompute not in RECOMPUTE:
            raise InputError("recompute", f"unknown recomputation {self.recompute!r}", ", ".join(RECOMPUTE))
        if self.recompute_layers and (self.recompute != "selective" or self.recompute_layers < 0):
            raise InputError("recompute_layers", f"{self.recompute_layers!r} fully recomputed layers",
                             "a number ≥ 0 of layers per stage, with selective recomputation")
        if self.zero_stage not in ZERO_STAGES:
            raise InputError("zero", f"unknown ZeRO stage {self.zero_stage!r}", "0, 1, 2 or 3 (3 = FSDP full shard)")
        if self.sharding is not None and self.sharding not in SHARDINGS:
            raise InputError("fsdp", f"unknown sharding {self.sharding!r}", ", ".join(SHARDINGS))
        if self.optimizer not in OPTIMIZER_BYTES:
            raise InputError("optimizer", f"unknown optimizer {self.optimizer!r}", ", ".join(OPTIMIZER_BYTES))
        if self.ep > self.dp * self.tp * self.cp:
            raise InputError("ep", f"expert parallelism {self.ep} exceeds dp·cp·tp = {self.dp * self.cp * self.tp}",
                             "ep ≤ dp · cp · tp (experts are split across the data/context/tensor ranks of a stage)")
        if n_layers is not None and self.pp * self.v > n_layers:
            raise InputError("pp", f"{self.pp} pipeline stages × {self.v} virtual stages for {n_layers} layers",
                             f"pp · vp ≤ {n_layers}")


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
    preset: str = "ideal"
    label: str = ""
    derivation: Derivation | None = None

    def as_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k != "derivation"}
        d["derivation"] = self.derivation.as_dict() if self.derivation else None
        return d


def _f(x) -> float:
    return float(np.asarray(x))


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


#: Layers per virtual pipeline stage in NVIDIA's recipes (specs/data/training/records.toml: 1–4, most often 2): the
#: default number of virtual stages is round(L / (pp · 2)) when pp > 1 and neither --vp nor --schedule is given.
LAYERS_PER_VIRTUAL_STAGE = 2


def default_vp(n_layers, pp) -> int:
    """v = max(1, round(L / (P · 2))) for P > 1 (:data:`LAYERS_PER_VIRTUAL_STAGE`), 1 without a pipeline."""
    if pp <= 1:
        return 1
    return max(1, int(round(float(n_layers) / (pp * LAYERS_PER_VIRTUAL_STAGE))))


def training_dtype(dtype: str) -> str:
    """The step model's precision for a --dtype: bf16/fp16 → bf16, fp8, mxfp8, nvfp4 (fp4 → nvfp4)."""
    d = str(dtype).lower()
    d = {"fp16": "bf16", "fp4": "nvfp4", "fp8-cs": "fp8", "fp8-mx": "mxfp8"}.get(d, d)
    if d not in QUANT_BYTES:
        raise InputError("dtype", f"{dtype!r} is not a training precision", ", ".join(TRAIN_DTYPES) + " (or fp16)")
    return d


def resolve_preset(chip, preset=None, framework="megatron", eta_compute=None):
    """(params, name, label) of the step model: ``preset`` None or "ideal" → the ideal bound (η = 1, no overheads);
    "auto" → the fitted preset of the chip's family and the framework (``specs.training_records.preset_for``); a
    name → that preset; a TrainPreset → itself. ``eta_compute`` (0–1) overrides the GEMM efficiency."""
    from ...specs import training_records as trr

    if framework not in FRAMEWORKS:
        raise InputError("framework", f"unknown framework family {framework!r}", ", ".join(FRAMEWORKS))
    if preset is None or preset == "ideal":
        params, name, label = dict(IDEAL_PARAMS), "ideal", "ideal bound — a lower bound on time"
    else:
        p = preset
        if isinstance(p, str):
            p = trr.preset_for(chip.name, framework) if p == "auto" else trr.load_preset(p)
        if p is None:
            params, name, label = dict(IDEAL_PARAMS), "ideal", "ideal bound (no training preset shipped)"
        else:
            params, name, label = dict(p.params), p.name, p.label()
    if eta_compute is not None and eta_compute != 1.0:
        params["eta_gemm"] = float(eta_compute)
        label += f"; GEMM efficiency set to {eta_compute:g}"
    return params, name, label


def train(model, hardware, *, chips: int | None = None, tokens: float, seq_len: float = 8192,
          global_batch_tokens: float | None = None, mfu_given: float | None = None,
          flops_per_chip: float | None = None, chip_hours_given: float | None = None, dtype: str = "bf16",
          par: Parallelism | None = None, eta_compute: float | None = None, dp_overlap: float = 1.0,
          include_attention: bool = True, usd_per_hour: float | None = None, preset="auto",
          framework: str = "megatron") -> TrainingResult:
    """Training time, chip-hours, cost, MFU and memory per chip for ``model`` on ``hardware``.

    Adapter over the pure functions above. ``model`` is a ModelSpec, ``hardware`` a System (or Chip). With
    ``mfu_given``, ``flops_per_chip`` or ``chip_hours_given`` the run time is C / (chips · F) (measured-efficiency
    mode); otherwise the step model (:func:`step_terms`) with ``preset`` sets F: "auto" (default, as `rackmath train`)
    = the fitted preset of the chip's family and ``framework``, None or "ideal" = the bound (:func:`resolve_preset`). ``dp_overlap`` is kept for
    callers of the earlier model and unused (the overlap is in :func:`step_terms`).
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
        raise InputError("chips", f"{chips:g} chips but dp·tp·pp·cp = {par.dp}·{par.tp}·{par.pp}·{par.cp} = "
                                  f"{par.chips}", "chips = dp × tp × pp × cp (give --dp or leave it out to fill the chips)")
    par.validate(getattr(model, "n_layers", None))
    tdt = training_dtype(dtype)
    peak = float(chip.peak_flops(PEAK_KEY[tdt]))
    params, pname, plabel = resolve_preset(chip, preset, framework, eta_compute)
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

    # ---- the step model ----------------------------------------------------------------
    rep = par.dp * par.cp  # sequences are split over dp replicas (cp splits each sequence)
    gbt = float(global_batch_tokens or max(seq_len * par.dp, 4e6))
    B = gbt / seq_len  # sequences per step
    if par.micro_batch is not None:
        mb = float(par.micro_batch)
    elif par.microbatches is not None:
        mb = B / (par.dp * par.microbatches)
    else:
        mb = 1.0
    if B / par.dp < mb * (1 - 1e-9):
        raise InputError("global-batch", f"{fmt(gbt)} tokens per step are {B:.3g} sequences of {seq_len:g}, fewer "
                                         f"than dp · micro-batch = {par.dp} · {mb:g}",
                         "a global batch of at least dp · micro-batch sequences (--global-batch)")
    M = B / (par.dp * mb)
    sharding = par.sharding_mode
    rfrac = min(1.0, par.recompute_layers / (float(model.n_layers) / par.pp)) if par.recompute_layers else 0.0
    x = step_inputs(model, chip, domain=scaleup, gpus=chips, global_batch=B, seq=seq_len, micro_batch=mb, tp=par.tp,
                    pp=par.pp, cp=par.cp, ep=par.ep, vp=par.v, dtype=tdt, recompute=par.recompute,
                    sharding=sharding, fsdp_group=par.fsdp_group, recompute_fraction=rfrac)
    terms = {k: _f(v) for k, v in step_terms(x, params).items()}
    flops_per_step = _f(c) / tokens * gbt
    step = dict(terms)
    step.update({"global_batch_tokens": gbt, "global_batch_seqs": B, "microbatch_seqs": mb, "microbatches": M,
                 "flops_per_step": flops_per_step, "t_math_s": terms["t_work_s"],
                 "bubble_fraction": terms["t_bubble_s"] / (terms["t_work_s"] + terms["t_bubble_s"]),
                 "mfu": flops_per_step / (chips * terms["t_step_s"]) / peak, "preset": pname})

    # ---- memory per chip ----------------------------------------------------------------
    layers = float(getattr(model, "n_layers", 1))
    h = float(getattr(model, "d_model", 0) or 0)
    heads = float(getattr(model, "n_heads", 0) or 1)
    total = float(model.total_params)
    expert_params = _expert_params(model)
    ppc = _f(params_per_chip(total - expert_params, expert_params, par.tp, par.pp, par.ep))
    shard_n = par.fsdp_group or rep
    bpp = _f(model_state_bytes_per_param(shard_n, par.zero_equivalent, par.optimizer))
    state = ppc * bpp
    per_layer = _f(activation_bytes_per_layer(seq_len / par.cp, mb, h, heads, par.tp, par.sequence_parallel,
                                              par.recompute))
    if rfrac:  # a share of the layers keeps only its input (full recompute)
        per_layer = (1 - rfrac) * per_layer + rfrac * _f(activation_bytes_per_layer(
            seq_len / par.cp, mb, h, heads, par.tp, par.sequence_parallel, "full"))
    acts = _f(activation_bytes_per_chip(per_layer, layers, par.pp, M, par.schedule, par.v))
    memory = {"params_per_chip": ppc, "model_state_bytes": state, "activation_bytes_per_layer": per_layer,
              "activation_bytes": acts, "total_bytes": state + acts, "hbm_bytes": float(chip.hbm_bytes),
              "fits": bool(state + acts <= chip.hbm_bytes), "bytes_per_param": bpp}

    # ---- the headline: measured-efficiency mode or the step model --------------------------
    if sum(x_ is not None for x_ in (flops_per_chip, mfu_given, chip_hours_given)) > 1:
        raise InputError("mfu", "give at most one of --mfu, --tflops, --chip-hours", "one of them, or none for "
                         "the step model")
    if chip_hours_given is not None:
        check_positive(chip_hours_given, "chip-hours", "reported chip-hours, e.g. '2.664M'")
        achieved = d.add("F", "C / (chip-hours · 3600)", f"{fmt(c)} / ({fmt(chip_hours_given)} · 3600)",
                         _f(achieved_flops_per_chip(c, chip_hours_given)), "FLOP/s", "implied by reported chip-hours")
        mode, label = "implied by chip-hours", "time implied by the reported GPU-hours"
    elif flops_per_chip is not None:
        check_positive(flops_per_chip, "tflops", "achieved FLOP/s per chip, e.g. '400 TFLOP/s'")
        achieved, mode, label = float(flops_per_chip), "given TFLOP/s per chip", "time from the given TFLOP/s"
        d.add("F", "given", "", achieved, "FLOP/s")
    elif mfu_given is not None:
        check_positive(mfu_given, "mfu", "a model FLOP utilisation in (0, 1]", maximum=1.0)
        achieved = d.add("F", "MFU · peak", f"{mfu_given:g} · {fmt(peak, 'FLOP/s')}", mfu_given * peak, "FLOP/s")
        mode, label = "given MFU", "time from the given MFU"
    else:
        from .explain import add_step_terms

        d.add("preset", pname, "", ", ".join(f"{k} = {v:.4g}" for k, v in params.items()), "", plabel)
        d.add("M", "B / (dp · b)", "", M, "", "micro-batches per step", expr=f"{B!r} / ({float(par.dp)!r} * {mb!r})")
        add_step_terms(d, x, params, terms, M, dict(FLASH_BACKWARD_FACTOR=FLASH_BACKWARD_FACTOR,
                                                    ADAM_STEP_BYTES=ADAM_STEP_BYTES,
                                                    DP_BYTES_PER_PARAM=DP_BYTES_PER_PARAM))
        achieved = d.add("F", "C_step / (chips · t_step)", "", flops_per_step / (chips * terms["t_step_s"]), "FLOP/s",
                         expr=f"{flops_per_step!r} / ({float(chips)!r} * t_step)")
        d.add("tokens/s/GPU", "B·s / (chips · t_step)", "", terms["tokens_per_s_per_gpu"], "tok/s",
              expr=f"{B!r} * {float(seq_len)!r} / ({float(chips)!r} * t_step)")
        mode, label = ("ideal bound" if pname == "ideal" else "calibrated"), plabel
    m = d.add("MFU", "F / peak", f"{fmt(achieved, 'FLOP/s')} / {fmt(peak, 'FLOP/s')}", _f(mfu(achieved, peak)))
    t = d.add("T", "C / (chips · F)", f"{fmt(c)} / ({chips:g} · {fmt(achieved, 'FLOP/s')})",
              _f(train_time(c, chips, achieved)), "s")
    ch = d.add("chip-hours", "chips · T / 3600", f"{chips:g} · {fmt(t, 's')} / 3600", chips * t / 3600.0)
    price = float(chip.usd_per_hour if usd_per_hour is None else usd_per_hour)
    usd = d.add("cost", "chip-hours · $/chip-hour", f"{fmt(ch)} · ${price:g}", ch * price, "$")
    d.conclusion = (f"{fmt(t / 86400)} days, {fmt(ch)} chip-hours at MFU {m:.1%}; memory/chip "
                    f"{fmt(state + acts, 'B')} of {fmt(chip.hbm_bytes, 'B')}")
    pd = dict(par.__dict__)
    pd.update(sharding=sharding, dtype=tdt, framework=framework, microbatches=M, micro_batch=mb)
    return TrainingResult(
        model=model.name, hardware=getattr(hardware, "name", chip.name), chips=int(chips), tokens=float(tokens),
        seq_len=float(seq_len), flops_dense=c_dense, flops_attention=c_attn, flops_total=c, peak_flops=peak,
        achieved_flops=achieved, mfu=m, time_s=t, chip_hours=ch, usd=usd, step=step, memory=memory,
        parallelism=pd, mode=mode, preset=pname, label=label, derivation=d)


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


def search_training_layout(model, hardware, *, chips: int, fixed: dict | None = None, preset="auto",
                           framework: str = "megatron", dtype: str = "bf16", tokens: float = 1.0,
                           seq_len: float = 8192, global_batch_tokens: float | None = None, **train_kw):
    """The fastest layout that fits, as ``serve`` chooses a serving layout, all candidates in one vectorized call of
    :func:`step_terms`: every TP (a divisor of the chips up to the scale-up domain), PP (powers of two up to the
    layers), CP (1, and 2–8 for sequences of 16K and more), sharding (ZeRO-1 distributed optimizer, FSDP full shard)
    and recomputation (selective, full, and selective with the fewest layers per stage fully recomputed that make a
    layout fit), virtual stages by :func:`default_vp`, DP = chips / (TP·PP·CP), ranked by the step time among those
    whose memory per chip fits. ``fixed`` holds what the user gave (tp, pp, dp, cp, ep, v,
    micro_batch, microbatches, zero_stage, sharding, recompute, …), which is kept.
    Returns ``(TrainingResult, Parallelism, {"evaluated": n, "fit": k})``; if nothing fits, the layout with the least
    memory per chip (its result says it does not fit)."""
    fixed = dict(fixed or {})
    chip = getattr(hardware, "chip", hardware)
    scaleup = int(getattr(hardware, "scaleup_size", 1) or 1)
    layers = int(getattr(model, "n_layers", 1) or 1)
    chips = int(chips)
    tdt = training_dtype(dtype)
    params, _, _ = resolve_preset(chip, preset, framework, train_kw.get("eta_compute"))
    base = {k: v for k, v in fixed.items() if k not in ("tp", "pp", "dp", "cp", "zero_stage", "sharding", "recompute",
                                                         "v", "schedule")}
    Parallelism(**{k: v for k, v in base.items() if k != "ep"}).validate()  # bad names/values fail before the search
    check_positive(base.get("ep", 1), "ep", "an expert-parallel degree ≥ 1")
    fsdp_only = framework == "fsdp"  # an FSDP-only stack (llm-foundry) runs no tensor, pipeline or context parallelism
    tps = [fixed["tp"]] if fixed.get("tp") else [1] if fsdp_only else [
        t for t in (1, 2, 4, 8, 16, 32, 64, 72, 128) if t <= max(scaleup, 1) and chips % t == 0]
    pps = [fixed["pp"]] if fixed.get("pp") else [1] if fsdp_only else [p for p in (1, 2, 4, 8, 16, 32, 64)
                                                                          if p <= layers]
    cps = [fixed["cp"]] if fixed.get("cp") else ([1, 2, 4, 8] if seq_len >= 16384 and not fsdp_only else [1])
    if fixed.get("sharding") is not None or fixed.get("zero_stage") is not None:
        shards = [Parallelism(sharding=fixed.get("sharding"), zero_stage=fixed.get("zero_stage", 1)).sharding_mode]
    else:
        shards = ["shard_grad_op", "full_shard"] if fsdp_only else ["none", "full_shard"]
    recs = [fixed["recompute"]] if fixed.get("recompute") else ["selective", "full"]
    cands = []
    for tp in tps:
        for pp in pps:
            for cp in cps:
                if chips % (tp * pp * cp):
                    continue
                dp = chips // (tp * pp * cp)
                if fixed.get("dp") and fixed["dp"] != dp:
                    continue
                if fixed.get("v"):
                    v = fixed["v"]
                elif fixed.get("schedule") in ("1f1b", "gpipe"):
                    v = 1
                else:
                    v = default_vp(layers, pp)
                if pp * v > layers or base.get("ep", 1) > dp * cp * tp:
                    continue
                for sh in shards:
                    for rc in recs:
                        cands.append((tp, pp, cp, dp, v, sh, rc))
    if not cands:
        raise InputError("gpus", f"no layout of {chips} chips is valid for {model.name}",
                         "a chip count that divides by TP·PP·CP, or explicit --tp/--pp/--cp/--dp")
    gbt = float(global_batch_tokens or max(seq_len * max(c[3] for c in cands), 4e6))
    B = gbt / seq_len
    arr = {k: np.array([c[i] for c in cands], dtype=float) for i, k in enumerate(("tp", "pp", "cp", "dp", "v"))}
    mb = np.full(len(cands), float(fixed.get("micro_batch") or 1.0))
    if fixed.get("microbatches") and not fixed.get("micro_batch"):
        mb = B / (arr["dp"] * float(fixed["microbatches"]))
    ok = B / arr["dp"] >= mb * (1 - 1e-9)
    # memory per chip of every candidate (same functions as train)
    expert = _expert_params(model)
    total = float(model.total_params)
    ppc = params_per_chip(total - expert, expert, arr["tp"], arr["pp"], float(base.get("ep", 1)))
    opt = base.get("optimizer", "adam-mixed")
    fsdp_group = float(base.get("fsdp_group", 0) or 0)
    shard_n = np.where(fsdp_group > 0, fsdp_group, arr["dp"] * arr["cp"])
    zero_eq = {"full_shard": 3, "shard_grad_op": 2, "none": int(fixed.get("zero_stage", 1) or 1)}
    bpp = np.array([_f(model_state_bytes_per_param(n, zero_eq[c[5]], opt)) for n, c in zip(shard_n, cands)])
    M = B / (arr["dp"] * mb)
    h, heads = float(model.d_model), float(getattr(model, "n_heads", 1) or 1)
    sched = np.where(arr["v"] > 1, "interleaved", fixed.get("schedule") or "1f1b")
    acts = np.zeros(len(cands))
    for rc in set(c[6] for c in cands):
        sel = np.array([c[6] == rc for c in cands])
        per = activation_bytes_per_layer(seq_len / arr["cp"][sel], mb[sel], h, heads, arr["tp"][sel],
                                         base.get("sequence_parallel", True), rc)
        for i, j in enumerate(np.flatnonzero(sel)):
            acts[j] = _f(activation_bytes_per_chip(np.asarray(per)[i] if np.ndim(per) else per, layers,
                                                   arr["pp"][j], M[j], str(sched[j]), arr["v"][j]))
    state = ppc * bpp
    hbm = float(chip.hbm_bytes)
    # selective recomputation that does not fit, where full does: fully recompute the fewest layers per stage that
    # make it fit (Megatron's --recompute-num-layers)
    full_of = {c[:6]: i for i, c in enumerate(cands) if c[6] == "full"}
    rlayers = [0] * len(cands)
    extra = []
    for i, c in enumerate(cands):
        j = full_of.get(c[:6])
        if c[6] != "selective" or j is None or state[i] + acts[i] <= hbm or state[j] + acts[j] > hbm:
            continue
        lps = layers / c[1]
        need = (state[i] + acts[i] - hbm) / max(acts[i] - acts[j], 1e-9)
        n = int(np.ceil(need * lps - 1e-9))
        if 0 < n < lps:
            extra.append((i, j, n, n / lps))
    for i, j, n, f in extra:
        cands.append(cands[i])
        rlayers.append(n)
        for k in arr:
            arr[k] = np.append(arr[k], arr[k][i])
        mb, M, ok = np.append(mb, mb[i]), np.append(M, M[i]), np.append(ok, ok[i])
        state = np.append(state, state[i])
        acts = np.append(acts, (1 - f) * acts[i] + f * acts[j])
    mem = state + acts
    rfrac = np.array([min(1.0, n / (layers / c[1])) for n, c in zip(rlayers, cands)])
    x = step_inputs(model, chip, domain=scaleup, gpus=chips, global_batch=B, seq=seq_len, micro_batch=mb,
                    tp=arr["tp"], pp=arr["pp"], cp=arr["cp"], ep=float(base.get("ep", 1)), vp=arr["v"], dtype=tdt)
    x["recompute"] = np.array([_RECOMPUTE_CODE[c[6]] for c in cands], float) + rfrac
    x["sharding"] = np.array([_SHARD_CODE[c[5]] for c in cands], float)
    x["fsdp_group"] = fsdp_group
    t_step = step_terms(x, params)["t_step_s"]
    fits = ok & (mem <= hbm)
    n_eval, n_fit = int(ok.sum()), int(fits.sum())
    if n_fit:
        key = np.where(fits, t_step, np.inf)
        i = int(np.lexsort((arr["tp"] * arr["pp"], key))[0])
    else:
        i = int(np.argmin(np.where(ok, mem, np.inf)))
    tp, pp, cp, dp, v, sh, rc = cands[i]
    kw = {k: val for k, val in base.items() if k not in ("micro_batch", "microbatches")}
    par = Parallelism(dp=dp, tp=tp, pp=pp, cp=cp, v=v, schedule="interleaved" if v > 1 else
                      (fixed.get("schedule") or "1f1b"), sharding=sh, recompute=rc, recompute_layers=rlayers[i],
                      zero_stage=int(fixed.get("zero_stage", 1) if fixed.get("zero_stage") is not None else 1),
                      micro_batch=float(mb[i]), **kw)
    r = train(model, hardware, chips=chips, par=par, preset=preset, framework=framework, dtype=dtype, tokens=tokens,
              seq_len=seq_len, global_batch_tokens=gbt, **train_kw)
    return r, par, {"evaluated": n_eval, "fit": n_fit}


# ======================================================================================
# The calibrated training step (issue 38): what Megatron-LM / NeMo and FSDP stacks do
# ======================================================================================
#
# One function per term, each vectorized over any number of configurations (numpy arrays broadcast: records × K
# candidate parameter vectors in the fit, layouts in the search). Inputs are per-configuration arrays in a dict
# (``step_inputs`` builds it from a model, a chip and a layout); parameters a dict of arrays (a ``TrainPreset``'s
# fields). Everything is per GPU, per optimizer step, in seconds.

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
    from ...engine.step import gemm_efficiency

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
    from ...engine.comms import alltoall_split_time

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
    from ...engine.comms import allreduce_time

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


def step_inputs(model, chip, *, domain, gpus, global_batch, seq, micro_batch=1, tp=1, pp=1, cp=1, ep=1, vp=1,
                dtype="bf16", recompute="selective", sharding="none", fsdp_group=0, lora=False,
                recompute_fraction=0.0) -> dict:
    """Inputs of :func:`step_terms` for one model on one chip (degrees may be arrays: a layout grid)."""
    if dtype not in QUANT_BYTES:
        raise InputError("dtype", f"{dtype!r} is not a training precision", ", ".join(TRAIN_DTYPES))
    if recompute not in _RECOMPUTE_CODE:
        raise InputError("recompute", f"unknown recomputation {recompute!r}", ", ".join(RECOMPUTE))
    if sharding not in _SHARD_CODE:
        raise InputError("fsdp", f"unknown sharding {sharding!r}", ", ".join(SHARDINGS))
    x = model_numbers(model, seq)
    x.update(gpus=gpus, tp=tp, pp=pp, cp=cp, ep=ep, vp=vp, global_batch=global_batch, seq=seq, micro_batch=micro_batch,
             recompute=_RECOMPUTE_CODE[recompute] + (recompute_fraction if recompute == "selective" else 0.0),
             sharding=_SHARD_CODE[sharding], fsdp_group=fsdp_group or 0,
             lowp=0.0 if dtype == "bf16" else 1.0, quant_bytes=QUANT_BYTES[dtype], lora=1.0 if lora else 0.0,
             peak=float(chip.peak_flops(PEAK_KEY[dtype])), peak_bf16=float(chip.peak_flops("bf16")),
             hbm_bw=float(chip.hbm_bw), up_bw=float(chip.scaleup_bw), out_bw=float(chip.scaleout_bw),
             domain=float(domain))
    return x
