"""Screen a variant of the calibration out of sample (maintainers' tool; docs/validation.md, "Screening a variant";
what was screened and not kept: docs/history.md, "Tried and not kept").

    python benchmarks/screen.py --json base.json                           # the shipped fit, leave one source out
    python benchmarks/screen.py --rounds 6 --base base.json                # a finer grid, compared with base
    python benchmarks/screen.py --param eager_sglang_s:hi=3e-5 --no-starts --base base.json
    python benchmarks/screen.py --weighting sqrt --base base.json          # sources weighted 1/sqrt(records)
    python benchmarks/screen.py --hinge 1 --base base.json                 # records outside 2x pull again
    python benchmarks/screen.py --drop gemm_half_tokens --schemes source,hardware,model

A variant is the shipped ``calibration.default_spec()`` with some of its fitter settings or parameter declarations
changed; nothing else (the step model itself changes in code, run from a git worktree at that commit). The script
refits it on every fitted record, then once per held-out group (``crossval.cross_validate``, the same fitter
``rackmath validate --cv`` runs), and prints one table row: fitted parameters, records, sources; the out-of-sample
median |error|, p90, records within 2× and within 15 %, the worst ratio; and the in-sample figures with the
training objective. With ``--base`` (a JSON this script or ``rackmath validate --cv --json`` wrote) it also lists the
records whose held-out ratio moved most, and those that crossed 2× or 15 %.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import fields, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def _fail(message: str):
    """A one-line error, exit status 2 (as argparse's own)."""
    print(f"screen.py: error: {message}", file=sys.stderr)
    raise SystemExit(2)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage block
        _fail(message)


def _value(text: str):
    """A Param field value from the command line: a number, true/false, or a JSON list (priors)."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        _fail(f"--param value {text!r}: a number, true/false or JSON")


def _pairs(text: str):
    """``A=1,B=[[null, 0.8]]`` → ["A=1", "B=[[null, 0.8]]"]: commas inside brackets belong to the value."""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += (ch in "[{") - (ch in "]}")
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return [x for x in out + [cur] if x]


def _overrides(items, names, field_names):
    """``NAME:FIELD=VALUE[,FIELD=VALUE…]`` → {name: {field: value}}."""
    out = {}
    for item in items:
        name, _, rest = item.partition(":")
        if name not in names:
            _fail(f"--param {item!r}: unknown parameter {name!r}; accepted: " + ", ".join(names))
        for kv in _pairs(rest):
            key, eq, val = kv.partition("=")
            if not eq or key not in field_names:
                _fail(f"--param {item!r}: expected FIELD=VALUE with FIELD one of " + ", ".join(sorted(field_names)))
            v = _value(val)
            if key == "prior":  # ((family or null, value), …)
                ok = isinstance(v, list) and all(isinstance(p, list) and len(p) == 2 and (
                    p[0] is None or isinstance(p[0], str)) and isinstance(p[1], (int, float)) and p[1] > 0 for p in v)
                if not ok:
                    _fail(f"--param {item!r}: prior is a JSON list of [family or null, value > 0] pairs")
                v = tuple(tuple(p) for p in v)
            elif key == "families":  # [family, …]; [] = every family
                if not (isinstance(v, list) and all(isinstance(f, str) for f in v)):
                    _fail(f"--param {item!r}: families is a JSON list of family names ([] = every family)")
                v = tuple(v)
            elif key == "per_family" and not isinstance(v, bool):
                _fail(f"--param {item!r}: per_family is true or false")
            elif key not in ("per_family", "families") and (isinstance(v, bool) or not isinstance(v, (int, float))):
                _fail(f"--param {item!r}: {key} is a number")
            elif key in ("prior_sigma", "prior_weight") and not (math.isfinite(v) and v > 0):
                _fail(f"--param {item!r}: {key} is a number above 0")
            elif key == "decimals":
                if v != int(v) or not 0 <= v <= 12:
                    _fail(f"--param {item!r}: decimals is a whole number from 0 to 12")
                v = int(v)
            out.setdefault(name, {})[key] = v
    return out


def variant(args):
    """The shipped spec with the command line's changes."""
    from rackmath.analyses.fitting import calibration as cal

    spec = cal.default_spec()
    names = spec.names
    field_names = {f.name for f in fields(cal.Param)} - {"name"}
    over = _overrides(args.param, names, field_names)
    for d in args.drop:
        if d not in names:
            _fail(f"--drop {d!r}: unknown parameter; accepted: " + ", ".join(names))
    params = tuple(replace(p, **over.get(p.name, {})) for p in spec.params if p.name not in args.drop)
    for p in params:
        nums = (p.lo, p.hi, p.x0, p.width)
        if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in nums) or not (
                p.lo <= p.x0 <= p.hi and p.width > 0):
            _fail(f"--param {p.name}: needs finite lo ≤ x0 ≤ hi and width > 0 (got lo={p.lo}, x0={p.x0}, "
                  f"hi={p.hi}, width={p.width})")
    bounds = {p.name: (p.lo, p.hi) for p in params}
    starts = () if args.no_starts else tuple(  # the extra starts, inside the variant's bounds
        s2 for s2 in ({k: min(max(v, bounds[k][0]), bounds[k][1]) for k, v in s.items() if k in bounds}
                      for s in spec.starts) if s2)
    kw = dict(params=params, starts=starts)
    if args.rounds:
        kw["rounds"] = args.rounds
    if args.sweeps:
        kw["sweeps"] = args.sweeps
    if args.weighting:
        kw["weighting"] = args.weighting
    if getattr(args, "hinge", None) is not None:
        kw["outside_2x_slope"] = args.hinge
    return replace(spec, **kw)


