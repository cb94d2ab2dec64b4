"""Break the hand-derived backward passes on purpose, and watch the gradient check catch them.

    python -m experiments.break_backward --seed 3 --json break.json

Each layer is gradient-checked with its real backward (``layers/<name>.py``) and with each wrong
one of ``experiments/_broken.py``, which drops or changes exactly ONE term and keeps the real
forward and cache (LayerNorm's eps is forgotten on near-constant rows, the only rows where it
matters; linear's transposed dweight on a square weight, so no shape check helps). Float64,
random non-unit weights, a random upstream gradient, ``gradcheck_report``'s settings in slow
mode; deterministic for a seed. A row: layer, variant, verdict, max abs and rel error, where the
worst entry is. PASS: a right backward passes; WRONGLY FAILED: it fails; CAUGHT: a wrong one
fails; MISSED: a wrong one passes. Exit status 0 when all are PASS or CAUGHT, else 1.
"""
from dataclasses import dataclass
from typing import Callable, Optional, Tuple

import numpy as np

from minigrad import Tensor
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
from experiments import cli
from experiments.gradcheck_report import (ATOL, EMBEDDING_INDEX, EPS, RTOL, away_from_zero, check,
                                          fmt_err, format_table, json_number, leaf, parse_args)

PROG = "python -m experiments.break_backward"


@dataclass(frozen=True)
class Setup:
    """How to call one layer: ``layer`` (its name in the table), ``names`` (one per input, for the
    "where" column), ``build(rng) -> inputs`` (float64 leaves that require grad, plus constants)
    and ``call(fn_cls, *inputs) -> Tensor``, applying the real ``Function`` class or a broken
    subclass of it as ``layers.functional`` applies the real one."""

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
    """One row: a key of ``SETUPS``, the variant (``"correct"`` or the one broken term), the real
    ``Function`` or a broken subclass, and ``wrong_inputs``: the inputs whose gradient the broken
    term corrupts (where the report's worst entry must lie); empty exactly for a right one."""

    setup: str
    variant: str
    fn_cls: type
    wrong_inputs: Tuple[str, ...] = ()

    @property
    def broken(self) -> bool:
        """True for a deliberately wrong backward."""
        return bool(self.wrong_inputs)


CASES = (
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


@dataclass
class Row:
    """The outcome of one case: as printed, plus where the worst entry is (input name and index,
    None when the report names none) and the ``minigrad.GradcheckReport``."""

    case: Case
    layer: str
    variant: str
    verdict: str
    where_input: Optional[str]
    where_index: Optional[Tuple[int, ...]]
    report: object

    @property
    def ok(self) -> bool:
        """True for PASS and CAUGHT (the outcome the experiment expects)."""
        return self.verdict in ("PASS", "CAUGHT")

    @property
    def where(self) -> str:
        """``"x[0, 2, 5]"``, or ``"-"`` when the report names no entry."""
        if self.where_input is None:
            return "-"
        return f"{self.where_input}[{', '.join(map(str, self.where_index))}]"


def verdict(broken: bool, passed: bool) -> str:
    """PASS / WRONGLY FAILED for a right backward, CAUGHT / MISSED for a wrong one."""
    if broken:
        return "MISSED" if passed else "CAUGHT"
    return "PASS" if passed else "WRONGLY FAILED"


def run_case(case: Case, seed: int = 0) -> Row:
    """Gradient-check one case and classify it; the inputs come from one stream per layer setup
    (``default_rng([seed, setup index])``), so a right and a wrong backward see the same."""
    setup = SETUPS[case.setup]
    inputs = setup.build(np.random.default_rng([seed, list(SETUPS).index(case.setup)]))
    rep = check(lambda *xs: setup.call(case.fn_cls, *xs), inputs, seed)
    name = index = None
    if rep.worst is not None:
        name, index = setup.names[rep.worst[0]], tuple(int(i) for i in rep.worst[1])
    return Row(case, setup.layer, case.variant, verdict(case.broken, rep.passed), name, index, rep)


def run_cases(seed: int = 0, cases=None) -> list:
    """``run_case`` of every case of ``cases`` (default ``CASES``)."""
    return [run_case(c, seed) for c in (CASES if cases is None else cases)]


def render(rows: list) -> str:
    """The table and the one-line summary."""
    cells = [[r.layer, r.variant, r.verdict, fmt_err(r.report.max_abs_err),
              fmt_err(r.report.max_rel_err), r.where] for r in rows]
    n_right = sum(not r.case.broken for r in rows)
    n_pass = sum(r.verdict == "PASS" for r in rows)
    n_caught = sum(r.verdict == "CAUGHT" for r in rows)
    n_wrong = len(rows) - n_right
    return (format_table(["layer", "variant", "verdict", "max abs err", "max rel err", "where"],
                         cells, [False, False, False, True, True, False])
            + f"\n\n{n_pass} of {n_right} right backward passes pass, {n_caught} of {n_wrong} "
              f"wrong ones caught; {n_wrong - n_caught} missed, {n_right - n_pass} wrongly failed")


def run(argv=None) -> int:
    """Gradient-check each deliberately wrong backward of ``experiments._broken`` beside the
    right one (float64, central differences) and print which check caught it.

    Args:
        argv (list[str] | None): the command's arguments (default ``sys.argv[1:]``).
    Returns:
        int: ``cli.EXIT_OK`` when every wrong backward was caught and every right one passed,
        else 1.
    Raises:
        cli.UsageError: bad input (``cli.main`` prints one line, status 2).
    """
    args = parse_args(PROG, "Gradient-check deliberately wrong backward passes beside the right "
                      "ones.", argv)
    print(f"gradcheck of right and deliberately wrong backward passes: float64, slow mode, seed "
          f"{args.seed}, eps {EPS:g}, atol {ATOL:g}, rtol {RTOL:g}\n")
    rows = run_cases(seed=args.seed)
    print(render(rows))
    ok = all(r.ok for r in rows)
    if args.json is not None:
        cli.write_json(args.json, dict(
            command="break_backward", seed=args.seed, eps=EPS, atol=ATOL, rtol=RTOL, ok=ok,
            rows=[dict(layer=r.layer, variant=r.variant, broken=r.case.broken,
                       function=r.case.fn_cls.__name__, verdict=r.verdict, check=r.report.check,
                       max_abs_err=json_number(r.report.max_abs_err),
                       max_rel_err=json_number(r.report.max_rel_err),
                       where={"input": r.where_input,
                              "index": None if r.where_index is None else list(r.where_index)},
                       expected_inputs=list(r.case.wrong_inputs)) for r in rows]))
    return cli.EXIT_OK if ok else 1


if __name__ == "__main__":
    cli.main(PROG, run)
