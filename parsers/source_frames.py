"""One source of a capture (one card, or all cards of a merged export) read into its frames.

`read_source` reads the export an open planned for the source: the db export, or the text
export's tables in order (tasks, timeline, statistic, steps), each through the cache, each
reporting its bytes to the open's progress. What it gives is one frozen `SourceFrames`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Literal

import polars as pl

from .cache import FrameCache, Schema, including
from .columns import DETAIL_COLUMNS, EVENT_SCHEMA, LIGHT_EVENT_COLUMNS, STAT_SCHEMA, TASK_ORDER
from .db_frames import read_db_cached, rows_as_bytes
from .errors import ProfileError
from .export_tables import cached_table, read_statistic, read_steps, read_tasks
from .frames import derive_statistic, empty_tasks, with_event_columns
from .layout import Source
from .notes import Note
from .progress import LoadProgress, files_size
from .read_options import ReadOptions
from .sanity import card_checks, statistic_problem
from .timeline import read_timeline
from .timeline_tasks import device_tasks, paddle_tasks

TasksFrom = Literal["op_summary", "db", "timeline", "paddle", "none"]
"""Where a profile's tasks came from."""
SourceKind = Literal["text", "db"]
"""Which export of a capture was read."""


@dataclass(frozen=True)
class SourceFrames:
    """What one source gave."""

    kind: SourceKind
    tasks: pl.DataFrame | None
    tasks_from: TasksFrom | None  # None: the source has no tasks
    statistic: pl.DataFrame | None
    statistic_derived: bool  # derived from the tasks (no op_statistic, or one replaced)
    statistic_replaced: bool  # an op_statistic that disagreed with the tasks, replaced
    events: pl.DataFrame | None
    steps: pl.DataFrame | None
    notes: tuple[Note, ...]
    pmu_columns: tuple[str, ...]  # the PMU counters the files hold, in file order
    card_checks: pl.DataFrame | None = None  # card_checks(tasks), when the statistic check made them


class TaskColumns:
    """The columns of a tasks frame an open keeps (`ReadOptions.pmu`, `details`), given the
    names of a header or a cache entry; the PMU counters among the names are kept in `seen`
    (a dict, in file order: a wide header is not quadratic)."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self.seen: dict[str, None] = {}

    def __call__(self, names: list[str]) -> list[str]:
        self.seen.update((n, None) for n in names if n not in TASK_ORDER)
        pmu, details = self.options.pmu, self.options.details
        ratios = pmu == "ratios"
        return [
            n
            for n in names
            if (details or n not in DETAIL_COLUMNS)
            and (pmu is True or n in TASK_ORDER or (ratios and n.endswith("_ratio")))
        ]


def task_schema(options: ReadOptions) -> Schema:
    """What a tasks entry must hold to be used: the canonical columns this open reads."""
    return including({n: t for n, t in empty_tasks().schema.items() if options.details or n not in DETAIL_COLUMNS})


def event_keep(options: ReadOptions) -> frozenset[str] | None:
    """The timeline's columns a light open reads (the others are null), or None for all."""
    return None if options.details else LIGHT_EVENT_COLUMNS


def read_source(
    src: Source, cache: FrameCache, options: ReadOptions, progress: LoadProgress, *, paddle: bool
) -> SourceFrames:
    """The frames of `src` (as the plan reduced it: its db, or its text files); `paddle`: the
    capture is a Paddle trace (tasks from its timeline are Paddle's)."""
    progress.check()
    if src.db is not None:
        return _db_source(src, cache, options, progress)
    return _text_source(src, cache, options, progress, paddle)


def _db_source(src: Source, cache: FrameCache, options: ReadOptions, progress: LoadProgress) -> SourceFrames:
    assert src.db is not None
    columns = TaskColumns(options)
    keep = event_keep(options)
    hook = progress.inside((src.db,), "db export")
    read = read_db_cached(
        cache,
        src.db,
        src.card,
        columns=columns,
        timeline=options.timeline,
        strict=options.strict,
        hook=None if hook is None else rows_as_bytes(hook, files_size((src.db,))),
        batch_rows=options.batch_rows,
        task_schema=task_schema(options),
        event_columns=lambda names: [n for n in names if keep is None or n in keep],
    )
    progress.past((src.db,), "db export")
    stat = cache.load_or_build(
        "derived_statistic", (src.db,), partial(derive_statistic, read.tasks), src.card, schema=STAT_SCHEMA
    )
    return SourceFrames(
        kind="db",
        tasks=read.tasks,
        tasks_from="db",
        statistic=stat,
        statistic_derived=True,
        statistic_replaced=False,
        events=read.events,
        steps=read.steps,
        notes=read.notes,
        pmu_columns=tuple(columns.seen),
    )


def _text_source(
    src: Source, cache: FrameCache, options: ReadOptions, progress: LoadProgress, paddle: bool
) -> SourceFrames:
    columns = TaskColumns(options)
    notes: list[Note] = []
    tasks = _tasks(src, cache, options, progress, columns, notes) if src.tasks else None
    tasks_from: TasksFrom | None = "op_summary" if src.tasks else None
    # Newer torch_npu kernel_details carry the device (Device_id 6) while the source's card
    # is the rank of profiler_info_<rank>.json (0): the rest of the source follows its tasks.
    own = _tasks_card(tasks, src.card)
    events = _events(src, cache, options, progress, own, notes) if src.timeline else None
    if tasks is None and events is not None:
        tasks, tasks_from = (paddle_tasks(events), "paddle") if paddle else (device_tasks(events), "timeline")
    stat = _statistic(src, tasks, own, cache, options, progress, notes)
    steps = _steps(src, own, cache, options, progress, notes) if src.steps else None
    return SourceFrames(
        kind="text",
        tasks=tasks,
        tasks_from=tasks_from,
        statistic=stat.frame,
        statistic_derived=stat.derived,
        statistic_replaced=stat.replaced,
        events=events,
        steps=steps,
        notes=tuple(notes),
        pmu_columns=tuple(columns.seen),
        card_checks=stat.checks,
    )


