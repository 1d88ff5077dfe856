"""Issue 10: one consistent, honest interface. The vocabulary test walks every command of the typer app, so
commands added later are checked too; the rest check tables, units, files, labels and the Python API."""

from __future__ import annotations

import json
import re

import click
import numpy as np
import pytest
import typer
from conftest import run_cli

from rackmath.cli.main import app


def _commands():
    root = typer.main.get_command(app)

    def walk(cmd, path):
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                yield from walk(sub, path + [name])
        else:
            yield " ".join(path), cmd

    return list(walk(root, []))


COMMANDS = _commands()
# Commands exempt from a rule, each with its reason (add yours here only with a reason a user would accept).
NO_JSON = {"web": "serves a web page; it prints no numbers"}
COST_WITHOUT_PRICE_FLAG = {
    "overtrain": "cost shares and cost ratios, independent of the chip price",
    "batching fast-mode": "the cost multiple is a ratio, independent of the chip price",
    "hardware list": "lists the catalog prices themselves",
    "plot price-context": "draws an API price sheet against relative cost",
}
IDEAL_WITHOUT_EFFICIENCY = {"validate": "each record is predicted with its own chip's calibrated preset, or all "
                                        "with the ideal roofline; one preset for every chip is not a prediction"}
MODEL_AS_OPTION = {"price": "the price sheet is the positional argument; --model only picks the fast-mode reading"}
ALLOWED_GPU_NAMES = {"--gpus", "--prefill-gpus", "--decode-gpus", "--usd-per-gpu-hour"}
SHORT = {"-n": "--gpus", "-H": "--hardware", "-L": "--context", "-b": "--batch", "-c": "--concurrency",
         "-o": "--output"}


def _opts(cmd):
    return {o: p for p in cmd.params if isinstance(p, click.Option) for o in p.opts + p.secondary_opts}


def test_commands_are_found():
    names = {n for n, _ in COMMANDS}
    assert {"roofline", "sweep", "serve", "layout", "train", "racks memory", "plot batch", "lecture"} <= names


@pytest.mark.parametrize("name,cmd", COMMANDS, ids=[n for n, _ in COMMANDS])
def test_vocabulary(name, cmd):
    opts = _opts(cmd)
    longs = [o for o in opts if o.startswith("--")]
    # chip counts: --gpus (short -n) everywhere; --chips only as the hidden alias
    for o in longs:
        assert "chip" not in o, f"{name}: {o} (the vocabulary says GPU: --gpus, --gpu-hours, --…-per-gpu)"
        if "gpu" in o:
            assert o in ALLOWED_GPU_NAMES or re.fullmatch(r"--[a-z-]+-gpus|--gpu-hours|--[a-z-]+-per-gpu(-[a-z-]+)?", o) \
                and o not in ("--num-gpus", "--n-gpus"), f"{name}: {o} (a GPU count is --gpus)"
        assert o not in ("--usd-per-hour", "--usd", "--price-per-hour", "--usd-per-chip-hour"), \
            f"{name}: {o} (use --usd-per-gpu-hour)"
    for short, long_ in SHORT.items():
        if short in opts:
            assert long_ in opts[short].opts, f"{name}: {short} means {long_} everywhere, not {opts[short].opts}"
    # the model is positional
    for p in cmd.params:
        if p.name == "model" and name not in MODEL_AS_OPTION:
            assert isinstance(p, click.Argument), f"{name}: the model must be the positional argument"
    # the ideal/calibrated pair comes together
    if name not in IDEAL_WITHOUT_EFFICIENCY:
        assert ("--efficiency" in opts) == ("--ideal" in opts), f"{name}: --efficiency and --ideal go together"
    # numbers -> --json; files -> --force; context flags say 8K = 8,000 and 8Ki = 8,192
    if name not in NO_JSON:
        assert "--json" in opts, f"{name}: every command that prints numbers takes --json"
    if "--output" in opts:
        assert "--force" in opts, f"{name}: --output needs --force (never overwrite)"
    if "--context" in opts:
        assert "8Ki" in (opts["--context"].help or ""), f"{name}: --context help must say 8K = 8,000, 8Ki = 8,192"
    doc = cmd.help or ""
    if ("$" in doc or "cost" in doc.lower()) and name not in COST_WITHOUT_PRICE_FLAG:
        assert "--usd-per-gpu-hour" in opts, f"{name}: prints a cost, so it takes --usd-per-gpu-hour"


# --- tables fit the terminal; numbers are never cut -------------------------------------------------------------

