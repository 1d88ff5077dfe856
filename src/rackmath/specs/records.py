"""Validation records: published (or your own) measurements as catalog data.

A record is one measured number of one configuration: ``[[record]]`` tables in TOML, shipped
in ``rackmath/specs/data/records/*.toml`` (published.md §1, each with its source) and
added by users with ``rackmath validate --records DIR`` (or any ``--catalog`` /
``RACKMATH_CATALOG`` directory). The schema (every field, its type and range) is
:data:`FIELDS`; docs/validation.md prints it. Three kinds:

* ``kind = "serve"`` (default): steady-state serving of fixed ISL/OSL at a concurrency
  (``rackmath serve``). Metrics: ``output_tok_s_per_gpu``, ``total_tok_s_per_gpu``,
  ``tpot_s``, ``ttft_s``, ``tok_s_per_user``, ``step_s``, ``e2e_s`` (TTFT + (OSL − 1)·TPOT).
* ``kind = "step"``: one forward decode step of ``batch`` sequences at ``context`` tokens
  (what ``rackmath measure`` writes). Metrics: ``step_s``, ``output_tok_s_per_gpu``
  (= batch / step / gpus).
* ``kind = "prefill"``: one prefill pass of ``batch`` prompts of ``isl`` tokens. Metrics:
  ``prefill_s``, ``prefill_tok_s_per_gpu``.

Every value is SI (seconds, tokens/s). Errors are one line naming the file, the record
and the field (:class:`rackmath.errors.CatalogError`); an unknown field offers the
closest known name.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from pathlib import Path

from ..bounds import MIN_MAGNITUDE
from ..errors import CatalogError, RackmathError
from .catalog import _dir_files, _read_toml, catalog_dirs, KINDS as CATALOG_KINDS
from .. import units
from ..engine.efficiency import Efficiency
from ..specs.hardware import load_hardware
from ..specs.models import load_model

KINDS = ("serve", "step", "prefill")
METRICS = {
    "serve": ("output_tok_s_per_gpu", "total_tok_s_per_gpu", "tpot_s", "ttft_s", "tok_s_per_user", "step_s", "e2e_s",
              "output_tok_s_per_decode_gpu", "ttft_median_s"),
    "step": ("step_s", "output_tok_s_per_gpu"),
    "prefill": ("prefill_s", "prefill_tok_s_per_gpu"),
}
UNITS = {"output_tok_s_per_gpu": "tok/s/GPU", "output_tok_s_per_decode_gpu": "tok/s/GPU",
         "total_tok_s_per_gpu": "tok/s/GPU", "tpot_s": "s", "ttft_s": "s", "ttft_median_s": "s",
         "tok_s_per_user": "tok/s", "step_s": "s", "e2e_s": "s", "prefill_s": "s", "prefill_tok_s_per_gpu": "tok/s/GPU"}
STATUSES = ("measured", "approximate", "derived")
#: How requests arrive (serve --arrivals, a record's arrivals; analyses.serving.inputs imports it): spread out evenly, in
#: lock-step waves, as a Poisson stream (independent arrivals), or from a closed-loop benchmark client (the first C
#: requests together, then C kept in flight: serving.closed_loop_ttft).
ARRIVALS = ("steady", "waves", "poisson", "closed-loop")
#: How a TP group holds a dense model's weights (Pope et al. 2022 §3.2): "1d" weight-stationary (each chip a slice,
#: the activations all-reduced: Megatron-LM's layout, every GPU stack's), "2d" weight-stationary (each chip a block
#: split over d_model and d_ff, the activations gathered and scattered along both: ``comms.ws2d_exchange_time``),
#: "gathered" (the chips split the batch and all-gather each layer's weights). ``engine.layout.evaluate`` takes them.
WEIGHT_LAYOUTS = ("1d", "2d", "gathered")
FRAMEWORKS = ("trtllm", "vllm", "vllm-v0", "sglang", "atom", "dynamo", "dynamo-sglang", "dynamo-trtllm", "jax", "torch",
              "other")
#: What each metric measures, for reports by metric: throughput (output tokens/s per GPU, over every GPU or per
#: decode GPU of a disaggregated deployment), TPOT, TTFT (the mean; ``ttft_median_s`` the median request's), or the
#: others.
METRIC_CLASS = {"output_tok_s_per_gpu": "output tok/s/GPU", "output_tok_s_per_decode_gpu": "output tok/s/GPU",
                "tpot_s": "TPOT", "ttft_s": "TTFT", "ttft_median_s": "TTFT median"}

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:+-]{0,79}$")


def _str(v, name):
    if not isinstance(v, str) or not v.strip():
        return "a non-empty string"
    return None


def _num(lo, hi, lo_open=False, integer=False):
    def check(v, name):
        what = "a whole number" if integer else "a number"
        rng = f"{'>' if lo_open else '≥'} {lo:g} and ≤ {hi:g}"
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return f"{what} {rng}"
        if integer and (isinstance(v, float) and not v.is_integer()):
            return f"{what} {rng}"
        if not math.isfinite(v) or v < lo or (lo_open and v == lo) or v > hi:
            return f"{what} {rng}"
        if v != 0 and abs(v) < MIN_MAGNITUDE:  # a denormal such as 1e-320 only ever divides to inf
            return f"{what} {rng}, non-zero values from {MIN_MAGNITUDE:g}"
        return None
    return check


def _enum(choices):
    def check(v, name):
        return None if v in choices else "one of " + ", ".join(choices)
    return check


def _bool(v, name):
    return None if isinstance(v, bool) else "true or false"


def _assumptions(v, name):
    if isinstance(v, str):
        return None
    if isinstance(v, list) and all(isinstance(s, str) for s in v):
        return None
    return "a string or a list of strings"


def _concurrency(v, name):
    if v == "max-load":
        return None
    bad = _num(1, 1e7)(v, name)
    return None if bad is None else 'a number of sequences in flight ≥ 1 and ≤ 1e7, or "max-load"'


def _dtype(v, name):
    if not isinstance(v, str):
        return "a dtype name such as bf16, fp8, int8, int4, mxfp4, nvfp4"
    try:
        units.normalize_dtype(v, name)
    except RackmathError as exc:
        return str(getattr(exc, "accepted", None) or "a known dtype")
    return None


def _efficiency(v, name):
    if isinstance(v, str) and v.strip():
        return None
    if isinstance(v, dict):
        known = [f for f in Efficiency.__dataclass_fields__ if f not in ("name", "description", "source", "aliases")]
        for k, x in v.items():
            if k not in known or isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
                return "a preset name, \"ideal\", or a table of numeric fields of " + ", ".join(known)
        return None
    return 'a preset name, "ideal", or a table such as { eta_compute = 0.4 }'


#: Every field a ``[[record]]`` may hold: (check, kinds it applies to (None = all), required for those kinds, doc).
FIELDS: dict = {
    # identity and provenance
    "id": (_str, None, True, "unique name of the record (letters, digits, - _ . : +)"),
    "title": (_str, None, True, "one line saying what was measured"),
    "kind": (_enum(KINDS), None, False, 'serve (default), step or prefill'),
    "metric": (_str, None, True, "what was measured (per kind, see METRICS)"),
    "value": (_num(0, 1e12, lo_open=True), None, True, "the measured value, SI units of the metric (s, tok/s)"),
    "status": (_enum(STATUSES), None, True, "measured, approximate (inputs or value uncertain, stated), derived (model-derived: never fitted)"),
    "source": (_str, None, True, "the publication by its public name (title, repo/file, date)"),
    "source_group": (_str, None, True, "one campaign/publication: the unit left out together in leave-one-source-out"),
    "date": (_str, None, False, "publication date, YYYY[-MM[-DD]]"),
    "url": (_str, None, False, "where to read it"),
    "assumptions": (_assumptions, None, False, "what the source does not state and how it was filled in"),
    "exclude": (_str, None, False, "a reason: the record is kept as data but neither predicted nor fitted"),
    "efficiency": (_efficiency, None, False, "a fixed efficiency the figure states (derived records): \"ideal\" or a table"),
    "framework": (_enum(FRAMEWORKS), None, False, "serving stack: " + ", ".join(FRAMEWORKS)),
    "stack_version": (_str, None, False, "the stack's version as the source states it (its container image): "
                                         "framework@stack_version is the stack the record measures "
                                         "(specs/data/launch/stacks.toml lists the versions serve knows)"),
    "fit": (_bool, None, False, "false: predicted and reported apart, not fitted by --refit/--cv (a campaign the "
                                "shipped presets were not fitted on: its errors are out of sample)"),
    "group": (_str, None, False, "the campaign's configuration group (InferenceMAX: model × chip × framework): the "
                                 "unit of validate --cv --scheme group"),
    # the configuration
    "model": (_str, None, True, "catalog model name (rackmath model list)"),
    "hardware": (_str, None, True, "catalog system or chip name (rackmath hardware list)"),
    "gpus": (_num(1, 1e6, integer=True), None, False, "every GPU of the deployment (required unless prefill_gpus + decode_gpus)"),
    "prefill_gpus": (_num(1, 1e6, integer=True), ("serve",), False, "disaggregated prefill pool"),
    "decode_gpus": (_num(1, 1e6, integer=True), ("serve",), False, "disaggregated decode pool"),
    "tp": (_num(1, 1e5, integer=True), None, False, "tensor-parallel degree (conventions.md)"),
    "prefill_tp": (_num(1, 1e5, integer=True), ("serve",), False, "disaggregated prefill pool's TP as launched "
                                                                   "(default: rackmath's fastest prefill layout)"),
    "prefill_ep": (_num(1, 1e5, integer=True), ("serve",), False, "disaggregated prefill pool's EP"),
    "prefill_attention_dp": (_bool, ("serve",), False, "disaggregated prefill pool's attention DP"),
    "ep": (_num(1, 1e5, integer=True), None, False, "expert-parallel degree"),
    "pp": (_num(1, 1e3, integer=True), ("serve",), False, "pipeline stages"),
    "attention_dp": (_bool, None, False, "attention data-parallel across the TP GPUs"),
    "attention_dp_size": (_num(1, 1e5, integer=True), ("serve",), False, "attention data-parallel over R groups of "
                                                                         "TP/R GPUs (SGLang --dp R; implies "
                                                                         "attention_dp)"),
    "redundant_experts": (_num(0, 1e5, integer=True), None, False, "extra expert replicas (EPLB)"),
    "weight_layout": (_enum(WEIGHT_LAYOUTS), ("step", "prefill"), False, "how the TP chips hold a dense model's "
                      "weights (Pope et al. 2022 §3.2): 1d weight-stationary (default), 2d weight-stationary, or "
                      "gathered (the chips split the batch and all-gather each layer's weights)"),
    "weight_gathered": (_bool, ("step", "prefill"), False, "true = weight_layout = \"gathered\" (the older spelling)"),
    "kv_shards": (_num(1, 1e5, integer=True), None, False, "ways the KV is split by sequence (Pope's batch-sharded MQA)"),
    "isl": (_num(1, 1e7), ("serve", "prefill"), True, "input (prompt) tokens per request"),
    "osl": (_num(1, 1e7), ("serve",), True, "output tokens per request"),
    "concurrency": (_concurrency, ("serve",), True, 'sequences in flight across the deployment, or "max-load"'),
    "max_batch": (_num(1, 1e6, integer=True), ("serve",), False, 'cap per replica of "max-load" (default 2,048)'),
    "batch": (_num(1, 1e8), ("step", "prefill"), False, "sequences in the pass (required for step)"),
    "context": (_num(0, 1e8), ("step",), True, "tokens already in each sequence's KV cache"),
    "cached_share": (_num(0, 0.999), ("serve", "prefill"), False, "share of prompt tokens that hit a prefix cache"),
    "weights_dtype": (_dtype, None, False, "weights dtype (default: the checkpoint's)"),
    "kv_dtype": (_dtype, None, False, "KV-cache dtype (default: the model's)"),
    "compute_dtype": (_dtype, None, False, "dtype the weight GEMMs multiply in, where the source's stack quantises the "
                                           "activations of a weight-only format (default: Chip.gemm_dtype)"),
    "mtp": (_num(0, 16, integer=True), ("serve",), False, "speculative tokens per step (MTP/EAGLE)"),
    "acceptance": (_num(1, 17), ("serve",), False, "mean tokens emitted per verification step (1 … mtp + 1)"),
    "max_num_tokens": (_num(1, 1e7, integer=True), ("serve",), False, "the stack's token budget per step, where the "
                                                                         "source's launch sets it"),
    "arrivals": (_enum(ARRIVALS), ("serve",), False, "steady (default: requests spread out evenly), waves (lock-step: "
                                                      "a closed-loop client at fixed lengths, a fixed-length burst, C = "
                                                      "1), poisson (independent arrivals) or closed-loop (a "
                                                      "benchmark client: the first C requests start together, then C "
                                                      "stay in flight; TTFT is the mean over its 10 × C requests)"),
    "eager": (_bool, ("serve",), False, "the stack ran without CUDA graphs (every decode step dispatched from the "
                                        "host)"),
    "recv_interval": (_num(1, 1e4, integer=True), ("serve",), False, "decode steps between the scheduler's receives "
                                                                      "of new requests, where the source's launch "
                                                                      "sets it (SGLang --scheduler-recv-interval)"),
}

#: Fields that describe the configuration (what a prediction needs), in order.
INPUTS = ("model", "hardware", "gpus", "prefill_gpus", "decode_gpus", "prefill_tp", "prefill_ep",
          "prefill_attention_dp", "tp", "ep", "pp", "attention_dp",
          "attention_dp_size", "redundant_experts", "weight_layout", "weight_gathered", "kv_shards", "isl", "osl",
          "concurrency", "max_batch", "batch", "context", "cached_share", "weights_dtype", "kv_dtype", "compute_dtype",
          "mtp", "acceptance", "max_num_tokens", "arrivals", "eager", "recv_interval", "framework")


#: Hardware family of each chip: the unit of leave-one-hardware-family-out and of per-family presets.
HARDWARE_FAMILIES = {
    "h100": "hopper", "h200": "hopper", "h800": "hopper", "h20": "hopper", "gh200": "hopper",
    "b200": "blackwell", "gb200": "blackwell", "b300": "blackwell", "gb300": "blackwell",
    "rubin": "rubin", "rubin-ultra": "rubin",
    "mi300x": "amd", "mi325x": "amd", "mi355x": "amd",
    "a100-sxm-40gb": "ampere", "a100-sxm-80gb": "ampere",
}

_MODEL_FAMILIES = (("deepseek", "deepseek"), ("qwen", "qwen"), ("llama", "llama"), ("gpt-oss", "gpt-oss"),
                   ("kimi", "kimi"), ("palm", "palm"), ("mixtral", "mixtral"), ("gemma", "gemma"))


def hardware_family(chip: str) -> str:
    """'hopper', 'blackwell', 'amd', 'tpu', … from a chip name (unknown chips are their own family)."""
    c = str(chip).lower()
    if c.startswith("tpu"):
        return "tpu"
    return HARDWARE_FAMILIES.get(c, c)


def model_family(model: str) -> str:
    """'deepseek', 'qwen', 'llama', 'gpt-oss', 'kimi', … from a model name (else the name itself)."""
    m = str(model).lower()
    for prefix, fam in _MODEL_FAMILIES:
        if m.startswith(prefix):
            return fam
    return m


@dataclass(frozen=True)
class Record:
    """One validation record (see the module docstring and :data:`FIELDS`)."""

    id: str
    title: str
    kind: str
    metric: str
    value: float
    status: str
    source: str
    source_group: str
    inputs: dict
    assumptions: tuple = ()
    framework: str | None = None
    date: str | None = None
    url: str | None = None
    exclude: str | None = None
    efficiency: object = None
    path: str = ""
    chip: str = ""  # resolved catalog chip name ("" for excluded records)
    stack_version: str | None = None
    fit: bool = True
    group: str | None = None

    @property
    def stack(self) -> str:
        """The stack and version measured: ``framework@stack_version``, the framework alone if no version is stated,
        ``unstated`` without a framework (the unit of ``validate --cv --scheme stack``)."""
        if not self.framework:
            return "unstated"
        return f"{self.framework}@{self.stack_version}" if self.stack_version else self.framework

    @property
    def metric_class(self) -> str:
        """``output tok/s/GPU``, ``TPOT``, ``TTFT`` or the metric's own name (reports by metric)."""
        return METRIC_CLASS.get(self.metric, self.metric)

    @property
    def unit(self) -> str:
        return UNITS[self.metric]

    @property
    def measured(self) -> float:
        return self.value

    @property
    def hardware_family(self) -> str:
        return hardware_family(self.chip or self.inputs.get("hardware", ""))

    @property
    def family(self) -> str:  # the calibration family (= hardware family)
        return self.hardware_family

    @property
    def model_family(self) -> str:
        return model_family(self.inputs.get("model", ""))

    @property
    def fitted(self) -> bool:
        """Whether the record takes part in fitting and in the headline errors."""
        return self.exclude is None and self.status != "derived" and self.fit

    def as_dict(self) -> dict:
        d = {"id": self.id, "title": self.title, "kind": self.kind, "metric": self.metric, "measured": self.value,
             "unit": self.unit, "status": self.status, "source": self.source, "source_group": self.source_group,
             "framework": self.framework, "stack": self.stack, "metric_class": self.metric_class,
             "hardware_family": self.hardware_family,
             "model_family": self.model_family, "inputs": dict(self.inputs), "assumptions": list(self.assumptions)}
        for k in ("date", "url", "exclude", "stack_version", "group"):
            if getattr(self, k) is not None:
                d[k] = getattr(self, k)
        if not self.fit:
            d["fit"] = False
        if self.path:
            d["file"] = self.path
        return d

    def to_toml(self) -> str:
        """The record as one ``[[record]]`` table (round-trips through :func:`parse_records`)."""
        d = {"id": self.id, "title": self.title, "kind": self.kind, "metric": self.metric, "value": self.value,
             "status": self.status, "source": self.source, "source_group": self.source_group}
        for k in ("date", "url", "framework", "stack_version", "group", "exclude", "efficiency"):
            if getattr(self, k) is not None:
                d[k] = getattr(self, k)
        if not self.fit:
            d["fit"] = False
        d.update({k: v for k, v in self.inputs.items() if k != "framework"})
        if self.assumptions:
            d["assumptions"] = list(self.assumptions)
        return "[[record]]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in d.items())


