"""Gradient check: the engine's gradients against central differences.

Modelled on ``torch.autograd.gradcheck`` (slow and fast mode). The idea, for ``out = fn(x)``
with ``m`` output entries and ``n`` input entries:

1. **Numerical Jacobian** (``numerical_jacobian``) by central differences, one input entry
   ``k`` at a time: ``J_num[:, k] = (f(x + eps e_k) - f(x - eps e_k)) / (2 eps)``, an error of
   order eps².
2. **Analytical Jacobian** (``analytical_jacobian``) from the engine: backward with a one-hot
   upstream gradient ``G = e_o`` gives row ``o`` of ``J`` (a vector-Jacobian product
   ``J^T e_o``), one backward per output entry.
3. **Compare** (``compare``) entry by entry: an entry passes when
   ``|analytical - numerical| <= atol + rtol * |numerical|``.
4. Then compare one vector-Jacobian product ``J^T G`` for a random Gaussian upstream gradient
   ``G`` (a backward that ignores its upstream gradient passes a one-hot test on a scalar
   output, not this one).

That is slow mode (``slow_mode``); ``gradcheck`` runs it and gives the verdict. Errors are
reported as ``abs err = |analytical - numerical|`` and ``rel err = abs err / max(|numerical|,
atol)`` (floored at atol so that entries whose true value is zero do not dominate).

Everything around it lives in ``gradcheck_diagnostics.py``, which this module calls in a few
named places: the settings' checks, the structural checks before and after the comparison
(gradient shape and dtype, finite, inputs not modified, zero upstream gives zero,
deterministic), fast mode (directional products, which name the inputs slow mode then
checks), the kink analysis and the failure report with its hints (``diagnose``).
"""
from __future__ import annotations

from typing import List, NamedTuple, Optional, Sequence

import numpy as np

from .pytorch_compat.grad_mode import enable_grad, no_grad
from .gradcheck_diagnostics import Diagnostics, Failure, GradcheckReport
from .engine import Tensor

__all__ = ["GradcheckError", "GradcheckReport", "gradcheck", "gradcheck_report",
           "numerical_jacobian", "analytical_jacobian", "compare"]


class GradcheckError(RuntimeError):
    """Raised by ``gradcheck`` when a check fails; ``.report`` is the ``GradcheckReport``."""

    def __init__(self, message: str, report: Optional[GradcheckReport] = None) -> None:
        super().__init__(message)
        self.report = report


# ----------------------------------------------------------------------------- fn, two ways
def evaluate(fn, inputs: Sequence) -> np.ndarray:
    """``fn(*inputs)`` without a graph, as a float64 array: what central differences call."""
    with no_grad():
        out = fn(*inputs)
    return np.array(out.data, dtype=np.float64, copy=True)


def forward_graph(fn, inputs: Sequence) -> Tensor:
    """``fn(*inputs)`` with a graph, for the engine's backward.

    Raises:
        TypeError: if fn returns no Tensor, or a Tensor of a non-floating dtype.
    """
    with enable_grad():
        out = fn(*inputs)
    if not isinstance(out, Tensor):
        raise TypeError(f"gradcheck: fn must return a Tensor, got {type(out).__name__}")
    if out.dtype.kind != "f":
        raise TypeError(f"gradcheck: fn must return a floating Tensor, got dtype {out.dtype}")
    return out


def engine_vjp(out: Tensor, xs: Sequence[Tensor], G: np.ndarray,
               retain_graph: bool = False) -> list:
    """The engine's ``J^T G`` for each Tensor in ``xs``: ``out.backward(G)``, then the ``.grad``
    of each (None where no gradient arrived). A backward that raises is a failed check."""
    for x in xs:
        x.grad = None
    if out.requires_grad:
        try:
            out.backward(G.astype(out.dtype), retain_graph=retain_graph)
        except (RuntimeError, ValueError, TypeError, FloatingPointError, IndexError) as e:
            raise Failure("backward error", f"backward raised {type(e).__name__}: {e}") from e
    return [x.grad for x in xs]


