"""``layers.modules``: the layers as Modules under PyTorch's names, layouts and init
(``torch.nn``): ``LayerNorm``, ``Identity``, ``RMSNorm``, ``BatchNorm1d``, ``Linear``,
``Embedding``, ``MLP``, ``SwiGLU``, ``CausalSelfAttention``.

The Modules named after PyTorch's take PyTorch's positional parameters in PyTorch's order
(``LayerNorm(normalized_shape, eps, elementwise_affine, bias)``, ``Linear(in_features,
out_features, bias)``, ...); what is ours (``rng``, ``dtype``, ``backward``) is keyword-only, and
``forward``'s argument has PyTorch's name. A Module checks its arguments once, at construction
(calls into ``checks.py``); its ``forward`` checks the input against the Module (one call,
``module_input``: the parameters' dtype and last axes, as PyTorch's; ``Embedding``'s, the
indices) and applies the layer's ``Function`` (``layers/<name>.py``); ``BatchNorm1d``'s calls
``functional.batch_norm``, which also keeps its running statistics, as PyTorch's does.
``backward=`` puts another backward of the same signature in place of the layer's own:
``from_pair(<name>_forward, backward)`` (not offered by ``BatchNorm1d``, whose two modes have a
pair each). A fixed ``rng`` gives a fixed model: each Module draws its weights in the order its
constructor creates them.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from minigrad import Module, Parameter, Tensor, from_pair

from . import functional as F
from .attention import (AttentionFunction, MultiHeadAttentionFunction, attention_forward,
                        multi_head_attention_backward, multi_head_attention_forward)
from .checks import (batch_norm_input, boolean, check_eps, divides, even_head_dim, float_dtype,
                     generator, index_range, int_input, module_input, not_implemented,
                     positive_int, sizes, unit_interval)
from .embedding import EmbeddingFunction, embedding_forward
from .gelu import GELUFunction, gelu_forward
from .layernorm import LayerNormFunction, layernorm_forward
from .linear import LinearFunction, linear_forward
from .relu2 import ReLU2Function, relu2_forward
from .rmsnorm import RMSNormFunction, rmsnorm_forward
from .rope import RoPEFunction, build_rope_cache, rope_forward
from .swiglu import SwiGLUFunction, swiglu_forward

__all__ = ["Identity", "LayerNorm", "RMSNorm", "BatchNorm1d", "Linear", "Embedding", "SwiGLU",
           "MLP", "CausalSelfAttention"]


def _function(function, forward, backward):
    """The layer's ``function``, or ``from_pair(forward, backward)`` with the same gradients
    (``wrt``) when a ``backward`` is given in place of the layer's own."""
    return function if backward is None else from_pair(forward, backward, wrt=function.wrt)


def _normalize(function, x, k, params, eps):
    """``function.apply(x, *params, eps=eps)`` over the last k axes of x as one axis of their
    product, then back to x's shape (a norm over several axes)."""
    if k == 1:
        return function.apply(x, *params, eps=eps)
    flat = x.reshape(x.shape[:-k] + (-1,))
    return function.apply(flat, *(p.reshape(-1) for p in params), eps=eps).reshape(x.shape)


