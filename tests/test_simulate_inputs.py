"""The simulator's typed inputs (issue 33, item 4): ``run(model, hardware, Workload, Traffic, Deployment, Layout,
stack, efficiency)`` is what the flat ``simulate(...)`` and the CLI build; the stack's scheduler defaults come from
the one stack resolver (``serve.load_stack``)."""

from __future__ import annotations

import numpy as np
import pytest

from rackmath.analyses.serving.serve import Layout, Workload, load_stack
from rackmath.analyses.serving.simulate import Deployment, Traffic, framework_defaults, run, simulate
from rackmath.errors import InputError


def test_typed_call_is_the_flat_call():
    """The same deployment given as typed inputs (a Stack object, a Layout) and as flat keywords: every number of
    the summary and every request's times agree exactly."""
    flat = simulate("llama-3.1-8b", "h100", gpus=2, tp=1, rate=12.0, requests=800, isl="lognormal:800:0.5",
                    osl="exp:150", framework="vllm", seed=5, ttft_slo=0.5, tpot_slo=0.05, max_batch=128)
    typed = run("llama-3.1-8b", "h100", Workload(isl="lognormal:800:0.5", osl="exp:150", concurrency=None,
                                                     arrivals="poisson"),
                Traffic(rate=12.0, requests=800, seed=5, ttft_slo=0.5, tpot_slo=0.05),
                Deployment(gpus=2, max_batch=128), Layout(gpus=2, tp=1), load_stack("vllm"))
    assert typed.summary == flat.summary
    for k in ("arrival_s", "first_token_s", "finish_s", "ttft_s", "tpot_s", "e2e_s"):
        np.testing.assert_array_equal(getattr(typed, k), getattr(flat, k))
    # a Stack object is labelled by its version, a name as typed
    assert flat.config["framework"] == "vllm" and typed.config["framework"] == load_stack("vllm").version_label
    assert typed.config["layout"]["label"] == flat.config["layout"]["label"] == "TP1"


def test_layout_attention_dp_means_what_serve_means():
    """Layout(attention_dp=True) with the default group count 0 is attention DP over the TP GPUs (serve's
    convention); given flat, attention_dp_size=0 is refused, naming the option."""
    kw = dict(concurrency=None, arrivals="poisson")
    lay = run("deepseek-v3", "hgx-h200", Workload(isl=1000, osl=100, **kw), Traffic(rate=2.0, requests=50),
              Deployment(gpus=8), Layout(gpus=8, tp=8, ep=8, attention_dp=True), "sglang").config["layout"]
    assert lay["attention_dp"] and lay["attention_dp_size"] == 0 and lay["tp"] == 8
    with pytest.raises(InputError) as e:
        simulate("deepseek-v3", "hgx-h200", gpus=8, tp=8, attention_dp_size=0, rate=2.0, requests=50)
    assert e.value.field == "attention_dp_size" and "divisor of tp: 1, 2, 4, 8" in str(e.value)


@pytest.mark.parametrize("name, expected", [
    (None, (256, 8192, "generic")),  # the generic stack: vLLM's max_num_seqs, the common 8,192-token budget
    ("vllm", (1024, 8192, "vllm")), ("atom", (1024, 8192, "vllm")),  # ATOM runs vLLM V1's scheduler
    ("sglang@0.5.6", (2048, 8192, "sglang")), ("dynamo-sglang", (2048, 8192, "sglang")),
    ("trt", (2048, 8192, "trtllm")), ("TensorRT-LLM", (2048, 8192, "trtllm")), ("vllm-v0", (256, 32768, "vllm-v0")),
])
def test_scheduler_defaults_resolve_like_serve(name, expected):
    """Every name ``serve --framework`` takes gives simulate its stack's max running sequences and step budget
    (serve.STACKS: vLLM V1 max_num_seqs 1,024; SGLang / TensorRT-LLM 2,048; vLLM V0 256 and 32,768 tokens)."""
    d = framework_defaults(name)
    assert (d["max_batch"], d["budget"], d["name"]) == expected
    with pytest.raises(InputError) as e:
        framework_defaults("nonesuch")
    assert e.value.field == "framework"
