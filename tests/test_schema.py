"""Catalog and HuggingFace-config schemas (rackmath.specs.schema) and the bounds behind them (issue 11).

Every case is a file a user could write; each must be a one-line error naming the file and the field
(exit 2), never a traceback, a silent misreading, or a runaway allocation.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli

DATA = Path(__file__).parent / "data" / "hf"

_CHIP = ('[[chip]]\nname = "zz1"\nflops = {{bf16 = "100 TFLOP/s"{extra_flops}}}\nhbm = "80 GB"\n'
         'hbm_bandwidth = {bw}\nscaleup_bandwidth = "450 GB/s"\nscaleout_bandwidth = "50 GB/s"\n'
         'usd_per_hour = {usd}\ndefault_system = "zz1-box"\n{more}\n'
         '[[system]]\nname = "zz1-box"\nchip = "zz1"\nscaleup_size = 8\n')


def _chip(bw='"3 TB/s"', usd='"$2/h"', extra_flops="", more=""):
    return _CHIP.format(bw=bw, usd=usd, extra_flops=extra_flops, more=more)


_MODEL = ('[[model]]\nname = "{name}"\nn_layers = {layers}\nd_model = 64\nvocab_size = 100\nn_heads = 4\n'
          'd_ff = 128\n{more}\n')


def _model(name="mm", layers=2, more=""):
    return _MODEL.format(name=name, layers=layers, more=more)


def _one_line(code, err, *needles):
    assert "Traceback" not in err
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    for n in needles:
        assert n in err, err


@pytest.mark.parametrize("text,args,needles", [
    # booleans are not numbers; denormal and absurd figures are refused
    (_chip(bw="true"), ("hardware", "list"), ("chip.hbm_bandwidth", "got True")),
    (_chip(extra_flops=', fp8 = "1e-300 FLOP/s"'), ("hardware", "list"), ("chip.flops.fp8",)),
    (_chip(usd="1e308"), ("hardware", "list"), ("chip.usd_per_hour", "out of range")),
    # an fp4 peak below bf16 is a typo (or a sparse figure), not a slower format
    (_chip(extra_flops=', fp4 = "50 TFLOP/s"'), ("hardware", "list"), ("chip.flops.fp4", "below the bf16 peak")),
    # unknown fields name the closest known one
    (_chip(more='hbm_bandwith = "3 TB/s"'), ("hardware", "list"), ("chip.hbm_bandwith", "closest: hbm_bandwidth")),
    ('[[efficiency]]\nname = "e1"\neta_compte = 0.5\n', ("roofline", "llama-3.1-8b", "-H", "h100", "--efficiency",
                                                           "e1"), ("efficiency.eta_compte", "closest: eta_compute")),
    # aliases must be a list of names: "abc" is not three aliases
    (_model(more='aliases = "abc"'), ("model", "list"), ("model.aliases", "list of strings")),
    # duplicates in one file; an alias may not take another entry's name
    (_model() + _model(), ("model", "list"), ("model.name", "defined twice")),
    (_model(more='aliases = ["deepseek-v3"]'), ("model", "show", "deepseek-v3"), ("deepseek-v3", "already taken")),
    (_model(name="zz", more='aliases = ["h100"]') + _chip(more='aliases = ["zz1x"]'), ("hardware", "show", "h100"),
     ()),  # a model alias equal to a chip name is fine: different kinds
    # sizes bounded before anything is expanded; moe_layer_ids within n_layers
    (_model(layers=10**9), ("model", "list"), ("model.n_layers", "out of range")),
    (_model(more='layer_pattern = 5'), ("model", "list"), ("model.layer_pattern",)),
    (_model(more='layer_types = 7'), ("model", "list"), ("model.layer_types",)),
    (_model(more='n_experts = 4\nexperts_per_token = 2\nmoe_d_ff = 32\nmoe_layer_ids = [0, 7]'), ("model", "list"),
     ("model.moe_layer_ids", "outside 0..1")),
    (_model(more='attention = "mla"\nkv_lora_rank = -5'), ("model", "list"), ("model.kv_lora_rank", "below 0")),
    (_model(more='hf_config = 5'), ("model", "list"), ("model.hf_config", "expected a table")),
    (_model(more='hf_config = {model_type = "llama", hidden_size = 64, num_hidden_layers = 2, '
                  'num_attention_heads = 4, vocab_size = 100, intermediate_size = 128}\nn_kv_heads = "x"'),
     ("model", "list"), ("model.n_kv_heads", "expected an integer")),
    ('[[price_sheet]]\nname = "pp"\nprovider = "p"\nmodel = "m"\ndate = "d"\nsource = "s"\ninput = true\n'
     'output = 1\n', ("price", "--list"), ("price_sheet.input", "expected a number")),
    ("model = 5\n", ("model", "list"), ("model", "array of tables")),
    ("[[chip]]\nname = \"x\"\nnotes = " + "[" * 200 + "]" * 200 + "\n", ("hardware", "list"), ("toml",)),
])
def test_bad_catalog_entries(tmp_path, text, args, needles):
    (tmp_path / "mine.toml").write_text(text)
    code, out, err = run_cli("--catalog", str(tmp_path), *args)
    if not needles:  # accepted
        assert code == 0, err
        return
    _one_line(code, err, "mine.toml", *needles)


def test_user_entry_still_replaces_a_shipped_one(tmp_path):
    """Replacing by name is allowed (aliases may be re-used by the replacement)."""
    (tmp_path / "mine.toml").write_text(_model(name="llama-3.1-8b", more='aliases = ["llama3-8b"]'))
    code, out, err = run_cli("--catalog", str(tmp_path), "model", "show", "llama-3.1-8b", "--json")
    assert code == 0, err
    assert json.loads(out)["architecture"]["d_model"] == 64


# ----------------------------------------------------------------------------- HuggingFace configs

def _show(path):
    code, out, err = run_cli("model", "show", str(path), "--json")
    assert code == 0, err
    return json.loads(out)


def test_llama4_scout_and_maverick():
    """Meta: Scout 109B total (incl. ~1B vision) / 17B active; Maverick 400B / 17B (April 2025)."""
    s = _show(DATA / "llama4-scout.json")
    assert s["total_params"] == pytest.approx(108e9, rel=0.02)
    assert s["active_params"] == pytest.approx(17e9, rel=0.02)
    assert s["n_moe_layers"] == 48
    m = _show(DATA / "llama4-maverick.json")
    assert m["total_params"] == pytest.approx(400e9, rel=0.01)
    assert m["active_params"] == pytest.approx(17e9, rel=0.02)
    assert m["n_moe_layers"] == 24  # interleave_moe_layer_step = 2
    # chunked attention on 3 of 4 layers: the KV held at 1M tokens is far below 48 full layers'
    full = 48 * 2 * 8 * 128 * 2 * 1_000_000
    code, out, err = run_cli("model", "show", str(DATA / "llama4-scout.json"), "-L", "1M", "--json")
    assert json.loads(out)["kv_cache_bytes"] == pytest.approx(full / 4 + 36 * 2 * 8 * 128 * 2 * 8192, rel=1e-9)


def test_glm45():
    """Z.ai GLM-4.5: 355B total, 32B active (MTP layer not counted here)."""
    g = _show(DATA / "glm-4.5.json")
    assert g["total_params"] == pytest.approx(355e9, rel=0.02)
    assert g["active_params"] == pytest.approx(32e9, rel=0.06)
    assert g["n_moe_layers"] == 89  # first_k_dense_replace = 3


def test_gemma3_multimodal_text_config():
    """google/gemma-3-27b-it: text_config without vocab_size (HF default 262,208); 27B."""
    g = _show(DATA / "gemma-3-27b-it.json")
    assert g["total_params"] == pytest.approx(27e9, rel=0.02)
    assert g["architecture"]["vocab_size"] == 262_208
    assert g["architecture"]["sliding_window"] == 1024


def test_qwen3_next_refused_with_a_reason():
    code, _, err = run_cli("roofline", str(DATA / "qwen3-next-80b-a3b.json"), "-H", "h100")
    _one_line(code, err, "model_type", "qwen3_next", "linear-attention")


_LLAMA = json.loads((DATA / "llama4-scout.json").read_text())


@pytest.mark.parametrize("mutate,needles", [
    (lambda c: c.update(text_config=None), ("text_config",)),
    (lambda c: c.update(text_config=[1]), ("text_config",)),
    (lambda c: c.update(text_config="abc"), ("text_config",)),
    (lambda c: c["text_config"].update(num_hidden_layers=10**9), ("num_hidden_layers", "out of range")),
    (lambda c: c["text_config"].update(num_local_experts=0), ("num_local_experts", "below 1")),
    (lambda c: c["text_config"].update(hidden_size=True), ("hidden_size", "bool")),
    (lambda c: c["text_config"].update(no_rope_layers=[1, 0]), ("no_rope_layers",)),
    (lambda c: c["text_config"].update(layer_types=7), ("layer_types",)),
    (lambda c: c["text_config"].update(layer_types=["linear_attention"] * 48), ("layer_types", "linear")),
    (lambda c: c.update(model_type=7), ("model_type",)),
])
def test_bad_hf_configs(tmp_path, mutate, needles):
    import copy

    cfg = copy.deepcopy(_LLAMA)
    mutate(cfg)
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    code, _, err = run_cli("model", "show", str(p))
    _one_line(code, err, "config.json", *needles)


def test_hf_files_deeply_nested_huge_ints_and_big(tmp_path):
    p = tmp_path / "deep.json"
    p.write_text('{"model_type": "llama", "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    code, _, err = run_cli("model", "show", str(p))
    _one_line(code, err, "deep.json")
    p = tmp_path / "digits.json"
    p.write_text('{"model_type": "llama", "hidden_size": 1' + "0" * 5000 + "}")
    code, _, err = run_cli("model", "show", str(p))
    _one_line(code, err, "digits.json")


def test_qwen3_moe_experts_zero_is_named():
    """num_experts = 0 is reported as such, not as a missing d_ff."""
    from rackmath.errors import CatalogError
    from rackmath.specs.models import from_hf_config

    cfg = {"model_type": "qwen3_moe", "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
           "vocab_size": 1000, "num_experts": 0, "num_experts_per_tok": 2, "moe_intermediate_size": 128}
    with pytest.raises(CatalogError, match="num_experts: 0 is below 1"):
        from_hf_config(cfg)
