"""Training-step benchmark: minigrad against the chapter's PyTorch models and the matmul floor.

For each size and variant, in one process and on the same batches: milliseconds per training
step of ``gpt.GPT`` with AdamW (forward, backward, clip, optimizer), of the chapter's PyTorch
``ModernGPT`` from the same weights (its ``build.py``, where torch is installed), and of the
step's matrix products alone (the floor: NumPy on contiguous float32 operands); and the peak
resident memory of a fresh process doing the same steps. Every repeat runs ``--steps`` steps of
each in alternating order, so a change of load hits all; ratios are taken within a repeat and
reported as the median [min-max] over repeats.

    python -m experiments.bench --sizes tiny --repeats 7 --steps 20 --json bench.json

Sizes (d_model, n_layers, T, B; 4 heads, learned positions, float32, the built-in corpus): tiny
(64, 2, 32, 32: the chapter's), small (128, 4, 64, 32), medium (256, 6, 128, 16); and cpu
(128, 4, 64, 12), the shape of ``--preset shakespeare-cpu``, measured when named.
"""
import argparse
import importlib.util
import os
import platform
import resource
import sys
import time
from pathlib import Path

import numpy as np

from gpt import GPT, GPTConfig
from gpt.data import BUILTIN_CORPUS_PATH, CharTokenizer, get_batch, load_corpus
from minigrad.optim import AdamW, clip_grad_norm_

from experiments import cli
from experiments.gradcheck_report import json_arg

PROG = "python -m experiments.bench"
SIZES = {"tiny": (64, 2, 32, 32), "small": (128, 4, 64, 32), "medium": (256, 6, 128, 16),
         "cpu": (128, 4, 64, 12)}   # cpu: the shape of --preset shakespeare-cpu (nanoGPT's)
DEFAULT_SIZES = "tiny,small,medium"
VARIANTS = ["ln+gelu", "rms+gelu", "ln+swiglu", "rms+swiglu"]
MAX_STEPS = 1_000_000
MEMORY_STEPS = 3  # steps run by the fresh process that measures the peak memory
BUILD_PY = Path("projects") / "07_the-details-that-matter" / "build.py"  # in a reference folder


# ----------------------------------------------------------------------------- the reference

def find_reference():
    """The first ``<ancestor>/shared/reference/torch_seed`` holding ``BUILD_PY``, from the
    checkout's parent up three levels; None when there is none."""
    for base in list(Path(__file__).resolve().parents[1].parents)[:3]:
        if (base / "shared" / "reference" / "torch_seed" / BUILD_PY).is_file():
            return base / "shared" / "reference" / "torch_seed"
    return None


def load_reference(folder: Path):
    """Import the chapter's ``build.py`` from a reference folder (ImportError without torch), with
    torch's threads set; its helpers read the corpus named by ``SEED_CORPUS`` (default: ours)."""
    import torch  # an ImportError here means: no reference
    if os.environ.get("OPENBLAS_NUM_THREADS"):   # torch on as many threads as NumPy's BLAS
        torch.set_num_threads(int(os.environ["OPENBLAS_NUM_THREADS"]))
    os.environ.setdefault("SEED_CORPUS", str(BUILTIN_CORPUS_PATH))
    spec = importlib.util.spec_from_file_location("chapter_build", Path(folder) / BUILD_PY)
    module = importlib.util.module_from_spec(spec)
    sys.modules["chapter_build"] = module
    spec.loader.exec_module(module)
    return module


