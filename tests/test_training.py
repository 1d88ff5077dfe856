"""Training compute, time and memory vs published runs (published.md §2, §1g SB10) and hand-derived numbers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import run_cli
from rackmath.analyses.training import equations as eq
from rackmath.analyses.training import model as tr
from rackmath.errors import InputError

H100_BF16 = 989.4e12


def rel(a, b):
    return abs(a - b) / abs(b)


# ---------------------------------------------------------------- published runs, pure arithmetic


def test_llama3_405b_gpu_hours_tr2_tr4_tr5(shared):
    text = (shared / "reference" / "published.md").read_text()
    assert "30.84M" in text and "26.3M GPU-h ideal" in text
    C = eq.training_flops(405e9, 15.6e12)
    assert rel(C, 3.79e25) < 0.01  # TR5: 6ND = 3.79e25
    ideal = eq.chip_hours(C, 400e12)  # TR2: 400 TFLOP/s per GPU on 16,384 H100
    assert rel(ideal, 26.3e6) < 0.05
    days = eq.train_time(C, 16384, 400e12) / 86400
    assert rel(days, 67) < 0.05
    eff = eq.achieved_flops_per_chip(C, 30.84e6)  # TR4: 30.84M reported GPU-hours
    assert rel(eff, 341e12) < 0.05
    assert rel(eq.mfu(400e12, H100_BF16), 0.41) < 0.05  # TR2's 41%


def test_deepseek_v3_mfu_tr7_tr8():
    C = eq.training_flops(37e9, 14.8e12)
    assert rel(C, 3.29e24) < 0.01
    f = eq.achieved_flops_per_chip(C, 2.664e6)  # pre-training hours (TR8 uses these)
    assert rel(f, 343e12) < 0.05
    assert rel(eq.mfu(f, 989e12), 0.346) < 0.05
    # the full 2.788M hours give a lower figure: 327 TF, 33.1%
    assert rel(eq.mfu(eq.achieved_flops_per_chip(C, 2.788e6), 989e12), 0.331) < 0.01
    # TR8: ≈ 57 days on 2,048 GPUs
    assert rel(eq.train_time(C, 2048, f) / 86400, 57) < 0.05


def test_scaling_book_sb10_llama3_70b_v5p_pod():
    C = eq.training_flops(70e9, 15e12)
    assert rel(C, 6.3e24) < 0.01
    t = eq.train_time(C, 8960, 0.4 * 459e12)
    assert rel(t, 3.8e6) < 0.05 and rel(t / 86400, 44) < 0.05


# ---------------------------------------------------------------- adapters on the catalog


def _specs():
    models = pytest.importorskip("rackmath.specs.models")
    hardware = pytest.importorskip("rackmath.specs.hardware")
    return models.load_model, hardware.load_hardware


def test_adapter_llama3_405b():
    load_model, load_hardware = _specs()
    m, hw = load_model("llama-3.1-405b"), load_hardware("hgx-h100")
    r = tr.train(m, hw, chips=16384, tokens=15.6e12, flops_per_chip=400e12, include_attention=False)
    assert rel(r.chip_hours, 26.3e6) < 0.05
    assert rel(r.time_s / 86400, 67) < 0.05
    # attention at 8K: 3 · 4·L·(s/2)·d_attn per token ≈ +4% of 6N; still under the reported 30.84M
    ra = tr.train(m, hw, chips=16384, tokens=15.6e12, seq_len=8192, flops_per_chip=400e12)
    frac = ra.flops_attention / ra.flops_dense
    hand = 3 * 4 * 126 * (8191 / 2) * 128 * 128 / (6 * m.active_params)
    assert rel(frac, hand) < 0.01 and 0.03 < frac < 0.05
    assert r.chip_hours < ra.chip_hours < 30.84e6
    # implied by the reported hours
    rh = tr.train(m, hw, chips=16384, tokens=15.6e12, chip_hours_given=30.84e6, include_attention=False)
    assert rel(rh.achieved_flops, 341e12) < 0.05


def test_adapter_deepseek_v3():
    load_model, load_hardware = _specs()
    r = tr.train(load_model("deepseek-v3"), load_hardware("h800"), chips=2048, tokens=14.8e12,
                 chip_hours_given=2.664e6, include_attention=False)
    assert rel(r.mfu, 0.346) < 0.05  # spec's 37.6B active vs 37B: 35.1%


def test_adapter_sb10():
    load_model, load_hardware = _specs()
    r = tr.train(load_model("llama-3.1-70b"), load_hardware("tpu-v5p-pod"), chips=8960, tokens=15e12, mfu_given=0.4,
                 include_attention=False)
    assert rel(r.time_s / 86400, 44) < 0.05


def test_bottom_up_step_is_consistent():
    load_model, load_hardware = _specs()
    par = tr.Parallelism(dp=128, tp=8, pp=16, microbatches=16)
    r = tr.train(load_model("llama-3.1-405b"), load_hardware("hgx-h100"), chips=16384, tokens=15.6e12, par=par,
                 global_batch_tokens=16e6)
    s = r.step
    # the bubble: (P−1)/(M+P−1) = 15/31 of the pipelined time
    assert s["t_bubble_s"] / (s["t_math_s"] + s["t_bubble_s"]) == pytest.approx(15 / 31)
    assert r.mfu == pytest.approx(s["mfu"]) and r.mfu < 1
    assert r.memory["bytes_per_param"] == pytest.approx(4 + 12 / 128)  # ZeRO-1: w + g + K/dp


# ---------------------------------------------------------------- pieces, hand-derived


def test_pipeline_bubble():
    assert eq.pipeline_bubble_fraction(4, 8) == pytest.approx(3 / 11)
    assert eq.pipeline_bubble_fraction(4, 8, v=2) == pytest.approx(3 / 19)
    assert eq.pipeline_bubble_fraction(1, 8) == 0
    np.testing.assert_allclose(eq.pipeline_bubble_fraction(np.array([2, 16]), 16), [1 / 17, 15 / 31])


def test_zero_bytes_per_param():
    assert eq.model_state_bytes_per_param(64, 0) == 16  # ZeRO paper: 2 + 2 + 12
    assert eq.model_state_bytes_per_param(8, 1) == pytest.approx(2 + 2 + 12 / 8)
    assert eq.model_state_bytes_per_param(8, 2) == pytest.approx(2 + 14 / 8)
    assert eq.model_state_bytes_per_param(64, 3) == pytest.approx(0.25)
    with pytest.raises(InputError):
        eq.model_state_bytes_per_param(8, 4)


def test_korthikanti_activation_memory():
    s, b, h, a, t = 2048, 1, 12288, 96, 8
    sbh = s * b * h
    assert eq.activation_bytes_per_layer(s, b, h, a) == pytest.approx(sbh * (34 + 5 * a * s / h))
    assert eq.activation_bytes_per_layer(s, b, h, a, tp=t) == pytest.approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)))
    assert eq.activation_bytes_per_layer(s, b, h, a, tp=t, sequence_parallel=True) == pytest.approx(
        sbh / t * (34 + 80))  # 5·96·2048/12288 = 80
    assert eq.activation_bytes_per_layer(s, b, h, a, tp=t, sequence_parallel=True, recompute="selective") == \
        pytest.approx(34 * sbh / t)
    assert eq.activation_bytes_per_layer(s, b, h, a, recompute="full") == pytest.approx(2 * sbh)
    # 1F1B with M ≥ P holds L layers' worth; GPipe holds M microbatches of L/P layers
    assert eq.activation_bytes_per_chip(1.0, 96, pp=8, microbatches=32) == pytest.approx(96)
    assert eq.activation_bytes_per_chip(1.0, 96, pp=8, microbatches=32, schedule="gpipe") == pytest.approx(12 * 32)


def test_attention_flops_dense_formula():
    # 405B: 126 layers, 128 heads × 128: 4·L·c·d_attn at c = 4096
    assert eq.dense_attention_flops_per_token(126, 16384, 4096) == pytest.approx(4 * 126 * 4096 * 16384)
    assert eq.attention_training_flops(1.0, 10) == 30


def test_bad_parallelism():
    with pytest.raises(InputError):
        tr.Parallelism(schedule="zigzag").validate()
    with pytest.raises(InputError):
        tr.Parallelism(dp=2, ep=4).validate()


# ---------------------------------------------------------------- CLI


def test_cli_train_json_and_explain():
    pytest.importorskip("rackmath.specs.models")
    code, out, err = run_cli("train", "llama-3.1-70b", "-H", "tpu-v5p-pod", "--gpus", "8960", "--tokens", "15T",
                             "--mfu", "0.4", "--no-attention", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert rel(d["time_s"] / 86400, 44) < 0.05 and d["derivation"]["steps"]
    code, out, err = run_cli("train", "llama-3.1-70b", "-H", "tpu-v5p-pod", "--gpus", "8960", "--tokens", "15T",
                             "--mfu", "0.4", "--explain")
    assert code == 0 and "6 · N_active · D" in out


def test_cli_train_bad_input():
    pytest.importorskip("rackmath.specs.models")
    code, out, err = run_cli("train", "llama-3.1-8b", "--tokens", "1T", "--chips", "10", "--tp", "4")
    assert code == 2 and err.startswith("error: gpus") and len(err.strip().splitlines()) == 1
    code, out, err = run_cli("train", "llama-3.1-8b", "--tokens", "1T", "--schedule", "zigzag")
    assert code == 2 and "schedule" in err
