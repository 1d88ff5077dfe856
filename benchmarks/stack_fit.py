"""Issue 34's staged fit, measured: silicon from measured kernel curves, then six stack times per stack version
(seven with ``--prefill``: the version's prefill speed η_pf).

    python benchmarks/stack_fit.py                # every table (a few minutes on one core)
    python benchmarks/stack_fit.py --write        # also write specs/data/launch/stack_hosts.toml (--efficiency measured)
    python benchmarks/stack_fit.py --quick        # in-sample tables only
    python benchmarks/stack_fit.py --loso-only    # in sample, and the published records one source out
    python benchmarks/stack_fit.py --lofo-only    # in sample, and the runs with their hardware family out
    python benchmarks/stack_fit.py --logo-only --whatif-recv 30   # what if B200 SGLang ran --scheduler-recv-interval

Prints, per metric (output tok/s/GPU, TPOT, mean TTFT, median TTFT): the InferenceMAX records (``fit = false``) and
the published records (``fit = true``) under
  0. today's presets (silicon and host times fitted jointly: the baseline),
  1. silicon from the curves (for a chip without curves whose records span two or more groups — MI355X — τ_k and the
     MLA kernel scale inferred from its records: ``stack.fit_silicon``), the presets' host times (no refit),
  2. silicon from the curves, host times fitted per stack version — in sample, leaving one InferenceMAX group out,
     leaving one stack version out, leaving one hardware family out, leaving one published source out;
and the parameter and record counts per stack version (rackmath.analyses.fitting.stack).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from rackmath.analyses.fitting import stack as S
from rackmath.analyses.fitting import stack_folds as F
from rackmath.analyses.fitting.calibration import fitted_records
from rackmath.analyses.fitting.validation import records
from rackmath.engine.efficiency import default_efficiency


def inferencemax(allrecs) -> list:
    """The InferenceMAX runs' records: not fitted into the presets (``fit = false``), none excluded or derived."""
    return [r for r in allrecs if not r.fit and r.exclude is None and r.status != "derived"]


def table(title, recs, pred):
    from rackmath.specs.kernels import kernel_table

    print(f"\n{title}")
    print(f"  {'metric':18s} {'chips':9s} {'records':>7s} {'median |err|':>12s} {'signed':>8s} {'within 2x':>10s}")
    parts = {"all": recs, "curves": [r for r in recs if kernel_table(r.chip) is not None],
             "no curves": [r for r in recs if kernel_table(r.chip) is None]}
    reps = {k: F.report(v, pred) for k, v in parts.items() if v}
    for c in ("output tok/s/GPU", "TPOT", "TTFT", "TTFT median"):
        for k, rep in reps.items():
            if c in rep:
                r = rep[c]
                print(f"  {c:18s} {k:9s} {r['records']:7d} {r['median_abs'] * 100:11.1f}% "
                      f"{r['median_signed'] * 100:+7.1f}% {r['within_2x']:5d}/{r['records']}")
    sys.stdout.flush()
    return reps["all"]


def by_group(recs, pred):
    """Median |error| (signed) of each InferenceMAX group and metric."""
    groups = sorted({r.group for r in recs})
    print(f"  {'group':36s} {'tok/s/GPU':>16s} {'TPOT':>16s} {'TTFT':>16s} {'TTFT median':>16s}")
    for g in groups:
        rep = F.report([r for r in recs if r.group == g], pred)
        cells = [f"{rep[c]['median_abs'] * 100:5.0f}% ({rep[c]['median_signed'] * 100:+4.0f}%)" if c in rep else ""
                 for c in ("output tok/s/GPU", "TPOT", "TTFT", "TTFT median")]
        print(f"  {g:36s} " + " ".join(f"{c:>16s}" for c in cells))


