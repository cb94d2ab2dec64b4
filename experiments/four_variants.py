"""The four-variant run of the chapter "The Details That Matter", on minigrad.

Trains a tiny character-level GPT in four configurations, {LayerNorm, RMSNorm} x {GELU MLP,
SwiGLU MLP}, in the chapter's order (ln+gelu, rms+gelu, ln+swiglu, rms+swiglu), with the
chapter's hyperparameters: batch 32, block 32, 2 layers, 4 heads, d_model 64, AdamW lr 3e-3
(PyTorch defaults otherwise, weight_decay 0.01), gradient clipping at norm 1.0, 90/10 train/val
split. Each variant starts from the same seed, for its initialisation and for its batch stream,
as the chapter's ``train_variant`` does; so with ``--seeds N`` the variants pair seed by seed.

Usage::

    python -m experiments.four_variants --tiny               # 200 steps per variant, seed 0
    python -m experiments.four_variants --tiny --seeds 5 --jobs 2   # seeds 0..4, intervals
    python -m experiments.four_variants --full               # 2000 steps per variant
    python -m experiments.four_variants --steps 500 --seed 1 --corpus my.txt --output-dir out/

With one seed it prints the chapter's table (norm, mlp, params, train, val) and the uniform
baseline ln(vocab_size) on stdout. With several seeds each loss is "mean ± sample sd" and the
closing block follows: each of the chapter's two lessons quoted, with this run's measured
verdict beside it (parameter difference with its sign, paired loss differences with their 95 %
Student-t intervals, and whether each interval excludes zero). One progress line per run goes
to stderr. Train and val are mean losses over every position of each split (fixed windows,
deterministic; on a corpus whose split exceeds ``--eval-tokens`` positions, default 16384, over
that many spread evenly over it); the chapter's one-random-batch estimates are recorded in
results.json.

Writes to ``--output-dir`` (default ``./outputs/four_variants``), all files as one atomic step:
``run_log.txt`` (the chapter's layout, with the checked lessons), ``results.json``,
``curves.csv``, ``loss_curves.png`` and ``deltas.png`` (with matplotlib) and, with
``--save-checkpoints``, ``<norm>_<mlp>.npz``. The machinery is ``experiments._runner``.

Threads: one BLAS thread unless ``--threads N`` or ``OPENBLAS_NUM_THREADS`` says otherwise (on a
2-core machine shared with other processes the BLAS default of a thread per core was several
times slower; docs/performance.md, "BLAS threads").

Exit status: 0 when every run trained; 1 when a run's loss became NaN or infinite (that run
stops with a message naming the step, the others still run, and all outputs are written); 2 on
bad input or when the outputs cannot be written or the model does not fit in memory (one line
on stderr naming the problem, nothing written); 130 when interrupted (nothing written).
"""
from __future__ import annotations

import argparse
from typing import List

from gpt import GPTConfig  # noqa: F401 (re-exported for the tests and callers)

from experiments import _norm_counts, _report
from experiments._cli import path_arg, run_main
from experiments._runner import (EXIT_DIVERGED, EXIT_INTERRUPTED, EXIT_OK, VARIANTS, Study,
                                 Variant)

PROG = "python -m experiments.four_variants"
LESSON_RMS = "RMSNorm: same regularization effect as LayerNorm, ~half the FLOPs."
LESSON_SWIGLU = ("SwiGLU: gating learns which features to pass through; modest extra params "
                 "(we scaled hidden_mult=8/3 to roughly match GELU MLP size).")
NORM_NAME = {"ln": "LayerNorm", "rms": "RMSNorm"}
MLP_NAME = {"gelu": "GELU", "swiglu": "SwiGLU"}

__all__ = ["STUDY", "main", "table_header", "closing", "EXIT_OK", "EXIT_DIVERGED",
           "EXIT_INTERRUPTED"]


def table_header() -> str:
    """The chapter's table header line (one seed)."""
    return _report.table_header(STUDY, 1)


def _compare(report, a: str, b: str, label: str, who: str) -> str:
    """One measured line: the paired val-loss difference a - b, its interval and verdict, and
    every divergence that limits it (``who`` names a's side, e.g. "RMSNorm")."""
    d = report.paired(a, b, "val_loss")
    lost = [f"{name} seed {x['seed']} ({x['what']} {x['value']} at step {x['step']})"
            for name in (a, b) for x in report.summaries[name]["diverged"]]
    if d["mean"] is None:
        return f"    {label}: no comparison; diverged: {'; '.join(lost)}"
    line = f"    {label}: {a} - {b} = {_report.fmt_diff(d)} nats: {d['verdict']}"
    if d["excludes_zero"]:
        line += f" ({who} {'lower' if d['mean'] < 0 else 'higher'})"
    if lost:
        line += f"; diverged, left out: {'; '.join(lost)}"
    return line


