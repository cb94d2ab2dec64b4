"""``Parameter``, ``Module`` and ``ModuleList``: PyTorch's ``torch.nn`` containers, minimal.

A Module registers the Parameters and sub-Modules assigned to its attributes, in assignment
order, and names them with PyTorch's dotted names (``blocks.0.attn.c_attn.weight``).
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Dict, Iterator, Tuple

import numpy as np

from . import engine
from .engine import Tensor


class Parameter(Tensor):
    """A leaf Tensor that a Module registers as a learnable parameter (``torch.nn.Parameter``).

    Args:
        data: array-like of a floating dtype.
        requires_grad (bool): default True.

    Raises:
        TypeError: if ``data`` is not floating and ``requires_grad`` is True.
    """

    def __init__(self, data, requires_grad: bool = True) -> None:
        super().__init__(data, requires_grad=requires_grad)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()


class Module:
    """Base class for layers and models (``torch.nn.Module``).

    Subclasses call ``super().__init__()``, assign Parameters and Modules as attributes, and
    define ``forward``; calling the module calls ``forward``.
    """

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    def __setattr__(self, name: str, value) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError("call super().__init__() before assigning attributes to a Module")
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        object.__delattr__(self, name)

    def forward(self, *args, **kwargs):  # pragma: no cover
        """The computation; subclasses override it."""
        raise NotImplementedError(f"{type(self).__name__} has no forward")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # ------------------------------------------------------------------ traversal
    def named_modules(self, prefix: str = "") -> Iterator[Tuple[str, "Module"]]:
        """Yield ``(name, module)`` for this module and every sub-module, depth first."""
        seen = set()
        stack = [(prefix, self)]
        while stack:
            name, m = stack.pop()
            if id(m) in seen:
                continue
            seen.add(id(m))
            yield name, m
            children = list(m._modules.items())
            for child_name, child in reversed(children):
                stack.append((f"{name}.{child_name}" if name else child_name, child))

    def modules(self) -> Iterator["Module"]:
        """Yield every module (self included)."""
        for _, m in self.named_modules():
            yield m

    def named_parameters(self, prefix: str = "") -> Iterator[Tuple[str, Parameter]]:
        """Yield ``(dotted_name, parameter)``; a parameter shared by two modules is yielded once,
        under its first name (PyTorch's ``remove_duplicate=True``)."""
        seen = set()
        for mname, m in self.named_modules(prefix):
            for pname, p in m._parameters.items():
                if id(p) in seen:
                    continue
                seen.add(id(p))
                yield (f"{mname}.{pname}" if mname else pname), p

    def parameters(self) -> Iterator[Parameter]:
        """Yield each distinct parameter once."""
        for _, p in self.named_parameters():
            yield p

    def num_parameters(self) -> int:
        """Number of scalar parameters, each shared array counted once."""
        return sum(p.size for p in self.parameters())

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        """Set ``requires_grad`` on every parameter (``torch.nn.Module.requires_grad_``):
        ``layer.requires_grad_(False)`` freezes a layer. Returns the module."""
        for p in self.parameters():
            p.requires_grad = requires_grad
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear every parameter's ``.grad`` (to None by default, as PyTorch 2 does)."""
        for p in self.parameters():
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                p.grad = np.zeros_like(p.data)

    def train(self, mode: bool = True) -> "Module":
        """Set ``training`` on this module and its children."""
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self) -> "Module":
        """``train(False)``."""
        return self.train(False)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> Dict[str, np.ndarray]:
        """Map each parameter's dotted name to a copy of its array (shared ones once).

        Returns:
            OrderedDict[str, np.ndarray]
        """
        return OrderedDict((name, p.data.copy()) for name, p in self.named_parameters())

    def load_state_dict(self, state_dict, strict: bool = True) -> None:
        """Copy arrays into the parameters, in place (``torch.nn.Module.load_state_dict``).

        Every key and shape is checked before anything is copied, so a failed load leaves the
        parameters as they were. Arrays are cast to each parameter's dtype.

        Args:
            state_dict: mapping name -> array-like (or Tensor).
            strict (bool): when True, missing or unexpected keys are an error.

        Raises:
            ValueError: with PyTorch's message (PyTorch raises RuntimeError), one line a problem
                after ``Error(s) in loading state_dict for GPT:``: ``Missing key(s) in
                state_dict: "a", "b".`` and ``Unexpected key(s) in state_dict: "c".`` (strict
                only); ``size mismatch for X: copying a param with shape (9,) from checkpoint,
                the shape in current model is (8,).``
        """
        own = dict(self.named_parameters())
        values = {name: (v.data if isinstance(v, Tensor) else np.asarray(v))
                  for name, v in state_dict.items() if name in own}
        missing = [f'"{k}"' for k in own if k not in state_dict]
        unexpected = [f'"{k}"' for k in state_dict if k not in own]
        errors = []
        if strict and missing:
            errors.append(f"Missing key(s) in state_dict: {', '.join(missing)}.")
        if strict and unexpected:
            errors.append(f"Unexpected key(s) in state_dict: {', '.join(unexpected)}.")
        for name, value in values.items():
            if value.shape != own[name].shape:
                errors.append(f"size mismatch for {name}: copying a param with shape {value.shape} "
                              f"from checkpoint, the shape in current model is {own[name].shape}.")
        if errors:
            raise ValueError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                             + "\n\t".join(errors))
        for name, value in values.items():
            p = own[name]
            p._data[...] = value.astype(p.dtype, copy=False)
            engine.hooks.modified(p)

    def extra_repr(self) -> str:
        """The module's own settings, shown inside its repr's parentheses
        (``torch.nn.Module.extra_repr``: ``Linear(in_features=8, out_features=4, bias=True)``);
        subclasses override it. Default: ""."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        children = [f"({name}): " + repr(m).replace("\n", "\n  ")
                    for name, m in self._modules.items()]
        if not children:
            return f"{type(self).__name__}({extra})"
        lines = (extra.split("\n") if extra else []) + children
        return f"{type(self).__name__}(\n  " + "\n  ".join(lines) + "\n)"


class ModuleList(Module):
    """A list of Modules registered under the names "0", "1", ... (``torch.nn.ModuleList``)."""

    def __init__(self, modules=()) -> None:
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, module: Module) -> "ModuleList":
        """Add ``module`` at the end.

        Raises:
            TypeError: if ``module`` is not a Module.
        """
        if not isinstance(module, Module):
            raise TypeError(f"ModuleList holds Modules, got {type(module).__name__}")
        setattr(self, str(len(self._modules)), module)
        return self

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, i: int) -> Module:
        return list(self._modules.values())[i]


class Sequential(ModuleList):
    """Modules applied one after another (``torch.nn.Sequential``): ``Sequential(a, b)(x)`` is
    ``b(a(x))``; they are registered as "0", "1", ... so state_dict keys match PyTorch's.

    Raises:
        TypeError: an argument that is not a Module.
    """

    def __init__(self, *modules: Module) -> None:
        super().__init__(modules)

    def forward(self, x):
        for module in self:
            x = module(x)
        return x
