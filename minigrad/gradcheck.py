"""Gradient check: the engine's gradients against central differences.

Modelled on ``torch.autograd.gradcheck`` (slow and fast mode). The idea, for ``out = fn(x)``:

1. **Numerical Jacobian** by central differences, one input entry ``k`` at a time:
   ``J_num[:, k] = (f(x + eps e_k) - f(x - eps e_k)) / (2 eps)``, an error of order eps².
2. **Analytical Jacobian** from the engine: backward with a one-hot upstream gradient
   ``G = e_o`` gives row ``o`` of ``J`` (a vector-Jacobian product ``J^T e_o``), one backward
   per output entry.
3. **Compare** entry by entry: an entry passes when
   ``|analytical - numerical| <= atol + rtol * |numerical|``.
4. Then compare one vector-Jacobian product ``J^T G`` for a random Gaussian upstream gradient
   ``G`` (a backward that ignores its upstream gradient passes a one-hot test on a scalar
   output, not this one).

That is slow mode. Errors are reported as ``abs err = |analytical - numerical|`` and
``rel err = abs err / max(|numerical|, atol)`` (floored at atol so that entries whose true value
is zero do not dominate).

Everything around it lives in ``gradcheck_diagnostics.py``: the settings' checks, the
structural checks (gradient shape and dtype, finite, inputs not modified, zero upstream gives
zero, deterministic), fast mode (directional products with a slow-mode fallback), the kink
analysis and the failure report with its hints.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from .grad_mode import enable_grad, no_grad
from .gradcheck_diagnostics import Diagnostics, Failure, GradcheckReport, _idx
from .tensor import Tensor

__all__ = ["GradcheckError", "GradcheckReport", "gradcheck", "gradcheck_report"]


class GradcheckError(RuntimeError):
    """Raised by ``gradcheck`` when a check fails; ``.report`` is the ``GradcheckReport``."""

    def __init__(self, message: str, report: Optional[GradcheckReport] = None) -> None:
        super().__init__(message)
        self.report = report


class _Checker(Diagnostics):
    """One gradient check of ``fn`` at ``inputs``. The settings (``eps``, ``atol``, ``rtol``,
    ``seed``), the checked input positions (``checked``) and every check beyond the Jacobian
    comparison come from ``Diagnostics``."""

    # ------------------------------------------------------------------ fn and its backward
    def f(self) -> np.ndarray:
        """``fn(*inputs)`` without a graph, as float64: what the central differences evaluate."""
        with no_grad():
            out = self.fn(*self.inputs)
        return np.array(out.data, dtype=np.float64, copy=True)

    def forward_graph(self) -> Tensor:
        """``fn(*inputs)`` with a graph, for the engine's backward."""
        with enable_grad():
            out = self.fn(*self.inputs)
        if not isinstance(out, Tensor):
            raise TypeError(f"gradcheck: fn must return a Tensor, got {type(out).__name__}")
        if out.dtype.kind != "f":
            raise TypeError(f"gradcheck: fn must return a floating Tensor, got dtype {out.dtype}")
        return out

    def backward(self, out: Tensor, G: np.ndarray, retain: bool = False) -> list:
        """The engine's ``J^T G`` for every checked input (None where no gradient arrived)."""
        for p in self.checked:
            self.t(p).grad = None
        if out.requires_grad:
            try:
                out.backward(G.astype(out.dtype), retain_graph=retain)
            except (RuntimeError, ValueError, TypeError, FloatingPointError, IndexError) as e:
                raise Failure("backward error", f"{self.header('backward error')}\n"
                              f"backward raised {type(e).__name__}: {e}") from e
        return [self.t(p).grad for p in self.checked]

    # ------------------------------------------------------------------ the two Jacobians
    def numerical(self, p: int, G: np.ndarray, base: np.ndarray, full: bool):
        """Central differences for input p: ``J_num`` (m, n) when ``full``, and ``J_num^T G``
        (n,); beside each, the one-sided differences' disagreement for the kink analysis."""
        arr = self.t(p).data
        n, m = arr.size, base.size
        J = np.zeros((m, n)) if full else None
        C = np.zeros((m, n)) if full else None
        vjp = np.zeros(n)
        vcurv = np.zeros(n)
        e = self.eps
        for k in range(n):
            i = _idx(arr.shape, k)  # a multi-index writes through any memory layout
            orig = arr[i]
            arr[i] = orig + e
            fp = self.f()
            arr[i] = orig - e
            fm = self.f()
            arr[i] = orig
            col = (fp - fm) / (2 * e)
            curv = (fp - 2 * base + fm) / e  # d+ - d-: one-sided differences' disagreement
            vjp[k] = np.sum(G * col)
            vcurv[k] = np.sum(G * curv)
            if full:
                J[:, k] = col.reshape(-1)
                C[:, k] = curv.reshape(-1)
        return J, C, vjp, vcurv

    def analytic_jacobian(self, m: int) -> list:
        """Row o of each input's Jacobian: backward with the one-hot upstream gradient e_o."""
        out = self.forward_graph()
        Js = [np.zeros((m, self.t(p).size)) for p in self.checked]
        for o in range(m):
            G1 = np.zeros(out.shape)
            G1.reshape(-1)[o] = 1.0
            grads = self.backward(out, G1, retain=True)
            self.check_structure(grads)
            for J, g in zip(Js, grads):
                if g is not None:
                    J[o, :] = g.reshape(-1)
        return Js

    # ------------------------------------------------------------------ compare
    def compare(self, check, p, A, Nm, Cv, out_shape, jac: bool):
        """Compare analytical A with numerical Nm (2-D (m, n) Jacobians or 1-D (n,) J^T G);
        None when every entry passes, else the violations."""
        err = np.abs(A - Nm)
        tol = self.atol + self.rtol * np.abs(Nm)
        rel = err / np.maximum(np.abs(Nm), self.atol if self.atol > 0 else 1e-300)
        ratio = err / np.where(tol > 0, tol, 1e-300)
        bad = ~(err <= tol)
        self.track(p, A, err, rel, ratio, out_shape, jac)
        if not bad.any():
            return None
        return self.violations(check, p, A, Nm, Cv, err, tol, rel, ratio, bad, out_shape, jac)

    def slow(self, positions: Sequence[int], G: np.ndarray, g1: list, full: bool) -> None:
        """Slow mode: full Jacobians entry by entry (when ``full``), then ``J^T G``."""
        base = self.f()
        Ja = self.analytic_jacobian(base.size) if full else None
        nums = {p: self.numerical(p, G, base, full) for p in positions}
        self.num_vjp = {p: nums[p][2] for p in positions}
        self.num_jac = {p: nums[p][0] for p in positions} if full else {}
        fails = []
        if full:
            for p in positions:
                J, C, _, _ = nums[p]
                r = self.compare("jacobian", p, Ja[self.checked.index(p)], J, C, base.shape,
                                 jac=True)
                if r is not None:
                    fails.append(r)
        self.full_jacobian_passed = full and not fails
        if not fails:
            for p in positions:
                _, _, v, vc = nums[p]
                a = np.asarray(g1[self.checked.index(p)], dtype=np.float64).reshape(-1)
                r = self.compare("vjp", p, a, v, vc, base.shape, jac=False)
                if r is not None:
                    fails.append(r)
        if fails:
            raise self.failure(fails)

    # ------------------------------------------------------------------ driver
    def run(self) -> GradcheckReport:
        """Every check in order; the first failure ends the run and makes the report."""
        with self.private_inputs():
            try:
                snap = self.snapshot()
                rng = np.random.default_rng(self.seed)
                # The engine's J^T G for a random upstream gradient G.
                out = self.forward_graph()
                self.check_mutation(snap, "fn")
                G = rng.standard_normal(out.shape)
                g1 = self.backward(out, G)
                self.check_mutation(snap, "backward")
                self.check_structure(g1)
                g1 = self.dense(g1)
                # Again on a fresh graph (determinism), and with G = 0 (must give 0).
                g2 = self.dense(self.backward(self.forward_graph(), G))
                g0 = self.backward(self.forward_graph(), np.zeros(out.shape))
                self.check_structure(g0)
                self.check_mutation(snap, "backward")
                # The comparison with central differences.
                if self.fast_mode:
                    self.fast(G, g1)
                else:
                    self.slow(self.checked, G, g1, full=True)
                self.check_mutation(snap, "fn")
                self.check_zero_upstream(g0)
                self.check_determinism(g1, g2)
            except Failure as f:
                return self.failed_report(f)
        return self.passed_report()


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
    return _Checker(fn, inputs, eps, atol, rtol, fast_mode, seed, n_directions).run()


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
