"""Efficiency presets: the few physical numbers by which a real stack falls short of the ideal roofline.

The lecture's roofline (00:00) is the ideal: every kernel at peak FLOP/s or peak HBM
bandwidth, no fixed costs, everything overlapped. The step model (``engine/step.py``)
costs each kernel as ``latency + max(FLOPs / (peak · η_c(M)), bytes / (BW · η_m))`` and a
preset says, with physical meaning:

* ``eta_compute`` η_c — achieved share of peak FLOP/s by a large GEMM;
* ``gemm_half_tokens`` M½ — the GEMM's row count (tokens) at which it reaches half of that:
  η_c(M) = η_c · M / (M + M½) (small-M GEMMs run far below peak: tensor-core tiles are 64–128
  rows, so a GEMM of a few tokens pays for a whole tile; the grouped MoE GEMM of an expert that
  receives few tokens pays the same);
* ``eta_memory`` η_m — achieved share of HBM bandwidth;
* ``eta_comm`` — achieved share of scale-up / scale-out bandwidth in collectives;
* ``kernel_latency_s`` — launch + tail of one kernel (CUDA/HIP graphs included);
* ``mla_kernel_scale`` — kernels an MLA attention block runs relative to the CUDA stacks' count
  (``step.KERNELS``: 11 absorbed projections + 2 decode attention, FlashMLA-class): 1 on NVIDIA by
  construction, fitted for AMD, whose ROCm MLA path (Triton / aiter decode attention, unfused RoPE,
  concatenations and BMMs) runs more and slower kernels per layer;
* ``collective_latency_s`` — fixed cost of one collective (all-reduce, one all-to-all direction);
* ``step_overhead_s`` — per-step host time of this chip family; ``sched_<stack>_s`` — the per-step scheduler
  time of each serving stack (TensorRT-LLM, vLLM, SGLang, and vLLM's V0 engine), the same on every chip; a step pays
  both; the generic stack (no ``--framework``, or another stack) pays the mean of TensorRT-LLM's, vLLM's and SGLang's;
* ``seq_<stack>_s`` — host time per sequence per step of each stack (request bookkeeping, block tables,
  sampling parameters, output processing): a step of n sequences on one scheduler pays n · τ_seq;
* ``eager_<stack>_s`` — host dispatch time per kernel of a step that is not graph-captured (prefill and
  mixed prefill+decode steps run eagerly in SGLang and vLLM; CUDA graphs hold decode batches only): such a
  step takes max(GPU time, n_kernels · τ_eager), an MLA block counting 1.5 × its graph kernels
  (``step.MLA_EAGER_KERNEL_SCALE``: its FP8 input quantisations and a prompt's un-absorbed path);
* ``request_<stack>_s`` — per-request host time before the first token of each stack (HTTP, tokenisation,
  admission, the first scheduling), on top of ``request_overhead_s`` (a time every stack pays, 0 in the fitted
  presets); vLLM's V0 engine pays vLLM's (one source alone measures it); the generic stack the mean of the three;
* ``composition`` — ``serial`` (kernels one after another, as TensorRT-LLM, vLLM and SGLang run a
  step) or ``overlap`` (the lecture's max(compute, memory, network)).

The ideal roofline is the special case: η = 1, zero latencies, M½ = 0, overlapped.

Presets are data (``[[efficiency]]`` tables, ``specs/data/efficiency/``), each with its
chips, regime, composition, family, error band and source; a user's table of the same name
replaces a shipped one whole. :data:`FIT_PARAMS` is the parameter vector calibration fits
(``analyses/fitting/calibration.py`` reads it): which fields, their bounds, and which are shared by
every hardware family (physics that is the same everywhere) or fitted per family.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from ..errors import CatalogError, InputError
from ..specs.catalog import Index, build_index, register_cache
from ..specs.schema import register_dataclass
from ..specs.hardware import load_hardware
from ..specs.kernels import silicon, transferred
from ..specs.stacks import heldout, host_times

COMPOSITIONS = ("serial", "overlap")

#: Numeric fields of a preset, their bounds (lo, hi) and their ideal value.
NUMERIC = {
    "eta_compute": (0.0, 1.0, 1.0),
    "eta_memory": (0.0, 1.0, 1.0),
    "eta_memory_moe": (0.0, 1.0, 0.0),
    "eta_memory_kv": (0.0, 1.0, 0.0),
    "eta_memory_mla": (0.0, 1.0, 0.0),
    "eta_comm": (0.0, 1.0, 1.0),
    "step_overhead_s": (0.0, 10.0, 0.0),
    "gemm_half_tokens": (0.0, 1e5, 0.0),
    "kernel_latency_s": (0.0, 1e-2, 0.0),
    "collective_latency_s": (0.0, 1e-1, 0.0),
    "allreduce_latency_s": (0.0, 1e-1, 0.0),
    "scaleout_latency_s": (0.0, 1e-1, 0.0),
    "request_overhead_s": (0.0, 10.0, 0.0),
    "sched_trtllm_s": (0.0, 1.0, 0.0),
    "sched_vllm_s": (0.0, 1.0, 0.0),
    "sched_sglang_s": (0.0, 1.0, 0.0),
    "seq_trtllm_s": (0.0, 1e-3, 0.0),
    "seq_vllm_s": (0.0, 1e-3, 0.0),
    "seq_sglang_s": (0.0, 1e-3, 0.0),
    "eager_trtllm_s": (0.0, 1e-3, 0.0),
    "eager_vllm_s": (0.0, 1e-3, 0.0),
    "eager_sglang_s": (0.0, 1e-3, 0.0),
    "sched_vllm_v0_s": (0.0, 1.0, 0.0),
    "seq_vllm_v0_s": (0.0, 1e-3, 0.0),
    "eager_vllm_v0_s": (0.0, 1e-3, 0.0),
    "request_trtllm_s": (0.0, 10.0, 0.0),
    "request_vllm_s": (0.0, 10.0, 0.0),
    "request_sglang_s": (0.0, 10.0, 0.0),
    "warm_trtllm_s": (0.0, 60.0, 0.0),
    "warm_vllm_s": (0.0, 60.0, 0.0),
    "warm_sglang_s": (0.0, 60.0, 0.0),
    "mla_kernel_scale": (0.0, 50.0, 1.0),
    "eta_prefill": (0.0, 2.0, 1.0),
    "eta_wave": (0.0, 2.0, 1.0),
}

#: The fit's loss is |log(predicted/measured)| up to this cap (≈ ±50%), nearly flat beyond it
#: (calibration._logerr): records no parameter vector can describe do not drag the others.
FIT_ROBUST_CAP = 0.4

#: Serving stacks with their own fitted host times (``sched_<stack>_s``, ``seq_<stack>_s``, ``eager_<stack>_s``);
#: others use generic. vLLM's V0 engine (≤ 0.10: a synchronous Python scheduler, sampler and output processor on
#: every step) has its own: the V1 re-architecture was made to cut exactly this host time.
STACK_NAMES = ("trtllm", "vllm", "sglang", "vllm_v0")
#: The stacks whose host times the generic stack (no --framework) averages: today's three.
GENERIC_STACKS = ("trtllm", "vllm", "sglang")
#: Stack presets whose fitted host times carry another name (``--framework vllm-v0`` → the ``vllm_v0`` fields).
STACK_HOST_OF = {"vllm-v0": "vllm_v0"}


def _per_stack(eff, field: str, stack: str, host_of=STACK_HOST_OF, stacks=STACK_NAMES):
    """``<field>_<stack>_s`` of a preset, ``stack`` renamed by ``host_of``; a stack without fields of its own among
    ``stacks`` (and the generic stack, no --framework) takes the mean of TensorRT-LLM's, vLLM's and SGLang's."""
    stack = host_of.get(stack, stack)
    if stack in stacks:
        return getattr(eff, f"{field}_{stack}_s")
    return sum(getattr(eff, f"{field}_{st}_s") for st in GENERIC_STACKS) / len(GENERIC_STACKS)


