"""Runnable studies built on ``gpt``: ``four_variants`` (the main job), ``break_it``,
``activations``, ``positions``, ``hidden_stats`` (all on one runner, ``experiments._runner``),
``norm_cost``, ``bench``, and the gradient studies ``break_backward`` and ``gradcheck_report``.

Started as ``python -m experiments.<command>``, this package is imported before numpy, and sets
the BLAS thread count first (``experiments._threads``: one thread unless told otherwise).
"""
from experiments._threads import configure as _configure_blas_threads

_configure_blas_threads()