def toml_value(v) -> str:
    """A TOML literal for a str, bool, number, list or flat table."""
    import json

    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def _where(path, i, rid) -> str:
    return f"record[{i}]" + (f" {rid!r}" if isinstance(rid, str) else "")


def _check_fields(t: dict, kind, rid, fail) -> None:
    """Each field of a raw record on its own: known, applies to the record's kind, required ones present, values
    accepted by the field's check; the id's characters; the metric one of the kind's."""
    for k in t:
        if k not in FIELDS:
            close = difflib.get_close_matches(k, FIELDS, n=1, cutoff=0.5)
            fail(k, "unknown field" + (f"; did you mean {close[0]!r}?" if close else "")
                 + " (accepted: " + ", ".join(FIELDS) + ")")
    if kind not in KINDS:
        fail("kind", f"{kind!r} (accepted: {', '.join(KINDS)})")
    for name, (check, kinds, required, doc) in FIELDS.items():
        applies = kinds is None or kind in kinds
        if name not in t:
            if required and applies:
                fail(name, f"missing (accepted: {doc})")
            continue
        if not applies:
            fail(name, f"not used by kind = {kind!r} (it applies to kind {' or '.join(kinds)})")
        bad = check(t[name], name)
        if bad:
            fail(name, f"{t[name]!r} (accepted: {bad})")
    if not _ID.match(rid):
        fail("id", f"{rid!r} (accepted: letters, digits and - _ . : +, up to 80 characters)")
    if t["metric"] not in METRICS[kind]:
        fail("metric", f"{t['metric']!r} is not a metric of kind = {kind!r} (accepted: {', '.join(METRICS[kind])})")