def stack_sched_s(eff, stack: str):
    """Per-step scheduler time of a stack (``sched_<stack>_s``)."""
    return _per_stack(eff, "sched", stack)


def stack_seq_s(eff, stack: str):
    """Host time per sequence per step of a stack (``seq_<stack>_s``): the scheduler's per-request work each
    step (batch bookkeeping, KV block tables, sampling parameters, output processing)."""
    return _per_stack(eff, "seq", stack)


def stack_eager_s(eff, stack: str):
    """Host time to dispatch one kernel of an eager (not graph-captured) step of a stack (``eager_<stack>_s``)."""
    return _per_stack(eff, "eager", stack)


def stack_request_s(eff, stack: str):
    """Host time per request before its first token: t_request = t_req,all + t_req(stack).

    ``request_overhead_s`` is paid by every stack (0 in the fitted presets; a user's preset may set one number);
    ``request_<stack>_s`` is the stack's own front end (HTTP server, tokeniser, admission, first scheduling): TensorRT-LLM,
    vLLM and SGLang each have theirs, vLLM's V0 engine pays vLLM's (only one source measures a V0 run's TTFT, and a
    parameter one source alone identifies is a per-source constant: docs/validation.md), and the generic stack the
    mean of the three.
    """
    return eff.request_overhead_s + _per_stack(eff, "request", stack, host_of={"vllm-v0": "vllm", "vllm_v0": "vllm"},
                                               stacks=GENERIC_STACKS)


def stack_warm_s(eff, stack: str):
    """Warm-up of a stack paid once by a closed-loop client's first wave, t_warm(stack) (``warm_<stack>_s``;
    :func:`rackmath.analyses.serving.schedule.closed_loop_ttft`): kernels compiled and graphs captured the first time
    a batch of that size runs. vLLM's V0 engine pays vLLM's, the generic stack the mean of the three."""
    return _per_stack(eff, "warm", stack, host_of={"vllm-v0": "vllm", "vllm_v0": "vllm"}, stacks=GENERIC_STACKS)


