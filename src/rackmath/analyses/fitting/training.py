"""Fit and cross-validate the training step model on the published training records (issue 38).

The records (``specs.training_records``) are turned once into arrays (:func:`record_arrays`): every input of
``analyses.training.step.step_terms`` for every record, and the measured tokens/s/GPU. A prediction of all records under
K candidate parameter vectors is one broadcast call; the fit is coordinate descent on a grid (as the serving fit,
``analyses.fitting.calibration``) over :data:`analyses.training.step.TRAIN_PARAMS`: some per (hardware family × framework family)
group, one per hardware family, the rest shared by every group. A group a fold leaves out entirely uses
the **pooled** values (the same parameters fitted with every group tied), as the serving cross-family preset.

Cross-validation: leave one source out, one hardware family out, one model family out, one software release out;
each fold refits on what remains and predicts what was left out. Measured tokens/s/GPU is the row's own; where a
source prints only TFLOP/s it is converted with that source's FLOP formula (:func:`source_flops_per_token`), never
another's. No I/O here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..training import model as tr
from ..training import step as st
from ...specs.hardware import load_chip
from ...specs.models import load_model
from ...specs.training_records import shipped

SCHEMES = ("source", "hardware", "model", "software")
#: |log error| past this cap grows slowly (a soft-L1 loss, as the serving fit's FIT_ROBUST_CAP): a record the model
#: cannot describe pulls, but cannot drag the parameters every other record needs.
ROBUST_CAP = 0.4
#: Per-group efficiencies are pulled toward the other groups' (geometric) mean: a Gaussian prior in log space of width
#: SHRINK_SIGMA weighing as SHRINK_WEIGHT records (the serving fit's priors, calibration.Param.prior): a group with many
#: records barely moves, one a fold leaves with few does not chase them.
SHRINK = ("eta_gemm", "eta_attn")
SHRINK_SIGMA = 0.2
SHRINK_WEIGHT = 2.0


def source_flops_per_token(formula, model, seq):
    """FLOPs per token of a source's own TFLOP/s formula (checked on the rows that print both TFLOP/s and tokens/s):

      nemo, mosaic (llm-foundry):  6·N + 12·L·s·d_attn            (attention counted without the causal half)
      megatron-bridge, causal-6nd: 6·N + 6·L·s·d_attn             (causal attention)
      narayanan-recompute:         96·L·h²·(1 + s/(6h) + V/(16·L·h))   (Narayanan et al. 2021 eq. 3, recompute counted)
      korthikanti:                 72·L·h²·(1 + s/(6h) + V/(12·L·h))   (Korthikanti et al. 2022 §6: model FLOPs, the
                                   same count without the recomputed forward — the README's MFU/HFU table)
    N = the model's matmul parameters per token (``matmul_flops_per_token / 2``)."""
    n = float(model.matmul_flops_per_token) / 2.0
    L, h, V = float(model.n_layers), float(model.d_model), float(model.vocab_size)
    d_attn = float(model.n_heads * model.head_dim)
    s = float(seq)
    if formula in ("nemo", "mosaic"):
        return 6.0 * n + 12.0 * L * s * d_attn
    if formula in ("megatron-bridge", "causal-6nd", "megatron"):
        return 6.0 * n + 6.0 * L * s * d_attn
    if formula == "narayanan-recompute":
        return 96.0 * L * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * L * h))
    if formula == "korthikanti":
        return 72.0 * L * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * L * h))
    raise ValueError(formula)


def measured_tokens(rec, model) -> float | None:
    """Tokens/s/GPU of a record: printed, or its TFLOP/s (MFU × peak) in its source's formula, or B·s/(GPUs·step)."""
    if rec.tokens_per_s_per_gpu:
        return float(rec.tokens_per_s_per_gpu)
    if rec.tflops_per_gpu and rec.seq:
        return rec.tflops_per_gpu * 1e12 / source_flops_per_token(rec.flop_formula, model, rec.seq)
    if rec.step_time_s and rec.global_batch and rec.seq and rec.gpus:
        return rec.global_batch * rec.seq / (rec.gpus * rec.step_time_s)
    if rec.mfu_pct and rec.seq and rec.chip:  # MFU of the BF16 dense peak (the sources' peak for these rows)

        peak = load_chip(rec.chip).peak_flops("bf16")
        return rec.mfu_pct / 100.0 * peak / source_flops_per_token(rec.flop_formula, model, rec.seq)
    return None


