"""Predicted vs measured: the public serving records of ``reference/published.md`` §1.

Each :class:`Record` holds what was published (the inputs as reported, the measured
value and its source) and says how rackmath predicts it: a steady-state serving run
(:func:`rackmath.analyses.serving.serve`), a single decode step or a single prefill
pass (Pope et al. measured those separately). :func:`validate` evaluates every record
and summarises the signed errors ``predicted / measured − 1``.

Assumptions that the sources do not state are written on the record (``assumptions``)
and are the same rule for every row of a table, never tuned per row:

* TensorRT-LLM perf-overview and MLPerf Offline rows are "max load": concurrency is
  the largest number of sequences whose KV (at the mean context ISL + OSL/2) fits in
  90% of HBM after the weights, capped at TensorRT-LLM's default max batch size of
  2,048 per replica (:func:`max_load_concurrency`).
* Quantised checkpoints (FP8, FP4) keep their KV cache in FP8 (TensorRT-LLM's
  ModelOpt recipes quantise the KV cache with the weights); "FP4" is NVFP4 (4.5 bits).

Records marked ``kind = "derived"`` (the scaling book's worked examples) are
model-derived figures, not measurements: they are shown, excluded from fitting and
from the headline summary, and reported in a separate summary.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from functools import lru_cache

import numpy as np

from ..specs.catalog import register_cache

PUBLISHED = "reference/published.md"


@dataclass(frozen=True)
class Record:
    id: str
    title: str
    metric: str  # what is compared: a serve() field, "decode_step_ms", "prefill_s", "prefill_tok_s_per_gpu"
    measured: float
    unit: str
    how: str  # "serve" | "decode_step" | "prefill"
    inputs: dict
    source: str
    family: str  # calibration family: "hopper", "blackwell", "tpu-v4", "tpu-v5e"
    regime: str  # "serving", "decode", "prefill"
    kind: str = "measured"  # or "derived" (model-derived figure, not a measurement)
    assumptions: tuple = ()
    efficiency: object = None  # fixed efficiency for derived records (their stated assumption)

    def as_dict(self) -> dict:
        return {"id": self.id, "title": self.title, "metric": self.metric, "measured": self.measured,
                "unit": self.unit, "how": self.how, "inputs": dict(self.inputs), "source": self.source,
                "family": self.family, "regime": self.regime, "kind": self.kind,
                "assumptions": list(self.assumptions)}


# --------------------------------------------------------------------------------------
# The records
# --------------------------------------------------------------------------------------

_TRT_SRC = ("published.md §1e [V]: NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md (commit 00f3768), "
            "'Total Output Throughput (tokens/sec)', trtllm-bench max load, synthetic fixed ISL/OSL; ÷ GPUs")
_TRT_ASSUME = ("concurrency: max load = largest C whose KV at ISL + OSL/2 fits 90% of HBM, capped at 2,048 per "
               "replica (TensorRT-LLM default max_batch_size)",
               "KV cache in FP8 (quantised checkpoint); FP4 = NVFP4")

_HW = {"B200": ("hgx-b200", "blackwell"), "GB200": ("gb200-nvl72", "blackwell"), "H200": ("hgx-h200", "hopper"),
       "H100": ("hgx-h100", "hopper")}

# (id, model, isl, osl, {hardware: (total tok/s, tp, dtype)})
_TRT_ROWS = [
    ("T1", "llama-3.3-70b", 128, 128, {"B200": (11147, 1, "nvfp4"), "GB200": (12189, 1, "nvfp4"),
                                        "H200": (3803, 1, "fp8"), "H100": (6378, 2, "fp8")}),
    ("T2", "llama-3.3-70b", 1000, 1000, {"B200": (7007, 1, "nvfp4"), "GB200": (7326, 1, "nvfp4"),
                                          "H200": (2909, 1, "fp8"), "H100": (4205, 2, "fp8")}),
    ("T3", "llama-3.3-70b", 2048, 2048, {"B200": (4783, 1, "nvfp4"), "GB200": (5646, 1, "nvfp4"),
                                          "H200": (2003, 1, "fp8"), "H100": (3082, 2, "fp8")}),
    ("T4", "llama-3.3-70b", 20000, 2000, {"B200": (665, 1, "nvfp4"), "GB200": (755, 1, "nvfp4"),
                                           "H200": (283, 1, "fp8"), "H100": (437, 2, "fp8")}),
    ("T5", "llama-3.1-405b", 128, 2048, {"B200": (8020, 4, "nvfp4"), "GB200": (8151, 4, "nvfp4"),
                                          "H200": (5348, 8, "fp8"), "H100": (4340, 8, "fp8")}),
    ("T6", "llama-3.1-405b", 1000, 1000, {"B200": (5209, 4, "nvfp4"), "GB200": (5389, 4, "nvfp4"),
                                           "H200": (3330, 8, "fp8"), "H100": (2919, 8, "fp8")}),
    ("T7", "llama-3.1-405b", 2048, 128, {"B200": (749, 4, "nvfp4"), "GB200": (797, 4, "nvfp4"),
                                          "H200": (456, 8, "fp8"), "H100": (453, 8, "fp8")}),
    ("T8", "llama-3.1-8b", 128, 128, {"H200": (27911, 1, "fp8"), "H100": (28312, 1, "fp8")}),
    ("T9", "llama-3.1-8b", 1000, 1000, {"H200": (17744, 1, "fp8"), "H100": (15220, 1, "fp8")}),
    ("T10", "qwen3-235b-a22b", 1000, 1000, {"B200": (42391, 8, "nvfp4"), "H200": (23789, 8, "fp8"),
                                             "H100": (14898, 8, "fp8")}),
    ("T11", "llama-4-maverick", 1000, 1000, {"B200": (79617, 8, "nvfp4"), "H200": (31782, 8, "fp8"),
                                              "H100": (9677, 8, "fp8")}),
]


def _trt_records() -> list[Record]:
    out = []
    for rid, model, isl, osl, cols in _TRT_ROWS:
        for hwname, (total, tp, dt) in cols.items():
            system, fam = _HW[hwname]
            out.append(Record(
                id=f"{rid}-{hwname}", title=f"{model} {isl}/{osl} on {hwname} TP{tp} {dt.upper()}",
                metric="output_tok_s_per_gpu", measured=total / tp, unit="tok/s/GPU", how="serve",
                inputs=dict(model=model, hardware=system, gpus=tp, tp=tp, isl=isl, osl=osl, weights_dtype=dt,
                            kv_dtype="fp8", concurrency="max-load"),
                source=_TRT_SRC + f"; {hwname} column {total:,} tok/s total over {tp} GPU(s)",
                family=fam, regime="serving", assumptions=_TRT_ASSUME))
    return out


_MLPERF_ISL = 300  # [M] see the assumption below

_MLPERF = [
    Record(id="M1", title="MLPerf v4.1 Llama 2 70B Offline, 8× H100 (TRT-LLM, FP8)", metric="output_tok_s_per_gpu",
           measured=24524.9 / 8, unit="tok/s/GPU", how="serve",
           inputs=dict(model="llama-2-70b", hardware="hgx-h100", gpus=8, isl=_MLPERF_ISL, osl=290,
                       weights_dtype="fp8", kv_dtype="fp8", concurrency="max-load"),
           source="published.md M1 [V]: mlcommons/inference_results_v4.1 closed/NVIDIA DGX-H100 llama2-70b-99.9 "
                  "Offline, 24,524.9 tok/s (3,066/GPU), ~290 output tokens/sample [D]",
           family="hopper", regime="serving",
           assumptions=("ISL ≈ 300 tokens: mean prompt of the MLPerf OpenOrca subset, [M] from memory, not in "
                        "../shared", "OSL 290 = tokens/s ÷ samples/s (published.md M1 [D])",
                        "concurrency: max load rule (as the TensorRT-LLM rows)", "layout: chosen by rackmath",
                        "KV in FP8")),
    Record(id="M2-tpot", title="MLPerf v4.1 Llama 2 70B Server, 8× H100: mean TPOT at ~3,350 in flight",
           metric="tpot_ms", measured=155.0, unit="ms", how="serve",
           inputs=dict(model="llama-2-70b", hardware="hgx-h100", gpus=8, isl=_MLPERF_ISL, osl=290,
                       weights_dtype="fp8", kv_dtype="fp8", concurrency=3350),
           source="published.md M2 [V]: 21,605.8 tok/s, mean TTFT 276 ms, mean TPOT 155 ms; Little's law → ~3,350 "
                  "sequences in flight [D]",
           family="hopper", regime="serving",
           assumptions=("concurrency 3,350 from Little's law on the published throughput and latencies (M2 [D])",
                        "ISL ≈ 300 [M] as M1", "layout: chosen by rackmath", "KV in FP8")),
    Record(id="M2-ttft", title="MLPerf v4.1 Llama 2 70B Server, 8× H100: mean TTFT at ~3,350 in flight",
           metric="ttft_ms", measured=276.0, unit="ms", how="serve",
           inputs=dict(model="llama-2-70b", hardware="hgx-h100", gpus=8, isl=_MLPERF_ISL, osl=290,
                       weights_dtype="fp8", kv_dtype="fp8", concurrency=3350),
           source="published.md M2 [V]: mean TTFT 276 ms",
           family="hopper", regime="serving",
           assumptions=("as M2-tpot; TTFT = prefill chunks + one step, no Poisson queueing modelled",)),
]

_DS_SRC = ("published.md §1b [V]: deepseek-ai/open-infra-index 202502OpenSourceWeek/day_6_one_more_thing_"
           "deepseekV3R1_inference_system_overview.md (commit 56d8685)")

_DEEPSEEK = [
    Record(id="D-decode", title="DeepSeek-V3/R1 decode unit, 144 H800 (EP144, DP144): TPOT at ~88 seqs/GPU",
           metric="decode_step_ms", measured=1000.0 / 21.0, unit="ms", how="decode_step",
           inputs=dict(model="deepseek-v3", hardware="hgx-h800", chips=144, tp=144, ep=144, attention_dp=True,
                       redundant_experts=32, batch=88 * 144, context=4989, weights_dtype="fp8", kv_dtype="bf16"),
           source=_DS_SRC + ": D3 decode unit 18 nodes EP144/DP144, 32 redundant experts; D9 20–22 tok/s per user; "
                            "D10 mean KV length 4,989; D15 [D] ~88 sequences per GPU (Little's law)",
           family="hopper", regime="decode",
           assumptions=("88 sequences/GPU from D15 [D] (1,850 tok/s/GPU ÷ 21 tok/s/user)",
                        "context = the published mean KV length 4,989", "no MTP speculation (not stated in the post)",
                        "FP8 weights, BF16 MLA KV (D1)")),
    Record(id="D-prefill", title="DeepSeek-V3/R1 prefill unit, 32 H800 (EP32, DP32): input tok/s per GPU",
           metric="prefill_tok_s_per_gpu", measured=73.7e3 / 8, unit="tok/s/GPU", how="prefill",
           inputs=dict(model="deepseek-v3", hardware="hgx-h800", chips=32, tp=32, ep=32, attention_dp=True,
                       redundant_experts=32, isl=4989, cached_share=0.563, weights_dtype="fp8", kv_dtype="bf16"),
           source=_DS_SRC + ": D2 prefill unit EP32/DP32; D11 ~73.7k input tok/s per node incl. cache hits; "
                            "D7 56.3% of input tokens hit the KV cache",
           family="hopper", regime="prefill",
           assumptions=("prompt length = the published mean KV length 4,989 (not published)",
                        "56.3% of each prompt cached (D7), counted as input tokens as DeepSeek does",
                        "each GPU's pass carries ~8,192 computed tokens (whole prompts)")),
]

_POPE_SRC = ("published.md §1a: Pope et al. 2022 (arXiv 2211.05102) Table 2 via a secondary summary [S]; "
             "TPU v4, PaLM 540B, 64 chips, context 2,048")
_POPE_ASSUME = ("batch-sharded multi-query attention: KV split 64 ways by sequence (Pope §3.3)",
                "layout modelled as 64-way tensor parallelism with a per-layer all-reduce")

_POPE = [
    Record(id="P5", title="PaLM 540B low-latency decode, batch 64, int8, 64 TPU v4", metric="decode_step_ms",
           measured=28.4, unit="ms", how="decode_step",
           inputs=dict(model="palm-540b", hardware="tpu-v4-pod", chips=64, tp=64, batch=64, context=2048 + 32,
                       weights_dtype="int8", kv_dtype="bf16", kv_shards=64),
           source=_POPE_SRC + ": P5 1.82 s for 64 tokens = 28.4 ms/step (P1: 29 ms/token, same setting)",
           family="tpu-v4", regime="decode", assumptions=_POPE_ASSUME + ("context = 2,048 + 32 (mid-generation)",)),
    Record(id="P7", title="PaLM 540B high-throughput decode, batch 512, bf16, 64 TPU v4", metric="decode_step_ms",
           measured=93.75, unit="ms", how="decode_step",
           inputs=dict(model="palm-540b", hardware="tpu-v4-pod", chips=64, tp=64, batch=512, context=2048 + 32,
                       weights_dtype="bf16", kv_dtype="bf16", kv_shards=64),
           source=_POPE_SRC + ": P7 6.0 s for 64 tokens = 93.75 ms/step, MFU 33%",
           family="tpu-v4", regime="decode", assumptions=_POPE_ASSUME + ("context = 2,048 + 32 (mid-generation)",)),
    Record(id="P4", title="PaLM 540B low-latency prefill, 1 × 2,048 tokens, int8, 64 TPU v4", metric="prefill_s",
           measured=0.29, unit="s", how="prefill",
           inputs=dict(model="palm-540b", hardware="tpu-v4-pod", chips=64, tp=64, batch=1, isl=2048,
                       weights_dtype="int8", kv_dtype="bf16", kv_shards=64),
           source=_POPE_SRC + ": P4 0.29 s, MFU 43%", family="tpu-v4", regime="prefill", assumptions=_POPE_ASSUME),
    Record(id="P6", title="PaLM 540B high-throughput prefill, 512 × 2,048 tokens, bf16, 64 TPU v4",
           metric="prefill_s", measured=85.2, unit="s", how="prefill",
           inputs=dict(model="palm-540b", hardware="tpu-v4-pod", chips=64, tp=64, batch=512, isl=2048,
                       weights_dtype="bf16", kv_dtype="bf16", kv_shards=64),
           source=_POPE_SRC + ": P6 85.2 s, MFU 76% (P2: 76% MFU, same setting)", family="tpu-v4",
           regime="prefill", assumptions=_POPE_ASSUME),
]

_SB_SRC = "published.md §1g [V]: jax-ml/scaling-book (commit 0819a7d) worked examples; model-derived, not measured"

_SCALING_BOOK = [
    Record(id="SB2", title="Llama 3 70B decode, batch 32 at 8,192, int8 weights + KV, 8 TPU v5e",
           metric="decode_step_ms", measured=17.0, unit="ms", how="decode_step",
           inputs=dict(model="llama-3.1-70b", hardware="tpu-v5e-pod", chips=8, tp=8, batch=32, context=8192,
                       weights_dtype="int8", kv_dtype="int8"),
           source=_SB_SRC + ": SB2 step ≈ 112 GB / (8 × 8.1e11 B/s) = 17 ms", family="tpu-v5e", regime="decode",
           kind="derived", assumptions=("ideal roofline, as the book computes it",), efficiency="ideal"),
    Record(id="SB6", title="Llama 3 70B prefill of 8,192 tokens on 16 TPU v5e at 40% MFU", metric="prefill_s",
           measured=0.91, unit="s", how="prefill",
           inputs=dict(model="llama-3.1-70b", hardware="tpu-v5e-pod", chips=16, tp=16, batch=1, isl=8192,
                       weights_dtype="bf16", kv_dtype="bf16"),
           source=_SB_SRC + ": SB6 2·70e9·8192 / (16 · 1.97e14 · 0.4) = 0.91 s", family="tpu-v5e",
           regime="prefill", kind="derived",
           assumptions=("η_compute = 0.4 as stated by the book, nothing else derated",), efficiency="mfu-0.4"),
]


def records() -> list[Record]:
    """Every public record, in published.md order."""
    return _POPE + _DEEPSEEK + _MLPERF + _trt_records() + _SCALING_BOOK


# --------------------------------------------------------------------------------------
# Prediction
# --------------------------------------------------------------------------------------


def max_load_concurrency(model, hardware, *, gpus, isl, osl, weights_dtype=None, kv_dtype=None, tp=None, ep=None,
                         pp=None, attention_dp=None):
    """The documented max-load rule: C = min(largest C whose KV fits 90% of HBM, 2,048 per replica).

    The KV is sized at the steady-state mean context ISL + OSL/2 (paged KV grows with the output).
    """
    from .serving import MAX_BATCH_SIZE, serve

    r = serve(model, hardware, gpus=gpus, isl=isl, osl=osl, concurrency=1, tp=tp, ep=ep, pp=pp,
              attention_dp=attention_dp, weights_dtype=weights_dtype, kv_dtype=kv_dtype, ideal=True)
    cap = float(np.asarray(r.max_concurrency).ravel()[0])
    return max(1.0, min(cap, MAX_BATCH_SIZE * r.layout["dp"] * r.layout.get("pp", 1)))


def _inputs_key(inputs: dict) -> tuple:
    """A hashable key of a record's inputs (for the caches below)."""
    return tuple(sorted(inputs.items()))


