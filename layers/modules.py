"""``layers.modules``: the hand-derived layers wrapped as Modules with PyTorch's names and init.

Shape letters: B batch, T sequence length, C = d_model, H heads, hs = C // H head size,
F hidden width of a feed-forward block, V vocabulary size.

Every module holds its weights as ``minigrad.Parameter``s in PyTorch's layouts (``Linear.weight``
is (out_features, in_features)), so a ``state_dict`` maps onto ``torch.nn`` names unchanged.
Initialisation follows PyTorch's defaults, drawn from a numpy Generator (``rng``):

* ``Linear``: weight and bias ~ U(-1/sqrt(in_features), 1/sqrt(in_features)), weight first
  (``torch.nn.Linear.reset_parameters``: kaiming_uniform with a = sqrt(5) gives that bound).
* ``Embedding``: weight ~ N(0, 1) (``torch.nn.Embedding``).
* ``LayerNorm`` / ``RMSNorm``: gain 1, bias 0 (no random draws).

A module's draws happen in the order its sub-modules and parameters are created, as written
in each constructor, so a fixed ``rng`` seed gives a fixed model.
"""
from __future__ import annotations

import math

import numpy as np

from minigrad import Module, Parameter, Tensor

from ._checks import check_eps, divides, even_head_dim, float_dtype, positive_int
from .functional import (apply_rope, build_rope_cache, embedding, gelu, layer_norm, linear,
                         multi_head_attention, relu2, rms_norm,
                         scaled_dot_product_attention, swiglu)

__all__ = ["Identity", "LayerNorm", "RMSNorm", "Linear", "Embedding", "SwiGLU", "MLP",
           "CausalSelfAttention"]


def _rng(rng) -> np.random.Generator:
    """The init source: ``rng`` itself, or a fresh unseeded Generator for None.

    Raises:
        TypeError: for anything else (e.g. an int seed).
    """
    if rng is None:
        return np.random.default_rng()
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator or None, got {type(rng).__name__}")
    return rng


def _init_norm(m: Module, d, eps, dtype) -> None:
    """Set what LayerNorm and RMSNorm share: ``m.eps`` (a float, or None) and the gain
    ``m.weight`` (C,) = 1 of the given floating dtype.

    Raises:
        TypeError: a non-integer d or a non-floating dtype.
        ValueError: d <= 0, or an eps that is not a finite number >= 0 (checked here, not at
            the first forward).
    """
    fn = type(m).__name__
    d = positive_int(d, "d", fn)
    m.eps = None if eps is None else check_eps(eps, fn)
    m.weight = Parameter(np.ones(d, dtype=float_dtype(dtype, fn)))


class Identity(Module):
    """Returns its input unchanged (``torch.nn.Identity``); no parameters.

    Stands in for a norm when a model is built without normalisation (the chapter's
    ``make_norm("none")``). Shapes: x (...) -> (...), the same Tensor.
    """

    def forward(self, x: Tensor) -> Tensor:
        return x


class LayerNorm(Module):
    """Layer normalisation over the last axis (Ba et al. 2016; ``torch.nn.LayerNorm``).

    ``y = weight * (x - mean) / sqrt(var + eps) + bias``, biased variance; see
    ``layers/layernorm.py`` for the backward.

    Args:
        d (int): size C of the normalised (last) axis.
        eps (float): added to the variance, default 1e-5 (PyTorch's).
        rng: unused (no random init); accepted for a uniform constructor signature.
        dtype: parameter dtype, default float32.

    Parameters: ``weight`` (C,) = 1, ``bias`` (C,) = 0.
    Shapes: x (..., C) -> (..., C).

    Raises:
        TypeError: a non-integer d or a non-floating dtype.
        ValueError: d <= 0 or an eps that is not a finite number >= 0 (at construction).
    """

    def __init__(self, d: int, eps: float = 1e-5, rng=None, dtype=np.float32) -> None:
        super().__init__()
        _init_norm(self, d, eps, dtype)
        self.bias = Parameter(np.zeros_like(self.weight.data))

    def forward(self, x: Tensor) -> Tensor:
        return layer_norm(x, self.weight, self.bias, eps=self.eps)


class RMSNorm(Module):
    """Root-mean-square normalisation over the last axis (Zhang & Sennrich 2019).

    ``y = weight * x / sqrt(mean(x^2) + eps)``, no centring and no bias (the chapter's RMSNorm);
    see ``layers/rmsnorm.py`` for the backward.

    Args:
        d (int): size C of the normalised (last) axis.
        eps (float | None): default 1e-6 (the chapter's build.py); None means
            ``np.finfo(dtype).eps`` (``torch.nn.RMSNorm``'s default).
        rng: unused; accepted for a uniform constructor signature.
        dtype: parameter dtype, default float32.

    Parameters: ``weight`` (C,) = 1.
    Shapes: x (..., C) -> (..., C).

    Raises:
        TypeError: a non-integer d or a non-floating dtype.
        ValueError: d <= 0 or an eps that is not a finite number >= 0 (at construction).
    """

    def __init__(self, d: int, eps: float = 1e-6, rng=None, dtype=np.float32) -> None:
        super().__init__()
        _init_norm(self, d, eps, dtype)

    def forward(self, x: Tensor) -> Tensor:
        return rms_norm(x, self.weight, eps=self.eps)


