"""MI355X's kernel curves from AMD's AITER tables (issue 34): the reduction, the silicon read from them, and the
MLA kernel scale still inferred from records. Numbers hand-derived from the shipped curve file and AITER's rows."""

import importlib.util
import zipfile
from pathlib import Path

import pytest

from rackmath.engine.efficiency import default_efficiency, resolve
from rackmath.specs.hardware import load_hardware
from rackmath.specs.kernels import (experts_streamed, inferable_fields, INFERRED_FIELDS, kernel_table, provenance,
                                    reaches_compute, silicon, summary_line)

ROOT = Path(__file__).resolve().parents[1]


def test_mi355x_has_measured_curves_with_their_source_and_license():
    p = provenance("mi355x", "amd")
    assert p["measured"] and p["package"] == "amd-aiter" and p["license"] == "MIT"
    assert p["ops"] == {"gemm": 4, "kernel_floor": 1, "moe": 1}
    assert (ROOT / "src/rackmath/specs/data/kernels/NOTICE-aiter.md").read_text().count("MIT License") >= 2
    line = summary_line("mi355x", "amd")
    assert "amd-aiter 0.1.7.post2.dev18 (MIT)" in line and "MLA kernel scale" in line and "inferred" in line
    # gfx942's tables (MI300X / MI325X) hold no GEMM big enough: no curves, vendor figures and records
    assert kernel_table("mi300x") is None and not provenance("mi300x", "amd")["measured"]


def test_mi355x_silicon_is_read_off_aiters_rows():
    """τ: the shortest GEMM (2.889 µs, a8w8 blockscale pre-shuffled); η_c: the block-scaled FP8 GEMM at N = K = 8192
    peaks at 1,566.8 TFLOP/s (M = 8192, 701.74 µs) of MI355X's 5 PFLOP/s FP8; η_m: the per-token FP8 one-row GEMM
    (64 MiB of weights in 14.898 µs − τ) of 8 TB/s."""
    chip = load_hardware("mi355x").chip
    sil = silicon(chip)
    assert sil["kernel_latency_s"]["value"] == pytest.approx(2.889e-6)
    assert sil["by_dtype"]["fp8_block"]["eta_compute"] == pytest.approx(2 * 8192 ** 3 / 701.74e-6 / 5e15, rel=1e-3)
    # ... which the file says not to take (the GEMM compute law stays the preset's: docs/stacks.md)
    assert "eta_compute" not in sil and "gemm_half_tokens" not in sil
    e = resolve("mi355x", "measured")
    assert (e.eta_compute, e.gemm_half_tokens) == (default_efficiency("mi355x").eta_compute,
                                                   default_efficiency("mi355x").gemm_half_tokens)
    assert e.eta_memory == pytest.approx(sil["eta_memory"]["value"]) and "its curve file says so" in e.description
    assert sil["eta_memory"]["value"] == pytest.approx(8192 * 8192 / (8e12 * (14.898e-6 - 2.889e-6)), rel=1e-3)
    assert "amd-aiter" in sil["eta_memory"]["from"] and "gemm fp8 N=8192" in sil["eta_memory"]["from"]
    # the MoE curve ends at 1,024 tokens (32 per expert): memory-bound throughout, no compute law read from it
    moe = next(c for c in kernel_table("mi355x")["curves"] if c["op"] == "moe")
    assert not reaches_compute(moe) and "moe_compute" not in sil
    # its stream: 128 tokens hit 256 · (1 − (1 − 8/256)^128) = 251.6 distinct experts of 3 · 7168 · 256 FP8 bytes
    hit = 256 * (1 - (1 - 8 / 256) ** 128)
    assert experts_streamed(moe, 128) == pytest.approx(hit) and hit == pytest.approx(251.6, abs=0.1)
    t128 = dict(zip(moe["x_values"], moe["time_s"]))[128.0]
    at128 = hit * 3 * 7168 * 256 * (1 + 4 / 128 ** 2) / (8e12 * (t128 - 2.889e-6))
    assert sil["eta_memory_moe"]["value"] >= at128 > 0.6
    # balanced rows (aiconfigurator-core's) hit min(E, T·k)
    assert experts_streamed(dict(moe, routing="balanced"), 16) == 128


def test_a_measured_amd_chip_still_infers_its_mla_kernel_scale():
    """Curves measure τ_k; the kernels a stack's MLA block runs are a ROCm fact its records identify. NVIDIA's CUDA
    stacks are the reference (1): nothing to infer; a chip without curves infers both."""
    assert inferable_fields("mi355x", "amd") == ("mla_kernel_scale",)
    assert inferable_fields("h200", "nvidia") == ()
    assert inferable_fields("mi300x", "amd") == INFERRED_FIELDS
    sil = silicon(load_hardware("mi355x").chip)
    assert "inferred from" in sil["mla_kernel_scale"]["from"] and sil["mla_kernel_scale"]["value"] > 1.0


