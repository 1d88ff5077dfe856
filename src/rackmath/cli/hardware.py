"""`rackmath hardware list|show`: the chip and system catalog, every number with its source."""

from __future__ import annotations

import typer

from ..units import human

from .common import JSON_OPT

hardware_app = typer.Typer(help="Chips and scale-up systems in the catalog.", no_args_is_help=True)

_VENDOR_ORDER = {"NVIDIA": 0, "AMD": 1, "Google": 2, "Intel": 3, "AWS": 4}


def _table(title: str, columns: list, rows: list[list], caption: str | None = None,
           numeric: bool = True) -> None:
    """The shared table (cli.common.table): fits the terminal, numbers never cut, sources wrap."""
    from .common import Col, table

    cols = [c if not isinstance(c, str) else Col(c, 0 if (i < 2 or not numeric) else 1,
                                                  text=None if (numeric or i < 2) else True)
            for i, c in enumerate(columns)]
    table(title, cols, rows, caption)


def _group_key(chip) -> tuple:
    """Vendor, then generation in release order (specs.hardware.GENERATIONS), then catalog order."""
    from ..specs.hardware import GENERATIONS

    gen = GENERATIONS.index(chip.generation) if chip.generation in GENERATIONS else len(GENERATIONS)
    return (_VENDOR_ORDER.get(chip.vendor, len(_VENDOR_ORDER)), chip.vendor, gen, chip.generation)


def _chip_row(chip) -> dict:
    from ..specs.hardware import hardware_ratio, systems
    from ..units import dtype_bytes

    system = systems().get(chip.default_system)
    low = min(chip.flops, key=dtype_bytes)
    return {
        "chip": chip.name,
        "vendor": chip.vendor,
        "generation": chip.generation,
        "tdp_w": chip.tdp_w,
        "status": chip.status,
        "system": system.name,
        "scaleup_size": system.scaleup_size,
        "flops": dict(chip.flops),
        "bf16_flops": chip.flops.get("bf16"),
        "fp8_flops": chip.flops.get("fp8"),
        "fp4_flops": chip.flops.get("fp4"),
        "hbm_bytes": chip.hbm_bytes,
        "hbm_bw": chip.hbm_bw,
        "scaleup_bw": chip.scaleup_bw,
        "scaleout_bw": chip.scaleout_bw,
        "ratio_bf16": hardware_ratio(chip, "bf16"),
        "ratio_low": hardware_ratio(chip, low),
        "ratio_low_dtype": low,
        "drain_time_s": chip.drain_time_s,
        "usd_per_hour": chip.usd_per_hour,
    }


