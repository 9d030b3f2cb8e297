"""The main screen: header, cards, the op and training-level tabs, mini timeline.

It keeps the view state (card, filter, sort per table) and asks the analysis layer for the
frames to show; the widgets only render what they are given. The training-level views
(steps, communication, host API, memory) are read in a worker once the first screen shows;
their tabs say "reading…" until then, and each tab keeps its own sorts and filter.

| key | action |
|---|---|
| `[` / `]` | previous / next card |
| `p` / `P` | pick a card / pick a capture |
| `1` / `2` | op summary / op statistics |
| `3` / `4` / `5` / `6` | steps / communication / host API / memory |
| `o` | communication: collectives per op type / per op |
| `/` | filter the visible tab; Esc clears |
| `d` / `w` / `t` | sort by duration / by wait / chronological (again: reverse) |
| `s` / `r` | sort by the next column / reverse the order |
| `e` | export the current table (CSV and markdown) |
| `y` | copy the selected task's op report (and write it to a file) |
| `i` | detail of the highlighted finding card |
| `v` | cards view: card against card |
| `C` | compare with another profile (the open one is BASE) |
| `c` | capture a new profile on a training host (opened here when fetched) |
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import polars as pl
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Label, ProgressBar, Static, TabbedContent, TabPane

from npuscope.analysis import Diagnosis, Finding
from npuscope.analysis.card_spread import card_spread, render_card_spread
from npuscope.analysis.export import export_dir, export_table, write_text_atomic
from npuscope.analysis.kpis import card_kpis
from npuscope.analysis.op_report import op_report
from npuscope.analysis.query import (
    Query,
    QueryError,
    parse_query,
    stats_positions,
    task_positions,
    totals_at,
)
from npuscope.analysis.timeline_view import TimelineModel, build_model
from npuscope.analysis.totals import card_summary
from npuscope.analysis.training_rules import training_findings
from npuscope.analysis.training_tables import card_step_windows, step_marks
from npuscope.parsers import Profile, ProfileError
from npuscope.parsers.training import TrainingViews, read_training_views

from ..explorer import explorer
from ..palette import CAUSE_STYLES
from ..widgets.cards_pane import CardsPane
from ..widgets.communication_pane import CommunicationPane
from ..widgets.filter_bar import FilterBar
from ..widgets.frame_table import Column, FrameTable
from ..widgets.header_bar import HeaderBar
from ..widgets.host_api_pane import HostApiPane
from ..widgets.memory_pane import MemoryPane
from ..widgets.mini_timeline import MiniTimeline
from ..widgets.steps_pane import StepsPane
from ..widgets.view_pane import ViewPane
from .capture_screen import CaptureScreen
from .finding_screen import FindingScreen
from .path_prompt import PathPrompt
from .pick_screen import PickScreen
from .text_screen import TextScreen

SUMMARY_COLUMNS = (
    Column("start_us", "Start(us)", 14, numeric=True),
    Column("op_name", "Op Name", 34),
    Column("op_type", "OP Type", 18),
    Column("task_type", "Task Type", 14),
    Column("duration_us", "Duration(us)", 13, numeric=True),
    Column("wait_us", "Wait(us)", 12, numeric=True),
    Column("wait_cause", "Cause", 13, style_key="wait_cause"),
    Column("input_shapes", "Input Shapes", 26),
    Column("input_dtypes", "Input Dtypes", 18),
)
STATS_COLUMNS = (
    Column("op_type", "OP Type", 24),
    Column("core_type", "Core Type", 14),
    Column("count", "Count", 9, numeric=True, decimals=0),
    Column("total_us", "Total(us)", 14, numeric=True),
    Column("avg_us", "Avg(us)", 11, numeric=True),
    Column("max_us", "Max(us)", 11, numeric=True),
    Column("max_over_avg", "Max/Avg", 8, numeric=True, decimals=1),
    Column("ratio_pct", "Ratio(%)", 20, numeric=True, bar=True),
)
TASK_VIEW = (
    "row", "card", "start_ns", "start_us", "op_name", "op_type", "task_type", "duration_us",
    "wait_us", "wait_cause", "input_shapes", "input_dtypes", "is_aclnn", "op_state",
)
MODEL_DELAY_S = 0.3
DEFAULT_SORT = {"summary": ("row", False), "stats": ("total_us", True)}
# The training-level tabs: id -> (title, pane); a finding's view names the tab it drills into.
TRAINING_TABS: dict[str, tuple[str, type[ViewPane]]] = {
    "steps": ("Steps [3]", StepsPane),
    "communication": ("Comm [4]", CommunicationPane),
    "host_api": ("Host API [5]", HostApiPane),
    "memory": ("Memory [6]", MemoryPane),
}
# Tab titles that shorten to fit 80 columns: (narrow, wide).
CARDS_WIDTH = 41  # the cards pane and its border (app.tcss)
WIDE_TABS_WIDTH = 92  # the tab bar with the wide titles
TAB_TITLES = {"stats": ("Op stats [2]", "Op statistics [2]"), "communication": ("Comm [4]", "Communication [4]")}
TAB_FILTER_HINT = "/ filter this tab: text  name:x  type:allReduce  dur>1000 (its time)  wait>500 (its wait)  -term"
OP_FILTER_HINT = FilterBar.PLACEHOLDER
VIEW_TABS = {"steps": "steps", "communication": "communication", "links": "communication"}
VIEW_TABS |= {"host_api": "host_api", "memory": "memory"}
WAIT_RULES = {"recompilation": "recompilation", "host_op_wait": "host_op", "communication_wait": "communication"}


def drill_down_query(finding: Finding) -> tuple[str, tuple[str, bool]]:
    """The filter and sort that show a finding's tasks, worst first."""
    terms = [f"type:{t}" for t in finding.op_types[:1]]
    sort = ("duration_us", True)
    if finding.rule in WAIT_RULES:
        if finding.rule == "communication_wait":  # its op types are a ranking: every one is shown
            terms = []
        terms.append(f"cause:{WAIT_RULES[finding.rule]}")
        sort = ("wait_us", True)
    elif finding.rule == "ai_cpu":
        terms.append("core:AI_CPU")
    elif finding.rule == "long_task":
        terms.append("dur>1000")
    elif finding.rule == "aclop_share":
        terms = ["aclop"]
    return " ".join(terms), sort