def torch_model(ref, config: GPTConfig, state=None):
    """The chapter's ``ModernGPT`` of ``config``, with the weights ``state`` (a ``gpt.GPT``
    state_dict: PyTorch's names; the reference's ``lm_head.weight`` is the tied embedding)."""
    import torch
    c = config
    tm = ref.ModernGPT(ref.p5.GPTConfig(block_size=c.block_size, n_layers=c.n_layers,
                                        n_heads=c.n_heads, d_model=c.d_model),
                       vocab_size=c.vocab_size, norm_type=c.norm, mlp_type=c.mlp)
    if state is not None:
        state = {k: torch.from_numpy(v.copy()) for k, v in state.items()}
        state["lm_head.weight"] = state["token_embedding.weight"]
        missing, unexpected = tm.load_state_dict(state, strict=False)
        if unexpected or [k for k in missing if not k.endswith(".mask")]:
            raise ValueError(f"reference model does not match: missing {missing}, "
                             f"unexpected {unexpected}")
    return tm


# ----------------------------------------------------------------------------- the steps

def step_matmuls(config: GPTConfig, B: int) -> list:
    """Every matrix product of one training step as ``(batch, m, k, n)`` (``batch`` products of
    (m, k) @ (k, n)): forward, then each backward's two products.

    A linear layer of N = B*T rows, C inputs, O outputs does (N,C)@(C,O) forward, (N,O)@(O,C)
    for dx and (O,N)@(N,C) for dW; attention does q k^T and P v forward and four products
    backward (dv, dP, dq, dk) per head; the tied output head is a linear layer.
    """
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


class Floor:
    """The step's matrix products alone, on preallocated contiguous float32 operands."""

    def __init__(self, config: GPTConfig, B: int, rng: np.random.Generator) -> None:
        shapes = step_matmuls(config, B)
        self.gflop = sum(2.0 * b * m * k * n for b, m, k, n in shapes) / 1e9
        self.ops = [(rng.standard_normal((b, m, k), dtype=np.float32),
                     rng.standard_normal((b, k, n), dtype=np.float32),
                     np.empty((b, m, n), dtype=np.float32)) for b, m, k, n in shapes]

    def step(self, batch) -> dict:
        t0 = time.perf_counter()
        for a, b, out in self.ops:
            np.matmul(a, b, out=out)
        return {"step": time.perf_counter() - t0}


class Trainer:
    """One model and its AdamW (lr 3e-3, weight_decay 0.01) with clip_grad_norm_ at 1.0: ours
    (a ``gpt.GPT``) or, with ``torch`` given, the reference's; a step timed by phase."""

    def __init__(self, model, torch=None) -> None:
        self.model, self.torch, self.params = model, torch, list(model.parameters())
        optim = AdamW if torch is None else torch.optim.AdamW
        self.optimizer = optim(self.params, lr=3e-3, weight_decay=0.01)
        self.clip = clip_grad_norm_ if torch is None else torch.nn.utils.clip_grad_norm_

    def step(self, batch) -> dict:
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
        self.loss = float(loss.item())
        return dict(forward=t1 - t0, backward=t2 - t1, clip=t3 - t2, optimizer=t4 - t3,
                    step=t4 - t0)


def _quietly(fn, *args):
    np.seterr(all="ignore")  # a diverging reference step overflows
    return fn(*args)


def in_fresh_process(fn, *args):
    """``fn(*args)`` in a fresh interpreter (``cli.run_in_worker``): its NumPy reads the BLAS
    threads that ``cli.main`` set, and its memory is its own; NumPy's overflow warnings off."""
    return cli.run_in_worker(_quietly, fn, *args)


def make_batches(kind: str, data, vocab_size: int, B: int, T: int, n: int, seed: int) -> list:
    """``n`` (x, y) int batches of shape (B, T): windows of ``data`` (``gpt.data.get_batch``),
    or uniformly random token ids as inputs and targets."""
    rng = np.random.default_rng(seed)
    if kind == "random":
        return [(rng.integers(0, vocab_size, (B, T)), rng.integers(0, vocab_size, (B, T)))
                for _ in range(n)]
    return [tuple(np.ascontiguousarray(a) for a in get_batch(data, T, B, rng)) for _ in range(n)]


