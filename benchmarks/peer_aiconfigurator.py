"""Peer comparison: NVIDIA's aiconfigurator and rackmath on the same InferenceMAX rows (issue 34, item 6).

    python3 -m venv /tmp/aic-venv                                   # its OWN venv: never rackmath's
    /tmp/aic-venv/bin/pip install aiconfigurator==0.12.0            # the SDK + CLI layer; pulls aiconfigurator-core
    /tmp/aic-venv/bin/python benchmarks/peer_aiconfigurator.py      # both error tables (~8 min the first time)
    /tmp/aic-venv/bin/python benchmarks/peer_aiconfigurator.py --limit 20 --json
    python benchmarks/stack_fit.py --logo-only --dump /tmp/logo.json  # (rackmath's venv) then, for the column of
    /tmp/aic-venv/bin/python benchmarks/peer_aiconfigurator.py --logo /tmp/logo.json   # predictions out of sample

aiconfigurator (PyPI ``aiconfigurator``, Apache-2.0; ``aiconfigurator-core`` holds its measured per-operator tables)
is asked through its own public path for InferenceX/InferenceMAX records: ``sdk.config_adapter.adapt_config``
(``InferenceXSource``: hardware, framework, model alias, precision, layout, concurrency) lowered by
``to_cli_estimate_kwargs`` and estimated by ``cli.api.cli_estimate`` — the programmatic ``aiconfigurator cli
estimate``. The adapter fails closed (AMD chips, layouts it cannot lower) and the estimate may refuse (OOM, missing
perf data); every refusal is counted with its reason. Inputs given to it exactly as rackmath's records state them
(``specs/data/records/inferencemax.toml``): lengths 0.9 × nominal (the client draws them between 0.8× and 1×), MTP
rows one draft token at acceptance 1.85 tokens a step (``nextn 1``, ``nextn_accepted 0.85``), the backend version
left to aiconfigurator (its database has one version per stack, newer than the rows'; the table says which).
Disaggregated rows: output tok/s per **decode** GPU on both sides (aiconfigurator's ``tokens/s`` / decode GPUs).

rackmath runs in a subprocess (``rackmath validate --json --id 'IMX-*'``, the default presets and ``--efficiency
measured``) with this checkout's ``src`` first on PYTHONPATH, so nothing of rackmath is imported into this venv.
``--efficiency measured`` predicts with the stack host times fitted on every InferenceMAX row, these rows too (in
sample); ``--logo`` adds the same path with each row's group (model × chip × framework) left out of the fit.
The command is ``--rackmath`` or ``$RACKMATH``, else ``rackmath`` on PATH, else ``.venv/bin/rackmath`` here.

Errors as ``rackmath validate``: predicted / measured − 1; "within 2×" is 0.5 ≤ ratio ≤ 2. aiconfigurator's
estimates are cached per row under /tmp (``--cache``), keyed by the package version and the estimate's inputs.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import logging
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROW_CANDIDATES = [ROOT.parent / "shared" / "reference" / "inferencemax" / "rows.jsonl",
                  ROOT.parent.parent / "shared" / "reference" / "inferencemax" / "rows.jsonl"]
LENGTH_RATIO = 0.9  # the records' assumption (docs/stacks.md, "lengths 0.9 × nominal")
MTP_NEXTN, MTP_ACCEPTED = 1, 0.85  # the records' assumption: one draft token, 1.85 tokens a step
#: InferenceMAX names → the aliases aiconfigurator's InferenceX adapter reads.
HW_ALIAS = {"b200-trt": "b200"}
MODEL_ALIAS = {"gptoss": "gptoss120b"}
METRICS = (("out", "output tok/s/GPU"), ("tpot", "TPOT"), ("ttft", "TTFT"))
PREDICTORS = (("aic", "aiconfigurator"), ("rm", "rackmath"), ("rm_measured", "rackmath --efficiency measured"))


def fail(msg: str) -> SystemExit:
    """A one-line error on stderr; exit status 2 (bad input)."""
    print(f"error: {msg}", file=sys.stderr)
    return SystemExit(2)


def find_rows(path: str | None) -> Path:
    for p in ([Path(path)] if path else ROW_CANDIDATES):
        if p.is_file():
            return p
    raise fail(f"--rows: no rows.jsonl at {path or ' or '.join(map(str, ROW_CANDIDATES))}")


def truthy(v) -> bool:
    return str(v).lower() == "true"


def chip_of(row: dict) -> str:
    return HW_ALIAS.get(row["hw"], row["hw"]).split("-")[0]


def adapter_config(row: dict) -> dict:
    """The InferenceX DB-record fields aiconfigurator's adapter reads, from one rows.jsonl row."""
    cfg = {"hardware": HW_ALIAS.get(row["hw"], row["hw"]), "framework": row["framework"],
           "model": MODEL_ALIAS.get(row["infmax_model_prefix"], row["infmax_model_prefix"]),
           "precision": row["precision"], "spec_method": row["spec_decoding"], "disagg": bool(row["disagg"])}
    if row["disagg"]:
        for side in ("prefill", "decode"):
            cfg.update({f"{side}_tp": row[f"{side}_tp"], f"{side}_ep": row[f"{side}_ep"],
                        f"{side}_dp_attention": truthy(row[f"{side}_dp_attention"]),
                        f"{side}_num_workers": row[f"{side}_num_workers"], f"num_{side}_gpu": row[f"num_{side}_gpu"]})
    else:  # an aggregated server is the adapter's one decode worker of tp GPUs
        cfg.update(decode_tp=row["tp"], decode_ep=row["ep"], decode_dp_attention=truthy(row["dp_attention"]),
                   decode_num_workers=1, num_decode_gpu=row["tp"])
    return cfg


