"""A scheduler that receives new requests every N decode steps (SGLang's ``--scheduler-recv-interval``): the wait
it adds to TTFT (``schedule.receive_wait``), the prompts it batches (``schedule.prefill_schedule``), and the same
rule in serve, --explain, plan (--emit), simulate and the validation records.

SGLang's ``SchedulerRecvSkipper`` (0.5.3–0.5.6 ``managers/scheduler_recv_skipper.py``): its counter gains 1 per
decode step, 1,000 per prefill step and 1 per idle turn, and the scheduler receives when it reaches N; it asserts
``enable_dp_attention`` is off.
"""

from dataclasses import replace

import numpy as np
import pytest

from rackmath.analyses.serving import schedule
from rackmath.analyses.serving.launch import emit
from rackmath.analyses.serving.serve import Layout, Workload, load_stack, serve
from rackmath.analyses.serving.simulate import simulate
from rackmath.analyses.serving.step_table import replica_layouts, stack as step_stack
from rackmath.errors import InputError


def sglang(n):
    return replace(load_stack("sglang@0.5.6"), recv_interval=n)


def test_receive_wait_by_hand():
    # N = 30 and a 20 ms decode step: (30 − 1)/2 · 20 ms = 290 ms; N = 1 (every step): nothing more
    assert schedule.receive_wait(0.02, 30) == pytest.approx(0.29, rel=1e-12)
    assert schedule.receive_wait(np.array([0.02, 0.05]), 1).tolist() == [0.0, 0.0]


def test_steady_state_adds_the_wait_and_batches_the_prompts():
    """b = 4 sequences, ISL = OSL = 1,000: p = 4 prompt tokens a decode step; N = 30 receives 120 tokens at a time,
    under one whole prompt, so the chunk stays one prompt (1,000) and TTFT_open − W grows by exactly 14.5 decode
    steps. b = 64: p = 64, N · p = 1,920 tokens received together ride one mixed step (budget 8,192)."""
    mixed = lambda sch: (0.03 + 1e-5 * sch["c_tot"], None)  # noqa: E731 - a mixed step's time by its tokens
    kw = dict(budget=8192, t_request=0.01)
    a = schedule.steady_state(4, 1, 1000.0, 1000.0, 0.02, mixed, **kw)
    b = schedule.steady_state(4, 1, 1000.0, 1000.0, 0.02, mixed, recv_interval=30, **kw)
    assert b["schedule"]["c_rank"] == a["schedule"]["c_rank"] == 1000.0
    assert b["recv_s"] == pytest.approx(0.29, rel=1e-12)
    assert (b["ttft_open_s"] - b["wait_s"]) - (a["ttft_open_s"] - a["wait_s"]) == pytest.approx(0.29, rel=1e-12)
    wide = schedule.prefill_schedule(64, 1, 1000.0, 1000.0, budget=8192, recv_interval=30)
    one = schedule.prefill_schedule(64, 1, 1000.0, 1000.0, budget=8192)
    assert wide["c_rank"] == pytest.approx(1920.0) and one["c_rank"] == pytest.approx(1000.0)
    assert wide["p"] == one["p"] == pytest.approx(64.0)  # the same prompt tokens, in fewer, larger mixed steps


def test_serve_prices_the_interval_and_explain_adds_up():
    w, lay = Workload(1024, 1024, 64), Layout(8, 8, 8)
    one = serve("deepseek-v3", "hgx-b200", w, lay, sglang(1))
    r = serve("deepseek-v3", "hgx-b200", w, lay, sglang(30))
    assert r.recv_interval == 30 and r.as_dict()["recv_interval"] == 30 and one.as_dict()["recv_interval"] == 1
    d = r.explain()
    step = {s.symbol: float(s.value) for s in d.steps if isinstance(s.value, (int, float))}
    assert step["t_recv"] == pytest.approx(14.5 * step["t_decode"], rel=1e-9)
    assert r.as_dict()["ttft_ms"] > one.as_dict()["ttft_ms"] + 0.9 * 14.5 * step["t_decode"] * 1e3
    assert d.check() == []  # every line's expression gives its value: TTFT_open includes t_recv
    assert "t_recv" not in [s.symbol for s in one.explain().steps]  # N = 1: no line


