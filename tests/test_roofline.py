"""The roofline engine: published numbers, invariants (hypothesis), vectorization, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rackmath
from rackmath.engine.roofline import expected_experts_hit, roofline, weights_read_bytes
from rackmath.errors import InputError, UnknownNameError
from rackmath.specs.hardware import load_hardware
from rackmath.specs.models import load_model


def test_scaling_book_llama70b_v5e():
    """Scaling book SB2: L3-70B, int8 weights + KV, 8 TPU v5e, batch 32, 8K context -> 17 ms, 235 tok/s/chip."""
    r = rackmath.roofline("llama-3.1-70b", "tpu-v5e", chips=8, batch=32, context=8192, weights_dtype="int8",
                          kv_dtype="int8")
    assert float(r.step_s) == pytest.approx(17e-3, rel=0.05)
    assert float(r.tokens_per_s_per_chip) == pytest.approx(235, rel=0.05)
    assert r.bound.item() == "weights"  # memory-bound, the weights the larger memory term


def test_scaling_book_memory_split():
    """SB2: the step reads 70 GB of int8 weights and 41.9 GB of int8 KV (32 x 8192 x 160 kB)."""
    r = rackmath.roofline("llama-3.1-70b", "tpu-v5e", chips=8, batch=32, context=8192, weights_dtype="int8",
                          kv_dtype="int8")
    assert float(r.weight_bytes_read) == pytest.approx(70e9, rel=0.02)
    # 32 × 8192 × 163,840 B exactly; the book rounds 163,840 B to "160 kB" and prints 41.9 GB
    assert float(r.kv_bytes_read) == 32 * 8192 * 2 * 8 * 128 * 80
    assert float(r.kv_bytes_read) == pytest.approx(41.9e9, rel=0.03)


def test_pope_palm_int8_weight_floor():
    """published.md P5: PaLM 540B int8 weight-load floor on 64 TPU v4 = 540 GB / (64 x 1.2 TB/s) = 7.0 ms."""
    r = roofline("palm-540b", "tpu-v4", chips=64, batch=1, context=0, weights_dtype="int8")
    assert float(r.t_weights_s) == pytest.approx(7.0e-3, rel=0.05)


def test_prefill_compute_bound_decode_memory_bound():
    r = roofline("llama-3.1-70b", "hgx-h100", batch=1, context=2048, pass_len=np.array([1, 8192]))
    assert list(r.bound) == ["weights", "compute"]
    # prefill cost per token is far below decode's at batch 1 (output/input price ratio, R38)
    assert r.usd_per_mtok[0] / r.usd_per_mtok[1] > 50


def test_expected_experts_hit_limits():
    assert expected_experts_hit(256, 8, 1) == pytest.approx(8)
    assert expected_experts_hit(256, 8, 1e6) == pytest.approx(256)
    # two tokens: 8 + 8 * (1 - 8/256) = 15.75 distinct experts
    assert expected_experts_hit(256, 8, 2) == pytest.approx(8 + 8 * (1 - 8 / 256))
    t = np.arange(1, 5000)
    h = expected_experts_hit(256, 8, t)
    assert np.all(np.diff(h) >= 0) and h[-1] <= 256
    assert expected_experts_hit(0, 0, 10) == 0


def test_moe_reads_only_the_experts_hit():
    """DeepSeek-V3 at B=1 reads about its active weights, at large batch about all of them."""
    m = load_model("deepseek-v3")
    one = float(weights_read_bytes(m, 1))
    many = float(weights_read_bytes(m, 1e5))
    assert one == pytest.approx(m.active_params - m.embedding_params, rel=0.08)  # fp8: 1 byte per param
    assert many == pytest.approx(m.weight_bytes() - m.embedding_params, rel=0.02)


def test_dense_model_reads_all_weights_at_any_batch():
    m = load_model("llama-3.1-8b")
    w = weights_read_bytes(m, np.array([1.0, 1e4]))
    assert w[0] == w[1] == pytest.approx(m.weight_bytes() - m.embedding_params * 2, rel=1e-9)


def test_efficiency_scales_terms():
    from rackmath.engine.efficiency import Efficiency

    half = Efficiency("half", 0.5, 0.5, 1.0, 0.001)
    a = roofline("llama-3.1-8b", "h100", chips=1, batch=64, context=4096)
    b = roofline("llama-3.1-8b", "h100", chips=1, batch=64, context=4096, efficiency=half)
    assert float(b.t_compute_s) == pytest.approx(2 * float(a.t_compute_s))
    assert float(b.t_weights_s) == pytest.approx(2 * float(a.t_weights_s))
    assert float(b.step_s) == pytest.approx(2 * float(a.step_s) + 0.001)


def test_chips_default_is_scaleup_domain():
    r = roofline("deepseek-v3", "gb200-nvl72", batch=1, context=0)
    assert float(r.chips) == 72
    r = roofline("deepseek-v3", "h100", batch=1, context=0)  # chip name -> its HGX box
    assert float(r.chips) == 8 and r.hardware.name == "hgx-h100"


def test_vectorized_matches_scalar_calls():
    rng = np.random.default_rng(0)
    B = rng.integers(1, 5000, 50).astype(float)
    L = rng.integers(0, 200_000, 50).astype(float)
    P = rng.integers(1, 64, 50).astype(float)
    vec = roofline("gpt-oss-120b", "gb200-nvl72", batch=B, context=L, pass_len=P)
    for i in range(0, 50, 7):
        one = roofline("gpt-oss-120b", "gb200-nvl72", batch=B[i], context=L[i], pass_len=P[i])
        assert float(one.step_s) == pytest.approx(vec.step_s[i], rel=1e-12)
        assert one.bound.item() == vec.bound[i]


def test_broadcast_shapes():
    r = roofline("llama-3.1-70b", "hgx-h100", batch=np.array([1, 2, 4])[:, None], context=np.array([0, 1024]))
    assert r.step_s.shape == (3, 2)
    assert r.usd_per_mtok.shape == (3, 2)


@pytest.mark.parametrize("field,kwargs", [
    ("batch", dict(batch=-1, context=10)),
    ("batch", dict(batch=float("nan"), context=10)),
    ("context", dict(batch=1, context=-5)),
    ("batch", dict(batch=1e12, context=10)),
    ("pass_len", dict(batch=1, context=10, pass_len=0)),
    ("chips", dict(batch=1, context=10, chips=0)),
    ("kv_dtype", dict(batch=1, context=10, kv_dtype="fp7")),
])
def test_bad_input_names_field(field, kwargs):
    with pytest.raises(InputError) as exc:
        roofline("llama-3.1-8b", "h100", **kwargs)
    assert exc.value.field == field


def test_unknown_names_suggest():
    with pytest.raises(UnknownNameError) as exc:
        roofline("llama-3.1-7b", "h100", batch=1, context=1)
    assert "llama-3.1-8b" in str(exc.value)
    with pytest.raises(UnknownNameError) as exc:
        roofline("llama-3.1-8b", "h10", batch=1, context=1)
    assert "h100" in str(exc.value)


def test_explain_substitutes_numbers():
    r = roofline("llama-3.1-70b", "tpu-v5e", chips=8, batch=32, context=8192, weights_dtype="int8", kv_dtype="int8")
    text = r.explain().render()
    assert "t_step = max(t_compute, t_weights + t_kv)" in text
    assert "8 · 810 GB/s" in text and "weights binds" in text


# ----------------------------------------------------------------------------- invariants

MODELS = ["llama-3.1-8b", "deepseek-v3", "gpt-oss-120b", "qwen3-235b-a22b"]
HW = ["hgx-h100", "gb200-nvl72", "tpu-v5e"]
cfg = st.fixed_dictionaries({
    "model": st.sampled_from(MODELS),
    "hw": st.sampled_from(HW),
    "batch": st.floats(1, 1e5),
    "context": st.integers(0, 10**6).map(float),  # whole tokens (denormal contexts are refused)
    "pass_len": st.sampled_from([1, 2, 16, 512]),
})


@settings(max_examples=60, deadline=None)
@given(cfg)
def test_step_at_least_each_term(c):
    r = roofline(c["model"], c["hw"], batch=c["batch"], context=c["context"], pass_len=c["pass_len"])
    assert float(r.step_s) >= float(r.t_compute_s) * (1 - 1e-12)
    assert float(r.step_s) >= float(r.t_weights_s + r.t_kv_s) * (1 - 1e-12)


@settings(max_examples=60, deadline=None)
@given(cfg)
def test_latency_floor_below_every_step(c):
    from rackmath.analyses.lecture.batching import latency_floor

    m, hw = load_model(c["model"]), load_hardware(c["hw"])
    floor = latency_floor(float(weights_read_bytes(m, 1)), hw.scaleup_size, hw.chip.hbm_bw)
    r = roofline(m, hw, batch=c["batch"], context=c["context"], pass_len=c["pass_len"])
    assert float(r.step_s) >= floor * (1 - 1e-12)


@settings(max_examples=60, deadline=None)
@given(cfg, st.integers(1, 4))
def test_more_chips_never_slower(c, k):
    a = roofline(c["model"], c["hw"], chips=8, batch=c["batch"], context=c["context"], pass_len=c["pass_len"])
    b = roofline(c["model"], c["hw"], chips=8 * 2**k, batch=c["batch"], context=c["context"], pass_len=c["pass_len"])
    assert float(b.step_s) <= float(a.step_s) * (1 + 1e-12)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from(HW), st.integers(0, 200_000).map(float))
def test_cost_per_token_non_increasing_in_batch_while_memory_bound(model, hw, context):
    B = np.geomspace(1, 1e5, 300)
    r = roofline(model, hw, batch=B, context=context)
    mem = r.bound != "compute"
    cost = r.usd_per_mtok
    # over consecutive memory-bound points, cost per token never rises
    both = mem[1:] & mem[:-1]
    assert np.all(cost[1:][both] <= cost[:-1][both] * (1 + 1e-9))
