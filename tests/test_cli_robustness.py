"""Bad input never produces a traceback: one line on stderr naming the field, exit status 2.

Covers click's own usage errors (bad option values, missing arguments, unknown options and commands), numbers that
used to reach a division by zero or an endless layout enumeration, dtypes named by their option, output files
(never overwritten without --force, unwritable places refused up front), malformed catalog TOML and HuggingFace
config.json files.
"""

from __future__ import annotations

import json

import pytest

from conftest import run_cli

M = "llama-3.1-8b"


def _assert_one_line(code, err, field):
    assert "Traceback" not in err
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert field in err or field.replace("_", "-") in err, err


@pytest.mark.parametrize("args,field", [
    # click's usage errors: one line, the option or argument named
    (("batching", "fast-mode", "frontier-100b", "--speedup", "abc"), "--speedup"),
    (("roofline",), "MODEL"),
    (("roofline", M), "--hardware"),
    (("roofline", M, "-H", "h100", "--batchh", "3"), "--batchh"),
    (("roofline", M, "-H"), "-H"),
    (("bogus",), "command"),
    (("racks", "bubble", "--stages", "0", "--microbatches", "4"), "--stages"),
    (("racks", "bubble", "--stages", "4", "--microbatches", "-1"), "--microbatches"),
    (("racks", "pipeline", "-H", "gb200-nvl72", "--ep", "0"), "--ep"),
    (("revnet", "--layers", "0", "--d-model", "64", "--heads", "4"), "--layers"),
    (("context", "--chips", "0"), "--gpus"),
    (("layout", M, "-H", "h100", "--chips", "8", "--max-pp", "0"), "--max-pp"),
    (("layout", M, "-H", "h100", "--chips", "8", "--redundant-experts", "-1"), "--redundant-experts"),
    (("layout", M, "-H", "h100", "--chips", "8", "--weight-layout", "3d"), "weight_layout"),
    (("layout", "deepseek-v3", "-H", "h100", "--chips", "8", "--weight-layout", "all"), "weight_layout"),
    # dtypes: the option's own name, not a generic "dtype"
    (("batching", "balance", M, "-H", "h100", "--weights-dtype", "abc"), "weights_dtype"),
    (("batching", "penalty", M, "-H", "h100", "--kv-dtype", ""), "kv_dtype"),
    (("price", "gemini-3.1-pro", "--kv-dtype", "fp7"), "kv_dtype"),
    (("cache", "--weights-dtype", "x"), "weights_dtype"),
    (("racks", "moe-2racks", "-H", "gb200-nvl72", "--act-dtype", "nan"), "act_dtype"),
    # values that used to divide by zero
    (("racks", "moe-2racks", "-H", "gb200-nvl72", "--tokens-per-chip", "0"), "tokens_per_gpu"),  # the alias
    (("racks", "moe-2racks", "-H", "gb200-nvl72", "--tokens-per-gpu", "x"), "tokens_per_gpu"),
    (("racks", "moe-2racks", "-H", "gb200-nvl72", "--k", "0"), "--k"),
    (("racks", "moe-2racks", "-H", "gb200-nvl72", "--d-model", "-1"), "--d-model"),
    (("overtrain", "--tokens-per-param", "0"), "tokens_per_param"),
    (("overtrain", "--tokens-per-param", "nan"), "tokens_per_param"),
    (("scaling", "chinchilla", "--compute", "0"), "compute"),
    (("scaling", "chinchilla", "--compute", "-1"), "compute"),
    (("scaling", "chinchilla", "--compute", "inf"), "compute"),
    (("scaling", "routed", "--e-start", "0"), "e_start"),
    (("scaling", "routed", "--e-max", "nan"), "e_max"),
    (("scaling", "routed", "--e-start", "400"), "e_start"),
    # NaN, negative and absurd numbers that used to be accepted
    (("layout", M, "-H", "h100", "--chips", "8", "--batch", "1,64", "--min-speed", "nan"), "min_speed"),
    (("layout", M, "-H", "h100", "--chips", "8", "--batch", "1e30"), "batch"),
    (("train", M, "--tokens", "1T", "--mfu", "0.4", "--eta", "nan"), "eta"),
    (("train", M, "--tokens", "1T", "--mfu", "0.4", "--eta", "-1"), "eta"),
    (("train", M, "--tokens", "1T", "--mfu", "0.4", "--chips", "1e30"), "gpus"),
    # used to enumerate layouts for ever
    (("layout", M, "-H", "h100", "--chips", "1e30", "--batch", "1,64"), "gpus"),
    (("racks", "memory", M, "-H", "h100", "--chips", "1e30"), "gpus"),
])
def test_bad_values(args, field):
    code, out, err = run_cli(*args)
    _assert_one_line(code, err, field)


