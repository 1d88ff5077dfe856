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

from ...results import ResultMixin

from ...errors import InputError, check_positive
from ...explain import Derivation, fmt
from ...engine.roofline import usd_per_mtok  # the one $/Mtok formula (re-exported: serving.usd_per_mtok)
from ...specs.records import ARRIVALS  # request arrival patterns: "steady" (spread out) or "waves" (lock-step)

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


def prefill_chunks(isl_new, max_tokens=MAX_NUM_TOKENS):
    """Steps one prompt's prefill takes under chunking: ceil(ISL_new / max_num_tokens) (at least 1)."""
    return np.maximum(1.0, np.ceil(np.asarray(isl_new, dtype=float) / max_tokens))


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


# --------------------------------------------------------------------------------------
# Serving stacks (--framework)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stack:
    """What a serving stack decides that the step model needs: prefill budget, batch cap, scheduler overlap."""

    name: str
    max_num_tokens: int | None  # tokens one step may carry per attention rank (prefill + decode); None: no limit
    max_batch_size: int  # sequences one replica runs at once
    overlap_scheduler: bool  # host schedules step n+1 while the GPU runs step n
    description: str
    source: str
    prefill_first: bool = False  # waiting prompts run as prefill batches of their own while decode waits
    cuda_graphs: bool = True  # decode steps replay captured graphs; False (--eager): every step is dispatched eagerly
    overlap_with_speculation: bool = True  # False: speculative decoding (MTP / EAGLE) turns the overlap scheduler off
    reserves_whole_request: bool = False  # admission reserves KV for ISL + OSL (TensorRT-LLM's GUARANTEED_NO_EVICT)
    # --- h34 (issue 34): the stack version (specs/stacks.py, specs/data/launch/stacks.toml) ---
    version: str = ""  # the listed version assumed ("" = an unversioned stack)
    label: str = ""  # stack@version as the user names it (sglang@0.5.6, dynamo-trtllm@0.5.1-rc0.pre3); "" = name
    mem_fraction: float = 0.9  # share of HBM the stack lets weights + KV fill (USABLE_MEMORY_FRACTION unless listed)

    @property
    def version_label(self) -> str:
        return self.label or self.name


STACKS = {
    "generic": Stack("generic", None, 10**9, False,
                     "generic continuous-batching stack: prefill in whole prompts (no token budget), no batch cap, "
                     "host scheduling serial with the GPU",
                     "rackmath default (no --framework given)"),
    "trtllm": Stack("trtllm", 8192, 2048, True,
                    "TensorRT-LLM (PyTorch backend): max_num_tokens 8,192, max_batch_size 2,048, overlap scheduler, "
                    "in-flight batching (context chunks ride in decode steps)",
                    "TensorRT-LLM LLM API defaults: max_num_tokens=8192, max_batch_size=2048, "
                    "disable_overlap_scheduler=False; capacity scheduler GUARANTEED_NO_EVICT (a request is admitted "
                    "only with KV blocks for its whole ISL + OSL; trtllm-bench --scheduler_policy default)",
                    reserves_whole_request=True),
    "vllm": Stack("vllm", 8192, 1024, False,
                  "vLLM V1: max_num_batched_tokens 8,192, max_num_seqs 1,024, async scheduling off",
                  "vLLM EngineArgs defaults for the OpenAI server on ≥ 70 GiB GPUs (V1, 0.10-era): "
                  "max_num_batched_tokens=8192, max_num_seqs=1024, async_scheduling=False"),
    "vllm-v0": Stack("vllm-v0", 32768, 256, False,
                     "vLLM V0 (≤ 0.10) with chunked prefill off: prefill batches first, up to max_model_len tokens "
                     "a step (32,768 here), max_num_seqs 256",
                     "vLLM V0 EngineArgs: chunked prefill on by default only above a 32K max_model_len (and off for "
                     "MLA models in 0.7.x), then max_num_batched_tokens = max(max_model_len, 2048); max_num_seqs=256; "
                     "the default scheduler runs waiting prefills before any decode", prefill_first=True),
    "sglang": Stack("sglang", 8192, 2048, True,
                    "SGLang: chunked_prefill_size 8,192, overlap scheduler on (off under speculative decoding), "
                    "prefill batches first",
                    "SGLang ServerArgs defaults on ≥ 80 GB GPUs: chunked_prefill_size=8192; overlap schedule on "
                    "unless --disable-overlap-schedule, and off with EAGLE / NEXTN speculative decoding (ServerArgs: "
                    "'Overlap scheduler is disabled because of using eagle speculative decoding'); a prefill batch "
                    "runs whenever prompts wait (--enable-mixed-chunk off)", prefill_first=True,
                    overlap_with_speculation=False),
}
_STACK_ALIASES = {"tensorrt-llm": "trtllm", "trt-llm": "trtllm", "tensorrt_llm": "trtllm", "dynamo": "trtllm",
                  "atom": "vllm", "sgl": "sglang", "jax": "generic", "torch": "generic", "other": "generic",
                  "none": "generic"}


def load_stack(framework=None) -> Stack:
    """``--framework trtllm|vllm|sglang|vllm-v0|atom|dynamo-sglang|dynamo-trtllm[@VERSION]`` (aliases: tensorrt-llm,
    trt, dynamo → trtllm); None = generic. A versioned stack (``specs/stacks.py``) gets its listed version — the one
    named, else the newest — which names the engine whose rules and host times it uses and its memory fraction."""
    if framework is None:
        return STACKS["generic"]
    if isinstance(framework, Stack):
        return framework
    from ...specs.stacks import resolve

    text = str(framework).strip()
    base = text.partition("@")[0].strip().lower()
    stack, sv = resolve(text)  # an unknown version: one line listing the known ones
    if sv is not None:
        return replace(STACKS[sv.engine], version=sv.version, label=sv.label, mem_fraction=sv.mem_fraction)
    key = _STACK_ALIASES.get(base, base)
    if key not in STACKS:
        raise InputError("framework", f"unknown serving stack {framework!r}",
                         "trtllm, vllm, sglang, vllm-v0, atom, dynamo-sglang, dynamo-trtllm (or tensorrt-llm, trt, "
                         "dynamo), each optionally @VERSION (sglang@0.5.6), or none/other for the generic stack")
    return STACKS[key]


def speculating(stack: Stack, mtp) -> Stack:
    """The stack as it runs with ``mtp`` draft tokens: a stack whose overlap scheduler speculation turns off (SGLang:
    'Overlap scheduler is disabled because of using eagle speculative decoding') schedules serially."""
    if int(mtp) > 0 and stack.overlap_scheduler and not stack.overlap_with_speculation:
        return replace(stack, overlap_scheduler=False)
    return stack


# --------------------------------------------------------------------------------------
# The four serving realities, one function each
# --------------------------------------------------------------------------------------


def mixed_steps_per_decode(prefill_per_step, chunk_tokens):
    """n = p / c: mixed steps per decode step, when p prompt tokens per step arrive in chunks of c (Sarathi-Serve)."""
    return np.asarray(prefill_per_step, dtype=float) / np.asarray(chunk_tokens, dtype=float)


def time_sliced_schedule(t_decode, t_mixed, prefill_per_step, chunk_tokens, seqs, acceptance, isl_new, osl):
    """Chunked prefill time-sliced with decode, as continuous-batching schedulers run it.

    Sarathi-Serve (Agrawal et al., OSDI 2024) / vLLM chunked prefill / TensorRT-LLM in-flight
    batching: every step runs the decode of all b in-flight sequences; a step that also carries a
    prefill chunk of c tokens (the stack's token budget, less the decode tokens) takes t_mixed
    instead of t_decode. Steady state needs p = b · ISL_new · A / OSL prompt tokens per decode
    step, i.e. n = p / c mixed steps per decode step:

        n ≤ 1:  t̄ = t_decode + n · (t_mixed − t_decode)     (other requests' prefills stall the stream)
        n > 1:  the prefill budget binds: every step is mixed (t̄ = t_mixed) and the deployment
                emits X = c · OSL / (ISL_new · t_mixed) per replica instead of b · A / t̄.

    A sequence's own prefill is its TTFT, not a stall: TPOT sees the other (b − 1)/b of the mixed
    steps, TPOT = (t_decode + n·(b − 1)/b·(t_mixed − t_decode)) / A.
    Returns (t̄, TPOT, output tokens/s per micro-batch stream, prefill-bound mask).
    """
    n = mixed_steps_per_decode(prefill_per_step, chunk_tokens)
    b = np.asarray(seqs, dtype=float)
    t_bar = np.where(n <= 1.0, t_decode + n * (t_mixed - t_decode), t_mixed)
    others = np.maximum(b - 1.0, 0.0) / np.maximum(b, 1.0)
    t_tpot = np.where(n <= 1.0, t_decode + n * others * (t_mixed - t_decode), t_mixed) / acceptance
    x_dec = b * acceptance / t_bar
    x_pf = np.asarray(chunk_tokens, dtype=float) * osl / (np.maximum(isl_new, 1e-9) * t_mixed)
    bound = x_pf < x_dec
    return t_bar, t_tpot, np.minimum(x_dec, x_pf), bound


def poisson_mixed_share(prefill_per_step, isl_new, t_decode, t_mixed, n_max, iterations=50):
    """Share s of steps that carry prefill when prompts arrive as a Poisson stream and each step admits every
    waiting prompt (vLLM, SGLang and TensorRT-LLM schedulers take the whole waiting queue within the budget).

    Prompts arrive at λ = (p / ISL_new) / t̄ per second. After a decode step of t_d a prompt waits with
    probability q_d = 1 − e^(−λ·t_d); after a mixed step of t_m with q_m = 1 − e^(−λ·t_m): the prompts that arrive
    during a long (eager) mixed step ride the next step together. The steps are a two-state Markov chain whose
    stationary mixed share is

        s = q_d / (1 − q_m + q_d),   t̄ = t_d + s · (t_m − t_d)     (a fixed point in s, found by bisection:
                                                                  the right side falls as s rises, one root)

    As λ·t → 0 it is n = p / ISL_new, one prompt per mixed step (the deterministic stream of Sarathi-Serve, which
    closed-loop clients at fixed lengths produce); it never exceeds ``n_max``. ``rackmath simulate --rate``
    (Poisson arrivals, whole waiting queue admitted each step) agrees within 1% on TPOT and 2% on output on
    gpt-oss-120b on 8 × B200 (docs/serving.md; tests/test_serving.py checks 5%).
    """
    p = np.asarray(prefill_per_step, dtype=float)
    td, tm = np.asarray(t_decode, dtype=float), np.asarray(t_mixed, dtype=float)
    n_max = np.asarray(n_max, dtype=float)
    prompts = p / max(float(isl_new), 1e-9)  # prompts needed per decode step

    def chain(s):
        lam = prompts / np.maximum(td + s * (tm - td), 1e-300)
        qd, qm = -np.expm1(-lam * td), -np.expm1(-lam * tm)
        return qd / np.maximum(1.0 - qm + qd, 1e-300)

    top = np.minimum(n_max, 1.0) + np.zeros(np.broadcast_shapes(p.shape, td.shape, tm.shape, n_max.shape))
    lo, hi = np.zeros_like(top), top
    for _ in range(int(iterations)):
        mid = 0.5 * (lo + hi)
        up = chain(mid) > mid
        lo, hi = np.where(up, mid, lo), np.where(up, hi, mid)
    return np.where(chain(top) >= top, top, 0.5 * (lo + hi))  # the root, or the cap where the chain stays above it


