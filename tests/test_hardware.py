"""Hardware catalog: figures checked against published.md §3 and the lecture (R5, R10, R19, R21)."""

from __future__ import annotations

import json
import re
import textwrap

import pytest

import rackmath
from rackmath.errors import CatalogError, UnknownNameError
from rackmath.specs import catalog
from rackmath.specs.hardware import chips, hardware_ratio, load_chip, load_hardware, systems

from conftest import run_cli

CHIPS = ["h100", "h800", "h200", "b200", "gb200", "gb300", "rubin", "mi300x", "mi325x", "mi355x",
         "tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e", "tpu-v7"]
SYSTEMS = ["hgx-h100", "hgx-h800", "hgx-h200", "hgx-b200", "gb200-nvl72", "gb300-nvl72", "vr-nvl72",
           "rubin-ultra-nvl576", "mi300x-8", "mi325x-8", "mi355x-8", "tpu-v4-pod", "tpu-v5e-pod", "tpu-v5p-pod",
           "tpu-v7-pod"]


@pytest.fixture(autouse=True)
def _fresh_catalog():
    catalog._user_dirs.clear()
    catalog.clear_caches()
    yield
    catalog._user_dirs.clear()
    catalog.clear_caches()


# --- the lecture's hardware ratio and drain time, against published.md §3 "Derived hardware ratios" ---------------

@pytest.mark.parametrize("chip, dtype, expected", [
    ("h100", "bf16", 295),     # (989.4e12/2) / (3.35e12/2)
    ("h100", "fp8", 295),
    ("h200", "bf16", 206),
    ("b200", "fp4", 281),      # (9e15/2) / (8e12/0.5)
    ("gb300", "fp4", 469),
    ("tpu-v5e", "bf16", 243),  # (197e12/2) / (8.1e11/2); scaling book SB3: 240
    ("tpu-v7", "fp8", 313),
    ("mi355x", "fp4", 312),
])
def test_hardware_ratio_matches_published(chip, dtype, expected):
    assert hardware_ratio(load_chip(chip), dtype) == pytest.approx(expected, rel=0.03)


def test_hardware_ratio_is_about_300_on_most_chips():
    """R5: 'on most GPUs this ends up ~300' (A100 -> H100 -> B100), at the chip's narrowest multiply dtype."""
    for name in ("h100", "b200", "gb200", "mi355x", "tpu-v7", "rubin"):
        c = load_chip(name)
        low = min(c.flops, key=rackmath.units.dtype_bytes)
        assert 200 < hardware_ratio(c, low) < 400, name


@pytest.mark.parametrize("chip, ms", [
    ("h100", 23.9), ("h200", 29.4), ("b200", 22.5), ("gb200", 23.3), ("gb300", 36.0),
    ("rubin", 14.4),          # R10: Reiner's 288 GB / 20 TB/s ("about 15 ms")
    ("tpu-v5e", 19.8),        # scaling book SB4: 19 ms
    ("tpu-v5p", 34.3), ("tpu-v6e", 20.0), ("tpu-v7", 26.0), ("mi300x", 36.0), ("mi355x", 36.0),
])
def test_drain_time_matches_published(chip, ms):
    assert load_chip(chip).drain_time_s * 1e3 == pytest.approx(ms, rel=0.02)


def test_drain_time_is_tens_of_ms_everywhere():
    """R10: ~20 ms on many HBM generations (GDDR cards hold more per unit of bandwidth: L40S 48 GB / 864 GB/s)."""
    hbm = [c for c in chips().values() if c.memory_kind == "HBM"]
    assert len(hbm) >= 25
    for c in hbm:
        assert 0.010 < c.drain_time_s < 0.045, c.name
    assert load_chip("l40s").drain_time_s == pytest.approx(48e9 / 864e9)


def test_published_ratio_list_agrees(shared):
    """Read the [D] ratios straight from published.md and compare."""
    text = (shared / "reference" / "published.md").read_text()
    ratios = re.search(r"\"Param-units\" ratio.*?\n(.*?)\n", text, re.S).group(1)
    pairs = {"H100 BF16": ("h100", "bf16"), "TPU v5e BF16": ("tpu-v5e", "bf16"),
             "Ironwood FP8": ("tpu-v7", "fp8"), "MI355X FP4": ("mi355x", "fp4")}
    for label, (chip, dtype) in pairs.items():
        published = float(re.search(re.escape(label) + r" \**(\d+)", ratios).group(1))
        assert hardware_ratio(load_chip(chip), dtype) == pytest.approx(published, rel=0.03), label
    assert "989.4 TF" in text and "3.35 TB/s" in text  # H1 row as used for h100


