"""Reduce AMD's AITER tuned-kernel tables to compact kernel curves for the AMD chips they measured (issue 34).

    pip download --no-deps amd-aiter==0.1.7.post2.dev18             # the wheel (PyPI; MIT); nothing is installed
    python benchmarks/reduce_aiter.py amd_aiter-0.1.7.post2.dev18-py3-none-any.whl            # prints a summary
    python benchmarks/reduce_aiter.py amd_aiter-0.1.7.post2.dev18-py3-none-any.whl --write    # specs/data/kernels/

AMD's AITER (``amd-aiter`` on PyPI, MIT License) ships the tables its tuners wrote: for every GEMM shape tuned, the
fastest kernel found and its measured time (``aiter/configs/*_tuned_gemm*.csv``: ``cu_num, M, N, K, …, us, …,
tflops, bw``), and for every fused-MoE shape the fastest two-stage kernel and its time
(``aiter/configs/tuned_fmoe.csv``: ``cu_num, token, model_dim, inter_dim, expert, topk, …, us``). ``cu_num`` names
the GPU: 256 compute units is gfx950 (MI355X; MI350X has the same 256 at lower clocks, and the tables do not say
which), 304 is gfx942 (MI300X or MI325X), 80 is MI308X (not in the catalog). This script reads the wheel as a zip
(stdlib only: nothing of AITER is installed or imported) and writes, per catalog chip with enough rows, the curves
the step model reads (``specs.kernels.silicon``), each with the package, its version and the table:

* ``gemm``: time and achieved FLOP/s versus M at N = K = 8192 (``specs.kernels.GEMM_SHAPE``) per dtype — ``fp8``
  (per-token FP8: ``a8w8`` and ``a8w8_bpreshuffle``), ``fp8_block`` (FP8 with 128 × 128 block scales, DeepSeek's
  format: ``a8w8_blockscale``, its pre-shuffled and DeepSeek-V3 tables), ``mxfp4`` (``a4w4_blockscale``) — and
  DeepSeek-V3's 7168 × 2048 projection in ``fp8_block``; each point (M a power of two) the fastest of the dtype's
  tables at that M;
* ``kernel_floor``: the shortest GEMM measured on the chip (any table): the floor latency of a small kernel;
* ``moe``: DeepSeek-V3's routed experts (hidden 7168, 256 experts, top-8) as served with tensor parallelism 8
  (each GPU holds every expert's 256-wide slice: ``inter_dim`` 256) in ``fp8_block``, time versus tokens. AITER's
  tuner routes each token to the top-k of Gaussian random scores (``fmoe_2stages/tune.py``: ``score =
  torch.randn(token, expert)``): uniform routing, so T tokens hit E · (1 − (1 − k/E)^T) distinct experts, not the
  balanced min(E, T·k) of aiconfigurator-core's rows (``routing = "uniform"``).

gfx942's tables (MI300X / MI325X) hold block-scaled FP8 GEMMs of DeepSeek's shapes only, from M = 16, the largest
33 MB of weights: no GEMM at N = K = 8192 and none that streams enough to read HBM's rate, so no chip file is
written for them (the summary says so). Times in the tables are microseconds; the curves are SI.
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import sys
import zipfile
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # rackmath's light spec helpers

from rackmath.analyses.fitting.measure import curves_toml, significant as _floats  # noqa: E402
from rackmath.specs.kernels import GEMM_SHAPE  # noqa: E402

TARGET = ROOT / "src" / "rackmath" / "specs" / "data" / "kernels"
PACKAGE = "amd-aiter"
#: AITER's ``cu_num`` → (catalog chip, device as the curves name it, architecture).
CHIPS = {256: ("mi355x", "AMD Instinct MI355X (gfx950, 256 CUs; MI350X has the same 256)", "gfx950")}
#: GEMM tables per curve dtype (paths inside the wheel).
GEMM_TABLES = {"fp8": ("aiter/configs/a8w8_tuned_gemm.csv", "aiter/configs/a8w8_bpreshuffle_tuned_gemm.csv"),
               "fp8_block": ("aiter/configs/a8w8_blockscale_tuned_gemm.csv",
                             "aiter/configs/a8w8_blockscale_bpreshuffle_tuned_gemm.csv",
                             "aiter/configs/model_configs/a8w8_blockscale_tuned_gemm_ds_v3.csv",
                             "aiter/configs/model_configs/a8w8_blockscale_bpreshuffle_tuned_gemm_dsv3.csv"),
               "mxfp4": ("aiter/configs/a4w4_blockscale_tuned_gemm.csv",)}
#: Extra GEMM shapes per dtype: DeepSeek-V3's attention output projection at TP 8 (``o_proj``: N = 7168, K = 2048),
#: tuned from M = 1.
EXTRA_SHAPES = {"fp8_block": ((7168, 2048),)}
MOE_TABLE = "aiter/configs/tuned_fmoe.csv"
#: (model, hidden, inter per GPU, experts, top-k, tensor parallelism, AITER quant type, curve dtype) of the MoE curves.
MOE_SHAPES = (("deepseek-v3", 7168, 256, 256, 8, 8, "QuantType.per_1x128", "fp8_block"),)
#: Silicon fields these curves do not set (``specs.kernels.not_read``): the GEMM compute law. Read from the block-scaled
#: FP8 GEMM at N = K = 8192 it is η_c 0.31, M½ 145 rows; with it MI355X's runs one InferenceMAX group out go from
#: 9.6 / 12.1% to 14.4 / 16.3% (tok/s/GPU / TPOT; η_c from the preset, M½ from the curve: 17.8 / 19.5%), while the
#: memory side alone gives 9.2 / 11.9% (docs/stacks.md, "MI355X's curves from AMD's AITER tables").
SILICON_SKIP = ("eta_compute", "gemm_half_tokens")
SILICON_SKIP_WHY = ("the GEMM compute law read from AITER's tuned block-scaled FP8 GEMM (eta_c 0.31, M_half 145 rows "
                    "at N = K = 8192) makes the InferenceMAX runs worse one group out (tok/s/GPU / TPOT 9.2 / 11.9% "
                    "without it, 14.4 / 16.3% with it): it stays the fitted preset's (docs/stacks.md)")


@lru_cache(maxsize=None)
def read_csv(z: zipfile.ZipFile, name: str) -> list[dict]:
    """A table's rows, read from the wheel once (every shape and the floor scan the same tables)."""
    return list(csv.DictReader(io.TextIOWrapper(z.open(name), encoding="utf-8")))



