"""The first wrong line of a learner's backward: where its values leave the derivation's.

When a gradient is wrong, ``first_wrong_line`` runs the learner's backward once more on each
float64 case where a gradient is wrong, under ``sys.settrace`` restricted to the learner's
function (``record``), quietly (``quiet``: its prints and a ``breakpoint()`` acted in the check's
own run) and within the check's time limit (``guarded``, which keeps the limit for a
tracer of ours). It records each statement as it runs (a loop is one statement, its lines
together): the values it reads, before it runs, and the names it binds or changes. Those values
are compared with the derivation's for the same inputs (``Quantities``): the row's ``parts`` that
its terms read, the reductions the terms take (mean(dxhat * xhat)), each term and each sum of
terms, of either sign and divided by a part or by the scalars (dx / rstd), each gradient, the
products of two parts (dout * xhat), the cache's arrays and the values the layer's own
backward names (da, dP); equal up to
broadcasting, a ``keepdims`` and a reshape of the leading axes (``aligned``).

A statement is judged only when every value it reads is right (``_reads``): one of those (or an
array of zeros that the statement adds into: an accumulator), a module or a function, a constant
of the row, a size of the case, what the cache holds. In the order the statements ran, the first
wrong line is the first that

0. changed a gradient that was right before it into the array returned, when the value as it
   was makes every gradient right (this one whatever it reads);
1. changed an array in place through another name that a later line reads (``a = b; a *= c``
   changes b too), when b as it was (a copy) makes every gradient right;
2. reads a name that an earlier line reassigned and another line reads, when its earlier value
   (there, or from there on) makes every gradient right;
3. reads right values and binds names of the derivation (``rstd``, ``du``) to others of its
   quantities, when the named ones make every gradient right;
4. reads right values and makes a near variant of a quantity (``variants``: another axis, or a
   sum for a mean; a dropped ``keepdims``; a factor, the sign among them; a power; a transpose
   or another order of the axes; a quantity kept to be confused with it, 1 - t for 1 - t^2; the
   quantity but at some entries), when the quantity in its place makes every gradient right;
5. reads right values and makes the array returned as a gradient, wrong: not an array of zeros
   (an accumulator's start), nor a quantity of another role (returned in the wrong place), nor
   a sum of some of the gradient's terms before the return statement (a line after it may be
   missing).

6. reads right values, or values of its own made by statements where nothing was found
   (``yours``: ``d0 = dout[..., 0::2]``), and makes something that is not a quantity, when one
   edit of its code makes every gradient right (``edits``: ``np.where``'s branches swapped, a
   ``range`` one longer or shorter, a strided slice's start, ``a[:, t]`` for one entry a row, an
   operator's sign, another array in place of a NumPy call or of a name whose role is sure).
   Tried also where 4 or 5 found only the entries that differ or that the gradient is wrong:
   an edit says more.

A statement that allocates an array to be filled (``np.empty_like(x)``, ``np.zeros``) is not
judged.

"Makes every gradient right" is a run of the backward with that value put in place (``fixes``).
In 3 to 6 which value goes where must not be a guess (``_confused``, ``_Judge.unique``): the
statement reads no quantity twice, no quantity under another's name, computes no quantity a
name it reads holds, and no array it reads whose role is unsure (not named as its quantity, not
the upstream gradient or the cache's as it came) could hold another quantity and make every
gradient right. A run where a value was to change and did not (a loop that ran no time,
``dx = dx``, ``g - g.mean()`` kept nowhere) is not judged. A value that is neither a quantity nor
a near variant is passed over, and a statement that reads it is not judged. A line found in one
case must be found in every other where a line is found, and in two of them at least (one small
case alone may meet a quantity by chance); else nothing is said.

``where_it_raised``: for a backward that raises, the shapes of the arrays on the line that raised
and, for each value there that is a quantity in another shape (a dropped ``keepdims``, another
order of the axes), the shape the derivation's has.
"""
import ast
import builtins
import contextlib
import copy
import inspect
import io
import itertools
import linecache
import re
import sys
import textwrap
import time
import traceback
import types
import warnings
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

import numpy as np

from experiments.exercises import mistakes
from experiments.exercises.guard import LEARNERS, Hang, guarded
from experiments.exercises.catalogue import as_tuple
from experiments.exercises.terms import Parts, terms_of

TOL = 1e-9          # two values are equal within TOL of the larger one's largest entry
MAX_STEPS = 2000    # statements a recording follows (a loop is one)
BUDGET = 20.0       # seconds the search for a first wrong line may take, its runs together
INDENT = " " * 9
ALLOCATIONS = {f"{k}{like}" for k in ("empty", "zeros", "ones", "full") for like in ("", "_like")}


# ----------------------------------------------------------------------------- recording

def statements(fn):
    """``{line: statement}`` of a function's source, every line of a statement mapped to it: a
    loop's lines (and a compound statement's written on one line) to the loop, the header of
    another compound statement to it and its blocks' lines to their own. None for a lambda, a
    decorated function, or where the source cannot be read."""
    code = getattr(fn, "__code__", None)
    if code is None or code.co_name == "<lambda>" or hasattr(fn, "__wrapped__"):
        return None   # a decorator's wrapper: its code is not the learner's lines
    try:
        lines, first = inspect.getsourcelines(fn)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return None
    if first != code.co_firstlineno:
        return None
    if not tree.body or not isinstance(tree.body[0], ast.FunctionDef):
        return None
    table = Lines(tree)

    def visit(body):
        for s in body:
            blocks = [b for b in [getattr(s, f, None) for f in ("body", "orelse", "finalbody")]
                      + [h.body for h in getattr(s, "handlers", [])] if b]
            whole = not blocks or isinstance(s, (ast.For, ast.While, ast.FunctionDef,
                                                 ast.ClassDef)) or blocks[0][0].lineno == s.lineno
            for n in range(s.lineno, (s.end_lineno if whole else blocks[0][0].lineno - 1) + 1):
                table[n + first - 1] = s
            for b in blocks * (not whole):
                visit(b)
    visit(tree.body[0].body)
    return table


class Lines(dict):
    """``statements``' table; ``tree``, the parsed source its statements are nodes of."""

    def __init__(self, tree):
        super().__init__()
        self.tree = tree


@dataclass
class Step:
    """One statement as it ran: its ``node`` and first ``line``; the locals ``before`` and
    ``after`` it (arrays copied), the objects themselves (``objects``, ``objects_after``: which
    names are one array); what a return statement returned."""
    node: Any
    line: int
    before: Dict[str, Any]
    objects: Dict[str, Any]
    after: Optional[Dict[str, Any]] = None
    objects_after: Optional[Dict[str, Any]] = None
    returned: Any = None


@dataclass
class Run:
    """A recorded run: its ``steps``, its ``result`` or ``error`` (and the step that raised),
    the function's globals."""
    steps: List[Step]
    result: Any
    error: Optional[BaseException]
    raised: Optional[int]
    globals: Dict[str, Any]


def _snapshot(values):
    objects = dict(values)
    return {n: v.copy() if isinstance(v, np.ndarray) else v for n, v in objects.items()}, objects


def _nothing(*args, **kwargs):
    return None


@contextlib.contextmanager
def quiet():
    """The learner's code once more, silently: its prints swallowed, ``breakpoint()`` and
    ``pdb.set_trace()`` doing nothing, NumPy's warnings off (the check's own run showed them)."""
    pdb = sys.modules.get("pdb")
    saved = sys.breakpointhook, getattr(pdb, "set_trace", None)
    sys.breakpointhook = _nothing
    if pdb:
        pdb.set_trace = _nothing
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
                warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            yield
    finally:
        sys.breakpointhook = saved[0]
        if pdb:
            pdb.set_trace = saved[1]


