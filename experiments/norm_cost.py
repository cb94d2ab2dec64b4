"""What RMSNorm saves over LayerNorm: FLOPs and bytes counted from our code, and measured time.

The chapter ("The Details That Matter") says of RMSNorm: "Same regularization effect at ~half
the FLOPs" (build.py docstring; its run_log: "same regularization effect as LayerNorm, ~half
the FLOPs"). This command tests the FLOP half of that sentence on our own implementation: the
hand-derived NumPy pairs ``layers/layernorm.py`` (``layernorm_forward``/``layernorm_backward``)
and ``layers/rmsnorm.py`` (``rmsnorm_forward``/``rmsnorm_backward``).

For each activation shape (B, T, C) -- the tiny model's (32, 32, 64) and a larger (32, 128, 256)
-- and each pass (forward; forward+backward), it reports:

- FLOPs and bytes read/written, counted by running the functions on traced arrays
  (``experiments/_opcount.py``, which states the counting model: one FLOP per output element of
  an elementwise op, n - m adds for a reduction of n values to m, every NumPy operation reading
  its operands and writing its result once);
- the bytes of a fused kernel's lower bound: the function's inputs read once and its outputs
  (with the backward's cache) written once;
- the measured time per call: ``time.perf_counter`` around ``number`` calls (chosen so a sample
  lasts at least 20 ms), after warm-up, garbage collector off, LayerNorm and RMSNorm samples
  interleaved (their order alternating) so that a change in the machine's load hits both; the
  median and the interquartile range of ``--repeats`` samples, and the median of the per-repeat
  ratios RMSNorm / LayerNorm.

Usage::

    python -m experiments.norm_cost                # both shapes
    python -m experiments.norm_cost --tiny         # the tiny model's shape only
    python -m experiments.norm_cost --repeats 51 --dtype float64 --output-dir out/

Prints the table and the verdict; writes ``run_log.txt`` (the same) and ``results.json``
(``RESULTS_SCHEMA`` below) to ``--output-dir`` (default ``./outputs/norm_cost``) as one atomic
step. Exit status: 0 done; 2 bad input or outputs that cannot be written (one line on stderr,
nothing written); 130 interrupted (nothing written).
"""
from __future__ import annotations

import argparse

import gc
import json
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from experiments._atomic import AtomicGroup, check_replaceable
from experiments._cli import (ArgumentParser, Printer, UsageError, check_output_dir, fail,
                              interrupted, mark_outputs_written, new_run_id, nonnegative_int,
                              path_arg, positive_int, remove_empty_dirs, run_main)
from experiments._norm_counts import (LN_EPS, NORMS, PASSES, RMS_EPS, SCHEMA_VERSION,  # noqa: F401
                                      count, fused_min_bytes, load_claim, make_inputs, workload)

PROG = "python -m experiments.norm_cost"
DEFAULT_OUTPUT_DIR = Path("outputs") / "norm_cost"
SHAPES = {"tiny": (32, 32, 64), "large": (32, 128, 256)}   # (B, T, C)
MIN_SAMPLE_SECONDS = 0.02
WARMUP_CALLS = 3
CHAPTER_CLAIM = "RMSNorm: same regularization effect as LayerNorm, ~half the FLOPs."

