"""The operator rules about a card's capture as a whole: an idle device, every op dynamic, and
what the capture cannot show."""

from __future__ import annotations

import polars as pl

from .advice import advice
from .card_data import SMALL_SAMPLE_TASKS
from .card_groups import Cards
from .findings import Finding
from .rule_names import DATA_GAPS, DYNAMIC_SHAPE, IDLE_DEVICE
from .thresholds import Thresholds


def idle_device(c: Cards, th: Thresholds) -> list[Finding]:
    """A device busy for a small share of its span: host-bound, the first thing to fix."""
    if c.time_problem is not None or c.tasks.height == 0:
        return []
    iv = c.tasks.select(
        "card",
        pl.col("start_us").alias("s"),
        (pl.col("start_us") + pl.col("duration_us").fill_null(0.0)).alias("e"),
    ).sort(["card", "s"], maintain_order=True)
    # Union of each card's intervals: a new segment starts where a task starts after every
    # earlier end of its card.
    after = pl.col("s") > pl.col("e").cum_max().shift(1).over("card")
    segments = (
        iv.with_columns(after.fill_null(True).cast(pl.Int64).cum_sum().over("card").alias("seg"))
        .group_by(["card", "seg"], maintain_order=True)
        .agg(pl.col("s").min(), pl.col("e").max())
    )
    busy = segments.group_by("card").agg((pl.col("e") - pl.col("s")).sum().alias("busy"))
    spans = iv.group_by("card").agg((pl.col("e").max() - pl.col("s").min()).alias("span"))
    facts = {r["card"]: r for r in spans.join(busy, on="card", how="left").iter_rows(named=True)}
    out = []
    for card in c.cards:
        got = facts.get(card)
        span = float((got or {}).get("span") or 0.0)
        if got is None or span <= 0:
            continue
        busy_us = float(got["busy"] or 0.0)
        busy_pct = 100.0 * busy_us / span
        if busy_pct >= th.idle_busy_pct:
            continue
        title = (
            f"Device idle {100.0 - busy_pct:.1f}% of the span: tasks busy {busy_us:,.0f} us of {span:,.0f} us "
            "(host-bound)"
        )
        if c.kind == "CPU":  # every task is a host operator: no device to be idle
            title = (
                f"No operator running {100.0 - busy_pct:.1f}% of the span: operators busy {busy_us:,.0f} us "
                f"of {span:,.0f} us (Python / framework time between them)"
            )
        out.append(
            Finding(
                rule=IDLE_DEVICE,
                severity="warning",
                title=title,
                card=card,
                op_types=(),
                op_names=(),
                count=int(c.fact(card, "tasks")),
                time_us=span - busy_us,
                share_pct=round(100.0 - busy_pct, 3),
                advice=advice(IDLE_DEVICE, c.framework, c.kind),
                threshold=f"busy share of the span < {th.idle_busy_pct:g}%",
            )
        )
    return out


def dynamic_shape(c: Cards, th: Thresholds) -> list[Finding]:
    out = []
    for card in c.cards:
        states = int(c.fact(card, "op_state_n"))
        if states == 0 or c.fact(card, "dynamic_n") != states:
            continue
        out.append(
            Finding(
                rule=DYNAMIC_SHAPE,
                severity="info",
                title=f"All {states:,} tasks with an OP State run dynamic",
                card=card,
                op_types=(),
                op_names=(),
                count=states,
                time_us=0.0,
                share_pct=100.0,
                advice=advice(DYNAMIC_SHAPE, c.framework, c.kind),
                threshold="every OP State = dynamic",
            )
        )
    return out


DEVICE_GAPS = {
    "CPU": "host events only: no device activity in the trace (if the run used a device, it was not profiled)",
    "unknown": "device events of a kind npuscope does not know: findings speak of the device in general terms",
}
"""What a GPU, CPU or unknown device's capture cannot show, besides damaged times: the NPU's
gaps (OP State, PMU columns, op_statistic files) are no gap where such data never exists."""


def data_gaps(c: Cards, th: Thresholds) -> list[Finding]:
    return [f for card in c.cards for f in _card_gaps(c, card)]


def _card_gaps(c: Cards, card: str) -> list[Finding]:
    gaps = []
    if c.time_problem is not None:
        gaps.append(c.time_problem)
    if c.kind != "NPU":
        return _device_gaps(c, card, gaps)
    tasks, compute_n = int(c.fact(card, "tasks")), int(c.fact(card, "compute_n"))
    if tasks and compute_n and not c.fact(card, "known_types"):
        gaps.append("no op types (torch_npu Level0): findings by op type cannot be made")
    if not c.has_timeline:
        gaps.append("no timeline: wait causes are only suspected, host-side ops cannot be shown")
    if tasks and c.fact(card, "op_state_n") == 0:
        gaps.append("no OP State values (CANN < 8.0.RC1 or a host trace): dynamic shapes cannot be seen")
    if not c.pmu:
        gaps.append("no PMU columns: core utilisation is unknown")
    # A derived op_statistic is no gap: it is what msprof computes from the same tasks (a note
    # of the report says it was derived).
    if 0 < compute_n < SMALL_SAMPLE_TASKS:
        gaps.append(
            f"only {compute_n} operator task(s): a small sample, shares of compute may not hold for the whole run"
        )
    return _gaps_finding(c, card, gaps)


def _device_gaps(c: Cards, card: str, gaps: list[str]) -> list[Finding]:
    """data_gaps on a GPU, CPU or unknown device's capture."""
    if not c.has_timeline:
        gaps.append("no timeline: wait causes are only suspected, host-side ops cannot be shown")
    if c.kind in DEVICE_GAPS:
        gaps.append(DEVICE_GAPS[c.kind])
    return _gaps_finding(c, card, gaps)


def _gaps_finding(c: Cards, card: str, gaps: list[str]) -> list[Finding]:
    """The data_gaps finding naming `gaps` (none without gaps)."""
    if not gaps:
        return []
    return [
        Finding(
            rule=DATA_GAPS,
            severity="info",
            title="What this capture cannot show: " + "; ".join(gaps),
            card=card,
            op_types=(),
            op_names=(),
            count=len(gaps),
            time_us=0.0,
            share_pct=0.0,
            advice=advice(DATA_GAPS, c.framework, c.kind),
            confidence="evidence",
            threshold="informational",
        )
    ]
