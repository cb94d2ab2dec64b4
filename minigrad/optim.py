"""Optimizers and gradient clipping: ``AdamW`` and ``clip_grad_norm_`` with PyTorch's semantics.

``AdamW`` follows ``torch.optim.AdamW`` (single-tensor path, ``amsgrad=False``,
``maximize=False``: any other value of an option we do not implement is refused), which
implements Loshchilov & Hutter, "Decoupled Weight Decay Regularization" (ICLR 2019, Algorithm 2) on top of Kingma & Ba, "Adam" (ICLR 2015, Algorithm 1).
For each parameter ``p`` with gradient ``g`` at step ``t`` (1-based)::

    p   <- p * (1 - lr * weight_decay)            # decoupled weight decay, before the Adam step
    m   <- m + (1 - beta1) * (g - m)              # = beta1 * m + (1 - beta1) * g  (torch's lerp)
    v   <- beta2 * v + (1 - beta2) * g * g
    bc1 = 1 - beta1 ** t ;  bc2 = 1 - beta2 ** t
    p   <- p - (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps)

``clip_grad_norm_`` follows ``torch.nn.utils.clip_grad_norm_``: the total norm is the norm of
the per-parameter gradient norms; every gradient is multiplied by
``min(1, max_norm / (total + 1e-6))``.

Updates happen in place, under ``no_grad``, and bump each parameter's version counter (a graph that saved the old values refuses to backward).
The optimizer state has the parameter's dtype: float32 parameters keep float32 moments.
"""
from __future__ import annotations

import copy
import math
import numbers
from typing import Any, Dict, List

import numpy as np

from .pytorch_compat.grad_mode import enable_grad, no_grad
from . import engine
from .engine import Tensor

__all__ = ["Optimizer", "AdamW", "clip_grad_norm_"]


def _check_number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    value = float(value)
    if math.isnan(value):
        raise ValueError(f"Invalid {name}: {value}")
    return value


# torch.optim.AdamW's options that minigrad does not implement, with the values that leave the
# update unchanged (torch's defaults; foreach/fused=False choose the single-tensor path we run).
# ``decoupled_weight_decay`` is a key of torch's AdamW groups (AdamW is Adam with it True).
_ADAMW_OFF = {"amsgrad": (False,), "maximize": (False,), "foreach": (None, False),
              "capturable": (False,), "differentiable": (False,), "fused": (None, False),
              "decoupled_weight_decay": (True,)}


