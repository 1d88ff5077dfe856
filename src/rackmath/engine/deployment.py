"""A deployment: one validated layout of a real model on a real system, and the rules a layout must keep.

:class:`Deployment` is ``chips`` chips of a ``specs.hardware.System`` cut TP × EP × PP (attention DP optional),
validated against the system and the model (the lecture's ways out when experts do not divide, 00:32); it derives
memory per chip (c_mem, :class:`MemoryFit`), communication and step time through ``engine/layout.evaluate``. The
``check_*`` functions are the layout rules the search, serve and simulate apply to the degrees a user gives.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..specs.hardware import load_hardware
from ..units import dtype_bytes
from .comms import divisors as _divisors
from .layout import LayoutArrays, attention_ranks, evaluate, experts_per_chip
from .numbers import HwNumbers, ModelNumbers, load_model_any


def ep_way_out(n_slots: int, ep: int) -> str:
    """The lecture's ways out when experts do not divide over EP chips (00:32: 256 experts on 72 GPUs)."""
    n_slots, ep = int(n_slots), int(ep)
    fit = max(d for d in _divisors(n_slots) if d <= ep)
    r = -(-n_slots // ep) * ep - n_slots
    return (f"use ep={fit} ({fit} of the {ep} GPUs, {n_slots // fit} experts each), "
            f"or add {r} redundant experts ({n_slots + r} = {(n_slots + r) // ep} × {ep}), "
            f"or allow uneven placement (the most-loaded GPU holds {-(-n_slots // ep)})")


def check_attention_dp_size(size, tp) -> int:
    """The attention-DP group count a user gave, validated: a positive divisor of TP (0 = TP, the default)."""
    if size is None:
        return 0
    accepted = "a divisor of tp: " + ", ".join(str(d) for d in _divisors(int(tp)))
    if isinstance(size, bool) or not isinstance(size, (int, float, np.integer, np.floating)) or int(size) != size \
            or size < 1:
        raise InputError("attention_dp_size", f"{size!r} is not a positive integer", accepted)
    size = int(size)
    if tp % size:
        raise InputError("attention_dp_size", f"{size} attention-DP groups do not divide TP {tp}", accepted)
    return 0 if size == tp else size


def with_attention_groups(tp, ep, pp, adp, heads: int = 0):
    """Layout rows with attention DP repeated once per group count R dividing TP, 2 ≤ R ≤ TP (SGLang ``--tp T --dp R
    --enable-dp-attention``); rows without attention DP keep R = 1. Returns (tp, ep, pp, adp, R). With ``heads``
    (the model's attention heads) a group's TP/R chips must divide them (:func:`attention_tp_ok`)."""
    tp, ep, pp, adp = (np.asarray(x) for x in (tp, ep, pp, adp))
    reps = [[d for d in _divisors(int(t)) if d > 1 and attention_tp_ok(int(t) // d, heads)] if a else [1]
            for t, a in zip(tp, adp)]
    idx = np.repeat(np.arange(len(tp)), [len(r) for r in reps])
    ranks = np.array([r for rs in reps for r in rs], dtype=float)
    return tp[idx], ep[idx], pp[idx], adp[idx], ranks


def attention_tp_ok(tp: int, heads: int, kv_heads: int = 1) -> bool:
    """Whether attention splits over ``tp`` chips: TP divides the query heads (every serving stack requires it:
    vLLM, SGLang, TensorRT-LLM), and the KV heads split evenly or are replicated (KV | TP or TP | KV). ``heads``
    0 = unknown (not checked)."""
    if tp <= 1 or heads <= 0:
        return True
    return heads % tp == 0 and (kv_heads <= 1 or kv_heads % tp == 0 or tp % kv_heads == 0)


def check_attention_tp(mn, tp: int, gpus: int) -> None:
    """An explicit attention TP the model's heads cannot split over is a one-line error naming the TPs that can
    (:func:`attention_tp_ok`)."""
    if attention_tp_ok(int(tp), mn.tp_heads, mn.kv_heads):
        return
    ways = [str(d) for d in range(1, int(gpus) + 1) if attention_tp_ok(d, mn.tp_heads, mn.kv_heads)]
    kv = f" and {mn.kv_heads} KV heads" if mn.kv_heads > 1 else ""
    raise InputError("tp", f"tp={tp} does not split {mn.name}'s {mn.n_heads} attention heads{kv}",
                     f"a TP that does ({', '.join(ways)}), or --attention-dp")


def attention_dp_label(size, tp) -> str:
    """``attnDP`` (every chip its own sequences) or ``attnDP{R}`` (R groups of TP/R chips)."""
    return "attnDP" if not size or size == tp else f"attnDP{int(size)}"


#: The keywords :meth:`Deployment.evaluate` passes on to ``engine.layout.evaluate``.
_COSTING_OPTIONS = ("overlap", "hop_latency_s", "usable_fraction", "reserve_bytes", "collective_latency_s")


def check_chips(system, chips: int) -> int:
    """A whole chip count for ``system``: at least 1, at most the system's ``max_chips`` (one NVL72 rack: 72)."""
    if chips < 1:
        raise InputError("chips", f"{chips} is not a positive integer", "a whole number of GPUs")
    if system.max_chips is not None and chips > system.max_chips:
        raise InputError("chips", f"{chips} exceeds the {system.max_chips} chips of one {system.name}",
                         f"at most {system.max_chips}")
    return chips


@dataclass(frozen=True)
class Deployment:
    """One validated layout: ``chips`` chips of ``system`` cut TP × EP × PP, replicated ``dp`` times.

    Build with :meth:`Deployment.build` (validates); evaluate with :meth:`evaluate`.
    """

    system: object  # specs.hardware.System
    chips: int
    tp: int = 1
    ep: int = 1
    pp: int = 1
    attention_dp: bool = False
    redundant_experts: int = 0
    uneven_experts: bool = False
    allow_idle: bool = False
    attention_dp_size: int = 0  # attention-DP groups R of the TP group (0: TP, every chip its own sequences)

    # ---- construction and validation
    @classmethod
    def build(cls, system, chips=None, *, tp=None, ep=1, pp=1, attention_dp=False, redundant_experts=0,
              uneven_experts=False, allow_idle=False, model=None, attention_dp_size=None) -> "Deployment":
        """Validate and build. ``chips`` defaults to one scale-up domain; ``tp`` to chips / pp.

        ``attention_dp_size`` R (implies ``attention_dp``): attention runs data-parallel over R groups of TP/R
        chips (SGLang's ``--tp T --dp R --enable-dp-attention``); it must divide TP. R = TP (the default; None or
        0) is every chip its own sequences.
        """
        system = load_hardware(system)
        S = int(system.scaleup_size)
        chips = S if chips is None else chips
        for name, v in (("chips", chips), ("ep", ep), ("pp", pp), ("redundant_experts", redundant_experts)):
            if v is None:
                continue
            if int(v) != v or v < (0 if name == "redundant_experts" else 1):
                raise InputError(name, f"{v!r} is not a {'non-negative' if name == 'redundant_experts' else 'positive'} "
                                 "integer", "a whole number of GPUs" if name != "redundant_experts" else "0 or more")
        chips, ep, pp, redundant_experts = int(chips), int(ep), int(pp), int(redundant_experts)
        if tp is None:
            if chips % pp:
                raise InputError("pp", f"{pp} stages do not divide {chips} chips", f"a divisor of {chips}")
            tp = chips // pp
        if int(tp) != tp or tp < 1:
            raise InputError("tp", f"{tp!r} is not a positive integer", "a whole number of GPUs")
        tp = int(tp)
        check_chips(system, chips)
        if tp * pp > chips:
            raise InputError("chips", f"TP·PP = {tp}·{pp} = {tp * pp} needs more than the {chips} chips",
                             f"chips ≥ {tp * pp}, or smaller tp/pp")
        if chips % (tp * pp) and not allow_idle:
            used = chips // (tp * pp) * tp * pp
            raise InputError("chips", f"{chips} chips is not a multiple of TP·PP = {tp * pp}",
                             f"chips = {tp * pp}·n; or use {used} of the {chips} (allow_idle) as the lecture does "
                             "with 64 of 72 GPUs")
        if tp % ep:
            raise InputError("ep", f"EP {ep} does not divide TP {tp} (EP runs within the TP group, conventions.md)",
                             "a divisor of tp: " + ", ".join(str(d) for d in _divisors(tp)))
        given = attention_dp_size not in (None, 0)  # 0: the default, every chip its own sequences
        adp_size = check_attention_dp_size(attention_dp_size if given else None, tp)
        if model is not None:
            model = load_model_any(model)
            cls._validate_model(model, tp, ep, pp, redundant_experts, uneven_experts)
        return cls(system, chips, tp, ep, pp, bool(attention_dp) or given, redundant_experts,
                   bool(uneven_experts), bool(allow_idle), adp_size)

    @staticmethod
    def _validate_model(model, tp, ep, pp, redundant, uneven):
        n_exp = int(getattr(model, "n_experts", 0) or 0)
        n_layers = int(model.n_layers)
        if pp > n_layers:
            raise InputError("pp", f"{pp} stages for {n_layers} layers", f"at most {n_layers}")
        if not n_exp:
            if ep > 1:
                raise InputError("ep", f"{model.name} is dense (no experts) but ep={ep}", "ep=1 for dense models")
            if redundant:
                raise InputError("redundant_experts", f"{model.name} has no experts", "0")
            return
        slots = n_exp + redundant
        if ep > slots:
            raise InputError("ep", f"ep={ep} GPUs for {slots} expert slots leaves GPUs without experts",
                             f"ep ≤ {slots}, or add redundant experts")
        if slots % ep and not uneven:
            raise InputError("ep", f"{slots} experts do not divide over ep={ep} GPUs ({slots / ep:.3g} each)",
                             ep_way_out(slots, ep))

    def validate_for(self, model) -> "Deployment":
        self._validate_model(model, self.tp, self.ep, self.pp, self.redundant_experts, self.uneven_experts)
        return self

    # ---- derived quantities
    @property
    def scaleup_size(self) -> int:
        return int(self.system.scaleup_size)

    @property
    def chips_per_replica(self) -> int:
        """tp · pp (conventions.md: replicas = GPUs ÷ (T·PP))."""
        return self.tp * self.pp

    @property
    def dp(self) -> int:
        """Replicas: chips // (tp · pp)."""
        return self.chips // self.chips_per_replica

    @property
    def chips_used(self) -> int:
        return self.dp * self.chips_per_replica

    @property
    def idle_chips(self) -> int:
        return self.chips - self.chips_used

    @property
    def moe_tp(self) -> int:
        """MoE tensor-parallel degree within the TP group: tp / ep."""
        return self.tp // self.ep

    @property
    def attention_ranks(self) -> int:
        """Attention-DP groups R of the TP group (:func:`attention_ranks`)."""
        return int(attention_ranks(self.tp, self.attention_dp, self.attention_dp_size))

    @property
    def domains_per_replica(self) -> int:
        """Scale-up domains one replica spans: ceil(tp·pp / S) (at least 1)."""
        return max(1, -(-self.chips_per_replica // self.scaleup_size))

    @property
    def ep_spans_domains(self) -> bool:
        """Whether the EP all-to-all leaves the scale-up domain (ep > S)."""
        return self.ep > self.scaleup_size

    def experts_per_chip(self, model) -> int:
        """Routed experts (slots) per layer on the most-loaded chip: ceil((E + redundant) / ep)."""
        n = int(getattr(model, "n_experts", 0) or 0)
        return int(experts_per_chip(n + self.redundant_experts, self.ep)) if n else 0

    def label(self) -> str:
        parts = [f"TP{self.tp}"]
        if self.ep > 1:
            parts.append(f"EP{self.ep}")
        if self.attention_dp:
            parts.append(attention_dp_label(self.attention_dp_size, self.tp))
        if self.pp > 1:
            parts.append(f"PP{self.pp}")
        parts.append(f"×{self.dp}")
        return " ".join(parts)

    def as_dict(self) -> dict:
        return {"system": self.system.name, "chips": self.chips, "tp": self.tp, "ep": self.ep, "pp": self.pp,
                "dp": self.dp, "attention_dp": self.attention_dp, "attention_dp_size": self.attention_ranks,
                "redundant_experts": self.redundant_experts,
                "moe_tp": self.moe_tp, "chips_per_replica": self.chips_per_replica, "idle_chips": self.idle_chips,
                "domains_per_replica": self.domains_per_replica, "ep_spans_domains": self.ep_spans_domains}

    # ---- evaluation
    def hw_numbers(self, weights_dtype=None, model=None, efficiency=None) -> HwNumbers:
        dtype = weights_dtype or (getattr(model, "native_dtype", None) if model is not None else None) or "bf16"
        return HwNumbers.from_system(self.system, dtype, efficiency)

    def evaluate(self, model, *, concurrency=None, micro_batch=None, context, pass_len=1, weights_dtype=None,
                 kv_dtype=None, efficiency=None, act_dtype="bf16", **options) -> LayoutArrays:
        """Memory, communication and step time of this deployment serving ``model``.

        Give ``concurrency`` (sequences in flight over the whole deployment, conventions.md) or the
        per-replica ``micro_batch`` b (B = P·b per replica). Vectorized in both (not in ``context``).
        ``options``: :func:`~rackmath.engine.layout.evaluate`'s costing keywords (``overlap``, ``hop_latency_s``,
        ``usable_fraction``, ``reserve_bytes``, ``collective_latency_s``).
        """
        unknown = sorted(set(options) - set(_COSTING_OPTIONS))
        if unknown:
            raise TypeError(f"Deployment.evaluate() got an unexpected keyword argument {unknown[0]!r}")
        model = load_model_any(model)
        self.validate_for(model)
        mn = model if isinstance(model, ModelNumbers) else ModelNumbers.from_model(
            model, context, pass_len=pass_len, weights_dtype=weights_dtype, kv_dtype=kv_dtype)
        if micro_batch is None:
            if concurrency is None:
                raise InputError("concurrency", "missing", "sequences in flight (or micro_batch per replica)")
            micro_batch = np.asarray(concurrency, dtype=float) / (self.dp * self.pp)
        hw = self.hw_numbers(weights_dtype, model, efficiency)
        return evaluate(mn, hw, tp=self.tp, ep=self.ep, pp=self.pp, micro_batch=micro_batch,
                        attention_dp=self.attention_dp, adp_ranks=self.attention_ranks, chips=self.chips,
                        redundant_experts=self.redundant_experts, act_bytes=dtype_bytes(act_dtype), **options)

    def memory(self, model, *, concurrency, context, weights_dtype=None, kv_dtype=None, **kw) -> "MemoryFit":
        """Memory per chip (c_mem), whether it fits, headroom, largest concurrency and longest context that fit."""
        res = self.evaluate(model, concurrency=concurrency, context=context, weights_dtype=weights_dtype,
                            kv_dtype=kv_dtype, **kw)
        r = res.row(0)
        max_ctx = self.max_context(model, concurrency=concurrency, weights_dtype=weights_dtype, kv_dtype=kv_dtype, **kw)
        return MemoryFit(self, r["weight_bytes_per_chip"], r["kv_bytes_per_chip"], r["workspace_bytes_per_chip"],
                         r["mem_per_chip"], r["mem_capacity"], r["headroom_bytes"], bool(r["fits"]),
                         r["max_concurrency"], max_ctx, res.explain(0))

    def max_context(self, model, *, concurrency, weights_dtype=None, kv_dtype=None, hi=1e8, **kw) -> float:
        """Longest context (tokens) at which ``concurrency`` sequences still fit (bisection on log-context)."""
        def fits(ctx):
            return bool(self.evaluate(model, concurrency=concurrency, context=ctx, weights_dtype=weights_dtype,
                                      kv_dtype=kv_dtype, **kw).row(0)["fits"])

        lo = 1.0
        if not fits(lo):
            return 0.0
        if fits(hi):
            return float(hi)
        for _ in range(40):
            mid = np.sqrt(lo * hi)
            lo, hi = (mid, hi) if fits(mid) else (lo, mid)
            if hi / lo < 1.001:
                break
        return float(np.floor(lo))


@dataclass
class MemoryFit:
    """Memory per chip of a deployment (lecture c_mem, 01:03:37)."""

    deployment: Deployment
    weight_bytes: float
    kv_bytes: float
    workspace_bytes: float
    total_bytes: float
    capacity_bytes: float
    headroom_bytes: float
    fits: bool
    max_concurrency: float
    max_context: float
    derivation: object = None

    def as_dict(self) -> dict:
        out = {k: getattr(self, k) for k in ("weight_bytes", "kv_bytes", "workspace_bytes", "total_bytes",
                                             "capacity_bytes", "headroom_bytes", "fits", "max_concurrency",
                                             "max_context")}
        out["deployment"] = self.deployment.as_dict()
        return out


# --------------------------------------------------------------------------------------
# Layout search: every valid (TP, EP, PP, attention DP, micro-batch) at once
# --------------------------------------------------------------------------------------


__all__ = [
    "Deployment", "MemoryFit", "check_chips", "ep_way_out", "check_attention_dp_size", "with_attention_groups",
    "attention_tp_ok", "check_attention_tp", "attention_dp_label",
]
