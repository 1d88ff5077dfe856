"""Training time, chip-hours, cost, MFU and memory per chip of a deployment: :func:`train` and the layout search
(:func:`search_training_layout`), what `rackmath train`, the Python API and the web page call.

Adapters over the one-line equations of :mod:`.equations` and the calibrated step model of :mod:`.step` (issue 38,
with the fitted parameters of ``specs/data/training/presets.toml``). Units: FLOPs, FLOP/s (dense), bytes, bytes/s,
seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...errors import InputError, check_positive
from ...explain import Derivation, fmt
from ...results import ResultMixin
from ...specs import training_records as trr
from .equations import (OPTIMIZER_BYTES, RECOMPUTE, SCHEDULES, ZERO_STAGES, achieved_flops_per_chip,
                        activation_bytes_per_chip, activation_bytes_per_layer, attention_training_flops,
                        model_state_bytes_per_param, params_per_chip, training_flops, mfu, train_time)
from .explain import add_step_terms
from .step import (FRAMEWORKS, IDEAL_PARAMS, PEAK_KEY, QUANT_BYTES, SHARDINGS, TRAIN_DTYPES, _RECOMPUTE_CODE,
                   _SHARD_CODE, _expert_params, mean_attention_flops_per_token, step_inputs, step_terms)


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

    One keyword per `rackmath train` option (the CLI, the API and the web page pass them by name); the layout is
    ``par``. ``model`` is a ModelSpec, ``hardware`` a System (or Chip). With ``mfu_given``, ``flops_per_chip`` or
    ``chip_hours_given`` the run time is C / (chips · F) (measured-efficiency mode); otherwise the step model
    (:func:`.step.step_terms`) with ``preset`` sets F: "auto" (default, as `rackmath train`) = the fitted preset of
    the chip's family and ``framework``, None or "ideal" = the bound (:func:`resolve_preset`). ``dp_overlap`` is kept
    for callers of the earlier model and unused (the overlap is in :func:`.step.step_terms`).
    """
    chip = getattr(hardware, "chip", hardware)
    par = par or Parallelism()
    chips = _check_layout(model, par, par.chips if chips is None else chips, tokens, seq_len)
    tdt = training_dtype(dtype)
    peak = float(chip.peak_flops(PEAK_KEY[tdt]))
    params, pname, plabel = resolve_preset(chip, preset, framework, eta_compute)
    d = Derivation(f"Training {model.name} on {chips:g} × {chip.name}")
    c_dense, c_attn, c = _add_flops(d, model, tokens, seq_len, include_attention)

    # ---- the step model ----------------------------------------------------------------
    gbt, B, mb, M = _batch(par, seq_len, global_batch_tokens)
    rfrac = min(1.0, par.recompute_layers / (float(model.n_layers) / par.pp)) if par.recompute_layers else 0.0
    x = step_inputs(model, chip, domain=int(getattr(hardware, "scaleup_size", 1) or 1), gpus=chips, global_batch=B,
                    seq=seq_len, micro_batch=mb, tp=par.tp, pp=par.pp, cp=par.cp, ep=par.ep, vp=par.v, dtype=tdt,
                    recompute=par.recompute, sharding=par.sharding_mode, fsdp_group=par.fsdp_group,
                    recompute_fraction=rfrac)
    terms = {k: _f(v) for k, v in step_terms(x, params).items()}
    flops_per_step = _f(c) / tokens * gbt
    step = dict(terms)
    step.update({"global_batch_tokens": gbt, "global_batch_seqs": B, "microbatch_seqs": mb, "microbatches": M,
                 "flops_per_step": flops_per_step, "t_math_s": terms["t_work_s"],
                 "bubble_fraction": terms["t_bubble_s"] / (terms["t_work_s"] + terms["t_bubble_s"]),
                 "mfu": flops_per_step / (chips * terms["t_step_s"]) / peak, "preset": pname})
    memory = _memory(model, chip, par, seq_len, mb, M, rfrac)

    # ---- the headline: measured-efficiency mode or the step model --------------------------
    given = _given_flops(d, c, peak, mfu_given, flops_per_chip, chip_hours_given)
    if given is not None:
        achieved, mode, label = given
    else:
        d.add("preset", pname, "", ", ".join(f"{k} = {v:.4g}" for k, v in params.items()), "", plabel)
        d.add("M", "B / (dp · b)", "", M, "", "micro-batches per step", expr=f"{B!r} / ({float(par.dp)!r} * {mb!r})")
        add_step_terms(d, x, params, terms, M)
        achieved = d.add("F", "C_step / (chips · t_step)", "", flops_per_step / (chips * terms["t_step_s"]), "FLOP/s",
                         expr=f"{flops_per_step!r} / ({float(chips)!r} * t_step)")
        d.add("tokens/s/GPU", "B·s / (chips · t_step)", "", terms["tokens_per_s_per_gpu"], "tok/s",
              expr=f"{B!r} * {float(seq_len)!r} / ({float(chips)!r} * t_step)")
        mode, label = ("ideal bound" if pname == "ideal" else "calibrated"), plabel
    m, t, ch, usd = _add_cost(d, c, chips, achieved, peak, float(chip.usd_per_hour if usd_per_hour is None
                                                                    else usd_per_hour))
    d.conclusion = (f"{fmt(t / 86400)} days, {fmt(ch)} chip-hours at MFU {m:.1%}; memory/chip "
                    f"{fmt(memory['total_bytes'], 'B')} of {fmt(chip.hbm_bytes, 'B')}")
    pd = dict(par.__dict__)
    pd.update(sharding=par.sharding_mode, dtype=tdt, framework=framework, microbatches=M, micro_batch=mb)
    return TrainingResult(
        model=model.name, hardware=getattr(hardware, "name", chip.name), chips=int(chips), tokens=float(tokens),
        seq_len=float(seq_len), flops_dense=c_dense, flops_attention=c_attn, flops_total=c, peak_flops=peak,
        achieved_flops=achieved, mfu=m, time_s=t, chip_hours=ch, usd=usd, step=step, memory=memory,
        parallelism=pd, mode=mode, preset=pname, label=label, derivation=d)


