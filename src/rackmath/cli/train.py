"""`rackmath train`, `overtrain`, `scaling …`, `revnet`: training economics (lecture 01:18–01:33, 02:04–end)."""

from __future__ import annotations

import typer


from .common import (EXPLAIN_OPT, JSON_OPT, MODEL_ARG, POWER_CAP_OPT, PUE_OPT, USD_OPT, USD_PER_KWH_OPT, dtype_check,
                     gpus_opt, hardware_opt, print_derivation)
from ..options import training_energy  # noqa: F401 (moved to the library; the old name stays importable)

scaling_app = typer.Typer(help="Scaling laws: Chinchilla L(N, D) and Clark et al.'s routed-model law.",
                          no_args_is_help=True)


def _count(text, field):
    from .. import units

    return units.parse_count(text, field)


MAX_CHIPS = 1e6  # chips, and any parallel degree: more than any cluster


def _int(text, field, maximum: float = MAX_CHIPS):
    from .. import units

    v = units.parse_count(text, field)
    if v != int(v) or v < 1 or v > maximum:
        from ..errors import InputError

        raise InputError(field, f"{text!r} is not a positive integer up to {maximum:g}", "an integer ≥ 1")
    return int(v)


def _out(d: dict, derivation, json: bool, explain: bool, rows: list, title: str, caption: str | None = None):
    from .common import print_derivation, print_json, table

    if json:
        if derivation is not None:
            d = d | {"derivation": derivation.as_dict()}
        print_json(d)
    elif explain and derivation is not None:
        print_derivation(derivation)
    else:
        table(title, ["quantity", "value"], [[str(a), str(b)] for a, b in rows], caption)


