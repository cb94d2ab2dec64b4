"""minigrad: a NumPy reverse-mode autograd engine.

Read first, top to bottom: ``engine.py`` (Tensor, ``backward``, ``Function``, ``from_pair``: the
whole of reverse mode), then ``ops.py`` (the primitive Functions with their backward formulas,
and Tensor's operators and methods built on them). Those two files are the engine and follow
NumPy's rules; they import nothing else of minigrad.

Then, as needed: ``gradcheck.py`` (central differences; ``gradcheck_diagnostics.py`` says where
a failing check fails), ``module.py`` (Module, Parameter), ``optim.py`` (AdamW,
``clip_grad_norm_``), ``draw.py`` (the graph that made a Tensor, as Graphviz DOT). The wing ``pytorch_compat/`` is PyTorch's surface: dtype promotion,
indexing, in-place operations and version counters, the grad-mode forms, PyTorch's method
spellings and factories; it fills the engine's hooks when ``minigrad`` is imported.
``allocator.py`` tunes glibc's allocator for a training loop on import (``MINIGRAD_MALLOPT=0``
leaves it alone).

Public API::

    Tensor, Function, no_grad, enable_grad, set_grad_enabled, inference_mode, is_grad_enabled,
    gradcheck, gradcheck_report, GradcheckError, GradcheckReport, Module, Parameter, ModuleList,
    Sequential, AdamW, clip_grad_norm_, concatenate, cat, stack, split, where, masked_fill,
    maximum, minimum, broadcast_to, unbroadcast, tensor, zeros, ones, zeros_like, ones_like,
    full, randn, rand, randint, arange, ValueRuntimeError, from_pair, to_dot, draw_dot
"""
from . import allocator  # noqa: F401  (glibc keeps freed arrays for reuse)
from .engine import Context, Function, Tensor, ValueRuntimeError, from_pair, is_grad_enabled
from .ops import unbroadcast
from . import pytorch_compat  # noqa: F401  (PyTorch's rules and spellings, attached to Tensor)
from .pytorch_compat.grad_mode import enable_grad, inference_mode, no_grad, set_grad_enabled
from .pytorch_compat.methods import (broadcast_to, cat, concatenate, masked_fill, maximum,
                                     minimum, split, stack, where)
from .pytorch_compat.factories import (arange, full, ones, ones_like, rand, randint, randn, tensor,
                                       zeros, zeros_like)
from .draw import draw_dot, to_dot
from .gradcheck import GradcheckError, GradcheckReport, gradcheck, gradcheck_report
from .module import Module, ModuleList, Parameter, Sequential
from .optim import AdamW, clip_grad_norm_

__all__ = [
    "Context", "Function", "Tensor", "no_grad", "enable_grad", "set_grad_enabled", "inference_mode",
    "is_grad_enabled", "gradcheck", "GradcheckError", "GradcheckReport", "gradcheck_report",
    "Module", "ModuleList", "Parameter", "Sequential", "AdamW", "clip_grad_norm_",
    "concatenate", "cat", "stack", "split", "where", "masked_fill", "maximum", "minimum",
    "broadcast_to", "unbroadcast",
    "tensor", "zeros", "ones", "full", "zeros_like", "ones_like", "randn", "rand", "randint", "arange", "ValueRuntimeError", "from_pair",
    "to_dot", "draw_dot",
]
__version__ = "0.1.0"
