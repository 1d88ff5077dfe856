"""Launch configurations: the command line (and config file) that starts a planned deployment.

``rackmath plan --emit vllm|sglang|trtllm`` turns a deployment (replica layout, replicas,
max running sequences, step token budget, KV dtype, speculative settings, P/D pools) into the
framework's own flags. Flag names and defaults are data (``specs/data/launch/frameworks.toml``),
each framework entry naming the version its flags were checked against. Pure string building:
no I/O beyond reading that shipped file.
"""

from __future__ import annotations

import json
from functools import lru_cache

from ...errors import InputError, UnknownNameError
from ...engine.layout import attention_ranks

FRAMEWORKS = ("vllm", "sglang", "trtllm")


@lru_cache(maxsize=1)
def _data() -> dict:
    import tomllib
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "specs" / "data" / "launch" / "frameworks.toml"
    with open(path, "rb") as f:
        return tomllib.load(f)


def framework_info(name) -> dict:
    """The shipped entry of a serving stack (flags, defaults, version), by name (vllm, sglang, trtllm)."""
    key = str(name).strip().lower().replace("-", "").replace("_", "").replace("tensorrtllm", "trtllm")
    for f in _data()["_framework"]:
        if f["name"] == key:
            return dict(f)
    raise UnknownNameError("framework", str(name), FRAMEWORKS)


def hf_repo(model_name: str) -> str:
    """HuggingFace repository of a catalog model (the model name itself when unknown: edit the command)."""
    return _data()["_hf_repo"].get(str(model_name), str(model_name))


def _kv(framework: str, kv_dtype: str) -> str | None:
    """The framework's name of a KV-cache dtype (None: the default, i.e. the model dtype)."""
    kv = str(kv_dtype).lower()
    if kv in ("bf16", "fp16", "auto"):
        return None
    if kv.startswith("fp8"):
        return {"vllm": "fp8", "sglang": "fp8_e4m3", "trtllm": "fp8"}[framework]
    if kv in ("fp4", "nvfp4"):
        return {"vllm": "fp8", "sglang": "fp8_e4m3", "trtllm": "nvfp4"}[framework]
    return None


def _is_mtp_model(model_name: str) -> bool:
    return str(model_name).lower().startswith(("deepseek", "kimi"))


def emit(framework: str, deployment: dict) -> dict:
    """Launch commands for ``deployment`` under ``framework``.

    ``deployment`` keys: model, mode ('aggregated' | 'disaggregated'), layout (tp, ep, pp, attention_dp, and
    optionally attention_dp_size: R attention-DP groups of tp/R GPUs),
    replicas, max_batch and budget (per scheduler: per attention-DP rank when attention-DP is on, as vLLM's
    and TensorRT-LLM's flags are; SGLang's are totals over the ranks and are multiplied out here), kv_dtype,
    mtp, recv_interval (SGLang's ``--scheduler-recv-interval``, emitted for SGLang's decode-running servers; the
    other frameworks have none: a note says it is dropped), and for disaggregated: prefill_layout, prefill_replicas.
    Returns ``dict(framework, version, commands=[{role, replicas, gpus_per_replica, command, files}], notes)``;
    ``files`` maps a file name to its text (TensorRT-LLM's LLM-API YAML).
    """
    info = framework_info(framework)
    fw = info["name"]
    model = deployment["model"]
    repo = hf_repo(model)
    lays = [deployment["layout"]] + ([deployment["prefill_layout"]] if deployment.get("prefill_layout") else [])
    relevant = fw == "trtllm" or any(bool(x["attention_dp"]) or int(x["ep"]) > 1 for x in lays)
    notes = [info["notes"]] if relevant else []
    pools = []
    if deployment.get("mode") == "disaggregated":
        pools.append(("prefill", deployment["prefill_layout"], deployment["prefill_replicas"],
                      dict(deployment, mtp=0, max_batch=deployment.get("prefill_max_batch", 256))))
        pools.append(("decode", deployment["layout"], deployment["replicas"], deployment))
    else:
        pools.append(("aggregated", deployment["layout"], deployment["replicas"], deployment))
    cmds = []
    for role, lay, replicas, d in pools:
        build = {"vllm": _vllm, "sglang": _sglang, "trtllm": _trtllm}[fw]
        cmd, files, more = build(info, repo, model, lay, d, role)
        notes += more
        cmds.append(dict(role=role, replicas=int(replicas), gpus_per_replica=int(lay["tp"] * lay["pp"]),
                         command=cmd, files=files))
    if len(cmds) == 2:
        notes.append({"vllm": "disaggregated: run the two pools with a KV connector (NIXL) and vLLM's disaggregated "
                              "proxy (examples/online_serving/disaggregated_serving) in front",
                      "sglang": "disaggregated: put `python -m sglang_router.launch_router --pd-disaggregation "
                                "--prefill URL… --decode URL…` in front of the two pools",
                      "trtllm": "disaggregated: list the prefill (context) and decode (generation) servers in a "
                                "`trtllm-serve disaggregated -c disagg.yaml` config"}[fw])
    if int(deployment.get("recv_interval") or 1) > 1 and fw != "sglang":
        notes.append(f"{fw} has no receive interval (SGLang's --scheduler-recv-interval): it receives new requests "
                     "every step, so the planned TTFT (which waits (N − 1)/2 decode steps for a receive) is above "
                     "what it gives")
    if any(c["replicas"] > 1 for c in cmds):
        notes.append("run one command per replica (one server per group of GPUs) behind a load balancer")
    return dict(framework=fw, version=info["version"], checked_against=info["version"], commands=cmds,
                notes=[n for n in dict.fromkeys(notes) if n])


