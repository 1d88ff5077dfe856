"""Units: plain SI floats inside, human strings only at the edges.

Conventions (docs/reference/conventions.md):

* bytes and byte rates use decimal prefixes (1 GB = 1e9 B, 1 TB/s = 1e12 B/s);
  binary prefixes are always written out (1 GiB = 2**30 B);
* bits are lower-case ``b`` ("400 Gb/s" = 50e9 B/s);
* FLOP/s figures are dense. A string that says "sparse" (NVIDIA's 2:4 headline
  numbers) is halved on parsing, so a sparse figure can never be mistaken for
  a dense one;
* counts accept K/M/B/T suffixes ("200K" tokens = 200,000, decimal) and binary
  Ki/Mi/Gi suffixes ("8Ki" = 8,192).

Formatting for people goes through one helper, :func:`human` ("24.7 h", "$7.65M",
"131,072", "3.35 TB/s").
"""

from __future__ import annotations

import math
import re

from .errors import InputError
from .bounds import check_quantity

__all__ = [
    "DTYPE_BYTES",
    "dtype_bytes",
    "ACTIVATION_DTYPE",
    "ACTIVATION_DTYPE_FP4_CHIP",
    "gemm_dtype",
    "element_bits",
    "parse_bytes",
    "parse_bandwidth",
    "parse_flops",
    "parse_usd_per_hour",
    "parse_count",
    "parse_duration",
    "parse_quantity",
    "format_si",
    "format_bytes",
    "format_duration",
    "human",
    "counted",
]

# Bytes per element of each storage type. Block-scaled formats include their
# scales: MXFP4 is 4-bit elements plus one 8-bit scale per 32 (4.25 bits);
# NVFP4 is 4-bit elements plus one 8-bit scale per 16 (4.5 bits).
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "tf32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "fp4": 0.5,
    "int4": 0.5,
    "mxfp4": 4.25 / 8,
    "nvfp4": 4.5 / 8,
}

_DTYPE_ALIASES = {
    "float32": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "e4m3": "fp8",
    "fp8_e4m3": "fp8",
    "float8": "fp8",
    "fp6": "fp8",  # no fp6 peaks are published separately; treated as fp8 storage
}


def normalize_dtype(name: str, field: str = "dtype") -> str:
    """Canonical dtype name ('bfloat16' -> 'bf16'); unknown names are an InputError."""
    key = str(name).strip().lower()
    key = _DTYPE_ALIASES.get(key, key)
    if key not in DTYPE_BYTES:
        raise InputError(field, f"unknown dtype {name!r}", "one of " + ", ".join(DTYPE_BYTES))
    return key


def dtype_bytes(name: str, field: str = "dtype") -> float:
    """Bytes per element of a storage dtype (scales of block formats included)."""
    return DTYPE_BYTES[normalize_dtype(name, field)]


#: The dtype each weight format's GEMMs read their activations in, as the checkpoints ship and the stacks run them.
#: FP8 and INT8 checkpoints quantise the activations too (W8A8: DeepSeek's 128-block FP8, TensorRT-LLM / vLLM FP8,
#: SmoothQuant INT8); NVFP4 quantises them to FP4 (W4A4: TensorRT-LLM's FP4, NVIDIA's NVFP4 checkpoints). INT4 (AWQ,
#: GPTQ) and MXFP4 (gpt-oss's MoE weights) are weight-only: the kernel widens each weight tile to BF16 in registers
#: and multiplies on the BF16 tensor cores (W4A16: Marlin, Machete, Triton ``matmul_ogs``). A stack that quantises
#: the activations of a weight-only format itself says so with ``compute_dtype``.
ACTIVATION_DTYPE: dict[str, str] = {
    "fp32": "fp32",
    "tf32": "tf32",
    "bf16": "bf16",
    "fp16": "fp16",
    "fp8": "fp8",
    "int8": "int8",
    "fp4": "fp4",
    "nvfp4": "nvfp4",
    "int4": "bf16",
    "mxfp4": "bf16",
}

