"""The calibrated training step model (issue 38): records as data, hand-derived terms, the fit out of sample, the CLI."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from conftest import run_cli
from rackmath.analyses.training import model as tr
from rackmath.analyses.training import step as st
from rackmath.analyses.fitting import training as tf
from rackmath.errors import CatalogError, InputError
from rackmath.specs import training_records as trr
from rackmath.specs.hardware import load_chip, load_hardware
from rackmath.specs.models import load_model


# ---------------------------------------------------------------- records as data


def test_records_load_and_resolve():
    recs = trr.shipped()
    assert len(recs) == 485 and len({r.id for r in recs}) == 485  # every row of the compilation, ids unique
    for r in recs:
        if r.exclude:
            continue
        load_model(r.model), load_chip(r.chip)  # every modelled row names catalog entries
        assert r.gpus and r.seq and r.dtype in st.TRAIN_DTYPES
        assert r.gpus % (r.tp * r.pp * r.cp) == 0
    cov = tf.coverage()
    assert cov["rows"] == 485 and cov["pretrain_rows"] == 471
    assert cov["pretrain_modelled"] / cov["pretrain_rows"] >= 0.90  # issue 38's target; 425/471 (docs/training.md §6)
    # the Llama 3 405B figures are never fitted
    web = [r for r in recs if r.id in ("WEB-0001", "WEB-0002", "WEB-0003")]
    assert len(web) == 3 and all(r.holdout and not r.fitted for r in web)


def test_record_schema_errors_name_the_field():
    with pytest.raises(CatalogError, match="train_record.tpp"):
        trr.parse('[[train_record]]\nid = "x"\ntpp = 2\n', "t.toml")
    base = ('[[train_record]]\nid = "x"\nsource_group = "s"\nsoftware = "v"\ntask = "pretrain"\nmodel_in_source = "m"\n'
            'nvlink_domain = 8\ntp = 1\npp = 1\ncp = 1\nep = 1\nvp = 1\nsharding = "none"\nrecompute = "selective"\n'
            'framework = "megatron"\nflop_formula = "nemo"\nsource = "s"\n')
    assert trr.parse(base)[0].id == "x"
    with pytest.raises(CatalogError, match="train_record.recompute"):
        trr.parse(base.replace('"selective"', '"most"'))
    with pytest.raises(CatalogError, match="defined twice"):
        trr.parse(base + base)


def test_source_flop_formulas_match_the_rows_that_print_both():
    """Rows printing TFLOP/s and tokens/s: their ratio is the source's FLOPs per token, which the catalog architecture
    and the formula reproduce (NeMo / llm-foundry count attention without the causal half, Megatron-Bridge with it)."""
    n = 0
    for r in trr.shipped():
        if r.exclude or r.task != "pretrain" or not (r.tokens_per_s_per_gpu and r.tflops_per_gpu) or r.source_group not in (
                "llm-foundry", "nemo-24.07") or r.model.startswith("mpt-125m"):
            continue
        f = r.tflops_per_gpu * 1e12 / r.tokens_per_s_per_gpu
        assert f == pytest.approx(tf.source_flops_per_token(r.flop_formula, load_model(r.model), r.seq), rel=0.025), r.id
        n += 1
    assert n > 150


# ---------------------------------------------------------------- terms, hand-derived


def _x(model="llama-3.1-8b", chip="h100", **kw):
    args = dict(domain=8, gpus=1, global_batch=1, seq=1024, micro_batch=1, tp=1, pp=1, cp=1, ep=1, vp=1)
    args.update(kw)
    return st.step_inputs(load_model(model), load_chip(chip), **args)


def test_ideal_single_gpu_step_is_flops_over_peak():
    m, c = load_model("llama-3.1-8b"), load_chip("h100")
    x = _x(recompute="none")
    t = st.step_terms(x, st.IDEAL_PARAMS)
    s = 1024
    n_matmul = m.matmul_flops_per_token / 2
    gemm = s * 6 * n_matmul / c.peak_flops("bf16")
    attn = s * 3.5 * st.mean_attention_flops_per_token(m, s) / c.peak_flops("bf16")  # FlashAttention-2: 1 + 2.5
    opt = 30 * m.total_params / c.hbm_bw
    assert float(t["t_gemm_s"] + t["t_head_s"]) == pytest.approx(gemm, rel=1e-9)
    assert float(t["t_attention_s"]) == pytest.approx(attn, rel=1e-9)
    assert float(t["t_step_s"]) == pytest.approx(gemm + attn + opt, rel=1e-9)
    # full recompute adds one forward of every GEMM: (6 + 2)/6
    tf_ = st.step_terms(_x(recompute="full"), st.IDEAL_PARAMS)
    assert float(tf_["t_gemm_s"] / t["t_gemm_s"]) == pytest.approx(8 / 6)


def test_bubble_interleaved_and_tp_terms():
    m = load_model("llama-3.1-70b")
    # P = 4, v = 2, M = 8 micro-batches per replica: bubble / work = (P − 1)/(v·M) = 3/16
    x = st.step_inputs(m, load_chip("h100"), domain=8, gpus=32, global_batch=64, seq=4096, micro_batch=1, tp=1, pp=4,
                       vp=2)
    t = st.step_terms(x, st.IDEAL_PARAMS)
    assert float(t["t_bubble_s"] / t["t_work_s"]) == pytest.approx(3 / 16)
    # TP 8 with sequence parallelism: 4 all-reduce volumes per layer, 2(t−1)/t · tokens·h·2 B / 450 GB/s
    x = st.step_inputs(m, load_chip("h100"), domain=8, gpus=8, global_batch=1, seq=4096, tp=8)
    t = st.step_terms(x, st.IDEAL_PARAMS)
    hand = 4 * 80 * 2 * 7 / 8 * 4096 * 8192 * 2 / 450e9
    assert float(t["t_tp_s"]) == pytest.approx(hand)


def test_cp_fsdp_and_quantisation_terms():
    x1 = _x(model="llama-3.1-8b", gpus=2, cp=1, seq=65536)
    x2 = _x(model="llama-3.1-8b", gpus=2, cp=2, seq=65536)
    p = dict(st.IDEAL_PARAMS, eta_attn=1e-3)  # slow attention hides nothing: the ring is exposed only past it
    assert float(st.step_terms(x1, p)["t_cp_exposed_s"]) == 0
    assert float(st.step_terms(x2, st.IDEAL_PARAMS)["t_cp_exposed_s"]) >= 0
    # FSDP full shard moves (2·2 + 4)/(2 + 4) the bytes of SHARD_GRAD_OP (two all-gathers vs one)
    a = st.fsdp_time(1e9, 64, 8, 450e9, 50e9, 2, 1, 1.0)
    b = st.fsdp_time(1e9, 64, 8, 450e9, 50e9, 1, 1, 1.0)
    assert float(a / b) == pytest.approx(8 / 6)
    # FP8 casts: read 2 B + write 1 B per GEMM input element, 3 GEMMs
    assert st.QUANT_BYTES["fp8"] == 3 and st.QUANT_BYTES["bf16"] == 0
    q = st.quantisation_time(1.0, 100.0, 1.0, 3.0, 1.0)
    assert q == pytest.approx(900.0)


def test_vectorized_over_layouts():
    m, c = load_model("llama-3.1-70b"), load_chip("h100")
    x = st.step_inputs(m, c, domain=8, gpus=64, global_batch=128, seq=8192, tp=np.array([2.0, 4.0, 8.0]),
                       pp=np.array([4.0, 2.0, 1.0]), vp=np.array([5.0, 5.0, 1.0]))
    t = st.step_terms(x, st.IDEAL_PARAMS)
    assert t["t_step_s"].shape == (3,)
    one = st.step_terms(st.step_inputs(m, c, domain=8, gpus=64, global_batch=128, seq=8192, tp=4, pp=2, vp=5),
                        st.IDEAL_PARAMS)
    assert float(t["t_step_s"][1]) == pytest.approx(float(one["t_step_s"]))


# ---------------------------------------------------------------- fit, out of sample


def test_fit_counts_and_out_of_sample_errors():
    ra = tf.record_arrays()
    t0 = time.process_time()
    cv = tf.cross_validate(ra, schemes=("source", "hardware"))
    assert time.process_time() - t0 < 60  # seconds, not minutes
    c = cv["counts"]
    assert c["records"] >= 400 and c["fitted_params"] == (c["params_per_group"] * len(c["groups"])
                                                      + c["params_per_family"] * len(c["families"]) + c["shared_params"])
    assert c["fitted_params"] < 30 and c["records"] / c["fitted_params"] > 15  # a small fit
    loso, lohfo = cv["schemes"]["source"]["overall"], cv["schemes"]["hardware"]["overall"]
    # issue 38's targets: ≤ 15% and ≥ 95% within 2× (measured 14.8%, 423/436 = 97.0%: docs/training.md §6)
    assert loso["median_abs_error"] <= 0.15 and loso["within_2x"] / loso["n"] >= 0.95
    assert lohfo["median_abs_error"] < 0.25  # issue 38's target; measured 16.7%


def test_shipped_presets_cover_the_groups():
    names = {p.name for p in trr.presets()}
    assert {"hopper-megatron-train", "blackwell-megatron-train", "ampere-fsdp-train", "cross-family-train"} <= names
    assert trr.preset_for("h100", "megatron").name == "hopper-megatron-train"
    assert trr.preset_for("mi300x", "megatron").cross_family  # no AMD records: the cross-family preset, said so
    for p in trr.presets():
        assert set(p.params) == set(st.TRAIN_PARAMS) and 0 < p.error_band < 1


# ---------------------------------------------------------------- CLI


def test_cli_llama3_405b_out_of_sample():
    """Meta's 400 TFLOP/s/GPU on 16,384 H100 (TP 8, PP 16, 16M tokens a batch): never fitted (holdout)."""
    code, out, err = run_cli("train", "llama-3.1-405b", "-H", "hgx-h100", "--gpus", "16384", "--tokens", "15.6T",
                             "--tp", "8", "--pp", "16", "--global-batch", "16M", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["prediction"] == "calibrated" and d["preset"] == "hopper-megatron-train"
    assert "validated error" in d["label"]
    assert abs(d["achieved_flops"] / 400e12 - 1) < 0.15
    code, out2, err = run_cli("train", "llama-3.1-405b", "-H", "hgx-h100", "--gpus", "16384", "--tokens", "15.6T",
                              "--tp", "8", "--pp", "16", "--global-batch", "16M", "--ideal", "--json")
    ideal = json.loads(out2)
    assert ideal["prediction"] == "ideal" and ideal["achieved_flops"] > d["achieved_flops"] and ideal["mfu"] <= 1


def test_cli_explain_shows_every_term():
    code, out, err = run_cli("train", "llama-3.1-405b", "-H", "hgx-h100", "--gpus", "16384", "--tokens", "15.6T",
                             "--tp", "8", "--pp", "16", "--global-batch", "16M", "--explain")
    assert code == 0, err
    for sym in ("t_GEMM", "t_attn", "t_TP", "t_EP", "t_CP", "t_bubble", "t_DP", "t_opt", "t_step", "preset"):
        assert sym in out, sym


def test_cli_overrides_and_new_options():
    code, out, err = run_cli("train", "llama-3.1-8b", "--tokens", "1T", "--gpus", "64", "--mfu", "0.4", "--json")
    assert code == 0 and json.loads(out)["mfu"] == pytest.approx(0.4)
    code, out, err = run_cli("train", "mpt-7b", "-H", "hgx-a100", "--gpus", "64", "--tokens", "1T", "--seq", "2048",
                             "--fsdp", "full_shard", "--json")
    d = json.loads(out)
    assert code == 0 and d["preset"] == "ampere-fsdp-train" and d["parallelism"]["tp"] == 1
    code, out, err = run_cli("train", "deepseek-v3", "-H", "gb200-nvl72", "--gpus", "256", "--tokens", "1T", "--seq",
                             "4096", "--tp", "1", "--pp", "4", "--ep", "64", "--vp", "4", "--dtype", "mxfp8",
                             "--global-batch", "8Mi", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["parallelism"]["v"] == 4 and d["parallelism"]["dtype"] == "mxfp8" and d["step"]["t_ep_s"] > 0


@pytest.mark.parametrize("args, field", [
    (("--optimizer", "bogus"), "optimizer"), (("--dtype", "int3"), "dtype"), (("--fsdp", "half"), "fsdp"),
    (("--framework", "jax"), "framework"), (("--cp", "0"), "cp"), (("--ideal", "--efficiency", "x"), "ideal"),
])
def test_cli_bad_input(args, field):
    code, out, err = run_cli("train", "llama-3.1-8b", "--tokens", "1T", *args)
    assert code == 2 and err.startswith(f"error: {field}") and len(err.strip().splitlines()) == 1


def test_validate_train_refuses_serving_flags():
    code, out, err = run_cli("validate", "--train", "--cv")
    assert code == 2 and err.startswith("error: cv")


def test_layout_search_is_fast():
    m, hw = load_model("llama-3.1-405b"), load_hardware("hgx-h100")
    t0 = time.process_time()
    r, par, info = tr.search_training_layout(m, hw, chips=16384, tokens=15.6e12, global_batch_tokens=16e6,
                                             preset="auto")
    assert time.process_time() - t0 < 2.0 and info["fit"] >= 1 and r.memory["fits"]
    with pytest.raises(InputError):
        tr.search_training_layout(m, hw, chips=16384, tokens=1e12, fixed={"optimizer": "bogus"})


# ---------------------------------------------------------------- the converter's rules (no ../shared needed)


def _converter():
    import runpy
    from pathlib import Path
    from types import SimpleNamespace

    return SimpleNamespace(**runpy.run_path(str(Path(__file__).resolve().parents[1] / "benchmarks" /
                                                 "convert_training.py")))


def _row(**kw):
    row = {"id": "X-1", "source": {"repo": "NVIDIA/Megatron-LM", "path": "README.md", "commit": "abc1234",
                                   "url": None, "section": "README table, April 2021"},
           "task": "pretrain", "model": {"name": "GPT 145B"}, "hardware": {"chip": "A100 80GB", "num_gpus": 1536},
           "dtype": None, "seq_len": 2048, "global_batch": {"sequences": 2304, "tokens": 4718592}, "micro_batch": None,
           "parallelism": {"tp": None, "pp": None, "cp": None, "ep": None, "vp": None, "dp": 24, "fsdp": None,
                           "zero": None, "recompute": None, "grad_accum": None, "other": None},
           "metrics": {"tokens_per_s_per_gpu": None, "tflops_per_gpu": 148, "mfu_pct": 47, "hfu_pct": None,
                       "step_time_s": None}, "status": "V", "mfu_definition": "", "notes": None}
    row.update(kw)
    return row


def test_converter_rules():
    conv = _converter()
    r = conv.convert(_row())
    # the README states TP·PP only: the split of Narayanan et al. 2021 Table 1; their FLOP formula counts recompute
    assert (r["tp"], r["pp"], r["recompute"], r["flop_formula"]) == (8, 8, "full", "narayanan-recompute")
    assert r["model"] == "megatron-gpt-145b" and r["chip"] == "a100-sxm-80gb" and r["dtype"] == "bf16"
    assert "exclude" not in r and r["assumptions"]
    text = conv.to_toml([r])
    rec = trr.parse(text)[0]
    assert rec.tp == 8 and rec.hardware_family == "ampere" and rec.model_family == "gpt"
    # the 2024 H100 table: the architecture its params_note states, whose parameter count is the table's
    h = conv.convert(_row(source={"repo": "NVIDIA/Megatron-LM", "path": "images/model_table.png", "commit": "d98e8a6",
                                  "url": None, "section": "README model table (added 2024-07-15)"},
                          model={"name": "GPT 7.1B"}, hardware={"chip": "H100", "num_gpus": 96},
                          parallelism={"tp": 2, "pp": 1, "cp": None, "ep": None, "vp": None, "dp": 48, "fsdp": None,
                                       "zero": None, "recompute": None, "grad_accum": None, "other": None}))
    assert h["model"] == "megatron-gpt-7.1b-v131k" and "exclude" not in h and h["flop_formula"] == "megatron"
    assert load_model(h["model"]).total_params == pytest.approx(7.1e9, rel=0.01)  # 12·30·4096² + 2·131072·4096
    # the MFU/HFU table states DP 1 only: Korthikanti et al. 2022 Table 3's layout, GPUs = TP·PP, its FLOP count
    k = conv.convert(_row(source={"repo": "NVIDIA/Megatron-LM", "path": "README.md", "commit": "2e90a34", "url": None,
                                  "section": "MFU/HFU table (2022-05, Korthikanti et al.)"},
                          model={"name": "GPT 530B"}, hardware={"chip": "A100 80GB", "num_gpus": None},
                          global_batch=None, parallelism={**_row()["parallelism"], "dp": 1},
                          metrics={"tokens_per_s_per_gpu": None, "tflops_per_gpu": None, "mfu_pct": 56.0,
                                   "hfu_pct": 57.0, "step_time_s": None}))
    assert (k["tp"], k["pp"], k["gpus"], k["global_batch"], k["micro_batch"]) == (8, 35, 280, 280, 1)
    assert k["flop_formula"] == "korthikanti" and k["recompute"] == "selective" and "exclude" not in k
    # a hybrid Mamba model is kept as data with its reason
    m = conv.convert(_row(model={"name": "Nemotron_3_Nano"}))
    assert "Mamba" in m["exclude"]
    # NVIDIA's 25.09 tables have no precision column: FP8 by their footnote, the bracketed variant block-scaled
    nb = _row(source={"repo": "NVIDIA-NeMo/Megatron-Bridge", "path": "p", "commit": "c", "url": None,
                      "section": "25.09 NeMo Container / pretrain / DGX-B200"},
              model={"name": "LLAMA3_8B"}, hardware={"chip": "B200 (DGX 8-GPU)", "num_gpus": 8},
              parallelism={"tp": 1, "pp": 1, "cp": 1, "ep": 1, "vp": None, "dp": 8, "fsdp": "0", "zero": None,
                           "recompute": None, "grad_accum": None, "other": None},
              notes="table has no precision column (25.09); value(s) given in parentheses in source = alternate FP8 "
                    "quantization granularity variant of the same row")
    b = conv.convert(nb)
    assert b["dtype"] == "mxfp8" and b["software"] == "nemo-25.09" and b["nvlink_domain"] == 8
    assert b["flop_formula"] == "megatron-bridge" and b["chip"] == "b200"


def test_korthikanti_model_flops():
    """Korthikanti et al. 2022 §6: 72·B·s·L·h²·(1 + s/6h + V/12Lh) per iteration = 72·L·h² + 12·L·s·h + 6·V·h per token
    (GPT-3 175B at 2,048 tokens: 1.044e12 + 2.90e10 + 3.71e9 FLOPs, within 3% of 6·175e9)."""
    m = load_model("gpt-3-175b")
    L, h, V, s = 96, 12288, m.vocab_size, 2048
    f = tf.source_flops_per_token("korthikanti", m, s)
    assert f == pytest.approx(72 * L * h * h + 12 * L * s * h + 6 * V * h, rel=1e-12)
    assert f == pytest.approx(6 * 175e9, rel=0.03)


@pytest.mark.parametrize("size", [1.7, 7.1, 16, 32, 70, 119, 314, 462])
def test_megatron_h100_table_models_reproduce_its_parameter_counts(size):
    """Megatron-LM's 2024 H100 table: each model's stated heads/hidden/layers/vocab (the catalog's megatron-gpt-*-v131k)
    give 12·L·h² + 2·V·h within 3% of the size the table prints (GPT 1.7B: 1.74B; GPT 32B: 31.5B = 12·48·7168² +
    2·131072·7168)."""
    m = load_model(f"megatron-gpt-{size:g}b-v131k")
    assert m.total_params == pytest.approx(size * 1e9, rel=0.03)
    assert m.total_params == pytest.approx(12 * m.n_layers * m.d_model ** 2 + 2 * 131072 * m.d_model, rel=0.01)


def test_expert_gradients_reduce_across_nodes_when_ep_fills_the_node():
    """Megatron-Core places an expert's EP ranks consecutively, its data-parallel replicas ep ranks apart: gpt-oss-120b
    on 64 B200 (8-GPU nodes) with EP 8 holds P_e = 114.7B/8 expert parameters per GPU whose 8 replicas sit on 8
    different nodes, so their 3 B/param reduction crosses the NICs (2·7/8·3·P_e / BW_out), while the dense parameters
    reduce hierarchically (8 in the node, then 8 nodes). On an NVL72 domain the same expert group stays on NVLink."""
    from rackmath.specs.hardware import load_chip

    m, chip = load_model("gpt-oss-120b"), load_chip("b200")
    x = st.step_inputs(m, chip, domain=8, gpus=64, global_batch=1280, seq=4096, micro_batch=4, ep=8)
    t = st.step_terms(x, st.IDEAL_PARAMS)
    up, out = chip.scaleup_bw, chip.scaleout_bw
    p_d, p_e = x["params_dense"], x["params_expert"] / 8
    dense = 2 * 7 / 8 * 3 * p_d / up + 2 * 7 / 8 * 3 * p_d / 8 / out
    expert = 2 * 7 / 8 * 3 * p_e / out
    assert float(t["t_dp_total_s"]) == pytest.approx(dense + expert, rel=1e-9)
    x72 = st.step_inputs(m, chip, domain=72, gpus=64, global_batch=1280, seq=4096, micro_batch=4, ep=8)
    t72 = st.step_terms(x72, st.IDEAL_PARAMS)
    assert float(t72["t_dp_total_s"]) == pytest.approx(2 * 63 / 64 * 3 * p_d / up + 2 * 7 / 8 * 3 * p_e / up, rel=1e-9)
