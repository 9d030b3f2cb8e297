"""A run's headline figures: what the runs registry keeps, budgets bound and experiments compare.

`headline(analysis)` reads one value out of an `Analysis` (analysis/session.py), every time in
microseconds:

  step_mean_us            mean step time (the steps view; None when the capture has no steps)
  step_times_us           the time of each step, in step order: with several cards a step
                          takes as long as its slowest card (synchronous training waits for it)
  steps                   how many steps that is
  exposed_communication_us  communication not overlapped by compute, mean per step
  free_us                 time neither compute nor communication ran, mean per step
  device_us, compute_us, communication_us, wait_us, wait_<cause>_us  the totals of
                          analysis/totals.py, every card summed
  op_type_share_pct       per op type, its share of the compute time (op_statistic)
  findings                how many findings; `top_finding` the title of the first one

The numbers come from the same frames the report and the comparison read, so a budget, a
registry entry and a report never disagree.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import polars as pl

from .session import Analysis
from .totals import card_totals, sum_totals
from .waits import CAUSES

WAIT_CAUSES = CAUSES


@dataclass(frozen=True)
class Headline:
    step_mean_us: float | None
    step_times_us: tuple[float, ...]
    exposed_communication_us: float | None
    free_us: float | None
    device_us: float
    compute_us: float
    communication_us: float
    wait_us: float
    wait_by_cause_us: dict[str, float] = field(default_factory=dict)
    op_type_share_pct: dict[str, float] = field(default_factory=dict)
    findings: int = 0
    top_finding: str = ""

    @property
    def steps(self) -> int:
        return len(self.step_times_us)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["step_times_us"] = list(self.step_times_us)
        d["steps"] = self.steps
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Headline:
        keys = {f for f in cls.__dataclass_fields__}
        values = {k: v for k, v in data.items() if k in keys}
        values["step_times_us"] = tuple(float(x) for x in values.get("step_times_us") or ())
        return cls(**values)


def step_times(steps: pl.DataFrame) -> tuple[float, ...]:
    """Each step's time in step order, the slowest card's; a whole-capture row (step null)
    is one step."""
    rows = steps.filter(pl.col("step_us").is_not_null())
    if rows.is_empty():
        return ()
    per_step = rows.group_by("step").agg(pl.col("step_us").max()).sort("step", nulls_last=True)
    return tuple(float(v) for v in per_step["step_us"])


def _step_mean(steps: pl.DataFrame, column: str) -> float | None:
    rows = steps.filter(pl.col(column).is_not_null())
    if rows.is_empty():
        return None
    per_step = rows.group_by("step").agg(pl.col(column).max())
    value = per_step[column].mean()
    return float(value) if isinstance(value, (int, float)) else None


def headline(analysis: Analysis) -> Headline:
    """The headline figures of every diagnosed card of `analysis`."""
    profile, diagnosis = analysis.profile, analysis.diagnosis
    cards = diagnosis.cards or tuple(profile.cards)
    totals = sum_totals(list(card_totals(profile, diagnosis.tasks, tuple(cards)).values()))
    times = step_times(analysis.views.steps)
    stat = profile.op_statistic.filter(pl.col("card").is_in(list(cards)))
    by_type = stat.group_by("op_type").agg(pl.col("total_us").sum())
    compute = float(by_type["total_us"].sum() or 0.0)
    shares = (
        {str(t): round(100.0 * float(v or 0.0) / compute, 3) for t, v in by_type.iter_rows()} if compute > 0 else {}
    )
    findings = analysis.findings
    return Headline(
        step_mean_us=(sum(times) / len(times)) if times else None,
        step_times_us=times,
        exposed_communication_us=_step_mean(analysis.views.steps, "comm_not_overlapped_us"),
        free_us=_step_mean(analysis.views.steps, "free_us"),
        device_us=totals["device_us"],
        compute_us=totals["compute_us"],
        communication_us=totals["communication_us"],
        wait_us=totals["wait_us"],
        wait_by_cause_us={c: totals[f"wait_{c}_us"] for c in WAIT_CAUSES},
        op_type_share_pct=dict(sorted(shares.items(), key=lambda kv: (-kv[1], kv[0]))),
        findings=len(findings),
        top_finding=findings[0].title if findings else "",
    )
