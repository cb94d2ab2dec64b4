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
"""
from __future__ import annotations

import numpy as np

from minigrad import Module, Parameter, Tensor, from_pair

from .checks import float_dtype, generator, index_range, int_input, matrix_input, positive_int

__all__ = ["embedding", "embedding_forward", "embedding_backward", "EmbeddingFunction",
           "Embedding"]


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


EmbeddingFunction = from_pair(embedding_forward, embedding_backward,
                              "EmbeddingFunction")   # apply(weight, idx); idx: a constant


def embedding(idx, weight):
    """Look up rows of ``weight`` (``torch.nn.functional.embedding(idx, weight)``).

    Args:
        idx (np.ndarray | Tensor): integer indices of any shape, each in [0, num_embeddings).
            Negative indices are refused (as in PyTorch), not wrapped.
        weight (Tensor | np.ndarray): (num_embeddings, embedding_dim), floating. A plain array
            is a constant.

    Returns:
        Tensor of shape idx.shape + (embedding_dim,) and weight's dtype.

    Raises:
        TypeError: idx not of an integer dtype (floats, bools) or non-floating weight.
        ValueError: weight not 2-d.
        IndexError: an index outside [0, num_embeddings) (the message names an offending one).
    """
    ia = int_input(idx, "idx", "embedding")
    weight, wa = matrix_input(weight, "weight", "embedding", "(num_embeddings, embedding_dim)")
    index_range(ia, wa.shape[0], "idx", "embedding")
    return EmbeddingFunction.apply(weight, ia.astype(np.intp, copy=False))


class Embedding(Module):
    """``embedding`` as a Module (``torch.nn.Embedding``): ``y = weight[idx]``.

    Args:
        num_embeddings (int): number of rows (vocabulary or positions).
        embedding_dim (int): width C of a row.
        rng (np.random.Generator | None): source of the init.
        dtype: parameter dtype, default float32.
        backward: keyword-only; None for ``embedding_backward``, or a function of the same
            signature ``(dout, cache) -> dweight`` to use in its place.

    Parameters: ``weight`` (num_embeddings, embedding_dim) ~ N(0, 1).
    Shapes: idx integer (...) -> (..., embedding_dim). idx is not checked (``embedding``
    checks it): it must hold integers in [0, num_embeddings).
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, rng=None,
                 dtype=np.float32, *, backward=None) -> None:
        super().__init__()
        self.num_embeddings = positive_int(num_embeddings, "num_embeddings", "Embedding")
        self.embedding_dim = positive_int(embedding_dim, "embedding_dim", "Embedding")
        rng = generator(rng)
        dt = float_dtype(dtype, "Embedding")
        self.weight = Parameter(
            rng.standard_normal((self.num_embeddings, self.embedding_dim)).astype(dt))
        self.function = (EmbeddingFunction if backward is None
                         else from_pair(embedding_forward, backward))

    def forward(self, idx) -> Tensor:
        return self.function.apply(self.weight, idx)
