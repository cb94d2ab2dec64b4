"""SiLU (swish), ``x * sigmoid(x)``, with a hand-derived backward.

Shapes: elementwise; x is any shape (in SwiGLU (B, T, H)).

Forward (Hendrycks & Gimpel 2016, sec. 2 "SiLU"; Elfwing et al. 2018; Ramachandran et al.
2017 "swish" with beta = 1)::

    s   = sigmoid(x) = 1 / (1 + exp(-x))
    out = x s

The sigmoid is evaluated from ``e = exp(-|x|)`` (always in (0, 1]):
``s = 1 / (1 + e)`` for x >= 0 and ``s = e / (1 + e)`` for x < 0, so nothing overflows for
large |x| in any dtype (float32 at x = -100 gives s ~ 3.7e-44, a subnormal, and out ~ -3.7e-42),
and ``s`` keeps full relative precision for very negative x.

Cache: ``(x, s)``: the input (no copy) and the sigmoid, the one transcendental of the forward.

Backward (product rule, with ``sigmoid' = s (1 - s)``)::

    dx = dout * s (1 + x (1 - s))          # = dout * (s + x s (1 - s))

Derivation: docs/derivations.md, section SiLU.
PyTorch face: ``layers.functional.silu``; SwiGLU reads ``sigmoid_stable`` and ``dsilu``.
"""
import numpy as np

from minigrad import from_pair


def sigmoid_stable(x: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-x))`` from ``exp(-|x|)``: no overflow for any x, x's dtype kept.

    ``s = num / (1 + e)`` with ``e = exp(-|x|)`` and ``num = 1`` for x >= 0, ``num = e`` for
    x < 0, written as ``max(e, x >= 0)`` (e <= 1): arithmetic instead of a masked select, which
    is several times slower in NumPy on random signs.
    """
    e = np.exp(-np.abs(x))                          # in (0, 1]
    return np.maximum(e, x >= 0) / (1.0 + e)        # 1 / (1 + e)  or  e / (1 + e)


def dsilu(x: np.ndarray, s: np.ndarray) -> np.ndarray:
    """d silu / dx given x and s = sigmoid(x): ``s (1 + x (1 - s))``."""
    return s * (1.0 + x * (1.0 - s))


def silu_forward(x: np.ndarray):
    """SiLU forward in NumPy: ``out = x * sigmoid(x)``.

    Returns:
        (out, cache): ``out`` in x's shape and dtype; ``cache = (x, s)``.
    """
    s = sigmoid_stable(x)
    return x * s, (x, s)


def silu_backward(dout: np.ndarray, cache):
    """SiLU backward in NumPy: ``dx = dout * s (1 + x (1 - s))``."""
    x, s = cache
    return dout * dsilu(x, s)


SiLUFunction = from_pair(silu_forward, silu_backward, "SiLUFunction")
