"""The four-variant run of the chapter "The Details That Matter", on minigrad.

Trains a tiny character-level GPT in four configurations, {LayerNorm, RMSNorm} x {GELU MLP,
SwiGLU MLP}, in the seed's order (ln+gelu, rms+gelu, ln+swiglu, rms+swiglu), with the seed's
hyperparameters: batch 32, block 32, 2 layers, 4 heads, d_model 64, AdamW lr 3e-3 (PyTorch
defaults otherwise, weight_decay 0.01), gradient clipping at norm 1.0, 90/10 train/val split.
Each variant starts from the same seed, for its initialisation and for its batch stream, as the
seed's ``train_variant`` does.

Usage::

    python -m experiments.four_variants --tiny      # 200 steps per variant
    python -m experiments.four_variants --full      # 2000 steps per variant
    python -m experiments.four_variants --steps 500 --seed 1 --corpus my.txt --output-dir out/

Prints the seed's table (norm, mlp, params, train, val) and the uniform baseline ln(vocab_size)
on stdout, and one progress line per variant on stderr (steps/s, current loss). The train and
val columns are mean losses over every position of each split (fixed windows, deterministic);
the seed's one-random-batch estimates are recorded beside them in results.json.

Writes to ``--output-dir`` (default ``./outputs/four_variants``), all files as one atomic step
(every file is staged beside its destination and moved into place only when all are written):
``run_log.txt`` (the seed's layout), ``results.json`` (config, versions, and per variant: params,
final losses, one-batch estimates, loss curve, seconds, status) and, with ``--save-checkpoints``,
``<norm>_<mlp>.npz`` (``gpt.load_checkpoint`` rebuilds the model).

Threads: one BLAS thread unless ``--threads N`` or ``OPENBLAS_NUM_THREADS`` says otherwise (on a
2-core machine shared with other processes the BLAS default of a thread per core was several
times slower; docs/performance.md, "BLAS threads").

Exit status: 0 when every variant trained; 1 when a variant's loss became NaN or infinite (that
variant stops with a message naming the step, the others still run, and all outputs are
written); 2 on bad input or when the outputs cannot be written or the model does not fit in
memory (one line on stderr naming the problem, nothing written); 130 when interrupted (nothing
written). The table is printed after the files are written; a closed stdout (``| head``) does
not stop the run.
"""
from __future__ import annotations

import hashlib
import json
import os
import math
import platform
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

import gpt.train
from gpt import GPT, GPTConfig
from gpt.atomic import AtomicGroup
from gpt.checkpoint import save_checkpoint
from gpt.data import CharTokenizer, check_split_length, eval_windows, load_corpus, train_val_split
from gpt.train import TrainingDiverged, estimate_loss, evaluate

from experiments._threads import add_threads_option
from experiments._cli import (
    ArgumentParser,
    Printer,
    UsageError,
    path_arg,
    check_output_dir,
    fail,
    nonnegative_int,
    positive_float,
    positive_int,
)

PROG = "python -m experiments.four_variants"
VARIANTS = (("ln", "gelu"), ("rms", "gelu"), ("ln", "swiglu"), ("rms", "swiglu"))
TINY_STEPS = 200
FULL_STEPS = 2000
DEFAULT_OUTPUT_DIR = Path("outputs") / "four_variants"
TRAIN_FRACTION = 0.9
WEIGHT_DECAY = 0.01
CLIP = 1.0

EXIT_OK, EXIT_DIVERGED, EXIT_INTERRUPTED = 0, 1, 130


