"""Faster or lower: a study's variants against its baseline across run lengths and learning rates.

Reads the ``results.json`` of study runs (``experiments.runner``), each run a length
(``config.steps``) and a learning rate (``config.optimizer.lr``), and prints, then draws:

- per run length (the runs at one learning rate): each variant's final val loss minus the
  baseline's, paired by seed, with a 95 % Student-t interval, and its steps-to-target: the
  first evaluation step at which the variant's val loss reaches the baseline's final val loss
  of the same seed (the median over the seeds; "-" when it never does);
- per learning rate (the runs at one length): each variant's mean final val loss, its best
  rate, and the gap of the variants' bests, paired by seed.

``gap_vs_length.png``: the gaps against the run length (log scale), intervals as bars;
``val_vs_lr.png``: the mean val loss against the learning rate (log scale), 95 % intervals of
the mean over the seeds as bars. docs/results.md ("Faster or lower") shows both:

    python tools/faster_or_lower.py outputs/len2000 outputs/len4000 outputs/len8000 \
        outputs/lr5e-4 outputs/lr2e-3 outputs/lr4e-3 --output-dir docs/img

Needs matplotlib (the ``plot`` extra) for the figures; ``--no-plots`` prints only.
"""
import json
import math
import statistics
from pathlib import Path

from experiments import cli
from experiments.stats import describe, paired_difference, t_ppf


def read(folders):
    """``{(steps, lr): {"baseline": name, "variants": [names], "runs": {(name, seed): run}}}``."""
    cells = {}
    for folder in folders:
        res = json.loads((Path(folder) / "results.json").read_text(encoding="utf-8"))
        key = (res["config"]["steps"], res["config"]["optimizer"]["lr"])
        cell = cells.setdefault(key, {"baseline": res["config"]["baseline"], "variants": [],
                                      "runs": {}})
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
    the baseline's final val loss of the same seed (None when some seed never gets there)."""
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
    names = rows[0][1]["variants"]
    lines, best = [f"Learning rate, {steps} steps: mean final val loss ± sd over the seeds"], {}
    for name in names:
        means = {r: describe([e["val_loss"] for (n, _), e in c["runs"].items() if n == name])
                 for r, c in rows}
        best[name] = min(means, key=lambda r: means[r]["mean"])
        lines.append(f"  {name:10s} " + "  ".join(
            f"lr {r:g}: {m['mean']:.4f} ± {m['std'] or 0:.4f}" for r, m in means.items())
            + f"  best lr {best[name]:g}")
    base = rows[0][1]["baseline"]
    for name in names:
        if name != base:   # each at its best rate, paired by seed
            a, b = cells[steps, best[name]], cells[steps, best[base]]
            seeds = sorted(s for n, s in a["runs"] if n == name and (base, s) in b["runs"])
            d = paired_difference([a["runs"][name, s]["val_loss"] for s in seeds],
                                  [b["runs"][base, s]["val_loss"] for s in seeds])
            lines.append(f"  best against best: {name} (lr {best[name]:g}) - {base} (lr "
                         f"{best[base]:g}) = {fmt(d)}  n={d['n']}")
    return lines


def figures(cells, lr, steps):
    """``{"gap_vs_length.png": write(path), "val_vs_lr.png": write(path)}``: the gaps at ``lr``
    and the val against the rate at ``steps``, for ``cli.write_outputs``."""
    from matplotlib.figure import Figure
    files = {}
    fig = Figure(figsize=(6.5, 4.2))
    ax = fig.subplots()
    rows = sorted((s, c) for (s, r), c in cells.items() if r == lr)
    names = dict.fromkeys(n for _, c in rows for n in c["variants"] if n != c["baseline"])
    for k, name in enumerate(names):   # a length may train fewer variants than another
        pts = [(s, gap(c, name)) for s, c in rows if name in c["variants"]]
        xs = [s * (1 + 0.03 * (k - 1)) for s, _ in pts]   # side by side, not on each other
        ax.errorbar(xs, [d["mean"] for _, d in pts], fmt="o-", capsize=4, label=name,
                    yerr=[[d["mean"] - (d["low"] if d["low"] is not None else d["mean"])
                           for _, d in pts], [(d["high"] if d["high"] is not None else
                                               d["mean"]) - d["mean"] for _, d in pts]])
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xscale("log")
    ax.set_xticks([s for s, _ in rows], [str(s) for s, _ in rows])
    ax.set(xlabel="run length (steps; each run its own warmup and cosine)",
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
    for name in rows[0][1]["variants"]:
        ds = [describe([e["val_loss"] for (n, _), e in c["runs"].items() if n == name])
              for _, c in rows]
        half = [t_ppf(0.975, d["n"] - 1) * d["std"] / math.sqrt(d["n"]) if d["n"] > 1 else 0
                for d in ds]
        ax.errorbar([r for r, _ in rows], [d["mean"] for d in ds], yerr=half, fmt="o-",
                    capsize=4, label=name)
    ax.set_xscale("log")
    ax.set_xticks([r for r, _ in rows], [f"{r:g}" for r, _ in rows])
    ax.set(xlabel="peak learning rate (min_lr = lr / 10)", ylabel="final val loss (nats/token)",
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
    except (OSError, KeyError, ValueError) as e:
        raise cli.UsageError(f"cannot read a study's results.json: {e}") from None
    if not any(r == args.lr for _, r in cells) or not any(s == args.steps for s, _ in cells):
        raise cli.UsageError(f"no run at lr {args.lr:g} or at {args.steps} steps among {sorted(cells)}")
    print("\n".join(lengths_table(cells, args.lr) + [""] + lr_table(cells, args.steps)))
    if not args.no_plots:
        cli.write_outputs(cli.output_dir(args.output_dir), figures(cells, args.lr, args.steps))
    return 0


if __name__ == "__main__":
    cli.main("faster_or_lower", run)