def _ratio(row):
    return row["predicted"] / row["measured"]


def row_summary(res, scheme):
    rows = res[scheme]["records"]
    s = res[scheme]["summary"]
    within15 = sum(abs(r["error"]) <= 0.15 for r in rows)
    return s, within15


def compare(res, base, scheme, top):
    """Records whose held-out ratio moved most against ``base``, and those that crossed 2× or 15 %."""
    before = {r["id"]: r for r in base[scheme]["records"]}
    moved = []
    for r in res[scheme]["records"]:
        b = before.get(r["id"])
        if b is None:
            continue
        moved.append((abs(math.log(_ratio(r))) - abs(math.log(_ratio(b))), r["id"], _ratio(b), _ratio(r)))
    moved.sort(key=lambda x: -abs(x[0]))
    print(f"\nheld-out ratio (predicted / measured), base → variant; the {top} that moved most:")
    for d, rid, a, c in moved[:top]:
        print(f"  {rid:36s} {a:6.2f} → {c:6.2f}   {'better' if d < 0 else 'worse'}")
    l2 = math.log(2)
    into = [m[1] for m in moved if abs(math.log(m[3])) <= l2 < abs(math.log(m[2]))]
    out = [m[1] for m in moved if abs(math.log(m[2])) <= l2 < abs(math.log(m[3]))]
    in15 = [m[1] for m in moved if abs(m[3] - 1) <= 0.15 < abs(m[2] - 1)]
    out15 = [m[1] for m in moved if abs(m[2] - 1) <= 0.15 < abs(m[3] - 1)]
    print(f"into 2×: {', '.join(into) or '—'}\nout of 2×: {', '.join(out) or '—'}")
    print(f"into 15 %: {', '.join(in15) or '—'}\nout of 15 %: {', '.join(out15) or '—'}")


