"""Predicted vs measured: every validation record (catalog data, ``specs/records.py``).

The records are ``[[record]]`` TOML tables — the public measurements of
``reference/published.md`` §1 shipped in ``rackmath/specs/data/records/``, plus any a user
adds (``rackmath validate --records DIR``). Each holds its inputs as published, the measured
value, its source and the assumptions that fill in what the source does not say (one rule per
table, never tuned per row). This module predicts each record with the public serving API
(:func:`rackmath.analyses.serving.serve.serve` for ``kind = "serve"``, a single decode step or
prefill pass for ``kind = "step"`` / ``"prefill"``) and summarises the signed errors
``predicted / measured − 1``, overall and by source, hardware family, model family and status.

Records with ``status = "derived"`` (the scaling book's worked examples) are model-derived
figures: shown with the efficiency they state, never fitted, summarised apart. Records with
``exclude = "reason"`` are kept as data and listed with their reason, never predicted.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from ...errors import InputError, RackmathError
from ...specs.catalog import register_cache
from ...specs.records import load_records, Record, SHIPPED_DIR, shipped_records, UNITS
from .evidence import table
from ..serving.choose import make_plan
from ..serving.inputs import FLAT_KEYS, from_flat
from ..serving.serve import (decode_step, evaluate, Layout, load_stack, MAX_BATCH_SIZE, MAX_NUM_TOKENS, prefill_time,
                             serve, Workload)
from ... import units
from ...engine.efficiency import Efficiency, FIT_PARAMS
from ...explain import Derivation
from ...specs.stacks import known_labels


def records(dirs=(), only: bool = False) -> list[Record]:
    """The records to validate: shipped (unless ``only``) plus those in ``dirs`` (same id replaces)."""
    if not dirs and not only:
        return load_records()
    return load_records(dirs, only=only)


def source_group(rec: Record) -> str:
    """The publication / campaign a record comes from (its ``source_group`` field)."""
    return rec.source_group


# --------------------------------------------------------------------------------------
# Prediction
# --------------------------------------------------------------------------------------


def max_load_concurrency(model, hardware, *, gpus, isl, osl, weights_dtype=None, kv_dtype=None, tp=None, ep=None,
                         pp=None, attention_dp=None, max_batch=None, framework=None):
    """The documented max-load rule: C = min(largest C whose KV fits 90% of HBM, ``max_batch`` per replica).

    The KV is sized at the steady-state mean context ISL + OSL/2 (paged KV grows with the output), or at the whole
    request ISL + OSL where the stack admits a request only with KV for all of it (TensorRT-LLM's default
    GUARANTEED_NO_EVICT capacity scheduler: ``Stack.reserves_whole_request``); ``max_batch`` defaults to
    TensorRT-LLM's 2,048.

    Its keywords are a record's serving fields, forwarded one for one: a reason for more than twelve.
    """
    from dataclasses import replace

    stack = replace(load_stack(framework), weights_dtype=weights_dtype, kv_dtype=kv_dtype)
    # the stack decides the KV a sequence holds (serving.Plan._held_kv)
    r = serve(model, hardware, Workload(isl, osl, 1), Layout(gpus, tp, ep, pp, attention_dp), stack, "ideal")
    cap = float(np.asarray(r.max_concurrency).ravel()[0])
    per_replica = MAX_BATCH_SIZE if max_batch is None else int(max_batch)
    return max(1.0, min(cap, per_replica * r.layout["dp"] * r.layout.get("pp", 1)))


def _key(inputs: dict) -> tuple:
    return tuple(sorted(inputs.items()))


@register_cache
@lru_cache(maxsize=1024)
def _max_load_cached(key: tuple) -> float:
    inp = dict(key)
    return max_load_concurrency(inp["model"], inp["hardware"], gpus=inp["gpus"], isl=inp["isl"], osl=inp["osl"],
                                weights_dtype=inp.get("weights_dtype"), kv_dtype=inp.get("kv_dtype"),
                                tp=inp.get("tp"), ep=inp.get("ep"), pp=inp.get("pp"),
                                attention_dp=inp.get("attention_dp"), max_batch=inp.get("max_batch"),
                                framework=inp.get("framework"))


def serve_kwargs(rec: Record) -> dict:
    """The flat keywords of ``serve()`` for a serving record (concurrency resolved): every record input that
    ``serve()`` takes (model, hardware and ``serving.inputs.FLAT_KEYS``); :func:`serve_inputs` builds the objects."""
    inp = dict(rec.inputs)
    if inp.get("concurrency") == "max-load":
        inp["concurrency"] = _max_load_cached(_key(inp))
    if rec.stack_version and inp.get("framework"):  # a listed version: serve assumes it (specs/stacks.py)

        if rec.stack in known_labels():
            inp["framework"] = rec.stack

    return {k: v for k, v in inp.items() if k in FLAT_KEYS or k in ("model", "hardware")}


def serve_inputs(key: tuple, efficiency=None, ideal: bool = False) -> tuple:
    """A record's :func:`serve_kwargs` (as a key) as ``serve``'s objects: (model, hardware, Workload, Layout, Stack,
    efficiency), built by ``serving.inputs.from_flat`` (``ideal``: the ideal efficiency)."""
    inp = dict(key)
    model = inp.pop("model")
    hardware, workload, layout, stack, eff = from_flat(inp.pop("hardware"), efficiency=efficiency, ideal=ideal, **inp)
    return model, hardware, workload, layout, stack, eff


#: The serve values a serving record's metric is read from (:func:`_metric_of_serve`).
_SERVE_VALUES = ("output_tok_s_per_gpu", "total_tok_s_per_gpu", "tpot_ms", "ttft_ms", "ttft_median_ms", "step_ms",
                 "tokens_per_s_per_user")


def _metric_of_serve(d: dict, rec: Record) -> float:
    m = rec.metric
    v = {k: np.asarray(d[k], dtype=float) for k in _SERVE_VALUES}
    if m == "output_tok_s_per_gpu":
        out = v["output_tok_s_per_gpu"]
    elif m == "output_tok_s_per_decode_gpu":  # a disaggregated deployment's output over its decode GPUs only
        inp = rec.inputs
        out = v["output_tok_s_per_gpu"] * (inp["prefill_gpus"] + inp["decode_gpus"]) / inp["decode_gpus"]
    elif m == "total_tok_s_per_gpu":
        out = v["total_tok_s_per_gpu"]
    elif m == "tpot_s":
        out = v["tpot_ms"] / 1e3
    elif m == "ttft_s":
        out = v["ttft_ms"] / 1e3
    elif m == "ttft_median_s":  # the median request's TTFT (serving.median_ttft)
        out = v["ttft_median_ms"] / 1e3
    elif m == "step_s":
        out = v["step_ms"] / 1e3
    elif m == "tok_s_per_user":
        out = v["tokens_per_s_per_user"]
    elif m == "e2e_s":
        out = (v["ttft_ms"] + (rec.inputs["osl"] - 1.0) * v["tpot_ms"]) / 1e3
    else:
        raise ValueError(m)
    return float(out) if out.ndim == 0 else out


@register_cache
@lru_cache(maxsize=256)
def _serve_dict(key: tuple, efficiency, ideal: bool) -> dict:
    """``serve(...).as_dict()`` of a record's inputs, memoised (records reporting several metrics of one run share it)."""
    return serve(*serve_inputs(key, efficiency, ideal)).as_dict()


