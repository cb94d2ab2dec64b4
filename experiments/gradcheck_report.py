"""Gradient-check every primitive op of ``minigrad`` and every layer of ``layers``, as a table.

    python -m experiments.gradcheck_report --fast --seed 3 --json report.json

Each op and layer is checked by ``minigrad.gradcheck_report`` in float64 on small random inputs
(non-unit weights, a random Gaussian upstream gradient, points away from kinks), in slow mode
(full Jacobians) or ``--fast`` (directional products): one row of input shapes, max ``|analytical
- numerical|``, max relative error (over ``max(|numerical|, atol)``), PASS/FAIL and seconds, then
a summary and the failure messages. Exit status 1 when a check fails. The settings, input
builders and table are shared with ``experiments.break_backward``.
"""
import argparse
import math
import os
import time
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

import minigrad
from minigrad import Tensor, gradcheck_report
from layers import functional as F
from layers.rope import build_rope_cache

from experiments import cli

PROG = "python -m experiments.gradcheck_report"
EPS, ATOL, RTOL = 1e-6, 1e-5, 1e-3   # minigrad.gradcheck's defaults (PyTorch's eps and atol)
# (B, T) token indices with repeats (1 twice, 3 three times) and unused rows (2, 4) of a
# 5-row table: an embedding backward must accumulate the repeats and leave the rest at 0.
EMBEDDING_INDEX = np.array([[1, 3, 1], [0, 3, 3]])
REPEATED_INDEX = np.array([0, 2, 0, 0])     # rows 0 three times, 2 once, 1 never


# ----------------------------------------------------------------------------- shared

def leaf(a) -> Tensor:
    """A float64 leaf that requires grad."""
    return Tensor(np.asarray(a, dtype=np.float64), requires_grad=True)


def away_from_zero(rng: np.random.Generator, shape, margin: float = 0.2) -> np.ndarray:
    """Gaussian entries pushed at least ``margin`` away from 0 (kinks such as ReLU's, poles)."""
    z = rng.standard_normal(shape)
    return np.sign(z) * (margin + np.abs(z))


def check(fn: Callable, inputs: list, seed: int, fast: bool = False):
    """``minigrad.gradcheck_report`` of ``fn`` at ``inputs`` with ``EPS, ATOL, RTOL``; ``seed``
    seeds the upstream gradient (and the directions in fast mode)."""
    return gradcheck_report(fn, inputs, eps=EPS, atol=ATOL, rtol=RTOL, fast_mode=fast, seed=seed)


def format_table(headers, rows, right) -> str:
    """An aligned plain-text table: a header line, a rule of dashes, one line per row of string
    cells; ``right[i]`` right-aligns column i. No trailing spaces, no final newline."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells):
        return "  ".join(c.rjust(w) if rj else c.ljust(w)
                         for c, w, rj in zip(cells, widths, right)).rstrip()

    return "\n".join([line(headers), "  ".join("-" * w for w in widths)] + [line(r) for r in rows])


def fmt_err(x: float) -> str:
    """An error as ``1.23e-10``; ``nan`` / ``inf`` spelled out (a check failed before comparing)."""
    return f"{x:.2e}" if math.isfinite(x) else str(x)


def json_number(x: float):
    """``x`` as a float, or None when it is NaN or infinite (strict JSON has neither)."""
    return float(x) if math.isfinite(x) else None


def json_arg(text: str) -> Path:
    """``--json PATH``: a file path in an existing folder (not a directory, FIFO or device)."""
    p = cli.path_arg(text)
    if os.path.lexists(p) and not p.is_file():
        raise argparse.ArgumentTypeError(f"{p} is not a regular file; give a file path")
    if not p.parent.is_dir():
        raise argparse.ArgumentTypeError(f"directory {p.parent} does not exist")
    return p


def parse_args(prog: str, description: str, argv, fast: bool = False):
    """The gradient-check commands' options: ``--seed``, ``--json`` (and ``--fast``)."""
    p = cli.ArgumentParser(prog=prog, description=description)
    if fast:
        p.add_argument("--fast", action="store_true",
                       help="fast mode: Gaussian directional products instead of full Jacobians")
    p.add_argument("--seed", type=cli.nonnegative_int, default=0, metavar="N",
                   help="seed of the inputs and upstream gradients")
    p.add_argument("--json", type=json_arg, default=None, metavar="PATH",
                   help="also write the rows as JSON to PATH")
    return p.parse_args(argv)


# ----------------------------------------------------------------------------- the cases

class OpCase(NamedTuple):
    """One row: the op or layer name as shown, its kind (``"op"``: a minigrad primitive,
    ``"layer"``: a hand-derived layer) and ``build(rng) -> (inputs, fn)`` (float64 leaves that
    require grad, plus constants; ``fn(*inputs) -> Tensor``)."""

    name: str
    kind: str
    build: Callable


