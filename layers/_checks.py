"""Input checks shared by the public wrappers of ``layers`` (and by ``gpt.config``).

A wrapper such as ``layers.rmsnorm.rms_norm`` makes one call here per check; the NumPy maths
(``*_forward`` / ``*_backward``) never does. Every check raises at the boundary with a message
that starts with the calling function's name (``fn``) and names the argument, and returns what
the caller uses next, so that a wrapper reads as a short list of calls.

Conventions: a Tensor argument is differentiable, an array-like is a constant; an "operand" is
what goes on to ``Function.apply`` (the Tensor itself, or the array when it is a constant).
"""
from __future__ import annotations

import numbers
from typing import Any, Optional, Tuple

import numpy as np

from minigrad import Tensor


def float_input(t: Any, name: str, fn: str) -> Tuple[Any, np.ndarray]:
    """Check that ``t`` (a Tensor, or an array-like taken as a constant) is floating.

    Args:
        t: the input.
        name: its argument name, for the message.
        fn: the calling function's name, for the message.

    Returns:
        (operand, array): ``operand`` is ``t`` itself when it is a Tensor (so gradients reach
        it) and the array otherwise; ``array`` is the underlying np.ndarray.

    Raises:
        TypeError: if the dtype is not floating.
    """
    a = t.data if isinstance(t, Tensor) else np.asarray(t)
    if not np.issubdtype(a.dtype, np.floating):
        raise TypeError(f"{fn}: {name} must have a floating dtype, got {a.dtype}")
    return (t if isinstance(t, Tensor) else a), a


def sequence_input(t: Any, name: str, fn: str) -> Tuple[Any, np.ndarray]:
    """``float_input`` for a per-head sequence (..., T, hs), which must be at least 2-D
    (a query, key or value of attention, or RoPE's input).

    Raises:
        TypeError: a non-floating dtype.
        ValueError: fewer than 2 axes.
    """
    t, a = float_input(t, name, fn)
    if a.ndim < 2:
        raise ValueError(f"{fn}: {name} must be (..., T, hs), got shape {a.shape}")
    return t, a


def int_input(t: Any, name: str, fn: str) -> np.ndarray:
    """The array of ``t`` (indices or class targets: a Tensor or array-like), which must have an
    integer dtype (bools and floats are refused, as in PyTorch).

    Returns:
        np.ndarray of t's shape and dtype.

    Raises:
        TypeError: if the dtype is not a signed or unsigned integer one.
    """
    a = t.data if isinstance(t, Tensor) else np.asarray(t)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{fn}: {name} must have an integer dtype (indices), got {a.dtype}")
    return a


def float_dtype(dtype: Any, fn: str) -> np.dtype:
    """``np.dtype(dtype)``, which must be floating (a parameter or table dtype argument).

    Raises:
        TypeError: if it is not floating (e.g. int32).
    """
    dt = np.dtype(dtype)
    if not np.issubdtype(dt, np.floating):
        raise TypeError(f"{fn}: dtype must be a floating dtype, got {dt}")
    return dt


def same_dtype(a: np.ndarray, name: str, ref: np.ndarray, ref_name: str, fn: str) -> None:
    """Check that ``a`` has the dtype of ``ref`` (no silent promotion between float32 and
    float64 inside one node).

    Raises:
        TypeError: if the dtypes differ.
    """
    if a.dtype != ref.dtype:
        raise TypeError(f"{fn}: {name} is {a.dtype} but {ref_name} is {ref.dtype}; use one dtype")


def last_dim(a: np.ndarray, fn: str, what: str) -> int:
    """The size C of the last axis of ``a`` (the input x), which must exist.

    Args:
        a: x's array.
        fn: the calling function's name.
        what: what the last axis is, for the message ("the normalized one").

    Raises:
        ValueError: if ``a`` is 0-d.
    """
    if a.ndim == 0:
        raise ValueError(f"{fn}: x must have at least one axis ({what})")
    return a.shape[-1]


def norm_param(t: Any, name: str, xa: np.ndarray, fn: str, fill: float) -> Any:
    """A norm's (C,) gain or bias for x of shape (..., C), or the constant ``fill`` for None
    (PyTorch's ``weight=None`` / ``bias=None``: no parameter, no gradient).

    Args:
        t: Tensor, array-like or None.
        name: "weight" or "bias".
        xa: x's array (at least 1-d).
        fn: the calling function's name.
        fill: the value of the constant that stands for None (1 for a gain, 0 for a bias).

    Returns:
        The operand: ``t`` when it is a Tensor, its (C,) array otherwise.

    Raises:
        TypeError: a non-floating dtype, or not x's dtype.
        ValueError: a shape other than (C,).
    """
    C = xa.shape[-1]
    if t is None:
        return np.full(C, fill, dtype=xa.dtype)
    t, a = float_input(t, name, fn)
    if a.shape != (C,):
        raise ValueError(
            f"{fn}: {name} has shape {a.shape}, expected ({C},) to match the last axis of x "
            f"(x has shape {xa.shape})"
        )
    same_dtype(a, name, xa, "x", fn)
    return t


