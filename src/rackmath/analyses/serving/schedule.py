"""The serving schedule: steady state, chunked prefill time-sliced with decode, waves, and TTFT.

Given step times (a decode step, a step that also carries prefill), these equations say how a continuous-batching
stack schedules a stream of requests of ISL input and OSL output tokens with C sequences in flight
(``reference/conventions.md``): TPOT, output rate, the prefill queue and TTFT. Every equation is one small function,
vectorized with numpy; :func:`steady_state` composes them for ``serve``, ``plan``, ``compare`` and the web app.
What a step carries and how long it takes is ``serving/steps.py``.
"""

from __future__ import annotations

import numpy as np

from ...engine.layout import attention_dp_imbalance

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


def little_ttft(concurrency, out_tok_s, osl, tpot_s):
    """Little's law solved for TTFT: TTFT = C · OSL / X_out − (OSL − 1) · TPOT.

    C requests in the system, served at X_out / OSL requests/s, each stay E2E = C · OSL / X_out (Little 1961);
    (OSL − 1) · TPOT of that is decoding, the rest is the time to its first token (:func:`little_concurrency`
    solved for TTFT).
    """
    osl = np.asarray(osl, dtype=float)
    return (np.asarray(concurrency, dtype=float) * osl / np.asarray(out_tok_s, dtype=float)
            - (osl - 1.0) * np.asarray(tpot_s, dtype=float))


def saturated_ttft(ttft_open, saturated, concurrency, out_tok_s, osl, tpot_s):
    """TTFT of C requests kept in the system when the deployment is saturated: (TTFT, queue term Q).

        TTFT = max(TTFT_open, C · OSL / X − (OSL − 1) · TPOT)   where saturated, else TTFT_open;  Q = TTFT − TTFT_open

    A closed loop (a benchmark client with C users; serve's C sequences in flight) serves X = min(prefill capacity,
    decode capacity, admission cap) requests/s; once one of them binds — a prefill budget or a disaggregated
    prefill pool slower than the decode side, or a running batch capped below C (the stack's max batch) — the
    throughput stays flat as C grows and the extra requests wait for a slot: by Little's law
    (:func:`little_ttft`) their wait grows linearly with C (InferenceMAX's saturated runs: throughput flat, TTFT
    ∝ C). TTFT_open is the unsaturated model's (prefill, the closed loop's wait for it, the stack's per-request time).
    ``serve`` (aggregated: :func:`steady_state`; disaggregated: ``evaluate._disaggregated``), ``plan`` and
    ``compare`` (through :func:`steady_state`) and ``--explain`` (line Q) read it here.
    """
    ttft_open = np.asarray(ttft_open, dtype=float)
    ttft = np.where(saturated, np.maximum(ttft_open, little_ttft(concurrency, out_tok_s, osl, tpot_s)), ttft_open)
    return ttft, ttft - ttft_open


def held_context(stack, isl, osl):
    """Tokens of KV a sequence holds in memory: the mean context L̄ = ISL + OSL/2 (paged KV grows with the output),
    or the whole request ISL + OSL where the stack admits a request only with KV blocks for all of it
    (``Stack.reserves_whole_request``: TensorRT-LLM's capacity scheduler GUARANTEED_NO_EVICT, its default)."""
    return float(isl + osl) if stack.reserves_whole_request else float(mean_decode_context(isl, osl))


# --------------------------------------------------------------------------------------
# Chunked prefill, arrivals, waves and TTFT
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
    b = np.asarray(seqs, dtype=float)
    dec = b * float(decode_tokens_per_seq)
    c = np.asarray(chunk_per_rank, dtype=float)
    P = ranks * c if prefill_tokens is None else np.asarray(prefill_tokens, dtype=float)
    busiest = c + attention_dp_imbalance(b, ranks) * dec / ranks
    return busiest / np.maximum((dec + P) / ranks, 1e-300)


