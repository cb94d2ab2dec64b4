"""The four-variant run of the chapter "The Details That Matter", on minigrad; and the runner of
every study (``break_it``, ``activations``, ``positions``, ``hidden_stats`` import it).

Trains a tiny character-level GPT in four configurations, {LayerNorm, RMSNorm} x {GELU MLP,
SwiGLU MLP}, in the chapter's order, with the chapter's hyperparameters: batch 32, block 32,
2 layers, 4 heads, d_model 64, AdamW lr 3e-3 (weight_decay 0.01), gradient clipping at 1.0,
90/10 train/val split. Every variant starts from the same seed, for its initialisation and its
batches, so with ``--seeds N`` the variants pair seed by seed (95 % Student-t intervals).

    python -m experiments.four_variants --tiny                     # 200 steps, seed 0
    python -m experiments.four_variants --tiny --seeds 5 --jobs 2  # seeds 0..4, intervals
    python -m experiments.four_variants --full                     # 2000 steps
    python -m experiments.four_variants --full --seeds 10 --scheduler tcp://10.0.0.5:8786
    python -m experiments.four_variants --preset shakespeare-cpu   # nanoGPT's CPU run, 4 ways

``--preset shakespeare-cpu`` is nanoGPT's CPU configuration on Tiny Shakespeare (``PRESETS``:
4 layers, 4 heads, d_model 128, block 64, batch 12, 2000 steps, AdamW lr 1e-3 betas (0.9, 0.99)
with weight decay 0.1 on the 2-D weights only, 100 warmup steps then a cosine to 1e-4
(``gpt.train.get_lr``), GPT-2's initialisation); an option given on the command line wins over
the preset's value.

Prints the chapter's table (norm, mlp, params, train, val) and the uniform baseline ln(V);
train and val are mean losses over every position of each split (a sample of ``--eval-tokens``
of them in a larger one: run_log.txt says how many).
Writes into ``--output-dir``: ``run_log.txt``, ``curves.csv``, the PNG figures (with
matplotlib), ``<norm>_<mlp>.npz`` (``--save-checkpoints``) and last ``results.json``, which
names them. Each file is complete or absent; nothing else in the folder is touched.

Exit status: 0 every run trained; 1 a run's loss became NaN or infinite (it stops there, the
others go on, everything is written); 2 bad input (one line, nothing written); 130 Ctrl-C.
"""
import argparse
import contextlib
import datetime
import functools
import math
import os
import secrets
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

import gpt.train
from gpt import GPT, GPTConfig
from gpt.checkpoint import save_checkpoint
from gpt.config import MLPS, NORMS, POSITIONS
from gpt.data import CORPORA, CharTokenizer, check_split_length, load_corpus, train_val_split
from gpt.model import INITS

from experiments import _plots, _report, cli, exercise

PROG = "python -m experiments.four_variants"
TINY_STEPS, FULL_STEPS, MAX_STEPS = 200, 2000, 1_000_000
TRAIN_FRACTION = 0.9
EVAL_TOKENS = 16384  # cap on the positions a final loss covers (the built-in corpus: all)
CONNECT_TIMEOUT = 10  # seconds to reach a Dask scheduler (Dask's default: 30)
VARIANTS = (("ln", "gelu"), ("rms", "gelu"), ("ln", "swiglu"), ("rms", "swiglu"))
steps_arg = cli.bounded_int(1, MAX_STEPS, "steps per run")

# nanoGPT's README, "I only have a macbook": its train.py with config/train_shakespeare_char.py
# and --device=cpu --compile=False --eval_iters=20 --log_interval=1 --block_size=64
# --batch_size=12 --n_layer=4 --n_head=4 --n_embd=128 --max_iters=2000 --lr_decay_iters=2000
# --dropout=0.0 (the config file: lr 1e-3, min_lr 1e-4, beta2 0.99, warmup 100, eval every 250;
# train.py: weight decay 0.1, clip 1.0, GPT-2's init). Keys are option destinations: a command
# takes those it has (experiments.train's max_iters/eval_interval/eval_iters, the studies'
# steps/eval_every).
PRESETS = {"shakespeare-cpu": dict(
    corpus="shakespeare", n_layers=4, n_heads=4, d_model=128, block_size=64, batch_size=12,
    init="gpt2", lr=1e-3, min_lr=1e-4, beta2=0.99, warmup_iters=100, lr_decay_iters=2000,
    weight_decay=0.1, decay_on="2d", grad_clip=1.0,
    max_iters=2000, eval_interval=250, eval_iters=20, steps=2000, eval_every=250)}


