"""``layers.functional``: the hand-derived layers under PyTorch's functional names and signatures
(``torch.nn.functional``), in its order: norms, activations, softmax and cross-entropy, RoPE and
attention, linear and embedding.

Each function checks its inputs where they enter (one call into ``checks.py`` per check, the
wording shared with the Modules and ``gpt``), then applies one autograd node, the ``Function``
that ``from_pair`` made of the layer's NumPy pair in ``layers/<name>.py``; the derivation is
that file's docstring and ``docs/derivations.md``. Float inputs are ``minigrad.Tensor``s (a
plain array is a constant); integer indices/targets and the RoPE cos/sin cache may be arrays or
Tensors. What PyTorch's signature offers beyond the layer's maths (a ``dtype`` cast, the class
axis of ``cross_entropy`` moved last, its class weights and probability targets, attention's
broadcasting) is handled here, with the engine's ops, around that node; what is not offered
raises ``NotImplementedError`` (listed in docs/pytorch.md).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from minigrad import Tensor, broadcast_to

from . import rope
from .attention import AttentionFunction, MaskedAttentionFunction, MultiHeadAttentionFunction
from .batchnorm import BatchNormEvalFunction, BatchNormFunction, stat_axes
from .checks import (alias, attention_mask, axis_index, boolean, channel_input, check_eps,
                     choice, class_weight, divides, even_head_dim, finite_number, flat_param,
                     float_dtype, float_input, index_range, int_input, integer, last_dim,
                     matrix_input, norm_param, normalized_axes, not_implemented, packed_qkv,
                     positive_int, positive_number, qkv_shapes, rope_table, running_stat,
                     same_dtype, sequence_input, shape_is, unit_interval, values_per_channel)
from .cross_entropy import CrossEntropyFunction
from .embedding import EmbeddingFunction
from .gelu import GELUErfFunction, GELUFunction
from .layernorm import LayerNormFunction
from .linear import LinearFunction
from .relu2 import ReLU2Function
from .rmsnorm import RMSNormFunction
from .rope import RoPEFunction
from .silu import SiLUFunction
from .softmax import LogSoftmaxFunction, SoftmaxFunction
from .swiglu import SwiGLUFunction

__all__ = [
    "batch_norm", "layer_norm", "rms_norm", "gelu", "relu", "relu2", "silu", "swiglu", "softmax",
    "log_softmax", "cross_entropy", "apply_rope", "build_rope_cache",
    "scaled_dot_product_attention", "multi_head_attention", "linear", "embedding",
]


# ------------------------------------------------------------------------------------ norms

def batch_norm(input, running_mean, running_var, weight=None, bias=None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Batch normalization of each channel (``torch.nn.functional.batch_norm``, same signature
    and defaults; Ioffe & Szegedy 2015, Algorithms 1 and 2).

    ``training=True``: each channel is normalised with the mean and biased variance of its
    values in this batch (every axis but axis 1), and, when running statistics are given, they
    are updated in place with PyTorch's momentum,
    ``running = (1 - momentum) * running + momentum * batch``, from the batch mean and the
    UNBIASED batch variance (m / (m - 1) times the biased one, m values a channel: the paper's
    Algorithm 2, step 10). ``training=False``: the running statistics are the mean and
    variance, constants: an affine map of the input.

    Args:
        input: Tensor (or array, taken as a constant) of shape (N, C, *) ((N, C) or (N, C, L)
            for BatchNorm1d), float32 or float64; the channels on axis 1.
        running_mean, running_var: (C,) Tensors of input's dtype (an ndarray is updated in place
            too), or None (both): in training, nothing to update; in eval, refused.
        weight: gain of shape (C,) and input's dtype (a plain array is a constant); None means 1.
        bias: shift, as weight; None means 0.
        training (bool): batch statistics (True) or running statistics (False, the default).
        momentum (float): in [0, 1], the weight of this batch in the running statistics
            (default 0.1, PyTorch's).
        eps (float): added to the variance: >= 0, and > 0 when training (default 1e-5).

    Returns:
        Tensor of input's shape and dtype; one graph node with gradients for input, weight and
        bias (none for the running statistics).

    Raises:
        TypeError: a non-floating dtype, weight, bias or running statistics of a dtype other
            than input's, running statistics neither Tensors nor ndarrays, a non-bool training.
        ValueError: input with fewer than 2 axes; weight, bias or running statistics not of
            shape (C,); only one of running_mean and running_var; no running statistics with
            training=False; a momentum outside [0, 1]; a bad eps (or 0 when training); when
            training, one value per channel or none (PyTorch's "Expected more than 1 value per
            channel when training, got input size ...").
    """
    fn = "batch_norm"
    x, xa = channel_input(input, fn)
    running_mean = running_stat(running_mean, "running_mean", xa, fn)
    running_var = running_stat(running_var, "running_var", xa, fn)
    if (running_mean is None) != (running_var is None):
        raise ValueError(f"{fn}: running_mean and running_var must either both be None or "
                         f"neither be None")
    weight = norm_param(weight, "weight", xa, fn, fill=1.0, axis=1)
    bias = norm_param(bias, "bias", xa, fn, fill=0.0, axis=1)
    training = boolean(training, "training", fn)
    momentum = unit_interval(momentum, "momentum", fn)
    eps = check_eps(eps, fn)
    if not training:
        if running_mean is None:
            raise ValueError(f"{fn}: running_mean and running_var must be given when "
                             f"training=False (they are the statistics eval normalises with)")
        return BatchNormEvalFunction.apply(x, running_mean.data, running_var.data, weight, bias,
                                           eps=eps)
    values_per_channel(xa, fn)
    if eps == 0:
        raise ValueError(f"{fn}: eps must be positive when training, got {eps}")
    out = BatchNormFunction.apply(x, weight, bias, eps=eps)
    if running_mean is not None:      # PyTorch's momentum, and the unbiased batch variance
        mean = np.mean(xa, axis=stat_axes(xa))                  # (C,)
        var = np.var(xa, axis=stat_axes(xa), ddof=1)            # (C,) divided by m - 1
        running_mean.copy_((1 - momentum) * running_mean.data + momentum * mean)
        running_var.copy_((1 - momentum) * running_var.data + momentum * var)
    return out


