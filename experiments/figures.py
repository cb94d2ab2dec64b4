"""The studies' figures (matplotlib, the ``plot`` extra), drawn when the outputs are written.

- ``loss_curves.png`` (``loss_curves``): one panel per variant; x the training step, y the loss
  in nats/token; each seed's training-batch loss thin (red if the run diverged, with a dashed
  line at the step it stopped), the mean over the seeds that trained thick, the mean validation
  loss (every ``--eval-every`` steps) as dots.
- ``grad_norms.png`` (``grad_norms``): the total gradient norm before clipping per step (log
  scale).
- ``deltas.png`` (``deltas``): each variant's paired difference from the baseline in final val
  and train loss (nats/token) with its 95 % Student-t interval, and a zero line; a variant with
  no seed where both trained says so in its row.

Each function returns a ``matplotlib.figure.Figure`` (no pyplot, no backend to choose, nothing
global) that ``save`` writes; a curve of a single step is drawn as a dot.
"""
import importlib.util
import textwrap

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


def add(report, files):
    """Add ``loss_curves.png``, ``deltas.png`` (unless the baseline alone was trained) and
    ``grad_norms.png`` to ``files`` (name -> ``draw(path)``, for ``cli.write_outputs``), each
    with the run's ``backward_note``; returns the install hint without matplotlib."""
    if not available():
        return INSTALL_HINT
    note = backward_note(report)
    for name, draw in (("loss_curves.png", loss_curves), ("deltas.png", deltas),
                       ("grad_norms.png", grad_norms)):
        if name != "deltas.png" or not report.alone:   # the baseline alone: no differences
            files[name] = lambda path, draw=draw: save(draw(report), path, note)
    return None


def backward_note(report):
    """The line over every figure of a run that trained with the learner's backward passes
    (``--backward``), red when one of them failed its check, as ``(text, colour)``; None when
    none of theirs was called."""
    called = report.called()
    mine = [s.name for s in report.args.backward or ()
            if s.status != "not implemented" and called[s.name]]
    wrong = [f"{name}_backward (in {', '.join(variants)})"
             for name, variants in report.wrong_backward()]
    if not mine:
        return None
    text = f"Trained with your backward passes: {', '.join(n + '_backward' for n in mine)}"
    return (text + f"; the check failed for {', '.join(wrong)}: these losses are not the "
            f"model's", "tab:red") if wrong else (text, "black")


def save(fig, path, note=None, rect=(0, 0, 1, 1)):
    """Lay the figure out within ``rect`` (left, bottom, right, top, as fractions of the
    figure) and write it as PNG at 110 dpi; ``note`` (``backward_note``) goes across the top,
    above everything else, wrapped to the figure's width."""
    if note:
        lines = textwrap.wrap(note[0], int(13 * fig.get_figwidth()))   # ~13 characters an inch
        height = (0.1 + 0.16 * len(lines)) / fig.get_figheight()    # 9 pt lines, in inches
        for text in fig.texts:   # the suptitle: below the note
            text.set_y(text.get_position()[1] - height)
        fig.text(0.5, 1 - 0.05 / fig.get_figheight(), "\n".join(lines), ha="center", va="top",
                 fontsize=9, color=note[1])
        rect = (*rect[:3], rect[3] - height)
    fig.tight_layout(rect=rect)
    if hasattr(fig, "set_layout_engine"):  # matplotlib >= 3.6
        fig.set_layout_engine(None)  # else savefig lays the figure out again: a third of its time
    fig.savefig(path, format="png", dpi=110)


def plot_steps(ax, steps, values, **kwargs):
    """``ax.plot(steps, values)`` with whole-step ticks; a single point is drawn as a dot (a
    line through one point draws nothing)."""
    from matplotlib.ticker import MaxNLocator
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    if len(values) == 1:
        kwargs.setdefault("marker", "o")
    return ax.plot(steps, values, **kwargs)


