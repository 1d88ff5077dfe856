"""The one step model (engine/step.py): special cases, per-operator totals, serving realities, layout flags."""

from __future__ import annotations

import json

import numpy as np
import pytest

import rackmath
from rackmath.analyses.serving import serve as serving
from rackmath.engine.efficiency import IDEAL, Efficiency, default_efficiency, load_efficiency
from rackmath.engine.layout import attention_dp_imbalance, ep_rank_load
from rackmath.engine.roofline import roofline
from rackmath.engine.step import Op, compose
from rackmath.errors import InputError
from conftest import run_cli

SERIAL = Efficiency("t", eta_compute=0.5, eta_memory=0.8, eta_comm=0.7, kernel_latency_s=5e-6,
                    collective_latency_s=1e-5, gemm_half_tokens=32.0, step_overhead_s=1e-3, composition="serial")


def test_compose_is_the_lecture_roofline_when_ideal():
    """η = 1, no latencies, overlapped: t = max(ΣF/peak, ΣB/BW) (lecture 00:00)."""
    ops = [Op("a", flops=2e12, bytes=1e9, peak=1e15, m=64, kernels=3), Op("b", flops=1e11, bytes=4e9, peak=5e14)]
    t = compose(ops, 2e12, IDEAL)
    assert float(t.step) == pytest.approx(max(2e12 / 1e15 + 1e11 / 5e14, 5e9 / 2e12))
    s = compose(ops, 2e12, SERIAL)  # each kernel: latency + max(F/(peak·η_c(M)), B/(BW·η_m)); + scheduler
    a = 3 * 5e-6 + max(2e12 / (1e15 * 0.5 * 64 / 96), 1e9 / (2e12 * 0.8))
    b = max(1e11 / (5e14 * 0.5), 4e9 / (2e12 * 0.8))
    assert float(s.step) == pytest.approx(a + b + 1e-3)


def test_collectives_that_leave_the_scale_up_domain_pay_the_scale_out_latency():
    """t_op = n_kernels·τ + n_coll·τ_c + n_out·τ_out + …: 4 all-reduces of which 2 cross the NIC, τ_c = 10 µs,
    τ_out = 30 µs → 40 + 60 = 100 µs of latency. In a layout, TP 16 over 8-GPU NVLink domains sends both
    all-reduces of every layer across the scale-out network; TP 8 sends none."""
    from dataclasses import replace

    from rackmath.engine.layout import evaluate
    from rackmath.engine.numbers import HwNumbers, ModelNumbers
    from rackmath.specs.hardware import load_hardware
    from rackmath.specs.models import load_model

    eff = replace(SERIAL, scaleout_latency_s=3e-5, step_overhead_s=0.0)
    t = compose([Op("allreduce", collectives=4, scaleout_collectives=2)], 1e12, eff)
    assert float(t.latency["allreduce"]) == pytest.approx(4 * 1e-5 + 2 * 3e-5)
    mn = ModelNumbers.from_model(load_model("llama-3.1-70b"), 1024)
    hw = HwNumbers.from_system(load_hardware("hgx-h100"))
    assert hw.scaleup_size == 8 and mn.n_layers == 80
    for tp, crossing in ((8, 0), (16, 2 * 80)):
        with_out, without = (evaluate(mn, hw, tp=tp, ep=1, pp=1, micro_batch=1, efficiency=e, chips=16).row(0)
                             for e in (eff, replace(eff, scaleout_latency_s=0.0)))
        assert with_out["t_allreduce_s"] - without["t_allreduce_s"] == pytest.approx(crossing * 3e-5, abs=1e-12)


