"""Faster or lower: a study's variants against its baseline across run lengths and learning rates.

Reads the ``results.json`` of study runs (``experiments.runner``), each run a length
(``config.steps``) and a learning rate (``config.optimizer.lr``), and prints, then draws:

- per run length (the runs at one learning rate): each variant's final val loss minus the
  baseline's, paired by seed, with a 95 % Student-t interval, and its steps-to-target: the
  first evaluation step at which the variant's val loss reaches the baseline's final val loss
  of the same seed (the median over the seeds; "-" when some seed never does);
- per learning rate (the runs at one length): each variant's mean final val loss, its best
  rate, and the gap of the variants' bests, paired by seed.

``gap_vs_length.png``: the gaps against the run length (log scale), intervals as bars;
``val_vs_lr.png``: the mean val loss against the learning rate (log scale), 95 % intervals of
the mean over the seeds as bars. docs/results.md ("Faster or lower") shows both:

    python tools/faster_or_lower.py outputs/len2000 outputs/len4000 outputs/len8000 \
        outputs/lr5e-4 outputs/lr2e-3 outputs/lr4e-3 --output-dir docs/img

The folders must be one sweep: the same study, corpus, model and seeds' base, varying only
the run length, the rate (its schedule) and which variants trained; one folder per (steps, lr).
Runs without a final val loss (diverged) are left out, and a comparison without a seed that
trained both prints "-". Needs the project installed (``pip install -e .``, README) and
matplotlib (the ``plot`` extra) for the figures; ``--no-plots`` prints only. Bad input is one
line on stderr, status 2.
"""
import importlib.util
import json
import math
import statistics
import sys
from pathlib import Path

from experiments import cli
from experiments.stats import describe, paired_difference, t_ppf


# what may differ between the folders of one sweep; anything else (corpus, model, baseline)
# must be the same, or the gaps would compare different studies
VARIED = ("steps", "seeds", "variants", "schedule")


def read(folders):
    """``{(steps, lr): {"baseline": name, "variants": [names], "runs": {(name, seed): run}}}``.
    Raises ``cli.UsageError`` when two folders hold the same (steps, lr) or differ in more than
    the run length, the rate, the seeds and the variants."""
    cells, first = {}, None
    for folder in folders:
        res = json.loads((Path(folder) / "results.json").read_text(encoding="utf-8"))
        key = (res["config"]["steps"], res["config"]["optimizer"]["lr"])
        if key in cells:
            raise cli.UsageError(f"{folder}: a second study of {key[0]} steps at lr {key[1]:g}")
        same = {k: v for k, v in res["config"].items() if k not in VARIED}
        same["optimizer"] = {k: v for k, v in same["optimizer"].items() if k != "lr"}
        first = first or (folder, same)
        for k in sorted(set(same) | set(first[1])):
            if same.get(k) != first[1].get(k):
                raise cli.UsageError(f"{folder}: its {k} differs from {first[0]}'s; a sweep "
                                     f"varies only the run length and the learning rate")
        cell = cells[key] = {"baseline": res["config"]["baseline"], "variants": [], "runs": {}}
        for e in res["runs"]:
            if e["status"] == "ok":
                cell["runs"][e["name"], e["seed"]] = e
                if e["name"] not in cell["variants"]:
                    cell["variants"].append(e["name"])
    return cells


def gap(cell, name):
    """Paired difference ``name - baseline`` of the final val loss over the common seeds."""
    base = cell["baseline"]
    seeds = sorted(s for n, s in cell["runs"] if n == name and (base, s) in cell["runs"])
    return paired_difference([cell["runs"][name, s]["val_loss"] for s in seeds],
                             [cell["runs"][base, s]["val_loss"] for s in seeds])


