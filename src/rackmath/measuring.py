"""`rackmath measure` as a Python function: micro-benchmarks + a decode sweep next to this machine's roofline.

    >>> import rackmath
    >>> res = rackmath.measure("llama-3.1-8b", device="cpu", quick=True)
    >>> res["knees"], res["chip"]["hbm_bw"]

Needs torch (``pip install rackmath[torch]``); everything else is rackmath's own roofline
(:mod:`rackmath.analyses.fitting.measure`). Method: docs/measure.md.
"""

from __future__ import annotations

import math
import os
import re
import sys
import time

import numpy as np

from .errors import InputError, RackmathError
from . import units
from .analyses.fitting import measure as am
from .engine.roofline import roofline
from .specs import kernels
from .specs.hardware import load_chip
from .specs.models import load_model

# Sizes per (device type, quick): weight budget of the decode model, batches, contexts, steps, GEMM sizes, and the
# longest run allowed (a lower bound on the run's time above it is refused before it starts: _check_duration).
PLANS = {
    ("cpu", True): dict(budget=256e6, kv_budget=1e9, batches=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
                        contexts=(128, 1024), steps=3, warmup=1, square=(1024, 2048),
                        tokens=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512), min_time=0.02, max_seconds=120),
    ("cpu", False): dict(budget=1e9, kv_budget=4e9, batches=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024),
                         contexts=(128, 2048), steps=6, warmup=2, square=(512, 1024, 2048, 4096),
                         tokens=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048), min_time=0.05,
                         max_seconds=1200),
    ("cuda", True): dict(budget=4e9, kv_budget=20e9, batches=(1, 4, 16, 64, 128, 256, 512, 1024),
                         contexts=(256, 4096), steps=5, warmup=2, square=(4096, 8192),
                         tokens=(1, 4, 16, 64, 128, 256, 512, 1024, 4096), min_time=0.05, max_seconds=120),
    ("cuda", False): dict(budget=8e9, kv_budget=40e9, batches=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048),
                          contexts=(256, 4096), steps=10, warmup=3, square=(2048, 4096, 8192, 16384),
                          tokens=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096), min_time=0.1,
                          max_seconds=600),
}


def _torch():
    try:
        import torch  # noqa: F401

        from . import measure_torch
    except ImportError as exc:  # torch is the optional extra
        raise InputError("torch", f"not installed ({exc.msg})",
                         "pip install 'rackmath[torch]' (PyTorch runs the benchmarks)") from None
    return measure_torch


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


def default_threads(torch_threads: int, load: float | None) -> int:
    """CPU threads when --threads is not given: torch's choice, less the cores other processes keep busy
    (1-minute load average), at least 1. Threads that must wait for a busy core stall every parallel kernel
    at its barrier: on a shared 2-core machine two threads ran a decode step 10–30× slower than one."""
    if load is None:
        return torch_threads
    return max(1, min(torch_threads, int(round(torch_threads - load))))


def _median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def _out_of_memory(exc: BaseException) -> bool:
    """An allocation the device or the process limit refused (torch raises RuntimeError / OutOfMemoryError)."""
    if isinstance(exc, MemoryError):
        return True
    msg = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("out of memory" in msg or "can't allocate memory" in msg
                                               or "cannot allocate memory" in msg)


def measure(model="llama-3.1-8b", **kw) -> dict:
    """Measure this machine and compare a real decode sweep with its roofline (:func:`_measure`).

    An allocation the device refuses (the model, a KV cache, a benchmark buffer, thread stacks under a memory
    limit) is a one-line error naming what to shrink, not a crash.
    """
    try:
        return _measure(model, **kw)
    except (RuntimeError, MemoryError) as exc:
        if not _out_of_memory(exc):
            raise
        m = re.search(r"allocate (\d+) bytes|Tried to allocate ([\d.]+ \w+)", str(exc))
        what = (f"{int(m.group(1)) / 1e6:.0f} MB" if m and m.group(1) else m.group(2)) if m else "memory"
        raise InputError("memory", f"the device refused to allocate {what} ({type(exc).__name__})",
                         "smaller --context, --batch or --weight-budget, fewer --threads, or more free memory") from None


