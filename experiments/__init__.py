"""Runnable studies built on ``gpt``: ``four_variants`` (the main job, and the runner the other
studies share: ``break_it``, ``activations``, ``positions``, ``hidden_stats``), ``train`` (one
model on any text, as nanoGPT's ``train.py``), ``norm_cost``,
``bench``, the gradient studies ``break_backward`` and ``gradcheck_report``, and ``generate``.
Run one as ``python -m experiments.<command>``; what every command shares is ``experiments.cli``.
Importing this package does nothing else.
"""