def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5) -> Tensor:
    """Layer normalization over the last axes (``torch.nn.functional.layer_norm``, same
    signature and defaults).

    Args:
        input: Tensor (or array, taken as a constant) of shape (..., *normalized_shape),
            float32 or float64.
        normalized_shape: int or sequence of ints, the sizes of the last axes to normalize
            (in the GPT, C). Several axes are normalized together as one axis of their product.
        weight: gain of shape normalized_shape and input's dtype (a plain array is a constant);
            None means 1.
        bias: shift, as weight; None means 0.
        eps: number >= 0 added to the variance (default 1e-5, PyTorch's).

    Returns:
        Tensor of input's shape and dtype; one graph node with gradients for input, weight and
        bias.

    Raises:
        TypeError: a non-floating dtype, weight/bias of a different dtype than input, or a
            normalized_shape that is not an int or a sequence of ints.
        ValueError: a normalized_shape that is not input's trailing shape, weight/bias not of
            that shape, or a bad eps.
    """
    x, xa = float_input(input, "input", "layer_norm")
    k = normalized_axes(normalized_shape, xa, "layer_norm")
    if k > 1:  # the last k axes as one axis of their product, then back
        shape = xa.shape[-k:]
        w, b = (flat_param(t, n, shape, "layer_norm") for t, n in ((weight, "weight"), (bias, "bias")))
        flat = x.reshape(xa.shape[:-k] + (-1,))
        return layer_norm(flat, flat.shape[-1], w, b, eps).reshape(xa.shape)
    weight = norm_param(weight, "weight", xa, "layer_norm", fill=1.0)
    bias = norm_param(bias, "bias", xa, "layer_norm", fill=0.0)
    eps = check_eps(eps, "layer_norm")
    return LayerNormFunction.apply(x, weight, bias, eps=eps)


