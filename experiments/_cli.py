"""The machinery every command shares: arguments, one-line errors, exit codes, stdout, Ctrl-C.

- ``ArgumentParser``: argparse, except that a usage error prints ONE line on stderr
  (``<prog>: error: <message>``) and exits with status 2, without the usage block; ``--help``
  shows every option's default (``HelpFormatter``).
- ``UsageError`` and ``fail``: the same one-line report for problems found after parsing
  (a bad corpus, an invalid model configuration, an unwritable output directory).
- Argument types ``int_arg``, ``positive_int``, ``nonnegative_int``, ``bounded_int(lo, hi)``,
  ``positive_float``, ``nonnegative_float``, ``path_arg``.
- ``check_output_dir``: prove an output directory can be created and written before any work;
  ``remove_empty_dirs``: remove the folders a failed run created; ``new_run_id``.
- ``Printer``: ``print`` to stdout that records a failed write instead of raising.
- ``run_main(prog, main)``: the ``__main__`` entry point of every command: Ctrl-C at any stage
  is one line and exit 130 (before ``run_main`` starts, while Python imports NumPy and the
  project, ``experiments._startup`` says the same line); a failed write to stdout
  is one line and exit 2 (a closed pipe, ``| head``, is quiet and leaves the exit status
  alone).

Files are written atomically by ``experiments._atomic``.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import errno
import math
import os
import secrets
import signal
import sys
import tempfile
from pathlib import Path
from typing import Callable, NoReturn, Optional, Sequence, Union

from experiments._atomic import atomic_write_text
from experiments._startup import EXIT_INTERRUPTED, restore_ctrl_c

__all__ = ["EXIT_USAGE", "EXIT_INTERRUPTED", "UsageError", "fail", "ArgumentParser",
           "HelpFormatter", "int_arg", "positive_int", "nonnegative_int", "bounded_int",
           "positive_float",
           "nonnegative_float", "path_arg", "check_output_dir", "remove_empty_dirs", "new_run_id",
           "Printer", "run_main", "interrupted", "mark_outputs_written", "check_json_path",
           "json_destination", "write_json"]

#: Exit status for bad input (argparse's convention), and for output that cannot be written.
EXIT_USAGE = 2
#: Exit status after Ctrl-C (128 + SIGINT, the shell's convention): ``EXIT_INTERRUPTED``,
#: from ``experiments._startup``.

PathLike = Union[str, "os.PathLike[str]"]

_state = {"stdout_error": None, "written": None}


def _one_line(message: str) -> str:
    return " ".join(str(message).split())


class UsageError(Exception):
    """Bad input found after argument parsing; reported as one line, exit status 2."""


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
    """Parse an integer written in decimal (``"12"``, ``"-3"``); reject ``"1.5"``, ``"1e3"``,
    ``""``.

    Raises:
        argparse.ArgumentTypeError: the text is not an integer.
    """
    s = text.strip()
    body = s[1:] if s[:1] in "+-" else s
    if not body.isdigit() or not body.isascii():
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}")
    return int(s)


def positive_int(text: str) -> int:
    """Parse an integer >= 1 (``argparse.ArgumentTypeError`` otherwise)."""
    v = int_arg(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return v


def nonnegative_int(text: str) -> int:
    """Parse an integer >= 0 (``argparse.ArgumentTypeError`` otherwise)."""
    v = int_arg(text)
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return v


def bounded_int(lo: int, hi: int, unit: str = "", why: str = "") -> Callable[[str], int]:
    """An argument type: an integer in ``lo .. hi`` (``lo`` 0 or 1 reads as "non-negative" or
    "positive" in the message).

    Args:
        lo, hi: the smallest and largest accepted values.
        unit: what the number counts, for the message ("steps per run", "characters").
        why: a reason the maximum exists, added to the message in parentheses.

    Returns:
        ``parse(text) -> int`` for ``add_argument(type=...)``; it raises
        ``argparse.ArgumentTypeError`` ("expected a positive integer, got '0'", "2000000 is more
        than the maximum of 1,000,000 steps per run (...)").
    """
    def parse(text: str) -> int:
        v = int_arg(text)
        if v < lo:
            what = {0: "a non-negative integer", 1: "a positive integer"}.get(
                lo, f"an integer >= {lo}")
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        if v > hi:
            raise argparse.ArgumentTypeError(
                f"{text} is more than the maximum of {hi:,}{' ' + unit if unit else ''}"
                f"{f' ({why})' if why else ''}")
        return v
    return parse


def _float_arg(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def positive_float(text: str) -> float:
    """Parse a finite float > 0 (``argparse.ArgumentTypeError`` otherwise)."""
    v = _float_arg(text)
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite positive number, got {text!r}")
    return v


def nonnegative_float(text: str) -> float:
    """Parse a finite float >= 0 (``argparse.ArgumentTypeError`` otherwise)."""
    v = _float_arg(text)
    if not math.isfinite(v) or v < 0:
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text!r}")
    return v


def path_arg(text: str) -> Path:
    """Parse a non-empty path (``Path("")`` would silently mean the current directory)."""
    if text == "":
        raise argparse.ArgumentTypeError("empty path")
    return Path(text)


def check_output_dir(path: PathLike) -> Path:
    """Make sure ``path`` is (or can become) a writable directory; return it as a ``Path``.

    Checks without creating anything: if ``path`` exists it must be a directory; otherwise its
    nearest existing ancestor must be a directory. Writability is then proven by creating and
    removing a temporary file (in ``path`` if it exists, else in that ancestor). Nothing is left
    behind on success or failure.

    Raises:
        UsageError: ``path`` (or an ancestor) is a file, or the directory is not writable.
    """
    p = Path(path)
    probe_dir = p
    while not probe_dir.exists():
        parent = probe_dir.parent
        if parent == probe_dir:
            break
        probe_dir = parent
    if probe_dir.exists() and not probe_dir.is_dir():
        what = "is" if probe_dir == p else f"is under {probe_dir}, which is"
        raise UsageError(f"output directory {p} {what} not a directory")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".write-test-", dir=str(probe_dir))
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        raise UsageError(f"output directory {p} is not writable ({e.strerror or e})") from None
    return p


def new_run_id() -> str:
    """A fresh run id: UTC time and 8 random hex digits, e.g. ``20261130T003512Z-3f9a1c2e``.
    Written into a run's results.json and checkpoints, so its files are recognisable as one
    run's."""
    now = datetime.datetime.now(datetime.timezone.utc)
    return f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(4)}"


