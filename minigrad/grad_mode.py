"""Grad mode: whether operations record a graph for reverse mode.

Modelled on ``torch.no_grad`` / ``torch.enable_grad`` / ``torch.set_grad_enabled``.
"""
from __future__ import annotations

import contextlib
import threading

_state = threading.local()


def is_grad_enabled() -> bool:
    """Return True when operations record a graph (the default).

    Returns:
        bool: the grad mode of the calling thread.
    """
    return getattr(_state, "enabled", True)


def _set(mode: bool) -> None:
    _state.enabled = bool(mode)


class _GradMode(contextlib.ContextDecorator):
    """Shared machinery: set grad mode to ``self._mode`` on entry, restore the previous mode on
    exit (also on error, and re-entrantly: a decorated function may call itself)."""

    _mode = True

    def __enter__(self):
        self.__dict__.setdefault("_prev", []).append(is_grad_enabled())
        _set(self._mode)
        return self

    def __exit__(self, *exc):
        _set(self._prev.pop())
        return False


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
    ``torch.no_grad``; it restores the previous mode on exit, also on error.

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
    """Set grad mode to ``mode`` (bool) for a block or a function (``torch.set_grad_enabled``).

    Raises:
        TypeError: if ``mode`` is not a bool.
    """

    def __init__(self, mode: bool):
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled expects a bool, got {type(mode).__name__}")
        self._mode = mode
