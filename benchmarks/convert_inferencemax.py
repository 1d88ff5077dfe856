"""Convert InferenceMAX rows (reference/inferencemax/rows.jsonl) into shipped ``[[record]]`` TOML (issue 34).

    python benchmarks/convert_inferencemax.py                       # prints the TOML
    python benchmarks/convert_inferencemax.py --write               # src/rackmath/specs/data/records/inferencemax.toml
    python benchmarks/convert_inferencemax.py --check               # exit 1 if the shipped file is not this output
    python benchmarks/convert_inferencemax.py --length-ratio 1.0    # the other length assumption (nominal lengths)
    python benchmarks/convert_inferencemax.py --fitted --write      # records the fitter uses (after a refit)

Each row becomes three records — output tokens/s per GPU (per *decode* GPU on disaggregated rows: metric
``output_tok_s_per_decode_gpu``), mean TPOT and mean TTFT — with every input of the row (model and checkpoint dtype,
chip and system, GPUs, TP/EP/attention DP, the disaggregated decode pool, ISL/OSL, concurrency, MTP), its stack and
version from the container image (``framework`` + ``stack_version``; specs/data/launch/stacks.toml lists each image),
its source (the GitHub Actions run and the row id) and the rules that fill in what the row does not state, written
into each record (``assumptions``) — one rule per kind of row, never per row:

* lengths: the client draws each request's ISL and OSL between 0.8× and 1× nominal, so the records' ``isl``/``osl`` are
  the mean ``--length-ratio`` (0.9) × nominal (inferred from the benchmark's scripts, not a field of the rows);
* disaggregated rows report output tokens/s per decode GPU (checked against Little's law in the README).

The records are written with ``fit = false`` (predicted and reported apart, out of sample: the shipped presets were
not fitted on them) unless ``--fitted``. The rows are read here only: rackmath reads the TOML this writes.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

#: ``../shared`` beside the checkout (or one level up, where the checkout sits in a folder of its own)
SHARED = next((d / "shared" for d in (ROOT.parent, ROOT.parent.parent) if (d / "shared").is_dir()),
              ROOT.parent / "shared")
ROWS = SHARED / "reference" / "inferencemax" / "rows.jsonl"
TARGET = ROOT / "src" / "rackmath" / "specs" / "data" / "records" / "inferencemax.toml"

#: InferenceMAX ``hw`` → (catalog system, chip, what the name means).
HARDWARE = {"h100": ("hgx-h100", "h100"), "h200": ("hgx-h200", "h200"), "b200": ("hgx-b200", "b200"),
            "b200-trt": ("hgx-b200", "b200"), "gb200": ("gb200-nvl72", "gb200"), "mi300x": ("mi300x-8", "mi300x"),
            "mi325x": ("mi325x-8", "mi325x"), "mi355x": ("mi355x-8", "mi355x"),
            "mi355x-amd_0": ("mi355x-8", "mi355x")}
#: InferenceMAX ``framework`` → rackmath's ``framework`` (the stack; specs/stacks.py).
FRAMEWORK = {"sglang": "sglang", "vllm": "vllm", "trt": "trtllm", "atom": "atom", "dynamo-sglang": "dynamo-sglang",
             "dynamo-trt": "dynamo-trtllm", "sglang-disagg": "sglang"}
MODEL = {"dsr1": ("deepseek-r1", "DeepSeek-R1-0528"), "gptoss": ("gpt-oss-120b", "gpt-oss-120b")}
VENDOR = {"h100": "nvidia", "h200": "nvidia", "b200": "nvidia", "gb200": "nvidia", "mi300x": "amd", "mi325x": "amd",
          "mi355x": "amd"}

N_EXPERTS = {"dsr1": 256, "gptoss": 128}  # routed experts (the HF configs in specs/data/hf-configs)
#: DeepSeek-V3 technical report §5.4.3: the second token's acceptance rate is 85–90% (one MTP module).
MTP_DEPTH, MTP_ACCEPTANCE = 1, 1.85

A_LENGTHS = ("lengths: the benchmark client (benchmark_serving.py, random dataset, --random-range-ratio 0.8 in the "
             "published workflow configurations) draws each request's ISL and OSL uniformly between 0.8× and 1× "
             "nominal, so isl/osl here are {r:g} × nominal (inferred from the scripts, not a field of the rows: "
             "reference/inferencemax/README.md); the spread of lengths is not modelled")
A_ARRIVALS = ("arrivals closed-loop: conc clients (--max-concurrency conc, 10 × conc prompts, unlimited rate, "
              "--ignore-eos): the first conc start together and wait for one another's prefills (the first wave, 1 in "
              "10 of the requests), the later ones start as others finish, spread out (the lengths differ per "
              "request); mean TTFT = 1/10 · the wave's (with the stack's warm-up) + 9/10 · the steady state's "
              "(serving.closed_loop_ttft); the median request is a later one: its TTFT is the steady state's "
              "(serving.median_ttft)")
A_DISAGG = ("disaggregated: the row's output_tput_per_gpu is output tokens/s per DECODE GPU (checked against Little's "
            "law, conc · 0.9 · osl / mean_e2el = output · decode GPUs: reference/inferencemax/README.md), hence metric "
            "output_tok_s_per_decode_gpu")
A_WORKERS = ("decode pool: {n} worker(s) of {w} GPUs; {how}")
A_MTP = (f"MTP depth and acceptance not recorded: mtp = {MTP_DEPTH} (DeepSeek-R1 ships one MTP module), acceptance "
         f"{MTP_ACCEPTANCE} (DeepSeek-V3 technical report §5.4.3: second-token acceptance 85–90%)")
A_AGG = "aggregated: one server of tp GPUs; tokens/s per GPU over those GPUs"
A_KV_TRT = "KV dtype not recorded: FP8 (TensorRT-LLM recipes for quantised checkpoints quantise the KV cache)"
A_KV = "KV dtype not recorded: the model's default (BF16; the stack's default kv-cache-dtype auto)"
A_NVFP4 = "weights: NVIDIA's NVFP4 checkpoint, every weight at nvfp4 (its attention projections stay FP8: not modelled)"
A_MXFP4 = "weights: AMD's MXFP4 checkpoint, every weight at mxfp4 (its attention stays FP8: not modelled)"
A_FP8 = "weights: the FP8 checkpoint (block-scaled FP8 with BF16 norms and embeddings: the catalog's native bytes)"

METRICS = (("out", "output_tok_s_per_gpu", "output_tput_per_gpu", "output tok/s per GPU"),
           ("tpot", "tpot_s", "mean_tpot", "mean TPOT"),
           ("ttft", "ttft_s", "mean_ttft", "mean TTFT"),
           ("ttft-median", "ttft_median_s", "median_ttft", "median TTFT"))


def truthy(v) -> bool:
    return v is True or str(v).lower() == "true"


def stack_of(row) -> tuple[str, str]:
    """(framework, stack_version) from the row's framework and container image (the listed version)."""
    from rackmath.specs.stacks import from_image

    fw = FRAMEWORK[row["framework"]]
    sv = from_image(row["image"])
    if sv is None:
        raise SystemExit(f"error: {row['id']}: image {row['image']!r} is not listed in specs/data/launch/stacks.toml")
    if sv.stack != fw:
        raise SystemExit(f"error: {row['id']}: image {row['image']!r} is listed for {sv.stack}, the row says {fw}")
    return fw, sv.version


