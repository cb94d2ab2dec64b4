"""Generate text from a checkpoint: ``python -m experiments.generate --checkpoint P --prompt T``.

Loads a ``gpt.save_checkpoint`` file (parameters, config and character vocabulary), encodes the
prompt with its vocabulary, extends it with ``gpt.sample.generate`` (nanoGPT's sampling: context
cropped to block_size, temperature, top-k; temperature 0 is greedy) and prints the prompt and
each new character as it is sampled.

    python -m experiments.four_variants --tiny --save-checkpoints
    python -m experiments.generate --checkpoint outputs/four_variants/rms_swiglu.npz \\
        --prompt "It is a truth" --max-new-tokens 200 --temperature 0.8 --top-k 10 --seed 1
"""
import sys

from experiments import cli

PROG = "python -m experiments.generate"
with cli.errors(PROG):   # Ctrl-C while NumPy loads: one line
    import numpy as np

    from gpt.checkpoint import load_checkpoint, load_tokenizer
    from gpt.sample import generate


def run(argv):
    """Print ``--prompt`` and the characters sampled after it, each flushed as it comes (so
    ``| head`` stops the sampling); returns 0, or 1 with one line on stderr when the model has
    diverged (its forward pass overflows or gives non-finite logits: NumPy's warnings and
    noise otherwise). Raises ``cli.UsageError`` for a checkpoint that cannot be read, a prompt
    character outside its vocabulary, or other bad input."""
    p = cli.ArgumentParser(prog=PROG, description="Generate text from a minigrad-gpt checkpoint.")
    p.add_argument("--checkpoint", required=True, type=cli.path_arg, metavar="PATH",
                   help="a .npz written by gpt.save_checkpoint (four_variants --save-checkpoints)")
    p.add_argument("--prompt", required=True, type=cli.nonempty, metavar="TEXT",
                   help="the text to continue, every character in the vocabulary")
    p.add_argument("--max-new-tokens", type=cli.bounded_int(0, 1_000_000, "characters"),
                   default=200, metavar="N", help="characters to generate")
    p.add_argument("--temperature", type=cli.nonnegative_float, default=1.0, metavar="T",
                   help="softmax temperature; 0 is greedy")
    p.add_argument("--top-k", type=cli.positive_int, default=None, metavar="K",
                   help="sample only among the K most likely characters; None: all")
    p.add_argument("--seed", type=cli.nonnegative_int, default=0, metavar="S",
                   help="seed of the sampling generator")
    args = p.parse_args(argv)
    try:
        model, tokenizer = load_checkpoint(args.checkpoint), load_tokenizer(args.checkpoint)
    except (OSError, ValueError, TypeError) as e:
        raise cli.UsageError(str(e)) from None
    try:
        idx = tokenizer.encode(args.prompt)[None, :]                      # (1, T)
    except ValueError as e:
        raise cli.UsageError(f"--prompt: {e}") from None
    unwritten = [args.prompt]   # written with the first new character: NaN logits print nothing

    def show(tokens):                                                     # tokens: (1,)
        sys.stdout.write("".join(unwritten) + tokenizer.decode(tokens))
        sys.stdout.flush()
        unwritten.clear()

    try:   # a diverged model: its forward overflows, or its logits are not finite
        with np.errstate(over="raise", invalid="raise"):
            generate(model, idx, args.max_new_tokens, temperature=args.temperature,
                     top_k=args.top_k, rng=np.random.default_rng(args.seed), on_token=show)
    except (FloatingPointError, ValueError) as e:
        if not unwritten:   # the text so far ends its line
            print()
        what = f"{e} in its forward pass" if isinstance(e, FloatingPointError) else str(e)
        cli.progress(f"{PROG}: the model has diverged: {what}; no text sampled")
        return 1
    print("".join(unwritten))
    return 0


if __name__ == "__main__":
    with cli.errors(PROG):
        sys.exit(run(sys.argv[1:]))
