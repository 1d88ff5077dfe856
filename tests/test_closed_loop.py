"""TTFT of a closed loop: the wait for the prefill server (schedule.closed_loop_wait) and Little's law
(schedule.little_ttft / saturated_ttft, closed_loop_rate), in serve, plan and --explain.

C requests kept in the system and served at X requests/s each stay C / X (Little 1961); once the deployment saturates
(a prefill budget or pool slower than the decode side, or a running batch capped below C) the throughput is flat in
C and the extra requests wait: TTFT = C · OSL / X_out − (OSL − 1) · TPOT.
"""

import numpy as np
import pytest

import rackmath
from rackmath.analyses.serving import schedule
from rackmath.explain import working_value


def test_little_ttft_by_hand():
    # 64 clients, 1,600 output tok/s, OSL 1,000, TPOT 20 ms: E2E = 64 · 1000 / 1600 = 40 s, of which 999 · 0.02 =
    # 19.98 s decoding → TTFT 20.02 s
    assert schedule.little_ttft(64, 1600.0, 1000, 0.02) == pytest.approx(20.02, rel=1e-12)
    # inverse of little_concurrency
    assert schedule.little_concurrency(1600.0, 1000, 20.02, 0.02) == pytest.approx(64.0, rel=1e-12)


def test_saturated_ttft_only_where_saturated():
    ttft, q = schedule.saturated_ttft(np.array([0.5, 0.5, 30.0]), np.array([False, True, True]), 64, 1600.0, 1000,
                                      0.02)
    # unsaturated: the open TTFT; saturated: Little's 20.02 s; saturated but the open TTFT already longer: it stays
    assert ttft.tolist() == pytest.approx([0.5, 20.02, 30.0], rel=1e-12)
    assert q.tolist() == pytest.approx([0.0, 19.52, 0.0], rel=1e-12)


def test_closed_loop_wait_by_hand():
    """Schweitzer's closed loop: C = 100 requests, a server share S = 10 ms, the rest of the cycle Z = 2 s.
    C·S − Z = −1 s: R = ½(−1 + √(1 + 4 · 0.01 · 2)) = ½(−1 + √1.08) = 0.019615 s, W = R − S = 9.615 ms (light load:
    about S · C·S/Z = 5 ms, doubled by the queue's own growth). Past the knee, C = 1,000: C·S − Z = 8 s,
    R = ½(8 + √(64 + 0.08)) = 8.002498 s, W = 7.992498 s → C·S − Z, Little's law with the server saturated."""
    w = schedule.closed_loop_wait(np.array([100.0, 1000.0]), 0.01, 2.0)
    assert w[0] == pytest.approx(0.5 * (-1.0 + np.sqrt(1.08)) - 0.01, rel=1e-12)
    assert w[0] == pytest.approx(0.009615, rel=1e-3)
    assert w[1] == pytest.approx(0.5 * (8.0 + np.sqrt(64.08)) - 0.01, rel=1e-12)
    assert w[1] == pytest.approx(8.0, rel=1e-3)
    assert float(schedule.closed_loop_wait(1.0, 0.01, 2.0)) < 1e-4  # one request never waits for itself (≈ S²/Z)
    # the loop's throughput is Little's: C · OSL over the cycle
    assert float(schedule.closed_loop_rate(64, 1000, 40.0)) == pytest.approx(1600.0, rel=1e-12)


def test_steady_state_admission_cap_by_hand():
    # 8 requests queued on a stream whose running batch is capped at 2; every step 10 ms (prefill steps too), no
    # token budget (so no wait for it), OSL 100: TTFT_open = half a step + one 10 ms prefill step = 15 ms; a running
    # request's cycle 0.015 + 99 · 0.01 = 1.005 s, X = 2 · 100 / 1.005 = 199.005 tok/s (Little over the cycle);
    # the 8 queued: 8 · 100 / X − 99 · 0.01 = 8 · 1.005 / 2 − 0.99 = 3.03 s
    ss = schedule.steady_state(2.0, 1, 500.0, 100.0, 0.01, lambda sch: (0.01, None), queued=8.0)
    assert float(ss["out_tok_s"]) == pytest.approx(200.0 / 1.005, rel=1e-12)
    assert float(ss["tpot_s"]) == pytest.approx(0.01)
    assert float(ss["ttft_open_s"]) == pytest.approx(0.015)
    assert float(ss["ttft_s"]) == pytest.approx(3.03)
    assert bool(ss["saturated"])
    # not capped (queued = b): the open TTFT, no queue
    ss1 = schedule.steady_state(2.0, 1, 500.0, 100.0, 0.01, lambda sch: (0.01, None))
    assert float(ss1["ttft_s"]) == pytest.approx(0.015) and float(ss1["queue_s"]) == 0.0