class LayerNorm(Module):
    """``layer_norm`` as a Module (``torch.nn.LayerNorm``, its parameters in its order): gain
    ``weight`` = 1 and ``bias`` = 0, both of shape normalized_shape.

    Args:
        normalized_shape (int | sequence of int): sizes of the last axes to normalize (the GPT's
            C).
        eps (float): added to the variance, default 1e-5 (PyTorch's).
        elementwise_affine (bool): True (default): learn ``weight`` and ``bias``; False: no
            parameters (both None: gain 1, shift 0), as PyTorch.
        bias (bool): False: no bias (``bias`` is None, the shift is 0), as
            ``torch.nn.LayerNorm(..., bias=False)`` (PyTorch >= 2.1).
        dtype: keyword-only; parameter dtype, default float32 (None: float32, PyTorch's
            default). PyTorch's ``device`` is not offered.
        backward: keyword-only; None for ``layernorm_backward``, or a function of the same
            signature ``(dout, cache) -> (dx, dweight, dbias)`` to use in its place.

    Shapes: input (..., *normalized_shape) -> the same shape, of the parameters' dtype.

    Raises:
        TypeError: a non-integer size, a non-bool elementwise_affine or bias, or a non-floating
            dtype (at construction); an input of a dtype other than the parameters' (in forward).
        ValueError: a size <= 0 or an eps that is not a finite number >= 0 (at construction);
            an input whose last axes are not normalized_shape (in forward).
    """

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, *, dtype=np.float32, backward=None) -> None:
        super().__init__()
        self.normalized_shape = sizes(normalized_shape, "LayerNorm")
        self.eps = check_eps(eps, "LayerNorm")
        self.elementwise_affine = boolean(elementwise_affine, "elementwise_affine", "LayerNorm")
        bias = boolean(bias, "bias", "LayerNorm")
        ones = np.ones(self.normalized_shape, dtype=float_dtype(dtype, "LayerNorm"))
        self.weight = Parameter(ones) if self.elementwise_affine else None
        self.bias = Parameter(np.zeros_like(ones)) if self.elementwise_affine and bias else None
        self.function = _function(LayerNormFunction, layernorm_forward, backward)

    def forward(self, input: Tensor) -> Tensor:
        input = module_input(input, self.weight, self.normalized_shape, "LayerNorm")
        shape, dt = self.normalized_shape, input.dtype
        weight = np.ones(shape, dt) if self.weight is None else self.weight   # gain 1
        bias = np.zeros(shape, dt) if self.bias is None else self.bias        # shift 0
        return _normalize(self.function, input, len(shape), (weight, bias), self.eps)

    def extra_repr(self) -> str:
        """PyTorch's (2.13): ``LayerNorm((8,), eps=1e-05, elementwise_affine=True, bias=True)``."""
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class Identity(Module):
    """Returns its input unchanged (``torch.nn.Identity``); no parameters. Any constructor
    arguments are accepted and ignored, as PyTorch's.

    Stands in for a norm when a model is built without normalisation (the chapter's
    ``make_norm("none")``). Shapes: input (...) -> (...), the same Tensor.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


class RMSNorm(Module):
    """``rms_norm`` as a Module with a learned gain ``weight`` = 1 of shape normalized_shape
    (``torch.nn.RMSNorm``, its parameters in its order).

    Args:
        normalized_shape (int | sequence of int): sizes of the last axes to normalize (the GPT's
            C).
        eps (float | None): default None, ``np.finfo(input.dtype).eps`` (``torch.nn.RMSNorm``'s
            default); the chapter's build.py passes 1e-6.
        elementwise_affine (bool): True (default): learn ``weight``; False: no parameter
            (``weight`` is None, gain 1), as PyTorch.
        dtype: keyword-only; parameter dtype, default float32 (None: float32, PyTorch's
            default). PyTorch's ``device`` is not offered.
        backward: keyword-only; None for ``rmsnorm_backward``, or a function of the same
            signature ``(dout, cache) -> (dx, dweight)`` to use in its place.

    Shapes: x (..., *normalized_shape) -> the same shape, of the parameter's dtype.

    Raises:
        TypeError: a non-integer size, a non-bool elementwise_affine or a non-floating dtype (at
            construction); an x of a dtype other than the parameter's (in forward).
        ValueError: a size <= 0 or an eps that is not a finite number >= 0 (at construction);
            an x whose last axes are not normalized_shape (in forward).
    """

    def __init__(self, normalized_shape, eps: Optional[float] = None,
                 elementwise_affine: bool = True, *, dtype=np.float32, backward=None) -> None:
        super().__init__()
        self.normalized_shape = sizes(normalized_shape, "RMSNorm")
        self.eps = None if eps is None else check_eps(eps, "RMSNorm")
        self.elementwise_affine = boolean(elementwise_affine, "elementwise_affine", "RMSNorm")
        dt = float_dtype(dtype, "RMSNorm")
        self.weight = (Parameter(np.ones(self.normalized_shape, dtype=dt))
                       if self.elementwise_affine else None)
        self.function = _function(RMSNormFunction, rmsnorm_forward, backward)

    def forward(self, x: Tensor) -> Tensor:
        x = module_input(x, self.weight, self.normalized_shape, "RMSNorm")
        eps = float(np.finfo(x.dtype).eps) if self.eps is None else self.eps
        weight = np.ones(self.normalized_shape, x.dtype) if self.weight is None else self.weight
        return _normalize(self.function, x, len(self.normalized_shape), (weight,), eps)

    def extra_repr(self) -> str:
        """PyTorch's: ``RMSNorm((8,), eps=None, elementwise_affine=True)``."""
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class BatchNorm1d(Module):
    """``batch_norm`` as a Module (``torch.nn.BatchNorm1d``, its parameters in its order; Ioffe &
    Szegedy 2015): gain ``weight`` = 1 and ``bias`` = 0 of shape (num_features,), and the
    buffers ``running_mean`` = 0, ``running_var`` = 1 (num_features,) and
    ``num_batches_tracked`` = 0 (0-d int64), saved by ``state_dict`` under PyTorch's names.

    In training (``train()``, the default) each channel is normalised with its batch mean and
    biased variance; every call adds 1 to ``num_batches_tracked`` and moves the running
    statistics toward the batch's, in place:
    ``running = (1 - momentum) * running + momentum * batch``, the variance unbiased. In eval
    (``eval()``) the running statistics normalise: an affine map, the same for every batch.

    Args:
        num_features (int): C, the channels (axis 1 of the input).
        eps (float): added to the variance, default 1e-5 (PyTorch's).
        momentum (float | None): in [0, 1], the weight of each batch in the running statistics
            (default 0.1); None: their cumulative average, batch k weighing 1/k (PyTorch's).
        affine (bool): True (default): learn ``weight`` and ``bias``; False: neither (None:
            gain 1, shift 0).
        track_running_stats (bool): True (default): keep the buffers above; False: none (all
            three None), and the batch statistics normalise in eval too, as PyTorch.
        bias (bool): keyword-only; False: no ``bias`` (None, shift 0), as
            ``torch.nn.BatchNorm1d(..., bias=False)`` (PyTorch 2.13).
        dtype: keyword-only; dtype of the parameters and running statistics, default float32
            (None: float32, PyTorch's default). PyTorch's ``device`` is not offered.

    Shapes: input (N, C) or (N, C, L) -> the same shape, of the Module's dtype; the statistics
    run over N (and L).

    Raises:
        TypeError: a non-integer num_features, a non-bool affine, track_running_stats or bias,
            or a non-floating dtype (at construction); an input of a dtype other than the
            Module's (in forward).
        ValueError: num_features <= 0, an eps that is not a finite number >= 0, a momentum
            outside [0, 1] (at construction); an input neither 2-D nor 3-D ("expected 2D or 3D
            input (got 4D input)", PyTorch's), with another C, or, in training, with one value
            a channel ("Expected more than 1 value per channel when training, ...", PyTorch's)
            or an eps of 0 (in forward). A refused input changes no buffer.
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: Optional[float] = 0.1,
                 affine: bool = True, track_running_stats: bool = True, *, bias: bool = True,
                 dtype=np.float32) -> None:
        super().__init__()
        fn = "BatchNorm1d"
        self.num_features = C = positive_int(num_features, "num_features", fn)
        self.eps = check_eps(eps, fn)
        self.momentum = None if momentum is None else unit_interval(momentum, "momentum", fn)
        self.affine = boolean(affine, "affine", fn)
        self.track_running_stats = boolean(track_running_stats, "track_running_stats", fn)
        bias = boolean(bias, "bias", fn)
        dt = float_dtype(dtype, fn)
        self.weight = Parameter(np.ones(C, dt)) if self.affine else None
        self.bias = Parameter(np.zeros(C, dt)) if self.affine and bias else None
        track = self.track_running_stats
        self.register_buffer("running_mean", Tensor(np.zeros(C, dt)) if track else None)
        self.register_buffer("running_var", Tensor(np.ones(C, dt)) if track else None)
        count = Tensor(np.array(0, np.int64)) if track else None        # 0-d int64, as PyTorch
        self.register_buffer("num_batches_tracked", count)

    def forward(self, input: Tensor) -> Tensor:
        like = self.weight if self.affine else self.running_mean      # the Module's dtype
        input = batch_norm_input(input, self.num_features, like, "BatchNorm1d")
        update = self.training and self.track_running_stats         # the running statistics
        momentum = self.momentum
        if momentum is None:        # the cumulative average: batch k weighs 1/k
            momentum = 1.0 / (int(self.num_batches_tracked.data) + 1) if update else 0.0
        out = F.batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                           self.training or not self.track_running_stats, momentum, self.eps)
        if update:                  # after F.batch_norm's checks: a refused input counts not
            self.num_batches_tracked.add_(1)
        return out

    def extra_repr(self) -> str:
        """PyTorch's (2.13): ``BatchNorm1d(4, eps=1e-05, momentum=0.1, affine=True, bias=True,
        track_running_stats=True)``."""
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class Linear(Module):
    """``linear`` as a Module (``torch.nn.Linear``, its parameters in its order):
    ``y = x W^T + b``.

    Args:
        in_features (int), out_features (int): sizes of the input and output last axes.
        bias (bool): whether to add a learned bias (default True).
        rng (np.random.Generator | None): keyword-only; source of the init (a fresh unseeded
            one if None).
        dtype: keyword-only; parameter dtype, default float32 (None: float32, PyTorch's
            default). PyTorch's ``device`` is not offered.
        backward: keyword-only; None for ``linear_backward``, or a function of the same
            signature ``(dout, cache) -> (dx, dW, db)`` to use in its place.

    Parameters: ``weight`` (out_features, in_features), ``bias`` (out_features,), both
    ~ U(-1/sqrt(in_features), 1/sqrt(in_features)), drawn weight first (PyTorch's default:
    kaiming_uniform with a = sqrt(5) gives that bound).
    Shapes: input (..., in_features) -> (..., out_features), of the parameters' dtype.

    Raises:
        TypeError: a non-integer size (at construction); an input of a dtype other than the
            parameters' (in forward).
        ValueError: a size <= 0 (at construction); an input whose last axis is not in_features
            (in forward).
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *, rng=None,
                 dtype=np.float32, backward=None) -> None:
        super().__init__()
        self.in_features = positive_int(in_features, "in_features", "Linear")
        self.out_features = positive_int(out_features, "out_features", "Linear")
        rng = generator(rng)
        dt = float_dtype(dtype, "Linear")
        bound = 1.0 / math.sqrt(self.in_features)
        self.weight = Parameter(
            rng.uniform(-bound, bound, (self.out_features, self.in_features)).astype(dt))
        if bias:
            self.bias = Parameter(rng.uniform(-bound, bound, self.out_features).astype(dt))
        else:
            self.bias = None
        self.function = _function(LinearFunction, linear_forward, backward)

    def forward(self, input: Tensor) -> Tensor:
        input = module_input(input, self.weight, (self.in_features,), "Linear")
        return self.function.apply(input, self.weight, self.bias)    # bias None: a constant

    def extra_repr(self) -> str:
        """PyTorch's: ``Linear(in_features=8, out_features=4, bias=True)``."""
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Embedding(Module):
    """``embedding`` as a Module (``torch.nn.Embedding``, its first parameters in its order):
    ``y = weight[input]``.

    Args:
        num_embeddings (int): number of rows (vocabulary or positions).
        embedding_dim (int): width C of a row.
        padding_idx, max_norm: must be None (not implemented); PyTorch's later parameters
            (norm_type, scale_grad_by_freq, sparse, _weight, _freeze, device) are not offered.
        rng (np.random.Generator | None): keyword-only; source of the init.
        dtype: keyword-only; parameter dtype, default float32 (None: float32, PyTorch's
            default).
        backward: keyword-only; None for ``embedding_backward``, or a function of the same
            signature ``(dout, cache) -> dweight`` to use in its place.

    Parameters: ``weight`` (num_embeddings, embedding_dim) ~ N(0, 1).
    Shapes: input integer (...) -> (..., embedding_dim).

    Raises:
        NotImplementedError: a padding_idx or a max_norm (at construction).
        TypeError: input not of an integer dtype (in forward).
        IndexError: an index of input outside [0, num_embeddings), negative ones included, as
            PyTorch (in forward).
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx=None,
                 max_norm=None, *, rng=None, dtype=np.float32, backward=None) -> None:
        super().__init__()
        self.num_embeddings = positive_int(num_embeddings, "num_embeddings", "Embedding")
        self.embedding_dim = positive_int(embedding_dim, "embedding_dim", "Embedding")
        not_implemented(padding_idx, None, "padding_idx", "Embedding")
        not_implemented(max_norm, None, "max_norm", "Embedding")
        rng = generator(rng)
        dt = float_dtype(dtype, "Embedding")
        self.weight = Parameter(
            rng.standard_normal((self.num_embeddings, self.embedding_dim)).astype(dt))
        self.function = _function(EmbeddingFunction, embedding_forward, backward)

    def forward(self, input) -> Tensor:
        idx = int_input(input, "input", "Embedding")          # the indices enter here
        index_range(idx, self.num_embeddings, "input", "Embedding")
        return self.function.apply(self.weight, idx)

    def extra_repr(self) -> str:
        """PyTorch's: ``Embedding(10, 3)``."""
        return f"{self.num_embeddings}, {self.embedding_dim}"


