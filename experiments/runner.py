"""The runner of every study: seeds x variants, trained here or on workers, then the report.

A study (``four_variants``, ``break_it``, ``activations``, ``positions``, ``hidden_stats``)
names its variants and calls ``main(study)``. ``run(study, argv)`` reads top to bottom as
nanoGPT's ``train.py``: the options, the data, one ``GPTConfig`` a variant, the runs
(``train_one``: the chapter's loop, ``gpt.train.train``), the report and the files. The
variants train from the same seeds (initialisation and batches): they pair seed by seed.

With ``--jobs 1`` (the default) the runs train in this process, one after another: a ``print``
or a ``breakpoint()`` in any backward works as in any Python program. ``--jobs N`` trains N at
a time in worker processes, ``--scheduler ADDRESS`` on a Dask cluster (``cli.in_workers``); the
numbers are the same.

Writes into ``--output-dir``: ``run_log.txt``, ``curves.csv``, the figures (with matplotlib),
``<variant>.npz`` with ``--save-checkpoints``, the study's own files, and last ``results.json``,
which names them. Each file is complete or absent; nothing else in the folder is touched. While
runs remain, ``results.json`` holds those that finished, status "incomplete": a sweep stopped
or interrupted keeps them, and the same command continues it (``finished_runs``).
Exit status: 0; 1 a run diverged (it stops there, the others go on, everything is written);
2 bad input; 130 Ctrl-C.
"""
import datetime
import json
import math
import secrets
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

import gpt.train
from gpt import GPT
from gpt.checkpoint import save_checkpoint

from experiments import cli, figures, options, report

TINY_STEPS, FULL_STEPS, MAX_STEPS, MAX_SEEDS = 200, 2000, 1_000_000, 1000
EVAL_TOKENS = 16384  # cap on the positions a final loss covers (the built-in corpus: all)


@dataclass(frozen=True)
class Variant:
    """One arm of a study: ``config``, ``GPTConfig`` fields over the options; ``modify(model)``,
    a module-level function (picklable, for ``--jobs``), changes the initialised model;
    ``labels``, the table's label columns; ``note``, a line of run_log.txt."""
    name: str
    config: Dict[str, Any] = field(default_factory=dict)
    modify: Optional[Callable] = None
    labels: Dict[str, str] = field(default_factory=dict)
    note: str = ""


@dataclass(frozen=True)
class Study:
    """A study: its variants (the first is the baseline), its table's label ``columns`` (key,
    width), ``closing(report) -> lines`` (the block after the table; default: the paired
    differences and parameters), ``probe(run) -> collector`` (called in a run as
    ``collector(step, model)`` at step 0 and every evaluation; its ``result()`` is the run's
    ``extra``) and ``files(report) -> {name: content}`` (more outputs)."""
    name: str
    description: str
    variants: Tuple[Variant, ...]
    columns: Tuple[Tuple[str, int], ...] = (("variant", 14),)
    closing: Optional[Callable] = None
    probe: Optional[Callable] = None
    files: Optional[Callable] = None
    quiet_with_one_seed: bool = False   # one seed: print the table alone (the chapter's)
    prog = property(lambda self: f"python -m experiments.{self.name}")   # the command


