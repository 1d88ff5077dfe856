"""Chapter five: reading API price sheets backwards (lecture 01:33–01:50, claims R35–R38).

Pure functions of numbers first (ratio, N_active, bytes/token, context …); the thin
``*_for`` adapters take a model / hardware and call the spec modules or the roofline.

Units. The lecture's hardware ratio r ≈ 300 is in *parameter units* (``specs.hardware.
hardware_ratio``): r = (FLOP/s ÷ 2) / (bytes/s ÷ bytes_per_param). The exact balance of
KV fetch and compute per token (weights amortized, lecture 01:38),

    L · b / BW = 2 · N_active / FLOP/s        (2 FLOPs per multiply-accumulate)

becomes, in those units, b = bytes_per_param · N_active / (r · L). The blackboard's
``(mem_bw/FLOPs) · N_active / len_ctx = (1/300) · 100B / 200K = 1,667 B`` is this with
bytes_per_param = 1 (8-bit weights at the 8-bit peak, where "FLOPs" counts multiply-
accumulates). With 16-bit weights at the 16-bit peak r is the same ≈ 300 but each
parameter is 2 bytes, so b doubles (H100: 3.4 KB). Every function takes
``bytes_per_param`` explicitly so the choice is visible.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...errors import InputError, check_positive
from ...explain import Derivation, fmt
from ...units import dtype_bytes, format_si
from .batching import balance_batch  # B* = ratio · N_total/N_active (lecture 00:15, R6)
from .batching import fast_mode, FAST_OPERATING_MULTIPLE, prefill_decode_costs


def _n(x) -> str:
    """A count for a derivation line: 200000 -> '200 k', 1e11 -> '100 G'."""
    return format_si(float(x), "")

LECTURE_RATIO = 300.0  # lecture 00:15 (R5): "on most GPUs this ends up ~300"
LECTURE_N_ACTIVE = 100e9  # lecture 01:40 (R34/R36): "maybe the number of activated parameters is a hundred billion"
LECTURE_BOUNDARY = 200e3  # Gemini 3.1's tier boundary (R35)


# --------------------------------------------------------------------------- R35–R36: price step → bytes/token


def crossover_from_price_step(boundary, step=1.5, covered_context=None):
    """The context L* where KV-fetch time equals compute time, read off a long-context price step.

    Lecture 01:35 (R35): "given that the bump is at 200k, it probably means that this is
    somewhat aligned with this crossover point" → L* = boundary (the default).

    With cost/token ∝ max(1, L / L*) (weights amortized), a sheet whose low tier covers
    cost up to the boundary and whose high tier (``step`` × the low price) covers cost up
    to ``covered_context`` gives step = covered / L*, i.e. L* = covered_context / step
    (never below the boundary: below it the low tier would lose money). Returns L* (tokens).
    """
    b = np.asarray(check_positive(boundary, "boundary", "a token count such as 200K"), dtype=float)
    check_positive(step, "step", "a price multiple above the boundary, e.g. 1.5")
    if covered_context is None:
        return b if b.ndim else float(b)
    lstar = np.maximum(b, np.asarray(covered_context, dtype=float) / np.asarray(step, dtype=float))
    return lstar if lstar.ndim else float(lstar)


def covered_context(crossover, step):
    """Longest context the high tier still covers at the low tier's margin: L_cover = step · L* (R35)."""
    return np.asarray(step, dtype=float) * np.asarray(crossover, dtype=float)


def kv_bytes_per_token_at_crossover(n_active, context, ratio=LECTURE_RATIO, bytes_per_param=1.0):
    """KV bytes per token that put the KV/compute crossover at ``context`` (lecture 01:38–01:40, R36).

    b = bytes_per_param · N_active / (r · L*)
      = (1/300) · 100e9 / 200e3 = 1,667 B   (lecture; bytes_per_param = 1)

    From B·L·b / BW = B · N_active / FLOPs (batch cancels; weights amortized at large batch).
    """
    return (np.asarray(bytes_per_param, dtype=float) * np.asarray(n_active, dtype=float)
            / (np.asarray(ratio, dtype=float) * np.asarray(context, dtype=float)))


def kv_bytes_per_token_from_hardware(n_active, context, peak_flops, mem_bw):
    """The same balance with the chip's raw numbers: b = 2 · N_active · BW / (FLOP/s · L*) (R36, exact)."""
    return 2.0 * np.asarray(n_active, dtype=float) * np.asarray(mem_bw, dtype=float) / (
        np.asarray(peak_flops, dtype=float) * np.asarray(context, dtype=float))