def host_step_s(eff, stack: str, seqs_per_scheduler):
    """Host time of one step: t_host = t_sched(stack) + n_seq · τ_seq(stack).

    ``n_seq`` is the number of sequences one scheduler process handles in the step (the whole
    micro-batch; under attention DP each rank's scheduler handles its own share). A stack that
    overlaps scheduling with the GPU (SGLang, TensorRT-LLM) shows only the part above the GPU
    time (engine/step.compose). Per-request host work per step is the CPU cost reported by
    vLLM's V1 re-architecture notes and SGLang's overlap-scheduler write-up (LMSYS, 2024-12).
    """
    import numpy as np

    return stack_sched_s(eff, stack) + stack_seq_s(eff, stack) * np.asarray(seqs_per_scheduler, dtype=float)


@dataclass(frozen=True)
class Efficiency:
    """A preset. Numeric fields may be numpy arrays (K candidate presets evaluated at once)."""

    name: str = "ideal"
    eta_compute: float = 1.0
    eta_memory: float = 1.0
    eta_comm: float = 1.0
    step_overhead_s: float = 0.0
    gemm_half_tokens: float = 0.0
    kernel_latency_s: float = 0.0
    mla_kernel_scale: float = 1.0  # MLA blocks' kernels relative to the CUDA stacks' count (AMD's ROCm path: more)
    collective_latency_s: float = 0.0
    scaleout_latency_s: float = 0.0  # extra fixed time of a collective that leaves the scale-up domain (a preset
    # may set it; not in FIT_PARAMS: fitted, it made leave-one-source-out worse, 23.3 % vs 22.8 %, docs/history.md)
    request_overhead_s: float = 0.0  # per-request host time every stack pays (stack_request_s adds the stack's own)
    request_trtllm_s: float = 0.0  # per-request host time before the first token of each stack (shared by every chip)
    request_vllm_s: float = 0.0
    request_sglang_s: float = 0.0
    sched_trtllm_s: float = 0.0  # per-step host scheduler time of each serving stack (shared by every chip)
    sched_vllm_s: float = 0.0
    sched_sglang_s: float = 0.0
    seq_trtllm_s: float = 0.0  # per-sequence host time per step of each serving stack (shared by every chip)
    seq_vllm_s: float = 0.0
    seq_sglang_s: float = 0.0
    eager_trtllm_s: float = 0.0  # host dispatch time per kernel of an eager (prefill / mixed) step, per stack
    eager_vllm_s: float = 0.0
    eager_sglang_s: float = 0.0
    sched_vllm_v0_s: float = 0.0  # vLLM's V0 engine (--framework vllm-v0): its own host times
    seq_vllm_v0_s: float = 0.0
    eager_vllm_v0_s: float = 0.0
    #: η_m of the routed experts' weight reads (a grouped GEMM streaming the experts it hits), from a chip's measured
    #: MoE curves (specs/kernels.moe_memory_efficiency); 0: η_m (every preset fitted on records)
    eta_memory_moe: float = 0.0
    #: η_m of a decode step's KV-cache reads, GQA / MHA caches and MLA latent caches, from a chip's measured decode
    #: attention curves (specs/kernels.kv_memory_efficiency); 0: η_m (every preset fitted on records)
    eta_memory_kv: float = 0.0
    eta_memory_mla: float = 0.0
    #: fixed time of one TP all-reduce inside the scale-up domain: the stacks' one-shot custom all-reduce in a CUDA
    #: graph, from a chip's measured curves (specs/kernels.silicon); 0: τ_c (every preset fitted on records)
    allreduce_latency_s: float = 0.0
    #: warm-up of each stack, paid once by a closed-loop client's first wave (schedule.closed_loop_ttft): a stack
    #: version's (specs/data/launch/stack_hosts.toml, --efficiency measured); 0 in every fitted preset
    warm_trtllm_s: float = 0.0
    warm_vllm_s: float = 0.0
    warm_sglang_s: float = 0.0
    #: a skewed router's share of uniform routing's distinct experts per model expert shape, from a chip's measured
    #: MoE tables (specs/kernels.routing_curves: ((hidden, inter, experts, top-k), tokens, s(T), source), …);
    #: (): uniform routing (every preset, and measured unless specs.kernels.MEASURED_ROUTING)
    moe_routing: tuple = ()
    #: the routed experts' compute law per compute dtype and expert shape, from a chip's measured MoE tables
    #: (specs/kernels.moe_compute_law: ((dtype, hidden, inter, η_c,moe, M½,moe, source), …)), applied to a prompt
    #: pass's experts (engine/layout.py); (): the dense GEMM law η_c(M) (every preset)
    moe_compute: tuple = ()
    #: the routed experts' streaming rate per weight format, from a chip's measured MoE tables (specs/kernels.silicon:
    #: ((format, η_m,moe, source), …), the fastest curve of each format); (): η_m,moe for every format (every preset)
    moe_stream: tuple = ()
    #: a TP all-reduce's time at its message size, per group size measured, from a chip's custom all-reduce curves
    #: (specs/kernels.allreduce_curves: ((GPUs, bytes, times, source), …)); (): α_AR + the ring's bandwidth term
    #: (every preset)
    allreduce_curves: tuple = ()
    #: the stack's prefill speed relative to the silicon's kernel curves, η_pf (serving.steps.prefill_speed_step:
    #: a step's prompt tokens take (t − t_decode) / η_pf): a stack version's (stack_hosts.toml, --efficiency
    #: measured); 1 in every preset
    eta_prefill: float = 1.0
    #: the speed of a closed-loop client's first wave's prefill passes relative to the steady state's, η_wave
    #: (serving.schedule.first_wave_pass: each pass takes t_pass / η_wave — the first passes of a new batch shape
    #: run cold): a stack version's (stack_hosts.toml, --efficiency measured); 1 in every preset
    eta_wave: float = 1.0
    composition: str = "serial"
    description: str = "the lecture's ideal roofline: peak FLOP/s and bandwidth, no fixed costs"
    source: str = "lecture 00:00 (roofline)"
    aliases: tuple = field(default=(), compare=False)
    chips: tuple = field(default=(), compare=False)
    regime: str = "serving"
    family: str = ""
    error_band: float | None = None  # typical |error| out of sample (fraction), None = not validated
    cross_family: bool = False  # fitted on every family together (for chips without their own)
    #: (field, "value from curve …") of the silicon numbers taken from measured kernel curves (--efficiency measured)
    silicon_from: tuple = field(default=(), compare=False)
    per_version: bool = False  # the stack's host times are its version's (specs/data/launch/stack_hosts.toml)
    note: str = field(default="", compare=False)  # a line serve prints with its notes

    @property
    def ideal(self) -> bool:
        return self.name == "ideal"

    def label(self) -> str:
        """What the header prints: ideal bound or calibrated prediction with its error band."""
        if self.ideal:
            return "ideal roofline — a lower bound on time"
        if str(self.name).startswith("measured-"):  # issue 34: the silicon as measured_efficiency took it
            band = (f"its runs' error with each run's group left out ±{self.error_band * 100:.0f}%" if self.error_band
                    else "out-of-sample errors by stack version and chip: docs/stacks.md")
            return (f"calibrated prediction, {self.name}: {self._silicon_said()}, the stack version's fitted host "
                    f"times ({band})")
        band = f"validated error ±{self.error_band * 100:.0f}%" if self.error_band else "not validated"
        what = "cross-family preset (no preset fitted on this chip's family)" if self.cross_family else "preset"
        return f"calibrated prediction, {what} {self.name} ({band})"

    def _silicon_said(self) -> str:
        """Where a ``measured-CHIP`` efficiency's silicon came from (its ``silicon_from``): measured curves, numbers
        transferred from the chips with curves (``specs.kernels.transferred``: a ``transferred:`` source), inferred
        from serving records, or its preset's."""
        src = dict(getattr(self, "silicon_from", ()) or ())
        if any(str(v).startswith("transferred:") for v in src.values()):
            return "the silicon the chips with measured curves share, transferred (no curves or records of its own)"
        if "eta_memory" in src:  # curves (MI355X's leave its GEMM compute law to the preset)
            return "silicon from measured kernel curves" + ("" if "eta_compute" in src else
                                                            ", its GEMM compute law its preset's")
        if src:
            return "τ_k and the MLA kernel scale inferred from serving records, the rest of the silicon its preset's"
        return "the silicon of its fitted preset (no kernel curves for this chip)"