def record(fn, table, dout, cache, fix=None):
    """A quiet run of ``fn(dout, cache)`` within the check's time limit, each statement of
    ``table`` (``statements``) recorded as it ran; ``fix(i, values)`` may change the locals
    ``values`` as step i ends (a value put in place). The ``Run``, or None when it did not end
    in time or ran more than ``MAX_STEPS`` statements."""
    code, steps, state = fn.__code__, [], {"frame": None, "raised": None, "long": False}

    def boundary(frame, node):
        values = frame.f_locals   # read once: before 3.13 each read copies the frame's locals
        if steps:                 # into it again, over what fix put there
            steps[-1].after, steps[-1].objects_after = _snapshot(values)
            if fix:
                fix(len(steps) - 1, values)
        if node is not None:
            steps.append(Step(node, frame.f_lineno, *_snapshot(values)))

    def local(frame, event, arg):
        if event == "line":
            node = table.get(frame.f_lineno)
            if node is not None and not (steps and steps[-1].node is node):
                if len(steps) >= MAX_STEPS:
                    state["long"] = True
                    return None
                boundary(frame, node)
        elif event == "exception":
            state["raised"] = len(steps) - 1
        elif event == "return":
            boundary(frame, None)
            if steps:
                steps[-1].returned = arg
        return local

    def tracer(frame, event, arg):
        if event == "call" and frame.f_code is code and state["frame"] is None:
            state["frame"] = frame
            return local
        return None

    result = error = None
    try:
        with quiet(), guarded(tracer):
            result = fn(dout, cache)
    except Hang:
        return None
    except LEARNERS as e:
        error = e
    if state["long"]:
        return None
    return Run(steps, result, error, state["raised"] if error is not None else None,
               fn.__globals__)


def _written(step):
    """The names a step bound, or whose array it changed."""
    if step.after is None:
        return []
    return [n for n, v in step.after.items() if n not in step.before
            or step.objects_after[n] is not step.objects[n]
            or isinstance(v, np.ndarray) and not _identical(v, step.before[n])]


def _identical(a, b):
    return isinstance(b, np.ndarray) and a.shape == b.shape and bool(
        np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))


# ----------------------------------------------------------------------------- the derivation

class _Logged(Parts):
    """A case's quantities, the reductions the terms take logged as (how, axis, input, output)."""

    def __init__(self, raw, log):
        super().__init__(raw)
        self.log = log

    def __getitem__(self, key):
        value = super().__getitem__(key)
        if not hasattr(value, "how"):
            return value

        def logged(a, f=value):
            out = f(a)
            self.log.append((f.how, f.axis, a, out))
            return out
        logged.how, logged.axis = value.how, value.axis
        return logged


class Quantities:
    """The derivation's values in one case. ``known``: (label, array) in the order a value is
    named by: the parts the terms read, the cache's arrays, the reductions the terms take, the
    terms and their sums (either sign), those divided by a part, the values the layer's own
    backward names, the products of two parts (dout * xhat); never an array of zeros, which says nothing of its role. ``reductions``:
    (label, how, axis, input); ``confusable``: the parts the terms do not read (1 - t, u,
    rstd^3); ``parts``: the parts named by a Python name; ``names``: those and the values
    the layer's own backward binds once and does not return (du, dh), by their names;
    ``scalars``: the cache's and the row's constants; ``sizes``: the case's; ``terms``: each
    gradient's terms."""

    def __init__(self, ex, case):
        self.ex, self.case, self.known, self.reductions, self.terms = ex, case, [], [], {}
        log = []
        p = _Logged(ex.parts(case.dout, case.cache), log)
        with np.errstate(all="ignore"):
            found = ex.terms(p)
            read = set(p.read)
            every = {k: p[k] for k in dict(p.rules)}
        arrays = {k: np.asarray(v) for k, v in every.items()
                  if isinstance(v, (np.ndarray, np.generic))}
        real = {k: v for k, v in arrays.items() if k in read}
        self.parts = {k: v for k, v in real.items() if k.isidentifier()}
        self.names = dict(self.parts)
        self.confusable = [(k, v) for k, v in arrays.items()
                           if k not in read and v.dtype.kind == "f"]
        self.scalars = [c for c in as_tuple(case.cache) if isinstance(c, (int, float))] + list(
            ex.constants.values())
        self.sizes = dict(case.sizes)
        for k, v in real.items():
            self._add(k, v)
        for i, a in enumerate(a for a in as_tuple(case.cache) if isinstance(a, np.ndarray)):
            self._add(f"the cache's array {i}", a)
        words = " ".join(label for ts in found.values() for label, _ in ts)
        with np.errstate(all="ignore"):
            for how, axis, a, out in log:
                label = f"{how}({_product(a, real, words)})"
                self.reductions.append((label, how, axis, a))
                self._add(label, out)
            self._terms(found, real)
        table = statements(ex.backward)   # the values the layer's own backward names
        run = table and record(ex.backward, table, case.dout, case.cache)
        named = {}
        for step in run.steps if run else []:
            for name in _written(step):
                if isinstance(step.after[name], np.ndarray) and step.after[name].dtype.kind == "f":
                    named.setdefault(name, []).append(step.after[name])
        for name, values in named.items():   # the last by its name, those before "as first"
            for k, v in enumerate(values):
                self._add(name if k == len(values) - 1 else f"{name} (its first value)", v)
            if len(values) == 1 and not any(_same(values[0], r) for r in case.right):
                self.names.setdefault(name, values[0])   # not dx: it holds partial sums too
        with np.errstate(all="ignore"):
            for (k1, v1), (k2, v2) in itertools.combinations(real.items(), 2):
                if v1.ndim and v2.ndim and v1.dtype.kind == v2.dtype.kind == "f" and \
                        mistakes._broadcasts(v1.shape, v2.shape):   # dout * xhat
                    self._add(f"{k2} * {k1}" if f"{k2} * {k1}" in words else f"{k1} * {k2}",
                              v1 * v2)

    def _terms(self, found, real):
        """Each gradient, its terms and their sums (of either sign), and each of those divided
        by a part or by a product of the scalar parts (dx / rstd, dlogits / (dloss * 1/N))."""
        shapes = {g: np.shape(r) for g, r in zip(self.ex.grads, self.case.right)}
        sums = []
        for g, ts in found.items():
            ts = [(label.split(" (")[0], np.broadcast_to(a, shapes[g])) for label, a in ts]
            self.terms[g] = [a for _, a in ts]
            for k in range(1, len(ts) + 1):
                for ids in itertools.combinations(range(len(ts)), k):
                    short = g if k == len(ts) else f"term{'s' * (k > 1)} " + " + ".join(
                        str(i + 1) for i in ids) + f" of {g}"
                    sums.append((short, f"{short}, {ts[ids[0]][0]}" if k == 1 < len(ts) else short,
                                 sum(ts[i][1] for i in ids)))
        scalars = [(k, v) for k, v in real.items() if v.ndim == 0 and v.dtype.kind == "f"]
        divisors = [(k, v) for k, v in real.items() if v.ndim and v.dtype.kind == "f" and v.all()]
        divisors += [(f"({' * '.join(k for k, _ in c)})" if len(c) > 1 else c[0][0],
                      np.prod([v for _, v in c])) for n in range(1, len(scalars) + 1)
                     for c in itertools.combinations(scalars, n)]
        for short, label, s in sums:
            self._add(label, s)
            self._add(f"-({short})", -s)
        for short, _, s in sums:
            short = f"({short})" if " " in short else short
            for name, f in divisors:
                if mistakes._broadcasts(np.shape(f), s.shape):
                    self._add(f"{short} / {name}", s / f)
                    self._add(f"-{short} / {name}", -s / f)

    def _add(self, label, value):
        value = np.asarray(value)
        if (value.dtype.kind in "iub" and value.size or value.dtype.kind == "f" and value.any()) \
                and all(label != k for k, _ in self.known):
            self.known.append((label, value))

    def label(self, value):
        """The label of the first quantity ``value`` holds (``aligned``), or None."""
        return next((label for label, q in self.known if _same(value, q)), None)


