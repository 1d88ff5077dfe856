"""Measured kernel curves per chip (issue 34): ``specs/data/kernels/<chip>.toml``.

Written by ``benchmarks/reduce_aiconfigurator.py`` from NVIDIA's aiconfigurator-core tables (Apache-2.0; notice in
``specs/data/kernels/NOTICE-aiconfigurator.md``): GEMM time versus M per dtype, decode attention and MLA versus
context, MoE grouped GEMM versus tokens, NCCL collectives versus bytes per group size, the floor latency of a small
kernel — each curve with the package, its version, the table and the framework version that measured it. rackmath
reads only these TOML files (never aiconfigurator). ``hardware show`` names their provenance; :func:`silicon` derives
the step model's silicon parameters from them (``--efficiency measured``: ``engine.efficiency.measured_efficiency``),
each number with the curve, table and package version it comes from.

A user's own curves (``rackmath measure --curves --save DIR``, or any file in the same format whose ``[_meta]``
names the chip) in a ``--catalog`` / ``RACKMATH_CATALOG`` directory are added over the shipped ones for that chip,
each replacing the shipped curve of the same operator and shape: :func:`kernel_table` says which files it read.

MI355X's curves are reduced by ``benchmarks/reduce_aiter.py`` from AMD's AITER tuned-kernel tables (MIT; notice in
``NOTICE-aiter.md``): GEMMs, the kernel floor and DeepSeek's fused MoE, no attention or collectives; its file says
which silicon numbers its curves do not set (``[_meta] silicon_skip``: :func:`not_read`).

A chip no one has measured (MI300X, TPU) may instead have **silicon inferred from records**
(``specs/data/kernels/inferred/<chip>.toml``, written by ``benchmarks/stack_fit.py --write``): the two numbers the
serving records identify for it — the floor time per kernel τ_k and the MLA kernel scale — fitted on that chip's
InferenceMAX records of two or more groups (so leaving a group out still leaves the chip's own records), stated as
inferred, never as measured (:func:`inferred`); a measured AMD chip infers its MLA kernel scale alone
(:func:`inferable_fields`).
"""

from __future__ import annotations

from collections import Counter
from functools import lru_cache
from pathlib import Path
from statistics import median

from ..errors import CatalogError
from .catalog import _dir_scan, _read_toml, catalog_dirs, register_cache
from .hardware import load_hardware

DIR = Path(__file__).parent / "data" / "kernels"
#: Silicon inferred from serving records for chips without measured curves (:func:`inferred`).
INFERRED_DIR = DIR / "inferred"
#: The fields a chip's inferred silicon may set (τ_k and the MLA kernel scale: what its records identify).
INFERRED_FIELDS = ("kernel_latency_s", "mla_kernel_scale")

#: What a chip without measured curves has instead, by vendor.
WITHOUT = {"amd": "none measured: vendor figures and the serving records only (aiconfigurator-core measures NVIDIA "
                  "GPUs only; AITER's shipped tables measure MI355X's, and only DeepSeek's small GEMMs on gfx942)",
           "google": "none measured: vendor figures and the records only",
           "": "none measured: vendor figures only"}


def _user_curves(chip: str):
    """(path, document) of the last kernel-curve file in the user's catalog directories whose ``[_meta]`` names
    ``chip`` (the directory given last wins, as for every catalog entry), or None."""
    found = None
    for d in catalog_dirs()[1:]:
        for path, doc in _dir_scan(d)[0]:
            meta = doc.get("_meta")
            if isinstance(meta, dict) and meta.get("chip") == chip and "_curve" in doc:
                found = (path, doc)
    return found


#: What makes two kernel curves the same measurement (a user's curve replaces the shipped one of the same key;
#: ``rackmath measure --curves`` compares them): the operator and these fields of its shape.
CURVE_KEYS = {"gemm": ("dtype", "n", "k"), "kernel_floor": (), "attention_decode": ("batch", "heads", "kv_heads",
                                                                                    "head_dim", "kv_dtype"),
              "mla_decode": ("batch", "tp", "kv_dtype"), "moe": ("model", "dtype", "ep"),
              "moe_routing": ("hidden", "inter", "experts", "topk"),
              "all_reduce": ("gpus",), "all_gather": ("gpus",), "reduce_scatter": ("gpus",), "alltoall": ("gpus",),
              "custom_all_reduce": ("gpus",)}


def curve_key(c: dict) -> tuple:
    """The operator and its shape fields (:data:`CURVE_KEYS`)."""
    return (c.get("op"), *(c.get(k) for k in CURVE_KEYS.get(c.get("op"), ())))


def _shipped(p: Path) -> dict:
    """The shipped curve file ``p`` checked, as :func:`kernel_table` gives it."""
    return dict(_checked(p, _read_toml(p)), shipped=True, file=f"specs/data/kernels/{p.name}")


@register_cache
@lru_cache(maxsize=64)
def kernel_table(chip: str) -> dict | None:
    """``{"meta", "curves", "shipped", "file"}`` of a chip, or None when it has no curves.

    The shipped curves, with a user's own (:func:`_user_curves`) **added**: a user curve replaces the shipped curve
    of the same operator and shape (:func:`curve_key`) and adds one the shipped set lacks, so a partial measurement
    (say GEMMs and the kernel floor, without collectives) keeps the shipped curves it did not redo. Every curve
    carries the package, version and system it came from."""
    user = _user_curves(chip)
    p = DIR / f"{chip}.toml"
    shipped = _shipped(p) if p.exists() else None
    if user is None:
        return shipped
    mine = _checked(*user)
    keys = {curve_key(c) for c in mine["curves"]}
    kept = [c for c in (shipped["curves"] if shipped else []) if curve_key(c) not in keys]
    return {"meta": mine["meta"], "curves": mine["curves"] + kept, "shipped": False,
            "file": str(user[0]) + (f" over specs/data/kernels/{chip}.toml ({len(kept)} of its curves kept)"
                                    if shipped else "")}


