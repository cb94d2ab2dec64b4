"""The reporting side of the study runner: statistics over seeds, tables, run_log.txt,
results.json and curves.csv, all computed from the runs (``experiments.four_variants``).

Losses are mean cross-entropy in nats/token over the positions of a split (every one, or the
``--eval-tokens`` sample of a large split: ``Report.positions``). With one seed the
table is the chapter's (``norm  mlp  params  train  val``); with several, each loss column is
"mean ± sample sd" over the seeds where the run trained, and a block of paired differences from
the baseline follows (``experiments._stats.paired_difference``: 95 % Student-t interval).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import platform
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

from gpt.data import eval_windows

from experiments import _norm_counts, _stats, exercise

__all__ = ["Report", "run_line", "table_header", "table_rows", "differences_block",
           "grad_norm_block", "divergence_findings", "params_block", "differences_and_params",
           "stdout_lines", "run_log", "results_json", "curves_csv", "fmt_diff"]

METRICS = ("val_loss", "train_loss")
METRIC_LABEL = {"val_loss": "val", "train_loss": "train"}


class Report:
    """The runs of a study and their statistics.

    Attributes:
        plan: the ``experiments.four_variants`` plan.  study: ``plan.study``.
        runs: run entries in (variant, seed) order.  seeds: list of int.
        uniform_baseline: ln(vocab_size), the loss of a uniform prediction (nats/token).
        summaries: variant name -> summary dict (see ``summary``).
        backward: the learner's backward passes of ``--backward`` (``exercise.Swap``), or ().
    """

    def __init__(self, plan, runs: List[Dict[str, Any]]) -> None:
        self.plan, self.study, self.runs, self.seeds = plan, plan.study, runs, plan.seeds
        self.uniform_baseline = math.log(plan.vocab_size)
        self.summaries = {v.name: self.summary(v.name) for v in self.study.variants}
        self.files: List[str] = []    # the files this run writes (results.json's manifest)
        self.backward = getattr(plan, "backward", ())

    def recipe_text(self) -> str:
        """The initialisation and the optimiser's recipe, e.g. "init gpt2, AdamW lr 0.001 with
        100 warmup steps and a cosine to 0.0001 at step 2000, weight decay 0.1 on the 2-D
        parameters (preset shakespeare-cpu)"."""
        a = self.plan.args
        lr = f"AdamW lr {a.lr:g}" + (" constant" if a.min_lr is None and not a.warmup_iters else
                                     f" with {a.warmup_iters} warmup steps and a cosine to "
                                     f"{a.lr if a.min_lr is None else a.min_lr:g} at step "
                                     f"{a.lr_decay_iters or self.plan.steps}")
        on = "every parameter" if a.decay_on == "all" else "the 2-D parameters"
        return (f"init {a.init}, {lr}, weight decay {a.weight_decay:g} on {on}"
                + (f" (preset {a.preset})" if a.preset else ""))

    def runs_of(self, name: str) -> List[Dict[str, Any]]:
        """The runs of variant ``name``, in seed order."""
        return [e for e in self.runs if e["name"] == name]

    def paired(self, a: str, b: str, metric: str = "val_loss") -> Dict[str, Any]:
        """Paired difference ``a - b`` of ``metric`` over the seeds where both trained
        (``_stats.paired_difference``, plus ``seeds``: the seeds used)."""
        ra, rb = ({e["seed"]: e[metric] for e in self.runs_of(n) if e["status"] == "ok"}
                  for n in (a, b))
        seeds = [s for s in self.seeds if s in ra and s in rb]
        d = _stats.paired_difference([ra[s] for s in seeds], [rb[s] for s in seeds])
        d["seeds"] = seeds
        return d

    def summary(self, name: str) -> Dict[str, Any]:
        """Per variant: params, the seeds that trained, each divergence (seed, step, what,
        value), mean and sample sd of the final train and val losses, and the paired
        difference from the baseline (None for the baseline itself)."""
        runs = self.runs_of(name)
        v = next(x for x in self.study.variants if x.name == name)
        ok = [e for e in runs if e["status"] == "ok"]
        out = {"name": name, **v.labels, "note": v.note, "overrides": dict(v.overrides),
               "modify": v.modify and v.modify.__name__,
               "params": runs[0]["params"], "seeds": [e["seed"] for e in runs],
               "seeds_ok": [e["seed"] for e in ok],
               "diverged": [{"seed": e["seed"], **e["diverged_at"]} for e in runs
                            if e["status"] != "ok"]}
        for m in METRICS:
            out[m] = _stats.describe([e[m] for e in ok if e[m] is not None])
        base = self.study.baseline.name
        out["difference_from_baseline"] = None if name == base else {
            m: self.paired(name, base, m) for m in METRICS}
        return out

    def positions(self, split: str):
        """``(counted, total)``: the target positions a final ``split`` loss ("train" or "val")
        is the mean over (``gpt.data.eval_windows`` with ``--eval-tokens``), and the split's."""
        data = self.plan.train_data if split == "train" else self.plan.val_data
        mask = eval_windows(data, self.plan.args.block_size,
                            getattr(self.plan, "eval_tokens", None))[2]
        return int(mask.sum()), len(data) - 1

    def positions_text(self, split: str) -> str:
        """"all 176 positions" or "32 of 1,594 positions" (see ``positions``)."""
        counted, total = self.positions(split)
        return f"all {total:,} positions" if counted == total else \
            f"{counted:,} of {total:,} positions"

    @property
    def any_diverged(self) -> bool:
        """True when a run diverged."""
        return any(e["status"] != "ok" for e in self.runs)


