"""The shared runner of the study commands: arguments, plan, (variant x seed) jobs, outputs.

Every study command (``four_variants``, ``break_it``, ``activations``, ``positions``, ...) is a
``Study``: a list of ``Variant``s trained over the same seeds, the first variant being the
baseline. A command declares its study and hands ``main`` to ``run_study``::

    from experiments._runner import Study, Variant, run_study

    STUDY = Study(
        name="positions",                      # results.json "experiment"; default output dir
        prog="python -m experiments.positions",
        description="Learned position embeddings vs RoPE.",
        variants=(Variant("learned", {"pos": "learned"}),     # the baseline
                  Variant("rope", {"pos": "rope"})),
    )

    def main(argv=None):
        return run_study(STUDY, argv)

A ``Variant`` is a name, ``overrides`` (``GPTConfig`` fields over the base configuration built
from the command line) and an optional ``modify(model)``: a module-level function called on the
freshly initialised model before training (e.g. zero and freeze a gain; it must be defined at
module level so that ``--jobs N`` can send it to a worker process).

What ``run_study`` does, in order:

1. Parses the common options (``build_parser``): ``--tiny`` (default, 200 steps) / ``--full``
   (2000) / ``--steps N``, ``--seed S`` and ``--seeds N`` (seeds S .. S+N-1), ``--corpus``,
   ``--output-dir``, ``--jobs N``, ``--eval-every K``, ``--eval-tokens N`` (each loss over at
   most N target positions of its split, default ``EVAL_TOKENS``), ``--progress-interval S``,
   ``--no-plots``, ``--save-checkpoints``,
   the model and optimiser sizes (the chapter's defaults, shown in ``--help``), and ``--norm``,
   ``--mlp``, ``--pos`` for each field that no variant of the study sets. ``Study.add_arguments``
   may add more.
2. Validates everything before training (``Plan``): corpus, splits, every variant's config,
   memory, the output directory. Bad input: one line on stderr, exit 2, nothing written.
3. Trains every (variant, seed) job (``run_job``), serially (``--jobs 1``) or in ``--jobs``
   processes (``concurrent.futures.ProcessPoolExecutor``, forked where safe, else spawned:
   ``experiments._processes.start_method``; by default one per usable
   CPU, at most one per job, for runs of ``MIN_STEPS_FOR_PROCESSES`` steps or more:
   ``default_jobs``); each job depends only on its variant and
   seed, so the numbers are identical either way. Same seed = same initialisation stream and
   same batch stream for every variant, so seeds pair. A job records the train loss and
   gradient norm of every step and the validation loss every K steps (and at the end); a loss
   or gradient norm that becomes NaN/inf ends that job as a finding (``status "diverged"``,
   with the step and value), never a crash.
4. Summarises (``experiments._report``): per variant the mean and sample standard deviation
   of the final train and val losses; per variant the paired difference from the baseline with
   a 95 % Student-t interval (``experiments._stats``).
5. Writes ``run_log.txt``, ``results.json``, ``curves.csv`` and (with matplotlib)
   ``loss_curves.png``, ``deltas.png`` and ``grad_norms.png`` as one atomic group (``experiments._atomic.AtomicGroup``),
   plus ``Study.extra_outputs(report) -> {file name: text}`` and the checkpoints; files of the
   study's own names left by an earlier run and not rewritten are removed in the same group
   (``Plan.owned_files``); ``results.json`` and every checkpoint carry the run's ``run_id``.
   Then prints the table on stdout.

Optional hooks on ``Study``: ``columns`` and ``run_label`` (how the table names a variant),
``closing(report) -> list of lines`` (run_log's closing block, also printed on stdout;
default: the paired differences; ``closing_on_stdout_with_one_seed=False`` keeps a one-seed
stdout to the table alone, as four_variants does to print exactly the chapter's table), ``instrument(model, variant, seed) -> callable(step, model)`` called at step 0
and at every evaluation step (its ``result()``, if any, is stored as the run's ``"extra"``;
it must not draw from the training generator, and must be picklable, e.g. a module-level
class, for ``--jobs``), ``extra_outputs(report) -> {file name: text}`` (e.g. a CSV),
``extra_figures(plt, report, stage)`` (draw with ``plt.subplots``/``plt.rcParams``, the
subset of pyplot that ``experiments._plots`` provides on Agg figures, and save with
``plt.save_png(fig, stage("name.png"))``, a path in the atomic group; each name must be in
``output_names``; only called when matplotlib is installed and ``--no-plots`` is not given,
perhaps in a forked process of its own) and ``add_arguments(parser)`` (read them back from
``report.plan.args``).

The hooks receive an ``experiments._report.Report``: ``report.plan`` (``args``, ``steps``,
``seeds``, ``configs``, ``train_data``/``val_data``), ``report.runs`` (one dict per (variant,
seed): losses, ``loss_curve``, ``grad_norms``, ``val_curve``, ``status``, ``diverged_at``,
``extra``), ``report.summaries`` (per variant) and ``report.paired(a, b, metric)``; the
building blocks of a closing block are there too (``differences_block``, ``params_block``,
``grad_norm_block``, ``divergence_findings``, ``differences_and_params``).

Exit status: 0 every job trained; 1 a job diverged (everything still written); 2 bad input or
the outputs cannot be written (one line on stderr, nothing written), or stdout cannot be
written (``experiments._cli.run_main``); 130 interrupted (one line, nothing written).

Progress (stderr): redrawn in place on a terminal; otherwise a line every
``--progress-interval`` seconds with step, loss, steps/s and ETA (``_Progress``). ``--steps``
above ``MAX_STEPS`` is refused; a run estimated over a day is warned about once.
"""
from __future__ import annotations

