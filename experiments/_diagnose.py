"""What is wrong with a gradient, in the terms of its derivation.

``diagnose(name, yours, right, terms, mistakes, labels)`` looks at one gradient (dx, dweight,
...) over every case of a check and returns its verdict as lines of text. In order:

1. **Shape**: the right one transposed (a 2-D gradient whose transpose is right, whatever its
   shape), then a wrong shape (and whether summing it over its leading axes would be right).
2. **Right**: within ``RTOL`` of the right gradient in every case, relative to the case's scale
   (its largest entry or its largest term, whichever is larger: where terms cancel, as
   LayerNorm's do at C = 1, a right answer is 0 up to the terms' round-off). In float64 two
   right formulas written in different orders differ by about 1e-16 of that scale; a float32
   slip is about 1e-7.
3. **A named mistake**: equal (to ``RTOL``) to one of the classic mistakes of the layer.
4. **A combination of the named terms**: the error ``yours - right``, each case divided by its
   scale, is fitted by least squares as ``sum_i c_i term_i``; when the fit leaves less than
   ``FIT_RTOL`` of the error, your gradient is ``sum_i (1 + c_i) term_i``: a factor 0 is a
   dropped term, -1 a sign flip, 2 a term counted twice; every factor equal is the whole
   gradient scaled ("twice the right one").
5. Otherwise: no such explanation, and the cases where it is right and wrong.

Every wrong verdict starts with the largest error and where it is.
"""
from __future__ import annotations

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


def _factor(f):
    """A fitted factor, rounded to a value it is within 1e-6 of (0, -1, 2, 0.5, ...)."""
    for nice in (0.0, 1.0, -1.0, 2.0, 0.5, 3.0, -2.0, 1.5):
        if abs(f - nice) < 1e-6:
            return nice
    return f


def _whole(name, f):
    how = {0.0: "0 everywhere", -1.0: "the right one with the wrong sign",
           2.0: "twice the right one", 0.5: "half the right one"}
    return f"your {name} is {how.get(f, f'{f:.4g} times the right one')}"


def _term(i, formula, meaning):
    return f"term {i}, {formula}" + (f" ({meaning})" if meaning else "")


def explain_fit(name, factors, terms):
    """The sentence for ``yours = sum_i factors[i] * term_i``."""
    if len(set(factors)) == 1:
        return _whole(name, factors[0])
    changed = [(i, f, t) for i, (f, t) in enumerate(zip(factors, terms), 1) if f != 1.0]
    if len(changed) == 1 and changed[0][1] == 0.0:
        i, _, (formula, meaning, _) = changed[0]
        return f"your {name} is the right one without {_term(i, formula, meaning)}"
    parts = []
    for i, f, (formula, meaning, _) in changed:
        what = {0.0: "is missing", -1.0: "has the wrong sign", 2.0: "is counted twice"}.get(
            f, f"is multiplied by {f:.4g} (it should be 1)")
        parts.append(f"{_term(i, formula, meaning)}, {what}")
    return f"in your {name}, " + "; ".join(parts)


def fit(yours, right, terms, scales):
    """Least-squares factors ``f_i`` with ``yours ~ sum_i f_i term_i`` over every case (each
    case divided by its scale), or None when the fit leaves more than ``FIT_RTOL`` of the
    error. ``terms[c]`` is case c's list of (formula, meaning, array)."""
    err = np.concatenate([((y - r) / s).ravel() for y, r, s in zip(yours, right, scales)])
    if not np.all(np.isfinite(err)):
        return None
    A = np.stack([np.concatenate([(t[i][2] / s).ravel() for t, s in zip(terms, scales)])
                  for i in range(len(terms[0]))], axis=1)
    c = np.linalg.lstsq(A, err, rcond=None)[0]
    if np.linalg.norm(A @ c - err) > FIT_RTOL * np.linalg.norm(err):
        return None
    return [_factor(1.0 + ci) for ci in c]


def diagnose(name, yours, right, terms, mistakes, labels):
    """The verdict on gradient ``name`` as lines of text; the first says right or wrong.

    Args:
        name: "dx", "dweight", ...
        yours, right: one array per case (the learner's, the layer's own).
        terms: per case, the named terms [(formula, meaning, array)] that sum to ``right``.
        mistakes: per case, [(what the mistake does, the gradient it gives)].
        labels: per case, its description ("x (2, 3, 6)").

    Returns:
        (ok, lines): ``ok`` is True for a right gradient.
    """
    scales = [scale_of(r, t) for r, t in zip(right, terms)]
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
    if all(close(y, r, s) for y, r, s in zip(yours, right, scales)):
        return True, ["right"]
    lines = [_worst(name, yours, right, scales, labels)]
    for m, (what, _) in enumerate(mistakes[0] if mistakes else ()):
        if all(close(y, mk[m][1], s) for y, mk, s in zip(yours, mistakes, scales)):
            return False, lines + [f"your {name} {what}"]
    factors = fit(yours, right, terms, scales)
    if factors is not None and set(factors) != {1.0}:
        return False, lines + [explain_fit(name, factors, terms[0])]
    wrong = [label for y, r, s, label in zip(yours, right, scales, labels) if not close(y, r, s)]
    lines.append(f"no combination of the terms of {name} explains it"
                 + ("" if len(wrong) == len(labels) else
                    f"; it is wrong only in {', '.join(wrong)}"))
    if not all(np.all(np.isfinite(y)) for y in yours):
        lines.append(f"your {name} has NaN or inf entries")
    else:
        worst = max(float(errors(y, r).max(initial=0.0)) / s
                    for y, r, s in zip(yours, right, scales))
        if worst < 1e-4:
            lines.append(f"it is right to {worst:.0e} of its largest entry but not to float64's "
                         f"round-off: a float32 array or a rounded constant?")
    return False, lines
