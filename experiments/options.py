"""The options of the model, its data and its optimiser, shared by the studies and
``experiments.train_gpt``: their defaults are the chapter's, ``--preset shakespeare-cpu`` nanoGPT's.

``add_model_options(parser)`` adds them; ``parse(parser, argv)`` parses with a preset's values as
the defaults (an option given on the command line wins); ``load_data(args)`` reads the corpus
and splits it; ``model_config(args, data, **fields)`` is the ``GPTConfig``;
``optimiser(args, steps)`` the AdamW and the learning-rate schedule of nanoGPT's ``train.py``.
"""
import ast
import functools
import os
from pathlib import Path
from types import SimpleNamespace

import gpt.train
from gpt import GPTConfig
from gpt.config import MLPS, NORMS, POSITIONS
from gpt.data import CORPORA, CharTokenizer, check_split_length, load_corpus, train_val_split
from gpt.model import INITS

from experiments import cli

TRAIN_FRACTION = 0.9

# nanoGPT's README, "I only have a macbook": its train.py with config/train_shakespeare_char.py
# and --device=cpu --compile=False --eval_iters=20 --log_interval=1 --block_size=64
# --batch_size=12 --n_layer=4 --n_head=4 --n_embd=128 --max_iters=2000 --lr_decay_iters=2000
# --dropout=0.0 (the config file: lr 1e-3, min_lr 1e-4, beta2 0.99, warmup 100, eval every 250;
# train.py: bias False, weight decay 0.1, clip 1.0, GPT-2's init). Keys are option
# destinations: a command takes those it has (experiments.train_gpt's max_iters, eval_interval,
# eval_iters; the studies' steps and eval_every).
PRESETS = {"shakespeare-cpu": dict(
    corpus="shakespeare", n_layers=4, n_heads=4, d_model=128, block_size=64, batch_size=12,
    bias=False, init="gpt2", lr=1e-3, min_lr=1e-4, beta2=0.99, warmup_iters=100,
    lr_decay_iters=2000, weight_decay=0.1, decay_on="2d", grad_clip=1.0,
    max_iters=2000, eval_interval=250, eval_iters=20, steps=2000, eval_every=250)}


def corpus_arg(text):
    """``--corpus``: a name of ``gpt.data.CORPORA`` (kept as the name) or a path."""
    return text if text in CORPORA else cli.path_arg(text)


def add_model_options(p, varied=()):
    """Add ``--preset``, ``--corpus``, ``--seed``, the model's options (but those in ``varied``,
    which a study sets itself), its initialisation, and the optimiser's and schedule's."""
    p.add_argument("--preset", choices=sorted(PRESETS),
                   help="a configuration (PRESETS); options given here win over its values")
    p.add_argument("--corpus", type=corpus_arg, metavar="NAME|PATH",
                   help=f"{' or '.join(CORPORA)} (gpt/corpus/SOURCE.txt), or a UTF-8 text "
                        f"file; none: the built-in opening of Pride and Prejudice")
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
    bias = g.add_mutually_exclusive_group()
    bias.add_argument("--bias", action="store_true", default=True,
                      help="a bias in every Linear and LayerNorm (the chapter's; nanoGPT's "
                           "bias): the default, except in the shakespeare-cpu preset")
    bias.add_argument("--no-bias", dest="bias", action="store_false",
                      help="no bias in any Linear or LayerNorm (nanoGPT's bias=False)")
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


def parse(p, argv, defaults=None):
    """``p.parse_args(argv)`` with ``--preset``'s values (then ``defaults``) as the defaults of
    the options ``p`` has, so that an option on the command line wins over both. A study's
    ``--backward DIR`` with ``--jobs`` above 1 is refused when DIR calls ``breakpoint()``
    (``refuse_breakpoints``)."""
    preset = p.parse_args(argv).preset
    known = {a.dest for a in p._actions}
    p.set_defaults(**{k: v for k, v in {**PRESETS.get(preset, {}), **(defaults or {})}.items()
                      if k in known})
    args = p.parse_args(argv)
    if getattr(args, "backward", None) and getattr(args, "jobs", 1) > 1:
        refuse_breakpoints(args.backward, args.jobs)
    return args


def refuse_breakpoints(folder, jobs):
    """``UsageError`` naming the first ``breakpoint()`` or ``pdb.set_trace()`` call in the
    ``*.py`` files of ``folder`` (the learner's backward passes), for runs trained in ``jobs``
    worker processes: a worker has no terminal, so the debugger's prompt would end the run as
    if interrupted. With ``--jobs 1`` the runs train in the command's own process, where a
    breakpoint stops as in any Python program. A file that does not parse is left to the
    exercises' check."""
    for path in sorted(Path(folder).glob("*.py")):
        if not path.is_file():   # a FIFO would block the read
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            continue
        calls = sorted((node.lineno, name) for node in ast.walk(tree)   # name(...), x.name(...)
                       if isinstance(node, ast.Call) and (name := getattr(
                           node.func, "id", getattr(node.func, "attr", None))) in
                       ("breakpoint", "set_trace"))
        if calls:
            line, name = calls[0]
            raise cli.UsageError(
                f"--backward {folder}: {path.name} line {line} calls {name}(), which stops "
                f"only with --jobs 1 (the runs train in this process); --jobs {jobs} "
                f"trains in worker processes, where the debugger has no terminal")


