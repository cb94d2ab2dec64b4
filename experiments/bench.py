"""Training-step benchmark: minigrad beside the chapter's PyTorch models and the matrix products.

For each size and variant, in this process and on the same batches: ms per training step
(forward, backward, clip, AdamW) of ``gpt.GPT`` and, where torch is installed, of the chapter's
``ModernGPT`` (its ``build.py``) from the same weights; and of the step's matrix products alone,
in NumPy (the floor) and in PyTorch. Each repeat runs ``--steps`` steps of each, in alternating
order; ratios are taken within a repeat, given as median [min-max] over repeats. Peak memory:
the high-water mark of a fresh Python doing three steps of one model (Linux).

    python -m experiments.bench --sizes tiny --repeats 7 --steps 20 --json bench.json
"""
import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from experiments import cli

PROG = "python -m experiments.bench"
with cli.errors(PROG):   # Ctrl-C while NumPy loads: one line
    import numpy as np

    from gpt import GPT, GPTConfig
    from gpt.data import BUILTIN_CORPUS_PATH, CharTokenizer, get_batch, load_corpus
    from minigrad.optim import AdamW, clip_grad_norm_

# (d_model, n_layers, T, B), 4 heads, learned positions, float32: tiny is the chapter's, cpu
# nanoGPT's shakespeare-cpu shape (measured when named)
SIZES = {"tiny": (64, 2, 32, 32), "small": (128, 4, 64, 32), "medium": (256, 6, 128, 16),
         "cpu": (128, 4, 64, 12)}
VARIANTS = ("ln+gelu", "rms+gelu", "ln+swiglu", "rms+swiglu")
BUILD_PY = Path("projects", "07_the-details-that-matter", "build.py")
MEMORY_STEPS = 3


def load_reference(folder, threads):
    """The chapter's build.py from ``folder`` (None without torch), torch on ``threads``."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(threads)
    os.environ.setdefault("SEED_CORPUS", str(BUILTIN_CORPUS_PATH))   # its corpus, required
    spec = importlib.util.spec_from_file_location("chapter_build", Path(folder) / BUILD_PY)
    module = sys.modules["chapter_build"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def torch_model(ref, c, state=None):
    """The chapter's ``ModernGPT`` of the ``GPTConfig`` ``c``, with the weights ``state`` (a
    ``gpt.GPT`` state_dict: PyTorch's names; its ``lm_head`` is the tied embedding) if given."""
    import torch
    model = ref.ModernGPT(ref.p5.GPTConfig(block_size=c.block_size, n_layers=c.n_layers,
                                           n_heads=c.n_heads, d_model=c.d_model),
                          vocab_size=c.vocab_size, norm_type=c.norm, mlp_type=c.mlp)
    if state is not None:
        state = {k: torch.from_numpy(v.copy()) for k, v in state.items()}
        state["lm_head.weight"] = state["token_embedding.weight"]
        model.load_state_dict(state, strict=False)   # its causal masks are buffers of its own
    return model


def step_matmuls(config, B):
    """Every matrix product of one training step as ``(batch, m, k, n)`` (``batch`` products of
    (m, k) @ (k, n)). A linear layer of N = B*T rows, C inputs, O outputs does (N,C)@(C,O)
    forward, (N,O)@(O,C) for dx and (O,N)@(N,C) for dW; attention does q k^T and P v forward and
    four products backward (dv, dP, dq, dk) per head; the tied output head is a linear layer."""
    C, T, H, V = config.d_model, config.block_size, config.n_heads, config.vocab_size
    N, hs = B * T, config.d_model // config.n_heads

    def linear(c_in, c_out):
        return [(1, N, c_in, c_out), (1, N, c_out, c_in), (1, c_out, N, c_in)]

    attention = [(B * H, T, hs, T), (B * H, T, T, hs)] + [(B * H, T, T, hs)] * 3 \
        + [(B * H, T, hs, T)]
    F = int(C * 8 / 3)
    mlp = (linear(C, F) * 2 + linear(F, C) if config.mlp == "swiglu"
           else linear(C, 4 * C) + linear(4 * C, C))
    return (linear(C, 3 * C) + attention + linear(C, C) + mlp) * config.n_layers + linear(C, V)


