"""Gradient check, part two: the checks and reports around the comparison in ``gradcheck.py``.

``minigrad/gradcheck.py`` is the algorithm (central differences, the analytical Jacobian from
one-hot vector-Jacobian products, the entrywise comparison, the verdict) and calls this module
(``Diagnostics``) in a few named places; this module imports nothing from it. It holds what
catches the bugs a Jacobian comparison alone misses and what makes a failure easy to act on:

* **Settings and inputs**: ``eps > 0``, ``atol, rtol >= 0``; the checked inputs are the
  float64 leaf Tensors that require grad.
* **Structural checks**: each gradient has its input's exact shape and dtype and is finite;
  inputs that are not checked (integer indices, constants) get no gradient; ``fn`` and backward
  do not modify the inputs; a zero upstream gradient gives exactly zero gradients; two
  backward passes on fresh graphs give bit-identical gradients.
* **Fast mode** draws Gaussian directions ``u`` over all inputs jointly (unit norm over their
  concatenation) and a Gaussian upstream gradient ``G``, and compares the numerical
  ``<G, J u> = (<G, f(x + eps u)> - <G, f(x - eps u)>) / (2 eps)`` with the analytical
  ``<J^T G, u>`` (one backward), over ``n_directions`` directions: two forward passes per
  direction, whatever the number of parameters (PyTorch's fast mode, Gaussian and without
  scaling atol by the directions). On failure it names the inputs that fail on their own, and
  ``gradcheck`` runs slow mode on them to build the report.
* **Kinks**: where a violating entry sits at a point whose one-sided differences
  ``(f(x+eps) - f(x)) / eps`` and ``(f(x) - f(x-eps)) / eps`` disagree and the analytical value
  lies between them (ReLU at 0), the report names a non-differentiable point instead of
  blaming the backward. The one-sided differences are computed here, for violating entries
  only.
* **The failure report**: the check, the settings, the input and output, how many entries
  violate, the five worst entries, both Jacobians for small blocks, and hints (a scale error,
  a transposed gradient, a missing path, the gradient of another input, an ignored upstream
  gradient); ``GradcheckReport`` carries it with the error figures.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, List, Optional, Tuple

import numpy as np

from .engine import Tensor

# Jacobian blocks with at most this many entries are printed in full in a failure message.
_PRINT_JACOBIAN_MAX = 64
# The slow fallback of fast mode builds full Jacobians only below these sizes (else J^T G only).
_FALLBACK_MAX_OUTPUTS = 2048
_FALLBACK_MAX_ENTRIES = 1_000_000


@dataclass
class GradcheckReport:
    """What one gradient check found; ``gradcheck_report`` returns it, ``GradcheckError.report``
    carries it.

    Attributes:
        passed (bool): True when every check passed.
        check (str): the first failing check, or ``"passed"``. One of ``"backward error"``,
            ``"shape/dtype"``, ``"finite"``, ``"input mutated"``, ``"unchecked input got a
            gradient"``, ``"jacobian"`` (slow mode, one-hot upstream), ``"vjp"`` (slow mode,
            random upstream), ``"fast"`` (directional products), ``"kink"`` (every violating
            entry is at a non-differentiable point), ``"zero upstream"``, ``"determinism"``.
        mode (str): ``"slow"`` or ``"fast"``.
        max_abs_err (float): max ``|analytical - numerical|`` over everything compared (Jacobian
            entries and J^T G entries in slow mode; directional products in fast mode). NaN when
            a structural check failed before any comparison.
        max_rel_err (float): max ``abs err / max(|numerical|, atol)`` over the same set.
        max_tol_ratio (float): max ``abs err / (atol + rtol * |numerical|)``; <= 1 means pass.
        worst (tuple[int, tuple[int, ...]] | None): (input position in ``inputs``, index into
            that input) of the entry with the largest ``tol_ratio``; None in fast mode when it
            passes (directions have no entry).
        worst_output (tuple[int, ...] | None): the output index of that entry (Jacobian
            entries only).
        n_violations (int): entries that violate the tolerance in the failing check (0 if
            passed).
        n_compared (int): entries compared in the failing check (all comparisons if passed).
        message (str): the full human-readable report (the GradcheckError text on failure).
        eps, atol, rtol (float), seed (int): the settings used.
        checked_inputs (tuple[int, ...]): positions of the inputs that were checked.
    """

    passed: bool
    check: str
    mode: str
    max_abs_err: float
    max_rel_err: float
    max_tol_ratio: float
    worst: Optional[Tuple[int, Tuple[int, ...]]]
    worst_output: Optional[Tuple[int, ...]]
    n_violations: int
    n_compared: int
    message: str
    eps: float
    atol: float
    rtol: float
    seed: int
    checked_inputs: Tuple[int, ...] = field(default_factory=tuple)




class Failure(Exception):
    """Internal: carries a failing check up to ``gradcheck.gradcheck_report``."""

    def __init__(self, check: str, text: str, **fields: Any) -> None:
        """``check``: the check's name; ``text``: the message below the header line that
        names the check and the settings; ``fields``: report fields."""
        super().__init__(text)
        self.check = check
        self.text = text
        self.fields = fields


def _idx(shape: tuple, k: int) -> Tuple[int, ...]:
    """The multi-index of flat index k in an array of ``shape``."""
    return tuple(int(i) for i in np.unravel_index(int(k), shape)) if len(shape) else ()


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Same shape, dtype and bytes (NaN equal to NaN, 0.0 unequal to -0.0)."""
    return a.shape == b.shape and a.dtype == b.dtype and \
        np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