def _checked(p, doc: dict) -> dict:
    """A kernel-curve document checked (``[_meta]``, each ``[[_curve]]``'s fields and times); each curve stamped with
    the package, version and system of its file."""
    meta, curves = doc.get("_meta"), doc.get("_curve", [])
    if not isinstance(meta, dict) or not isinstance(curves, list):
        raise CatalogError(str(p), "_meta", "expected [_meta] and [[_curve]] tables")
    for i, c in enumerate(curves):
        for k in ("op", "name", "x", "x_values", "time_s", "framework", "framework_version", "table"):
            if not isinstance(c, dict) or k not in c:
                raise CatalogError(str(p), f"_curve[{i}].{k}", "missing")
        xs, ts = c["x_values"], c["time_s"]
        if not isinstance(xs, list) or not isinstance(ts, list) or not xs or len(xs) != len(ts) \
                or any(isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t < 1e3 for t in ts) \
                or any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in xs):
            raise CatalogError(str(p), f"_curve[{i}].time_s", "one positive time in seconds per x value")
        if c.get("routing", "balanced") not in ("balanced", "uniform"):  # a MoE curve's token distribution
            raise CatalogError(str(p), f"_curve[{i}].routing", "balanced or uniform")
    stamp = {k: meta.get(k) for k in ("package", "package_version", "system")}
    return {"meta": meta, "curves": [dict(stamp, **c) for c in curves]}


@lru_cache(maxsize=64)
def inferred(chip: str) -> dict | None:
    """A chip's silicon inferred from serving records (``specs/data/kernels/inferred/<chip>.toml``: ``[_inferred]``
    with ``kernel_latency_s``, ``mla_kernel_scale``, ``records``, ``groups``, ``source``), or None."""
    p = INFERRED_DIR / f"{chip}.toml"
    if not p.exists():
        return None
    d = _read_toml(p).get("_inferred")
    if not isinstance(d, dict) or not isinstance(d.get("source"), str) or not any(k in d for k in INFERRED_FIELDS):
        raise CatalogError(str(p), "_inferred", f"expected an [_inferred] table with a source and one or more of "
                                                f"{', '.join(INFERRED_FIELDS)}")
    for k in INFERRED_FIELDS:
        v = d.get(k, 1.0)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0:
            raise CatalogError(str(p), f"_inferred.{k}", "a positive number")
    return dict(d, file=f"specs/data/kernels/inferred/{chip}.toml")


def inferable_fields(chip: str, vendor: str = "") -> tuple:
    """The silicon numbers a chip's serving records are to identify (:data:`INFERRED_FIELDS`): both where nothing
    measured the chip; where curves did (τ_k measured), the MLA kernel scale alone — kernels a stack's MLA block
    runs relative to the CUDA stacks' (ROCm's path runs more) — and none on NVIDIA, whose CUDA stacks are that
    reference (1)."""
    if kernel_table(chip) is None:
        return INFERRED_FIELDS
    return () if str(vendor).lower() == "nvidia" else ("mla_kernel_scale",)


def provenance(chip: str, vendor: str = "") -> dict:
    """Where a chip's kernel curves come from: the package, version, license, tables and stack versions, and the
    operators covered — or, for a chip without, what it has instead (silicon inferred from records, if any)."""
    t, fields = kernel_table(chip), inferable_fields(chip, vendor)
    inf = inferred(chip) if fields else None
    got = {} if inf is None else {"inferred": {k: inf[k] for k in (*fields, "records", "groups", "source", "file")
                                               if k in inf}}
    if t is None:
        return {"measured": False, "note": WITHOUT.get(str(vendor).lower(), WITHOUT[""]), **got}
    m, cs, skip = t["meta"], t["curves"], not_read(t)
    ops = {}
    for c in cs:
        ops[c["op"]] = ops.get(c["op"], 0) + 1
    return {"measured": True, "package": m.get("package"), "package_version": m.get("package_version"),
            "license": m.get("license"), "system": m.get("system"), "device": m.get("device"),
            "source": m.get("source"), "curves": len(cs), "ops": ops,
            "measured_with": sorted({f'{c["framework"]}@{c["framework_version"]}' for c in cs}),
            "tables": sorted({c["table"] for c in cs}), "file": t["file"], "shipped": t["shipped"],
            "packages": dict(Counter(f'{c["package"]} {c["package_version"]}' for c in cs)),
            **({"not_read": list(skip), "not_read_why": m.get("silicon_skip_why", "")} if skip else {}),
            **got}


def _inferred_words(inf: dict) -> str:
    """'τ_k = … µs, MLA kernel scale …' of the fields a chip's records inferred."""
    words = {"kernel_latency_s": lambda v: f"τ_k = {v * 1e6:.2f} µs", "mla_kernel_scale": lambda v: f"MLA kernel "
                                                                                                    f"scale {v:.2f}"}
    return ", ".join(words[k](inf[k]) for k in INFERRED_FIELDS if k in inf)


