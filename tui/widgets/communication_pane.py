"""The Communication tab [4]: the card's collectives per op type (`o`: per op), then the links
(src, dst, transport, size, bandwidth)."""

from __future__ import annotations

from collections.abc import Hashable

import polars as pl
from textual.binding import Binding
from textual.message import Message

from npuscope.analysis import Finding
from npuscope.analysis.training_tables import TableFields, communication_by_type, communication_table, links_table
from npuscope.parsers.training import TrainingViews

from ..view_state import ViewState, set_comm_by_type
from .frame_table import Column
from .view_pane import TableSpec, ViewPane

COMM_COLUMNS = (
    Column("op_type", "OP Type", 16),
    Column("count", "Count", 7, numeric=True, decimals=0),
    Column("total_us", "Total(us)", 13, numeric=True),
    Column("share_pct", "Share(%)", 17, numeric=True, decimals=1, bar=True),
    Column("wait_us", "Wait(us)", 12, numeric=True),
    Column("size_mb", "Size(MB)", 10, numeric=True),
    Column("bandwidth_gbps", "BW(GB/s)", 9, numeric=True, decimals=2),
    Column("op_name", "Op Name", 30),
    Column("avg_us", "Avg(us)", 12, numeric=True),
    Column("transit_us", "Transit(us)", 12, numeric=True),
    Column("sync_us", "Sync(us)", 12, numeric=True),
    Column("source", "Source", 28),
)
LINKS_COLUMNS = (
    Column("src", "Src", 5, numeric=True, decimals=0),
    Column("dst", "Dst", 5, numeric=True, decimals=0),
    Column("transport", "Transport", 10),
    Column("size_mb", "Size(MB)", 12, numeric=True),
    Column("bandwidth_gbps", "BW(GB/s)", 10, numeric=True, decimals=2),
    Column("time_us", "Time(us)", 13, numeric=True),
    Column("group", "Group", 22),
    Column("source", "Source", 28),
)


class CommunicationPane(ViewPane):
    BINDINGS = [Binding("o", "per_op", "Collectives per op type / per op")]
    TAB = "communication"

    class GroupingToggled(Message):
        """`o`: the collectives per op, or back per op type (the main screen's state says which)."""

    SPECS = (
        TableSpec(
            "comm",
            "communication",
            "collectives",
            COMM_COLUMNS,
            TableFields(("op_name", "op_type", "source"), type_column="op_type", duration="total_us", wait="wait_us"),
            duration="total_us",
            wait="wait_us",
        ),
        TableSpec(
            "links",
            "links",
            "links",
            LINKS_COLUMNS,
            TableFields(("transport", "group", "src", "dst"), duration="time_us"),
            duration="size_mb",
            wait="bandwidth_gbps",
        ),
    )

    def frame_of(self, spec: TableSpec, views: TrainingViews, state: ViewState) -> pl.DataFrame:
        if spec.name == "links":
            return links_table(views, state.card)
        by = communication_by_type if state.comm_by_type else communication_table
        return by(views, state.card)

    def frame_key(self, spec: TableSpec, state: ViewState) -> Hashable:
        return (state.card, state.comm_by_type) if spec.name == "comm" else state.card

    def noun(self, spec: TableSpec, state: ViewState) -> str:
        if spec.name == "comm":
            return "op types (o: per op)" if state.comm_by_type else "collectives (o: per op type)"
        return spec.noun

    def action_per_op(self) -> None:
        self.post_message(self.GroupingToggled())

    def drill_state(self, finding: Finding, state: ViewState) -> ViewState:
        if finding.rule == "slow_link" or finding.view == "links":
            return self.drilled(state, "links", "bandwidth_gbps", False)  # slowest first
        state = set_comm_by_type(state, False)  # the evidence rows are ops
        return self.drilled(state, "comm", "total_us", True)

    def drill_row(self, finding: Finding, state: ViewState) -> None:
        evidence = finding.evidence[0] if finding.evidence else {}
        if finding.rule == "slow_link" or finding.view == "links":
            frame = self.frame(self.spec("links"), state)
            if frame is not None and evidence:
                hit = frame.filter(
                    (pl.col("src") == evidence.get("src")) & (pl.col("dst") == evidence.get("dst"))
                ).filter(pl.col("transport") == evidence.get("transport"))
                if hit.height:
                    self.table("links").move_to_key(hit["row"][0])
            return
        name = evidence.get("op_name")
        if name is not None:
            self.table("comm").move_to_key(name, key="op_name")
