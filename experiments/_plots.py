"""The study runner's figures (matplotlib, the ``plot`` extra): ``loss_curves.png`` and
``deltas.png``.

- ``loss_curves.png``: one panel per variant; x the training step, y the loss in nats/token;
  each seed's training-batch loss as a thin line, the mean over the seeds that trained as a
  thick line, and the mean validation loss (every ``--eval-every`` steps) as dots.
- ``grad_norms.png``: the total gradient norm before clipping per step (log scale), seeds thin,
  mean thick, one colour per variant.
- ``deltas.png``: for each variant against the baseline, the paired difference of the final
  val and train losses (nats/token) with its 95 % Student-t interval, and a zero line.

Without matplotlib, ``write_figures`` writes nothing and returns the one line telling how to
install it; everything else is still written.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Optional

import numpy as np

from experiments._processes import run_in_processes

__all__ = ["write_figures", "INSTALL_HINT"]

INSTALL_HINT = ('matplotlib is not installed, so loss_curves.png, deltas.png and grad_norms.png '
                'were not written; install it with: pip install -e ".[plot]"')


class _Figures:
    """What the figure functions use of ``matplotlib.pyplot`` (``subplots``, ``rcParams``),
    drawn on ``matplotlib.figure.Figure`` with the Agg canvas attached directly: no pyplot, no
    backend selection, no global figure manager holding the figures (a figure is freed when no
    longer referenced, so there is nothing to close), plus ``save_png``.
    """

    def __init__(self, matplotlib, figure_cls, canvas_cls) -> None:
        self.rcParams = matplotlib.rcParams
        self._figure_cls, self._canvas_cls = figure_cls, canvas_cls

    def subplots(self, nrows=1, ncols=1, figsize=None, **kwargs):
        """``pyplot.subplots``: (figure, axes) with an Agg canvas, so ``fig.savefig`` writes PNG."""
        fig = self._figure_cls(figsize=figsize)
        self._canvas_cls(fig)
        return fig, fig.subplots(nrows, ncols, **kwargs)

    @staticmethod
    def save_png(fig, path: Path, **tight_layout) -> None:
        """Lay the figure out (``tight_layout(**tight_layout)``) and write it as PNG, 110 dpi."""
        _save(fig, path, **tight_layout)


def _pyplot():
    """The figure-drawing namespace (``_Figures``), or None without matplotlib."""
    try:
        import matplotlib
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return None
    return _Figures(matplotlib, Figure, FigureCanvasAgg)


def write_figures(report, group, out: Path, processes: int = 1) -> Optional[str]:
    """Stage ``loss_curves.png``, ``deltas.png`` and ``grad_norms.png`` (and the study's
    ``extra_figures``, under the ``.png`` names of its ``output_names``) for ``out`` in the
    ``AtomicGroup``.

    With ``processes`` > 1 the figures are drawn in up to three forked processes at once
    (``experiments._processes.run_in_processes``: loss curves; deltas and gradient norms; the
    study's own), each importing matplotlib for itself, so this process never does; with 1,
    or where forking is not safe, here, one after the other. The PNGs are the same bytes.

    Returns:
        None when written; the install hint (one line) when matplotlib is missing.

    Raises:
        OSError: a figure could not be written (the group then writes nothing).
    """
    if importlib.util.find_spec("matplotlib") is None:
        return INSTALL_HINT
    study = report.study
    names = ["loss_curves.png", "deltas.png", "grad_norms.png"]
    extras = [n for n in study.output_names if n.endswith(".png")] \
        if study.extra_figures is not None else []
    staged = {name: group.stage(out / name) for name in names + extras}

    def stage_extra(name: str) -> Path:
        if name not in extras:
            raise ValueError(f"figure {name!r} is not among the study's output_names {extras}")
        return staged[name]

    def drawing(*parts):
        def draw() -> Optional[str]:
            plt = _pyplot()
            if plt is None:
                return INSTALL_HINT
            for part in parts:
                if part == "extra":
                    study.extra_figures(plt, report, stage_extra)
                else:
                    _DRAW[part](plt, report, staged[part])
            return None
        return draw

    if processes > 1:
        calls = [drawing("loss_curves.png"), drawing("deltas.png", "grad_norms.png")] + \
            ([drawing("extra")] if extras else [])
    else:
        calls = [drawing(*names, *(["extra"] if extras else []))]
    hints = [h for h in run_in_processes(calls) if h is not None]
    if hints:  # matplotlib found but not importable: no figure is written
        for name in staged:
            group.unstage(out / name)
        return hints[0]
    for name, path in staged.items():
        if path.stat().st_size == 0:
            raise RuntimeError(f"figure {name} was staged but not drawn")
    return None


def _save(fig, path: Path, **tight_layout) -> None:
    """``fig.tight_layout(**tight_layout)``, then the PNG at 110 dpi.

    ``tight_layout`` leaves a placeholder layout engine on the figure (matplotlib 3.6 and
    later), and ``savefig`` then draws the whole figure once to nothing before drawing it for
    the PNG. Removing the placeholder skips that draw: the same bytes, about a third less time.
    """
    fig.tight_layout(**tight_layout)
    if hasattr(fig, "set_layout_engine"):
        fig.set_layout_engine(None)
    fig.savefig(path, format="png", dpi=110)


def _grad_norms(plt, report, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, v in enumerate(report.study.variants):
        c = colors[k % len(colors)]
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
    _save(fig, path)


def _loss_curves(plt, report, path: Path) -> None:
    variants = report.study.variants
    n = len(variants)
    cols = min(n, 2 if n <= 4 else 3)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.6 * rows), sharex=True,
                             sharey=True, squeeze=False)
    finite = [x for e in report.runs for x in e["loss_curve"] if np.isfinite(x)]
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
                    label="val (whole split), mean")
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
        axes.flat[0].set_ylim(max(0.0, lo - 0.1), max(hi, lo + 0.5))
        how = "the first steps (loss near 42) are above the axis"
    else:
        how = "no finite loss"
    for ax in axes[-1]:
        ax.set_xlabel("step")
    for ax in axes[:, 0]:
        ax.set_ylabel("loss (nats/token)")
    n = len(report.seeds)
    seeds = "one seed" if n == 1 else f"{n} seeds (thin), mean (thick)"
    fig.suptitle(f"{report.study.name}: loss per step, {seeds}; {how}", fontsize=11)
    _save(fig, path)


def _deltas(plt, report, path: Path) -> None:
    others = report.study.variants[1:]
    base = report.study.baseline.name
    fig, ax = plt.subplots(figsize=(7.0, 1.2 + 0.9 * max(1, len(others))))
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
    _save(fig, path)


_DRAW = {"loss_curves.png": _loss_curves, "deltas.png": _deltas, "grad_norms.png": _grad_norms}
