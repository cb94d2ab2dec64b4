"""One-line command-line errors, shared by ``python -m gpt.generate`` and ``experiments``.

- ``fail(prog, message)``: print ``<prog>: error: <message>`` as ONE line on stderr, exit 2.
- ``ArgumentParser``: argparse whose usage errors are that one line (no usage block).
- ``int_arg``: an integer written in decimal, nothing else.
- ``HelpFormatter``: ``--help`` shows every option's default (argparse's
  ``ArgumentDefaultsHelpFormatter``, except where the help text already states it).
- ``Printer``: ``print`` to stdout that records a failed write instead of raising.
- ``run_main(prog, main)``: the ``__main__`` entry point of every command: Ctrl-C at any stage
  is one line and exit 130; a failed write to stdout is one line and exit 2 (a closed pipe,
  ``| head``, is quiet and leaves the exit status alone).

``experiments/_cli.py`` re-exports these with the rest of the commands' machinery.
"""
from __future__ import annotations

import argparse
import contextlib
import errno
import os
import sys
from typing import Callable, NoReturn, Optional, Sequence

__all__ = ["EXIT_USAGE", "EXIT_INTERRUPTED", "fail", "ArgumentParser", "HelpFormatter",
           "int_arg", "Printer", "run_main", "interrupted", "stdout_failure", "mark_outputs_written"]

#: Exit status for bad input (argparse's convention), and for output that cannot be written.
EXIT_USAGE = 2
#: Exit status after Ctrl-C (128 + SIGINT, the shell's convention).
EXIT_INTERRUPTED = 130

_state = {"stdout_error": None, "written": None}


def _one_line(message: str) -> str:
    return " ".join(str(message).split())


def fail(prog: str, message: str) -> NoReturn:
    """Print ``<prog>: error: <message>`` as one line on stderr and exit with status 2."""
    sys.stderr.write(f"{prog}: error: {_one_line(message)}\n")
    sys.stderr.flush()
    raise SystemExit(EXIT_USAGE)


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows ``(default: X)`` after an option's help, unless the help already says "default";
    an on/off flag shows ``(default: off)``, a required option ``(required)``."""

    def _get_help_string(self, action):  # noqa: D102 - argparse API
        text = action.help or ""
        if "default" in text.lower() or action.default is argparse.SUPPRESS:
            return text
        if action.required:
            return f"{text} (required)"
        if action.default is None:
            return f"{text} (default: none)"
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
            return f"{text} (default: {'off' if action.default is False else 'on'})"
        return super()._get_help_string(action)


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose ``error`` prints one line (no usage block), exit 2,
    and whose ``--help`` shows every default (``HelpFormatter``)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:  # noqa: D102 - argparse API
        fail(self.prog, message)


def int_arg(text: str) -> int:
    """Parse an integer written in decimal (``"12"``, ``"-3"``); reject ``"1.5"``, ``"1e3"``, ``""``.

    Raises:
        argparse.ArgumentTypeError: the text is not an integer.
    """
    s = text.strip()
    body = s[1:] if s[:1] in "+-" else s
    if not body.isdigit() or not body.isascii():
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}")
    return int(s)


class Printer:
    """``print`` to stdout that survives a closed or failing stdout (``| head -1``,
    ``> /dev/full``): on the first OSError it stops printing, records the error (see
    ``stdout_failure``; ``run_main`` turns it into the exit status), points stdout at /dev/null
    so the interpreter's final flush is quiet, and lets the command finish its work (writing
    its files).
    """

    def __init__(self) -> None:
        self.ok = True

    def __call__(self, *args, **kwargs) -> None:
        if not self.ok:
            return
        try:
            print(*args, **kwargs, flush=True)
        except OSError as e:  # BrokenPipeError is an OSError
            self.ok = False
            _stdout_failed(e)


def _stdout_failed(e: OSError) -> None:
    if _state["stdout_error"] is None:
        _state["stdout_error"] = e
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def stdout_failure() -> Optional[OSError]:
    """The first error met writing to stdout in this process (None if none)."""
    return _state["stdout_error"]


def mark_outputs_written(where: str) -> None:
    """Record that the command's files are in place (so an interrupt after this point does not
    claim that nothing was written)."""
    _state["written"] = where


def _is_closed_pipe(e: OSError) -> bool:
    return isinstance(e, BrokenPipeError) or e.errno in (errno.EPIPE, errno.ECONNRESET)


def interrupted(prog: str, tail: str = "nothing written") -> None:
    """Print ``<prog>: interrupted; <tail>`` as one line on stderr (after a newline that ends a
    progress line redrawn in place, on a terminal only)."""
    nl = "\n" if getattr(sys.stderr, "isatty", lambda: False)() else ""
    sys.stderr.write(f"{nl}{prog}: interrupted; {tail}\n")
    sys.stderr.flush()


def run_main(prog: str, main: Callable[[Optional[Sequence[str]]], int],
             argv: Optional[Sequence[str]] = None) -> int:
    """Run a command's ``main`` and turn the edges into exit statuses; use as
    ``raise SystemExit(run_main(PROG, main))``.

    - Ctrl-C (KeyboardInterrupt) at any stage: ``<prog>: interrupted; nothing written`` (or
      ``...; outputs already written to DIR``), ONE line on stderr, status 130.
    - A write to stdout that failed (``> /dev/full``: no space, an I/O error): ``<prog>: error:
      cannot write to stdout: <reason>``, one line, status 2 (whatever ``main`` returned, unless
      it was interrupted). Files the command writes are written before its stdout table, so
      they are complete.
    - A closed pipe (``| head``): quiet (as ``cat`` is under ``| head``); the status is
      ``main``'s.
    """
    _state.update(stdout_error=None, written=None)  # this run's, not an earlier call's
    try:
        try:
            status = main(argv)
            sys.stdout.flush()
        except OSError as e:
            if e.filename is not None or not (_is_closed_pipe(e) or e.errno in
                                               (errno.ENOSPC, errno.EIO, errno.EDQUOT)):
                raise
            _stdout_failed(e)  # a write to stdout outside a Printer
            status = 0
    except KeyboardInterrupt:
        where = _state["written"]
        interrupted(prog, f"outputs already written to {where}" if where else "nothing written")
        return EXIT_INTERRUPTED
    e = _state["stdout_error"]
    if e is not None and status != EXIT_INTERRUPTED and not _is_closed_pipe(e):
        sys.stderr.write(f"{prog}: error: cannot write to stdout: {e.strerror or e}\n")
        sys.stderr.flush()
        return EXIT_USAGE
    return status
