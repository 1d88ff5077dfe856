"""Chapter one (lecture 00:00–00:32): the equations against the lecture's and published numbers."""

from __future__ import annotations

import numpy as np
import pytest

from rackmath.analyses.lecture import batching as ba
from rackmath.specs.hardware import hardware_ratio, load_chip
from rackmath.specs.models import load_model


@pytest.mark.parametrize("model,published", [
    # published.md §5: B* ≈ 300 · N_total/N_active
    ("deepseek-v3", 5440), ("kimi-k2", 9400), ("qwen3-235b-a22b", 3200), ("gpt-oss-120b", 6900),
    ("mixtral-8x7b", 1090),
])
def test_balance_batch_table(model, published):
    m = load_model(model)
    assert float(ba.balance_batch(300, m.total_params, m.active_params)) == pytest.approx(published, rel=0.05)


def test_balance_batch_lecture_inputs():
    """R6 with the lecture's own inputs: 300 × 8 = 2,400."""
    assert float(ba.balance_batch(300, 256, 32)) == 2400


def test_engine_balance_close_to_formula_for_dense():
    """Dense Llama 70B on H100 bf16: the engine's B* (context 0) is the hardware ratio 295 (no sparsity)."""
    b = float(ba.balance_batch_for("llama-3.1-70b", "hgx-h100", context=0.0))
    assert b == pytest.approx(hardware_ratio(load_chip("h100"), "bf16"), rel=0.02)
    assert b == pytest.approx(295, rel=0.02)


def test_balance_with_kv_grows():
    """R7: KV fetch takes bandwidth from the weights, so B* grows with context."""
    b = ba.balance_batch_for("deepseek-v3", "gb200-nvl72", context=np.array([0.0, 1024, 2048, 4096]))
    assert np.all(np.diff(b) > 0)
    assert b[0] == pytest.approx(300 * 671 / 37, rel=0.1)


def test_balance_infinite_when_kv_outruns_compute():
    """DeepSeek-V3 with a bf16 MLA cache at 8K on GB200: KV fetch alone exceeds compute at any batch."""
    assert np.isinf(ba.balance_batch_for("deepseek-v3", "gb200-nvl72", context=8192.0))


def test_latency_floor_and_drain():
    # Llama 3.1 405B bf16 (~811 GB) on an 8-GPU H100 box: 811e9 / (8 × 3.35e12) ≈ 30 ms
    m = load_model("llama-3.1-405b")
    floor = float(ba.latency_floor(m.weight_bytes("bf16"), 8, 3.35e12))
    assert floor == pytest.approx(811e9 / (8 * 3.35e12), rel=0.01)
    assert float(ba.drain_time(80e9, 3.35e12)) == pytest.approx(23.9e-3, rel=0.01)  # H100 (published.md §3)
    assert float(ba.drain_time(288e9, 20e12)) == pytest.approx(14.4e-3)  # Rubin, R10


def test_train_schedule():
    worst, mean = ba.train_schedule(0.020)
    assert worst == pytest.approx(0.040)  # R9: 20 ms wait + 20 ms ride
    assert mean == pytest.approx(0.030)


def test_throughput_and_systems():
    assert float(ba.system_throughput(2000, 1 / 64)) == pytest.approx(128_000)  # R12
    assert float(ba.systems_needed(494e6, 128_000)) == pytest.approx(3859, rel=0.001)  # G4 / R12


def test_unbatched_penalty_dense_is_the_hardware_ratio():
    """At short context a dense model's B=1 cost over its floor is the hardware ratio (bf16 H100: 295)."""
    pen, best, c1, cb = ba.unbatched_penalty("llama-3.1-70b", "hgx-h100", context=0.0)
    assert pen == pytest.approx(295, rel=0.03)
    assert best >= 290


def test_fast_mode_from_the_memory_bounded_operating_point():
    """R1 derived: DeepSeek-V3 at 8K fills 90% of HBM with KV (weights 689 GB of 12.05 TB = 5.7%), so the step is
    almost all KV: 2.5× speed needs t/t_op = 0.4 = w + (1 − w)·x → x = 0.364 and costs 0.4/0.364 = 1.10× per token."""
    fm = ba.fast_mode_from_speedup("deepseek-v3", "gb200-nvl72", 2.5, context=8192)
    w = 688.6e9 / (0.9 * 72 * 186e9)
    x = (0.4 - w) / (1 - w)
    assert fm.cost_multiple == pytest.approx(0.4 / x, rel=0.03)
    assert fm.batch == pytest.approx(x * fm.operating_batch, rel=0.03)
    # a speed-up beyond t_step(B_op)/t_step(1) is out of reach by batching
    from rackmath.errors import InputError

    with pytest.raises(InputError, match="speedup: 10000× is out of reach"):
        ba.fast_mode_from_speedup("deepseek-v3", "gb200-nvl72", 1e4, context=8192)


def test_fast_mode_from_speedup_inverse_of_price():
    fs = ba.fast_mode_from_speedup("deepseek-v3", "gb200-nvl72", 2.6, context=8192)
    fp = ba.fast_mode_from_price("deepseek-v3", "gb200-nvl72", fs.cost_multiple, context=8192)
    assert fp.speedup == pytest.approx(2.6, rel=0.02)


def test_slow_mode_floor_below_one():
    f = ba.slow_mode_floor("llama-3.1-70b", "hgx-h100", context=2048)
    assert 0 < f <= 1.0


def test_prefill_vs_decode_ratio():
    r = ba.prefill_decode_costs("llama-3.1-70b", "hgx-h100", np.array([1.0, 4096.0]), batch=8, context=2048)
    assert r.bound[0] != "compute" and r.bound[1] == "compute"
    assert r.usd_per_mtok[0] > 3 * r.usd_per_mtok[1]  # output priced 3–5× input (R38)


def test_lecture_chapter_one_claims():
    from rackmath.claims import ch1_batching as ch1

    rows = ch1.claims()
    lec = {c.id: c for c in rows if c.kind != "real"}
    real = {c.id: c for c in rows if c.kind == "real"}
    assert set(lec) == {f"R{i}" for i in range(1, 16)} - {"R14"}
    assert lec["R10"].value == pytest.approx(288e9 / 20e12, rel=0.01)  # HBM full: one read of 288 GB at 20 TB/s
    assert lec["R4"].value == pytest.approx(671, rel=0.02)
    assert lec["R5"].agrees and 250 < lec["R5"].value < 350
    assert lec["R6"].agrees and lec["R6"].value == pytest.approx(300 * 256 / 32)
    assert not real["R6"].agrees and real["R6"].value == pytest.approx(5440, rel=0.1)
    assert not lec["R1"].agrees  # batching alone does not reproduce 6× for 2.5×
    assert lec["R8"].kind == "definition"