def _peak_rss_mib(impl: str, config: dict, batches: list, ref_folder) -> float:
    """In a fresh process: the peak resident MiB after a few steps of ``impl`` ("ours" or
    "reference"): ``VmHWM`` where /proc has it (Linux carries ``ru_maxrss`` over fork and exec),
    else ``resource.getrusage``."""
    config = GPTConfig.from_dict(config)
    trainer = (Trainer(GPT(config, seed=0)) if impl == "ours" else
               Trainer(torch_model(load_reference(ref_folder), config), sys.modules["torch"]))
    for b in batches:
        trainer.step(b)
    try:
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) / 1024.0  # kB
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


# ----------------------------------------------------------------------------- one row

def _summary(values) -> dict:
    return {"median": float(np.median(values)), "min": float(np.min(values)),
            "max": float(np.max(values))}


def measure(size_name: str, variant: str, args, data, vocab_size, ref_folder) -> list:
    """Time ours, the reference (when ``ref_folder``) and the floor on one size and variant, for
    each kind of batches in ``args.data``, all interleaved; one row a kind (run it in a fresh
    process). Each kind gets its own models (the same initial weights) and batches; the floor is
    shared. With both kinds, the random row also carries random/corpus step-time ratios."""
    d_model, n_layers, T, B = SIZES[size_name]
    norm, mlp = variant.split("+")
    config = GPTConfig(vocab_size=vocab_size, block_size=T, n_layers=n_layers, n_heads=4,
                       d_model=d_model, norm=norm, mlp=mlp)
    n_batches = args.warmup + args.repeats * args.steps
    floor = Floor(config, B, np.random.default_rng(args.seed))
    jobs = {}   # key -> (the floor or a Trainer, its batches); the floor first
    ref = None if ref_folder is None else load_reference(ref_folder)
    for kind in args.data:
        batches = make_batches(kind, data, vocab_size, B, T, n_batches, args.seed)
        jobs.setdefault("floor", (floor, batches))
        model = GPT(config, seed=args.seed)
        jobs[kind, "ours"] = (Trainer(model), batches)
        if ref is not None:
            jobs[kind, "reference"] = (Trainer(torch_model(ref, config, model.state_dict()),
                                               sys.modules["torch"]), batches)
    first_loss = {}
    for key, (job, batches) in jobs.items():  # warm-up, untimed
        for b in batches[:args.warmup]:
            job.step(b)
            first_loss.setdefault(key, getattr(job, "loss", None))
    per = {key: [] for key in jobs}   # per repeat: the median ms per step of each phase
    for rep in range(args.repeats):
        lo = args.warmup + rep * args.steps
        for key in (list(jobs) if rep % 2 == 0 else list(jobs)[::-1]):
            job, batches = jobs[key]
            times = [job.step(b) for b in batches[lo:lo + args.steps]]
            per[key].append({k: 1e3 * float(np.median([t[k] for t in times])) for k in times[0]})

    def phases(reps):   # each phase: the median [min-max] over repeats
        return {k: _summary([r[k] for r in reps]) for k in reps[0]}

    def over(a, b):     # the per-repeat step-time ratio a / b: median [min-max]
        return _summary([x["step"] / y["step"] for x, y in zip(per[a], per[b])])

    rows = []
    for kind in args.data:
        names = [n for n in ("ours", "reference") if (kind, n) in per]
        row = dict(size=size_name, variant=variant, data=kind, config=config.to_dict(),
                   batch_size=B, floor_gflop=floor.gflop, floor=phases(per["floor"]),
                   **{n: phases(per[kind, n]) for n in names})
        ratios = row["ratios"] = {"ours_over_floor": over((kind, "ours"), "floor")}
        if ref is not None:
            ratios["ours_over_reference"] = over((kind, "ours"), (kind, "reference"))
            row["first_loss"] = {n: first_loss[kind, n] for n in names}
        if kind == "random" and "corpus" in args.data:
            for n in names:
                ratios[f"{n}_random_over_corpus"] = over((kind, n), ("corpus", n))
        rows.append(row)
    return rows