TABLE_COMMANDS = [
    ("roofline", "deepseek-v3", "-H", "gb200-nvl72", "--batch", "1,64,4096", "--context", "8K"),
    ("hardware", "list"),
    ("hardware", "show", "h100"),
    ("hardware", "list", "--systems"),
    ("model", "list"),
    ("layout", "deepseek-v3", "-H", "gb200-nvl72", "-n", "72"),
    ("serve", "deepseek-v3", "-H", "gb200-nvl72", "--isl", "1K", "--osl", "1K", "-c", "256"),
    ("lecture", "--only", "R1,R2,R12,R27"),
]


@pytest.mark.parametrize("cols", [80, 100])
@pytest.mark.parametrize("args", TABLE_COMMANDS, ids=[" ".join(a[:2]) for a in TABLE_COMMANDS])
def test_tables_fit_the_terminal(args, cols):
    code, out, err = run_cli(*args, env={"COLUMNS": str(cols)})
    assert code == 0, err
    lines = out.splitlines()
    assert lines and max(len(x.rstrip()) for x in lines) <= cols, "\n".join(x for x in lines if len(x) > cols)
    assert "…" not in out  # nothing cut with an ellipsis


def test_roofline_numbers_whole_and_hidden_columns_named():
    code, out, _ = run_cli("roofline", "deepseek-v3", "-H", "gb200-nvl72", "--batch", "1,64,4096", "--context", "8K",
                           env={"COLUMNS": "80"})
    assert code == 0
    # the $/Mtok of batch 4096 at the lecture's ideal bound, whole: $0.151 (ideal: 72 GB200 at $6/h)
    assert "$0.151" in out and "11,019" in out
    assert "hidden to fit 80 columns" in out and "--wide" in out
    code, wide, _ = run_cli("roofline", "deepseek-v3", "-H", "gb200-nvl72", "--batch", "1,64,4096", "--wide",
                            env={"COLUMNS": "80"})
    assert "MFU" in wide and "t_kv" in wide and "hidden" not in wide
    code, pick, _ = run_cli("--columns", "batch,step,$/Mtok", "roofline", "deepseek-v3", "-H", "gb200-nvl72",
                            env={"COLUMNS": "80"})
    assert code == 0 and "step" in pick and "t_compute" not in pick
    code, _, err = run_cli("roofline", "deepseek-v3", "-H", "gb200-nvl72", "--columns", "nope")
    assert code == 2 and err.startswith("error: columns")


def test_human_units():
    from rackmath.units import human

    assert human(8.889e4, "s") == "24.7 h"
    assert human(7.65e6, "$") == "$7.65M"
    assert human(0.67, "$") == "$0.67"
    assert human(1.84, "$/Mtok") == "$1.84/Mtok"
    assert human(131072) == "131,072"
    assert human(1.7e6) == "1.7M" and human(6.71e11) == "671B"
    assert human(3.35e12, "B/s") == "3.35 TB/s"
    assert human(0.421, "%") == "42.1%"
    assert human(0.000114, "$") == "$0.000114"
    assert human(6.35e27, "FLOP") == "6.35e27 FLOP"
    assert "e" not in human(2.5e-5)


# --- inputs: integer ranges, 8K vs 8Ki ---------------------------------------------------------------------------

def test_counts_and_integer_ranges():
    from rackmath.cli.common import parse_range
    from rackmath.units import parse_count

    assert parse_count("8K") == 8000 and parse_count("8Ki") == 8192 and parse_count("1Mi") == 2**20
    b = parse_range("1:16384:log", "batch")
    assert np.all(b == np.round(b)) and b[0] == 1 and b[-1] == 16384 and len(set(b)) == len(b)
    c = parse_range("1K:1M:log", "context")
    assert np.all(c == np.round(c))
    code, out, _ = run_cli("sweep", "llama-3.1-8b", "-H", "h100", "--batch", "1:100:log7", "--csv", "-")
    assert code == 0
    batches = [float(line.split(",")[1]) for line in out.splitlines()[1:]]
    assert batches == [round(x) for x in batches] and batches[:3] == [1, 2, 5]


# --- files ---------------------------------------------------------------------------------------------------------

def test_csv_to_stdout_and_missing_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_cli("sweep", "llama-3.1-8b", "-H", "h100", "--batch", "1,2", "--csv", "-")
    assert code == 0 and out.startswith("chips,batch,context") and not (tmp_path / "-").exists()
    code, _, err = run_cli("sweep", "llama-3.1-8b", "-H", "h100", "--csv", str(tmp_path / "no" / "s.csv"))
    assert code == 2 and err.startswith("error: csv:") and "does not exist" in err
    assert not (tmp_path / "no").exists()
    code, _, err = run_cli("plot", "batch", "llama-3.1-8b", "-H", "h100", "-o", str(tmp_path / "b.png"))
    assert code == 0 and err == f"wrote {tmp_path / 'b.png'}\n"


