"""Cross-validation of the calibration: refit without each group, predict the group (``rackmath validate --cv``).

Schemes leave one source out (``source_group``), one hardware family, one model family, one stack version, one
InferenceMAX group, or one record. Each fold is the fit of :mod:`.calibration` on what remains, run in lockstep with
the others (:func:`.cache.together`) so their candidate vectors reach the engine together; ``jobs`` > 1 deals them to
forked workers.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import replace

from ...errors import InputError
from .cache import PredictionCache, drive, together
from .calibration import ParamSpec, _check_fit_args, _fit_steps, _predict_steps, default_spec, fitted_records
from .validation import error, metric_report, summarize, summarize_by
from ..serving.serve import load_stack

CV_SCHEMES = ("source", "hardware", "model", "loo", "stack", "group")
DEFAULT_CV = ("source", "hardware", "model")
#: The Record attribute each scheme leaves out one value of. ``stack``: framework@stack_version (one stack version;
#: records without a version are their framework's group); ``group``: a campaign's configuration group (InferenceMAX:
#: model × chip × framework) — records without one are never held out by it, they always train.
SCHEME_KEY = {"source": "source_group", "hardware": "hardware_family", "model": "model_family", "loo": "id",
               "stack": "stack", "group": "group"}
SCHEME_LABEL = {"source": "leave one source out", "hardware": "leave one hardware family out",
                "model": "leave one model family out", "loo": "leave one record out",
                "stack": "leave one stack version out",
                "group": "leave one InferenceMAX group out (model × chip × framework)"}



_FOLD = {}  # what forked workers inherit: records, spec, rounds, an empty cache (each worker fills its own), queue


def _task_steps(task, recs, spec, cache, rounds):
    """One task as a request generator. ("in-sample", "all"): the full fit and its predictions of every record
    → (Fit, predictions). (scheme, group): refit without the group (and, if a held-out family was not fitted, the
    cross-family fit alongside), predict the group → (predictions, params_from, fold info), or None when nothing is
    left to fit on."""
    scheme, g = task
    if scheme == "in-sample":
        full = yield from _fit_steps(recs, spec, rounds, cache)
        p, _ = yield from _predict_steps(full, recs)
        return replace(full, _records=[], _cache=None, _cross=None), [float(x) for x in p]
    key = SCHEME_KEY[scheme]
    held = [r for r in recs if getattr(r, key, None) == g]
    train = [r for r in recs if getattr(r, key, None) != g]
    if not train:
        return None
    trained = {spec.family(r) for r in train}
    cross = any(p.per_family for p in spec.params) and any(spec.family(r) not in trained for r in held)
    fits = yield from together([_fit_steps(train, spec, rounds, cache)]
                                + ([_fit_steps(train, spec.tied(), None, cache)] if cross else []))
    fold = fits[0]
    if cross:
        fold._cross = fits[1]  # what Fit.cross_family() would fit (the spec's rounds)
    p, how = yield from _predict_steps(fold, held)
    info = {"group": g, "held_out": [r.id for r in held], "n_train": len(train), "n_params": fold.n_params,
            "objective_mean_abs_log": fold.objective, "params_from": sorted(set(how)), "fit": fold.as_dict()}
    return [float(x) for x in p], list(how), info


def _run_tasks(tasks, done=None):
    """Run ``tasks`` in lockstep on the worker's cache: ({task: result}, predictions evaluated). ``done(task)`` is
    called as each finishes (in a forked worker: put on the parent's queue, if it gave one)."""
    recs, spec, cache, rounds = _FOLD["recs"], _FOLD["spec"], _FOLD["cache"], _FOLD["rounds"]
    if done is None and _FOLD.get("queue") is not None:
        done = _FOLD["queue"].put
    n0 = cache.evaluated
    res = drive(together([_task_steps(t, recs, spec, cache, rounds) for t in tasks],
                           done=(lambda k, _v: done(tasks[k])) if done else None), cache)
    return dict(zip(tasks, res)), cache.evaluated - n0


def _count_by(recs, attr) -> dict:
    vals = [getattr(r, attr, None) or "unstated" for r in recs]
    return {k: vals.count(k) for k in sorted(set(vals))}


def stack_params(spec, recs) -> dict:
    """The fitted parameters each stack version of ``recs`` has of its own: the host times of the engine it runs
    (``<field>_<engine>_s``; every version of an engine shares them until they are fitted per version)."""
    out = {}
    for st in sorted({getattr(r, "stack", None) or "unstated" for r in recs}):
        eng = "generic"
        for name in ((None if st == "unstated" else st), st.partition("@")[0]):  # an unlisted version: its framework
            try:
                eng = load_stack(name).name.replace("-", "_")
                break
            except (InputError, ValueError, KeyError):
                continue
        out[st] = [p.name for p in spec.params if p.name.endswith(f"_{eng}_s")]
    return out


def default_jobs() -> int:
    """Worker processes for cross-validation folds: the CPUs this process may use (at most 8)."""

    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(8, n))