def _f(x: Optional[float], spec: str = ".4f") -> str:
    if x is None:
        return "-"
    return format(x, ".4g") if abs(x) >= 1e4 else format(x, spec)  # a blown-up loss stays short


def run_line(study, e: Dict[str, Any], n_seeds: int) -> str:
    """The line printed as a run finishes: ``  ln      gelu        params=105216  train=..``."""
    variant = next(v for v in study.variants if v.name == e["name"])
    line = f"  {_labels(study, variant)}  params={e['params']:>6d}  "
    if e["status"] != "ok":
        line += f"diverged: {e['message']}"
    else:
        line += f"train={_f(e['train_loss'])}  val={_f(e['val_loss'])}"
    return line + (f"  seed {e['seed']}" if n_seeds > 1 else "")


def _labels(study, variant) -> str:
    return "  ".join(f"{study.label(variant, k):{w}s}" for k, w in study.columns)


def table_header(study, n_seeds: int = 1) -> str:
    """The table's header: the chapter's ``norm  mlp  params  train  val`` with one seed."""
    head = "  ".join(f"{k:{w}s}" for k, w in study.columns) + f"  {'params':>8s}  "
    if n_seeds == 1:
        return head + f"{'train':>8s}  {'val':>8s}"
    return head + f"{'train mean ± sd':>17s}  {'val mean ± sd':>17s}  {'seeds':>5s}"


def table_rows(report: Report) -> List[str]:
    """One row per variant (one seed: the chapter's row; a diverged run shows where it stopped;
    several seeds: mean ± sd, the number of seeds that trained, and each divergence)."""
    rows = []
    n = len(report.seeds)
    for v in report.study.variants:
        s = report.summaries[v.name]
        row = f"{_labels(report.study, v)}  {s['params']:>8d}  "
        if n == 1:
            e = report.runs_of(v.name)[0]
            if e["status"] != "ok":
                rows.append(row + f"diverged: {e['message']}")
            else:
                rows.append(row + f"{_f(e['train_loss']):>8s}  {_f(e['val_loss']):>8s}")
            continue
        if not s["seeds_ok"]:
            rows.append(row + "diverged in every seed: " + "; ".join(
                f"seed {d['seed']}: {d['what']} {d['value']} at step {d['step']}"
                for d in s["diverged"]))
            continue
        cells = []
        for m in ("train_loss", "val_loss"):
            d = s[m]
            cells.append(f"{_f(d['mean'])} ± {_f(d['std'])}")
        row += f"{cells[0]:>17s}  {cells[1]:>17s}  {len(s['seeds_ok']):>2d}/{n:<2d}"
        if s["diverged"]:
            row += "  diverged: " + ", ".join(
                f"seed {d['seed']} ({d['what']} {d['value']} at step {d['step']})"
                for d in s["diverged"])
        rows.append(row.rstrip())  # n < 10 leaves {n:<2d} padding at the end
    return rows


def fmt_diff(d: Dict[str, Any]) -> str:
    """``-0.1031 nats [-0.2034, -0.0028]`` (the interval only when there is one)."""
    if d["mean"] is None:
        return "-"
    def sg(x: float) -> str:
        return format(x, "+.4g") if abs(x) >= 1e4 else format(x, "+.4f")

    txt = sg(d["mean"])
    if d["low"] is not None:
        txt += f" [{sg(d['low'])}, {sg(d['high'])}]"
    return txt


