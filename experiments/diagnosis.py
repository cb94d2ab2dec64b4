"""What is wrong with a gradient, in the words of its derivation.

``diagnose`` looks at one gradient (dx, dweight, ...) over every case of a check and returns
its verdict as lines. A name is printed only when it explains yours to round-off (``RTOL`` of
the case's scale; a fit leaves less than ``FIT_RTOL`` of the error) in every case; otherwise
the plain message stays. In order:

1. **Right**: within ``RTOL`` of the right gradient in every case, relative to the case's scale
   (its largest entry or its largest term: where terms cancel, as LayerNorm's at C = 1, a right
   answer is 0 up to the terms' round-off).
2. **Another gradient's right value**: exchanged with it (an order mistake) when that one is
   this one's right value; "a copy of its formula?" when that one is right.
3. **Shape**: the right one with its last two axes swapped; the right values in another shape
   (keepdims); a wrong shape (and whether summing it over its leading axes would be right).
4. **The terms**: yours fitted by least squares as ``sum_i f_i term_i``, every case divided by
   its scale; each ``f_i`` one of ``NICE``: 0 a term left out, -1 a sign, 2 counted twice.
5. **One quantity changed** (``terms.variants``): left out, another in its place (the output
   for the input, ``g`` for ``h``, P without the mask), two exchanged (cos and sin).
6. **Terms times a size of the case** (``sizes``: C, 1/N, sqrt(hs), N/B), a number that
   changes from case to case: the fit of 4 with some terms multiplied by it.
7. **One quantity changed in some of the terms only** (rstd^3 in one term).
8. **The terms times any factors**: a rounded constant, 1/3, 1/k.
9. **A number per case**: yours times a number of the case is right ("x 4 at ...").
10. Otherwise the plain message, and the case where it is wrong when it is right in all others.

Every wrong verdict starts with the largest error and where it is.
"""
from __future__ import annotations

import itertools
import types

import numpy as np

RTOL = 1e-9       # right: error <= RTOL * scale in every case
FIT_RTOL = 1e-6   # a fit explains the error when the residual is <= FIT_RTOL * |error|
NICE = (0.0, 1.0, -1.0, 2.0, 0.5, -0.5, 3.0, 1 / 3, 1.5, -2.0, 4.0, 0.25)
WHOLE = {0.0: "0 everywhere", -1.0: "the right one with the wrong sign", 2.0: "twice the right "
         "one", 0.5: "half the right one"}
PART = {0.0: ("is missing", "are missing"), -1.0: ("has the wrong sign", "have the wrong sign"),
        2.0: ("is counted twice", "are counted twice")}


class Parts(dict):
    """The quantities of one case (``Exercise.parts``): its arrays and those ``put`` in their
    place; its rules computed on first use, from these."""

    def __init__(self, raw, put=None):
        super().__init__({k: v for k, v in raw.items() if not callable(v)})
        self.update(put or {})
        self.rules = raw

    def __missing__(self, key):
        value = self[key] = self.rules[key](self)
        return value


def terms_of(ex, raw, shapes, put=None):
    """``{gradient: [(label, term)]}`` of the quantities ``raw`` (``put`` in place of some), each
    term broadcast to its gradient's shape (``shapes``)."""
    with np.errstate(all="ignore"):
        found = ex.terms(Parts(raw, put))
    return {g: [(label, np.broadcast_to(a, shapes[g])) for label, a in found[g]] for g in found}


