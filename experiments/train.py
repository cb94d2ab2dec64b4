"""Train one model on any text, as nanoGPT's ``train.py`` does: ``python -m experiments.train``.

    python -m experiments.train --preset shakespeare-cpu           # nanoGPT's CPU run
    python -m experiments.train --corpus pride --max-iters 5000 --norm rms --mlp swiglu
    python -m experiments.train --preset shakespeare-cpu --resume --max-iters 3000

The model options (sizes, ``--norm``, ``--mlp``, ``--pos``, ``--init``), the optimiser and the
schedule are those of the studies (``experiments.four_variants.add_model_options``; defaults:
the chapter's, constant learning rate). ``--preset shakespeare-cpu`` is nanoGPT's README
configuration for a CPU (4 layers, 4 heads, d_model 128, block 64, batch 12, 2000 iterations,
AdamW lr 1e-3 betas (0.9, 0.99), weight decay 0.1 on the 2-D weights, 100 warmup iterations
then a cosine to 1e-4, clip 1.0, GPT-2's initialisation, evaluation every 250 iterations on 20
batches) on Tiny Shakespeare; an option on the command line wins over the preset.

The loop is nanoGPT's: the learning rate of step ``it + 1`` is ``gpt.train.get_lr(it)``; at
step 0, every ``--eval-interval`` steps and at the last step, the loss is estimated on
``--eval-iters`` random batches of each split (nanoGPT's ``estimate_loss``; they come from a
generator of their own, so the evaluation does not change the training batches), printed as
nanoGPT prints it, and when the val estimate is the best so far the model is written to
``ckpt.npz`` with the optimizer's state, the generators' states and the history: ``--resume``
continues from there to ``--max-iters`` with the numbers of an uninterrupted run. At the end
the checkpoint's model is evaluated on the whole val split (every position once) and a sample
is printed.

Where the models differ from nanoGPT's: ours have biases in every Linear and LayerNorm (the
chapter's; nanoGPT's CPU run has ``bias=False``), and the GELU MLP uses the tanh approximation
(the chapter's and GPT-2's; nanoGPT's ``nn.GELU()`` is exact); nanoGPT's loop also makes one
last update after its last evaluation, which changes nothing it reports.

Writes into ``--output-dir``: ``ckpt.npz`` (during the run), then ``curves.csv`` (step, lr,
train batch loss; the estimates at the evaluation steps), ``loss.png`` (with matplotlib) and
``run_log.txt``; each complete or absent. Exit status: 0 trained; 1 the loss became NaN or
infinite (the files are written up to there); 2 bad input (one line); 130 Ctrl-C.
"""
import json
import math
import os
import signal
import time

import numpy as np

import gpt.train
from gpt import GPT
from gpt.checkpoint import load_checkpoint, load_training_state, save_checkpoint
from gpt.sample import generate

from experiments import _plots, cli
from experiments.four_variants import add_model_options, apply_preset, load_and_configure, \
    optimiser_setup

PROG = "python -m experiments.train"
MAX_ITERS = 1_000_000
CHECKPOINT = "ckpt.npz"
# options a resumed run cannot change (the model, its data and its initialisation)
FIXED_ON_RESUME = ("corpus", "seed", "init", "batch_size", "block_size", "n_layers", "n_heads",
                   "d_model", "norm", "mlp", "pos", "dtype")
# options not restored from the checkpoint (how this process runs, not what it computes)
NOT_RESTORED = ("resume", "output_dir", "threads", "progress_interval", "no_plots")


