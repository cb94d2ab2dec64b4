"""What RMSNorm saves over LayerNorm: FLOPs and bytes counted from our code, and measured time.

The chapter: RMSNorm has the "same regularization effect at ~half the FLOPs". This tests the FLOP
half on our ``layernorm_forward/backward`` and ``rmsnorm_forward/backward``, at the tiny model's
activation shape (B, T, C) = (32, 32, 64) and a larger (32, 128, 256), forward and
forward+backward: FLOPs and bytes counted by tracing the code (``_norm_counts.py`` states the
model), and the time per call (samples of at least 20 ms after warm-up, gc off, LayerNorm and
RMSNorm interleaved in alternating order; medians and IQRs of ``--repeats`` samples and of the
paired ratios RMSNorm / LayerNorm; minor page faults per call). Prints the table and the
verdict; writes ``run_log.txt`` (the same) and ``results.json`` (every count, op, sample and
ratio, and the ``claim`` block that ``four_variants --norm-cost`` cites) to ``--output-dir``.

    python -m experiments.norm_cost --tiny --repeats 51 --dtype float64 --output-dir out/
"""
import gc
import json
import math
import os
import platform
import time
from pathlib import Path

try:
    import resource
except ImportError:  # not on Unix: no page-fault counts
    resource = None

import numpy as np

from experiments import cli
from experiments._norm_counts import (LN_EPS, NORMS, PASSES, RMS_EPS, SCHEMA_VERSION, count,
                                      make_inputs, workload)

PROG = "python -m experiments.norm_cost"
SHAPES = {"tiny": (32, 32, 64), "large": (32, 128, 256)}   # (B, T, C)
MIN_SAMPLE_SECONDS = 0.02
WARMUP_CALLS = 3
MAX_REPEATS = 1000   # 8 cells of >= 20 ms a repeat: 1000 repeats take at least 160 s
CHAPTER_CLAIM = "RMSNorm: same regularization effect as LayerNorm, ~half the FLOPs."
#: A time ratio below PLAUSIBLE_LOW x the smallest counted cost ratio, above PLAUSIBLE_HIGH x the
#: largest (and 1), or whose paired repeats span more than WILD_SPREAD x, is a busy machine's
#: symptom, not a measurement: RMSNorm does a subset of LayerNorm's operations on the same arrays.
PLAUSIBLE_LOW, PLAUSIBLE_HIGH, WILD_SPREAD = 0.5, 2.0, 4.0
#: The fewest repeats whose quartiles are samples themselves with one beyond each (np.percentile
#: at 0.25 (n - 1)): with fewer there is no spread to compare a time ratio with, and no verdict.
MIN_VERDICT_REPEATS = 5


# ----------------------------------------------------------------------------- timing

def _minor_faults():
    """Minor page faults of this process so far (None off Unix)."""
    return None if resource is None else resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _sample(fn, number: int) -> float:
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number


def time_paired(fns: dict, repeats: int, min_sample: float = MIN_SAMPLE_SECONDS) -> dict:
    """Time zero-argument functions with interleaved samples, garbage collector off.

    Each is warmed up (``WARMUP_CALLS`` calls); ``number`` calls make one sample of the slowest
    last at least ``min_sample`` s; each of ``repeats`` rounds samples every function, in an
    order alternating between rounds.

    Returns:
        name -> {"number", "samples": seconds per call, one a round, "minor_faults_per_call"
        (None where ``resource`` is missing)}.
    """
    names = list(fns)
    per_call = {n: [_sample(fns[n], 1) for _ in range(WARMUP_CALLS)][-1]   # warm-up: the last
                for n in names}                                            # call's time counts
    number = max(1, math.ceil(min_sample / max(max(per_call.values()), 1e-9)))
    samples, faults = {n: [] for n in names}, {n: 0 for n in names}
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        for r in range(repeats):
            for n in (names if r % 2 == 0 else names[::-1]):
                f0 = _minor_faults()
                samples[n].append(_sample(fns[n], number))
                faults[n] += 0 if f0 is None else _minor_faults() - f0
    finally:
        if gc_was_on:
            gc.enable()
    have = _minor_faults() is not None
    return {n: {"number": number, "samples": samples[n],
                "minor_faults_per_call": faults[n] / (number * repeats) if have else None}
            for n in names}