@hardware_app.command("list")
def list_cmd(
    json: bool = JSON_OPT,
    systems_only: bool = typer.Option(False, "--systems", help="List the scale-up systems instead of the chips."),
):
    """Every chip with its standard system: dense peaks, HBM, hardware ratio, drain time, $/h."""
    from ..specs.hardware import chips, systems
    from ..units import format_si
    from .common import print_json

    if systems_only:
        ordered = sorted(systems().values(), key=lambda s: _VENDOR_ORDER.get(s.chip.vendor, len(_VENDOR_ORDER)))
        rows = [s.describe() for s in ordered]
        for r in rows:
            r.pop("chip_spec")
        if json:
            print_json(rows)
            return
        from .common import Col

        _table("Scale-up systems", [Col("system", 0), Col("chip", 1), Col("GPUs", 0), Col("dies", 3),
                                    Col("topology", 3), Col("HBM", 1), Col("HBM BW", 1), Col("bf16 dense", 1),
                                    Col("scale-up BW/GPU", 2), Col("up/out", 2), Col("$/h", 1)],
              [[s.name, s.chip.name, s.scaleup_size, s.dies, s.topology, format_si(s.hbm_bytes, "B"),
                format_si(s.hbm_bw, "B/s"), format_si(s.peak_flops("bf16"), "FLOP/s"),
                format_si(s.chip.scaleup_bw, "B/s"), f"{s.scaleup_to_scaleout:.1f}×",
                f"${s.chip.usd_per_hour * s.scaleup_size:,.0f}"] for s in ordered],
              caption="bandwidths per chip, per direction; up/out = scale-up ÷ scale-out bandwidth per chip")
        return
    ordered = sorted(chips().values(), key=_group_key)
    rows = [_chip_row(c) for c in ordered]
    if json:
        print_json(rows)
        return

    def tf(v):
        return "—" if v is None else f"{v / 1e12:,.0f}"

    from .common import Col

    _table(
        "Chips: dense peaks, HBM, hardware ratio, drain time",
        [Col("chip", 0), Col("generation", 3), Col("system", 2), Col("N", 2), Col("bf16 TF/s", 1),
         Col("fp8 TF/s", 1), Col("fp4 TF/s", 2), Col("HBM GB", 0), Col("HBM TB/s", 0), Col("ratio", 1),
         Col("drain ms", 3), Col("$/h", 1)],
        [[r["chip"] + ("*" if r["status"] == "announced" else ""), f"{r['vendor']} {r['generation']}".strip(),
          r["system"], r["scaleup_size"],
          tf(r["bf16_flops"]), tf(r["fp8_flops"]), tf(r["fp4_flops"]), f"{r['hbm_bytes'] / 1e9:.0f}",
          f"{r['hbm_bw'] / 1e12:.2f}", f"{r['ratio_low']:.0f} {r['ratio_low_dtype']}",
          f"{r['drain_time_s'] * 1e3:.1f}", f"{r['usd_per_hour']:.2f}"]
         for r in rows],
        caption="* announced. N = chips per scale-up domain. ratio = (FLOP/s ÷ 2) ÷ (HBM bytes/s ÷ bytes per param) "
                "(R5) for weights in the narrowest dtype the chip multiplies. drain = HBM ÷ bandwidth (R10). "
                "Sources: hardware show NAME.",
    )


def _kernels(chip) -> dict:
    """The chip's kernel-curve provenance; for a chip without curves or inferred silicon, also what
    ``--efficiency measured`` takes instead (``efficiency_measured``: its family preset's silicon, or the measured
    chips' median where its family has no preset of its own)."""
    from ..engine.efficiency import measured_efficiency
    from ..specs.kernels import provenance

    out = provenance(chip.name, chip.vendor)
    if not out["measured"] and "inferred" not in out:
        out["efficiency_measured"] = measured_efficiency(chip).note.removeprefix("--efficiency measured: ")
    return out


def _chip_lines(chip) -> list[list[str]]:
    from ..specs.hardware import hardware_ratio
    from ..units import format_duration, format_si

    src = chip.source
    rows = [[f"{dt} dense", format_si(v, "FLOP/s"), src(f"flops.{dt}")] for dt, v in chip.flops.items()]
    rows += [
        ["HBM", format_si(chip.hbm_bytes, "B"), src("hbm")],
        ["HBM bandwidth", format_si(chip.hbm_bw, "B/s"), src("hbm_bandwidth")],
        ["scale-up BW (per direction)", format_si(chip.scaleup_bw, "B/s"), src("scaleup_bandwidth")],
        ["scale-out BW (per direction)", format_si(chip.scaleout_bw, "B/s"), src("scaleout_bandwidth")],
        ["$/chip-hour", f"${chip.usd_per_hour:g}", src("usd_per_hour")],
        ["HBM drain time", format_duration(chip.drain_time_s), "capacity ÷ bandwidth (lecture R10)"],
    ]
    if chip.tdp_w is not None:
        rows.append(["board power (TDP)", f"{chip.tdp_w:,.0f} W", src("tdp_w")])
    if chip.host_power_w is not None:
        rows.append(["host share of server power", f"{chip.host_power_w:,.0f} W", src("host_power_w")])
    rows += [[f"hardware ratio {dt}", f"{hardware_ratio(chip, dt):.0f}",
              "(FLOP/s ÷ 2) ÷ (HBM bytes/s ÷ bytes per param) (lecture R5)"] for dt in chip.flops]
    from ..specs.kernels import summary_line

    prov = _kernels(chip)
    line = summary_line(chip.name, chip.vendor, prov)
    if "efficiency_measured" in prov:  # what --efficiency measured takes instead of curves
        line += "; " + prov["efficiency_measured"]
    rows.append(["measured kernel curves", "yes" if prov["measured"] else "no", line])  # issue 34: provenance
    for t in chip.memory_tiers:
        cost = f", {human(t.usd_per_gb_hour, '$')}/GB-h" if t.usd_per_gb_hour is not None else ""
        rows.append([f"{t.tier} tier", f"{format_si(t.capacity, 'B')} at {format_si(t.bandwidth, 'B/s')}, "
                     f"drain {format_duration(t.drain_time_s)}{cost}", f"{t.description}; {t.source}"])
    return rows