def build_parser():
    """The command's options (``--help`` lists them with their defaults)."""
    p = cli.ArgumentParser(prog=PROG, description="Train one GPT on a text, as nanoGPT's "
                           "train.py: schedule, evaluation, best-val checkpoint, --resume.")
    p.add_argument("--max-iters", type=cli.bounded_int(1, MAX_ITERS, "iterations"),
                   default=200, metavar="N", help="training steps")
    p.add_argument("--eval-interval", type=cli.positive_int, default=50, metavar="K",
                   help="estimate the losses every K steps (and at steps 0 and the last)")
    p.add_argument("--eval-iters", type=cli.positive_int, default=20, metavar="N",
                   help="random batches of each split per estimate")
    p.add_argument("--output-dir", type=cli.path_arg, default="outputs/train", metavar="DIR",
                   help="where the files go")
    p.add_argument("--resume", action="store_true", help=f"continue the run whose {CHECKPOINT} "
                   "is in --output-dir, with its options (those given here win)")
    p.add_argument("--sample-chars", type=cli.nonnegative_int, default=200, metavar="N",
                   help="characters sampled from the checkpoint at the end")
    p.add_argument("--progress-interval", type=cli.positive_float, default=10.0, metavar="S",
                   help="seconds between progress lines on stderr")
    p.add_argument("--no-plots", action="store_true", help="do not draw loss.png")
    cli.add_threads_option(p)
    add_model_options(p)
    return p


def run(argv=None):
    """Train one model as the options say, in a spawned worker process (``cli.run_in_worker``:
    its NumPy reads the BLAS threads ``cli.main`` set); returns the exit status.

    Args:
        argv (list[str] | None): the command's arguments (default ``sys.argv[1:]``).
    Returns:
        int: ``cli.EXIT_OK``, or ``cli.EXIT_DIVERGED`` when the loss became NaN or infinite.
    Raises:
        cli.UsageError: bad options, an unreadable corpus, no checkpoint to resume, an option
            a resumed run cannot change, an output folder that cannot be written.
    """
    args, saved = parse_args(argv)
    return cli.run_in_worker(train_model, args, saved)


