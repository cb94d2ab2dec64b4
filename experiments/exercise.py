"""Write a backward pass yourself, and be told which gradient, and which term, is wrong.

    python -m experiments.exercise                      # the exercises, one line each
    python -m experiments.exercise start layernorm      # writes exercises/layernorm.py
    python -m experiments.exercise check layernorm      # checks its layernorm_backward
    python -m experiments.four_variants --tiny --backward exercises   # trains with yours

``start NAME [--dir DIR]`` writes ``DIR/NAME.py`` (default ``exercises/``), never over a file
that exists: the layer's forward in full, then the backward to write, with its cache, its
shapes and the steps of the derivation (``experiments/_exercise_templates.py``).

``check NAME [--file PATH]`` imports the learner's ``NAME_backward`` and runs it in float64 on
the cases of ``experiments/_exercises.py`` (random inputs and weights at several shapes, a
random upstream gradient), and in float32 on the first (its dtypes only). Per gradient it
returns it prints right (with its error against the layer's own backward and against central
differences) or wrong, with the largest error and where, and what the mistake is in the terms
of the derivation (``experiments/_diagnose.py``). Our backward's code is never shown.

Exit status: 0 every gradient right (and ``start``, the list); 1 a wrong answer (a wrong value,
shape or dtype, a backward not implemented yet, an exception in the learner's code, whose
traceback is shown, ``sys.exit()`` included); 2 bad input (an unknown exercise, a missing file
or function, a folder, a file not named .py or not UTF-8, a file ``start`` would overwrite),
one line.
"""
from __future__ import annotations

import copy
import os
import sys
import traceback
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

import numpy as np

from experiments import _diagnose, _exercise_templates, cli
from experiments._exercises import EXERCISES, as_tuple, make_cases

PROG = "python -m experiments.exercise"
DEFAULT_DIR = Path("exercises")
SEED = 0          # every check draws the same inputs: a learner compares runs
CD_STEP = 1e-6    # central differences, relative to the input's largest entry


class LearnerError(Exception):
    """The learner's code raised. ``text``: the traceback, their own frames only; ``line``: one
    line naming the exception, where it was raised and when."""

    def __init__(self, text, line):
        super().__init__(line)
        self.text, self.line = text, line


LEARNERS = (Exception, SystemExit)   # what the learner's code may raise: all but a Ctrl-C


def learner_error(e, path, subject, context=""):
    """A ``LearnerError`` for exception ``e`` raised by the code of the file ``path``: its line
    reads "<subject> raised <type> at <file>:<line><context>: <message>"."""
    mine = str(Path(path).resolve())
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == mine]
    text = "".join(["Traceback (most recent call last):\n"] + traceback.format_list(frames)
                   if frames else []) + "".join(traceback.format_exception_only(type(e), e))
    where = f" at {path}:{frames[-1].lineno}" if frames else ""
    message = " ".join(str(e).split())
    return LearnerError(text, f"{subject} raised {type(e).__name__}{where}{context}"
                              + (f": {message}" if message else ""))


def load_backward(ex, path):
    """Import the file ``path`` and return its ``<name>_backward``.

    Raises:
        cli.UsageError: a folder, no such file, not a .py file, not UTF-8 text, or no such
            function in it.
        LearnerError: the file raised when imported (a SyntaxError, a NameError, a
            ``sys.exit()``...).
    """
    path = Path(path)
    why = ("is a folder" if path.is_dir() else "no such file" if not path.is_file() else
           "not a .py file" if path.suffix != ".py" else "")
    if why:
        raise cli.UsageError(f"{path}: {why} ({PROG} start {ex.name} writes {ex.name}.py)")
    module = types.ModuleType(f"exercise_{ex.name}")
    module.__file__ = str(path.resolve())
    try:     # an OSError is bad input too: main says so in one line
        source = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise cli.UsageError(f"cannot read {path} as Python source: {e}") from None
    try:   # compiled from the source every time: no bytecode cache, never a stale one
        exec(compile(source, module.__file__, "exec"), module.__dict__)
    except LEARNERS as e:
        raise learner_error(e, path, f"importing {path}") from None
    fn = getattr(module, ex.function, None)
    if not callable(fn):
        raise cli.UsageError(f"{path} defines no function {ex.function}")
    return fn


# ----------------------------------------------------------------------------- the check

@dataclass
class Verdict:
    """What ``check`` found. ``status``: "right", "wrong", "not implemented" or "raised";
    ``lines``: the report for stdout; ``error``: the ``LearnerError`` when the learner's code
    raised; ``blocker``: why the engine would refuse it in training (its error's line, a wrong
    count, shape or dtype of a gradient), "" when it takes it, whatever its values."""
    status: str
    lines: List[str] = field(default_factory=list)
    error: Optional[LearnerError] = None
    blocker: str = ""

    def __post_init__(self):
        self.blocker = self.error.line if self.error else self.blocker


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


