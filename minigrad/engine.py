"""Reverse-mode automatic differentiation: ``Tensor``, ``backward``, ``Function``, ``from_pair``.

A ``Tensor`` holds an ``np.ndarray`` (``data``) and, after ``backward``, the gradient of the
output with respect to it (``grad``, same shape and dtype). Every operation is a ``Function``
(PyTorch's ``torch.autograd.Function``): ``forward`` computes the output array from the input
arrays and saves what backward needs; ``backward`` maps the output's gradient to one gradient
per input (a vector-Jacobian product). ``Function.apply`` runs forward and, when an input
requires grad (and grad mode is on), records the node: the output keeps its ``Context`` (the
Function, its inputs, the arrays it saved). ``Tensor.backward`` walks that graph back:

1. sort the Tensors topologically, inputs before outputs, with an explicit stack instead of
   recursion (HIPS/autograd's ``toposort``), so a chain of 100,000 operations works;
2. visit them in reverse order: a node's gradient is complete (every path through it has
   contributed) before its backward runs;
3. accumulate: an input's gradient is added to what it already received, never assigned, so
   a Tensor used twice (a residual, a tied embedding) gets the sum of both paths.

``from_pair`` makes a Function of a NumPy pair ``forward -> (out, cache)`` /
``backward(dout, cache)``: every hand-derived layer of ``layers/`` is one.

Read next: ``ops.py``, the primitive Functions with their formulas and Tensor's operators.
This file imports nothing of minigrad. PyTorch's rules (dtype promotion, indexing, in-place
operations and their version counters) live in ``minigrad/pytorch_compat/``, which fills the
few ``hooks`` below when ``minigrad`` is imported; here each hook does nothing.
"""
from __future__ import annotations

import inspect
import threading
from typing import Any, Optional, Tuple

import numpy as np


