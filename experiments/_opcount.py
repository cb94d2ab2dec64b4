"""Count the FLOPs and the memory traffic of NumPy code by running it on traced arrays.

``trace(fn, *arrays)`` calls ``fn`` on views of ``arrays`` whose every NumPy operation (ufunc
calls, ufunc reductions such as those inside ``mean``/``sum``, and ``np.einsum``) is executed
normally and recorded. The counts therefore come from the code's own operations, line by line;
change the code and the counts change with it.

Counting model (stated once, used everywhere):

- FLOPs: an elementwise ufunc (``+ - * / sqrt``, ...) costs one FLOP per output element; a
  reduction of n elements into m results (``add.reduce``, the sum inside ``mean``) costs n - m
  additions; ``mean`` is that sum plus one division per result, which NumPy performs as a
  separate ufunc call and is counted as such; ``np.einsum`` costs (operands - 1) multiplications
  per point of its iteration space plus (space - output size) additions.
- Bytes (unfused, NumPy's own execution): every operation reads each of its array operands once
  and writes its result once (``nbytes``); Python and NumPy scalars are free. A small operand
  broadcast against a large one (a per-row ``rstd``, a (C,) ``weight``) counts its own size, as
  if it stayed in cache. Caches are otherwise ignored, so for arrays that fit in cache this
  overstates the traffic to main memory.
- Reshapes and views are free: they move no data.
"""
from __future__ import annotations

import math
from typing import Callable, List, NamedTuple, Tuple

import numpy as np

__all__ = ["OpRecord", "trace", "totals"]


class OpRecord(NamedTuple):
    """One recorded NumPy operation: its name, FLOPs, bytes read and bytes written."""

    name: str
    flops: int
    bytes_read: int
    bytes_written: int


_LOG: List[List[OpRecord]] = []  # a stack of active traces


def _raw(a):
    return a.view(np.ndarray) if isinstance(a, _Traced) else a


def _nbytes(a) -> int:
    return int(a.nbytes) if isinstance(a, np.ndarray) and a.ndim > 0 else 0


def _record(rec: OpRecord) -> None:
    if _LOG:
        _LOG[-1].append(rec)


class _Traced(np.ndarray):
    """An ndarray view whose operations are computed on plain arrays and recorded."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        raw_inputs = [_raw(a) for a in inputs]
        out = kwargs.get("out")
        if out is not None:
            kwargs["out"] = tuple(_raw(o) for o in out)
        result = getattr(ufunc, method)(*raw_inputs, **kwargs)
        first = result[0] if isinstance(result, tuple) else result
        out_size = int(np.size(first))
        if method == "__call__":
            flops = out_size * (len(result) if isinstance(result, tuple) else 1)
        elif method == "reduce":
            flops = int(np.size(raw_inputs[0])) - out_size
        else:
            raise NotImplementedError(f"opcount: ufunc method {method!r} is not counted")
        name = ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}"
        _record(OpRecord(name, flops, sum(_nbytes(a) for a in raw_inputs), _nbytes(first)))
        if out is not None:
            return out[0] if len(out) == 1 else out
        if isinstance(result, np.ndarray) and result.ndim > 0:
            return result.view(_Traced)
        return result

    def __array_function__(self, func, types, args, kwargs):
        if func is np.einsum:
            return _einsum(*args, **kwargs)
        return super().__array_function__(func, types, args, kwargs)


def _einsum(subscripts: str, *operands, **kwargs):
    raw = [_raw(a) for a in operands]
    result = np.einsum(subscripts, *raw, **kwargs)
    inputs = subscripts.replace(" ", "").split("->")[0].split(",")
    sizes = {}
    for letters, a in zip(inputs, raw):
        for letter, n in zip(letters, a.shape):
            sizes[letter] = n
    space = math.prod(sizes.values())
    out_size = int(np.size(result))
    flops = (len(raw) - 1) * space + (space - out_size)
    _record(OpRecord(f"einsum {subscripts}", flops, sum(_nbytes(a) for a in raw),
                     _nbytes(result)))
    return result.view(_Traced) if isinstance(result, np.ndarray) and result.ndim else result


def trace(fn: Callable, *arrays) -> Tuple[object, List[OpRecord]]:
    """Run ``fn(*arrays)`` with every ndarray argument traced; return (its result, the records).

    Args:
        fn: a function of NumPy arrays (positional). Non-array arguments pass through; arrays
            inside tuples (a ``cache``) are traced too.
        arrays: its arguments.

    Returns:
        ``(result, records)``: ``fn``'s return value (arrays as traced views, same values) and
        the list of ``OpRecord`` in execution order.

    Raises:
        NotImplementedError: ``fn`` uses a ufunc method other than a call or ``reduce``.
    """
    def wrap(a):
        if isinstance(a, np.ndarray):
            return a.view(_Traced)
        if isinstance(a, tuple):
            return tuple(wrap(x) for x in a)
        return a

    _LOG.append([])
    try:
        result = fn(*[wrap(a) for a in arrays])
    finally:
        records = _LOG.pop()
    return result, records


def totals(records: List[OpRecord]) -> dict:
    """Sum of ``flops``, ``bytes_read`` and ``bytes_written`` over records (``int`` each)."""
    return {"flops": sum(r.flops for r in records),
            "bytes_read": sum(r.bytes_read for r in records),
            "bytes_written": sum(r.bytes_written for r in records)}