def test_fp8_gemms_launch_an_activation_quantisation_kernel(monkeypatch):
    """With QUANT_KERNELS_PER_GEMM = 1, a GEMM whose weights are ≤ 1 byte per parameter launches one more kernel
    per weight GEMM: routed experts 6 + 2, MLA projections 11 + 5 (3 GEMMs, 2 BMMs), gated FFN 3 + 2; a BF16 one
    does not."""
    import rackmath.engine.step as st

    monkeypatch.setattr(st, "QUANT_KERNELS_PER_GEMM", 1)
    one_byte = dict(weight_bytes=1.0e9, params=1.0e9)  # 1 byte per parameter: quantised; BF16's 2 bytes: not
    assert (st.op_kernels("experts", **one_byte), st.op_kernels("qkv_o_mla", **one_byte),
            st.op_kernels("dense_ffn", **one_byte)) == (8.0, 16.0, 5.0)
    assert st.op_kernels("dense_ffn", 2.0e9, 1.0e9) == 3.0 and st.op_kernels("router", **one_byte) == 3.0
    fp8 = roofline("deepseek-v3", "hgx-h200", batch=1, context=1024, weights_dtype="fp8", efficiency=SERIAL)
    monkeypatch.setattr(st, "QUANT_KERNELS_PER_GEMM", 0)
    base = roofline("deepseek-v3", "hgx-h200", batch=1, context=1024, weights_dtype="fp8", efficiency=SERIAL)
    extra = float(fp8.step_s) - float(base.step_s)
    # 61 layers × 5 MLA GEMMs + 58 MoE layers × (2 routed + 2 shared) + 3 dense layers × 2 = 543 kernels × 5 µs
    # (the attention operator holds its BF16 norms too: "≤ 1 byte per weight" reads "< 1.5 bytes")
    assert extra == pytest.approx((61 * 5 + 58 * 4 + 3 * 2) * 5e-6, rel=1e-9)


def test_mla_and_dsa_layers_launch_their_hand_counted_kernels():
    """DeepSeek-V3 on one chip, decode: 61 layers × (MLA projections 11 + attention 2 + elementwise 4), 3 dense FFN
    layers × 3, 58 MoE layers × (router 3 + shared experts 3 + routed experts 6), LM head 2 = 1,744 kernels.
    DeepSeek-V3.2 adds its lightning indexer, 10 kernels in each of the 61 layers (DSA). Run eagerly, an MLA block's
    host dispatches 1.5 × its 13 (+ 10) kernels (FP8 input quantisations, the prefill path: 19 ≈ 1.5 × 13)."""
    from dataclasses import replace

    from rackmath.engine.step import MLA_EAGER_KERNEL_SCALE

    kw = dict(gpus=8, tp=8, isl=1000, osl=100, concurrency=1, framework="sglang")
    eff = replace(IDEAL, composition="serial")
    v3 = serving.evaluate(serving.plan("deepseek-v3", "hgx-h200", **kw), eff)
    v32 = serving.evaluate(serving.plan("deepseek-v3.2", "hgx-h200", **kw), eff)
    kernels = 61 * (11 + 2 + 4) + 3 * 3 + 58 * (3 + 3 + 6) + 2
    collectives = 2 * 61  # two TP all-reduces a layer
    assert kernels == 1744
    assert sum(float(op.kernels) + float(op.collectives) for op in v3._res.times.ops) == pytest.approx(
        kernels + collectives)
    assert MLA_EAGER_KERNEL_SCALE == 1.5
    assert serving.step_kernels(v3._res) == pytest.approx(kernels + collectives + 0.5 * 61 * 13)
    assert serving.step_kernels(v32._res) - serving.step_kernels(v3._res) == pytest.approx(1.5 * 61 * 10)
    # a GQA model's eager steps dispatch its graph kernels
    gqa = serving.evaluate(serving.plan("llama-3.1-70b", "hgx-h200", **kw), eff)
    assert serving.step_kernels(gqa._res) == pytest.approx(
        sum(float(op.kernels) + float(op.collectives) for op in gqa._res.times.ops))


def test_mla_kernel_scale_multiplies_the_mla_blocks_kernels_and_nothing_else():
    """mla_kernel_scale s: an MLA block runs s × (11 projections + 2 attention) kernels. From s = 1 to s = 3, a
    DeepSeek-V3 decode step gains 2 × 13 × 61 kernels × τ_k = 1,586 × 5 µs in the roofline and in a serving layout
    (serial: every other term unchanged); a GQA model does not move; the shipped presets hold 1 on NVIDIA (the counts
    are the CUDA paths') and the fitted AMD one more."""
    from dataclasses import replace

    three = replace(SERIAL, mla_kernel_scale=3.0)
    for model, extra in (("deepseek-v3", 2 * 13 * 61 * 5e-6), ("llama-3.1-70b", 0.0)):
        a, b = (roofline(model, "hgx-h200", batch=4, context=2048, efficiency=e) for e in (SERIAL, three))
        assert float(b.step_s) - float(a.step_s) == pytest.approx(extra, abs=1e-12)
    kw = dict(gpus=8, tp=8, isl=1000, osl=100, concurrency=1, framework="sglang")
    p = serving.plan("deepseek-v3", "hgx-h200", **kw)
    one, s3 = (serving.evaluate(p, replace(SERIAL, step_overhead_s=0.0, mla_kernel_scale=s)) for s in (1.0, 3.0))
    assert serving.step_kernels(s3._res) - serving.step_kernels(one._res) == pytest.approx(1.5 * 2 * 13 * 61)
    assert float(s3._info["t_decode_gpu"]) - float(one._info["t_decode_gpu"]) == pytest.approx(2 * 13 * 61 * 5e-6)
    assert load_efficiency("hopper-serving").mla_kernel_scale == load_efficiency("blackwell-serving").mla_kernel_scale \
        == load_efficiency("cross-family-serving").mla_kernel_scale == 1.0
    amd = load_efficiency("amd-serving")
    assert amd.mla_kernel_scale > 2.0
    ex = str(rackmath.serve("deepseek-r1", "mi300x-8", tp=8, isl=1000, osl=100, concurrency=4).explain())
    assert f"the MLA blocks' kernels × {amd.mla_kernel_scale:g} (amd-serving's mla_kernel_scale)" in ex
    assert "MLA blocks" not in str(rackmath.serve("llama-3.1-70b", "mi300x-8", tp=8, isl=1000, osl=100,
                                                  concurrency=4).explain())


