"""Runnable studies built on ``gpt``: ``four_variants`` (the main job), ``break_it``,
``activations``, ``positions`` (all on one runner, ``experiments._runner``), and the gradient
studies ``break_backward`` and ``gradcheck_report``."""
