"""`rackmath price|cache|context`: chapter five's inversions of API price sheets (lecture 01:33–02:04)."""

from __future__ import annotations

import typer

from ..units import human

from .common import EXPLAIN_OPT, JSON_OPT, USD_OPT, dtype_check
from .plot import plot_app

NACT_OPT = typer.Option("100B", "--n-active", help="Active parameters per token (lecture: 100B).")
RATIO_OPT = typer.Option(None, "--ratio", help="Hardware ratio (FLOP/s/2)/(bytes/s/bytes per param); default 300, "
                                               "or the chip's with --hardware.")
HW_OPT = typer.Option(None, "--hardware", "-H", help="Chip whose ratio / tiers / prices to use (e.g. h100).")
BPP_OPT = typer.Option("fp8", "--weights-dtype", callback=dtype_check("weights_dtype"), help="Weights dtype: bytes per param in the ratio (lecture: fp8 = 1 B).")


def _count(text, field):
    from .. import units

    return units.parse_count(text, field)


def _ratio_bpp(ratio, hardware, weights_dtype):
    from .. import units
    from ..analyses.lecture.pricing import LECTURE_RATIO

    bpp = units.dtype_bytes(weights_dtype, "--weights-dtype")
    if ratio is not None:
        try:
            r = float(ratio)
        except ValueError:
            from ..errors import InputError

            raise InputError("--ratio", f"cannot read {ratio!r}", "a number such as 300") from None
        return r, bpp, f"--ratio {r:g}"
    if hardware:
        from ..specs.hardware import hardware_ratio, load_chip

        c = load_chip(hardware)
        return float(hardware_ratio(c, weights_dtype)), bpp, f"{c.name} at {weights_dtype}"
    return LECTURE_RATIO, bpp, "lecture's ~300"


def _emit(payload: dict, derivations: list, json: bool, explain: bool, tables: list):
    from .common import print_derivation, print_json, table

    if json:
        if explain:
            payload = payload | {"derivations": [d.as_dict() for d in derivations if d is not None]}
        print_json(payload)
        return
    if explain:
        for d in derivations:
            if d is not None:
                print_derivation(d)
                print()
        return
    for title, cols, rows, caption in tables:
        table(title, cols, rows, caption)


def _sheet_table(d: dict) -> tuple:
    """The price sheet as the table ``price SHEET`` prints first: base prices and each long-context tier."""
    keys = [("input", "input"), ("output", "output"), ("cache_read", "cache read"), ("cache_write_5m", "cache write 5m"),
            ("cache_write_1h", "cache write 1h")]
    keys = [(k, n) for k, n in keys if d.get(k) is not None]
    rows = [["base"] + [f"${d[k]:g}" for k, _ in keys]]
    rows += [[f"above {human(t['above'])} tokens"] + [f"${t[k]:g}" if t.get(k) is not None else "—" for k, _ in keys]
             for t in d.get("tiers", ())]
    return (f"Price sheet {d['name']}: {d['provider']} {d['model']} ({d['date']}), $/Mtok", ["prompt length"]
            + [n for _, n in keys], rows, f"source: {d['source']}" + (f"; {d['note']}" if d.get("note") else ""))


def _print_sheets(json: bool) -> None:
    """price --list: every price sheet ($/Mtok), or their JSON."""
    from ..specs.prices import price_sheets

    rows = [[s.name, s.provider, s.date, s.status, f"{human(s.per_mtok('input'))}", f"{human(s.per_mtok('output'))}",
             "" if s.cache_read is None else f"{human(s.per_mtok('cache_read'))}",
             ", ".join(f">{t.above:,.0f}" for t in s.tiers), "yes" if s.fast_mode else ""]
            for s in price_sheets().values()]
    if json:
        from .common import print_json

        print_json([s.describe() for s in price_sheets().values()])
    else:
        from .common import table

        table("Price sheets ($/Mtok)", ["name", "provider", "date", "status", "input", "output", "cache read",
                                        "tiers", "fast"], rows)


