"""Deliberately wrong backward passes, for ``python -m experiments.break_backward``.

Each wrong pass is the real formula of ``layers/<name>.py`` with exactly ONE term dropped or
changed: the line that differs is marked ``# BROKEN:`` and the comment beside it shows the right
one. The gradients a mistake does not touch come from the real backward itself. Each is wrapped
in a subclass of the layer's real ``Function``: the forward (and so the cache) is the layer's
own, only ``backward`` differs. A gradient check must reject every one of them
(``tests/test_break_backward.py``).

Each ``*_backward_*(dout, cache)`` takes the real backward's arguments and returns what it
returns, with the right shapes and dtypes (so only a numerical check can tell). The derivations
of the right formulas are in ``docs/derivations.md``.
"""
from __future__ import annotations

import numpy as np

from layers.attention import AttentionFunction
from layers.cross_entropy import CrossEntropyFunction
from layers.embedding import EmbeddingFunction
from layers.gelu import GELUFunction
from layers.layernorm import LayerNormFunction, layernorm_backward
from layers.linear import LinearFunction, linear_backward
from layers.relu2 import ReLU2Function
from layers.rmsnorm import RMSNormFunction, rmsnorm_backward
from layers.rope import RoPEFunction, rotate_half
from layers.silu import SiLUFunction
from layers.softmax import SoftmaxFunction
from layers.swiglu import SwiGLUFunction, swiglu_backward

__all__ = [
    "layernorm_backward_no_mean", "layernorm_backward_no_xhat", "layernorm_backward_no_eps",
    "rmsnorm_backward_no_projection", "gelu_backward_no_tanh_prime",
    "swiglu_backward_no_silu_prime", "rope_backward_wrong_way", "softmax_backward_no_sum",
    "attention_backward_dq_unscaled", "cross_entropy_backward_no_mean",
    "linear_backward_dweight_transposed", "embedding_backward_overwrite",
    "silu_backward_no_sigmoid_prime", "relu2_backward_no_two",
    "LayerNormNoMean", "LayerNormNoXhat", "LayerNormNoEps", "RMSNormNoProjection",
    "GELUNoTanhPrime", "SwiGLUNoSiluPrime", "RoPEWrongWay", "SoftmaxNoSum",
    "AttentionDqUnscaled", "CrossEntropyNoMean", "LinearDWeightTransposed",
    "EmbeddingOverwrite", "SiLUNoSigmoidPrime", "ReLU2NoTwo",
]


def _mean(a):
    return np.mean(a, axis=-1, keepdims=True)


def _with_backward(real, wrong, name):
    """``real`` (a layer's Function whose cache is its saved arrays) with ``wrong`` as backward."""
    backward = staticmethod(lambda ctx, dout: wrong(dout, ctx.saved_tensors))
    return type(name, (real,), {"backward": backward, "__module__": __name__,
                                "__doc__": f"{real.__name__[:-8]} with ``{wrong.__name__}``."})


# ----------------------------------------------------------------------------- LayerNorm
# right: dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))

def layernorm_backward_no_mean(dout, cache):
    """LayerNorm backward without term 2, ``-mean(dxhat)`` (the path through the mean)."""
    _, dweight, dbias = layernorm_backward(dout, cache)
    xhat, weight, rstd = cache
    dxhat = dout * weight
    dx = rstd * (dxhat                                  # BROKEN: "- mean(dxhat)" dropped
                 - xhat * _mean(dxhat * xhat))
    return dx, dweight, dbias


def layernorm_backward_no_xhat(dout, cache):
    """LayerNorm backward without term 3, ``-xhat * mean(dxhat * xhat)`` (the path through
    the variance)."""
    _, dweight, dbias = layernorm_backward(dout, cache)
    xhat, weight, rstd = cache
    dxhat = dout * weight
    dx = rstd * (dxhat
                 - _mean(dxhat))                        # BROKEN: "- xhat * mean(...)" dropped
    return dx, dweight, dbias


def layernorm_backward_no_eps(dout, cache):
    """LayerNorm backward that recomputes ``1/std`` from the centred input and forgets eps:
    ``1 / sqrt(var)`` instead of the cached ``rstd = 1 / sqrt(var + eps)``.

    On ordinary rows (var ~ 1) the two differ by about eps/2 relative, far below any gradient
    check's tolerance, so the bug hides; on near-constant rows (var ~ 1e-7 << eps = 1e-5) the
    gradient comes out several times too large. This is why the tests include such rows.
    """
    _, dweight, dbias = layernorm_backward(dout, cache)
    xhat, weight, rstd = cache
    dxhat = dout * weight
    xc = xhat / rstd                                    # x - mean, recovered from the cache
    dx = (1.0 / np.sqrt(_mean(xc * xc))                 # BROKEN: 1 / sqrt(var), right: rstd
          * (dxhat - _mean(dxhat) - xhat * _mean(dxhat * xhat)))
    return dx, dweight, dbias