def _product(a, arrays, words):
    """A reduction's input by the parts it is: "dxhat", "dxhat * xhat" (in the order the terms'
    labels, ``words``, write it)."""
    for k, v in arrays.items():
        if _same(a, v):
            return k
    for (k1, v1), (k2, v2) in itertools.combinations(arrays.items(), 2):
        if v1.ndim and v2.ndim and _same(a, v1 * v2):
            return f"{k2} * {k1}" if f"{k2} * {k1}" in words else f"{k1} * {k2}"
    return "..."


def _close(a, b):
    """Whether two arrays of one shape hold the same numbers (to ``TOL``; the same NaN and inf
    count as equal)."""
    if a.dtype.kind not in "fiub" or b.dtype.kind not in "fiub":
        return False
    if a.dtype.kind in "iub" or b.dtype.kind in "iub":
        return bool(np.array_equal(a, b))
    with np.errstate(all="ignore"):
        err = mistakes.errors(a.astype(float), b.astype(float))
        scale = max(np.abs(x[np.isfinite(x)]).max(initial=0) for x in (a, b))
    return bool(np.all(err <= TOL * scale)) or scale < 1e-12 and bool(np.all(err < 1e-12))


def _strip(shape):
    return tuple(itertools.dropwhile(lambda d: d == 1, shape))


def aligned(v, q):
    """(v, q) in one shape when the learner's ``v`` is laid out as the derivation's ``q`` may
    be: the same shape, q broadcast to v's, more or fewer leading axes of size 1, or the leading
    axes reshaped; else None."""
    v, q = np.asarray(v), np.asarray(q)
    if v.shape == q.shape:
        return v, q
    if v.size == q.size and (_strip(v.shape) == _strip(q.shape)
                             or v.ndim and q.ndim and v.shape[-1] == q.shape[-1]):
        return v.reshape(q.shape), q
    if mistakes._broadcasts(q.shape, v.shape):
        return v, np.broadcast_to(q, v.shape)
    return None


def _same(v, q):
    """Whether ``v`` holds the values of ``q`` (``aligned``)."""
    pair = aligned(v, q)
    return pair is not None and _close(*pair)


def _put(q, v):
    """The derivation's ``q`` laid out as the learner's ``v``, to put in its place."""
    q = np.asarray(q, dtype=np.asarray(v).dtype)
    if q.size == np.size(v):
        return q.reshape(np.shape(v)).copy()
    return np.broadcast_to(q, np.shape(v)).copy()


# ----------------------------------------------------------------------------- near variants

POWERS = ((2, "{}^2"), (3, "{}^3"), (-1, "1/{}"), (0.5, "sqrt({})"), (-0.5, "1/sqrt({})"))


def variants(v, quantities):
    """For each quantity of which the learner's ``v`` is a near variant, (what to say, with {}
    for v's name; the kind of change and the quantity's label; the quantity to put in v's
    place; and what to say without a condition, for entries, "at [3], [4]" for "where x < 0"):
    one change before some entries (the fewest first), at most 12."""
    v = np.asarray(v)
    if v.dtype.kind != "f" or not v.size:
        return []
    found = []
    with np.errstate(all="ignore"):
        for label, q in quantities.known:
            said = q.dtype.kind == "f" and _variant(v, label, q, quantities)
            found += [said] if said else []
    for name, c in quantities.confusable:
        if _same(v, c):
            found += [(0, f"your {{}} is {name}; the derivation has {label} there",
                       "confusable " + label, _put(q, v), None) for label, q in quantities.known
                      if q.dtype.kind == "f" and aligned(v, q) is not None]
    return [f[1:] for f in sorted(found, key=lambda f: f[0])[:12]]


def _variant(v, label, q, quantities):
    """(rank, what to say, kind, q in v's place, what to say by position or None) when ``v``
    is ``q`` with one change, else None."""
    if v.size == q.size and v.ndim < q.ndim and _strip(v.shape) != _strip(q.shape):
        kept = list(q.shape)
        while len(kept) > v.ndim and 1 in kept:
            kept.remove(1)   # which axes of size 1 were dropped does not change the values
        if tuple(kept) == v.shape and _close(v.reshape(q.shape), q):
            return (0, f"your {{}} is {label} without its kept axis, {v.shape}; the "
                       f"derivation's keeps it, {q.shape}", "keepdims " + label, q.copy(), None)
    if v.ndim == q.ndim >= 2:
        for perm in itertools.permutations(range(q.ndim)):
            if perm != tuple(range(q.ndim)) and v.shape == tuple(q.shape[i] for i in perm) \
                    and _close(v, q.transpose(perm)):
                how = ("transposed (its last two axes swapped)" if perm == tuple(
                    range(q.ndim - 2)) + (q.ndim - 1, q.ndim - 2) else
                    f"with its axes in another order (np.transpose(..., {perm}))")
                return (0, f"your {{}} is {label} {how}, {v.shape}; the derivation's is "
                           f"{q.shape}", "axes " + label, q.copy(), None)
    for r_label, how, axis, a in quantities.reductions:
        for how2, axes, keep in itertools.product(("mean", "sum"), [
                c for n in range(1, a.ndim + 1) for c in itertools.combinations(range(a.ndim), n)]
                                                  + [None], (True, False)):
            r = getattr(np, how2)(a, axis=axes, keepdims=keep) if r_label == label else None
            if r is not None and _same(v, r) and not _same(r, q):
                kept = "" if keep or axes is None else ", without its kept axis"
                return (0, f"your {{}} is the {how2} {_over(axes, a.ndim)} of "
                           f"{r_label[len(how) + 1:-1]}{kept}; the derivation has {label}, the "
                           f"{how} {_over(axis, a.ndim)}", "reduction " + label, q.copy(), None)
    pair = aligned(v, q)
    if pair is None:
        return None
    w, q2 = pair
    qq = float(np.vdot(q2, q2))
    if qq and np.all(np.isfinite(q2)) and np.all(np.isfinite(w)):
        c = float(np.vdot(w, q2)) / qq
        if c and abs(c - 1) > 1e-9 and _close(w, c * q2):
            what = f"-({label}), the sign flipped" if abs(c + 1) < 1e-9 else \
                f"{label} {_factor(c, quantities.sizes)}"
            return (0, f"your {{}} is {what}; the derivation has {label}", "factor " + label,
                    _put(q, v), None)
        for name, part in quantities.parts.items():   # a factor that is a part: s, rstd
            if part.dtype.kind == "f" and part.ndim and mistakes._broadcasts(part.shape, q2.shape):
                for times, what in ((part, f"leaves out a factor {name}"),
                                    (1 / part, f"has a factor {name} too many")):
                    if np.all(np.isfinite(times)) and _close(w * times, q2):
                        return (0.5, f"your {{}} {what}: the derivation's {label} is it times "
                                     f"{name}" if what[0] == "l" else
                                f"your {{}} {what}: it is the derivation's {label} times {name}",
                                "part " + label, _put(q, v), None)
        if not np.all((q2 == 0) | (q2 == 1)):
            for p, fmt in POWERS:
                if np.all(np.isfinite(q2 ** p)) and _close(w, q2 ** p):
                    return (0, f"your {{}} is {fmt.format(label)}; the derivation has {label}",
                            "power " + label, _put(q, v), None)
    differ = ~np.isclose(w, q2, rtol=TOL, atol=TOL * max(np.abs(q2).max(initial=0), 1e-300),
                         equal_nan=True)
    if 0 < differ.sum() < differ.size:   # said by a condition, and by position
        return (1 + differ.mean(), f"your {{}} differs from the derivation's {label} "
                                   f"{_where(differ, quantities)}", "entries " + label, _put(q, v),
                f"your {{}} differs from the derivation's {label} {_at(differ)}")
    return None