def record_efficiency(rec: Record, efficiency):
    """Which efficiency a record is predicted with: a derived record keeps the one it states."""
    e = rec.efficiency
    if e is None:
        return efficiency
    if isinstance(e, dict):
        return Efficiency("record-stated", **{k: float(v) for k, v in e.items()},
                          description=f"the efficiency record {rec.id} states")
    return e  # "ideal" or a preset name


def _pass_args(rec: Record) -> tuple[dict, dict]:
    inp = rec.inputs
    common = {k: inp[k] for k in ("model", "hardware", "tp", "weights_dtype", "kv_dtype", "compute_dtype") if k in inp}
    common["chips"] = inp["gpus"]
    extra = {k: inp[k] for k in ("ep", "attention_dp", "kv_shards", "redundant_experts", "weight_layout")
             if k in inp}
    if "framework" in inp:
        extra["framework"] = inp["framework"]
    return common, extra


def _prefill_batch(rec: Record) -> float:
    """A prefill throughput record without a batch: each GPU's pass carries ~MAX_NUM_TOKENS computed tokens."""
    inp = rec.inputs
    if inp.get("batch") is not None:
        return float(inp["batch"])
    isl, h = float(inp["isl"]), float(inp.get("cached_share", 0.0))
    per_gpu = max(1.0, np.floor(MAX_NUM_TOKENS / (isl * (1.0 - h))))
    return per_gpu * inp["gpus"] if inp.get("attention_dp") else per_gpu