def variants(ex, cases):
    """The derivation with one quantity changed in every case: (what changed, per case
    ``terms_of``). Another quantity of as many axes in its place (the forward's ``out`` among
    them), two exchanged, one left out (1 in its place; the identity for a function), the ones
    built from others first."""
    raws = [{**ex.parts(c.dout, c.cache), "out": c.out} for c in cases]
    values = [{k: Parts(r)[k] for k in r} for r in raws]
    keys = [k for k, v in values[0].items() if isinstance(v, (np.ndarray, np.generic, types.FunctionType))]

    def alike(a, b):
        return all((callable(v[a]), np.ndim(v[a])) == (callable(v[b]), np.ndim(v[b]))
                   for v in values)
    changes = [(f"has {b} in place of {a}", [{a: v[b]} for v in values])
               for a, b in itertools.permutations(keys, 2) if alike(a, b)]
    changes += [(f"has {a} and {b} exchanged", [{a: v[b], b: v[a]} for v in values])
                for a, b in itertools.combinations(keys, 2) if alike(a, b)]
    changes += [(f"leaves out {a}", [{a: (lambda y: y) if callable(v[a]) else np.ones_like(v[a])}
                                     for v in values]) for a in keys[::-1]]
    for what, puts in changes:
        try:
            yield what, [terms_of(ex, r, dict(zip(ex.grads, map(np.shape, c.right))), put)
                         for r, c, put in zip(raws, cases, puts)]
        except (ValueError, IndexError, TypeError):   # it does not fit where it is put
            continue


def scale_of(right, terms):
    """The case's scale: the largest entry of the right gradient or of any of its terms (1 if
    all are 0)."""
    return float(max([np.abs(right).max(initial=0)] + [np.abs(a).max(initial=0)
                                                        for _, a in terms])) or 1.0


def errors(a, b):
    """``|a - b|``, 0 where both are the same infinity or both NaN."""
    with np.errstate(invalid="ignore"):
        return np.where((a == b) | (np.isnan(a) & np.isnan(b)), 0.0, np.abs(a - b))


def close(a, b, scale):
    """Whether ``a`` equals ``b`` to ``RTOL`` of ``scale`` at every entry (NaN is not close)."""
    return a.shape == b.shape and bool(np.all(errors(a, b) <= RTOL * scale))


def _index(name, idx):
    return f"{name}[{', '.join(str(int(i)) for i in idx)}]" if idx else name


def worst(name, yours, right, scales, labels):
    """'largest error E at dx[i, j] of <case> (yours Y, right R)', the worst entry relative
    to its case's scale (a NaN is the worst)."""
    best = None
    for y, r, s, label in zip(yours, right, scales, labels):
        e = errors(y, r)
        rank = np.where(np.isnan(e), np.inf, e) / s
        i = np.unravel_index(np.argmax(rank), e.shape)
        if best is None or rank[i] > best[0]:
            best = (rank[i], e[i], i, y, r, label)
    _, e, i, y, r, label = best
    return (f"largest error {e:.3g} at {_index(name, i)} of {label} (yours {y[i]:.6g}, "
            f"right {r[i]:.6g})")


def number(f, constants=None):
    """A factor, with the digits that tell it from the nearest value of ``NICE``; what it is
    when it is a constant of ``constants`` or its inverse, or near a simple value."""
    near = min(NICE[1:], key=lambda n: abs(f - n))
    if f in NICE:
        return "1/3" if f == 1 / 3 else f"{f:g}"
    if abs(f - round(f)) <= 1e-9 * abs(f):
        return f"{round(f)}"
    text = next(t for t in (f"{f:.{d}g}" for d in range(4, 18))   # to 1% of its distance
                if abs(float(t) - f) <= 1e-2 * abs(f - near))           # from the nearest
    for name, c in (constants or {}).items():
        for value, how in ((1 / c, f"1/{name.split()[0]}: {name} left out?"),
                           (c, f"{name.split()[0]}: {name} twice?")):
            if abs(f - value) <= 1e-9 * abs(value):
                return f"{text} = {how}"
    return text + (" (a rounded constant?)" if abs(f - near) <= 1e-3 * abs(near) else "")