def numerical(ex, case, i):
    """Central differences of ``sum(dout * forward(...))`` with respect to input ``i``."""
    args = [np.array(a) for a in case.args]              # copies, contiguous
    x, grad = args[i], np.empty(args[i].size)
    flat = x.reshape(-1)                                  # a view: writes reach x
    h = CD_STEP * (np.abs(x).max(initial=0.0) or 1.0)    # a step in proportion to x

    def f():
        return float(np.sum(case.dout * ex.forward(*args, **case.kwargs)[0]))

    for k in range(x.size):
        old = flat[k]
        flat[k] = old + h
        plus = f()
        flat[k] = old - h
        grad[k] = (plus - f()) / (2 * h)
        flat[k] = old
    return grad.reshape(x.shape)


def _call(ex, fn, path, cases):
    """The learner's gradients on every case, or a Verdict saying why there are none; and
    whether it modified its arguments in place."""
    results, modified = [], set()
    for case in cases:
        dout, cache = case.dout.copy(), copy.deepcopy(case.cache)
        try:
            got = fn(dout, cache)
        except NotImplementedError:
            return None, Verdict("not implemented", [
                f"{ex.function} in {path} is not implemented yet (it raises "
                f"NotImplementedError): write it, its docstring leads the way; then check "
                f"again"]), modified
        except LEARNERS as e:
            return None, Verdict("raised", error=learner_error(
                e, path, f"your {ex.function}", f" on {case.label}")), modified
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


def _dtype_lines(g, ys, y32, r32):
    """What is wrong with the dtypes of gradient ``g`` (float64 cases ``ys``, float32 ``y32``,
    whose right one is ``r32``)."""
    lines = [f"for float64 inputs your {g} is {y.dtype}: a gradient has its input's dtype"
             for y in ys[:1] if any(y.dtype != np.float64 for y in ys)]
    if y32.shape != r32.shape:
        lines.append(f"for float32 inputs your {g} has shape {y32.shape}; it must be {r32.shape}")
    elif y32.dtype != np.float32:
        lines.append(f"for float32 inputs your {g} is {y32.dtype}: a gradient has its input's "
                     f"dtype (the GPT trains in float32: a float64 constant or array in your "
                     f"code?)")
    return lines


def _right_line(ex, j, ys, cases, terms):
    """"right: ..." with the largest error against ours and against central differences."""
    i = ex.inputs.index(ex.wrt[j])
    scales = [_diagnose.scale_of(c.right[j], t) for c, t in zip(cases, terms)]
    ours = max(float(_diagnose.errors(y, c.right[j]).max(initial=0.0)) / s
               for y, c, s in zip(ys, cases, scales))
    cd = max(float(np.abs(y - numerical(ex, c, i)).max(initial=0.0)) / s
             for y, c, s in zip(ys, cases, scales))
    return (f"right: error {ours:.1g} against ours, {cd:.1g} against central differences (of "
            f"its largest entry)")


def check(ex, fn, path):
    """Check the learner's backward ``fn`` (from the file ``path``) of exercise ``ex``."""
    cases = make_cases(ex, np.random.default_rng(SEED))
    case32 = make_cases(ex, np.random.default_rng(SEED), np.float32)[0]
    results, verdict, modified = _call(ex, fn, path, cases + [case32])
    if verdict:
        return verdict
    yours, yours32 = results[:-1], results[-1]
    terms, mistakes = [ex.terms(c) for c in cases], [ex.mistakes(c) for c in cases]
    factors, labels = [ex.factors(c) for c in cases], [c.label for c in cases]
    rights = {g: [c.right[j] for c in cases] for j, g in enumerate(ex.grads)}
    width = max(len(g) for g in ex.grads) + 2
    weights = ", weights" if ex.weights else ""
    lines = [f"{ex.function} of {path}, in float64 on random inputs{weights} and upstream "
             f"gradients:", "  " + "; ".join(labels)]
    wrong, blocker = 0, ""
    for j, g in enumerate(ex.grads):
        ys, rs = [y[j] for y in yours], rights[g]
        gterms = [[(f, m, np.broadcast_to(a, r.shape)) for f, m, a in t[g]]  # -rstd * mean(.)
                  for t, r in zip(terms, rs)]                                # is (..., 1)
        ok, said = _diagnose.diagnose(g, [y.astype(np.float64) for y in ys], rs, gterms,
                                      [m.get(g, []) for m in mistakes], labels,
                                      [f.get(g, []) for f in factors], rights)
        shapes = all(y.shape == r.shape for y, r in zip(ys, rs))
        dtypes = _dtype_lines(g, ys, yours32[j], case32.right[j]) if shapes else []
        if ok:
            said = (["wrong: the values are right, the dtype is not"] if dtypes else
                    [_right_line(ex, j, ys, cases, gterms)])
        said = said[:1] + dtypes + said[1:]
        ok = ok and not dtypes
        blocker = blocker or (dtypes[0] if dtypes else "" if shapes else
                              said[0].removeprefix("wrong: "))
        wrong += not ok
        lines += [f"{g:<{width}}{said[0]}"] + [" " * width + s for s in said[1:]]
    if modified:
        lines.append(f"your backward modified {' and '.join(sorted(modified))} in place: a "
                     f"backward must leave its arguments as they are (the engine may hand the "
                     f"same arrays to other nodes)")
    n = len(ex.grads)
    if wrong or modified:
        head = f"{wrong} of {n} gradients wrong" if wrong and n > 1 else "Wrong"
        lines.append(f"{head}. The derivation, when you want it: {ex.link}")
        return Verdict("wrong", lines, blocker=blocker)
    lines.append({1: "Right", 2: "Both gradients right"}.get(n, f"All {n} gradients right")
                 + ". " + train_hint(ex, Path(path)))
    return Verdict("right", lines, blocker=blocker)


