"""Gradient-check every primitive op of ``minigrad`` and every layer of ``layers``, as a table.

    python -m experiments.gradcheck_report --fast --seed 3 --json report.json

Each op and layer is checked by ``minigrad.gradcheck_report`` (its defaults: eps 1e-6, atol
1e-5, rtol 1e-3) in float64 on small random inputs (non-unit weights, a random Gaussian upstream
gradient, points away from kinks), with full Jacobians or, with ``--fast``, directional
products: a row of input shapes, max |analytical - numerical|, max relative error, PASS/FAIL
and seconds, then a summary and the message of each failure. Exit status 1 when one fails.
"""
import json
import math
import sys
import time

from experiments import cli

PROG = "python -m experiments.gradcheck_report"
with cli.errors(PROG):   # Ctrl-C while NumPy loads: one line
    import numpy as np

    import minigrad
    from minigrad import Tensor, gradcheck_report

    from experiments.exercises.catalogue import EXERCISES, gaussian, off_zero, positive


def split(x):
    """``minigrad.split`` of a (4, 3) Tensor into (1, 3), (2, 3), (1, 3), the middle unused:
    its gradient must be 0."""
    parts = minigrad.split(x, [1, 3], axis=0)     # (1, 3), (2, 3), (1, 3)
    return parts[0] * 2.0 + parts[2]              # the middle piece is unused: gradient 0


# name: (fn, *inputs): an input is a shape (a Gaussian leaf) or a function of the generator
OPS = {
    "add": (lambda a, b: a + b, (2, 3), (3,)),
    "sub": (lambda a, b: a - b, (2, 3), (2, 1)),
    "mul": (lambda a, b: a * b, (2, 3), (1, 3)),
    "div": (lambda a, b: a / b, (2, 3), off_zero(2, 3, margin=0.5)),
    "neg": (lambda a: -a, (2, 3)),
    "pow": (lambda a: a ** 2.5, positive(2, 3)),
    "exp": (lambda a: a.exp(), (2, 3)),
    "log": (lambda a: a.log(), positive(2, 3)),
    "sqrt": (lambda a: a.sqrt(), positive(2, 3)),
    "log1p": (lambda a: a.log1p(), positive(2, 3)),
    "sin": (lambda a: a.sin(), (2, 3)),
    "cos": (lambda a: a.cos(), (2, 3)),
    "square": (lambda a: a.square(), (2, 3)),
    "tanh": (lambda a: a.tanh(), (2, 3)),
    "sigmoid": (lambda a: a.sigmoid(), (2, 3)),
    "relu": (lambda a: a.relu(), off_zero(2, 3)),
    "matmul": (lambda a, b: a @ b, (2, 3, 4), (4, 2)),
    "sum": (lambda a: a.sum(axis=1), (2, 3, 4)),
    "mean": (lambda a: a.mean(axis=-1, keepdims=True), (2, 3, 4)),
    "max": (lambda a: a.max(axis=1), (2, 3, 4)),
    "min": (lambda a: a.min(axis=-1, keepdims=True), (2, 3, 4)),
    "amax": (lambda a: a.amax(dim=(0, 2)), (2, 3, 4)),
    "amin": (lambda a: a.amin(dim=1), (2, 3, 4)),
    "max (dim: values, indices)": (lambda a: a.max(dim=1).values, (2, 3, 4)),
    "abs": (lambda a: a.abs(), off_zero(2, 3)),
    "clamp": (lambda a: a.clamp(-1.0, 1.0), lambda r: Tensor(   # away from the bounds
        np.array([[-1.7, -0.6, 0.3], [0.9, 1.4, -0.2]]), requires_grad=True)),
    "reshape": (lambda a: a.reshape(6, 4), (2, 3, 4)),
    "view": (lambda a: a.view(-1, 4), (2, 3, 4)),
    "permute": (lambda a: a.permute(1, 2, 0), (2, 3, 4)),
    "unsqueeze": (lambda a: a.unsqueeze(1), (2, 3)),
    "squeeze": (lambda a: a.squeeze(1), (2, 1, 3)),
    "flatten": (lambda a: a.flatten(1), (2, 3, 4)),
    "t": (lambda a: a.t(), (2, 3)),
    "transpose": (lambda a: a.transpose(2, 0, 1), (2, 3, 4)),
    "getitem (slice)": (lambda a: a[:, 1:3], (3, 4)),
    "getitem (repeated index)": (lambda a: a[np.array([0, 2, 0, 0])], (3, 4)),
    "concatenate": (lambda a, b: minigrad.concatenate([a, b], axis=0), (2, 3), (1, 3)),
    "stack": (lambda a, b: minigrad.stack([a, b], axis=1), (2, 3), (2, 3)),
    "split": (split, (4, 3)),
    "where": (lambda a, b, c: minigrad.where(c, a, b), (2, 3), (2, 3),
              lambda r: r.random((2, 3)) < 0.5),
    "masked_fill": (lambda a, m: a.masked_fill(m, -1e9), (3, 3),
                    lambda r: np.triu(np.ones((3, 3), bool), 1)),
    "broadcast_to": (lambda a: minigrad.broadcast_to(a, (2, 3, 4)), (3, 1)),
}
LAYERS = {label: entry for ex in EXERCISES.values() for label, entry in ex.gradcheck.items()}  # rows'
CASES = [(n, "op", c) for n, c in OPS.items()] + [(n, "layer", c) for n, c in LAYERS.items()]


