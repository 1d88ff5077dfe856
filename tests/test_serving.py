"""The serving model: limits against published hardware/model figures, MTP, dtypes, disaggregation, properties."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rackmath
from rackmath.analyses.serving import serve as serving
from rackmath.errors import InputError
from conftest import run_cli

# Published figures used as expectations (not rackmath's output):
H200_BW = 4.8e12  # published.md H2: H200 4.8 TB/s
H100_BF16 = 989.4e12  # published.md H1: H100 dense BF16
H200_FP8 = 1978.9e12  # published.md H1/H2: Hopper dense FP8
LLAMA70B_PARAMS = 70.55e9  # Llama 3.1 70B model card (70.6B)
LLAMA8B_MATMUL_PARAMS = 8.03e9 - 128256 * 4096  # model card 8.03B less the input embedding (config: V·d)


def test_c1_tpot_is_the_weight_fetch_floor():
    """C = 1: TPOT = weights / HBM bandwidth (lecture 00:00), Llama 70B FP8 on one H200 = 70.6 GB / 4.8 TB/s."""
    r = rackmath.serve("llama-3.3-70b", "hgx-h200", gpus=1, tp=1, isl=2048, osl=256, concurrency=1,
                       weights_dtype="fp8", ideal=True)
    floor = LLAMA70B_PARAMS * 1.0 / H200_BW
    assert r.tpot_ms / 1e3 == pytest.approx(floor, rel=0.03)
    assert r.bottleneck == "weights"


def test_c1_ttft_is_prefill_plus_one_step():
    """C = 1: TTFT = the prompt's prefill (2·N·ISL / peak) plus one decode step."""
    r = rackmath.serve("llama-3.3-70b", "hgx-h200", gpus=1, tp=1, isl=2048, osl=256, concurrency=1,
                       weights_dtype="fp8", ideal=True)
    prefill = 2 * LLAMA70B_PARAMS * 2048 / H200_FP8
    step = LLAMA70B_PARAMS / H200_BW
    assert r.ttft_ms / 1e3 == pytest.approx(prefill + step, rel=0.05)


def test_huge_concurrency_reaches_the_compute_roofline():
    """C → ∞: total tokens/s per GPU → peak / (2 · N_matmul), with the LM head (V·d) run only for the output
    tokens (a prompt's positions are not sampled): 2·(N − V·d/2) FLOPs per token at ISL = OSL."""
    r = rackmath.serve("llama-3.1-8b", "hgx-h100", gpus=1, tp=1, isl=128, osl=128, concurrency=[1e3, 1e4, 1e5],
                       weights_dtype="bf16", ideal=True)
    limit = H100_BF16 / (2 * (LLAMA8B_MATMUL_PARAMS - 128256 * 4096 / 2))
    tot = np.asarray(r.total_tok_s_per_gpu)
    assert tot[-1] == pytest.approx(limit, rel=0.05)
    # flat past saturation: a closed loop's throughput is C · OSL over the cycle (closed_loop_rate), whose TPOT is
    # priced with all C decoding though some are in their prefill, so it may sag by a hair (≤ 0.2%) as C grows
    assert np.all(np.diff(tot) >= -2e-3 * tot[:-1]) and tot[-1] <= limit * 1.001
    assert r.bottleneck[-1] == "compute"


def test_throughput_counts_every_gpu_and_input_tokens():
    r = rackmath.serve("llama-3.3-70b", "hgx-h100", gpus=8, tp=2, isl=1000, osl=250, concurrency=64,
                       weights_dtype="fp8", usd_per_gpu_hour=2.0)
    assert r.output_tok_s_per_gpu * 8 == pytest.approx(r.output_tok_s)
    assert r.total_tok_s_per_gpu == pytest.approx(r.output_tok_s_per_gpu * (1 + 1000 / 250))
    assert r.tokens_per_s_per_user * r.tpot_ms == pytest.approx(1000.0)
    # $/Mtok = GPUs · $/h ÷ 3600 / tok/s · 1e6 at DeepSeek's $2/GPU-h (published.md D6)
    assert r.usd_per_mtok_output == pytest.approx(8 * 2.0 / 3600 / r.output_tok_s * 1e6)
    assert r.layout["dp"] == 4