def scheduler_arg(text):
    """``--scheduler``: a non-empty address (an empty one would quietly train here)."""
    if not text:
        raise argparse.ArgumentTypeError("empty address")
    return text


def corpus_arg(text):
    """``--corpus``: a name of ``gpt.data.CORPORA`` (kept as the name) or a path."""
    return text if text in CORPORA else cli.path_arg(text)


def add_model_options(p, varied=()):
    """The options of the model, its initialisation, the optimiser and the schedule, shared by
    the studies and ``experiments.train`` (defaults: the chapter's; ``--preset``: nanoGPT's),
    and ``--corpus``, ``--seed``, ``--preset``; ``varied``: the fields a study sets itself."""
    p.add_argument("--preset", choices=sorted(PRESETS),
                   help="a configuration (PRESETS); options given here win over its values")
    p.add_argument("--corpus", type=corpus_arg, metavar="NAME|PATH",
                   help=f"{' or '.join(CORPORA)} (gpt/corpus/SOURCE.txt), or a UTF-8 text file; "
                        f"none: the built-in opening of Pride and Prejudice")
    p.add_argument("--seed", type=cli.nonnegative_int, default=0, metavar="S",
                   help="seed of the initialisation and the batches (a study: the first seed)")
    g = p.add_argument_group("model")
    for flag, meta, default, what in (
            ("--batch-size", "B", 32, "windows per step"), ("--block-size", "T", 32, "context"),
            ("--n-layers", "L", 2, "blocks"), ("--n-heads", "H", 4, "heads, dividing C"),
            ("--d-model", "C", 64, "width of the residual stream")):
        g.add_argument(flag, type=cli.positive_int, default=default, metavar=meta, help=what)
    for name, choices, what in (("norm", NORMS, "normalisation"), ("mlp", MLPS, "MLP"),
                                ("pos", POSITIONS, "position encoding")):
        if name not in varied:
            g.add_argument(f"--{name}", choices=choices, default=choices[0], help=what)
    g.add_argument("--dtype", choices=("float32", "float64"), default="float32", help="dtype")
    g.add_argument("--init", choices=INITS, default="pytorch",
                   help="pytorch: the chapter's (PyTorch's defaults, N(0, 1) embedding); gpt2: "
                        "GPT-2's N(0, 0.02), residual projections / sqrt(2 n_layers)")
    g = p.add_argument_group("optimiser and schedule (nanoGPT's train.py)")
    g.add_argument("--lr", type=cli.positive_float, default=3e-3,
                   help="AdamW learning rate (the peak of the schedule)")
    g.add_argument("--min-lr", type=cli.nonnegative_float, metavar="LR",
                   help="learning rate at the end of the cosine decay; none: --lr (constant)")
    g.add_argument("--warmup-iters", type=cli.nonnegative_int, default=0, metavar="N",
                   help="steps of linear warmup")
    g.add_argument("--lr-decay-iters", type=cli.positive_int, metavar="N",
                   help="step where the cosine reaches --min-lr; none: the run's steps")
    g.add_argument("--weight-decay", type=cli.nonnegative_float, default=0.01, metavar="W",
                   help="AdamW's decoupled weight decay")
    g.add_argument("--decay-on", choices=("all", "2d"), default="all",
                   help="all: every parameter (the chapter's); 2d: only the parameters with 2 "
                        "dimensions, not biases and norm gains (nanoGPT's)")
    g.add_argument("--beta2", type=cli.nonnegative_float, default=0.999,
                   help="AdamW's second-moment decay (beta1 is 0.9)")
    g.add_argument("--grad-clip", type=cli.nonnegative_float, default=1.0, metavar="NORM",
                   help="clip the total gradient norm to NORM; 0: no clipping")