def summarize(samples) -> dict:
    """Median, quartiles, min and max of a list of seconds (and the samples)."""
    a = np.asarray(samples, dtype=float)
    p25, med, p75 = np.percentile(a, [25, 50, 75])
    return {"median": float(med), "p25": float(p25), "p75": float(p75),
            "min": float(a.min()), "max": float(a.max()), "samples": a.tolist()}


def measure_shape(name: str, shape, dtype: str, repeats: int, seed: int) -> dict:
    """Counts and times of both norms and both passes at one shape."""
    inputs = make_inputs(shape, dtype, seed)
    args = (inputs["x"], inputs["dout"], inputs["weight"], inputs["bias"])
    B, T, C = shape
    entry = {"name": name, "B": B, "T": T, "C": C, "passes": {}}
    for pass_ in PASSES:
        res = {norm: count(norm, pass_, inputs) for norm in NORMS}
        timed = time_paired({n: (lambda f=workload(n, pass_): f(*args)) for n in NORMS}, repeats)
        for norm in NORMS:
            res[norm].update(number=timed[norm]["number"],
                             time_s=summarize(timed[norm]["samples"]),
                             minor_faults_per_call=timed[norm]["minor_faults_per_call"])
        pair = summarize(np.asarray(timed["rms"]["samples"]) / timed["ln"]["samples"])
        r = {k: res["rms"][k] / res["ln"][k] for k in ("flops", "bytes_unfused", "bytes_fused_min")}
        r.update({f"time_{k}": pair[k] for k in ("median", "p25", "p75", "min", "max")})
        r["time_implausible"] = implausible(r)
        res["ratio_rms_over_ln"] = r
        entry["passes"][pass_] = res
    return entry


# ----------------------------------------------------------------------------- the verdict

def implausible(r: dict):
    """Why a pass's measured time ratio cannot be trusted (a clause for the verdict), or None.

    Args:
        r: a ``ratio_rms_over_ln`` entry: ``flops``, ``bytes_unfused``, ``bytes_fused_min``,
            ``time_median``, ``time_min`` and ``time_max`` (of the per-repeat paired ratios).
    """
    costs = [r["flops"], r["bytes_unfused"], r["bytes_fused_min"]]
    low, high = PLAUSIBLE_LOW * min(costs), PLAUSIBLE_HIGH * max(costs + [1.0])
    if not low <= r["time_median"] <= high:
        return (f"outside the plausible range {low:.2f}-{high:.2f} ({PLAUSIBLE_LOW:g}x the "
                f"smallest and {PLAUSIBLE_HIGH:g}x the largest counted cost ratio)")
    lo, hi = r["time_min"], r["time_max"]
    if lo <= 0 or hi > WILD_SPREAD * lo:
        return (f"the repeats disagree wildly (paired ratios from {lo:.2f} to {hi:.2f}, more "
                f"than {WILD_SPREAD:g}x apart)")
    return None


def _saving(r: float) -> str:
    return f"{1 - r:.0%}"


def _flop_words(r: float) -> str:
    if abs(r - 0.5) <= 0.1:
        return f"{r:.2f}, about half (within 0.1 of 0.5): the claim holds"
    if r > 0.5:
        return f"{r:.2f}, more than half: RMSNorm saves {_saving(r)} of the FLOPs, not ~50%"
    return f"{r:.2f}, less than half: RMSNorm saves {_saving(r)} of the FLOPs"


