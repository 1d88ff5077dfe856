"""Predicted vs measured: every validation record (catalog data, ``specs/records.py``).

The records are ``[[record]]`` TOML tables — the public measurements of
``reference/published.md`` §1 shipped in ``rackmath/specs/data/records/``, plus any a user
adds (``rackmath validate --records DIR``). Each holds its inputs as published, the measured
value, its source and the assumptions that fill in what the source does not say (one rule per
table, never tuned per row). This module predicts each record with the public serving API
(:func:`rackmath.analyses.serving.serve` for ``kind = "serve"``, a single decode step or
prefill pass for ``kind = "step"`` / ``"prefill"``) and summarises the signed errors
``predicted / measured − 1``, overall and by source, hardware family, model family and status.

Records with ``status = "derived"`` (the scaling book's worked examples) are model-derived
figures: shown with the efficiency they state, never fitted, summarised apart. Records with
``exclude = "reason"`` are kept as data and listed with their reason, never predicted.
"""

from __future__ import annotations

import inspect
from functools import lru_cache

import numpy as np

from ..specs.catalog import register_cache
from ..specs.records import Record, load_records, shipped_records

PUBLISHED = "reference/published.md"


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
                         pp=None, attention_dp=None, max_batch=None):
    """The documented max-load rule: C = min(largest C whose KV fits 90% of HBM, ``max_batch`` per replica).

    The KV is sized at the steady-state mean context ISL + OSL/2 (paged KV grows with the output);
    ``max_batch`` defaults to TensorRT-LLM's 2,048.
    """
    from .serving import MAX_BATCH_SIZE, serve

    r = serve(model, hardware, gpus=gpus, isl=isl, osl=osl, concurrency=1, tp=tp, ep=ep, pp=pp,
              attention_dp=attention_dp, weights_dtype=weights_dtype, kv_dtype=kv_dtype, ideal=True)
    cap = float(np.asarray(r.max_concurrency).ravel()[0])
    per_replica = MAX_BATCH_SIZE if max_batch is None else int(max_batch)
    return max(1.0, min(cap, per_replica * r.layout["dp"] * r.layout.get("pp", 1)))


def _key(inputs: dict) -> tuple:
    return tuple(sorted(inputs.items()))


_SERVE_ARGS = ("model", "hardware", "gpus", "prefill_gpus", "decode_gpus", "tp", "ep", "pp", "attention_dp",
               "redundant_experts", "kv_shards", "isl", "osl", "concurrency", "cached_share", "weights_dtype",
               "kv_dtype", "mtp", "acceptance")


@lru_cache(maxsize=1)
def _serve_params() -> frozenset:
    from .serving import serve

    return frozenset(inspect.signature(serve).parameters)


@register_cache
@lru_cache(maxsize=1024)
def _max_load_cached(key: tuple) -> float:
    inp = dict(key)
    return max_load_concurrency(inp["model"], inp["hardware"], gpus=inp["gpus"], isl=inp["isl"], osl=inp["osl"],
                                weights_dtype=inp.get("weights_dtype"), kv_dtype=inp.get("kv_dtype"),
                                tp=inp.get("tp"), ep=inp.get("ep"), pp=inp.get("pp"),
                                attention_dp=inp.get("attention_dp"), max_batch=inp.get("max_batch"))


def serve_kwargs(rec: Record) -> dict:
    """The keyword arguments of ``serve()`` for a serving record (concurrency resolved, framework if supported)."""
    inp = dict(rec.inputs)
    if inp.get("concurrency") == "max-load":
        inp["concurrency"] = _max_load_cached(_key({k: v for k, v in inp.items() if k != "framework"}))
    kw = {k: inp[k] for k in _SERVE_ARGS if k in inp}
    if "framework" in inp and "framework" in _serve_params():
        kw["framework"] = inp["framework"]
    return kw


def _metric_of_serve(d: dict, rec: Record) -> float:
    m = rec.metric
    v = {k: np.asarray(d[k], dtype=float) for k in ("output_tok_s_per_gpu", "total_tok_s_per_gpu", "tpot_ms",
                                                    "ttft_ms", "step_ms", "tokens_per_s_per_user")}
    if m == "output_tok_s_per_gpu":
        out = v["output_tok_s_per_gpu"]
    elif m == "total_tok_s_per_gpu":
        out = v["total_tok_s_per_gpu"]
    elif m == "tpot_s":
        out = v["tpot_ms"] / 1e3
    elif m == "ttft_s":
        out = v["ttft_ms"] / 1e3
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
    """``serve(**kwargs).as_dict()``, memoised (records reporting several metrics of one run share it)."""
    from .serving import serve

    return serve(**dict(key), efficiency=efficiency, ideal=ideal).as_dict()