def _little_c(r):
    """C from serve's own X_out, TTFT and TPOT by Little's law."""
    v = r.values
    return np.asarray(v["output_tok_s"]) / r.osl * (np.asarray(v["ttft_ms"]) / 1e3
                                                   + (r.osl - 1.0) * np.asarray(v["tpot_ms"]) / 1e3)


def test_disaggregated_prefill_bound_obeys_little():
    """A disaggregated deployment whose prefill pool binds: throughput flat in C at the pool's feed, and Little's law
    exact with serve's own X, TTFT and TPOT. The prompts wait for the pool as a closed loop (closed_loop_wait):
    past the knee the wait is C·S − Z (it was the pool's open-loop M/D/1 wait at ρ capped at 0.95: seconds where
    Little's law says minutes)."""
    C = np.array([256.0, 1024.0])
    r = rackmath.serve("llama-3.1-70b", "h100", isl=8000, osl=200, concurrency=C, prefill_gpus=8, decode_gpus=8,
                       prefill_tp=8, tp=8, framework="sglang")
    assert list(r.values["bottleneck"]) == ["prefill"] * 2
    x = np.asarray(r.values["output_tok_s"])
    feed = float(r._info["prefill"]["input_tok_s"]) * 200 / 8000
    assert np.all(x <= feed) and x == pytest.approx([feed, feed], rel=2e-3)  # flat: the prefill pool's rate
    assert _little_c(r) == pytest.approx(C, rel=1e-9)  # Little's law, exactly
    S, Z, W = (np.asarray(r._info[k]) for k in ("service", "cycle_rest", "wait"))
    assert S == pytest.approx(8000 / float(r._info["prefill"]["input_tok_s"]), rel=1e-12)
    # past the knee R = W + S is C·S − Z plus S·Z/(C·S − Z): the loop's rate C·OSL/(Z + R) just under the pool's
    assert W + S == pytest.approx(C * S - Z + S * Z / (C * S - Z), rel=1e-3) and np.all(W > 60.0)


def test_aggregated_batch_cap_obeys_little():
    """vLLM runs at most 1,024 sequences: at C = 4,096 the rest wait — TTFT by Little's law, X as at 1,024."""
    r = rackmath.serve("llama-3.1-70b", "h100", isl=1000, osl=1000, concurrency=np.array([1024.0, 4096.0]), gpus=8,
                       tp=8, framework="vllm")
    x = np.asarray(r.values["output_tok_s"])
    assert x[1] == pytest.approx(x[0], rel=1e-9)
    assert bool(np.asarray(r._info["saturated"])[1])  # capped (at C = 1,024 the prefill budget binds, no queue)
    assert list(np.asarray(r._info["queue"]) > 0) == [False, True]
    assert _little_c(r)[1] == pytest.approx(4096.0, rel=1e-9)


def test_poisson_unsaturated_keeps_its_queue():
    """Poisson arrivals below saturation keep their own queue (the closed loop's wait): no Little's law term."""
    r = rackmath.serve("llama-3.1-70b", "h100", isl=1000, osl=1000, concurrency=64, gpus=8, tp=8, framework="vllm",
                       arrivals="poisson")
    assert float(r._info["queue"]) == 0.0
    assert r.values["ttft_ms"] / 1e3 == pytest.approx(float(r._info["ttft_open"]), rel=1e-12)


