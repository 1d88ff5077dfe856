"""A stack version's prefill speed η_pf (``serving.steps.prefill_speed_step``): its prompt tokens take
(t − t_decode) / η_pf of the kernel curves' time. Hand-derived numbers and invariants; the fitted values are
``stack_hosts.toml``'s (docs/stacks.md, "The prefill pool's speed")."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import rackmath
from rackmath.analyses.serving.steps import prefill_speed_step
from rackmath.engine.efficiency import for_stack, measured_efficiency
from rackmath.errors import CatalogError
from rackmath.specs.hardware import load_hardware


def test_prefill_speed_step_by_hand():
    # a mixed step: 0.1 s of decode, 0.2 s more for its prompt tokens; at η_pf = 0.5 those take 0.4 s
    assert prefill_speed_step(0.3, 0.1, 0.5) == pytest.approx(0.5)
    # a prefill pass alone (t_d = 0) at a quarter of the curves' speed: four times as long
    assert prefill_speed_step(0.2, 0.0, 0.25) == pytest.approx(0.8)
    # η_pf = 1 is the curves' time exactly (every preset), and the decode part is never scaled
    assert prefill_speed_step(0.3, 0.1, 1.0) == 0.3
    assert prefill_speed_step(0.1, 0.1, 0.2) == pytest.approx(0.1)
    # arrays broadcast (the fit's K candidates)
    got = prefill_speed_step(np.array([0.3, 0.3]), 0.1, np.array([1.0, 2.0]))
    assert got == pytest.approx([0.3, 0.2])


def _eff(chip: str, **kw):
    """The chip's measured silicon with every eager dispatch at 0 (the GPU time alone sets each prefill step)."""
    e = replace(measured_efficiency(load_hardware(chip).chip), per_version=False)
    return replace(e, **{f"eager_{s}_s": 0.0 for s in ("trtllm", "vllm", "sglang", "vllm_v0")}, **kw)


DISAGG = dict(gpus=8, prefill_gpus=4, decode_gpus=4, prefill_tp=4, prefill_ep=4, prefill_attention_dp=True, tp=4,
              ep=4, attention_dp=True, isl=8192, osl=1024, concurrency=256, weights_dtype="fp8",
              arrivals="closed-loop", framework="sglang")


def test_a_slower_prefill_pool_feeds_half_the_tokens_and_takes_twice_as_long():
    """Disaggregated: at η_pf = 1/2 the prefill pool's passes take twice the curves' time, so it feeds half the prompt
    tokens/s and one prompt's prefill takes twice as long; the decode pool's TPOT does not move."""
    fast = rackmath.serve("deepseek-r1", "gb200-nvl72", efficiency=_eff("gb200"), **DISAGG).as_dict()
    slow = rackmath.serve("deepseek-r1", "gb200-nvl72", efficiency=_eff("gb200", eta_prefill=0.5),
                          **DISAGG).as_dict()
    assert slow["prefill"]["input_tok_s"] == pytest.approx(fast["prefill"]["input_tok_s"] / 2, rel=1e-9)
    assert slow["prefill"]["prefill_s"] == pytest.approx(2 * fast["prefill"]["prefill_s"], rel=1e-9)
    assert slow["tpot_ms"] == fast["tpot_ms"]


def test_aggregated_mixed_step_scales_only_its_prompt_tokens():
    """Aggregated: the mixed step's prompt tokens take (t_mixed,gpu − t_decode,gpu)/η_pf; the pure decode step (and so
    TPOT at a load with no prefill) does not move, and --explain's working adds up with the η_pf lines in it."""
    kw = dict(gpus=8, tp=8, isl=8192, osl=1024, concurrency=64, framework="sglang", arrivals="closed-loop")
    r = rackmath.serve("deepseek-v3", "hgx-h200", efficiency=_eff("h200", eta_prefill=0.4), **kw)
    d = r.explain()
    assert d.check() == []
    lines = {x.key or x.symbol: x for x in d.steps}
    assert lines["eta_pf"].value == pytest.approx(0.4)
    t_d, t_gm = lines["t_verify"].value, lines["t_gm"].value
    assert lines["t_gm_pf"].value == pytest.approx(t_d + (t_gm - t_d) / 0.4, rel=1e-9)
    base = rackmath.serve("deepseek-v3", "hgx-h200", efficiency=_eff("h200"), **kw)
    assert base.ttft_ms < r.ttft_ms  # longer prefill: a later first token
    assert "eta_pf" not in {x.key for x in base.explain().steps}  # η_pf = 1: no line


def test_disaggregated_explain_adds_up_at_a_stack_prefill_speed():
    r = rackmath.serve("deepseek-r1", "gb200-nvl72", efficiency=_eff("gb200", eta_prefill=0.25), **DISAGG)
    d = r.explain()
    assert d.check() == []
    lines = {x.key or x.symbol: x for x in d.steps}
    assert lines["t_p1_pf"].value == pytest.approx(4 * lines["t_p1"].value, rel=1e-9)


def test_for_stack_reads_a_versions_prefill_speed(monkeypatch):
    """``prefill_eta`` in stack_hosts.toml becomes the efficiency's η_pf under --efficiency measured; out of
    (0, 2] it is a catalog error naming the field."""
    from rackmath.analyses.serving.serve import load_stack
    from rackmath.specs import stacks as S

    st = load_stack("sglang@0.5.7")
    table = dict(S._host_table())
    monkeypatch.setattr(S, "_host_table", lambda: table | {st.label: {"sched": 1e-3, "prefill": 0.3}})
    e = for_stack(replace(measured_efficiency(load_hardware("h200").chip)), st)
    assert e.eta_prefill == pytest.approx(0.3) and e.sched_sglang_s == pytest.approx(1e-3)