class Tensor:
    """An n-dimensional array that records the operations done on it for reverse mode.

    Args:
        data: array-like; wrapped with ``np.asarray`` (no copy when it is already an ndarray,
            like ``torch.from_numpy``). Any numeric or bool dtype. Python floats (a float or
            nested lists of them) become float32, PyTorch's default dtype; NumPy arrays and
            scalars keep their dtype.
        requires_grad (bool): whether gradients flow to this Tensor (a leaf). Only floating
            dtypes may require grad.
        dtype: optional dtype to convert ``data`` to.

    Attributes:
        data (np.ndarray): the values.
        grad (np.ndarray | None): same shape and dtype as ``data``; filled by ``backward`` on
            leaves (and on Tensors that called ``retain_grad``), accumulated across calls until
            set to None (``Module.zero_grad``); an assignment is checked (``grad``).

    Raises:
        TypeError: if ``data`` is not numeric (object or string arrays), or an integer/bool
            Tensor is asked to require grad.
    """

    def __init__(self, data: Any, requires_grad: bool = False, dtype=None) -> None:
        self._data = hooks.array(data.data if isinstance(data, Tensor) else data, dtype)
        if self._data.dtype.kind not in "biuf":
            raise TypeError(f"Tensor data must be numeric or bool, got dtype {self._data.dtype}")
        self._grad: Optional[np.ndarray] = None
        self._ctx: Optional[Context] = None      # the node that made this Tensor; None: a leaf
        self._retains_grad = False
        self._requires_grad = False
        self.requires_grad = requires_grad

    def backward(self, gradient: Any = None, retain_graph: bool = False) -> None:
        """Accumulate d(self)/d(leaf) . gradient into ``leaf.grad`` for every leaf that requires
        grad (``torch.Tensor.backward``).

        Args:
            gradient: the upstream gradient, same shape as ``self`` (array or Tensor); cast to
                ``self.dtype``. May be omitted only when ``self`` has one element.
            retain_graph (bool): keep the saved arrays so that backward can run again.

        Raises:
            RuntimeError: if ``self`` does not require grad; if ``gradient`` is omitted for a
                Tensor of more than one element; if the graph was already freed by an earlier
                backward; if an array saved for backward was modified in place; if a Function's
                backward returns a gradient of the wrong count, shape or dtype.
            ValueRuntimeError: if ``gradient`` has the wrong shape.
        """
        if not self._requires_grad:
            raise RuntimeError("backward: this Tensor does not require grad and has no grad_fn")
        if gradient is None:
            if self._data.size != 1:
                raise RuntimeError(
                    f"backward: grad can be implicitly created only for a Tensor with one element; "
                    f"this one has shape {self.shape}, so pass gradient= of that shape")
            gradient = np.ones_like(self._data)
        grad = np.asarray(gradient.data if isinstance(gradient, Tensor) else gradient)
        if grad.shape != self.shape:
            raise ValueRuntimeError(f"backward: grad has shape {grad.shape}, expected the "
                                    f"Tensor's shape {self.shape}")
        grads = {id(self): grad.astype(self.dtype, copy=False)}  # id -> gradient summed so far
        for t in reversed(toposort(self)):
            g = grads.pop(id(t), None)
            if g is None:               # no gradient reached t (its users returned None)
                continue
            if t._ctx is None or t._retains_grad:
                t.grad = np.array(g, copy=True) if t.grad is None else _add(t.grad, g)
            ctx = t._ctx
            if ctx is None:             # a leaf: nothing further back
                continue
            ctx.check_not_freed()
            hooks.before_backward(ctx)
            in_grads = ctx.check_grads(ctx.fn_cls.backward(ctx, g))
            for inp, gi in zip(ctx.inputs, in_grads):
                if gi is not None:      # accumulate: a Tensor used twice gets the sum
                    prev = grads.get(id(inp))
                    grads[id(inp)] = gi if prev is None else _add(prev, gi)
            if not retain_graph:
                ctx.free()

    @property
    def grad(self) -> Optional[np.ndarray]:
        """The gradient (an ``np.ndarray`` of ``data``'s shape and dtype) or None. Assigning
        takes None, an ndarray or a Tensor (its array) of exactly that shape and dtype, as
        ``torch.Tensor.grad``'s assignment checks.

        Raises:
            TypeError: assigning anything else (a list, a number).
            RuntimeError: assigning another shape or dtype.
        """
        return self._grad

    @grad.setter
    def grad(self, value: Any) -> None:
        if value is not None:
            value = value._data if isinstance(value, Tensor) else value
            if not isinstance(value, np.ndarray):
                raise TypeError(f"assigned grad must be an np.ndarray, a Tensor or None, got "
                                f"{type(value).__name__}")
            for what, got, want in (("shape", value.shape, self.shape),
                                    ("dtype", value.dtype, self.dtype)):
                if got != want:
                    raise RuntimeError(f"assigned grad has another {what}, {got}, than the "
                                       f"Tensor's {want}")
        self._grad = value

    @property
    def data(self) -> np.ndarray:
        """The underlying ``np.ndarray`` (shared, not copied); assigning replaces it.

        Raises:
            TypeError: assigning non-floating data to a Tensor that requires grad.
        """
        return self._data

    @data.setter
    def data(self, value: Any) -> None:
        arr = np.asarray(value.data if isinstance(value, Tensor) else value)
        if self._requires_grad and arr.dtype.kind != "f":
            raise TypeError(f"a Tensor that requires grad needs floating data, got {arr.dtype}")
        hooks.data_set(self, self._data, arr)
        self._data = arr

    @property
    def requires_grad(self) -> bool:
        """Whether gradients are computed for this Tensor."""
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        flag = bool(flag)
        if flag and self._data.dtype.kind != "f":
            raise TypeError(
                f"only floating-point Tensors can require gradients, got dtype {self._data.dtype}")
        if not flag and self._ctx is not None:
            raise RuntimeError(
                "requires_grad cannot be turned off on a non-leaf Tensor; use .detach()")
        self._requires_grad = flag

    @property
    def is_leaf(self) -> bool:
        """True when the Tensor was not made by a recorded operation."""
        return self._ctx is None

    @property
    def grad_fn(self):
        """The Function class that made this Tensor, or None for a leaf."""
        return None if self._ctx is None else self._ctx.fn_cls

    def retain_grad(self) -> None:
        """Keep ``.grad`` on this non-leaf Tensor during backward (``torch.Tensor.retain_grad``)."""
        self._retains_grad = True

    def detach(self) -> "Tensor":
        """A new leaf Tensor sharing ``data``, outside the graph."""
        t = Tensor(self._data)
        hooks.applied(None, t, (self,))     # a view of self, as a Function's output may be
        return t

    @property
    def shape(self) -> tuple:
        """Shape of ``data``."""
        return self._data.shape

    @property
    def dtype(self) -> np.dtype:
        """dtype of ``data``."""
        return self._data.dtype

    @property
    def ndim(self) -> int:
        """Number of axes."""
        return self._data.ndim

    def __repr__(self) -> str:
        body = np.array2string(self._data, separator=", ", prefix="Tensor(")
        extra = f", dtype={self.dtype}"
        if self._ctx is not None:
            extra += f", grad_fn={self._ctx.fn_cls.__name__}"
        elif self._requires_grad:
            extra += ", requires_grad=True"
        return f"Tensor({body}{extra})"