def crossover_context(n_active, kv_bytes_per_token, ratio=LECTURE_RATIO, bytes_per_param=1.0):
    """L* = bytes_per_param · N_active / (r · b): context where KV fetch = compute per token (R35, 01:38)."""
    return (np.asarray(bytes_per_param, dtype=float) * np.asarray(n_active, dtype=float)
            / (np.asarray(ratio, dtype=float) * np.asarray(kv_bytes_per_token, dtype=float)))


# --------------------------------------------------------------------------- R37: which architectures give b


def kv_bytes_per_token_arch(n_kv_layers, n_kv_heads, d_head, bytes_per_elem=2.0):
    """Dense attention: b = n_attn_layers_unshared × 2 × d_head × n_kv_heads × bytes/elem (01:42, R37).

    The 2 is K and V; n_attn_layers_unshared counts layers with their own KV (1 when a
    global KV is shared by every layer, Character.AI / Gemma style).
    """
    return (np.asarray(n_kv_layers, dtype=float) * 2.0 * np.asarray(d_head, dtype=float)
            * np.asarray(n_kv_heads, dtype=float) * np.asarray(bytes_per_elem, dtype=float))


def sparse_kv_read_bytes_per_token(dense_bytes_per_token, context, top_k, indexer_bytes_per_token=0.0):
    """Sparse attention (DeepSeek DSA): bytes read per context token = b · k/L + b_index (01:43, R37).

    Each decode step reads the top-k selected tokens' KV (k · b) plus a small index key for
    every token (L · b_index); spread over L tokens that is b · min(k, L)/L + b_index, the
    lecture's "1/sparsity term".
    """
    L = np.asarray(context, dtype=float)
    return (np.asarray(dense_bytes_per_token, dtype=float) * np.minimum(np.asarray(top_k, dtype=float), L) / L
            + np.asarray(indexer_bytes_per_token, dtype=float))


@dataclass
class ArchCandidate:
    kind: str  # "dense" or "sparse"
    n_kv_layers: int
    n_kv_heads: int
    d_head: int
    kv_dtype: str
    bytes_per_token: float  # stored per token
    read_bytes_per_token: float  # read per context token per step (= stored for dense)
    top_k: float | None = None

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def architectures_for(target_bytes_per_token, *, context=LECTURE_BOUNDARY, tolerance=1.5,
                      layers=(1, 2, 4, 8, 16, 32, 64), kv_heads=(1, 2, 4, 8), d_heads=(64, 128, 256),
                      kv_dtypes=("fp8", "bf16"), sparse_top_k=(2048,), sparse_layers=(61,),
                      sparse_kv_width=(576,)):
    """Dense GQA combinations within ``tolerance``× of the target, plus sparse options (R37, 01:42).

    Dense: b = layers × 2 × d_head × kv_heads × bytes/elem. Sparse: a per-layer latent of
    ``sparse_kv_width`` elements (DeepSeek MLA: 512 + 64 = 576) over ``sparse_layers``
    layers, reading only ``top_k`` of ``context`` tokens (DSA's 2,048).
    """
    check_positive(target_bytes_per_token, "bytes per token", "a positive number of bytes")
    L, H, D, T = np.meshgrid(np.array(layers, float), np.array(kv_heads, float), np.array(d_heads, float),
                             np.array([dtype_bytes(t) for t in kv_dtypes]), indexing="ij")
    b = kv_bytes_per_token_arch(L, H, D, T)
    ok = (b <= target_bytes_per_token * tolerance) & (b >= target_bytes_per_token / tolerance)
    names = np.array(kv_dtypes)[np.nonzero(ok)[3]]
    out = [ArchCandidate("dense", int(l), int(h), int(d), str(n), float(x), float(x))
           for l, h, d, n, x in zip(L[ok], H[ok], D[ok], names, b[ok])]
    # closest first; ties broken towards the lecture's example (d_head 128, 8 KV heads, 8-bit)
    out.sort(key=lambda c: (round(abs(np.log(c.bytes_per_token / target_bytes_per_token)), 9), c.d_head != 128,
                            -c.n_kv_heads, c.kv_dtype != "fp8"))
    for nl in sparse_layers:
        for w in sparse_kv_width:
            for dt in kv_dtypes:
                full = float(nl * w * dtype_bytes(dt))
                for k in sparse_top_k:
                    read = float(sparse_kv_read_bytes_per_token(full, context, k))
                    out.append(ArchCandidate("sparse", int(nl), 1, int(w), dt, full, read, float(k)))
    return out


