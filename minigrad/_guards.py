"""The engine's guards: each turns a silently wrong gradient into an error naming the Function.

* **An array saved for backward, modified in place** (PyTorch's version counter). Every Tensor
  carries a ``VersionCounter``, shared with the views made from it, that the in-place
  operations increment (``+=``, ``add_``, ``zero_``, ``t[i] = v``, ``t.data -= ...``, an
  optimizer step). ``Function.apply`` records the version of each Tensor whose memory a saved
  array shares (``track_versions``); ``backward`` checks them before it calls the node's
  backward (``check_versions``). NumPy would not warn: the backward would read the new values.
* **A second backward through a graph the first one freed** (``check_not_freed``).
* **What a Function's backward returns** (``check_grads``): one gradient per forward input,
  each an ``np.ndarray`` of its input's exact shape and dtype, or None.

Beside them, ``ValueRuntimeError``: the error of bad input that NumPy reports as a ValueError
and PyTorch as a RuntimeError.

This module imports nothing of minigrad; ``tensor.py`` calls it where a Tensor is made, where
``Function.apply`` records a node and where ``backward`` runs one.
"""
from __future__ import annotations

import numpy as np


class ValueRuntimeError(ValueError, RuntimeError):
    """Bad input that NumPy reports as a ValueError and PyTorch as a RuntimeError: shapes that do
    not broadcast, multiply, reshape or concatenate, a bad permutation, ``clamp(None, None)``,
    ``item()`` of many elements. A subclass of both, so code written for either catches it."""


class VersionCounter:
    """A mutable integer shared by a Tensor and the views made from it; ``shared`` once it is."""

    __slots__ = ("value", "shared")

    def __init__(self) -> None:
        self.value = 0
        self.shared = False


def shares_memory(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays may overlap in memory. Two distinct arrays that each own their buffer
    (``base`` is None) never do, which spares ``np.may_share_memory`` for fresh outputs."""
    if a is b:
        return True
    if a.base is None and b.base is None:
        return False
    return bool(a.size and b.size and np.may_share_memory(a, b))


def share_view_counter(result, args) -> None:
    """An output that is a view of a Tensor input shares that input's counter (as in PyTorch)."""
    for a in args:
        if hasattr(a, "_vc") and shares_memory(result._data, a._data):
            result._vc = a._vc
            a._vc.shared = True
            return


def track_versions(ctx, result) -> None:
    """Record, in ``ctx``, the version of every Tensor (an input or the output ``result``)
    whose memory an array saved for backward shares."""
    tensors = [(a, i) for i, a in enumerate(ctx.inputs) if hasattr(a, "_vc")]
    tensors.append((result, None))          # (Tensor, input position or None for the output)
    for i, a in enumerate(ctx._saved):
        if a is None:
            continue
        for t, label in tensors:
            if shares_memory(a, t._data):
                ctx._saved_versions.append((t._vc, t._vc.value, i, label, a.shape))


def check_versions(ctx) -> None:
    """Raise RuntimeError when a Tensor that a saved array of ``ctx`` shares was modified in
    place since ``forward``."""
    for vc, version, i, label, shape in ctx._saved_versions:
        if vc.value != version:
            label = "output" if label is None else f"input {label}"
            raise RuntimeError(
                f"one of the arrays needed for the gradient of {ctx.fn_cls.__name__} "
                f"(saved array {i}, shape {shape}, from its {label}) was modified by an "
                f"in-place operation: it is at version {vc.value}, expected version "
                f"{version}. Do the in-place update after backward, or compute out of place."
            )


def check_not_freed(ctx) -> None:
    """Raise RuntimeError when ``ctx``'s saved arrays were freed by an earlier backward."""
    if ctx._freed:
        raise RuntimeError(
            f"Trying to backward through the graph a second time (node {ctx.fn_cls.__name__}): "
            "its saved arrays were freed by the first backward. Pass retain_graph=True to the "
            "first backward if you need to backward twice."
        )


def check_grads(ctx, grads) -> tuple:
    """Check what ``ctx.fn_cls.backward`` returned; return one gradient per input, None for an
    input that is no Tensor requiring grad.

    Raises:
        RuntimeError: a wrong count of gradients, or one that is not an array or has the wrong
            shape or dtype.
    """
    name = ctx.fn_cls.__name__
    n = len(ctx.inputs)
    if not isinstance(grads, tuple):
        grads = (grads,)
    if len(grads) != n:
        raise RuntimeError(
            f"{name}.backward returned {len(grads)} gradient(s), expected {n} (one per forward input)"
        )
    out = []
    for i, (inp, g) in enumerate(zip(ctx.inputs, grads)):
        if g is None or not getattr(inp, "_requires_grad", False):
            out.append(None)
            continue
        if not isinstance(g, np.ndarray):
            if isinstance(g, np.generic):
                g = np.asarray(g)
            else:
                raise RuntimeError(
                    f"{name}.backward returned a {type(g).__name__} for input {i}; expected an "
                    f"np.ndarray of shape {inp.shape} and dtype {inp.dtype}"
                )
        if g.shape != inp.shape:
            raise RuntimeError(
                f"{name}.backward returned a gradient of shape {g.shape} for input {i}, "
                f"expected the input's shape {inp.shape}"
            )
        if g.dtype != inp.dtype:
            raise RuntimeError(
                f"{name}.backward returned a gradient of dtype {g.dtype} for input {i}, "
                f"expected the input's dtype {inp.dtype}"
            )
        out.append(g)
    return tuple(out)