LayerNormNoMean = _with_backward(LayerNormFunction, layernorm_backward_no_mean, "LayerNormNoMean")
LayerNormNoXhat = _with_backward(LayerNormFunction, layernorm_backward_no_xhat, "LayerNormNoXhat")
LayerNormNoEps = _with_backward(LayerNormFunction, layernorm_backward_no_eps, "LayerNormNoEps")


# ----------------------------------------------------------------------------- RMSNorm
# right: dx = rstd * (dxhat - xhat * mean(dxhat * xhat))

def rmsnorm_backward_no_projection(dout, cache):
    """RMSNorm backward without the projection term ``-xhat * mean(dxhat * xhat)`` (the path
    through the mean square): it treats ``rstd`` as a constant."""
    _, dweight = rmsnorm_backward(dout, cache)
    xhat, weight, rstd = cache
    dx = rstd * (dout * weight)                         # BROKEN: projection term dropped
    return dx, dweight


RMSNormNoProjection = _with_backward(RMSNormFunction, rmsnorm_backward_no_projection,
                                     "RMSNormNoProjection")


# ----------------------------------------------------------------------------- GELU
# right: dx = dout * 0.5 ((1 + t) + x (1 - t^2) k (1 + 3 c x^2))

def gelu_backward_no_tanh_prime(dout, cache):
    """GELU (tanh) backward that drops term 2, ``0.5 x tanh'(u) du/dx``: the product rule
    applied to one factor only."""
    x, t = cache
    return dout * (0.5 * (1.0 + t))                     # BROKEN: "+ x (1 - t^2) du/dx" dropped


GELUNoTanhPrime = _with_backward(GELUFunction, gelu_backward_no_tanh_prime, "GELUNoTanhPrime")


# ----------------------------------------------------------------------------- SiLU
# right: dx = dout * s (1 + x (1 - s))

def silu_backward_no_sigmoid_prime(dout, cache):
    """SiLU backward that treats ``sigmoid(x)`` as a constant: ``dx = dout * s``, dropping
    ``x s (1 - s)`` from the product rule on ``x * s``."""
    x, s = cache
    return dout * s                                     # BROKEN: "* (1 + x (1 - s))" dropped


SiLUNoSigmoidPrime = _with_backward(SiLUFunction, silu_backward_no_sigmoid_prime,
                                    "SiLUNoSigmoidPrime")


# ----------------------------------------------------------------------------- ReLU²
# right: dx = dout * 2 r

def relu2_backward_no_two(dout, cache):
    """ReLU² backward that forgets the 2 of ``d(r^2)/dr = 2 r``."""
    r = cache
    return dout * r                                     # BROKEN: right: dout * (2 * r)


class ReLU2NoTwo(ReLU2Function):
    """ReLU² with ``relu2_backward_no_two``."""

    @staticmethod
    def backward(ctx, dout):
        return relu2_backward_no_two(dout, *ctx.saved_tensors)


# ----------------------------------------------------------------------------- SwiGLU
# right: da = dg * silu'(a) = dg * s (1 + a (1 - s))

def swiglu_backward_no_silu_prime(dout, cache):
    """SwiGLU backward that passes ``dg`` straight through to ``da`` (silu' dropped).

    dw_up and dw_down are right (from the real backward); dx and dw_gate, both behind the
    gate branch, are wrong.
    """
    _, _, dw_up, dw_down = swiglu_backward(dout, cache)
    x2, a, s, u, g, w_gate, w_up, w_down = cache
    dh = dout.reshape(-1, dout.shape[-1]) @ w_down      # (N, H)
    du = dh * g
    da = dh * u                                         # BROKEN: right: dh * u * dsilu(a, s)
    dx = da @ w_gate + du @ w_up                        # (N, C)
    return dx.reshape(*dout.shape[:-1], x2.shape[1]), da.T @ x2, dw_up, dw_down


SwiGLUNoSiluPrime = _with_backward(SwiGLUFunction, swiglu_backward_no_silu_prime,
                                   "SwiGLUNoSiluPrime")


# ----------------------------------------------------------------------------- RoPE
# right: dx = dout * cos - rotate_half(dout * sin)      (rotation by -theta)

def rope_backward_wrong_way(dout, cache):
    """RoPE backward that rotates by +theta again (the forward applied to dout) instead of by
    -theta: the transpose of a rotation is its inverse, not itself."""
    cos, sin = cache
    return dout * cos + rotate_half(dout * sin)         # BROKEN: "+", right: "-"


class RoPEWrongWay(RoPEFunction):
    """RoPE with ``rope_backward_wrong_way``."""

    @staticmethod
    def backward(ctx, dout):
        return rope_backward_wrong_way(dout, ctx.saved_tensors), None, None


# ----------------------------------------------------------------------------- softmax
# right: dx = y * dy - y * sum(dy * y)

