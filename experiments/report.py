"""What a study reports, computed from its runs: the table, the paired differences, run_log.txt,
results.json and curves.csv.

Losses are mean cross-entropy in nats/token over the positions of a split (every one, or the
``--eval-tokens`` sample of a large split). With one seed the table is the chapter's
(``norm  mlp  params  train  val``); with several, each loss column is "mean ± sample sd" over
the seeds where the run trained, and the paired differences from the baseline follow
(``experiments.stats.paired_difference``: a 95 % Student-t interval).
"""
import hashlib
import json
import math
import platform
from pathlib import Path

import numpy as np

import minigrad
from gpt.data import eval_windows

from experiments import options, stats

METRICS = (("val_loss", "val"), ("train_loss", "train"))


def fmt(x, spec=".4f"):
    """A loss for a table ("-" for None; a blown-up one stays short)."""
    return "-" if x is None else format(x, ".4g") if abs(x) >= 1e4 else format(x, spec)


def fmt_diff(d):
    """``-0.1031 [-0.2034, -0.0028]`` (the interval only when there is one)."""
    if d["mean"] is None:
        return "-"
    sg = lambda x: format(x, "+.4g") if abs(x) >= 1e4 else format(x, "+.4f")  # noqa: E731
    return sg(d["mean"]) + (f" [{sg(d['low'])}, {sg(d['high'])}]" if d["low"] is not None else "")


def labels(study, v):
    """The table's label columns of variant ``v`` (``study.columns``: key, width), one string."""
    return "  ".join(f"{v.labels.get(k, v.name):{w}s}" for k, w in study.columns)


