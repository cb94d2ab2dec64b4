"""Cross-entropy of logits against integer targets, as one autograd node
(``torch.nn.functional.cross_entropy`` with ``reduction``, ``ignore_index``, ``label_smoothing``).

Shapes: N rows (N = B*T in the GPT), V classes (vocab_size). logits (N, V), targets (N,); also
(B, T, V) with (B, T) (any leading shape), flattened to N rows internally.

Forward, per row n with shifted logits z_n = x_n - max_v x_nv, smoothing eps in [0, 1] and
valid_n = [t_n != ignore_index]::

    lse_n    = log(sum_v exp(z_nv))                           (log-sum-exp of the shifted row)
    nll_n    = lse_n - z_n,t_n                                = -logp_n,t_n
    smooth_n = lse_n - (1/V) sum_v z_nv                       = -(1/V) sum_v logp_nv
    l_n      = valid_n * ((1 - eps) nll_n + eps smooth_n)     (0 on ignored rows)
    loss     = l (reduction "none", shape of targets) | sum_n l_n ("sum")
             | sum_n l_n / sum_n valid_n ("mean"; NaN when every row is ignored, as PyTorch)

The log-softmax is formed from the shifted logits, never as log(softmax): with float32 logits of
1e8 the shifted logits are exact small numbers, so two equal logits give ln 2, not 0 or inf.

Cache: probs = softmax(logits) (N, V), the targets (N,) (ignored ones replaced by 0), the
per-row weight valid_n (N,), eps, the reduction and the row count. probs is exp(logp), a
by-product of the forward, and the whole gradient is written in it, so nothing else is kept.

Backward, with w_n the upstream gradient reaching row n (dloss / sum valid for "mean", dloss
for "sum", dloss_n for "none"), times valid_n::

    dlogits_n = w_n * (probs_n - (1 - eps) onehot(t_n) - eps / V)
                       # term 1: softmax; term 2: -(1-eps) one-hot; term 3: -eps/V uniform

Derivation: docs/derivations.md, section Cross-entropy.
"""
from __future__ import annotations

import numpy as np

from minigrad import from_pair

from .checks import (choice, float_input, index_range, int_input, integer, last_dim, shape_is,
                     unit_interval)

__all__ = ["cross_entropy", "cross_entropy_forward", "cross_entropy_backward",
           "CrossEntropyFunction"]

REDUCTIONS = ("mean", "sum", "none")


def cross_entropy_forward(logits, targets, reduction="mean", ignore_index=-100,
                          label_smoothing=0.0):
    """Cross-entropy with PyTorch's reduction, ignore_index and label smoothing.

    Args:
        logits (np.ndarray): (..., V) floating.
        targets (np.ndarray): (...) integer class indices in [0, V), or ``ignore_index``
            (not checked here).
        reduction (str): "mean", "sum" or "none".
        ignore_index (int): rows whose target equals it contribute 0 and are not counted.
        label_smoothing (float): eps in [0, 1].

    Returns:
        (loss, cache): loss is a 0-d array ("mean", "sum") or an array of targets' shape
        ("none"), of logits' dtype; cache = (probs (N, V), targets (N,), valid (N,), eps,
        reduction, count, logits' shape).
    """
    shape = logits.shape
    V = shape[-1]
    x = logits.reshape(-1, V)                          # (N, V)
    t = targets.reshape(-1)                            # (N,)
    N = x.shape[0]
    rows = np.arange(N)
    valid = t != ignore_index                          # (N,) bool
    t = np.where(valid, t, 0)                          # (N,) ignored rows index class 0
    z = x - np.max(x, axis=-1, keepdims=True)          # shifted logits (N, V), max entry 0
    e = np.exp(z)                                      # (N, V), in [0, 1]
    s = np.sum(e, axis=-1, keepdims=True)              # (N, 1), in [1, V]
    lse = np.log(s)[:, 0]                              # (N,)
    loss_n = lse - z[rows, t]                          # (N,) nll_n = -logp[target]
    if label_smoothing:
        eps = x.dtype.type(label_smoothing)
        smooth = lse - np.mean(z, axis=-1)             # (N,) -(1/V) sum_v logp_v
        loss_n = (1 - eps) * loss_n + eps * smooth
    loss_n = np.where(valid, loss_n, 0).astype(x.dtype, copy=False)   # (N,)
    count = int(valid.sum())
    if reduction == "none":
        loss = loss_n.reshape(shape[:-1])              # (...)
    elif reduction == "sum":
        loss = np.asarray(np.sum(loss_n), dtype=x.dtype)
    else:
        with np.errstate(invalid="ignore", divide="ignore"):   # every row ignored: 0/0 = NaN
            loss = np.asarray(np.sum(loss_n) / x.dtype.type(count), dtype=x.dtype)
    probs = e / s                                      # softmax(logits) (N, V)
    return loss, (probs, t, valid, float(label_smoothing), reduction, count, shape)


