"""The ``Function`` API: one node of the graph, with a hand-written backward.

Modelled on ``torch.autograd.Function``. A subclass defines two static methods that work on
``np.ndarray``s; the engine wraps and unwraps Tensors around them::

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

``apply`` records a node only when grad mode is on and some Tensor input requires grad.
Arguments that are not Tensors (arrays, scalars, tuples, keyword arguments) are passed to
``forward`` unchanged and are constants: their gradient slot in ``backward`` must be None or is
ignored.

In-place safety (PyTorch's version counter): every Tensor carries a version counter that the
engine's in-place operations (``+=``, ``-=``, ``*=``, ``/=``, ``Tensor.add_``, ``copy_``, ``zero_``,
``__setitem__``, optimizer updates) increment. ``apply`` records the version of each Tensor whose memory a saved array
shares; ``backward`` raises a RuntimeError naming the Function when one of them has changed.
"""
from __future__ import annotations

from typing import Any, Tuple

import numpy as np

from .grad_mode import is_grad_enabled


class _VersionCounter:
    """A mutable integer shared by a Tensor and the views made from it."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0


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
        self._saved_versions: list = []
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
                raise TypeError(
                    f"{self.fn_cls.__name__}: save_for_backward takes np.ndarrays, "
                    f"got {type(a).__name__}"
                )
            out.append(a)
        self._saved = tuple(out)

    @property
    def saved_tensors(self) -> Tuple[np.ndarray, ...]:
        """The arrays saved in forward.

        Raises:
            RuntimeError: after the graph was freed by a backward without ``retain_graph``.
        """
        if self._freed:
            raise RuntimeError(_freed_message(self.fn_cls.__name__))
        return self._saved

    def _track_versions(self, tensors) -> None:
        # Record the version of every Tensor whose memory a saved array shares.
        for i, a in enumerate(self._saved):
            if a is None:
                continue
            for t, label in tensors:
                if _shares_memory(a, t._data):
                    self._saved_versions.append((t._vc, t._vc.value, i, label, a.shape))

    def _check_versions(self) -> None:
        for vc, version, i, label, shape in self._saved_versions:
            if vc.value != version:
                label = "output" if label is None else f"input {label}"
                raise RuntimeError(
                    f"one of the arrays needed for the gradient of {self.fn_cls.__name__} "
                    f"(saved array {i}, shape {shape}, from its {label}) was modified by an "
                    f"in-place operation: it is at version {vc.value}, expected version "
                    f"{version}. Do the in-place update after backward, or compute out of place."
                )

    def _free(self) -> None:
        self._saved = ()
        self._saved_versions = []
        self._freed = True
        for k in [k for k in vars(self) if k not in _CTX_KEEP]:
            delattr(self, k)


_CTX_KEEP = {"fn_cls", "needs_input_grad", "inputs", "_saved", "_saved_versions", "_freed"}


def _shares_memory(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays may overlap in memory. Two distinct arrays that each own their buffer
    (``base`` is None) never do, which spares ``np.may_share_memory`` for fresh outputs."""
    if a is b:
        return True
    if a.base is None and b.base is None:
        return False
    return bool(a.size and b.size and np.may_share_memory(a, b))


def _freed_message(name: str) -> str:
    return (
        f"Trying to backward through the graph a second time (node {name}): its saved arrays "
        "were freed by the first backward. Pass retain_graph=True to the first backward if you "
        "need to backward twice."
    )


def _tensor_class():
    """``minigrad.tensor.Tensor`` (imported late: tensor.py imports this module)."""
    global _Tensor
    if _Tensor is None:
        from .tensor import Tensor
        _Tensor = Tensor
    return _Tensor


_Tensor = None


class Function:
    """Base class for a graph node with a hand-written backward (``torch.autograd.Function``).

    Subclasses define:

    * ``forward(ctx, *args, **kwargs) -> np.ndarray``: Tensor arguments arrive as their
      ``.data`` arrays; the return value becomes the output Tensor's data (a NumPy scalar is
      turned into a 0-d array).
    * ``backward(ctx, grad_output) -> array | None | tuple``: ``grad_output`` has the output's
      shape and dtype. Return one gradient per positional forward input (a bare array when
      there is one input, a tuple otherwise); each must have its input's exact shape and dtype,
      or be None (no gradient). A backward must not modify ``grad_output`` in place.

    The engine checks what backward returns and raises a RuntimeError naming the Function on
    a wrong count, shape or dtype.
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
    def apply(cls, *args: Any, **kwargs: Any):
        """Run ``forward`` on the inputs and, in grad mode, record the node.

        Args:
            *args: Tensors (differentiable when they require grad), arrays or other constants.
            **kwargs: constants passed to ``forward``.

        Returns:
            Tensor: the output; ``requires_grad`` is True when a node was recorded.

        Raises:
            TypeError: if ``forward`` returns something that is not array-like.
        """
        Tensor = _tensor_class()
        arrays, needs = [], []
        for a in args:
            if isinstance(a, Tensor):
                arrays.append(a._data)
                needs.append(a._requires_grad)
            else:
                arrays.append(a)
                needs.append(False)
        needs = tuple(needs)
        record = any(needs) and is_grad_enabled()
        ctx = Context(cls, needs)
        out = cls.forward(ctx, *arrays, **kwargs)
        if not isinstance(out, np.ndarray):
            if isinstance(out, (np.generic, int, float, bool)):
                out = np.asarray(out)
            else:
                raise TypeError(
                    f"{cls.__name__}.forward must return an np.ndarray, got {type(out).__name__}"
                )
        result = Tensor(out)
        # A view of an input shares its version counter (PyTorch does the same).
        for a in args:
            if isinstance(a, Tensor) and _shares_memory(out, a._data):
                result._vc = a._vc
                break
        if record:
            result._requires_grad = True
            result._ctx = ctx
            ctx.inputs = args
            # (tensor, input position or None for the output): the error message's words
            tracked = [(a, i) for i, a in enumerate(args) if isinstance(a, Tensor)]
            tracked.append((result, None))
            ctx._track_versions(tracked)
        return result