def _over(axis, ndim):
    """A reduction's axes in words: "over the row (axis -1)", "over axis 0", "over every
    entry"."""
    if axis is None:
        return "over every entry"
    axes = sorted(a % ndim for a in np.atleast_1d(axis))
    if axes == [ndim - 1]:
        return "over the row (axis -1)"
    if axes == list(range(ndim - 1)) and ndim > 2:
        return "over every axis but the last"
    return f"over axis {axes[0]}" if len(axes) == 1 else \
        f"over axes {', '.join(map(str, axes[:-1]))} and {axes[-1]}"


def _where(mask, quantities):
    """Where ``mask`` is true, in words: by the sign of a part ("where x < 0"), else ``_at``."""
    for label, a in quantities.parts.items():
        if a.dtype.kind == "f" and a.shape == mask.shape and 0 < mask.sum() < mask.size:
            for sign, test in (("> 0", a > 0), ("< 0", a < 0), (">= 0", a >= 0), ("<= 0", a <= 0)):
                if np.array_equal(mask, test):
                    return f"where {label} {sign}"
    return _at(mask)


def _at(mask):
    """The entries where ``mask`` is true, in words: "in row 3 (of 4)", "at [0, 2] and 4 more
    (6 of its 20 entries)"."""
    if mask.ndim >= 2 and np.array_equal(mask.all(axis=-1), mask.any(axis=-1)):
        rows = [str(int(i[0])) if len(i) == 1 else str([int(j) for j in i])
                for i in np.argwhere(mask.any(axis=-1))]
        return f"in row{'s' * (len(rows) > 1)} {', '.join(rows)} (of {np.prod(mask.shape[:-1])})"
    at = [f"[{', '.join(str(int(j)) for j in i)}]" for i in np.argwhere(mask)]
    more = f" and {len(at) - 3} more" if len(at) > 3 else ""
    return f"at {', '.join(at[:3])}{more} ({len(at)} of its {mask.size} entries)"


def _factor(c, sizes):
    """A factor in words: a size of the case ("times C (6)", "divided by N (4)"), or a number."""
    for name, s in sizes.items():
        if np.isclose(c, s, rtol=1e-12):
            return f"times {name.split()[0]} ({s:g})"
        if np.isclose(c, 1 / s, rtol=1e-12):
            return f"divided by {name.split()[0]} ({s:g})"
    return f"times {mistakes.number(float(c))}"


# ----------------------------------------------------------------------------- judging a statement

def _names(node):
    """(reads, writes): the names a statement loads (not the array a plain subscript assignment
    only writes into, nor a loop's own variables; ``a`` of ``a += b``), the names it binds or
    assigns into."""
    parts = [node.test] if isinstance(node, ast.If) else [
        i.context_expr for i in node.items] if isinstance(node, ast.With) else [] if isinstance(
        node, ast.Try) else [node]
    if isinstance(node, ast.AugAssign):
        parts.insert(0, node.target.value if isinstance(node.target, (ast.Subscript, ast.Attribute))
                     else ast.Name(node.target.id, ast.Load()))
    into = {id(t.value) for t in getattr(node, "targets", []) if isinstance(t, ast.Subscript)}
    own = {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)} if isinstance(
        node, ast.For) else set()
    reads = []
    for n in (n for part in parts for n in ast.walk(part)):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in into \
                and n.id not in own and n.id not in reads:
            reads.append(n.id)
    writes = set()
    for t in filter(None, getattr(node, "targets", []) + [getattr(node, "target", None)]):
        while isinstance(t, (ast.Subscript, ast.Attribute)):
            t = t.value
        writes |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
    return reads, writes


def _reads(step, run, quantities, yours=None):
    """``{name: label}`` of the arrays a statement reads when every value it reads is right
    (the module's docstring), else None. ``yours``: {name: object} of values taken as right
    too (label "yours"), made by statements where nothing was found."""
    reads, writes = _names(step.node)
    changed = set(_written(step)) & (writes | set(reads))
    labels = {}
    for name in reads:
        local = name in step.before
        if yours and local and yours.get(name) is step.objects[name]:
            labels[name] = "yours"
            continue
        x = step.before[name] if local else run.globals.get(name, getattr(builtins, name, None))
        if isinstance(x, (types.ModuleType, type, str, bool, np.dtype)) or x is None or (
                callable(x) and not isinstance(x, np.ndarray)):
            continue
        if isinstance(x, np.ndarray) and (x.ndim or quantities.label(x) is not None):
            label = quantities.label(x)
            if label is None and x.dtype.kind == "f" and not x.any() and (
                    isinstance(step.node, (ast.For, ast.While)) or name in changed):
                label = "zeros"   # an accumulator's start
            if label is None:
                return None
            labels[name] = label
        elif isinstance(x, (int, float, np.number, np.ndarray)):
            if not (_scalar(name, x.item() if hasattr(x, "item") else x, quantities)
                    or quantities.label(np.asarray(x)) is not None):
                return None
        elif not (isinstance(x, tuple) and (_equal(x, quantities.case.cache) or any(
                _equal(x, c) for c in as_tuple(quantities.case.cache)) or all(
                isinstance(d, int) for d in x) and any(x in (q.shape, q.shape[:-1])
                                                       for _, q in quantities.known))):
            return None
    return labels


def _scalar(name, x, quantities):
    """Whether a number a statement reads is right: the cache's or the row's, or a size of the
    case (the size its name says, when it is one of the sizes' letters, C or N)."""
    if any(np.isclose(x, c, rtol=1e-12) if isinstance(x, float) else type(x) is type(c) and x == c
           for c in quantities.scalars):
        return True
    letters = {n.split()[0]: s for n, s in quantities.sizes.items()}
    if name in letters:
        return x == letters[name]
    return isinstance(x, (int, np.integer)) and (x in letters.values() or any(
        x in q.shape for _, q in quantities.known))   # C of an (N, C) part


