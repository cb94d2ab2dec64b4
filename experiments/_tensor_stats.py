"""``tensor_stats``: the chapter's hidden-state statistics of one array, in NumPy.

The chapter's step 4 ("Instrument hidden-state statistics")::

    flat = x.detach().float().reshape(-1)
    mean = flat.mean()
    var = flat.var(unbiased=False)             # population variance (divide by n)
    std = torch.sqrt(var + 1e-12)
    centered = flat - mean
    kurt = (centered ** 4).mean() / (std ** 4 + 1e-12)
    return {"mean", "var", "min", "max", "kurtosis"}

Same formulas, the same two 1e-12 guards. The kurtosis is the plain fourth standardised moment
(3 for a Gaussian, not the "excess" 0); for a constant array var = 0, std = 1e-6 and the
kurtosis is 0. Computed in float64 (the chapter's ``.float()`` is float32; it upcasts half
precision, and our activations are float32 or float64 already).
"""
from __future__ import annotations

from typing import Dict

import numpy as np

__all__ = ["tensor_stats", "STAT_NAMES", "GUARD"]

STAT_NAMES = ("mean", "var", "min", "max", "kurtosis")
GUARD = 1e-12   # the chapter's guard, in both the std and the kurtosis denominator


def tensor_stats(x) -> Dict[str, float]:
    """Mean, population variance, min, max and kurtosis of all the elements of ``x``.

    Args:
        x: array-like of any shape with at least one element (a ``minigrad.Tensor`` is read
            through ``np.asarray``).

    Returns:
        ``{"mean", "var", "min", "max", "kurtosis"}`` as Python floats.

    Raises:
        ValueError: ``x`` is empty.
    """
    flat = np.asarray(x, dtype=np.float64).reshape(-1)          # (n,)
    if flat.size == 0:
        raise ValueError("tensor_stats: empty array")
    mean = flat.mean()
    centered = flat - mean
    var = np.mean(centered * centered)                          # population variance
    std = np.sqrt(var + GUARD)
    kurt = np.mean(centered ** 4) / (std ** 4 + GUARD)
    return {"mean": float(mean), "var": float(var), "min": float(flat.min()),
            "max": float(flat.max()), "kurtosis": float(kurt)}
