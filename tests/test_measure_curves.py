"""`rackmath measure --curves` (issue 34, item 1): a chip's kernel curves measured here, in the shipped format, compared
with the chip's current curves, and added to them from a ``--catalog`` directory.

Pure parts (the comparison, a user's curves over the shipped ones) need no torch; one CPU run goes through the CLI.
The H100 measurement of 2026-11-27 (``benchmarks/data/h100-measure-curves.toml``, one H100 80GB HBM3, torch 2.11)
checks the shipped aiconfigurator-core curves it overlaps.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rackmath.analyses.fitting.measure import compare_curves, curves_toml
from rackmath.errors import CatalogError
from rackmath.specs import catalog, kernels
from rackmath.specs.hardware import load_chip

ROOT = Path(__file__).resolve().parents[1]
H100_RUN = ROOT / "benchmarks" / "data" / "h100-measure-curves.toml"


def _curve(op, name, xs, ts, **kw):
    return {"op": op, "name": name, "x": "m", "x_values": xs, "time_s": ts, "framework": "torch",
            "framework_version": "2.11.0", "table": "test", **kw}


def test_compare_curves_ratios_at_shared_points():
    ref = [_curve("gemm", "ref", [1.0, 2.0, 3.0], [1e-6, 2e-6, 4e-6], dtype="bf16", n=8, k=8)]
    mine = [_curve("gemm", "mine", [1.0, 2.0, 5.0], [2e-6, 3e-6, 9e-6], dtype="bf16", n=8, k=8),
            _curve("gemm", "other shape", [1.0], [1e-6], dtype="bf16", n=16, k=8)]
    a, b = compare_curves(mine, ref)
    assert a["points"] == 2 and a["x"] == [1.0, 2.0]
    assert a["ratio"] == pytest.approx([2.0, 1.5]) and a["median_ratio"] == pytest.approx(1.75)
    assert (a["min_ratio"], a["max_ratio"]) == pytest.approx((1.5, 2.0))
    assert b["reference"] is None and b["points"] == 0 and b["median_ratio"] is None


def _with_catalog(monkeypatch, d: Path):
    monkeypatch.setenv("RACKMATH_CATALOG", str(d))
    for clear in catalog._cache_clearers:
        clear()
    catalog._dir_scan.cache_clear()


def test_user_curves_are_added_over_the_shipped_ones(tmp_path, monkeypatch):
    """A user's kernel floor of 5 µs replaces the shipped 2.54 µs; every other shipped curve stays; τ follows."""
    floor = _curve("kernel_floor", "my floor", [8.0], [5e-6], dtype="bf16", n=64, k=32)
    extra = _curve("gemm", "gemm bf16 N=4096 K=4096", [1.0, 2.0], [2e-5, 2e-5], dtype="bf16", n=4096, k=4096)
    meta = {"chip": "h100", "package": "rackmath", "package_version": "test", "system": "mine", "device": "mine"}
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "h100.toml").write_text(curves_toml(meta, [floor, extra], ["mine"]))
    shipped = kernels.kernel_table("h100")
    _with_catalog(monkeypatch, tmp_path)
    try:
        t = kernels.kernel_table("h100")
        assert len(t["curves"]) == len(shipped["curves"]) + 1 and not t["shipped"]
        assert [c["time_s"] for c in t["curves"] if c["op"] == "kernel_floor"] == [[5e-6]]
        sil = kernels.silicon(load_chip("h100"))
        assert sil["kernel_latency_s"]["value"] == 5e-6 and "rackmath test" in sil["kernel_latency_s"]["from"]
        assert "aiconfigurator-core" in sil["eta_compute"]["from"]  # the shipped FP8-block GEMM still stands
        line = kernels.summary_line("h100", "nvidia")
        kept = len(shipped["curves"]) - 1  # all but the shipped floor
        assert f"2 rackmath test + {kept} aiconfigurator-core 0.12.0" in line and str(tmp_path) in line
        assert f"({kept} of its curves kept)" in line
    finally:
        monkeypatch.delenv("RACKMATH_CATALOG")
        for clear in catalog._cache_clearers:
            clear()
    assert kernels.kernel_table("h100")["shipped"]


