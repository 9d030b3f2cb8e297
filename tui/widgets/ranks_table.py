"""`RanksTable`: the Ranks view's table, one row per rank of a cluster, slow and damaged marked.

A `FrameTable` with the rank columns: the rank and its mark (coloured by it), its pipeline
stage, the rank's step time, compute, communication, communication not overlapped
(exposed), free, pipeline bubble, wait (means per step), tasks, and a note: the one-line
error of a rank that could not be read, else the files the rank lacks that the other ranks
have ("no kernel_details.csv"). The rows, their filter and their order come from
tui/ranks_state.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from ..ranks_state import DAMAGED, SLOW
from .frame_table import NULL_TEXT, Column, FrameTable, Shown, format_value, shown_column

# Priorities: what 80 columns show (the note takes the room left); the rest scrolls sideways.
RANK_COLUMNS = (
    Column("rank", "Rank", 5, style_key="mark", priority=1),
    Column("mark", "Mark", 7, style_key="mark", priority=1),
    Column("stage", "Stage", 5, numeric=True, decimals=0, priority=1),
    Column("step_us", "Step", 9, numeric=True, decimals=1, unit="us", priority=1),
    Column("compute_us", "Compute", 11, numeric=True, decimals=1, unit="us", priority=1),
    Column("communication_us", "Comm", 9, numeric=True, decimals=1, unit="us", priority=3),
    Column("exposed_comm_us", "Exposed", 11, numeric=True, decimals=1, unit="us", priority=1),
    Column("free_us", "Free", 9, numeric=True, decimals=1, unit="us", priority=2),
    Column("bubble_us", "Bubble", 10, numeric=True, decimals=1, unit="us", priority=3),
    Column("wait_us", "Wait", 9, numeric=True, decimals=1, unit="us", priority=2),
    Column("tasks", "Tasks", 7, numeric=True, decimals=0, priority=3),
    Column("note", "Note", 7, flex=True, min_width=7, style_key="mark", priority=1),  # the room left
    Column("folder", "Folder", 30, priority=4),
)
MARK_STYLES = {SLOW: "bold yellow", DAMAGED: "bold red"}
FIGURE_COLUMNS = {c.key: c for c in RANK_COLUMNS if c.unit == "us"}
"""The time columns, by key: the other views of a cluster format a figure as its column does."""


class RanksTable(FrameTable):
    """One row per rank; Enter posts `FrameTable.RowSelected` (the screen opens the rank)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cell_styles=MARK_STYLES)

    def show(self, frame: pl.DataFrame, order: pl.Series, sort: tuple[str, bool]) -> None:
        """`frame`'s rows at `order`; a new order or filter starts at the top (worst first)."""
        key, desc = sort
        self.set_data(frame, RANK_COLUMNS, sort=None if key == "row" else sort, keep_key=None, order=order)


@dataclass(frozen=True)
class FigureFormat:
    """Each time column of the Ranks table as the table shows it (its unit, chosen by the
    column's extremes over every rank, and its decimals), so the bars and the parallel view
    say a figure exactly as the table does: `text("step_us", 83642.835)` is "83,642.8 us"."""

    shown: dict[str, Shown]

    def unit(self, key: str) -> str:
        shown = self.shown[key]
        return shown.title[len(shown.column.title) + 1 : -1] or shown.column.unit

    def number(self, key: str, value: float | None) -> str:
        shown = self.shown[key]
        return format_value(value, shown.column, shown.scale)

    def text(self, key: str, value: float | None) -> str:
        return f"{self.number(key, value)} {self.unit(key)}" if value is not None else NULL_TEXT


def figure_format(frame: pl.DataFrame) -> FigureFormat:
    """The format of the table's time columns for the rows of `frame` (ranks_state.rank_rows),
    whose extremes pick each column's unit as FrameTable.set_data does."""
    shown = {}
    for key, column in FIGURE_COLUMNS.items():
        extremes = (frame[key].min(), frame[key].max()) if frame.height and key in frame.columns else ()
        shown[key] = shown_column(column, extremes)
    return FigureFormat(shown)
