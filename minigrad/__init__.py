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
    AdamW, clip_grad_norm_, concatenate, stack, split, where, masked_fill, broadcast_to,
    unbroadcast, zeros, ones, randn, arange
"""
from .tensor import Context, Function, Tensor
from . import tensor_methods, _inplace  # noqa: F401  (give Tensor its operators and methods)
from .grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .ops import broadcast_to, concatenate, masked_fill, split, stack, where, unbroadcast
from .factories import arange, ones, randn, zeros
from .gradcheck import GradcheckError, GradcheckReport, gradcheck, gradcheck_report
from .module import Module, ModuleList, Parameter
from .optim import AdamW, clip_grad_norm_

__all__ = [
    "Context", "Function", "Tensor", "no_grad", "enable_grad", "set_grad_enabled", "inference_mode",
    "is_grad_enabled", "gradcheck", "GradcheckError", "GradcheckReport", "gradcheck_report", "Module", "ModuleList", "Parameter",
    "concatenate", "stack", "split", "where", "masked_fill", "broadcast_to", "unbroadcast",
    "zeros", "ones", "randn", "arange",
]
__version__ = "0.1.0"
