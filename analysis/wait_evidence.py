"""The host calls behind one task's wait: what the explorer's task detail shows as evidence.

`analysis.waits` blames a cause on every long wait from the host API events overlapping the
device gap before the task; this names those events for one task, longest overlap first,
so the detail of a task can say which compile or sync calls the device waited for.
No Textual, no Rich.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from .waits import COMPILE_PATTERN, SYNC_PATTERN


def wait_evidence(events: pl.DataFrame | None, task: dict[str, Any], limit: int = 5) -> list[dict[str, Any]]:
    """Host API calls on the task's card overlapping the gap before it, longest overlap first.

    Each is {"name", "start_ns", "dur_us", "overlap_us", "kind"} with kind "compile", "sync"
    or "other". Empty without a timeline or without a wait.
    """
    wait_us = task.get("wait_us") or 0.0
    start = task.get("start_ns")
    if events is None or start is None or wait_us <= 0 or events.height == 0:
        return []
    gap_start = int(start) - round(float(wait_us) * 1000)
    gap_end = int(start)
    host = events.filter(
        (pl.col("card") == str(task.get("card")))
        & (pl.col("ph") == "X")
        & pl.col("name").str.contains("@", literal=True)
        & pl.col("dur_ns").is_not_null()
        & (pl.col("ts_ns") < gap_end)
        & ((pl.col("ts_ns") + pl.col("dur_ns")) > gap_start)
    )
    if host.height == 0:
        return []
    overlap = pl.min_horizontal(pl.col("ts_ns") + pl.col("dur_ns"), pl.lit(gap_end)) - pl.max_horizontal(
        pl.col("ts_ns"), pl.lit(gap_start)
    )
    kind = (
        pl.when(pl.col("name").str.contains(COMPILE_PATTERN))
        .then(pl.lit("compile"))
        .when(pl.col("name").str.contains(SYNC_PATTERN))
        .then(pl.lit("sync"))
        .otherwise(pl.lit("other"))
    )
    out = (
        host.select(
            "name",
            pl.col("ts_ns").alias("start_ns"),
            (pl.col("dur_ns") / 1000).alias("dur_us"),
            (overlap / 1000).alias("overlap_us"),
            kind.alias("kind"),
        )
        .sort(["overlap_us", "start_ns"], descending=[True, False])
        .head(limit)
    )
    return out.to_dicts()