def steps_to_target(cell, name):
    """Median over seeds of the first evaluation step where ``name``'s val loss is at or below
    the baseline's final val loss of the same seed (None when some seed never gets there, or
    no seed trained both)."""
    found = []
    for n, s in cell["runs"]:
        if n == name and (cell["baseline"], s) in cell["runs"]:
            target = cell["runs"][cell["baseline"], s]["val_loss"]
            hit = [step for step, v in cell["runs"][n, s]["val_curve"] if float(v) <= target]
            found.append(hit[0] if hit else None)
    return None if not found or None in found else statistics.median(found)


def fmt(d):
    return (f"{d['mean']:+.4f} [{d['low']:+.4f}, {d['high']:+.4f}]" if d["low"] is not None
            else f"{d['mean']:+.4f}" if d["mean"] is not None else "-")


def lengths_table(cells, lr):
    """Lines: per run length at ``lr``, each variant's gap and steps-to-target."""
    rows = sorted((s, c) for (s, r), c in cells.items() if r == lr)
    lines = [f"Run length, lr {lr:g}: final val loss minus {rows[0][1]['baseline']}'s (nats, "
             f"paired 95% interval), steps to reach {rows[0][1]['baseline']}'s final val"]
    for steps, c in rows:
        for name in (n for n in c["variants"] if n != c["baseline"]):
            d, t = gap(c, name), steps_to_target(c, name)
            lines.append(f"  {steps:>6d} steps  {name:10s} {fmt(d)}  n={d['n']}  "
                         f"steps-to-target {'-' if t is None else f'{t:g}'}")
    return lines


def lr_table(cells, steps):
    """Lines: per variant the mean val at each lr, its best lr, and best-against-best gaps."""
    rows = sorted((r, c) for (s, r), c in cells.items() if s == steps)
    lines, best = [f"Learning rate, {steps} steps: mean final val loss ± sd over the seeds"], {}
    for name in variants(cells):
        means = {r: m for r, m in ((r, val(c, name)) for r, c in rows) if m["n"]}
        if not means:
            continue
        best[name] = min(means, key=lambda r: means[r]["mean"])
        lines.append(f"  {name:10s} " + "  ".join(
            f"lr {r:g}: {m['mean']:.4f} ± " + ("-" if m["std"] is None else f"{m['std']:.4f}")
            for r, m in means.items()) + f"  best lr {best[name]:g}")
    base = rows[0][1]["baseline"]
    for name in best:
        if name != base and base in best:   # each at its best rate, paired by seed
            a, b = cells[steps, best[name]], cells[steps, best[base]]
            seeds = sorted(s for n, s in a["runs"] if n == name and (base, s) in b["runs"])
            d = paired_difference([a["runs"][name, s]["val_loss"] for s in seeds],
                                  [b["runs"][base, s]["val_loss"] for s in seeds])
            lines.append(f"  best against best: {name} (lr {best[name]:g}) - {base} (lr "
                         f"{best[base]:g}) = {fmt(d)}  n={d['n']}")
    return lines


def variants(cells):
    """Every variant trained in any of the cells, the baseline first."""
    return list(dict.fromkeys(n for c in cells.values() for n in [c["baseline"], *c["variants"]]))


def val(cell, name):
    """``describe`` of ``name``'s final val losses in ``cell`` (n = 0 when it did not train)."""
    return describe([e["val_loss"] for (n, _), e in cell["runs"].items() if n == name])