def apply_preset(args, given):
    """Fill in ``args.preset``'s values for the options not in ``given`` (the ones the command
    line set) and that ``args`` has."""
    for k, v in PRESETS.get(args.preset, {}).items():
        if hasattr(args, k) and k not in given:
            setattr(args, k, v)


def optimiser_setup(args, steps):
    """``(make_optimizer(model), lr_at)`` from the options: ``gpt.train.configure_optimizers``
    and ``gpt.train.get_lr`` (picklable, for the worker processes).

    Raises:
        cli.UsageError: ``--warmup-iters`` not below ``--lr-decay-iters``, or ``--beta2`` >= 1.
    """
    decay_iters = args.lr_decay_iters or steps
    if args.warmup_iters >= decay_iters:
        raise cli.UsageError(f"--warmup-iters ({args.warmup_iters}) must be less than "
                             f"--lr-decay-iters ({decay_iters}" + ("" if args.lr_decay_iters else
                             ", the run's steps when it is not given") + ")")
    if args.min_lr is not None and args.min_lr > args.lr:
        raise cli.UsageError(f"--min-lr ({args.min_lr:g}) must not exceed --lr ({args.lr:g}): "
                             f"the cosine decays from --lr to --min-lr")
    if args.beta2 >= 1:
        raise cli.UsageError(f"--beta2 must be below 1, got {args.beta2}")
    make = functools.partial(gpt.train.configure_optimizers, lr=args.lr,
                             weight_decay=args.weight_decay, betas=(0.9, args.beta2),
                             decay=args.decay_on)
    lr_at = functools.partial(gpt.train.get_lr, lr=args.lr,
                              min_lr=args.lr if args.min_lr is None else args.min_lr,
                              warmup_iters=args.warmup_iters, lr_decay_iters=decay_iters)
    return make, lr_at


@dataclass(frozen=True)
class Variant:
    """One arm of a study: ``overrides`` are ``GPTConfig`` fields; ``modify(model)``, a
    module-level function (picklable, for ``--jobs``), changes the initialised model."""
    name: str
    overrides: Dict[str, Any] = field(default_factory=dict)
    modify: Optional[Callable] = None
    labels: Dict[str, str] = field(default_factory=dict)
    note: str = ""

    @property
    def slug(self):
        """The name as a file name stem ("ln+gelu" -> "ln_gelu")."""
        return "".join(c if c.isalnum() or c in "-." else "_" for c in self.name)


@dataclass(frozen=True)
class Study:
    """A study command: its variants (the first is the baseline) and how it reports.

    ``columns``: the table's label columns (key, width); ``closing(report) -> lines``: the block
    after the table (default: the paired differences); ``instrument(job) -> collector``, called
    in the run as ``collector(step, model)`` at step 0 and every evaluation, its ``result()``
    kept as the run's ``extra``; ``extra_outputs(report) -> {name: content}``: more files.
    """
    name: str
    prog: str
    description: str
    variants: Tuple[Variant, ...]
    columns: Tuple[Tuple[str, int], ...] = (("variant", 14),)
    closing: Optional[Callable] = None
    instrument: Optional[Callable] = None
    extra_outputs: Optional[Callable] = None
    add_arguments: Optional[Callable] = None
    closing_on_stdout_with_one_seed: bool = True

    @property
    def baseline(self):
        return self.variants[0]

    def label(self, variant, key):
        return variant.labels.get(key, variant.name)