def test_scaling_book_17ms_is_unchanged():
    """published.md SB2: Llama 3 70B, batch 32 at 8,192, int8 weights + KV, 8 TPU v5e → ≈ 17 ms (ideal)."""
    r = roofline("llama-3.1-70b", "tpu-v5e-pod", chips=8, batch=32, context=8192, weights_dtype="int8",
                 kv_dtype="int8")
    assert float(r.step_s) == pytest.approx(0.0174, rel=0.03)


@pytest.mark.parametrize("eff", [None, SERIAL])
def test_roofline_explain_reproduces_its_value(eff):
    r = roofline("deepseek-v3", "hgx-h200", batch=64, context=4096, efficiency=eff)
    d = r.explain()
    assert d.check() == []
    assert any(s.symbol == "t_step" and s.expr for s in d.steps)


def test_ops_rows_sum_to_the_step():
    """--ops: in a serial composition the operator rows plus the scheduler sum to the step."""
    r = roofline("llama-3.1-70b", "hgx-h100", batch=64, context=8192, efficiency=SERIAL)
    rows = r.ops()
    assert sum(x["time_s"] for x in rows) == pytest.approx(float(r.step_s), rel=1e-9)
    assert {"qkv_o", "dense_ffn", "attention", "lm_head"} <= {x["op"] for x in rows}
    s = rackmath.serve("deepseek-v3", "hgx-h200", gpus=8, tp=8, isl=2000, osl=500, concurrency=16,
                       efficiency=SERIAL)
    rows = s.ops()
    assert {"experts", "router", "shared_experts", "allreduce"} <= {x["op"] for x in rows}
    assert sum(x["time_s"] for x in rows) == pytest.approx(s.decode_step_ms / 1e3, rel=1e-9)


def test_serve_explain_reproduces_every_value():
    for kw in (dict(concurrency=64), dict(concurrency=1, mtp=2, acceptance=2.2), dict(concurrency=512),
               dict(concurrency=256, ep=8, attention_dp=True), dict(concurrency=64, arrivals="poisson"),
               dict(concurrency=256, ep=8, attention_dp=True, arrivals="poisson")):
        r = rackmath.serve("deepseek-v3", "hgx-h200", gpus=8, tp=8, isl=3000, osl=800, framework="sglang", **kw)
        assert r.explain().check() == []


def test_busiest_ep_rank_under_random_routing():
    assert float(ep_rank_load(1000, 1, 256)) == 1.0
    few, many = float(ep_rank_load(64, 8, 256)), float(ep_rank_load(64000, 8, 256))
    assert few > 1.5 and 1.0 < many < 1.05  # balls in bins: the excess shrinks as 1/√N
    assert float(ep_rank_load(64, 8, 256, 32)) < few  # redundant replicas absorb part of the excess
    assert float(ep_rank_load(1, 64, 256)) <= 64


def test_attention_dp_busiest_rank():
    assert float(attention_dp_imbalance(4, 8)) == pytest.approx(2.0)  # 4 sequences on 8 ranks: one each, half idle
    assert float(attention_dp_imbalance(64, 8)) == pytest.approx(1.0)
    assert float(attention_dp_imbalance(65, 8)) == pytest.approx(9 / (65 / 8))