#: Where the chip multiplies FP4 natively (Blackwell, CDNA 4) the stacks run MXFP4 weights against MXFP8
#: activations (W4A8: TensorRT-LLM's W4A8_MXFP4_MXFP8 for gpt-oss, the FlashInfer MXFP4 × MXFP8 MoE of vLLM and
#: SGLang, published.md C34), at the FP8 rate.
ACTIVATION_DTYPE_FP4_CHIP: dict[str, str] = {"mxfp4": "fp8"}


def element_bits(name: str) -> int:
    """Bits of one element, scales left out (MXFP4's 4.25 bits → 4)."""
    return int(DTYPE_BYTES[normalize_dtype(name)] * 8)


def gemm_dtype(weights_dtype: str, compute_dtype: str | None = None, fp4_chip: bool = False) -> str:
    """The dtype a weight GEMM multiplies in: the wider of its two operands, t_compute = F / peak(max(w, a)).

    A GEMM runs at the tensor-core rate of its wider operand: AWQ's INT4 weights against BF16 activations
    (W4A16) multiply at the BF16 rate, half the FP8 rate an H100 would give the 4-bit weights alone; FP8
    weights against FP8 activations (W8A8) at the FP8 rate. The activations are :data:`ACTIVATION_DTYPE`'s
    for the weights' format (:data:`ACTIVATION_DTYPE_FP4_CHIP`'s on a chip with FP4 tensor cores, ``fp4_chip``)
    unless ``compute_dtype`` says what the stack runs (it may not be narrower than the weights: a GEMM cannot
    multiply its weights in fewer bits than they hold)."""
    w = normalize_dtype(weights_dtype, "weights_dtype")
    if compute_dtype is None:
        a = (fp4_chip and ACTIVATION_DTYPE_FP4_CHIP.get(w)) or ACTIVATION_DTYPE.get(w, w)
    else:
        a = normalize_dtype(compute_dtype, "compute_dtype")
        if element_bits(a) < element_bits(w):
            raise InputError("compute_dtype", f"{a} is narrower than the {w} weights",
                             f"a dtype at least {element_bits(w)} bits wide (the weights' width or wider)")
    return w if element_bits(w) >= element_bits(a) else a


_PREFIX = {
    "": 1.0,
    "k": 1e3,
    "K": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
    "Pi": 2.0**50,
}

_NUM = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
_QTY = re.compile(r"^\s*" + _NUM + r"\s*(Ki|Mi|Gi|Ti|Pi|[kKMGTPE]?)\s*(.*?)\s*$")


def _digit_groups(s: str, field: str, accepted: str) -> str:
    """Drop thousands separators ('1,000,000', '8_192') — only where they separate groups of three digits:
    '1,2,4' is a list, not 124."""
    if "," not in s and "_" not in s:
        return s
    if not re.match(r"^[+-]?\d{1,3}([,_]\d{3})+(\.\d*)?(?!\d)", s):
        raise InputError(field, f"cannot read {s!r} (a comma or _ separates groups of three digits)", accepted)
    return s.replace(",", "").replace("_", "")


def _split(text: str, field: str, accepted: str) -> tuple[float, float, str]:
    if isinstance(text, (int, float)):
        return float(text), 1.0, ""
    s = _digit_groups(str(text).strip(), field, accepted)
    m = _QTY.match(s)
    if not m:
        raise InputError(field, f"cannot read {text!r}", accepted)
    value, prefix, rest = float(m.group(1)), m.group(2), m.group(3)
    # "5 min": the prefix regex must not eat the 'm' of a unit; units decide below.
    return value, _PREFIX[prefix], rest


def _finite_positive(value: float, field: str, accepted: str, allow_zero: bool = False, kind: str = "count") -> float:
    """Finite, ≥ 0 (> 0 unless allow_zero), not denormal, and within rackmath.bounds.QUANTITY_MAX[kind]."""
    return check_quantity(value, kind, field, accepted, allow_zero)


