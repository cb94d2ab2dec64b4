"""One-line command-line errors, shared by ``python -m gpt.generate`` and ``experiments``.

- ``fail(prog, message)``: print ``<prog>: error: <message>`` as ONE line on stderr, exit 2.
- ``ArgumentParser``: argparse whose usage errors are that one line (no usage block).
- ``int_arg``: an integer written in decimal, nothing else.

``experiments/_cli.py`` re-exports these with the rest of the commands' machinery.
"""
from __future__ import annotations

import argparse
import sys
from typing import NoReturn

__all__ = ["EXIT_USAGE", "fail", "ArgumentParser", "int_arg"]

#: Exit status for bad input (argparse's convention).
EXIT_USAGE = 2


def _one_line(message: str) -> str:
    return " ".join(str(message).split())


def fail(prog: str, message: str) -> NoReturn:
    """Print ``<prog>: error: <message>`` as one line on stderr and exit with status 2."""
    sys.stderr.write(f"{prog}: error: {_one_line(message)}\n")
    sys.stderr.flush()
    raise SystemExit(EXIT_USAGE)


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose ``error`` prints one line (no usage block), exit 2."""

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
