"""``GPT``: a decoder-only transformer on minigrad and the hand-derived layers.

Shape letters: B batch, T sequence length (<= block_size), C = d_model, V = vocab_size.

Architecture (GPT-2 / nanoGPT pre-norm; the chapter's ``ModernGPT``)::

    x = token_embedding(idx) [+ position_embedding(0..T-1) when pos="learned"]   # (B, T, C)
    for each block:
        x = x + attn(ln1(x))          # causal self-attention (RoPE on q, k when pos="rope")
        x = x + mlp(ln2(x))           # GELU / ReLU² MLP or SwiGLU
    x = ln_f(x)
    logits = x @ token_embedding.weight^T                                       # (B, T, V)
    loss = cross_entropy(logits.reshape(B*T, V), targets.reshape(B*T))

The output projection is tied to the token embedding (Press & Wolf 2017, "Using the Output
Embedding to Improve Language Models"): one array, used twice, so its gradient is the sum of the
embedding's scatter-add and the output projection's ``dlogits^T x``; it is counted once.
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

import numpy as np

from minigrad import Module, ModuleList, Tensor, from_pair
from layers.checks import index_range
from layers.cross_entropy import CrossEntropyFunction, cross_entropy_forward
from layers.linear import LinearFunction, linear_forward
from layers.modules import MLP, CausalSelfAttention, Embedding, Identity, LayerNorm, RMSNorm, SwiGLU

from .config import GPTConfig

__all__ = ["Block", "GPT", "INITS", "BACKWARDS"]

INITS = ("pytorch", "gpt2")
BACKWARDS = ("layernorm", "rmsnorm", "gelu", "relu2", "swiglu", "rope", "attention",
             "cross_entropy", "linear", "embedding")   # the layers whose backward can be replaced


def _norm(config: GPTConfig, dt, backward: dict, layer: int = -1):
    """The norm of block ``layer`` (``-1``: the final ``ln_f``) for ``config.norm``."""
    kind = config.norm
    if kind == "none":
        return Identity()
    if kind == "ln_rms":  # the chapter's break-it norm_for_layer; ln_f stays LayerNorm
        kind = "rms" if layer >= config.n_layers // 2 else "ln"
    if kind == "ln":
        return LayerNorm(config.d_model, eps=1e-5, dtype=dt, bias=config.bias,
                         backward=backward.get("layernorm"))
    return RMSNorm(config.d_model, eps=1e-6, dtype=dt, backward=backward.get("rmsnorm"))


class Block(Module):
    """One pre-norm transformer block: ``x + attn(ln1(x))``, then ``x + mlp(ln2(x))``.

    Args:
        config (GPTConfig): widths and variant choices.
        layer (int): index of the block (chooses its norm when ``config.norm == "ln_rms"``).
        rng (np.random.Generator): init source; draws happen in the order attn (c_attn weight,
            bias, c_proj weight, bias), then mlp (c_fc weight, bias, c_proj weight, bias; or
            gate_proj, up_proj, down_proj weights). The norms draw nothing.
        backward (dict | None): ``{name: fn}`` as ``GPT``'s, passed to the norms, the attention
            and the MLP.

    Parameters: ``ln1.*``, ``attn.c_attn.*``, ``attn.c_proj.*``, ``ln2.*``, ``mlp.*``.
    Shapes: x (B, T, C) -> (B, T, C).

    Attributes:
        capture: None, or a callable ``capture(site, x)`` that receives a copy (``np.ndarray``
            (B, T, C), no graph node) of the residual stream entering the attention
            (``site="pre_attn"``, the input of ln1) and the MLP (``"pre_mlp"``, the input of
            ln2). Used by ``gpt.capture.capture_residual_stream``; the output is unchanged.
    """

    def __init__(self, config: GPTConfig, rng: np.random.Generator, layer: int = 0,
                 backward=None) -> None:
        super().__init__()
        dt = config.np_dtype
        backward = backward or {}
        self.ln1 = _norm(config, dt, backward, layer)
        self.attn = CausalSelfAttention(config.d_model, config.n_heads,
                                        rope=config.pos == "rope", block_size=config.block_size,
                                        rng=rng, dtype=dt, bias=config.bias, backward=backward)
        self.ln2 = _norm(config, dt, backward, layer)
        if config.mlp == "swiglu":
            self.mlp = SwiGLU(config.d_model, rng=rng, dtype=dt, backward=backward.get("swiglu"))
        else:
            self.mlp = MLP(config.d_model, activation=config.mlp, rng=rng, dtype=dt,
                           bias=config.bias, backward=backward)
        self.capture = None   # a plain attribute: not a parameter or submodule

    def forward(self, x: Tensor) -> Tensor:
        if self.capture is not None:
            self.capture("pre_attn", np.array(x.data, copy=True))   # (B, T, C), a copy
        x = x + self.attn(self.ln1(x))   # (B, T, C)
        if self.capture is not None:
            self.capture("pre_mlp", np.array(x.data, copy=True))
        x = x + self.mlp(self.ln2(x))    # (B, T, C)
        return x


class GPT(Module):
    """A small GPT whose variants are chosen by ``GPTConfig`` fields.

    Args:
        config (GPTConfig): the model's hyperparameters (a dict is also accepted and passed
            to ``GPTConfig.from_dict``).
        seed (int): seed of the ``np.random.default_rng`` that initialises the weights.
        init (str): ``"pytorch"`` (the chapter's: PyTorch's defaults) or ``"gpt2"`` (GPT-2's,
            as nanoGPT's ``GPT.__init__``).
        backward (dict | None): ``{name: fn}`` to train with backward passes of one's own (the
            exercises): each ``fn`` has the signature of ``layers/<name>.py``'s
            ``<name>_backward(dout, cache)`` and returns the same gradients, and is used in its
            place everywhere the model runs that layer. Names: ``BACKWARDS`` ("layernorm",
            "rmsnorm", "gelu" (the tanh form), "relu2", "swiglu", "rope", "attention" (the core
            ``attention_backward``), "cross_entropy", "linear", "embedding"). None (default):
            the layers' own.

    Initialisation ``"pytorch"`` (PyTorch's defaults, one Generator, this fixed order):
    ``token_embedding.weight`` ~ N(0, 1); ``position_embedding.weight`` ~ N(0, 1) (only with
    pos="learned"); then for each block i in order its attention and MLP Linear layers (see
    ``Block``), each weight then bias ~ U(±1/sqrt(in_features)); norm gains 1, biases 0.
    With the tied N(0, 1) embedding the first logits have variance about C, so the step-0 loss
    is far above ln V.

    Initialisation ``"gpt2"`` (nanoGPT's ``_init_weights`` and its "special scaled init to the
    residual projections, per GPT-2 paper"): after the draws above, every parameter with two
    dimensions (the embeddings and every Linear weight) is drawn again from N(0, 0.02), in
    ``named_parameters`` order from a second Generator seeded with ``seed``; the residual
    projections (``attn.c_proj.weight``, the MLP's ``c_proj.weight``, and SwiGLU's
    ``down_proj.weight``, its projection back into the residual stream, which nanoGPT's model
    does not have) from N(0, 0.02 / sqrt(2 n_layers)); every bias is 0; norm gains stay 1.
    The step-0 loss is then about ln V.

    Parameter names (PyTorch's): ``token_embedding.weight`` (V, C),
    ``position_embedding.weight`` (block_size, C), ``blocks.{i}.ln1.weight/bias``,
    ``blocks.{i}.attn.c_attn.weight`` (3C, C) / ``bias``, ``blocks.{i}.attn.c_proj.weight``
    (C, C) / ``bias``, ``blocks.{i}.ln2.*``, ``blocks.{i}.mlp.c_fc.*`` and
    ``blocks.{i}.mlp.c_proj.*`` or ``blocks.{i}.mlp.gate_proj/up_proj/down_proj.weight``,
    ``ln_f.*``. RMSNorm has no bias; with ``config.bias`` False no Linear and no LayerNorm has
    one (nanoGPT's ``bias=False``). There is no separate ``lm_head`` parameter (weight tying).

    Attributes:
        config (GPTConfig)
        dtype (np.dtype): dtype of every parameter and activation.
        tied_linear, loss_function: the Functions of the output projection and of the loss
            (``LinearFunction``, ``CrossEntropyFunction``, or built from ``backward``).

    Raises:
        TypeError: if ``config`` is not a GPTConfig (or dict) or ``seed`` is not an int.
        ValueError: an unknown ``init``, or a name of ``backward`` not in ``BACKWARDS``.
    """

    def __init__(self, config: GPTConfig, seed: int = 0, init: str = "pytorch",
                 backward=None) -> None:
        super().__init__()
        if isinstance(config, dict):
            config = GPTConfig.from_dict(config)
        if not isinstance(config, GPTConfig):
            raise TypeError(f"GPT expects a GPTConfig, got {type(config).__name__}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise TypeError(f"seed must be an int, got {seed!r}")
        if init not in INITS:
            raise ValueError(f"init must be one of {INITS}, got {init!r}")
        backward = dict(backward or {})
        unknown = sorted(set(backward) - set(BACKWARDS))
        if unknown:
            raise ValueError(f"backward: unknown layer name(s) {unknown}; the known ones are "
                             f"{list(BACKWARDS)}")
        self.config = config
        self.dtype = dt = config.np_dtype
        rng = np.random.default_rng(int(seed))
        emb = backward.get("embedding")
        self.token_embedding = Embedding(config.vocab_size, config.d_model, rng=rng, dtype=dt,
                                         backward=emb)
        if config.pos == "learned":
            self.position_embedding = Embedding(config.block_size, config.d_model, rng=rng,
                                                dtype=dt, backward=emb)
        self.blocks = ModuleList([Block(config, rng, i, backward)
                                  for i in range(config.n_layers)])
        self.ln_f = _norm(config, dt, backward)
        lin, ce = backward.get("linear"), backward.get("cross_entropy")
        self.tied_linear = LinearFunction if lin is None else from_pair(
            linear_forward, lin, wrt=LinearFunction.wrt)
        self.loss_function = CrossEntropyFunction if ce is None else from_pair(
            cross_entropy_forward, ce, wrt=CrossEntropyFunction.wrt)
        self._positions = np.arange(config.block_size, dtype=np.int64)   # (block_size,)
        if init == "gpt2":
            rng = np.random.default_rng(int(seed))
            residual = 0.02 / math.sqrt(2 * config.n_layers)
            for name, p in self.named_parameters():
                if p.ndim == 2:
                    std = residual if name.endswith(("c_proj.weight", "down_proj.weight")) \
                        else 0.02
                    p.data[...] = rng.normal(0.0, std, p.shape)
                elif name.endswith("bias"):
                    p.data[...] = 0.0

    def _check_idx(self, idx, name: str) -> np.ndarray:
        a = idx.data if isinstance(idx, Tensor) else np.asarray(idx)
        if a.dtype.kind not in "iu":
            raise TypeError(f"{name} must be an integer array, got dtype {a.dtype}")
        if a.ndim != 2:
            raise ValueError(f"{name} must have shape (B, T), got {a.shape}")
        if a.shape[0] == 0 or a.shape[1] == 0:
            raise ValueError(f"{name} must be non-empty, got shape {a.shape}")
        if a.shape[1] > self.config.block_size:
            raise ValueError(
                f"{name} has sequence length {a.shape[1]} > block_size {self.config.block_size}"
            )
        index_range(a, self.config.vocab_size, name, "GPT", what="token id")
        return a

    def forward(self, idx, targets=None) -> Tuple[Tensor, Optional[Tensor]]:
        """Logits for every position and, with targets, the mean cross-entropy loss.

        Args:
            idx: integer array or Tensor (B, T), token ids in [0, vocab_size), T <= block_size.
            targets: optional integer array or Tensor (B, T), the next-token ids.

        Returns:
            (logits, loss): logits a Tensor (B, T, V) of the model's dtype; loss a scalar
            Tensor (mean over the B*T positions) or None without targets.

        Raises:
            TypeError: if idx/targets are not integer arrays.
            ValueError: on a wrong shape, T > block_size, or targets of a different shape
                than idx.
            IndexError: a token id outside [0, vocab_size) (PyTorch's embedding and
                cross-entropy raise IndexError too).
        """
        idx = self._check_idx(idx, "idx")
        B, T = idx.shape
        x = self.token_embedding(idx)                                         # (B, T, C)
        if self.config.pos == "learned":
            x = x + self.position_embedding(self._positions[:T])              # (T, C) bcast
        for block in self.blocks:
            x = block(x)                                                      # (B, T, C)
        x = self.ln_f(x)                                                      # (B, T, C)
        logits = self.tied_linear.apply(x, self.token_embedding.weight)       # (B, T, V) tied
        if targets is None:
            return logits, None
        targets = self._check_idx(targets, "targets")
        if targets.shape != idx.shape:
            raise ValueError(f"targets shape {targets.shape} differs from idx shape {idx.shape}")
        V = self.config.vocab_size
        loss = self.loss_function.apply(logits.reshape(B * T, V), targets.reshape(B * T))
        return logits, loss
