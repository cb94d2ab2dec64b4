"""FLOPs and bytes of LayerNorm and RMSNorm, counted by running our own code on traced arrays.

``trace(fn, *arrays)`` runs ``fn`` on views of ``arrays`` whose every NumPy operation (a ufunc
call, a ufunc reduction such as the sum inside ``mean``, ``np.einsum``) is computed as usual and
recorded, so the counts change when the code changes. The counting model:

- FLOPs: an elementwise ufunc costs one FLOP per output element; a reduction of n values to m
  costs n - m additions (``mean`` is that sum and one division per result); ``np.einsum`` costs
  (operands - 1) multiplications per point of its iteration space and (space - output size)
  additions.
- Bytes, unfused (NumPy's own execution): every operation reads each array operand once and
  writes its result once; scalars, reshapes and views are free; caches are ignored.
- Bytes, fused minimum: one kernel reads its inputs once and writes its outputs once.

The workloads are ``layers/layernorm.py`` and ``layers/rmsnorm.py`` with the model's eps.
"""
import math

import numpy as np

from layers.layernorm import layernorm_backward, layernorm_forward
from layers.rmsnorm import rmsnorm_backward, rmsnorm_forward

PASSES = ("forward", "forward_backward")
FORWARD = {"ln": lambda x, w, b: layernorm_forward(x, w, b, 1e-5),   # the model's eps
           "rms": lambda x, w, b: rmsnorm_forward(x, w, 1e-6)}
BACKWARD = {"ln": layernorm_backward, "rms": rmsnorm_backward}
_ops = []   # what the running trace recorded: (name, flops, bytes_read, bytes_written)


def _raw(a):
    return a.view(np.ndarray) if isinstance(a, Traced) else a


def _nbytes(a):
    return int(a.nbytes) if isinstance(a, np.ndarray) and a.ndim else 0


def _traced(a):
    return a.view(Traced) if isinstance(a, np.ndarray) and a.ndim else a


class Traced(np.ndarray):
    """An ndarray view whose operations are computed on plain arrays and recorded in ``_ops``."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        raw = [_raw(a) for a in inputs]
        if "out" in kwargs:        # np.mean divides into its sum's array
            kwargs["out"] = tuple(map(_raw, kwargs["out"]))
        result = getattr(ufunc, method)(*raw, **kwargs)
        if method == "__call__":   # elementwise: one FLOP per output element
            name, flops = ufunc.__name__, np.size(result)
        else:                      # "reduce": n values into m, n - m additions
            name, flops = f"{ufunc.__name__}.{method}", np.size(raw[0]) - np.size(result)
        _ops.append((name, int(flops), sum(map(_nbytes, raw)), _nbytes(result)))
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
        flops = (len(raw) - 1) * space + space - np.size(result)
        _ops.append((f"einsum {subscripts}", int(flops), sum(map(_nbytes, raw)), _nbytes(result)))
        return _traced(result)


def trace(fn, *arrays):
    """``(fn(*arrays), ops)``: ``fn`` run on traced views of ``arrays`` (also inside a tuple: a
    cache); ``ops``: ``(name, flops, bytes_read, bytes_written)`` of each NumPy operation."""
    def wrap(a):
        return tuple(map(wrap, a)) if isinstance(a, tuple) else _traced(a)

    _ops.clear()
    result = fn(*map(wrap, arrays))
    ops = list(_ops)
    _ops.clear()
    return result, ops


def make_inputs(shape, dtype="float64", seed=0):
    """Random ``x`` and ``dout`` of ``shape`` (B, T, C), ``weight`` and ``bias`` (C,)."""
    rng = np.random.default_rng(seed)
    C = shape[-1]
    return {"x": (rng.standard_normal(shape) * 2.0 + 0.5).astype(dtype),
            "dout": rng.standard_normal(shape).astype(dtype),
            "weight": (1.0 + 0.1 * rng.standard_normal(C)).astype(dtype),
            "bias": (0.1 * rng.standard_normal(C)).astype(dtype)}


def workload(norm, pass_):
    """``f(x, dout, weight, bias)``: ``norm``'s forward ("ln", "rms"), and backward in
    "forward_backward"."""
    fwd, bwd = FORWARD[norm], BACKWARD[norm]
    if pass_ == "forward":
        return lambda x, dout, w, b: fwd(x, w, b)
    return lambda x, dout, w, b: bwd(dout, fwd(x, w, b)[1])


def fused_min_bytes(norm, pass_, x, dout, w, b):
    """Bytes one fused kernel a pass must move: its inputs read once, its outputs written once.
    Forward: x, weight (and bias) in; out, xhat, rstd out. Backward: dout, xhat, weight, rstd
    in; the gradients out."""
    out, (xhat, _, rstd) = FORWARD[norm](x, w, b)
    arrays = [x, w, b, out, xhat, rstd] if norm == "ln" else [x, w, out, xhat, rstd]
    if pass_ == "forward_backward":
        arrays += [dout, xhat, w, rstd, *BACKWARD[norm](dout, (xhat, w, rstd))]
    return sum(a.nbytes for a in arrays)


def count(norm, pass_, inputs):
    """``{"flops", "bytes_unfused", "bytes_fused_min", "ops"}`` of a workload on ``inputs``."""
    args = [inputs[k] for k in ("x", "dout", "weight", "bias")]
    _, ops = trace(workload(norm, pass_), *args)
    return {"flops": sum(op[1] for op in ops), "bytes_unfused": sum(op[2] + op[3] for op in ops),
            "bytes_fused_min": fused_min_bytes(norm, pass_, *args), "ops": ops}


def norm_flop_ratios(shape):
    """``{"forward": r, "forward_backward": r}``: RMSNorm's FLOPs over LayerNorm's at ``shape``
    (B, T, C), counted from our code."""
    inputs = make_inputs(shape)
    return {p: count("rms", p, inputs)["flops"] / count("ln", p, inputs)["flops"] for p in PASSES}
