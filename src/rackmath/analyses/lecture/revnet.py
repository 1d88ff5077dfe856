"""Reversible (RevNet / Feistel) layers: activation memory vs extra compute (lecture 02:04:02, R43).

The Feistel construction (lecture 02:04:02; Gomez et al. 2017, "The Reversible Residual
Network", arXiv 1707.04585; Kitaev et al. 2020, "Reformer", §3):

    forward:  (x, y) ↦ (y + f(x), x)
    inverse:  (a, c) ↦ (c, a − f(c))

is invertible for any f, so training need not store any layer's activations: the
backward pass reconstructs each layer's input from its output, "in lockstep undoing all
of the forwards pass steps" (lecture). Memory goes from linear in depth to constant;
compute rises by one forward per layer.

Per-layer stored activations follow Korthikanti et al. 2022 ("Reducing Activation
Recomputation in Large Transformer Models", arXiv 2205.05198, §4.1) for a pre-LN GPT
block (s sequence length, b sequences, h hidden size, a heads, e bytes per element,
MLP width m·h):

    elements kept = s·b·h·(8 + 2m)      [LN inputs 2, QKV input 1, Q K V 3, attn-out input 1,
                                          MLP input 1, GeLU input m, fc2 input m]
                  + a·s²·b              [softmax output; 0 with FlashAttention]
    dropout adds    2·s·b·h + a·s²·b·(1 + e) bytes  (masks of 1 byte; dropout output)

With e = 2, m = 4 and dropout this is Korthikanti's s·b·h·(34 + 5·a·s/h).
LayerNorm's per-token mean and inverse std (2 values per LN per token) are neglected.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import InputError, check_positive
from ...explain import Derivation, fmt

SCHEMES = ("standard", "full-recompute", "reversible")


def layer_activation_bytes(s, b, h, a, bytes_per_elem=2.0, ffn_mult=4.0, dropout=False, flash=False):
    """Activation bytes one transformer layer stores for its backward pass (Korthikanti et al. 2022 §4.1):

      A = e·s·b·h·(8 + 2m) + e·a·s²·b·[not flash] + dropout·(2·s·b·h + (1 + e)·a·s²·b·[not flash])
    (e = 2, m = 4, dropout, no flash ⇒ s·b·h·(34 + 5·a·s/h), their Table 2, first row).
    """
    s, b, h, a = (np.asarray(v, float) for v in (s, b, h, a))
    e = float(bytes_per_elem)
    sbh = s * b * h
    scores = 0.0 if flash else a * s * s * b
    out = e * sbh * (8.0 + 2.0 * ffn_mult) + e * scores
    if dropout:
        out = out + 2.0 * sbh + (1.0 + e) * scores
    return out


def layer_input_bytes(s, b, h, bytes_per_elem=2.0, streams=1):
    """Bytes of one layer's input: e·s·b·h per residual stream (a Feistel/RevNet block has 2 streams)."""
    return float(bytes_per_elem) * np.asarray(streams, float) * np.asarray(s, float) * np.asarray(b, float) * \
        np.asarray(h, float)


def stored_activation_bytes(scheme, n_layers, per_layer, input_bytes, streams=1):
    """Bytes kept from the forward pass for the backward pass, for L layers:

      standard:        L · A                    (every layer's activations)
      full-recompute:  L · e·s·b·h·streams      (only each layer's input; Chen et al. 2016 "Training deep nets
                                                 with sublinear memory cost"; Korthikanti's 2·s·b·h in 16-bit)
      reversible:      e·s·b·h·streams          (only the last layer's output; Gomez et al. 2017)
    ``input_bytes`` is one stream's e·s·b·h.
    """
    L = np.asarray(n_layers, float)
    if scheme == "standard":
        return L * np.asarray(per_layer, float)
    if scheme == "full-recompute":
        return L * np.asarray(input_bytes, float) * streams
    if scheme == "reversible":
        return np.asarray(input_bytes, float) * streams + 0.0 * L
    raise InputError("scheme", f"unknown scheme {scheme!r}", ", ".join(SCHEMES))


def peak_activation_bytes(scheme, n_layers, per_layer, input_bytes, streams=1):
    """Peak during the backward pass = stored + one layer's activations being rebuilt (0 extra for standard):

      standard: L·A;  full-recompute: L·e·s·b·h·streams + A;  reversible: e·s·b·h·streams + A.
    """
    extra = 0.0 if scheme == "standard" else np.asarray(per_layer, float)
    return stored_activation_bytes(scheme, n_layers, per_layer, input_bytes, streams) + extra


