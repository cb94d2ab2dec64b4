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
from .softmax import log_softmax, softmax
from .cross_entropy import cross_entropy
from .attention import multi_head_attention, scaled_dot_product_attention
from .linear import linear
from .embedding import embedding

from minigrad import Tensor

__all__ = [
    "layer_norm", "rms_norm", "gelu", "relu", "relu2", "silu", "swiglu", "apply_rope",
    "build_rope_cache", "softmax", "log_softmax", "cross_entropy", "scaled_dot_product_attention",
    "multi_head_attention", "linear", "embedding",
]


def relu(input) -> Tensor:
    """``max(input, 0)`` elementwise (``torch.nn.functional.relu``): the engine's
    ``Tensor.relu``, whose derivative is 1 where input > 0 and 0 elsewhere (0 at 0, as PyTorch).

    Args:
        input (Tensor | array-like): any shape and dtype; a plain array is a constant.

    Returns:
        Tensor of input's shape and dtype.
    """
    return (input if isinstance(input, Tensor) else Tensor(input)).relu()
