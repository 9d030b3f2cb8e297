"""The host API view: per card and host API, how often it was called and how long it took.

One canonical frame (HOST_API_SCHEMA), times in microseconds; the level is spelled as the
timeline spells it before `@` (`AscendCL`, `Runtime`, `Node`, `Hccl`, ...), whatever the
source calls it (`acl`, `runtime`, `node` in api_statistic and ENUM_API_TYPE). Its share of
the span is the analysis' business.

Sources, most detailed first: `api_statistic*.csv` (msprof `api_statistic_<ts>.csv` and
torch_npu's `api_statistic.csv`: Device_id, Level, API Name, Time(us), Count, Avg(us),
Min(us), Max(us), Variance; Device_id is `host`) or the db's CANN_API (one row per call,
nanoseconds), then the timeline's host events named `<Level>@<api>`.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from .columns import ColumnSpec
from .csv_table import RowPolicy, read_table
from .db import _LEVELS
from .training_files import check_frame_numbers, conform, damaged, sort_cards

HOST_API_SCHEMA: dict[str, pl.DataType] = {
    "card": pl.String(),
    "api": pl.String(),
    "level": pl.String(),  # null when the source does not say
    "count": pl.Int64(),
    "total_us": pl.Float64(),
    "avg_us": pl.Float64(),
    "max_us": pl.Float64(),
    "source": pl.String(),
}

API_STATISTIC_COLUMNS: tuple[ColumnSpec, ...] = (
    ColumnSpec("card", ("Device_id",), "str"),
    ColumnSpec("level", ("Level", "level"), "str"),
    ColumnSpec("api", ("API Name",), "str", required=True),
    ColumnSpec("total_us", ("Time(us)",), "float", required=True),
    ColumnSpec("count", ("Count",), "int", required=True),
    ColumnSpec("avg_us", ("Avg(us)",), "float"),
    ColumnSpec("max_us", ("Max(us)",), "float"),
)

# A host API event of the timeline: `AscendCL@aclopCompileAndExecute`, `Node@launch`.
HOST_EVENT = r"^[A-Za-z][A-Za-z0-9_ ]*@."


def level_name(level: pl.Expr) -> pl.Expr:
    """`acl` -> `AscendCL`, `runtime` -> `Runtime`: the timeline's spelling of a level."""
    lower = level.str.strip_chars().str.to_lowercase()
    mapped = lower.replace_strict(list(_LEVELS), list(_LEVELS.values()), default=None, return_dtype=pl.String)
    return pl.coalesce(mapped, level.str.strip_chars()).replace("", None)


def _finish(df: pl.DataFrame, source: str) -> pl.DataFrame:
    out = df.with_columns(
        pl.coalesce(pl.col("avg_us"), pl.col("total_us") / pl.col("count")).alias("avg_us")
        if "avg_us" in df.columns
        else (pl.col("total_us") / pl.col("count")).alias("avg_us"),
        pl.lit(source).alias("source"),
    )
    return sort_cards(conform(out, HOST_API_SCHEMA), "total_us", descending=True)


def read_api_statistic(paths: tuple[Path, ...], card: str | None, host_card: str, rows: RowPolicy) -> pl.DataFrame:
    """api_statistic CSV rows. Device_id is `host` on every row msprof writes: those go to
    `card` (the source's card), else to `host_card` (the only card, or `host`)."""
    df, _ = read_table(paths, API_STATISTIC_COLUMNS, what="api_statistic", extra_as_float=False, rows=rows)
    df = check_frame_numbers(df, ("total_us", "avg_us", "max_us"), paths[0], "api_statistic")
    if bool((df["count"] < 0).any()):
        raise damaged(paths[0], "a Count is negative")
    own = card if card is not None else host_card
    if "card" in df.columns and card is None:
        device = pl.col("card").str.strip_chars()
        df = df.with_columns(
            pl.when(device.str.contains(r"^\d+$").fill_null(False)).then(device).otherwise(pl.lit(own)).alias("card")
        )
    else:
        df = df.with_columns(pl.lit(own).alias("card"))
    level = level_name(pl.col("level")) if "level" in df.columns else pl.lit(None, dtype=pl.String)
    df = df.with_columns(level.alias("level"), pl.col("api").str.strip_chars())
    return _finish(df, paths[0].name)


def _host_calls(events: pl.DataFrame) -> pl.LazyFrame:
    """The `Level@api` complete events, as a query: a cheap literal filter first, the pattern on
    what is left (a timeline holds millions of events); only the columns read are carried."""
    candidates = (
        events.lazy()
        .select("card", "name", "dur_ns", "ph", "process")
        .filter((pl.col("ph") == "X") & pl.col("name").str.contains("@", literal=True).fill_null(False))
    )
    return candidates.filter(
        pl.col("name").str.contains(HOST_EVENT).fill_null(False)
        & pl.col("dur_ns").is_not_null()
        & (pl.col("dur_ns") >= 0)
        & (pl.col("process") != "Python").fill_null(True)
    )


def has_host_events(events: pl.DataFrame | None) -> bool:
    """Whether a timeline holds `Level@api` host calls."""
    return events is not None and _host_calls(events).head(1).collect().height > 0


def host_api_from_events(events: pl.DataFrame, cards: list[str] | None, source: str) -> pl.DataFrame:
    """Per card and `Level@api` host event: count, total, average, longest (us)."""
    host = _host_calls(events)
    if cards is not None:
        host = host.filter(pl.col("card").is_in(cards))
    parts = host.select(
        "card",
        pl.col("name").str.split_exact("@", 1).struct.field("field_0").alias("level"),
        pl.col("name").str.split_exact("@", 1).struct.field("field_1").alias("api"),
        (pl.col("dur_ns") / 1000.0).alias("us"),
    ).collect()
    # Summed eagerly, groups in order of first call: sums and the order of equal totals are
    # then the same every run.
    per = parts.group_by("card", "level", "api", maintain_order=True).agg(
        pl.len().cast(pl.Int64).alias("count"),
        pl.col("us").sum().alias("total_us"),
        pl.col("us").max().alias("max_us"),
    )
    return _finish(per.with_columns((pl.col("total_us") / pl.col("count")).alias("avg_us")), source)
