"""Runnable studies built on ``gpt``: ``python -m experiments.four_variants`` (the main job).

Started as ``python -m experiments.<command>``, this package is imported before numpy, and sets
the BLAS thread count first (``experiments._threads``: one thread unless told otherwise).
"""
from experiments._threads import configure as _configure_blas_threads

_configure_blas_threads()