def test_mtp_speeds_each_user_by_about_the_acceptance():
    """k = 1 draft, A = 1.8 tokens per step: at C = 1 (memory-bound) a user sees ~1.8× the tokens/s, less the draft."""
    kw = dict(gpus=8, tp=8, isl=1000, osl=1000, concurrency=1, ideal=True)
    base = rackmath.serve("llama-3.3-70b", "hgx-h100", **kw)
    spec = rackmath.serve("llama-3.3-70b", "hgx-h100", mtp=1, acceptance=1.8, **kw)
    gain = spec.tokens_per_s_per_user / base.tokens_per_s_per_user
    assert 1.55 < gain < 1.8
    # at large batch (compute-bound) verifying k+1 tokens per emitted A costs compute: less throughput gain
    big = dict(kw, concurrency=1024)
    g_big = (rackmath.serve("llama-3.3-70b", "hgx-h100", mtp=3, acceptance=2.0, **big).output_tok_s
             / rackmath.serve("llama-3.3-70b", "hgx-h100", **big).output_tok_s)
    assert g_big < 1.0


@pytest.mark.parametrize("acc,mtp", [(0.5, 1), (3.5, 2), (1.5, 0)])
def test_acceptance_outside_1_to_k_plus_1_is_refused(acc, mtp):
    with pytest.raises(InputError) as e:
        rackmath.serve("llama-3.1-8b", "hgx-h100", gpus=1, isl=10, osl=10, concurrency=1, mtp=mtp, acceptance=acc)
    assert e.value.field == "acceptance"


@pytest.mark.parametrize("dtype,bits", [("fp8", 8), ("fp4", 4), ("mxfp4", 4.25), ("nvfp4", 4.5)])
def test_weight_dtypes_scale_the_weight_fetch(dtype, bits):
    """At C = 1 the step is the weight fetch: bytes per parameter incl. block scales (MXFP4 4.25 bits, NVFP4 4.5)."""
    kw = dict(gpus=1, tp=1, isl=100, osl=100, concurrency=1, ideal=True)
    b16 = rackmath.serve("llama-3.1-8b", "hgx-b200", weights_dtype="bf16", **kw)
    q = rackmath.serve("llama-3.1-8b", "hgx-b200", weights_dtype=dtype, **kw)
    assert q.tpot_ms / b16.tpot_ms == pytest.approx(bits / 16, rel=0.02)


def test_kv_dtype_halves_the_kv_fetch():
    """Long context, many sequences: KV-bound; FP8 KV halves the KV term (t_kv)."""
    kw = dict(gpus=8, tp=8, isl=60000, osl=60000, concurrency=8, ideal=True, weights_dtype="fp8")
    a = rackmath.serve("llama-3.3-70b", "hgx-h200", kv_dtype="bf16", **kw)
    b = rackmath.serve("llama-3.3-70b", "hgx-h200", kv_dtype="fp8", **kw)
    assert b.as_dict()["t_kv_ms"] == pytest.approx(a.as_dict()["t_kv_ms"] / 2, rel=1e-6)
    assert a.bottleneck == "kv"


def test_mla_kv_is_the_latent_not_full_mha():
    """DeepSeek-V3 MLA KV = (512 + 64) × 61 layers × 2 B = 70,272 B/token (published.md C1d), not 128 heads' K and V."""
    mn = serving.decode_numbers(rackmath.specs.models.load_model("deepseek-v3"), serving.mean_decode_context(4000, 2000),
                                kv_dtype="bf16")
    assert mn.kv_bytes_per_seq == pytest.approx(70272 * 5000, rel=1e-9)


def test_disaggregated_pools_and_gpu_count():
    kw = dict(isl=4000, osl=1000, concurrency=2048, tp=32, ep=32, attention_dp=True, weights_dtype="fp8")
    r = rackmath.serve("deepseek-v3", "hgx-h800", gpus=64, prefill_gpus=32, decode_gpus=32, **kw)
    assert r.mode == "disaggregated" and r.prefill["gpus"] == 32
    assert r.output_tok_s_per_gpu == pytest.approx(r.output_tok_s / 64)  # both pools counted
    # more prefill GPUs can only help a prefill-bound deployment
    r2 = rackmath.serve("deepseek-v3", "hgx-h800", gpus=96, prefill_gpus=64, decode_gpus=32, **kw)
    assert r2.output_tok_s >= r.output_tok_s * (1 - 1e-9)
    with pytest.raises(InputError) as e:
        rackmath.serve("deepseek-v3", "hgx-h800", gpus=60, prefill_gpus=32, decode_gpus=32, **kw)
    assert e.value.field == "gpus"


