"""Gradient check against central differences (modelled on ``torch.autograd.gradcheck``).

Minimal first version: slow mode only (full Jacobians). See ``gradcheck`` for the contract.
"""
from __future__ import annotations

import numpy as np

from .grad_mode import enable_grad
from .tensor import Tensor


class GradcheckError(RuntimeError):
    """Raised by ``gradcheck`` when an analytical gradient disagrees with central differences."""


def gradcheck(fn, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              fast_mode=False, seed=0):
    """Compare the engine's gradients of ``fn`` with central differences.

    Args:
        fn: maps the inputs (Tensors) to one Tensor of any shape.
        inputs: a Tensor or a sequence of Tensors / arrays; those with ``requires_grad`` are
            checked and must be float64.
    Returns:
        True when every check passes (False on failure with ``raise_exception=False``).
    Raises:
        TypeError: if an input that requires grad is not float64.
        GradcheckError: on a mismatch, when ``raise_exception`` is True.
    """
    if isinstance(inputs, Tensor):
        inputs = (inputs,)
    inputs = tuple(inputs)
    for i, t in enumerate(inputs):
        if isinstance(t, Tensor) and t.requires_grad and t.dtype != np.float64:
            raise TypeError(f"gradcheck: input {i} requires grad but is {t.dtype}; use float64")
    rng = np.random.default_rng(seed)
    with enable_grad():
        out = fn(*inputs)
    G = rng.standard_normal(out.shape)
    for t in inputs:
        if isinstance(t, Tensor):
            t.grad = None
    with enable_grad():
        fn(*inputs).backward(G)
    for i, t in enumerate(inputs):
        if not (isinstance(t, Tensor) and t.requires_grad):
            continue
        analytic = np.zeros(t.shape) if t.grad is None else t.grad
        numeric = np.zeros(t.shape)
        flat = t.data.reshape(-1)
        for k in range(flat.size):
            orig = flat[k]
            flat[k] = orig + eps
            fp = np.sum(fn(*inputs).data * G)
            flat[k] = orig - eps
            fm = np.sum(fn(*inputs).data * G)
            flat[k] = orig
            numeric.reshape(-1)[k] = (fp - fm) / (2 * eps)
        bad = np.abs(analytic - numeric) > atol + rtol * np.abs(numeric)
        if bad.any():
            if raise_exception:
                raise GradcheckError(
                    f"gradcheck: input {i} {t.shape}: {int(bad.sum())} of {bad.size} entries differ"
                )
            return False
    return True