def train_cmd(
    model: str = MODEL_ARG,
    hardware: str = hardware_opt("hgx-h100"),
    chips: str = gpus_opt(None, "GPUs (default: dp·tp·pp·cp, or one scale-up domain)."),
    tokens: str = typer.Option(..., "--tokens", "-D", help="Training tokens, e.g. '15T'."),
    mfu: float = typer.Option(None, "--mfu", help="Achieved model FLOP utilisation (0–1): overrides the step model."),
    tflops: str = typer.Option(None, "--tflops", help="Achieved FLOP/s per chip, e.g. '400 TFLOP/s' or '400' (TF)."),
    chip_hours: str = typer.Option(None, "--gpu-hours", help="Reported GPU-hours (e.g. '30.84M'): implies MFU."),
    seq: str = typer.Option("8192", "--seq", help="Sequence length (tokens; 8K = 8,000, 8Ki = 8,192)."),
    global_batch: str = typer.Option(None, "--global-batch", help="Tokens per step (default max(4M, seq·dp))."),
    dp: str = typer.Option(None, "--dp", help="Data-parallel degree (default: searched)."),
    tp: str = typer.Option(None, "--tp", help="Tensor-parallel degree (default: searched)."),
    pp: str = typer.Option(None, "--pp", help="Pipeline stages (default: searched)."),
    cp: str = typer.Option(None, "--cp", help="Context-parallel degree (ring attention; default: searched, 1 below "
                                              "16K tokens)."),
    ep: str = typer.Option("1", "--ep", help="Expert-parallel degree (MoE)."),
    vp: str = typer.Option(None, "--vp", "--chunks", help="Virtual (interleaved) stages per pipeline rank (default: "
                                                          "about 2 layers each, NVIDIA's recipes)."),
    micro_batch: str = typer.Option(None, "--micro-batch", help="Sequences per micro-batch (default 1)."),
    microbatches: str = typer.Option(None, "--microbatches", "-M", "--grad-accum",
                                     help="Micro-batches per step per replica (gradient accumulation); instead of "
                                          "--micro-batch."),
    schedule: str = typer.Option(None, "--schedule", help="gpipe, 1f1b or interleaved (default: interleaved when "
                                                          "pp > 1)."),
    zero: int = typer.Option(None, "--zero", help="ZeRO stage 0–3 (1 = Megatron's distributed optimizer, 3 = FSDP "
                                                  "full shard; default: searched)."),
    fsdp: str = typer.Option(None, "--fsdp", help="Sharding: none, shard_grad_op or full_shard (FSDP; default: "
                                                  "searched)."),
    fsdp_group: str = typer.Option(None, "--fsdp-group", help="GPUs one sharding group spans (HSDP; default: all "
                                                              "data-parallel ranks)."),
    framework: str = typer.Option(None, "--framework", help="megatron (Megatron-LM/NeMo) or fsdp (llm-foundry-style "
                                                            "FSDP only): picks the fitted preset (default: fsdp with "
                                                            "--fsdp and no --tp/--pp, else megatron)."),
    ideal: bool = typer.Option(False, "--ideal", help="The ideal bound (every GEMM at peak, no overheads): a lower "
                                                      "bound on time."),
    preset: str = typer.Option(None, "--efficiency", help="A training preset by name, or auto (default: the fitted "
                                                          "preset of the chip's family and the framework; rackmath "
                                                          "validate --train --refit prints them)."),
    optimizer: str = typer.Option("adam-mixed", "--optimizer", help="adam-mixed (16 B/param), adam-mixed-fp32grad, "
                                  "adam-fp32, momentum-mixed."),
    recompute: str = typer.Option(None, "--recompute", help="none, selective or full (default: searched)."),
    no_sp: bool = typer.Option(False, "--no-sequence-parallel", help="Turn off sequence parallelism."),
    dtype: str = typer.Option("bf16", "--dtype", help="GEMM precision: bf16, fp8, mxfp8, nvfp4 (its peak defines "
                                                      "MFU)."),
    eta: float = typer.Option(None, "--eta", help="Override the preset's large-GEMM efficiency (0–1)."),
    no_attention: bool = typer.Option(False, "--no-attention", help="Count 6·N·D only (no attention FLOPs)."),
    usd: str = USD_OPT,
    pue: str = PUE_OPT,
    usd_per_kwh: str = USD_PER_KWH_OPT,
    power_cap: str = POWER_CAP_OPT,
    json: bool = JSON_OPT,
    explain: bool = EXPLAIN_OPT,
):
    """Training compute (6·N·D + attention), time, GPU-hours, cost, energy, MFU and memory per GPU.

    Calibrated by default: the step model (GEMMs, attention, recompute, TP/CP/EP/PP/DP communication, bubbles,
    optimizer) with the fitted preset of the chip's family and the framework (docs/training.md); --ideal gives the
    bound; --mfu/--tflops/--gpu-hours override it. Without --tp/--pp/--cp/--dp/--zero/--recompute the fastest layout
    that fits in memory is searched (and said so).
    \f
    One parameter per option of `rackmath train` (typer reads them from the signature). Longer than 80 lines: its signature is the option list."""
    from ..specs.hardware import load_hardware
    from ..specs.models import load_model
    from .common import power_capped, priced

    tdt, preset, sharding, sched = _check_choices(eta, dtype, ideal, preset, schedule, fsdp, framework)
    m = load_model(model)
    hw = load_hardware(power_capped(priced(hardware, usd), power_cap))
    deg = _degrees(hw, tp=tp, pp=pp, cp=cp, ep=ep, vp=vp, gpus=chips, dp=dp)
    fw = (framework.lower() if framework else
          "fsdp" if sharding in ("full_shard", "shard_grad_op") and not deg["tp"] and not deg["pp"] else "megatron")
    flops = _tflops(tflops)
    if deg["vp"] is not None and deg["vp"] > 1:
        from ..errors import InputError

        if sched not in (None, "interleaved"):
            raise InputError("vp", f"--vp {deg['vp']} with --schedule {sched}", "--vp with the interleaved schedule")
        sched = "interleaved"
    kw = dict(tokens=_count(tokens, "tokens"), seq_len=_count(seq, "seq"),
              global_batch_tokens=_count(global_batch, "global-batch") if global_batch else None,
              mfu_given=mfu, flops_per_chip=flops,
              chip_hours_given=_count(chip_hours, "chip-hours") if chip_hours else None, dtype=tdt,
              eta_compute=eta, include_attention=not no_attention,
              preset=None if ideal else ((preset or "auto").lower()), framework=fw)
    fixed = _fixed(deg, sched, optimizer, no_sp, micro_batch, microbatches, fsdp_group)
    r, par, searched = _layout_and_train(m, hw, deg, fixed, sched, zero, sharding,
                                         recompute.lower() if recompute else None, kw)
    en = training_energy(r, hw, pue=pue, usd_per_kwh=usd_per_kwh, power_cap=power_cap)
    e_ = en["result"]
    rows = _rows(r, par, m, hw, tdt, searched) + _energy_rows(en, power_cap)
    pred = ("given" if r.mode not in ("calibrated", "ideal bound") else
            "calibrated" if r.mode == "calibrated" else "ideal")
    d = r.as_dict() | {"layout_search": searched, "usd_per_gpu_hour": hw.chip.usd_per_hour, "prediction": pred}
    d["energy"] = {k: v for k, v in en.items() if k != "result"} if e_ is not None else None
    if explain and not json and e_ is not None:
        _out(d, r.derivation, json, explain, rows, "")
        print()
        print_derivation(e_.explain())
        return
    if json and explain and e_ is not None:
        d["energy_derivation"] = e_.explain().as_dict()
    _out(d, r.derivation, json, explain, rows, f"Training run (lecture 01:18:59: 6·N·D) — {r.label}")


