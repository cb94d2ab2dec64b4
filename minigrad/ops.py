"""Primitive operations, each a ``Function`` with its backward rule on one line, and
``Tensor``'s operators and methods built on them (at the end of this file).

Shapes follow NumPy: every binary op broadcasts, and ``unbroadcast`` sums each gradient back to
its input's shape (summing the prepended axes, then the size-1 axes), once, here in the engine
(HIPS/autograd's ``unbroadcast``). Every gradient is cast back to its input's dtype.

Notation: ``c = f(a, b)``, ``dc`` the upstream gradient, ``da``/``db`` what backward returns.
"""
from __future__ import annotations

import numbers

import numpy as np

from . import engine
from .engine import Function, Tensor


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


def _axes(axis, ndim):
    """The axes a reduction ran over (NumPy has checked them), as a tuple of ints >= 0."""
    if axis is None:
        return tuple(range(ndim))
    return tuple(int(a) % ndim for a in (axis if isinstance(axis, tuple) else (axis,)))


def _is_basic_index(index) -> bool:
    """Whether ``index`` holds only slices, integers, None and ``...`` (no index array)."""
    items = index if isinstance(index, tuple) else (index,)
    return all(isinstance(i, (slice, numbers.Integral, type(None), type(Ellipsis)))
               and not isinstance(i, bool) for i in items)


# ----------------------------------------------------------------------------- arithmetic
class Add(Function):
    """c = a + b.   da = dc, db = dc (each summed to its input's shape)."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = _shapes_dtypes(a, b)
        with np.errstate(invalid="ignore", over="ignore"):   # inf + -inf: NaN, no warning
            return np.add(a, b)

    @staticmethod
    def backward(ctx, dc):
        (sa, ta), (sb, tb) = ctx.shapes
        na, nb = ctx.needs_input_grad
        return (unbroadcast(dc, sa, ta) if na else None, unbroadcast(dc, sb, tb) if nb else None)


class Sub(Function):
    """c = a - b.   da = dc, db = -dc."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = _shapes_dtypes(a, b)
        with np.errstate(invalid="ignore", over="ignore"):   # inf - inf: NaN, no warning
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
    def forward(ctx, a, b):
        na, nb = ctx.needs_input_grad
        ctx.save_for_backward(np.asarray(a) if nb else None, np.asarray(b) if na else None)
        ctx.shapes = _shapes_dtypes(a, b)
        with np.errstate(invalid="ignore", over="ignore"):   # 0 * inf: NaN, no warning
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
    def forward(ctx, a, b):
        ctx.save_for_backward(np.asarray(a) if ctx.needs_input_grad[1] else None, np.asarray(b))
        ctx.shapes = _shapes_dtypes(a, b)
        with np.errstate(divide="ignore", invalid="ignore"):   # x / 0: inf or NaN, no warning
            return np.divide(a, b)

    @staticmethod
    def backward(ctx, dc):
        a, b = ctx.saved_tensors
        (sa, ta), (sb, tb) = ctx.shapes
        na, nb = ctx.needs_input_grad
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
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
        with np.errstate(over="ignore"):                # exp(1000) = inf, no warning
            c = np.exp(a)
        ctx.save_for_backward(c)
        return c

    @staticmethod
    def backward(ctx, dc):
        (c,) = ctx.saved_tensors
        with np.errstate(over="ignore", invalid="ignore"):
            return dc * c


class Log(Function):
    """c = log(a).   da = dc / a.   log(0) = -inf, log(-1) = NaN, without a warning."""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(a)

    @staticmethod
    def backward(ctx, dc):
        (a,) = ctx.saved_tensors
        with np.errstate(divide="ignore", invalid="ignore"):
            return dc / a


class Log1p(Function):
    """c = log(1 + a), accurate for small a (``np.log1p``).   da = dc / (1 + a)."""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log1p(a)

    @staticmethod
    def backward(ctx, dc):
        (a,) = ctx.saved_tensors
        with np.errstate(divide="ignore", invalid="ignore"):
            return dc / (1 + a)