@register_cache
@lru_cache(maxsize=512)
def _max_load_cached(key: tuple) -> float:
    inp = dict(key)
    return max_load_concurrency(inp["model"], inp["hardware"], gpus=inp["gpus"], isl=inp["isl"], osl=inp["osl"],
                                weights_dtype=inp.get("weights_dtype"), kv_dtype=inp.get("kv_dtype"),
                                tp=inp.get("tp"))


def _record_concurrency(inp: dict):
    """The record's concurrency: as published, or the max-load rule (efficiency-independent, so memoised)."""
    if inp.get("concurrency") == "max-load":
        return _max_load_cached(_inputs_key(inp))
    return inp["concurrency"]


@register_cache
@lru_cache(maxsize=64)
def _serve_dict(key: tuple, efficiency, ideal: bool) -> dict:
    """``serve(**inputs).as_dict()``, memoised: records that report two metrics of one run (MLPerf Server's
    TPOT and TTFT) share it. Callers read it, never change it."""
    from .serving import serve

    return serve(**dict(key), efficiency=efficiency, ideal=ideal).as_dict()


def _efficiency_for(rec: Record, efficiency):
    """Which efficiency a record is predicted with: a derived record keeps its own stated one."""
    from ..engine.efficiency import Efficiency

    if rec.efficiency == "ideal":
        return "ideal"
    if rec.efficiency == "mfu-0.4":
        return Efficiency("mfu-0.4", eta_compute=0.4, description="the scaling book's stated 40% MFU")
    return efficiency


