"""Input checks shared by the functions of ``layers/functional.py``, the Modules of
``layers/modules.py`` and ``gpt`` (sizes, heads that split the width, token ids in range, an
even RoPE head size: one wording, one exception type).

A function such as ``layers.functional.rms_norm`` makes one call here per check, a Module's
``forward`` one (``module_input``; ``Embedding``'s, the indices' checks); the layer files (the
NumPy maths ``*_forward`` / ``*_backward`` and their Functions) never do. Every check raises at
the boundary, with a message that starts with the calling function's name ``fn`` and names the
argument ``name``, and returns what the caller uses next.

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
    a = (t if isinstance(t, Tensor) else Tensor(t)).data     # a list of floats: float32
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


def norm_param(t: Any, name: str, xa: np.ndarray, fn: str, fill: float, axis: int = -1) -> Any:
    """The operand of a norm's gain or bias, (C,) for x's array ``xa`` whose ``axis`` has size
    C (the last, (..., C), for LayerNorm and RMSNorm; 1, (N, C, *), for BatchNorm); for None,
    the constant ``fill`` (1 for a gain, 0 for a bias: PyTorch's ``weight=None``).

    Raises:
        TypeError: a non-floating dtype, or not x's dtype.
        ValueError: a shape other than (C,).
    """
    C = xa.shape[axis]
    if t is None:
        return np.full(C, fill, dtype=xa.dtype)
    t, a = float_input(t, name, fn)
    which = "the last axis" if axis == -1 else f"axis {axis}"
    shape_is(a, (C,), name, fn, f" to match {which} of x (x has shape {xa.shape})")
    same_dtype(a, name, xa, "x", fn)
    return t


def normalized_axes(normalized_shape: Any, xa: np.ndarray, fn: str) -> int:
    """The number k of trailing axes a norm normalises, from PyTorch's ``normalized_shape``
    (an int, or a sequence of ints equal to the last k sizes of x's array ``xa``).

    Raises:
        TypeError: a size that is not an integer.
        ValueError: no size, a size <= 0, or sizes that are not the trailing shape of x.
    """
    shape = sizes(normalized_shape, fn)
    if xa.shape[-len(shape):] != shape:
        raise ValueError(f"{fn}: normalized_shape {shape} must be the last axes of the input, "
                         f"which has shape {xa.shape}")
    return len(shape)


def flat_param(t: Any, name: str, shape: Tuple[int, ...], fn: str) -> Any:
    """A norm's gain or bias over several normalized axes: checked to have their ``shape`` and
    reshaped to one axis of their product (None stays None).

    Raises:
        TypeError: a non-floating dtype.
        ValueError: a shape other than ``shape``.
    """
    if t is None:
        return None
    t, a = float_input(t, name, fn)
    shape_is(a, shape, name, fn, " (normalized_shape)")
    return t.reshape(a.size)


def same_dtype(a: np.ndarray, name: str, ref: np.ndarray, ref_name: str, fn: str) -> None:
    """Check that ``a`` has the dtype of ``ref``: no silent float32/float64 mix in one node.

    Raises:
        TypeError: if the dtypes differ.
    """
    if a.dtype != ref.dtype:
        raise TypeError(f"{fn}: {name} is {a.dtype} but {ref_name} is {ref.dtype}; use one dtype")


def module_input(t: Any, weight: Any, shape: Tuple[int, ...], fn: str) -> Any:
    """The operand of a Module's input, checked against the Module as PyTorch's
    ``torch.nn.Linear`` and ``torch.nn.LayerNorm`` do: a floating dtype, that of the Module's
    ``weight`` (any floating dtype when the Module has none, None), and last axes ``shape``
    (its in_features or normalized_shape).

    Raises:
        TypeError: a non-floating dtype, or not the weight's.
        ValueError: last axes other than ``shape``.
    """
    t, a = float_input(t, "input", fn)
    if weight is not None:
        same_dtype(a, "input", weight.data, "weight", fn)
    if a.shape[-len(shape):] != shape:
        shown = ", ".join(str(n) for n in shape)
        raise ValueError(f"{fn}: input has shape {a.shape}, expected (*, {shown})")
    return t


def channel_input(t: Any, fn: str) -> Tuple[Any, np.ndarray]:
    """``float_input`` for a batch norm's input (N, C, *): at least 2 axes, the channels on
    axis 1.

    Raises:
        TypeError: a non-floating dtype.
        ValueError: fewer than 2 axes.
    """
    t, a = float_input(t, "input", fn)
    if a.ndim < 2:
        raise ValueError(f"{fn}: input must be (N, C, *), with at least 2 axes (the channels on "
                         f"axis 1), got shape {a.shape}")
    return t, a


def batch_norm_input(t: Any, num_features: int, like: Optional[Tensor], fn: str) -> Any:
    """The operand of ``BatchNorm1d``'s input, checked as ``torch.nn.BatchNorm1d`` checks it:
    floating, (N, C) or (N, C, L) with C = ``num_features``, and of the dtype of ``like`` (the
    Module's weight or running_mean; None, a Module with neither: any floating dtype).

    Raises:
        TypeError: a non-floating dtype, or not the Module's.
        ValueError: neither 2-D nor 3-D (PyTorch's "expected 2D or 3D input (got 4D input)"),
            or C other than num_features.
    """
    t, a = float_input(t, "input", fn)
    if a.ndim not in (2, 3):
        raise ValueError(f"{fn}: expected 2D or 3D input (got {a.ndim}D input)")
    if like is not None and a.dtype != like.dtype:
        raise TypeError(f"{fn}: input is {a.dtype} but the module is {like.dtype}; use one dtype")
    if a.shape[1] != num_features:
        raise ValueError(f"{fn}: input has shape {a.shape}, expected (N, {num_features}) or "
                         f"(N, {num_features}, L) (num_features = {num_features} on axis 1)")
    return t


def running_stat(t: Any, name: str, xa: np.ndarray, fn: str) -> Optional[Tensor]:
    """A batch norm's ``running_mean`` or ``running_var``: None, or a Tensor (an ndarray is
    wrapped without a copy, so that it too is updated in place) of shape (C,) for the input's
    array ``xa`` (N, C, *) and of its dtype.

    Raises:
        TypeError: neither a Tensor, an ndarray nor None; a dtype other than the input's.
        ValueError: a shape other than (C,).
    """
    if t is None:
        return None
    if not isinstance(t, (Tensor, np.ndarray)):
        raise TypeError(f"{fn}: {name} must be a Tensor (updated in place when training) or "
                        f"None, got {type(t).__name__}")
    t = t if isinstance(t, Tensor) else Tensor(t)
    shape_is(t.data, (xa.shape[1],), name, fn, f" (one per channel: input has shape {xa.shape})")
    same_dtype(t.data, name, xa, "input", fn)
    return t


def values_per_channel(xa: np.ndarray, fn: str) -> int:
    """The number m of values a channel's batch statistics run over in the input's array
    ``xa`` (N, C, *): N times the sizes after the channel axis. It must be more than 1: one
    value has no variance (its xhat is 0), as PyTorch checks when training.

    Raises:
        ValueError: m <= 1, with PyTorch's message (an empty batch, m = 0, too).
    """
    m = xa.shape[0] * int(np.prod(xa.shape[2:]))
    if m <= 1:
        raise ValueError(f"{fn}: Expected more than 1 value per channel when training, got "
                         f"input size {xa.shape}")
    return m


def last_dim(a: np.ndarray, fn: str, what: str, name: str = "x") -> int:
    """The size C of the input's last axis, which must exist; ``what`` says what that axis
    is, for the message (e.g. "the normalized one").

    Raises:
        ValueError: if the input is 0-d.
    """
    if a.ndim == 0:
        raise ValueError(f"{fn}: {name} must have at least one axis ({what}), got a 0-d array")
    return a.shape[-1]


def axis_index(axis: Any, a: np.ndarray, fn: str) -> int:
    """``int(axis)`` for an axis of the input's array ``a`` (PyTorch's ``dim``): an integer with
    -ndim <= axis < ndim, where a 0-d input counts as one axis (0 and -1), as in PyTorch.

    Raises:
        TypeError: a non-integer axis.
        IndexError: an axis out of range (PyTorch's IndexError).
    """
    axis = integer(axis, "dim", fn)
    n = max(a.ndim, 1)
    if not -n <= axis < n:
        raise IndexError(f"{fn}: dim {axis} out of range for input of shape {a.shape}")
    return axis


def shape_is(a: np.ndarray, expected: Tuple[Any, ...], name: str, fn: str,
             note: str = "") -> None:
    """Check ``a.shape`` against ``expected``, a tuple of sizes where a str entry (a letter
    such as "H") matches any size; ``note`` ends the message (where the sizes come from).

    Raises:
        ValueError: naming both shapes.
    """
    ok = a.ndim == len(expected) and all(
        isinstance(e, str) or e == n for e, n in zip(expected, a.shape))
    if not ok:
        shown = ", ".join(str(e) for e in expected) + ("," if len(expected) == 1 else "")
        raise ValueError(f"{fn}: {name} has shape {a.shape}, expected ({shown}){note}")


def index_range(a: np.ndarray, n: int, name: str, fn: str, what: str = "index",
                ignore_index: Optional[int] = None) -> None:
    """Check that every entry of the integer array ``a`` lies in [0, n) (an embedding's
    rows, cross-entropy's classes), entries equal to ``ignore_index`` excepted. Negative
    entries are refused, not wrapped. ``what`` names one entry in the message.

    Raises:
        IndexError: naming the first bad entry and how many there are (PyTorch raises
            IndexError for both an embedding index and a cross-entropy target out of range).
    """
    bad = (a < 0) | (a >= n)
    if ignore_index is not None:
        bad &= a != ignore_index
    if bad.any():
        first = int(a.reshape(-1)[np.flatnonzero(bad.reshape(-1))[0]])
        ignored = "" if ignore_index is None else f"; ignore_index is {ignore_index}"
        raise IndexError(f"{fn}: {what} {first} out of range [0, {n}) in {name} "
                         f"({int(bad.sum())} of {a.size} out of range{ignored})")


def class_weight(t: Any, C: int, xa: np.ndarray, fn: str) -> np.ndarray:
    """cross_entropy's ``weight``: a constant (C,) array of the input's dtype, one rescaling
    weight per class.

    Raises:
        TypeError: a non-floating dtype, or not the input's dtype (as in PyTorch).
        ValueError: a shape other than (C,), or a Tensor that requires grad (PyTorch's
            cross_entropy is not differentiable with respect to weight either).
    """
    if isinstance(t, Tensor) and t.requires_grad:
        raise ValueError(f"{fn}: weight requires grad, but the class weights are constants; "
                         f"pass weight.detach()")
    _, a = float_input(t, "weight", fn)
    shape_is(a, (C,), "weight", fn, f" (one weight per class, C = {C})")
    same_dtype(a, "weight", xa, "input", fn)
    return a


def attention_mask(t: Any, shape: Tuple[int, ...], qa: np.ndarray, fn: str) -> Any:
    """The operand of attention's ``attn_mask``: a bool array (True: the key takes part), or
    a float mask (a Tensor keeps its gradient) cast to query's dtype, added to the scores. It
    must broadcast to the scores' ``shape`` (..., Tq, Tk) without enlarging it.

    Raises:
        TypeError: a dtype neither bool nor floating.
        ValueError: a shape that does not broadcast to the scores'.
    """
    a = t.data if isinstance(t, Tensor) else np.asarray(t)
    if a.dtype != bool and not np.issubdtype(a.dtype, np.floating):
        raise TypeError(f"{fn}: attn_mask must be bool or floating, got {a.dtype}")
    try:
        ok = np.broadcast_shapes(a.shape, shape) == shape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"{fn}: attn_mask of shape {a.shape} does not broadcast to the "
                         f"scores' shape {shape} (..., Tq, Tk)")
    if a.dtype == bool:
        return a                                          # a constant
    t = t if isinstance(t, Tensor) else a
    return t if a.dtype == qa.dtype else t.astype(qa.dtype)


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


def sizes(normalized_shape: Any, fn: str) -> Tuple[int, ...]:
    """A Module's ``normalized_shape`` (an int or a non-empty sequence of ints > 0) as a tuple.

    Raises:
        TypeError: a size that is not an integer.
        ValueError: no size, or a size <= 0.
    """
    shape = normalized_shape if isinstance(normalized_shape, (tuple, list)) else (normalized_shape,)
    if not shape:
        raise ValueError(f"{fn}: normalized_shape must have at least one size, got {shape!r}")
    return tuple(positive_int(n, "normalized_shape", fn) for n in shape)


def positive_number(v: Any, name: str, fn: str) -> float:
    """``float(v)`` for a real argument that must be finite and > 0 (bools refused).

    Raises:
        TypeError: if ``v`` is not a real number.
        ValueError: if it is NaN, infinite or <= 0.
    """
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{fn}: {name} must be a number, got {v!r}")
    if not np.isfinite(v) or v <= 0:
        raise ValueError(f"{fn}: {name} must be a finite number > 0, got {v!r}")
    return float(v)


def finite_number(v: Any, name: str, fn: str) -> float:
    """``float(v)`` for a real argument that must be finite (bools refused).

    Raises:
        TypeError: if ``v`` is not a real number.
        ValueError: if it is NaN or infinite.
    """
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{fn}: {name} must be a number, got {v!r}")
    if not np.isfinite(v):
        raise ValueError(f"{fn}: {name} must be a finite number, got {v!r}")
    return float(v)


def unit_interval(v: Any, name: str, fn: str) -> float:
    """``float(v)`` for a real argument in [0, 1] (bools refused).

    Raises:
        ValueError: for anything else.
    """
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not 0.0 <= v <= 1.0:
        raise ValueError(f"{fn}: {name} must be a number in [0, 1], got {v!r}")
    return float(v)


def boolean(v: Any, name: str, fn: str) -> bool:
    """``bool(v)`` for a flag, a Python or NumPy bool.

    Raises:
        TypeError: for anything else (an int included).
    """
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{fn}: {name} must be a bool, got {type(v).__name__}")
    return bool(v)


def choice(v: Any, choices: Tuple[str, ...], name: str, fn: str) -> str:
    """``v`` for an argument that must be one of ``choices``.

    Raises:
        ValueError: for anything else.
    """
    if v not in choices:
        raise ValueError(f"{fn}: {name} must be one of {choices}, got {v!r}")
    return v


def alias(value: Any, other: Any, name: str, other_name: str, default: Any, fn: str) -> Any:
    """The one of ``value`` (argument ``name``, default ``default``) and its PyTorch alias
    ``other`` (argument ``other_name``, default None) that was given, e.g. softmax's
    ``axis`` / ``dim``.

    Raises:
        TypeError: if both were given.
    """
    if other is None:
        return value
    if value != default:
        raise TypeError(f"{fn}: got both {name}= and {other_name}= (the same argument); use one")
    return other


def not_implemented(v: Any, default: Any, name: str, fn: str, instead: str = "") -> None:
    """Refuse a PyTorch argument whose other values are not implemented: ``v`` must equal
    ``default``; ``instead`` ends the message (what to do instead).

    Raises:
        NotImplementedError: naming the argument and its value.
    """
    if not (v is default or (isinstance(v, (numbers.Number, str)) and v == default)):
        raise NotImplementedError(f"{fn}: {name}={v!r} is not implemented{instead}")


def generator(rng: Any) -> np.random.Generator:
    """A Module's init source: ``rng`` itself, or a fresh unseeded Generator for None.

    Raises:
        TypeError: for anything else (e.g. an int seed).
    """
    if rng is None:
        return np.random.default_rng()
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator or None, got {type(rng).__name__}")
    return rng


def float_dtype(dtype: Any, fn: str) -> np.dtype:
    """``np.dtype(dtype)`` for a dtype argument, which must be floating; None is float32,
    PyTorch's default dtype (``np.dtype(None)`` would be float64).

    Raises:
        TypeError: if it is not floating (e.g. int32).
    """
    dt = np.dtype(np.float32 if dtype is None else dtype)
    if not np.issubdtype(dt, np.floating):
        raise TypeError(f"{fn}: dtype must be a floating dtype, got {dt}")
    return dt


# ------------------------------------------------------------------- attention and RoPE

def divides(n_heads: int, d_model: int, fn: str) -> int:
    """The head size ``d_model // n_heads``, after checking that ``n_heads`` divides
    ``d_model`` (multi-head attention splits the width C into H equal heads).

    Raises:
        ValueError: if it does not.
    """
    if d_model % n_heads:
        raise ValueError(f"{fn}: n_heads={n_heads} does not divide d_model={d_model}")
    return d_model // n_heads


def qkv_shapes(qa: np.ndarray, ka: np.ndarray, va: np.ndarray, fn: str) -> Tuple[int, ...]:
    """The scores' shape (..., Tq, Tk) of attention's q (..., Tq, hs), k (..., Tk, hs) and
    v (..., Tk, hv), after checking that they fit: leading dims that broadcast together (as
    PyTorch's), q and k of one head size hs >= 1, k and v of one length.

    Raises:
        ValueError: naming the shapes that do not fit.
    """
    try:
        lead = np.broadcast_shapes(qa.shape[:-2], ka.shape[:-2], va.shape[:-2])
    except ValueError:
        raise ValueError(f"{fn}: leading dims of q {qa.shape}, k {ka.shape}, v {va.shape} "
                         f"do not broadcast together") from None
    if qa.shape[-1] != ka.shape[-1]:
        raise ValueError(f"{fn}: q and k head sizes differ: q {qa.shape}, k {ka.shape}")
    if ka.shape[-2] != va.shape[-2]:
        raise ValueError(f"{fn}: k and v lengths differ: k {ka.shape}, v {va.shape}")
    if qa.shape[-1] == 0:
        raise ValueError(f"{fn}: empty head (hs = 0): q {qa.shape}, k {ka.shape}")
    return lead + (qa.shape[-2], ka.shape[-2])


def packed_qkv(a: np.ndarray, fn: str) -> None:
    """Check a packed q/k/v projection: (B, T, 3C) with B, T and C at least 1.

    Raises:
        ValueError: naming the condition that fails (not 3-D, an empty axis, or a last axis
            that is not a multiple of 3).
    """
    if a.ndim != 3:
        raise ValueError(f"{fn}: qkv must be 3-D (B, T, 3C), got shape {a.shape}")
    if 0 in a.shape:
        raise ValueError(f"{fn}: qkv has an empty axis, got shape {a.shape} (B, T, 3C)")
    if a.shape[-1] % 3:
        raise ValueError(f"{fn}: qkv's last axis {a.shape[-1]} is not a multiple of 3 "
                         f"(q, k and v side by side), got shape {a.shape}")


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
