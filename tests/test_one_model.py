"""Each thing once (issue 33): plan/compare/simulate get TTFT, TPOT and output rate from the function serve uses."""

from __future__ import annotations

import numpy as np
import pytest

CASES = [
    # model, hardware, gpus, layout, isl, osl, concurrency, framework, mtp
    ("llama-3.1-70b", "hgx-h100", 8, dict(tp=8, ep=1, pp=1, attention_dp=False), 1000, 1000, 64, None, 0),
    ("llama-3.1-70b", "hgx-h100", 8, dict(tp=4, ep=1, pp=2, attention_dp=False), 1000, 1000, 64, "vllm", 0),
    ("llama-3.1-70b", "hgx-h100", 8, dict(tp=8, ep=1, pp=1, attention_dp=False), 8000, 200, 256, "trtllm", 0),
    ("qwen3-30b-a3b", "hgx-h100", 8, dict(tp=8, ep=8, pp=1, attention_dp=True), 2000, 500, 512, "sglang", 0),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[3]['tp']}x{c[3]['pp']}-{c[7]}")
def test_plan_steady_state_is_serves(case):
    """Plan's steady state at one replica layout and concurrency equals serve's (TTFT with the stack's host time
    per request included: 123.8 ms for Llama-3.1-70B on 8×H100 TP8, 1000/1000, 64 in flight; plan said 76.3 ms)."""
    import rackmath
    from rackmath.analyses.serving import step_table as stt

    model, hw, gpus, lay, isl, osl, c, fw, mtp = case
    r = rackmath.serve(model, hw, gpus=gpus, isl=isl, osl=osl, concurrency=c, framework=fw, mtp=mtp, **lay)
    st = stt.stack(model, hw, framework=fw, mtp=mtp)
    arr = {k: np.array([float(v)]) for k, v in lay.items()}
    arr["attention_dp"] = np.array([lay["attention_dp"]])
    arr["attention_dp_size"] = np.array([0.0])
    arr["gpus"] = np.array([float(lay["tp"] * lay["pp"])])
    ss = stt.steady_state(st, arr, np.array([float(c)]), isl, osl, st.serving_stack.max_num_tokens)
    v = r.values
    assert float(ss["ttft_s"][0]) * 1e3 == pytest.approx(v["ttft_ms"], rel=1e-9)
    assert float(ss["tpot_s"][0]) * 1e3 == pytest.approx(v["tpot_ms"], rel=1e-9)
    assert float(ss["out_tok_s"][0]) == pytest.approx(v["output_tok_s"], rel=1e-9)
    assert float(st.t_request) == pytest.approx(r._info["t_request"], rel=1e-12)


def test_plan_steady_state_is_serves_with_measured_silicon():
    """Under ``--efficiency measured`` the stack version's fitted times (``engine.efficiency.for_stack``) reach plan's
    step table as they reach serve, once: the same TPOT, TTFT and output rate, and not those of the pooled preset."""
    import rackmath
    from rackmath.analyses.serving import step_table as stt

    kw = dict(framework="sglang@0.5.7", efficiency="measured")
    r = rackmath.serve("llama-3.1-70b", "hgx-h200", gpus=8, tp=8, isl=1000, osl=1000, concurrency=64, **kw)
    st = stt.stack("llama-3.1-70b", "hgx-h200", **kw)
    arr = dict(tp=np.array([8.0]), ep=np.array([1.0]), pp=np.array([1.0]), attention_dp=np.array([False]),
               attention_dp_size=np.array([0.0]), gpus=np.array([8.0]))
    ss = stt.steady_state(st, arr, np.array([64.0]), 1000, 1000, st.serving_stack.max_num_tokens)
    v = r.values
    assert float(ss["tpot_s"][0]) * 1e3 == pytest.approx(v["tpot_ms"], rel=1e-9)
    assert float(ss["ttft_s"][0]) * 1e3 == pytest.approx(v["ttft_ms"], rel=1e-9)
    assert float(ss["out_tok_s"][0]) == pytest.approx(v["output_tok_s"], rel=1e-9)
    pooled = stt.stack("llama-3.1-70b", "hgx-h200", framework="sglang@0.5.7", efficiency="preset")
    assert st.eff_serving.kernel_latency_s != pooled.eff_serving.kernel_latency_s  # the measured floor + τ_stack


