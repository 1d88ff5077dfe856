"""Issue 34, staged: the step model's silicon from measured kernel curves (``--efficiency measured``) and host times
per stack version (``rackmath.analyses.fitting.stack``, ``specs/data/launch/stack_hosts.toml``)."""

import json
import math

import numpy as np
import pytest

from rackmath.engine.efficiency import default_efficiency, for_stack, resolve
from rackmath.specs.hardware import load_hardware
from rackmath.specs.kernels import kernel_table, silicon


def _h200():
    return load_hardware("h200").chip


def test_silicon_numbers_hand_derived_from_h200_curves():
    s = silicon(_h200())
    # τ: the shortest GEMM aiconfigurator measured on H200 (M=8, N=32, K=64): 2.4427 µs
    assert s["kernel_latency_s"]["value"] == pytest.approx(2.4427e-06)
    # η_m: the BF16 8192×8192 GEMM at M = 1 reads 8192·8192·2 B in 35.616 µs − τ at 4.8 TB/s
    assert s["eta_memory"]["value"] == pytest.approx(8192 * 8192 * 2 / (4.8e12 * (35.616e-6 - 2.4427e-6)), rel=1e-4)
    assert s["eta_memory"]["value"] == pytest.approx(0.8429, abs=1e-3)
    # α: NCCL all-reduce of 512 B over 8 H200: 16.01 µs; η_comm: 2·7/8·537 MB / 450 GB/s / 2.0403 ms = 1.02 → 1
    assert s["collective_latency_s"]["value"] == pytest.approx(16.01e-6)
    assert 2 * 7 / 8 * 536870910 / 450e9 / 2.0403e-3 > 1.0 and s["eta_comm"]["value"] == 1.0
    # every number names its curve, table and the package version
    for k in ("kernel_latency_s", "eta_compute", "gemm_half_tokens", "eta_memory", "collective_latency_s", "eta_comm"):
        assert "aiconfigurator-core 0.12.0" in s[k]["from"] and ".parquet" in s[k]["from"], k


def test_kv_rates_hand_derived_from_the_decode_attention_curves():
    """η_m,kv and η_m,mla: the fastest decode-attention point streaming ≥ 512 MB, B / (BW · (t − τ))."""
    s = silicon(_h200())
    tau = 2.4427e-06
    # GQA, batch 64 at 4,095 tokens: 64 · 4095 · (2 · 8 KV heads · 128) · 2 B = 1.0735 GB in 265.35 µs (batch 8 at
    # 32,767 tokens reads 1.0737 GB in 265.45 µs: 0.8505, a hair slower)
    gqa = 64 * 4095 * 2 * 8 * 128 * 2 / (4.8e12 * (265.35e-6 - tau))
    assert s["eta_memory_kv"]["value"] == pytest.approx(gqa, rel=1e-4) and gqa == pytest.approx(0.8506, abs=1e-3)
    assert "batch 64" in s["eta_memory_kv"]["from"]
    # MLA, batch 64 at 131,071 tokens: 64 · 131071 · 576 · 2 B = 9.66 GB (the latent, whole on each TP rank) in 2.1347 ms
    mla = 64 * 131071 * 576 * 2 / (4.8e12 * (2.1347e-3 - tau))
    assert s["eta_memory_mla"]["value"] == pytest.approx(mla, rel=1e-4) and mla == pytest.approx(0.944, abs=1e-3)
    assert "generation_attention_perf.parquet" in s["eta_memory_kv"]["from"]
    assert "generation_mla_perf.parquet" in s["eta_memory_mla"]["from"]
    # A100's GQA table reads faster than its HBM (1.07 GB in 342 µs: 3.1 TB/s on a 2.0 TB/s part): not used
    a100 = silicon(load_hardware("a100-sxm-80gb").chip)
    assert "eta_memory_kv" not in a100 and "eta_memory" in a100


def test_kv_reads_stream_at_their_measured_rate_other_reads_at_eta_m():
    from dataclasses import replace

    from rackmath.engine.step import Op, memory_efficiency

    e = resolve("b200", "measured")
    assert (e.eta_memory, e.eta_memory_kv, e.eta_memory_mla) == pytest.approx((0.653, 0.861, 0.720), abs=1e-3)
    assert memory_efficiency(Op("attention", kv=True), e) == e.eta_memory_kv
    assert memory_efficiency(Op("attention", kv=True, mla=True), e) == e.eta_memory_mla
    assert memory_efficiency(Op("qkv_o"), e) == e.eta_memory
    # a fitted preset has no rate of its own (0): its KV reads at η_m, as before
    p = default_efficiency("b200")
    assert p.eta_memory_kv == 0 and memory_efficiency(Op("attention", kv=True), p) == p.eta_memory
    assert memory_efficiency(Op("attention", kv=True, mla=True), replace(e, eta_memory_mla=0.0)) == e.eta_memory