def record_efficiency(rec: Record, efficiency):
    """Which efficiency a record is predicted with: a derived record keeps the one it states."""
    from ..engine.efficiency import Efficiency

    e = rec.efficiency
    if e is None:
        return efficiency
    if isinstance(e, dict):
        return Efficiency("record-stated", **{k: float(v) for k, v in e.items()},
                          description=f"the efficiency record {rec.id} states")
    return e  # "ideal" or a preset name


def _pass_args(rec: Record) -> tuple[dict, dict]:
    inp = rec.inputs
    common = {k: inp[k] for k in ("model", "hardware", "tp", "weights_dtype", "kv_dtype") if k in inp}
    common["chips"] = inp["gpus"]
    extra = {k: inp[k] for k in ("ep", "attention_dp", "kv_shards", "redundant_experts") if k in inp}
    if "framework" in inp and "framework" in _pass_params():
        extra["framework"] = inp["framework"]
    return common, extra


@lru_cache(maxsize=1)
def _pass_params() -> frozenset:
    from .serving import decode_step, prefill_time

    return frozenset(inspect.signature(decode_step).parameters) & frozenset(inspect.signature(prefill_time).parameters)


def _prefill_batch(rec: Record) -> float:
    """A prefill throughput record without a batch: each GPU's pass carries ~MAX_NUM_TOKENS computed tokens."""
    from .serving import MAX_NUM_TOKENS

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

    ``efficiency`` None = the calibrated default for the record's chip (``serve``'s own choice);
    ``ideal`` the roofline. A derived record keeps the efficiency it states.
    """
    from .serving import decode_step, prefill_time

    eff = record_efficiency(rec, efficiency)
    if eff == "ideal":
        eff, ideal = None, True
    elif rec.efficiency is not None:
        ideal = False
    if rec.kind == "serve":
        kw = serve_kwargs(rec)
        d = _serve_dict(_key(kw), eff, bool(ideal))
        info = {k: d[k] for k in ("concurrency", "tpot_ms", "ttft_ms", "output_tok_s_per_gpu", "bottleneck",
                                  "efficiency")}
        info["layout"] = d["layout"]["label"]
        return _metric_of_serve(d, rec), info
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
    return float(_pass_metric(rec, step, batch)), info


# --------------------------------------------------------------------------------------
# Many efficiencies at once (what makes fitting and cross-validation fast)
# --------------------------------------------------------------------------------------

#: Serving metrics whose fixed-layout prediction :func:`predict_many` evaluates in one vectorized engine call.
_VECTOR_SERVE_METRICS = ("output_tok_s_per_gpu", "total_tok_s_per_gpu", "tpot_s", "step_s", "tok_s_per_user",
                         "ttft_s", "e2e_s")


def vectorizable(rec: Record) -> bool:
    """Whether :func:`predict_many` evaluates K efficiencies in one engine call for this record.

    Single passes, and aggregated serving with the layout given and a step-time metric. Records
    whose layout rackmath chooses (the choice depends on the efficiency), TTFT / end-to-end
    metrics and disaggregated serving are predicted one efficiency at a time through ``serve()``.
    """
    if rec.efficiency is not None:
        return False
    if rec.kind in ("step", "prefill"):
        return True
    inp = rec.inputs
    return (rec.metric in _VECTOR_SERVE_METRICS and "prefill_gpus" not in inp
            and any(inp.get(k) is not None for k in ("tp", "ep", "pp", "attention_dp")))


_vectorizable = vectorizable  # the name older callers used


@register_cache
@lru_cache(maxsize=1024)
def _serve_step_setup(key: tuple):
    """What a fixed-layout serving record's step carries, independent of the efficiency (memoised).

    The same calls, in the same order, as ``serving.serve`` for an aggregated deployment with the
    layout given. (Private helpers of ``serving``: if they change, :func:`predict_many` falls back
    to the public ``serve()`` one efficiency at a time.)
    """
    from .. import units
    from ..engine.layout import Deployment
    from ..specs.hardware import load_hardware
    from ..specs.models import load_model
    from .serving import _check_inputs, step_numbers

    inp = dict(key)
    m, system = load_model(inp["model"]), load_hardware(inp["hardware"])
    gpus, isl, osl = int(inp["gpus"]), float(inp["isl"]), float(inp["osl"])
    mtp, h = int(inp.get("mtp", 0)), float(inp.get("cached_share", 0.0))
    a = _check_inputs(gpus, isl, osl, inp["concurrency"], mtp, inp.get("acceptance"), h, None, None)
    wd = inp.get("weights_dtype")
    wdt = units.normalize_dtype(wd, "weights_dtype") if wd else None
    kvdt = units.normalize_dtype(inp.get("kv_dtype") or getattr(m, "kv_dtype", None) or "bf16", "kv_dtype")
    cdt = system.chip.compute_dtype(wdt or m.native_dtype)
    mn = step_numbers(m, isl=isl, osl=osl, weights_dtype=wdt, kv_dtype=kvdt, mtp=mtp, acceptance=a, cached_share=h,
                      prefill=True, kv_shards=inp.get("kv_shards"))
    tp = inp.get("tp")
    rx = int(inp.get("redundant_experts", 0))
    dep = Deployment.build(system, gpus, tp=int(tp) if tp is not None else min(gpus, int(system.scaleup_size)),
                           ep=int(inp.get("ep") or 1), pp=int(inp.get("pp") or 1),
                           attention_dp=bool(inp.get("attention_dp")), redundant_experts=rx, model=m)
    C = np.asarray(inp["concurrency"], dtype=float)
    b = np.maximum(C / (dep.dp * dep.pp), 1.0)
    from .serving import MAX_NUM_TOKENS, prefill_chunks, prefill_numbers

    isl_new = isl * (1.0 - h)
    chunk = float(min(max(isl_new, 1.0), MAX_NUM_TOKENS))
    mp = prefill_numbers(m, isl=isl, chunk=chunk, weights_dtype=wdt, kv_dtype=kvdt, cached_share=h,
                         kv_shards=inp.get("kv_shards"))
    n_chunks = float(prefill_chunks(isl_new, MAX_NUM_TOKENS))
    return mn, system, cdt, dep, C, b, a, gpus, rx, isl, osl, mp, n_chunks


def _efficiency_from(X: np.ndarray, names, name: str):
    from ..engine.efficiency import Efficiency

    if X.ndim == 1:
        return Efficiency(name, **{n: float(v) for n, v in zip(names, X)})
    return Efficiency(name, **{n: X[:, j].copy() for j, n in enumerate(names)})


def _vector_prediction(rec: Record, eff, K: int) -> np.ndarray:
    from .serving import _evaluate, decode_step, output_tokens_per_s, prefill_time, tokens_per_s_per_user, \
        total_tokens_per_s, tpot

    if rec.kind == "serve":
        kw = serve_kwargs(rec)
        kw.pop("framework", None)
        mn, system, cdt, dep, C, b, a, gpus, rx, isl, osl, mp, n_chunks = _serve_step_setup(_key(kw))
        _, step, _ = _evaluate(mn, system, eff, cdt, tp=dep.tp, ep=dep.ep, pp=dep.pp, attention_dp=dep.attention_dp,
                               micro_batch=b, chips=gpus, redundant_experts=rx)
        m = rec.metric
        if m in ("ttft_s", "e2e_s"):
            from .serving import ttft_aggregated

            _, chunk_s, _ = _evaluate(mp, system, eff, cdt, tp=dep.tp, ep=dep.ep, pp=dep.pp,
                                      attention_dp=dep.attention_dp, micro_batch=1.0, chips=gpus)
            ttft = ttft_aggregated(chunk_s, n_chunks, step)
            out = ttft if m == "ttft_s" else ttft + (osl - 1.0) * tpot(step, a)
            return np.broadcast_to(np.asarray(out, dtype=float), (K,)).copy()
        if m == "output_tok_s_per_gpu":
            out = output_tokens_per_s(C, step, a) / gpus
        elif m == "total_tok_s_per_gpu":
            out = total_tokens_per_s(output_tokens_per_s(C, step, a), isl, osl) / gpus
        elif m == "tpot_s":
            out = tpot(step, a)
        elif m == "tok_s_per_user":
            out = tokens_per_s_per_user(tpot(step, a))
        else:
            out = step
        return np.broadcast_to(np.asarray(out, dtype=float), (K,)).copy()
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


_SERVE_BROADCASTS: dict = {}


def _serve_broadcast(rec: Record, eff, K: int) -> np.ndarray:
    """``serve(**record inputs, efficiency=eff)`` with K-long efficiency fields, the record's metric per row."""
    from .serving import serve

    r = serve(**serve_kwargs(rec), efficiency=eff)
    d = {k: np.asarray(r.values[k], dtype=float) for k in ("output_tok_s_per_gpu", "total_tok_s_per_gpu", "tpot_ms",
                                                            "ttft_ms", "step_ms", "tokens_per_s_per_user")}
    out = np.asarray(_metric_of_serve(d, rec), dtype=float)
    if out.shape != (K,):
        raise ValueError("serve() did not broadcast the efficiency")
    return out


