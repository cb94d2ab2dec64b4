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
"""
from __future__ import annotations

import numpy as np

from minigrad import Module, Parameter, Tensor, from_pair

from .checks import (check_eps, flat_param, float_dtype, float_input, norm_param, normalized_axes,
                     sizes)

__all__ = ["layernorm_forward", "layernorm_backward", "LayerNormFunction", "layer_norm",
           "LayerNorm", "Identity"]


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


def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5) -> Tensor:
    """Layer normalization over the last axes (``torch.nn.functional.layer_norm``, same
    signature and defaults).

    Args:
        input: Tensor (or array, taken as a constant) of shape (..., *normalized_shape),
            float32 or float64.
        normalized_shape: int or sequence of ints, the sizes of the last axes to normalize
            (in the GPT, C). Several axes are normalized together as one axis of their product.
        weight: gain of shape normalized_shape and input's dtype (a plain array is a constant);
            None means 1.
        bias: shift, as weight; None means 0.
        eps: number >= 0 added to the variance (default 1e-5, PyTorch's).

    Returns:
        Tensor of input's shape and dtype; one graph node with gradients for input, weight and
        bias.

    Raises:
        TypeError: a non-floating dtype, weight/bias of a different dtype than input, or a
            normalized_shape that is not an int or a sequence of ints.
        ValueError: a normalized_shape that is not input's trailing shape, weight/bias not of
            that shape, or a bad eps.
    """
    x, xa = float_input(input, "input", "layer_norm")
    k = normalized_axes(normalized_shape, xa, "layer_norm")
    if k > 1:  # the last k axes as one axis of their product, then back
        shape = xa.shape[-k:]
        w, b = (flat_param(t, n, shape, "layer_norm") for t, n in ((weight, "weight"), (bias, "bias")))
        flat = x.reshape(xa.shape[:-k] + (-1,))
        return layer_norm(flat, flat.shape[-1], w, b, eps).reshape(xa.shape)
    weight = norm_param(weight, "weight", xa, "layer_norm", fill=1.0)
    bias = norm_param(bias, "bias", xa, "layer_norm", fill=0.0)
    eps = check_eps(eps, "layer_norm")
    return LayerNormFunction.apply(x, weight, bias, eps=eps)


class LayerNorm(Module):
    """``layer_norm`` as a Module (``torch.nn.LayerNorm``): gain ``weight`` = 1 and ``bias`` = 0,
    both of shape normalized_shape.

    Args:
        normalized_shape (int | tuple of int): sizes of the last axes to normalize (the GPT's C).
        eps (float): added to the variance, default 1e-5 (PyTorch's).
        rng: unused (no random init); accepted for a uniform constructor signature.
        dtype: parameter dtype, default float32.
        bias (bool): keyword-only; False: no bias (``bias`` is None, the shift is 0), as
            ``torch.nn.LayerNorm(..., bias=False)`` (PyTorch >= 2.1).
        backward: keyword-only; None for ``layernorm_backward``, or a function of the same
            signature ``(dout, cache) -> (dx, dweight, dbias)`` to use in its place.

    Shapes: x (..., *normalized_shape) -> the same shape. x is not checked (``layer_norm``
    checks its inputs): it must have the parameters' dtype and trailing shape.

    Raises:
        TypeError: a non-integer size or a non-floating dtype.
        ValueError: a size <= 0 or an eps that is not a finite number >= 0 (at construction).
    """

    def __init__(self, normalized_shape, eps: float = 1e-5, rng=None, dtype=np.float32, *,
                 bias: bool = True, backward=None) -> None:
        super().__init__()
        self.normalized_shape = sizes(normalized_shape, "LayerNorm")
        self.eps = check_eps(eps, "LayerNorm")
        self.weight = Parameter(np.ones(self.normalized_shape, dtype=float_dtype(dtype, "LayerNorm")))
        self.bias = Parameter(np.zeros_like(self.weight.data)) if bias else None
        self.function = (LayerNormFunction if backward is None
                         else from_pair(layernorm_forward, backward))

    def forward(self, x: Tensor) -> Tensor:
        bias = np.zeros_like(self.weight.data) if self.bias is None else self.bias
        k = len(self.normalized_shape)
        if k == 1:
            return self.function.apply(x, self.weight, bias, eps=self.eps)
        flat = x.reshape(x.shape[:-k] + (-1,))   # the normalized axes as one, then back
        return self.function.apply(flat, self.weight.reshape(-1), bias.reshape(-1),
                                   eps=self.eps).reshape(x.shape)


class Identity(Module):
    """Returns its input unchanged (``torch.nn.Identity``); no parameters.

    Stands in for a norm when a model is built without normalisation (the chapter's
    ``make_norm("none")``). Shapes: x (...) -> (...), the same Tensor.
    """

    def forward(self, x: Tensor) -> Tensor:
        return x
