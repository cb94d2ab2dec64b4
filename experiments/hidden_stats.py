"""Hidden-state statistics of the residual stream, LayerNorm vs RMSNorm (the chapter's step 4).

The chapter's step 4 ("Instrument hidden-state statistics") records, every ``stats_every``
steps, ``tensor_stats(x)`` of the residual stream x entering a block's attention: mean,
population variance, min, max and kurtosis (``tensor_stats`` below, the chapter's
formulas with its two 1e-12 guards). This command trains the tiny GPT with LayerNorm and with
RMSNorm (the MLP from ``--mlp``, GELU by default; the same seeds, so the runs pair) and, at step
0 and every ``--eval-every`` K steps (and the last), records those statistics of the residual
stream entering every block's attention (``blocks.i.pre_attn``: the input of ln1) and MLP
(``blocks.i.pre_mlp``: the input of ln2).

The statistics are taken on a fixed probe batch: the first ``batch_size`` evaluation windows of
the validation split (the same input at every step, for every variant and seed), in a forward
pass under ``minigrad.no_grad`` that draws nothing from the training generator, so collecting
them changes no loss (``gpt.capture.capture_residual_stream`` copies the arrays).

Usage::

    python -m experiments.hidden_stats --tiny                  # 200 steps, seed 0
    python -m experiments.hidden_stats --steps 500 --seeds 3 --eval-every 25 --jobs 2

Prints the loss table and the statistics table. Writes to ``--output-dir`` (default
``outputs/hidden_stats``) what every study writes (``run_log.txt`` with the statistics table at
the first and last step, ``results.json`` with every statistic in each run's ``extra.rows``,
``curves.csv``, the figures), and ``hidden_stats.csv`` (variant, seed, step, site, mean, var,
min, max, kurtosis) and, with matplotlib, ``hidden_stats.png``. Options and exit statuses are
those of every study (``python -m experiments.hidden_stats --help``).
"""
import math
from typing import Any, Dict, List

import numpy as np

import minigrad
from gpt.capture import capture_residual_stream
from gpt.data import eval_windows

from experiments import _plots, _report, cli
from experiments.four_variants import Study, Variant, run_study

PROG = "python -m experiments.hidden_stats"
NORM_NAME = {"ln": "LayerNorm", "rms": "RMSNorm"}

# The chapter's step 4, in PyTorch:
#     flat = x.detach().float().reshape(-1); mean = flat.mean()
#     var = flat.var(unbiased=False)                 # population variance (divide by n)
#     std = torch.sqrt(var + 1e-12); centered = flat - mean
#     kurt = (centered ** 4).mean() / (std ** 4 + 1e-12)
# The same formulas and guards below, in float64. The kurtosis is the plain fourth standardised
# moment (3 for a Gaussian); for a constant array var = 0, std = 1e-6 and the kurtosis is 0.
STAT_NAMES = ("mean", "var", "min", "max", "kurtosis")
GUARD = 1e-12   # the chapter's guard, in both the std and the kurtosis denominator


def tensor_stats(x) -> Dict[str, float]:
    """Mean, population variance, min, max and kurtosis of all the elements of ``x``.

    Args:
        x: array-like of any shape with at least one element (a ``minigrad.Tensor`` is read
            through ``np.asarray``).

    Returns:
        ``{"mean", "var", "min", "max", "kurtosis"}`` as Python floats.

    Raises:
        ValueError: ``x`` is empty.
    """
    flat = np.asarray(x, dtype=np.float64).reshape(-1)          # (n,)
    if flat.size == 0:
        raise ValueError("tensor_stats: empty array")
    mean = flat.mean()
    centered = flat - mean
    var = np.mean(centered * centered)                          # population variance
    std = np.sqrt(var + GUARD)
    kurt = np.mean(centered ** 4) / (std ** 4 + GUARD)
    return {"mean": float(mean), "var": float(var), "min": float(flat.min()),
            "max": float(flat.max()), "kurtosis": float(kurt)}


