"""Tasks frames built from timeline events, for captures without an op_summary.

Old captures often kept only the timeline, and Paddle's own trace has no CSV at all: the
device task events (or Paddle's operator events) become the tasks frame, with the wait
computed as msprof does.
"""

from __future__ import annotations

import polars as pl

from .frames import canonical_tasks

DEVICE_PROCESS = "Ascend Hardware"

# Paddle appends the duration to every event name (`matmul dygraph[144.544 us]`).
_PADDLE_SUFFIX = r"\[[0-9.]+ (?:us|ms|ns|s)\]$"


def device_tasks(events: pl.DataFrame) -> pl.DataFrame:
    """`Ascend Hardware` complete events that carry a Task Type, as tasks.

    The timeline has no OP Type: the event name (the kernel or op name) stands in for it.
    """
    dev = events.filter(
        (pl.col("process") == DEVICE_PROCESS)
        & (pl.col("ph") == "X")
        & pl.col("task_type").is_not_null()
    )
    tasks = dev.select(
        pl.col("card"),
        pl.col("name").alias("op_name"),
        pl.col("name").alias("op_type"),
        pl.col("task_type"),
        pl.col("stream_id"),
        pl.col("task_id"),
        pl.col("ts_ns").alias("start_ns"),
        (pl.col("dur_ns") / 1000).alias("duration_us"),
    )
    return canonical_tasks(tasks)


def paddle_tasks(events: pl.DataFrame) -> pl.DataFrame:
    """Paddle operator events as tasks: host operators are task type CPU, kernels as named."""
    ops = events.filter(
        (pl.col("ph") == "X") & pl.col("cat").is_in(["Operator", "Kernel"])
    )
    name = pl.col("name").str.replace(_PADDLE_SUFFIX, "").str.strip_chars()
    tasks = ops.select(
        pl.col("card"),
        name.alias("op_name"),
        name.str.replace(r" dygraph$", "").alias("op_type"),
        pl.when(pl.col("cat") == "Operator")
        .then(pl.lit("CPU"))
        .otherwise(pl.lit("KERNEL"))
        .alias("task_type"),
        pl.col("ts_ns").alias("start_ns"),
        (pl.col("dur_ns") / 1000).alias("duration_us"),
    )
    return canonical_tasks(tasks)