def batch_arrivals(sch: dict, seqs, ranks, mtp, isl_new, t_decode, t_mixed) -> dict:
    """:func:`prefill_schedule` under Poisson arrivals: a mixed step carries c = p / s prompt tokens
    (:func:`poisson_mixed_share`), within every rank's budget; the busiest rank carries at least an even share,
    c_r = min(max(c_r, c / R), left). Unchanged where no step or every step is mixed (n = p / c ∉ (0, 1))."""
    p, c_tot, left = sch["p"], sch["c_tot"], sch["left"]
    R = np.asarray(ranks, dtype=float)
    n0 = p / np.maximum(c_tot, 1e-300)
    s = poisson_mixed_share(p, isl_new, t_decode, t_mixed, n0)
    inside = (n0 > 0) & (n0 < 1)
    c_new = np.where(inside, np.minimum(p / np.maximum(s, 1e-300), R * left), c_tot)
    c_rank = np.where(inside, np.minimum(np.maximum(sch["c_rank"], c_new / R), left), sch["c_rank"])
    imb = np.where(R > 1, mixed_step_imbalance(seqs, R, mtp + 1, c_rank, c_new), 1.0)
    return dict(sch, c_tot=c_new, c_rank=c_rank, imbalance=imb, share=s, inside=inside, c_rank_steady=sch["c_rank"],
                c_tot_steady=c_tot)


def prefill_wait(t_bar, prefill_s, utilisation):
    """Wait for a prefill slot: W = t̄ / 2 + ρ / (2 (1 − ρ)) · t_prefill (M/D/1 queue, Pollaczek–Khinchine).

    A new request waits half a step for the next schedule, then for the prompts ahead of it; the
    prefill server's utilisation is its load over its capacity, ρ = p / (R · budget left after the
    decode tokens) in an aggregated deployment (capped at 0.95).
    """
    rho = np.minimum(np.asarray(utilisation, dtype=float), 0.95)
    return 0.5 * np.asarray(t_bar, dtype=float) + rho / (2.0 * (1.0 - rho)) * prefill_s


def wave_schedule(seqs, ranks, isl_new, osl, budget, t_pass, t_decode, acceptance=1.0, t_request=0.0):
    """Lock-step waves: C clients at fixed ISL/OSL that start together stay together.

    A burst or one batch of C fixed-length prompts, or a closed-loop benchmark client
    (``bench_serving --max-concurrency C --random-range-ratio 1``) on a prefill-first scheduler (SGLang;
    vLLM V0 without chunked prefill), sends C prompts at once; identical requests finish together and
    the next C arrive together, so prefill and decode alternate in waves instead of interleaving
    (published.md §1i caveats; the dstack runs' TTFT of 1–67 s at C = 4–128). Per attention rank,
    b_r = b / R prompts of ISL_new tokens pass through prefill passes of ``budget`` tokens (the last
    one partial, its time in proportion to its tokens):

        n = ISL_new / budget                          passes per prompt
        t_wave = b_r · n · t_pass                     the wave's prompt tokens (≥ one pass: budget ≤ b_r · ISL_new)
        TTFT_w = min(max(⌈n⌉, n (b_r + 1)/2 + 1/2) · t_pass, t_wave)  mean (prompt i is done after ⌈i·n⌉ passes)
        TTFT = t_request + TTFT_w                                       (host time per request first)
        TPOT = (t_wave − TTFT_w + (OSL − 1)/A · t_decode) / (OSL − 1)  (a prompt's decode waits for the wave)
        X = b · OSL / (t_request + t_wave + (OSL − 1)/A · t_decode)    one wave's tokens over its period

    E2E = TTFT + (OSL − 1) · TPOT is the period, so X = b · OSL / E2E (Little's law) holds exactly.
    Returns (mean TTFT, TPOT, output tokens/s per replica, t_wave).
    """
    b = np.asarray(seqs, dtype=float)
    b_r = np.maximum(b / np.asarray(ranks, dtype=float), 1.0)
    n = float(max(isl_new, 1.0)) / np.asarray(budget, dtype=float)
    t_pass = np.asarray(t_pass, dtype=float)
    t_wave = np.maximum(b_r * n, 1.0) * t_pass
    ttft = np.minimum(np.maximum(np.ceil(n), n * (b_r + 1.0) / 2.0 + 0.5) * t_pass, t_wave)
    decode = (osl - 1.0) / float(acceptance) * np.asarray(t_decode, dtype=float)
    tpot = (t_wave - ttft + decode) / max(osl - 1.0, 1.0)
    t_req = np.asarray(t_request, dtype=float)
    return t_req + ttft, tpot, b * osl / (t_req + t_wave + decode), t_wave


def waves_persist(prefill_first, seqs, ranks, isl_new, budget):
    """Whether lock-step waves survive repeated rounds: a prefill-first scheduler starts the whole wave decoding
    together; a mixed-step scheduler (vLLM V1, TensorRT-LLM in-flight batching) keeps a wave together only when
    its prompts fit one prefill pass (b/R · ISL_new ≤ budget) — otherwise the first prompts decode while the last
    prefill, finish first, and the next round arrives spread out (``rackmath simulate --arrivals waves``)."""
    fits = np.maximum(np.asarray(seqs, dtype=float) / ranks, 1.0) * max(float(isl_new), 1.0) <= float(
        budget or np.inf)
    return np.asarray(bool(prefill_first) | fits)


def speculative_step(t_verify, t_draft, mtp):
    """Speculative decoding / MTP step: t = t_verify(k + 1 tokens per sequence) + k · t_draft.

    The draft (MTP module, EAGLE head) is a real transformer layer plus the LM head, run k times
    one after another for one token per sequence; the target verifies the k + 1 tokens in one
    pass; A tokens are accepted per step (TPOT = t / A). Where the host's work is not overlapped
    (a serial stack; SGLang, which turns its overlap scheduler off under speculation) each draft pass
    pays the stack's host time like the verification does (:func:`evaluate`): t_draft = t_gpu + t_host.
    Leviathan et al. 2023; DeepSeek-V3 MTP (arXiv 2412.19437 §2.2); EAGLE (Li et al. 2024).
    """
    return np.asarray(t_verify, dtype=float) + np.asarray(mtp, dtype=float) * np.asarray(t_draft, dtype=float)


# --------------------------------------------------------------------------------------
# A plan: the typed workload and layout, then evaluate(plan, efficiency)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """Request shape and load: ISL/OSL tokens, C sequences in flight (conventions.md), speculation, prefix cache."""

    isl: float
    osl: float
    concurrency: object
    mtp: int = 0
    acceptance: float = 1.0
    cached_share: float = 0.0
    arrivals: str = "steady"  # "steady" (spread out evenly), "poisson" (independent) or "waves" (wave_schedule)

    @property
    def isl_new(self) -> float:
        return self.isl * (1.0 - self.cached_share)


@dataclass(frozen=True)
class Layout:
    """A decode (or prefill) pool's layout, as the serving frameworks' flags say it (conventions.md)."""

    gpus: int
    tp: int
    ep: int = 1
    pp: int = 1
    attention_dp: bool = False
    redundant_experts: int = 0
    uneven_experts: bool = False
    chosen: bool = False
    attention_dp_size: int = 0  # attention-DP groups of the TP group (0: TP, every GPU its own sequences)
    weight_layout: str = "1d"  # how the TP GPUs hold the weights: 1d, 2d or gathered (engine.layout.WEIGHT_LAYOUTS)

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp)

    @property
    def attention_ranks(self) -> int:
        """Attention-DP groups R, each with its own scheduler, sequences and KV (``engine.layout.attention_ranks``)."""
        from ...engine.layout import attention_ranks

        return int(attention_ranks(self.tp, self.attention_dp, self.attention_dp_size))

    def label(self) -> str:
        from ...engine.deployment import attention_dp_label

        parts = [f"TP{self.tp}"] + ([f"EP{self.ep}"] if self.ep > 1 else []) + \
            ([attention_dp_label(self.attention_dp_size, self.tp)] if self.attention_dp else []) + \
            ([f"PP{self.pp}"] if self.pp > 1 else []) + \
            ({"2d": ["2D weight-stationary"], "gathered": ["weight-gathered"]}.get(self.weight_layout, [])) + \
            [f"×{self.dp}"]
        return " ".join(parts)


@dataclass
class Plan:
    """Everything fixed before an efficiency is applied: model, system, workload, layouts, stack, dtypes."""

    model: object
    system: object
    workload: Workload
    layout: Layout
    stack: Stack
    weights_dtype: str | None
    kv_dtype: str
    compute_dtype: str
    gpus: int
    usd_per_gpu_hour: float
    prefill_gpus: int | None = None
    prefill_layout: Layout | None = None
    kv_shards: int | None = None
    efficiency: object = None  # the preset the plan was made with (layout choice)
    notes: list = field(default_factory=list)
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def disaggregated(self) -> bool:
        return self.prefill_gpus is not None

    def hw(self):
        if "hw" not in self._cache:
            from ...engine.numbers import HwNumbers

            self._cache["hw"] = HwNumbers.from_system(self.system, self.compute_dtype, None, self.kv_dtype)
        return self._cache["hw"]

    def numbers(self, what: str):
        """ModelNumbers of the decode step ('decode'), one draft layer ('draft') or a prefill chunk ('prefill')."""
        if what not in self._cache:
            w = self.workload
            if what == "decode":
                mn = self._held_kv(decode_numbers(self.model, mean_decode_context(w.isl, w.osl), w.mtp,
                                                  self.weights_dtype, self.kv_dtype, self.kv_shards), 1.0)
            elif what == "draft":
                mn = self._held_kv(draft_numbers(self.model, mean_decode_context(w.isl, w.osl), self.weights_dtype,
                                                 self.kv_dtype, self.kv_shards), self.model.n_layers)
            else:
                mn = prefill_numbers(self.model, isl=w.isl, chunk=self.chunk(), weights_dtype=self.weights_dtype,
                                     kv_dtype=self.kv_dtype, cached_share=w.cached_share, kv_shards=self.kv_shards)
            self._cache[what] = mn
        return self._cache[what]

    def _held_kv(self, mn, layers_per_numbers):
        """``mn`` holding each sequence's KV at :func:`held_context` (the KV a step reads stays at L̄)."""
        if not self.stack.reserves_whole_request:
            return mn
        ctx = held_context(self.stack, self.workload.isl, self.workload.osl)
        return replace(mn, kv_bytes_per_seq=float(self.model.kv_cache_bytes(ctx, self.kv_dtype)) / layers_per_numbers)

    def chunk(self) -> float:
        """One prompt's prefill chunk: min(ISL_new, the stack's token budget)."""
        return float(min(max(self.workload.isl_new, 1.0), self.stack.max_num_tokens or np.inf))


def held_context(stack, isl, osl):
    """Tokens of KV a sequence holds in memory: the mean context L̄ = ISL + OSL/2 (paged KV grows with the output),
    or the whole request ISL + OSL where the stack admits a request only with KV blocks for all of it
    (``Stack.reserves_whole_request``: TensorRT-LLM's capacity scheduler GUARANTEED_NO_EVICT, its default)."""
    return float(isl + osl) if stack.reserves_whole_request else float(mean_decode_context(isl, osl))


def decode_numbers(model, context, mtp=0, weights_dtype=None, kv_dtype="bf16", kv_shards=None):
    """ModelNumbers of a decode (verification) step: k + 1 tokens per sequence at context L̄."""
    from ...engine.numbers import ModelNumbers

    mn = ModelNumbers.from_model(model, float(context), pass_len=int(mtp) + 1, weights_dtype=weights_dtype,
                                 kv_dtype=kv_dtype)
    return replace(mn, kv_heads=int(kv_shards)) if kv_shards else mn


def draft_numbers(model, context, weights_dtype=None, kv_dtype="bf16", kv_shards=None):
    """ModelNumbers of one draft/MTP layer: one transformer layer (MoE if the model's are) + the LM head, 1 token."""
    from ...engine.numbers import ModelNumbers

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
    from ...engine.numbers import ModelNumbers

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


