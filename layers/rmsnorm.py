"""RMSNorm over the last axis, with a hand-derived backward.

Shapes: x is (..., C) (in the GPT (B, T, C)); weight is (C,). N is the number of rows (B * T).

Forward (Zhang & Sennrich 2019, "Root Mean Square Layer Normalization", eq. 4), per row::

    ms   = (1/C) sum_i x_i^2
    rstd = 1 / sqrt(ms + eps)
    xhat = x * rstd
    out  = weight * xhat

No mean is subtracted and there is no bias. eps defaults to 1e-6 (the chapter's build.py).

Cache: ``(xhat, weight, rstd)``: the normalized input (..., C) and the per-row reciprocal
root-mean-square (..., 1), exactly what the backward reads; x is not kept.

Backward, with ``dxhat = dout * weight``::

    dweight = sum over rows of dout * xhat
    dx      = rstd * (dxhat - xhat * mean(dxhat * xhat))                    # mean over C

The second term is the projection term: the path through ms removes from dxhat its component
along xhat (exactly so when eps = 0, since then mean(xhat^2) = 1). For an all-zero row,
xhat = 0 and dx = dxhat / sqrt(eps).

Derivation: docs/derivations.md, section RMSNorm.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from minigrad import Tensor

from ._checks import check_eps, float_input, last_dim, norm_param
from ._function import PairFunction

__all__ = ["rmsnorm_forward", "rmsnorm_backward", "RMSNormFunction", "rms_norm"]


def rmsnorm_forward(x: np.ndarray, weight: np.ndarray, eps: float = 1e-6):
    """RMSNorm forward in NumPy: ``out = weight * x / sqrt(mean(x^2) + eps)``.

    Args:
        x: (..., C) float array.
        weight: (C,) array of x's dtype.
        eps: added to the mean square.

    Returns:
        (out, cache): ``out`` of x's shape and dtype; ``cache = (xhat, weight, rstd)``.
    """
    # The formulas above with out= buffers (np.add.reduce then / C, exactly as np.mean):
    # bit-identical to the plain expressions, with two fresh (..., C) arrays instead of three.
    C = x.shape[-1]
    out = np.multiply(x, x)                             # (..., C)  work buffer: x^2
    ms = np.add.reduce(out, axis=-1, keepdims=True)     # (..., 1)
    ms /= C                                             #           mean square
    ms += eps
    rstd = np.sqrt(ms, out=ms)
    rstd = np.divide(1.0, rstd, out=rstd)               # (..., 1)  reciprocal rms
    xhat = np.multiply(x, rstd)                         # (..., C)
    np.multiply(xhat, weight, out=out)                  # (..., C)
    return out, (xhat, weight, rstd)


def rmsnorm_backward(dout: np.ndarray, cache):
    """RMSNorm backward in NumPy.

    Args:
        dout: (..., C) gradient of the loss with respect to ``out``.
        cache: what ``rmsnorm_forward`` returned.

    Returns:
        (dx, dweight) with the shapes of x and weight.
    """
    xhat, weight, rstd = cache
    C = xhat.shape[-1]
    dweight = np.einsum("nc,nc->c", dout.reshape(-1, C), xhat.reshape(-1, C))   # (C,)
    dxhat = np.multiply(dout, weight)                                           # (..., C)
    # mean(dxhat xhat) as np.add.reduce / C (as np.mean), two (..., C) buffers instead of four
    prod = np.multiply(dxhat, xhat)                                             # work buffer
    m = np.add.reduce(prod, axis=-1, keepdims=True)                             # (..., 1)
    m /= C                                                                      # mean(dxhat xhat)
    dx = np.subtract(dxhat, np.multiply(xhat, m, out=prod), out=dxhat)  # term 1 - projection
    dx *= rstd                                                          # scale by 1 / rms
    return dx, dweight


class RMSNormFunction(PairFunction):
    """One autograd node for RMSNorm, ``apply(x, weight, eps=...)``: the pair above."""

    pair = (rmsnorm_forward, rmsnorm_backward)


def rms_norm(x, weight, eps: Optional[float] = 1e-6) -> Tensor:
    """Root-mean-square normalization over the last axis (``torch.nn.functional.rms_norm``).

    ``out = weight * x / sqrt(mean(x^2) + eps)`` (Zhang & Sennrich 2019).

    Args:
        x: Tensor (or array, taken as a constant) of shape (..., C), of a floating dtype
            (float32 and float64 are the tested ones).
        weight: (C,) gain, same dtype as x (a plain array is a constant); None means 1
            (PyTorch's ``weight=None``).
        eps: number >= 0 added to the mean square (default 1e-6, the chapter's build.py), or
            None for ``np.finfo(x.dtype).eps`` (``torch.nn.functional.rms_norm``'s ``eps=None``:
            1.19e-7 in float32, 2.22e-16 in float64).

    Returns:
        Tensor of x's shape and dtype; one graph node with gradients for x and weight.

    Raises:
        TypeError: a non-floating dtype, or weight of a different dtype than x.
        ValueError: x with no axis, weight not of shape (C,), or a bad eps.
    """
    x, xa = float_input(x, "x", "rms_norm")
    last_dim(xa, "rms_norm", "the normalized one")
    weight = norm_param(weight, "weight", xa, "rms_norm", fill=1.0)
    eps = check_eps(np.finfo(xa.dtype).eps if eps is None else eps, "rms_norm")
    return RMSNormFunction.apply(x, weight, eps=eps)