def _check_layout(model, par: Parallelism, chips, tokens, seq_len) -> int | float:
    """Check the run's numbers and the layout; a plain layout (no degree given) fills the chips with data parallelism
    (``par.dp`` set). Returns the chips."""
    check_positive(chips, "chips", "a positive number of chips")
    check_positive(tokens, "tokens", "training tokens, e.g. '15T'")
    check_positive(seq_len, "seq", "a sequence length in tokens, e.g. '8192'")
    if par.chips == 1 and chips > 1:
        par.dp = int(chips)
    if par.chips != int(chips):
        raise InputError("chips", f"{chips:g} chips but dp·tp·pp·cp = {par.dp}·{par.tp}·{par.pp}·{par.cp} = "
                                  f"{par.chips}", "chips = dp × tp × pp × cp (give --dp or leave it out to fill the chips)")
    par.validate(getattr(model, "n_layers", None))
    return chips


def _add_flops(d: Derivation, model, tokens, seq_len, include_attention) -> tuple[float, float, float]:
    """C_dense = 6·N·D, C_attn = 3·F̄_attn(s)·D and C = their sum, added to ``d`` (lecture 01:18:59; Kaplan 2020)."""
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
    return c_dense, c_attn, c


def _batch(par: Parallelism, seq_len, global_batch_tokens) -> tuple[float, float, float, float]:
    """(tokens per step, B sequences per step, b sequences per micro-batch, M = B/(dp·b) micro-batches): the global
    batch defaults to max(s·dp, 4M tokens); the micro-batch to 1 or B/(dp·M) when M is given."""
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
    return gbt, B, mb, B / (par.dp * mb)


