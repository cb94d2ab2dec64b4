"""What RMSNorm saves over LayerNorm: FLOPs and bytes counted from our code, and time measured.

The chapter: RMSNorm has the "same regularization effect at ~half the FLOPs". This counts the
FLOPs and bytes of our ``layernorm_forward/backward`` and ``rmsnorm_forward/backward`` (as
``experiments/flops.py`` says) at the tiny model's activations (32, 32, 64) and at (32, 128, 256),
forward and forward+backward, and times them: ``--repeats`` samples of at least 20 ms each, the
two norms in alternating order, garbage collector off; medians and quartiles of the samples and
of the paired ratios RMSNorm / LayerNorm. Prints the table and the verdict, and writes them to
``run_log.txt`` and every count, op, sample and ratio to ``results.json`` in ``--output-dir``.

    python -m experiments.norm_cost --tiny --repeats 51 --dtype float64 --output-dir out/
"""
import json
import math
import sys
import timeit

from experiments import cli

PROG = "python -m experiments.norm_cost"
with cli.errors(PROG):   # Ctrl-C while NumPy loads: one line
    import numpy as np

    from experiments import flops

SHAPES = {"tiny": (32, 32, 64), "large": (32, 128, 256)}   # (B, T, C)
CLAIM = "RMSNorm: same regularization effect as LayerNorm, ~half the FLOPs."
MIN_VERDICT_REPEATS = 5   # fewer samples have no quartiles to compare a time ratio with


def quartiles(values):
    """``{"median", "p25", "p75", "samples"}`` of a list of times (us): the row's spread."""
    p25, median, p75 = np.percentile(values, [25, 50, 75])
    return {"median": median, "p25": p25, "p75": p75, "samples": [float(v) for v in values]}


def measure(shape, dtype, repeats, seed):
    """Counts and times of both norms in both passes at ``shape``."""
    inputs = flops.make_inputs(shape, dtype, seed)
    args = [inputs[k] for k in ("x", "dout", "weight", "bias")]
    passes = {}
    for pass_ in flops.PASSES:
        res = {norm: flops.count(norm, pass_, inputs) for norm in ("ln", "rms")}
        timers = {n: timeit.Timer(lambda f=flops.workload(n, pass_): f(*args)) for n in res}
        number = math.ceil(0.02 / min(t.timeit(3) / 3 for t in timers.values()))  # warm too
        samples = {n: [] for n in res}
        for r in range(repeats):
            for n in (("ln", "rms") if r % 2 == 0 else ("rms", "ln")):
                samples[n].append(timers[n].timeit(number) / number)   # gc off, as timeit does
        for n in res:
            res[n].update(calls_per_sample=number, time_s=quartiles(samples[n]))
        ratio = {k: res["rms"][k] / res["ln"][k] for k in ("flops", "bytes_unfused",
                                                            "bytes_fused_min")}
        ratio["time"] = quartiles(np.divide(samples["rms"], samples["ln"]))
        passes[pass_] = dict(res, rms_over_ln=ratio)
    return {"shape": "x".join(map(str, shape)), "passes": passes}


def verdict(shape, pass_, r, repeats):
    """One line: the time ratio at ``shape`` in ``pass_`` beside the counted ratios ``r``."""
    f, u, t = r["flops"], r["bytes_unfused"], r["time"]
    line = (f"Time {shape} {pass_.replace('_', '+')}: RMSNorm/LayerNorm {t['median']:.2f} (IQR "
            f"{t['p25']:.2f}-{t['p75']:.2f}), FLOPs {f:.2f}, unfused bytes {u:.2f}")
    if repeats < MIN_VERDICT_REPEATS:
        return f"{line}: too few repeats ({repeats}) for a spread to judge by, so no verdict " \
               f"(--repeats {MIN_VERDICT_REPEATS} or more)."
    if t["p25"] <= f <= t["p75"] or f"{t['median']:.2f}" == f"{f:.2f}":
        return f"{line}: the time saves what the FLOPs predict."
    nearer = "unfused bytes" if abs(t["median"] - u) < abs(t["median"] - f) else "FLOPs"
    return f"{line}: the time saves {'less' if t['median'] > f else 'more'} than the FLOPs " \
           f"predict; nearer the {nearer}."