def _check_duration(mt, dev, dts, dtype, spec, plan, points, quick) -> None:
    """Refuse, before it starts, a run that would take far longer than the plan's limit.

    A 256³ matmul per dtype (4096³ on a GPU, which runs 256³ launch-bound; fp32 as the reference) gives each
    dtype's rate in a fraction of a second; with it as the peak, :func:`analyses.fitting.measure.estimated_seconds` plus
    the square-GEMM benchmarks (four calls per size) bound the run's time from below. fp16 on most CPUs runs
    ~100× below bf16 and would take an hour.
    """
    probe_n = 256 if dev.type == "cpu" else 4096  # on an H200 a 256³ matmul ran at 1.1 TFLOP/s, 4096³ at ~700
    rate = {d: max(r["flops_per_s"] for r in mt.bench_matmul(dev, d, (probe_n,), min_time=0.005))
            for d in dict.fromkeys([*dts, "fp32"])}
    probe_bw = 50e9 if dev.type == "cpu" else 1e12  # only to bound the weight-streaming terms from below
    squares = sum(4 * 2.0 * n**3 / rate[d] for d in dts for n in plan["square"])
    est = squares + am.estimated_seconds(spec, rate[dtype], probe_bw, plan["tokens"], points,
                                         plan["steps"] + plan["warmup"], dtype, plan["min_time"])
    if est <= plan["max_seconds"]:
        return
    slow = [d for d in dts if rate[d] < 0.1 * max(rate.values())]
    if slow:
        raise InputError("dtype", f"{', '.join(slow)} matmuls run at {units.format_si(min(rate[d] for d in slow), 'FLOP/s')}"
                         f" on this {dev.type} ({units.format_si(max(rate.values()), 'FLOP/s')} for "
                         f"{max(rate, key=rate.get)}): the run would take at least {est:.0f} s (limit "
                         f"{plan['max_seconds']} s{' with --quick' if quick else ''})",
                         "a dtype the device runs fast (bf16 or fp32 on most CPUs)")
    raise InputError("batch", f"the run would take at least {est:.0f} s at this device's "
                     f"{units.format_si(rate[dtype], 'FLOP/s')} (limit {plan['max_seconds']} s"
                     f"{' with --quick' if quick else ''})",
                     "fewer or smaller --batch / --context values, or a smaller --weight-budget")


#: A measured chip's name: a catalog name and the file name of what ``--save`` writes (no path separators).
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,79}$")


def check_name(name) -> None:
    """``--name``: letters, digits and ``- _ . +``, at most 80 characters, or None (a name from the device)."""
    if name is not None and not _NAME.match(str(name)):
        raise InputError("name", f"{str(name)[:80]!r}", "letters, digits and - _ . + (a catalog name, also the file "
                                                        "name under --save), at most 80 characters")