def _memory(model, chip, par: Parallelism, seq_len, mb, M, rfrac=0.0) -> dict:
    """Memory per chip: model state = parameters per chip (:func:`.equations.params_per_chip`) × bytes per parameter
    under the sharding (:func:`.equations.model_state_bytes_per_param`), plus the first stage's activations
    (:func:`.equations.activation_bytes_per_chip`; a share ``rfrac`` of the layers fully recomputed keeps only its
    input)."""
    layers = float(getattr(model, "n_layers", 1))
    h = float(getattr(model, "d_model", 0) or 0)
    heads = float(getattr(model, "n_heads", 0) or 1)
    total = float(model.total_params)
    expert_params = _expert_params(model)
    ppc = _f(params_per_chip(total - expert_params, expert_params, par.tp, par.pp, par.ep))
    shard_n = par.fsdp_group or par.dp * par.cp
    bpp = _f(model_state_bytes_per_param(shard_n, par.zero_equivalent, par.optimizer))
    state = ppc * bpp
    per_layer = _f(activation_bytes_per_layer(seq_len / par.cp, mb, h, heads, par.tp, par.sequence_parallel,
                                              par.recompute))
    if rfrac:  # a share of the layers keeps only its input (full recompute)
        per_layer = (1 - rfrac) * per_layer + rfrac * _f(activation_bytes_per_layer(
            seq_len / par.cp, mb, h, heads, par.tp, par.sequence_parallel, "full"))
    acts = _f(activation_bytes_per_chip(per_layer, layers, par.pp, M, par.schedule, par.v))
    return {"params_per_chip": ppc, "model_state_bytes": state, "activation_bytes_per_layer": per_layer,
            "activation_bytes": acts, "total_bytes": state + acts, "hbm_bytes": float(chip.hbm_bytes),
            "fits": bool(state + acts <= chip.hbm_bytes), "bytes_per_param": bpp}


def _given_flops(d: Derivation, c, peak, mfu_given, flops_per_chip, chip_hours_given):
    """Measured-efficiency mode: (F, mode, label) from the one of --chip-hours, --tflops, --mfu given, added to
    ``d``; None when none is (the step model sets F)."""
    if sum(x_ is not None for x_ in (flops_per_chip, mfu_given, chip_hours_given)) > 1:
        raise InputError("mfu", "give at most one of --mfu, --tflops, --chip-hours", "one of them, or none for "
                         "the step model")
    if chip_hours_given is not None:
        check_positive(chip_hours_given, "chip-hours", "reported chip-hours, e.g. '2.664M'")
        achieved = d.add("F", "C / (chip-hours · 3600)", f"{fmt(c)} / ({fmt(chip_hours_given)} · 3600)",
                         _f(achieved_flops_per_chip(c, chip_hours_given)), "FLOP/s", "implied by reported chip-hours")
        return achieved, "implied by chip-hours", "time implied by the reported GPU-hours"
    if flops_per_chip is not None:
        check_positive(flops_per_chip, "tflops", "achieved FLOP/s per chip, e.g. '400 TFLOP/s'")
        achieved = float(flops_per_chip)
        d.add("F", "given", "", achieved, "FLOP/s")
        return achieved, "given TFLOP/s per chip", "time from the given TFLOP/s"
    if mfu_given is not None:
        check_positive(mfu_given, "mfu", "a model FLOP utilisation in (0, 1]", maximum=1.0)
        achieved = d.add("F", "MFU · peak", f"{mfu_given:g} · {fmt(peak, 'FLOP/s')}", mfu_given * peak, "FLOP/s")
        return achieved, "given MFU", "time from the given MFU"
    return None


def _add_cost(d: Derivation, c, chips, achieved, peak, price) -> tuple[float, float, float, float]:
    """MFU = F/peak, T = C/(chips·F), chip-hours = chips·T/3600 and cost = chip-hours · $/chip-hour, added to ``d``."""
    m = d.add("MFU", "F / peak", f"{fmt(achieved, 'FLOP/s')} / {fmt(peak, 'FLOP/s')}", _f(mfu(achieved, peak)))
    t = d.add("T", "C / (chips · F)", f"{fmt(c)} / ({chips:g} · {fmt(achieved, 'FLOP/s')})",
              _f(train_time(c, chips, achieved)), "s")
    ch = d.add("chip-hours", "chips · T / 3600", f"{chips:g} · {fmt(t, 's')} / 3600", chips * t / 3600.0)
    usd = d.add("cost", "chip-hours · $/chip-hour", f"{fmt(ch)} · ${price:g}", ch * price, "$")
    return m, t, ch, usd