def test_layout_is_chosen_when_not_given():
    r = rackmath.serve("qwen3-235b-a22b", "hgx-h200", gpus=8, isl=1000, osl=1000, concurrency=512,
                       weights_dtype="fp8")
    assert r.layout_chosen and any("layout chosen" in n for n in r.notes)
    assert r.layout["tp"] * r.layout["pp"] * r.layout["dp"] == 8
    # the chosen layout is at least as fast as the obvious TP8
    fixed = rackmath.serve("qwen3-235b-a22b", "hgx-h200", gpus=8, tp=8, isl=1000, osl=1000, concurrency=512,
                           weights_dtype="fp8")
    assert r.step_ms <= fixed.step_ms * (1 + 1e-9)


def test_does_not_fit_is_reported():
    r = rackmath.serve("llama-3.3-70b", "hgx-h100", gpus=1, tp=1, isl=100, osl=100, concurrency=1,
                       weights_dtype="bf16")
    assert r.fits is False  # 141 GB of bf16 weights on one 80 GB H100
    assert r.as_dict()["mem_short_gb"] >= 141.1 - 72.0  # issue 34: by how much (141 GB against 0.9 × 80 GB)
    with pytest.raises(InputError):  # without --tp: the weights exceed even the whole 80 GB, nothing could run
        rackmath.serve("llama-3.3-70b", "hgx-h100", gpus=1, isl=100, osl=100, concurrency=1, weights_dtype="bf16")


def test_calibrated_is_slower_than_ideal():
    kw = dict(gpus=8, tp=8, isl=1000, osl=1000, concurrency=256, weights_dtype="fp8")
    ideal = rackmath.serve("llama-3.3-70b", "hgx-h100", ideal=True, **kw)
    cal = rackmath.serve("llama-3.3-70b", "hgx-h100", **kw)
    assert cal.efficiency == "hopper-serving" and ideal.efficiency == "ideal"
    assert cal.step_ms > ideal.step_ms


def test_explain_is_a_derivation():
    r = rackmath.serve("llama-3.1-8b", "hgx-h100", gpus=1, isl=512, osl=128, concurrency=8)
    d = r.explain()
    syms = [s.symbol for s in d.steps]
    assert {"L̄", "t_decode", "t̄", "TPOT", "X_out", "TTFT"} <= set(syms)
    assert d.check() == []  # every step's expression reproduces its printed value
    assert d.steps[0].value == pytest.approx(512 + 64)


def test_mixed_step_explains_its_eager_kernels_and_the_mla_count():
    """The mixed step's line shows n_eager (serving.step_kernels of the step carrying prompt tokens) and, for an MLA
    model, that its blocks dispatch 1.5 × their graph kernels; a GQA model's line has no such note."""
    kw = dict(gpus=8, tp=8, isl=1000, osl=1000, concurrency=64, framework="sglang")
    for model, mla in (("deepseek-r1", True), ("llama-3.1-70b", False)):
        r = rackmath.serve(model, "hgx-b200", **kw)
        steps = r.explain().steps
        step = next(s for s in steps if s.symbol == "t_mixed")
        n = float(r._info["eager_kernels_mixed"])
        assert next(s for s in steps if s.symbol == "n_eager").value == n and "n_e * tau_e" in step.expr
        assert ("an MLA block dispatches 1.5 × its graph kernels" in step.note) is mla
    # DeepSeek-R1 on TP8: the graph's 1,744 kernels + 122 all-reduces, and half of the 61 MLA blocks' 13 again
    assert float(rackmath.serve("deepseek-r1", "hgx-b200", **kw)._info["eager_kernels_mixed"]) == \
        pytest.approx(1744 + 122 + 0.5 * 13 * 61)