def summary_line(chip: str, vendor: str = "", p: dict | None = None) -> str:
    """One line for ``hardware show`` (``p``: the chip's :func:`provenance`, where the caller has it)."""
    p = provenance(chip, vendor) if p is None else p
    if not p["measured"]:
        inf = p.get("inferred")
        if inf is None:
            return p["note"]
        return (f'{p["note"]}; inferred from {inf.get("records", "?")} serving records: {_inferred_words(inf)} '
                f'({inf["file"]}: the silicon of --efficiency measured, not a measurement)')
    ops = ", ".join(f"{k} {v}" for k, v in p["ops"].items())
    inf = p.get("inferred")
    also = (f'; {_inferred_words(inf)} inferred from {inf.get("records", "?")} serving records ({inf["file"]}, not '
            f'a measurement)') if inf else ""
    if p.get("not_read"):  # fields its file says the curves do not set (not_read)
        also += f'; {", ".join(p["not_read"])} not read from them: its preset\'s ({p["not_read_why"]})'
    if len(p["packages"]) > 1:  # a user's curves over the shipped ones
        src = " + ".join(f"{n} {k}" for k, n in p["packages"].items())
        return (f'{p["curves"]} curves ({ops}): {src}, measured with {", ".join(p["measured_with"])}; {p["file"]} '
                f'(the silicon of --efficiency measured){also}')
    return (f'{p["curves"]} curves ({ops}) from {p["package"]} {p["package_version"]} ({p["license"]}), measured on '
            f'{p["device"]} with {", ".join(p["measured_with"])}; {p["file"]} (the silicon of --efficiency '
            f'measured){also}')


#: The GEMM shape and dtypes whose curves stand for a chip's weight GEMMs (the largest shape measured), in order of
#: preference: block-scaled FP8 (``fp8_block``: DeepSeek's FP8 checkpoints, the weight format of most FP8 serving),
#: then per-tensor FP8, then BF16; the other dtypes' values are kept in the provenance (``by_dtype``). The engine has
#: one η_c and one M½ per preset, not one per dtype.
GEMM_SHAPE = (8192, 8192)
GEMM_DTYPES = ("fp8_block", "fp8", "bf16")
#: Rows from which a GEMM curve is compute-bound on every measured chip (the ridge M = peak·B/(BW·F/M) is 100–600).
COMPUTE_ROWS = (512, 4096)
#: The collective group whose curves set the collective terms: the largest NVLink group measured (8 GPUs), the TP / EP
#: size of almost every NVIDIA serving record.
COLLECTIVE_GPUS = 8


def _curve(t: dict, op: str, **match):
    for c in t["curves"]:
        if c["op"] == op and all(c.get(k) == v for k, v in match.items()):
            return c
    return None


def _where(t: dict, c: dict, point: str) -> str:
    return (f'{point} from {c.get("package")} {c.get("package_version")} {c.get("system")} "{c["name"]}" '
            f'({c["framework"]}@{c["framework_version"]}: {c["table"]})')


def gemm_peak_efficiency(curve: dict, peak: float) -> float:
    """η_c = max_M (2·M·N·K / t(M)) / peak: the share of the dtype's dense peak a large GEMM reaches (measured)."""
    rate = curve.get("flops_per_s") or [2.0 * m * curve["n"] * curve["k"] / t
                                        for m, t in zip(curve["x_values"], curve["time_s"])]
    return max(rate) / peak


def gemm_half_rows(curve: dict, peak: float, eta_c: float, tau: float, rows=COMPUTE_ROWS) -> float:
    """M½ of the step model's η_c(M) = η_c·M/(M+M½) from the compute-bound part of a GEMM curve:
    t(M) − τ = 2·N·K·(M + M½) / (peak·η_c) ⇒ M½ = mean over M in ``rows`` of (t − τ)·peak·η_c / (2NK) − M, ≥ 0."""
    n, k = curve["n"], curve["k"]
    est = [(t - tau) * peak * eta_c / (2.0 * n * k) - m
           for m, t in zip(curve["x_values"], curve["time_s"]) if rows[0] <= m <= rows[1]]
    return max(0.0, sum(est) / len(est)) if est else 0.0


def gemm_memory_efficiency(curve: dict, hbm_bw: float, tau: float, nbytes_per_param: float) -> float:
    """η_m = B / (BW·(t(M=1) − τ)): a one-row GEMM reads its weights B = N·K·bytes once (memory-bound; the
    smallest M measured where a curve has no M = 1)."""
    t1 = curve["time_s"][curve["x_values"].index(min(curve["x_values"]))]
    return min(1.0, curve["n"] * curve["k"] * nbytes_per_param / (hbm_bw * max(t1 - tau, 1e-9)))


#: Bytes per expert weight of the MoE tables' formats, block scales included: FP8 with one FP32 scale per 128 × 128
#: block (DeepSeek-V3's checkpoint, arXiv 2412.19437 §3.3), NVFP4 with one FP8 scale per 16 values (NVIDIA's NVFP4),
#: MXFP4 with one 8-bit scale per 32 values (OCP Microscaling Formats v1.0).
MOE_WEIGHT_BYTES = {"fp8_block": 1.0 + 4 / (128 * 128), "nvfp4": 0.5 + 1 / 16, "w4a16_mxfp4": 0.5 + 1 / 32,
                    "w4a8_mxfp4_mxfp8": 0.5 + 1 / 32}