import concurrent.futures as cf
import math
import multiprocessing
import os
import re
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

import gpt.train
from gpt import GPT, GPTConfig
from gpt.checkpoint import save_checkpoint
from gpt.config import MLPS, NORMS, POSITIONS
from gpt.data import CharTokenizer, check_split_length, load_corpus, train_val_split
from gpt.train import TrainingDiverged, estimate_loss, evaluate

from experiments import _plots, _report
from experiments._processes import (flush_std_streams, ignore_sigint, sigint_blocked,
                                    start_method)
from experiments._threads import add_threads_option, blas_threads
from experiments._atomic import AtomicGroup, check_replaceable
from experiments._cli import (ArgumentParser, Printer, UsageError, bounded_int, check_output_dir,
                              fail, interrupted, mark_outputs_written, new_run_id,
                              nonnegative_int, path_arg, positive_float, positive_int,
                              remove_empty_dirs)

__all__ = ["Variant", "Study", "Plan", "build_parser", "run_job", "run_jobs", "run_study",
           "steps_arg", "VARIANTS", "MAX_STEPS", "EXIT_OK", "EXIT_DIVERGED", "EXIT_USAGE", "EXIT_INTERRUPTED"]

EXIT_OK, EXIT_DIVERGED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
TINY_STEPS = 200
FULL_STEPS = 2000
TRAIN_FRACTION = 0.9
WEIGHT_DECAY = 0.01
CLIP = 1.0
EVAL_EVERY = 10
#: Default cap on the target positions of each split an evaluation covers (``--eval-tokens``):
#: far above the built-in corpus (1594 train, 177 val), so it is evaluated exactly as before;
#: a large corpus is evaluated on ~16 Ki positions spread over each split.
EVAL_TOKENS = 16384
#: Largest accepted ``--steps`` (the tiny model trains ~20-50 steps/s on one core, so this is
#: already several hours per run); larger values are refused before anything runs.
MAX_STEPS = 1_000_000
#: Seconds between progress lines when stderr is not a terminal (``--progress-interval``).
PROGRESS_INTERVAL = 10.0
#: Warn when a run's estimated time, measured over its first steps, exceeds this (seconds).
ETA_WARN_SECONDS = 86400.0
#: A corpus larger than this (bytes) gets a line on stderr as it is read and tokenised.
LARGE_CORPUS_BYTES = 8 << 20
#: The files every study writes (the run's own names; ``Study.output_names`` adds more).
OUTPUT_NAMES = ("results.json", "run_log.txt", "curves.csv", "loss_curves.png", "deltas.png",
                "grad_norms.png")
#: ``--steps``: an integer in 1 .. MAX_STEPS (the studies' and bench's).
steps_arg = bounded_int(1, MAX_STEPS, "steps per run", f"the tiny model trains tens of steps "
                        f"per second: {MAX_STEPS:,} steps already take hours")
#: The chapter's four variants (norm, mlp), in its order; four_variants trains them, bench times
#: them.
VARIANTS = (("ln", "gelu"), ("rms", "gelu"), ("ln", "swiglu"), ("rms", "swiglu"))
CHOICE_FIELDS = (("norm", NORMS, "ln"), ("mlp", MLPS, "gelu"), ("pos", POSITIONS, "learned"))


@dataclass(frozen=True)
class Variant:
    """One arm of a study.

    Args:
        name: short name, used in tables, CSV rows and file names ("ln+gelu").
        overrides: ``GPTConfig`` fields set for this variant (over the command-line base).
        modify: optional module-level ``modify(model) -> None`` applied after initialisation.
        labels: values of the table's label columns (``Study.columns``); default the name.
        note: one line describing the variant (run_log and results.json).
    """

    name: str
    overrides: Dict[str, Any] = field(default_factory=dict)
    modify: Optional[Callable[[Any], None]] = None
    labels: Dict[str, str] = field(default_factory=dict)
    note: str = ""

    @property
    def slug(self) -> str:
        """The name as a file-name stem ("ln+gelu" -> "ln_gelu")."""
        return "".join(c if c.isalnum() or c in "-." else "_" for c in self.name)


@dataclass(frozen=True)
class Study:
    """A study command: its variants (the first is the baseline) and its reporting hooks.

    See the module docstring for the hooks. ``columns`` are (label key, width) pairs.
    ``output_names``: the names of the files ``extra_outputs``/``extra_figures`` write (the
    run's own names: a copy left by an earlier run is removed when this run does not write it).
    ``prepare(plan) -> Study``: called once the plan is validated; returns the study to run
    (e.g. with an ``instrument`` built from the plan's data).
    """

    name: str
    prog: str
    description: str
    variants: Tuple[Variant, ...]
    columns: Tuple[Tuple[str, int], ...] = (("variant", 14),)
    run_label: Optional[Callable[[Variant], str]] = None
    closing: Optional[Callable[[Any], List[str]]] = None
    instrument: Optional[Callable[[Any, Variant, int], Any]] = None
    extra_outputs: Optional[Callable[[Any], Dict[str, str]]] = None
    add_arguments: Optional[Callable[[ArgumentParser], None]] = None
    extra_figures: Optional[Callable[[Any, Any, Callable[[str], Path]], None]] = None
    closing_on_stdout_with_one_seed: bool = True
    output_names: Tuple[str, ...] = ()
    prepare: Optional[Callable[[Any], "Study"]] = None

    @property
    def baseline(self) -> Variant:
        """The variant the others are compared with (the first)."""
        return self.variants[0]

    @property
    def default_output_dir(self) -> Path:
        """``outputs/<name>``."""
        return Path("outputs") / self.name

    def label(self, variant: Variant, key: str) -> str:
        """The value of label column ``key`` for ``variant``."""
        return variant.labels.get(key, variant.name)

    def label_of_run(self, variant: Variant) -> str:
        """How a progress/result line names the variant."""
        return self.run_label(variant) if self.run_label else f"{variant.name:14s}"

    def main(self, argv: Optional[Sequence[str]] = None) -> int:
        """The study's command: ``run_study(self, argv)``; returns the exit status."""
        return run_study(self, argv)