def _tier_step(boundary, step, s):
    """(boundary tokens, price multiple) from --boundary/--step, else the sheet's long-context step (or None)."""
    from .. import units
    from ..errors import InputError

    st = None
    if boundary is not None or step is not None:
        if boundary is None or step is None:
            raise InputError("--boundary/--step", "give both", "e.g. --boundary 200K --step 1.5")
        st = (units.parse_count(boundary, "--boundary"), float(_num(step, "--step")))
    elif s is not None:
        st = s.step("output") or s.step("input")
    return st


def _read_step(st, s, nact, r, bpp, kv_dtype, covered, payload: dict, ders: list, tables: list):
    """A long-context price step read as KV bytes per token (R35–R37): adds its JSON, derivation and tables."""
    from .. import units
    from ..analyses.lecture import pricing as pr
    from ..explain import fmt

    cov = units.parse_count(covered, "--covered") if covered else None
    ded = pr.deduce_from_step(st[0], st[1], n_active=nact, ratio=r, bytes_per_param=bpp, kv_dtype=kv_dtype,
                              covered=cov, source=s.name if s else "")
    payload["step"] = ded.as_dict()
    ders.append(ded.derivation)
    rows = [["tier boundary", f"{st[0]:,.0f} tokens"], ["price step", f"{st[1]:g}×"],
            ["crossover L*", f"{ded.crossover:,.0f} tokens"], ["KV bytes/token", fmt(ded.kv_bytes_per_token, "B")],
            [f"{kv_dtype} elements/token", f"{ded.kv_elements_per_token:,.0f}"],
            ["high tier covers up to", f"{ded.covered_context:,.0f} tokens"]]
    tables.append(("Long-context step → KV bytes per token (R35–R37)", ["quantity", "value"], rows, None))
    cand = [[c.kind, c.n_kv_layers, c.n_kv_heads, c.d_head, c.kv_dtype, fmt(c.bytes_per_token, "B"),
             fmt(c.read_bytes_per_token, "B"), "" if c.top_k is None else f"{c.top_k:g}"]
            for c in [x for x in ded.candidates if x.kind == "dense"][:8] + [x for x in ded.candidates
                                                                              if x.kind == "sparse"]]
    tables.append(("Architectures near that many bytes (layers×2×d_head×kv_heads×bytes)",
                   ["kind", "KV layers", "KV heads", "d_head/width", "dtype", "stored/token", "read/token", "top-k"],
                   cand, "sparse: DeepSeek MLA latent 576 × 61 layers reading top-k of L*"))
    return ded


def _read_ratio(rho, s, context, ntot, nact, b_for_ratio, r, bpp, payload: dict, ders: list, tables: list) -> None:
    """The output/input price ratio read as decode (R38): adds its JSON, derivation and table."""
    from .. import units
    from ..analyses.lecture import pricing as pr

    rd = pr.deduce_from_ratio(rho, context=units.parse_count(context, "--context"), n_total=ntot, n_active=nact,
                              kv_bytes_per_token=b_for_ratio or 1667.0, ratio=r, bytes_per_param=bpp,
                              source=s.name if s else "")
    payload["out_in"] = rd.as_dict()
    ders.append(rd.derivation)
    tables.append(("Output/input ratio → decode (R38)", ["quantity", "value"],
                   [["output/input", f"{human(rho, 'x')}"], ["decode MFU ≈ 1/ρ", f"{rd.decode_mfu:.0%}"],
                    ["balance batch B*", f"{rd.balance_batch:,.0f}"],
                    ["implied decode batch", f"{human(rd.implied_batch)}"],
                    ["KV/compute at context", f"{human(rd.kv_over_compute)}"]], None))