class MLP(Module):
    """Feed-forward block ``c_proj(act(c_fc(x)))``, d -> 4d -> d (GPT-2's MLP; the chapter's
    ``MLP``).

    Args:
        d (int): model width C.
        activation (str): "gelu" (tanh approximation, GPT-2 / the chapter) or "relu2"
            (relu(x)^2, So et al. 2021 "Primer").
        rng, dtype: as ``Linear``.
        bias (bool): keyword-only; whether the two Linears have a bias (default True).
        backward (dict | None): keyword-only; ``{name: fn}``, a function of the signature of
            ``<name>_backward(dout, cache)`` to use in place of the layer's own, for the names
            "linear" and ``activation``; other names are ignored.

    Parameters: ``c_fc.weight`` (4C, C), ``c_fc.bias`` (4C,), ``c_proj.weight`` (C, 4C),
    ``c_proj.bias`` (C,), drawn in that order.
    Shapes: x (..., C) -> (..., C).

    Raises:
        ValueError: on an unknown activation.
    """

    def __init__(self, d: int, activation: str = "gelu", rng=None, dtype=np.float32, *,
                 bias: bool = True, backward=None) -> None:
        super().__init__()
        d = positive_int(d, "d", "MLP")
        if activation not in ("gelu", "relu2"):
            raise ValueError(f"MLP activation must be 'gelu' or 'relu2', got {activation!r}")
        rng = generator(rng)
        backward = backward or {}
        self.activation = activation
        linear = backward.get("linear")
        self.c_fc = Linear(d, 4 * d, bias=bias, rng=rng, dtype=dtype, backward=linear)
        self.c_proj = Linear(4 * d, d, bias=bias, rng=rng, dtype=dtype, backward=linear)
        act = backward.get(activation)
        if activation == "gelu":
            self.function = _function(GELUFunction, gelu_forward, act)
        else:
            self.function = _function(ReLU2Function, relu2_forward, act)

    def forward(self, x: Tensor) -> Tensor:
        h = self.function.apply(self.c_fc(x))                         # (..., 4C)
        return self.c_proj(h)                                         # (..., C)


