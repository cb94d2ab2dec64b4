"""Primitive operations, each a ``Function`` with its backward rule on one line.

Shapes follow NumPy: every binary op broadcasts, and ``unbroadcast`` sums each gradient back to
its input's shape (summing the prepended axes, then the size-1 axes), once, here in the engine
(HIPS/autograd's ``unbroadcast``). Every gradient is cast back to its input's dtype.

Notation: ``c = f(a, b)``, ``dc`` the upstream gradient, ``da``/``db`` what backward returns.

A forward marked ``@runtime_errors`` raises NumPy's ValueError (shapes that do not broadcast,
multiply, reshape or concatenate) as ``ValueRuntimeError``, a RuntimeError too, as PyTorch.
"""
from __future__ import annotations

import functools
import numbers

import numpy as np

try:  # numpy >= 1.25
    from numpy.exceptions import AxisError
except ImportError:  # numpy 1.23, 1.24: only the top-level name (removed from it in numpy 2.0)
    from numpy import AxisError

from ._guards import ValueRuntimeError
from .tensor import Function, Tensor


def runtime_errors(forward):
    """``forward``, with NumPy's ValueError (AxisError aside) raised as ``ValueRuntimeError``."""
    @functools.wraps(forward)
    def checked(ctx, *args, **kwargs):
        try:
            return forward(ctx, *args, **kwargs)
        except AxisError:           # an IndexError too, as PyTorch's "Dimension out of range"
            raise
        except ValueError as e:
            raise ValueRuntimeError(str(e)) from None
    return checked


def unbroadcast(grad: np.ndarray, shape: tuple, dtype=None) -> np.ndarray:
    """Sum ``grad`` down to ``shape`` (the inverse of NumPy broadcasting) and cast to ``dtype``.

    Args:
        grad: array whose shape is ``shape`` broadcast against something.
        shape: the target shape.
        dtype: target dtype (default: keep ``grad``'s).

    Returns:
        np.ndarray of exactly ``shape``.
    """
    if grad.shape != tuple(shape):
        extra = grad.ndim - len(shape)
        if extra > 0:
            grad = grad.sum(axis=tuple(range(extra)))
        axes = tuple(i for i, s in enumerate(shape) if s == 1 and grad.shape[i] != 1)
        if axes:
            grad = grad.sum(axis=axes, keepdims=True)
        grad = grad.reshape(shape)
    if dtype is not None and grad.dtype != dtype:
        grad = grad.astype(dtype)
    return grad


def _shapes_dtypes(a, b):
    """((shape, dtype) of a, (shape, dtype) of b): all that Add's and Sub's backward need."""
    return (np.shape(a), np.asarray(a).dtype), (np.shape(b), np.asarray(b).dtype)


def _norm_axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)):
        axis = (axis,)
    out = []
    for ax in axis:
        if not -max(ndim, 1) <= ax < max(ndim, 1):     # a 0-d array takes 0 and -1 (PyTorch)
            raise AxisError(int(ax), ndim)
        out.append(int(ax) % max(ndim, 1))
    if len(set(out)) != len(out):
        raise ValueRuntimeError(f"duplicate value in axis: {axis}")
    return tuple(out) if ndim else ()                   # a 0-d array has no axis to reduce


# ----------------------------------------------------------------------------- arithmetic
class Add(Function):
    """c = a + b.   da = dc, db = dc (each summed to its input's shape)."""

    @staticmethod
    @runtime_errors
    def forward(ctx, a, b):
        ctx.shapes = _shapes_dtypes(a, b)
        return np.add(a, b)

    @staticmethod
    def backward(ctx, dc):
        (sa, ta), (sb, tb) = ctx.shapes
        na, nb = ctx.needs_input_grad
        return (unbroadcast(dc, sa, ta) if na else None, unbroadcast(dc, sb, tb) if nb else None)


class Sub(Function):
    """c = a - b.   da = dc, db = -dc."""

    @staticmethod
    @runtime_errors
    def forward(ctx, a, b):
        ctx.shapes = _shapes_dtypes(a, b)
        return np.subtract(a, b)

    @staticmethod
    def backward(ctx, dc):
        (sa, ta), (sb, tb) = ctx.shapes
        na, nb = ctx.needs_input_grad
        return (unbroadcast(dc, sa, ta) if na else None, unbroadcast(-dc, sb, tb) if nb else None)