def training_flops_factor(scheme):
    """Training FLOPs in units of one forward pass F: standard 3F (forward 1 + backward 2);
    full recomputation 4F (one extra forward per layer); reversible 4F (reconstructing the input
    recomputes f(x), which also supplies f's internals for backprop: Gomez et al. 2017 §3;
    Kitaev et al. 2020 §3). So both cost 4/3 of standard.
    """
    factors = {"standard": 3.0, "full-recompute": 4.0, "reversible": 4.0}
    if scheme not in factors:
        raise InputError("scheme", f"unknown scheme {scheme!r}", ", ".join(SCHEMES))
    return factors[scheme]


@dataclass
class RevnetResult:
    rows: list  # one dict per scheme
    inputs: dict
    derivation: Derivation

    def as_dict(self) -> dict:
        return {"rows": self.rows, "inputs": self.inputs, "derivation": self.derivation.as_dict()}


def compare(*, n_layers, seq_len, batch, d_model, n_heads, bytes_per_elem=2.0, ffn_mult=4.0, dropout=False,
            flash=True, forward_flops=None, name: str = "") -> RevnetResult:
    """Stored and peak activation bytes and training FLOPs for the three schemes (standard: one stream;
    recompute: one stream; reversible: two streams of width h, Reformer-style)."""
    for v, f in ((n_layers, "layers"), (seq_len, "seq"), (batch, "batch"), (d_model, "d-model"),
                 (n_heads, "heads"), (bytes_per_elem, "bytes-per-elem")):
        check_positive(v, f)
    d = Derivation(f"Activation memory: standard vs recompute vs reversible{(' — ' + name) if name else ''}")
    A = d.add("A_layer", "e·s·b·h·(8 + 2m) + e·a·s²·b·[no flash] (+ dropout)",
              f"{bytes_per_elem:g}·{seq_len:g}·{batch:g}·{d_model:g}·{8 + 2 * ffn_mult:g}"
              + ("" if flash else f" + {bytes_per_elem:g}·{n_heads:g}·{seq_len:g}²·{batch:g}"),
              float(layer_activation_bytes(seq_len, batch, d_model, n_heads, bytes_per_elem, ffn_mult, dropout,
                                           flash)), "B", "Korthikanti et al. 2022 §4.1")
    x = d.add("A_input", "e·s·b·h", f"{bytes_per_elem:g}·{seq_len:g}·{batch:g}·{d_model:g}",
              float(layer_input_bytes(seq_len, batch, d_model, bytes_per_elem)), "B", "one residual stream")
    rows = []
    for scheme, streams in (("standard", 1), ("full-recompute", 1), ("reversible", 2)):
        stored = float(stored_activation_bytes(scheme, n_layers, A, x, streams))
        peak = float(peak_activation_bytes(scheme, n_layers, A, x, streams))
        fac = training_flops_factor(scheme)
        d.add(f"stored[{scheme}]", {"standard": "L · A_layer", "full-recompute": "L · A_input",
                                    "reversible": "2 · A_input"}[scheme], "", stored, "B")
        rows.append({"scheme": scheme, "stored_bytes": stored, "peak_bytes": peak, "flops_factor": fac,
                     "flops_vs_standard": fac / 3.0,
                     "training_flops": None if forward_flops is None else fac * float(forward_flops)})
    d.add("compute", "4F / 3F", "", 4.0 / 3.0, "×", "reversible and full recompute vs standard")
    d.conclusion = (f"reversible keeps {fmt(rows[2]['stored_bytes'], 'B')} instead of "
                    f"{fmt(rows[0]['stored_bytes'], 'B')} ({rows[0]['stored_bytes'] / rows[2]['stored_bytes']:.0f}× "
                    "less) for 4/3 the FLOPs: spending compute to save memory (lecture 02:04, R43)")
    inputs = {"n_layers": n_layers, "seq_len": seq_len, "batch": batch, "d_model": d_model, "n_heads": n_heads,
              "bytes_per_elem": bytes_per_elem, "ffn_mult": ffn_mult, "dropout": dropout, "flash": flash}
    return RevnetResult(rows=rows, inputs=inputs, derivation=d)