def dtypes(row, vendor) -> tuple[dict, list]:
    """The record's weights/KV dtype fields and their assumptions."""
    out, a = {}, []
    if row["infmax_model_prefix"] == "dsr1":
        if row["precision"] == "fp8":
            out["weights_dtype"] = "fp8"
            a.append(A_FP8)
        elif vendor == "nvidia":
            out["weights_dtype"] = "nvfp4"
            a.append(A_NVFP4)
        else:
            out["weights_dtype"] = "mxfp4"
            a.append(A_MXFP4)
    else:
        out["weights_dtype"] = "mxfp4"  # gpt-oss-120b: MXFP4 MoE weights (its native dtypes)
    if row["framework"] in ("trt", "dynamo-trt"):
        out["kv_dtype"] = "fp8"
        a.append(A_KV_TRT)
    else:
        a.append(A_KV)
    return out, a


def layout(row) -> tuple[dict, list, str]:
    """Inputs of the layout, their assumptions and a short label (as the row states it)."""
    if not row["disagg"]:
        tp, ep, adp = int(row["tp"]), int(row["ep"]), truthy(row["dp_attention"])
        inp = dict(gpus=tp, tp=tp) | ({"ep": ep} if ep > 1 else {}) | ({"attention_dp": True} if adp else {})
        label = f"TP{tp}" + (f" EP{ep}" if ep > 1 else "") + (" DP-attention" if adp else "")
        return inp, [A_AGG], label
    P, D = int(row["num_prefill_gpu"]), int(row["num_decode_gpu"])
    n = int(row["decode_num_workers"])
    if D % n:
        raise SystemExit(f"error: {row['id']}: {D} decode GPUs over {n} workers")
    w = D // n
    dtp, dep, dadp = int(row["decode_tp"]), int(row["decode_ep"]), truthy(row["decode_dp_attention"])
    if dadp:
        inp = dict(tp=w, ep=w, attention_dp=True)
        rx = (-N_EXPERTS[row["infmax_model_prefix"]]) % w
        if rx:  # experts that do not divide over the EP ranks: SGLang's EPLB redundant experts make them divide
            inp["redundant_experts"] = rx
            how_rx = (f"; {N_EXPERTS[row['infmax_model_prefix']]} experts do not divide over EP {w}: "
                      f"redundant_experts = {rx} (SGLang's EPLB --ep-num-redundant-experts; not recorded in the row), "
                      f"{N_EXPERTS[row['infmax_model_prefix']] + rx} = "
                      f"{(N_EXPERTS[row['infmax_model_prefix']] + rx) // w} per GPU)")
        else:
            how_rx = ""
        how = (f"the row's decode_tp {dtp}, decode_ep {dep} with DP attention is attention data-parallel over the "
               f"worker's {w} ranks with EP {w} (SGLang's / TensorRT-LLM's DP-attention + EP, TP{w} EP{w} "
               "attention-DP in conventions.md)" + (f"; the row's decode_ep {dep} is read as EP {w} (the model does "
                                                    "not fit fewer GPUs)" if dep != w else "") + how_rx)
    else:
        if dtp != w:
            raise SystemExit(f"error: {row['id']}: decode_tp {dtp} ≠ {w} GPUs per worker")
        inp = dict(tp=w) | ({"ep": dep} if dep > 1 else {})
        how = f"TP{w}" + (f" EP{dep}" if dep > 1 else "") + " per worker, as the row states"
    ptp, pep, padp = row["prefill_tp"], row["prefill_ep"], truthy(row["prefill_dp_attention"])
    npw = int(row["prefill_num_workers"])
    wp = P // npw
    if P % npw == 0 and padp and -N_EXPERTS[row["infmax_model_prefix"]] % wp == 0:
        pre = dict(prefill_tp=wp, prefill_ep=wp, prefill_attention_dp=True)
        how_p = (f"prefill pool: {npw} worker(s) of {wp} GPUs, attention data-parallel over the worker's {wp} ranks "
                 f"with EP {wp} (the row's prefill_tp {ptp}, prefill_ep {pep} with DP attention)")
    elif P % npw == 0 and not padp and int(ptp) == wp:
        pre = dict(prefill_tp=wp) | ({"prefill_ep": int(pep)} if int(pep) > 1 else {})
        how_p = (f"prefill pool: {npw} worker(s) of TP{wp}" + (f" EP{pep}" if int(pep) > 1 else "")
                 + ", as the row states")
    else:
        pre = {}
        how_p = (f"prefill pool: the row's prefill_tp {ptp}, prefill_ep {pep} without DP attention does not span its "
                 f"workers of {P / npw:g} GPUs: the prefill layout is rackmath's choice (its fastest)")
    inp = dict(gpus=P + D, prefill_gpus=P, decode_gpus=D) | pre | inp
    label = (f"{P}P ({row['prefill_num_workers']}× tp{ptp} ep{pep}{' dp-attn' if padp else ''}) + {D}D ({n}× "
             f"tp{dtp} ep{dep}{' dp-attn' if dadp else ''})")
    return inp, [A_DISAGG, A_WORKERS.format(n=n, w=w, how=how), how_p], label