def _wheel(path: Path):
    """A small amd-aiter-like wheel: every table the reducer reads, a few rows for cu_num 256 (and one of 304)."""
    head = "cu_num,M,N,K,kernelId,splitK,us,kernelName,tflops,bw,errRatio\n"
    rows = {m: 10.0 + m / 64 for m in (1, 2, 4, 8, 16)}
    gemm = head + "".join(f"256,{m},8192,8192,0,0,{t},k,0,0,0\n" for m, t in rows.items()) + \
        "256,3,8192,8192,0,0,1.5,k,0,0,0\n304,16,1536,7168,0,0,19.3,k,0,0,0\n"
    moe = ("cu_num,token,model_dim,inter_dim,expert,topk,act_type,dtype,q_dtype_a,q_dtype_w,q_type,use_g1u1,"
           "doweight_stage1,block_m,ksplit,us1,kernelName1,err1,us2,kernelName2,err2,us,run_1stage,tflops,bw\n")
    moe += "".join(f"256,{t},7168,256,256,8,s,d,a,w,QuantType.per_1x128,1,0,16,0,0,k,0,0,k,0,{u},0,0,0\n"
                   for t, u in ((16, 112.9), (32, 179.2), (64, 220.8), (16, 120.0)))
    spec = importlib.util.spec_from_file_location("reduce_aiter", ROOT / "benchmarks/reduce_aiter.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with zipfile.ZipFile(path, "w") as z:
        for ts in mod.GEMM_TABLES.values():
            for t in ts:
                z.writestr(t, gemm)
        z.writestr(mod.MOE_TABLE, moe)
    return mod


def test_reduce_aiter_keeps_the_fastest_row_per_point(tmp_path, capsys):
    wheel = tmp_path / "amd_aiter-9.9-py3-none-any.whl"
    mod = _wheel(wheel)
    with zipfile.ZipFile(wheel) as z:
        curves = mod.chip_curves(z, 256, "9.9")
    g = next(c for c in curves if c["name"] == "gemm fp8 N=8192 K=8192")
    assert g["x_values"] == [1.0, 2.0, 4.0, 8.0, 16.0]  # M = 3 is no power of two: left out
    assert g["time_s"] == pytest.approx([t * 1e-6 for t in (10 + 1 / 64, 10 + 2 / 64, 10 + 4 / 64, 10.125, 10.25)],
                                        rel=1e-4)
    assert g["flops_per_s"][0] == pytest.approx(2 * 8192 * 8192 / (g["time_s"][0]), rel=1e-4)
    floor = next(c for c in curves if c["op"] == "kernel_floor")
    assert floor["time_s"] == [1.5e-6] and floor["x_values"] == [3.0]  # the shortest row of any table
    moe = next(c for c in curves if c["op"] == "moe")
    assert moe["x_values"] == [16.0, 32.0, 64.0] and moe["time_s"][0] == pytest.approx(112.9e-6)  # fastest of two
    assert moe["routing"] == "uniform" and (moe["inter"], moe["experts"], moe["topk"], moe["ep"]) == (256, 256, 8, 1)
    assert mod.main([str(wheel)]) == 0
    out = capsys.readouterr().out
    assert "mi355x (cu_num 256): 5 curves" in out and "gfx942 (cu_num 304" in out and "no file written" in out


def test_a_curve_file_naming_an_unknown_field_to_skip_is_one_line(tmp_path):
    """``[_meta] silicon_skip`` names silicon fields (``specs.kernels.SKIPPABLE``); a typo is refused, naming the file
    and the key, exit 2 — never silently ignored."""
    from conftest import run_cli

    text = (ROOT / "src/rackmath/specs/data/kernels/mi355x.toml").read_text()
    assert 'silicon_skip = ["eta_compute", "gemm_half_tokens"]' in text
    (tmp_path / "mine.toml").write_text(text.replace('silicon_skip = ["eta_compute", "gemm_half_tokens"]',
                                                     'silicon_skip = ["eta_typo"]'))
    from rackmath.specs import catalog

    catalog.clear_caches()  # the shipped table read by the tests before: read again, with the user's file over it
    code, out, err = run_cli("hardware", "show", "mi355x", env={"RACKMATH_CATALOG": str(tmp_path)})
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "mine.toml" in err and "_meta.silicon_skip" in err and "eta_compute" in err
    # a MoE curve's routing is balanced or uniform, nothing else (it sets how many experts its tokens stream)
    (tmp_path / "mine.toml").write_text(text.replace('routing = "uniform"', 'routing = "zipf"'))
    catalog.clear_caches()
    code, out, err = run_cli("hardware", "show", "mi355x", env={"RACKMATH_CATALOG": str(tmp_path)})
    assert code == 2 and len(err.strip().splitlines()) == 1 and "routing" in err and "balanced or uniform" in err


def test_the_label_says_where_the_silicon_comes_from():
    """The result's label names the silicon's source: curves (H200), curves with the compute law the preset's
    (MI355X), the preset (MI300X), the measured chips' shared silicon (Gaudi 3: no curves, no family preset) — the
    last was labelled 'from measured kernel curves' before."""
    from rackmath.options import mode_label

    label = {c: mode_label(resolve(c, "measured")) for c in ("h200", "mi355x", "mi300x", "gaudi3")}
    assert "silicon from measured kernel curves, the stack" in label["h200"]
    assert "silicon from measured kernel curves, its GEMM compute law its preset's" in label["mi355x"]
    assert "the silicon of its fitted preset (no kernel curves" in label["mi300x"]
    assert "transferred" in label["gaudi3"] and "measured kernel curves," not in label["gaudi3"]