#: The weight format (a model's ``--weights-dtype``) each MoE table's quant mode stores its experts in: a model's
#: experts stream at the fastest table of their own format (``moe_stream``; engine.numbers.moe_stream_rate_of).
MOE_WEIGHT_FORMAT = {"fp8_block": "fp8", "nvfp4": "nvfp4", "w4a16_mxfp4": "mxfp4", "w4a8_mxfp4_mxfp8": "mxfp4"}


def experts_streamed(curve: dict, tokens: float) -> float:
    """H(T): the distinct experts T tokens hit on a rank under the curve's routing — balanced (aiconfigurator-core's
    ``moe_perf`` "balanced" rows): min(E, T · k) / EP; ``routing = "uniform"`` (AITER's tuner, top-k of Gaussian
    random scores): E · (1 − (1 − k/E)^T) / EP (lecture; ``engine.roofline.expected_experts_hit``)."""
    e, k = curve["experts"], curve["topk"]
    hit = e * (1.0 - (1.0 - k / e) ** tokens) if curve.get("routing") == "uniform" else min(e, tokens * k)
    return hit / curve["ep"]


def moe_memory_efficiency(curve: dict, hbm_bw: float, tau: float) -> float:
    """η_m,moe = max_T H(T) · B_e / (BW · (t(T) − τ)): the share of HBM bandwidth a grouped MoE GEMM reaches while
    streaming the experts it hits. B_e = 3 · hidden · inter · bytes per weight (gate, up, down); H(T) the distinct
    experts the curve's T tokens hit on a rank (:func:`experts_streamed`). Capped at 1."""
    b_e = 3.0 * curve["hidden"] * curve["inter"] * MOE_WEIGHT_BYTES[curve["dtype"]]
    best = max(experts_streamed(curve, t) * b_e / (hbm_bw * max(s - tau, 1e-9))
               for t, s in zip(curve["x_values"], curve["time_s"]))
    return min(1.0, best)


#: KV bytes a decode-attention point must stream to count toward its rate (:func:`kv_memory_efficiency`): far above
#: any chip's L2 (50–126 MB on the catalog's NVIDIA chips), so the rate read is HBM's, not a cache's.
KV_STREAM_BYTES = 512e6
#: Bytes per cached token and layer of the attention tables' caches (BF16): GQA's K and V of ``kv_heads`` heads of
#: ``head_dim``; MLA's latent of 512 plus the decoupled RoPE key of 64 (DeepSeek-V3, arXiv 2412.19437 §2.1.1), whole
#: on every tensor-parallel rank.
MLA_LATENT_ELEMENTS = 512 + 64


def kv_cache_bytes(curve: dict, context: float) -> float:
    """Bytes a decode-attention curve's point reads: batch · context · (2 · kv_heads · head_dim for GQA, 576 for
    MLA) · 2 (BF16 elements)."""
    per_token = (2.0 * curve["kv_heads"] * curve["head_dim"] if curve["op"] == "attention_decode"
                 else float(MLA_LATENT_ELEMENTS))
    return curve["batch"] * context * per_token * 2.0


def _kv_shape_ok(c: dict) -> bool:
    """A decode-attention curve states its BF16 cache's shape: a positive batch (and KV heads and head size for GQA)."""
    keys = ("batch", "kv_heads", "head_dim") if c["op"] == "attention_decode" else ("batch",)
    return c.get("kv_dtype") == "bf16" and all(isinstance(c.get(k), int) and not isinstance(c.get(k), bool)
                                               and c[k] > 0 for k in keys)


def _unfused_mla(c: dict) -> bool:
    """An MLA curve timed in plain PyTorch (``rackmath measure --curves``' reference: matmuls and a softmax, 6× slower
    than a fused MLA kernel on an H100) is no stack's kernel: it does not set η_m,mla. PyTorch's GQA decode attention
    is a fused flash kernel and does."""
    return c["op"] == "mla_decode" and c.get("framework") == "torch"


def kv_memory_efficiency(curve: dict, hbm_bw: float, tau: float) -> float | None:
    """η_kv = max over points streaming ≥ :data:`KV_STREAM_BYTES` of B / (BW · (t − τ)): the share of HBM bandwidth a
    decode-attention kernel reaches reading its KV cache (the GQA or MLA decode curves of aiconfigurator-core's
    ``generation_attention`` / ``generation_mla`` tables, BF16 caches). None where no point streams that much, or
    where the best point reads faster than the chip's HBM (η > 1: a table whose bytes are not the curve's stated
    shape, as A100's GQA table is — 3.1 TB/s on a 2.0 TB/s part)."""
    best = [kv_cache_bytes(curve, x) / (hbm_bw * max(t - tau, 1e-9))
            for x, t in zip(curve["x_values"], curve["time_s"]) if kv_cache_bytes(curve, x) >= KV_STREAM_BYTES]
    if not best or max(best) > 1.0:
        return None
    return max(best)


