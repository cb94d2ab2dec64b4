"""Affine map ``x W^T + b`` in PyTorch's Linear layout, as one autograd node.

Shapes: B batch, T sequence, C = in_features, O = out_features; x (..., C) (typically (B, T, C)),
weight (O, C) (PyTorch's ``nn.Linear`` layout), bias (O,) or None. The leading axes are flattened
to N = B*T rows so that the whole layer is one 2-D matrix product.

Forward (``torch.nn.functional.linear``)::

    out = x W^T + b                        (..., O)

Cache: x and W (references to the inputs, no copies) and whether there is a bias. Each
weight's gradient needs the other operand of the product; the bias gradient needs nothing.

Backward (for C = A B: dA = dC B^T, dB = A^T dC; here A = x_flat, B = W^T)::

    dx = dout W                            (..., C)
    dW = dout_flat^T x_flat                (O, C)
    db = sum of dout over all leading axes (O,)

Derivation: docs/derivations.md, section Linear.
"""
from __future__ import annotations

import math

import numpy as np

from minigrad import Module, Parameter, Tensor, from_pair

from .checks import (float_dtype, float_input, generator, last_dim, matrix_input, positive_int,
                      same_dtype, shape_is)

__all__ = ["linear", "linear_forward", "linear_backward", "LinearFunction", "Linear"]


def linear_forward(x, weight, bias=None):
    """``out = x W^T + b``.

    Args:
        x (np.ndarray): (..., C). weight (np.ndarray): (O, C). bias (np.ndarray | None): (O,).

    Returns:
        (out, cache): out (..., O); cache = (x, weight, has_bias).
    """
    C = x.shape[-1]
    x2 = x.reshape(-1, C)                     # (N, C), a view when x is contiguous
    out = x2 @ weight.T                       # (N, O)
    if bias is not None:
        out = out + bias                      # broadcast over rows
    return out.reshape(x.shape[:-1] + (weight.shape[0],)), (x, weight, bias is not None)  # (..., O)


def linear_backward(dout, cache):
    """Gradients of ``linear_forward``.

    Args:
        dout (np.ndarray): (..., O).
        cache: (x, weight, has_bias) from ``linear_forward``.

    Returns:
        (dx, dW, db): shapes (..., C), (O, C), (O,); db is None without a bias.
    """
    x, weight, has_bias = cache
    O, C = weight.shape
    d2 = dout.reshape(-1, O)                        # (N, O)
    dx = (d2 @ weight).reshape(x.shape)             # dx = dout W       (..., C)
    dW = d2.T @ x.reshape(-1, C)                    # dW = dout^T x     (O, C)
    db = d2.sum(axis=0) if has_bias else None       # db = sum_n dout_n (O,)
    return dx, dW, db


LinearFunction = from_pair(linear_forward, linear_backward, "LinearFunction")  # bias optional


def linear(x, weight, bias=None):
    """``x @ weight.T + bias`` (``torch.nn.functional.linear``), one node, hand-derived backward.

    Args:
        x (Tensor | np.ndarray): (..., in_features), at least 1-d.
        weight (Tensor | np.ndarray): (out_features, in_features).
        bias (Tensor | np.ndarray | None): (out_features,).
            All floating with one dtype; plain arrays are constants.

    Returns:
        Tensor (..., out_features) of the inputs' dtype.

    Raises:
        TypeError: non-floating inputs or mixed dtypes.
        ValueError: weight not 2-d, in_features mismatch, bias of the wrong shape, 0-d x.
    """
    x, xa = float_input(x, "x", "linear")
    C = last_dim(xa, "linear", "in_features")
    weight, wa = matrix_input(weight, "weight", "linear", "(out_features, in_features)", like=xa)
    shape_is(wa, ("out_features", C), "weight", "linear",
             f" (in_features = {C}, the last axis of x of shape {xa.shape})")
    if bias is None:
        return LinearFunction.apply(x, weight)
    bias, ba = float_input(bias, "bias", "linear")
    same_dtype(ba, "bias", xa, "x", "linear")
    shape_is(ba, (wa.shape[0],), "bias", "linear", " (out_features of weight)")
    return LinearFunction.apply(x, weight, bias)


class Linear(Module):
    """``linear`` as a Module (``torch.nn.Linear``): ``y = x W^T + b``.

    Args:
        in_features (int), out_features (int): sizes of the input and output last axes.
        bias (bool): whether to add a learned bias (default True).
        rng (np.random.Generator | None): source of the init (a fresh unseeded one if None).
        dtype: parameter dtype, default float32.
        backward: keyword-only; None for ``linear_backward``, or a function of the same
            signature ``(dout, cache) -> (dx, dW, db)`` to use in its place.

    Parameters: ``weight`` (out_features, in_features), ``bias`` (out_features,), both
    ~ U(-1/sqrt(in_features), 1/sqrt(in_features)), drawn weight first (PyTorch's default:
    kaiming_uniform with a = sqrt(5) gives that bound).
    Shapes: x (..., in_features) -> (..., out_features).
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, rng=None,
                 dtype=np.float32, *, backward=None) -> None:
        super().__init__()
        self.in_features = positive_int(in_features, "in_features", "Linear")
        self.out_features = positive_int(out_features, "out_features", "Linear")
        rng = generator(rng)
        dt = float_dtype(dtype, "Linear")
        bound = 1.0 / math.sqrt(self.in_features)
        self.weight = Parameter(
            rng.uniform(-bound, bound, (self.out_features, self.in_features)).astype(dt))
        if bias:
            self.bias = Parameter(rng.uniform(-bound, bound, self.out_features).astype(dt))
        else:
            self.bias = None
        self.function = (LinearFunction if backward is None
                         else from_pair(linear_forward, backward))

    def forward(self, x: Tensor) -> Tensor:
        return self.function.apply(x, self.weight, self.bias)    # bias None: a constant
