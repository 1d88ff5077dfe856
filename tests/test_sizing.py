"""Issue 12: simulate (queueing limits, Little's law, consistency with serve), plan (SLO margins), launch flags,
compare, bad traces. Every expected value is a closed form or the serving model's own steady state."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from conftest import run_cli
from rackmath.errors import InputError


# --------------------------------------------------------------------------------------
# simulate: queueing limits
# --------------------------------------------------------------------------------------


def test_md1_waiting_time_at_low_load():
    """One sequence at a time, fixed ISL/OSL: the replica is an M/D/1 server; the mean wait is Pollaczek–Khinchine."""
    from rackmath.analyses.serving.simulate import mdl_waiting_time, simulate

    base = simulate("llama-3.1-8b", "h100", gpus=1, tp=1, rate=0.01, requests=50, isl=200, osl=50, max_batch=1,
                    budget=8192)
    # service time: alone, (almost) nothing waits at this load; the stack's host time per request is not service
    D = base.summary["e2e_s"]["p50"] - base.config["t_request_s"]
    assert base.summary["queue_wait_s"]["p50"] == pytest.approx(0.0, abs=1e-12)
    rho = 0.3
    r = simulate("llama-3.1-8b", "h100", gpus=1, tp=1, rate=rho / D, requests=40000, isl=200, osl=50, max_batch=1,
                 budget=8192, seed=3)
    w_sim = r.summary["queue_wait_s"]["mean"]
    assert w_sim == pytest.approx(mdl_waiting_time(rho / D, D), rel=0.06)
    # every request is served in exactly D once admitted
    assert r.summary["e2e_s"]["mean"] - w_sim - r.config["t_request_s"] == pytest.approx(D, rel=1e-6)


def test_ttft_at_vanishing_load_is_the_prefill_step():
    from rackmath.analyses.serving import step_table as stt
    from rackmath.analyses.serving.simulate import simulate

    r = simulate("llama-3.1-8b", "h100", gpus=1, tp=1, rate=0.001, requests=20, isl=1500, osl=10, budget=8192)
    st = stt.stack("llama-3.1-8b", "h100")
    tab = stt.StepTable(st, dict(tp=1, ep=1, pp=1, attention_dp=False), max_batch=256, max_context=1510,
                        prompt=1500, budget=8192)
    # the prefill step plus the stack's host time per request (serving.steady_state's TTFT at no load)
    assert r.summary["ttft_s"]["p50"] == pytest.approx(tab.prefill(1500) + st.t_request, rel=1e-9)


def test_littles_law():
    """Mean sequences running = completion rate × mean time from admission to completion."""
    from rackmath.analyses.serving.simulate import simulate

    r = simulate("llama-3.1-8b", "h100", gpus=2, tp=1, rate=30.0, requests=20000, isl="100:900", osl="exp:200",
                 seed=5)
    s = r.summary
    # time in service of every request, from the simulator's own per-request times
    service = s["e2e_s"]["mean"] - s["queue_wait_s"]["mean"] - r.config["t_request_s"]  # host time is not a slot
    per_replica_rate = s["request_rate"] / r.config["replicas"]
    assert s["running_per_replica"] == pytest.approx(per_replica_rate * service, rel=0.03)


def test_simulation_agrees_with_serve_at_fixed_concurrency():
    """Closed loop at C = 64, decode-dominated (ISL ≪ OSL): TPOT and throughput within 5% of `serve`."""
    from rackmath.analyses.serving.serve import serve
    from rackmath.analyses.serving.simulate import simulate

    r = simulate("llama-3.1-70b", "hgx-h100", gpus=8, tp=8, concurrency=64, requests=3000, isl=200, osl=2000)
    s = serve("llama-3.1-70b", "hgx-h100", gpus=8, tp=8, isl=200, osl=2000, concurrency=64)
    assert r.summary["tpot_s"]["mean"] == pytest.approx(s.tpot_ms / 1e3, rel=0.05)
    assert r.summary["output_tok_s"] == pytest.approx(s.output_tok_s, rel=0.05)
    assert r.summary["running_per_replica"] == pytest.approx(64, rel=0.02)


def test_simulation_with_attention_dp_groups_agrees_with_serve():
    """--attention-dp-size 4 in the simulator means what it means in serve: four schedulers (four times the
    stack's running cap and step budget per replica) and the same decode step, so a decode-dominated closed loop
    at C = 64 gives serve's TPOT within 5%."""
    from rackmath.analyses.serving.serve import serve
    from rackmath.analyses.serving.simulate import simulate

    kw = dict(gpus=8, tp=8, ep=8, attention_dp_size=4, isl=200, osl=2000, weights_dtype="fp8", framework="sglang")
    r = simulate("deepseek-v3", "hgx-h200", concurrency=64, requests=1500, **kw)
    s = serve("deepseek-v3", "hgx-h200", concurrency=64, **kw)
    assert r.config["layout"]["attention_dp_size"] == 4 and r.config["layout"]["label"].endswith("×4 groups")
    assert r.config["max_batch"] == 4 * serving_max_batch("sglang")
    assert r.summary["tpot_s"]["mean"] == pytest.approx(s.tpot_ms / 1e3, rel=0.05)


def serving_max_batch(framework):
    from rackmath.analyses.serving.serve import load_stack

    return load_stack(framework).max_batch_size


@pytest.mark.parametrize("isl, osl, c, framework", [(1000, 1000, 64, None), (128, 1024, 256, "vllm"),
                                                    (4000, 500, 32, "trtllm"), (1000, 1000, 64, "sglang")])
def test_simulation_agrees_with_time_sliced_serve_with_long_prompts(isl, osl, c, framework):
    """With prefill time-sliced into the token stream (serve, issue 9), prompt-heavy loads agree too."""
    from rackmath.analyses.serving.serve import serve
    from rackmath.analyses.serving.simulate import simulate

    r = simulate("llama-3.1-70b", "hgx-h100", gpus=8, tp=8, concurrency=c, requests=2000, isl=isl, osl=osl,
                 framework=framework)
    s = serve("llama-3.1-70b", "hgx-h100", gpus=8, tp=8, isl=isl, osl=osl, concurrency=c, framework=framework)
    assert r.summary["tpot_s"]["mean"] == pytest.approx(s.tpot_ms / 1e3, rel=0.05)
    assert r.summary["output_tok_s"] == pytest.approx(s.output_tok_s, rel=0.05)


@pytest.mark.parametrize("isl, osl, c, framework", [(1000, 500, 4, "vllm"), (500, 1000, 16, "sglang"),
                                                    (2000, 300, 1, "trtllm")])
def test_simulated_waves_agree_with_serve_waves(isl, osl, c, framework):
    """Users starting together with identical requests whose prompts fit one pass stay in lock-step: the simulator
    (an independent event loop) and serve's wave_schedule agree (both add the stack's host time per request to
    TTFT)."""
    from rackmath.analyses.serving.serve import serve
    from rackmath.analyses.serving.simulate import simulate

    r = simulate("llama-3.1-70b", "hgx-h100", gpus=8, tp=8, concurrency=c, requests=30 * c, isl=isl, osl=osl,
                 framework=framework, arrivals="waves", efficiency="preset")
    s = serve("llama-3.1-70b", "hgx-h100", gpus=8, tp=8, isl=isl, osl=osl, concurrency=c, framework=framework,
              arrivals="waves", efficiency="preset")
    assert r.config["t_request_s"] == pytest.approx(float(s._info["t_request"]), rel=1e-12)
    assert r.summary["ttft_s"]["mean"] == pytest.approx(s.ttft_ms / 1e3, rel=0.01)
    assert r.summary["tpot_s"]["mean"] == pytest.approx(s.tpot_ms / 1e3, rel=0.01)
    assert r.summary["output_tok_s"] == pytest.approx(s.output_tok_s, rel=0.02)
    assert bool(s._info["waves"]) and r.summary["ttft_s"]["mean"] >= steady_ttft(isl, osl, c, framework) * 0.999


def test_a_burst_counts_every_request_over_the_whole_run():
    """-c C --requests N with N ≤ C: each user sends one request (a benchmark's burst). The steady-state window (20%
    warm-up, the last C requests' drain) would leave nothing; instead every request counts and throughput is the
    run's output over first arrival → last completion. Four identical prompts prefilled in one pass decode together:
    one TTFT, one E2E."""
    from rackmath.analyses.serving.simulate import simulate

    r = simulate("llama-3.1-70b", "hgx-h100", gpus=8, tp=8, concurrency=4, requests=4, isl=1000, osl=100,
                 framework="sglang", arrivals="waves")
    assert r.summary["counted"] == r.summary["completed"] == 4 and any("a burst" in n for n in r.notes)
    assert np.ptp(r.ttft_s) == pytest.approx(0.0, abs=1e-12) and np.ptp(r.e2e_s) == pytest.approx(0.0, abs=1e-12)
    assert r.summary["duration_s"] == pytest.approx(float(np.max(r.finish_s)))
    assert r.summary["output_tok_s"] == pytest.approx(4 * 100 / float(np.max(r.finish_s)))
    # more requests than users: the steady-state window as before (no burst note)
    r2 = simulate("llama-3.1-70b", "hgx-h100", gpus=8, tp=8, concurrency=4, requests=40, isl=1000, osl=100,
                  framework="sglang", arrivals="waves")
    assert r2.summary["counted"] < 40 and not any("a burst" in n for n in r2.notes)


def steady_ttft(isl, osl, c, framework):
    from rackmath.analyses.serving.simulate import simulate

    return simulate("llama-3.1-70b", "hgx-h100", gpus=8, tp=8, concurrency=c, requests=30 * c, isl=isl, osl=osl,
                    framework=framework).summary["ttft_s"]["mean"]


@pytest.mark.parametrize("isl, osl, c, framework", [(4000, 200, 16, "vllm"), (1000, 1000, 64, "trtllm")])
def test_waves_of_many_passes_spread_out_on_mixed_schedulers(isl, osl, c, framework):
    """vLLM V1 / TensorRT-LLM mix prefill into decode steps: a wave of several passes does not persist; the
    simulator's users starting together drift to serve's steady TPOT and throughput."""
    from rackmath.analyses.serving.serve import serve
    from rackmath.analyses.serving.simulate import simulate

    r = simulate("llama-3.1-70b", "hgx-h100", gpus=8, tp=8, concurrency=c, requests=30 * c, isl=isl, osl=osl,
                 framework=framework, arrivals="waves", efficiency="preset")
    s = serve("llama-3.1-70b", "hgx-h100", gpus=8, tp=8, isl=isl, osl=osl, concurrency=c, framework=framework,
              arrivals="waves", efficiency="preset")
    assert not bool(s._info["waves"]) and "spread out" in s.notes[-1]
    assert r.summary["tpot_s"]["mean"] == pytest.approx(s.tpot_ms / 1e3, rel=0.03)
    assert r.summary["output_tok_s"] == pytest.approx(s.output_tok_s, rel=0.03)


def test_train_schedule_steps_leave_on_the_clock():
    """--cadence: every first token leaves on a multiple of the step period (lecture's train)."""
    from rackmath.analyses.serving.simulate import simulate

    tau = 0.05
    r = simulate("llama-3.1-8b", "h100", gpus=1, tp=1, rate=2.0, requests=300, isl=300, osl=20, cadence=tau, seed=1)
    for times in (r.first_token_s, r.finish_s):
        k = times / tau
        assert np.allclose(k, np.round(k), atol=1e-6)
    free = simulate("llama-3.1-8b", "h100", gpus=1, tp=1, rate=2.0, requests=300, isl=300, osl=20, seed=1)
    k = free.first_token_s / tau
    assert not np.allclose(k, np.round(k), atol=1e-6)
    # a lone request at low load waits on average half a period for its train
    calm = simulate("llama-3.1-8b", "h100", gpus=1, tp=1, rate=0.05, requests=400, isl=300, osl=5, cadence=tau, seed=2)
    nocad = simulate("llama-3.1-8b", "h100", gpus=1, tp=1, rate=0.05, requests=400, isl=300, osl=5, seed=2)
    extra = calm.summary["ttft_s"]["mean"] - nocad.summary["ttft_s"]["mean"]
    assert 0.3 * tau < extra < 0.7 * tau + tau  # half a period of waiting, plus the step rounded up to the clock


def test_preemption_when_kv_runs_out_and_everything_completes():
    from rackmath.analyses.serving.simulate import simulate

    r = simulate("llama-3.1-70b", "h100", gpus=2, tp=2, concurrency=24, requests=200, isl=1000, osl=2000)
    assert r.summary["preemptions"] > 0
    assert r.summary["completed"] == 200
    assert r.config["kv_tokens_per_replica"] < 24 * 3000


def test_tensorrt_llm_reserves_the_whole_request_and_never_preempts():
    """The same 24 closed-loop users of 1,000 + 2,000 tokens that make vLLM preempt: TensorRT-LLM admits a request
    only with KV for all of its 3,000 tokens (GUARANTEED_NO_EVICT), so it never preempts and runs at most
    ⌊K / 3,000⌋ sequences, K the replica's KV tokens (the same cache: the policy is admission, not capacity)."""
    from rackmath.analyses.serving.simulate import simulate

    kw = dict(gpus=2, tp=2, concurrency=24, requests=200, isl=1000, osl=2000, seed=3)
    v = simulate("llama-3.1-70b", "h100", framework="vllm", **kw)
    t = simulate("llama-3.1-70b", "h100", framework="trtllm", **kw)
    K = t.config["kv_tokens_per_replica"]
    assert K == pytest.approx(v.config["kv_tokens_per_replica"], rel=1e-12) and K < 24 * 3000
    assert v.summary["preemptions"] > 0 and t.summary["preemptions"] == 0
    assert t.summary["completed"] == v.summary["completed"] == 200
    # steady state: ⌊K / 3,000⌋ sequences (K = 8,000 tokens here: 2); the users' first requests are cut short to
    # stagger them (warm-up), so a few more fit at the start
    assert K // 3000 == 2 and 1.9 < t.summary["mean_running"] < 2.2 < v.summary["mean_running"]


def test_disaggregated_ttft_includes_the_kv_handoff():
    from rackmath.analyses.serving.simulate import simulate

    r = simulate("llama-3.1-70b", "h100", prefill_gpus=8, decode_gpus=8, rate=2.0, requests=500, isl=2000, osl=200)
    assert r.config["mode"] == "disaggregated"
    assert r.summary["completed"] == 500
    assert r.summary["ttft_s"]["p50"] > r.config["kv_transfer_s"]
    assert r.summary["output_tok_s_per_gpu"] == pytest.approx(r.summary["output_tok_s"] / 16)


def test_bursty_arrivals_have_longer_tails_than_poisson():
    from rackmath.analyses.serving.simulate import simulate

    kw = dict(gpus=1, tp=1, rate=20.0, requests=6000, isl=500, osl=100, seed=4)
    p = simulate("llama-3.1-8b", "h100", arrivals="poisson", **kw)
    g = simulate("llama-3.1-8b", "h100", arrivals="gamma", burstiness=4.0, **kw)
    assert g.summary["ttft_s"]["p99"] > p.summary["ttft_s"]["p99"]


def test_goodput_counts_only_requests_within_the_slos():
    from rackmath.analyses.serving.simulate import simulate

    r = simulate("llama-3.1-8b", "h100", gpus=1, tp=1, rate=5.0, requests=2000, isl=500, osl=100,
                 ttft_slo=1e-6, tpot_slo=1.0)
    assert r.summary["slo_attainment"] == 0.0 and r.summary["goodput_req_s"] == 0.0
    r = simulate("llama-3.1-8b", "h100", gpus=1, tp=1, rate=5.0, requests=2000, isl=500, osl=100,
                 ttft_slo=100.0, tpot_slo=100.0)
    assert r.summary["slo_attainment"] == 1.0
    assert r.summary["goodput_req_s"] == pytest.approx(r.summary["request_rate"])


# --------------------------------------------------------------------------------------
# traces
# --------------------------------------------------------------------------------------


def test_example_trace_ships_and_runs():
    from rackmath.analyses.serving.simulate import example_trace_text, parse_trace, simulate

    tr = parse_trace(example_trace_text())
    assert tr["isl"].size == 200 and np.all(np.diff(tr["arrival_s"]) >= 0)
    r = simulate("llama-3.1-8b", "h100", gpus=1, trace=tr)
    assert r.summary["completed"] == 200


@pytest.mark.parametrize("text, where", [
    ("arrival_s,isl,osl\n0.1,100,10\n0.2,abc,10\n", "row 3 field isl"),
    ("arrival_s,isl,osl\n0.1,100,10\n0.2,100,-4\n", "row 3 field osl"),
    ("arrival_s,isl,osl\n0.1,100,10,7\n", "row 2"),
    ("time,input_tokens,output_tokens\n0.1,100.5,10\n", "row 2 field input_tokens"),
    ("arrival_s,isl\n0.1,100\n", "no osl column"),
    ('{"arrival_s": 0, "isl": 10, "osl": 5}\n{"arrival_s": "x", "isl": 10, "osl": 5}\n', "row 2 field arrival_s"),
    ('{"arrival_s": 0, "isl": 10, "osl": 5}\n[1, 2]\n', "row 2"),
    ('{"arrival_s": 0, "isl": 10, "osl": 5}\n{oops\n', "row 2"),
    ("", "empty"),
])
def test_bad_traces_name_the_row_and_field(text, where):
    from rackmath.analyses.serving.simulate import parse_trace

    with pytest.raises(InputError) as e:
        parse_trace(text, "trace")
    assert where in str(e.value)
    assert "\n" not in str(e.value)


def test_bad_trace_on_the_cli_is_one_line_exit_2(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("arrival_s,isl,osl\n0.0,100,10\n0.5,100,ten\n")
    code, out, err = run_cli("simulate", "llama-3.1-8b", "-H", "h100", "--trace", str(p))
    assert code == 2
    assert err.count("\n") == 1 and "row 3 field osl" in err


@pytest.mark.parametrize("args, field", [
    (["--rate", "1", "--concurrency", "4"], "rate"),
    (["--rate", "0"], "rate"),
    (["--rate", "1", "--isl", "lognormal:1000:99"], "isl"),
    (["--rate", "1", "--budget", "16", "--max-batch", "64"], "budget"),
    (["--rate", "1", "--arrivals", "weibull"], "arrivals"),
    (["--rate", "1", "--requests", "1e12"], "requests"),
    (["--rate", "1", "--max-batch", "0"], "max_batch"),
    (["--rate", "1", "--isl", "0"], "isl: 0 tokens"),
    (["--rate", "1", "--price", "b200=3"], "usd_per_gpu_hour: no price for h100"),
])
def test_bad_simulate_inputs(args, field):
    code, out, err = run_cli("simulate", "llama-3.1-8b", "-H", "h100", *args)
    assert code == 2 and err.startswith(f"error: {field}") and err.count("\n") == 1


# --------------------------------------------------------------------------------------
# plan and compare
# --------------------------------------------------------------------------------------


def test_plan_meets_the_slos_with_the_stated_margins():
    from rackmath.analyses.serving.plan import plan

    # 40 tok/s per user (TPOT ≤ 25 ms): within reach of both chips (the calibrated H100 preset puts Llama 3.1 70B
    # at ~20 ms per token at small batch, so 50 tok/s is out of its reach)
    r = plan("llama-3.1-70b", "h100,b200", users=1000, isl=1000, osl=1000, ttft=1.0, tok_s_user=40, confirm=False)
    assert len(r.rows) == 2
    costs = [row["deployment"]["usd_per_hour"] for row in r.rows]
    assert costs == sorted(costs)
    for row in r.rows:
        d = row["deployment"]
        assert d["tpot_s"] <= 0.025 and d["ttft_s"] <= 1.0
        assert d["margin"]["tpot"] == pytest.approx((0.025 - d["tpot_s"]) / 0.025)
        assert d["margin"]["ttft"] == pytest.approx((1.0 - d["ttft_s"]) / 1.0)
        assert d["usd_per_hour"] == pytest.approx(d["gpus"] * row["usd_per_gpu_hour"])
        # serves every user: replicas × sequences per replica ≥ users (aggregated) and $/Mtok from the same numbers
        if d["mode"] == "aggregated":
            assert d["replicas"] * d["concurrency_per_replica"] >= 1000 - 1e-6
        assert d["usd_per_mtok"] == pytest.approx(d["usd_per_hour"] / 3600 / (d["request_rate"] * 1000) * 1e6)


def test_tighter_slo_never_costs_less_and_impossible_slo_says_why():
    from rackmath.analyses.serving.plan import plan

    loose = plan("llama-3.1-8b", "h100", rate=20, isl=1000, osl=500, tok_s_user=20, confirm=False)
    tight = plan("llama-3.1-8b", "h100", rate=20, isl=1000, osl=500, tok_s_user=100, confirm=False)
    assert tight.rows[0]["deployment"]["usd_per_hour"] >= loose.rows[0]["deployment"]["usd_per_hour"]
    none = plan("llama-3.1-8b", "h100", rate=20, isl=1000, osl=500, tok_s_user=1e4, confirm=False)
    assert none.rows[0]["deployment"] is None and "SLO" in none.rows[0]["why"]


def test_plan_confirms_winners_in_the_simulator():
    from rackmath.analyses.serving.plan import plan

    r = plan("llama-3.1-8b", "h100", rate=10, isl=500, osl=200, ttft=2.0, tpot=0.05, confirm=True,
             confirm_requests=1500, modes=("aggregated",))
    sim = r.rows[0]["deployment"]["simulated"]
    assert sim["requests"] > 1000 and sim["slo_attainment"] > 0.9
    assert sim["tpot_p50_s"] == pytest.approx(r.rows[0]["deployment"]["tpot_s"], rel=0.25)


def test_plan_searches_attention_dp_over_groups(monkeypatch):
    """The planner's replica layouts include attention DP over every group count R dividing TP (SGLang --dp R), so
    its cheapest deployment can only get cheaper for them. DeepSeek-V3 on H200 for 256 users at TPOT ≤ 80 ms
    chooses 1 < R < TP; the simulator replays that layout and agrees; the launch line says --tp T --dp R."""
    from rackmath.analyses.serving import step_table
    from rackmath.analyses.serving.launch import emit
    from rackmath.analyses.serving.plan import plan

    kw = dict(users=256, isl=2000, osl=1000, tpot=0.08, framework="sglang", modes=("aggregated",))
    r = plan("deepseek-v3", "h200", confirm=True, confirm_requests=1200, **kw)
    d = r.rows[0]["deployment"]
    lay = d["layout"]
    R = lay["attention_dp_size"]
    assert lay["attention_dp"] and 1 < R < lay["tp"] and lay["tp"] % R == 0 and f"×{R} groups" in lay["label"]
    assert d["simulated"]["tpot_p50_s"] == pytest.approx(d["tpot_s"], rel=0.1)
    cmd = emit("sglang", dict(d, model=r.model, kv_dtype="bf16", mtp=0))["commands"][0]["command"]
    assert f"--tp {lay['tp']} --dp {R} --enable-dp-attention" in cmd
    full = step_table.replica_layouts

    def without_groups(*a, **k):  # the layouts before partial attention DP: R = 1 or R = TP only
        lays = full(*a, **k)
        keep = lays["attention_dp_size"] == 0
        return {key: v[keep] for key, v in lays.items()}

    monkeypatch.setattr(step_table, "replica_layouts", without_groups)
    before = plan("deepseek-v3", "h200", confirm=False, **kw).rows[0]["deployment"]
    assert not before["layout"].get("attention_dp_size")
    assert d["usd_per_hour"] <= before["usd_per_hour"] and (d["usd_per_hour"], d["tpot_s"]) != (
        before["usd_per_hour"], before["tpot_s"])


def test_price_overrides():
    from rackmath.analyses.serving.plan import compare, parse_prices

    assert parse_prices("h100=2.1,b200=$4/h") == {"h100": 2.1, "b200": 4.0}
    assert parse_prices("3") == {"*": 3.0}
    with pytest.raises(InputError):
        parse_prices("h100=abc")
    a = compare("llama-3.1-8b", "h100", tok_s_user=50, usd_per_gpu_hour="h100=2")
    b = compare("llama-3.1-8b", "h100", tok_s_user=50, usd_per_gpu_hour="h100=4")
    assert b["rows"][0]["usd_per_mtok"] == pytest.approx(2 * a["rows"][0]["usd_per_mtok"])


def test_compare_cli_table_json_and_plot(tmp_path):
    out_png = tmp_path / "c.png"
    code, out, err = run_cli("compare", "llama-3.1-8b", "-H", "h100,b200", "--tok-s-user", "60", "--price",
                             "h100=2.1", "--json", "--plot", str(out_png))
    assert code == 0, err
    d = json.loads(out)
    assert {r["chip"] for r in d["rows"]} == {"h100", "b200"}
    assert all(r["tok_s_user"] >= 60 for r in d["rows"])
    assert [r for r in d["rows"] if r["chip"] == "h100"][0]["usd_per_gpu_hour"] == 2.1
    assert out_png.stat().st_size > 1000 and f"wrote {out_png}" in err
    code, _, err = run_cli("compare", "llama-3.1-8b", "-H", "h100", "--plot", str(out_png))
    assert code == 2 and "--force" in err


# --------------------------------------------------------------------------------------
# launch configurations
# --------------------------------------------------------------------------------------


DEP8 = dict(model="deepseek-v3", mode="aggregated", layout=dict(tp=8, ep=8, pp=1, attention_dp=True), replicas=2,
            max_batch=512, budget=8192, kv_dtype="fp8", mtp=3)


def test_emit_vllm_flags():
    from rackmath.analyses.serving.launch import emit

    e = emit("vllm", DEP8)
    cmd = e["commands"][0]["command"]
    assert cmd.startswith("vllm serve deepseek-ai/DeepSeek-V3 ")
    for flag in ("--tensor-parallel-size 1", "--data-parallel-size 8", "--enable-expert-parallel",
                 "--max-num-seqs 512", "--max-num-batched-tokens 8192", "--kv-cache-dtype fp8",
                 '--speculative-config \'{"method": "deepseek_mtp", "num_speculative_tokens": 3}\''):
        assert flag in cmd
    assert e["version"].startswith("vLLM ")


def test_emit_sglang_flags():
    from rackmath.analyses.serving.launch import emit

    cmd = emit("sglang", DEP8)["commands"][0]["command"]
    assert cmd.startswith("python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3")
    for flag in ("--tp 8", "--dp 8", "--enable-dp-attention", "--ep-size 8", "--max-running-requests 4096",
                 "--chunked-prefill-size 65536", "--kv-cache-dtype fp8_e4m3", "--speculative-algorithm EAGLE",
                 "--speculative-num-steps 3", "--speculative-num-draft-tokens 4"):
        assert flag in cmd


def test_emit_attention_dp_over_groups():
    """A layout of four attention-DP groups of two GPUs is launched as such: SGLang --tp 8 --dp 4
    --enable-dp-attention (caps multiplied by the 4 ranks), vLLM -tp 2 -dp 4; TensorRT-LLM has no such layout and
    says so."""
    from rackmath.analyses.serving.launch import emit

    dep = dict(DEP8, layout=dict(tp=8, ep=8, pp=1, attention_dp=True, attention_dp_size=4))
    sg = emit("sglang", dep)["commands"][0]["command"]
    for flag in ("--tp 8", "--dp 4", "--enable-dp-attention", "--max-running-requests 2048",
                 "--chunked-prefill-size 32768"):
        assert flag in sg
    vl = emit("vllm", dep)["commands"][0]["command"]
    assert "--tensor-parallel-size 2" in vl and "--data-parallel-size 4" in vl
    tr = emit("trtllm", dep)
    assert any("not a TensorRT-LLM layout" in n for n in tr["notes"])


def test_emit_trtllm_flags_and_yaml():
    from rackmath.analyses.serving.launch import emit, render

    e = emit("trtllm", DEP8)
    c = e["commands"][0]
    for flag in ("trtllm-serve deepseek-ai/DeepSeek-V3", "--tp_size 8", "--ep_size 8", "--max_batch_size 512",
                 "--max_num_tokens 8192", "--extra_llm_api_options extra-llm-api-aggregated.yaml"):
        assert flag in c["command"]
    y = c["files"]["extra-llm-api-aggregated.yaml"]
    assert "enable_attention_dp: true" in y and "dtype: fp8" in y
    assert "decoding_type: MTP" in y and "num_nextn_predict_layers: 3" in y
    assert "TensorRT-LLM" in render(e).splitlines()[0]


def test_emit_disaggregated_has_two_pools():
    from rackmath.analyses.serving.launch import emit

    d = dict(DEP8, mode="disaggregated", prefill_layout=dict(tp=8, ep=8, pp=1, attention_dp=False), prefill_replicas=1)
    e = emit("sglang", d)
    roles = [c["role"] for c in e["commands"]]
    assert roles == ["prefill", "decode"]
    assert "--disaggregation-mode prefill" in e["commands"][0]["command"]
    assert "--disaggregation-mode decode" in e["commands"][1]["command"]
    assert "--speculative" not in e["commands"][0]["command"]


def test_plan_cli_emit_and_json(tmp_path):
    code, out, err = run_cli("plan", "llama-3.1-8b", "--rate", "10", "--isl", "500", "--osl", "200", "--tpot", "30ms",
                             "-H", "h100", "--no-confirm", "--emit", "vllm")
    assert code == 0, err
    assert "vllm serve meta-llama/Llama-3.1-8B-Instruct" in out and "vLLM 0.11" in out
    code, out, err = run_cli("plan", "llama-3.1-8b", "--rate", "10", "--isl", "500", "--osl", "200", "-H", "h100",
                             "--no-confirm", "--json", "--emit", "sglang")
    d = json.loads(out)
    assert d["ranking"][0]["chip"] == "h100" and d["launch"]["framework"] == "sglang"
    code, out, err = run_cli("plan", "llama-3.1-8b", "--rate", "10", "--users", "5", "--isl", "5", "--osl", "5")
    assert code == 2 and err.startswith("error: rate")
    code, out, err = run_cli("plan", "llama-3.1-8b", "--rate", "10", "--isl", "5", "--osl", "5", "--emit", "ollama")
    assert code == 2 and "framework" in err