#: The compute dtype a MoE table's weight format runs its grouped GEMMs in — FP8 blocks and MXFP4 weights with MXFP8
#: activations on FP8 tensor cores, NVFP4 on FP4 ones, MXFP4 weights with BF16 activations on BF16 ones
#: (aiconfigurator-core's ``moe_perf`` quant modes): the peak its FLOP/s are a share of.
MOE_COMPUTE_DTYPE = {"fp8_block": "fp8", "nvfp4": "fp4", "w4a16_mxfp4": "bf16", "w4a8_mxfp4_mxfp8": "fp8"}
#: Tokens per expert over which a MoE curve's M½ is read: its compute-bound part (as :data:`COMPUTE_ROWS` of a GEMM).
MOE_COMPUTE_ROWS = (64, 512)


def reaches_compute(curve: dict, rows=MOE_COMPUTE_ROWS) -> bool:
    """Whether a MoE curve has a point at ``rows[0]`` or more tokens per expert (T · k / E): one that stops below
    (AITER's DeepSeek rows end at 1,024 tokens, 32 per expert) is memory-bound throughout and gives no compute law."""
    return max(curve["x_values"]) * curve["topk"] / curve["experts"] >= rows[0]


def moe_compute_law(curve: dict, peak: float, rows=MOE_COMPUTE_ROWS) -> tuple[float, float]:
    """(η_c,moe, M½,moe) of a grouped MoE GEMM from its measured curve, the law the engine prices the routed experts'
    FLOPs with: η(M) = η_c,moe · M / (M + M½,moe) at M = T·k/E tokens per expert.

    A rank computes F(T) = T·k·6·hidden·inter / EP FLOPs (gate, up and down GEMMs of the T·k token-expert pairs,
    balanced routing: aiconfigurator-core's ``moe_perf`` "balanced" rows), so F = M · E·6·hidden·inter / EP;
    η_c,moe = max_T F / (t · peak), and t(M) = F / (peak · η(M)) = a · (M + M½) with a = (F/M) / (peak · η_c,moe)
    gives M½ by least squares of the relative error a·(M + M½)/t − 1 over M in ``rows``, ≥ 0 (within ±22% of every
    shipped curve there). Measured, these kernels reach a quarter to three quarters of what the dense GEMM law gives
    at the same rows (NVFP4 on B200 / GB200 0.16 of the FP4 peak at 512 tokens per expert, against 0.6 · M/(M + M½)
    for a dense GEMM: docs/stacks.md, "The routed experts' compute, measured")."""
    per_m = curve["experts"] * 6.0 * curve["hidden"] * curve["inter"] / curve["ep"]
    pts = [(t * curve["topk"] / curve["experts"], s) for t, s in zip(curve["x_values"], curve["time_s"])]
    eta = max(m * per_m / (s * peak) for m, s in pts)
    a = per_m / (peak * eta)  # t = a · (M + M½): M½ by least squares of the relative error over ``rows``
    fit = [(a * m / s - 1.0, a / s) for m, s in pts if rows[0] <= m <= rows[1]]
    half = -sum(r * g for r, g in fit) / sum(g * g for _r, g in fit) if fit else 0.0
    return eta, max(0.0, half)


#: Whether ``--efficiency measured`` prices the routed experts at the measured routing share s(T) (:func:`silicon`'s
#: ``moe_routing``). Tried 2026-11-27 and off: one InferenceMAX group out it was no better (tok/s 17.3% → 18.1%,
#: TPOT 19.1% both, TTFT 50.0% → 48.3%; docs/stacks.md). The curves ship; ``benchmarks/stack_fit.py --routing`` and
#: ``benchmarks/probe_moe_routing.py --routing`` set it for their run.
MEASURED_ROUTING = False
#: The token distribution of the MoE tables' rows that ``engine.numbers.routing_share`` reduces: aiconfigurator-core
#: prices MoE layers with ``power_law`` rows of α = 1.2 (``sdk/models/moe.py``: ``_power_law_alpha = 1.2``); its 1.01
#: rows give the same shares within a few hundredths (docs/stacks.md).
ROUTING_DISTRIBUTION = "power_law_1.2"


def routing_curves(t: dict) -> tuple:
    """A chip's measured routing shares, one per model expert shape: ((hidden, inter, experts, top-k), tokens,
    s(T), where it was read) for each ``moe_routing`` curve (the engine's ``Efficiency.moe_routing``)."""
    return tuple(((c["hidden"], c["inter"], c["experts"], c["topk"]), tuple(c["x_values"]), tuple(c["share"]),
                  _where(t, c, f"s(T) = {min(c['share']):.2f}–{max(c['share']):.2f} of uniform routing's distinct "
                               f"experts, T = {c['x_values'][0]:g}–{c['x_values'][-1]:g}"))
                 for c in t["curves"] if c["op"] == "moe_routing" and _shares_ok(c))


def _shares_ok(c: dict) -> bool:
    """A routing curve has its expert shape and one share in (0, 2] per token count, the counts increasing."""
    s, x = c.get("share"), c["x_values"]
    shape = all(isinstance(c.get(k), int) for k in ("hidden", "inter", "experts", "topk"))
    return shape and isinstance(s, list) and len(s) == len(x) and all(a < b for a, b in zip(x, x[1:])) \
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= 2 for v in s)


def collective_terms(curve: dict, scaleup_bw: float) -> tuple[float, float]:
    """(α, η_comm) of an all-reduce curve over n GPUs: α = t at the smallest message (the fixed cost of one
    collective); η_comm = 2(n−1)/n·B/scaleup_bw / t at the largest message (ring bound over the measured time;
    NVLS in the switch can beat the ring: capped at 1)."""
    n = curve["gpus"]
    b, t = curve["x_values"][-1], curve["time_s"][-1]
    return curve["time_s"][0], min(1.0, 2.0 * (n - 1) / n * b / scaleup_bw / t)


