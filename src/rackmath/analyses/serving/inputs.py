"""The typed inputs of ``serve``: what is served (:class:`Workload`), on which layout (:class:`Layout`), by which
serving stack (:class:`Stack`) — and the :class:`Plan` that fixes them before an efficiency is applied.

``serve(model, hardware, workload, layout=None, stack=None, efficiency=None)`` takes these objects
(``analyses/serving/serve.py``), which checks each of them (``Workload.checked``, ``Layout.checked``,
``Stack.checked``): a bad value is one ``InputError`` naming the field (``Workload(isl=-1, …)`` → ``isl: …``). The flat keyword form
(``serve(model, hardware, isl=…, osl=…, concurrency=…, tp=…)``: notebooks, the CLI's flags, a validation record's
inputs) is :func:`from_flat`, which only builds these objects.

Where each input lives, and why:

* :class:`Workload` — the requests: ISL/OSL, sequences in flight, how they arrive, the prefix-cache share, and
  speculative decoding (MTP draft tokens k and the mean accepted tokens A: A depends on the traffic, k and A on
  each other, so they travel together).
* :class:`Layout` — how the GPUs are split, as the frameworks' parallelism flags say it (TP/EP/PP, attention DP,
  expert placement, KV sharding, a disaggregated prefill pool); a field left None is chosen.
* :class:`Stack` — the serving software as launched: framework@version (its token budget, batch cap, scheduler,
  host times), CUDA graphs or ``--eager``, and the dtypes, which are the stack's launch flags too (vLLM / SGLang
  ``--quantization``, ``--kv-cache-dtype``; TensorRT-LLM's quantisation config): the weights the stack loads, the
  KV cache it allocates and the dtype its GEMMs multiply in.
* the price ($/GPU-hour) is the hardware's rent: it is the hardware's chip's ``usd_per_hour``
  (``specs.hardware.priced(hardware, usd)``, which the CLI's ``--usd-per-gpu-hour`` and every other command use).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ...bounds import check_int
from ...engine.efficiency import resolve
from ...errors import InputError, check_positive
from ...engine.deployment import attention_dp_label, check_attention_dp_size
from ...engine.layout import attention_ranks
from ...engine.numbers import HwNumbers
from ...specs.hardware import priced
from ...specs.stacks import PLATFORM_OF_VENDOR, resolve as resolve_stack
from ...specs.records import ARRIVALS  # request arrival patterns: steady, poisson, waves, closed-loop
from .schedule import held_context, mean_decode_context
from .steps import decode_numbers, draft_numbers, prefill_numbers


# --------------------------------------------------------------------------------------
# Serving stacks (--framework)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stack:
    """What a serving stack decides that the step model needs: prefill budget, batch cap, scheduler overlap — and
    the dtypes it is launched with (None: the model's published weights, its KV dtype or bf16, ``Chip.gemm_dtype``).

    ``load_stack("sglang@0.5.7")`` gives a listed stack; ``replace(stack, max_num_tokens=4096, cuda_graphs=False,
    kv_dtype="fp8")`` changes what its flags change."""

    name: str
    max_num_tokens: int | None  # tokens one step may carry per attention rank (prefill + decode); None: no limit
    max_batch_size: int  # sequences one replica runs at once
    overlap_scheduler: bool  # host schedules step n+1 while the GPU runs step n
    description: str
    source: str
    prefill_first: bool = False  # waiting prompts run as prefill batches of their own while decode waits
    cuda_graphs: bool = True  # decode steps replay captured graphs; False (--eager): every step is dispatched eagerly
    overlap_with_speculation: bool = True  # False: speculative decoding (MTP / EAGLE) turns the overlap scheduler off
    reserves_whole_request: bool = False  # admission reserves KV for ISL + OSL (TensorRT-LLM's GUARANTEED_NO_EVICT)
    # --- h34 (issue 34): the stack version (specs/stacks.py, specs/data/launch/stacks.toml) ---
    version: str = ""  # the listed version assumed ("" = an unversioned stack)
    label: str = ""  # stack@version as the user names it (sglang@0.5.6, dynamo-trtllm@0.5.1-rc0.pre3); "" = name
    mem_fraction: float = 0.9  # share of HBM the stack lets weights + KV fill (USABLE_MEMORY_FRACTION unless listed)
    implied: str = ""  # the stack named without a version (``sglang``): its build is the chip's (:func:`on_chip`)
    # --- the dtypes the stack is launched with (None: as published / bf16 KV / the chip's GEMM rule) ---
    weights_dtype: str | None = None  # --weights-dtype: bf16, fp8, fp4, nvfp4, mxfp4, …
    kv_dtype: str | None = None  # --kv-dtype
    compute_dtype: str | None = None  # --compute-dtype: the dtype the weight GEMMs multiply in
    # --- how often the scheduler receives new requests (SGLang --scheduler-recv-interval; 1: every step) ---
    recv_interval: int = 1

    @property
    def version_label(self) -> str:
        return self.label or self.name

    def checked(self) -> "Stack":
        """The stack with its flags checked: a token budget from 1 to 10⁷, CUDA graphs on or off, a receive interval
        from 1 to 10⁴ decode steps (above 1 on SGLang's stacks only: :func:`has_receive_interval`)."""
        if self.max_num_tokens is not None:
            check_positive(self.max_num_tokens, "max_num_tokens", "a token budget per step", maximum=1e7)
        if not isinstance(self.cuda_graphs, (bool, np.bool_)):
            raise InputError("cuda_graphs", f"{str(self.cuda_graphs)[:80]!r}", "true or false (false: --eager)")
        v = self.recv_interval
        n = check_int(int(v) if isinstance(v, np.integer) else v, "recv_interval", 1, 10_000,
                      "a whole number of decode steps from 1 to 10,000")
        if n > 1 and not has_receive_interval(self):
            raise InputError("recv_interval", f"{n} with --framework {self.version_label}",
                             "1, or a receive interval with an SGLang stack (sglang, dynamo-sglang: "
                             "--scheduler-recv-interval)")
        return self if type(v) is int else replace(self, recv_interval=n)  # 30.0, np.int64(30) → 30


def has_receive_interval(stack: Stack) -> bool:
    """Whether a stack has a receive interval to set: SGLang's (``--scheduler-recv-interval``, :func:`~.schedule.
    receive_wait`); the other stacks receive new requests every step."""
    return stack.name == "sglang"  # dynamo-sglang's builds too (``specs/data/launch/stacks.toml``)


STACKS = {
    "generic": Stack("generic", None, 10**9, False,
                     "generic continuous-batching stack: prefill in whole prompts (no token budget), no batch cap, "
                     "host scheduling serial with the GPU",
                     "rackmath default (no --framework given)"),
    "trtllm": Stack("trtllm", 8192, 2048, True,
                    "TensorRT-LLM (PyTorch backend): max_num_tokens 8,192, max_batch_size 2,048, overlap scheduler, "
                    "in-flight batching (context chunks ride in decode steps)",
                    "TensorRT-LLM LLM API defaults: max_num_tokens=8192, max_batch_size=2048, "
                    "disable_overlap_scheduler=False; capacity scheduler GUARANTEED_NO_EVICT (a request is admitted "
                    "only with KV blocks for its whole ISL + OSL; trtllm-bench --scheduler_policy default)",
                    reserves_whole_request=True),
    "vllm": Stack("vllm", 8192, 1024, False,
                  "vLLM V1: max_num_batched_tokens 8,192, max_num_seqs 1,024, async scheduling off",
                  "vLLM EngineArgs defaults for the OpenAI server on ≥ 70 GiB GPUs (V1, 0.10-era): "
                  "max_num_batched_tokens=8192, max_num_seqs=1024, async_scheduling=False"),
    "vllm-v0": Stack("vllm-v0", 32768, 256, False,
                     "vLLM V0 (≤ 0.10) with chunked prefill off: prefill batches first, up to max_model_len tokens "
                     "a step (32,768 here), max_num_seqs 256",
                     "vLLM V0 EngineArgs: chunked prefill on by default only above a 32K max_model_len (and off for "
                     "MLA models in 0.7.x), then max_num_batched_tokens = max(max_model_len, 2048); max_num_seqs=256; "
                     "the default scheduler runs waiting prefills before any decode", prefill_first=True),
    "sglang": Stack("sglang", 8192, 2048, True,
                    "SGLang: chunked_prefill_size 8,192, overlap scheduler on (off under speculative decoding), "
                    "prefill batches first",
                    "SGLang ServerArgs defaults (0.5.3–0.5.6 server_args.py: chunked_prefill_size=8192 on 60–160 "
                    "GiB GPUs such as H100 and H200, 16384 on larger ones such as B200 and MI300X, divided by the DP "
                    "size under DP attention; rackmath keeps 8,192 on every chip: docs/serving.md); overlap "
                    "schedule on unless --disable-overlap-schedule, and off with EAGLE / NEXTN speculative decoding "
                    "(ServerArgs: 'Overlap scheduler is disabled because of using eagle speculative decoding'); a "
                    "prefill batch runs whenever prompts wait (--enable-mixed-chunk off)", prefill_first=True,
                    overlap_with_speculation=False),
}
_STACK_ALIASES = {"tensorrt-llm": "trtllm", "trt-llm": "trtllm", "tensorrt_llm": "trtllm", "dynamo": "trtllm",
                  "atom": "vllm", "sgl": "sglang", "jax": "generic", "torch": "generic", "other": "generic",
                  "none": "generic"}


def load_stack(framework=None) -> Stack:
    """``--framework trtllm|vllm|sglang|vllm-v0|atom|dynamo-sglang|dynamo-trtllm[@VERSION]`` (aliases: tensorrt-llm,
    trt, dynamo → trtllm); None = generic. A versioned stack (``specs/stacks.py``) gets its listed version — the one
    named, else the newest — which names the engine whose rules and host times it uses and its memory fraction."""
    if framework is None:
        return STACKS["generic"]
    if isinstance(framework, Stack):
        return framework
    text = str(framework).strip()
    base = text.partition("@")[0].strip().lower()
    stack, sv = resolve_stack(text)  # an unknown version: one line listing the known ones
    if sv is not None:
        return replace(_at_version(STACKS[sv.engine], sv), implied="" if "@" in text else stack)
    key = _STACK_ALIASES.get(base, base)
    if key not in STACKS:
        raise InputError("framework", f"unknown serving stack {framework!r}",
                         "trtllm, vllm, sglang, vllm-v0, atom, dynamo-sglang, dynamo-trtllm (or tensorrt-llm, trt, "
                         "dynamo), each optionally @VERSION (sglang@0.5.6), or none/other for the generic stack")
    return STACKS[key]


def check_receive(recv_interval: int, attention_dp: bool, layout_label: str) -> None:
    """A receive interval above 1 with a layout that runs decode steps: refused under attention DP, as SGLang refuses
    it (``SchedulerRecvSkipper`` asserts ``enable_dp_attention`` is off). ``serve`` and ``simulate`` both check here."""
    if recv_interval > 1 and attention_dp:
        raise InputError("recv_interval", f"{recv_interval} with attention DP ({layout_label})",
                         "1 under attention DP (SGLang asserts --scheduler-recv-interval 1 with "
                         "--enable-dp-attention), or a layout without attention DP")


def receiving(framework, recv_interval=None):
    """``framework`` (a ``--framework`` name, a :class:`Stack` or None) with ``--recv-interval`` N set and checked
    (:meth:`Stack.checked`: SGLang's stacks only); unchanged where N is not given."""
    if recv_interval is None:
        return framework
    return replace(load_stack(framework), recv_interval=recv_interval).checked()


def on_chip(stack: Stack, chip) -> Stack:
    """A stack named without a version as it runs on ``chip``: the newest listed build for the chip's platform
    (ROCm on AMD, CUDA on NVIDIA: ``specs.stacks.resolve``); a version the user named, or an unversioned stack,
    unchanged."""
    if not getattr(stack, "implied", ""):
        return stack
    _, sv = resolve_stack(stack.implied, PLATFORM_OF_VENDOR.get(str(getattr(chip, "vendor", "")).lower()))
    return stack if sv is None or sv.label == stack.label else _at_version(stack, sv)


def _at_version(stack: Stack, sv) -> Stack:
    """``stack`` as the listed version ``sv`` (``specs.stacks.StackVersion``) names it: its version, label and memory
    fraction."""
    return replace(stack, version=sv.version, label=sv.label, mem_fraction=sv.mem_fraction)


def speculating(stack: Stack, mtp) -> Stack:
    """The stack as it runs with ``mtp`` draft tokens: a stack whose overlap scheduler speculation turns off (SGLang:
    'Overlap scheduler is disabled because of using eagle speculative decoding') schedules serially."""
    if int(mtp) > 0 and stack.overlap_scheduler and not stack.overlap_with_speculation:
        return replace(stack, overlap_scheduler=False)
    return stack



# --------------------------------------------------------------------------------------
# The workload and the layout
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """Request shape and load: ISL/OSL tokens, C sequences in flight across the deployment (conventions.md; a number
    or a numpy array), how requests arrive, the prefix-cache share h, and speculative decoding (``mtp`` draft
    tokens k, ``acceptance`` A tokens emitted per verification step: None = 1, no speculation).

    ``arrivals``: "steady" (spread out evenly), "poisson" (independent arrivals), "waves" (lock-step, a
    closed-loop client at fixed lengths) or "closed-loop" (a benchmark client: the first C together, then C in
    flight). ``serve`` checks it (:meth:`checked`): a bad field is one ``InputError`` naming it. A simulation
    (``simulate.run``) reads the same object more loosely (``concurrency`` None for an open loop, length
    distributions), so the fields are not checked when it is built."""

    isl: float
    osl: float
    concurrency: object
    mtp: int = 0
    acceptance: float | None = None
    cached_share: float = 0.0
    arrivals: str = "steady"

    def checked(self) -> "Workload":
        """The workload with every field checked for ``serve`` and normalised (floats, C as an array, A = 1 without
        speculation); a bad field is one ``InputError`` naming it."""
        isl, osl, c = self.isl, self.osl, self.concurrency
        if np.ndim(isl) or np.ndim(osl):
            raise InputError("isl", "ISL and OSL must be single numbers", "one request shape per call")
        for name, v in (("isl", isl), ("osl", osl)):
            check_positive(v, name, "a positive number", maximum=1e8)
        check_positive(c, "concurrency", "a positive number of sequences in flight", maximum=1e9)
        if np.any(np.asarray(c, dtype=float) < 1):
            raise InputError("concurrency", "fewer than 1 sequence in flight", "a number ≥ 1")
        if isl < 1 or osl < 1:
            raise InputError("isl" if isl < 1 else "osl", "below one token", "≥ 1 token")
        mtp, acc = self.mtp, self.acceptance
        if int(mtp) != mtp or mtp < 0 or mtp > 16:
            raise InputError("mtp", f"{mtp!r} draft tokens", "a whole number from 0 to 16")
        a = 1.0 if acc is None else float(acc)
        if acc is not None and mtp == 0 and a != 1.0:
            raise InputError("acceptance", f"{a:g} without --mtp", "--mtp K with --acceptance between 1 and K + 1")
        if not 1.0 <= a <= mtp + 1:
            raise InputError("acceptance", f"{a:g} is outside [1, k + 1] = [1, {mtp + 1}]",
                             "the mean tokens emitted per verification step, between 1 and k + 1")
        if not 0.0 <= self.cached_share < 1.0:
            raise InputError("cached_share", f"{self.cached_share:g}", "a fraction from 0 to below 1")
        if self.arrivals not in ARRIVALS:
            raise InputError("arrivals", f"{str(self.arrivals)[:80]!r}", "steady (requests spread out evenly), poisson "
                             "(independent arrivals), waves (lock-step, a closed-loop client at fixed lengths) or "
                             "closed-loop (a benchmark client: the first C together, then C in flight)")
        return replace(self, isl=float(isl), osl=float(osl), concurrency=np.asarray(c, dtype=float), mtp=int(mtp),
                       acceptance=a, cached_share=float(self.cached_share), arrivals=str(self.arrivals))

    @property
    def isl_new(self) -> float:
        return self.isl * (1.0 - self.cached_share)

    @property
    def a(self) -> float:
        """Tokens emitted per verification step A (1 when not given)."""
        return 1.0 if self.acceptance is None else float(self.acceptance)


def _check_degree(value, name: str) -> None:
    """A parallel degree given: a whole number ≥ 1 (0 is not 'default'); numpy scalars read as Python numbers."""
    if value is not None:
        v = value.item() if isinstance(value, np.generic) else value
        check_int(v, name, 1, 10**6, "a whole number from 1 to 10⁶: a parallel degree ≥ 1")


def check_gpus(value, name: str = "gpus") -> None:
    """A number of GPUs given: positive, whole, at most 10⁶."""
    if value is not None:
        check_positive(value, name, "a positive number", maximum=1e6)
        if int(value) != value:
            raise InputError(name, f"{value!r} is not a whole number", "a whole number of GPUs")


@dataclass(frozen=True)
class Layout:
    """A pool's layout, as the serving frameworks' flags say it (conventions.md); a field left None is chosen.

    ``gpus``: the pool's GPUs (None: one scale-up domain); ``tp``, ``ep``, ``pp``: parallel degrees; with ``tp``
    given the layout is built from the flags (ep, pp default to 1, attention DP off), without it the best layout
    that satisfies the flags given is chosen (``serving.choose``). ``attention_dp``: attention data-parallel over
    the TP GPUs; ``attention_dp_size`` R: over R groups of TP/R GPUs (SGLang ``--dp R --enable-dp-attention``;
    implies ``attention_dp``). ``redundant_experts``, ``uneven_experts``: expert placement; ``weight_layout`` "1d",
    "2d" or "gathered" (``engine.layout.WEIGHT_LAYOUTS``); ``kv_shards``: the KV heads the cache splits into (None:
    the model's). ``prefill``: a disaggregated deployment's prefill pool (its own Layout, ``gpus`` required; with
    ``tp`` None its fastest layout); ``gpus`` is then the decode pool's. ``chosen`` is set on a plan's layout when any
    degree was chosen. A plan's layout has every degree filled in (``attention_dp_size`` 0: every GPU its own
    sequences). ``serve`` checks it (:meth:`checked`: degrees and GPUs whole, a bad one an ``InputError`` naming it).
    ``attention_dp_size`` 0 is "not given" (attention DP over every GPU when ``tp`` is given, else chosen)."""

    gpus: int | None = None
    tp: int | None = None
    ep: int | None = None
    pp: int | None = None
    attention_dp: bool | None = None
    redundant_experts: int = 0
    uneven_experts: bool = False
    chosen: bool = False
    attention_dp_size: int | None = 0  # attention-DP groups of the TP group (0: not given / TP, every GPU its own)
    weight_layout: str = "1d"  # how the TP GPUs hold the weights: 1d, 2d or gathered (engine.layout.WEIGHT_LAYOUTS)
    kv_shards: int | None = None
    prefill: Layout | None = None

    def checked(self) -> "Layout":
        """The layout with its degrees (whole, ≥ 1), expert replicas and GPUs checked for ``serve``; its prefill pool
        too. A bad field is one ``InputError`` naming it."""
        for name in ("tp", "ep", "pp"):
            _check_degree(getattr(self, name), name)
        rx = self.redundant_experts
        check_int(rx.item() if isinstance(rx, np.generic) else rx, "redundant_experts", 0, 10**6,
                  "a whole number from 0 to 10⁶")
        check_gpus(self.gpus)
        if self.prefill is not None:
            if self.prefill.gpus is None:
                raise InputError("prefill_gpus", "a prefill pool without its GPUs", "Layout(gpus=N, …) for the pool")
            self.prefill.checked()
        return self

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp)

    @property
    def attention_ranks(self) -> int:
        """Attention-DP groups R, each with its own scheduler, sequences and KV (``engine.layout.attention_ranks``)."""
        return int(attention_ranks(self.tp, self.attention_dp, self.attention_dp_size))

    def label(self) -> str:
        parts = [f"TP{self.tp}"] + ([f"EP{self.ep}"] if self.ep > 1 else []) + \
            ([attention_dp_label(self.attention_dp_size, self.tp)] if self.attention_dp else []) + \
            ([f"PP{self.pp}"] if self.pp > 1 else []) + \
            ({"2d": ["2D weight-stationary"], "gathered": ["weight-gathered"]}.get(self.weight_layout, [])) + \
            [f"×{self.dp}"]
        return " ".join(parts)


def pool(gpus: int, lay: dict, **kw) -> Layout:
    """A plan's layout of ``gpus`` GPUs from a chosen or given layout dict (tp, ep, pp, attention_dp,
    attention_dp_size), every degree filled in."""
    return Layout(int(gpus), **{"ep": 1, "pp": 1, "attention_dp": False, "attention_dp_size": 0, **lay}, **kw)


# --------------------------------------------------------------------------------------
# The plan: everything fixed before an efficiency is applied
# --------------------------------------------------------------------------------------


@dataclass
class Plan:
    """Everything fixed before an efficiency is applied: model, system, workload, layouts, stack, dtypes."""

    model: object
    system: object
    workload: Workload
    layout: Layout
    stack: Stack
    weights_dtype: str | None
    kv_dtype: str
    compute_dtype: str
    gpus: int
    usd_per_gpu_hour: float
    prefill_gpus: int | None = None
    prefill_layout: Layout | None = None
    kv_shards: int | None = None
    efficiency: object = None  # the preset the plan was made with (layout choice)
    notes: list = field(default_factory=list)
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def disaggregated(self) -> bool:
        return self.prefill_gpus is not None

    def hw(self):
        if "hw" not in self._cache:
            self._cache["hw"] = HwNumbers.from_system(self.system, self.compute_dtype, None, self.kv_dtype)
        return self._cache["hw"]

    def numbers(self, what: str):
        """ModelNumbers of the decode step ('decode'), one draft layer ('draft') or a prefill chunk ('prefill')."""
        if what not in self._cache:
            w = self.workload
            if what == "decode":
                mn = self._held_kv(decode_numbers(self.model, mean_decode_context(w.isl, w.osl), w.mtp,
                                                  self.weights_dtype, self.kv_dtype, self.kv_shards), 1.0)
            elif what == "draft":
                mn = self._held_kv(draft_numbers(self.model, mean_decode_context(w.isl, w.osl), self.weights_dtype,
                                                 self.kv_dtype, self.kv_shards), self.model.n_layers)
            else:
                mn = prefill_numbers(self.model, isl=w.isl, chunk=self.chunk(), weights_dtype=self.weights_dtype,
                                     kv_dtype=self.kv_dtype, cached_share=w.cached_share, kv_shards=self.kv_shards)
            self._cache[what] = mn
        return self._cache[what]

    def _held_kv(self, mn, layers_per_numbers):
        """``mn`` holding each sequence's KV at :func:`held_context` (the KV a step reads stays at L̄)."""
        if not self.stack.reserves_whole_request:
            return mn
        ctx = held_context(self.stack, self.workload.isl, self.workload.osl)
        return replace(mn, kv_bytes_per_seq=float(self.model.kv_cache_bytes(ctx, self.kv_dtype)) / layers_per_numbers)

    def chunk(self) -> float:
        """One prompt's prefill chunk: min(ISL_new, the stack's token budget)."""
        return float(min(max(self.workload.isl_new, 1.0), self.stack.max_num_tokens or np.inf))



# --------------------------------------------------------------------------------------
# The flat keyword form: the objects from serve's keywords
# --------------------------------------------------------------------------------------

#: The flat keywords ``serve``/``plan`` take besides the objects, by the object they build (notebooks, the CLI's
#: flags, a validation record's inputs); ``usd_per_gpu_hour`` prices the hardware, ``ideal`` is the efficiency.
WORKLOAD_KEYS = ("isl", "osl", "concurrency", "mtp", "acceptance", "cached_share", "arrivals")
LAYOUT_KEYS = ("gpus", "tp", "ep", "pp", "attention_dp", "attention_dp_size", "redundant_experts", "uneven_experts",
               "weight_layout", "kv_shards", "prefill_gpus", "decode_gpus", "prefill_tp", "prefill_ep",
               "prefill_attention_dp")
STACK_KEYS = ("framework", "max_num_tokens", "eager", "weights_dtype", "kv_dtype", "compute_dtype", "recv_interval")
FLAT_KEYS = frozenset(WORKLOAD_KEYS + LAYOUT_KEYS + STACK_KEYS + ("usd_per_gpu_hour", "ideal"))


def from_flat(hardware, workload=None, layout=None, stack=None, efficiency=None, **flat):
    """``serve``'s flat keywords as its objects: (hardware, workload, layout, stack, efficiency).

    ``isl``, ``osl``, ``concurrency``, ``mtp``, ``acceptance``, ``cached_share``, ``arrivals`` build the
    :class:`Workload`; ``gpus``, ``tp`` … ``prefill_attention_dp`` the :class:`Layout` (``prefill_gpus`` +
    ``decode_gpus`` = ``gpus``: a disaggregated deployment, its decode pool with ``Layout.prefill``); ``framework``,
    ``max_num_tokens``, ``eager`` and the dtypes the :class:`Stack`; ``usd_per_gpu_hour`` prices the hardware
    (``specs.hardware.priced``); ``ideal`` True is the ideal efficiency. An object given beside its own keywords is
    an error naming both."""
    unknown = sorted(set(flat) - FLAT_KEYS)
    if unknown:
        raise TypeError(f"serve() got an unexpected keyword argument {unknown[0]!r}")
    for obj, name, keys in ((workload, "workload", WORKLOAD_KEYS), (layout, "layout", LAYOUT_KEYS),
                            (stack, "stack", STACK_KEYS)):
        both = [k for k in keys if k in flat]
        if obj is not None and both:
            raise InputError(name, f"given with {both[0]}=", f"a {name.capitalize()} or its keywords, not both")
    usd = flat.get("usd_per_gpu_hour")
    if usd is not None:
        check_price(usd)
        hardware = priced(hardware, usd)
    if flat.get("ideal"):  # --ideal: the bound; with --efficiency auto or a preset, one error naming both
        efficiency = resolve(None, efficiency, True)
    layout = layout if layout is not None else _flat_layout(flat)
    if workload is None:
        if any(flat.get(k) is None for k in ("isl", "osl", "concurrency")):
            missing = next(k for k in ("isl", "osl", "concurrency") if flat.get(k) is None)
            raise InputError(missing, "missing", "a Workload, or isl=, osl= and concurrency=")
        workload = Workload(**{k: flat[k] for k in WORKLOAD_KEYS if flat.get(k) is not None})
    return hardware, workload, layout, _flat_stack(stack, flat), efficiency


def _flat_stack(stack, flat: dict) -> Stack:
    """The stack named by ``framework`` (or given), with the flags' budget, ``eager`` and dtypes."""
    st = load_stack(stack if stack is not None else flat.get("framework"))
    eager = flat.get("eager", False)
    if not isinstance(eager, (bool, np.bool_)):
        raise InputError("eager", f"{str(eager)[:80]!r}", "true or false (decode steps without CUDA graphs)")
    over = {k: flat[k] for k in ("weights_dtype", "kv_dtype", "compute_dtype") if flat.get(k) is not None}
    if flat.get("max_num_tokens") is not None:
        check_positive(flat["max_num_tokens"], "max_num_tokens", "a token budget per step", maximum=1e7)
        over["max_num_tokens"] = int(flat["max_num_tokens"])
    if eager:
        over["cuda_graphs"] = False
    if flat.get("recv_interval") is not None:
        over["recv_interval"] = flat["recv_interval"]
    return replace(st, **over) if over else st


def check_price(usd) -> None:
    """A price in $ per GPU-hour: finite, from 0 to 10⁴."""
    check_positive(usd, "usd_per_gpu_hour", "a price in $ per GPU-hour", allow_zero=True, maximum=1e4)


def split_pools(gpus, prefill_gpus, decode_gpus) -> tuple:
    """``--gpus`` / ``--prefill-gpus`` / ``--decode-gpus`` → (the decode pool's GPUs, or every GPU when aggregated;
    the prefill pool's GPUs or None). Disaggregated: both pools given, whole, and summing to ``gpus`` if given."""
    pg, dg = prefill_gpus, decode_gpus
    for name, v in (("prefill_gpus", pg), ("decode_gpus", dg)):
        if v is not None:
            check_positive(v, name, "a positive number of GPUs", maximum=1e6)
    if (pg is None) != (dg is None):
        raise InputError("prefill_gpus" if pg is None else "decode_gpus", "given alone",
                         "both --prefill-gpus and --decode-gpus (or neither)")
    if pg is None:
        return gpus, None
    for name, v in (("prefill_gpus", pg), ("decode_gpus", dg)):
        if int(v) != v or v < 1:
            raise InputError(name, f"{v!r}", "a whole number of GPUs ≥ 1")
    check_gpus(gpus)
    if gpus is not None and pg + dg != gpus:
        raise InputError("gpus", f"{gpus} ≠ prefill {pg} + decode {dg}",
                         "--gpus = --prefill-gpus + --decode-gpus (conventions.md)")
    return int(dg), int(pg)


def attention_groups(size, tp=None) -> int:
    """``--attention-dp-size`` as the Layout field: None → 0 (not given); a given 0 is refused, as every group count
    that is not a positive divisor of TP (``engine.layout.check_attention_dp_size``)."""
    if size is not None and not size:
        check_attention_dp_size(size, int(tp) if tp is not None else size)
    return size or 0


def _flat_layout(flat: dict) -> Layout:
    """The layout the flags give: ``gpus``, TP/EP/PP, attention DP …; with ``prefill_gpus`` and ``decode_gpus`` the
    decode pool, its ``prefill`` pool from ``prefill_tp`` / ``prefill_ep`` / ``prefill_attention_dp``."""
    g = flat.get
    gpus, pg = split_pools(g("gpus"), g("prefill_gpus"), g("decode_gpus"))
    if pg is None and any(g(k) is not None for k in ("prefill_tp", "prefill_ep", "prefill_attention_dp")):
        raise InputError("prefill_tp", "a prefill layout without --prefill-gpus/--decode-gpus",
                         "prefill_tp/prefill_ep/prefill_attention_dp with a disaggregated deployment")
    prefill = None if pg is None else Layout(pg, g("prefill_tp"), g("prefill_ep"),
                                             attention_dp=g("prefill_attention_dp"))
    return Layout(gpus, g("tp"), g("ep"), g("pp"), g("attention_dp"), g("redundant_experts") or 0,
                  bool(g("uneven_experts", False)),
                  attention_dp_size=attention_groups(g("attention_dp_size"), g("tp")),
                  weight_layout=g("weight_layout", "1d"), kv_shards=g("kv_shards"), prefill=prefill)