def searched_layout(rec, model, chip) -> dict:
    """The layout of a record whose source ran its best configuration without stating it: rackmath's layout search
    with the ideal step model (memory must fit), the source's stated degrees kept."""
    from types import SimpleNamespace

    hw = SimpleNamespace(chip=chip, scaleup_size=rec.nvlink_domain, name=rec.chip)
    fixed = {"cp": rec.cp} if rec.cp else {}
    _, par, _ = tr.search_training_layout(model, hw, chips=rec.gpus, fixed=fixed, preset=None, dtype=rec.dtype,
                                          seq_len=rec.seq, global_batch_tokens=rec.global_batch * rec.seq)
    return {"tp": par.tp, "pp": par.pp, "cp": par.cp, "vp": par.v, "recompute": par.recompute,
            "sharding": par.sharding_mode, "micro_batch": par.micro_batch}


def group_of(rec) -> str:
    return f"{rec.hardware_family}-{rec.framework}"


@dataclass
class RecordArrays:
    """The modelled records as arrays: ``x`` (inputs of step_terms, each shape (R,)), measured (R,), labels."""

    records: list
    x: dict
    measured: np.ndarray
    groups: np.ndarray
    labels: dict = field(default_factory=dict)  # scheme → array of group labels

    def subset(self, idx) -> "RecordArrays":
        idx = np.asarray(idx)
        return RecordArrays([self.records[i] for i in np.flatnonzero(idx)] if idx.dtype == bool
                            else [self.records[i] for i in idx],
                            {k: np.asarray(v)[idx] for k, v in self.x.items()}, self.measured[idx], self.groups[idx],
                            {k: v[idx] for k, v in self.labels.items()})


def record_arrays(recs=None) -> RecordArrays:
    """Every modelled record (``exclude`` empty) with a measured throughput → arrays (holdouts included: callers
    drop them from fits)."""
    recs = shipped() if recs is None else recs
    cols: dict[str, list] = {}
    kept, meas = [], []
    for r in recs:
        if r.exclude:
            continue
        m = load_model(r.model)
        y = measured_tokens(r, m)
        if not y:
            continue
        chip = load_chip(r.chip)
        lay = {"tp": r.tp, "pp": r.pp, "cp": r.cp, "vp": r.vp or tr.default_vp(m.n_layers, r.pp),
               "recompute": r.recompute, "sharding": r.sharding, "micro_batch": r.micro_batch or 1}
        if r.layout == "searched":
            lay = searched_layout(r, m, chip)
        dp = r.dp or r.gpus // (lay["tp"] * lay["pp"] * lay["cp"])
        gb = r.global_batch or float(dp * (r.micro_batch or 1) * (r.grad_accum or 1))
        x = st.step_inputs(m, chip, domain=r.nvlink_domain, gpus=r.gpus, global_batch=gb, seq=r.seq,
                           micro_batch=lay["micro_batch"], tp=lay["tp"], pp=lay["pp"], cp=lay["cp"], ep=r.ep,
                           vp=lay["vp"], dtype=r.dtype, recompute=lay["recompute"], sharding=lay["sharding"],
                           fsdp_group=r.fsdp_group or 0, lora=r.task == "lora")
        for k, v in x.items():
            cols.setdefault(k, []).append(float(v))
        kept.append(r)
        meas.append(y)
    x = {k: np.array(v) for k, v in cols.items()}
    labels = {"source": np.array([r.source_group for r in kept]), "hardware": np.array([r.hardware_family for r in kept]),
              "model": np.array([r.model_family for r in kept]), "software": np.array([r.software for r in kept])}
    return RecordArrays(kept, x, np.array(meas), np.array([group_of(r) for r in kept]), labels)


def _loss(pred, meas):
    e = np.abs(np.log(np.maximum(pred, 1e-300) / meas))
    e = np.where(np.isfinite(e), e, 50.0)
    return np.where(e < ROBUST_CAP, e, ROBUST_CAP + 0.1 * np.log1p(np.maximum(e - ROBUST_CAP, 0.0)))


def predict(ra: RecordArrays, theta: dict) -> np.ndarray:
    """Tokens/s/GPU of every record under ``theta`` ({name: value} shared, {name: {group: value}} per group)."""
    p = {}
    for k, v in theta.items():
        if isinstance(v, dict):
            p[k] = np.array([v.get(g, v.get("pooled", np.nan)) for g in ra.groups])
        else:
            p[k] = v
    return st.step_terms(ra.x, p)["tokens_per_s_per_gpu"]