class MainScreen(Screen):
    BINDINGS = [
        Binding("left_square_bracket", "card(-1)", "Prev card"),
        Binding("right_square_bracket", "card(1)", "Next card"),
        Binding("p", "pick_card", "Pick card", show=False),
        Binding("P", "pick_capture", "Pick capture", show=False),
        Binding("1", "tab('summary')", "Op summary", show=False),
        Binding("2", "tab('stats')", "Op statistics", show=False),
        Binding("3", "tab('steps')", "Steps", show=False),
        Binding("4", "tab('communication')", "Communication", show=False),
        Binding("5", "tab('host_api')", "Host API", show=False),
        Binding("6", "tab('memory')", "Memory", show=False),
        Binding("slash", "filter", "Filter"),
        Binding("escape", "escape", "Clear", show=False),
        Binding("d", "sort('duration_us')", "Sort dur"),
        Binding("w", "sort('wait_us')", "Sort wait"),
        Binding("t", "sort('row')", "Chrono", show=False),
        Binding("s", "next_sort_column", "Sort col", show=False),
        Binding("r", "reverse", "Reverse", show=False),
        Binding("e", "export", "Export"),
        Binding("y", "copy_report", "Copy op report"),
        Binding("v", "card_spread", "Cards view", show=False),
        Binding("C", "compare", "Compare with…", show=False),
        Binding("c", "capture", "Capture"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.profile: Profile | None = None
        self.diagnosis: Diagnosis | None = None
        self.card: str = ""
        self.filter_query: Query = parse_query("")
        self.sorts: dict[str, tuple[str, bool]] = dict(DEFAULT_SORT)
        self._card_tasks: dict[str, pl.DataFrame] = {}
        self._models: dict[str, TimelineModel] = {}
        self._summary_totals: tuple[int, float, float] = (0, 0.0, 0.0)
        self.views: TrainingViews | None = None
        self.step_windows: pl.DataFrame | None = None

    # ---------------------------------------------------------------- layout
    def compose(self) -> ComposeResult:
        yield HeaderBar("npuscope", id="header")
        with Vertical(id="loading"):
            yield Label("opening", id="loading-label")
            yield ProgressBar(total=100, show_eta=False, id="loading-bar")
            yield Label("Esc cancels", classes="hint")
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

    def on_resize(self, event) -> None:
        self.set_class(self.size.width < 110, "narrow")
        self.set_class(self.size.height < 30, "short")
        tabs = self.query_one("#tabs", TabbedContent)
        room = self.size.width - (0 if self.size.width < 110 else CARDS_WIDTH)  # beside the cards when wide
        for tab, (short, wide) in TAB_TITLES.items():
            tabs.get_tab(tab).label = short if room < WIDE_TABS_WIDTH else wide

    # ---------------------------------------------------------------- loading
    def show_loading(self, label: str) -> None:
        self.remove_class("loaded")
        self.query_one("#loading-label", Label).update(label)

    def show_progress(self, done: int, total: int, label: str) -> None:
        bar = self.query_one("#loading-bar", ProgressBar)
        bar.update(total=max(total, 1), progress=done)
        self.query_one("#loading-label", Label).update(f"{label}  {done / 1e6:,.1f} / {total / 1e6:,.1f} MB")

    def show_profile(self, profile: Profile, diagnosis: Diagnosis) -> None:
        self.profile, self.diagnosis = profile, diagnosis
        self._card_tasks.clear()
        self._models.clear()
        self.add_class("loaded")
        self.card = profile.cards[0] if profile.cards else ""
        self.views, self.step_windows = None, None
        for pane in self.panes():
            pane.show_reading()
        self._show_card()
        # Read in a worker once the first screen is painted: the op tabs are usable meanwhile.
        self.call_after_refresh(self._read_views, profile, diagnosis)
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

    def card_stats(self) -> pl.DataFrame:
        stats = self.loaded[0].op_statistic.filter(pl.col("card") == self.card)
        return stats.with_columns(
            (pl.col("max_us") / pl.col("avg_us")).fill_nan(None).alias("max_over_avg"),
            pl.int_range(pl.len(), dtype=pl.UInt32).alias("row"),
        )

    def _show_card(self) -> None:
        p, d = self.loaded
        tasks = self.card_tasks()
        self.query_one(HeaderBar).show(
            capture=p.capture.name,
            layout=p.era,
            card=self.card,
            cards=p.cards,
            summary=card_summary(p, tasks, self.card),
            skipped=p.skipped_rows,
        )
        self.query_one(CardsPane).show(d.for_card(self.card), card_kpis(tasks))
        timeline = self.query_one(MiniTimeline)
        timeline.set_steps(step_marks(self.step_windows, self.card) if self.step_windows is not None else ())
        for pane in self.panes():
            pane.set_card(self.card)
        if self.card in self._models:
            timeline.set_model(self._models[self.card])
        else:
            # Built off the UI thread (0.3 s for 2M tasks) once the first screen has settled:
            # started at once, it competes with the first paint for both cores.
            timeline.set_model(None, empty_text="building the timeline…")
            self.set_timer(MODEL_DELAY_S, partial(self._build_model, self.card, tasks))
        self.refresh_tables()

    def refresh_tables(self, *, jump_to_row: int | None = None, which: tuple[str, ...] = ("summary", "stats")) -> None:
        # A new order or filter starts at the top (worst first); drill-downs jump explicitly.
        if "summary" in which:
            summary = self.query_one("#summary-table", FrameTable)
            key, desc = self.sorts["summary"]
            tasks = self.card_tasks()
            order = task_positions(tasks, self.filter_query, key, desc)
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
            stats_table.set_data(stats, STATS_COLUMNS, sort=(key, desc), keep_key=None, order=order)
        self._update_status()

    @work(thread=True, group="timeline", exit_on_error=False, description="build timeline")
    def _build_model(self, card: str, tasks: pl.DataFrame) -> None:
        model = build_model(tasks, self.loaded[0].events, card)
        self.app.call_from_thread(self._model_ready, card, model)

    def _model_ready(self, card: str, model: TimelineModel) -> None:
        self._models[card] = model
        if card == self.card:
            timeline = self.query_one(MiniTimeline)
            timeline.set_model(model)
            row = self.query_one("#summary-table", FrameTable).current_row
            if row:
                timeline.select(row["start_ns"], row["start_ns"] + round(row["duration_us"] * 1000))

    @work(thread=True, group="views", exclusive=True, exit_on_error=False, description="read training views")
    def _read_views(self, profile: Profile, diagnosis: Diagnosis) -> None:
        app = explorer(self.app)
        try:
            views = read_training_views(profile, strict=app.read.strict)
            windows = card_step_windows(profile)
        except ProfileError as exc:
            self.app.call_from_thread(self._views_failed, profile, str(exc))
            return
        except Exception as exc:  # never the UI's end: said on the tabs
            self.app.call_from_thread(self._views_failed, profile, f"unexpected error: {type(exc).__name__}: {exc}")
            return
        problem = ""
        try:
            diagnosis = diagnosis.with_findings(training_findings(profile, diagnosis, views, app.thresholds))
        except Exception as exc:
            problem = f"training findings not shown: {type(exc).__name__}: {exc}"
        self.app.call_from_thread(self._views_ready, profile, diagnosis, views, windows, problem)

    def _views_failed(self, profile: Profile, message: str) -> None:
        if profile is not self.profile:
            return
        for pane in self.panes():
            pane.show_reading(f"could not be read: {message}")
        self.notify(message, title="Training views", severity="error", markup=False)

    def _views_ready(
        self, profile: Profile, diagnosis: Diagnosis, views: TrainingViews, windows: pl.DataFrame, problem: str
    ) -> None:
        if profile is not self.profile:
            return  # another profile was opened meanwhile
        self.diagnosis, self.views, self.step_windows = diagnosis, views, windows
        for pane in self.panes():
            pane.show(views, self.card)
        self.query_one(CardsPane).show(diagnosis.for_card(self.card), card_kpis(self.card_tasks()))
        self.query_one(MiniTimeline).set_steps(step_marks(windows, self.card))
        if problem:
            self.notify(problem, title="Training views", severity="warning", markup=False)
        self._update_status()

    def panes(self) -> list[ViewPane]:
        return list(self.query(ViewPane))

    def current_pane(self) -> ViewPane | None:
        tab = self.query_one("#tabs", TabbedContent).active or "summary"
        return self.query_one(f"#{tab}-pane", ViewPane) if tab in TRAINING_TABS else None

    def _update_status(self) -> None:
        pane = self.current_pane()
        if pane is not None:
            self.query_one("#status", Static).update(pane.status_text())
            return
        table = self.current_table()
        if table.id == "summary-table":
            rows, dur, wait = self._summary_totals
            total = self.card_tasks().height
            text = f"{rows:,} of {total:,} tasks · Σ duration {dur:,.1f} us · Σ wait {wait:,.1f} us"
        else:
            text = f"{table.row_count:,} op types"
        key, desc = self.sorts["summary" if table.id == "summary-table" else "stats"]
        order = "time order" if key == "row" else f"sorted by {key} {'▼' if desc else '▲'}"
        flt = f" · filter: {self.filter_query.text}" if self.filter_query.text else ""
        self.query_one("#status", Static).update(f"{text} · {order}{flt}")

    def current_table(self) -> FrameTable:
        pane = self.current_pane()
        if pane is not None:
            return pane.current_table()
        tab = self.query_one("#tabs", TabbedContent).active or "summary"
        return self.query_one(f"#{tab}-table", FrameTable)

    # ---------------------------------------------------------------- actions
    def action_card(self, step: int) -> None:
        if not self.profile or len(self.profile.cards) < 2:
            return
        cards = self.profile.cards
        self.card = cards[(cards.index(self.card) + step) % len(cards)]
        self._show_card()

    def action_pick_card(self) -> None:
        if not self.profile:
            return
        def chosen(card: str | None) -> None:
            if card is not None and card != self.card:
                self.card = card
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
                explorer(self.app).load(name)

        self.app.push_screen(PickScreen("Pick a capture (newest first)", names, current), chosen)

    def action_tab(self, tab: str) -> None:
        self.query_one("#tabs", TabbedContent).active = tab
        pane = self.current_pane()
        if pane is not None:
            pane.focus_table()
            if tab == "steps":
                self._select_step(pane.current_table().current_row)
        else:
            self.query_one(f"#{tab}-table", FrameTable).focus()
        self._show_filter_bar()
        self._update_status()

    def _filter_text(self) -> str:
        pane = self.current_pane()
        return (pane.filter_query if pane is not None else self.filter_query).text

    def _show_filter_bar(self) -> None:
        bar = self.query_one(FilterBar)
        bar.placeholder = TAB_FILTER_HINT if self.current_pane() is not None else OP_FILTER_HINT
        bar.value = self._filter_text()
        bar.display = bool(bar.value) or bar.has_focus

    @on(TabbedContent.TabActivated)
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
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
            explorer(self.app).cancel_loading()
            return
        if self._filter_text():
            self.apply_filter("")

    def apply_filter(self, text: str, *, sort: tuple[str, bool] | None = None, jump_to_row: int | None = None) -> bool:
        try:
            query = parse_query(text)
        except QueryError as exc:
            self.notify(str(exc), title="Filter", severity="error", markup=False)
            return False
        if (pane := self.current_pane()) is not None:  # a training tab: its own filter
            pane.set_filter(query)
            self._show_filter_bar()
            return True
        self.filter_query = query
        if sort is not None:
            self.sorts["summary"] = sort
        bar = self.query_one(FilterBar)
        bar.value = self.filter_query.text
        bar.display = bool(self.filter_query.text)
        self.refresh_tables(jump_to_row=jump_to_row)
        return True

    def action_sort(self, key: str) -> None:
        if (pane := self.current_pane()) is not None:
            return pane.sort(key)
        table = "summary" if self.current_table().id == "summary-table" else "stats"
        if table == "stats":
            key = {"duration_us": "total_us", "wait_us": "total_us", "row": "total_us"}.get(key, key)
        current, desc = self.sorts[table]
        # First press sorts worst first (chronological: earliest first); again reverses.
        self.sorts[table] = (key, not desc) if current == key else (key, key != "row")
        self.refresh_tables(which=(table,))

    def action_next_sort_column(self) -> None:
        if (pane := self.current_pane()) is not None:
            return pane.next_sort_column()
        table = "summary" if self.current_table().id == "summary-table" else "stats"
        columns = [c.key for c in (SUMMARY_COLUMNS if table == "summary" else STATS_COLUMNS)]
        current, _ = self.sorts[table]
        nxt = columns[(columns.index(current) + 1) % len(columns)] if current in columns else columns[0]
        self.sorts[table] = (nxt, True)
        self.refresh_tables(which=(table,))

    def action_reverse(self) -> None:
        if (pane := self.current_pane()) is not None:
            return pane.reverse()
        table = "summary" if self.current_table().id == "summary-table" else "stats"
        key, desc = self.sorts[table]
        self.sorts[table] = (key, not desc)
        self.refresh_tables(which=(table,))

    def action_export(self) -> None:
        if not self.profile:
            return
        table = self.current_table()
        if self.current_pane() is not None:
            which = (table.id or "table").removesuffix("-table").replace("_", "-")
            columns = [(c.key, c.title) for c in table.columns]
        else:
            which = "op-summary" if table.id == "summary-table" else "op-statistic"
            columns = [(c.key, c.title) for c in (SUMMARY_COLUMNS if which == "op-summary" else STATS_COLUMNS)]
        stem = f"{self.profile.capture.name}-card{self.card}-{which}"
        try:
            csv_path, md_path = export_table(table.frame, columns, self.exports_dir(), stem)
        except ProfileError as exc:
            self.notify(str(exc), title=exc.title, severity="error", markup=False)
            return
        self.notify(f"{table.row_count:,} rows written to {csv_path} and {md_path.name}", title="Exported", markup=False)

    def action_copy_report(self) -> None:
        if not self.profile:
            return
        row = self.query_one("#summary-table", FrameTable).current_row
        if row is None:
            self.notify("No task selected.", severity="warning")
            return
        profile, diagnosis = self.loaded
        task = diagnosis.tasks.row(int(row["row"]), named=True)
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
                explorer(self.app).compare(Path(path).expanduser())

        self.app.push_screen(PathPrompt("Compare with (NEW profile; the open one is BASE)"), chosen)

    def action_capture(self) -> None:
        self.app.push_screen(CaptureScreen())

    def exports_dir(self) -> Path:
        return explorer(self.app).export_dir or export_dir(self.loaded[0].path)

    # ---------------------------------------------------------------- messages
    @on(FilterBar.Applied)
    def _filter_applied(self, message: FilterBar.Applied) -> None:
        if self.apply_filter(message.text):
            self.current_table().focus()

    @on(FrameTable.HeaderSelected)
    def _header(self, message: FrameTable.HeaderSelected) -> None:
        if (pane := self.current_pane()) is not None:
            return pane.header_sort(message.table, message.key)
        table = "summary" if message.table.id == "summary-table" else "stats"
        current, desc = self.sorts[table]
        self.sorts[table] = (message.key, not desc) if current == message.key else (message.key, True)
        self.refresh_tables(which=(table,))

    @on(FrameTable.RowHighlighted, "#summary-table")
    def _task_highlighted(self, message: FrameTable.RowHighlighted) -> None:
        row = message.row
        if row:
            end = row["start_ns"] + round(row["duration_us"] * 1000)
            self.query_one(MiniTimeline).select(int(row["start_ns"]), end)

    @on(FrameTable.RowSelected, "#stats-table")
    def _type_chosen(self, message: FrameTable.RowSelected) -> None:
        op_type = message.row["op_type"]
        if self.apply_filter(f"type:{op_type}"):
            self.action_tab("summary")

    @on(ViewPane.Changed)
    def _pane_changed(self, message: ViewPane.Changed) -> None:
        self._update_status()

    @on(FrameTable.RowHighlighted, "#steps-table")
    def _step_highlighted(self, message: FrameTable.RowHighlighted) -> None:
        if self.query_one("#tabs", TabbedContent).active == "steps":
            self._select_step(message.row)

    def _select_step(self, row: dict | None) -> None:
        """Mark the step of `row` (a Steps table row) on the timeline."""
        marks = self.query_one(MiniTimeline).steps
        step = row["step"] if row else None
        window = next(((s, e) for n, s, e in marks if n == step), None)
        if window is not None:
            self.query_one(MiniTimeline).select(*window)

    @on(CardsPane.Chosen)
    def _card_chosen(self, message: CardsPane.Chosen) -> None:
        finding = message.finding
        if finding.view in VIEW_TABS:
            tab = VIEW_TABS[finding.view]
            self.query_one("#tabs", TabbedContent).active = tab
            pane = self.query_one(f"#{tab}-pane", ViewPane)
            pane.drill_down(finding)
            self.action_tab(tab)
            return
        text, sort = drill_down_query(finding)
        worst = finding.evidence[0]["row"] if finding.evidence else None
        self.query_one("#tabs", TabbedContent).active = "summary"  # the filter is the op tabs'
        if self.apply_filter(text, sort=sort, jump_to_row=worst):
            self.action_tab("summary")

    @on(CardsPane.DetailRequested)
    def _card_detail(self, message: CardsPane.DetailRequested) -> None:
        self.app.push_screen(FindingScreen(message.finding))
