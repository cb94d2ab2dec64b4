"""Break a backward pass on purpose, and watch the gradient check catch it.

    python -m experiments.exercises.break_backward --seed 3 --json break.json

Each layer's forward is paired with its own backward, and with backward passes built from the
named terms of ``terms.py`` with ONE term left out or its sign flipped (each row's ``breaks``,
``catalogue.py``: LayerNorm
without its mean or its variance term, RoPE rotating the wrong way, an embedding that keeps one
gradient of a repeated row, ...), the other terms and gradients right. Each is
``minigrad.gradcheck_report``-ed in float64 with its settings (slow mode: full Jacobians by
central differences, then a random upstream gradient) on the exercise's first case (random
non-unit weights; the inputs from ``--seed``). A row: layer, variant, verdict, largest absolute
and relative error, where the worst entry is. PASS: a right backward passes; CAUGHT: a wrong one
fails; MISSED, WRONGLY FAILED otherwise. Exit status 0 when every row is PASS or CAUGHT, else 1.
"""
import json
import math
import sys

from experiments import cli

PROG = "python -m experiments.exercises.break_backward"
with cli.errors(PROG):   # Ctrl-C while NumPy loads: one line
    import numpy as np

    from minigrad import Tensor, from_pair, gradcheck_report

    from experiments.exercises.catalogue import EXERCISES, as_tuple, make_cases
    from experiments.exercises.terms import terms_of

BREAKS = tuple((ex.name, *b) for ex in EXERCISES.values() for b in ex.breaks)   # from the rows:
# (exercise, gradient, term (from 1), factor): 0 leaves it out, -1 flips its sign



def broken(ex, grad, term, factor):
    """``ex``'s backward as the sum of its named terms, term ``term`` of ``grad`` times
    ``factor``."""
    def backward(dout, cache):
        right = as_tuple(ex.backward(dout, cache))
        found = terms_of(ex, ex.parts(dout, cache), dict(zip(ex.grads, map(np.shape, right))))
        grads = tuple(sum((factor if (g, i) == (grad, term) else 1) * a
                          for i, (_, a) in enumerate(found[g], 1)) for g in ex.grads)
        return grads if len(grads) > 1 else grads[0]
    return backward


def _row(ex, wrong, seed):
    """The gradient check of ``ex``'s own backward (``wrong`` None) or of a break of it."""
    case = make_cases(ex, seed)[0]
    F = from_pair(ex.forward, broken(ex, *wrong) if wrong else ex.backward, wrt=ex.wrt)
    inputs = [Tensor(a, requires_grad=True) if n in ex.wrt else a
              for n, a in zip(ex.inputs, case.args)]
    report = gradcheck_report(lambda *xs: F.apply(*xs, **case.kwargs), inputs, seed=seed)
    g, term, factor = wrong or ("", 0, 1)
    label = terms_of(ex, ex.parts(case.dout, case.cache), dict(zip(
        ex.grads, map(np.shape, case.right))))[g][term - 1][0] if wrong else ""
    return {"layer": ex.title, "broken": bool(wrong),
            "variant": f"{g} term {term} {'left out' if factor == 0 else 'sign flipped'}: "
                       f"{label.rsplit(' (', 1)[0]}" if wrong else "right",
            "verdict": ("MISSED" if report.passed else "CAUGHT") if wrong else (
                "PASS" if report.passed else "WRONGLY FAILED"),
            "check": report.check, "max_abs_err": report.max_abs_err,
            "max_rel_err": report.max_rel_err, "expected_input": g[1:] or None,
            "where": "-" if report.worst is None else
            f"{ex.inputs[report.worst[0]]}[{', '.join(map(str, report.worst[1]))}]"}


def rows(seed=0):
    """Each layer of ``BREAKS``, right and broken, gradient-checked: a dict per row."""
    return [_row(ex, wrong, seed) for name, ex in EXERCISES.items()
            for wrong in [None] * any(b[0] == name for b in BREAKS) + [
                b[1:] for b in BREAKS if b[0] == name]]


def render(found):
    """The table and the one-line summary."""
    head = ("layer", "variant", "verdict", "max abs err", "max rel err", "where")
    cells = [[r["layer"], r["variant"], r["verdict"], f"{r['max_abs_err']:.2e}",
              f"{r['max_rel_err']:.2e}", r["where"]] for r in found]
    widths = [max(len(str(c[i])) for c in cells + [head]) for i in range(len(head))]
    lines = ["  ".join(f"{c:<{w}}" for c, w in zip(row, widths)).rstrip()
             for row in [head, ["-" * w for w in widths]] + cells]
    right = [r for r in found if not r["broken"]]
    wrong = [r for r in found if r["broken"]]
    caught, passed = (sum(r["verdict"] == v for r in found) for v in ("CAUGHT", "PASS"))
    return "\n".join(lines) + (
        f"\n\n{passed} of {len(right)} right backward passes pass, {caught} of {len(wrong)} "
        f"wrong ones caught; {len(wrong) - caught} missed, {len(right) - passed} wrongly failed")


def run(argv):
    """The command: gradient-check every row, print the table; 0 when every wrong backward was
    caught and every right one passed, else 1."""
    p = cli.ArgumentParser(prog=PROG, description="Gradient-check backward passes with one "
                           "term left out or flipped, beside the right ones.")
    p.add_argument("--seed", type=cli.nonnegative_int, default=0, help="the inputs' seed")
    p.add_argument("--json", type=cli.path_arg, metavar="PATH", help="also write the rows here")
    args = p.parse_args(argv)
    if args.json:
        cli.output_file(args.json)
    print(f"gradcheck of right and deliberately wrong backward passes: float64, slow mode, seed "
          f"{args.seed}\n")
    found = rows(args.seed)
    print(render(found))
    ok = all(r["verdict"] in ("PASS", "CAUGHT") for r in found)
    if args.json:
        clean = [{k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                  for k, v in r.items()} for r in found]
        cli.write_outputs(args.json.parent, {args.json.name: json.dumps(
            {"command": "break_backward", "seed": args.seed, "ok": ok, "rows": clean},
            indent=2) + "\n"})
    return 0 if ok else 1


if __name__ == "__main__":
    with cli.errors(PROG):
        sys.exit(run(sys.argv[1:]))
