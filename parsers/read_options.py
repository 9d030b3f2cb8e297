"""How the files of a capture are read: one frozen `ReadOptions`, and the keywords that make it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypedDict, get_args

from .csv_table import PIECE_BYTES

SourceChoice = Literal["auto", "text", "db"]
"""Which export of a capture to read (`--source`)."""
SOURCES: tuple[SourceChoice, ...] = get_args(SourceChoice)
PmuChoice = bool | Literal["ratios"]
"""The PMU counter columns of the tasks to keep: all, none, or the pipe ratios (`*_ratio`)."""


@dataclass(frozen=True)
class ReadOptions:
    """How the user asked for files to be read (`--strict`, `--source`, `--no-timeline`), and
    what a command keeps of them.

    `pmu=False` leaves the PMU counter columns out of the tasks frame (their names are still
    reported): on 2M rows they are ~400 MB. `pmu="ratios"` keeps only the pipe ratio columns,
    what the bound type of an op type is computed from. `details=False` leaves the columns
    that describe a task beyond its name, type and times (DETAIL_COLUMNS) null, and of the
    timeline keeps LIGHT_EVENT_COLUMNS: a command that only counts time reads over a third
    less. `piece_bytes` and `batch_rows` are how often a read reports progress inside a file.
    """

    strict: bool = False  # refuse a file with damaged rows instead of skipping them with a note
    source: SourceChoice = "auto"  # the text or the db export when a capture has both (auto: db)
    timeline: bool = True
    pmu: PmuChoice = True
    details: bool = True
    piece_bytes: int = PIECE_BYTES  # a CSV table of twice this is parsed in pieces of this
    batch_rows: int | None = None  # rows per batch of a db query (None: db.BATCH_ROWS)
    # A capture of training-level files only (a cluster's rank without tasks) opens as a
    # profile of no tasks instead of being refused: the cluster reads its steps and links.
    training_only: bool = False


class ReadChoices(TypedDict, total=False):
    """`ReadOptions` as keywords (`open_profile(path, strict=True)`): the same names."""

    strict: bool
    source: SourceChoice
    timeline: bool
    pmu: PmuChoice
    details: bool
    piece_bytes: int
    batch_rows: int | None
    training_only: bool