def predict(rec: Record, efficiency=None, ideal=False) -> tuple[float, dict]:
    """rackmath's prediction of one record (value in the record's unit) and the operating point used.

    ``efficiency`` None = the calibrated preset for the record's chip and regime; ``ideal`` the roofline.
    """
    from .serving import decode_step, prefill_time

    eff = _efficiency_for(rec, efficiency)
    if eff == "ideal":
        eff, ideal = None, True
    elif rec.efficiency is not None:
        ideal = False
    inp = dict(rec.inputs)
    info = {}
    if rec.how == "serve":
        inp["concurrency"] = _record_concurrency(inp)
        d = _serve_dict(_inputs_key(inp), eff, bool(ideal))
        info = {k: d[k] for k in ("concurrency", "tpot_ms", "ttft_ms", "output_tok_s_per_gpu", "bottleneck",
                                  "efficiency")}
        info["layout"] = d["layout"]["label"]
        return float(d[rec.metric]), info
    common = {k: inp[k] for k in ("model", "hardware", "chips", "tp", "weights_dtype", "kv_dtype") if k in inp}
    extra = {k: inp[k] for k in ("ep", "attention_dp", "kv_shards", "redundant_experts") if k in inp}
    if rec.how == "decode_step":
        step, res, e = decode_step(**common, **extra, batch=inp["batch"], context=inp["context"], efficiency=eff,
                                   ideal=ideal)
        step = float(np.asarray(step).ravel()[0])
        info = dict(bottleneck=str(np.asarray(res.bound).ravel()[0]), efficiency=e.name)
        return step * 1e3, info
    if rec.how == "prefill":
        batch = inp.get("batch")
        isl, h = float(inp["isl"]), float(inp.get("cached_share", 0.0))
        if batch is None:  # a throughput record: each GPU's pass carries ~MAX_NUM_TOKENS computed tokens
            from .serving import MAX_NUM_TOKENS

            per_gpu = max(1.0, np.floor(MAX_NUM_TOKENS / (isl * (1.0 - h))))
            batch = per_gpu * inp["chips"] if inp.get("attention_dp") else per_gpu
        step, res, e = prefill_time(**common, **extra, batch=batch, isl=isl, cached_share=h, efficiency=eff,
                                    ideal=ideal)
        step = float(np.asarray(step).ravel()[0])
        info = dict(bottleneck=str(np.asarray(res.bound).ravel()[0]), efficiency=e.name, batch=float(batch))
        if rec.metric == "prefill_tok_s_per_gpu":
            return batch * isl / step / inp["chips"], info
        return step, info
    raise ValueError(rec.how)