@pytest.mark.parametrize("closed", [False, True])
def test_explain_shows_the_queue(closed):
    kw = dict(isl=8000, osl=200, concurrency=1024, prefill_gpus=8, decode_gpus=8, prefill_tp=8, tp=8,
              framework="sglang")
    if closed:
        kw["arrivals"] = "closed-loop"
    r = rackmath.serve("llama-3.1-70b", "h100", **kw)
    d = r.explain()
    assert d.check() == []
    lines = {s.symbol: s for s in d.steps}
    wait = lines["W"]
    assert wait.value == pytest.approx(float(r._info["wait"]), rel=1e-9) and wait.value > 60.0
    assert working_value(wait.substituted) == pytest.approx(wait.value, rel=0.015)
    op = lines["TTFT_open"]
    assert op.value == pytest.approx(sum(lines[k].value for k in ("t_prefill", "t_KV", "t_request", "W")), rel=1e-9)
    total = lines["TTFT_steady" if closed else "TTFT"]
    assert total.value == pytest.approx(op.value + lines["Q"].value, rel=1e-9)


def test_explain_shows_the_aggregated_queue():
    """An aggregated stream capped at vLLM's 1,024 sequences with 4,096 in flight: the Q line is Little's law's wait."""
    r = rackmath.serve("llama-3.1-70b", "h100", isl=1000, osl=1000, concurrency=4096, gpus=8, tp=8, framework="vllm")
    d = r.explain()
    assert d.check() == []
    lines = {s.symbol: s for s in d.steps}
    assert lines["Q"].value == pytest.approx(float(r._info["queue"]), rel=1e-9) and lines["Q"].value > 100.0
    assert "capped at 1024 per scheduler" in lines["Q"].note
    assert lines["TTFT"].value == pytest.approx(r.values["ttft_ms"] / 1e3, rel=1e-9)


# ----------------------------------------------------------------------------- the first wave's warm-up; the median


def test_closed_loop_ttft_with_warm_up_by_hand():
    """C = 4 clients, N = 40 requests: w = 1/10. A first wave of mean 0.262 s, a steady TTFT of 0.05 s and a warm-up
    of 4.5 s (kernels compiled the first time a batch of four runs): mean TTFT = 0.1 · (0.262 + 4.5) + 0.9 · 0.05 =
    0.5212 s; the median request is a later one: 0.05 s (mean / median ≈ 10, as the MI355X SGLang rows' ≈ 6)."""
    w = float(schedule.first_wave_share(schedule.CLOSED_LOOP_PROMPTS_PER_CLIENT * 4, 4))
    mean = float(schedule.closed_loop_ttft(0.262, 0.05, w, 4.5))
    assert mean == pytest.approx(0.1 * 4.762 + 0.045, rel=1e-12)
    assert float(schedule.median_ttft(mean, 0.05, w)) == 0.05
    # every request in the first wave (fewer requests than clients): the median is the mean
    assert float(schedule.median_ttft(mean, 0.05, 1.0)) == mean


def test_serve_warm_up_moves_the_mean_by_a_tenth_and_not_the_median():
    """A stack version's warm-up t_warm is paid by the first wave only: the closed loop's mean TTFT moves by
    w · t_warm = 0.1 · 5 s = 0.5 s, its median, TPOT and throughput not at all; other arrivals never pay it."""
    from dataclasses import replace

    from rackmath.engine.efficiency import measured_efficiency
    from rackmath.specs.hardware import load_hardware

    eff = replace(measured_efficiency(load_hardware("hgx-h200").chip), per_version=False)
    kw = dict(gpus=8, tp=8, isl=1024, osl=1024, concurrency=32, framework="sglang", arrivals="closed-loop")
    cold = rackmath.serve("deepseek-v3", "hgx-h200", efficiency=replace(eff, warm_sglang_s=5.0), **kw)
    warm = rackmath.serve("deepseek-v3", "hgx-h200", efficiency=replace(eff, warm_sglang_s=0.0), **kw)
    assert (cold.ttft_ms - warm.ttft_ms) / 1e3 == pytest.approx(0.5, rel=1e-9)
    d_cold, d_warm = cold.as_dict(), warm.as_dict()
    assert d_cold["ttft_median_ms"] == d_warm["ttft_median_ms"] < warm.ttft_ms
    assert (cold.tpot_ms, cold.output_tok_s) == (warm.tpot_ms, warm.output_tok_s)
    d = cold.explain()
    assert d.check() == []  # the TTFT line re-evaluates with t_warm in it
    lines = {x.symbol: x for x in d.steps}
    assert lines["t_warm"].value == pytest.approx(5.0)
    assert lines["TTFT"].value == pytest.approx(cold.ttft_ms / 1e3, rel=1e-9)
    assert lines["TTFT_median"].value == pytest.approx(d_cold["ttft_median_ms"] / 1e3, rel=1e-9)
    st = rackmath.serve("deepseek-v3", "hgx-h200", efficiency=replace(eff, warm_sglang_s=5.0),
                        **(kw | dict(arrivals="steady")))
    assert st.as_dict()["ttft_median_ms"] == st.ttft_ms  # no first wave: median and mean are the steady TTFT


