"""Chapter five: price sheets and their inversions (R35–R38). Numbers are published prices or lecture arithmetic."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import run_cli
from rackmath.analyses.lecture import pricing as pr
from rackmath.errors import CatalogError, UnknownNameError
from rackmath.specs import catalog
from rackmath.specs.prices import load_price_sheet, price_sheets


def test_published_sheets_match_published_md():
    opus = load_price_sheet("claude-opus-4.6")
    assert opus.input == pytest.approx(5e-6) and opus.output == pytest.approx(25e-6)  # A1
    assert opus.cache_read == pytest.approx(0.5e-6)
    assert opus.cache_write_5m == pytest.approx(6.25e-6) and opus.cache_write_1h == pytest.approx(10e-6)
    assert opus.fast_mode.input == pytest.approx(30e-6) and opus.fast_mode.output == pytest.approx(150e-6)  # A3
    assert opus.fast_mode.speed_multiple == 2.5
    assert opus.price("output", 3e5, fast=True) == pytest.approx(225e-6)  # >200K fast-mode variant
    g = load_price_sheet("gemini-3.1-pro")  # A5
    assert g.price("output", [1e5, 2e5, 2.5e5]) == pytest.approx([12e-6, 12e-6, 18e-6])
    assert g.price("input", 3e5) == pytest.approx(4e-6)
    assert g.step("output") == (200e3, pytest.approx(1.5))
    assert load_price_sheet("gemini-2.5-pro").step("input") == (200e3, pytest.approx(2.0))  # A4
    ds = load_price_sheet("deepseek-v3.2")  # A11
    assert (ds.input, ds.cache_read, ds.output) == (pytest.approx(0.28e-6), pytest.approx(0.028e-6),
                                                    pytest.approx(0.42e-6))
    assert load_price_sheet("gpt-5.1").output / load_price_sheet("gpt-5.1").input == pytest.approx(8.0)  # A7
    assert load_price_sheet("haiku").cache_write_1h == pytest.approx(2e-6)  # A2
    for s in price_sheets().values():
        assert s.source and s.date and s.status in "VSDM"


def test_prices_against_shared_reference(shared):
    text = (shared / "reference" / "published.md").read_text()
    assert "**$5**" in text and "5-min $6.25" in text and "**$12 / $18**" in text


def test_unknown_sheet_suggests():
    with pytest.raises(UnknownNameError) as e:
        load_price_sheet("gemini-3.1-pr")
    assert "gemini-3.1-pro" in str(e.value)


def test_user_sheet_and_malformed_sheet(tmp_path):
    d = tmp_path / "cat"
    d.mkdir()
    (d / "mine.toml").write_text(
        '[[price_sheet]]\nname = "my-model"\nprovider = "Me"\nmodel = "M"\ndate = "2026-05"\nsource = "me"\n'
        'status = "M"\ninput = 1.0\noutput = 4.0\n[[price_sheet.tiers]]\nabove = "128K"\noutput = 8.0\n')
    try:
        catalog.add_catalog_dir(d)
        s = load_price_sheet("my-model")
        assert s.step("output") == (128e3, pytest.approx(2.0))
        (d / "bad.toml").write_text('[[price_sheet]]\nname = "bad"\nprovider = "x"\nmodel = "x"\ndate = "x"\n'
                                    'source = "x"\ninput = "five"\noutput = 1.0\n')
        catalog.clear_caches()
        with pytest.raises(CatalogError) as e:  # the bad sheet, by name; the good one still loads
            load_price_sheet("bad")
        assert "bad.toml" in str(e.value) and "price_sheet.input" in str(e.value)
        assert load_price_sheet("my-model").output == pytest.approx(4e-6)  # $4 per million tokens, per token
    finally:
        catalog._user_dirs.clear()
        catalog.clear_caches()


def test_r36_bytes_per_token_lecture_arithmetic():
    # (1/300) · 100e9 / 200e3 = 1666.7 B (lecture 01:40)
    assert pr.kv_bytes_per_token_at_crossover(100e9, 200e3, 300.0) == pytest.approx(1666.67, rel=1e-4)
    # 16-bit weights: 2 bytes per parameter double it
    assert pr.kv_bytes_per_token_at_crossover(100e9, 200e3, 300.0, 2.0) == pytest.approx(3333.3, rel=1e-4)
    # H100 raw numbers (published.md H1): 2·100e9·3.35e12/(1978.9e12·200e3) = 1692.8 B at the fp8 peak
    assert pr.kv_bytes_per_token_from_hardware(100e9, 200e3, 1978.9e12, 3.35e12) == pytest.approx(1692.9, rel=1e-3)
    assert pr.crossover_context(100e9, 1666.67, 300.0) == pytest.approx(200e3, rel=1e-4)


def test_gemini_step_maps_to_200k_crossover():
    g = load_price_sheet("gemini-3.1-pro")
    boundary, step = g.step("output")
    ded = pr.deduce_from_step(boundary, step)
    assert ded.crossover == pytest.approx(200e3)
    assert ded.kv_bytes_per_token == pytest.approx(1666.7, rel=1e-3)
    assert ded.covered_context == pytest.approx(300e3)  # 1.5 × 200K
    # covered-context rule: a 1.5× tier covering 300K puts L* at 200K; covering 1M would put it at 667K
    assert pr.crossover_from_price_step(200e3, 1.5, 300e3) == pytest.approx(200e3)
    assert pr.crossover_from_price_step(200e3, 1.5, 1e6) == pytest.approx(666_667, rel=1e-5)
    assert "1,667" in ded.derivation.render() or "1.67 kB" in ded.derivation.render()


def test_r37_architectures():
    # 1 shared KV layer × 2 × d_head 128 × 8 KV heads × 1 B (fp8) = 2048 B ≈ 2 KB
    assert pr.kv_bytes_per_token_arch(1, 8, 128, 1) == 2048
    # Llama 3 70B (published.md C7d): 80 layers × 2 × 128 × 8 × 2 B = 327,680 B
    assert pr.kv_bytes_per_token_arch(80, 8, 128, 2) == 327_680
    # DeepSeek MLA (C1d): 61 × 576 × 2 B = 70,272 B; top-2048 of 200K reads 1.024% of it
    assert pr.sparse_kv_read_bytes_per_token(70_272, 200e3, 2048) == pytest.approx(719.6, rel=1e-3)
    c = pr.architectures_for(1667.0)
    first = c[0]
    assert (first.kind, first.n_kv_layers, first.n_kv_heads, first.d_head, first.kv_dtype) == ("dense", 1, 8, 128, "fp8")
    assert all(1667 / 1.5 <= x.bytes_per_token <= 1667 * 1.5 for x in c if x.kind == "dense")


def test_r38_output_input():
    # ρ = B*/B + L/L*; B* = 300 for a dense model at ratio 300. ρ = 5, L → 0 gives B = 60.
    assert pr.batch_from_price_ratio(5.0, 0.0, n_total=100e9, n_active=100e9, kv_bytes_per_token=1667) == \
        pytest.approx(60.0)
    assert pr.decode_mfu_from_price_ratio(5.0) == pytest.approx(0.2)
    # at L = L* the KV alone is 1× compute: B = 300 / (5 − 1) = 75
    assert pr.batch_from_price_ratio(5.0, 200e3, n_total=100e9, n_active=100e9,
                                     kv_bytes_per_token=1666.667) == pytest.approx(75.0, rel=1e-4)
    # pass length: decode at B = 60 is 5× compute; a 2048-token prefill pass is compute-bound
    c = pr.cost_per_token_vs_pass(np.array([1, 5, 2048]), batch=60, context=0, n_total=100e9, n_active=100e9,
                                  kv_bytes_per_token=1667)
    assert c == pytest.approx([5.0, 1.0, 1.0])


def test_fast_mode_reuses_foundation():
    pytest.importorskip("rackmath.analyses.lecture.batching")
    from rackmath.specs.hardware import load_hardware
    from rackmath.specs.models import load_model

    from rackmath.analyses.lecture import batching as ba

    ans = pr.fast_mode_for(load_price_sheet("opus"), load_model("frontier-100b"), load_hardware("gb200-nvl72"))
    by_speed, by_price = ans.by_speed, ans.by_price
    assert by_speed.speedup == pytest.approx(2.5)
    assert by_price.cost_multiple == pytest.approx(6.0)  # the sheet's 150/25
    assert by_price.batch < by_price.operating_batch
    # the same function and default operating point as `batching fast-mode` (2.5 × B*, capped by memory)
    same = ba.fast_mode("frontier-100b", "gb200-nvl72", speedup=2.5, price=6.0)
    assert same.by_price.speedup == by_price.speedup and same.assumption == ans.assumption
    assert ans.operating.batch == pytest.approx(ba.FAST_OPERATING_MULTIPLE * ans.operating.balance_batch)


def test_cli_price():
    code, out, err = run_cli("price", "gemini-3.1-pro", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["step"]["kv_bytes_per_token"] == pytest.approx(1666.7, rel=1e-3)
    assert d["out_in"]["price_ratio"] == pytest.approx(6.0)
    code, out, err = run_cli("price", "--boundary", "200K", "--step", "1.5", "--n-active", "50B", "--explain")
    assert code == 0 and "833" in out
    code, out, err = run_cli("price", "--list", "--json")
    assert code == 0 and "claude-opus-4.6" in [x["name"] for x in json.loads(out)]


@pytest.mark.parametrize("args", [("price", "no-such-sheet"), ("price", "--boundary", "200K"),
                                  ("price", "--out-in", "-5"), ("price", "--ratio", "abc", "--out-in", "5"),
                                  ("price",)])
def test_cli_price_bad_input(args):
    code, out, err = run_cli(*args)
    assert code == 2
    assert err.startswith("error:") and len(err.strip().splitlines()) == 1


def test_cli_bad_catalog_sheet(tmp_path):
    (tmp_path / "bad.toml").write_text('[[price_sheet]]\nname = "x"\nprovider = "x"\nmodel = "x"\ndate = "x"\n'
                                       'source = "x"\ninput = 1\n')
    code, out, err = run_cli("--catalog", str(tmp_path), "price", "x")
    assert code == 2 and "bad.toml" in err and "price_sheet.output" in err and len(err.strip().splitlines()) == 1