#: Metrics of a fixed-layout serving record that :func:`predict_many` evaluates vectorized.
_VECTOR_SERVE_METRICS = ("output_tok_s_per_gpu", "tpot_ms", "step_ms")


@register_cache
@lru_cache(maxsize=512)
def _serve_step_setup(key: tuple):
    """What a fixed-layout serving record's step carries, independent of the efficiency (memoised).

    The same calls, in the same order, as :func:`serving.serve` for an aggregated deployment
    with the layout given: step numbers, the deployment, sequences per micro-batch.
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
    return mn, system, cdt, dep, C, b, a, gpus, rx


def _vectorizable(rec: Record) -> bool:
    """Records whose prediction :func:`predict_many` evaluates for many efficiencies in one call.

    Single passes (decode step, prefill) and aggregated serving with the layout given and a
    step-time metric. Records whose layout rackmath chooses (the choice depends on the
    efficiency), TTFT (its prefill chunk is scalar inside ``serve``) and disaggregated serving
    are predicted one efficiency at a time.
    """
    if rec.efficiency is not None:
        return False
    if rec.how in ("decode_step", "prefill"):
        return True
    inp = rec.inputs
    return (rec.how == "serve" and rec.metric in _VECTOR_SERVE_METRICS and "prefill_gpus" not in inp
            and any(inp.get(k) is not None for k in ("tp", "ep", "pp", "attention_dp")))


def predict_many(rec: Record, params, name: str = "fit") -> np.ndarray:
    """rackmath's prediction of one record under K candidate efficiencies at once (value in the record's unit).

    ``params`` is a (K, 4) array of (η_compute, η_memory, η_comm, step overhead in s), the
    order of ``calibration.PARAMS``; ``name`` is the efficiency's name (it sets the serial
    composition, as for a calibrated preset). The efficiency's fields become numpy arrays of
    length K and the engine broadcasts them: one layout-engine call per record instead of K
    (what makes the calibration's grid search and its cross-validation fast). Equal to
    :func:`predict` row by row (tests hold this for every record); records that cannot be
    vectorized (:func:`_vectorizable`) fall back to :func:`predict` per row.
    """
    from ..engine.efficiency import Efficiency
    from .serving import _evaluate, decode_step, output_tokens_per_s, prefill_time, tpot

    X = np.atleast_2d(np.asarray(params, dtype=float))
    if X.ndim != 2 or X.shape[1] != 4:
        from ..errors import InputError

        raise InputError("params", f"shape {X.shape}", "(K, 4): η_compute, η_memory, η_comm, overhead (s)")
    if not _vectorizable(rec):
        return np.array([predict(rec, efficiency=Efficiency(name, *(float(v) for v in x)))[0] for x in X])
    eff = Efficiency(name, eta_compute=X[:, 0].copy(), eta_memory=X[:, 1].copy(), eta_comm=X[:, 2].copy(),
                     step_overhead_s=X[:, 3].copy())
    inp = dict(rec.inputs)
    if rec.how == "serve":
        inp["concurrency"] = _record_concurrency(inp)
        mn, system, cdt, dep, C, b, a, gpus, rx = _serve_step_setup(_inputs_key(inp))
        _, step, _ = _evaluate(mn, system, eff, cdt, tp=dep.tp, ep=dep.ep, pp=dep.pp, attention_dp=dep.attention_dp,
                               micro_batch=b, chips=gpus, redundant_experts=rx)
        if rec.metric == "output_tok_s_per_gpu":
            out = output_tokens_per_s(C, step, a) / gpus
        elif rec.metric == "tpot_ms":
            out = tpot(step, a) * 1e3
        else:
            out = step * 1e3
        return np.broadcast_to(np.asarray(out, dtype=float), (len(X),)).copy()
    common = {k: inp[k] for k in ("model", "hardware", "chips", "tp", "weights_dtype", "kv_dtype") if k in inp}
    extra = {k: inp[k] for k in ("ep", "attention_dp", "kv_shards", "redundant_experts") if k in inp}
    if rec.how == "decode_step":
        step, _, _ = decode_step(**common, **extra, batch=inp["batch"], context=inp["context"], efficiency=eff)
        return np.broadcast_to(np.asarray(step, dtype=float) * 1e3, (len(X),)).copy()
    batch = inp.get("batch")
    isl, h = float(inp["isl"]), float(inp.get("cached_share", 0.0))
    if batch is None:  # as predict(): each GPU's pass carries ~MAX_NUM_TOKENS computed tokens
        from .serving import MAX_NUM_TOKENS

        per_gpu = max(1.0, np.floor(MAX_NUM_TOKENS / (isl * (1.0 - h))))
        batch = per_gpu * inp["chips"] if inp.get("attention_dp") else per_gpu
    step, _, _ = prefill_time(**common, **extra, batch=batch, isl=isl, cached_share=h, efficiency=eff)
    step = np.broadcast_to(np.asarray(step, dtype=float), (len(X),))
    if rec.metric == "prefill_tok_s_per_gpu":
        return batch * isl / step / inp["chips"]
    return step.copy()


def source_group(rec: Record) -> str:
    """The publication (table) a record comes from: records of one source share a stack, a harness and its biases.

    Pope et al. Table 2 → ``pope-2022``; DeepSeek's Day-6 post → ``deepseek-day6``; MLPerf v4.1 →
    ``mlperf-v4.1``; the TensorRT-LLM perf-overview → one group per hardware column
    (``trtllm-h100``, ``trtllm-h200``, ``trtllm-b200``, ``trtllm-gb200``): one GPU's column is one
    benchmark campaign; rows of the other columns are other machines' runs of the same workloads.
    """
    if rec.id.startswith("P"):
        return "pope-2022"
    if rec.id.startswith("D-"):
        return "deepseek-day6"
    if rec.id.startswith("M"):
        return "mlperf-v4.1"
    if rec.id.startswith("SB"):
        return "scaling-book"
    if rec.id.startswith("T") and "-" in rec.id:
        return "trtllm-" + rec.id.split("-", 1)[1].lower()
    return rec.id


def error(predicted, measured):
    """Signed error: predicted / measured − 1."""
    return np.asarray(predicted, dtype=float) / np.asarray(measured, dtype=float) - 1.0


def summarize(rows: list[dict]) -> dict:
    """Median |error|, mean |log ratio| and the worst case of a list of evaluated records."""
    if not rows:
        return {"n": 0}
    errs = np.array([r["error"] for r in rows], dtype=float)
    worst = int(np.argmax(np.abs(errs)))
    return {"n": len(rows), "median_abs_error": float(np.median(np.abs(errs))),
            "mean_abs_log_ratio": float(np.mean(np.abs(np.log1p(errs)))),
            "within_20pct": int(np.sum(np.abs(errs) <= 0.2)),
            "worst": {"id": rows[worst]["id"], "error": float(errs[worst])}}


def validate(efficiency=None, ideal=False, ids=None) -> dict:
    """Every record predicted and compared: ``{"records": [...], "summary": {...}}``.

    ``summary`` covers the measured records (the headline); ``summary_derived`` the
    scaling-book worked examples; ``summary_by_family`` each hardware family.
    """
    rows = []
    for rec in records():
        if ids and rec.id not in ids:
            continue
        pred, info = predict(rec, efficiency=efficiency, ideal=ideal)
        row = rec.as_dict()
        row.update(predicted=pred, error=float(error(pred, rec.measured)), operating_point=info)
        rows.append(row)
    meas = [r for r in rows if r["kind"] == "measured"]
    fams = sorted({r["family"] for r in meas})
    return {"records": rows, "summary": dict(summarize(meas), ideal=bool(ideal)),
            "summary_derived": summarize([r for r in rows if r["kind"] == "derived"]),
            "summary_by_family": {f: summarize([r for r in meas if r["family"] == f]) for f in fams}}


__all__ = ["Record", "records", "predict", "predict_many", "source_group", "validate", "summarize", "error",
           "max_load_concurrency"]