def _check_cross_fields(t: dict, kind, fail) -> tuple[str, str]:
    """The rules between a record's fields (GPU pools, prefill layout, stack version, MTP acceptance, max-load,
    weight layout); returns the weight layout and the field that set it."""
    pg, dg = t.get("prefill_gpus"), t.get("decode_gpus")
    if (pg is None) != (dg is None):
        fail("prefill_gpus" if pg is None else "decode_gpus", "missing (prefill_gpus and decode_gpus go together)")
    if "gpus" not in t and pg is None:
        fail("gpus", "missing (accepted: a whole number of GPUs ≥ 1, or prefill_gpus + decode_gpus)")
    if pg is not None and "gpus" in t and t["gpus"] != pg + dg:
        fail("gpus", f"{t['gpus']} ≠ prefill_gpus {pg} + decode_gpus {dg}")
    if t.get("metric") == "output_tok_s_per_decode_gpu" and pg is None:
        fail("metric", "output_tok_s_per_decode_gpu is a disaggregated deployment's (accepted: with prefill_gpus + "
                       "decode_gpus; else output_tok_s_per_gpu)")
    if pg is None and any(k in t for k in ("prefill_tp", "prefill_ep", "prefill_attention_dp")):
        fail("prefill_tp", "a prefill layout without prefill_gpus + decode_gpus")
    if "stack_version" in t and "framework" not in t:
        fail("stack_version", "without framework (accepted: framework = STACK with it)")
    if kind == "step" and "batch" not in t:
        fail("batch", "missing (accepted: the sequences in the step, ≥ 1)")
    mtp = t.get("mtp", 0)
    if "acceptance" in t and not 1 <= t["acceptance"] <= mtp + 1:
        fail("acceptance", f"{t['acceptance']!r} (accepted: 1 … mtp + 1 = {mtp + 1})")
    if "max_batch" in t and t.get("concurrency") != "max-load":
        fail("max_batch", 'only with concurrency = "max-load"')
    if t["status"] == "derived" and "exclude" in t:
        fail("exclude", "a derived record is never fitted already: drop exclude")
    layout, layout_field = t.get("weight_layout", "1d"), "weight_layout"
    if t.get("weight_gathered"):
        if "weight_layout" in t and layout != "gathered":
            fail("weight_gathered", f"true contradicts weight_layout = {layout!r} (accepted: one of the two)")
        layout, layout_field = "gathered", "weight_gathered"
    if layout == "2d" and (t.get("attention_dp") or "attention_dp_size" in t):
        fail("weight_layout", "2d with attention DP (accepted: 2d without attention_dp, or 1d)")
    return layout, layout_field


