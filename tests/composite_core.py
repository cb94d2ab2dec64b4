"""Composite references for the core layers, built only from minigrad primitives.

Each function computes the same forward formula as its hand-derived layer, but as a chain of the
engine's primitive ops (indexing, stack, exp, log, sum, matmul, where, ...), so the engine's
reverse mode differentiates it. Tests compare the two backward passes to 1e-10 in float64:
two derivations, one answer.

Shape letters: B batch, H heads, T sequence, hs head size, V vocabulary, N rows.
"""
from __future__ import annotations

import math

import numpy as np

import minigrad
from minigrad import Tensor


def rotate_half_composite(x: Tensor) -> Tensor:
    """Interleaved pair (x0, x1) -> (-x1, x0), the chapter's step 8, from indexing + stack."""
    x1 = x[..., 0::2]                                   # (..., hs/2)
    x2 = x[..., 1::2]                                   # (..., hs/2)
    return minigrad.stack([-x2, x1], axis=-1).reshape(*x.shape)  # (..., hs/2, 2) -> (..., hs)


def rope_composite(x: Tensor, cos, sin) -> Tensor:
    """``x * cos + rotate_half(x) * sin`` from primitives."""
    return x * cos + rotate_half_composite(x) * sin


def softmax_composite(x: Tensor, axis: int = -1) -> Tensor:
    """``exp(x - max) / sum(exp(x - max))``; the max is a constant (softmax is shift-invariant)."""
    m = np.max(x.data, axis=axis, keepdims=True)
    e = (x - m).exp()
    return e / e.sum(axis=axis, keepdims=True)


def cross_entropy_composite(logits: Tensor, targets) -> Tensor:
    """``mean_n(logsumexp(logits_n) - logits_n[target_n])`` with log-softmax
    ``(x - max) - log(sum(exp(x - max)))``; logits (N, V), targets (N,) ints."""
    targets = np.asarray(targets.data if isinstance(targets, Tensor) else targets)
    n = logits.shape[0]
    z = logits - np.max(logits.data, axis=-1, keepdims=True)   # (N, V)
    logp = z - z.exp().sum(axis=-1, keepdims=True).log()        # (N, V)
    picked = logp[np.arange(n), targets]                        # (N,)
    return -picked.mean()


def attention_composite(q: Tensor, k: Tensor, v: Tensor, is_causal: bool = False) -> Tensor:
    """``softmax(q k^T / sqrt(hs) + mask) v`` as matmul, masked_fill(-inf), softmax, matmul."""
    hs = q.shape[-1]
    att = (q @ k.swapaxes(-1, -2)) * (1.0 / math.sqrt(hs))     # (B, H, T, T)
    if is_causal:
        tq, tk = q.shape[-2], k.shape[-2]
        future = ~np.tril(np.ones((tq, tk), dtype=bool))
        att = minigrad.masked_fill(att, future, -np.inf)
    return softmax_composite(att, axis=-1) @ v                  # (B, H, T, hs)


def linear_composite(x: Tensor, weight: Tensor, bias=None) -> Tensor:
    """``x @ weight.T + bias``."""
    out = x @ weight.T
    return out if bias is None else out + bias


def embedding_composite(idx, weight: Tensor) -> Tensor:
    """``weight[idx]`` through the engine's indexing (its backward is np.add.at)."""
    idx = np.asarray(idx.data if isinstance(idx, Tensor) else idx)
    return weight[idx]