def gemm_points(z, tables, cu: int, n: int, k: int) -> dict:
    """{M: (fastest time in seconds, table)} of shape (N, K) on ``cu`` compute units over ``tables``."""
    best = {}
    for name in tables:
        for r in read_csv(z, name):
            try:
                if int(r["cu_num"]) != cu or int(r["N"]) != n or int(r["K"]) != k:
                    continue
                m, t = int(r["M"]), float(r["us"]) * 1e-6
            except (KeyError, ValueError):
                continue
            if t > 0 and (m not in best or t < best[m][0]):
                best[m] = (t, name)
    return best


def gemm_curve(dtype, n, k, pts, version):
    ms = sorted(m for m in pts if m & (m - 1) == 0)  # powers of two, as reduce_aiconfigurator.py
    t = [pts[m][0] for m in ms]
    used = sorted({pts[m][1] for m in ms})
    return {"op": "gemm", "name": f"gemm {dtype} N={n} K={k}", "x": "m", "x_values": [float(m) for m in ms],
            "time_s": _floats(t), "dtype": dtype, "n": n, "k": k,
            "flops_per_s": _floats([2.0 * m * n * k / x for m, x in zip(ms, t)]),
            "framework": "aiter", "framework_version": version, "table": " + ".join(used)}


def floor_curve(z, cu, version):
    """The shortest GEMM any of the chip's tables measured."""
    best = None
    for dtype, tables in GEMM_TABLES.items():
        for name in tables:
            for r in read_csv(z, name):
                try:
                    if int(r["cu_num"]) != cu:
                        continue
                    row = (float(r["us"]) * 1e-6, int(r["M"]), int(r["N"]), int(r["K"]), dtype, name)
                except (KeyError, ValueError):
                    continue
                if row[0] > 0 and (best is None or row < best):
                    best = row
    t, m, n, k, dtype, name = best
    return {"op": "kernel_floor", "name": "shortest GEMM measured", "x": "m", "x_values": [float(m)],
            "time_s": _floats([t]), "dtype": dtype, "n": n, "k": k, "framework": "aiter",
            "framework_version": version, "table": name}


def moe_curves(z, cu, version):
    rows = read_csv(z, MOE_TABLE)
    out = []
    for model, h, i, e, k, tp, qt, dtype in MOE_SHAPES:
        best = {}
        for r in rows:
            try:
                if (int(r["cu_num"]), int(r["model_dim"]), int(r["inter_dim"]), int(r["expert"]), int(r["topk"]),
                        r["q_type"]) != (cu, h, i, e, k, qt):
                    continue
                tok, t = int(r["token"]), float(r["us"]) * 1e-6
            except (KeyError, ValueError):
                continue
            if t > 0 and (tok not in best or t < best[tok]):
                best[tok] = t
        if len(best) >= 3:
            xs = sorted(best)
            out.append({"op": "moe", "name": f"MoE {model} experts {dtype}, TP {tp} (all {e} experts' {i}-wide slices "
                                            f"per GPU), uniform routing",
                        "x": "tokens", "x_values": [float(x) for x in xs], "time_s": _floats([best[x] for x in xs]),
                        "dtype": dtype, "model": model, "hidden": h, "inter": i, "experts": e, "topk": k, "ep": 1,
                        "tp": tp, "routing": "uniform", "framework": "aiter", "framework_version": version,
                        "table": MOE_TABLE})
    return out