RESULTS_SCHEMA = """\
results.json (schema_version 1):
  experiment: "norm_cost"; run_id: "<UTC time>-<8 hex digits>"; schema_version: 1
  config: {dtype, repeats, seed, min_sample_seconds, warmup_calls, eps: {ln, rms},
           environment: {OPENBLAS_NUM_THREADS, OMP_NUM_THREADS, MKL_NUM_THREADS, cpu_count,
                        MALLOC_TOP_PAD_, note}}
  counting_model: {flops, bytes_unfused, bytes_fused_min}  (words)
  versions: {python, numpy, platform}
  shapes: [ {name: "tiny"|"large", B, T, C,
             passes: {forward|forward_backward: {
                ln|rms: {flops, bytes_read, bytes_written, bytes_unfused, bytes_fused_min,
                         ops: [[name, flops, bytes_read, bytes_written], ...],
                         number, time_s: {median, p25, p75, min, max, samples: [...]},
                         minor_faults_per_call},
                ratio_rms_over_ln: {flops, bytes_unfused, bytes_fused_min,
                                    time_median, time_p25, time_p75, time_min, time_max,
                                    time_implausible: null or why the time ratio is not
                                    to be quoted (implausible(); the verdict says so too)}}}} ]
  claim: {quote, flops_ratio: {forward, forward_backward},
          time_ratio: {shape, forward, forward_backward}, verdict: [sentences]}
All ratios are RMSNorm / LayerNorm (< 1: RMSNorm cheaper). FLOP and byte counts do not depend
on the machine; times do. "claim" uses the tiny shape (the model's) for time.
"""


#: Upper bound of --repeats: each sample lasts at least MIN_SAMPLE_SECONDS in each of the 8
#: cells (2 shapes x 2 passes x 2 norms), so 1000 repeats take at least 160 s.
MAX_REPEATS = 1000


def _repeats(text: str) -> int:
    v = positive_int(text)
    if v > MAX_REPEATS:
        raise argparse.ArgumentTypeError(f"{text} is more than the maximum of {MAX_REPEATS} repeats")
    return v


def build_parser() -> ArgumentParser:
    """The command's argument parser (one-line errors, exit status 2)."""
    p = ArgumentParser(
        prog=PROG,
        description="LayerNorm vs RMSNorm: FLOPs and bytes counted from our code, and measured "
                    "time, forward and forward+backward; tests the chapter's '~half the FLOPs'.",
        epilog="Exit status: 0 done; 2 bad input (nothing written) or stdout not writable; "
               "130 interrupted (nothing written).",
    )
    p.add_argument("--tiny", action="store_true",
                   help="only the tiny model's activation shape (32, 32, 64)")
    p.add_argument("--repeats", type=_repeats, default=15, metavar="N",
                   help=f"timed samples per measurement, at most {MAX_REPEATS} (default 15)")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                   help="dtype of the activations (default float32, the model's)")
    p.add_argument("--seed", type=nonnegative_int, default=0,
                   help="seed of the random inputs (default 0)")
    p.add_argument("--output-dir", type=path_arg, default=DEFAULT_OUTPUT_DIR, metavar="DIR",
                   help=f"where to write run_log.txt and results.json (default "
                        f"{DEFAULT_OUTPUT_DIR})")
    return p


# ----------------------------------------------------------------------------- timing

def _minor_faults() -> Optional[int]:
    """Minor page faults of this process so far (None where ``resource`` is missing)."""
    try:
        import resource
    except ImportError:  # not on Unix
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _sample(fn: Callable, number: int) -> float:
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number


def time_paired(fns: Dict[str, Callable], repeats: int,
                min_sample: float = MIN_SAMPLE_SECONDS) -> Dict[str, Dict[str, Any]]:
    """Time several zero-argument functions with interleaved samples.

    Each function is warmed up (``WARMUP_CALLS`` calls), then ``number`` is chosen so that one
    sample of the slowest lasts at least ``min_sample`` seconds; each of ``repeats`` rounds takes
    one sample of every function, in an order that alternates between rounds. The garbage
    collector is off while timing.

    Returns:
        name -> {"number": calls per sample, "samples": seconds per call, one per round,
        "minor_faults_per_call": minor page faults of the process per call while timing
        (``resource.getrusage``; None where unavailable)}.
    """
    names = list(fns)
    per_call = {}
    for n in names:
        for _ in range(WARMUP_CALLS):
            per_call[n] = _sample(fns[n], 1)
    number = max(1, math.ceil(min_sample / max(max(per_call.values()), 1e-9)))
    samples = {n: [] for n in names}
    faults = {n: 0 for n in names}
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for r in range(repeats):
            for n in (names if r % 2 == 0 else names[::-1]):
                f0 = _minor_faults()
                samples[n].append(_sample(fns[n], number))
                if f0 is not None:
                    faults[n] += _minor_faults() - f0
    finally:
        if was_enabled:
            gc.enable()
    have_faults = _minor_faults() is not None
    return {n: {"number": number, "samples": samples[n],
                "minor_faults_per_call": faults[n] / (number * repeats) if have_faults
                else None} for n in names}


