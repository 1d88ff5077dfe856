"""--explain generated from the computation (issue 33): every printed line adds up.

Each derivation step of serve, roofline and train (and serve's and roofline's energy blocks) either prints working — arithmetic with the numbers the engine
computed, which evaluated (``explain.working_value``) gives the printed value within the display's rounding — or is
a given (an input or a catalog number: its formula has no arithmetic). Steps with an ``expr`` re-evaluate exactly
(``Derivation.check``). ``plan --explain`` derives each chip's aggregated deployment as serve does, and its TTFT and
TPOT lines are the plan's.
"""

from __future__ import annotations

import math
import re

import pytest

from rackmath.explain import Derivation, working_value

ROUNDING = 0.015  # numbers print with 3–4 significant figures; a line of several terms stays within 1.5%
ARITHMETIC = re.compile(r"[·×÷Σ^]| [+−/-] |max\(|min\(|ceil\(")  # operators, not "tokens/s"


def test_working_value_reads_printed_arithmetic():
    assert working_value("64 · 1") == 64.0
    assert working_value("1,000 + 1,000/2") == 1500.0
    assert working_value("10.3 TFLOP / (8 · 989 TFLOP/s [bf16] · 0.65)") == pytest.approx(10.3e12 / (8 * 989e12 * 0.65))
    assert working_value("6 · 70.6B · 15T") == pytest.approx(6 * 70.6e9 * 15e12)
    assert working_value("10000 · 11.9 days / 3600") == pytest.approx(10000 * 11.9 * 86400 / 3600)
    assert working_value("8 · $2/h ÷ 3600 · 24.9 ms / 64 · 10⁶") == pytest.approx(8 * 2 / 3600 * 24.9e-3 / 64 * 1e6)
    assert working_value("max(62.7 ms, 1,122 · 35.2 µs)") == pytest.approx(62.7e-3)
    assert working_value("64 tokens / (1 · ∞ tokens)") == 0.0
    assert working_value("2.35 ktok/s / 8") == pytest.approx(2350 / 8)
    for words in ("R = 1 ranks", "max(…, 1122 · 35.2 µs)", "sglang: prefill first = True", ""):
        assert working_value(words) is None


def test_generated_working_adds_up():
    d = Derivation()
    d.add("a", "given", "", 0.0248, "s", key="a")
    d.add("b", "given", "", 0.0627, "s", key="b")
    d.add("t", "a + n·(b − a) if n ≤ 1 else b", "", 0.0248 + 0.064 * (0.0627 - 0.0248), "s",
          expr="a + 0.064 * (b - a) if 0.064 <= 1 else b")
    assert d.steps[-1].substituted == "24.8 ms + 0.064 · (62.7 ms − 24.8 ms)"
    assert working_value(d.steps[-1].substituted) == pytest.approx(d.steps[-1].value, rel=ROUNDING)