def _rejects(tmp_path, monkeypatch, label: str, line: str, field: str):
    """A stack_hosts.toml whose one version has ``line`` is a catalog error naming ``field``."""
    from rackmath.specs import stacks as S

    bad = tmp_path / "stack_hosts.toml"
    bad.write_text(f'[[_stack_host]]\nstack_version = "{label}"\n{line}\n')
    monkeypatch.setattr(S, "HOSTS", bad)
    S._host_table.cache_clear()
    try:
        with pytest.raises(CatalogError, match=field):
            S.host_times(label)
    finally:
        S._host_table.cache_clear()


def test_stack_hosts_rejects_a_prefill_speed_out_of_range(tmp_path, monkeypatch):
    _rejects(tmp_path, monkeypatch, "sglang@0.5.7", "prefill_eta = 0", "prefill_eta")


def test_plan_step_table_prices_prefill_at_the_same_speed():
    """plan's and simulate's step table (``step_table``) applies η_pf as serve does: a prefill pass alone takes
    t/η_pf, a mixed step's prompt tokens (t_mixed − t_decode)/η_pf, a decode step is unchanged."""
    from rackmath.analyses.serving import step_table as T

    fast = T.stack("llama-3.1-70b", "hgx-h100", efficiency=_eff("h100"), framework="vllm")
    slow = T.stack("llama-3.1-70b", "hgx-h100", efficiency=_eff("h100", eta_prefill=0.5), framework="vllm")
    lay = T.replica_layouts(fast, 8)
    assert T.prefill_grid(slow, lay, 8192, 8192) == pytest.approx(2 * np.asarray(T.prefill_grid(fast, lay, 8192,
                                                                                                8192)), rel=1e-9)
    dec_f = T._mixed_grid(fast, lay, 64, 0.0, 2048.0, 2048)
    dec_s = T._mixed_grid(slow, lay, 64, 0.0, 2048.0, 2048)
    assert np.array_equal(dec_f, dec_s)
    mix_f = T._mixed_grid(fast, lay, 64, 2048.0, 2048.0, 2048)
    mix_s = T._mixed_grid(slow, lay, 64, 2048.0, 2048.0, 2048)
    assert mix_s == pytest.approx(dec_f + 2 * (mix_f - dec_f), rel=1e-9)


# ------------------------------------------------------------------- a prompt pass whose all-to-all syncs the host

def test_synced_prompt_pass_by_hand():
    from rackmath.analyses.serving.steps import prompt_pass_step, synced_eager_step, synced_prompt_pass

    # attention DP with EP: the experts' all-to-all sizes its buffers from counts the host reads back
    assert synced_prompt_pass(True, 4) and not synced_prompt_pass(False, 4) and not synced_prompt_pass(True, 1)
    # 0.3 s of GPU work, 1,000 kernels at 100 µs each: serial 0.4 s where synced, else the longer of the two
    assert synced_eager_step(0.3, 1000, 1e-4) == pytest.approx(0.4)
    got = prompt_pass_step(0.3, 1000, 1e-4, np.array([True, False]))
    assert got == pytest.approx([0.4, 0.3])


def test_attention_dp_prefill_pool_pays_its_dispatch_on_top_of_the_gpu():
    """A disaggregated prefill pool with attention DP and EP: t_pass = t_gpu + n·τ_eager (the host syncs at every MoE
    layer); the same pool without attention DP keeps max(t_gpu, n·τ_eager). --explain's working adds up either way."""
    from rackmath.analyses.serving.steps import step_kernels
    from rackmath.engine.efficiency import stack_eager_s

    eff = replace(measured_efficiency(load_hardware("gb200").chip), per_version=False, eager_sglang_s=5e-5)
    for adp in (True, False):
        r = rackmath.serve("deepseek-r1", "gb200-nvl72", efficiency=eff, **(DISAGG | dict(prefill_attention_dp=adp)))
        info = r._info
        res_1 = info["prefill_one"]
        t_gpu = float(np.asarray(res_1.tpot_s))
        host = float(np.asarray(step_kernels(res_1))) * stack_eager_s(eff, "sglang")
        want = (t_gpu + host) if adp else max(t_gpu, host)
        assert float(np.asarray(info["prefill"]["prefill_s"])) == pytest.approx(want * info["n_chunks"], rel=1e-9)
        assert r.explain().check() == []


def test_for_stack_reads_a_versions_first_wave_speed(tmp_path, monkeypatch):
    """``wave_eta`` in stack_hosts.toml becomes the efficiency's η_wave under --efficiency measured (the presets keep
    1); out of (0, 2] it is a catalog error naming the field."""
    from rackmath.analyses.serving.serve import load_stack
    from rackmath.specs import stacks as S

    st = load_stack("vllm@0.13.0")
    assert S.host_times(st.label)["wave"] == pytest.approx(0.37, abs=0.1)  # the shipped fit: 2.7× slower passes
    table = dict(S._host_table())
    monkeypatch.setattr(S, "_host_table", lambda: table | {st.label: {"wave": 0.25}})
    assert for_stack(measured_efficiency(load_hardware("h200").chip), st).eta_wave == pytest.approx(0.25)
    from rackmath.engine.efficiency import default_efficiency

    assert default_efficiency("h200").eta_wave == 1.0
    monkeypatch.undo()
    _rejects(tmp_path, monkeypatch, "vllm@0.13.0", "wave_eta = 3", "wave_eta")