def parse_args(study, argv):
    """The study's options (the model's are those of ``options.add_model_options``)."""
    p = cli.ArgumentParser(prog=study.prog, description=study.description)
    length = p.add_mutually_exclusive_group()
    length.add_argument("--tiny", dest="steps", action="store_const", const=TINY_STEPS,
                        help=f"{TINY_STEPS} steps per run")
    length.add_argument("--full", dest="steps", action="store_const", const=FULL_STEPS,
                        help=f"{FULL_STEPS} steps per run")
    p.add_argument("--steps", dest="given_steps", type=cli.bounded_int(1, MAX_STEPS, "steps"),
                   metavar="N", help="steps per run, over --tiny and --full (default: --tiny's)")
    p.add_argument("--seeds", type=cli.bounded_int(1, MAX_SEEDS, "seeds"), default=1,
                   metavar="N", help="seeds S .. S+N-1, the same for every variant")
    p.add_argument("--variants", type=lambda s: s.split(","), metavar="A,B",
                   help="train only these variants (the first named is the baseline); "
                        "default: " + ",".join(v.name for v in study.variants))
    p.add_argument("--output-dir", type=cli.path_arg, default=f"outputs/{study.name}",
                   metavar="DIR", help="where the files go")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--jobs", type=cli.up_to_cpus, default=1, metavar="N",
                       help="runs trained at a time; 1: in this process, more: in worker "
                            "processes (the numbers do not depend on it)")
    where.add_argument("--scheduler", type=cli.nonempty, metavar="ADDRESS",
                       help="train on the Dask cluster whose scheduler is at ADDRESS, e.g. "
                            "tcp://10.0.0.5:8786 (the cluster extra)")
    p.add_argument("--threads", type=cli.up_to_cpus, default=1, metavar="N",
                   help="BLAS threads of each run")
    p.add_argument("--eval-every", type=cli.positive_int, default=10, metavar="K",
                   help="validation loss every K steps (curves.csv)")
    p.add_argument("--eval-tokens", type=cli.positive_int, default=EVAL_TOKENS, metavar="N",
                   help="each final loss over at most N positions of its split")
    p.add_argument("--progress-interval", type=cli.positive_float, default=10.0, metavar="S",
                   help="seconds between a run's progress lines on stderr")
    p.add_argument("--no-plots", action="store_true", help="do not draw the PNG figures")
    p.add_argument("--save-checkpoints", action="store_true",
                   help="write each trained model as <variant>[_seed<S>].npz")
    p.add_argument("--backward", type=cli.path_arg, metavar="DIR", help="train with your own "
                   "backward passes, the files of python -m experiments.exercises in DIR")
    options.add_model_options(p, varied={k for v in study.variants for k in v.config})
    p.set_defaults(steps=TINY_STEPS)
    args = options.parse(p, argv)
    args.steps = args.given_steps or args.steps
    if args.variants:
        names = [v.name for v in study.variants]
        unknown = [n for n in args.variants if n not in names]
        if unknown or len(set(args.variants)) != len(args.variants):
            raise cli.UsageError(f"--variants {','.join(args.variants)}: each once, among "
                                 f"{', '.join(names)}")
    return args


@dataclass
class Run:
    """One (variant, seed) run: everything it needs (picklable, for a worker process)."""
    variant: Variant
    config: Any
    seed: int
    steps: int
    args: Any
    data: Any
    label: str
    probe: Optional[Callable] = None


def train_one(run):
    """Train one variant from one seed; its entry: params, status ("ok" or "diverged", with the
    step), final and per-step losses, gradient norms, the val curve, seconds, the probe's
    result, the learner's backward passes it called and, with checkpoints, the weights."""
    args, data = run.args, run.data
    called, backward = set(), None
    if args.backward:   # the learner's files, imported in the process that trains
        from experiments.exercises.learner import backward_passes
        backward = backward_passes(args.backward, called)
    model = GPT(run.config, seed=run.seed, init=args.init, backward=backward)
    if run.variant.modify:
        run.variant.modify(model)
    rng = np.random.default_rng(run.seed)  # the batches: same seed, same stream for every variant
    collector = run.probe(run) if run.probe else None
    if collector:
        collector(0, model)
    val_curve, t0, last = [], time.perf_counter(), [time.perf_counter()]

    def evaluate(split):
        return gpt.train.evaluate(model, split, batch_size=args.batch_size,
                                  max_tokens=args.eval_tokens)

    def on_step(step, loss):
        now = time.perf_counter()
        if now - last[0] >= args.progress_interval or step == run.steps:
            last[0], rate = now, step / (now - t0)
            eta = f"  ETA {(run.steps - step) / rate:.0f} s" if step < run.steps else ""
            cli.progress(f"  {run.label} step {step:>{len(str(run.steps))}}/{run.steps}  loss "
                         f"{loss:.4f}  {rate:6.1f} steps/s  {now - t0:6.1f} s{eta}")
        if step % args.eval_every == 0 or step == run.steps:
            val_curve.append([step, evaluate(data.val)])
            if collector:
                collector(step, model)

    entry = {"name": run.variant.name, "seed": run.seed, **run.variant.labels,
             "params": model.num_parameters(), "status": "ok", "message": None,
             "diverged_at": None, "checkpoint": None}
    make_optimizer, lr_at = options.optimiser(args, run.steps)
    try:
        result = gpt.train.train(model, data.train, steps=run.steps, batch_size=args.batch_size,
                                 clip=args.grad_clip or None, rng=rng, on_step=on_step,
                                 optimizer=make_optimizer(model), lr_at=lr_at)
        losses, norms, seconds = result.losses, result.grad_norms, result.seconds
        with np.errstate(all="ignore"):
            final = {"train_loss": evaluate(data.train), "val_loss": evaluate(data.val),
                     # the chapter's estimate: one batch of each split, continuing the stream
                     "train_loss_one_batch": gpt.train.estimate_loss(
                         model, data.train, rng, batch_size=args.batch_size),
                     "val_loss_one_batch": gpt.train.estimate_loss(
                         model, data.val, rng, batch_size=args.batch_size)}
        bad = [x for x in final.values() if not math.isfinite(x)]
        if bad:  # every step was finite, but the last update broke the model
            entry["diverged_at"] = {"step": run.steps, "value": str(bad[0]),
                                    "what": "final loss (evaluated after the last update)"}
        elif args.save_checkpoints:
            entry["_state"] = model.state_dict()
    except gpt.train.TrainingDiverged as e:
        cli.progress(f"  {run.label} stopped: {e}")
        losses, norms, seconds, final = e.losses, e.grad_norms, e.seconds, {}
        entry["diverged_at"] = {"step": e.step, "what": e.what, "value": str(e.value)}
    if entry["diverged_at"]:
        d = entry["diverged_at"]
        entry.update(status="diverged", message=f"{d['what']} became {d['value']} at step "
                                                f"{d['step']}")
        final = {}
    entry.update({k: final.get(k) for k in ("train_loss", "val_loss", "train_loss_one_batch",
                                            "val_loss_one_batch")})
    entry.update(steps_completed=len(losses), loss_curve=[float(x) for x in losses],
                 grad_norms=[float(x) for x in norms],
                 val_curve=[[s, v if math.isfinite(v) else str(v)] for s, v in val_curve],
                 seconds=round(seconds, 3), extra=collector.result() if collector else None,
                 backward_called=sorted(called))
    return entry


