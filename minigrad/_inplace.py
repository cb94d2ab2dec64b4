"""In-place operations on a Tensor and the version counter they bump (PyTorch's rules).

``Tensor`` gets these methods (copied onto it by ``@attach_to_tensor`` when ``minigrad`` is
imported): ``zero_``, ``fill_``, ``copy_``, ``add_``, ``sub_``, ``mul_``, ``div_``, the augmented operators ``+=``, ``-=``, ``*=``, ``/=``, ``**=`` and item
assignment ``t[i] = v``. Each writes into the same array and increments the Tensor's version
counter (``_guards.VersionCounter``, shared with the views made from it), so a backward
that saved the old values raises instead of computing a wrong gradient.

As in PyTorch, an in-place op is refused on a leaf that requires grad while grad mode is on
(an optimizer step runs under ``no_grad``). PyTorch also records an in-place op on a non-leaf
(or with an operand that requires grad) in the graph; minigrad refuses those with a clear
error instead (docs/pytorch.md).
"""
from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from .grad_mode import is_grad_enabled
from .tensor import Tensor
from .tensor_methods import attach_to_tensor, index_arrays, plain


@attach_to_tensor
class InplaceOps:
    """The in-place methods of ``minigrad.Tensor`` (copied onto it; not used on its own)."""

    def _check_inplace(self, op: str, *operands: Any) -> None:
        """Raise RuntimeError when ``op`` may not run in place here (see the module docstring)."""
        if not is_grad_enabled():
            return
        if self._requires_grad and self._ctx is None:
            raise RuntimeError(
                f"{op}: a leaf Variable that requires grad is being used in an in-place "
                "operation. Wrap the update in minigrad.no_grad() (as an optimizer step does)."
            )
        if self._ctx is not None:
            raise RuntimeError(
                f"{op}: in-place operation on a non-leaf Tensor (made by "
                f"{self._ctx.fn_cls.__name__}) while grad mode is on. PyTorch records it in the "
                "graph; minigrad does not: write y = y + z (out of place), or wrap the update "
                "in minigrad.no_grad()."
            )
        if any(isinstance(o, Tensor) and o._requires_grad for o in operands):
            raise RuntimeError(
                f"{op}: in-place operation with an operand that requires grad while grad mode "
                "is on. PyTorch records it in the graph; minigrad does not: write "
                "y = y + z (out of place), or wrap the update in minigrad.no_grad()."
            )

    def _inplace(self, op: str, ufunc, other: Any) -> "Tensor":
        """``data = ufunc(data, other)`` into the same array; checks, then bumps the version."""
        self._check_inplace(op, other)
        o = plain(other)
        if isinstance(o, (numbers.Number, np.generic)) and not isinstance(o, np.ndarray) \
                and self.dtype.kind == "f":
            o = np.asarray(o, dtype=self.dtype)      # a Python scalar takes the Tensor's dtype
        o = np.asarray(o)
        if o.dtype.kind not in "biuf":
            raise TypeError(f"{op}: operand must be numeric, got dtype {o.dtype}")
        if np.broadcast_shapes(self.shape, o.shape) != self.shape:
            raise ValueError(
                f"{op}: output with shape {self.shape} doesn't match the broadcast shape "
                f"{np.broadcast_shapes(self.shape, o.shape)}"
            )
        res = np.result_type(self.dtype, o.dtype)
        if ufunc is np.divide and res.kind != "f":
            res = np.dtype(np.float64)                  # true division of integers
        if not np.can_cast(res, self.dtype, "same_kind"):
            raise TypeError(f"{op}: result type {res} can't be cast to the Tensor's dtype "
                            f"{self.dtype}")
        ufunc(self._data, o, out=self._data, casting="unsafe")
        self._bump()
        return self

    def zero_(self) -> "Tensor":
        """Set every element to 0 in place (bumps the version counter).

        Raises:
            RuntimeError: in grad mode, on a leaf that requires grad or a non-leaf.
        """
        self._check_inplace("zero_")
        self._data[...] = 0
        self._bump()
        return self

    def fill_(self, value: float) -> "Tensor":
        """Set every element to ``value`` in place (bumps the version counter).

        Raises:
            RuntimeError: in grad mode, on a leaf that requires grad or a non-leaf.
        """
        self._check_inplace("fill_", value)
        self._data[...] = plain(value)
        self._bump()
        return self

    def copy_(self, src: Any) -> "Tensor":
        """Copy ``src`` (broadcast to this shape, cast to this dtype) into ``data`` in place.

        Raises:
            ValueError: if ``src`` does not broadcast to ``self.shape``.
            RuntimeError: in grad mode, on a leaf that requires grad, a non-leaf, or with a
                ``src`` that requires grad.
        """
        self._check_inplace("copy_", src)
        src = np.asarray(plain(src))
        np.copyto(self._data, np.broadcast_to(src, self.shape), casting="unsafe")
        self._bump()
        return self

    def add_(self, other: Any, alpha: float = 1.0) -> "Tensor":
        """``data += alpha * other`` in place (bumps the version counter); ``torch.Tensor.add_``.

        Raises:
            ValueError: if ``other`` does not broadcast to ``self.shape``.
            TypeError: if the result cannot be stored in this dtype (float into int).
            RuntimeError: in grad mode, on a leaf that requires grad, a non-leaf, or with an
                ``other`` that requires grad.
        """
        if alpha != 1.0:
            self._check_inplace("add_", other)
            other = np.multiply(alpha, plain(other))
        return self._inplace("add_", np.add, other)

    def sub_(self, other: Any, alpha: float = 1.0) -> "Tensor":
        """``data -= alpha * other`` in place (bumps the version counter); as ``add_``."""
        if alpha != 1.0:
            self._check_inplace("sub_", other)
            other = np.multiply(alpha, plain(other))
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
        self._check_inplace("__setitem__", value)
        self._data[index_arrays(index)] = plain(value)
        self._bump()