def closing(report) -> List[str]:
    """The closing block: each of the chapter's two lessons quoted, with what this run measured
    beside it. Every number comes from ``report``; nothing here can contradict the table."""
    n = len(report.seeds)
    lines = []
    if n > 1:
        lines += _report.differences_block(report) + [""]
    lines += ["Lessons (the chapter's words, quoted; this run's measurement below each):",
              f'- The chapter: "{LESSON_RMS}"',
              f"  Measured, final val loss, RMSNorm minus LayerNorm, same MLP, same seeds "
              f"({n} seed{'s' if n > 1 else ''}):"]
    for mlp in ("gelu", "swiglu"):
        lines.append(_compare(report, f"rms+{mlp}", f"ln+{mlp}", f"with {MLP_NAME[mlp]}",
                              "RMSNorm"))
    lines += norm_cost_lines(report)
    p = {name: report.summaries[name]["params"] for name in report.summaries}
    lines += [f'- The chapter: "{LESSON_SWIGLU}"']
    for norm in ("ln", "rms"):
        a, b = p[f"{norm}+swiglu"], p[f"{norm}+gelu"]
        delta = a - b
        how = (f"SwiGLU has {delta} more parameters" if delta > 0 else
               f"SwiGLU has {-delta} fewer parameters" if delta < 0 else
               "the same number of parameters")
        verdict = "extra parameters, as the chapter says" if delta > 0 else \
            "not extra parameters, contrary to the chapter"
        lines.append(f"  Measured, parameters with {NORM_NAME[norm]}: {norm}+swiglu - "
                     f"{norm}+gelu = {delta:+d} ({100.0 * delta / b:+.2f}%): {how}, "
                     f"so {verdict}.")
    lines.append("  Measured, final val loss, SwiGLU minus GELU, same norm, same seeds:")
    for norm in ("ln", "rms"):
        lines.append(_compare(report, f"{norm}+swiglu", f"{norm}+gelu",
                              f"with {NORM_NAME[norm]}", "SwiGLU"))
    return lines


def norm_cost_lines(report) -> List[str]:
    """The measured cost of RMSNorm against LayerNorm, for the first lesson.

    FLOPs are counted in this run, by tracing our own ``layernorm_forward/backward`` and
    ``rmsnorm_forward/backward`` on the run's activation shape (B, T, d_model) (milliseconds;
    ``experiments._norm_counts.count``). Time is cited from a ``norm_cost`` results.json given
    with ``--norm-cost PATH``; without it, "not measured in this run".
    """
    args = report.plan.args
    shape = (args.batch_size, args.block_size, args.d_model)
    inputs = _norm_counts.make_inputs(shape, "float64", 0)
    ratio = {p: (_norm_counts.count("rms", p, inputs)["flops"]
                 / _norm_counts.count("ln", p, inputs)["flops"])
             for p in _norm_counts.PASSES}
    words = {p: "about half" if abs(r - 0.5) <= 0.1 else
             f"{'more' if r > 0.5 else 'less'} than half: a {100 * (1 - r):.0f}% saving"
             for p, r in ratio.items()}
    lines = [f"  Measured, FLOPs RMSNorm/LayerNorm counted from our code at {shape[0]}x{shape[1]}x"
             f"{shape[2]}: forward {ratio['forward']:.2f} ({words['forward']}), forward+backward "
             f"{ratio['forward_backward']:.2f} ({words['forward_backward']})."]
    claim = getattr(args, "norm_cost", None)
    if claim is None:
        lines.append("  Measured, time: not measured in this run (python -m experiments.norm_cost "
                     "measures it; --norm-cost PATH cites its results.json here).")
    else:
        t = claim["time_ratio"]
        lines.append(f"  Measured by norm_cost ({claim['_path']}), time RMSNorm/LayerNorm at "
                     f"{t['shape']}: forward {t['forward']:.2f}, forward+backward "
                     f"{t['forward_backward']:.2f}.")
    return lines


def _norm_cost_arg(text: str):
    """``--norm-cost PATH``: the ``claim`` block of a norm_cost results.json, checked now."""
    path = path_arg(text)
    try:
        claim = _norm_counts.load_claim(path)
    except OSError as e:
        raise argparse.ArgumentTypeError(f"cannot read {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    try:
        t = claim["time_ratio"]
        claim = dict(claim, _path=str(path))
        float(t["forward"]), float(t["forward_backward"]), str(t["shape"])
    except (KeyError, TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"{path} has no time_ratio block") from None
    return claim


def _add_arguments(p) -> None:
    p.add_argument("--norm-cost", type=_norm_cost_arg, default=None, metavar="PATH",
                   help="a results.json of python -m experiments.norm_cost, cited in the closing "
                        "block (default: FLOPs counted in this run, time not measured)")


STUDY = Study(
    name="four_variants",
    prog=PROG,
    description="Train a tiny GPT four ways, {LayerNorm, RMSNorm} x {GELU, SwiGLU}, over one or "
                "more seeds, and compare their losses (the chapter's run, on minigrad, with "
                "paired intervals).",
    variants=tuple(Variant(f"{n}+{m}", {"norm": n, "mlp": m}, labels={"norm": n, "mlp": m})
                   for n, m in VARIANTS),
    columns=(("norm", 6), ("mlp", 10)),
    run_label=lambda v: f"{v.labels['norm']:5s} + {v.labels['mlp']:8s}",
    closing=closing,
    add_arguments=_add_arguments,
    closing_on_stdout_with_one_seed=False,
)

main = STUDY.main  # main(argv=None) -> exit status (see experiments._runner)

if __name__ == "__main__":
    raise SystemExit(run_main(PROG, main))
