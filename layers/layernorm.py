"""LayerNorm over the last axis, with a hand-derived backward.

Shapes: x is (..., C) (in the GPT (B, T, C)); weight and bias are (C,). Means run over the C
entries of a row; "sum over rows" runs over every leading axis.

Forward (Ba, Kiros & Hinton 2016, "Layer Normalization", eq. 4), per row::

    mean = mean(x)
    var  = mean((x - mean)^2)                  # biased, two-pass: never E[x^2] - E[x]^2
    rstd = 1 / sqrt(var + eps)
    xhat = (x - mean) * rstd
    out  = weight * xhat + bias

Cache: ``(xhat, weight, rstd)``. ``xhat`` (..., C) and ``rstd`` (..., 1) are exactly what the
backward formula reads; saving them costs one (..., C) array and avoids recomputing the mean,
the variance and a square root. ``x`` itself is not needed and is not kept.

Backward (llm.c ``doc/layernorm/layernorm.md``), with ``dxhat = dout * weight``::

    dbias   = sum over rows of dout
    dweight = sum over rows of dout * xhat
    dx      = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))

The three terms: the direct path through xhat, the path through the mean, and the path through
the variance. For C = 1, xhat is exactly 0 and dxhat - mean(dxhat) is exactly 0, so dx = 0.

Derivation: docs/derivations.md, section LayerNorm.
PyTorch faces: ``layers.functional.layer_norm``, ``layers.modules.LayerNorm``.
"""
import numpy as np

from minigrad import from_pair


def layernorm_forward(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float = 1e-5):
    """``out = weight * (x - mean) / sqrt(var + eps) + bias`` on (..., C) arrays of one dtype.

    Returns (out, cache): ``out`` of x's shape and dtype, ``cache = (xhat, weight, rstd)``.
    """
    mean = np.mean(x, axis=-1, keepdims=True)                   # (..., 1)
    xc = x - mean                                               # (..., C) x - mean
    var = np.mean(xc * xc, axis=-1, keepdims=True)              # (..., 1) biased, two-pass
    rstd = 1.0 / np.sqrt(var + eps)                             # (..., 1)
    xhat = xc * rstd                                            # (..., C)
    out = xhat * weight + bias                                  # (..., C)
    return out, (xhat, weight, rstd)


def layernorm_backward(dout: np.ndarray, cache):
    """Gradients ``(dx, dweight, dbias)`` of ``layernorm_forward``, in the inputs' shapes."""
    xhat, weight, rstd = cache
    C = xhat.shape[-1]
    dbias = dout.reshape(-1, C).sum(axis=0)                                     # (C,)
    dweight = np.einsum("nc,nc->c", dout.reshape(-1, C), xhat.reshape(-1, C))   # (C,)
    dxhat = dout * weight                                                       # (..., C)
    dx = rstd * (dxhat                                                  # term 1: direct path
                 - np.mean(dxhat, axis=-1, keepdims=True)               # term 2: the mean
                 - xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True))  # term 3: the variance
    return dx, dweight, dbias


LayerNormFunction = from_pair(layernorm_forward, layernorm_backward, "LayerNormFunction")