def _run(plan, mn, layout, eff, micro_batch, *, gpus=None, sched=True, adp_imbalance=None):
    """One step of ``layout`` on ``mn`` (engine/layout.evaluate → engine/step.compose)."""
    from ...engine.layout import evaluate as layout_evaluate

    if not sched:
        eff = replace(eff, step_overhead_s=0.0)
    else:  # the stack's own host time (per step + per sequence) on top of the chip family's host time
        from ...engine.efficiency import host_step_s

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


def _waves(p, eff, mn_d, b, ranks, t_dec, t_request) -> dict:
    """The wave schedule of an aggregated plan: a prefill pass of c_r prompt tokens per rank (an eager step)."""
    from ...engine.efficiency import stack_eager_s

    w, st = p.workload, p.stack
    isl_new = w.isl_new
    c_rank = np.minimum(np.maximum(b / ranks, 1.0) * isl_new, float(st.max_num_tokens or np.inf))
    mn_w = mixed_numbers(mn_d, p.model, extra_tokens_per_seq=ranks * c_rank / b, isl=w.isl,
                         chunk=np.minimum(isl_new, c_rank), cached_share=w.cached_share, kv_dtype=p.kv_dtype)
    res_w = _run(p, mn_w, p.layout, eff, b)
    tau_e = stack_eager_s(eff, st.name)
    t_pass = eager_step(res_w.tpot_s, step_kernels(res_w), tau_e)
    ttft, tpot, x_rep, t_wave = wave_schedule(b, ranks, isl_new, w.osl, c_rank, t_pass, t_dec, w.acceptance,
                                              t_request)
    return dict(ttft=ttft, tpot=tpot, x_rep=x_rep, t_wave=t_wave, t_pass=t_pass, chunk=c_rank, res_pass=res_w,
                kernels_pass=step_kernels(res_w), tau_eager=tau_e)


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


def step_kernels(res) -> object:
    """Kernels and collectives one step of an evaluated layout dispatches from the host when it runs eagerly (every
    PP stage's): each operator's ``eager_kernels`` where it has them (MLA blocks: ``step.MLA_EAGER_KERNEL_SCALE`` ×
    their graph kernels), else its kernels."""
    times = res.__dict__["times"]
    n = sum(np.asarray(op.kernels if op.eager_kernels is None else op.eager_kernels, dtype=float)
            + np.asarray(op.collectives, dtype=float) for op in times.ops)
    return n * np.asarray(res.__dict__["scale"], dtype=float)


def mixed_step_share(rank_share, ranks):
    """Share of steps that carry prefill when R attention-DP ranks step together: n = 1 − (1 − f)^R.

    Under attention DP every rank schedules its own requests (SGLang ``--enable-dp-attention``, vLLM
    data-parallel attention), but all ranks run each forward together: the MoE layers' all-to-all
    needs every rank (idle ranks run dummy batches). A rank prefills its waiting prompts in a share
    f of the steps; with prompts arriving independently at the ranks, a step is mixed when any rank
    prefills. With R = 1 (TP attention) n = f: waiting prompts are batched into one chunk.
    """
    f = np.clip(np.asarray(rank_share, dtype=float), 0.0, 1.0)
    return 1.0 - (1.0 - f) ** np.asarray(ranks, dtype=float)


def mixed_step_imbalance(seqs, ranks, decode_tokens_per_seq, chunk_per_rank, prefill_tokens=None):
    """Busiest attention-DP rank of a mixed step over the mean: (c + imb · b·(k+1)/R) / ((b·(k+1) + P) / R).

    The rank that prefills carries one whole chunk c of its own prompts (within the stack's per-rank
    token budget), so the prefill tokens are not subject to the round-robin imbalance of the decode
    sequences (:func:`engine.layout.attention_dp_imbalance`); only the decode tokens are. P is the
    step's prompt tokens over all ranks (default R·c: every rank prefills).
    """
    from ...engine.layout import attention_dp_imbalance

    b = np.asarray(seqs, dtype=float)
    dec = b * float(decode_tokens_per_seq)
    c = np.asarray(chunk_per_rank, dtype=float)
    P = ranks * c if prefill_tokens is None else np.asarray(prefill_tokens, dtype=float)
    busiest = c + attention_dp_imbalance(b, ranks) * dec / ranks
    return busiest / np.maximum((dec + P) / ranks, 1e-300)


def prefill_schedule(seqs, ranks, isl_new, osl, acceptance=1.0, mtp=0, budget=None) -> dict:
    """How a continuous-batching stack carries prefill beside b decoding sequences (arrays broadcast).

    p = b · ISL_new · A / OSL prompt tokens are needed per decode step. Each of the R attention ranks
    (R = 1 without attention DP) takes whole waiting prompts within the token budget left after its
    busiest decode tokens: c_r = min(left, max(ISL_new, p/R)), left = max(budget − imb·b·(k+1)/R,
    min(ISL_new, budget)). A rank prefills in a share f = min(1, p/(R·c_r)) of the steps; a step is
    mixed when any rank prefills (:func:`mixed_step_share`), carrying c = R·f·c_r/n prompt tokens
    (prefill-bound, f = 1: c = R·c_r). The prefill queue's utilisation is ρ = p / (R · left).
    Returns p, left, c_rank, c_tot, n_any, rho and the busiest rank's ``imbalance`` of the mixed step.
    """
    from ...engine.layout import attention_dp_imbalance

    b = np.asarray(seqs, dtype=float)
    R = np.asarray(ranks, dtype=float)
    isl_new = max(float(isl_new), 1.0)
    imb_dec = np.where(R > 1, attention_dp_imbalance(b, R), 1.0)
    p = b * isl_new * float(acceptance) / float(osl)
    bud = np.asarray(np.inf if budget is None else budget, dtype=float)
    left = np.maximum(bud - b * (mtp + 1) / R * imb_dec, np.minimum(isl_new, bud))
    c_rank = np.minimum(left, np.maximum(isl_new, p / R))  # whole waiting prompts, within the budget
    f = np.minimum(1.0, p / R / c_rank)  # share of steps in which one rank prefills
    n_any = mixed_step_share(f, R)  # share of steps in which any rank does (the ranks step together)
    c_tot = np.where(f < 1.0, R * f * c_rank / np.maximum(n_any, 1e-300), R * c_rank)
    imb = mixed_step_imbalance(b, R, mtp + 1, c_rank, c_tot)
    return dict(p=p, left=left, c_rank=c_rank, c_tot=c_tot, n_any=n_any, rho=p / (R * left),
                imbalance=np.where(R > 1, imb, 1.0), imb_decode=imb_dec, f=f)


def steady_state(seqs, ranks, isl_new, osl, t_decode, mixed_step, *, acceptance=1.0, mtp=0, budget=None,
                 t_request=0.0, arrivals="steady", queued=None) -> dict:
    """The steady state of one aggregated decode stream of b sequences: the one place ``serve``, ``plan``,
    ``compare`` and the web app get TPOT, output rate and TTFT from (arrays broadcast).

    1. schedule: :func:`prefill_schedule` (prompt tokens per step p, chunk per rank c_r, total chunk c, ρ);
       under Poisson arrivals :func:`batch_arrivals` re-batches the waiting prompts;
    2. t_mixed = ``mixed_step(schedule)`` (the caller's step model; returns (t_mixed, extra) — ``extra`` is
       passed back as ``mixed_extra``);
    3. :func:`time_sliced_schedule` → t̄, TPOT, X (per stream), prefill-bound mask;
    4. TTFT = ⌈ISL_new / c_r⌉ · t_mixed + :func:`prefill_wait` (t̄, t_prefill, ρ) + t_request, and where the
       prefill budget binds at least Little's law's queue: TTFT ≥ Q · OSL / X − (OSL − 1) · TPOT, Q = ``queued``
       (the stream's requests in the system, default b).

    ``t_request`` is the stack's host time per request (``engine.efficiency.stack_request_s``).
    """
    b = np.asarray(seqs, dtype=float)
    sch = prefill_schedule(b, ranks, isl_new, osl, acceptance, mtp, budget)
    t_mix, extra = mixed_step(sch)
    if arrivals == "poisson":  # independent arrivals: the prompts waiting after a mixed step ride one together
        sch = batch_arrivals(sch, b, ranks, mtp, isl_new, t_decode, t_mix)
        t_mix, extra = mixed_step(sch)
    t_bar, t_tpot, x_rep, bound = time_sliced_schedule(t_decode, t_mix, sch["p"], sch["c_tot"], b, acceptance,
                                                        isl_new, osl)
    t_pf = np.ceil(isl_new / sch["c_rank"]) * t_mix
    ttft = t_pf + prefill_wait(t_bar, t_pf, sch["rho"]) + t_request
    q = b if queued is None else np.asarray(queued, dtype=float)
    little = q * osl / x_rep - (osl - 1.0) * t_tpot
    ttft = np.where(bound, np.maximum(ttft, little), ttft)
    return dict(schedule=sch, t_mixed=t_mix, mixed_extra=extra, step_s=t_bar, tpot_s=t_tpot, out_tok_s=x_rep,
                prefill_bound=bound, ttft_s=ttft, n_mixed=mixed_steps_per_decode(sch["p"], sch["c_tot"]))


def disaggregated_ttft(t_prefill, t_transfer, t_pass, utilisation, t_request=0.0):
    """TTFT of a disaggregated deployment: t_prefill + KV transfer + ρ/(2(1−ρ)) · t_pass (:func:`prefill_wait`
    with no decode step to wait for) + t_request (the stack's host time per request)."""
    return t_prefill + t_transfer + prefill_wait(0.0 * np.asarray(t_prefill, dtype=float), t_pass,
                                                 utilisation) + t_request


#: Requests a closed-loop benchmark client sends per unit of concurrency: InferenceMAX's benchmark_serving.py runs
#: ``--num-prompts 10 × conc --max-concurrency conc`` (reference/inferencemax/README.md, "How the benchmark drives the
#: server"). A fact of that client, not a fitted constant.
CLOSED_LOOP_PROMPTS_PER_CLIENT = 10


def first_wave_share(n_requests, concurrency):
    """Share of a closed-loop benchmark's requests in its first wave: w = min(C / N, 1).

    The client (InferenceMAX's vLLM-derived ``benchmark_serving.py``: ``--max-concurrency C``, ``--num-prompts N``,
    request rate unlimited; reference/inferencemax/README.md, "How the benchmark drives the server") starts its
    first C requests together, which wait for one another's prefills; each later request starts when one finishes,
    so the rest, N − C, see the steady closed loop. With N = 10 · C, w = 1/10.
    """
    c = np.asarray(concurrency, dtype=float)
    return np.minimum(c / np.maximum(np.asarray(n_requests, dtype=float), 1e-300), 1.0)


def closed_loop_ttft(ttft_wave, ttft_steady, share):
    """Mean TTFT over a closed-loop benchmark's N requests: TTFT = w · TTFT_wave + (1 − w) · TTFT_steady.

    w = :func:`first_wave_share` (C / N); TTFT_wave is the first wave's mean (its C prompts queued against the
    prefill budget: :func:`wave_schedule`, or :func:`disaggregated_wave_ttft` on a prefill pool), TTFT_steady the
    steady state's (:func:`steady_state`, :func:`disaggregated_ttft`); both include the stack's per-request time.
    TPOT and throughput stay the steady state's: the first wave is one request period in ten.
    """
    w = np.asarray(share, dtype=float)
    return w * np.asarray(ttft_wave, dtype=float) + (1.0 - w) * np.asarray(ttft_steady, dtype=float)