def _read_fast_mode(s, model, system, fast_context, operating_multiple, payload: dict, ders: list,
                    tables: list) -> None:
    """The sheet's fast mode read as batching (the same answer as `batching fast-mode`): adds JSON, derivations,
    tables."""
    from .. import units
    from ..analyses.lecture import pricing as pr
    from ..analyses.lecture.batching import fast_mode_sensitivity
    from ..specs.hardware import load_hardware
    from ..specs.models import load_model
    from .batching import fast_mode_rows

    m_, hw_ = load_model(model), load_hardware(system)
    fctx = units.parse_count(fast_context, "--fast-context")
    ans = pr.fast_mode_for(s, m_, hw_, context=fctx, operating_multiple=operating_multiple)
    sens = fast_mode_sensitivity(m_, hw_, speedup=ans.speedup, price=ans.price, context=fctx)
    payload["fast_mode"] = ans.as_dict() | {"sensitivity": [a.as_dict() for a in sens]}
    ders += [d.derivation for d in (ans.by_speed, ans.by_price) if d is not None]
    rows, other = fast_mode_rows(ans, sens)
    tables.append((f"Fast mode: {ans.price:g}× price for {ans.speedup:g}× speed, read as batching on {m_.name} "
                   f"({hw_.name}; the same answer as `batching fast-mode`)", ["quantity", "value"],
                   [list(r) for r in rows], None))
    tables.append(("The same question under other assumptions",
                   ["operating point", "batch", "B_op/B*", "weights share", f"{ans.speedup:g}× speed costs",
                    f"{ans.price:g}× price buys"], other,
                   "only the weight fetch is amortized by batching: speed is cheap where compute has headroom "
                   "above B* or KV dominates the step"))


def price_cmd(
    sheet: str = typer.Argument(None, help="Price sheet (e.g. gemini-3.1-pro, claude-opus-4.6); omit with --list."),
    list_: bool = typer.Option(False, "--list", help="List the price sheets."),
    boundary: str = typer.Option(None, "--boundary", help="Long-context tier boundary (tokens) instead of a sheet's."),
    step: str = typer.Option(None, "--step", help="Price multiple above the boundary (e.g. 1.5)."),
    covered: str = typer.Option(None, "--covered", help="Context the high tier covers (default: L* = boundary)."),
    out_in: str = typer.Option(None, "--out-in", help="Output/input price ratio instead of a sheet's."),
    n_active: str = NACT_OPT,
    n_total: str = typer.Option(None, "--n-total", help="Total parameters (default = active: dense)."),
    context: str = typer.Option("8K", "--context", "-L", help="Context for the output/input reading (8K = 8,000, 8Ki = 8,192)."),
    kv_bytes: str = typer.Option(None, "--kv-bytes", help="KV bytes/token for the output/input reading "
                                                          "(default: the step's deduction or 1,667 B)."),
    kv_dtype: str = typer.Option("fp8", "--kv-dtype", callback=dtype_check("kv_dtype"), help="KV element dtype for the architecture count."),
    ratio: str = RATIO_OPT,
    hardware: str = HW_OPT,
    weights_dtype: str = BPP_OPT,
    model: str = typer.Option(None, "--model", "-m", help="Model for the fast-mode batch reading."),
    system: str = typer.Option("gb200-nvl72", "--system", help="System for the fast-mode reading."),
    fast_context: str = typer.Option("8192", "--fast-context",
                                     help="Context for the fast-mode reading (the default of `batching fast-mode`)."),
    operating_multiple: float = typer.Option(2.5, "--operating-multiple", min=0.01, max=1000.0,
                                             help="Fast mode measured from min(this × B*, B_mem) (lecture: 'double "
                                                  "or triple it'; as `batching fast-mode`)."),
    json: bool = JSON_OPT,
    explain: bool = EXPLAIN_OPT,
):
    """Read a price sheet backwards: tier step → KV bytes/token; output/input → decode; fast mode → batch.
    \f
    One parameter per option (typer reads the command's options from its signature)."""
    from .. import units
    from ..errors import InputError
    from ..explain import fmt
    from ..specs.prices import load_price_sheet

    if list_:
        _print_sheets(json)
        return
    s = load_price_sheet(sheet) if sheet else None
    if s is None and boundary is None and out_in is None:
        raise InputError("sheet", "nothing to read", "a sheet name, --boundary/--step, --out-in, or --list")
    r, bpp, rsrc = _ratio_bpp(ratio, hardware, weights_dtype)
    nact = units.parse_count(n_active, "--n-active")
    ntot = units.parse_count(n_total, "--n-total") if n_total else nact
    payload, ders, tables = {"sheet": s.describe() if s else None}, [], []
    if s is not None:  # the sheet read, first (issue 35): every price in $/Mtok, per tier, with its source
        tables.append(_sheet_table(s.describe()))
    assumptions = [["N_active", fmt(nact)], ["N_total", fmt(ntot)], ["hardware ratio", f"{human(r)} ({rsrc})"],
                   ["bytes/param", f"{bpp:g} ({weights_dtype})"]]

    st = _tier_step(boundary, step, s)
    b_for_ratio = units.parse_bytes(kv_bytes, "--kv-bytes") if kv_bytes else None
    if st is not None:
        ded = _read_step(st, s, nact, r, bpp, kv_dtype, covered, payload, ders, tables)
        b_for_ratio = b_for_ratio or ded.kv_bytes_per_token
    rho = float(_num(out_in, "--out-in")) if out_in else (s.output / s.input if s else None)
    if rho is not None:
        _read_ratio(rho, s, context, ntot, nact, b_for_ratio, r, bpp, payload, ders, tables)
    if model and s is not None and s.fast_mode is not None:
        _read_fast_mode(s, model, system, fast_context, operating_multiple, payload, ders, tables)
    payload["assumptions"] = dict(assumptions)
    tables.append(("Assumptions (change with --n-active, --ratio/--hardware, --weights-dtype)", ["assumption", "value"],
                   assumptions, None))
    _emit(payload, ders, json, explain, tables)