def test_plot_pareto_nothing_fits(tmp_path):
    """No layout fits in memory: an error, not matplotlib's 'cannot be log-scaled' traceback."""
    f = tmp_path / "p.png"
    code, _, err = run_cli("plot", "pareto", M, "-H", "h100", "--chips", "8", "--batch", "1,64", "--context", "1e30",
                           "-o", str(f))
    _assert_one_line(code, err, "gpus")
    assert not f.exists()


@pytest.mark.parametrize("cmd", [
    ("plot", "tiers"),
    ("plot", "price-context"),
    ("plot", "batch", "frontier-100b", "-H", "gb200-nvl72", "--batch", "1:100:5"),
    ("plot", "pareto", M, "-H", "h100", "--chips", "8", "--batch", "1,64"),
])
def test_plots_never_overwrite(tmp_path, cmd):
    f = tmp_path / "mine.png"
    f.write_text("mine")
    code, _, err = run_cli(*cmd, "-o", str(f))
    _assert_one_line(code, err, "output")
    assert "exists" in err and f.read_text() == "mine"


def test_plot_tiers_force_overwrites(tmp_path):
    f = tmp_path / "t.png"
    f.write_text("mine")
    code, _, err = run_cli("plot", "tiers", "-o", str(f), "--force")
    assert code == 0, err
    assert f.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("make,args,field", [
    (lambda d: "", ("sweep", M, "-H", "h100", "--csv"), "csv"),
    (lambda d: str(d), ("sweep", M, "-H", "h100", "--csv"), "csv"),  # a directory
    (lambda d: (d / "f.txt").write_text("x") and str(d / "f.txt" / "sub" / "s.csv"),
     ("sweep", M, "-H", "h100", "--csv"), "csv"),  # under a file
    (lambda d: (d / "f.txt").write_text("x") and str(d / "f.txt" / "p.png"), ("plot", "tiers", "-o"), "output"),
    (lambda d: str(d / "tiers.txt"), ("plot", "tiers", "-o"), "output"),  # not a figure format
])
def test_output_paths(tmp_path, make, args, field):
    code, _, err = run_cli(*args, make(tmp_path))
    _assert_one_line(code, err, field)


_TOML = {
    "malformed": ('[[chip]]\nname = "x"\nflops = {bf16 = \n', ("hardware", "show", "x"), "toml"),
    "missing field": ('[[chip]]\nname = "zz1"\nflops = {bf16 = "100 TFLOP/s"}\nhbm = "80 GB"\n',
                      ("hardware", "show", "zz1"), "chip.hbm_bandwidth"),
    "aliases not a list": ('[[model]]\nname = "mm"\naliases = 3\nn_layers = 2\nd_model = 64\nvocab_size = 100\n'
                           'n_heads = 4\nd_ff = 128\n', ("model", "show", "mm"), "model.aliases"),
    "free price sheet": ('[[price_sheet]]\nname = "pp"\nprovider = "p"\nmodel = "m"\ndate = "2026-01-01"\n'
                         'source = "s"\ninput = 0\noutput = 10\n', ("price", "pp"), "price_sheet.input"),
    "price aliases a number": ('[[price_sheet]]\nname = "pp"\nprovider = "p"\nmodel = "m"\ndate = "2026-01-01"\n'
                               'source = "s"\ninput = 1\noutput = 10\naliases = 1\n', ("price", "pp"),
                               "price_sheet.aliases"),
    "bad system size": ('[[system]]\nname = "s1"\nchip = "h100"\nscaleup_size = -3\n', ("hardware", "show", "s1"),
                        "system.scaleup_size"),
}