def cross_validate(recs=None, spec: ParamSpec | None = None, predictor=None, schemes=DEFAULT_CV,
                   rounds: int | None = None, progress=None, jobs: int | None = 1,
                   include_unfitted: bool = False) -> dict:
    """Out-of-group error of the calibration: refit without each group, predict the group.

    ``recs`` defaults to the shipped records (only fitted ones are used). ``schemes``: any of
    ``"source"`` (leave one ``source_group`` out), ``"hardware"`` (one hardware family),
    ``"model"`` (one model family), ``"loo"`` (one record), ``"stack"`` (one stack version, ``Record.stack``),
    ``"group"`` (one InferenceMAX group: model × chip × framework; records without a group always train). Each
    scheme's result also reports every metric apart — output tok/s/GPU, TPOT, TTFT — by stack version, chip and
    source (``by_metric``: :func:`validation.metric_report`). ``include_unfitted`` fits and holds out the
    ``fit = false`` records too. Returns ``in_sample`` (the full fit:
    parameters, records, summaries) and per scheme ``records`` (held-out predictions, with
    ``params_from`` = ``family`` or ``cross-family``), ``summary``, ``summary_by_group``,
    ``summary_by_hardware_family``, ``summary_by_model_family``, ``folds``; plus ``counts``
    (records, sources, families, fitted parameters) and ``spec``.

    Folds are independent refits, run in lockstep with the full fit (:func:`.cache.together`): at every step the
    candidate vectors of all of them are predicted in one engine call per record (per serving run), and memoised.
    ``jobs`` > 1 deals them round-robin to that many forked worker processes (``None``: :func:`default_jobs`), each
    running its share in lockstep on its own cache. The result does not depend on ``jobs`` (the fitter is
    deterministic, a prediction depends on its own candidate vector only; tested).
    """
    spec = default_spec() if spec is None else spec
    bad = [s for s in schemes if s not in CV_SCHEMES]
    if bad:
        raise InputError("schemes", f"unknown cross-validation scheme {bad[0]!r}", ", ".join(CV_SCHEMES))
    recs = fitted_records(recs, include_unfitted)
    if len(recs) < 2:
        raise InputError("records", f"{len(recs)} fitted record(s)", "at least 2 measured or approximate records")
    _check_fit_args(spec, spec.rounds if rounds is None else rounds)
    jobs = default_jobs() if jobs is None else int(jobs)
    if jobs < 1:
        raise InputError("jobs", f"{jobs}", "a number of worker processes ≥ 1")
    tasks = [(scheme, g) for scheme in schemes  # a record without a group (None) is never held out, always trains
             for g in dict.fromkeys(getattr(r, SCHEME_KEY[scheme], None) for r in recs) if g is not None]
    everything = [("in-sample", "all")] + tasks  # the full fit runs alongside the folds
    _FOLD.update(recs=recs, spec=spec, cache=PredictionCache(spec.names, predictor), rounds=rounds)
    try:
        results, evaluated = _run_everything(everything, jobs, progress)
    finally:
        _FOLD.clear()
    full, pred = results.pop(("in-sample", "all"))
    in_err = {r.id: float(error(p, r.value)) for r, p in zip(recs, pred)}
    in_rows = [_row(r, p, in_err) for r, p in zip(recs, pred)]
    out = {"method": "refit the parameter vector without the held-out group (same fitter, grid and rounds), "
                     "predict the group; a family with no record left uses the cross-family fit",
           "spec": spec.describe(), "rounds": spec.rounds if rounds is None else int(rounds),
           "counts": _counts(spec, recs, full),
           "in_sample": {"fit": full.as_dict(), "records": in_rows, "summary": summarize(in_rows),
                         "summary_by_hardware_family": summarize_by(in_rows, "hardware_family"),
                         "summary_by_model_family": summarize_by(in_rows, "model_family"),
                         "summary_by_source": summarize_by(in_rows, "source_group")}}
    for scheme in schemes:
        out[scheme] = _scheme_report(scheme, recs, [t for t in tasks if t[0] == scheme], results, in_err)
    out["predictions_evaluated"] = int(evaluated)
    out["jobs"] = jobs
    return out