def test_attention_dp_ranks_prefill_independently():
    """A step is mixed when any of R ranks prefills: n = 1 − (1 − f)^R; R = 1 is TP attention (n = f)."""
    assert float(serving.mixed_step_share(0.25, 1)) == pytest.approx(0.25)
    assert float(serving.mixed_step_share(0.066, 8)) == pytest.approx(1 - 0.934 ** 8)  # ≈ 0.42, not 0.066
    assert float(serving.mixed_step_share(1.0, 8)) == 1.0 and float(serving.mixed_step_share(0.0, 8)) == 0.0
    # 16 decode sequences on 8 ranks (2 each, balanced), one rank prefilling a 1,000-token chunk:
    # busiest = 1000 + 2 = 1002 tokens; mean = (16 + 1000) / 8 = 127 → 1002 / 127
    assert float(serving.mixed_step_imbalance(16, 8, 1, 1000.0, 1000.0)) == pytest.approx(1002 / 127)
    # 4 sequences on 8 ranks: the busiest rank holds 1 (imbalance 2 of the decode tokens only), every rank prefills
    assert float(serving.mixed_step_imbalance(4, 8, 1, 500.0)) == pytest.approx((500 + 1) / ((4 + 8 * 500) / 8))


def test_host_time_per_step_and_per_sequence():
    """t_host = t_sched(stack) + n_seq · τ_seq(stack); the generic stack pays the mean of the three."""
    from dataclasses import replace

    from rackmath.engine.efficiency import IDEAL, host_step_s

    e = replace(IDEAL, sched_trtllm_s=1e-3, sched_vllm_s=2e-3, sched_sglang_s=3e-3, seq_trtllm_s=1e-6,
                seq_vllm_s=2e-5, seq_sglang_s=3e-6)
    assert float(host_step_s(e, "vllm", 100)) == pytest.approx(2e-3 + 100 * 2e-5)
    assert float(host_step_s(e, "trtllm", 2048)) == pytest.approx(1e-3 + 2048 * 1e-6)
    assert float(host_step_s(e, "generic", 10)) == pytest.approx(2e-3 + 10 * (1e-6 + 2e-5 + 3e-6) / 3)
    # vLLM's V0 engine has host times of its own, and the generic stack's mean leaves them out
    e0 = replace(e, sched_vllm_v0_s=4e-3, seq_vllm_v0_s=8e-5)
    assert float(host_step_s(e0, "vllm-v0", 100)) == pytest.approx(4e-3 + 100 * 8e-5)
    assert float(host_step_s(e0, "generic", 10)) == pytest.approx(2e-3 + 10 * (1e-6 + 2e-5 + 3e-6) / 3)
    # in serve: vLLM (host serial with the GPU) pays it on every step; 1,000 sequences × 20 µs = 20 ms
    p = serving.plan("llama-3.1-8b", "hgx-h100", gpus=1, tp=1, isl=100, osl=1000, concurrency=1000, framework="vllm")
    a = serving.evaluate(p, replace(IDEAL, composition="serial"))
    b = serving.evaluate(p, replace(IDEAL, composition="serial", seq_vllm_s=2e-5))
    assert b.decode_step_ms - a.decode_step_ms == pytest.approx(20.0, rel=1e-6)


def test_eager_steps_are_dispatch_bound_or_gpu_bound():
    """A prefill / mixed step without a CUDA graph: t = max(t_gpu, n_kernels · τ_eager)."""
    assert float(serving.eager_step(0.010, 1500, 50e-6)) == pytest.approx(0.075)  # 1,500 kernels × 50 µs
    assert float(serving.eager_step(0.200, 1500, 50e-6)) == pytest.approx(0.200)  # a long chunk hides dispatch
    from dataclasses import replace

    from rackmath.engine.efficiency import IDEAL

    # in serve: Llama 3.1 8B has 32 layers; its mixed step launches 32 · (3 + 2 + 3 + 4) + 2 = 386 kernels
    p = serving.plan("llama-3.1-8b", "hgx-h100", gpus=1, tp=1, isl=100, osl=100, concurrency=1, framework="sglang")
    r = serving.evaluate(p, replace(IDEAL, composition="serial", eager_sglang_s=1e-3))
    assert r.mixed_step_ms == pytest.approx(386 * 1.0, rel=1e-9)
    assert serving.step_kernels(r._res) == pytest.approx(386)