def load_data(args):
    """The corpus of ``args.corpus``, its tokenizer and its 90/10 train/val token ids, as a
    namespace (``text``, ``tokenizer``, ``train``, ``val``, ``label``); ``UsageError`` for a
    corpus that cannot be read or is too short for one window of ``--block-size``."""
    try:
        text = load_corpus(args.corpus)
    except (OSError, ValueError) as e:
        names = f" (the corpora by name: {', '.join(CORPORA)})" \
            if isinstance(e, FileNotFoundError) else ""
        raise cli.UsageError(f"{e}{names}") from None
    tokenizer = CharTokenizer(text)
    train, val = train_val_split(tokenizer.encode(text), TRAIN_FRACTION)
    try:
        check_split_length(train, args.block_size, "the training split")
        check_split_length(val, args.block_size, "the validation split")
    except ValueError as e:
        raise cli.UsageError(f"the corpus is too short: {e}") from None
    return SimpleNamespace(text=text, tokenizer=tokenizer, train=train, val=val,
                           label="built-in" if args.corpus is None else args.corpus
                           if isinstance(args.corpus, str) else str(args.corpus.resolve()))


def model_config(args, data, **fields):
    """The ``GPTConfig`` of the options, ``fields`` over them; ``UsageError`` if invalid or if a
    training step at ``--batch-size`` cannot fit in this machine's memory (``check_memory``)."""
    base = {k: getattr(args, k) for k in ("block_size", "n_layers", "n_heads", "d_model",
                                          "norm", "mlp", "pos", "bias", "dtype") if hasattr(args, k)}
    try:
        config = GPTConfig(vocab_size=data.tokenizer.vocab_size, **{**base, **fields})
    except (TypeError, ValueError) as e:
        raise cli.UsageError(f"invalid model configuration: {e}") from None
    check_memory(config, args.batch_size)
    return config


def check_memory(config, batch_size):
    """``UsageError`` when a lower bound of the memory of one training step exceeds this
    machine's physical memory (where the system reports it): the weights, their gradients and
    AdamW's two moments (4 copies of at least V C + 11 L C^2 parameters: the embedding, the
    attention's 4 C^2 and the MLP's about 8 C^2 a block), and the logits of a batch with their
    gradient (2 B T V). A step below the bound may still run out: ``cli.errors`` says so."""
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return
    V, C, L, T = config.vocab_size, config.d_model, config.n_layers, config.block_size
    params = V * C + 11 * L * C * C
    need = config.np_dtype.itemsize * (4 * params + 2 * batch_size * T * V)
    if need > ram:
        raise cli.UsageError(
            f"--d-model {C} --n-layers {L} --batch-size {batch_size} --block-size {T}: a "
            f"training step needs at least {need / 2**30:,.0f} GiB of memory (weights, "
            f"gradients, AdamW's moments, the logits and their gradient); this machine has "
            f"{ram / 2**30:.1f} GiB")


def optimiser(args, steps):
    """``(make_optimizer(model), lr_at(it))``: ``gpt.train.configure_optimizers`` and
    ``gpt.train.get_lr`` with the options (picklable, for worker processes); ``UsageError`` for
    a warmup not shorter than the decay, ``--min-lr`` above ``--lr`` or ``--beta2`` >= 1."""
    decay_iters = args.lr_decay_iters or steps
    if args.warmup_iters >= decay_iters:
        raise cli.UsageError(f"--warmup-iters ({args.warmup_iters}) must be less than "
                             f"--lr-decay-iters ({decay_iters}; by default the run's steps)")
    if args.min_lr is not None and args.min_lr > args.lr:
        raise cli.UsageError(f"--min-lr ({args.min_lr:g}) must not exceed --lr ({args.lr:g})")
    if args.beta2 >= 1:
        raise cli.UsageError(f"--beta2 must be below 1, got {args.beta2}")
    make = functools.partial(gpt.train.configure_optimizers, lr=args.lr,
                             weight_decay=args.weight_decay, betas=(0.9, args.beta2),
                             decay=args.decay_on)
    lr_at = functools.partial(gpt.train.get_lr, lr=args.lr,
                              min_lr=args.lr if args.min_lr is None else args.min_lr,
                              warmup_iters=args.warmup_iters, lr_decay_iters=decay_iters)
    return make, lr_at


def recipe(args, steps):
    """The initialisation and the optimiser's recipe in words, e.g. "init gpt2, AdamW lr 0.001
    with 100 warmup steps and a cosine to 0.0001 at step 2000, weight decay 0.1 on the 2-D
    parameters (preset shakespeare-cpu)"."""
    lr = f"AdamW lr {args.lr:g}" + (
        " constant" if args.min_lr is None and not args.warmup_iters else
        f" with {args.warmup_iters} warmup steps and a cosine to "
        f"{args.lr if args.min_lr is None else args.min_lr:g} at step "
        f"{args.lr_decay_iters or steps}")
    on = "every parameter" if args.decay_on == "all" else "the 2-D parameters"
    return (f"init {args.init}, {lr}, weight decay {args.weight_decay:g} on {on}"
            + ("" if args.bias else ", no biases") + (f" (preset {args.preset})" if args.preset else ""))
