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


_ZZ1 = ("hardware", "show", "zz1")
_MM = ("model", "show", "mm")


@pytest.mark.parametrize("text,args,needles", [
    # booleans are not numbers; denormal and absurd figures are refused
    (_chip(bw="true"), _ZZ1, ("chip.hbm_bandwidth", "got True")),
    (_chip(extra_flops=', fp8 = "1e-300 FLOP/s"'), _ZZ1, ("chip.flops.fp8",)),
    (_chip(usd="1e308"), _ZZ1, ("chip.usd_per_hour", "out of range")),
    # an fp4 peak below bf16 is a typo (or a sparse figure), not a slower format
    (_chip(extra_flops=', fp4 = "50 TFLOP/s"'), _ZZ1, ("chip.flops.fp4", "below the bf16 peak")),
    # unknown fields name the closest known one
    (_chip(more='hbm_bandwith = "3 TB/s"'), _ZZ1, ("chip.hbm_bandwith", "closest: hbm_bandwidth")),
    ('[[efficiency]]\nname = "e1"\neta_compte = 0.5\n', ("roofline", "llama-3.1-8b", "-H", "h100", "--efficiency",
                                                           "e1"), ("efficiency.eta_compte", "closest: eta_compute")),
    # aliases must be a list of names: "abc" is not three aliases
    (_model(more='aliases = "abc"'), _MM, ("model.aliases", "list of strings")),
    # duplicates in one file; an alias may not take another entry's name
    (_model() + _model(), _MM, ("model.name", "defined twice")),
    (_model(more='aliases = ["deepseek-v3"]'), _MM, ("deepseek-v3", "already taken")),
    (_model(name="zz", more='aliases = ["h100"]') + _chip(more='aliases = ["zz1x"]'), ("hardware", "show", "h100"),
     ()),  # a model alias equal to a chip name is fine: different kinds
    # sizes bounded before anything is expanded; moe_layer_ids within n_layers
    (_model(layers=10**9), _MM, ("model.n_layers", "out of range")),
    (_model(more='layer_pattern = 5'), _MM, ("model.layer_pattern",)),
    (_model(more='layer_types = 7'), _MM, ("model.layer_types",)),
    (_model(more='n_experts = 4\nexperts_per_token = 2\nmoe_d_ff = 32\nmoe_layer_ids = [0, 7]'), _MM,
     ("model.moe_layer_ids", "outside 0..1")),
    (_model(more='attention = "mla"\nkv_lora_rank = -5'), _MM, ("model.kv_lora_rank", "below 0")),
    (_model(more='hf_config = 5'), _MM, ("model.hf_config", "expected a table")),
    (_model(more='hf_config = {model_type = "llama", hidden_size = 64, num_hidden_layers = 2, '
                  'num_attention_heads = 4, vocab_size = 100, intermediate_size = 128}\nn_kv_heads = "x"'),
     _MM, ("model.n_kv_heads", "expected an integer")),
    ('[[price_sheet]]\nname = "pp"\nprovider = "p"\nmodel = "m"\ndate = "d"\nsource = "s"\ninput = true\n'
     'output = 1\n', ("price", "pp"), ("price_sheet.input", "expected a number")),
    # no usable name: a name the catalog lacks points at the skipped table or file
    ("model = 5\n", _MM, ("model", "array of tables", "'mm' is not in the catalog")),
    ("[[chip]]\nname = \"x\"\nnotes = " + "[" * 200 + "]" * 200 + "\n", _ZZ1, ("toml", "nested")),
])
def test_bad_catalog_entries(tmp_path, text, args, needles):
    """Using a bad user entry by name is one line naming the file and the field (exit 2)."""
    (tmp_path / "mine.toml").write_text(text)
    code, out, err = run_cli("--catalog", str(tmp_path), *args)
    if not needles:  # accepted
        assert code == 0, err
        return
    _one_line(code, err, "mine.toml", *needles)


# (file text, list command, what the one warning line names, a shipped name that still works)
_LISTED = [
    (_chip(bw="true"), ("hardware", "list", "--json"), ("[chip 'zz1']", "chip.hbm_bandwidth"), "h100"),
    (_chip(more="max_chips = 4").replace("scaleup_size = 8", "scaleup_size = 0"),
     ("hardware", "list", "--systems", "--json"), ("[system 'zz1-box']", "system.scaleup_size"), "gb200-nvl72"),
    (_model(layers='"x"'), ("model", "list", "--json"), ("[model 'mm']", "model.n_layers", "expected an integer"),
     "llama-3.1-8b"),
    (_model(layers=-3), ("model", "list", "--json"), ("[model 'mm']", "model.n_layers", "below"), "deepseek-v3"),
    (_model() + _model(), ("model", "list", "--json"), ("[model 'mm']", "defined twice"), "llama-3.1-8b"),
    ('[[price_sheet]]\nname = "pp"\nprovider = "p"\nmodel = "m"\ndate = "d"\nsource = "s"\ninput = -1\n'
     'output = 1\n', ("price", "--list", "--json"), ("[price_sheet 'pp']", "price_sheet.input"), "gpt-5.1"),
    ("[[model]\nname = ", ("model", "list", "--json"), ("toml", "malformed", "(file skipped)"), "llama-3.1-8b"),
    ('[[modle]]\nname = "mm"\n', ("model", "list", "--json"), ("modle", "unknown entry kind"), "llama-3.1-8b"),
]