def prefill_schedule(seqs, ranks, isl_new, osl, acceptance=1.0, mtp=0, budget=None, recv_interval=1) -> dict:
    """How a continuous-batching stack carries prefill beside b decoding sequences (arrays broadcast).

    p = b · ISL_new · A / OSL prompt tokens are needed per decode step. Each of the R attention ranks
    (R = 1 without attention DP) takes whole waiting prompts within the token budget left after its
    busiest decode tokens: c_r = min(left, max(ISL_new, N·p/R)), left = max(budget − imb·b·(k+1)/R,
    min(ISL_new, budget)); N is the scheduler's receive interval (:func:`receive_wait`: the prompts of N decode
    steps arrive together; 1 for every stack but SGLang's with ``--scheduler-recv-interval``). A rank prefills in
    a share f = min(1, p/(R·c_r)) of the steps; a step is mixed when any rank prefills (:func:`mixed_step_share`),
    carrying c = R·f·c_r/n prompt tokens
    (prefill-bound, f = 1: c = R·c_r). The prefill queue's utilisation is ρ = p / (R · left).
    Returns p, left, c_rank, c_tot, n_any, rho and the busiest rank's ``imbalance`` of the mixed step.
    """
    b = np.asarray(seqs, dtype=float)
    R = np.asarray(ranks, dtype=float)
    isl_new = max(float(isl_new), 1.0)
    imb_dec = np.where(R > 1, attention_dp_imbalance(b, R), 1.0)
    p = b * isl_new * float(acceptance) / float(osl)
    bud = np.asarray(np.inf if budget is None else budget, dtype=float)
    left = np.maximum(bud - b * (mtp + 1) / R * imb_dec, np.minimum(isl_new, bud))
    received = np.asarray(recv_interval, dtype=float) * p / R  # prompt tokens received together, per rank
    c_rank = np.minimum(left, np.maximum(isl_new, received))  # whole waiting prompts, within the budget
    f = np.minimum(1.0, p / R / c_rank)  # share of steps in which one rank prefills
    n_any = mixed_step_share(f, R)  # share of steps in which any rank does (the ranks step together)
    c_tot = np.where(f < 1.0, R * f * c_rank / np.maximum(n_any, 1e-300), R * c_rank)
    imb = mixed_step_imbalance(b, R, mtp + 1, c_rank, c_tot)
    return dict(p=p, left=left, c_rank=c_rank, c_tot=c_tot, n_any=n_any, rho=p / (R * left),
                imbalance=np.where(R > 1, imb, 1.0), imb_decode=imb_dec, f=f)


def receive_wait(t_decode, recv_interval=1):
    """Extra wait of a new request for a scheduler that receives every N decode steps: t_recv = (N − 1)/2 · t_decode.

    SGLang's ``--scheduler-recv-interval N`` (``managers/scheduler_recv_skipper.py``, 0.5.3–0.5.6: default 1, off
    under ``--enable-dp-attention``) polls for new requests once its counter reaches N; each decode (or
    speculative-verify) step adds 1, a prefill step 1,000 and an idle turn 1, so the scheduler receives at once
    after a prefill or when idle and every N decode steps otherwise. A request that arrives during a run of N decode
    steps waits (N − 1)/2 steps more than one polled every step (whose half-step wait is the steady state's
    t̄/2); the median wait too. N = 1: 0. Only the steady stream pays it: a wave or a closed-loop client's first
    wave reaches an idle server, and a disaggregated prefill pool runs prefill steps.
    """
    n = np.asarray(recv_interval, dtype=float)
    return 0.5 * (n - 1.0) * np.asarray(t_decode, dtype=float)


