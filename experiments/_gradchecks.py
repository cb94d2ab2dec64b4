"""What the gradient-check commands share (``experiments.gradcheck_report`` and
``experiments.break_backward``): the settings, the builders of test inputs, the runner, and the
table and JSON output.

The settings are ``minigrad.gradcheck``'s defaults (PyTorch's eps and atol): float64 inputs,
central-difference step ``EPS``, and an entry passes when
``|analytical - numerical| <= ATOL + RTOL * |numerical|``.
"""
from __future__ import annotations

import math
from typing import Callable, Optional, Sequence

import numpy as np

from minigrad import GradcheckReport, Tensor, gradcheck_report

from experiments._cli import ArgumentParser, Printer, json_destination, nonnegative_int

EPS, ATOL, RTOL = 1e-6, 1e-5, 1e-3

# (B, T) token indices with repeats (1 twice, 3 three times) and unused rows (2, 4) of a
# 5-row table: an embedding backward must accumulate the repeats and leave the rest at 0.
EMBEDDING_INDEX = np.array([[1, 3, 1], [0, 3, 3]])


# ----------------------------------------------------------------------------- inputs

def leaf(a) -> Tensor:
    """A float64 leaf that requires grad."""
    return Tensor(np.asarray(a, dtype=np.float64), requires_grad=True)


def away_from_zero(rng: np.random.Generator, shape, margin: float = 0.2) -> np.ndarray:
    """Gaussian entries pushed at least ``margin`` away from 0 (kinks such as ReLU's, poles)."""
    z = rng.standard_normal(shape)
    return np.sign(z) * (margin + np.abs(z))


# ----------------------------------------------------------------------------- running

def check(fn: Callable[..., Tensor], inputs: list, seed: int, fast: bool = False
          ) -> GradcheckReport:
    """``minigrad.gradcheck_report`` of ``fn`` at ``inputs`` with ``EPS, ATOL, RTOL``; ``seed``
    seeds the upstream gradient (and the directions in fast mode)."""
    return gradcheck_report(fn, inputs, eps=EPS, atol=ATOL, rtol=RTOL, fast_mode=fast, seed=seed)


def start(prog: str, parser: ArgumentParser, argv: Optional[Sequence[str]], what: str):
    """Parse ``argv``, validate ``--json`` (before any work) and print the settings line.

    Returns:
        (args, say, json_path): the parsed arguments, the ``Printer`` for stdout, and the
        validated ``--json`` path (None when not given).
    """
    args = parser.parse_args(argv)
    say = Printer()
    json_path = json_destination(prog, args.json)
    mode = "fast" if getattr(args, "fast", False) else "slow"
    say(f"gradcheck of {what}: float64, {mode} mode, seed {args.seed}, eps {EPS:g}, "
        f"atol {ATOL:g}, rtol {RTOL:g}\n")
    return args, say, json_path


# ----------------------------------------------------------------------------- output

def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]],
                 right: Sequence[bool]) -> str:
    """Aligned plain-text table: a header line, a rule of dashes, one line per row.

    Args:
        headers: column titles.
        rows: cells as strings, one sequence per row, ``len(headers)`` cells each.
        right: per column, True to right-align (numbers), False to left-align.

    Returns:
        str: the table, lines joined by ``\\n``, no trailing spaces, no final newline.
    """
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells):
        out = [c.rjust(w) if rj else c.ljust(w) for c, w, rj in zip(cells, widths, right)]
        return "  ".join(out).rstrip()

    return "\n".join([line(headers), "  ".join("-" * w for w in widths)] + [line(r) for r in rows])


def fmt_err(x: float) -> str:
    """An error as ``1.23e-10``; ``nan`` / ``inf`` spelled out (a check failed before comparing)."""
    return f"{x:.2e}" if math.isfinite(x) else str(x)


def json_number(x: float) -> Optional[float]:
    """``x`` as a float, or None when it is NaN or infinite (strict JSON has neither)."""
    return float(x) if math.isfinite(x) else None


def add_seed_and_json_options(p: ArgumentParser) -> None:
    """The ``--seed N`` and ``--json PATH`` options shared by the gradient-check commands."""
    p.add_argument("--seed", type=nonnegative_int, default=0, metavar="N",
                   help="seed of the inputs and upstream gradients (default 0)")
    p.add_argument("--json", metavar="PATH", default=None,
                   help="also write the rows as JSON to PATH (atomically) (default: no JSON file)")


