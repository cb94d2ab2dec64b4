"""Tensor's methods in PyTorch's spellings, and those NumPy's array API has beside the engine's.

The engine's methods (``minigrad/ops.py``: ``reshape``, the operators, ``exp``, ...) take
NumPy's names and arguments. The reductions ``sum``, ``mean``, ``max``, ``min`` and
``transpose`` are defined here, once, in both call forms (``axis=``/``keepdims=`` and
``dim=``/``keepdim=``, ``transpose(dim0, dim1)``, ``max(dim=)`` -> (values, indices)), each
calling the engine's Function (``ops.Sum``, ...); and ``Tensor`` gets the rest of PyTorch's
names (``view``, ``permute``, ``unsqueeze``, ``squeeze``, ``flatten``, ``t``, ``numel``,
``item``, ``clamp``, ``amax``, ``argmax``, ``var``, ``std``, ...), comparisons, conversions,
NumPy interoperation and PyTorch's indexing. Nothing here replaces or wraps a method of the
engine (``ops.attach_to_tensor`` refuses a name Tensor has). Deliberate differences from
PyTorch: docs/pytorch.md.
"""
from __future__ import annotations

import collections
import math
import numbers

import numpy as np

from .. import ops
from ..ops import attach_to_tensor
from ..engine import Tensor, ValueRuntimeError
from .rules import AxisError, operand, promote, same_dtype, torch_index


def floating_only(x, fn):
    """Raise PyTorch's RuntimeError when ``fn`` (mean, var, softmax, ...) is given an integer
    or bool Tensor, whose result dtype PyTorch will not guess."""
    if x.dtype.kind != "f":
        raise RuntimeError(f"{fn}(): an input of dtype {x.dtype}; {fn} takes a floating Tensor "
                           f"(cast first: x.float(), x.double(), x.to(dtype))")


def plain(x):
    """``x``'s array when ``x`` is a Tensor, else ``x`` unchanged."""
    return x.data if isinstance(x, Tensor) else x


def index_arrays(index):
    """Replace Tensors inside an index by their arrays."""
    if isinstance(index, Tensor):
        return index.data
    if isinstance(index, tuple):
        return tuple(i.data if isinstance(i, Tensor) else i for i in index)
    if isinstance(index, list):
        return np.asarray([i.data if isinstance(i, Tensor) else i for i in index])
    return index


def axis_keep(fn, axis, keepdims, dim, keepdim, ndim=None):
    """Merge NumPy's (axis, keepdims) and PyTorch's (dim, keepdim) spellings of one argument;
    a 0-d Tensor (``ndim`` 0) takes the axes 0 and -1, as in PyTorch.

    Raises:
        TypeError: if both ``axis`` and ``dim`` are given.
        AxisError: an axis other than 0 and -1 of a 0-d Tensor.
    """
    if dim is not None:
        if axis is not None:
            raise TypeError(f"{fn}: got both axis= and dim= (the same argument); use one")
        axis = None if isinstance(dim, (tuple, list)) and not dim else dim   # torch: dim=() is all
    if keepdim is not None:
        keepdims = keepdim
    if isinstance(axis, list):
        axis = tuple(axis)
    if ndim == 0 and axis is not None:
        for a in axis if isinstance(axis, tuple) else (axis,):
            if a not in (0, -1):
                raise AxisError(int(a), 0)
        axis = None
    return axis, bool(keepdims)


# The named tuples ``max(dim=...)`` and ``min(dim=...)`` return, as in PyTorch.
MINMAX = {
    "max": collections.namedtuple("max", ["values", "indices"]),
    "min": collections.namedtuple("min", ["values", "indices"]),
}