def log_y(ax):
    """Make the y axis of ``ax`` log scale, its ticks plain decimals (0.5, 1, 2, 5, 10; not
    5x10^-1), chosen for the range of what is drawn (call it last): within a decade, evenly
    spaced values; up to 5 decades, 1, 2 and 5 times the powers of ten; up to 8, 1 and 3
    times; more, the powers alone."""
    from matplotlib.ticker import AutoLocator, FuncFormatter, LogLocator, NullFormatter
    ax.set_yscale("log")
    lo, hi = ax.get_ylim()
    decades = np.log10(hi / lo)
    ax.yaxis.set_major_locator(AutoLocator() if decades <= 1 else LogLocator(
        subs=(1.0, 2.0, 5.0) if decades <= 5 else (1.0, 3.0) if decades <= 8 else (1.0,)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _by_step(ax, y, **kwargs):
    """Plot ``y`` against the steps 1..len(y) (``plot_steps``)."""
    return plot_steps(ax, np.arange(1, len(y) + 1), y, **kwargs)


def grad_norms(report):
    """grad_norms.png: the total gradient norm before clipping per step, every run; a norm of
    0, which a log scale cannot show, is drawn a decade below the smallest other one (the
    title says so)."""
    fig, ax = subplots(figsize=(7.5, 4.2))
    every = [g for e in report.runs for g in e["grad_norms"]]
    floor = min([g for g in every if 0 < g < np.inf] + [1.0]) / 10

    def shown(norms):
        return np.maximum(norms, floor)

    for k, v in enumerate(report.study.variants):
        c = f"C{k % 10}"
        runs = report.runs_of(v.name)
        for e in runs:
            _by_step(ax, shown(e["grad_norms"]), lw=0.5, alpha=0.35, color=c)
            if e["status"] != "ok" and e["grad_norms"]:
                ax.plot([len(e["grad_norms"])], shown(e["grad_norms"][-1:]), "x", color=c,
                        ms=8, mew=2)
        n = min((len(e["grad_norms"]) for e in runs), default=0)
        if n:
            mean = np.mean([e["grad_norms"][:n] for e in runs], axis=0)
            _by_step(ax, shown(mean), lw=2.0, color=c, label=v.name)
    ax.axhline(1.0, color="black", lw=0.8, ls=":", label="clip max_norm = 1")
    ax.set_xlabel("step")
    ax.set_ylabel("total gradient norm before clipping (log scale)")
    seeds = "one seed" if len(report.seeds) == 1 else "seeds thin, mean thick"
    notes = ["x = last step before divergence"] if report.any_diverged else []
    ax.set_yscale("log")
    if 0 in every:
        ax.set_ylim(bottom=floor / 2)
        notes.append(f"a norm of 0 is drawn at {floor:.2g}")
    log_y(ax)
    ax.set_title(f"{report.study.name}: gradient norm per step, {seeds}" +
                 ("\n" + "; ".join(notes) if notes else ""), fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return fig


def loss_curves(report):
    """loss_curves.png: the training and validation loss per step, a panel per variant."""
    variants = report.study.variants
    n = len(variants)
    cols = min(n, 2 if n <= 4 else 3)
    rows = -(-n // cols)
    fig, axes = subplots(rows, cols, figsize=(5.2 * cols, 3.6 * rows), sharex=True,
                         sharey=True, squeeze=False)
    finite = [x for e in report.runs for x in e["loss_curve"] if np.isfinite(x)]
    val_label = f"val ({report.positions_text('val')}), mean"
    for ax, v in zip(axes.flat, variants):
        runs = report.runs_of(v.name)
        ok = [e for e in runs if e["status"] == "ok"]
        lost = [e for e in runs if e["status"] != "ok"]
        for e in ok:
            _by_step(ax, e["loss_curve"], lw=0.6, alpha=0.45, color="tab:blue")
        for i, e in enumerate(lost):
            _by_step(ax, e["loss_curve"], lw=1.0, color="tab:red",
                     label="diverged run" if i == 0 else None)
            ax.axvline(e["diverged_at"]["step"], color="tab:red", lw=0.8, ls="--",
                       label="step it diverged" if i == 0 else None)
        if ok:
            mean = np.mean([e["loss_curve"] for e in ok], axis=0)
            _by_step(ax, mean, lw=2.2, color="tab:blue",
                     label=f"train batch, mean of {len(ok)} seed{'s' if len(ok) > 1 else ''}")
            steps = [int(s) for s, _ in ok[0]["val_curve"]]
            vals = np.mean([[float(x) for _, x in e["val_curve"]] for e in ok], axis=0)
            ax.plot(steps, vals, "o-", ms=3, lw=1.2, color="tab:orange", label=val_label)
        ax.axhline(report.uniform_baseline, color="grey", lw=0.8, ls=":",
                   label=f"uniform ln V = {report.uniform_baseline:.2f}")
        title = v.name + (f"  ({len(lost)} of {len(runs)} diverged, red)" if lost else "")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    for col in range(cols):  # the lowest panel of each column carries the step axis
        ax = axes[(n - 1 - col) // cols, col]
        ax.xaxis.set_tick_params(labelbottom=True)
        ax.set_xlabel("step")
    tails = [np.median(e["loss_curve"][-max(1, len(e["loss_curve"]) // 10):])
             for e in report.runs if e["loss_curve"]]
    blown_up = bool(tails) and max(tails) > 2 * report.uniform_baseline
    if blown_up:  # a run ended far above the uniform loss: show everything, log scale
        log_y(axes.flat[0])
        how = "log scale"
    elif finite:
        # the uniform line, the bulk of the training curve, and every point of the val curves
        # and of each training curve's last tenth (where the findings are) stay on the axis
        vals = [float(x) for e in report.runs if e["status"] == "ok"
                for _, x in e["val_curve"] if np.isfinite(float(x))]
        lo = min(finite + vals)
        hi = max(report.uniform_baseline * 1.25, np.percentile(finite, 2) * 1.05,
                 max(vals, default=0.0) * 1.05, max(tails, default=0.0) * 1.05)
        top = max(hi, lo + 0.5)
        axes.flat[0].set_ylim(max(0.0, lo - 0.1), top)
        how = (f"the first steps (loss up to {max(finite):.3g}) are above the axis"
               if max(finite) > top else "")
    else:
        how = "no finite loss"
    for ax in axes[:, 0]:
        ax.set_ylabel("loss (nats/token)")
    n = len(report.seeds)
    seeds = "one seed" if n == 1 else f"{n} seeds (thin), mean (thick)"
    fig.suptitle(f"{report.study.name}: loss per step, {seeds}, init {report.args.init}"
                 + (f"; {how}" if how else ""),
                 fontsize=11, wrap=True)
    return fig


def deltas(report):
    """deltas.png: each variant's paired difference from the baseline, final val and train."""
    others = report.study.variants[1:]
    base = report.baseline
    fig, ax = subplots(figsize=(7.0, 1.2 + 0.9 * max(1, len(others))))
    labels, bars = [], False
    for y, v in enumerate(others):
        diffs = report.summaries[v.name]["difference_from_baseline"]
        for m, color, off in (("val_loss", "tab:orange", -0.15), ("train_loss", "tab:blue", 0.15)):
            d = diffs[m]
            if d["mean"] is None:
                continue
            label = m.replace("_loss", "")
            label = None if label in ax.get_legend_handles_labels()[1] else label
            if d["low"] is not None:
                bars = True
                ax.errorbar(d["mean"], y + off, xerr=[[d["mean"] - d["low"]],
                                                      [d["high"] - d["mean"]]],
                            fmt="o", color=color, capsize=4, label=label)
            else:
                ax.plot(d["mean"], y + off, "o", color=color, label=label)
        if diffs["val_loss"]["mean"] is None and diffs["train_loss"]["mean"] is None:
            n = len(report.seeds)
            lost = [f"{name} in {len(report.summaries[name]['diverged'])} of {n}"
                    for name in (v.name, base) if report.summaries[name]["diverged"]]
            ax.text(0.5, y, f"no seed where both trained; diverged: {', '.join(lost)} "
                    f"seed{'s' if n > 1 else ''}",
                    transform=ax.get_yaxis_transform(), ha="center", va="center", fontsize=8,
                    color="tab:red", bbox={"facecolor": "white", "edgecolor": "none"})
        labels.append(f"{v.name}\n(n={diffs['val_loss']['n']})")
    ax.axvline(0.0, color="black", lw=1)
    if not ax.get_legend_handles_labels()[0]:  # nothing to compare: 0 in the middle
        ax.set_xlim(-1.0, 1.0)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=9)
    ax.set_ylim(len(labels) - 0.5, -0.5)  # first variant on top, half a row around each
    ax.set_xlabel(f"final loss minus {base}'s, same seed (nats/token)\n" +
                  ("bars: 95% Student-t interval" if bars else
                   "one seed: no interval (--seeds 2 or more)" if len(report.seeds) == 1 else
                   "no interval (fewer than 2 seeds where both trained)"))
    ax.set_title(f"{report.study.name}: paired differences from {base} "
                 f"(left of 0 = lower loss)", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def hidden_stats(report, by):
    """hidden_stats.png: variance, kurtosis and max of each site over the steps (``by``: the
    means over seeds of ``experiments.hidden_stats``), LayerNorm solid, RMSNorm dashed."""
    sites = list(dict.fromkeys(k[1] for k in by))
    fig, axes = subplots(1, 3, figsize=(15, 4.4))
    for ax, (stat, label) in zip(axes, (("var", "variance (log scale)"),
                                        ("kurtosis", "kurtosis (Gaussian = 3)"),
                                        ("max", "max value"))):
        for vi, v in enumerate(report.study.variants):
            for si, site in enumerate(sites):
                pts = sorted((k[2], x[stat]) for k, x in by.items()
                             if k[0] == v.name and k[1] == site)
                if pts:
                    plot_steps(ax, *zip(*pts), color=f"C{si % 10}", linewidth=1.6,
                               linestyle="-" if vi == 0 else "--", label=f"{v.name} {site}")
        if stat == "var":
            log_y(ax)
        ax.set(xlabel="training step", ylabel=label, title=label.split(" (")[0])
        ax.grid(alpha=0.3)
    axes[1].axhline(3.0, color="grey", linewidth=0.8, linestyle=":")   # a Gaussian's
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=min(4, max(1, len(names))), fontsize=8,
               frameon=False)
    lost = [f"{e['name']} seed {e['seed']} at step {e['diverged_at']['step']}"
            for e in report.runs if e["status"] != "ok"]
    fig.suptitle("Residual stream entering each block's attention and MLP (probe batch; solid: "
                 "LayerNorm, dashed: RMSNorm)" + (f"\ndiverged, recorded until they stopped: "
                                                  f"{', '.join(lost)}" if lost else ""),
                 fontsize=11)
    return fig


def train_loss(history, uniform, title):
    """loss.png of ``experiments.train_gpt``: the training batch loss per step, the estimates on
    random batches of each split, the uniform baseline, and the learning rate (dashed)."""
    fig, ax = subplots(figsize=(8.0, 4.5))
    ax.plot(history["step"], history["loss"], lw=0.5, alpha=0.5, color="tab:blue",
            label="train batch")
    ev = list(zip(*history["evals"])) or [[], [], []]
    ax.plot(ev[0], ev[1], "o-", ms=3, color="tab:blue", label="train (estimate)")
    ax.plot(ev[0], ev[2], "o-", ms=3, color="tab:orange", label="val (estimate)")
    ax.axhline(uniform, color="grey", lw=0.8, ls=":", label=f"uniform ln V = {uniform:.2f}")
    finite = [x for x in history["loss"] + list(ev[2]) if np.isfinite(x)]
    if finite:
        ax.set_ylim(max(0.0, min(finite) - 0.1), max(uniform * 1.15, min(finite) + 0.5))
    ax.set(xlabel="step", ylabel="loss (nats/token)")
    ax.grid(alpha=0.3)
    lr_ax = ax.twinx()
    lr_ax.plot(history["step"], history["lr"], lw=1.0, ls="--", color="grey")
    lr_ax.set_ylabel("learning rate (dashed)")
    lr_ax.set_ylim(0, max(history["lr"], default=1.0) * 1.05)
    ax.legend(fontsize=8, loc="upper right")
    above = " (the first steps are above the axis)" if max(finite, default=0) > ax.get_ylim()[1] \
        else ""
    ax.set_title(f"{title}\nloss per step; estimates on random batches of each split{above}",
                 fontsize=9)
    return fig