def _equal(a, b):
    """Whether two values the cache may hold are equal (tuples of arrays entry by entry)."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and _identical(a, b)
    return type(a) is type(b) and a == b


def _confused(labels, quantities, step, run):
    """Whether which value goes where is a guess: two names read hold one quantity, a name of
    the derivation holds another of its quantities, or a part of the statement computes a
    quantity that a name it reads (not inside that part) holds."""
    if len(set(labels.values())) < len(labels) or any(
            n in quantities.names and not _same(step.before[n], quantities.names[n]) for n in labels):
        return True
    for node, v in _parts_of(step, run):
        inside = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        if quantities.label(v) in {lab for n, lab in labels.items() if n not in inside}:
            return True
    return False


def _parts_of(step, run):
    """(node, value) of each NumPy call and operation in a statement (not a loop's), computed
    again on copies of its inputs, quietly and within the time limit; one that calls anything
    but NumPy, or cannot be computed, is left out."""
    if isinstance(step.node, (ast.For, ast.While, ast.If, ast.With, ast.Try)):
        return []
    found = []
    for node in ast.walk(step.node):
        if isinstance(node, (ast.Call, ast.BinOp, ast.UnaryOp)) and _numpy_only(node, step, run):
            try:
                with quiet(), guarded():
                    value = eval(compile(ast.Expression(node), "<trace>", "eval"), run.globals,
                                 {n: v.copy() if isinstance(v, np.ndarray) else v
                                  for n, v in step.before.items()})
            except (Hang, *LEARNERS):
                continue
            if isinstance(value, np.ndarray):
                found.append((node, value))
    return found


def _numpy_only(node, step, run):
    """Whether every call in an expression is NumPy's: a function of a NumPy module or an
    array's method."""
    for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
        root = call.func
        while isinstance(root, ast.Attribute):
            root = root.value
        if not isinstance(root, ast.Name):   # a method of what an inner operation or call
            continue                         # gives: those are judged on their own
        value = step.before.get(root.id, run.globals.get(root.id))
        if isinstance(call.func, ast.Attribute) and isinstance(value, np.ndarray):
            continue
        module = value.__name__ if isinstance(value, types.ModuleType) else getattr(
            value, "__module__", None) if isinstance(call.func, ast.Name) else None
        if not (isinstance(module, str) and module.split(".")[0] == "numpy"):
            return False
    return True


# ----------------------------------------------------------------------------- the first wrong line

@dataclass
class Finding:
    """A first wrong line: its ``line``, its ``kind`` (of change and quantity) and what to say,
    a first line (``{where}`` for the file) and the lines under it; ``plain``, the same without
    a condition ("where x < 0"), by position; ``case``, the case's label."""
    line: int
    kind: str
    said: List[str]
    plain: Optional[List[str]] = None
    case: str = ""


def _wrong(result, case, scales):
    """{gradient index: the learner's array} of each gradient of ``result`` the check calls
    wrong (its tolerance, its ``scales``); every index when the result has another count."""
    got = as_tuple(result)
    if len(got) != len(case.right):
        return dict(enumerate(case.right))
    return {j: y for j, (y, r, s) in enumerate(zip(got, case.right, scales))
            if not (isinstance(y, (np.ndarray, np.generic))
                    and mistakes.close(np.asarray(y, dtype=np.float64), r, s))}


def _intact(dout, cache, case):
    """Whether a run left the upstream gradient and the cache's arrays as the case gave them
    (a change that moves the damage into them makes nothing right)."""
    return np.array_equal(dout, case.dout, equal_nan=True) and all(
        not isinstance(a, np.ndarray) or np.array_equal(a, b, equal_nan=True)
        for a, b in zip(as_tuple(cache), as_tuple(case.cache)))


def _scales(ex, case):
    """Each gradient's scale in a case, as the check takes it (its largest entry or term)."""
    found = terms_of(ex, ex.parts(case.dout, case.cache),
                     {g: np.shape(r) for g, r in zip(ex.grads, case.right)})
    return [mistakes.scale_of(r, found[g]) for g, r in zip(ex.grads, case.right)]


class _Judge:
    """The statements of one recorded run of the learner's backward on ``case``, judged in the
    order they ran (the module's docstring, 1-5)."""

    def __init__(self, ex, fn, table, case, deadline, others=()):
        self.fn, self.table, self.case, self.grads = fn, table, case, ex.grads
        self.others = [(c, _scales(ex, c)) for c in others if c is not case]   # other failing
        self.deadline = deadline
        self.scales = _scales(ex, case)
        self.run = record(fn, table, case.dout.copy(), copy.deepcopy(case.cache))
        ok = self.run is not None and self.run.error is None
        self.quantities = Quantities(ex, case) if ok else None

    def first(self, only=None):
        """The first wrong line (at line ``only``, if given), or None."""
        if self.quantities is None:
            return None
        if any(_idle(step, self.run) for step in self.run.steps):
            return None   # a value that was to change may not have: what reads it is no judge
        yours = {}   # names whose values a judged statement made and nothing was found in
        for i, step in enumerate(self.run.steps):
            if step.after is None:
                continue
            labels = None if _allocates(step) else _reads(step, self.run, self.quantities)
            ours = labels if labels is not None or _allocates(step) else _reads(
                step, self.run, self.quantities, yours)
            if only is not None and step.line != only:
                found = None
            else:
                found = self.undone(i, step) or self.alias(i, step) or self.reused(i, step)
                if labels is not None and not found:
                    found = self.misnamed(i, step) or (
                        None if _confused(labels, self.quantities, step, self.run) else
                        self.variant(i, step) or self.makes(i, step, labels))
                    found = found if found is None or found.kind == "name" or self.unique(
                        i, step, labels) else None
                if ours is not None and (not found or found.kind.startswith(("entries", "makes"))):
                    found = self.edited(i, step, ours) or found   # an edit says more than where
            if found:
                return found
            if ours is not None:
                yours.update({n: step.objects_after[n] for n in _written(step)})
        return None

    def undone(self, i, step):
        """0. A gradient right before the statement and changed by it into what is returned:
        with the value as it was, every gradient is right."""
        wrong = _wrong(self.run.result, self.case, self.scales)
        for n in _written(step):
            for j, y in wrong.items():
                before = step.before.get(n)
                if isinstance(before, np.ndarray) and _same(before, self.case.right[j]) and \
                        _shares(step.objects_after[n], y) and self.fixes({i: {n: before}}):
                    return self.finding(step, "undone", (
                        f"your {n} was right before it, the derivation's {self.grads[j]}; this "
                        f"line changed it"))
        return None

    def edited(self, i, step, labels):
        """6. One edit of the statement (``edits``) with which every gradient is right, for a
        statement that makes something that is not one of the derivation's quantities. A name
        is replaced only when its role is sure (``certain``) or it holds indices: else an
        earlier line may have made the wrong value under it; and no array it reads whose role
        is unsure could hold another quantity and make every gradient right (``unique``)."""
        node, q = step.node, self.quantities
        if isinstance(node, ast.Return):
            if node.value is None or not _wrong(step.returned, self.case, self.scales):
                return None
        elif not isinstance(node, (ast.Assign, ast.AugAssign, ast.For, ast.Expr)) or not any(
                not isinstance(step.after[n], np.ndarray) or q.label(step.after[n]) is None
                for n in _written(step)) or _view(node):
            return None
        sure = {n for n, v in step.before.items() if isinstance(v, np.ndarray) and (
            v.dtype.kind != "f" or self.certain(step, n, labels.get(n) or q.label(v)))}
        y = [v for v in as_tuple(self.run.result) if isinstance(v, np.ndarray)]
        last = isinstance(node, ast.Return) or any(   # the statement that makes what is returned
            _shares(step.objects_after[n], v) for n in _written(step) for v in y) and not any(
            _shares(s.objects_after[n], v) for s in self.run.steps[i + 1:] if s.after
            for n in _written(s) for v in y)
        for what, edit in edits(node, step, self.run, sure, last):
            if time.monotonic() > self.deadline:
                raise TimeoutError
            if all(right_with(self.fn, self.table, node, edit, c, scales)   # said of every
                   for c, scales in [(self.case, self.scales)] + self.others):   # case: true in each
                if not self.unique(i, step, {n: lab for n, lab in labels.items()
                                             if lab != "yours"}):
                    return None
                return self.finding(step, "edit", f"with {what}, every gradient is right")
        return None

    def fixes(self, fixes):
        """Whether a run with ``fixes`` ({step: {name: value}}, put in place as the step ends)
        makes every gradient right."""
        def fix(i, values):
            for name, value in fixes.get(i, {}).items():
                values[name] = value.copy() if isinstance(value, np.ndarray) else value
        if time.monotonic() > self.deadline:
            raise TimeoutError   # the search gives up: nothing is said
        run = record(self.fn, self.table, self.case.dout.copy(), copy.deepcopy(self.case.cache),
                     fix)
        return run is not None and run.error is None and not _wrong(
            run.result, self.case, self.scales)

    def text(self, step):
        return linecache.getline(self.fn.__code__.co_filename, step.line).strip()

    def finding(self, step, kind, *said):
        return Finding(step.line, kind, [f"first wrong line: {{where}}:{step.line}   "
                                         f"{self.text(step)}", *said], case=self.case.label)

    def alias(self, i, step):
        """1. An array changed in place through another name, that a later line reads."""
        steps, writes = self.run.steps, _names(step.node)[1]
        for b in _written(step):
            if b in writes or step.objects_after.get(b) is not step.objects.get(b):
                continue
            a = next((w for w in writes if w in step.objects and _shares(
                step.objects[w], step.objects[b])), None)
            later = sorted({s.line for s in steps[i + 1:] if b in _names(s.node)[0]
                            and s.objects.get(b) is step.objects[b]})
            if a is None or not later or not self.fixes({i: {b: step.before[b]}}):
                continue
            bound = next((s for s in reversed(steps[:i]) if a in _written(s)), None)
            was = self.quantities.label(step.before[b])
            return self.finding(
                step, "alias", (f"it also changed {b}: {a} is {b}, the same array" if
                                step.objects[a] is step.objects[b] else
                                f"it also changed {b}: {a} is a view of {b} (they share memory)")
                + (f", since line {bound.line} ({self.text(bound)})" if bound else ""),
                (f"line {later[0]} reads" if len(later) == 1 else "lines " + ", ".join(
                    map(str, later[:-1])) + f" and {later[-1]} read") + f" {b}, no longer " + (
                    f"the derivation's {was}" if was else "what it was")
                + f": a copy ({a} = {b}.copy()) keeps them apart")
        return None

    def reused(self, i, step):
        """2. A name read after an earlier line reassigned it, its earlier value right there
        and its new value read by another line (else the reassignment may be the mistake)."""
        steps = self.run.steps
        for n in _names(step.node)[0]:
            earlier = next((s for s in reversed(steps[:i]) if n in s.before and n in _written(s)
                            and s.objects_after[n] is not s.objects[n]), None)
            if earlier is None or earlier.objects_after[n] is not step.objects.get(n):
                continue
            old, now = earlier.before[n], step.before[n]
            was, is_now = self.quantities.label(old), self.quantities.label(now)
            if was is None or was == is_now or not any(   # the new value is read elsewhere:
                    s is not step and n in _names(s.node)[0] and s.objects.get(n) is
                    step.objects[n] for s in steps[steps.index(earlier) + 1:]):   # it was meant
                continue
            if self.fixes({i - 1: {n: old}, i: {n: now}}) or self.fixes({i - 1: {n: old}}):
                return self.finding(step, "reused", (
                    f"it reads {n}, which line {earlier.line} reassigned ({self.text(earlier)}): "
                    f"{n} is " + (f"the derivation's {is_now}" if is_now else "another value")
                    + f" there, where the derivation's {was} belongs"))
        return None

    def misnamed(self, i, step):
        """3. Names of the derivation bound to others of its quantities."""
        q = self.quantities
        names = {n: q.names[n] for n in _written(step) if n in q.names and isinstance(
            step.after[n], np.ndarray) and not _same(step.after[n], q.names[n])
                 and q.label(step.after[n]) is not None}
        if names and self.fixes({i: names}):
            return self.finding(step, "name", "; ".join(
                f"your {n} is the derivation's {q.label(step.after[n])}, not its {n}"
                for n in names))
        return None

    def certain(self, step, name, label):
        """Whether the role of an array a statement reads is sure: its name is its quantity's
        (rstd), or it is the upstream gradient or an array of the cache as the backward got it
        (``xhat, weight, rstd = cache``), or reshaped (``d2 = dout.reshape(-1, C)``), not
        copied under another name (``local = r``, where 2 * r may have been meant)."""
        upstream, cache = self.fn.__code__.co_varnames[:2]
        if name in (label, upstream):
            return True
        bound = next((s for s in reversed(self.run.steps[:self.run.steps.index(step)])
                      if name in _written(s)), None)
        value = getattr(getattr(bound, "node", None), "value", None)
        if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name):
            value = value.value
        if isinstance(value, ast.Name):
            return value.id == cache
        args = [np.asarray(self.case.dout)] + [a for a in as_tuple(self.case.cache)
                                                if isinstance(a, np.ndarray)]
        return isinstance(value, ast.Call) and any(
            _same(step.before[name], a) for a in args)

    def unique(self, i, step, labels):
        """Whether no array the statement reads whose role is unsure could hold another of the
        quantities and make every gradient right (then an earlier line may have made the
        right quantity for the wrong role, and this one be right)."""
        for n, label in labels.items():
            if label == "zeros" or self.certain(step, n, label):
                continue
            v = step.before[n]
            for other, q in self.quantities.known:
                if q.dtype.kind != "f" or _same(v, q):
                    continue
                if q.size == v.size and aligned(v, q) is not None and self.fixes(
                        {i - 1: {n: _put(q, v)}}) or q.size != v.size and (
                        mistakes._broadcasts(v.shape, q.shape) or q.ndim == v.ndim and
                        mistakes._broadcasts(q.shape, v.shape)) and self.fixes(
                        {i - 1: {n: q.copy()}}):   # a bigger one, or one reduced: keepdims
                    return False
        return True

    def variant(self, i, step):
        """4. A near variant of a quantity, the quantity in its place making every gradient
        right."""
        for n in _written(step):
            v = step.after[n]
            if isinstance(v, np.ndarray) and v.any() and self.quantities.label(v) is None:
                for what, kind, q, plain in variants(v, self.quantities):
                    if self.fixes({i: {n: q}}):
                        found = self.finding(step, kind, what.format(n))
                        found.plain = found.said[:1] + [(plain or what).format(n)]
                        return found
        return None

    def makes(self, i, step, labels):
        """5. A gradient the backward returns, made wrong by the statement that made the array
        it returns (not an array of zeros, an accumulator's start), reading right values. Not
        when that is a quantity of another role (it is returned in the wrong place), or a sum
        of some of the gradient's terms made before the return (a line after it may be
        missing)."""
        steps, wrong = self.run.steps, _wrong(self.run.result, self.case, self.scales)
        returns = step is steps[-1] and step.returned is not None
        for j, y in wrong.items():
            if not isinstance(y, np.ndarray) or not y.any():
                continue

            def makes_y(s):   # the statement that made the array returned, in its shape
                return any(_shares(s.objects_after[n], y) and np.shape(s.after[n]) == y.shape
                           for n in _written(s))
            if not (makes_y(step) or returns and not any(makes_y(s) for s in steps[:-1])) \
                    or any(makes_y(s) for s in steps[i + 1:]):
                continue
            g, right = self.grads[j], self.case.right[j]
            label, kind = self.quantities.label(y), self.combination(g, y)
            if _same(y, right):   # the statement that gave it this shape: the array itself
                if not any(step.objects_after[n] is y for n in _written(step)):
                    continue
                label = f"the right values in shape {y.shape}, where the derivation's is {right.shape}"
            elif label is not None and not (kind == "other" or kind == "sum" and returns):
                continue
            reads = ", ".join(m if lab == m else f"{m} = {lab}" for m, lab in labels.items())
            return self.finding(step, "makes", (f"what it reads is right ({reads}); " if reads
                                                else "") + f"what it makes, your {g}, is not"
                                + (f": it is {label}" if label else ""))
        return None

    def combination(self, g, y):
        """Whether ``y`` is gradient ``g``'s terms each times 0, 1, -1 or 2, two of them at
        least (one alone may be a part the backward keeps to add later): "sum" when a sum of
        some of them, "other" else, or None."""
        ts = self.quantities.terms.get(g)
        if not ts or np.shape(y) != ts[0].shape:
            return None
        f = mistakes.fit([np.asarray(y, dtype=np.float64)], [sum(ts)], [ts],
                         [mistakes.scale_of(sum(ts), [])])
        if f is None or any(x not in (0, 1, -1, 2) for x in f) or sum(x != 0 for x in f) < 2:
            return None
        return "sum" if set(f) <= {0, 1} else "other"