def _pass_metric(rec: Record, step, batch):
    inp = rec.inputs
    if rec.metric in ("step_s", "prefill_s"):
        return step
    if rec.metric == "output_tok_s_per_gpu":  # a step record
        return batch / step / inp["gpus"]
    if rec.metric == "prefill_tok_s_per_gpu":
        return batch * float(inp["isl"]) / step / inp["gpus"]
    raise ValueError(rec.metric)


def predict(rec: Record, efficiency=None, ideal=False) -> tuple[float, dict]:
    """rackmath's prediction of one record (SI, the record's metric) and the operating point used.

    ``efficiency`` None = the calibrated preset of the record's chip ('preset'; 'auto' is ``serve``'s own choice,
    which takes a listed stack version's measured path: ``engine.efficiency.resolve``); ``ideal`` the roofline. A
    derived record keeps the efficiency it states.
    """
    return _predict(rec, efficiency, ideal)[:2]


def _predict(rec: Record, efficiency, ideal):
    """:func:`predict`, and the result its value is read from (a ``ServeResult``, or the pass's ``LayoutArrays``)."""
    eff = record_efficiency(rec, efficiency)
    if eff == "ideal":
        eff, ideal = None, True
    elif rec.efficiency is not None:
        ideal = False
    if rec.kind == "serve":
        e = "ideal" if ideal else (eff if eff is not None else "preset")  # the presets' validation by default
        key = _key(serve_kwargs(rec))
        # the records of one run (its throughput, TPOT, TTFT) share one evaluation
        r = _serve_eval(key, e) if isinstance(e, str) else evaluate(_serve_plan(key), e)
        d = r.as_dict()
        info = {k: d[k] for k in ("concurrency", "tpot_ms", "ttft_ms", "output_tok_s_per_gpu", "bottleneck",
                                  "efficiency")}
        info["layout"] = d["layout"]["label"]
        return _metric_of_serve(d, rec), info, r
    common, extra = _pass_args(rec)
    if rec.kind == "step":
        batch = float(rec.inputs["batch"])
        step, res, e = decode_step(**common, **extra, batch=batch, context=rec.inputs["context"], efficiency=eff,
                                   ideal=ideal)
    else:
        batch = _prefill_batch(rec)
        step, res, e = prefill_time(**common, **extra, batch=batch, isl=float(rec.inputs["isl"]),
                                    cached_share=float(rec.inputs.get("cached_share", 0.0)), efficiency=eff,
                                    ideal=ideal)
    step = float(np.asarray(step).ravel()[0])
    info = dict(bottleneck=str(np.asarray(res.bound).ravel()[0]), efficiency=e.name, batch=batch)
    return float(_pass_metric(rec, step, batch)), info, res


# --------------------------------------------------------------------------------------
# Many efficiencies at once (what makes fitting and cross-validation fast)
# --------------------------------------------------------------------------------------

#: Serving metrics whose fixed-layout prediction :func:`predict_many` evaluates in one vectorized engine call.
_VECTOR_SERVE_METRICS = ("output_tok_s_per_gpu", "total_tok_s_per_gpu", "tpot_s", "step_s", "tok_s_per_user",
                         "ttft_s", "e2e_s", "output_tok_s_per_decode_gpu", "ttft_median_s")


def vectorizable(rec: Record) -> bool:
    """Whether :func:`predict_many` evaluates K efficiencies in one engine call for this record: every record
    that does not state its own efficiency (serving records through ``serving.evaluate(plan, efficiency)`` on a
    memoised plan; single passes through ``decode_step`` / ``prefill_time``)."""
    return rec.efficiency is None


_vectorizable = vectorizable  # the name older callers used


def _efficiency_from(X: np.ndarray, names, name: str, extra=None):
    """An Efficiency of the numeric fields ``names`` (a row, or K-long columns) and the non-numeric ``extra``
    (e.g. ``moe_routing``, a chip's measured routing shares)."""
    if X.ndim == 1:
        return Efficiency(name, **{n: float(v) for n, v in zip(names, X)}, **(extra or {}))
    return Efficiency(name, **{n: X[:, j].copy() for j, n in enumerate(names)}, **(extra or {}))


