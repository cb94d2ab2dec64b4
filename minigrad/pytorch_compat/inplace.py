"""In-place operations on a Tensor and the version counter they bump (PyTorch's rules).

``Tensor`` gets these methods (copied onto it by ``@attach_to_tensor`` when ``minigrad`` is
imported): ``zero_``, ``fill_``, ``copy_``, ``add_``, ``sub_``, ``mul_``, ``div_``, the augmented operators ``+=``, ``-=``, ``*=``, ``/=``, ``**=`` and item
assignment ``t[i] = v``. Each writes into the same array and increments the Tensor's version
counter (``rules.VersionCounter``, shared with the views made from it), so a backward
that saved the old values raises instead of computing a wrong gradient.

As in PyTorch, an in-place op is refused on a leaf that requires grad while grad mode is on
(an optimizer step runs under ``no_grad``), and recorded in the graph on a non-leaf (or with an
operand that requires grad): ``y += z`` computes ``y_before + z`` with the ordinary Functions
on a copy of ``y`` that keeps its history (``y_before``), writes the result into ``y``'s array,
bumps the version and gives ``y`` the new node. A node recorded before the op still reads
``y_before`` (``rules.PyTorchRules.inputs``); one that saved ``y``'s old values raises at backward,
as in PyTorch. A Tensor that shares its memory with another (a view, ``detach``) is refused
there: the other Tensor's graph would not see the op (docs/pytorch.md).
"""
from __future__ import annotations

import numbers
import operator
from typing import Any

import numpy as np

from ..ops import attach_to_tensor
from ..engine import Tensor, ValueRuntimeError, is_grad_enabled
from .methods import index_arrays, plain, where
from .rules import torch_index

# The out-of-place operator that gives what each in-place ufunc writes, for the graph.
_OUT_OF_PLACE = {np.add: operator.add, np.subtract: operator.sub, np.multiply: operator.mul,
                 np.divide: operator.truediv, np.power: operator.pow}