def floor(ops, matmul):
    """A step of the matrix products alone: ``matmul(a, b, out=out)`` for each of ``ops``."""
    def step(batch):
        t0 = time.perf_counter()
        for a, b, out in ops:
            matmul(a, b, out=out)
        return {"step": time.perf_counter() - t0}
    return step


class Trainer:
    """One model with AdamW (lr 3e-3, weight_decay 0.01) and clip_grad_norm_ at 1.0: ours (a
    ``gpt.GPT``) or, with ``torch`` given, the reference's; ``step`` times each phase."""

    def __init__(self, model, torch=None):
        self.model, self.torch, self.params, self.losses = model, torch, list(model.parameters()), []
        self.optimizer = (AdamW if torch is None else torch.optim.AdamW)(
            self.params, lr=3e-3, weight_decay=0.01)
        self.clip = clip_grad_norm_ if torch is None else torch.nn.utils.clip_grad_norm_

    def step(self, batch):
        x, y = batch if self.torch is None else map(self.torch.from_numpy, batch)
        t0 = time.perf_counter()
        _, loss = self.model(x, y)
        t1 = time.perf_counter()
        self.optimizer.zero_grad()
        loss.backward()
        t2 = time.perf_counter()
        self.clip(self.params, 1.0)
        t3 = time.perf_counter()
        self.optimizer.step()
        t4 = time.perf_counter()
        self.losses.append(float(loss.item()))
        return dict(forward=t1 - t0, backward=t2 - t1, clip=t3 - t2, optimizer=t4 - t3,
                    step=t4 - t0)


def setup(size, variant):
    """The built-in corpus's ids, the ``GPTConfig`` of ``size`` and ``variant``, and B."""
    text = load_corpus()
    tok = CharTokenizer(text)
    d_model, n_layers, T, B = SIZES[size]
    norm, mlp = variant.split("+")
    return tok.encode(text), GPTConfig(vocab_size=tok.vocab_size, block_size=T, n_layers=n_layers,
                                       n_heads=4, d_model=d_model, norm=norm, mlp=mlp), B


def make_batches(kind, data, vocab_size, B, T, n, seed):
    """``n`` (x, y) int64 batches of shape (B, T): windows of ``data`` (``gpt.data.get_batch``)
    or, for ``kind`` "random", uniformly random token ids as inputs and targets."""
    rng = np.random.default_rng(seed)
    if kind == "random":
        return [tuple(rng.integers(0, vocab_size, (2, B, T))) for _ in range(n)]
    return [tuple(np.ascontiguousarray(a) for a in get_batch(data, T, B, rng)) for _ in range(n)]


def spread(values):
    """``{"median", "min", "max"}`` of a list of times (ms), as floats: the spread of a row."""
    return {"median": float(np.median(values)), "min": float(min(values)), "max": float(max(values))}