class Sqrt(Function):
    """c = sqrt(a).   da = dc / (2 c).   sqrt(-1) = NaN, without a warning."""

    @staticmethod
    def forward(ctx, a):
        with np.errstate(invalid="ignore"):
            c = np.sqrt(a)
        ctx.save_for_backward(c)
        return c

    @staticmethod
    def backward(ctx, dc):
        (c,) = ctx.saved_tensors
        with np.errstate(divide="ignore", invalid="ignore"):
            return dc / (2 * c)


class Sin(Function):
    """c = sin(a).   da = dc * cos(a).   sin(inf) = NaN, without a warning."""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        with np.errstate(invalid="ignore"):
            return np.sin(a)

    @staticmethod
    def backward(ctx, dc):
        (a,) = ctx.saved_tensors
        with np.errstate(invalid="ignore"):
            return dc * np.cos(a)


class Cos(Function):
    """c = cos(a).   da = -dc * sin(a).   cos(inf) = NaN, without a warning."""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        with np.errstate(invalid="ignore"):
            return np.cos(a)

    @staticmethod
    def backward(ctx, dc):
        (a,) = ctx.saved_tensors
        with np.errstate(invalid="ignore"):
            return -dc * np.sin(a)


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
        with np.errstate(invalid="ignore", over="ignore"):   # NaN to an integer, no warning
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
        out = np.sum(a, axis=axis, keepdims=keepdims)
        ctx.axes, ctx.keepdims, ctx.shape, ctx.dtype = _axes(axis, a.ndim), keepdims, a.shape, a.dtype
        return np.asarray(out, dtype=a.dtype if a.dtype.kind == "f" else None)

    @staticmethod
    def backward(ctx, dc):
        g = _expand(dc, ctx.axes, ctx.keepdims)
        return np.broadcast_to(g, ctx.shape).astype(ctx.dtype, copy=True)


class Mean(Function):
    """c = a.mean(axis, keepdims).   da = dc / n broadcast back (n = elements averaged)."""

    @staticmethod
    def forward(ctx, a, axis=None, keepdims=False):
        with np.errstate(invalid="ignore", divide="ignore"):  # mean over zero elements is nan
            out = np.mean(a, axis=axis, keepdims=keepdims)
        ctx.axes, ctx.keepdims, ctx.shape, ctx.dtype = _axes(axis, a.ndim), keepdims, a.shape, a.dtype
        ctx.n = int(np.prod([a.shape[i] for i in ctx.axes]))
        return np.asarray(out, dtype=a.dtype if a.dtype.kind == "f" else None)

    @staticmethod
    def backward(ctx, dc):
        g = _expand(dc, ctx.axes, ctx.keepdims)
        with np.errstate(divide="ignore", invalid="ignore"):
            g = g / np.asarray(ctx.n, dtype=ctx.dtype)
        return np.broadcast_to(g, ctx.shape).astype(ctx.dtype, copy=True)


class Max(Function):
    """c = a.max(axis, keepdims).   da = dc * tie / count(tie) with tie = (a == c): the gradient
    is split evenly among the tied extremes of each slice. A slice holding NaN has max NaN, and
    its NaN entries are its ties (``torch.max``'s rule; ``torch.amax`` gives NaN gradients:
    ``pytorch_compat``'s ``AMax``)."""

    reduce = staticmethod(np.max)

    @staticmethod
    def ties(a, c):
        """Where ``a`` equals the extreme ``c`` of its slice, NaN equal to NaN."""
        return (a == c) | (np.isnan(a) & np.isnan(c)) if a.dtype.kind == "f" else a == c

    @staticmethod
    def forward(ctx, a, axis=None, keepdims=False):
        ck = np.asarray(ctx.fn_cls.reduce(a, axis=axis, keepdims=True))
        ctx.axes, ctx.keepdims = _axes(axis, a.ndim), keepdims
        ctx.save_for_backward(a, ck)
        return ck if keepdims else np.squeeze(ck, axis=ctx.axes)

    @staticmethod
    def backward(ctx, dc):
        a, ck = ctx.saved_tensors
        tie = ctx.fn_cls.ties(a, ck)
        count = tie.sum(axis=ctx.axes, keepdims=True)
        g = _expand(dc, ctx.axes, ctx.keepdims)
        with np.errstate(divide="ignore", invalid="ignore"):   # count 0: NaN (amax's NaN slice)
            return (tie * (g / count)).astype(a.dtype, copy=False)