def rms_norm(input, normalized_shape, weight=None, eps: Optional[float] = None) -> Tensor:
    """Root-mean-square normalization over the last axes (``torch.nn.functional.rms_norm``,
    same signature and defaults).

    Args:
        input: Tensor (or array, taken as a constant) of shape (..., *normalized_shape),
            float32 or float64.
        normalized_shape: int or sequence of ints, the sizes of the last axes to normalize
            (in the GPT, C). Several axes are normalized together as one axis of their product.
        weight: gain of shape normalized_shape and input's dtype (a plain array is a constant);
            None means 1.
        eps: number >= 0 added to the mean square, or None (default, PyTorch's) for
            ``np.finfo(input.dtype).eps``. The chapter's build.py uses 1e-6.

    Returns:
        Tensor of input's shape and dtype; one graph node with gradients for input and weight.

    Raises:
        TypeError: a non-floating dtype, weight of a different dtype than input, or a
            normalized_shape that is not an int or a sequence of ints.
        ValueError: a normalized_shape that is not input's trailing shape, weight not of that
            shape, or a bad eps.
    """
    x, xa = float_input(input, "input", "rms_norm")
    k = normalized_axes(normalized_shape, xa, "rms_norm")
    if k > 1:  # the last k axes as one axis of their product, then back
        flat = x.reshape(xa.shape[:-k] + (-1,))
        w = flat_param(weight, "weight", xa.shape[-k:], "rms_norm")
        return rms_norm(flat, flat.shape[-1], w, eps).reshape(xa.shape)
    weight = norm_param(weight, "weight", xa, "rms_norm", fill=1.0)
    eps = check_eps(np.finfo(xa.dtype).eps if eps is None else eps, "rms_norm")
    return RMSNormFunction.apply(x, weight, eps=eps)


# ------------------------------------------------------------------------------ activations

def gelu(input, approximate: str = "none") -> Tensor:
    """Gaussian Error Linear Unit (``torch.nn.functional.gelu``; Hendrycks & Gimpel 2016).

    * ``approximate="none"`` (the default, as in PyTorch): ``x Phi(x)``, exact to float64
      round-off (the erf of ``layers/_erf.py``);
    * ``approximate="tanh"`` (GPT-2, the chapter, the GPT's MLP):
      ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``, within 4.8e-4 of the exact form.

    Args:
        input: Tensor (or array, taken as a constant), float32 or float64, any shape.
        approximate: ``"none"`` or ``"tanh"``.

    Returns:
        Tensor of input's shape and dtype; one graph node.

    Raises:
        TypeError: input of a non-floating dtype.
        ValueError: any other ``approximate``.
    """
    if approximate not in ("none", "tanh"):
        raise ValueError(f'gelu: approximate must be "none" or "tanh", got {approximate!r}')
    x, _ = float_input(input, "input", "gelu")
    return (GELUFunction if approximate == "tanh" else GELUErfFunction).apply(x)


def relu(input, inplace: bool = False) -> Tensor:
    """``max(input, 0)`` elementwise (``torch.nn.functional.relu``): the engine's
    ``Tensor.relu``, whose derivative is 1 where input > 0 and 0 elsewhere (0 at 0, as PyTorch).

    Args:
        input (Tensor | array-like): any shape and dtype; a plain array is a constant.
        inplace (bool): must be False (in place is not implemented).

    Returns:
        Tensor of input's shape and dtype.

    Raises:
        NotImplementedError: ``inplace=True``.
    """
    not_implemented(inplace, False, "inplace", "relu", "; use the returned Tensor")
    return (input if isinstance(input, Tensor) else Tensor(input)).relu()


def relu2(x) -> Tensor:
    """Squared ReLU, ``relu(x)^2`` (So et al. 2021, Primer).

    Args:
        x: Tensor (or array, taken as a constant), float32 or float64, any shape.

    Returns:
        Tensor of x's shape and dtype; one graph node.

    Raises:
        TypeError: x of a non-floating dtype.
    """
    x, _ = float_input(x, "x", "relu2")
    return ReLU2Function.apply(x)


def silu(input, inplace: bool = False) -> Tensor:
    """Sigmoid Linear Unit, ``x * sigmoid(x)`` (``torch.nn.functional.silu``).

    Stable for large |x| in float32 and float64 (no overflow).

    Args:
        input: Tensor (or array, taken as a constant), float32 or float64, any shape.
        inplace (bool): must be False (in place is not implemented).

    Returns:
        Tensor of input's shape and dtype; one graph node.

    Raises:
        TypeError: input of a non-floating dtype.
        NotImplementedError: ``inplace=True``.
    """
    not_implemented(inplace, False, "inplace", "silu", "; use the returned Tensor")
    x, _ = float_input(input, "input", "silu")
    return SiLUFunction.apply(x)


