"""What is wrong with a gradient, in the words of its derivation.

``diagnose`` takes one gradient over every case of a check and says, in this order: right
(within ``RTOL`` of each case's scale); another gradient's right value (exchanged with it: an
order mistake; or "a copy of its formula?" when that one is right); its last two axes swapped,
the right values in another shape, a wrong shape (and which axes it was summed over); the named
terms with factors of ``NICE`` (a term left out, a sign, counted twice); one thing of the
derivation changed (``terms.variants``: a quantity left out, another in its place, two
exchanged; another layer's backward; a quantity inverted, squared, its square root, put through
a function of the forward; an index shifted; a reduction over another axis or with a factor
moved across it); terms times a size of the case (C, 1/N, sqrt(hs), N/B); one of those changes
in some terms only; the terms with any factors (a rounded constant); a number per case; terms
times the size of another axis (C/shape[0]) or times a quantity of the derivation; some terms
times a number per case. Each is fitted by least squares over every case at once, each case
judged on its own and scaled by its own size (one case 1e9 times larger does not hide a clean
fit), and is said only when it explains the error to round-off (``FIT_RTOL``) in every case;
otherwise the plain message stays: a vague message is right, a wrong name never is.
"""
import itertools

import numpy as np

RTOL = 1e-9       # right: error <= RTOL * scale in every case
FIT_RTOL = 1e-6   # a fit explains the error when the residual is <= FIT_RTOL * |error|
NICE = (0.0, 1.0, -1.0, 2.0, 0.5, -0.5, 3.0, 1 / 3, 1.5, -2.0, 4.0, 0.25)
WHOLE = {0.0: "0 everywhere", -1.0: "the right one with the wrong sign",
         2.0: "twice the right one", 0.5: "half the right one"}
PART = {0.0: ("is missing", "are missing"), -1.0: ("has the wrong sign", "have the wrong sign"),
        2.0: ("is counted twice", "are counted twice")}


def scale_of(right, terms):
    """A case's scale: the largest entry of the right gradient or of its terms (1 if all 0)."""
    return float(max([np.abs(right).max(initial=0)] + [np.abs(a).max(initial=0)
                                                        for _, a in terms])) or 1.0


def errors(a, b):
    """``|a - b|``, 0 where both are the same infinity or both NaN."""
    with np.errstate(invalid="ignore"):
        return np.where((a == b) | (np.isnan(a) & np.isnan(b)), 0.0, np.abs(a - b))


def close(a, b, scale):
    """Whether ``a`` equals ``b`` to ``RTOL`` of ``scale`` at every entry (NaN is not close)."""
    return a.shape == b.shape and bool(np.all(errors(a, b) <= RTOL * scale))


def worst(name, yours, right, scales, labels):
    """'largest error E at dx[i, j] of <case> (yours Y, right R)', the worst entry relative to
    its case's scale (a NaN is the worst)."""
    rank = [np.where(np.isnan(e), np.inf, e) / s for e, s in
            zip(map(errors, yours, right), scales)]
    c = max(range(len(rank)), key=lambda c: rank[c].max(initial=0))
    i = np.unravel_index(np.argmax(rank[c]), rank[c].shape)
    at = f"{name}[{', '.join(map(str, i))}]" if i else name
    return (f"largest error {errors(yours[c], right[c])[i]:.3g} at {at} of {labels[c]} (yours "
            f"{yours[c][i]:.6g}, right {right[c][i]:.6g})")


