"""Training-step benchmark: minigrad against the chapter's PyTorch models and the matmul floor.

For each model size and variant ({LayerNorm, RMSNorm} x {GELU, SwiGLU}) it measures, in one
process and on identical batches:

* ours: steady-state milliseconds per training step of ``gpt.GPT`` with ``AdamW`` (the loop of
  ``gpt.train``), split into forward (model and loss), backward (zero_grad and backward),
  clip (``clip_grad_norm_`` at 1.0) and optimizer (``AdamW.step``);
* the reference: the same for the chapter's PyTorch ``ModernGPT`` (from ``build.py``, loaded at
  run time, see ``experiments._torch_reference``), started from the same weights;
* the floor: the same step's matrix products alone (every forward and backward product, with
  NumPy, on contiguous float32 operands): what this machine cannot go below;
* peak resident memory of a fresh process doing the same steps (``VmHWM``, or
  ``resource.getrusage``), ours and the reference's, and what it held after its imports.

The three timings are interleaved: every repeat runs ``--steps`` steps of each, in alternating
order, so a change of machine load hits all three; ratios are taken within a repeat and
reported as the median and [min, max] over repeats.

Usage::

    python -m experiments.bench                          # three sizes, four variants
    python -m experiments.bench --sizes tiny --repeats 7 --steps 20 --json bench.json
    python -m experiments.bench --threads 2              # BLAS and torch on two threads

Sizes: tiny (d_model 64, 2 layers, T 32, B 32: the chapter's), small (128, 4, 64, 32),
medium (256, 6, 128, 16); 4 heads, learned positions, float32, the built-in corpus. Threads:
numpy's BLAS uses what ``OPENBLAS_NUM_THREADS`` says (all cores when unset); torch is set to the
same number (the commands set one thread unless told otherwise: ``--threads N``, see
``experiments._threads``).

Exit status: 0 done; 2 bad input (one line on stderr, nothing written); 130 interrupted.
"""
from __future__ import annotations

import multiprocessing
import os
import platform
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

from gpt import GPT, GPTConfig
from gpt.data import CharTokenizer, get_batch, load_corpus
from minigrad.optim import AdamW, clip_grad_norm_

from experiments import _torch_reference as reference
from experiments._threads import add_threads_option
from experiments._cli import (ArgumentParser, Printer, UsageError, check_json_path, fail,
                              nonnegative_int, path_arg, positive_int, run_main, write_json)
from experiments._runner import MAX_STEPS, VARIANTS, steps_arg

PROG = "python -m experiments.bench"
EXIT_OK, EXIT_INTERRUPTED = 0, 130
MEMORY_STEPS = 3  # steps run by the fresh process that measures the peak memory


@dataclass(frozen=True)
class Size:
    """A model and batch size: d_model, n_layers, block_size T, batch_size B (4 heads)."""

    d_model: int
    n_layers: int
    block_size: int
    batch_size: int
    n_heads: int = 4


SIZES = {
    "tiny": Size(64, 2, 32, 32),
    "small": Size(128, 4, 64, 32),
    "medium": Size(256, 6, 128, 16),
}


# ----------------------------------------------------------------------------- arguments
def _choices(allowed: Sequence[str], what: str):
    def parse(text: str) -> List[str]:
        items = [s.strip() for s in text.split(",") if s.strip()]
        bad = [s for s in items if s not in allowed]
        if not items or bad:
            import argparse
            raise argparse.ArgumentTypeError(
                f"unknown {what} {', '.join(bad) or repr(text)}; choose from {', '.join(allowed)}")
        return list(dict.fromkeys(items))
    return parse


VARIANT_NAMES = [f"{n}+{m}" for n, m in VARIANTS]