def swiglu(x, w_gate, w_up, w_down) -> Tensor:
    """SwiGLU feed-forward: ``(silu(x Wg^T) * (x Wu^T)) Wd^T`` (Shazeer 2020, eq. 6), one node.

    Args:
        x: Tensor (or array, taken as a constant) of shape (..., C), float32 or float64.
        w_gate: (H, C) gate projection, PyTorch Linear layout (out, in).
        w_up: (H, C) up projection.
        w_down: (O, H) down projection.
        All weights have x's dtype; a plain array is a constant.

    Returns:
        Tensor of shape (..., O) and x's dtype, with gradients for x and all three weights.

    Raises:
        TypeError: a non-floating dtype, or weights of a different dtype than x.
        ValueError: x with no axis, weights that are not 2-D, or shapes that do not chain
            (w_gate (H, C) with C = x.shape[-1], w_up of w_gate's shape, w_down (O, H)).
    """
    fn = "swiglu"
    x, xa = float_input(x, "x", fn)
    C = last_dim(xa, fn, "the feature axis")
    w_gate, wg = matrix_input(w_gate, "w_gate", fn, "(out, in)", like=xa)
    w_up, wu = matrix_input(w_up, "w_up", fn, "(out, in)", like=xa)
    w_down, wd = matrix_input(w_down, "w_down", fn, "(out, in)", like=xa)
    shape_is(wg, ("H", C), "w_gate", fn, f" for x of shape {xa.shape}")
    shape_is(wu, wg.shape, "w_up", fn, " (w_gate's shape)")
    shape_is(wd, ("O", wg.shape[0]), "w_down", fn, f" (H = {wg.shape[0]} from w_gate)")
    return SwiGLUFunction.apply(x, w_gate, w_up, w_down)


# ---------------------------------------------------------------- softmax and cross-entropy

def softmax(input, dim=-1, *, dtype=None, axis=None):
    """Softmax of ``input`` along ``dim`` (``torch.nn.functional.softmax``).

    Args:
        input (Tensor | np.ndarray): floating, any shape; a plain array is a constant.
        dim (int): the axis to normalise, -ndim <= dim < ndim (0 or -1 for a 0-d input, which
            is one entry: softmax 1). Default -1, the last (PyTorch's implicit choice is
            deprecated there).
        dtype: keyword-only; None, or a floating dtype input is cast to first (the cast is
            differentiable), as PyTorch's ``dtype=``.
        axis (int): keyword-only; NumPy's name for ``dim``; give one or the other.

    Returns:
        Tensor of input's shape (an empty one for an empty input, as PyTorch) and dtype
        (``dtype`` when given).

    Raises:
        TypeError: non-floating input or dtype, a non-integer dim, or both ``dim`` and
            ``axis`` given.
        IndexError: dim out of range (as PyTorch).
    """
    return _softmax_face(SoftmaxFunction, input, dim, dtype, axis, "softmax")


def log_softmax(input, dim=-1, *, dtype=None, axis=None):
    """Log of the softmax of ``input`` along ``dim`` (``torch.nn.functional.log_softmax``),
    computed from the shifted row so that it stays finite where softmax underflows to 0.

    Args, Returns, Raises: as ``softmax`` (a 0-d input gives 0).
    """
    return _softmax_face(LogSoftmaxFunction, input, dim, dtype, axis, "log_softmax")


def _softmax_face(function, input, dim, dtype, axis, fn):
    """softmax's or log_softmax's arguments handled (dim/axis, the dtype cast, a 0-d input as
    one axis, an empty input), then ``function.apply``."""
    dim = alias(dim, axis, "dim", "axis", -1, fn)
    x, xa = float_input(input, "input", fn)
    if dtype is not None:                                 # cast first, as PyTorch's dtype=
        x = x.astype(float_dtype(dtype, fn))
        xa = x.data if isinstance(x, Tensor) else x
    dim = axis_index(dim, xa, fn)
    if xa.size == 0:                                      # nothing to normalise: empty result
        return x.clone() if isinstance(x, Tensor) else Tensor(xa.copy())
    if xa.ndim == 0:                                      # one entry: a row of one
        return function.apply(x.reshape(1), axis=0).reshape(())
    return function.apply(x, axis=dim)