def allreduce_curves(t: dict) -> tuple:
    """A chip's measured TP all-reduces, one per group size: ((GPUs, message bytes, times, where it was read), …)
    from its ``custom_all_reduce`` curves (the stacks' one-shot / two-shot kernel in a CUDA graph, BF16), sorted by
    group size (the engine's ``Efficiency.allreduce_curves``, read at a step's message size by
    ``engine.step.measured_allreduce_time``)."""
    out = []
    for c in t["curves"]:
        xs, ts = c["x_values"], c["time_s"]
        if c["op"] != "custom_all_reduce" or not isinstance(c.get("gpus"), int) or c["gpus"] < 2 \
                or any(a >= b for a, b in zip(xs, xs[1:])) or xs[0] <= 0:
            continue
        out.append((c["gpus"], tuple(float(x) for x in xs), tuple(float(x) for x in ts),
                    _where(t, c, f"t_AR(B) over {c['gpus']} GPUs, B = {xs[0]:.0f} B – {xs[-1] / 1e6:.0f} MB")))
    return tuple(sorted(out, key=lambda r: r[0]))


def _moe_silicon(t: dict, chip, tau: float) -> dict:
    """The MoE tables' silicon numbers: ``eta_memory_moe`` (the fastest MoE curve's streaming rate,
    :func:`moe_memory_efficiency`), ``moe_stream`` (the fastest of each weight format, :data:`MOE_WEIGHT_FORMAT`:
    ((format, η_m,moe, source), …)) and ``moe_compute`` (each curve's compute law, :func:`moe_compute_law`)."""
    out = {}
    curves = [c for c in t["curves"] if c["op"] == "moe" and all(k in c for k in ("hidden", "inter", "experts",
                                                                                   "topk", "ep"))]
    moe = [(moe_memory_efficiency(c, chip.hbm_bw, tau), c) for c in curves if c.get("dtype") in MOE_WEIGHT_BYTES]
    if moe and chip.hbm_bw:  # the fastest MoE kernel measured on the chip: what its silicon allows
        eta_moe, c = max(moe, key=lambda x: x[0])
        out["eta_memory_moe"] = {"value": eta_moe, "from": _where(t, c, f"η_m,moe = {eta_moe:.3f} (the fastest of "
                                                                       f"{len(moe)} MoE curves)")}
        streams = []
        for fmt in sorted({MOE_WEIGHT_FORMAT[c["dtype"]] for _e, c in moe}):  # ... and of each weight format
            mine = [x for x in moe if MOE_WEIGHT_FORMAT[x[1]["dtype"]] == fmt]
            eta, c = max(mine, key=lambda x: x[0])
            streams.append((fmt, eta, _where(t, c, f"η_m,moe = {eta:.3f} ({fmt} experts: the fastest of {len(mine)} "
                                                   f"{fmt} MoE curves)")))
        out["moe_stream"] = {"value": tuple(streams), "from": "; ".join(x[2] for x in streams)}
    laws = []
    for c in curves:  # the routed experts' compute, per compute dtype and expert shape measured
        dt = MOE_COMPUTE_DTYPE.get(c.get("dtype"))
        if dt and chip.flops.get(dt) and reaches_compute(c):
            eta, half = moe_compute_law(c, chip.flops[dt])
            laws.append((dt, int(c["hidden"]), int(c["inter"]), eta, half,
                         _where(t, c, f"η_c,moe = {eta:.3f} of the {dt} peak, M½ = {half:.0f} tokens per expert")))
    if laws:
        out["moe_compute"] = {"value": tuple(laws), "from": "; ".join(x[5] for x in laws)}
    return out


def _kv_silicon(t: dict, chip, tau: float) -> dict:
    """The decode-attention tables' silicon numbers: ``eta_memory_kv`` (GQA / MHA) and ``eta_memory_mla`` (MLA
    latents), each the fastest KV stream of its curves (:func:`kv_memory_efficiency`); a kind without a usable curve
    is left out (its reads stay at η_m)."""
    out = {}
    for op, field, sym in (("attention_decode", "eta_memory_kv", "η_m,kv"),
                           ("mla_decode", "eta_memory_mla", "η_m,mla")):
        rates = [(kv_memory_efficiency(c, chip.hbm_bw, tau), c) for c in t["curves"]
                 if c["op"] == op and _kv_shape_ok(c) and not _unfused_mla(c)] if chip.hbm_bw else []
        rates = [(e, c) for e, c in rates if e is not None]
        if rates:  # the fastest decode-attention curve's KV stream: what the chip's attention kernels reach
            eta, c = max(rates, key=lambda x: x[0])
            out[field] = {"value": eta, "from": _where(t, c, f"{sym} = {eta:.3f} (the KV stream, the fastest of "
                                                             f"{len(rates)} curves)")}
    return out