def _randn(rng, *shape) -> Tensor:
    return leaf(rng.standard_normal(shape))


def _away_from_zero(rng, *shape, margin=0.2) -> Tensor:
    return leaf(away_from_zero(rng, shape, margin))


def _positive(rng, *shape) -> Tensor:
    return leaf(rng.uniform(0.5, 2.0, shape))


def _gain(rng, n) -> Tensor:
    """A random non-unit gain (unit gains hide mistakes)."""
    return leaf(rng.normal(1.0, 0.5, n))


def _w(rng, *shape, scale=0.5) -> Tensor:
    return leaf(scale * rng.standard_normal(shape))


def _split_fn(x):
    parts = minigrad.split(x, [1, 3], axis=0)     # (1, 3), (2, 3), (1, 3)
    return parts[0] * 2.0 + parts[2]              # the middle piece is unused: gradient 0


PRIMITIVES = (
    OpCase("add", "op", lambda r: ([_randn(r, 2, 3), _randn(r, 3)], lambda a, b: a + b)),
    OpCase("sub", "op", lambda r: ([_randn(r, 2, 3), _randn(r, 2, 1)], lambda a, b: a - b)),
    OpCase("mul", "op", lambda r: ([_randn(r, 2, 3), _randn(r, 1, 3)], lambda a, b: a * b)),
    OpCase("div", "op", lambda r: ([_randn(r, 2, 3), _away_from_zero(r, 2, 3, margin=0.5)],
                                   lambda a, b: a / b)),
    OpCase("neg", "op", lambda r: ([_randn(r, 2, 3)], lambda a: -a)),
    OpCase("pow", "op", lambda r: ([_positive(r, 2, 3)], lambda a: a ** 2.5)),
    OpCase("exp", "op", lambda r: ([_randn(r, 2, 3)], lambda a: a.exp())),
    OpCase("log", "op", lambda r: ([_positive(r, 2, 3)], lambda a: a.log())),
    OpCase("sqrt", "op", lambda r: ([_positive(r, 2, 3)], lambda a: a.sqrt())),
    OpCase("tanh", "op", lambda r: ([_randn(r, 2, 3)], lambda a: a.tanh())),
    OpCase("sigmoid", "op", lambda r: ([_randn(r, 2, 3)], lambda a: a.sigmoid())),
    OpCase("relu", "op", lambda r: ([_away_from_zero(r, 2, 3)], lambda a: a.relu())),
    OpCase("matmul", "op", lambda r: ([_randn(r, 2, 3, 4), _randn(r, 4, 2)], lambda a, b: a @ b)),
    OpCase("sum", "op", lambda r: ([_randn(r, 2, 3, 4)], lambda a: a.sum(axis=1))),
    OpCase("mean", "op", lambda r: ([_randn(r, 2, 3, 4)],
                                    lambda a: a.mean(axis=-1, keepdims=True))),
    OpCase("max", "op", lambda r: ([_randn(r, 2, 3, 4)], lambda a: a.max(axis=1))),
    OpCase("min", "op", lambda r: ([_randn(r, 2, 3, 4)], lambda a: a.min(axis=-1, keepdims=True))),
    OpCase("amax", "op", lambda r: ([_randn(r, 2, 3, 4)], lambda a: a.amax(dim=(0, 2)))),
    OpCase("amin", "op", lambda r: ([_randn(r, 2, 3, 4)], lambda a: a.amin(dim=1))),
    OpCase("max (dim: values, indices)", "op",
           lambda r: ([_randn(r, 2, 3, 4)], lambda a: a.max(dim=1).values)),
    OpCase("abs", "op", lambda r: ([_away_from_zero(r, 2, 3)], lambda a: a.abs())),
    OpCase("clamp", "op", lambda r: ([leaf(np.array([[-1.7, -0.6, 0.3], [0.9, 1.4, -0.2]]))],
                                     lambda a: a.clamp(-1.0, 1.0))),   # away from the bounds
    OpCase("reshape", "op", lambda r: ([_randn(r, 2, 3, 4)], lambda a: a.reshape(6, 4))),
    OpCase("view", "op", lambda r: ([_randn(r, 2, 3, 4)], lambda a: a.view(-1, 4))),
    OpCase("permute", "op", lambda r: ([_randn(r, 2, 3, 4)], lambda a: a.permute(1, 2, 0))),
    OpCase("unsqueeze", "op", lambda r: ([_randn(r, 2, 3)], lambda a: a.unsqueeze(1))),
    OpCase("squeeze", "op", lambda r: ([_randn(r, 2, 1, 3)], lambda a: a.squeeze(1))),
    OpCase("flatten", "op", lambda r: ([_randn(r, 2, 3, 4)], lambda a: a.flatten(1))),
    OpCase("t", "op", lambda r: ([_randn(r, 2, 3)], lambda a: a.t())),
    OpCase("transpose", "op", lambda r: ([_randn(r, 2, 3, 4)], lambda a: a.transpose(2, 0, 1))),
    OpCase("getitem (slice)", "op", lambda r: ([_randn(r, 3, 4)], lambda a: a[:, 1:3])),
    OpCase("getitem (repeated index)", "op",
           lambda r: ([_randn(r, 3, 4)], lambda a: a[REPEATED_INDEX])),
    OpCase("concatenate", "op", lambda r: ([_randn(r, 2, 3), _randn(r, 1, 3)],
                                           lambda a, b: minigrad.concatenate([a, b], axis=0))),
    OpCase("stack", "op", lambda r: ([_randn(r, 2, 3), _randn(r, 2, 3)],
                                     lambda a, b: minigrad.stack([a, b], axis=1))),
    OpCase("split", "op", lambda r: ([_randn(r, 4, 3)], _split_fn)),
    OpCase("where", "op", lambda r: ([_randn(r, 2, 3), _randn(r, 2, 3), r.random((2, 3)) < 0.5],
                                     lambda a, b, c: minigrad.where(c, a, b))),
    OpCase("masked_fill", "op", lambda r: ([_randn(r, 3, 3), np.triu(np.ones((3, 3), bool), 1)],
                                           lambda a, m: a.masked_fill(m, -1e9))),
    OpCase("broadcast_to", "op", lambda r: ([_randn(r, 3, 1)],
                                            lambda a: minigrad.broadcast_to(a, (2, 3, 4)))),
)


