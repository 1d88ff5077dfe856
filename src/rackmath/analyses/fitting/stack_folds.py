"""Cross-validation of the staged fit (:mod:`.stack`): one InferenceMAX group, hardware family, published source or
stack version left out at a time, each version the fold holds refitted without it (``stack.fit_version``; a version
with nothing left an unseen build), the held chips' inferred silicon first where asked. ``benchmarks/stack_fit.py``
prints the tables; no I/O here. The fitting functions are reached through the module (``S.fit_version``), so a test
that replaces one in :mod:`.stack` replaces it here too."""

from __future__ import annotations

import numpy as np

from . import stack as S
from .stack import Predictor
from ...specs.records import METRIC_CLASS


def _leave_out(recs, predictor: Predictor, starts: dict, folds, infer_silicon: bool = False,
               hierarchical: bool = False) -> dict:
    """{record id: prediction} of the records of each fold (held records, the predicate marking what the fold leaves
    out): each version the fold holds refitted without what it leaves out (:func:`.stack.fit_version`; a version
    with nothing left is an unseen build), with ``infer_silicon`` the held chips' inferred silicon refitted first
    (:func:`.stack.without`). The other versions' own fits are shared across folds where the silicon is (``cache``:
    keyed by version and records, valid under one predictor only)."""
    out, cache = {}, {}
    for held, exclude in folds:
        pr = S.without(recs, predictor, starts, held, exclude) if infer_silicon else predictor
        c = cache if pr is predictor else {}
        versions = {S.version_of(r) for r in held}
        hosts = {v: S.fit_version(recs, pr, starts, v, exclude, hierarchical, c) for v in versions}
        out.update(zip((r.id for r in held), S.predict(held, pr, hosts)))
    return out


def leave_one_group_out(recs, predictor: Predictor, starts: dict, groups=None, hierarchical: bool = False,
                        infer_silicon: bool = False) -> dict:
    """{record id: prediction} of every InferenceMAX record with its group (``Record.group``) left out of the fit
    (``infer_silicon``: the held chip's inferred silicon refitted without the group first, :func:`.stack.fit_silicon`; a
    chip with no other group keeps its preset's)."""
    by_group = S._by([r for r in recs if r.group], lambda r: r.group)
    folds = ((by_group[g], lambda r, g=g: r.group == g) for g in groups or sorted(by_group))
    return _leave_out(recs, predictor, starts, folds, infer_silicon, hierarchical)


def leave_one_family_out(recs, predictor: Predictor, starts: dict, infer_silicon: bool = False) -> dict:
    """{record id: prediction} of every InferenceMAX record with its chip's hardware family (hopper, blackwell, amd)
    left out: each version refitted on the other families' records (one seen only there an unseen build), with
    ``infer_silicon`` a chip's inferred silicon refitted without it (none left: :func:`.stack.orphans`)."""
    by_fam = S._by([r for r in recs if r.group], lambda r: r.hardware_family)
    folds = ((by_fam[f], lambda r, f=f: r.hardware_family == f) for f in sorted(by_fam))
    return _leave_out(recs, predictor, starts, folds, infer_silicon)


def leave_one_source_out(recs, predictor: Predictor, starts: dict, infer_silicon: bool = False) -> dict:
    """{record id: prediction} of every published record (``fit``) with its source (``source_group``) left out: its
    versions refitted on the rest, a version only it ran (so each build it names no version of) an unseen build; with
    ``infer_silicon`` its chips' inferred silicon refitted without it: ``validate --cv``'s scheme, staged."""
    by_src = S._by([r for r in recs if r.fit and r.source_group], lambda r: r.source_group)
    folds = ((by_src[s], lambda r, s=s: r.fit and r.source_group == s) for s in sorted(by_src))
    return _leave_out(recs, predictor, starts, folds, infer_silicon)


def leave_one_version_out(recs, predictor: Predictor, starts: dict, versions=None, infer_silicon: bool = False) -> dict:
    """{record id: prediction} of every record of each listed version with that version left out (its engine's
    fit on the other versions' records; ``infer_silicon``: the inferred silicon of its chips refitted without it)."""
    by_v = S._by(recs, S.version_of)
    folds = ((by_v[v], lambda r, v=v: S.version_of(r) == v) for v in versions or sorted(by_v))
    return _leave_out(recs, predictor, starts, folds, infer_silicon)


def report(recs, predicted: dict) -> dict:
    """{metric class: {records, median_abs, median_signed, within_2x}} of the records predicted."""
    out = {}
    for r in recs:
        c = METRIC_CLASS.get(r.metric, r.metric)
        p = predicted.get(r.id)
        if p is not None:
            out.setdefault(c, []).append(p / r.value - 1.0)
    res = {}
    for c, e in out.items():
        e = np.asarray(e, dtype=float)
        ratio = e + 1.0
        ok = np.isfinite(ratio) & (ratio > 0)
        res[c] = {"records": len(e), "median_abs": float(np.median(np.abs(np.where(ok, e, np.inf)))),
                  "median_signed": float(np.median(np.where(ok, e, np.inf))),
                  "within_2x": int(np.sum(ok & (ratio <= 2.0) & (ratio >= 0.5)))}
    return res


__all__ = ["leave_one_group_out", "leave_one_family_out", "leave_one_source_out", "leave_one_version_out", "report"]
