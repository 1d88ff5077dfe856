"""Model specs against published figures (docs/reference/published.md §5, §1g; model cards)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rackmath.errors import CatalogError, InputError, UnknownNameError
from rackmath.specs.models import load_model, models
from conftest import run_cli

B = 1e9

# (catalog name, HF file, published total, published active, source)
PUBLISHED = [
    ("deepseek-v3", "deepseek-ai__DeepSeek-V3.json", 671 * B, 37 * B, "published.md C1 (MTP excluded)"),
    ("kimi-k2", "moonshotai__Kimi-K2-Instruct.json", 1.04e12, 32.6 * B, "Kimi K2 tech report; README 1T/32B"),
    ("qwen3-235b-a22b", "Qwen__Qwen3-235B-A22B.json", 235 * B, 22 * B, "published.md C3"),
    ("qwen3-30b-a3b", "Qwen__Qwen3-30B-A3B.json", 30.5 * B, 3.3 * B, "Qwen3-30B-A3B model card"),
    ("gpt-oss-120b", "openai__gpt-oss-120b.json", 116.8 * B, 5.1 * B, "published.md C8"),
    ("gpt-oss-20b", "openai__gpt-oss-20b.json", 20.9 * B, 3.6 * B, "published.md C8b"),
    ("mixtral-8x7b", "mistralai__Mixtral-8x7B-v0.1.json", 46.7 * B, 12.9 * B, "published.md C9"),
    ("llama-3.1-8b", "meta-llama__Llama-3.1-8B.json", 8.03 * B, 8.03 * B, "Llama 3.1 model card"),
    ("llama-3.1-70b", "meta-llama__Llama-3.1-70B.json", 70.6 * B, 70.6 * B, "Llama 3.1 model card"),
    ("llama-3.1-405b", "meta-llama__Llama-3.1-405B.json", 405 * B, 405 * B, "Llama 3.1 model card"),
    ("qwen2.5-72b", "Qwen__Qwen2.5-72B.json", 72.7 * B, 72.7 * B, "Qwen2.5-72B model card"),
    ("gemma-2-9b", "google__gemma-2-9b-it.json", 9.24 * B, 9.24 * B, "Gemma 2 report"),
    ("palm-540b", None, 540 * B, 540 * B, "published.md C10"),
]


def rel(a, b):
    return abs(a - b) / abs(b)


@pytest.mark.parametrize("name,_f,total,active,_src", PUBLISHED, ids=[p[0] for p in PUBLISHED])
def test_catalog_params_match_publishers(name, _f, total, active, _src):
    m = load_model(name)
    assert rel(m.total_params, total) < 0.02, m.total_params
    assert rel(m.active_params, active) < 0.02, m.active_params


@pytest.mark.parametrize("name,fname,total,active,_src", [p for p in PUBLISHED if p[1]],
                         ids=[p[0] for p in PUBLISHED if p[1]])
def test_hf_config_agrees_with_catalog_and_publishers(model_configs, name, fname, total, active, _src):
    hf = load_model(model_configs / fname)
    cat = load_model(name)
    assert rel(hf.total_params, total) < 0.02
    assert rel(hf.active_params, active) < 0.02
    for attr in ("total_params", "active_params", "embedding_params", "matmul_flops_per_token", "n_moe_layers"):
        assert getattr(hf, attr) == pytest.approx(getattr(cat, attr), rel=1e-9), attr
    for L in (100, 8192, 131072):
        assert hf.kv_cache_bytes(L) == pytest.approx(cat.kv_cache_bytes(L), rel=1e-9)
        assert hf.kv_read_bytes(L) == pytest.approx(cat.kv_read_bytes(L), rel=1e-9)
        assert hf.attention_flops_per_token(L) == pytest.approx(cat.attention_flops_per_token(L), rel=1e-9)
    assert hf.weight_bytes() == pytest.approx(cat.weight_bytes(), rel=1e-9)
    assert hf.dense_weight_bytes() == pytest.approx(cat.dense_weight_bytes(), rel=1e-9)


def test_every_shared_config_loads(model_configs):
    files = sorted(model_configs.glob("*.json"))
    assert len(files) >= 14
    for f in files:
        m = load_model(f)
        assert m.total_params > 1e9 and 0 < m.active_params <= m.total_params
        assert m.kv_bytes_per_token(8192) > 0
    # DeepSeek-R1 is V3's architecture; V3.2 adds only the indexer
    r1 = load_model(model_configs / "deepseek-ai__DeepSeek-R1.json")
    assert r1.total_params == load_model("deepseek-r1").total_params
    v32 = load_model(model_configs / "deepseek-ai__DeepSeek-V3.2.json")
    assert v32.index_topk == 2048 and v32.index_n_heads == 64 and v32.index_head_dim == 128
    assert rel(v32.total_params, 671 * B) < 0.02  # indexer adds < 1B


def test_directory_holding_config_json(model_configs, tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text((model_configs / "meta-llama__Llama-3.1-8B.json").read_text())
    m = load_model(tmp_path / "m")
    assert m.kv_bytes_per_token() == 131072


def test_deepseek_v3_mla_kv_c1d():
    m = load_model("deepseek-v3")
    assert m.kv_bytes_per_token(8192, "bf16") == 70272  # (512 + 64) x 61 x 2 B, published.md C1d
    assert m.kv_bytes_per_token(8192, "fp8") == pytest.approx(35.1e3, rel=0.01)  # "35.1 KB FP8"
    assert load_model("deepseek-r1") is m


def test_llama_kv_c7d_and_sb1():
    # published.md C7d: 8B 131 KB, 70B 328 KB, 405B 516 KB per token in bf16
    for name, kb in (("llama-3.1-8b", 131), ("llama-3.1-70b", 328), ("llama-3.1-405b", 516)):
        assert load_model(name).kv_bytes_per_token(4096) == pytest.approx(kb * 1e3, rel=0.005)
    # SB1: Llama 3 70B int8 KV = 2·8·128·80 = 160 kB/token; 32K context → 5.3 GB per sequence
    m = load_model("llama-3-70b")
    assert m.kv_bytes_per_token(32768, "int8") == 2 * 8 * 128 * 80
    assert m.kv_cache_bytes(32768, "int8") == pytest.approx(5.3e9, rel=0.02)


def test_gpt_oss_sliding_layers_capped():
    m = load_model("gpt-oss-120b")
    assert m.layer_types.count("sliding") == 18 and m.sliding_window == 128
    full_per_layer = 2 * 8 * 64 * 2  # bytes per token per layer, bf16
    L = 131072
    all_full = 36 * full_per_layer * L
    got = m.kv_cache_bytes(L)
    assert got == 18 * full_per_layer * L + 18 * full_per_layer * 128  # sliding layers hold 128 tokens
    assert 0.5 <= got / all_full < 0.51
    # below the window every layer holds everything
    assert m.kv_cache_bytes(100) == 36 * full_per_layer * 100


def test_gpt_oss_checkpoint_size_mxfp4():
    # published.md C8: checkpoint ~60.8 GiB (MXFP4 experts, rest bf16)
    assert load_model("gpt-oss-120b").weight_bytes() / 2**30 == pytest.approx(60.8, rel=0.02)
    assert load_model("gpt-oss-120b").native_dtype == "mxfp4"


def test_gemma2_windows(model_configs):
    m = load_model(model_configs / "google__gemma-2-9b-it.json")
    assert m.layer_types[0] == "sliding" and m.layer_types[1] == "full"
    per_layer = 2 * 8 * 256 * 2
    assert m.kv_cache_bytes(8192) == 21 * per_layer * 8192 + 21 * per_layer * 4096
    assert m.kv_cache_bytes(4096) == 42 * per_layer * 4096
    assert m.tie_embeddings


def test_dsa_reads_less_than_it_holds():
    m = load_model("deepseek-v3.2")
    L = 131072
    held, read = m.kv_cache_bytes(L), m.kv_read_bytes(L)
    assert read < held / 5
    # reads: top-2048 latents + every indexer key (128 fp8 + 4 B scale) per layer
    assert read == pytest.approx(61 * (576 * 2 * 2048 + 132 * L))
    assert held == pytest.approx(61 * (576 * 2 + 132) * L)
    assert m.kv_read_bytes(1000) == m.kv_cache_bytes(1000)  # below top-k everything is read
    # attention FLOPs: top-k for the main attention; indexer scores all L
    v3 = load_model("deepseek-v3")
    assert m.attention_flops_per_token(L) < v3.attention_flops_per_token(L) / 5
    assert m.attention_flops_per_token(1000) > v3.attention_flops_per_token(1000)


def test_mla_attention_flops_absorbed_form():
    m = load_model("deepseek-v3")
    # per layer per attended token: 2·128·(512+64) scores + 2·128·512 values
    assert m.attention_flops_per_token(1) == 61 * (2 * 128 * 576 + 2 * 128 * 512)


def test_mla_prefill_attention_runs_unabsorbed():
    """Prefill: MHA mode on up-projected K/V — 2·128·(128+64) scores + 2·128·128 values per layer per attended
    token (DeepSeek-V2 §2.1.2 absorbs for decode only); DSA (V3.2) keeps the absorbed MQA mode; GQA is the same."""
    m = load_model("deepseek-v3")
    assert m.attention_flops_per_token(1000, prefill=True) == 61 * (2 * 128 * 192 + 2 * 128 * 128) * 1000
    v32 = load_model("deepseek-v3.2")
    assert v32.attention_flops_per_token(1000, prefill=True) == v32.attention_flops_per_token(1000)
    g = load_model("llama-3.1-70b")
    assert g.attention_flops_per_token(8192, prefill=True) == g.attention_flops_per_token(8192)


def test_gqa_attention_flops():
    m = load_model("llama-3.1-70b")
    assert m.attention_flops_per_token(8192) == 80 * 4 * 64 * 128 * 8192


def test_frontier_kv_lecture_r36_r37():
    m = load_model("frontier-100b")
    assert m.status == "hypothetical"
    assert 1.6e3 <= m.kv_bytes_per_token() <= 2.1e3  # R36: ≈1,667 B ≈ 2 KB/token
    assert m.kv_bytes_per_token() == 1 * 2 * 128 * 8  # R37: layers x 2 x d_head x n_kv_heads, one shared KV
    assert rel(m.active_params, 100 * B) < 0.02  # R34
    assert 1.5e12 < m.total_params < 2.5e12


def test_palm_mqa_and_parallel_block():
    m = load_model("palm-540b")
    assert m.n_kv_heads == 1 and m.parallel_block and m.n_layers == 118 and m.d_ff == 4 * m.d_model
    assert m.kv_bytes_per_token() == 2 * 256 * 118 * 2


def test_matmul_flops_exclude_input_embedding():
    m = load_model("llama-3.1-8b")
    assert m.matmul_flops_per_token == 2 * (m.active_params - m.embedding_params)
    g = load_model("gpt-oss-120b")  # OpenAI's active already excludes the embedding table
    assert g.matmul_flops_per_token == 2 * g.active_params
    gem = load_model("gemma-2-9b")  # tied: the table is also the LM-head matmul
    assert gem.matmul_flops_per_token == 2 * gem.active_params


def test_weight_bytes_components():
    m = load_model("deepseek-v3")
    e = m.expert_weight_bytes("bf16")
    assert e == 3 * 7168 * 2048 * 2
    assert m.dense_weight_bytes("bf16") + m.n_moe_layers * m.n_experts * e + m.embedding_params * 2 == \
        pytest.approx(m.weight_bytes("bf16"))
    assert m.weight_bytes("int8") == pytest.approx(m.total_params)
    assert load_model("llama-3.1-70b").expert_weight_bytes() == 0


def test_vectorized_context():
    ctx = np.array([0.0, 1, 100, 127, 128, 129, 4096, 8192, 131072, 1e6])
    for name in ("gpt-oss-120b", "deepseek-v3.2", "gemma-2-9b", "frontier-100b", "llama-3.1-8b"):
        m = load_model(name)
        for fn in (m.kv_cache_bytes, m.kv_read_bytes, m.attention_flops_per_token):
            arr = fn(ctx)
            assert isinstance(arr, np.ndarray) and arr.shape == ctx.shape
            assert np.allclose(arr, [fn(float(c)) for c in ctx])
            assert isinstance(fn(8192), float)
        assert np.allclose(m.kv_bytes_per_token(ctx[1:]), [m.kv_bytes_per_token(c) for c in ctx[1:]])
    big = np.linspace(1, 2e6, 10**6)
    assert load_model("gpt-oss-120b").kv_cache_bytes(big).shape == (10**6,)


def test_bad_inputs(model_configs, tmp_path):
    with pytest.raises(UnknownNameError) as exc:
        load_model("deepseek-v4")
    assert "deepseek-v3" in exc.value.closest
    with pytest.raises(InputError, match="context"):
        load_model("llama-3.1-8b").kv_cache_bytes(-1)
    with pytest.raises(InputError, match="context"):
        load_model("llama-3.1-8b").attention_flops_per_token(np.array([1.0, np.nan]))
    with pytest.raises(InputError, match="kv_dtype"):
        load_model("llama-3.1-8b").kv_cache_bytes(10, "fp7")
    cfg = json.loads((model_configs / "meta-llama__Llama-3.1-8B.json").read_text())
    del cfg["num_hidden_layers"]
    p = tmp_path / "cfg.json"
    p.write_text(json.dumps(cfg))
    with pytest.raises(CatalogError) as e2:
        load_model(p)
    assert e2.value.field == "num_hidden_layers" and str(p) in str(e2.value)
    cfg["num_hidden_layers"], cfg["model_type"] = 32, "bert"
    p.write_text(json.dumps(cfg))
    with pytest.raises(CatalogError, match="model_type"):
        load_model(p)
    p.write_text("{not json")
    with pytest.raises(CatalogError, match="malformed JSON") as e3:
        load_model(p)
    assert "\n" not in str(e3.value)
    with pytest.raises(CatalogError, match="not found"):
        load_model(tmp_path / "missing.json")


def test_user_catalog_toml(tmp_path):
    from rackmath.specs import catalog

    (tmp_path / "mine.toml").write_text(
        '[[model]]\nname = "tiny-moe"\nn_layers = 4\nd_model = 512\nvocab_size = 1000\nn_heads = 8\n'
        'n_kv_heads = 2\nn_experts = 8\nexperts_per_token = 2\nmoe_d_ff = 256\n'
        'layer_pattern = ["sliding", "sliding", "full"]\nsliding_window = 64\n'
        '[[model]]\nname = "from-hf"\nhf_config = { model_type = "llama", hidden_size = 256, num_hidden_layers = 2,'
        ' num_attention_heads = 4, vocab_size = 100, intermediate_size = 512 }\n')
    try:
        catalog.add_catalog_dir(tmp_path)
        m = load_model("TINY-MOE")
        assert m.layer_types == ("sliding", "sliding", "full", "sliding") and m.head_dim == 64
        assert m.n_moe_layers == 4
        h = load_model("from-hf")
        assert h.total_params == 2 * 100 * 256 + 2 * (4 * 256 * 256 + 3 * 256 * 512 + 2 * 256) + 256
        (tmp_path / "bad.toml").write_text('[[model]]\nname = "bad"\nn_layers = 2\nd_model = 8\nvocab_size = 1\n')
        catalog.clear_caches()
        with pytest.raises(CatalogError, match="model.n_heads"):  # the bad entry, by name
            load_model("bad")
        assert load_model("tiny-moe").n_layers == 4  # the others load
        with pytest.warns(catalog.CatalogWarning, match=r"bad.toml \[model 'bad'\]: model.n_heads"):
            assert "bad" not in models().names() and "tiny-moe" in models().names()
    finally:
        catalog._user_dirs.clear()
        catalog.clear_caches()


# ------------------------------------------------------------------ CLI

def test_cli_show_json_deepseek():
    code, out, err = run_cli("model", "show", "deepseek-v3", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert rel(d["total_params"], 671 * B) < 0.02 and rel(d["active_params"], 37 * B) < 0.02
    assert d["kv_bytes_per_token"] == 70272 and d["context"] == 8192 and d["kv_dtype"] == "bf16"


def test_cli_show_context_and_dtype():
    code, out, _ = run_cli("model", "show", "gpt-oss-120b", "--json", "--context", "128K", "--kv-dtype", "fp8")
    assert code == 0
    d = json.loads(out)
    assert d["kv_bytes_per_token"] == pytest.approx((18 * 1024 * 128e3 + 18 * 1024 * 128) / 128e3)


def test_cli_show_hf_path(model_configs):
    code, out, err = run_cli("model", "show", str(model_configs / "openai__gpt-oss-120b.json"), "--json")
    assert code == 0, err
    d = json.loads(out)
    assert rel(d["total_params"], 116.8 * B) < 0.02 and rel(d["active_params"], 5.1 * B) < 0.02


def test_cli_errors():
    code, out, err = run_cli("model", "show", "nope")
    assert code == 2 and err.count("\n") == 1 and "model" in err and "Traceback" not in err
    code, _, err = run_cli("model", "show", "llama-3.1-8b", "--context", "-5")
    assert code == 2 and "context" in err


def test_cli_list():
    code, out, _ = run_cli("model", "list", "--json")
    assert code == 0
    names = {r["name"] for r in json.loads(out)}
    assert {"deepseek-v3", "deepseek-v3.2", "kimi-k2", "qwen3-235b-a22b", "qwen3-30b-a3b", "llama-3.1-8b",
            "llama-3.1-70b", "llama-3.1-405b", "gpt-oss-20b", "gpt-oss-120b", "mixtral-8x7b", "palm-540b",
            "frontier-100b", "gemma-2-9b", "qwen2.5-72b"} <= names
    code, out, _ = run_cli("model", "list")
    assert code == 0 and "deepseek-v3" in out


def test_gemma3_pattern_from_text_config(tmp_path):
    # Gemma 3 27B (Gemma 3 report): 62 layers, 5 local (1024-token window) : 1 global
    cfg = {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"],
           "text_config": {"hidden_size": 5376, "num_hidden_layers": 62, "num_attention_heads": 32,
                           "num_key_value_heads": 16, "head_dim": 128, "intermediate_size": 21504,
                           "vocab_size": 262208, "sliding_window": 1024, "sliding_window_pattern": 6}}
    p = tmp_path / "gemma3.json"
    p.write_text(json.dumps(cfg))
    m = load_model(p)
    assert m.layer_types.count("full") == 10 and m.layer_types[5] == "full" and m.layer_types[0] == "sliding"
    assert rel(m.total_params, 27.0 * B) < 0.03  # 27B incl. a ~0.4B vision tower not modelled here
    per_layer = 2 * 16 * 128 * 2
    assert m.kv_cache_bytes(32768) == 10 * per_layer * 32768 + 52 * per_layer * 1024