def reason_of(text: str) -> str:
    """A refusal message with its numbers and names folded, so that like refusals count together."""
    first = text.strip().splitlines()[0] if text.strip() else "no message"
    first = re.sub(r"'[^']*'", "'…'", first)
    return re.sub(r"\b\d+(\.\d+)?\b", "N", first)[:110]


def aic_estimate(row: dict, version: str) -> dict:
    """aiconfigurator's estimate of one row: {pred: {out, tpot, ttft}, stack} or {refused: who, detail: why}."""
    from aiconfigurator.cli.api import cli_estimate
    from aiconfigurator.sdk.config_adapter.api import adapt_config, to_cli_estimate_kwargs
    from aiconfigurator.sdk.config_adapter.inferencex import InferenceXSource
    from aiconfigurator.sdk.config_adapter.schema import AdapterOverrides

    extra = {"nextn": MTP_NEXTN, "nextn_accepted": MTP_ACCEPTED} if row["spec_decoding"] != "none" else {}
    overrides = AdapterOverrides(isl=round(LENGTH_RATIO * row["isl"]), osl=round(LENGTH_RATIO * row["osl"]), **extra)
    source = InferenceXSource(config=adapter_config(row), benchmark={"isl": row["isl"], "osl": row["osl"],
                                                                       "conc": row["conc"], "id": row["id"]})
    outcome = adapt_config(source, overrides).outcomes[0]
    if outcome.status != "adapted":
        msg = "; ".join(d.message for d in outcome.diagnostics if d.severity == "error") or outcome.status
        return {"refused": "adapter", "detail": msg}
    kwargs = to_cli_estimate_kwargs(outcome.request)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            res = cli_estimate(**kwargs)
    except Exception as e:  # noqa: BLE001 — every refusal is recorded with its reason
        return {"refused": type(e).__name__, "detail": str(e)[:500]}
    raw = res.raw
    if row["disagg"]:
        out = float(raw["tokens/s"]) / row["num_decode_gpu"]
        stack = f"{kwargs['backend_name']}@{raw.get('(d)version')}"
    else:
        out = float(raw["tokens/s/gpu"])
        stack = f"{kwargs['backend_name']}@{raw.get('version')}"
    return {"pred": {"out": out, "tpot": float(res.tpot) / 1e3, "ttft": float(res.ttft) / 1e3}, "stack": stack,
            "mode": res.mode}


def run_aiconfigurator(rows: list[dict], cache_path: Path | None, progress) -> tuple[dict, str]:
    from importlib.metadata import version as pkg_version

    version = pkg_version("aiconfigurator")
    logging.disable(logging.WARNING)
    cache = {}
    if cache_path and cache_path.is_file():
        with contextlib.suppress(ValueError):
            cache = json.loads(cache_path.read_text())
    out = {}
    for i, row in enumerate(rows):
        key = hashlib.sha256(json.dumps([version, LENGTH_RATIO, MTP_ACCEPTED, adapter_config(row), row["isl"],
                                         row["osl"], row["conc"]], sort_keys=True).encode()).hexdigest()[:16]
        hit = cache.get(row["id"])
        if hit and hit.get("key") == key:
            out[row["id"]] = hit
            continue
        progress(f"aiconfigurator {i + 1}/{len(rows)} {row['id']}")
        out[row["id"]] = dict(aic_estimate(row, version), key=key)
        if cache_path:
            cache[row["id"]] = out[row["id"]]
            cache_path.write_text(json.dumps(cache))
    return out, version


