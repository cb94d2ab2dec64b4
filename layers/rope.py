"""Rotary position embedding (RoPE), interleaved pairs, as one autograd node.

Shapes: B batch, H heads, T sequence length, hs head size (head_dim, even).

Forward (Su et al. 2021, "RoFormer", eq. 34; the interleaved convention of the chapter's step 8):
every pair (x[2i], x[2i+1]) of a head vector at position pos is rotated by the angle
``theta_i = pos * base^(-2i/hs)``::

    out = x * cos + rotate_half(x) * sin
    rotate_half(x)[2i]   = -x[2i+1]
    rotate_half(x)[2i+1] =  x[2i]

where ``cos``/``sin`` hold cos(theta_i)/sin(theta_i) repeated for both members of pair i
(``build_rope_cache``). Written per pair this is the 2x2 rotation
``[o0, o1] = [[c, -s], [s, c]] @ [x0, x1]``.

Cache: only ``cos`` and ``sin`` (references to the caller's constant arrays, not copies). The
map is linear in x, so x itself is not needed for the gradient.

Backward: the transpose of a rotation is the rotation by -theta. With ``rotate_half^T = -rotate_half``::

    dx = dout * cos + rotate_half^T(dout * sin) = dout * cos - rotate_half(dout * sin)

cos and sin are constants (no gradient).

Derivation: docs/derivations.md, section RoPE.
PyTorch faces: ``layers.functional.apply_rope`` (and ``build_rope_cache`` with its arguments
checked), ``layers.modules.CausalSelfAttention(rope=True)``.
"""
import numpy as np

from minigrad import from_pair


def rotate_half(x):
    """Interleaved ``rotate_half`` of the chapter's step 8: pair (x0, x1) -> (-x1, x0), for x
    (..., hs) with hs even; x's shape and dtype."""
    pairs = np.stack((-x[..., 1::2], x[..., 0::2]), axis=-1)    # (..., hs/2, 2): (-x1, x0)
    return pairs.reshape(x.shape)


def rope_forward(x, cos, sin):
    """``out = x * cos + rotate_half(x) * sin``.

    Args:
        x (np.ndarray): (B, H, T, hs) or any (..., T, hs), floating.
        cos, sin (np.ndarray): broadcastable to x's shape without changing it, x's dtype.

    Returns:
        (out, cache): out (..., T, hs); cache = (cos, sin).
    """
    out = (x * cos                    # term 1: x * cos            (B, H, T, hs)
           + rotate_half(x) * sin)    # term 2: rotate_half(x) * sin
    return out, (cos, sin)


def rope_backward(dout, cache):
    """``dx = dout * cos - rotate_half(dout * sin)`` (the rotation by -theta), for dout
    (..., T, hs) and the cache (cos, sin) of ``rope_forward``; dx has dout's shape and dtype."""
    cos, sin = cache
    return (dout * cos                        # term 1: dout * cos
            - rotate_half(dout * sin))        # term 2: rotate_half^T = -rotate_half


RoPEFunction = from_pair(rope_forward, rope_backward, "RoPEFunction", wrt=("x",))  # cos, sin: constants


def build_rope_cache(seq_len, head_dim, base=10000, dtype=np.float32):
    """The cos/sin tables of RoPE for positions ``0 .. seq_len-1`` (the chapter's step 8).

    Angle of pair i at position pos: ``pos * base^(-2i/head_dim)`` (RoFormer eq. 15), computed in
    float64 and cast to ``dtype`` at the end, so positions past 1,000 keep their accuracy.

    seq_len T >= 1, head_dim hs even and >= 2, base > 0 (10000 in RoFormer), dtype floating: not
    checked here (``layers.functional.build_rope_cache`` checks them, then calls this).
    Returns (cos, sin), each (1, 1, seq_len, head_dim) of ``dtype``; columns 2i and 2i+1 hold
    the same angle (each angle repeated for its interleaved pair).
    """
    half = head_dim // 2
    inv_freq = base ** (-2.0 * np.arange(half, dtype=np.float64) / head_dim)  # (hs/2,)
    pos = np.arange(seq_len, dtype=np.float64)                                      # (T,)
    angles = np.outer(pos, inv_freq)                                                 # (T, hs/2)
    cos = np.repeat(np.cos(angles), 2, axis=-1).astype(dtype)                        # (T, hs)
    sin = np.repeat(np.sin(angles), 2, axis=-1).astype(dtype)                        # (T, hs)
    return cos[None, None], sin[None, None]                                          # (1, 1, T, hs)
