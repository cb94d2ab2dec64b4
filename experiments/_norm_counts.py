"""LayerNorm and RMSNorm as workloads, with their FLOPs and bytes counted from the code itself.

``trace(fn, *arrays)`` runs ``fn`` on views of ``arrays`` whose every NumPy operation (ufunc
calls, ufunc reductions such as the sum inside ``mean``, and ``np.einsum``) is computed normally
and recorded: the counts come from the code's own operations, so they change when it changes.

Counting model (used everywhere):

- FLOPs: an elementwise ufunc costs one FLOP per output element; a reduction of n elements into
  m results costs n - m additions (``mean`` is that sum plus a division ufunc per result);
  ``np.einsum`` costs (operands - 1) multiplications per point of its iteration space plus
  (space - output size) additions.
- Bytes (unfused, NumPy's own execution): every operation reads each array operand once and
  writes its result once (``nbytes``); scalars are free; a broadcast operand counts its own size;
  caches are otherwise ignored. Reshapes and views are free.
- Fused minimum: a fused kernel reads its array inputs once and writes its outputs once.

The workloads are ``layers/layernorm.py`` and ``layers/rmsnorm.py`` with the model's eps (used
by ``norm_cost`` and ``four_variants``); ``load_claim`` reads the ``claim`` block of a
``python -m experiments.norm_cost`` results.json for another report to cite.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable, List, NamedTuple

import numpy as np

from layers.layernorm import layernorm_backward, layernorm_forward
from layers.rmsnorm import rmsnorm_backward, rmsnorm_forward

PASSES = ("forward", "forward_backward")
NORMS = ("ln", "rms")
LN_EPS, RMS_EPS = 1e-5, 1e-6        # the model's (gpt/model.py)
SCHEMA_VERSION = 1                  # of norm_cost's results.json
FORWARD = {"ln": lambda x, w, b: layernorm_forward(x, w, b, LN_EPS),
           "rms": lambda x, w, b: rmsnorm_forward(x, w, RMS_EPS)}
BACKWARD = {"ln": layernorm_backward, "rms": rmsnorm_backward}


# ----------------------------------------------------------------------------- the tracer

class OpRecord(NamedTuple):
    """One recorded NumPy operation: its name, FLOPs, bytes read and bytes written."""

    name: str
    flops: int
    bytes_read: int
    bytes_written: int


_LOG: List[List[OpRecord]] = []  # a stack of active traces


def _raw(a):
    return a.view(np.ndarray) if isinstance(a, _Traced) else a


def _nbytes(a) -> int:
    return int(a.nbytes) if isinstance(a, np.ndarray) and a.ndim > 0 else 0


def _record(rec: OpRecord) -> None:
    if _LOG:   # a traced array used after its trace counts nowhere
        _LOG[-1].append(rec)


def _traced(result):
    return result.view(_Traced) if isinstance(result, np.ndarray) and result.ndim else result


class _Traced(np.ndarray):
    """An ndarray view whose operations are computed on plain arrays and recorded."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        raw = [_raw(a) for a in inputs]
        out = kwargs.get("out")
        if out is not None:
            kwargs["out"] = tuple(_raw(o) for o in out)
        result = getattr(ufunc, method)(*raw, **kwargs)
        first = result[0] if isinstance(result, tuple) else result
        if method == "__call__":   # elementwise: one FLOP per output element (of each output)
            flops = int(np.size(first)) * (len(result) if isinstance(result, tuple) else 1)
        elif method == "reduce":   # n values into m: n - m additions
            flops = int(np.size(raw[0])) - int(np.size(first))
        else:
            raise NotImplementedError(f"opcount: ufunc method {method!r} is not counted")
        name = ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}"
        _record(OpRecord(name, flops, sum(map(_nbytes, raw)), _nbytes(first)))
        if out is not None:
            return out[0] if len(out) == 1 else out
        return _traced(result)

    def __array_function__(self, func, types, args, kwargs):
        if func is not np.einsum:
            return super().__array_function__(func, types, args, kwargs)
        subscripts, raw = args[0], [_raw(a) for a in args[1:]]
        result = np.einsum(subscripts, *raw, **kwargs)
        sizes = {}
        for letters, a in zip(subscripts.replace(" ", "").split("->")[0].split(","), raw):
            sizes.update(zip(letters, a.shape))
        space = math.prod(sizes.values())
        flops = (len(raw) - 1) * space + (space - int(np.size(result)))
        _record(OpRecord(f"einsum {subscripts}", flops, sum(map(_nbytes, raw)), _nbytes(result)))
        return _traced(result)


