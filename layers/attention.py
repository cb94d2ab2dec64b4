"""Scaled dot-product attention core, optionally causal or masked, as ONE autograd node.

Shapes: B batch, H heads, T sequence length (Tq queries, Tk keys; Tq = Tk = T in the GPT), hs head
size. q (B, H, Tq, hs), k (B, H, Tk, hs), v (B, H, Tk, hv); any leading batch dims, broadcast
between q, k and v as ``@`` broadcasts them (the engine sums each gradient back to its shape).

Forward (Vaswani et al. 2017, "Attention Is All You Need", eq. 1; causal mask as in GPT)::

    S = q k^T / sqrt(hs) + M                (B, H, Tq, Tk)   scores
    M = attn_mask (float: added) | 0 where True, -inf where False (bool)   broadcast to S
    S_ij = -inf where j > i   (is_causal; top-left aligned, as torch's is_causal)
    P = softmax(S)  along the last axis     (B, H, Tq, Tk)   attention weights
    out = P v                               (B, H, Tq, hv)

Masked entries become exp(-inf) = 0 exactly: P is 0 there, so every gradient that flows to a
hidden key is exactly 0. A row that sees no key at all (masked everywhere, or Tk = 0) gets P = 0
and out = 0, as PyTorch; under the causal mask alone row i always sees position 0.

Cache: q, k, v (references to the inputs) and P (B, H, Tq, Tk). P is the one intermediate that
both backward products need; recomputing it would cost a second matmul and softmax (the
flash-attention trade, not taken here at T = 32). S is not kept: the softmax backward needs only P.

Backward (the matmul rule dA = dC B^T, dB = A^T dC twice, and the softmax JVP between)::

    dv = P^T dout                            (B, H, Tk, hv)
    dP = dout v^T                            (B, H, Tq, Tk)
    dS = P * dP - P * rowsum(P * dP)         (B, H, Tq, Tk)   softmax JVP; 0 where masked
    dq = dS k / sqrt(hs)                     (B, H, Tq, hs)
    dk = dS^T q / sqrt(hs)                   (B, H, Tk, hs)
    dM = dS                                  (a float attn_mask: it is added to S;
                                              attention_mask_backward)

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

PyTorch faces: ``layers.functional.scaled_dot_product_attention``,
``layers.functional.multi_head_attention``, ``layers.modules.CausalSelfAttention``.
"""
import numpy as np

from minigrad import from_pair


def _future_mask(tq, tk):
    """(Tq, Tk) bool, True where key j lies in the future of query i (j > i)."""
    return np.triu(np.ones((tq, tk), dtype=bool), k=1)


def attention_forward(q, k, v, attn_mask=None, is_causal=False, scale=None):
    """``softmax(q k^T * scale + mask) v``, scale = 1/sqrt(hs) unless given.

    Args:
        q (np.ndarray): (..., Tq, hs); k (..., Tk, hs); v (..., Tk, hv); one floating dtype.
        attn_mask (np.ndarray | None): broadcasts to (..., Tq, Tk); bool (True: the key takes
            part) or of q's dtype (added to the scores).
        is_causal (bool): mask keys j > i.
        scale (float | None): the factor of the scores; None for 1/sqrt(hs).

    Returns:
        (out, cache): out (..., Tq, hv); cache = (q, k, v, P, scale).
    """
    scale = q.dtype.type(1.0 / np.sqrt(q.shape[-1]) if scale is None else scale)  # inputs' dtype
    S = (q @ np.swapaxes(k, -1, -2)) * scale          # (B, H, Tq, Tk) scores
    if is_causal:
        S = np.where(_future_mask(S.shape[-2], S.shape[-1]), -np.inf, S)  # -inf where j > i
    if attn_mask is not None:                         # bool: -inf where False; float: added
        S = np.where(attn_mask, S, -np.inf) if attn_mask.dtype == bool else S + attn_mask
    m = np.max(S, axis=-1, keepdims=True, initial=-np.inf)   # -inf: the row sees no key
    e = np.exp(S - np.maximum(m, np.finfo(S.dtype).min))     # such a row: e = 0
    P = e / np.maximum(np.sum(e, axis=-1, keepdims=True), 1)  # softmax(S); 0 where masked
    out = P @ v                                       # (B, H, Tq, hv)
    return out, (q, k, v, P, scale)


def attention_backward(dout, cache):
    """Gradients of ``attention_forward`` for q, k and v.

    Args:
        dout (np.ndarray): (..., Tq, hv).
        cache: (q, k, v, P, scale) from ``attention_forward``.

    Returns:
        (dq, dk, dv): of the broadcast batch shape (the engine sums each to its input's shape).
    """
    q, k, v, P, scale = cache
    dv = np.swapaxes(P, -1, -2) @ dout                         # dv = P^T dout   (B, H, Tk, hv)
    dP = dout @ np.swapaxes(v, -1, -2)                         # (B, H, Tq, Tk)
    dS = P * dP - P * np.sum(P * dP, axis=-1, keepdims=True)   # softmax JVP (as in softmax.py)
    dS = dS * scale                                   # the 1/sqrt(hs) of S, once for dq and dk
    dq = dS @ k                                       # dq = dS k / sqrt(hs)      (B, H, Tq, hs)
    dk = np.swapaxes(dS, -1, -2) @ q                  # dk = dS^T q / sqrt(hs)    (B, H, Tk, hs)
    return dq, dk, dv


def attention_mask_backward(dout, cache):
    """``attention_backward``'s (dq, dk, dv) and dmask = dS, the gradient of a float attn_mask
    (it is added to the scores S), of the scores' shape."""
    q, k, v, P, scale = cache
    dP = dout @ np.swapaxes(v, -1, -2)                         # (B, H, Tq, Tk)
    dS = P * dP - P * np.sum(P * dP, axis=-1, keepdims=True)   # softmax JVP
    return (*attention_backward(dout, cache), dS)              # dmask = dS


AttentionFunction = from_pair(attention_forward, attention_backward, "AttentionFunction")
MaskedAttentionFunction = from_pair(attention_forward, attention_mask_backward,   # a mask with
                                    "MaskedAttentionFunction", wrt=("q", "k", "v", "attn_mask"))


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
    y, cache = attention_forward(q, k, v, is_causal=is_causal)
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