def _check_catalog_names(t: dict, layout, layout_field, fail) -> str:
    """The record's model and hardware are catalog names (a mixture of experts takes the 1D layout only); returns
    the chip's name."""
    try:
        model = load_model(t["model"])
    except RackmathError as exc:
        fail("model", str(getattr(exc, "problem", exc)) + " (rackmath model list)")
    if layout != "1d" and getattr(model, "n_experts", 0):
        fail(layout_field, f"{t['model']} is a mixture of experts (accepted: 1d; its experts are sharded "
                           "over EP, not gathered or split 2D)")
    try:
        return load_hardware(t["hardware"]).chip.name
    except RackmathError as exc:
        fail("hardware", str(getattr(exc, "problem", exc)) + " (rackmath hardware list)")


def parse_record(t: dict, path="<records>", i: int = 0, check_names: bool = True) -> Record:
    """Validate one raw ``[[record]]`` table field by field; one-line :class:`CatalogError` on the first problem."""
    if not isinstance(t, dict):
        raise CatalogError(str(path), f"record[{i}]", "expected a table ([[record]])")
    rid = t.get("id")
    where = _where(path, i, rid)

    def fail(fname, problem):
        raise CatalogError(str(path), f"{where}.{fname}", problem)

    kind = t.get("kind", "serve")
    _check_fields(t, kind, rid, fail)
    layout, layout_field = _check_cross_fields(t, kind, fail)
    chip = _check_catalog_names(t, layout, layout_field, fail) if check_names and "exclude" not in t else ""
    a = t.get("assumptions", ())
    inputs = {k: t[k] for k in INPUTS if k in t and k != "weight_gathered"}
    if layout != "1d":
        inputs["weight_layout"] = layout
    for k in ("gpus", "prefill_gpus", "decode_gpus", "prefill_tp", "prefill_ep", "tp", "ep", "pp", "redundant_experts",
              "kv_shards", "mtp",
              "max_batch", "max_num_tokens"):
        if k in inputs:
            inputs[k] = int(inputs[k])
    return Record(id=rid, title=t["title"], kind=kind, metric=t["metric"], value=float(t["value"]),
                  status=t["status"], source=t["source"], source_group=t["source_group"], inputs=inputs,
                  assumptions=(a,) if isinstance(a, str) else tuple(a), framework=t.get("framework"),
                  date=t.get("date"), url=t.get("url"), exclude=t.get("exclude"), efficiency=t.get("efficiency"),
                  path=str(path), chip=chip, stack_version=t.get("stack_version"), fit=t.get("fit", True),
                  group=t.get("group"))


