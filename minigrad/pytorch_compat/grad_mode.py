"""Grad mode: whether operations record a graph for reverse mode.

Modelled on ``torch.no_grad`` / ``torch.enable_grad`` / ``torch.set_grad_enabled``, in every form
PyTorch accepts:

* context managers: ``with no_grad():``, nested in any order;
* decorators: ``@no_grad()`` / ``@no_grad`` on functions, and on generator functions, where the
  mode is set around each resume of the generator (each ``next``/``send``/``throw``/``close``)
  and the caller's mode is back in force between yields (PyTorch's ``_wrap_generator``);
* a plain call: ``set_grad_enabled(False)`` on its own line takes effect at once;
* per thread: the mode lives in a ``threading.local``, and each ``with`` keeps the mode to restore
  in a per-thread stack, so one thread (or one decorator instance shared by two threads) never
  changes another thread's mode.

The mode itself is the engine's (``minigrad.engine.is_grad_enabled``, read by
``Function.apply``). ``inference_mode`` is offered as ``no_grad`` under PyTorch's name (without
PyTorch's "inference tensor" restrictions; see docs/pytorch.md).
"""
from __future__ import annotations

import functools
import inspect
import sys
import threading

from ..engine import _grad_mode, is_grad_enabled


def _set(mode: bool) -> None:
    _grad_mode.enabled = bool(mode)


def _wrap_generator(ctx_factory, gen_func):
    """A generator function that runs each resume of ``gen_func``'s generator inside a fresh
    ``ctx_factory()`` (PyTorch's ``torch.utils._contextlib._wrap_generator``)."""

    @functools.wraps(gen_func)
    def generator_context(*args, **kwargs):
        gen = gen_func(*args, **kwargs)
        try:
            with ctx_factory():
                response = gen.send(None)
            while True:
                try:
                    request = yield response
                except GeneratorExit:
                    with ctx_factory():
                        gen.close()
                    raise
                except BaseException:
                    with ctx_factory():
                        response = gen.throw(*sys.exc_info()[1:2])
                else:
                    with ctx_factory():
                        response = gen.send(request)
        except StopIteration as e:
            return e.value

    return generator_context


class _GradMode:
    """Shared machinery: set grad mode to ``self._mode`` on entry, restore the previous mode on
    exit (also on error). The previous modes are kept in a per-thread stack, so one instance can
    be entered re-entrantly (a decorated function calling itself) and from several threads."""

    _mode = True

    def _stack(self) -> list:
        local = self.__dict__.get("_local")
        if local is None:
            local = self.__dict__.setdefault("_local", threading.local())
        if not hasattr(local, "prev"):
            local.prev = []
        return local.prev

    def __enter__(self):
        self._stack().append(is_grad_enabled())
        _set(self._mode)
        return self

    def __exit__(self, *exc):
        _set(self._stack().pop())
        return False

    def _clone(self) -> "_GradMode":
        """A fresh context with the same mode (one per call of a decorated function)."""
        new = object.__new__(type(self))
        new._mode = self._mode
        return new

    def __call__(self, func):
        """Decorate ``func`` (a function or a generator function) to run in this mode."""
        if not callable(func):
            raise TypeError(f"{type(self).__name__}: can only decorate a callable, got "
                            f"{type(func).__name__}")
        if inspect.isgeneratorfunction(func):
            return _wrap_generator(self._clone, func)

        @functools.wraps(func)
        def decorate_context(*args, **kwargs):
            with self._clone():
                return func(*args, **kwargs)

        return decorate_context


class _FixedGradMode(_GradMode):
    """A grad mode usable as ``with m():``, ``@m()`` and ``@m`` (PyTorch accepts all three)."""

    def __new__(cls, func=None):
        self = super().__new__(cls)
        if func is not None:
            if not callable(func):
                raise TypeError(f"{cls.__name__}() takes no arguments or one function to decorate")
            return self(func)
        return self

    def __init__(self, func=None):
        pass


class no_grad(_FixedGradMode):
    """Context manager and decorator that turns graph recording off.

    Inside it, ``Function.apply`` records no node, so outputs have
    ``requires_grad=False`` and no memory is kept for backward. Mirrors
    ``torch.no_grad``; it restores the previous mode on exit, also on error. On a generator
    function the mode is set around each resume of the generator, as in PyTorch.

    Example::

        with no_grad():
            logits, _ = model(idx)

        @no_grad()            # or @no_grad
        def evaluate(model): ...

    Raises:
        TypeError: if given an argument that is not a function.
    """

    _mode = False


class enable_grad(_FixedGradMode):
    """Context manager and decorator that turns graph recording on (``torch.enable_grad``).

    Raises:
        TypeError: if given an argument that is not a function.
    """

    _mode = True


class set_grad_enabled(_GradMode):
    """Set grad mode to ``mode`` (bool) (``torch.set_grad_enabled``).

    Three forms, as in PyTorch:

    * a plain call, ``set_grad_enabled(False)``: the calling thread's mode changes at once and
      stays changed;
    * ``with set_grad_enabled(False):``: the mode of the block; on exit the mode from before the
      call is restored;
    * ``@set_grad_enabled(False)``: the mode of each call of the decorated function; decorating
      leaves the current mode unchanged.

    Raises:
        TypeError: if ``mode`` is not a bool.
    """

    def __init__(self, mode: bool):
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled expects a bool, got {type(mode).__name__}")
        self._mode = mode
        self._prev_at_call = is_grad_enabled()
        _set(mode)                      # the plain-call form takes effect here

    def __enter__(self):
        stack = self._stack()
        # The mode to restore is the one from before the call, when the ``with`` statement
        # entered right after the call set it (``with set_grad_enabled(m):``).
        prev = self.__dict__.pop("_prev_at_call", is_grad_enabled())
        stack.append(prev)
        _set(self._mode)
        return self

    def __call__(self, func):
        """Decorate ``func``; undo the mode change made by the call that built the decorator."""
        if "_prev_at_call" in self.__dict__:
            _set(self.__dict__.pop("_prev_at_call"))
        return super().__call__(func)

    def _clone(self) -> "set_grad_enabled":
        new = object.__new__(type(self))
        new._mode = self._mode
        return new


class inference_mode(_GradMode):
    """``torch.inference_mode`` as ``no_grad``: ``with inference_mode():``, ``@inference_mode()``,
    ``@inference_mode``; ``inference_mode(False)`` turns grad mode on, as PyTorch's does (its
    guard sets grad mode to ``not mode``).

    PyTorch also marks the Tensors made inside as "inference tensors" that may never enter a
    recorded graph later; minigrad has no such tensors, so code that PyTorch accepts runs the
    same here (docs/pytorch.md).

    Raises:
        TypeError: if ``mode`` is neither a bool nor a function to decorate.
    """

    def __new__(cls, mode=True):
        self = super().__new__(cls)
        if callable(mode):                              # @inference_mode without parentheses
            self._on = True
            return self(mode)
        return self

    def __init__(self, mode=True):
        if callable(mode):
            return
        if not isinstance(mode, bool):
            raise TypeError(f"inference_mode expects a bool, got {type(mode).__name__}")
        self._on = mode

    @property
    def _mode(self):
        return not self._on                             # PyTorch: grad mode = not mode

    def _clone(self) -> "inference_mode":
        return type(self)(self._on)
