"""The check of a learner's backward: run on the cases of ``catalogue.py`` (float64,
then the same in float32, whose values are compared too), its structure, dtypes and values
judged gradient by gradient (``mistakes.py``); when one is wrong, the learner's first wrong
line, and for code that raises the shapes on its line (``trace.py``). Each case may take ``TIME_LIMIT``
seconds; the backward gets copies of its arguments and its prints go to stderr, so that stdout
carries the verdict alone. ``learner.check`` calls it from Python.
"""
import bdb
import copy
import functools
import shlex
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

from minigrad.gradcheck import numerical_vjp

from experiments.exercises import guard, mistakes, trace
from experiments.exercises.guard import LEARNERS, Hang, guarded
from experiments.exercises.catalogue import as_tuple, make_cases
from experiments.exercises.terms import quantities, terms_of, variants

SEED = 0            # every check draws the same inputs: a learner compares runs
CD_STEP = 1e-6      # central differences, relative to the input's largest entry
RTOL32 = 1e-4       # the float32 run: error <= RTOL32 * the float64 case's scale


class LearnerError(Exception):
    """The learner's code raised. ``text``: the traceback, their own frames only; ``line``: one
    line naming the exception, where it was raised and when."""

    def __init__(self, text, line):
        super().__init__(line)
        self.text, self.line = text, line


def learner_error(e, code_file, shown, subject, context=""):
    """A ``LearnerError`` for ``e`` raised in the code of ``code_file`` (``shown`` so): "<subject>
    raised <type> at <shown>:<line><context>: <message>"."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == code_file]
    text = "".join(["Traceback (most recent call last):\n"] + traceback.format_list(frames)
                   if frames else []) + "".join(traceback.format_exception_only(type(e), e))
    where = f" at {shown}:{frames[-1].lineno}" if frames else ""
    message = " ".join(str(e).split())
    return LearnerError(text, f"{subject} raised {type(e).__name__}{where}{context}"
                        + (f": {message}" if message else ""))


@dataclass
class Verdict:
    """What a check found. ``status``: "right", "wrong", "not implemented" or "raised";
    ``lines``: the report; ``gradients``: {"dx": "right" or "wrong"}; ``error``: the
    ``LearnerError`` when the learner's code raised; ``blocker``: why the engine would stop a
    training run with it (the error, a hang, a wrong count, shape or float32 dtype), "" when it
    would train, whatever its values."""
    status: str
    lines: List[str] = field(default_factory=list)
    gradients: Dict[str, str] = field(default_factory=dict)
    error: Optional[LearnerError] = None
    blocker: str = ""

    def __post_init__(self):
        self.blocker = self.error.line if self.error else self.blocker

    def __repr__(self):     # what a notebook shows under the report: the verdict in words
        grads = ", ".join(f"{g} {s}" for g, s in self.gradients.items())
        return f"<Verdict: {self.status}{f' ({grads})' if grads else ''}>"


def _describe(obj):
    if isinstance(obj, (tuple, list)):
        return f"a {type(obj).__name__} of {len(obj)}"
    if isinstance(obj, np.ndarray):
        return f"one array, of shape {obj.shape}"
    return "None" if obj is None else f"a {type(obj).__name__}"


def _structure(ex, got):
    """What is wrong with the returned value's structure, or None."""
    n, grads = len(ex.grads), ", ".join(ex.grads)
    if n == 1 and isinstance(got, (tuple, list)):
        return f"{ex.function} returns {_describe(got)}; it must return {grads} itself, an array"
    if n > 1 and not (isinstance(got, (tuple, list)) and len(got) == n):
        return f"{ex.function} returns {_describe(got)}; it must return {n} arrays, ({grads})"
    for g, a in zip(ex.grads, as_tuple(got)):
        if not isinstance(a, (np.ndarray, np.generic)):     # a NumPy scalar is a 0-d array
            return f"{g} is {_describe(a)}, not a NumPy array"
    return None


def _arrays(cache):
    return [cache] if isinstance(cache, np.ndarray) else [
        a for a in cache if isinstance(a, np.ndarray)]


