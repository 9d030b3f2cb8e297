"""Canonical tasks and op-statistics frames, whatever file they came from.

Readers hand over partial frames (the columns their source had); these functions add the
missing canonical columns as typed nulls, fill what can be derived (card, wait, is_aclnn,
op statistics) and fix the column order, so every consumer sees one shape.
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from .columns import (
    COMMUNICATION_TASK_TYPES,
    EVENT_SCHEMA,
    MARKER_TASKS,
    MEMCPY_TASKS,
    STAT_ORDER,
    STAT_SCHEMA,
    SYNC_TASKS,
    TASK_ORDER,
    TASK_SCHEMA,
    UNKNOWN,
)


def ns_to_us(ns: pl.Expr) -> pl.Expr:
    """Integer nanoseconds as microseconds, the double a 3-decimal text value reads as.

    polars divides a column by a constant as a multiplication by its reciprocal, which can
    land one ulp away (19397 ns -> 19.397000000000002 us); rounding to the nanosecond gives
    the correctly rounded value, so a db export and its text export give equal frames.
    """
    return (ns / 1000).round(3)


def wait_expr() -> pl.Expr:
    """msprof's Task Wait Time: max(0, start - previous start - previous duration) per card.

    Expects rows sorted by (card, start_ns); the first task of a card waits 0.
    """
    prev_end = (pl.col("start_ns") + (pl.col("duration_us") * 1000).round(0).cast(pl.Int64)).shift(1)
    gap = ns_to_us(pl.col("start_ns") - prev_end).clip(lower_bound=0).fill_null(0.0)
    return gap.over("card").alias("wait_us")


def canonical_tasks(
    df: pl.DataFrame, *, card: str | None = None, pmu: list[str] | None = None, tick: Callable[[], None] | None = None
) -> pl.DataFrame:
    """Complete a partial tasks frame: typed nulls, card, is_aclnn, wait, order, sort.

    `tick()`, when given, runs between the steps (a reader's progress and cancel check)."""
    pmu = list(pmu or [])
    tick = tick or _nothing
    if "card" not in df.columns or df["card"].null_count() == df.height:
        df = df.with_columns(pl.lit(card or "0", dtype=pl.String).alias("card"))
    elif card is not None:
        df = df.with_columns(pl.col("card").fill_null(card))
    missing = [
        pl.lit(None, dtype=TASK_SCHEMA[name]).alias(name)
        for name in TASK_ORDER
        if name not in df.columns and name not in ("is_aclnn", "wait_us")
    ]
    if missing:
        df = df.with_columns(missing)
    df = df.with_columns(
        pl.col("op_name").str.starts_with("aclnn").fill_null(False).alias("is_aclnn"),
        *_known_types(df),
    )
    tick()
    if not _sorted_per_card(df):
        df = df.sort(["card", "start_ns"], maintain_order=True)
        tick()
    if "wait_us" not in df.columns:
        df = df.with_columns(wait_expr())
        tick()
    df = df.with_columns(pl.col("wait_us").fill_null(0.0))
    return df.select([*TASK_ORDER, *[c for c in pmu if c not in TASK_ORDER]])


def _nothing() -> None:
    pass


def with_event_columns(df: pl.DataFrame) -> pl.DataFrame:
    """An events frame some columns were left out of, with them back as typed nulls."""
    if list(df.columns) == list(EVENT_SCHEMA):
        return df
    return df.select(pl.col(c) if c in df.columns else pl.lit(None, dtype=t).alias(c) for c, t in EVENT_SCHEMA.items())


def with_task_columns(df: pl.DataFrame) -> pl.DataFrame:
    """A tasks frame some canonical columns were left out of, with them back as typed nulls
    in their place (a null column costs no memory), so every consumer sees one shape."""
    missing = [name for name in TASK_ORDER if name not in df.columns]
    if not missing:
        return df
    filled = df.with_columns(pl.lit(None, dtype=TASK_SCHEMA[name]).alias(name) for name in missing)
    return filled.select([*TASK_ORDER, *[c for c in df.columns if c not in TASK_ORDER]])


def is_communication() -> pl.Expr:
    """Task rows that are collectives (not compute): msprof leaves them out of op_statistic."""
    return pl.col("task_type").is_in(COMMUNICATION_TASK_TYPES).fill_null(False)


def communication_type(name: pl.Expr) -> pl.Expr:
    """`hcom_allReduce__538_0_1` -> `hcom_allReduce_`, the OP Type msprof gives it."""
    return name.str.replace(r"(?:_\d+)+$", "")


def _known_types(df: pl.DataFrame) -> list[pl.Expr]:
    """Fill op and task types a capture left unknown (torch_npu Level0: `N/A` on every row).

    Communication is recognised by its `hcom_` name; anything else is labelled UNKNOWN, so
    no table, title or header ever reads None or N/A.
    """
    if df["op_type"].null_count() == 0 and df["task_type"].null_count() == 0:
        return []
    comm = pl.col("op_name").str.starts_with("hcom_").fill_null(False)
    return [
        pl.when(pl.col("op_type").is_not_null())
        .then(pl.col("op_type"))
        .when(comm)
        .then(communication_type(pl.col("op_name")))
        .otherwise(pl.lit(UNKNOWN))
        .alias("op_type"),
        pl.when(pl.col("task_type").is_not_null())
        .then(pl.col("task_type"))
        .when(comm)
        .then(pl.lit(COMMUNICATION_TASK_TYPES[0]))
        .otherwise(pl.lit(UNKNOWN))
        .alias("task_type"),
    ]


def _kind_key(expr: pl.Expr) -> pl.Expr:
    return expr.str.to_uppercase().str.replace_all(r"[\s\-]+", "_")


def device_kind(name: pl.Expr, task_type: pl.Expr) -> pl.Expr:
    """What a device event is: `compute`, `communication`, `sync`, `memcpy` or `marker`.

    torch_npu names the non-kernel events by their kind and gives them Task Type `Other`
    (as it does its kernels); msprof puts the kind in Task Type. Both are looked at.
    """
    n, t = _kind_key(name), _kind_key(task_type)
    by_type = t.is_in(COMMUNICATION_TASK_TYPES)
    return (
        pl.when(n.is_in(list(MARKER_TASKS)) | (t.is_in(list(MARKER_TASKS)) & (t != "OTHER")))
        .then(pl.lit("marker"))
        .when(by_type.fill_null(False) | n.str.starts_with("HCOM_").fill_null(False))
        .then(pl.lit("communication"))
        .when(n.is_in(list(SYNC_TASKS)) | t.is_in(list(SYNC_TASKS)))
        .then(pl.lit("sync"))
        .when(n.is_in(list(MEMCPY_TASKS)) | t.is_in(list(MEMCPY_TASKS)))
        .then(pl.lit("memcpy"))
        .otherwise(pl.lit("compute"))
    )


def _sorted_per_card(df: pl.DataFrame) -> bool:
    if df.height < 2:
        return True
    card, start = pl.col("card"), pl.col("start_ns")
    if df["card"].null_count() == 0 and not df.select((card != card.first()).any()).item():
        # One card (the common case): only the start times need to ascend.
        return not df.select((start.diff() < 0).any()).item()
    # Cards must come in runs (merged Era B files list card by card) and start times ascend
    # within a run; checking beats sorting 2M rows when the file is already in order.
    changes = df.select(
        card_runs=(pl.col("card") != pl.col("card").shift(1)).sum(),
        cards=pl.col("card").n_unique(),
        back=((pl.col("start_ns") < pl.col("start_ns").shift(1)) & (pl.col("card") == pl.col("card").shift(1))).any(),
    ).row(0, named=True)
    return changes["card_runs"] + 1 == changes["cards"] and not changes["back"]


def canonical_statistic(df: pl.DataFrame, *, card: str | None = None) -> pl.DataFrame:
    if "card" not in df.columns or df["card"].null_count() == df.height:
        df = df.with_columns(pl.lit(card or "0", dtype=pl.String).alias("card"))
    if "model_name" in df.columns and df["model_name"].n_unique() > 1:
        # Graph mode lists one block per model: fold them into one row per type per card so
        # the frame has one shape; the ratio is recomputed below against the card's total.
        df = _fold_models(df)
    return df.select([pl.col(c).cast(STAT_SCHEMA[c]) for c in STAT_ORDER]).sort(
        ["card", "total_us"], descending=[False, True], maintain_order=True
    )


def _fold_models(df: pl.DataFrame) -> pl.DataFrame:
    folded = df.group_by(["card", "op_type", "core_type"], maintain_order=True).agg(
        pl.col("count").sum(),
        pl.col("total_us").sum(),
        pl.col("min_us").min(),
        pl.col("max_us").max(),
    )
    return folded.with_columns(
        (pl.col("total_us") / pl.col("count")).alias("avg_us"),
        (pl.col("total_us") / pl.col("total_us").sum().over("card") * 100).alias("ratio_pct"),
    )


def statistic_of(tasks: pl.DataFrame, by: tuple[str, ...] = ()) -> pl.DataFrame:
    """op_statistic's figures per card, (OP Type, Core Type = Task Type) and the task columns
    `by`, unsorted: count, total, min, avg, max and ratio of the card's compute time;
    communication tasks are left out."""
    # Select before filtering: filtering the whole frame would copy every PMU column.
    compute = tasks.select("card", "op_type", "task_type", *by, "duration_us").filter(~is_communication())
    # Groups in order of first appearance: the card's total (the ratio's divisor) is then summed
    # in one order every time, and equal frames give equal ratios to the last bit.
    stat = compute.group_by(["card", "op_type", "task_type", *by], maintain_order=True).agg(
        pl.len().cast(pl.Int64).alias("count"),
        pl.col("duration_us").sum().alias("total_us"),
        pl.col("duration_us").min().alias("min_us"),
        pl.col("duration_us").mean().alias("avg_us"),
        pl.col("duration_us").max().alias("max_us"),
    )
    return stat.rename({"task_type": "core_type"}).with_columns(
        (pl.col("total_us") / pl.col("total_us").sum().over("card") * 100).fill_nan(0.0).alias("ratio_pct")
    )


def derive_statistic(tasks: pl.DataFrame) -> pl.DataFrame:
    """op_statistic from tasks, as msprof computes it.

    Per card and (OP Type, Core Type = Task Type); communication tasks are left out, and the
    ratio is of the card's total compute time.
    """
    stat = statistic_of(tasks)
    return stat.select([pl.col(c).cast(STAT_SCHEMA[c]) for c in STAT_ORDER]).sort(
        ["card", "total_us", "op_type"], descending=[False, True, False], maintain_order=True
    )


def empty_tasks() -> pl.DataFrame:
    return pl.DataFrame(schema={n: TASK_SCHEMA[n] for n in TASK_ORDER})


def empty_statistic() -> pl.DataFrame:
    return pl.DataFrame(schema={n: STAT_SCHEMA[n] for n in STAT_ORDER})