def test_experts_stream_at_their_weight_formats_measured_rate():
    """H200's one MXFP4 MoE table (TensorRT-LLM's w4a16: the weights dequantised to BF16, Hopper has no FP4 tensor
    cores) at 32 tokens hits all 128 experts of gpt-oss-120b, 128 · 3 · 2880² · (0.5 + 1/32) B = 1.692 GB, in
    614.03 µs: 1.692 GB / (4.8 TB/s · (614.03 − 2.44) µs) = 0.576 of HBM — where the chip's fastest MoE table
    (DeepSeek's FP8 blocks) streams at 0.825, the rate gpt-oss's experts were read at before. On B200 the MXFP4
    experts meet MXFP8 activations (w4a8: 0.780), not the w4a16 kernel (0.179): the fastest of the format."""
    import rackmath
    from rackmath.engine.numbers import ModelNumbers, moe_stream_rate_of
    from rackmath.engine.step import Op, memory_efficiency
    from rackmath.specs.models import load_model

    e = resolve("h200", "measured")
    streams = {f: eta for f, eta, _src in e.moe_stream}
    want = 128 * 3 * 2880 ** 2 * (0.5 + 1 / 32) / (4.8e12 * (614.03e-6 - 2.4427e-6))
    assert want == pytest.approx(0.5764, abs=1e-3)
    assert streams["mxfp4"] == pytest.approx(want, rel=1e-3)
    assert streams["fp8"] == pytest.approx(e.eta_memory_moe) == pytest.approx(0.825, abs=1e-3)
    assert {f: eta for f, eta, _src in resolve("b200", "measured").moe_stream}["mxfp4"] == pytest.approx(0.780, abs=1e-3)
    gpt = ModelNumbers.from_model(load_model("gpt-oss-120b"), 1000.0)
    assert gpt.expert_format == "mxfp4"  # the checkpoint's own experts
    assert moe_stream_rate_of(gpt, e.moe_stream)[0] == streams["mxfp4"]
    assert ModelNumbers.from_model(load_model("deepseek-r1"), 1000.0).expert_format == "fp8"
    # a format no table measured (BF16 experts): the chip's fastest MoE rate, as before; a fitted preset: η_m
    bf16 = ModelNumbers.from_model(load_model("gpt-oss-120b"), 1000.0, weights_dtype="bf16")
    assert moe_stream_rate_of(bf16, e.moe_stream) is None
    assert memory_efficiency(Op("experts", eta_m=None), e) == e.eta_memory_moe
    assert memory_efficiency(Op("experts", eta_m=(0.5, "x")), e) == 0.5
    p = default_efficiency("h200")
    assert p.moe_stream == () and memory_efficiency(Op("experts"), p) == p.eta_memory
    # serve: the experts' bytes at 0.576, and --explain names the MXFP4 curve
    r = rackmath.serve("gpt-oss-120b", "hgx-h200", efficiency="measured", gpus=1, tp=1, isl=1000, osl=1000,
                       concurrency=8, framework="vllm")
    times = r._res.__dict__["times"]
    op = next(o for o in times.ops if o.name == "experts")
    mem = float(np.asarray(op.bytes).ravel()[0]) / (4.8e12 * want)
    assert float(np.asarray(times.memory["experts"]).ravel()[0]) == pytest.approx(mem, rel=1e-3)
    assert "w4a16_mxfp4" in r.explain().render() and r.explain().check() == []


def test_a_tp_allreduce_costs_its_measured_time_at_its_message_size():
    """H200's custom all-reduce over 8 GPUs: 10.106 µs at 256 KiB, 17.78 µs at 512 KiB. gpt-oss-120b at 64 sequences
    all-reduces 64 · 2880 · 2 B = 368,640 B: log–log between the two points, 10.106 · (17.78 / 10.106)^(ln(1.40625) /
    ln 2) = 13.34 µs — three times α_AR + 2·7/8·B / 450 GB/s = 3.05 + 1.43 µs, the ring model it replaces."""
    from rackmath.engine.step import Op, measured_allreduce_time, op_terms

    e = resolve("h200", "measured")
    want = 10.106e-6 * (17.78 / 10.106) ** (math.log(368640 / 262144) / math.log(2))
    assert want == pytest.approx(13.34e-6, rel=1e-3)
    t = measured_allreduce_time(e.allreduce_curves, np.array([368640.0, 100.0, 368640.0]), np.array([8, 8, 16]))
    assert t[0] == pytest.approx(want, rel=1e-3)
    assert t[1] == pytest.approx(3.047e-6)  # below the smallest message measured: held at 256 B's time
    assert np.isnan(t[2])  # no 16-GPU curve on H200
    ring = 2 * 7 / 8 * 368640 / 450e9
    op = Op("allreduce", net_s=72 * ring, collectives=72, message_bytes=368640.0, group=np.array([8, 0]))
    c, m, n, lat = op_terms(op, 4.8e12, e)
    assert lat[0] == pytest.approx(72 * want, rel=1e-3) and n[0] == 0
    # group 0 (a 2D exchange, a group beyond the scale-up domain): α_AR per collective and the ring's bandwidth term
    assert lat[1] == pytest.approx(72 * e.allreduce_latency_s) and n[1] == pytest.approx(72 * ring / e.eta_comm)
    # a fitted preset has no curves: every all-reduce as before
    p = default_efficiency("h200")
    assert p.allreduce_curves == () and float(op_terms(op, 4.8e12, p)[3]) == pytest.approx(72 * p.collective_latency_s)


def test_derived_gemm_law_reproduces_the_measured_curve():
    """t(M) = τ + max(2MNK / (peak·η_c(M)), NK·bytes / (BW·η_m)) with the derived η_c, M½, η_m, τ is within 15% of
    the compute-bound points of the curve η_c and M½ came from (M = 256 … 16384); below, the block-scaled FP8 GEMM
    runs slower than the BF16 GEMM's bandwidth (24.4 µs at M = 1 against 19 µs: its scales and dequantisation), a gap
    the one-η_m model does not carry (docs/stacks.md)."""
    chip = _h200()
    s = silicon(chip)
    c = next(c for c in kernel_table("h200")["curves"] if c["op"] == "gemm" and c["dtype"] == "fp8_block"
             and c["n"] == 8192)
    eta_c, half, tau = s["eta_compute"]["value"], s["gemm_half_tokens"]["value"], s["kernel_latency_s"]["value"]
    assert 0.4 < eta_c < 0.8 and 0 < half < 200
    law = {}
    for m, t in zip(c["x_values"], c["time_s"]):
        comp = 2 * m * 8192 * 8192 / (chip.flops["fp8"] * eta_c * m / (m + half))
        mem = 8192 * 8192 * 1.0 / (chip.hbm_bw * s["eta_memory"]["value"])
        law[m] = (tau + max(comp, mem), t)
    for m in (256, 512, 1024, 2048, 4096, 8192, 16384):
        assert law[m][0] == pytest.approx(law[m][1], rel=0.15), m
    assert law[1][0] < 0.85 * law[1][1]


