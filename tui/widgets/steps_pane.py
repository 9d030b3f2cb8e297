"""The Steps tab [3]: a stacked bar per step, then the step table (compute, exposed communication, free)."""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl
from textual import on
from textual.widget import Widget

from npuscope.analysis import Finding
from npuscope.analysis.training_tables import TableFields, step_bars, steps_table
from npuscope.parsers.training import TrainingViews

from ..view_state import ViewState
from .frame_table import Column, FrameTable
from .step_bars import StepBars
from .view_pane import TableSpec, ViewPane

STEPS_COLUMNS = (
    Column("label", "Step", 6),
    Column("step_us", "Step(us)", 13, numeric=True),
    Column("compute_us", "Compute(us)", 13, numeric=True),
    Column("comm_not_overlapped_us", "NotOverlap(us)", 14, numeric=True),
    Column("free_us", "Free(us)", 13, numeric=True),
    Column("not_overlapped_pct", "NotOv%", 6, numeric=True, decimals=1),
    Column("free_pct", "Free%", 6, numeric=True, decimals=1),
    Column("overlapped_us", "Overlapped(us)", 14, numeric=True),
    Column("communication_us", "Comm(us)", 13, numeric=True),
    Column("source", "Source", 30),
)
# The column a finding of each rule is about, worst first.
DRILL_SORT = {"comm_not_overlapped": "comm_not_overlapped_us", "free_time": "free_us", "slow_rank": "step_us"}
SLOW_RANK_SORT = (
    ("communication not overlapped", "comm_not_overlapped_us"),
    ("compute", "compute_us"),
    ("free", "free_us"),
)


class StepsPane(ViewPane):
    TAB = "steps"
    SPECS = (
        TableSpec(
            "steps",
            "steps",
            "steps",
            STEPS_COLUMNS,
            TableFields(("label", "source"), duration="step_us", wait="free_us"),
            duration="step_us",
            wait="free_us",
        ),
    )

    def compose_extras(self) -> Iterable[Widget]:
        yield StepBars(id="step-bars")

    def frame_of(self, spec: TableSpec, views: TrainingViews, state: ViewState) -> pl.DataFrame:
        return steps_table(views, state.card)

    def show_extras(self, views: TrainingViews | None, card: str) -> None:
        if views is None:  # reading: no bars until the steps are there
            self.query_one(StepBars).set_bars(())

    def render_tables(self, state: ViewState, which: tuple[str, ...] | None = None) -> None:
        """The table, then the bars in the table's order: sorted by compute, the bars are too
        (in step order the marked first row's bar could be scrolled out, hiding step 1), and
        filtered, only the steps shown."""
        super().render_tables(state, which)
        shown = self.table("steps").frame if self.frame(self.SPECS[0], state) is not None else None
        self.query_one(StepBars).set_bars(step_bars(shown) if shown is not None else ())

    @on(FrameTable.RowHighlighted, "#steps-table")
    def _step_highlighted(self, message: FrameTable.RowHighlighted) -> None:
        self.query_one(StepBars).mark(message.row["label"] if message.row else None)

    def drill_state(self, finding: Finding, state: ViewState) -> ViewState:
        key = DRILL_SORT.get(finding.rule, "step_us")
        if finding.rule == "slow_rank":  # the figure the rank is slow in, as its title says
            what = finding.title.lower().partition(":")[2]
            found = [(what.find(word), k) for word, k in SLOW_RANK_SORT if word in what]
            key = min(found)[1] if found else key
        return self.drilled(state, "steps", key, True)

    def drill_row(self, finding: Finding, state: ViewState) -> None:
        step = finding.evidence[0].get("step") if finding.evidence else None
        if step is not None:
            self.table("steps").move_to_key(step, key="step")
