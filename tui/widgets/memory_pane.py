"""The Memory tab [6]: the card's peaks (allocated, reserved, APP, capacity when known), a
sparkline of allocated memory over the capture, and the operators by their largest allocation."""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl
from rich.text import Text
from textual.widget import Widget
from textual.widgets import Static

from npuscope.analysis import Finding
from npuscope.analysis.training_tables import (
    TableFields,
    memory_curve,
    memory_peaks,
    memory_top_ops_table,
    missing_text,
)
from npuscope.parsers.training import TrainingViews

from ..view_state import ViewState
from .frame_table import Column
from .view_pane import TableSpec, ViewPane

TOP_OPS_COLUMNS = (
    Column("op_name", "Op Name", 34),
    Column("size_mb", "Largest(MB)", 12, numeric=True),
    Column("count", "Count", 7, numeric=True, decimals=0),
    Column("total_mb", "Total(MB)", 12, numeric=True),
    Column("source", "Source", 24),
)
SPARK = " ▁▂▃▄▅▆▇█"
SPARK_CELLS = 32


def sparkline(levels: tuple[float, ...]) -> str:
    return "".join(SPARK[max(1, round(v * 8))] if v > 0 else SPARK[0] for v in levels)


class MemoryPane(ViewPane):
    TAB = "memory"
    SPECS = (
        TableSpec(
            "memory",
            "memory_top_ops",
            "operators",
            TOP_OPS_COLUMNS,
            TableFields(("op_name", "source"), duration="size_mb", wait="total_mb"),
            duration="size_mb",
            wait="total_mb",
        ),
    )

    def compose_extras(self) -> Iterable[Widget]:
        yield Static("", id="memory-peaks", markup=False)
        yield Static("", id="memory-curve", markup=False)

    def frame_of(self, spec: TableSpec, views: TrainingViews, state: ViewState) -> pl.DataFrame:
        return memory_top_ops_table(views, state.card)

    def show_extras(self, views: TrainingViews | None, card: str) -> None:
        peaks_line = self.query_one("#memory-peaks", Static)
        curve_line = self.query_one("#memory-curve", Static)
        peaks = memory_peaks(views, card) if views is not None else None
        if views is None:
            peaks_line.update("")
        elif peaks is None:
            peaks_line.update(missing_text(views, "memory", card) or "")
        else:
            peaks_line.update(Text.assemble((peaks.line(), "bold"), (f"  ({peaks.source})", "dim")))
        curve = memory_curve(views, card, SPARK_CELLS) if views is not None else None
        curve_line.display = curve is not None
        if curve is not None:
            of = "capacity" if peaks is not None and peaks.capacity_mb else "reserved"
            curve_line.update(
                Text.assemble(
                    (f"{curve.what} ", "dim"),
                    (sparkline(curve.levels), "dodger_blue2"),
                    (f" {curve.low_mb:,.0f}–{curve.high_mb:,.0f} of {curve.scale_mb:,.0f} MB {of}", "dim"),
                )
            )

    def drill_state(self, finding: Finding, state: ViewState) -> ViewState:
        return self.drilled(state, "memory", "size_mb", True)
