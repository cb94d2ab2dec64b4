"""Deliberately wrong backward passes, for ``python -m experiments.break_backward``.

Each wrong pass below is a copy of the real backward in ``layers/<name>.py`` with exactly ONE
term dropped or changed; the line that differs is marked ``# BROKEN:`` and the comment above it
shows the right line. Each is wrapped in a ``minigrad.Function`` that subclasses the layer's real
Function: the forward (and so the cache it saves) is the layer's own, only ``backward`` differs.
A gradient check must reject every one of them (``tests/test_break_backward.py``).

Each ``*_backward_*(dout, cache)`` takes the same arguments as the real backward it copies and
returns the same number of gradients, with the right shapes and dtypes (so only a numerical
check can tell): NumPy arrays in, NumPy arrays out, nothing raised for well-formed input.
Shape letters as in the layers: N rows (B * T), C features, H hidden width, T positions,
hs head size, V vocabulary size.

The derivations of the right formulas are in ``docs/derivations.md``.
"""
from __future__ import annotations

import numpy as np

from layers.attention import AttentionFunction
from layers.cross_entropy import CrossEntropyFunction
from layers.embedding import EmbeddingFunction
from layers.gelu import GELUFunction
from layers.layernorm import LayerNormFunction
from layers.linear import LinearFunction
from layers.relu2 import ReLU2Function
from layers.rmsnorm import RMSNormFunction
from layers.rope import RoPEFunction, rotate_half
from layers.silu import SiLUFunction
from layers.softmax import SoftmaxFunction
from layers.swiglu import SwiGLUFunction

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


# ----------------------------------------------------------------------------- LayerNorm
# Right (layers/layernorm.py):
#     dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))

def layernorm_backward_no_mean(dout, cache):
    """LayerNorm backward that forgets the path through the mean: term 2, ``-mean(dxhat)``.

    Returns (dx, dweight, dbias); dweight and dbias are right, dx is wrong.
    """
    xhat, weight, rstd = cache
    C = xhat.shape[-1]
    dbias = dout.reshape(-1, C).sum(axis=0)                                 # (C,)
    dweight = np.einsum("nc,nc->c", dout.reshape(-1, C), xhat.reshape(-1, C))  # (C,)
    dxhat = dout * weight                                                   # (N, C)
    # right: dx = dxhat - dxhat.mean(axis=-1, keepdims=True)
    dx = dxhat.copy()                                   # BROKEN: no "- mean(dxhat)"
    dx -= xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True)
    dx *= rstd
    return dx, dweight, dbias


def layernorm_backward_no_xhat(dout, cache):
    """LayerNorm backward that forgets the path through the variance: term 3,
    ``-xhat * mean(dxhat * xhat)``.

    Returns (dx, dweight, dbias); dweight and dbias are right, dx is wrong.
    """
    xhat, weight, rstd = cache
    C = xhat.shape[-1]
    dbias = dout.reshape(-1, C).sum(axis=0)
    dweight = np.einsum("nc,nc->c", dout.reshape(-1, C), xhat.reshape(-1, C))
    dxhat = dout * weight
    dx = dxhat - dxhat.mean(axis=-1, keepdims=True)
    # right: dx -= xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True)
    # BROKEN: that line (term 3) is missing
    dx *= rstd
    return dx, dweight, dbias


def layernorm_backward_no_eps(dout, cache):
    """LayerNorm backward that recomputes ``1/std`` from the centred input and forgets eps:
    ``rstd = 1 / sqrt(var)`` instead of the cached ``1 / sqrt(var + eps)``.

    On ordinary rows (var ~ 1) the two differ by about eps/2 relative, far below any gradient
    check's tolerance, so the bug hides; on near-constant rows (var ~ 1e-7 << eps = 1e-5) the
    gradient comes out several times too large. This is why the tests include such rows.

    Returns (dx, dweight, dbias); dweight and dbias are right, dx is wrong.
    """
    xhat, weight, rstd = cache
    C = xhat.shape[-1]
    dbias = dout.reshape(-1, C).sum(axis=0)
    dweight = np.einsum("nc,nc->c", dout.reshape(-1, C), xhat.reshape(-1, C))
    dxhat = dout * weight
    dx = dxhat - dxhat.mean(axis=-1, keepdims=True)
    dx -= xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True)
    xc = xhat / rstd                                    # x - mean, recovered from the cache
    # right: dx *= rstd                                 (rstd = 1 / sqrt(var + eps))
    dx *= 1.0 / np.sqrt(np.mean(xc * xc, axis=-1, keepdims=True))   # BROKEN: 1 / sqrt(var)
    return dx, dweight, dbias


