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

    dx = dout * (Phi(x) + x phi(x))             # term 1: d(x)/dx Phi; term 2: x dPhi/dx

Tanh approximation (GPT-2; the chapter's step 6; ``approximate="tanh"``), with
``k = sqrt(2/pi)`` and ``c = 0.044715``::

    u = k (x + c x^3),   t = tanh(u),   out = 0.5 x (1 + t)

Cache: ``(x, t)``. ``t`` is the one transcendental of the forward; saving it spares the
backward a second ``tanh``, and ``sech^2(u)`` is then ``1 - t^2`` of the saved tanh (never
``1/cosh^2(u)``, which overflows for large |u|). ``x`` is the input itself (no copy).

Backward (product rule on ``0.5 x (1 + t)``)::

    dx = dout * ( 0.5 (1 + t)                                   # term 1: d(0.5 x)/dx (1 + t)
                + 0.5 x (1 - t^2) k (1 + 3 c x^2) )             # term 2: 0.5 x tanh'(u) du/dx

Derivation: docs/derivations.md, section GELU.
PyTorch faces: ``layers.functional.gelu``, ``layers.modules.MLP``.
"""
import math

import numpy as np

from minigrad import from_pair

from ._erf import erfc

GELU_K = math.sqrt(2.0 / math.pi)   # sqrt(2/pi)
GELU_C = 0.044715                   # cubic coefficient of the tanh approximation
GELU_SQRT1_2 = math.sqrt(0.5)       # 1/sqrt(2)
GELU_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def gelu_forward(x: np.ndarray):
    """GELU (tanh approximation), ``0.5 x (1 + tanh(k (x + c x^3)))``, any shape.
    Returns (out, cache): ``out`` in x's shape and dtype; ``cache = (x, t)``, t the tanh."""
    u = GELU_K * (x * (1.0 + GELU_C * (x * x)))   # u = k (x + c x^3), as k x (1 + c x^2)
    t = np.tanh(u)
    out = 0.5 * (x * (1.0 + t))
    return out, (x, t)


def gelu_backward(dout: np.ndarray, cache):
    """GELU (tanh approximation) backward: dx, of x's shape and dtype."""
    x, t = cache
    dudx = GELU_K * (1.0 + 3.0 * GELU_C * (x * x))  # du/dx = k (1 + 3 c x^2)
    term1 = 1.0 + t                                 # term 1: d(x)/dx (1 + t)
    sech2 = 1.0 - t * t                             # tanh'(u) = sech^2(u) = 1 - t^2
    term2 = x * (sech2 * dudx)                      # term 2: x tanh'(u) du/dx
    term2[sech2 == 0] = 0                           # |x| so large that x^2 overflows: 0, not 0*inf
    return dout * (0.5 * (term1 + term2))


GELUFunction = from_pair(gelu_forward, gelu_backward, "GELUFunction")


def gelu_erf_forward(x: np.ndarray):
    """Exact GELU, ``x Phi(x)`` with ``Phi(x) = 0.5 erfc(-x / sqrt 2)``, any shape.
    Returns (out, cache): ``out`` in x's shape and dtype; ``cache = (x, Phi)``."""
    cdf = 0.5 * erfc(-GELU_SQRT1_2 * x)             # Phi(x)
    return x * cdf, (x, cdf)


def gelu_erf_backward(dout: np.ndarray, cache):
    """Exact GELU backward: ``dx = dout * (Phi(x) + x phi(x))``, of x's shape and dtype."""
    x, cdf = cache
    pdf = GELU_INV_SQRT_2PI * np.exp(-0.5 * (x * x))  # phi(x) = exp(-x^2/2) / sqrt(2 pi)
    return dout * (cdf                              # term 1: Phi(x)
                   + x * pdf)                       # term 2: x phi(x)


GELUErfFunction = from_pair(gelu_erf_forward, gelu_erf_backward, "GELUErfFunction")
