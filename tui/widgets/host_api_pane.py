"""The Host API tab [5]: per host API, its calls, time and share of the card's span."""

from __future__ import annotations

import polars as pl

from npuscope.analysis import Finding
from npuscope.analysis.training_tables import TableFields, host_api_table
from npuscope.parsers.training import TrainingViews

from ..view_state import ViewState
from .frame_table import Column
from .view_pane import TableSpec, ViewPane

HOST_API_COLUMNS = (
    Column("api", "API", 28),
    Column("count", "Count", 8, numeric=True, decimals=0),
    Column("total_us", "Total(us)", 13, numeric=True),
    Column("share_pct", "Span(%)", 17, numeric=True, decimals=1, bar=True),
    Column("avg_us", "Avg(us)", 11, numeric=True),
    Column("max_us", "Max(us)", 11, numeric=True),
    Column("level", "Level", 10),
    Column("source", "Source", 24),
)


class HostApiPane(ViewPane):
    TAB = "host_api"
    SPECS = (
        TableSpec(
            "host_api",
            "host_api",
            "APIs",
            HOST_API_COLUMNS,
            TableFields(("api", "level", "source"), duration="total_us", wait="max_us"),
            duration="total_us",
            wait="max_us",
        ),
    )

    def frame_of(self, spec: TableSpec, views: TrainingViews, state: ViewState) -> pl.DataFrame:
        return host_api_table(views, state.card)

    def drill_state(self, finding: Finding, state: ViewState) -> ViewState:
        return self.drilled(state, "host_api", "total_us", True)

    def drill_row(self, finding: Finding, state: ViewState) -> None:
        api = finding.evidence[0].get("api") if finding.evidence else None
        if api is not None:
            self.table("host_api").move_to_key(api, key="api")