def summarize(samples: Sequence[float]) -> Dict[str, Any]:
    """Median, quartiles, min and max of a list of seconds."""
    a = np.asarray(samples, dtype=float)
    p25, med, p75 = np.percentile(a, [25, 50, 75])
    return {"median": float(med), "p25": float(p25), "p75": float(p75),
            "min": float(a.min()), "max": float(a.max()), "samples": [float(s) for s in a]}


# ----------------------------------------------------------------------------- the run

def measure_shape(name: str, shape, dtype: str, repeats: int, seed: int) -> Dict[str, Any]:
    """Counts and times of both norms and both passes at one shape."""
    inputs = make_inputs(shape, dtype, seed)
    B, T, C = shape
    entry: Dict[str, Any] = {"name": name, "B": B, "T": T, "C": C, "passes": {}}
    x, dout, w, b = inputs["x"], inputs["dout"], inputs["weight"], inputs["bias"]
    for pass_ in PASSES:
        res = {norm: count(norm, pass_, inputs) for norm in NORMS}
        fns = {norm: (lambda f=workload(norm, pass_): f(x, dout, w, b)) for norm in NORMS}
        timed = time_paired(fns, repeats)
        for norm in NORMS:
            res[norm]["number"] = timed[norm]["number"]
            res[norm]["time_s"] = summarize(timed[norm]["samples"])
            res[norm]["minor_faults_per_call"] = timed[norm]["minor_faults_per_call"]
        pair = np.asarray(timed["rms"]["samples"]) / np.asarray(timed["ln"]["samples"])
        p25, med, p75 = np.percentile(pair, [25, 50, 75])
        res["ratio_rms_over_ln"] = {
            k: res["rms"][k] / res["ln"][k] for k in ("flops", "bytes_unfused",
                                                      "bytes_fused_min")}
        res["ratio_rms_over_ln"].update(time_median=float(med), time_p25=float(p25),
                                        time_p75=float(p75), time_min=float(pair.min()),
                                        time_max=float(pair.max()))
        res["ratio_rms_over_ln"]["time_implausible"] = implausible(res["ratio_rms_over_ln"])
        entry["passes"][pass_] = res
    return entry


#: A measured time ratio RMSNorm/LayerNorm is taken as a symptom of a busy machine rather than a
#: measurement when it lies below PLAUSIBLE_LOW times the smallest of the counted cost ratios
#: (FLOPs, unfused bytes, fused-minimum bytes) or above PLAUSIBLE_HIGH times the largest of them
#: and 1: RMSNorm does a subset of LayerNorm's operations on the same arrays, so its time cannot
#: honestly be a tiny fraction of LayerNorm's nor a multiple of it. Likewise when the paired
#: per-repeat ratios disagree by more than WILD_SPREAD times (largest / smallest).
PLAUSIBLE_LOW, PLAUSIBLE_HIGH, WILD_SPREAD = 0.5, 2.0, 4.0


def implausible(r: Dict[str, Any]) -> Optional[str]:
    """Why a pass's measured time ratio cannot be trusted, or None when it can.

    Args:
        r: a ``ratio_rms_over_ln`` entry: ``flops``, ``bytes_unfused``, ``bytes_fused_min``,
            ``time_median`` and, when present, ``time_min`` and ``time_max`` (the smallest and
            largest per-repeat paired ratio).

    Returns:
        A clause for the verdict ("outside the plausible range 0.25-2.00 ..." or "the repeats
        disagree ..."), or None.
    """
    costs = [r["flops"], r["bytes_unfused"], r["bytes_fused_min"]]
    low, high = PLAUSIBLE_LOW * min(costs), PLAUSIBLE_HIGH * max(costs + [1.0])
    t = r["time_median"]
    if not (low <= t <= high):
        return (f"outside the plausible range {low:.2f}-{high:.2f} ({PLAUSIBLE_LOW:g}x the "
                f"smallest and {PLAUSIBLE_HIGH:g}x the largest counted cost ratio)")
    lo, hi = r.get("time_min"), r.get("time_max")
    if lo is not None and hi is not None and (lo <= 0 or hi > WILD_SPREAD * lo):
        return (f"the repeats disagree wildly (paired ratios from {lo:.2f} to {hi:.2f}, more "
                f"than {WILD_SPREAD:g}x apart)")
    return None