def parse_bytes(text: str | float, field: str = "bytes") -> float:
    """'141 GB' -> 1.41e11; '96 GiB' -> 103079215104.0; '1.7 KB' -> 1700.0; bare numbers are bytes."""
    accepted = "a size such as '141 GB', '96 GiB' or '1700' (bytes)"
    value, mult, unit = _split(text, field, accepted)
    unit_l = unit.lower()
    if unit in ("", "B") or unit_l in ("b", "byte", "bytes"):
        if unit == "b":
            mult /= 8  # bits
        return _finite_positive(value * mult, field, accepted, allow_zero=True, kind="bytes")
    if unit_l in ("bit", "bits"):
        return _finite_positive(value * mult / 8, field, accepted, allow_zero=True, kind="bytes")
    raise InputError(field, f"unknown size unit in {text!r}", accepted)


def parse_bandwidth(text: str | float, field: str = "bandwidth") -> float:
    """'3.35 TB/s' -> 3.35e12 B/s; '400 Gb/s' -> 5e10 B/s (bits); '900 GB/s' -> 9e11."""
    accepted = "a rate such as '3.35 TB/s', '900 GB/s' or '400 Gb/s'"
    value, mult, unit = _split(text, field, accepted)
    u = unit.replace(" ", "")
    if u in ("", "B/s", "Bps", "byte/s", "bytes/s"):
        return _finite_positive(value * mult, field, accepted, kind="bandwidth")
    if u in ("b/s", "bps", "bit/s", "bits/s"):
        return _finite_positive(value * mult / 8, field, accepted, kind="bandwidth")
    raise InputError(field, f"unknown rate unit in {text!r}", accepted)


def parse_flops(text: str | float, field: str = "flops") -> float:
    """'989 TFLOP/s' -> 9.89e14 (dense). '1979 TFLOP/s sparse' -> 9.895e14: 2:4-sparse figures are halved."""
    accepted = "a rate such as '989 TFLOP/s' or '4.5 PFLOPS' (add 'sparse' for 2:4-sparse headline figures)"
    sparse = False
    if isinstance(text, str) and re.search(r"\bsparse\b", text, re.I):
        sparse = True
        text = re.sub(r"\(?\s*(2:4[- ])?sparse\s*\)?", "", text, flags=re.I)
    if isinstance(text, str) and re.search(r"\bdense\b", text, re.I):
        text = re.sub(r"\(?\s*dense\s*\)?", "", text, flags=re.I)
    value, mult, unit = _split(text, field, accepted)
    u = unit.replace(" ", "").upper()
    if u not in ("", "FLOP/S", "FLOPS", "OP/S", "OPS"):
        raise InputError(field, f"unknown compute unit in {text!r}", accepted)
    flops = _finite_positive(value * mult, field, accepted, kind="flops")
    return flops / 2 if sparse else flops


def parse_usd_per_hour(text: str | float, field: str = "usd_per_hour") -> float:
    """'$2.5/h' -> 2.5 dollars per hour; '$2/GPU-hour' and '2.5' are accepted too."""
    accepted = "a price such as '$2.5/h' or '2.5' (dollars per chip-hour)"
    if isinstance(text, (int, float)):
        return _finite_positive(float(text), field, accepted, allow_zero=True, kind="usd_per_hour")
    s = str(text).strip().replace("$", "").replace("USD", "").strip()
    m = re.match(r"^" + _NUM + r"\s*(?:/\s*(?:h|hr|hour|(?:gpu|chip)[- ]?h(?:ou)?r?))?\s*$", s, re.I)
    if not m:
        raise InputError(field, f"cannot read {text!r}", accepted)
    return _finite_positive(float(m.group(1)), field, accepted, allow_zero=True, kind="usd_per_hour")