def _vector_prediction(rec: Record, eff, K: int) -> np.ndarray:
    common, extra = _pass_args(rec)
    if rec.kind == "step":
        batch = float(rec.inputs["batch"])
        step, _, _ = decode_step(**common, **extra, batch=batch, context=rec.inputs["context"], efficiency=eff)
    else:
        batch = _prefill_batch(rec)
        step, _, _ = prefill_time(**common, **extra, batch=batch, isl=float(rec.inputs["isl"]),
                                  cached_share=float(rec.inputs.get("cached_share", 0.0)), efficiency=eff)
    step = np.broadcast_to(np.asarray(step, dtype=float), (K,))
    return np.asarray(_pass_metric(rec, step, batch), dtype=float).copy()


@register_cache
@lru_cache(maxsize=1024)
def _serve_eval(key: tuple, efficiency: str):
    """``serving.evaluate(plan, efficiency)`` of a record's configuration under a named efficiency (memoised)."""
    return evaluate(_serve_plan(key), efficiency)


@register_cache
@lru_cache(maxsize=2048)
def _serve_plan(key: tuple):
    """``serving.make_plan`` of a record's inputs (memoised): workload, layout, stack and dtypes — everything an
    efficiency does not change. A layout the record does not give is chosen on the ideal roofline, so that what is
    fitted never moves the layouts it is fitted on."""
    return make_plan(*serve_inputs(key, ideal=True))


def _serve_broadcast(rec: Record, eff, K: int) -> np.ndarray:
    """``serving.evaluate(plan, eff)`` with K-long efficiency fields: the record's metric per row (public API)."""
    return _serve_metrics([rec], eff, K)[0]


def _serve_metrics(recs, eff, K: int) -> np.ndarray:
    """(len(recs), K): the metrics of serving records of one run (one :func:`evaluation_key`) from one evaluation."""
    r = evaluate(_serve_plan(_key(serve_kwargs(recs[0]))), eff)
    d = {k: np.asarray(r.values[k], dtype=float) for k in _SERVE_VALUES}
    return np.array([np.broadcast_to(np.asarray(_metric_of_serve(d, rec), dtype=float), (K,)) for rec in recs])


def evaluation_key(rec: Record):
    """Records with equal keys (not None) are read from one engine evaluation: the metrics of one serving run
    (throughput, TPOT, TTFT) under the same candidate efficiencies (:func:`predict_many_records`)."""
    if rec.kind == "serve" and rec.efficiency is None:
        return _key(serve_kwargs(rec))
    return None


def predict_many_records(recs, params, names, name: str = "fit") -> np.ndarray:
    """(len(recs), K): :func:`predict_many` of records that share one :func:`evaluation_key`, in one engine call
    (equal, value for value, to :func:`predict_many` record by record: tested)."""
    recs = list(recs)
    if len(recs) == 1 or evaluation_key(recs[0]) is None:
        return np.array([predict_many(r, params, names, name) for r in recs])
    X = np.atleast_2d(np.asarray(params, dtype=float))
    try:
        return _serve_metrics(recs, _efficiency_from(X, tuple(names), name), len(X))
    except RackmathError:
        return np.full((len(recs), len(X)), np.nan)  # the model refuses the run's inputs: failed predictions


def predict_many(rec: Record, params, names=None, name: str = "fit", extra=None) -> np.ndarray:
    """rackmath's prediction of one record under K candidate efficiencies at once (SI, the record's metric).

    ``params`` is a (K, P) array; column j is the efficiency field ``names[j]`` (default
    ``calibration.PARAMS``: η_compute, η_memory, η_comm, step overhead in s). The efficiency's
    fields become numpy arrays of length K and the engine broadcasts them: one engine call per
    record instead of K. Equal to :func:`predict` row by row (tests); records that cannot be
    vectorized (:func:`vectorizable`), or an engine that does not broadcast these fields, are
    predicted one row at a time through the public API. ``extra``: non-numeric Efficiency fields every row shares
    (``moe_routing``).
    """
    if names is None or isinstance(names, str):  # predict_many(rec, X, "preset-name") (older signature)
        name = names if isinstance(names, str) else name

        names = tuple(d["name"] for d in FIT_PARAMS)
    X = np.atleast_2d(np.asarray(params, dtype=float))
    if X.ndim != 2 or X.shape[1] != len(names):
        raise InputError("params", f"shape {X.shape}", f"(K, {len(names)}): " + ", ".join(names))
    if rec.efficiency is None:
        try:
            eff = _efficiency_from(X, names, name, extra)
            if rec.kind == "serve":
                return _serve_broadcast(rec, eff, len(X))
            return _vector_prediction(rec, eff, len(X))
        except RackmathError:
            return np.full(len(X), np.nan)  # the model refuses the record's inputs: a failed prediction
    return np.array([predict(rec, efficiency=_efficiency_from(x, names, name, extra))[0] for x in X])