def add_peak_memory(row: dict, data, ref_folder, seed: int) -> None:
    """Add each implementation's peak resident MiB, in a fresh process doing ``MEMORY_STEPS``
    steps of the row's batches, and their ratio."""
    batches = make_batches(row["data"], data, row["config"]["vocab_size"], row["batch_size"],
                           row["config"]["block_size"], MEMORY_STEPS, seed)
    for name in [n for n in ("ours", "reference") if n in row]:
        row[name]["peak_rss_mib"] = round(in_fresh_process(
            _peak_rss_mib, name, row["config"], batches, ref_folder), 1)
    if "reference" in row:
        row["ratios"]["peak_rss_ours_over_reference"] = \
            row["ours"]["peak_rss_mib"] / row["reference"]["peak_rss_mib"]


def render(row: dict) -> str:
    """Lines for one size and variant: ms per step by phase and the ratios."""
    def phases(d):
        return (f"{d['step']['median']:>7.2f} ms  (fwd {d['forward']['median']:.2f}, bwd "
                f"{d['backward']['median']:.2f}, clip {d['clip']['median']:.2f}, opt "
                f"{d['optimizer']['median']:.2f})"
                + (f"  peak {d['peak_rss_mib']:.0f} MiB" if "peak_rss_mib" in d else ""))

    def ratio(s):
        return f"{s['median']:.2f} [{s['min']:.2f}-{s['max']:.2f}]"

    pad, r = " " * 24, row["ratios"]
    lines = [f"{row['size']:6s} {row['variant']:10s} {row['data']:6s} ours  {phases(row['ours'])}"]
    if "reference" in row:
        lines.append(f"{pad} torch {phases(row['reference'])}")
    lines.append(f"{pad} floor {row['floor']['step']['median']:>7.2f} ms  "
                 f"({row['floor_gflop']:.2f} GFLOP of matrix products)")
    text = f"{pad} ours/floor {ratio(r['ours_over_floor'])}"
    if "ours_over_reference" in r:
        text += f"   ours/torch {ratio(r['ours_over_reference'])}"
    if "peak_rss_ours_over_reference" in r:
        text += f"   memory ours/torch {r['peak_rss_ours_over_reference']:.2f}"
    lines.append(text)
    if "ours_random_over_corpus" in r:
        lines.append(f"{pad} random/corpus: ours {ratio(r['ours_random_over_corpus'])}"
                     + (f"   torch {ratio(r['reference_random_over_corpus'])}"
                        if "reference_random_over_corpus" in r else ""))
    return "\n".join(lines)


# ----------------------------------------------------------------------------- the command

def _choices(allowed, what: str):
    """An argument type: a comma-separated list of names from ``allowed``."""
    def parse(text: str) -> list:
        items = [s.strip() for s in text.split(",") if s.strip()]
        bad = [s for s in items if s not in allowed]
        if not items or bad:
            raise argparse.ArgumentTypeError(
                f"unknown {what} {', '.join(bad) or repr(text)}; choose from {', '.join(allowed)}")
        return list(dict.fromkeys(items))
    return parse