def differences_block(report: Report) -> List[str]:
    """The paired differences of every variant from the baseline, val then train loss."""
    base = report.study.baseline.name
    lines = [f"Paired differences from {base} (nats/token; the same seed gives both the same "
             f"initialisation and batches;",
             f"95% Student-t interval over the seeds where both trained):"]
    width = max(len(v.name) for v in report.study.variants)
    for v in report.study.variants[1:]:
        diffs = report.summaries[v.name]["difference_from_baseline"]
        for i, m in enumerate(METRICS):
            d = diffs[m]
            name = v.name if i == 0 else ""
            lines.append(f"  {name:{width}s}  {METRIC_LABEL[m]:5s} {fmt_diff(d)}  {d['verdict']}")
    return lines


def grad_norm_block(report: Report, points: int = 5) -> List[str]:
    """The gradient-norm history in a few columns: the total gradient norm before clipping at
    ``points`` steps spread over the run (mean over the seeds that reached the step), then its
    largest value and the step of it. Diverged runs count up to the step before they stopped."""
    steps = report.plan.steps
    at = sorted({1, *[max(1, round(steps * k / (points - 1))) for k in range(1, points)]})
    width = max(len(v.name) for v in report.study.variants)
    head = f"  {'':{width}s}" + "".join(f"{'step ' + str(t):>11s}" for t in at) + \
        f"  {'max (step, seed)':>22s}"
    lines = ["Gradient norm before clipping (clip at 1.0), mean over seeds:", head]
    for v in report.study.variants:
        runs = report.runs_of(v.name)
        cells = []
        for t in at:
            vals = [e["grad_norms"][t - 1] for e in runs if len(e["grad_norms"]) >= t]
            cells.append(f"{np.mean(vals):>11.3g}" if vals else f"{'-':>11s}")
        peak = max(((g, i + 1, e["seed"]) for e in runs for i, g in enumerate(e["grad_norms"])),
                   default=None)
        tail = f"{peak[0]:.3g} ({peak[1]}, {peak[2]})" if peak else "-"
        lines.append(f"  {v.name:{width}s}" + "".join(cells) + f"  {tail:>22s}")
    return lines


def params_block(report: Report) -> List[str]:
    """Each variant's parameter count against the baseline's, with sign and percentage."""
    base = report.study.baseline.name
    b = report.summaries[base]["params"]
    parts = []
    for v in report.study.variants[1:]:
        d = report.summaries[v.name]["params"] - b
        parts.append(f"{v.name} {d:+d} ({100.0 * d / b:+.2f}%)")
    return [f"Parameters minus {base}'s ({b}): " + ", ".join(parts)]


def differences_and_params(report: Report) -> List[str]:
    """The default closing of a comparison study: paired differences, parameters, and the
    divergence findings."""
    return (differences_block(report) + [""] + params_block(report) + [""]
            + divergence_findings(report))


def divergence_findings(report: Report) -> List[str]:
    """One line per diverged run: variant, seed, what became non-finite and at which step;
    or a line saying that no run diverged."""
    found = [f"  {e['name']} seed {e['seed']}: {e['diverged_at']['what']} became "
             f"{e['diverged_at']['value']} at step {e['diverged_at']['step']}"
             for e in report.runs if e["status"] != "ok"]
    if not found:
        lines = [f"Divergence: none (every loss and gradient norm stayed finite for "
                 f"{report.plan.steps} steps)."]
    else:
        lines = ["Divergence (a run stops where its loss or gradient norm became NaN or inf):",
                 *found]
    worse = [f"  {e['name']} seed {e['seed']}: val {_f(e['val_loss'])}" for e in report.runs
             if e["status"] == "ok" and e["val_loss"] is not None
             and e["val_loss"] > report.uniform_baseline]
    if worse:
        lines += [f"Trained but ended worse than a uniform prediction (val loss > ln V = "
                  f"{report.uniform_baseline:.4f}):"] + worse
    return lines


def _called(report: Report) -> Dict[str, List[str]]:
    """Exercise name -> the variants whose runs called the learner's backward (``--backward``)."""
    return {s.name: [v.name for v in report.study.variants if any(
        s.name in e["backward_called"] for e in report.runs_of(v.name))] for s in report.backward}