def _num(text, field):
    from ..errors import InputError, check_positive

    try:
        v = float(str(text).rstrip("x×"))
    except ValueError:
        raise InputError(field, f"cannot read {text!r}", "a positive number such as 1.5") from None
    return check_positive(v, field, "a positive number such as 1.5")


def _parse_tier(text):
    """'flash=3.84TB,7GB/s,0.0000029' -> Tier."""
    from .. import units
    from ..analyses.lecture.memory_tiers import make_tier
    from ..errors import InputError

    acc = "NAME=CAPACITY,BANDWIDTH,$/GB-HOUR, e.g. flash=3.84TB,7GB/s,0.0000029"
    try:
        name, rest = text.split("=", 1)
        cap, bw, price = [p.strip() for p in rest.split(",")]
        return make_tier(name.strip(), units.parse_bytes(cap, "--tier capacity"),
                         units.parse_bandwidth(bw, "--tier bandwidth"), float(price.replace("$", "")), "--tier")
    except ValueError:
        raise InputError("--tier", f"cannot read {text!r}", acc) from None


def _tiers(hardware, extra):
    from ..analyses.lecture import memory_tiers as mt
    from ..specs.hardware import Chip, load_chip

    c = hardware if isinstance(hardware, Chip) else load_chip(hardware)
    tiers = {t.name: t for t in mt.tiers_for(c)}
    for t in extra:
        tt = _parse_tier(t)
        tiers[tt.name] = tt
    return c, sorted(tiers.values(), key=lambda t: t.drain_s)