def shapes(inputs):
    """``"(2,3) (3,)"``: the shapes of the array inputs, integer and bool ones marked so."""
    arrays = [x.data if isinstance(x, Tensor) else x for x in inputs]
    return " ".join(f"({','.join(map(str, a.shape))}{',' * (a.ndim == 1)})"
                    + {"b": "bool", "i": "int", "u": "int"}.get(a.dtype.kind, "")
                    for a in arrays if isinstance(a, np.ndarray))


def run_cases(seed=0, fast=False, cases=CASES):
    """Gradient-check each ``(name, kind, (fn, *inputs))`` of ``cases`` (case i's inputs drawn
    from ``default_rng([seed, i])``); a dict a case: op, kind, inputs, mode, passed,
    max_abs_err, max_rel_err, seconds, report (the ``minigrad.GradcheckReport``)."""
    rows = []
    for i, (name, kind, (fn, *specs)) in enumerate(cases):
        r = np.random.default_rng([seed, i])
        inputs = [gaussian(*s)(r) if isinstance(s, tuple) else s(r) for s in specs]
        t0 = time.perf_counter()
        rep = gradcheck_report(fn, inputs, fast_mode=fast, seed=seed)
        rows.append(dict(op=name, kind=kind, inputs=shapes(inputs), mode=rep.mode,
                         passed=rep.passed, max_abs_err=rep.max_abs_err,
                         max_rel_err=rep.max_rel_err, seconds=time.perf_counter() - t0, report=rep))
    return rows


def table(rows):
    """The table of ``rows`` (the errors of a check that failed before comparing: nan) and the
    summary line."""
    n, w = (max(len(r[k]) for r in rows) for k in ("op", "inputs"))
    lines = [f"{'op':{n}}  kind   {'inputs':{w}}  mode  max abs err  max rel err  result  seconds"]
    lines.append("-" * len(lines[0]))
    lines += [f"{r['op']:{n}}  {r['kind']:5}  {r['inputs']:{w}}  {r['mode']:4}  "
              f"{r['max_abs_err']:11.2e}  {r['max_rel_err']:11.2e}  "
              f"{'PASS' if r['passed'] else 'FAIL':6}  {r['seconds']:7.3f}" for r in rows]
    failed, ops = sum(not r["passed"] for r in rows), sum(r["kind"] == "op" for r in rows)
    worst = max((r["max_abs_err"] for r in rows if math.isfinite(r["max_abs_err"])),
                default=math.nan)
    return "\n".join(lines) + (
        f"\n\n{len(rows) - failed} of {len(rows)} passed ({ops} ops, {len(rows) - ops} layers), "
        f"{failed} failed; largest max abs err {worst:.2e}; {sum(r['seconds'] for r in rows):.2f} s")


def run(argv):
    """Gradient-check every primitive and layer, print the table (and write ``--json``);
    returns 0 when every check passed, else 1. Bad input: ``cli.UsageError``."""
    p = cli.ArgumentParser(prog=PROG, description="Gradient-check every minigrad primitive and "
                           "every layer in float64 against central differences, as a table.")
    p.add_argument("--fast", action="store_true",
                   help="Gaussian directional products instead of full Jacobians")
    p.add_argument("--seed", type=cli.nonnegative_int, default=0, metavar="N",
                   help="seed of the inputs and upstream gradients")
    p.add_argument("--json", type=cli.path_arg, metavar="PATH", help="also write the rows there")
    args = p.parse_args(argv)
    if args.json:
        cli.output_file(args.json)
    mode = "fast" if args.fast else "slow"
    print(f"gradcheck of every primitive and layer: float64, {mode} mode, seed {args.seed}\n")
    rows = run_cases(args.seed, args.fast, CASES)
    print(table(rows))
    failed = [r for r in rows if not r["passed"]]
    for r in failed:
        print(f"\n--- {r['op']} ---\n{r['report'].message}")
    if args.json:
        keep = [{k: None if isinstance(v, float) and not math.isfinite(v) else v
                 for k, v in r.items() if k != "report"} for r in rows]
        cli.write_outputs(args.json.parent, {args.json.name: json.dumps(
            {"command": "gradcheck_report", "seed": args.seed, "mode": mode,
             "passed": not failed, "rows": keep}, indent=1) + "\n"})
    return 1 if failed else 0


if __name__ == "__main__":
    with cli.errors(PROG):
        sys.exit(run(sys.argv[1:]))
