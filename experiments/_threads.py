"""BLAS threads of the commands, fixed before NumPy loads (docs/performance.md, "BLAS threads").

NumPy's OpenBLAS reads ``OPENBLAS_NUM_THREADS`` once, when numpy is first imported, and by
default starts one thread per core. On the 2-core machines this project is run on, that default
is a little faster on an idle machine and several times slower as soon as other processes
compete for the cores (the idle BLAS threads spin while they wait). Measured on
``four_variants``: docs/performance.md. So the commands run one BLAS thread unless told
otherwise:

1. ``--threads N`` on the command line sets ``OPENBLAS_NUM_THREADS=N``;
2. else a thread count the caller already set (``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS`` or
   ``GOTO_NUM_THREADS`` in the environment) is kept;
3. else ``OPENBLAS_NUM_THREADS=1``.

``configure`` does this when a command is started as ``python -m experiments.<command>``: the
package ``experiments`` is imported before the command's module, so before numpy. Imported any
other way (tests, a user's script), or once numpy is loaded, it changes nothing.
"""
from __future__ import annotations

import os
import sys
from typing import Optional, Sequence

__all__ = ["DEFAULT_THREADS", "THREAD_VARIABLES", "threads_from_argv", "configure",
           "blas_threads", "add_threads_option"]

DEFAULT_THREADS = 1
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "GOTO_NUM_THREADS")


def threads_from_argv(argv: Sequence[str]) -> Optional[int]:
    """The N of ``--threads N`` or ``--threads=N`` in ``argv`` (the last one wins); None when
    absent or not a positive integer (the command's argument parser then reports it)."""
    value = None
    for i, arg in enumerate(argv):
        if arg == "--threads" and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--threads="):
            value = arg.split("=", 1)[1]
    if value is None or not value.isdigit() or int(value) < 1:
        return None
    return int(value)


def configure(argv: Optional[Sequence[str]] = None) -> Optional[str]:
    """Set ``OPENBLAS_NUM_THREADS`` by the rule of the module docstring, if numpy is not loaded
    yet and the process was started with ``python -m``; returns the value set, or None."""
    argv = sys.argv if argv is None else argv
    if "numpy" in sys.modules or not argv or argv[0] != "-m":
        return None
    n = threads_from_argv(argv[1:])
    if n is None and any(os.environ.get(v) for v in THREAD_VARIABLES):
        return None
    value = str(DEFAULT_THREADS if n is None else n)
    os.environ["OPENBLAS_NUM_THREADS"] = value
    return value


def blas_threads() -> Optional[int]:
    """The BLAS thread count the environment sets (the first of ``THREAD_VARIABLES`` that holds
    a positive integer), or None when none does."""
    for name in THREAD_VARIABLES:
        value = os.environ.get(name, "").strip()
        if value.isdigit() and int(value) >= 1:
            return int(value)
    return None


def add_threads_option(parser) -> None:
    """The ``--threads N`` option (its value was applied by ``configure`` before numpy loaded)."""
    from experiments._cli import positive_int
    parser.add_argument("--threads", type=positive_int, default=None, metavar="N",
                        help="BLAS threads (OPENBLAS_NUM_THREADS); default: the environment's "
                             f"setting, else {DEFAULT_THREADS} (see docs/performance.md)")


if __name__ == "__main__":  # python -m experiments._threads [--threads N]: what a command would use
    print(f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}")
