"""A learner's own backward passes (``--backward DIR``, the files of
``python -m experiments.exercise``): checked before training, then handed to the model."""
from experiments import exercise
from experiments._exercises import EXERCISES


def check_folder(folder):
    """The learner's files in ``folder``, each checked (``UsageError`` where one cannot train)."""
    return exercise.backward_swaps(folder)


def backward_passes(swaps, called):
    """``{name: fn}`` for ``GPT(backward=...)``: each implemented backward of ``swaps``, which
    adds its name to the set ``called`` when the model calls it; None without ``swaps``."""
    if not swaps:
        return None
    fns = {}
    for s in swaps:
        if s.status != "not implemented":
            fn = exercise.load_backward(EXERCISES[s.name], s.path)

            def recorded(dout, cache, fn=fn, name=s.name):
                called.add(name)
                return fn(dout, cache)
            fns[s.name] = recorded
    return fns


def trained_with(swaps, called):
    """One line: which backward passes of a run were the learner's, and how they fared."""
    return exercise.trained_with(swaps, called)
