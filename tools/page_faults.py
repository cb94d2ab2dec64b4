"""Page faults and time per training step, with glibc's default allocator policy and with the
commands' setting (``experiments._allocator``), each in a fresh process.

A plain loop of the benchmark's step (``experiments.bench.Ours``: forward, zero_grad, backward,
clip, AdamW) on the tiny model, 30 warm-up steps then 200 timed, on corpus windows or random
tokens. docs/performance.md ("Fourth round") has the figures.

    python tools/page_faults.py [--variants ln+gelu,rms+gelu] [--data random]

One BLAS thread unless ``OPENBLAS_NUM_THREADS`` says otherwise, as the commands.

Prints one line per variant and setting: median ms per step, CPU ms per step, minor page faults
per step, peak resident memory.
"""
import argparse
import os
import subprocess
import sys

CHILD = r"""
import resource, sys, time
setting, variant, kind = sys.argv[1:4]
if setting == "kept":
    from experiments import _allocator
    assert _allocator.configure(), "the allocator setting was not applied (not glibc?)"
import numpy as np
from experiments.bench import SIZES, Ours, make_batches
from gpt import GPT, GPTConfig
from gpt.data import CharTokenizer, load_corpus
text = load_corpus(); tok = CharTokenizer(text); data = tok.encode(text)
norm, mlp = variant.split("+")
runner = Ours(GPT(GPTConfig(vocab_size=tok.vocab_size, norm=norm, mlp=mlp), seed=0))
batches = make_batches(kind, data, tok.vocab_size, SIZES["tiny"], 230, np.random.default_rng(0))
for b in batches[:30]:
    runner.step(b)
faults0, cpu0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.process_time()
steps = [runner.step(b)["step"] for b in batches[30:]]
cpu, faults = time.process_time() - cpu0, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"{variant:10s} {kind:6s} {setting:7s} {1e3 * np.median(steps):6.2f} ms/step  "
      f"CPU {1e3 * cpu / 200:6.2f} ms/step  {faults / 200:7.1f} faults/step  peak {peak:.1f} MiB")
"""


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variants", default="ln+gelu,rms+gelu,ln+swiglu,rms+swiglu")
    p.add_argument("--data", default="corpus", choices=("corpus", "random"))
    args = p.parse_args(argv)
    known = ("ln+gelu", "rms+gelu", "ln+swiglu", "rms+swiglu")
    bad = [v for v in args.variants.split(",") if v not in known]
    if bad:
        p.exit(2, f"{p.prog}: error: --variants: unknown {', '.join(map(repr, bad))}; choose "
                  f"from {', '.join(known)}\n")
    env = {k: v for k, v in os.environ.items()  # glibc's own defaults for "default"
           if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    env.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the commands do
    for variant in args.variants.split(","):
        for setting in ("default", "kept"):
            r = subprocess.run([sys.executable, "-c", CHILD, setting, variant, args.data],
                               capture_output=True, text=True, env=env)
            sys.stdout.write(r.stdout if r.returncode == 0 else r.stderr)


if __name__ == "__main__":
    main()