def number(f, constants=None):
    """A factor, with the digits that tell it from the nearest value of ``NICE``; what it is
    when it is a constant of ``constants`` or its inverse; "a rounded constant?" near a simple
    value."""
    near = min(NICE[1:], key=lambda n: abs(f - n))
    if f in NICE:
        return "1/3" if f == 1 / 3 else f"{f:g}"
    if abs(f - round(f)) <= 1e-9 * abs(f):
        return str(round(f))
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
    def by(f, i):
        return (symbol if f == 1 else f"{number(f)} * {symbol}") if i in scaled else number(
            f, constants)
    why = f": {meaning}" if scaled and meaning else ""
    if len(set(factors)) == 1 and len(scaled) in (0, len(factors)):
        f = factors[0]
        return f"your {g} is " + (WHOLE[f] if f in WHOLE and not scaled else
                                  f"the right one multiplied by {by(f, 0)}{why}")
    changed = [i for i, f in enumerate(factors) if f != 1 or i in scaled]
    if changed == [changed[0]] and factors[changed[0]] == 0:
        return f"your {g} is the right one without term {changed[0] + 1}, {labels[changed[0]]}"
    groups = {}
    for i in changed:
        f = factors[i]
        groups.setdefault(PART[f] if f in PART and i not in scaled else tuple(
            f"{w} multiplied by {by(f, i)}" for w in ("is", "are")), []).append(i)
    return f"in your {g}, " + "; ".join(", and ".join(f"term {i + 1}, {labels[i]}" for i in ids)
                                        + f", {what[len(ids) > 1]}"
                                        for what, ids in groups.items()) + why


def fit(yours, right, columns, scales):
    """Least-squares factors ``f_i`` with ``yours ~ sum_i f_i columns_i`` over every case, one
    within 1e-9 of ``NICE`` taken as it; None when the fit is not unique, or leaves more than
    ``FIT_RTOL`` of the error in some case (and more than ``RTOL`` of its scale: a case it
    leaves right). Each case is divided by its scale, or by its largest entry of yours or of a
    column where that is larger, so that one case far larger than the others (|x| = 1000)
    does not decide the fit alone and hide a clean answer."""
    if not all(np.all(np.isfinite(a)) for a in [*yours, *right, *(x for c in columns for x in c)]):
        return None
    scales = [max([s, np.abs(y).max(initial=0)] + [np.abs(x).max(initial=0) for x in c])
              for y, c, s in zip(yours, columns, scales)]
    b = np.concatenate([(y / s).ravel() for y, s in zip(yours, scales)])
    A = np.stack([np.concatenate([(c[i] / s).ravel() for c, s in zip(columns, scales)])
                  for i in range(len(columns[0]))], axis=1)
    f, _, rank, _ = np.linalg.lstsq(A, b, rcond=None)
    if rank < A.shape[1]:
        return None
    ends = np.cumsum([0] + [y.size for y in yours])
    for y, r, s, i, j in zip(yours, right, scales, ends, ends[1:]):   # judged case by case
        left = np.linalg.norm(A[i:j] @ f - b[i:j])
        if left > FIT_RTOL * np.linalg.norm((y - r) / s) + RTOL * np.sqrt(y.size):
            return None
    return [next((n for n in NICE if abs(x - n) <= 1e-9), float(x)) for x in f]


def size_factors(sizes):
    """(symbol, meaning, value per case) of each size of the cases (``{"C features": 6}``), its
    inverse, square root and inverse square root, and each ratio of two; a value that is the
    same in every case, or that of one before it, left out."""
    found, kept = [], []
    for n in sizes[0]:
        s, v = n.split()[0], np.array([c[n] for c in sizes], float)
        found += [(s, f"a sum over the {n} where a mean belongs", v),
                  (f"1/{s}", f"a mean over the {n} where a sum belongs", 1 / v),
                  (f"sqrt({s})", f"a 1/sqrt({s}) left out", np.sqrt(v)),
                  (f"1/sqrt({s})", f"a 1/sqrt({s}) too many: a division by {s} where sqrt({s}) "
                                   f"belongs?", 1 / np.sqrt(v))]
    for a, b in itertools.permutations(sizes[0], 2):
        found.append((f"{a.split()[0]}/{b.split()[0]}", f"a mean over the {b} where a mean over "
                      f"the {a} belongs", np.array([c[a] / c[b] for c in sizes], float)))
    for sym, meaning, v in found:
        if np.ptp(v) > 0 and not any(np.allclose(v, k[2], rtol=1e-12) for k in kept):
            kept.append((sym, meaning, v))
    return kept


def _broadcasts(shape, to):
    """Whether an array of ``shape`` broadcasts to ``to`` without changing it."""
    try:
        return np.broadcast_shapes(shape, to) == to
    except ValueError:
        return False


