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
every study command (``experiments._runner``).
"""
from __future__ import annotations

from experiments._cli import run_main
from experiments._report import differences_and_params
from experiments._runner import Study, Variant

__all__ = ["STUDY", "main"]

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
    run_label=lambda v: f"{v.name:8s}",
    closing=differences_and_params,
)

main = STUDY.main  # main(argv=None) -> exit status (see experiments._runner)

if __name__ == "__main__":
    raise SystemExit(run_main(STUDY.prog, main))
