"""FLOPs of LayerNorm and RMSNorm counted from our own code (see experiments._norm_counts)."""
from experiments import _norm_counts


def norm_flop_ratios(shape):
    """``{"forward": r, "forward_backward": r}``: RMSNorm's FLOPs over LayerNorm's at ``shape``."""
    inputs = _norm_counts.make_inputs(shape, "float64", 0)
    return {p: _norm_counts.count("rms", p, inputs)["flops"]
            / _norm_counts.count("ln", p, inputs)["flops"] for p in _norm_counts.PASSES}