def axis_sizes(right):
    """Per case the sizes of the gradient's axes 0, 1 and -2 (those every case has), named as
    ``size_factors`` reads them: a count read from another axis (``shape[0]`` for C)."""
    ks = [k for k in (0, 1, -2) if all(r.ndim > (k if k >= 0 else -k - 1) for r in right)]
    return [{f"shape[{k}] entries of axis {k}": r.shape[k] for k in ks} for r in right]


def _other(g, yours, others):
    """Yours is another gradient's right value: exchanged with it, or a copy of its formula."""
    def same(a, b):
        return all(close(x, y, scale_of(y, [])) for x, y in zip(a, b))
    for h, (theirs, right) in others.items():
        if h != g and same(yours, right):
            if same(theirs, others[g][1]):
                return (f"your {g} is the right {h}, and your {h} the right {g}: return "
                        f"({', '.join(others)}) in this order")
            return f"your {g} equals the right {h}" + ": a copy of its formula?" * same(theirs, right)
    return None


def _axes_named(ks, ndim, axes):
    """Axes ``ks`` of an array of ``ndim`` axes by their letters (``axes``, those of the last
    ones): "the B and H axes", "its leading axes (every row)", "axis 0"."""
    letters = axes.split()
    lead = ndim - len(letters)
    if letters and lead and set(ks) == set(range(lead)):
        return "its leading axes (every row)"
    named = [letters[k - lead] for k in ks if k >= lead]
    return ", ".join([f"axis {k}" for k in ks if k < lead] + [
        f"the {' and '.join(named)} ax{'es' if len(named) > 1 else 'is'}"] * bool(named))


def _summed(yours, right, scales, axes):
    """How yours is the right one summed over some axes (kept as size 1 or not) in every case
    where its shape is wrong, the same axes by name in each (right elsewhere); or None.
    ``axes``: the letters of the last axes, or per case its letters (softmax's C is its axis).
    A sum has two names, by letter and by number ("its leading axes (every row)", "axis 0"):
    it is said by the first that every case shares."""
    per_case = []
    for y, r, s, axes in zip(yours, right, scales, [axes] * len(right) if isinstance(
            axes, str) else axes):
        if y.shape == r.shape and close(y, r, s):
            continue
        found = {}   # name -> (axes, kept)
        for n in range(1, r.ndim + 1):   # the fewest axes: one of size 1 kept changes nothing
            if found:
                break
            for ks in itertools.combinations(range(r.ndim), n):
                for keep in (False, True):
                    t = r.sum(axis=ks, keepdims=keep)
                    if t.shape == y.shape and close(y, t, max(s, float(np.abs(t).max(initial=0)))):
                        for name in (_axes_named(ks, r.ndim, axes), _axes_named(ks, r.ndim, "")):
                            found.setdefault(name + ", kept as size 1" * keep, (ks, keep))
        per_case.append(found)
    common = [n for n in per_case[0] if all(n in f for f in per_case)] if per_case else []
    one = common and all(len({f[n] for n in common}) == 1 for f in per_case)   # one sum
    return common[0] if one else None


def _shape(g, yours, right, scales, labels, axes=""):
    swapped = [np.swapaxes(y, -1, -2) if y.ndim >= 2 else y for y in yours]
    if all(y.ndim >= 2 and close(t, r, s) for y, t, r, s in zip(yours, swapped, right, scales)):
        return (f"your {g} is the right one transposed (its last two axes): {g} has the shape of "
                f"its input, {right[0].shape} in {labels[0]}")
    for y, r, label in zip(yours, right, labels):
        if y.shape != r.shape:
            n, line = y.ndim - r.ndim, f"{g} has shape {y.shape} in {label}; it must be {r.shape}"
            if all(v.size == q.size and close(v.reshape(q.shape), q, s)
                   for v, q, s in zip(yours, right, scales)):
                return line + ": the values are right (keepdims=True, or a reshape left out?)"
            if n > 0 and y.shape[n:] == r.shape and all(
                    close(v.reshape(-1, *q.shape).sum(axis=0), q, s)
                    for v, q, s in zip(yours, right, scales) if v.shape[n:] == q.shape):
                return line + ". Summed over its leading axes yours is right: sum over every row"
            summed = _summed(yours, right, scales, axes)
            return line + (f": yours is the right one summed over {summed}" if summed else "")
    return None