class Optimizer:
    """Base class holding parameter groups and per-parameter state (``torch.optim.Optimizer``).

    Args:
        params: an iterable of Tensors that require grad, or an iterable of dicts, each with a
            ``"params"`` entry (a Tensor or an iterable of Tensors) and optional per-group
            hyperparameters overriding ``defaults``.
        defaults (dict): the default hyperparameters of every group.

    Raises:
        TypeError: if ``params`` is a single Tensor, or holds something that is not a floating
            point Tensor.
        ValueError: if the parameter list is empty, a parameter appears in two groups, or a
            group has a key that is not in ``defaults`` (it would be ignored).

    A parameter that does not require grad is accepted (a frozen layer in
    ``model.parameters()``); like any parameter whose ``grad`` is None, it is not updated.
    """

    def __init__(self, params, defaults: Dict[str, Any]) -> None:
        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or "
                "dicts, but got a Tensor"
            )
        self.defaults = dict(defaults)
        self.state: Dict[int, Dict[str, Any]] = {}
        self.param_groups: List[Dict[str, Any]] = []
        groups = list(params)
        if len(groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, param_group: Dict[str, Any]) -> None:
        """Add a group of parameters with its own hyperparameters (``Optimizer.add_param_group``).

        Raises:
            TypeError / ValueError: as the constructor.
        """
        if not isinstance(param_group, dict):
            raise TypeError(f"param group must be a dict, got {type(param_group).__name__}")
        if "params" not in param_group:
            raise ValueError("param group must have a 'params' entry")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections")
        else:
            params = list(params)
        if len(params) == 0:
            raise ValueError("optimizer got an empty parameter list")
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but param {i} is a "
                                f"{type(p).__name__}")
            if not np.issubdtype(p.dtype, np.floating):
                raise TypeError(f"optimizer can only optimize floating Tensors, param {i} is "
                                f"{p.dtype}")
            if not p.is_leaf:
                raise ValueError(f"can't optimize a non-leaf Tensor (param {i})")
        if len({id(p) for p in params}) != len(params):
            raise ValueError("a parameter appears more than once in one parameter group")
        existing = {id(p) for g in self.param_groups for p in g["params"]}
        if existing & {id(p) for p in params}:
            raise ValueError("some parameters appear in more than one parameter group")
        unknown = sorted(set(param_group) - set(self.defaults) - {"params"})
        if unknown:
            raise ValueError(f"{type(self).__name__}: unknown parameter group option(s) {unknown}; "
                             f"the options are {sorted(self.defaults)}")
        group = dict(param_group)
        group["params"] = params
        for k, v in self.defaults.items():
            group.setdefault(k, v)
        self._validate_group(group)
        self.param_groups.append(group)

    def _validate_group(self, group: Dict[str, Any]) -> None:  # pragma: no cover
        pass

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradients of every parameter: set them to None (default, as PyTorch 2) or
        fill them with zeros in place."""
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad[...] = 0

    def _indexed_params(self) -> List[Tensor]:
        return [p for g in self.param_groups for p in g["params"]]

    def state_dict(self) -> Dict[str, Any]:
        """The optimizer's state as PyTorch lays it out, with copies of the arrays.

        Returns:
            dict with ``"state"``: {param_index: {name: np.ndarray or number}} (parameters are
            numbered 0.. across the groups, in order; only parameters that have been stepped
            appear) and ``"param_groups"``: a list of dicts of hyperparameters with
            ``"params"`` holding the indices.
        """
        index = {id(p): i for i, p in enumerate(self._indexed_params())}
        state = {}
        for p in self._indexed_params():
            s = self.state.get(id(p))
            if s:
                state[index[id(p)]] = {
                    k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in s.items()
                }
        groups = []
        for g in self.param_groups:
            d = {k: copy.deepcopy(v) for k, v in g.items() if k != "params"}
            d["params"] = [index[id(p)] for p in g["params"]]
            groups.append(d)
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Restore hyperparameters and state saved by ``state_dict`` (for resuming training).

        Arrays are copied and cast to each parameter's dtype.

        Raises:
            ValueError: if the number of groups, the group sizes, or a state array's shape do
                not match this optimizer's parameters; or a saved hyperparameter is invalid or
                unknown (as in the constructor).
        """
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError(
                f"loaded state dict has {len(groups)} parameter groups, this optimizer has "
                f"{len(self.param_groups)}"
            )
        for i, (saved, own) in enumerate(zip(groups, self.param_groups)):
            if len(saved["params"]) != len(own["params"]):
                raise ValueError(
                    f"loaded state dict has a parameter group {i} of size {len(saved['params'])}, "
                    f"which does not match the optimizer's group of size {len(own['params'])}"
                )
            unknown = sorted(set(saved) - set(self.defaults) - {"params"})
            if unknown:
                raise ValueError(f"loaded state dict has unknown parameter group option(s) "
                                 f"{unknown}; the options are {sorted(self.defaults)}")
            self._validate_group({**own, **copy.deepcopy(saved)})
        id_map = {}
        for saved, own in zip(groups, self.param_groups):
            for k, p in zip(saved["params"], own["params"]):
                id_map[k] = p
        new_state: Dict[int, Dict[str, Any]] = {}
        for k, s in state_dict["state"].items():
            key = int(k)
            if key not in id_map:
                raise ValueError(f"loaded state dict has state for unknown parameter index {key}")
            p = id_map[key]
            entry = {}
            for name, v in s.items():
                if name == "step":
                    entry[name] = int(np.asarray(v).item())
                    continue
                v = np.asarray(v)
                if v.shape != p.shape:
                    raise ValueError(
                        f"state {name!r} of parameter {key} has shape {v.shape}, the "
                        f"parameter has shape {p.shape}"
                    )
                entry[name] = np.array(v, dtype=p.dtype, copy=True)
            new_state[id(p)] = entry
        self.state = new_state
        for saved, own in zip(groups, self.param_groups):
            for k, v in saved.items():
                if k != "params":
                    own[k] = copy.deepcopy(v)

    def step(self, closure=None):  # pragma: no cover
        """One update; subclasses implement it."""
        raise NotImplementedError


