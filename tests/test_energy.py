"""Energy per token, tokens per kWh, electricity share, power caps: hand-derived numbers."""

import numpy as np
import pytest

from rackmath.analyses import energy as en
from rackmath.errors import InputError
from rackmath.specs.hardware import load_chip


def test_h100_facility_power_per_chip():
    # board 0.7 × 700 W = 490 W; host (10.2 kW − 8 × 700 W)/8 = 575 W; PUE 1.2 → 1,278 W
    r = en.energy(load_chip("h100"), chips=8, step_s=0.02, tokens_per_step=8 * 1850 * 0.02)
    assert r.board_w == pytest.approx(490.0)
    assert r.host_w == pytest.approx(575.0)
    assert r.facility_w_per_chip == pytest.approx(1278.0)


def test_deepseek_day6_decode_energy():
    """DeepSeek Day-6 (Feb 2025): ~14.8k output tok/s per 8-GPU H800 node in decode = 1,850 tok/s/GPU.

    By hand: 1,278 W ÷ 1,850 tok/s = 0.691 J/token; 3.6e6/0.691 = 5.21M tokens/kWh;
    0.691 · 1e6/3.6e6 · $0.08 = $0.0154/Mtok; at $2/GPU-h a token costs 2/3600/1850 · 1e6 = $0.300/Mtok → 5.1%.
    """
    usd_per_mtok = 2.0 / 3600 / 1850 * 1e6
    r = en.energy(load_chip("h800"), chips=8, step_s=1.0, tokens_per_step=8 * 1850, usd_per_mtok=usd_per_mtok)
    assert float(r.j_per_token) == pytest.approx(0.6908, rel=1e-3)
    assert float(r.tokens_per_kwh) == pytest.approx(5.21e6, rel=2e-3)
    assert float(r.elec_usd_per_mtok) == pytest.approx(0.01535, rel=2e-3)
    assert float(r.elec_share) == pytest.approx(0.0511, rel=5e-3)


def test_energy_broadcasts_and_explains():
    steps = np.array([0.01, 0.02, 0.04])
    r = en.energy(load_chip("b200"), chips=8, step_s=steps, tokens_per_step=np.array([64, 256, 1024]))
    assert r.j_per_token.shape == (3,)
    # J/token = 8 · P · t / tokens with one P: proportional to t/tokens
    ratios = r.j_per_token / (steps / np.array([64, 256, 1024]))
    assert np.allclose(ratios, ratios[0])
    d = r.explain(1)
    step = {s.symbol: s for s in d.steps}
    assert step["$elec/Mtok"].value == pytest.approx(float(r.elec_usd_per_mtok[1]))
    assert step["E/token"].value == pytest.approx(float(r.j_per_token[1]))
    assert "TDP" in d.steps[0].substituted


def test_power_cap_cube_law():
    # H100 capped at 400 W: P_s = 0.2·700 = 140 W; f = ((400−140)/(700−140))^(1/3) = 0.4643^(1/3) = 0.7743
    assert float(en.capped_clock_fraction(400, 700)) == pytest.approx(0.7743, rel=1e-3)
    assert float(en.capped_clock_fraction(700, 700)) == 1.0
    assert float(en.capped_clock_fraction(2000, 700)) == 1.0
    assert float(en.capped_clock_fraction(100, 700)) == 0.0
    assert float(en.capped_peak_flops(989.4e12, 400, 700)) == pytest.approx(989.4e12 * 0.7743, rel=1e-3)


def test_cap_lowers_board_draw():
    r = en.energy(load_chip("h100"), chips=1, step_s=1, tokens_per_step=1, power_cap_w=300)
    assert r.board_w == 300.0 and "capped" in r.note


@pytest.mark.parametrize("kw, field", [({"pue": 0.5}, "pue"), ({"pue": float("nan")}, "pue"),
                                       ({"usd_per_kwh": -1}, "usd_per_kwh"), ({"power_cap_w": 0.0}, "power_cap")])
def test_bad_energy_inputs_name_the_field(kw, field):
    with pytest.raises(InputError) as e:
        en.energy(load_chip("h100"), chips=1, step_s=1, tokens_per_step=1, **kw)
    assert e.value.field == field


def test_every_chip_has_power():
    from rackmath.specs.hardware import chips
    for c in chips().values():
        assert c.tdp_w and 100 <= c.tdp_w <= 5000, c.name
        assert c.source("tdp_w"), c.name