@pytest.mark.parametrize("case", list(_TOML))
def test_bad_catalog_files(tmp_path, case):
    """Using a bad user entry (or a name only an unreadable file could hold) is one line naming file and field;
    the list command of its kind lists the rest with one warning line (exit 0)."""
    text, args, field = _TOML[case]
    (tmp_path / "mine.toml").write_text(text)
    code, _, err = run_cli("--catalog", str(tmp_path), *args)
    _assert_one_line(code, err, field)
    assert str(tmp_path / "mine.toml") in err
    listing = {"hardware": ("hardware", "list", "--systems") if "[[system]]" in text else ("hardware", "list"),
               "model": ("model", "list"), "price": ("price", "--list")}[args[0]]
    code, out, err = run_cli("--catalog", str(tmp_path), *listing)
    assert code == 0 and out, err
    assert err.count("\n") == 1 and err.startswith(f"warning: {tmp_path / 'mine.toml'}") and field in err, err


def test_catalog_not_utf8_and_not_a_directory(tmp_path):
    (tmp_path / "bin.toml").write_bytes(b"\xff\xfe[[chip]]")
    code, _, err = run_cli("--catalog", str(tmp_path), "hardware", "show", "mine")
    _assert_one_line(code, err, "toml")
    assert "not UTF-8" in err and "'mine' is not in the catalog" in err, err
    code, out, err = run_cli("--catalog", str(tmp_path), "hardware", "list")
    assert code == 0 and "h100" in out and err.count("\n") == 1 and "bin.toml: toml: not UTF-8" in err, err
    code, _, err = run_cli("--catalog", str(tmp_path / "nope"), "hardware", "list")
    _assert_one_line(code, err, "catalog")


_LLAMA = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
          "vocab_size": 1000, "intermediate_size": 512}
_QWEN_MOE = {"model_type": "qwen3_moe", "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
             "vocab_size": 1000, "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 128,
             "intermediate_size": 512}


@pytest.mark.parametrize("cfg,field", [
    ({"model_type": "llama", "hidden_size": 4096}, "num_hidden_layers"),
    ([1, 2], "config"),
    (_LLAMA | {"num_attention_heads": 0}, "num_attention_heads"),
    (_LLAMA | {"hidden_size": 256.5}, "hidden_size"),
    (_LLAMA | {"head_dim": "abc"}, "head_dim"),
    (_LLAMA | {"num_key_value_heads": [4]}, "num_key_value_heads"),
    (_LLAMA | {"max_position_embeddings": {}}, "max_position_embeddings"),
    (_LLAMA | {"quantization_config": "fp8"}, "quantization_config"),
    (_LLAMA | {"sliding_window": "abc", "use_sliding_window": True}, "sliding_window"),
    (_QWEN_MOE | {"decoder_sparse_step": 0}, "decoder_sparse_step"),
    (_QWEN_MOE | {"mlp_only_layers": 3}, "mlp_only_layers"),
])
def test_bad_hf_configs(tmp_path, cfg, field):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    code, _, err = run_cli("model", "show", str(p))
    _assert_one_line(code, err, field)
    code, _, err = run_cli("roofline", str(p), "-H", "h100", "--json")
    _assert_one_line(code, err, field)


def test_hf_config_architectures_are_informational(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(_LLAMA | {"architectures": 7}))
    code, out, err = run_cli("model", "show", str(p), "--json")
    assert code == 0, err
    assert json.loads(out)["model_type"] == "llama"


def test_bad_json_files(tmp_path):
    (tmp_path / "bad.json").write_text('{"hidden_size": 4096,')
    code, _, err = run_cli("model", "show", str(tmp_path / "bad.json"))
    _assert_one_line(code, err, "json")
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe{}")
    code, _, err = run_cli("model", "show", str(tmp_path / "bin.json"))
    _assert_one_line(code, err, "json")
    code, _, err = run_cli("roofline", str(tmp_path / "nope.json"), "-H", "h100")
    _assert_one_line(code, err, "file")


def test_help_still_works():
    code, out, _ = run_cli("--help")
    assert code == 0 and "roofline" in out
    code, out, _ = run_cli("roofline", "--help")
    assert code == 0 and "--hardware" in out


