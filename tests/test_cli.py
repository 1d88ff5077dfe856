"""The CLI: JSON shapes, derivations, files, and one-line errors with exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import run_cli


def test_roofline_json_fields():
    code, out, err = run_cli("roofline", "llama-3.1-70b", "--hardware", "tpu-v5e", "--chips", "8", "--batch", "32",
                             "--context", "8192", "--weights-dtype", "int8", "--kv-dtype", "int8", "--json")
    assert code == 0, err
    d = json.loads(out)
    for k in ("step_s", "t_compute_s", "t_weights_s", "t_kv_s", "bound", "tokens_per_s", "tokens_per_s_per_chip",
              "latency_per_token_s", "usd_per_mtok", "mfu"):
        assert k in d
    assert d["step_s"] == pytest.approx(0.017, rel=0.05)


def test_roofline_ranges_and_explain():
    code, out, _ = run_cli("roofline", "deepseek-v3", "-H", "gb200-nvl72", "--batch", "1,64,4096", "--json")
    assert code == 0
    assert len(json.loads(out)["step_s"]) == 3
    code, out, _ = run_cli("roofline", "deepseek-v3", "-H", "gb200-nvl72", "--batch", "64", "--explain")
    assert code == 0 and "E_hit = E · (1 − (1 − k/E)^T)" in out and "t_step" in out


def test_sweep_writes_csv_and_never_overwrites(tmp_path):
    f = tmp_path / "s.csv"
    code, out, err = run_cli("sweep", "llama-3.1-8b", "-H", "h100", "--batch", "1:1024:log11",
                             "--context", "1K,8K", "--csv", str(f))
    assert code == 0, err
    lines = f.read_text().splitlines()
    assert lines[0].startswith("chips,batch,context") and len(lines) == 1 + 22
    f.write_text("mine")
    code, _, err = run_cli("sweep", "llama-3.1-8b", "-H", "h100", "--csv", str(f))
    assert code == 2 and "exists" in err and f.read_text() == "mine"


@pytest.mark.parametrize("args,field", [
    (("roofline", "nope-model", "-H", "h100"), "model"),
    (("roofline", "llama-3.1-8b", "-H", "h1000"), "hardware"),
    (("roofline", "llama-3.1-8b", "-H", "h100", "--batch", "-4"), "batch"),
    (("roofline", "llama-3.1-8b", "-H", "h100", "--context", "lots"), "context"),
    (("roofline", "llama-3.1-8b", "-H", "h100", "--kv-dtype", "fp7"), "kv_dtype"),
    (("batching", "fast-mode", "frontier-100b", "--speedup", "0"), "speedup"),
])
def test_bad_input_one_line_exit_2(args, field):
    code, out, err = run_cli(*args)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: ") and field in err
    assert "Traceback" not in err


def test_batching_commands():
    code, out, _ = run_cli("batching", "balance", "deepseek-v3", "--context", "0,2048", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["balance_batch"][1] > d["balance_batch"][0]
    code, out, _ = run_cli("batching", "floor", "llama-3.1-405b", "-H", "hgx-h100", "--json")
    assert json.loads(out)["latency_floor_s"] == pytest.approx(0.0303, rel=0.02)
    code, out, _ = run_cli("batching", "fast-mode", "deepseek-v3", "--speedup", "2.5", "--json")
    # HBM 90% full of KV at 8K: weights are 5.7% of the step, so 2.5× speed costs 0.4/0.364 = 1.10× (R1 derived)
    assert code == 0 and json.loads(out)["cost_multiple"] == pytest.approx(1.10, rel=0.03)
    code, out, _ = run_cli("batching", "ratio", "-H", "h100", "--json")
    assert json.loads(out)[0]["ratio"] == pytest.approx(295, rel=0.01)
    code, out, _ = run_cli("batching", "throughput", "frontier-100b", "--json")
    assert code == 0 and json.loads(out)["systems_needed"] > 1
    code, out, _ = run_cli("batching", "prefill", "llama-3.1-70b", "-H", "hgx-h100", "--json")
    assert code == 0 and json.loads(out)["rows"][-1]["bound"] == "compute"


def test_lecture_json_records():
    code, out, err = run_cli("lecture", "--json", "--only", "R5,R6,R10")
    assert code == 0, err
    recs = json.loads(out)
    assert [(r["id"], r["kind"]) for r in recs] == [("R5", "lecture"), ("R6", "lecture"), ("R6", "real"),
                                                    ("R10", "lecture"), ("R10", "real")]
    for r in recs:
        assert {"id", "value", "unit", "lecture_value", "agrees", "tolerance", "ratio", "verdict"} <= set(r)


def test_plot_batch_writes_png(tmp_path):
    f = tmp_path / "b.png"
    code, out, err = run_cli("plot", "batch", "frontier-100b", "-H", "gb200-nvl72", "-o", str(f))
    assert code == 0, err
    assert f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, _, err = run_cli("plot", "context", "frontier-100b", "-H", "gb200-nvl72", "-o", str(tmp_path / "c.svg"))
    assert code == 0 and (tmp_path / "c.svg").read_text().lstrip().startswith("<?xml")


def test_python_dash_m_and_help_fast_path():
    p = subprocess.run([sys.executable, "-m", "rackmath", "--help"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "roofline" in p.stdout
    p = subprocess.run([sys.executable, "-m", "rackmath", "roofline", "nope", "-H", "h100"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2 and "Traceback" not in p.stderr