def parse_args(argv):
    """``(args, saved)``: the options (the command line over the checkpoint's with
    ``--resume``, over ``--preset``, over the defaults) and the checkpoint's training state
    (None without ``--resume``), every option checked.

    Raises:
        cli.UsageError: as ``run``.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    given = cli.given_options(parser, argv)
    apply_preset(args, given)
    out = cli.check_output_dir(args.output_dir, (CHECKPOINT, "curves.csv", "loss.png",
                                                 "run_log.txt"))
    saved = None
    if args.resume:
        try:
            optimizer_state, saved = load_training_state(out / CHECKPOINT)
        except (OSError, ValueError) as e:
            raise cli.UsageError(f"--resume: {e}") from None
        if saved is None or optimizer_state is None:
            raise cli.UsageError(f"--resume: {out / CHECKPOINT} holds no training state")
        for k, v in saved["options"].items():
            if k in FIXED_ON_RESUME and k in given and _plain(getattr(args, k)) != v:
                raise cli.UsageError(f"--resume: the run was trained with --{k.replace('_', '-')}"
                                     f" {v}, it cannot continue with {getattr(args, k)}")
            if k not in given and k not in NOT_RESTORED:
                setattr(args, k, v)
        if saved["step"] >= args.max_iters:
            raise cli.UsageError(f"--resume: the checkpoint is at step {saved['step']}, "
                                 f"--max-iters {args.max_iters}: give a larger --max-iters")
    optimiser_setup(args, args.max_iters)  # its checks
    return args, saved


def train_model(args, saved=None):
    """The run itself (in the worker): data, model, loop, report; returns the exit status.
    While it runs, the parent's SIGTERM (its Ctrl-C) raises KeyboardInterrupt, so that a
    checkpoint being written is removed (``cli.write_outputs``)."""
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        return _train(args, saved)
    except KeyboardInterrupt:  # the parent's SIGTERM, the files cleaned up: end as it asked
        os._exit(128 + signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _train(args, saved):
    out = args.output_dir
    make_optimizer, lr_at = optimiser_setup(args, args.max_iters)

    text, tokenizer, train_data, val_data, (config,) = load_and_configure(args)
    model = GPT(config, seed=args.seed, init=args.init)
    optimizer = make_optimizer(model)
    rng = np.random.default_rng(args.seed)             # the training batches
    eval_rng = np.random.default_rng([args.seed, 1])   # the estimates' batches
    history = {"step": [], "lr": [], "loss": [], "evals": []}   # evals: [step, train, val]
    start, best = 0, None   # best: (step, val estimate, state_dict)
    if saved is not None:
        model.load_state_dict(load_checkpoint(out / CHECKPOINT).state_dict())
        optimizer.load_state_dict(load_training_state(out / CHECKPOINT)[0])
        rng.bit_generator.state = saved["rng"]
        eval_rng.bit_generator.state = saved["eval_rng"]
        history, start = saved["history"], saved["step"]
        best = (start, saved["best_val"], model.state_dict())
    options = {k: _plain(v) for k, v in vars(args).items()}
    lines = [f"# {PROG} run log", f"options: {json.dumps(options, sort_keys=True)}",
             f"corpus: {args.corpus or 'built-in'} ({len(text)} characters, vocab "
             f"{tokenizer.vocab_size}), train/val {len(train_data)}/{len(val_data)} tokens",
             f"model: {model.num_parameters()} parameters, init {args.init}"]

    def say(line):
        print(line, flush=True)
        lines.append(line)

    for line in lines[2:]:
        cli.progress(f"train: {line}")
    if start:   # the log keeps the estimates of the run so far
        lines += [f"step {s}: train loss {tr:.4f}, val loss {va:.4f}" for s, tr, va in
                  history["evals"]]
        say(f"resuming at step {start} (best val {best[1]:.4f}) to step {args.max_iters}")

    # ------------------------------------------------------------------ loop
    def estimate(step):
        losses = [gpt.train.estimate_loss(model, split, eval_rng, batch_size=args.batch_size,
                                          eval_iters=args.eval_iters)
                  for split in (train_data, val_data)]
        history["evals"].append([step, *losses])
        say(f"step {step}: train loss {losses[0]:.4f}, val loss {losses[1]:.4f}")
        return losses[1]

    def checkpoint(step, val):
        nonlocal best
        best = (step, val, model.state_dict())
        state = {"step": step, "best_val": val, "options": options, "history": history,
                 "rng": rng.bit_generator.state, "eval_rng": eval_rng.bit_generator.state}
        cli.write_outputs(out, {CHECKPOINT: lambda path: save_checkpoint(
            model, path, tokenizer=tokenizer, optimizer=optimizer, train_state=state)})

    t0 = last = time.perf_counter()

    def on_step(step, loss):
        nonlocal last
        history["step"].append(step)
        history["lr"].append(optimizer.param_groups[0]["lr"])
        history["loss"].append(loss)
        now = time.perf_counter()
        if now - last >= args.progress_interval or step == args.max_iters:
            last, rate = now, (step - start) / (now - t0)
            eta = f"  ETA {(args.max_iters - step) / rate:.0f} s" if step < args.max_iters else ""
            cli.progress(f"  step {step:>{len(str(args.max_iters))}}/{args.max_iters}  loss "
                         f"{loss:.4f}  {rate:6.1f} steps/s  {now - t0:6.1f} s{eta}")
        if step % args.eval_interval == 0 or step == args.max_iters:
            val = estimate(step)
            if best is None or val < best[1]:
                checkpoint(step, val)

    if start == 0:
        estimate(0)
    status = cli.EXIT_OK
    try:
        gpt.train.train(model, train_data, steps=args.max_iters - start, start=start,
                        batch_size=args.batch_size, clip=args.grad_clip or None, rng=rng,
                        on_step=on_step, optimizer=optimizer, lr_at=lr_at)
    except gpt.train.TrainingDiverged as e:
        say(f"stopped: {e}")
        status = cli.EXIT_DIVERGED
    seconds = time.perf_counter() - t0

    # ------------------------------------------------------------------ report
    steps_run = len(history["step"]) - start
    say(f"{steps_run} steps in {seconds:.1f} s ({1e3 * seconds / max(1, steps_run):.1f} ms a "
        f"step, evaluations included)")
    if best is not None:
        model.load_state_dict(best[2])
        val = gpt.train.evaluate(model, val_data, batch_size=64)
        say(f"checkpoint {out / CHECKPOINT}: step {best[0]}, val loss {best[1]:.4f} on "
            f"{args.eval_iters} batches, {val:.4f} over the whole val split "
            f"({len(val_data) - 1} positions)")
        if args.sample_chars:
            idx = generate(model, tokenizer.encode("\n")[None], args.sample_chars,
                           temperature=0.8, top_k=200, rng=np.random.default_rng(args.seed))
            say(f"sample (temperature 0.8):\n{tokenizer.decode(idx[0, 1:])}")
    files = {"curves.csv": curves_csv(history)}
    if not args.no_plots:
        note = loss_png(history, math.log(tokenizer.vocab_size), files,
                        f"{args.corpus or 'built-in corpus'}, {model.num_parameters():,} "
                        f"parameters, init {args.init}")
        if note:
            cli.progress(f"train: {note}")
    files["run_log.txt"] = "\n".join(lines) + "\n"
    cli.write_outputs(out, files)
    cli.progress(f"train: outputs written to {out.resolve()}")
    return status


def _plain(value):
    """An option's value as JSON stores it (a path as its string)."""
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