# --------------------------------------------------------------------------- R38: output/input ratio


def decode_memory_factor(batch, context, *, ratio=LECTURE_RATIO, n_total, n_active, kv_bytes_per_token,
                         bytes_per_param=1.0):
    """t_memory / t_compute for one decode step: B*/B + L/L* (lecture 00:00 roofline, 01:45 R38).

    t_weights/t_compute = r · N_total / (B · N_active) = B*/B;
    t_kv/t_compute      = r · L · b / (bytes_per_param · N_active) = L/L*.
    Prefill (long passes) is compute-bound, so the output/input price ratio of a provider
    pricing at cost is max(1, this factor).
    """
    bstar = balance_batch(ratio, n_total, n_active)
    lstar = crossover_context(n_active, kv_bytes_per_token, ratio, bytes_per_param)
    return bstar / np.asarray(batch, dtype=float) + np.asarray(context, dtype=float) / lstar


def decode_mfu_from_price_ratio(price_ratio):
    """Decode's compute utilization implied by output/input price: MFU ≈ 1/ρ (R38, 01:47).

    If input (prefill) is priced at compute cost and output at decode's memory-bound cost,
    ρ = t_decode / t_compute, so decode runs at 1/ρ of the compute roofline.
    """
    return 1.0 / np.asarray(price_ratio, dtype=float)


def batch_from_price_ratio(price_ratio, context, *, ratio=LECTURE_RATIO, n_total, n_active, kv_bytes_per_token,
                           bytes_per_param=1.0):
    """The decode batch a price ratio implies: ρ = B*/B + L/L*  →  B = B* / (ρ − L/L*) (R38).

    inf when ρ ≤ L/L* (the KV fetch alone already costs more than the ratio allows).
    """
    bstar = balance_batch(ratio, n_total, n_active)
    lstar = crossover_context(n_active, kv_bytes_per_token, ratio, bytes_per_param)
    gap = np.asarray(price_ratio, dtype=float) - np.asarray(context, dtype=float) / lstar
    with np.errstate(divide="ignore"):
        return np.where(gap > 0, bstar / np.where(gap > 0, gap, 1.0), np.inf)


def cost_per_token_vs_pass(pass_len, *, batch, context, ratio=LECTURE_RATIO, n_total, n_active,
                           kv_bytes_per_token, bytes_per_param=1.0):
    """Time per token relative to compute, vs pass length P (01:45–01:47, R38):

    t/token ÷ t_compute/token = max(1, (B*/B + L/L*) / P)

    Each pass reads the weights and the context's KV once and processes B·P tokens, so
    the memory terms divide by P: P = 1 is decode (memory-bound), P ≫ 1 prefill
    (compute-bound). Multiply by 2·N_active/FLOP/s × $/s for dollars.
    """
    m = decode_memory_factor(batch, context, ratio=ratio, n_total=n_total, n_active=n_active,
                             kv_bytes_per_token=kv_bytes_per_token, bytes_per_param=bytes_per_param)
    return np.maximum(1.0, m / np.asarray(pass_len, dtype=float))


# --------------------------------------------------------------------------- deductions with derivations


@dataclass
class StepDeduction:
    """What a long-context price step says about the model (R35–R37)."""

    boundary: float
    step: float
    crossover: float
    kv_bytes_per_token: float
    kv_elements_per_token: float
    kv_dtype: str
    covered_context: float
    assumptions: dict
    candidates: list = field(default_factory=list)
    derivation: Derivation | None = None

    def as_dict(self) -> dict:
        return {"boundary": self.boundary, "step": self.step, "crossover": self.crossover,
                "kv_bytes_per_token": self.kv_bytes_per_token, "kv_elements_per_token": self.kv_elements_per_token,
                "kv_dtype": self.kv_dtype, "covered_context": self.covered_context, "assumptions": self.assumptions,
                "candidates": [c.as_dict() for c in self.candidates],
                "derivation": self.derivation.as_dict() if self.derivation else None}