def figures(cells, lr, steps):
    """``{"gap_vs_length.png": write(path), "val_vs_lr.png": write(path)}``: the gaps at ``lr``
    and the val against the rate at ``steps``, for ``cli.write_outputs``."""
    from matplotlib.figure import Figure
    files = {}
    fig = Figure(figsize=(6.5, 4.2))
    ax = fig.subplots()
    rows = sorted((s, c) for (s, r), c in cells.items() if r == lr)
    names = variants(cells)
    colour = {n: f"C{k}" for k, n in enumerate(names)}   # one colour a variant in both figures
    for k, name in enumerate(names[1:]):
        # a length may train fewer variants than another, or its baseline may have diverged
        pts = [(s, d) for s, d in ((s, gap(c, name)) for s, c in rows) if d["n"]]
        xs = [s * (1 + 0.03 * (k - 1)) for s, _ in pts]   # side by side, not on each other
        ax.errorbar(xs, [d["mean"] for _, d in pts], fmt="o-", capsize=4, label=name,
                    color=colour[name],
                    yerr=[[d["mean"] - (d["low"] if d["low"] is not None else d["mean"])
                           for _, d in pts], [(d["high"] if d["high"] is not None else
                                               d["mean"]) - d["mean"] for _, d in pts]])
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xscale("log")
    ax.set_xticks([s for s, _ in rows], [str(s) for s, _ in rows])
    ax.minorticks_off()
    ax.set(xlabel="run length (steps)",
           ylabel=f"final val loss minus {rows[0][1]['baseline']}'s (nats/token)",
           title=f"gap to {rows[0][1]['baseline']} against run length (lr {lr:g}); bars: "
                 f"paired 95% interval")
    ax.title.set_fontsize(9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    files["gap_vs_length.png"] = lambda path, fig=fig: fig.savefig(path, format="png", dpi=110)

    fig = Figure(figsize=(6.5, 4.2))
    ax = fig.subplots()
    rows = sorted((r, c) for (s, r), c in cells.items() if s == steps)
    for name in names:
        pts = [(r, d) for r, d in ((r, val(c, name)) for r, c in rows) if d["n"]]
        half = [t_ppf(0.975, d["n"] - 1) * d["std"] / math.sqrt(d["n"]) if d["n"] > 1 else 0
                for _, d in pts]
        ax.errorbar([r for r, _ in pts], [d["mean"] for _, d in pts], yerr=half, fmt="o-",
                    capsize=4, label=name, color=colour[name])
    ax.set_xscale("log")
    ax.set_xticks([r for r, _ in rows], [f"{r:g}" for r, _ in rows])
    ax.minorticks_off()
    ax.set(xlabel="peak learning rate", ylabel="final val loss (nats/token)",
           title=f"val loss against learning rate, {steps} steps; bars: 95% interval of the "
                 f"mean over the seeds")
    ax.title.set_fontsize(9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    files["val_vs_lr.png"] = lambda path, fig=fig: fig.savefig(path, format="png", dpi=110)
    return files


def run(argv):
    p = cli.ArgumentParser(prog="faster_or_lower", description=__doc__.splitlines()[0])
    p.add_argument("folders", nargs="+", type=cli.path_arg, help="output folders of study runs")
    p.add_argument("--lr", type=float, default=1e-3, help="the rate of the run-length rows")
    p.add_argument("--steps", type=int, default=2000, help="the length of the rate rows")
    p.add_argument("--output-dir", type=cli.path_arg, default=Path("."), help="where the PNGs go")
    p.add_argument("--no-plots", action="store_true", help="print only")
    args = p.parse_args(argv)
    try:
        cells = read(args.folders)
    except (OSError, KeyError, ValueError, TypeError) as e:
        raise cli.UsageError(f"cannot read a study's results.json: {e}") from None
    if not any(r == args.lr for _, r in cells):
        raise cli.UsageError(f"no study at --lr {args.lr:g}: the studies are (steps, lr) "
                             f"{sorted(cells)}")
    if not any(s == args.steps for s, _ in cells):
        raise cli.UsageError(f"no study of --steps {args.steps}: the studies are (steps, lr) "
                             f"{sorted(cells)}")
    if not args.no_plots:
        if importlib.util.find_spec("matplotlib") is None:
            raise cli.UsageError("the figures need matplotlib (pip install -e \".[plot]\"); "
                                 "--no-plots prints the tables only")
        out = cli.output_dir(args.output_dir)
    print("\n".join(lengths_table(cells, args.lr) + [""] + lr_table(cells, args.steps)))
    if not args.no_plots:
        cli.write_outputs(out, figures(cells, args.lr, args.steps))
    return 0


if __name__ == "__main__":
    with cli.errors("faster_or_lower"):
        sys.exit(run(sys.argv[1:]))