def remove_empty_dirs(dirs) -> None:
    """Remove the directories a run created (``dirs``: ``Path`` objects, deepest first) while
    they are still empty; stop at the first that is not (a failed or interrupted run leaves no
    empty folders behind)."""
    for d in dirs:
        try:
            d.rmdir()
        except OSError:
            return


class Printer:
    """``print`` to stdout that survives a closed or failing stdout (``| head -1``,
    ``> /dev/full``): on the first OSError it stops printing, records the error (``run_main``
    turns it into the exit status), points stdout at /dev/null
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
      ``...; outputs already written to DIR``, also when the Ctrl-C came while the files were
      being moved into place: ``experiments._atomic.InterruptedAfterCommit``), ONE line on
      stderr, status 130. Started as a command (``python -m``), Ctrl-C is ignored once the
      command is done, so Python's shutdown neither dies of it nor prints a traceback.
    - A write to stdout that failed (``> /dev/full``: no space, an I/O error): ``<prog>: error:
      cannot write to stdout: <reason>``, one line, status 2 (whatever ``main`` returned, unless
      it was interrupted). Files the command writes are written before its stdout table, so
      they are complete.
    - A closed pipe (``| head``): quiet (as ``cat`` is under ``| head``); the status is
      ``main``'s.
    """
    _state.update(stdout_error=None, written=None)  # this run's, not an earlier call's
    command = restore_ctrl_c()  # from here on, Ctrl-C is a KeyboardInterrupt
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
    except KeyboardInterrupt as e:
        if command:  # a second Ctrl-C must not cut the one line short
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        where = getattr(e, "where", None) or _state["written"]  # InterruptedAfterCommit's
        interrupted(prog, f"outputs already written to {where}" if where else "nothing written")
        return EXIT_INTERRUPTED
    finally:
        if command:  # done: a Ctrl-C while Python shuts down changes nothing, and says nothing
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    e = _state["stdout_error"]
    if e is not None and status != EXIT_INTERRUPTED and not _is_closed_pipe(e):
        sys.stderr.write(f"{prog}: error: cannot write to stdout: {e.strerror or e}\n")
        sys.stderr.flush()
        return EXIT_USAGE
    return status


def check_json_path(path: str) -> Path:
    """Validate a ``--json`` destination before any work: its directory must exist and be a
    directory, and the path itself must not be a directory, a device, a FIFO or a socket (an
    atomic write would swap it for a regular file).

    Raises:
        UsageError: naming the problem.
    """
    if path == "":
        raise UsageError("--json: empty path")
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"--json: {p} is a directory; give a file path")
    if os.path.lexists(p) and not (p.is_symlink() or p.is_file()):
        raise UsageError(f"--json: {p} is not a regular file (a device, FIFO or socket); give "
                         f"a file path")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.exists():
        raise UsageError(f"--json: directory {parent} does not exist")
    if not parent.is_dir():
        raise UsageError(f"--json: {parent} is not a directory")
    if not os.access(parent, os.W_OK):
        raise UsageError(f"--json: directory {parent} is not writable")
    return p


def json_destination(prog: str, path: Optional[str]) -> Optional[Path]:
    """The validated ``--json`` path (None when not given); bad paths end the command with one
    line on stderr and exit status 2."""
    if path is None:
        return None
    try:
        return check_json_path(path)
    except UsageError as e:
        fail(prog, str(e))


def write_json(prog: str, path: Path, obj) -> None:
    """Write ``obj`` as indented strict JSON to ``path`` atomically; an OS error exits 2 with
    one line on stderr."""
    text = json.dumps(obj, indent=2, allow_nan=False) + "\n"
    try:
        atomic_write_text(path, text)
    except OSError as e:
        fail(prog, f"cannot write {path}: {e.strerror or e}")