def all_records_table(title, recs, pred):
    e = np.array([pred[r.id] / r.value - 1.0 for r in recs if r.id in pred])
    ok = np.isfinite(e)
    print(f"{title}: {len(e)} records, median |error| {np.median(np.abs(e[ok])) * 100:.1f}%, "
          f"within 2x {int(np.sum(ok & (e + 1 <= 2) & (e + 1 >= 0.5)))}/{len(e)}")


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--one-at-a-time", action="store_true",
                    help="TPOT on H200 / B200 / GB200 with one silicon number at a time from the curves")
    ap.add_argument("--hierarchical", action="store_true",
                    help="each version's times with its engine's pooled fit as start and prior: in sample and one "
                         "group out")
    ap.add_argument("--logo-only", action="store_true", help="in-sample and leave-one-group-out tables only")
    ap.add_argument("--lofo-only", action="store_true",
                    help="in-sample and leave-one-hardware-family-out tables only (all runs and each family's)")
    ap.add_argument("--loso-only", action="store_true",
                    help="in-sample and leave-one-source-out (published records) tables only")
    ap.add_argument("--dump", metavar="PATH", help="also write each InferenceMAX record's in-sample and one-group-out "
                                                   "prediction as JSON (benchmarks/peer_aiconfigurator.py --logo); "
                                                   "with --loso-only each published record's in-sample and "
                                                   "one-source-out prediction")
    ap.add_argument("--routing", action="store_true",
                    help="the routed experts at the measured routing share s(T) (specs.kernels.MEASURED_ROUTING: "
                         "tried, off by default; docs/stacks.md)")
    ap.add_argument("--prefill", action="store_true",
                    help="also fit each version's prefill speed η_pf (stack.FIT_PREFILL: tried, off by default; "
                         "docs/stacks.md)")
    ap.add_argument("--whatif-recv", type=int, metavar="N",
                    help="what if the B200 SGLang runs from C = 16 up had been launched with "
                         "--scheduler-recv-interval N (docs/stacks.md, 'What stalls': an inference from the rows, not "
                         "a flag anyone read; never written with --write)")
    a = ap.parse_args(argv)
    if a.whatif_recv and a.write:
        ap.error("--whatif-recv is a what-if: not with --write")
    S.FIT_PREFILL = a.prefill
    if a.routing:
        import rackmath.specs.kernels as K

        K.MEASURED_ROUTING = True
    t0 = time.time()
    allrecs = records()
    if a.whatif_recv:
        print(f"what if: {whatif_recv(allrecs, a.whatif_recv)} B200 SGLang records from C = 16 at "
              f"--scheduler-recv-interval {a.whatif_recv}")
    imx = inferencemax(allrecs)
    pub = fitted_records(allrecs)
    recs = imx + pub
    preset = default_efficiency("h200")
    starts = {e: S.host_vector(preset, e) for e in ("trtllm", "vllm", "sglang", "vllm_v0", "generic")}
    hosts0 = {S.version_of(r): starts[S.engine_of(S.version_of(r))] for r in recs}

    base = S.Predictor(measured=False)
    sil = {c: S.fit_silicon(recs, S.Predictor(True), starts, c) for c in S.inferable_chips(recs)}
    meas = S.Predictor(measured=True, silicon=sil)
    for c, v in sil.items():
        rs = [r for r in recs if r.chip == c]
        print(f"silicon inferred for {c} from {len(rs)} records in {len({r.group for r in rs})} groups: "
              + ", ".join(f"{k} = {x:.4g}" for k, x in v.items()))
    if a.one_at_a_time:
        return one_at_a_time(imx, hosts0)
    if a.hierarchical:
        hosts = {v: S.fit_version(recs, meas, starts, v, hierarchical=True) for v in sorted({S.version_of(r) for r in recs})}
        ph = dict(zip((r.id for r in recs), S.predict(recs, meas, hosts)))
        table("hierarchical: measured silicon, version times around the engine's — InferenceMAX, in sample", imx, ph)
        all_records_table("hierarchical — published records, in sample", pub, ph)
        lh = F.leave_one_group_out(recs, meas, starts, hierarchical=True, infer_silicon=True)
        table("hierarchical: leave one InferenceMAX group out", imx, lh)
        by_group(imx, lh)
        print(f"[{time.time() - t0:.0f} s]")
        return
    p0 = dict(zip((r.id for r in recs), S.predict(recs, base, hosts0)))
    table("0. today's presets — InferenceMAX (fit = false, out of sample)", imx, p0)
    all_records_table("0. today's presets — published records (in sample)", pub, p0)
    p1 = dict(zip((r.id for r in recs), S.predict(recs, meas, hosts0)))
    table("1. silicon from measured curves, presets' host times — InferenceMAX", imx, p1)
    all_records_table("1. silicon from measured curves, presets' host times — published records", pub, p1)
    print(f"[{time.time() - t0:.0f} s]")

    hosts = S.fit_all(recs, meas, starts)
    p2 = dict(zip((r.id for r in recs), S.predict(recs, meas, hosts)))
    table("2. measured silicon + host times per stack version — InferenceMAX, in sample", imx, p2)
    all_records_table("2. measured silicon + host times per stack version — published records, in sample", pub, p2)
    print(f"[{time.time() - t0:.0f} s]")
    print("\nper stack version: records, fitted parameters, t_sched, τ_seq, τ_eager, t_request, τ_stack, t_warm, η_pf, "
          "η_wave")
    by_v = {}
    for r in recs:
        by_v.setdefault(S.version_of(r), []).append(r)
    for v in sorted(by_v):
        h = hosts[v]
        print(f"  {v:32s} {len(by_v[v]):4d} rec  {S.fitted_count()} par  {h[0] * 1e3:6.3f} ms {h[1] * 1e6:6.2f} µs "
              f"{h[2] * 1e6:6.2f} µs {h[3] * 1e3:7.2f} ms {h[4] * 1e6:6.2f} µs {h[5]:6.2f} s {h[6]:5.2f} {h[7]:5.2f}")
    if a.write:
        write(hosts, by_v)
        write_silicon(sil, recs)
    if a.quick:
        return
    if a.loso_only:
        loso = loso_table(recs, pub, meas, starts)
        if a.dump:
            Path(a.dump).write_text(json.dumps({r.id: {"in_sample": float(p2[r.id]), "one_source_out": float(loso[r.id])}
                                                for r in pub if r.id in loso}))
            print(f"wrote {a.dump}")
        print(f"[{time.time() - t0:.0f} s]")
        return
    if a.lofo_only:
        lofo_tables(recs, imx, meas, starts)
        print(f"[{time.time() - t0:.0f} s]")
        return
    logo = F.leave_one_group_out(recs, meas, starts, infer_silicon=True)
    table("2. leave one InferenceMAX group out (model × chip × framework), measured silicon", imx, logo)
    by_group(imx, logo)
    if a.dump:
        Path(a.dump).write_text(json.dumps({r.id: {"in_sample": float(p2[r.id]), "one_group_out": float(logo[r.id])}
                                            for r in imx}))
        print(f"wrote {a.dump}")
    print(f"[{time.time() - t0:.0f} s]")
    if a.logo_only:
        return
    imx_versions = sorted({S.version_of(r) for r in imx})
    lovo = F.leave_one_version_out(recs, meas, starts, imx_versions, infer_silicon=True)
    table("2. leave one stack version out (InferenceMAX versions), measured silicon", imx, lovo)
    lofo_tables(recs, imx, meas, starts)
    loso_table(recs, pub, meas, starts)
    hosts_ctrl = S.fit_all(recs, base, starts)
    pc = dict(zip((r.id for r in recs), S.predict(recs, base, hosts_ctrl)))
    table("control: presets' silicon + host times per stack version — InferenceMAX, in sample", imx, pc)
    all_records_table("control: presets' silicon + host times per stack version — published, in sample", pub, pc)
    logo_c = F.leave_one_group_out(recs, base, starts)
    table("control: leave one InferenceMAX group out, presets' silicon", imx, logo_c)
    print(f"[{time.time() - t0:.0f} s]")