def explain(g, factors, labels, scaled=(), symbol="", meaning="", constants=None):
    """The sentence for ``yours = sum_i factors[i] * term_i``, the terms whose indices are in
    ``scaled`` multiplied by ``symbol`` too (``meaning``: what that does)."""
    def by(f):
        return symbol if f == 1 else f"{number(f)} * {symbol}"
    why = f": {meaning}" if scaled else ""
    if len(set(factors)) == 1 and len(scaled) in (0, len(factors)):
        f = factors[0]
        return f"your {g} is " + (f"the right one multiplied by {by(f)}{why}" if scaled else
                                  WHOLE.get(f, f"the right one multiplied by {number(f, constants)}"))
    changed = [i for i, f in enumerate(factors) if f != 1 or i in scaled]
    if len(changed) == 1 and factors[changed[0]] == 0:
        return f"your {g} is the right one without term {changed[0] + 1}, {labels[changed[0]]}"
    groups = {}
    for i in changed:
        f = factors[i]
        what = (("is multiplied by", "are multiplied by") if i in scaled or f not in PART
                else PART[f])
        what = tuple(w + (f" {by(f)}" if i in scaled else f" {number(f, constants)}"
                          if f not in PART else "") for w in what)
        groups.setdefault(what, []).append(i)
    parts = [", and ".join(f"term {i + 1}, {labels[i]}" for i in ids) + f", {what[len(ids) > 1]}"
             for what, ids in groups.items()]
    return f"in your {g}, " + "; ".join(parts) + why


def fit(yours, right, columns, scales):
    """Least-squares factors ``f_i`` with ``yours ~ sum_i f_i columns_i`` over every case (each
    divided by its scale), a factor within 1e-9 of one of ``NICE`` taken as it; None when the fit
    leaves more than ``FIT_RTOL`` of the error or is not unique."""
    err = np.concatenate([((y - r) / s).ravel() for y, r, s in zip(yours, right, scales)])
    b = np.concatenate([(y / s).ravel() for y, s in zip(yours, scales)])
    A = np.stack([np.concatenate([(c[i] / s).ravel() for c, s in zip(columns, scales)])
                  for i in range(len(columns[0]))], axis=1)
    if not (np.all(np.isfinite(err)) and np.all(np.isfinite(A))):
        return None
    f, _, rank, _ = np.linalg.lstsq(A, b, rcond=None)
    if rank < A.shape[1] or np.linalg.norm(A @ f - b) > FIT_RTOL * np.linalg.norm(err):
        return None
    return [next((n for n in NICE if abs(x - n) <= 1e-9), float(x)) for x in f]


def size_factors(sizes):
    """(symbol, meaning, value per case) for each size of the cases (``{"C features": 6}``),
    its inverse, square root and inverse square root, and each ratio of two; a value that is the
    same in every case, or that of one before it, left out."""
    names, found = list(sizes[0]), []
    for n in names:
        s = n.split()[0]
        v = np.array([c[n] for c in sizes], float)
        found += [(s, f"a sum over the {n} where a mean belongs", v),
                  (f"1/{s}", f"a mean over the {n} where a sum belongs", 1 / v),
                  (f"sqrt({s})", f"a 1/sqrt({s}) left out", np.sqrt(v)),
                  (f"1/sqrt({s})", f"a 1/sqrt({s}) too many: a division by {s} where sqrt({s}) "
                                   f"belongs?", 1 / np.sqrt(v))]
    for a, b in itertools.permutations(names, 2):
        found.append((f"{a.split()[0]}/{b.split()[0]}", f"a mean over the {b} where a mean over "
                      f"the {a} belongs", np.array([c[a] / c[b] for c in sizes], float)))
    kept = []
    for sym, meaning, v in found:
        if np.ptp(v) > 0 and not any(np.allclose(v, k[2], rtol=1e-12) for k in kept):
            kept.append((sym, meaning, v))
    return kept