def cache_cmd(
    sheet: str = typer.Argument("claude-opus-4.6", help="Price sheet with cache prices."),
    hardware: str = typer.Option("h100", "--hardware", "-H", help="Chip whose HBM price and memory tiers to use."),
    kv_bytes: str = typer.Option("1667", "--kv-bytes", help="KV bytes per token (lecture's deduction: 1,667 B)."),
    n_active: str = NACT_OPT,
    weights_dtype: str = BPP_OPT,
    tier: list[str] = typer.Option([], "--tier", help="Add/override a tier: NAME=CAPACITY,BANDWIDTH,$/GB-HOUR."),
    price: str = USD_OPT,
    json: bool = JSON_OPT,
    explain: bool = EXPLAIN_OPT,
):
    """Cache prices → memory tier: hit discount, write premium as hold price, drain times, break-even holds."""
    from .. import units
    from ..analyses.lecture import memory_tiers as mt
    from ..explain import fmt
    from ..specs.prices import load_price_sheet
    from .common import priced

    hardware = priced(hardware, price).chip if price is not None else hardware

    s = load_price_sheet(sheet)
    b = units.parse_bytes(kv_bytes, "--kv-bytes")
    c, tiers = _tiers(hardware, tier)
    nact = units.parse_count(n_active, "--n-active")
    remat = float(mt.remat_cost(nact, c.gemm_flops(weights_dtype), c.usd_per_hour))
    ded = mt.deduce_cache(s, tiers, bytes_per_token=b)
    be = mt.break_even_table(tiers, b, remat)
    payload = ded.as_dict() | {"remat_usd_per_mtok": remat * 1e6, "break_even": be, "chip": c.name}
    rows = [[t.name, fmt(t.capacity, "B"), fmt(t.bandwidth, "B/s"), fmt(t.drain_s, "s"), f"{human(t.usd_per_gb_hour)}",
             f"{human(float(mt.cost_per_token_hour(b, t.rate)) * 1e6)}"] for t in tiers]
    prem = [[k, f"{human(v['premium'] * 1e6, '$')}", f"{human(v['per_token_hour'] * 1e6, '$')}", f"{human(v['usd_per_gb_hour'], '$')}",
             v["tier_by_drain"], v["tier_distinct"], v["cheapest_by_cost"]] for k, v in ded.premiums.items()]
    tables = [
        (f"Memory tiers ({c.name} share)", ["tier", "capacity", "bandwidth", "drain", "$/GB-h", "$/Mtok-hour held"],
         rows, "HBM priced the lecture's way: chip $/h × fraction of HBM used"),
        (f"{s.name}: cache writes as hold prices (b = {fmt(b, 'B')}/token)",
         ["TTL", "premium $/Mtok", "hold $/Mtok-h", "implied $/GB-h", "nearest drain", "distinct tiers",
          "cheapest by cost"], prem,
         f"cache read = {human(ded.read_fraction, 'x')} base" if ded.read_fraction is not None else None),
        ("Break-even hold times", ["faster", "slower", "hold"],
         [[r_["faster"], r_["slower"], fmt(r_["hold_s"], "s") if r_["hold_s"] is not None else "never"] for r_ in be],
         f"recompute: {human(remat * 1e6, '$')}/Mtok (2·N_active/FLOP/s × chip $/s)"),
        ("Assumptions", ["assumption", "value"], [[k, f"{human(v)}" if isinstance(v, float) else str(v)]
                                                 for k, v in ded.assumptions.items()]
         + [["N_active", fmt(nact)], ["chip", c.name]], None),
    ]
    _emit(payload, [ded.derivation], json, explain, tables)