def _one_sided_gap(f, x: np.ndarray, k: int, eps: float, base: np.ndarray) -> np.ndarray:
    """``d+ - d-`` at entry k of x, output by output: the right one-sided difference
    ``(f(x + eps e_k) - f(x)) / eps`` minus the left one ``(f(x) - f(x - eps e_k)) / eps``
    (``base = f(x)``); x is perturbed in place and restored, as in the central differences."""
    i = _idx(x.shape, k)
    orig = x[i]
    x[i] = orig + eps
    fp = f()
    x[i] = orig - eps
    fm = f()
    x[i] = orig
    return (fp - 2 * base + fm) / eps


def _errors(A: np.ndarray, Nm: np.ndarray, atol: float, rtol: float):
    """abs err, allowed error, rel err (floored at atol) and err / allowed, entry by entry."""
    err = np.abs(A - Nm)
    tol = atol + rtol * np.abs(Nm)
    rel = err / np.maximum(np.abs(Nm), atol if atol > 0 else 1e-300)
    ratio = err / np.where(tol > 0, tol, 1e-300)
    return err, tol, rel, ratio


class Diagnostics:
    """The settings, checks and reports of one gradient check, for ``gradcheck_report``: it
    validates the arguments, runs the structural checks (``before``, ``check_structure``,
    ``after``) and fast mode (``fast_check``), explains a failed comparison (``diagnose``) and
    makes the ``GradcheckReport`` (``report``). The forward and backward passes it needs come
    in as arguments from ``gradcheck.py``.

    Raises (on construction):
        TypeError: if fn is not callable, or an input that requires grad is not float64.
        ValueError: if no input requires grad, an input is not a leaf, or a setting is invalid.
    """

    def __init__(self, fn, inputs, eps, atol, rtol, fast_mode, seed, n_directions):
        """The arguments of ``gradcheck_report``; validated here."""
        self.full_jacobian_passed = False
        if not callable(fn):
            raise TypeError(f"gradcheck: fn must be callable, got {type(fn).__name__}")
        if isinstance(inputs, (Tensor, np.ndarray)):
            inputs = (inputs,)
        self.inputs = tuple(inputs)
        for name, v in (("eps", eps), ("atol", atol), ("rtol", rtol)):
            if not np.isfinite(v) or v < 0 or (name == "eps" and v == 0):
                raise ValueError(f"gradcheck: {name} must be a finite number > 0 (>= 0 for "
                                 f"atol/rtol), got {v}")
        if int(n_directions) < 1:
            raise ValueError(f"gradcheck: n_directions must be >= 1, got {n_directions}")
        self.fn, self.eps, self.atol, self.rtol = fn, float(eps), float(atol), float(rtol)
        self.fast_mode, self.seed, self.n_directions = bool(fast_mode), int(seed), int(n_directions)
        self.mode = "fast" if self.fast_mode else "slow"
        self.checked: List[int] = []
        seen = set()
        for i, t in enumerate(self.inputs):
            if isinstance(t, Tensor) and t.requires_grad:
                if t.dtype != np.float64:
                    raise TypeError(
                        f"gradcheck: input {i} (shape {t.shape}) requires grad but has dtype "
                        f"{t.dtype}; gradient checks need float64 (x.double().detach()"
                        f".requires_grad_(), or Tensor(array, dtype=np.float64, "
                        f"requires_grad=True))"
                    )
                if not t.is_leaf:
                    raise ValueError(
                        f"gradcheck: input {i} (shape {t.shape}) is not a leaf Tensor; pass "
                        "Tensor(x.data.copy(), requires_grad=True) instead"
                    )
                if id(t) not in seen:
                    seen.add(id(t))
                    self.checked.append(i)
        if not self.checked:
            raise ValueError("gradcheck: no input requires grad, so there is nothing to check")
        self.tensors = [self.inputs[p] for p in self.checked]
        self.others = [i for i, t in enumerate(self.inputs)
                       if isinstance(t, Tensor) and i not in self.checked
                       and not (t.requires_grad and id(t) in seen)]
        self.stats = dict(abs=0.0, rel=0.0, ratio=0.0, worst=None, worst_out=None, n=0)

    # ------------------------------------------------------------------ helpers
    def desc(self, p: int) -> str:
        """``input p (shape ...)``, as the messages name an input."""
        return f"input {p} (shape {self.inputs[p].shape})"

    def dense(self, grads: list) -> list:
        """The gradients as float64 arrays, zeros where none arrived."""
        return [np.zeros(self.inputs[p].shape) if g is None else np.asarray(g, dtype=np.float64)
                for p, g in zip(self.checked, grads)]

    @contextlib.contextmanager
    def private_inputs(self):
        """Perturb private copies of the checked inputs (same memory layout); restore their
        ``data`` and ``grad`` (and the unchecked inputs' ``grad``) on the way out."""
        inputs = self.inputs
        saved_grads = {p: self.inputs[p].grad for p in self.checked}
        saved_data = {p: self.inputs[p].data for p in self.checked}
        self.original = {p: np.array(saved_data[p], copy=True) for p in self.checked}
        other_grads = {i: inputs[i].grad for i in self.others}
        try:
            for p in self.checked:
                self.inputs[p].data = np.array(saved_data[p], dtype=np.float64, copy=True, order="K")
            for i in self.others:
                inputs[i].grad = None
            yield
        finally:
            for p in self.checked:
                self.inputs[p]._data = saved_data[p]
                self.inputs[p].grad = saved_grads[p]
            for i, g in other_grads.items():
                inputs[i].grad = g

    def snapshot(self) -> dict:
        """Copies of every array input, to detect writes by fn or backward."""
        snap = {}
        for i, x in enumerate(self.inputs):
            if isinstance(x, Tensor):
                snap[i] = np.array(x.data, copy=True)
            elif isinstance(x, np.ndarray):
                snap[i] = np.array(x, copy=True)
        return snap

    # ------------------------------------------------------------------ before and after
    def before(self, forward, vjp):
        """The structural checks before the comparison; returns the random Gaussian upstream
        gradient ``G`` and the engine's ``J^T G`` (float64, zeros where none arrived).

        ``forward()`` builds ``fn``'s graph, ``vjp(out, G)`` runs one backward and returns the
        checked inputs' gradients. Also keeps, for ``after``: a snapshot of the inputs, a
        second ``J^T G`` on a fresh graph and the gradients for ``G = 0``.
        """
        self.snap = self.snapshot()
        rng = np.random.default_rng(self.seed)
        out = forward()
        self.check_mutation(self.snap, "fn")
        G = rng.standard_normal(out.shape)
        g1 = vjp(out, G)
        self.check_mutation(self.snap, "backward")
        self.check_structure(g1)
        self.g1 = self.dense(g1)
        # Again on a fresh graph (determinism), and with G = 0 (must give 0).
        self.g2 = self.dense(vjp(forward(), G))
        self.g0 = vjp(forward(), np.zeros(out.shape))
        self.check_structure(self.g0)
        self.check_mutation(self.snap, "backward")
        return G, self.g1

    def after(self) -> None:
        """The checks after the comparison: the inputs are unmodified, a zero upstream gradient
        gave zero gradients, and the two backward passes of ``before`` agree bit for bit."""
        self.check_mutation(self.snap, "fn")
        self.check_zero_upstream(self.g0)
        self.check_determinism(self.g1, self.g2)

    # ------------------------------------------------------------------ structural checks
    def check_mutation(self, snap: dict, when: str) -> None:
        """Fail (check ``input mutated``) when an input differs from its snapshot."""
        for i, ref in snap.items():
            x = self.inputs[i]
            cur = x.data if isinstance(x, Tensor) else x
            if not _same_bits(np.asarray(cur), ref):
                cur = np.asarray(cur)
                changed = (int(np.sum(cur != ref)) if cur.shape == ref.shape else "all")
                raise Failure("input mutated",
                              f"input {i} (shape {ref.shape}) was modified in place by {when} "
                              f"({changed} of {ref.size} entries changed); fn and backward must "
                              "not write to their inputs", worst=(i, ()))

    def check_structure(self, grads: list) -> list:
        """Fail when a gradient has the wrong shape or dtype, is not finite, or reaches an
        unchecked input; else return ``grads``."""
        for p, g in zip(self.checked, grads):
            t = self.inputs[p]
            if g is None:
                continue
            if not isinstance(g, np.ndarray) or g.shape != t.shape or g.dtype != t.dtype:
                got = (f"shape {g.shape}, dtype {g.dtype}" if isinstance(g, np.ndarray)
                       else type(g).__name__)
                raise Failure("shape/dtype", f"the gradient of {self.desc(p)} has {got}; "
                              f"expected shape {t.shape}, dtype {t.dtype}", worst=(p, ()))
            bad = ~np.isfinite(g)
            if bad.any():
                ks = np.flatnonzero(bad)
                where = ", ".join(f"{_idx(t.shape, k)}={g.reshape(-1)[k]}" for k in ks[:5])
                raise Failure("finite", f"the gradient of {self.desc(p)} has {len(ks)} of "
                              f"{g.size} non-finite entries: {where}",
                              worst=(p, _idx(t.shape, ks[0])), n_viol=len(ks), n_cmp=g.size)
        for i in self.others:
            x = self.inputs[i]
            if x.grad is not None:
                raise Failure("unchecked input got a gradient",
                              f"input {i} (shape {x.shape}, dtype {x.dtype}) is not checked "
                              "(integer or not requiring grad) but received a gradient",
                              worst=(i, ()))
        return grads

    def check_zero_upstream(self, g0: list) -> None:
        """Fail when a zero upstream gradient gave a nonzero gradient."""
        for p, g in zip(self.checked, g0):
            if g is not None and np.any(g != 0):
                ks = np.flatnonzero(g != 0)
                shape = self.inputs[p].shape
                vals = ", ".join(f"{_idx(shape, k)}={g.reshape(-1)[k]:.6g}" for k in ks[:5])
                raise Failure("zero upstream",
                              f"with a zero upstream gradient, the gradient of {self.desc(p)} "
                              f"has {len(ks)} of {g.size} nonzero entries: {vals}; a backward "
                              "must scale with its upstream gradient",
                              worst=(p, _idx(shape, ks[0])), n_viol=len(ks), n_cmp=g.size)

    def check_determinism(self, g1: list, g2: list) -> None:
        """Fail when two backward passes with the same upstream gradient differ in a bit."""
        for p, a, b in zip(self.checked, g1, g2):
            if not _same_bits(a, b):
                diff = np.flatnonzero(~((a == b) | (np.isnan(a) & np.isnan(b))))
                shape = self.inputs[p].shape
                k = int(diff[0]) if len(diff) else 0
                raise Failure("determinism",
                              f"two backward passes on fresh graphs with the same upstream "
                              f"gradient differ for {self.desc(p)} at {len(diff)} of {a.size} "
                              f"entries (first {_idx(shape, k)}: {a.reshape(-1)[k]!r} vs "
                              f"{b.reshape(-1)[k]!r})",
                              worst=(p, _idx(shape, k)), n_viol=len(diff), n_cmp=a.size)

    # ------------------------------------------------------------------ errors and kinks
    def record(self, p, in_k, out_k, err, rel, ratio) -> None:
        """Update the max errors and, when this entry is the worst so far, where it is."""
        s = self.stats
        s["abs"] = max(s["abs"], float(err))
        s["rel"] = max(s["rel"], float(rel))
        if ratio > s["ratio"] or s["worst"] is None:
            s["ratio"] = float(ratio)
            s["worst"] = None if p is None else (p, in_k)
            s["worst_out"] = out_k

    def record_comparisons(self, comparisons: list) -> None:
        """Keep the max errors and the worst entry over every comparison of slow mode."""
        for c in comparisons:
            A, jac = c.analytical, c.check == "jacobian"
            err, _, rel, ratio = _errors(A, c.numerical, self.atol, self.rtol)
            if A.size:
                p = self.checked[c.j]
                w = int(np.argmax(np.where(np.isnan(ratio), np.inf, ratio)))
                wo, wk = (divmod(w, A.shape[1]) if jac else (None, w))
                self.record(p, _idx(self.inputs[p].shape, wk), _idx(c.out_shape, wo) if jac else None,
                            float(np.where(np.isfinite(err), err, np.inf).reshape(-1)[w]),
                            float(np.nan_to_num(rel, nan=np.inf).max()),
                            float(np.nan_to_num(ratio, nan=np.inf).reshape(-1)[w]))
            self.stats["n"] += A.size

    def violations(self, c, f, G: np.ndarray, base: np.ndarray) -> dict:
        """The violating entries of one comparison ``c`` (a ``gradcheck.Comparison``), with
        those at kinks marked; ``f`` is fn without a graph, ``base = f()``."""
        p, A, Nm, bad, jac = self.checked[c.j], c.analytical, c.numerical, c.bad, \
            c.check == "jacobian"
        err, tol, rel, ratio = _errors(A, Nm, self.atol, self.rtol)
        # Kinks: one-sided differences d+ = Nm + Cv/2, d- = Nm - Cv/2 disagree, and the
        # analytical value lies between them (a one-sided derivative, not a wrong backward).
        # Cv = d+ - d- is computed at the violating entries only (zero elsewhere).
        x = self.inputs[p].data
        Cv = np.zeros(Nm.shape)
        for k in np.flatnonzero(bad.any(axis=0) if jac else bad):
            gap = _one_sided_gap(f, x, int(k), self.eps, base)
            if jac:
                Cv[:, k] = gap.reshape(-1)
            else:
                Cv[k] = np.sum(G * gap)
        dp, dm = Nm + Cv / 2, Nm - Cv / 2
        lo, hi = np.minimum(dp, dm), np.maximum(dp, dm)
        ktol = self.atol + self.rtol * np.maximum(np.abs(dp), np.abs(dm))
        kink = bad & (hi - lo > ktol) & (A >= lo - tol) & (A <= hi + tol)
        return dict(check=c.check, p=p, A=A, Nm=Nm, err=err, tol=tol, rel=rel, ratio=ratio,
                    bad=bad, kink=kink, dp=dp, dm=dm, jac=jac, out_shape=c.out_shape)

    # ------------------------------------------------------------------ the failure report
    def diagnose(self, comparisons: list, f, G: np.ndarray, fast_failed=None) -> Failure:
        """The failure of slow mode's ``comparisons`` (``gradcheck.Comparison``), explained:
        the input whose worst violation is largest, its kinks, worst entries, hints and
        Jacobians, the other failing inputs listed. ``fast_failed`` (from ``fast_check``)
        adds the failed directional products, or is the failure when no entry violates."""
        # For the hints: the numerical gradients of the other inputs, and whether the full
        # Jacobians passed (then only J^T G failed).
        self.num_jac = {self.checked[c.j]: c.numerical for c in comparisons
                        if c.check == "jacobian"}
        self.num_vjp = {self.checked[c.j]: c.numerical for c in comparisons if c.check == "vjp"}
        self.full_jacobian_passed = bool(self.num_vjp) and bool(self.num_jac)
        failed = [c for c in comparisons if c.bad.any()]
        if not failed:
            return Failure("fast", f"{fast_failed['summary']}\nthe slow-mode fallback on "
                           f"inputs {fast_failed['positions']} found no violating entry: the "
                           "directional tolerance is tighter than the entrywise one here; try a "
                           "larger atol")
        base = f()
        results = [self.violations(c, f, G, base) for c in failed]
        results.sort(key=lambda r: -float(np.nan_to_num(r["ratio"], nan=np.inf).max()))
        nonkink = [r for r in results if (r["bad"] & ~r["kink"]).any()]
        main = (nonkink or results)[0]
        others = [(r["p"], int(r["bad"].sum()), r["bad"].size) for r in results if r is not main]
        failure = self.fail_from(main, others)
        if fast_failed is not None:
            failure.text += ("\n" + fast_failed["summary"] + "\n(entries above from the "
                             "slow-mode fallback" + ("" if fast_failed["full"] else
                                                     ", J^T G only: the Jacobian is too large")
                             + ")")
        return failure

    def fail_from(self, res: dict, others: list) -> Failure:
        """The failure message of one comparison: kinks, worst entries, hints, Jacobians."""
        p, A, Nm, jac = res["p"], res["A"], res["Nm"], res["jac"]
        bad, kink = res["bad"], res["kink"]
        t = self.inputs[p]
        x = self.original[p].reshape(-1)
        out_shape = res["out_shape"]
        n_bad, n_all = int(bad.sum()), bad.size
        what = "Jacobian entries" if jac else "entries of J^T G (random Gaussian upstream G)"
        only_kinks = bool((bad & ~kink).sum() == 0)
        check = "kink" if only_kinks else res["check"]
        lines = [f"{self.desc(p)}, output of shape {tuple(out_shape)}: {n_bad} of {n_all} "
                 f"{what} violate |analytical - numerical| <= atol + rtol * |numerical|"]
        flat_bad = np.flatnonzero(bad.reshape(-1))
        ratio = np.nan_to_num(res["ratio"].reshape(-1), nan=np.inf)
        if kink.any():
            kk = np.flatnonzero(kink.reshape(-1))
            order = kk[np.argsort(-ratio[kk], kind="stable")]
            for f in order[:5]:
                o, k = divmod(int(f), A.shape[1]) if jac else (None, int(f))
                lines.append(
                    f"non-differentiable point at input {p}, index {_idx(t.shape, k)}, value "
                    f"{float(x[k])!r}: one-sided differences {res['dm'].reshape(-1)[f]:.6g} "
                    f"(left) and {res['dp'].reshape(-1)[f]:.6g} (right) disagree"
                    + (f" for output {_idx(out_shape, o)}" if jac else "")
                    + f"; the analytical {A.reshape(-1)[f]:.6g} is one of them, so the backward "
                    "is not blamed; move the test point away from the kink")
            if not only_kinks:
                lines.append(f"{len(kk)} violating entries are at kinks; "
                             f"{n_bad - len(kk)} are not:")
        order = flat_bad[np.argsort(-ratio[flat_bad], kind="stable")]
        if not only_kinks:
            order = np.array([f for f in order if not kink.reshape(-1)[f]], dtype=int)
        lines.append("worst entries:")
        lines.append(f"  {'output index':>14} {'input index':>14} {'input value':>14} "
                     f"{'analytical':>14} {'numerical':>14} {'abs err':>12} {'rel err':>12} "
                     f"{'allowed':>12}")
        for f in order[:5]:
            o, k = divmod(int(f), A.shape[1]) if jac else (None, int(f))
            oi = str(_idx(out_shape, o)) if jac else "(J^T G)"
            lines.append(
                f"  {oi:>14} {str(_idx(t.shape, k)):>14} {x[k]:>14.6g} "
                f"{A.reshape(-1)[f]:>14.6g} {Nm.reshape(-1)[f]:>14.6g} "
                f"{res['err'].reshape(-1)[f]:>12.3e} {res['rel'].reshape(-1)[f]:>12.3e} "
                f"{res['tol'].reshape(-1)[f]:>12.3e}")
        first = int(order[0]) if len(order) else int(flat_bad[0])
        fo, fk = divmod(first, A.shape[1]) if jac else (None, first)
        for h in ([] if only_kinks else self.hints(res)):
            lines.append(f"hint: {h}")
        for q, nb, na in others:
            lines.append(f"also failing: {self.desc(q)}: {nb} of {na} entries")
        if jac and A.size <= _PRINT_JACOBIAN_MAX:
            lines.append(f"analytical Jacobian (rows: output entries of shape {tuple(out_shape)}, "
                         f"columns: entries of input {p}):")
            lines.append(np.array2string(A, precision=6, max_line_width=120))
            lines.append("numerical Jacobian:")
            lines.append(np.array2string(Nm, precision=6, max_line_width=120))
        elif not jac and A.size <= _PRINT_JACOBIAN_MAX:
            lines.append(f"analytical J^T G: {np.array2string(A.reshape(t.shape), precision=6)}")
            lines.append(f"numerical  J^T G: {np.array2string(Nm.reshape(t.shape), precision=6)}")
        return Failure(check, "\n".join(lines), worst=(p, _idx(t.shape, fk)),
                        worst_out=_idx(out_shape, fo) if jac else None,
                        n_viol=n_bad, n_cmp=n_all)

    def hints(self, res: dict) -> list:
        """Likely causes read off the two Jacobians: an ignored upstream gradient, a scale
        error, a transposed gradient, a missing path, the gradient of another input."""
        A, Nm, tol, jac, p = res["A"], res["Nm"], res["tol"], res["jac"], res["p"]
        out = []
        if res["check"] == "vjp" and self.full_jacobian_passed:
            # Every one-hot upstream gradient gave the right Jacobian, a random one does not:
            # the backward does not scale by its upstream gradient.
            out.append("the Jacobian from one-hot upstream gradients is right but J^T G for a "
                       "random upstream G is not: the backward ignores or mishandles its "
                       "upstream gradient (e.g. returns the local derivative without "
                       "multiplying by grad_output)")
            return out
        big = np.abs(Nm) > 10 * self.atol
        if big.sum() >= 1 and np.all(A[big] != 0) and np.all(np.isfinite(A)):
            r = A[big] / Nm[big]
            med = float(np.median(r))
            small_ok = np.all(np.abs(A[~big]) <= 10 * self.atol * max(1.0, abs(med)) + tol[~big])
            if np.all(np.abs(r - med) <= 1e-4 * abs(med)) and abs(med - 1) > 1e-4 and small_ok:
                out.append(f"analytical = {med:.6g} x numerical at every entry: a scale error "
                           f"(a constant factor {med:.6g} in the backward)")
        shape = self.inputs[p].shape
        if len(shape) == 2 and shape[0] == shape[1] and shape[0] > 1:
            # A transposed gradient: the analytical value at input entry (i, j) is the
            # numerical one at (j, i).
            m = A.shape[0] if jac else 1
            a_t = A.reshape(m, shape[0], shape[1]).transpose(0, 2, 1).reshape(Nm.shape)
            if np.all(np.abs(a_t - Nm) <= tol):
                out.append(f"the analytical gradient of input {p} is the transpose of the "
                           "numerical one: a transposed gradient (e.g. dc @ b instead of "
                           "dc @ b^T)")
        if jac:
            zero_col = np.all(A == 0, axis=0) & np.any(np.abs(Nm) > tol, axis=0)
            if zero_col.any():
                ks = [_idx(shape, k) for k in np.flatnonzero(zero_col)[:5]]
                out.append(f"the analytical Jacobian column is all zero for entries {ks} of input "
                           f"{p} while the numerical one is not: a missing path (the gradient "
                           "never reaches these entries)")
        else:
            zero = (A == 0) & (np.abs(Nm) > tol)
            if zero.any():
                ks = [_idx(shape, k) for k in np.flatnonzero(zero)[:5]]
                out.append(f"the analytical gradient is exactly zero at entries {ks} of input {p} "
                           "while the numerical one is not: a missing path")
        nums = self.num_jac if jac else self.num_vjp
        if nums:
            for q, nq in nums.items():
                if q != p and nq.shape == Nm.shape and nq.size and \
                        np.all(np.abs(A - nq) <= self.atol + self.rtol * np.abs(nq)):
                    out.append(f"the analytical gradient of input {p} matches the numerical "
                               f"gradient of input {q}: a gradient for the wrong input")
        return out

    # ------------------------------------------------------------------ fast mode
    def fast_check(self, f, G: np.ndarray, g1: list):
        """Fast mode: ``<G, J u>`` by central differences against ``<J^T G, u>`` over
        ``n_directions`` Gaussian directions; ``f`` is fn without a graph, ``g1`` the engine's
        ``J^T G``.

        Returns ``(which, full, fast_failed)``: ``([], True, None)`` when every direction
        agrees; else the indices (into the checked inputs) of the inputs slow mode should
        check (those that fail on their own, else all), whether it should build full
        Jacobians (small enough) or ``J^T G`` only, and what ``diagnose`` reports about the
        failed directions.
        """
        rng = np.random.default_rng([self.seed, 1])
        arrs = [self.inputs[p].data for p in self.checked]
        origs = [a.copy() for a in arrs]
        dirs = []
        for _ in range(self.n_directions):
            u = [rng.standard_normal(a.shape) for a in arrs]
            norm = np.sqrt(sum(float(np.sum(x * x)) for x in u))
            dirs.append([x / norm for x in u] if norm > 0 else u)

        def directional(u, which):
            e = self.eps
            for j in which:
                np.add(origs[j], e * u[j], out=arrs[j])
            fp = f()
            for j in which:
                np.subtract(origs[j], e * u[j], out=arrs[j])
            fm = f()
            for j in which:
                np.copyto(arrs[j], origs[j])
            # Difference first, then the dot product: large constant outputs (a -1e9 mask)
            # cancel exactly instead of swamping <G, f>.
            num = float(np.sum(G * (fp - fm))) / (2 * e)
            ana = float(sum(np.sum(np.asarray(g1[j], dtype=np.float64) * u[j]) for j in which))
            return ana, num

        everyone = list(range(len(self.checked)))
        failed = []
        for d, u in enumerate(dirs):
            ana, num = directional(u, everyone)
            err = abs(ana - num)
            tol = self.atol + self.rtol * abs(num)
            rel = err / max(abs(num), self.atol if self.atol > 0 else 1e-300)
            self.record(None, None, None, err, rel, err / tol if tol > 0 else np.inf)
            self.stats["n"] += 1
            if not err <= tol:
                failed.append((d, ana, num, err, tol))
        self.stats["worst"] = None
        if not failed:
            return [], True, None
        # Localize: the same directions restricted to one input at a time.
        suspects = []
        for j, p in enumerate(self.checked):
            for u in dirs:
                norm = np.sqrt(float(np.sum(u[j] * u[j])))
                if norm == 0:
                    continue
                uj = [x / norm for x in u]
                ana, num = directional(uj, [j])
                if not abs(ana - num) <= self.atol + self.rtol * abs(num):
                    suspects.append(j)
                    break
        which = suspects or list(range(len(self.checked)))
        positions = [self.checked[j] for j in which]
        m = int(np.prod(G.shape)) if G.ndim else 1
        n = sum(self.inputs[p].size for p in positions)
        full = m <= _FALLBACK_MAX_OUTPUTS and m * n <= _FALLBACK_MAX_ENTRIES
        d, ana, num, err, tol = failed[0]
        summary = (f"fast mode: {len(failed)} of {len(dirs)} directions violate; direction {d}: "
                   f"<G, J u> numerical = {num:.9g}, <J^T G, u> analytical = {ana:.9g}, "
                   f"abs err {err:.3e} > allowed {tol:.3e}")
        return which, full, dict(summary=summary, positions=positions, full=full)

    # ------------------------------------------------------------------ reports
    def report(self, comparisons: list, failure: Optional[Failure] = None) -> GradcheckReport:
        """The ``GradcheckReport``: the max errors over the directional products (fast mode)
        and slow mode's ``comparisons``; failed when ``failure`` is given."""
        self.record_comparisons(comparisons)
        s, settings = self.stats, (f"{self.mode} mode, eps={self.eps:g}, atol={self.atol:g}, "
                                   f"rtol={self.rtol:g}, seed={self.seed}")
        common = dict(mode=self.mode, eps=self.eps, atol=self.atol, rtol=self.rtol,
                      seed=self.seed, checked_inputs=tuple(self.checked))
        if failure is None:
            msg = (f"gradcheck passed ({settings}): {s['n']} comparisons, max abs err "
                   f"{s['abs']:.3e}, max rel err {s['rel']:.3e}, max err/tolerance "
                   f"{s['ratio']:.3f}")
            return GradcheckReport(
                passed=True, check="passed", max_abs_err=s["abs"], max_rel_err=s["rel"],
                max_tol_ratio=s["ratio"], worst=s["worst"], worst_output=s["worst_out"],
                n_violations=0, n_compared=s["n"], message=msg, **common)
        nan, fl = float("nan"), failure.fields
        return GradcheckReport(
            passed=False, check=failure.check,
            max_abs_err=s["abs"] if s["n"] else nan, max_rel_err=s["rel"] if s["n"] else nan,
            max_tol_ratio=s["ratio"] if s["n"] else nan,
            worst=fl.get("worst"), worst_output=fl.get("worst_out"),
            n_violations=int(fl.get("n_viol", 1)), n_compared=int(fl.get("n_cmp", 1)),
            message=f"gradcheck failed: check '{failure.check}' ({settings})\n{failure.text}",
            **common)