def _collective_silicon(t: dict, chip) -> dict:
    """The collectives' silicon numbers: ``collective_latency_s`` and ``eta_comm`` (the NCCL all-reduce of the group
    nearest :data:`COLLECTIVE_GPUS`, :func:`collective_terms`), ``allreduce_curves`` (:func:`allreduce_curves`) and
    ``allreduce_latency_s`` (the custom all-reduce's smallest message); none where the chip's curves have none."""
    out = {}
    ar = [c for c in t["curves"] if c["op"] == "all_reduce"]
    if ar and chip.scaleup_bw:
        c = min(ar, key=lambda c: abs(c["gpus"] - COLLECTIVE_GPUS))
        alpha, eta_comm = collective_terms(c, chip.scaleup_bw)
        out["collective_latency_s"] = {"value": alpha, "from": _where(t, c, f"α = {alpha * 1e6:.1f} µs "
                                                                            f"({c['x_values'][0]:.0f} B)")}
        out["eta_comm"] = {"value": eta_comm, "from": _where(t, c, f"η_comm = {eta_comm:.3f} "
                                                                   f"({c['x_values'][-1] / 1e6:.0f} MB)")}
    curves = allreduce_curves(t)
    if curves:  # a TP all-reduce at its message size and group (engine.step.measured_allreduce_time)
        out["allreduce_curves"] = {"value": curves, "from": "; ".join(r[3] for r in curves)}
    car = [c for c in t["curves"] if c["op"] == "custom_all_reduce"]
    if car:  # the small all-reduces of a step: the stacks' own one-shot kernel in a CUDA graph, not NCCL
        c = min(car, key=lambda c: abs(c["gpus"] - COLLECTIVE_GPUS))
        out["allreduce_latency_s"] = {"value": c["time_s"][0], "from": _where(
            t, c, f"α_AR = {c['time_s'][0] * 1e6:.2f} µs ({c['x_values'][0]:.0f} B, {c['gpus']} GPUs)")}
    return out


#: The silicon numbers a curve file may say its curves do not set (:func:`not_read`).
SKIPPABLE = ("kernel_latency_s", "eta_compute", "gemm_half_tokens", "eta_memory", "eta_memory_moe", "moe_stream",
             "moe_compute", "eta_memory_kv", "eta_memory_mla", "collective_latency_s", "eta_comm", "allreduce_curves",
             "allreduce_latency_s")


def not_read(t: dict) -> tuple:
    """The silicon fields a curve file's ``[_meta]`` says its curves do not set (``silicon_skip``; the reason in
    ``silicon_skip_why``): those stay the chip's preset's. MI355X's AITER curves set the memory side, not the GEMM
    compute law (docs/stacks.md, "MI355X's curves from AMD's AITER tables")."""
    skip = t["meta"].get("silicon_skip", [])
    if not isinstance(skip, list) or not all(k in SKIPPABLE for k in skip):
        raise CatalogError(t["file"], "_meta.silicon_skip", f"a list of silicon field names ({', '.join(SKIPPABLE)})")
    return tuple(skip)