def _add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Two gradients summed; inf + -inf is NaN without NumPy's warning, as PyTorch is silent."""
    with np.errstate(invalid="ignore", over="ignore"):
        return a + b


def toposort(root: Tensor) -> list:
    """The Tensors that require grad reachable from ``root``, inputs before outputs.

    A depth-first search with an explicit stack: each Tensor is pushed once to open it (push
    its inputs) and once more, below them, to close it; it is appended when closed, after all
    its inputs.
    """
    order, visited = [], set()
    stack = [(root, False)]
    while stack:
        t, done = stack.pop()
        if done:
            order.append(t)
            continue
        if id(t) in visited:
            continue
        visited.add(id(t))
        stack.append((t, True))
        if t._ctx is not None:
            for inp in hooks.inputs(t._ctx):
                if isinstance(inp, Tensor) and inp._requires_grad and id(inp) not in visited:
                    stack.append((inp, False))
    return order


class Context:
    """What ``forward`` leaves for ``backward`` (``ctx`` in both methods).

    Attributes:
        needs_input_grad (tuple[bool, ...]): one flag per forward input: whether it is a Tensor
            that requires grad. A backward may skip computing gradients for False slots.
        saved_tensors (tuple[np.ndarray, ...]): the arrays given to ``save_for_backward``.
        Any other attribute may be set freely (``ctx.axis = axis``).
    """

    def __init__(self, fn_cls: type, needs_input_grad: Tuple[bool, ...]) -> None:
        self.fn_cls = fn_cls
        self.needs_input_grad = needs_input_grad
        self.inputs: Tuple[Any, ...] = ()
        self._saved: Tuple[np.ndarray, ...] = ()
        self._freed = False

    def save_for_backward(self, *arrays: np.ndarray) -> None:
        """Keep ``arrays`` (np.ndarray, NumPy scalar (kept as a 0-d array) or None) for ``backward``.

        Raises:
            TypeError: if an item is neither an np.ndarray nor None.
        """
        out = []
        for a in arrays:
            if isinstance(a, np.generic):
                a = np.asarray(a)  # a ufunc on a 0-d array returns a NumPy scalar
            elif a is not None and not isinstance(a, np.ndarray):
                raise TypeError(f"{self.fn_cls.__name__}: save_for_backward takes np.ndarrays, "
                                f"got {type(a).__name__}")
            out.append(a)
        self._saved = tuple(out)

    @property
    def saved_tensors(self) -> Tuple[np.ndarray, ...]:
        """The arrays saved in forward.

        Raises:
            RuntimeError: after the graph was freed by a backward without ``retain_graph``.
        """
        self.check_not_freed()
        return self._saved

    def free(self) -> None:
        """Drop the saved arrays and any attribute forward set (backward ran, unless retained)."""
        keep = {"fn_cls", "needs_input_grad", "inputs", "input_ctxs"}
        for k in [k for k in vars(self) if k not in keep]:
            delattr(self, k)
        self._saved, self._freed = (), True

    def check_not_freed(self) -> None:
        """Raise RuntimeError when the saved arrays were freed by an earlier backward."""
        if self._freed:
            raise RuntimeError(
                f"Trying to backward through the graph a second time (node "
                f"{self.fn_cls.__name__}): its saved arrays were freed by the first backward. "
                "Pass retain_graph=True to the first backward if you need to backward twice.")

    def check_grads(self, grads) -> tuple:
        """What ``backward`` returned, as one gradient per input (None for an input that is no
        Tensor requiring grad).

        Raises:
            RuntimeError: a wrong count of gradients, or one that is not an array or has the
                wrong shape or dtype, naming the Function.
        """
        name, n = self.fn_cls.__name__, len(self.inputs)
        grads = grads if isinstance(grads, tuple) else (grads,)
        if len(grads) != n:
            raise RuntimeError(f"{name}.backward returned {len(grads)} gradient(s), expected "
                               f"{n} (one per forward input)")
        out = []
        for i, (inp, g) in enumerate(zip(self.inputs, grads)):
            if g is None or not getattr(inp, "_requires_grad", False):
                out.append(None)
                continue
            g = np.asarray(g) if isinstance(g, np.generic) else g
            if not isinstance(g, np.ndarray):
                raise RuntimeError(f"{name}.backward returned a {type(g).__name__} for input "
                                   f"{i}; expected an np.ndarray of shape {inp.shape} and dtype "
                                   f"{inp.dtype}")
            for what, got, want in (("shape", g.shape, inp.shape), ("dtype", g.dtype, inp.dtype)):
                if got != want:
                    raise RuntimeError(f"{name}.backward returned a gradient of {what} {got} "
                                       f"for input {i}, expected the input's {what} {want}")
            out.append(g)
        return tuple(out)


