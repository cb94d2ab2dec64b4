"""The file ``python -m experiments.exercises start NAME`` writes: the layer's forward in full
(copied from its source, with the helpers it reads), then the backward to write, whose docstring
(the row's ``prompt``, ``catalogue.py``) says what its cache holds, what it returns, and leads through the derivation
without giving it; its body raises ``NotImplementedError``.
"""
import inspect
import re


def _source_of(module, name):
    """The source of ``name`` in ``module``: a function's definition, or a constant's line."""
    obj = getattr(module, name)
    if callable(obj):
        return inspect.getsource(obj)
    return re.search(rf"^{name} = .*$", inspect.getsource(module), re.M).group(0) + "\n"


def template(ex, check_command, folder):
    """The text of the learner's file for exercise ``ex`` in ``folder``; ``check_command``
    checks it."""
    train = (f"train a GPT with it:\n\n    python -m experiments.{ex.study} --tiny --backward "
             f"{folder}\n" if ex.study else "it is yours: no GPT here calls it.\n")
    weights = ", random weights" if ex.weights else ""
    doc = f'''"""Exercise: the backward pass of {ex.title}.

Write `{ex.function}` at the end of this file. Above it is the layer's forward,
`{ex.name}_forward` of layers/{ex.name}.py, in full, so that you can see what it caches. Then

    {check_command}

checks your backward in float64 and float32 on random inputs{weights} and a random upstream
gradient at several shapes, against central differences and the layer's own backward, and
tells you which gradient is wrong and, where it can, what the mistake is in the terms of the
derivation. When every gradient is right, {train}
The check and a training run call the layer's own forward (this copy is for reading) and
hand your backward its cache. The derivation, when you are done or stuck:
{ex.link}.
"""'''
    head = (f"{'Gradient' if len(ex.grads) == 1 else 'Gradients'} {', '.join(ex.grads)} of "
            f"{ex.name}_forward, each of its input's dtype.\n\n    {ex.upstream}: dL/d"
            f"{'out' if ex.upstream == 'dout' else ex.upstream[1:]}, the output's shape.")
    stub = (f'def {ex.function}({ex.upstream}, cache):\n    """{head}\n    {ex.prompt}\n'
            f'    """\n    raise NotImplementedError("{ex.function}: not written yet")')
    constants = "".join(_source_of(ex.module, n) for n in ex.helpers
                        if not callable(getattr(ex.module, n)))
    functions = [_source_of(ex.module, n) for n in ex.helpers if callable(getattr(ex.module, n))]
    blocks = [ex.imports, constants, *functions, inspect.getsource(ex.forward), stub]
    return doc + "\n" + "\n\n\n".join(b.strip("\n") for b in blocks if b) + "\n"
