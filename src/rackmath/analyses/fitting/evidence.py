"""Measured evidence beside a prediction: the shipped measurements nearest to a serving configuration.

A calibrated prediction carries its preset's error band, a median over every record of the chip's family. Some
configurations sit in corners where the model is known to be far off (the early-2025 DeepSeek stacks took 2.5–3.2×
longer to the first token than predicted, docs/validation.md), and a user asking about exactly that corner should
see it. So
``serve`` also names the shipped measurements nearest to what was asked, each with the value measured and the value
rackmath predicts for it **out of sample**, with that record's source left out of the fit (leave one source out).

The table, ``analyses/fitting/data/heldout.json``, is derived data (JSON, written by a script: it is read on every
``serve`` and parses in a millisecond): every fitted serving record's configuration, measured
value and two predictions, the in-sample one of the shipped presets and the held-out one, written with the presets
by ``benchmarks/refresh_presets.py`` from one ``rackmath validate --cv --json`` run (a test checks that the in-sample
column is what ``rackmath validate`` predicts today).
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path
from ...specs.models import load_model
from ...specs.records import hardware_family, model_family
from ...units import human

DATA = Path(__file__).parent / "data" / "heldout.json"

#: Weights of the distance between a configuration and a record (natural-log units; 1 = a factor e).
W_MODEL, W_CONCURRENCY, W_GPUS, W_LENGTHS, W_STACK = 1.0, 1.0, 1.0, 0.5, 0.5


@lru_cache(maxsize=1)
def table() -> tuple[dict, ...]:
    """The shipped held-out table: one dict per fitted serving record."""
    with open(DATA, encoding="utf-8") as fh:
        return tuple(json.load(fh)["heldout"])


def distance(row: dict, *, total_params, active_params, gpus, isl, osl, concurrency, framework=None) -> float:
    """d = w_M·(|ln(N/N_r)| + |ln(N_act/N_act,r)|) + w_C·|ln(C/C_r)| + w_n·|ln(n/n_r)|
    + w_L·(|ln(ISL/ISL_r)| + |ln(OSL/OSL_r)|) + w_s·[stack differs].

    A configuration's distance to a record of the same model and hardware family (the weights are
    :data:`W_MODEL`, :data:`W_CONCURRENCY`, :data:`W_GPUS`, :data:`W_LENGTHS`, :data:`W_STACK`): the model's size
    (total and active parameters: a dense 70B and a 400B MoE of one family are far apart), concurrency and GPUs
    decide the regime most, the request lengths less; a different serving stack (when one is asked for) adds a half.
    """
    d = (W_MODEL * (abs(math.log(float(total_params) / row["total_params"]))
                    + abs(math.log(float(active_params) / row["active_params"])))
         + W_CONCURRENCY * abs(math.log(float(concurrency) / row["concurrency"]))
         + W_GPUS * abs(math.log(float(gpus) / row["gpus"]))
         + W_LENGTHS * (abs(math.log(float(isl) / row["isl"])) + abs(math.log(float(osl) / row["osl"]))))
    if framework and framework != "generic" and row.get("framework") != framework:
        d += W_STACK
    return d


def nearest(model: str, chip: str, *, gpus, isl, osl, concurrency, framework=None, k: int = 2) -> dict:
    """The ``k`` shipped measurements nearest to a serving configuration, of its model family on its hardware family.

    Returns ``{"model_family", "hardware_family", "records": [...]}``; each record: id, title, source_group,
    metric, measured, predicted_out_of_sample (its source left out of the fit), ratio (= the two's quotient) and
    distance (:func:`distance`). An empty list says no shipped record measures this model family on this hardware
    family: the prediction there is a transfer, with the preset's band alone.
    """
    m = load_model(model)
    fm, fh = model_family(m.name), hardware_family(chip)
    rows = [r for r in table() if r["model_family"] == fm and r["hardware_family"] == fh]
    at = dict(total_params=m.total_params, active_params=m.active_params, gpus=gpus, isl=isl, osl=osl,
              concurrency=concurrency, framework=framework)
    ranked = sorted((distance(r, **at), r["id"], r) for r in rows)
    out = [{k2: r[k2] for k2 in ("id", "title", "source_group", "framework", "model", "metric", "measured",
                                 "predicted_out_of_sample")}
           | {"ratio": r["predicted_out_of_sample"] / r["measured"], "distance": d} for d, _, r in ranked[:k]]
    return {"model_family": fm, "hardware_family": fh, "records": out}


#: How a record's metric reads: label and SI unit.
METRIC_LABEL = {"output_tok_s_per_gpu": ("output tok/s per GPU", ""), "total_tok_s_per_gpu": ("total tok/s per GPU", ""),
                "tpot_s": ("TPOT", "s"), "ttft_s": ("TTFT", "s"), "e2e_s": ("end to end", "s"), "step_s": ("step", "s"),
                "tok_s_per_user": ("tok/s per user", "")}


def sentences(near: dict | None) -> list[str]:
    """One line per record of :func:`nearest` (what ``serve`` prints as "nearest measured"); a line saying there is
    none when no record measures the model family on the hardware family; nothing for a sweep (None)."""
    if near is None:
        return []
    if not near["records"]:
        return [f'none: no shipped record of {near["model_family"]} on {near["hardware_family"]} (rackmath validate); '
                "this prediction is a transfer"]
    out = []
    for x in near["records"]:
        what, u = METRIC_LABEL.get(x["metric"], (x["metric"], ""))
        out.append(f'{x["id"]}: {what} {human(x["measured"], u)} measured, {human(x["predicted_out_of_sample"], u)} '
                   f'predicted with its source left out by the fitted presets ({x["ratio"]:.2f}×) — {x["title"]}')
    return out


__all__ = ["DATA", "METRIC_LABEL", "table", "distance", "nearest", "sentences"]
