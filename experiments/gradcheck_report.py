"""Gradient-check every primitive op of ``minigrad`` and every layer of ``layers``, as a table.

Usage::

    python -m experiments.gradcheck_report              # slow mode: full Jacobians
    python -m experiments.gradcheck_report --fast       # fast mode: directional products
    python -m experiments.gradcheck_report --seed 3 --json report.json

For each op (add, sub, ..., broadcast_to) and each layer (layer_norm, ..., embedding) it runs
``minigrad.gradcheck_report`` in float64 on small random inputs (random non-unit weights, the
checker's random Gaussian upstream gradient, test points away from kinks) and prints one row:
op, input shapes, mode, max absolute error, max relative error, PASS/FAIL and seconds, then a
one-line summary. Errors are those of ``minigrad.gradcheck``: ``abs err = |analytical -
numerical|`` and ``rel err = abs err / max(|numerical|, atol)``, maximised over every compared
entry (Jacobian entries and one J^T G in slow mode; directional products in fast mode).

Exit status: 0 when every check passes; 1 when any fails (the failure messages follow the
table on stdout); 2 on bad input (one line on stderr, nothing run).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

import minigrad
from minigrad import Tensor
from layers import functional as F
from layers.rope import build_rope_cache

from experiments._cli import ArgumentParser, run_main, write_json
from experiments._gradchecks import (EMBEDDING_INDEX, EPS, ATOL, RTOL, add_seed_and_json_options,
                                     away_from_zero, check, fmt_err, format_table,
                                     json_number, leaf, start)

PROG = "python -m experiments.gradcheck_report"
EXIT_OK, EXIT_FAIL = 0, 1

__all__ = ["OpCase", "PRIMITIVES", "LAYERS", "ALL_CASES", "run", "format_table",
           "main"]


# ----------------------------------------------------------------------------- the cases

@dataclass(frozen=True)
class OpCase:
    """One row of the report.

    Attributes:
        name: the op or layer name as the table shows it (e.g. ``"getitem (repeated index)"``).
        kind: ``"op"`` (a minigrad primitive) or ``"layer"`` (a hand-derived layer).
        build: ``rng -> (inputs, fn)``; ``inputs`` as ``minigrad.gradcheck`` takes them (float64
            Tensors that require grad, plus constants), ``fn(*inputs) -> Tensor``.
    """

    name: str
    kind: str
    build: Callable[[np.random.Generator], Tuple[list, Callable]]


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


REPEATED_INDEX = np.array([0, 2, 0, 0])     # rows 0 three times, 2 once, 1 never


def _split_fn(x):
    parts = minigrad.split(x, [1, 3], axis=0)     # (1, 3), (2, 3), (1, 3)
    return parts[0] * 2.0 + parts[2]              # the middle piece is unused: gradient 0


PRIMITIVES: Tuple[OpCase, ...] = (
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



LAYERS: Tuple[OpCase, ...] = (
    OpCase("layer_norm", "layer", lambda r: ([_randn(r, 2, 4, 8), _gain(r, 8), _w(r, 8)],
                                             F.layer_norm)),
    OpCase("rms_norm", "layer", lambda r: ([_randn(r, 2, 4, 8), _gain(r, 8)], F.rms_norm)),
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

ALL_CASES: Tuple[OpCase, ...] = PRIMITIVES + LAYERS


def _shapes(inputs) -> str:
    """``"(2,3) (3,)"``: the shapes of the array inputs; integer / bool ones marked so."""
    out = []
    for x in inputs:
        a = x.data if isinstance(x, Tensor) else x
        if isinstance(a, np.ndarray):
            s = "(" + ",".join(str(d) for d in a.shape) + ("," if a.ndim == 1 else "") + ")"
            if a.dtype.kind == "b":
                s += "bool"
            elif a.dtype.kind in "iu":
                s += "int"
            out.append(s)
    return " ".join(out)


def run(seed: int = 0, fast: bool = False, cases: Optional[Sequence[OpCase]] = None) -> List[dict]:
    """Gradient-check each case; one dict per case.

    Args:
        seed: seeds each case's inputs (``default_rng([seed, i])`` for case i) and the
            checker's upstream gradient and directions.
        fast: fast mode (directional products) instead of full Jacobians.
        cases: the cases to run (default: ``ALL_CASES``).

    Returns:
        list of dicts with keys ``name, kind, shapes, mode, passed, check, max_abs_err,
        max_rel_err, seconds, report`` (``report`` the ``minigrad.GradcheckReport``).
    """
    rows = []
    for i, case in enumerate(ALL_CASES if cases is None else cases):
        rng = np.random.default_rng([seed, i])
        inputs, fn = case.build(rng)
        t0 = time.perf_counter()
        rep = check(fn, inputs, seed, fast)
        dt = time.perf_counter() - t0
        rows.append(dict(name=case.name, kind=case.kind, shapes=_shapes(inputs), mode=rep.mode,
                         passed=rep.passed, check=rep.check, max_abs_err=rep.max_abs_err,
                         max_rel_err=rep.max_rel_err, seconds=dt, report=rep))
    return rows


def render(rows: List[dict]) -> str:
    """The table followed by the one-line summary."""
    headers = ["op", "kind", "inputs", "mode", "max abs err", "max rel err", "result", "seconds"]
    right = [False, False, False, False, True, True, False, True]
    cells = [[r["name"], r["kind"], r["shapes"], r["mode"], fmt_err(r["max_abs_err"]),
              fmt_err(r["max_rel_err"]), "PASS" if r["passed"] else "FAIL",
              f"{r['seconds']:.3f}"] for r in rows]
    n_fail = sum(not r["passed"] for r in rows)
    n_ops = sum(r["kind"] == "op" for r in rows)
    total = sum(r["seconds"] for r in rows)
    worst_abs = max((r["max_abs_err"] for r in rows if math.isfinite(r["max_abs_err"])),
                    default=float("nan"))
    summary = (f"{len(rows) - n_fail} of {len(rows)} passed ({n_ops} ops, {len(rows) - n_ops} "
               f"layers), {n_fail} failed; largest max abs err {fmt_err(worst_abs)}; "
               f"{total:.2f} s")
    return format_table(headers, cells, right) + "\n\n" + summary


def build_parser() -> ArgumentParser:
    """The command's argument parser (one-line errors, exit status 2)."""
    p = ArgumentParser(
        prog=PROG,
        description="Gradient-check every minigrad primitive and every layer in float64 against "
                    "central differences, and print a table of the errors.",
        epilog="Exit status: 0 all pass; 1 a check failed; 2 bad input or stdout not "
               "writable (one line on stderr); 130 interrupted.")
    p.add_argument("--fast", action="store_true",
                   help="fast mode: Gaussian directional products instead of full Jacobians")
    add_seed_and_json_options(p)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command; returns the exit status (see the module docstring)."""
    args, say, json_path = start(PROG, build_parser(), argv, "every primitive and layer")
    mode = "fast" if args.fast else "slow"
    rows = run(seed=args.seed, fast=args.fast)
    say(render(rows))
    failed = [r for r in rows if not r["passed"]]
    for r in failed:
        say(f"\n--- {r['name']} ---\n{r['report'].message}")
    if json_path is not None:
        write_json(PROG, json_path, dict(
            command="gradcheck_report", seed=args.seed, mode=mode, eps=EPS, atol=ATOL,
            rtol=RTOL, passed=not failed,
            rows=[dict(op=r["name"], kind=r["kind"], inputs=r["shapes"], mode=r["mode"],
                       passed=r["passed"], check=r["check"],
                       max_abs_err=json_number(r["max_abs_err"]),
                       max_rel_err=json_number(r["max_rel_err"]),
                       seconds=round(r["seconds"], 6)) for r in rows]))
    return EXIT_FAIL if failed else EXIT_OK


if __name__ == "__main__":
    raise SystemExit(run_main(PROG, main))
