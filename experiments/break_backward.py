"""Break the hand-derived backward passes on purpose, and watch the gradient check catch them.

Usage::

    python -m experiments.break_backward
    python -m experiments.break_backward --seed 3 --json break.json

Each layer is gradient-checked twice or more: once with its real backward (``layers/<name>.py``)
and once per deliberately wrong backward (``experiments/_broken.py``), each wrong one dropping or
changing exactly ONE term and reusing the layer's real forward and cache:

* LayerNorm without the mean term, without the xhat (variance) term, and forgetting eps (on
  near-constant rows, the only rows where eps matters);
* RMSNorm without its projection term; GELU dropping the tanh' term; SiLU treating the sigmoid
  as a constant; ReLU² forgetting its 2; SwiGLU dropping silu';
* RoPE rotating the wrong way; softmax without the subtracted sum;
* attention missing the 1/sqrt(hs) in dq; cross-entropy forgetting the 1/N of the mean;
  linear with a transposed weight gradient (square weight, so the shape check cannot help);
  embedding overwriting instead of accumulating repeated indices.

Everything is float64, with random (non-unit) weights, the checker's random Gaussian upstream
gradient, a fixed seed and small shapes (``minigrad.gradcheck_report``, slow mode, eps 1e-6,
atol 1e-5, rtol 1e-3). The output is deterministic for a given seed.

One row per check: layer, variant ("correct" or what is broken), verdict, max abs error, max rel
error, and where the worst entry is (input name and index, from the report):

* PASS: the right backward passes;        WRONGLY FAILED: the right backward fails;
* CAUGHT: a wrong backward fails;          MISSED: a wrong backward passes.

Exit status: 0 when every right backward passes and every wrong one is caught; 1 otherwise;
2 on bad input (one line on stderr, nothing run).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np

from minigrad import GradcheckReport, Tensor
from layers.attention import AttentionFunction
from layers.cross_entropy import CrossEntropyFunction
from layers.embedding import EmbeddingFunction
from layers.gelu import GELUFunction
from layers.layernorm import LayerNormFunction
from layers.linear import LinearFunction
from layers.relu2 import ReLU2Function
from layers.rmsnorm import RMSNormFunction
from layers.rope import RoPEFunction, build_rope_cache
from layers.silu import SiLUFunction
from layers.softmax import SoftmaxFunction
from layers.swiglu import SwiGLUFunction

from experiments import _broken as B
from experiments._cli import ArgumentParser, run_main, write_json
from experiments._gradchecks import (EMBEDDING_INDEX, EPS, ATOL, RTOL, add_seed_and_json_options,
                                     away_from_zero, check, fmt_err, format_table,
                                     json_number, leaf, start)

PROG = "python -m experiments.break_backward"
EXIT_OK, EXIT_FAIL = 0, 1

__all__ = ["Setup", "Case", "SETUPS", "CASES", "Row", "run_case", "run", "verdict", "main"]


# ----------------------------------------------------------------------------- inputs

@dataclass(frozen=True)
class Setup:
    """How to call one layer: its input names, a builder of random inputs, and the call.

    Attributes:
        layer: the name shown in the table.
        names: one name per entry of ``inputs`` (for the "where" column).
        build: ``rng -> inputs`` (float64 Tensors that require grad, plus constants).
        call: ``(fn_cls, *inputs) -> Tensor``: applies a ``minigrad.Function`` class, the real
            one or a broken subclass of it, exactly as ``layers.functional`` applies the real one.
    """

    layer: str
    names: Tuple[str, ...]
    build: Callable[[np.random.Generator], list]
    call: Callable[..., Tensor]


def _norm_inputs(r, with_bias, near_constant=False):
    if near_constant:   # rows of spread 1e-3 around an offset: var ~ 1e-6, below eps = 1e-5
        x = r.normal(0.0, 1.0, (3, 1)) + 1e-3 * r.standard_normal((3, 6))     # (N, C)
    else:
        x = r.standard_normal((2, 3, 6))                                        # (B, T, C)
    out = [leaf(x), leaf(r.normal(1.0, 0.5, 6))]                                    # weight (C,)
    if with_bias:
        out.append(leaf(r.normal(0.0, 0.5, 6)))                                   # bias (C,)
    return out


def _spread_x(r):
    return [leaf(2 * r.standard_normal((3, 5)))]     # x (N, C), both tails of GELU/SiLU/softmax


def _rope_inputs(r):
    cos, sin = build_rope_cache(6, 4, dtype=np.float64)     # (1, 1, T, hs), constants
    return [leaf(r.standard_normal((1, 2, 6, 4))), cos, sin]  # x (B, H, T, hs)


SETUPS = {
    "ln": Setup("LayerNorm", ("x", "weight", "bias"), lambda r: _norm_inputs(r, True),
                lambda cls, x, w, b: cls.apply(x, w, b, eps=1e-5)),
    "ln_flat": Setup("LayerNorm", ("x", "weight", "bias"),
                     lambda r: _norm_inputs(r, True, near_constant=True),
                     lambda cls, x, w, b: cls.apply(x, w, b, eps=1e-5)),
    "rms": Setup("RMSNorm", ("x", "weight"), lambda r: _norm_inputs(r, False),
                 lambda cls, x, w: cls.apply(x, w, eps=1e-6)),
    "gelu": Setup("GELU", ("x",), _spread_x, lambda cls, x: cls.apply(x)),
    "silu": Setup("SiLU", ("x",), _spread_x, lambda cls, x: cls.apply(x)),
    "relu2": Setup("ReLU2", ("x",), lambda r: [leaf(away_from_zero(r, (3, 5)))],  # kink at 0
                   lambda cls, x: cls.apply(x)),
    "swiglu": Setup("SwiGLU", ("x", "w_gate", "w_up", "w_down"),
                    lambda r: [leaf(r.standard_normal((2, 2, 4))),          # x (B, T, C)
                               leaf(0.5 * r.standard_normal((6, 4))),       # w_gate (H, C)
                               leaf(0.5 * r.standard_normal((6, 4))),       # w_up (H, C)
                               leaf(0.5 * r.standard_normal((4, 6)))],      # w_down (C, H)
                    lambda cls, x, wg, wu, wd: cls.apply(x, wg, wu, wd)),
    "rope": Setup("RoPE", ("x", "cos", "sin"), _rope_inputs,
                  lambda cls, x, cos, sin: cls.apply(x, cos, sin)),
    "softmax": Setup("softmax", ("x",), _spread_x,
                     lambda cls, x: cls.apply(x, axis=-1)),
    "attn": Setup("attention", ("q", "k", "v"),
                  lambda r: [leaf(r.standard_normal((1, 2, 4, 4))) for _ in range(3)],  # (B,H,T,hs)
                  lambda cls, q, k, v: cls.apply(q, k, v, is_causal=True)),
    "ce": Setup("cross_entropy", ("logits", "targets"),
                lambda r: [leaf(r.standard_normal((4, 5))), r.integers(0, 5, size=4)],  # (N,V) (N,)
                lambda cls, logits, t: cls.apply(logits, t)),
    "linear": Setup("linear", ("x", "weight", "bias"),
                    lambda r: [leaf(r.standard_normal((2, 3, 4))),          # x (B, T, C)
                               leaf(0.5 * r.standard_normal((4, 4))),       # weight (O, C), O = C
                               leaf(0.5 * r.standard_normal(4))],           # bias (O,)
                    lambda cls, x, w, b: cls.apply(x, w, b)),
    "emb": Setup("embedding", ("weight", "idx"),
                 lambda r: [leaf(r.standard_normal((5, 3))), EMBEDDING_INDEX],  # weight (V, C)
                 lambda cls, w, idx: cls.apply(w, idx)),
}


@dataclass(frozen=True)
class Case:
    """One row: a layer setup, a Function class, and what a wrong one must be caught on.

    Attributes:
        setup: a key of ``SETUPS``.
        variant: ``"correct"`` or a short description of the one broken term.
        fn_cls: the layer's real ``Function`` or a broken subclass from ``experiments._broken``.
        wrong_inputs: names of the inputs whose gradient the broken term corrupts; empty
            exactly for a right backward. For a wrong one, the report's worst entry must lie in
            one of them.
    """

    setup: str
    variant: str
    fn_cls: type
    wrong_inputs: Tuple[str, ...] = ()

    @property
    def broken(self) -> bool:
        """True for a deliberately wrong backward (one that names the inputs it corrupts)."""
        return bool(self.wrong_inputs)


CASES: Tuple[Case, ...] = (
    Case("ln", "correct", LayerNormFunction),
    Case("ln", "no mean term", B.LayerNormNoMean, ("x",)),
    Case("ln", "no xhat (variance) term", B.LayerNormNoXhat, ("x",)),
    Case("ln_flat", "correct (near-constant rows)", LayerNormFunction),
    Case("ln_flat", "forgets eps (near-constant rows)", B.LayerNormNoEps, ("x",)),
    Case("rms", "correct", RMSNormFunction),
    Case("rms", "no projection term", B.RMSNormNoProjection, ("x",)),
    Case("gelu", "correct", GELUFunction),
    Case("gelu", "drops the tanh' term", B.GELUNoTanhPrime, ("x",)),
    Case("silu", "correct", SiLUFunction),
    Case("silu", "sigmoid taken as constant", B.SiLUNoSigmoidPrime, ("x",)),
    Case("relu2", "correct", ReLU2Function),
    Case("relu2", "forgets the factor 2", B.ReLU2NoTwo, ("x",)),
    Case("swiglu", "correct", SwiGLUFunction),
    Case("swiglu", "drops silu'", B.SwiGLUNoSiluPrime, ("x", "w_gate")),
    Case("rope", "correct", RoPEFunction),
    Case("rope", "rotates the wrong way", B.RoPEWrongWay, ("x",)),
    Case("softmax", "correct", SoftmaxFunction),
    Case("softmax", "no subtracted sum", B.SoftmaxNoSum, ("x",)),
    Case("attn", "correct", AttentionFunction),
    Case("attn", "dq missing 1/sqrt(hs)", B.AttentionDqUnscaled, ("q",)),
    Case("ce", "correct", CrossEntropyFunction),
    Case("ce", "forgets the 1/N of the mean", B.CrossEntropyNoMean, ("logits",)),
    Case("linear", "correct", LinearFunction),
    Case("linear", "dweight transposed", B.LinearDWeightTransposed, ("weight",)),
    Case("emb", "correct", EmbeddingFunction),
    Case("emb", "overwrites repeated indices", B.EmbeddingOverwrite, ("weight",)),
)


# ----------------------------------------------------------------------------- running

@dataclass
class Row:
    """The outcome of one case.

    Attributes:
        case: the ``Case``.
        layer, variant, verdict: as printed.
        where_input: name of the input holding the worst entry (None if the report has none).
        where_index: index of that entry in its input (a tuple; None if none).
        report: the ``minigrad.GradcheckReport``.
    """

    case: Case
    layer: str
    variant: str
    verdict: str
    where_input: Optional[str]
    where_index: Optional[Tuple[int, ...]]
    report: GradcheckReport

    @property
    def ok(self) -> bool:
        """True for PASS and CAUGHT (the outcome the experiment expects)."""
        return self.verdict in ("PASS", "CAUGHT")

    @property
    def where(self) -> str:
        """``"x[0, 2, 5]"``, or ``"-"`` when the report names no entry."""
        if self.where_input is None:
            return "-"
        return f"{self.where_input}[{', '.join(str(i) for i in self.where_index)}]"


def verdict(broken: bool, passed: bool) -> str:
    """PASS / WRONGLY FAILED for a right backward, CAUGHT / MISSED for a wrong one."""
    if broken:
        return "MISSED" if passed else "CAUGHT"
    return "PASS" if passed else "WRONGLY FAILED"


def _case_rng(seed: int, setup: str) -> np.random.Generator:
    """One stream per layer setup, so a right and a wrong backward see the same inputs."""
    return np.random.default_rng([seed, list(SETUPS).index(setup)])


def run_case(case: Case, seed: int = 0) -> Row:
    """Gradient-check one case (float64, slow mode) and classify it.

    Args:
        case: the case.
        seed: seeds the inputs (per layer setup) and the checker's upstream gradient.

    Returns:
        Row.
    """
    setup = SETUPS[case.setup]
    inputs = setup.build(_case_rng(seed, case.setup))
    rep = check(lambda *xs: setup.call(case.fn_cls, *xs), inputs, seed)
    name = index = None
    if rep.worst is not None:
        pos, index = rep.worst
        name = setup.names[pos]
        index = tuple(int(i) for i in index)
    return Row(case, setup.layer, case.variant, verdict(case.broken, rep.passed), name, index, rep)


def run(seed: int = 0, cases: Optional[Sequence[Case]] = None) -> List[Row]:
    """Run every case of ``cases`` (default: ``CASES``); see ``run_case``."""
    return [run_case(c, seed) for c in (CASES if cases is None else cases)]


def render(rows: List[Row]) -> str:
    """The table and the one-line summary."""
    headers = ["layer", "variant", "verdict", "max abs err", "max rel err", "where"]
    right = [False, False, False, True, True, False]
    cells = [[r.layer, r.variant, r.verdict, fmt_err(r.report.max_abs_err),
              fmt_err(r.report.max_rel_err), r.where] for r in rows]
    n_right = sum(not r.case.broken for r in rows)
    n_pass = sum(r.verdict == "PASS" for r in rows)
    n_wrong = len(rows) - n_right
    n_caught = sum(r.verdict == "CAUGHT" for r in rows)
    summary = (f"{n_pass} of {n_right} right backward passes pass, {n_caught} of {n_wrong} wrong "
               f"ones caught; {n_wrong - n_caught} missed, {n_right - n_pass} wrongly failed")
    return format_table(headers, cells, right) + "\n\n" + summary


def build_parser() -> ArgumentParser:
    """The command's argument parser (one-line errors, exit status 2)."""
    p = ArgumentParser(
        prog=PROG,
        description="Gradient-check deliberately wrong backward passes beside the right ones.",
        epilog="Exit status: 0 when every right backward passes and every wrong one is caught; "
               "1 otherwise; 2 bad input or stdout not writable (one line on stderr); 130 "
               "interrupted.")
    add_seed_and_json_options(p)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command; returns the exit status (see the module docstring)."""
    args, say, json_path = start(PROG, build_parser(), argv,
                                 "right and deliberately wrong backward passes")
    rows = run(seed=args.seed)
    say(render(rows))
    if json_path is not None:
        write_json(PROG, json_path, dict(
            command="break_backward", seed=args.seed, eps=EPS, atol=ATOL, rtol=RTOL,
            ok=all(r.ok for r in rows),
            rows=[dict(layer=r.layer, variant=r.variant, broken=r.case.broken,
                       function=r.case.fn_cls.__name__, verdict=r.verdict, check=r.report.check,
                       max_abs_err=json_number(r.report.max_abs_err),
                       max_rel_err=json_number(r.report.max_rel_err),
                       where={"input": r.where_input,
                              "index": None if r.where_index is None else list(r.where_index)},
                       expected_inputs=list(r.case.wrong_inputs)) for r in rows]))
    return EXIT_OK if all(r.ok for r in rows) else EXIT_FAIL


if __name__ == "__main__":
    raise SystemExit(run_main(PROG, main))