def build_parser(study):
    """The options every study shares (the model's and optimiser's defaults are the chapter's)."""
    p = cli.ArgumentParser(prog=study.prog, description=study.description)
    length = p.add_mutually_exclusive_group()
    length.add_argument("--tiny", action="store_true", help=f"{TINY_STEPS} steps per run")
    length.add_argument("--full", action="store_true", help=f"{FULL_STEPS} steps per run")
    p.add_argument("--steps", type=steps_arg, metavar="N", help="steps per run (overrides both)")
    p.add_argument("--seeds", type=cli.positive_int, default=1, metavar="N",
                   help="seeds S .. S+N-1, the same for every variant (paired differences)")
    p.add_argument("--output-dir", type=cli.path_arg, default=f"outputs/{study.name}",
                   metavar="DIR", help="where the files go")
    runner = p.add_mutually_exclusive_group()
    runner.add_argument("--jobs", type=cli.positive_int, metavar="N", help="runs trained at a time, "
                        "each in a worker process (default: CPUs / --threads); the numbers do not "
                        "depend on N")
    runner.add_argument("--scheduler", type=scheduler_arg, metavar="ADDRESS", help="train the runs on the workers of "
                        "the Dask cluster whose scheduler is at ADDRESS, e.g. tcp://10.0.0.5:8786 "
                        "(the cluster extra); the numbers are those of --jobs 1")
    p.add_argument("--eval-every", type=cli.positive_int, default=10, metavar="K",
                   help="validation loss every K steps (curves.csv)")
    p.add_argument("--eval-tokens", type=cli.positive_int, default=EVAL_TOKENS, metavar="N",
                   help="each final loss over at most N positions of its split (one window "
                        "at least)")
    p.add_argument("--progress-interval", type=cli.positive_float, default=10.0, metavar="S",
                   help="seconds between a run's progress lines on stderr")
    p.add_argument("--no-plots", action="store_true", help="do not draw the PNG figures")
    p.add_argument("--save-checkpoints", action="store_true",
                   help="write each trained model as <variant>[_seed<S>].npz")
    p.add_argument("--backward", type=cli.path_arg, metavar="DIR", help="train with your own "
                   "backward passes, the files of python -m experiments.exercise in DIR")
    cli.add_threads_option(p)
    add_model_options(p, varied={k for v in study.variants for k in v.overrides})
    if study.add_arguments:
        study.add_arguments(p)
    return p


def parse_args(study, argv):
    """The study's options: the command line over ``--preset`` over the defaults."""
    parser = build_parser(study)
    args = parser.parse_args(argv)
    given = cli.given_options(parser, argv)
    if args.tiny or args.full:  # they say how many steps, as --steps does
        given.add("steps")
    apply_preset(args, given)
    return args


def memory_lower_bound(config, batch_size, training=True):
    """Bytes one training step surely holds: weights, gradients and AdamW's two moments (4 x the
    parameters), each layer's saved activations (>= 18 C a token plus the T x T attention) and
    the logits with their gradient; without ``training``, the weights and one layer's."""
    item = np.dtype(config.dtype).itemsize
    B, T, C = batch_size, config.block_size, config.d_model
    params = config.vocab_size * C + config.n_layers * 12 * C * C
    if not training:
        return (params + B * T * (config.n_heads * T + config.vocab_size)) * item
    acts = config.n_layers * B * T * (18 * C + config.n_heads * T) + 2 * B * T * config.vocab_size
    return (4 * params + acts) * item


def load_and_configure(args, overrides=({},)):
    """The corpus of ``args``, its tokenizer, its train/val ids and one ``GPTConfig`` for each
    dict of ``overrides`` (fields over the options), every input checked, memory included.
    Returns ``(text, tokenizer, train_data, val_data, configs)``; raises ``cli.UsageError``
    naming the problem."""
    try:
        text = load_corpus(args.corpus)
    except (OSError, ValueError) as e:
        names = f" (the corpora by name: {', '.join(CORPORA)})" if isinstance(
            e, FileNotFoundError) and os.sep not in str(args.corpus) else ""
        raise cli.UsageError((str(e) if isinstance(e, ValueError) or not e.strerror else
                              f"cannot read corpus {args.corpus}: {e.strerror}") + names) from None
    tokenizer = CharTokenizer(text)
    train_data, val_data = train_val_split(tokenizer.encode(text), TRAIN_FRACTION)
    try:
        for name, split in (("training split", train_data), ("validation split", val_data)):
            check_split_length(split, args.block_size, name)
    except ValueError as e:
        raise cli.UsageError(f"the corpus is too short: {e}") from None
    base = dict(vocab_size=tokenizer.vocab_size, block_size=args.block_size, dtype=args.dtype,
                n_layers=args.n_layers, n_heads=args.n_heads, d_model=args.d_model,
                **{k: getattr(args, k) for k in ("norm", "mlp", "pos") if hasattr(args, k)})
    try:
        configs = [GPTConfig(**{**base, **o}) for o in overrides]
    except (TypeError, ValueError) as e:
        raise cli.UsageError(f"invalid model configuration: {e}") from None
    need = max(memory_lower_bound(c, args.batch_size) for c in configs)
    have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if need > have:
        raise cli.UsageError(f"the model and batch need at least {need / 2**30:.1f} GiB of memory "
                             f"to train, more than this machine's {have / 2**30:.1f} GiB")
    return text, tokenizer, train_data, val_data, configs