def test_measured_efficiency_only_where_curves_exist():
    e = resolve("h200", "measured")
    assert e.name == "measured-h200" and e.per_version
    assert e.kernel_latency_s == pytest.approx(2.4427e-06)
    assert dict(e.silicon_from)["eta_compute"].startswith("η_c")
    # a chip with neither curves nor inferred silicon (MI300X: one InferenceMAX group) keeps its preset, and says so
    amd = resolve("mi300x", "measured")
    preset = default_efficiency("mi300x")
    assert not amd.silicon_from and amd.eta_compute == preset.eta_compute and amd.mla_kernel_scale == preset.mla_kernel_scale
    assert amd.kernel_latency_s == preset.kernel_latency_s and "no measured kernel curves for mi300x" in amd.note
    # MI355X: τ_k, η_m and the experts' stream from AITER's curves, its MLA kernel scale inferred from its records
    # (stated as such), its GEMM compute law its preset's (the curve file says so: tests/test_aiter_curves.py)
    from rackmath.specs.kernels import inferred

    inf = inferred("mi355x")
    m = resolve("mi355x", "measured")
    assert m.kernel_latency_s == pytest.approx(2.889e-06) and m.mla_kernel_scale == inf["mla_kernel_scale"]
    assert "kernel_latency_s" not in inf and m.eta_compute == preset.eta_compute
    assert {"kernel_latency_s", "eta_memory", "eta_memory_moe", "mla_kernel_scale"} <= set(dict(m.silicon_from))
    assert "inferred from" in dict(m.silicon_from)["mla_kernel_scale"]
    assert "amd-aiter" in dict(m.silicon_from)["eta_memory"]
    assert inf["groups"] >= 2 and inf["records"] >= 100
    # the per-version measured path was never validated as a preset: no error band is carried over from the AMD
    # preset (0.123), whatever the chip's silicon (curves, inferred, neither)
    from rackmath.options import validated_error

    assert validated_error(default_efficiency("mi355x")) is not None
    assert [validated_error(resolve(c, "measured")) for c in ("h200", "mi355x", "mi300x")] == [None, None, None]
    # the default is unchanged: the fitted preset
    assert resolve("h200", "auto").name == "hopper-serving" and not resolve("h200", "auto").per_version


def test_stack_version_host_times_applied_only_under_measured():
    import tomllib

    from rackmath.analyses.serving.serve import load_stack
    from rackmath.specs import stacks as S
    from rackmath.specs.stacks import HOSTS

    rows = {t["stack_version"]: t for t in tomllib.loads(HOSTS.read_text())["_stack_host"]}
    st = load_stack("sglang@0.5.7")
    assert st.label == "sglang@0.5.7-rocm700-mi35x" and set(rows) <= set(S.known_labels())  # listed versions only
    e = for_stack(resolve("h200", "measured"), st)
    assert e.eager_sglang_s == pytest.approx(rows[st.label]["eager_s"])
    assert e.sched_sglang_s == pytest.approx(rows[st.label]["sched_s"])
    assert e.request_sglang_s == pytest.approx(rows[st.label]["request_s"])
    # τ_k = τ_silicon (the floor measured on H200) + the version's own time per kernel
    assert e.kernel_latency_s == pytest.approx(2.4427e-06 + rows[st.label].get("kernel_s", 0.0))
    preset = resolve("h200", "auto")
    assert for_stack(preset, st) is preset


def test_serve_explain_names_the_curve_point():
    from rackmath.analyses.serving.serve import serve

    r = serve("deepseek-r1", "h200", gpus=8, tp=8, isl=1024, osl=1024, concurrency=64, framework="sglang",
              efficiency="measured")
    text = r.explain().render()
    assert "η_c(M=64) [qkv_o]" in text and "gemm fp8_block N=8192 K=8192" in text
    assert "nccl_perf.parquet" in text
    # DeepSeek's latent cache at the MLA decode curve's rate, named with its table (and no GQA rate line)
    assert "η_m,mla (MLA attention)" in text and "generation_mla_perf.parquet" in text and "η_m,kv" not in text
    # the η_c(M) line is the law at the curve's numbers
    s = silicon(_h200())
    want = s["eta_compute"]["value"] * 64 / (64 + s["gemm_half_tokens"]["value"])
    assert f"{want:.4g}" in text