def right_with(fn, table, node, edit, case, scales):
    """Whether the learner's function with statement ``node`` replaced by ``edit`` (compiled
    again from its source, ``table.tree``, in a copy of its globals) makes every gradient of
    ``case`` right, run quietly and within the time limit."""
    if fn.__code__.co_freevars:
        return False   # a closure's free names cannot be compiled again alone
    for parent in ast.walk(table.tree):
        for field, value in ast.iter_fields(parent):
            if isinstance(value, list) and any(v is node for v in value):
                k = next(k for k, v in enumerate(value) if v is node)
                value[k] = edit
                try:
                    code = compile(ast.fix_missing_locations(copy.deepcopy(table.tree)),
                                   fn.__code__.co_filename, "exec")
                finally:
                    value[k] = node
                space, dout, cache = dict(fn.__globals__), case.dout.copy(), copy.deepcopy(
                    case.cache)
                try:
                    with quiet(), guarded():
                        exec(code, space)
                        result = space[fn.__name__](dout, cache)
                except (Hang, *LEARNERS):
                    return False
                return not _wrong(result, case, scales) and _intact(dout, cache, case)
    return False


def edits(node, step, run, sure, last=False):
    """(the edit in words, the statement with it) for each one-place edit of a statement that a
    slip of the hand makes, in this order: ``np.where``'s branches swapped; a ``range`` one
    longer or shorter at an end; a strided slice starting one later or earlier (``0::2`` for
    ``1::2``); ``a[:, t]`` where one entry a row belongs, ``a[np.arange(len(t)), t]``; an
    operator + for - or - for +; another array the function holds in place of a name or of
    a NumPy call (``np.tanh(x)`` where ``t`` belongs), a name only when it is in ``sure``;
    ``a[i, j]`` for ``a[j, i]``; an array of ``sure`` permuted as an index array of the function
    permutes (``d2[order]``). Where a sign or a factor may be made up for later (``last`` is
    False: not the statement that makes what is returned, nor one that fills entries of an
    array), no more; else the value's sign, a term's sign; a term times another array of
    ``sure``; a product without one of its factors."""
    sites, tree = [], copy.deepcopy(node)
    _Sites(sites.append).visit(tree)
    arrays = {n: v for n, v in step.before.items() if isinstance(v, np.ndarray) and v.ndim}
    numpy = next((n for n, v in run.globals.items() if v is np), None)
    found = []
    perms = [n for n, v in arrays.items() if v.dtype.kind in "iu" and v.ndim == 1
             and np.array_equal(np.sort(v), np.arange(len(v)))]
    factors = [n for n in sure if arrays.get(n) is not None and arrays[n].dtype.kind == "f"]
    last = last or any(isinstance(t, ast.Subscript) for t in getattr(node, "targets", []))
    for k, site in enumerate(sites):
        for rank, new, *said in _replacements(site, arrays, numpy, step, run, sure, perms,
                                              factors if last else []):
            found.append((rank, k, site, new, said))
    value = getattr(tree, "value", None)
    if last and value is not None and isinstance(node, (ast.Assign, ast.AugAssign, ast.Return)):
        found.append((4, next(k for k, n in enumerate(sites) if n is value), value,
                      ast.UnaryOp(ast.USub(), value), []))
    parents = {id(c): p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    for rank, k, site, new, said in sorted(found, key=lambda f: f[0]):
        edited = _Sites(lambda n: None, k, new).visit(copy.deepcopy(node))
        while not said and id(site) in parents and (isinstance(site, ast.Tuple) and isinstance(
                parents[id(site)], ast.Subscript) or sum(ast.unparse(n) == ast.unparse(site)
                                                         for n in ast.walk(tree)) > 1):
            site, new = parents[id(site)], _with_child(parents[id(site)], site, new)   # which
        yield (said or [f"{ast.unparse(new)} in place of {ast.unparse(site)}"])[0], edited


def _with_child(parent, old, new):
    """A shallow copy of ``parent`` with its child ``old`` replaced by ``new``."""
    copied = copy.copy(parent)
    for field, value in ast.iter_fields(parent):
        if value is old:
            setattr(copied, field, new)
        elif isinstance(value, list):
            setattr(copied, field, [new if v is old else v for v in value])
    return copied


class _Sites(ast.NodeTransformer):
    """Each node of a statement in one order, to ``seen``; with ``at`` and ``new``, the
    statement with node number ``at`` replaced by ``new``."""

    def __init__(self, seen, at=None, new=None):
        self.seen, self.at, self.new, self.count = seen, at, new, -1

    def visit(self, node):
        self.count += 1
        if self.count == self.at:
            return copy.deepcopy(self.new)
        self.seen(node)
        return self.generic_visit(node)


def _replacements(site, arrays, numpy, step, run, sure, perms, factors):
    """(rank, node[, what to say]) for each edit of one node (``edits``)."""
    if isinstance(site, ast.Call) and getattr(site.func, "attr", getattr(
            site.func, "id", None)) == "where" and len(site.args) == 3:
        yield 0, ast.Call(site.func, [site.args[0], site.args[2], site.args[1]], site.keywords)
    if isinstance(site, ast.Call) and getattr(site.func, "id", None) == "range":
        for a, arg in enumerate(site.args):
            for new in _plus_minus_one(arg):
                yield 1, ast.Call(site.func, site.args[:a] + [new] + site.args[a + 1:], [])
    if isinstance(site, ast.Slice) and site.step is not None:
        start = site.lower.value if isinstance(site.lower, ast.Constant) else \
            0 if site.lower is None else None
        if isinstance(start, int):
            for new in (start + 1, start - 1) if start else (1,):
                yield 2, ast.Slice(ast.Constant(new) if new else None, site.upper, site.step)
    index = getattr(site, "slice", None)
    if isinstance(site, ast.Subscript) and isinstance(index, ast.Tuple) and numpy and len(
            index.elts) == 2 and isinstance(index.elts[0], ast.Slice) and index.elts[0].lower \
            is index.elts[0].upper is index.elts[0].step is None and not isinstance(
            index.elts[1], (ast.Slice, ast.Constant)):
        rows = ast.Call(ast.Attribute(ast.Name(numpy, ast.Load()), "arange", ast.Load()),
                        [ast.Call(ast.Name("len", ast.Load()), [index.elts[1]], [])], [])
        yield 3, ast.Subscript(site.value, ast.Tuple([rows, index.elts[1]], ast.Load()), site.ctx)
    if isinstance(site, ast.Subscript) and isinstance(index, ast.Tuple) and len(index.elts) == 2 \
            and not any(isinstance(e, ast.Slice) for e in index.elts):
        yield 3, ast.Subscript(site.value, ast.Tuple(index.elts[::-1], ast.Load()), site.ctx)
    if isinstance(site, ast.BinOp) and isinstance(site.op, (ast.Add, ast.Sub)):
        plus, right = isinstance(site.op, ast.Add), ast.unparse(site.right)
        new = ast.BinOp(site.left, ast.Sub() if plus else ast.Add(), site.right)
        yield (4, new) if len(ast.unparse(site)) <= 40 else (   # else the operator and its term
            4, new, f"{'-+'[not plus]} {right} in place of {'+-'[not plus]} {right}")
        if not isinstance(site.left, ast.BinOp) or not isinstance(site.left.op, (ast.Add, ast.Sub)):
            yield 4, ast.BinOp(ast.UnaryOp(ast.USub(), site.left), site.op, site.right)
    if isinstance(site, ast.Name) and isinstance(site.ctx, ast.Load) and site.id in sure or \
            isinstance(site, ast.Call) and _numpy_only(site, step, run):
        for name in arrays:
            if name != getattr(site, "id", None):
                yield 5, ast.Name(name, ast.Load())
    if isinstance(site, ast.Name) and site.id in sure and site.id in arrays and isinstance(
            site.ctx, ast.Load):
        for p in perms:
            if len(arrays[p]) == len(arrays[site.id]):
                yield 5, ast.Subscript(site, ast.Name(p, ast.Load()), ast.Load())
    if isinstance(site, ast.BinOp) and isinstance(site.op, (ast.Add, ast.Sub)):
        for side in ("left", "right"):
            term = getattr(site, side)
            for name in factors:
                times = ast.BinOp(ast.Name(name, ast.Load()), ast.Mult(), term)
                new = ast.BinOp(times if side == "left" else site.left, site.op,
                                times if side == "right" else site.right)
                yield 6, new, f"{ast.unparse(times)} in place of {ast.unparse(term)}"
    if factors and isinstance(site, ast.BinOp) and isinstance(site.op, ast.Mult):
        for kept, dropped in ((site.left, site.right), (site.right, site.left)):
            yield 6, kept, f"{ast.unparse(kept)} in place of {ast.unparse(site)} (without " \
                           f"{ast.unparse(dropped)})"


def _plus_minus_one(arg):
    """A range's bound one more and one less: ``N - 1`` gives ``N``, ``1`` gives ``0`` and
    ``2``, ``N`` gives ``N + 1`` and ``N - 1``."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, int):
        return [ast.Constant(arg.value + d) for d in (1, -1) if arg.value + d >= 0]
    if isinstance(arg, ast.BinOp) and isinstance(arg.op, (ast.Add, ast.Sub)) and \
            isinstance(arg.right, ast.Constant) and arg.right.value == 1:
        return [arg.left]
    return [ast.BinOp(arg, op, ast.Constant(1)) for op in (ast.Add(), ast.Sub())]


def _view(node):
    """Whether a statement only names an array or a part of it without a stride (``first =
    dx[..., 0]``, ``g = d``): nothing is computed; a line that changes it is judged instead."""
    value = getattr(node, "value", None)
    if isinstance(node, ast.Assign) and isinstance(value, ast.Subscript) and isinstance(
            value.value, ast.Name):
        index = value.slice.elts if isinstance(value.slice, ast.Tuple) else [value.slice]
        return not any(isinstance(i, ast.Slice) and i.step is not None for i in index)
    return isinstance(node, ast.Assign) and isinstance(value, ast.Name)


def _allocates(step):
    """Whether a statement allocates an array to be filled (``np.empty_like(x)``, ``np.zeros``):
    its values are no one's; what fills it, or not, is judged."""
    value = getattr(step.node, "value", None)
    return isinstance(value, ast.Call) and getattr(
        value.func, "attr", getattr(value.func, "id", None)) in ALLOCATIONS


def _idle(step, run):
    """Whether a statement changed nothing where it was to change something: a loop that bound
    or changed nothing but its own variables (it ran no time), an assignment that leaves every
    name as it was (``dx = dx``), or a NumPy value computed and kept nowhere (``g - g.mean()``
    alone on its line: an assignment forgotten?)."""
    node = step.node
    if isinstance(node, (ast.For, ast.While)):
        own = {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)} if isinstance(
            node, ast.For) else set()
        return not set(_written(step)) - own
    if isinstance(node, (ast.Assign, ast.AugAssign)) and step.after is not None:
        targets = getattr(node, "targets", [getattr(node, "target", None)])
        return not _written(step) and not all(   # dx = dx: an operation left out? (not a
            isinstance(t, ast.Subscript) for t in targets)   # mask that selects nothing here)
    return isinstance(node, ast.Expr) and not isinstance(node.value, ast.Constant) and not \
        _written(step) and _numpy_only(node.value, step, run)


