"""The studies' figures (matplotlib, the ``plot`` extra), drawn when the outputs are written.

- ``loss_curves.png``: one panel per variant; x the training step, y the loss in nats/token;
  each seed's training-batch loss thin, the mean over the seeds that trained thick, the mean
  validation loss (every ``--eval-every`` steps) as dots.
- ``grad_norms.png``: the total gradient norm before clipping per step (log scale).
- ``deltas.png``: each variant's paired difference from the baseline in final val and train
  loss (nats/token) with its 95 % Student-t interval, and a zero line.

Figures are ``matplotlib.figure.Figure`` objects saved directly: no pyplot, no backend to
choose, nothing global.
"""
import importlib.util

import numpy as np

INSTALL_HINT = ('matplotlib is not installed, so the PNG figures were not written; install it '
                'with: pip install -e ".[plot]"')


def available():
    """True when matplotlib can be imported."""
    return importlib.util.find_spec("matplotlib") is not None


def subplots(nrows=1, ncols=1, figsize=None, **kwargs):
    """``pyplot.subplots`` without pyplot: (figure, axes)."""
    from matplotlib.figure import Figure
    fig = Figure(figsize=figsize)
    return fig, fig.subplots(nrows, ncols, **kwargs)


def add_figures(report, files):
    """Add ``loss_curves.png``, ``deltas.png`` and ``grad_norms.png`` to ``files`` (name ->
    ``draw(path)``, for ``cli.write_outputs``); returns the install hint without matplotlib."""
    if not available():
        return INSTALL_HINT
    for name, draw in (("loss_curves.png", _loss_curves), ("deltas.png", _deltas),
                       ("grad_norms.png", _grad_norms)):
        files[name] = lambda path, draw=draw: draw(report, path)
    return None


def save(fig, path, **tight_layout):
    """Lay the figure out and write it as PNG at 110 dpi."""
    fig.tight_layout(**tight_layout)
    if hasattr(fig, "set_layout_engine"):  # matplotlib >= 3.6
        fig.set_layout_engine(None)  # else savefig lays the figure out again: a third of its time
    fig.savefig(path, format="png", dpi=110)