# ---------------------------------------------------------------------------- arguments


def build_parser(study: Study) -> ArgumentParser:
    """The common argument parser of a study (one-line errors, exit status 2)."""
    p = ArgumentParser(
        prog=study.prog, description=study.description,
        epilog="Exit status: 0 every run trained; 1 a run diverged (NaN/inf loss; results still "
               "written); 2 bad input (nothing written) or stdout not writable; 130 "
               "interrupted (nothing written). --corpus must be a regular file (not a FIFO or "
               "device).")
    length = p.add_mutually_exclusive_group()
    length.add_argument("--tiny", action="store_true",
                        help=f"{TINY_STEPS} steps per run (the default)")
    length.add_argument("--full", action="store_true", help=f"{FULL_STEPS} steps per run")
    p.add_argument("--steps", type=steps_arg, default=None, metavar="N",
                   help=f"steps per run, at most {MAX_STEPS:,} (default: {TINY_STEPS}, "
                        f"or --full's {FULL_STEPS})")
    p.add_argument("--seed", type=nonnegative_int, default=0, metavar="S",
                   help="first seed (default 0); a seed fixes a run's initialisation and batches")
    p.add_argument("--seeds", type=positive_int, default=1, metavar="N",
                   help="number of seeds, S .. S+N-1 (default 1); every variant gets the same "
                        "seeds, so differences are paired")
    p.add_argument("--corpus", type=path_arg, default=None, metavar="PATH",
                   help="a UTF-8 text file; a regular file, not a FIFO or device (default: "
                        "the built-in 48-character corpus)")
    p.add_argument("--output-dir", type=path_arg, default=study.default_output_dir,
                   metavar="DIR", help=f"where to write the outputs "
                                       f"(default {study.default_output_dir})")
    p.add_argument("--jobs", type=positive_int, default=None, metavar="N",
                   help="train N runs at a time in separate processes (default: one per usable "
                        "CPU, divided by --threads, at most one per run, with "
                        f"{MIN_STEPS_FOR_PROCESSES} steps or more "
                        "a run; else 1, everything in this process); N above the number of "
                        "runs starts one process per run; the numbers do not depend on N")
    p.add_argument("--eval-every", type=positive_int, default=EVAL_EVERY, metavar="K",
                   help=f"validation loss every K steps in curves.csv (default {EVAL_EVERY})")
    p.add_argument("--eval-tokens", type=positive_int, default=EVAL_TOKENS, metavar="N",
                   help=f"evaluate each loss on at most N target positions of its split, in "
                        f"windows spread evenly over it (default {EVAL_TOKENS}; a smaller split "
                        f"is evaluated whole; results.json says how many each figure covers)")
    p.add_argument("--progress-interval", type=positive_float, default=PROGRESS_INTERVAL,
                   metavar="SECONDS",
                   help=f"when stderr is not a terminal, a progress line every SECONDS "
                        f"(default {PROGRESS_INTERVAL:g}); on a terminal the line is redrawn "
                        f"in place")
    p.add_argument("--no-plots", action="store_true", help="do not write the PNG figures")
    add_threads_option(p)
    p.add_argument("--save-checkpoints", action="store_true",
                   help="also write each trained model as <variant>.npz "
                        "(<variant>_seed<S>.npz with several seeds); without it, checkpoints "
                        "of this study's variants left in the folder by an earlier run are "
                        "removed (default: off)")
    g = p.add_argument_group("model and optimiser (defaults are the chapter's)")
    g.add_argument("--batch-size", type=positive_int, default=32, metavar="B",
                   help="windows per training step, and per forward pass when evaluating "
                        "(default 32)")
    g.add_argument("--block-size", type=positive_int, default=32, metavar="T",
                   help="context length: characters per window (default 32)")
    g.add_argument("--n-layers", type=positive_int, default=2, metavar="L",
                   help="transformer blocks (default 2)")
    g.add_argument("--n-heads", type=positive_int, default=4, metavar="H",
                   help="attention heads per block; must divide --d-model (default 4)")
    g.add_argument("--d-model", type=positive_int, default=64, metavar="C",
                   help="width of the residual stream (default 64)")
    varied = {k for v in study.variants for k in v.overrides}
    for name, choices, default in CHOICE_FIELDS:
        if name not in varied:
            what = {"norm": "normalisation layer", "mlp": "MLP of each block",
                    "pos": "position encoding"}[name]
            g.add_argument(f"--{name}", choices=choices, default=default,
                           help=f"{what} (default {default}, as the chapter)")
    g.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                   help="dtype of the weights and the computation (default float32)")
    g.add_argument("--lr", type=positive_float, default=3e-3,
                   help="AdamW learning rate (default 3e-3, as the chapter)")
    if study.add_arguments is not None:
        study.add_arguments(p)
    return p