@hardware_app.command("show")
def show_cmd(
    name: str = typer.Argument(..., help="A chip (h100, tpu-v7, …) or system (gb200-nvl72, tpu-v5p-pod, …)."),
    json: bool = JSON_OPT,
):
    """One chip or system, every number with its source."""
    from ..specs.catalog import norm
    from ..specs.hardware import chips, load_hardware
    from ..units import format_duration, format_si
    from .common import print_json

    cidx = chips()
    # A system's own name wins; a chip name (or alias) shows the chip.
    system = load_hardware(name)
    is_chip = name in cidx and norm(name) not in {norm(n) for n in (system.name, *system.aliases)}
    if is_chip:
        chip = cidx.get(name)
        if json:
            print_json(chip.describe() | {"measured_kernels": _kernels(chip)})
            return
        _table(f"{chip.name} ({chip.vendor}, {chip.status}): {chip.description}", ["figure", "value", "source"],
               _chip_lines(chip), numeric=False, caption=f"standard system: {chip.default_system}"
               + (f"; aliases: {', '.join(chip.aliases)}" if chip.aliases else ""))
        return
    if json:
        print_json(system.describe() | {"measured_kernels": _kernels(system.chip)})
        return
    s, src = system, system.sources.get
    rows = [
        ["chip", s.chip.name, ""],
        ["chips in scale-up domain", str(s.scaleup_size), src("scaleup_size", "")],
        ["dies per chip", str(s.dies_per_chip), src("dies_per_chip", "")],
        ["max chips", str(s.max_chips) if s.max_chips else "— (scale out freely)", src("max_chips", "")],
        ["topology", s.topology, src("topology", "")],
        ["scale-out hop latency", format_duration(s.hop_latency_s), src("hop_latency", "")],
        ["HBM (domain)", format_si(s.hbm_bytes, "B"), f"{s.scaleup_size} × {format_si(s.chip.hbm_bytes, 'B')}"],
        ["HBM bandwidth (domain)", format_si(s.hbm_bw, "B/s"),
         f"{s.scaleup_size} × {format_si(s.chip.hbm_bw, 'B/s')}"],
    ]
    rows += [[f"{dt} dense (domain)", format_si(s.peak_flops(dt), "FLOP/s"),
              f"{s.scaleup_size} × {format_si(v, 'FLOP/s')}"] for dt, v in s.chip.flops.items()]
    rows += [["scale-up ÷ scale-out", f"{s.scaleup_to_scaleout:.1f}×", "per-chip bandwidths (lecture R19: ~8×)"],
             ["$/hour (domain)", f"${s.chip.usd_per_hour * s.scaleup_size:,.2f}",
              f"{s.scaleup_size} × ${s.chip.usd_per_hour:g}"]]
    _table(f"{s.name}: {s.description}", ["figure", "value", "source"], rows, numeric=False,
           caption=(f"aliases: {', '.join(s.aliases)}" if s.aliases else None))
    _table(f"chip {s.chip.name}: {s.chip.description}", ["figure", "value", "source"], _chip_lines(s.chip),
           numeric=False)


def register(app: typer.Typer) -> None:
    app.add_typer(hardware_app, name="hardware")