def curves_csv(history):
    """curves.csv: one row per step (lr, the training batch's loss), the estimates on the
    evaluation steps' rows (step 0 has only them)."""
    evals = {s: (tr, va) for s, tr, va in history["evals"]}
    rows = ["step,lr,train_batch_loss,train_loss_estimate,val_loss_estimate"]
    if 0 in evals:
        rows.append(f"0,,,{evals[0][0]!r},{evals[0][1]!r}")
    for s, lr, loss in zip(history["step"], history["lr"], history["loss"]):
        e = evals.get(s)
        rows.append(f"{s},{lr!r},{loss!r}," + (f"{e[0]!r},{e[1]!r}" if e else ","))
    return "\n".join(rows) + "\n"


def loss_png(history, uniform, files, title):
    """Add ``loss.png`` to ``files``: the training batch loss per step, the estimates, the
    uniform baseline, and the learning rate beside; returns the install hint without matplotlib."""
    if not _plots.available():
        return _plots.INSTALL_HINT

    def draw(path):
        fig, ax = _plots.subplots(figsize=(8.0, 4.5))
        ax.plot(history["step"], history["loss"], lw=0.5, alpha=0.5, color="tab:blue",
                label="train batch")
        ev = list(zip(*history["evals"])) or [[], [], []]
        ax.plot(ev[0], ev[1], "o-", ms=3, color="tab:blue", label="train (estimate)")
        ax.plot(ev[0], ev[2], "o-", ms=3, color="tab:orange", label="val (estimate)")
        ax.axhline(uniform, color="grey", lw=0.8, ls=":", label=f"uniform ln V = {uniform:.2f}")
        finite = [x for x in history["loss"] + list(ev[2]) if x == x and abs(x) != float("inf")]
        if finite:
            ax.set_ylim(max(0.0, min(finite) - 0.1), max(uniform * 1.15, min(finite) + 0.5))
        ax.set_xlabel("step")
        ax.set_ylabel("loss (nats/token)")
        ax.grid(alpha=0.3)
        lr_ax = ax.twinx()
        lr_ax.plot(history["step"], history["lr"], lw=1.0, ls="--", color="grey")
        lr_ax.set_ylabel("learning rate (dashed)")
        lr_ax.set_ylim(0, max(history["lr"], default=1.0) * 1.05)
        ax.legend(fontsize=8, loc="upper right")
        top = ax.get_ylim()[1]
        above = " (the first steps are above the axis)" if max(finite, default=0) > top else ""
        ax.set_title(f"{title}\nloss per step; estimates on random batches of each split"
                     f"{above}", fontsize=9)
        _plots.save(fig, path)

    files["loss.png"] = draw
    return None


if __name__ == "__main__":
    cli.main(PROG, run)
