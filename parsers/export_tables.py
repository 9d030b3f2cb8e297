"""The CSV tables of a text export (op_summary / kernel_details, op_statistic, step_trace) as
canonical frames, each read through the cache with the notes its parse left beside it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import polars as pl

from .cache import FrameCache, Schema, including
from .columns import STAT_COLUMNS, STAT_SCHEMA, STEP_COLUMNS, STEP_SCHEMA, TASK_COLUMNS
from .csv_table import PIECE_BYTES, RowPolicy, read_table
from .errors import ProfileError
from .frames import canonical_statistic, canonical_tasks, empty_tasks
from .layout import Source
from .notes import NOTES_SCHEMA, Note, from_frame, refused, to_frame
from .progress import BytesHook

# What each table's reader returns: canonical tasks (PMU columns may follow), statistic, steps.
_TABLE_SCHEMAS: dict[str, Schema] = {
    "tasks": including(empty_tasks().schema),
    "statistic": STAT_SCHEMA,
    "steps": STEP_SCHEMA,
}


def cached_table(
    cache: FrameCache,
    kind: str,
    paths: Sequence[Path],
    read: Callable[[RowPolicy], pl.DataFrame],
    card: str | None,
    strict: bool,
    notes: list[Note],
    columns: Callable[[list[str]], list[str]] | None = None,
    schema: Schema | None = None,
    write_now: bool = False,
) -> pl.DataFrame:
    """A CSV table through the cache, with the notes its parse left (damaged rows) kept
    beside it, so a cached reopen says the same and `strict` refuses the same files; the
    notes are added to `notes`."""
    policy = RowPolicy(strict=strict)
    frame = cache.load_or_build(
        kind,
        paths,
        partial(read, policy),
        card,
        columns=columns,
        schema=schema or _TABLE_SCHEMAS.get(kind),
        write_now=write_now,
    )
    if cache.enabled:
        built = tuple(policy.notes)
        kept = cache.load_or_build(kind + "_notes", paths, lambda: to_frame(built), card, schema=NOTES_SCHEMA)
        found = from_frame(kept)
    else:
        found = tuple(policy.notes)
    if strict and found:
        raise ProfileError(refused(found[0]))
    notes.extend(found)
    return frame


def read_tasks(
    src: Source,
    rows: RowPolicy,
    hook: BytesHook | None = None,
    piece_bytes: int = PIECE_BYTES,
    keep_extra: Callable[[list[str]], list[str]] | None = None,
    skip: Sequence[str] = (),
) -> pl.DataFrame:
    df, pmu = read_table(
        src.tasks,
        TASK_COLUMNS,
        what="op_summary / kernel_details",
        extra_as_float=True,
        rows=rows,
        hook=hook,
        piece_bytes=piece_bytes,
        keep_extra=keep_extra,
        skip=skip,
    )
    return canonical_tasks(df, card=src.card, pmu=pmu)


def read_steps(
    src: Source, rows: RowPolicy, hook: BytesHook | None = None, piece_bytes: int = PIECE_BYTES
) -> pl.DataFrame:
    df, _ = read_table(
        src.steps,
        STEP_COLUMNS,
        what="step_trace",
        extra_as_float=False,
        rows=rows,
        hook=hook,
        piece_bytes=piece_bytes,
    )
    if "card" not in df.columns or df["card"].null_count() == df.height:
        df = df.with_columns(pl.lit(src.card or "0", dtype=pl.String).alias("card"))
    return df.select([pl.col(c).cast(t) for c, t in STEP_SCHEMA.items()])


def read_statistic(
    src: Source, rows: RowPolicy, hook: BytesHook | None = None, piece_bytes: int = PIECE_BYTES
) -> pl.DataFrame:
    df, _ = read_table(
        src.statistic,
        STAT_COLUMNS,
        what="op_statistic",
        extra_as_float=False,
        rows=rows,
        hook=hook,
        piece_bytes=piece_bytes,
    )
    return canonical_statistic(df, card=src.card)