def convert(rows, length_ratio: float = 0.9, fitted: bool = False) -> list[dict]:
    out = []
    for row in rows:
        system, chip = HARDWARE[row["hw"]]
        vendor = VENDOR[chip]
        model, mlabel = MODEL[row["infmax_model_prefix"]]
        fw, ver = stack_of(row)
        lay, a_lay, label = layout(row)
        dt, a_dt = dtypes(row, vendor)
        spec = {}
        a = [A_LENGTHS.format(r=length_ratio), A_ARRIVALS] + a_lay + a_dt
        if row["spec_decoding"] == "mtp":
            spec = dict(mtp=MTP_DEPTH, acceptance=MTP_ACCEPTANCE)
            a.append(A_MTP)
        elif row["spec_decoding"] != "none":
            raise SystemExit(f"error: {row['id']}: spec_decoding {row['spec_decoding']!r}")
        isl, osl = float(row["isl"]) * length_ratio, float(row["osl"]) * length_ratio
        group = f"{row['infmax_model_prefix']}-{row['precision']} × {chip} × {row['framework']}"
        for suffix, metric, field, what in METRICS:
            if metric == "output_tok_s_per_gpu" and row["disagg"]:
                metric, what = "output_tok_s_per_decode_gpu", "output tok/s per decode GPU"
            value = float(row[field])
            rec = {"id": f"{row['id']}-{suffix}",
                   "title": (f"{mlabel} {row['precision'].upper()}{' MTP' if spec else ''} on {chip.upper()} "
                             f"({row['hw']}), {fw} {ver} {label}, {row['isl']}/{row['osl']} nominal, c{row['conc']}: "
                             f"{what}"),
                   "metric": metric, "value": value, "status": "approximate",
                   "source": (f"InferenceMAX (SemiAnalysis) Run Sweep {row['run']}, agg_bmk.json row {row['id']} "
                              f"({field}), image {row['image']}; reference/inferencemax/README.md (mirror: "
                              "gminneci/mantile@72ff84e reconcile/sources/inferencemax/raw/)"),
                   "source_group": f"inferencemax-{row['run'].removeprefix('run_')}",
                   "url": "https://inferencemax.semianalysis.com/",
                   "framework": fw, "stack_version": ver, "group": group}
            if not fitted:
                rec["fit"] = False
            rec.update(model=model, hardware=system)
            rec.update(lay)
            rec.update(isl=isl, osl=osl, concurrency=int(row["conc"]), arrivals="closed-loop")
            rec.update(dt)
            rec.update(spec)
            rec["assumptions"] = a
            out.append(rec)
    return out


