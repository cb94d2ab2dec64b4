"""Cross-entropy of logits against integer targets, as one autograd node
(``torch.nn.functional.cross_entropy`` with ``reduction``, ``ignore_index``, ``label_smoothing``).

Shapes: logits (N, V) and targets (N,), N rows (B*T in the GPT; (B, T, V) is flattened), V
classes. Forward, per row n, with shifted logits z_n = x_n - max_v x_nv, smoothing eps in
[0, 1] and valid_n = [t_n != ignore_index]::

    lse_n    = log(sum_v exp(z_nv))                           (log-sum-exp of the shifted row)
    nll_n    = lse_n - z_n,t_n                                = -logp_n,t_n
    smooth_n = lse_n - (1/V) sum_v z_nv                       = -(1/V) sum_v logp_nv
    l_n      = valid_n * ((1 - eps) nll_n + eps smooth_n)     (0 on ignored rows)
    loss     = l (reduction "none", shape of targets) | sum_n l_n ("sum")
             | sum_n l_n / sum_n valid_n ("mean"; NaN when every row is ignored, as PyTorch)

The log-softmax is formed from the shifted logits, never as log(softmax): with float32 logits of
1e8 the shifted logits are exact small numbers, so two equal logits give ln 2, not 0 or inf.

Cache: probs = softmax(logits) = exp(logp) (N, V), a by-product of the forward in which the
whole gradient is written; the targets (N,) (ignored ones as 0), valid (N,), eps, reduction, count.

Backward, with w_n the upstream gradient reaching row n (dloss / sum valid for "mean", dloss
for "sum", dloss_n for "none"), times valid_n::

    dlogits_n = w_n * (probs_n - (1 - eps) onehot(t_n) - eps / V)
                       # term 1: softmax; term 2: -(1-eps) one-hot; term 3: -eps/V uniform

Derivation: docs/derivations.md, section Cross-entropy.
PyTorch face: ``layers.functional.cross_entropy``.
"""
import numpy as np

from minigrad import from_pair


def cross_entropy_forward(logits, targets, reduction="mean", ignore_index=-100,
                          label_smoothing=0.0):
    """The loss of logits (..., V) against targets (...) in [0, V) or ``ignore_index`` (not
    checked here). Returns (loss, cache): loss of logits' dtype, 0-d ("mean", "sum") or of
    targets' shape ("none"); cache = (probs, targets, valid, eps, reduction, count, shape)."""
    shape = logits.shape
    x = logits.reshape(-1, shape[-1])                  # (N, V)
    t = targets.reshape(-1)                            # (N,)
    valid = t != ignore_index                          # (N,) bool
    t = np.where(valid, t, 0)                          # (N,) ignored rows index class 0
    z = x - np.max(x, axis=-1, keepdims=True)          # shifted logits (N, V), max entry 0
    e = np.exp(z)                                      # (N, V), in [0, 1]
    s = np.sum(e, axis=-1, keepdims=True)              # (N, 1), in [1, V]
    lse = np.log(s)[:, 0]                              # (N,)
    loss_n = lse - z[np.arange(len(x)), t]             # (N,) nll_n = -logp[target]
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
    """``dlogits_n = w_n (probs_n - (1 - eps) onehot(t_n) - eps / V)``, 0 on ignored rows, for
    dloss of the loss's shape; dlogits has the logits' shape and dtype."""
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
                                 "CrossEntropyFunction", wrt=("logits",))   # targets: a constant
