"""Predictions of validation records at candidate parameter vectors, memoised (:class:`PredictionCache`), and the
driving of fits written as request generators (:func:`drive`, :func:`together`): what lets every fold of a
cross-validation reach the engine in one call per record (``calibration.fit``, ``crossval.cross_validate``).
"""

from __future__ import annotations

import numpy as np

from .validation import evaluation_key, predict_many, predict_many_records


def default_predictor(rec, X, names):
    """Predictions of ``rec`` at the K rows of ``X`` (columns ``names``): :func:`validation.predict_many`."""
    return predict_many(rec, X, tuple(names), name="fit")


def _shared_key(rec):
    return evaluation_key(rec)


def _many(recs, X, names):
    return predict_many_records(recs, X, tuple(names), name="fit")


#: A predictor may say which records one engine evaluation serves (``shared_key(rec)``: equal keys, not None) and
#: predict them together (``many(recs, X, names) -> (len(recs), K)``): the metrics of one serving run.
default_predictor.shared_key = _shared_key
default_predictor.many = _many


class PredictionCache:
    """Predictions of records at candidate parameter vectors, evaluated in batches and memoised.

    ``answer([(record, X), …])`` returns, per request, the record's predictions at the rows of ``X`` (columns =
    ``names``); ``table(recs, X)`` the (len(recs), K) table of each record at each row. All the rows a call asks of
    one record that are not memoised yet — from every request, so from every fit driven in lockstep
    (:func:`drive`) — are evaluated together in one ``predictor(record, X_missing, names)`` call. Grid values are
    rounded, so refits on overlapping record sets (cross-validation folds) meet the same candidates and reuse them;
    the cache changes how often the model is evaluated, never a value (a prediction depends on its own row only:
    tested). Memory: a row is stored once (its bytes, interned to an int); a prediction is one dict entry per
    (record, row).
    """

    def __init__(self, names, predictor=None):
        self.names = tuple(names)
        self.predictor = predictor or default_predictor
        self._rows = {}  # a row's bytes (-0.0 as 0.0) -> its int id
        self._memo = {}  # record id -> {row id: prediction}
        self._groups = {}  # record id -> the evaluation it shares (the predictor's shared_key) or its own
        self.evaluated = 0

    def _ids(self, X: np.ndarray) -> list:
        rows, ids = self._rows, []
        for b in _row_bytes(X):
            i = rows.get(b)
            if i is None:
                i = rows[b] = len(rows)
            ids.append(i)
        return ids

    def _group(self, rec):
        key = self._groups.get(rec.id)
        if key is None:
            shared = getattr(self.predictor, "shared_key", None)
            k = shared(rec) if shared is not None else None
            key = self._groups[rec.id] = ("run", k) if k is not None else ("record", rec.id)
        return key

    def answer(self, requests) -> list:
        """``[(record, X (K, P)), …]`` → ``[(K,) predictions, …]``: one predictor call per record (per run, where the
        predictor shares evaluations: ``shared_key``) for the rows not memoised yet."""
        groups = {}  # group -> ({record id: record}, [(request, record id, row ids)], {row id: row to evaluate})
        memo = self._memo
        out = [None] * len(requests)
        for q, (rec, X) in enumerate(requests):
            X = np.atleast_2d(np.asarray(X, dtype=float))
            ids = self._ids(X)
            gk = self._group(rec)
            g = groups.get(gk)
            if g is None:
                g = groups[gk] = ({}, [], {})
            g[0][rec.id] = rec
            g[1].append((q, rec.id, ids))
            seen, need = memo.get(rec.id, ()), g[2]
            for k, i in enumerate(ids):
                if i not in seen and i not in need:
                    need[i] = X[k]
        for recs, items, need in groups.values():
            if need:
                rs, Xn = list(recs.values()), np.array(list(need.values()))
                if len(rs) == 1:
                    vals = np.asarray(self.predictor(rs[0], Xn, self.names), dtype=float).reshape(1, -1)
                else:
                    vals = np.asarray(self.predictor.many(rs, Xn, self.names), dtype=float).reshape(len(rs), -1)
                self.evaluated += vals.size
                for r, v in zip(rs, vals):
                    memo.setdefault(r.id, {}).update(zip(need, v.tolist()))
            for q, rid, ids in items:
                m = memo[rid]
                out[q] = np.array([m[i] for i in ids])
        return out

    def table(self, recs, X) -> np.ndarray:
        X = np.atleast_2d(np.asarray(X, dtype=float))
        return np.array(self.answer([(r, X) for r in recs])).reshape(len(recs), len(X))


def _row_bytes(X: np.ndarray) -> list:
    """Each row of X as bytes (the cache's key; -0.0 written as 0.0 so that equal rows meet)."""
    Z = np.ascontiguousarray(X + 0.0)
    n = Z.shape[1] * Z.itemsize
    b = Z.tobytes()
    return [b[k:k + n] for k in range(0, len(b), n)]


# --------------------------------------------------------------------------------------
# Driving fits: each fit is a generator of prediction requests, many fits answered at once
# --------------------------------------------------------------------------------------
#
# A fit (and the prediction of held-out records) is written as a generator: it yields the predictions it needs —
# a list of (record, X) — and receives them. :func:`together` runs several such generators in lockstep (their
# requests merged into one list at every step) and :func:`drive` answers the requests from a PredictionCache, so
# the candidate vectors of every fold (and of both descents of each) reach the engine in one call per record.
# Each generator sees exactly the predictions it would see alone: the result does not depend on what runs with it.


def drive(gen, cache: PredictionCache):
    """Run a request generator to its end, answering each request from ``cache``; returns its value."""
    try:
        req = next(gen)
        while True:
            req = gen.send(cache.answer(req))
    except StopIteration as stop:
        return stop.value


def together(gens, done=None):
    """A request generator running ``gens`` in lockstep; returns their values in order (``done(k, value)`` is
    called as generator k finishes)."""
    gens = list(gens)
    results, reqs = [None] * len(gens), {}

    def step(k, send):
        try:
            reqs[k] = gens[k].send(send) if send is not None else next(gens[k])
        except StopIteration as stop:
            results[k] = stop.value
            reqs.pop(k, None)
            if done:
                done(k, stop.value)

    for k in range(len(gens)):
        step(k, None)
    while reqs:
        order = list(reqs)
        resp = yield [q for k in order for q in reqs[k]]
        pos = 0
        for k in order:
            n = len(reqs[k])
            step(k, resp[pos:pos + n])
            pos += n
    return results


# --------------------------------------------------------------------------------------
