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
"""
from __future__ import annotations

import numpy as np

from minigrad import Module, Tensor, from_pair

from .checks import float_input, generator, last_dim, matrix_input, positive_int, shape_is
from .linear import Linear
from .silu import dsilu, sigmoid_stable

__all__ = ["swiglu_forward", "swiglu_backward", "SwiGLUFunction", "swiglu", "SwiGLU"]


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
    """SwiGLU backward in NumPy.

    Args:
        dout: (..., O) gradient of the loss with respect to ``out``.
        cache: what ``swiglu_forward`` returned.

    Returns:
        (dx, dw_gate, dw_up, dw_down) with the shapes of x, w_gate, w_up and w_down.
    """
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


def swiglu(x, w_gate, w_up, w_down) -> Tensor:
    """SwiGLU feed-forward: ``(silu(x Wg^T) * (x Wu^T)) Wd^T`` (Shazeer 2020, eq. 6), one node.

    Args:
        x: Tensor (or array, taken as a constant) of shape (..., C), float32 or float64.
        w_gate: (H, C) gate projection, PyTorch Linear layout (out, in).
        w_up: (H, C) up projection.
        w_down: (O, H) down projection.
        All weights have x's dtype; a plain array is a constant.

    Returns:
        Tensor of shape (..., O) and x's dtype, with gradients for x and all three weights.

    Raises:
        TypeError: a non-floating dtype, or weights of a different dtype than x.
        ValueError: x with no axis, weights that are not 2-D, or shapes that do not chain
            (w_gate (H, C) with C = x.shape[-1], w_up of w_gate's shape, w_down (O, H)).
    """
    fn = "swiglu"
    x, xa = float_input(x, "x", fn)
    C = last_dim(xa, fn, "the feature axis")
    w_gate, wg = matrix_input(w_gate, "w_gate", fn, "(out, in)", like=xa)
    w_up, wu = matrix_input(w_up, "w_up", fn, "(out, in)", like=xa)
    w_down, wd = matrix_input(w_down, "w_down", fn, "(out, in)", like=xa)
    shape_is(wg, ("H", C), "w_gate", fn, f" for x of shape {xa.shape}")
    shape_is(wu, wg.shape, "w_up", fn, " (w_gate's shape)")
    shape_is(wd, ("O", wg.shape[0]), "w_down", fn, f" (H = {wg.shape[0]} from w_gate)")
    return SwiGLUFunction.apply(x, w_gate, w_up, w_down)


class SwiGLU(Module):
    """``swiglu`` as a Module with three bias-free ``Linear`` projections (the chapter's
    ``SwiGLU``): ``down_proj(silu(gate_proj(x)) * up_proj(x))``, one fused node.

    Hidden width H = int(d * hidden_mult); 8/3 keeps the parameter count near a 4d GELU MLP's.

    Args:
        d (int): model width C.
        hidden_mult (float): H / C, default 8/3.
        rng (np.random.Generator | None), dtype: as ``Linear``.
        backward: keyword-only; None for ``swiglu_backward``, or a function of the same
            signature ``(dout, cache) -> (dx, dw_gate, dw_up, dw_down)`` to use in its place.

    Parameters: ``gate_proj.weight`` (H, C), ``up_proj.weight`` (H, C), ``down_proj.weight``
    (C, H); each U(+-1/sqrt(fan_in)), drawn in that order.
    Shapes: x (..., C) -> (..., C).

    Raises:
        ValueError: if int(d * hidden_mult) < 1.
    """

    def __init__(self, d: int, hidden_mult: float = 8.0 / 3.0, rng=None,
                 dtype=np.float32, *, backward=None) -> None:
        super().__init__()
        d = positive_int(d, "d", "SwiGLU")
        hidden = int(d * hidden_mult)
        if hidden < 1:
            raise ValueError(f"SwiGLU hidden width int({d} * {hidden_mult}) must be >= 1")
        rng = generator(rng)
        self.hidden = hidden
        self.gate_proj = Linear(d, hidden, bias=False, rng=rng, dtype=dtype)
        self.up_proj = Linear(d, hidden, bias=False, rng=rng, dtype=dtype)
        self.down_proj = Linear(hidden, d, bias=False, rng=rng, dtype=dtype)
        self.function = (SwiGLUFunction if backward is None
                         else from_pair(swiglu_forward, backward))

    def forward(self, x: Tensor) -> Tensor:
        return self.function.apply(x, self.gate_proj.weight, self.up_proj.weight,
                                   self.down_proj.weight)
