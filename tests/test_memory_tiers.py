"""Chapter five: cache prices and memory tiers (R39–R41). Figures from published.md §3/§3b/§4."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import run_cli
from rackmath.analyses.lecture import memory_tiers as mt
from rackmath.specs.prices import load_price_sheet

# published.md §3b typical figures, per H100 (a DGX H100 server's share is 1/8)
HBM = mt.Tier("hbm", 80e9, 3.35e12, float(mt.hbm_hold_rate(2.0, 80e9)), retrieve=False)
DDR = mt.make_tier("ddr", 2e12 / 8, 600e9 / 8, 4.0 / 35064)
FLASH = mt.make_tier("flash", 8 * 3.84e12 / 8, 50e9 / 8, 0.10 / 35064)
DISK = mt.make_tier("disk", 24e12, 0.27e9, 0.0175 / 35064)
TIERS = [HBM, DDR, FLASH, DISK]


def test_r41_drain_times():
    assert HBM.drain_s == pytest.approx(0.0239, rel=1e-2)  # H100: 80 GB / 3.35 TB/s = 23.9 ms (§3)
    assert 1.0 <= DDR.drain_s <= 10.0  # 250 GB / 75 GB/s = 3.3 s
    assert DDR.drain_s == pytest.approx(3.33, rel=1e-2)
    assert 60 <= FLASH.drain_s <= 30 * 60  # 3.84 TB / 6.25 GB/s ≈ 10 min
    assert 3600 <= DISK.drain_s <= 2 * 86400  # 24 TB / 0.27 GB/s ≈ 24.7 h: "~1 day, not 1 h" (§3b)
    assert DISK.drain_s / 3600 == pytest.approx(24.7, rel=1e-2)


def test_r41_chip_tiers_from_catalog():
    from rackmath.specs.hardware import load_chip

    tiers = {t.name: t for t in mt.tiers_for(load_chip("h100"))}
    assert tiers["hbm"].drain_s == pytest.approx(0.0239, rel=2e-2)
    assert tiers["hbm"].retrieve is False
    for n in ("ddr", "flash", "disk"):
        assert n in tiers and tiers[n].rate > 0
    assert tiers["ddr"].drain_s < tiers["flash"].drain_s < tiers["disk"].drain_s


def test_r41_ttl_to_tier():
    # one at a time: 5 min and 1 h are both nearest flash (10 min) — disk drains in a day
    assert mt.tier_for_ttl(300, TIERS).name == "flash"
    assert mt.tier_for_ttl(3600, TIERS).name == "flash"
    # as two distinct tiers, longer TTL slower: flash and disk (the lecture's answer)
    assert [t.name for t in mt.assign_ttls([300, 3600], TIERS)] == ["flash", "disk"]
    # the lecture's own guesses (flash ~1 min, disk ~1 h) give the same pairing
    lect = [mt.make_tier("ddr", 1, 0.2, 1e-4), mt.make_tier("flash", 60, 1, 1e-5), mt.make_tier("disk", 3600, 1, 1e-6)]
    assert [t.name for t in mt.assign_ttls([300, 3600], lect)] == ["flash", "disk"]
    assert mt.stripe_factor(3600, DISK.drain_s) == pytest.approx(24.7, rel=1e-2)


def test_hold_and_retrieve_balance():
    # hold cost = retrieve cost exactly when t_hold = drain time (t_retrieve = t_hold × fraction of capacity)
    b = 1667.0
    assert mt.hold_cost(b, FLASH.drain_s, FLASH.rate) == pytest.approx(mt.retrieve_cost(b, FLASH.drain_s, FLASH.rate))
    assert mt.balanced_hold_time(FLASH.drain_s) == FLASH.drain_s
    # HBM at $2/h over 80 GB = $0.025/GB-h; 1 KB held one hour = 2.5e-8 $
    assert HBM.usd_per_gb_hour == pytest.approx(0.025)
    assert mt.cost_per_token_hour(1000, HBM.rate) == pytest.approx(2.5e-8)
    # break-even between tiers: u_f (t + d_f) = u_s (t + d_s)
    t = mt.break_even_hold(DDR.rate, DDR.drain_s, FLASH.rate, FLASH.drain_s)
    assert DDR.cost(b, t) == pytest.approx(FLASH.cost(b, t))
    # remat: 2·100e9 / 989.4e12 s at $2/h = 1.123e-7 $/token
    r = mt.remat_cost(100e9, 989.4e12, 2.0)
    assert r == pytest.approx(2 * 100e9 / 989.4e12 * 2 / 3600)
    t_r = mt.remat_break_even_hold(r, b, HBM.rate, 0.0)
    assert HBM.cost(b, t_r) == pytest.approx(r)


def test_cheapest_vectorized():
    names, costs = mt.cheapest(1667.0, np.array([1e-4, 300.0, 1e6]), TIERS)
    assert list(names) == ["hbm", "flash", "disk"]
    assert costs.shape == (3,)


def test_r40_opus_premiums():
    opus = load_price_sheet("claude-opus-4.6")
    assert opus.input * 1e6 == pytest.approx(5.0) and opus.cache_write_5m * 1e6 == pytest.approx(6.25)
    # ($6.25 − $5)/Mtok over 5 min = $15/Mtok-hour; ($10 − $5) over 1 h = $5/Mtok-hour
    assert mt.write_premium_rate(opus.cache_write_5m, opus.input, 300) * 3600 * 1e6 == pytest.approx(15.0)
    assert mt.write_premium_rate(opus.cache_write_1h, opus.input, 3600) * 3600 * 1e6 == pytest.approx(5.0)
    # at 100 KB/token, $15/Mtok-h = $0.15/GB-h
    assert mt.implied_usd_per_gb_hour(15e-6 / 3600, 1e5) == pytest.approx(0.15)
    ded = mt.deduce_cache(opus, TIERS, bytes_per_token=1667)
    assert ded.read_fraction == pytest.approx(0.1)  # R39
    assert ded.premiums["5m"]["tier_distinct"] == "flash" and ded.premiums["1h"]["tier_distinct"] == "disk"


def test_cli_cache():
    code, out, err = run_cli("cache", "claude-opus-4.6", "--json", "--explain")
    assert code == 0, err
    d = json.loads(out)
    assert d["premiums"]["5m"]["per_token_hour"] * 1e6 == pytest.approx(15.0)
    assert d["derivations"]
    code, out, err = run_cli("cache", "opus", "--tier", "disk=24TB,6.75GB/s,0.0000005", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["premiums"]["1h"]["distinct_drain_s"] == pytest.approx(3555.6, rel=1e-3)


@pytest.mark.parametrize("args", [("cache", "--kv-bytes", "lots"), ("cache", "--tier", "flash=3TB"),
                                  ("cache", "--hardware", "h1000"), ("cache", "--tier", "x=1TB,1GB/s,-1")])
def test_cli_cache_bad_input(args):
    code, out, err = run_cli(*args)
    assert code == 2 and err.startswith("error:") and len(err.strip().splitlines()) == 1