def test_the_interval_is_sglangs_and_not_under_attention_dp():
    with pytest.raises(InputError, match="recv_interval.*vllm"):
        serve("deepseek-v3", "hgx-b200", Workload(1024, 1024, 64), Layout(8, 8, 8),
              replace(load_stack("vllm"), recv_interval=10))
    with pytest.raises(InputError, match="recv_interval.*attention DP"):
        serve("deepseek-v3", "hgx-b200", Workload(1024, 1024, 64), Layout(8, 8, 8, attention_dp=True), sglang(10))
    for bad in (0, 2.5, 10**5, "30", True):
        with pytest.raises(InputError, match="recv_interval"):
            serve("deepseek-v3", "hgx-b200", Workload(1024, 1024, 64), Layout(8, 8, 8), sglang(bad))
    assert sglang(np.int64(30)).checked().recv_interval == 30


def test_disaggregated_ttft_is_the_prefill_pools():
    w = Workload(1024, 1024, 64)
    lay = Layout(16, 8, 8, prefill=Layout(8, 8, 8, attention_dp=False))
    one = serve("deepseek-v3", "hgx-b200", w, lay, sglang(1))
    r = serve("deepseek-v3", "hgx-b200", w, lay, sglang(30))
    assert r.as_dict()["ttft_ms"] == pytest.approx(one.as_dict()["ttft_ms"], rel=1e-12)
    assert any("receive interval 30" in n for n in r.notes)


def test_simulation_agrees_with_the_steady_state():
    """The event loop receives every N decode steps (and at once after a prefill step): its mean TTFT grows by what
    serve's (N − 1)/2 decode steps say, within 15 % (random lengths put arrivals at random points of the interval)."""
    kw = dict(gpus=1, tp=1, concurrency=32, requests=1500, isl="800:1000", osl="800:1000", arrivals="steady",
              framework="sglang@0.5.6", efficiency="preset")
    sim = {n: simulate("llama-3.1-8b", "h100", recv_interval=n, **kw).as_dict()["ttft_s"]["mean"] for n in (1, 30)}
    srv = {n: serve("llama-3.1-8b", "h100", Workload(900, 900, 32), Layout(1, 1), sglang(n),
                    "preset").as_dict()["ttft_ms"] / 1e3 for n in (1, 30)}
    assert sim[30] - sim[1] == pytest.approx(srv[30] - srv[1], rel=0.15)
    assert sim[30] > sim[1] + 0.1  # tens of decode steps, not a rounding


def test_plan_skips_attention_dp_and_emits_the_flag():
    st = step_stack("deepseek-v3", "b200", framework="sglang", recv_interval=30)
    assert not replica_layouts(st)["attention_dp"].any()
    assert replica_layouts(step_stack("deepseek-v3", "b200", framework="sglang"))["attention_dp"].any()
    dep = dict(model="deepseek-v3", mode="aggregated", layout=dict(tp=8, ep=8, pp=1, attention_dp=False),
               replicas=1, max_batch=64, budget=8192, kv_dtype="bf16", mtp=0, recv_interval=30)
    assert "--scheduler-recv-interval 30" in emit("sglang", dep)["commands"][0]["command"]
    out = emit("vllm", dep)
    assert "recv" not in out["commands"][0]["command"] and any("receive interval" in n for n in out["notes"])
    dep1 = dict(dep, recv_interval=1)
    assert "--scheduler-recv-interval" not in emit("sglang", dep1)["commands"][0]["command"]


def test_a_record_states_the_interval(tmp_path):
    from rackmath.analyses.fitting.validation import records

    base = """
metric = "ttft_median_s"
value = 0.5
status = "approximate"
source = "test"
source_group = "test"
framework = "sglang"
stack_version = "0.5.6"
model = "deepseek-r1"
hardware = "hgx-b200"
gpus = 8
tp = 8
isl = 1000
osl = 1000
concurrency = 64
"""
    (tmp_path / "r.toml").write_text(f'[[record]]\nid = "A"\ntitle = "a"\n{base}\n[[record]]\nid = "B"\ntitle = "b"\n'
                                     f'{base}recv_interval = 30\n')
    rs = {r.id: r for r in records([tmp_path]) if r.id in ("A", "B")}
    assert rs["B"].inputs["recv_interval"] == 30 and "recv_interval" not in rs["A"].inputs
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "r.toml").write_text(f'[[record]]\nid = "C"\ntitle = "c"\n{base}recv_interval = 0\n')
    with pytest.raises(Exception, match="recv_interval"):
        records([bad])