_SERVE = ("serve", "-m", "llama-3.1-8b", "-H", "h100", "--isl", "100", "--osl", "100", "-c", "8")


@pytest.mark.parametrize("extra,field", [
    (("--ep", "0"), "ep"),  # 0 is not "default"
    (("--pp", "0"), "pp"),
    (("--tp", "-2"), "tp"),
    (("--usd-per-gpu-hour", "1e30"), "usd_per_gpu_hour"),
    (("--prefill-gpus", "1e30", "--decode-gpus", "8"), "prefill_gpus"),
    (("--redundant-experts", "-3"), "redundant_experts"),
    (("--pp", "1e30"), "pp"),  # a whole number past 10⁶ (once a numpy TypeError on a 31-digit int)
    (("--tp", "1e30"), "tp"),
])
def test_serve_layout_flags(extra, field):
    code, _, err = run_cli(*_SERVE, *extra)
    _assert_one_line(code, err, field)


def test_lecture_unknown_claim_id():
    code, _, err = run_cli("lecture", "--only", "R99")
    _assert_one_line(code, err, "claim")


@pytest.mark.parametrize("body,field", [
    ('eta_compute = "fast"', "efficiency"),
    ("step_overhead_s = nan", "step_overhead_s"),
    ("eta_memory = 1.5", "eta_memory"),
])
def test_bad_efficiency_preset_file(tmp_path, body, field):
    (tmp_path / "e.toml").write_text(f'[[efficiency]]\nname = "mine"\n{body}\n')
    code, _, err = run_cli("--catalog", str(tmp_path), "roofline", "llama-3.1-8b", "-H", "h100",
                           "--efficiency", "mine")
    _assert_one_line(code, err, field)
    assert "e.toml" in err


# ----------------------------------------------------------------------------- Python API: whole numbers

@pytest.mark.parametrize("text,expected", [
    ("1:10:log7", [1, 2, 3, 5, 7, 10]),       # 10^(k/6) = 1, 1.47, 2.15, 3.16, 4.64, 6.81, 10 rounded, de-duplicated
    ("1:10:7", [1, 2, 4, 6, 7, 8, 10]),       # 1, 2.5, 4, 5.5, 7, 8.5, 10: halves to even, as numpy rounds
    ("8,1K,64", [8, 1000, 64]),               # a list keeps its order
])
def test_api_batch_ranges_are_whole(text, expected):
    import numpy as np

    import rackmath

    r = rackmath.roofline(M, "h100", batch=text)
    assert np.ravel(r.batch).tolist() == expected


def test_api_ranges_match_the_cli():
    """batch="1:4096:log" is 49 points 2^(k/4) rounded and de-duplicated: the CLI's -b 1:4096:log exactly."""
    import numpy as np

    import rackmath

    api = np.ravel(rackmath.roofline(M, "h100", batch="1:4096:log").batch).tolist()
    code, out, err = run_cli("roofline", M, "-H", "h100", "-b", "1:4096:log", "--json")
    assert code == 0, err
    assert api == json.loads(out)["batch"]
    assert api[:13] == [1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 13, 16, 19] and api[-1] == 4096
    assert all(b > a for a, b in zip(api, api[1:])) and all(x == int(x) for x in api)
    # a context range is rounded too (1, 1.5, 2 -> 1, 2); a list may hold ranges
    assert np.ravel(rackmath.roofline(M, "h100", context="1:2:3").context).tolist() == [1, 2]
    assert np.ravel(rackmath.roofline(M, "h100", batch=["1:4:log", 8]).batch).tolist() == [1, 2, 3, 4, 8]


