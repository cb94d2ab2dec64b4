"""Autoregressive sampling from a ``gpt.GPT`` (nanoGPT's ``GPT.generate``).

Shapes: B sequences, T tokens so far, V = vocab_size. Each step (nanoGPT ``model.py``)::

    idx_cond = idx[:, -block_size:]                 # crop the context to block_size
    logits = model(idx_cond)[:, -1, :] / temperature
    if top_k: logits[logits < k-th largest] = -inf  # keep the k most likely tokens
    probs = softmax(logits)                         # in float64
    idx_next ~ Categorical(probs)                   # rng.choice
    idx = concat(idx, idx_next)

``temperature = 0`` is greedy decoding: ``idx_next = argmax(logits)`` (the limit of the
temperature going to 0; nanoGPT would divide by zero). Ties in the k-th largest logit keep
every tied token, as nanoGPT's ``logits < v[:, [-1]]`` does.
"""
from __future__ import annotations

import math
import numbers
from typing import Callable, Optional

import numpy as np

import minigrad
from layers.checks import index_range

__all__ = ["generate"]


def generate(model, idx, max_new_tokens: int, temperature: float = 1.0,
             top_k: Optional[int] = None, rng: Optional[np.random.Generator] = None,
             on_token: Optional[Callable[[np.ndarray], None]] = None) -> np.ndarray:
    """Extend each row of ``idx`` by ``max_new_tokens`` tokens sampled from ``model``.

    Args:
        model: a ``gpt.GPT`` (``config.block_size``, ``config.vocab_size``,
            ``model(idx) -> (logits, None)``); run in eval mode under ``minigrad.no_grad``.
        idx: integer array (B, T) of token ids, T >= 1 (longer than block_size is fine: only
            the last block_size tokens are fed to the model).
        max_new_tokens: number of tokens to append (>= 0).
        temperature: >= 0; logits are divided by it (higher: flatter); 0 means greedy.
        top_k: keep only the ``top_k`` most likely tokens before sampling (None: all V);
            values above V act as V.
        rng: ``numpy.random.Generator`` for the draws (default ``default_rng(0)``).
        on_token: called after each step with its new tokens, int64 (B,), e.g. to print the
            text as it is sampled; an exception it raises stops the sampling.

    Returns:
        int64 array (B, T + max_new_tokens): ``idx`` followed by the new tokens.

    Raises:
        TypeError: ``idx`` is not an integer array, or ``rng`` not a Generator.
        IndexError: a token id outside [0, V) (as the model's forward and ``F.embedding``).
        ValueError: ``idx`` not (B, T) with T >= 1, a negative or non-finite temperature,
            ``top_k`` < 1, ``max_new_tokens`` < 0, or non-finite logits.
    """
    idx = np.asarray(idx)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"idx must be an integer array, got dtype {idx.dtype}")
    if idx.ndim != 2 or idx.shape[0] < 1 or idx.shape[1] < 1:
        raise ValueError(f"idx must have shape (B, T) with B, T >= 1, got {idx.shape}")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, numbers.Integral) \
            or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) \
            or not math.isfinite(temperature) or temperature < 0:
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral)
                              or top_k < 1):
        raise ValueError(f"top_k must be None or an integer >= 1, got {top_k!r}")
    if rng is None:
        rng = np.random.default_rng(0)
    elif not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    block_size = int(model.config.block_size)
    V = int(model.config.vocab_size)
    index_range(idx, V, "idx", "generate", what="token id")

    idx = idx.astype(np.int64)
    was_training = getattr(model, "training", False)
    model.eval()
    try:
        with minigrad.no_grad():
            for _ in range(int(max_new_tokens)):
                idx_cond = idx[:, -block_size:]                                  # (B, <=bs)
                logits, _ = model(idx_cond)                                      # (B, T, V)
                z = np.asarray(logits.data)[:, -1, :].astype(np.float64)        # (B, V)
                if not np.isfinite(z).all():
                    raise ValueError("the model produced non-finite logits (NaN or inf)")
                if top_k is not None and top_k < V:
                    kth = np.sort(z, axis=-1)[:, V - top_k][:, None]            # (B, 1)
                    z = np.where(z < kth, -np.inf, z)
                if temperature == 0:
                    idx_next = np.argmax(z, axis=-1)                             # (B,)
                else:
                    # shift before dividing, so a tiny temperature cannot overflow
                    with np.errstate(over="ignore"):
                        z = (z - z.max(axis=-1, keepdims=True)) / temperature    # (B, V)
                    p = np.exp(z)
                    p /= p.sum(axis=-1, keepdims=True)
                    idx_next = np.array([rng.choice(V, p=row) for row in p])     # (B,)
                idx_next = idx_next.astype(np.int64)
                idx = np.concatenate([idx, idx_next[:, None]], axis=1)               # (B, T+1)
                if on_token is not None:
                    on_token(idx_next)
    finally:
        model.train(was_training)
    return idx