class Mul(Function):
    """c = a * b.   da = dc * b, db = dc * a  (a is saved only when b needs a gradient, and b
    when a does, as PyTorch: ``z = y * 2`` keeps no copy of y, so a later ``y += 1`` leaves it
    valid)."""

    @staticmethod
    @runtime_errors
    def forward(ctx, a, b):
        na, nb = ctx.needs_input_grad
        ctx.save_for_backward(np.asarray(a) if nb else None, np.asarray(b) if na else None)
        ctx.shapes = _shapes_dtypes(a, b)
        return np.multiply(a, b)

    @staticmethod
    def backward(ctx, dc):
        a, b = ctx.saved_tensors
        (sa, ta), (sb, tb) = ctx.shapes
        na, nb = ctx.needs_input_grad
        return (unbroadcast(dc * b, sa, ta) if na else None,
                unbroadcast(dc * a, sb, tb) if nb else None)


class Div(Function):
    """c = a / b.   da = dc / b, db = -dc * a / b**2  (a is saved only when b needs a gradient)."""

    @staticmethod
    @runtime_errors
    def forward(ctx, a, b):
        ctx.save_for_backward(np.asarray(a) if ctx.needs_input_grad[1] else None, np.asarray(b))
        ctx.shapes = _shapes_dtypes(a, b)
        return np.divide(a, b)

    @staticmethod
    def backward(ctx, dc):
        a, b = ctx.saved_tensors
        (sa, ta), (sb, tb) = ctx.shapes
        na, nb = ctx.needs_input_grad
        da = unbroadcast(dc / b, sa, ta) if na else None
        db = unbroadcast(-dc * a / (b * b), sb, tb) if nb else None
        return da, db


class Neg(Function):
    """c = -a.   da = -dc."""

    @staticmethod
    def forward(ctx, a):
        return np.negative(a)

    @staticmethod
    def backward(ctx, dc):
        return -dc


class Pow(Function):
    """c = a ** b.   da = dc * b * a**(b - 1), 0 where b = 0;  db = dc * c * log(a), 0 where
    a = 0 and b >= 0 (PyTorch's ``pow_backward`` and ``pow_backward_exponent``: 0 ** b is
    constant there, and log(0) = -inf would give 0 * -inf = NaN). A negative a gives NaN where
    the power is not real, as PyTorch; c is saved only when b needs a gradient."""

    @staticmethod
    @runtime_errors             # an integer to a negative integer power (PyTorch: RuntimeError)
    def forward(ctx, a, b):
        with np.errstate(invalid="ignore", divide="ignore"):
            c = np.power(a, b)
        ctx.save_for_backward(np.asarray(a), np.asarray(b), c if ctx.needs_input_grad[1] else None)
        ctx.shapes = _shapes_dtypes(a, b)
        return c

    @staticmethod
    def backward(ctx, dc):
        a, b, c = ctx.saved_tensors
        (sa, ta), (sb, tb) = ctx.shapes
        na, nb = ctx.needs_input_grad
        with np.errstate(invalid="ignore", divide="ignore"):
            da = unbroadcast(np.where(b == 0, 0, dc * b * a ** (b - 1)), sa, ta) if na else None
            db = unbroadcast(np.where((a == 0) & (b >= 0), 0, dc * c * np.log(a)), sb, tb) \
                if nb else None
        return da, db


# ----------------------------------------------------------------------------- elementwise
class Exp(Function):
    """c = exp(a).   da = dc * c."""

    @staticmethod
    def forward(ctx, a):
        c = np.exp(a)
        ctx.save_for_backward(c)
        return c

    @staticmethod
    def backward(ctx, dc):
        (c,) = ctx.saved_tensors
        return dc * c


class Log(Function):
    """c = log(a).   da = dc / a."""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return np.log(a)

    @staticmethod
    def backward(ctx, dc):
        (a,) = ctx.saved_tensors
        return dc / a


class Sqrt(Function):
    """c = sqrt(a).   da = dc / (2 c)."""

    @staticmethod
    def forward(ctx, a):
        c = np.sqrt(a)
        ctx.save_for_backward(c)
        return c

    @staticmethod
    def backward(ctx, dc):
        (c,) = ctx.saved_tensors
        return dc / (2 * c)


