"""Positions: learned absolute position embeddings vs RoPE (the chapter's step 8).

- ``learned``: ``x = token_embedding(idx) + position_embedding(0..T-1)`` (the baseline).
- ``rope``: no position table; queries and keys of every head are rotated by the position
  (the chapter's ``build_rope_cache``/``apply_rope``, interleaved pairs, base 10000).

    python -m experiments.positions --tiny --seeds 5 --jobs 2

Prints the losses, the paired difference of ``rope`` from ``learned`` and the parameter
difference (the block_size x d_model table RoPE does without). Options and outputs:
``experiments.runner``.
"""
from experiments import cli

with cli.errors("python -m experiments.positions"):   # Ctrl-C while NumPy loads: one line
    from experiments import runner

STUDY = runner.Study(
    name="positions",
    description="Learned position embeddings vs RoPE in the tiny GPT, over the same seeds.",
    variants=(runner.Variant("learned", {"pos": "learned"},
                             note="learned absolute position embeddings (the baseline)"),
              runner.Variant("rope", {"pos": "rope"}, note="rotary embeddings on queries and keys")),
    columns=(("pos", 8),))

if __name__ == "__main__":
    runner.main(STUDY)