def _measure(model="llama-3.1-8b", *, device: str = "auto", dtypes=None, quick: bool = False, name: str | None = None,
             batches=None, contexts=None, weight_budget: float | None = None, threads: int | None = None,
             progress=None) -> dict:
    """Measure this machine and compare a real decode sweep with its roofline.

    ``model``: a catalog name or HF config.json (scaled down to fit, same family); ``dtypes``: matmul dtypes
    to benchmark, the first one also runs the sweep (default bf16, fp32); ``progress(task, total)`` is called
    once per stage and returns a callable to advance it (the CLI passes rich progress bars); ``threads`` sets
    torch's CPU threads (default: torch's own choice).
    Returns a JSON-ready dict: device, peaks, GEMM curve and fit, bandwidth, sweep rows, knees, preset.
    """
    check_name(name)
    for c in (contexts or ()):
        if not 1 <= float(c) <= 1_048_576 or float(c) != int(c):
            raise InputError("contexts", f"{c!r} tokens", "whole numbers of KV tokens from 1 to 1M")
    t_start = time.perf_counter()
    mt = _torch()
    dev, info = _open_device(mt, device, threads)
    plan, dts = _plan(mt, dev, info, quick, dtypes, batches, contexts, weight_budget)
    dtype = dts[0]

    def stage(task, total):
        return progress(task, total) if progress else (lambda n=1: None)

    src = load_model(model)
    spec = am.scale_model(src, plan["budget"], dtype)
    # (batch, context) points whose KV cache fits the KV budget
    points = [(B, L) for L in plan["contexts"] for B in plan["batches"]
              if B * spec.kv_cache_bytes(L, dtype) <= plan["kv_budget"]]
    _check_duration(mt, dev, dts, dtype, spec, plan, points, quick)
    bench = _microbenchmarks(mt, dev, dts, spec, plan, quick, stage)
    system, how, when = _as_system(name, dev, info, quick, plan, bench)
    sweep = _decode_sweep(mt, dev, dtype, spec, system, plan, points, bench, stage)
    rows, counted = sweep["rows"], sweep["counted"]
    knees = _knees(rows, plan["contexts"], spec, system, dtype)
    err_i = np.abs(np.log([r["roofline_s"] / r["measured_s"] for r in rows]))
    err_c = np.abs(np.log([r["calibrated_s"] / r["measured_s"] for r in rows]))
    return {
        "device": info, "dtype": dtype, "quick": bool(quick), "how": how, "date": when,
        "matmul": bench["matmul"], "peak_flops": bench["peaks"],
        "gemm_curve": {"dtype": dtype, "shapes": [list(x) for x in bench["shapes"]], "rows": bench["small"],
                       "fit": bench["fit"], "form": "eta(M) = eta_max * M / (M + M_half)"},
        "bandwidth": bench["bw"], "attention": bench["attn"],
        "elementwise": {"bytes_per_seq": counted["elementwise_bytes_per_seq"], "bytes_per_s": sweep["elem_bw"]},
        "dispatch_s": bench["dispatch"], "ops_per_step": counted["ops"], "collective": bench["coll"],
        "chip": system.chip.describe(), "system": system.name,
        "model": {"source": src.name, "name": spec.name, "description": spec.description,
                  "n_layers": spec.n_layers, "d_model": spec.d_model, "weight_bytes": spec.weight_bytes(),
                  "active_params": spec.active_params, "attention": spec.attention, "n_experts": spec.n_experts},
        "sweep": rows, "knees": knees, "preset": sweep["preset"],
        "summary": {"median_abs_log_error_ideal": float(np.median(err_i)),
                    "median_abs_log_error_calibrated": float(np.median(err_c)), "points": len(rows)},
        "seconds": time.perf_counter() - t_start,
        # objects for saving and plotting (not JSON): dropped by the CLI before printing
        "_system": system, "_spec": spec,
    }


def _open_device(mt, device: str, threads: int | None):
    """The torch device and its description (with the load average and cores); sets torch's CPU threads
    (``threads``, else :func:`default_threads` on a CPU)."""
    import torch

    dev = mt.resolve_device(device)
    load = _load()
    if threads is not None:
        cpus = os.cpu_count() or 1
        if not 1 <= int(threads) <= cpus:
            raise InputError("threads", f"{threads!r}", f"1 to {cpus} CPU threads (this machine's CPUs)")
        torch.set_num_threads(int(threads))
    elif dev.type == "cpu":
        torch.set_num_threads(default_threads(torch.get_num_threads(), load))
    info = mt.device_info(dev)
    info["load_average"] = load
    info["cores"] = os.cpu_count()
    busy = dev.type == "cpu" and load is not None and load > 0.5 * (os.cpu_count() or 1)
    info["warning"] = (f"load average {load} on {os.cpu_count()} cores: other processes compete for the CPU, the "
                       "timings are noisy (measure on a quiet machine)") if busy else None
    return dev, info