def test_a_malformed_user_curve_is_one_catalog_error(tmp_path, monkeypatch):
    bad = _curve("kernel_floor", "bad", [8.0, 16.0], [5e-6], dtype="bf16", n=64, k=32)
    (tmp_path / "h100.toml").write_text(curves_toml({"chip": "h100"}, [bad], ["bad"]))
    _with_catalog(monkeypatch, tmp_path)
    try:
        with pytest.raises(CatalogError, match=r"_curve\[0\]\.time_s"):
            kernels.kernel_table("h100")
    finally:
        monkeypatch.delenv("RACKMATH_CATALOG")
        for clear in catalog._cache_clearers:
            clear()


def test_h100_measurement_checks_the_shipped_curves():
    """One H100 80GB HBM3 (torch 2.11, CUDA graphs, weights cycled past the L2) against aiconfigurator-core 0.12.0's
    TensorRT-LLM tables of the same chip: the BF16 GEMM curves agree at every M (ratios 0.92–1.10, median within 5%), the
    small-kernel floor within 10% (2.71 µs vs 2.54 µs) — the τ of ~2.5 µs (not the fitted 11.9 µs) is the
    silicon's."""
    import tomllib

    run = tomllib.loads(H100_RUN.read_text())
    assert run["_meta"]["device"] == "NVIDIA H100 80GB HBM3"
    rows = {r["name"]: r for r in compare_curves(run["_curve"], kernels.kernel_table("h100")["curves"])}
    for shape in ("N=8192 K=8192", "N=2048 K=7168"):
        r = rows[f"gemm bf16 {shape}"]
        assert r["points"] == 16 and 0.95 <= r["median_ratio"] <= 1.05 and 0.9 <= r["min_ratio"] <= r["max_ratio"] <= 1.12
    assert 0.9 <= rows["shortest GEMM measured"]["median_ratio"] <= 1.1
    # a plain-PyTorch MLA is no fused MLA kernel: slower at every context, and said so in its name
    mla = [r for n, r in rows.items() if n.startswith("MLA") and "not a fused MLA kernel" in n]
    assert len(mla) == 2 and all(r["min_ratio"] > 1.0 for r in mla)
    # the KV cache's streaming rate: PyTorch's flash decode attention on this H100 reads a ≥ 512 MB cache at 0.91 of
    # HBM bandwidth, TensorRT-LLM's (the shipped table) at 0.87 — within 5%; the plain-PyTorch MLA sets no η_m,mla
    from rackmath.measuring import _silicon_numbers

    stamp = {k: run["_meta"].get(k) for k in ("package", "package_version", "system")}
    mine = _silicon_numbers("h100", {"meta": run["_meta"], "curves": [dict(stamp, **c) for c in run["_curve"]]})
    shipped = _silicon_numbers("h100", None)
    assert mine["eta_memory_kv"] == pytest.approx(0.912, abs=0.005) and shipped["eta_memory_kv"] == pytest.approx(
        0.874, abs=0.005)
    assert "eta_memory_mla" not in mine and shipped["eta_memory_mla"] == pytest.approx(0.932, abs=0.005)


def test_measure_curves_cli_on_a_cpu(tmp_path):
    pytest.importorskip("torch")
    cmd = [sys.executable, "-m", "rackmath", "measure", "--curves", "--device", "cpu", "--name", "h100",
           "--save", str(tmp_path), "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    out = tmp_path / "kernels" / "h100.toml"
    assert out.exists() and res["reference"] == "specs/data/kernels/h100.toml"
    floor = next(c for c in res["comparison"] if c["op"] == "kernel_floor")
    assert floor["points"] == 1 and floor["median_ratio"] > 0
    # written in the shipped format: the catalog reads it back over the shipped curves
    env = {"RACKMATH_CATALOG": str(tmp_path)}
    q = subprocess.run([sys.executable, "-m", "rackmath", "hardware", "show", "h100"], capture_output=True,
                       text=True, timeout=60, env={**__import__("os").environ, **env})
    assert q.returncode == 0 and "rackmath 0.1.0" in q.stdout.replace("\n", " ")
    # nothing a user wrote is overwritten; an option of the decode sweep is refused with --curves
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 2 and "would be overwritten" in again.stderr and "Traceback" not in again.stderr
    bad = subprocess.run(cmd[:-3] + ["--batch", "4"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--batch" in bad.stderr and "--curves" in bad.stderr