def test_stack_fit_recovers_known_host_times():
    """Records whose 'measured' values are the model's own predictions at known host times are fitted back to a loss
    of (almost) zero from the presets' host times."""
    from dataclasses import replace

    from rackmath.analyses.fitting import stack as S
    from rackmath.analyses.fitting.validation import records

    recs = [r for r in records() if r.group == "gptoss-fp4 × h200 × vllm"][:12]
    assert len(recs) == 12 and {r.metric for r in recs} >= {"ttft_s", "ttft_median_s"}
    pred = S.Predictor(measured=True)
    truth = np.array([1.0e-3, 5e-6, 3e-5, 0.05, 2e-6, 3.0, 1.0, 1.0])  # … t_request 50 ms, t_warm 3 s, η_pf, η_wave 1
    fake = [replace(r, value=float(pred(r, truth)[0])) for r in recs]
    start = S.host_vector(default_efficiency("h200"), "vllm")
    fitted = S.fit_hosts(fake, pred, start)
    err = [abs(math.log(pred(r, fitted)[0] / r.value)) for r in fake]
    err0 = [abs(math.log(pred(r, start)[0] / r.value)) for r in fake]
    assert np.mean(err0) > 0.1  # the start is far off
    assert np.median(err) < 0.02 and np.mean(err) < 0.1 * np.mean(err0)
    # the medians identify t_request, the means over them t_warm (a first wave of one request in ten)
    assert fitted[S.REQUEST] == pytest.approx(0.05, rel=0.1) and fitted[S.WARM] == pytest.approx(3.0, rel=0.1)
    assert fitted[S.PREFILL] == 1.0  # η_pf is not freed by default (stack.FIT_PREFILL)


def test_stack_fit_tells_the_first_waves_warm_up_from_its_speed_by_concurrency():
    """Records made at a known warm-up (1 s, the same at every C) and first-wave speed (η_wave 0.4: an excess that
    grows with the C prompts of the wave) are fitted back to both when the runs span C = 4 and 64: the two are
    searched together (stack._descend_jointly; one at a time they were fitted 1.2 s and 1.5)."""
    from dataclasses import replace

    from rackmath.analyses.fitting import stack as S
    from rackmath.analyses.fitting.validation import records

    recs = [r for r in records() if r.group == "gptoss-fp4 × h200 × vllm" and r.stack == "vllm@0.13.0"
            and r.inputs["concurrency"] in (4, 64) and r.inputs["tp"] in (2, 8)]
    assert len(recs) == 16 and {r.metric for r in recs} >= {"ttft_s", "ttft_median_s"}
    pred = S.Predictor(measured=True)
    truth = np.array([1.0e-3, 5e-6, 3e-5, 0.05, 2e-6, 1.0, 1.0, 0.4])
    fake = [replace(r, value=float(pred(r, truth)[0])) for r in recs]
    fitted = S.fit_hosts(fake, pred, S.host_vector(default_efficiency("h200"), "vllm"))
    assert fitted[S.WARM] == pytest.approx(1.0, rel=0.15) and fitted[S.WAVE] == pytest.approx(0.4, rel=0.15)


def test_stack_fit_recovers_a_prefill_pools_speed(monkeypatch):
    """With ``--prefill`` (stack.FIT_PREFILL), a disaggregated build's records made at η_pf = 0.4 give it back: the
    prefill pool's saturated throughput and TTFT identify the stack's prefill speed."""
    from dataclasses import replace

    from rackmath.analyses.fitting import stack as S
    from rackmath.analyses.fitting.validation import records

    monkeypatch.setattr(S, "FIT_PREFILL", True)
    recs = [r for r in records() if r.group == "dsr1-fp8 × mi355x × sglang-disagg" and r.inputs["isl"] > 4096
            and r.inputs["concurrency"] >= 256 and r.metric in ("output_tok_s_per_decode_gpu", "tpot_s")][:8]
    assert len(recs) == 8 and all(S.disaggregated(r) for r in recs)
    pred = S.Predictor(measured=True)
    truth = np.array([1.0e-3, 5e-6, 3e-5, 0.05, 2e-6, 0.0, 0.4, 1.0])
    fake = [replace(r, value=float(pred(r, truth)[0])) for r in recs]
    fitted = S.fit_hosts(fake, pred, S.host_vector(default_efficiency("mi355x"), "sglang"))
    assert fitted[S.PREFILL] == pytest.approx(0.4, rel=0.15)
    assert S.fitted_count() == len(S.STACK_PARAMS) == 8


def test_unseen_version_takes_the_median_builds_request_and_warm_up_times():
    """A version none of whose records is seen: its step times are its engine's pooled fit; t_request and t_warm
    are the medians of the engine's other versions' own fits (one vote each, never the held version's)."""
    from dataclasses import replace

    from rackmath.analyses.fitting import stack as S
    from rackmath.analyses.fitting.validation import records

    pred = S.Predictor(measured=True)
    starts = {"vllm": S.host_vector(default_efficiency("h200"), "vllm")}
    base = [r for r in records() if r.group == "gptoss-fp4 × h200 × vllm" and r.stack == "vllm@0.13.0"][:8]
    assert {"ttft_s", "ttft_median_s"} <= {r.metric for r in base}
    truths = {"vllm@0.11.2": (0.02, 1.0), "vllm@0.13.0": (0.08, 9.0), "vllm@0.10.2": (0.2, 3.0)}  # t_request, t_warm
    recs = []
    for v, (t_req, t_warm) in truths.items():
        h = np.array([1.0e-3, 5e-6, 3e-5, t_req, 2e-6, t_warm, 1.0, 1.0])
        fw, _, ver = v.partition("@")
        recs += [replace(r, id=f"{r.id}-{v}", framework=fw, stack_version=ver, value=float(pred(r, h)[0]))
                 for r in base]
    held = "vllm@0.13.0"
    cache = {}
    got = S.unseen_ttft_times(recs, pred, starts, "vllm", lambda r: r.stack == held, cache)
    assert {r.stack for r in recs} == set(truths)
    assert got[S.REQUEST] == pytest.approx(np.median([0.02, 0.2]), rel=0.15)  # 0.11 s: the other two builds
    assert got[S.WARM] == pytest.approx(np.median([1.0, 3.0]), rel=0.15)  # 2 s, not the held build's 9 s
    assert {v for v, _ids in cache} == {"vllm@0.11.2", "vllm@0.10.2"}  # never the held build


