"""`ViewPane`: the common part of the explorer's training-level tabs (Steps, Communication, ...).

A tab holds one or more tables (`TableSpec`), each under a note line. Until the views are
read the notes say "reading…"; a view without a source says "not in this capture" and what
inspect finds, and its table folds away. What the tables show (the card, each table's sort,
the tab's filter, the table the keys act on, the Communication tab's grouping) is the main
screen's `ViewState` (tui/view_state.py): the pane renders what it is given and keeps only
the frames it made. The frames come from `npuscope.analysis.training_tables`; subclasses say
which (`frame_of`) and may add widgets above the tables (`compose_extras`, `show_extras`).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

import polars as pl
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Static

from npuscope.analysis import Finding
from npuscope.analysis.query import Query, parse_query
from npuscope.analysis.training_tables import TableFields, ignored_terms, missing_text, view_positions
from npuscope.parsers.training import TrainingViews

from ..view_state import ROW, ViewState, focus_table, set_sort
from .frame_table import Column, FrameTable

READING = "reading…"


@lru_cache(maxsize=64)
def parsed(text: str) -> Query:
    """The query of a filter text the state holds (it parsed when it was set)."""
    return parse_query(text)


@dataclass(frozen=True)
class TableSpec:
    """One table of a tab: its id stem, the view it shows, columns, filter fields, sort keys."""

    name: str  # the table's id is f"{name}-table"; its sort in the view state is under `name`
    view: str  # the TrainingViews frame it comes from (for "not in this capture")
    noun: str  # what a row is, plural: "steps", "links"
    columns: tuple[Column, ...]
    fields: TableFields
    duration: str  # the column `d` sorts by
    wait: str  # the column `w` sorts by


class ViewPane(Vertical):
    """A training-level tab: note lines and tables, drawn from the main screen's view state."""

    TAB: ClassVar[str] = ""  # the tab's id; its filter in the view state is under it
    SPECS: ClassVar[tuple[TableSpec, ...]] = ()

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, classes="view-pane")
        self.views: TrainingViews | None = None
        self.card = ""
        self._frames: dict[str, tuple[Hashable, pl.DataFrame]] = {}  # table -> (what it was made of, frame)

    # ---------------------------------------------------------------- layout
    def compose(self) -> ComposeResult:
        yield from self.compose_extras()
        for spec in self.SPECS:
            yield Static(READING, id=f"{spec.name}-note", classes="view-note", markup=False)
            table = FrameTable(id=f"{spec.name}-table")
            table.display = False
            yield table

    def compose_extras(self) -> Iterable[Widget]:
        return ()

    # ---------------------------------------------------------------- data
    def frame_of(self, spec: TableSpec, views: TrainingViews, state: ViewState) -> pl.DataFrame:
        """The rows of table `spec` for the state's card (subclasses)."""
        raise NotImplementedError

    def frame_key(self, spec: TableSpec, state: ViewState) -> Hashable:
        """What the frame of `spec` depends on besides the views: the card (and what subclasses add)."""
        return state.card

    def frame(self, spec: TableSpec, state: ViewState) -> pl.DataFrame | None:
        """The rows of table `spec` as the state says (made once for each card and grouping)."""
        if self.views is None:
            return None
        key = self.frame_key(spec, state)
        made = self._frames.get(spec.name)
        if made is None or made[0] != key:
            made = (key, self.frame_of(spec, self.views, state))
            self._frames[spec.name] = made
        return made[1]

    def show_extras(self, views: TrainingViews | None, card: str) -> None:
        """Subclasses: update what `compose_extras` yielded (None: not read yet)."""

    def show_reading(self, text: str = READING) -> None:
        """Nothing to show yet (or `text`: why there will be nothing)."""
        self.views = None
        self._frames = {}
        for spec in self.SPECS:
            self._note(spec, text)
            self.table(spec.name).display = False
        self.show_extras(None, self.card)

    def show(self, views: TrainingViews, state: ViewState) -> None:
        """The views were read: the notes, extras and tables of the state's card."""
        self.views = views
        self._frames = {}
        self.show_card(state)

    def show_card(self, state: ViewState) -> None:
        """The state's card (another one, or the views just read); nothing until they are."""
        self.card = state.card
        views = self.views
        if views is None:
            return
        for spec in self.SPECS:
            why = missing_text(views, spec.view, state.card)
            if why and len(self.SPECS) > 1:  # which of the tab's tables the note is about
                why = f"{spec.noun}: {why}"
            self._note(spec, why or "")
            self.table(spec.name).display = why is None
        self.show_extras(views, state.card)
        self.render_tables(state)

    def _note(self, spec: TableSpec, text: str) -> None:
        note = self.query_one(f"#{spec.name}-note", Static)
        note.update(text)
        note.display = bool(text)

    @property
    def ready(self) -> bool:
        return self.views is not None

    # ---------------------------------------------------------------- tables
    def spec(self, name: str) -> TableSpec:
        return next(s for s in self.SPECS if s.name == name)

    def table(self, name: str) -> FrameTable:
        return self.query_one(f"#{name}-table", FrameTable)

    def spec_of(self, table: FrameTable) -> TableSpec | None:
        return next((s for s in self.SPECS if f"{s.name}-table" == table.id), None)

    def current(self, state: ViewState) -> str:
        """The name of the table the keys act on."""
        return state.table_of(self.TAB, self.SPECS[0].name)

    def current_table(self, state: ViewState) -> FrameTable:
        return self.table(self.current(state))

    def focus_target(self, state: ViewState) -> str | None:
        """The table the focus goes to: the current one, else the first shown (None: none is)."""
        if self.table(self.current(state)).display:
            return self.current(state)
        return next((s.name for s in self.SPECS if self.table(s.name).display), None)

    def render_tables(self, state: ViewState, which: tuple[str, ...] | None = None) -> None:
        """Fill the tables (all, or those named in `which`) as the state sorts and filters them."""
        query = parsed(state.filter_of(self.TAB))
        for spec in self.SPECS:
            if which is not None and spec.name not in which:
                continue
            frame = self.frame(spec, state)
            if frame is None:
                continue
            key, desc = state.sort_of(spec.name)
            order = view_positions(frame, query, spec.fields, key, desc)
            if key == ROW and desc and ROW not in frame.columns:  # `t` again: last row first
                order = order.reverse()
            self.table(spec.name).set_data(
                frame, spec.columns, sort=None if key == ROW else (key, desc), keep_key=None, order=order
            )

    # ---------------------------------------------------------------- sort keys
    def sort_key(self, state: ViewState, which: str) -> tuple[str, str]:
        """(table, column) of `d` (duration), `w` (wait) or `t` (natural order) on the current table."""
        spec = self.spec(self.current(state))
        return spec.name, {"duration_us": spec.duration, "wait_us": spec.wait}.get(which, ROW)

    def columns_of(self, name: str) -> list[str]:
        return [c.key for c in self.spec(name).columns]

    def status_text(self, state: ViewState) -> str:
        if not self.ready:
            return READING
        spec = self.spec(self.current(state))
        frame = self.frame(spec, state)
        total = frame.height if frame is not None else 0
        shown = self.table(spec.name).row_count if total else 0
        key, desc = state.sort_of(spec.name)
        if key == ROW:
            order = "natural order, reversed" if desc else "natural order"
        else:
            order = f"sorted by {key} {'▼' if desc else '▲'}"
        text = f"{shown:,} of {total:,} {self.noun(spec, state)} · {order}"
        query = parsed(state.filter_of(self.TAB))
        if query.text:
            text += f" · filter: {query.text}"
            ignored = ignored_terms(query, spec.fields)
            if ignored:
                text += f" (ignored here: {' '.join(ignored)})"
        return text

    def noun(self, spec: TableSpec, state: ViewState) -> str:
        """What a row of the table is, plural."""
        return spec.noun

    # ---------------------------------------------------------------- drill-down
    def drill_state(self, finding: Finding, state: ViewState) -> ViewState:
        """The state that shows the evidence of `finding` (a finding of this tab's view): its
        table current and sorted worst first; subclasses say which table and column."""
        return state

    def drill_row(self, finding: Finding, state: ViewState) -> None:
        """Once drawn as `drill_state` says: the cursor on the finding's row (subclasses)."""

    def drilled(self, state: ViewState, table: str, key: str, descending: bool) -> ViewState:
        """`state` with `table` current and sorted by `key` (`descending`)."""
        return set_sort(focus_table(state, self.TAB, table), table, (key, descending))