class Linear(Module):
    """Affine map ``y = x W^T + b`` (``torch.nn.Linear``).

    Args:
        in_features (int), out_features (int): sizes of the input and output last axes.
        bias (bool): whether to add a learned bias (default True).
        rng (np.random.Generator | None): source of the init (a fresh unseeded one if None).
        dtype: parameter dtype, default float32.

    Parameters: ``weight`` (out_features, in_features), ``bias`` (out_features,), both
    ~ U(-1/sqrt(in_features), 1/sqrt(in_features)), drawn weight first.
    Shapes: x (..., in_features) -> (..., out_features).
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, rng=None,
                 dtype=np.float32) -> None:
        super().__init__()
        self.in_features = positive_int(in_features, "in_features", "Linear")
        self.out_features = positive_int(out_features, "out_features", "Linear")
        rng = _rng(rng)
        dt = float_dtype(dtype, "Linear")
        bound = 1.0 / math.sqrt(self.in_features)
        self.weight = Parameter(
            rng.uniform(-bound, bound, (self.out_features, self.in_features)).astype(dt))
        if bias:
            self.bias = Parameter(rng.uniform(-bound, bound, self.out_features).astype(dt))
        else:
            self.bias = None

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight, self.bias)


class Embedding(Module):
    """Lookup table ``y = weight[idx]`` (``torch.nn.Embedding``).

    Args:
        num_embeddings (int): number of rows (vocabulary or positions).
        embedding_dim (int): width C of a row.
        rng (np.random.Generator | None): source of the init.
        dtype: parameter dtype, default float32.

    Parameters: ``weight`` (num_embeddings, embedding_dim) ~ N(0, 1).
    Shapes: idx integer (...) -> (..., embedding_dim). Out-of-range indices raise in
    ``layers.functional.embedding``.
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, rng=None,
                 dtype=np.float32) -> None:
        super().__init__()
        self.num_embeddings = positive_int(num_embeddings, "num_embeddings", "Embedding")
        self.embedding_dim = positive_int(embedding_dim, "embedding_dim", "Embedding")
        rng = _rng(rng)
        dt = float_dtype(dtype, "Embedding")
        self.weight = Parameter(
            rng.standard_normal((self.num_embeddings, self.embedding_dim)).astype(dt))

    def forward(self, idx) -> Tensor:
        return embedding(idx, self.weight)


class SwiGLU(Module):
    """Gated feed-forward block ``down_proj(silu(gate_proj(x)) * up_proj(x))`` (Shazeer 2020,
    "GLU Variants Improve Transformer"; the chapter's ``SwiGLU``).

    Hidden width F = int(d * hidden_mult); 8/3 keeps the parameter count near a 4d GELU MLP's.
    The whole block is one fused autograd node (``layers.functional.swiglu``).

    Args:
        d (int): model width C.
        hidden_mult (float): F / C, default 8/3.
        rng, dtype: as ``Linear``.

    Parameters (no biases, Linear layout): ``gate_proj.weight`` (F, C), ``up_proj.weight``
    (F, C), ``down_proj.weight`` (C, F); each U(±1/sqrt(fan_in)), drawn in that order.
    Shapes: x (..., C) -> (..., C).

    Raises:
        ValueError: if int(d * hidden_mult) < 1.
    """

    def __init__(self, d: int, hidden_mult: float = 8.0 / 3.0, rng=None,
                 dtype=np.float32) -> None:
        super().__init__()
        d = positive_int(d, "d", "SwiGLU")
        hidden = int(d * hidden_mult)
        if hidden < 1:
            raise ValueError(f"SwiGLU hidden width int({d} * {hidden_mult}) must be >= 1")
        rng = _rng(rng)
        self.hidden = hidden
        self.gate_proj = Linear(d, hidden, bias=False, rng=rng, dtype=dtype)
        self.up_proj = Linear(d, hidden, bias=False, rng=rng, dtype=dtype)
        self.down_proj = Linear(hidden, d, bias=False, rng=rng, dtype=dtype)

    def forward(self, x: Tensor) -> Tensor:
        return swiglu(x, self.gate_proj.weight, self.up_proj.weight, self.down_proj.weight)


