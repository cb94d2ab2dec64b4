"""RMSNorm over the last axis, with a hand-derived backward.

Shapes: x is (..., C) (in the GPT (B, T, C)); weight is (C,). Means run over the C entries of
a row; "sum over rows" runs over every leading axis.

Forward (Zhang & Sennrich 2019, "Root Mean Square Layer Normalization", eq. 4), per row::

    ms   = mean(x^2)
    rstd = 1 / sqrt(ms + eps)
    xhat = x * rstd
    out  = weight * xhat

No mean is subtracted and there is no bias. The chapter's build.py uses eps = 1e-6.

Cache: ``(xhat, weight, rstd)``: the normalized input (..., C) and the per-row reciprocal
root-mean-square (..., 1), exactly what the backward reads; x is not kept.

Backward, with ``dxhat = dout * weight``::

    dweight = sum over rows of dout * xhat
    dx      = rstd * (dxhat - xhat * mean(dxhat * xhat))

The second term is the projection term: the path through ms removes from dxhat its component
along xhat. For an all-zero row, xhat = 0 and dx = dxhat / sqrt(eps).

Derivation: docs/derivations.md, section RMSNorm.
PyTorch faces: ``layers.functional.rms_norm``, ``layers.modules.RMSNorm``.
"""
import numpy as np

from minigrad import from_pair


def rmsnorm_forward(x: np.ndarray, weight: np.ndarray, eps: float = 1e-6):
    """``out = weight * x / sqrt(mean(x^2) + eps)`` on (..., C) arrays of one float dtype.

    Returns (out, cache): ``out`` of x's shape and dtype, ``cache = (xhat, weight, rstd)``.
    """
    ms = np.mean(x * x, axis=-1, keepdims=True)         # (..., 1)
    rstd = 1.0 / np.sqrt(ms + eps)                      # (..., 1)
    xhat = x * rstd                                     # (..., C)
    out = xhat * weight                                 # (..., C)
    return out, (xhat, weight, rstd)


def rmsnorm_backward(dout: np.ndarray, cache):
    """Gradients ``(dx, dweight)`` of ``rmsnorm_forward``, in the shapes of x and weight."""
    xhat, weight, rstd = cache
    C = xhat.shape[-1]
    dweight = np.einsum("nc,nc->c", dout.reshape(-1, C), xhat.reshape(-1, C))  # (C,)
    dxhat = dout * weight                                                      # (..., C)
    dx = rstd * (dxhat                                                # term 1: direct path
                 - xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True))  # term 2: projection
    return dx, dweight


RMSNormFunction = from_pair(rmsnorm_forward, rmsnorm_backward, "RMSNormFunction")
