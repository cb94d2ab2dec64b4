"""Shared command-line helpers for the runnable studies.

- ``ArgumentParser``: argparse, except that a usage error prints ONE line on stderr
  (``<prog>: error: <message>``) and exits with status 2, without the usage block.
- ``UsageError`` and ``fail``: the same one-line report for problems found after parsing
  (a bad corpus, an invalid model configuration, an unwritable output directory).
- Argument types ``positive_int``, ``nonnegative_int``, ``positive_float``, ``int_arg``.
- ``check_output_dir``: prove an output directory can be created and written before any work.
- ``atomic_write_text`` / ``atomic_write_bytes`` / ``atomic_writer``: write a temporary file in the
  destination's directory and ``os.replace`` it over the destination, so a reader never sees a
  half-written file and an interrupted run leaves none behind.

- ``Printer`` (stdout that records a failed write) and ``run_main`` (every command's entry
  point: Ctrl-C at any stage, a failed stdout; see ``gpt/cli.py``).

``fail``, ``ArgumentParser``, ``int_arg``, ``Printer`` and ``run_main`` live in ``gpt/cli.py`` (``python -m gpt.generate``
uses them too, and gpt imports nothing from experiments); the atomic writers in ``gpt/atomic.py``.
"""
from __future__ import annotations

import argparse
import datetime
import secrets
import math
import os
import tempfile
from pathlib import Path
from typing import Union

from gpt.atomic import atomic_write_bytes, atomic_write_text, atomic_writer  # noqa: F401 (re-exported)
from gpt.cli import (EXIT_INTERRUPTED, EXIT_USAGE, ArgumentParser, Printer,  # noqa: F401
                     fail, int_arg, interrupted, mark_outputs_written, run_main)  # (re-exported)

__all__ = [
    "EXIT_USAGE",
    "remove_empty_dirs",
    "EXIT_INTERRUPTED",
    "Printer",
    "run_main",
    "interrupted",
    "new_run_id",
    "mark_outputs_written",
    "UsageError",
    "ArgumentParser",
    "fail",
    "int_arg",
    "positive_int",
    "nonnegative_int",
    "positive_float",
    "path_arg",
    "check_output_dir",
    "atomic_writer",
    "atomic_write_text",
    "atomic_write_bytes",
]

PathLike = Union[str, "os.PathLike[str]"]


class UsageError(Exception):
    """Bad input found after argument parsing; reported as one line, exit status 2."""


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


def positive_float(text: str) -> float:
    """Parse a finite float > 0 (``argparse.ArgumentTypeError`` otherwise)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite positive number, got {text!r}")
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