def test_plot_json(tmp_path):
    p = tmp_path / "c.png"
    code, out, err = run_cli("plot", "context", "llama-3.1-8b", "-H", "h100", "-o", str(p), "--json",
                             "--context", "1K:100K:log5")
    assert code == 0, err
    d = json.loads(out)
    assert d["output"] == str(p) and d["prediction"] == "ideal" and len(d["step_s"]) == 5


# --- ideal bound vs calibrated prediction, labelled ----------------------------------------------------------------

def test_ideal_and_calibrated_are_labelled():
    args = ("deepseek-v3", "-H", "gb200-nvl72", "--batch", "256")
    code, out, _ = run_cli("roofline", *args)
    assert "ideal roofline — a lower bound on time" in out
    code, out, _ = run_cli("roofline", *args, "--efficiency", "auto")
    assert "calibrated prediction, preset blackwell-serving (validated error ±" in out
    code, out, _ = run_cli("roofline", *args, "--json")
    d = json.loads(out)
    assert d["prediction"] == "ideal" and d["label"].startswith("ideal roofline")
    code, out, _ = run_cli("serve", "deepseek-v3", "-H", "gb200-nvl72", "--isl", "1K", "--osl", "1K", "-c", "256",
                           "--json")
    d = json.loads(out)
    assert d["prediction"] == "calibrated" and d["efficiency"] == "blackwell-serving"
    assert 0 < d["validated_error"] < 0.5
    code, out, _ = run_cli("serve", "deepseek-v3", "-H", "gb200-nvl72", "--isl", "1K", "--osl", "1K", "-c", "256",
                           "--ideal", "--json")
    assert json.loads(out)["prediction"] == "ideal"
    code, _, err = run_cli("roofline", *args, "--ideal", "--efficiency", "auto")
    assert code == 2 and err.startswith("error: ideal")


def test_usd_per_gpu_hour_everywhere_it_costs():
    args = ("deepseek-v3", "-H", "gb200-nvl72", "--batch", "256", "--json")
    c6 = json.loads(run_cli("roofline", *args)[1])["usd_per_mtok"]
    c3 = json.loads(run_cli("roofline", *args, "--usd-per-gpu-hour", "3")[1])["usd_per_mtok"]
    assert c3 == pytest.approx(c6 / 2)  # catalog GB200 is $6/GPU-hour; cost is linear in the price
    t = json.loads(run_cli("train", "llama-3.1-8b", "-n", "8", "-D", "1T", "--mfu", "0.4", "--usd-per-hour", "1",
                           "--json")[1])
    assert t["usd"] == pytest.approx(t["chip_hours"])  # the old spelling is a hidden alias


# --- one vocabulary: aliases --------------------------------------------------------------------------------------

def test_hidden_aliases():
    a = run_cli("racks", "memory", "llama-3.1-8b", "-H", "h100", "--chips", "1", "--json")
    b = run_cli("racks", "memory", "llama-3.1-8b", "-H", "h100", "--gpus", "1", "--json")
    assert a[0] == 0 and a[1] == b[1]
    a = run_cli("serve", "--model", "llama-3.1-8b", "-H", "h100", "--isl", "1K", "--osl", "1K", "-c", "8", "--json")
    b = run_cli("serve", "llama-3.1-8b", "-H", "h100", "--isl", "1K", "--osl", "1K", "-c", "8", "--json")
    assert a[0] == 0 and a[1] == b[1]
    code, out, _ = run_cli("roofline", "--help")
    assert "--gpus" in out and "--chips" not in out


# --- one max context; train picks a layout that fits -------------------------------------------------------------

def test_one_max_context_with_the_model_limit():
    from rackmath import max_context

    mc = max_context("qwen3-235b-a22b", "hgx-h200", gpus=8)
    assert mc.model_limit == 131072 and mc.tokens > 1e6 and mc.usable == 131072 and "131,072" in mc.warning
    d = json.loads(run_cli("racks", "memory", "qwen3-235b-a22b", "-H", "hgx-h200", "-n", "8", "--json")[1])
    assert d["max_context"] == mc.tokens and d["model_max_context"] == 131072 and d["warnings"]
    d = json.loads(run_cli("context", "qwen3-235b-a22b", "-H", "h200", "-n", "8", "-b", "1", "--json")[1])
    assert d["max_context_fit"] == mc.tokens and d["warning"]