def plan_study(study, args):
    """Check every input before training; the plan the runs and the report read.
    Raises ``cli.UsageError`` naming the problem."""
    text, tokenizer, train_data, val_data, configs = load_and_configure(
        args, [v.overrides for v in study.variants])
    configs = {v.name: c for v, c in zip(study.variants, configs)}
    seeds = list(range(args.seed, args.seed + args.seeds))
    steps = args.steps or (FULL_STEPS if args.full else TINY_STEPS)
    optimiser_setup(args, steps)  # its checks, before any run starts
    now = datetime.datetime.now(datetime.timezone.utc)
    return SimpleNamespace(
        study=study, args=args, seeds=seeds, text=text, tokenizer=tokenizer,
        vocab_size=tokenizer.vocab_size, train_data=train_data, val_data=val_data,
        configs=configs, eval_tokens=args.eval_tokens, train_fraction=TRAIN_FRACTION,
        steps=steps,
        corpus_label="built-in" if args.corpus is None else str(args.corpus),
        run_id=f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(4)}",
        checkpoint_name=lambda v, s: f"{v.slug}.npz" if len(seeds) == 1 else
        f"{v.slug}_seed{s}.npz")


@dataclass
class Job:
    """One (variant, seed) run: everything it needs, picklable for a worker process."""
    variant: Variant
    config: GPTConfig
    seed: int
    steps: int
    args: Any
    train_data: np.ndarray
    val_data: np.ndarray
    label: str
    instrument: Optional[Callable] = None
    backward: Tuple = ()  # the learner's backward passes (experiments.exercise.Swap)