def _rope_case(r):
    cos, sin = build_rope_cache(6, 8, dtype=np.float64)        # (1, 1, T, hs), constants
    return [_randn(r, 2, 2, 6, 8), cos, sin], F.apply_rope     # x (B, H, T, hs)


def _cross_entropy_case(r):
    targets = r.integers(0, 11, size=6)                         # (N,) int, a constant
    return [_randn(r, 6, 11), targets], F.cross_entropy         # logits (N, V)


def _cross_entropy_options_case(reduction):
    def build(r):
        targets = r.integers(0, 11, size=6)                     # (N,) int, a constant
        targets[2] = -100                                       # one ignored row
        return [_randn(r, 6, 11), targets], lambda x, t: F.cross_entropy(
            x, t, reduction=reduction, ignore_index=-100, label_smoothing=0.1)
    return build


def _attention_case(causal):
    def build(r):
        q, k, v = _randn(r, 2, 2, 5, 4), _randn(r, 2, 2, 5, 4), _randn(r, 2, 2, 5, 4)  # (B,H,T,hs)
        return [q, k, v], lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return build



LAYERS = (
    OpCase("layer_norm", "layer", lambda r: ([_randn(r, 2, 4, 8), _gain(r, 8), _w(r, 8)],
                                             lambda x, w, b: F.layer_norm(x, 8, w, b))),
    OpCase("rms_norm", "layer", lambda r: ([_randn(r, 2, 4, 8), _gain(r, 8)],
                                           lambda x, w: F.rms_norm(x, 8, w, eps=1e-6))),
    OpCase("gelu", "layer", lambda r: ([leaf(2 * r.standard_normal((2, 4, 8)))],
                                       lambda x: F.gelu(x, approximate="tanh"))),
    OpCase("gelu (exact erf)", "layer", lambda r: ([leaf(2 * r.standard_normal((2, 4, 8)))],
                                                   F.gelu)),
    OpCase("relu2", "layer", lambda r: ([_away_from_zero(r, 2, 4, 8)], F.relu2)),
    OpCase("silu", "layer", lambda r: ([leaf(2 * r.standard_normal((2, 4, 8)))], F.silu)),
    OpCase("swiglu", "layer", lambda r: ([_randn(r, 2, 3, 8), _w(r, 21, 8), _w(r, 21, 8),
                                          _w(r, 8, 21)], F.swiglu)),    # H = int(8 * 8/3)
    OpCase("apply_rope", "layer", _rope_case),
    OpCase("softmax", "layer", lambda r: ([leaf(2 * r.standard_normal((2, 3, 7)))], F.softmax)),
    OpCase("cross_entropy", "layer", _cross_entropy_case),
    OpCase("cross_entropy (sum, ignore_index, label_smoothing)", "layer",
           _cross_entropy_options_case("sum")),
    OpCase("cross_entropy (none, ignore_index, label_smoothing)", "layer",
           _cross_entropy_options_case("none")),
    OpCase("scaled_dot_product_attention (causal)", "layer", _attention_case(True)),
    OpCase("scaled_dot_product_attention", "layer", _attention_case(False)),
    OpCase("linear", "layer", lambda r: ([_randn(r, 2, 4, 8), _w(r, 6, 8), _w(r, 6)], F.linear)),
    OpCase("embedding", "layer", lambda r: ([EMBEDDING_INDEX, _randn(r, 5, 4)], F.embedding)),
)