def parse_count(text: str | float, field: str = "count") -> float:
    """'200K' -> 2e5; '1.5M' -> 1.5e6; '16384' -> 16384.0; '8Ki' -> 8192.0. (K = 1e3 decimal, Ki = 1024.)"""
    accepted = "a number such as '8192', '200K' (= 200,000), '8Ki' (= 8,192) or '1.5M'"
    if isinstance(text, (int, float)):
        return _finite_positive(float(text), field, accepted, allow_zero=True, kind="count")
    s = _digit_groups(str(text).strip(), field, accepted)
    m = re.match(r"^" + _NUM + r"\s*([kK]i|Mi|Gi|Ti|[kKMGBT]?)\s*$", s)
    if not m:
        w = re.match(r"^" + _NUM + r"\s*([kK]i|Mi|Gi|Ti|[kKMGBT]?)\s*[A-Za-z/]", s)
        if w:  # '8k tokens': a count takes no unit word (the field says what it counts)
            bare = w.group(1) + (w.group(2).upper() if w.group(2) == "k" else w.group(2))
            raise InputError(field, f"cannot read {text!r}: a count takes no unit word",
                             f"the number alone, e.g. {bare} (8K = 8,000; 8Ki = 8,192)")
        raise InputError(field, f"cannot read {text!r}", accepted)
    mult = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "B": 1e9, "T": 1e12,
            "ki": 2.0**10, "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}[m.group(2)]
    return _finite_positive(float(m.group(1)) * mult, field, accepted, allow_zero=True, kind="count")


_TIME = {
    "": 1.0, "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9,
    "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hr": 3600.0, "hrs": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
    "month": 30.4375 * 86400.0, "months": 30.4375 * 86400.0,
    "y": 365.25 * 86400.0, "year": 365.25 * 86400.0, "years": 365.25 * 86400.0,
}


def parse_duration(text: str | float, field: str = "duration", unit_required: bool = False) -> float:
    """'5 min' -> 300.0 s; '20 ms' -> 0.02; '2 months' -> 5.26e6; bare numbers are seconds, unless
    ``unit_required`` (a latency SLO: ``--tpot 50`` is an error suggesting '50ms', never 50 seconds)."""
    accepted = "a duration such as '20 ms', '5 min', '1 h' or '2 months'"
    if isinstance(text, (int, float)) and not unit_required:
        return _finite_positive(float(text), field, accepted, allow_zero=True, kind="duration")
    m = re.match(r"^\s*" + _NUM + r"\s*([a-zA-Zµ]*)\s*$", str(text))
    if m and unit_required and not m.group(2):
        raise InputError(field, f"{str(text).strip()!r} has no unit",
                         f"a duration with its unit, e.g. {m.group(1)}ms or {m.group(1)}s")
    if not m or m.group(2).lower() not in _TIME:
        raise InputError(field, f"cannot read {text!r}", accepted)
    return _finite_positive(float(m.group(1)) * _TIME[m.group(2).lower()], field, accepted, allow_zero=True, kind="duration")


_PARSERS = {
    "bytes": parse_bytes,
    "bandwidth": parse_bandwidth,
    "flops": parse_flops,
    "usd_per_hour": parse_usd_per_hour,
    "count": parse_count,
    "duration": parse_duration,
}


def parse_quantity(text: str | float, kind: str, field: str | None = None) -> float:
    """Parse ``text`` as a quantity of ``kind`` (bytes, bandwidth, flops, usd_per_hour, count, duration)."""
    return _PARSERS[kind](text, field or kind)


_SI = [(1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""),
       (1e-3, "m"), (1e-6, "µ"), (1e-9, "n")]


def format_si(value: float, unit: str = "", digits: int = 3) -> str:
    """1.41e11, 'B' -> '141 GB'; 3.35e12, 'B/s' -> '3.35 TB/s'. Decimal prefixes only."""
    v = float(value)
    if not math.isfinite(v):
        return f"{v} {unit}".strip()
    if v == 0:
        return f"0 {unit}".strip()
    a = abs(v)
    for scale, prefix in _SI:
        if a >= scale * 0.9995:
            break
    num = f"{v / scale:.{digits}g}"
    if "e" in num:  # e.g. 1e+03 at a prefix boundary
        num = f"{v / scale:.0f}"
    return f"{num} {prefix}{unit}".strip()


def format_bytes(value: float, digits: int = 3) -> str:
    """Bytes with decimal prefixes ('70.3 kB')."""
    return format_si(value, "B", digits)