def residual_stats(job) -> "_Collector":
    """The study's instrument (``Study.instrument``), built in the run from its ``Job``: the
    probe is the first ``batch_size`` evaluation windows of the validation split, (B, T)."""
    windows = eval_windows(job.val_data, job.config.block_size, job.args.eval_tokens)[0]
    return _Collector(windows[:job.args.batch_size])


def _finite(x: float):
    return x if math.isfinite(x) else str(x)   # strict JSON: NaN/inf as "nan"/"inf"


class _Collector:
    def __init__(self, probe: np.ndarray) -> None:
        self.probe = probe
        self.rows: List[Dict[str, Any]] = []

    def __call__(self, step: int, model) -> None:
        was_training = model.training
        model.eval()
        try:
            with minigrad.no_grad(), capture_residual_stream(model) as captured, \
                    np.errstate(all="ignore"):
                model(self.probe)
        finally:
            model.train(was_training)
        for site, x in captured.items():
            stats = tensor_stats(x)
            self.rows.append({"step": int(step), "site": site,
                              **{k: _finite(v) for k, v in stats.items()}})

    def result(self) -> Dict[str, Any]:
        return {"probe": f"the first {self.probe.shape[0]} validation windows of "
                         f"{self.probe.shape[1]} tokens",
                "rows": self.rows}


def _float(v) -> float:
    return float(v)   # "nan"/"inf" strings back to floats


def stats_by(report) -> Dict[tuple, Dict[str, float]]:
    """(variant, site, step) -> each statistic's mean over the seeds that recorded it."""
    acc: Dict[tuple, List[Dict[str, Any]]] = {}
    for e in report.runs:
        for r in (e.get("extra") or {}).get("rows", []):
            acc.setdefault((e["name"], r["site"], r["step"]), []).append(r)
    return {k: {s: float(np.mean([_float(r[s]) for r in rows])) for s in STAT_NAMES}
            for k, rows in acc.items()}


def _sites(report) -> List[str]:
    seen = []
    for e in report.runs:
        for r in (e.get("extra") or {}).get("rows", []):
            if r["site"] not in seen:
                seen.append(r["site"])
    return seen


def stats_table(report) -> List[str]:
    """The statistics at the first and the last recorded step, per variant and site."""
    by = stats_by(report)
    steps = sorted({k[2] for k in by})
    if not steps:
        return ["Residual stream statistics: none recorded."]
    first, last = steps[0], steps[-1]
    n = len(report.seeds)
    lines = [f"Residual stream entering each block's attention (pre_attn) and MLP (pre_mlp), "
             f"on a fixed probe batch",
             f"(the chapter's step 4: population variance, 1e-12 guards; kurtosis 3 for a "
             f"Gaussian){'; mean over ' + str(n) + ' seeds' if n > 1 else ''}:",
             f"{'variant':8s}  {'site':18s}  {'step':>5s}  {'mean':>9s}  {'var':>9s}  "
             f"{'min':>9s}  {'max':>9s}  {'kurtosis':>9s}"]
    for v in report.study.variants:
        for site in _sites(report):
            for step in (first, last):
                s = by.get((v.name, site, step))
                if s is None:
                    continue
                lines.append(f"{v.name:8s}  {site:18s}  {step:>5d}  " + "  ".join(
                    f"{s[k]:>9.4g}" for k in STAT_NAMES))
    # one computed sentence per variant: where the kurtosis is largest at the last step
    for v in report.study.variants:
        at_last = {site: by[(v.name, site, last)] for site in _sites(report)
                   if (v.name, site, last) in by}
        if not at_last:
            continue
        site = max(at_last, key=lambda k: at_last[k]["kurtosis"])
        var0 = [by[(v.name, s_, first)]["var"] for s_ in at_last if (v.name, s_, first) in by]
        var1 = [at_last[s_]["var"] for s_ in at_last]
        lines.append(f"- {NORM_NAME.get(v.name, v.name)}: at step {last} the largest kurtosis "
                     f"is {at_last[site]['kurtosis']:.3g} ({site}); the residual variance "
                     f"ranges {min(var1):.3g}-{max(var1):.3g} across sites (step {first}: "
                     f"{min(var0):.3g}-{max(var0):.3g}).")
    return lines


