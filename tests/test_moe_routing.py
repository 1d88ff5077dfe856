"""A skewed router's distinct experts from measured MoE tables (issue 34): the share s(T) of uniform routing's count,
its reduction from two timed rows, and its use by ``--efficiency measured`` only."""

from dataclasses import replace

import numpy as np
import pytest

from rackmath.engine.efficiency import resolve
from rackmath.engine.layout import evaluate
from rackmath.engine.numbers import HwNumbers, ModelNumbers, distinct_experts_hit, routing_curve, routing_share_at
from rackmath.specs.hardware import load_hardware
import rackmath.specs.kernels as K
from rackmath.engine.numbers import routing_share
from rackmath.specs.kernels import kernel_table
from rackmath.specs.models import load_model

#: Uniform routing's distinct experts of gpt-oss-120b's layer (E = 128, k = 4) at T = 32 tokens, by hand:
#: (31/32)^32 = exp(32 · ln 0.96875) = exp(−1.01596) = 0.36205, so 128 · (1 − 0.36205) = 81.66.
UNIFORM_32 = 81.66


def test_distinct_experts_with_a_share():
    assert float(distinct_experts_hit(128, 4, 32)) == pytest.approx(UNIFORM_32, abs=0.01)
    assert float(distinct_experts_hit(128, 4, 32, 0.75)) == pytest.approx(0.75 * UNIFORM_32, abs=0.01)  # 61.24
    assert float(distinct_experts_hit(128, 4, 1, 1.0)) == pytest.approx(4.0)  # one token: its k experts
    assert float(distinct_experts_hit(128, 4, 1000, 2.0)) == 128.0  # never more than E
    got = distinct_experts_hit(128, 4, np.array([1.0, 32.0]), np.array([1.0, 0.5]))  # broadcasts
    assert got == pytest.approx([4.0, 0.5 * UNIFORM_32], abs=0.01)


def test_two_synthetic_rows_reduce_to_a_share():
    # τ = 2 µs, 10 µs per expert streamed; at T = 32 the balanced row hits min(128, 32·4) = 128 experts (1282 µs),
    # the skewed row 64 (642 µs): r = 640/1280 = 0.5 and s = 0.5 · 128 / 81.66 = 0.7838.
    assert float(routing_share(642e-6, 1282e-6, 2e-6, 128, 4, 32)) == pytest.approx(0.5 * 128 / UNIFORM_32, abs=1e-3)
    # a skewed row slower than the balanced one (its busiest experts' tokens cost compute) counts as balanced:
    # r capped at 1, s = min(E, T·k) / uniform = 32 / (128 · (1 − (31/32)^8)) = 32 / 28.70 = 1.115 at T = 8.
    assert float(routing_share(2e-3, 1e-3, 2e-6, 128, 4, 8)) == pytest.approx(32 / 28.70, abs=2e-3)


def test_shipped_curves_reduce_from_their_own_times():
    """Every shipped routing curve's shares are :func:`routing_share` of the two measured times it stores, with its
    floor τ: the reduction is the curve (invariant), and each names the table and distribution it came from."""
    n = 0
    for chip in ("h100", "h200", "b200", "gb200", "gb300"):
        for c in (c for c in kernel_table(chip)["curves"] if c["op"] == "moe_routing"):
            want = routing_share(np.array(c["time_s"]), np.array(c["balanced_time_s"]), c["floor_s"], c["experts"],
                                 c["topk"], np.array(c["x_values"]))
            assert np.asarray(c["share"]) == pytest.approx(want, abs=1e-3)
            assert c["distribution"] == "power_law_1.2" and c["table"].endswith("moe_perf.parquet") and c["ep"] == 1
            n += 1
    assert n >= 9  # gpt-oss-120b's and DeepSeek-V3's experts on each chip (H100's gpt-oss from SGLang's table)


def _gptoss_experts_bytes(eff, batch=32):
    mn = ModelNumbers.from_model(load_model("gpt-oss-120b"), 2048.0, weights_dtype="mxfp4")
    hw = HwNumbers.from_system(load_hardware("b200"), "fp8", None)
    res = evaluate(mn, hw, tp=1, ep=1, pp=1, micro_batch=batch, efficiency=eff)
    return mn, next(float(np.asarray(o.bytes)) for o in res.__dict__["times"].ops if o.name == "experts")