def test_serve_ttft_llama70b_h100_figure():
    """The issue's figure, the sum of its parts: TTFT = t̄/2 + ⌈ISL / c⌉ · t_mixed + t_request + W — half a step to the
    next schedule, the prompt's one chunk, 47.5 ms of the generic stack's host time, and no wait (the generic stack
    has no token budget, so a prompt takes no share of one: S = 0, W = 0) — 124.1 ms (123.8 ms before the presets
    were refitted on 2026-11-28)."""
    import rackmath

    r = rackmath.serve("llama-3.1-70b", "hgx-h100", gpus=8, isl=1000, osl=1000, concurrency=64)
    i = r._info
    assert i["t_request"] * 1e3 == pytest.approx(47.5, abs=0.05)
    assert float(i["service"]) == 0.0 and float(i["wait"]) == 0.0
    parts = r.values["step_ms"] / 2e3 + np.ceil(1000 / float(i["chunk"])) * float(i["t_mixed"]) + i["t_request"]
    assert r.values["ttft_ms"] / 1e3 == pytest.approx(float(parts), rel=1e-12)
    assert r.values["ttft_ms"] == pytest.approx(124.1, abs=0.05)


def test_simulate_ttft_includes_request_time():
    """simulate adds the stack's host time per request to each request's TTFT and E2E (not to the steps)."""
    from rackmath.analyses.serving.simulate import simulate

    kw = dict(gpus=8, concurrency=16, requests=200, isl="1000", osl="200")
    a = simulate("llama-3.1-70b", "h100", **kw)
    b = simulate("llama-3.1-70b", "h100", ideal=True, **kw)  # the ideal stack has no host time
    assert a.config["t_request_s"] == pytest.approx(0.0475033, rel=1e-4)
    assert b.config["t_request_s"] == 0.0
    assert a.summary["ttft_s"]["p50"] > a.config["t_request_s"]


def test_one_usd_per_mtok_formula():
    """$/Mtok = chips · $/h ÷ 3600 / X · 10⁶ is written once (engine.roofline.usd_per_mtok); every other site calls
    it. A code line (strings and comments left out) holding both 3600 and 1e6 is a copy."""
    import ast
    import io
    import tokenize
    from pathlib import Path

    import rackmath
    from rackmath.engine.roofline import usd_per_mtok

    assert usd_per_mtok(8, 2.0, 4000.0) == pytest.approx(8 * 2.0 / 3600 / 4000 * 1e6, rel=1e-15)  # $1.11/Mtok
    root = Path(rackmath.__file__).parent
    copies = []
    for path in sorted(root.rglob("*.py")):
        toks = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
        line_nums: dict[int, set] = {}
        for tok in toks:
            if tok.type == tokenize.NUMBER:
                value = ast.literal_eval(tok.string)  # 3600, 1e6, 0o666, 1_000, 2j
                if not isinstance(value, complex):
                    line_nums.setdefault(tok.start[0], set()).add(float(value))
        for ln, nums in line_nums.items():
            if 3600.0 in nums and 1e6 in nums:
                copies.append(f"{path.relative_to(root)}:{ln}")
    assert copies == ["engine/roofline.py:" + str(_def_line(root / "engine" / "roofline.py"))], copies


def _def_line(path):
    """The line of usd_per_mtok's formula (its return statement's continuation with 3600 and 1e6)."""
    lines = path.read_text().splitlines()
    start = next(i for i, s in enumerate(lines) if s.startswith("def usd_per_mtok("))
    return next(i + 1 for i in range(start, len(lines)) if "3600" in lines[i] and "1e6" in lines[i])


# --- one resolver for --efficiency / --ideal ----------------------------------------------------------------------

EFF_COMMANDS = {
    "roofline": ["roofline", "llama-3.1-8b", "-H", "h100", "-b", "8"],
    "serve": ["serve", "llama-3.1-8b", "-H", "h100", "-n", "1", "--isl", "100", "--osl", "100", "-c", "4"],
    "plan": ["plan", "llama-3.1-8b", "-H", "h100", "--isl", "100", "--osl", "100", "--users", "4", "--no-confirm"],
    "simulate": ["simulate", "llama-3.1-8b", "-H", "h100", "-n", "1", "-c", "4", "--requests", "50"],
    "compare": ["compare", "llama-3.1-8b", "-H", "h100"],
    "layout": ["layout", "llama-3.1-8b", "-H", "h100", "-n", "8", "-b", "8"],
    "sweep": ["sweep", "llama-3.1-8b", "-H", "h100", "-b", "8", "-L", "1K", "--json"],
    "batching balance": ["batching", "balance", "llama-3.1-8b", "-H", "h100"],
    "batching penalty": ["batching", "penalty", "llama-3.1-8b", "-H", "h100"],
    "batching fast-mode": ["batching", "fast-mode", "llama-3.1-8b", "-H", "h100", "--price", "2"],
    "batching throughput": ["batching", "throughput", "llama-3.1-8b", "-H", "h100"],
    "batching prefill": ["batching", "prefill", "llama-3.1-8b", "-H", "h100"],
    "validate": ["validate", "--id", "AMD1,AMD2"],
    "train": ["train", "llama-3.1-8b", "-H", "h100", "--tokens", "1T"],
}


