"""``PairFunction``: the ``minigrad.Function`` adapter shared by the layers whose cache is a
tuple of arrays.

A layer file defines its maths as a NumPy pair::

    <name>_forward(*arrays, **options) -> (out, cache)     # cache: a tuple of np.ndarrays
    <name>_backward(dout, cache) -> gradient(s)            # one per positional input

and its adapter names the pair::

    class RMSNormFunction(PairFunction):
        pair = (rmsnorm_forward, rmsnorm_backward)

``forward`` keeps the cache with ``ctx.save_for_backward`` (so the engine refuses a backward
after an in-place change of a saved input) and ``backward`` hands it back unchanged. A layer
whose cache holds more than arrays (an axis, a scale, a flag) writes its own adapter instead.
"""
from __future__ import annotations

from typing import Callable, Tuple

from minigrad import Function


class PairFunction(Function):
    """A ``minigrad.Function`` from ``pair = (forward, backward)``, two NumPy functions.

    Subclasses set ``pair``; ``apply`` takes what the pair's forward takes (Tensors where
    gradients are wanted) and returns a Tensor. See the module docstring for the contract.
    """

    pair: Tuple[Callable, Callable]

    @staticmethod
    def forward(ctx, *args, **kwargs):
        """Run the pair's forward on arrays; save its cache (a tuple of arrays) on ``ctx``."""
        out, cache = ctx.fn_cls.pair[0](*args, **kwargs)
        ctx.save_for_backward(*cache)
        return out

    @staticmethod
    def backward(ctx, dout):
        """Run the pair's backward on the saved cache: the gradients, in the inputs' shapes."""
        return ctx.fn_cls.pair[1](dout, ctx.saved_tensors)