# --- dense, not sparse -------------------------------------------------------------------------------------------

def test_h100_is_dense():
    h100 = load_chip("h100")
    assert h100.flops["bf16"] == pytest.approx(989.4e12, rel=2e-3)   # not the 1,979 sparse headline
    assert h100.flops["fp8"] == pytest.approx(1978.9e12, rel=2e-3)


def test_gb200_rack_dense_peaks():
    """H5: GB200 NVL72 is 180 PF BF16 / 720 PF FP4 dense (360 / 1,440 sparse)."""
    s = load_hardware("gb200-nvl72")
    assert s.peak_flops("bf16") == pytest.approx(180e15, rel=0.01)
    assert s.peak_flops("fp4") == pytest.approx(720e15, rel=0.01)


def test_fp4_falls_back_to_fp8_on_hopper():
    h100 = load_chip("h100")
    assert h100.compute_dtype("fp4") == "fp8"
    assert h100.peak_flops("nvfp4") == h100.flops["fp8"]
    assert load_chip("tpu-v5e").peak_flops("int8") == pytest.approx(394e12)
    assert load_chip("tpu-v5e").peak_flops("fp8") == pytest.approx(197e12)  # no fp8 on v5e -> bf16


# --- systems: capacity, bandwidth, scale-up vs scale-out ----------------------------------------------------------

def test_hopper_box_holds_640_gb():
    """R21: 'Hopper 8-GPU box ~640 GB'."""
    assert load_hardware("hgx-h100").hbm_bytes == pytest.approx(640e9)


def test_gb200_nvl72_aggregate():
    """H5: 13.4-13.5 TB and 576 TB/s per rack."""
    s = load_hardware("gb200-nvl72")
    assert s.scaleup_size == 72
    assert 13.35e12 <= s.hbm_bytes <= 13.55e12
    assert s.hbm_bw == pytest.approx(576e12, rel=0.01)


def test_vera_rubin_rack():
    """H9: 72 packages = 144 dies, 20.7 TB HBM4."""
    s = load_hardware("vr-nvl72")
    assert (s.scaleup_size, s.dies_per_chip, s.dies) == (72, 2, 144)
    assert s.hbm_bytes == pytest.approx(20.7e12, rel=0.01)
    assert s.chip.status == "announced"


def test_rubin_ultra_counts_packages():
    """H10: 576 dies in 4-die packages of 1 TB each."""
    s = load_hardware("rubin-ultra-nvl576")
    assert s.dies == 576 and s.dies_per_chip == 4
    assert s.chip.hbm_bytes == pytest.approx(1e12)


def test_scaleup_sizes():
    """R20: Hopper 8 -> Blackwell 72 -> Rubin 'five hundred something' (dies)."""
    assert load_hardware("h100").scaleup_size == 8
    assert load_hardware("gb200").scaleup_size == 72
    assert load_hardware("rubin-ultra-nvl576").dies > 500
    assert load_hardware("tpu-v5p-pod").scaleup_size == 8960
    assert load_hardware("tpu-v4-pod").scaleup_size == 4096
    assert load_hardware("ironwood-pod").scaleup_size == 9216


@pytest.mark.parametrize("system", ["hgx-h100", "hgx-h200", "gb300-nvl72"])
def test_scale_out_about_8x_slower(system):
    """R19: scale-out 'tends to be about 8x slower'; per chip, per direction."""
    assert 6 <= load_hardware(system).scaleup_to_scaleout <= 12


def test_link_bandwidths_are_per_direction():
    assert load_chip("h100").scaleup_bw == pytest.approx(450e9)    # NVLink4 900 GB/s bidirectional
    assert load_chip("h800").scaleup_bw == pytest.approx(200e9)    # 400 GB/s bidirectional
    assert load_chip("gb200").scaleup_bw == pytest.approx(900e9)   # NVLink5 1.8 TB/s bidirectional
    assert load_chip("h100").scaleout_bw == pytest.approx(50e9)    # 400 Gb/s NIC
    assert load_chip("tpu-v4").scaleup_bw == pytest.approx(270e9)  # Pope et al.: 270 GB/s