@pytest.mark.parametrize("fn,kw,msg", [
    ("roofline", dict(batch=2.5), "batch: 2.5 is not a whole number"),
    ("roofline", dict(batch="2.5"), "batch: 2.5 is not a whole number"),
    ("roofline", dict(batch="1.5,4"), "batch: 1.5 is not a whole number"),
    ("roofline", dict(batch=[1, "2.5"]), "batch: 2.5 is not a whole number"),
    ("roofline", dict(gpus="7.5"), "gpus: 7.5 is not a whole number"),
    ("serve", dict(isl=1000, osl=100, concurrency=8, gpus="8", tp="2.5"), "tp: 2.5 is not a whole number"),
    ("serve", dict(isl=1000, osl=100, concurrency="8.5", gpus=8), "concurrency: 8.5 is not a whole number"),
    ("layout", dict(gpus="7.5"), "gpus: 7.5 is not a whole number"),
    ("train", dict(tokens="1T", gpus=8, dp=2.5), "dp: 2.5 is not a whole number"),
    ("max_context", dict(gpus="1.5"), "gpus: 1.5 is not a whole number"),
])
def test_api_fractional_counts_refused(fn, kw, msg):
    """Never truncated (int('7.5') was 7): an InputError naming the field."""
    import rackmath
    from rackmath.errors import InputError

    with pytest.raises(InputError, match=msg):
        getattr(rackmath, fn)(M, "hgx-h100", **kw)


@pytest.mark.parametrize("args,field", [(["-b", "2.5"], "batch"), (["-b", "1,2.5"], "batch"),
                                        (["-L", "8192.5"], "context"), (["--gpus", "1.5"], "gpus")])
def test_cli_whole_number_lists_refuse_fractions(args, field):
    """A plain value or list of a whole-number field is checked like a range's points (which are rounded)."""
    from conftest import run_cli

    code, out, err = run_cli("roofline", "llama-3.1-8b", "-H", "h100", *args)
    assert code == 2 and err.startswith(f"error: {field}:") and "whole number" in err and err.count("\n") == 1


# ----------------------------------------------------------------------------- issue 36: the second hardening pass

def _sentinels(d):
    """Files a figure written to '-' would clobber (matplotlib adds the suffix): './-.png' and friends."""
    fs = [d / n for n in ("-", "-.png", "-.svg", "-.pdf")]
    for f in fs:
        f.write_text("mine")
    return fs


@pytest.mark.parametrize("args,field", [
    (("roofline", M, "-H", "h100", "--ops-plot", "-"), "ops_plot"),
    (("serve", M, "-H", "h100", "--isl", "100", "--osl", "100", "-c", "8", "--ops-plot", "-"), "ops_plot"),
    (("plot", "batch", M, "-H", "h100", "-o", "-"), "output"),
    (("plot", "tiers", "-o", "-"), "output"),
    # refused before any work: the unknown model is never read
    (("roofline", "no-such-model", "-H", "h100", "--ops-plot", "-"), "ops_plot"),
    (("serve", "no-such-model", "-H", "h100", "--isl", "100", "--osl", "100", "-c", "8", "--ops-plot", "-"),
     "ops_plot"),
    (("plot", "batch", "no-such-model", "-H", "h100", "-o", "-"), "output"),
])
def test_dash_is_stdout_only_for_text(tmp_path, monkeypatch, args, field):
    """'-' means stdout only where the format allows it (CSV, JSON); a figure given '-' is refused before any work
    and nothing writes ./-.png (it used to, over an existing one, without --force)."""
    monkeypatch.chdir(tmp_path)
    fs = _sentinels(tmp_path)
    code, _, err = run_cli(*args)
    _assert_one_line(code, err, field)
    assert "standard output" in err
    assert all(f.read_text() == "mine" for f in fs)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["-", "-.pdf", "-.png", "-.svg"]


