"""Ctrl-C while a command starts: the commands' one line and status 130, not a traceback.

``python -m experiments.<command>`` imports this package, NumPy and the project before the
command's ``run_main`` (``experiments._cli``) takes over Ctrl-C, about a third of a second under
load. ``experiments/__init__.py`` imports this module first (it needs only ``os``, ``signal`` and
``sys``, which Python has loaded already) and calls ``interrupt_quietly_while_starting``;
``run_main`` calls ``restore_ctrl_c`` before the command's ``main``.
"""
import os
import signal
import sys

EXIT_INTERRUPTED = 130  # 128 + SIGINT, the shell's convention (every command's Ctrl-C status)


def command_prog() -> str:
    """``python -m experiments.<command>`` from how Python was started (``sys.orig_argv``,
    Python 3.10+; else ``sys.argv[0]``, the module's path once runpy has found it)."""
    argv = list(getattr(sys, "orig_argv", []))
    if "-m" in argv[:-1]:
        return f"python -m {argv[argv.index('-m') + 1]}"
    name = os.path.splitext(os.path.basename(sys.argv[0] if sys.argv else ""))[0]
    return f"python -m experiments.{name}" if name not in ("", "-m", "__init__") else \
        "python -m experiments"


def _interrupted_while_starting(signum, frame) -> None:
    """SIGINT handler until ``run_main`` starts: the one line and status 130 at once (nothing
    has been opened or written yet)."""
    os.write(2, f"{command_prog()}: interrupted; nothing written\n".encode())
    os._exit(EXIT_INTERRUPTED)


def interrupt_quietly_while_starting() -> None:
    """Make a Ctrl-C during a command's start-up end as every later one does: ``<prog>:
    interrupted; nothing written``, status 130. Only replaces Python's own handler; main thread
    only. Called when Python was started with ``-m`` (a command), never when the package is
    imported as a library (tests, a notebook)."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupted_while_starting)


def restore_ctrl_c() -> bool:
    """Give Ctrl-C back to Python (a ``KeyboardInterrupt``) if the start-up handler is set;
    True when it was (the process is a command started with ``python -m``)."""
    if signal.getsignal(signal.SIGINT) is _interrupted_while_starting:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        return True
    return False
