"""A step's matrix products alone, in NumPy and in PyTorch, side by side (the tiny model's, or
another size of ``experiments.bench.SIZES``).

``experiments.bench`` calls the NumPy time of a step's matrix products its floor. PyTorch's
step has a floor of its own: the same products through ``torch.matmul``. This times both on
the shapes of ``experiments.bench.step_matmuls`` (every forward and backward product of one
training step; tiny: d_model 64, 2 layers, 4 heads, T 32, B 32, float32, vocab 48), on one
thread each, alternating, and prints the medians and the largest products. docs/performance.md
("What bounds the tiny step") sets them against the 0.7-of-PyTorch target.

    python tools/matmul_floors.py        # one BLAS thread unless OPENBLAS_NUM_THREADS says
    python tools/matmul_floors.py cpu    # another size of experiments.bench.SIZES

Needs torch (the ``parity`` extra; without it, one line and exit 2). Prints milliseconds per step: medians (min-max) of 7 repeats of 10 steps.
"""
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads, as the commands do

import numpy as np  # noqa: E402

from experiments.bench import SIZES, Floor  # noqa: E402
from gpt import GPTConfig  # noqa: E402


def main():
    try:
        import torch
    except ImportError:
        sys.stderr.write("tools/matmul_floors.py: needs torch (pip install -e \".[parity]\")\n")
        return 2
    torch.set_num_threads(int(os.environ["OPENBLAS_NUM_THREADS"]))
    size = sys.argv[1] if len(sys.argv) > 1 else "tiny"
    if size not in SIZES:
        sys.stderr.write(f"tools/matmul_floors.py: unknown size {size!r}; one of {', '.join(SIZES)}\n")
        return 2
    d_model, n_layers, T, B = SIZES[size]
    floor = Floor(GPTConfig(vocab_size=48, block_size=T, n_layers=n_layers, d_model=d_model), B,
                  np.random.default_rng(0))
    tops = [tuple(torch.from_numpy(a) for a in op) for op in floor.ops]

    def numpy_step():
        floor.step(None)

    def torch_step():
        for a, b, out in tops:
            torch.matmul(a, b, out=out)

    steps = {"numpy": numpy_step, "torch": torch_step}
    for f in steps.values():  # warm-up
        f()
    times = {k: [] for k in steps}
    for r in range(7):
        for k in (list(steps) if r % 2 == 0 else list(steps)[::-1]):
            t0 = time.perf_counter()
            for _ in range(10):
                steps[k]()
            times[k].append((time.perf_counter() - t0) / 10 * 1e3)
    gflop = floor.gflop
    for k, t in times.items():
        print(f"{k:6s} {np.median(t):6.2f} ms ({min(t):.2f}-{max(t):.2f}) for {gflop:.2f} GFLOP "
              f"of matrix products, {gflop / np.median(t) * 1e3:.0f} GFLOP/s")
    ratio = [a / b for a, b in zip(times["torch"], times["numpy"])]
    print(f"torch/numpy {np.median(ratio):.2f} ({min(ratio):.2f}-{max(ratio):.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
