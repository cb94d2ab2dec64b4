"""``GPTConfig``: one configuration, variants chosen by fields (nanoGPT's ``GPTConfig``).

Defaults are the chapter's tiny model (block 32, 2 layers, 4 heads, d_model 64; the chapter's
``build.py`` for "The Details That Matter"). ``norm`` picks LayerNorm or RMSNorm (or the
chapter's break-it choices: LayerNorm then RMSNorm by depth, or no normalisation), ``mlp`` the
feed-forward block (GELU or ReLU² MLP d -> 4d -> d, or SwiGLU with hidden int(8/3 d)), ``pos``
learned absolute position embeddings or RoPE applied to queries and keys.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Dict

import numpy as np

from layers.checks import boolean, divides, even_head_dim, positive_int

NORMS = ("ln", "rms", "ln_rms", "none")
MLPS = ("gelu", "swiglu", "relu2")
POSITIONS = ("learned", "rope")
DTYPES = ("float32", "float64")


@dataclass
class GPTConfig:
    """Hyperparameters of a ``gpt.GPT``.

    Args:
        vocab_size (int): number of token ids V (> 0).
        block_size (int): the longest context T the model accepts (> 0).
        n_layers (int): number of transformer blocks (> 0).
        n_heads (int): attention heads; must divide ``d_model``.
        d_model (int): width C of the residual stream (> 0).
        norm (str): "ln" (LayerNorm, eps 1e-5), "rms" (RMSNorm, eps 1e-6), "ln_rms" (the
            chapter's break-it ``norm_for_layer``: blocks ``i < n_layers // 2`` LayerNorm, the
            others RMSNorm; the final ``ln_f`` stays LayerNorm, as the chapter changes only the
            blocks' norms) or "none" (no normalisation: every norm, ``ln_f`` included, is the
            identity and has no parameters; the chapter's ``make_norm("none")``).
        mlp (str): "gelu" (tanh GELU MLP), "relu2" (ReLU² MLP) or "swiglu".
        pos (str): "learned" (position embedding table) or "rope" (rotary, needs an even
            head_dim = d_model // n_heads).
        dtype (str): "float32" or "float64", the dtype of every parameter and activation.
        bias (bool): nanoGPT's ``bias``, "True: bias in Linears and LayerNorms"; False: none
            (RMSNorm never has one, nor SwiGLU's projections). A config written before the
            field existed (a checkpoint's) loads as True.

    Raises:
        TypeError: if an integer field is not an int (bools are rejected), a choice field
            is not a str, or ``bias`` is not a bool.
        ValueError: naming the field, for a non-positive size, ``n_heads`` not dividing
            ``d_model``, an odd head_dim with ``pos="rope"``, or an unknown choice.
    """

    vocab_size: int
    block_size: int = 32
    n_layers: int = 2
    n_heads: int = 4
    d_model: int = 64
    norm: str = "ln"
    mlp: str = "gelu"
    pos: str = "learned"
    dtype: str = "float32"
    bias: bool = True

    def __post_init__(self) -> None:
        for name in ("vocab_size", "block_size", "n_layers", "n_heads", "d_model"):
            setattr(self, name, positive_int(getattr(self, name), name, "GPTConfig"))
        if isinstance(self.dtype, np.dtype) or isinstance(self.dtype, type):
            self.dtype = np.dtype(self.dtype).name
        for name, choices in (("norm", NORMS), ("mlp", MLPS), ("pos", POSITIONS),
                              ("dtype", DTYPES)):
            v = getattr(self, name)
            if not isinstance(v, str):
                raise TypeError(f"GPTConfig.{name} must be a str, one of {choices}, got {v!r}")
            if v not in choices:
                raise ValueError(f"GPTConfig.{name} must be one of {choices}, got {v!r}")
        self.bias = boolean(self.bias, "bias", "GPTConfig")
        divides(self.n_heads, self.d_model, "GPTConfig")
        if self.pos == "rope":
            even_head_dim(self.head_dim, "GPTConfig", got=(
                f"d_model // n_heads = {self.d_model} // {self.n_heads} = {self.head_dim} "
                f"with pos='rope'"))

    @property
    def head_dim(self) -> int:
        """Width of one attention head, ``d_model // n_heads``."""
        return self.d_model // self.n_heads

    @property
    def np_dtype(self) -> np.dtype:
        """``np.dtype(self.dtype)``."""
        return np.dtype(self.dtype)

    def to_dict(self) -> Dict[str, Any]:
        """The fields as a plain dict (JSON-serialisable)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "GPTConfig":
        """Build a config from ``to_dict()``'s output.

        Raises:
            ValueError: on a key that is not a field (naming it), or as the constructor.
            TypeError: if ``d`` is not a mapping, or as the constructor.
        """
        if not hasattr(d, "keys"):
            raise TypeError(f"GPTConfig.from_dict expects a mapping, got {type(d).__name__}")
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"GPTConfig.from_dict: unknown field(s) {unknown}")
        if "vocab_size" not in d:
            raise ValueError("GPTConfig.from_dict: missing field 'vocab_size'")
        return cls(**dict(d))