def test_time_sliced_prefill_stalls_the_stream():
    t_bar, tpot, x, bound = serving.time_sliced_schedule(0.02, 0.12, 500.0, 1000.0, 10.0, 1.0, 1000.0, 100.0)
    assert float(t_bar) == pytest.approx(0.02 + 0.5 * 0.10)
    assert float(tpot) == pytest.approx(0.02 + 0.5 * 0.9 * 0.10)  # a request's own prefill is its TTFT
    assert not bool(bound) and float(x) == pytest.approx(10 / t_bar)
    # 100 sequences of 1000/20 need p = 5000 prompt tokens per step but a step carries 1000: the budget binds
    _, _, x2, b2 = serving.time_sliced_schedule(0.02, 0.12, 5000.0, 1000.0, 100.0, 1.0, 1000.0, 20.0)
    assert bool(b2) and float(x2) == pytest.approx(1000 * 20 / (1000 * 0.12))


def test_lock_step_waves():
    """wave_schedule, hand-derived: 8 prompts of 3,200 tokens through 8,192-token passes of 0.2 s, 30 ms decode."""
    ttft, tpot, x, t_wave = serving.wave_schedule(8.0, 1, 3200.0, 800.0, 8192.0, 0.2, 0.03)
    n = 3200 / 8192  # passes per prompt
    assert float(t_wave) == pytest.approx(8 * n * 0.2)  # 0.625 s: the wave's 25,600 prompt tokens
    assert float(ttft) == pytest.approx((n * 9 / 2 + 0.5) * 0.2)  # 0.452 s: prompt i done after ⌈i·n⌉ passes
    assert float(tpot) == pytest.approx((0.625 - float(ttft) + 799 * 0.03) / 799)  # waits for the rest of the wave
    assert float(x) == pytest.approx(8 * 800 / (0.625 + 799 * 0.03))  # 260.2 tok/s
    # one client: Little's law, X = OSL / (TTFT + (OSL − 1) · TPOT), TPOT = the decode step
    ttft1, tpot1, x1, _ = serving.wave_schedule(1.0, 1, 3200.0, 800.0, 8192.0, 0.2, 0.03)
    assert (float(ttft1), float(tpot1)) == pytest.approx((0.2, 0.03))
    assert float(x1) == pytest.approx(800 / (0.2 + 799 * 0.03))
    # a prompt longer than a pass: two full passes and a partial one (3,616 tokens) before its first token
    assert float(serving.wave_schedule(1.0, 1, 20000.0, 100.0, 8192.0, 0.2, 0.03)[0]) == pytest.approx(
        20000 / 8192 * 0.2)
    # in serve: --arrivals waves moves the prefill out of TPOT into TTFT; the derivation reproduces every value
    kw = dict(gpus=8, tp=8, isl=3200, osl=800, concurrency=8, framework="sglang", efficiency="hopper-serving")
    steady = rackmath.serve("deepseek-v3", "hgx-h200", **kw)
    waves = rackmath.serve("deepseek-v3", "hgx-h200", arrivals="waves", **kw)  # SGLang runs prefill first: they persist
    assert waves.ttft_ms > 2 * steady.ttft_ms and waves.tpot_ms < steady.tpot_ms
    assert waves.explain().check() == [] and "waves" in [s.symbol for s in waves.explain().steps]
    # vLLM V1 mixes prefill into decode steps: a wave of 25,600 prompt tokens (4 passes) spreads out
    mixed = rackmath.serve("deepseek-v3", "hgx-h200", arrivals="waves", **{**kw, "framework": "vllm"})
    assert mixed.ttft_ms == pytest.approx(rackmath.serve("deepseek-v3", "hgx-h200", **{**kw, "framework": "vllm"})
                                          .ttft_ms) and mixed.explain().check() == []
    assert not serving.waves_persist(False, 8, 1, 3200, 8192) and serving.waves_persist(False, 2, 1, 3200, 8192)
    with pytest.raises(InputError) as e:
        rackmath.serve("deepseek-v3", "hgx-h200", arrivals="burst", **kw)
    assert e.value.field == "arrivals"


def test_vllm_v0_stack_runs_prefill_first_with_its_own_host_times():
    from rackmath.analyses.serving.simulate import framework_defaults
    from rackmath.engine.efficiency import load_efficiency, stack_eager_s, stack_sched_s, stack_seq_s

    st = serving.load_stack("vllm-v0")
    assert st.prefill_first and (st.max_num_tokens, st.max_batch_size) == (32768, 256)
    eff = load_efficiency("hopper-serving")
    for fn, name in ((stack_sched_s, "sched"), (stack_seq_s, "seq"), (stack_eager_s, "eager")):
        assert fn(eff, "vllm-v0") == getattr(eff, f"{name}_vllm_v0_s")  # V0's synchronous engine, fitted apart
    assert framework_defaults("vllm-v0") == dict(max_batch=256, budget=32768, name="vllm-v0")
    # 8 prompts of 3,200 tokens fit one 32,768-token pass: the wave persists (V1's 8,192 would take 4 passes)
    kw = dict(gpus=8, tp=8, isl=3200, osl=800, concurrency=8, arrivals="waves", efficiency="hopper-serving")
    assert bool(rackmath.serve("deepseek-v3", "hgx-h200", framework="vllm-v0", **kw)._info["waves"])
    assert not bool(rackmath.serve("deepseek-v3", "hgx-h200", framework="vllm", **kw)._info["waves"])