def silicon(chip, table: dict | None = None) -> dict | None:
    """The step model's silicon parameters of a chip from its measured curves (None: no curves shipped).

    A chip without curves but with silicon inferred from records (:func:`inferred`) gets those fields only.
    ``{field: {"value": v, "from": "… curve, table, package version"}}`` for ``kernel_latency_s`` (τ: the shortest
    GEMM measured, the floor of a small kernel), ``eta_compute`` and ``gemm_half_tokens`` (the 8192×8192 GEMM
    curve, :func:`gemm_peak_efficiency`, :func:`gemm_half_rows`), ``eta_memory`` (its one-row point,
    :func:`gemm_memory_efficiency`), ``eta_memory_moe`` (the fastest MoE curve, :func:`moe_memory_efficiency`),
    ``moe_stream`` (the fastest MoE curve of each weight format: the rate a model's experts stream at),
    ``eta_memory_kv`` and ``eta_memory_mla`` (the fastest GQA and MLA decode-attention curves' KV stream,
    :func:`kv_memory_efficiency`),
    ``moe_compute`` (each MoE curve's compute law, :func:`moe_compute_law`: (compute dtype, hidden, inter, η_c,moe,
    M½,moe, source), …),
    ``moe_routing`` (the routing share s(T) of each model expert shape measured, :func:`routing_curves`; only
    where :data:`MEASURED_ROUTING`),
    ``allreduce_curves`` (the stacks' custom all-reduce per group size measured, :func:`allreduce_curves`: a TP
    all-reduce's time at its message size), ``allreduce_latency_s`` (the same kernel's smallest message, 8 GPUs or
    the nearest group measured: where no curve has the group), ``collective_latency_s`` and ``eta_comm`` (the 8-GPU
    NCCL all-reduce, :func:`collective_terms`); ``"by_dtype"`` holds η_c and M½ of every dtype measured. ``table``:
    curves to read instead of the chip's (``rackmath measure --curves`` compares its own with the shipped ones).
    """
    t = table if table is not None else kernel_table(chip.name)
    inf = inferred(chip.name) if table is None else None
    got = {k: {"value": float(inf[k]), "from": f"{k} = {float(inf[k]):.4g} inferred from {inf.get('records', '?')} "
                                              f"serving records of {chip.name} ({inf['file']})"}
           for k in (inferable_fields(chip.name, chip.vendor) if inf else ()) if k in inf}
    if t is None:
        return got or None
    out = {}
    floor = _curve(t, "kernel_floor")
    if floor is None or not any(_curve(t, "gemm", dtype=d, n=GEMM_SHAPE[0], k=GEMM_SHAPE[1]) for d in GEMM_DTYPES):
        raise CatalogError(t["file"], "_curve", f"the silicon needs a kernel_floor curve and a gemm curve at N = K = "
                                                f"{GEMM_SHAPE[0]} ({', '.join(GEMM_DTYPES)})")
    tau = floor["time_s"][0]
    out["kernel_latency_s"] = {"value": tau, "from": _where(t, floor, f"τ = {tau * 1e6:.2f} µs")}
    by_dtype = {}
    for dt in ("bf16", "fp8", "fp8_block"):
        c = _curve(t, "gemm", dtype=dt, n=GEMM_SHAPE[0], k=GEMM_SHAPE[1])
        peak = chip.flops.get("fp8" if dt.startswith("fp8") else dt)
        if c is None or not peak:
            continue
        eta = gemm_peak_efficiency(c, peak)
        by_dtype[dt] = {"eta_compute": eta, "gemm_half_tokens": gemm_half_rows(c, peak, eta, tau), "curve": c}
    dt = next((d for d in GEMM_DTYPES if d in by_dtype), None)
    if dt is None:
        raise CatalogError(t["file"], "_curve", f"no gemm curve in a dtype {chip.name} has a peak for")
    g = by_dtype[dt]
    out["eta_compute"] = {"value": g["eta_compute"], "from": _where(t, g["curve"], f"η_c = {g['eta_compute']:.3f} "
                                                                                     f"(max FLOP/s / {dt} peak)")}
    out["gemm_half_tokens"] = {"value": g["gemm_half_tokens"],
                               "from": _where(t, g["curve"], f"M½ = {g['gemm_half_tokens']:.0f} rows "
                                                             f"(M = {COMPUTE_ROWS[0]}–{COMPUTE_ROWS[1]})")}
    cb = next((c for c in (_curve(t, "gemm", dtype=d, n=GEMM_SHAPE[0], k=GEMM_SHAPE[1]) for d in ("bf16", "fp8"))
               if c is not None), g["curve"])  # the plainest GEMM's one-row stream: no block scales to read
    eta_m = gemm_memory_efficiency(cb, chip.hbm_bw, tau, 2.0 if cb["dtype"] == "bf16" else 1.0)
    out["eta_memory"] = {"value": eta_m, "from": _where(t, cb, f"η_m = {eta_m:.3f} (M = 1 point)")}
    out.update(_moe_silicon(t, chip, tau))
    out.update(_kv_silicon(t, chip, tau))
    out.update(_collective_silicon(t, chip))
    routing = routing_curves(t) if MEASURED_ROUTING else ()
    if routing:  # a skewed router's distinct experts per model shape (engine.numbers.routing_share)
        out["moe_routing"] = {"value": routing, "from": "; ".join(r[3] for r in routing)}
    out["by_dtype"] = {k: {"eta_compute": v["eta_compute"], "gemm_half_tokens": v["gemm_half_tokens"]}
                       for k, v in by_dtype.items()}
    for k in not_read(t):  # fields the file says not to take (its [_meta] silicon_skip, with the reason)
        out.pop(k, None)
    return {**out, **got}  # a measured chip's MLA kernel scale inferred from its records, where it has one


#: The silicon numbers a chip with neither curves nor records of its hardware family takes from the chips with
#: measured curves (:func:`transferred`): the roofline's core — the floor time per kernel τ_k, η_c with its M½, and
#: η_m — each as the median over those chips, as a fraction of the chip's own vendor peaks.
TRANSFERRED_FIELDS = ("kernel_latency_s", "eta_compute", "gemm_half_tokens", "eta_memory")


@lru_cache(maxsize=1)
def transferred() -> dict:
    """``{field: {"value", "from"}}`` of :data:`TRANSFERRED_FIELDS`: the median over the chips whose measured curves
    ship (``specs/data/kernels/*.toml``), and ``mla_kernel_scale`` 1 (the CUDA stacks' MLA kernel count, what those
    chips carry). What a chip gets that nothing has measured and whose hardware family left no record to infer from
    (``analyses.fitting.stack.without``: a hardware family out) — not the family's preset, which its own records
    fitted. Median, not mean: one PCIe card's η_c (L40S, 0.32) does not move it. Each ``from`` starts with
    ``transferred:`` (``--explain`` labels it so). The shipped curves only, never a user's (:func:`kernel_table`
    adds those): the same numbers whatever the catalog. Also what ``--efficiency measured`` gives a chip whose
    family has no preset of its own (``engine.efficiency.measured_efficiency``)."""
    per = {}
    for p in sorted(DIR.glob("*.toml")):
        t = _shipped(p)
        chip = load_hardware(t["meta"]["chip"]).chip
        sil = silicon(chip, t)
        per[chip.name] = {k: float(sil[k]["value"]) for k in TRANSFERRED_FIELDS if k in sil}
    out = {}
    for k in TRANSFERRED_FIELDS:  # each over the chips whose curves set it (not_read: a file may leave one out)
        chips = [c for c, v in per.items() if k in v]
        out[k] = {"value": median(per[c][k] for c in chips),
                  "from": f"transferred: {k}, the median over the {len(chips)} chips with measured curves "
                          f"({', '.join(chips)})"}
    out["mla_kernel_scale"] = {"value": 1.0, "from": "transferred: mla_kernel_scale 1, the CUDA stacks' MLA kernel "
                                                     "count, as on the chips with measured curves"}
    return out


__all__ = ["kernel_table", "inferred", "INFERRED_FIELDS", "provenance", "summary_line", "silicon", "DIR",
           "transferred", "TRANSFERRED_FIELDS", "inferable_fields"]