def search_training_layout(model, hardware, *, chips: int, fixed: dict | None = None, preset="auto",
                           framework: str = "megatron", dtype: str = "bf16", tokens: float = 1.0,
                           seq_len: float = 8192, global_batch_tokens: float | None = None, **train_kw):
    """The fastest layout that fits, as ``serve`` chooses a serving layout, all candidates in one vectorized call of
    :func:`.step.step_terms`: every TP (a divisor of the chips up to the scale-up domain), PP (powers of two up to the
    layers), CP (1, and 2–8 for sequences of 16K and more), sharding (ZeRO-1 distributed optimizer, FSDP full shard)
    and recomputation (selective, full, and selective with the fewest layers per stage fully recomputed that make a
    layout fit), virtual stages by :func:`default_vp`, DP = chips / (TP·PP·CP), ranked by the step time among those
    whose memory per chip fits. ``fixed`` holds what the user gave (tp, pp, dp, cp, ep, v,
    micro_batch, microbatches, zero_stage, sharding, recompute, …), which is kept.
    Returns ``(TrainingResult, Parallelism, {"evaluated": n, "fit": k})``; if nothing fits, the layout with the least
    memory per chip (its result says it does not fit)."""
    fixed = dict(fixed or {})
    chip = getattr(hardware, "chip", hardware)
    layers = int(getattr(model, "n_layers", 1) or 1)
    chips = int(chips)
    tdt = training_dtype(dtype)
    params, _, _ = resolve_preset(chip, preset, framework, train_kw.get("eta_compute"))
    base = {k: v for k, v in fixed.items() if k not in ("tp", "pp", "dp", "cp", "zero_stage", "sharding", "recompute",
                                                         "v", "schedule")}
    Parallelism(**{k: v for k, v in base.items() if k != "ep"}).validate()  # bad names/values fail before the search
    check_positive(base.get("ep", 1), "ep", "an expert-parallel degree ≥ 1")
    cands = _layout_candidates(model, chips, int(getattr(hardware, "scaleup_size", 1) or 1), seq_len, fixed,
                               framework)
    gbt = float(global_batch_tokens or max(seq_len * max(c[3] for c in cands), 4e6))
    B = gbt / seq_len
    arr = {k: np.array([c[i] for c in cands], dtype=float) for i, k in enumerate(("tp", "pp", "cp", "dp", "v"))}
    arr["mb"] = np.full(len(cands), float(fixed.get("micro_batch") or 1.0))
    if fixed.get("microbatches") and not fixed.get("micro_batch"):
        arr["mb"] = B / (arr["dp"] * float(fixed["microbatches"]))
    arr["ok"] = B / arr["dp"] >= arr["mb"] * (1 - 1e-9)
    arr["M"] = B / (arr["dp"] * arr["mb"])
    arr["state"], arr["acts"] = _candidate_memory(model, cands, arr, seq_len, fixed, base)
    hbm = float(chip.hbm_bytes)
    rlayers = _add_partial_recompute(cands, arr, layers, hbm)
    mem = arr["state"] + arr["acts"]
    rfrac = np.array([min(1.0, n / (layers / c[1])) for n, c in zip(rlayers, cands)])
    x = step_inputs(model, chip, domain=int(getattr(hardware, "scaleup_size", 1) or 1), gpus=chips, global_batch=B,
                    seq=seq_len, micro_batch=arr["mb"], tp=arr["tp"], pp=arr["pp"], cp=arr["cp"],
                    ep=float(base.get("ep", 1)), vp=arr["v"], dtype=tdt)
    x["recompute"] = np.array([_RECOMPUTE_CODE[c[6]] for c in cands], float) + rfrac
    x["sharding"] = np.array([_SHARD_CODE[c[5]] for c in cands], float)
    x["fsdp_group"] = float(base.get("fsdp_group", 0) or 0)
    t_step = step_terms(x, params)["t_step_s"]
    ok = arr["ok"]
    fits = ok & (mem <= hbm)
    n_eval, n_fit = int(ok.sum()), int(fits.sum())
    if n_fit:
        i = int(np.lexsort((arr["tp"] * arr["pp"], np.where(fits, t_step, np.inf)))[0])
    else:
        i = int(np.argmin(np.where(ok, mem, np.inf)))
    tp, pp, cp, dp, v, sh, rc = cands[i]
    kw = {k: val for k, val in base.items() if k not in ("micro_batch", "microbatches")}
    par = Parallelism(dp=dp, tp=tp, pp=pp, cp=cp, v=v, schedule="interleaved" if v > 1 else
                      (fixed.get("schedule") or "1f1b"), sharding=sh, recompute=rc, recompute_layers=rlayers[i],
                      zero_stage=int(fixed.get("zero_stage", 1) if fixed.get("zero_stage") is not None else 1),
                      micro_batch=float(arr["mb"][i]), **kw)
    r = train(model, hardware, chips=chips, par=par, preset=preset, framework=framework, dtype=dtype, tokens=tokens,
              seq_len=seq_len, global_batch_tokens=gbt, **train_kw)
    return r, par, {"evaluated": n_eval, "fit": n_fit}