def verdict(shapes: list, repeats: int) -> list:
    """The conclusions, in words, computed from the counts and the times of ``repeats``
    samples each (fewer than ``MIN_VERDICT_REPEATS``: the times are given, with no verdict)."""
    first = shapes[0]["passes"]
    out = [f"FLOPs RMSNorm/LayerNorm, counted from our code: forward "
           f"{_flop_words(first['forward']['ratio_rms_over_ln']['flops'])}; forward+backward "
           f"{_flop_words(first['forward_backward']['ratio_rms_over_ln']['flops'])}."]
    for s in shapes:
        for pass_ in PASSES:
            r = s["passes"][pass_]["ratio_rms_over_ln"]
            t, lo, hi, f, u = (r["time_median"], r["time_p25"], r["time_p75"], r["flops"],
                               r["bytes_unfused"])
            head = f"Time {s['B']}x{s['T']}x{s['C']} {pass_.replace('_', '+')}: RMSNorm/LayerNorm"
            why = implausible(r)
            if why is not None:
                out.append(f"{head} = {t:.2f} is not a measurement to quote: {why}; the machine "
                           f"was probably busy. Rerun with more --repeats on an idle machine.")
            elif repeats < MIN_VERDICT_REPEATS:
                out.append(f"{head} = {t:.2f} from {repeats} repeat{'s' * (repeats > 1)}: no "
                           f"spread to compare with the FLOP ratio {f:.2f}, so no verdict "
                           f"(--repeats {MIN_VERDICT_REPEATS} or more).")
            elif hi > 2 * lo:
                out.append(f"{head} = {t:.2f}, but the paired ratios spread too widely (IQR "
                           f"{lo:.2f}-{hi:.2f}) to compare with the FLOP ratio {f:.2f}; rerun "
                           f"with more --repeats on an idle machine.")
            else:
                if lo <= f <= hi:
                    rel = "consistent with the FLOP ratio"
                elif _saving(t) == _saving(f):  # outside the IQR, but equal as printed
                    rel = f"the saving the FLOPs predict ({_saving(f)})"
                else:
                    size = "smaller" if t > f else "larger"
                    rel = f"a {size} saving than the FLOPs predict ({_saving(t)} vs {_saving(f)})"
                nearer = "the unfused byte ratio" if abs(t - u) < abs(t - f) else "the FLOP ratio"
                out.append(f"{head} = {t:.2f} (IQR {lo:.2f}-{hi:.2f}); {rel}; nearer {nearer} "
                           f"({u:.2f} bytes, {f:.2f} FLOPs).")
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
    m = {p: first[p]["ratio_rms_over_ln"]["bytes_fused_min"] for p in PASSES}
    out.append(f"A fused kernel would move {m['forward']:.2f}x (forward) and "
               f"{m['forward_backward']:.2f}x (forward+backward) LayerNorm's bytes: where such a "
               f"kernel is limited by memory bandwidth, its saving would follow these ratios "
               f"rather than the FLOPs (not measured here).")
    return out


def report_lines(results: dict) -> list:
    """run_log.txt (and stdout): the table, the chapter's claim and the verdict."""
    cfg = results["config"]
    lines = [
        "# norm_cost run log",
        f"dtype {cfg['dtype']}, {cfg['repeats']} timed samples per cell (median, IQR), seed "
        f"{cfg['seed']}, {os.cpu_count()} CPUs, OPENBLAS_NUM_THREADS="
        f"{cfg['environment']['OPENBLAS_NUM_THREADS'] or 'unset'} (no BLAS call in these "
        f"functions)",
        "FLOPs and bytes counted from the code (experiments/_norm_counts.py); unfused bytes: "
        "every NumPy op reads its operands and writes its result once; fused min: inputs and "
        "outputs once.",
        "",
        f"{'shape':12s}  {'pass':16s}  {'norm':6s}  {'FLOPs':>10s}  {'bytes':>10s}  "
        f"{'fused min':>10s}  {'median us':>10s}  {'IQR us':>21s}  {'faults/call':>11s}",
    ]
    for s in results["shapes"]:
        shape = f"{s['B']}x{s['T']}x{s['C']}"
        for pass_ in PASSES:
            p = s["passes"][pass_]
            for norm in NORMS:
                c, t = p[norm], p[norm]["time_s"]
                faults = c["minor_faults_per_call"]
                lines.append(
                    f"{shape:12s}  {pass_.replace('_', '+'):16s}  {norm:6s}  {c['flops']:>10d}  "
                    f"{c['bytes_unfused']:>10d}  {c['bytes_fused_min']:>10d}  "
                    f"{t['median'] * 1e6:10.1f}  {t['p25'] * 1e6:10.1f} -{t['p75'] * 1e6:10.1f}  "
                    + (f"{'-':>11s}" if faults is None else f"{faults:>11.1f}"))
            r = p["ratio_rms_over_ln"]
            lines.append(
                f"{'':12s}  {'':16s}  {'rms/ln':6s}  {r['flops']:>10.2f}  "
                f"{r['bytes_unfused']:>10.2f}  {r['bytes_fused_min']:>10.2f}  "
                f"{r['time_median']:>10.2f}  {r['time_p25']:>10.2f} -{r['time_p75']:>10.2f}")
    lines += ["", f'The chapter: "{CHAPTER_CLAIM}"', "Measured:"]
    return lines + [f"- {v}" for v in results["claim"]["verdict"]]


