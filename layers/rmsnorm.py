"""RMSNorm over the last axis, with a hand-derived backward.

Shapes: x is (..., C) (in the GPT (B, T, C)); weight is (C,). Means run over the C entries of
a row; "sum over rows" runs over every leading axis.

Forward (Zhang & Sennrich 2019, "Root Mean Square Layer Normalization", eq. 4), per row::

    ms   = mean(x^2)
    rstd = 1 / sqrt(ms + eps)
    xhat = x * rstd
    out  = weight * xhat

No mean is subtracted and there is no bias. eps defaults to 1e-6 (the chapter's build.py).

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

from minigrad import Function, Module, Parameter, Tensor

from .checks import check_eps, float_dtype, float_input, last_dim, norm_param, positive_int

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


class RMSNormFunction(Function):
    """One autograd node for RMSNorm, ``apply(x, weight, eps=...)``: the pair above."""

    @staticmethod
    def forward(ctx, x, weight, eps=1e-6):
        out, cache = rmsnorm_forward(x, weight, eps)
        ctx.save_for_backward(*cache)
        return out

    @staticmethod
    def backward(ctx, dout):
        return rmsnorm_backward(dout, ctx.saved_tensors)


def rms_norm(x, weight, eps: Optional[float] = 1e-6) -> Tensor:
    """Root-mean-square normalization over the last axis (``torch.nn.functional.rms_norm``).

    Args:
        x: Tensor (or array, taken as a constant) of shape (..., C), float32 or float64.
        weight: (C,) gain of x's dtype (a plain array is a constant); None means 1.
        eps: number >= 0 added to the mean square (default 1e-6, the chapter's build.py), or
            None for ``np.finfo(x.dtype).eps`` (PyTorch's ``eps=None``).

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


class RMSNorm(Module):
    """``rms_norm`` as a Module with a learned gain ``weight`` (C,) = 1 (``torch.nn.RMSNorm``).

    Args:
        d (int): size C of the normalized (last) axis.
        eps (float | None): default 1e-6 (the chapter's build.py); None means
            ``np.finfo(dtype).eps`` (``torch.nn.RMSNorm``'s default).
        rng: unused (no random init); accepted for a uniform constructor signature.
        dtype: parameter dtype, default float32.

    Shapes: x (..., C) -> (..., C).

    Raises:
        TypeError: a non-integer d or a non-floating dtype.
        ValueError: d <= 0 or an eps that is not a finite number >= 0 (at construction).
    """

    def __init__(self, d: int, eps: float = 1e-6, rng=None, dtype=np.float32) -> None:
        super().__init__()
        d = positive_int(d, "d", "RMSNorm")
        self.eps = None if eps is None else check_eps(eps, "RMSNorm")
        self.weight = Parameter(np.ones(d, dtype=float_dtype(dtype, "RMSNorm")))

    def forward(self, x: Tensor) -> Tensor:
        return rms_norm(x, self.weight, eps=self.eps)
