"""Chapter 7 (lecture 02:04:02): Feistel / RevNet layers spend compute to save activation memory (R43)."""

from __future__ import annotations

from . import Claim
from ..analyses.lecture import revnet


def claims() -> list[Claim]:
    # Llama 3 70B shape (L 80, h 8192, 64 heads; published.md C6), one 8K-token sequence, bf16, FlashAttention
    inp = dict(n_layers=80, seq_len=8192, batch=1, d_model=8192, n_heads=64, bytes_per_elem=2.0, flash=True)
    r = revnet.compare(**inp, name="Llama-3-70B shape, 1 × 8K sequence")
    std, rec, rev = r.rows
    saving = std["stored_bytes"] / rev["stored_bytes"]
    return [Claim(
        "R43", "RevNets trade compute for memory (the opposite of the KV cache)", saving, "× less activation memory",
        "more compute for less memory", saving > 1 and rev["flops_vs_standard"] > 1, inp,
        f"reversible stores {rev['stored_bytes'] / 1e9:.2f} GB instead of {std['stored_bytes'] / 1e9:.0f} GB "
        f"(peak {rev['peak_bytes'] / 1e9:.2f} GB vs {std['peak_bytes'] / 1e9:.0f} GB) for "
        f"{rev['flops_vs_standard']:.3f}× the training FLOPs (4F vs 3F); full recomputation stores "
        f"{rec['stored_bytes'] / 1e9:.1f} GB for the same 4/3.", derivation=r.derivation)]