def measure(size, variant, args, ref):
    """A row: ms by phase of each floor and model ("ours", "torch" with ``ref``, and "ours
    random", "torch random" for a second kind of batches, same weights), ratios, first losses."""
    data, config, B = setup(size, variant)
    rng, total = np.random.default_rng(args.seed), args.warmup + args.repeats * args.steps
    shapes = step_matmuls(config, B)
    ops = [(rng.standard_normal((b, m, k), dtype=np.float32),
            rng.standard_normal((b, k, n), dtype=np.float32),
            np.empty((b, m, n), np.float32)) for b, m, k, n in shapes]
    torch = ref and sys.modules["torch"]
    jobs = {"floor": (floor(ops, np.matmul), [None] * total)}
    if torch:
        jobs["torch floor"] = (floor([tuple(map(torch.from_numpy, o)) for o in ops],
                                     torch.matmul), [None] * total)
    trainers = {}
    for kind in args.data:
        tag = "" if kind == args.data[0] else f" {kind}"
        batches = make_batches(kind, data, config.vocab_size, B, config.block_size, total,
                               args.seed)
        model = GPT(config, seed=args.seed)
        trainers["ours" + tag] = Trainer(model)
        if torch:
            trainers["torch" + tag] = Trainer(torch_model(ref, config, model.state_dict()), torch)
        jobs.update({name: (t.step, batches) for name, t in trainers.items() if name not in jobs})
    for step, batches in jobs.values():   # warm-up, untimed
        for b in batches[:args.warmup]:
            step(b)
    per = {name: [] for name in jobs}      # per repeat: the median ms of each phase
    for rep in range(args.repeats):
        lo = args.warmup + rep * args.steps
        for name in (list(jobs) if rep % 2 == 0 else list(jobs)[::-1]):
            step, batches = jobs[name]
            times = [step(b) for b in batches[lo:lo + args.steps]]
            per[name].append({k: 1e3 * np.median([t[k] for t in times]) for k in times[0]})
    pairs = [("ours", "floor"), ("ours", "torch"), ("torch", "torch floor"),
             ("torch floor", "floor")] + [(f"{n} {kind}", n) for kind in args.data[1:]
                                          for n in ("ours", "torch")]
    return dict(size=size, variant=variant, data=args.data, config=config.to_dict(), batch_size=B,
                floor_gflop=sum(2.0 * b * m * k * n for b, m, k, n in shapes) / 1e9,
                ms={name: {k: spread([r[k] for r in reps]) for k in reps[0]}
                    for name, reps in per.items()},
                ratios={f"{a}/{b}": spread([x["step"] / y["step"] for x, y in zip(per[a], per[b])])
                        for a, b in pairs if a in per and b in per},
                first_loss={name: t.losses[0] for name, t in trainers.items()})


def peak_memory(impl, size, variant, args, reference):
    """Peak resident MiB of a fresh Python doing MEMORY_STEPS steps of ``impl`` ("ours" or
    "torch"): its own VmHWM (its ``ru_maxrss`` would start from this process's, across exec)."""
    code = (f"from experiments import bench; bench.print_peak_memory"
            f"{(impl, size, variant, args.data[0], args.seed, args.threads, str(reference))!r}")
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                check=True, env=dict(os.environ,
                                                     OPENBLAS_NUM_THREADS=str(args.threads))).stdout)


def print_peak_memory(impl, size, variant, kind, seed, threads, reference):
    """What ``peak_memory`` runs in the fresh process: the steps, then its VmHWM in MiB."""
    data, config, B = setup(size, variant)
    trainer = Trainer(GPT(config, seed=seed)) if impl == "ours" else Trainer(
        torch_model(load_reference(reference, threads), config), sys.modules["torch"])
    for b in make_batches(kind, data, config.vocab_size, B, config.block_size, MEMORY_STEPS, seed):
        trainer.step(b)
    print(next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024)


def render(row):
    """The lines of one row: ms a step of each model (by phase) and floor, the ratios."""
    head, lines, peak = f"{row['size']:6s} {row['variant']:10s} ", [], row["peak_mib"]
    for name, d in row["ms"].items():
        line = f"{' ' * len(head) if lines else head}{name:12s} {d['step']['median']:8.2f} ms"
        if "forward" in d:
            line += " (" + ", ".join(f"{k} {d[k]['median']:.2f}" for k in d if k != "step") + ")"
        if name == "floor":
            line += f" ({row['floor_gflop']:.2f} GFLOP of matrix products)"
        lines.append(line + (f", peak {peak[name]:.0f} MiB" if name in peak else ""))
    ratios = [f"{k} {v['median']:.2f} [{v['min']:.2f}-{v['max']:.2f}]"
              for k, v in row["ratios"].items()]
    if len(peak) == 2:
        ratios.append(f"memory ours/torch {peak['ours'] / peak['torch']:.2f}")
    return "\n".join(lines + [" " * len(head) + "   ".join(ratios)])