class LayerNormNoMean(LayerNormFunction):
    """LayerNorm with ``layernorm_backward_no_mean``."""

    @staticmethod
    def backward(ctx, dout):
        return layernorm_backward_no_mean(dout, ctx.saved_tensors)


class LayerNormNoXhat(LayerNormFunction):
    """LayerNorm with ``layernorm_backward_no_xhat``."""

    @staticmethod
    def backward(ctx, dout):
        return layernorm_backward_no_xhat(dout, ctx.saved_tensors)


class LayerNormNoEps(LayerNormFunction):
    """LayerNorm with ``layernorm_backward_no_eps``."""

    @staticmethod
    def backward(ctx, dout):
        return layernorm_backward_no_eps(dout, ctx.saved_tensors)


# ----------------------------------------------------------------------------- RMSNorm
# Right (layers/rmsnorm.py):
#     dx = rstd * (dxhat - xhat * mean(dxhat * xhat))

def rmsnorm_backward_no_projection(dout, cache):
    """RMSNorm backward without the projection term ``-xhat * mean(dxhat * xhat)`` (the path
    through the mean square): it treats ``rstd`` as a constant.

    Returns (dx, dweight); dweight is right, dx is wrong.
    """
    xhat, weight, rstd = cache
    C = xhat.shape[-1]
    dweight = np.einsum("nc,nc->c", dout.reshape(-1, C), xhat.reshape(-1, C))
    dxhat = dout * weight
    # right: dx = dxhat - xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True)
    dx = dxhat.copy()                                   # BROKEN: projection term dropped
    dx *= rstd
    return dx, dweight


class RMSNormNoProjection(RMSNormFunction):
    """RMSNorm with ``rmsnorm_backward_no_projection``."""

    @staticmethod
    def backward(ctx, dout):
        return rmsnorm_backward_no_projection(dout, ctx.saved_tensors)


# ----------------------------------------------------------------------------- GELU
# Right (layers/gelu.py):
#     dx = dout * (0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2))

def gelu_backward_no_tanh_prime(dout, cache):
    """GELU (tanh) backward that keeps only ``d(0.5 x)/dx (1 + t)`` and drops term 2,
    ``0.5 x tanh'(u) du/dx``: the product rule applied to one factor only."""
    x, t = cache
    # right: local = 0.5 * ((1 + t) + x * (1 - t * t) * GELU_K * (1 + 3 * GELU_C * x * x))
    local = 0.5 * (1.0 + t)                             # BROKEN: tanh' term dropped
    return dout * local


class GELUNoTanhPrime(GELUFunction):
    """GELU with ``gelu_backward_no_tanh_prime``."""

    @staticmethod
    def backward(ctx, dout):
        return gelu_backward_no_tanh_prime(dout, ctx.saved_tensors)


# ----------------------------------------------------------------------------- SiLU
# Right (layers/silu.py):
#     dx = dout * s (1 + x (1 - s))

def silu_backward_no_sigmoid_prime(dout, cache):
    """SiLU backward that treats ``sigmoid(x)`` as a constant: ``dx = dout * s``, dropping
    ``x s (1 - s)`` from the product rule on ``x * s``."""
    x, s = cache
    # right: dx = dout * s * (1 + x * (1 - s))
    dx = dout * s                                       # BROKEN: x s (1 - s) dropped
    return dx


class SiLUNoSigmoidPrime(SiLUFunction):
    """SiLU with ``silu_backward_no_sigmoid_prime``."""

    @staticmethod
    def backward(ctx, dout):
        return silu_backward_no_sigmoid_prime(dout, ctx.saved_tensors)


# ----------------------------------------------------------------------------- ReLU²
# Right (layers/relu2.py):
#     dx = dout * 2 max(x, 0)

