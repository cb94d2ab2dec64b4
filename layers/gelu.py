"""GELU, exact (erf) and tanh approximation, each with a hand-derived backward.

Shapes: elementwise; x is any shape (in the GPT MLP (B, T, 4C)).

Exact GELU (Hendrycks & Gimpel 2016, "Gaussian Error Linear Units", sec. 2;
``torch.nn.functional.gelu``'s default ``approximate="none"``), with Phi the standard normal
CDF and phi its density::

    Phi(x) = 0.5 (1 + erf(x / sqrt 2)) = 0.5 erfc(-x / sqrt 2)
    out    = x Phi(x)

Cache: ``(x, Phi)``: Phi costs an erf (``layers/_erf.py``, float64 round-off, no SciPy), so it
is kept; phi is one exp, recomputed. Phi is formed as ``0.5 erfc(-x/sqrt 2)``, which keeps full
relative accuracy in the left tail where ``1 + erf`` would cancel.

Backward (product rule; d/dx Phi(x) = phi(x) = exp(-x^2/2) / sqrt(2 pi))::

    dx = dout * ( Phi(x)                                        # term 1: d(x)/dx Phi
                + x phi(x) )                                    # term 2: x dPhi/dx

Tanh approximation (GPT-2; the chapter's step 6; ``approximate="tanh"``), with
``k = sqrt(2/pi)`` and ``c = 0.044715``::

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

Derivation: docs/derivations.md, section GELU.
"""
from __future__ import annotations

import math

import numpy as np

from minigrad import Tensor

from ._checks import float_input
from ._erf import erfc
from ._function import PairFunction

__all__ = ["gelu_forward", "gelu_backward", "GELUFunction", "gelu_erf_forward",
           "gelu_erf_backward", "GELUErfFunction", "gelu"]

GELU_K = math.sqrt(2.0 / math.pi)   # sqrt(2/pi)
GELU_C = 0.044715                   # cubic coefficient of the tanh approximation
GELU_SQRT1_2 = math.sqrt(0.5)       # 1/sqrt(2)
GELU_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


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


class GELUFunction(PairFunction):
    """One autograd node for GELU (tanh approximation), ``apply(x)``: the pair above."""

    pair = (gelu_forward, gelu_backward)


def gelu_erf_forward(x: np.ndarray):
    """Exact GELU forward in NumPy: ``out = x Phi(x)``, ``Phi(x) = 0.5 erfc(-x / sqrt 2)``.

    Args:
        x: float array of any shape.

    Returns:
        (out, cache): ``out`` in x's shape and dtype; ``cache = (x, Phi)``.
    """
    cdf = erfc(x * -GELU_SQRT1_2)           # erfc(-x/sqrt 2), x's dtype
    cdf *= 0.5                              # Phi(x)
    return x * cdf, (x, cdf)


def gelu_erf_backward(dout: np.ndarray, cache):
    """Exact GELU backward in NumPy: ``dx = dout * (Phi(x) + x phi(x))``.

    Args:
        dout: gradient of the loss with respect to ``out`` (x's shape).
        cache: what ``gelu_erf_forward`` returned.

    Returns:
        dx, of x's shape and dtype.
    """
    x, cdf = cache
    pdf = np.multiply(x, x, out=np.empty_like(x))
    pdf *= -0.5
    np.exp(pdf, out=pdf)
    pdf *= GELU_INV_SQRT_2PI                # phi(x) = exp(-x^2/2) / sqrt(2 pi)
    pdf *= x                                # term 2: x phi(x)
    pdf += cdf                              # term 1: Phi(x)
    return dout * pdf


class GELUErfFunction(PairFunction):
    """One autograd node for exact GELU, ``apply(x)``: the pair above."""

    pair = (gelu_erf_forward, gelu_erf_backward)


def gelu(x, approximate: str = "none") -> Tensor:
    """Gaussian Error Linear Unit (``torch.nn.functional.gelu``; Hendrycks & Gimpel 2016).

    * ``approximate="none"`` (the default, as in PyTorch): ``x Phi(x)``, exact to float64
      round-off (the erf of ``layers/_erf.py``);
    * ``approximate="tanh"`` (GPT-2, the chapter, the GPT's MLP):
      ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``, within 4.8e-4 of the exact form.

    Args:
        x: Tensor (or array, taken as a constant), float32 or float64, any shape.
        approximate: ``"none"`` or ``"tanh"``.

    Returns:
        Tensor of x's shape and dtype; one graph node.

    Raises:
        TypeError: x of a non-floating dtype.
        ValueError: any other ``approximate``.
    """
    if approximate not in ("none", "tanh"):
        raise ValueError(f'gelu: approximate must be "none" or "tanh", got {approximate!r}')
    x, _ = float_input(x, "x", "gelu")
    return (GELUFunction if approximate == "tanh" else GELUErfFunction).apply(x)