def predict_many(rec: Record, params, names=None, name: str = "fit") -> np.ndarray:
    """rackmath's prediction of one record under K candidate efficiencies at once (SI, the record's metric).

    ``params`` is a (K, P) array; column j is the efficiency field ``names[j]`` (default
    ``calibration.PARAMS``: η_compute, η_memory, η_comm, step overhead in s). The efficiency's
    fields become numpy arrays of length K and the engine broadcasts them: one engine call per
    record instead of K. Equal to :func:`predict` row by row (tests); records that cannot be
    vectorized (:func:`vectorizable`), or an engine that does not broadcast these fields, are
    predicted one row at a time through the public API.
    """
    if names is None or isinstance(names, str):  # predict_many(rec, X, "preset-name") (older signature)
        name = names if isinstance(names, str) else name
        from .calibration import default_spec

        names = default_spec().names
    X = np.atleast_2d(np.asarray(params, dtype=float))
    if X.ndim != 2 or X.shape[1] != len(names):
        from ..errors import InputError

        raise InputError("params", f"shape {X.shape}", f"(K, {len(names)}): " + ", ".join(names))
    if vectorizable(rec) and rec.kind == "serve" and _SERVE_BROADCASTS.get("ok", True):
        try:  # the public serve() itself, if it broadcasts an efficiency whose fields are arrays
            out = _serve_broadcast(rec, _efficiency_from(X, names, name), len(X))
            _SERVE_BROADCASTS["ok"] = True
            return out
        except Exception:  # noqa: BLE001 — any failure means: it does not broadcast; never ask again
            _SERVE_BROADCASTS["ok"] = False
    if vectorizable(rec):
        try:
            return _vector_prediction(rec, _efficiency_from(X, names, name), len(X))
        except (TypeError, ValueError, AttributeError, ImportError):
            pass  # the engine does not broadcast these fields: one at a time below
    return np.array([predict(rec, efficiency=_efficiency_from(x, names, name))[0] for x in X])


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


