"""Scaled dot-product attention core, optionally causal, as ONE autograd node.

Shapes: B batch, H heads, T sequence length (Tq queries, Tk keys; Tq = Tk = T in the GPT), hs head
size. q (B, H, Tq, hs), k (B, H, Tk, hs), v (B, H, Tk, hv); any leading batch dims, identical for
q, k and v (no broadcasting between them).

Forward (Vaswani et al. 2017, "Attention Is All You Need", eq. 1; causal mask as in GPT)::

    S = q k^T / sqrt(hs)                    (B, H, Tq, Tk)   scores
    S_ij = -inf where j > i   (is_causal; top-left aligned, as torch's is_causal)
    P = softmax(S)  along the last axis     (B, H, Tq, Tk)   attention weights
    out = P v                               (B, H, Tq, hv)

Under the causal mask row i always sees position 0, so every row has a finite max, the masked
entries become exp(-inf) = 0 exactly, and no NaN can appear. P is exactly 0 at future positions,
so every gradient that flows to a future token is exactly 0.

Cache: q, k, v (references to the inputs) and P (B, H, Tq, Tk). P is the one intermediate that
both backward products need; recomputing it would cost a second matmul and softmax (the
flash-attention trade, not taken here at T = 32). S is not kept: the softmax backward needs only P.

Backward (the matmul rule dA = dC B^T, dB = A^T dC twice, and the softmax JVP between)::

    dv = P^T dout                            (B, H, Tk, hv)
    dP = dout v^T                            (B, H, Tq, Tk)
    dS = P * dP - P * rowsum(P * dP)         (B, H, Tq, Tk)   softmax JVP; 0 where masked
    dq = dS k / sqrt(hs)                     (B, H, Tq, hs)
    dk = dS^T q / sqrt(hs)                   (B, H, Tk, hs)

Derivation: docs/derivations.md, section Attention.

Multi-head attention on the packed projection (``multi_head_attention``, one node for what
would otherwise be reshape, transpose, three indexing nodes, this core and a transpose and
reshape back)::

    qkv (B, T, 3C) viewed as (B, T, 3, H, hs) -> q, k, v = [:, :, i] moved to (B, H, T, hs)
    y = attention(q, k, v)  (B, H, T, hs)  ->  transposed to (B, T, H, hs), reshaped to (B, T, C)

The split and the head layout only move entries, so their backward moves them back: dy is
viewed as (B, H, T, hs), and dq, dk, dv are written into the three slots of one (B, T, 3, H, hs)
array, the concatenation that is the backward of a split (each entry of qkv feeds exactly one
of q, k, v, so nothing is summed and no zero array is needed). Same arithmetic as the separate
nodes, bit for bit.
"""
from __future__ import annotations

import numpy as np

from minigrad import Module, Tensor, from_pair

from .checks import (boolean, divides, even_head_dim, float_dtype, float_input, generator,
                      packed_qkv, positive_int, positive_number, qkv_shapes, same_dtype, sequence_input)
from .linear import Linear
from .rope import RoPEFunction, build_rope_cache, rope_forward

__all__ = ["scaled_dot_product_attention", "attention_forward", "attention_backward",
           "AttentionFunction", "multi_head_attention", "multi_head_attention_forward",
           "multi_head_attention_backward", "MultiHeadAttentionFunction", "CausalSelfAttention"]


def _future_mask(tq, tk):
    """(Tq, Tk) bool, True where key j lies in the future of query i (j > i)."""
    return np.triu(np.ones((tq, tk), dtype=bool), k=1)


def attention_forward(q, k, v, is_causal=False, scale=None):
    """``softmax(q k^T * scale + mask) v``, scale = 1/sqrt(hs) unless given.

    Args:
        q (np.ndarray): (..., Tq, hs); k (..., Tk, hs); v (..., Tk, hv); one floating dtype.
        is_causal (bool): mask keys j > i.
        scale (float | None): the factor of the scores; None for 1/sqrt(hs).

    Returns:
        (out, cache): out (..., Tq, hv); cache = (q, k, v, P, scale).
    """
    scale = q.dtype.type(1.0 / np.sqrt(q.shape[-1]) if scale is None else scale)  # inputs' dtype
    S = (q @ np.swapaxes(k, -1, -2)) * scale          # (B, H, Tq, Tk) scores
    if is_causal:
        S = np.where(_future_mask(S.shape[-2], S.shape[-1]), -np.inf, S)  # -inf where j > i
    e = np.exp(S - np.max(S, axis=-1, keepdims=True))  # row max finite: column 0 is visible
    P = e / np.sum(e, axis=-1, keepdims=True)         # softmax(S); exactly 0 where masked
    out = P @ v                                       # (B, H, Tq, hv)
    return out, (q, k, v, P, scale)