def _start(groups) -> dict:
    return {k: ({g: x0 for g in groups} if scope != "shared" else x0)
            for k, (lo, hi, x0, ideal, scope, _) in st.TRAIN_PARAMS.items()}


def _family(group: str) -> str:
    return group.partition("-")[0]


def fit(ra: RecordArrays, rounds: int = 7, tie_groups: bool = False) -> dict:
    """Coordinate descent of the mean robust |log(pred/measured)| over the grid (9 values per coordinate around the
    current one, half-width halving each round). Coordinates: one per group of a "group" parameter, one per hardware
    family of a "family" parameter (its groups tied), one per "shared" parameter. ``tie_groups``: every group shares
    one value (the pooled fit)."""
    labels = np.array(["pooled"] * len(ra.groups)) if tie_groups else ra.groups
    ra = RecordArrays(ra.records, ra.x, ra.measured, labels, ra.labels)
    groups = sorted(set(labels))
    families = {}
    for g in groups:
        families.setdefault(_family(g), []).append(g)
    coords = {"group": [[g] for g in groups], "family": list(families.values()), "shared": [None]}
    subs = {}
    for members in coords["group"] + coords["family"]:
        key = tuple(members)
        if key not in subs:
            mask = np.isin(labels, members)
            sub = ra.subset(mask)
            subs[key] = (sub, {kk: np.asarray(v)[:, None] for kk, v in sub.x.items()})
    th = _start(groups)
    widths = {k: (v[1] - v[0]) / 2.0 for k, v in st.TRAIN_PARAMS.items()}
    x_all = {k: np.asarray(v)[:, None] for k, v in ra.x.items()}
    for _ in range(rounds):
        for k, (lo, hi, _x0, _i, scope, _) in st.TRAIN_PARAMS.items():
            for members in coords[scope]:
                cur = th[k][members[0]] if members else th[k]
                cand = np.unique(np.clip(np.linspace(cur - widths[k], cur + widths[k], 9), lo, hi))
                sub, xs = subs[tuple(members)] if members else (ra, x_all)
                p = {kk: (np.array([vv[g] for g in sub.groups])[:, None] if isinstance(vv, dict) else vv)
                     for kk, vv in th.items()}
                p[k] = cand[None, :]
                loss = _loss(st.step_terms(xs, p)["tokens_per_s_per_gpu"], sub.measured[:, None]).mean(axis=0)
                if members and scope == "group" and k in SHRINK and len(groups) > 1:
                    others = [th[k][g] for g in groups if g not in members]
                    centre = float(np.exp(np.mean(np.log(np.maximum(others, 1e-12)))))
                    pen = SHRINK_WEIGHT * (np.log(np.maximum(cand, 1e-12) / centre) / SHRINK_SIGMA) ** 2
                    loss = loss + pen / max(len(sub.measured), 1)
                # a coordinate no record identifies (flat loss: e.g. the expert overhead without MoE records, the
                # low-precision ratio of a family without FP8 rows) keeps its value instead of drifting to a bound
                best = cur if np.ptp(loss) < 1e-12 else float(cand[int(np.argmin(loss))])
                if members:
                    for g in members:
                        th[k][g] = best
                else:
                    th[k] = best
        widths = {k: w / 2.0 for k, w in widths.items()}
    return th


def fit_with_pooled(ra: RecordArrays, rounds: int = 7) -> dict:
    """Per-group fit plus the pooled values (key "pooled" in each per-group parameter) for groups not in ``ra``."""
    th = fit(ra, rounds)
    pooled = fit(ra, rounds, tie_groups=True)
    for k, v in th.items():
        if isinstance(v, dict):
            v["pooled"] = pooled[k]["pooled"]
    return th


def counts(ra: RecordArrays) -> dict:
    groups = sorted(set(ra.groups))
    per = sum(1 for v in st.TRAIN_PARAMS.values() if v[4] == "group")
    per_fam = sum(1 for v in st.TRAIN_PARAMS.values() if v[4] == "family")
    fams = sorted({_family(g) for g in groups})
    shared = len(st.TRAIN_PARAMS) - per - per_fam
    return {"records": int(len(ra.measured)), "groups": groups, "params_per_group": per,
            "params_per_family": per_fam, "families": fams, "shared_params": shared,
            "fitted_params": per * len(groups) + per_fam * len(fams) + shared,
            "sources": int(len(set(ra.labels["source"]))),
            "hardware_families": int(len(set(ra.labels["hardware"]))),
            "model_families": int(len(set(ra.labels["model"]))),
            "software_releases": int(len(set(ra.labels["software"])))}


