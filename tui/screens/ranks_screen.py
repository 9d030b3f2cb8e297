"""The Ranks view: a cluster's ranks, one row and one bar each, slow and damaged ranks marked.

Shown first when the path opened is a cluster (a folder of rank folders). The header names
the cluster, its ranks and their spread; below it the cluster's findings (slow rank, slow
link, stage imbalance, pipeline bubble, ...); then a stacked bar per rank (compute,
communication not overlapped, free: the table's own figures, means per step, adding up to
its Step, scaled to the longest rank) and the table of the ranks with their pipeline stage
and, for a rank that lacks files the others have, which. `/` filters, `d` `w` `t` `s` `r`
sort as in the other tables (tui/ranks_state.py holds the rows, the filter and the order;
the sort and the filter text are a `ViewState`). Enter posts `RankRequested`: the app loads
that rank while this view stays, with its progress here (Esc cancels), then shows the rank
in the main screen. A damaged rank's Enter says its one-line error instead, and so does a
rank of training-level files only (no task: opening it would show nothing). `p` shows the
parallel view (screens/parallel_screen.py), `m` the communication matrix
(screens/matrix_screen.py); Esc there comes back here.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer, Label, ProgressBar, Static

from npuscope.analysis.cluster import ClusterSummary
from npuscope.analysis.findings import SEVERITY_MARK
from npuscope.analysis.training_tables import StepBar

from ..digits import group_digits
from ..messages import RankRequested
from ..ranks_state import (
    DAMAGED,
    RANK_FILTER_HELP,
    RANKS,
    SORT_COLUMNS,
    SORT_KEYS,
    RankFilterError,
    parse_rank_filter,
    rank_positions,
    rank_rows,
    training_only_line,
)
from ..view_state import ViewState, next_sort_column, reverse, select, set_filter, sort_by
from ..widgets.filter_bar import FilterBar
from ..widgets.frame_table import FrameTable
from ..widgets.rank_bars import RankBar, RankBars
from ..widgets.ranks_table import RanksTable, figure_format
from ..widgets.stage_chart import longest_step
from .matrix_screen import PARALLEL, MatrixScreen
from .parallel_screen import MATRIX, ParallelScreen

SEVERITY_STYLE = {"critical": "bold red", "warning": "bold yellow", "info": "bold blue"}


def _us(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and value == value and value > 0 else 0.0


class RanksScreen(Screen[None]):
    """One row per rank of the open cluster; Enter opens the rank in the main screen."""

    BINDINGS = [
        Binding("enter", "open_rank", "Open rank"),
        Binding("/", "filter", "Filter"),
        Binding("escape", "escape", "Clear filter", show=False),
        Binding("d", "sort('duration_us')", "Sort step"),
        Binding("w", "sort('wait_us')", "Sort wait"),
        Binding("t", "sort('row')", "Rank order (again: reverse)", show=False),
        Binding("s", "next_sort_column", "Sort by the next column", show=False),
        Binding("r", "reverse", "Reverse the order", show=False),
        Binding("p", "parallel", "Parallel view"),
        Binding("m", "matrix", "Comm matrix"),
    ]
    """
    | key | action |
    |---|---|
    | `Enter` | open the highlighted rank in the usual views (a damaged rank, or one of training-level files only: says why not) |
    | `/` | filter the ranks; Esc clears |
    | `d` / `w` / `t` | sort by step time / by wait / rank order; the same key again reverses |
    | `s` / `r` | sort by the next column / reverse the order |
    | `p` | the parallel view: sizes, groups, a stacked bar per pipeline stage and its ranks |
    | `m` | the communication matrix: a rank x rank grid of the links, slow links marked |
    """

    def __init__(self, summary: ClusterSummary) -> None:
        super().__init__()
        self.summary = summary
        self.frame = rank_rows(summary.ranks, summary.slow_ranks)
        self.figures = figure_format(self.frame)
        self.longest_us = longest_step(summary.ranks)
        self.state = ViewState(tab=RANKS)
        self.loading_rank: str | None = None
        self.message = ""  # the last thing Enter said (a damaged rank's error)

    # ---------------------------------------------------------------- layout
    def compose(self) -> ComposeResult:
        yield Static(self._header_text(), id="ranks-header")
        yield Static(self._findings_text(), id="ranks-findings")
        yield RankBars(id="rank-bars")
        yield RanksTable(id="ranks-table")
        yield FilterBar()
        with Horizontal(id="ranks-loading"):
            yield Label("", id="ranks-loading-label")
            yield ProgressBar(total=100, show_eta=False, id="ranks-loading-bar")
        yield Static("", id="ranks-status")
        yield Footer()

    def on_mount(self) -> None:
        bar = self.query_one(FilterBar)
        bar.placeholder = RANK_FILTER_HELP
        bar.display = False
        self.query_one("#ranks-loading").display = False
        self.refresh_table()
        self.table.focus()

    @property
    def table(self) -> RanksTable:
        return self.query_one(RanksTable)

    def _header_text(self) -> Text:
        s = self.summary
        damaged = sum(1 for r in s.ranks if r.error)
        slow = ", ".join(s.slow_ranks) if s.slow_ranks else "none"
        return Text.assemble(
            ("cluster ", "dim"),
            (f" {s.path.name} ", "bold reverse"),
            f"  {len(s.ranks):,} ranks",
            (f" · {damaged:,} damaged" if damaged else "", "bold red"),
            " · slow: ",
            (slow, "bold yellow" if s.slow_ranks else ""),
            f" · spread {s.spread_pct:,.1f}%",
            ("   Enter opens a rank", "dim"),
        )

    def _findings_text(self) -> Text:
        """The cluster's findings, one line each (the slow links too when no finding names them)."""
        s = self.summary
        text = Text(no_wrap=True, overflow="ellipsis")
        lines = 0
        for f in s.findings:
            if lines:
                text.append("\n")
            text.append(SEVERITY_MARK[f.severity], SEVERITY_STYLE[f.severity])
            text.append(f" {group_digits(f.title)}")
            lines += 1
        named = any(f.rule == "slow_link" for f in s.findings)
        for link in () if named else s.slow_links:
            if lines:
                text.append("\n")
            text.append("slow link ", "bold yellow")
            text.append(link)
            lines += 1
        if not lines:
            text.append("no slow rank or slow link found", "dim")
        return text

    # ---------------------------------------------------------------- rows
    def refresh_table(self) -> None:
        """Filter and sort the rows as the state says; the bars follow the table's order."""
        key, desc = self.state.sort_of(RANKS)
        try:
            terms = parse_rank_filter(self.state.filter_of(RANKS))
        except RankFilterError:
            terms = ()
        order = rank_positions(self.frame, terms, key, desc)
        self.table.show(self.frame, order, (key, desc))
        shown = self.frame[order]
        self.query_one(RankBars).set_bars(
            [self._bar(r) for r in shown.iter_rows(named=True)],
            self.longest_us,
            self.figures.text("step_us", self.longest_us) if self.longest_us else "",
        )
        row = self.table.current_row
        self.query_one(RankBars).mark(row["rank"] if row else None)
        self._update_status()

    def _bar(self, r: dict[str, Any]) -> RankBar:
        """A rank's bar: the table row's compute, exposed and free (means per step), its Step."""
        bar = StepBar(r["rank"], _us(r["compute_us"]), _us(r["exposed_comm_us"]), _us(r["free_us"]))
        if r["mark"] == DAMAGED:
            return RankBar(bar, DAMAGED, r["error"] or "damaged")
        if not r["steps"]:
            return RankBar(bar, r["mark"], "no steps: its figures are totals, not per step")
        return RankBar(bar, r["mark"], "", self.figures.text("step_us", r["step_us"]))

    def _update_status(self) -> None:
        total = self.frame.height
        key, desc = self.state.sort_of(RANKS)
        order = (
            ("rank order, reversed" if desc else "rank order")
            if key == "row"
            else f"sorted by {key} {'▼' if desc else '▲'}"
        )
        text = f"{self.table.row_count:,} of {total:,} ranks · {order}"
        flt = self.state.filter_of(RANKS)
        if flt:
            text += f" · filter: {flt}"
        if self.message:
            text += f" · {self.message}"
        elif (row := self.table.current_row) is not None and row["missing"]:
            text += f" · rank {row['rank']}: {row['missing']}"
        self.query_one("#ranks-status", Static).update(Text(text, no_wrap=True, overflow="ellipsis"))

    def select_rank(self, rank: str | None) -> None:
        """Put the cursor on `rank` (the rank open in the main screen), if it is shown."""
        if rank is not None and self.is_mounted:
            self.table.move_to_key(rank, key="rank")

    # ---------------------------------------------------------------- loading a rank
    def show_loading(self, rank: str) -> None:
        self.loading_rank = rank
        self.message = ""
        self.query_one("#ranks-loading").display = True
        self.query_one("#ranks-loading-label", Label).update(f"opening rank {rank} · Esc cancels ")
        self.query_one("#ranks-loading-bar", ProgressBar).update(total=100, progress=0)
        self._update_status()

    def show_progress(self, done: int, total: int, label: str) -> None:
        self.query_one("#ranks-loading-bar", ProgressBar).update(total=max(total, 1), progress=done)
        self.query_one("#ranks-loading-label", Label).update(
            f"rank {self.loading_rank} {label} {done / 1e6:,.1f}/{total / 1e6:,.1f} MB · Esc cancels "
        )

    def show_idle(self, message: str = "") -> None:
        """No rank is loading (any more); `message` says why (cancelled, its error)."""
        self.loading_rank = None
        self.message = message
        self.query_one("#ranks-loading").display = False
        self._update_status()

    # ---------------------------------------------------------------- actions
    def action_open_row(self) -> None:
        self.table.action_select_cursor()

    def action_open_rank(self) -> None:
        self.table.action_select_cursor()

    @on(FrameTable.RowSelected, "#ranks-table")
    def _rank_chosen(self, message: FrameTable.RowSelected) -> None:
        self.open_rank(message.row)

    def open_rank(self, row: dict[str, Any]) -> None:
        if row["mark"] == DAMAGED:
            self.message = f"rank {row['rank']} cannot be opened: {row['error']}"
            self._update_status()
            self.notify(f"rank {row['rank']}: {row['error']}", title="Cannot open", severity="error", markup=False)
            return
        line = training_only_line(self.summary.rank(row["rank"]))
        if line is not None:
            self.message = line
            self._update_status()
            self.notify(line, title="Nothing to open", markup=False)
            return
        self.app.post_message(RankRequested(row["rank"]))

    def _busy(self) -> bool:
        """A rank is loading: the other views wait (its progress is shown here)."""
        if self.loading_rank is None:
            return False
        self.notify(f"rank {self.loading_rank} is opening · Esc cancels", markup=False)
        return True

    def action_parallel(self) -> None:
        if not self._busy():
            self.app.push_screen(ParallelScreen(self.summary, self.figures), self._other_view)

    def action_matrix(self) -> None:
        if not self._busy():
            self.app.push_screen(MatrixScreen(self.summary), self._other_view)

    def _other_view(self, asked: str | None) -> None:
        """The parallel view or the matrix was left for the other one (`m` / `p` there)."""
        if asked == MATRIX:
            self.action_matrix()
        elif asked == PARALLEL:
            self.action_parallel()

    @on(FrameTable.RowHighlighted, "#ranks-table")
    def _rank_highlighted(self, message: FrameTable.RowHighlighted) -> None:
        rank = message.row["rank"] if message.row else None
        if rank is not None:
            self.state = select(self.state, RANKS, rank)
        self.query_one(RankBars).mark(rank)
        self._update_status()

    def action_sort(self, key: str) -> None:
        self.state = sort_by(self.state, RANKS, SORT_KEYS.get(key, key))
        self.refresh_table()

    def action_next_sort_column(self) -> None:
        self.state = next_sort_column(self.state, RANKS, SORT_COLUMNS)
        self.refresh_table()

    def action_reverse(self) -> None:
        self.state = reverse(self.state, RANKS)
        self.refresh_table()

    @on(FrameTable.HeaderSelected, "#ranks-table")
    def _header(self, message: FrameTable.HeaderSelected) -> None:
        key = "row" if message.key in ("rank", "mark", "folder", "error", "note") else message.key
        self.state = sort_by(self.state, RANKS, key)
        self.refresh_table()

    def action_filter(self) -> None:
        bar = self.query_one(FilterBar)
        bar.display = True
        bar.value = self.state.filter_of(RANKS)
        bar.focus()

    def action_escape(self) -> None:
        if self.state.filter_of(RANKS):
            self.apply_filter("")

    def apply_filter(self, text: str) -> bool:
        """Filter the ranks by `text`; a term that means nothing is said, the filter kept."""
        try:
            parse_rank_filter(text)
        except RankFilterError as exc:
            self.notify(str(exc), title="Filter", severity="error", markup=False)
            return False
        self.state = set_filter(self.state, text, tab=RANKS)
        bar = self.query_one(FilterBar)
        bar.value = self.state.filter_of(RANKS)
        bar.display = bool(bar.value)
        self.refresh_table()
        return True

    @on(FilterBar.Applied)
    def _filter_applied(self, message: FilterBar.Applied) -> None:
        if self.apply_filter(message.text):
            self.table.focus()
