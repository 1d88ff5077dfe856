"""serve's typed call — serve(model, hardware, workload, layout, stack, efficiency) — against its flat keyword form.

The flat form only builds the objects (``analyses.serving.inputs.from_flat``), so the two give the same result to
the last bit; the figures are the goldens' (tests/golden/serve_llama70b_h100_c64.json: TTFT 124.1 ms, TPOT 27.18 ms,
293.3 output tok/s per GPU for Llama-3.1-70B on 8 × H100, ISL/OSL 1000/1000, 64 in flight).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import rackmath
from rackmath.analyses.serving import serve as serving
from rackmath.analyses.serving.inputs import Layout, Workload, load_stack
from rackmath.errors import InputError
from rackmath.specs.hardware import priced


def _same(a, b):
    assert a.as_dict() == b.as_dict()
    assert a.explain().render() == b.explain().render()


def test_typed_equals_flat_llama70b_h100():
    flat = serving.serve("llama-3.1-70b", "hgx-h100", gpus=8, isl=1000, osl=1000, concurrency=64)
    typed = serving.serve("llama-3.1-70b", "hgx-h100", Workload(isl=1000, osl=1000, concurrency=64), Layout(gpus=8))
    _same(flat, typed)
    d = typed.as_dict()
    assert d["ttft_ms"] == pytest.approx(124.1, abs=0.05)  # the golden's 124.068 ms
    assert d["tpot_ms"] == pytest.approx(27.18, abs=0.005)
    assert d["layout"]["label"] == "TP8 ×1" and d["layout_chosen"]


def test_typed_equals_flat_every_object():
    """Speculation, a versioned stack with the budget, --eager and dtypes, a price: each flag has its field."""
    flat = serving.serve("deepseek-v3", "hgx-h200", gpus=8, isl=1000, osl=1000, concurrency=np.array([16, 64]),
                         tp=8, ep=8, attention_dp=True, mtp=1, acceptance=1.7, cached_share=0.2, arrivals="poisson",
                         framework="sglang", max_num_tokens=4096, kv_dtype="fp8", usd_per_gpu_hour=3.5,
                         efficiency="auto")
    stack = replace(load_stack("sglang"), max_num_tokens=4096, kv_dtype="fp8")
    typed = serving.serve("deepseek-v3", priced("hgx-h200", 3.5),
                          Workload(1000, 1000, np.array([16, 64]), mtp=1, acceptance=1.7, cached_share=0.2,
                                   arrivals="poisson"),
                          Layout(gpus=8, tp=8, ep=8, attention_dp=True), stack, "auto")
    _same(flat, typed)
    assert typed.usd_per_gpu_hour == 3.5 and typed.kv_dtype == "fp8" and typed.mtp == 1
    with pytest.raises(InputError, match="^attention_dp_size: 0 is not a positive integer"):  # as before the split
        serving.serve("deepseek-v3", "hgx-h200", isl=1000, osl=1000, concurrency=16, attention_dp_size=0)


def test_typed_equals_flat_disaggregated():
    flat = serving.serve("llama-3.1-70b", "hgx-h100", gpus=16, prefill_gpus=8, decode_gpus=8, isl=4000, osl=500,
                         concurrency=128, tp=8, prefill_tp=4)
    typed = serving.serve("llama-3.1-70b", "hgx-h100", Workload(4000, 500, 128),
                          Layout(gpus=8, tp=8, prefill=Layout(gpus=8, tp=4)))
    _same(flat, typed)
    assert typed.mode == "disaggregated" and typed.gpus == 16 and typed.prefill["layout"]["tp"] == 4


def test_public_api_takes_the_objects():
    """rackmath.serve (strings parsed, energy attached) takes the objects too; rackmath.Workload is the class."""
    a = rackmath.serve("llama-3.1-70b", "h100", isl="1K", osl="1K", concurrency=64, tp=8, framework="vllm")
    b = rackmath.serve("llama-3.1-70b", "h100", rackmath.Workload(1000, 1000, 64), rackmath.Layout(tp=8), "vllm")
    assert a.as_dict() == b.as_dict()
    assert a.energy.j_per_token == b.energy.j_per_token
    with pytest.raises(InputError, match="^concurrency: "):  # whole in the API, as the keyword is
        rackmath.serve("llama-3.1-70b", "h100", rackmath.Workload(1000, 1000, 2.5))


@pytest.mark.parametrize("kw, field", [
    (dict(isl=-5), "isl"), (dict(osl=0), "osl"), (dict(concurrency=0.5), "concurrency"), (dict(mtp=17), "mtp"),
    (dict(acceptance=1.5), "acceptance"), (dict(mtp=1, acceptance=3), "acceptance"),
    (dict(cached_share=1.0), "cached_share"), (dict(arrivals="bursty"), "arrivals"),
    (dict(isl=np.array([1, 2])), "isl"),
])
def test_bad_workload_field_is_one_line_naming_it(kw, field):
    w = Workload(**{**dict(isl=1000, osl=1000, concurrency=64), **kw})  # built as given: serve checks it
    for call in (w.checked, lambda: serving.serve("llama-3.1-8b", "h100", w)):
        with pytest.raises(InputError) as e:
            call()
        assert e.value.field == field and str(e.value).startswith(field + ": ") and "\n" not in str(e.value)


@pytest.mark.parametrize("kw, field", [(dict(tp=0), "tp"), (dict(ep=2.5), "ep"), (dict(pp=-1), "pp"),
                                       (dict(gpus=7.5), "gpus"), (dict(redundant_experts=-1), "redundant_experts"),
                                       (dict(gpus=8, prefill=Layout(tp=4)), "prefill_gpus")])
def test_bad_layout_field_is_one_line_naming_it(kw, field):
    with pytest.raises(InputError) as e:
        serving.serve("llama-3.1-8b", "h100", Workload(100, 100, 1), Layout(**kw))
    assert e.value.field == field and "\n" not in str(e.value)


def test_flat_and_objects_not_both():
    with pytest.raises(InputError, match="^workload: given with isl="):
        serving.serve("llama-3.1-8b", "h100", Workload(100, 100, 1), isl=200)
    with pytest.raises(InputError, match="^stack: given with max_num_tokens="):
        serving.serve("llama-3.1-8b", "h100", Workload(100, 100, 1), stack="vllm", max_num_tokens=2048)
    with pytest.raises(TypeError, match="'isll'"):
        serving.serve("llama-3.1-8b", "h100", isll=100, osl=100, concurrency=1)


def test_stack_and_price_checked_on_the_typed_path():
    w = Workload(100, 100, 1)
    with pytest.raises(InputError, match="^max_num_tokens: "):
        serving.serve("llama-3.1-8b", "h100", w, stack=replace(load_stack("vllm"), max_num_tokens=0))
    with pytest.raises(InputError, match="^usd_per_gpu_hour: "):
        serving.serve("llama-3.1-8b", priced("h100", 1e5), w)
    with pytest.raises(InputError, match="^arrivals: waves with separate prefill and decode pools"):
        serving.serve("llama-3.1-70b", "h100", Workload(100, 100, 1, arrivals="waves"),
                      Layout(gpus=8, prefill=Layout(gpus=8)))
