"""``Parameter``, ``Module`` and ``ModuleList``: PyTorch's ``torch.nn`` containers, minimal.

A Module registers, in assignment order, the Parameters and sub-Modules assigned to its
attributes and the buffers given to ``register_buffer`` (state that is not learned: BatchNorm's
running statistics), and names them with PyTorch's dotted names
(``blocks.0.attn.c_attn.weight``, ``bn.running_mean``).
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Dict, Iterator, Optional, Tuple

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
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    def __setattr__(self, name: str, value) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError("call super().__init__() before assigning attributes to a Module")
        if name in self._buffers and not isinstance(value, (Parameter, Module)):
            if value is not None and not isinstance(value, Tensor):   # a buffer stays a buffer
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                f"(minigrad.Tensor or None expected)")
            self._buffers[name] = value
            object.__setattr__(self, name, value)
            return
        self._forget(name)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        self._forget(name)
        object.__delattr__(self, name)

    def _forget(self, name: str) -> None:
        """Unregister ``name`` as a parameter, buffer or sub-module."""
        self._parameters.pop(name, None)
        self._buffers.pop(name, None)
        self._non_persistent_buffers.discard(name)
        self._modules.pop(name, None)

    def _check_name(self, kind: str, name, registered) -> None:
        """PyTorch's checks of a name given to ``register_buffer`` or ``register_parameter``."""
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain "."')
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if hasattr(self, name) and name not in registered:
            raise KeyError(f"attribute '{name}' already exists")

    def register_buffer(self, name: str, tensor: Optional[Tensor], persistent: bool = True) -> None:
        """Register ``tensor`` as the buffer ``name`` (``torch.nn.Module.register_buffer``): state
        of the module that is not a parameter (no gradient, no optimizer step), such as
        BatchNorm's running statistics, updated in place by the module itself.

        It becomes the attribute ``name``; ``buffers``/``named_buffers`` list it and, when
        ``persistent``, ``state_dict`` saves it under its dotted name (after the module's own
        parameters, as PyTorch) and ``load_state_dict`` restores it. A buffer of None is
        registered but listed and saved nowhere (BatchNorm's statistics when it tracks none).
        Assigning a Tensor or None to the attribute later replaces the buffer.

        Args:
            name (str): the attribute's name.
            tensor (Tensor | None): the buffer (any dtype: ``num_batches_tracked`` is int64).
            persistent (bool): whether ``state_dict`` holds it (default True).

        Raises:
            TypeError: a name that is not a str, or a tensor that is neither a Tensor nor None.
            KeyError: an empty name, a name with ".", or the name of an attribute that is not a
                buffer (PyTorch's messages and exception types).
        """
        self._check_name("buffer", name, self._buffers)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            f"(minigrad.Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers.discard(name)
        else:
            self._non_persistent_buffers.add(name)
        object.__setattr__(self, name, tensor)

    def register_parameter(self, name: str, param: Optional[Parameter]) -> None:
        """Register ``param`` as the parameter ``name`` (``torch.nn.Module.register_parameter``),
        the same as ``setattr(self, name, param)``; None leaves the attribute None and
        registers nothing (a Linear without a bias).

        Raises:
            TypeError: a name that is not a str, or a param that is neither a Parameter nor
                None.
            KeyError: an empty name, a name with ".", or the name of an attribute that is not a
                parameter (PyTorch's messages and exception types).
        """
        self._check_name("parameter", name, self._parameters)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter "
                            f"'{name}' (minigrad.Parameter or None required)")
        setattr(self, name, param)

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

    def named_children(self) -> Iterator[Tuple[str, "Module"]]:
        """Yield ``(name, module)`` for each immediate sub-module, in registration order."""
        return iter(list(self._modules.items()))

    def children(self) -> Iterator["Module"]:
        """Yield each immediate sub-module (``torch.nn.Module.children``)."""
        return iter(list(self._modules.values()))

    def apply(self, fn) -> "Module":
        """Call ``fn(module)`` on every sub-module, children first, then on this module, and
        return this module (``torch.nn.Module.apply``: an initialisation, say)."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    def modules(self) -> Iterator["Module"]:
        """Yield every module (self included)."""
        for _, m in self.named_modules():
            yield m

    def _named(self, members, prefix: str = "") -> Iterator[Tuple[str, Tensor]]:
        """``(dotted_name, Tensor)`` of ``members(module)`` (pairs ``(name, Tensor or None)``)
        for every module, depth first; a Tensor shared by two modules once, under its first
        name (PyTorch's ``remove_duplicate=True``); None left out."""
        seen = set()
        for mname, m in self.named_modules(prefix):
            for name, t in members(m):
                if t is None or id(t) in seen:
                    continue
                seen.add(id(t))
                yield (f"{mname}.{name}" if mname else name), t

    def named_parameters(self, prefix: str = "") -> Iterator[Tuple[str, Parameter]]:
        """Yield ``(dotted_name, parameter)``; a parameter shared by two modules is yielded once,
        under its first name (PyTorch's ``remove_duplicate=True``)."""
        return self._named(lambda m: m._parameters.items(), prefix)

    def parameters(self) -> Iterator[Parameter]:
        """Yield each distinct parameter once."""
        for _, p in self.named_parameters():
            yield p

    def named_buffers(self, prefix: str = "") -> Iterator[Tuple[str, Tensor]]:
        """Yield ``(dotted_name, buffer)`` for every buffer that holds a Tensor, persistent or
        not (``torch.nn.Module.named_buffers``); a shared one once, under its first name."""
        return self._named(lambda m: m._buffers.items(), prefix)

    def buffers(self) -> Iterator[Tensor]:
        """Yield each distinct buffer once (``torch.nn.Module.buffers``)."""
        for _, b in self.named_buffers():
            yield b

    def _named_state(self) -> Iterator[Tuple[str, Tensor]]:
        """What ``state_dict`` holds: module by module, depth first, its parameters, then its
        persistent buffers (PyTorch's order); each Tensor once."""
        return self._named(lambda m: [*m._parameters.items(), *(
            (n, b) for n, b in m._buffers.items() if n not in m._non_persistent_buffers)])

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
        """Map the dotted name of each parameter and persistent buffer to a copy of its array
        (shared ones once), in PyTorch's order: module by module, depth first, its parameters
        then its buffers (``bn.weight``, ``bn.bias``, ``bn.running_mean``, ...).

        Returns:
            OrderedDict[str, np.ndarray]
        """
        return OrderedDict((name, t.data.copy()) for name, t in self._named_state())

    def load_state_dict(self, state_dict, strict: bool = True) -> None:
        """Copy arrays into the parameters and persistent buffers, in place
        (``torch.nn.Module.load_state_dict``).

        Every key and shape is checked before anything is copied, so a failed load leaves the
        module as it was. Arrays are cast to each parameter's or buffer's dtype.

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
        own = dict(self._named_state())
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
            t = own[name]
            t._data[...] = value.astype(t.dtype, copy=False)
            engine.hooks.modified(t)

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
            what = type(module).__name__ + (f" {module.__name__}" if callable(module) and
                                              hasattr(module, "__name__") else "")
            raise TypeError(f"{type(self).__name__} holds Modules, got {what}" + (
                ": call a function in a Module's forward" if callable(module) else ""))
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