def build_parser() -> ArgumentParser:
    """The command's argument parser (one-line errors, exit status 2)."""
    p = ArgumentParser(prog=PROG, description="Time a GPT training step: minigrad, the chapter's "
                       "PyTorch models and the matrix products alone, side by side.",
                       epilog="Exit status: 0 done; 2 bad input; 130 interrupted.")
    p.add_argument("--sizes", type=_choices(list(SIZES), "size"), default=list(SIZES),
                   metavar="LIST", help=f"comma-separated, of {', '.join(SIZES)} (default all)")
    p.add_argument("--variants", type=_choices(VARIANT_NAMES, "variant"), default=VARIANT_NAMES,
                   metavar="LIST", help=f"comma-separated, of {', '.join(VARIANT_NAMES)} "
                                        "(default all)")
    p.add_argument("--repeats", type=positive_int, default=5, metavar="N",
                   help="timed repeats, each of --steps steps of ours, the reference and the "
                        "floor (default 5)")
    p.add_argument("--steps", type=steps_arg, default=10, metavar="N",
                   help=f"steps per repeat, at most {MAX_STEPS:,} (default 10)")
    p.add_argument("--warmup", type=positive_int, default=3, metavar="N",
                   help="untimed steps before the first repeat (default 3)")
    p.add_argument("--data", type=_choices(["corpus", "random"], "data"), default=["corpus"],
                   metavar="LIST", help="batches: corpus (windows of the built-in corpus), random "
                   "(uniformly random token ids as inputs and targets), or corpus,random for both "
                   "(default corpus)")
    ref = p.add_mutually_exclusive_group()
    ref.add_argument("--reference", type=path_arg, default=None, metavar="DIR",
                     help="folder of the chapter's PyTorch build.py (default: "
                          "shared/reference/torch_seed beside the checkout)")
    ref.add_argument("--no-reference", action="store_true", help="skip the PyTorch reference")
    p.add_argument("--no-memory", action="store_true",
                   help="skip the peak-memory measurement (two fresh processes per row)")
    p.add_argument("--seed", type=nonnegative_int, default=0,
                   help="seed of the weights and batches (default 0)")
    p.add_argument("--json", metavar="PATH", default=None,
                   help="also write every figure as JSON to PATH (atomically)")
    add_threads_option(p)
    return p


# ----------------------------------------------------------------------------- data
def make_batches(kind: str, data: np.ndarray, vocab_size: int, size: Size, n: int,
                 rng: np.random.Generator) -> list:
    """``n`` (x, y) int64 batches of shape (B, T): corpus windows (``gpt.data.get_batch``) or
    uniformly random token ids for both inputs and targets."""
    B, T = size.batch_size, size.block_size
    if kind == "random":
        return [(rng.integers(0, vocab_size, (B, T)), rng.integers(0, vocab_size, (B, T)))
                for _ in range(n)]
    return [tuple(np.ascontiguousarray(a) for a in get_batch(data, T, B, rng)) for _ in range(n)]


# ----------------------------------------------------------------------------- the floor
def step_matmuls(config: GPTConfig, B: int) -> List[tuple]:
    """Every matrix product of one training step as ``(batch, m, k, n)`` (``batch`` products of
    (m, k) @ (k, n)): forward, then each backward's two products (the input's and the weight's).

    A linear layer of N = B*T rows, C inputs, O outputs does (N,C)@(C,O) forward and
    (N,O)@(O,C) for dx and (O,N)@(N,C) for dW; attention does q k^T and P v forward and four
    products backward (dv, dP, dq, dk) per head; the tied output head is a linear layer.
    """
    C, T, H, V = config.d_model, config.block_size, config.n_heads, config.vocab_size
    N, hs = B * T, config.d_model // config.n_heads

    def linear(c_in, c_out):
        return [(1, N, c_in, c_out), (1, N, c_out, c_in), (1, c_out, N, c_in)]

    attention = [(B * H, T, hs, T), (B * H, T, T, hs)] + [(B * H, T, T, hs)] * 3 + \
                [(B * H, T, hs, T)]
    if config.mlp == "swiglu":
        F = int(C * 8 / 3)
        mlp = linear(C, F) + linear(C, F) + linear(F, C)
    else:
        mlp = linear(C, 4 * C) + linear(4 * C, C)
    block = linear(C, 3 * C) + attention + linear(C, C) + mlp
    return block * config.n_layers + linear(C, V)


class Floor:
    """Times the step's matrix products alone on preallocated contiguous float32 operands."""

    def __init__(self, config: GPTConfig, B: int, rng: np.random.Generator) -> None:
        shapes = step_matmuls(config, B)
        self.gflop = sum(2.0 * b * m * k * n for b, m, k, n in shapes) / 1e9
        self.ops = [(rng.standard_normal((b, m, k), dtype=np.float32),
                     rng.standard_normal((b, k, n), dtype=np.float32),
                     np.empty((b, m, n), dtype=np.float32)) for b, m, k, n in shapes]

    def step(self, batch) -> Dict[str, float]:
        t0 = time.perf_counter()
        for a, b, out in self.ops:
            np.matmul(a, b, out=out)
        return {"step": time.perf_counter() - t0}