def relu2_backward_no_two(dout, cache):
    """ReLU² backward that forgets the 2 of ``d(r^2)/dr = 2 r``."""
    r = cache
    # right: dx = dout * r * 2
    dx = dout * r                                       # BROKEN: factor 2 forgotten
    return dx


class ReLU2NoTwo(ReLU2Function):
    """ReLU² with ``relu2_backward_no_two``."""

    @staticmethod
    def backward(ctx, dout):
        (r,) = ctx.saved_tensors
        return relu2_backward_no_two(dout, r)


# ----------------------------------------------------------------------------- SwiGLU
# Right (layers/swiglu.py):
#     da = dg * silu'(a) = dg * s (1 + a (1 - s))

def swiglu_backward_no_silu_prime(dout, cache):
    """SwiGLU backward that passes ``dg`` straight through to ``da`` (silu' dropped).

    Returns (dx, dw_gate, dw_up, dw_down); dw_up and dw_down are right, dx and dw_gate are
    wrong (both sit behind the gate branch).
    """
    x2, a, s, u, g, w_gate, w_up, w_down = cache
    lead = dout.shape[:-1]
    dout2 = dout.reshape(-1, dout.shape[-1])            # (N, O)
    dh = dout2 @ w_down                                 # (N, H)
    dw_down = dout2.T @ (g * u)                         # (O, H)
    du = dh * g                                         # (N, H)
    dg = dh * u                                         # (N, H)
    # right: da = dg * s * (1 + a * (1 - s))
    da = dg                                             # BROKEN: silu'(a) dropped
    dw_gate = da.T @ x2                                 # (H, C)
    dw_up = du.T @ x2                                   # (H, C)
    dx = da @ w_gate + du @ w_up                        # (N, C)
    return dx.reshape(*lead, x2.shape[1]), dw_gate, dw_up, dw_down


class SwiGLUNoSiluPrime(SwiGLUFunction):
    """SwiGLU with ``swiglu_backward_no_silu_prime``."""

    @staticmethod
    def backward(ctx, dout):
        return swiglu_backward_no_silu_prime(dout, ctx.saved_tensors)


# ----------------------------------------------------------------------------- RoPE
# Right (layers/rope.py):
#     dx = dout * cos - rotate_half(dout * sin)         (rotation by -theta)

def rope_backward_wrong_way(dout, cache):
    """RoPE backward that rotates by +theta again (the forward applied to dout) instead of by
    -theta: the transpose of a rotation is its inverse, not itself."""
    cos, sin = cache
    dx = dout * cos
    # right: dx -= rotate_half(dout * sin)
    dx += rotate_half(dout * sin)                       # BROKEN: sign of the sin term
    return dx


class RoPEWrongWay(RoPEFunction):
    """RoPE with ``rope_backward_wrong_way``."""

    @staticmethod
    def backward(ctx, dout):
        return rope_backward_wrong_way(dout, ctx.saved_tensors), None, None


# ----------------------------------------------------------------------------- softmax
# Right (layers/softmax.py):
#     dx = y * (dy - sum(dy * y))

def softmax_backward_no_sum(dy, cache):
    """Softmax backward that keeps only the diagonal of the Jacobian, ``diag(y) dy``, and
    forgets the subtracted ``y (y . dy)`` (the -y y^T part)."""
    y, axis = cache
    dx = dy * y                                         # diag(y) dy
    # right: dx -= y * np.sum(dx, axis=axis, keepdims=True)
    # BROKEN: that line (- y (y . dy)) is missing
    return dx


class SoftmaxNoSum(SoftmaxFunction):
    """Softmax with ``softmax_backward_no_sum``."""

    @staticmethod
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        return softmax_backward_no_sum(dy, (y, ctx.axis))


# ----------------------------------------------------------------------------- attention
# Right (layers/attention.py):
#     dq = dS k / sqrt(hs),   dk = dS^T q / sqrt(hs)

