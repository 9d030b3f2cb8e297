"""The statistics behind an experiment's verdict (analysis/step_stats.py): Student's t quantiles
against the printed table, Welch's interval against a hand computation, the verdict's edges."""

from __future__ import annotations

import math

import pytest

from npuscope.analysis.step_stats import step_change, t_cdf, t_quantile, verdict

# two-sided 95% (p = 0.975) and 99% (p = 0.995) critical values of Student's t, from the table
TABLE = [
    (0.975, 1, 12.706),
    (0.975, 2, 4.303),
    (0.975, 4, 2.776),
    (0.975, 5, 2.571),
    (0.975, 8, 2.306),
    (0.975, 30, 2.042),
    (0.975, 120, 1.980),
    (0.995, 5, 4.032),
    (0.995, 10, 3.169),
    (0.95, 3, 2.353),
]


@pytest.mark.parametrize(("p", "df", "value"), TABLE)
def test_t_quantiles_are_the_tables(p, df, value):
    assert t_quantile(p, df) == pytest.approx(value, abs=1.5e-3)
    assert t_cdf(value, df) == pytest.approx(p, abs=2e-4)


def test_t_tends_to_the_normal_and_is_symmetric():
    assert t_quantile(0.975, 1e7) == pytest.approx(1.95996, abs=1e-4)
    assert t_quantile(0.025, 7) == pytest.approx(-t_quantile(0.975, 7), abs=1e-9)
    assert t_cdf(0.0, 3) == pytest.approx(0.5)


def test_welch_interval_by_hand():
    base, new = [10.0, 12.0, 14.0], [20.0, 22.0, 24.0, 26.0]
    c = step_change(base, new)
    vb, vn = 4.0 / 3, (20.0 / 3) / 4  # sample variances over n
    df = (vb + vn) ** 2 / (vb**2 / 2 + vn**2 / 3)
    assert c.df == pytest.approx(df) and df == pytest.approx(4.959, abs=1e-3)
    half = t_quantile(0.975, df) * math.sqrt(vb + vn)
    assert c.delta_us == 11.0 and c.delta_pct == pytest.approx(100 * 11 / 12)
    assert c.ci_us == pytest.approx((11 - half, 11 + half))
    assert 2.571 < half / math.sqrt(3) < 2.776  # between the table's df 5 and df 4
    assert c.ci_pct == pytest.approx((100 * (11 - half) / 12, 100 * (11 + half) / 12))
    assert verdict(c) == "regressed"


def test_an_interval_holding_zero_is_no_measurable_change():
    c = step_change([10.0, 14.0, 12.0], [11.0, 13.0, 12.5])
    assert c.ci_us is not None and c.ci_us[0] < 0 < c.ci_us[1]
    assert verdict(c) == "no measurable change"


def test_a_change_below_the_minimum_is_no_measurable_change():
    c = step_change([100.0, 100.1, 99.9], [99.0, 99.1, 98.9])  # -1%, a tight interval
    assert c.excludes_zero
    assert verdict(c, min_change_pct=0.5) == "improved"
    assert verdict(c, min_change_pct=2.0) == "no measurable change"


def test_one_step_has_no_interval_and_no_verdict():
    c = step_change([100.0], [50.0, 51.0])
    assert c.ci_us is None and c.ci_pct is None and not c.excludes_zero
    assert verdict(c) == "no measurable change"
    with pytest.raises(ValueError):
        step_change([], [1.0])


def test_identical_constant_steps_are_an_exact_interval():
    c = step_change([5.0, 5.0], [4.0, 4.0])
    assert c.ci_us == (-1.0, -1.0) and verdict(c) == "improved"
