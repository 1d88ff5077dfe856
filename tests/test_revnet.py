"""Reversible (Feistel) layers: accounting (Korthikanti et al. 2022) and the PyTorch block (R43)."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from rackmath.analyses.lecture import revnet as rv


def test_korthikanti_per_layer():
    s, b, h, a = 2048, 4, 12288, 96
    assert rv.layer_activation_bytes(s, b, h, a, 2.0, dropout=True) == pytest.approx(s * b * h * (34 + 5 * a * s / h))
    # no dropout, fp32, 4h MLP: 16 values per token·channel + a·s² scores
    assert rv.layer_activation_bytes(s, b, h, a, 4.0) == pytest.approx(4 * (16 * s * b * h + a * s * s * b))
    assert rv.layer_activation_bytes(s, b, h, a, 2.0, flash=True) == pytest.approx(32 * s * b * h)


def test_schemes():
    A, x = 100.0, 3.0
    assert rv.stored_activation_bytes("standard", 10, A, x) == 1000
    assert rv.stored_activation_bytes("full-recompute", 10, A, x) == 30
    assert rv.stored_activation_bytes("reversible", 10, A, x, streams=2) == 6
    assert rv.peak_activation_bytes("reversible", 10, A, x, streams=2) == 106
    assert rv.training_flops_factor("reversible") / rv.training_flops_factor("standard") == pytest.approx(4 / 3)


def test_r43_claim():
    from rackmath.claims import ch7_revnet

    (c,) = ch7_revnet.claims()
    assert c.id == "R43" and c.agrees
    # FlashAttention, bf16: 80 layers × 16 values × 2 B per token·channel vs 2 streams × 2 B → 640×
    assert c.value == pytest.approx(80 * 16 * 2 / (2 * 2))


def test_cli_revnet():
    code, out, err = run_cli("revnet", "--layers", "80", "--d-model", "8192", "--heads", "64", "--json")
    assert code == 0, err
    rows = {r["scheme"]: r for r in json.loads(out)["rows"]}
    assert rows["reversible"]["stored_bytes"] == 2 * 2 * 8192 * 8192
    code, out, err = run_cli("revnet")
    assert code == 2 and err.startswith("error: model")


# ---------------------------------------------------------------- PyTorch


def _stack(L, reversible, seed=0, h=64, a=4, s=32):
    torch = pytest.importorskip("torch")
    from rackmath.revnet_torch import ReversibleStack

    torch.manual_seed(seed)
    return ReversibleStack(L, h, a, max_seq=s, reversible=reversible)


def test_reconstruction_fp32():
    torch = pytest.importorskip("torch")
    m = _stack(6, True)
    x, y = torch.randn(2, 32, 64), torch.randn(2, 32, 64)
    with torch.no_grad():
        a, c = m(x, y)
    x2, y2 = m.inverse(a, c)
    assert (x2 - x).abs().max().item() <= 1e-5
    assert (y2 - y).abs().max().item() <= 1e-5


def test_gradients_match_stored_activations():
    torch = pytest.importorskip("torch")
    grads = {}
    for rev in (False, True):
        m = _stack(4, rev, seed=1)
        torch.manual_seed(2)
        x = torch.randn(2, 32, 64, requires_grad=True)
        y = torch.randn(2, 32, 64, requires_grad=True)
        a, c = m(x, y)
        (a.pow(2).sum() + 0.5 * c.sum()).backward()
        grads[rev] = [x.grad, y.grad] + [p.grad for p in m.parameters()]
    assert len(grads[True]) == len(grads[False])
    for g_rev, g_std in zip(grads[True], grads[False]):
        torch.testing.assert_close(g_rev, g_std, rtol=1e-4, atol=1e-4)


def _saved(L, rev):
    torch = pytest.importorskip("torch")
    from rackmath.revnet_torch import saved_activation_bytes

    m = _stack(L, rev)
    x = torch.randn(2, 32, 64, requires_grad=True)
    y = torch.randn(2, 32, 64, requires_grad=True)
    _, n = saved_activation_bytes(lambda: m(x, y), list(m.parameters()))
    return n


def test_measured_memory_vs_prediction():
    pytest.importorskip("torch")
    s, b, h, a, e = 32, 2, 64, 4, 4.0
    A = rv.layer_activation_bytes(s, b, h, a, e)  # fp32, no dropout, scores stored (manual attention)
    x = rv.layer_input_bytes(s, b, h, e)
    for L in (2, 4, 8):
        std, rev = _saved(L, False), _saved(L, True)
        assert std == pytest.approx(rv.stored_activation_bytes("standard", L, A, x), rel=0.01)  # LN stats: +0.35%
        assert rev == rv.stored_activation_bytes("reversible", L, A, x, streams=2)  # exactly the 2 output streams
    assert _saved(8, False) - _saved(4, False) == pytest.approx(4 * A, rel=0.01)  # linear in depth
    assert _saved(8, True) == _saved(2, True)  # constant in depth


def test_cli_revnet_measure():
    pytest.importorskip("torch")
    code, out, err = run_cli("revnet", "--layers", "4", "--d-model", "64", "--heads", "4", "--measure", "--json")
    assert code == 0, err
    m = json.loads(out)["measured"]
    assert m["reversible_bytes"] == m["reversible_predicted"]
    assert m["standard_bytes"] == pytest.approx(m["standard_predicted"], rel=0.01)