def _other(g, yours, others):
    """Yours equals another gradient's right value: exchanged, copied, or just equal."""
    def same(a, b):
        return all(close(x, y, scale_of(y, [])) for x, y in zip(a, b))
    names = list(others)
    for h in names:
        if h != g and same(yours, others[h][1]):
            if same(others[h][0], others[g][1]):
                return (f"your {g} is the right {h}, and your {h} the right {g}: return "
                        f"({', '.join(names)}) in this order")
            return f"your {g} equals the right {h}" + (
                ": a copy of its formula?" if same(*others[h]) else "")
    return None


def _shape(g, yours, right, scales, labels):
    if all(y.ndim >= 2 and np.swapaxes(y, -1, -2).shape == r.shape and
           close(np.swapaxes(y, -1, -2), r, s) for y, r, s in zip(yours, right, scales)):
        return (f"your {g} is the right one transposed (its last two axes): {g} has the shape of "
                f"its input, {right[0].shape} in {labels[0]}")
    for y, r, label in zip(yours, right, labels):
        if y.shape != r.shape:
            line = f"{g} has shape {y.shape} in {label}; it must be {r.shape}"
            n = y.ndim - r.ndim
            if all(v.size == q.size and close(v.reshape(q.shape), q, s)
                   for v, q, s in zip(yours, right, scales)):
                line += ": the values are right (keepdims=True, or a reshape left out?)"
            elif n > 0 and y.shape[n:] == r.shape and all(
                    close(v.reshape(-1, *q.shape).sum(axis=0), q, s)
                    for v, q, s in zip(yours, right, scales) if v.shape[n:] == q.shape):
                line += ". Summed over its leading axes yours is right: sum over every row"
            return line
    return None


def _matches(yours, variant, right, scales):
    """Yours equals ``variant`` (to RTOL of the larger of the two scales) at every entry where
    the variant is finite (a 0/0 there: eps left out at C = 1), and the variant is not right."""
    finite = [np.isfinite(v) for v in variant]
    if sum(f.sum() for f in finite) * 2 < sum(f.size for f in finite):
        return False
    sc = [max(s, float(np.abs(np.where(f, v, 0)).max(initial=0))) for v, f, s in
          zip(variant, finite, scales)]
    return (all(np.all(errors(y[f], v[f]) <= RTOL * s) for y, v, f, s in
                zip(yours, variant, finite, sc)) and
            not all(np.all(errors(r[f], v[f]) <= RTOL * s) for r, v, f, s in
                    zip(right, variant, finite, sc)))


def _some_terms(g, yours, right, terms, scales, labels, phrase, changed_terms):
    """Yours with ``phrase`` true of some of the terms (the others right), or None."""
    n = len(terms[0])
    changed = [i for i in range(n) if not all(close(v[i][1], t[i][1], s) for t, v, s in
                                              zip(terms, changed_terms, scales))]
    if not changed:
        return None
    f = fit(yours, right, [[a for _, a in t] + [v[i][1] for i in changed]
                           for t, v in zip(terms, changed_terms)], scales)
    if f is None or any(f[i] != 1 for i in range(n) if i not in changed) or not all(
            (f[i], f[n + k]) in ((1, 0), (0, 1)) for k, i in enumerate(changed)):
        return None
    ids = [i for k, i in enumerate(changed) if f[n + k] == 1]
    return f"in your {g}, " + ", and ".join(f"term {i + 1}, {labels[i]}" for i in ids) + (
        f", {'each ' if len(ids) > 1 else ''}{phrase}")


def _ratios(g, yours, right, scales, labels):
    """'yours x 4 = right at <case>; x 3 at <case>' when yours is right times one number per
    case, not the same in every case."""
    found = []
    for y, r, s, label in zip(yours, right, scales, labels):
        rr = float(np.vdot(r, r))
        c = float(np.vdot(y, r)) / rr if rr else 1.0   # a right gradient of 0: yours is 0 too
        if c == 0 or not np.all(errors(y, c * r) <= RTOL * s * max(1.0, abs(c))):
            return None
        found += [(1 / c, label)] * (abs(c - 1) > 1e-9)
    if len({round(k, 9) for k, _ in found}) < 2:
        return None
    return "; ".join(f"{'yours ' * (i == 0)}x {number(k)}{' = right' * (i == 0)} at {label}"
                     for i, (k, label) in enumerate(found))