class Function:
    """Base class for a graph node with a hand-written backward (``torch.autograd.Function``).

    A subclass defines two static methods that work on ``np.ndarray``s; ``apply`` wraps and
    unwraps the Tensors around them::

        class Mul(Function):
            @staticmethod
            def forward(ctx, a, b):               # arrays in, one array out
                ctx.save_for_backward(a, b)
                return a * b

            @staticmethod
            def backward(ctx, dout):              # dout has the output's shape and dtype
                a, b = ctx.saved_tensors
                return dout * b, dout * a         # one gradient (or None) per forward input

        c = Mul.apply(x, y)                       # x, y: Tensors, arrays or scalars

    * ``forward(ctx, *args, **kwargs) -> np.ndarray``: Tensor arguments arrive as their
      ``.data`` arrays; arguments that are not Tensors (arrays, scalars, keyword arguments)
      are passed unchanged and are constants. A NumPy scalar result becomes a 0-d array.
    * ``backward(ctx, grad_output) -> array | None | tuple``: one gradient per positional
      forward input (a bare array when there is one input, a tuple otherwise), each of its
      input's exact shape and dtype, or None (no gradient; a constant's slot is ignored).
      A backward must not modify ``grad_output`` in place.

    The engine checks what backward returns and raises a RuntimeError naming the Function on
    a wrong count, shape or dtype (``Context.check_grads``).
    """

    @staticmethod
    def forward(ctx: Context, *args: Any, **kwargs: Any) -> np.ndarray:  # pragma: no cover
        """Compute the output array from input arrays. Subclasses override it."""
        raise NotImplementedError

    @staticmethod
    def backward(ctx: Context, grad_output: np.ndarray):  # pragma: no cover
        """Map the output's gradient to one gradient per input. Subclasses override it."""
        raise NotImplementedError

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Tensor:
        """Run ``forward`` on the inputs and, in grad mode, record the node.

        Args:
            *args: Tensors (differentiable when they require grad), arrays or other constants.
            **kwargs: constants passed to ``forward``.

        Returns:
            Tensor: the output; ``requires_grad`` is True when a node was recorded.

        Raises:
            TypeError: if ``forward`` returns something that is not array-like.
        """
        arrays = [a._data if isinstance(a, Tensor) else a for a in args]
        needs = tuple(isinstance(a, Tensor) and a._requires_grad for a in args)
        ctx = Context(cls, needs)
        try:
            out = cls.forward(ctx, *arrays, **kwargs)
        except ValueError as e:     # NumPy refused the shapes: the error as the hook says
            raise hooks.forward_error(e) from None
        if not isinstance(out, (np.ndarray, np.generic, int, float, bool)):
            raise TypeError(f"{cls.__name__}.forward must return an np.ndarray, got "
                            f"{type(out).__name__}")
        result = Tensor(np.asarray(out))
        if any(needs) and is_grad_enabled():      # record the node
            result._requires_grad = True
            result._ctx = ctx
            ctx.inputs = args
        hooks.applied(result._ctx, result, args)
        return result