def _plan(mt, dev, info: dict, quick, dtypes, batches, contexts, weight_budget) -> tuple[dict, list]:
    """The run's sizes (:data:`PLANS` with the options applied; weights at most a tenth of the device's memory, the
    KV cache three tenths) and the dtypes to benchmark (the first runs the sweep)."""
    plan = dict(PLANS[(dev.type, bool(quick))])
    dts = [units.normalize_dtype(d, "dtype") for d in (dtypes or ["bf16", "fp32"])]
    for d in dts:
        if d not in mt.DTYPES:
            raise InputError("dtype", f"{d!r} cannot be benchmarked", "bf16, fp16 or fp32")
    if batches is not None:
        plan["batches"] = tuple(sorted({int(b) for b in batches}))
    if contexts is not None:
        plan["contexts"] = tuple(sorted({int(c) for c in contexts}))
    if weight_budget is not None:
        plan["budget"] = float(weight_budget)
    if len(plan["batches"]) < 4:
        raise InputError("batch", f"{len(plan['batches'])} batch sizes", "at least 4 (the knee needs two lines)")
    plan["budget"] = min(plan["budget"], 0.1 * info["memory_bytes"])
    plan["kv_budget"] = min(plan["kv_budget"], 0.3 * info["memory_bytes"])
    return plan, dts


def _microbenchmarks(mt, dev, dts: list, spec, plan: dict, quick, stage) -> dict:
    """Square-GEMM peaks per dtype, memory bandwidth, the GEMM efficiency curve over tokens on the model's matrices
    (and its fit), attention's KV bandwidth, the dispatch time and (not with --quick) the peer-copy bandwidth."""
    dtype = dts[0]
    adv = stage("matmul peaks", len(dts) * len(plan["square"]))
    matmul, peaks = {}, {}
    for d in dts:
        rows = []
        for n in plan["square"]:
            rows += mt.bench_matmul(dev, d, (n,), min_time=plan["min_time"])
            adv()
        matmul[d] = rows
        peaks[d] = max(r["flops_per_s"] for r in rows)
    adv = stage("memory bandwidth", 1)
    bw = mt.bench_bandwidth(dev, max(spec.weight_bytes(), 64e6), min_time=plan["min_time"])
    adv()
    shapes = am.gemm_shapes(spec)
    adv = stage(f"GEMM efficiency vs tokens ({dtype}, the model's matrices)", 1)
    small = mt.bench_gemm_pass(dev, dtype, shapes, plan["tokens"], min_time=plan["min_time"], reps=3)
    adv()
    peaks[dtype] = max(peaks[dtype], max(r["flops_per_s"] for r in small))
    fit = am.fit_gemm_efficiency([r["m"] for r in small], [r["flops_per_s"] for r in small], peaks[dtype])
    attn = mt.bench_attention(dev, dtype, spec, kv_bytes=max(64e6, min(spec.weight_bytes(), 512e6)),
                              context=plan["contexts"][-1], min_time=plan["min_time"])
    dispatch = mt.bench_dispatch(dev, min_time=plan["min_time"])
    coll = mt.bench_collective(dev) if not quick else None
    return {"matmul": matmul, "peaks": peaks, "bw": bw, "shapes": shapes, "small": small, "fit": fit, "attn": attn,
            "dispatch": dispatch, "coll": coll}