def summarize(pred, meas) -> dict:
    """Median and p90 |error|, within 2×, the worst ratio (``analyses.fitting.validation.summarize``'s figures)."""
    pred, meas = np.asarray(pred, float), np.asarray(meas, float)
    if len(meas) == 0:
        return {"n": 0}
    err = pred / meas - 1.0
    logr = np.abs(np.log(pred / meas))
    return {"n": int(len(meas)), "median_abs_error": float(np.median(np.abs(err))),
            "p90_abs_error": float(np.percentile(np.abs(err), 90)), "within_20pct": int(np.sum(np.abs(err) <= 0.2)),
            "within_2x": int(np.sum(logr <= np.log(2.0) + 1e-12)), "worst_ratio": float(np.exp(logr.max())),
            "geomean_ratio": float(np.exp(np.mean(np.log(pred / meas))))}


def cross_validate(ra: RecordArrays | None = None, schemes=SCHEMES, rounds: int = 7) -> dict:
    """Out-of-group errors per scheme: each group left out, the rest refitted (with pooled fallbacks), the left-out
    records predicted. Holdout records are never fitted; they are predicted by the full fit."""
    ra = ra or record_arrays()
    fit_mask = np.array([r.fitted for r in ra.records])
    fa = ra.subset(fit_mask)
    out = {"counts": counts(fa), "schemes": {}}
    for sch in schemes:
        lab = fa.labels[sch]
        pred = np.full(len(fa.measured), np.nan)
        by = {}
        for g in sorted(set(lab)):
            tr_mask = lab != g
            th = fit_with_pooled(fa.subset(tr_mask), rounds)
            te = fa.subset(~tr_mask)
            pred[~tr_mask] = predict(te, th)
            by[g] = summarize(pred[~tr_mask], fa.measured[~tr_mask])
        out["schemes"][sch] = {"overall": summarize(pred, fa.measured), "by_group": by,
                               "predicted": pred.tolist()}
    out["ids"] = [r.id for r in fa.records]
    out["measured"] = fa.measured.tolist()
    return out


def full_fit(ra: RecordArrays | None = None, rounds: int = 7) -> tuple[dict, RecordArrays]:
    """The shipped fit: every fitted record, per-group values plus pooled."""
    ra = ra or record_arrays()
    fa = ra.subset(np.array([r.fitted for r in ra.records]))
    return fit_with_pooled(fa, rounds), fa


def group_error_bands(cv: dict, fa: RecordArrays, scheme: str = "source") -> dict:
    """Median |error| of each (family-framework) group's records as predicted with their ``scheme`` group left out."""
    pred = np.asarray(cv["schemes"][scheme]["predicted"])
    err = np.abs(pred / fa.measured - 1.0)
    return {g: float(np.median(err[fa.groups == g])) for g in sorted(set(fa.groups))}


def presets_toml(th: dict, fa: RecordArrays, cv: dict | None = None) -> str:
    """The fit as ``[[train_preset]]`` tables (one per hardware family × framework family, plus the cross-family
    preset: every group tied), with record counts and the leave-one-source-out error band of each."""
    bands = group_error_bands(cv, fa) if cv else {}
    cross_band = cv["schemes"]["hardware"]["overall"]["median_abs_error"] if cv and "hardware" in cv["schemes"] else None
    n = counts(fa)
    head = (f"# Training presets of the step model (analyses/training/model.py step_terms), fitted by `rackmath validate --train "
            f"--refit`\n# on {n['records']} published training records (specs/data/training/records.toml) from "
            f"{n['sources']} sources: {n['fitted_params']} parameters\n# ({n['params_per_group']} per hardware family × "
            f"framework family for {len(n['groups'])} groups + {n['params_per_family']} per hardware family for "
            f"{len(n['families'])} families + {n['shared_params']} shared). error_band: the "
            "leave-one-source-out median |error|\n# of the group's records (cross-family: leave-one-hardware-family-out, "
            "all records). docs/training.md.\n")
    parts = [head]
    shared = {k: v for k, v in th.items() if not isinstance(v, dict)}
    per = {k: v for k, v in th.items() if isinstance(v, dict)}
    srcs = {}
    for r, g in zip(fa.records, fa.groups):
        srcs.setdefault(g, set()).add(r.source_group)
    for g in sorted(set(fa.groups)) + ["pooled"]:
        fam, _, fw = g.partition("-")
        nrec = int(np.sum(fa.groups == g)) if g != "pooled" else n["records"]
        parts.append("\n[[train_preset]]\n")
        if g == "pooled":
            parts.append('name = "cross-family-train"\nfamily = ""\nframework = ""\ncross_family = true\n')
            band = cross_band
            desc = f"every group tied: {nrec} records, for chips and frameworks without a preset of their own"
        else:
            parts.append(f'name = "{fam}-{fw}-train"\nfamily = "{fam}"\nframework = "{fw}"\n')
            band = bands.get(g)
            desc = f"{nrec} {fam} records run with {fw} ({', '.join(sorted(srcs[g]))})"
        parts.append(f"records = {nrec}\n")
        if band is not None:
            parts.append(f"error_band = {band:.3f}\n")
        for k in st.TRAIN_PARAMS:
            v = per[k][g] if k in per else shared[k]
            parts.append(f"{k} = {float(v):.6g}\n")
        parts.append(f'description = "{desc}"\n')
        parts.append('source = "rackmath validate --train --refit (analyses/fitting/training.py), issue 38"\n')
    return "".join(parts)