class Tanh(Function):
    """c = tanh(a).   da = dc * (1 - c**2)  (sech^2 from the saved tanh, never 1/cosh^2)."""

    @staticmethod
    def forward(ctx, a):
        c = np.tanh(a)
        ctx.save_for_backward(c)
        return c

    @staticmethod
    def backward(ctx, dc):
        (c,) = ctx.saved_tensors
        return dc * (1 - c * c)


class Sigmoid(Function):
    """c = 1 / (1 + exp(-a)).   da = dc * c * (1 - c).

    Forward evaluates exp(-|a|) only, so no overflow for large |a| in any dtype.
    """

    @staticmethod
    def forward(ctx, a):
        e = np.exp(-np.abs(a))
        c = np.where(a >= 0, 1 / (1 + e), e / (1 + e)).astype(a.dtype, copy=False)
        ctx.save_for_backward(c)
        return c

    @staticmethod
    def backward(ctx, dc):
        (c,) = ctx.saved_tensors
        return dc * c * (1 - c)


class Relu(Function):
    """c = max(a, 0).   da = dc * not(c <= 0)  (0 at a = 0, and dc passes at a = NaN: PyTorch's
    ``threshold_backward`` on the saved output, as PyTorch saves it)."""

    @staticmethod
    def forward(ctx, a):
        c = np.maximum(a, 0)
        ctx.save_for_backward(c)
        return c

    @staticmethod
    def backward(ctx, dc):
        (c,) = ctx.saved_tensors
        return dc * ~(c <= 0)


class Abs(Function):
    """c = |a|.   da = dc * sign(a), with sign 0 at a = 0 and at a = NaN (PyTorch's ``sgn``;
    ``np.sign`` would give NaN there)."""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return np.abs(a)

    @staticmethod
    def backward(ctx, dc):
        (a,) = ctx.saved_tensors
        return dc * ((a > 0).astype(dc.dtype) - (a < 0).astype(dc.dtype))


class Clamp(Function):
    """c = min(max(a, lo), hi) for scalar bounds (a missing bound is no bound; NaN stays NaN;
    lo > hi gives hi).

    da = dc * (a > lo) * (a < hi): 0 at the bounds themselves and at NaN (PyTorch 2.14's
    ``clamp_backward``; PyTorch 2.13 and earlier passed the gradient at the bounds).
    """

    @staticmethod
    def forward(ctx, a, lo=None, hi=None):
        ctx.save_for_backward(a)
        ctx.lo, ctx.hi = lo, hi
        c = a
        if lo is not None:
            c = np.maximum(c, np.asarray(lo, dtype=a.dtype))
        if hi is not None:
            c = np.minimum(c, np.asarray(hi, dtype=a.dtype))
        return np.array(c, copy=True) if c is a else c

    @staticmethod
    def backward(ctx, dc):
        (a,) = ctx.saved_tensors
        keep = np.ones(a.shape, dtype=bool)
        if ctx.lo is not None:
            keep &= a > ctx.lo
        if ctx.hi is not None:
            keep &= a < ctx.hi
        return dc * keep


class Maximum(Function):
    """c = maximum(a, b), NaN where either is NaN.   da = dc * w(a, b), db = dc * w(b, a) with
    w(a, b) = 1/2 where a = b, 0 where a < b, 1 elsewhere (NaN included): a tie shares the
    gradient evenly (PyTorch's ``maximum`` backward)."""

    loses = staticmethod(np.less)       # a loses to b where a < b
    pick = staticmethod(np.maximum)

    @staticmethod
    @runtime_errors
    def forward(ctx, a, b):
        a, b = np.asarray(a), np.asarray(b)
        ctx.save_for_backward(a, b)
        ctx.shapes = _shapes_dtypes(a, b)
        return ctx.fn_cls.pick(a, b)

    @staticmethod
    def backward(ctx, dc):
        a, b = ctx.saved_tensors
        (sa, ta), (sb, tb) = ctx.shapes
        na, nb = ctx.needs_input_grad
        share = np.where(a == b, dc / 2, dc)
        loses = ctx.fn_cls.loses
        return (unbroadcast(share * ~loses(a, b), sa, ta) if na else None,
                unbroadcast(share * ~loses(b, a), sb, tb) if nb else None)