def _as_system(name, dev, info: dict, quick, plan: dict, bench: dict):
    """The machine as a one-chip system (``analyses.fitting.measure.measured_system``) with a source for every
    number; returns (system, how it was measured, the date)."""
    peaks, bw, coll = bench["peaks"], bench["bw"], bench["coll"]
    cname = name or ("measured-" + ("cpu" if dev.type == "cpu" else
                                    "".join(c if c.isalnum() else "-" for c in info["name"].lower()).strip("-")))
    when = time.strftime("%Y-%m-%d", time.gmtime())
    cond = f", {info['threads']} threads, load {info['load_average']}" if dev.type == "cpu" else ""
    how = (f"rackmath measure{' --quick' if quick else ''} on {info['name']} ({dev.type}, torch {info['torch']}"
           f"{cond}), {when}")
    sources = {f"flops.{d}": f"{how}: best of square GEMMs {list(plan['square'])}" for d in peaks}
    sources.update(hbm=f"{how}: device memory", hbm_bandwidth=(
        f"{how}: best of read (sum) {bw['read_bytes_per_s'] / 1e9:.3g} GB/s and copy {bw['copy_bytes_per_s'] / 1e9:.3g}"
        f" GB/s over a {bw['buffer_bytes'] / 1e6:.0f} MB buffer"),
        scaleup_bandwidth=(f"{how}: peer copy between devices" if coll else
                           "single device: no scale-up link measured; set to the memory bandwidth"),
        scaleout_bandwidth="not measured: a 10 Gb/s placeholder", usd_per_hour="not priced: pass --usd-per-gpu-hour")
    if "bf16" not in peaks:
        sources["flops.bf16"] = f"bf16 not measured: set to the best measured peak ({', '.join(peaks)})"
    system = am.measured_system(cname, peaks, bw["bytes_per_s"], info["memory_bytes"],
                                description=f"{info['name']} measured by rackmath measure ({dev.type})",
                                vendor="measured", scaleup_bw=coll["p2p_bytes_per_s"] if coll else None,
                                devices=1, sources=sources)
    return system, how, when


def _decode_sweep(mt, dev, dtype, spec, system, plan: dict, points: list, bench: dict, stage) -> dict:
    """Time real decode steps at every (batch, context) point and set each next to the roofline and the preset the
    micro-benchmarks give (``analyses.fitting.measure.calibrated_times``). Returns the rows, the preset, the
    operators counted and the elementwise bandwidth."""
    import torch

    net = mt.build_model(spec, dtype, dev)
    counted = mt.count_ops(net, dev, dtype, plan["contexts"][0])
    elem_bw = mt.bench_elementwise(dev, dtype, min_time=plan["min_time"])
    elem_s = counted["elementwise_bytes_per_seq"] / elem_bw  # seconds of elementwise work per sequence
    preset_d = am.preset_from_microbenchmarks(f"{system.chip.name}-eager", system.chip.name, bench["fit"],
                                              bench["small"][0]["weight_bytes_per_s"], bench["bw"]["bytes_per_s"],
                                              counted["ops"], bench["dispatch"], bench["attn"]["kv_bytes_per_s"],
                                              elem_s)
    rows = []
    adv = stage(f"decode sweep ({spec.name})", len(points))
    for B, L in points:
        ts = mt.decode_steps(net, dev, dtype, B, L, plan["steps"], plan["warmup"])
        # best of the timed steps, as for the micro-benchmarks (on a quiet machine ≈ the median)
        rows.append({"batch": B, "context": L, "measured_s": min(ts), "median_s": _median(ts), "max_s": max(ts)})
        adv()
    del net
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    B = np.array([r["batch"] for r in rows], dtype=float)
    L = np.array([r["context"] for r in rows], dtype=float)
    ideal = roofline(spec, system, chips=1, batch=B, context=L, weights_dtype=dtype, kv_dtype=dtype)
    eta_kw = dict(eta_max=preset_d["eta_compute"], m_half=preset_d["gemm_half_tokens"], eta_memory=preset_d["eta_memory"],
                  eta_kv=preset_d["eta_kv"], elementwise_s_per_seq=preset_d["elementwise_s_per_seq"])
    # an MoE dispatches more operators as the batch hits more experts (the preset keeps the batch-1 count)
    overhead = bench["dispatch"] * am.ops_per_step(spec, B, counted["ops"], counted["ops_at_batch"], counted["batch"])
    cal = am.calibrated_times(spec, system, B, L, dtype, overhead_s=overhead, **eta_kw)
    for i, r in enumerate(rows):
        r.update(roofline_s=float(ideal.step_s[i]), t_compute_s=float(ideal.t_compute_s[i]),
                 t_weights_s=float(ideal.t_weights_s[i]), t_kv_s=float(ideal.t_kv_s[i]), bound=str(ideal.bound[i]),
                 calibrated_s=float(cal["step_s"][i]), error_ideal=float(ideal.step_s[i] / r["measured_s"] - 1),
                 error_calibrated=float(cal["step_s"][i] / r["measured_s"] - 1))
    return {"rows": rows, "preset": preset_d, "counted": counted, "elem_bw": elem_bw}


