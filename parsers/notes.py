"""Notes of an open as data: what a read left out or cannot trust, and the line the user reads.

A `Note` has a kind, the file, first line and count it is about when it has them, and its
text; readers that count (damaged rows skipped) read the data, the report and the explorer
show the text (`Profile.notes`). The texts of the notes an open adds itself are made here;
the cache keeps the notes of a table beside its frame (`to_frame`, `from_frame`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

import polars as pl

NoteKind = Literal[
    "layout",  # what discovery found odd about the folder (Capture.notes)
    "cache",  # the cache not used, not written, or an entry rebuilt
    "skipped_rows",  # damaged rows of a CSV table left out: file, first line, count
    "db",  # what a db export lacks, or holds that is not read
    "timeline_not_read",  # a broken timeline beside a good op_summary
    "outlying_events",  # timeline events far outside the device activity: count
    "statistic_replaced",  # an op_statistic that disagrees with the tasks
    "time_problem",  # start times that cannot give spans (Profile.time_problem)
    "statistic_derived",  # no op_statistic file
    "tasks_from_timeline",  # no op_summary
    "not_read",  # a file found but not read: file
    "types_unknown",  # no OP Type in the files
]


@dataclass(frozen=True)
class Note:
    """One note; `str(note)` is its text."""

    kind: NoteKind
    text: str
    file: Path | None = None
    line: int | None = None  # the first line it is about
    count: int = 0  # how many rows or events it is about

    def __str__(self) -> str:
        return self.text


def rendered(notes: Iterable[Note]) -> tuple[str, ...]:
    return tuple(n.text for n in notes)


def counted(notes: Iterable[Note], kind: NoteKind) -> int:
    """The sum of the counts of the notes of `kind`."""
    return sum(n.count for n in notes if n.kind == kind)


def skipped_rows(path: Path, lines: Sequence[int]) -> Note:
    """Rows of `path` with fewer fields than the header, left out (`lines`: their numbers)."""
    shown = ", ".join(str(n) for n in lines[:5]) + (", ..." if len(lines) > 5 else "")
    return Note(
        "skipped_rows",
        f"{path}: skipped {len(lines):,} damaged row(s) with fewer fields than the header (line(s) {shown})",
        file=path,
        line=lines[0],
        count=len(lines),
    )


def refused(note: Note) -> str:
    """The error `--strict` gives for a table whose read left `note` (damaged rows)."""
    return note.text.replace("skipped", "has", 1) + "; leave out --strict to skip them"


def outlying_events(count: int) -> Note:
    return Note(
        "outlying_events",
        f"{count:,} timeline event(s) lie far outside the device activity and are left "
        "out of the timeline (their times are damaged or from another run)",
        count=count,
    )


def not_read(path: Path, why: str) -> Note:
    return Note("not_read", f"not read: {path.name} ({why})", file=path)


STATISTIC_DERIVED = Note("statistic_derived", "op_statistic derived from the tasks (no op_statistic file)")
TASKS_FROM_TIMELINE = Note(
    "tasks_from_timeline", "tasks derived from the timeline (no op_summary): OP Type read from the kernel name"
)
TYPES_UNKNOWN = Note(
    "types_unknown",
    "op types unknown: the files record no OP Type or core type (torch_npu Level0, "
    "its default level, leaves them N/A); tasks are shown as 'unknown', "
    "communication is told by its hcom_ name; capture at Level1 for op types",
)


NOTES_SCHEMA: dict[str, pl.DataType] = {
    "kind": pl.String(),
    "text": pl.String(),
    "file": pl.String(),
    "line": pl.Int64(),
    "count": pl.Int64(),
}


def to_frame(notes: Iterable[Note]) -> pl.DataFrame:
    """Notes as a frame of NOTES_SCHEMA (a cache entry)."""
    rows = [(n.kind, n.text, None if n.file is None else str(n.file), n.line, n.count) for n in notes]
    return pl.DataFrame(rows, schema=NOTES_SCHEMA, orient="row")


def from_frame(frame: pl.DataFrame) -> tuple[Note, ...]:
    """The notes `to_frame` wrote (an entry is keyed by the parser's version: its kinds are these)."""
    return tuple(
        Note(cast(NoteKind, kind), text, None if file is None else Path(file), line, count)
        for kind, text, file, line, count in frame.select(list(NOTES_SCHEMA)).iter_rows()
    )
