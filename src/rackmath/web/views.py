"""The web pages: one per lecture chapter plus serve, plan and validate (the table :data:`PAGES`).

A page is a list of :class:`~rackmath.web.inputs.Input` and a view function that takes
the checked values and returns ``{"header", "numbers", "charts", "derivations", "notes"}``.
Views hold no math: they call the library (engine and analyses) and arrange what comes
back into Plotly figures (plain dicts) and the same :class:`~rackmath.explain.Derivation`
objects ``--explain`` prints. The chapters' pages are in ``lecture_pages.py``, serve/plan/validate in
``serving_pages.py``; what they share: ``choices.py`` (catalog names, common inputs) and ``figures.py``
(numbers for people, charts, derivations).
"""

from __future__ import annotations

from dataclasses import dataclass

from .choices import efficiency_header, hardware, hardware_names, model, model_names
from .figures import axis, derivation, shown, summary
from .lecture_pages import (batch_inputs, batch_view, context_inputs, context_view, pipeline_inputs, pipeline_view,
                            pricing_inputs, pricing_view, racks_inputs, racks_view, revnet_inputs, revnet_view,
                            train_searched, training_inputs, training_view)
from .serving_pages import (plan_inputs, plan_view, serve_inputs, serve_view, validate_cached, validate_inputs,
                            validate_view)

# the names work.py and the tests read from here
__all__ = ["PAGES", "Page", "axis", "derivation", "efficiency_header", "hardware", "hardware_names", "model",
           "model_names", "serve_inputs", "shown", "summary", "train_searched", "training_inputs", "validate_cached"]


# --------------------------------------------------------------------------- the page table


@dataclass
class Page:
    id: str
    title: str
    chapter: str
    blurb: str
    inputs: object  # () -> list[Input]
    view: object  # (params) -> dict
    cli: str = ""


PAGES = {p.id: p for p in [
    Page("batch", "Batch size, latency and cost", "00:00", "time = max(compute, memory); cost per token falls with "
         "batch until compute binds.", batch_inputs, batch_view, "rackmath roofline --explain"),
    Page("racks", "Racks and mixture of experts", "00:32", "how many experts a batch touches, what a second rack "
         "costs the all-to-all, and the weight-load latency floor per system.", racks_inputs, racks_view,
         "rackmath racks moe-2racks / scaleup"),
    Page("pipeline", "Pipelining and memory", "00:47", "stages divide the weights, not the KV; training pays a "
         "bubble.", pipeline_inputs, pipeline_view, "rackmath racks pipeline / bubble"),
    Page("training", "Training economics", "01:18", "6·N·D at an MFU, and how serving traffic sets over-training.",
         training_inputs, training_view, "rackmath train / overtrain"),
    Page("pricing", "Prices read backwards and memory tiers", "01:33", "a long-context price step gives KV bytes "
         "per token; cache prices pick a memory tier.", pricing_inputs, pricing_view, "rackmath price / cache"),
    Page("context", "The context wall", "01:50", "past the crossover, cost per token grows with context.",
         context_inputs, context_view, "rackmath context"),
    Page("revnet", "Reversible networks", "02:04", "spend 4/3 the compute to store two activations instead of L.",
         revnet_inputs, revnet_view, "rackmath revnet"),
    Page("serve", "Serving a workload", "", "throughput per GPU vs tokens per user for a real deployment "
         "(calibrated).", serve_inputs, serve_view, "rackmath serve"),
    Page("plan", "Plan a deployment", "", "the GPU count and concurrency with the best throughput that meets a "
         "per-user speed.", plan_inputs, plan_view, "rackmath plan"),
    Page("validate", "Validation: predicted vs measured", "", "every public measurement, predicted; hover for the "
         "source.", validate_inputs, validate_view, "rackmath validate"),
]}
