"""Break it: the chapter's sabotage experiments, each beside the LayerNorm baseline.

Variants (the same seeds, so the same initial streams and batches as the baseline):

- ``ln``: LayerNorm in every block and at the end (the baseline, the older recipe).
- ``ln_rms``: the chapter's ``break_it.py``, ``norm_for_layer``: blocks ``i < n_layers // 2``
  use LayerNorm, the others RMSNorm (``GPTConfig(norm="ln_rms")``; the final norm stays
  LayerNorm, since the chapter changes only the blocks' norms).
- ``none``: no normalisation at all, every norm the identity (the chapter's
  ``make_norm("none")``, step 3; ``GPTConfig(norm="none")``).
- ``ln_gain0``: LayerNorm with every gain (``weight``) set to zero and frozen
  (``requires_grad=False``: no gradient, no update), the chapter's "disable LayerNorm entirely
  (zero the gain parameter, freeze it) — left as an exercise". The biases still train. With
  every normalised vector multiplied by 0, each norm outputs its bias, a constant: attention
  and MLP see no input, and the final norm hands the output layer the same vector at every
  position, so the best this model can do is the unigram distribution of the characters.

Usage::

    python -m experiments.break_it --tiny                  # seed 0, 200 steps per variant
    python -m experiments.break_it --tiny --seeds 5 --jobs 2

Prints the table (params, final train and val loss; mean ± sd with several seeds) and, with
several seeds, each variant's paired difference from ``ln`` with its 95 % Student-t interval.
run_log.txt adds the gradient-norm history (a few steps of it; curves.csv and grad_norms.png
hold every step) and the divergence findings: a run whose loss or gradient norm becomes NaN or
infinite is reported with its step and value, and the others go on (exit status 1). Outputs,
options and exit statuses are those of every study command (``experiments.four_variants``).
"""
from typing import List

import numpy as np

import minigrad
from layers.modules import LayerNorm

from experiments import _report
from experiments import cli
from experiments.four_variants import Study, Variant, run_study


def zero_and_freeze_layernorm_gains(model) -> None:
    """Set the gain (``weight``) of every LayerNorm in ``model`` to zero and freeze it
    (``requires_grad = False``; ``gpt.train.train`` then leaves it out of the optimizer).
    The biases are untouched and still train."""
    for m in model.modules():
        if isinstance(m, LayerNorm):
            with minigrad.no_grad():
                m.weight.mul_(0.0)
            m.weight.requires_grad = False


def closing(report) -> List[str]:
    """Paired differences from ``ln``, the gradient-norm history, the divergence findings."""
    lines = []
    if len(report.seeds) > 1:
        lines += _report.differences_block(report) + [""]
    else:
        lines += [f"Difference from ln, final val loss (one seed; run --seeds 5 for intervals):"]
        for v in report.study.variants[1:]:
            d = report.paired(v.name, "ln", "val_loss")
            lines.append(f"  {v.name:8s} {_report.fmt_diff(d)}" if d["mean"] is not None else
                         f"  {v.name:8s} no comparison (diverged)")
    lines += [f"  (for ln_gain0: the unigram model fitted to the training split scores "
              f"{unigram_loss(report.plan.train_data, report.plan.train_data):.4f} on it and "
              f"{unigram_loss(report.plan.train_data, report.plan.val_data):.4f} on the "
              f"validation split)"]
    lines += [""] + _report.grad_norm_block(report) + [""] + _report.divergence_findings(report)
    return lines


def unigram_loss(fit, data) -> float:
    """Cross-entropy (nats/token) on the targets of ``data`` (positions 1..N-1) of the character
    frequencies of ``fit``'s targets: the best a model can do when its output ignores its
    input. A character ``fit`` lacks gets probability 0, so the loss is then inf."""
    fit, data = np.asarray(fit)[1:], np.asarray(data)[1:]
    counts = np.bincount(fit, minlength=int(max(fit.max(), data.max())) + 1)
    p = counts / counts.sum()
    with np.errstate(divide="ignore"):
        return float(-np.mean(np.log(p[data])))


STUDY = Study(
    name="break_it",
    prog="python -m experiments.break_it",
    description="The chapter's break-it runs: LayerNorm then RMSNorm by depth, no normalisation, "
                "and LayerNorm with its gain zeroed and frozen, each beside the LayerNorm "
                "baseline over the same seeds.",
    variants=(
        Variant("ln", {"norm": "ln"}, note="LayerNorm everywhere (the baseline)"),
        Variant("ln_rms", {"norm": "ln_rms"},
                note="blocks i < n_layers // 2 LayerNorm, the rest RMSNorm; final norm "
                     "LayerNorm (the chapter's norm_for_layer)"),
        Variant("none", {"norm": "none"}, note="no normalisation anywhere (identity)"),
        Variant("ln_gain0", {"norm": "ln"}, modify=zero_and_freeze_layernorm_gains,
                note="every LayerNorm gain set to 0 and frozen; biases train"),
    ),
    columns=(("variant", 10),),
    closing=closing,
)


def run(argv):
    """The command: ``run_study(STUDY, argv)``; returns the exit status."""
    return run_study(STUDY, argv)


if __name__ == "__main__":
    cli.main(STUDY.prog, run)