def _shares(a, b):
    return a is b or isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and \
        np.shares_memory(a, b)


def first_wrong_line(ex, fn, cases, yours, where):
    """The lines that point at the first wrong line of the learner's ``fn`` (``yours``: its
    float64 results on ``cases``; ``where``: its file as the report names it): "first wrong
    line: FILE:LINE   CODE", then what it says there; [] when no line can be pointed at
    surely (the module's docstring).

    Each case where a gradient is wrong is judged on its own, the smallest first; the earliest
    line found in one is taken when every other such case finds it too, finds none or a later
    one (where a quantity may vanish: sin 0 at position 0), or finds it when judged at that
    line alone, and two of them find it at least (one when one case is wrong: one small case
    alone may meet a quantity by chance). The words are those of the kind most
    of them found, when every case says them: as they are, else without a case's numbers
    ("divided by N"), else without a condition such as "where x < 0" (by position); else the
    smallest case's, said of that case ("in x (3, 6): your dx is dx times N (3)"). An edit is said only when it
    makes every such case right. Past ``BUDGET`` seconds, the runs together, nothing is
    said."""
    try:
        return _first_wrong_line(ex, fn, cases, yours, where)
    except (TypeError, ValueError):   # a value of the learner's NumPy cannot compare (an
        return []                     # array of objects): nothing to say
    except TimeoutError:              # past BUDGET seconds (a slow backward run many times)
        return []


