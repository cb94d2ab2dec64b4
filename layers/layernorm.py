"""LayerNorm over the last axis, with a hand-derived backward.

Shapes: x is (..., C) (in the GPT (B, T, C)); weight and bias are (C,). Below N is the number
of rows, the product of the leading axes (B * T).

Forward (Ba, Kiros & Hinton 2016, "Layer Normalization", eq. 4), per row::

    mean = (1/C) sum_i x_i
    var  = (1/C) sum_i (x_i - mean)^2          # biased, two-pass: never E[x^2] - E[x]^2
    rstd = 1 / sqrt(var + eps)
    xhat = (x - mean) * rstd
    out  = weight * xhat + bias

Cache: ``(xhat, weight, rstd)``. ``xhat`` (N x C) and ``rstd`` (N x 1) are exactly what the
backward formula reads; saving them costs one (..., C) array and avoids recomputing the mean,
the variance and a square root. ``x`` itself is not needed and is not kept.

Backward (llm.c ``doc/layernorm/layernorm.md``), with ``dxhat = dout * weight``::

    dbias   = sum over rows of dout
    dweight = sum over rows of dout * xhat
    dx      = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))     # means over C

The three terms: the direct path through xhat, the path through the mean, and the path through
the variance. For C = 1, xhat is exactly 0 and dxhat - mean(dxhat) is exactly 0, so dx = 0.

Derivation: docs/derivations.md, section LayerNorm.
"""
from __future__ import annotations

import numpy as np

from minigrad import Tensor

from ._checks import check_eps, float_input, last_dim, norm_param
from ._function import PairFunction

__all__ = ["layernorm_forward", "layernorm_backward", "LayerNormFunction", "layer_norm"]


def layernorm_forward(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float = 1e-5):
    """LayerNorm forward in NumPy: ``out = weight * (x - mean) / sqrt(var + eps) + bias``.

    Args:
        x: (..., C) float array.
        weight, bias: (C,) arrays of x's dtype.
        eps: added to the biased variance.

    Returns:
        (out, cache): ``out`` of x's shape and dtype; ``cache = (xhat, weight, rstd)`` for
        ``layernorm_backward``.
    """
    # Same operations in the same order as the formulas above, written into two buffers with
    # out= (a mean is np.add.reduce then a division by C, exactly as np.mean computes it):
    # bit-identical to the plain expressions, with two fresh (..., C) arrays instead of five.
    C = x.shape[-1]
    mean = np.add.reduce(x, axis=-1, keepdims=True)     # (..., 1)
    mean /= C                                           #           mean
    xc = np.subtract(x, mean)                           # (..., C)  centred
    out = np.multiply(xc, xc)                           # (..., C)  work buffer: xc^2
    var = np.add.reduce(out, axis=-1, keepdims=True)    # (..., 1)
    var /= C                                            #           biased variance, two-pass
    var += eps
    rstd = np.sqrt(var, out=var)
    rstd = np.divide(1.0, rstd, out=rstd)               # (..., 1)  reciprocal std
    xhat = np.multiply(xc, rstd, out=xc)                # (..., C)  in the buffer of xc
    np.multiply(xhat, weight, out=out)                  # (..., C)
    out += bias
    return out, (xhat, weight, rstd)


def layernorm_backward(dout: np.ndarray, cache):
    """LayerNorm backward in NumPy.

    Args:
        dout: (..., C) gradient of the loss with respect to ``out``.
        cache: what ``layernorm_forward`` returned.

    Returns:
        (dx, dweight, dbias) with the shapes of x, weight and bias.
    """
    xhat, weight, rstd = cache
    C = xhat.shape[-1]
    dout2 = dout.reshape(-1, C)                                     # (N, C)
    dbias = dout2.sum(axis=0)                                       # (C,)
    dweight = np.einsum("nc,nc->c", dout2, xhat.reshape(-1, C))     # (C,)
    dxhat = np.multiply(dout, weight)                               # (..., C)
    # -mean(dxhat), -xhat mean(dxhat xhat) with np.add.reduce / C (as np.mean), in two
    # (..., C) buffers instead of four fresh arrays; bit-identical
    m1 = np.add.reduce(dxhat, axis=-1, keepdims=True)               # (..., 1)
    m1 /= C
    prod = np.multiply(dxhat, xhat)                                 # (..., C) work buffer
    m2 = np.add.reduce(prod, axis=-1, keepdims=True)                # (..., 1)
    m2 /= C
    dx = np.subtract(dxhat, m1, out=dxhat)                          # term 1 - term 2, in place
    dx -= np.multiply(xhat, m2, out=prod)                           # term 3: -xhat mean(dxhat xhat)
    dx *= rstd                                                      # scale by 1 / sqrt(var + eps)
    return dx, dweight, dbias


class LayerNormFunction(PairFunction):
    """One autograd node for LayerNorm, ``apply(x, weight, bias, eps=...)``: the pair above."""

    pair = (layernorm_forward, layernorm_backward)


def layer_norm(x, weight, bias, eps: float = 1e-5) -> Tensor:
    """Layer normalization over the last axis (``torch.nn.functional.layer_norm`` with
    ``normalized_shape = (C,)``).

    ``out = weight * (x - mean) / sqrt(var + eps) + bias``, biased variance (Ba et al. 2016).

    Args:
        x: Tensor (or array, taken as a constant) of shape (..., C), float32 or float64.
        weight: (C,) gain, same dtype as x (a plain array is a constant); None means 1
            (PyTorch's ``weight=None``).
        bias: (C,) shift, same dtype as x (a plain array is a constant); None means 0.
        eps: number >= 0 added to the variance (default 1e-5, PyTorch's).

    Returns:
        Tensor of x's shape and dtype; one graph node with gradients for x, weight and bias.

    Raises:
        TypeError: a non-floating dtype, or weight/bias of a different dtype than x.
        ValueError: x with no axis, weight/bias not of shape (C,), or a bad eps.
    """
    x, xa = float_input(x, "x", "layer_norm")
    last_dim(xa, "layer_norm", "the normalized one")
    weight = norm_param(weight, "weight", xa, "layer_norm", fill=1.0)
    bias = norm_param(bias, "bias", xa, "layer_norm", fill=0.0)
    eps = check_eps(eps, "layer_norm")
    return LayerNormFunction.apply(x, weight, bias, eps=eps)