class SwiGLU(Module):
    """``swiglu`` as a Module with three bias-free ``Linear`` projections (the chapter's
    ``SwiGLU``): ``down_proj(silu(gate_proj(x)) * up_proj(x))``, one fused node.

    Hidden width H = int(d * hidden_mult); 8/3 keeps the parameter count near a 4d GELU MLP's.

    Args:
        d (int): model width C.
        hidden_mult (float): H / C, default 8/3.
        rng (np.random.Generator | None), dtype: as ``Linear``.
        backward: keyword-only; None for ``swiglu_backward``, or a function of the same
            signature ``(dout, cache) -> (dx, dw_gate, dw_up, dw_down)`` to use in its place.

    Parameters: ``gate_proj.weight`` (H, C), ``up_proj.weight`` (H, C), ``down_proj.weight``
    (C, H); each U(+-1/sqrt(fan_in)), drawn in that order.
    Shapes: x (..., C) -> (..., C).

    Raises:
        TypeError: an x of a dtype other than the parameters' (in forward).
        ValueError: if int(d * hidden_mult) < 1; an x whose last axis is not d (in forward).
    """

    def __init__(self, d: int, hidden_mult: float = 8.0 / 3.0, rng=None,
                 dtype=np.float32, *, backward=None) -> None:
        super().__init__()
        d = positive_int(d, "d", "SwiGLU")
        hidden = int(d * hidden_mult)
        if hidden < 1:
            raise ValueError(f"SwiGLU hidden width int({d} * {hidden_mult}) must be >= 1")
        rng = generator(rng)
        self.hidden = hidden
        self.gate_proj = Linear(d, hidden, bias=False, rng=rng, dtype=dtype)
        self.up_proj = Linear(d, hidden, bias=False, rng=rng, dtype=dtype)
        self.down_proj = Linear(hidden, d, bias=False, rng=rng, dtype=dtype)
        self.function = _function(SwiGLUFunction, swiglu_forward, backward)

    def forward(self, x: Tensor) -> Tensor:
        x = module_input(x, self.gate_proj.weight, (self.gate_proj.in_features,), "SwiGLU")
        return self.function.apply(x, self.gate_proj.weight, self.up_proj.weight,
                                   self.down_proj.weight)


