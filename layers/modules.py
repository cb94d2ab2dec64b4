"""The layers' Modules, each defined in its layer's file (PyTorch's names, layouts and init).

``LayerNorm`` and ``Identity`` (layernorm.py), ``RMSNorm`` (rmsnorm.py), ``Linear``
(linear.py), ``Embedding`` (embedding.py), ``MLP`` (gelu.py), ``SwiGLU`` (swiglu.py),
``CausalSelfAttention`` (attention.py). A fixed ``rng`` seed gives a fixed model: each module
draws its weights in the order its constructor creates them.
"""
from .attention import CausalSelfAttention
from .embedding import Embedding
from .gelu import MLP
from .layernorm import Identity, LayerNorm
from .linear import Linear
from .rmsnorm import RMSNorm
from .swiglu import SwiGLU

__all__ = ["Identity", "LayerNorm", "RMSNorm", "Linear", "Embedding", "SwiGLU", "MLP",
           "CausalSelfAttention"]