def _derivations():
    import rackmath

    S = dict(isl=1000, osl=1000)
    serve = {
        "serve 70B 8×H100 c=64": dict(model="llama-3.1-70b", hardware="hgx-h100", gpus=8, concurrency=64, **S),
        "serve ideal": dict(model="llama-3.1-70b", hardware="hgx-h100", gpus=8, concurrency=64, ideal=True, **S),
        "serve MTP": dict(model="deepseek-v3", hardware="hgx-h200", gpus=8, concurrency=64, mtp=1, **S),
        "serve --eager": dict(model="llama-3.1-8b", hardware="hgx-h100", gpus=1, isl=512, osl=128, concurrency=8,
                              framework="vllm", eager=True),
        "serve waves": dict(model="deepseek-v3", hardware="hgx-h200", gpus=8, isl=3200, osl=800, concurrency=8,
                            framework="sglang", arrivals="waves"),
        "serve disaggregated": dict(model="llama-3.1-70b", hardware="hgx-h100", gpus=16, prefill_gpus=8,
                                    decode_gpus=8, concurrency=64, **S),
        "serve closed-loop": dict(model="deepseek-v3", hardware="hgx-h200", gpus=8, isl=3200, osl=800, concurrency=64,
                                  framework="vllm", arrivals="closed-loop"),
        "serve closed-loop disaggregated": dict(model="llama-3.1-70b", hardware="hgx-h100", gpus=16, prefill_gpus=8,
                                                decode_gpus=8, concurrency=64, arrivals="closed-loop", **S),
        "serve poisson": dict(model="deepseek-v3", hardware="gb200-nvl72", concurrency=256, arrivals="poisson", **S),
        "serve prefill-bound (Little's law)": dict(model="llama-3.1-8b", hardware="hgx-h100", gpus=1, isl=8000, osl=20,
                                                   concurrency=48, framework="vllm"),
        "serve PP2 at C=1 (b floored at 1)": dict(model="qwen3-235b-a22b", hardware="hgx-h200", gpus=8, pp=2, isl=2000,
                                                  osl=300, concurrency=1),
        "serve attention-DP budget-bound": dict(model="qwen3-30b-a3b", hardware="hgx-h100", gpus=8, tp=8, ep=8,
                                                attention_dp=True, isl=8000, osl=200, concurrency=512,
                                                framework="sglang"),
    }
    out = {name: (lambda kw=kw: rackmath.serve(**kw).explain()) for name, kw in serve.items()}
    roof = {"roofline ideal": ("llama-3.1-70b", "hgx-h100", dict(batch=64)),
            "roofline calibrated (η_c(M))": ("llama-3.1-70b", "hgx-h100", dict(batch=64, efficiency="auto")),
            "roofline MoE calibrated": ("deepseek-v3", "gb200-nvl72", dict(batch=64, efficiency="auto")),
            "roofline prefill pass": ("llama-3.1-8b", "h100", dict(batch=4, context=2048, pass_len=2048)),
            "roofline gpt-oss (mixed native dtypes)": ("gpt-oss-120b", "hgx-b200", dict(batch=64, efficiency="auto"))}
    out |= {name: (lambda m=m, h=h, kw=kw: rackmath.roofline(m, h, **kw).explain()) for name, (m, h, kw) in roof.items()}
    out["serve energy block"] = lambda: rackmath.serve(**serve["serve 70B 8×H100 c=64"]).energy.explain()
    out["roofline energy block"] = lambda: rackmath.roofline("llama-3.1-70b", "hgx-h100", batch=64).energy.explain()
    out["train"] = lambda: rackmath.train("llama-3.1-70b", "hgx-h100", gpus=10000, tokens="15T").derivation
    out["plan"] = lambda: _plan()[1]
    out["plan sglang MTP"] = lambda: _plan(framework="sglang", mtp=1, model="deepseek-v3", hw="h200")[1]
    return out


def _plan(framework=None, mtp=0, model="llama-3.1-70b", hw="h100"):
    from rackmath.analyses.serving.plan import plan

    r = plan(model, hw, isl=1000, osl=1000, users=64, confirm=False, explain=True, framework=framework, mtp=mtp,
             modes=("aggregated",))
    return r, r.derivations[r.rows[0]["chip"]]


DERIVATIONS = _derivations()


@pytest.mark.parametrize("name", list(DERIVATIONS))
def test_every_line_adds_up(name):
    d = DERIVATIONS[name]()
    assert d.check() == []
    bad = []
    for s in d.steps:
        try:
            value = float(s.value)
        except (TypeError, ValueError):
            continue
        if s.substituted:
            got = working_value(s.substituted)
            if got is None or not math.isclose(got, value, rel_tol=ROUNDING, abs_tol=1e-12):
                bad.append(f"{s.symbol} = {s.substituted} = {got!r}, printed {value!r}")
        elif ARITHMETIC.search(s.formula):
            bad.append(f"{s.symbol} = {s.formula}: computed, but no working printed")
    assert bad == []


def test_plan_explain_is_the_plans_numbers():
    r, d = _plan()
    dep = r.rows[0]["deployment"]
    value = {s.symbol: float(s.value) for s in d.steps}
    assert value["TTFT"] == pytest.approx(dep["ttft_s"], rel=1e-12)
    assert value["TPOT"] == pytest.approx(dep["tpot_s"], rel=1e-12)


def test_the_issue_lines():
    """serve's t_verify (26.7 ms of listed terms against 24.8 ms printed) and roofline's t_compute (2.00 against
    2.10 ms: η_c(M) not shown) now print the operators the step model costs."""
    import rackmath

    d = rackmath.serve("llama-3.1-70b", "hgx-h100", gpus=8, isl=1000, osl=1000, concurrency=64).explain()
    s = next(s for s in d.steps if s.symbol == "t_verify")
    assert "[qkv_o]" in s.substituted and "[scheduler]" in s.substituted
    assert working_value(s.substituted) == pytest.approx(0.0248, rel=0.01)
    r = rackmath.roofline("llama-3.1-70b", "hgx-h100", batch=64, efficiency="auto")
    s = next(s for s in r.explain().steps if s.symbol == "t_compute")
    from rackmath.engine.efficiency import resolve

    eff = resolve("h100", "auto")  # the Hopper preset: η_c = 0.65, M½ = 5 (0.6029)
    eta = float(eff.eta_compute) * 64 / (64 + float(eff.gemm_half_tokens))  # η_c(M) of the weight GEMMs at M = 64
    assert f"{eta:.4g}" in s.substituted and 0.55 < eta < 0.65
    assert working_value(s.substituted) == pytest.approx(float(r.t_compute_s), rel=ROUNDING)