HEADER = """\
# InferenceMAX serving measurements, current stacks (issue 34): {n} records from {rows} rows.
# Written by benchmarks/convert_inferencemax.py from reference/inferencemax/rows.jsonl — do not edit by hand.
#
# Source and notice: the measurements are SemiAnalysis InferenceMAX results (https://inferencemax.semianalysis.com/,
# github.com/InferenceMAX/InferenceMAX): the aggregated result files (agg_bmk.json) of its "Run Sweep" GitHub Actions
# runs of 2025-12-09 to 2026-01-28, as mirrored in the public repository gminneci/mantile (commit 72ff84e,
# reconcile/sources/inferencemax/raw/); InferenceMAX's code is Apache-2.0 (to our knowledge: see the notice). The
# numbers are factual measurements, reproduced with their source named on every record. Notice and license:
# specs/data/records/NOTICE-inferencemax.md.
#
# Assumptions written into every record (one rule per kind of row): lengths {ratio:g} × nominal (drawn between 0.8× and
# 1×); disaggregated throughput per decode GPU (metric output_tok_s_per_decode_gpu). fit = {fit}: {fit_why}.
"""


def render(recs, n_rows, length_ratio, fitted) -> str:
    from rackmath.specs.records import toml_value

    fit_why = ("fitted with every other record" if fitted else
               "predicted and reported apart, not fitted: the shipped presets were not fitted on these records, so "
               "their errors are out of sample")
    out = [HEADER.format(n=len(recs), rows=n_rows, ratio=length_ratio, fit=str(fitted).lower(), fit_why=fit_why)]
    for r in recs:
        lines = ["[[record]]"]
        for k, v in r.items():
            if k == "assumptions":
                lines.append("assumptions = [")
                lines += [f"    {toml_value(x)}," for x in v]
                lines.append("]")
            else:
                lines.append(f"{k} = {toml_value(v)}")
        out.append("\n".join(lines) + "\n")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=Path, default=ROWS, help="rows.jsonl (default: ../shared/reference/inferencemax)")
    ap.add_argument("--length-ratio", type=float, default=0.9, help="mean length / nominal (default 0.9)")
    ap.add_argument("--fitted", action="store_true", help="write fit = true (records the fitter uses)")
    ap.add_argument("--write", action="store_true", help=f"write {TARGET.relative_to(ROOT)}")
    ap.add_argument("--check", action="store_true", help="exit 1 if the shipped file differs from this output")
    ap.add_argument("-o", "--output", type=Path, help="write here instead")
    args = ap.parse_args(argv)
    if not 0.5 <= args.length_ratio <= 1.0:
        ap.error("--length-ratio: accepted 0.5 … 1")
    rows = [json.loads(line) for line in args.rows.read_text().splitlines() if line.strip()]
    text = render(convert(rows, args.length_ratio, args.fitted), len(rows), args.length_ratio, args.fitted)
    if args.check:
        same = TARGET.exists() and TARGET.read_text() == text
        print("up to date" if same else f"{TARGET} differs from the conversion of {args.rows}", file=sys.stderr)
        return 0 if same else 1
    dest = args.output or (TARGET if args.write else None)
    if dest is None:
        sys.stdout.write(text)
        return 0
    dest.write_text(text)
    print(f"wrote {dest}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