def _run(ex, fn, cases, where, path):
    """The learner's gradients on every case, or a Verdict saying why there are none; and what
    it modified in place."""
    code = getattr(getattr(fn, "__code__", None), "co_filename", None)
    results, modified = [], set()
    for case in cases:
        dout, cache = case.dout.copy(), copy.deepcopy(case.cache)
        try:
            with guarded():
                got = fn(dout, cache)
        except bdb.BdbQuit:   # q at a breakpoint() in their code: ends the command, as Ctrl-C
            raise
        except NotImplementedError:
            return None, Verdict("not implemented", [
                f"{ex.function} in {where} is not implemented yet (it raises "
                f"NotImplementedError): write it, its docstring leads the way; then check "
                f"again"]), modified
        except Hang:
            line = (f"your {ex.function} did not return within {guard.TIME_LIMIT:g} s on {case.label} "
                    f"(a loop that never ends?)")
            return None, Verdict("wrong", [line], blocker=line), modified
        except LEARNERS as e:
            error = learner_error(e, code, path or code, f"your {ex.function}", f" on {case.label}"
                                  + (" in float32" if case.dout.dtype == np.float32 else ""))
            if case.dout.dtype == np.float64:   # the shapes on the line that raised
                error.text += "".join(trace.where_it_raised(ex, fn, case, path or code))
            return None, Verdict("raised", error=error), modified
        bad = _structure(ex, got)
        if bad:
            return None, Verdict("wrong", [bad], blocker=bad), modified
        if not np.array_equal(dout, case.dout, equal_nan=True):
            modified.add(ex.upstream)
        if not all(np.array_equal(a, b, equal_nan=True)
                   for a, b in zip(_arrays(cache), _arrays(case.cache))):
            modified.add("the cache")
        results.append(tuple(np.asarray(a) for a in as_tuple(got)))
    return results, None, modified


def numerical(ex, case, i):
    """Central differences of ``sum(dout * forward(...))`` with respect to input ``i``, the step
    ``CD_STEP`` of its largest entry (``minigrad.gradcheck.numerical_vjp``)."""
    args = [np.array(a) for a in case.args]              # copies: the step is taken in place
    h = CD_STEP * (np.abs(args[i]).max(initial=0.0) or 1.0)
    return numerical_vjp(lambda: ex.forward(*args, **case.kwargs)[0], args[i], h,
                         case.dout).reshape(args[i].shape)


def _of(changed, g):
    """Gradient ``g``'s terms in each of ``changed()`` (``terms.variants``) that has them,
    computed when first read."""
    yield from ((w, [v[g] for v in vt]) for w, vt in changed() if g in vt[0])


def _gradient(ex, j, cases, cases32, yours, yours32, found, changed, arrays):
    """(right, lines, blocker) of gradient ``j``: the diagnosis of its float64 values, then its
    dtypes, then its float32 values."""
    g, labels = ex.grads[j], [c.label for c in cases]
    others = {h: ([y[k].astype(np.float64) for y in yours], [c.right[k] for c in cases])
              for k, h in enumerate(ex.grads)}
    (ys, rs), ts = others[g], [t[g] for t in found]
    axes = ex.axes.get(g, "")
    ok, said = mistakes.diagnose(g, ys, rs, ts, labels, [c.sizes for c in cases],
                                  _of(changed, g), others, ex.constants,
                                  [axes(c.cache) if callable(axes) else axes for c in cases],
                                  arrays)
    if not all(y.shape == r.shape for y, r in zip(ys, rs)):
        return False, said, said[0][len("wrong: "):]
    d64 = [f"for float64 inputs your {g} is {yours[0][j].dtype}: a gradient has its input's "
           f"dtype"] * (yours[0][j].dtype != np.float64)
    y32, r32 = [y[j] for y in yours32], [c.right[j] for c in cases32]
    d32 = next((f"for float32 inputs your {g} has shape {y.shape}; it must be {r.shape}"
                for y, r in zip(y32, r32) if y.shape != r.shape), "") or (
        f"for float32 inputs your {g} is {y32[0].dtype}: a gradient has its input's dtype (the "
        f"GPT trains in float32: a float64 constant or array in your code?)"
        if y32[0].dtype != np.float32 else "")
    dtypes = d64 + [d32] * bool(d32)
    scales = [mistakes.scale_of(r, t) for r, t in zip(rs, ts)]
    if dtypes and (ok or d64 and all(np.all(mistakes.errors(y, r) <= 1e-5 * s)
                                     for y, r, s in zip(ys, rs, scales))):
        return False, ["wrong: the values are right" + ("" if ok else " to float32's round-off")
                       + ", the dtype is not"] + dtypes, d32
    if not ok:
        return False, said[:1] + dtypes + said[1:], d32
    y32 = [y.astype(np.float64) for y in y32]   # against the float64 scale: its terms' too
    if not all(np.all(mistakes.errors(y, r) <= RTOL32 * s) for y, r, s in zip(y32, r32, scales)):
        return False, ["wrong: right in float64, not in float32: " + mistakes.worst(
            g, y32, r32, scales, labels) + " (an exp or a power that overflows in float32?)"], ""
    ours = max(float(mistakes.errors(y, r).max()) / s for y, r, s in zip(ys, rs, scales))
    cd = max(float(np.abs(y - numerical(ex, c, ex.inputs.index(ex.wrt[j]))).max()) / s
             for y, c, s in zip(ys, cases, scales))
    return True, [f"right: error {ours:.1g} against ours, {cd:.1g} against central differences "
                  f"(of its largest entry)"], ""


