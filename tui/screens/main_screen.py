"""The main screen: header, cards, the op and training-level tabs, mini timeline.

What it shows (card, tab, filters, sorts, highlighted rows, cards open, the training tabs'
tables and grouping) is one `ViewState` (tui/view_state.py): keys apply its pure transitions
and the screen renders the result, asking the analysis layer for the frames; the widgets and
panes only draw what they are given. The training-level views (steps, communication, host
API, memory) are read in a worker once the first screen shows; their tabs say "reading…"
until then, and each tab has its own sorts and filter in the state. Each profile shown has a
generation: the workers (training views, timeline) are handed their inputs and return
results tagged with it, and a result of a profile no longer shown is dropped (tui/messages.py).
Loading, comparing and cancelling are requests posted to the app. The keys are listed under
`MainScreen.BINDINGS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

import polars as pl
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Label, ProgressBar, Static, TabbedContent, TabPane
from textual.worker import Worker

from npuscope.analysis import Diagnosis
from npuscope.analysis.bound import RATIO_COLUMNS, with_bound
from npuscope.analysis.card_spread import card_spread, render_card_spread
from npuscope.analysis.cluster import ClusterSummary
from npuscope.analysis.drilldown import TASK_COLUMNS, drill_down
from npuscope.analysis.export import export_dir, export_table, write_text_atomic
from npuscope.analysis.headline import headline
from npuscope.analysis.kpis import card_kpis
from npuscope.analysis.op_report import op_report
from npuscope.analysis.query import Query, QueryError, parse_query, stats_positions, task_positions, totals_at
from npuscope.analysis.run_registry import capture_key, record_run
from npuscope.analysis.session import Analysis, Diagnosed, Options, read_views
from npuscope.analysis.shape_stats import statistic_by_shape
from npuscope.analysis.timeline_view import TimelineModel, build_model
from npuscope.analysis.totals import card_summary, op_type_count
from npuscope.analysis.training_tables import card_step_windows, step_marks
from npuscope.analysis.wait_evidence import wait_evidence
from npuscope.capture.run_record import RUN_RECORD, find_run_record, read_run_record
from npuscope.capture.spec import CaptureError
from npuscope.fixtures.demo_profile import DEMO_ROOT
from npuscope.parsers import FrameCache, Profile, ProfileError
from npuscope.parsers.training import TrainingViews

from ..explorer import Settings, explorer
from ..format import human_us
from ..messages import (
    CancelRequested,
    CompareRequested,
    LoadRequested,
    RanksRequested,
    RankStepRequested,
    TimelineBuilt,
    ViewsFailed,
    ViewsRead,
    is_current,
)
from ..palette import CAUSE_STYLES
from ..view_state import (
    ViewState,
    close_cards,
    focus_table,
    next_sort_column,
    reverse,
    select,
    set_card,
    set_comm_by_type,
    set_filter,
    set_sort,
    set_tab,
    sort_by,
    toggle_cards,
    toggle_stats_by_shape,
)
from ..widgets.cards_pane import CardsPane
from ..widgets.cards_strip import CardsStrip
from ..widgets.communication_pane import CommunicationPane
from ..widgets.filter_bar import FilterBar
from ..widgets.frame_table import Column, FrameTable
from ..widgets.header_bar import HeaderBar
from ..widgets.host_api_pane import HostApiPane
from ..widgets.memory_pane import MemoryPane
from ..widgets.mini_timeline import MiniTimeline
from ..widgets.steps_pane import StepsPane
from ..widgets.view_pane import ViewPane, parsed
from .capture_screen import CaptureScreen
from .experiment_screen import ExperimentScreen
from .finding_screen import FindingScreen
from .path_prompt import PathPrompt
from .pick_screen import PickScreen
from .sql_screen import SqlScreen
from .task_screen import TaskScreen
from .text_screen import TextScreen

# Priorities: what 80 columns show (Op Name takes the room left); the rest scrolls sideways.
SUMMARY_COLUMNS = (
    Column("start_us", "Start", 9, numeric=True, unit="us", priority=1),
    Column("op_name", "Op Name", 34, flex=True, min_width=12, priority=1),
    Column("op_type", "OP Type", 13, priority=1),
    Column("task_type", "Task Type", 14, priority=2),
    Column("duration_us", "Duration", 14, numeric=True, unit="us", priority=1),
    Column("wait_us", "Wait", 10, numeric=True, unit="us", priority=1),
    Column("wait_cause", "Cause", 13, style_key="wait_cause", priority=1),
    Column("input_shapes", "Input Shapes", 26, priority=3),
    Column("input_dtypes", "Input Dtypes", 18, priority=4),
)
STATS_COLUMNS = (
    Column("op_type", "OP Type", 24, flex=True, min_width=14, priority=1),
    Column("core_type", "Core Type", 14, priority=3),
    Column("count", "Count", 7, numeric=True, decimals=0, priority=1),
    Column("total_us", "Total", 11, numeric=True, unit="us", priority=1),
    Column("avg_us", "Avg", 9, numeric=True, unit="us", priority=2),
    Column("max_us", "Max", 9, numeric=True, unit="us", priority=2),
    Column("max_over_avg", "Max/Avg", 7, numeric=True, decimals=1, priority=3),
    Column("ratio_pct", "Ratio(%)", 20, numeric=True, bar=True, priority=1),
    Column("bound", "Bound", 10, priority=3),
)
# `g`: the same, one row per op type and input shapes.
STATS_SHAPE_COLUMNS = (
    STATS_COLUMNS[0],
    Column("input_shapes", "Input Shapes", 18, flex=True, min_width=12, priority=1),
    *STATS_COLUMNS[1:],
)
_SHOWN = (
    "row", "card", "start_ns", "start_us", "op_name", "op_type", "task_type", "duration_us",
    "wait_us", "wait_cause", "input_shapes", "input_dtypes", "is_aclnn", "op_state",
)  # fmt: skip
# The columns shown plus those the drill-down filters read.
TASK_VIEW = _SHOWN + tuple(c for c in TASK_COLUMNS if c not in _SHOWN)
MODEL_DELAY_S = 0.3
# The training-level tabs: id -> (title, pane); a finding's view names the tab it drills into.
TRAINING_TABS: dict[str, tuple[str, type[ViewPane]]] = {
    "steps": ("Steps [3]", StepsPane),
    "communication": ("Comm [4]", CommunicationPane),
    "host_api": ("Host API [5]", HostApiPane),
    "memory": ("Memory [6]", MemoryPane),
}
# Tab titles that shorten to fit 80 columns: (narrow, wide).
CARDS_WIDTH = 41  # the cards pane and its border (app.tcss)
# From this width the cards pane stands beside the tables; below it they fold into a strip.
CARDS_BESIDE_WIDTH = 140
WIDE_TABS_WIDTH = 92  # the tab bar with the wide titles
TAB_TITLES = {"stats": ("Op stats [2]", "Op statistics [2]"), "communication": ("Comm [4]", "Communication [4]")}
TAB_FILTER_HINT = "/ filter this tab: text  name:x  type:allReduce  dur>1000 (its time)  wait>500 (its wait)  -term"
OP_FILTER_HINT = FilterBar.PLACEHOLDER
VIEW_TABS = {"steps": "steps", "communication": "communication", "links": "communication"}
VIEW_TABS |= {"host_api": "host_api", "memory": "memory"}


class MainScreen(Screen[None]):
    # Keys of the screen work wherever the focus is (the focused widget's own keys come first:
    # the filter bar's typing, a table's arrows, the timeline's arrows).
    BINDINGS = [
        Binding("[", "card(-1)", "Prev card"),
        Binding("]", "card(1)", "Next card"),
        Binding("[", "rank(-1)", "Prev rank"),  # a rank of a cluster: in place of the cards'
        Binding("]", "rank(1)", "Next rank"),
        Binding("p", "pick_card", "Pick card", show=False),
        Binding("P", "pick_capture", "Pick capture", show=False),
        Binding("1", "tab('summary')", "Op summary", show=False),
        Binding("2", "tab('stats')", "Op statistics", show=False),
        Binding("3", "tab('steps')", "Steps", show=False),
        Binding("4", "tab('communication')", "Communication", show=False),
        Binding("5", "tab('host_api')", "Host API", show=False),
        Binding("6", "tab('memory')", "Memory", show=False),
        Binding("/", "filter", "Filter"),
        Binding("escape", "escape", "Clear", show=False),
        Binding("d", "sort('duration_us')", "Sort dur"),
        Binding("w", "sort('wait_us')", "Sort wait"),
        Binding("t", "sort('row')", "Time order (again: reverse)", show=False),
        Binding("s", "next_sort_column", "Sort by the next column", show=False),
        Binding("r", "reverse", "Reverse the order", show=False),
        Binding("enter", "open_row", "Open the highlighted row", show=False),
        Binding("f", "cards", "Cards"),
        Binding("i", "detail", "Detail of the highlighted finding", show=False),
        Binding("e", "export", "Export"),
        Binding("y", "copy_report", "Copy op report"),
        # Before the tables' own `g` (first row, as `home`): on Op statistics it groups.
        Binding("g", "group_stats", "Op statistics by type + shape (again: by type)", show=False, priority=True),
        Binding("v", "card_spread", "Cards view", show=False),
        Binding("C", "compare", "Compare with…", show=False),
        Binding("c", "capture", "Capture"),
        Binding("x", "experiment", "Experiment: capture this run again with the finding's change", show=False),
        Binding("+,=", "timeline('zoom_in')", "Timeline: zoom in", show=False),
        Binding("-", "timeline('zoom_out')", "Timeline: zoom out", show=False),
        Binding("<", "timeline('pan_left')", "Timeline: pan left", show=False),
        Binding(">", "timeline('pan_right')", "Timeline: pan right", show=False),
        Binding("0", "timeline('fit')", "Timeline: fit the card", show=False),
        Binding("R", "ranks", "Ranks view (a cluster)", show=False),
        Binding(":", "sql", "SQL query over the profile's tables", show=False),
    ]
    """
    | key | action |
    |---|---|
    | `Tab` / `shift+Tab` | focus: cards, table, timeline (Textual's focus chain) |
    | `[` / `]` | previous / next card; in a cluster, previous / next rank |
    | `R` | a cluster: back to the Ranks view |
    | `p` / `P` | pick a card / pick a capture |
    | `1` … `6` | op summary, op statistics, steps, communication, host API, memory |
    | `/` | filter the visible tab; Esc clears |
    | `d` / `w` / `t` | sort by duration / by wait / time order; the same key again reverses |
    | `s` / `r` | sort by the next column / reverse the order |
    | `Enter` | op summary: the task's detail; op statistics: that op type's tasks |
    | `f` | the findings cards (below 140 columns they fold into one line) |
    | `i` | detail of the highlighted finding card |
    | `+` `-` `<` `>` `0` | timeline: zoom in / out, pan left / right, fit |
    | `e` / `y` | export the table / copy the selected task's op report |
    | `v` / `C` / `c` | cards view / compare with another profile / capture |
    """

    def __init__(self) -> None:
        super().__init__()
        self.profile: Profile | None = None
        self.diagnosis: Diagnosis | None = None
        self.state = ViewState()
        self.generation = 0  # of the profile shown: the workers' results for another are dropped
        self.dropped: list[tuple[str, int]] = []  # (message, generation) of results dropped
        self._card_tasks: dict[str, pl.DataFrame] = {}
        self._models: dict[str, TimelineModel] = {}
        self._summary_totals: tuple[int, float, float] = (0, 0.0, 0.0)
        self.views: TrainingViews | None = None
        self.step_windows: pl.DataFrame | None = None
        self.rank: str | None = None  # the rank of a cluster the profile is (None: a capture by itself)
        self.rank_position = ""  # "3/8"

    # ---------------------------------------------------------------- view state
    # What the screen shows lives in `self.state` (tui/view_state.py); keys apply pure
    # transitions to it and the screen renders from it.
    @property
    def card(self) -> str:
        return self.state.card

    @property
    def sorts(self) -> Mapping[str, tuple[str, bool]]:
        return self.state.sorts

    @property
    def filter_query(self) -> Query:
        """The op tabs' filter, parsed (it parsed when it was set)."""
        return parsed(self.state.filter_of("summary"))

    @property
    def cards_shown(self) -> bool:
        """The findings cards are open in place of the tables (a narrow terminal)."""
        return self.state.cards_open and self.has_class("narrow")

    def _set_card(self, card: str) -> None:
        self.state = set_card(self.state, card)

    def set_rank(self, rank: str | None, position: str = "") -> None:
        """The next profile shown is rank `rank` of a cluster (None: a capture by itself)."""
        self.rank, self.rank_position = rank, position
        self.refresh_bindings()  # [ ] name ranks or cards in the footer

    # ---------------------------------------------------------------- layout
    def compose(self) -> ComposeResult:
        yield HeaderBar("npuscope", id="header")
        with Vertical(id="loading"):
            yield Label("opening", id="loading-label")
            yield ProgressBar(total=100, show_eta=False, id="loading-bar")
            yield Label("Esc cancels", classes="hint", id="loading-hint")
        yield CardsStrip(id="cards-strip")
        with Horizontal(id="body"):
            yield CardsPane(id="cards")
            with Vertical(id="tables"):
                with TabbedContent(id="tabs", initial="summary"):
                    with TabPane("Op summary [1]", id="summary"):
                        yield FrameTable(id="summary-table")
                    with TabPane("Op stats [2]", id="stats"):
                        yield FrameTable(id="stats-table")
                    for tab, (title, pane) in TRAINING_TABS.items():
                        with TabPane(title, id=tab):
                            yield pane(id=f"{tab}-pane")
                yield FilterBar()
                yield Static("", id="status")
        yield MiniTimeline(id="timeline")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#summary-table", FrameTable).cell_styles = CAUSE_STYLES
        self.query_one("#filter").display = False

    def on_resize(self, event: events.Resize) -> None:
        narrow = self.size.width < CARDS_BESIDE_WIDTH
        self.set_class(narrow, "narrow")
        self.set_class(self.size.height < 30, "short")
        self._render_cards_open()
        tabs = self.query_one("#tabs", TabbedContent)
        room = self.size.width - (0 if narrow else CARDS_WIDTH)  # beside the cards when wide
        for tab, (short, wide) in TAB_TITLES.items():
            tabs.get_tab(tab).label = short if room < WIDE_TABS_WIDTH else wide

    # ---------------------------------------------------------------- loading
    def show_loading(self, label: str, hint: str = "Esc cancels") -> None:
        """The loading panel: `label` above the bar, `hint` below (the keys that act now)."""
        self.remove_class("loaded")
        self.query_one("#loading-label", Label).update(label)
        self.query_one("#loading-hint", Label).update(hint)

    def show_progress(self, done: int, total: int, label: str) -> None:
        bar = self.query_one("#loading-bar", ProgressBar)
        bar.update(total=max(total, 1), progress=done)
        self.query_one("#loading-label", Label).update(f"{label}  {done / 1e6:,.1f} / {total / 1e6:,.1f} MB")

    def show_profile(self, profile: Profile, diagnosis: Diagnosis, views: TrainingViews | None = None) -> None:
        """Show `profile`; its training views are read in a worker (`views`: read with it
        already, a rank analysed on its node)."""
        self.profile, self.diagnosis = profile, diagnosis
        self.generation += 1
        self._card_tasks.clear()
        self._models.clear()
        self.add_class("loaded")
        self._set_card(profile.cards[0] if profile.cards else "")
        self.views, self.step_windows = None, None
        for pane in self.panes():
            pane.show_reading()
        self._show_card()
        # Read in a worker once the first screen is painted: the op tabs are usable meanwhile.
        app = explorer(self.app)
        cluster = app.cluster if self.rank is not None else None  # a rank of it: its cache, its findings
        self.call_after_refresh(
            self._read_views, profile, diagnosis, self.generation, app.settings, cluster, self.rank, views
        )
        for note in profile.notes:
            self.notify(note, title="Note", markup=False, timeout=6)
        self.query_one("#summary-table", FrameTable).focus()

    # ---------------------------------------------------------------- data
    @property
    def loaded(self) -> tuple[Profile, Diagnosis]:
        """The open profile and its diagnosis; only called once one is shown."""
        assert self.profile is not None and self.diagnosis is not None, "no profile is open"
        return self.profile, self.diagnosis

    def card_tasks(self) -> pl.DataFrame:
        if self.card not in self._card_tasks:
            profile, diagnosis = self.loaded
            tasks = diagnosis.tasks.select(TASK_VIEW)
            if profile.cards != (self.card,):
                tasks = tasks.filter(pl.col("card") == self.card)
            self._card_tasks[self.card] = tasks
        return self._card_tasks[self.card]

    def card_tasks_with_ratios(self) -> pl.DataFrame:
        """The card's tasks with the pipe ratio columns (none when the capture has no PMU)."""
        tasks = self.loaded[1].tasks
        ratios = [c for c in tasks.columns if c in RATIO_COLUMNS]
        tasks = tasks.select("card", "op_type", "task_type", "duration_us", *ratios)
        return tasks.filter(pl.col("card") == self.card)

    def card_stats(self) -> pl.DataFrame:
        profile, diagnosis = self.loaded
        if self.state.stats_by_shape:  # `g`: per op type and input shapes, from the card's tasks
            stats = statistic_by_shape(self.card_tasks())
        else:
            stats = profile.op_statistic.filter(pl.col("card") == self.card)
        # The bound type of each op type, as the report's op statistics give it.
        stats = with_bound(stats, self.card_tasks_with_ratios(), diagnosis.thresholds.bound_min_pct)
        return stats.with_columns(
            (pl.col("max_us") / pl.col("avg_us")).fill_nan(None).alias("max_over_avg"),
            pl.int_range(pl.len(), dtype=pl.UInt32).alias("row"),
        )

    def _show_card(self) -> None:
        p, d = self.loaded
        tasks = self.card_tasks()
        header = self.query_one(HeaderBar)
        header.show(
            capture=p.capture.name,
            layout=p.era,
            card=self.card,
            cards=p.cards,
            summary=card_summary(p, tasks, self.card),
            skipped=p.skipped_rows,
            rank=self.rank,
            rank_position=self.rank_position,
        )
        self.query_one(CardsPane).show(d.for_card(self.card), card_kpis(tasks))
        self.query_one(CardsStrip).show(d.for_card(self.card))
        timeline = self.query_one(MiniTimeline)
        timeline.set_steps(step_marks(self.step_windows, self.card) if self.step_windows is not None else ())
        for pane in self.panes():
            pane.show_card(self.state)
        if self.card in self._models:
            timeline.set_model(self._models[self.card])
        else:
            # Built off the UI thread (0.3 s for 2M tasks) once the first screen has settled:
            # started at once, it competes with the first paint for both cores.
            timeline.set_model(None, empty_text="building the timeline…")
            self.set_timer(MODEL_DELAY_S, partial(self._build_model, self.card, tasks, p.events, self.generation))
        self.refresh_tables()

    def refresh_tables(self, *, jump_to_row: int | None = None, which: tuple[str, ...] = ("summary", "stats")) -> None:
        # A new order or filter starts at the top (worst first); drill-downs jump explicitly.
        if "summary" in which:
            summary = self.query_one("#summary-table", FrameTable)
            key, desc = self.sorts["summary"]
            tasks = self.card_tasks()
            order = task_positions(tasks, self.filter_query, key, desc)
            if key == "row" and desc:
                order = order.reverse()
            summary.set_data(
                tasks, SUMMARY_COLUMNS, sort=(key, desc) if key != "row" else None, keep_key=None, order=order
            )
            self._summary_totals = totals_at(tasks, order)
            if jump_to_row is not None:
                summary.move_to_key(jump_to_row)
        if "stats" in which:
            stats_table = self.query_one("#stats-table", FrameTable)
            key, desc = self.sorts["stats"]
            stats = self.card_stats()
            order = stats_positions(stats, self.filter_query, key, desc)
            columns = STATS_SHAPE_COLUMNS if self.state.stats_by_shape else STATS_COLUMNS
            stats_table.set_data(stats, columns, sort=(key, desc), keep_key=None, order=order)
        self._update_status()

    # ---------------------------------------------------------------- workers
    # Each is handed what it reads and hands its result, tagged with the generation of the
    # profile it was started for, to its handler on the UI thread (`call_from_thread`: the
    # worker ends once its result is taken); a worker that fails reaches the app's error route.
    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        explorer(self.app).report_worker(event)

    @work(thread=True, group="timeline", exit_on_error=False, description="build timeline")
    def _build_model(self, card: str, tasks: pl.DataFrame, events: pl.DataFrame | None, generation: int) -> None:
        self.app.call_from_thread(self._model_ready, TimelineBuilt(generation, card, build_model(tasks, events, card)))

    def _model_ready(self, message: TimelineBuilt) -> None:
        if not is_current(message, self.generation, self.dropped):
            return
        card, model = message.card, message.model
        self._models[card] = model
        if card == self.card:
            timeline = self.query_one(MiniTimeline)
            timeline.set_model(model)
            row = self.query_one("#summary-table", FrameTable).current_row
            if row:
                timeline.select(row["start_ns"], row["start_ns"] + round(row["duration_us"] * 1000))

    @work(thread=True, group="views", exclusive=True, exit_on_error=False, description="read training views")
    def _read_views(
        self,
        profile: Profile,
        diagnosis: Diagnosis,
        generation: int,
        settings: Settings,
        cluster: ClusterSummary | None,
        rank: str | None,
        given: TrainingViews | None = None,
    ) -> None:
        """The training views of `profile` (`given`: read already) and its training findings
        (`cluster` and `rank`: the cluster it is rank `rank` of, else None)."""
        if cluster is None or rank is None:
            cluster, rank = None, None  # only a rank of a cluster gets the cluster's cache and findings
        # A rank of a cluster: beside its frames, where the cluster's parse put them.
        root = cluster.cache_root if cluster is not None else None
        options = Options(
            settings.thresholds,
            strict=settings.read.strict,
            views_cache=FrameCache(root, enabled=settings.use_cache),
            cluster=cluster,
            rank=rank,
        )
        try:
            views = given if given is not None else read_views(profile, options)
            windows = card_step_windows(profile)
        except Exception as exc:  # bad input or a bug: said on the tabs through the error route
            self.app.call_from_thread(self._views_failed, ViewsFailed(generation, exc))
            return
        problem: Exception | None = None
        try:
            analysis = Diagnosed.of(profile, diagnosis, options).with_views(views)
            diagnosis = analysis.diagnosis
        except Exception as exc:  # the views are shown without them; the line says why
            problem = exc
        else:
            if cluster is None:  # a rank of a cluster is not a run of its own
                self._record(analysis)
        self.app.call_from_thread(self._views_ready, ViewsRead(generation, diagnosis, views, windows, problem))

    def _record(self, analysis: Analysis) -> None:
        """The opened run in the runs registry (not the bundled demo); a problem is a note."""
        profile = analysis.profile
        if profile.path.resolve().is_relative_to(DEMO_ROOT):
            return
        problem = record_run(profile.path, kind="opened", headline=headline(analysis), capture=capture_key(profile))
        if problem:
            self.app.call_from_thread(self.notify, problem, title="Runs registry", severity="warning", markup=False)

    def _views_failed(self, message: ViewsFailed) -> None:
        if not is_current(message, self.generation, self.dropped):
            return  # another profile was opened meanwhile
        line = explorer(self.app).errors.describe(message.error)
        for pane in self.panes():
            pane.show_reading(f"could not be read: {line}")
        self.notify(line, title="Training views", severity="error", markup=False)

    def _views_ready(self, message: ViewsRead) -> None:
        if not is_current(message, self.generation, self.dropped):
            return  # another profile was opened meanwhile
        diagnosis, views, windows = message.diagnosis, message.views, message.windows
        self.diagnosis, self.views, self.step_windows = diagnosis, views, windows
        for pane in self.panes():
            pane.show(views, self.state)
        self.query_one(CardsPane).show(diagnosis.for_card(self.card), card_kpis(self.card_tasks()))
        self.query_one(CardsStrip).show(diagnosis.for_card(self.card))
        self.query_one(MiniTimeline).set_steps(step_marks(windows, self.card))
        if message.problem is not None:
            line = explorer(self.app).errors.describe(message.problem, lead="training findings not shown: ")
            self.notify(line, title="Training views", severity="warning", markup=False)
        self._update_status()

    # ---------------------------------------------------------------- rendering
    def panes(self) -> list[ViewPane]:
        return list(self.query(ViewPane))

    def pane(self, tab: str) -> ViewPane:
        return self.query_one(f"#{tab}-pane", ViewPane)

    def current_pane(self) -> ViewPane | None:
        return self.pane(self.state.tab) if self.state.tab in TRAINING_TABS else None

    def _show_tab(self) -> None:
        """The tab bar shows the state's tab."""
        tabs = self.query_one("#tabs", TabbedContent)
        if tabs.active != self.state.tab:
            tabs.active = self.state.tab

    def _render_pane(self, pane: ViewPane, which: tuple[str, ...] | None = None) -> None:
        pane.render_tables(self.state, which)
        self._update_status()

    def _update_status(self) -> None:
        pane = self.current_pane()
        if pane is not None:
            self.query_one("#status", Static).update(pane.status_text(self.state))
            return
        table = self.current_table()
        if table.id == "summary-table":
            rows, dur, wait = self._summary_totals
            total = self.card_tasks().height
            text = f"{rows:,} of {total:,} tasks · Σ dur {human_us(dur)} · Σ wait {human_us(wait)}"
        else:
            text = f"{op_type_count(table.frame):,} op types"  # distinct OP Types, as the header counts them
        key, desc = self.sorts["summary" if table.id == "summary-table" else "stats"]
        if key == "row":
            order = "time order, latest first" if desc else "time order"
        else:
            order = f"sorted by {key} {'▼' if desc else '▲'}"
        flt = f" · filter: {self.filter_query.text}" if self.filter_query.text else ""
        self.query_one("#status", Static).update(f"{text} · {order}{flt}")

    def current_table(self) -> FrameTable:
        pane = self.current_pane()
        if pane is not None:
            return pane.current_table(self.state)
        return self.query_one(f"#{self.state.tab}-table", FrameTable)

    # ---------------------------------------------------------------- actions
    def action_card(self, step: int) -> None:
        if not self.profile or len(self.profile.cards) < 2:
            return
        cards = self.profile.cards
        self._set_card(cards[(cards.index(self.card) + step) % len(cards)])
        self._show_card()

    def action_rank(self, step: int) -> None:
        """The rank `step` places from the open one (a cluster's rank is open)."""
        self.app.post_message(RankStepRequested(step))

    def action_ranks(self) -> None:
        self.app.post_message(RanksRequested())

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "ranks":  # only when a cluster is open
            return explorer(self.app).cluster is not None
        if action in ("card", "rank"):  # [ ] move between the cards, or between a cluster's ranks
            return (self.rank is None) == (action == "card")
        return True

    def action_pick_card(self) -> None:
        if not self.profile:
            return

        def chosen(card: str | None) -> None:
            if card is not None and card != self.card:
                self._set_card(card)
                self._show_card()

        self.app.push_screen(PickScreen("Pick a card", list(self.profile.cards), self.card), chosen)

    def action_pick_capture(self) -> None:
        if not self.profile or len(self.profile.captures) < 2:
            self.notify("This folder holds one capture.")
            return
        names = [c.name for c in self.profile.captures]
        current = self.profile.capture.name

        def chosen(name: str | None) -> None:
            if name is not None and name != current:
                self.app.post_message(LoadRequested(None, name))

        self.app.push_screen(PickScreen("Pick a capture (newest first)", names, current), chosen)

    def action_tab(self, tab: str) -> None:
        self.state = set_tab(self.state, tab)
        self._show_tab()
        pane = self.current_pane()
        if pane is not None:
            name = pane.focus_target(self.state)
            if name is not None:
                self.state = focus_table(self.state, tab, name)
                pane.table(name).focus()
            if tab == "steps":
                self._select_step(pane.current_table(self.state).current_row)
        else:
            self.query_one(f"#{tab}-table", FrameTable).focus()
        self._show_filter_bar()
        self._update_status()

    def _filter_text(self) -> str:
        """The visible tab's filter (the op tabs share one)."""
        return parsed(self.state.filter_of()).text

    def _show_filter_bar(self) -> None:
        bar = self.query_one(FilterBar)
        bar.placeholder = TAB_FILTER_HINT if self.current_pane() is not None else OP_FILTER_HINT
        bar.value = self._filter_text()
        bar.display = bool(bar.value) or bar.has_focus

    @on(TabbedContent.TabActivated)
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self.state = set_tab(self.state, event.tabbed_content.active or "summary")
        if self.profile is None:
            return
        self._show_filter_bar()
        self._update_status()

    def action_filter(self) -> None:
        bar = self.query_one(FilterBar)
        bar.display = True
        bar.value = self._filter_text()
        bar.focus()

    def action_escape(self) -> None:
        if self.profile is None:
            self.app.post_message(CancelRequested())
            return
        if self.cards_shown:
            self.close_cards()
            self.current_table().focus()
        elif self._filter_text():
            self.apply_filter("")

    def apply_filter(self, text: str, *, sort: tuple[str, bool] | None = None, jump_to_row: int | None = None) -> bool:
        try:
            query = parse_query(text)
        except QueryError as exc:
            self.notify(str(exc), title="Filter", severity="error", markup=False)
            return False
        if (pane := self.current_pane()) is not None:  # a training tab: its own filter
            self.state = set_filter(self.state, query.text)
            self._render_pane(pane)
            self._show_filter_bar()
            return True
        self.state = set_filter(self.state, query.text, tab="summary")
        if sort is not None:
            self.state = set_sort(self.state, "summary", sort)
        bar = self.query_one(FilterBar)
        bar.value = self.filter_query.text
        bar.display = bool(self.filter_query.text)
        self.refresh_tables(jump_to_row=jump_to_row)
        return True

    def action_sort(self, key: str) -> None:
        if (pane := self.current_pane()) is not None:
            name, column = pane.sort_key(self.state, key)
            self.state = sort_by(self.state, name, column)
            return self._render_pane(pane, (name,))
        table = "summary" if self.current_table().id == "summary-table" else "stats"
        if table == "stats":
            key = {"duration_us": "total_us", "wait_us": "total_us", "row": "total_us"}.get(key, key)
        # First press sorts worst first (chronological: earliest first); again reverses.
        self.state = sort_by(self.state, table, key)
        self.refresh_tables(which=(table,))

    def action_next_sort_column(self) -> None:
        if (pane := self.current_pane()) is not None:
            name = pane.current(self.state)
            self.state = next_sort_column(self.state, name, pane.columns_of(name))
            return self._render_pane(pane, (name,))
        table = "summary" if self.current_table().id == "summary-table" else "stats"
        columns = [c.key for c in (SUMMARY_COLUMNS if table == "summary" else STATS_COLUMNS)]
        self.state = next_sort_column(self.state, table, columns)
        self.refresh_tables(which=(table,))

    def action_reverse(self) -> None:
        if (pane := self.current_pane()) is not None:
            name = pane.current(self.state)
            self.state = reverse(self.state, name)
            return self._render_pane(pane, (name,))
        table = "summary" if self.current_table().id == "summary-table" else "stats"
        self.state = reverse(self.state, table)
        self.refresh_tables(which=(table,))

    def action_open_row(self) -> None:
        """Enter wherever the focus is: what Enter on the visible table's row does."""
        self.current_table().action_select_cursor()

    def action_cards(self) -> None:
        """Narrow: open the cards in place of the tables (again: back). Wide: focus them."""
        cards = self.query_one(CardsPane)
        if self.has_class("narrow"):
            self.state = toggle_cards(self.state)
            self._render_cards_open()
            if self.state.cards_open:
                cards.focus()
            else:
                self.current_table().focus()
        elif cards.has_focus:
            self.current_table().focus()
        else:
            cards.focus()

    def close_cards(self) -> None:
        self.state = close_cards(self.state)
        self._render_cards_open()

    def _render_cards_open(self) -> None:
        opened = self.cards_shown
        self.set_class(opened, "cards-open")
        self.query_one(CardsStrip).set_opened(opened)

    def action_detail(self) -> None:
        finding = self.query_one(CardsPane).highlighted_finding()
        if finding is None:
            self.notify("No findings on this card.")
            return
        self.app.push_screen(FindingScreen(finding))

    def action_timeline(self, action: str) -> None:
        timeline = self.query_one(MiniTimeline)
        getattr(timeline, f"action_{action}")()

    def open_task(self, row: dict[str, Any]) -> None:
        """The detail panel of the op-summary task `row`."""
        profile, diagnosis = self.loaded
        task = diagnosis.tasks.row(int(row["row"]), named=True)
        evidence = wait_evidence(profile.events, task)
        self.app.push_screen(TaskScreen(task, diagnosis.for_card(self.card), partial(self.copy_report, task), evidence))

    def action_export(self) -> None:
        if not self.profile:
            return
        table = self.current_table()
        if self.current_pane() is not None:
            which = (table.id or "table").removesuffix("-table").replace("_", "-")
            columns = [(c.key, c.full_title) for c in table.columns]
        else:
            which = "op-summary" if table.id == "summary-table" else "op-statistic"
            columns = [(c.key, c.full_title) for c in (SUMMARY_COLUMNS if which == "op-summary" else STATS_COLUMNS)]
        stem = f"{self.profile.capture.name}-card{self.card}-{which}"
        try:
            csv_path, md_path = export_table(table.frame, columns, self.exports_dir(), stem)
        except ProfileError as exc:
            self.notify(str(exc), title=exc.title, severity="error", markup=False)
            return
        self.notify(
            f"{table.row_count:,} rows written to {csv_path} and {md_path.name}", title="Exported", markup=False
        )

    def action_copy_report(self) -> None:
        """`y`: the op report of the highlighted task, or on the Op statistics tab of the
        highlighted op type (its longest task of that core type on the card)."""
        if not self.profile:
            return
        stats = self.current_table().id == "stats-table"
        row = self.query_one("#stats-table" if stats else "#summary-table", FrameTable).current_row
        if row is None:
            self.notify("No op type selected." if stats else "No task selected.", severity="warning")
            return
        if stats:
            tasks = self.card_tasks()
            of_type = tasks.filter((pl.col("op_type") == row["op_type"]) & (pl.col("task_type") == row["core_type"]))
            if of_type.height == 0:  # a lone op_statistic row: no task to report on
                self.notify(f"No task of {row['op_type']} on this card.", severity="warning", markup=False)
                return
            row = of_type.sort("duration_us", descending=True).row(0, named=True)
        self.copy_report(self.loaded[1].tasks.row(int(row["row"]), named=True))

    def copy_report(self, task: dict[str, Any]) -> None:
        """Copy the op report of `task` (a row of the diagnosis' tasks) and write it to a file."""
        profile, diagnosis = self.loaded
        text = op_report(profile, diagnosis, task)
        self.app.copy_to_clipboard(text)
        name = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in task["op_name"])[:60]
        try:
            path = write_text_atomic(self.exports_dir() / f"op-report-{name}-{task['row']}.md", text)
        except ProfileError as exc:
            self.notify(f"Copied; file not written: {exc}", severity="warning", markup=False)
            return
        self.notify(f"Op report copied (OSC 52) and written to {path}", title="Op report", markup=False)

    def action_card_spread(self) -> None:
        """Card against card: totals per card, the spread, where each op type is slowest."""
        if not self.profile:
            return
        lines = render_card_spread(card_spread(self.profile), "text", top=50)
        self.app.push_screen(TextScreen(f"Cards of {self.profile.capture.name}", "\n".join(lines)))

    def action_compare(self) -> None:
        if not self.profile:
            return

        def chosen(path: str | None) -> None:
            if path:
                self.app.post_message(CompareRequested(Path(path).expanduser()))

        self.app.push_screen(PathPrompt("Compare with (NEW profile; the open one is BASE)"), chosen)

    def action_capture(self) -> None:
        settings = explorer(self.app).settings
        self.app.push_screen(CaptureScreen(ssh_config=settings.ssh_config, remote_root=settings.remote_root))

    def action_experiment(self) -> None:
        """`x`: capture the open run again with the highlighted finding's change (a folder
        `npuscope capture` fetched: its run record says where and how)."""
        if not self.profile:
            return
        folder = find_run_record(self.profile.path.expanduser().resolve())
        if folder is None:
            self.notify(
                f"{self.profile.path.name}: no run record ({RUN_RECORD}): an experiment captures again a run "
                "`npuscope capture` or the capture screen (c) fetched",
                title="Experiment",
                severity="warning",
                markup=False,
            )
            return
        try:
            record = read_run_record(folder)
        except CaptureError as exc:
            self.notify(str(exc), title="Experiment", severity="warning", markup=False)
            return
        self.app.push_screen(ExperimentScreen(folder, record, self.query_one(CardsPane).highlighted_finding()))

    def action_sql(self) -> None:
        """`:`: a SQL query over the open profile's tables, its result in a table (sql_screen.py)."""
        if self.profile is not None:
            self.app.push_screen(SqlScreen(self))

    def exports_dir(self) -> Path:
        return explorer(self.app).settings.export_dir or export_dir(self.loaded[0].path)

    # ---------------------------------------------------------------- messages
    @on(FilterBar.Applied)
    def _filter_applied(self, message: FilterBar.Applied) -> None:
        if self.apply_filter(message.text):
            self.current_table().focus()

    @on(FrameTable.HeaderSelected)
    def _header(self, message: FrameTable.HeaderSelected) -> None:
        if (pane := self.current_pane()) is not None:
            spec = pane.spec_of(message.table)
            if spec is None:
                return None
            self.state = focus_table(self.state, pane.TAB, spec.name)
            self.state = sort_by(self.state, spec.name, message.key, descending=True)
            return self._render_pane(pane, (spec.name,))
        table = "summary" if message.table.id == "summary-table" else "stats"
        self.state = sort_by(self.state, table, message.key, descending=True)
        self.refresh_tables(which=(table,))

    @on(FrameTable.RowHighlighted, "#summary-table")
    def _task_highlighted(self, message: FrameTable.RowHighlighted) -> None:
        row = message.row
        if row:
            self.state = select(self.state, "summary", row["row"])
            end = row["start_ns"] + round(row["duration_us"] * 1000)
            self.query_one(MiniTimeline).select(int(row["start_ns"]), end)

    @on(FrameTable.RowSelected, "#summary-table")
    def _task_chosen(self, message: FrameTable.RowSelected) -> None:
        self.open_task(message.row)

    @on(FrameTable.RowSelected, "#stats-table")
    def _type_chosen(self, message: FrameTable.RowSelected) -> None:
        op_type = message.row["op_type"]
        shapes = message.row.get("input_shapes") if self.state.stats_by_shape else None
        if self.apply_filter(f"type:{op_type}" + (f" shape:{shapes}" if shapes else "")):
            self.action_tab("summary")

    def action_group_stats(self) -> None:
        """`g`: Op statistics by op type and input shapes, or back by op type; in another
        table its first row, as the tables' own `g`."""
        if not self.profile:
            return
        if self.current_table().id != "stats-table":
            self.current_table().action_cursor_first()
            return
        self.state = toggle_stats_by_shape(self.state)
        self.refresh_tables(which=("stats",))
        self.notify(
            "Op statistics by op type and input shapes" if self.state.stats_by_shape else "Op statistics by op type",
            timeout=2,
        )

    @on(CommunicationPane.GroupingToggled)
    def _comm_grouping(self, message: CommunicationPane.GroupingToggled) -> None:
        pane = self.pane("communication")
        self.state = set_comm_by_type(self.state, not self.state.comm_by_type)
        self.state = focus_table(self.state, "communication", "comm")
        self._render_pane(pane, ("comm",))
        pane.table("comm").focus()

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        """A training tab's table took the focus: the tab's keys act on it."""
        if not isinstance(event.widget, FrameTable):
            return
        for pane in self.panes():
            spec = pane.spec_of(event.widget)
            if spec is not None:
                self.state = focus_table(self.state, pane.TAB, spec.name)

    @on(FrameTable.RowHighlighted, "#steps-table")
    def _step_highlighted(self, message: FrameTable.RowHighlighted) -> None:
        if self.state.tab == "steps":
            self._select_step(message.row)

    def _select_step(self, row: dict[str, Any] | None) -> None:
        """Mark the step of `row` (a Steps table row) on the timeline."""
        marks = self.query_one(MiniTimeline).steps
        step = row["step"] if row else None
        window = next(((s, e) for n, s, e in marks if n == step), None)
        if window is not None:
            self.query_one(MiniTimeline).select(*window)

    @on(CardsPane.Chosen)
    def _card_chosen(self, message: CardsPane.Chosen) -> None:
        self.close_cards()
        finding = message.finding
        if finding.view in VIEW_TABS:
            tab = VIEW_TABS[finding.view]
            pane = self.pane(tab)
            self.state = pane.drill_state(finding, set_tab(self.state, tab))
            self._show_tab()
            self._render_pane(pane, (pane.current(self.state),))
            pane.drill_row(finding, self.state)
            self.action_tab(tab)
            return
        text, sort = drill_down(finding, explorer(self.app).settings.thresholds)
        worst = finding.evidence[0]["row"] if finding.evidence else None
        self.state = set_tab(self.state, "summary")  # the filter is the op tabs'
        self._show_tab()
        if self.apply_filter(text, sort=sort, jump_to_row=worst):
            self.action_tab("summary")

    @on(CardsPane.DetailRequested)
    def _card_detail(self, message: CardsPane.DetailRequested) -> None:
        self.app.push_screen(FindingScreen(message.finding))