def backward_warnings(report: Report) -> List[str]:
    """A line for each wrong backward of the learner's (``--backward``) that the models called,
    for under the table: their losses are not the model's."""
    called = _called(report)
    return [f"WARNING: trained with a wrong {s.name}_backward (yours) in "
            f"{', '.join(called[s.name])}: these losses are not the model's"
            for s in report.backward if s.status == "wrong" and called[s.name]]


def backward_line(report: Report) -> str:
    """Which backward passes were the learner's (``--backward``), their checks and whether the
    models called them; "" when none was."""
    called = [name for name, variants in _called(report).items() if variants]
    return exercise.trained_with(report.backward, called) if report.backward else ""


def stdout_lines(report: Report) -> List[str]:
    """What the command prints after the outputs are written: the uniform baseline, the table,
    then the closing block (unless one seed and ``Study.closing_on_stdout_with_one_seed`` is
    False: four_variants then prints exactly the chapter's table)."""
    n = len(report.seeds)
    lines = ["", f"Uniform baseline: {report.uniform_baseline:.4f}", "",
             table_header(report.study, n), "-" * (50 if n == 1 else
                                                   len(table_header(report.study, n)))]
    lines += table_rows(report) + backward_warnings(report)
    if n > 1 or report.study.closing_on_stdout_with_one_seed:
        lines += [""] + closing_lines(report)
    if backward_line(report):
        lines += ["", f"Backward passes: {backward_line(report)}"]
    return lines


def closing_lines(report: Report) -> List[str]:
    """The study's closing block (``Study.closing``), by default the paired differences."""
    if report.study.closing is not None:
        return report.study.closing(report)
    return differences_block(report)


def _seeds_text(seeds: List[int]) -> str:
    if len(seeds) == 1:
        return f"seed {seeds[0]}"
    return f"seeds {seeds[0]}..{seeds[-1]} ({len(seeds)})"


def run_log(report: Report) -> str:
    """run_log.txt: the chapter's layout (steps, uniform baseline, table), the closing block,
    then notes on the columns and the variants."""
    plan, study = report.plan, report.study
    n = len(report.seeds)
    lines = [f"# {study.name} run log", f"steps: {plan.steps}"]
    if n > 1:
        lines.append(f"seeds: {report.seeds[0]}..{report.seeds[-1]} ({n})")
    lines += [f"uniform baseline: {report.uniform_baseline:.4f}", "", table_header(study, n)]
    lines += table_rows(report) + backward_warnings(report)
    lines += [""] + closing_lines(report)
    lines += ["", "Notes:",
              f"- {_seeds_text(report.seeds)}, corpus {plan.corpus_label} ({len(plan.text)} "
              f"characters, vocab {plan.vocab_size}).",
              f"- {report.recipe_text()}.",
              f"- train/val: mean loss over {report.positions_text('train')} of the training "
              f"split and {report.positions_text('val')} of the",
              "  validation split (fixed windows, deterministic); the chapter's one-random-batch "
              "estimates are in results.json."]
    if n > 1:
        lines.append("- mean ± sd: sample standard deviation over the seeds that trained.")
    if backward_line(report):
        lines.append(f"- backward passes (--backward {plan.args.backward}): "
                     f"{backward_line(report)}.")
    for v in study.variants:
        if v.note:
            lines.append(f"- {v.name}: {v.note}")
    return "\n".join(lines) + "\n"


def _versions() -> Dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version
    try:
        pkg = version("minigrad-gpt")
    except PackageNotFoundError:  # run from a source tree: the engine's version
        import minigrad
        pkg = minigrad.__version__
    return {"minigrad-gpt": pkg, "python": platform.python_version(),
            "numpy": np.__version__, "platform": platform.platform()}


