"""A learner's backward pass: loaded from their file, checked (``grading.py``), and
handed to a training run (``--backward DIR`` of every study).

From Python (a notebook)::

    from experiments.exercises.learner import check
    verdict = check("layernorm", my_layernorm_backward)   # prints what the command prints
    verdict.status, verdict.gradients                      # "right", {"dx": "right", ...}
"""
import sys
import types
from dataclasses import dataclass
from pathlib import Path

from gpt.model import BACKWARDS

from experiments import cli
from experiments.exercises.catalogue import EXERCISES
from experiments.exercises.grading import (LEARNERS, LearnerError, Verdict, guarded,
                                           learner_error, verdict)

COMMAND = "python -m experiments.exercises"


def load(ex, path):
    """Import the file ``path`` and return its ``<name>_backward``.

    Raises:
        cli.UsageError: a folder, no such file, not a .py file, not UTF-8 text, or no such
            function in it.
        LearnerError: the file raised when imported (a SyntaxError, a ``sys.exit()``...).
    """
    path = Path(path)
    why = ("is a folder" if path.is_dir() else "no such file" if not path.exists() else
           "not a regular file (a FIFO or a device)" if not path.is_file() else
           "not a .py file" if path.suffix != ".py" else "")
    if why:
        raise cli.UsageError(f"{path}: {why} ({COMMAND} start {ex.name} writes {ex.name}.py)")
    try:     # an OSError is bad input too: cli.errors says so in one line
        source = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise cli.UsageError(f"cannot read {path} as Python source: {e}") from None
    module = types.ModuleType(f"exercise_{ex.name}")
    module.__file__ = str(path.resolve())
    try:   # compiled from the source every time: never a stale bytecode cache
        with guarded():
            exec(compile(source, module.__file__, "exec"), module.__dict__)
    except LEARNERS as e:
        raise learner_error(e, module.__file__, path, f"importing {path}") from None
    fn = getattr(module, ex.function, None)
    if not callable(fn):
        raise cli.UsageError(f"{path} defines no function {ex.function}")
    return fn


def show(v, prefix=""):
    """Print a verdict: the learner's traceback and its line on stderr, the report on stdout."""
    if v.error:
        sys.stderr.write(v.error.text)
        print(prefix + v.error.line, file=sys.stderr, flush=True)
    for line in v.lines:
        print(line)


def check(name, fn):
    """Check ``fn(dout, cache)`` as the backward of the exercise ``name`` ("layernorm") and print
    the verdict, as ``python -m experiments.exercises check`` does; returns the ``Verdict``.

    Raises:
        ValueError: ``name`` is no exercise. TypeError: ``fn`` is not callable.
    """
    if name not in EXERCISES:
        raise ValueError(f"no exercise {name!r}; the exercises: {', '.join(EXERCISES)}")
    if not callable(fn):
        raise TypeError(f"check: fn must be a function (dout, cache) -> gradients, got "
                        f"{type(fn).__name__}")
    v = verdict(EXERCISES[name], fn, f"your function {getattr(fn, '__name__', '')}".rstrip())
    cell = _cell(fn)
    if cell:                    # name the cell, not the file IPython compiled it to
        code = fn.__code__.co_filename
        v.lines = [line.replace(f"{code}:", f"{cell}:") for line in v.lines]
        if v.error:
            v.error.text = v.error.text.replace(f'File "{code}"', cell).replace(
                f"{code}:", f"{cell}:")
            v.error.line = v.blocker = v.error.line.replace(code, cell)
    show(v)
    return v


def _cell(fn):
    """"Cell In[3]" for a function defined in a notebook's (IPython's) cell 3, else None."""
    ipython = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    filename = getattr(getattr(fn, "__code__", None), "co_filename", None)
    number = getattr(getattr(ipython, "compile", None), "_filename_map", {}).get(filename)
    return f"Cell In[{number}]" if number else None


def check_file(ex, path):
    """The verdict on the backward in the file ``path`` (``cli.UsageError`` as ``load``)."""
    try:
        return verdict(ex, load(ex, path), path, path)
    except LearnerError as e:
        return Verdict("raised", error=e)


# ----------------------------------------------------------------------------- training

@dataclass(frozen=True)
class Swap:
    """A learner's backward for a training run: exercise ``name`` from the file ``path`` (as
    given: worker processes share the working folder) and its check's ``status``: "right",
    "wrong" or "not implemented" (then the layer's own is kept)."""
    name: str
    path: str
    status: str


def check_folder(folder):
    """The learner's files in ``folder`` (``<name>.py`` of every exercise found), each checked;
    one progress line says which are used and how they fared.

    Raises:
        cli.UsageError: ``folder`` is a file, no folder, or holds no exercise file; a file
            whose backward cannot train (it raises, hangs, or returns a wrong count, shape or
            dtype: the engine would stop the run; the line says which).
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise cli.UsageError(f"--backward {folder}: " + (
            "is a file; give the folder holding your NAME.py files" if folder.exists() else
            "no such folder"))
    found = [(ex, folder / f"{ex.name}.py") for ex in EXERCISES.values()
             if (folder / f"{ex.name}.py").is_file()]
    if not found:
        raise cli.UsageError(f"--backward {folder}: no exercise file in it ({COMMAND} start "
                             f"NAME writes NAME.py)")
    swaps = []
    for ex, path in found:
        v = check_file(ex, path)
        if v.status != "not implemented" and v.blocker:
            raise cli.UsageError(f"{path}: {ex.function} cannot train: {v.blocker} "
                                 f"({COMMAND} check {ex.name} --file {path})")
        swaps.append(Swap(ex.name, str(path), v.status))
    cli.progress(f"backward passes from {folder}, checked on the check's cases before "
                 f"training: {trained_with(swaps)}")
    return tuple(swaps)


def backward_passes(swaps, called):
    """``{name: fn}`` for ``GPT(backward=...)``: the learner's backward of each implemented
    swap, the layer's own for every other name of ``gpt.model.BACKWARDS``, each adding its name
    to the set ``called`` when the model calls it. Runs in the training process: the files are
    imported by their paths."""
    mine = {s.name: load(EXERCISES[s.name], s.path) for s in swaps
            if s.status != "not implemented"}

    def recorded(name, fn):
        def backward(dout, cache):
            called.add(name)
            return fn(dout, cache)
        return backward
    return {n: recorded(n, mine.get(n, EXERCISES[n].backward)) for n in BACKWARDS}


def trained_with(swaps, called=None):
    """One line: which backward passes of a run are the learner's, how their checks went and,
    given ``called`` (the names of ``BACKWARDS`` its models called), which went unused."""
    def how(s):
        unused = called is not None and s.name not in called
        return ("right" if s.status == "right" else f"WRONG: {COMMAND} check {s.name} --file "
                f"{s.path}") + (", not called in this run" if unused else "")
    mine = [s for s in swaps if s.status != "not implemented"]
    text = (f"yours: {', '.join(f'{s.name}_backward ({how(s)})' for s in mine)}" if mine
            else "none of yours")
    idle = [s.name for s in swaps if s.status == "not implemented"]
    text += f"; not implemented yet: {', '.join(idle)}" if idle else ""
    rest = set(BACKWARDS if called is None else called) - {s.name for s in mine}
    return text + ("; the layers' own for the rest" if rest else "")