def from_pair(forward, backward, name: Optional[str] = None,
              wrt: Optional[Tuple[str, ...]] = None) -> type:
    """A ``Function`` made of a NumPy pair, the way llm.c pairs ``layernorm_forward`` and
    ``layernorm_backward`` in ``doc/layernorm/layernorm.py``::

        RMSNormFunction = from_pair(rmsnorm_forward, rmsnorm_backward, "RMSNormFunction")
        out = RMSNormFunction.apply(x, weight, eps=1e-6)

    The contract of the pair:

    * ``forward(*arrays, **kwargs) -> (out, cache)``: ``apply``'s positional arguments arrive as
      arrays (Tensors unwrapped), its keyword arguments unchanged; ``out`` is the output array,
      ``cache`` a tuple (or one array) of whatever backward reads.
    * ``backward(dout, cache) -> grads``: exactly one gradient per name of ``wrt``, in that
      order (a bare array when there is one), each of its input's shape and dtype. None only
      for an input that needs no gradient (linear's absent bias). Inputs not in ``wrt`` are
      constants (embedding's idx, RoPE's cos and sin) and get none.

    Called once per node, on whole arrays. The ndarrays of the cache (its items, or the cache
    itself when it is one array) are saved with ``save_for_backward``, so the engine's version
    guard raises when one of them shares memory with a Tensor that is modified in place before
    backward.

    Args:
        forward, backward: the pair.
        name (str | None): the class's name (``grad_fn``, the engine's error messages);
            default ``backward.__name__``.
        wrt (tuple[str, ...] | None): the names of ``forward``'s parameters that get a
            gradient, in the order backward returns them; default: its parameters without a
            default value.

    Returns:
        type: a ``Function`` subclass; ``apply(*inputs, **kwargs)`` records one node. Its
        attribute ``wrt`` is the tuple, so another backward can be paired the same way.

    Raises:
        ValueError: a name in ``wrt`` that is not a parameter of ``forward``.
        RuntimeError (at backward): a backward that returns another count of gradients, or
        None for an input that requires grad, naming the pair, what it returned and what was
        expected.
    """
    params = [p for p in inspect.signature(forward).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = [p.name for p in params]
    wrt = tuple(p.name for p in params if p.default is p.empty) if wrt is None else tuple(wrt)
    if set(wrt) - set(names):
        raise ValueError(f"from_pair: wrt names {sorted(set(wrt) - set(names))}, not "
                         f"parameters of {forward.__name__}{tuple(names)}")
    slots = [names.index(n) for n in wrt]       # the positional input each gradient goes to
    expected = ", ".join("d" + n for n in wrt)

    def fwd(ctx, *arrays, **kwargs):
        out, cache = forward(*arrays, **kwargs)
        ctx.save_for_backward(*_arrays(cache))      # for the version guard
        ctx.cache = cache
        return out

    def bwd(ctx, dout):
        grads = backward(dout, ctx.cache)
        grads = tuple(grads) if isinstance(grads, (tuple, list)) else (grads,)
        pair = f"{ctx.fn_cls.__name__} ({backward.__name__})"
        if len(grads) != len(wrt):
            got = ", ".join(f"an array {g.shape}" if isinstance(g, np.ndarray) else
                            type(g).__name__ for g in grads)
            raise RuntimeError(f"{pair} returned {len(grads)} gradient(s) ({got}); expected "
                               f"{len(wrt)}: {expected}")
        out = [None] * len(ctx.needs_input_grad)
        for n, slot, g in zip(wrt, slots, grads):
            needed = slot < len(out) and ctx.needs_input_grad[slot]
            if g is None and needed:
                raise RuntimeError(f"{pair} returned None for d{n}; expected its gradient "
                                   f"(the order: {expected})")
            if slot < len(out):
                out[slot] = g
        return tuple(out)

    return type(name or backward.__name__, (Function,),
                {"forward": staticmethod(fwd), "backward": staticmethod(bwd), "wrt": wrt,
                 "__module__": forward.__module__,
                 "__doc__": f"One node: ``{forward.__name__}`` / ``{backward.__name__}``."})


def _arrays(cache) -> tuple:
    """The ndarrays of a pair's cache (its items, or the cache itself)."""
    return tuple(a for a in (cache if isinstance(cache, tuple) else (cache,))
                 if isinstance(a, np.ndarray))


# ----------------------------------------------------------------------------- grad mode, errors, hooks
class Hooks:
    """Where PyTorch's rules act inside the engine. Each method does nothing here (NumPy's
    behaviour); ``minigrad.pytorch_compat.rules`` subclasses it and installs itself as
    ``engine.hooks`` when ``minigrad`` is imported."""

    def array(self, data, dtype):               # Tensor(data): the array it holds
        return np.asarray(data, dtype=dtype)

    def operands(self, a, b):                   # a + b, a @ b, ...: the operands, cast
        return a, b

    def inputs(self, ctx):                      # toposort: the inputs of a node
        return ctx.inputs

    def applied(self, ctx, result, args):       # Function.apply made result (ctx: None unless
        pass                                    # a node was recorded)

    def before_backward(self, ctx):             # Tensor.backward, before a node's backward
        pass

    def data_set(self, tensor, old, new):       # t.data = new
        pass

    def modified(self, tensor):                 # tensor's data was changed in place (an
        pass                                    # optimizer step, load_state_dict)

    def forward_error(self, error):             # a Function's forward raised this ValueError:
        return error                            # the exception to raise instead

    def float_dtype(self):                      # what a float function of an integer or bool
        return np.dtype(np.float64)             # Tensor (exp, log, /) casts it to


hooks = Hooks()
_grad_mode = threading.local()      # per thread, as PyTorch's grad mode


def is_grad_enabled() -> bool:
    """Whether ``Function.apply`` records nodes (True unless inside ``no_grad``), in the
    calling thread (``torch.is_grad_enabled``)."""
    return getattr(_grad_mode, "enabled", True)


class ValueRuntimeError(ValueError, RuntimeError):
    """Bad input that NumPy reports as a ValueError and PyTorch as a RuntimeError: shapes that do
    not broadcast, multiply, reshape or concatenate, a bad permutation, ``clamp(None, None)``,
    ``item()`` of many elements. A subclass of both, so code written for either catches it."""