def closing(report) -> List[str]:
    """The closing block: the paired loss differences and parameters, then the statistics."""
    return _report.differences_and_params(report) + [""] + stats_table(report)


def stats_csv(report) -> str:
    """hidden_stats.csv: one row per (variant, seed, step, site)."""
    lines = ["variant,seed,step,site," + ",".join(STAT_NAMES)]
    for e in report.runs:
        for r in (e.get("extra") or {}).get("rows", []):
            lines.append(f"{e['name']},{e['seed']},{r['step']},{r['site']}," +
                         ",".join(repr(_float(r[k])) for k in STAT_NAMES))
    return "\n".join(lines) + "\n"


def stats_figure(report):
    """hidden_stats.png: variance, kurtosis and max of each site over the steps (mean over
    seeds), LayerNorm solid, RMSNorm dashed; the title names the runs that diverged. Returns
    the ``matplotlib.figure.Figure``."""
    by = stats_by(report)
    sites = _sites(report)
    panels = (("var", "variance (log scale)", True), ("kurtosis", "kurtosis (Gaussian = 3)",
                                                      False),
              ("max", "max value", False))
    fig, axes = _plots.subplots(1, 3, figsize=(15, 4.4))
    for ax, (stat, label, log) in zip(axes, panels):
        for vi, v in enumerate(report.study.variants):
            for si, site in enumerate(sites):
                pts = sorted((k[2], val[stat]) for k, val in by.items()
                             if k[0] == v.name and k[1] == site)
                if not pts:
                    continue
                xs, ys = zip(*pts)
                _plots.plot_steps(ax, xs, ys, color=f"C{si % 10}",
                                  linestyle="-" if vi == 0 else "--", linewidth=1.6,
                                  label=f"{v.name} {site}")
        if log:
            ax.set_yscale("log")
        ax.set_xlabel("training step")
        ax.set_ylabel(label)
        ax.set_title(label.split(" (")[0])
        ax.grid(alpha=0.3)
    axes[1].axhline(3.0, color="grey", linewidth=0.8, linestyle=":")   # a Gaussian's
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(4, max(1, len(labels))),
               fontsize=8, frameon=False)
    lost = [f"{e['name']} seed {e['seed']} at step {e['diverged_at']['step']}"
            for e in report.runs if e["status"] != "ok"]
    fig.suptitle("Residual stream entering each block's attention and MLP (probe batch; "
                 "solid: LayerNorm, dashed: RMSNorm)" + (
                     f"\ndiverged, recorded until they stopped: {', '.join(lost)}" if lost
                     else ""), fontsize=11)
    return fig


def extra_outputs(report) -> Dict[str, Any]:
    """hidden_stats.csv, and hidden_stats.png with matplotlib (unless --no-plots)."""
    files = {"hidden_stats.csv": stats_csv(report)}
    if _plots.available() and not report.plan.args.no_plots:
        files["hidden_stats.png"] = lambda path: _plots.save(stats_figure(report), path,
                                                             rect=(0, 0.12, 1, 0.95))
    return files


STUDY = Study(
    name="hidden_stats",
    prog=PROG,
    description="Train the tiny GPT with LayerNorm and with RMSNorm and record the chapter's "
                "hidden-state statistics (mean, variance, min, max, kurtosis) of the residual "
                "stream entering every block's attention and MLP, every --eval-every steps.",
    variants=(Variant("ln", {"norm": "ln"}, note="LayerNorm (eps 1e-5) before attention, MLP "
                                                 "and the output"),
              Variant("rms", {"norm": "rms"}, note="RMSNorm (eps 1e-6) in the same places")),
    columns=(("variant", 8),),
    closing=closing,
    instrument=residual_stats,
    extra_outputs=extra_outputs,
)


def run(argv):
    """The command: ``run_study(STUDY, argv)``; returns the exit status."""
    return run_study(STUDY, argv)


if __name__ == "__main__":
    cli.main(PROG, run)
