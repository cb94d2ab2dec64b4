"""Train one model on any text, as nanoGPT's ``train.py`` does: ``python -m experiments.train_gpt``.

    python -m experiments.train_gpt --preset shakespeare-cpu           # nanoGPT's CPU run
    python -m experiments.train_gpt --corpus pride --max-iters 5000 --norm rms --mlp swiglu
    python -m experiments.train_gpt --preset shakespeare-cpu --resume --max-iters 3000

The model, the optimiser and the schedule are the studies' options (``experiments.options``:
the chapter's defaults, a constant learning rate; ``--preset shakespeare-cpu`` is nanoGPT's CPU
configuration on Tiny Shakespeare, its model included: ``bias=False``). The loop is nanoGPT's:
the learning rate of step ``it + 1`` is ``gpt.train.get_lr(it)``; at step 0, every
``--eval-interval`` steps and at the last, the loss is estimated on ``--eval-iters`` random
batches of each split (from a generator of their own, so the training batches do not change),
printed as nanoGPT prints it, and when the val estimate is the best so far the model goes to
``ckpt.npz`` with the optimizer's state, the generators' states and the history: ``--resume``
continues from there to ``--max-iters`` with the numbers of an uninterrupted run. At the end
the checkpoint's model is evaluated on the whole val split and a sample is printed.

Where the model differs from nanoGPT's: the GELU MLP uses the tanh approximation (the
chapter's and GPT-2's; nanoGPT's ``nn.GELU()`` is exact); nanoGPT's loop also makes one last
update after its last evaluation, which changes nothing it reports.

Writes into ``--output-dir``: ``ckpt.npz`` (during the run), then ``curves.csv`` (step, lr,
train batch loss; the estimates at the evaluation steps), ``loss.png`` (with matplotlib) and
``run_log.txt``; each complete or absent. Exit status: 0 trained; 1 the loss became NaN or
infinite (the files are written up to there); 2 bad input; 130 Ctrl-C.
"""
import json
import math
import sys
import time

from experiments import cli

PROG = "python -m experiments.train_gpt"
with cli.errors(PROG):   # Ctrl-C while NumPy loads: one line
    import numpy as np

    import gpt.train
    from gpt import GPT
    from gpt.checkpoint import load_checkpoint, load_training_state, save_checkpoint
    from gpt.sample import generate

    from experiments import figures, options

CHECKPOINT = "ckpt.npz"
# options a resumed run cannot change (the model, its data and its initialisation)
FIXED_ON_RESUME = ("corpus", "seed", "init", "batch_size", "block_size", "n_layers", "n_heads",
                   "d_model", "norm", "mlp", "pos", "bias", "dtype")
# options not restored from the checkpoint (how this process runs, not what it computes)
NOT_RESTORED = ("resume", "output_dir", "threads", "progress_interval", "no_plots")


def parse_args(argv):
    """``(args, saved)``: the options (the command line over the checkpoint's with
    ``--resume``, over ``--preset``, over the defaults) and the checkpoint's training state
    (None without ``--resume``); ``UsageError`` naming what is wrong."""
    p = cli.ArgumentParser(prog=PROG, description="Train one GPT on a text, as nanoGPT's "
                           "train.py: schedule, evaluation, best-val checkpoint, --resume.")
    p.add_argument("--max-iters", type=cli.bounded_int(1, 1_000_000, "iterations"),
                   default=200, metavar="N", help="training steps")
    p.add_argument("--eval-interval", type=cli.positive_int, default=50, metavar="K",
                   help="estimate the losses every K steps (and at steps 0 and the last)")
    p.add_argument("--eval-iters", type=cli.positive_int, default=20, metavar="N",
                   help="random batches of each split per estimate")
    p.add_argument("--output-dir", type=cli.path_arg, default="outputs/train_gpt", metavar="DIR",
                   help="where the files go")
    p.add_argument("--resume", action="store_true", help=f"continue the run whose {CHECKPOINT} "
                   "is in --output-dir, with its options (those given here win)")
    p.add_argument("--sample-chars", type=cli.bounded_int(0, 1_000_000, "characters"),
                   default=200, metavar="N",
                   help="characters sampled from the checkpoint at the end")
    p.add_argument("--threads", type=cli.up_to_cpus, default=1, metavar="N",
                   help="BLAS threads")
    p.add_argument("--progress-interval", type=cli.positive_float, default=10.0, metavar="S",
                   help="seconds between progress lines on stderr")
    p.add_argument("--no-plots", action="store_true", help="do not draw loss.png")
    options.add_model_options(p)
    first = p.parse_args(argv)
    saved = None
    if first.resume:
        try:
            optimizer_state, saved = load_training_state(first.output_dir / CHECKPOINT)
        except (OSError, ValueError) as e:
            raise cli.UsageError(f"--resume: {e}") from None
        if saved is None or optimizer_state is None:
            raise cli.UsageError(f"--resume: {first.output_dir / CHECKPOINT} holds no "
                                 f"training state")
    restored = {k: v for k, v in (saved or {}).get("options", {}).items() if k not in NOT_RESTORED}
    args = options.parse(p, argv, restored)
    for k in FIXED_ON_RESUME if saved else ():
        if k in restored and plain(getattr(args, k)) != restored[k]:
            raise cli.UsageError(f"--resume: the run was trained with --{k.replace('_', '-')} "
                                 f"{restored[k]}, it cannot continue with {getattr(args, k)}")
    if saved and saved["step"] >= args.max_iters:
        raise cli.UsageError(f"--resume: the checkpoint is at step {saved['step']}, "
                             f"--max-iters {args.max_iters}: give a larger --max-iters")
    options.optimiser(args, args.max_iters)  # its checks
    return args, saved


