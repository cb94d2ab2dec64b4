"""Hidden-state statistics of the residual stream, LayerNorm vs RMSNorm (the chapter's step 4).

The chapter's step 4 ("Instrument hidden-state statistics") records, every ``stats_every``
steps, ``tensor_stats(x)`` of the residual stream x entering a block's attention: mean,
population variance, min, max and kurtosis (``experiments/_tensor_stats.py``, the chapter's
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

Prints the loss table and the statistics table. Writes, as one atomic step, to ``--output-dir`` (default ``./outputs/hidden_stats``): the
runner's ``run_log.txt`` (the loss table, then the statistics table at the first and last
step), ``results.json`` (each run's ``extra.rows``: every statistic at every recorded step),
``curves.csv``, the runner's figures, and ``hidden_stats.csv`` (variant, seed,
step, site, mean, var, min, max, kurtosis) and, with matplotlib, ``hidden_stats.png``.
Options and exit statuses are the runner's (``python -m experiments.hidden_stats --help``).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict, List

import numpy as np

import minigrad
from gpt.capture import capture_residual_stream
from gpt.data import eval_windows

from experiments._cli import run_main
from experiments import _report
from experiments._runner import Study, Variant
from experiments._tensor_stats import STAT_NAMES, tensor_stats

PROG = "python -m experiments.hidden_stats"
NORM_NAME = {"ln": "LayerNorm", "rms": "RMSNorm"}


class ResidualStats:
    """The study's instrument factory: ``ResidualStats(probe)(model, variant, seed)`` returns a
    collector called as ``collector(step, model)``. Picklable (for ``--jobs``).

    Args:
        probe: int array (B, T), the fixed input the statistics are taken on.
    """

    def __init__(self, probe: np.ndarray) -> None:
        self.probe = np.asarray(probe)

    def __call__(self, model, variant, seed) -> "_Collector":
        return _Collector(self.probe)


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


def stats_figure(plt, report, stage) -> None:
    """hidden_stats.png (the runner's ``extra_figures`` hook: called only with matplotlib and
    without --no-plots): variance, kurtosis and max of each site over the steps (mean over
    seeds), LayerNorm solid, RMSNorm dashed."""
    by = stats_by(report)
    sites = _sites(report)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    panels = (("var", "variance (log scale)", True), ("kurtosis", "kurtosis (Gaussian = 3)",
                                                      False),
              ("max", "max value", False))
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    for ax, (stat, label, log) in zip(axes, panels):
        for vi, v in enumerate(report.study.variants):
            for si, site in enumerate(sites):
                pts = sorted((k[2], val[stat]) for k, val in by.items()
                             if k[0] == v.name and k[1] == site)
                if not pts:
                    continue
                xs, ys = zip(*pts)
                ax.plot(xs, ys, color=colors[si % len(colors)],
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
    fig.suptitle("Residual stream entering each block's attention and MLP (probe batch; "
                 "solid: LayerNorm, dashed: RMSNorm)", fontsize=11)
    plt.save_png(fig, stage("hidden_stats.png"), rect=(0, 0.12, 1, 0.95))


def extra_outputs(report) -> Dict[str, str]:
    """hidden_stats.csv."""
    return {"hidden_stats.csv": stats_csv(report)}


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
    extra_outputs=extra_outputs,
    extra_figures=stats_figure,
    output_names=("hidden_stats.csv", "hidden_stats.png"),
)


def prepare(plan) -> Study:
    """The study with its instrument: the probe batch is the first ``batch_size`` evaluation
    windows of the validation split (``--eval-tokens`` bounds them on a large corpus)."""
    probe = eval_windows(plan.val_data, plan.args.block_size,
                         plan.eval_tokens)[0][:plan.args.batch_size]   # (B, T)
    return dataclasses.replace(plan.study, instrument=ResidualStats(probe))


STUDY = dataclasses.replace(STUDY, prepare=prepare)

main = STUDY.main  # main(argv=None) -> exit status (see experiments._runner)

if __name__ == "__main__":
    raise SystemExit(run_main(PROG, main))