def test_an_unseen_build_pools_the_engines_builds_for_its_platform():
    """A ROCm build's nearest builds are the engine's other ROCm builds: the pooled records are those of the same
    platform where there are any, every build's where there are none."""
    from rackmath.analyses.fitting import stack as S
    from rackmath.analyses.fitting.validation import records

    recs = [r for r in records() if r.group in ("dsr1-fp8 × mi355x × sglang", "dsr1-fp8 × b200 × sglang")]
    assert {S.platform_of(r) for r in recs} == {"rocm", "cuda"}
    assert {r.chip for r in S._same_platform(recs, "rocm")} == {"mi355x"}
    assert {r.chip for r in S._same_platform(recs, "cuda")} == {"b200"}
    assert S._same_platform(recs, "tpu") == recs and S._same_platform(recs, None) == recs


def test_an_unseen_build_takes_the_median_of_its_listed_builds_step_times():
    """An unseen build's step times are the median, time by time, of the own fits of its engine's listed builds of
    the same platform and deployment mode (records generated at known times: each build's fit recovers its own);
    none of them with records: {} (the caller falls back to the pooled fit)."""
    from dataclasses import replace

    from rackmath.analyses.fitting import stack as S
    from rackmath.analyses.fitting.validation import records

    pred = S.Predictor(measured=True)
    starts = {"vllm": S.host_vector(default_efficiency("h200"), "vllm")}
    base = [r for r in records() if r.group == "gptoss-fp4 × h200 × vllm" and r.stack == "vllm@0.13.0"
            and r.metric in ("tpot_s", "output_tok_s_per_gpu")][:8]
    assert not any(S.disaggregated(r) for r in base)
    truth = {"vllm@0.11.2": np.array([1.0e-3, 5e-6, 3e-5, 0.03, 1e-6, 0.0, 1.0, 1.0]),
             "vllm@0.13.0": np.array([3.0e-3, 2e-5, 6e-5, 0.03, 6e-6, 0.0, 1.0, 1.0])}
    recs = []
    for v, h in truth.items():
        fw, _, ver = v.partition("@")
        recs += [replace(r, id=f"{r.id}-{v}", framework=fw, stack_version=ver, value=float(pred(r, h)[0]))
                 for r in base]
    cache = {}
    got = S.unseen_step_times(recs, pred, starts, "vllm", lambda r: r.stack == "vllm@0.13.0", cache, "cuda", False)
    assert set(got) == {0, 1, 2, 4, S.PREFILL} and [v for v, _ids in cache] == ["vllm@0.11.2"]  # one build votes
    own = next(iter(cache.values()))  # its own fit
    assert [got[j] for j in (0, 1, 2, 4)] == [own[j] for j in (0, 1, 2, 4)]
    err = [abs(np.log(pred(r, own)[0] / r.value)) for r in recs if r.stack == "vllm@0.11.2"]
    assert np.median(err) < 0.02  # …and that fit describes the build it was fitted on
    assert S.unseen_step_times(recs, pred, starts, "vllm", lambda r: r.stack == "vllm@0.13.0", {}, "rocm", False) == {}
    assert S.unseen_step_times(recs, pred, starts, "vllm", lambda r: r.stack == "vllm@0.13.0", {}, "cuda", True) == {}


def test_an_unseen_build_of_an_engine_with_no_current_build_takes_todays_builds():
    """TensorRT-LLM 1.2's gpt-oss runs are the engine's only listed aggregated build: left out, it has no build of
    its engine to take its times from, and its engine's pooled fit is the 2024–25 builds' (a 5 ms scheduler,
    84–300 ms per request). It takes instead the median of every engine's listed aggregated builds of its platform —
    here two vLLM builds generated at known times — for its step times, t_request and first wave's speed η_wave;
    its warm-up stays its engine's. With that rule off, the pooled fit of its engine (whose only records are its own, held: the start)."""
    from dataclasses import replace

    from rackmath.analyses.fitting import stack as S
    from rackmath.analyses.fitting.validation import records

    pred = S.Predictor(measured=True)
    starts = {e: S.host_vector(default_efficiency("h200"), e) for e in ("vllm", "trtllm")}
    base = [r for r in records() if r.group == "gptoss-fp4 × h200 × vllm" and r.stack == "vllm@0.13.0"][:12]
    assert {"ttft_s", "ttft_median_s", "tpot_s"} <= {r.metric for r in base}
    truth = {"vllm@0.11.2": np.array([1.0e-3, 5e-6, 3e-5, 0.02, 1e-6, 1.0, 1.0, 1.0]),
             "vllm@0.13.0": np.array([3.0e-3, 2e-5, 6e-5, 0.04, 6e-6, 3.0, 1.0, 1.0]),
             "trtllm@1.2.0rc2": np.array([2.0e-3, 1e-5, 2e-5, 0.03, 0.0, 0.0, 1.0, 1.0])}
    recs = []
    for v, h in truth.items():
        fw, _, ver = v.partition("@")
        recs += [replace(r, id=f"{r.id}-{v}", framework=fw, stack_version=ver, value=float(pred(r, h)[0]))
                 for r in base]
    held = lambda r: r.stack == "trtllm@1.2.0rc2"  # noqa: E731
    cache = {}
    got = S.fit_version(recs, pred, starts, "trtllm@1.2.0rc2", held, cache=cache)
    assert {v for v, _ids in cache} == {"vllm@0.11.2", "vllm@0.13.0"}  # today's builds of another engine vote
    fits = [cache[k] for k in cache]
    for j in (0, 1, 2, 4, S.REQUEST):
        assert got[j] == pytest.approx(np.median([f[j] for f in fits]))
    assert got[S.REQUEST] == pytest.approx(0.03, rel=0.3)  # between the two builds' 0.02 and 0.04 s
    assert got[S.WAVE] == pytest.approx(np.median([f[S.WAVE] for f in fits]))  # the first wave's speed too
    assert got[S.WARM] == 0.0  # the warm-up stays its engine's (what its builds compile): none left to say, 0
    S.UNSEEN_FROM_CURRENT = False
    try:
        off = S.fit_version(recs, pred, starts, "trtllm@1.2.0rc2", held, cache={})
    finally:
        S.UNSEEN_FROM_CURRENT = True
    assert off[0] == pytest.approx(starts["trtllm"][0])  # nothing left of its engine: the start