def context_cmd(
    model: str = typer.Argument(None, metavar="[MODEL]",
                                help="A model: use its own sizes, the roofline and its memory (default: the lecture's "
                                     "abstract 100B model)."),
    n_active: str = NACT_OPT,
    n_total: str = typer.Option(None, "--n-total", help="Total parameters (default = active)."),
    kv_bytes: str = typer.Option("1667", "--kv-bytes", help="KV bytes per token (dense)."),
    batch: str = typer.Option("10K", "--batch", "-b", "-B", help="Decode batch (sequences in flight)."),
    hardware: str = typer.Option("h100", "--hardware", "-H", help="Chip (ratio, FLOP/s, bandwidth)."),
    chips: int = typer.Option(8, "--gpus", "-n", min=1, max=1_000_000, help="GPUs holding the model (HBM capacity)."),
    weights_dtype: str = BPP_OPT,
    target: str = typer.Option("100M", "--target", help="Target context for the what-would-it-take estimate."),
    json: bool = JSON_OPT,
    explain: bool = EXPLAIN_OPT,
):
    """The context wall (R42): crossover, longest context that fits, what 100M tokens would need."""
    from .. import units
    from ..analyses.lecture import context as cx
    from ..explain import fmt
    from ..specs.hardware import hardware_ratio, load_chip
    from .common import human

    c = load_chip(hardware)
    bpp = units.dtype_bytes(weights_dtype, "--weights-dtype")
    B = units.parse_count(batch, "--batch")
    kw = dict(n_active=units.parse_count(n_active, "--n-active"),
              n_total=units.parse_count(n_total, "--n-total") if n_total else None,
              bytes_per_token=units.parse_bytes(kv_bytes, "--kv-bytes"), batch=B,
              ratio=float(hardware_ratio(c, weights_dtype)), bytes_per_param=bpp,
              peak_flops=c.gemm_flops(weights_dtype), mem_bw=c.hbm_bw, hbm_bytes=c.hbm_bytes * chips,
              chips=chips,
              target_context=units.parse_count(target, "--target"))
    extra = {}
    if model:
        from ..specs.hardware import load_hardware
        from ..specs.models import load_model

        m = load_model(model)
        kw.update(n_active=m.active_params, n_total=m.total_params,
                  bytes_per_token=float(m.kv_read_bytes(200e3, "bf16")) / 200e3,
                  attn_flops_per_ctx_token=float(m.attention_flops_per_token(1e6)) / 1e6,
                  weight_bytes=float(m.weight_bytes(None)), label=m.name)
        hw = load_hardware(c)
        mc = cx.max_context(m, hw, gpus=chips, concurrency=B)
        extra = {"roofline_crossover": cx.crossover_for(m, hw, batch=B, chips=chips),
                 "max_context_fit": mc.tokens, "model_max_context": mc.model_limit,
                 "quadratic_onset": cx.quadratic_onset_for(m)}
    w = cx.context_wall(**kw)
    payload = w.as_dict() | extra | {"chip": c.name, "chips": chips}
    rows = [["crossover L* (memory-bound beyond)", f"{w.crossover:,.0f} tokens"],
            ["attention FLOPs = matmul FLOPs at", "n/a" if w.l_quadratic == float("inf") else f"{w.l_quadratic:,.0f}"],
            [f"longest context at batch {B:,.0f} in {chips} GPUs",
             f"{(mc.tokens if model else w.max_context):,.0f} tokens"],
            [f"HBM bandwidth for {w.target_context:,.0f} tokens", f"{fmt(w.bandwidth_needed, 'B/s')} per chip "
                                                                  f"({human(w.bandwidth_multiple, 'x')} today)"],
            [f"HBM for one {w.target_context:,.0f}-token sequence", f"{fmt(w.capacity_needed, 'B')} "
                                                                    f"({human(w.capacity_multiple, 'x')} the domain's free HBM)"]]
    rows += [[f"({model}) {k.replace('_', ' ')}", "—" if v is None else f"{v:,.0f}"]
             for k, v in extra.items() if k != "max_context_fit"]
    warn = mc.warning if model else None
    if warn:
        payload["warning"] = warn
    tables = [("The context wall (R42)", ["quantity", "value"], rows,
               ("max context fit = rackmath.analyses.lecture.context.max_context (the same answer as `racks memory`)"
                + (f"; WARNING: {warn}" if warn else "")) if model else None),
              ("Assumptions", ["assumption", "value"], [[k, f"{human(v)}" if isinstance(v, float) else str(v)]
                                                           for k, v in w.assumptions.items()], None)]
    _emit(payload, [w.derivation], json, explain, tables)


