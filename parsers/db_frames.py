"""The frames of a db export (tasks, timeline, steps and its notes), each cached on its own and
read from SQLite at most once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from .cache import FrameCache, Schema, including
from .columns import EVENT_SCHEMA, STEP_SCHEMA
from .errors import ProfileError
from .frames import empty_tasks, with_event_columns
from .notes import NOTES_SCHEMA, Note, from_frame, to_frame
from .progress import BytesHook

if TYPE_CHECKING:
    from .db import DbExport


@dataclass(frozen=True)
class DbFrames:
    tasks: pl.DataFrame
    events: pl.DataFrame | None
    steps: pl.DataFrame | None
    notes: tuple[Note, ...]


def rows_as_bytes(hook: BytesHook, size: int) -> Callable[[int, int], None]:
    """A db read's rows (`rows` of `expected`) as bytes of its file, in proportion."""
    return lambda rows, expected: hook(size * rows // expected if expected else 0)


def read_db_cached(
    cache: FrameCache,
    db_path: Path,
    card: str | None,
    *,
    columns: Callable[[list[str]], list[str]],
    timeline: bool,
    strict: bool,
    hook: Callable[[int, int], None] | None = None,
    batch_rows: int | None = None,
    task_schema: Schema | None = None,
    event_columns: Callable[[list[str]], list[str]] | None = None,
) -> DbFrames:
    """The frames of the db export at `db_path`, each cached on its own.

    The entries are keyed by the db and the `-wal` / `-journal` beside it (a WAL writer changes
    only the `-wal`); with `strict`, a live or unfinished export is refused, cached or not."""
    from .db import BATCH_ROWS, read_db  # SQLite is only opened for db exports
    from .db_snapshot import refusal

    keyed = (db_path, *(p for p in (db_path.with_name(db_path.name + s) for s in ("-wal", "-journal")) if p.exists()))
    memo: dict[str, DbExport] = {}

    def export() -> DbExport:
        if "x" not in memo:
            memo["x"] = read_db(db_path, card=card, hook=hook, batch_rows=batch_rows or BATCH_ROWS, strict=strict)
        return memo["x"]

    kept = cache.load_or_build(
        "db_notes",
        keyed,
        lambda: to_frame(Note("db", n, file=db_path) for n in export().notes),
        card,
        schema=NOTES_SCHEMA,
    )
    notes = from_frame(kept)
    refused = refusal(n.text for n in notes) if strict else None
    if refused is not None:
        raise ProfileError(f"{db_path}: {refused}; leave out --strict to read it anyway")

    tasks = cache.load_or_build(
        "db_tasks",
        keyed,
        lambda: export().tasks,
        card,
        columns=columns,
        schema=task_schema or including(empty_tasks().schema),
    )
    events = None
    if timeline:
        events = cache.load_or_build(
            "db_events",
            keyed,
            lambda: _or_empty(export().events, EVENT_SCHEMA),
            card,
            schema=EVENT_SCHEMA,
            columns=event_columns,
        )
        events = with_event_columns(events)
        if events.height == 0:
            events = None
    steps = cache.load_or_build(
        "db_steps",
        keyed,
        lambda: _or_empty(export().steps, STEP_SCHEMA),
        card,
        schema=STEP_SCHEMA,
    )
    return DbFrames(tasks, events, steps if steps.height else None, notes)


def _or_empty(frame: pl.DataFrame | None, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    return frame if frame is not None else pl.DataFrame(schema=schema)
