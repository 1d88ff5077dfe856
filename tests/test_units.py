"""Units: human strings at the edges, SI floats inside.

conventions.md: decimal prefixes, GiB written out, dense FLOP/s."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rackmath import units
from rackmath.errors import InputError


# --- parsing the strings published figures are written in -------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("141 GB", 141e9),                 # H200 HBM (published.md H2)
    ("80 GB", 80e9),
    ("96 GiB", 96 * 2**30),            # binary prefix written out
    ("32 GiB", 34_359_738_368),        # TPU v4 (Pope et al.)
    ("1.7 KB", 1700.0),
    ("1 TB", 1e12),
    ("70272", 70272.0),                # bare number = bytes (DeepSeek MLA bytes/token, C1d)
    ("8 Gb", 1e9),                     # bits
])
def test_parse_bytes(text, expected):
    assert units.parse_bytes(text) == pytest.approx(expected, rel=1e-12)


def test_gb_and_gib_are_never_confused():
    assert units.parse_bytes("96 GiB") / units.parse_bytes("96 GB") == pytest.approx(2**30 / 1e9)


@pytest.mark.parametrize("text, expected", [
    ("3.35 TB/s", 3.35e12),            # H100 HBM (H1)
    ("900 GB/s", 9e11),
    ("400 Gb/s", 50e9),                # a 400G NIC is 50 GB/s (H1, TR6)
    ("800 Gb/s", 100e9),
    ("8.1e11 B/s", 8.1e11),            # TPU v5e (H15)
    ("1.2 TB/s", 1.2e12),
])
def test_parse_bandwidth(text, expected):
    assert units.parse_bandwidth(text) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("text, expected", [
    ("989 TFLOP/s", 989e12),
    ("989.4 TFLOP/s", 989.4e12),
    ("4.5 PFLOPS", 4.5e15),
    ("2.25 PFLOP/s dense", 2.25e15),
    # 2:4-sparse headline figures are halved: H100 BF16 1,978.9 sparse = 989.45 dense (H1)
    ("1978.9 TFLOP/s sparse", 989.45e12),
    ("3,957.8 TFLOP/s (sparse)", 1978.9e12),
    ("1440 PFLOP/s 2:4-sparse", 720e15),   # GB200 NVL72 FP4 rack (H5)
])
def test_parse_flops_dense_and_sparse(text, expected):
    assert units.parse_flops(text) == pytest.approx(expected, rel=1e-12)


def test_sparse_is_half_of_the_same_number_dense():
    assert units.parse_flops("50 PFLOP/s sparse") * 2 == units.parse_flops("50 PFLOP/s")


@pytest.mark.parametrize("text, expected", [
    ("$2.5/h", 2.5), ("$2/GPU-hour", 2.0), ("2.5", 2.5), ("$10.8/h", 10.8), ("$1.2/hr", 1.2), (3, 3.0),
])
def test_parse_usd_per_hour(text, expected):
    assert units.parse_usd_per_hour(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("200K", 200_000), ("8192", 8192), ("1.5M", 1.5e6), ("128k", 128_000), ("16,384", 16384), ("2B", 2e9),
])
def test_parse_count(text, expected):
    assert units.parse_count(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("20 ms", 0.02), ("5 min", 300.0), ("1 h", 3600.0), ("2 ms", 2e-3), ("1.5", 1.5), ("10 us", 1e-5),
])
def test_parse_duration(text, expected):
    assert units.parse_duration(text) == pytest.approx(expected, rel=1e-12)


def test_dtype_bytes_include_block_scales():
    assert units.dtype_bytes("bf16") == 2
    assert units.dtype_bytes("bfloat16") == 2
    assert units.dtype_bytes("fp8") == 1
    assert units.dtype_bytes("fp4") == 0.5
    assert units.dtype_bytes("mxfp4") == pytest.approx(4.25 / 8)   # one 8-bit scale per 32 elements
    assert units.dtype_bytes("nvfp4") == pytest.approx(4.5 / 8)    # one 8-bit scale per 16 elements


# --- formatting ---------------------------------------------------------------------------------------------------

def test_format_si_examples():
    assert units.format_si(1.41e11, "B") == "141 GB"
    assert units.format_si(3.35e12, "B/s") == "3.35 TB/s"
    assert units.format_si(989.4e12, "FLOP/s") == "989 TFLOP/s"
    assert units.format_bytes(640e9) == "640 GB"
    assert units.format_duration(80e9 / 3.35e12) == "23.9 ms"
    assert units.format_duration(300) == "5 min"


# --- round trips (hypothesis) ------------------------------------------------------------------------------------

_MAG = st.floats(min_value=1.0, max_value=1e18, allow_nan=False, allow_infinity=False)


@given(_MAG)
def test_bytes_round_trip(x):
    assert units.parse_bytes(units.format_si(x, "B", digits=12)) == pytest.approx(x, rel=1e-10)
    # three significant digits lose at most half a unit in the last place
    assert units.parse_bytes(units.format_bytes(x)) == pytest.approx(x, rel=5.01e-3)


@given(_MAG)
def test_bandwidth_round_trip(x):
    assert units.parse_bandwidth(units.format_si(x, "B/s", digits=12)) == pytest.approx(x, rel=1e-10)


@given(_MAG)
def test_flops_round_trip(x):
    assert units.parse_flops(units.format_si(x, "FLOP/s", digits=12)) == pytest.approx(x, rel=1e-10)
    assert units.parse_flops(units.format_si(x, "FLOP/s", digits=12) + " sparse") == pytest.approx(x / 2, rel=1e-10)


@given(st.floats(min_value=1e-8, max_value=1e8, allow_nan=False))
def test_duration_round_trip(s):
    assert units.parse_duration(units.format_duration(s)) == pytest.approx(s, rel=5.01e-3)


@given(st.integers(min_value=0, max_value=10**12))
def test_count_round_trip(n):
    assert units.parse_count(str(n)) == n
    assert units.parse_count(f"{n / 1000}K") == pytest.approx(n, rel=1e-12)


# --- bad input: one InputError naming the field and what is accepted ------------------------------------------------

@pytest.mark.parametrize("fn, text", [
    (units.parse_bytes, "-5 GB"),
    (units.parse_bytes, float("nan")),
    (units.parse_bytes, "nan GB"),
    (units.parse_bytes, "lots"),
    (units.parse_bytes, "5 parsecs"),
    (units.parse_bandwidth, "0 TB/s"),
    (units.parse_bandwidth, "3.35 TB"),
    (units.parse_bandwidth, float("inf")),
    (units.parse_flops, "989 GB/s"),
    (units.parse_flops, "-1 TFLOP/s"),
    (units.parse_flops, ""),
    (units.parse_usd_per_hour, "$-2/h"),
    (units.parse_usd_per_hour, "two dollars"),
    (units.parse_count, "-200K"),
    (units.parse_count, "abc"),
    (units.parse_count, "1,2,4"),  # a list, not 124: separators only between groups of three digits
    (units.parse_bytes, "12,34 GB"),
    (units.parse_duration, "soon"),
    (units.parse_duration, "-3 ms"),
])
def test_bad_input_names_the_field(fn, text):
    with pytest.raises(InputError) as info:
        fn(text, "my_field")
    err = info.value
    assert err.field == "my_field"
    msg = str(err)
    assert msg.startswith("my_field: ") and "accepted" in msg and "\n" not in msg


def test_unknown_dtype_is_an_input_error():
    with pytest.raises(InputError, match="weights_dtype.*accepted"):
        units.dtype_bytes("fp3", "weights_dtype")


def test_nan_never_passes():
    for fn in (units.parse_bytes, units.parse_bandwidth, units.parse_flops, units.parse_count, units.parse_duration):
        with pytest.raises(InputError):
            fn(math.nan)


def test_thousands_separators_between_groups_of_three():
    assert units.parse_count("1,000,000") == 1e6 and units.parse_count("8_192") == 8192
    assert units.parse_bytes("1,000 GB") == 1e12 and units.parse_count("1,000.5") == 1000.5


def test_counted_pluralises_a_count_and_its_noun():
    from rackmath.units import counted

    assert counted(1, "record") == "1 record" and counted(0, "record") == "0 records"
    assert counted(2, "family", "families") == "2 families" and counted(1, "family", "families") == "1 family"


# --- the dtype a weight GEMM multiplies in ---------------------------------------------------------------------

@pytest.mark.parametrize("weights, compute, expected", [
    ("int4", None, "bf16"),     # AWQ / GPTQ: W4A16, weights widened to BF16 in registers (Marlin)
    ("mxfp4", None, "bf16"),    # gpt-oss's MXFP4 MoE weights against BF16 activations
    ("fp8", None, "fp8"),       # W8A8: DeepSeek's 128-block FP8, TensorRT-LLM / vLLM FP8
    ("nvfp4", None, "nvfp4"),   # W4A4: NVFP4 quantises the activations too
    ("bf16", None, "bf16"),
    ("mxfp4", "fp8", "fp8"),    # MXFP4 x MXFP8 (FlashInfer's CUTLASS MoE on Blackwell)
    ("int4", "fp8", "fp8"),     # DeepSeek-R1-W4AFP8 (published.md C18)
    ("fp8", "bf16", "bf16"),    # FP8 weights, BF16 activations (W8A16)
    ("nvfp4", "fp4", "nvfp4"),  # the same width: the weights' format
])
def test_a_gemm_multiplies_in_its_wider_operand(weights, compute, expected):
    assert units.gemm_dtype(weights, compute) == expected


def test_a_gemm_narrower_than_its_weights_is_refused():
    with pytest.raises(InputError) as e:
        units.gemm_dtype("bf16", "fp8")
    assert e.value.field == "compute_dtype" and "16 bits" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(InputError, match="compute_dtype.*accepted"):
        units.gemm_dtype("fp8", "fp3")
