"""Small helpers shared by ``tensor.py`` and ``_inplace.py``; this module imports neither.

``TensorBase`` is the first base class of every ``Tensor``: it lets the helpers here and the
in-place methods recognise a Tensor without importing ``tensor.py`` (which imports them).
"""
from __future__ import annotations

import collections

import numpy as np


class TensorBase:
    """Marker base class of ``minigrad.Tensor``; ``isinstance(x, TensorBase)`` means "x is a
    Tensor". It has no state and no methods."""

    __slots__ = ()


def is_float_dtype(dtype) -> bool:
    """Whether ``dtype`` is a floating dtype (the only dtypes that may require grad)."""
    return np.issubdtype(dtype, np.floating)


def plain(x):
    """``x``'s array when ``x`` is a Tensor, else ``x`` unchanged."""
    return x.data if isinstance(x, TensorBase) else x


def index_arrays(index):
    """Replace Tensors inside an index by their arrays."""
    if isinstance(index, TensorBase):
        return index.data
    if isinstance(index, tuple):
        return tuple(i.data if isinstance(i, TensorBase) else i for i in index)
    if isinstance(index, list):
        return np.asarray([i.data if isinstance(i, TensorBase) else i for i in index])
    return index


def axis_keep(fn, axis, keepdims, dim, keepdim):
    """Merge NumPy's (axis, keepdims) and PyTorch's (dim, keepdim) spellings of one argument.

    Raises:
        TypeError: if both ``axis`` and ``dim`` are given.
    """
    if dim is not None:
        if axis is not None:
            raise TypeError(f"{fn}: got both axis= and dim= (the same argument); use one")
        axis = dim
    if keepdim is not None:
        keepdims = keepdim
    if isinstance(axis, list):
        axis = tuple(axis)
    return axis, bool(keepdims)


# The named tuples ``max(dim=...)`` and ``min(dim=...)`` return, as in PyTorch.
MINMAX = {
    "max": collections.namedtuple("max", ["values", "indices"]),
    "min": collections.namedtuple("min", ["values", "indices"]),
}