def deduce_from_step(boundary=LECTURE_BOUNDARY, step=1.5, *, n_active=LECTURE_N_ACTIVE, ratio=LECTURE_RATIO,
                     bytes_per_param=1.0, kv_dtype="fp8", covered=None, source="") -> StepDeduction:
    """Price step → crossover → KV bytes per token → architectures (R35–R37), with the arithmetic."""
    check_positive(n_active, "active params", "a parameter count such as 100B")
    check_positive(ratio, "ratio", "the hardware ratio, ~300 (FLOP/s/2 over params/s)", maximum=1e5)
    check_positive(bytes_per_param, "bytes per param", "1 (8-bit weights, the lecture) or 2 (16-bit)", maximum=8)
    d = Derivation(f"Long-context price step → KV bytes per token{(' (' + source + ')') if source else ''}")
    d.add("step", "price above boundary / price below", f"boundary at {_n(boundary)} tokens", step, "×")
    lstar = d.add("L*", "crossover context (KV fetch time = compute time)",
                  "boundary (lecture 01:35: the bump sits at the crossover)" if covered is None else
                  f"max(boundary, covered / step) = max({_n(boundary)}, {_n(covered)} / {step:g})",
                  crossover_from_price_step(boundary, step, covered), "tokens")
    b = d.add("b", "bytes_per_param · N_active / (r · L*)   [B·L·b/BW = B·2·N_active/FLOPs; B cancels]",
              f"{bytes_per_param:g} · {_n(n_active)} / ({ratio:.4g} · {_n(lstar)})",
              float(kv_bytes_per_token_at_crossover(n_active, lstar, ratio, bytes_per_param)), "B",
              "bytes per token of KV; lecture: 1/300 · 100B / 200K ≈ 1,667 B")
    bpe = dtype_bytes(kv_dtype)
    el = d.add("elements", f"b / bytes per {kv_dtype} element", f"{fmt(b, 'B')} / {bpe:g}", b / bpe, "",
               "= n_kv_layers · 2 · d_head · n_kv_heads")
    cov = d.add("L_cover", "step · L*  (high tier covers cost up to here at the same margin)",
                f"{step:g} · {_n(lstar)}", float(covered_context(lstar, step)), "tokens")
    cands = architectures_for(b, context=lstar)
    best = next((c for c in cands if c.kind == "dense"), None)
    if best:
        d.add("e.g.", "n_kv_layers × 2 × d_head × n_kv_heads × bytes/elem",
              f"{best.n_kv_layers} × 2 × {best.d_head} × {best.n_kv_heads} × {dtype_bytes(best.kv_dtype):g} "
              f"({best.kv_dtype})", best.bytes_per_token, "B", "R37: 8 KV heads × d_head 128, KV shared by all layers")
    d.conclusion = (f"→ ≈ {fmt(b, 'B')}/token of KV ({el:.4g} {kv_dtype} elements) if {_n(n_active)} active params "
                    f"at ratio {ratio:.4g} cross over at {_n(lstar)} tokens")
    assumptions = {"n_active": float(n_active), "ratio": float(ratio), "bytes_per_param": float(bytes_per_param),
                   "batch_regime": "large batch: weight fetch amortized, t_kv = t_compute at L*",
                   "crossover_rule": "L* = boundary" if covered is None else f"L* = max(boundary, {covered:g}/step)"}
    return StepDeduction(float(boundary), float(step), float(lstar), float(b), float(el), kv_dtype, float(cov),
                         assumptions, cands, d)


@dataclass
class RatioDeduction:
    """What an output/input price ratio says about decode (R38)."""

    price_ratio: float
    decode_mfu: float
    implied_batch: float
    balance_batch: float
    kv_over_compute: float
    assumptions: dict
    derivation: Derivation | None = None

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("price_ratio", "decode_mfu", "implied_batch", "balance_batch",
                                              "kv_over_compute", "assumptions")} | {
            "derivation": self.derivation.as_dict() if self.derivation else None}