def format_duration(seconds: float, digits: int = 3) -> str:
    """Seconds in the most readable unit: '23.9 ms', '9.1 min', '1.02 day'."""
    s = float(seconds)
    if not math.isfinite(s):
        return str(s)
    a = abs(s)
    if a >= 365.25 * 86400 * 2:
        return f"{_sig(s / (365.25 * 86400), digits)} years"
    if a >= 86400 * 2:
        return f"{_sig(s / 86400, digits)} days"
    if a >= 3600 * 2:
        return f"{_sig(s / 3600, digits)} h"
    if a >= 120:
        return f"{_sig(s / 60, digits)} min"
    return format_si(s, "s", digits)


_COUNT_SUFFIX = [(1e12, "T"), (1e9, "B"), (1e6, "M")]
_SI_UNITS = {"B", "B/s", "b/s", "FLOP", "FLOP/s", "W", "Hz"}


def _sig(v: float, digits: int) -> str:
    """``digits`` significant figures without scientific notation ('0.000114', '1.19', '689')."""
    if v == 0 or not math.isfinite(v):
        return f"{v:g}"
    a = abs(v)
    if a >= 10 ** digits:
        return f"{v:,.0f}"
    decimals = max(0, digits - 1 - int(math.floor(math.log10(a))))
    text = f"{v:,.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def human(value, unit: str = "", digits: int = 3) -> str:
    """The one formatter for people: a number with its unit, never in scientific notation.

    ``unit``: 's' -> '23.9 ms', '24.7 h', '15.9 days'; '$' -> '$0.67', '$7.65M'; '$/Mtok' -> '$1.84/Mtok';
    '%' (a fraction) -> '42.0%'; 'x' -> '3.2×'; '' (a count) -> '8,192', '1.19', '131,072', '1.7M', '671B';
    SI units (B, B/s, FLOP, FLOP/s) -> '141 GB', '3.35 TB/s'; any other unit follows a count ('1.2M tok/s').
    Non-numbers are returned as text; NaN/inf as 'n/a'/'∞'.
    """
    try:
        v = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(v):
        return "n/a"
    if math.isinf(v):
        return ("−∞" if v < 0 else "∞") + (f" {unit}" if unit and unit not in ("$", "%", "x", "×") else "")
    if unit == "s":
        return format_duration(v, digits)
    if unit == "%":
        return f"{v * 100:.{max(1, digits - 2)}f}%"
    if unit in ("x", "×"):
        return f"{_sig(v, digits)}×"
    if unit.startswith("$"):
        a = abs(v)
        for scale, suffix in _COUNT_SUFFIX + [(1e3, "K")]:
            if a >= scale * 0.9995:
                num = f"{_sig(v / scale, digits)}{suffix}"
                break
        else:
            num = _sig(v, digits)
        sign = "−" if v < 0 else ""
        return f"{sign}${num.lstrip('-')}{unit[1:]}"
    if unit in _SI_UNITS:
        if abs(v) >= 1e21:  # past the E prefix: scientific notation, as FLOP budgets are written (6.35e27 FLOP)
            return f"{v:.{digits}g}".replace("e+", "e") + f" {unit}"
        return format_si(v, unit, digits)
    a = abs(v)
    if a >= 1e15 * 0.9995:  # past T: scientific notation ('6.83e24'), never '6,830,000,000,000T'
        num = f"{v:.{digits}g}".replace("e+", "e")
    elif a >= 1e6 * 0.9995:
        for scale, suffix in _COUNT_SUFFIX:
            if a >= scale * 0.9995:
                num = f"{_sig(v / scale, digits)}{suffix}"
                break
    elif v == int(v):
        num = f"{int(v):,}"
    else:
        num = _sig(v, max(digits, 4) if a >= 1 else digits)
    return f"{num} {unit}".strip()


def counted(k: int, word: str, plural: str | None = None) -> str:
    """``1 record``, ``2 records``: a whole count and its noun (``plural`` where it is not ``word + 's'``)."""
    return f"{k} {word if k == 1 else (plural or word + 's')}"