# ----------------------------------------------------------------------------- training steps
class Ours:
    """``gpt.GPT`` + ``AdamW`` (lr 3e-3, weight_decay 0.01) + ``clip_grad_norm_`` (1.0)."""

    def __init__(self, model: GPT) -> None:
        self.model = model
        self.params = list(model.parameters())
        self.optimizer = AdamW(self.params, lr=3e-3, weight_decay=0.01)

    def step(self, batch) -> Dict[str, float]:
        x, y = batch
        t0 = time.perf_counter()
        _, loss = self.model(x, y)
        t1 = time.perf_counter()
        self.optimizer.zero_grad()
        loss.backward()
        t2 = time.perf_counter()
        clip_grad_norm_(self.params, 1.0)
        t3 = time.perf_counter()
        self.optimizer.step()
        t4 = time.perf_counter()
        self.loss = float(loss.item())
        return dict(forward=t1 - t0, backward=t2 - t1, clip=t3 - t2, optimizer=t4 - t3,
                    step=t4 - t0)


class Reference:
    """The chapter's ``ModernGPT`` trained as its ``train_variant`` does."""

    def __init__(self, torch_model) -> None:
        import torch
        self.torch = torch
        self.model = torch_model
        self.params = list(torch_model.parameters())
        self.optimizer = torch.optim.AdamW(self.params, lr=3e-3, weight_decay=0.01)

    def step(self, batch) -> Dict[str, float]:
        torch = self.torch
        x, y = (torch.from_numpy(a) for a in batch)
        t0 = time.perf_counter()
        _, loss = self.model(x, y)
        t1 = time.perf_counter()
        self.optimizer.zero_grad()
        loss.backward()
        t2 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(self.params, 1.0)
        t3 = time.perf_counter()
        self.optimizer.step()
        t4 = time.perf_counter()
        self.loss = float(loss.item())
        return dict(forward=t1 - t0, backward=t2 - t1, clip=t3 - t2, optimizer=t4 - t3,
                    step=t4 - t0)


def run_repeat(runner, batches) -> Dict[str, float]:
    """Run every batch through ``runner``; the median milliseconds per step of each phase."""
    times = [runner.step(b) for b in batches]
    return {k: 1e3 * float(np.median([t[k] for t in times])) for k in times[0]}


# ----------------------------------------------------------------------------- peak memory
def _peak_rss_child(impl: str, config: dict, batches: list, ref_folder: Optional[str]):
    """In a fresh process: (resident MiB after imports, peak resident MiB after the steps)."""
    with np.errstate(all="ignore"):
        if impl == "ours":
            base = _rss_mib()
            runner = Ours(GPT(GPTConfig.from_dict(config), seed=0))
        else:
            ref = reference.load_reference(Path(ref_folder))
            base = _rss_mib()
            c = GPTConfig.from_dict(config)
            cfg = ref.p5.GPTConfig(block_size=c.block_size, n_layers=c.n_layers,
                                   n_heads=c.n_heads, d_model=c.d_model)
            runner = Reference(ref.ModernGPT(cfg, vocab_size=c.vocab_size, norm_type=c.norm,
                                             mlp_type=c.mlp))
        for b in batches:
            runner.step(b)
    return base, _rss_mib()


def _rss_mib() -> float:
    """Peak resident MiB of this process so far: ``VmHWM`` of /proc/self/status where it exists
    (Linux carries ``getrusage``'s ru_maxrss over fork and exec, so a child started by a large
    parent would report the parent's peak), else ``resource.getrusage``."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def peak_memory(impl: str, config: GPTConfig, batches: list, ref_folder: Optional[Path]):
    """Run ``_peak_rss_child`` in a new interpreter (spawn), so that nothing else this process
    allocated counts; returns (after-imports MiB, peak MiB)."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        return pool.apply(_peak_rss_child, (impl, config.to_dict(), batches,
                                            None if ref_folder is None else str(ref_folder)))


# ----------------------------------------------------------------------------- one measurement
def _summary(values: Sequence[float]) -> Dict[str, float]:
    return {"median": float(np.median(values)), "min": float(np.min(values)),
            "max": float(np.max(values))}


