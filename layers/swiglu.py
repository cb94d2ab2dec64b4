"""SwiGLU feed-forward block as one fused node, with a hand-derived backward.

Shapes: x is (..., C) (in the GPT (B, T, C)), N = the product of the leading axes (B * T);
H is the hidden width (``int(C * 8/3)`` in the GPT), O the output width (O = C in the GPT).
Weights in PyTorch Linear layout (out_features, in_features): w_gate (H, C), w_up (H, C),
w_down (O, H); no biases.

Forward (Shazeer 2020, "GLU Variants Improve Transformer", eq. 6 with Swish_1 = SiLU; the
chapter's step 6), per row::

    a   = x Wg^T                # (N, H) gate pre-activation
    u   = x Wu^T                # (N, H) up projection (the "value")
    s   = sigmoid(a)
    g   = a s = silu(a)         # (N, H)
    h   = g * u                 # (N, H) gated hidden
    out = h Wd^T                # (N, O)

Cache: ``(x2, a, s, u, g, w_gate, w_up, w_down)`` with ``x2 = x`` viewed as (N, C). ``a`` and
``s`` give silu'(a) without another exp; ``u`` and ``g`` are the two factors of the product
rule. ``h = g * u`` is recomputed in backward (one multiply) instead of kept: one (N, H) array
less to hold between forward and backward.

Backward (product rule on h = g * u, chain rule through silu and the three matmuls)::

    dh      = dout Wd                       # (N, H)
    dWd     = dout^T h                      # (O, H)
    du      = dh * g                        # product rule, the u side
    dg      = dh * u                        # product rule, the g side
    da      = dg * s (1 + a (1 - s))        # silu'(a)
    dWg     = da^T x                        # (H, C)
    dWu     = du^T x                        # (H, C)
    dx      = da Wg + du Wu                 # (N, C): x feeds both branches, the two add

Derivation: docs/derivations.md, section SwiGLU.
PyTorch faces: ``layers.functional.swiglu``, ``layers.modules.SwiGLU``.
"""
import numpy as np

from minigrad import from_pair

from .silu import dsilu, sigmoid_stable


def swiglu_forward(x: np.ndarray, w_gate: np.ndarray, w_up: np.ndarray, w_down: np.ndarray):
    """SwiGLU forward in NumPy: ``out = (silu(x Wg^T) * (x Wu^T)) Wd^T``.

    Args:
        x: (..., C) float array.
        w_gate, w_up: (H, C); w_down: (O, H); all of x's dtype.

    Returns:
        (out, cache): ``out`` of shape (..., O) in x's dtype; the cache for ``swiglu_backward``.
    """
    lead, C = x.shape[:-1], x.shape[-1]
    x2 = x.reshape(-1, C)                   # (N, C), a view when x is contiguous
    a = x2 @ w_gate.T                       # (N, H)
    u = x2 @ w_up.T                         # (N, H)
    s = sigmoid_stable(a)                   # (N, H)
    g = a * s                               # (N, H) silu(a)
    h = g * u                               # (N, H)
    out = h @ w_down.T                      # (N, O)
    out = out.reshape(*lead, w_down.shape[0])   # (..., O)
    return out, (x2, a, s, u, g, w_gate, w_up, w_down)


def swiglu_backward(dout: np.ndarray, cache):
    """Gradients ``(dx, dw_gate, dw_up, dw_down)`` of ``swiglu_forward`` for dout (..., O), in
    the shapes of x, w_gate, w_up and w_down."""
    x2, a, s, u, g, w_gate, w_up, w_down = cache
    lead = dout.shape[:-1]
    dout2 = dout.reshape(-1, dout.shape[-1])    # (N, O)
    dh = dout2 @ w_down                         # (N, H)
    dw_down = dout2.T @ (g * u)                 # (O, H), h = g * u recomputed
    du = dh * g                                 # (N, H) product rule, the u side
    dg = dh * u                                 # (N, H) product rule, the g side
    da = dg * dsilu(a, s)                       # (N, H) silu'(a) = s (1 + a (1 - s))
    dw_gate = da.T @ x2                         # (H, C)
    dw_up = du.T @ x2                           # (H, C)
    dx = da @ w_gate + du @ w_up                # (N, C) x feeds both branches: the two add
    return dx.reshape(*lead, x2.shape[1]), dw_gate, dw_up, dw_down


SwiGLUFunction = from_pair(swiglu_forward, swiglu_backward, "SwiGLUFunction")
