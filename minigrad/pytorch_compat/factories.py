"""Tensor factories under PyTorch's names: ``tensor``, ``zeros``, ``ones``, ``full``, ``zeros_like``,
``ones_like``, ``randn``, ``randint``, ``arange``.

As in PyTorch, floating factories default to float32 (``torch.get_default_dtype()``), and so do
Python floats given to ``tensor`` or ``Tensor``; NumPy arrays keep their dtype. Random numbers
come from a ``numpy.random.Generator`` passed as ``generator`` (PyTorch's keyword), so a run is
reproducible without global state.
"""
from __future__ import annotations

import math
import numbers
from typing import Optional

import numpy as np

from ..engine import Tensor, ValueRuntimeError

__all__ = ["tensor", "zeros", "ones", "full", "zeros_like", "ones_like", "randn", "rand", "randint",
           "arange"]

DEFAULT_DTYPE = np.dtype(np.float32)


def _size(size, fn: str) -> tuple:
    """``f(2, 3)`` and ``f((2, 3))`` both mean shape (2, 3)."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    for s in size:
        if isinstance(s, bool) or not isinstance(s, numbers.Integral) or s < 0:
            raise ValueRuntimeError(f"{fn}: sizes must be integers >= 0, got {size!r}")
    return tuple(int(s) for s in size)


def _dtype(dtype) -> np.dtype:
    return DEFAULT_DTYPE if dtype is None else np.dtype(dtype)


def tensor(data, dtype=None, requires_grad: bool = False) -> Tensor:
    """A new leaf Tensor holding a copy of ``data`` (``torch.tensor``).

    Args:
        data: array-like or Tensor (copied; a Tensor's graph is not kept). Python floats give
            float32, Python ints int64, NumPy arrays keep their dtype (as ``Tensor``).
        dtype: optional dtype to convert to.
        requires_grad (bool): make it a leaf that requires grad.

    Raises:
        TypeError: non-numeric data, or requires_grad with a non-floating dtype.
    """
    t = Tensor(data.data if isinstance(data, Tensor) else data, dtype=dtype)
    return Tensor(t.data.copy(), requires_grad=requires_grad)


def zeros(*size, dtype=None, requires_grad: bool = False) -> Tensor:
    """A Tensor of zeros (``torch.zeros``): ``zeros(2, 3)`` or ``zeros((2, 3))``.

    Args:
        *size: the shape, as integers or one tuple.
        dtype: default float32 (PyTorch's default dtype).
        requires_grad (bool): make it a leaf that requires grad.

    Raises:
        ValueRuntimeError: a negative or non-integer size.
        TypeError: requires_grad with a non-floating dtype.
    """
    return Tensor(np.zeros(_size(size, "zeros"), dtype=_dtype(dtype)), requires_grad=requires_grad)


def ones(*size, dtype=None, requires_grad: bool = False) -> Tensor:
    """A Tensor of ones (``torch.ones``); arguments as ``zeros``."""
    return Tensor(np.ones(_size(size, "ones"), dtype=_dtype(dtype)), requires_grad=requires_grad)


def full(size, fill_value, *, dtype=None, requires_grad: bool = False) -> Tensor:
    """A Tensor of ``size`` filled with ``fill_value`` (``torch.full``): the dtype, when not
    given, follows the value as PyTorch's does: a bool gives bool, an integer int64, a float
    float32.

    Raises:
        ValueRuntimeError: a negative or non-integer size.
        TypeError: a fill value that is not a real number or bool; requires_grad with a
            non-floating dtype.
    """
    if not isinstance(fill_value, (numbers.Real, np.bool_)):
        raise TypeError(f"full: fill_value must be a number, got {type(fill_value).__name__}")
    if dtype is None:
        dtype = (np.bool_ if isinstance(fill_value, (bool, np.bool_)) else np.int64
                 if isinstance(fill_value, numbers.Integral) else DEFAULT_DTYPE)
    shape = _size(size if isinstance(size, (tuple, list)) else (size,), "full")
    return Tensor(np.full(shape, fill_value, dtype=dtype), requires_grad=requires_grad)


def zeros_like(input: Tensor, dtype=None, requires_grad: bool = False) -> Tensor:
    """Zeros of ``input``'s shape and (unless ``dtype`` is given) dtype (``torch.zeros_like``).

    Raises:
        TypeError: requires_grad with a non-floating dtype.
    """
    a = input.data if isinstance(input, Tensor) else np.asarray(input)
    return Tensor(np.zeros(a.shape, dtype=a.dtype if dtype is None else dtype),
                  requires_grad=requires_grad)


def ones_like(input: Tensor, dtype=None, requires_grad: bool = False) -> Tensor:
    """Ones of ``input``'s shape and (unless ``dtype`` is given) dtype (``torch.ones_like``);
    errors as ``zeros_like``."""
    a = input.data if isinstance(input, Tensor) else np.asarray(input)
    return Tensor(np.ones(a.shape, dtype=a.dtype if dtype is None else dtype),
                  requires_grad=requires_grad)


def randn(*size, generator: Optional[np.random.Generator] = None, dtype=None,
          requires_grad: bool = False) -> Tensor:
    """Standard normal samples (``torch.randn``).

    Args:
        *size: the shape, as integers or one tuple.
        generator: a ``numpy.random.Generator`` (e.g. ``np.random.default_rng(0)``) for
            reproducible draws; None draws from a fresh, unseeded Generator.
        dtype: default float32; must be floating.
        requires_grad (bool): make it a leaf that requires grad.

    Raises:
        TypeError: a generator that is not a ``numpy.random.Generator``, or a non-floating dtype.
        ValueRuntimeError: a negative or non-integer size.
    """
    return _random("randn", size, generator, dtype, requires_grad)


def _random(fn, size, generator, dtype, requires_grad):
    """``randn``'s and ``rand``'s draw, after their checks."""
    shape, dt = _size(size, fn), _dtype(dtype)
    if dt.kind != "f":
        raise TypeError(f"{fn}: dtype must be floating, got {dt}")
    if generator is None:
        generator = np.random.default_rng()
    if not isinstance(generator, np.random.Generator):
        raise TypeError(f"{fn}: generator must be a numpy.random.Generator, got "
                        f"{type(generator).__name__}")
    draw = generator.standard_normal if fn == "randn" else generator.random
    return Tensor(draw(shape).astype(dt), requires_grad=requires_grad)


def rand(*size, generator: Optional[np.random.Generator] = None, dtype=None,
         requires_grad: bool = False) -> Tensor:
    """Samples uniform on [0, 1) (``torch.rand``); the arguments and errors of ``randn``."""
    return _random("rand", size, generator, dtype, requires_grad)


def randint(low, high=None, size=None, *, generator: Optional[np.random.Generator] = None,
            dtype=None) -> Tensor:
    """Integers drawn uniformly from [low, high) (``torch.randint``): ``randint(high, size)`` or
    ``randint(low, high, size)``; int64 unless ``dtype`` is given.

    Args:
        low, high: integer bounds, low < high (``randint(10, (3,))`` draws from [0, 10)).
        size: the shape, a tuple of integers.
        generator: a ``numpy.random.Generator`` for reproducible draws; None: a fresh one.

    Raises:
        TypeError: no size, or a generator that is not a ``numpy.random.Generator``.
        ValueRuntimeError: low >= high, or a negative or non-integer size.
    """
    if size is None:                    # randint(high, size)
        low, high, size = 0, low, high
    if size is None:
        raise TypeError("randint: missing the size, e.g. randint(10, (3,)) or randint(0, 10, (3,))")
    if not low < high:
        raise ValueRuntimeError(f"randint: expected low < high, got low={low}, high={high}")
    shape = _size(size if isinstance(size, (tuple, list)) else (size,), "randint")
    if generator is None:
        generator = np.random.default_rng()
    if not isinstance(generator, np.random.Generator):
        raise TypeError(f"randint: generator must be a numpy.random.Generator, got "
                        f"{type(generator).__name__}")
    return Tensor(generator.integers(low, high, shape).astype(dtype or np.int64))


def arange(start, end=None, step=1, *, dtype=None, requires_grad: bool = False) -> Tensor:
    """Evenly spaced values in [start, end) (``torch.arange``): ``arange(5)``, ``arange(1, 4)``,
    ``arange(0, 1, 0.25)``.

    The dtype, when not given, is int64 if start, end and step are all integers, else float32
    (PyTorch's rule; ``np.arange`` would give float64).

    Raises:
        ValueRuntimeError: step 0, a NaN or infinite bound, ``end`` on the wrong side of
            ``start`` for the sign of ``step`` (as PyTorch), or values that do not fit in an
            integer ``dtype`` (``arange(2**33, dtype=np.int32)``).
        TypeError: a non-real argument.
    """
    if end is None:
        start, end = 0, start
    for name, v in (("start", start), ("end", end), ("step", step)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError(f"arange: {name} must be a real number, got {v!r}")
    if step == 0:
        raise ValueRuntimeError("arange: step must be nonzero")
    if not (math.isfinite(start) and math.isfinite(end)):
        raise ValueRuntimeError(f"arange: unsupported range: {start} -> {end}")
    if (end - start) * step < 0:
        raise ValueRuntimeError(f"arange: upper bound and lower bound inconsistent with step "
                                f"sign ({start} -> {end} by {step})")
    if dtype is None:
        ints = all(isinstance(v, numbers.Integral) for v in (start, end, step))
        dtype = np.int64 if ints else DEFAULT_DTYPE
    dt = np.dtype(dtype)
    # count as PyTorch does (ceil((end - start) / step) in double)
    n = math.ceil((end - start) / step)
    if dt.kind == "f":                          # computed in float64, then cast
        data = (start + step * np.arange(n, dtype=np.float64)).astype(dt)
    else:
        info, last = np.iinfo(dt), start + (n - 1) * step if n else start
        if not (info.min <= min(start, last) and max(start, last) <= info.max):
            raise ValueRuntimeError(f"arange: values {start} .. {last} overflow {dt} "
                                    f"([{info.min}, {info.max}])")
        data = np.arange(start, end, step, dtype=dt)
    return Tensor(data, requires_grad=requires_grad)