class Report:
    """The runs of a study (``entries``, in (variant, seed) order) and their statistics."""

    def __init__(self, study, args, data, seeds, entries, run_id):
        self.study, self.args, self.data, self.seeds, self.runs = study, args, data, seeds, entries
        self.run_id, self.files, self.earlier = run_id, [], []
        self.baseline = study.variants[0].name
        self.uniform_baseline = math.log(data.tokenizer.vocab_size)
        self.summaries = {v.name: self.summary(v) for v in study.variants if self.runs_of(v.name)}

    def runs_of(self, name):
        return [e for e in self.runs if e["name"] == name]

    def paired(self, a, b, metric="val_loss"):
        """Paired difference ``a - b`` of ``metric`` over the seeds where both trained."""
        ra, rb = ({e["seed"]: e[metric] for e in self.runs_of(n) if e["status"] == "ok"}
                  for n in (a, b))
        seeds = [s for s in self.seeds if s in ra and s in rb]
        return {**stats.paired_difference([ra[s] for s in seeds], [rb[s] for s in seeds]),
                "seeds": seeds}

    def summary(self, v):
        """Per variant: params, seeds, divergences, mean and sd of the final losses, and the
        paired difference from the baseline (None for the baseline)."""
        runs = self.runs_of(v.name)
        ok = [e for e in runs if e["status"] == "ok"]
        out = {"name": v.name, **v.labels, "note": v.note, "overrides": dict(v.config),
               "modify": v.modify and v.modify.__name__, "params": runs[0]["params"],
               "seeds": [e["seed"] for e in runs], "seeds_ok": [e["seed"] for e in ok],
               "diverged": [{"seed": e["seed"], **e["diverged_at"]} for e in runs
                            if e["status"] != "ok"]}
        for m, _ in METRICS:
            out[m] = stats.describe([e[m] for e in ok])
        out["difference_from_baseline"] = None if v.name == self.baseline else {
            m: self.paired(v.name, self.baseline, m) for m, _ in METRICS}
        return out

    def positions_text(self, split):
        """The target positions a final ``split`` loss covers: "all 176 positions" or "32 of
        1,594 positions"."""
        data = self.data.train if split == "train" else self.data.val
        counted = int(eval_windows(data, self.args.block_size, self.args.eval_tokens)[2].sum())
        return f"all {len(data) - 1:,} positions" if counted == len(data) - 1 else \
            f"{counted:,} of {len(data) - 1:,} positions"

    @property
    def alone(self):
        """The line that says so when the baseline alone was trained (``--variants``); else
        ""."""
        return "" if len(self.study.variants) > 1 else (
            f"Only the baseline {self.baseline} was trained (--variants): nothing to compare it "
            f"with, so no differences and no deltas.png.")

    @property
    def any_diverged(self):
        return any(e["status"] != "ok" for e in self.runs)

    # ------------------------------------------------------------------ the table and blocks
    def table(self):
        """The header, a rule and one row per variant (several seeds: mean ± sd, the seeds
        that trained, each divergence)."""
        n, head = len(self.seeds), "  ".join(f"{k:{w}s}" for k, w in self.study.columns)
        head += f"  {'params':>8s}  " + (f"{'train':>8s}  {'val':>8s}" if n == 1 else
                                          f"{'train mean ± sd':>17s}  {'val mean ± sd':>17s}  "
                                          f"{'seeds':>5s}")
        rows = [head, "-" * (50 if n == 1 else len(head))]
        for v in self.study.variants:
            s, row = self.summaries[v.name], f"{labels(self.study, v)}  "
            row += f"{s['params']:>8d}  "
            if n == 1:
                e = self.runs_of(v.name)[0]
                rows.append(row + (f"diverged: {e['message']}" if e["status"] != "ok" else
                                   f"{fmt(e['train_loss']):>8s}  {fmt(e['val_loss']):>8s}"))
            elif not s["seeds_ok"]:
                rows.append(row + "diverged in every seed: " + "; ".join(
                    f"seed {d['seed']}: {d['what']} {d['value']} at step {d['step']}"
                    for d in s["diverged"]))
            else:
                cells = [f"{fmt(s[m]['mean'])} ± {fmt(s[m]['std'])}"
                         for m in ("train_loss", "val_loss")]
                row += f"{cells[0]:>17s}  {cells[1]:>17s}  {len(s['seeds_ok']):>2d}/{n:<2d}"
                rows.append((row + ("  diverged: " + ", ".join(
                    f"seed {d['seed']} ({d['what']} {d['value']} at step {d['step']})"
                    for d in s["diverged"]) if s["diverged"] else "")).rstrip())
        return rows + [f"WARNING: trained with a wrong {name}_backward (yours) in "
                       f"{', '.join(variants)}: these losses are not the model's"
                       for name, variants in self.wrong_backward()]

    def differences(self):
        """The paired differences of every variant from the baseline, val then train."""
        lines = [f"Paired differences from {self.baseline} (nats/token; the same seed gives "
                 f"both the same initialisation and batches;",
                 "95% Student-t interval over the seeds where both trained):"]
        width = max(len(v.name) for v in self.study.variants)
        for v in self.study.variants[1:]:
            diffs = self.summaries[v.name]["difference_from_baseline"]
            for i, (m, label) in enumerate(METRICS):
                lines.append(f"  {v.name if i == 0 else '':{width}s}  {label:5s} "
                             f"{fmt_diff(diffs[m])}  {diffs[m]['verdict']}")
        return lines

    def params(self):
        """Each variant's parameter count against the baseline's."""
        b = self.summaries[self.baseline]["params"]
        parts = [f"{v.name} {self.summaries[v.name]['params'] - b:+d} "
                 f"({100.0 * (self.summaries[v.name]['params'] - b) / b:+.2f}%)"
                 for v in self.study.variants[1:]]
        return [f"Parameters minus {self.baseline}'s ({b}): " + ", ".join(parts)]

    def divergence(self):
        """One line per diverged run, or that none diverged; runs worse than uniform."""
        found = [f"  {e['name']} seed {e['seed']}: {e['diverged_at']['what']} became "
                 f"{e['diverged_at']['value']} at step {e['diverged_at']['step']}"
                 for e in self.runs if e["status"] != "ok"]
        lines = ["Divergence (a run stops where its loss or gradient norm became NaN or inf):",
                 *found] if found else [f"Divergence: none (every loss and gradient norm "
                                        f"stayed finite for {self.args.steps} steps)."]
        worse = [f"  {e['name']} seed {e['seed']}: val {fmt(e['val_loss'])}" for e in self.runs
                 if e["status"] == "ok" and e["val_loss"] > self.uniform_baseline]
        return lines + ([f"Trained but ended worse than a uniform prediction (val loss > ln V "
                         f"= {self.uniform_baseline:.4f}):"] + worse if worse else [])

    def grad_norms(self, points=5):
        """The total gradient norm before clipping at a few steps (mean over seeds), and its
        largest value with its step and seed."""
        steps = self.args.steps
        at = sorted({1, *[max(1, round(steps * k / (points - 1))) for k in range(1, points)]})
        width = max(len(v.name) for v in self.study.variants)
        lines = ["Gradient norm before clipping (clip at 1.0), mean over seeds:",
                 f"  {'':{width}s}" + "".join(f"{'step ' + str(t):>11s}" for t in at)
                 + f"  {'max (step, seed)':>22s}"]
        for v in self.study.variants:
            runs = self.runs_of(v.name)
            cells = []
            for t in at:
                vals = [e["grad_norms"][t - 1] for e in runs if len(e["grad_norms"]) >= t]
                cells.append(f"{np.mean(vals):>11.3g}" if vals else f"{'-':>11s}")
            peak = max(((g, i + 1, e["seed"]) for e in runs
                        for i, g in enumerate(e["grad_norms"])), default=None)
            tail = f"{peak[0]:.3g} ({peak[1]}, {peak[2]})" if peak else "-"
            lines.append(f"  {v.name:{width}s}" + "".join(cells) + f"  {tail:>22s}")
        return lines

    def comparison(self):
        """The paired differences, the parameters and the divergences (the baseline alone: the
        line that says so, and the divergences)."""
        return ([self.alone] if self.alone else self.differences() + [""] + self.params()) + \
            [""] + self.divergence()

    def closing(self):
        """The study's closing block (default: ``comparison``)."""
        return self.study.closing(self) if self.study.closing else self.comparison()

    # ------------------------------------------------------------------ the learner's passes
    def wrong_backward(self):
        """(exercise, variants that called it) for each wrong learner's backward used."""
        called = self.called()
        return [(s.name, called[s.name]) for s in self.args.backward or ()
                if s.status == "wrong" and called[s.name]]

    def called(self):
        return {s.name: [v.name for v in self.study.variants if any(
            s.name in e["backward_called"] for e in self.runs_of(v.name))]
            for s in self.args.backward or ()}

    def backward_line(self):
        """Which backward passes were the learner's (``--backward``); "" when none."""
        if not self.args.backward:
            return ""
        from experiments.exercises.learner import trained_with
        return trained_with(self.args.backward,
                            {n for e in self.runs for n in e["backward_called"]})

    # ------------------------------------------------------------------ the outputs
    def earlier_line(self):
        """The figures and checkpoints in the folder this run did not write, in one line."""
        return (f"Also in the folder, not written by this run (an earlier run's, left as they "
                f"were): {', '.join(self.earlier)}")

    def stdout_lines(self):
        """What the command prints: the uniform baseline, the table, the closing block (one
        seed of a quiet study: the table alone, as the chapter prints it)."""
        lines = [f"Uniform baseline: {self.uniform_baseline:.4f}", ""] + self.table()
        if len(self.seeds) > 1 or not self.study.quiet_with_one_seed:
            lines += [""] + self.closing()
        elif self.alone:
            lines += ["", self.alone]
        return lines + (["", f"Backward passes: {self.backward_line()}"]
                        if self.backward_line() else [])

    def run_log(self):
        """run_log.txt: steps, uniform baseline, the table, the closing block, notes."""
        n, a, d = len(self.seeds), self.args, self.data
        seeds = f"seed {self.seeds[0]}" if n == 1 else \
            f"seeds {self.seeds[0]}..{self.seeds[-1]} ({n})"
        lines = [f"# {self.study.name} run log", f"steps: {a.steps}"]
        lines += [f"seeds: {self.seeds[0]}..{self.seeds[-1]} ({n})"] if n > 1 else []
        lines += [f"uniform baseline: {self.uniform_baseline:.4f}", ""] + self.table()
        lines += [""] + self.closing() + ["", "Notes:",
                  f"- {seeds}, corpus {d.label} ({len(d.text)} characters, vocab "
                  f"{d.tokenizer.vocab_size}).", f"- {options.recipe(a, a.steps)}.",
                  f"- train/val: mean loss over {self.positions_text('train')} of the training "
                  f"split and {self.positions_text('val')} of the",
                  "  validation split (fixed windows, deterministic); the chapter's "
                  "one-random-batch estimates are in results.json."]
        lines += ["- mean ± sd: sample standard deviation over the seeds that trained."] \
            if n > 1 else []
        lines += [f"- backward passes (--backward): {self.backward_line()}."] \
            if self.backward_line() else []
        lines += [f"- {v.name}: {v.note}" for v in self.study.variants if v.note]
        lines += [f"- {self.earlier_line()}."] if self.earlier else []
        return "\n".join(lines) + "\n"

    def config(self):
        """results.json's ``config``: the options, the schedule, the model, the corpus and how
        the final losses are measured."""
        a, d, study = self.args, self.data, self.study
        varied = {k for v in study.variants for k in v.config}
        first = options.model_config(a, d, **study.variants[0].config).to_dict()
        tokens = {}
        for split, ids in (("train", d.train), ("val", d.val)):
            w = eval_windows(ids, a.block_size, a.eval_tokens)
            tokens[split] = (int(w[0].shape[0]), int(w[2].sum()))
        return {
            "steps": a.steps, "seed": self.seeds[0], "seeds": self.seeds,
            "batch_size": a.batch_size, "eval_every": a.eval_every, "preset": a.preset,
            "init": a.init, "optimizer": {
                "name": "AdamW", "lr": a.lr, "betas": [0.9, a.beta2], "eps": 1e-8,
                "weight_decay": a.weight_decay, "decay_on": a.decay_on},
            "schedule": {"warmup_iters": a.warmup_iters,
                         "lr_decay_iters": a.lr_decay_iters or a.steps,
                         "min_lr": a.lr if a.min_lr is None else a.min_lr},
            "clip_grad_norm": a.grad_clip or None,
            "model": {k: v for k, v in first.items() if k not in varied},
            "baseline": self.baseline, "variants": [v.name for v in study.variants],
            "corpus": {
                "path": None if a.corpus is None else d.label,
                "name": "built-in: Jane Austen, Pride and Prejudice (1813), opening of "
                        "chapter 1, Project Gutenberg eBook #1342" if a.corpus is None
                        else a.corpus if isinstance(a.corpus, str) else Path(a.corpus).name,
                "sha256": hashlib.sha256(d.text.encode("utf-8")).hexdigest(),
                "characters": len(d.text), "vocab_size": d.tokenizer.vocab_size,
                "train_fraction": options.TRAIN_FRACTION,
                "train_tokens": len(d.train), "val_tokens": len(d.val)},
            "evaluation": {
                "eval_tokens": a.eval_tokens, "train_windows": tokens["train"][0],
                "val_windows": tokens["val"][0], "train_loss_tokens": tokens["train"][1],
                "val_loss_tokens": tokens["val"][1], "val_curve_tokens": tokens["val"][1],
                "about": "train_loss/val_loss: mean cross-entropy (nats/token) over the "
                         "*_loss_tokens target positions, fixed windows; *_one_batch: the "
                         "chapter's one random batch after training; per variant: mean and "
                         "sample sd over the seeds that trained, and the paired difference "
                         "from the baseline with a 95% Student-t interval"}}

    def results_json(self, incomplete=False):
        """results.json (strict JSON: no NaN): the configuration, the summaries, every run;
        status "incomplete" (``incomplete``) while a sweep has runs to go."""
        a = self.args
        doc = {
            "experiment": self.study.name, "run_id": self.run_id, "files": list(self.files),
            "status": "incomplete" if incomplete else
                      "diverged" if self.any_diverged else "ok",
            "config": self.config(),
            "backward": [{"exercise": s.name, "file": s.path, "check": s.status,
                          "called_by": self.called()[s.name]} for s in a.backward or ()] or None,
            "uniform_baseline": self.uniform_baseline,
            "versions": {"minigrad-gpt": minigrad.__version__, "python": platform.python_version(),
                         "numpy": np.__version__, "platform": platform.platform()},
            "variants": list(self.summaries.values()),
            "runs": [{k: v for k, v in e.items() if not k.startswith("_")} for e in self.runs]}
        return json.dumps(doc, indent=2, allow_nan=False) + "\n"

    def curves_csv(self):
        """curves.csv: ``variant,seed,step,train_loss,val_loss,grad_norm``, a row per step of
        every run (train_loss: the batch's, before the update; val_loss: every
        ``--eval-every`` steps and at the last, empty otherwise)."""
        lines = ["variant,seed,step,train_loss,val_loss,grad_norm"]
        for e in self.runs:
            val = {int(s): v for s, v in e["val_curve"]}
            for i, (loss, g) in enumerate(zip(e["loss_curve"], e["grad_norms"]), start=1):
                vv = val.get(i)
                lines.append(f"{e['name']},{e['seed']},{i},{loss!r},"
                             f"{'' if vv is None else repr(float(vv))},{g!r}")
        return "\n".join(lines) + "\n"