def test_each_stack_pays_its_own_time_per_request():
    """t_request = t_req,all + t_req(stack) (engine.efficiency.stack_request_s): TensorRT-LLM, vLLM and SGLang their
    own, vLLM's V0 engine vLLM's, any other stack the mean of the three; serve's TTFT moves by exactly the
    difference, and its derivation prints the stack's value."""
    from dataclasses import replace

    from rackmath.engine.efficiency import load_efficiency, stack_request_s

    eff = replace(load_efficiency("hopper-serving"), request_overhead_s=0.01, request_trtllm_s=0.02,
                  request_vllm_s=0.05, request_sglang_s=0.0)
    assert stack_request_s(eff, "trtllm") == pytest.approx(0.03)
    assert stack_request_s(eff, "vllm") == stack_request_s(eff, "vllm-v0") == pytest.approx(0.06)
    assert stack_request_s(eff, "sglang") == pytest.approx(0.01)
    assert stack_request_s(eff, "generic") == stack_request_s(eff, "atom") == pytest.approx(0.01 + 0.07 / 3)
    kw = dict(gpus=8, tp=8, isl=1000, osl=500, concurrency=4, arrivals="waves")
    a = rackmath.serve("llama-3.1-70b", "hgx-h100", framework="sglang", efficiency=eff, **kw)
    b = rackmath.serve("llama-3.1-70b", "hgx-h100", framework="sglang",
                       efficiency=replace(eff, request_sglang_s=0.04), **kw)
    assert b.ttft_ms - a.ttft_ms == pytest.approx(40.0, rel=1e-9) and b.tpot_ms == pytest.approx(a.tpot_ms)
    # the result carries the stack's t_request; the preset's field keeps its own meaning (the part every stack pays)
    assert b.explain().check() == [] and float(b._info["t_request"]) == pytest.approx(0.05)
    assert float(b._eff.request_overhead_s) == pytest.approx(0.01) and "t_request = 50 ms" in str(b.explain())


def test_speculative_step_runs_the_draft_k_times():
    r = rackmath.serve("deepseek-v3", "hgx-h200", gpus=8, tp=8, isl=1000, osl=1000, concurrency=1, mtp=3,
                       acceptance=2.5, framework="sglang", efficiency="preset")
    d = {s.symbol: s.value for s in r.explain().steps}
    assert d["t_decode"] == pytest.approx(d["t_verify"] + 3 * d["t_draft"])
    base = rackmath.serve("deepseek-v3", "hgx-h200", gpus=8, tp=8, isl=1000, osl=1000, concurrency=1,
                          framework="sglang", efficiency="preset")  # one efficiency for both (auto: see below)
    assert 1.3 < base.tpot_ms / r.tpot_ms < 2.5  # faster per user, by less than the acceptance


def test_each_draft_pass_pays_the_host_time_where_the_host_is_not_overlapped():
    """SGLang under speculation runs its host work serially (overlap scheduler off): the verification and each of
    the k draft passes pay t_host = t_sched + n·τ_seq. Raising SGLang's scheduler time by 4 ms raises the step by
    (k + 1)·4 ms = 16 ms at k = 3; TensorRT-LLM keeps its overlap scheduler with MTP, so its draft passes pay none."""
    from dataclasses import replace

    eff = replace(load_efficiency("hopper-serving"), sched_sglang_s=0.001, sched_trtllm_s=0.001)
    kw = dict(gpus=8, tp=8, isl=1000, osl=1000, concurrency=1, mtp=3, acceptance=2.5)
    a, b = (rackmath.serve("deepseek-v3", "hgx-h200", framework="sglang", efficiency=e, **kw)
            for e in (eff, replace(eff, sched_sglang_s=0.005)))
    da, db = ({s.symbol: s.value for s in x.explain().steps} for x in (a, b))
    assert db["t_draft"] - da["t_draft"] == pytest.approx(0.004) and db["t_verify"] - da["t_verify"] == pytest.approx(0.004)
    assert db["t_decode"] - da["t_decode"] == pytest.approx(4 * 0.004)
    assert "t_host" in str(b.explain()) and b.explain().check() == []
    c, d = (rackmath.serve("deepseek-v3", "hgx-h200", framework="trtllm", efficiency=e, **kw)
            for e in (eff, replace(eff, sched_trtllm_s=0.002)))
    dc, dd = ({s.symbol: s.value for s in x.explain().steps} for x in (c, d))
    assert dd["t_draft"] == dc["t_draft"]  # hidden behind the GPU, as the verification's is below its GPU time