def test_serve_memory_line_and_max_context_agree():
    # serve fills 90% of HBM (USABLE_MEMORY_FRACTION); its "longest context" uses the same budget:
    # Llama-3.1-8B BF16 on one H100: (0.9 · 80 GB − 16.06 GB of weights) / 131,072 B of KV per token ≈ 426.8k tokens
    d = json.loads(run_cli("serve", "llama-3.1-8b", "-H", "hgx-h100", "-n", "1", "--isl", "128", "--osl", "128", "-c", "1",
                           "--json")[1])
    assert d["fits"] and d["max_context"] == pytest.approx((0.9 * 80e9 - 16.06e9) / 131072, rel=2e-3)
    # Qwen2.5-72B BF16 on 2 × H100 (72.7 GB of weights per GPU > 72 GB): neither fits nor holds any context
    d = json.loads(run_cli("serve", "qwen2.5-72b", "-H", "hgx-h100", "-n", "2", "--tp", "2", "--isl", "128",
                           "--osl", "128", "-c", "1", "--weights-dtype", "bf16", "--json")[1])
    assert not d["fits"] and d["max_context"] == 0


def test_train_searches_a_layout_that_fits():
    code, out, err = run_cli("train", "llama-3.1-70b", "-n", "10000", "-D", "15T", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["memory"]["fits"] and d["layout_search"]["fit"] > 0
    assert d["parallelism"]["dp"] * d["parallelism"]["tp"] * d["parallelism"]["pp"] == 10000
    code, out, _ = run_cli("train", "llama-3.1-70b", "-n", "10000", "-D", "15T")
    assert "searched: fastest of" in out and "DOES NOT FIT" not in out


# --- shipped configs and sources -----------------------------------------------------------------------------------

def test_shipped_hf_configs_and_public_sources():
    code, out, err = run_cli("model", "show", "hf:openai/gpt-oss-120b", "--json")
    assert code == 0, err
    assert json.loads(out)["total_params"] == pytest.approx(116.8e9, rel=0.01)  # OpenAI model card: 117B
    code, out, _ = run_cli("model", "list", "--hf", "--json")
    assert len(json.loads(out)) >= 14
    code, _, err = run_cli("model", "show", "hf:nope/nothing")
    assert code == 2 and "hf:" in err
    code, out, _ = run_cli("hardware", "show", "h100", env={"COLUMNS": "200"})
    assert "published.md H1 [V]" not in out and "glennklockwood.com" in out and "docs/reference/published.md" in out


# --- the notebook API ----------------------------------------------------------------------------------------------

def test_api_strings_defaults_and_results():
    import rackmath

    names = dir(rackmath)
    assert {"roofline", "serve", "train", "layout", "price", "max_context", "validate"} <= set(names)
    r = rackmath.roofline("deepseek-v3", "gb200-nvl72", batch="1,64", context="8K")
    assert list(r.context.ravel()) == [8000.0]
    d = r.as_dict()
    assert len(d["chips"]) == len(d["batch"]) == len(d["step_s"]) == 2  # broadcast to one shape
    one = rackmath.roofline("deepseek-v3", "gb200-nvl72")  # CLI defaults: batch 1, context 8192
    assert float(one.batch) == 1 and float(one.context) == 8192
    assert len(repr(r)) < 400 and "ideal roofline" in repr(r)
    import pandas as pd  # in the test extra
    f = r.to_frame()
    assert isinstance(f, pd.DataFrame) and len(f) == 2 and "usd_per_mtok" in f
    assert "<table" in r._repr_html_()
    t = rackmath.train("llama-3.1-8b", "hgx-h100", gpus=8, tokens="1T", mfu_given=0.4)
    # 6·N·D at 40% of 989 TFLOP/s on 8 GPUs, plus attention: ~(6 · 8.03e9 · 1e12)/(8 · 0.4 · 989.4e12) ≈ 1.52e7 s
    assert 1.5e7 < t.time_s < 1.8e7 and "TrainingResult(" in repr(t)
    s = rackmath.serve("llama-3.1-8b", "hgx-h100", gpus=1, isl="1K", osl="1K", concurrency="8")
    assert s.as_dict()["concurrency"] == 8 and len(s.to_frame()) == 1


def test_every_result_has_a_frame_and_a_short_repr():
    import rackmath

    results = [rackmath.layout("llama-3.1-8b", "hgx-h100", gpus=8),
               rackmath.train("llama-3.1-8b", "hgx-h100", gpus=8, tokens="1T"),
               rackmath.simulate("llama-3.1-8b", "h100", rate=2, requests=100)]
    for r in results:
        f = r.to_frame()
        assert len(f) == len(r) >= 1 and len(repr(r)) < 400
    sim = results[-1].to_frame()
    assert len(sim) == 100 and (sim["ttft_s"] > 0).all()  # one row per request