def test_h800_is_an_h100_with_less_nvlink():
    h100, h800 = load_chip("h100"), load_chip("h800")
    assert h800.flops == h100.flops and h800.hbm_bytes == h100.hbm_bytes and h800.hbm_bw == h100.hbm_bw
    assert h800.scaleup_bw < h100.scaleup_bw
    assert h800.usd_per_hour == 2.0   # DeepSeek's $2/GPU-hour (D6, TR7)


# --- catalog completeness and sources -----------------------------------------------------------------------------

def test_all_required_names_exist():
    for name in CHIPS:
        assert load_chip(name).name == name
    for name in SYSTEMS:
        assert load_hardware(name).name == name


def test_every_figure_has_a_source():
    for c in chips().values():
        for dt in c.flops:
            assert c.source(f"flops.{dt}"), f"{c.name}: flops.{dt}"
        for key in ("hbm", "hbm_bandwidth", "scaleup_bandwidth", "scaleout_bandwidth", "usd_per_hour"):
            assert c.source(key), f"{c.name}: {key}"
        assert {t.tier for t in c.memory_tiers} == {"ddr", "flash", "disk"}, c.name
        for t in c.memory_tiers:
            assert t.source and t.usd_per_gb_hour and t.usd_per_gb_hour > 0, (c.name, t.tier)
    for s in systems().values():
        assert s.sources.get("scaleup_size"), s.name


def test_dtypes_present_where_published():
    assert "int8" in load_chip("tpu-v5e").flops and "int8" in load_chip("tpu-v6e").flops
    for name in ("b200", "gb200", "gb300", "rubin", "mi355x"):
        assert "fp4" in load_chip(name).flops, name
    for name in ("h100", "h200", "mi300x", "tpu-v7"):
        assert "fp8" in load_chip(name).flops, name


def test_memory_tiers_are_slower_and_bigger_down_the_hierarchy():
    """R41: drain times grow from HBM (~20 ms) to DDR (seconds) to flash (minutes) to disk (hours or more)."""
    for c in chips().values():
        drains = [c.tier(t).drain_time_s for t in ("hbm", "ddr", "flash", "disk")]
        assert drains == sorted(drains), c.name
        assert 0.3 < c.tier("ddr").drain_time_s < 10, c.name
        assert 60 < c.tier("flash").drain_time_s < 3600, c.name


def test_dgx_h100_ddr_share():
    """§3b: DGX H100 2 TB DDR5, ~600 GB/s per 8 GPUs -> 250 GB and 75 GB/s per GPU; drain ~3.3 s."""
    ddr = load_chip("h100").tier("ddr")
    assert ddr.capacity == pytest.approx(250e9) and ddr.bandwidth == pytest.approx(75e9)
    assert ddr.drain_time_s == pytest.approx(3.33, rel=0.01)


def test_default_systems_are_built_from_their_chip():
    for c in chips().values():
        s = load_hardware(c.name)
        assert s.name == c.default_system and s.chip.name == c.name


# --- names ---------------------------------------------------------------------------------------------------------

def test_aliases_and_case():
    assert load_chip("H100-SXM").name == "h100"
    assert load_chip("Ironwood").name == "tpu-v7"
    assert load_chip("trillium").name == "tpu-v6e"
    assert load_chip("v5e").name == "tpu-v5e"
    assert load_chip("TPU_V5P").name == "tpu-v5p"
    assert load_hardware("mi300x-platform").name == "mi300x-8"
    assert load_hardware("IRONWOOD-POD").name == "tpu-v7-pod"
    assert load_hardware("Vera Rubin NVL72").name == "vr-nvl72"


def test_chip_name_means_its_default_system():
    assert load_hardware("h100").name == "hgx-h100"
    assert load_hardware("ironwood").name == "tpu-v7-pod"
    assert load_hardware("gb200").name == "gb200-nvl72"
    assert load_hardware(load_chip("b200")).name == "hgx-b200"
    assert rackmath.load_hardware("rubin").name == "vr-nvl72"


def test_unknown_name_offers_closest():
    with pytest.raises(UnknownNameError) as info:
        load_hardware("h1000")
    assert "h100" in info.value.closest
    with pytest.raises(UnknownNameError) as info:
        load_chip("tpu-v5")
    assert set(info.value.closest) & {"tpu-v5e", "tpu-v5p"}