def _saving(r: float) -> str:
    return f"{1 - r:.0%}"


def verdict(shapes: List[Dict[str, Any]]) -> List[str]:
    """The conclusions, in words, computed from the counts and the times."""
    first = shapes[0]["passes"]
    f_fwd = first["forward"]["ratio_rms_over_ln"]["flops"]
    f_fb = first["forward_backward"]["ratio_rms_over_ln"]["flops"]
    out = []

    def flop_words(r: float) -> str:
        if abs(r - 0.5) <= 0.1:
            return f"{r:.2f}, about half (within 0.1 of 0.5): the claim holds"
        if r > 0.5:
            return f"{r:.2f}, more than half: RMSNorm saves {_saving(r)} of the FLOPs, not ~50%"
        return f"{r:.2f}, less than half: RMSNorm saves {_saving(r)} of the FLOPs"

    out.append(f"FLOPs RMSNorm/LayerNorm, counted from our code: forward {flop_words(f_fwd)}; "
               f"forward+backward {flop_words(f_fb)}.")
    for s in shapes:
        shape = f"{s['B']}x{s['T']}x{s['C']}"
        for pass_ in PASSES:
            r = s["passes"][pass_]["ratio_rms_over_ln"]
            t, lo, hi = r["time_median"], r["time_p25"], r["time_p75"]
            f, u = r["flops"], r["bytes_unfused"]
            why = implausible(r)
            if why is not None:
                out.append(f"Time {shape} {pass_.replace('_', '+')}: RMSNorm/LayerNorm = {t:.2f} "
                           f"is not a measurement to quote: {why}; the machine was probably "
                           f"busy. Rerun with more --repeats on an idle machine.")
                continue
            if hi > 2 * lo:
                out.append(f"Time {shape} {pass_.replace('_', '+')}: RMSNorm/LayerNorm = {t:.2f}, "
                           f"but the paired ratios spread too widely (IQR {lo:.2f}-{hi:.2f}) to "
                           f"compare with the FLOP ratio {f:.2f}; rerun with more --repeats "
                           f"on an idle machine.")
                continue
            if lo <= f <= hi:
                rel = "consistent with the FLOP ratio"
            elif _saving(t) == _saving(f):  # outside the IQR, but equal as printed
                rel = f"the saving the FLOPs predict ({_saving(f)})"
            elif t > f:
                rel = f"a smaller saving than the FLOPs predict ({_saving(t)} vs {_saving(f)})"
            else:
                rel = f"a larger saving than the FLOPs predict ({_saving(t)} vs {_saving(f)})"
            nearer = ("the unfused byte ratio" if abs(t - u) < abs(t - f)
                      else "the FLOP ratio")
            out.append(f"Time {shape} {pass_.replace('_', '+')}: RMSNorm/LayerNorm = {t:.2f} "
                       f"(IQR {lo:.2f}-{hi:.2f}); {rel}; nearer {nearer} ({u:.2f} bytes, "
                       f"{f:.2f} FLOPs).")
    for s in shapes:
        for pass_ in PASSES:
            f = {n: s["passes"][pass_][n]["minor_faults_per_call"] for n in NORMS}
            if None not in f.values() and max(f.values()) >= 1:
                out.append(
                    f"Page faults {s['B']}x{s['T']}x{s['C']} {pass_.replace('_', '+')}: "
                    f"LayerNorm {f['ln']:.0f} and RMSNorm {f['rms']:.0f} minor page faults per "
                    f"call: part of that time is the C allocator handing freed temporaries back "
                    f"to the system and faulting them in again, not arithmetic (on glibc, "
                    f"MALLOC_TOP_PAD_=67108864 in the environment avoids them).")
    m_fwd = first["forward"]["ratio_rms_over_ln"]["bytes_fused_min"]
    m_fb = first["forward_backward"]["ratio_rms_over_ln"]["bytes_fused_min"]
    out.append(f"A fused kernel would move {m_fwd:.2f}x (forward) and {m_fb:.2f}x "
               f"(forward+backward) LayerNorm's bytes: where such a kernel is limited by memory "
               f"bandwidth, its saving would follow these ratios rather than the FLOPs (not "
               f"measured here).")
    return out