def _knees(rows: list, contexts, spec, system, dtype) -> list:
    """Per context with at least 4 batches: the measured knee (``analyses.fitting.measure.measured_knee``), the
    roofline's and the calibrated curve's (the same estimator as the measurement, same batches)."""
    knees = []
    for c in contexts:
        sel = [r for r in rows if r["context"] == c]
        if len(sel) < 4:
            continue
        mk = am.measured_knee([r["batch"] for r in sel], [r["measured_s"] for r in sel])
        pk = am.predicted_knee(spec, system, c, dtype)
        pk_cal = am.measured_knee([r["batch"] for r in sel], [r["calibrated_s"] for r in sel])["knee"]
        pk_cal = math.inf if pk_cal is None else pk_cal
        knees.append({"context": c, "measured": mk["knee"], "predicted": None if not np.isfinite(pk) else pk,
                      "predicted_calibrated": None if not np.isfinite(pk_cal) else pk_cal,
                      "t0_s": mk["t0_s"], "slope_s": mk["slope_s"]})
    return knees


def save(result: dict, directory, *, force: bool = False) -> list:
    """Write ``<chip>.toml`` (chip, system, scaled model, preset) and ``<chip>-records.toml`` into ``directory``.

    Never overwrites an existing file unless ``force``. Returns the paths written.
    """
    from pathlib import Path

    d = Path(directory)
    if d.exists() and not d.is_dir():
        raise InputError("save", f"{d} exists and is not a directory", "a directory (created when missing)")
    system, spec = result["_system"], result["_spec"]
    cat = d / f"{system.chip.name}.toml"
    rec = d / f"{system.chip.name}-records.toml"
    for p in (cat, rec):
        if p.exists() and not force:
            raise InputError("save", f"{p} exists and would be overwritten", "another --save DIR, or --force")
    d.mkdir(parents=True, exist_ok=True)
    head = (f"Written by {result['how']}.\nUse with: rackmath --catalog {d} hardware show {system.chip.name}\n"
            f"           rackmath --catalog {d} validate --records {d} --only-records")
    cat.write_text(am.catalog_toml(system, spec, result["preset"], head))
    recs = am.step_records(result["sweep"], model=spec.name, hardware=system.name, dtype=result["dtype"],
                           source=result["how"], source_group=f"measure-{system.chip.name}",
                           assumptions=("random weights; KV cache of exactly `context` tokens filled with a constant, new tokens "
                                        "written as a ring buffer (no prefill); "
                                        "best of the timed decode steps; eager PyTorch, no CUDA graphs; "
                                        f"model scaled from {result['model']['source']}"),
                           id_prefix=system.chip.name, date=result.get("date"))
    rec.write_text(am.records_toml(recs, head))
    return [cat, rec]


# --------------------------------------------------------------------------------------------- measure --curves


def chip_of_device(device_name: str, dev_type: str = "cuda") -> str:
    """The catalog chip a device's curves belong to: the chip whose kernel curves were measured on a device of the
    same name (e.g. "NVIDIA H100 80GB HBM3" → h100), else ``measured-<device name>``."""
    for path in sorted(kernels.DIR.glob("*.toml")):
        t = kernels.kernel_table(path.stem)
        if t is not None and t["meta"].get("device") == device_name:
            return path.stem
    return "measured-" + ("cpu" if dev_type == "cpu" else
                          "".join(c if c.isalnum() else "-" for c in device_name.lower()).strip("-"))