def whatif_recv(recs, n: int) -> int:
    """Set ``recv_interval`` n on the aggregated B200 SGLang InferenceMAX records from C = 16 up (in memory); returns
    how many. The inference of docs/stacks.md ("What stalls"): their median TTFT exceeds the C = 4 run's by 11–17
    decode steps from C = 16, what (30 − 1) / 2 would give."""
    hit = [r for r in recs if not r.fit and r.chip == "b200" and (r.stack or "").startswith("sglang")
           and not r.inputs.get("attention_dp") and float(r.inputs.get("concurrency", 0)) >= 16]
    for r in hit:
        r.inputs["recv_interval"] = n
    return len(hit)


def lofo_tables(recs, imx, meas, starts):
    """The InferenceMAX runs with their chip's hardware family left out (stack_folds.leave_one_family_out): all of them,
    then each family's."""
    lofo = F.leave_one_family_out(recs, meas, starts, infer_silicon=True)
    table("2. leave one hardware family out (hopper, blackwell, amd), measured silicon", imx, lofo)
    for fam in sorted({r.hardware_family for r in imx}):
        table(f"2. leave one hardware family out: the {fam} runs", [r for r in imx if r.hardware_family == fam], lofo)
    return lofo


def loso_table(recs, pub, meas, starts):
    """The published records with their source left out (stack_folds.leave_one_source_out): overall and per source."""
    loso = F.leave_one_source_out(recs, meas, starts, infer_silicon=True)
    all_records_table("2. leave one published source out, measured silicon — published records", pub, loso)
    by = {}
    for r in pub:
        if r.id in loso:
            by.setdefault(r.source_group, []).append(loso[r.id] / r.value - 1.0)
    for src, e in sorted(by.items(), key=lambda x: -len(x[1])):
        e = np.array(e)
        print(f"  {src:32s} {len(e):3d} rec  {np.median(np.abs(e)) * 100:5.1f}% ({np.median(e) * 100:+5.1f}%)")
    return loso