def build_parser() -> ArgumentParser:
    """The command's argument parser (one-line errors, exit status 2)."""
    p = ArgumentParser(
        prog=PROG,
        description="Train a tiny GPT four ways, {LayerNorm, RMSNorm} x {GELU, SwiGLU}, and "
                    "compare their losses (the seed's run, on minigrad).",
        epilog="Exit status: 0 all variants trained; 1 a variant diverged (NaN/inf loss; results "
               "still written); 2 bad input (nothing written); 130 interrupted.",
    )
    length = p.add_mutually_exclusive_group()
    length.add_argument("--tiny", action="store_true",
                        help=f"{TINY_STEPS} steps per variant (the default)")
    length.add_argument("--full", action="store_true", help=f"{FULL_STEPS} steps per variant")
    p.add_argument("--steps", type=positive_int, default=None, metavar="N",
                   help="steps per variant (overrides --tiny/--full)")
    p.add_argument("--seed", type=nonnegative_int, default=0,
                   help="seed of each variant's initialisation and batches (default 0)")
    p.add_argument("--corpus", type=path_arg, default=None, metavar="PATH",
                   help="a UTF-8 text file (default: the built-in 48-character corpus)")
    p.add_argument("--output-dir", type=path_arg, default=DEFAULT_OUTPUT_DIR, metavar="DIR",
                   help=f"where to write run_log.txt, results.json (default {DEFAULT_OUTPUT_DIR})")
    p.add_argument("--save-checkpoints", action="store_true",
                   help="also write each trained model as <norm>_<mlp>.npz")
    g = p.add_argument_group("model and optimiser (defaults are the seed's)")
    g.add_argument("--batch-size", type=positive_int, default=32)
    g.add_argument("--block-size", type=positive_int, default=32)
    g.add_argument("--n-layers", type=positive_int, default=2)
    g.add_argument("--n-heads", type=positive_int, default=4)
    g.add_argument("--d-model", type=positive_int, default=64)
    g.add_argument("--pos", choices=("learned", "rope"), default="learned",
                   help="position encoding (default learned, as the seed)")
    g.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                   help="dtype of the weights and the computation (default float32)")
    g.add_argument("--lr", type=positive_float, default=3e-3, help="AdamW learning rate (default 3e-3, as the seed)")
    add_threads_option(p)
    return p


class Plan:
    """Everything validated before training: arguments, corpus, splits, configs, output dir."""

    def __init__(self, args) -> None:
        self.args = args
        self.steps = args.steps if args.steps is not None else (FULL_STEPS if args.full
                                                               else TINY_STEPS)
        try:
            self.text = load_corpus(args.corpus)
        except (FileNotFoundError, IsADirectoryError, ValueError) as e:
            raise UsageError(str(e)) from None
        except OSError as e:  # e.g. permission denied
            raise UsageError(f"cannot read corpus {args.corpus}: {e.strerror or e}") from None
        self.corpus_label = "built-in" if args.corpus is None else str(args.corpus)
        corpus_name = "the built-in corpus" if args.corpus is None else f"corpus {args.corpus}"
        self.tokenizer = CharTokenizer(self.text)
        self.vocab_size = self.tokenizer.vocab_size
        data = self.tokenizer.encode(self.text)
        self.train_data, self.val_data = train_val_split(data, TRAIN_FRACTION)
        for name, split in (("training split", self.train_data),
                            ("validation split", self.val_data)):
            try:
                check_split_length(split, args.block_size, name)
            except ValueError as e:
                raise UsageError(f"{corpus_name} is too short: {e}") from None
        self.configs = {}
        for norm, mlp in VARIANTS:
            try:
                self.configs[(norm, mlp)] = GPTConfig(
                    vocab_size=self.vocab_size, block_size=args.block_size,
                    n_layers=args.n_layers, n_heads=args.n_heads, d_model=args.d_model,
                    norm=norm, mlp=mlp, pos=args.pos, dtype=args.dtype)
            except (TypeError, ValueError) as e:
                raise UsageError(f"invalid model configuration: {e}") from None
        need = max(_memory_lower_bound(c, args.batch_size) for c in self.configs.values())
        have = _physical_memory()
        if have and need > have:
            raise UsageError(
                f"the model and batch need at least {need / 2**30:.1f} GiB of memory to train "
                f"(weights, gradients, AdamW state, activations), more than this machine's "
                f"{have / 2**30:.1f} GiB; reduce --d-model, --n-layers or --batch-size")
        self.output_dir = check_output_dir(args.output_dir)
        names = ["results.json", "run_log.txt"]
        if args.save_checkpoints:
            names += [f"{norm}_{mlp}.npz" for norm, mlp in VARIANTS]
        for name in names:
            if (self.output_dir / name).is_dir():
                raise UsageError(f"cannot write {self.output_dir / name}: it is a directory")