@attach_to_tensor
class TensorMethods:
    """The operators and methods of ``Tensor`` (copied onto it; not used on its own)."""

    @property
    def size(self) -> int:
        """Number of elements."""
        return self._data.size

    def __len__(self) -> int:
        return len(self._data)

    def numel(self) -> int:
        """Number of elements (PyTorch's name)."""
        return self._data.size

    def numpy(self) -> np.ndarray:
        """Return ``data`` (shared memory, like ``torch.Tensor.numpy``)."""
        return self._data

    def item(self):
        """Return the single element as a Python number.

        Raises:
            ValueRuntimeError: if the Tensor has more than one element (a ValueError, and a
                RuntimeError as in PyTorch).
        """
        if self._data.size != 1:
            raise ValueRuntimeError(f"item() needs a Tensor with one element, got shape "
                                    f"{self.shape}")
        return self._data.item()

    def tolist(self):
        """``data.tolist()``."""
        return self._data.tolist()

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        """Set ``requires_grad`` in place and return self (``torch.Tensor.requires_grad_``).

        Raises:
            TypeError: asking a non-floating Tensor to require grad.
            RuntimeError: turning it off on a non-leaf (use ``detach()``).
        """
        self.requires_grad = requires_grad
        return self

    def __pos__(self):
        return self

    # ------------------------------------------------------- comparisons, conversions, indexing
    def __lt__(self, other):
        return Tensor(self._data < plain(other))

    def __le__(self, other):
        return Tensor(self._data <= plain(other))

    def __gt__(self, other):
        return Tensor(self._data > plain(other))

    def __ge__(self, other):
        return Tensor(self._data >= plain(other))

    def __eq__(self, other):
        return Tensor(self._data == plain(other))

    def __ne__(self, other):
        return Tensor(self._data != plain(other))

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise ValueRuntimeError(
                f"the truth value of a Tensor with {self._data.size} elements is ambiguous; "
                "use .any() on .data or compare element by element"
            )
        return bool(self._data)

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self._data.size != 1 or self._data.dtype.kind not in "iu":
            raise TypeError("only integer Tensors with one element can be used as an index")
        return int(self._data)

    # NumPy interoperation: np.asarray(t) gives t.data; NumPy ufuncs and ndarray operators do not
    # run on Tensors (they would drop the graph): ``ndarray + Tensor`` calls Tensor.__radd__, and
    # ``np.exp(t)`` raises a TypeError (use ``t.exp()``).
    __array_ufunc__ = None
    __array_priority__ = 1000  # ndarray <op> Tensor defers to Tensor's reflected operator

    def __array__(self, dtype=None, copy=None):
        if dtype is not None and dtype != self._data.dtype:
            if copy is False:                   # NumPy 2's protocol: no copy was asked for
                raise ValueError(f"Unable to avoid a copy casting {self.dtype} to {dtype}")
            return self._data.astype(dtype)
        return self._data.copy() if copy else self._data

    def __getitem__(self, index):
        """``self[index]``, read as PyTorch reads it (``rules.torch_index``)."""
        first, then = torch_index(index_arrays(index))
        x = self if first == (Ellipsis,) else ops.GetItem.apply(self, index=first)
        return ops.GetItem.apply(x, index=then)

    # ---------------------------------------------------------------- elementwise
    def pow(self, exponent) -> "Tensor":
        """``self ** exponent`` (``torch.pow``) for a scalar, array or Tensor exponent, in the
        result dtype of the other operators (an integer Tensor to a float power is float32);
        d/dx = exponent * x**(exponent - 1), and d/d(exponent) = x**exponent * log(x), 0 where
        x = 0 and exponent >= 0 (``ops.Pow``).

        Raises:
            ValueRuntimeError: an integer Tensor to a negative integer power ("Integers to
                negative integer powers are not allowed", as NumPy and PyTorch), or shapes that
                do not broadcast.
        """
        return self ** exponent

    def rsqrt(self) -> "Tensor":
        """Elementwise 1 / sqrt(x) (``torch.rsqrt``); d/dx = -1 / (2 x**1.5)."""
        return 1 / self.sqrt()

    def square(self) -> "Tensor":
        """``self * self`` (``torch.square``): an integer Tensor stays integer."""
        return self * self

    # ---------------------------------------------------------------- casts
    def to(self, *args, dtype=None, device=None, copy: bool = False) -> "Tensor":
        """This Tensor in another dtype (``torch.Tensor.to``): ``to(dtype)``, ``to(other)``
        (other's dtype), ``to("cpu")`` (the one device: itself), ``to("cpu", dtype)``. The cast
        is differentiable between floating dtypes; the same dtype returns ``self`` unless
        ``copy``.

        Raises:
            RuntimeError: a device other than "cpu".
            TypeError: anything that is not a dtype, a Tensor or a device.
        """
        for a in args:
            if isinstance(a, Tensor):
                dtype = a.dtype
            elif isinstance(a, str) and a.split(":")[0] in ("cpu", "cuda", "mps", "meta"):
                device = a
            else:
                dtype = a
        if device is not None and str(device).split(":")[0] != "cpu":
            raise RuntimeError(f"to({device!r}): minigrad runs on the CPU only; the one device "
                               f"is 'cpu'")
        try:
            dtype = self.dtype if dtype is None else np.dtype(dtype)
        except TypeError:
            raise TypeError(f"to(): expected a dtype, a Tensor or 'cpu', got {dtype!r}") from None
        if dtype == self.dtype:
            return self.clone() if copy else self
        return self.astype(dtype)

    def float(self) -> "Tensor":
        """``to(float32)`` (``torch.Tensor.float``)."""
        return self.to(np.float32)

    def double(self) -> "Tensor":
        """``to(float64)`` (``torch.Tensor.double``)."""
        return self.to(np.float64)

    def long(self) -> "Tensor":
        """``to(int64)`` (``torch.Tensor.long``); no gradient flows through it."""
        return self.to(np.int64)

    # ---------------------------------------------------------------- logical reductions
    def all(self, dim=None, keepdim: bool = False) -> "Tensor":
        """Whether every entry (over ``dim``) is nonzero (``torch.all``): a bool Tensor, outside
        the graph."""
        return Tensor(np.all(self._data, axis=dim, keepdims=keepdim))

    def any(self, dim=None, keepdim: bool = False) -> "Tensor":
        """Whether some entry (over ``dim``) is nonzero (``torch.any``): a bool Tensor, outside
        the graph."""
        return Tensor(np.any(self._data, axis=dim, keepdims=keepdim))

    def clone(self) -> "Tensor":
        """A copy in new memory that stays in the graph: the gradient passes through unchanged
        (``torch.Tensor.clone``). ``detach()`` is the copy that leaves the graph."""
        return ops.Cast.apply(self, dtype=self.dtype)     # astype copies; its backward is dc

    def clamp(self, min=None, max=None) -> "Tensor":
        """Elementwise ``min(max(x, min), max)`` (``torch.clamp``): NaN stays NaN; ``min > max``
        gives ``max``; the gradient is 1 where ``min < x < max``, else 0 (at the bounds too:
        PyTorch 2.14's rule). An integer Tensor with a float bound gives float32, as PyTorch.

        Args:
            min, max: real scalars or None (no bound); at least one must be given.

        Raises:
            ValueRuntimeError: if both bounds are None.
            TypeError: if a bound is not a real scalar (Tensor bounds are not supported).
        """
        if min is None and max is None:
            raise ValueRuntimeError("clamp: at least one of 'min' or 'max' must not be None")
        for name, b in (("min", min), ("max", max)):
            if b is not None and (isinstance(b, (bool, np.bool_))
                                  or not isinstance(b, (numbers.Real, np.floating, np.integer))):
                raise TypeError(f"clamp: {name} must be a real scalar or None, got "
                                f"{type(b).__name__}")
        x = self
        if self.dtype.kind != "f" and any(isinstance(b, (float, np.floating)) for b in (min, max)):
            x = self.astype(np.float32)     # a float bound, an integer Tensor: float32 (torch)
        return ops.Clamp.apply(x, lo=min, hi=max)

    def maximum(self, other) -> "Tensor":
        """Elementwise maximum with ``other`` (``torch.Tensor.maximum``; ``minigrad.maximum``)."""
        return maximum(self, other)

    def minimum(self, other) -> "Tensor":
        """Elementwise minimum with ``other`` (``torch.Tensor.minimum``; ``minigrad.minimum``)."""
        return minimum(self, other)

    def add(self, other, *, alpha=1) -> "Tensor":
        """``self + alpha * other`` (``torch.Tensor.add``)."""
        return self + (other if alpha == 1 else other * alpha)

    def sub(self, other, *, alpha=1) -> "Tensor":
        """``self - alpha * other`` (``torch.Tensor.sub``)."""
        return self - (other if alpha == 1 else other * alpha)

    def mul(self, other) -> "Tensor":
        """``self * other`` (``torch.Tensor.mul``)."""
        return self * other

    def div(self, other, *, rounding_mode=None) -> "Tensor":
        """``self / other`` (``torch.Tensor.div``); true division only.

        Raises:
            ValueError: a ``rounding_mode`` ("trunc", "floor": not differentiable, not offered).
        """
        if rounding_mode is not None:
            raise ValueError(f"div: rounding_mode={rounding_mode!r} is not supported (true "
                             f"division only; docs/pytorch.md)")
        return self / other

    def neg(self) -> "Tensor":
        """``-self`` (``torch.Tensor.neg``)."""
        return -self

    def matmul(self, other) -> "Tensor":
        """``self @ other`` (``torch.Tensor.matmul``)."""
        return self @ other

    def clip(self, min=None, max=None) -> "Tensor":
        """``clamp`` under NumPy's and PyTorch's other name (``torch.Tensor.clip``)."""
        return self.clamp(min, max)

    def softmax(self, dim, dtype=None) -> "Tensor":
        """``exp(x) / sum(exp(x))`` over ``dim`` (``torch.Tensor.softmax``), built from the
        engine's ops (the fused, hand-derived one is ``layers.functional.softmax``); ``dtype``
        casts the input first."""
        x = self if dtype is None else self.astype(dtype)
        floating_only(x, "softmax")
        e = (x - x.detach().max(axis=dim, keepdims=True)).exp()   # shifted: no overflow
        return e / e.sum(dim=dim, keepdim=True)

    def log_softmax(self, dim, dtype=None) -> "Tensor":
        """``x - log(sum(exp(x)))`` over ``dim`` (``torch.Tensor.log_softmax``), built from the
        engine's ops; ``dtype`` casts the input first."""
        x = self if dtype is None else self.astype(dtype)
        floating_only(x, "log_softmax")
        z = x - x.detach().max(axis=dim, keepdims=True)
        return z - z.exp().sum(dim=dim, keepdim=True).log()

    # ---------------------------------------------------------------- reductions
    # NumPy's keywords (axis, keepdims) and PyTorch's (dim, keepdim) are both accepted.
    def sum(self, axis=None, keepdims: bool = False, *, dim=None, keepdim=None) -> "Tensor":
        """Sum over ``axis``/``dim`` (None, int or tuple; negative allowed), as ``np.sum``."""
        axis, keepdims = axis_keep("sum", axis, keepdims, dim, keepdim, self.ndim)
        return ops.Sum.apply(self, axis=axis, keepdims=keepdims)

    def mean(self, axis=None, keepdims: bool = False, *, dim=None, keepdim=None) -> "Tensor":
        """Mean over ``axis``/``dim`` (None, int or tuple; negative allowed), as ``np.mean``.

        Raises:
            RuntimeError: an integer or bool Tensor (``torch.mean``'s "could not infer output
                dtype": cast first, ``x.float().mean()``)."""
        floating_only(self, "mean")
        axis, keepdims = axis_keep("mean", axis, keepdims, dim, keepdim, self.ndim)
        return ops.Mean.apply(self, axis=axis, keepdims=keepdims)

    def var(self, axis=None, keepdims: bool = False, *, dim=None, keepdim=None,
            correction=1) -> "Tensor":
        """Variance over ``axis``/``dim`` (``torch.var``): ``sum((x - mean)^2) / (N - correction)``
        with N the number of reduced entries. ``correction=1`` (PyTorch's default, Bessel's
        correction) is the unbiased sample variance; ``correction=0`` is NumPy's default
        (``np.var``'s ``ddof=0``). N <= correction divides by 0: inf, or NaN where the sum is 0
        (an empty axis), as in PyTorch.

        Built from the engine's ops (mean, subtract, multiply, sum), so its gradient is theirs:
        ``2 (x - mean) / (N - correction)`` times the upstream gradient.
        """
        floating_only(self, "var")
        axis, keepdims = axis_keep("var", axis, keepdims, dim, keepdim, self.ndim)
        correction = 1 if correction is None else correction      # torch: None means 1
        m = self.mean(axis=axis, keepdims=True)
        d = self - m
        n = math.prod(a for a, b in zip(self.shape, m.shape) if a != b)   # entries per group
        return (d * d).sum(axis=axis, keepdims=keepdims) / max(n - correction, 0)

    def std(self, axis=None, keepdims: bool = False, *, dim=None, keepdim=None,
            correction=1) -> "Tensor":
        """Standard deviation, ``sqrt(var(...))`` with the same arguments (``torch.std``).
        Where the std is 0 its gradient is 0, as torch's ``std_backward`` (not sqrt's 1/0)."""
        v = self.var(axis, keepdims, dim=dim, keepdim=keepdim, correction=correction)
        zero = v.data == 0
        return where(zero, 0.0, where(zero, 1.0, v).sqrt())

    def max(self, axis=None, keepdims: bool = False, *, dim=None, keepdim=None):
        """Maximum, in NumPy's or PyTorch's call form.

        * ``max()`` or ``max(axis=...)``: the values (``np.max``). NaN propagates. The gradient
          is split evenly among the tied maxima of each slice; a slice holding NaN sends its
          whole gradient to its NaN entries (``torch.max``'s full-reduction rule).
        * ``max(dim=d, keepdim=False)``: PyTorch's ``(values, indices)`` named tuple; the index
          is the first maximum (a NaN counts as the maximum) and the gradient goes to that entry
          only, as in ``torch.max(x, dim)``.

        Raises:
            TypeError: both ``axis`` and ``dim`` (or ``keepdims`` and ``keepdim``) given.
        """
        return self._extremum("max", axis, keepdims, dim, keepdim)

    def min(self, axis=None, keepdims: bool = False, *, dim=None, keepdim=None):
        """Minimum; the mirror image of ``max`` (same call forms and gradient rules)."""
        return self._extremum("min", axis, keepdims, dim, keepdim)

    def _extremum(self, name, axis, keepdims, dim, keepdim):
        if dim is not None and self.ndim == 0:      # PyTorch: dim 0 or -1, a 0-d result
            return self.reshape(1)._extremum(name, axis, False, dim, False)
        if dim is not None:
            if axis is not None:
                raise TypeError(f"{name}: got both axis= and dim=; use one")
            keep = bool(keepdims if keepdim is None else keepdim)
            if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
                raise TypeError(f"{name}(dim=...) takes one int dim, got {dim!r}")
            if not -self.ndim <= dim < self.ndim:
                raise AxisError(int(dim), self.ndim)
            d = int(dim) % self.ndim
            arg = np.argmax if name == "max" else np.argmin
            idx = np.expand_dims(arg(self._data, axis=d), d)
            values = TakeAlongAxis.apply(self, idx=idx, axis=d, keepdim=keep)
            return MINMAX[name](values, Tensor(idx if keep else np.squeeze(idx, axis=d)))
        axis, keepdims = axis_keep(name, axis, keepdims, None, keepdim, self.ndim)
        return (ops.Max if name == "max" else ops.Min).apply(self, axis=axis, keepdims=keepdims)

    def amax(self, dim=None, keepdim: bool = False, *, axis=None, keepdims=None) -> "Tensor":
        """Maximum over ``dim`` (None: all, int or tuple) (``torch.amax``): the gradient is split
        evenly among tied maxima; in a slice holding NaN every entry gets a NaN gradient."""
        dim, keepdim = axis_keep("amax", dim, keepdim, axis, keepdims, self.ndim)
        return AMax.apply(self, axis=dim, keepdims=keepdim)

    def amin(self, dim=None, keepdim: bool = False, *, axis=None, keepdims=None) -> "Tensor":
        """Minimum over ``dim`` (``torch.amin``); the gradient rules of ``amax``."""
        dim, keepdim = axis_keep("amin", dim, keepdim, axis, keepdims, self.ndim)
        return AMin.apply(self, axis=dim, keepdims=keepdim)

    def argmax(self, dim=None, keepdim: bool = False, *, axis=None, keepdims=None) -> "Tensor":
        """Index of the first maximum (a NaN counts as the maximum), as an int64 Tensor
        (``torch.argmax``); ``dim=None`` indexes the flattened Tensor. Not differentiable."""
        return self._arg("argmax", np.argmax, dim, keepdim, axis, keepdims)

    def argmin(self, dim=None, keepdim: bool = False, *, axis=None, keepdims=None) -> "Tensor":
        """Index of the first minimum (a NaN counts as the minimum) (``torch.argmin``)."""
        return self._arg("argmin", np.argmin, dim, keepdim, axis, keepdims)

    def _arg(self, name, fn, dim, keepdim, axis, keepdims):
        dim, keepdim = axis_keep(name, dim, keepdim, axis, keepdims)
        if dim is None:
            r = np.asarray(fn(self._data.reshape(-1)))
            return Tensor(r.reshape((1,) * self.ndim) if keepdim else r, dtype=np.int64)
        if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
            raise TypeError(f"{name}: dim must be an int or None, got {dim!r}")
        r = fn(self._data, axis=int(dim), keepdims=bool(keepdim))
        return Tensor(np.asarray(r), dtype=np.int64)

    # ---------------------------------------------------------------- shape
    def view(self, *shape) -> "Tensor":
        """``reshape`` under PyTorch's name (``torch.Tensor.view``): ``view(2, 3)``,
        ``view((2, -1))``. Shares memory when NumPy can reshape without a copy (it copies where
        PyTorch would raise)."""
        return self.reshape(*shape)

    def permute(self, *dims) -> "Tensor":
        """Reorder the axes (``torch.Tensor.permute``): ``permute(2, 0, 1)`` or
        ``permute((2, 0, 1))``; every axis exactly once.

        Raises:
            IndexError: a dim out of range.
            ValueRuntimeError: if ``dims`` is not a permutation of the axes.
        """
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = tuple(dims[0])
        n = max(self.ndim, 1)
        for d in dims:
            if not -n <= d < n:
                raise IndexError(f"permute: dim {d} out of range [{-n}, {n - 1}]")
        if sorted(int(d) % n for d in dims) != list(range(self.ndim)):
            raise ValueRuntimeError(f"permute: dims {dims} are not a permutation of "
                                    f"{self.ndim} axes")
        return ops.Transpose.apply(self, axes=tuple(int(d) for d in dims))

    def unsqueeze(self, dim: int) -> "Tensor":
        """Insert a size-1 axis at ``dim`` (``torch.Tensor.unsqueeze``; -ndim-1 <= dim <= ndim).

        Raises:
            IndexError: ``dim`` out of range.
        """
        n = self.ndim + 1
        if not -n <= dim < n:
            raise IndexError(f"unsqueeze: dim {dim} out of range [{-n}, {n - 1}]")
        shape = list(self.shape)
        shape.insert(dim % n, 1)
        return self.reshape(tuple(shape))

    def squeeze(self, dim=None) -> "Tensor":
        """Remove size-1 axes (``torch.Tensor.squeeze``): all of them (``dim=None``) or those of
        ``dim`` (int or tuple); an axis of ``dim`` whose size is not 1 is kept (PyTorch's rule;
        NumPy would raise).

        Raises:
            IndexError: a ``dim`` out of range.
        """
        if dim is None:
            axes = {i for i, s in enumerate(self.shape) if s == 1}
        else:
            dims = dim if isinstance(dim, (tuple, list)) else (dim,)
            n = max(self.ndim, 1)
            for d in dims:
                if not -n <= d < n:
                    raise IndexError(f"squeeze: dim {d} out of range [{-n}, {n - 1}]")
            axes = {d % n for d in dims if self.ndim and self.shape[d % n] == 1}
        return self.reshape(tuple(s for i, s in enumerate(self.shape) if i not in axes))

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> "Tensor":
        """Merge axes ``start_dim..end_dim`` into one (``torch.Tensor.flatten``); a 0-d Tensor
        becomes shape (1,).

        Raises:
            IndexError: a dim out of range; ValueRuntimeError: start_dim after end_dim.
        """
        if self.ndim == 0:
            return self.reshape(1)
        n = self.ndim
        for d in (start_dim, end_dim):
            if not -n <= d < n:
                raise IndexError(f"flatten: dim {d} out of range [{-n}, {n - 1}]")
        s, e = start_dim % n, end_dim % n
        if s > e:
            raise ValueRuntimeError("flatten: start_dim cannot come after end_dim")
        shape = self.shape[:s] + (int(np.prod(self.shape[s:e + 1])),) + self.shape[e + 1:]
        return self.reshape(shape)

    def t(self) -> "Tensor":
        """Transpose a Tensor of at most 2 axes (``torch.Tensor.t``); 0-d and 1-d unchanged.

        Raises:
            ValueRuntimeError: for 3 or more axes.
        """
        if self.ndim > 2:
            raise ValueRuntimeError(f"t() expects a Tensor with <= 2 dimensions, but this one is "
                             f"{self.ndim}-D; use transpose or permute")
        return self.transpose()

    def dim(self) -> int:
        """Number of axes (``torch.Tensor.dim``; NumPy's ``ndim``)."""
        return self._data.ndim

    def transpose(self, *axes) -> "Tensor":
        """Permute axes, as ``np.transpose``: no arguments reverse them; a tuple or one int per
        axis gives the permutation. Two int arguments ``transpose(dim0, dim1)`` swap those two
        axes, as ``torch.transpose`` (the one NumPy call form this changes is
        ``transpose(0, 1)`` on a 2-D Tensor, an identity in NumPy, a swap here and in PyTorch).
        """
        if len(axes) == 2 and all(isinstance(a, (int, np.integer)) for a in axes):
            return self.swapaxes(int(axes[0]), int(axes[1]))
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        return ops.Transpose.apply(self, axes=axes if axes else None)

    def swapaxes(self, axis1: int, axis2: int) -> "Tensor":
        """Swap two axes, as ``np.swapaxes``.

        Raises:
            IndexError: an axis out of range.
        """
        for a in (axis1, axis2):
            if not -max(self.ndim, 1) <= a < max(self.ndim, 1):
                raise IndexError(f"swapaxes: axis {a} out of range for a {self.ndim}-D Tensor")
        perm = list(range(self.ndim))       # a 0-d Tensor: dims 0 and -1, the identity (torch)
        if perm:
            perm[axis1], perm[axis2] = perm[axis2], perm[axis1]
        return ops.Transpose.apply(self, axes=tuple(perm))

    def broadcast_to(self, shape) -> "Tensor":
        """Broadcast to ``shape``, as ``np.broadcast_to``."""
        return ops.BroadcastTo.apply(self, shape=tuple(shape))

    def expand(self, *sizes) -> "Tensor":
        """``self`` broadcast to ``sizes`` (``torch.Tensor.expand``): -1 keeps an axis's size,
        new axes go in front; the gradient is summed back.

        Raises:
            ValueRuntimeError: sizes ``self`` does not broadcast to, or -1 on a new axis.
        """
        if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
            sizes = tuple(sizes[0])
        lead = len(sizes) - self.ndim
        if lead < 0 or any(s == -1 for s in sizes[:lead]):
            raise ValueRuntimeError(f"expand: the sizes {sizes} do not fit a Tensor of shape "
                                    f"{self.shape}")
        return self.broadcast_to(tuple(self.shape[i - lead] if s == -1 else s
                                       for i, s in enumerate(sizes)))

    def contiguous(self) -> "Tensor":
        """``self`` when its array is C-contiguous, else a contiguous copy in the graph
        (``torch.Tensor.contiguous``)."""
        return self if self._data.flags.c_contiguous else self.reshape(-1).reshape(self.shape)

    def masked_fill(self, mask, value: float) -> "Tensor":
        """Where ``mask`` (bool, broadcastable) is True, ``value``; elsewhere ``self``."""
        return masked_fill(self, mask, value)

    def split(self, indices_or_sections, axis: int = 0):
        """Split along ``axis``, as ``np.split``; returns a list of Tensors."""
        return split(self, indices_or_sections, axis=axis)