def test_dash_still_means_stdout_for_csv(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fs = _sentinels(tmp_path)
    code, out, err = run_cli("sweep", M, "-H", "h100", "-b", "1,2", "--csv", "-")
    assert code == 0, err
    assert out.splitlines()[0].startswith("chips,batch,context") and len(out.splitlines()) == 3
    assert all(f.read_text() == "mine" for f in fs)


def test_csv_is_written_whole_or_not_at_all(tmp_path):
    """open_output writes under a temporary name and renames when complete: an interrupted run leaves no partial
    file, and an existing file (--force) is untouched until the new one is whole."""
    from rackmath.cli.common import open_output

    new, old = tmp_path / "new.csv", tmp_path / "old.csv"
    old.write_text("mine")
    for path in (new, old):
        with pytest.raises(KeyboardInterrupt):
            with open_output(path, force=True, field="csv") as fh:
                fh.write("a,b\n1,2\n")
                raise KeyboardInterrupt
    assert not new.exists() and old.read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.csv"]  # no temporary left behind
    with open_output(new, field="csv") as fh:
        fh.write("a,b\n")
    assert new.read_text() == "a,b\n" and (new.stat().st_mode & 0o777) != 0o600  # created as open() would


def test_sweep_json_streams(monkeypatch):
    """sweep --json writes its arrays as they are read (~0.5 GB at the 10⁶-point limit, once 5.3 GB): the result is
    never turned into Python lists (results.broadcast_fields sees one point), and the JSON is the roofline's own."""
    import numpy as np

    import rackmath
    import rackmath.engine.roofline as eng

    real = eng.broadcast_fields

    def one_point_only(d, keys):
        assert all(np.size(d[k]) <= 1 for k in keys if k in d), "the whole grid was turned into lists"
        return real(d, keys)

    monkeypatch.setattr(eng, "broadcast_fields", one_point_only)
    code, out, err = run_cli("sweep", M, "-H", "h100", "-b", "1:64:log7", "-L", "1K,8K,32K", "--json")
    assert code == 0, err
    d = json.loads(out)
    monkeypatch.setattr(eng, "broadcast_fields", real)
    b, c = np.meshgrid([1, 2, 4, 8, 16, 32, 64], [1000, 8000, 32000], indexing="ij")
    r = rackmath.roofline(M, "h100", batch=b.ravel(), context=c.ravel())
    assert d["batch"] == b.ravel().tolist() and len(d["step_s"]) == 21
    assert d["step_s"] == pytest.approx(np.ravel(r.step_s).tolist(), rel=1e-12)
    assert d["bound"] == np.ravel(r.bound).tolist() and d["fits"] == np.ravel(r.fits).tolist()
    assert d["model"] == M and d["prediction"] == "ideal"


@pytest.mark.parametrize("args,field", [
    # the layout search no longer swallows input errors (it said "gpus: no layout of 8 chips is valid")
    (("train", M, "--tokens", "1T", "--optimizer", "bogus"), "optimizer"),
    (("train", M, "--tokens", "1T", "--gpus", "64", "--optimizer", "bogus"), "optimizer"),
    # a dense model has no experts to place (it blamed an ep nobody gave)
    (("serve", M, "-H", "h100", "--isl", "100", "--osl", "100", "-c", "8", "--uneven-experts"), "uneven_experts"),
    (("serve", M, "-H", "h100", "--isl", "100", "--osl", "100", "-c", "8", "--redundant-experts", "2"),
     "redundant_experts"),
    # the option typed, not the engine's parameter (chips, tokens_per_chip)
    (("roofline", M, "-H", "h100", "--gpus", "1:1e10:log8"), "gpus"),
    (("racks", "moe-2racks", "-H", "gb200-nvl72", "--tokens-per-gpu", "x"), "tokens_per_gpu"),
])
def test_errors_name_the_option_typed(args, field):
    code, _, err = run_cli(*args)
    _assert_one_line(code, err, field)
    assert err.startswith(f"error: {field}: "), err


def test_scaleup_kv_overflow_is_said_not_negative():
    """B·kv beyond a domain's HBM: 'none', one line saying nothing fits — not −0.36T; absurd PP not printed."""
    code, out, err = run_cli("racks", "scaleup", "--batch", "1000", "--kv-per-seq", "1GB")
    assert code == 0, err
    row = next(ln for ln in out.splitlines() if ln.startswith("hgx-h100"))
    assert "none (KV 1 TB > HBM)" in row and "-0." not in out
    assert "nothing fits one domain of hgx-h100: the KV cache of B = 1,000 sequences alone (1 TB)" in out
    code, out, err = run_cli("racks", "scaleup", "--batch", "1000", "--kv-per-seq", "1e18")
    assert code == 0 and "PP≥1" not in out.replace("PP≥n", "") and "not in 4,096 domains" in out
    code, out, _ = run_cli("racks", "scaleup", "--batch", "1000", "--kv-per-seq", "1GB", "--json")
    d = json.loads(out)
    assert d["max_params"][0] == 0 and d["kv_fits"][:2] == [False, True]
    assert d["max_params"][1] == pytest.approx((13.392e12 - 1e12) / 1)  # (72 · 186 GB − 1000 · 1 GB) / 1 B


def test_cache_never_is_null_not_negative():
    """A faster tier that is also cheaper never breaks even: JSON null, the table 'never' (was hold_s −3.33)."""
    code, out, err = run_cli("cache", "--tier", "hbm=1e15,1e15,1e-9", "--json")
    assert code == 0, err
    be = json.loads(out)["break_even"]
    assert be[0] == {"faster": "hbm", "slower": "ddr", "hold_s": None}
    assert all(r["hold_s"] is None or r["hold_s"] > 0 for r in be)
    code, out, _ = run_cli("cache", "--tier", "hbm=1e15,1e15,1e-9")
    assert any(ln.split()[:3] == ["hbm", "ddr", "never"] for ln in out.splitlines())


_REC = """[[record]]
id = "U1"
title = "user record"
metric = "output_tok_s_per_gpu"
value = {value}
status = "measured"
source = "me"
source_group = "mine"
model = "llama-3.1-8b"
hardware = "h100"
gpus = 1
tp = {tp}
isl = 128
osl = 128
concurrency = 8
"""


def test_record_value_denormal_refused(tmp_path):
    (tmp_path / "r.toml").write_text(_REC.format(value="1e-320", tp=1))
    code, _, err = run_cli("validate", "--records", str(tmp_path), "--only-records")
    _assert_one_line(code, err, "value")
    assert "r.toml: record[0] 'U1'.value" in err


def test_validate_never_prints_inf_or_nan(tmp_path):
    (tmp_path / "r.toml").write_text(_REC.format(value="1e-12", tp=1))
    code, out, err = run_cli("validate", "--records", str(tmp_path), "--only-records")
    assert code == 0, err
    assert not any(w in out.lower() for w in ("inf%", "nan%", "inf×", "nan×"))
    assert not __import__("re").search(r"\d{12,}(\.\d*)?%", out)  # no 17- (or 320-) digit percentages


def test_user_record_the_model_refuses_is_skipped_alone(tmp_path):
    """tp = 3 on gpus = 1: a warning naming the file, record and field; the shipped records still validate."""
    (tmp_path / "r.toml").write_text(_REC.format(value="1000.0", tp=3))
    code, out, err = run_cli("validate", "--records", str(tmp_path))
    assert code == 0, err
    import re

    assert err.count("\n") == 1, err
    assert re.match(rf"warning: {re.escape(str(tmp_path / 'r.toml'))}: record 'U1'\.(gpus|tp): ", err), err
    assert "(record skipped)" in err and "AMD1" in out
    code, out, err = run_cli("validate", "--records", str(tmp_path), "--json")
    assert code == 0
    v = json.loads(out)
    assert [s["id"] for s in v["skipped"]] == ["U1"] and v["counts"]["skipped"] == 1
    assert "U1" not in {r["id"] for r in v["records"]}


def test_trace_nested_too_deeply_names_file_and_row(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text('{"arrival_s": 0, "isl": 100, "osl": 10}\n' + '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    code, _, err = run_cli("simulate", M, "-H", "h100", "--trace", str(p))
    _assert_one_line(code, err, "trace t.jsonl row 2")
    assert "nested too deeply" in err


def test_simulate_requests_limit_fits_2gb():
    """The accepted maximum (bounds.MAX_REQUESTS) peaks at ~1.4 GB (benchmarks/fuzz.py --limits); one more is
    refused before any work (2·10⁷ was accepted and needed ~8 GB)."""
    from rackmath.bounds import MAX_REQUESTS

    assert MAX_REQUESTS == 3_000_000
    code, _, err = run_cli("simulate", M, "-H", "h100", "--concurrency", "8", "--requests", str(MAX_REQUESTS + 1))
    _assert_one_line(code, err, "requests")
    code, _, err = run_cli("simulate", M, "-H", "h100", "--concurrency", "8", "--requests", "2e7")
    _assert_one_line(code, err, "requests")


def test_hf_config_kv_heads_must_divide_heads(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(_LLAMA | {"num_attention_heads": 32, "hidden_size": 4096, "num_key_value_heads": 7}))
    code, _, err = run_cli("model", "show", str(p))
    _assert_one_line(code, err, "n_kv_heads")
    assert "7 does not divide n_heads = 32" in err and "num_key_value_heads" in err
    p.write_text(json.dumps(_LLAMA | {"num_attention_heads": 32, "hidden_size": 4096, "num_key_value_heads": 8}))
    assert run_cli("model", "show", str(p))[0] == 0


def test_plan_slo_bounds_are_the_clis():
    """A denormal TTFT is refused by the library (and so by /api/plan, which calls it) as the CLI refuses it."""
    import rackmath
    from rackmath.errors import InputError

    for kw, field in ((dict(ttft=1e-320), "ttft"), (dict(ttft=float("nan")), "ttft"), (dict(tok_s_user=1e-320),
                                                                                        "tok_s_user")):
        with pytest.raises(InputError, match=f"^{field}: "):
            rackmath.plan(M, "h100", users=10, isl=100, osl=100, confirm=False, **kw)
    code, _, err = run_cli("plan", M, "-H", "h100", "--users", "10", "--isl", "100", "--osl", "100",
                           "--ttft", "1e-320")
    assert code == 2 and "ttft" in err


def test_web_plan_refuses_a_denormal_ttft():
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from rackmath.web import create_app

    r = TestClient(create_app(), raise_server_exceptions=False).get(
        "/api/plan", params={"model": M, "hardware": "h100", "users": "10", "isl": "100", "osl": "100",
                             "ttft": "1e-320"})
    assert r.status_code == 400 and "ttft" in r.text, r.text


@pytest.mark.parametrize("fn,args,kw,field", [
    ("layout", (0, "h100"), dict(gpus=8), "model"),
    ("plan", (0, "h100"), dict(users=10, isl=100, osl=100), "model"),
    ("compare", (M, "h100"), dict(isl=b"8K"), "isl"),
    ("compare", (M, b"h100"), {}, "hardware"),
    ("layout", (M, "h100"), dict(gpus=10**9), "gpus"),
    ("train", (M,), dict(tokens=None, gpus=8), "tokens"),
    ("roofline", (M, "h100"), dict(batch="BIG"), "batch"),
    ("roofline", (M, "h100"), dict(batch=[1] * 1_000_001), "batch"),
    ("roofline", (M, "h100"), dict(batch="GRID", context="GRID"), "batch, context"),
])
def test_library_validates_its_arguments(fn, args, kw, field):
    """Public functions raise rackmath's error naming the argument, with the CLI's size limits — never a raw
    AttributeError, MemoryError or an 8·10⁸-byte allocation."""
    import numpy as np

    import rackmath
    from rackmath.errors import InputError

    if kw.get("batch") == "BIG":
        kw = dict(batch=np.broadcast_to(np.float64(1), (10**8,)))  # 10⁸ values, no memory
    elif kw.get("batch") == "GRID":
        kw = dict(batch=np.ones((2000, 1)), context=np.ones(2000))  # 4·10⁶ combinations
    with pytest.raises(InputError, match=f"^{field}: "):
        getattr(rackmath, fn)(*args, **kw)


def test_trace_not_utf8_names_the_file(tmp_path):
    """Found by benchmarks/fuzz.py --files: a trace that is not UTF-8 was an internal error (UnicodeDecodeError)."""
    p = tmp_path / "t.csv"
    p.write_bytes(b"\xff\xfearrival_s,isl,osl\n0,1,1\n")
    code, _, err = run_cli("simulate", M, "-H", "h100", "--trace", str(p))
    _assert_one_line(code, err, "trace t.csv")
    assert "not UTF-8" in err


def test_ops_figure_goes_through_the_one_writer(tmp_path, monkeypatch):
    """plot_ops wrote with fig.savefig itself, so '-' became ./-.png: it now uses plotting.save, which refuses a
    path without a figure suffix."""
    import rackmath
    from rackmath.errors import InputError
    from rackmath.plotting.ops import plot_ops

    monkeypatch.chdir(tmp_path)
    rows = rackmath.roofline(M, "h100").ops(0)
    with pytest.raises(InputError, match="^output: "):
        plot_ops(rows, "-")
    assert list(tmp_path.iterdir()) == []
    assert plot_ops(rows, tmp_path / "ops.svg").read_text().lstrip().startswith("<?xml")
