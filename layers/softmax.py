"""Softmax along one axis, numerically stable, as one autograd node.

Shapes: any; the axis (last by default) has length C. In the GPT it runs on attention scores
(B, H, T, T) inside ``layers/attention.py`` and on logits (B, T, V).

Forward (Bridle 1990; the max-subtraction of every deep learning library)::

    m = max_j x_j                       (per row; softmax is invariant to the shift)
    y_i = exp(x_i - m) / sum_j exp(x_j - m)

Subtracting the row max keeps every exponent <= 0, so nothing overflows (logits of 1e4 work)
and the largest term is exactly 1, so the sum never underflows to 0.

Cache: the output y (and the axis). The Jacobian is written in terms of y alone, so x and the
exponentials are not kept.

Backward (the Jacobian-vector product of J = diag(y) - y y^T, which is symmetric)::

    dx = y * dy - y * sum_j(dy_j * y_j)        # = y * (dy - sum(dy * y))

Log-softmax (``log_softmax``), from the same shifted row, never as log(softmax)::

    y_i = (x_i - m) - log(sum_j exp(x_j - m))
    dx  = dy - exp(y) * sum(dy)               # term 1: identity; term 2: through the log-sum-exp

Derivation: docs/derivations.md, sections Softmax and Log-softmax.
PyTorch faces: ``layers.functional.softmax``, ``layers.functional.log_softmax``.
"""
import numpy as np

from minigrad import from_pair


def softmax_forward(x, axis=-1):
    """Stable softmax of ``x`` along ``axis``.

    Args:
        x (np.ndarray): floating, any shape.
        axis (int): the normalised axis.

    Returns:
        (y, cache): y has x's shape and dtype; cache = (y, axis).
        A row that is entirely -inf gives NaN (as in PyTorch); a row with at least one finite
        entry is well defined, with exact zeros where x is -inf.
    """
    m = np.max(x, axis=axis, keepdims=True)          # (..., 1, ...) row max
    e = np.exp(x - m)                                # exponents <= 0: e in [0, 1]
    y = e / np.sum(e, axis=axis, keepdims=True)
    return y, (y, axis)


def softmax_backward(dy, cache):
    """``dx = y * dy - y * sum(dy * y)``, the softmax Jacobian-vector product.

    Args:
        dy (np.ndarray): gradient of the output, y's shape.
        cache: (y, axis) from ``softmax_forward``.

    Returns:
        dx (np.ndarray): y's shape and dtype.
    """
    y, axis = cache
    return (y * dy                                   # term 1: diag(y) dy
            - y * np.sum(dy * y, axis=axis, keepdims=True))  # term 2: -y (y . dy)


SoftmaxFunction = from_pair(softmax_forward, softmax_backward, "SoftmaxFunction")


def log_softmax_forward(x, axis=-1):
    """``log(softmax(x))`` along ``axis``, from the shifted row: ``z - log(sum(exp(z)))``,
    z = x - max(x). Returns (y, cache) with y of x's shape and dtype, cache = (y, axis)."""
    z = x - np.max(x, axis=axis, keepdims=True)      # shifted row, max entry 0
    y = z - np.log(np.sum(np.exp(z), axis=axis, keepdims=True))
    return y, (y, axis)


def log_softmax_backward(dy, cache):
    """``dx = dy - softmax(x) * sum(dy)``, with softmax(x) = exp(y); dx has y's shape."""
    y, axis = cache
    return (dy                                                      # term 1: identity
            - np.exp(y) * np.sum(dy, axis=axis, keepdims=True))     # term 2: log-sum-exp


LogSoftmaxFunction = from_pair(log_softmax_forward, log_softmax_backward, "LogSoftmaxFunction")
