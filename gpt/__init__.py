"""gpt: a small GPT on minigrad and the hand-derived layers.

Public API: ``GPTConfig`` (hyperparameters, variants by field: norm, mlp, pos, dtype) and
``GPT`` (the model; ``model(idx, targets=None) -> (logits, loss)``).
"""
from .config import GPTConfig
from .model import GPT
