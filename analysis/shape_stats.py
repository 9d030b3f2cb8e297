"""Op statistics by op type and input shapes: which shapes of a type take the time.

The explorer's Op statistics tab groups by type+shape on `g`, as `compare --by shape` matches
runs: the same columns as op_statistic (count, total, min, avg, max, ratio of the card's
compute), one row per (OP Type, Core Type, Input Shapes) of the card's operator tasks, the
largest total first. Communication is left out, as msprof leaves it out of op_statistic.
"""

from __future__ import annotations

import polars as pl

from npuscope.parsers.frames import statistic_of

SHAPE_STAT_ORDER = (
    "card",
    "op_type",
    "core_type",
    "input_shapes",
    "count",
    "total_us",
    "min_us",
    "avg_us",
    "max_us",
    "ratio_pct",
)


def statistic_by_shape(tasks: pl.DataFrame) -> pl.DataFrame:
    """One row per (card, OP Type, Core Type = Task Type, Input Shapes) of `tasks`' operator
    tasks; an empty shape cell is its own group (shown as no shape)."""
    stat = statistic_of(tasks, ("input_shapes",))
    return stat.select(SHAPE_STAT_ORDER).sort(
        ["card", "total_us", "op_type", "input_shapes"],
        descending=[False, True, False, False],
        nulls_last=True,
        maintain_order=True,
    )
