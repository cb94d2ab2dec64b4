"""Activations: the GELU MLP, the ReLU² MLP and SwiGLU (the chapter's steps 6 and 7).

Variants, over the same seeds (same initial streams and batches):

- ``gelu``: ``c_proj(gelu(c_fc(x)))``, d -> 4d -> d, tanh GELU (the baseline).
- ``relu2``: ``c_proj(relu(c_fc(x))^2)``, the same shapes (the chapter's ``relu2``).
- ``swiglu``: ``down_proj(silu(gate_proj(x)) * up_proj(x))`` with hidden ``int(8/3 d)``, as in
  the chapter's build.py (its step 7 uses 4d, which would add half the MLP's weights again).

Usage::

    python -m experiments.activations --tiny
    python -m experiments.activations --tiny --seeds 5 --jobs 2 --norm rms

Prints the parameter counts and final losses, each variant's paired difference from ``gelu``
(95 % Student-t interval with several seeds) and the parameter differences. Options, outputs
and exit statuses are those of every study command (``experiments.four_variants``).
"""
from experiments._report import differences_and_params
from experiments import cli
from experiments.four_variants import Study, Variant, run_study

STUDY = Study(
    name="activations",
    prog="python -m experiments.activations",
    description="GELU vs ReLU² vs SwiGLU MLPs in the tiny GPT, over the same seeds.",
    variants=(
        Variant("gelu", {"mlp": "gelu"}, note="GELU MLP, d -> 4d -> d (the baseline)"),
        Variant("relu2", {"mlp": "relu2"}, note="ReLU² MLP, d -> 4d -> d"),
        Variant("swiglu", {"mlp": "swiglu"}, note="SwiGLU, hidden int(8/3 d), no biases"),
    ),
    columns=(("mlp", 8),),
    closing=differences_and_params,
)


def run(argv):
    """The command: ``run_study(STUDY, argv)``; returns the exit status."""
    return run_study(STUDY, argv)


if __name__ == "__main__":
    cli.main(STUDY.prog, run)