def test_layout_flags_mean_what_they_say():
    """--ep and --attention-dp without --tp: the chosen layout honours them."""
    r = rackmath.serve("deepseek-v3", "gb200-nvl72", gpus=72, ep=72, attention_dp=True, redundant_experts=32,
                       isl=2000, osl=1000, concurrency=4096)
    assert (r.layout["tp"], r.layout["ep"], r.layout["attention_dp"]) == (72, 72, True)
    with pytest.raises(InputError) as e:  # without redundant experts: the lecture's ways out, not a TP error
        rackmath.serve("deepseek-v3", "gb200-nvl72", gpus=72, ep=72, attention_dp=True, isl=2000, osl=1000,
                       concurrency=4096)
    assert e.value.field == "ep" and "redundant experts" in str(e.value)
    r = rackmath.serve("qwen3-235b-a22b", "hgx-h200", gpus=8, ep=8, attention_dp=True, isl=1000, osl=1000,
                       concurrency=256)
    assert (r.layout["tp"], r.layout["ep"], r.layout["attention_dp"]) == (8, 8, True)


def test_attention_dp_over_groups_means_what_it_says():
    """SGLang's --tp 8 --dp 4 --enable-dp-attention = attention DP over 4 groups of 2 GPUs: the layout says so, the
    4 ranks schedule (and prefill) independently, and the MLA KV (one latent head, replicated under TP) is split 4
    ways, so 4× the sequences fit next to the same experts; the group size must divide TP (one-line error)."""
    kw = dict(gpus=8, tp=8, ep=4, isl=195, osl=276, concurrency=100, framework="sglang", weights_dtype="fp8")
    r = rackmath.serve("kimi-k2", "hgx-b200", attention_dp_size=4, **kw)
    assert (r.layout["attention_dp"], r.layout["attention_dp_size"]) == (True, 4)
    assert r.layout["label"] == "TP8 EP4 attnDP4 ×1"
    assert "R = 4 attention ranks" in r.explain().render() and not r.explain().check()
    t = rackmath.serve("kimi-k2", "hgx-b200", **kw)
    assert t.layout["attention_dp_size"] == 1 and not t.layout["attention_dp"]
    f = rackmath.serve("kimi-k2", "hgx-b200", attention_dp=True, **kw)
    assert f.layout["attention_dp_size"] == 8
    # KV per sequence per GPU: all of it under TP (MLA replicated), 1/4 with four groups, 1/8 on every GPU its own
    cap = [float(x.values["max_concurrency"]) for x in (t, r, f)]
    assert cap[0] < cap[1] < cap[2]
    code, out, err = run_cli("serve", "kimi-k2", "--hardware", "hgx-b200", "--tp", "8", "--isl", "195", "--osl", "276",
                             "-c", "1", "--attention-dp-size", "3")
    assert code == 2 and err.count("\n") == 1 and "attention_dp_size" in err and "divisor of tp: 1, 2, 4, 8" in err
    code, out, err = run_cli("serve", "kimi-k2", "--hardware", "hgx-b200", "--isl", "195", "--osl", "276", "-c", "1",
                             "--attention-dp-size", "16")
    assert code == 2 and "attention_dp_size" in err and "at most the 8 GPUs" in err
    code, out, err = run_cli("serve", "kimi-k2", "--hardware", "hgx-b200", "--tp", "8", "--isl", "195", "--osl", "276",
                             "-c", "1", "--attention-dp-size", "2", "--json")
    assert code == 0 and json.loads(out)["layout"]["label"] == "TP8 attnDP2 ×1"