def cross_entropy(input, target, weight=None, *, ignore_index: int = -100,
                  reduction: str = "mean", label_smoothing: float = 0.0):
    """Cross-entropy of logits ``input`` against class indices or class probabilities
    ``target`` (``torch.nn.functional.cross_entropy``: same layout, names and defaults; the
    options after ``weight`` are keyword-only).

    Class indices without ``weight`` (the GPT's case) are one node, ``CrossEntropyFunction``
    (the class axis moved last first). Class weights and probability targets are the same
    loss against a target distribution q, ``-sum_c q_c log_softmax(input)_c``, built here from
    the ``log_softmax`` node and the engine's products (docs/derivations.md, Cross-entropy).

    Args:
        input (Tensor | np.ndarray): logits, floating, (C,), (N, C) or (N, C, d1, ..., dk): the
            class axis C second, as PyTorch (the GPT passes (B*T, V)). A plain array is a
            constant.
        target (np.ndarray | Tensor): class indices, integer, of input's shape without the
            class axis ((), (N,) or (N, d1, ..., dk)), each in [0, C) or equal to
            ``ignore_index``, never differentiated; or class probabilities, floating, of
            input's shape (a Tensor that requires grad gets its gradient, as in PyTorch).
        weight (np.ndarray | Tensor | None): (C,) rescaling weight of each class, input's
            dtype, a constant.
        ignore_index (int): target index whose entries contribute nothing and are not counted
            (default -100); index targets only.
        reduction (str): "mean" (default; for index targets over the entries not ignored, each
            counted with its class's weight; for probabilities over N * d1 * ... * dk),
            "sum" or "none" (one loss per entry, target's shape without the class axis).
        label_smoothing (float): in [0, 1]; the target becomes ``(1 - eps) target + eps / C``
            (Szegedy et al. 2016, sec. 7).

    Returns:
        Tensor: 0-d ("mean", "sum"; "mean" is NaN when nothing is counted, as in PyTorch) or of
        the target's shape without the class axis ("none"); input's dtype (NumPy's promotion
        with probability targets of another dtype, as PyTorch's).

    Raises:
        TypeError: non-floating input or weight, weight not of input's dtype, targets neither
            integer nor floating (bools), a non-integer ignore_index.
        ValueError: a 0-d input or no classes, targets of the wrong shape, weight not (C,) or
            requiring grad, ignore_index with probability targets, an unknown reduction, or
            label_smoothing outside [0, 1].
        IndexError: a target outside [0, C) other than ignore_index (the message names the
            first bad one), as in PyTorch.
    """
    fn = "cross_entropy"
    x, xa = float_input(input, "input", fn)
    last_dim(xa, fn, "the class axis C", name="input")
    axis = 1 if xa.ndim > 1 else 0                        # PyTorch's class axis
    C = xa.shape[axis]
    if C == 0:   # no classes (no rows is an empty batch: PyTorch's 0 / empty / NaN losses)
        raise ValueError(f"{fn}: input has no classes (shape {xa.shape})")
    reduction = choice(reduction, ("mean", "sum", "none"), "reduction", fn)
    ignore_index = integer(ignore_index, "ignore_index", fn)
    eps = unit_interval(label_smoothing, "label_smoothing", fn)
    a = 1 if weight is None else class_weight(weight, C, xa, fn).reshape(
        (C,) + (1,) * (xa.ndim - 1 - axis))               # (C, 1, ...): along the class axis
    ta = target.data if isinstance(target, Tensor) else np.asarray(target)
    if np.issubdtype(ta.dtype, np.floating):              # class probabilities
        q, qa = float_input(target, "target", fn)
        shape_is(qa, xa.shape, "target", fn, " (class probabilities: input's shape)")
        if ignore_index != -100:
            raise ValueError(f"{fn}: ignore_index is for class-index targets, not probabilities")
        q = (q * (1 - eps) + eps / C if eps else q) * a   # smoothed, weighted
        return _soft_cross_entropy(x, q, axis, reduction, xa.size // C)   # mean: over entries
    t = int_input(target, "target", fn)
    shape_is(t, xa.shape[:axis] + xa.shape[axis + 1:], "target", fn,
             f" (input's shape {xa.shape} without the class axis)")
    index_range(t, C, "target", fn, what="target", ignore_index=ignore_index)
    t = t.astype(np.intp, copy=False)
    if weight is None:                                    # one node, the class axis last
        x = x.transpose(0, *range(2, xa.ndim), 1) if xa.ndim > 2 else x   # (N, d1, ..., C)
        return CrossEntropyFunction.apply(x, t, reduction=reduction, ignore_index=ignore_index,
                                          label_smoothing=eps)
    t = np.expand_dims(t, axis)                           # (N, 1, d1, ...)
    onehot = t == np.arange(C).reshape(a.shape)           # (N, C, d1, ...)
    q = (t != ignore_index) * ((1 - eps) * onehot + eps / C) * a    # 0 where ignored
    counted = float(np.sum((t != ignore_index) * onehot * a))   # mean: over sum_n a[t_n]
    return _soft_cross_entropy(x, q.astype(xa.dtype), axis, reduction, counted)


def _soft_cross_entropy(x, q, axis, reduction, count):
    """``-sum_c q_c log_softmax(x)_c`` along the class ``axis``, reduced; "mean" divides the
    sum by ``count`` (NaN for a count of 0, as PyTorch)."""
    loss = -(q * LogSoftmaxFunction.apply(x, axis=axis)).sum(axis=axis)   # (N, d1, ...)
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.sum() * (1 / count if count else np.nan)


# ----------------------------------------------------------------------- RoPE and attention

def build_rope_cache(seq_len, head_dim, base=10000, dtype=np.float32):
    """The cos/sin tables of RoPE for positions ``0 .. seq_len-1`` (the chapter's step 8): the
    arguments checked, then ``layers.rope.build_rope_cache``.

    Angle of pair i at position pos: ``pos * base^(-2i/head_dim)`` (RoFormer eq. 15), computed in
    float64 and cast to ``dtype`` at the end, so positions past 1,000 keep their accuracy.

    Args:
        seq_len (int): number of positions T, >= 1.
        head_dim (int): hs, even and >= 2.
        base (float): the frequency base, > 0 (10000 in RoFormer).
        dtype: floating dtype of the result (float32 default).

    Returns:
        (cos, sin): two np.ndarrays of shape (1, 1, seq_len, head_dim); column 2i and 2i+1 hold the
        same angle (each angle repeated for its interleaved pair).

    Raises:
        ValueError: if head_dim is odd or < 2, seq_len < 1, or base is not finite and > 0.
        TypeError: if seq_len/head_dim are not integers, base is not a real number, or dtype
            is not floating.
    """
    seq_len = positive_int(seq_len, "seq_len", "build_rope_cache")
    head_dim = integer(head_dim, "head_dim", "build_rope_cache")
    even_head_dim(head_dim, "build_rope_cache")
    base = positive_number(base, "base", "build_rope_cache")
    dtype = float_dtype(dtype, "build_rope_cache")
    return rope.build_rope_cache(seq_len, head_dim, base, dtype)


def apply_rope(x, cos, sin):
    """Rotate interleaved pairs of ``x`` by their RoPE angles (one node, hand-derived backward).

    Args:
        x (Tensor | np.ndarray): (B, H, T, hs) (any (..., T, hs)), floating, hs even. A plain
            array is a constant.
        cos, sin (np.ndarray | Tensor): the tables of ``build_rope_cache``, typically (1, 1, T, hs).
            They must broadcast to x's shape without enlarging it (so a cache built for a longer
            sequence must be sliced to T first: ``cos[:, :, :T]``). They are constants: a Tensor that
            requires grad is refused. They are cast to x's dtype (float32 x -> float32 compute).

    Returns:
        Tensor: x's shape and dtype.

    Raises:
        TypeError: non-floating x, cos or sin.
        ValueError: hs odd or 0, x with fewer than 2 dims, cos/sin not broadcastable to x, or
            cos/sin Tensors that require grad.
    """
    x, xa = sequence_input(x, "x", "apply_rope")
    even_head_dim(xa.shape[-1], "apply_rope")
    cos = rope_table(cos, "cos", xa)
    sin = rope_table(sin, "sin", xa)
    return RoPEFunction.apply(x, cos, sin)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, *, scale=None, enable_gqa=False):
    """Attention core ``softmax(q k^T * scale + mask) v``, one node with a hand-derived backward
    (``torch.nn.functional.scaled_dot_product_attention``, same signature; no dropout, no
    grouped-query heads).

    Args:
        query (Tensor | np.ndarray): (..., Tq, hs), at least 2-d (e.g. (B, H, Tq, hs)).
        key (Tensor | np.ndarray): (..., Tk, hs).
        value (Tensor | np.ndarray): (..., Tk, hv).
            All floating with one dtype; their leading dims broadcast together (as PyTorch's);
            plain arrays are constants.
        attn_mask (np.ndarray | Tensor | None): broadcasts to the scores (..., Tq, Tk); bool
            (True: the key takes part) or floating (added to the scores; cast to query's
            dtype; a Tensor that requires grad gets its gradient). A row that sees no key
            gives 0, as PyTorch.
        dropout_p (float): must be 0 (dropout is not implemented).
        is_causal (bool): mask future keys (j > i), aligned to the top-left like PyTorch; not
            together with attn_mask (PyTorch's rule).
        scale (float | None): keyword-only; factor of the scores, a finite number; None
            (default) for 1/sqrt(hs).
        enable_gqa (bool): keyword-only; must be False (grouped-query heads are not
            implemented; repeat key and value along their head axis instead).

    Returns:
        Tensor (..., Tq, hv) of the inputs' dtype, the leading dims broadcast.

    Raises:
        NotImplementedError: dropout_p other than 0, or enable_gqa=True.
        TypeError: non-floating inputs, mixed dtypes, a mask neither bool nor floating, a
            non-bool is_causal, a non-number scale.
        ValueError: shapes that do not fit (leading dims that do not broadcast, q and k of
            different head sizes, k and v of different lengths, an empty head, a mask that
            does not broadcast to the scores), fewer than 2 dims, attn_mask with is_causal,
            a dropout_p that is not a number in [0, 1], or a scale that is not finite.
    """
    fn = "scaled_dot_product_attention"
    not_implemented(unit_interval(dropout_p, "dropout_p", fn), 0.0, "dropout_p", fn,
                    " (no dropout: pass 0.0)")
    not_implemented(enable_gqa, False, "enable_gqa", fn,
                    " (repeat key and value along their head axis instead)")
    q, qa = sequence_input(query, "query", fn)
    k, ka = sequence_input(key, "key", fn)
    v, va = sequence_input(value, "value", fn)
    same_dtype(ka, "key", qa, "query", fn)
    same_dtype(va, "value", qa, "query", fn)
    is_causal = boolean(is_causal, "is_causal", fn)
    scores = qkv_shapes(qa, ka, va, fn)                   # (..., Tq, Tk)
    if attn_mask is not None:
        if is_causal:
            raise ValueError(f"{fn}: give attn_mask or is_causal, not both (as PyTorch)")
        attn_mask = attention_mask(attn_mask, scores, qa, fn)
    scale = None if scale is None else finite_number(scale, "scale", fn)
    q, k, v = (t if a.shape[:-2] == scores[:-2] else broadcast_to(t, scores[:-2] + a.shape[-2:])
               for t, a in ((q, qa), (k, ka), (v, va)))  # one batch shape: broadcast_to's
    if isinstance(attn_mask, Tensor):                     # backward sums each gradient back
        return MaskedAttentionFunction.apply(q, k, v, broadcast_to(attn_mask, scores),
                                             is_causal=is_causal, scale=scale)
    return AttentionFunction.apply(q, k, v, attn_mask, is_causal=is_causal, scale=scale)


