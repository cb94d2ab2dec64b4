"""BatchNorm over every axis but the channel axis, with a hand-derived backward.

Shapes: x is (N, C) or (N, C, L) (any (N, C, *)): N examples, C channels on axis 1, L positions;
weight and bias are (C,). The statistics of channel c run over its m = N * L values (every axis
but axis 1; for (N, C, L) the paper's Section 3.2, "all locations" of a feature map); "sum over
the batch" runs over the same axes. LayerNorm normalises each row over its C features;
BatchNorm normalises each channel over the batch: the same formula on the other axis. The shape
comments are those of (N, C, L); for (N, C) leave out the last axis.

Training (Ioffe & Szegedy 2015, "Batch Normalization", Algorithm 1), per channel::

    mean = mean(x)                             # over the m values of the channel
    var  = mean((x - mean)^2)                  # biased (divides by m), two-pass
    rstd = 1 / sqrt(var + eps)
    xhat = (x - mean) * rstd
    out  = weight * xhat + bias

Eval (Algorithm 2, step 11): the running statistics (``running_mean``, ``running_var``, kept by
``layers.functional.batch_norm`` in training) are constants, so ``out`` is an affine map of x::

    rstd = 1 / sqrt(running_var + eps)
    xhat = (x - running_mean) * rstd
    out  = weight * xhat + bias

Cache (both modes): ``(xhat, weight, rstd)``. ``xhat`` has x's shape, ``rstd`` one value per
channel; they are exactly what the backward formulas read, so neither mean, variance nor square
root is computed again, and x is not kept.

Backward (Ioffe & Szegedy 2015, the chain rule after Algorithm 1), with ``dxhat = dout * weight``
and means over the m values of a channel::

    dbias   = sum over the batch of dout
    dweight = sum over the batch of dout * xhat
    dx      = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))    # training
    dx      = rstd * dxhat                                                # eval

In training the three terms are LayerNorm's: the direct path through xhat, the path through the
batch mean, the path through the batch variance. In eval mean and variance are constants: only
the direct path is left. With m = 1 (one value per channel) xhat is 0 and the training output is
bias alone; ``batch_norm`` refuses that input in training, as PyTorch does.

Derivation: docs/derivations.md, section BatchNorm.
PyTorch faces: ``layers.functional.batch_norm``, ``layers.modules.BatchNorm1d``.
"""
import numpy as np

from minigrad import from_pair


def stat_axes(x: np.ndarray) -> tuple:
    """The axes a channel's statistics run over: every axis but the channel axis 1
    ((0,) for (N, C), (0, 2) for (N, C, L))."""
    return (0,) + tuple(range(2, x.ndim))


def per_channel(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """A (C,) array shaped to broadcast along x's channel axis: (C,) for (N, C), (C, 1) for
    (N, C, L)."""
    return a.reshape(a.shape + (1,) * (x.ndim - 2))


def batchnorm_forward(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float = 1e-5):
    """Training mode (Ioffe & Szegedy 2015, Algorithm 1): ``out = weight * (x - mean) /
    sqrt(var + eps) + bias`` with the batch's mean and biased variance per channel, on an
    (N, C, *) x and (C,) weight and bias of one float dtype. Raises nothing (NumPy only).

    Returns (out, cache): ``out`` of x's shape and dtype, ``cache = (xhat, weight, rstd)``.
    """
    axes = stat_axes(x)                                         # (0,) or (0, 2)
    mean = np.mean(x, axis=axes, keepdims=True)                 # (1, C, 1)
    xc = x - mean                                               # (N, C, L) x - mean
    var = np.mean(xc * xc, axis=axes, keepdims=True)            # (1, C, 1) biased, two-pass
    rstd = 1.0 / np.sqrt(var + eps)                             # (1, C, 1)
    xhat = xc * rstd                                            # (N, C, L)
    out = xhat * per_channel(weight, x) + per_channel(bias, x)  # (N, C, L)
    return out, (xhat, weight, rstd)


def batchnorm_backward(dout: np.ndarray, cache):
    """Gradients ``(dx, dweight, dbias)`` of ``batchnorm_forward``, in the inputs' shapes and
    dtype (Ioffe & Szegedy 2015, the chain rule after Algorithm 1, simplified)."""
    xhat, weight, rstd = cache
    axes = stat_axes(xhat)
    dbias = np.sum(dout, axis=axes)                                             # (C,)
    dweight = np.sum(dout * xhat, axis=axes)                                    # (C,)
    dxhat = dout * per_channel(weight, xhat)                                    # (N, C, L)
    dx = rstd * (dxhat                                                   # term 1: direct path
                 - np.mean(dxhat, axis=axes, keepdims=True)              # term 2: the mean
                 - xhat * np.mean(dxhat * xhat, axis=axes, keepdims=True))  # term 3: the variance
    return dx, dweight, dbias


def batchnorm_eval_forward(x: np.ndarray, running_mean: np.ndarray, running_var: np.ndarray,
                           weight: np.ndarray, bias: np.ndarray, eps: float = 1e-5):
    """Eval mode (Ioffe & Szegedy 2015, Algorithm 2, step 11): ``out = weight * (x -
    running_mean) / sqrt(running_var + eps) + bias``, the running statistics as constants, on an
    (N, C, *) x and (C,) statistics, weight and bias of one float dtype. Raises nothing.

    Returns (out, cache): ``out`` of x's shape and dtype, ``cache = (xhat, weight, rstd)``.
    """
    rstd = per_channel(1.0 / np.sqrt(running_var + eps), x)       # (C, 1)
    xhat = (x - per_channel(running_mean, x)) * rstd              # (N, C, L)
    out = xhat * per_channel(weight, x) + per_channel(bias, x)    # (N, C, L)
    return out, (xhat, weight, rstd)


def batchnorm_eval_backward(dout: np.ndarray, cache):
    """Gradients ``(dx, dweight, dbias)`` of ``batchnorm_eval_forward``; the running statistics
    get none (constants)."""
    xhat, weight, rstd = cache
    axes = stat_axes(xhat)
    dbias = np.sum(dout, axis=axes)                                             # (C,)
    dweight = np.sum(dout * xhat, axis=axes)                                    # (C,)
    dxhat = dout * per_channel(weight, xhat)                                    # (N, C, L)
    dx = rstd * dxhat                                # term 1 alone: the statistics are constants
    return dx, dweight, dbias


BatchNormFunction = from_pair(batchnorm_forward, batchnorm_backward, "BatchNormFunction")
BatchNormEvalFunction = from_pair(batchnorm_eval_forward, batchnorm_eval_backward,
                                  "BatchNormEvalFunction", wrt=("x", "weight", "bias"))