class Minimum(Maximum):
    """c = minimum(a, b); the gradient rule of ``Maximum`` with a losing where a > b."""

    loses = staticmethod(np.greater)
    pick = staticmethod(np.minimum)


class Cast(Function):
    """c = a.astype(dtype).   da = dc.astype(a.dtype)."""

    @staticmethod
    def forward(ctx, a, dtype):
        ctx.src = a.dtype
        return a.astype(dtype)

    @staticmethod
    def backward(ctx, dc):
        return dc.astype(ctx.src)


# ----------------------------------------------------------------------------- matmul
class MatMul(Function):
    """c = a @ b (np.matmul: 1-D, 2-D, batched with broadcast batch axes).

    da = dc @ b^T,  db = a^T @ dc  (^T swaps the last two axes; batch axes summed back). a is
    saved only when b needs a gradient, and b when a does (PyTorch's rule).
    """

    @staticmethod
    @runtime_errors
    def forward(ctx, a, b):
        a, b = np.asarray(a), np.asarray(b)
        if a.ndim == 0 or b.ndim == 0:
            raise ValueError("matmul: input operand does not have enough dimensions (0-d)")
        na, nb = ctx.needs_input_grad
        ctx.save_for_backward(a if nb else None, b if na else None)
        ctx.shapes = _shapes_dtypes(a, b)
        return np.matmul(a, b)

    @staticmethod
    def backward(ctx, dc):
        a, b = ctx.saved_tensors
        (sa, ta), (sb, tb) = ctx.shapes
        na, nb = ctx.needs_input_grad
        # Promote 1-D operands as np.matmul does, then put the removed axes back into dc.
        sa2 = (1,) + sa if len(sa) == 1 else sa
        sb2 = sb + (1,) if len(sb) == 1 else sb
        dc2 = dc
        if len(sa) == 1:
            dc2 = np.expand_dims(dc2, -2 if len(sb) > 1 else -1)
        if len(sb) == 1:
            dc2 = np.expand_dims(dc2, -1)
        da = db = None
        if na:
            da = np.matmul(dc2, np.swapaxes(b.reshape(sb2), -1, -2))
            da = unbroadcast(da, sa2, ta).reshape(sa)
        if nb:
            db = np.matmul(np.swapaxes(a.reshape(sa2), -1, -2), dc2)
            db = unbroadcast(db, sb2, tb).reshape(sb)
        return da, db


# ----------------------------------------------------------------------------- reductions
def _expand(dc, axes, keepdims):
    return dc if keepdims else np.expand_dims(dc, axes)


class Sum(Function):
    """c = a.sum(axis, keepdims).   da = dc broadcast back over the summed axes."""

    @staticmethod
    def forward(ctx, a, axis=None, keepdims=False):
        ctx.axes = _norm_axes(axis, a.ndim)
        ctx.keepdims, ctx.shape, ctx.dtype = keepdims, a.shape, a.dtype
        out = np.sum(a, axis=ctx.axes, keepdims=keepdims)
        return np.asarray(out, dtype=a.dtype if a.dtype.kind == "f" else None)

    @staticmethod
    def backward(ctx, dc):
        g = _expand(dc, ctx.axes, ctx.keepdims)
        return np.broadcast_to(g, ctx.shape).astype(ctx.dtype, copy=True)


class Mean(Function):
    """c = a.mean(axis, keepdims).   da = dc / n broadcast back (n = elements averaged)."""

    @staticmethod
    def forward(ctx, a, axis=None, keepdims=False):
        ctx.axes = _norm_axes(axis, a.ndim)
        ctx.keepdims, ctx.shape, ctx.dtype = keepdims, a.shape, a.dtype
        ctx.n = int(np.prod([a.shape[i] for i in ctx.axes])) if ctx.axes else 1
        with np.errstate(invalid="ignore", divide="ignore"):  # mean over zero elements is nan
            out = np.mean(a, axis=ctx.axes, keepdims=keepdims)
        return np.asarray(out, dtype=a.dtype if a.dtype.kind == "f" else None)

    @staticmethod
    def backward(ctx, dc):
        g = _expand(dc, ctx.axes, ctx.keepdims)
        with np.errstate(divide="ignore", invalid="ignore"):
            g = g / np.asarray(ctx.n, dtype=ctx.dtype)
        return np.broadcast_to(g, ctx.shape).astype(ctx.dtype, copy=True)