# ----------------------------------------------------------------------------- the command

def run(argv=None) -> int:
    """Count the FLOPs and bytes of LayerNorm and RMSNorm from our code and time them,
    forward and forward+backward; print the verdict on the chapter's '~half the FLOPs' and
    write the files into ``--output-dir`` (each complete or absent).

    Args:
        argv (list[str] | None): the command's arguments (default ``sys.argv[1:]``).
    Returns:
        int: ``cli.EXIT_OK``.
    Raises:
        cli.UsageError: bad input (``cli.main`` prints one line, status 2).
    """
    p = cli.ArgumentParser(prog=PROG, description="LayerNorm vs RMSNorm: FLOPs and bytes counted "
                           "from our code, and measured time, forward and forward+backward; "
                           "tests the chapter's '~half the FLOPs'.")
    p.add_argument("--tiny", action="store_true",
                   help="only the tiny model's activation shape (32, 32, 64)")
    p.add_argument("--repeats", type=cli.bounded_int(1, MAX_REPEATS, "repeats"), default=15,
                   metavar="N", help=f"timed samples per measurement, at most {MAX_REPEATS}")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                   help="dtype of the activations (float32 is the model's)")
    p.add_argument("--seed", type=cli.nonnegative_int, default=0, help="seed of the random inputs")
    p.add_argument("--output-dir", type=cli.path_arg, default=Path("outputs") / "norm_cost",
                   metavar="DIR", help="where to write run_log.txt and results.json")
    args = p.parse_args(argv)
    out = cli.check_output_dir(args.output_dir, ("run_log.txt", "results.json"))

    shapes = []
    for name in (["tiny"] if args.tiny else SHAPES):
        cli.progress(f"norm_cost: shape {name} {SHAPES[name]} ...")
        shapes.append(measure_shape(name, SHAPES[name], args.dtype, args.repeats, args.seed))
    tiny = shapes[0]["passes"]
    env = {k: os.environ.get(k) for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                          "MKL_NUM_THREADS", "MALLOC_TOP_PAD_")}
    results = {
        "experiment": "norm_cost", "schema_version": SCHEMA_VERSION,
        "files": ["run_log.txt", "results.json"],
        "config": {"dtype": args.dtype, "repeats": args.repeats, "seed": args.seed,
                   "min_sample_seconds": MIN_SAMPLE_SECONDS, "warmup_calls": WARMUP_CALLS,
                   "eps": {"ln": LN_EPS, "rms": RMS_EPS},
                   "environment": dict(env, cpu_count=os.cpu_count())},
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "platform": platform.platform()},
        "shapes": shapes,
        "claim": {"quote": CHAPTER_CLAIM,
                  "flops_ratio": {p: tiny[p]["ratio_rms_over_ln"]["flops"] for p in PASSES},
                  "time_ratio": {"shape": "x".join(map(str, SHAPES["tiny"])),
                                 **{p: tiny[p]["ratio_rms_over_ln"]["time_median"]
                                    for p in PASSES}},
                  "verdict": verdict(shapes, args.repeats)},
    }
    lines = report_lines(results)
    cli.write_outputs(out, {
        "run_log.txt": "\n".join(lines) + "\n",
        "results.json": json.dumps(results, indent=1, allow_nan=False) + "\n"})
    print("\n".join(lines))
    print(f"\nOutputs written to {out.resolve()}")
    return cli.EXIT_OK


if __name__ == "__main__":
    cli.main(PROG, run)