def measure(size_name: str, variant: str, args, data, vocab_size, ref, ref_folder) -> list:
    """Time ours, the reference and the floor on one size and variant, for each kind of batches
    in ``args.data`` (``corpus``, ``random``), all interleaved in one loop; one JSON row a kind.

    Each kind gets its own models (same initial weights) and batches; the floor is shared.
    With both kinds, the random row also carries random/corpus step-time ratios per repeat.
    """
    size = SIZES[size_name]
    norm, mlp = variant.split("+")
    config = GPTConfig(vocab_size=vocab_size, block_size=size.block_size,
                       n_layers=size.n_layers, n_heads=size.n_heads, d_model=size.d_model,
                       norm=norm, mlp=mlp)
    n = args.warmup + args.repeats * args.steps
    batches, runners, first_loss = {}, {"floor": Floor(config, size.batch_size,
                                                       np.random.default_rng(args.seed))}, {}
    for kind in args.data:
        batches[kind] = make_batches(kind, data, vocab_size, size, n,
                                     np.random.default_rng(args.seed))
        model = GPT(config, seed=args.seed)
        runners[kind, "ours"] = Ours(model)
        if ref is not None:
            runners[kind, "reference"] = Reference(reference.torch_model_like(ref, model))
    any_batches = batches[args.data[0]]
    for key, r in runners.items():  # warm-up, untimed
        own = batches[key[0]] if key != "floor" else any_batches
        for i, b in enumerate(own[:args.warmup]):
            r.step(b)
            if i == 0 and key != "floor":
                first_loss[key] = r.loss
    per = {key: [] for key in runners}
    order = list(runners)
    for rep in range(args.repeats):
        lo = args.warmup + rep * args.steps
        for key in (order if rep % 2 == 0 else order[::-1]):  # alternate who goes first
            b = batches[key[0]] if key != "floor" else any_batches
            per[key].append(run_repeat(runners[key], b[lo:lo + args.steps]))

    floor = {k: _summary([r[k] for r in per["floor"]]) for k in per["floor"][0]}
    rows = []
    for kind in args.data:
        row = dict(size=size_name, variant=variant, data=kind, config=config.to_dict(),
                   batch_size=size.batch_size, floor_gflop=runners["floor"].gflop, floor=floor)
        steps = {}
        for name in ("ours", "reference"):
            if (kind, name) in per:
                reps = per[kind, name]
                row[name] = {k: _summary([r[k] for r in reps]) for k in reps[0]}
                steps[name] = [r["step"] for r in reps]
        row["ratios"] = {"ours_over_floor": _summary(
            [o / f["step"] for o, f in zip(steps["ours"], per["floor"])])}
        if ref is not None:
            row["ratios"]["ours_over_reference"] = _summary(
                [o / r for o, r in zip(steps["ours"], steps["reference"])])
            row["first_loss"] = {"ours": first_loss[kind, "ours"],
                                 "reference": first_loss[kind, "reference"]}
        if kind == "random" and "corpus" in args.data:
            for name in steps:
                row["ratios"][f"{name}_random_over_corpus"] = _summary(
                    [r["step"] / c["step"] for r, c in zip(per[kind, name], per["corpus", name])])
        if not args.no_memory:
            mem_batches = batches[kind][:MEMORY_STEPS]
            for name, folder in (("ours", None), ("reference", ref_folder)):
                if name in row:
                    base, peak = peak_memory(name, config, mem_batches, folder)
                    row[name]["peak_rss_mib"], row[name]["after_imports_mib"] = \
                        round(peak, 1), round(base, 1)
            if ref is not None:
                row["ratios"]["peak_rss_ours_over_reference"] = \
                    row["ours"]["peak_rss_mib"] / row["reference"]["peak_rss_mib"]
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------- report
def _ms(s: Dict[str, float]) -> str:
    return f"{s['median']:.2f}"


def _peak(d: dict) -> str:
    return f"  peak {d['peak_rss_mib']:.0f} MiB" if "peak_rss_mib" in d else ""


def _ratio(s: Dict[str, float]) -> str:
    return f"{s['median']:.2f} [{s['min']:.2f}-{s['max']:.2f}]"