# --------------------------------------------------------------------------------------
# Errors and summaries
# --------------------------------------------------------------------------------------


def error(predicted, measured):
    """Signed error: predicted / measured − 1."""
    return np.asarray(predicted, dtype=float) / np.asarray(measured, dtype=float) - 1.0


def summarize(rows: list[dict]) -> dict:
    """Median and 90th-percentile |error|, mean |log ratio|, counts within ±20% and 2×, the worst record.

    The worst ratio is max(predicted/measured, measured/predicted) of the worst record (≥ 1).
    """
    if not rows:
        return {"n": 0}
    errs = np.array([r["error"] for r in rows], dtype=float)
    logr = np.abs(np.log1p(errs))
    worst = int(np.argmax(logr))
    return {"n": len(rows), "median_abs_error": float(np.median(np.abs(errs))),
            "p90_abs_error": float(np.percentile(np.abs(errs), 90)),
            "mean_abs_log_ratio": float(np.mean(logr)),
            "within_20pct": int(np.sum(np.abs(errs) <= 0.2)), "within_2x": int(np.sum(logr <= np.log(2.0) + 1e-12)),
            "worst_ratio": float(np.exp(logr[worst])),
            "worst": {"id": rows[worst]["id"], "error": float(errs[worst])}}


def summarize_by(rows: list[dict], key: str) -> dict:
    return {k: summarize([r for r in rows if r[key] == k]) for k in sorted({r[key] for r in rows})}


def summarize_by2(rows: list[dict], key: str, key2: str) -> dict:
    """{a: {b: summary}} over two keys (e.g. metric class, then stack version)."""
    return {a: summarize_by([r for r in rows if r[key] == a], key2) for a in sorted({r[key] for r in rows})}


def metric_report(rows: list[dict]) -> dict:
    """Errors reported per metric — output tok/s/GPU, TPOT, TTFT (``Record.metric_class``) — never pooled, each
    overall and by stack version, chip and source; with the record counts (issue 34)."""
    return {"summary_by_metric": summarize_by(rows, "metric_class"),
            "by_metric_and_stack": summarize_by2(rows, "metric_class", "stack"),
            "by_metric_and_chip": summarize_by2(rows, "metric_class", "chip"),
            "by_metric_and_source": summarize_by2(rows, "metric_class", "source_group"),
            "counts": {"records": len(rows), "by_stack": {k: sum(r["stack"] == k for r in rows)
                                                          for k in sorted({r["stack"] for r in rows})}}}


def held_out_summary(fit_rows: list[dict], efficiency=None, ideal=False) -> dict:
    """:func:`summarize` of each shipped record as predicted by the presets refitted without its source (the held-out
    table written with the presets, ``analyses/fitting/evidence``): the figure that measures transfer, for the default presets
    only (``{"n": 0}`` under ``ideal`` or another preset). A user's record that replaces a shipped one (same id, another
    value) is not in it."""
    if ideal or efficiency not in (None, "preset"):
        return {"n": 0}

    oos = {t["id"]: t for t in table()}
    return summarize([dict(r, error=float(error(oos[r["id"]]["predicted_out_of_sample"], r["measured"])))
                      for r in fit_rows if r["id"] in oos and oos[r["id"]]["measured"] == r["measured"]])


#: Engine parameter names and the record field that sets them (a record says ``gpus``, the engine ``chips``).
_RECORD_FIELD = {"chips": "gpus"}


def _shipped(rec: Record) -> bool:
    return Path(rec.path).resolve().parent == SHIPPED_DIR.resolve()


