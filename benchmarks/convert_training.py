"""Convert ../shared/reference/training/records.jsonl into shipped training records (issue 38).

    python benchmarks/convert_training.py [--input records.jsonl] [--output src/rackmath/specs/data/training/records.toml]

One ``[[train_record]]`` per row of the compilation: the row's inputs as rackmath reads them (catalog model and chip,
GPUs per NVLink domain, dtype, sequence, batches, parallel degrees, sharding, recompute, framework family), what it
measured (tokens/s/GPU, TFLOP/s/GPU and MFU with the source's own definition), its source, software release and
status. A row rackmath cannot predict keeps ``exclude`` with the reason in one line. Only the mappings below are
decisions made here; each says why. The package reads the TOML, never this script's input.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: ``../shared`` beside the checkout (or one level up, where the checkout sits in a folder of its own)
SHARED = next((d / "shared" for d in (ROOT.parent, ROOT.parent.parent) if (d / "shared").is_dir()),
              ROOT.parent / "shared")
DEFAULT_IN = SHARED / "reference" / "training" / "records.jsonl"
if not DEFAULT_IN.exists():
    DEFAULT_IN = Path("/work/shared/reference/training/records.jsonl")
DEFAULT_OUT = ROOT / "src" / "rackmath" / "specs" / "data" / "training" / "records.toml"

#: Source model names → catalog names (specs/data/models). None: not modelled, with the reason.
MODELS = {
    "MPT-125m": "mpt-125m", "MPT-350m": "mpt-350m", "MPT-760m": "mpt-760m", "MPT-1b": "mpt-1b", "MPT-3b": "mpt-3b",
    "MPT-7b": "mpt-7b", "MPT-13b": "mpt-13b", "MPT-30b": "mpt-30b", "MPT-70b": "mpt-70b",
    "LLAMA3_8B": "llama-3-8b", "LLAMA_3_8B": "llama-3-8b", "LLAMA3_70B": "llama-3-70b", "LLAMA_3_70B": "llama-3-70b",
    "LLAMA3.1_405B": "llama-3.1-405b", "Llama 3 405B": "llama-3.1-405b",
    "LLAMA2_7B": "llama-2-7b", "LLAMA_2_7B": "llama-2-7b", "LLAMA_2_13B": "llama-2-13b", "LLAMA_2_70B": "llama-2-70b",
    "DeepSeekV3": "deepseek-v3", "Qwen3_30B_a3B": "qwen3-30b-a3b", "Qwen3_235B_a22B": "qwen3-235b-a22b",
    "GPT OSS 120B": "gpt-oss-120b", "Kimi_K2": "kimi-k2",
    "GPT3_5B": "gpt-3-5b", "GPT3_20B": "gpt-3-20b", "GPT3_175B": "gpt-3-175b", "GPT-3 175B": "gpt-3-175b",
    "GPT 175B": "gpt-3-175b",
    "Nemotron_8B": "nemotron-8b", "Nemotron_22B": "nemotron-22b", "Nemotron_340B": "nemotron-4-340b",
    # Narayanan et al. 2021 Table 1 (the Megatron-LM A100 weak-scaling set)
    "GPT 1.7B": "megatron-gpt-1.7b", "GPT 3.6B": "megatron-gpt-3.6b", "GPT 7.5B": "megatron-gpt-7.5b",
    "GPT 18B": "megatron-gpt-18b", "GPT 39B": "megatron-gpt-39b", "GPT 76B": "megatron-gpt-76b",
    "GPT 145B": "megatron-gpt-145b", "GPT 310B": "megatron-gpt-310b", "GPT 530B": "megatron-gpt-530b",
    "GPT 1T": "megatron-gpt-1t", "GPT 22B": "megatron-gpt-22b",
    "GPT-3 175B (177B with 131072 vocab)": "gpt-3-175b-v131k", "GPT 177B": "gpt-3-175b-v131k",
}
NOT_MODELLED = {
    "Nemotron_3_Nano": "a hybrid Mamba-2/attention MoE: rackmath models attention and MoE layers, not Mamba-2 state-space layers",
    "Nemotron_3_Super": "a hybrid Mamba-2/attention MoE: rackmath models attention and MoE layers, not Mamba-2 state-space layers",
    "Nemotron_3_Ultra": "a hybrid Mamba-2/attention MoE: rackmath models attention and MoE layers, not Mamba-2 state-space layers",
    "Nemotron_3_5_Lightning": "a hybrid Mamba-2/attention MoE: rackmath models attention and MoE layers, not Mamba-2 state-space layers",
    "DeepSeekV4 Flash": "its architecture is not published in the source (size not stated) nor in the catalog",
    "175B LLM (MegaScale)": "the abstract gives MFU only: no sequence, batch, layout or chip count per step",
}
#: The Megatron-LM H100 weak-scaling table (2024): its rows' params_note states heads, hidden, layers and vocabulary
#: (read from the table image), the catalog's megatron-gpt-*-v131k models (the 177B row is gpt-3-175b-v131k).
H100_TABLE_MODELS = {"GPT 1.7B": "megatron-gpt-1.7b-v131k", "GPT 7.1B": "megatron-gpt-7.1b-v131k",
                     "GPT 16B": "megatron-gpt-16b-v131k", "GPT 32B": "megatron-gpt-32b-v131k",
                     "GPT 70B": "megatron-gpt-70b-v131k", "GPT 119B": "megatron-gpt-119b-v131k",
                     "GPT 314B": "megatron-gpt-314b-v131k", "GPT 462B": "megatron-gpt-462b-v131k"}
#: Korthikanti et al. 2022 (arXiv 2205.05198) Table 3, the runs of the README's MFU/HFU table (which states DP 1 only):
#: (tensor, pipeline, global batch) per model; GPUs = TP·PP at DP 1, micro-batch 1. The 530B and 1T layouts are the
#: same model-parallel sizes (280, 512) and per-replica batches (2520/9, 3072/6) as the README's own 2021 A100 table.
KORTHIKANTI_TABLE3 = {"GPT 22B": (8, 1, 4), "GPT 175B": (8, 8, 64), "GPT 530B": (8, 35, 280), "GPT 1T": (8, 64, 512)}

#: Source chip strings → (catalog chip, GPUs per NVLink domain).
CHIPS = [
    ("GB200", ("gb200", 72)), ("GB300", ("gb300", 72)), ("B300", ("gb300", 8)), ("B200", ("b200", 8)),
    ("H100", ("h100", 8)), ("A100 40GB", ("a100-sxm-40gb", 8)), ("A100", ("a100-sxm-80gb", 8)),
]

#: Narayanan et al. 2021, Table 1: (tensor, pipeline) of each model of the README's A100 table, whose "model-parallel
#: size" column is their product.
NARAYANAN_SPLIT = {"GPT 1.7B": (1, 1), "GPT 3.6B": (2, 1), "GPT 7.5B": (4, 1), "GPT 18B": (8, 1), "GPT 39B": (8, 2),
                   "GPT 76B": (8, 4), "GPT 145B": (8, 8), "GPT 310B": (8, 16), "GPT 530B": (8, 35),
                   "GPT 1T": (8, 64)}


def _dtype(row) -> tuple[str | None, str | None]:
    d = (row.get("dtype") or "").lower()
    notes = row.get("notes") or ""
    if "nvfp4" in d:
        return "nvfp4", None
    if "mxfp8" in d or "fp8-mx" in d:
        return "mxfp8", None
    if "fp8" in d:
        return "fp8", None
    if "bf16" in d or "half" in d or "fp16" in d:
        return "bf16", None
    if "likely bf16" in d:
        return "bf16", "dtype not stated in the README; BF16 assumed (Megatron-Core default)"
    if row["source"].get("repo") == "NVIDIA-NeMo/Megatron-Bridge" and "precision column" in notes:
        alt = "alternate FP8 quantization granularity" in notes
        return ("mxfp8" if alt else "fp8"), ("the 25.09 table has no precision column; its footnote makes every row "
                                            "FP8 (parenthesised values: the block-scaled variant)")
    if not d and "A100" in (row["hardware"].get("chip") or ""):
        return "bf16", "precision not stated; A100 runs train in 16-bit (Megatron-LM's GPT-3 example: --fp16)"
    if not d and row["source"].get("repo") == "NVIDIA/Megatron-LM":
        return "bf16", "precision not stated; BF16 assumed (Megatron-Core's default; the README's MFU is of the BF16 peak)"
    return None, None


def _software(row) -> str:
    src = row["source"]
    repo, sec = src.get("repo") or "", src.get("section") or ""
    if repo == "NVIDIA-NeMo/Megatron-Bridge":
        m = re.match(r"([\d.]+) NeMo Container", sec)
        return f"nemo-{m.group(1)}" if m else "nemo"
    if repo == "NVIDIA/NeMo":
        return "nemo-24.07"
    if repo == "mosaicml/llm-foundry":
        return "llm-foundry-" + (src.get("commit") or "")[:7]
    if repo == "NVIDIA/Megatron-LM":
        if "2021" in sec:
            return "megatron-lm-2021"
        if "2022" in sec:
            return "megatron-lm-2022"
        return "megatron-core-0.8"
    return "llama3-2024"


def _source_group(row) -> str:
    repo = row["source"].get("repo")
    return {"NVIDIA-NeMo/Megatron-Bridge": "megatron-bridge", "NVIDIA/NeMo": "nemo-24.07",
            "mosaicml/llm-foundry": "llm-foundry", "NVIDIA/Megatron-LM": "megatron-lm"}.get(repo, "papers")


def repo_of(row) -> str:
    return row["source"].get("repo") or ""


def _num(x):
    if x is None:
        return None
    if isinstance(x, str):
        m = re.match(r"^([\d.]+)\s*([KMG]?)$", x.strip())
        if not m:
            return None
        return float(m.group(1)) * {"": 1, "K": 1e3, "M": 2 ** 20, "G": 2 ** 30}[m.group(2)]
    return float(x)


def convert(row) -> dict:
    name = row["model"]["name"]
    par = row["parallelism"]
    met = row["metrics"]
    out = {"id": row["id"], "source_group": _source_group(row), "software": _software(row), "task": row["task"],
           "model_in_source": name}
    exclude = []
    assumptions = []
    model = MODELS.get(name)
    if name in H100_TABLE_MODELS and "2024" in (row["source"].get("section") or ""):
        model = H100_TABLE_MODELS[name]
        assumptions.append("architecture from the table's heads, hidden, layers and vocabulary (GPT layer, 4h GELU MLP, "
                           "untied embeddings: reproduces the table's parameter count)")
    elif name in NOT_MODELLED:
        exclude.append(NOT_MODELLED[name])
    elif model is None:
        exclude.append(f"model {name!r} not mapped")
    out["model"] = model or ""
    chip_s = row["hardware"].get("chip") or ""
    chip, domain = next((v for k, v in CHIPS if k in chip_s), ("", 8))
    if not chip:
        exclude.append(f"chip {chip_s!r} not in the catalog")
    out.update(chip=chip, nvlink_domain=domain, system_in_source=row["hardware"].get("system") or "",
               gpus=row["hardware"].get("num_gpus"))
    dtype, why = _dtype(row)
    if why:
        assumptions.append(why)
    out["dtype"] = dtype or ""
    out["dtype_in_source"] = row.get("dtype") or ""
    out["seq"] = row.get("seq_len")
    gb = row.get("global_batch") or {}
    out["global_batch"] = gb.get("sequences")
    if out["global_batch"] is None and gb.get("tokens") and out["seq"]:
        out["global_batch"] = _num(gb["tokens"]) / out["seq"]
        assumptions.append("global batch in sequences = tokens per batch / sequence length")
    out["micro_batch"] = row.get("micro_batch")
    if out["micro_batch"] is None and repo_of(row) in ("NVIDIA/NeMo",) and "long_sequence" in row["source"].get("path", ""):
        out["micro_batch"] = 1
        assumptions.append("micro batch 1 (a long-sequence run holds one sequence per GPU group)")
    tp, pp = par.get("tp"), par.get("pp")
    repo = row["source"].get("repo")
    if repo == "NVIDIA/Megatron-LM" and name in NARAYANAN_SPLIT and tp is None and "2021" in (row["source"].get("section") or ""):
        tp, pp = NARAYANAN_SPLIT[name]
        assumptions.append("TP and PP from Narayanan et al. 2021 Table 1 (the README states their product only)")
    if repo == "NVIDIA/Megatron-LM" and name in KORTHIKANTI_TABLE3 and tp is None and "2022" in (row["source"].get("section") or ""):
        tp, pp, gbs = KORTHIKANTI_TABLE3[name]
        out.update(gpus=tp * pp * (par.get("dp") or 1), global_batch=gbs, micro_batch=1)
        assumptions.append(f"GPUs, TP, PP and batch from Korthikanti et al. 2022 Table 3 (the README states DP 1 only): "
                           f"TP {tp} · PP {pp} = {tp * pp} GPUs, global batch {gbs}, micro-batch 1")
    fsdp = par.get("fsdp")
    framework = "fsdp" if repo == "mosaicml/llm-foundry" else "megatron"
    sharding = "none"
    if fsdp == "FULL_SHARD":
        sharding = "full_shard"
    elif fsdp == "SHARD_GRAD_OP":
        sharding = "shard_grad_op"
    elif fsdp not in (None, "0", 0):
        sharding = "full_shard"  # Megatron-FSDP with a sharding group of `fsdp` GPUs
        out["fsdp_group"] = int(fsdp)
    rc = par.get("recompute")
    recompute = {"True": "full", "False": "none"}.get(str(rc))
    if recompute is None:
        if repo == "NVIDIA/Megatron-LM" and "2021" in (row["source"].get("section") or ""):
            recompute = "full"
            assumptions.append("full activation recompute (Narayanan et al. 2021 §5 ran with it)")
        elif repo == "NVIDIA/Megatron-LM" and "2022" in (row["source"].get("section") or ""):
            recompute = "selective"
        else:
            recompute = "selective"
            assumptions.append("recompute not stated: selective (the NeMo/Megatron recipes' default)")
    vp = par.get("vp")
    ep = par.get("ep")
    cp = par.get("cp")
    if vp is None and (pp or 1) > 1 and repo_of(row) == "":
        vp = 0  # not stated: rackmath's default (analyses.training.model.default_vp), as `train` uses without --vp
        assumptions.append("virtual stages not stated: rackmath's default, about 2 layers per virtual stage (the "
                           "Llama 3 paper, §3.3.2, ran an interleaved schedule)")
    out.update(tp=tp or 1, pp=pp or 1, cp=cp or 1, ep=ep or 1, vp=1 if vp is None else vp, dp=par.get("dp"), sharding=sharding,
               recompute=recompute, grad_accum=par.get("grad_accum"), framework=framework)
    other = par.get("other") or ""
    if tp is None and pp is None and framework == "megatron" and not exclude and (
            "not specified" in other or "strong-scaling" in other) and out["gpus"]:
        # "the best non-CP configuration" / a strong-scaling endpoint: the source ran its best layout and does not say
        # which; rackmath's layout search (ideal step model, memory fits) stands in for it
        out["layout"] = "searched"
        assumptions.append("layout not stated (the source's best configuration): rackmath's layout search, "
                           + ("CP 1 as the source says" if cp == 1 else "CP searched"))
    elif tp is None and pp is None and framework == "megatron" and not exclude:
        exclude.append("the source does not state the parallel layout")
    if out["gpus"] is None and not exclude:
        exclude.append("the source does not state the GPU count")
    if out["seq"] is None and not exclude:
        exclude.append("the source does not state the sequence length")
    if not dtype and not exclude:
        exclude.append("the source does not state the precision")
    notes = row.get("notes") or ""
    if "tokendrop" in notes:
        assumptions.append("token-dropping MoE run (capacity factor): modelled as balanced, as the dropless rows")
    if "Muon" in notes:
        out["optimizer"] = "muon"
    tok = met.get("tokens_per_s_per_gpu")
    out["tokens_per_s_per_gpu"] = tok
    out["tflops_per_gpu"] = met.get("tflops_per_gpu")
    out["mfu_pct"] = met.get("mfu_pct")
    out["hfu_pct"] = met.get("hfu_pct")
    out["step_time_s"] = met.get("step_time_s")
    if tok is None and out["tflops_per_gpu"] is None and out["mfu_pct"] is None and not exclude:
        exclude.append("no throughput in the source")
    # The FLOP formula of the row's TFLOP/s, checked on the rows that print both TFLOP/s and tokens/s (their ratio is
    # the formula's FLOPs per token to 0.1%): llm-foundry and NeMo 24.07 count 6·N + 12·L·s·d_attn (attention
    # without the causal half), Megatron-Bridge 6·N + 6·L·s·d_attn (causal); Narayanan et al. 2021 eq. 3 counts the
    # recomputed forward: 96·L·h²·(1 + s/6h + V/16Lh).
    sec = row["source"].get("section") or ""
    out["flop_formula"] = ("narayanan-recompute" if "2021" in sec or row["id"] == "MLM-0026"
                           else "korthikanti" if repo == "NVIDIA/Megatron-LM" and "2022" in sec
                           else "megatron" if repo == "NVIDIA/Megatron-LM"
                           else "megatron-bridge" if repo == "NVIDIA-NeMo/Megatron-Bridge"
                           else "nemo" if repo == "NVIDIA/NeMo"
                           else "mosaic" if repo == "mosaicml/llm-foundry" else "causal-6nd")
    out["mfu_definition"] = row.get("mfu_definition") or ""
    out["status"] = row.get("status") or ""
    src = row["source"]
    out["source"] = (" ".join(x for x in (src.get("repo"), src.get("path"), (src.get("commit") or "")[:7]) if x)
                     or src.get("url") or src.get("section") or "secondary web page")
    out["url"] = src.get("url") or ""
    out["section"] = src.get("section") or ""
    out["notes"] = notes
    if assumptions:
        out["assumptions"] = assumptions
    if row["id"].startswith("WEB-000") and row["id"] != "WEB-0004":
        out["holdout"] = "the Llama 3 405B figures check `train` out of sample (issue 38): never fitted"
    if exclude:
        out["exclude"] = "; ".join(exclude)
    return out


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
            return str(int(v))
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return json.dumps(str(v), ensure_ascii=False)


def to_toml(rows: list[dict]) -> str:
    head = ("# Published LLM training throughput as rackmath training records (issue 38), written by\n"
            "# benchmarks/convert_training.py from ../shared/reference/training/records.jsonl (read its README: MFU\n"
            "# definitions differ per source; compare on tokens/s/GPU). Loaded by rackmath.specs.training_records.\n")
    parts = [head]
    for r in rows:
        parts.append("\n[[train_record]]\n")
        for k, v in r.items():
            if v is None or v == "":
                continue
            parts.append(f"{k} = {_toml_value(v)}\n")
    return "".join(parts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", type=Path, default=DEFAULT_IN)
    ap.add_argument("--output", type=Path, default=DEFAULT_OUT)
    a = ap.parse_args(argv)
    rows = [convert(json.loads(line)) for line in a.input.read_text().splitlines() if line.strip()]
    a.output.parent.mkdir(parents=True, exist_ok=True)
    a.output.write_text(to_toml(rows))
    n_ex = sum(1 for r in rows if "exclude" in r)
    print(f"{len(rows)} records → {a.output} ({len(rows) - n_ex} modelled, {n_ex} excluded)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