# ----------------------------------------------------------------------------- training

@dataclass(frozen=True)
class Swap:
    """A learner's backward for a training run: exercise ``name`` from the file ``path`` (as
    given: the workers share the working folder); ``status``, its check's: "right", "wrong" or
    "not implemented" (then the layer's own is kept)."""
    name: str
    path: str
    status: str


def backward_swaps(folder):
    """The learner's backward passes in ``folder`` (``<name>.py`` for every exercise name
    found), each checked; one progress line says which are used and how they fared.

    Raises:
        cli.UsageError: ``folder`` is a file, no folder, or holds no exercise file; a file
            whose backward raises, or returns a wrong count, shape or dtype (the engine would
            stop the run: the line says which).
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise cli.UsageError(f"--backward {folder}: " + (
            "is a file; give the folder holding your NAME.py files" if folder.exists() else
            "no such folder"))
    found = [(ex, folder / f"{ex.name}.py") for ex in EXERCISES.values()
             if (folder / f"{ex.name}.py").is_file()]
    if not found:
        raise cli.UsageError(f"--backward {folder}: no exercise file in it ({PROG} start NAME "
                             f"writes NAME.py)")
    swaps = []
    for ex, path in found:
        verdict = check_file(ex, path)
        if verdict.status != "not implemented" and verdict.blocker:
            raise cli.UsageError(f"{path}: {ex.function} cannot train: {verdict.blocker} "
                                 f"({PROG} check {ex.name} --file {path})")
        swaps.append(Swap(ex.name, str(path), verdict.status))
    cli.progress(f"backward passes from {folder}: {trained_with(swaps)}")
    return tuple(swaps)


def trained_with(swaps, called=None):
    """One line: which backward passes of a run are the learner's, how their checks went and,
    given ``called`` (the exercise names the run's models called), which went unused."""
    def how(s):
        unused = called is not None and s.name not in called
        return ("right" if s.status == "right" else f"WRONG: {PROG} check {s.name} --file "
                f"{s.path}") + (", not called in this run" if unused else "")
    yours = [f"{s.name}_backward ({how(s)})" for s in swaps if s.status != "not implemented"]
    idle = [s.name for s in swaps if s.status == "not implemented"]
    text = f"yours: {', '.join(yours)}" if yours else "none of yours"
    if idle:
        text += f"; not implemented yet: {', '.join(idle)}"
    return text + "; the layers' own for the rest"


def install(swaps):
    """Put each implemented backward of ``swaps`` in its layer module, where the layer's
    ``Function`` looks it up: in the process that trains (a worker imports the files again).
    Arguments after ``(dout, cache)`` (attention's and linear's ``needs``) are dropped: the
    learner's backward computes every gradient. Returns the set of the exercise names whose
    backward the model has called, filled in as it calls them."""
    called = set()
    for s in swaps:
        if s.status == "not implemented":
            continue
        ex = EXERCISES[s.name]
        fn = load_backward(ex, s.path)

        def backward(dout, cache, *needs, fn=fn, name=s.name):
            called.add(name)
            return fn(dout, cache)

        setattr(ex.module, ex.function, backward)
    return called


# ----------------------------------------------------------------------------- the command

def train_hint(ex, path):
    """How to train a GPT with the learner's backward of ``ex`` from the file ``path``: its
    folder, when it holds it as NAME.py, as ``--backward`` needs."""
    if ex.study is None:
        return ("No GPT calls it: SwiGLU's and attention's backward passes take silu' and the "
                "softmax's gradient themselves.")
    run = f"python -m experiments.{ex.study} --tiny --backward"
    if path.name == f"{ex.name}.py":
        return f"Train the GPT with it: {run} {path.parent}"
    return (f"Train the GPT with it: --backward takes a folder holding it as {ex.name}.py "
            f"(mkdir mine && cp {path} mine/{ex.name}.py && {run} mine)")


def _check_command(ex, path):
    default = Path(path) == DEFAULT_DIR / f"{ex.name}.py"
    return f"{PROG} check {ex.name}" + ("" if default else f" --file {path}")


def list_exercises():
    """``list``: print each exercise, what the learner derives and its section of
    docs/derivations.md, then how to start, check and train with one; returns 0."""
    width = max(len(n) for n in EXERCISES) + 2
    print("Write a backward pass yourself; the check says which gradient, and which term of "
          "the derivation, is wrong.\n")
    print(f"{'exercise':<{width}}{'you derive':<62}docs/derivations.md")
    for ex in EXERCISES.values():
        print(f"{ex.name:<{width}}{ex.summary:<62}#{ex.section}")
    print(f"\nStart one: {PROG} start layernorm    (writes exercises/layernorm.py)\n"
          f"Check it:  {PROG} check layernorm\n"
          f"Train with yours: python -m experiments.four_variants --tiny --backward exercises")
    return cli.EXIT_OK


def start(ex, folder):
    """``start``: write ``folder/<name>.py`` for the exercise ``ex`` (the forward in full, the
    backward a stub raising NotImplementedError; ``_exercise_templates``); returns 0.

    Raises:
        cli.UsageError: the file exists (it is never overwritten) or ``folder`` cannot be
            written.
    """
    path = folder / f"{ex.name}.py"
    if os.path.lexists(path):
        raise cli.UsageError(f"{path} exists: check it with {_check_command(ex, path)}, or move "
                             f"it away to start again")
    text = _exercise_templates.template(ex, _check_command(ex, path), folder)
    cli.write_outputs(folder, {path.name: text})
    print(f"Wrote {path}: write {ex.function} in it, then\n    {_check_command(ex, path)}")
    return cli.EXIT_OK


def check_file(ex, path):
    """``check`` of the backward in the file ``path`` (``cli.UsageError`` as ``load_backward``)."""
    try:
        return check(ex, load_backward(ex, path), path)
    except LearnerError as e:
        return Verdict("raised", error=e)


def run_check(ex, path):
    """``check``: run ``check_file`` on the learner's file ``path`` and print its verdict, one
    line per gradient (the learner's traceback first when their code raised); returns 0 when
    every gradient is right, ``EXIT_WRONG`` (1) otherwise.

    Raises:
        cli.UsageError: as ``load_backward`` (no such file or function).
    """
    verdict = check_file(ex, path)
    if verdict.error:
        sys.stderr.write(verdict.error.text)
        cli.progress(f"{PROG}: {verdict.error.line}")
    for line in verdict.lines:
        print(line)
    return cli.EXIT_OK if verdict.status == "right" else EXIT_WRONG


EXIT_WRONG = 1   # a wrong answer


def run(argv):
    """The command (``list``, ``start``, ``check``; no command lists); returns the status.

    Raises:
        cli.UsageError: an unknown command or exercise, a missing file or function, a file
            ``start`` would overwrite.
    """
    p = cli.ArgumentParser(prog=PROG, description="Write a backward pass of a layer yourself "
                           "and check it: which gradient, and which term, is wrong.")
    sub = p.add_subparsers(dest="command", metavar="{list,start,check}")
    sub.add_parser("list", help="the exercises (the default)")
    s = sub.add_parser("start", help="write an exercise's file: its forward, the backward to "
                       "write, the steps")
    s.add_argument("name", choices=EXERCISES, metavar="NAME", help=f"the exercise ({PROG} lists them)")
    s.add_argument("--dir", type=cli.path_arg, default=DEFAULT_DIR, metavar="DIR",
                   help="the folder of the file")
    c = sub.add_parser("check", help="check your backward: each gradient right, or what is "
                       "wrong")
    c.add_argument("name", choices=EXERCISES, metavar="NAME", help=f"the exercise ({PROG} lists them)")
    c.add_argument("--file", type=cli.path_arg, metavar="PATH",
                   help="your file (default: exercises/NAME.py)")
    args = p.parse_args(argv)
    if args.command in (None, "list"):
        return list_exercises()
    ex = EXERCISES[args.name]
    if args.command == "start":
        return start(ex, args.dir)
    return run_check(ex, args.file or DEFAULT_DIR / f"{ex.name}.py")


if __name__ == "__main__":
    cli.main(PROG, run)