register_dataclass("efficiency", Efficiency)


IDEAL = Efficiency(composition="overlap")

#: η_m measured on silicon, the prior of the fit (``calibration.Param.prior``): the line t = τ + B/(BW·η_m) through
#: M = 1 decode GEMMs of 0.26–537 MB on one H200 (``benchmarks/gpu_kernels.py``, rows in
#: ``benchmarks/data/h200-kernels.json``, fitted by ``benchmarks/fit_kernels.py``; docs/validation.md). Hopper only:
#: no other family has been measured. Without it the Hopper η_m of a fold swung from 0.95 to 0.68 when one source
#: (the vLLM FP8-KV blog's single-GPU runs) was left out.
MEASURED_ETA_MEMORY = {"hopper": 0.85}

#: The parameter vector calibration fits: name (an Efficiency field), bounds, start, initial grid
#: half-width, shared by every hardware family (False) or fitted per family (True), grid decimals.
#: Per family: what differs between chips and their stacks (GEMM/HBM efficiency, kernel launch and
#: host costs); shared: what is the same physics everywhere (tile-size GEMM ramp, collective
#: latency and network efficiency). ``families`` restricts a per-family parameter to the families named
#: (the others hold ``x0``): the MLA kernel scale is 1 on NVIDIA by construction of the kernel counts. Fitted for
#: every family, leave one source out went from 14.6 % to 17.2 % (the NVIDIA sources that identified it were the
#: ones held out); for AMD only, to 14.3 %, 180 → 191 records within 2× (docs/history.md).
FIT_PARAMS = (
    dict(name="eta_compute", lo=0.05, hi=1.0, x0=0.6, width=0.4, per_family=True, decimals=4,
         description="achieved share of peak FLOP/s by a large GEMM"),
    dict(name="eta_memory", lo=0.05, hi=1.0, x0=0.7, width=0.4, per_family=True, decimals=4,
         description="achieved share of HBM bandwidth",
         prior=MEASURED_ETA_MEMORY, prior_sigma=0.1, prior_weight=2.0),
    dict(name="kernel_latency_s", lo=1e-6, hi=2e-5, x0=6e-6, width=8e-6, per_family=True, decimals=8,
         description="shortest time of one decode-size kernel in a captured graph: launch gap + ramp + tail (s), "
                     "physically 1–20 µs"),
    dict(name="mla_kernel_scale", lo=0.5, hi=8.0, x0=1.0, width=2.0, per_family=True, families=("amd",),
         decimals=3, description="kernels of an MLA attention block relative to the CUDA stacks' 13 (fitted for AMD "
                                 "only: the counts are the CUDA paths', so NVIDIA holds 1)"),
    dict(name="gemm_half_tokens", lo=0.0, hi=512.0, x0=32.0, width=128.0, per_family=False, decimals=1,
         description="GEMM rows (tokens) at which a GEMM reaches half its large-M efficiency"),
    dict(name="eta_comm", lo=0.05, hi=1.0, x0=0.6, width=0.4, per_family=False, decimals=4,
         description="achieved share of network bandwidth in collectives"),
    dict(name="collective_latency_s", lo=0.0, hi=1e-4, x0=1e-5, width=4e-5, per_family=False, decimals=8,
         description="fixed cost of one collective (s)"),
) + tuple(dict(name=f"request_{st}_s", lo=0.0, hi=0.3, x0=0.03, width=0.12, per_family=False, decimals=5,
               description=f"per-request host time before the first token of the {st} stack (s)")
        for st in GENERIC_STACKS) + tuple(dict(name=f"sched_{st}_s", lo=0.0, hi=0.005, x0=0.002, width=0.002, per_family=False, decimals=6,
               description=f"per-step scheduler time of the {st} serving stack (s), physically 0–5 ms")
        for st in STACK_NAMES) + tuple(
    dict(name=f"seq_{st}_s", lo=0.0, hi=1e-4, x0=1e-5, width=4e-5, per_family=False, decimals=7,
         description=f"host time per sequence per step of the {st} serving stack (s), physically 0–100 µs")
    for st in STACK_NAMES) + tuple(
    dict(name=f"eager_{st}_s", lo=0.0, hi=1e-4, x0=1e-5, width=4e-5, per_family=False, decimals=7,
         description=f"host dispatch time per kernel of an eager prefill / mixed step of the {st} stack (s), "
                     "physically 0–100 µs")
    for st in STACK_NAMES)


