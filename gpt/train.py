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

nanoGPT's recipe (karpathy/nanoGPT ``train.py`` and ``model.py``) is the same loop with two
additions: ``configure_optimizers`` puts weight decay only on the parameters with two or more
dimensions (matrices and embeddings; not biases or norm gains), and ``get_lr`` warms the learning
rate up linearly for ``warmup_iters`` iterations, then decays it along a cosine to ``min_lr`` at
``lr_decay_iters``, and keeps ``min_lr`` after::

    optimizer = configure_optimizers(model, lr, weight_decay, betas=(0.9, 0.99), decay="2d")
    train(model, data, steps=2000, optimizer=optimizer,
          lr_at=lambda it: get_lr(it, lr, min_lr, warmup_iters=100, lr_decay_iters=2000))

``train(..., start=k)`` continues a run after k steps (the schedule and the step numbers go on
from there); with the optimizer's state and the batch generator's state restored, it gives the
numbers of an uninterrupted run.

Losses are mean cross-entropy in nats per token. ``evaluate`` is the mean over fixed windows
covering the whole split (each target position once, ``gpt.data.eval_windows``), or about
``max_tokens`` positions spread evenly over a larger one; ``estimate_loss`` is the chapter's
one-random-batch estimate, or nanoGPT's mean over ``eval_iters`` random batches. Shapes:
B = batch_size, T = block_size, V = vocab_size.
"""
import math
import time
from dataclasses import dataclass, field
from typing import List

import numpy as np

import minigrad
from layers.checks import positive_int
from minigrad.optim import AdamW, clip_grad_norm_

from .data import check_split_length, eval_windows, get_batch


class TrainingDiverged(FloatingPointError):
    """The training loss (or the gradient norm) became NaN or infinite at ``step`` (1-based).

    Attributes: ``step``, ``value`` (the float), ``what`` ("loss" or "gradient norm"), and the
    finite ``losses``, ``grad_norms`` and ``seconds`` before that step.
    """

    def __init__(self, step, value, what, losses, seconds, grad_norms):
        self.step, self.value, self.what = step, value, what
        self.losses, self.seconds, self.grad_norms = losses, seconds, grad_norms
        super().__init__(f"{what} became {value} at step {step}")


@dataclass
class TrainResult:
    """What ``train`` returns: each step's batch loss before its update and total gradient norm
    before clipping (``list[float]``, length ``steps``), and the loop's wall time."""
    losses: List[float] = field(default_factory=list)
    seconds: float = 0.0
    grad_norms: List[float] = field(default_factory=list)


def _number(name, value, positive=False):
    """A finite float >= 0 (> 0 with ``positive``), else ValueError/TypeError naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise ValueError(f"{name} must be a finite {'positive' if positive else 'non-negative'}"
                         f" number, got {value!r}")
    return float(value)


def get_lr(it, lr, min_lr, warmup_iters, lr_decay_iters):
    """nanoGPT's learning rate at iteration ``it`` (0-based: the rate of the ``it + 1``-th step).

    Linear warmup ``lr * (it + 1) / (warmup_iters + 1)`` while ``it < warmup_iters``; ``min_lr``
    once ``it > lr_decay_iters``; in between a cosine from ``lr`` down to ``min_lr``::

        decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)     # 0 .. 1
        min_lr + 0.5 * (1 + cos(pi * decay_ratio)) * (lr - min_lr)

    ``min_lr == lr`` and ``warmup_iters == 0`` give the constant rate ``lr`` exactly.
    Source: karpathy/nanoGPT ``train.py``, ``get_lr``.

    Raises:
        ValueError: ``warmup_iters >= lr_decay_iters`` (the cosine would have no length).
    """
    if warmup_iters >= lr_decay_iters:
        raise ValueError(f"warmup_iters ({warmup_iters}) must be less than lr_decay_iters "
                         f"({lr_decay_iters})")
    if it < warmup_iters:                                   # 1) linear warmup
        return lr * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:                                 # 2) after the decay: min_lr
        return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)   # 3) cosine
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))  # 1 .. 0
    return min_lr + coeff * (lr - min_lr)


def configure_optimizers(model, lr, weight_decay, betas=(0.9, 0.999), decay="all"):
    """AdamW over the trainable parameters of ``model``.

    Args:
        model: a ``gpt.GPT`` (any ``Module``); parameters with ``requires_grad=False`` are left
            out.
        lr, weight_decay, betas: AdamW's.
        decay: ``"all"``: one group, every parameter decayed (the chapter's
            ``AdamW(model.parameters(), ...)``); ``"2d"``: nanoGPT's ``configure_optimizers``,
            two groups, the parameters with ``ndim >= 2`` (weight matrices and embeddings)
            decayed, the others (biases, norm gains) with ``weight_decay=0``.

    Returns:
        ``minigrad.optim.AdamW``.

    Raises:
        ValueError: an unknown ``decay``, or as ``AdamW``.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    if decay == "all":
        return AdamW(params, lr=lr, betas=betas, weight_decay=weight_decay)
    if decay != "2d":
        raise ValueError(f"decay must be 'all' or '2d', got {decay!r}")
    groups = [{"params": [p for p in params if p.ndim >= 2], "weight_decay": weight_decay},
              {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}]
    return AdamW([g for g in groups if g["params"]], lr=lr, betas=betas)