def test_leave_one_source_out_fits_each_source_without_it(monkeypatch):
    """The staged design's leave-one-source-out (``stack_folds.leave_one_source_out``, ``stack_fit.py --loso-only``):
    each published source is predicted once, by versions fitted with exactly that source's records excluded, and
    every version it ran is refitted so (InferenceMAX records are never held)."""
    from rackmath.analyses.fitting import stack as S, stack_folds
    from rackmath.analyses.fitting.validation import records

    allrecs = records()
    srcs = ("sgl-cookbook-qwen3", "trtllm-h200", "amd-rocm-vllm")
    pub = [r for r in allrecs if r.fit and r.source_group in srcs]
    imx = [r for r in allrecs if r.group == "gptoss-fp4 × h200 × vllm"][:8]
    starts = {e: S.host_vector(default_efficiency("h200"), e) for e in ("trtllm", "vllm", "sglang", "vllm_v0",
                                                                         "generic")}
    calls = []

    def fake_fit_version(recs, predictor, starts_, version, exclude=lambda r: False, hierarchical=False, cache=None):
        calls.append((version, {r.source_group for r in recs if exclude(r)}, any(exclude(r) for r in imx)))
        return np.array(starts_[S.engine_of(version)], dtype=float)

    monkeypatch.setattr(S, "fit_version", fake_fit_version)
    out = stack_folds.leave_one_source_out(imx + pub, S.Predictor(measured=True), starts)
    assert set(out) == {r.id for r in pub} and all(np.isfinite(v) and v > 0 for v in out.values())
    assert all(len(held) == 1 and not imx_held for _v, held, imx_held in calls)
    for src in srcs:  # every version the source ran, refitted without it
        assert {v for v, held, _ in calls if held == {src}} == {S.version_of(r) for r in pub if r.source_group == src}


def test_a_record_without_a_version_is_its_sources_build(monkeypatch):
    """Two published sources that state no version ran two builds (OCI's MI300X blog and vLLM's Kimi K2 recipe on
    H200, both ``vllm``): each is ``framework@source`` and fitted apart; a stated version (the TensorRT-LLM perf
    overview's four columns, one build: ``trtllm@1.0``) and an InferenceMAX image are untouched (the flag off: the
    framework alone, as before)."""
    from rackmath.analyses.fitting import stack as S
    from rackmath.analyses.fitting.validation import records

    allrecs = records()
    oci = next(r for r in allrecs if r.fit and r.source_group == "oci-mi300x")
    kimi = next(r for r in allrecs if r.fit and r.source_group == "vllm-recipes-kimi-k2")
    perf = {S.version_of(r) for r in allrecs if r.fit and r.source_group in ("trtllm-h100", "trtllm-b200")}
    imx = next(r for r in allrecs if r.group == "gptoss-fp4 × h200 × vllm")
    assert oci.stack == kimi.stack == "vllm"
    assert (S.version_of(oci), S.version_of(kimi)) == ("vllm@oci-mi300x", "vllm@vllm-recipes-kimi-k2")
    assert S.engine_of(S.version_of(oci)) == S.engine_of(S.version_of(kimi)) == "vllm"
    assert perf == {"trtllm@1.0"} and S.version_of(imx) == imx.stack == "vllm@0.11.2"
    fitted = []

    def fake_fit_hosts(rs, predictor, start, prior=0.0):
        fitted.append(sorted({r.source_group for r in rs}))
        return np.array(start, dtype=float)

    monkeypatch.setattr(S, "fit_hosts", fake_fit_hosts)
    starts = {"vllm": S.host_vector(default_efficiency("h200"), "vllm")}
    hosts = S.fit_all([oci, kimi], S.Predictor(measured=True), starts)
    assert sorted(fitted) == [["oci-mi300x"], ["vllm-recipes-kimi-k2"]] and len(hosts) == 2
    monkeypatch.setattr(S, "BUILD_PER_SOURCE", False)
    assert S.version_of(oci) == S.version_of(kimi) == "vllm"