#: Extra starting points of the fit (``calibration.ParamSpec.starts``): each fit, and each cross-validation fold,
#: descends from the declared ``x0`` and from these, and keeps the lowest training objective. The host-time
#: parameters couple (a scheduler time, a per-sequence time and an eager dispatch time can trade places), and a
#: descent from an eager dispatch of 10 µs stops before it reaches the basin where eager prefill steps cost
#: 75–80 µs a kernel — the in-sample mean |log error| is 0.282 there against 0.296 (docs/history.md, 2026-11-26;
#: docs/validation.md at d4025b8).
FIT_STARTS = ({f"eager_{st}_s": 7.5e-5 for st in STACK_NAMES},)


#: The η fields for which 0 means "the preset's η_m" (a preset fitted on records has no measured rate of its own).
ZERO_MEANS_ETA_M = ("eta_memory_moe", "eta_memory_kv", "eta_memory_mla")


def _num(d, k, path, name):
    lo, hi, ideal = NUMERIC[k]
    v = d.get(k, ideal)
    try:
        v = float(v)
    except (TypeError, ValueError):
        raise CatalogError(path, f"efficiency.{k}", f"{name!r}: {v!r} is not a number") from None
    eta = k.startswith("eta_")  # a share of a peak: up to 1 included
    open_lo = eta and k not in ZERO_MEANS_ETA_M  # and above 0 (η_m,moe, η_m,kv, η_m,mla: 0 means "η_m")
    ok = (lo < v if open_lo else lo <= v) and (v <= hi if eta else v < hi)
    if not ok:  # also rejects NaN
        rng = ("(" if open_lo else "[") + f"{lo:g}, {hi:g}" + ("]" if eta else ")")
        raise CatalogError(path, f"efficiency.{k}", f"{v} outside {rng}")
    return v