def results_dict(report: Report) -> Dict[str, Any]:
    """The results.json document (see ``results_json``)."""

    plan, args, study = report.plan, report.plan.args, report.study
    varied = {k for v in study.variants for k in v.overrides}
    model_cfg = {k: v for k, v in plan.configs[study.baseline.name].to_dict().items()
                 if k not in varied}
    runs = [{k: v for k, v in e.items() if not k.startswith("_")} for e in report.runs]
    cap = getattr(plan, "eval_tokens", None)
    tokens = {}
    for split, data in (("train", plan.train_data), ("val", plan.val_data)):
        w = eval_windows(data, args.block_size, cap)
        tokens[split] = (int(w[0].shape[0]), int(w[2].sum()))
    return {
        "experiment": study.name,
        "run_id": getattr(plan, "run_id", None),
        "files": list(report.files),
        "status": "diverged" if report.any_diverged else "ok",
        "config": {
            "steps": plan.steps, "seed": report.seeds[0], "seeds": report.seeds,
            "batch_size": args.batch_size, "eval_every": args.eval_every,
            "preset": args.preset, "init": args.init,
            "optimizer": {"name": "AdamW", "lr": args.lr, "betas": [0.9, args.beta2], "eps": 1e-8,
                          "weight_decay": args.weight_decay, "decay_on": args.decay_on},
            "schedule": {"warmup_iters": args.warmup_iters,
                         "lr_decay_iters": args.lr_decay_iters or plan.steps,
                         "min_lr": args.lr if args.min_lr is None else args.min_lr},
            "clip_grad_norm": args.grad_clip or None,
            "model": model_cfg,
            "baseline": study.baseline.name,
            "variants": [v.name for v in study.variants],
            "corpus": {
                "path": None if args.corpus is None else str(args.corpus),
                "name": "built-in: Jane Austen, Pride and Prejudice (1813), opening of "
                        "chapter 1, Project Gutenberg eBook #1342" if args.corpus is None
                        else args.corpus if isinstance(args.corpus, str)
                        else Path(args.corpus).name,
                "sha256": hashlib.sha256(plan.text.encode("utf-8")).hexdigest(),
                "characters": len(plan.text), "vocab_size": plan.vocab_size,
                "train_fraction": plan.train_fraction,
                "train_tokens": int(len(plan.train_data)), "val_tokens": int(len(plan.val_data)),
            },
            "evaluation": {
                "train_loss/val_loss": "mean cross-entropy (nats/token) over the split's "
                                       "target positions (*_loss_tokens of them), fixed windows",
                "eval_tokens": cap,
                "train_windows": tokens["train"][0], "val_windows": tokens["val"][0],
                "train_loss_tokens": tokens["train"][1], "val_loss_tokens": tokens["val"][1],
                "val_curve_tokens": tokens["val"][1],
                "train_loss_one_batch/val_loss_one_batch": "the chapter's estimate: one random "
                                                           "batch, drawn after training",
                "statistics": "per variant: mean and sample sd (ddof 1) over the seeds that "
                              "trained; difference_from_baseline: paired by seed, mean with a "
                              "95% Student-t interval (t quantile computed exactly)",
            },
        },
        "backward": [{"exercise": s.name, "file": s.path, "check": s.status,
                      "called_by": _called(report)[s.name]}
                     for s in report.backward] or None,
        "uniform_baseline": report.uniform_baseline,
        "versions": _versions(),
        "variants": list(report.summaries.values()),
        "runs": runs,
    }


def results_json(report: Report) -> str:
    """results.json as text (strict JSON: no NaN)."""
    return json.dumps(results_dict(report), indent=2, allow_nan=False) + "\n"


def curves_csv(report: Report) -> str:
    """curves.csv: ``variant,seed,step,train_loss,val_loss,grad_norm``, one row per completed
    step of every run; train_loss is the step's batch loss before its update, grad_norm the
    total gradient norm before clipping, val_loss (after the update) every ``--eval-every``
    steps and at the last step, empty otherwise."""
    lines = ["variant,seed,step,train_loss,val_loss,grad_norm"]
    for e in report.runs:
        val = {int(s): v for s, v in e["val_curve"]}
        for i, (loss, g) in enumerate(zip(e["loss_curve"], e["grad_norms"]), start=1):
            vv = val.get(i)
            lines.append(f"{e['name']},{e['seed']},{i},{loss!r},"
                         f"{'' if vv is None else repr(float(vv))},{g!r}")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------ four_variants: the chapter's lessons

LESSON_RMS = "RMSNorm: same regularization effect as LayerNorm, ~half the FLOPs."
LESSON_SWIGLU = ("SwiGLU: gating learns which features to pass through; modest extra params "
                 "(we scaled hidden_mult=8/3 to roughly match GELU MLP size).")
NAME = {"ln": "LayerNorm", "rms": "RMSNorm", "gelu": "GELU", "swiglu": "SwiGLU"}