class Max(Function):
    """c = a.max(axis, keepdims); the gradient is split evenly among the tied extremes of each
    slice: da = dc * mask / count(mask).

    ``nan="spread"`` (``torch.max`` without dim): a slice holding NaN has max NaN and sends its
    gradient evenly to its NaN entries (mask = a == c, or a and c both NaN).
    ``nan="amax"`` (``torch.amax``): mask = (a == c) only, so in a NaN slice no entry matches,
    count is 0 and every entry of the slice gets dc * 0 / 0 = NaN, as in PyTorch.
    """

    reduce = staticmethod(np.max)

    @staticmethod
    def forward(ctx, a, axis=None, keepdims=False, nan="spread"):
        if nan not in ("spread", "amax"):
            raise ValueError(f'nan must be "spread" or "amax", got {nan!r}')
        ctx.axes = _norm_axes(axis, a.ndim)
        ctx.keepdims, ctx.nan = keepdims, nan
        ck = np.asarray(ctx.fn_cls.reduce(a, axis=ctx.axes, keepdims=True))
        ctx.save_for_backward(a, ck)
        return ck if keepdims else np.squeeze(ck, axis=ctx.axes)

    @staticmethod
    def backward(ctx, dc):
        a, ck = ctx.saved_tensors
        mask = (a == ck)
        if ctx.nan == "spread" and a.dtype.kind == "f":
            mask |= np.isnan(a) & np.isnan(ck)
        count = mask.sum(axis=ctx.axes, keepdims=True)
        g = _expand(dc, ctx.axes, ctx.keepdims)
        with np.errstate(divide="ignore", invalid="ignore"):   # count 0: NaN slice under "amax"
            return (mask * (g / count)).astype(a.dtype, copy=False)


class Min(Max):
    """c = a.min(axis, keepdims); the same gradient rules as ``Max``."""

    reduce = staticmethod(np.min)


class TakeAlongAxis(Function):
    """c = take_along_axis(a, idx, axis) with one index per slice (``idx`` has size 1 on
    ``axis``): the values of ``torch.max(a, dim)``. da = 0 except dc at the taken entry."""

    @staticmethod
    def forward(ctx, a, idx, axis, keepdim=False):
        ctx.idx, ctx.axis, ctx.keepdim, ctx.shape, ctx.dtype = idx, axis, keepdim, a.shape, a.dtype
        c = np.take_along_axis(a, idx, axis=axis)
        return c if keepdim else np.squeeze(c, axis=axis)

    @staticmethod
    def backward(ctx, dc):
        da = np.zeros(ctx.shape, dtype=ctx.dtype)
        g = dc if ctx.keepdim else np.expand_dims(dc, ctx.axis)
        np.put_along_axis(da, ctx.idx, g, axis=ctx.axis)
        return da


# ----------------------------------------------------------------------------- shape
class Reshape(Function):
    """c = a.reshape(shape).   da = dc.reshape(a.shape)."""

    @staticmethod
    @runtime_errors
    def forward(ctx, a, shape):
        ctx.shape = a.shape
        return np.reshape(a, shape)

    @staticmethod
    def backward(ctx, dc):
        return np.reshape(dc, ctx.shape)


class Transpose(Function):
    """c = a.transpose(axes) (None reverses).   da = dc.transpose(argsort(axes))."""

    @staticmethod
    @runtime_errors
    def forward(ctx, a, axes=None):
        axes = tuple(range(a.ndim))[::-1] if axes is None else tuple(int(x) for x in axes)
        out = np.transpose(a, axes)
        ctx.inv = tuple(np.argsort([x % max(a.ndim, 1) for x in axes]))
        return out

    @staticmethod
    def backward(ctx, dc):
        return np.transpose(dc, ctx.inv)


class BroadcastTo(Function):
    """c = np.broadcast_to(a, shape).   da = dc summed back to a.shape."""

    @staticmethod
    @runtime_errors
    def forward(ctx, a, shape):
        ctx.shape, ctx.dtype = a.shape, a.dtype
        return np.broadcast_to(a, shape)

    @staticmethod
    def backward(ctx, dc):
        return unbroadcast(dc, ctx.shape, ctx.dtype)