def _check_choices(eta, dtype, ideal, preset, schedule, fsdp, framework):
    """--eta, --dtype, --ideal with --efficiency, --schedule, --fsdp and --framework checked: (training dtype, preset
    or None under --ideal, sharding or None, schedule or None)."""
    from ..analyses.training.model import training_dtype
    from ..analyses.training.step import FRAMEWORKS, SHARDINGS
    from ..errors import InputError, check_positive

    if eta is not None:
        check_positive(eta, "eta", "a GEMM efficiency such as 0.5", maximum=1.0)
    tdt = training_dtype(dtype)
    if ideal:  # --ideal with --efficiency X is an error, as on every command (common.efficiency_for)
        from .common import efficiency_for

        efficiency_for(None, preset, True)
        preset = None
    if schedule is not None and schedule.lower() not in ("gpipe", "1f1b", "interleaved"):
        raise InputError("schedule", f"unknown pipeline schedule {schedule!r}", "gpipe, 1f1b, interleaved")
    sharding = fsdp.lower() if fsdp else None
    if sharding is not None and sharding not in SHARDINGS:
        raise InputError("fsdp", f"unknown sharding {fsdp!r}", ", ".join(SHARDINGS))
    if framework is not None and framework.lower() not in FRAMEWORKS:
        raise InputError("framework", f"unknown framework family {framework!r}", ", ".join(FRAMEWORKS))
    return tdt, preset, sharding, (schedule.lower() if schedule else None)