def trace(fn: Callable, *arrays):
    """Run ``fn(*arrays)`` with every ndarray argument (also inside tuples: a ``cache``) traced.

    Returns:
        ``(result, records)``: ``fn``'s return value (arrays as traced views, same values) and
        the ``OpRecord`` list in execution order.

    Raises:
        NotImplementedError: ``fn`` uses a ufunc method other than a call or ``reduce``.
    """
    def wrap(a):
        return tuple(map(wrap, a)) if isinstance(a, tuple) else _traced(a)

    _LOG.append([])
    try:
        result = fn(*map(wrap, arrays))
    finally:
        records = _LOG.pop()
    return result, records


def totals(records: List[OpRecord]) -> dict:
    """Sum of ``flops``, ``bytes_read`` and ``bytes_written`` over records (``int`` each)."""
    return {k: sum(getattr(r, k) for r in records)
            for k in ("flops", "bytes_read", "bytes_written")}


# ----------------------------------------------------------------------------- the workloads

def make_inputs(shape, dtype, seed: int) -> dict:
    """Random activations x, upstream gradient dout (shape (B, T, C)), weight and bias (C,)."""
    rng = np.random.default_rng(seed)
    C = shape[-1]
    return {"x": (rng.standard_normal(shape) * 2.0 + 0.5).astype(dtype),
            "dout": rng.standard_normal(shape).astype(dtype),
            "weight": (1.0 + 0.1 * rng.standard_normal(C)).astype(dtype),
            "bias": (0.1 * rng.standard_normal(C)).astype(dtype)}


def workload(norm: str, pass_: str) -> Callable:
    """``f(x, dout, weight, bias)`` running one norm's forward (and backward) once."""
    fwd, bwd = FORWARD[norm], BACKWARD[norm]
    if pass_ == "forward":
        return lambda x, dout, w, b: fwd(x, w, b)

    def f(x, dout, w, b):
        out, cache = fwd(x, w, b)
        return out, cache, bwd(dout, cache)
    return f


def fused_min_bytes(norm: str, pass_: str, inputs: dict) -> int:
    """Bytes a fused kernel must move at least. Forward: reads x, weight (and bias), writes out
    and the cache (xhat, rstd). The backward adds: reads dout and the cache (xhat, weight, rstd),
    writes dx, dweight (and dbias)."""
    x, dout, w = inputs["x"], inputs["dout"], inputs["weight"]
    params = (w, inputs["bias"]) if norm == "ln" else (w,)
    out, cache = FORWARD[norm](x, w, inputs["bias"])
    xhat, _, rstd = cache
    total = x.nbytes + sum(p.nbytes for p in params) + out.nbytes + xhat.nbytes + rstd.nbytes
    if pass_ == "forward_backward":
        grads = BACKWARD[norm](dout, cache)
        total += dout.nbytes + xhat.nbytes + w.nbytes + rstd.nbytes + sum(g.nbytes for g in grads)
    return int(total)


def count(norm: str, pass_: str, inputs: dict) -> dict:
    """FLOPs and bytes of one workload: ``flops, bytes_read, bytes_written, bytes_unfused,
    bytes_fused_min`` and ``ops`` (one ``[name, flops, bytes_read, bytes_written]`` an op)."""
    _, records = trace(workload(norm, pass_), inputs["x"], inputs["dout"], inputs["weight"],
                       inputs["bias"])
    t = totals(records)
    t["bytes_unfused"] = t["bytes_read"] + t["bytes_written"]
    t["bytes_fused_min"] = fused_min_bytes(norm, pass_, inputs)
    t["ops"] = [list(r) for r in records]
    return t


def load_claim(path) -> dict:
    """The ``claim`` block of a norm_cost ``results.json``: ``{"quote", "flops_ratio": {"forward",
    "forward_backward"}, "time_ratio": {"shape", "forward", "forward_backward"}, "verdict"}``.

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
