"""Hidden-state statistics of the residual stream, LayerNorm vs RMSNorm (the chapter's step 4).

At step 0 and every ``--eval-every`` steps, the chapter's ``tensor_stats`` (``gpt.capture``) of
the residual stream entering every block's attention and MLP, on a fixed probe batch (the first
``--batch-size`` validation windows). Writes what every study writes, ``hidden_stats.csv`` and
``hidden_stats.png``:  python -m experiments.hidden_stats --steps 500 --seeds 3 --jobs 2
"""
from experiments import cli

with cli.errors("python -m experiments.hidden_stats"):   # Ctrl-C while NumPy loads: one line
    import numpy as np

    from gpt.capture import STAT_NAMES, ResidualStats
    from gpt.data import eval_windows

    from experiments import figures, runner


def probe(run):
    """The probe batch of a run: the first ``batch_size`` validation windows, (B, T)."""
    windows = eval_windows(run.data.val, run.config.block_size, run.args.eval_tokens)[0]
    return ResidualStats(windows[:run.args.batch_size])


def rows(report):
    """(variant, seed, row) for every recorded row of every run."""
    return [(e["name"], e["seed"], r) for e in report.runs for r in (e["extra"] or {})["rows"]]


def mean_stats(report):
    """(variant, site, step) -> each statistic's mean over the seeds, in recording order."""
    acc = {}
    for name, _, r in rows(report):
        acc.setdefault((name, r["site"], r["step"]), []).append(r)
    return {k: {s: float(np.mean([float(r[s]) for r in rs])) for s in STAT_NAMES}
            for k, rs in acc.items()}


def closing(report):
    """The loss differences and parameters, then the statistics at the first and last step."""
    by = mean_stats(report)
    steps = sorted({k[2] for k in by}) or [0]
    sites = list(dict.fromkeys(k[1] for k in by))
    seeds = f"; mean over {len(report.seeds)} seeds" if len(report.seeds) > 1 else ""
    lines = report.comparison() + ["", "Residual stream entering each block's attention "
             "(pre_attn) and MLP (pre_mlp), on a fixed probe batch", "(the chapter's step 4: "
             f"population variance, 1e-12 guards; kurtosis 3 for a Gaussian){seeds}:",
             f"{'variant':8s}  {'site':18s}  {'step':>5s}  " + "  ".join(f"{s:>9s}" for s in
                                                                         STAT_NAMES)]
    for v in report.study.variants:
        lines += [f"{v.name:8s}  {site:18s}  {t:>5d}  " + "  ".join(
            f"{by[v.name, site, t][s]:>9.4g}" for s in STAT_NAMES)
            for site in sites for t in (steps[0], steps[-1]) if (v.name, site, t) in by]
    for v in report.study.variants:
        at = {k[1]: x for k, x in by.items() if k[0] == v.name and k[2] == steps[-1]}
        var0 = [x["var"] for k, x in by.items() if k[0] == v.name and k[2] == steps[0]]
        if at:
            site, var = max(at, key=lambda k: at[k]["kurtosis"]), [x["var"] for x in at.values()]
            lines.append(f"- {v.note.split()[0]}: at step {steps[-1]} the largest kurtosis is "
                         f"{at[site]['kurtosis']:.3g} ({site}); the residual variance ranges "
                         f"{min(var):.3g}-{max(var):.3g} across sites (step {steps[0]}: "
                         f"{min(var0):.3g}-{max(var0):.3g}).")
    return lines


def files(report):
    """hidden_stats.csv, and hidden_stats.png with matplotlib (unless --no-plots)."""
    out = {"hidden_stats.csv": "".join(",".join(map(str, row)) + "\n" for row in [
        ("variant", "seed", "step", "site", *STAT_NAMES)] + [(n, seed, r["step"], r["site"], *(
            repr(float(r[s])) for s in STAT_NAMES)) for n, seed, r in rows(report)])}
    if figures.available() and not report.args.no_plots:
        out["hidden_stats.png"] = lambda path: figures.save(
            figures.hidden_stats(report, mean_stats(report)), path,
            figures.backward_note(report), rect=(0, 0.12, 1, 0.95))
    return out


STUDY = runner.Study(
    name="hidden_stats",
    description="The chapter's hidden-state statistics of the residual stream, with LayerNorm "
                "and with RMSNorm, every --eval-every steps.",
    variants=(runner.Variant("ln", {"norm": "ln"}, note="LayerNorm (eps 1e-5) in every norm"),
              runner.Variant("rms", {"norm": "rms"}, note="RMSNorm (eps 1e-6) in every norm")),
    columns=(("variant", 8),), closing=closing, probe=probe, files=files)

if __name__ == "__main__":
    runner.main(STUDY)