def train(model, train_data, *, steps, batch_size=32, lr=3e-3, weight_decay=0.01, clip=1.0,
          seed=0, rng=None, on_step=None, optimizer=None, lr_at=None, start=0):
    """Train ``model`` in place with AdamW on random windows of ``train_data`` (the chapter's loop).

    Args:
        model: a ``gpt.GPT`` (``config.block_size``, ``parameters()``, ``model(idx, targets) ->
            (logits, loss)``). Parameters with ``requires_grad=False`` are frozen: not
            optimised, not decayed, not clipped (PyTorch's ``filter(lambda p: p.requires_grad)``).
        train_data: 1-D int token ids, at least ``block_size + 1`` of them.
        steps: optimizer steps (>= 1) this call runs.  batch_size: B.
        lr, weight_decay: the chapter's ``AdamW(lr, weight_decay)``, built when ``optimizer``
            is None (ignored otherwise).
        clip: ``max_norm`` of ``clip_grad_norm_``; None measures the norm and clips nothing.
        seed: seeds the batches when ``rng`` is None.
        rng: a ``numpy.random.Generator`` to draw the batches from (advanced in place, so the
            caller can continue the stream, as the chapter's final estimate does).
        on_step: called as ``on_step(step, loss)`` after every step (1-based, counted from
            the start of the run: ``start + 1`` first).
        optimizer: an optimizer over the model's trainable parameters (``configure_optimizers``;
            its state loaded to resume a run); None builds the chapter's.
        lr_at: ``lr_at(it) -> float``, the learning rate of every parameter group for the step
            of 0-based iteration ``it`` (``get_lr``); None keeps the optimizer's rate.
        start: steps the run has already done (the first step here is iteration ``start``).

    Returns:
        ``TrainResult``.

    Raises:
        TrainingDiverged: the loss or the gradient norm is NaN or infinite at some step; the
            parameters are as they were before that step's update.
        ValueError / TypeError: a bad argument, named.
    """
    steps = positive_int(steps, "steps", "train")
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        raise ValueError(f"start must be an int >= 0, got {start!r}")
    batch_size = positive_int(batch_size, "batch_size", "train")
    lr = _number("lr", lr, positive=True)
    weight_decay = _number("weight_decay", weight_decay)
    max_norm = math.inf if clip is None else _number("clip", clip, positive=True)
    if rng is None:
        rng = np.random.default_rng(seed)
    elif not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    block_size = int(model.config.block_size)
    train_data = np.asarray(train_data)
    check_split_length(train_data, block_size, "training split")

    params = [p for p in model.parameters() if p.requires_grad]
    if optimizer is None:
        optimizer = AdamW(params, lr=lr, weight_decay=weight_decay)
    result = TrainResult()
    model.train()
    t0 = time.perf_counter()
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # checked by name below
        for step in range(start + 1, start + steps + 1):
            if lr_at is not None:
                for group in optimizer.param_groups:
                    group["lr"] = lr_at(step - 1)
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


def evaluate(model, data, block_size=None, batch_size=32, max_tokens=None):
    """Mean cross-entropy (nats/token) over every target position of ``data``, deterministically.

    Runs the model under ``minigrad.no_grad()`` on the fixed windows of
    ``gpt.data.eval_windows`` (stride T, the last aligned to the end; with ``max_tokens``, about
    that many positions spread evenly over a larger split), ``batch_size`` windows at a time,
    and averages ``-log softmax(logits)[target]``, taken in float64, each position counted once.

    Args:
        model: a ``gpt.GPT``.  data: 1-D int token ids, length >= T + 1.
        block_size: T (default ``model.config.block_size``).
        batch_size: windows per forward pass (memory only; the result does not depend on it).
        max_tokens: cap on the evaluated target positions (None: all).

    Returns:
        ``float`` (nan/inf when the model is broken).

    Raises:
        ValueError / TypeError: the split is too short, or a size is not a positive int.
    """
    block_size = int(model.config.block_size) if block_size is None else block_size
    batch_size = positive_int(batch_size, "batch_size", "evaluate")
    x, y, mask = eval_windows(np.asarray(data), block_size, max_tokens)  # (W, T) each
    was_training, total = model.training, 0.0
    model.eval()
    try:
        with minigrad.no_grad(), np.errstate(over="ignore", invalid="ignore"):
            for i in range(0, x.shape[0], batch_size):
                logits, _ = model(x[i:i + batch_size])
                z = np.asarray(logits.data, dtype=np.float64)  # (b, T, V)
                m = z.max(axis=-1, keepdims=True)  # (b, T, 1)
                lse = np.log(np.exp(z - m).sum(axis=-1)) + m[..., 0]  # (b, T)
                picked = np.take_along_axis(z, y[i:i + batch_size, :, None], axis=-1)[..., 0]
                total += float((lse - picked)[mask[i:i + batch_size]].sum())
    finally:
        model.train(was_training)
    return total / int(mask.sum())


def estimate_loss(model, data, rng, block_size=None, batch_size=32, eval_iters=1):
    """The loss on random batches drawn from ``rng`` (advanced): the chapter's final estimate
    (one batch), or nanoGPT's ``estimate_loss`` (the mean over ``eval_iters`` batches).

    Args: ``model`` (a ``gpt.GPT``), ``data`` (1-D int ids), ``rng`` (Generator), ``block_size``
    (default ``model.config.block_size``), ``batch_size``, ``eval_iters`` (>= 1). Returns the
    mean of the batches' mean losses (nats/token), under ``no_grad``.
    """
    block_size = int(model.config.block_size) if block_size is None else block_size
    eval_iters = positive_int(eval_iters, "eval_iters", "estimate_loss")
    losses = []
    with minigrad.no_grad():
        for _ in range(eval_iters):
            x, y = get_batch(np.asarray(data), block_size, batch_size, rng)
            _, loss = model(x, y)
            losses.append(float(loss.item()))
    return losses[0] if eval_iters == 1 else float(np.mean(losses))