def steady_state(seqs, ranks, isl_new, osl, t_decode, mixed_step, *, acceptance=1.0, mtp=0, budget=None,
                 t_request=0.0, arrivals="steady", queued=None, recv_interval=1) -> dict:
    """The steady state of one aggregated decode stream of b sequences: the one place ``serve``, ``plan``,
    ``compare`` and the web app get TPOT, output rate and TTFT from (arrays broadcast).

    1. schedule: :func:`prefill_schedule` (prompt tokens per step p, chunk per rank c_r, total chunk c, ρ);
       under Poisson arrivals :func:`batch_arrivals` re-batches the waiting prompts;
    2. t_mixed = ``mixed_step(schedule)`` (the caller's step model; returns (t_mixed, extra) — ``extra`` is
       passed back as ``mixed_extra``);
    3. :func:`time_sliced_schedule` → t̄, TPOT, X (per stream), prefill-bound mask;
    4. TTFT_open = t̄/2 + t_recv + ⌈ISL_new / c_r⌉ · t_mixed + t_request + W, t_recv the wait for a scheduler
       that receives every ``recv_interval`` decode steps (:func:`receive_wait`; 0 at 1), W the closed loop's wait
       for the prefill budget (:func:`closed_loop_wait`: b requests, a prompt's share S = ISL_new · t_mixed /
       (R · left) of the budget, the rest of its cycle Z); X at most Little's :func:`closed_loop_rate` over the
       cycle; where the running batch b is capped below the q = ``queued`` requests in the system (default b), at
       least Little's law's TTFT: :func:`saturated_ttft` (q, X, TPOT).

    ``t_request`` is the stack's host time per request (``engine.efficiency.stack_request_s``), ``recv_interval``
    its decode steps between receives of new requests (``Stack.recv_interval``). One keyword per input of the stream
    (its workload, its stack's budget, host time and receive interval, the arrivals): thirteen.
    """
    b = np.asarray(seqs, dtype=float)
    sch = prefill_schedule(b, ranks, isl_new, osl, acceptance, mtp, budget, recv_interval)
    t_mix, extra = mixed_step(sch)
    if arrivals == "poisson":  # independent arrivals: the prompts waiting after a mixed step ride one together
        sch = batch_arrivals(sch, b, ranks, mtp, isl_new, t_decode, t_mix)
        t_mix, extra = mixed_step(sch)
    t_bar, t_tpot, x_rep, bound = time_sliced_schedule(t_decode, t_mix, sch["p"], sch["c_tot"], b, acceptance,
                                                        isl_new, osl)
    t_pf = np.ceil(isl_new / sch["c_rank"]) * t_mix
    # the prompts' queue for the prefill budget: a prompt takes a share S of its capacity, R · left tokens per mixed
    # step; ahead of the wait, half a step to the next schedule, its own chunks and the host
    S = max(float(isl_new), 1.0) * t_mix / (np.asarray(ranks, dtype=float) * sch["left"])
    t_recv = receive_wait(t_decode, recv_interval)
    loop = closed_loop_prefill(b, S, 0.5 * t_bar + t_recv + t_pf + t_request, osl, t_tpot)
    x_rep = np.minimum(x_rep, loop["rate"])
    q = b if queued is None else np.asarray(queued, dtype=float)
    capped = q > b  # the running batch is capped below the requests in the system
    saturated = bound | capped  # … or the prefill budget binds
    ttft, queue = saturated_ttft(loop["ttft_open"], saturated, q, x_rep, osl, t_tpot)
    return dict(schedule=sch, t_mixed=t_mix, mixed_extra=extra, step_s=t_bar, tpot_s=t_tpot, out_tok_s=x_rep,
                prefill_bound=bound, ttft_s=ttft, ttft_open_s=loop["ttft_open"], queue_s=queue, saturated=saturated,
                capped=capped, service_s=S, cycle_rest_s=loop["rest"], wait_s=loop["wait"], recv_s=t_recv,
                n_mixed=mixed_steps_per_decode(sch["p"], sch["c_tot"]))


def disaggregated_ttft(t_prefill, t_transfer, t_pass, utilisation, t_request=0.0):
    """TTFT of a disaggregated deployment: t_prefill + KV transfer + ρ/(2(1−ρ)) · t_pass (:func:`prefill_wait`
    with no decode step to wait for) + t_request (the stack's host time per request)."""
    return t_prefill + t_transfer + prefill_wait(0.0 * np.asarray(t_prefill, dtype=float), t_pass,
                                                 utilisation) + t_request


def closed_loop_wait(concurrency, service_s, think_s):
    """Mean wait for the prefill server of a closed loop of C requests: W = R − S, with

        R = ½ · [(C·S − Z) + √((C·S − Z)² + 4·S·Z)]

    Each request cycles through the prefill server (a share S of its capacity per prompt) and the rest of its
    life, Z (its own prefill latency beyond S, the hand-off, the host time, OSL − 1 decode steps). Schweitzer's
    approximate mean value analysis of that loop, R = S · (1 + (C − 1)/C · X · R) with X = C / (Z + R) (Schweitzer
    1979; Reiser & Lavenberg 1980), is a quadratic in R; this is its root. A finite population's queue: at light load
    (C·S ≪ Z) W ≈ S · C·S/Z; past the knee (C·S ≫ Z) R → C·S − Z, Little's law with the server saturated. An
    open-loop wait (:func:`prefill_wait`, M/D/1) grows without bound as its utilisation nears 1, where a benchmark's C
    clients can queue no more than C − 1 prompts: on GB200 Dynamo-TRT-LLM at C = 512 it priced the prefill queue at
    5.3 s against a measured mean TTFT of 1.1 s (docs/stacks.md, "The prefill queue of a closed loop").
    """
    c, s, z = (np.asarray(x, dtype=float) for x in (concurrency, service_s, think_s))
    d = c * s - z
    r = 0.5 * (d + np.sqrt(d * d + 4.0 * s * np.maximum(z, 0.0)))
    return np.maximum(r - s, 0.0)