def attention_backward_dq_unscaled(dout, cache):
    """Attention backward that forgets the ``1/sqrt(hs)`` of the scores in dq (dk keeps it).

    Returns (dq, dk, dv); dk and dv are right, dq is sqrt(hs) times too large.
    """
    q, k, v, P, scale = cache
    dv = np.swapaxes(P, -1, -2) @ dout                  # (B, H, Tk, hv)
    dP = dout @ np.swapaxes(v, -1, -2)                  # (B, H, Tq, Tk)
    dS = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))
    # right: dq = (dS * scale) @ k
    dq = dS @ k                                         # BROKEN: 1/sqrt(hs) forgotten
    dk = np.swapaxes(dS * scale, -1, -2) @ q            # (B, H, Tk, hs)
    return dq, dk, dv


class AttentionDqUnscaled(AttentionFunction):
    """Attention with ``attention_backward_dq_unscaled``."""

    @staticmethod
    def backward(ctx, dout):
        q, k, v, P = ctx.saved_tensors
        return attention_backward_dq_unscaled(dout, (q, k, v, P, ctx.scale))


# ----------------------------------------------------------------------------- cross-entropy
# Right (layers/cross_entropy.py):
#     dlogits = (probs - onehot(targets)) * dloss / N

def cross_entropy_backward_no_mean(dloss, cache):
    """Cross-entropy backward that forgets the ``1/N`` of the mean over rows (the gradient of
    the summed loss)."""
    probs, t, shape = cache
    N = probs.shape[0]
    # right: scale = dloss / N
    scale = np.asarray(dloss, dtype=probs.dtype)        # BROKEN: "/ N" forgotten
    dlogits = probs * scale
    dlogits[np.arange(N), t] -= scale
    return dlogits.reshape(shape)


class CrossEntropyNoMean(CrossEntropyFunction):
    """Cross-entropy with ``cross_entropy_backward_no_mean``."""

    @staticmethod
    def backward(ctx, dloss):
        probs, t, _ = ctx.saved_tensors
        return cross_entropy_backward_no_mean(dloss, (probs, t, ctx.rest[-1])), None


# ----------------------------------------------------------------------------- linear
# Right (layers/linear.py):
#     dW = dout^T x      (O, C)

def linear_backward_dweight_transposed(dout, cache):
    """Linear backward with ``dW = x^T dout`` (C, O) instead of ``dout^T x`` (O, C): the
    classic transposed matmul gradient. Its shape is right only for a square weight, which
    is exactly when a shape check cannot catch it.

    Returns (dx, dW, db); dx and db are right.
    """
    x, weight, has_bias = cache
    O, C = weight.shape
    d2 = dout.reshape(-1, O)                            # (N, O)
    dx = (d2 @ weight).reshape(x.shape)                 # (..., C)
    # right: dW = d2.T @ x.reshape(-1, C)
    dW = x.reshape(-1, C).T @ d2                        # BROKEN: transposed (C, O)
    db = d2.sum(axis=0) if has_bias else None
    return dx, dW, db


class LinearDWeightTransposed(LinearFunction):
    """Linear (with bias) with ``linear_backward_dweight_transposed``."""

    @staticmethod
    def backward(ctx, dout):
        x, weight = ctx.saved_tensors
        dx, dW, db = linear_backward_dweight_transposed(dout, (x, weight, ctx.has_bias))
        return (dx, dW, db) if ctx.has_bias else (dx, dW)


# ----------------------------------------------------------------------------- embedding
# Right (layers/embedding.py):
#     dweight[v] = sum of dout over every position that looked up v   (scatter-ADD)

def embedding_backward_overwrite(dout, cache):
    """Embedding backward that assigns ``dweight[idx] = dout`` instead of accumulating: with a
    repeated index, the last position wins and the others' gradients are lost (the ``=``
    instead of ``+=`` bug)."""
    idx, shape, dtype = cache
    C = shape[1]
    dweight = np.zeros(shape, dtype=dtype)              # (V, C)
    # right: np.add.at(dweight, idx, dout.reshape(-1, C))
    dweight[idx] = dout.reshape(-1, C)                  # BROKEN: "=" instead of "+="
    return dweight


class EmbeddingOverwrite(EmbeddingFunction):
    """Embedding with ``embedding_backward_overwrite``."""

    @staticmethod
    def backward(ctx, dout):
        (flat,) = ctx.saved_tensors
        return embedding_backward_overwrite(dout, (flat, ctx.wshape, ctx.wdtype)), None