def chip_curves(z, cu, version) -> list:
    out = []
    for dtype, tables in GEMM_TABLES.items():
        for n, k in (GEMM_SHAPE, *EXTRA_SHAPES.get(dtype, ())):
            pts = gemm_points(z, tables, cu, n, k)
            if sum(m & (m - 1) == 0 for m in pts) >= 3:
                out.append(gemm_curve(dtype, n, k, pts, version))
    out.append(floor_curve(z, cu, version))
    return out + moe_curves(z, cu, version)


def file_text(chip, device, arch, cu, version, curves) -> str:
    comments = [f"Measured kernel curves of {chip} ({device}), reduced by benchmarks/reduce_aiter.py from",
                f"{PACKAGE} {version} (AMD's AITER, MIT License: specs/data/kernels/NOTICE-aiter.md). Changes: the",
                "package's tuned-kernel tables (the fastest kernel its tuner found per shape, with its measured time)",
                "reduced to these curves (a few shapes, the fastest table per point, SI units). Do not edit by hand.",
                "Keys starting with \"_\" are not catalog kinds. The silicon of --efficiency measured:",
                "specs/kernels.silicon derives tau, eta_c, M_half, eta_m and the MoE stream and compute from them."]
    meta = {"chip": chip, "package": PACKAGE, "package_version": version, "license": "MIT", "system": f"{arch}_cu{cu}",
            "device": device, "silicon_skip": list(SILICON_SKIP), "silicon_skip_why": SILICON_SKIP_WHY,
            "source": f"{PACKAGE} {version} (PyPI), aiter/configs/*tuned*.csv rows with cu_num = {cu}: kernel times "
                      f"measured by AMD's tuners on {device}"}
    return curves_toml(meta, curves, comments)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("wheel", help="the amd-aiter wheel (pip download --no-deps amd-aiter)")
    ap.add_argument("--write", action="store_true", help=f"write {TARGET.relative_to(ROOT)}/<chip>.toml")
    args = ap.parse_args(argv)
    m = re.match(r"amd_aiter-([^-]+)-", Path(args.wheel).name)
    if not m:
        ap.error(f"wheel: expected an amd_aiter-<version>-….whl file, got {args.wheel}")
    version = m.group(1)
    try:
        z = zipfile.ZipFile(args.wheel)
    except (OSError, zipfile.BadZipFile) as exc:
        ap.error(f"wheel: {args.wheel} cannot be read as a wheel ({exc})")
    with z:
        names = set(z.namelist())
        missing = [t for ts in GEMM_TABLES.values() for t in ts if t not in names] + \
                  ([MOE_TABLE] if MOE_TABLE not in names else [])
        if missing:
            print(f"the wheel lacks {', '.join(missing)}", file=sys.stderr)
            return 1
        for cu, (chip, device, arch) in CHIPS.items():
            curves = chip_curves(z, cu, version)
            print(f"{chip} (cu_num {cu}): {len(curves)} curves")
            for c in curves:
                print(f"  {c['name']}: {len(c['x_values'])} points, {min(c['time_s']) * 1e6:.2f}–"
                      f"{max(c['time_s']) * 1e6:.1f} µs ({c['table']})")
            if args.write:
                (TARGET / f"{chip}.toml").write_text(file_text(chip, device, arch, cu, version, curves))
                print(f"  wrote {(TARGET / f'{chip}.toml').relative_to(ROOT)}")
        gfx942 = [r for r in read_csv(z, GEMM_TABLES["fp8_block"][0]) if r.get("cu_num") == "304"]
        shapes = {(int(r["N"]), int(r["K"])) for r in gfx942}
        print(f"gfx942 (cu_num 304, MI300X / MI325X): {len(gfx942)} block-scaled FP8 GEMM rows of {len(shapes)} "
              f"DeepSeek shapes (largest {max(n * k for n, k in shapes) / 1e6:.0f} MB of FP8 weights), from M = "
              f"{min(int(r['M']) for r in gfx942)}: no GEMM at N = K = {GEMM_SHAPE[0]}, no file written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