# ---------------------------------------------------------------------------- plan


class Plan:
    """Everything validated before training: arguments, corpus, splits, configs, output dir.

    Attributes: ``study``, ``args``, ``steps``, ``seeds`` (list of int), ``text``,
    ``corpus_label``, ``tokenizer``, ``vocab_size``, ``train_data``/``val_data`` (1-D int
    arrays), ``configs`` (variant name -> GPTConfig), ``output_dir`` (Path), ``output_names``.

    Raises:
        UsageError: naming the problem (bad corpus, split too short, invalid configuration,
            model too large for memory, unwritable output directory or a name taken by a
            directory).
    """

    def __init__(self, study: Study, args) -> None:
        self.study, self.args = study, args
        self.steps = args.steps if args.steps is not None else (FULL_STEPS if args.full
                                                               else TINY_STEPS)
        self.seeds = list(range(args.seed, args.seed + args.seeds))
        self.run_id = new_run_id()
        size = _file_size(args.corpus)
        large = size is not None and size > LARGE_CORPUS_BYTES
        if large:
            _note(f"{study.name}: reading corpus {args.corpus} ({size / 1e6:.1f} MB) ...")
        t0 = time.perf_counter()
        try:
            self.text = load_corpus(args.corpus)
        except (FileNotFoundError, IsADirectoryError, ValueError) as e:
            raise UsageError(str(e)) from None
        except OSError as e:  # e.g. permission denied
            raise UsageError(f"cannot read corpus {args.corpus}: {e.strerror or e}") from None
        self.corpus_label = "built-in" if args.corpus is None else str(args.corpus)
        corpus_name = "the built-in corpus" if args.corpus is None else f"corpus {args.corpus}"
        if large:
            _note(f"{study.name}: read and decoded in {time.perf_counter() - t0:.2f} s; "
                  f"tokenising {len(self.text):,} characters ...")
        t0 = time.perf_counter()
        self.tokenizer = CharTokenizer(self.text)
        self.vocab_size = self.tokenizer.vocab_size
        data = self.tokenizer.encode(self.text)  # uint8 ids for up to 256 characters
        if large:
            _note(f"{study.name}: tokenised in {time.perf_counter() - t0:.2f} s (vocab "
                  f"{self.vocab_size}, ids {data.dtype}, {data.nbytes / 1e6:.1f} MB)")
        self.train_data, self.val_data = train_val_split(data, TRAIN_FRACTION)
        for name, split in (("training split", self.train_data),
                            ("validation split", self.val_data)):
            try:
                check_split_length(split, args.block_size, name)
            except ValueError as e:
                raise UsageError(f"{corpus_name} is too short: {e}") from None
        base = dict(vocab_size=self.vocab_size, block_size=args.block_size,
                    n_layers=args.n_layers, n_heads=args.n_heads, d_model=args.d_model,
                    dtype=args.dtype)
        for name, _, _ in CHOICE_FIELDS:
            if hasattr(args, name):
                base[name] = getattr(args, name)
        self.configs: Dict[str, GPTConfig] = {}
        for v in study.variants:
            try:
                self.configs[v.name] = GPTConfig(**{**base, **v.overrides})
            except (TypeError, ValueError) as e:
                raise UsageError(f"invalid model configuration: {e}") from None
        need = max(memory_lower_bound(c, args.batch_size) for c in self.configs.values())
        have = physical_memory()
        if have and need > have:
            raise UsageError(
                f"the model and batch need at least {need / 2**30:.1f} GiB of memory to train "
                f"(weights, gradients, AdamW state, activations), more than this machine's "
                f"{have / 2**30:.1f} GiB; reduce --d-model, --n-layers or --batch-size")
        self.eval_tokens = int(getattr(args, "eval_tokens", EVAL_TOKENS))
        self.output_dir = check_output_dir(args.output_dir)
        names = list(OUTPUT_NAMES) + list(study.output_names)
        if args.save_checkpoints:
            names += [self.checkpoint_name(v, s) for v in study.variants for s in self.seeds]
        for name in names:
            if (self.output_dir / name).is_dir():
                raise UsageError(f"cannot write {self.output_dir / name}: it is a directory")
            try:
                check_replaceable(self.output_dir / name)
            except OSError as e:
                raise UsageError(f"cannot write {self.output_dir / name}: {e.strerror}") from None

    def owned_files(self) -> List[Path]:
        """Files now in the output directory that bear this study's own names (its fixed
        outputs, ``Study.output_names`` and ``<variant>.npz`` / ``<variant>_seed<S>.npz`` of its
        variants): whatever this run does not rewrite of these is an earlier run's, removed
        with this run's commit so that the folder holds one run's files."""
        out = self.output_dir
        if not out.is_dir():
            return []
        fixed = set(OUTPUT_NAMES) | set(self.study.output_names)
        ckpt = re.compile("^(" + "|".join(re.escape(v.slug) for v in self.study.variants)
                          + r")(_seed\d+)?\.npz$")
        return sorted(p for p in out.iterdir()
                      if (p.name in fixed or ckpt.match(p.name)) and p.is_file()
                      and not p.is_symlink())

    def checkpoint_name(self, variant: Variant, seed: int) -> str:
        """``<slug>.npz`` with one seed, ``<slug>_seed<S>.npz`` with several."""
        return f"{variant.slug}.npz" if len(self.seeds) == 1 else f"{variant.slug}_seed{seed}.npz"

    def jobs(self) -> List[Tuple[Variant, int]]:
        """Every (variant, seed), variant-major, in the study's order."""
        return [(v, s) for v in self.study.variants for s in self.seeds]