def record_problem(rec: Record, exc: RackmathError) -> str:
    """Why a user record cannot be predicted, as one line naming its file, id and field:
    ``mine.toml: record 'U1'.gpus: TP·PP = 3·1 = 3 needs more than the 1 chips (accepted: …)``."""
    field = getattr(exc, "field", None)
    if getattr(exc, "path", None) is not None or not isinstance(field, str):
        return f"{rec.path}: record {rec.id!r}: {exc}"
    msg = str(exc)
    rest = msg[len(field) + 2:] if msg.startswith(field + ": ") else msg
    return f"{rec.path}: record {rec.id!r}.{_RECORD_FIELD.get(field, field)}: {rest}"


def validate(efficiency=None, ideal=False, ids=None, recs=None) -> dict:
    """Every record predicted and compared.

    Returns ``{"records": [...], "summary", "summary_by_source", "summary_by_hardware_family",
    "summary_by_model_family", "summary_by_status", "summary_by_efficiency" (the preset each record
    was predicted with: "ideal" names chips without one), "summary_derived", "summary_held_out"
    (:func:`held_out_summary`), "excluded", "counts"}`` (and "skipped"). A user record the model refuses (``tp = 3`` on
    ``gpus = 1``) spoils only itself: it is left out and listed in ``skipped`` with :func:`record_problem`'s line;
    a shipped record that fails raises (a bug). ``summary`` covers the fitted records (measured and
    approximate, not excluded), in sample: the presets were fitted on them.
    ``recs`` defaults to the shipped records (:func:`records`).
    """
    rows, excluded, skipped = [], [], []
    for rec in (records() if recs is None else recs):
        if ids and rec.id not in ids:
            continue
        if rec.exclude is not None:
            excluded.append({"id": rec.id, "reason": rec.exclude, "source_group": rec.source_group})
            continue
        try:
            pred, info = predict(rec, efficiency=efficiency, ideal=ideal)
        except RackmathError as exc:
            if _shipped(rec):  # shipped data is checked strictly: a bug, caught by the tests
                raise
            skipped.append({"id": rec.id, "path": rec.path, "problem": record_problem(rec, exc)})
            continue
        row = rec.as_dict()
        row.update(predicted=pred, error=float(error(pred, rec.value)), ratio=pred / rec.value,
                   family=rec.hardware_family, fitted=rec.fitted, operating_point=info, chip=rec.chip)
        rows.append(row)
    fit = [r for r in rows if r["fitted"]]
    held = [r for r in rows if not r["fitted"] and r["status"] != "derived"]  # fit = false: out of sample
    out = {"records": rows, "summary": dict(summarize(fit), ideal=bool(ideal)),
            "summary_by_source": summarize_by(fit, "source_group"),
            "summary_by_hardware_family": summarize_by(fit, "hardware_family"),
            "summary_by_model_family": summarize_by(fit, "model_family"),
            "summary_by_status": summarize_by(fit, "status"),
            "summary_by_family": summarize_by(fit, "hardware_family"),
            "summary_by_efficiency": summarize_by([dict(r, efficiency_used=r["operating_point"].get("efficiency", "?"))
                                                   for r in fit], "efficiency_used"),
            "summary_derived": summarize([r for r in rows if r["status"] == "derived"]),
            "summary_held_out": held_out_summary(fit, efficiency, ideal),
            "by_metric": metric_report(fit),
            "summary_by_stack": summarize_by(fit, "stack"),
            "not_fitted": dict(summary=summarize(held), **metric_report(held),
                               note="records with fit = false (a campaign the shipped presets were not fitted on): "
                                    "their errors are out of sample"),
            "excluded": excluded,
            "counts": {"records": len(rows) + len(excluded), "fitted": len(fit), "not_fitted": len(held),
                       "sources": len({r["source_group"] for r in fit}), "excluded": len(excluded),
                       "derived": sum(r["status"] == "derived" for r in rows)}}
    if skipped:  # only when a user record was left out: the shipped records' output is unchanged
        out["skipped"] = skipped
        out["counts"]["skipped"] = len(skipped)
    return out


