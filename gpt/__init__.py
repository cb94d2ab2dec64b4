"""gpt: a small GPT on minigrad and the hand-derived layers.

Public API: ``GPTConfig`` (hyperparameters, variants by field: norm, mlp, pos, dtype) and
``GPT`` (the model; ``model(idx, targets=None) -> (logits, loss)``).
"""
from .config import GPTConfig
from .model import GPT

# Data, training loop and checkpoints.
from .data import CharTokenizer, get_batch, load_corpus, train_val_split
from .train import TrainingDiverged, estimate_loss, evaluate  # (gpt.train stays the module)
from .checkpoint import load_checkpoint, load_tokenizer, save_checkpoint