def deduce_from_ratio(price_ratio, *, context=8192, n_total=LECTURE_N_ACTIVE, n_active=LECTURE_N_ACTIVE,
                      kv_bytes_per_token=1667.0, ratio=LECTURE_RATIO, bytes_per_param=1.0, source="") -> RatioDeduction:
    """Output/input price ratio → decode's distance from the compute roofline and the batch it implies (R38)."""
    check_positive(price_ratio, "price ratio", "output price / input price, e.g. 5")
    check_positive(context, "context", "a token count such as 8K", allow_zero=True)
    d = Derivation(f"Output/input price ratio → how memory-bound decode is{(' (' + source + ')') if source else ''}")
    d.add("ρ", "output price / input price", "", price_ratio, "×",
          "input ≈ prefill, compute-bound; output ≈ decode (lecture 01:47)")
    mfu = d.add("MFU_decode", "1 / ρ", f"1 / {price_ratio:g}", float(decode_mfu_from_price_ratio(price_ratio)), "",
                "decode runs at this fraction of the compute roofline")
    bstar = d.add("B*", "r · N_total / N_active", f"{ratio:.4g} · {_n(n_total)} / {_n(n_active)}",
                  float(balance_batch(ratio, n_total, n_active)), "")
    lstar = float(crossover_context(n_active, kv_bytes_per_token, ratio, bytes_per_param))
    kv = d.add("L/L*", "r · L · b / (bytes_per_param · N_active)",
               f"{ratio:.4g} · {_n(context)} · {fmt(kv_bytes_per_token, 'B')} / ({bytes_per_param:g} · {_n(n_active)})",
               context / lstar, "", "KV fetch over compute per decode token")
    B = d.add("B", "B* / (ρ − L/L*)   [ρ = B*/B + L/L*]", f"{bstar:.4g} / ({price_ratio:g} − {kv:.3g})",
              float(batch_from_price_ratio(price_ratio, context, ratio=ratio, n_total=n_total, n_active=n_active,
                                           kv_bytes_per_token=kv_bytes_per_token, bytes_per_param=bytes_per_param)),
              "", "decode batch at which cost matches the ratio")
    d.conclusion = (f"→ decode at ≈ {mfu:.0%} of peak compute: {price_ratio:g}× memory-bound "
                    f"(batch ≈ {B:.3g} vs B* ≈ {bstar:.3g})")
    assumptions = {"n_total": float(n_total), "n_active": float(n_active), "ratio": float(ratio),
                   "kv_bytes_per_token": float(kv_bytes_per_token), "context": float(context),
                   "bytes_per_param": float(bytes_per_param),
                   "batch_regime": "prices ∝ cost; input = compute-bound prefill; output = decode at batch B"}
    return RatioDeduction(float(price_ratio), mfu, B, bstar, kv, assumptions, d)


# --------------------------------------------------------------------------- adapters (model / hardware)


def model_numbers(model, context=LECTURE_BOUNDARY, kv_dtype="bf16"):
    """(N_active, N_total, KV bytes/token stored, KV bytes read per context token) of a catalog model."""
    ctx = float(context)
    return (float(model.active_params), float(model.total_params),
            float(model.kv_bytes_per_token(ctx, kv_dtype)), float(model.kv_read_bytes(ctx, kv_dtype)) / ctx)


def compare_models(target_bytes_per_token, models, *, context=LECTURE_BOUNDARY, kv_dtype="bf16"):
    """Catalog models' KV bytes per token (stored, and read per context token at ``context``) vs a target (R37)."""
    rows = []
    for m in models:
        n_act, n_tot, stored, read = model_numbers(m, context, kv_dtype)
        rows.append({"model": m.name, "n_active": n_act, "kv_bytes_per_token": stored,
                     "kv_read_bytes_per_token": read, "over_target": read / float(target_bytes_per_token)})
    return rows


def pass_len_costs_for(model, hardware, pass_len, *, batch=1, context=8192, chips=None, weights_dtype=None,
                       kv_dtype=None, efficiency=None):
    """Cost per token vs pass length on a real model and system (R38): the foundation's
    ``analyses.lecture.batching.prefill_decode_costs`` (the roofline with ``pass_len``), not re-derived."""
    return prefill_decode_costs(model, hardware, pass_len, batch=batch, context=context, chips=chips,
                                weights_dtype=weights_dtype, kv_dtype=kv_dtype, efficiency=efficiency)


def fast_mode_for(sheet, model, hardware, *, context=8192, chips=None, operating_multiple=None, weights_dtype=None,
                  kv_dtype=None, efficiency=None, weight_read="hit"):
    """A price sheet's fast mode read as batching: its price multiple (output_fast / output) and
    advertised speed multiple through ``analyses.lecture.batching.fast_mode`` — the one fast-mode answer
    `batching fast-mode` and `lecture` (R1) give too (lecture 00:00, R1).

    Returns the :class:`~rackmath.analyses.lecture.batching.FastModeAnswer` (``by_speed``: the cost
    multiple the advertised speed costs; ``by_price``: the speed the price multiple buys;
    ``assumption``: the operating point that decides it). ``operating_multiple`` None: the
    shared default (2.5 × B*, "double or triple it").
    """
    fm = getattr(sheet, "fast_mode", None)
    if fm is None:
        raise InputError("sheet", f"{sheet.name} has no fast mode", "a sheet with [price_sheet.fast_mode]")
    return fast_mode(model, hardware, speedup=fm.speed_multiple, price=fm.output / sheet.output, context=context,
                     chips=chips, operating_multiple=operating_multiple or FAST_OPERATING_MULTIPLE,
                     weights_dtype=weights_dtype, kv_dtype=kv_dtype, efficiency=efficiency, weight_read=weight_read)