def _fmt_loss(x: Optional[float]) -> str:
    return f"{x:>8.4f}" if x is not None else f"{'-':>8s}"


def table_header() -> str:
    """The seed's table header line."""
    return f"{'norm':6s}  {'mlp':10s}  {'params':>8s}  {'train':>8s}  {'val':>8s}"


def table_row(r: Dict[str, Any]) -> str:
    """One row of the seed's table; a diverged variant shows where it stopped."""
    row = f"{r['norm']:6s}  {r['mlp']:10s}  {r['params']:>8d}  "
    if r["status"] != "ok":
        return row + f"diverged: {r['message']}"
    return row + f"{_fmt_loss(r['train_loss'])}  {_fmt_loss(r['val_loss'])}"


class _Progress:
    """One progress line per variant on stderr: refreshed in place on a terminal, else printed
    once when the variant ends."""

    def __init__(self, name: str, steps: int, stream=sys.stderr) -> None:
        self.name, self.steps, self.stream = name, steps, stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.t0 = time.perf_counter()
        self.last_draw = 0.0
        self.step, self.loss = 0, float("nan")

    def _line(self) -> str:
        dt = time.perf_counter() - self.t0
        rate = self.step / dt if dt > 0 else 0.0
        return (f"  {self.name:12s} step {self.step:>{len(str(self.steps))}d}/{self.steps}  "
                f"loss {self.loss:.4f}  {rate:6.1f} steps/s  {dt:6.1f} s")

    def __call__(self, step: int, loss: float) -> None:
        self.step, self.loss = step, loss
        now = time.perf_counter()
        if self.tty and (now - self.last_draw > 0.2 or step == self.steps):
            self.last_draw = now
            self.stream.write("\r" + self._line())
            self.stream.flush()

    def close(self, note: str = "") -> None:
        line = self._line() + (f"  {note}" if note else "")
        self.stream.write(("\r" if self.tty else "") + line + "\n")
        self.stream.flush()


def run_variant(plan: Plan, norm: str, mlp: str) -> Dict[str, Any]:
    """Train one variant from the plan's seed; returns its results entry (and keeps the model)."""
    args = plan.args
    config = plan.configs[(norm, mlp)]
    model = GPT(config, seed=args.seed)
    rng = np.random.default_rng(args.seed)
    name = f"{norm}+{mlp}"
    progress = _Progress(name, plan.steps)
    entry: Dict[str, Any] = {
        "name": name, "norm": norm, "mlp": mlp, "params": int(model.num_parameters()),
        "status": "ok", "message": None,
    }
    try:
        result = gpt.train.train(model, plan.train_data, steps=plan.steps,
                                 batch_size=args.batch_size, lr=args.lr,
                                 weight_decay=WEIGHT_DECAY, clip=CLIP, rng=rng,
                                 on_step=progress)
    except TrainingDiverged as e:
        progress.close(f"stopped: {e}")
        entry.update(status="diverged", message=str(e), steps_completed=e.step - 1,
                     train_loss=None, val_loss=None, train_loss_one_batch=None,
                     val_loss_one_batch=None, loss_curve=e.losses,
                     seconds=round(e.seconds, 3), steps_per_second=None, checkpoint=None)
        return entry
    progress.close()
    train_loss = evaluate(model, plan.train_data, batch_size=args.batch_size)
    val_loss = evaluate(model, plan.val_data, batch_size=args.batch_size)
    # the seed's final estimate: one batch of each split, continuing the training stream
    train_1b = estimate_loss(model, plan.train_data, rng, batch_size=args.batch_size)
    val_1b = estimate_loss(model, plan.val_data, rng, batch_size=args.batch_size)
    entry.update(steps_completed=plan.steps, train_loss=train_loss, val_loss=val_loss,
                 train_loss_one_batch=train_1b, val_loss_one_batch=val_1b,
                 loss_curve=result.losses, seconds=round(result.seconds, 3),
                 steps_per_second=round(plan.steps / result.seconds, 2)
                 if result.seconds > 0 else None,
                 checkpoint=None)
    entry["_model"] = model
    return entry


