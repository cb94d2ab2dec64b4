"""Composite references: the same formulas as the fused layers, built from minigrad primitives.

The engine differentiates these op by op (mean, sub, mul, sqrt, tanh, sigmoid, matmul, ...), so
their gradients come from an independent derivation of the same function. The tests compare the
hand-derived backward of each fused layer with these to 1e-10 in float64.
"""
from __future__ import annotations

import math

import numpy as np

import minigrad


def layer_norm_ref(x, weight, bias, eps=1e-5):
    """``weight * (x - mean) / sqrt(var + eps) + bias``, biased two-pass variance, from primitives.
    """
    mean = x.mean(axis=-1, keepdims=True)
    xc = x - mean
    var = (xc * xc).mean(axis=-1, keepdims=True)
    return xc / (var + eps).sqrt() * weight + bias


def batch_norm_ref(x, weight, bias, eps=1e-5):
    """BatchNorm in training mode from primitives: ``layer_norm_ref`` over every axis but the
    channel axis 1 of x (N, C) or (N, C, L), the batch mean and biased variance per channel."""
    axes = (0,) + tuple(range(2, x.ndim))
    to_channel = (-1,) + (1,) * (x.ndim - 2)              # (C,) -> (C,) or (C, 1)
    mean = x.mean(axis=axes, keepdims=True)
    xc = x - mean
    var = (xc * xc).mean(axis=axes, keepdims=True)
    return xc / (var + eps).sqrt() * weight.reshape(to_channel) + bias.reshape(to_channel)


def batch_norm_eval_ref(x, running_mean, running_var, weight, bias, eps=1e-5):
    """BatchNorm in eval mode from primitives: the running statistics (arrays) as constants."""
    to_channel = (-1,) + (1,) * (x.ndim - 2)
    rstd = (1.0 / np.sqrt(running_var + eps)).reshape(to_channel)
    return (x - running_mean.reshape(to_channel)) * rstd * weight.reshape(to_channel) \
        + bias.reshape(to_channel)


def rms_norm_ref(x, weight, eps=1e-6):
    """``weight * x / sqrt(mean(x^2) + eps)`` from primitives."""
    ms = (x * x).mean(axis=-1, keepdims=True)
    return x / (ms + eps).sqrt() * weight


def gelu_ref(x):
    """``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`` from primitives (the chapter's step 6)."""
    return 0.5 * x * (1.0 + (math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)).tanh())


def relu2_ref(x):
    """``relu(x)^2`` from primitives."""
    r = x.relu()
    return r * r


def silu_ref(x):
    """``x * sigmoid(x)`` from primitives."""
    return x * x.sigmoid()


def swiglu_ref(x, w_gate, w_up, w_down):
    """``(silu(x Wg^T) * (x Wu^T)) Wd^T`` from primitives (PyTorch Linear layout (out, in))."""
    return (silu_ref(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T


__all__ = ["layer_norm_ref", "batch_norm_ref", "batch_norm_eval_ref", "rms_norm_ref", "gelu_ref",
           "relu2_ref", "silu_ref", "swiglu_ref", "grads_of"]


def grads_of(fn, arrays, G):
    """Run ``fn`` on fresh leaf Tensors made from ``arrays``, backward the upstream gradient ``G``.

    Returns:
        (out, grads): the output array and one gradient array per input.
    """
    leaves = [minigrad.Tensor(a.copy(), requires_grad=True) for a in arrays]
    out = fn(*leaves)
    out.backward(G)
    return out.data, [t.grad for t in leaves]
