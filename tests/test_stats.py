"""Tests of experiments.stats: the Student-t quantile, the paired interval, the verdict.

Oracles: printed t tables (t(0.975, 4) = 2.776, t(0.975, 9) = 2.262), the closed forms of the t
quantile for 1 and 2 degrees of freedom, the normal quantile 1.959964 in the limit, and an
interval computed by hand.
"""
import math

import pytest

from experiments.stats import describe, paired_difference, t_abs_cdf, t_ppf


def test_t_quantile_matches_the_printed_table():
    assert round(t_ppf(0.975, 4), 3) == 2.776
    assert round(t_ppf(0.975, 9), 3) == 2.262
    assert round(t_ppf(0.95, 4), 3) == 2.132
    assert round(t_ppf(0.995, 4), 3) == 4.604
    assert round(t_ppf(0.975, 29), 3) == 2.045


@pytest.mark.parametrize("p", [0.6, 0.9, 0.975, 0.999])
def test_t_quantile_closed_forms(p):
    # df = 1 is the Cauchy distribution: t = tan(pi (p - 1/2))
    assert t_ppf(p, 1) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-12)
    # df = 2: t = (2p - 1) / sqrt(2 p (1 - p))
    assert t_ppf(p, 2) == pytest.approx((2 * p - 1) / math.sqrt(2 * p * (1 - p)), rel=1e-12)


def test_t_tends_to_the_normal_and_inverts_its_cdf():
    assert t_ppf(0.975, 999) == pytest.approx(1.962341, abs=1e-6)   # printed tables, df 1000
    assert t_abs_cdf(0.0, 5) == 0.0
    for v in (3, 4, 7, 30):
        assert t_abs_cdf(t_ppf(0.9, v), v) == pytest.approx(0.8, abs=1e-13)


def test_describe_and_a_paired_interval_by_hand():
    assert describe([]) == {"n": 0, "mean": None, "std": None}
    assert describe([2.0]) == {"n": 1, "mean": 2.0, "std": None}
    # differences 1, 2, 3: mean 2, sd 1, half-width t(0.975, 2) / sqrt(3) = 4.302653 / 1.732051
    d = paired_difference([2.0, 4.0, 6.0], [1.0, 2.0, 3.0])
    assert d["mean"] == 2.0 and d["std"] == 1.0
    assert d["half_width"] == pytest.approx(4.302653 / math.sqrt(3), rel=1e-6)
    assert d["low"] < 0 < d["high"] and not d["excludes_zero"]
    # differences 1.9, 2, 2.1: sd 0.1, the interval [1.75, 2.25] excludes zero
    d = paired_difference([2.9, 4.0, 5.1], [1.0, 2.0, 3.0])
    assert d["low"] == pytest.approx(2 - 0.4302653 / math.sqrt(3), rel=1e-6)
    assert d["excludes_zero"] and d["verdict"] == "excludes zero"
    d = paired_difference([1.0, -1.0, 2.0], [0.0, 0.0, 0.0])
    assert not d["excludes_zero"] and d["verdict"] == "cannot be told apart from zero with 3 seeds"
    one = paired_difference([1.0], [0.5])
    assert one["mean"] == 0.5 and one["low"] is None and "no interval" in one["verdict"]
    assert paired_difference([], [])["verdict"] == "no seed where both trained"
    with pytest.raises(ValueError, match="equal length"):
        paired_difference([1.0, 2.0], [1.0])