@pytest.fixture
def routing_on(monkeypatch):
    """``--efficiency measured`` with the measured routing shares (off by default: specs.kernels.MEASURED_ROUTING)."""
    monkeypatch.setattr(K, "MEASURED_ROUTING", True)


def test_off_by_default(monkeypatch):
    assert K.MEASURED_ROUTING is False
    monkeypatch.setattr(K, "MEASURED_ROUTING", False)
    eff = resolve("b200", "measured")
    assert eff.moe_routing == () and "moe_routing" not in dict(eff.silicon_from)


def test_measured_path_reads_the_chips_curve(routing_on):
    eff = resolve("b200", "measured")
    mn, with_curve = _gptoss_experts_bytes(eff)
    _, uniform = _gptoss_experts_bytes(replace(eff, moe_routing=()))
    c = routing_curve(mn, eff.moe_routing)
    assert c is not None and "b200_sxm" in c[3] and "gpt-oss-120b" in c[3]
    s = float(routing_share_at(c, 32.0))
    assert 0.6 < s < 0.9  # T = 32: the measured dip (0.75 on B200's TensorRT-LLM table)
    assert with_curve / uniform == pytest.approx(s, rel=1e-9)  # the experts' bytes scale by s(T): H = s · uniform


def test_presets_keep_uniform_routing(routing_on):
    for chip in ("b200", "h200"):
        eff = resolve(chip, "auto")
        assert eff.moe_routing == ()
        mn = ModelNumbers.from_model(load_model("gpt-oss-120b"), 2048.0)
        assert float(mn.expert_hit_share(32.0, eff.moe_routing)) == pytest.approx(UNIFORM_32 / 128, abs=1e-4)
    assert resolve("b200", "ideal").moe_routing == ()


def test_a_model_without_a_curve_keeps_uniform_routing(routing_on):
    eff = resolve("b200", "measured")
    for name in ("kimi-k2", "qwen3-235b-a22b", "gpt-oss-20b"):  # expert shapes no table measured
        mn = ModelNumbers.from_model(load_model(name), 2048.0)
        assert routing_curve(mn, eff.moe_routing) is None
        T = np.array([8.0, 32.0, 256.0])
        assert mn.expert_hit_share(T, eff.moe_routing) == pytest.approx(mn.expert_hit_share(T))
    from rackmath.analyses.serving.serve import serve

    steps = serve("gpt-oss-20b", "b200", gpus=1, isl=1024, osl=1024, concurrency=8, framework="vllm",
                  efficiency="measured").explain().steps
    assert any(st.symbol == "s_route [experts]" and st.value == 1.0 and "no measured routing curve" in st.note
               for st in steps)  # says so
    # a chip without curves (AMD): no routing shares, uniform for every model
    assert resolve("mi355x", "measured").moe_routing == ()


def test_share_held_beyond_the_measured_tokens():
    curve = ((1, 1, 8, 2), (1.0, 32.0, 512.0), (1.0, 0.8, 0.9), "synthetic")
    assert routing_share_at(curve, np.array([0.5, 16.5, 32.0, 272.0, 1e4])) == pytest.approx([1.0, 0.9, 0.8, 0.85,
                                                                                               0.9])


def test_serve_explain_names_the_routing_curve(routing_on):
    from rackmath.analyses.serving.serve import serve

    kw = dict(gpus=1, tp=1, isl=1024, osl=1024, concurrency=32, weights_dtype="mxfp4", framework="vllm")
    r = serve("gpt-oss-120b", "b200", efficiency="measured", **kw)
    d = r.explain()
    rows = {s.symbol: s for s in d.steps}
    s = rows["s_route(T) [experts]"]
    assert "moe_routing" not in s.note and "power_law_1.2" in s.note and "moe_perf.parquet" in s.note
    assert rows["H [experts]"].value == pytest.approx(s.value * UNIFORM_32, abs=0.01)  # T = 32 · 1 token
    assert not d.check()
    fast = serve("gpt-oss-120b", "b200", efficiency="measured", **kw)["tpot_ms"]
    assert not any("s_route" in st.symbol for st in serve("gpt-oss-120b", "b200", efficiency="preset",
                                                          **kw).explain().steps)
    eff = resolve("b200", "measured")
    slow = serve("gpt-oss-120b", "b200", efficiency=replace(eff, moe_routing=()), **kw)["tpot_ms"]
    assert float(fast) < float(slow)  # fewer distinct experts streamed: a shorter step
