"""Faster or lower: a study's variants against a baseline across learning rates and run lengths.

Reads the ``results.json`` of study runs (``experiments.runner``), each a run length
(``config.steps``) and a learning rate (``config.optimizer.lr``), and prints, then draws:

- per learning rate (the runs of ``--steps``): each variant's mean final val loss ± sd over
  its seeds, its best rate, and whether that best is bracketed (a worse rate tried on both
  sides); then best against best: each variant at its best rate minus the baseline at the
  baseline's best, final val and train loss, paired by seed, with a 95 % Student-t interval;
- per run length: each variant minus the baseline, paired by seed, each at its own best rate
  (of ``--steps``), or all at ``--lr``; and its steps-to-target: the first evaluation step at
  which the variant's val loss reaches the baseline's final val loss of the same seed (the
  median over the seeds; "-" when some seed never does).

``val_vs_lr.png``: each seed's final val loss against the learning rate (log scale), a line
through the means over the seeds every rate of that variant has (n in the legend), a run far
above the others drawn at the top edge with its value;
``gap_vs_length.png``: the gaps against the run length (log scale), paired intervals as bars,
the number of paired seeds under each length. docs/results.md ("Faster or lower") shows both, made as its section 6 says.

Folders may come from studies of different norms (``--norm rms``): a variant is then named
with its norm (``rms+swiglu``); runs of the same length and rate from several folders (more
seeds, another norm) are put together. The folders must otherwise be one sweep: the same
corpus, model and recipe, varying only the run length, the rate (its schedule), the norm, the
seeds and which variants trained. Runs without a final val loss (diverged) are left out, and a
comparison without a seed that trained both prints "-". A stopped sweep's folder (status
"incomplete") gives the runs that finished. Needs the project installed (``pip
install -e .``, README) and matplotlib (the ``plot`` extra) for the figures; ``--no-plots``
prints only. Bad input is one line on stderr, status 2. The folders come from sweeps of hours
(docs/results.md gives their commands); ``--output-dir docs/img`` replaces the committed
figures.
"""
import importlib.util
import json
import statistics
import sys
from pathlib import Path

from experiments import cli
from experiments.stats import describe, paired_difference

# what may differ between the folders; anything else (corpus, model, recipe) must be the same,
# or the gaps would compare different studies
VARIED = ("steps", "seed", "seeds", "variants", "baseline", "schedule")


def _config(res):
    """The parts of a study's config that must agree across the folders."""
    same = {k: v for k, v in res["config"].items() if k not in VARIED}
    same["experiment"] = res.get("experiment")   # activations, four_variants, ...
    same["optimizer"] = {k: v for k, v in same["optimizer"].items() if k != "lr"}
    same["model"] = {k: v for k, v in same.get("model", {}).items() if k != "norm"}
    return same


