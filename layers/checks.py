"""The input checks of ``layers/_checks.py`` that ``gpt`` shares, under a public name.

``gpt.config``, ``gpt.model``, ``gpt.train`` and ``gpt.data`` call these so that one mistake
(a size that is not a positive integer, heads that do not split the width, a token id out of
range, an odd RoPE head size) gets one wording and one exception type everywhere.
"""
from ._checks import divides, even_head_dim, index_range, positive_int

__all__ = ["divides", "even_head_dim", "index_range", "positive_int"]