def _first_wrong_line(ex, fn, cases, yours, where):
    table = statements(fn)
    failing = [c for c, y in zip(cases, yours) if _wrong(y, c, _scales(ex, c))]
    if table is None or not failing:
        return []
    failing.sort(key=lambda c: sum(np.size(a) for a in c.args))
    deadline = time.monotonic() + BUDGET
    judges = [_Judge(ex, fn, table, c, deadline, failing) for c in failing]
    found = [j.first() for j in judges]
    for line in sorted({f.line for f in found if f}):   # the earliest first
        at = [f if f is None or f.line == line else j.first(only=line)
              for j, f in zip(judges, found)]
        if all(a is not None or f is None or f.line > line for a, f in zip(at, found)) and \
                sum(a is not None for a in at) >= min(2, len(at)):
            at = [a for a in at if a]
            kind = max(at, key=lambda a: sum(b.kind == a.kind for b in at)).kind
            at = [a for a in at if a.kind == kind]   # the kind most cases found; its words
            bare = [a.said[:1] + [re.sub(r" \(-?\d+(\.\d+)?\)", "", s) for s in a.said[1:]]
                    for a in at]   # without a case's numbers: "divided by N (5)"
            said = next((s for s in (at[0].said, bare[0], at[0].plain) if s and all(
                s == t for t in ([a.said for a in at], bare, [a.plain for a in at])[
                    [at[0].said, bare[0], at[0].plain].index(s)])), None) or at[0].said[:1] + [
                f"in {at[0].case}: " + at[0].said[1]] + at[0].said[2:]   # else said of one case
            return [s.replace("{where}", str(where)) for s in said]
    return []


# ----------------------------------------------------------------------------- where it raised

def where_it_raised(ex, fn, case, where):
    """For a backward that raised on ``case``, the lines to add to its traceback: the line that
    raised (the learner's function's own), the shapes of the arrays it reads and, for each value
    there that is a quantity in another shape, the derivation's shape; [] when it raised
    elsewhere or not again."""
    try:
        return _where_it_raised(ex, fn, case, where)
    except (TypeError, ValueError):   # a value NumPy cannot compare: nothing to add
        return []


def _where_it_raised(ex, fn, case, where):
    table = statements(fn)
    run = table and record(fn, table, case.dout.copy(), copy.deepcopy(case.cache))
    if not run or run.error is None or run.raised is None or run.raised < 0:
        return []
    frames = [f for f in traceback.extract_tb(run.error.__traceback__)
              if f.filename == fn.__code__.co_filename]
    step = run.steps[run.raised]
    if not frames or frames[-1].name != fn.__code__.co_name or table.get(
            frames[-1].lineno) is not step.node:
        return []
    quantities = Quantities(ex, case)
    reads = [n for n in _names(step.node)[0] if isinstance(step.before.get(n), np.ndarray)]
    lines = [f"where it raised, {where}:{frames[-1].lineno}   {frames[-1].line}"] + [
        INDENT + ", ".join(f"{n} {step.before[n].shape}" for n in reads)] * bool(reads)
    widest = max([step.before[n].shape for n in reads], key=np.prod, default=())
    for source, v in [(n, step.before[n]) for n in reads] + [
            (ast.unparse(node), v) for node, v in _parts_of(step, run)]:
        if quantities.label(v) is not None:
            continue
        for what, kind, q, _ in variants(v, quantities):
            if np.shape(q) != np.shape(v):
                fits = f", which broadcasts against {widest}" if kind.startswith("keepdims") \
                    and _fits(q.shape, widest) and not _fits(v.shape, widest) else ""
                lines.append(INDENT + what.format(source) + fits)
                break
    sure = {n for n, v in step.before.items() if isinstance(v, np.ndarray) and (
        v.dtype.kind != "f" or n in quantities.names and _same(v, quantities.names[n]))}
    scales = _scales(ex, case)
    lines += [INDENT + f"with {what}, this case runs and every gradient is right"
              for what, edit in itertools.islice(edits(step.node, step, run, sure), 200)
              if right_with(fn, table, step.node, edit, case, scales)][:1]
    return [s + "\n" for s in lines]


def _fits(shape, to):
    try:
        np.broadcast_shapes(shape, to)
        return True
    except ValueError:
        return False
