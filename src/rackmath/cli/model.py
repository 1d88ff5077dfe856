"""`rackmath model list|show`: the model catalog and HuggingFace config.json files."""

from __future__ import annotations

import typer

from .common import JSON_OPT, dtype_check

model_app = typer.Typer(help="Model specs: parameters, KV bytes per token, FLOPs per token.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(model_app, name="model")


@model_app.command("list")
def list_models(json: bool = JSON_OPT,
                hf: bool = typer.Option(False, "--hf", help="List the shipped HuggingFace configs (hf:ORG/NAME).")):
    """List the catalog models (built-in and --catalog TOML), or with --hf the shipped HuggingFace configs."""
    from ..specs.models import load_model, models, shipped_configs
    from ..units import format_si
    from .common import Col, human, print_json, table

    if hf:
        recs = []
        for repo in shipped_configs():
            m = load_model("hf:" + repo)
            recs.append({"name": "hf:" + repo, "model_type": m.model_type, "total_params": m.total_params,
                         "active_params": m.active_params, "max_context": m.max_context or None})
        if json:
            print_json(recs)
            return
        table("Shipped HuggingFace configs (rackmath model show hf:ORG/NAME)",
              [Col("name", 0), Col("type", 2), Col("total params", 0), Col("active params", 1),
               Col("max context", 1)],
              [[r["name"], r["model_type"], human(r["total_params"]), human(r["active_params"]),
                human(r["max_context"]) if r["max_context"] else "—"] for r in recs],
              caption="sources: src/rackmath/specs/data/hf-configs/README.md")
        return
    ms = models().values()
    if json:
        print_json([{"name": m.name, "aliases": list(m.aliases), "model_type": m.model_type, "status": m.status,
                     "total_params": m.total_params, "active_params": m.active_params,
                     "kv_bytes_per_token": float(m.kv_bytes_per_token()), "kv_dtype": m.kv_dtype,
                     "native_dtype": m.native_dtype} for m in ms])
        return
    rows = [[m.name + (" *" if m.status == "hypothetical" else ""), format_si(m.total_params, ""),
             format_si(m.active_params, ""), f"{format_si(float(m.kv_bytes_per_token()), 'B')} {m.kv_dtype}",
             m.native_dtype] for m in ms]
    table("Models", ["name", "total params", "active params", "KV/token @8K", "weights"], rows,
          caption="KV/token = KV one sequence holds at 8,192 tokens / 8,192; * hypothetical")


@model_app.command("show")
def show(
    name: str = typer.Argument(..., metavar="MODEL",
                               help="Catalog name, a shipped HuggingFace config (hf:openai/gpt-oss-120b; "
                                    "`model list --hf`) or a config.json path."),
    json: bool = JSON_OPT,
    context: str = typer.Option("8192", "--context", "-L", help="Context length in tokens (8K = 8,000, 8Ki = 8,192)."),
    kv_dtype: str = typer.Option(None, "--kv-dtype", callback=dtype_check("kv_dtype"), help="KV-cache dtype (default: the model's, bf16 for "
                                                          "published models)."),
):
    """Show one model: parameters, weight bytes, KV bytes and FLOPs per token at a context."""
    from .. import units
    from ..errors import InputError
    from ..specs.models import load_model
    from .common import print_json, table

    L = units.parse_count(context, "context")
    if L <= 0:
        raise InputError("context", f"{L:g} tokens", "a positive number of tokens such as 8192 or '128K'")
    kvdt = units.normalize_dtype(kv_dtype, "kv_dtype") if kv_dtype else None
    m = load_model(name)
    d = m.describe(L, kvdt)
    if json:
        print_json(d)
        return
    fs, fb = units.format_si, units.format_bytes
    rows = [
        ["type", d["model_type"] + (" (hypothetical)" if m.status == "hypothetical" else "")],
        ["layers / d_model / vocab", f"{m.n_layers} / {m.d_model} / {m.vocab_size}"],
        ["attention", _attn_text(m)],
        ["FFN", _ffn_text(m)],
        ["total params", fs(d["total_params"])],
        ["active params", fs(d["active_params"]) + ("" if m.active_counts_embedding else " (embedding excluded, as "
                                                                                        "published)")],
        ["input embedding", fs(d["embedding_params"])],
        ["weights (" + m.native_dtype + ")", f"{fb(d['weight_bytes'])} ({d['weight_bytes'] / 2**30:.1f} GiB)"],
        ["read every step", fb(d["dense_weight_bytes"])],
        ["one routed expert", fb(d["expert_weight_bytes"])],
        ["matmul FLOPs/token", fs(d["matmul_flops_per_token"], "FLOP")],
        [f"attention FLOPs/token @ {L:g}", fs(d["attention_flops_per_token"], "FLOP")],
        [f"KV bytes/token @ {L:g} ({d['kv_dtype']})", fb(d["kv_bytes_per_token"])],
        [f"KV held / read per step @ {L:g}", f"{fb(d['kv_cache_bytes'])} / {fb(d['kv_read_bytes'])}"],
    ]
    if m.max_context:
        rows.append(["model's own context limit", f"{m.max_context:,} tokens"])
    table(m.name, ["quantity", "value"], rows, caption=m.description or None)


def _attn_text(m) -> str:
    if m.attention == "mla":
        s = f"MLA, {m.n_heads} heads, latent {m.kv_lora_rank} + rope {m.qk_rope_head_dim}"
    else:
        kind = "MHA" if m.n_kv_heads == m.n_heads else ("MQA" if m.n_kv_heads == 1 else "GQA")
        s = f"{kind} {m.n_heads}/{m.n_kv_heads} heads x {m.head_dim}"
    if "sliding" in m.layer_types:
        s += f"; {m.layer_types.count('sliding')} of {m.n_layers} layers sliding {m.sliding_window}"
    if m.kv_share > 1:
        s += f"; KV shared by {m.kv_share} layers"
    if m.index_topk:
        s += f"; DSA top-{m.index_topk} (indexer {m.index_n_heads} x {m.index_head_dim})"
    return s


def _ffn_text(m) -> str:
    if not m.n_experts:
        return f"dense, d_ff {m.d_ff}" + (" (parallel block)" if m.parallel_block else "")
    s = f"MoE {m.experts_per_token} of {m.n_experts} experts x {m.moe_d_ff}"
    if m.n_shared_experts:
        s += f" + {m.n_shared_experts} shared"
    s += f" in {m.n_moe_layers} layers"
    if m.n_dense_layers:
        s += f"; {m.n_dense_layers} dense (d_ff {m.d_ff})"
    return s