def _is_basic_index(index) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return all(
        isinstance(i, (slice, numbers.Integral, type(None), type(Ellipsis)))
        and not isinstance(i, bool)
        for i in items
    )


def _is_int(i) -> bool:
    """An integer index: a Python or NumPy int, or a 0-d integer array (a 0-d Tensor's)."""
    return (isinstance(i, numbers.Integral) and not isinstance(i, bool)) or \
        (isinstance(i, np.ndarray) and i.ndim == 0 and i.dtype.kind in "iu")


def torch_index(index) -> tuple:
    """``index`` as PyTorch reads it: two NumPy indexes ``(first, then)``, applied in turn as
    ``a[first][then]``; ``first`` is basic, so ``a[first]`` is a view (setitem writes into it).

    NumPy counts an integer beside an index array as one more index array, and moves the axes
    of index arrays separated by a slice (or ``None``, ``...``) to the front: ``y[0, :, [0, 2]]``
    on a (2, 3, 4) array is (2, 3). PyTorch applies the integers first, each removing its axis,
    and reads the rest as NumPy does: (3, 2). So ``first`` holds the integers (a full slice for
    each axis another entry takes) and ``then`` the other entries. Where NumPy and PyTorch agree
    (no integer, or no array), ``first`` is ``...`` and ``then`` the index itself.
    """
    items = index if isinstance(index, tuple) else (index,)
    if _is_basic_index(items) or not any(_is_int(i) for i in items):
        return (Ellipsis,), index
    first, then = [], []
    for i in items:
        if _is_int(i):
            first.append(int(i))
            continue
        then.append(i)
        if i is Ellipsis:
            first.append(i)
        elif isinstance(i, slice):
            first.append(slice(None))
        elif i is not None:                     # an index array: a bool one takes ndim axes
            a = np.asarray(i)
            first.extend([slice(None)] * (a.ndim if a.dtype == bool else 1))
    return tuple(first) + (() if Ellipsis in first else (Ellipsis,)), tuple(then)


class GetItem(Function):
    """c = a[index], read as PyTorch reads it (``torch_index``).   da = zeros_like(a) with dc
    added at index (np.add.at, so repeated integer indices accumulate)."""

    @staticmethod
    def forward(ctx, a, index):
        ctx.first, ctx.then = torch_index(index)
        ctx.shape, ctx.dtype = a.shape, a.dtype
        return a[ctx.first][ctx.then]

    @staticmethod
    def backward(ctx, dc):
        da = np.zeros(ctx.shape, dtype=ctx.dtype)
        view = da[ctx.first]
        if _is_basic_index(ctx.then):
            view[ctx.then] = dc  # a basic index selects each element at most once
        else:
            np.add.at(view, ctx.then, dc)
        return da


_CATEGORY = {"b": 0, "i": 1, "u": 1, "f": 2}     # bool < integer < floating (PyTorch's categories)


def same_dtype(arrays):
    """``arrays`` cast to ``torch.cat``'s result dtype: the widest dtype of the highest category
    among them (float32 with int64 is float32, where NumPy would give float64)."""
    top = max(_CATEGORY[a.dtype.kind] for a in arrays)
    dtype = np.result_type(*(a.dtype for a in arrays if _CATEGORY[a.dtype.kind] == top))
    return [a.astype(dtype, copy=False) for a in arrays]


class Concatenate(Function):
    """c = np.concatenate(arrays, axis).   da_i = the slice of dc that came from a_i."""

    @staticmethod
    @runtime_errors
    def forward(ctx, *arrays, axis=0):
        arrays = [np.asarray(a) for a in arrays]
        ctx.dtypes = [a.dtype for a in arrays]
        out = np.concatenate(same_dtype(arrays), axis=axis)
        ctx.axis = axis % out.ndim
        ctx.sizes = [a.shape[ctx.axis] for a in arrays]
        return out

    @staticmethod
    def backward(ctx, dc):
        cuts = np.cumsum(ctx.sizes)[:-1]
        parts = np.split(dc, cuts, axis=ctx.axis)
        return tuple(p.astype(t, copy=False) for p, t in zip(parts, ctx.dtypes))