def closed_loop_rate(concurrency, osl, cycle_s):
    """Output tokens/s of C requests kept in flight: X = C · OSL / (TTFT + (OSL − 1) · TPOT) (Little's law over a
    request's whole cycle, which is what a closed-loop benchmark's throughput measures: output tokens over the run)."""
    return np.asarray(concurrency, dtype=float) * np.asarray(osl, dtype=float) / np.asarray(cycle_s, dtype=float)


def closed_loop_prefill(requests, service_s, ttft_before_wait, osl, tpot_s) -> dict:
    """``requests`` in flight whose prompts queue for one prefill server (a share ``service_s`` of it each): the rest
    of a request's cycle Z = max(TTFT_before_wait + (OSL − 1) · TPOT − S, 0), its wait W (:func:`closed_loop_wait`),
    TTFT_open = TTFT_before_wait + W and the loop's output rate X = n · OSL / (TTFT_open + (OSL − 1) · TPOT)
    (:func:`closed_loop_rate`). The aggregated stream (:func:`steady_state`, the server its prefill budget) and the
    disaggregated pools (``evaluate._disaggregated``, the server the prefill pool) both read it here.
    Returns dict(rest, wait, ttft_open, rate)."""
    decode = (np.asarray(osl, dtype=float) - 1.0) * np.asarray(tpot_s, dtype=float)
    rest = np.maximum(ttft_before_wait + decode - service_s, 0.0)
    wait = closed_loop_wait(requests, service_s, rest)
    ttft_open = ttft_before_wait + wait
    return dict(rest=rest, wait=wait, ttft_open=ttft_open, rate=closed_loop_rate(requests, osl, ttft_open + decode))


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


def first_wave_pass(t_pass, eta_wave):
    """Time of one of a closed-loop client's first wave's prefill passes: t_pass,wave = t_pass / η_wave.

    t_pass is the pass at the steady state's speed (the silicon's curves and the stack's step times), η_wave the
    stack version's first-wave speed relative to it (``Efficiency.eta_wave``: 1 in every preset; a version's fitted
    one under ``--efficiency measured``, ``stack_hosts.toml``). The first wave is the first time the server runs
    prefill passes of many prompts: the rows show its excess over the steady TTFT growing with C as the wave's
    prompts do, at a fixed multiple of what the steady passes give — 2.3–2.7× on every vLLM gpt-oss row of H200
    and B200 at TP 1–8 and C = 32–128 (docs/stacks.md, "The first wave's passes"). It scales the first wave only: TPOT,
    throughput and the steady TTFT keep the steady passes. A disaggregated prefill pool's first wave runs at
    η_wave of its rate the same way (:func:`disaggregated_wave_ttft`).
    """
    return np.asarray(t_pass, dtype=float) / np.asarray(eta_wave, dtype=float)


def closed_loop_ttft(ttft_wave, ttft_steady, share, t_warm=0.0):
    """Mean TTFT over a closed-loop benchmark's N requests: TTFT = w · (TTFT_wave + t_warm) + (1 − w) · TTFT_steady.

    w = :func:`first_wave_share` (C / N); TTFT_wave is the first wave's mean (its C prompts queued against the
    prefill budget: :func:`wave_schedule`, or :func:`disaggregated_wave_ttft` on a prefill pool), TTFT_steady the
    steady state's (:func:`steady_state`, :func:`disaggregated_ttft`); both include the stack's per-request time.
    t_warm is the stack version's warm-up, paid once by the first wave: the work a server does the first time it
    runs a batch of that size — kernels compiled just in time (ROCm's AITER modules, DeepGEMM, Triton autotuning),
    graphs captured lazily — which the client does not warm (it sends one test prompt first). The rows show it as
    a mean TTFT far above the median, by the same amount at every C (MI355X SGLang: ~0.45 s at C = 4 … 64, mean /
    median ≈ 6; docs/stacks.md). TPOT and throughput stay the steady state's: the first wave is one request
    period in ten.
    """
    w = np.asarray(share, dtype=float)
    return (w * (np.asarray(ttft_wave, dtype=float) + np.asarray(t_warm, dtype=float))
            + (1.0 - w) * np.asarray(ttft_steady, dtype=float))


def median_ttft(ttft_mean, ttft_steady, share):
    """TTFT of the median request: the steady state's where the first wave is under half the requests (w < 1/2: a
    closed-loop client's median request is one of the later ones), the mean's otherwise. The spread within the
    steady state (an M/D/1 wait's median is below its mean) is not modelled."""
    return np.where(np.asarray(share, dtype=float) < 0.5, ttft_steady, ttft_mean)


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
