"""`diagnose(profile)`: wait causes per task and the findings of every rule, per card."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from npuscope.parsers import Profile

from .findings import Finding, order
from .rules import RULES, CardData
from .thresholds import Thresholds
from .waits import attribute_waits, compile_event_counts


RULE_COLUMNS = (
    "row", "card", "op_name", "op_type", "task_type", "op_state", "is_aclnn", "start_us",
    "duration_us", "wait_us", "input_shapes", "input_dtypes", "wait_cause", "wait_confidence",
)


@dataclass(frozen=True)
class Diagnosis:
    """Immutable result: the tasks with their wait causes, and ordered findings."""

    tasks: pl.DataFrame  # canonical tasks + row, start_us, wait_cause, wait_confidence
    findings: tuple[Finding, ...]
    thresholds: Thresholds
    cards: tuple[str, ...]
    compile_events: dict[str, int] = field(default_factory=dict)

    def for_card(self, card: str) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.card == card)


def diagnose(
    profile: Profile,
    thresholds: Thresholds | None = None,
    cards: tuple[str, ...] | None = None,
) -> Diagnosis:
    th = thresholds or Thresholds()
    wanted = cards or profile.cards
    tasks = profile.tasks
    events = profile.events
    if cards is not None:
        tasks = tasks.filter(pl.col("card").is_in(list(cards)))
    tasks = attribute_waits(tasks, events, th, profile.steps).with_row_index("row")
    # Start relative to the card's first task: what the user reads on screen.
    tasks = tasks.with_columns(
        ((pl.col("start_ns") - pl.col("start_ns").min().over("card")) / 1000).alias("start_us")
    )
    compile_events = compile_event_counts(events)
    # The rules read these columns only; filtering fewer columns per card copies less.
    slim = tasks.select(RULE_COLUMNS)
    findings: list[Finding] = []
    for card in wanted:
        d = CardData(
            card=card,
            tasks=slim if profile.cards == (card,) else slim.filter(pl.col("card") == card),
            stat=profile.op_statistic.filter(pl.col("card") == card),
            has_timeline=profile.has_timeline,
            compile_events=compile_events.get(card, 0) + compile_events.get("host", 0),
            statistic_derived=profile.statistic_derived,
            pmu=bool(profile.pmu_columns),
        )
        for rule in RULES:
            findings.extend(rule(d, th))
    return Diagnosis(
        tasks=tasks,
        findings=tuple(order(findings)),
        thresholds=th,
        cards=tuple(wanted),
        compile_events=compile_events,
    )