ALL_CASES = PRIMITIVES + LAYERS

def _shapes(inputs) -> str:
    """``"(2,3) (3,)"``: the shapes of the array inputs; integer / bool ones marked so."""
    out = []
    for x in inputs:
        a = x.data if isinstance(x, Tensor) else x
        if isinstance(a, np.ndarray):
            kind = {"b": "bool", "i": "int", "u": "int"}.get(a.dtype.kind, "")
            out.append("(" + ",".join(map(str, a.shape)) + ("," if a.ndim == 1 else "") + ")"
                       + kind)
    return " ".join(out)


def run_cases(seed: int = 0, fast: bool = False, cases=None) -> list:
    """Gradient-check each case (default ``ALL_CASES``; case i's inputs from
    ``default_rng([seed, i])``); one dict a case: ``name, kind, shapes, mode, passed, check,
    max_abs_err, max_rel_err, seconds, report`` (the ``minigrad.GradcheckReport``)."""
    rows = []
    for i, case in enumerate(ALL_CASES if cases is None else cases):
        inputs, fn = case.build(np.random.default_rng([seed, i]))
        t0 = time.perf_counter()
        rep = check(fn, inputs, seed, fast)
        rows.append(dict(name=case.name, kind=case.kind, shapes=_shapes(inputs), mode=rep.mode,
                         passed=rep.passed, check=rep.check, max_abs_err=rep.max_abs_err,
                         max_rel_err=rep.max_rel_err, seconds=time.perf_counter() - t0,
                         report=rep))
    return rows


def render(rows: list) -> str:
    """The table followed by the one-line summary."""
    cells = [[r["name"], r["kind"], r["shapes"], r["mode"], fmt_err(r["max_abs_err"]),
              fmt_err(r["max_rel_err"]), "PASS" if r["passed"] else "FAIL",
              f"{r['seconds']:.3f}"] for r in rows]
    n_fail = sum(not r["passed"] for r in rows)
    n_ops = sum(r["kind"] == "op" for r in rows)
    worst = max((r["max_abs_err"] for r in rows if math.isfinite(r["max_abs_err"])),
                default=float("nan"))
    return (format_table(["op", "kind", "inputs", "mode", "max abs err", "max rel err", "result",
                          "seconds"], cells, [False] * 4 + [True, True, False, True])
            + f"\n\n{len(rows) - n_fail} of {len(rows)} passed ({n_ops} ops, {len(rows) - n_ops} "
              f"layers), {n_fail} failed; largest max abs err {fmt_err(worst)}; "
              f"{sum(r['seconds'] for r in rows):.2f} s")


def run(argv=None) -> int:
    """Gradient-check every primitive and layer in float64 against central differences and
    print the table of errors (and ``--json``).

    Args:
        argv (list[str] | None): the command's arguments (default ``sys.argv[1:]``).
    Returns:
        int: ``cli.EXIT_OK`` when every check passed, else 1.
    Raises:
        cli.UsageError: bad input (``cli.main`` prints one line, status 2).
    """
    args = parse_args(PROG, "Gradient-check every minigrad primitive and every layer in float64 "
                      "against central differences, and print a table of the errors.", argv,
                      fast=True)
    mode = "fast" if args.fast else "slow"
    print(f"gradcheck of every primitive and layer: float64, {mode} mode, seed {args.seed}, eps "
          f"{EPS:g}, atol {ATOL:g}, rtol {RTOL:g}\n")
    rows = run_cases(seed=args.seed, fast=args.fast)
    print(render(rows))
    failed = [r for r in rows if not r["passed"]]
    for r in failed:
        print(f"\n--- {r['name']} ---\n{r['report'].message}")
    if args.json is not None:
        cli.write_json(args.json, dict(
            command="gradcheck_report", seed=args.seed, mode=mode, eps=EPS, atol=ATOL,
            rtol=RTOL, passed=not failed,
            rows=[dict(op=r["name"], kind=r["kind"], inputs=r["shapes"], mode=r["mode"],
                       passed=r["passed"], check=r["check"],
                       max_abs_err=json_number(r["max_abs_err"]),
                       max_rel_err=json_number(r["max_rel_err"]),
                       seconds=round(r["seconds"], 6)) for r in rows]))
    return 1 if failed else cli.EXIT_OK


if __name__ == "__main__":
    cli.main(PROG, run)
