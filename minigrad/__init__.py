"""minigrad: a NumPy reverse-mode autograd engine.

Public API::

    Tensor, Function, no_grad, enable_grad, set_grad_enabled, inference_mode, is_grad_enabled,
    gradcheck, gradcheck_report, GradcheckError, GradcheckReport, Module, Parameter, ModuleList,
    concatenate, stack, split, where, masked_fill, broadcast_to,
    zeros, ones, randn, arange
"""
from .function import Context, Function
from .grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .tensor import Tensor
from .ops import broadcast_to, concatenate, masked_fill, split, stack, where, unbroadcast
from .factories import arange, ones, randn, zeros
from .gradcheck import GradcheckError, GradcheckReport, gradcheck, gradcheck_report
from .module import Module, ModuleList, Parameter

__all__ = [
    "Context", "Function", "Tensor", "no_grad", "enable_grad", "set_grad_enabled", "inference_mode",
    "is_grad_enabled", "gradcheck", "GradcheckError", "GradcheckReport", "gradcheck_report", "Module", "ModuleList", "Parameter",
    "concatenate", "stack", "split", "where", "masked_fill", "broadcast_to", "unbroadcast",
    "zeros", "ones", "randn", "arange",
]
__version__ = "0.1.0"
from . import optim  # noqa: E402
from .optim import AdamW, clip_grad_norm_  # noqa: E402