def _degrees(hw, *, tp, pp, cp, ep, vp, gpus, dp) -> dict:
    """The parallel degrees given (None where searched) and the GPUs: given, or dp (or one scale-up domain) ×
    tp·pp·cp."""
    from ..errors import InputError

    t = _int(tp, "tp") if tp else None
    p = _int(pp, "pp") if pp else None
    c_ = _int(cp, "cp") if cp else None
    e = _int(ep, "ep")
    v = _int(vp, "vp") if vp else None
    n = _int(gpus, "gpus") if gpus else None
    d_ = _int(dp, "dp") if dp else None
    if n and d_ is None and t and p and n % (t * p * (c_ or 1)):
        raise InputError("gpus", f"{n} GPUs do not divide by tp·pp·cp = {t * p * (c_ or 1)}", "gpus = dp × tp × pp × cp")
    if n is None:
        mp = (t or 1) * (p or 1) * (c_ or 1)
        n = (d_ or max(1, hw.scaleup_size // mp)) * mp
    return {"tp": t, "pp": p, "cp": c_, "ep": e, "vp": v, "gpus": n, "dp": d_}


def _tflops(tflops):
    """--tflops: a plain number is TFLOP/s, else a FLOP/s quantity; None when not given."""
    from .. import units

    if tflops is None:
        return None
    try:
        return float(tflops) * 1e12
    except ValueError:
        return units.parse_flops(tflops, "tflops")


def _fixed(deg: dict, sched, optimizer, no_sp, micro_batch, microbatches, fsdp_group) -> dict:
    """What every layout keeps: EP, optimizer, sequence parallelism, schedule, virtual stages, the micro-batch or
    micro-batch count (one of them) and the sharding group."""
    from ..errors import InputError

    fixed = {"ep": deg["ep"], "optimizer": optimizer, "sequence_parallel": not no_sp}
    if sched:
        fixed["schedule"] = sched
    if deg["vp"]:
        fixed["v"] = deg["vp"]
    if micro_batch:
        fixed["micro_batch"] = float(_int(micro_batch, "micro-batch"))
    if microbatches:
        if micro_batch:
            raise InputError("microbatches", "both --micro-batch and --microbatches/--grad-accum given", "one of them")
        fixed["microbatches"] = _int(microbatches, "microbatches")
    if fsdp_group:
        fixed["fsdp_group"] = _int(fsdp_group, "fsdp-group")
    return fixed


def _layout_and_train(m, hw, deg: dict, fixed: dict, sched, zero, sharding, recompute, kw: dict):
    """``train`` at the layout given when every degree, the sharding and the recomputation are, else the layout
    search (:func:`analyses.training.model.search_training_layout`): (result, Parallelism, the search's counts or
    None)."""
    from ..analyses.training.model import Parallelism, default_vp, search_training_layout, train

    t, p, c_, v, d_ = deg["tp"], deg["pp"], deg["cp"], deg["vp"], deg["dp"]
    given = dict(tp=t, pp=p, dp=d_, cp=c_, recompute=recompute)
    if all(x is not None for k, x in given.items() if k != "cp") and (sharding is not None or zero is not None):
        vv = v or (default_vp(m.n_layers, p) if sched in (None, "interleaved") else 1)
        par = Parallelism(dp=d_, tp=t, pp=p, cp=c_ or 1, v=vv, schedule="interleaved" if vv > 1 else (sched or "1f1b"),
                          zero_stage=1 if zero is None else zero, sharding=sharding, recompute=recompute,
                          **{k: x for k, x in fixed.items() if k not in ("schedule", "v")})
        return train(m, hw, chips=deg["gpus"], par=par, **kw), par, None
    fx = {k: x for k, x in given.items() if x is not None} | fixed
    if zero is not None:
        fx["zero_stage"] = zero
    if sharding is not None:
        fx["sharding"] = sharding
    return search_training_layout(m, hw, chips=deg["gpus"], fixed=fx, **kw)


def _rows(r, par, m, hw, tdt, searched) -> list:
    """The table's rows: layout, FLOPs, FLOP/s and MFU, time, GPU-hours, cost, the step's terms, memory per GPU."""
    from .common import human

    s, mem = r.step, r.memory
    how = (f"searched: fastest of {searched['evaluated']} layouts, {searched['fit']} fit" if searched else "given")
    return [
        ("model / hardware", f"{r.model} on {human(r.chips)} × {hw.chip.name} ({r.hardware}), {tdt}"),
        ("parallelism", f"DP {par.dp} · TP {par.tp} · PP {par.pp} · CP {par.cp} · EP {par.ep}; {par.schedule}"
                        + (f" × {par.v} virtual" if par.v > 1 else "") + f", micro-batch {s['microbatch_seqs']:.3g}"
                        f" × M = {s['microbatches']:.3g}; sharding {par.sharding_mode}; recompute {par.recompute}"
                        + (f" + full on {par.recompute_layers} of {m.n_layers / par.pp:.3g} layers per stage"
                           if par.recompute_layers else "") + " "
                        f"({how})"),
        ("FLOPs 6·N·D + attention", f"{human(r.flops_dense, 'FLOP')} + {human(r.flops_attention, 'FLOP')} = "
                                    f"{human(r.flops_total, 'FLOP')}"),
        (f"FLOP/s per GPU ({r.mode})", f"{human(r.achieved_flops, 'FLOP/s')} = MFU {human(r.mfu, '%')}"),
        ("time", human(r.time_s, "s")),
        ("GPU-hours", human(r.chip_hours)),
        ("cost", f"{human(r.usd, '$')} at {human(hw.chip.usd_per_hour, '$')}/GPU-hour"),
        (f"step ({s['preset']})", f"{human(s['t_step_s'], 's')}: work {human(s['t_work_s'], 's')} (GEMM "
                                  f"{human(s['t_gemm_s'], 's')}, attention {human(s['t_attention_s'], 's')}, TP "
                                  f"{human(s['t_tp_s'], 's')}, EP {human(s['t_ep_s'], 's')}), bubble "
                                  f"{human(s['t_bubble_s'], 's')}, DP exposed {human(s['t_dp_exposed_s'], 's')}; "
                                  f"{human(s['tokens_per_s_per_gpu'])} tokens/s/GPU"),
        ("model state / GPU", f"{human(mem['model_state_bytes'], 'B')} ({human(mem['bytes_per_param'])} B/param × "
                              f"{human(mem['params_per_chip'])} params)"),
        ("activations / GPU", human(mem["activation_bytes"], "B")),
        ("memory / GPU", f"{human(mem['total_bytes'], 'B')} of {human(mem['hbm_bytes'], 'B')} HBM"
                         + ("" if mem["fits"] else "  (DOES NOT FIT: no layout fits; more GPUs or ZeRO-3)")),
    ]


def _energy_rows(en: dict, power_cap) -> list:
    """The energy and electricity rows (options.training_energy), or one row saying the chip has no board power."""
    from .common import human

    e_ = en["result"]
    if e_ is None:
        return [("energy", "— (the catalog gives no board power, tdp_w, for this chip)")]
    return [
        ("energy", f"{human(en['energy_j'] / 3.6e9)} MWh at the meter ({human(e_.facility_w_per_chip, 'W')}/GPU: "
                   f"board at TDP + host, PUE {e_.pue:g}); {human(float(e_.j_per_token), 'J')}/token, "
                   f"{human(float(e_.tokens_per_kwh))} tokens/kWh"),
        ("electricity", f"{human(en['electricity_usd'], '$')} at ${e_.usd_per_kwh:g}/kWh = "
                        f"{human(float(e_.elec_share), '%')} of the cost"
                        + ("" if power_cap is None else f" (power cap {human(en['power_cap_w'], 'W')} per GPU: "
                                                        f"compute peaks × {en['clock_fraction']:.3f})")),
    ]


def overtrain_cmd(
    traffic: str = typer.Option("500M", "--traffic", help="Fleet traffic in tokens/s (lecture: ~500M)."),
    lifetime: str = typer.Option("2 months", "--lifetime", help="Deployment lifetime of one model."),
    models: float = typer.Option(10, "--models", help="Models sharing the traffic (lecture: 5–10)."),
    active: str = typer.Option("100B", "--active", help="Active parameters (lecture: ~100B)."),
    split: str = typer.Option("1/3,1/3,1/3", "--split", help="Cost shares pretrain,RL,inference."),
    k_rl: float = typer.Option(3.0, "--k-rl", help="FLOPs per param per RL token, 2 (generate) … 6 (train all)."),
    eta_rl: float = typer.Option(0.3, "--eta-rl", help="RL efficiency relative to pretraining."),
    eta_dec: float = typer.Option(0.3, "--eta-dec", help="Decode efficiency relative to pretraining."),
    tokens_per_param: float = typer.Option(20.0, "--tokens-per-param", help="Chinchilla ratio (lecture: 20)."),
    law: str = typer.Option("chinchilla", "--law", help="Loss law for the optimum: chinchilla or besiroglu."),
    json: bool = JSON_OPT,
    explain: bool = EXPLAIN_OPT,
):
    """Pretraining/RL/inference split (R30–R34) and the cost-optimal model at the same loss."""
    from .. import units
    from ..analyses.lecture.lifetime import overtrain
    from ..errors import InputError
    from ..explain import fmt

    try:
        shares = tuple(_frac(x) for x in split.split(","))
    except (ValueError, ZeroDivisionError):
        shares = ()
    from ..errors import check_positive

    check_positive(tokens_per_param, "tokens_per_param", "tokens per parameter such as 20", maximum=1e6)
    check_positive(models, "models", "a number of models such as 10", maximum=1e6)
    if len(shares) != 3:
        raise InputError("split", f"cannot read {split!r}", "three shares 'pre,RL,inf', e.g. '1/3,1/3,1/3'")
    r = overtrain(rate=_count(traffic, "traffic"), lifetime_s=units.parse_duration(lifetime, "lifetime"),
                  n_models=models, active=_count(active, "active"), split=shares, k_rl=k_rl, eta_rl=eta_rl,
                  eta_dec=eta_dec, tokens_per_param=tokens_per_param, law=law)
    o = r.optimum
    rows = [
        ("fleet tokens over the lifetime", fmt(r.D_inf_fleet)),
        ("inference tokens per model D_inf", f"{fmt(r.D_inf)} ({fmt(r.rate / r.n_models)} tok/s)"),
        ("pretraining tokens D_pre", fmt(r.D_pre)),
        ("RL tokens D_RL", fmt(r.D_rl)),
        ("Chinchilla tokens 20·N", fmt(r.D_chinchilla)),
        ("over-training D_pre / D_Ch", f"{r.overtrain:.0f}×"),
        ("target loss (Chinchilla law)", f"{o['loss']:.4f}"),
        ("cost-optimal N, D_pre", f"{fmt(o['N_opt'])}, {fmt(o['D_opt'])} ({o['overtrain_opt']:.0f}× Chinchilla)"),
        ("heuristic / optimum cost", f"{o['cost_ratio']:.4f}× (N {o['N_ratio']:.3f}×, D {o['D_ratio']:.3f}×)"),
        ("serving / pretraining cost at the optimum", f"{o['serve_to_pretrain_at_opt']:.3f} (= αX/βY − 1)"),
    ]
    _out(r.as_dict(), r.derivation, json, explain, rows, "Lifetime compute split (lecture 01:18:59)")


def _frac(text: str) -> float:
    text = text.strip()
    if "/" in text:
        a, b = text.split("/")
        return float(a) / float(b)
    return float(text)


@scaling_app.command("chinchilla")
def chinchilla_cmd(
    params: str = typer.Option(None, "--params", "-N", help="Parameters (with --tokens: the loss)."),
    tokens: str = typer.Option(None, "--tokens", "-D", help="Training tokens."),
    compute: str = typer.Option(None, "--compute", "-C", help="FLOP budget: compute-optimal N and D (C = 6ND)."),
    law: str = typer.Option("chinchilla", "--law", help="chinchilla (Hoffmann 2022, approach 3) or besiroglu [M]."),
    rule: str = typer.Option("lecture", "--rule", metavar="lecture|fitted",
                             help="Compute-optimal split used for --compute: lecture = D = 20·N (the lecture's rule, "
                                  "default; as `overtrain`), fitted = the loss law's optimum. Both are shown."),
    json: bool = JSON_OPT,
    explain: bool = EXPLAIN_OPT,
):
    """Chinchilla: L(N, D) = E + A/N^α + B/D^β, the compute-optimal N, D for a budget (the lecture's D = 20·N
    and the fitted law's, both shown), and D ≈ 20·N."""
    from ..analyses.lecture import scaling
    from ..errors import InputError, check_positive
    from ..explain import Derivation, fmt

    lw = scaling.loss_law(law)
    d = Derivation(f"Chinchilla loss law ({lw.name} {lw.status}: E {lw.E}, A {lw.A}, B {lw.B}, α {lw.alpha}, "
                   f"β {lw.beta})")
    out: dict = {"law": lw.__dict__}
    N = check_positive(_count(params, "params"), "params", "a parameter count such as 70B") if params else None
    D = check_positive(_count(tokens, "tokens"), "tokens", "a token count such as 1.4T") if tokens else None
    if compute:
        C = float(compute) if _isnum(compute) else _count(compute, "compute")
        check_positive(C, "compute", "a FLOP budget such as 1e24 or 5.8e23")
        if rule not in ("lecture", "fitted"):
            raise InputError("rule", f"{rule!r} is not a rule", "lecture (D = 20·N) or fitted (the loss law's optimum)")
        Nf, Df = (float(x) for x in scaling.compute_optimal(C, lw))
        N20 = (C / (6.0 * scaling.CHINCHILLA_TOKENS_PER_PARAM)) ** 0.5
        D20 = float(scaling.chinchilla_tokens(N20))
        d.add("N_20", "√(C / (6·20))", f"C = {fmt(C)}", N20, "params", "the lecture's rule D = 20·N with C = 6ND")
        d.add("D_20", "20 · N_20", "", D20, "tokens")
        d.add("N_fit", "G·(C/6)^(β/(α+β))", f"C = {fmt(C)}", Nf, "params", "Hoffmann et al. 2022 eq. 4 (fitted law)")
        d.add("D_fit", "(C/6)^(α/(α+β))/G", "", Df, "tokens", f"D/N = {Df / Nf:.1f}")
        Nc, Dc = (N20, D20) if rule == "lecture" else (Nf, Df)
        d.add("L_opt", "E + A/N^α + B/D^β", f"at the {rule} split", float(scaling.chinchilla_loss(Nc, Dc, lw)))
        out.update(compute=C, rule=("lecture: D = 20·N" if rule == "lecture" else f"fitted {lw.name} law"),
                   N_opt=Nc, D_opt=Dc, tokens_per_param=Dc / Nc, loss_opt=float(scaling.chinchilla_loss(Nc, Dc, lw)),
                   N_opt_lecture=N20, D_opt_lecture=D20, N_opt_fitted=Nf, D_opt_fitted=Df,
                   tokens_per_param_fitted=Df / Nf)
        N = N or None
    if N is not None:
        Dn = D if D is not None else float(scaling.chinchilla_tokens(N))
        L = d.add("L", "E + A/N^α + B/D^β", f"{lw.E} + {lw.A}/{fmt(N)}^{lw.alpha} + {lw.B}/{fmt(Dn)}^{lw.beta}",
                  float(scaling.chinchilla_loss(N, Dn, lw)), "", "D = 20·N" if D is None else "")
        out.update(params=N, tokens=Dn, loss=L, chinchilla_tokens=float(scaling.chinchilla_tokens(N)),
                   overtraining=float(scaling.overtraining_factor(Dn, N)))
    elif not compute:
        raise InputError("params", "nothing to compute", "--params N [--tokens D] and/or --compute C")
    d.conclusion = lw.source
    rows = [(k, fmt(v) if isinstance(v, float) else v) for k, v in out.items() if k != "law"]
    rows.append(("source", f"{lw.source} {lw.status}"))
    _out(out, d, json, explain, rows, "Chinchilla scaling law")


def _isnum(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


@scaling_app.command("routed")
def routed_cmd(
    active: str = typer.Option("370M", "--active", "-N", help="Dense (active) parameters."),
    experts: str = typer.Option("64", "--experts", "-E", help="Experts (list allowed: '1,8,64,512')."),
    method: str = typer.Option("s-base", "--method", help="s-base, rl-r or hash."),
    no_saturation: bool = typer.Option(False, "--no-saturation", help="Use Ê = E."),
    e_start: float = typer.Option(None, "--e-start", help="Override E_start of the saturating Ê."),
    e_max: float = typer.Option(None, "--e-max", help="Override E_max of the saturating Ê."),
    json: bool = JSON_OPT,
    explain: bool = EXPLAIN_OPT,
):
    """Clark et al. 2022 routed law and effective parameter count N̄ (R14). Coefficients UNVERIFIED."""
    import numpy as np

    from ..analyses.lecture import scaling
    from ..explain import Derivation, fmt
    from .common import parse_range

    from ..errors import InputError, check_positive

    lw = scaling.routed_law(method)
    for value, field in ((e_start, "e_start"), (e_max, "e_max")):
        if value is not None:
            check_positive(value, field, "a positive number of experts such as 2 or 300", maximum=1e9)
    es_, em_ = e_start or lw.e_start or 1.0, e_max or lw.e_max
    if not no_saturation and em_ is not None and (1 / es_ - 1 / em_) <= 0:
        raise InputError("e_start", f"E_start {es_:g} is not below E_max {em_:g}", "E_start < E_max")
    N = _count(active, "active")
    Es = parse_range(experts, "experts", integer=True)
    sat = not no_saturation
    nbar = scaling.effective_params(N, Es, lw, sat, e_start, e_max)
    loss = scaling.routed_loss(N, Es, lw, sat, e_start, e_max)
    es, em = (e_start or lw.e_start, e_max or lw.e_max) if sat else (None, None)
    d = Derivation(f"Clark et al. 2022 routed law, {lw.name}: a {lw.a}, b {lw.b}, c {lw.c}, d {lw.d} {lw.status}")
    d.add("Ê", "1/(1/(E − 1 + (1/E_start − 1/E_max)^−1) + 1/E_max)", f"E_start = {es}, E_max = {em}",
          float(scaling._ehat(Es[-1], lw, sat, e_start, e_max)), "", f"E = {Es[-1]:g}")
    d.add("log10 L", "a·log N + b·log Ê + c·log N·log Ê + d", f"N = {fmt(N)}", float(np.log10(loss[-1])))
    d.add("N̄", "10^((log L − d − b·ê₁)/(a + c·ê₁))", "", float(nbar[-1]), "params", "L(N̄, 1) = L(N, E)")
    d.conclusion = scaling.UNVERIFIED_NOTE
    out = {"method": lw.name, "active": N, "saturation": sat, "e_start": es, "e_max": em, "status": lw.status,
           "verified": lw.verified, "note": scaling.UNVERIFIED_NOTE, "source": lw.source,
           "saturation_source": lw.saturation_source,
           "rows": [{"experts": float(e), "loss": float(lo), "effective_params": float(nb),
                     "multiplier": float(nb / N)} for e, lo, nb in zip(Es, loss, nbar)]}
    if json or explain:
        _out(out, d, json, explain, [], "")
        return
    from .common import table

    table(f"Routed scaling law ({lw.name}), N = {fmt(N)} active — UNVERIFIED coefficients",
          ["experts", "loss", "effective params N̄", "N̄ / N"],
          [[f"{r['experts']:g}", f"{r['loss']:.4f}", fmt(r["effective_params"]), f"{r['multiplier']:.2f}×"]
           for r in out["rows"]], caption=scaling.UNVERIFIED_NOTE)


def revnet_cmd(
    model: str = typer.Argument(None, help="Model for the shape (default: --layers/--d-model/--heads)."),
    layers: int = typer.Option(None, "--layers", min=1, help="Layers."),
    d_model: int = typer.Option(None, "--d-model", min=1, help="Hidden size."),
    heads: int = typer.Option(None, "--heads", min=1, help="Attention heads."),
    seq: str = typer.Option("8192", "--seq", help="Sequence length."),
    batch: str = typer.Option("1", "--batch", help="Sequences per microbatch."),
    dtype: str = typer.Option("bf16", "--dtype", callback=dtype_check("dtype"), help="Activation dtype."),
    no_flash: bool = typer.Option(False, "--no-flash", help="Store attention scores (a·s²·b)."),
    dropout: bool = typer.Option(False, "--dropout", help="Add dropout masks (Korthikanti's 34·s·b·h)."),
    measure: bool = typer.Option(False, "--measure", help="Also measure a small PyTorch stack (needs torch)."),
    json: bool = JSON_OPT,
    explain: bool = EXPLAIN_OPT,
):
    """Activation memory and compute: standard vs full recompute vs reversible (Feistel) layers (R43)."""
    from .. import units
    from ..analyses.lecture import revnet
    from ..errors import InputError
    from ..explain import fmt

    L, h, a, name = layers, d_model, heads, ""
    if model:
        m = __import__("rackmath.specs.models", fromlist=["load_model"]).load_model(model)
        L, h, a, name = L or m.n_layers, h or m.d_model, a or m.n_heads, m.name
    if not (L and h and a):
        raise InputError("model", "no shape given", "a MODEL, or --layers, --d-model and --heads")
    r = revnet.compare(n_layers=L, seq_len=_count(seq, "seq"), batch=_count(batch, "batch"), d_model=h, n_heads=a,
                       bytes_per_elem=units.dtype_bytes(dtype), dropout=dropout, flash=not no_flash, name=name)
    out = r.as_dict()
    if measure:
        out["measured"] = _measure()
    rows = [(x["scheme"], f"stored {fmt(x['stored_bytes'], 'B')}, peak {fmt(x['peak_bytes'], 'B')}, "
                          f"FLOPs {x['flops_vs_standard']:.3f}× standard") for x in r.rows]
    if measure:
        ms = out["measured"]
        rows.append(("measured (torch, fp32, small stack)",
                     f"standard {ms['standard_bytes']:,} B vs predicted {ms['standard_predicted']:,.0f}; reversible "
                     f"{ms['reversible_bytes']:,} B vs predicted {ms['reversible_predicted']:,.0f}"))
    _out(out, r.derivation, json, explain, rows, "Reversible layers: compute for memory (lecture 02:04:02)")


def _measure() -> dict:
    from ..errors import InputError

    try:
        import torch
    except ImportError:
        raise InputError("measure", "PyTorch is not installed", "pip install 'rackmath[torch]'") from None
    from ..analyses.lecture.revnet import layer_activation_bytes
    from ..revnet_torch import ReversibleStack, saved_activation_bytes

    torch.manual_seed(0)
    L, b, s, h, a = 4, 2, 32, 64, 4
    res = {"layers": L, "batch": b, "seq": s, "d_model": h, "heads": a}
    stack = ReversibleStack(L, h, a, max_seq=s)
    for rev in (False, True):
        stack.reversible = rev
        x = torch.randn(b, s, h, requires_grad=True)
        y = torch.randn(b, s, h, requires_grad=True)
        _, nbytes = saved_activation_bytes(lambda: stack(x, y), list(stack.parameters()))
        res["reversible_bytes" if rev else "standard_bytes"] = int(nbytes)
    res["standard_predicted"] = float(L * layer_activation_bytes(s, b, h, a, 4.0))
    res["reversible_predicted"] = float(2 * 4 * s * b * h)
    return res


def register(app: typer.Typer) -> None:
    app.command("train")(train_cmd)
    app.command("overtrain")(overtrain_cmd)
    app.add_typer(scaling_app, name="scaling")
    app.command("revnet")(revnet_cmd)


def validate_train_cmd(*, json: bool = False, ideal: bool = False, refit: bool = False, output=None,
                       force: bool = False, ids=None, explain: bool = False, others: dict | None = None):
    """`rackmath validate --train`: fit the training step model on the published training records, cross-validate
    it (leave one source / hardware family / model family / software release out), print the counts, the errors
    and the held-out Llama 3 405B rows; with --refit the presets as [[train_preset]] TOML (--output FILE)."""
    from ..errors import InputError
    from .common import check_output, print_json, table

    for flag, given in ({"ideal": ideal, "id": ids is not None, "explain": explain} | dict(others or {})).items():
        if given:
            raise InputError(flag.replace("_", "-"), f"--{flag.replace('_', '-')} with --train",
                             "--train [--refit [--output FILE [--force]]] [--json]")
    if (output is not None or force) and not refit:
        raise InputError("output", "--output/--force without --refit", "--train --refit --output FILE")
    if output is not None:
        check_output(output, force)
    from ..analyses.fitting import training as tf

    v = tf.validate_training()
    if refit:
        text = tf.presets_toml(v["_theta"], v["_fa"], v["_cv"])
        if output is None or str(output) == "-":
            print(text, end="")
        else:
            from pathlib import Path

            Path(output).write_text(text)
            print(f"wrote {output}")
        return
    out = {k: x for k, x in v.items() if not k.startswith("_")}
    if json:
        print_json(out)
        return
    c, cov, ins = v["counts"], v["coverage"], v["in_sample"]
    table("rackmath validate --train: the training step model on published runs (tokens/s/GPU)", ["quantity", "value"], [
        ["rows", f"{cov['rows']} published rows, {cov['modelled']} modelled; pretraining {cov['pretrain_modelled']}"
                 f"/{cov['pretrain_rows']} ({cov['pretrain_modelled'] / max(cov['pretrain_rows'], 1):.0%})"],
        ["fit", f"{c['fitted_params']} parameters ({c['params_per_group']} per hardware family × framework family "
                f"for {len(c['groups'])} groups + {c['params_per_family']} per hardware family × {len(c['families'])} + "
                f"{c['shared_params']} shared) on {c['records']} records from "
                f"{c['sources']} sources, {c['hardware_families']} hardware families, {c['model_families']} model "
                f"families, {c['software_releases']} software releases"],
        ["in sample", _line(ins)],
    ] + [[f"leave one {s} out", _line(x["overall"])] for s, x in v["cross_validation"].items()],
        caption="median and p90 |predicted/measured − 1|; within 2×; geometric-mean ratio. docs/training.md")
    for s, x in v["cross_validation"].items():
        table(f"leave one {s} out, by group", ["group", "n", "median |err|", "p90 |err|", "within 2×", "geomean"],
              [[g, str(b["n"]), f"{b['median_abs_error']:.1%}", f"{b['p90_abs_error']:.1%}",
                f"{b['within_2x']}/{b['n']}", f"{b['geomean_ratio']:.2f}×"] for g, b in x["by_group"].items()])
    if v["held_out"]:
        table("held out (never fitted): Llama 3 405B on H100 (secondary figures)", ["id", "GPUs", "measured TFLOP/s",
                                                                                   "predicted", "error"],
              [[h["id"], str(h["gpus"]), f"{h['measured_tflops']:g}", f"{h['predicted_tflops']:.0f}",
                f"{h['error']:+.1%}"] for h in v["held_out"]])
    table("worst records, leave one source out", ["id", "model", "chip", "source", "measured tok/s/GPU", "predicted",
                                                  "ratio"],
          [[w["id"], w["model"], w["chip"], w["source"], f"{w['measured']:.4g}", f"{w['predicted']:.4g}",
            f"{w['ratio']:.2f}×"] for w in v["worst_loso"]])
    table("rows not modelled", ["rows", "reason"], [[str(n), r] for r, n in cov["excluded"].items()])


def _line(s: dict) -> str:
    return (f"median {s['median_abs_error']:.1%}, p90 {s['p90_abs_error']:.1%}, within 2× {s['within_2x']}/{s['n']} "
            f"({s['within_2x'] / s['n']:.1%}), geomean {s['geomean_ratio']:.2f}×, worst {s['worst_ratio']:.2f}×")