def attention_backward(dout, cache):
    """Gradients of ``attention_forward`` for q, k and v.

    Args:
        dout (np.ndarray): (..., Tq, hv).
        cache: (q, k, v, P, scale) from ``attention_forward``.

    Returns:
        (dq, dk, dv): each with its input's shape and dtype.
    """
    q, k, v, P, scale = cache
    dv = np.swapaxes(P, -1, -2) @ dout                         # dv = P^T dout   (B, H, Tk, hv)
    dP = dout @ np.swapaxes(v, -1, -2)                         # (B, H, Tq, Tk)
    dS = P * dP - P * np.sum(P * dP, axis=-1, keepdims=True)   # softmax JVP (as in softmax.py)
    dS = dS * scale                                   # the 1/sqrt(hs) of S, once for dq and dk
    dq = dS @ k                                       # dq = dS k / sqrt(hs)      (B, H, Tq, hs)
    dk = np.swapaxes(dS, -1, -2) @ q                  # dk = dS^T q / sqrt(hs)    (B, H, Tk, hs)
    return dq, dk, dv


AttentionFunction = from_pair(attention_forward, attention_backward, "AttentionFunction")


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None):
    """Attention core ``softmax(q k^T * scale + mask) v``, one node with a hand-derived backward
    (``torch.nn.functional.scaled_dot_product_attention``, same signature; no attn_mask, no
    dropout).

    Args:
        query (Tensor | np.ndarray): (B, H, Tq, hs); any leading dims (at least 2-d in all).
        key (Tensor | np.ndarray): (B, H, Tk, hs).
        value (Tensor | np.ndarray): (B, H, Tk, hv).
            All floating with one dtype, the same leading dims; plain arrays are constants.
        attn_mask: must be None (not implemented; ``is_causal`` gives the causal mask).
        dropout_p (float): must be 0 (not implemented).
        is_causal (bool): mask future keys (j > i), aligned to the top-left like PyTorch.
        scale (float | None): factor of the scores; None (default) for 1/sqrt(hs).

    Returns:
        Tensor (B, H, Tq, hv) of the inputs' dtype.

    Raises:
        NotImplementedError: an attn_mask, or dropout_p other than 0.
        TypeError: non-floating inputs, mixed dtypes, or a non-bool is_causal.
        ValueError: mismatched shapes, fewer than 2 dims, an empty sequence or head, or a scale
            that is not a finite number > 0.
    """
    fn = "scaled_dot_product_attention"
    if attn_mask is not None or dropout_p != 0:
        raise NotImplementedError(f"{fn}: attn_mask and dropout_p are not implemented "
                                  f"(use is_causal for the causal mask)")
    q, qa = sequence_input(query, "query", fn)
    k, ka = sequence_input(key, "key", fn)
    v, va = sequence_input(value, "value", fn)
    same_dtype(ka, "key", qa, "query", fn)
    same_dtype(va, "value", qa, "query", fn)
    is_causal = boolean(is_causal, "is_causal", fn)
    qkv_shapes(qa, ka, va, fn)
    scale = None if scale is None else positive_number(scale, "scale", fn)
    return AttentionFunction.apply(q, k, v, is_causal=is_causal, scale=scale)


