"""Input checks shared by the public wrappers of ``layers`` (and by ``gpt.config``).

A wrapper such as ``layers.rmsnorm.rms_norm`` makes one call here per check; the NumPy maths
(``*_forward`` / ``*_backward``) never does. Every check raises at the boundary, with a message
that starts with the calling function's name ``fn`` and names the argument ``name``, and
returns what the caller uses next.

Inputs ``t`` are Tensors (differentiable) or array-likes (constants). Checks of an input return
``(operand, array)``: the operand goes on to ``Function.apply`` (``t`` itself when it is a
Tensor, so gradients reach it, else the array), the np.ndarray is for further checks.
"""
from __future__ import annotations

import numbers
from typing import Any, Optional, Tuple

import numpy as np

from minigrad import Tensor


# ----------------------------------------------------------------------------- array inputs

def float_input(t: Any, name: str, fn: str) -> Tuple[Any, np.ndarray]:
    """``(operand, array)`` of an input that must have a floating dtype (any shape).

    Raises:
        TypeError: if the dtype is not floating.
    """
    a = t.data if isinstance(t, Tensor) else np.asarray(t)
    if not np.issubdtype(a.dtype, np.floating):
        raise TypeError(f"{fn}: {name} must have a floating dtype, got {a.dtype}")
    return (t if isinstance(t, Tensor) else a), a


def int_input(t: Any, name: str, fn: str) -> np.ndarray:
    """The array of indices or class targets, which must have an integer dtype (bools and
    floats are refused, as in PyTorch).

    Raises:
        TypeError: if the dtype is not a signed or unsigned integer one.
    """
    a = t.data if isinstance(t, Tensor) else np.asarray(t)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{fn}: {name} must have an integer dtype (indices), got {a.dtype}")
    return a


def sequence_input(t: Any, name: str, fn: str) -> Tuple[Any, np.ndarray]:
    """``float_input`` for a per-head sequence (..., T, hs): attention's q, k, v, RoPE's x.

    Raises:
        TypeError: a non-floating dtype.
        ValueError: fewer than 2 axes.
    """
    t, a = float_input(t, name, fn)
    if a.ndim < 2:
        raise ValueError(f"{fn}: {name} must be (..., T, hs), got shape {a.shape}")
    return t, a


def matrix_input(t: Any, name: str, fn: str, layout: str,
                 like: Optional[np.ndarray] = None) -> Tuple[Any, np.ndarray]:
    """``float_input`` for a weight matrix: 2-D, with axes ``layout`` (e.g. "(out, in)"), and
    of x's dtype when x's array is given as ``like``.

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


def norm_param(t: Any, name: str, xa: np.ndarray, fn: str, fill: float) -> Any:
    """The operand of a norm's gain or bias, (C,) for x's array ``xa`` of shape (..., C); for
    None, the constant ``fill`` (1 for a gain, 0 for a bias: PyTorch's ``weight=None``).

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


def same_dtype(a: np.ndarray, name: str, ref: np.ndarray, ref_name: str, fn: str) -> None:
    """Check that ``a`` has the dtype of ``ref``: no silent float32/float64 mix in one node.

    Raises:
        TypeError: if the dtypes differ.
    """
    if a.dtype != ref.dtype:
        raise TypeError(f"{fn}: {name} is {a.dtype} but {ref_name} is {ref.dtype}; use one dtype")


def last_dim(a: np.ndarray, fn: str, what: str) -> int:
    """The size C of x's last axis, which must exist; ``what`` says what it is, for the
    message (e.g. "the normalized one").

    Raises:
        ValueError: if x is 0-d.
    """
    if a.ndim == 0:
        raise ValueError(f"{fn}: x must have at least one axis ({what})")
    return a.shape[-1]


# ------------------------------------------------------------------------- scalar arguments

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
    """``int(v)`` for an integer argument, Python or NumPy (bools and floats refused).

    Raises:
        TypeError: if ``v`` is not an integer.
    """
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{fn}: {name} must be an int, got {v!r}")
    return int(v)


def positive_int(v: Any, name: str, fn: str) -> int:
    """``int(v)`` for a size argument: an integer > 0.

    Raises:
        TypeError: if ``v`` is not an integer.
        ValueError: if it is <= 0.
    """
    v = integer(v, name, fn)
    if v <= 0:
        raise ValueError(f"{fn}: {name} must be a positive integer, got {v}")
    return v


def float_dtype(dtype: Any, fn: str) -> np.dtype:
    """``np.dtype(dtype)`` for a dtype argument, which must be floating.

    Raises:
        TypeError: if it is not floating (e.g. int32).
    """
    dt = np.dtype(dtype)
    if not np.issubdtype(dt, np.floating):
        raise TypeError(f"{fn}: dtype must be a floating dtype, got {dt}")
    return dt


# ----------------------------------------------------------------------------- RoPE

def even_head_dim(head_dim: int, fn: str, got: Optional[str] = None) -> None:
    """Check that a head size suits RoPE, which rotates pairs (x[2i], x[2i+1]): even and >= 2.
    ``got`` says how the value arose, for the message (default: the number).

    Raises:
        ValueError: if ``head_dim`` is odd or < 2.
    """
    if head_dim < 2 or head_dim % 2 != 0:
        raise ValueError(f"{fn}: RoPE needs an even head_dim >= 2 (it rotates pairs), got "
                         f"{head_dim if got is None else got}")


def rope_table(t: Any, name: str, xa: np.ndarray) -> np.ndarray:
    """``apply_rope``'s cos or sin table as a constant array of x's dtype, which must broadcast
    to x's shape (..., T, hs) without enlarging it.

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