def render(row: dict) -> str:
    """Lines for one size and variant: ms per step by phase and the ratios."""
    o = row["ours"]
    lines = [f"{row['size']:6s} {row['variant']:10s} {row['data']:6s} ours  {_ms(o['step']):>7s} ms  (fwd "
             f"{_ms(o['forward'])}, bwd {_ms(o['backward'])}, clip {_ms(o['clip'])}, opt "
             f"{_ms(o['optimizer'])}){_peak(o)}"]
    if "reference" in row:
        r = row["reference"]
        lines.append(f"{'':24s} torch {_ms(r['step']):>7s} ms  (fwd {_ms(r['forward'])}, bwd "
                     f"{_ms(r['backward'])}, clip {_ms(r['clip'])}, opt {_ms(r['optimizer'])})"
                     + _peak(r))
    lines.append(f"{'':24s} floor {_ms(row['floor']['step']):>7s} ms  "
                 f"({row['floor_gflop']:.2f} GFLOP of matrix products)")
    ratios = row["ratios"]
    text = f"{'':24s} ours/floor {_ratio(ratios['ours_over_floor'])}"
    if "ours_over_reference" in ratios:
        text += f"   ours/torch {_ratio(ratios['ours_over_reference'])}"
    if "peak_rss_ours_over_reference" in ratios:
        text += f"   memory ours/torch {ratios['peak_rss_ours_over_reference']:.2f}"
    lines.append(text)
    if "ours_random_over_corpus" in ratios:
        text = f"{'':24s} random/corpus: ours {_ratio(ratios['ours_random_over_corpus'])}"
        if "reference_random_over_corpus" in ratios:
            text += f"   torch {_ratio(ratios['reference_random_over_corpus'])}"
        lines.append(text)
    return "\n".join(lines)


def _threads() -> Dict[str, Optional[str]]:
    return {k: os.environ.get(k) for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                           "OPENBLAS_CORETYPE")}


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command; returns the exit status (see the module docstring)."""
    args = build_parser().parse_args(argv)
    say = Printer()
    try:
        json_path = None if args.json is None else check_json_path(args.json)
        ref_folder = None
        if not args.no_reference:
            ref_folder = args.reference or reference.find_reference()
            if args.reference is not None and not (args.reference / reference.BUILD_PY).is_file():
                raise UsageError(f"--reference: no {reference.BUILD_PY} in {args.reference}")
    except UsageError as e:
        fail(PROG, str(e))
    ref = None
    if ref_folder is None:
        if not args.no_reference:
            say("PyTorch reference: not found (no shared/reference/torch_seed beside the "
                "checkout; give --reference DIR); timing ours and the floor only")
    else:
        try:
            ref = reference.load_reference(ref_folder)
        except ImportError:
            say("PyTorch reference: torch is not installed; timing ours and the floor only")
            ref_folder = None
    threads = _threads()
    if ref is not None:
        import torch
        if threads["OPENBLAS_NUM_THREADS"]:
            torch.set_num_threads(int(threads["OPENBLAS_NUM_THREADS"]))
        threads["torch"] = str(torch.get_num_threads())
    text = load_corpus()
    tok = CharTokenizer(text)
    data = tok.encode(text)
    load = os.getloadavg()
    say(f"bench: {args.repeats} repeats x {args.steps} steps, {'+'.join(args.data)} batches, "
        f"threads {', '.join(f'{k}={v}' for k, v in threads.items() if v is not None)}, "
        f"load {load[0]:.2f}")
    rows = []
    try:
        with np.errstate(all="ignore"):
            for size_name in args.sizes:
                for variant in args.variants:
                    for row in measure(size_name, variant, args, data, tok.vocab_size, ref,
                                       ref_folder):
                        rows.append(row)
                        say(render(row))
    except KeyboardInterrupt:
        # one line, no blank line before it: no progress line is redrawn on stderr here
        sys.stderr.write(f"{PROG}: interrupted; nothing written\n")
        return EXIT_INTERRUPTED
    if json_path is not None:
        write_json(PROG, json_path, dict(
            command="bench", repeats=args.repeats, steps=args.steps, warmup=args.warmup,
            data=args.data, seed=args.seed, reference=None if ref is None else str(ref_folder),
            machine=dict(platform=platform.platform(), processor=platform.processor(),
                         cpus=os.cpu_count(), python=platform.python_version(),
                         numpy=np.__version__,
                         torch=None if ref is None else sys.modules["torch"].__version__),
            threads=threads, load_before=list(load), load_after=list(os.getloadavg()),
            results=rows))
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(run_main(PROG, main))