def _run_everything(everything: list, jobs: int, progress) -> tuple[dict, int]:
    """Run the tasks (:data:`_FOLD` set): in this process with ``jobs`` 1, else dealt round-robin to forked workers,
    one lockstep per worker — an engine call costs about the same for 9 candidate rows as for hundreds, so the fewer
    the groups, the fewer the calls. ``progress(scheme, group)`` as each task finishes. ({task: result}, evaluated)."""
    if jobs == 1:
        return _run_tasks(everything, done=(lambda t: progress(*t)) if progress else None)
    results, evaluated = {}, 0
    n = min(jobs, len(everything))
    ctx = mp.get_context("fork")
    queue = _FOLD["queue"] = ctx.SimpleQueue() if progress else None

    def drain():
        while queue is not None and not queue.empty():
            progress(*queue.get())

    with ProcessPoolExecutor(max_workers=n, mp_context=ctx) as ex:
        pending = {ex.submit(_run_tasks, everything[k::n]) for k in range(n)}
        while pending:
            finished, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            drain()
            for fu in finished:
                res, ev = fu.result()
                results.update(res)
                evaluated += ev
    drain()
    return results, evaluated


def _row(r, p, in_err: dict, how=None) -> dict:
    """One record's line of the report: its groups, measured and predicted values, error and in-sample error."""
    d = {"id": r.id, "source_group": r.source_group, "hardware_family": r.hardware_family,
         "model_family": r.model_family, "status": r.status, "metric": getattr(r, "metric", ""), "measured": r.value,
         "metric_class": getattr(r, "metric_class", getattr(r, "metric", "")), "stack": getattr(r, "stack", ""),
         "chip": getattr(r, "chip", ""), "group": getattr(r, "group", None),
         "predicted": float(p), "error": float(error(p, r.value)), "in_sample_error": in_err[r.id]}
    if how:
        d["params_from"] = how
    return d


def _counts(spec: ParamSpec, recs: list, full) -> dict:
    """Records, sources and families next to the fitted parameters (shared, per family, per stack version)."""
    return {"records": len(recs), "sources": len(full.sources),
            "hardware_families": len({r.hardware_family for r in recs}),
            "model_families": len({r.model_family for r in recs}), "fitted_params": full.n_params,
            "params_per_family": sum(p.per_family and not p.families for p in spec.params),
            "params_some_families": {p.name: [f for f in p.families if f in full.families]
                                     for p in spec.params
                                     if p.per_family and set(p.families) & set(full.families)},
            "shared_params": sum(not p.per_family for p in spec.params),
            "records_by_stack": _count_by(recs, "stack"),
            "params_by_stack": stack_params(spec, recs)}


def _scheme_report(scheme: str, recs: list, tasks: list, results: dict, in_err: dict) -> dict:
    """One scheme's held-out predictions (in the records' order), summaries, folds and the groups it could not
    predict."""
    key = SCHEME_KEY[scheme]
    by_id = {r.id: r for r in recs}
    order = {r.id: i for i, r in enumerate(recs)}
    rows, folds, skipped = [], [], []
    for task in tasks:
        res = results[task]
        if res is None:
            skipped.append({"group": task[1], "reason": "nothing left to fit on"})
            continue
        p, how, info = res
        rows += [_row(by_id[i], x, in_err, h) for i, x, h in zip(info["held_out"], p, how)]
        folds.append(info)
    if not tasks:  # e.g. "group" without the fit = false InferenceMAX records
        skipped.append({"group": "-", "reason": f"no fitted record has a {key} (the InferenceMAX records are "
                                                "fit = false: --with-unfitted)"})
    rows.sort(key=lambda r: order[r["id"]])
    return {"label": SCHEME_LABEL[scheme], "group_key": key, "records": rows, "summary": summarize(rows),
            "summary_by_group": summarize_by(rows, key),
            "summary_by_hardware_family": summarize_by(rows, "hardware_family"),
            "summary_by_model_family": summarize_by(rows, "model_family"),
            "by_metric": metric_report(rows),
            "folds": folds, "not_predictable": skipped}


__all__ = ["cross_validate", "default_jobs", "stack_params", "CV_SCHEMES", "DEFAULT_CV", "SCHEME_LABEL"]
