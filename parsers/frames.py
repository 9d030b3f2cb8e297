"""Canonical tasks and op-statistics frames, whatever file they came from.

Readers hand over partial frames (the columns their source had); these functions add the
missing canonical columns as typed nulls, fill what can be derived (card, wait, is_aclnn,
op statistics) and fix the column order, so every consumer sees one shape.
"""

from __future__ import annotations

import polars as pl

from .columns import (
    COMMUNICATION_TASK_TYPES,
    STAT_ORDER,
    STAT_SCHEMA,
    TASK_ORDER,
    TASK_SCHEMA,
)


def wait_expr() -> pl.Expr:
    """msprof's Task Wait Time: max(0, start - previous start - previous duration) per card.

    Expects rows sorted by (card, start_ns); the first task of a card waits 0.
    """
    prev_end = (pl.col("start_ns") + (pl.col("duration_us") * 1000).round(0).cast(pl.Int64)).shift(1)
    gap = ((pl.col("start_ns") - prev_end) / 1000).clip(lower_bound=0).fill_null(0.0)
    return gap.over("card").alias("wait_us")


def canonical_tasks(df: pl.DataFrame, *, card: str | None = None, pmu: list[str] | None = None) -> pl.DataFrame:
    """Complete a partial tasks frame: typed nulls, card, is_aclnn, wait, order, sort."""
    pmu = list(pmu or [])
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
        pl.col("op_name").str.starts_with("aclnn").fill_null(False).alias("is_aclnn")
    )
    if not _sorted_per_card(df):
        df = df.sort(["card", "start_ns"], maintain_order=True)
    if "wait_us" not in df.columns:
        df = df.with_columns(wait_expr())
    df = df.with_columns(pl.col("wait_us").fill_null(0.0))
    return df.select([*TASK_ORDER, *[c for c in pmu if c not in TASK_ORDER]])


def _sorted_per_card(df: pl.DataFrame) -> bool:
    if df.height < 2:
        return True
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


def derive_statistic(tasks: pl.DataFrame) -> pl.DataFrame:
    """op_statistic from tasks, as msprof computes it.

    Per card and (OP Type, Core Type = Task Type); communication tasks are left out, and the
    ratio is of the card's total compute time.
    """
    # Select before filtering: filtering the whole frame would copy every PMU column.
    compute = tasks.select("card", "op_type", "task_type", "duration_us").filter(
        ~pl.col("task_type").is_in(COMMUNICATION_TASK_TYPES).fill_null(False)
    )
    stat = compute.group_by(["card", "op_type", "task_type"]).agg(
        pl.len().cast(pl.Int64).alias("count"),
        pl.col("duration_us").sum().alias("total_us"),
        pl.col("duration_us").min().alias("min_us"),
        pl.col("duration_us").mean().alias("avg_us"),
        pl.col("duration_us").max().alias("max_us"),
    )
    stat = stat.rename({"task_type": "core_type"}).with_columns(
        (pl.col("total_us") / pl.col("total_us").sum().over("card") * 100)
        .fill_nan(0.0)
        .alias("ratio_pct")
    )
    return stat.select([pl.col(c).cast(STAT_SCHEMA[c]) for c in STAT_ORDER]).sort(
        ["card", "total_us", "op_type"], descending=[False, True, False]
    )


def empty_tasks() -> pl.DataFrame:
    return pl.DataFrame(schema={n: TASK_SCHEMA[n] for n in TASK_ORDER})


def empty_statistic() -> pl.DataFrame:
    return pl.DataFrame(schema={n: STAT_SCHEMA[n] for n in STAT_ORDER})
