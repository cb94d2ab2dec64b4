"""PyTorch's rules inside the engine: the hooks of ``minigrad/engine.py``, filled.

* **Python floats are float32** (PyTorch's default dtype): ``Tensor(1.5)``, ``Tensor([1.0])``;
  NumPy arrays and scalars keep their dtype.
* **Result dtypes** of a binary operator (``promote``, ``operand``): ``torch.result_type``, not
  NumPy's (float32 with int64 is float32 here, float64 in NumPy).
* **Indexing** (``torch_index``): an integer beside an index array is applied first.
* **Exception types**: NumPy's ValueError for shapes that do not broadcast, multiply, reshape
  or concatenate is raised as ``ValueRuntimeError`` (PyTorch raises RuntimeError).
* **Version counters**: an array saved for backward, modified in place, raises at backward
  instead of giving a silently wrong gradient. Every Tensor carries a ``VersionCounter``,
  shared with the views made from it, that the in-place operations increment (``+=``,
  ``add_``, ``zero_``, ``t[i] = v``, ``t.data -= ...``, an optimizer step). ``applied`` records
  the version of each Tensor whose memory a saved array shares; ``before_backward`` checks them.
* **In-place operations recorded in the graph** (``inplace.py``): a node recorded before
  ``y += z`` keeps reading ``y`` as it was (``inputs``), as PyTorch's graph, whose edges point to
  nodes, not to Tensors.
"""
from __future__ import annotations

import numbers

import numpy as np

try:  # numpy >= 1.25
    from numpy.exceptions import AxisError
except ImportError:  # numpy 1.23, 1.24: only the top-level name (removed from it in numpy 2.0)
    from numpy import AxisError

from .. import engine, ops
from ..engine import Tensor, ValueRuntimeError

_CATEGORY = {"b": 0, "i": 1, "u": 1, "f": 2}     # bool < integer < floating (PyTorch's categories)


class VersionCounter:
    """A mutable integer shared by a Tensor and the views made from it; ``shared`` once it is."""

    __slots__ = ("value", "shared")

    def __init__(self) -> None:
        self.value = 0
        self.shared = False


def _version_counter(t):
    """``t._vc``: its counter, made on first use."""
    vc = t.__dict__.get("_version_counter")
    if vc is None:
        vc = t.__dict__["_version_counter"] = VersionCounter()
    return vc


def _share_counter(t, vc):
    t.__dict__["_version_counter"] = vc


Tensor._vc = property(_version_counter, _share_counter)


def _bump(self) -> None:
    """Increment the version counter: the data changed in place."""
    self._vc.value += 1


Tensor._bump = _bump