# ---------------------------------------------------------------- the Functions of PyTorch's forms
class TakeAlongAxis(ops.Function):
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


class AMax(ops.Max):
    """c = a.amax(axis, keepdims) (``torch.amax``): ``Max`` with ties = (a == c) only, so in a
    slice holding NaN no entry ties, the count is 0 and every entry gets dc * 0 / 0 = NaN."""

    ties = staticmethod(np.equal)


class AMin(AMax):
    """c = a.amin(axis, keepdims) (``torch.amin``); the gradient rule of ``AMax``."""

    reduce = staticmethod(np.min)


# ---------------------------------------------------------------- functions
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
    return ops.Where.apply(cond, *promote(operand(x, like), operand(y, like)))


def maximum(input, other) -> Tensor:
    """Elementwise maximum of two Tensors (or a Tensor and an array or scalar), broadcasting,
    NaN where either is NaN, in PyTorch's result dtype (``torch.maximum``). A tie shares the
    gradient evenly between the two (``Maximum``).

    Raises:
        ValueRuntimeError: shapes that do not broadcast.
    """
    like = input if isinstance(input, Tensor) else other
    return ops.Maximum.apply(*promote(operand(input, like), operand(other, like)))


def minimum(input, other) -> Tensor:
    """Elementwise minimum (``torch.minimum``); as ``maximum``."""
    like = input if isinstance(input, Tensor) else other
    return ops.Minimum.apply(*promote(operand(input, like), operand(other, like)))


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
    return ops.Concatenate.apply(*same_dtype(tensors), axis=axis)


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
    return ops.Stack.apply(*same_dtype(tensors), axis=axis if dim is None else dim)


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
    return ops.BroadcastTo.apply(x, shape=tuple(shape))