def names(allowed):
    """An argument type: a comma-separated list of names from ``allowed``."""
    def parse(text):
        bad = [s for s in text.split(",") if s not in allowed]
        if bad:
            raise argparse.ArgumentTypeError(f"unknown {', '.join(bad)}; of {', '.join(allowed)}")
        return list(dict.fromkeys(text.split(",")))
    return parse


def run(argv):
    """Time the training steps, print the table (and write ``--json``); returns 0. Raises
    ``cli.UsageError`` on bad input."""
    p = cli.ArgumentParser(prog=PROG, description="Time a GPT training step: minigrad, the "
                           "chapter's PyTorch models and the matrix products alone, side by side.")
    p.add_argument("--sizes", type=names(SIZES), default="tiny,small,medium", metavar="LIST",
                   help=f"of {', '.join(SIZES)}")
    p.add_argument("--variants", type=names(VARIANTS), default=",".join(VARIANTS), metavar="LIST",
                   help=f"of {', '.join(VARIANTS)}")
    p.add_argument("--data", type=names(("corpus", "random")), default="corpus", metavar="LIST",
                   help="corpus (windows of the built-in corpus), random (random token ids) or both")
    p.add_argument("--repeats", type=cli.positive_int, default=5, metavar="N",
                   help="timed repeats, each of --steps steps of every model and floor")
    p.add_argument("--steps", type=cli.bounded_int(1, 1_000_000, "steps"), default=10, metavar="N",
                   help="timed steps a repeat")
    p.add_argument("--warmup", type=cli.positive_int, default=3, metavar="N", help="untimed steps")
    p.add_argument("--reference", type=cli.path_arg, metavar="DIR",
                   help=f"the folder holding the chapter's {BUILD_PY}, whose PyTorch models are "
                        f"timed beside ours (torch needed: the parity extra); none: ours and "
                        f"the floor only")
    p.add_argument("--no-memory", action="store_true", help="no peak memory (fresh processes)")
    p.add_argument("--threads", type=cli.up_to_cpus, default=1, metavar="N",
                   help="BLAS threads, and torch's")
    p.add_argument("--seed", type=cli.nonnegative_int, default=0, help="of weights and batches")
    p.add_argument("--json", type=cli.path_arg, metavar="PATH", help="also write every figure")
    args = p.parse_args(argv)
    folder = args.reference
    if folder and not (folder / BUILD_PY).is_file():
        raise cli.UsageError(f"--reference: no {BUILD_PY} in {folder}")
    if folder and importlib.util.find_spec("torch") is None:
        raise cli.UsageError('--reference needs torch: pip install -e ".[parity]"')
    if args.json:
        cli.output_file(args.json)
    cli.blas_threads(args.threads)
    ref = load_reference(folder, args.threads) if folder else None
    if ref is None:
        print(f"PyTorch reference: none (--reference DIR, the folder of the chapter's "
              f"{BUILD_PY}); timing ours and the floor")
    memory = not args.no_memory and Path("/proc/self/status").is_file()   # VmHWM: Linux
    load = os.getloadavg()
    print(f"bench: {args.repeats} repeats x {args.steps} steps, {'+'.join(args.data)} batches, "
          f"{args.threads} thread(s), load {load[0]:.2f}", flush=True)
    rows = []
    for size in args.sizes:
        for variant in args.variants:
            row = measure(size, variant, args, ref)
            row["peak_mib"] = {name: peak_memory(name, size, variant, args, folder)
                               for name in ("ours", "torch") if memory and name in row["ms"]}
            print(render(row), flush=True)
            rows.append(row)
    if args.json:
        cli.write_outputs(args.json.parent, {args.json.name: json.dumps(dict(
            args={k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
            reference=ref and str(folder), platform=platform.platform(), cpus=os.cpu_count(),
            numpy=np.__version__, torch=ref and sys.modules["torch"].__version__,
            load_before=load, load_after=os.getloadavg(), results=rows), indent=1) + "\n"})
    return 0


if __name__ == "__main__":
    with cli.errors(PROG):
        sys.exit(run(sys.argv[1:]))