MAX_RECORDS = 100_000  # per load: more is a mistake (or hostile), not a validation set
MAX_FILE_BYTES = 64 * 2**20


def parse_records(doc: dict, path="<records>", check_names: bool = True) -> list[Record]:
    """Every ``[[record]]`` of one parsed TOML document; ids must be unique within it.

    Tables of other catalog kinds (``[[efficiency]]``, ``[[model]]`` …) are skipped: they belong
    to ``--catalog``; any other table name is an error.
    """
    unknown = [k for k in doc if k not in CATALOG_KINDS and not k.startswith("_") and k != "meta"]
    if unknown:
        close = difflib.get_close_matches(unknown[0], ["record"], n=1, cutoff=0.5)
        raise CatalogError(str(path), unknown[0], "unknown table in a records file"
                           + ("; did you mean [[record]]?" if close else "") + " (accepted: [[record]])")
    tables = doc.get("record", [])
    if isinstance(tables, dict):
        tables = [tables]
    if not isinstance(tables, list):
        raise CatalogError(str(path), "record", "expected tables ([[record]])")
    if len(tables) > MAX_RECORDS:
        raise CatalogError(str(path), "record", f"{len(tables):,} records (accepted: at most {MAX_RECORDS:,})")
    out, seen = [], {}
    for i, t in enumerate(tables):
        r = parse_record(t, path, i, check_names)
        if r.id in seen:
            raise CatalogError(str(path), f"{_where(path, i, r.id)}.id",
                               f"duplicate id (also record[{seen[r.id]}] of this file)")
        seen[r.id] = i
        out.append(r)
    return out


