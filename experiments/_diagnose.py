"""What is wrong with a gradient, in the terms of its derivation.

``diagnose(name, yours, right, terms, mistakes, labels, factors, others)`` looks at one
gradient (dx, dweight, ...) over every case of a check and returns its verdict as lines of
text. In order:

1. **Right**: within ``RTOL`` of the right gradient in every case, relative to the case's scale
   (its largest entry or its largest term, whichever is larger: where terms cancel, as
   LayerNorm's do at C = 1, a right answer is 0 up to the terms' round-off). In float64 two
   right formulas written in different orders differ by about 1e-16 of that scale; a float32
   slip is about 1e-7.
2. **Another gradient**: the right one of another gradient the backward returns (returned in
   the wrong order).
3. **Shape**: the right one transposed (a 2-D gradient whose transpose is right, whatever its
   shape), then a wrong shape (and whether summing it over its leading axes would be right).
4. **A named mistake**: equal (to ``RTOL``) to one of the classic mistakes of the layer.
5. **A combination of the named terms**: yours, each case divided by its scale, is fitted by
   least squares as ``sum_i f_i term_i``; when the fit leaves less than ``FIT_RTOL`` of the
   error (yours - right), a factor 0 is a dropped term, -1 a sign flip, 2 a term counted
   twice; every factor equal is the whole gradient scaled ("twice the right one").
6. **Terms times a number of the case** (the layer's ``factors``: C, 1/N, sqrt(hs)), which
   changes from case to case, so no factor of step 5 fits: the same fit with some of the terms
   multiplied by that number, each set of terms in turn, kept when every factor is one of
   ``NICE``: "term 2 is multiplied by C: a sum over the C features where a mean belongs",
   "your dweight is the right one multiplied by 1/N".
7. Otherwise: no such explanation, and the case where it is wrong when it is right in every
   other.

Every wrong verdict starts with the largest error and where it is.
"""
from __future__ import annotations

import itertools

import numpy as np

RTOL = 1e-9       # right: error <= RTOL * scale in every case
FIT_RTOL = 1e-6   # a fit explains the error when the residual is <= FIT_RTOL * |error|


def scale_of(right, terms):
    """The case's scale: the largest entry of the right gradient or of any of its terms (1 if
    all are 0)."""
    s = max([np.abs(right).max(initial=0.0)] + [np.abs(a).max(initial=0.0) for *_, a in terms])
    return float(s) or 1.0


def errors(a, b):
    """``|a - b|``, 0 where both are the same infinity or both NaN."""
    with np.errstate(invalid="ignore"):
        d = np.abs(a - b)
    return np.where((a == b) | (np.isnan(a) & np.isnan(b)), 0.0, d)


def close(a, b, scale):
    """Whether ``a`` equals ``b`` to ``RTOL`` of ``scale`` at every entry (NaN is not close)."""
    return a.shape == b.shape and bool(np.all(errors(a, b) <= RTOL * scale))


def _index(name, idx):
    return f"{name}[{', '.join(str(int(i)) for i in idx)}]" if idx else name


def _worst(name, yours, right, scales, labels):
    """'wrong: largest error E at dx[i, j] of <case> (yours Y, right R)', the worst entry
    relative to its case's scale."""
    best = None
    for y, r, s, label in zip(yours, right, scales, labels):
        e = errors(y, r)
        rank = np.where(np.isnan(e), np.inf, e) / s     # a NaN is the worst error
        i = np.unravel_index(np.argmax(rank), e.shape)
        if best is None or rank[i] > best[0]:
            best = (rank[i], e[i], i, y, r, label)
    _, e, i, y, r, label = best
    return (f"wrong: largest error {e:.3g} at {_index(name, i)} of {label} "
            f"(yours {y[i]:.6g}, right {r[i]:.6g})")


NICE = (0.0, 1.0, -1.0, 2.0, 0.5, 3.0, -2.0, 1.5)   # factors a mistake gives


def _factor(f):
    """A fitted factor, rounded to a value of ``NICE`` it is within 1e-6 of."""
    return next((nice for nice in NICE if abs(f - nice) < 1e-6), f)


def _whole(name, f):
    how = {0.0: "0 everywhere", -1.0: "the right one with the wrong sign",
           2.0: "twice the right one", 0.5: "half the right one"}
    return f"your {name} is {how.get(f, f'{f:.4g} times the right one')}"


def _term(i, formula, meaning):
    return f"term {i}, {formula}" + (f" ({meaning})" if meaning else "")


def explain_fit(name, factors, terms, scaled=(), symbol="", meaning=""):
    """The sentence for ``yours = sum_i factors[i] * term_i``, each term of ``scaled`` (their
    indices) multiplied by ``symbol`` too; ``meaning`` says what that factor does."""
    def by(f):
        return symbol if f == 1.0 else f"{f:.4g} * {symbol}"
    why = f": {meaning}" if scaled else ""
    if len(set(factors)) == 1 and len(scaled) in (0, len(factors)):
        return (f"your {name} is the right one multiplied by {by(factors[0])}" if scaled else
                _whole(name, factors[0])) + why
    changed = [(i, f, t) for i, (f, t) in enumerate(zip(factors, terms))
               if f != 1.0 or i in scaled]
    if len(changed) == 1 and changed[0][1] == 0.0:
        i, _, (formula, meaning, _) = changed[0]
        return f"your {name} is the right one without {_term(i + 1, formula, meaning)}"
    parts = []
    for i, f, (formula, term_meaning, _) in changed:
        what = f"is multiplied by {by(f)}" if i in scaled else {
            0.0: "is missing", -1.0: "has the wrong sign", 2.0: "is counted twice"}.get(
            f, f"is multiplied by {f:.4g} (it should be 1)")
        parts.append(f"{_term(i + 1, formula, term_meaning)}, {what}")
    return f"in your {name}, " + "; ".join(parts) + why


