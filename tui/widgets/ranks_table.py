"""`RanksTable`: the Ranks view's table, one row per rank of a cluster, slow and damaged marked.

A `FrameTable` with the rank columns: the rank and its mark (coloured by it), the rank's
step time, compute, communication, communication not overlapped (exposed), free, wait,
tasks, and the one-line error of a rank that could not be read. The rows, their filter and
their order come from tui/ranks_state.py.
"""

from __future__ import annotations

import polars as pl

from ..ranks_state import DAMAGED, SLOW
from .frame_table import Column, FrameTable

# Priorities: what 80 columns show (Error takes the room left); the rest scrolls sideways.
RANK_COLUMNS = (
    Column("rank", "Rank", 5, style_key="mark", priority=1),
    Column("mark", "Mark", 7, style_key="mark", priority=1),
    Column("step_us", "Step", 9, numeric=True, decimals=1, unit="us", priority=1),
    Column("compute_us", "Compute", 11, numeric=True, decimals=1, unit="us", priority=1),
    Column("communication_us", "Comm", 9, numeric=True, decimals=1, unit="us", priority=3),
    Column("exposed_comm_us", "Exposed", 11, numeric=True, decimals=1, unit="us", priority=1),
    Column("free_us", "Free", 9, numeric=True, decimals=1, unit="us", priority=2),
    Column("wait_us", "Wait", 9, numeric=True, decimals=1, unit="us", priority=2),
    Column("tasks", "Tasks", 7, numeric=True, decimals=0, priority=3),
    Column("error", "Error", 7, flex=True, min_width=7, priority=1),  # the room left
    Column("folder", "Folder", 40, priority=4),
)
MARK_STYLES = {SLOW: "bold yellow", DAMAGED: "bold red"}


class RanksTable(FrameTable):
    """One row per rank; Enter posts `FrameTable.RowSelected` (the screen opens the rank)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cell_styles=MARK_STYLES)

    def show(self, frame: pl.DataFrame, order: pl.Series, sort: tuple[str, bool]) -> None:
        """`frame`'s rows at `order`; a new order or filter starts at the top (worst first)."""
        key, desc = sort
        self.set_data(frame, RANK_COLUMNS, sort=None if key == "row" else sort, keep_key=None, order=order)
