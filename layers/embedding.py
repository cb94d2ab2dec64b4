"""Embedding lookup ``weight[idx]`` with a scatter-add backward, as one autograd node.

Shapes: B batch, T sequence, V = num_embeddings (vocab_size or block_size), C = embedding_dim;
idx (B, T) (any shape) of integers in [0, V), weight (V, C), out (B, T, C).

Forward (``torch.nn.functional.embedding``)::

    out[b, t, :] = weight[idx[b, t], :]

Cache: a flattened copy of idx (N = B*T integers; a copy, so that a caller refilling its
index buffer before backward cannot change the gradient) and the weight's shape and dtype.
The lookup is linear in weight and reads nothing else, so the weight values are not needed.

Backward (the transpose of a gather is a scatter-add)::

    dweight[v, :] = sum over (b, t) with idx[b, t] == v of dout[b, t, :]

Rows that are never looked up get exactly 0; a row looked up k times receives the sum of its k
upstream gradients (assignment instead of accumulation would keep only one of them). The sum is
done by sorting the indices and adding contiguous runs with ``np.add.reduceat``: 144 us against
766 us for ``np.add.at`` at (B*T, C) = (1024, 64), V = 65 (docs/performance.md, "Issue 17").

Derivation: docs/derivations.md, section Embedding.
PyTorch faces: ``layers.functional.embedding``, ``layers.modules.Embedding``.
"""
import numpy as np

from minigrad import from_pair


def embedding_forward(weight, idx):
    """``out = weight[idx]``.

    Args:
        weight (np.ndarray): (V, C). idx (np.ndarray): integers in [0, V), any shape (not checked).

    Returns:
        (out, cache): out idx.shape + (C,); cache = (idx flattened (N,), weight.shape, weight.dtype).
    """
    out = weight[idx]                                   # (B, T, C), a gather (copy)
    flat = np.array(idx.reshape(-1), dtype=np.intp)     # (N,) own copy: the caller may reuse idx
    return out, (flat, weight.shape, weight.dtype)


def embedding_backward(dout, cache):
    """``dweight[v] = sum of dout over the positions that looked up v`` (scatter-add).

    Args:
        dout (np.ndarray): idx.shape + (C,).
        cache: from ``embedding_forward``.

    Returns:
        dweight (np.ndarray): (V, C) in the weight's dtype; exactly 0 in unused rows.
    """
    idx, shape, dtype = cache
    C = shape[1]
    dweight = np.zeros(shape, dtype=dtype)              # (V, C), unused rows stay exactly 0
    if idx.size == 0:
        return dweight
    d2 = dout.reshape(-1, C)                            # (N, C)
    order = np.argsort(idx, kind="stable")              # group equal indices together
    s = idx[order]                                      # sorted indices (N,)
    starts = np.flatnonzero(np.concatenate(([True], s[1:] != s[:-1])))  # first of each run (U,)
    dweight[s[starts]] = np.add.reduceat(d2[order], starts, axis=0)     # run sums (U, C)
    return dweight


EmbeddingFunction = from_pair(embedding_forward, embedding_backward, "EmbeddingFunction",
                              wrt=("weight",))   # apply(weight, idx); idx: a constant