def one_at_a_time(imx, hosts0):
    """Median signed TPOT error per NVIDIA chip, and median |error| over their runs' three metrics, with the presets'
    silicon except one number from the curves (the presets' host times)."""
    from dataclasses import replace

    from rackmath.engine.efficiency import SILICON_FIELDS

    nv = [r for r in imx if r.chip in ("h200", "b200", "gb200")]
    for field in (None, "all") + SILICON_FIELDS:
        p = S.Predictor(measured=field is not None)
        if field not in (None, "all"):
            measured = p.eff

            def eff(rec, _m=measured, _f=field):
                return replace(default_efficiency(rec.chip), **{_f: getattr(_m(rec), _f)})

            p.eff = eff
        pred = S.predict(nv, p, hosts0)
        cells = [f"{c} TPOT {np.median([q / r.value - 1 for r, q in zip(nv, pred) if r.chip == c and r.metric == 'tpot_s']) * 100:+4.0f}%"
                 for c in ("h200", "b200", "gb200")]
        e = np.abs(np.array([q / r.value - 1 for r, q in zip(nv, pred)]))
        print(f"  {str(field or 'presets'):22s} " + "  ".join(cells) + f"  all metrics {np.median(e) * 100:.1f}%")


def write(hosts, by_v):
    path = Path(__file__).resolve().parents[1] / "src/rackmath/specs/data/launch/stack_hosts.toml"
    lines = ["# Host times per stack version, fitted with the silicon fixed from measured kernel curves (issue 34):",
             "# written by `python benchmarks/stack_fit.py --write` (rackmath.analyses.fitting.stack). Read by",
             "# --efficiency measured (engine.efficiency.for_stack); the fitted presets do not read them.",
             "# Each version: its seven stack numbers (eight with --prefill) fitted on its own records: scheduler",
             "# time per step, host time per sequence per step, eager dispatch per kernel, per-request time,",
             "# kernel_s, the stack's time per kernel on top of the silicon's floor τ, warm_s, its warm-up paid",
             "# once by a closed-loop client's first wave (mean TTFT over median TTFT), and wave_eta, the speed of",
             "# that wave's prefill passes relative to its steady ones (where not 1); prefill_eta, its prefill",
             "# speed relative to the kernel curves, where fitted (--prefill). Records on chips without",
             "# measured curves are predicted at their fitted preset's silicon, with τ_k and the MLA kernel scale",
             "# inferred from their records where specs/data/kernels/inferred/ has them. Keys starting with \"_\"",
             "# are not catalog kinds.", ""]
    from rackmath.specs.stacks import known_labels, SPEED_KEYS

    index = {"prefill": S.PREFILL, "wave": S.WAVE}
    speeds = [(key, index[k]) for key, k in SPEED_KEYS.items()]  # written where not 1 (the curves' speed)

    for v in sorted(hosts):
        if v not in known_labels():  # a published record's unlisted version: serve never names it
            continue
        h = hosts[v]
        lines += ["[[_stack_host]]", f'stack_version = "{v}"', f"sched_s = {h[0]:.4g}", f"seq_s = {h[1]:.4g}",
                  f"eager_s = {h[2]:.4g}", f"request_s = {h[3]:.4g}", f"kernel_s = {h[4]:.4g}",
                  f"warm_s = {h[5]:.4g}"] + [f"{key} = {h[j]:.4g}" for key, j in speeds if h[j] != 1.0] + [
                  f"records = {len(by_v[v])}",
                  f'source = "fitted by benchmarks/stack_fit.py on the {len(by_v[v])} records of {v} '
                  f'(specs/data/records/inferencemax.toml), silicon from specs/data/kernels"', ""]
    path.write_text("\n".join(lines))
    print(f"wrote {path}")


