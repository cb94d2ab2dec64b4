"""minigrad: a NumPy reverse-mode autograd engine.

Read ``tensor.py`` first: Tensor, ``backward`` and ``Function``, the whole of reverse mode.
Then ``ops.py``, the primitive Functions with their backward formulas. Beside them:
``tensor_methods.py`` (Tensor's operators and methods, in NumPy's and PyTorch's spellings),
``_inplace.py`` (``+=``, ``add_``, ...), ``_guards.py`` (the engine's checks), ``grad_mode.py``
(``no_grad``), ``gradcheck.py`` (central differences), ``module.py``, ``optim.py``,
``factories.py``.

Public API::

    Tensor, Function, no_grad, enable_grad, set_grad_enabled, inference_mode, is_grad_enabled,
    gradcheck, gradcheck_report, GradcheckError, GradcheckReport, Module, Parameter, ModuleList,
    Sequential, AdamW, clip_grad_norm_, concatenate, cat, stack, split, where, masked_fill,
    broadcast_to, unbroadcast, tensor, zeros, ones, zeros_like, ones_like, randn, arange, from_pair
"""
from .tensor import Context, Function, Tensor, from_pair
from . import tensor_methods, _inplace  # noqa: F401  (give Tensor its operators and methods)
from .grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .ops import broadcast_to, cat, concatenate, masked_fill, split, stack, where, unbroadcast
from .factories import arange, ones, ones_like, randn, tensor, zeros, zeros_like
from .gradcheck import GradcheckError, GradcheckReport, gradcheck, gradcheck_report
from .module import Module, ModuleList, Parameter, Sequential
from .optim import AdamW, clip_grad_norm_

__all__ = [
    "Context", "Function", "Tensor", "no_grad", "enable_grad", "set_grad_enabled", "inference_mode",
    "is_grad_enabled", "gradcheck", "GradcheckError", "GradcheckReport", "gradcheck_report",
    "Module", "ModuleList", "Parameter", "Sequential", "AdamW", "clip_grad_norm_",
    "concatenate", "cat", "stack", "split", "where", "masked_fill", "broadcast_to", "unbroadcast",
    "tensor", "zeros", "ones", "zeros_like", "ones_like", "randn", "arange", "from_pair",
]
__version__ = "0.1.0"
