"""Chapter five: the context wall (R42). Hand-derived from the lecture's numbers and published configs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import run_cli
from rackmath.analyses.lecture import context as cx


def test_kv_read_kinds():
    L = np.array([1e3, 1e5, 1e6])
    assert cx.kv_read_dense(L, 1000) == pytest.approx(L * 1000)
    # window 4096 on 5/6 of the bytes: at 1M tokens reads 1/6·1M + 5/6·4096 tokens' worth
    assert cx.kv_read_windowed(1e6, 1000 / 6, 5000 / 6, 4096) == pytest.approx(1e6 * 1000 / 6 + 4096 * 5000 / 6)
    # DeepSeek top-2048: constant beyond k plus the index keys
    assert cx.kv_read_topk(1e6, 1000, 2048, 200) == pytest.approx(2048 * 1000 + 1e6 * 200)
    # √L past an 8K knee: 1M tokens read like √(1M·8192) = 90.5K tokens
    assert cx.kv_read_sqrt(1e6, 1.0, 8192) == pytest.approx(90_510, rel=1e-4)


def test_crossover_and_curves():
    # large batch: L* → bpp·N/(r·b) = 200K for the lecture's 1,667 B
    assert cx.crossover_dense(batch=1e9, bytes_per_token=1666.667) == pytest.approx(200e3, rel=1e-4)
    # at B = 1000, B*/B = 0.3 of the budget is weights: L* = 0.7 × 200K
    assert cx.crossover_dense(batch=1000, bytes_per_token=1666.667) == pytest.approx(140e3, rel=1e-4)
    L = np.geomspace(1e3, 1e8, 500)
    c = cx.context_curves(L, batch=1e9)
    assert c["dense"][-1] == pytest.approx(1e8 / 200e3, rel=1e-2)  # 500× at 100M
    # sparse and windowed attention push the wall out; √L furthest
    x = {k: cx.first_crossing(L, v) for k, v in c.items()}
    assert x["dense"] == pytest.approx(200e3, rel=2e-2)
    assert x["dense"] < x["sparse top-k"] and x["dense"] < x["sliding-window"] < x["sqrt"]


def test_hundred_million_context():
    w = cx.context_wall(batch=1e12, target_context=100e6, peak_flops=1978.9e12, mem_bw=3.35e12)
    # bandwidth: 100M · 1667 B · 1978.9e12 / 2e11 = 1.65e15 B/s, ≈ 492× H100's 3.35 TB/s
    assert w.bandwidth_needed == pytest.approx(100e6 * 1667 * 1978.9e12 / 2e11, rel=1e-6)
    assert w.bandwidth_multiple == pytest.approx(492.4, rel=1e-3)
    assert w.capacity_needed == pytest.approx(166.7e9, rel=1e-3)  # one sequence: 167 GB


def test_max_context_fit():
    # 8 × 80 GB − 100 GB weights at batch 1000 and 1667 B/token: 540e9 / 1.667e6 = 324K tokens
    assert cx.max_context_fit(640e9, 100e9, 1000, 1667) == pytest.approx(323_935, rel=1e-4)
    assert cx.max_context_fit(50e9, 100e9, 1, 1667) == 0


def test_quadratic_onset_llama_405b():
    # published.md C5: 126 layers, 128 heads, d_head 128; a = 4·126·128·128 = 8.26M FLOPs per context token
    a = cx.dense_attention_flops_per_ctx_token(126, 128, 128)
    assert a == pytest.approx(8_257_536)
    assert cx.quadratic_onset_context(405e9, a) == pytest.approx(98_092, rel=1e-3)
    # per context token, KV read (516 KB at 3.35 TB/s) costs ~18× the attention FLOPs (989 TFLOP/s)
    s = cx.attention_slope_ratio(a, 2 * 8 * 128 * 126 * 2, 989.4e12, 3.35e12)
    assert s == pytest.approx(0.0542, rel=1e-2)


def test_model_adapters():
    from rackmath.specs.hardware import load_hardware
    from rackmath.specs.models import load_model

    m, hw = load_model("llama-3.1-70b"), load_hardware("h100")
    # 8 × 80 GB − 141 GB bf16 weights = 499 GB; at batch 16, 327,680 B/token → ~95K tokens
    lmax = cx.max_context_for(m, hw, batch=16)
    free = 8 * 80e9 - float(m.weight_bytes(None))
    assert lmax == pytest.approx(free / (16 * 327_680), rel=0.02)
    x = cx.crossover_for(m, hw, batch=1e6)
    assert np.isfinite(x) and x < 2e3  # GQA 70B: 328 KB/token is memory-bound almost at once


def test_cli_context():
    code, out, err = run_cli("context", "--json", "--batch", "1G")
    assert code == 0, err
    d = json.loads(out)
    # H100 fp8 ratio (1978.9e12/2)/3.35e12 = 295.36: 100e9 / (295.36 · 1667) = 203,100 tokens
    assert d["crossover"] == pytest.approx(203_100, rel=1e-3)
    code, out, err = run_cli("context", "--model", "llama-3.1-70b", "--batch", "16", "--explain")
    assert code == 0 and "L_max" in out
    for args in (("context", "--batch", "-1"), ("context", "--target", "lots"), ("context", "--model", "nope")):
        code, out, err = run_cli(*args)
        assert code == 2 and err.startswith("error:") and len(err.strip().splitlines()) == 1


def test_plots(tmp_path):
    code, out, err = run_cli("plot", "price-context", "gemini-3.1-pro", "-o", str(tmp_path / "a.png"))
    assert code == 0, err
    code, out, err = run_cli("plot", "tiers", "-o", str(tmp_path / "b.svg"))
    assert code == 0, err
    assert (tmp_path / "a.png").stat().st_size > 1000 and (tmp_path / "b.svg").stat().st_size > 1000


def test_claims_chapter5():
    from rackmath.claims import ch5_pricing

    cl = {c.id: c for c in ch5_pricing.claims()}
    assert cl["R36"].value == pytest.approx(1666.7, rel=1e-3) and cl["R36"].agrees
    # the rule `cache` uses: two TTLs priced differently on two tiers, each by drain time → flash (~10 min) for 5 min,
    # disk (~1 day) for 1 h; nearest drain alone would put both on flash (in the inputs)
    assert cl["R40"].agrees and cl["R40"].kind == "lookup" and cl["R41"].agrees
    assert cl["R41-ttl"].value == "flash/disk" and cl["R41-ttl"].agrees
    assert cl["R41-ttl"].inputs["each TTL alone, nearest drain"] == "flash/flash"
    assert not cl["R42-q"].agrees  # frontier-100b: attention FLOPs match matmuls near 76K, not millions
