"""Runnable studies and commands built on ``gpt``: the studies (``four_variants``, the main job;
``break_it``, ``activations``, ``positions``, ``hidden_stats``), each a list of variants for
``runner``; ``train_gpt`` (one model, as nanoGPT's ``train.py``); ``exercises``, a package
(backward passes written by hand and checked, ``exercises.break_backward``); ``gradcheck_report``,
``norm_cost``, ``bench`` and ``generate``. Run one as ``python -m experiments.<command>``; what
the commands share lives in modules named for it (``cli``, ``options``, ``report``, ...).
"""