class Min(Max):
    """c = a.min(axis, keepdims); the same gradient rules as ``Max``."""

    reduce = staticmethod(np.min)


# ----------------------------------------------------------------------------- shape
class Reshape(Function):
    """c = a.reshape(shape).   da = dc.reshape(a.shape)."""

    @staticmethod
    def forward(ctx, a, shape):
        ctx.shape = a.shape
        return np.reshape(a, shape)

    @staticmethod
    def backward(ctx, dc):
        return np.reshape(dc, ctx.shape)


class Transpose(Function):
    """c = a.transpose(axes) (None reverses).   da = dc.transpose(argsort(axes))."""

    @staticmethod
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
    def forward(ctx, a, shape):
        ctx.shape, ctx.dtype = a.shape, a.dtype
        return np.broadcast_to(a, shape)

    @staticmethod
    def backward(ctx, dc):
        return unbroadcast(dc, ctx.shape, ctx.dtype)


class GetItem(Function):
    """c = a[index] (NumPy's indexing).   da = zeros_like(a) with dc added at index (np.add.at,
    so an entry selected twice by repeated integer indices gets both gradients)."""

    @staticmethod
    def forward(ctx, a, index):
        ctx.index, ctx.shape, ctx.dtype = index, a.shape, a.dtype
        return a[index]

    @staticmethod
    def backward(ctx, dc):
        da = np.zeros(ctx.shape, dtype=ctx.dtype)
        if _is_basic_index(ctx.index):
            da[ctx.index] = dc  # slices and integers select each element at most once
        else:
            np.add.at(da, ctx.index, dc)
        return da


class Concatenate(Function):
    """c = np.concatenate(arrays, axis).   da_i = the slice of dc that came from a_i."""

    @staticmethod
    def forward(ctx, *arrays, axis=0):
        arrays = [np.asarray(a) for a in arrays]
        ctx.dtypes = [a.dtype for a in arrays]
        out = np.concatenate(arrays, axis=axis)
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
    def forward(ctx, *arrays, axis=0):
        arrays = [np.asarray(a) for a in arrays]
        ctx.dtypes = [a.dtype for a in arrays]
        out = np.stack(arrays, axis=axis)
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


# ----------------------------------------------------------------------------- Tensor's methods
def _operands(a, b):
    """Both sides of a binary operator, as the engine's hook casts them (``engine.Hooks``:
    unchanged here, PyTorch's result dtype once ``minigrad.pytorch_compat`` is imported)."""
    return engine.hooks.operands(a, b)


def _floating(x):
    """``x`` (a Tensor or an array) as the input of a float function: unchanged when floating,
    else cast to the engine hook's float dtype (``engine.Hooks.float_dtype``: NumPy's float64
    here, PyTorch's default float32 once ``minigrad.pytorch_compat`` is imported), through
    ``Cast`` for a Tensor."""
    if x.dtype.kind == "f":
        return x
    dtype = engine.hooks.float_dtype()
    return Cast.apply(x, dtype=dtype) if isinstance(x, Tensor) else np.asarray(x, dtype=dtype)


# What every class body defines and a Tensor must not take over; ``__hash__`` too: a class
# that defines ``__eq__`` gets ``__hash__ = None``, and a Tensor keeps object's hash.
_CLASS_BOOKKEEPING = {"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__",
                      "__firstlineno__", "__static_attributes__", "__hash__"}