def matrix_input(t: Any, name: str, fn: str, layout: str,
                 like: Optional[np.ndarray] = None) -> Tuple[Any, np.ndarray]:
    """``float_input`` for a weight matrix, which must also be 2-D (and of x's dtype).

    Args:
        t: the weight (Tensor, or array-like taken as a constant).
        name, fn: for the message.
        layout: the expected axes, e.g. "(out_features, in_features)".
        like: x's array when the weight must have x's dtype, else None.

    Returns:
        (operand, array) as ``float_input``.

    Raises:
        TypeError: a non-floating dtype, or not x's dtype.
        ValueError: if the weight is not 2-D.
    """
    t, a = float_input(t, name, fn)
    if a.ndim != 2:
        raise ValueError(f"{fn}: {name} must be 2-D {layout}, got shape {a.shape}")
    if like is not None:
        same_dtype(a, name, like, "x", fn)
    return t, a


def check_eps(eps: Any, fn: str) -> float:
    """A norm's epsilon as a float: a finite real number >= 0 (bools refused).

    Raises:
        ValueError: for anything else (None, a string, NaN, inf, a negative number).
    """
    bad = isinstance(eps, bool) or not isinstance(eps, numbers.Real)
    if bad or not np.isfinite(eps) or eps < 0:
        raise ValueError(f"{fn}: eps must be a finite number >= 0, got {eps!r}")
    return float(eps)


def integer(v: Any, name: str, fn: str) -> int:
    """``int(v)`` for an integer argument (Python or NumPy; bools and floats refused).

    Raises:
        TypeError: if ``v`` is not an integer.
    """
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{fn}: {name} must be an int, got {v!r}")
    return int(v)


def positive_int(v: Any, name: str, fn: str) -> int:
    """``int(v)`` for a size argument, which must be an integer > 0.

    Raises:
        TypeError: if ``v`` is not an integer.
        ValueError: if it is <= 0.
    """
    v = integer(v, name, fn)
    if v <= 0:
        raise ValueError(f"{fn}: {name} must be a positive integer, got {v}")
    return v


def even_head_dim(head_dim: int, fn: str, got: Optional[str] = None) -> None:
    """Check that a head size suits RoPE, which rotates pairs (x[2i], x[2i+1]): even and >= 2.

    Args:
        head_dim: the head size hs (an int).
        fn: the calling function's name.
        got: how the value arose, for the message (default: the number itself).

    Raises:
        ValueError: if ``head_dim`` is odd or < 2.
    """
    if head_dim < 2 or head_dim % 2 != 0:
        raise ValueError(f"{fn}: RoPE needs an even head_dim >= 2 (it rotates pairs), got "
                         f"{head_dim if got is None else got}")


def rope_table(t: Any, name: str, xa: np.ndarray) -> np.ndarray:
    """A RoPE cos or sin table as a constant array of x's dtype that broadcasts to x's shape
    without enlarging it (for ``apply_rope``).

    Args:
        t: the table (np.ndarray, or a Tensor that does not require grad).
        name: "cos" or "sin".
        xa: x's array (..., T, hs).

    Returns:
        np.ndarray, cast to x's dtype (no copy when it already has it).

    Raises:
        ValueError: a Tensor that requires grad, more axes than x, or a shape that does not
            broadcast to x's (e.g. a cache for a longer sequence, not sliced to T).
        TypeError: a non-floating dtype.
    """
    if isinstance(t, Tensor) and t.requires_grad:
        raise ValueError(
            f"apply_rope: {name} requires grad, but the RoPE table is a constant here; "
            f"pass {name}.detach() or a NumPy array")
    _, t = float_input(t, name, "apply_rope")
    if t.ndim > xa.ndim:
        raise ValueError(f"apply_rope: {name} has {t.ndim} dims, more than x's {xa.ndim}")
    try:
        b = np.broadcast_shapes(t.shape, xa.shape)
    except ValueError:
        b = None
    if b != xa.shape:
        raise ValueError(
            f"apply_rope: {name} of shape {t.shape} does not broadcast to x's shape {xa.shape}; "
            f"slice the cache to the sequence length first, e.g. {name}[:, :, :T]")
    return t.astype(xa.dtype, copy=False)