# --- user catalogs -------------------------------------------------------------------------------------------------

USER_TOML = textwrap.dedent("""
    [[chip]]
    name = "my-chip"
    aliases = ["mine"]
    vendor = "Me"
    hbm = "100 GB"
    hbm_bandwidth = "5 TB/s"
    scaleup_bandwidth = "1 TB/s"
    scaleout_bandwidth = "800 Gb/s"
    usd_per_hour = "$3/h"
    default_system = "my-box"
    [chip.flops]
    bf16 = "2000 TFLOP/s sparse"
    fp8 = "2 PFLOP/s"

    [[system]]
    name = "my-box"
    chip = "my-chip"
    scaleup_size = 16
""")


@pytest.fixture
def user_dir(tmp_path):
    d = tmp_path / "cat"
    d.mkdir()
    (d / "mine.toml").write_text(USER_TOML)
    return d


def _check_user_chip():
    s = load_hardware("mine")
    assert s.name == "my-box" and s.scaleup_size == 16
    assert s.hbm_bytes == pytest.approx(1.6e12)
    assert s.chip.flops["bf16"] == pytest.approx(1e15)       # sparse string halved
    assert s.chip.scaleout_bw == pytest.approx(100e9)
    assert load_hardware("h100").name == "hgx-h100"          # shipped catalog still there


def test_user_catalog_via_add_catalog_dir(user_dir):
    rackmath.add_catalog_dir(user_dir)
    _check_user_chip()


def test_user_catalog_via_env(user_dir, monkeypatch):
    monkeypatch.setenv("RACKMATH_CATALOG", str(user_dir))
    catalog.clear_caches()
    _check_user_chip()