def fit(yours, right, terms, scales, scaled=(), g=None):
    """Least-squares factors ``f_i`` with ``yours ~ sum_i f_i term_i`` over every case (each case
    divided by its scale), the terms whose index is in ``scaled`` multiplied by ``g`` (one
    number per case); None when the fit leaves more than ``FIT_RTOL`` of the error or is not
    unique. ``terms[c]`` is case c's list of (formula, meaning, array)."""
    err = np.concatenate([((y - r) / s).ravel() for y, r, s in zip(yours, right, scales)])
    if not np.all(np.isfinite(err)):
        return None
    b = np.concatenate([(y / s).ravel() for y, s in zip(yours, scales)])
    g = g or [1.0] * len(scales)
    A = np.stack([np.concatenate([(t[i][2] / s * (gc if i in scaled else 1.0)).ravel()
                                  for t, s, gc in zip(terms, scales, g)])
                  for i in range(len(terms[0]))], axis=1)
    f, _, rank, _ = np.linalg.lstsq(A, b, rcond=None)
    if rank < A.shape[1] or np.linalg.norm(A @ f - b) > FIT_RTOL * np.linalg.norm(err):
        return None
    return [_factor(x) for x in f]


def diagnose(name, yours, right, terms, mistakes, labels, factors=None, others=None):
    """The verdict on gradient ``name`` as lines of text; the first says right or wrong.

    Args:
        name: "dx", "dweight", ...
        yours, right: one array per case (the learner's, the layer's own).
        terms: per case, the named terms [(formula, meaning, array)] that sum to ``right``.
        mistakes: per case, [(what the mistake does, the gradient it gives)].
        labels: per case, its description ("x (2, 3, 6)").
        factors: per case, [(symbol, meaning, value)]: the numbers of the case a term may be
            multiplied by by mistake ("C", "a sum over the C features where a mean belongs", 6).
        others: {gradient: the right one per case} of every gradient the backward returns, in
            its order (to see gradients returned in the wrong order).

    Returns:
        (ok, lines): ``ok`` is True for a right gradient.
    """
    scales = [scale_of(r, t) for r, t in zip(right, terms)]
    if all(close(y, r, s) for y, r, s in zip(yours, right, scales)):
        return True, ["right"]
    for other, rights in (others or {}).items():
        if other != name and all(close(y, r, scale_of(r, [])) for y, r in zip(yours, rights)):
            return False, [f"wrong: your {name} is the right {other}: return "
                           f"({', '.join(others)}) in this order"]
    if all(y.ndim == 2 and y.T.shape == r.shape and close(y.T, r, s)
           for y, r, s in zip(yours, right, scales)):
        return False, [f"wrong: your {name} is the right one transposed: {name} has the shape "
                       f"of its input, {right[0].shape} in {labels[0]}"]
    for y, r, label in zip(yours, right, labels):
        if y.shape != r.shape:
            line = f"wrong: {name} has shape {y.shape} in {label}; it must be {r.shape}"
            n = y.ndim - r.ndim
            if n > 0 and y.shape[n:] == r.shape and all(
                    close(v.reshape(-1, *q.shape).sum(axis=0), q, s)
                    for v, q, s in zip(yours, right, scales) if v.shape[n:] == q.shape):
                line += ". Summed over its leading axes yours is right: sum over every row"
            return False, [line]
    lines = [_worst(name, yours, right, scales, labels)]
    for m, (what, _) in enumerate(mistakes[0] if mistakes else ()):
        if all(close(y, mk[m][1], s) for y, mk, s in zip(yours, mistakes, scales)):
            return False, lines + [f"your {name} {what}"]
    found = fit(yours, right, terms, scales)
    if found is not None and set(found) != {1.0}:
        return False, lines + [explain_fit(name, found, terms[0])]
    n = len(terms[0])
    for k, (symbol, meaning, _) in enumerate(factors[0] if factors else ()):
        for scaled in (c for r in range(1, n + 1) for c in itertools.combinations(range(n), r)):
            found = fit(yours, right, terms, scales, scaled, [f[k][2] for f in factors])
            if found is not None and all(f in NICE for f in found):
                return False, lines + [explain_fit(name, found, terms[0], scaled, symbol,
                                                   meaning)]
    wrong = [label for y, r, s, label in zip(yours, right, scales, labels) if not close(y, r, s)]
    lines.append(f"no combination of the terms of {name} explains it"
                 + (f"; it is wrong only in {wrong[0]}" if len(wrong) == 1 else ""))
    if not all(np.all(np.isfinite(y)) for y in yours):
        lines.append(f"your {name} has NaN or inf entries")
    else:
        worst = max(float(errors(y, r).max(initial=0.0)) / s
                    for y, r, s in zip(yours, right, scales))
        if worst < 1e-4:
            lines.append(f"it is right to {worst:.0e} of its largest entry but not to float64's "
                         f"round-off: a float32 array or a rounded constant?")
    return False, lines