def test_eager_decode_steps_take_the_hosts_dispatch_time():
    """--eager (no CUDA graphs): t_verify = max(GPU time, n_kernels · τ_eager), hand-counted kernels."""
    from dataclasses import replace

    from rackmath.engine.efficiency import load_efficiency
    from rackmath.engine.step import ELEMENTWISE_KERNELS_PER_LAYER, KERNELS

    eff = replace(load_efficiency("hopper-serving"), eager_vllm_s=50e-6)
    kw = dict(gpus=1, isl=512, osl=128, concurrency=8, framework="vllm", efficiency=eff)
    graphs = rackmath.serve("llama-3.1-8b", "hgx-h100", **kw)
    eager = rackmath.serve("llama-3.1-8b", "hgx-h100", eager=True, **kw)
    # Llama-3.1-8B on one GPU: 32 layers × (QKV/O 3 + attention 2 + gated FFN 3 + elementwise 4) + LM head 2
    n = 32 * (KERNELS["qkv_o"] + KERNELS["attention"] + KERNELS["dense_ffn"] + ELEMENTWISE_KERNELS_PER_LAYER) + 2
    assert n == 386 and float(serving.step_kernels(eager._res)) == n
    t_gpu = graphs._info["t_verify"]
    assert t_gpu < n * 50e-6  # the host binds here
    assert eager._info["t_verify"] == pytest.approx(n * 50e-6) and eager._info["t_decode_gpu"] == pytest.approx(t_gpu)
    assert eager.tpot_ms > graphs.tpot_ms
    d = eager.explain()
    assert [s.symbol for s in d.steps][3:6] == ["t_gpu", "n_kernels", "τ_eager"] and d.check() == []
    assert d.steps[6].symbol == "t_verify" and d.steps[6].expr == "max(t_gpu, n_k * tau_e)"
    # a small dispatch time hides behind the GPU: eager changes nothing
    cheap = rackmath.serve("llama-3.1-8b", "hgx-h100", eager=True,
                           **{**kw, "efficiency": replace(eff, eager_vllm_s=1e-6)})
    assert cheap._info["t_verify"] == pytest.approx(t_gpu)
    with pytest.raises(InputError, match="eager"):
        rackmath.serve("llama-3.1-8b", "hgx-h100", eager="yes", **kw)
    code, out, err = run_cli("serve", "llama-3.1-8b", "--hardware", "hgx-h100", "--gpus", "1", "--isl", "512",
                             "--osl", "128", "--concurrency", "8", "--framework", "vllm", "--eager", "--explain")
    assert code == 0 and "--eager: no CUDA graph" in out


def test_sglang_runs_its_scheduler_serially_under_speculative_decoding():
    """SGLang turns its overlap scheduler off with EAGLE / NEXTN: the host time adds to the step instead of hiding."""
    from dataclasses import replace

    from rackmath.engine.efficiency import load_efficiency

    base = replace(load_efficiency("blackwell-serving"), sched_sglang_s=0.0, seq_sglang_s=0.0)
    host = replace(base, sched_sglang_s=2e-3)
    kw = dict(gpus=8, tp=8, isl=200, osl=280, concurrency=1, framework="sglang")
    for mtp, acc in ((0, None), (3, 2.46)):
        r0 = rackmath.serve("deepseek-v3", "hgx-b200", mtp=mtp, acceptance=acc, efficiency=base, **kw)
        r1 = rackmath.serve("deepseek-v3", "hgx-b200", mtp=mtp, acceptance=acc, efficiency=host, **kw)
        gpu = r0._info["t_verify"]
        assert gpu > 2e-3  # the GPU step is longer than the host's 2 ms
        if mtp:  # serial: the 2 ms show in full
            assert r1._plan.stack.overlap_scheduler is False and any("overlap scheduler off" in n for n in r1.notes)
            assert r1._info["t_verify"] == pytest.approx(gpu + 2e-3)
        else:  # overlapped: hidden behind the GPU
            assert r1._plan.stack.overlap_scheduler is True
            assert r1._info["t_verify"] == pytest.approx(gpu)
    # TensorRT-LLM keeps its overlap scheduler with MTP
    t = rackmath.serve("deepseek-v3", "hgx-b200", mtp=3, acceptance=2.46, **{**kw, "framework": "trtllm"})
    assert t._plan.stack.overlap_scheduler is True


# --- equations -----------------------------------------------------------------------------------------------


def test_equations():
    assert serving.mean_decode_context(1000, 500) == 1250
    assert serving.prefill_tokens_per_seq_step(1000, 500, 1.0, 0.5) == pytest.approx(1.0)
    assert serving.prefill_attended_context(1000, 0.5) == pytest.approx(750)
    assert serving.output_tokens_per_s(100, 0.05, 2.0) == pytest.approx(4000)
    # Little's law on MLPerf M2 (published.md): 21,606 tok/s, 290 out, TTFT 0.276 s, TPOT 0.155 s → ~3,350 in flight
    assert serving.little_concurrency(21605.8, 290, 0.276, 0.155) == pytest.approx(3350, rel=0.01)
    x = serving.disaggregated_output_rate(np.array([100.0, 1000.0]), 2000.0, 1000, 100)
    assert x.tolist() == [100.0, 200.0]