def _compare(report, a, b, label, who):
    """The paired val-loss difference a - b, its interval and verdict, and the divergences."""
    d = report.paired(a, b, "val_loss")
    lost = [f"{name} seed {x['seed']} ({x['what']} {x['value']} at step {x['step']})"
            for name in (a, b) for x in report.summaries[name]["diverged"]]
    if d["mean"] is None:
        return f"    {label}: no comparison; diverged: {'; '.join(lost)}"
    line = f"    {label}: {a} - {b} = {fmt_diff(d)} nats: {d['verdict']}"
    if d["excludes_zero"]:
        line += f" ({who} {'lower' if d['mean'] < 0 else 'higher'})"
    return line + (f"; diverged, left out: {'; '.join(lost)}" if lost else "")


def four_variants_closing(report):
    """Each of the chapter's two lessons quoted, with this run's measurement beside it."""
    n = len(report.seeds)
    lines = (differences_block(report) + [""]) if n > 1 else []
    lines += ["Lessons (the chapter's words, quoted; this run's measurement below each):",
              f'- The chapter: "{LESSON_RMS}"',
              f"  Measured, final val loss, RMSNorm minus LayerNorm, same MLP, same seeds "
              f"({n} seed{'s' if n > 1 else ''}):"]
    lines += [_compare(report, f"rms+{m}", f"ln+{m}", f"with {NAME[m]}", "RMSNorm")
              for m in ("gelu", "swiglu")]
    args = report.plan.args
    shape = (args.batch_size, args.block_size, args.d_model)
    inputs = _norm_counts.make_inputs(shape, "float64", 0)
    ratio = {p: _norm_counts.count("rms", p, inputs)["flops"]
             / _norm_counts.count("ln", p, inputs)["flops"] for p in _norm_counts.PASSES}
    words = {p: "about half" if abs(r - 0.5) <= 0.1 else
             f"{'more' if r > 0.5 else 'less'} than half: a {100 * (1 - r):.0f}% saving"
             for p, r in ratio.items()}
    lines.append(f"  Measured, FLOPs RMSNorm/LayerNorm counted from our code at "
                 f"{'x'.join(map(str, shape))}: forward {ratio['forward']:.2f} "
                 f"({words['forward']}), forward+backward {ratio['forward_backward']:.2f} "
                 f"({words['forward_backward']}).")
    if args.norm_cost is None:
        lines.append("  Measured, time: not measured in this run (python -m experiments.norm_cost "
                     "measures it; --norm-cost PATH cites its results.json here).")
    else:
        t = args.norm_cost["time_ratio"]
        lines.append(f"  Measured by norm_cost ({args.norm_cost['_path']}), time RMSNorm/LayerNorm"
                     f" at {t['shape']}: forward {t['forward']:.2f}, forward+backward "
                     f"{t['forward_backward']:.2f}.")
    lines.append(f'- The chapter: "{LESSON_SWIGLU}"')
    p = {name: s["params"] for name, s in report.summaries.items()}
    for norm in ("ln", "rms"):
        a, b = p[f"{norm}+swiglu"], p[f"{norm}+gelu"]
        how = (f"SwiGLU has {a - b} more parameters, so extra parameters, as the chapter says"
               if a > b else f"SwiGLU has {b - a} fewer parameters, so not extra parameters, "
               f"contrary to the chapter" if a < b else "the same number of parameters")
        lines.append(f"  Measured, parameters with {NAME[norm]}: {norm}+swiglu - {norm}+gelu = "
                     f"{a - b:+d} ({100.0 * (a - b) / b:+.2f}%): {how}.")
    lines.append("  Measured, final val loss, SwiGLU minus GELU, same norm, same seeds:")
    return lines + [_compare(report, f"{n}+swiglu", f"{n}+gelu", f"with {NAME[n]}", "SwiGLU")
                    for n in ("ln", "rms")]


def norm_cost_arg(text):
    """``--norm-cost PATH``: the claim of a norm_cost results.json, checked now."""
    if not text:
        raise argparse.ArgumentTypeError("empty path")
    path = Path(text)
    try:
        claim = _norm_counts.load_claim(path)
        t = claim["time_ratio"]
        float(t["forward"]), float(t["forward_backward"]), str(t["shape"])
    except OSError as e:
        raise argparse.ArgumentTypeError(f"cannot read {path}: {e.strerror or e}") from None
    except (KeyError, TypeError, ValueError) as e:
        raise argparse.ArgumentTypeError(
            str(e) if isinstance(e, ValueError) else f"{path} has no time_ratio block") from None
    return dict(claim, _path=str(path))