def _parse(e) -> Efficiency:
    d = e.data
    path = str(e.path)
    if "name" not in d:
        raise CatalogError(path, "efficiency.name", "missing")
    name = str(d["name"])
    comp = str(d.get("composition", "serial"))
    if comp not in COMPOSITIONS:
        raise CatalogError(path, "efficiency.composition", f"{comp!r} (accepted: serial, overlap)")
    band = d.get("error_band")
    if band is not None:
        try:
            band = float(band)
        except (TypeError, ValueError):
            raise CatalogError(path, "efficiency.error_band", f"{band!r} is not a number") from None
        if not 0 < band < 10:
            raise CatalogError(path, "efficiency.error_band", f"{band} outside (0, 10)")
    for k in ("chips", "aliases"):
        v = d.get(k, ())
        if not isinstance(v, (list, tuple)) or not all(isinstance(x, str) for x in v):
            raise CatalogError(path, f"efficiency.{k}", "expected a list of names")
    return Efficiency(
        name=name, **{k: _num(d, k, path, name) for k in NUMERIC}, composition=comp,
        description=str(d.get("description", "")), source=str(d.get("source", "")),
        aliases=tuple(str(a) for a in d.get("aliases", ())), chips=tuple(str(c).lower() for c in d.get("chips", ())),
        regime=str(d.get("regime", "serving")), family=str(d.get("family", "")), error_band=band,
        cross_family=bool(d.get("cross_family", False)))


@register_cache
@lru_cache(maxsize=1)
def presets() -> Index:
    idx = Index("efficiency", "ideal, auto, preset, measured or a calibrated preset such as hopper-serving, "
                              "cross-family-serving (rackmath validate lists them; docs/serving.md)")
    idx.add(IDEAL, "ideal")
    return build_index("efficiency", "efficiency", "", _parse, idx)


def load_efficiency(eff=None) -> Efficiency:
    """None -> the ideal roofline; a name -> a catalog preset (``measured-CHIP``: :func:`measured_efficiency`); an
    Efficiency -> itself."""
    if eff is None:
        return IDEAL
    if isinstance(eff, Efficiency):
        return eff
    if isinstance(eff, str):
        if eff.startswith("measured-") and eff not in presets().names():  # --efficiency measured on one chip

            hw = load_hardware(eff[len("measured-"):])
            return measured_efficiency(getattr(hw, "chip", hw))
        return presets().get(eff)
    raise InputError("efficiency", f"cannot use {eff!r}", "None, a preset name or an Efficiency")


def default_efficiency(chip_name: str, regime: str = "serving") -> Efficiency:
    """The calibrated preset for a chip: the one naming it (``chips = [...]``), preferring ``regime``;
    otherwise the cross-family preset (fitted on every family; its header says so, with its wider
    error band). No chip silently runs ideal; only a catalog without any cross-family preset
    falls back to the ideal roofline."""
    chip = str(chip_name).lower()
    found, cross = {}, None
    for eff in presets().values():
        if chip in eff.chips:
            found.setdefault(eff.regime, eff)
        if eff.cross_family and cross is None:
            cross = eff
    for r in (regime, "serving"):
        if r in found:
            return found[r]
    return cross or IDEAL


#: The Efficiency fields :func:`measured_efficiency` takes from a chip's measured kernel curves (specs/kernels.silicon).
SILICON_FIELDS = ("kernel_latency_s", "eta_compute", "gemm_half_tokens", "eta_memory", "eta_memory_moe",
                  "eta_memory_kv", "eta_memory_mla",
                  "collective_latency_s", "allreduce_latency_s", "eta_comm", "mla_kernel_scale", "moe_routing",
                  "moe_compute", "moe_stream", "allreduce_curves")
#: The silicon fields that are tables, not numbers (a fit's candidate rows carry them unchanged).
SILICON_TABLES = ("moe_routing", "moe_compute", "moe_stream", "allreduce_curves")
#: The host-time fields of one stack version (``stack_hosts.toml``), each an ``<field>_<engine>_s`` of a preset.
VERSION_FIELDS = ("sched", "seq", "eager", "request", "warm")