# --- properties ----------------------------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(isl=st.integers(16, 8000), osl=st.integers(16, 4000), c=st.integers(1, 4096))
def test_properties(isl, osl, c):
    cs = np.array([c, 2 * c], dtype=float)
    r = rackmath.serve("llama-3.1-8b", "hgx-h100", gpus=1, tp=1, isl=isl, osl=osl, concurrency=cs)
    out, tpot = np.asarray(r.output_tok_s), np.asarray(r.tpot_ms)
    assert np.all(out > 0) and np.all(tpot > 0)
    # more sequences in flight never lower throughput — beyond 0.2%: the closed loop's rate C · OSL / cycle
    # (closed_loop_rate) prices TPOT with all C decoding though some are in their prefill, so where prefill fills the
    # cycle it is flat in C to within a hair
    assert out[1] >= out[0] * (1 - 2e-3)
    assert tpot[1] >= tpot[0] * (1 - 1e-9)  # … and never shortens the step
    assert np.allclose(np.asarray(r.total_tok_s) / out, 1 + isl / osl)
    assert np.allclose(np.asarray(r.tokens_per_s_per_user) * tpot, 1000.0)
    assert np.all(np.asarray(r.ttft_ms) >= tpot)
    # throughput is at most C · A / t̄ (t̄ = the mean step, prefill stalls included; less by the closed loop's cycle)
    assert np.all(out <= cs / (np.asarray(r.step_ms) / 1e3) * (1 + 1e-9))


@settings(max_examples=15, deadline=None)
@given(k=st.integers(1, 4), frac=st.floats(0.0, 1.0))
def test_mtp_property(k, frac):
    a = 1.0 + frac * k
    r = rackmath.serve("llama-3.1-8b", "hgx-h100", gpus=1, isl=256, osl=256, concurrency=4, mtp=k, acceptance=a)
    # TPOT = (the mean step, less the share of a request's own prefill) / A
    assert r.decode_step_ms / a * (1 - 1e-9) <= r.tpot_ms <= r.step_ms / a * (1 + 1e-9)


# --- CLI -----------------------------------------------------------------------------------------------------


def test_cli_serve_json():
    code, out, err = run_cli("serve", "--model", "llama-3.3-70b", "--hardware", "hgx-h200", "--gpus", "8",
                             "--isl", "1000", "--osl", "1000", "--concurrency", "256", "--tp", "8",
                             "--weights-dtype", "fp8", "--kv-dtype", "fp8", "--mtp", "2", "--acceptance", "2.2",
                             "--json")
    assert code == 0, err
    d = json.loads(out)
    for k in ("output_tok_s_per_gpu", "total_tok_s_per_gpu", "tpot_ms", "ttft_ms", "step_ms", "bottleneck"):
        assert k in d
    assert d["layout"]["tp"] == 8 and d["acceptance"] == 2.2


def test_cli_serve_table_explain_and_ideal():
    base = ("serve", "--model", "llama-3.1-8b", "--hardware", "hgx-h100", "--gpus", "1", "--isl", "1K", "--osl",
            "200", "--concurrency", "16")
    code, out, _ = run_cli(*base)
    assert code == 0 and "TPOT" in out and "layout" in out
    code, out, _ = run_cli(*base, "--explain")
    assert code == 0 and "t_decode" in out
    code, out, _ = run_cli(*base, "--ideal", "--json")
    assert code == 0 and json.loads(out)["efficiency"] == "ideal"


def test_cli_serve_bad_input_is_one_line():
    code, out, err = run_cli("serve", "--model", "llama-3.1-8b", "--hardware", "hgx-h100", "--gpus", "8",
                             "--isl", "100", "--osl", "100", "--concurrency", "1", "--prefill-gpus", "2",
                             "--decode-gpus", "2")
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_cli_experts_that_do_not_divide_offer_working_ways_out():
    """256 experts over EP144 (DeepSeek's decode unit): refused with the ways out, each of which is a flag."""
    base = ("serve", "-m", "deepseek-v3", "-H", "hgx-h800", "--gpus", "144", "--isl", "4989", "--osl", "1000",
            "-c", "12672", "--tp", "144", "--ep", "144", "--attention-dp", "--json")
    code, _, err = run_cli(*base)
    assert code == 2 and err.startswith("error: ep:") and "redundant" in err and "uneven" in err
    code, out, err = run_cli(*base, "--redundant-experts", "32")  # 288 = 2 × 144, as DeepSeek deploys
    assert code == 0, err
    even = json.loads(out)
    code, out, err = run_cli(*base, "--uneven-experts")  # the most-loaded GPU holds 2 of the 256
    assert code == 0, err
    assert json.loads(out)["tpot_ms"] >= 0.9 * even["tpot_ms"]


