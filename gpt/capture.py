"""Read the residual stream of a ``gpt.GPT`` as it flows: the input of each block's ln1 and ln2.

The chapter's step 4 ("Instrument hidden-state statistics") records ``tensor_stats(x)`` of the
residual stream ``x`` entering a block's attention (``stats["block_03_pre_attn"]``). This module
gives the arrays themselves::

    with capture_residual_stream(model) as captured:
        model(idx)
    captured["blocks.0.pre_attn"]    # (B, T, C) ndarray: x entering block 0's ln1 / attention
    captured["blocks.0.pre_mlp"]     # (B, T, C): x + attn(ln1(x)), entering ln2 / the MLP

Each entry is a copy of the array (no graph node, no gradient), so capturing changes neither
the forward output nor any gradient. A second forward pass inside the block overwrites the
entries.
"""
from __future__ import annotations

import contextlib
from typing import Dict, Iterator

import numpy as np

import minigrad

__all__ = ["capture_residual_stream", "tensor_stats", "ResidualStats", "STAT_NAMES"]


@contextlib.contextmanager
def capture_residual_stream(model) -> Iterator[Dict[str, np.ndarray]]:
    """Within the block, every forward pass of ``model`` records its residual stream.

    Args:
        model: a ``gpt.GPT`` (its ``blocks``, each a ``gpt.model.Block``).

    Yields:
        A dict, filled by each forward pass: ``"blocks.{i}.pre_attn"`` and
        ``"blocks.{i}.pre_mlp"`` -> ``np.ndarray`` (B, T, C) in the model's dtype, in block
        order.

    Raises:
        RuntimeError: the model's blocks are already being captured (nesting is refused).
    """
    blocks = list(model.blocks)
    if any(b.capture is not None for b in blocks):
        raise RuntimeError("capture_residual_stream: this model is already being captured")
    captured: Dict[str, np.ndarray] = {}
    for i, block in enumerate(blocks):
        def record(site: str, x: np.ndarray, prefix: str = f"blocks.{i}.") -> None:
            captured[prefix + site] = x
        block.capture = record
    try:
        yield captured
    finally:
        for block in blocks:
            block.capture = None


# The chapter's step 4, in PyTorch:
#     flat = x.detach().float().reshape(-1); mean = flat.mean()
#     var = flat.var(unbiased=False)                 # population variance (divide by n)
#     std = torch.sqrt(var + 1e-12); centered = flat - mean
#     kurt = (centered ** 4).mean() / (std ** 4 + 1e-12)
# The same formulas and guards, in float64: the kurtosis is the plain fourth standardised moment
# (3 for a Gaussian); for a constant array var = 0, std = 1e-6 and the kurtosis is 0.
STAT_NAMES = ("mean", "var", "min", "max", "kurtosis")


def tensor_stats(x) -> Dict[str, float]:
    """Mean, population variance, min, max and kurtosis of all the entries of ``x`` (any shape,
    at least one entry), as Python floats: the chapter's ``tensor_stats`` (step 4)."""
    flat = np.asarray(x, dtype=np.float64).reshape(-1)          # (n,)
    mean = flat.mean()
    centered = flat - mean
    var = np.mean(centered * centered)                          # population variance
    std = np.sqrt(var + 1e-12)
    kurt = np.mean(centered ** 4) / (std ** 4 + 1e-12)
    return {"mean": float(mean), "var": float(var), "min": float(flat.min()),
            "max": float(flat.max()), "kurtosis": float(kurt)}


class ResidualStats:
    """Called as ``probe(step, model)``: ``tensor_stats`` of the residual stream entering every
    block's attention and MLP, on the fixed batch ``idx`` (B, T), under ``no_grad`` and in eval
    mode (it draws no random numbers, so it changes no loss). ``rows``: one dict per (step,
    site) with the statistics (a non-finite one as its string, for strict JSON)."""

    def __init__(self, idx: np.ndarray) -> None:
        self.idx, self.rows = idx, []

    def __call__(self, step: int, model) -> None:
        was_training = model.training
        model.eval()
        try:
            with minigrad.no_grad(), capture_residual_stream(model) as captured, \
                    np.errstate(all="ignore"):
                model(self.idx)
        finally:
            model.train(was_training)
        for site, x in captured.items():
            self.rows.append({"step": int(step), "site": site, **{
                k: v if np.isfinite(v) else str(v) for k, v in tensor_stats(x).items()}})

    def result(self) -> Dict:
        return {"probe": f"the first {self.idx.shape[0]} validation windows of "
                         f"{self.idx.shape[1]} tokens", "rows": self.rows}