class CausalSelfAttention(Module):
    """Multi-head causal self-attention (Vaswani et al. 2017; nanoGPT / the chapter's layout).

    ``c_attn`` projects x to q, k, v at once; heads attend with
    ``softmax(q k^T / sqrt(hs) + causal mask) v`` (without RoPE the split into heads, the
    attention and the merge are one node, ``MultiHeadAttentionFunction``; with RoPE the split
    is separate nodes and the attention one, ``AttentionFunction``); ``c_proj`` mixes the
    heads. With ``rope=True`` queries and keys are rotated by RoPE (Su et al. 2021, interleaved
    pairs, the chapter's step 8) from a cos/sin table of ``block_size`` positions built once.

    Args:
        d_model (int): width C.
        n_heads (int): H, must divide C (and C // H must be even with RoPE).
        rope (bool): apply RoPE to q and k (default False).
        block_size (int): longest sequence the RoPE table covers (default 1024; unused
            without RoPE).
        rng, dtype: as ``Linear``.
        bias (bool): keyword-only; whether ``c_attn`` and ``c_proj`` have a bias (default True).
        backward (dict | None): keyword-only; ``{name: fn}``, a function of the signature of
            ``<name>_backward(dout, cache)`` to use in place of the layer's own, for the names
            "attention" (``attention_backward``; without RoPE it replaces the call inside
            ``multi_head_attention_backward``), "rope" and "linear"; other names are ignored.

    Parameters: ``c_attn.weight`` (3C, C), ``c_attn.bias`` (3C,), ``c_proj.weight`` (C, C),
    ``c_proj.bias`` (C,), drawn in that order.
    Shapes: x (B, T, C) -> (B, T, C).

    Raises:
        ValueError: if n_heads does not divide d_model, head_dim is odd with rope, or (in
            forward) T exceeds block_size with rope.
    """

    def __init__(self, d_model: int, n_heads: int, rope: bool = False, block_size: int = 1024,
                 rng=None, dtype=np.float32, *, bias: bool = True, backward=None) -> None:
        super().__init__()
        d_model = positive_int(d_model, "d_model", "CausalSelfAttention")
        n_heads = positive_int(n_heads, "n_heads", "CausalSelfAttention")
        self.d_model, self.n_heads = d_model, n_heads
        self.head_dim = divides(n_heads, d_model, "CausalSelfAttention")
        self.rope = bool(rope)
        self.block_size = positive_int(block_size, "block_size", "CausalSelfAttention")
        if self.rope:
            even_head_dim(self.head_dim, "CausalSelfAttention")
        rng = generator(rng)
        dt = float_dtype(dtype, "CausalSelfAttention")
        backward = backward or {}
        linear, attn = backward.get("linear"), backward.get("attention")
        self.c_attn = Linear(d_model, 3 * d_model, bias=bias, rng=rng, dtype=dt, backward=linear)
        self.c_proj = Linear(d_model, d_model, bias=bias, rng=rng, dtype=dt, backward=linear)
        if self.rope:
            # constants, not Parameters: (1, 1, block_size, hs) each
            self.rope_cos, self.rope_sin = build_rope_cache(self.block_size, self.head_dim,
                                                            dtype=dt)
            self.rope_function = _function(RoPEFunction, rope_forward, backward.get("rope"))
            self.function = _function(AttentionFunction, attention_forward, attn)
        elif attn is None:
            self.function = MultiHeadAttentionFunction
        else:  # attn in place of the attention_backward that multi_head_attention_backward calls
            self.function = from_pair(
                multi_head_attention_forward,
                lambda dy, cache: multi_head_attention_backward(dy, cache, attn), attn.__name__,
                wrt=MultiHeadAttentionFunction.wrt)

    def forward(self, x: Tensor) -> Tensor:
        B, T, C = x.shape
        H, hs = self.n_heads, self.head_dim
        qkv = self.c_attn(x)                                   # (B, T, 3C)
        if not self.rope:  # split, attention and merge in one node
            return self.c_proj(self.function.apply(qkv, n_heads=H, is_causal=True))
        # RoPE rotates q and k between the split and the attention: separate nodes
        qkv = qkv.reshape(B, T, 3, H, hs)                      # (B, T, 3, H, hs)
        qkv = qkv.transpose(2, 0, 3, 1, 4)                     # (3, B, H, T, hs)
        q, k, v = qkv[0], qkv[1], qkv[2]                       # (B, H, T, hs) each
        if T > self.block_size:
            raise ValueError(f"sequence length {T} exceeds the RoPE table's "
                             f"block_size {self.block_size}")
        cos = self.rope_cos[:, :, :T]                          # (1, 1, T, hs)
        sin = self.rope_sin[:, :, :T]
        q = self.rope_function.apply(q, cos, sin)
        k = self.rope_function.apply(k, cos, sin)
        y = self.function.apply(q, k, v, is_causal=True)       # (B, H, T, hs)
        y = y.transpose(0, 2, 1, 3).reshape(B, T, C)           # (B, T, C)
        return self.c_proj(y)
