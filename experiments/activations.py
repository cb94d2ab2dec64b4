"""Activations: the GELU MLP, the ReLU² MLP and SwiGLU (the chapter's steps 6 and 7).

- ``gelu``: ``c_proj(gelu(c_fc(x)))``, d -> 4d -> d, tanh GELU (the baseline).
- ``relu2``: ``c_proj(relu(c_fc(x))^2)``, the same shapes (the chapter's ``relu2``).
- ``swiglu``: ``down_proj(silu(gate_proj(x)) * up_proj(x))`` with hidden ``int(8/3 d)``, as in
  the chapter's build.py (its step 7 uses 4d, which would add half the MLP's weights again).

    python -m experiments.activations --tiny --seeds 5 --jobs 2 --norm rms

Prints the losses, each variant's paired difference from ``gelu`` and the parameter
differences. Options and outputs: ``experiments.runner``.
"""
from experiments import cli

with cli.errors("python -m experiments.activations"):   # Ctrl-C while NumPy loads: one line
    from experiments import runner

STUDY = runner.Study(
    name="activations",
    description="GELU vs ReLU² vs SwiGLU MLPs in the tiny GPT, over the same seeds.",
    variants=(runner.Variant("gelu", {"mlp": "gelu"}, note="GELU MLP, d -> 4d -> d (the baseline)"),
              runner.Variant("relu2", {"mlp": "relu2"}, note="ReLU² MLP, d -> 4d -> d"),
              runner.Variant("swiglu", {"mlp": "swiglu"}, note="SwiGLU, hidden int(8/3 d), no biases")),
    columns=(("mlp", 8),))

if __name__ == "__main__":
    runner.main(STUDY)