def test_cli_shows_the_median_request_beside_the_mean_ttft():
    """serve's table: a closed-loop client's TTFT row gives the mean and the median request's; steady arrivals one
    number (they are equal)."""
    from conftest import run_cli

    base = ("serve", "llama-3.1-8b", "-H", "hgx-h100", "--gpus", "1", "--isl", "1024", "--osl", "1024", "-c", "64",
            "--framework", "sglang")
    code, out, err = run_cli(*base, "--arrivals", "closed-loop")
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.startswith("TTFT"))
    assert " mean, " in row and "median request" in row
    code, out, err = run_cli(*base)
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.startswith("TTFT"))
    assert "mean" not in row and "median" not in row


def test_first_wave_pass_by_hand():
    """A first-wave pass at η_wave = 0.4 of the steady speed: 35 ms / 0.4 = 87.5 ms; η_wave = 1 leaves it."""
    assert float(schedule.first_wave_pass(0.035, 0.4)) == pytest.approx(0.0875, rel=1e-12)
    assert float(schedule.first_wave_pass(0.035, 1.0)) == 0.035


def test_serve_first_wave_speed_scales_the_waves_passes_only():
    """η_wave slows the first wave's prefill passes and nothing else: the wave's TTFT less its host time scales by
    1/η_wave (every branch of wave_schedule is proportional to t_pass), so the closed loop's mean TTFT moves by
    w · (1/η_wave − 1) · (TTFT_wave − t_request); the median, TPOT and throughput stay; the explanation shows
    t_pass, η_wave and t_pass,wave = t_pass / η_wave and still adds up. A disaggregated pool's first wave queues at
    η_wave of its rate."""
    from dataclasses import replace

    from rackmath.engine.efficiency import measured_efficiency
    from rackmath.specs.hardware import load_hardware

    eff = replace(measured_efficiency(load_hardware("hgx-h200").chip), per_version=False)
    kw = dict(gpus=8, tp=2, isl=1024, osl=8192, concurrency=64, framework="vllm", arrivals="closed-loop")
    slow = rackmath.serve("gpt-oss-120b", "hgx-h200", efficiency=replace(eff, eta_wave=0.4), **kw)
    base = rackmath.serve("gpt-oss-120b", "hgx-h200", efficiency=eff, **kw)
    i_s, i_b = slow._info, base._info
    t_req = float(i_b["t_request"])
    assert float(i_s["ttft_wave"]) - t_req == pytest.approx((float(i_b["ttft_wave"]) - t_req) / 0.4, rel=1e-9)
    assert (slow.ttft_ms - base.ttft_ms) / 1e3 == pytest.approx(
        0.1 * (1 / 0.4 - 1) * (float(i_b["ttft_wave"]) - t_req), rel=1e-9)
    d_s, d_b = slow.as_dict(), base.as_dict()
    assert d_s["ttft_median_ms"] == d_b["ttft_median_ms"]
    assert (slow.tpot_ms, slow.output_tok_s) == (base.tpot_ms, base.output_tok_s)
    d = slow.explain()
    assert d.check() == []
    lines = {x.symbol: x for x in d.steps}
    assert lines["η_wave"].value == pytest.approx(0.4)
    assert lines["t_pass,wave"].value == pytest.approx(lines["t_pass"].value / 0.4, rel=1e-9)
    assert "η_wave" not in {x.symbol for x in base.explain().steps}  # shown only where it is not 1
    dis = dict(gpus=24, isl=8192, osl=1024, concurrency=64, framework="sglang", arrivals="closed-loop",
               prefill_gpus=8, decode_gpus=16, tp=8)
    a = rackmath.serve("deepseek-r1", "hgx-h200", efficiency=replace(eff, eta_wave=0.5), **dis)
    b = rackmath.serve("deepseek-r1", "hgx-h200", efficiency=eff, **dis)
    assert a.as_dict()["ttft_median_ms"] == b.as_dict()["ttft_median_ms"] and a.ttft_ms > b.ttft_ms
