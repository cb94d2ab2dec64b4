"""The chapter's run: a tiny GPT four ways, {LayerNorm, RMSNorm} x {GELU MLP, SwiGLU MLP}.

The chapter's hyperparameters (batch 32, block 32, 2 layers, 4 heads, d_model 64, AdamW lr 3e-3,
weight decay 0.01, clipping at 1.0, 90/10 split); every variant from the same seeds. Prints the
chapter's table; with ``--seeds N`` the paired differences and, each beside the chapter's words,
what this run measured. Options and outputs: ``experiments.runner``.

    python -m experiments.four_variants --tiny                     # 200 steps, seed 0
    python -m experiments.four_variants --tiny --seeds 10 --jobs 2 # paired intervals
    python -m experiments.four_variants --preset shakespeare-cpu   # nanoGPT's CPU run, 4 ways
"""
from experiments import cli

with cli.errors("python -m experiments.four_variants"):   # Ctrl-C while NumPy loads: one line
    from experiments import flops, runner
    from experiments.report import fmt_diff

LESSONS = {"rms": "RMSNorm: same regularization effect as LayerNorm, ~half the FLOPs.",
           "swiglu": "SwiGLU: gating learns which features to pass through; modest extra params "
                     "(we scaled hidden_mult=8/3 to roughly match GELU MLP size)."}
NAME = {"ln": "LayerNorm", "rms": "RMSNorm", "gelu": "GELU", "swiglu": "SwiGLU"}


def compare(report, a, b, label, who):
    """The paired val-loss difference a - b, its interval and verdict, and the divergences."""
    d = report.paired(a, b)
    lost = [f"{name} seed {x['seed']} ({x['what']} {x['value']} at step {x['step']})"
            for name in (a, b) for x in report.summaries[name]["diverged"]]
    if d["mean"] is None:
        return f"    {label}: no comparison; diverged: {'; '.join(lost)}"
    line = f"    {label}: {a} - {b} = {fmt_diff(d)} nats: {d['verdict']}"
    if d["excludes_zero"]:
        line += f" ({who} {'lower' if d['mean'] < 0 else 'higher'})"
    return line + (f"; diverged, left out: {'; '.join(lost)}" if lost else "")


def closing(report):
    """Each of the chapter's two lessons quoted, with this run's measurements below it."""
    n, a = len(report.seeds), report.args
    if len(report.study.variants) < 4:   # --variants: the lessons need all four
        return report.comparison()
    lines = (report.differences() + [""]) if n > 1 else []
    lines += ["Lessons (the chapter's words, quoted; this run's measurement below each):",
              f'- The chapter: "{LESSONS["rms"]}"',
              f"  Measured, final val loss, RMSNorm minus LayerNorm, same MLP, same seeds "
              f"({n} seed{'s' if n > 1 else ''}):"]
    lines += [compare(report, f"rms+{m}", f"ln+{m}", f"with {NAME[m]}", "RMSNorm")
              for m in ("gelu", "swiglu")]
    shape = (a.batch_size, a.block_size, a.d_model)
    r = flops.norm_flop_ratios(shape)
    words = {p: "about half" if abs(x - 0.5) <= 0.1 else
             f"{'more' if x > 0.5 else 'less'} than half: a {100 * (1 - x):.0f}% saving"
             for p, x in r.items()}
    lines.append(f"  Measured, FLOPs RMSNorm/LayerNorm counted from our code at "
                 f"{'x'.join(map(str, shape))}: forward {r['forward']:.2f} ({words['forward']}), "
                 f"forward+backward {r['forward_backward']:.2f} ({words['forward_backward']}); "
                 f"time: python -m experiments.norm_cost.")
    lines.append(f'- The chapter: "{LESSONS["swiglu"]}"')
    for norm in ("ln", "rms"):
        s, g = (report.summaries[f"{norm}+{m}"]["params"] for m in ("swiglu", "gelu"))
        how = (f"SwiGLU has {s - g} more parameters, so extra parameters, as the chapter says"
               if s > g else f"SwiGLU has {g - s} fewer parameters, so not extra parameters, "
               f"contrary to the chapter" if s < g else "the same number of parameters")
        lines.append(f"  Measured, parameters with {NAME[norm]}: {norm}+swiglu - {norm}+gelu = "
                     f"{s - g:+d} ({100.0 * (s - g) / g:+.2f}%): {how}.")
    lines.append("  Measured, final val loss, SwiGLU minus GELU, same norm, same seeds:")
    return lines + [compare(report, f"{n}+swiglu", f"{n}+gelu", f"with {NAME[n]}", "SwiGLU")
                    for n in ("ln", "rms")]


STUDY = runner.Study(
    name="four_variants",
    description="Train a tiny GPT four ways, {LayerNorm, RMSNorm} x {GELU, SwiGLU}, over one or "
                "more seeds, and compare their losses (the chapter's run, with paired intervals).",
    variants=tuple(runner.Variant(f"{n}+{m}", {"norm": n, "mlp": m}, labels={"norm": n, "mlp": m})
                   for n, m in (("ln", "gelu"), ("rms", "gelu"), ("ln", "swiglu"),
                                ("rms", "swiglu"))),
    columns=(("norm", 6), ("mlp", 10)), closing=closing, quiet_with_one_seed=True)

if __name__ == "__main__":
    runner.main(STUDY)