# ----------------------------------------------------------------------------- the two Jacobians
def central_differences(f, x: np.ndarray, eps: float):
    """For each entry ``k`` of ``x`` (flat, C order), yield column ``k`` of the Jacobian of
    ``f`` at ``x``: ``(f(x + eps e_k) - f(x - eps e_k)) / (2 eps)``, shaped like ``f()``.

    ``f`` takes no argument and reads ``x``, which is perturbed in place and restored (a
    multi-index writes through any memory layout).
    """
    for k in range(x.size):
        i = np.unravel_index(k, x.shape)
        orig = x[i]
        x[i] = orig + eps
        f_plus = f()
        x[i] = orig - eps
        f_minus = f()
        x[i] = orig
        yield (f_plus - f_minus) / (2 * eps)


def numerical_jacobian(f, x: np.ndarray, eps: float, m: int) -> np.ndarray:
    """The Jacobian (m, n) of ``f`` (m outputs) with respect to ``x`` (n entries), by central
    differences; float64."""
    J = np.zeros((m, x.size))
    for k, column in enumerate(central_differences(f, x, eps)):
        J[:, k] = column.reshape(-1)
    return J


def numerical_vjp(f, x: np.ndarray, eps: float, G: np.ndarray) -> np.ndarray:
    """``J^T G`` (n,) by central differences, one column at a time, without storing ``J``
    (for Jacobians too large to hold)."""
    return np.array([np.sum(G * column) for column in central_differences(f, x, eps)])


def analytical_jacobian(out: Tensor, xs: Sequence[Tensor], vjp) -> List[np.ndarray]:
    """The engine's Jacobian (m, n_i) of ``out`` for each Tensor in ``xs``: row ``o`` is the
    backward with the one-hot upstream gradient ``e_o``. ``vjp(out, G)`` runs one backward
    (keeping the graph) and returns the gradients (None where none arrived)."""
    Js = [np.zeros((out.size, x.size)) for x in xs]
    for o in range(out.size):
        e_o = np.zeros(out.shape)
        e_o.reshape(-1)[o] = 1.0
        for J, g in zip(Js, vjp(out, e_o)):
            if g is not None:
                J[o, :] = g.reshape(-1)
    return Js


# ----------------------------------------------------------------------------- compare
def compare(analytical: np.ndarray, numerical: np.ndarray, atol: float, rtol: float
            ) -> np.ndarray:
    """The entries that violate ``|analytical - numerical| <= atol + rtol * |numerical|``
    (a bool array; NaN violates)."""
    return ~(np.abs(analytical - numerical) <= atol + rtol * np.abs(numerical))


class Comparison(NamedTuple):
    """One comparison of slow mode: ``check`` is ``"jacobian"`` (the (m, n) Jacobians) or
    ``"vjp"`` (``J^T G``, (n,)); ``j`` indexes the checked inputs; ``bad`` is ``compare``'s
    answer; ``out_shape`` is fn's output shape."""

    check: str
    j: int
    analytical: np.ndarray
    numerical: np.ndarray
    bad: np.ndarray
    out_shape: tuple


def slow_mode(f, forward, vjp, xs: Sequence[Tensor], which: Sequence[int], G: np.ndarray,
              g1: list, eps: float, atol: float, rtol: float, full: bool = True
              ) -> List[Comparison]:
    """Slow mode on ``xs[j]`` for ``j`` in ``which``: the full Jacobians entry by entry (when
    ``full``); if they agree, ``J^T G`` for the random upstream ``G`` (``g1``: the engine's,
    float64). Returns every comparison made."""
    base = f()
    comparisons = []
    if full:
        Ja = analytical_jacobian(forward(), xs, vjp)
        Jn = {j: numerical_jacobian(f, xs[j].data, eps, base.size) for j in which}
        for j in which:
            comparisons.append(Comparison("jacobian", j, Ja[j], Jn[j],
                                          compare(Ja[j], Jn[j], atol, rtol), base.shape))
        if any(c.bad.any() for c in comparisons):
            return comparisons
        # J^T G from the columns of J, summed as numerical_vjp sums them
        vjp_num = {j: np.array([np.sum(G.reshape(-1) * column) for column in Jn[j].T])
                   for j in which}
    else:
        vjp_num = {j: numerical_vjp(f, xs[j].data, eps, G) for j in which}
    for j in which:
        a = g1[j].reshape(-1)
        comparisons.append(Comparison("vjp", j, a, vjp_num[j],
                                      compare(a, vjp_num[j], atol, rtol), base.shape))
    return comparisons