def _environment() -> Dict[str, Any]:
    d = {k: os.environ.get(k) for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                        "MKL_NUM_THREADS")}
    d["cpu_count"] = os.cpu_count()
    d["MALLOC_TOP_PAD_"] = os.environ.get("MALLOC_TOP_PAD_")
    d["note"] = ("these functions make no BLAS call (elementwise ufuncs, reductions and "
                 "einsum without optimize); NumPy runs them on one thread")
    return d


def build_results(args, shapes: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The results.json document (see ``RESULTS_SCHEMA``)."""
    tiny = shapes[0]
    return {
        "experiment": "norm_cost",
        "run_id": new_run_id(),
        "schema_version": SCHEMA_VERSION,
        "config": {"dtype": args.dtype, "repeats": args.repeats, "seed": args.seed,
                   "min_sample_seconds": MIN_SAMPLE_SECONDS, "warmup_calls": WARMUP_CALLS,
                   "eps": {"ln": LN_EPS, "rms": RMS_EPS}, "environment": _environment()},
        "counting_model": {
            "flops": "one FLOP per output element of an elementwise ufunc; n - m additions "
                     "for a reduction of n values to m; einsum: (operands - 1) multiplications "
                     "per point of its iteration space + (space - output) additions; traced "
                     "from the code (experiments/_opcount.py)",
            "bytes_unfused": "each NumPy operation reads its array operands once and writes its "
                             "result once (nbytes); scalars free; caches ignored",
            "bytes_fused_min": "the function's array inputs read once and its outputs (and, "
                               "for the backward, the cache read back) once",
        },
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "platform": platform.platform()},
        "shapes": shapes,
        "claim": {
            "quote": CHAPTER_CLAIM,
            "flops_ratio": {p: tiny["passes"][p]["ratio_rms_over_ln"]["flops"] for p in PASSES},
            "time_ratio": {"shape": f"{tiny['B']}x{tiny['T']}x{tiny['C']}",
                           **{p: tiny["passes"][p]["ratio_rms_over_ln"]["time_median"]
                              for p in PASSES}},
            "verdict": verdict(shapes),
        },
    }


def summary_line(claim: Dict[str, Any]) -> str:
    """One line citing a ``load_claim`` result, for another report's closing block."""
    f, t = claim["flops_ratio"], claim["time_ratio"]
    return (f"RMSNorm/LayerNorm FLOPs {f['forward']:.2f} forward, {f['forward_backward']:.2f} "
            f"forward+backward (counted from our code); measured time {t['forward']:.2f} and "
            f"{t['forward_backward']:.2f} at {t['shape']} (python -m experiments.norm_cost)")


def _faults(f: Optional[float]) -> str:
    return f"{'-':>11s}" if f is None else f"{f:>11.1f}"


def _us(s: float) -> str:
    return f"{s * 1e6:10.1f}"


def report_lines(results: Dict[str, Any]) -> List[str]:
    """run_log.txt (and stdout): the table, the chapter's claim and the verdict."""
    cfg = results["config"]
    th = cfg["environment"]
    lines = [
        "# norm_cost run log",
        f"dtype {cfg['dtype']}, {cfg['repeats']} timed samples per cell (median, IQR), seed "
        f"{cfg['seed']}, {th['cpu_count']} CPUs, OPENBLAS_NUM_THREADS="
        f"{th['OPENBLAS_NUM_THREADS'] or 'unset'} (no BLAS call in these functions)",
        "FLOPs and bytes counted from the code (experiments/_opcount.py); unfused bytes: every "
        "NumPy op reads its operands and writes its result once; fused min: inputs and outputs "
        "once.",
        "",
        f"{'shape':12s}  {'pass':16s}  {'norm':6s}  {'FLOPs':>10s}  {'bytes':>10s}  "
        f"{'fused min':>10s}  {'median us':>10s}  {'IQR us':>21s}  {'faults/call':>11s}",
    ]
    for s in results["shapes"]:
        shape = f"{s['B']}x{s['T']}x{s['C']}"
        for pass_ in PASSES:
            p = s["passes"][pass_]
            for norm in NORMS:
                c = p[norm]
                t = c["time_s"]
                lines.append(
                    f"{shape:12s}  {pass_.replace('_', '+'):16s}  {norm:6s}  {c['flops']:>10d}  "
                    f"{c['bytes_unfused']:>10d}  {c['bytes_fused_min']:>10d}  "
                    f"{_us(t['median'])}  {_us(t['p25'])} -{_us(t['p75'])}  "
                    f"{_faults(c['minor_faults_per_call'])}")
            r = p["ratio_rms_over_ln"]
            lines.append(
                f"{'':12s}  {'':16s}  {'rms/ln':6s}  {r['flops']:>10.2f}  "
                f"{r['bytes_unfused']:>10.2f}  {r['bytes_fused_min']:>10.2f}  "
                f"{r['time_median']:>10.2f}  {r['time_p25']:>10.2f} -{r['time_p75']:>10.2f}")
    lines += ["", f'The chapter: "{CHAPTER_CLAIM}"', "Measured:"]
    lines += [f"- {v}" for v in results["claim"]["verdict"]]
    return lines


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command; returns the exit status (see the module docstring)."""
    args = build_parser().parse_args(argv)
    try:
        out = check_output_dir(args.output_dir)
        for name in ("results.json", "run_log.txt"):
            if (out / name).is_dir():
                raise UsageError(f"cannot write {out / name}: it is a directory")
            try:
                check_replaceable(out / name)
            except OSError as e:
                raise UsageError(f"cannot write {out / name}: {e.strerror}") from None
    except UsageError as e:
        fail(PROG, str(e))
    names = ["tiny"] if args.tiny else list(SHAPES)
    say = Printer()
    try:
        shapes = []
        for name in names:
            sys.stderr.write(f"norm_cost: shape {name} {SHAPES[name]} ...\n")
            shapes.append(measure_shape(name, SHAPES[name], args.dtype, args.repeats, args.seed))
        results = build_results(args, shapes)
        lines = report_lines(results)
    except KeyboardInterrupt:
        interrupted(PROG)
        return 130
    except MemoryError as e:
        fail(PROG, f"out of memory ({e})")

    created = [p for p in (out, *out.parents) if not p.exists()]  # deepest first
    group = AtomicGroup()
    try:
        out.mkdir(parents=True, exist_ok=True)
        with group:
            group.write_text(out / "results.json",
                             json.dumps(results, indent=1, allow_nan=False) + "\n")
            group.write_text(out / "run_log.txt", "\n".join(lines) + "\n")
    except KeyboardInterrupt:
        group.raise_if_committed(out)  # the files are in place: run_main says where
        remove_empty_dirs(created)
        interrupted(PROG)
        return 130
    except OSError as e:
        remove_empty_dirs(created)
        fail(PROG, f"cannot write the outputs to {out}: {e.strerror or e}; nothing written")
    mark_outputs_written(str(out.resolve()))
    for line in lines:
        say(line)
    say(f"\nOutputs written to {out.resolve()}")
    return 0




if __name__ == "__main__":
    raise SystemExit(run_main(PROG, main))