def test_the_chooser_tries_attention_dp_over_every_group_count():
    """With --tp omitted the layout search includes attention DP over R groups for every R dividing TP, not only R = 1
    (plain TP) and R = TP (every GPU its own sequences): DeepSeek-V3 on 16 × H200 at C = 256. The finalists include
    partial R; the chosen layout's numbers are those of the same layout given by hand, and by the chooser's figure of
    merit (max(TPOT, C / X_out)) it is no worse than any finalist or than TP16 EP16 with R = 1, 4 or 16. (Which R wins
    moves with the fitted presets: R = 4 of TP16 with those of 3d9b765, R = 8 of TP8 with those of 400b755.)"""
    from rackmath.analyses.serving import serve as serving
    from rackmath.engine.efficiency import load_efficiency

    kw = dict(gpus=16, isl=2000, osl=1000, concurrency=256, framework="sglang")
    p = serving.plan("deepseek-v3", "hgx-h200", **kw)
    cands = serving.choose_layout(p.numbers("decode"), p.system, load_efficiency(p.efficiency), 16, 256.0, hw=p.hw(),
                                  sched_overlap=True, top=serving.LAYOUT_FINALISTS)
    assert any(c["attention_dp"] and 1 < c["attention_dp_size"] < c["tp"] for c in cands)
    c = rackmath.serve("deepseek-v3", "hgx-h200", **kw)
    tp, ep, R = c.layout["tp"], c.layout["ep"], c.layout["attention_dp_size"]
    same = rackmath.serve("deepseek-v3", "hgx-h200", tp=tp, ep=ep, attention_dp_size=R if R > 1 else None, **kw)
    assert same.values["tpot_ms"] == pytest.approx(c.values["tpot_ms"], rel=1e-12)

    def per_token(r):  # the chooser's figure of merit: max(TPOT, C / X_out)
        return max(r.values["tpot_ms"] / 1e3, 256 / (r.values["output_tok_s_per_gpu"] * 16))

    others = [dict(tp=16, ep=16), dict(tp=16, ep=16, attention_dp_size=4), dict(tp=16, ep=16, attention_dp=True)]
    others += [dict(tp=x["tp"], ep=x["ep"], pp=x["pp"], attention_dp_size=x["attention_dp_size"])
               if x["attention_dp"] and 1 < x["attention_dp_size"] < x["tp"] else
               dict(tp=x["tp"], ep=x["ep"], pp=x["pp"], attention_dp=x["attention_dp"]) for x in cands]
    for other in others:
        assert per_token(c) <= per_token(rackmath.serve("deepseek-v3", "hgx-h200", **other, **kw)) * (1 + 1e-9), other


def test_every_chip_gets_a_named_non_ideal_default():
    from rackmath.specs.hardware import chips

    for name in chips().names():
        eff = default_efficiency(name)
        assert eff.name != "ideal", name
    amd = default_efficiency("mi300x")
    assert amd.name == "amd-serving" and not amd.cross_family
    cross = load_efficiency("cross-family-serving")
    assert cross.cross_family and "cross-family" in cross.label()


def test_framework_presets():
    kw = dict(gpus=1, tp=1, isl=20000, osl=200, concurrency=16)
    v = rackmath.serve("llama-3.1-8b", "hgx-h100", framework="vllm", **kw)
    s = rackmath.serve("llama-3.1-8b", "hgx-h100", framework="sglang", **kw)
    g = rackmath.serve("llama-3.1-8b", "hgx-h100", **kw)
    assert (v.framework, s.framework, g.framework) == ("vllm", "sglang", "generic")
    assert v.ttft_ms != g.ttft_ms  # 8,192-token chunks vs whole 20,000-token prompts
    assert serving.load_stack("tensorrt-llm").name == "trtllm" and serving.load_stack(None).max_num_tokens is None
    with pytest.raises(InputError) as e:
        rackmath.serve("llama-3.1-8b", "hgx-h100", framework="tgi", **kw)
    assert e.value.field == "framework"


def test_evaluate_broadcasts_candidate_efficiencies():
    """serving.evaluate(plan, efficiency) with array fields = the K presets one by one (what calibration uses)."""
    p = serving.plan("qwen3-235b-a22b", "hgx-h200", gpus=8, tp=8, ep=8, isl=1000, osl=1000, concurrency=128,
                     framework="trtllm")
    etas = np.array([0.3, 0.6, 0.9])
    many = serving.evaluate(p, Efficiency("k", eta_memory=etas, eta_compute=0.5, kernel_latency_s=4e-6))
    one = [serving.evaluate(p, Efficiency("k", eta_memory=e, eta_compute=0.5, kernel_latency_s=4e-6)).tpot_ms
           for e in etas]
    assert np.allclose(np.asarray(many.values["tpot_ms"]), one)