@plot_app.command("price-context")
def plot_price_context_cmd(
    sheet: str = typer.Argument("gemini-3.1-pro", help="Price sheet whose tiers to draw."),
    output: str = typer.Option("price_context.png", "--output", "-o", help=".png or .svg (never overwritten without --force)."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing file."),
    n_active: str = NACT_OPT,
    kv_bytes: str = typer.Option("1667", "--kv-bytes"),
    batch: str = typer.Option("10K", "--batch", "-B"),
    kind: str = typer.Option("output", "--kind", help="Which price to draw (input, output, cache_read)."),
    json: bool = JSON_OPT,
):
    """Cost per token vs context (dense, sliding window, sparse top-k, √L) with a sheet's price tiers over it."""
    import numpy as np

    from .. import units
    from ..analyses.lecture import context as cx
    from ..plotting.pricing import plot_price_context
    from ..specs.prices import load_price_sheet

    from .common import check_output

    check_output(output, force, "output", (".png", ".svg", ".pdf"))
    s = load_price_sheet(sheet)
    n, b, B = units.parse_count(n_active, "--n-active"), units.parse_bytes(kv_bytes, "--kv-bytes"), \
        units.parse_count(batch, "--batch")
    L = np.geomspace(1e3, 1e7, 300)
    p = plot_price_context(L, cx.context_curves(L, batch=B, n_active=n, bytes_per_token=b), sheet=s, kind=kind,
                           crossover=float(cx.crossover_dense(batch=B, n_active=n, bytes_per_token=b)),
                           title=f"{s.name}: {human(n)} active, b = {b:,.0f} B/token, batch {B:,.0f}", path=output)
    from .common import print_json, wrote

    wrote(p)
    if json:
        print_json({"output": str(p), "sheet": s.describe(), "context": L,
                    "curves": cx.context_curves(L, batch=B, n_active=n, bytes_per_token=b)})


@plot_app.command("tiers")
def plot_tiers_cmd(
    hardware: str = typer.Option("h100", "--hardware", "-H"),
    output: str = typer.Option("tiers.png", "--output", "-o", help=".png or .svg (never overwritten without --force)."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing file."),
    kv_bytes: str = typer.Option("1667", "--kv-bytes"),
    n_active: str = NACT_OPT,
    weights_dtype: str = BPP_OPT,
    tier: list[str] = typer.Option([], "--tier", help="Add/override a tier: NAME=CAPACITY,BANDWIDTH,$/GB-HOUR."),
    price: str = USD_OPT,
    json: bool = JSON_OPT,
):
    """Cost per token vs hold time for recompute, HBM, DDR, flash and disk."""
    import numpy as np

    from .. import units
    from ..analyses.lecture import memory_tiers as mt
    from ..plotting.pricing import plot_tiers

    from .common import check_output

    check_output(output, force, "output", (".png", ".svg", ".pdf"))
    from .common import print_json, priced, wrote

    c, tiers = _tiers(priced(hardware, price).chip if price is not None else hardware, tier)
    b = units.parse_bytes(kv_bytes, "--kv-bytes")
    remat = float(mt.remat_cost(units.parse_count(n_active, "--n-active"), c.gemm_flops(weights_dtype),
                                c.usd_per_hour))
    t = np.geomspace(1e-3, 1e7, 300)
    names, costs = mt.tier_costs(b, t, tiers, remat)
    p = plot_tiers(t, names, costs, bytes_per_token=b, path=output,
                   title=f"{c.name}: hold vs retrieve, b = {b:,.0f} B/token")
    wrote(p)
    if json:
        print_json({"output": str(p), "chip": c.name, "hold_s": t, "usd_per_token": dict(zip(names, costs))})


def register(app: typer.Typer) -> None:
    app.command("price")(price_cmd)
    app.command("cache")(cache_cmd)
    app.command("context")(context_cmd)
