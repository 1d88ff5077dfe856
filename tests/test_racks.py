"""Chapter two: MoE on racks, scale-up domains (analyses/lecture/racks.py, claims R16–R22, `rackmath racks`)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rackmath.analyses.lecture import racks as ra
from rackmath.specs.hardware import load_hardware
from rackmath.specs.models import load_model

from conftest import run_cli


def test_r16_use_64_of_72_gpus_4_experts_each():
    assert ra.gpus_for_even_experts(256, 72) == 64
    assert float(ra.experts_per_gpu(256, 64)) == 4.0
    assert float(ra.experts_per_gpu(256, 72)) == 4.0  # most-loaded GPU if all 72 are used


def test_deepseek_redundant_experts_fill_144_gpus():
    """published.md D3: 32 redundant experts, EP144 → (256 + 32)/144 = 2 per GPU."""
    assert float(ra.redundant_experts_to_fill(256, 144)) == 32.0


def test_r21_hopper_box_640_gb_and_blackwell_rack_10_to_20_tb():
    h, b = load_hardware("hgx-h100"), load_hardware("gb200-nvl72")
    assert float(ra.domain_memory(h.chip.hbm_bytes, h.scaleup_size)) == pytest.approx(640e9)
    bw = float(ra.domain_memory(b.chip.hbm_bytes, b.scaleup_size))
    assert bw == pytest.approx(13.4e12, rel=0.01)  # published.md H5: 13.4–13.5 TB
    # "enough for a 5T model plus KV cache": 5T params at fp8 leave > 8 TB for KV
    assert bw - float(ra.weight_bytes(5e12, 1.0)) > 8e12


def test_r25_trillion_parameters_need_one_terabyte():
    assert float(ra.weight_bytes(1e12, 1.0)) == 1e12


def test_r29_latency_floor_uses_scaleup_times_per_gpu_bandwidth():
    """2T fp8 weights: Hopper box 2e12/(8·3.35e12) = 74.6 ms; Blackwell rack 2e12/(72·8e12) = 3.47 ms."""
    h, b = load_hardware("hgx-h100"), load_hardware("gb200-nvl72")
    th = float(ra.weight_load_time(2e12, h.scaleup_size, h.chip.hbm_bw))
    tb = float(ra.weight_load_time(2e12, b.scaleup_size, b.chip.hbm_bw))
    assert th == pytest.approx(74.6e-3, rel=1e-3)
    assert tb == pytest.approx(3.472e-3, rel=1e-3)
    assert b.scaleup_size / h.scaleup_size == 9  # lecture: "increased by a factor of 8 from Hopper"


def test_r22_total_params_limited_by_scaleup_size():
    kv = float(load_model("deepseek-v3").kv_cache_bytes(8192))
    h, b = load_hardware("hgx-h100"), load_hardware("gb200-nvl72")
    nh = float(ra.max_params_in_domain(ra.domain_memory(h.chip.hbm_bytes, 8), 1.0, kv, 512))
    nb = float(ra.max_params_in_domain(ra.domain_memory(b.chip.hbm_bytes, 72), 1.0, kv, 512))
    assert nh < 1e12 < 5e12 < nb


def test_latency_floor_grid_shapes_and_fit():
    systems = [load_hardware(n) for n in ("hgx-h100", "gb200-nvl72", "rubin-ultra-nvl576")]
    g = ra.latency_floor_grid([1e12, 2e12, 5e12], systems)
    assert g["t_floor_s"].shape == (3, 3)
    assert g["fits"].tolist()[0] == [False, False, False]  # 640 GB holds none of them at fp8
    assert g["fits"].tolist()[1] == [True, True, True]
    assert g["domains_needed"][0, 2] == 8  # 5 TB / 640 GB


def test_r17_two_racks_hand_formula():
    """Half the traffic leaves: slowdown = max(½·(…)/BW_up, ½/BW_out) / ((S−1)/S / BW_up) = ½·(900/50)·72/71."""
    assert float(ra.two_rack_slowdown(72, 900e9, 50e9)) == pytest.approx(0.5 * 18 * 72 / 71)
    # the lecture's 8× scale-out penalty: two racks ≈ 4× slower
    assert float(ra.two_rack_slowdown(64, 8.0, 1.0)) == pytest.approx(0.5 * 8 * 64 / 63)


def test_r19_h100_scaleout_about_8x_slower():
    c = load_hardware("hgx-h100").chip
    assert float(ra.scaleout_slowdown(c.scaleup_bw, c.scaleout_bw)) == pytest.approx(9.0)  # 450 GB/s vs 50 GB/s


def test_vectorized():
    out = ra.weight_load_time(np.array([1e12, 2e12]), np.array([[8], [72]]), 8e12)
    assert out.shape == (2, 2)


def test_chapter_two_claims_agree():
    from rackmath.claims import ch2_racks

    cl = {c.id: c for c in ch2_racks.claims()}
    assert {"R16", "R17", "R18", "R19", "R20", "R21", "R21-b", "R22"} <= set(cl)
    assert all(c.agrees for c in cl.values()), [c.id for c in cl.values() if not c.agrees]
    assert cl["R16"].value == 4.0


def test_cli_racks_commands():
    code, out, err = run_cli("racks", "scaleup", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert "hgx-h100" in d["systems"]
    code, out, err = run_cli("racks", "moe-2racks", "--hardware", "gb200-nvl72", "--json")
    assert code == 0, err
    steps = {s["symbol"]: s["value"] for s in json.loads(out)["steps"]}
    assert steps["share out"] == 0.5
    code, out, err = run_cli("racks", "memory", "deepseek-v3", "--hardware", "gb200-nvl72", "--tp", "72", "--ep", "72",
                             "--attention-dp")
    assert code == 2 and "64 of the 72" in err
    code, out, err = run_cli("racks", "memory", "deepseek-v3", "--hardware", "gb200-nvl72", "--tp", "64", "--ep", "64",
                             "--attention-dp", "--allow-idle", "-c", "4096", "--json")
    assert code == 0, err
    assert json.loads(out)["fits"] is True


def test_cli_layout_compares_popes_weight_layouts():
    """``--weight-layout``: PaLM 540B decoding 64 sequences at 2,048 tokens on 64 TPU v4 (P5's shape), one stage.
    Activations 64 · 18,432 · 2 B = 2.359 MB a layer. The ideal 1D all-reduce: 118 · (2 · 63/64 · 2.359 MB /
    270 GB/s + 5 µs) = 2.62 ms; 2D (X = 4, YZ = 16) moves 0.84375 of one activation volume a layer in four
    collectives: 118 · (0.84375 · 2.359 MB / 270 GB/s + 4 · 5 µs) = 3.23 ms — at this batch the extra collectives'
    latency outweighs the bytes saved."""
    args = ("layout", "palm-540b", "-H", "tpu-v4-pod", "-n", "64", "-L", "2048", "--weights-dtype", "int8",
            "-b", "64", "--max-pp", "1", "--ideal")
    rows = {}
    for wl in ("1d", "2d"):
        code, out, err = run_cli(*args, "--weight-layout", wl, "--json")
        assert code == 0, err
        f = json.loads(out)["frontier"]
        i = f["tp"].index(64)
        rows[wl] = {k: v[i] for k, v in f.items()}
    act = 64 * 18432 * 2
    assert rows["1d"]["t_allreduce_s"] == pytest.approx(118 * (2 * 63 / 64 * act / 270e9 + 5e-6), rel=1e-9)
    assert rows["2d"]["t_allreduce_s"] == pytest.approx(118 * (0.84375 * act / 270e9 + 4 * 5e-6), rel=1e-9)
    assert rows["1d"]["t_allreduce_s"] == pytest.approx(2.62e-3, rel=2e-3)
    assert rows["2d"]["t_allreduce_s"] == pytest.approx(3.23e-3, rel=2e-3)
    assert rows["2d"]["weight_layout"] == "2d" and rows["1d"]["weight_layout"] == "1d"
    code, out, err = run_cli(*args, "--weight-layout", "2d")
    assert code == 0 and "TP64·2D×1" in out, err


def test_cli_layout_json_and_plot(tmp_path):
    code, out, err = run_cli("layout", "deepseek-v3", "--hardware", "gb200-nvl72", "--chips", "72", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["n_evaluated"] > 10_000 and len(d["frontier"]["usd_per_mtok"]) > 3
    code, out, err = run_cli("layout", "deepseek-v3", "--hardware", "gb200-nvl72", "--chips", "0")
    assert code == 2 and "gpus" in err
    p = tmp_path / "pareto.png"
    code, out, err = run_cli("plot", "pareto", "deepseek-v3", "--hardware", "gb200-nvl72", "--chips", "72",
                             "--output", str(p))
    assert code == 0, err
    assert p.stat().st_size > 1000