def read_records_file(path, check_names: bool = True) -> list[Record]:
    p = Path(path)
    try:
        size = p.stat().st_size
    except OSError as exc:
        raise CatalogError(str(p), "file", f"cannot read: {exc.strerror}") from None
    if size > MAX_FILE_BYTES:
        raise CatalogError(str(p), "file", f"{size / 2**20:.0f} MiB (accepted: at most {MAX_FILE_BYTES // 2**20} MiB)")
    return parse_records(_read_toml(p), path, check_names)


def records_dir_files(d) -> list[Path]:
    """The ``*.toml`` files of a records directory (or the file itself)."""
    p = Path(d).expanduser()
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise CatalogError(str(p), "records", "no such file or directory (accepted: a directory of .toml files "
                                              "holding [[record]] tables, or one such file)")
    files = sorted(p.rglob("*.toml"))
    if not files:
        raise CatalogError(str(p), "records", "no .toml files in this directory")
    return files


SHIPPED_DIR = Path(__file__).parent / "data" / "records"


def shipped_records() -> list[Record]:
    """The records shipped with rackmath (published.md §1), in file order."""
    return _cached_shipped()


from functools import lru_cache  # noqa: E402

from .catalog import register_cache  # noqa: E402


@register_cache
@lru_cache(maxsize=1)
def _cached_shipped() -> tuple:
    out = []
    for f in sorted(SHIPPED_DIR.glob("*.toml")):
        out += read_records_file(f)
    _check_unique(out)
    return tuple(out)