class MLP(Module):
    """Feed-forward block ``c_proj(act(c_fc(x)))``, d -> 4d -> d with biases (GPT-2's MLP; the
    chapter's ``MLP``).

    Args:
        d (int): model width C.
        activation (str): "gelu" (tanh approximation, GPT-2 / the chapter) or "relu2"
            (relu(x)^2, So et al. 2021 "Primer").
        rng, dtype: as ``Linear``.

    Parameters: ``c_fc.weight`` (4C, C), ``c_fc.bias`` (4C,), ``c_proj.weight`` (C, 4C),
    ``c_proj.bias`` (C,), drawn in that order.
    Shapes: x (..., C) -> (..., C).

    Raises:
        ValueError: on an unknown activation.
    """

    def __init__(self, d: int, activation: str = "gelu", rng=None, dtype=np.float32) -> None:
        super().__init__()
        d = positive_int(d, "d", "MLP")
        if activation not in ("gelu", "relu2"):
            raise ValueError(f"MLP activation must be 'gelu' or 'relu2', got {activation!r}")
        rng = _rng(rng)
        self.activation = activation
        self.c_fc = Linear(d, 4 * d, rng=rng, dtype=dtype)
        self.c_proj = Linear(4 * d, d, rng=rng, dtype=dtype)

    def forward(self, x: Tensor) -> Tensor:
        h = self.c_fc(x)                                              # (..., 4C)
        h = gelu(h, approximate="tanh") if self.activation == "gelu" else relu2(h)
        return self.c_proj(h)                                         # (..., C)


class CausalSelfAttention(Module):
    """Multi-head causal self-attention (Vaswani et al. 2017; nanoGPT / the chapter's layout).

    ``c_attn`` projects x to q, k, v at once; heads attend with
    ``softmax(q k^T / sqrt(hs) + causal mask) v`` (without RoPE the split into heads, the
    attention and the merge are one node, ``layers.functional.multi_head_attention``; with
    RoPE the split is separate nodes and the attention one,
    ``layers.functional.scaled_dot_product_attention``); ``c_proj`` mixes the heads. With
    ``rope=True`` queries and keys are rotated by RoPE (Su et al. 2021, interleaved pairs, the
    chapter's step 8) from a cos/sin table of ``block_size`` positions built once.

    Args:
        d_model (int): width C.
        n_heads (int): H, must divide C (and C // H must be even with RoPE).
        rope (bool): apply RoPE to q and k (default False).
        block_size (int): longest sequence the RoPE table covers (default 1024; unused
            without RoPE).
        rng, dtype: as ``Linear``.

    Parameters: ``c_attn.weight`` (3C, C), ``c_attn.bias`` (3C,), ``c_proj.weight`` (C, C),
    ``c_proj.bias`` (C,), drawn in that order.
    Shapes: x (B, T, C) -> (B, T, C).

    Raises:
        ValueError: if n_heads does not divide d_model, head_dim is odd with rope, or (in
            forward) T exceeds block_size with rope or x is not 3-D.
    """

    def __init__(self, d_model: int, n_heads: int, rope: bool = False, block_size: int = 1024,
                 rng=None, dtype=np.float32) -> None:
        super().__init__()
        d_model = positive_int(d_model, "d_model", "CausalSelfAttention")
        n_heads = positive_int(n_heads, "n_heads", "CausalSelfAttention")
        self.d_model, self.n_heads = d_model, n_heads
        self.head_dim = divides(n_heads, d_model, "CausalSelfAttention")
        self.rope = bool(rope)
        self.block_size = positive_int(block_size, "block_size", "CausalSelfAttention")
        if self.rope:
            even_head_dim(self.head_dim, "CausalSelfAttention")
        rng = _rng(rng)
        dt = float_dtype(dtype, "CausalSelfAttention")
        self.c_attn = Linear(d_model, 3 * d_model, rng=rng, dtype=dt)
        self.c_proj = Linear(d_model, d_model, rng=rng, dtype=dt)
        if self.rope:
            # constants, not Parameters: (1, 1, block_size, hs) each
            self.rope_cos, self.rope_sin = build_rope_cache(self.block_size, self.head_dim,
                                                            dtype=dt)

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim != 3:
            raise ValueError(f"CausalSelfAttention expects x of shape (B, T, C), got {x.shape}")
        B, T, C = x.shape
        H, hs = self.n_heads, self.head_dim
        qkv = self.c_attn(x)                                   # (B, T, 3C)
        if not self.rope:  # split, attention and merge in one node (layers/attention.py)
            return self.c_proj(multi_head_attention(qkv, H, is_causal=True))
        # RoPE rotates q and k between the split and the attention: separate nodes
        qkv = qkv.reshape(B, T, 3, H, hs)                      # (B, T, 3, H, hs)
        qkv = qkv.transpose(2, 0, 3, 1, 4)                     # (3, B, H, T, hs)
        q, k, v = qkv[0], qkv[1], qkv[2]                       # (B, H, T, hs) each
        if T > self.block_size:
            raise ValueError(f"sequence length {T} exceeds the RoPE table's "
                             f"block_size {self.block_size}")
        cos = self.rope_cos[:, :, :T]                      # (1, 1, T, hs)
        sin = self.rope_sin[:, :, :T]
        q = apply_rope(q, cos, sin)
        k = apply_rope(k, cos, sin)
        y = scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, hs)
        y = y.transpose(0, 2, 1, 3).reshape(B, T, C)           # (B, T, C)
        return self.c_proj(y)