def _ranks(lay) -> int:
    """Attention-DP groups R of an emitted layout (``engine.layout.attention_ranks``)."""
    return int(attention_ranks(lay["tp"], lay["attention_dp"], lay.get("attention_dp_size", 0)))


def _vllm(info, repo, model, lay, d, role):
    tp, ep, pp, adp = int(lay["tp"]), int(lay["ep"]), int(lay["pp"]), bool(lay["attention_dp"])
    notes = []
    parts = [info["command"], repo]
    if adp:  # R data-parallel ranks of tp/R tensor-parallel GPUs each
        ranks = _ranks(lay)
        parts += [info["tp"], str(tp // ranks), info["dp"], str(ranks)]
    else:
        parts += [info["tp"], str(tp)]
    if pp > 1:
        parts += [info["pp"], str(pp)]
    if ep > 1:
        parts.append(info["ep"])
        if not adp and ep != tp:
            notes.append(f"vLLM's expert parallelism spans all TP×DP ranks: EP{tp} is used instead of EP{ep}")
    parts += [info["max_batch_flag"], str(int(d["max_batch"])), info["budget_flag"], str(int(d["budget"])),
              info["chunked_flag"]]
    kv = _kv("vllm", d.get("kv_dtype", "bf16"))
    if kv:
        parts += [info["kv_dtype_flag"], kv]
    k = int(d.get("mtp") or 0)
    if k:
        spec = {"method": "deepseek_mtp", "num_speculative_tokens": k} if _is_mtp_model(model) else \
            {"method": "eagle3", "model": "<EAGLE-3 draft repo>", "num_speculative_tokens": k}
        parts += [info["spec_flag"], "'" + json.dumps(spec) + "'"]
    parts += [info["mem_flag"], "0.9"]
    if role != "aggregated":
        parts += ["--kv-transfer-config",
                  "'" + json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"}) + "'"]
    return " ".join(parts), {}, notes


def _sglang(info, repo, model, lay, d, role):
    tp, ep, pp, adp = int(lay["tp"]), int(lay["ep"]), int(lay["pp"]), bool(lay["attention_dp"])
    parts = [info["command"], "--model-path", repo, info["tp"], str(tp)]
    ranks = _ranks(lay)  # SGLang's running-request cap and chunk size are totals over the DP-attention ranks
    if adp:
        parts += [info["dp"], str(ranks), info["adp"]]
    if ep > 1:
        parts += [info["ep"], str(ep)]
    if pp > 1:
        parts += [info["pp"], str(pp)]
    parts += [info["max_batch_flag"], str(int(d["max_batch"]) * ranks), info["budget_flag"],
              str(int(d["budget"]) * ranks)]
    kv = _kv("sglang", d.get("kv_dtype", "bf16"))
    if kv:
        parts += [info["kv_dtype_flag"], kv]
    k = int(d.get("mtp") or 0)
    if k:
        parts += ["--speculative-algorithm", "EAGLE", "--speculative-num-steps", str(k),
                  "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", str(k + 1)]
        if not _is_mtp_model(model):
            parts += ["--speculative-draft-model-path", "<EAGLE draft repo>"]
    parts += [info["mem_flag"], "0.85"]
    n = int(d.get("recv_interval") or 1)
    if n > 1 and role != "prefill":  # a prefill server receives after each of its (prefill) steps anyway
        parts += ["--scheduler-recv-interval", str(n)]
    if role != "aggregated":
        parts += ["--disaggregation-mode", role, "--disaggregation-transfer-backend", "nixl"]
    return " ".join(parts), {}, []


def _yaml(obj, indent=0) -> str:
    """A tiny YAML writer for nested dicts of scalars (the LLM-API options file)."""
    out = []
    pad = "  " * indent
    for k, v in obj.items():
        if isinstance(v, dict):
            out.append(f"{pad}{k}:")
            out.append(_yaml(v, indent + 1))
        elif isinstance(v, bool):
            out.append(f"{pad}{k}: {'true' if v else 'false'}")
        else:
            out.append(f"{pad}{k}: {v}")
    return "\n".join(out)


def _trtllm(info, repo, model, lay, d, role):
    tp, ep, pp, adp = int(lay["tp"]), int(lay["ep"]), int(lay["pp"]), bool(lay["attention_dp"])
    fname = f"extra-llm-api-{role}.yaml"
    parts = [info["command"], repo, "--backend", "pytorch", info["tp"], str(tp), info["pp"], str(pp),
             info["ep"], str(ep), info["max_batch_flag"], str(int(d["max_batch"])), info["budget_flag"],
             str(int(d["budget"])), info["mem_flag"], "0.9", info["extra_flag"], fname]
    extra = dict(enable_attention_dp=adp, enable_chunked_prefill=True,
                 cuda_graph_config=dict(max_batch_size=min(int(d["max_batch"]), 1024), enable_padding=True))
    notes, ranks = [], _ranks(lay)
    if adp and ranks != tp:
        notes.append(f"TensorRT-LLM's enable_attention_dp runs attention data-parallel over all {tp} TP ranks: "
                     f"attention DP over {ranks} groups is not a TensorRT-LLM layout (emitted as {tp} ranks)")
    kv = _kv("trtllm", d.get("kv_dtype", "bf16"))
    extra["kv_cache_config"] = dict(dtype=kv or "auto", free_gpu_memory_fraction=0.9)
    k = int(d.get("mtp") or 0)
    if k:
        extra["speculative_config"] = dict(decoding_type="MTP", num_nextn_predict_layers=k) if _is_mtp_model(model) \
            else dict(decoding_type="Eagle", max_draft_len=k, speculative_model_dir="<EAGLE-3 draft repo>")
    if role != "aggregated":
        extra["disable_overlap_scheduler"] = role == "prefill"
        extra["cache_transceiver_config"] = dict(backend="UCX")
    return " ".join(parts), {fname: _yaml(extra) + "\n"}, notes


def render(emitted: dict) -> str:
    """The emitted commands as one shell-ready text (comments, commands, config files as heredocs)."""
    lines = [f"# {emitted['framework']}: flags checked against {emitted['version']}"]
    for c in emitted["commands"]:
        lines.append(f"# {c['role']} pool: {c['replicas']} replica(s) × {c['gpus_per_replica']} GPUs")
        for name, text in c["files"].items():
            lines.append(f"cat > {name} <<'EOF'\n{text}EOF")
        lines.append(c["command"])
    for n in emitted["notes"]:
        lines.append(f"# note: {n}")
    return "\n".join(lines) + "\n"


def check_framework(name) -> str:
    if name is None:
        return None
    return framework_info(name)["name"]


__all__ = ["emit", "render", "framework_info", "hf_repo", "FRAMEWORKS", "InputError"]
