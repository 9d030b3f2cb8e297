"""The operator rules about a card's capture as a whole: an idle device, every op dynamic, and
what the capture cannot show."""

from __future__ import annotations

import polars as pl

from npuscope.parsers.columns import UNKNOWN

from .advice import advice
from .card_data import SMALL_SAMPLE_TASKS, CardData
from .findings import Finding
from .rule_names import DATA_GAPS, DYNAMIC_SHAPE, IDLE_DEVICE
from .thresholds import Thresholds


def idle_device(d: CardData, th: Thresholds) -> list[Finding]:
    """A device busy for a small share of its span: host-bound, the first thing to fix."""
    if d.time_problem is not None or d.tasks.height == 0:
        return []
    iv = d.tasks.select(
        pl.col("start_us").alias("s"),
        (pl.col("start_us") + pl.col("duration_us").fill_null(0.0)).alias("e"),
    ).sort("s")
    span = float(iv.select(pl.col("e").max() - pl.col("s").min()).item() or 0.0)
    if span <= 0:
        return []
    # Union of the intervals: a new segment starts where a task starts after every earlier end.
    segments = (
        iv.with_columns((pl.col("s") > pl.col("e").cum_max().shift(1)).fill_null(True).cum_sum().alias("seg"))
        .group_by("seg")
        .agg(pl.col("s").min(), pl.col("e").max())
    )
    busy = float((segments["e"] - segments["s"]).sum())
    busy_pct = 100.0 * busy / span
    if busy_pct >= th.idle_busy_pct:
        return []
    title = f"Device idle {100.0 - busy_pct:.1f}% of the span: tasks busy {busy:,.0f} us of {span:,.0f} us (host-bound)"
    if d.kind == "CPU":  # every task is a host operator: no device to be idle
        title = (
            f"No operator running {100.0 - busy_pct:.1f}% of the span: operators busy {busy:,.0f} us "
            f"of {span:,.0f} us (Python / framework time between them)"
        )
    return [
        Finding(
            rule=IDLE_DEVICE,
            severity="warning",
            title=title,
            card=d.card,
            op_types=(),
            op_names=(),
            count=d.tasks.height,
            time_us=span - busy,
            share_pct=round(100.0 - busy_pct, 3),
            advice=advice(IDLE_DEVICE, d.framework, d.kind),
            threshold=f"busy share of the span < {th.idle_busy_pct:g}%",
        )
    ]


def dynamic_shape(d: CardData, th: Thresholds) -> list[Finding]:
    states = d.tasks["op_state"].drop_nulls()
    if states.len() == 0 or not (states == "dynamic").all():
        return []
    return [
        Finding(
            rule=DYNAMIC_SHAPE,
            severity="info",
            title=f"All {states.len():,} tasks with an OP State run dynamic",
            card=d.card,
            op_types=(),
            op_names=(),
            count=states.len(),
            time_us=0.0,
            share_pct=100.0,
            advice=advice(DYNAMIC_SHAPE, d.framework, d.kind),
            threshold="every OP State = dynamic",
        )
    ]


DEVICE_GAPS = {
    "CPU": "host events only: no device activity in the trace (if the run used a device, it was not profiled)",
    "unknown": "device events of a kind npuscope does not know: findings speak of the device in general terms",
}
"""What a GPU, CPU or unknown device's capture cannot show, besides damaged times: the NPU's
gaps (OP State, PMU columns, op_statistic files) are no gap where such data never exists."""


def data_gaps(d: CardData, th: Thresholds) -> list[Finding]:
    gaps = []
    if d.time_problem is not None:
        gaps.append(d.time_problem)
    if d.kind != "NPU":
        return _device_gaps(d, gaps)
    if d.tasks.height and not (d.compute["op_type"] != UNKNOWN).any() and d.compute.height:
        gaps.append("no op types (torch_npu Level0): findings by op type cannot be made")
    if not d.has_timeline:
        gaps.append("no timeline: wait causes are only suspected, host-side ops cannot be shown")
    if d.tasks.height and d.tasks["op_state"].null_count() == d.tasks.height:
        gaps.append("no OP State values (CANN < 8.0.RC1 or a host trace): dynamic shapes cannot be seen")
    if not d.pmu:
        gaps.append("no PMU columns: core utilisation is unknown")
    # A derived op_statistic is no gap: it is what msprof computes from the same tasks (a note
    # of the report says it was derived).
    if 0 < d.compute.height < SMALL_SAMPLE_TASKS:
        gaps.append(
            f"only {d.compute.height} operator task(s): a small sample, shares of compute may not "
            "hold for the whole run"
        )
    return _gaps_finding(d, gaps)


def _device_gaps(d: CardData, gaps: list[str]) -> list[Finding]:
    """data_gaps on a GPU, CPU or unknown device's capture."""
    if not d.has_timeline:
        gaps.append("no timeline: wait causes are only suspected, host-side ops cannot be shown")
    if d.kind in DEVICE_GAPS:
        gaps.append(DEVICE_GAPS[d.kind])
    return _gaps_finding(d, gaps)


def _gaps_finding(d: CardData, gaps: list[str]) -> list[Finding]:
    """The data_gaps finding naming `gaps` (none without gaps)."""
    if not gaps:
        return []
    return [
        Finding(
            rule=DATA_GAPS,
            severity="info",
            title="What this capture cannot show: " + "; ".join(gaps),
            card=d.card,
            op_types=(),
            op_names=(),
            count=len(gaps),
            time_us=0.0,
            share_pct=0.0,
            advice=advice(DATA_GAPS, d.framework, d.kind),
            confidence="evidence",
            threshold="informational",
        )
    ]
