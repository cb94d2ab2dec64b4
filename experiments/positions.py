"""Positions: learned absolute position embeddings vs RoPE (the chapter's step 8).

Variants, over the same seeds (same initial streams and batches):

- ``learned``: ``x = token_embedding(idx) + position_embedding(0..T-1)`` (the baseline).
- ``rope``: no position table; queries and keys of every head are rotated by the position
  (the chapter's ``build_rope_cache``/``apply_rope``, interleaved pairs, base 10000).

Usage::

    python -m experiments.positions --tiny
    python -m experiments.positions --tiny --seeds 5 --jobs 2

Prints the parameter counts and final losses, the paired difference of ``rope`` from
``learned`` (95 % Student-t interval with several seeds) and the parameter difference (the
block_size x d_model table RoPE does without). Options, outputs and exit statuses are those of
every study command (``experiments.four_variants``).
"""
from experiments._report import differences_and_params
from experiments import cli
from experiments.four_variants import Study, Variant, run_study

STUDY = Study(
    name="positions",
    prog="python -m experiments.positions",
    description="Learned position embeddings vs RoPE in the tiny GPT, over the same seeds.",
    variants=(
        Variant("learned", {"pos": "learned"},
                note="learned absolute position embeddings (the baseline)"),
        Variant("rope", {"pos": "rope"}, note="rotary embeddings on queries and keys"),
    ),
    columns=(("pos", 8),),
    closing=differences_and_params,
)


def run(argv):
    """The command: ``run_study(STUDY, argv)``; returns the exit status."""
    return run_study(STUDY, argv)


if __name__ == "__main__":
    cli.main(STUDY.prog, run)