def _layout_candidates(model, chips: int, scaleup: int, seq_len, fixed: dict, framework: str) -> list[tuple]:
    """Every (tp, pp, cp, dp, v, sharding, recompute) the search ranks (:func:`search_training_layout`), with what
    ``fixed`` holds kept; an FSDP-only stack (llm-foundry) runs no tensor, pipeline or context parallelism."""
    layers = int(getattr(model, "n_layers", 1) or 1)
    ep = fixed.get("ep", 1)
    fsdp_only = framework == "fsdp"
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
                if pp * v > layers or ep > dp * cp * tp:
                    continue
                cands += [(tp, pp, cp, dp, v, sh, rc) for sh in shards for rc in recs]
    if not cands:
        raise InputError("gpus", f"no layout of {chips} chips is valid for {model.name}",
                         "a chip count that divides by TP·PP·CP, or explicit --tp/--pp/--cp/--dp")
    return cands


def _candidate_memory(model, cands: list[tuple], arr: dict, seq_len, fixed: dict, base: dict):
    """(model state, activation) bytes per chip of every candidate, by the functions :func:`train` uses."""
    layers = int(getattr(model, "n_layers", 1) or 1)
    expert = _expert_params(model)
    total = float(model.total_params)
    ppc = params_per_chip(total - expert, expert, arr["tp"], arr["pp"], float(base.get("ep", 1)))
    opt = base.get("optimizer", "adam-mixed")
    fsdp_group = float(base.get("fsdp_group", 0) or 0)
    shard_n = np.where(fsdp_group > 0, fsdp_group, arr["dp"] * arr["cp"])
    zero_eq = {"full_shard": 3, "shard_grad_op": 2, "none": int(fixed.get("zero_stage", 1) or 1)}
    bpp = np.array([_f(model_state_bytes_per_param(n, zero_eq[c[5]], opt)) for n, c in zip(shard_n, cands)])
    h, heads = float(model.d_model), float(getattr(model, "n_heads", 1) or 1)
    sched = np.where(arr["v"] > 1, "interleaved", fixed.get("schedule") or "1f1b")
    acts = np.zeros(len(cands))
    for rc in set(c[6] for c in cands):
        sel = np.array([c[6] == rc for c in cands])
        per = activation_bytes_per_layer(seq_len / arr["cp"][sel], arr["mb"][sel], h, heads, arr["tp"][sel],
                                         base.get("sequence_parallel", True), rc)
        for i, j in enumerate(np.flatnonzero(sel)):
            acts[j] = _f(activation_bytes_per_chip(np.asarray(per)[i] if np.ndim(per) else per, layers,
                                                   arr["pp"][j], arr["M"][j], str(sched[j]), arr["v"][j]))
    return ppc * bpp, acts


def _add_partial_recompute(cands: list[tuple], arr: dict, layers: int, hbm: float) -> list[int]:
    """Selective recomputation that does not fit, where full does: add the candidate that fully recomputes the fewest
    layers per stage that make it fit (Megatron's --recompute-num-layers), to ``cands`` and every array of ``arr``.
    Returns the fully recomputed layers per stage of every candidate."""
    state, acts = arr["state"], arr["acts"]
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
            if k != "acts":
                arr[k] = np.append(arr[k], arr[k][i])
        arr["acts"] = np.append(arr["acts"], (1 - f) * acts[i] + f * acts[j])
    return rlayers