# ----------------------------------------------------------------------------- Poisson arrivals batch prompts


def test_poisson_mixed_share_fixed_point_and_limits():
    """s = q_d / (1 − q_m + q_d), q = 1 − e^(−λt), λ = (p/ISL)/t̄, t̄ = t_d + s(t_m − t_d); → p/ISL as λt → 0."""
    p, isl, td, tm = 155.0, 297.0, 0.008, 0.055
    s = float(serving.poisson_mixed_share(p, isl, td, tm, p / isl))
    lam = (p / isl) / (td + s * (tm - td))
    qd, qm = 1 - np.exp(-lam * td), 1 - np.exp(-lam * tm)
    assert s == pytest.approx(qd / (1 - qm + qd), rel=1e-6)
    assert 0.30 < s < p / isl  # prompts that arrive during a 55 ms mixed step ride the next one: fewer mixed steps
    # a trickle of prompts: one prompt per mixed step, the deterministic n = p / ISL
    assert float(serving.poisson_mixed_share(0.01, isl, td, tm, 0.01 / isl)) == pytest.approx(0.01 / isl, rel=1e-3)
    # equal steps: the chain is memoryless, s = 1 − e^(−λ t)
    s_eq = float(serving.poisson_mixed_share(100.0, 1000.0, 0.01, 0.01, 0.1))
    assert s_eq == pytest.approx(1 - np.exp(-0.1), rel=1e-6)


def test_steady_serve_agrees_with_the_poisson_simulator():
    """The analytic steady state (prompts batched by arrival during mixed steps) against the discrete-event
    simulator fed Poisson arrivals, at the simulator's own mean number of running sequences."""
    kw = dict(gpus=8, tp=8, isl=297, osl=192, weights_dtype="mxfp4", framework="sglang")
    sim = rackmath.simulate("gpt-oss-120b", "hgx-b200", rate=20, requests=6000, seed=1, **kw).as_dict(timeline=False)
    running = float(sim["running_per_replica"])
    r = rackmath.serve("gpt-oss-120b", "hgx-b200", concurrency=round(running), arrivals="poisson", **kw)
    assert r.tpot_ms / 1e3 == pytest.approx(float(sim["tpot_s"]["mean"]), rel=0.05)
    assert r.output_tok_s == pytest.approx(float(sim["output_tok_s"]), rel=0.05)
    # one prompt per mixed step (the evenly spread stream, arrivals="steady") stalls the decode stream 30% more
    even = rackmath.serve("gpt-oss-120b", "hgx-b200", concurrency=round(running), **kw)
    assert even.tpot_ms > 1.2 * r.tpot_ms


def test_serve_holds_a_dense_model_2d_weight_stationary_over_the_tp_given():
    """``serve --tp 64 --weight-layout 2d``: PaLM 540B decoding 512 sequences on 64 TPU v4 (P7's shape), ideal.
    1D: 118 all-reduces (a parallel block) of 512 · 18,432 · 2 B = 18.87 MB, 118 · (2 · 63/64 · 18.87 MB / 270 GB/s
    + 5 µs) = 16.83 ms; 2D (X = 4, YZ = 16): 118 · (0.84375 · 18.87 MB / 270 GB/s + 4 · 5 µs) = 9.32 ms. Overlapped
    (the ideal roofline) the bytes hide under the step, the three extra collectives' latency does not: +1.77 ms."""
    from rackmath import serve

    kw = dict(gpus=64, tp=64, isl=2048, osl=64, concurrency=512, ideal=True)
    one, two = (serve("palm-540b", "tpu-v4-pod", weight_layout=w, **kw) for w in ("1d", "2d"))
    act = 512 * 18432 * 2
    assert one.values["t_comm_ms"] == pytest.approx(118 * (2 * 63 / 64 * act / 270e9 + 5e-6) * 1e3, rel=1e-9)
    assert two.values["t_comm_ms"] == pytest.approx(118 * (0.84375 * act / 270e9 + 4 * 5e-6) * 1e3, rel=1e-9)
    assert two.values["decode_step_ms"] - one.values["decode_step_ms"] == pytest.approx(118 * 3 * 5e-3, rel=1e-6)
    assert two.layout["label"] == "TP64 2D weight-stationary ×1"
    for bad, why in ((dict(tp=None), "2d without --tp"), (dict(model="deepseek-v3"), "a mixture of experts"),
                     (dict(attention_dp=True), "with attention DP"), (dict(weight_layout="3d"), "unknown '3d'")):
        args = dict(kw, weight_layout="2d", model="palm-540b") | bad
        with pytest.raises(InputError, match=f"weight_layout: .*{why}"):
            serve(args.pop("model"), "tpu-v4-pod", **args)


