"""Training loop and loss evaluation for ``gpt.GPT``.

The loop is the chapter's (chapter "The Details That Matter", ``train_variant``)::

    for step in range(steps):
        x, y = get_batch(train_data, block_size, batch_size, rng)
        _, loss = model(x, y)
        optimizer.zero_grad()
        loss.backward()
        clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

with ``AdamW(lr=3e-3)`` (PyTorch defaults otherwise: betas (0.9, 0.999), eps 1e-8,
weight_decay 0.01 on every parameter). Batches come from a ``numpy.random.Generator`` seeded
with ``seed``; with the model's own seeded initialisation, the same arguments give the same
numbers on every run.

Losses are mean cross-entropy in nats per token. ``evaluate`` is the mean over a fixed set of
windows covering the whole split (each target position counted once, see
``gpt.data.eval_windows``), or, with ``max_tokens``, about that many positions in windows
spread evenly over a larger split; ``estimate_loss`` is the chapter's one-random-batch estimate.
Shapes: B = batch_size, T = block_size, V = vocab_size.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, List, Optional

import numpy as np

import minigrad
from layers.checks import positive_int
from minigrad.optim import AdamW, clip_grad_norm_

from .data import check_split_length, eval_windows, get_batch

__all__ = ["TrainingDiverged", "TrainResult", "train", "evaluate", "estimate_loss"]


class TrainingDiverged(FloatingPointError):
    """The training loss (or the gradient norm) became NaN or infinite.

    Attributes:
        step: the 1-based step at which it happened.
        value: the offending value (``float``).
        what: ``"loss"`` or ``"gradient norm"``.
        losses: the finite per-step losses before that step (``list[float]``).
        seconds: wall time spent until then.
        grad_norms: the finite per-step gradient norms before that step (``list[float]``).
    """

    def __init__(self, step: int, value: float, what: str, losses: List[float], seconds: float,
                 grad_norms: Optional[List[float]] = None):
        self.step = step
        self.value = value
        self.what = what
        self.losses = losses
        self.seconds = seconds
        self.grad_norms = [] if grad_norms is None else grad_norms
        super().__init__(f"{what} became {value} at step {step}")


@dataclass
class TrainResult:
    """What ``train`` returns.

    Attributes:
        losses: training loss of each step's batch, before that step's update (``list[float]``,
            length ``steps``).
        seconds: wall time of the loop (``float``).
        grad_norms: total gradient norm of each step, before clipping (``list[float]``).
    """

    losses: List[float] = field(default_factory=list)
    seconds: float = 0.0
    grad_norms: List[float] = field(default_factory=list)


def _check_nonneg_float(name: str, value, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v) or v < 0 or (positive and v == 0):
        kind = "a finite positive" if positive else "a finite non-negative"
        raise ValueError(f"{name} must be {kind} number, got {value!r}")
    return v


def train(
    model,
    train_data: np.ndarray,
    *,
    steps: int,
    batch_size: int = 32,
    lr: float = 3e-3,
    weight_decay: float = 0.01,
    clip: Optional[float] = 1.0,
    seed: int = 0,
    rng: Optional[np.random.Generator] = None,
    on_step: Optional[Callable[[int, float], None]] = None,
) -> TrainResult:
    """Train ``model`` in place with AdamW on random windows of ``train_data`` (the chapter's loop).

    Args:
        model: a ``gpt.GPT`` (anything with ``config.block_size``, ``parameters()`` and
            ``model(idx, targets) -> (logits, loss)``). Parameters with
            ``requires_grad=False`` are frozen: not optimised, not decayed, not clipped.
        train_data: 1-D int token ids, at least ``block_size + 1`` of them.
        steps: number of optimizer steps (>= 1).
        batch_size: windows per batch (B). lr, weight_decay: AdamW's (decay on every parameter).
        clip: ``max_norm`` of ``clip_grad_norm_``; ``None`` disables clipping.
        seed: seeds ``numpy.random.default_rng`` for the batches when ``rng`` is None.
        rng: a Generator to draw batches from instead (advanced in place), so a caller can
            continue the same stream afterwards, as the chapter does for its final estimate.
        on_step: called as ``on_step(step, loss)`` after every step (step is 1-based).

    Returns:
        ``TrainResult`` with the per-step losses, the per-step gradient norms and the seconds.

    Raises:
        TrainingDiverged: the loss or the gradient norm is NaN or infinite at some step; the
            parameters are left as they were before that step's update.
        ValueError / TypeError: bad arguments (named).
    """
    steps = positive_int(steps, "steps", "train")
    batch_size = positive_int(batch_size, "batch_size", "train")
    lr = _check_nonneg_float("lr", lr, positive=True)
    weight_decay = _check_nonneg_float("weight_decay", weight_decay)
    if clip is not None:
        clip = _check_nonneg_float("clip", clip, positive=True)
    if rng is None:
        rng = np.random.default_rng(seed)
    elif not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    block_size = int(model.config.block_size)
    train_data = np.asarray(train_data)
    check_split_length(train_data, block_size, "training split")

    # frozen parameters (requires_grad=False) get no gradient and no update, as in PyTorch's
    # AdamW(filter(lambda p: p.requires_grad, model.parameters()))
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = AdamW(params, lr=lr, weight_decay=weight_decay)
    max_norm = math.inf if clip is None else clip  # inf: measure the norm, scale nothing
    result = TrainResult()
    model.train()
    t0 = time.perf_counter()

    # Overflow is detected below, by name and step; NumPy's warnings would only add noise.
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for step in range(1, steps + 1):
            x, y = get_batch(train_data, block_size, batch_size, rng)  # (B, T), (B, T)
            _, loss = model(x, y)
            loss_value = float(loss.item())
            if not math.isfinite(loss_value):
                raise TrainingDiverged(step, loss_value, "loss", result.losses,
                                       time.perf_counter() - t0, result.grad_norms)
            optimizer.zero_grad()
            loss.backward()
            norm = clip_grad_norm_(params, max_norm)  # the total norm BEFORE clipping
            if not math.isfinite(norm):
                raise TrainingDiverged(step, norm, "gradient norm", result.losses,
                                       time.perf_counter() - t0, result.grad_norms)
            optimizer.step()
            result.losses.append(loss_value)
            result.grad_norms.append(norm)
            if on_step is not None:
                on_step(step, loss_value)
    result.seconds = time.perf_counter() - t0
    return result


def _log_softmax_nll(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Per-token cross-entropy ``-log softmax(logits)[target]`` in float64, shape (B, T)."""
    z = logits.astype(np.float64, copy=False)  # (B, T, V)
    m = z.max(axis=-1, keepdims=True)  # (B, T, 1)
    lse = np.log(np.exp(z - m).sum(axis=-1)) + m[..., 0]  # (B, T)
    picked = np.take_along_axis(z, targets[..., None], axis=-1)[..., 0]  # (B, T)
    return lse - picked


def evaluate(model, data: np.ndarray, block_size: Optional[int] = None,
             batch_size: int = 32, max_tokens: Optional[int] = None,
             on_batch: Optional[Callable[[int, int], None]] = None) -> float:
    """Mean cross-entropy (nats/token) over every target position of ``data``, deterministically.

    With ``max_tokens``, a split with more target positions is evaluated on about
    ``max_tokens`` of them, in windows spread evenly over it (``gpt.data.eval_windows``).

    Runs the model on the fixed windows of ``gpt.data.eval_windows`` (stride ``block_size``,
    the last aligned to the end), ``batch_size`` windows at a time, under ``minigrad.no_grad()``,
    and averages ``-log p(target)`` over positions ``1..N-1``, each counted once. The softmax is
    taken in float64 from the model's logits.

    Args:
        model: a ``gpt.GPT``.  data: 1-D int token ids, length N >= block_size + 1.
        block_size: window length T (default ``model.config.block_size``).
        batch_size: windows per forward pass (memory only; the result does not depend on it).
        max_tokens: cap on the evaluated target positions (None: all of them).
        on_batch: called as ``on_batch(tokens_done, tokens_total)`` after each forward pass
            (progress reporting).

    Returns:
        ``float``: the mean loss (may be nan/inf if the model is broken).

    Raises:
        ValueError: the split is too short, or ``batch_size``/``max_tokens`` is <= 0.
        TypeError: ``batch_size``/``max_tokens`` is not an int.
    """
    if block_size is None:
        block_size = int(model.config.block_size)
    batch_size = positive_int(batch_size, "batch_size", "evaluate")
    x, y, mask = eval_windows(np.asarray(data), block_size, max_tokens)  # (W, T) each
    n_total, done = int(mask.sum()), 0
    was_training = getattr(model, "training", True)
    model.eval()
    total = 0.0
    try:
        with minigrad.no_grad(), np.errstate(over="ignore", invalid="ignore"):
            for i in range(0, x.shape[0], batch_size):
                logits, _ = model(x[i:i + batch_size])  # (b, T, V)
                nll = _log_softmax_nll(np.asarray(logits.data), y[i:i + batch_size])  # (b, T)
                m = mask[i:i + batch_size]
                total += float(nll[m].sum())
                done += int(m.sum())
                if on_batch is not None:
                    on_batch(done, n_total)
    finally:
        model.train(was_training)
    return total / n_total


def estimate_loss(model, data: np.ndarray, rng: np.random.Generator,
                  block_size: Optional[int] = None, batch_size: int = 32) -> float:
    """The chapter's final estimate: the model's loss on ONE random batch drawn from ``rng``.

    Args:
        model: a ``gpt.GPT``.  data: 1-D int token ids.  rng: Generator (advanced in place).
        block_size: T (default ``model.config.block_size``).  batch_size: B.

    Returns:
        ``float``: the batch's mean cross-entropy.
    """
    if block_size is None:
        block_size = int(model.config.block_size)
    x, y = get_batch(np.asarray(data), block_size, batch_size, rng)
    with minigrad.no_grad():
        _, loss = model(x, y)
    return float(loss.item())
