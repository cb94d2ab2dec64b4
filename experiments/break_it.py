"""Break it: the chapter's sabotage runs, each beside the LayerNorm baseline, same seeds.

- ``ln``: LayerNorm in every block and at the end (the baseline).
- ``ln_rms``: the chapter's ``norm_for_layer``: blocks ``i < n_layers // 2`` LayerNorm, the
  others RMSNorm; the final norm stays LayerNorm.
- ``none``: no normalisation at all, every norm the identity (``make_norm("none")``).
- ``ln_gain0``: every LayerNorm gain zeroed and frozen (the chapter's exercise "disable
  LayerNorm entirely"); the biases train. Each norm then outputs its bias, a constant, so the
  best the model can do is the unigram distribution of the characters.

    python -m experiments.break_it --tiny --seeds 5 --jobs 2

Prints the table, the differences from ``ln``, the gradient-norm history (every step is in
curves.csv and grad_norms.png) and the divergences: a run whose loss or gradient norm becomes
NaN or infinite stops there, the others go on (exit status 1). Options: ``experiments.runner``.
"""
from experiments import cli

with cli.errors("python -m experiments.break_it"):   # Ctrl-C while NumPy loads: one line
    import numpy as np

    import minigrad
    from layers.modules import LayerNorm

    from experiments import runner
    from experiments.report import fmt_diff


def zero_and_freeze_layernorm_gains(model):
    """Set every LayerNorm gain of ``model`` to 0 and freeze it (``requires_grad = False``)."""
    for m in model.modules():
        if isinstance(m, LayerNorm):
            with minigrad.no_grad():
                m.weight.mul_(0.0)
            m.weight.requires_grad = False


def unigram_loss(fit, data):
    """Cross-entropy (nats/token) on ``data``'s targets of the character frequencies of
    ``fit``'s: the best a model whose output ignores its input can do (inf for an unseen one)."""
    fit, data = np.asarray(fit)[1:], np.asarray(data)[1:]
    p = np.bincount(fit, minlength=int(max(fit.max(), data.max())) + 1) / len(fit)
    with np.errstate(divide="ignore"):
        return float(-np.mean(np.log(p[data])))


def closing(report):
    """Differences from ``ln``, the unigram loss, the gradient norms, the divergences."""
    lines = [report.alone] if report.alone else report.differences() if len(report.seeds) > 1 \
        else ["Difference from ln, final val loss (one seed; run --seeds 5 for intervals):"] + [
            f"  {v.name:8s} {fmt_diff(report.paired(v.name, report.baseline))}"
            for v in report.study.variants[1:]]
    train, val = report.data.train, report.data.val
    lines += [f"  (for ln_gain0: the unigram model fitted to the training split scores "
              f"{unigram_loss(train, train):.4f} on it and {unigram_loss(train, val):.4f} on "
              f"the validation split)"] if "ln_gain0" in report.summaries else []
    return lines + [""] + report.grad_norms() + [""] + report.divergence()


STUDY = runner.Study(
    name="break_it",
    description="The chapter's break-it runs: LayerNorm then RMSNorm by depth, no normalisation, "
                "and LayerNorm with its gain zeroed and frozen, beside the LayerNorm baseline.",
    variants=(runner.Variant("ln", {"norm": "ln"}, note="LayerNorm everywhere (the baseline)"),
              runner.Variant("ln_rms", {"norm": "ln_rms"}, note="blocks i < n_layers // 2 "
                             "LayerNorm, the rest RMSNorm; final norm LayerNorm"),
              runner.Variant("none", {"norm": "none"}, note="no normalisation (identity)"),
              runner.Variant("ln_gain0", {"norm": "ln"}, modify=zero_and_freeze_layernorm_gains,
                             note="every LayerNorm gain set to 0 and frozen; biases train")),
    columns=(("variant", 10),), closing=closing)

if __name__ == "__main__":
    runner.main(STUDY)
