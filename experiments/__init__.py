"""Runnable studies built on ``gpt``: ``four_variants`` (the main job), ``break_it``,
``activations``, ``positions``, ``hidden_stats`` (all on one runner, ``experiments._runner``),
``norm_cost``, ``bench``, the gradient studies ``break_backward`` and ``gradcheck_report``, and
``generate`` (text from a checkpoint). Every command's arguments, one-line errors, exit statuses
and Ctrl-C are ``experiments._cli``'s; its atomic output ``experiments._atomic``'s.

Started as ``python -m experiments.<command>``, this package is imported before numpy, and sets
the BLAS thread count first (``experiments._threads``: one thread unless told otherwise). A
Ctrl-C before the command's ``run_main`` starts gives the commands' one line and status 130
(``experiments._startup``).
"""
import sys as _sys

from experiments import _startup

if _sys.argv[:1] == ["-m"]:  # started as ``python -m experiments.<command>`` (runpy's marker)
    _startup.interrupt_quietly_while_starting()  # a Ctrl-C from here on: one line, no traceback

from experiments._threads import configure as _configure_blas_threads  # noqa: E402

_configure_blas_threads()
if _sys.argv[:1] == ["-m"]:
    from experiments._allocator import configure as _configure_allocator

    _configure_allocator()