def disaggregated_wave_ttft(t_prefill, t_transfer, isl_new, prefill_tok_s, concurrency, t_request=0.0):
    """Mean TTFT of C prompts that reach a disaggregated prefill pool together (a closed-loop client's first wave):
    TTFT = max(t_prefill, (C + 1)/2 · ISL_new / X_P) + t_KV + t_request.

    The pool clears prompt tokens at X_P (:func:`prefill_pool_rate`), so the k-th prompt is done after
    k · ISL_new / X_P, and never before its own prefill t_prefill; the mean over k = 1 … C is (C + 1)/2 of one
    prompt's share of the pool (C = 4: t_p · (1 + 2 + 3 + 4)/4).
    """
    c = np.asarray(concurrency, dtype=float)
    queued = 0.5 * (c + 1.0) * float(max(isl_new, 0.0)) / np.asarray(prefill_tok_s, dtype=float)
    return np.maximum(np.asarray(t_prefill, dtype=float), queued) + t_transfer + np.asarray(t_request, dtype=float)


def choose_layout(mn, system, eff, gpus, concurrency, *, hw=None, constraints=None, max_pp=8, sched_overlap=False,
                  top=1, usable_fraction=USABLE_MEMORY_FRACTION):
    """Best valid layout of ``gpus`` GPUs for this step: the lowest step time that fits memory.

    Enumerates TP (powers of two and multiples of the domain), EP dividing TP, attention DP over every
    group count R dividing TP (SGLang ``--tp T --dp R --enable-dp-attention``; R = T: every GPU its own
    sequences) and PP ≤ ``max_pp`` (one vectorized call of the step model); keeps only layouts that satisfy
    the given flags (``constraints``: any of tp, ep, pp, attention_dp, attention_dp_size) and use every GPU;
    with C fixed, the shortest step is both the highest throughput and the lowest TPOT. ``top`` > 1 returns
    the ``top`` best (a list, best first) for a caller that scores them further (:func:`plan` scores the
    full time-sliced step, prefill included), and beside them the ``top`` best with 1 < R < TP: a layout
    that was a finalist before partial attention DP was enumerated stays one.
    """
    from ...engine.deployment import with_attention_groups
    from ...engine.layout import attention_ranks, evaluate as layout_evaluate
    from ...engine.numbers import HwNumbers
    from ...engine.search import layout_grid

    hw = hw or HwNumbers.from_system(system, "bf16")
    g = layout_grid(mn, int(gpus), int(system.scaleup_size), micro_batches=[1.0], max_pp=max_pp,
                    uneven_experts=False)
    tp, ep, pp, adp = g["tp"], g["ep"], g["pp"], g["attention_dp"]
    ok = (gpus % (tp * pp)) == 0
    size = (constraints or {}).get("attention_dp_size")
    if not mn.is_moe and size is None:
        ok &= ~adp  # attention DP replicates a dense model's FFN too: never better than DP replicas
    for k, v in (constraints or {}).items():
        if v is None:
            continue
        if k == "attention_dp_size":  # R groups of TP/R GPUs: R must divide TP
            ok &= adp & (tp % int(v) == 0)
        else:
            ok &= (g[k] == v) if k != "attention_dp" else (adp == bool(v))
    ep_given = (constraints or {}).get("ep")
    if not ok.any() and ep_given and mn.is_moe and mn.n_experts % int(ep_given):
        from ...engine.deployment import ep_way_out

        raise InputError("ep", f"{mn.n_experts} experts do not divide over ep={ep_given} GPUs "
                         f"({mn.n_experts / ep_given:.3g} each)", ep_way_out(mn.n_experts, int(ep_given)))
    if not ok.any():
        raise InputError("tp", f"no layout of {gpus} × {system.chip.name} satisfies "
                         + ", ".join(f"{k}={v}" for k, v in (constraints or {}).items() if v is not None),
                         "flags whose degrees divide the GPUs (TP·PP | GPUs, EP | TP, EP ≤ experts)")
    tp, ep, pp, adp = tp[ok], ep[ok], pp[ok], adp[ok]
    if size is None:  # attention DP over every group count R that divides TP (R = TP: every chip its own sequences)
        tp, ep, pp, adp, ranks = with_attention_groups(tp, ep, pp, adp, mn.tp_heads)
    else:
        ranks = attention_ranks(tp, adp, size)
    dp = np.floor(gpus / (tp * pp))
    b = np.maximum(np.asarray(concurrency, dtype=float) / (dp * pp), 1.0)
    res = layout_evaluate(mn, hw, tp=tp, ep=ep, pp=pp, attention_dp=adp, adp_ranks=ranks, micro_batch=b, chips=gpus,
                          usable_fraction=usable_fraction, efficiency=eff, sched_overlap=sched_overlap)
    fits = np.asarray(res.fits)
    if not fits.any():
        if float(mn.weight_bytes) > gpus * float(system.chip.hbm_bytes):  # the weights alone exceed the whole HBM
            # not one sequence: say what the weights need and what would hold them (issue 35)
            from ..lecture.context import does_not_fit, spec_or_none

            raise InputError("gpus", *does_not_fit(spec_or_none(mn.name), system, gpus, mn.weight_bytes,
                                                   usable_fraction))
        # issue 34: weights that fit the GPUs' whole HBM but not the stack's usable share ran in practice
        # (DeepSeek-R1 FP8 on 4 × B200 / GB200): rank every layout; the evaluation says fits = false and by how much
        fits = np.ones_like(fits, dtype=bool)
    score = np.where(fits, np.asarray(res.tpot_s, dtype=float), np.inf) + 1e-9 * tp * pp  # ties: smaller group
    ranked = [int(i) for i in np.argsort(score, kind="stable") if np.isfinite(score[i])]
    # the `top` best of plain TP and full attention DP stay finalists; the `top` best with 1 < R < TP join them
    partial = adp & (ranks < tp)
    n = max(int(top), 1)
    order = sorted([i for i in ranked if not partial[i]][:n] + [i for i in ranked if partial[i]][:n], key=ranked.index)
    order = order[:1] if top == 1 else order
    out = [dict(tp=int(tp[i]), ep=int(ep[i]), pp=int(pp[i]), attention_dp=bool(adp[i]),
                attention_dp_size=0 if not adp[i] or int(ranks[i]) == int(tp[i]) else int(ranks[i])) for i in order]
    return out[0] if top == 1 else out


#: Layouts the decode-step ranking keeps for the full serving evaluation (prefill time-sliced in).
LAYOUT_FINALISTS = 8


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
        out.update(framework=self.framework, stack_version=self.stack_version, efficiency_label=self.efficiency_label)
        out.update(model=self.model, hardware=self.hardware, mode=self.mode, gpus=self.gpus, isl=self.isl,
                   osl=self.osl, layout=self.layout, layout_chosen=self.layout_chosen, efficiency=self.efficiency,
                   weights_dtype=self.weights_dtype, kv_dtype=self.kv_dtype, mtp=self.mtp,
                   acceptance=self.acceptance, cached_share=self.cached_share, arrivals=self.arrivals,
                   compute_dtype=self.compute_dtype, usd_per_gpu_hour=self.usd_per_gpu_hour, notes=list(self.notes))
        for k in ("mem_short_gb", "t_compute_ms", "t_weights_ms", "t_kv_ms", "t_comm_ms", "t_latency_ms", "overhead_ms",
                  "prefill_tokens_per_step", "decode_step_ms", "mixed_step_ms"):
            if k in self.values:
                a = np.asarray(self.values[k])
                out[k] = a.item() if a.ndim == 0 else a.tolist()
        if self.prefill is not None:
            out["prefill"] = self.prefill
        return out

    def explain(self) -> Derivation:
        if self._derivation is None:
            self._derivation = _derive(self)
        return self._derivation

    def ops(self, index=0) -> list[dict]:
        """Per-operator breakdown of the decode step (``--ops``)."""
        return ops(self, index=index)

    def nearest_measured(self, k: int = 2) -> dict | None:
        """The ``k`` shipped measurements nearest to this configuration, each with rackmath's prediction of it out
        of sample (``analyses/fitting/evidence.py``); None for a sweep over concurrency."""
        from ...specs.hardware import load_hardware
        from ..fitting.evidence import nearest

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
# Entry point
# --------------------------------------------------------------------------------------


def _check_layout_flags(tp, ep, pp, redundant_experts, usd_per_gpu_hour):
    """Given layout degrees are whole numbers ≥ 1 (0 is not 'default'); a price is finite and not absurd."""
    from ...bounds import check_int

    def degree(v):  # numpy scalars as Python numbers; check_int takes ints (any size) and whole floats
        return v.item() if isinstance(v, np.generic) else v

    for name, v in (("tp", tp), ("ep", ep), ("pp", pp)):
        if v is not None:
            check_int(degree(v), name, 1, 10**6, "a whole number from 1 to 10⁶: a parallel degree ≥ 1")
    check_int(degree(redundant_experts), "redundant_experts", 0, 10**6, "a whole number from 0 to 10⁶")
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