def softmax_backward_no_sum(dy, cache):
    """Softmax backward that keeps only the diagonal of the Jacobian, ``diag(y) dy``, and
    forgets the subtracted ``y (y . dy)`` (the -y y^T part)."""
    y, axis = cache
    return y * dy                                       # BROKEN: "- y * sum(dy * y)" dropped


class SoftmaxNoSum(SoftmaxFunction):
    """Softmax with ``softmax_backward_no_sum``."""

    @staticmethod
    def backward(ctx, dy):
        return softmax_backward_no_sum(dy, (*ctx.saved_tensors, ctx.axis))


# ----------------------------------------------------------------------------- attention
# right: dq = dS k / sqrt(hs),   dk = dS^T q / sqrt(hs)

def attention_backward_dq_unscaled(dout, cache):
    """Attention backward that forgets the ``1/sqrt(hs)`` of the scores in dq (dk keeps it).

    Returns (dq, dk, dv); dk and dv are right, dq is sqrt(hs) times too large.
    """
    q, k, v, P, scale = cache
    dv = np.swapaxes(P, -1, -2) @ dout                  # (B, H, Tk, hv)
    dP = dout @ np.swapaxes(v, -1, -2)                  # (B, H, Tq, Tk)
    dS = P * dP - P * np.sum(P * dP, axis=-1, keepdims=True)
    dq = dS @ k                                         # BROKEN: right: (dS * scale) @ k
    dk = np.swapaxes(dS * scale, -1, -2) @ q            # (B, H, Tk, hs)
    return dq, dk, dv


class AttentionDqUnscaled(AttentionFunction):
    """Attention with ``attention_backward_dq_unscaled``."""

    @staticmethod
    def backward(ctx, dout):
        return attention_backward_dq_unscaled(dout, (*ctx.saved_tensors, ctx.scale))


# ----------------------------------------------------------------------------- cross-entropy
# right ("mean", no smoothing): dlogits = (probs - onehot(targets)) * dloss / N

def cross_entropy_backward_no_mean(dloss, cache):
    """Cross-entropy backward ("mean", no ignored rows, no smoothing) that forgets the ``1/N``
    of the mean over rows: the gradient of the summed loss."""
    probs, t, *_, shape = cache
    N = probs.shape[0]
    w = np.asarray(dloss, dtype=probs.dtype)            # BROKEN: right: dloss / N
    dlogits = probs * w
    dlogits[np.arange(N), t] -= w
    return dlogits.reshape(shape)


class CrossEntropyNoMean(CrossEntropyFunction):
    """Cross-entropy with ``cross_entropy_backward_no_mean``."""

    @staticmethod
    def backward(ctx, dloss):
        return cross_entropy_backward_no_mean(dloss, (*ctx.saved_tensors, *ctx.rest)), None


# ----------------------------------------------------------------------------- linear
# right: dW = dout^T x      (O, C)

def linear_backward_dweight_transposed(dout, cache):
    """Linear backward with ``dW = x^T dout`` (C, O) instead of ``dout^T x`` (O, C): the
    classic transposed matmul gradient. Its shape is right only for a square weight, which
    is exactly when a shape check cannot catch it.

    Returns (dx, dW, db); dx and db are right (from the real backward).
    """
    dx, _, db = linear_backward(dout, cache)
    x, weight, has_bias = cache
    O, C = weight.shape
    dW = x.reshape(-1, C).T @ dout.reshape(-1, O)       # BROKEN: right: dout^T x, (O, C)
    return dx, dW, db


class LinearDWeightTransposed(LinearFunction):
    """Linear (with bias) with ``linear_backward_dweight_transposed``."""

    @staticmethod
    def backward(ctx, dout):
        dx, dW, db = linear_backward_dweight_transposed(dout, (*ctx.saved_tensors, ctx.has_bias))
        return (dx, dW, db) if ctx.has_bias else (dx, dW)


# ----------------------------------------------------------------------------- embedding
# right: dweight[v] = sum of dout over every position that looked up v   (scatter-ADD)

def embedding_backward_overwrite(dout, cache):
    """Embedding backward that assigns ``dweight[idx] = dout`` instead of accumulating: with a
    repeated index, the last position wins and the others' gradients are lost (the ``=``
    instead of ``+=`` bug)."""
    idx, shape, dtype = cache
    dweight = np.zeros(shape, dtype=dtype)              # (V, C)
    dweight[idx] = dout.reshape(-1, shape[1])           # BROKEN: "=", right: np.add.at (+=)
    return dweight


class EmbeddingOverwrite(EmbeddingFunction):
    """Embedding with ``embedding_backward_overwrite``."""

    @staticmethod
    def backward(ctx, dout):
        cache = (*ctx.saved_tensors, ctx.wshape, ctx.wdtype)
        return embedding_backward_overwrite(dout, cache), None
