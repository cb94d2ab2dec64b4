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
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from minigrad import Module, Parameter, Tensor, from_pair

from .checks import (check_eps, flat_param, float_dtype, float_input, norm_param, normalized_axes,
                     sizes)

__all__ = ["rmsnorm_forward", "rmsnorm_backward", "RMSNormFunction", "rms_norm", "RMSNorm"]


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


def rms_norm(input, normalized_shape, weight=None, eps: Optional[float] = None) -> Tensor:
    """Root-mean-square normalization over the last axes (``torch.nn.functional.rms_norm``,
    same signature and defaults).

    Args:
        input: Tensor (or array, taken as a constant) of shape (..., *normalized_shape),
            float32 or float64.
        normalized_shape: int or sequence of ints, the sizes of the last axes to normalize
            (in the GPT, C). Several axes are normalized together as one axis of their product.
        weight: gain of shape normalized_shape and input's dtype (a plain array is a constant);
            None means 1.
        eps: number >= 0 added to the mean square, or None (default, PyTorch's) for
            ``np.finfo(input.dtype).eps``. The chapter's build.py uses 1e-6.

    Returns:
        Tensor of input's shape and dtype; one graph node with gradients for input and weight.

    Raises:
        TypeError: a non-floating dtype, weight of a different dtype than input, or a
            normalized_shape that is not an int or a sequence of ints.
        ValueError: a normalized_shape that is not input's trailing shape, weight not of that
            shape, or a bad eps.
    """
    x, xa = float_input(input, "input", "rms_norm")
    k = normalized_axes(normalized_shape, xa, "rms_norm")
    if k > 1:  # the last k axes as one axis of their product, then back
        flat = x.reshape(xa.shape[:-k] + (-1,))
        w = flat_param(weight, "weight", xa.shape[-k:], "rms_norm")
        return rms_norm(flat, flat.shape[-1], w, eps).reshape(xa.shape)
    weight = norm_param(weight, "weight", xa, "rms_norm", fill=1.0)
    eps = check_eps(np.finfo(xa.dtype).eps if eps is None else eps, "rms_norm")
    return RMSNormFunction.apply(x, weight, eps=eps)


class RMSNorm(Module):
    """``rms_norm`` as a Module with a learned gain ``weight`` = 1 of shape normalized_shape
    (``torch.nn.RMSNorm``).

    Args:
        normalized_shape (int | tuple of int): sizes of the last axes to normalize (the GPT's C).
        eps (float | None): default None, ``np.finfo(dtype).eps`` (``torch.nn.RMSNorm``'s
            default); the chapter's build.py passes 1e-6.
        rng: unused (no random init); accepted for a uniform constructor signature.
        dtype: parameter dtype, default float32.
        backward: keyword-only; None for ``rmsnorm_backward``, or a function of the same
            signature ``(dout, cache) -> (dx, dweight)`` to use in its place.

    Shapes: x (..., *normalized_shape) -> the same shape. x is not checked (``rms_norm`` checks
    its inputs): it must have the parameter's dtype and trailing shape.

    Raises:
        TypeError: a non-integer size or a non-floating dtype.
        ValueError: a size <= 0 or an eps that is not a finite number >= 0 (at construction).
    """

    def __init__(self, normalized_shape, eps: Optional[float] = None, rng=None,
                 dtype=np.float32, *, backward=None) -> None:
        super().__init__()
        self.normalized_shape = sizes(normalized_shape, "RMSNorm")
        self.eps = None if eps is None else check_eps(eps, "RMSNorm")
        self.weight = Parameter(np.ones(self.normalized_shape, dtype=float_dtype(dtype, "RMSNorm")))
        self.function = (RMSNormFunction if backward is None
                         else from_pair(rmsnorm_forward, backward))

    def forward(self, x: Tensor) -> Tensor:
        eps = float(np.finfo(x.dtype).eps) if self.eps is None else self.eps
        k = len(self.normalized_shape)
        if k == 1:
            return self.function.apply(x, self.weight, eps=eps)
        flat = x.reshape(x.shape[:-k] + (-1,))   # the normalized axes as one, then back
        return self.function.apply(flat, self.weight.reshape(-1), eps=eps).reshape(x.shape)
