"""A worked example of a layer's backward, term by term, on numbers small enough to follow.

    python -m experiments.explain layernorm            # one row of C = 4
    python -m experiments.explain attention --size 4   # one head, T = 4
    python -m experiments.explain --list

For one tiny case of the layer (``--seed``; ``--size`` sets the size that matters most, below)
it prints the inputs and output, the random upstream gradient, the quantities the derivation
names (xhat, rstd, dxhat, t, P, ...: the names of ``docs/derivations.md`` and of the exercise
check's messages), then for each gradient every named term of its derivation with its values,
their sum, the layer's own backward, and the same gradient by central differences with the
largest difference.
From Python, ``explain(name, seed, size)`` returns those numbers. An unknown name is one line
on stderr, status 2.
"""
import sys

from experiments import cli

PROG = "python -m experiments.explain"
with cli.errors(PROG):   # Ctrl-C while NumPy loads: one line
    import numpy as np

    from experiments.exercises.catalogue import EXERCISES, Case, as_tuple
    from experiments.exercises.grading import numerical
    from experiments.exercises.terms import Parts, terms_of


# name: (what --size sets, its default, the case: (rng, size) -> (args, kwargs)), from the rows
CASES = {name: ex.example for name, ex in EXERCISES.items()}


def explain(name, seed=0, size=None):
    """The worked example of ``name``'s backward (an exercise of ``python -m
    experiments.exercises list``) on one tiny case, float64.

    Args:
        name (str): the exercise, e.g. "layernorm".
        seed (int): of the case's inputs and upstream gradient.
        size (int | None): the size ``CASES[name]`` names (None: its default), at least 1.

    Returns:
        dict: ``formula`` (the backward as the derivation ends it), ``factor`` {gradient: the
        factor in front of all its terms, multiplied into each}, ``inputs`` {name: array},
        ``quantities`` {name: array} (those the derivation names, from the forward's cache and
        the upstream gradient), ``out``, ``dout``, and ``grads`` {gradient: {"terms": [(label,
        array)], "sum", "backward" (the layer's own), "central" (central differences),
        "max_error" (largest |sum - central|)}}; ``upstream`` the name of ``dout`` in the
        backward (dout, dy, dloss).

    Raises:
        KeyError: an unknown name; ValueError: a size below 1.
    """
    ex = EXERCISES[name]
    what, default, make = CASES[name]
    size = default if size is None else size
    if size < 1:
        raise ValueError(f"size must be at least 1, got {size}")
    r = np.random.default_rng(seed)
    args, kwargs = make(r, size)
    out, cache = ex.forward(*args, **kwargs)
    dout = r.standard_normal(np.shape(out))
    right = as_tuple(ex.backward(dout, cache))
    case = Case(f"seed {seed}", args, kwargs, out, cache, dout, right, {})
    raw = {**ex.parts(dout, cache), "out": out}
    parts = Parts(raw)
    found = terms_of(ex, raw, dict(zip(ex.grads, map(np.shape, right))))
    ex.terms(parts)             # which quantities the terms read (parts.read)
    inputs = dict(zip(ex.inputs, args))
    quantities = {k: np.asarray(parts[k]) for k in sorted(parts.read, key=list(raw).index)
                  if k not in (ex.upstream, "out") and isinstance(parts[k], (np.ndarray, np.generic))
                  and not any(np.shape(parts[k]) == np.shape(a) and np.array_equal(parts[k], a)
                              for a in args)}
    quantities.update({k: np.asarray(f(parts)) for k, f in ex.shown.items()})
    grads = {}
    for j, g in enumerate(ex.grads):
        total = sum(t for _, t in found[g])
        central = numerical(ex, case, ex.inputs.index(ex.wrt[j]))
        grads[g] = {"terms": found[g], "sum": total, "backward": right[j], "central": central,
                    "max_error": float(np.max(np.abs(total - central), initial=0.0))}
    return {"name": name, "title": ex.title, "section": ex.section, "seed": seed, "size": size,
            "size_is": what, "formula": ex.formula, "factor": ex.factor, "upstream": ex.upstream,
            "inputs": inputs,
            "kwargs": kwargs, "quantities": quantities, "out": out, "dout": dout, "grads": grads}


def _fmt(a):
    """An array as printed: 4 decimals, or 4 significant digits (1.234e-04) when its largest
    entry is below 0.01, so that small values keep their digits."""
    a = np.asarray(a)
    if a.dtype.kind == "i":
        return np.array2string(a, max_line_width=100)
    a = a.astype(float)
    if 0 < np.max(np.abs(a), initial=0) < 0.01:
        return np.array2string(a, max_line_width=100,
                               formatter={"float_kind": lambda v: f"{v + 0.0: .3e}"})
    a = np.round(a, 4) + 0.0     # + 0.0: a -0.00001 shows as 0.0000, not -0.0000
    return np.array2string(a, precision=4, suppress_small=True, floatmode="fixed",
                           max_line_width=100)


def report(e):
    """The lines ``python -m experiments.explain`` prints for ``explain``'s result ``e``."""
    def row(label, a):
        pad = " " * 24
        text = _fmt(a).replace("\n", "\n" + pad)
        return f"  {label:<22}{text}" if len(label) <= 20 else f"  {label}\n{pad}{text}"
    opts = ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}"
                     for k, v in e["kwargs"].items())
    lines = [f"{e['title']}: a worked example of its backward (docs/derivations.md#"
             f"{e['section']}), seed {e['seed']}, size {e['size']}: {e['size_is']}"
             + (f"; {opts}" if opts else ""), f"The backward: {e['formula']}", "", "Inputs:"]
    lines += [row(k, v) for k, v in e["inputs"].items()] + [row("out", e["out"])]
    lines += ["", "Upstream gradient (random):", row(e["upstream"], e["dout"])]
    if e["quantities"]:
        lines += ["", "The quantities the derivation names (from the forward's cache and the "
                      "upstream gradient):"]
        lines += [row(k, v) for k, v in e["quantities"].items()]
    for g, d in e["grads"].items():
        factor = e["factor"].get(g)
        lines += ["", f"{g}, term by term" + (f" (each times {factor}, the factor in front of them "
                                              f"all):" if factor else ":")]
        lines += [row(label, t) for label, t in d["terms"]]
        lines += [row("sum of the terms", d["sum"]),
                  row("the layer's backward", d["backward"]),
                  row("central differences", d["central"]),
                  f"  largest |sum of the terms - central differences|: {d['max_error']:.1e}"]
    return lines


def run(argv):
    """``python -m experiments.explain NAME [--seed S] [--size N]``; ``--list`` names them."""
    p = cli.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    p.add_argument("name", nargs="?", metavar="NAME", help=f"one of: {', '.join(CASES)}")
    p.add_argument("--seed", type=cli.bounded_int(0), default=0, help="of the case's numbers")
    p.add_argument("--size", type=cli.bounded_int(1, 12), metavar="N",
                   help="the size that matters most (see --list); default: the smallest that "
                        "shows every term")
    p.add_argument("--list", action="store_true", help="the layers and what --size sets")
    args = p.parse_args(argv)
    if args.list or args.name is None:
        for name, (what, default, _) in CASES.items():
            print(f"{name:<15}--size: {what} (default {default})")
        return 0
    if args.name not in CASES:
        raise cli.UsageError(f"unknown layer {args.name!r}; one of: {', '.join(CASES)}")
    print("\n".join(report(explain(args.name, args.seed, args.size))))
    return 0


if __name__ == "__main__":
    with cli.errors(PROG):
        sys.exit(run(sys.argv[1:]))