def _grad_norms(report, path):
    fig, ax = subplots(figsize=(7.5, 4.2))
    for k, v in enumerate(report.study.variants):
        c = f"C{k % 10}"
        runs = report.runs_of(v.name)
        for e in runs:
            ax.plot(np.arange(1, len(e["grad_norms"]) + 1), e["grad_norms"], lw=0.5,
                    alpha=0.35, color=c)
            if e["status"] != "ok":
                ax.plot([e["diverged_at"]["step"] - 1], [e["grad_norms"][-1]] if e["grad_norms"]
                        else [1.0], "x", color=c, ms=8, mew=2)
        n = min((len(e["grad_norms"]) for e in runs), default=0)
        if n:
            mean = np.mean([e["grad_norms"][:n] for e in runs], axis=0)
            ax.plot(np.arange(1, n + 1), mean, lw=2.0, color=c, label=v.name)
    ax.axhline(1.0, color="black", lw=0.8, ls=":", label="clip max_norm = 1")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("total gradient norm before clipping (log scale)")
    seeds = "one seed" if len(report.seeds) == 1 else "seeds thin, mean thick"
    diverged = any(e["status"] != "ok" for v in report.study.variants
                   for e in report.runs_of(v.name))
    marks = " (x = last step before divergence)" if diverged else ""
    ax.set_title(f"{report.study.name}: gradient norm per step, {seeds}{marks}", fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    save(fig, path)


def _loss_curves(report, path):
    variants = report.study.variants
    n = len(variants)
    cols = min(n, 2 if n <= 4 else 3)
    rows = -(-n // cols)
    fig, axes = subplots(rows, cols, figsize=(5.2 * cols, 3.6 * rows), sharex=True,
                             sharey=True, squeeze=False)
    finite = [x for e in report.runs for x in e["loss_curve"] if np.isfinite(x)]
    cap, n_val = getattr(report.plan, "eval_tokens", None), len(report.plan.val_data) - 1
    val_label = "val (whole split), mean" if cap is None or n_val <= cap else \
        f"val (about {cap} of its {n_val} positions), mean"
    for ax, v in zip(axes.flat, variants):
        runs = report.runs_of(v.name)
        for e in runs:
            ax.plot(np.arange(1, len(e["loss_curve"]) + 1), e["loss_curve"], lw=0.6,
                    alpha=0.45, color="tab:blue")
        ok = [e for e in runs if e["status"] == "ok"]
        if ok:
            mean = np.mean([e["loss_curve"] for e in ok], axis=0)
            ax.plot(np.arange(1, len(mean) + 1), mean, lw=2.2, color="tab:blue",
                    label=f"train batch, mean of {len(ok)} seed{'s' if len(ok) > 1 else ''}")
            steps = [int(s) for s, _ in ok[0]["val_curve"]]
            vals = np.mean([[float(x) for _, x in e["val_curve"]] for e in ok], axis=0)
            ax.plot(steps, vals, "o-", ms=3, lw=1.2, color="tab:orange",
                    label=val_label)
        for e in runs:
            if e["status"] != "ok":
                ax.axvline(e["diverged_at"]["step"], color="tab:red", lw=0.8, ls="--")
        ax.axhline(report.uniform_baseline, color="grey", lw=0.8, ls=":",
                   label=f"uniform ln V = {report.uniform_baseline:.2f}")
        title = v.name + ("" if len(ok) == len(runs) else
                          f"  ({len(runs) - len(ok)} diverged, red)")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="best")
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    tails = [np.median(e["loss_curve"][-max(1, len(e["loss_curve"]) // 10):])
             for e in report.runs if e["loss_curve"]]
    blown_up = bool(tails) and max(tails) > 2 * report.uniform_baseline
    if blown_up:  # a run ended far above the uniform loss: show everything, log scale
        axes.flat[0].set_yscale("log")
        how = "log scale"
    elif finite:
        lo = min(finite)
        # the uniform line, the bulk of the training curve, and every point of the val curves
        # and of each training curve's last tenth (where the findings are) stay on the axis
        vals = [float(x) for e in report.runs if e["status"] == "ok"
                for _, x in e["val_curve"] if np.isfinite(float(x))]
        hi = max(report.uniform_baseline * 1.25, np.percentile(finite, 2) * 1.05,
                 max(vals, default=0.0) * 1.05, max(tails, default=0.0) * 1.05)
        top = max(hi, lo + 0.5)
        axes.flat[0].set_ylim(max(0.0, lo - 0.1), top)
        how = (f"the first steps (loss near {max(finite):.0f}) are above the axis"
               if max(finite) > top else "every step on the axis")
    else:
        how = "no finite loss"
    for ax in axes[-1]:
        ax.set_xlabel("step")
    for ax in axes[:, 0]:
        ax.set_ylabel("loss (nats/token)")
    n = len(report.seeds)
    seeds = "one seed" if n == 1 else f"{n} seeds (thin), mean (thick)"
    fig.suptitle(f"{report.study.name}: loss per step, {seeds}; {how}", fontsize=11)
    save(fig, path)


def _deltas(report, path):
    others = report.study.variants[1:]
    base = report.study.baseline.name
    fig, ax = subplots(figsize=(7.0, 1.2 + 0.9 * max(1, len(others))))
    labels, y, bars = [], 0, False
    for v in others:
        diffs = report.summaries[v.name]["difference_from_baseline"]
        for m, color, off in (("val_loss", "tab:orange", -0.15), ("train_loss", "tab:blue", 0.15)):
            d = diffs[m]
            if d["mean"] is None:
                continue
            if d["low"] is not None:
                bars = True
                ax.errorbar(d["mean"], y + off, xerr=[[d["mean"] - d["low"]],
                                                      [d["high"] - d["mean"]]],
                            fmt="o", color=color, capsize=4,
                            label=m.replace("_loss", "") if y == 0 else None)
            else:
                ax.plot(d["mean"], y + off, "o", color=color,
                        label=m.replace("_loss", "") if y == 0 else None)
        labels.append(f"{v.name}\n(n={diffs['val_loss']['n']})")
        y += 1
    ax.axvline(0.0, color="black", lw=1)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel(f"final loss minus {base}'s, same seed (nats/token)\n" +
                  ("bars: 95% Student-t interval" if bars else
                   "one seed: no interval (--seeds 2 or more)"))
    ax.set_title(f"{report.study.name}: paired differences from {base} "
                 f"(left of 0 = lower loss)", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="best")
    save(fig, path)