def validate(efficiency=None, ideal=False, ids=None, recs=None) -> dict:
    """Every record predicted and compared.

    Returns ``{"records": [...], "summary", "summary_by_source", "summary_by_hardware_family",
    "summary_by_model_family", "summary_by_status", "summary_by_efficiency" (the preset each record
    was predicted with: "ideal" names chips without one), "summary_derived", "excluded", "counts"}``.
    ``summary`` covers the fitted records (measured and approximate, not excluded): the headline.
    ``recs`` defaults to the shipped records (:func:`records`).
    """
    rows, excluded = [], []
    for rec in (records() if recs is None else recs):
        if ids and rec.id not in ids:
            continue
        if rec.exclude is not None:
            excluded.append({"id": rec.id, "reason": rec.exclude, "source_group": rec.source_group})
            continue
        pred, info = predict(rec, efficiency=efficiency, ideal=ideal)
        row = rec.as_dict()
        row.update(predicted=pred, error=float(error(pred, rec.value)), ratio=pred / rec.value,
                   family=rec.hardware_family, fitted=rec.fitted, operating_point=info)
        rows.append(row)
    fit = [r for r in rows if r["fitted"]]
    return {"records": rows, "summary": dict(summarize(fit), ideal=bool(ideal)),
            "summary_by_source": summarize_by(fit, "source_group"),
            "summary_by_hardware_family": summarize_by(fit, "hardware_family"),
            "summary_by_model_family": summarize_by(fit, "model_family"),
            "summary_by_status": summarize_by(fit, "status"),
            "summary_by_family": summarize_by(fit, "hardware_family"),
            "summary_by_efficiency": summarize_by([dict(r, efficiency_used=r["operating_point"].get("efficiency", "?"))
                                                   for r in fit], "efficiency_used"),
            "summary_derived": summarize([r for r in rows if r["status"] == "derived"]),
            "excluded": excluded,
            "counts": {"records": len(rows) + len(excluded), "fitted": len(fit),
                       "sources": len({r["source_group"] for r in fit}), "excluded": len(excluded),
                       "derived": sum(r["status"] == "derived" for r in rows)}}


__all__ = ["Record", "records", "shipped_records", "predict", "predict_many", "vectorizable", "source_group",
           "validate", "summarize", "summarize_by", "error", "max_load_concurrency", "serve_kwargs"]