def test_an_old_unseen_build_takes_its_contemporaries(monkeypatch):
    """dstack's SGLang 0.4.2 (March 2025) with its source left out is older than every listed SGLang build (the
    oldest: November 2025), so the three dated aggregated CUDA SGLang builds nearest March 2025 vote for it —
    Tenstorrent's and LMSYS's of July 2025 and the cookbook's 0.5.6.post1 of December (nearer by a few days than
    the listed 0.5.6's month) — not today's listed builds alone; a build as new as the listed
    ones (SGLang 0.5.6) keeps the listed builds' votes; with the switch off, an old build does too. Dates: months
    since year 0 (March 2025 → 24,302.5: a day-less month at its middle)."""
    from rackmath.analyses.fitting import stack as S
    from rackmath.analyses.fitting.validation import records
    from rackmath.specs.stacks import month_of

    recs = [r for r in records() if r.fit or r.group]
    assert month_of("2025-03") == 2025 * 12 + 2.5 and month_of("2025-03-18") == 2025 * 12 + 2 + 17 / 31
    assert month_of("2025") == 2025 * 12 + 6 and month_of(None) is None
    old = S.older_than_listed("sglang@0.4.2", recs)
    assert old == month_of("2025-03-18") and S.older_than_listed("sglang@0.5.6", recs) is None
    out = lambda r: r.fit and r.source_group == "dstack-deepseek-r1"  # noqa: E731 - the fold
    votes = S._voting(recs, out)
    sglang_cuda = [r for r in recs if S.engine_of(S.version_of(r)) == "sglang" and votes(r)
                   and S.platform_of(r) == "cuda" and not S.disaggregated(r)]
    near = {S.version_of(r) for r in S.contemporaries(sglang_cuda, recs, old)}
    assert near == {"sglang@tt-inference-server-356", "sglang@lmsys-kimi-k2-h200", "sglang@0.5.6.post1"}
    assert {S.version_of(r) for r in S._current_builds(recs, out, "sglang", "cuda", False)} == {"sglang@0.5.6"}
    monkeypatch.setattr(S, "UNSEEN_FROM_CONTEMPORARIES", False)
    assert S.older_than_listed("sglang@0.4.2", recs) is None


def test_stack_fit_grid_is_a_lattice_not_the_start():
    """The coordinate descent's grids sit on the lattice lo + k · (half-width / 4): two starts within a grid step
    of each other (a refitted preset: t_request 0.101 vs 0.105 s, lattice step 0.03 s) run the same descent and
    land on the same value. A 1-D loss |x − 0.0737| on [0, 0.3], half-width 0.12: round one's lattice is 0, 0.03, …,
    so both starts centre on 0.09; the fit ends within the last round's step (0.12 / 4 / 8 = 3.75 ms) of 0.0737."""
    from rackmath.analyses.fitting import stack as S

    params = (("request", 0.0, 0.3, 0.12),)
    meas = np.array([1.0])

    def predictions(C):  # one record; exp(|x − 0.0737|) so that the log error is the distance
        return np.exp(np.abs(C[:, 0] - 0.0737))[None, :]

    a = S._descend([0.10125], params, predictions, meas)
    b = S._descend([0.105], params, predictions, meas)
    assert a[0] == b[0]
    assert abs(a[0] - 0.0737) <= 0.12 / 4 / 2 ** (S.ROUNDS - 1)


def test_transferred_silicon_is_the_median_of_the_measured_chips():
    """A chip nothing measured takes, where nothing of its family is left, the measured chips' median: τ_k is the
    median of the shipped kernel-floor curves' first points (read from the TOML files, not via ``silicon``),
    η_c and η_m lie within the measured chips' range, the MLA kernel scale is the CUDA count (1)."""
    import tomllib

    from rackmath.specs.kernels import DIR, transferred

    floors = []
    for p in sorted(DIR.glob("*.toml")):
        doc = tomllib.loads(p.read_text())
        floors.append(next(c for c in doc["_curve"] if c["op"] == "kernel_floor")["time_s"][0])
    from statistics import median

    t = transferred()
    assert len(floors) >= 5 and t["kernel_latency_s"]["value"] == pytest.approx(median(floors))
    assert 1.6e-6 < t["kernel_latency_s"]["value"] < 2.6e-6  # 1.7 µs (Blackwell) to 2.5 µs (H100)
    etas = [silicon(load_hardware(c).chip)["eta_compute"]["value"] for c in ("h100", "h200", "b200", "gb200")]
    assert min(etas) - 0.05 < t["eta_compute"]["value"] < max(etas) + 0.05
    assert 0.6 < t["eta_memory"]["value"] < 0.9 and t["mla_kernel_scale"]["value"] == 1.0
    assert t["kernel_latency_s"]["from"].startswith(f"transferred: kernel_latency_s, the median over the "
                                                    f"{len(floors)} chips with measured curves")
    # η_c over the chips whose curves set it: MI355X's file leaves its GEMM compute law out (tests/test_aiter_curves.py)
    assert t["eta_compute"]["from"].startswith(f"transferred: eta_compute, the median over the {len(floors) - 1} "
                                               f"chips with measured curves")
    assert "mi355x" not in t["eta_compute"]["from"]


