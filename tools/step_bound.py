"""How much of the tiny model's training step NumPy's elementwise passes take on their own.

Times the hand-derived forward+backward pairs of the layers that are not matrix products, at
the shapes of one step of the chapter's tiny model (d_model 64, 2 layers, 4 heads, T 32, B 32,
float32): GELU on the MLP's (B, T, 4C) hidden activations (2 layers), LayerNorm on the (B, T, C)
residual stream (5 a step: two a block and the final one) and cross-entropy on the (B*T, V)
logits. docs/performance.md ("What bounds the tiny step") sets the sum against the budget a
step 0.7 times PyTorch's leaves after the matrix products.

    OPENBLAS_NUM_THREADS=1 python tools/step_bound.py

Prints one line of medians (7 repeats of 200 calls each), in milliseconds.
"""
import time

import numpy as np

from layers.cross_entropy import cross_entropy_backward, cross_entropy_forward
from layers.gelu import gelu_backward, gelu_forward
from layers.layernorm import layernorm_backward, layernorm_forward


def ms(f, n=200, repeats=7):
    """Median over ``repeats`` of the mean time of ``n`` calls of ``f``, in milliseconds."""
    t = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        t.append((time.perf_counter() - t0) / n * 1e3)
    return float(np.median(t))


def main():
    rng = np.random.default_rng(0)
    h = rng.standard_normal((32, 32, 256)).astype(np.float32)   # MLP hidden, (B, T, 4C)
    x = rng.standard_normal((32, 32, 64)).astype(np.float32)    # residual stream, (B, T, C)
    w, b = np.ones(64, np.float32), np.zeros(64, np.float32)
    logits = rng.standard_normal((1024, 48)).astype(np.float32)  # (B*T, V)
    targets = rng.integers(0, 48, 1024)
    gelu = ms(lambda: gelu_backward(h, gelu_forward(h)[1]))
    ln = ms(lambda: layernorm_backward(x, layernorm_forward(x, w, b)[1]))
    ce = ms(lambda: cross_entropy_backward(np.float32(1.0),
                                           cross_entropy_forward(logits, targets)[1]))
    print(f"GELU fwd+bwd {gelu:.2f} ms x 2, LayerNorm fwd+bwd {ln:.2f} ms x 5, cross-entropy "
          f"fwd+bwd {ce:.2f} ms: {2 * gelu + 5 * ln + ce:.2f} ms a step")


if __name__ == "__main__":
    main()
