"""Is a change in mean step time real? Welch's interval on the difference of two runs' steps.

Two captures of the same job differ by noise; one profiled step each cannot tell a 2% gain from
it. `step_change(base, new)` takes each run's per-step times and gives the difference of the
means with its 95% confidence interval (Welch's t interval: the runs' spreads may differ), in
microseconds and as a percent of the base mean. `verdict(change, min_change_pct)`:

  improved             the interval lies wholly below 0 and the gain is at least min_change_pct
  regressed            the interval lies wholly above 0 and the loss is at least min_change_pct
  no measurable change otherwise: the interval holds 0, or the change is smaller than the floor

The floor exists because the interval only knows the spread of steps inside each run: two runs
of one job on a busy machine also drift between them (another job's load, clocks, placement),
and that drift is not in the per-step spread. A run with fewer than two steps has no spread:
its change is reported with no interval and the verdict is "no measurable change".

The t quantile is computed here (the regularized incomplete beta function by its continued
fraction, then bisection): the standard library has no Student t and the project needs no SciPy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean, variance
from typing import Literal

Verdict = Literal["improved", "regressed", "no measurable change"]
VERDICTS: tuple[Verdict, ...] = ("improved", "regressed", "no measurable change")
CONFIDENCE = 0.95
DEFAULT_MIN_CHANGE_PCT = 1.0


@dataclass(frozen=True)
class StepChange:
    base_mean_us: float
    new_mean_us: float
    base_steps: int
    new_steps: int
    delta_us: float
    delta_pct: float
    ci_us: tuple[float, float] | None  # None: a run with fewer than two steps
    ci_pct: tuple[float, float] | None
    df: float | None  # Welch-Satterthwaite degrees of freedom

    @property
    def excludes_zero(self) -> bool:
        return self.ci_us is not None and (self.ci_us[0] > 0 or self.ci_us[1] < 0)


def step_change(base: Sequence[float], new: Sequence[float], confidence: float = CONFIDENCE) -> StepChange:
    """The change of the mean step time from `base` to `new` (each run's step times, us)."""
    if not base or not new:
        raise ValueError("both runs need at least one step")
    mb, mn = fmean(base), fmean(new)
    delta = mn - mb
    pct = 100.0 * delta / mb if mb else 0.0
    ci: tuple[float, float] | None = None
    df: float | None = None
    if len(base) >= 2 and len(new) >= 2:
        vb, vn = variance(base) / len(base), variance(new) / len(new)
        se = math.sqrt(vb + vn)
        if se == 0.0:
            ci, df = (delta, delta), math.inf
        else:
            df = (vb + vn) ** 2 / (vb**2 / (len(base) - 1) + vn**2 / (len(new) - 1))
            half = t_quantile(0.5 + confidence / 2.0, df) * se
            ci = (delta - half, delta + half)
    ci_pct = (100.0 * ci[0] / mb, 100.0 * ci[1] / mb) if ci is not None and mb else None
    return StepChange(mb, mn, len(base), len(new), delta, pct, ci, ci_pct, df)


def verdict(change: StepChange, min_change_pct: float = DEFAULT_MIN_CHANGE_PCT) -> Verdict:
    if not change.excludes_zero or abs(change.delta_pct) < min_change_pct:
        return "no measurable change"
    return "improved" if change.delta_us < 0 else "regressed"


# --------------------------------------------------------------------------- Student's t


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with `df` degrees of freedom (df may be fractional or inf)."""
    if math.isinf(df):
        return 0.5 * (1.0 + math.erf(t / math.sqrt(2.0)))
    tail = 0.5 * _betai(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p, 0 < p < 1, by bisection of t_cdf."""
    if not 0.0 < p < 1.0:
        raise ValueError("p must lie strictly between 0 and 1")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:  # the tail of df ~1 reaches far: widen until it holds p
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return (lo + hi) / 2.0


def _betai(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(ln)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 3e-16:
            break
    return h