def run(argv=None):
    """Train one model as the options say; returns 0, or 1 when the loss became NaN or inf."""
    args, saved = parse_args(argv)
    data = options.load_data(args)
    config = options.model_config(args, data)
    out = cli.output_dir(args.output_dir)
    cli.blas_threads(args.threads)
    make_optimizer, lr_at = options.optimiser(args, args.max_iters)
    model = GPT(config, seed=args.seed, init=args.init)
    optimizer = make_optimizer(model)
    rng = np.random.default_rng(args.seed)             # the training batches
    eval_rng = np.random.default_rng([args.seed, 1])   # the estimates' batches
    history = {"step": [], "lr": [], "loss": [], "evals": []}   # evals: [step, train, val]
    start, best = 0, None   # best: (step, val estimate, state_dict)
    if saved is not None:
        model.load_state_dict(load_checkpoint(out / CHECKPOINT).state_dict())
        optimizer.load_state_dict(load_training_state(out / CHECKPOINT)[0])
        rng.bit_generator.state, eval_rng.bit_generator.state = saved["rng"], saved["eval_rng"]
        history, start = saved["history"], saved["step"]
        best = (start, saved["best_val"], model.state_dict())
    opts = {k: plain(v) for k, v in vars(args).items()}
    lines = [f"# {PROG} run log", f"options: {json.dumps(opts, sort_keys=True)}",
             f"corpus: {data.label} ({len(data.text)} characters, vocab "
             f"{data.tokenizer.vocab_size}), train/val {len(data.train)}/{len(data.val)} tokens",
             f"model: {model.num_parameters()} parameters, init {args.init}"]

    def say(line):
        print(line, flush=True)
        lines.append(line)

    for line in lines[2:]:
        cli.progress(f"train_gpt: {line}")
    if start:   # the log keeps the estimates of the run so far
        lines += [f"step {s}: train loss {tr:.4f}, val loss {va:.4f}" for s, tr, va in
                  history["evals"]]
        say(f"resuming at step {start} (best val {best[1]:.4f}) to step {args.max_iters}")

    # ------------------------------------------------------------------ the loop
    def estimate(step):
        losses = [gpt.train.estimate_loss(model, split, eval_rng, batch_size=args.batch_size,
                                          eval_iters=args.eval_iters)
                  for split in (data.train, data.val)]
        history["evals"].append([step, *losses])
        say(f"step {step}: train loss {losses[0]:.4f}, val loss {losses[1]:.4f}")
        return losses[1]

    def checkpoint(step, val):
        nonlocal best
        best = (step, val, model.state_dict())
        state = {"step": step, "best_val": val, "options": opts, "history": history,
                 "rng": rng.bit_generator.state, "eval_rng": eval_rng.bit_generator.state}
        cli.write_outputs(out, {CHECKPOINT: lambda path: save_checkpoint(
            model, path, tokenizer=data.tokenizer, optimizer=optimizer, train_state=state)})

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
    status = 0
    try:
        gpt.train.train(model, data.train, steps=args.max_iters - start, start=start,
                        batch_size=args.batch_size, clip=args.grad_clip or None, rng=rng,
                        on_step=on_step, optimizer=optimizer, lr_at=lr_at)
    except gpt.train.TrainingDiverged as e:
        say(f"stopped: {e}")
        status = 1
    seconds = time.perf_counter() - t0

    # ------------------------------------------------------------------ the report
    steps_run = len(history["step"]) - start
    say(f"{steps_run} steps in {seconds:.1f} s ({1e3 * seconds / max(1, steps_run):.1f} ms a "
        f"step, evaluations included)")
    if best is not None:
        model.load_state_dict(best[2])
        val = gpt.train.evaluate(model, data.val, batch_size=64)
        say(f"checkpoint {out / CHECKPOINT}: step {best[0]}, val loss {best[1]:.4f} on "
            f"{args.eval_iters} batches, {val:.4f} over the whole val split "
            f"({len(data.val) - 1} positions)")
        if args.sample_chars:
            idx = generate(model, data.tokenizer.encode("\n")[None], args.sample_chars,
                           temperature=0.8, top_k=200, rng=np.random.default_rng(args.seed))
            say(f"sample (temperature 0.8):\n{data.tokenizer.decode(idx[0, 1:])}")
    files = {"curves.csv": curves_csv(history)}
    if not args.no_plots and figures.available():
        files["loss.png"] = lambda path: figures.save(figures.train_loss(
            history, math.log(data.tokenizer.vocab_size), f"{data.label}, "
            f"{model.num_parameters():,} parameters, init {args.init}"), path)
    elif not args.no_plots:
        cli.progress(f"train_gpt: {figures.INSTALL_HINT}")
    earlier = cli.not_written(out, [*files, CHECKPOINT])   # --no-plots: an earlier loss.png
    if earlier:
        say(f"also in the folder, not written by this run (an earlier run's, left as it was): "
            f"{', '.join(earlier)}")
    files["run_log.txt"] = "\n".join(lines) + "\n"
    cli.write_outputs(out, files)
    cli.progress(f"train_gpt: outputs written to {out.resolve()}")
    return status


def plain(value):
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


if __name__ == "__main__":
    with cli.errors(PROG):
        sys.exit(run(sys.argv[1:]))
