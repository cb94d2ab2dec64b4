"""Runnable studies built on ``gpt``: ``four_variants`` (the main job), ``break_it``,
``activations``, ``positions``, ``hidden_stats`` (all on one runner, ``experiments._runner``),
``norm_cost``, ``bench``, the gradient studies ``break_backward`` and ``gradcheck_report``, and
``generate`` (text from a checkpoint). Every command's arguments, one-line errors, exit statuses
and Ctrl-C are ``experiments._cli``'s; its atomic output ``experiments._atomic``'s.

Started as ``python -m experiments.<command>``, this package is imported before numpy, and sets
the BLAS thread count first (``experiments._threads``: one thread unless told otherwise).
"""
from experiments._threads import configure as _configure_blas_threads

_configure_blas_threads()