def _tasks(
    src: Source,
    cache: FrameCache,
    options: ReadOptions,
    progress: LoadProgress,
    columns: TaskColumns,
    notes: list[Note],
) -> pl.DataFrame:
    # With no cache to fill, the columns not asked for are not even parsed.
    light = not cache.enabled and (options.pmu is not True or not options.details)
    read = partial(
        read_tasks,
        src,
        hook=progress.inside(src.tasks, "op summary"),
        piece_bytes=options.piece_bytes,
        keep_extra=columns if light else None,
        skip=() if options.details or not light else DETAIL_COLUMNS,
    )
    # A light open (details=False: inspect) writes a new entry at once and keeps only its
    # columns: the whole frame is not held while the rest is read (2M tasks, then a 1.8 GB
    # timeline: the tasks go first, so their whole frame is gone before the timeline's is
    # built). Others queue the write, which runs once the profile is open.
    tasks = cached_table(
        cache,
        "tasks",
        src.tasks,
        read,
        src.card,
        options.strict,
        notes,
        columns=columns,
        schema=task_schema(options),
        write_now=not options.details,
    )
    progress.past(src.tasks, "op summary")
    return tasks


def _events(
    src: Source,
    cache: FrameCache,
    options: ReadOptions,
    progress: LoadProgress,
    own: str | None,
    notes: list[Note],
) -> pl.DataFrame | None:
    # Tasks taken from the timeline (no op_summary) need all of its columns.
    keep = event_keep(options) if src.tasks else None
    read = partial(
        read_timeline,
        src.timeline,
        card=src.card,
        columns=None if cache.enabled else keep,
        hook=progress.inside(src.timeline, "timeline"),
    )
    events: pl.DataFrame | None
    try:
        events = cache.load_or_build(
            "events",
            src.timeline,
            read,
            src.card,
            schema=EVENT_SCHEMA,
            write_now=keep is not None,
            columns=None if keep is None else (lambda names: [n for n in names if n in keep]),
        )
        if keep is not None:
            events = with_event_columns(events)
        events = _relabel(events, src.card, own)
    except ProfileError as exc:
        if not src.tasks:  # the timeline is all there is
            raise
        # A broken timeline must not hide a good op_summary: go on without it.
        notes.append(Note("timeline_not_read", f"timeline not read: {exc}"))
        events = None
    progress.past(src.timeline, "timeline")
    return events


@dataclass(frozen=True)
class _Statistic:
    frame: pl.DataFrame | None
    derived: bool = False
    replaced: bool = False
    checks: pl.DataFrame | None = None


def _statistic(
    src: Source,
    tasks: pl.DataFrame | None,
    own: str | None,
    cache: FrameCache,
    options: ReadOptions,
    progress: LoadProgress,
    notes: list[Note],
) -> _Statistic:
    """The source's op_statistic, or one derived from its tasks when it has none or one that
    disagrees with them."""
    if not src.statistic:
        if tasks is None:
            return _Statistic(None)
        if src.tasks:  # cached with the tasks it comes from
            derived = cache.load_or_build(
                "derived_statistic", src.tasks, partial(derive_statistic, tasks), src.card, schema=STAT_SCHEMA
            )
            return _Statistic(derived, derived=True)
        return _Statistic(derive_statistic(tasks), derived=True)
    read = partial(
        read_statistic, src, hook=progress.inside(src.statistic, "op statistic"), piece_bytes=options.piece_bytes
    )
    stat = _relabel(
        cached_table(cache, "statistic", src.statistic, read, src.card, options.strict, notes), src.card, own
    )
    found = _Statistic(stat)
    if tasks is not None and tasks.height:
        # One pass per card for both checks: the time check reuses it when this is the
        # profile's only tasks frame.
        # Cached with the tasks it comes from: a reopen does not scan every task again.
        checks = cache.load_or_build("card_checks", src.tasks, partial(card_checks, tasks), src.card)
        found = _Statistic(stat, checks=checks)
        disagree = statistic_problem(tasks, stat, checks)
        if disagree is not None:
            notes.append(Note("statistic_replaced", disagree))
            found = _Statistic(derive_statistic(tasks), derived=True, replaced=True, checks=checks)
    progress.past(src.statistic, "op statistic")
    return found


def _steps(
    src: Source,
    own: str | None,
    cache: FrameCache,
    options: ReadOptions,
    progress: LoadProgress,
    notes: list[Note],
) -> pl.DataFrame:
    read = partial(read_steps, src, hook=progress.inside(src.steps, "step trace"), piece_bytes=options.piece_bytes)
    steps = _relabel(cached_table(cache, "steps", src.steps, read, src.card, options.strict, notes), src.card, own)
    progress.past(src.steps, "step trace")
    return steps


def _tasks_card(tasks: pl.DataFrame | None, card: str | None) -> str | None:
    """The one card a source's tasks name when it is not the source's own card, else None."""
    if tasks is None or card is None or tasks.height == 0:
        return None
    cards = tasks["card"].unique()
    return str(cards[0]) if cards.len() == 1 and cards[0] != card else None


def _relabel(frame: pl.DataFrame, card: str | None, own: str | None) -> pl.DataFrame:
    """`frame` with its rows of `card` moved to `own` (the card of the source's tasks)."""
    if own is None or card is None or "card" not in frame.columns:
        return frame
    return frame.with_columns(pl.when(pl.col("card") == card).then(pl.lit(own)).otherwise(pl.col("card")).alias("card"))