class AdamW(Optimizer):
    """Adam with decoupled weight decay (``torch.optim.AdamW``).

    Loshchilov & Hutter (2019), Algorithm 2, with Adam's bias correction (Kingma & Ba 2015) in
    PyTorch's arrangement; see the module docstring for the update. Weight decay is applied to
    every parameter of a group (use two groups for "no decay on gains and biases").

    Args:
        params: iterable of parameters (Tensors that require grad) or of param-group dicts
            (``{"params": [...], "lr": ..., "weight_decay": ...}``).
        lr (float): learning rate, >= 0. Default 1e-3.
        betas (tuple[float, float]): decay rates of the first and second moments, each in
            [0, 1). Default (0.9, 0.999).
        eps (float): added to the denominator, >= 0. Default 1e-8.
        weight_decay (float): decoupled weight decay coefficient, >= 0. Default 0.01.
        amsgrad, maximize, foreach, capturable, differentiable, fused: ``torch.optim.AdamW``'s
            options, accepted only at the values that leave the update unchanged (False; None
            or False for foreach and fused), in the constructor and in a parameter group. The
            groups also carry torch's ``decoupled_weight_decay`` key, True only. Every group is
            checked again at each ``step``, so an option set in ``param_groups`` after
            construction is refused there, never ignored.

    Raises:
        ValueError: on a negative lr, eps or weight_decay, or a beta outside [0, 1) (PyTorch's
            checks); on an empty parameter list, a parameter in two groups or an unknown
            parameter group key.
        NotImplementedError: on ``amsgrad=True``, ``maximize=True``, ``foreach=True``,
            ``capturable=True``, ``differentiable=True`` or ``fused=True`` (we would ignore it).
        TypeError: on a non-numeric hyperparameter or a non-Tensor parameter.

    State per parameter: ``step`` (int), ``exp_avg`` and ``exp_avg_sq`` (arrays of the
    parameter's shape and dtype). Parameters whose ``grad`` is None are skipped (their state and
    step count do not change).
    """

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 foreach=None, capturable: bool = False, differentiable: bool = False,
                 fused=None) -> None:
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        differentiable=differentiable, fused=fused, decoupled_weight_decay=True)
        self._validate_group(defaults)
        super().__init__(params, defaults)

    def _validate_group(self, group: Dict[str, Any]) -> None:
        for k, off in _ADAMW_OFF.items():
            if not any(group[k] is v or (v is not None and group[k] == v) for v in off):
                raise NotImplementedError(f"AdamW: {k}={group[k]!r} is not implemented "
                                          f"(accepted: {' or '.join(map(repr, off))})")
        lr = _check_number("learning rate", group["lr"])
        eps = _check_number("epsilon value", group["eps"])
        wd = _check_number("weight_decay value", group["weight_decay"])
        betas = group["betas"]
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise ValueError(f"betas must be a pair of numbers, got {betas!r}")
        b1 = _check_number("beta parameter at index 0", betas[0])
        b2 = _check_number("beta parameter at index 1", betas[1])
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= b1 < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {b1}")
        if not 0.0 <= b2 < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {b2}")
        if not 0.0 <= wd:
            raise ValueError(f"Invalid weight_decay value: {wd}")
        group["betas"] = (b1, b2)

    @no_grad()
    def step(self, closure=None):
        """Update every parameter that has a gradient, in place.

        Args:
            closure: optional callable that re-evaluates the model and returns the loss; it is
                called with grad mode on.

        Returns:
            The closure's loss, or None.

        Raises:
            ValueError: if a gradient's shape differs from its parameter's.
        """
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        for group in self.param_groups:
            self._validate_group(group)     # a group may be edited between steps, as in torch
            lr = float(group["lr"])
            beta1, beta2 = group["betas"]
            eps = float(group["eps"])
            wd = float(group["weight_decay"])
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if g.shape != p.shape:
                    raise ValueError(
                        f"AdamW: a gradient has shape {g.shape}, its parameter {p.shape}"
                    )
                if g.dtype != p.dtype:
                    g = g.astype(p.dtype)
                state = self.state.get(id(p))
                if not state:
                    state = {"step": 0, "exp_avg": np.zeros_like(p.data),
                             "exp_avg_sq": np.zeros_like(p.data)}
                    self.state[id(p)] = state
                state["step"] += 1
                t = state["step"]
                m, v = state["exp_avg"], state["exp_avg_sq"]
                # p's own array is updated in place (its version counter bumped at each change,
                # as mul_ and add_ do) without their checks, which hold by construction here
                # and cost more than the arithmetic at small sizes (docs/performance.md).
                data = p.data
                if wd != 0.0:                   # decoupled weight decay, a Python scalar in p's dtype
                    data *= np.asarray(1.0 - lr * wd, dtype=data.dtype)
                    engine.hooks.modified(p)
                m += (1.0 - beta1) * (g - m)    # torch's lerp with weight 1 - beta1 (< 0.5)
                v *= beta2
                v += (1.0 - beta2) * (g * g)
                bias_correction1 = 1.0 - beta1 ** t
                bias_correction2 = 1.0 - beta2 ** t
                denom = np.sqrt(v) / bias_correction2 ** 0.5 + eps
                data -= (lr / bias_correction1) * m / denom     # torch's addcdiv_
                engine.hooks.modified(p)
        return loss


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach=None) -> float:
    """Scale the gradients in place so that their total norm is at most ``max_norm``.

    ``torch.nn.utils.clip_grad_norm_``: total = norm_type-norm of the vector of per-parameter
    gradient norms (= the norm of all gradients concatenated); every gradient is multiplied by
    ``min(1, max_norm / (total + 1e-6))``. Parameters without a gradient are ignored. The norm is
    computed in the gradients' dtype.

    Args:
        parameters: a Tensor or an iterable of Tensors.
        max_norm (float): the largest allowed total norm, >= 0.
        norm_type (float): p of the p-norm (2.0 by default); ``float("inf")`` for the max norm.
        error_if_nonfinite (bool): raise instead of scaling when the total norm is nan or inf.
        foreach: None or False (the per-parameter loop we run); True is refused.

    Returns:
        float: the total norm before clipping (0.0 when no parameter has a gradient; may be
        inf or nan, in which case the gradients are scaled by nan/0 as PyTorch does).

    Raises:
        RuntimeError: if ``error_if_nonfinite`` and the total norm is nan or inf; the gradients
            are left untouched (as PyTorch).
        NotImplementedError: if ``foreach`` is True.
        ValueError: if ``max_norm`` is negative or nan, or ``norm_type`` is not positive.
        TypeError: if ``max_norm`` or ``norm_type`` is not a real number.
    """
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    max_norm = _check_number("max_norm", max_norm)
    norm_type = _check_number("norm_type", norm_type)
    if max_norm < 0:
        raise ValueError(f"max_norm must be >= 0, got {max_norm}")
    if not norm_type > 0:
        raise ValueError(f"norm_type must be positive, got {norm_type}")
    if foreach is not None and foreach is not False:
        raise NotImplementedError(f"clip_grad_norm_: foreach={foreach!r} is not implemented "
                                  "(accepted: None or False)")
    grads = [p.grad for p in parameters if getattr(p, "grad", None) is not None]
    if not grads:
        return 0.0
    if math.isinf(norm_type):
        norms = np.array([np.max(np.abs(g)) if g.size else 0.0 for g in grads],
                         dtype=grads[0].dtype)
        total = np.max(norms)
    elif norm_type == 2.0:
        # sqrt(sum g^2) per tensor, via a dot product on the flat view (no temporaries)
        norms = np.array([math.sqrt(float(np.dot(g.ravel(), g.ravel()))) for g in grads],
                         dtype=grads[0].dtype)
        total = np.sqrt(np.dot(norms, norms))
    else:
        norms = np.array([np.sum(np.abs(g) ** norm_type) ** (1.0 / norm_type) for g in grads],
                         dtype=grads[0].dtype)
        total = np.sum(norms ** norm_type) ** (1.0 / norm_type)
    # as torch: clip_coef = max_norm / (total + 1e-6), clamped to at most 1, in the grads' dtype
    dt = grads[0].dtype.type
    total = dt(total)
    if error_if_nonfinite and not np.isfinite(total):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` "
                           "is non-finite, so it cannot be clipped. To scale the gradients by "
                           "the non-finite norm anyway, set error_if_nonfinite=False")
    clip_coef = dt(max_norm) / (total + dt(1e-6))
    clip_coef_clamped = clip_coef if np.isnan(clip_coef) else min(clip_coef, dt(1.0))
    if clip_coef_clamped != 1.0:
        for g in grads:
            g *= clip_coef_clamped
    return float(total)