def finished_runs(out, rep):
    """The runs a stopped sweep left in ``out/results.json`` (status "incomplete") and its run
    id, when this command is the same sweep (the same study and config): ``({(variant, seed):
    entry}, run_id)``; else ``({}, rep.run_id)``. Raises ``cli.UsageError`` when the folder
    holds a stopped sweep of other options, so that its hours are not written over."""
    if (out / "results.json").is_dir():
        raise cli.UsageError(f"{out / 'results.json'} is a folder: the run could not write its "
                             f"results there; choose another --output-dir")
    try:
        old = json.loads((out / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}, rep.run_id
    if not isinstance(old, dict) or old.get("status") != "incomplete":
        return {}, rep.run_id
    config = json.loads(json.dumps(rep.config()))
    differ = sorted(k for k in set(config) | set(old.get("config", {}))
                    if config.get(k) != old["config"].get(k))
    if old.get("experiment") != rep.study.name:
        raise cli.UsageError(f"{out} holds a stopped sweep of python -m experiments."
                             f"{old.get('experiment')}: continue it with its own command, or "
                             f"choose another --output-dir")
    if differ:
        raise cli.UsageError(f"{out} holds a stopped sweep of other options (its "
                             f"{', '.join(differ)} differ): continue it with its own command, "
                             f"or choose another --output-dir")
    return {(e["name"], e["seed"]): e for e in old["runs"]}, old["run_id"]


def run(study, argv):
    """A study command from top to bottom: options, data, runs, report, files; its status."""
    args = parse_args(study, argv)
    if args.variants:
        by_name = {v.name: v for v in study.variants}
        study = Study(**{**vars(study), "variants": tuple(by_name[n] for n in args.variants)})
    data = options.load_data(args)
    configs = {v.name: options.model_config(args, data, **v.config) for v in study.variants}
    options.optimiser(args, args.steps)  # its checks, before any run starts
    seeds = list(range(args.seed, args.seed + args.seeds))
    if args.backward and args.scheduler:
        raise cli.UsageError("--backward trains on this machine only: leave out --scheduler")
    if args.backward:   # the exercises' modules are imported for --backward only
        from experiments.exercises.learner import check_folder
        args.backward = check_folder(args.backward)
    runs = [Run(v, configs[v.name], s, args.steps, args, data,
                f"{v.name}{f' s{s}' if len(seeds) > 1 else ''}".ljust(12), study.probe)
            for v in study.variants for s in seeds]
    client = cli.connect(args.scheduler) if args.scheduler else None
    out = cli.output_dir(args.output_dir)   # after every check, before any training
    now = datetime.datetime.now(datetime.timezone.utc)
    run_id = f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(4)}"
    done, run_id = finished_runs(out, report.Report(study, args, data, seeds, [], run_id))
    todo = [r for r in runs if (r.variant.name, r.seed) not in done]
    jobs = min(args.jobs, len(todo)) or 1
    where = f"on the Dask cluster at {args.scheduler}" if args.scheduler else (
        "in this process" if jobs == 1 else f"{jobs} at a time")
    cli.progress(f"{study.name}: {len(runs)} run{'s' * (len(runs) > 1)} x {args.steps} steps, corpus {data.label} "
                 f"({len(data.text)} characters, vocab {data.tokenizer.vocab_size}), train/val "
                 f"{len(data.train)}/{len(data.val)} tokens, {where}, init {args.init}, "
                 f"run {run_id}" + (f"; continuing: {len(done)} finished runs kept from "
                                    f"{out / 'results.json'}" if done else ""))
    cli.blas_threads(args.threads)
    order = [(r.variant.name, r.seed) for r in runs]
    for e in (cli.in_workers(train_one, todo, jobs, args.threads, client) if client or jobs > 1
              else map(train_one, todo)):   # one job trains here: a breakpoint() stops here
        if "_state" in e:   # each checkpoint as its run finishes, so a stopped sweep keeps it
            model = GPT(configs[e["name"]], seed=e["seed"])
            model.load_state_dict(e.pop("_state"))
            stem = "".join(c if c.isalnum() or c in "-." else "_" for c in e["name"])
            e["checkpoint"] = stem + ("" if len(seeds) == 1 else f"_seed{e['seed']}") + ".npz"
            cli.write_outputs(out, {e["checkpoint"]: lambda path, m=model: save_checkpoint(
                m, path, tokenizer=data.tokenizer, run_id=run_id)})
        done[e["name"], e["seed"]] = e
        if len(done) < len(runs):   # the runs so far, marked incomplete: the command continues
            part = report.Report(study, args, data, seeds, [done[k] for k in order if k in done],
                                 run_id)
            part.files = ["results.json"] + [x["checkpoint"] for x in part.runs if x["checkpoint"]]
            cli.write_outputs(out, {"results.json": part.results_json(incomplete=True)})
        v = next(v for v in study.variants if v.name == e["name"])
        result = (f"diverged: {e['message']}" if e["status"] != "ok" else
                  f"train={report.fmt(e['train_loss'])}  val={report.fmt(e['val_loss'])}")
        cli.progress(f"  {report.labels(study, v)}  params={e['params']:>6d}  {result}"
                     + (f"  seed {e['seed']}" if len(seeds) > 1 else ""))
    entries = [done[k] for k in order]
    rep = report.Report(study, args, data, seeds, entries, run_id)

    files = {}
    plot_note = None if args.no_plots else figures.add(rep, files)
    files["curves.csv"] = rep.curves_csv()
    files.update(study.files(rep) if study.files else {})
    rep.files = sorted([*files, *(e["checkpoint"] for e in entries if e["checkpoint"]),
                        "run_log.txt", "results.json"])
    rep.earlier = cli.not_written(out, rep.files)   # --no-plots: an earlier run's figures
    files["run_log.txt"] = rep.run_log()
    files["results.json"] = rep.results_json()
    cli.write_outputs(out, files)

    for line in rep.stdout_lines():
        print(line)
    print(f"\nOutputs written to {out}")
    if rep.earlier:
        print(rep.earlier_line())
    if plot_note:
        cli.progress(f"{study.name}: {plot_note}")
    diverged = [f"{e['name']} seed {e['seed']}" for e in entries if e["status"] != "ok"]
    if diverged:
        cli.progress(f"{study.prog}: {len(diverged)} run(s) diverged: {', '.join(diverged)}")
    return 1 if diverged else 0


def main(study):
    """``python -m experiments.<study>``: ``run`` on the command line, under ``cli.errors``."""
    with cli.errors(study.prog):
        sys.exit(run(study, sys.argv[1:]))