def train_one(job):
    """Train one variant from one seed (``gpt.train.train``, the chapter's loop); its entry:
    params, status ("ok" or "diverged", with the step), final and per-step losses, gradient
    norms, the val curve, seconds, the instrument's result, the learner's backward passes it
    called (``--backward``) and, with checkpoints, the weights."""
    args = job.args
    called = exercise.install(job.backward)
    model = GPT(job.config, seed=job.seed, init=args.init)
    if job.variant.modify:
        job.variant.modify(model)
    rng = np.random.default_rng(job.seed)  # the batches: same seed, same stream for every variant
    collector = job.instrument(job) if job.instrument else None
    if collector:
        collector(0, model)
    val_curve, t0, last = [], time.perf_counter(), [time.perf_counter()]

    def evaluate(data):
        return gpt.train.evaluate(model, data, batch_size=args.batch_size,
                                  max_tokens=args.eval_tokens)

    def on_step(step, loss):
        now = time.perf_counter()
        if now - last[0] >= args.progress_interval or step == job.steps:
            last[0], rate = now, step / (now - t0)
            eta = f"  ETA {(job.steps - step) / rate:.0f} s" if step < job.steps else ""
            cli.progress(f"  {job.label} step {step:>{len(str(job.steps))}}/{job.steps}  loss "
                         f"{loss:.4f}  {rate:6.1f} steps/s  {now - t0:6.1f} s{eta}")
        if step % args.eval_every == 0 or step == job.steps:
            val_curve.append([step, evaluate(job.val_data)])
            if collector:
                collector(step, model)

    entry = {"name": job.variant.name, "seed": job.seed, **job.variant.labels,
             "params": model.num_parameters(), "status": "ok", "message": None,
             "diverged_at": None, "checkpoint": None}
    try:
        make_optimizer, lr_at = optimiser_setup(args, job.steps)
        result = gpt.train.train(model, job.train_data, steps=job.steps,
                                 batch_size=args.batch_size, clip=args.grad_clip or None,
                                 rng=rng, on_step=on_step, optimizer=make_optimizer(model),
                                 lr_at=lr_at)
        losses, norms, seconds = result.losses, result.grad_norms, result.seconds
        with np.errstate(all="ignore"):
            final = {"train_loss": evaluate(job.train_data), "val_loss": evaluate(job.val_data),
                     # the chapter's estimate: one batch of each split, continuing the stream
                     "train_loss_one_batch": gpt.train.estimate_loss(
                         model, job.train_data, rng, batch_size=args.batch_size),
                     "val_loss_one_batch": gpt.train.estimate_loss(
                         model, job.val_data, rng, batch_size=args.batch_size)}
        bad = [x for x in final.values() if not math.isfinite(x)]
        if bad:  # every step was finite, but the last update broke the model
            entry["diverged_at"] = {"step": job.steps, "value": str(bad[0]),
                                    "what": "final loss (evaluated after the last update)"}
        if args.save_checkpoints and not bad:
            entry["_state"] = model.state_dict()
    except gpt.train.TrainingDiverged as e:
        cli.progress(f"  {job.label} stopped: {e}")
        losses, norms, seconds, final = e.losses, e.grad_norms, e.seconds, {}
        entry["diverged_at"] = {"step": e.step, "what": e.what, "value": str(e.value)}
    if entry["diverged_at"]:
        d = entry["diverged_at"]
        entry.update(status="diverged", message=f"{d['what']} became {d['value']} at step "
                                                f"{d['step']}")
    entry.update({k: final.get(k) if not entry["diverged_at"] else None for k in
                  ("train_loss", "val_loss", "train_loss_one_batch", "val_loss_one_batch")})
    entry.update(steps_completed=len(losses), loss_curve=[float(x) for x in losses],
                 grad_norms=[float(x) for x in norms],
                 val_curve=[[s, v if math.isfinite(v) else str(v)] for s, v in val_curve],
                 seconds=round(seconds, 3), extra=collector.result() if collector else None,
                 backward_called=sorted(called))
    return entry


def connect(address):
    """A ``distributed.Client`` of the Dask scheduler at ``address`` (``--scheduler``), e.g.
    ``"tcp://10.0.0.5:8786"``, reached within ``CONNECT_TIMEOUT`` seconds.

    Raises:
        UsageError: dask's ``distributed`` is not installed (the ``cluster`` extra), or no
            Dask scheduler answered at ``address`` (a bad address, a timeout, another service).
    """
    try:
        import distributed
    except ImportError:
        raise cli.UsageError("--scheduler needs dask's distributed, the cluster extra: "
                             'pip install -e ".[cluster]"') from None
    try:
        return distributed.Client(address, timeout=CONNECT_TIMEOUT)
    except Exception as e:  # Dask's OSError, ValueError (an address), ... (another service)
        raise cli.UsageError(f"no Dask scheduler at {address}: {e}") from None


def train_all(jobs, workers, client=None):
    """Yield each job's entry, in order, trained in ``workers`` worker processes, or, given
    ``client`` (a ``distributed.Client``, closed at the end), on its Dask cluster's workers.

    Every run trains in a worker, also with ``--jobs 1`` (``cli.in_workers``: a fresh
    interpreter, with the BLAS threads and allocator settings of ``cli.main``). A run is a pure
    function of its job, so a cluster that loses a worker trains its runs again elsewhere to
    the same numbers.
    """
    with client or contextlib.nullcontext():  # the pool closes first, then the client
        yield from cli.in_workers(train_one, [(job,) for job in jobs], workers,
                                  client.get_executor() if client else None)