def write_silicon(sil, recs):
    """specs/data/kernels/inferred/<chip>.toml: the silicon inferred from each chip's records (stage 1)."""
    d = Path(__file__).resolve().parents[1] / "src/rackmath/specs/data/kernels/inferred"
    d.mkdir(exist_ok=True)
    for chip, v in sil.items():
        rs = [r for r in recs if r.chip == chip]
        groups = sorted({r.group for r in rs if r.group})
        what = ("no measured kernel curves exist for it, so its floor time per kernel and its MLA kernel scale are"
                if "kernel_latency_s" in v else "its kernel curves measure the rest, not the kernels a stack's MLA "
                                                 "block runs, so its MLA kernel scale is")
        text = "\n".join([
            f"# Silicon of {chip} inferred from serving records, not measured (issue 34): {what}",
            "# fitted on its InferenceMAX records, every stack at its engine's preset host times",
            "# (rackmath.analyses.fitting.stack.fit_silicon), written by `python benchmarks/stack_fit.py --write`.",
            "# Its other silicon numbers are its curves' or else its fitted preset's. Read by --efficiency measured",
            "# (specs.kernels.inferred). Out of sample (one group left out, refitted without it): docs/stacks.md.",
            "# Keys starting with \"_\" are not catalog kinds.", "",
            "[_inferred]", f'chip = "{chip}"', *(f"{k} = {x:.4g}" for k, x in v.items()),
            f"records = {len(rs)}", f"groups = {len(groups)}",
            f'source = "fitted by benchmarks/stack_fit.py on the {len(rs)} serving records of {chip} '
            f'({sum(1 for r in rs if r.group)} InferenceMAX, specs/data/records/inferencemax.toml; groups: '
            f'{"; ".join(groups)})"', ""])
        (d / f"{chip}.toml").write_text(text)
        print(f"wrote {d / (chip + '.toml')}")


if __name__ == "__main__":
    main()