def report(shapes, repeats, dtype):
    """The lines of run_log.txt and stdout: the table, the chapter's claim, the verdict."""
    lines = [f"# norm_cost: {dtype}, {repeats} timed samples a cell; FLOPs and bytes counted from "
             "the code (experiments/flops.py): unfused, every NumPy op reads its operands and "
             "writes its result once; fused min, a kernel's inputs and outputs once", "",
             f"{'shape':10s}  {'pass':16s}  {'norm':6s}  {'FLOPs':>10s}  {'bytes':>10s}  "
             f"{'fused min':>10s}  {'median us':>10s}  {'IQR us':>21s}"]
    for s in shapes:
        for pass_, p in s["passes"].items():
            head = f"{s['shape']:10s}  {pass_.replace('_', '+'):16s}"
            for n in ("ln", "rms"):
                c, t = p[n], {k: p[n]["time_s"][k] * 1e6 for k in ("median", "p25", "p75")}
                lines.append(f"{head}  {n:6s}  {c['flops']:>10d}  {c['bytes_unfused']:>10d}  "
                             f"{c['bytes_fused_min']:>10d}  {t['median']:10.1f}  "
                             f"{t['p25']:10.1f} -{t['p75']:10.1f}")
            r, t = p["rms_over_ln"], p["rms_over_ln"]["time"]
            lines.append(f"{head}  {'rms/ln':6s}  {r['flops']:>10.2f}  {r['bytes_unfused']:>10.2f}  "
                         f"{r['bytes_fused_min']:>10.2f}  {t['median']:10.2f}  "
                         f"{t['p25']:10.2f} -{t['p75']:10.2f}")
    first = {p: shapes[0]["passes"][p]["rms_over_ln"] for p in flops.PASSES}
    half = {p: "about half" if abs(r["flops"] - 0.5) <= 0.1 else
            f"not half: a {100 * (1 - r['flops']):.0f}% saving" for p, r in first.items()}
    found = [f"FLOPs RMSNorm/LayerNorm at {shapes[0]['shape']}: " + "; ".join(
        f"{p.replace('_', '+')} {r['flops']:.2f} ({half[p]})" for p, r in first.items())
        + "; a fused kernel would move " + " and ".join(
        f"{r['bytes_fused_min']:.2f}x ({p.replace('_', '+')})" for p, r in first.items())
        + " LayerNorm's bytes (where bandwidth bounds it, its saving follows the bytes)."]
    found += [verdict(s["shape"], p, s["passes"][p]["rms_over_ln"], repeats)
              for s in shapes for p in flops.PASSES]
    return lines + ["", f'The chapter: "{CLAIM}"', "Measured:"] + [f"- {v}" for v in found]


def run(argv):
    """Count and time LayerNorm and RMSNorm, print the table and the verdict on the chapter's
    '~half the FLOPs', write run_log.txt and results.json; 0. Bad input: ``cli.UsageError``."""
    p = cli.ArgumentParser(prog=PROG, description="LayerNorm vs RMSNorm: FLOPs and bytes counted "
                           "from our code, and time measured, forward and forward+backward.")
    p.add_argument("--tiny", action="store_true", help="only the tiny model's shape (32, 32, 64)")
    p.add_argument("--repeats", type=cli.bounded_int(1, 1000, "repeats"), default=15, metavar="N",
                   help="timed samples per measurement")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                   help="dtype of the activations (float32 is the model's)")
    p.add_argument("--seed", type=cli.nonnegative_int, default=0, help="seed of the inputs")
    p.add_argument("--output-dir", type=cli.path_arg, default="outputs/norm_cost", metavar="DIR",
                   help="where to write run_log.txt and results.json")
    args = p.parse_args(argv)
    out = cli.output_dir(args.output_dir)
    shapes = []
    for name in (["tiny"] if args.tiny else SHAPES):
        cli.progress(f"norm_cost: shape {name} {SHAPES[name]} ...")
        shapes.append(measure(SHAPES[name], args.dtype, args.repeats, args.seed))
    lines = report(shapes, args.repeats, args.dtype)
    results = {"experiment": "norm_cost", "files": ["run_log.txt", "results.json"],
               "config": {"dtype": args.dtype, "repeats": args.repeats, "seed": args.seed},
               "shapes": shapes, "claim": CLAIM, "verdict": [l[2:] for l in lines if l[:2] == "- "]}
    cli.write_outputs(out, {"run_log.txt": "\n".join(lines) + "\n",
                            "results.json": json.dumps(results, indent=1) + "\n"})
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    with cli.errors(PROG):
        sys.exit(run(sys.argv[1:]))