@attach_to_tensor
class InplaceOps:
    """The in-place methods of ``minigrad.Tensor`` (copied onto it; not used on its own)."""

    def _check_inplace(self, op: str, *operands: Any) -> bool:
        """Whether ``op`` must be recorded in the graph; RuntimeError where it may not run in
        place (see the module docstring)."""
        if not is_grad_enabled():
            return False
        if self._requires_grad and self._ctx is None:
            raise RuntimeError(
                f"{op}: a leaf Variable that requires grad is being used in an in-place "
                "operation. Wrap the update in minigrad.no_grad() (as an optimizer step does)."
            )
        record = self._requires_grad or any(isinstance(o, Tensor) and o._requires_grad
                                            for o in operands)
        if record and self._vc.shared:
            raise RuntimeError(
                f"{op}: in-place operation, recorded in the graph, on a Tensor that shares its "
                "memory with another (a view, or detach()): the other's graph would not see "
                "it. Write y = y + z (out of place), or wrap the update in minigrad.no_grad()."
            )
        return record

    def _record(self, compute) -> "Tensor":
        """Run the op out of place, ``compute(before)``, on a copy of self that keeps its
        history; write the result into self's array and give self the op's node."""
        before = Tensor(self._data.copy())
        before._ctx, before._requires_grad = self._ctx, self._requires_grad
        out = compute(before)
        if out.dtype != self.dtype:
            out = out.astype(self.dtype)
        self._data[...] = out._data
        self._bump()
        if getattr(self, "_before", None) is None:
            self._before = {}               # {node: this Tensor before each in-place op on it}
        self._before[self._ctx] = before          # for the nodes that used self until now
        before._before = self._before
        self._ctx, self._requires_grad = out._ctx, out._requires_grad
        return self

    def _inplace(self, op: str, ufunc, other: Any) -> "Tensor":
        """``data = ufunc(data, other)`` into the same array; checks, then bumps the version."""
        record = self._check_inplace(op, other)
        o = plain(other)
        if isinstance(o, (numbers.Number, np.generic)) and not isinstance(o, np.ndarray) \
                and self.dtype.kind == "f":
            o = np.asarray(o, dtype=self.dtype)      # a Python scalar takes the Tensor's dtype
        o = np.asarray(o)
        if o.dtype.kind not in "biuf":
            raise TypeError(f"{op}: operand must be numeric, got dtype {o.dtype}")
        try:
            shape = np.broadcast_shapes(self.shape, o.shape)
        except ValueError:
            shape = f"(none: the operand's {o.shape} does not broadcast with it)"
        if shape != self.shape:
            raise ValueRuntimeError(f"{op}: output with shape {self.shape} doesn't match the "
                                    f"broadcast shape {shape}")
        res = np.result_type(self.dtype, o.dtype)
        if ufunc is np.divide and res.kind != "f":
            res = np.dtype(np.float64)                  # true division of integers
        if not np.can_cast(res, self.dtype, "same_kind"):
            raise TypeError(f"{op}: result type {res} can't be cast to the Tensor's dtype "
                            f"{self.dtype}")
        if record:
            return self._record(lambda before: _OUT_OF_PLACE[ufunc](before, other))
        ufunc(self._data, o, out=self._data, casting="unsafe")
        self._bump()
        return self

    def zero_(self) -> "Tensor":
        """Set every element to 0 in place (bumps the version counter).

        Raises:
            RuntimeError: in grad mode, on a leaf that requires grad, or where the op is
                recorded on a Tensor that shares its memory with another.
        """
        if self._check_inplace("zero_"):
            return self._record(lambda before: where(True, 0.0, before))
        self._data[...] = 0
        self._bump()
        return self

    def fill_(self, value: float) -> "Tensor":
        """Set every element to ``value`` in place (bumps the version counter).

        Raises:
            RuntimeError: in grad mode, on a leaf that requires grad, or where the op is
                recorded on a Tensor that shares its memory with another.
        """
        if self._check_inplace("fill_", value):
            return self._record(lambda before: where(True, value, before))
        self._data[...] = plain(value)
        self._bump()
        return self

    def copy_(self, src: Any) -> "Tensor":
        """Copy ``src`` (broadcast to this shape, cast to this dtype) into ``data`` in place.

        Raises:
            ValueRuntimeError: if ``src`` does not broadcast to ``self.shape``.
            RuntimeError: in grad mode, on a leaf that requires grad, or where the op is
                recorded on a Tensor that shares its memory with another.
        """
        if self._check_inplace("copy_", src):
            return self._record(lambda before: where(True, src, before))
        _assign(self._data, Ellipsis, plain(src))
        self._bump()
        return self

    def add_(self, other: Any, alpha: float = 1.0) -> "Tensor":
        """``data += alpha * other`` in place (bumps the version counter); ``torch.Tensor.add_``.

        Raises:
            ValueRuntimeError: if ``other`` does not broadcast to ``self.shape``.
            TypeError: if the result cannot be stored in this dtype (float into int).
            RuntimeError: in grad mode, on a leaf that requires grad, or where the op is
                recorded on a Tensor that shares its memory with another.
        """
        if alpha != 1.0:
            other = other * alpha if isinstance(other, Tensor) else np.multiply(alpha, other)
        return self._inplace("add_", np.add, other)

    def sub_(self, other: Any, alpha: float = 1.0) -> "Tensor":
        """``data -= alpha * other`` in place (bumps the version counter); as ``add_``."""
        if alpha != 1.0:
            other = other * alpha if isinstance(other, Tensor) else np.multiply(alpha, other)
        return self._inplace("sub_", np.subtract, other)

    def mul_(self, other: Any) -> "Tensor":
        """``data *= other`` in place (bumps the version counter); as ``add_``."""
        return self._inplace("mul_", np.multiply, other)

    def div_(self, other: Any) -> "Tensor":
        """``data /= other`` in place (bumps the version counter); as ``add_``; an integer
        Tensor raises TypeError (true division gives floats)."""
        return self._inplace("div_", np.divide, other)

    def __iadd__(self, other):
        return self._inplace("+=", np.add, other)

    def __isub__(self, other):
        return self._inplace("-=", np.subtract, other)

    def __imul__(self, other):
        return self._inplace("*=", np.multiply, other)

    def __itruediv__(self, other):
        return self._inplace("/=", np.divide, other)

    def __ipow__(self, other):
        return self._inplace("**=", np.power, other)

    def __setitem__(self, index: Any, value: Any) -> None:
        """``t[index] = value``, the index read as PyTorch reads it (``rules.torch_index``); bumps
        the version counter; recorded in the graph as ``where(mask, value, t)`` for a ``value``
        that needs no gradient.

        Raises:
            RuntimeError: in grad mode, on a leaf that requires grad, or with a ``value`` that
                requires grad (not supported: use ``where`` or ``masked_fill``).
            ValueRuntimeError: a ``value`` that does not broadcast to the indexed shape.
        """
        first, then = torch_index(index_arrays(index))
        if self._check_inplace("__setitem__", value):
            if isinstance(value, Tensor) and value._requires_grad:
                raise RuntimeError("__setitem__: a value that requires grad is not supported in "
                                   "grad mode; use minigrad.where(mask, value, t) (out of place)")
            mask, new = np.zeros(self.shape, dtype=bool), self._data.copy()
            _assign(mask[first], then, True)
            _assign(new[first], then, plain(value))
            self._record(lambda before: where(mask, new, before))
            return
        _assign(self._data[first], then, plain(value))
        self._bump()


def _assign(view: np.ndarray, index, value) -> None:
    """``view[index] = value``; NumPy's ValueError for a value of the wrong shape raised as
    ``ValueRuntimeError`` (PyTorch raises RuntimeError)."""
    try:
        view[index] = value
    except ValueError as e:
        raise ValueRuntimeError(str(e)) from None