class Stack(Function):
    """c = np.stack(arrays, axis).   da_i = dc taken at position i of the new axis."""

    @staticmethod
    @runtime_errors
    def forward(ctx, *arrays, axis=0):
        arrays = [np.asarray(a) for a in arrays]
        ctx.dtypes = [a.dtype for a in arrays]
        out = np.stack(same_dtype(arrays), axis=axis)
        ctx.axis = axis % out.ndim
        return out

    @staticmethod
    def backward(ctx, dc):
        return tuple(
            np.take(dc, i, axis=ctx.axis).astype(t, copy=False) for i, t in enumerate(ctx.dtypes)
        )


class Where(Function):
    """c = where(cond, a, b).   da = dc where cond else 0, db = dc where not cond else 0."""

    @staticmethod
    @runtime_errors
    def forward(ctx, cond, a, b):
        cond = np.asarray(cond, dtype=bool)
        ctx.save_for_backward(cond)
        ctx.meta = ((np.shape(a), np.asarray(a).dtype), (np.shape(b), np.asarray(b).dtype))
        return np.where(cond, a, b)

    @staticmethod
    def backward(ctx, dc):
        (cond,) = ctx.saved_tensors
        (sa, ta), (sb, tb) = ctx.meta
        _, na, nb = ctx.needs_input_grad
        zero = np.zeros((), dtype=dc.dtype)
        da = unbroadcast(np.where(cond, dc, zero), sa, ta) if na else None
        db = unbroadcast(np.where(cond, zero, dc), sb, tb) if nb else None
        return None, da, db


# ----------------------------------------------------------------------------- functions


def promote(a, b):
    """Cast the operands (Tensors or arrays) of a binary op to PyTorch's result dtype.

    ``torch.result_type``: across categories the higher one's dtype wins (int64 with float32 is
    float32; NumPy would give float64); within a category a 0-d operand takes the dimensioned
    one's dtype (float32 (3,) with a 0-d float64 is float32), and otherwise the op's own NumPy
    promotion gives the wider dtype. A Tensor is cast by ``Cast``, so its gradient flows back.

    Raises:
        TypeError: an operand that is not numeric or bool (a string, None, a complex number).
    """
    if a.dtype.kind not in _CATEGORY or b.dtype.kind not in _CATEGORY:
        raise TypeError(f"unsupported operand dtypes {a.dtype} and {b.dtype}: numeric or bool "
                        "only")
    ca, cb = _CATEGORY[a.dtype.kind], _CATEGORY[b.dtype.kind]
    if ca == cb and (a.ndim == 0) == (b.ndim == 0):
        return a, b
    if ca > cb or (ca == cb and b.ndim == 0):
        return a, _cast(b, a.dtype)
    return _cast(a, b.dtype), b


def _cast(x, dtype):
    return Cast.apply(x, dtype=dtype) if isinstance(x, Tensor) else x.astype(dtype)


def operand(x, like):
    """``x`` as the other operand of a binary op beside ``like``: a Tensor unchanged; a Python or
    NumPy scalar in ``like``'s dtype when ``like`` is a floating Tensor, or an integer Tensor and
    the scalar an integer; a float scalar beside an integer Tensor in float32 (PyTorch's
    default dtype); anything else ``np.asarray(x)``. Then ``promote`` gives the result dtype."""
    if isinstance(x, Tensor):
        return x
    if isinstance(like, Tensor) and isinstance(x, (numbers.Number, np.generic)):
        if like.dtype.kind == "f" or (isinstance(x, numbers.Integral) and like.dtype.kind in "iu"):
            return np.asarray(x, dtype=like.dtype)
        if isinstance(x, float):
            return np.asarray(x, dtype=np.float32)
    return np.asarray(x)


def where(condition, x, y) -> Tensor:
    """Elementwise ``x`` where ``condition`` else ``y``, broadcasting like ``np.where``.

    Args:
        condition: bool array or Tensor (not differentiated).
        x, y: Tensors, arrays or scalars; a scalar beside a Tensor is read by ``operand``
            (a Python float beside an integer Tensor is float32) and the dtypes are promoted
            as PyTorch's (``promote``).

    Returns:
        Tensor of the broadcast shape.

    Raises:
        ValueRuntimeError: shapes that do not broadcast.
    """
    cond = condition.data if isinstance(condition, Tensor) else condition
    like = x if isinstance(x, Tensor) else y
    return Where.apply(cond, *promote(operand(x, like), operand(y, like)))


