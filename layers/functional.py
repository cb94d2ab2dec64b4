"""``layers.functional``: the hand-derived layers under PyTorch's functional names.

Each function is one autograd node whose backward is derived by hand (see the layer's own
module and ``docs/derivations.md``). Float inputs are ``minigrad.Tensor``s (a plain array is a
constant); integer indices/targets and the RoPE cos/sin cache may be arrays or Tensors.
"""
from .layernorm import layer_norm
from .rmsnorm import rms_norm
from .gelu import gelu
from .relu2 import relu2
from .silu import silu
from .swiglu import swiglu
from .rope import apply_rope, build_rope_cache
from .softmax import softmax
from .cross_entropy import cross_entropy
from .attention import multi_head_attention, scaled_dot_product_attention
from .linear import linear
from .embedding import embedding

__all__ = [
    "layer_norm", "rms_norm", "gelu", "relu2", "silu", "swiglu", "apply_rope",
    "build_rope_cache", "softmax", "cross_entropy", "scaled_dot_product_attention",
    "multi_head_attention", "linear", "embedding",
]
