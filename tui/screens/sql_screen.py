"""The SQL screen (`:` in the main screen): a query over the open profile's tables, its result
in a table with the usual sort, filter, copy and export.

The tables are those of `npuscope sql` (analysis/sql.py), built from what the main screen
shows: its profile, its diagnosis, its training views and step windows (read here, as the
main screen reads them, when it has not finished yet); a rank of a cluster adds `ranks` and a
`rank` column. Each query runs in a thread worker, never on the UI, handed its tables: a
query submitted while another runs interrupts it, and every result is tagged with its query's
number (its generation), so a late result of an older query is dropped (tui/messages.py). A
query that fails says why on the status line, through the app's error route (tui/errors.py).
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Callable, Sequence
from typing import Protocol

import polars as pl
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Input, Static
from textual.worker import Worker

from npuscope.analysis import Diagnosis, Finding
from npuscope.analysis.export import export_dir, export_table
from npuscope.analysis.query import Query, QueryError, parse_query
from npuscope.analysis.session import Diagnosed, Options
from npuscope.analysis.session import read_views as views_of
from npuscope.analysis.sql import TABLES, Tables, once, profile_tables, run_sql, with_rank
from npuscope.analysis.training_tables import TableFields, view_positions
from npuscope.parsers import FrameCache, Profile, ProfileError
from npuscope.parsers.training import TrainingViews

from ..explorer import explorer
from ..messages import QueryDone, QueryFailed, is_current
from ..widgets.frame_table import Column, FrameTable

EXAMPLE = "SELECT op_type, count(*) AS n, sum(duration_us) AS total_us FROM tasks GROUP BY ALL ORDER BY 3 DESC"
HINT = "Enter runs · Tab: the result · / filter · s r sort · y copy · e export · Esc back"
COPY_ROWS = 10_000  # rows `y` copies (OSC 52 clipboards take a few MB at most)
MAX_WIDTH = 40  # a text column's width before it is cut with "…" (the table scrolls sideways)


def result_columns(frame: pl.DataFrame) -> tuple[Column, ...]:
    """A column per result column, as wide as its title and its first values need."""
    columns = []
    head = frame.head(200)
    for name, dtype in frame.schema.items():
        numeric = dtype.is_numeric()
        widest = max((len(str(v)) for v in head[name].to_list() if v is not None), default=1)
        width = max(len(name), min(widest, MAX_WIDTH), 1)
        columns.append(Column(name, name, width, numeric=numeric, decimals=3 if dtype.is_float() else 0))
    return tuple(columns)


class Shown(Protocol):
    """What the main screen shows, which the queries run over."""

    profile: Profile | None
    diagnosis: Diagnosis | None
    views: TrainingViews | None
    step_windows: pl.DataFrame | None


class SqlScreen(Screen[None]):
    """A query prompt over the open profile's tables and its result."""

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("colon", "edit", "Edit the query", show=False),
        Binding("slash", "filter", "Filter"),
        Binding("s", "next_sort_column", "Sort"),
        Binding("r", "reverse", "Reverse"),
        Binding("y", "copy", "Copy"),
        Binding("e", "export", "Export"),
        Binding("q", "back", "Back", show=False),
    ]

    def __init__(self, main: Shown) -> None:
        super().__init__()
        self.main = main  # the MainScreen whose profile is queried
        self.result: pl.DataFrame | None = None
        self.query_text = ""
        self.sort: tuple[str, bool] | None = None
        self.filter_query: Query = parse_query("")
        self.tag = 0  # the number of the latest query; a result of another is dropped
        self.dropped: list[tuple[str, int]] = []  # (message, query number) of results dropped
        self._stop: dict[int, Callable[[], None]] = {}  # query number -> its interrupt, while it runs
        self._tables: tuple[tuple[int, ...], Tables] | None = None
        self.seconds = 0.0

    def compose(self) -> ComposeResult:
        names = [n for n in TABLES if n != "ranks" or self._cluster_rank() is not None]
        yield Static("SQL over the tables " + " ".join(names), id="sql-title", markup=False)
        yield Input(placeholder=EXAMPLE, id="sql-query")
        yield Static(HINT, id="sql-status", markup=False)
        yield FrameTable(id="sql-table")
        yield Input(placeholder="/ filter the result: text  -text  a | b  dur>1000 wait>500", id="sql-filter")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#sql-filter").display = False
        self.query_one("#sql-query", Input).focus()

    # ---------------------------------------------------------------- the tables
    def _cluster_rank(self) -> str | None:
        app = explorer(self.app)
        return app.rank if app.cluster is not None else None

    def tables(self) -> Tables:
        """The tables of what the main screen shows now (kept while that stays the same).
        What they read later, in the query's thread, is bound here: nothing reads the app there."""
        main = self.main
        profile, diagnosis, views, windows = main.profile, main.diagnosis, main.views, main.step_windows
        assert profile is not None and diagnosis is not None, "no profile is open"
        key = (id(profile), id(diagnosis), id(views))
        if self._tables is not None and self._tables[0] == key:
            return self._tables[1]
        app = explorer(self.app)
        settings, cluster, rank = app.settings, app.cluster, self._cluster_rank()
        if views is None:  # the main screen is still reading them: read them here too
            of_cluster = cluster if rank is not None else None  # only a rank gets the cluster's cache and findings
            options = Options(
                settings.thresholds,
                strict=settings.read.strict,
                views_cache=FrameCache(of_cluster.cache_root if of_cluster else None, enabled=settings.use_cache),
                cluster=of_cluster,
                rank=rank if of_cluster is not None else None,
            )
            first = Diagnosed.of(profile, diagnosis, options)
            read_views = once(lambda: views_of(profile, options))

            def found() -> Sequence[Finding]:
                return first.with_views(read_views()).findings

            tables = profile_tables(profile, diagnosis, read_views, findings=found, windows=windows)
        else:  # the diagnosis has the training findings already
            tables = profile_tables(profile, diagnosis, views, findings=diagnosis.findings, windows=windows)
        if rank is not None:
            tables = with_rank(tables, rank, cluster)
        self._tables = (key, tables)
        return tables

    # ---------------------------------------------------------------- running a query
    @on(Input.Submitted, "#sql-query")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip() or (EXAMPLE if not event.value else "")
        if not text:
            return
        if not event.value:
            event.input.value = text
        self.run_query(text)

    def _interrupt(self) -> None:
        """Stop the queries still running (their results would be dropped anyway)."""
        for stop in list(self._stop.values()):
            try:
                stop()
            except Exception:  # noqa: BLE001 - it ended meanwhile: its connection is closed
                pass

    def run_query(self, text: str) -> None:
        self._interrupt()  # a newer query: the older one is of no use
        self.tag += 1
        self.query_text = text
        self._status("running…")
        self._run(text, self.tag, self.tables())

    @work(thread=True, group="sql", exit_on_error=False, description="SQL query")
    def _run(self, text: str, tag: int, tables: Tables) -> None:
        started = time.perf_counter()

        def running(stop: Callable[[], None]) -> None:
            self._stop[tag] = stop

        try:
            result = run_sql(tables, text, flat=True, on_start=running)
        except Exception as exc:  # bad SQL or a bug: the error route says which (`_failed`)
            self.app.call_from_thread(self._failed, QueryFailed(tag, exc))
            return
        finally:
            self._stop.pop(tag, None)
        self.app.call_from_thread(self._done, QueryDone(tag, result, time.perf_counter() - started))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        explorer(self.app).report_worker(event)

    def _failed(self, message: QueryFailed) -> None:
        if not is_current(message, self.tag, self.dropped):
            return  # an older query's
        self._status(explorer(self.app).errors.describe(message.error), error=True)

    def _done(self, message: QueryDone) -> None:
        if not is_current(message, self.tag, self.dropped):
            return  # an older query's result, come after a newer one was asked
        result = message.frame
        self.result, self.seconds = result, message.seconds
        self.sort = None
        self.refresh_table()
        table = self.query_one("#sql-table", FrameTable)
        if result.height:
            table.focus()

    # ---------------------------------------------------------------- the result
    def shown_positions(self) -> pl.Series:
        frame = self.result if self.result is not None else pl.DataFrame()
        fields = TableFields(
            tuple(c for c, t in frame.schema.items() if t == pl.String),  # text terms: every text column
            duration="duration_us" if "duration_us" in frame.columns else None,
            wait="wait_us" if "wait_us" in frame.columns else None,
        )
        key, desc = self.sort or ("", False)
        return view_positions(frame, self.filter_query, fields, key, desc)

    def refresh_table(self) -> None:
        table = self.query_one("#sql-table", FrameTable)
        frame = self.result
        if frame is None:
            return
        order = self.shown_positions() if frame.width else None
        table.set_data(frame, result_columns(frame), sort=self.sort, keep_key=None, order=order)
        self._update_status()

    def _update_status(self) -> None:
        frame = self.result
        if frame is None:
            return
        shown = self.query_one("#sql-table", FrameTable).row_count
        text = f"{shown:,} of {frame.height:,} rows · {self.seconds:.2f} s"
        if self.sort is not None:
            text += f" · sorted by {self.sort[0]} {'▼' if self.sort[1] else '▲'}"
        if self.filter_query.text:
            text += f" · filter: {self.filter_query.text}"
        self._status(text + " · : edit · Esc back")

    def _status(self, text: str, *, error: bool = False) -> None:
        status = self.query_one("#sql-status", Static)
        status.set_class(error, "error")
        status.update(text)

    def shown_frame(self) -> pl.DataFrame:
        return self.query_one("#sql-table", FrameTable).frame

    # ---------------------------------------------------------------- keys
    def action_back(self) -> None:
        bar = self.query_one("#sql-filter", Input)
        if bar.has_focus:
            bar.value = ""
            self._apply_filter("")
            return
        self._interrupt()
        self.dismiss()

    def action_edit(self) -> None:
        self.query_one("#sql-query", Input).focus()

    def action_filter(self) -> None:
        bar = self.query_one("#sql-filter", Input)
        bar.display = True
        bar.value = self.filter_query.text
        bar.focus()

    @on(Input.Submitted, "#sql-filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._apply_filter(event.value)

    def _apply_filter(self, text: str) -> None:
        try:
            self.filter_query = parse_query(text)
        except QueryError as exc:
            self.notify(str(exc), title="Filter", severity="error", markup=False)
            return
        bar = self.query_one("#sql-filter", Input)
        bar.display = bool(self.filter_query.text)
        self.refresh_table()
        self.query_one("#sql-table", FrameTable).focus()

    def _sortable(self) -> list[str]:
        return list(self.result.columns) if self.result is not None else []

    def action_next_sort_column(self) -> None:
        keys = self._sortable()
        if not keys:
            return
        current = self.sort[0] if self.sort else None
        nxt = keys[(keys.index(current) + 1) % len(keys)] if current in keys else keys[0]
        self.sort = (nxt, True)
        self.refresh_table()

    def action_reverse(self) -> None:
        if self.sort is None:
            keys = self._sortable()
            if not keys:
                return
            self.sort = (keys[0], False)
        else:
            self.sort = (self.sort[0], not self.sort[1])
        self.refresh_table()

    @on(FrameTable.HeaderSelected, "#sql-table")
    def _header(self, message: FrameTable.HeaderSelected) -> None:
        same = self.sort is not None and self.sort[0] == message.key
        self.sort = (message.key, not self.sort[1] if same and self.sort else True)
        self.refresh_table()

    def action_copy(self) -> None:
        """The result as shown (filtered, sorted) as CSV, up to COPY_ROWS rows, to the clipboard."""
        if self.result is None:
            self.notify("No result yet.", severity="warning")
            return
        frame = self.shown_frame()
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(frame.columns)
        writer.writerows(frame.head(COPY_ROWS).iter_rows())
        self.app.copy_to_clipboard(out.getvalue())
        rows = min(frame.height, COPY_ROWS)
        self.notify(f"{rows:,} rows copied as CSV (OSC 52)", title="Copied", markup=False)

    def action_export(self) -> None:
        if self.result is None or self.main.profile is None:
            self.notify("No result yet.", severity="warning")
            return
        table = self.query_one("#sql-table", FrameTable)
        folder = explorer(self.app).settings.export_dir or export_dir(self.main.profile.path)
        stem = f"{self.main.profile.capture.name}-sql"
        try:
            csv_path, md_path = export_table(table.frame, [(c, c) for c in table.frame.columns], folder, stem)
        except ProfileError as exc:
            self.notify(str(exc), title=exc.title, severity="error", markup=False)
            return
        self.notify(
            f"{table.row_count:,} rows written to {csv_path} and {md_path.name}", title="Exported", markup=False
        )