def main(argv=None) -> int:
    ap = _Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--param", action="append", default=[], metavar="NAME:FIELD=VALUE[,FIELD=VALUE]",
                    help="change a declared parameter (lo, hi, x0, width, per_family, families, decimals, prior, "
                         "prior_sigma, prior_weight); repeatable")
    ap.add_argument("--drop", action="append", default=[], metavar="NAME",
                    help="leave a parameter out of the fit (it keeps the Efficiency default); repeatable")
    ap.add_argument("--rounds", type=int, help="refinement rounds (shipped: engine.efficiency.FIT_ROUNDS or 4)")
    ap.add_argument("--sweeps", type=int, help="sweeps per round (shipped: FIT_SWEEPS or 1)")
    ap.add_argument("--weighting", choices=("record", "source", "sqrt"), help="how records weigh in the objective")
    ap.add_argument("--no-starts", action="store_true", help="descend from the declared x0 only (no FIT_STARTS)")
    ap.add_argument("--hinge", type=float, metavar="SLOPE",
                    help="add SLOPE·max(0, |log(p/m)| − log 2) to each record's loss (records outside 2× pull again)")
    ap.add_argument("--schemes", default="source", help="comma list of source, hardware, model, loo")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes for the folds")
    ap.add_argument("--base", type=Path, help="a cross-validation JSON to compare with")
    ap.add_argument("--top", type=int, default=20, help="records listed by --base")
    ap.add_argument("--json", type=Path, help="write the whole cross-validation result here (a new file)")
    a = ap.parse_args(argv)
    for n, v in (("--rounds", a.rounds), ("--sweeps", a.sweeps)):
        if v is not None and not 1 <= v <= 12:
            ap.error(f"{n} {v}: a whole number from 1 to 12")
    if a.hinge is not None and not (math.isfinite(a.hinge) and 0 <= a.hinge <= 100):
        ap.error(f"--hinge {a.hinge}: a number from 0 to 100")
    if not 1 <= a.jobs <= 64:
        ap.error(f"--jobs {a.jobs}: a whole number from 1 to 64")
    if a.top < 0:
        ap.error(f"--top {a.top}: a number of records ≥ 0")
    if a.json is not None and not a.json.parent.is_dir():
        ap.error(f"--json {a.json}: no folder {a.json.parent}")
    if a.json is not None and a.json.exists():
        ap.error(f"--json {a.json}: exists; give a new file (nothing is overwritten)")
    base = None
    if a.base is not None:
        try:
            base = json.loads(a.base.read_text())
        except (OSError, ValueError) as e:
            ap.error(f"--base {a.base}: not a readable cross-validation JSON ({type(e).__name__})")
        if not isinstance(base, dict) or not any(isinstance(base.get(k), dict) and isinstance(
                base[k].get("records"), list) for k in ("source", "hardware", "model", "loo")):
            ap.error(f"--base {a.base}: no held-out records in it (write one with --json or `rackmath validate --cv "
                     "--json`)")
    from rackmath.analyses.fitting import calibration as cal
    from rackmath.analyses.fitting import crossval as cv

    schemes = tuple(s for s in a.schemes.split(",") if s)
    bad = [s for s in schemes if s not in cv.CV_SCHEMES]
    if bad or not schemes:
        ap.error(f"--schemes {a.schemes!r}: accepted: {', '.join(cv.CV_SCHEMES)}")
    spec = variant(a)
    t = time.time()
    res = cv.cross_validate(spec=spec, schemes=schemes, jobs=a.jobs)
    res["wall_s"] = time.time() - t
    res["screen_argv"] = sys.argv[1:] if argv is None else list(argv)
    if a.json is not None:
        with open(a.json, "x") as fh:
            json.dump(res, fh, default=str)
    c = res["counts"]
    ins = res["in_sample"]
    print(f"variant: {' '.join(res['screen_argv']) or 'the shipped spec'}")
    print(f"{cal.describe_counts(c)}; {res['wall_s']:.0f} s")
    s = ins["summary"]
    w15 = sum(abs(r["error"]) <= 0.15 for r in ins["records"])
    print(f"in-sample: median {s['median_abs_error']:.1%}, within 2× {s['within_2x']}, within 15% {w15}, "
          f"worst {s['worst_ratio']:.1f}×, objective {ins['fit']['objective_mean_abs_log']:.4f}")
    for sc in schemes:
        s, w15 = row_summary(res, sc)
        print(f"{res[sc]['label']}: median {s['median_abs_error']:.1%}, p90 {s['p90_abs_error']:.0%}, "
              f"within 2× {s['within_2x']}, within 15% {w15}, worst {s['worst_ratio']:.1f}×")
        if base is not None and isinstance(base.get(sc), dict) and isinstance(base[sc].get("records"), list):
            compare(res, base, sc, a.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