def test_a_family_out_gives_its_unmeasured_chips_the_measured_chips_silicon():
    """Leaving the AMD family out leaves no AMD record to infer from, and the AMD preset was fitted on the records
    left out: its chips are orphans (``stack.orphans``) and take ``transferred`` silicon. One group out leaves the
    family's other records: no orphans, MI355X's silicon refitted on them."""
    from rackmath.analyses.fitting import stack as S
    from rackmath.analyses.fitting.validation import records
    from rackmath.specs.kernels import transferred

    allrecs = records()
    imx = [r for r in allrecs if r.group and r.chip in ("mi300x", "mi355x", "h200")]
    amd = [r for r in imx if r.hardware_family == "amd"]
    out = lambda r: r.hardware_family == "amd"  # noqa: E731
    assert S.orphans(allrecs, amd, out) == ["mi300x", "mi355x"]
    g = "dsr1-fp8 × mi300x × sglang"
    assert S.orphans(allrecs, [r for r in imx if r.group == g], lambda r: r.group == g) == []
    pr = S.without(allrecs, S.Predictor(measured=True), {}, amd, out)
    eff = pr.eff(next(r for r in amd if r.chip == "mi300x"))
    for k, v in transferred().items():
        assert getattr(eff, k) == pytest.approx(v["value"])
    assert eff.eta_compute > 2 * default_efficiency("mi300x").eta_compute  # not the 2025 ROCm preset's 0.2
    # MI355X's curves measured its τ_k and η_m: what they do not (its MLA kernel scale, inferred from its records, and
    # its GEMM compute law, its preset's) is transferred — both were fitted on the records the fold leaves out
    eff = pr.eff(next(r for r in amd if r.chip == "mi355x"))
    assert S.borrowed("mi355x") == ("eta_compute", "gemm_half_tokens", "mla_kernel_scale")
    assert eff.mla_kernel_scale == 1.0 and eff.kernel_latency_s == pytest.approx(2.889e-06)
    assert eff.eta_compute == pytest.approx(transferred()["eta_compute"]["value"])
    assert eff.gemm_half_tokens == pytest.approx(transferred()["gemm_half_tokens"]["value"])
    assert eff.eta_memory == pytest.approx(resolve("mi355x", "measured").eta_memory)
    assert S.borrowed("h200") == ()  # a measured NVIDIA chip borrows nothing: never an orphan


def test_a_chip_without_a_family_of_its_own_takes_the_measured_chips_silicon():
    """``--efficiency measured`` on a chip with no curves, nothing inferred and no family preset (Gaudi 3: the
    cross-family preset) takes the transferred silicon and says so (``note``, ``hardware show``, ``--explain``); a
    chip with a family preset of its own (TPU v4) keeps it."""
    from conftest import run_cli

    from rackmath.analyses.serving.serve import serve
    from rackmath.specs.kernels import transferred

    assert default_efficiency("gaudi3").cross_family
    g = resolve("gaudi3", "measured")
    for k, v in transferred().items():
        assert getattr(g, k) == pytest.approx(v["value"])
    assert g.eta_compute > default_efficiency("gaudi3").eta_compute  # 0.60, not the cross-family preset's 0.51
    assert "no records of its family" in g.note and "transferred" in g.note
    tpu = resolve("tpu-v4", "measured")
    assert tpu.eta_compute == default_efficiency("tpu-v4").eta_compute and not tpu.silicon_from
    code, out, _err = run_cli("hardware", "show", "gaudi3-x8", env={"COLUMNS": "400"})
    assert code == 0 and "no records of its family" in out and "transferred, not measured" in out
    code, out, _err = run_cli("hardware", "show", "gaudi3", "--json")
    assert code == 0 and "transferred, not measured" in json.loads(out)["measured_kernels"]["efficiency_measured"]
    text = serve("llama-3.1-70b", "gaudi3", gpus=8, tp=8, isl=1000, osl=1000, concurrency=8,
                 efficiency="measured").explain().render()
    assert "τ_k = transferred from the measured chips (not measured)" in text
    assert "η_c·M/(M+M½), the measured chips' median" in text


def test_a_build_on_both_sides_of_a_family_out_votes_with_what_the_fold_leaves():
    """Blackwell out: TensorRT-LLM 1.2 (B200 only) is unseen and its engine has no other current build, so today's
    builds of every engine vote. vLLM 0.13 ran on H200 and B200; it votes with its fit on the H200 records the fold
    leaves (generated at known times), not dropped for having records held (``stack.VOTE_ON_WHAT_IS_LEFT``)."""
    from dataclasses import replace

    from rackmath.analyses.fitting import stack as S
    from rackmath.analyses.fitting.validation import records

    pred = S.Predictor(measured=True)
    starts = {e: S.host_vector(default_efficiency("h200"), e) for e in ("vllm", "trtllm")}
    on = {"h200": np.array([1.0e-3, 5e-6, 3e-5, 0.02, 1e-6, 0.0, 1.0, 1.0]),  # vLLM 0.13's times on each side
          "b200": np.array([4.0e-3, 3e-5, 8e-5, 0.09, 8e-6, 0.0, 1.0, 1.0])}
    recs = []
    for chip, h in on.items():
        base = [r for r in records() if r.group == f"gptoss-fp4 × {chip} × vllm" and r.stack == "vllm@0.13.0"][:10]
        recs += [replace(r, value=float(pred(r, h)[0])) for r in base]
    b200 = [r for r in recs if r.chip == "b200"]
    recs += [replace(r, id=f"{r.id}-trt", framework="trtllm", stack_version="1.2.0rc2") for r in b200]
    out = lambda r: r.hardware_family == "blackwell"  # noqa: E731
    cache = {}
    got = S.fit_version(recs, pred, starts, "trtllm@1.2.0rc2", out, cache=cache)
    (key,) = cache  # one voter: vLLM 0.13, fitted on its H200 records only
    assert key[0] == "vllm@0.13.0" and set(key[1]) == {r.id for r in recs if r.chip == "h200"}
    assert got[S.REQUEST] == pytest.approx(0.02, rel=0.3) and got[0] == pytest.approx(1.0e-3, rel=0.5)
    S.VOTE_ON_WHAT_IS_LEFT = False
    try:  # the rule before: a build with a record held does not vote; nothing current is left, the engine's start
        off = S.fit_version(recs, pred, starts, "trtllm@1.2.0rc2", out, cache={})
    finally:
        S.VOTE_ON_WHAT_IS_LEFT = True
    assert off[0] == pytest.approx(starts["trtllm"][0])