def run(argv=None) -> int:
    """Time training steps of minigrad, the chapter's PyTorch models and the matrix products
    alone, per size and variant; print the table (and ``--json``).

    Args:
        argv (list[str] | None): the command's arguments (default ``sys.argv[1:]``).
    Returns:
        int: ``cli.EXIT_OK``.
    Raises:
        cli.UsageError: bad input (``cli.main`` prints one line, status 2).
    """
    p = cli.ArgumentParser(prog=PROG, description="Time a GPT training step: minigrad, the "
                           "chapter's PyTorch models and the matrix products alone, side by side.")
    p.add_argument("--sizes", type=_choices(SIZES, "size"), default=DEFAULT_SIZES, metavar="LIST",
                   help=f"comma-separated, of {', '.join(SIZES)}")
    p.add_argument("--variants", type=_choices(VARIANTS, "variant"), default=",".join(VARIANTS),
                   metavar="LIST", help=f"comma-separated, of {', '.join(VARIANTS)}")
    p.add_argument("--repeats", type=cli.positive_int, default=5, metavar="N",
                   help="timed repeats, each of --steps steps of ours, the reference and the floor")
    p.add_argument("--steps", type=cli.bounded_int(1, MAX_STEPS, "steps"), default=10,
                   metavar="N", help=f"steps per repeat, at most {MAX_STEPS:,}")
    p.add_argument("--warmup", type=cli.positive_int, default=3, metavar="N",
                   help="untimed steps before the first repeat")
    p.add_argument("--data", type=_choices(["corpus", "random"], "data"), default="corpus",
                   metavar="LIST", help="batches: corpus (windows of the built-in corpus), random "
                   "(uniformly random token ids as inputs and targets), or corpus,random")
    ref_group = p.add_mutually_exclusive_group()
    ref_group.add_argument("--reference", type=cli.path_arg, default=None, metavar="DIR",
                           help="folder of the chapter's PyTorch build.py; None: "
                                "shared/reference/torch_seed beside the checkout")
    ref_group.add_argument("--no-reference", action="store_true",
                           help="skip the PyTorch reference")
    p.add_argument("--no-memory", action="store_true",
                   help="skip the peak-memory measurement (two fresh processes per row)")
    p.add_argument("--seed", type=cli.nonnegative_int, default=0,
                   help="seed of the weights and batches")
    p.add_argument("--json", type=json_arg, default=None, metavar="PATH",
                   help="also write every figure as JSON to PATH")
    cli.add_threads_option(p)
    args = p.parse_args(argv)
    if args.reference is not None and not (args.reference / BUILD_PY).is_file():
        raise cli.UsageError(f"--reference: no {BUILD_PY} in {args.reference}")

    ref_folder = None if args.no_reference else args.reference or find_reference()
    ref = None
    if ref_folder is None and not args.no_reference:
        print("PyTorch reference: not found (no shared/reference/torch_seed beside the "
              "checkout; give --reference DIR); timing ours and the floor only")
    elif ref_folder is not None:
        try:
            ref = load_reference(ref_folder)
        except ImportError:
            print("PyTorch reference: torch is not installed; timing ours and the floor only")
            ref_folder = None
    threads = {k: os.environ.get(k) for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                              "OPENBLAS_CORETYPE")}
    if ref is not None:
        threads["torch"] = str(sys.modules["torch"].get_num_threads())
    text = load_corpus()
    tok = CharTokenizer(text)
    data = tok.encode(text)
    load = os.getloadavg()
    print(f"bench: {args.repeats} repeats x {args.steps} steps, {'+'.join(args.data)} batches, "
          f"threads {', '.join(f'{k}={v}' for k, v in threads.items() if v is not None)}, "
          f"load {load[0]:.2f}", flush=True)
    rows = []
    for size_name in args.sizes:
        for variant in args.variants:
            for row in in_fresh_process(measure, size_name, variant, args, data, tok.vocab_size,
                                        ref_folder):
                if not args.no_memory:
                    add_peak_memory(row, data, ref_folder, args.seed)
                rows.append(row)
                print(render(row), flush=True)
    if args.json is not None:
        cli.write_json(args.json, dict(
            command="bench", repeats=args.repeats, steps=args.steps, warmup=args.warmup,
            data=args.data, seed=args.seed, reference=None if ref is None else str(ref_folder),
            machine=dict(platform=platform.platform(), processor=platform.processor(),
                         cpus=os.cpu_count(), python=platform.python_version(),
                         numpy=np.__version__,
                         torch=None if ref is None else sys.modules["torch"].__version__),
            threads=threads, load_before=list(load), load_after=list(os.getloadavg()),
            results=rows))
    return cli.EXIT_OK


if __name__ == "__main__":
    cli.main(PROG, run)