def _silicon_numbers(chip_name: str, table: dict | None) -> dict | None:
    """τ, η_m, the KV rates η_m,kv / η_m,mla, and η_c and M½ per GEMM dtype of a catalog chip from ``table`` (None:
    the chip's own curves), or None (no catalog chip of that name, or the curves lack what the silicon needs)."""
    try:
        chip = load_chip(chip_name)
        sil = kernels.silicon(chip, table)
    except RackmathError:
        return None
    if not sil:
        return None
    out = {k: sil[k]["value"] for k in ("kernel_latency_s", "eta_memory", "eta_memory_kv", "eta_memory_mla")
           if k in sil}
    for dt, v in sil.get("by_dtype", {}).items():  # η_c and M½ per GEMM dtype: compared dtype by dtype
        out[f"eta_compute_{dt}"], out[f"gemm_half_tokens_{dt}"] = v["eta_compute"], v["gemm_half_tokens"]
    return out


def curves_path(directory, chip: str | None, force: bool = False):
    """``DIR/kernels/<chip>.toml``, checked: DIR a directory (or to be created), the file not there unless
    ``force`` (``chip`` None: only DIR is checked, before the chip is known)."""
    from pathlib import Path

    d = Path(directory)
    if d.exists() and not d.is_dir():
        raise InputError("save", f"{d} exists and is not a directory", "a directory (created when missing)")
    if chip is None:
        return None
    p = d / "kernels" / f"{chip}.toml"
    if p.exists() and not force:
        raise InputError("save", f"{p} exists and would be overwritten", "another --save DIR, or --force")
    return p


def measure_curves(*, device: str = "auto", quick: bool = False, name: str | None = None, progress=None,
                   save=None, force: bool = False) -> dict:
    """``rackmath measure --curves``: this GPU's kernel curves (``measure_curves``) in the format of
    ``specs/data/kernels/<chip>.toml``, each measured curve beside the chip's current curve of the same shape
    (:func:`analyses.fitting.measure.compare_curves`: the ratio measured / current per point), and the silicon numbers
    (τ, η_m, and η_c and M½ per GEMM dtype: ``specs.kernels.silicon``) derived from each."""
    check_name(name)
    t_start = time.perf_counter()
    dev, info = _open_device(_torch(), device, None)  # _torch: the one-line error when torch is missing
    from . import measure_curves as mc

    chip = name or chip_of_device(info["name"], dev.type)
    if save is not None:  # before the run: the file it would write must not exist
        curves_path(save, chip, force)
    when = time.strftime("%Y-%m-%d", time.gmtime())
    how = (f"rackmath measure --curves{' --quick' if quick else ''} on {info['name']} ({dev.type}, torch "
           f"{info['torch']}), {when}")
    curves = mc.measure_curves(dev, quick=quick, progress=progress)
    meta = {"chip": chip, "package": "rackmath", "package_version": sys.modules["rackmath"].__version__,
            "license": "own measurement", "system": f"measure --curves ({dev.type})", "device": info["name"],
            "source": how, "date": when}
    mine = {"meta": meta, "curves": curves, "shipped": False, "file": "this run"}
    current = kernels.kernel_table(chip)
    return {"chip": chip, "device": info, "how": how, "date": when, "quick": bool(quick), "curves": curves,
            "meta": meta, "reference": None if current is None else current["file"],
            "comparison": am.compare_curves(curves, current["curves"]) if current else [],
            "silicon": {"measured": _silicon_numbers(chip, mine),
                        "reference": _silicon_numbers(chip, None) if current is not None else None},
            "seconds": time.perf_counter() - t_start}


def save_curves(result: dict, directory, *, force: bool = False) -> list:
    """Write ``DIR/kernels/<chip>.toml`` (never over an existing file unless ``force``): with ``--catalog DIR`` the
    chip's ``--efficiency measured`` silicon then comes from these curves (``specs.kernels.kernel_table``)."""
    p = curves_path(directory, result["chip"], force)
    d = p.parent.parent
    comments = [f"Kernel curves of {result['chip']} measured by {result['how']}.",
                "Format: specs/data/kernels/ (docs/measure.md). Keys starting with \"_\" are not catalog kinds.",
                f"Use with: rackmath --catalog {d} hardware show {result['chip']}   (and --efficiency measured)"]
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(am.curves_toml(result["meta"], result["curves"], comments))
    return [p]
