"""Statistics of the study commands: mean and sample standard deviation over seeds, and the
paired difference of two variants with a Student-t confidence interval.

Seeds pair: the same seed gives every variant the same initialisation stream and the same batch
stream, so for a variant A and the baseline B the per-seed differences d_s = A_s - B_s remove
the run-to-run noise the two share. For n paired seeds::

    mean  = (1/n) sum d_s
    sd    = sqrt( sum (d_s - mean)^2 / (n - 1) )          (sample standard deviation)
    half  = t(1 - alpha/2, n - 1) * sd / sqrt(n)           (alpha = 0.05 for 95 %)
    interval = [mean - half, mean + half]

(Student 1908; any statistics text, e.g. Wasserman, "All of Statistics", 2004, section 10.)
The interval "excludes zero" when both ends have the same sign; otherwise the difference
"cannot be told apart from zero with n seeds".

The t quantile is computed exactly, not looked up: the Student-t CDF for t >= 0 is
``1 - I_x(df/2, 1/2) / 2`` with ``x = df / (df + t^2)`` (Abramowitz & Stegun 26.7.1 with 26.5.27),
the regularized incomplete beta ``I_x(a, b)`` is evaluated by its continued fraction (Numerical
Recipes, 3rd ed., section 6.4, modified Lentz), and the quantile is found by bisection. Standard
library only (no SciPy).
"""
from __future__ import annotations

import math
from typing import Any, Dict, Optional, Sequence

__all__ = ["betainc", "t_cdf", "t_ppf", "describe", "paired_difference", "verdict"]


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (Numerical Recipes 6.4, Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))  # even step
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))  # odd step
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function ``I_x(a, b)`` (``scipy.special.betainc``).

    Args:
        a, b: positive shape parameters.  x: in [0, 1].

    Returns:
        float in [0, 1].

    Raises:
        ValueError: ``a`` or ``b`` not positive, or ``x`` outside [0, 1].
    """
    if not (a > 0 and b > 0):
        raise ValueError(f"betainc needs a > 0 and b > 0, got a={a}, b={b}")
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"betainc needs 0 <= x <= 1, got {x}")
    if x == 0.0 or x == 1.0:
        return x
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom (``scipy.stats.t.cdf``)."""
    if not df > 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))  # P(T > |t|)
    return 1.0 - tail if t >= 0 else tail


def t_ppf(p: float, df: float) -> float:
    """The p-quantile of Student's t with ``df`` degrees of freedom (``scipy.stats.t.ppf``).

    Bisection on ``t_cdf`` to double precision; e.g. ``t_ppf(0.975, 4) = 2.7764451...``.

    Raises:
        ValueError: ``p`` not in (0, 1) or ``df`` not positive.
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p}")
    if not df > 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    if p < 0.5:
        return -t_ppf(1.0 - p, df)
    if p == 0.5:
        return 0.0
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def describe(values: Sequence[float]) -> Dict[str, Any]:
    """Count, mean and sample standard deviation (ddof 1) of ``values``.

    Returns:
        ``{"n", "mean", "std"}``; ``mean`` is None when n = 0, ``std`` None when n < 2.
    """
    xs = [float(v) for v in values]
    n = len(xs)
    mean = sum(xs) / n if n else None
    std = (math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1)) if n >= 2 else None)
    return {"n": n, "mean": mean, "std": std}


def verdict(low: Optional[float], high: Optional[float], n: int) -> str:
    """The plain sentence for an interval: "excludes zero" or "cannot be told apart from zero
    with n seeds" (or, with fewer than 2 seeds, that there is no interval)."""
    if n == 0:
        return "no seed where both trained"
    if low is None or high is None:
        return f"no interval from {n} seed{'s' if n != 1 else ''} (use --seeds 2 or more)"
    if low > 0 or high < 0:
        return "excludes zero"
    return f"cannot be told apart from zero with {n} seeds"


def paired_difference(a: Sequence[float], b: Sequence[float],
                      level: float = 0.95) -> Dict[str, Any]:
    """Mean of the paired differences ``a[i] - b[i]`` with a Student-t interval.

    Args:
        a, b: equal-length sequences of floats (one value per seed, same seed at each index).
        level: confidence level of the two-sided interval, in (0, 1).

    Returns:
        dict with ``n``, ``mean``, ``std`` (sample sd of the differences), ``t`` (the
        ``(1 + level) / 2`` quantile with n - 1 degrees of freedom), ``half_width``, ``low``,
        ``high``, ``level``, ``excludes_zero`` (bool) and ``verdict`` (the sentence). With
        n < 2 the interval fields are None (and with n = 0 the mean too).

    Raises:
        ValueError: ``a`` and ``b`` differ in length, or ``level`` is not in (0, 1).
    """
    if len(a) != len(b):
        raise ValueError(f"paired samples must have equal length, got {len(a)} and {len(b)}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    d = describe([float(x) - float(y) for x, y in zip(a, b)])
    n = d["n"]
    out = {"n": n, "mean": d["mean"], "std": d["std"], "level": level, "t": None,
           "half_width": None, "low": None, "high": None}
    if n >= 2:
        t = t_ppf(0.5 + level / 2.0, n - 1)
        half = t * d["std"] / math.sqrt(n)
        out.update(t=t, half_width=half, low=d["mean"] - half, high=d["mean"] + half)
    out["excludes_zero"] = bool(out["low"] is not None and (out["low"] > 0 or out["high"] < 0))
    out["verdict"] = verdict(out["low"], out["high"], n)
    return out
