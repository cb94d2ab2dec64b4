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

__all__ = ["capture_residual_stream"]


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
