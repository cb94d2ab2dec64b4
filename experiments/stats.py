"""Statistics over seeds: mean and sample standard deviation, and the paired difference of two
variants with a Student-t confidence interval.

Seeds pair: the same seed gives every variant the same initialisation and the same batches, so
for a variant A and the baseline B the per-seed differences d_s = A_s - B_s cancel the noise
the two share. For n paired seeds (Student 1908; e.g. Wasserman, "All of Statistics", 2004)::

    mean = (1/n) sum d_s,   sd = sqrt(sum (d_s - mean)^2 / (n - 1)),
    interval = mean -+ t(0.975, n - 1) * sd / sqrt(n)                       (95 %)

The t quantile is computed, not looked up: for an integer number of degrees of freedom v,
P(|T| < t) has a closed form in theta = atan(t / sqrt(v)) (Abramowitz & Stegun 26.7.3-4),
inverted by bisection. Standard library only.
"""
import math


def t_abs_cdf(t, v):
    """P(|T| < t) for Student's t with ``v`` (an integer >= 1) degrees of freedom, t >= 0."""
    theta = math.atan(t / math.sqrt(v))
    c2, term, total = math.cos(theta) ** 2, 1.0, 1.0
    for k in range(2 if v % 2 else 1, v - 1, 2):   # the series up to cos^(v-2)
        term *= c2 * k / (k + 1)
        total += term
    if v % 2 == 0:
        return math.sin(theta) * total
    return 2 / math.pi * (theta + (math.sin(theta) * math.cos(theta) * total if v > 1 else 0))


def t_ppf(p, v):
    """The ``p`` quantile (p >= 0.5) of Student's t with ``v`` degrees of freedom
    (``scipy.stats.t.ppf``), e.g. ``t_ppf(0.975, 4) = 2.7764451...``."""
    lo, hi = 0.0, 1.0
    while t_abs_cdf(hi, v) < 2 * p - 1:
        lo, hi = hi, 2 * hi
    for _ in range(200):
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        lo, hi = (mid, hi) if t_abs_cdf(mid, v) < 2 * p - 1 else (lo, mid)
    return (lo + hi) / 2


def describe(values):
    """``{"n", "mean", "std"}`` of ``values`` (sample sd, ddof 1); mean None when n = 0, std
    None when n < 2."""
    xs = [float(x) for x in values]
    n = len(xs)
    mean = sum(xs) / n if n else None
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1)) if n >= 2 else None
    return {"n": n, "mean": mean, "std": std}


def paired_difference(a, b, level=0.95):
    """Mean of the paired differences ``a[i] - b[i]`` (one value a seed, the same seed at each
    index) with a two-sided Student-t interval at ``level``.

    Returns ``{"n", "mean", "std", "level", "t", "half_width", "low", "high", "excludes_zero",
    "verdict"}``; with n < 2 the interval fields are None (and with n = 0 the mean too).
    Raises ``ValueError`` when ``a`` and ``b`` differ in length.
    """
    if len(a) != len(b):
        raise ValueError(f"paired samples must have equal length, got {len(a)} and {len(b)}")
    d = describe([float(x) - float(y) for x, y in zip(a, b)])
    n = d["n"]
    out = {**d, "level": level, "t": None, "half_width": None, "low": None, "high": None}
    if n >= 2:
        t = t_ppf(0.5 + level / 2, n - 1)
        half = t * d["std"] / math.sqrt(n)
        out.update(t=t, half_width=half, low=d["mean"] - half, high=d["mean"] + half)
    out["excludes_zero"] = n >= 2 and (out["low"] > 0 or out["high"] < 0)
    out["verdict"] = ("no seed where both trained" if n == 0 else
                      f"no interval from {n} seed (use --seeds 2 or more)" if n == 1 else
                      "excludes zero" if out["excludes_zero"] else
                      f"cannot be told apart from zero with {n} seeds")
    return out