def test_user_catalog_via_cli(user_dir):
    code, out, err = run_cli("--catalog", str(user_dir), "hardware", "show", "my-box", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["name"] == "my-box" and d["hbm_bytes"] == pytest.approx(1.6e12)
    code, out, err = run_cli("hardware", "show", "my-chip", env={"RACKMATH_CATALOG": str(user_dir)})
    assert code == 0, err


def test_user_entry_replaces_shipped_one(tmp_path):
    (tmp_path / "h100.toml").write_text(USER_TOML.replace('name = "my-chip"', 'name = "h100"')
                                        .replace('chip = "my-chip"', 'chip = "h100"')
                                        .replace('default_system = "my-box"', 'default_system = "hgx-h100"')
                                        .replace('name = "my-box"', 'name = "hgx-h100"'))
    rackmath.add_catalog_dir(tmp_path)
    assert load_chip("h100").hbm_bytes == pytest.approx(100e9)
    with pytest.raises(UnknownNameError):  # the replaced entry's aliases went with it
        load_chip("h100-sxm")
    assert load_hardware("h100").scaleup_size == 16


@pytest.mark.parametrize("text, field", [
    (USER_TOML.replace('hbm_bandwidth = "5 TB/s"\n', ""), "chip.hbm_bandwidth"),
    (USER_TOML.replace('"100 GB"', '"lots"'), "chip.hbm"),
    (USER_TOML.replace('"100 GB"', '"0 GB"'), "chip.hbm"),
    (USER_TOML.replace('bf16 = "2000 TFLOP/s sparse"', 'bf16 = "fast"'), "chip.flops.bf16"),
    (USER_TOML.replace('bf16 = "2000 TFLOP/s sparse"\n', ''), "chip.flops.bf16"),
    (USER_TOML.replace("scaleup_size = 16", "scaleup_size = 0"), "system.scaleup_size"),
    (USER_TOML.replace('chip = "my-chip"', 'chip = "nope"'), "system.chip"),
    (USER_TOML.replace('default_system = "my-box"', 'default_system = "no-box"'), "chip.default_system"),
    (USER_TOML + '\n[[chip.memory_tiers]]\ntier = "tape"\ncapacity = "1 TB"\nbandwidth = "1 GB/s"\n',
     "chip.memory_tiers[0].tier"),
    ("[[chip]\nname = ", "toml"),
])
def test_bad_user_file_names_path_and_field(tmp_path, text, field):
    """Using the bad user entry (here by its chip alias) names the file and field; other entries still load."""
    (tmp_path / "bad.toml").write_text(text)
    rackmath.add_catalog_dir(tmp_path)
    with pytest.raises(CatalogError) as info:
        load_hardware("mine")
    assert info.value.field == field
    assert "bad.toml" in info.value.path
    assert "\n" not in str(info.value).strip()
    assert load_hardware("h100").name == "hgx-h100"


# --- CLI ------------------------------------------------------------------------------------------------------------

def test_cli_show_unknown_exits_2_with_one_line():
    code, out, err = run_cli("hardware", "show", "nope")
    assert code == 2
    assert "Traceback" not in err and err.strip().count("\n") == 0
    assert err.startswith("error: hardware")


def test_cli_bad_catalog_exits_2(tmp_path):
    """An unreadable user file: `hardware list` lists the rest with one warning; a name it may hold exits 2."""
    (tmp_path / "bad.toml").write_text("[[chip]\n")
    code, out, err = run_cli("--catalog", str(tmp_path), "hardware", "list")
    assert code == 0 and "hgx-h100" in out and err.startswith("warning: ") and "bad.toml" in err
    assert err.strip().count("\n") == 0
    code, out, err = run_cli("--catalog", str(tmp_path), "hardware", "show", "my-chip")
    assert code == 2 and "bad.toml" in err and "Traceback" not in err and err.strip().count("\n") == 0


def test_cli_list_json():
    code, out, err = run_cli("hardware", "list", "--json")
    assert code == 0, err
    rows = {r["chip"]: r for r in json.loads(out)}
    assert set(CHIPS) <= set(rows)
    assert rows["h100"]["system"] == "hgx-h100" and rows["h100"]["scaleup_size"] == 8
    assert rows["h100"]["bf16_flops"] == pytest.approx(989.4e12, rel=1e-3)
    assert rows["h100"]["ratio_bf16"] == pytest.approx(295, rel=0.03)
    assert rows["tpu-v5e"]["drain_time_s"] == pytest.approx(0.0198, rel=0.02)


def test_cli_list_tables():
    code, out, err = run_cli("hardware", "list")
    assert code == 0, err
    assert "hgx-h100" in out and "tpu-v7-pod" in out and "23.9" in out
    code, out, err = run_cli("hardware", "list", "--systems", "--json")
    assert code == 0, err
    assert {r["name"] for r in json.loads(out)} >= set(SYSTEMS)


def test_cli_show_system_json_has_sources():
    code, out, err = run_cli("hardware", "show", "gb200-nvl72", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["scaleup_size"] == 72 and d["dies"] == 144
    assert d["hbm_bw"] == pytest.approx(576e12, rel=0.01)
    assert d["chip_spec"]["sources"]["hbm"]
    assert all(d["chip_spec"]["sources"].get(f"flops.{dt}") for dt in d["chip_spec"]["flops"])


def test_cli_show_chip():
    code, out, err = run_cli("hardware", "show", "h100", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["kind"] == "chip" and d["default_system"] == "hgx-h100"
    code, out, err = run_cli("hardware", "show", "ironwood")
    assert code == 0 and "published.md H18" in out


@pytest.mark.parametrize("chip, weights, expected", [
    ("h100", "mxfp4", "bf16"),   # no FP4 tensor cores: W4A16 (Marlin / Triton)
    ("b200", "mxfp4", "fp8"),    # MXFP4 x MXFP8 (TensorRT-LLM W4A8_MXFP4_MXFP8; FlashInfer's MoE, published.md C34)
    ("mi355x", "mxfp4", "fp8"),
    ("b200", "nvfp4", "fp4"),    # W4A4
    ("b200", "int4", "bf16"),    # AWQ: W4A16 on any chip
    ("h100", "fp4", "fp8"),      # a dtype the chip lacks falls back to a wider one it has
    ("tpu-v5e", "int8", "int8"),
])
def test_a_weight_gemm_runs_at_the_rate_the_chip_gives_its_wider_operand(chip, weights, expected):
    assert load_chip(chip).gemm_dtype(weights) == expected


def test_hardware_ratio_of_a_weight_only_int4_model():
    """AWQ INT4 on an H100: half a byte per parameter against the BF16 rate, (989.4e12/2)/(3.35e12/0.5) = 73.8."""
    assert hardware_ratio(load_chip("h100"), "int4") == pytest.approx(989.4e12 / 2 / (3.35e12 / 0.5), rel=1e-3)
