"""The parallel view of a cluster: its TP / PP / DP / CP / EP sizes, its groups of ranks, and
per pipeline stage a stacked bar of the stage's mean step with a bar per rank of the stage.

Shown from the Ranks view with `p`; Esc goes back to it, `m` shows the communication matrix
in its place. The header says the sizes, the world size and where they come from (declared
in profiler_metadata.json or the db export's META_DATA, or inferred from the communication
files' HCCL groups, which it says plainly); the body (widgets/stage_chart.py) the groups,
the notes of the layout, the legend and the stages, each with its findings (stage imbalance,
pipeline bubble, a slow rank of the stage). Every figure is the cluster summary's, written as
the Ranks table writes it. The body scrolls vertically; nothing is cut at the right edge.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Static

from npuscope.analysis.cluster import ClusterSummary
from npuscope.analysis.parallel import SIZES, ParallelLayout

from ..ranks_state import rank_rows
from ..widgets.ranks_table import FigureFormat, figure_format
from ..widgets.stage_chart import ChartData, StageChart

MATRIX = "matrix"
"""What the view is dismissed with when `m` asks for the communication matrix."""
SOURCE_TEXT = {
    "profiler_metadata": "declared in the ranks' profiler_metadata.json",
    "db": "declared in the db exports' META_DATA",
}
INFERRED_TEXT = "INFERRED, not declared: no rank declares its layout; groups from the communication files' HCCL groups"


def layout_header(par: ParallelLayout | None, ranks: int) -> Text:
    """The header line: sizes, world, source ("?": a size neither declared nor inferable)."""
    text = Text()
    text.append(" parallel ", style="bold reverse")
    if par is None:
        text.append(f"  {ranks:,} ranks · no parallel layout: none declared, no communication group seen")
        return text
    sizes = " · ".join(f"{k} {par.sizes.get(k) if par.sizes.get(k) is not None else '?'}" for k in SIZES)
    text.append(f"  {sizes} · world {par.world_size:,}")
    stages = len(par.stages)
    text.append(f" · {stages} stage{'s' if stages != 1 else ''} · ")
    if par.source == "inferred":
        text.append(INFERRED_TEXT, style="bold yellow")
    else:
        text.append(SOURCE_TEXT.get(par.source, par.source))
    if any(par.sizes.get(k) is None for k in SIZES):
        text.append(" · ? not declared", style="dim")
    return text


class ParallelScreen(Screen[str | None]):
    """The cluster's parallel layout and its stages; Esc goes back to the Ranks view."""

    BINDINGS = [
        Binding("escape", "back", "Back to the ranks"),
        Binding("m", "matrix", "Comm matrix"),
        Binding("n", "stage(1)", "Next stage"),
        Binding("N", "stage(-1)", "Previous stage", show=False),
    ]
    """
    | key | action |
    |---|---|
    | `Esc` | back to the Ranks view |
    | `m` | the communication matrix in place of this view |
    | `n` / `N` | scroll to the next / previous stage |
    | `↑` `↓` `PgUp` `PgDn` `Home` `End` | scroll |
    """

    def __init__(self, summary: ClusterSummary, figures: FigureFormat | None = None) -> None:
        super().__init__()
        self.summary = summary
        self.figures = figures or figure_format(rank_rows(summary.ranks, summary.slow_ranks))
        self.stage_index = -1

    def compose(self) -> ComposeResult:
        s = self.summary
        yield Static(layout_header(s.parallel, len(s.ranks)), id="parallel-header")
        data = ChartData(s.parallel, s.ranks, s.slow_ranks, s.findings)
        yield StageChart(data, self.figures, id="stage-chart")
        yield Footer()

    def on_mount(self) -> None:
        self.chart.focus()

    @property
    def chart(self) -> StageChart:
        return self.query_one(StageChart)

    def action_back(self) -> None:
        self.dismiss(None)

    def action_matrix(self) -> None:
        self.dismiss(MATRIX)  # the Ranks view shows the matrix in its place

    def action_stage(self, step: int) -> None:
        par = self.summary.parallel
        if par is None or not par.stages:
            return
        self.stage_index = (self.stage_index + step) % len(par.stages)
        self.chart.scroll_to_stage(par.stages[self.stage_index].stage)
