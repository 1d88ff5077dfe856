"""The roofline: time = max(compute time, memory time), for weights and KV cache.

Lecture 00:00–00:15 (claim R3). For one forward pass of ``batch`` sequences, each
advancing ``pass_len`` tokens (1 = a decode step, > 1 = a prefill chunk) after
``context`` tokens already in its KV cache, on ``chips`` chips working together:

    t_compute = FLOPs / (chips · peak · η_compute)
    t_weights = weight bytes read / (chips · HBM bandwidth · η_memory)
    t_kv      = KV bytes read / (chips · HBM bandwidth · η_memory)
    t_step    = max(t_compute, t_weights + t_kv) + fixed overhead

Every input broadcasts as a numpy array, so a 10⁶-point sweep is one call.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError, check_positive
from ..explain import Derivation, fmt
from .efficiency import Efficiency, load_efficiency
from ..results import ResultMixin, broadcast_fields
from .step import (_small_m_penalty, attention_kernels, compose, ELEMENTWISE_KERNELS_PER_LAYER, gemm_efficiency, Op,
                   op_kernels, ops_table)
from .. import units
from ..specs.hardware import load_hardware
from ..specs.models import load_model

BOUND_NAMES = np.array(["compute", "weights", "kv"])


# --------------------------------------------------------------------------- equations


def expected_experts_hit(n_experts, k, tokens):
    """Expected distinct experts hit when ``tokens`` tokens each route to k of E experts.

    E_hit = E · (1 − (1 − k/E)^T)   (each expert is missed by one token with
    probability 1 − k/E; routing taken as uniform and independent). At T = 1 this is
    k; as T grows it saturates at E. Reading *every* expert at small batch, or only
    the top-k at any batch, are the two common mistakes (reference/examples.md).
    """
    E = np.asarray(n_experts, dtype=float)
    T = np.asarray(tokens, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        p_miss = np.where(E > 0, 1.0 - np.asarray(k, dtype=float) / np.where(E > 0, E, 1.0), 1.0)
        hit = E * -np.expm1(T * np.log(np.maximum(p_miss, 1e-300)))
    return np.where((E > 0) & (T > 0), np.minimum(hit, E), 0.0)


WEIGHT_READ_MODES = ("hit", "all")


def check_weight_read(weight_read):
    """Validate a weight-read mode: "hit" (experts the batch routes to) or "all" (the lecture's N_total)."""
    if weight_read not in WEIGHT_READ_MODES:
        raise InputError("weight_read", f"{weight_read!r} is not a weight-read mode",
                         "hit (only the experts the batch routes to) or all (every weight, every step: the lecture)")
    return weight_read


def weights_read_bytes(model, tokens, dtype=None, weight_read="hit"):
    """Weight bytes streamed from HBM for one pass over ``tokens`` tokens.

    ``weight_read="all"`` is the lecture's premise (00:00, R3: "fetch all of the weights …
    the total number of parameters, not just the active parameters"): every routed
    expert is read every step whatever the batch, E_hit = E. ``"hit"`` (default) reads
    only the expected distinct experts the batch routes to (below).

    W_read = W_dense + n_moe_layers · E_hit(T) · W_expert, where W_dense is every
    weight read whatever the routing (attention, dense FFNs, shared experts, LM head;
    not the input embedding table, which is only looked up) and W_expert one routed
    expert of one layer. For a dense model this is all the weights (lecture 00:00:
    "fetch the total number of parameters").
    """
    check_weight_read(weight_read)
    dense = model.dense_weight_bytes(dtype)
    if not getattr(model, "n_experts", 0):
        return np.broadcast_to(np.asarray(dense, dtype=float), np.shape(tokens)).astype(float)
    if weight_read == "all":
        hit = np.broadcast_to(np.asarray(float(model.n_experts)), np.shape(tokens))
    else:
        hit = expected_experts_hit(model.n_experts, model.experts_per_token, tokens)
    return dense + model.n_moe_layers * hit * model.expert_weight_bytes(dtype)


def attended_context(context, pass_len):
    """Mean number of earlier tokens each token of a pass attends to: L + (P − 1)/2 (causal chunk)."""
    return np.asarray(context, dtype=float) + (np.asarray(pass_len, dtype=float) - 1.0) / 2.0


def step_flops(model, batch, context, pass_len=1, prefill=False):
    """FLOPs of one pass: matmuls plus attention.

    F = B · P · (2 · N_active' + F_attn(L + (P − 1)/2)), N_active' = active params less
    the input embedding table (lecture 00:00: "multiply by all of the active
    parameters", attention FLOPs included here rather than ignored). ``prefill``: the
    attention of a prompt pass (:func:`attention_flops`).
    """
    tokens = np.asarray(batch, dtype=float) * np.asarray(pass_len, dtype=float)
    return matmul_flops(model, tokens) + attention_flops(model, batch, context, pass_len, prefill=prefill)


def matmul_flops(model, tokens):
    """Weight-matmul FLOPs: F_mm = 2 · N_active' · tokens."""
    return np.asarray(tokens, dtype=float) * model.matmul_flops_per_token


def attention_flops(model, batch, context, pass_len=1, prefill=False):
    """Attention FLOPs: F_attn = B · P · attention_flops_per_token(L + (P − 1)/2); ``prefill``: in the prompt
    pass's form (MLA un-absorbed, ``ModelSpec.prefill_attention_flops_per_attended_token``)."""
    tokens = np.asarray(batch, dtype=float) * np.asarray(pass_len, dtype=float)
    return tokens * model.attention_flops_per_token(attended_context(context, pass_len), prefill=prefill)


def kv_step_bytes(model, batch, context, pass_len=1, kv_dtype="bf16"):
    """KV bytes one pass reads: B · kv_read_bytes(L) (lecture 00:00: "for every element of the
    batch, fetch an entire context length worth of tokens").

    A prefill chunk reads its cached prefix once (flash attention keeps the chunk's own
    keys on chip; lecture 01:40: "no adjustment at all to the memory time"). Writing
    the new tokens' KV is ignored, as in the lecture (writes are ≪ reads, R11).
    """
    del pass_len  # the read is per pass, independent of chunk length
    return np.asarray(batch, dtype=float) * model.kv_read_bytes(context, kv_dtype)


def compute_time(flops, chips, peak, eta=1.0):
    """t_compute = FLOPs / (chips · peak · η)."""
    return np.asarray(flops, dtype=float) / (np.asarray(chips, dtype=float) * peak * eta)


def memory_time(nbytes, chips, bandwidth, eta=1.0):
    """t_mem = bytes / (chips · bandwidth · η)."""
    return np.asarray(nbytes, dtype=float) / (np.asarray(chips, dtype=float) * bandwidth * eta)


def step_time(t_compute, t_weights, t_kv, overhead=0.0):
    """t_step = max(t_compute, t_weights + t_kv) + overhead (lecture 00:00, R3): the overlapped composition of
    :func:`rackmath.engine.step.compose` with zero latencies, kept as the lecture's one-line form."""
    return np.maximum(t_compute, t_weights + t_kv) + overhead


def pass_ops(model, tokens, f_attn, kv_read, chips, peak, attn_peak, dtype=None, weight_read="hit", mla_scale=1.0):
    """The operators of one pass over ``tokens`` tokens spread perfectly over ``chips`` chips (engine/step.py).

    Dense weights by component (attention projections, dense FFN, router, shared experts, LM
    head: each read once, GEMM of T rows), the routed experts (E_hit experts read per MoE layer,
    T·k/E_hit rows each) and attention (the KV read, FLOPs at the KV dtype's peak). Their sums
    are the lecture's F = T · 2N_active' + F_attn and W_read + KV_read. ``mla_scale`` multiplies an MLA
    block's kernels (the preset's ``mla_kernel_scale``).
    """
    T = np.asarray(tokens, dtype=float)
    n = np.asarray(chips, dtype=float)
    pb = model.param_breakdown

    def wb(c):
        return float(pb[c] * model._dtype_of(c, dtype))

    tied = bool(model.tie_embeddings)
    comps = (("qkv_o", wb("attention") + wb("norms"), pb["attention"], model.n_layers),
             ("dense_ffn", wb("dense_ffn"), pb["dense_ffn"], model.n_dense_layers),
             ("router", wb("router"), pb["router"], model.n_moe_layers),
             ("shared_experts", wb("shared_experts"), pb["shared_experts"], model.n_moe_layers),
             ("lm_head", wb("lm_head") + (wb("embedding") if tied else 0.0),
              pb["lm_head"] + (pb["embedding"] if tied else 0.0), 1))
    mla = getattr(model, "attention", "") == "mla"
    scale = mla_scale if mla else 1.0
    t_n = T / n  # tokens per chip: one array shared by the weight GEMMs (a sweep allocates it once)
    ops = [Op(name, flops=t_n * (2.0 * params), bytes=nbytes / n, peak=peak, m=T,
              kernels=op_kernels("qkv_o_mla" if name == "qkv_o" and mla else name, nbytes, params, scale) * layers)
           for name, nbytes, params, layers in comps if nbytes > 0 or params > 0]
    if getattr(model, "n_experts", 0):
        k, nm = model.experts_per_token, model.n_moe_layers
        hit = expected_experts_hit(model.n_experts, k, T)
        read = np.full_like(np.asarray(hit, dtype=float), float(model.n_experts)) if weight_read == "all" else hit
        ops.append(Op("experts", flops=2.0 * T * k * nm * model.expert_params / n,
                      bytes=nm * read * model.expert_weight_bytes(dtype) / n, peak=peak,
                      m=T * k / np.maximum(hit, 1e-9),
                      kernels=op_kernels("experts", model.expert_weight_bytes(dtype), model.expert_params) * nm))
    dsa = getattr(model, "sparse_attention", False)
    ops.append(Op("attention", flops=np.asarray(f_attn, dtype=float) / n, bytes=np.asarray(kv_read, dtype=float) / n,
                  peak=attn_peak, kernels=attention_kernels(dsa, scale) * model.n_layers, kv=True, mla=mla))
    ops.append(Op("elementwise", kernels=ELEMENTWISE_KERNELS_PER_LAYER * model.n_layers))
    return ops


def binding_term(t_compute, t_weights, t_kv):
    """0 = compute binds, 1 = weight fetch binds, 2 = KV fetch binds (the larger memory term)."""
    t_w, t_kv = np.asarray(t_weights), np.asarray(t_kv)
    mem = t_w + t_kv
    return np.where(np.asarray(t_compute) >= mem, np.int8(0), np.int8(2) - (t_w >= t_kv))  # int8: a sweep's codes


def usd_per_mtok(chips, usd_per_chip_hour, tok_s):
    """$ per million tokens = chips · ($/chip-h ÷ 3600) / X · 10⁶, X tokens/s (lecture 00:10: rent × time ÷ tokens).

    The one $/Mtok formula: roofline (X = T / t_step), layout, serve, plan, compare, simulate and the plots call it.
    """
    return np.asarray(chips, dtype=float) * usd_per_chip_hour / 3600.0 / np.asarray(tok_s, dtype=float) * 1e6


# --------------------------------------------------------------------------- result


@dataclass(repr=False)
class RooflineResult(ResultMixin):
    """Arrays broadcast from the inputs. ``bound`` names the binding term per point. ``as_dict()`` broadcasts
    every field to one shape; ``to_frame()``, a concise repr and ``_repr_html_`` come from ``ResultMixin``."""

    _SUMMARY = (("step_s", "s"), ("tokens_per_s_per_chip", "tok/s"), ("usd_per_mtok", "$"))

    model: object
    hardware: object
    chips: np.ndarray
    batch: np.ndarray
    context: np.ndarray
    pass_len: np.ndarray
    weights_dtype: str
    kv_dtype: str
    compute_dtype: str
    efficiency: Efficiency
    flops: np.ndarray
    weight_bytes_read: np.ndarray
    kv_bytes_read: np.ndarray
    t_compute_s: np.ndarray
    t_weights_s: np.ndarray
    t_kv_s: np.ndarray
    step_s: np.ndarray
    bound_code: np.ndarray
    peak_flops: float
    usd_per_chip_hour: float
    extras: dict = field(default_factory=dict)

    # derived metrics (cheap, computed on access)
    @property
    def energy(self):
        """Energy per token (``analyses.lecture.energy.EnergyResult``) as ``rackmath.roofline`` asked for it (PUE, $/kWh,
        power cap), computed when first read: a sweep that never reads it does not pay for it. None without."""
        if "energy" not in self.extras:
            fn = self.extras.get("energy_of")
            self.extras["energy"] = fn(self) if fn is not None else None
        return self.extras["energy"]

    @energy.setter
    def energy(self, value):
        self.extras["energy"] = value

    @property
    def t_memory_s(self):
        return self.t_weights_s + self.t_kv_s

    @property
    def bound(self):
        """'compute', 'weights' or 'kv' per point (memory-bound points name the larger memory term)."""
        return BOUND_NAMES[self.bound_code]

    @property
    def tokens(self):
        return self.batch * self.pass_len

    @property
    def tokens_per_s(self):
        """System throughput: B · P / t_step."""
        return self.tokens / self.step_s

    @property
    def tokens_per_s_per_chip(self):
        return self.tokens_per_s / self.chips

    @property
    def tokens_per_s_per_seq(self):
        """Per-sequence speed: P / t_step (decode: tokens/s one user sees)."""
        return self.pass_len / self.step_s

    @property
    def latency_per_token_s(self):
        """Time per token of one sequence: t_step / P (decode: the step time, i.e. TPOT)."""
        return self.step_s / self.pass_len

    @property
    def usd_per_mtok(self):
        """$ per million tokens processed by this pass (P = 1: output tokens; P > 1: input tokens)."""
        return usd_per_mtok(self.chips, self.usd_per_chip_hour, self.tokens / self.step_s)

    @property
    def mfu(self):
        """Model FLOPs utilisation: Σ_ops FLOPs_op / (chips · peak_op · t_step) (not t_compute · η_c / t_step, which
        counts the small-GEMM penalty η_c(M) as useful work).

        Each operation counts against the peak of the dtype it is timed at (matmuls at the weights'
        compute dtype, attention at the KV dtype's), so MFU ≤ 1 under every dtype mix; with one dtype it
        is the usual FLOPs / (chips · peak · t_step)."""
        times = self.extras.get("times")
        if times is None:
            return self.t_compute_s * self.efficiency.eta_compute / self.step_s
        at_peak = sum(np.asarray(op.flops, dtype=float) / op.peak for op in times.ops)  # per chip, η = 1
        return at_peak / self.step_s

    @property
    def mbu(self):
        """Memory-bandwidth utilisation: bytes read / (chips · HBM bandwidth · t_step)."""
        return (self.weight_bytes_read + self.kv_bytes_read) / (self.chips * self.hardware.chip.hbm_bw * self.step_s)

    @property
    def memory_bytes_per_chip(self):
        """Capacity needed per chip: (all weights + B · KV held at L + P) / chips (perfect sharding, no pipeline)."""
        w = self.model.weight_bytes(self._wdt)
        kv = self.batch * self.model.kv_cache_bytes(self.context + self.pass_len, self.kv_dtype)
        return (w + kv) / self.chips

    @property
    def _wdt(self):
        """The weights dtype the pass was computed with: None = each component as published (``weights_dtype`` then
        names the model's native dtype, which some components — gpt-oss's attention, DeepSeek's norms — do not use)."""
        return self.extras.get("weights_dtype_arg", self.weights_dtype)

    @property
    def fits(self):
        return self.memory_bytes_per_chip <= self.hardware.chip.hbm_bytes

    FIELDS = ("chips", "batch", "context", "pass_len", "step_s", "t_compute_s", "t_weights_s", "t_kv_s", "t_memory_s",
              "bound", "tokens_per_s", "tokens_per_s_per_chip", "tokens_per_s_per_seq", "latency_per_token_s",
              "usd_per_mtok", "mfu", "mbu", "flops", "weight_bytes_read", "kv_bytes_read", "memory_bytes_per_chip",
              "fits")

    def as_dict(self) -> dict:
        out = {
            "model": self.model.name,
            "hardware": self.hardware.name,
            "chip": self.hardware.chip.name,
            "weights_dtype": self.weights_dtype,
            "kv_dtype": self.kv_dtype,
            "compute_dtype": self.compute_dtype,
            "efficiency": self.efficiency.name,
            "weight_read": self.extras.get("weight_read", "hit"),
        }
        return broadcast_fields(out | {f: getattr(self, f) for f in self.FIELDS}, self.FIELDS)

    def at(self, i=0) -> dict:
        """One configuration (flat index ``i``) as plain floats."""
        out = {}
        for f in self.FIELDS:
            v = np.asarray(getattr(self, f))
            v = np.broadcast_to(v, np.broadcast_shapes(v.shape, self.step_s.shape)).ravel()[i]
            out[f] = v.item() if hasattr(v, "item") else v
        return out

    def ops(self, i: int = 0) -> list[dict]:
        """Per-operator breakdown of configuration ``i`` (``--ops``): FLOPs, bytes, intensity, time, binding term."""
        return ops_table(self.extras["times"], index=i)

    def _compute_groups(self, i: int = 0) -> dict:
        """Configuration ``i``'s operators grouped by (peak, η_c(M)): {(peak, η): (FLOPs of all chips, names)} — the
        terms of t_compute as the step model costs them (engine/step.op_terms)."""
        eff, times = self.efficiency, self.extras["times"]
        n = float(np.broadcast_to(self.chips, self.step_s.shape).ravel()[i])
        out: dict = {}
        for op in times.ops:
            f = float(np.broadcast_to(np.asarray(op.flops, dtype=float), self.step_s.shape).ravel()[i]) * n
            if f == 0:
                continue
            eta = np.asarray(eff.eta_compute, dtype=float)
            if op.m is not None and _small_m_penalty(eff):
                m = float(np.broadcast_to(np.asarray(op.m, dtype=float), self.step_s.shape).ravel()[i])
                eta = gemm_efficiency(eff.eta_compute, m, eff.gemm_half_tokens)
            key = (float(op.peak), float(np.asarray(eta).ravel()[0]))
            f0, names = out.get(key, (0.0, ""))
            out[key] = (f0 + f, f"{names}, {op.name}" if names else op.name)
        return out

    def explain(self, i: int = 0, **where) -> Derivation:
        """The blackboard derivation of configuration ``i`` (a flat index), or of the one whose fields equal
        ``where`` (``r.explain(batch=64)``, :meth:`index`): each formula with its numbers."""
        if where:
            i = self.index(**where)
        m, hw, chip = self.model, self.hardware, self.hardware.chip
        p = self.at(i)
        B, L, P, n = p["batch"], p["context"], p["pass_len"], p["chips"]
        eff = self.efficiency
        d = Derivation(f"Roofline: {m.name} on {n:g} × {chip.name} ({hw.name}), batch {B:g}, context {L:g}, "
                       f"pass {P:g}, weights {self.weights_dtype}, KV {self.kv_dtype}, efficiency {eff.name}")
        tokens = d.add("T", "B · P", f"{B:g} · {P:g}", B * P, "", "tokens this pass")
        attn = float(np.asarray(m.attention_flops_per_token(attended_context(L, P))))
        d.add("F", "T · (2·N_active' + F_attn(L + (P−1)/2))",
              f"{tokens:g} · ({fmt(m.matmul_flops_per_token, 'FLOP')} + {fmt(attn, 'FLOP')})", p["flops"], "FLOP")
        groups = self._compute_groups(i)
        d.add("t_compute", "Σ_ops F_op / (chips · peak_op · η_c(M))  (attention at the KV dtype's peak; "
              "η_c(M) = η_c · M / (M + M½) for a GEMM of M rows)",
              " + ".join(f"{fmt(f, 'FLOP')} / ({n:g} · {fmt(pk, 'FLOP/s')} · {eta:.4g}) [{names}]"
                         for (pk, eta), (f, names) in groups.items()),
              p["t_compute_s"], "s", "the operators grouped by peak and η_c(M)")
        if getattr(m, "n_experts", 0) and self.extras.get("weight_read") == "all":
            hit = float(m.n_experts)
            d.add("E_hit", "E (weight read = all: every expert, every step, as the lecture)", f"{m.n_experts}", hit, "",
                  "routed experts read per MoE layer")
        elif getattr(m, "n_experts", 0):
            hit = float(expected_experts_hit(m.n_experts, m.experts_per_token, tokens))
            d.add("E_hit", "E · (1 − (1 − k/E)^T)", f"{m.n_experts} · (1 − (1 − {m.experts_per_token}/{m.n_experts})"
                  f"^{tokens:g})", hit, "", "distinct routed experts read per MoE layer")
            d.add("W_read", "W_dense + n_moe_layers · E_hit · W_expert",
                  f"{fmt(m.dense_weight_bytes(self._wdt), 'B')} + {m.n_moe_layers} · {hit:.4g} · "
                  f"{fmt(m.expert_weight_bytes(self._wdt), 'B')}", p["weight_bytes_read"], "B")
        else:
            d.add("W_read", "weights (less the input embedding)", "", p["weight_bytes_read"], "B")
        bw = chip.hbm_bw
        d.add("t_weights", "W_read / (chips · BW · η_m)",
              f"{fmt(p['weight_bytes_read'], 'B')} / ({n:g} · {fmt(bw, 'B/s')} · {eff.eta_memory:g})",
              p["t_weights_s"], "s")
        per_seq = float(np.asarray(m.kv_read_bytes(L, self.kv_dtype)))
        d.add("KV_read", "B · kv_read_bytes(L)", f"{B:g} · {fmt(per_seq, 'B')}", p["kv_bytes_read"], "B")
        d.add("t_kv", "KV_read / (chips · BW · η_m)",
              f"{fmt(p['kv_bytes_read'], 'B')} / ({n:g} · {fmt(bw, 'B/s')} · {eff.eta_memory:g})", p["t_kv_s"], "s")
        times = self.extras.get("times")
        ov = float(np.asarray(eff.step_overhead_s).ravel()[0])
        if times is None or times.composition == "overlap":
            lat = float(np.asarray(self.extras.get("t_latency_s", 0.0)).ravel()[i]) if times is not None else 0.0
            extra = (f" + {fmt(lat, 's')}" if lat else "") + (f" + {fmt(ov, 's')}" if ov else "")
            d.add("t_step", "max(t_compute, t_weights + t_kv)" + (" + latencies" if lat else "")
                  + (" + overhead" if ov else ""),
                  f"max({fmt(p['t_compute_s'], 's')}, {fmt(p['t_weights_s'], 's')} + {fmt(p['t_kv_s'], 's')}){extra}",
                  p["step_s"], "s", f"{p['bound']} binds", expr=f"max(t_compute, t_weights + t_kv) + {lat!r} + {ov!r}")
        else:
            parts = [(name, float(np.broadcast_to(t, self.step_s.shape).ravel()[i])) for name, t in times.time.items()]
            d.add("t_step", "Σ_ops [n_kernels·τ + max(F_op/(peak·η_c(M)), B_op/(BW·η_m))] + t_sched",
                  " + ".join(f"{fmt(v, 's')} [{name}]" for name, v in parts) + f" + {fmt(ov, 's')}",
                  p["step_s"], "s", f"kernel-serial ({eff.name}); {p['bound']} is the largest term",
                  expr=" + ".join(repr(v) for _, v in parts) + f" + {ov!r}")
        d.add("throughput", "T / t_step", f"{tokens:g} / {fmt(p['step_s'], 's')}", p["tokens_per_s"], "tok/s",
              f"{fmt(p['tokens_per_s_per_chip'], 'tok/s')} per chip, {fmt(p['tokens_per_s_per_seq'], 'tok/s')} "
              f"per sequence", expr="T / t_step")
        d.add("cost", "chips · $/h ÷ 3600 · t_step / T · 10⁶",
              f"{n:g} · ${self.usd_per_chip_hour:g}/h ÷ 3600 · {fmt(p['step_s'], 's')} / {tokens:g} · 10⁶",
              p["usd_per_mtok"], "$/Mtok", "output tokens" if P == 1 else "input (prefill) tokens")
        by_peak: dict = {}
        for (pk, _), (f, _) in groups.items():
            by_peak[pk] = by_peak.get(pk, 0.0) + f
        d.add("MFU", "Σ_ops F_op / (chips · peak_op) / t_step (each op at its dtype's peak)",
              "(" + " + ".join(f"{fmt(f, 'FLOP')} / ({n:g} · {fmt(pk, 'FLOP/s')})" for pk, f in by_peak.items())
              + f") / {fmt(p['step_s'], 's')}", p["mfu"], "", f"MBU {p['mbu']:.3f}")
        d.conclusion = (f"→ {p['bound']}-bound: {fmt(p['step_s'], 's')} per step, "
                        f"{fmt(p['usd_per_mtok'], '')} $/Mtok; memory/chip {fmt(p['memory_bytes_per_chip'], 'B')}"
                        f" of {fmt(chip.hbm_bytes, 'B')} ({'fits' if p['fits'] else 'does NOT fit'})")
        return d


# --------------------------------------------------------------------------- entry point

_MAX = {"batch": 1e9, "context": 1e10, "pass_len": 1e9, "chips": 1e7}


def _resolve(model, hardware):
    return load_model(model), load_hardware(hardware)


def roofline(model, hardware, *, chips=None, batch, context, pass_len=1, weights_dtype=None, kv_dtype=None,
             efficiency=None, weight_read="hit") -> RooflineResult:
    """Roofline step time and its consequences for ``model`` on ``hardware`` (names or objects).

    ``chips`` defaults to one scale-up domain of the system. ``weights_dtype`` None means
    the model's published dtype; ``kv_dtype`` None means the model's own KV dtype (bf16 for published models). ``efficiency`` None is the
    lecture's ideal roofline; a preset name or an :class:`Efficiency` derates it.
    All of ``chips``, ``batch``, ``context``, ``pass_len`` broadcast as numpy arrays.
    ``weight_read`` "hit" (default) reads the experts the batch routes to; "all" reads
    every weight every step, as the lecture does (see :func:`weights_read_bytes`).
    """
    model, hw = _resolve(model, hardware)
    chip = hw.chip
    eff = load_efficiency(efficiency)
    chips = hw.scaleup_size if chips is None else chips
    arrs = {}
    for name, v, lo in (("chips", chips, 1), ("batch", batch, 0), ("context", context, 0), ("pass_len", pass_len, 1)):
        a = np.asarray(v, dtype=float)
        check_positive(a, name, f"a positive number (≥ {lo})" if lo else "a positive number", allow_zero=(lo == 0),
                       maximum=_MAX[name])
        if lo and np.any(a < lo):
            raise InputError(name, f"{a[a < lo].flat[0]:g} is below {lo}", f"a number ≥ {lo}")
        arrs[name] = a
    if np.any(arrs["batch"] <= 0):
        raise InputError("batch", "0 sequences", "a positive number of sequences")
    wdt = units.normalize_dtype(weights_dtype, "weights_dtype") if weights_dtype else None
    kvdt = units.normalize_dtype(kv_dtype or model.kv_dtype, "kv_dtype")
    compute_dtype = chip.gemm_dtype(wdt or model.native_dtype)
    peak = chip.flops[compute_dtype]
    attn_peak = chip.peak_flops(kvdt)
    n, B, L, P = arrs["chips"], arrs["batch"], arrs["context"], arrs["pass_len"]

    tokens = B if np.ndim(P) == 0 and float(P) == 1.0 else B * P  # decode: T = B (no copy of a sweep's array)
    f_mm = matmul_flops(model, tokens)
    f_attn = attention_flops(model, B, L, P)
    flops = f_mm + f_attn
    w_read = weights_read_bytes(model, tokens, wdt, check_weight_read(weight_read))
    kv_read = kv_step_bytes(model, B, L, P, kvdt)
    ops = pass_ops(model, tokens, f_attn, kv_read, n, peak, attn_peak, wdt, weight_read, eff.mla_kernel_scale)
    times = compose(ops, chip.hbm_bw, eff)
    shape = np.broadcast_shapes(n.shape, B.shape, L.shape, P.shape, np.shape(times.step))
    t_c, t_w, t_kv = (np.broadcast_to(x, shape) for x in (times.t_compute, times.t_weights, times.t_kv))
    step = np.broadcast_to(times.step, shape)
    return RooflineResult(
        model=model, hardware=hw, chips=n, batch=B, context=L, pass_len=P,
        weights_dtype=wdt or model.native_dtype, kv_dtype=kvdt, compute_dtype=compute_dtype, efficiency=eff,
        flops=np.broadcast_to(flops, shape), weight_bytes_read=np.broadcast_to(w_read, shape),
        kv_bytes_read=np.broadcast_to(kv_read, shape), t_compute_s=t_c, t_weights_s=t_w, t_kv_s=t_kv,
        step_s=step, bound_code=binding_term(t_c, t_w, t_kv), peak_flops=peak, usd_per_chip_hour=chip.usd_per_hour,
        extras={"times": times, "t_latency_s": np.broadcast_to(times.t_latency, shape), "weight_read": weight_read,
                "weights_dtype_arg": wdt},
    )