def test_weight_only_int4_multiplies_at_the_bf16_rate():
    """AWQ INT4 (W4A16) reads 4-bit weights but multiplies on the BF16 tensor cores: a compute-bound prefill takes
    the BF16 time, twice the FP8 time (H100: 989.4 vs 1,978.9 TFLOP/s dense, published.md H1); with the
    activations quantised to FP8 (W4A8, --compute-dtype fp8) it takes the FP8 time."""
    kw = dict(chips=8, tp=8, batch=8, isl=8192, ideal=True)
    t = {k: serving.prefill_time("llama-3.1-70b", "hgx-h100", **kw, **dt)[1]
         for k, dt in (("bf16", dict(weights_dtype="bf16")), ("fp8", dict(weights_dtype="fp8")),
                       ("int4", dict(weights_dtype="int4")),
                       ("w4a8", dict(weights_dtype="int4", compute_dtype="fp8")))}
    tc = {k: float(np.sum(r.t_compute_s)) for k, r in t.items()}
    assert tc["int4"] == pytest.approx(tc["bf16"], rel=1e-9)
    assert tc["w4a8"] == pytest.approx(tc["fp8"], rel=1e-9)
    # the weight GEMMs of 8 × 8,192 prompt tokens: 2 · (N − 2·V·d) · T FLOPs (no GEMM for the embedding lookup, the
    # LM head on each prompt's last token only: 8 tokens, below 1e-6 of the total), split over 8 chips; attention
    # runs at the KV dtype's (BF16) rate in both, so the difference is the weight GEMMs' alone
    n, v, d = 70_553_706_496, 128_256, 8_192  # Llama 3.1 70B (published.md §5, its config.json)
    f = 2.0 * (n - 2 * v * d) * 8 * 8192
    assert tc["int4"] - tc["fp8"] == pytest.approx(f / 8 * (1 / 989.4e12 - 1 / 1978.9e12), rel=1e-3)


def test_serve_names_the_gemm_dtype_when_it_is_not_the_weights():
    r = rackmath.serve("llama-3.1-70b", "hgx-h100", gpus=8, tp=8, isl=1000, osl=100, concurrency=8,
                       weights_dtype="int4")
    assert r.as_dict()["compute_dtype"] == "bf16"
    assert "weights int4, GEMMs in bf16," in r.explain().render()
    r = rackmath.serve("llama-3.1-70b", "hgx-h100", gpus=8, tp=8, isl=1000, osl=100, concurrency=8,
                       weights_dtype="fp8")
    assert r.as_dict()["compute_dtype"] == "fp8" and "GEMMs in" not in r.explain().render()
    with pytest.raises(InputError) as e:
        rackmath.serve("llama-3.1-70b", "hgx-h100", gpus=8, tp=8, isl=1000, osl=100, concurrency=8,
                       compute_dtype="fp8")
    assert e.value.field == "compute_dtype"


@pytest.mark.parametrize("value, says", [("fp8", "narrower than the bf16 weights"), ("fp3", "unknown dtype")])
def test_cli_compute_dtype_errors_are_one_line(value, says):
    code, out, err = run_cli("serve", "llama-3.1-70b", "-H", "h100", "--isl", "1000", "--osl", "100", "-c", "8",
                             "--weights-dtype", "bf16", "--compute-dtype", value)
    assert code == 2 and out == ""
    line = err.strip()
    assert "\n" not in line and line.startswith("error: compute_dtype: ") and says in line and "accepted" in line


# ----------------------------------------------------------------------------- a closed-loop benchmark client's TTFT