def maximum(input, other) -> Tensor:
    """Elementwise maximum of two Tensors (or a Tensor and an array or scalar), broadcasting,
    NaN where either is NaN, in PyTorch's result dtype (``torch.maximum``). A tie shares the
    gradient evenly between the two (``Maximum``).

    Raises:
        ValueRuntimeError: shapes that do not broadcast.
    """
    like = input if isinstance(input, Tensor) else other
    return Maximum.apply(*promote(operand(input, like), operand(other, like)))


def minimum(input, other) -> Tensor:
    """Elementwise minimum (``torch.minimum``); as ``maximum``."""
    like = input if isinstance(input, Tensor) else other
    return Minimum.apply(*promote(operand(input, like), operand(other, like)))


def masked_fill(x: Tensor, mask, value: float) -> Tensor:
    """``value`` where ``mask`` (bool, broadcastable to x) is True, else ``x``
    (``torch.Tensor.masked_fill``). The gradient to ``x`` is 0 at masked positions."""
    m = mask.data if isinstance(mask, Tensor) else np.asarray(mask)
    if m.dtype != np.bool_:
        raise TypeError(f"masked_fill: mask must be bool, got {m.dtype}")
    return where(m, value, x)


def concatenate(tensors, axis: int = 0) -> Tensor:
    """Join Tensors along an existing axis, as ``np.concatenate``, in ``torch.cat``'s result
    dtype (``same_dtype``); each input's gradient comes back in its own dtype.

    Raises:
        TypeError: if ``tensors`` is one Tensor rather than a sequence of them.
        ValueError: if ``tensors`` is empty (as ``torch.cat``).
        ValueRuntimeError: shapes that do not match off ``axis``, or 0-d Tensors.
    """
    if isinstance(tensors, Tensor):
        raise TypeError("concatenate: expected a sequence of Tensors, got one Tensor")
    tensors = list(tensors)
    if not tensors:
        raise ValueError("concatenate: need at least one Tensor")
    return Concatenate.apply(*tensors, axis=axis)


def cat(tensors, dim: int = 0) -> Tensor:
    """``concatenate`` under PyTorch's name and keyword (``torch.cat(tensors, dim=0)``)."""
    return concatenate(tensors, axis=dim)


def stack(tensors, axis: int = 0, *, dim=None) -> Tensor:
    """Join same-shape Tensors along a new axis, as ``np.stack``, in ``torch.stack``'s result
    dtype (``same_dtype``); ``dim=`` is PyTorch's name for ``axis``.

    Raises:
        TypeError: if ``tensors`` is one Tensor rather than a sequence of them.
        ValueRuntimeError: if ``tensors`` is empty or shapes differ.
    """
    if isinstance(tensors, Tensor):
        raise TypeError("stack: expected a sequence of Tensors, got one Tensor")
    tensors = list(tensors)
    if not tensors:
        raise ValueRuntimeError("stack: need at least one Tensor")
    return Stack.apply(*tensors, axis=axis if dim is None else dim)


def split(x: Tensor, indices_or_sections, axis: int = 0) -> list:
    """Split ``x`` along ``axis`` into a list of Tensors, as ``np.split`` (each part is a
    differentiable slice).

    Raises:
        ValueError: if an integer number of sections does not divide the axis.
    """
    x = x if isinstance(x, Tensor) else Tensor(x)
    n = x.shape[axis]
    ax = axis % x.ndim
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if k <= 0 or n % k:
            raise ValueError(f"split: array split does not result in an equal division ({n} by {k})")
        bounds = [i * (n // k) for i in range(k + 1)]
    else:
        bounds = [0] + [int(i) for i in indices_or_sections] + [n]
    parts = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        idx = (slice(None),) * ax + (slice(lo, hi),)
        parts.append(x[idx])
    return parts


def broadcast_to(x: Tensor, shape) -> Tensor:
    """Broadcast ``x`` to ``shape`` (``np.broadcast_to``); the gradient is summed back."""
    return BroadcastTo.apply(x, shape=tuple(shape))