def attach_to_tensor(cls):
    """Class decorator: copy the methods and properties that ``cls`` defines onto ``Tensor``.
    It adds and never replaces, so each of Tensor's methods is defined once, where it runs.

    Raises:
        TypeError: if ``Tensor`` already has one of the names (defined in engine.py or by an
            earlier class)."""
    for name, value in vars(cls).items():
        if name not in _CLASS_BOOKKEEPING:
            if name in vars(Tensor):
                raise TypeError(f"{cls.__name__}.{name}: Tensor already defines {name}")
            setattr(Tensor, name, value)
    return cls


@attach_to_tensor
class TensorOps:
    """The operators and methods of ``Tensor``, each a call of a Function above, copied onto
    ``Tensor`` (``engine.py`` knows no operation). The reductions (``sum``, ``mean``, ``max``,
    ``min``) and ``transpose``, whose call forms PyTorch's users rely on (``dim=``,
    ``max(dim)`` -> values and indices, ``transpose(dim0, dim1)``), are left to
    ``minigrad.pytorch_compat.methods``, which calls ``Sum``, ``Mean``, ``Max``, ``Min`` and
    ``Transpose`` above."""

    def __add__(self, other):
        return Add.apply(*_operands(self, other))

    def __radd__(self, other):
        return Add.apply(*_operands(self, other)[::-1])

    def __sub__(self, other):
        return Sub.apply(*_operands(self, other))

    def __rsub__(self, other):
        return Sub.apply(*_operands(self, other)[::-1])

    def __mul__(self, other):
        return Mul.apply(*_operands(self, other))

    def __rmul__(self, other):
        return Mul.apply(*_operands(self, other)[::-1])

    def __truediv__(self, other):       # true division: integers divide as floats
        return Div.apply(*map(_floating, _operands(self, other)))

    def __rtruediv__(self, other):
        return Div.apply(*map(_floating, _operands(self, other)[::-1]))

    def __matmul__(self, other):
        return MatMul.apply(*_operands(self, other))

    def __rmatmul__(self, other):
        return MatMul.apply(*_operands(self, other)[::-1])

    def __pow__(self, exponent):
        return Pow.apply(*_operands(self, exponent))

    def __rpow__(self, base):
        return Pow.apply(*_operands(self, base)[::-1])

    def __neg__(self):
        return Neg.apply(self)

    # the float functions: an integer or bool Tensor is cast to a float first (``_floating``)
    def exp(self) -> Tensor:
        """Elementwise e**x."""
        return Exp.apply(_floating(self))

    def log(self) -> Tensor:
        """Elementwise natural logarithm."""
        return Log.apply(_floating(self))

    def log1p(self) -> Tensor:
        """Elementwise log(1 + x), accurate for small x."""
        return Log1p.apply(_floating(self))

    def sqrt(self) -> Tensor:
        """Elementwise square root."""
        return Sqrt.apply(_floating(self))

    def sin(self) -> Tensor:
        """Elementwise sine (radians)."""
        return Sin.apply(_floating(self))

    def cos(self) -> Tensor:
        """Elementwise cosine (radians)."""
        return Cos.apply(_floating(self))

    def tanh(self) -> Tensor:
        """Elementwise tanh."""
        return Tanh.apply(_floating(self))

    def sigmoid(self) -> Tensor:
        """Elementwise logistic sigmoid 1 / (1 + e**-x), stable for large |x|."""
        return Sigmoid.apply(_floating(self))

    def relu(self) -> Tensor:
        """Elementwise max(x, 0); gradient 0 at x = 0 (PyTorch's convention)."""
        return Relu.apply(self)

    def abs(self) -> Tensor:
        """Elementwise |x|; gradient sign(x), 0 at x = 0 and at NaN (``torch.abs``)."""
        return Abs.apply(self)

    def astype(self, dtype) -> Tensor:
        """Cast to ``dtype`` (differentiable between floating dtypes)."""
        return Cast.apply(self, dtype=np.dtype(dtype))

    def reshape(self, *shape) -> Tensor:
        """Reshape, as ``np.reshape``: ``reshape(2, 3)`` or ``reshape((2, 3))``."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return Reshape.apply(self, shape=shape)

    @property
    def T(self) -> Tensor:
        """All axes reversed (``np.ndarray.T``)."""
        return Transpose.apply(self)