def _check_unique(recs):
    seen = {}
    for r in recs:
        if r.id in seen:
            raise CatalogError(r.path, f"record {r.id!r}.id", f"duplicate id (also in {seen[r.id]})")
        seen[r.id] = r.path


def load_records(dirs=(), only: bool = False) -> list[Record]:
    """The records to validate: shipped ones (unless ``only``), then every ``dirs`` file's.

    A user record with the id of a shipped one replaces it (in place); user files must not
    repeat an id among themselves. Records in ``--catalog`` / ``RACKMATH_CATALOG``
    directories' ``[[record]]`` tables are read too.
    """
    base = [] if only else list(shipped_records())
    user = []

    read = set()  # a file reached both through --catalog and --records is read once (rackmath measure --save DIR)
    for d in catalog_dirs()[1:]:  # --catalog / RACKMATH_CATALOG directories
        for path, doc in _dir_files(d):
            if "record" in doc:
                user += parse_records({"record": doc["record"]}, path)
                read.add(Path(path).resolve())
    for d in dirs:
        for f in records_dir_files(d):
            if Path(f).resolve() not in read:
                read.add(Path(f).resolve())
                user += read_records_file(f)
    _check_unique(user)
    if len(user) > MAX_RECORDS:
        raise CatalogError(", ".join(str(d) for d in dirs), "records",
                           f"{len(user):,} records (accepted: at most {MAX_RECORDS:,})")
    if only and not user:
        raise CatalogError(", ".join(str(d) for d in dirs) or "--records", "records",
                           "no records to validate (--only-records needs --records DIR with [[record]] tables)")
    pos = {r.id: i for i, r in enumerate(base)}
    for r in user:
        if r.id in pos:
            base[pos[r.id]] = r
        else:
            pos[r.id] = len(base)
            base.append(r)
    return base


__all__ = ["Record", "FIELDS", "KINDS", "METRICS", "METRIC_CLASS", "UNITS", "STATUSES", "FRAMEWORKS", "parse_record",
           "parse_records", "read_records_file", "shipped_records", "load_records", "hardware_family",
           "model_family", "toml_value"]
