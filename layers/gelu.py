"""GELU, tanh approximation, with a hand-derived backward.

Shapes: elementwise; x is any shape (in the GPT MLP (B, T, 4C)).

Forward (Hendrycks & Gimpel 2016, "Gaussian Error Linear Units", sec. 2; GPT-2; the seed's
step 6), with ``k = sqrt(2/pi)`` and ``c = 0.044715``::

    u   = k (x + c x^3)
    t   = tanh(u)
    out = 0.5 x (1 + t)

Cache: ``(x, t)``. ``t`` is the one transcendental of the forward; saving it spares the
backward a second ``tanh``, and ``sech^2(u)`` is then ``1 - t^2`` of the saved tanh (never
``1/cosh^2(u)``, which overflows for large |u|). ``x`` is the input itself (no copy).

Memory: forward and backward each allocate two arrays of x's size and work in them in place
(``out=``). Every fresh large array costs page faults whenever the allocator has handed the
previous one back to the operating system, which made this layer up to 5x slower in isolation
(docs/performance.md), so the backward reuses its buffers instead of allocating four.

Backward (product rule on ``0.5 x (1 + t)``)::

    dx = dout * ( 0.5 (1 + t)                                   # term 1: d(0.5 x)/dx (1 + t)
                + 0.5 x (1 - t^2) k (1 + 3 c x^2) )             # term 2: 0.5 x tanh'(u) du/dx

Only the tanh form is provided: the exact ``0.5 x (1 + erf(x / sqrt 2))`` would need an erf
accurate to float64, which NumPy does not have.

Derivation: docs/derivations.md, section GELU.
"""
from __future__ import annotations

import math

import numpy as np

from minigrad import Function, Tensor

from ._checks import float_input

__all__ = ["gelu_forward", "gelu_backward", "GELUFunction", "gelu"]

GELU_K = math.sqrt(2.0 / math.pi)   # sqrt(2/pi)
GELU_C = 0.044715                   # cubic coefficient of the tanh approximation


def gelu_forward(x: np.ndarray):
    """GELU (tanh approximation) forward in NumPy.

    Args:
        x: float array of any shape.

    Returns:
        (out, cache): ``out = 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3)))`` in x's shape and
        dtype; ``cache = (x, t)`` with ``t`` the tanh.
    """
    u = np.multiply(x, x, out=np.empty_like(x))     # x^2 (a real array even when x is 0-d)
    u *= GELU_C
    u += 1.0
    u *= x
    u *= GELU_K                             # u = k (x + c x^3), computed in one buffer
    t = np.tanh(u, out=u)                   # t = tanh(u), in place of u
    out = np.add(t, 1.0, out=np.empty_like(t))
    out *= x
    out *= 0.5                              # 0.5 x (1 + t)
    return out, (x, t)


def gelu_backward(dout: np.ndarray, cache):
    """GELU (tanh approximation) backward in NumPy.

    Args:
        dout: gradient of the loss with respect to ``out`` (x's shape).
        cache: what ``gelu_forward`` returned.

    Returns:
        dx, of x's shape and dtype.
    """
    x, t = cache
    dudx = np.multiply(x, x, out=np.empty_like(x))
    dudx *= 3.0 * GELU_C
    dudx += 1.0
    dudx *= GELU_K                          # du/dx = k (1 + 3 c x^2)
    local = np.multiply(t, t, out=np.empty_like(t))
    np.subtract(1.0, local, out=local)      # sech^2(u) = 1 - t^2
    local *= dudx
    local *= x
    one_plus_t = np.add(t, 1.0, out=dudx)   # 1 + t, in the buffer of du/dx (no longer needed)
    local += one_plus_t                     # term 1 (1 + t) + term 2 x (1 - t^2) du/dx
    local *= 0.5
    return np.multiply(dout, local, out=local)  # dout * local, in place: two buffers in all


class GELUFunction(Function):
    """One autograd node for GELU (tanh): the NumPy pair above behind ``minigrad.Function``."""

    @staticmethod
    def forward(ctx, x):
        """Forward on arrays; keeps ``(x, t)``."""
        out, cache = gelu_forward(x)
        ctx.save_for_backward(*cache)
        return out

    @staticmethod
    def backward(ctx, dout):
        """Gradient for x, in its shape and dtype."""
        return gelu_backward(dout, ctx.saved_tensors)


def gelu(x, approximate: str = "tanh") -> Tensor:
    """Gaussian Error Linear Unit, tanh approximation (``torch.nn.functional.gelu`` with
    ``approximate="tanh"``; Hendrycks & Gimpel 2016; GPT-2).

    ``out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``.

    Args:
        x: Tensor (or array, taken as a constant), float32 or float64, any shape.
        approximate: ``"tanh"`` (the only form provided).

    Returns:
        Tensor of x's shape and dtype; one graph node.

    Raises:
        TypeError: x of a non-floating dtype.
        ValueError: ``approximate="none"`` (the exact erf form needs an erf accurate to float64,
            which NumPy lacks) or any other value.
    """
    if approximate != "tanh":
        if approximate == "none":
            raise ValueError(
                'gelu: approximate="none" (exact erf GELU) is not provided: NumPy has no erf '
                'accurate to float64; use approximate="tanh"'
            )
        raise ValueError(f'gelu: approximate must be "tanh", got {approximate!r}')
    x, _ = float_input(x, "x", "gelu")
    return GELUFunction.apply(x)