def cross_entropy_backward(dloss, cache):
    """``dlogits_n = w_n (probs_n - (1 - eps) onehot(t_n) - eps / V)``, 0 on ignored rows.

    Args:
        dloss (np.ndarray): upstream gradient, the loss's shape.
        cache: what ``cross_entropy_forward`` returned.

    Returns:
        dlogits (np.ndarray): the logits' shape and dtype.
    """
    probs, t, valid, eps, reduction, count, shape = cache
    N, V = probs.shape
    dt = probs.dtype
    dloss = np.asarray(dloss, dtype=dt)
    if reduction == "none":
        w = dloss.reshape(-1)                          # (N,) one upstream value per row
    elif reduction == "sum":
        w = np.broadcast_to(dloss, (N,))
    else:
        with np.errstate(invalid="ignore", divide="ignore"):
            w = np.broadcast_to(dloss / dt.type(count), (N,))   # dloss / (rows counted)
    w = np.where(valid, w, 0).astype(dt, copy=False)[:, None]   # (N, 1), 0 on ignored rows
    dlogits = probs * w                                # term 1: softmax
    dlogits[np.arange(N), t] -= (1 - dt.type(eps)) * w[:, 0]    # term 2: -(1-eps) one-hot
    if eps:
        dlogits -= (dt.type(eps) / dt.type(V)) * w     # term 3: -eps/V, uniform
    return dlogits.reshape(shape)                      # (N, V) -> (..., V)


CrossEntropyFunction = from_pair(cross_entropy_forward, cross_entropy_backward,
                                 "CrossEntropyFunction")   # targets: a constant


def cross_entropy(input, target, weight=None, *, ignore_index: int = -100,
                  reduction: str = "mean", label_smoothing: float = 0.0):
    """Cross-entropy of logits ``input`` against class indices ``target``
    (``torch.nn.functional.cross_entropy``, same names and defaults; the options after
    ``weight`` are keyword-only).

    Args:
        input (Tensor | np.ndarray): logits (N, V) floating; (B, T, V) (any (..., V)) is
            accepted and flattened, the class axis last (PyTorch puts it second for
            (N, C, d1, ...)). A plain array is a constant.
        target (np.ndarray | Tensor): integer class indices of shape input.shape[:-1], each in
            [0, V) or equal to ``ignore_index``. Never differentiated.
        weight: must be None (per-class weights are not implemented).
        reduction (str): "mean" (over the rows not ignored), "sum" or "none" (one loss per row,
            targets' shape, 0 on ignored rows).
        ignore_index (int): target value whose rows contribute nothing (default -100).
        label_smoothing (float): in [0, 1]; the target distribution is
            ``(1 - eps) onehot + eps / V`` (Szegedy et al. 2016, sec. 7).

    Returns:
        Tensor of logits' dtype: 0-d ("mean", "sum"; "mean" is NaN when every row is ignored,
        as in PyTorch) or of targets' shape ("none").

    Raises:
        NotImplementedError: a class ``weight``.
        TypeError: non-floating logits; targets not of an integer dtype (floats, bools);
            a non-integer ignore_index.
        ValueError: logits with no class axis or no classes, targets of
            the wrong shape, an unknown reduction, or label_smoothing outside [0, 1].
        IndexError: a target outside [0, V) other than ignore_index (the message names the
            first bad one), as in PyTorch.
    """
    fn = "cross_entropy"
    if weight is not None:
        raise NotImplementedError(f"{fn}: per-class weight is not implemented")
    logits, xa = float_input(input, "logits", fn)
    V = last_dim(xa, fn, "the class axis V", name="logits")
    if V == 0:   # no classes (no rows is an empty batch: PyTorch's 0 / empty / NaN losses)
        raise ValueError(f"{fn}: logits have no classes (shape {xa.shape})")
    ta = int_input(target, "targets", fn)
    shape_is(ta, xa.shape[:-1], "targets", fn, f" (logits' shape {xa.shape} without V)")
    reduction = choice(reduction, REDUCTIONS, "reduction", fn)
    ignore_index = integer(ignore_index, "ignore_index", fn)
    label_smoothing = unit_interval(label_smoothing, "label_smoothing", fn)
    index_range(ta, V, "targets", fn, what="target", ignore_index=ignore_index)
    return CrossEntropyFunction.apply(logits, ta.astype(np.intp, copy=False), reduction=reduction,
                                      ignore_index=ignore_index, label_smoothing=label_smoothing)
