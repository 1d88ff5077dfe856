"""Energy per token, tokens per kWh, electricity share, power caps: hand-derived numbers."""

import numpy as np
import pytest

from rackmath.analyses.lecture import energy as en
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
    assert "TDP" in d.steps[0].note  # the board power's source, beside its value


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


# --- the energy flags in roofline / train / plan (cli/common.py: --pue, --usd-per-kwh, --power-cap) ---------------

def _json(*args):
    import json

    from conftest import run_cli

    code, out, err = run_cli(*args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_roofline_energy_per_token_and_share():
    # every H100 draws (490 + 575) W · 1.2 = 1,278 W at the meter; E/token = 8 · 1,278 W · t_step / batch.
    # Electricity's share of $/Mtok is the same for every configuration of a chip: both are chip-seconds, so
    # share = 1.278 kW · $0.08/kWh ÷ $2/GPU-hour = 0.10224 / 2 = 5.11%.
    d = _json("roofline", "llama-3.1-70b", "-H", "hgx-h100", "-b", "1,64")
    e = d["energy"]
    assert e["facility_w_per_chip"] == pytest.approx(1278.0)
    for i, b in enumerate((1, 64)):
        assert e["j_per_token"][i] == pytest.approx(8 * 1278.0 * d["step_s"][i] / b, rel=1e-9)
        assert e["elec_share"][i] == pytest.approx(0.05112, rel=1e-3)
    d = _json("roofline", "llama-3.1-70b", "-H", "hgx-h100", "--pue", "1.5", "--usd-per-kwh", "$0.16/kWh")
    # share doubles with the price and scales with PUE: (490 + 575) · 1.5 · 0.16 / 1000 / 2 = 12.78%
    assert d["energy"]["elec_share"] == pytest.approx(0.1278, rel=1e-3)


def test_power_cap_slows_compute_not_memory():
    # cap 400 W on a 700 W H100: clock × ((400 − 140)/(700 − 140))^(1/3) = 0.7743 (cube law, by hand)
    args = ("roofline", "llama-3.1-70b", "-H", "hgx-h100", "-b", "256", "--pass-len", "1000")
    free, capped = _json(*args), _json(*args, "--power-cap", "400 W")
    assert capped["t_compute_s"] == pytest.approx(free["t_compute_s"] / 0.7743, rel=1e-3)
    assert capped["t_weights_s"] == pytest.approx(free["t_weights_s"])
    assert capped["t_kv_s"] == pytest.approx(free["t_kv_s"])
    assert capped["energy"]["board_w"] == 400.0 and capped["energy"]["clock_fraction"] == pytest.approx(0.7743, rel=1e-3)


def test_train_energy_and_power_cap():
    # Given MFU, time ∝ 1/peak: a 400 W cap stretches the run by 1/0.7743. Energy = N · P · T with P = (700 + 575) · 1.2.
    base = ("train", "llama-3.1-70b", "-H", "hgx-h100", "-n", "1024", "-D", "15T", "--mfu", "0.4",
            "--tp", "4", "--pp", "1", "--dp", "256", "--zero", "1", "--recompute", "full")
    free, capped = _json(*base), _json(*base, "--power-cap", "400")
    assert capped["time_s"] == pytest.approx(free["time_s"] / 0.7743, rel=1e-3)
    e = free["energy"]
    assert e["facility_w_per_chip"] == pytest.approx(1530.0)
    assert e["energy_j"] == pytest.approx(1024 * 1530.0 * free["time_s"], rel=1e-9)
    assert e["j_per_token"] == pytest.approx(e["energy_j"] / 15e12, rel=1e-9)
    # electricity share of the GPU-hour cost: 1.53 kW · $0.08 / $2 = 6.12%
    assert e["elec_share"] == pytest.approx(0.0612, rel=1e-3)
    assert capped["energy"]["board_w"] == 400.0


def test_plan_deployment_energy():
    d = _json("plan", "llama-3.1-8b", "--rate", "2", "--isl", "1000", "--osl", "200", "-H", "h100", "--no-confirm",
              "--mode", "aggregated")
    dep = d["ranking"][0]["deployment"]
    # every GPU of the deployment at 1,278 W for the output tokens/s it serves at the offered load (2 · 200 = 400)
    assert dep["output_tok_s"] == pytest.approx(400.0)
    assert dep["energy"]["j_per_token"] == pytest.approx(dep["gpus"] * 1278.0 / 400.0)
    assert dep["energy"]["elec_share"] == pytest.approx(0.05112, rel=1e-3)


@pytest.mark.parametrize("args, field", [(("--power-cap", "100"), "power_cap"), (("--pue", "0.9"), "pue"),
                                         (("--usd-per-kwh", "cheap"), "usd_per_kwh"), (("--power-cap", "1 MW"),
                                                                                       "power_cap")])
def test_energy_flags_bad_input_exit_2(args, field):
    from conftest import run_cli

    code, out, err = run_cli("roofline", "llama-3.1-8b", "-H", "h100", *args)
    assert code == 2 and field in err and "Traceback" not in err


def test_wh_per_query_arithmetic():
    """docs/energy.md, validation: Wh per query = J/output token × 500 tokens ÷ 3,600 J/Wh, and its ratios to
    Google's 0.24 Wh (Aug 2025) and OpenAI's 0.34 Wh (June 2025). By hand, for 596 output tok/s per H100:
    1,278 W ÷ 596 tok/s = 2.144 J/token; × 500 = 1,072 J = 0.2978 Wh; 0.2978/0.24 = 1.241, 0.2978/0.34 = 0.876."""
    r = en.energy(load_chip("h100"), chips=1, step_s=1.0, tokens_per_step=596.0)
    assert float(r.j_per_token) == pytest.approx(2.144, rel=1e-3)
    wh = float(r.j_per_token) * 500 / 3600
    assert wh == pytest.approx(0.2978, rel=1e-3)
    assert wh / 0.24 == pytest.approx(1.241, rel=2e-3) and wh / 0.34 == pytest.approx(0.876, rel=2e-3)


def test_serve_energy_per_output_token():
    # every GPU at 1,278 W for the output tokens per GPU it emits: E = 1,278 W ÷ (output tok/s per GPU)
    d = _json("serve", "llama-3.1-8b", "-H", "hgx-h100", "-n", "1", "--isl", "1000", "--osl", "200", "-c", "16")
    assert d["energy"]["j_per_token"] == pytest.approx(1278.0 / d["output_tok_s_per_gpu"], rel=1e-9)
    assert d["energy"]["elec_share"] == pytest.approx(0.05112, rel=1e-3)
    capped = _json("serve", "llama-3.1-8b", "-H", "hgx-h100", "-n", "1", "--isl", "1000", "--osl", "200", "-c", "16",
                   "--power-cap", "300")
    # the cap reaches the serving step model through the hardware: prefill (compute) slows, the board draws ≤ cap
    assert capped["ttft_ms"] > 1.05 * d["ttft_ms"] and capped["tpot_ms"] >= d["tpot_ms"]
    assert capped["energy"]["board_w"] == 300.0


NO_POWER = """
[[chip]]
name = "nopower-x"
vendor = "test"
hbm = "80 GB"
hbm_bandwidth = "2 TB/s"
scaleup_bandwidth = "100 GB/s"
scaleout_bandwidth = "50 GB/s"
usd_per_hour = "$1/h"
default_system = "nopower-x1"
[chip.flops]
bf16 = "500 TFLOP/s"

[[system]]
name = "nopower-x1"
chip = "nopower-x"
scaleup_size = 1
"""


def test_chip_without_power_figures_gives_no_energy_not_an_error(tmp_path):
    import json

    from conftest import run_cli

    (tmp_path / "hw.toml").write_text(NO_POWER)
    code, out, err = run_cli("--catalog", str(tmp_path), "roofline", "llama-3.1-8b", "-H", "nopower-x1", "--json")
    assert code == 0, err
    assert json.loads(out)["energy"] is None
    code, out, err = run_cli("--catalog", str(tmp_path), "roofline", "llama-3.1-8b", "-H", "nopower-x1")
    assert code == 0 and "no board power" in out
    code, out, err = run_cli("--catalog", str(tmp_path), "roofline", "llama-3.1-8b", "-H", "nopower-x1",
                             "--power-cap", "300")
    assert code == 2 and "tdp_w" in err
