"""The lifetime split (R30–R34): the lecture's arithmetic and the cost optimum past the heuristic."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import run_cli
from rackmath.analyses.lecture import lifetime as lt
from rackmath.analyses.lecture import scaling as sc
from rackmath.errors import InputError


def test_r32_traffic_arithmetic():
    fleet = lt.inference_tokens(500e6, lt.TWO_MONTHS_S)
    assert fleet == pytest.approx(2.6e15, rel=0.02)  # Dwarkesh's calculator: 2.6 × 10^15
    per_model = lt.inference_tokens(500e6, lt.TWO_MONTHS_S, 10)
    assert per_model == pytest.approx(2.63e14, rel=0.01)  # 50M tok/s × 5.26e6 s
    assert 200e12 / 1.5 <= per_model <= 200e12 * 1.5  # lecture: "around two hundred trillion"


def test_equal_split_costs_are_equal():
    N, D_inf = 100e9, 2.63e14
    D_pre, D_rl = lt.split_tokens(D_inf)
    c = [lt.pretrain_cost(N, D_pre), lt.rl_cost(N, D_rl), lt.inference_cost(N, D_inf)]
    np.testing.assert_allclose(c, c[0])
    assert D_pre / D_inf == pytest.approx(1 / (3 * 0.3))  # R31: ≈ 1
    assert D_pre / D_rl == pytest.approx(3 / (6 * 0.3))  # R31: ≈ 1.5


def test_user_split():
    D_pre, D_rl = lt.split_tokens(1e14, (0.5, 0.0, 0.5), eta_dec=0.5)
    assert D_rl == 0 and lt.pretrain_cost(1, D_pre) == pytest.approx(lt.inference_cost(1, 1e14, 0.5))
    with pytest.raises(InputError):
        lt.split_tokens(1e14, (0.5, 0.5, 0.5))


def test_r34_overtraining():
    r = lt.overtrain()
    assert r.D_chinchilla == 2e12
    assert r.overtrain == pytest.approx(2.63e14 / (3 * 0.3) / 2e12, rel=0.01)  # 146×
    assert 50 <= r.overtrain <= 200  # lecture: ~100×


def test_optimum_against_brute_force():
    r = lt.overtrain()
    o = r.optimum
    law = sc.LOSS_LAWS["chinchilla"]
    N = np.geomspace(o["N_min"] * 1.0001, o["N_min"] * 100, 200001)
    D = sc.iso_loss_tokens(N, o["loss"])
    cost = 6 * N * D + o["K"] * N
    i = np.argmin(cost)
    assert o["N_opt"] == pytest.approx(N[i], rel=1e-3)
    assert o["cost_opt"] == pytest.approx(cost[i], rel=1e-6)
    assert o["cost_opt"] <= o["cost_heuristic"]
    # first-order condition: serving/pretraining = αX/(βY) − 1 at the optimum
    X = law.A / o["N_opt"] ** law.alpha
    Y = law.B / o["D_opt"] ** law.beta
    assert o["serve_to_pretrain_at_opt"] == pytest.approx(law.alpha * X / (law.beta * Y) - 1, rel=1e-6)
    # the heuristic is close to optimal: within 2% of the minimum cost, N and D within 25%
    assert 1.0 <= o["cost_ratio"] < 1.02
    assert 0.75 < o["N_ratio"] < 1.25 and 0.75 < o["D_ratio"] < 1.25


def test_equal_cost_point_two_way():
    L, K = 1.9, 1e15
    N, D = lt.equal_cost_point(L, K)
    assert 6 * N * D == pytest.approx(K * N)
    assert sc.chinchilla_loss(N, D) == pytest.approx(L)
    No, Do = lt.lifetime_optimum(L, K)
    assert lt.lifetime_cost(No, Do, K) <= lt.lifetime_cost(N, D, K)


def test_unreachable_loss():
    with pytest.raises(InputError):
        lt.lifetime_optimum(1.5, 1e15)


def test_cli_overtrain():
    code, out, err = run_cli("overtrain", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["D_inf_fleet"] == pytest.approx(2.63e15, rel=0.01)
    code, out, err = run_cli("overtrain", "--explain")
    assert code == 0 and "D_fleet = rate · lifetime" in out
    code, out, err = run_cli("overtrain", "--traffic", "fast")
    assert code == 2 and err.startswith("error: traffic")
    code, out, err = run_cli("overtrain", "--eta-dec", "2")
    assert code == 2 and "eta-dec" in err


def test_claims_r30_to_r34():
    from rackmath.claims import ch4_overtraining

    cs = {c.id: c for c in ch4_overtraining.claims()}
    for cid in ("R30", "R31", "R32", "R32-b", "R34", "R14"):
        assert cs[cid].agrees, cid
    # R33: equal costs give D_pre = 263T / (3 · 0.3) = 292T, ~2× the rumoured 150T: outside 'similar' (×/÷1.5)
    assert cs["R33"].value == pytest.approx(263e12 / 0.9, rel=0.01) and not cs["R33"].agrees and cs["R33"].reason
    assert "UNVERIFIED" in cs["R14"].note