def _commands_with_efficiency():
    import click
    import typer.main

    from rackmath.cli.main import app

    found = set()

    def walk(c, path):
        if isinstance(c, click.Group):
            for name, sub in c.commands.items():
                walk(sub, path + [name])
            return
        opts = {o for p in c.params for o in getattr(p, "opts", [])}
        if {"--ideal", "--efficiency"} <= opts:
            found.add(" ".join(path))

    walk(typer.main.get_command(app), [])
    return found


def test_every_efficiency_command_is_checked():
    """A command that takes --ideal and --efficiency is in EFF_COMMANDS (the plots write files: left out)."""
    assert _commands_with_efficiency() - {"plot pareto", "plot batch", "plot context"} == set(EFF_COMMANDS)


@pytest.mark.parametrize("name", list(EFF_COMMANDS))
def test_ideal_and_efficiency_one_rule(name):
    """--ideal with --efficiency auto or a preset: one line naming both options, exit 2, everywhere;
    --ideal --efficiency ideal is the same as --ideal, accepted everywhere."""
    from conftest import run_cli

    args = EFF_COMMANDS[name]
    for preset in ("auto", "hopper-serving"):
        code, out, err = run_cli(*args, "--ideal", "--efficiency", preset)
        assert code == 2 and out == "", (name, preset, err)
        assert err.count("\n") == 1 and "--ideal" in err and f"--efficiency {preset}" in err, err
    code, out, err = run_cli(*args, "--ideal", "--efficiency", "ideal")
    assert code == 0, (name, err)
    assert out.splitlines()[:2] == run_cli(*args, "--ideal")[1].splitlines()[:2]  # the same header


def test_ideal_and_efficiency_api_and_web():
    """The Python API and the web app use the same resolver: the same error, the same acceptance."""
    import rackmath
    from rackmath.engine.efficiency import IDEAL, efficiency_for, load_efficiency
    from rackmath.errors import InputError

    for fn, kw in ((rackmath.roofline, dict(batch=8)), (rackmath.serve, dict(gpus=1, isl=100, osl=100, concurrency=4))):
        with pytest.raises(InputError, match="--ideal and --efficiency auto"):
            fn("llama-3.1-8b", "h100", ideal=True, efficiency="auto", **kw)
        eff = fn("llama-3.1-8b", "h100", ideal=True, efficiency="ideal", **kw).efficiency
        assert getattr(eff, "name", eff) == "ideal"
    with pytest.raises(InputError, match="hopper-serving"):
        efficiency_for("h100", load_efficiency("hopper-serving"), True)
    assert efficiency_for("h100", None, False, default="auto").name == "hopper-serving"
    assert efficiency_for("h100", None, False) is IDEAL
    fastapi = pytest.importorskip("fastapi")  # noqa: F841
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from rackmath.web.app import create_app

    c = TestClient(create_app(), raise_server_exceptions=False)
    r = c.get("/api/roofline", params=dict(model="llama-3.1-8b", hardware="h100", batch="8", ideal="true",
                                           efficiency="auto"))
    assert r.status_code == 400 and "--ideal and --efficiency auto" in r.text
    r = c.get("/api/roofline", params=dict(model="llama-3.1-8b", hardware="h100", batch="8", ideal="true",
                                           efficiency="ideal"))
    assert r.status_code == 200


@pytest.mark.parametrize("framework", [None, "sglang", "trtllm"])
def test_plan_steady_state_is_serves_under_speculation(framework):
    """With MTP drafts, plan prices a draft pass as serve does (the stack's host time on a serial stack; SGLang's
    overlap scheduler off under speculation): TTFT, TPOT and output rate equal serve's."""
    import rackmath
    from rackmath.analyses.serving import step_table as stt

    kw = dict(isl=1000, osl=1000, concurrency=64, framework=framework, mtp=1, acceptance=1.7)
    r = rackmath.serve("deepseek-v3", "hgx-h200", gpus=8, tp=8, ep=8, pp=1, attention_dp=False, **kw)
    st = stt.stack("deepseek-v3", "hgx-h200", framework=framework, mtp=1, acceptance=1.7)
    lay = dict(tp=np.array([8.0]), ep=np.array([8.0]), pp=np.array([1.0]), attention_dp=np.array([False]),
               attention_dp_size=np.array([0.0]), gpus=np.array([8.0]))
    ss = stt.steady_state(st, lay, np.array([64.0]), 1000, 1000, st.serving_stack.max_num_tokens)
    assert float(ss["tpot_s"][0]) * 1e3 == pytest.approx(r.values["tpot_ms"], rel=1e-9)
    assert float(ss["ttft_s"][0]) * 1e3 == pytest.approx(r.values["ttft_ms"], rel=1e-9)
    assert float(ss["out_tok_s"][0]) == pytest.approx(r.values["output_tok_s"], rel=1e-9)