def _heads(a, n_heads, parts):
    """(B, T, parts * C) -> a (parts, B, H, T, hs) view (no copy) of the same entries."""
    B, T, W = a.shape
    return a.reshape(B, T, parts, n_heads, W // (parts * n_heads)).transpose(2, 0, 3, 1, 4)


def multi_head_attention_forward(qkv, n_heads=1, is_causal=False):
    """Split the packed (B, T, 3C) projection into heads, attend, merge the heads.

    q, k, v are views of qkv (``_heads``), ``attention_forward`` runs on them, and its
    (B, H, T, hs) output is laid out as (B, T, C), the heads side by side.

    Returns:
        (y, cache): y (B, T, C) of qkv's dtype; cache = (q, k, v, P, scale, n_heads), the cache
        of ``attention_forward`` and the number of heads.
    """
    B, T, _ = qkv.shape
    q, k, v = _heads(qkv, n_heads, 3)                   # (B, H, T, hs) views each
    y, cache = attention_forward(q, k, v, is_causal)
    return y.transpose(0, 2, 1, 3).reshape(B, T, -1), (*cache, n_heads)   # (B, T, C)


def multi_head_attention_backward(dy, cache, attention_backward=attention_backward):
    """The (B, T, 3C) gradient of ``multi_head_attention_forward``: dy viewed as (B, H, T, hs),
    ``attention_backward(dout, (q, k, v, P, scale))`` (or the function given in its place),
    and dq, dk, dv written into the slots q, k, v were taken from."""
    B, T, C = dy.shape
    n_heads = cache[-1]
    dout = _heads(dy, n_heads, 1)[0]                    # (B, H, T, hs) view of dy
    dq, dk, dv = attention_backward(dout, cache[:-1])
    dqkv = np.empty((B, T, 3 * C), dtype=dy.dtype)
    slots = _heads(dqkv, n_heads, 3)                    # (3, B, H, T, hs) view of dqkv
    slots[0], slots[1], slots[2] = dq, dk, dv           # backward of a split: concatenate
    return dqkv


MultiHeadAttentionFunction = from_pair(multi_head_attention_forward, multi_head_attention_backward,
                                       "MultiHeadAttentionFunction")


def multi_head_attention(qkv, n_heads, is_causal=False):
    """Multi-head attention on a packed q/k/v projection, as ONE autograd node.

    ``qkv`` holds q, k and v side by side on its last axis (the layout of nanoGPT's and the
    chapter's ``c_attn`` output); each is split into ``n_heads`` heads of size
    hs = C / n_heads, attention runs on every head at once (``attention_forward``, batched
    over B and H), and the heads
    are laid side by side again. The same as
    ``q, k, v = qkv.reshape(B, T, 3, H, hs).transpose(2, 0, 3, 1, 4)`` then
    ``scaled_dot_product_attention(q, k, v, is_causal).transpose(0, 2, 1, 3).reshape(B, T, C)``
    in separate nodes, bit for bit, without their graph nodes and the three zero-filled
    gradients of the indexing.

    Args:
        qkv (Tensor | np.ndarray): (B, T, 3C) floating; a plain array is a constant.
        n_heads (int): H, must divide C.
        is_causal (bool): mask future keys (j > i).

    Returns:
        Tensor (B, T, C) of qkv's dtype.

    Raises:
        TypeError: non-floating qkv, a non-int n_heads or a non-bool is_causal.
        ValueError: qkv not 3-D, an empty batch or sequence, a last axis not 3 * H * hs,
            n_heads < 1.
    """
    fn = "multi_head_attention"
    qkv, a = float_input(qkv, "qkv", fn)
    packed_qkv(a, fn)
    n_heads = positive_int(n_heads, "n_heads", fn)
    divides(n_heads, a.shape[-1] // 3, fn)
    is_causal = boolean(is_causal, "is_causal", fn)
    return MultiHeadAttentionFunction.apply(qkv, n_heads=n_heads, is_causal=is_causal)


class CausalSelfAttention(Module):
    """Multi-head causal self-attention (Vaswani et al. 2017; nanoGPT / the chapter's layout).

    ``c_attn`` projects x to q, k, v at once; heads attend with
    ``softmax(q k^T / sqrt(hs) + causal mask) v`` (without RoPE the split into heads, the
    attention and the merge are one node, ``MultiHeadAttentionFunction``; with RoPE the split
    is separate nodes and the attention one, ``AttentionFunction``); ``c_proj`` mixes the
    heads. With ``rope=True`` queries and keys are rotated by RoPE (Su et al. 2021, interleaved
    pairs, the chapter's step 8) from a cos/sin table of ``block_size`` positions built once.

    Args:
        d_model (int): width C.
        n_heads (int): H, must divide C (and C // H must be even with RoPE).
        rope (bool): apply RoPE to q and k (default False).
        block_size (int): longest sequence the RoPE table covers (default 1024; unused
            without RoPE).
        rng, dtype: as ``Linear``.
        bias (bool): keyword-only; whether ``c_attn`` and ``c_proj`` have a bias (default True).
        backward (dict | None): keyword-only; ``{name: fn}``, a function of the signature of
            ``<name>_backward(dout, cache)`` to use in place of the layer's own, for the names
            "attention" (``attention_backward``; without RoPE it replaces the call inside
            ``multi_head_attention_backward``), "rope" and "linear"; other names are ignored.

    Parameters: ``c_attn.weight`` (3C, C), ``c_attn.bias`` (3C,), ``c_proj.weight`` (C, C),
    ``c_proj.bias`` (C,), drawn in that order.
    Shapes: x (B, T, C) -> (B, T, C).

    Raises:
        ValueError: if n_heads does not divide d_model, head_dim is odd with rope, or (in
            forward) T exceeds block_size with rope.
    """

    def __init__(self, d_model: int, n_heads: int, rope: bool = False, block_size: int = 1024,
                 rng=None, dtype=np.float32, *, bias: bool = True, backward=None) -> None:
        super().__init__()
        d_model = positive_int(d_model, "d_model", "CausalSelfAttention")
        n_heads = positive_int(n_heads, "n_heads", "CausalSelfAttention")
        self.d_model, self.n_heads = d_model, n_heads
        self.head_dim = divides(n_heads, d_model, "CausalSelfAttention")
        self.rope = bool(rope)
        self.block_size = positive_int(block_size, "block_size", "CausalSelfAttention")
        if self.rope:
            even_head_dim(self.head_dim, "CausalSelfAttention")
        rng = generator(rng)
        dt = float_dtype(dtype, "CausalSelfAttention")
        backward = backward or {}
        linear, attn = backward.get("linear"), backward.get("attention")
        self.c_attn = Linear(d_model, 3 * d_model, bias=bias, rng=rng, dtype=dt, backward=linear)
        self.c_proj = Linear(d_model, d_model, bias=bias, rng=rng, dtype=dt, backward=linear)
        if self.rope:
            # constants, not Parameters: (1, 1, block_size, hs) each
            self.rope_cos, self.rope_sin = build_rope_cache(self.block_size, self.head_dim,
                                                            dtype=dt)
            rot = backward.get("rope")
            self.rope_function = RoPEFunction if rot is None else from_pair(rope_forward, rot)
            self.function = (AttentionFunction if attn is None
                             else from_pair(attention_forward, attn))
        elif attn is None:
            self.function = MultiHeadAttentionFunction
        else:  # attn in place of the attention_backward that multi_head_attention_backward calls
            self.function = from_pair(
                multi_head_attention_forward,
                lambda dy, cache: multi_head_attention_backward(dy, cache, attn), attn.__name__)

    def forward(self, x: Tensor) -> Tensor:
        B, T, C = x.shape
        H, hs = self.n_heads, self.head_dim
        qkv = self.c_attn(x)                                   # (B, T, 3C)
        if not self.rope:  # split, attention and merge in one node
            return self.c_proj(self.function.apply(qkv, n_heads=H, is_causal=True))
        # RoPE rotates q and k between the split and the attention: separate nodes
        qkv = qkv.reshape(B, T, 3, H, hs)                      # (B, T, 3, H, hs)
        qkv = qkv.transpose(2, 0, 3, 1, 4)                     # (3, B, H, T, hs)
        q, k, v = qkv[0], qkv[1], qkv[2]                       # (B, H, T, hs) each
        if T > self.block_size:
            raise ValueError(f"sequence length {T} exceeds the RoPE table's "
                             f"block_size {self.block_size}")
        cos = self.rope_cos[:, :, :T]                          # (1, 1, T, hs)
        sin = self.rope_sin[:, :, :T]
        q = self.rope_function.apply(q, cos, sin)
        k = self.rope_function.apply(k, cos, sin)
        y = self.function.apply(q, k, v, is_causal=True)       # (B, H, T, hs)
        y = y.transpose(0, 2, 1, 3).reshape(B, T, C)           # (B, T, C)
        return self.c_proj(y)
