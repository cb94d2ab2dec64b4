"""The mean validation curve of every variant of one or more study runs, on one axis.

Reads the ``curves.csv`` each study writes (``variant, seed, step, train_loss, val_loss,
grad_norm``; val_loss is empty where no evaluation ran) and draws, for each variant, the mean
over its seeds of the val loss at each evaluation step, with the range of the seeds shaded.
A variant whose curves equal one already read (the baseline every study shares, under another
name in each) is drawn once, labelled with each name.
docs/results.md ("At scale") shows its picture of the three studies at ``--preset
shakespeare-cpu``:

    python tools/val_curves.py outputs/four_variants outputs/activations outputs/positions \
        --output docs/img/at_scale_val_curves.png

Needs matplotlib (the ``plot`` extra).
"""
import argparse
import csv
from collections import defaultdict
from pathlib import Path

import numpy as np


def read_val(folders):
    """``{label: {step: [val loss of each seed]}}`` from the folders' curves.csv, in order."""
    curves = []   # [label, by_step], in the order first read
    for folder in folders:
        with open(Path(folder) / "curves.csv", newline="", encoding="utf-8") as f:
            rows = [r for r in csv.DictReader(f) if r["val_loss"]]
        found = defaultdict(lambda: defaultdict(list))
        for r in rows:
            found[r["variant"]][int(r["step"])].append(float(r["val_loss"]))
        for name, by_step in found.items():   # a run two studies share is drawn once
            same = next((c for c in curves if c[1] == by_step), None)
            if same is None:
                curves.append([name, by_step])
            elif name not in same[0].split(" = "):
                same[0] += f" = {name}"
    return dict(curves)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folders", nargs="+", help="output folders of study runs")
    p.add_argument("--output", required=True, help="the PNG to write")
    p.add_argument("--from-step", type=int, default=250, help="first step drawn")
    args = p.parse_args()
    try:
        curves = read_val(args.folders)
    except (OSError, KeyError, ValueError) as e:
        p.error(f"cannot read a study's curves.csv: {e}")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for name, by_step in curves.items():
        steps = [s for s in sorted(by_step) if s >= args.from_step]
        vals = [np.array(by_step[s]) for s in steps]
        line, = ax.plot(steps, [v.mean() for v in vals], "o-", ms=3, lw=1.4,
                        label=f"{name} ({len(vals[-1])} seeds)")
        ax.fill_between(steps, [v.min() for v in vals], [v.max() for v in vals],
                        color=line.get_color(), alpha=0.15, lw=0)
    ax.set_xlabel("step")
    ax.set_ylabel("val loss (nats/token)")
    ax.set_title("mean val loss over the seeds (shaded: their range)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)


if __name__ == "__main__":
    main()