def below_ideal_bound(rec: Record, margin: float = 0.01) -> dict | None:
    """A record measured faster than rackmath's ideal roofline allows (a lower bound on time: peak rates, perfect
    overlap), or None. No run beats the bound, so such a record almost always describes another run than its inputs
    say: a narrower dtype, another model, more GPUs or shorter sequences. Each of those is tried on the bound (fp8 /
    fp4 weights, twice the GPUs, half the lengths); the ones under which the measurement becomes reachable are the
    likely causes. Returns {'id', 'metric', 'unit', 'measured', 'bound', 'ratio', 'causes': [(what, bound)]}.
    ``margin``: the share the measurement must pass the bound by (rounding in a published figure)."""
    from dataclasses import replace

    if not rec.fitted:  # excluded, or a derived figure (its own premises, not a measurement)
        return None
    bare = replace(rec, efficiency=None)  # a derived record's stated efficiency is not the bound
    time = UNITS.get(rec.metric) == "s"
    try:
        bound = float(predict(bare, ideal=True)[0])
    except RackmathError:
        return None

    def reachable(b):
        return rec.value >= b * (1 - margin) if time else rec.value <= b * (1 + margin)

    if reachable(bound):
        return None
    inp = dict(rec.inputs)
    variants = []
    wdt = inp.get("weights_dtype")
    width = units.dtype_bytes(wdt) if wdt else 2.0
    for dt in ("fp8", "fp4"):
        if units.dtype_bytes(dt) < width:
            variants.append((f"{dt} weights", dict(weights_dtype=dt)))
    gpus = dict(gpus=2 * inp["gpus"]) | ({"tp": 2 * inp["tp"]} if inp.get("tp") else {})
    variants.append((f"{2 * inp['gpus']} GPUs", gpus))
    half = {k: max(1.0, float(inp[k]) / 2) for k in ("isl", "osl", "context") if isinstance(inp.get(k), (int, float))}
    if half:
        variants.append(("half the " + "/".join(k.upper() if k != "context" else k for k in half), half))
    causes = []
    for what, change in variants:
        try:
            b = float(predict(replace(bare, inputs=inp | change), ideal=True)[0])
        except (RackmathError, ValueError, KeyError):
            continue
        if reachable(b):
            causes.append((what, b))
    return {"id": rec.id, "metric": rec.metric, "unit": UNITS.get(rec.metric, ""), "measured": rec.value,
            "bound": bound, "ratio": rec.value / bound, "causes": causes}


def select(recs, patterns) -> list:
    """The records whose id matches one of ``patterns`` (an id, or a shell glob: ``C3-*``, ``*-ttft``), in their
    order; a pattern that matches none is a one-line error naming the closest ids."""
    import difflib
    from fnmatch import fnmatchcase

    recs = list(recs)
    ids = [r.id for r in recs]
    for pat in patterns:
        if not any(fnmatchcase(i, pat) for i in ids):
            close = difflib.get_close_matches(pat, ids, n=3, cutoff=0.5)
            raise InputError("id", f"no record matches {pat!r}" + (f"; did you mean {', '.join(close)}?" if close
                                                                   else ""),
                             "record ids as `rackmath validate` lists them, or globs such as C3-* or *-ttft")
    return [r for r in recs if any(fnmatchcase(r.id, pat) for pat in patterns)]


def explain(rec: Record, efficiency=None, ideal=False):
    """The derivation behind :func:`predict`: the ``serve`` derivation (or the single pass's layout derivation) whose
    numbers the record's metric reads, then the metric, the measured value and their ratio (checked: ``check()``)."""
    if rec.exclude is not None:
        raise InputError("id", f"{rec.id} is excluded ({rec.exclude})", "a record that is predicted")
    pred, info, res = _predict(rec, efficiency, ideal)
    base = res.explain() if rec.kind == "serve" else res.explain(0)
    unit = UNITS.get(rec.metric, "")
    d = Derivation(f"{rec.id}: {rec.title} — {base.title}", list(base.steps), base.conclusion)
    d.add("predicted", f"{rec.metric}, read from the derivation above ({info.get('efficiency', '')})", "", pred, unit,
          key="predicted")
    d.add("measured", rec.source, "", rec.value, unit, f"status {rec.status}", key="measured")
    d.add("ratio", "predicted / measured", f"{pred:.4g} / {rec.value:.4g}", pred / rec.value, "",
          f"error {error(pred, rec.value):+.1%}" + ("; outside 2×" if max(pred / rec.value, rec.value / pred) > 2
                                                    else ""), expr="predicted / measured")
    return d


__all__ = ["Record", "records", "shipped_records", "predict", "predict_many", "vectorizable", "source_group",
           "validate", "summarize", "summarize_by", "summarize_by2", "metric_report", "held_out_summary", "error",
           "max_load_concurrency", "serve_kwargs", "serve_inputs", "select", "explain", "below_ideal_bound", "evaluation_key",
           "predict_many_records"]