@pytest.mark.parametrize("text,args,needles,other", _LISTED)
def test_list_commands_skip_bad_user_entries(tmp_path, text, args, needles, other):
    """A list command lists every good entry (the shipped ones and the good user ones), prints one warning line
    per bad entry on stderr naming file, entry and field, and exits 0."""
    (tmp_path / "mine.toml").write_text(text)
    (tmp_path / "ok.toml").write_text(_model(name="fine-one"))
    _, base, _ = run_cli(*args)
    code, out, err = run_cli("--catalog", str(tmp_path), *args)
    assert code == 0, err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: " + str(tmp_path / "mine.toml")), err
    for n in needles:
        assert n in lines[0], err
    rows, shipped = json.loads(out), json.loads(base)
    key = "chip" if "chip" in rows[0] else "name"
    names = [r[key] for r in rows]
    extra = ["fine-one"] if args[0] == "model" else []
    assert names == [r[key] for r in shipped] + extra  # every shipped entry, in order, plus the good user one
    assert "mm" not in names and "zz1" not in names and "pp" not in names
    # the other entries still work
    what = {"hardware": ("hardware", "show"), "model": ("model", "show"), "price": ("price",)}[args[0]]
    for name in (other, "fine-one") if args[0] == "model" else (other,):
        code, _, err = run_cli("--catalog", str(tmp_path), *what, name, "--json")
        assert code == 0 and err == "", err


def test_a_bad_system_leaves_its_chip_unusable_but_not_others(tmp_path):
    """A user chip whose standard system is bad is skipped too (its name means that system); both are named."""
    (tmp_path / "mine.toml").write_text(_chip().replace("scaleup_size = 8", "scaleup_size = 0"))
    code, out, err = run_cli("--catalog", str(tmp_path), "hardware", "list", "--json")
    assert code == 0, err
    assert "zz1" not in [r["chip"] for r in json.loads(out)] and "h100" in [r["chip"] for r in json.loads(out)]
    assert err.count("\n") == 1 and "[chip 'zz1']" in err and "system.scaleup_size" in err and "zz1-box" in err
    for name in ("zz1", "zz1-box"):
        code, _, err = run_cli("--catalog", str(tmp_path), "roofline", "llama-3.1-8b", "-H", name)
        _one_line(code, err, "mine.toml", "system.scaleup_size")


def test_failing_command_prints_only_its_error(tmp_path):
    """Warnings are for commands that succeed: a failing command stays one error line."""
    (tmp_path / "mine.toml").write_text(_model(layers='"x"'))
    code, _, err = run_cli("--catalog", str(tmp_path), "model", "show", "nope")
    _one_line(code, err, "unknown model 'nope'")


def test_api_warns_and_lookup_raises(tmp_path):
    """Python API: enumerating warns (CatalogWarning) once; the bad name raises CatalogError; others load."""
    import warnings

    from rackmath.errors import CatalogError
    from rackmath.specs import catalog
    from rackmath.specs.models import load_model, models

    (tmp_path / "mine.toml").write_text(_model(layers=-1) + _model(name="ok2"))
    try:
        catalog.add_catalog_dir(tmp_path)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            names = models().names()
            models().values()
        assert [str(x.message) for x in w if issubclass(x.category, catalog.CatalogWarning)] == \
            [f"{tmp_path / 'mine.toml'} [model 'mm']: model.n_layers: -1 is below 0 (accepted: 0 to 10000) "
             "(entry skipped)"]
        assert "ok2" in names and "mm" not in names
        assert load_model("ok2").n_layers == 2
        with pytest.raises(CatalogError) as info:
            load_model("mm")
        assert info.value.field == "model.n_layers" and info.value.path.endswith("mine.toml")
    finally:
        catalog._user_dirs.clear()
        catalog.clear_caches()


def test_shipped_catalog_is_checked_strictly(tmp_path, monkeypatch):
    """A bad shipped entry is a bug: it raises (never skipped), whatever the command."""
    import shutil

    from rackmath.errors import CatalogError
    from rackmath.specs import catalog
    from rackmath.specs.hardware import chips
    from rackmath.specs.models import models
    from rackmath.specs.prices import price_sheets

    # the real shipped data: nothing skipped, every [[model]]/[[chip]]/[[price_sheet]] table listed
    import tomllib

    counts = {"model": 0, "chip": 0, "price_sheet": 0}
    for f in catalog.DATA_DIR.rglob("*.toml"):
        doc = tomllib.loads(f.read_text())
        for k in counts:
            counts[k] += len(doc.get(k, []))
    catalog.clear_caches()
    for idx, kind in ((models(), "model"), (chips(), "chip"), (price_sheets(), "price_sheet")):
        assert idx.skipped == [] and idx.bad == {}
        assert len(idx.values()) == counts[kind]
    # a copy of the shipped data with one bad model: models() raises
    data = tmp_path / "data"
    shutil.copytree(catalog.DATA_DIR, data)
    f = sorted((data / "models").glob("*.toml"))[0]
    text = f.read_text()
    i = text.index("n_layers = ")
    f.write_text(text[:i] + 'n_layers = "x"' + text[text.index("\n", i):])
    monkeypatch.setattr(catalog, "DATA_DIR", data)
    catalog.clear_caches()
    try:
        with pytest.raises(CatalogError, match="model.n_layers"):
            models()
        code, _, err = run_cli("model", "list")
        _one_line(code, err, "model.n_layers")
    finally:
        monkeypatch.undo()
        catalog.clear_caches()


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
