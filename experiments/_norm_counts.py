"""LayerNorm and RMSNorm as workloads: what ``norm_cost`` measures and ``four_variants`` cites.

- ``make_inputs``, ``workload``: random activations of shape (B, T, C) and one norm's forward
  (and backward) pair from ``layers/layernorm.py`` and ``layers/rmsnorm.py`` run on them, with
  the model's eps (``gpt/model.py``);
- ``count``, ``fused_min_bytes``: FLOPs and bytes of a workload, traced from the code
  (``experiments/_opcount.py`` states the counting model);
- ``load_claim``: the ``claim`` block of a ``python -m experiments.norm_cost`` results.json,
  for another report to cite (``four_variants --norm-cost PATH``).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Dict

import numpy as np

from layers.layernorm import layernorm_backward, layernorm_forward
from layers.rmsnorm import rmsnorm_backward, rmsnorm_forward

from experiments._opcount import totals, trace

__all__ = ["PASSES", "NORMS", "LN_EPS", "RMS_EPS", "SCHEMA_VERSION", "make_inputs", "workload",
           "fused_min_bytes", "count", "load_claim"]

PASSES = ("forward", "forward_backward")
NORMS = ("ln", "rms")
LN_EPS, RMS_EPS = 1e-5, 1e-6        # the model's (gpt/model.py)
#: ``schema_version`` of norm_cost's results.json (its ``RESULTS_SCHEMA``).
SCHEMA_VERSION = 1


def make_inputs(shape, dtype, seed: int) -> Dict[str, np.ndarray]:
    """Random activations x, upstream gradient dout (shape (B, T, C)), weight and bias (C,)."""
    rng = np.random.default_rng(seed)
    C = shape[-1]
    return {"x": (rng.standard_normal(shape) * 2.0 + 0.5).astype(dtype),
            "dout": rng.standard_normal(shape).astype(dtype),
            "weight": (1.0 + 0.1 * rng.standard_normal(C)).astype(dtype),
            "bias": (0.1 * rng.standard_normal(C)).astype(dtype)}


def workload(norm: str, pass_: str) -> Callable:
    """``f(x, dout, weight, bias)`` running one norm's forward (and backward) pair once."""
    if norm == "ln":
        def fwd(x, w, b):
            return layernorm_forward(x, w, b, LN_EPS)
        bwd = layernorm_backward
    else:
        def fwd(x, w, b):
            return rmsnorm_forward(x, w, RMS_EPS)
        bwd = rmsnorm_backward
    if pass_ == "forward":
        def f(x, dout, w, b):
            return fwd(x, w, b)
    else:
        def f(x, dout, w, b):
            out, cache = fwd(x, w, b)
            return out, cache, bwd(dout, cache)
    return f


def fused_min_bytes(norm: str, pass_: str, inputs: Dict[str, np.ndarray]) -> int:
    """Bytes a fused kernel must move at least: its array inputs read once and its outputs
    written once. Forward: reads x, weight (and bias), writes out and the cache (xhat, rstd).
    Forward+backward adds the backward: reads dout and the cache (xhat, weight, rstd), writes
    dx, dweight (and dbias)."""
    x, dout, w, b = inputs["x"], inputs["dout"], inputs["weight"], inputs["bias"]
    if norm == "ln":
        out, cache = layernorm_forward(x, w, b, LN_EPS)
        params = (w, b)
    else:
        out, cache = rmsnorm_forward(x, w, RMS_EPS)
        params = (w,)
    xhat, _, rstd = cache
    total = x.nbytes + sum(p.nbytes for p in params) + out.nbytes + xhat.nbytes + rstd.nbytes
    if pass_ == "forward_backward":
        bwd = layernorm_backward if norm == "ln" else rmsnorm_backward
        grads = bwd(dout, cache)
        total += (dout.nbytes + xhat.nbytes + w.nbytes + rstd.nbytes
                  + sum(g.nbytes for g in grads))
    return int(total)


def count(norm: str, pass_: str, inputs: Dict[str, np.ndarray]) -> Dict[str, Any]:
    """FLOPs and unfused bytes of one workload, traced from the code (``_opcount.trace``)."""
    f = workload(norm, pass_)
    _, records = trace(f, inputs["x"], inputs["dout"], inputs["weight"], inputs["bias"])
    t = totals(records)
    t["bytes_unfused"] = t["bytes_read"] + t["bytes_written"]
    t["bytes_fused_min"] = fused_min_bytes(norm, pass_, inputs)
    t["ops"] = [list(r) for r in records]
    return t


def load_claim(path) -> Dict[str, Any]:
    """Read the ``claim`` block of a norm_cost ``results.json`` (for other reports to cite).

    Returns:
        ``{"quote", "flops_ratio": {"forward", "forward_backward"}, "time_ratio": {"shape",
        "forward", "forward_backward"}, "verdict": [str]}``.

    Raises:
        OSError: the file cannot be read.  ValueError: not JSON, or not a norm_cost results file
        of this schema version.
    """
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not JSON: {e}") from None
    if (not isinstance(doc, dict) or doc.get("experiment") != "norm_cost"
            or doc.get("schema_version") != SCHEMA_VERSION or "claim" not in doc):
        raise ValueError(f"{path} is not a norm_cost results.json (schema_version "
                         f"{SCHEMA_VERSION})")
    return doc["claim"]