def measured_efficiency(chip, regime: str = "serving") -> Efficiency:
    """``--efficiency measured``: the chip's silicon from its measured kernel curves, the stack from its version.

    τ, η_c, M½, η_m, η_m,moe, η_m,kv, η_m,mla, α_coll, α_AR, η_comm and the routing shares s(T) come from
    :func:`rackmath.specs.kernels.silicon` (each with the curve, table and package version it was read from:
    ``silicon_from``; a number the chip's curve file says its curves do not set stays the preset's: MI355X's GEMM
    compute law); the other numbers (MLA kernel scale, inferred from records on a measured AMD chip; scale-out
    latency) and
    the host times of a stack without fitted version times are the chip's calibrated preset's; each stack version's
    times (``sched``, ``seq``, ``eager``, ``request``, ``kernel``) are those fitted with this silicon fixed
    (``specs/data/launch/stack_hosts.toml``, applied by :func:`for_stack`). A chip without curves but with silicon
    inferred from its serving records (``specs.kernels.inferred``: τ_k and the MLA kernel scale) takes those two and
    its preset's other numbers, and ``note`` says they are inferred; a chip with neither keeps its family's fitted
    preset's silicon (TPU, MI300X) and ``note`` says so — or, where its family has no preset of its own (the
    cross-family one: Gaudi 3, Trainium 2, Rubin), takes the silicon the measured chips share
    (``specs.kernels.transferred``: the median τ_k, η_c, M½ and η_m of the chips with curves), as a hardware family
    out does for a chip with nothing of its family left (``analyses.fitting.stack.orphans``).
    """
    from dataclasses import replace

    base = default_efficiency(chip.name, regime)
    sil = silicon(chip) or {}
    transfer = not sil and base.cross_family  # no family preset of its own: the measured chips' silicon
    if transfer:
        sil = transferred()
    vals = {k: sil[k]["value"] for k in SILICON_FIELDS if k in sil}
    mine = dict(name=f"measured-{chip.name}", chips=(chip.name,), per_version=True,
                silicon_from=tuple((k, sil[k]["from"]) for k in SILICON_FIELDS if k in sil))
    if "by_dtype" in sil and not transfer:  # measured kernel curves
        kept = [k for k in ("eta_compute", "gemm_half_tokens") if k not in sil]
        also = f" ({', '.join(kept)} its preset {base.name}'s: its curve file says so)" if kept else ""
        return replace(base, **vals, **mine, error_band=None, cross_family=False, family=base.family,
                       description=f"silicon from measured kernel curves of {chip.name}{also}; stack host times per "
                                   f"version",
                       source="; ".join(sil[k]["from"] for k in SILICON_FIELDS if k in sil))
    if transfer:  # specs.kernels.transferred
        why = (f"--efficiency measured: no measured kernel curves for {chip.name} and no records of its family: "
               f"τ_k, η_c, M½ and η_m the median of the chips with measured curves (transferred, not measured; "
               f"MLA kernel scale 1), the other numbers the {base.name} preset's")
    elif sil:  # inferred from records, not measured (specs.kernels.inferred)
        why = (f"--efficiency measured: no measured kernel curves for {chip.name}: τ_k and the MLA kernel scale "
               f"inferred from its serving records, the other silicon numbers its fitted preset {base.name}'s")
    else:
        why = (f"--efficiency measured: no measured kernel curves for {chip.name}: the silicon of its fitted preset "
               f"{base.name} (fitted together with the stacks on the records), the stack version's own times")
    return replace(base, **vals, **mine, error_band=None, description=f"{base.description}; {why}", note=why)


def for_stack(eff: Efficiency, stack) -> Efficiency:
    """The efficiency a step of ``stack`` (an ``analyses.serving.serve.Stack``) runs with: under a per-version preset
    (``--efficiency measured``) the stack version's fitted host times replace its engine's, and its time per kernel
    τ_stack adds to the silicon's floor: τ_k = τ_silicon + τ_stack (launch gaps between a graph's kernels, work the
    version does not fuse), and its error band is the version's runs' median |error| with each run's group left out
    (``specs.stacks.heldout``); otherwise ``eff``. The result is no longer per-version, so applying it twice (plan's
    step table, then serve's evaluation of the same deployment) adds τ_stack once."""
    if not getattr(eff, "per_version", False) or not versioned(stack):
        return eff
    from dataclasses import replace

    h, engine = host_times(_label(stack)), _engine(stack)
    out = {f"{k}_{engine}_s": h[k] for k in VERSION_FIELDS
           if k in h and (k not in ("request", "warm") or engine in GENERIC_STACKS)}
    if "kernel" in h:  # the stack's own time per kernel on top of the silicon's floor τ
        out["kernel_latency_s"] = eff.kernel_latency_s + h["kernel"]
    if "prefill" in h:  # the version's prefill speed relative to the curves (serving.steps.prefill_speed_step)
        out["eta_prefill"] = h["prefill"]
    if "wave" in h:  # the version's first-wave speed relative to its steady passes (serving.schedule.first_wave_pass)
        out["eta_wave"] = h["wave"]
    band = heldout(_label(stack))
    if band:  # its runs' median |error| with each run's group left out (benchmarks/heldout_by_version.py)
        out["error_band"] = band["error"]
    return replace(eff, per_version=False, **out)