def shares_memory(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays may overlap in memory. Two distinct arrays that each own their buffer
    (``base`` is None) never do, which spares ``np.may_share_memory`` for fresh outputs."""
    if a is b:
        return True
    if a.base is None and b.base is None:
        return False
    return bool(a.size and b.size and np.may_share_memory(a, b))


class PyTorchRules(engine.Hooks):
    """The engine's hooks (``minigrad.engine.Hooks``) with PyTorch's rules."""

    def array(self, data, dtype):
        arr = np.asarray(data, dtype=dtype)
        if dtype is None and arr.dtype == np.float64 and not isinstance(data, (np.ndarray, np.generic)):
            arr = arr.astype(np.float32)        # Python floats: float32, as torch.tensor
        return arr

    def operands(self, a, b):
        return promote(a, operand(b, a))

    def inputs(self, ctx):
        """``ctx.inputs`` as they were when ``ctx`` was recorded: an in-place operation recorded
        in the graph (``y += z``) gives ``y`` a new node and keeps ``y`` as it was in
        ``y._before[old node]``; a node recorded before the operation used that one."""
        if any(isinstance(a, Tensor) and a._ctx is not c for a, c in zip(ctx.inputs, ctx.input_ctxs)):
            ctx.inputs = tuple(a._before[c] if isinstance(a, Tensor) and a._ctx is not c else a
                               for a, c in zip(ctx.inputs, ctx.input_ctxs))
            ctx.input_ctxs = [getattr(a, "_ctx", None) for a in ctx.inputs]
        return ctx.inputs

    def applied(self, ctx, result, args):
        for a in args:          # an output that is a view of an input shares its counter
            if isinstance(a, Tensor) and shares_memory(result._data, a._data):
                result._vc = a._vc
                a._vc.shared = True
                break
        if ctx is None:
            return
        ctx.input_ctxs = [a._ctx if isinstance(a, Tensor) else None for a in args]
        # the version of every Tensor (an input, or the output) a saved array shares memory with
        ctx._saved_versions = []
        tensors = [(a, i) for i, a in enumerate(args) if isinstance(a, Tensor)] + [(result, None)]
        for i, a in enumerate(ctx._saved):
            for t, label in (() if a is None else tensors):
                if shares_memory(a, t._data):
                    ctx._saved_versions.append((t._vc, t._vc.value, i, label, a.shape))

    def before_backward(self, ctx):
        """Raise RuntimeError when a Tensor that a saved array of ``ctx`` shares was modified in
        place since ``forward``."""
        for vc, version, i, label, shape in getattr(ctx, "_saved_versions", ()):
            if vc.value != version:
                label = "output" if label is None else f"input {label}"
                raise RuntimeError(
                    f"one of the arrays needed for the gradient of {ctx.fn_cls.__name__} "
                    f"(saved array {i}, shape {shape}, from its {label}) was modified by an "
                    f"in-place operation: it is at version {vc.value}, expected version "
                    f"{version}. Do the in-place update after backward, or compute out of place.")

    def modified(self, t):
        """An in-place change of ``t``'s data (an optimizer step, ``load_state_dict``) bumps its
        version counter."""
        t._bump()

    def forward_error(self, error):
        """NumPy's ValueError for shapes it refuses as ``ValueRuntimeError`` (PyTorch raises
        RuntimeError); an ``AxisError`` stays itself (also an IndexError, as PyTorch's
        "Dimension out of range")."""
        return error if isinstance(error, (AxisError, ValueRuntimeError)) else \
            ValueRuntimeError(str(error))

    def float_dtype(self):
        """PyTorch's default dtype: ``exp``, ``log``, ``/`` of integers or bools give float32."""
        return np.dtype(np.float32)

    def data_set(self, t, old, new):
        """``t.data -= lr * g`` (an in-place update of the same array) bumps the version
        counter, so a backward that saved the old values raises; assigning a new array does not
        (the saved array is untouched), as in PyTorch."""
        if new is old or (new.size and old.size and np.may_share_memory(new, old)):
            t._bump()


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
        return a, cast(b, a.dtype)
    return cast(a, b.dtype), b


def cast(x, dtype):
    """``x`` (a Tensor, through ``Cast`` so that its gradient flows back, or an array) as
    ``dtype``."""
    return ops.Cast.apply(x, dtype=dtype) if isinstance(x, Tensor) else x.astype(dtype)


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


def same_dtype(tensors):
    """``tensors`` cast to ``torch.cat``'s result dtype: the widest dtype of the highest category
    among them (float32 with int64 is float32, where NumPy would give float64)."""
    dtypes = [np.asarray(t.data if isinstance(t, Tensor) else t).dtype for t in tensors]
    top = max(_CATEGORY[d.kind] for d in dtypes)
    dtype = np.result_type(*(d for d in dtypes if _CATEGORY[d.kind] == top))
    return [t if d == dtype else cast(t if isinstance(t, Tensor) else np.asarray(t), dtype)
            for t, d in zip(tensors, dtypes)]


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
    if ops._is_basic_index(items) or not any(_is_int(i) for i in items):
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


engine.hooks = PyTorchRules()