def _matches(yours, variant, right, scales):
    """Yours is ``variant`` (to RTOL of the larger scale) wherever that is finite, and the same
    NaN or inf elsewhere but at no more than half the entries (0/0 where eps is left out at
    C = 1, which yours may guard), and the variant is not right."""
    ok = [np.isfinite(v) for v in variant]
    if 2 * sum(np.sum(~f & (errors(y, v) != 0)) for y, v, f in zip(yours, variant, ok)) > sum(
            f.size for f in ok):
        return False
    sc = [max(s, float(np.abs(v[f]).max(initial=0))) for v, f, s in zip(variant, ok, scales)]
    return all(np.all(errors(y[f], v[f]) <= RTOL * s) for y, v, f, s in zip(yours, variant, ok, sc)) \
        and not all(np.all(errors(r[f], v[f]) <= RTOL * s) for r, v, f, s in zip(right, variant, ok, sc))


def _some_terms(g, yours, right, terms, scales, labels, phrase, changed_terms):
    """Yours with ``phrase`` true of some of the terms (the others right or missing), or None."""
    n = len(terms[0])
    changed = [i for i in range(n) if not all(close(v[i][1], t[i][1], s) for t, v, s in
                                              zip(terms, changed_terms, scales))]
    f = changed and fit(yours, right, [[a for _, a in t] + [v[i][1] for i in changed]
                                       for t, v in zip(terms, changed_terms)], scales)
    if not f or any(x not in (0, 1) for x in f) or 1 not in f[n:] or any(
            f[i] + f[n + k] > 1 for k, i in enumerate(changed)):   # each term right, changed
        return None                                                # or missing
    ids = [i for k, i in enumerate(changed) if f[n + k] == 1]
    gone = [i for i in range(n) if f[i] == 0 and i not in ids]
    return f"in your {g}, " + ", and ".join(f"term {i + 1}, {labels[i]}" for i in ids) + (
        f", {'each ' * (len(ids) > 1)}{phrase}") + "".join(
        f"; term {i + 1}, {labels[i]}, is missing" for i in gone)


def _ratios(yours, right, scales, labels):
    """'yours x 4 = right at <case>; x 3 at <case>' when yours is right times a number per case,
    not the same in every case."""
    found = []
    for y, r, s, label in zip(yours, right, scales, labels):
        rr = float(np.vdot(r, r))
        c = float(np.vdot(y, r)) / rr if rr else 1.0   # a right gradient of 0: yours is 0 too
        if c == 0 or not np.all(errors(y, c * r) <= RTOL * s * max(1.0, abs(c))):
            return None
        found += [(1 / c, label)] * (abs(c - 1) > 1e-9)
    return "; ".join(f"{'yours ' * (i == 0)}x {number(k)}{' = right' * (i == 0)} at {label}"
                     for i, (k, label) in enumerate(found)) \
        if len({round(k, 9) for k, _ in found}) > 1 else None


def _per_case(g, yours, right, terms, scales, labels, names, subsets):
    """'in your dx, term 2 ..., is multiplied by 3 at <case>; by 6 at <case>' when some of the
    terms (not all: ``_ratios``) are multiplied by one number per case, not the same in every
    case, the others right."""
    for ids in subsets[:-1]:
        found = []
        for y, r, t, s, label in zip(yours, right, terms, scales, labels):
            part = sum(t[i][1] for i in ids)
            rest, pp = y - (r - part), float(np.vdot(part, part))
            c = float(np.vdot(rest, part)) / pp if pp else None
            if not np.all(errors(rest, (c or 0) * part) <= RTOL * s * max(1.0, abs(c or 0))):
                break
            found += [(c, label)] * (c is not None and abs(c - 1) > 1e-9)
        else:
            if len({round(c, 9) for c, _ in found}) > 1:
                return (f"in your {g}, " + ", and ".join(f"term {i + 1}, {names[i]}" for i in ids)
                        + f", {'are' if len(ids) > 1 else 'is'} multiplied by a number per case: "
                        + "; ".join(f"{number(c)} at {label}" for c, label in found))
    return None