def verdict(ex, fn, where, path=None):
    """Check ``fn`` as the backward of exercise ``ex``, named ``where`` in the report (its file,
    ``path``, or its name); nothing is printed."""
    cases, cases32 = make_cases(ex, SEED), make_cases(ex, SEED, np.float32)
    results, stop, modified = _run(ex, fn, cases + cases32, where, path)
    if stop:
        return stop
    found = [terms_of(ex, ex.parts(c.dout, c.cache), dict(zip(ex.grads, map(np.shape, c.right))))
             for c in cases]
    changed = functools.cache(lambda: list(variants(ex, cases)))
    arrays = quantities(ex, cases)
    width = max(len(g) for g in ex.grads) + 2
    lines = [f"{ex.function} of {where}, in float64 on random inputs"
             f"{', weights' if ex.weights else ''} and upstream gradients, then in float32:",
             "  " + "; ".join(c.label for c in cases)]
    grads, blocker = {}, ""
    for j, g in enumerate(ex.grads):
        with np.errstate(all="ignore"):   # NaN and inf in yours are for the diagnosis to say
            ok, said, bad = _gradient(ex, j, cases, cases32, results[:len(cases)],
                                      results[len(cases):], found, changed, arrays)
        grads[g], blocker = "right" if ok else "wrong", blocker or bad
        lines += [f"{g:<{width}}{said[0]}"] + [" " * width + s for s in said[1:]]
    if "wrong" in grads.values():   # where its values leave the derivation's
        first = trace.first_wrong_line(ex, fn, cases, results[:len(cases)], path or getattr(
            getattr(fn, "__code__", None), "co_filename", where))
        if first:   # the line says more than that no term explains it
            lines = [s for s in lines if not s.strip() in {
                f"no single mistake in the terms of {g} explains it" for g in ex.grads}]
        lines += first[:1] + [" " * width + s for s in first[1:]]
    if modified:    # first: what it did to its arguments may be why a gradient is wrong
        lines.insert(2, f"your backward modified {' and '.join(sorted(modified))} in place: a "
                        f"backward must leave its arguments as they are (the engine may hand "
                        f"the same arrays to other nodes)")
    n, wrong = len(grads), list(grads.values()).count("wrong")
    if wrong or modified:
        head = f"{wrong} of {n} gradients wrong" if wrong and n > 1 else "Wrong"
        return Verdict("wrong", lines + [f"{head}. The derivation, when you want it: {ex.link}"],
                       grads, blocker=blocker)
    done = {1: "Right", 2: "Both gradients right"}.get(n, f"All {n} gradients right")
    return Verdict("right", lines + [f"{done}. {train_hint(ex, path)}"], grads)


def train_hint(ex, path=None):
    """How to train a GPT with the learner's backward of ``ex`` (from the file ``path``)."""
    if ex.study is None:
        return "No GPT here calls it: the exercise is the whole of it."
    run = f"python -m experiments.{ex.study} --tiny --backward"
    if path is None:
        return f"Train the GPT with it: save it as {ex.name}.py in a folder DIR, then {run} DIR"
    if Path(path).name == f"{ex.name}.py":
        return f"Train the GPT with it: {run} {Path(path).parent}"
    return (f"Train the GPT with it: --backward takes a folder holding it as {ex.name}.py "
            f"(mkdir mine && cp -- {shlex.quote(str(path))} mine/{ex.name}.py && {run} mine)")
