"""A reversible (Feistel) transformer stack in PyTorch (optional extra: ``pip install rackmath[torch]``).

Lecture 02:04:02: (x, y) ↦ (y + f(x), x) is invertible for any f; RevNets (Gomez et al.
2017) and Reformer (Kitaev et al. 2020) use it so that the backward pass rebuilds each
layer's input from its output instead of storing it.

Here f(x) is the residual update of a pre-LN GPT block (causal self-attention + GeLU MLP):

    f(x) = attn(LN₁(x)) + mlp(LN₂(x + attn(LN₁(x))))

:class:`ReversibleStack` runs L such blocks under one custom ``autograd.Function`` that
saves only the final two streams; its backward walks the layers in reverse, reconstructs
(x, y) = (c, a − f(c)) and recomputes f with grad enabled to get parameter and input
gradients. ``reversible=False`` runs the same blocks under ordinary autograd (stored
activations), for comparison.

``saved_activation_bytes`` measures, deterministically, the bytes autograd keeps for the
backward pass (``torch.autograd.graph.saved_tensors_hooks``; unique storages; parameters
excluded). Import this module only when torch is installed.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class FeistelF(nn.Module):
    """f(x) = attn(LN₁(x)) + mlp(LN₂(x + attn(LN₁(x)))): a pre-LN block minus its input (no dropout)."""

    def __init__(self, d_model: int, n_heads: int, ffn_mult: int = 4, max_seq: int = 1024):
        super().__init__()
        if d_model % n_heads:
            raise ValueError("d_model must be divisible by n_heads")
        self.h, self.a = d_model, n_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, ffn_mult * d_model)
        self.fc2 = nn.Linear(ffn_mult * d_model, d_model)
        mask = torch.full((max_seq, max_seq), float("-inf")).triu(1)
        self.register_buffer("causal_bias", mask, persistent=False)

    def attn(self, x):
        b, s, h = x.shape
        dh = h // self.a
        q, k, v = self.qkv(self.ln1(x)).split(h, dim=-1)
        q, k, v = (t.reshape(b, s, self.a, dh).transpose(1, 2).contiguous() for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(dh)) + self.causal_bias[:s, :s]
        p = torch.softmax(scores, dim=-1)
        ctx = (p @ v).transpose(1, 2).reshape(b, s, h)
        return self.proj(ctx)

    def forward(self, x):
        o = self.attn(x)
        return o + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x + o))))


class ReversibleBlock(nn.Module):
    """(x, y) ↦ (y + f(x), x) and its inverse (a, c) ↦ (c, a − f(c))."""

    def __init__(self, d_model: int, n_heads: int, ffn_mult: int = 4, max_seq: int = 1024):
        super().__init__()
        self.f = FeistelF(d_model, n_heads, ffn_mult, max_seq)

    def forward(self, x, y):
        return y + self.f(x), x

    def inverse(self, a, c):
        return c, a - self.f(c)


class _ReversibleFn(torch.autograd.Function):
    """Runs the blocks without storing activations; backward reconstructs them layer by layer."""

    @staticmethod
    def forward(ctx, x, y, blocks, n_params, *params):
        with torch.no_grad():
            for blk in blocks:
                x, y = blk(x, y)
        ctx.blocks = blocks
        ctx.save_for_backward(x, y)  # the only activations kept: the last layer's two streams
        return x, y

    @staticmethod
    def backward(ctx, ga, gc):
        a, c = ctx.saved_tensors
        blocks = ctx.blocks
        param_grads = []
        for blk in reversed(blocks):
            # outputs (a, c) = (y + f(x), x): rebuild x = c, f(x) with grad, then y = a − f(x)
            x = c.detach().requires_grad_(True)
            with torch.enable_grad():
                fx = blk.f(x)
            params = list(blk.parameters())
            grads = torch.autograd.grad(fx, [x] + params, ga, allow_unused=True)
            with torch.no_grad():
                y = a - fx
            # dL/dy = dL/da ; dL/dx = dL/dc + J_fᵀ dL/da
            ga, gc = gc + grads[0], ga
            a, c = x.detach(), y.detach()
            param_grads.append(grads[1:])
        flat = [g for grads in reversed(param_grads) for g in grads]
        return (ga, gc, None, None, *flat)


class ReversibleStack(nn.Module):
    """L reversible blocks on two streams of width d_model; ``reversible=False`` stores activations."""

    def __init__(self, n_layers: int, d_model: int, n_heads: int, ffn_mult: int = 4, max_seq: int = 1024,
                 reversible: bool = True):
        super().__init__()
        self.blocks = nn.ModuleList(ReversibleBlock(d_model, n_heads, ffn_mult, max_seq) for _ in range(n_layers))
        self.reversible = reversible

    def forward(self, x, y):
        if self.reversible:
            params = [p for blk in self.blocks for p in blk.parameters()]
            return _ReversibleFn.apply(x, y, self.blocks, len(params), *params)
        for blk in self.blocks:
            x, y = blk(x, y)
        return x, y

    @torch.no_grad()
    def inverse(self, a, c):
        for blk in reversed(self.blocks):
            a, c = blk.inverse(a, c)
        return a, c


def saved_activation_bytes(fn, params=()):
    """Run ``fn()`` and return (result, bytes autograd saved for backward).

    Counts each saved tensor's storage once (views share storage), excluding parameter
    storages: the activations the backward pass will need, independent of the allocator.
    """
    param_ptrs = {p.untyped_storage().data_ptr() for p in params}
    seen: dict[int, int] = {}

    def pack(t):
        st = t.untyped_storage()
        ptr = st.data_ptr()
        if ptr not in param_ptrs:
            seen[ptr] = max(seen.get(ptr, 0), st.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return out, sum(seen.values())