# ----------------------------------------------------------------------------- the driver
def gradcheck_report(fn, inputs, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
                     fast_mode: bool = False, seed: int = 0, n_directions: int = 4
                     ) -> GradcheckReport:
    """Run every check of ``gradcheck`` and return a ``GradcheckReport`` instead of raising.

    Same arguments as ``gradcheck`` (without ``raise_exception``). The report carries the max
    absolute and relative errors also when the check passes, for tables of per-op errors.

    Raises:
        TypeError: if an input that requires grad is not float64, or fn returns no float Tensor.
        ValueError: if no input requires grad, an input is not a leaf, or a setting is invalid.
    """
    checks = Diagnostics(fn, inputs, eps, atol, rtol, fast_mode, seed, n_directions)
    inputs, xs = checks.inputs, checks.tensors

    def f():
        return evaluate(fn, inputs)

    def forward():
        return forward_graph(fn, inputs)

    def vjp(out, G, retain_graph=False):
        return engine_vjp(out, xs, G, retain_graph)

    def vjp_checked(out, G):  # every one-hot backward gets the structural checks too
        return checks.check_structure(vjp(out, G, retain_graph=True))

    comparisons, failure = [], None
    with checks.private_inputs():  # perturb copies; .data and .grad are restored after
        try:
            # Structural checks; the random upstream G and the engine's J^T G (float64).
            G, g1 = checks.before(forward, vjp)
            which, full, fast_failed = range(len(xs)), True, None
            if fast_mode:  # directional products; when they fail, slow mode on the inputs
                which, full, fast_failed = checks.fast_check(f, G, g1)  # they blame
            if len(which):
                comparisons = slow_mode(f, forward, vjp_checked, xs, which, G, g1, eps, atol,
                                        rtol, full)
                if fast_failed is not None or any(c.bad.any() for c in comparisons):
                    raise checks.diagnose(comparisons, f, G, fast_failed)
            checks.after()  # inputs unmodified, zero upstream gives zero, deterministic
        except Failure as e:
            failure = e
    return checks.report(comparisons, failure)


def gradcheck(fn, inputs, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True, fast_mode: bool = False, seed: int = 0,
              n_directions: int = 4) -> bool:
    """Check the engine's gradients of ``fn`` at ``inputs`` against central differences.

    Modelled on ``torch.autograd.gradcheck``; see this module's docstring for slow mode (full
    Jacobians entry by entry plus one random J^T G) and ``gradcheck_diagnostics`` for fast mode
    (``n_directions`` Gaussian directional products, two forward passes each), the structural
    checks and kinks. ``fn`` runs under ``enable_grad`` for the analytical passes and
    ``no_grad`` for the numerical ones. The inputs' ``.data`` and ``.grad`` are the same after
    the call as before.

    Args:
        fn: callable mapping ``*inputs`` to one floating Tensor of any shape. It may also read
            the checked Tensors another way (e.g. a Module's parameters passed as ``inputs``).
        inputs: a Tensor or a sequence of Tensors / arrays / other values. Tensors with
            ``requires_grad=True`` are checked and must be float64 leaves; everything else
            (integer index Tensors, constants) is passed through and must get no gradient.
        eps (float): central-difference step.
        atol, rtol (float): an entry passes when
            ``|analytical - numerical| <= atol + rtol * |numerical|``.
        raise_exception (bool): raise ``GradcheckError`` on failure (else return False).
        fast_mode (bool): directional products instead of full Jacobians.
        seed (int): seed of the Gaussian upstream gradient and directions.
        n_directions (int): directions in fast mode.

    Returns:
        bool: True when every check passes; False on failure when ``raise_exception`` is False.

    Raises:
        TypeError: if an input that requires grad is not float64, or fn returns no float Tensor.
        ValueError: if no input requires grad, an input is not a leaf, or a setting is invalid.
        GradcheckError: on failure when ``raise_exception`` is True; ``.report`` holds the
            ``GradcheckReport`` and the message names the check, mode, eps, atol, rtol, seed,
            the input and output, how many entries violate, the five worst entries, both
            Jacobians for small blocks, and hints.
    """
    report = gradcheck_report(fn, inputs, eps=eps, atol=atol, rtol=rtol, fast_mode=fast_mode,
                              seed=seed, n_directions=n_directions)
    if report.passed:
        return True
    if raise_exception:
        raise GradcheckError(report.message, report)
    return False
