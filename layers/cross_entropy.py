"""Cross-entropy of logits against integer targets, mean over rows, as one autograd node.

Shapes: N rows (N = B*T in the GPT), V classes (vocab_size). logits (N, V), targets (N,); also
(B, T, V) with (B, T) (any leading shape), flattened to N rows internally.

Forward (the negative log-likelihood of a softmax classifier; ``torch.nn.functional.cross_entropy``
with reduction="mean")::

    m_n      = max_v x_nv
    logp_nv  = (x_nv - m_n) - log(sum_v exp(x_nv - m_n))      (log-softmax, stable)
    loss     = -(1/N) sum_n logp_n,target_n
             = (1/N) sum_n (logsumexp(x_n) - x_n,target_n)

The log-softmax is formed from the shifted logits, never as log(softmax): with float32 logits of
1e8 the shifted logits are exact small numbers, so two equal logits give ln 2, not 0 or inf.

Cache: probs = softmax(logits) (N, V), the targets (N,) and N. probs is exp(logp), a by-product of
the forward, and the whole gradient is written in it, so nothing else is kept.

Backward (softmax minus one-hot)::

    dlogits = (probs - onehot(targets)) * dloss / N

Derivation: docs/derivations.md, section Cross-entropy.
"""
from __future__ import annotations

import numpy as np

from minigrad import Function, Tensor

__all__ = ["cross_entropy", "cross_entropy_forward", "cross_entropy_backward",
           "CrossEntropyFunction"]


def cross_entropy_forward(logits, targets):
    """Mean cross-entropy.

    Args:
        logits (np.ndarray): (..., V) floating.
        targets (np.ndarray): (...) integer class indices in [0, V) (not checked here).

    Returns:
        (loss, cache): loss is a 0-d array of logits' dtype; cache = (probs (N, V), targets (N,),
        logits' shape).
    """
    shape = logits.shape
    V = shape[-1]
    x = logits.reshape(-1, V)                          # (N, V)
    t = targets.reshape(-1)                            # (N,)
    N = x.shape[0]
    rows = np.arange(N)
    z = x - np.max(x, axis=-1, keepdims=True)          # shifted logits (N, V), max entry 0
    e = np.exp(z)                                      # (N, V), in [0, 1]
    s = np.sum(e, axis=-1, keepdims=True)              # (N, 1), in [1, V]
    nll = np.log(s)[:, 0] - z[rows, t]                 # (N,) -logp[target] = lse - z[target]
    loss = np.asarray(np.mean(nll), dtype=x.dtype)     # ()
    e /= s                                             # probs = softmax(logits) (N, V)
    return loss, (e, t, shape)


def cross_entropy_backward(dloss, cache):
    """``dlogits = (probs - onehot(targets)) * dloss / N``.

    Args:
        dloss (np.ndarray): 0-d upstream gradient.
        cache: (probs, targets, shape) from ``cross_entropy_forward``.

    Returns:
        dlogits (np.ndarray): the logits' shape and dtype.
    """
    probs, t, shape = cache
    N = probs.shape[0]
    scale = np.asarray(dloss, dtype=probs.dtype) / probs.dtype.type(N)  # dloss / N
    dlogits = probs * scale                            # term 1: softmax
    dlogits[np.arange(N), t] -= scale                  # term 2: -onehot(targets)
    return dlogits.reshape(shape)                      # (N, V) -> (..., V)


class CrossEntropyFunction(Function):
    """``minigrad.Function`` adapter; ``targets`` is a constant (no gradient)."""

    @staticmethod
    def forward(ctx, logits, targets):
        loss, (probs, t, shape) = cross_entropy_forward(logits, targets)
        ctx.save_for_backward(probs, t)
        ctx.shape = shape
        return loss

    @staticmethod
    def backward(ctx, dloss):
        probs, t = ctx.saved_tensors
        return cross_entropy_backward(dloss, (probs, t, ctx.shape)), None


def cross_entropy(logits, targets):
    """Mean cross-entropy of ``logits`` against class indices ``targets``
    (``torch.nn.functional.cross_entropy(logits, targets)``, reduction "mean").

    Args:
        logits (Tensor | np.ndarray): (N, V) floating; (B, T, V) (any (..., V)) is accepted and
            flattened, which PyTorch does not do. A plain array is a constant.
        targets (np.ndarray | Tensor): integer class indices of shape logits.shape[:-1], each in
            [0, V). Never differentiated.

    Returns:
        Tensor: a 0-d loss of logits' dtype.

    Raises:
        TypeError: non-floating logits; targets not of an integer dtype (floats, bools).
        ValueError: logits with no class axis or no rows, targets of the wrong shape, or a target
            outside [0, V) (the message names the first bad one).
    """
    xa = logits.data if isinstance(logits, Tensor) else np.asarray(logits)
    if not np.issubdtype(xa.dtype, np.floating):
        raise TypeError(f"cross_entropy: logits must be floating, got dtype {xa.dtype}")
    if xa.ndim < 1 or xa.shape[-1] == 0:
        raise ValueError(f"cross_entropy: logits must be (N, V) with V >= 1, got shape {xa.shape}")
    ta = targets.data if isinstance(targets, Tensor) else np.asarray(targets)
    if ta.dtype.kind not in "iu":
        raise TypeError(
            f"cross_entropy: targets must be integer class indices, got dtype {ta.dtype}")
    if ta.shape != xa.shape[:-1]:
        raise ValueError(
            f"cross_entropy: targets of shape {ta.shape} do not match logits of shape {xa.shape}; "
            f"expected targets of shape {xa.shape[:-1]}")
    if ta.size == 0:
        raise ValueError("cross_entropy: no rows (N = 0); the mean is undefined")
    V = xa.shape[-1]
    bad = (ta < 0) | (ta >= V)
    if bad.any():
        first = ta.reshape(-1)[np.flatnonzero(bad.reshape(-1))[0]]
        raise ValueError(
            f"cross_entropy: target {int(first)} out of range [0, {V}) "
            f"({int(bad.sum())} target(s) out of range)")
    return CrossEntropyFunction.apply(logits if isinstance(logits, Tensor) else xa,
                                      ta.astype(np.intp, copy=False))