def plan(model, hardware, *, gpus=None, isl, osl, concurrency, tp=None, ep=None, pp=None, attention_dp=None,
         attention_dp_size=None, weights_dtype=None, kv_dtype=None, mtp=0, acceptance=None, prefill_gpus=None,
         decode_gpus=None, cached_share=0.0, ideal=False, efficiency=None, usd_per_gpu_hour=None, redundant_experts=0,
         uneven_experts=False, kv_shards=None, framework=None, max_num_tokens=None, arrivals="steady",
         eager=False, weight_layout="1d", compute_dtype=None, prefill_tp=None, prefill_ep=None,
         prefill_attention_dp=None) -> Plan:
    """Validate the inputs and fix what does not depend on the efficiency: workload, layout(s), stack, dtypes.

    Layout flags mean what they say: with ``tp`` given the layout is built from the flags; with
    only some of ep / pp / attention_dp given, the best layout that satisfies them is chosen
    (``--ep 72 --attention-dp`` on 72 GPUs is attention DP over 72 ranks with EP 72). ``attention_dp_size`` R
    (SGLang's ``--dp R --enable-dp-attention``) implies attention DP over R groups of TP/R GPUs.
    ``weight_layout`` "2d" or "gathered" (Pope et al. 2022 §3.2; ``engine.layout.WEIGHT_LAYOUTS``) holds a dense
    model's weights that way over the ``tp`` GPUs given (aggregated, without attention DP; the search keeps 1D).
    ``prefill_tp`` / ``prefill_ep`` / ``prefill_attention_dp``: the disaggregated prefill pool's layout as launched
    (default: the pool's fastest layout); ``tp 1, ep N, attention DP`` is SGLang's DP-attention + EP over N ranks.
    """
    from ...engine.efficiency import resolve
    from ...engine.deployment import Deployment, check_attention_dp_size
    from ...engine.layout import check_weight_layout
    from ...specs.hardware import load_hardware
    from ...specs.models import load_model
    from ... import units

    m = load_model(model)
    system = load_hardware(hardware)
    chip = system.chip
    dep_note = None
    if attention_dp and tp is not None and ep is not None and int(tp) == 1 and int(ep) > 1 \
            and attention_dp_size is None:  # h34 (issue 34): SGLang's DP-attention + EP, "--tp 1 --ep N --dp-attention"
        tp = int(ep)  # attention data-parallel over the N EP ranks = conventions.md's --tp N --ep N --attention-dp
        dep_note = (f"tp 1, ep {tp}, attention DP (SGLang's spelling of DP-attention + EP) is read as attention "
                    f"data-parallel over the {tp} EP ranks: TP{tp} EP{tp} attention-DP (conventions.md)")
    _check_layout_flags(tp, ep, pp, redundant_experts, usd_per_gpu_hour)
    for name, v in (("prefill_gpus", prefill_gpus), ("decode_gpus", decode_gpus)):
        if v is not None:
            check_positive(v, name, "a positive number of GPUs", maximum=1e6)
    if gpus is None:
        gpus = (prefill_gpus + decode_gpus) if prefill_gpus is not None and decode_gpus is not None \
            else int(system.scaleup_size)
    isl, osl = float(isl), float(osl)
    a = _check_inputs(gpus, isl, osl, concurrency, mtp, acceptance, cached_share, prefill_gpus, decode_gpus)
    gpus, mtp = int(gpus), int(mtp)
    stack = load_stack(framework)
    if max_num_tokens is not None:
        check_positive(max_num_tokens, "max_num_tokens", "a token budget per step", maximum=1e7)
        stack = replace(stack, max_num_tokens=int(max_num_tokens))
    if not isinstance(eager, (bool, np.bool_)):
        raise InputError("eager", f"{str(eager)[:80]!r}", "true or false (decode steps without CUDA graphs)")
    if eager:
        stack = replace(stack, cuda_graphs=False)
    spec_serial = speculating(stack, mtp) is not stack
    stack = speculating(stack, mtp)
    wdt = units.normalize_dtype(weights_dtype, "weights_dtype") if weights_dtype else None
    kvdt = units.normalize_dtype(kv_dtype or getattr(m, "kv_dtype", None) or "bf16", "kv_dtype")
    cdt = chip.gemm_dtype(wdt or m.native_dtype, compute_dtype)
    price = chip.usd_per_hour if usd_per_gpu_hour is None else float(usd_per_gpu_hour)
    eff = resolve(chip.name, efficiency, ideal)
    if arrivals == "waves" and prefill_gpus is not None:
        raise InputError("arrivals", "waves with separate prefill and decode pools", "steady (aggregated "
                                                                                     "deployments only for waves)")
    if arrivals not in ARRIVALS:
        raise InputError("arrivals", f"{str(arrivals)[:80]!r}", "steady (requests spread out evenly), poisson "
                                                      "(independent arrivals), waves (lock-step, a closed-loop "
                                                      "client at fixed lengths) or closed-loop (a benchmark client: "
                                                      "the first C together, then C in flight)")
    wl = Workload(isl, osl, np.asarray(concurrency, dtype=float), mtp, a, float(cached_share), str(arrivals))
    disagg = prefill_gpus is not None
    n_dec = int(decode_gpus) if disagg else gpus
    p = Plan(m, system, wl, Layout(n_dec, 1), stack, wdt, kvdt, cdt, gpus, price,
             prefill_gpus=int(prefill_gpus) if disagg else None, kv_shards=kv_shards, efficiency=eff)
    if dep_note:
        p.notes.append(dep_note)
    if spec_serial:
        p.notes.append(f"speculative decoding turns {stack.name}'s overlap scheduler off: its host time adds to "
                       "every step")
    if stack.reserves_whole_request:
        p.notes.append(f"memory holds each sequence's KV for the whole request, ISL + OSL = {isl + osl:,.0f} tokens: "
                       f"{stack.name} admits a request only with KV blocks for all of it (GUARANTEED_NO_EVICT)")
    rx = int(redundant_experts or 0)
    if not m.n_experts and (rx or uneven_experts):  # before the layout choice, which would blame the ep it picks
        raise InputError("redundant_experts" if rx else "uneven_experts", f"{m.name} is dense (no experts to place)",
                         "expert placement flags only for a mixture-of-experts model")
    adp_size = 0  # attention DP over R groups (0: over every TP GPU)
    if attention_dp_size is not None:  # R must divide TP (the TP given, or the TP chosen below)
        adp_size = check_attention_dp_size(attention_dp_size, int(tp) if tp is not None else attention_dp_size)
        if attention_dp_size > n_dec:
            raise InputError("attention_dp_size", f"{attention_dp_size:g} groups on {n_dec} GPUs",
                             f"a divisor of tp, at most the {n_dec} GPUs")
        attention_dp = True
    wlay = str(check_weight_layout(weight_layout, m.name, bool(m.n_experts)))
    if wlay != "1d":
        why = ("without --tp (the layout search keeps 1D)" if tp is None else "with attention DP" if attention_dp
               else "with a disaggregated deployment" if disagg else "")
        if why:
            raise InputError("weight_layout", f"{wlay} {why}", "1d, or 2d / gathered with --tp for a dense model, "
                             "aggregated, without attention DP")
    if tp is not None:
        if not attention_dp:  # TP must split the heads (issue 35); attention DP keeps them whole
            from ...engine.deployment import check_attention_tp

            check_attention_tp(p.numbers("decode"), int(tp), n_dec)
        lay = dict(tp=int(tp), ep=int(ep or 1), pp=int(pp or 1), attention_dp=bool(attention_dp),
                   attention_dp_size=adp_size)
        chosen = False
    else:
        cons = dict(ep=ep, pp=pp, attention_dp=True if attention_dp else None, attention_dp_size=attention_dp_size)
        if rx == 0 and not uneven_experts:
            cands = choose_layout(p.numbers("decode"), system, eff, n_dec, float(np.max(wl.concurrency)), hw=p.hw(),
                                  constraints=cons, sched_overlap=stack.overlap_scheduler, top=LAYOUT_FINALISTS,
                                  usable_fraction=stack.mem_fraction)
            lay = cands[0] if disagg or len(cands) == 1 else _best_serving_layout(p, cands, n_dec, eff)
        else:
            lay = _choose_with_experts(p, eff, n_dec, cons, rx, uneven_experts)
        chosen = not all(v is not None for v in (ep, pp, attention_dp))
    Deployment.build(system, n_dec, **lay, redundant_experts=rx, uneven_experts=uneven_experts, model=m)
    p.layout = Layout(n_dec, **lay, redundant_experts=rx, uneven_experts=bool(uneven_experts), chosen=chosen,
                      weight_layout=wlay)
    if chosen:
        p.notes.append(f"layout chosen: {p.layout.label()} (the shortest step that fits; give --tp/--ep/--pp/"
                       "--attention-dp/--attention-dp-size to fix it)")
    if disagg and prefill_tp is not None:  # h34 (issue 34): the prefill pool's layout as launched
        _check_layout_flags(prefill_tp, prefill_ep, None, 0, None)
        ptp, pep, padp = int(prefill_tp), int(prefill_ep or 1), bool(prefill_attention_dp)
        if padp and ptp == 1 and pep > 1:  # SGLang's DP-attention + EP spelling (as for the decode pool)
            ptp = pep
        lay_p = dict(tp=ptp, ep=pep, pp=1, attention_dp=padp, attention_dp_size=0)
        Deployment.build(system, int(prefill_gpus), **lay_p, model=m)
        p.prefill_layout = Layout(int(prefill_gpus), **lay_p, chosen=False)
    elif prefill_tp is not None or prefill_ep is not None or prefill_attention_dp is not None:
        raise InputError("prefill_tp", "a prefill layout without --prefill-gpus/--decode-gpus",
                         "prefill_tp/prefill_ep/prefill_attention_dp with a disaggregated deployment")
    elif disagg:
        cands_p = choose_layout(p.numbers("prefill"), system, eff, int(prefill_gpus), 1.0, hw=p.hw(),
                                sched_overlap=stack.overlap_scheduler, top=10**6, usable_fraction=stack.mem_fraction)
        lay_p = max(cands_p, key=lambda lay: float(np.max(prefill_pool_rate(
            p, Layout(int(prefill_gpus), **lay), eff)[0])))  # stable: the first of equals (the shortest pass)
        Deployment.build(system, int(prefill_gpus), **lay_p, model=m)
        p.prefill_layout = Layout(int(prefill_gpus), **lay_p, chosen=True)
    return p


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
    scheduler per rank) and runs eagerly (:func:`eager_step`). The prefill pool's layout is the valid layout with
    the highest X_P (ties: the shortest one-prompt pass): the pool exists to keep the decode pool fed. Returns
    (X_P, t_pass).
    """
    from ...engine.efficiency import stack_eager_s

    chunk = p.chunk()
    seqs = max(1.0, np.floor((p.stack.max_num_tokens or MAX_NUM_TOKENS) / chunk)) * lp.attention_ranks
    res_p = _run(p, p.numbers("prefill"), lp, eff, seqs)
    t_pass = eager_step(res_p.tpot_s, step_kernels(res_p), stack_eager_s(eff, p.stack.name))
    return lp.dp * seqs * chunk / t_pass, t_pass


def _best_serving_layout(p, cands, n_dec, eff):
    """Of the decode-step finalists, the layout with the least time per output token per sequence at the highest
    concurrency asked, prefill time-sliced in: max(TPOT, C / X_out) (= TPOT unless the prefill budget binds; at a
    fixed C the least is also the highest output rate). An attention-DP layout's cheaper decode step may lose to its
    costlier mixed steps."""
    C = float(np.max(p.workload.concurrency))
    best, best_x = cands[0], np.inf
    from ...engine.deployment import Deployment

    for lay in cands:
        try:
            Deployment.build(p.system, n_dec, **lay, model=p.model)
        except InputError:
            continue
        q = replace(p, workload=replace(p.workload, concurrency=np.asarray(C)), layout=Layout(n_dec, **lay),
                    notes=[], _cache=p._cache)
        r = evaluate(q, eff)
        v = {k: float(np.asarray(r.values[k]).reshape(-1)[0]) for k in ("tpot_ms", "output_tok_s")}
        x = max(v["tpot_ms"] / 1e3, C / max(v["output_tok_s"], 1e-300))
        if x < best_x * (1 - 1e-9):
            best, best_x = lay, x
    return best


def _choose_with_experts(p, eff, n_dec, cons, rx, uneven):
    """Layout choice when redundant / uneven expert placement is asked for: TP = EP = the GPUs given the flags."""
    tp = int(cons.get("ep") or n_dec)
    return dict(tp=tp, ep=int(cons.get("ep") or tp), pp=int(cons.get("pp") or 1),
                attention_dp=bool(cons.get("attention_dp", True) if cons.get("attention_dp") is not None else True))


def evaluate(p: Plan, efficiency=None) -> "ServeResult":
    """Serving numbers of a plan under an efficiency preset (its numeric fields may be arrays of K candidates,
    broadcasting against the concurrency): time-sliced prefill and decode, MoE realities, speculation."""
    from ...engine.efficiency import for_stack, load_efficiency, stack_eager_s, stack_request_s

    if isinstance(efficiency, str):
        from ...engine.efficiency import resolve

        efficiency = resolve(p.system.chip.name, efficiency)
    eff = for_stack(load_efficiency(efficiency if efficiency is not None else p.efficiency), p.stack)  # issue 34
    t_req = stack_request_s(eff, p.stack.name)  # host time per request before its first token (this stack's)
    m, w, lay, st = p.model, p.workload, p.layout, p.stack
    C, A, k = w.concurrency, w.acceptance, w.mtp
    dp, ppd = lay.dp, lay.pp
    b = np.maximum(C / (dp * ppd), 1.0)
    notes = list(p.notes) + ([eff.note] if getattr(eff, "note", "") else [])  # e.g. --efficiency measured, no curves
    if np.any(b > st.max_batch_size):
        notes.append(f"more than {st.max_batch_size} sequences per replica ({st.name} max batch): the rest wait")
        b = np.minimum(b, st.max_batch_size)
    mn_d = p.numbers("decode")
    res_d = _run(p, mn_d, lay, eff, b)
    t_verify, t_draft = res_d.tpot_s, 0.0
    if k:
        # each draft pass is a forward of its own: where the host cannot hide behind the GPU (a serial stack, or
        # SGLang, whose overlap scheduler speculation turns off) it prepares and launches each one, t_host per pass
        res_k = _run(p, p.numbers("draft"), replace(lay, pp=1), eff, b, sched=not st.overlap_scheduler)
        t_draft = res_k.tpot_s
    else:
        res_k = None
    if not st.cuda_graphs:  # --eager: the host dispatches every kernel of the decode step too
        tau_e = stack_eager_s(eff, st.name)
        t_verify = eager_step(t_verify, step_kernels(res_d), tau_e)
        t_draft = eager_step(t_draft, step_kernels(res_k), tau_e) if k else 0.0
    t_dec = speculative_step(t_verify, t_draft, k)
    fits = np.asarray(res_d.fits)
    if not np.all(fits):  # h34 (issue 34): say by how much, and predict anyway
        notes.append(_short_note(res_d, st))
    isl_new = w.isl_new
    chunk = p.chunk()
    n_chunks = float(prefill_chunks(isl_new, chunk))
    info = dict(t_decode=t_dec, t_verify=t_verify, t_draft=t_draft, b=b, t_decode_gpu=res_d.tpot_s, t_request=t_req,
                res_draft=res_k, t_draft_gpu=None if res_k is None else res_k.tpot_s)
    if p.disaggregated:
        t_bar, t_tpot = t_dec, tpot(t_dec, A)
        cap_out = output_tokens_per_s(C, t_dec, A)
        lp = p.prefill_layout
        mp = p.numbers("prefill")
        pf_tok_s, t_pass = prefill_pool_rate(p, lp, eff)
        tau_e = stack_eager_s(eff, st.name)
        x_out = disaggregated_output_rate(cap_out, pf_tok_s, w.isl, w.osl, w.cached_share)
        prefill_bound = x_out < cap_out
        res_1 = _run(p, mp, lp, eff, 1.0)
        t_pf = eager_step(res_1.tpot_s, step_kernels(res_1), tau_e) * n_chunks
        kv_bytes = float(np.asarray(m.kv_cache_bytes(w.isl, p.kv_dtype)))
        t_xfer = kv_transfer_time(kv_bytes, p.system.chip.scaleout_bw * lp.tp * eff.eta_comm)
        rho = x_out * isl_new / w.osl / pf_tok_s
        ttft = disaggregated_ttft(t_pf, t_xfer, t_pass, rho, t_req)
        if w.arrivals == "closed-loop":  # the first wave queues at the prefill pool (closed_loop_ttft)
            share = first_wave_share(CLOSED_LOOP_PROMPTS_PER_CLIENT * C, C)
            ttft_wave = disaggregated_wave_ttft(t_pf, t_xfer, isl_new, pf_tok_s, C, t_req)
            info.update(ttft_steady=ttft, ttft_wave=ttft_wave, wave_share=share)
            ttft = closed_loop_ttft(ttft_wave, ttft, share)
        info.update(rho=rho, t_pass=t_pass, prefill_one=res_1, n_chunks=n_chunks, tau_eager=tau_e)
        info.update(prefill=dict(gpus=lp.gpus, layout=dict(tp=lp.tp, ep=lp.ep, pp=lp.pp, attention_dp=lp.attention_dp,
                                                           dp=lp.dp, label=lp.label()),
                                 input_tok_s=pf_tok_s, input_tok_s_per_gpu=pf_tok_s / lp.gpus, prefill_s=t_pf,
                                 kv_transfer_s=t_xfer))
        if np.any(prefill_bound):
            notes.append("the prefill pool limits throughput: the decode pool idles part of the time")
        n_mix = np.zeros_like(np.asarray(t_dec))
        t_mix = t_dec
    else:
        ranks = lay.attention_ranks
        sch = prefill_schedule(b, ranks, isl_new, w.osl, A, k, st.max_num_tokens)
        tau_e = stack_eager_s(eff, st.name)

        def mixed_step(sch):
            mn_m = mixed_numbers(mn_d, m, extra_tokens_per_seq=sch["c_tot"] / b, isl=w.isl, chunk=sch["c_rank"],
                                 cached_share=w.cached_share, kv_dtype=p.kv_dtype)
            res_m = _run(p, mn_m, lay, eff, b, adp_imbalance=sch["imbalance"] if lay.attention_dp else None)
            n_eager = step_kernels(res_m)
            return speculative_step(eager_step(res_m.tpot_s, n_eager, tau_e), t_draft, k), (n_eager, res_m)

        ss = steady_state(b, ranks, isl_new, w.osl, t_dec, mixed_step, acceptance=A, mtp=k,
                          budget=st.max_num_tokens, t_request=t_req, arrivals=w.arrivals, queued=C / (dp * ppd))
        sch, t_mix, (n_eager, res_m) = ss["schedule"], ss["t_mixed"], ss["mixed_extra"]
        t_bar, t_tpot, prefill_bound, ttft = ss["step_s"], ss["tpot_s"], ss["prefill_bound"], ss["ttft_s"]
        x_out = ss["out_tok_s"] * dp * ppd
        n_mix, p_step = ss["n_mixed"], sch["p"]
        info.update(chunk=sch["c_rank"], chunk_total=sch["c_tot"], prefill_per_step=p_step, t_mixed=t_mix,
                    n_mixed=n_mix, rho=sch["rho"], budget_left=sch["left"], eager_kernels_mixed=n_eager,
                    schedule=sch, res_mixed=res_m, tau_eager=tau_e)
        if w.arrivals == "closed-loop":  # the first C start together (one wave), the rest see the steady loop
            wv = _waves(p, eff, mn_d, b, ranks, t_dec, t_req)
            share = first_wave_share(CLOSED_LOOP_PROMPTS_PER_CLIENT * C, C)
            info.update(wave=wv, ttft_steady=ttft, ttft_wave=wv["ttft"], wave_share=share)
            ttft = closed_loop_ttft(wv["ttft"], ttft, share)
            notes.append("closed-loop client: the first C requests start together and wait for one another's prefills "
                         f"(1 in {CLOSED_LOOP_PROMPTS_PER_CLIENT} of its requests); TPOT and throughput are the "
                         "steady state's")
        if w.arrivals == "waves":
            keep = waves_persist(st.prefill_first, b, ranks, isl_new, st.max_num_tokens)
            info.update(waves=keep)
            if np.any(keep):  # the wave's prefill pass is evaluated only where a wave persists
                wv = _waves(p, eff, mn_d, b, ranks, t_dec, t_req)
                ttft, t_tpot = np.where(keep, wv["ttft"], ttft), np.where(keep, wv["tpot"], t_tpot)
                x_out = np.where(keep, wv["x_rep"] * dp * ppd, x_out)
                t_bar, prefill_bound = np.where(keep, t_dec, t_bar), np.where(keep, False, prefill_bound)
                info.update(wave=wv)
            if np.all(keep):
                notes.append("arrivals in lock-step waves: each wave's prompts are prefilled before it decodes")
            elif np.any(keep):
                notes.append("clients start together: lock-step waves where a wave fits one prefill pass, the steady "
                             "schedule where it spreads out")
            else:
                notes.append("clients start together, but this stack mixes prefill into decode steps and a wave takes "
                             "several passes: the waves spread out (steady schedule)")
        if np.any(prefill_bound):
            notes.append(f"the prefill budget ({st.max_num_tokens} tokens per step) binds: prompts wait")
    x_tot = total_tokens_per_s(x_out, w.isl, w.osl)
    bound = np.where(prefill_bound, "prefill", np.asarray(res_d.bound).astype(object))
    ms = 1e3
    gp = p.gpus
    values = dict(
        output_tok_s=x_out, total_tok_s=x_tot, output_tok_s_per_gpu=x_out / gp, total_tok_s_per_gpu=x_tot / gp,
        tpot_ms=t_tpot * ms, ttft_ms=np.asarray(ttft) * ms, step_ms=np.asarray(t_bar) * ms, bottleneck=bound,
        tokens_per_s_per_user=tokens_per_s_per_user(t_tpot),
        usd_per_mtok_output=usd_per_mtok(gp, p.usd_per_gpu_hour, x_out),
        usd_per_mtok_total=usd_per_mtok(gp, p.usd_per_gpu_hour, x_tot),
        concurrency=C, fits=fits, mem_per_gpu_gb=np.asarray(res_d.mem_per_chip) / 1e9,
        mem_short_gb=np.maximum(-np.asarray(res_d.headroom_bytes, dtype=float), 0.0) / 1e9,  # h34: GB short per GPU
        max_concurrency=np.asarray(res_d.max_concurrency),
        decode_step_ms=np.asarray(t_dec) * ms, mixed_step_ms=np.asarray(t_mix) * ms,
        t_compute_ms=np.asarray(res_d.t_compute_s) * ppd * ms, t_weights_ms=np.asarray(res_d.t_weights_s) * ppd * ms,
        t_kv_ms=np.asarray(res_d.t_kv_s) * ppd * ms, t_comm_ms=np.asarray(res_d.t_comm_s) * ppd * ms,
        t_latency_ms=np.asarray(res_d.t_latency_s) * ppd * ms, overhead_ms=np.asarray(res_d.t_sched_s) * ms,
        prefill_tokens_per_step=np.asarray(info.get("prefill_per_step", 0.0)) * dp,
    )
    if np.ndim(C) == 0 and np.ndim(np.asarray(eff.eta_compute)) == 0:
        values = {kk: (np.asarray(v).item() if np.asarray(v).size == 1 else v) for kk, v in values.items()}
    layout = dict(tp=lay.tp, ep=lay.ep, pp=lay.pp, attention_dp=lay.attention_dp,
                  attention_dp_size=lay.attention_ranks, dp=dp, gpus=lay.gpus, label=lay.label())
    out = ServeResult(model=m.name, hardware=p.system.name, mode="disaggregated" if p.disaggregated else "aggregated",
                      gpus=gp, isl=w.isl, osl=w.osl, layout=layout, layout_chosen=lay.chosen, efficiency=eff.name,
                      weights_dtype=p.weights_dtype or m.native_dtype, kv_dtype=p.kv_dtype, mtp=k, acceptance=A,
                      cached_share=w.cached_share, usd_per_gpu_hour=p.usd_per_gpu_hour, values=values,
                      prefill=info.get("prefill"), notes=notes, arrivals=w.arrivals, compute_dtype=p.compute_dtype)
    out.framework = st.name
    out.stack_version = st.version_label  # h34 (issue 34): the stack version assumed (sglang@0.5.7, or the name)
    out.efficiency_label = eff.label()
    out._plan, out._eff, out._res, out._info = p, eff, res_d, info
    return out


def serve(model, hardware, *, gpus=None, isl, osl, concurrency, tp=None, ep=None, pp=None, attention_dp=None,
          attention_dp_size=None, weights_dtype=None, kv_dtype=None, mtp=0, acceptance=None, prefill_gpus=None,
          decode_gpus=None, cached_share=0.0, ideal=False, efficiency=None, usd_per_gpu_hour=None,
          redundant_experts=0, uneven_experts=False, kv_shards=None, framework=None, max_num_tokens=None,
          arrivals="steady", eager=False, weight_layout="1d", compute_dtype=None, prefill_tp=None, prefill_ep=None,
          prefill_attention_dp=None) -> "ServeResult":
    """Steady-state serving of ``model`` on ``gpus`` GPUs of ``hardware``: ``evaluate(plan(...))``.

    ``concurrency`` (sequences in flight across the deployment) may be a numpy array; the rest are
    single values. Layout flags follow conventions.md (given flags are honoured, the rest chosen).
    ``efficiency`` None/'auto' picks the calibrated preset for the chip (a cross-family preset, named,
    for chips without their own), ``ideal=True`` the lecture's roofline; ``framework`` a stack preset;
    ``arrivals`` "steady" (default: spread out evenly), "poisson" (independent arrivals, :func:`batch_arrivals`) or
    "waves" (:func:`wave_schedule`: a closed-loop client at fixed lengths);
    ``attention_dp_size`` R: attention data-parallel over R groups of TP/R GPUs (SGLang ``--tp T --dp R
    --enable-dp-attention``; implies ``attention_dp``; default: every GPU its own sequences);
    ``eager`` True: the stack runs without CUDA graphs (vLLM ``--enforce-eager``, SGLang ``--disable-cuda-graph``,
    the early-2025 PyTorch backend of TensorRT-LLM unless ``use_cuda_graph`` was set), so decode steps are eager
    too (:func:`eager_step`); ``weight_layout`` "2d" / "gathered": Pope et al.'s other ways to hold a dense model's
    weights over the ``tp`` GPUs given (:func:`plan`); ``compute_dtype`` the dtype the weight GEMMs multiply in where
    the stack quantises the activations of a weight-only format (default ``Chip.gemm_dtype``: W8A8 FP8 at the
    FP8 rate, AWQ INT4 at the BF16 rate, MXFP4 at the FP8 rate on chips with FP4 tensor cores and BF16 elsewhere).
    """
    p = plan(model, hardware, gpus=gpus, isl=isl, osl=osl, concurrency=concurrency, tp=tp, ep=ep, pp=pp,
             attention_dp=attention_dp, attention_dp_size=attention_dp_size, weights_dtype=weights_dtype,
             kv_dtype=kv_dtype, mtp=mtp, acceptance=acceptance, prefill_gpus=prefill_gpus, decode_gpus=decode_gpus,
             cached_share=cached_share, ideal=ideal, efficiency=efficiency, usd_per_gpu_hour=usd_per_gpu_hour,
             redundant_experts=redundant_experts, uneven_experts=uneven_experts, kv_shards=kv_shards,
             framework=framework, max_num_tokens=max_num_tokens, arrivals=arrivals, eager=eager,
             weight_layout=weight_layout, compute_dtype=compute_dtype, prefill_tp=prefill_tp, prefill_ep=prefill_ep,
             prefill_attention_dp=prefill_attention_dp)
    return evaluate(p)


def _f(x, i=0):
    a = np.asarray(x, dtype=float).ravel()
    return float(a[i] if a.size > i else a[0])


def _derive(r: "ServeResult") -> Derivation:
    """The blackboard derivation of the first configuration; every step carries the expression it computes."""
    from ...engine.efficiency import stack_eager_s
    from ...engine.step import MLA_EAGER_KERNEL_SCALE

    p, eff, res, info = r._plan, r._eff, r._res, r._info
    w, lay = p.workload, p.layout
    v = {kk: _f(x) for kk, x in r.values.items() if kk not in ("fits", "bottleneck")}
    gemm = "" if p.compute_dtype == p.system.chip.compute_dtype(r.weights_dtype) else f", GEMMs in {p.compute_dtype}"
    d = Derivation(f"Serving {r.model} on {r.gpus} × {p.system.chip.name} ({r.mode}, layout {lay.label()}, "
                   f"stack {p.stack.name}, weights {r.weights_dtype}{gemm}, KV {r.kv_dtype}; {eff.label()})")
    C, A, k = v["concurrency"], w.acceptance, w.mtp
    d.add("L̄", "ISL + OSL/2", f"{w.isl:g} + {w.osl:g}/2", float(mean_decode_context(w.isl, w.osl)), "tokens",
          "mean context of an in-flight sequence", expr=f"{w.isl!r} + {w.osl!r}/2")
    d.add("C", "sequences in flight", "", C, "", key="C")
    b = d.add("b", "min(max(C / (dp · PP), 1), max batch)", "", _f(info["b"]), "",
              "sequences per micro-batch per replica",
              expr=f"min(max(C / ({lay.dp} * {lay.pp}), 1), {p.stack.max_batch_size})", key="b")
    scale, mla = _f(eff.mla_kernel_scale), p.numbers("decode").mla
    mla_note = f"; the MLA blocks' kernels × {scale:g} ({eff.name}'s mla_kernel_scale)" if mla and scale != 1.0 else ""
    eager_note = (f" (an MLA block dispatches {MLA_EAGER_KERNEL_SCALE:g} × its graph kernels: FP8 input "
                  "quantisations, a prompt's un-absorbed path; engine/step.py)" if mla else "")
    from ...engine.step import step_working

    tau_e = _f(stack_eager_s(eff, p.stack.name))
    d.add("t_verify" if p.stack.cuda_graphs else "t_gpu",
          "Σ_ops [n_kernels·τ_k + n_coll·τ_c + n_out·τ_out + max(F/(peak·η_c(M)), B/(BW·η_m), net/η_comm)] "
          "· PP + t_sched", step_working(res.__dict__["times"]), _f(info["t_decode_gpu"]), "s",
          f"decode step of b sequences × {k + 1} tokens, {res.overlap} (engine/step.py; --ops for each operator)"
          + mla_note, key="t_verify" if p.stack.cuda_graphs else "t_gpu")
    from ...engine.step import measured_points

    for pt in measured_points(res.__dict__["times"]):  # --efficiency measured: the curve point each operator used
        d.add(pt["symbol"] + (f" [{pt['op']}]" if pt["op"] else ""),
              "η_c · M / (M + M½)" if pt["op"] else "measured kernel curve", pt["working"], pt["value"], pt["unit"],
              pt["source"])
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
    td = d.add("t_decode", "t_verify + k · t_draft", "", _f(info["t_decode"]), "s",
               expr=f"t_verify + {k} * t_draft" if k else "t_verify", key="t_decode")
    if r.mode == "aggregated" and w.arrivals == "waves" and bool(np.asarray(info["waves"]).ravel()[0]):
        return _derive_waves(d, r, v, b)
    R = lay.attention_ranks
    if r.mode == "aggregated":
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
        d.add("c_r", "min(left, max(ISL_new, p/R))", "", _f(sch.get("c_rank_steady", sch["c_rank"])), "tokens",
              "whole waiting prompts, within the budget", expr=f"min(left, max({w.isl_new!r}, p / {R}))", key=cr)
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
        d.add("n_eager", "kernels the mixed step dispatches", "", _f(info["eager_kernels_mixed"]), "", key="n_e")
        d.add("τ_eager", f"host time per eagerly dispatched kernel ({p.stack.name})", "", tau_e, "s", key="tau_e")
        d.add("t_mixed", "max(t_gpu,mixed, n_eager · τ_eager) + k · t_draft", "", _f(info["t_mixed"]), "s",
              "an eager step: no CUDA graph, the host dispatches every kernel" + eager_note,
              expr="max(t_gm, n_e * tau_e)" + (f" + {k} * t_draft" if k else ""), key="t_mixed")
        n = d.add("n", "p / c", "", _f(info["n_mixed"]), "", "mixed steps per decode step", expr="p / c", key="n")
        d.add("t̄", "t_decode + n·(t_mixed − t_decode) if n ≤ 1 else t_mixed", "", v["step_ms"] / 1e3, "s",
              "time-sliced prefill (Sarathi-Serve)",
              expr="t_decode + n * (t_mixed - t_decode) if n <= 1 else t_mixed", key="tbar")
    else:
        d.add("t̄", "t_decode (the decode pool runs decode only)", "", v["step_ms"] / 1e3, "s", expr="t_decode",
              key="tbar")
    if r.mode == "aggregated":
        d.add("TPOT", "(t_decode + n·(b − 1)/b·(t_mixed − t_decode)) / A  (n ≤ 1; else t_mixed / A)", "",
              v["tpot_ms"] / 1e3, "s", "other requests' prefills stall the stream; a request's own prefill is its TTFT",
              expr=f"(t_decode + n * max(b - 1, 0) / max(b, 1) * (t_mixed - t_decode)) / {A!r} if n <= 1 "
                   f"else t_mixed / {A!r}", key="tpot")
    else:
        d.add("TPOT", "t̄ / A", "", v["tpot_ms"] / 1e3, "s", expr=f"tbar / {A!r}", key="tpot")
    d.add("tok/s/user", "1 / TPOT", "", v["tokens_per_s_per_user"], "tok/s", expr="1 / tpot")
    if r.mode == "aggregated":
        d.add("X_out", "min(dp·PP·b·A/t̄, dp·PP·c·OSL/(ISL_new·t_mixed))", "", v["output_tok_s"], "tok/s",
              expr=f"min({lay.dp * lay.pp} * b * {A!r} / tbar, {lay.dp * lay.pp} * c * {w.osl!r} / "
                   f"({max(w.isl_new, 1e-9)!r} * t_mixed))", key="X")
    else:
        pf = info["prefill"]
        d.add("X_prefill", "the prefill pool's prompt tokens/s (prefill_pool_rate)", "", _f(pf["input_tok_s"]),
              "tok/s", key="X_P")
        d.add("X_out", "min(C·A/t_decode, X_prefill · OSL / (ISL · (1 − h)))", "", v["output_tok_s"], "tok/s",
              expr=f"min(C * {A!r} / t_decode, X_P * {w.osl!r} / ({w.isl!r} * (1 - {w.cached_share!r})))", key="X")
    d.add("X_out/GPU", "X_out / N_GPU", f"{fmt(v['output_tok_s'], 'tok/s')} / {r.gpus}", v["output_tok_s_per_gpu"],
          "tok/s", "every GPU counted, prefill pool included", expr=f"X / {r.gpus}")
    d.add("X_total/GPU", "X_out · (1 + ISL/OSL) / N_GPU", "", v["total_tok_s_per_gpu"], "tok/s",
          expr=f"X * (1 + {w.isl!r} / {w.osl!r}) / {r.gpus}")
    t_req = _f(info["t_request"])
    if r.mode == "aggregated":
        d.add("ρ", "p / (R · left)", "", _f(info["rho"]), "",
              "prefill load over its capacity (the M/D/1 queue's utilisation, capped at 0.95)",
              expr=f"p / ({R} * left)", key="rho")
        d.add("t_prefill", "⌈ISL_new / c_r⌉ · t_mixed", "", _f(np.ceil(w.isl_new / info["chunk"]) * info["t_mixed"]), "s",
              "the prompt's own chunks", expr=f"ceil({w.isl_new!r} / c_r) * t_mixed", key="t_pf")
        d.add("W", "t̄/2 + ρ/(2(1 − ρ)) · t_prefill  (M/D/1 wait, ρ ≤ 0.95)", "",
              _f(prefill_wait(info["t_decode"] * 0 + v["step_ms"] / 1e3, np.ceil(w.isl_new / info["chunk"])
                              * info["t_mixed"], info["rho"])), "s",
              "half a step, then the prompts ahead", expr="tbar / 2 + min(rho, 0.95) / (2 * (1 - min(rho, 0.95))) * t_pf",
              key="W")
        d.add("t_request", f"host time per request ({p.stack.name}'s)", "", t_req, "s", key="t_req")
        bound = bool(np.asarray(r.values["bottleneck"] == "prefill").ravel()[0])
        cl = w.arrivals == "closed-loop"
        d.add("TTFT_steady" if cl else "TTFT",
              "t_prefill + W + t_request" + ("; at least C·OSL/X_out − (OSL − 1)·TPOT (Little's law, the "
                                             "prefill budget binds)" if bound else ""),
              "", _f(info["ttft_steady"]) if cl else v["ttft_ms"] / 1e3, "s", "serving.steady_state",
              expr=(f"max(t_pf + W + t_req, C * {w.osl!r} / X - ({w.osl!r} - 1) * tpot)" if bound
                    else "t_pf + W + t_req"), key="ttft_ss" if cl else "")
        if cl:
            _derive_closed_loop(d, r, v)
    else:
        pf = info["prefill"]
        d.add("t_gpu,prefill", "one prompt's prefill pass on the prefill layout",
              step_working(info["prefill_one"].__dict__["times"]), _f(info["prefill_one"].tpot_s), "s", key="t_p1")
        d.add("n_kernels", "kernels the prefill pass dispatches", "", _f(step_kernels(info["prefill_one"])), "",
              key="n_p")
        d.add("τ_eager", f"host time per eagerly dispatched kernel ({p.stack.name})", "", _f(info["tau_eager"]), "s",
              key="tau_e")
        d.add("t_prefill", "chunks · max(t_gpu,prefill, n_kernels · τ_eager)", "", _f(pf["prefill_s"]), "s",
              expr=f"{_f(info['n_chunks'])!r} * max(t_p1, n_p * tau_e)", key="t_pf")
        d.add("t_KV", "the KV cache's hand-off to the decode pool (kv_transfer_time)", "", _f(pf["kv_transfer_s"]),
              "s", key="t_kv")
        d.add("ρ", "X_out · ISL_new / OSL / X_prefill", "", _f(info["rho"]), "", "the prefill pool's load",
              expr=f"X * {w.isl_new!r} / {w.osl!r} / X_P", key="rho")
        d.add("t_pass", "a full prefill pass of the pool (prefill_pool_rate)", "", _f(info["t_pass"]), "s",
              key="t_pass")
        d.add("t_request", f"host time per request ({p.stack.name}'s)", "", t_req, "s", key="t_req")
        cl = w.arrivals == "closed-loop"
        d.add("TTFT_steady" if cl else "TTFT", "t_prefill + t_KV + ρ/(2(1 − ρ)) · t_pass + t_request  (ρ ≤ 0.95)", "",
              _f(info["ttft_steady"]) if cl else v["ttft_ms"] / 1e3, "s", "serving.disaggregated_ttft",
              expr="t_pf + t_kv + min(rho, 0.95) / (2 * (1 - min(rho, 0.95))) * t_pass + t_req",
              key="ttft_ss" if cl else "")
        if cl:
            _derive_closed_loop(d, r, v)
    d.add("$/Mtok", "N_GPU · $/GPU-h / 3600 / X_out · 10⁶", "", v["usd_per_mtok_output"], "$/Mtok", "output tokens",
          expr=f"{r.gpus} * {r.usd_per_gpu_hour!r} / 3600 / X * 1e6")
    d.conclusion = f"→ {fmt(v['output_tok_s_per_gpu'], 'tok/s')} per GPU at {v['tokens_per_s_per_user']:.3g} " \
                   f"tok/s per user; {str(np.asarray(r.values['bottleneck']).ravel()[0])}-bound" + \
                   ("; " + "; ".join(r.notes) if r.notes else "")
    return d


def _derive_closed_loop(d: Derivation, r: "ServeResult", v: dict) -> None:
    """The TTFT of a closed-loop benchmark client (:func:`closed_loop_ttft`): its first wave, then the steady loop."""
    info, C = r._info, float(np.asarray(r.values["concurrency"]).ravel()[0])
    how = ("the first C prompts queued at the prefill pool (disaggregated_wave_ttft)" if r.mode == "disaggregated"
           else "the first C prompts queued against the prefill budget (wave_schedule)")
    d.add("TTFT_wave", "the first wave's mean TTFT", "", _f(info["ttft_wave"]), "s", how, key="ttft_w")
    d.add("w", "C / N  (N = 10 · C requests: the client's --num-prompts)", "", _f(info["wave_share"]), "",
          "first_wave_share", expr=f"min({C!r} / {CLOSED_LOOP_PROMPTS_PER_CLIENT * C!r}, 1.0)", key="w_wave")
    d.add("TTFT", "w · TTFT_wave + (1 − w) · TTFT_steady", "", v["ttft_ms"] / 1e3, "s",
          "serving.closed_loop_ttft", expr="w_wave * ttft_w + (1 - w_wave) * ttft_ss")


def _derive_waves(d: Derivation, r: "ServeResult", v: dict, b: float) -> Derivation:
    """The rest of the derivation under lock-step waves (:func:`wave_schedule`)."""
    p, wv = r._plan, r._info["wave"]
    w, lay, A = p.workload, p.layout, p.workload.acceptance
    R = lay.attention_ranks
    bud = float(p.stack.max_num_tokens or np.inf)
    from ...engine.step import step_working

    d.add("waves", "the waves persist: a prefill-first stack, or a wave's prompts fit one prefill pass", "", 1.0, "",
          f"{p.stack.name}: prefill first = {p.stack.prefill_first} (waves_persist)")
    d.add("c_r", "min(max(b/R, 1) · ISL_new, budget)", "", _f(wv["chunk"]), "tokens",
          f"prompt tokens one rank carries per prefill pass (R = {R}, budget {p.stack.max_num_tokens or '∞'})",
          expr=f"min(max(b / {R}, 1) * {w.isl_new!r}, {bud!r})", key="c_r")
    d.add("t_gpu,pass", "the step carrying R·c_r prompt tokens", step_working(wv["res_pass"].__dict__["times"]),
          _f(wv["res_pass"].tpot_s), "s", key="t_gp")
    d.add("n_kernels", "kernels the prefill pass dispatches", "", _f(wv["kernels_pass"]), "", key="n_kp")
    d.add("τ_eager", f"host time per eagerly dispatched kernel ({p.stack.name})", "", _f(wv["tau_eager"]), "s",
          key="tau_e")
    d.add("t_pass", "max(t_gpu,pass, n_kernels · τ_eager)", "", _f(wv["t_pass"]),
          "s", "an eager step: no CUDA graph, the host dispatches every kernel", expr="max(t_gp, n_kp * tau_e)",
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
    d.add("$/Mtok", "N_GPU · $/GPU-h / 3600 / X_out · 10⁶", "", v["usd_per_mtok_output"], "$/Mtok", "output tokens",
          expr=f"{r.gpus} * {r.usd_per_gpu_hour!r} / 3600 / X * 1e6")
    d.conclusion = f"→ {fmt(v['output_tok_s_per_gpu'], 'tok/s')} per GPU at {v['tokens_per_s_per_user']:.3g} " \
                   f"tok/s per user in lock-step waves" + ("; " + "; ".join(r.notes) if r.notes else "")
    return d


# --------------------------------------------------------------------------------------
# Single passes (records that measured one phase: Pope et al.'s Table 2, DeepSeek's units, measured steps)
# --------------------------------------------------------------------------------------


def decode_step(model, hardware, *, chips, batch, context, tp=None, ep=1, pp=1, attention_dp=False,
                weights_dtype=None, kv_dtype=None, kv_shards=None, redundant_experts=0, ideal=False, efficiency=None,
                framework=None, mtp=0, weight_layout="1d", compute_dtype=None):
    """Time of one decode step of ``batch`` sequences at ``context`` on ``chips`` chips: (s, layout result, efficiency).

    ``weight_layout`` (dense models): "1d" weight-stationary (the default), "2d" weight-stationary or "gathered"
    (Pope et al. 2022 §3.2; ``engine.layout.WEIGHT_LAYOUTS``)."""
    return _single_pass(model, hardware, chips=chips, seqs=batch, isl=context, tp=tp, ep=ep, pp=pp,
                        attention_dp=attention_dp, weights_dtype=weights_dtype, kv_dtype=kv_dtype,
                        kv_shards=kv_shards, ideal=ideal, efficiency=efficiency, regime="decode",
                        redundant_experts=redundant_experts, framework=framework, mtp=mtp,
                        weight_layout=weight_layout, compute_dtype=compute_dtype)


def prefill_time(model, hardware, *, chips, batch, isl, tp=None, ep=1, pp=1, attention_dp=False, weights_dtype=None,
                 kv_dtype=None, kv_shards=None, cached_share=0.0, redundant_experts=0, ideal=False, efficiency=None,
                 framework=None, weight_layout="1d", compute_dtype=None):
    """Time to prefill ``batch`` prompts of ``isl`` tokens in one pass on ``chips`` chips: (s, result, efficiency).

    ``weight_layout`` (dense models): "1d" weight-stationary (the default), "2d" weight-stationary (activations
    exchanged along both split axes: Pope et al. 2022's low-latency layout) or "gathered" (the chips split the batch
    and all-gather each layer's weights: their large-batch prefill layout); ``engine.layout.WEIGHT_LAYOUTS``.
    """
    return _single_pass(model, hardware, chips=chips, seqs=batch, isl=isl, tp=tp, ep=ep, pp=pp,
                        attention_dp=attention_dp, weights_dtype=weights_dtype, kv_dtype=kv_dtype,
                        kv_shards=kv_shards, ideal=ideal, efficiency=efficiency, regime="prefill",
                        cached_share=cached_share, redundant_experts=redundant_experts, framework=framework,
                        weight_layout=weight_layout, compute_dtype=compute_dtype)


def _single_pass(model, hardware, *, chips, seqs, isl, tp, ep, pp, attention_dp, weights_dtype, kv_dtype,
                 kv_shards, ideal, efficiency, regime, cached_share=0.0, redundant_experts=0, framework=None, mtp=0,
                 weight_layout="1d", compute_dtype=None):
    from ...engine.efficiency import load_efficiency, resolve
    from ...engine.deployment import Deployment
    from ...specs.hardware import load_hardware
    from ...specs.models import load_model
    from ... import units

    m = load_model(model)
    system = load_hardware(hardware)
    wdt = units.normalize_dtype(weights_dtype, "weights_dtype") if weights_dtype else None
    kvdt = units.normalize_dtype(kv_dtype or getattr(m, "kv_dtype", None) or "bf16", "kv_dtype")
    cdt = system.chip.gemm_dtype(wdt or m.native_dtype, compute_dtype)
    eff = efficiency if not isinstance(efficiency, (str, type(None))) else resolve(system.chip.name, efficiency,
                                                                                    ideal, regime)
    eff = load_efficiency(eff)
    dep = Deployment.build(system, int(chips), tp=tp or int(chips), ep=ep, pp=pp, attention_dp=attention_dp,
                           redundant_experts=redundant_experts, model=m)
    if regime == "decode":
        mn = decode_numbers(m, isl, mtp, wdt, kvdt, kv_shards)
    else:
        mn = prefill_numbers(m, isl=isl, chunk=float(isl) * (1.0 - cached_share), weights_dtype=wdt, kv_dtype=kvdt,
                             cached_share=cached_share, kv_shards=kv_shards)
    p = Plan(m, system, Workload(float(isl), 1.0, 1.0), Layout(dep.chips, dep.tp, dep.ep, dep.pp, dep.attention_dp,
                                                                dep.redundant_experts,
                                                                weight_layout=str(weight_layout)),
             load_stack(framework), wdt, kvdt, cdt, dep.chips, 0.0)
    res = _run(p, mn, p.layout, eff, np.asarray(seqs, dtype=float) / dep.pp)
    step = res.tpot_s
    res.values["bound"] = np.broadcast_to(res.bound, np.shape(res.values["tpot_s"]))
    return step, res, eff


def ops(result, which="decode", index=0) -> list[dict]:
    """Per-operator breakdown of a serve result's decode step (``--ops``): rows sum to the step (tested)."""
    from ...engine.step import ops_table

    res = result._res
    rows = ops_table(res.times, scale=res.scale, index=index)
    k = result.mtp
    if k:
        p = result._plan
        dres = _run(p, p.numbers("draft"), replace(p.layout, pp=1), result._eff, result._info["b"], sched=False)
        rows.insert(-1, {"op": "draft", "layer_type": "draft (MTP)", "flops": float("nan"), "bytes": float("nan"),
                         "intensity": float("nan"), "time_s": k * _f(dres.tpot_s, index), "binding": str(
                             np.asarray(dres.bound).ravel()[0])})
    return rows


__all__ = ["serve", "plan", "evaluate", "Plan", "Workload", "Layout", "Stack", "STACKS", "load_stack", "ServeResult",
           "choose_layout", "decode_step", "prefill_time", "ops", "time_sliced_schedule", "prefill_wait",
           "steady_state", "disaggregated_ttft",
           "speculative_step", "poisson_mixed_share", "batch_arrivals", "first_wave_share", "closed_loop_ttft",
           "disaggregated_wave_ttft", "CLOSED_LOOP_PROMPTS_PER_CLIENT", "mean_decode_context", "held_context",
           "steps_per_request", "prefill_tokens_per_seq_step",
           "prefill_attended_context",
           "tpot", "output_tokens_per_s", "total_tokens_per_s", "tokens_per_s_per_user", "usd_per_mtok",
           "prefill_chunks", "kv_transfer_time", "disaggregated_output_rate", "little_concurrency",
           "decode_numbers", "draft_numbers", "prefill_numbers", "mixed_numbers", "MAX_NUM_TOKENS", "MAX_BATCH_SIZE"]