def versioned(stack) -> bool:
    """Whether ``--efficiency auto`` runs a deployment of ``stack`` (an ``analyses.serving.serve.Stack``, or None) on
    the measured path — measured silicon and the stack version's own fitted times (:func:`measured_efficiency`,
    :func:`for_stack`) — rather than the chip's calibrated preset: a version with fitted times
    (``specs/data/launch/stack_hosts.toml``: today's listed builds, fitted on the InferenceMAX runs).

    Why: the presets hold one set of host times per engine, fitted on published records of stacks a year apart, and
    put today's builds a third to a half too slow (InferenceMAX runs: 39 / 47% on tok/s/GPU and TPOT); a listed
    build's own times with the measured silicon are 9.2 / 11.9% off with its run's whole group left out
    (``benchmarks/stack_fit.py``; docs/stacks.md). Speculative decoding too: no InferenceMAX run speculated, but the
    speculative records are predicted as well on this path as on the presets (``C12``, ``C17``: docs/serving.md,
    "The default"), and one model for MTP on and off keeps their comparison honest."""
    return stack is not None and _engine(stack) in STACK_NAMES and bool(host_times(_label(stack)))


def _label(stack) -> str:
    """A stack's ``stack@version`` (its name where it names no version): the key of its fitted numbers."""
    return getattr(stack, "label", None) or getattr(stack, "name", "")


def _engine(stack) -> str:
    """The engine whose host-time fields a stack uses (:data:`STACK_HOST_OF`: ``vllm-v0`` → ``vllm_v0``)."""
    name = getattr(stack, "name", "")
    return STACK_HOST_OF.get(name, name)


def resolve(chip_name, efficiency=None, ideal: bool = False, regime: str = "serving",
            default: str = "auto", stack=None) -> Efficiency:
    """``--ideal`` / ``--efficiency PRESET|auto|preset|measured|ideal`` → an Efficiency: the one rule of every
    command, the Python API and the web app.

    * ``ideal`` → the ideal roofline; with ``efficiency`` it must be None or 'ideal' (the same thing, accepted):
      ``--ideal --efficiency auto`` or ``--ideal --efficiency PRESET`` is one error naming both options;
    * ``efficiency`` 'measured' → :func:`measured_efficiency` (``chip_name`` may then be a Chip, or a callable giving
      one, or a name);
    * ``efficiency`` 'auto' → for a deployment of a ``stack`` version with fitted times (:func:`versioned`)
      'measured', else 'preset'; 'preset' → the chip's calibrated preset (:func:`default_efficiency`); 'ideal' →
      the ideal, a name → that preset, an :class:`Efficiency` → itself;
    * neither → ``default``: 'auto' (serve, simulate, plan, compare) or 'ideal' (roofline, sweep, layout, batching).

    ``chip_name`` is read only for 'auto', 'preset' and 'measured' (a callable is called then: the caller's lazy
    hardware look-up).
    """
    choice = efficiency.strip() if isinstance(efficiency, str) else efficiency
    if isinstance(choice, str) and choice.lower() in ("ideal", "auto", "preset", "measured"):
        choice = choice.lower()
    if ideal:
        if choice is None or choice == "ideal" or (isinstance(choice, Efficiency) and choice.ideal):
            return IDEAL
        shown = choice.name if isinstance(choice, Efficiency) else choice
        raise InputError("ideal", f"--ideal and --efficiency {shown} contradict each other",
                         "--ideal (or --efficiency ideal) for the bound, or --efficiency PRESET|auto alone")
    if choice is None:
        choice = default
    if choice == "ideal":
        return IDEAL
    if choice == "auto":
        choice = "measured" if versioned(stack) else "preset"
    if choice == "measured":
        chip = chip_name() if callable(chip_name) else chip_name
        if isinstance(chip, str):
            chip = load_hardware(chip)
        return measured_efficiency(getattr(chip, "chip", chip), regime)
    if choice == "preset":
        chip = chip_name() if callable(chip_name) else chip_name
        return default_efficiency(getattr(chip, "name", chip), regime)
    return load_efficiency(choice)


def efficiency_for(hardware, efficiency=None, ideal: bool = False, default: str = "ideal") -> Efficiency:
    """:func:`resolve` for a hardware name or System/Chip (looked up only for 'auto'); ``default`` 'ideal' or
    'auto' is what neither flag means (the CLI's ``EFF_OPT`` / ``IDEAL_OPT`` pair)."""
    def chip_name():
        hw = load_hardware(hardware) if isinstance(hardware, str) else hardware
        return getattr(hw, "chip", hw)

    return resolve(chip_name, efficiency, ideal, default=default)


__all__ = ["Efficiency", "IDEAL", "FIT_PARAMS", "NUMERIC", "COMPOSITIONS", "presets", "load_efficiency",
           "default_efficiency", "resolve", "versioned", "measured_efficiency", "for_stack", "SILICON_FIELDS",
           "efficiency_for", "stack_sched_s", "stack_seq_s", "stack_eager_s", "stack_request_s", "stack_warm_s",
           "host_step_s"]