def diagnose(g, yours, right, terms, labels, sizes, variants=(), others=None, constants=None):
    """The verdict on gradient ``g`` as lines of text; the first says right or wrong.

    Args:
        g: "dx", "dweight", ...
        yours, right: one float64 array per case (the learner's, the layer's own).
        terms: per case, the named terms ``[(label, array)]`` that sum to ``right``.
        labels: per case, its description ("x (2, 3, 6)").
        sizes: per case, its sizes (``{"C features": 6}``).
        variants: (what changed, per case its terms of ``g``): the derivation with one quantity
            changed (``terms.variants``), read only as far as needed.
        others: ``{gradient: (yours, right)}`` of every gradient the backward returns, in its
            order (to see gradients exchanged or copied).
        constants: ``{"k = sqrt(2/pi)": value}``, the formulas' constants.

    Returns:
        (ok, lines): ``ok`` is True for a right gradient.
    """
    scales = [scale_of(r, t) for r, t in zip(right, terms)]
    if all(close(y, r, s) for y, r, s in zip(yours, right, scales)):
        return True, ["right"]
    said = _other(g, yours, others or {}) or _shape(g, yours, right, scales, labels)
    if said:
        return False, ["wrong: " + said]
    names = [label for label, _ in terms[0]]
    columns = [[a for _, a in t] for t in terms]
    first = ["wrong: " + worst(g, yours, right, scales, labels)]
    f = fit(yours, right, columns, scales)
    if f is not None and all(x in NICE for x in f):
        return False, first + [explain(g, f, names)]
    variants = list(variants)
    for phrase, vt in variants:
        if _matches(yours, [sum(a for _, a in t) for t in vt], right, scales):
            return False, first + [f"your {g} {phrase}"]
    subsets = [c for k in range(1, len(names) + 1) for c in itertools.combinations(range(len(names)), k)]
    for symbol, meaning, values in size_factors(sizes):
        for scaled in subsets:
            fs = fit(yours, right, [[a * (v if i in scaled else 1) for i, a in enumerate(c)]
                                    for c, v in zip(columns, values)], scales)
            if fs is not None and all(x in NICE for x in fs) and all(fs[i] for i in scaled):
                return False, first + [explain(g, fs, names, scaled, symbol, meaning)]
    for phrase, vt in variants:
        said = _some_terms(g, yours, right, terms, scales, names, phrase, vt)
        if said:
            return False, first + [said]
    if f is not None:
        return False, first + [explain(g, f, names, constants=constants)]
    said = _ratios(g, yours, right, scales, labels)
    if said:
        return False, first + [said]
    wrong = [label for y, r, s, label in zip(yours, right, scales, labels) if not close(y, r, s)]
    lines = first + [f"no single mistake in the terms of {g} explains it"
                     + (f"; it is wrong only in {wrong[0]}" if len(wrong) == 1 else "")]
    finite = [np.isfinite(y) for y in yours]
    if all(np.all(errors(y[f], r[f]) <= RTOL * s) for y, r, f, s in zip(yours, right, finite, scales)):
        lines.append(f"your {g} is right where it is finite, NaN or inf elsewhere: an exp or a "
                     f"power that overflows, or a 0/0?")
    elif not all(np.all(f) for f in finite):
        lines.append(f"your {g} has NaN or inf entries (an exp that overflows, or a 0/0?)")
    else:
        e = max(float(errors(y, r).max(initial=0)) / s for y, r, s in zip(yours, right, scales))
        if e < 1e-4:
            lines.append(f"it is right to {e:.0e} of its largest entry but not to float64's "
                         f"round-off: a float32 array or a rounded constant?")
    return False, lines