def coverage(recs=None) -> dict:
    """How many published rows are modelled: all rows, pretraining rows, and why the others are not."""
    recs = shipped() if recs is None else recs
    pre = [r for r in recs if r.task == "pretrain"]
    reasons: dict[str, int] = {}
    for r in recs:
        if r.exclude:
            reasons[r.exclude] = reasons.get(r.exclude, 0) + 1
    return {"rows": len(recs), "modelled": sum(1 for r in recs if not r.exclude), "pretrain_rows": len(pre),
            "pretrain_modelled": sum(1 for r in pre if not r.exclude),
            "excluded": dict(sorted(reasons.items(), key=lambda kv: -kv[1]))}


def validate_training(schemes=SCHEMES, rounds: int = 7) -> dict:
    """Everything `rackmath validate --train` reports: coverage, parameter and record counts, the fit, the in-sample
    errors, the cross-validated errors per scheme and group, the held-out Llama 3 405B rows, the worst records."""
    ra = record_arrays()
    th, fa = full_fit(ra, rounds)
    pred_in = predict(fa, th)
    cv = cross_validate(ra, schemes, rounds)
    hold = ra.subset(np.array([bool(r.holdout) for r in ra.records]))

    held = []
    for r, p, y in zip(hold.records, predict(hold, th) if len(hold.measured) else [], hold.measured):
        f = source_flops_per_token(r.flop_formula, load_model(r.model), r.seq)
        held.append({"id": r.id, "model": r.model, "gpus": r.gpus, "measured_tokens_per_s_per_gpu": float(y),
                     "predicted_tokens_per_s_per_gpu": float(p), "measured_tflops": r.tflops_per_gpu,
                     "predicted_tflops": float(p) * f / 1e12, "error": float(p / y - 1.0), "why": r.holdout})
    loso = np.asarray(cv["schemes"]["source"]["predicted"]) if "source" in cv["schemes"] else pred_in
    ratio = loso / fa.measured
    order = np.argsort(-np.abs(np.log(ratio)))
    worst = [{"id": fa.records[i].id, "model": fa.records[i].model, "chip": fa.records[i].chip,
              "source": fa.records[i].source_group, "measured": float(fa.measured[i]), "predicted": float(loso[i]),
              "ratio": float(ratio[i])} for i in order[:15]]
    rows = [{"id": r.id, "source": r.source_group, "hardware_family": r.hardware_family, "group": g,
             "model": r.model, "software": r.software, "measured": float(y), "predicted": float(p),
             "predicted_loso": float(q)} for r, g, y, p, q in zip(fa.records, fa.groups, fa.measured, pred_in, loso)]
    return {"coverage": coverage(), "counts": counts(fa), "fit": {k: (dict(v) if isinstance(v, dict) else v)
                                                                 for k, v in th.items()},
            "in_sample": summarize(pred_in, fa.measured),
            "cross_validation": {s: {"overall": v["overall"], "by_group": v["by_group"]}
                                 for s, v in cv["schemes"].items()},
            "held_out": held, "worst_loso": worst, "records": rows, "_cv": cv, "_fa": fa, "_theta": th}