def diagnose(g, yours, right, terms, labels, sizes, variants=(), others=None, constants=None,
             axes="", quantities=()):
    """The verdict on gradient ``g``: (ok, lines), the first line "right" or "wrong: ...".

    Args:
        g: "dx", "dweight", ...
        yours, right: one float64 array per case (the learner's, the layer's own).
        terms: per case, the named terms ``[(label, array)]`` that sum to ``right``.
        labels: per case, its description ("x (2, 3, 6)"); sizes: per case, ``{"C features": 6}``.
        variants: (what changed, per case its terms of ``g``: the changed terms, or one array,
            another layer's gradient), read only as far as needed.
        others: ``{gradient: (yours, right)}`` of every gradient of the backward, in its order.
        constants: ``{"k = sqrt(2/pi)": value}``, the formulas' constants.
        axes: the letters of the gradient's last axes ("B H T hs"), or per case its letters,
            for a shape.
        quantities: (name, per case its array), the derivation's, that may multiply a term.
    """
    scales = [scale_of(r, t) for r, t in zip(right, terms)]
    if all(close(y, r, s) for y, r, s in zip(yours, right, scales)):
        return True, ["right"]
    said = _other(g, yours, others or {}) or _shape(g, yours, right, scales, labels, axes)
    if said:
        return False, ["wrong: " + said]
    names, columns = [label for label, _ in terms[0]], [[a for _, a in t] for t in terms]
    first = ["wrong: " + worst(g, yours, right, scales, labels)]
    f = fit(yours, right, columns, scales)
    if f is not None and all(x in NICE for x in f):
        return False, first + [explain(g, f, names)]
    variants = list(variants)
    for phrase, vt in variants:
        if _matches(yours, [sum(a for _, a in t) for t in vt], right, scales):
            return False, first + [f"your {g} {phrase}"]
    subsets = [c for k in range(1, len(names) + 1)
               for c in itertools.combinations(range(len(names)), k)]

    def times(factors, ok):
        """Some terms times a factor (symbol, meaning, per case its value), the factors ``ok``."""
        for symbol, meaning, values in factors:
            for scaled in subsets:
                fs = fit(yours, right, [[a * (v if i in scaled else 1) for i, a in enumerate(c)]
                                        for c, v in zip(columns, values)], scales)
                if fs is not None and ok(fs, scaled):
                    return explain(g, fs, names, scaled, symbol, meaning)
        return None
    known = size_factors(sizes)
    said = times(known, lambda fs, scaled: all(x in NICE for x in fs) and all(
        fs[i] for i in scaled)) or next(filter(None, (
            _some_terms(g, yours, right, terms, scales, names, *v) for v in variants
            if " exchanged" not in v[0] and len(v[1][0]) == len(names))), None) or (
        explain(g, f, names, constants=constants) if f is not None else
        _ratios(yours, right, scales, labels))
    if said:
        return False, first + [said]
    more = [k for k in size_factors([{**a, **b} for a, b in zip(sizes, axis_sizes(right))])
            if not any(np.allclose(k[2], o[2], rtol=1e-12) for o in known)]   # another axis's
    more += [(name, "", vs) for name, vs in quantities
             if all(_broadcasts(np.shape(v), r.shape) for v, r in zip(vs, right))]
    said = times(more, lambda fs, scaled: all(   # one mistake: those terms times it, no more
        fs[i] == 1 if i in scaled else fs[i] in (0, 1) for i in range(len(fs)))) or _per_case(
        g, yours, right, terms, scales, labels, names, subsets)
    if said:
        return False, first + [said]
    wrong = [label for y, r, s, label in zip(yours, right, scales, labels) if not close(y, r, s)]
    lines = first + [f"no single mistake in the terms of {g} explains it"
                     + (f"; it is wrong only in {wrong[0]}" if len(wrong) == 1 else "")]
    ok = [np.isfinite(y) for y in yours]
    if not all(map(np.all, ok)):
        lines.append(f"your {g} is NaN or inf " + (
            "everywhere" if not any(map(np.any, ok)) else
            "where the right one is finite, and right elsewhere" if all(
                np.all(errors(y[k], r[k]) <= RTOL * s) for y, r, k, s in
                zip(yours, right, ok, scales)) else "in places")
            + ": an exp or a power that overflows, or a 0/0?")
    return False, lines