def _finite_or_none(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _versions() -> Dict[str, str]:
    try:
        from importlib.metadata import version
        pkg = version("minigrad-gpt")
    except Exception:  # not installed: fall back to the engine's version string
        import minigrad
        pkg = getattr(minigrad, "__version__", "unknown")
    return {"minigrad-gpt": pkg, "python": platform.python_version(),
            "numpy": np.__version__, "platform": platform.platform()}


def build_results(plan: Plan, entries: List[Dict[str, Any]], baseline: float) -> Dict[str, Any]:
    """The results.json document."""
    args = plan.args
    ref = plan.configs[VARIANTS[0]].to_dict()
    model_cfg = {k: v for k, v in ref.items() if k not in ("norm", "mlp")}
    variants = []
    for e in entries:
        d = {k: v for k, v in e.items() if not k.startswith("_")}
        d["loss_curve"] = [_finite_or_none(float(v)) for v in d["loss_curve"]]
        for k in ("train_loss", "val_loss", "train_loss_one_batch", "val_loss_one_batch"):
            if d.get(k) is not None:
                d[k] = _finite_or_none(float(d[k]))
        variants.append(d)
    return {
        "experiment": "four_variants",
        "status": "ok" if all(e["status"] == "ok" for e in entries) else "diverged",
        "config": {
            "steps": plan.steps, "seed": args.seed, "batch_size": args.batch_size,
            "optimizer": {"name": "AdamW", "lr": args.lr, "betas": [0.9, 0.999], "eps": 1e-8,
                          "weight_decay": WEIGHT_DECAY},
            "clip_grad_norm": CLIP,
            "model": model_cfg,
            "variants": [f"{n}+{m}" for n, m in VARIANTS],
            "corpus": {
                "path": None if args.corpus is None else str(args.corpus),
                "name": "built-in: Jane Austen, Pride and Prejudice (1813), opening of "
                        "chapter 1, Project Gutenberg eBook #1342" if args.corpus is None
                        else Path(args.corpus).name,
                "sha256": hashlib.sha256(plan.text.encode("utf-8")).hexdigest(),
                "characters": len(plan.text), "vocab_size": plan.vocab_size,
                "train_fraction": TRAIN_FRACTION,
                "train_tokens": int(len(plan.train_data)), "val_tokens": int(len(plan.val_data)),
            },
            "evaluation": {
                "train_loss/val_loss": "mean cross-entropy (nats/token) over every target "
                                       "position of the split, fixed windows of block_size",
                "train_windows": int(eval_windows(plan.train_data, args.block_size)[0].shape[0]),
                "val_windows": int(eval_windows(plan.val_data, args.block_size)[0].shape[0]),
                "train_loss_one_batch/val_loss_one_batch":
                    "the seed's estimate: loss on one random batch of batch_size windows, "
                    "drawn after training from the same generator",
            },
        },
        "uniform_baseline": baseline,
        "versions": _versions(),
        "variants": variants,
    }


def build_run_log(plan: Plan, entries: List[Dict[str, Any]], baseline: float) -> str:
    """run_log.txt in the seed's layout, with a short note on the columns at the end."""
    lines = [
        "# four_variants run log",
        f"steps: {plan.steps}",
        f"uniform baseline: {baseline:.4f}",
        "",
        table_header(),
    ]
    lines += [table_row(e) for e in entries]
    lines += [
        "",
        "Lessons:",
        "- RMSNorm: same regularization effect as LayerNorm, ~half the FLOPs.",
        "- SwiGLU: gating learns which features to pass through; modest extra",
        "  params (we scaled hidden_mult=8/3 to roughly match GELU MLP size).",
        "",
        "Notes:",
        f"- seed {plan.args.seed}, corpus {plan.corpus_label} ({len(plan.text)} characters, "
        f"vocab {plan.vocab_size}).",
        "- train/val: mean loss over every position of each split (deterministic);",
        "  the seed's one-random-batch estimates are in results.json.",
    ]
    return "\n".join(lines) + "\n"


def _memory_lower_bound(config: GPTConfig, batch_size: int) -> int:
    """A lower bound, in bytes, of the memory one training step of ``config`` holds.

    Counts only what must exist at once: weights, gradients and AdamW's two moments
    (4 x parameters, with the MLP and attention matrices as 12 C^2 a layer), the activations
    each layer keeps for backward (at least 18 C values per token: the norm outputs, q, k, v,
    the attention output and the MLP's hidden activations; plus the T x T attention
    probabilities per head) and the logits with their gradient. The true peak is higher, so a
    configuration over the machine's memory is sure to fail.
    """
    item = np.dtype(config.dtype).itemsize
    B, T, C = batch_size, config.block_size, config.d_model
    params = config.vocab_size * C + config.n_layers * 12 * C * C
    acts = config.n_layers * B * T * (18 * C + config.n_heads * T) + 2 * B * T * config.vocab_size
    return (4 * params + acts) * item


def _physical_memory() -> Optional[int]:
    """Bytes of physical memory, or None where the platform does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def _remove_empty(dirs) -> None:
    """Remove the directories this run created (deepest first) if they are still empty."""
    for d in dirs:
        try:
            d.rmdir()
        except OSError:
            return


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command; returns the exit status (see the module docstring)."""
    args = build_parser().parse_args(argv)
    try:
        plan = Plan(args)
    except UsageError as e:
        fail(PROG, str(e))
    baseline = math.log(plan.vocab_size)
    sys.stderr.write(
        f"four_variants: {len(VARIANTS)} variants x {plan.steps} steps, corpus "
        f"{plan.corpus_label} ({len(plan.text)} characters, vocab {plan.vocab_size}), "
        f"train/val {len(plan.train_data)}/{len(plan.val_data)} tokens\n")
    say = Printer()
    try:
        entries = []
        for norm, mlp in VARIANTS:
            e = run_variant(plan, norm, mlp)
            entries.append(e)
            if e["status"] == "ok":
                say(f"  {norm:5s} + {mlp:8s}  params={e['params']:>6d}  "
                    f"train={e['train_loss']:.4f}  val={e['val_loss']:.4f}")
            else:
                say(f"  {norm:5s} + {mlp:8s}  params={e['params']:>6d}  "
                    f"diverged: {e['message']}")
    except KeyboardInterrupt:
        sys.stderr.write(f"\n{PROG}: interrupted; nothing written\n")
        return EXIT_INTERRUPTED
    except MemoryError as e:
        fail(PROG, f"out of memory: the model or the batch is too large for this machine ({e})")

    # Write every output file as one step (all or none), then print the table.
    out = plan.output_dir
    created = [p for p in (out, *out.parents) if not p.exists()]  # deepest first
    try:
        out.mkdir(parents=True, exist_ok=True)
        with AtomicGroup() as group:
            if args.save_checkpoints:
                for e in entries:
                    if e["status"] == "ok":
                        fname = f"{e['norm']}_{e['mlp']}.npz"
                        save_checkpoint(e["_model"], group.stage(out / fname))
                        e["checkpoint"] = fname
            results = build_results(plan, entries, baseline)
            group.write_text(out / "results.json",
                             json.dumps(results, indent=2, allow_nan=False) + "\n")
            group.write_text(out / "run_log.txt", build_run_log(plan, entries, baseline))
    except KeyboardInterrupt:
        _remove_empty(created)
        sys.stderr.write(f"\n{PROG}: interrupted; nothing written\n")
        return EXIT_INTERRUPTED
    except OSError as e:
        _remove_empty(created)
        fail(PROG, f"cannot write the outputs to {out}: {e.strerror or e}; nothing written")

    say(f"\nUniform baseline: {baseline:.4f}")
    say(f"\n{table_header()}")
    say("-" * 50)
    for e in entries:
        say(table_row(e))
    say(f"\nOutputs written to {out.resolve()}")
    diverged = [e["name"] for e in entries if e["status"] != "ok"]
    if diverged:
        sys.stderr.write(f"{PROG}: {len(diverged)} variant(s) diverged: "
                         f"{', '.join(diverged)}; see results.json\n")
        return EXIT_DIVERGED
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