def _file_size(path) -> Optional[int]:
    try:
        return os.stat(path).st_size if path is not None else None
    except OSError:
        return None


def _note(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def memory_lower_bound(config: GPTConfig, batch_size: int, training: bool = True) -> int:
    """A lower bound, in bytes, of the memory one training step of ``config`` holds.

    Counts only what must exist at once: weights, gradients and AdamW's two moments
    (4 x parameters, with the MLP and attention matrices as 12 C^2 a layer), the activations
    each layer keeps for backward (at least 18 C values per token: the norm outputs, q, k, v,
    the attention output and the MLP's hidden activations; plus the T x T attention
    probabilities per head) and the logits with their gradient. The true peak is higher, so a
    configuration over the machine's memory is sure to fail. With ``training=False`` (sampling
    under ``no_grad``): the weights once, one layer's attention probabilities and the logits.
    """
    item = np.dtype(config.dtype).itemsize
    B, T, C = batch_size, config.block_size, config.d_model
    params = config.vocab_size * C + config.n_layers * 12 * C * C
    if not training:
        return (params + B * T * (config.n_heads * T + config.vocab_size)) * item
    acts = config.n_layers * B * T * (18 * C + config.n_heads * T) + 2 * B * T * config.vocab_size
    return (4 * params + acts) * item


def physical_memory() -> Optional[int]:
    """Bytes of physical memory, or None where the platform does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


# ---------------------------------------------------------------------------- one job


def _fmt_seconds(t: float) -> str:
    """``42 s``, ``3.5 min``, ``2.1 h``, ``3.2 days``."""
    if not math.isfinite(t):
        return "?"
    if t < 90:
        return f"{t:.0f} s"
    if t < 5400:
        return f"{t / 60:.1f} min"
    if t < 2 * 86400:
        return f"{t / 3600:.1f} h"
    return f"{t / 86400:.1f} days"


_WARNED: List[bool] = []  # the over-a-day warning was given in this process


class _Progress:
    """A run's progress on stderr: step, loss, steps/s and the estimated time left (ETA).

    On a terminal the line is redrawn in place (at most 5 times a second); otherwise (a log
    file, a pipe, a batch job) a full line is printed every ``interval`` seconds, so a long run
    shows it is alive. The final evaluation reports the tokens evaluated the same way. Once
    the run has trained for ``warn_after`` seconds (or 50 steps), if the estimated time of the
    run times ``runs`` (the runs one process trains in turn) exceeds ``ETA_WARN_SECONDS``, one
    warning line says so (once per process).

    ``clock`` is ``time.perf_counter`` (replaceable for tests).
    """

    def __init__(self, name: str, steps: int, tty: bool, stream=None,
                 interval: float = PROGRESS_INTERVAL, clock=time.perf_counter,
                 warn_after: float = 2.0, prog: str = "", runs: int = 1) -> None:
        self.name, self.steps, self.tty, self.interval = name, steps, tty, interval
        self.stream = sys.stderr if stream is None else stream
        self.clock, self.warn_after, self.prog, self.runs = clock, warn_after, prog, runs
        self.t0 = clock()
        self.last_draw = self.t0
        self.step, self.loss = 0, float("nan")
        self.warned = False
        self.eval_text = ""
        self.t_end = None  # when the last step finished (the rate excludes the evaluation)

    def _elapsed(self) -> float:
        return (self.clock() if self.t_end is None else self.t_end) - self.t0

    def rate(self) -> float:
        dt = self._elapsed()
        return self.step / dt if dt > 0 else 0.0

    def eta(self) -> float:
        r = self.rate()
        return (self.steps - self.step) / r if r > 0 else float("inf")

    def _line(self) -> str:
        dt = self._elapsed()
        loss = format(self.loss, ".4g" if abs(self.loss) >= 1e4 else ".4f")
        line = (f"  {self.name:12s} step {self.step:>{len(str(self.steps))}d}/{self.steps}  "
                f"loss {loss}  {self.rate():6.1f} steps/s  {dt:6.1f} s")
        if self.eval_text:
            return line + "  " + self.eval_text
        if self.step < self.steps:
            line += f"  ETA {_fmt_seconds(self.eta())}"
        return line

    def _emit(self, force: bool = False) -> None:
        now = self.clock()
        due = (now - self.last_draw > 0.2) if self.tty else (now - self.last_draw >= self.interval)
        if not (due or force):
            return
        self.last_draw = now
        if self.tty:
            self.stream.write("\r" + self._padded(self._line()))
        else:
            self.stream.write(self._line() + "\n")
        self.stream.flush()

    def __call__(self, step: int, loss: float) -> None:
        self.step, self.loss = step, loss
        if step == self.steps:
            self.t_end = self.clock()
        if not self.warned and step < self.steps and (
                self.clock() - self.t0 >= self.warn_after or step >= 50):
            self.warned = True
            total = self.steps / self.rate() if self.rate() > 0 else float("inf")
            if total * self.runs > ETA_WARN_SECONDS and not _WARNED:
                _WARNED.append(True)  # once per process, not once per run
                study = (f", about {_fmt_seconds(total * self.runs)} for the study's "
                         f"{self.runs} runs in turn" if self.runs > 1 else "")
                self.stream.write(
                    f"{chr(13) + chr(10) if self.tty else ''}{self.prog or 'warning'}: warning: "
                    f"at {self.rate():.1f} steps/s, {self.name.strip()} needs about "
                    f"{_fmt_seconds(total)} for its {self.steps:,} steps{study} (Ctrl-C stops "
                    f"it, nothing written); ask for fewer --steps\n")
                self.stream.flush()
        self._emit(force=self.tty and step == self.steps)

    def evaluating(self, split: str, done: int, total: int) -> None:
        """Progress of the final evaluation: ``done`` of ``total`` target positions."""
        self.eval_text = f"evaluating {split} {done}/{total} tokens"
        self._emit()

    def _padded(self, line: str) -> str:
        """``line`` padded with spaces over a longer line drawn before it (terminal only)."""
        width, self.drawn = getattr(self, "drawn", 0), len(line)
        return line + " " * max(0, width - len(line))

    def close(self, note: str = "") -> None:
        self.eval_text = ""
        line = self._line() + (f"  {note}" if note else "")
        if self.tty:
            line = "\r" + self._padded(line)
        self.stream.write(line + "\n")
        self.stream.flush()


@dataclass
class JobSpec:
    """Everything one (variant, seed) run needs; picklable, so it can go to a worker process."""

    variant: Variant
    config: GPTConfig
    seed: int
    steps: int
    batch_size: int
    lr: float
    eval_every: int
    train_data: np.ndarray
    val_data: np.ndarray
    progress_name: str
    tty: bool = False
    keep_state: bool = False
    instrument: Optional[Callable[[Any, Variant, int], Any]] = None
    eval_tokens: Optional[int] = EVAL_TOKENS
    progress_interval: float = PROGRESS_INTERVAL
    prog: str = ""
    runs: int = 1


def _json_float(x: float):
    """A float for JSON: finite values as they are, NaN/inf as the strings "nan"/"inf"."""
    x = float(x)
    return x if math.isfinite(x) else str(x)


def run_job(spec: JobSpec) -> Dict[str, Any]:
    """Train one variant from one seed (the chapter's loop, ``gpt.train.train``).

    Returns the run's entry: ``name``, ``seed``, ``params``, ``status`` ("ok" or "diverged"),
    ``message``, ``diverged_at`` ({step, what, value} or None), ``steps_completed``,
    ``train_loss``/``val_loss`` (mean over the split's target positions, at most
    ``eval_tokens`` of them spread evenly over it, nats/token, None when diverged), the chapter's one-batch estimates, ``loss_curve`` and ``grad_norms`` (one per
    completed step), ``val_curve`` ([[step, val loss], ...] every ``eval_every`` steps and at
    the last step), ``seconds``, ``steps_per_second``, ``extra`` (the instrument's result),
    and, with ``keep_state``, ``_state`` (the trained parameters).
    """
    v = spec.variant
    model = GPT(spec.config, seed=spec.seed)
    if v.modify is not None:
        v.modify(model)
    rng = np.random.default_rng(spec.seed)
    progress = _Progress(spec.progress_name, spec.steps, spec.tty,
                         interval=spec.progress_interval, prog=spec.prog, runs=spec.runs)
    instrument = spec.instrument(model, v, spec.seed) if spec.instrument else None
    if instrument is not None:
        instrument(0, model)
    val_curve: List[List[float]] = []

    def on_step(step: int, loss: float) -> None:
        progress(step, loss)
        if step % spec.eval_every == 0 or step == spec.steps:
            val_curve.append([step, _json_float(evaluate(model, spec.val_data,
                                                         batch_size=spec.batch_size,
                                                         max_tokens=spec.eval_tokens))])
            if instrument is not None:
                instrument(step, model)

    entry: Dict[str, Any] = {"name": v.name, "seed": spec.seed, **v.labels,
                             "params": int(model.num_parameters()), "status": "ok",
                             "message": None, "diverged_at": None}
    try:
        result = gpt.train.train(model, spec.train_data, steps=spec.steps,
                                 batch_size=spec.batch_size, lr=spec.lr,
                                 weight_decay=WEIGHT_DECAY, clip=CLIP, rng=rng, on_step=on_step)
    except TrainingDiverged as e:
        progress.close(f"stopped: {e}")
        entry.update(status="diverged", message=str(e),
                     diverged_at={"step": e.step, "what": e.what, "value": _json_float(e.value)},
                     steps_completed=e.step - 1, train_loss=None, val_loss=None,
                     train_loss_one_batch=None, val_loss_one_batch=None,
                     loss_curve=[float(x) for x in e.losses],
                     grad_norms=[float(x) for x in e.grad_norms], val_curve=val_curve,
                     seconds=round(e.seconds, 3), steps_per_second=None, checkpoint=None,
                     extra=getattr(instrument, "result", lambda: None)())
        return entry
    t_eval = time.perf_counter()
    with np.errstate(all="ignore"):  # a blown-up model is reported below, not warned about
        train_loss = evaluate(model, spec.train_data, batch_size=spec.batch_size,
                              max_tokens=spec.eval_tokens,
                              on_batch=lambda d, n: progress.evaluating("train", d, n))
        val_loss = evaluate(model, spec.val_data, batch_size=spec.batch_size,
                            max_tokens=spec.eval_tokens,
                            on_batch=lambda d, n: progress.evaluating("val", d, n))
        eval_seconds = time.perf_counter() - t_eval
        progress.close(f"eval {eval_seconds:.1f} s" if eval_seconds >= 0.5 else "")
        # the chapter's final estimate: one batch of each split, continuing the training stream
        train_1b = estimate_loss(model, spec.train_data, rng, batch_size=spec.batch_size)
        val_1b = estimate_loss(model, spec.val_data, rng, batch_size=spec.batch_size)
    entry.update(steps_completed=spec.steps, train_loss=train_loss, val_loss=val_loss,
                 train_loss_one_batch=train_1b, val_loss_one_batch=val_1b,
                 loss_curve=[float(x) for x in result.losses],
                 grad_norms=[float(x) for x in result.grad_norms], val_curve=val_curve,
                 seconds=round(result.seconds, 3),
                 steps_per_second=round(spec.steps / result.seconds, 2)
                 if result.seconds > 0 else None,
                 checkpoint=None, extra=getattr(instrument, "result", lambda: None)(),
                 eval_seconds=round(eval_seconds, 3))
    for k in ("train_loss", "val_loss", "train_loss_one_batch", "val_loss_one_batch"):
        if not math.isfinite(entry[k]):
            entry[k] = None
    bad = next((x for x in (train_loss, val_loss) if not math.isfinite(x)), None)
    if bad is not None:  # every step was finite, but the last update broke the model
        what = "final loss (evaluated after the last update)"
        entry.update(status="diverged", message=f"{what} became {bad}",
                     diverged_at={"step": spec.steps, "what": what, "value": _json_float(bad)},
                     train_loss=None, val_loss=None)
    if spec.keep_state:
        entry["_state"] = model.state_dict()
    return entry


#: ``default_jobs`` trains in worker processes only when every run has at least this many
#: steps: starting a worker (spawn, imports, the job sent over) took 0.46 s (median of 5, load
#: about 3), some 25-40 steps of the tiny model, so below this the processes would cost more
#: than they save.
MIN_STEPS_FOR_PROCESSES = 100


def default_jobs(runs: int, steps: int, threads: Optional[int] = None) -> int:
    """``--jobs`` when none is given: the CPUs this process may run on (``os.sched_getaffinity``,
    else ``os.cpu_count()``) divided by the BLAS threads each process runs (``threads``; default
    ``experiments._threads.blas_threads()``, 1 when unset), at most ``runs``, at least 1; 1 when
    the runs are shorter than ``MIN_STEPS_FOR_PROCESSES`` steps.

    Measured on a 2-core machine (docs/performance.md, "Threads and jobs"), ``four_variants
    --tiny`` in 2 processes against 1: 0.59 of the wall time at a load of about 2, 0.84 on the
    shared machine, 0.92 with two busy-loop processes competing; 1.06-1.08 times the CPU time
    and twice the summed memory; the outputs identical. With ``--threads 2``, two processes of
    two threads each on the 2 cores took 25.8 s against 8.4-8.9 s for the default: hence the
    division.
    """
    if steps < MIN_STEPS_FOR_PROCESSES:
        return 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cpus = os.cpu_count() or 1
    if threads is None:
        threads = blas_threads() or 1
    return max(1, min(cpus // max(1, int(threads)), int(runs)))


def run_jobs(plan: Plan, jobs: int = 1,
             on_done: Optional[Callable[[Dict[str, Any]], None]] = None) -> List[Dict[str, Any]]:
    """Run every (variant, seed) job of ``plan``; returns the entries in ``plan.jobs()`` order.

    ``jobs == 1`` trains in this process; otherwise in ``jobs`` worker processes (forked where
    ``experiments._processes.start_method`` allows, else spawned; with SIGINT ignored: Ctrl-C reaches this process, which stops the workers). ``on_done(entry)`` is
    called as each job finishes (in completion order).

    Raises:
        KeyboardInterrupt: interrupted (workers are terminated).
        MemoryError: from a job.
    """
    args = plan.args
    tty = jobs == 1 and bool(getattr(sys.stderr, "isatty", lambda: False)())
    specs = []
    names = [v.name if len(plan.seeds) == 1 else f"{v.name} s{s}" for v, s in plan.jobs()]
    width = max([12] + [len(n) for n in names])  # the progress lines' steps line up
    for (v, s), name in zip(plan.jobs(), names):
        name = name.ljust(width)
        specs.append(JobSpec(v, plan.configs[v.name], s, plan.steps, args.batch_size, args.lr,
                             args.eval_every, plan.train_data, plan.val_data, name, tty,
                             bool(args.save_checkpoints), plan.study.instrument,
                             plan.eval_tokens, args.progress_interval, plan.study.prog,
                             -(-len(plan.jobs()) // max(1, min(jobs, len(plan.jobs()))))))
    results: List[Optional[Dict[str, Any]]] = [None] * len(specs)
    if jobs <= 1 or len(specs) == 1:
        for i, spec in enumerate(specs):
            results[i] = run_job(spec)
            if on_done:
                on_done(results[i])
        return results  # type: ignore[return-value]
    method = start_method()
    if method == "fork":
        flush_std_streams()
    pool = cf.ProcessPoolExecutor(max_workers=min(jobs, len(specs)),
                                  mp_context=multiprocessing.get_context(method),
                                  initializer=ignore_sigint)
    try:
        # The workers start inside submit. SIGINT is blocked meanwhile: they inherit the blocked
        # mask through fork and exec, so a Ctrl-C aimed at the terminal's process group never
        # interrupts a worker half-way through Python's start-up (a traceback from its imports);
        # this process takes the pending signal when the mask is restored and stops them.
        with sigint_blocked():
            futures = {pool.submit(run_job, spec): i for i, spec in enumerate(specs)}
        for fut in cf.as_completed(futures):
            results[futures[fut]] = fut.result()
            if on_done:
                on_done(results[futures[fut]])
    except BaseException:
        # Stop the workers with further Ctrl-C held off: a second SIGINT (a terminal's process
        # group, ``timeout -s INT``) arriving while the pool shuts down would otherwise end in a
        # traceback from the pool's threads.
        main_thread = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main_thread else None
        try:
            for proc in list(getattr(pool, "_processes", {}).values()):
                proc.terminate()
            pool.shutdown(wait=True, cancel_futures=True)
        finally:
            if main_thread:
                signal.signal(signal.SIGINT, previous)
        raise
    pool.shutdown()
    return results  # type: ignore[return-value]


# ---------------------------------------------------------------------------- the command




def run_study(study: Study, argv: Optional[Sequence[str]] = None) -> int:
    """Run a study command end to end; returns the exit status (see the module docstring)."""
    args = build_parser(study).parse_args(argv)
    try:
        plan = Plan(study, args)
    except UsageError as e:
        fail(study.prog, str(e))
    if study.prepare is not None:
        study = plan.study = study.prepare(plan)
    n_seeds = len(plan.seeds)
    seeds_txt = "" if n_seeds == 1 else f" x {n_seeds} seeds"
    sys.stderr.write(
        f"{study.name}: {len(study.variants)} variants{seeds_txt} x {plan.steps} steps, corpus "
        f"{plan.corpus_label} ({len(plan.text)} characters, vocab {plan.vocab_size}), "
        f"train/val {len(plan.train_data)}/{len(plan.val_data)} tokens, run {plan.run_id}\n")
    say = Printer()
    by_name = {v.name: v for v in study.variants}

    # One line per run on stdout, in the plan's order whatever order the workers finish in
    # (so --jobs N prints what --jobs 1 prints): a finished run waits for those before it.
    order = [(v.name, s) for v, s in plan.jobs()]
    finished: Dict[Tuple[str, int], Dict[str, Any]] = {}

    def on_done(e: Dict[str, Any]) -> None:
        finished[(e["name"], e["seed"])] = e
        while order and order[0] in finished:
            f = finished.pop(order.pop(0))
            say(_report.run_line(study, by_name[f["name"]], f, n_seeds))

    try:
        jobs = default_jobs(len(plan.jobs()), plan.steps) if args.jobs is None else args.jobs
        runs = run_jobs(plan, jobs, on_done)
    except KeyboardInterrupt:
        interrupted(study.prog)
        return EXIT_INTERRUPTED
    except MemoryError as e:
        fail(study.prog, f"out of memory: the model or the batch is too large for this machine "
                         f"({e})")
    report = _report.Report(plan, runs)

    out = plan.output_dir
    created = [p for p in (out, *out.parents) if not p.exists()]  # deepest first
    plot_note = None
    group = AtomicGroup()
    try:
        stale = plan.owned_files()  # before mkdir: a new folder has none
        out.mkdir(parents=True, exist_ok=True)
        with group:
            if args.save_checkpoints:
                for e in runs:
                    if e["status"] == "ok":
                        fname = plan.checkpoint_name(by_name[e["name"]], e["seed"])
                        model = GPT(plan.configs[e["name"]], seed=e["seed"])
                        model.load_state_dict(e["_state"])
                        save_checkpoint(model, group.stage(out / fname),
                                        tokenizer=plan.tokenizer, run_id=plan.run_id)
                        e["checkpoint"] = fname
            if not args.no_plots:
                plot_note = _plots.write_figures(report, group, out, processes=jobs)
            group.write_text(out / "curves.csv", _report.curves_csv(report))
            for fname, text in (study.extra_outputs(report) if study.extra_outputs else {}).items():
                group.write_text(out / fname, text)
            written = {d.name for d in group.destinations} | {"results.json",
                                                                     "run_log.txt"}
            report.files = sorted(written)
            report.removed = sorted(p.name for p in stale if p.name not in written)
            for p in stale:
                if p.name not in written:
                    group.remove(p)  # an earlier run's file of this study's own name
            group.write_text(out / "results.json", _report.results_json(report))
            group.write_text(out / "run_log.txt", _report.run_log(report))
    except KeyboardInterrupt:
        group.raise_if_committed(out)  # the files are in place: run_main says where
        remove_empty_dirs(created)
        interrupted(study.prog)
        return EXIT_INTERRUPTED
    except OSError as e:
        remove_empty_dirs(created)
        fail(study.prog, f"cannot write the outputs to {out}: {e.strerror or e}; nothing written")

    mark_outputs_written(str(out))
    if report.removed:
        sys.stderr.write(f"{study.name}: removed {len(report.removed)} file(s) of an earlier "
                         f"run: {', '.join(report.removed)}\n")
    for line in _report.stdout_lines(report):
        say(line)
    say(f"\nOutputs written to {out.resolve()}")
    if plot_note:
        sys.stderr.write(f"{study.name}: {plot_note}\n")
    diverged = sorted({e["name"] if n_seeds == 1 else f"{e['name']} (seed {e['seed']})"
                       for e in runs if e["status"] != "ok"})
    if diverged:
        sys.stderr.write(f"{study.prog}: {len(diverged)} run(s) diverged: "
                         f"{', '.join(diverged)}; see results.json\n")
        return EXIT_DIVERGED
    return EXIT_OK