def read(folders):
    """``({(steps, lr): {(variant, seed): run}}, baseline)``: every folder's trained runs by run
    length and rate; a variant named with its norm when the folders hold more than one norm.
    Raises ``cli.UsageError`` for folders of different studies or a run given twice."""
    studies = []
    for folder in folders:
        try:
            res = json.loads((Path(folder) / "results.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise cli.UsageError(f"{folder}: cannot read its results.json: {e}") from None
        if not isinstance(res, dict) or "config" not in res:
            raise cli.UsageError(f"{folder}: its results.json is not a study's (no config)")
        studies.append((folder, res))
    first = studies[0]
    for folder, res in studies:   # one sweep, before any run is read
        same, ref = _config(res), _config(first[1])
        for k in sorted(set(same) | set(ref)):
            if same.get(k) != ref.get(k):
                raise cli.UsageError(f"{folder}: its {k} differs from {first[0]}'s; a sweep "
                                     f"varies only the run length, the rate, the norm and the "
                                     f"seeds")
    norms = {res["config"].get("model", {}).get("norm") for _, res in studies}
    label = (lambda res, n: f"{res['config']['model']['norm']}+{n}") if len(norms) > 1 else \
        (lambda res, n: n)
    cells = {}
    for folder, res in studies:
        cell = cells.setdefault((res["config"]["steps"], res["config"]["optimizer"]["lr"]), {})
        for e in res["runs"]:
            key = (label(res, e["name"]), e["seed"])
            if key in cell:
                raise cli.UsageError(f"{folder}: a second run of {key[0]} seed {key[1]} at "
                                     f"{res['config']['steps']} steps, lr "
                                     f"{res['config']['optimizer']['lr']:g}")
            if e["status"] == "ok":
                cell[key] = e
    return cells, label(first[1], first[1]["config"]["baseline"])


def variants(cells, base):
    """Every variant trained in any cell, the baseline first, then by name."""
    return [base] + sorted({n for c in cells.values() for n, _ in c} - {base})


def val(cell, name, what="val_loss"):
    """``describe`` of ``name``'s final losses in ``cell`` (n = 0 when it did not train)."""
    return describe([e[what] for (n, _), e in sorted(cell.items()) if n == name])


def gap(a, name, b, base, what="val_loss"):
    """Paired difference, ``name`` in cell ``a`` minus ``base`` in cell ``b``, over the seeds
    that trained both."""
    seeds = sorted(s for n, s in a if n == name and (base, s) in b)
    return paired_difference([a[name, s][what] for s in seeds], [b[base, s][what] for s in seeds])


def steps_to_target(a, name, b, base):
    """Median over seeds of the first evaluation step where ``name``'s val loss (cell ``a``) is
    at or below ``base``'s final val loss of the same seed (cell ``b``); None when some seed
    never gets there, or no seed trained both."""
    found = []
    for n, s in a:
        if n == name and (base, s) in b:
            hit = [step for step, v in a[n, s]["val_curve"] if float(v) <= b[base, s]["val_loss"]]
            found.append(hit[0] if hit else None)
    return None if not found or None in found else statistics.median(found)


def best_rates(cells, steps, base):
    """``{variant: (best lr, bracketed)}`` at ``steps``: the rate of the lowest mean final val,
    and whether a worse rate was tried on each side of it."""
    rates = sorted(r for s, r in cells if s == steps)
    best = {}
    for name in variants(cells, base):
        means = {r: m["mean"] for r in rates if (m := val(cells[steps, r], name))["n"]}
        if means:
            r = min(means, key=means.get)
            best[name] = (r, any(x < r for x in means) and any(x > r for x in means))
    return best


def _sd(m):
    return "-" if m["std"] is None else f"{m['std']:.4f}"


def fmt(d):
    return (f"{d['mean']:+.4f} [{d['low']:+.4f}, {d['high']:+.4f}]" if d["low"] is not None
            else f"{d['mean']:+.4f}" if d["mean"] is not None else "-")


def lr_table(cells, steps, base):
    """Lines: per variant the mean val at each rate and its best; best against best."""
    rates = sorted(r for s, r in cells if s == steps)
    best = best_rates(cells, steps, base)
    lines = [f"Learning rate, {steps} steps: mean final val loss ± sd (seeds)"]
    for name, (r_best, bracketed) in best.items():
        cols = [f"lr {r:g}: {m['mean']:.4f} ± {_sd(m)} ({m['n']})"
                for r in rates if (m := val(cells[steps, r], name))["n"]]
        lines.append(f"  {name:<11} " + "  ".join(cols) + f"  best lr {r_best:g}"
                     + ("" if bracketed else " (not bracketed)"))
    if base in best:
        b = cells[steps, best[base][0]]
        for name, (r, _) in best.items():
            if name != base:
                a = cells[steps, r]
                d, t = gap(a, name, b, base), gap(a, name, b, base, "train_loss")
                lines.append(f"  best against best: {name} (lr {r:g}) - {base} (lr "
                             f"{best[base][0]:g}) = {fmt(d)} val, {fmt(t)} train  n={d['n']}")
    return lines


def length_cells(cells, lr, steps, base):
    """``{variant: [(length, its cell, the baseline's cell)]}``: at ``lr``, or (``lr`` None)
    each at its own best rate of ``steps`` and the baseline at its."""
    best = best_rates(cells, steps, base)
    out = {}
    for name in variants(cells, base)[1:]:
        r, rb = (lr, lr) if lr is not None else (best.get(name, (None,))[0],
                                                  best.get(base, (None,))[0])
        out[name] = [(s, cells[s, r], cells[s, rb]) for s in sorted({s for s, _ in cells})
                     if (s, r) in cells and (s, rb) in cells and val(cells[s, r], name)["n"]]
    return out


def lengths_table(cells, lr, steps, base):
    """Lines: per run length, each variant's gap to the baseline and its steps-to-target."""
    where = f"lr {lr:g}" if lr is not None else f"each at its best rate of {steps} steps"
    lines = [f"Run length, {where}: final val loss minus {base}'s (nats, paired 95% "
             f"interval), steps to reach {base}'s final val"]
    for name, rows in length_cells(cells, lr, steps, base).items():
        for s, a, b in rows:
            d, t = gap(a, name, b, base), steps_to_target(a, name, b, base)
            lines.append(f"  {s:>6d} steps  {name:<11} {fmt(d)}  n={d['n']}  "
                         f"steps-to-target {'-' if t is None else f'{t:g}'}")
    lines.append(f"  steps-to-target: the median over the seeds of the first evaluation step at "
                 f"which the variant's val loss is at or below {base}'s final val of the same "
                 f"seed; -: some seed never gets there")
    return lines


def figures(cells, lr, steps, base):
    """``{"gap_vs_length.png": write(path), "val_vs_lr.png": write(path)}``, for
    ``cli.write_outputs``."""
    from matplotlib.figure import Figure
    names = variants(cells, base)
    colour = {n: f"C{k}" for k, n in enumerate(names)}   # one colour a variant in both figures
    files = {}

    fig = Figure(figsize=(6.5, 4.2))
    ax = fig.subplots()
    lengths = sorted({s for s, _ in cells})
    rows_of = length_cells(cells, lr, steps, base)
    for k, (name, rows) in enumerate(rows_of.items()):
        pts = [(s, d) for s, d in ((s, gap(a, name, b, base)) for s, a, b in rows) if d["n"]]
        xs = [s * (1 + 0.03 * (k - (len(rows_of) - 1) / 2)) for s, _ in pts]   # side by side
        ax.errorbar(xs, [d["mean"] for _, d in pts], fmt="o-", capsize=4, label=name,
                    color=colour[name],
                    yerr=[[d["mean"] - (d["low"] if d["low"] is not None else d["mean"])
                           for _, d in pts], [(d["high"] if d["high"] is not None else
                                               d["mean"]) - d["mean"] for _, d in pts]])
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xscale("log")
    ax.margins(x=0.12)
    ns = {s: sorted({gap(a, name, b, base)["n"] for name, rows in rows_of.items()
                     for t, a, b in rows if t == s}) for s in lengths}
    ax.set_xticks(lengths, [f"{s}\n(n = {'-'.join(map(str, sorted({n[0], n[-1]})))} seeds)"
                            if n else str(s) for s, n in ns.items()])   # paired seeds a point
    ax.minorticks_off()
    where = f"lr {lr:g}" if lr is not None else "each at its best rate"
    ax.set(xlabel="run length (steps)", ylabel=f"final val loss minus {base}'s (nats/token)",
           title=f"gap to {base} against run length ({where}); bars: paired 95% interval")
    ax.title.set_fontsize(9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    files["gap_vs_length.png"] = lambda path, fig=fig: fig.savefig(path, format="png", dpi=110)

    fig = Figure(figsize=(6.5, 4.2))
    ax = fig.subplots()
    rates = sorted(r for s, r in cells if s == steps)
    seeds = {(name, r): [e["val_loss"] for (n, _), e in sorted(cells[steps, r].items()) if n == name]
             for name in names for r in rates}
    # the axis spans the seeds within 0.1 of their cell's median: a run that went unstable
    # (ln+swiglu at 8e-3) would flatten the rest; it is drawn at the top edge with its value
    kept = [v for vs in seeds.values() for v in vs if v <= statistics.median(vs) + 0.1]
    pad = 0.08 * (max(kept) - min(kept) or 0.1)
    top = max(kept) + pad
    ax.set_ylim(min(kept) - pad, top)
    for k, name in enumerate(names):
        pts = [r for r in rates if seeds[name, r]]
        if not pts:
            continue
        # the line: the mean over the seeds every rate of the variant has, so that a rate run
        # on more seeds does not move it; the dots: every seed
        common = set.intersection(*({s for (n, s) in cells[steps, r] if n == name} for r in pts))
        means = [statistics.mean(e["val_loss"] for (n, s), e in cells[steps, r].items()
                                 if n == name and s in common) for r in pts]
        ax.plot(pts, means, "-", color=colour[name], label=f"{name} (line: {len(common)} seeds)")
        for r in pts:
            x = r * (1 + 0.04 * (k - (len(names) - 1) / 2))   # side by side, not on each other
            for v in seeds[name, r]:
                ax.plot(x, min(v, top), "^" if v > top else "o", color=colour[name],
                        ms=4, alpha=0.7, clip_on=False)
                if v > top:
                    ax.annotate(f"{v:.2f}", (x, top), xytext=(3, -10), textcoords="offset points",
                                fontsize=7, color=colour[name])
    ax.set_xscale("log")
    ax.set_xticks(rates, [f"{r:g}" for r in rates])
    ax.minorticks_off()
    ax.set(xlabel="peak learning rate", ylabel="final val loss (nats/token)",
           title=f"final val loss against the rate, {steps} steps\ndots: seeds; line: mean over "
                 f"the seeds every rate of the variant has")
    ax.title.set_fontsize(9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    files["val_vs_lr.png"] = lambda path, fig=fig: fig.savefig(path, format="png", dpi=110)
    return files


def run(argv):
    """The command: read the folders, print the tables, write the figures."""
    p = cli.ArgumentParser(prog="faster_or_lower", description=__doc__.splitlines()[0])
    p.add_argument("folders", nargs="+", type=cli.path_arg, help="output folders of study runs")
    p.add_argument("--steps", type=int, default=2000, help="the run length of the rate rows "
                                                          "and of the best rates")
    p.add_argument("--lr", type=float, help="the rate of the run-length rows; default: each "
                                            "variant at its own best rate")
    p.add_argument("--baseline", help="the variant the others are compared with; default: the "
                                      "first folder's baseline")
    p.add_argument("--output-dir", type=cli.path_arg, default=Path("outputs/faster_or_lower"),
                   help="where the PNGs go")
    p.add_argument("--no-plots", action="store_true", help="print only")
    args = p.parse_args(argv)
    try:
        cells, base = read(args.folders)
    except (OSError, KeyError, ValueError, TypeError, AttributeError) as e:
        raise cli.UsageError(f"cannot read a study's results.json: {e}") from None
    base = args.baseline or base
    trained = sorted({n for c in cells.values() for n, _ in c})
    if base not in trained:
        raise cli.UsageError(f"no variant {base!r} in the studies: {', '.join(trained)}")
    if args.lr is not None and not any(r == args.lr for _, r in cells):
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
    print("\n".join(lr_table(cells, args.steps, base) + [""]
                    + lengths_table(cells, args.lr, args.steps, base)))
    if not args.no_plots:
        cli.write_outputs(out, figures(cells, args.lr, args.steps, base))
    return 0


if __name__ == "__main__":
    with cli.errors("faster_or_lower"):
        sys.exit(run(sys.argv[1:]))