def multi_head_attention(qkv, n_heads, is_causal=False):
    """Multi-head attention on a packed q/k/v projection, as ONE autograd node.

    ``qkv`` holds q, k and v side by side on its last axis (the layout of nanoGPT's and the
    chapter's ``c_attn`` output); each is split into ``n_heads`` heads of size
    hs = C / n_heads, attention runs on every head at once (``attention_forward``, batched
    over B and H), and the heads
    are laid side by side again. The same as
    ``q, k, v = qkv.reshape(B, T, 3, H, hs).transpose(2, 0, 3, 1, 4)`` then
    ``scaled_dot_product_attention(q, k, v, is_causal).transpose(0, 2, 1, 3).reshape(B, T, C)``
    in separate nodes, bit for bit, without their graph nodes and the three zero-filled
    gradients of the indexing.

    Args:
        qkv (Tensor | np.ndarray): (B, T, 3C) floating; a plain array is a constant.
        n_heads (int): H, must divide C.
        is_causal (bool): mask future keys (j > i).

    Returns:
        Tensor (B, T, C) of qkv's dtype.

    Raises:
        TypeError: non-floating qkv, a non-int n_heads or a non-bool is_causal.
        ValueError: qkv not 3-D, an empty batch or sequence, a last axis not 3 * H * hs,
            n_heads < 1.
    """
    fn = "multi_head_attention"
    qkv, a = float_input(qkv, "qkv", fn)
    packed_qkv(a, fn)
    n_heads = positive_int(n_heads, "n_heads", fn)
    divides(n_heads, a.shape[-1] // 3, fn)
    is_causal = boolean(is_causal, "is_causal", fn)
    return MultiHeadAttentionFunction.apply(qkv, n_heads=n_heads, is_causal=is_causal)


# --------------------------------------------------------------------- linear and embedding

def linear(input, weight, bias=None):
    """``input @ weight.T + bias`` (``torch.nn.functional.linear``), one node, hand-derived
    backward.

    Args:
        input (Tensor | np.ndarray): (..., in_features), at least 1-d.
        weight (Tensor | np.ndarray): (out_features, in_features).
        bias (Tensor | np.ndarray | None): (out_features,).
            All floating with one dtype; plain arrays are constants.

    Returns:
        Tensor (..., out_features) of the inputs' dtype.

    Raises:
        TypeError: non-floating inputs or mixed dtypes.
        ValueError: weight not 2-d, in_features mismatch, bias of the wrong shape, 0-d input.
    """
    x, xa = float_input(input, "input", "linear")
    C = last_dim(xa, "linear", "in_features", name="input")
    weight, wa = matrix_input(weight, "weight", "linear", "(out_features, in_features)", like=xa)
    shape_is(wa, ("out_features", C), "weight", "linear",
             f" (in_features = {C}, the last axis of input of shape {xa.shape})")
    if bias is None:
        return LinearFunction.apply(x, weight)
    bias, ba = float_input(bias, "bias", "linear")
    same_dtype(ba, "bias", xa, "x", "linear")
    shape_is(ba, (wa.shape[0],), "bias", "linear", " (out_features of weight)")
    return LinearFunction.apply(x, weight, bias)


def embedding(input, weight, padding_idx=None, max_norm=None):
    """Look up rows of ``weight`` (``torch.nn.functional.embedding(input, weight)``).

    Args:
        input (np.ndarray | Tensor): integer indices of any shape, each in
            [0, num_embeddings). Negative indices are refused (as in PyTorch), not wrapped.
        weight (Tensor | np.ndarray): (num_embeddings, embedding_dim), floating. A plain array
            is a constant.
        padding_idx, max_norm: must be None (not implemented). PyTorch's later options
            (norm_type, scale_grad_by_freq, sparse) are not accepted.

    Returns:
        Tensor of shape input.shape + (embedding_dim,) and weight's dtype.

    Raises:
        TypeError: input not of an integer dtype (floats, bools) or non-floating weight.
        ValueError: weight not 2-d.
        IndexError: an index outside [0, num_embeddings) (the message names an offending one).
        NotImplementedError: a padding_idx or a max_norm.
    """
    not_implemented(padding_idx, None, "padding_idx", "embedding")
    not_implemented(max_norm, None, "max_norm", "embedding")
    ia = int_input(input, "input", "embedding")
    weight, wa = matrix_input(weight, "weight", "embedding", "(num_embeddings, embedding_dim)")
    index_range(ia, wa.shape[0], "input", "embedding")
    return EmbeddingFunction.apply(weight, ia.astype(np.intp, copy=False))
