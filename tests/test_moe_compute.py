"""The routed experts' compute from a chip's measured MoE tables (``specs.kernels.moe_compute_law``,
``Efficiency.moe_compute``): the grouped GEMM's own law η_c,moe·M/(M + M½,moe), not the dense GEMM's. Hand-derived
numbers on synthetic curves, the shipped curves reproduced, and the engine's use of the law."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import rackmath
from rackmath.engine.numbers import moe_compute_law_of
from rackmath.specs.hardware import load_hardware
from rackmath.specs.kernels import kernel_table, moe_compute_law, silicon

SHAPE = dict(experts=256, topk=8, ep=8, hidden=7168, inter=2048)  # DeepSeek-V3's experts, EP 8
PER_M = 256 * 6.0 * 7168 * 2048 / 8  # FLOPs a rank computes per token per expert (F / M)


def _curve(times_of_m):
    t = [64.0, 512.0, 2048.0, 4096.0, 8192.0, 16384.0]  # tokens; M = T · 8 / 256 = 2 … 512 per expert
    return dict(SHAPE, x_values=t, time_s=[times_of_m(x * 8 / 256) for x in t])


def test_law_of_a_compute_bound_kernel_by_hand():
    # a kernel at 30% of a 1 PFLOP/s peak at every size (t ∝ M): η_c,moe = 0.3, M½ = 0
    eta, half = moe_compute_law(_curve(lambda m: m * PER_M / (0.3 * 1e15)), 1e15)
    assert eta == pytest.approx(0.3) and half == pytest.approx(0.0, abs=1e-9)
    # a fixed 0.1 ms on top: η is read at the largest size, M½ from 64–512 tokens per expert
    eta, half = moe_compute_law(_curve(lambda m: 1e-4 + m * PER_M / (0.3 * 1e15)), 1e15)
    t512 = 1e-4 + 512 * PER_M / 0.3e15
    assert eta == pytest.approx(512 * PER_M / (t512 * 1e15))
    a = PER_M / (1e15 * eta)  # t = a · (M + M½), M½ by least squares of the relative error
    ts = {m: 1e-4 + m * PER_M / 0.3e15 for m in (64, 128, 256, 512)}
    want = -sum((a * m / t - 1) * (a / t) for m, t in ts.items()) / sum((a / t) ** 2 for t in ts.values())
    assert half == pytest.approx(want) and half > 0


@pytest.mark.parametrize("chip, dtype", [("gb200", "nvfp4"), ("b200", "fp8_block"), ("h200", "fp8_block")])
def test_shipped_curves_are_reproduced_by_their_law(chip, dtype):
    """Each shipped DeepSeek MoE curve's law gives back its measured times within 25% over its compute-bound part
    (64–512 tokens per expert); NVFP4 on Blackwell is far below the dense GEMM law (η_c,moe < 0.2 of the FP4 peak)."""
    c = next(c for c in kernel_table(chip)["curves"] if c["op"] == "moe" and c["dtype"] == dtype
             and c.get("hidden") == 7168)
    peak = load_hardware(chip).chip.flops["fp4" if dtype == "nvfp4" else "fp8"]
    eta, half = moe_compute_law(c, peak)
    per_m = c["experts"] * 6.0 * c["hidden"] * c["inter"] / c["ep"]
    for t, s in zip(c["x_values"], c["time_s"]):
        m = t * c["topk"] / c["experts"]
        if 64 <= m <= 512:
            assert m * per_m / (peak * eta * m / (m + half)) == pytest.approx(s, rel=0.25)
    if dtype == "nvfp4":
        assert 0.1 < eta < 0.2


def test_law_lookup_prefers_the_models_shape_then_the_fastest():
    laws = (("fp8", 7168, 2048, 0.35, 60.0, "a"), ("fp8", 2880, 2880, 0.44, 30.0, "b"),
            ("bf16", 2880, 2880, 0.14, 6.0, "c"))
    deepseek = SimpleNamespace(d_model=7168, expert_width=2048)
    other = SimpleNamespace(d_model=4096, expert_width=1536)
    assert moe_compute_law_of(deepseek, laws, "fp8")[5] == "a"
    assert moe_compute_law_of(other, laws, "fp8")[5] == "b"  # no table of its shape: the fastest in its dtype
    assert moe_compute_law_of(other, laws, "fp4") is None  # no table in its dtype: the dense GEMM law
    assert moe_compute_law_of(deepseek, (), "fp8") is None


def test_serve_prices_a_prompt_pass_experts_at_the_measured_law():
    """DeepSeek-R1 NVFP4 on GB200, disaggregated, under --efficiency measured: the prefill pass's experts' compute term
    is F / (peak · η_c,moe(M)) with the FP4 DeepSeek curve's law, and --explain names the curve point; the decode
    step's experts keep the dense GEMM law (a tensor-parallel decode step: the stacks' fused decode MoE is another
    kernel path; docs/stacks.md)."""
    kw = dict(gpus=8, prefill_gpus=4, decode_gpus=4, prefill_tp=4, prefill_ep=4, tp=4, ep=4, weights_dtype="nvfp4",
              isl=8192, osl=1024, concurrency=64, framework="dynamo-trtllm")
    r = rackmath.serve("deepseek-r1", "gb200-nvl72", efficiency="measured", **kw)
    times = r._info["prefill_one"].__dict__["times"]
    op = next(o for o in times.ops if o.name == "experts")
    law = next(x for x in silicon(load_hardware("gb200").chip)["moe_compute"]["value"]
               if x[0] == "fp4" and x[1] == 7168)
    assert op.law[:2] == pytest.approx(law[3:5])
    m = float(np.asarray(op.m).ravel()[0])
    want = float(np.asarray(op.flops).ravel()[0]) / (op.peak * law[3] * m / (m + law[4]))
    assert float(np.asarray(times.compute["experts"]).ravel()[0]) == pytest.approx(want, rel=1e-9)
    assert 0.1 < law[3] < 0.2  # NVFP4's grouped GEMM: well under the dense law's η_c ≈ 0.6
    decode = r._res.__dict__["times"]
    assert next(o for o in decode.ops if o.name == "experts").law is None
    # the fitted preset keeps the dense GEMM law everywhere
    p = rackmath.serve("deepseek-r1", "gb200-nvl72", efficiency="preset", **kw)
    assert next(o for o in p._info["prefill_one"].__dict__["times"].ops if o.name == "experts").law is None


def test_explain_names_the_moe_curve_point_of_a_prefill_pass():
    from rackmath.engine.step import measured_points

    r = rackmath.serve("deepseek-r1", "gb200-nvl72", efficiency="measured", gpus=8, prefill_gpus=4, decode_gpus=4,
                       prefill_tp=4, prefill_ep=4, tp=4, ep=4, weights_dtype="nvfp4", isl=8192, osl=1024,
                       concurrency=64, framework="dynamo-trtllm")
    rows = measured_points(r._info["prefill_one"].__dict__["times"])
    row = next(x for x in rows if x["op"] == "experts")
    assert row["symbol"].startswith("η_c,moe(M=") and "MoE deepseek-v3 experts nvfp4" in row["source"]
    text = r.explain().render()
    assert "η_c,moe(M=" in text and "[experts, prefill]" in text
    assert r.explain().check() == []


def test_wide_ep_decode_pool_runs_its_experts_at_the_measured_law():
    """A decode pool under attention DP with experts spread over EP > 1 ranks dispatches every rank's tokens to the
    experts (DeepEP / TensorRT-LLM wide-EP), so its experts run the grouped GEMM's measured law: DeepSeek-R1 NVFP4 on
    a GB200 DEP8 pool at C = 2,048 (2,048 · 8 / 256 = 64 tokens per expert, times the busiest rank's load) has its
    experts' compute term F / (peak · η_c,moe(M)) — over twice the dense law's at that M. The same pool with
    tensor-parallel attention keeps the dense law (the stacks' fused decode MoE)."""
    kw = dict(gpus=12, prefill_gpus=4, decode_gpus=8, prefill_tp=4, prefill_ep=4, prefill_attention_dp=True, tp=8,
              ep=8, weights_dtype="nvfp4", isl=1024, osl=1024, concurrency=2048, framework="dynamo-trtllm")
    law = next(x for x in silicon(load_hardware("gb200").chip)["moe_compute"]["value"]
               if x[0] == "fp4" and x[1] == 7168)
    wide = rackmath.serve("deepseek-r1", "gb200-nvl72", efficiency="measured", attention_dp=True, **kw)
    times = wide._res.__dict__["times"]
    op = next(o for o in times.ops if o.name == "experts")
    m = float(np.asarray(op.m).ravel()[0])
    assert m > 64  # 64 per expert on average, more on the busiest rank
    eta = law[3] * m / (m + law[4])
    want = float(np.asarray(op.flops).ravel()[0]) / (op.peak * eta)
    assert float(np.asarray(times.compute["experts"]).ravel()[0]) == pytest.approx(want, rel=1e-9)
    eff = times.eff
    dense = float(np.asarray(eff.eta_compute)) * m / (m + float(np.asarray(eff.gemm_half_tokens)))
    assert dense / eta > 2.0
    tp = rackmath.serve("deepseek-r1", "gb200-nvl72", efficiency="measured", **kw)
    assert next(o for o in tp._res.__dict__["times"].ops if o.name == "experts").law is None
