"""Runnable studies built on ``gpt``: ``python -m experiments.four_variants`` (the main job)."""
