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


class no_grad(contextlib.ContextDecorator):
    """Context manager and decorator that turns graph recording off.

    Inside it, ``Function.apply`` records no node, so outputs have
    ``requires_grad=False`` and no memory is kept for backward. Mirrors
    ``torch.no_grad``; it restores the previous mode on exit, also on error.

    Example::

        with no_grad():
            logits, _ = model(idx)

        @no_grad()
        def evaluate(model): ...
    """

    def __new__(cls, func=None):
        # ``@no_grad`` without parentheses decorates ``func`` directly, as in PyTorch.
        self = super().__new__(cls)
        if func is not None:
            if not callable(func):
                raise TypeError(f"no_grad() takes no arguments or one function to decorate")
            return self(func)
        return self

    def __init__(self, func=None):
        pass

    def __enter__(self):
        self.__dict__.setdefault("_prev", []).append(is_grad_enabled())
        _set(False)
        return self

    def __exit__(self, *exc):
        _set(self._prev.pop())
        return False


class enable_grad(contextlib.ContextDecorator):
    """Context manager and decorator that turns graph recording on (``torch.enable_grad``)."""

    def __new__(cls, func=None):
        # ``@enable_grad`` without parentheses decorates ``func`` directly, as in PyTorch.
        self = super().__new__(cls)
        if func is not None:
            if not callable(func):
                raise TypeError(f"enable_grad() takes no arguments or one function to decorate")
            return self(func)
        return self

    def __init__(self, func=None):
        pass

    def __enter__(self):
        self.__dict__.setdefault("_prev", []).append(is_grad_enabled())
        _set(True)
        return self

    def __exit__(self, *exc):
        _set(self._prev.pop())
        return False


class set_grad_enabled(contextlib.ContextDecorator):
    """Set grad mode to ``mode`` (bool) for a block or a function (``torch.set_grad_enabled``).

    Raises:
        TypeError: if ``mode`` is not a bool.
    """

    def __init__(self, mode: bool):
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled expects a bool, got {type(mode).__name__}")
        self.mode = mode

    def __enter__(self):
        self.__dict__.setdefault("_prev", []).append(is_grad_enabled())
        _set(self.mode)
        return self

    def __exit__(self, *exc):
        _set(self._prev.pop())
        return False
