"""Serving real workloads: continuous batching, disaggregated prefill/decode, speculative decoding.

The lecture's roofline (00:00) prices one forward pass. A serving stack runs passes
back to back for a stream of requests of ISL input and OSL output tokens, with C
sequences in flight across the deployment (``reference/conventions.md``). This
module turns the one-pass roofline into steady-state serving numbers:

* **Continuous batching** (aggregated). Every step each in-flight sequence decodes
  (k + 1 tokens under speculative decoding) at the mean context L̄ = ISL + OSL/2, and
  the step also carries a chunk of prefill: in steady state the prompts of the
  requests that replace finished ones, P = B · A · ISL · (1 − h) / OSL tokens per step
  (h = cached-prefix share). Weights are read once for both (lecture 01:40: prefill
  rides on the decode's weight fetch).
* **Disaggregated** serving: a prefill pool of N_P GPUs and a decode pool of N_D GPUs;
  the deployment serves min(decode capacity, prefill capacity · OSL / ISL).

One pass of a layout (TP/EP/PP/attention-DP: memory per chip, compute, weight and KV
fetch, all-reduce/all-to-all) is :func:`rackmath.engine.layout.evaluate`; this module
only says *what* each step carries and turns step times into serving metrics. A
calibrated efficiency preset (docs/validation.md) derates peak FLOP/s, bandwidth and
network and adds a fixed time per step; ``ideal=True`` is the lecture's roofline.

Every equation is one small function below, vectorized with numpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..results import ResultMixin

from ..errors import InputError, check_positive
from ..explain import Derivation, fmt

#: Largest number of tokens one step processes per replica (prefill chunk + decode), TensorRT-LLM's
#: default ``max_num_tokens`` (LLM API BuildConfig), also the scale of vLLM's chunked-prefill budget.
MAX_NUM_TOKENS = 8192

#: Largest batch one replica runs, TensorRT-LLM's default ``max_batch_size`` (LLM API BuildConfig).
MAX_BATCH_SIZE = 2048

#: Share of HBM the serving stack lets weights + KV + activations use (TensorRT-LLM's default
#: ``kv_cache_free_gpu_memory_fraction`` = 0.9 of what is left after weights; 0.9 of the whole is close).
USABLE_MEMORY_FRACTION = 0.9


# --------------------------------------------------------------------------------------
# Equations (one per function; all broadcast over numpy arrays)
# --------------------------------------------------------------------------------------


def mean_decode_context(isl, osl):
    """Mean context of an in-flight sequence in steady state: L̄ = ISL + OSL/2.

    Continuous batching keeps sequences at every stage of their output uniformly, so the
    KV each step reads is that of the average sequence (lecture 00:00's "context length").
    """
    return np.asarray(isl, dtype=float) + np.asarray(osl, dtype=float) / 2.0


def steps_per_request(osl, acceptance=1.0):
    """Decode (verification) steps one request takes: OSL / A (speculative decoding emits A per step)."""
    return np.asarray(osl, dtype=float) / np.asarray(acceptance, dtype=float)


def prefill_tokens_per_seq_step(isl, osl, acceptance=1.0, cached_share=0.0):
    """Prefill tokens carried per in-flight sequence per step: p = ISL · (1 − h) · A / OSL.

    Steady state: each sequence's slot is refilled every OSL/A steps by a new request whose
    ISL · (1 − h) uncached prompt tokens must be computed; chunked prefill spreads them over
    the steps (Sarathi-Serve / TensorRT-LLM in-flight batching).
    """
    return (np.asarray(isl, dtype=float) * (1.0 - np.asarray(cached_share, dtype=float))
            / steps_per_request(osl, acceptance))


def prefill_attended_context(isl, cached_share=0.0):
    """Mean context a computed prompt token attends to: h · ISL + (1 − h) · ISL / 2 (causal, after a cached prefix)."""
    isl = np.asarray(isl, dtype=float)
    h = np.asarray(cached_share, dtype=float)
    return h * isl + (1.0 - h) * isl / 2.0


def verify_tokens(mtp):
    """Tokens one sequence pushes through the target model per step: k + 1 (k drafts + the bonus token)."""
    return np.asarray(mtp, dtype=float) + 1.0


def draft_params(model):
    """Parameters one draft token runs through: one transformer layer's share plus the LM head.

    N_draft = N_matmul / n_layers + V · d (DeepSeek-V3's MTP module is one block sharing the
    embedding and head, §2.2 of the V3 report; a one-layer draft head is the same order).
    """
    return model.matmul_params / model.n_layers + model.vocab_size * model.d_model


def draft_flops_per_step(model, mtp):
    """Draft FLOPs per sequence per step: k · 2 · N_draft (k sequential draft tokens)."""
    return np.asarray(mtp, dtype=float) * 2.0 * draft_params(model)


def draft_weight_bytes(model, dtype=None):
    """Bytes of the draft module: (dense weights / n_layers) + LM head (stored once, read once per draft token)."""
    head = model.vocab_size * model.d_model * (2.0 if dtype is None else _dtype_bytes(dtype))
    return model.dense_weight_bytes(dtype) / model.n_layers + head


def tpot(step_s, acceptance=1.0):
    """Time per output token: TPOT = t_step / A (A tokens emitted per verification step)."""
    return np.asarray(step_s, dtype=float) / np.asarray(acceptance, dtype=float)


def output_tokens_per_s(concurrency, step_s, acceptance=1.0):
    """Output tokens/s of the deployment: X_out = C · A / t_step (every in-flight sequence emits A per step)."""
    return np.asarray(concurrency, dtype=float) * np.asarray(acceptance, dtype=float) / np.asarray(step_s, dtype=float)


def total_tokens_per_s(out_tok_s, isl, osl):
    """Input + output tokens/s: X_total = X_out · (1 + ISL / OSL) (cached input tokens counted, as reported)."""
    return np.asarray(out_tok_s, dtype=float) * (1.0 + np.asarray(isl, dtype=float) / np.asarray(osl, dtype=float))


def tokens_per_s_per_user(tpot_s):
    """Tokens/s one user sees: 1 / TPOT (conventions.md: 1000 / TPOT in ms)."""
    return 1.0 / np.asarray(tpot_s, dtype=float)


def usd_per_mtok(gpus, usd_per_gpu_hour, tok_s):
    """$ per million tokens = N_GPU · ($/GPU-h ÷ 3600) / X · 10⁶ (lecture 00:10: rent × time ÷ tokens)."""
    return np.asarray(gpus, dtype=float) * usd_per_gpu_hour / 3600.0 / np.asarray(tok_s, dtype=float) * 1e6


def prefill_chunks(isl_new, max_tokens=MAX_NUM_TOKENS):
    """Steps one prompt's prefill takes under chunking: ceil(ISL_new / max_num_tokens) (at least 1)."""
    return np.maximum(1.0, np.ceil(np.asarray(isl_new, dtype=float) / max_tokens))


def ttft_aggregated(chunk_s, n_chunks, step_s):
    """TTFT with continuous batching: n_chunks · t_chunk + t_step.

    The prompt's chunks run (each beside a decode step) and the first token comes out of
    the step that finishes it; queueing beyond one step is not modelled. At C = 1 this is
    the prefill time plus one decode step (the latency floor).
    """
    return np.asarray(n_chunks, dtype=float) * np.asarray(chunk_s, dtype=float) + np.asarray(step_s, dtype=float)


def kv_transfer_time(kv_bytes, bandwidth):
    """Disaggregated hand-off of one prompt's KV from prefill to decode GPUs: t = bytes / scale-out BW."""
    return np.asarray(kv_bytes, dtype=float) / bandwidth


def disaggregated_output_rate(decode_out_tok_s, prefill_in_tok_s, isl, osl, cached_share=0.0):
    """Output tokens/s of a disaggregated deployment: min(X_decode, X_prefill · OSL / (ISL · (1 − h))).

    The decode pool emits X_decode; the prefill pool computes X_prefill uncached prompt tokens/s,
    i.e. feeds X_prefill / (ISL (1 − h)) requests/s of OSL output tokens each.
    """
    fed = np.asarray(prefill_in_tok_s, dtype=float) * np.asarray(osl, dtype=float) / (
        np.asarray(isl, dtype=float) * (1.0 - np.asarray(cached_share, dtype=float)))
    return np.minimum(np.asarray(decode_out_tok_s, dtype=float), fed)


def little_concurrency(out_tok_s, osl, ttft_s, tpot_s):
    """Little's law: sequences in flight C = (X_out / OSL) · (TTFT + (OSL − 1) · TPOT)."""
    osl = np.asarray(osl, dtype=float)
    return np.asarray(out_tok_s, dtype=float) / osl * (np.asarray(ttft_s, dtype=float) + (osl - 1.0) * tpot_s)


def _dtype_bytes(dtype):
    from ..units import dtype_bytes

    return dtype_bytes(dtype)


# --------------------------------------------------------------------------------------
# What one step carries, as the layout engine's per-sequence numbers
# --------------------------------------------------------------------------------------


def step_numbers(model, *, isl, osl, weights_dtype=None, kv_dtype="bf16", mtp=0, acceptance=1.0,
                 cached_share=0.0, prefill=True, kv_shards=None):
    """:class:`~rackmath.engine.layout.ModelNumbers` of one serving step, per in-flight sequence.

    Decode: k + 1 tokens at L̄ = ISL + OSL/2 (plus k draft tokens); prefill (aggregated only):
    p = ISL (1 − h) A / OSL tokens attending to h·ISL + (1 − h)·ISL/2. ``pass_len`` is the tokens
    per sequence per step (it sets experts hit and communication volume).
    """
    from ..engine.layout import ModelNumbers

    ctx = float(mean_decode_context(isl, osl))
    k = int(mtp)
    mn = ModelNumbers.from_model(model, ctx, pass_len=k + 1, weights_dtype=weights_dtype, kv_dtype=kv_dtype)
    flops = mn.flops_per_seq
    expert = mn.expert_flops_per_seq
    per_token_expert = expert / (k + 1)
    tokens = float(k + 1)
    if prefill:
        p = float(prefill_tokens_per_seq_step(isl, osl, acceptance, cached_share))
        ctx_p = float(prefill_attended_context(isl, cached_share))
        flops += p * (model.matmul_flops_per_token + float(np.asarray(model.attention_flops_per_token(ctx_p))))
        expert += p * per_token_expert
        tokens += p
    dense = mn.dense_weight_bytes
    kv_seq = mn.kv_bytes_per_seq
    kv_read = mn.kv_read_bytes_per_seq
    if k:
        flops += float(draft_flops_per_step(model, k))
        dense += k * draft_weight_bytes(model, weights_dtype)  # read once per draft token
        kv_seq *= 1.0 + 1.0 / model.n_layers  # the draft layer's own KV
        kv_read *= 1.0 + 1.0 / model.n_layers
    out = replace(mn, flops_per_seq=flops, expert_flops_per_seq=expert, pass_len=tokens,
                  dense_weight_bytes=dense, kv_bytes_per_seq=kv_seq, kv_read_bytes_per_seq=kv_read)
    if kv_shards:
        out = replace(out, kv_heads=int(kv_shards))
    return out


def prefill_numbers(model, *, isl, chunk, weights_dtype=None, kv_dtype="bf16", cached_share=0.0, kv_shards=None):
    """ModelNumbers of a prefill pass: one sequence pushing ``chunk`` prompt tokens (per sequence of the pass).

    Attention is costed at the mean attended context h·ISL + (1 − h)·ISL/2; the pass reads the
    cached prefix's KV once.
    """
    from ..engine.layout import ModelNumbers

    ctx_p = float(prefill_attended_context(isl, cached_share))
    mn = ModelNumbers.from_model(model, max(float(isl), 1.0), pass_len=1, weights_dtype=weights_dtype,
                                 kv_dtype=kv_dtype)
    expert_per_tok = mn.expert_flops_per_seq
    flops = chunk * (model.matmul_flops_per_token + float(np.asarray(model.attention_flops_per_token(ctx_p))))
    prefix = float(cached_share) * float(isl)
    kv_read = float(np.asarray(model.kv_read_bytes(prefix, kv_dtype))) if prefix > 0 else 0.0
    out = replace(mn, flops_per_seq=flops, expert_flops_per_seq=chunk * expert_per_tok, pass_len=float(chunk),
                  kv_read_bytes_per_seq=kv_read)
    if kv_shards:
        out = replace(out, kv_heads=int(kv_shards))
    return out


# --------------------------------------------------------------------------------------
# Efficiency presets: which calibrated preset a system gets by default
# --------------------------------------------------------------------------------------


def default_efficiency(system, regime="serving"):
    """The calibrated preset for this system's chip and ``regime`` ('serving', 'prefill' or 'decode').

    Presets name their chips and regime in the catalog (``chips = [...]``, ``regime = "..."``);
    falls back to 'serving' and then to the ideal roofline when no preset covers the chip.
    """
    from ..engine.efficiency import load_efficiency
    from ..specs.catalog import entries

    chip = system.chip.name.lower()
    found = {}
    for e in entries("efficiency"):
        chips = [str(c).lower() for c in e.data.get("chips", ())]
        if chip in chips:
            found.setdefault(str(e.data.get("regime", "serving")), str(e.data["name"]))
    for r in (regime, "serving"):
        if r in found:
            return load_efficiency(found[r])
    return load_efficiency(None)


def _efficiency(system, efficiency, ideal, regime):
    from ..engine.efficiency import load_efficiency

    if ideal:
        if efficiency not in (None, "auto"):
            raise InputError("ideal", "both --ideal and an efficiency preset given", "one of them")
        return load_efficiency(None)
    if efficiency in (None, "auto"):
        return default_efficiency(system, regime)
    return load_efficiency(efficiency)


# --------------------------------------------------------------------------------------
# Layout choice
# --------------------------------------------------------------------------------------


def serial_stage_time(t_compute, t_weights, t_kv, t_comm):
    """Kernel-serial stage time: t = max(t_compute, t_weights) + t_kv + t_comm.

    A real decode step runs its kernels one after another: the weight matmuls (bound by
    FLOPs or by the weight fetch), then attention (bound by the KV fetch), with TP
    all-reduces / MoE all-to-alls between them (TensorRT-LLM and vLLM do not overlap
    them by default). The lecture's ideal overlaps everything: max(t_c, t_w + t_kv)
    (``engine.layout.combine_times``). Calibrated presets use this serial form; it could
    move to ``engine.layout.combine_times`` as a third mode.
    """
    return np.maximum(t_compute, t_weights) + t_kv + t_comm


def composition_of(eff) -> str:
    """How a preset composes the terms: 'overlap' (lecture's ideal) or 'serial' (calibrated presets).

    The ideal roofline overlaps; a catalog preset says ``composition = "serial" | "overlap"``
    (default serial); an ad-hoc :class:`Efficiency` is serial.
    """
    if eff.name == "ideal":
        return "overlap"
    from ..specs.catalog import entries

    for e in entries("efficiency"):
        if str(e.data.get("name")) == eff.name:
            return str(e.data.get("composition", "serial"))
    return "serial"


BOUNDS = np.array(["compute", "weights", "kv", "comm", "step overhead"])


def _evaluate(mn, system, eff, dtype, *, tp, ep, pp, attention_dp, micro_batch, chips, redundant_experts=0):
    """One vectorized call of the layout engine (peak FLOP/s of ``dtype``), composed per the preset.

    Returns (layout result, step time, bottleneck names). Step = PP · stage + hand-offs + hop
    latency + the preset's fixed overhead.
    """
    from ..engine.layout import HwNumbers, evaluate

    hw = HwNumbers.from_system(system, dtype, eff)
    res = evaluate(mn, hw, tp=tp, ep=ep, pp=pp, attention_dp=attention_dp, micro_batch=micro_batch, chips=chips,
                   redundant_experts=redundant_experts, usable_fraction=USABLE_MEMORY_FRACTION)
    ppa = np.asarray(pp, dtype=float)
    tc, tw, tkv, tcm = (np.asarray(x) for x in (res.t_compute_s, res.t_weights_s, res.t_kv_s, res.t_comm_s))
    if composition_of(eff) == "serial":
        stage = serial_stage_time(tc, tw, tkv, tcm)
        step = ppa * stage + res.t_handoff_s + res.t_hop_latency_s + eff.step_overhead_s
        terms = np.stack(np.broadcast_arrays(tc, tw, tkv, tcm, np.full_like(tc, eff.step_overhead_s / ppa.max())))
        bound = BOUNDS[np.argmax(terms, axis=0)]
    else:
        step = res.tpot_s + eff.step_overhead_s
        bound = np.asarray(res.bound)
    return res, step, bound


def choose_layout(mn, system, eff, dtype, gpus, concurrency, *, max_pp=8):
    """Best valid layout of ``gpus`` GPUs for this step: the lowest step time that fits memory.

    Enumerates TP (powers of two and multiples of the domain), EP dividing TP, attention DP
    and PP ≤ ``max_pp`` with the layout engine (one vectorized call); with C fixed, the
    shortest step is both the highest throughput and the lowest TPOT. Layouts must use every
    GPU (GPUs a multiple of TP·PP) and place experts evenly.
    """
    from ..engine.layout import layout_grid

    g = layout_grid(mn, int(gpus), int(system.scaleup_size), micro_batches=[1.0], max_pp=max_pp,
                    uneven_experts=False)
    tp, ep, pp, adp = g["tp"], g["ep"], g["pp"], g["attention_dp"]
    whole = (gpus % (tp * pp)) == 0
    if not mn.is_moe:
        whole &= ~adp  # attention DP replicates a dense model's FFN too: never better than DP replicas
    dp = np.floor(gpus / (tp * pp))
    b = np.maximum(np.asarray(concurrency, dtype=float) / (dp * pp), 1.0)
    res, step, _ = _evaluate(mn, system, eff, dtype, tp=tp, ep=ep, pp=pp, attention_dp=adp, micro_batch=b, chips=gpus)
    ok = whole & np.asarray(res.fits)
    if not ok.any():
        best_c = float(np.max(np.where(whole, res.max_concurrency, 0.0)))
        raise InputError("concurrency", f"{float(concurrency):g} sequences do not fit on {gpus} × {system.chip.name} "
                         "in any layout", f"at most about {best_c:g} sequences, or more GPUs, or a smaller dtype")
    score = np.where(ok, step, np.inf)
    i = int(np.argmin(score + 1e-9 * tp * pp))  # ties: the smaller model-parallel group
    return dict(tp=int(tp[i]), ep=int(ep[i]), pp=int(pp[i]), attention_dp=bool(adp[i]))


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
    _derivation: object = None

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
        out.update(model=self.model, hardware=self.hardware, mode=self.mode, gpus=self.gpus, isl=self.isl,
                   osl=self.osl, layout=self.layout, layout_chosen=self.layout_chosen, efficiency=self.efficiency,
                   weights_dtype=self.weights_dtype, kv_dtype=self.kv_dtype, mtp=self.mtp,
                   acceptance=self.acceptance, cached_share=self.cached_share,
                   usd_per_gpu_hour=self.usd_per_gpu_hour, notes=list(self.notes))
        for k in ("t_compute_ms", "t_weights_ms", "t_kv_ms", "t_comm_ms", "overhead_ms", "prefill_tokens_per_step"):
            if k in self.values:
                a = np.asarray(self.values[k])
                out[k] = a.item() if a.ndim == 0 else a.tolist()
        if self.prefill is not None:
            out["prefill"] = self.prefill
        return out

    def explain(self) -> Derivation:
        return self._derivation


# --------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------


def _check_layout_flags(tp, ep, pp, redundant_experts, usd_per_gpu_hour):
    """Given layout degrees are whole numbers ≥ 1 (0 is not 'default'); a price is finite and not absurd."""
    for name, v in (("tp", tp), ("ep", ep), ("pp", pp)):
        if v is not None and (not np.isfinite(v) or int(v) != v or v < 1 or v > 1e6):
            raise InputError(name, f"{v!r} is not a whole number from 1 to 10⁶", "a parallel degree ≥ 1")
    if not np.isfinite(redundant_experts) or int(redundant_experts) != redundant_experts or redundant_experts < 0:
        raise InputError("redundant_experts", f"{redundant_experts!r}", "a whole number ≥ 0")
    if usd_per_gpu_hour is not None:
        check_positive(usd_per_gpu_hour, "usd_per_gpu_hour", "a price in $ per GPU-hour", allow_zero=True,
                       maximum=1e4)


def _check_inputs(gpus, isl, osl, concurrency, mtp, acceptance, cached_share, prefill_gpus, decode_gpus):
    for name, v, mx in (("gpus", gpus, 1e6), ("isl", isl, 1e8), ("osl", osl, 1e8)):
        check_positive(v, name, "a positive number", maximum=mx)
    check_positive(concurrency, "concurrency", "a positive number of sequences in flight", maximum=1e9)
    if np.any(np.asarray(concurrency, dtype=float) < 1):
        raise InputError("concurrency", "fewer than 1 sequence in flight", "a number ≥ 1")
    if int(gpus) != gpus:
        raise InputError("gpus", f"{gpus!r} is not a whole number", "a whole number of GPUs")
    if np.ndim(isl) or np.ndim(osl):
        raise InputError("isl", "ISL and OSL must be single numbers", "one request shape per call")
    if isl < 1 or osl < 1:
        raise InputError("isl" if isl < 1 else "osl", "below one token", "≥ 1 token")
    if int(mtp) != mtp or mtp < 0 or mtp > 16:
        raise InputError("mtp", f"{mtp!r} draft tokens", "a whole number from 0 to 16")
    a = 1.0 if acceptance is None else float(acceptance)
    if acceptance is not None and mtp == 0 and a != 1.0:
        raise InputError("acceptance", f"{a:g} without --mtp", "--mtp K with --acceptance between 1 and K + 1")
    if not 1.0 <= a <= mtp + 1:
        raise InputError("acceptance", f"{a:g} is outside [1, k + 1] = [1, {mtp + 1}]",
                         "the mean tokens emitted per verification step, between 1 and k + 1")
    if not 0.0 <= cached_share < 1.0:
        raise InputError("cached_share", f"{cached_share:g}", "a fraction from 0 to below 1")
    if (prefill_gpus is None) != (decode_gpus is None):
        raise InputError("prefill_gpus" if prefill_gpus is None else "decode_gpus", "given alone",
                         "both --prefill-gpus and --decode-gpus (or neither)")
    if prefill_gpus is not None:
        for name, v in (("prefill_gpus", prefill_gpus), ("decode_gpus", decode_gpus)):
            if int(v) != v or v < 1:
                raise InputError(name, f"{v!r}", "a whole number of GPUs ≥ 1")
        if prefill_gpus + decode_gpus != gpus:
            raise InputError("gpus", f"{gpus} ≠ prefill {prefill_gpus} + decode {decode_gpus}",
                             "--gpus = --prefill-gpus + --decode-gpus (conventions.md)")
    return a


def serve(model, hardware, *, gpus=None, isl, osl, concurrency, tp=None, ep=None, pp=None, attention_dp=None,
          weights_dtype=None, kv_dtype=None, mtp=0, acceptance=None, prefill_gpus=None, decode_gpus=None,
          cached_share=0.0, ideal=False, efficiency=None, usd_per_gpu_hour=None, redundant_experts=0,
          uneven_experts=False, kv_shards=None, max_num_tokens=MAX_NUM_TOKENS) -> ServeResult:
    """Steady-state serving of ``model`` on ``gpus`` GPUs of ``hardware`` (see the module docstring).

    ``concurrency`` (sequences in flight across the deployment) may be a numpy array; the
    rest are single values. Layout flags follow conventions.md; with none given, the best
    valid layout is chosen (and reported). Experts that do not divide over EP GPUs are
    refused unless ``redundant_experts`` makes them divide or ``uneven_experts`` accepts
    modelling the most-loaded GPU (lecture 00:32). ``efficiency`` None picks the calibrated preset
    for the chip, ``ideal=True`` the lecture's roofline. Returns a :class:`ServeResult`.
    """
    from ..engine.layout import Deployment
    from ..specs.hardware import load_hardware
    from ..specs.models import load_model
    from .. import units

    m = load_model(model)
    system = load_hardware(hardware)
    chip = system.chip
    _check_layout_flags(tp, ep, pp, redundant_experts, usd_per_gpu_hour)
    for name, v in (("prefill_gpus", prefill_gpus), ("decode_gpus", decode_gpus)):
        if v is not None:  # before they are summed into gpus, so the error names the flag
            check_positive(v, name, "a positive number of GPUs", maximum=1e6)
    if gpus is None:
        gpus = (prefill_gpus + decode_gpus) if prefill_gpus is not None and decode_gpus is not None \
            else int(system.scaleup_size)
    isl, osl = float(isl), float(osl)
    a = _check_inputs(gpus, isl, osl, concurrency, mtp, acceptance, cached_share, prefill_gpus, decode_gpus)
    gpus, mtp = int(gpus), int(mtp)
    C = np.asarray(concurrency, dtype=float)
    wdt = units.normalize_dtype(weights_dtype, "weights_dtype") if weights_dtype else None
    kvdt = units.normalize_dtype(kv_dtype or getattr(m, "kv_dtype", None) or "bf16", "kv_dtype")
    compute_dtype = chip.compute_dtype(wdt or m.native_dtype)
    price = chip.usd_per_hour if usd_per_gpu_hour is None else float(usd_per_gpu_hour)
    disagg = prefill_gpus is not None
    eff = _efficiency(system, efficiency, ideal, "serving")
    notes = []

    # ---- the decode (or mixed) step
    mn = step_numbers(m, isl=isl, osl=osl, weights_dtype=wdt, kv_dtype=kvdt, mtp=mtp, acceptance=a,
                      cached_share=cached_share, prefill=not disagg, kv_shards=kv_shards)
    n_dec = int(decode_gpus) if disagg else gpus
    given = any(x is not None for x in (tp, ep, pp, attention_dp))
    if given:
        lay = dict(tp=int(tp) if tp is not None else min(n_dec, int(system.scaleup_size)), ep=int(ep or 1),
                   pp=int(pp or 1), attention_dp=bool(attention_dp))
        dep = Deployment.build(system, n_dec, tp=lay["tp"], ep=lay["ep"], pp=lay["pp"],
                               attention_dp=lay["attention_dp"], redundant_experts=redundant_experts,
                               uneven_experts=uneven_experts, model=m)
    else:
        lay = choose_layout(mn, system, eff, compute_dtype, n_dec, float(np.max(C)))
        dep = Deployment.build(system, n_dec, **lay, model=m)
    dp, ppd = dep.dp, dep.pp
    b = np.maximum(C / (dp * ppd), 1.0)
    res, step, bound0 = _evaluate(mn, system, eff, compute_dtype, tp=dep.tp, ep=dep.ep, pp=dep.pp, attention_dp=dep.attention_dp,
                          micro_batch=b, chips=n_dec, redundant_experts=redundant_experts)
    t_tpot = tpot(step, a)
    x_out = output_tokens_per_s(C, step, a)
    fits = np.asarray(res.fits)
    if not np.all(fits):
        notes.append("the KV cache of this many sequences does not fit in HBM (fits = false): "
                     f"at most about {float(np.min(res.max_concurrency)):g} sequences")

    # ---- prefill
    isl_new = isl * (1.0 - cached_share)
    chunk = float(min(max(isl_new, 1.0), max_num_tokens))
    n_chunks = float(prefill_chunks(isl_new, max_num_tokens))
    pf_info = None
    if disagg:
        eff_p = _efficiency(system, efficiency, ideal, "prefill")
        mp = prefill_numbers(m, isl=isl, chunk=chunk, weights_dtype=wdt, kv_dtype=kvdt, cached_share=cached_share,
                             kv_shards=kv_shards)
        n_pf = int(prefill_gpus)
        lay_p = choose_layout(mp, system, eff_p, compute_dtype, n_pf, 1.0)
        dep_p = Deployment.build(system, n_pf, **lay_p, model=m)
        # each prefill replica runs passes of max_num_tokens tokens (several prompts when they are short)
        seqs = max(1.0, np.floor(max_num_tokens / chunk))
        res_p, step_p, _ = _evaluate(mp, system, eff_p, compute_dtype, tp=dep_p.tp, ep=dep_p.ep, pp=dep_p.pp,
                                  attention_dp=dep_p.attention_dp, micro_batch=seqs, chips=n_pf)
        pf_tok_s = float(np.asarray(dep_p.dp * seqs * chunk / step_p).ravel()[0])
        cap_out = output_tokens_per_s(C, step, a)
        x_out = disaggregated_output_rate(cap_out, pf_tok_s, isl, osl, cached_share)
        prefill_bound = x_out < cap_out
        res_1, step_1, _ = _evaluate(mp, system, eff_p, compute_dtype, tp=dep_p.tp, ep=dep_p.ep, pp=dep_p.pp,
                                  attention_dp=dep_p.attention_dp, micro_batch=1.0, chips=n_pf)
        t_pf = float(np.asarray(step_1).ravel()[0]) * n_chunks
        kv_bytes = float(np.asarray(m.kv_cache_bytes(isl, kvdt)))
        t_xfer = float(kv_transfer_time(kv_bytes, chip.scaleout_bw * dep_p.tp * eff.eta_comm))
        ttft = t_pf + t_xfer + 0.0 * step
        pf_info = dict(gpus=n_pf, layout=dict(lay_p, dp=dep_p.dp), input_tok_s=pf_tok_s,
                       input_tok_s_per_gpu=pf_tok_s / n_pf, prefill_s=t_pf, kv_transfer_s=t_xfer,
                       efficiency=eff_p.name)
        if np.any(prefill_bound):
            notes.append("the prefill pool limits throughput: the decode pool idles part of the time")
    else:
        mp = prefill_numbers(m, isl=isl, chunk=chunk, weights_dtype=wdt, kv_dtype=kvdt, cached_share=cached_share,
                             kv_shards=kv_shards)
        res_c, chunk_s, _ = _evaluate(mp, system, eff, compute_dtype, tp=dep.tp, ep=dep.ep, pp=dep.pp, attention_dp=dep.attention_dp,
                                   micro_batch=1.0, chips=n_dec)
        chunk_s = float(np.asarray(chunk_s).ravel()[0])
        ttft = ttft_aggregated(chunk_s, n_chunks, step)
        prefill_bound = np.zeros_like(x_out, dtype=bool)

    x_tot = total_tokens_per_s(x_out, isl, osl)
    bound = np.where(prefill_bound, "prefill pool", np.asarray(bound0).astype(object))
    ms = 1e3
    values = dict(
        output_tok_s=x_out, total_tok_s=x_tot, output_tok_s_per_gpu=x_out / gpus, total_tok_s_per_gpu=x_tot / gpus,
        tpot_ms=t_tpot * ms, ttft_ms=np.asarray(ttft) * ms, step_ms=step * ms, bottleneck=bound,
        tokens_per_s_per_user=tokens_per_s_per_user(t_tpot),
        usd_per_mtok_output=usd_per_mtok(gpus, price, x_out), usd_per_mtok_total=usd_per_mtok(gpus, price, x_tot),
        concurrency=C, fits=fits, mem_per_gpu_gb=np.asarray(res.mem_per_chip) / 1e9,
        max_concurrency=np.asarray(res.max_concurrency),
        t_compute_ms=np.asarray(res.t_compute_s) * dep.pp * ms, t_weights_ms=np.asarray(res.t_weights_s) * dep.pp * ms,
        t_kv_ms=np.asarray(res.t_kv_s) * dep.pp * ms, t_comm_ms=np.asarray(res.t_comm_s) * dep.pp * ms,
        overhead_ms=eff.step_overhead_s * ms,
        prefill_tokens_per_step=0.0 if disagg else float(prefill_tokens_per_seq_step(isl, osl, a, cached_share)) * C,
    )
    if C.ndim == 0:
        values = {k: (np.asarray(v).item() if np.asarray(v).size == 1 else v) for k, v in values.items()}
    layout = dict(lay, dp=dp, gpus=n_dec, label=dep.label())
    if not given:
        notes.append(f"layout chosen: {dep.label()} (the shortest step that fits; give --tp/--ep/--pp/"
                     "--attention-dp to fix it)")
    out = ServeResult(model=m.name, hardware=system.name, mode="disaggregated" if disagg else "aggregated",
                      gpus=gpus, isl=isl, osl=osl, layout=layout, layout_chosen=not given, efficiency=eff.name,
                      weights_dtype=wdt or m.native_dtype, kv_dtype=kvdt, mtp=mtp, acceptance=a,
                      cached_share=float(cached_share), usd_per_gpu_hour=price, values=values, prefill=pf_info,
                      notes=notes)
    out._derivation = _derive(out, m, system, eff, res, dep)
    return out


def _derive(r: ServeResult, m, system, eff, res, dep) -> Derivation:
    """The blackboard derivation of the first configuration."""
    v = {k: float(np.asarray(x).ravel()[0]) if k != "bottleneck" else str(np.asarray(x).ravel()[0])
         for k, x in r.values.items() if k not in ("fits",)}
    C, isl, osl, a, k = v["concurrency"], r.isl, r.osl, r.acceptance, r.mtp
    d = Derivation(f"Serving {r.model} on {r.gpus} × {system.chip.name} ({r.mode}, layout {dep.label()}, "
                   f"weights {r.weights_dtype}, KV {r.kv_dtype}, efficiency {r.efficiency})")
    lbar = d.add("L̄", "ISL + OSL/2", f"{isl:g} + {osl:g}/2", float(mean_decode_context(isl, osl)), "tokens",
                 "mean context of an in-flight sequence")
    d.add("b", "C / (dp · PP)", f"{C:g} / ({dep.dp} · {dep.pp})", max(C / (dep.dp * dep.pp), 1.0), "",
          "sequences per micro-batch per replica")
    d.add("tokens/seq/step", "(k + 1) + ISL·(1 − h)·A/OSL" if r.mode == "aggregated" else "k + 1",
          f"({k} + 1)" + (f" + {isl:g}·(1 − {r.cached_share:g})·{a:g}/{osl:g}" if r.mode == "aggregated" else ""),
          float(res.model.pass_len), "", "decode + amortised prefill chunk (continuous batching)")
    d.add("t_compute", "PP · FLOPs per chip / (peak · η_c)", "", v["t_compute_ms"] / 1e3, "s",
          f"η_c = {eff.eta_compute:g}")
    d.add("t_weights", "PP · weight bytes read per chip / (HBM BW · η_m)", "", v["t_weights_ms"] / 1e3, "s",
          f"η_m = {eff.eta_memory:g}; experts hit at this batch")
    d.add("t_kv", f"PP · b · kv_read(L̄ = {lbar:g}) / KV shards / (HBM BW · η_m)", "", v["t_kv_ms"] / 1e3, "s")
    d.add("t_comm", "all-reduce (TP) + all-to-all (EP), per layer", "", v["t_comm_ms"] / 1e3, "s",
          f"η_comm = {eff.eta_comm:g}")
    step = d.add("t_step", "max(t_compute, t_weights + t_kv, t_comm) + hops + overhead",
                 f"… + {fmt(eff.step_overhead_s, 's')}", v["step_ms"] / 1e3, "s", f"{v['bottleneck']} binds")
    d.add("TPOT", "t_step / A", f"{fmt(step, 's')} / {a:g}", v["tpot_ms"] / 1e3, "s")
    d.add("tok/s/user", "1 / TPOT", "", v["tokens_per_s_per_user"], "tok/s")
    d.add("X_out", "C · A / t_step" + (" (capped by the prefill pool)" if r.mode == "disaggregated" else ""),
          f"{C:g} · {a:g} / {fmt(step, 's')}", v["output_tok_s"], "tok/s")
    d.add("X_out/GPU", "X_out / N_GPU", f"{fmt(v['output_tok_s'], 'tok/s')} / {r.gpus}", v["output_tok_s_per_gpu"],
          "tok/s", "every GPU counted, prefill pool included")
    d.add("X_total/GPU", "X_out · (1 + ISL/OSL) / N_GPU", "", v["total_tok_s_per_gpu"], "tok/s")
    d.add("TTFT", "n_chunks · t_chunk + t_step" if r.mode == "aggregated" else "t_prefill + KV transfer", "",
          v["ttft_ms"] / 1e3, "s")
    d.add("$/Mtok", "N_GPU · $/GPU-h / 3600 / X_out · 10⁶", f"{r.gpus} · ${r.usd_per_gpu_hour:g}/h …",
          v["usd_per_mtok_output"], "$/Mtok", "output tokens")
    d.conclusion = f"→ {fmt(v['output_tok_s_per_gpu'], 'tok/s')} per GPU at {v['tokens_per_s_per_user']:.3g} " \
                   f"tok/s per user; {v['bottleneck']}-bound" + ("; " + "; ".join(r.notes) if r.notes else "")
    return d


# --------------------------------------------------------------------------------------
# Single passes (for records that measured one phase, e.g. Pope et al.'s Table 2)
# --------------------------------------------------------------------------------------


def decode_step(model, hardware, *, chips, batch, context, tp=None, ep=1, pp=1, attention_dp=False,
                weights_dtype=None, kv_dtype=None, kv_shards=None, redundant_experts=0, ideal=False, efficiency=None):
    """Time of one decode step of ``batch`` sequences at ``context`` on one replica of ``chips`` chips (s)."""
    return _single_pass(model, hardware, chips=chips, seqs=batch, isl=context, osl=0.0, tp=tp, ep=ep, pp=pp,
                        attention_dp=attention_dp, weights_dtype=weights_dtype, kv_dtype=kv_dtype,
                        kv_shards=kv_shards, ideal=ideal, efficiency=efficiency, regime="decode",
                        redundant_experts=redundant_experts)


def prefill_time(model, hardware, *, chips, batch, isl, tp=None, ep=1, pp=1, attention_dp=False, weights_dtype=None,
                 kv_dtype=None, kv_shards=None, cached_share=0.0, redundant_experts=0, ideal=False, efficiency=None):
    """Time to prefill ``batch`` prompts of ``isl`` tokens in one pass on ``chips`` chips (s)."""
    return _single_pass(model, hardware, chips=chips, seqs=batch, isl=isl, osl=None, tp=tp, ep=ep, pp=pp,
                        attention_dp=attention_dp, weights_dtype=weights_dtype, kv_dtype=kv_dtype,
                        kv_shards=kv_shards, ideal=ideal, efficiency=efficiency, regime="prefill",
                        cached_share=cached_share, redundant_experts=redundant_experts)


def _single_pass(model, hardware, *, chips, seqs, isl, osl, tp, ep, pp, attention_dp, weights_dtype, kv_dtype,
                 kv_shards, ideal, efficiency, regime, cached_share=0.0, redundant_experts=0):
    from ..engine.layout import Deployment
    from ..specs.hardware import load_hardware
    from ..specs.models import load_model
    from .. import units

    m = load_model(model)
    system = load_hardware(hardware)
    wdt = units.normalize_dtype(weights_dtype, "weights_dtype") if weights_dtype else None
    kvdt = units.normalize_dtype(kv_dtype or "bf16", "kv_dtype")
    cdt = system.chip.compute_dtype(wdt or m.native_dtype)
    eff = _efficiency(system, efficiency, ideal, regime)
    dep = Deployment.build(system, int(chips), tp=tp or int(chips), ep=ep, pp=pp, attention_dp=attention_dp,
                           redundant_experts=redundant_experts, model=m)
    if regime == "decode":
        mn = step_numbers(m, isl=isl, osl=1e-9, weights_dtype=wdt, kv_dtype=kvdt, prefill=False, kv_shards=kv_shards)
    else:
        isl_new = float(isl) * (1.0 - cached_share)
        mn = prefill_numbers(m, isl=isl, chunk=isl_new, weights_dtype=wdt, kv_dtype=kvdt, cached_share=cached_share,
                             kv_shards=kv_shards)
    res, step, bound = _evaluate(mn, system, eff, cdt, tp=dep.tp, ep=dep.ep, pp=dep.pp, attention_dp=dep.attention_dp,
                          micro_batch=np.asarray(seqs, dtype=float) / dep.pp, chips=dep.chips,
                          redundant_experts=redundant_experts)
    res.values["bound"] = np.broadcast_to(bound, np.shape(res.values["tpot_s"]))
    return step, res, eff


__all__ = ["serve", "ServeResult", "choose_layout", "decode_step", "prefill_time", "default_efficiency",
           "mean_decode_context", "steps_per_request", "prefill_tokens_per_seq_step", "prefill_attended_context",
           "verify_tokens", "draft_params", "draft_flops_per_step", "draft_weight_bytes", "tpot",
           "output_tokens_per_s", "total_tokens_per_s", "tokens_per_s_per_user", "usd_per_mtok", "prefill_chunks",
           "ttft_aggregated", "kv_transfer_time", "disaggregated_output_rate", "little_concurrency",
           "step_numbers", "prefill_numbers", "MAX_NUM_TOKENS", "MAX_BATCH_SIZE"]
