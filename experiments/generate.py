"""Generate text from a checkpoint: ``python -m experiments.generate --checkpoint P --prompt T``.

Loads a ``gpt.save_checkpoint`` file (parameters, config and character vocabulary), encodes the
prompt with the stored vocabulary, extends it with ``gpt.sample.generate`` (nanoGPT's sampling:
context cropped to block_size, temperature, top-k; temperature 0 is greedy) and prints the
prompt followed by each new character as it is sampled.

    python -m experiments.four_variants --tiny --save-checkpoints
    python -m experiments.generate --checkpoint outputs/four_variants/rms_swiglu.npz \\
        --prompt "It is a truth" --max-new-tokens 200 --temperature 0.8 --top-k 10 --seed 1
"""
import os
import sys
from argparse import SUPPRESS

import numpy as np

from gpt.checkpoint import load_checkpoint, load_config, load_tokenizer
from gpt.sample import generate

from experiments import cli

PROG = "python -m experiments.generate"
MAX_NEW_TOKENS = 1_000_000   # a typo must not run for hours


def _memory_needed(config) -> int:
    """Bytes sampling must hold at least: the weights (12 C^2 a layer and the V x C embedding),
    one layer's attention probabilities and the logits, for one sequence."""
    C, T = config.d_model, config.block_size
    params = config.vocab_size * C + config.n_layers * 12 * C * C
    return (params + T * (config.n_heads * T + config.vocab_size)) \
        * np.dtype(config.dtype).itemsize


def run(argv=None) -> int:
    """Load a checkpoint and print ``--prompt`` followed by sampled characters, each written
    (and flushed) as it is sampled, so a reader sees the text grow and ``| head`` stops it.

    Args:
        argv (list[str] | None): the command's arguments (default ``sys.argv[1:]``).
    Returns:
        int: ``cli.EXIT_OK``.
    Raises:
        cli.UsageError: a missing or unreadable checkpoint, a prompt with characters outside
            its vocabulary, or other bad input (one line, status 2, through ``cli.main``).
    """
    p = cli.ArgumentParser(prog=PROG, description="Generate text from a minigrad-gpt checkpoint.")
    p.add_argument("--checkpoint", required=True, type=cli.path_arg, default=SUPPRESS,
                   metavar="PATH",
                   help="a .npz written by gpt.save_checkpoint (e.g. four_variants "
                        "--save-checkpoints) (required)")
    p.add_argument("--prompt", required=True, default=SUPPRESS, metavar="TEXT",
                   help="the text to continue, every character in the vocabulary (required)")
    p.add_argument("--max-new-tokens", type=cli.bounded_int(0, MAX_NEW_TOKENS, "characters"),
                   default=200, metavar="N",
                   help=f"characters to generate, at most {MAX_NEW_TOKENS:,}")
    p.add_argument("--temperature", type=cli.nonnegative_float, default=1.0, metavar="T",
                   help="softmax temperature, >= 0; 0 is greedy")
    p.add_argument("--top-k", type=cli.positive_int, default=None, metavar="K",
                   help="sample only among the K most likely characters; None: all")
    p.add_argument("--seed", type=cli.nonnegative_int, default=0, metavar="S",
                   help="seed of the sampling generator")
    args = p.parse_args(argv)
    if args.prompt == "":
        raise cli.UsageError("--prompt is empty: give at least one character to continue")
    try:
        config = load_config(args.checkpoint)
        need = _memory_needed(config)
        have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        if need > have:  # a hand-edited config would otherwise allocate until killed
            raise cli.UsageError(
                f"checkpoint {args.checkpoint}: its config (n_layers={config.n_layers}, d_model="
                f"{config.d_model}, vocab_size={config.vocab_size}) needs at least "
                f"{need / 2**30:.1f} GiB of memory, more than this machine's "
                f"{have / 2**30:.1f} GiB")
        model = load_checkpoint(args.checkpoint)
        tokenizer = load_tokenizer(args.checkpoint)
    except (OSError, ValueError, TypeError) as e:
        raise cli.UsageError(str(e)) from None
    unknown = [(i, c) for i, c in enumerate(args.prompt) if c not in tokenizer.stoi]
    if unknown:
        i, c = unknown[0]
        raise cli.UsageError(f"prompt character {c!r} (U+{ord(c):04X}) at position {i} is not in "
                             f"the checkpoint's vocabulary of {tokenizer.vocab_size} characters "
                             f"({len(unknown)} unknown in total)")
    idx = tokenizer.encode(args.prompt)[None, :]                          # (1, T)

    # the prompt goes out with the first new character, so weights that give NaN logits are one
    # line on stderr and nothing on stdout
    unwritten = [args.prompt]

    def show(tokens):                                                     # tokens: (1,)
        sys.stdout.write("".join(unwritten) + tokenizer.decode(tokens))
        sys.stdout.flush()
        unwritten.clear()

    try:
        generate(model, idx, args.max_new_tokens, temperature=args.temperature,
                 top_k=args.top_k, rng=np.random.default_rng(args.seed), on_token=show)
    except (ValueError, IndexError) as e:   # a checkpoint whose weights give NaN logits
        raise cli.UsageError(str(e)) from None
    print("".join(unwritten))
    return cli.EXIT_OK


if __name__ == "__main__":
    cli.main(PROG, run)
