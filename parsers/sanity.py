"""Checks that keep one absurd value from ruling the view.

Real captures carry start times re-saved by a spreadsheet (`1.69512E+15` on every row), a
hand-edited start 30,000 s away from the rest, an op_statistic that disagrees with the
op_summary beside it, and timeline events far before the device activity. Each check says
what it found in one line; the caller decides what to leave out. Everything here works from
the parsed frames, so a cached profile gets the same notes as a fresh parse.
"""

from __future__ import annotations

import polars as pl

from .columns import COMMUNICATION_TASK_TYPES

# Starts that are whole seconds on (nearly) every row have lost their digits: a spreadsheet
# keeps 6 significant digits of `1695115378777268.5`. Real starts are whole seconds once in
# a million.
_WHOLE_SECONDS = 1_000_000_000
# A capture of a stable window lasts seconds; a gap of an hour between two tasks of one card
# is a damaged start, not a pause.
_MAX_GAP_NS = 3_600 * 1_000_000_000
# Events this far outside the device activity (and beyond a multiple of its span) are not
# part of the capture window: one stray event must not stretch the axis to years.
_FAR_NS = 60 * 1_000_000_000
_FAR_SPANS = 10


def card_checks(tasks: pl.DataFrame, *, compute: bool = True) -> pl.DataFrame:
    """What `time_problem` and `statistic_problem` look at, per card, in one pass over the tasks.

    One row per card, in the order of their first start: `rows` (tasks with a start), `distinct`
    (starts unlike the previous one), `whole` (starts on a whole second), `gap` (largest step
    between consecutive starts), and with `compute` the compute time of the card's tasks
    (`compute_us`, communication left out, as op_statistic does) and their count.
    A frame of one card (the common case) is aggregated without grouping.
    """
    start = pl.col("start_ns").drop_nulls()
    aggs = [
        start.len().alias("rows"),
        # Tasks frames are sorted by (card, start): a repeated start is one equal to the previous.
        (start.len() - (start.diff() == 0).sum()).alias("distinct"),
        (start % _WHOLE_SECONDS == 0).sum().alias("whole"),
        start.diff().max().alias("gap"),
    ]
    if compute:
        is_compute = ~pl.col("task_type").is_in(COMMUNICATION_TASK_TYPES).fill_null(False)
        aggs += [
            pl.col("duration_us").filter(is_compute).sum().alias("compute_us"),
            is_compute.sum().alias("compute_rows"),
        ]
    card = pl.col("card")
    if tasks.height and not tasks.select(card.ne_missing(card.first()).any()).item():
        return tasks.select(card.first(), *aggs)
    # Cards in the order of their first start, as the time check reports the first card found.
    first = pl.col("_row").filter(pl.col("start_ns").is_not_null()).first().alias("_first")
    per_card = tasks.with_row_index("_row").group_by("card", maintain_order=True).agg(*aggs, first)
    return per_card.sort("_first", nulls_last=True, maintain_order=True).drop("_first")


def time_problem(tasks: pl.DataFrame, checks: pl.DataFrame | None = None) -> str | None:
    """Why the start times cannot be used for spans and waits, or None when they can.

    `checks`: `card_checks(tasks)` when the caller has it already.
    """
    if tasks.height < 2:
        return None
    per_card = checks if checks is not None else card_checks(tasks, compute=False)
    for row in per_card.iter_rows(named=True):
        rows = row["rows"]
        if rows < 2:
            continue
        if row["whole"] >= 0.9 * rows or row["distinct"] < 0.5 * rows:
            return (
                f"start times on card {row['card']} have lost their digits "
                f"({row['distinct']:,} distinct of {rows:,}; a file re-saved by a spreadsheet "
                "writes 1.69512E+15): span and wait causes are not computed from them; "
                "export the profile again"
            )
        if (row["gap"] or 0) > _MAX_GAP_NS:
            return (
                f"start times on card {row['card']} jump by {row['gap'] / 1e9:,.0f} s between "
                "two tasks (a damaged or edited start): span and wait causes are not computed "
                "from them"
            )
    return None


def statistic_problem(tasks: pl.DataFrame, stat: pl.DataFrame, checks: pl.DataFrame | None = None) -> str | None:
    """A one-line note when op_statistic's totals disagree with the tasks beside it.

    `checks`: `card_checks(tasks)` when the caller has it already.
    """
    if tasks.height == 0 or stat.height == 0:
        return None
    per_card = checks if checks is not None else card_checks(tasks)
    compute = per_card.filter(pl.col("compute_rows") > 0).select("card", pl.col("compute_us").alias("tasks_us"))
    totals = (
        stat.filter(~pl.col("core_type").is_in(COMMUNICATION_TASK_TYPES).fill_null(False))
        .group_by("card")
        .agg(pl.col("total_us").sum().alias("stat_us"))
    )
    both = compute.join(totals, on="card", how="inner")
    for card, tasks_us, stat_us in both.sort("card").iter_rows():
        big = max(abs(tasks_us), abs(stat_us))
        if big > 1.0 and abs(tasks_us - stat_us) > 0.05 * big:
            return (
                f"op_statistic disagrees with the tasks on card {card} (total {stat_us:,.1f} us "
                f"vs {tasks_us:,.1f} us in the task rows): using the statistic derived from "
                "the tasks"
            )
    return None


def outlying_events(events: pl.DataFrame, tasks: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Events far outside the device activity left out, and how many were."""
    if events.height == 0 or tasks.height == 0:
        return events, 0
    bounds = tasks.select(
        pl.col("start_ns").min().alias("lo"),
        (pl.col("start_ns") + (pl.col("duration_us") * 1000).round(0).cast(pl.Int64)).max().alias("hi"),
    ).row(0)
    lo, hi = bounds
    if lo is None or hi is None:
        return events, 0
    margin = max(_FAR_NS, _FAR_SPANS * (hi - lo))
    inside = pl.col("ts_ns").is_null() | pl.col("ts_ns").is_between(lo - margin, hi + margin)
    kept = events.filter(inside)
    return kept, events.height - kept.height