def rackmath_command(arg: str | None) -> list[str]:
    cmd = arg or os.environ.get("RACKMATH") or shutil.which("rackmath") or str(ROOT / ".venv" / "bin" / "rackmath")
    if not shutil.which(cmd.split()[0]) and not Path(cmd.split()[0]).is_file():
        raise fail(f"--rackmath: no rackmath command at {cmd!r} (give --rackmath or $RACKMATH)")
    return cmd.split()


def run_rackmath(cmd: list[str], extra: list[str]) -> dict:
    """{row id: {metric: predicted}} from ``rackmath validate --json --id 'IMX-*'`` with this checkout's src."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "src"),
                                                                    os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([*cmd, "validate", "--json", "--id", "IMX-*", *extra], capture_output=True, text=True,
                          env=env, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"error: rackmath validate {' '.join(extra)} failed: {proc.stderr.strip()[-300:]}")
    preds: dict = {}
    for rec in json.loads(proc.stdout)["records"]:
        row_id, metric = rec["id"].rsplit("-", 1)
        if rec.get("predicted") is not None:
            preds.setdefault(row_id, {})[metric] = float(rec["predicted"])
    return preds


def measured(row: dict) -> dict:
    return {"out": row["output_tput_per_gpu"], "tpot": row["mean_tpot"], "ttft": row["mean_ttft"]}


def stats(pairs: list[tuple[float, float]]) -> dict:
    """n, median |error|, median signed error and the count within 2× of (predicted, measured) pairs."""
    if not pairs:
        return {"n": 0}
    errs = [p / m - 1.0 for p, m in pairs]
    return {"n": len(errs), "median_abs_error": statistics.median(abs(e) for e in errs),
            "median_error": statistics.median(errs), "within_2x": sum(0.5 <= 1 + e <= 2.0 for e in errs)}


def compare(rows: list[dict], preds: dict, predictors=PREDICTORS) -> dict:
    """Summary, by chip and by framework, over the rows every predictor models."""
    both = [r for r in rows if all(set(preds[k].get(r["id"], {})) >= {m for m, _ in METRICS} for k, _ in predictors)]

    def table(subset):
        return {m: {k: stats([(preds[k][r["id"]][m], measured(r)[m]) for r in subset]) for k, _ in predictors}
                for m, _ in METRICS}

    out = {"rows": len(both), "summary": table(both), "by_chip": {}, "by_framework": {},
           "rackmath_every_row": {m: {k: stats([(preds[k][r["id"]][m], measured(r)[m]) for r in rows
                                                if m in preds[k].get(r["id"], {})]) for k in ("rm", "rm_measured")}
                                  for m, _ in METRICS}}
    for key, fn in (("by_chip", chip_of), ("by_framework", lambda r: r["framework"])):
        for g in sorted({fn(r) for r in both}):
            out[key][g] = {"rows": sum(fn(r) == g for r in both), **table([r for r in both if fn(r) == g])}
    return out


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def render(res: dict) -> str:
    c = res["comparison"]
    predictors = [tuple(p) for p in res["predictors"]]
    lines = [f"aiconfigurator {res['aiconfigurator_version']} (stacks it used: {', '.join(res['aic_stacks'])}) "
             f"and rackmath on {res['rows']} InferenceMAX rows; both model {c['rows']}",
             "", "| metric | " + " | ".join(n for _, n in predictors) + " |", "|---" * (len(predictors) + 1) + "|"]
    for m, name in METRICS:
        cells = []
        for k, _ in predictors:
            s = c["summary"][m][k]
            cells.append(f"{pct(s['median_abs_error'])} ({s['median_error']:+.0%}), {s['within_2x']}/{s['n']} in 2×"
                         if s["n"] else "–")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(f"median |error| ({' / '.join(n for _, n in predictors)}):")
    lines.append("")
    lines.append("| group | rows | output tok/s/GPU | TPOT | TTFT |")
    lines.append("|---|---|---|---|---|")
    for key, label in (("by_chip", "chip"), ("by_framework", "framework")):
        for g, t in c[key].items():
            cells = [" / ".join(f"{100 * t[m][k]['median_abs_error']:.0f}" for k, _ in predictors) for m, _ in METRICS]
            lines.append(f"| {label} {g} | {t['rows']} | " + " | ".join(cells) + " |")
    every = c["rackmath_every_row"]
    lines.append("")
    lines.append("rackmath on every row (median |error|, default / measured): " + "; ".join(
        f"{name} {pct(every[m]['rm']['median_abs_error'])} / {pct(every[m]['rm_measured']['median_abs_error'])} "
        f"({every[m]['rm']['n']} rows)" for m, name in METRICS))
    lines.append(f"refused: aiconfigurator {sum(res['aic_refusals'].values())} of {res['rows']} rows, "
                 f"rackmath {res['rm_refused']} (default) / {res['rm_measured_refused']} (measured)")
    for reason, n in sorted(res["aic_refusals"].items(), key=lambda kv: -kv[1]):
        lines.append(f"  {n:4d}  {reason}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="Needs aiconfigurator in this Python (its own venv; see the module docstring).")
    ap.add_argument("--json", action="store_true", help="print machine-readable JSON")
    ap.add_argument("--limit", type=int, metavar="N", help="only the first N rows (a quick run)")
    ap.add_argument("--rows", metavar="PATH", help="rows.jsonl (default: ../shared/reference/inferencemax/)")
    ap.add_argument("--rackmath", metavar="CMD", help="the rackmath command (default $RACKMATH, PATH, .venv)")
    ap.add_argument("--cache", metavar="PATH", help="the estimates cache (default /tmp/rackmath-peer-aic.json)")
    ap.add_argument("--no-cache", action="store_true", help="recompute every aiconfigurator estimate")
    ap.add_argument("--logo", metavar="PATH", help="add rackmath --efficiency measured with each row's InferenceMAX "
                                                  "group left out of the stack fit (the file benchmarks/stack_fit.py "
                                                  "--logo-only --dump PATH writes): the out-of-sample column")
    args = ap.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        ap.error(f"--limit: {args.limit} is not a positive number of rows")
    try:
        import aiconfigurator.cli.api  # noqa: F401
    except ImportError:
        print("error: aiconfigurator is not installed in this Python (its own venv: see the module docstring)",
              file=sys.stderr)
        return 2
    cache = None if args.no_cache else Path(args.cache or "/tmp/rackmath-peer-aic.json")
    if cache is not None and cache.resolve().is_relative_to(ROOT):
        ap.error(f"--cache: {cache} is inside the repository; give a path under /tmp")
    rows = [json.loads(line) for line in find_rows(args.rows).read_text().splitlines() if line.strip()]
    rows = rows[: args.limit] if args.limit else rows
    cmd = rackmath_command(args.rackmath)

    def progress(msg):
        print(msg, file=sys.stderr, flush=True)

    aic, version = run_aiconfigurator(rows, cache, progress)
    preds = {"aic": {i: r["pred"] for i, r in aic.items() if "pred" in r},
             "rm": run_rackmath(cmd, []), "rm_measured": run_rackmath(cmd, ["--efficiency", "measured"])}
    predictors = PREDICTORS
    if args.logo:
        dump = json.loads(Path(args.logo).read_text())
        preds["rm_logo"] = {}
        for rid, v in dump.items():
            row_id, metric = rid.rsplit("-", 1)
            preds["rm_logo"].setdefault(row_id, {})[metric] = float(v["one_group_out"])
        predictors = PREDICTORS + (("rm_logo", "rackmath measured, one group out"),)
    complete = {k: sum(set(preds[k].get(r["id"], {})) >= {"out", "tpot", "ttft"} for r in rows) for k in preds}
    refusals: dict = {}
    for r in aic.values():
        if "refused" in r:
            reason = f"{r['refused'].split(':')[0]}: {reason_of(r['detail'])}"
            refusals[reason] = refusals.get(reason, 0) + 1
    res = {"aiconfigurator_version": version, "rows": len(rows),
           "aic_stacks": sorted({r["stack"] for r in aic.values() if "stack" in r}),
           "length_ratio": LENGTH_RATIO, "mtp": {"nextn": MTP_NEXTN, "nextn_accepted": MTP_ACCEPTED},
           "rm_refused": len(rows) - complete["rm"], "rm_measured_refused": len(rows) - complete["rm_measured"],
           "aic_refusals": refusals, "comparison": compare(rows, preds, predictors),
           "predictors": [list(p) for p in predictors],
           "per_row": [{"id": r["id"], "chip": chip_of(r), "framework": r["framework"], "measured": measured(r),
                        **{k: preds[k].get(r["id"]) for k, _ in predictors},
                        "aic_refused": aic[r["id"]].get("detail")} for r in rows]}
    print(json.dumps(res, indent=1) if args.json else render(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