def test_closed_loop_ttft_by_hand():
    """C = 4 prompts reach one prefill replica together, each t_p = ISL_new / X_P = 1,000 / 10,000 tok/s = 0.1 s of
    it: they finish after 0.1, 0.2, 0.3, 0.4 s, mean t_p · (1 + 2 + 3 + 4)/4 = 0.25 s, + t_KV 10 ms + t_request 2 ms
    = 0.262 s. The client sends N = 10 · C = 40 requests, 4 of them in the first wave: w = 1/10, so with a steady
    TTFT of 0.05 s the mean is 0.262/10 + 0.9 · 0.05 = 0.0712 s."""
    wave = float(serving.disaggregated_wave_ttft(0.05, 0.01, 1000.0, 10_000.0, 4, 0.002))
    assert wave == pytest.approx(0.1 * (1 + 2 + 3 + 4) / 4 + 0.01 + 0.002, rel=1e-12)
    w = float(serving.first_wave_share(serving.CLOSED_LOOP_PROMPTS_PER_CLIENT * 4, 4))
    assert w == pytest.approx(0.1, rel=1e-12)
    assert float(serving.closed_loop_ttft(wave, 0.05, w)) == pytest.approx(0.0262 + 0.045, rel=1e-12)
    # one request alone waits for nobody: its own prefill (0.2 s > its 0.1 s share of the pool's rate)
    assert float(serving.disaggregated_wave_ttft(0.2, 0.01, 1000.0, 10_000.0, 1, 0.002)) == pytest.approx(0.212)
    # fewer requests than clients: all of them are the first wave
    assert float(serving.first_wave_share(3, 4)) == 1.0


def test_closed_loop_serve_is_one_wave_in_ten_then_steady():
    """serve --arrivals closed-loop: TTFT = 1/10 · the first wave's (the lock-step wave's, where a prefill-first
    stack keeps waves) + 9/10 · the steady state's; TPOT and output are the steady state's. Disaggregated: the
    first wave queues at the prefill pool, so TTFT rises above the steady one by at most 1/10 of C prompts' share."""
    kw = dict(gpus=1, isl=1024, osl=1024, concurrency=64, framework="sglang", efficiency="preset")  # t_warm 0
    ss = rackmath.serve("llama-3.1-8b", "hgx-h100", arrivals="steady", **kw)
    wv = rackmath.serve("llama-3.1-8b", "hgx-h100", arrivals="waves", **kw)
    cl = rackmath.serve("llama-3.1-8b", "hgx-h100", arrivals="closed-loop", **kw)
    assert bool(np.asarray(wv._info["waves"]).ravel()[0])  # SGLang is prefill-first: the waves persist
    assert wv.ttft_ms > 5 * ss.ttft_ms  # 64 prompts queue behind one another
    assert cl.ttft_ms == pytest.approx(0.1 * wv.ttft_ms + 0.9 * ss.ttft_ms, rel=1e-9)
    assert (cl.tpot_ms, cl.output_tok_s) == (ss.tpot_ms, ss.output_tok_s)
    assert cl.explain().check() == []  # the derivation re-evaluates to the result
    dk = dict(gpus=16, prefill_gpus=8, decode_gpus=8, isl=1024, osl=1024, concurrency=256, framework="sglang",
              efficiency="preset")
    ds = rackmath.serve("deepseek-v3", "hgx-h200", **dk)
    dc = rackmath.serve("deepseek-v3", "hgx-h200", arrivals="closed-loop", **dk)
    pf = dc.prefill
    queued = 0.5 * (256 + 1) * 1024 / pf["input_tok_s"]  # the 128.5th prompt's share of the pool, on average
    wave = max(pf["prefill_s"], queued) + pf["kv_transfer_s"] + float(dc._info["t_request"])
    assert dc.ttft_ms / 1e3 == pytest.approx(0.1 * wave + 0.9 * ds.ttft_ms / 1e3, rel=1e-9)
    assert dc.ttft_ms > ds.ttft_ms and (dc.tpot_ms, dc.output_tok_s) == (ds.tpot_ms, ds.output_tok_s)
    assert dc.explain().check() == []


def test_cli_closed_loop_arrivals():
    """``serve --arrivals closed-loop --json`` names the arrivals and says TPOT is the steady state's; a misspelt
    mode is one line naming arrivals and the modes, exit 2."""
    base = ("serve", "llama-3.1-8b", "--hardware", "hgx-h100", "--gpus", "1", "--isl", "1024", "--osl", "1024",
            "--concurrency", "64", "--framework", "sglang", "--json")
    code, out, err = run_cli(*base, "--arrivals", "closed-loop")
    assert code == 0, err
    got = json.loads(out)
    code, out, err = run_cli(*base)
    steady = json.loads(out)
    assert got["arrivals"] == "closed-loop" and got["tpot_ms"] == steady["tpot_ms"]
    assert got["ttft_ms"] > steady["ttft_ms"]
    assert any("closed-loop client" in n for n in got["notes"])
    code, out, err = run_cli(*base, "--arrivals", "closedloop")
    assert code == 2 and "arrivals" in err and "closed-loop" in err and "Traceback" not in err
