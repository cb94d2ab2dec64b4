"""Generate text from a checkpoint: ``python -m experiments.generate --checkpoint P --prompt T``.

Loads a ``gpt.save_checkpoint`` file (parameters, config and character vocabulary), encodes the
prompt with the stored vocabulary, extends it with ``gpt.sample.generate`` (nanoGPT's sampling:
context cropped to block_size, temperature, top-k; temperature 0 is greedy) and prints the
prompt followed by the new characters on stdout.

Usage::

    python -m experiments.four_variants --tiny --save-checkpoints
    python -m experiments.generate --checkpoint outputs/four_variants/rms_swiglu.npz \\
        --prompt "It is a truth" --max-new-tokens 200 --temperature 0.8 --top-k 10 --seed 1

Exit status: 0 text printed; 2 bad input (a missing or invalid checkpoint, one without a
vocabulary or whose config would not fit in memory, a prompt character outside the
vocabulary, a bad option) or stdout cannot be
written (``> /dev/full``): one line on stderr, no traceback; 130 interrupted (Ctrl-C), one line.
A closed pipe (``| head -c 20``) is quiet.
"""
from __future__ import annotations

from typing import NoReturn, Optional, Sequence

import numpy as np

from gpt.checkpoint import load_checkpoint, load_config, load_tokenizer
from gpt.sample import generate

from experiments._cli import (ArgumentParser, Printer, bounded_int, fail, nonnegative_float,
                              nonnegative_int, positive_int, run_main)
from experiments._runner import memory_lower_bound, physical_memory

PROG = "python -m experiments.generate"

#: Upper bound of --max-new-tokens: the text is printed when it is complete, so a mistyped count
#: would otherwise run for hours with nothing to show.
MAX_NEW_TOKENS = 1_000_000


def _fail(message: str) -> NoReturn:
    fail(PROG, message)


def build_parser() -> ArgumentParser:
    """The command's argument parser (one-line errors, exit status 2)."""
    p = ArgumentParser(prog=PROG, description="Generate text from a minigrad-gpt checkpoint.",
                       epilog="Exit status: 0 done; 2 bad input or stdout not writable (one "
                              "line on stderr); 130 interrupted.")
    p.add_argument("--checkpoint", required=True, metavar="PATH",
                   help="a .npz written by gpt.save_checkpoint (e.g. four_variants "
                        "--save-checkpoints)")
    p.add_argument("--prompt", required=True, metavar="TEXT",
                   help="the text to continue (every character must be in the vocabulary)")
    p.add_argument("--max-new-tokens", type=bounded_int(0, MAX_NEW_TOKENS, "characters"), default=200, metavar="N",
                   help=f"characters to generate, at most {MAX_NEW_TOKENS:,} (default 200)")
    p.add_argument("--temperature", type=nonnegative_float, default=1.0, metavar="T",
                   help="softmax temperature, >= 0; 0 is greedy (default 1.0)")
    p.add_argument("--top-k", type=positive_int, default=None, metavar="K",
                   help="sample only among the K most likely characters (default: all)")
    p.add_argument("--seed", type=nonnegative_int, default=0, metavar="S",
                   help="seed of the sampling generator (default 0)")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command; returns the exit status (see the module docstring)."""
    args = build_parser().parse_args(argv)
    if args.checkpoint == "":
        _fail("--checkpoint: empty path")
    if args.prompt == "":
        _fail("--prompt is empty: give at least one character to continue")
    try:
        config = load_config(args.checkpoint)
    except (OSError, ValueError, TypeError) as e:
        _fail(str(e))
    need, have = memory_lower_bound(config, batch_size=1, training=False), physical_memory()
    if have and need > have:  # a hand-edited config would otherwise allocate until killed
        _fail(f"checkpoint {args.checkpoint}: its config (n_layers={config.n_layers}, "
              f"d_model={config.d_model}, vocab_size={config.vocab_size}) needs at least "
              f"{need / 2**30:.1f} GiB of memory, more than this machine's {have / 2**30:.1f} GiB")
    try:
        model = load_checkpoint(args.checkpoint)
        tokenizer = load_tokenizer(args.checkpoint)
    except (OSError, ValueError, TypeError) as e:
        _fail(str(e))
    unknown = [(i, c) for i, c in enumerate(args.prompt) if c not in tokenizer.stoi]
    if unknown:
        i, c = unknown[0]
        _fail(f"prompt character {c!r} (U+{ord(c):04X}) at position {i} is not in the "
              f"checkpoint's vocabulary of {tokenizer.vocab_size} characters "
              f"({len(unknown)} unknown in total)")
    idx = tokenizer.encode(args.prompt)[None, :]                          # (1, T)
    try:
        out = generate(model, idx, args.max_new_tokens, temperature=args.temperature,
                       top_k=args.top_k, rng=np.random.default_rng(args.seed))
    except (ValueError, IndexError) as e:
        _fail(str(e))
    text = tokenizer.decode(out[0])
    Printer()(text)  # a failed write is reported by run_main (exit 2; a closed pipe is quiet)
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(PROG, main))
