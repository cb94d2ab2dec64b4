"""Tests of experiments._stats: the Student-t quantile, the paired interval, the verdict.

Oracles: printed t tables (t(0.975, 4) = 2.776, t(0.975, 9) = 2.262), the closed forms of the t
quantile for 1 and 2 degrees of freedom, the normal quantile 1.959964 in the limit, closed forms
of the incomplete beta, and an interval computed by hand.
"""
import math

import pytest

from experiments._stats import betainc, describe, paired_difference, t_cdf, t_ppf, verdict


def test_t_quantile_matches_the_printed_table():
    assert round(t_ppf(0.975, 4), 3) == 2.776
    assert round(t_ppf(0.975, 9), 3) == 2.262
    assert round(t_ppf(0.95, 4), 3) == 2.132
    assert round(t_ppf(0.995, 4), 3) == 4.604


@pytest.mark.parametrize("p", [0.6, 0.9, 0.975, 0.999])
def test_t_quantile_closed_forms(p):
    # df = 1 is the Cauchy distribution: t = tan(pi (p - 1/2))
    assert t_ppf(p, 1) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-12)
    # df = 2: t = (2p - 1) / sqrt(2 p (1 - p))
    assert t_ppf(p, 2) == pytest.approx((2 * p - 1) / math.sqrt(2 * p * (1 - p)), rel=1e-12)
    assert t_ppf(1 - p, 3) == pytest.approx(-t_ppf(p, 3), rel=1e-12)


def test_t_tends_to_the_normal():
    assert t_ppf(0.975, 1e7) == pytest.approx(1.959964, abs=1e-5)
    assert t_cdf(0.0, 5) == 0.5
    assert t_cdf(t_ppf(0.9, 7), 7) == pytest.approx(0.9, abs=1e-13)


@pytest.mark.parametrize("x", [0.01, 0.3, 0.5, 0.77, 0.99])
def test_incomplete_beta_closed_forms(x):
    assert betainc(1, 1, x) == pytest.approx(x, rel=1e-13)
    assert betainc(3.5, 1, x) == pytest.approx(x ** 3.5, rel=1e-12)
    assert betainc(1, 2.5, x) == pytest.approx(1 - (1 - x) ** 2.5, rel=1e-12)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="p must be"):
        t_ppf(1.0, 3)
    with pytest.raises(ValueError, match="degrees of freedom"):
        t_ppf(0.9, 0)
    with pytest.raises(ValueError, match="equal length"):
        paired_difference([1.0, 2.0], [1.0])


def test_paired_interval_by_hand():
    # d = a - b = [0.5, 1, 0.5, 1, 1]: mean 0.8, sum of squared deviations 0.30, sd^2 = 0.075,
    # se = sqrt(0.075 / 5) = 0.1224745, half width = 2.7764451 * 0.1224745 = 0.3400437
    d = paired_difference([1.0, 2.0, 3.0, 4.0, 5.0], [0.5, 1.0, 2.5, 3.0, 4.0])
    assert d["n"] == 5
    assert d["mean"] == pytest.approx(0.8)
    assert d["std"] == pytest.approx(math.sqrt(0.075))
    assert d["half_width"] == pytest.approx(0.3400437, abs=1e-7)
    assert d["low"] == pytest.approx(0.4599563, abs=1e-7)
    assert d["high"] == pytest.approx(1.1400437, abs=1e-7)
    assert d["excludes_zero"] and d["verdict"] == "excludes zero"


def test_an_interval_across_zero_cannot_be_told_apart():
    # d = [1, -1]: mean 0, sd sqrt(2), se 1, half width t(0.975, 1) = 12.706
    d = paired_difference([2.0, 0.0], [1.0, 1.0])
    assert d["mean"] == 0.0 and d["half_width"] == pytest.approx(12.7062047, abs=1e-6)
    assert not d["excludes_zero"]
    assert d["verdict"] == "cannot be told apart from zero with 2 seeds"


def test_one_seed_has_no_interval():
    d = paired_difference([2.0], [1.5])
    assert d["mean"] == 0.5 and d["low"] is None and d["std"] is None
    assert "no interval" in d["verdict"] and not d["excludes_zero"]
    assert verdict(-0.3, -0.1, 4) == "excludes zero"


def test_describe_uses_the_sample_standard_deviation():
    d = describe([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0])  # sum of squares 32, n - 1 = 7
    assert d["mean"] == 5.0 and d["std"] == pytest.approx(math.sqrt(32 / 7))
    assert describe([]) == {"n": 0, "mean": None, "std": None}