def run_study(study, argv):
    """A study command from top to bottom: arguments, data, runs, report, files; its status."""
    args = parse_args(study, argv)
    plan = plan_study(study, args)
    out = cli.check_output_dir(args.output_dir, ("results.json", "run_log.txt", "curves.csv"))
    if args.backward and args.scheduler:  # a Dask worker lives on: it would keep the swaps
        raise cli.UsageError("--backward trains on this machine only: leave out --scheduler")
    plan.backward = exercise.backward_swaps(args.backward) if args.backward else ()
    jobs = [Job(v, plan.configs[v.name], s, plan.steps, args, plan.train_data, plan.val_data,
                f"{v.name}{f' s{s}' if len(plan.seeds) > 1 else ''}".ljust(12), study.instrument,
                plan.backward) for v in study.variants for s in plan.seeds]
    cpus = cli.available_cpus()
    workers = min(args.jobs or max(1, cpus // args.threads), len(jobs))
    if args.threads > 1 and workers * args.threads > cpus:  # BLAS threads spin: 10x slower
        raise cli.UsageError(f"--jobs {workers} x --threads {args.threads} is more BLAS threads "
                             f"than the {cpus} CPUs this process may use")
    client = connect(args.scheduler) if args.scheduler else None
    where = (f"on the Dask cluster at {args.scheduler}, {sum(client.nthreads().values())} at a "
             f"time" if client else f"{workers} at a time")
    cli.progress(f"{study.name}: {len(jobs)} runs x {plan.steps} steps, corpus "
                 f"{plan.corpus_label} ({len(plan.text)} characters, vocab {plan.vocab_size}), "
                 f"train/val {len(plan.train_data)}/{len(plan.val_data)} tokens, "
                 f"{where}, init {args.init}, run {plan.run_id}")
    runs = []
    for entry in train_all(jobs, workers, client):
        runs.append(entry)
        cli.progress(_report.run_line(study, entry, len(plan.seeds)))
    report = _report.Report(plan, runs)

    files = {}
    for e in runs:
        if "_state" in e:
            v = next(v for v in study.variants if v.name == e["name"])
            model = GPT(plan.configs[v.name], seed=e["seed"])
            model.load_state_dict(e.pop("_state"))
            e["checkpoint"] = plan.checkpoint_name(v, e["seed"])
            files[e["checkpoint"]] = lambda path, m=model: save_checkpoint(
                m, path, tokenizer=plan.tokenizer, run_id=plan.run_id)
    plot_note = None if args.no_plots else _plots.add_figures(report, files)
    files["curves.csv"] = _report.curves_csv(report)
    files.update(study.extra_outputs(report) if study.extra_outputs else {})
    files["run_log.txt"] = _report.run_log(report)
    report.files = sorted([*files, "results.json"])
    files["results.json"] = _report.results_json(report)
    cli.write_outputs(out, files)

    for line in _report.stdout_lines(report):
        print(line)
    print(f"\nOutputs written to {out.resolve()}")
    if plot_note:
        cli.progress(f"{study.name}: {plot_note}")
    diverged = [f"{e['name']} seed {e['seed']}" for e in runs if e["status"] != "ok"]
    if diverged:
        cli.progress(f"{study.prog}: {len(diverged)} run(s) diverged: {', '.join(diverged)}")
        return cli.EXIT_DIVERGED
    return cli.EXIT_OK


STUDY = Study(
    name="four_variants", prog=PROG,
    description="Train a tiny GPT four ways, {LayerNorm, RMSNorm} x {GELU, SwiGLU}, over one or "
                "more seeds, and compare their losses (the chapter's run, with paired intervals).",
    variants=tuple(Variant(f"{n}+{m}", {"norm": n, "mlp": m}, labels={"norm": n, "mlp": m})
                   for n, m in VARIANTS),
    columns=(("norm", 6), ("mlp", 10)), closing=_report.four_variants_closing,
    closing_on_stdout_with_one_seed=False,  # one seed: exactly the chapter's table
    add_arguments=lambda p: p.add_argument(
        "--norm-cost", type=_report.norm_cost_arg, metavar="PATH",
        help="a results.json of python -m experiments.norm_cost, cited in the closing block"))


def run(argv):
    """The command: ``run_study(STUDY, argv)``; returns the exit status."""
    return run_study(STUDY, argv)


if __name__ == "__main__":
    cli.main(PROG, run)
