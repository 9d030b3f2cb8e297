"""`ViewPane`: the common part of the explorer's training-level tabs (Steps, Communication, ...).

A tab holds one or more tables (`TableSpec`), each under a note line. Until the views are
read the notes say "reading…"; a view without a source says "not in this capture" and what
inspect finds, and its table folds away. Each table keeps its own sort; the tab keeps its own
filter (`/` filters the visible tab). The frames come from `npuscope.analysis.training_tables`;
subclasses say which (`frames`) and may add widgets above the tables (`compose_extras`,
`show_extras`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

import polars as pl
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Static

from npuscope.analysis import Finding
from npuscope.analysis.query import Query, parse_query
from npuscope.analysis.training_tables import TableFields, ignored_terms, missing_text, view_positions
from npuscope.parsers.training import TrainingViews

from .frame_table import Column, FrameTable

READING = "reading…"
NATURAL = ("row", False)


@dataclass(frozen=True)
class TableSpec:
    """One table of a tab: its id stem, the view it shows, columns, filter fields, sort keys."""

    name: str  # the table's id is f"{name}-table"
    view: str  # the TrainingViews frame it comes from (for "not in this capture")
    noun: str  # what a row is, plural: "steps", "links"
    columns: tuple[Column, ...]
    fields: TableFields
    duration: str  # the column `d` sorts by
    wait: str  # the column `w` sorts by


class ViewPane(Vertical):
    """A training-level tab: note lines and tables; sorts and a filter of its own."""

    SPECS: ClassVar[tuple[TableSpec, ...]] = ()

    class Changed(Message):
        """What the tab shows changed by a key of its own (the status line follows)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, classes="view-pane")
        self.frames: dict[str, pl.DataFrame] = {}
        self.sorts: dict[str, tuple[str, bool]] = {s.name: NATURAL for s in self.SPECS}
        self.filter_query: Query = parse_query("")
        self.current = self.SPECS[0].name
        self.views: TrainingViews | None = None
        self.card = ""

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
    def frames_of(self, views: TrainingViews, card: str) -> dict[str, pl.DataFrame]:
        raise NotImplementedError

    def show_extras(self, views: TrainingViews | None, card: str) -> None:
        """Subclasses: update what `compose_extras` yielded (None: not read yet)."""

    def show_reading(self, text: str = READING) -> None:
        """Nothing to show yet (or `text`: why there will be nothing)."""
        self.views = None
        self.frames = {}
        for spec in self.SPECS:
            self._note(spec, text)
            self.table(spec.name).display = False
        self.show_extras(None, self.card)

    def show(self, views: TrainingViews, card: str) -> None:
        self.views, self.card = views, card
        self.frames = self.frames_of(views, card)
        for spec in self.SPECS:
            why = missing_text(views, spec.view, card)
            if why and len(self.SPECS) > 1:  # which of the tab's tables the note is about
                why = f"{spec.noun}: {why}"
            self._note(spec, why or "")
            self.table(spec.name).display = why is None
        self.show_extras(views, card)
        self.refresh_tables()

    def set_card(self, card: str) -> None:
        if self.views is not None:
            self.show(self.views, card)
        else:
            self.card = card

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

    def current_table(self) -> FrameTable:
        return self.table(self.current)

    def focus_table(self) -> None:
        table = self.current_table()
        if not table.display:
            shown = [s.name for s in self.SPECS if self.table(s.name).display]
            if not shown:
                return
            self.current = shown[0]
            table = self.current_table()
        table.focus()

    def on_descendant_focus(self, event: Any) -> None:
        widget = event.widget
        if isinstance(widget, FrameTable):
            spec = self.spec_of(widget)
            if spec is not None:
                self.current = spec.name

    def refresh_tables(self, which: tuple[str, ...] | None = None) -> None:
        for spec in self.SPECS:
            if which is not None and spec.name not in which:
                continue
            frame = self.frames.get(spec.name)
            if frame is None:
                continue
            key, desc = self.sorts[spec.name]
            order = view_positions(frame, self.filter_query, spec.fields, key, desc)
            if key == "row" and desc and "row" not in frame.columns:  # `t` again: last row first
                order = order.reverse()
            self.table(spec.name).set_data(
                frame, spec.columns, sort=None if key == "row" else (key, desc), keep_key=None, order=order
            )
        self.post_message(self.Changed())

    # ---------------------------------------------------------------- sort and filter
    def set_filter(self, query: Query) -> None:
        self.filter_query = query
        self.refresh_tables()

    def sort(self, which: str) -> None:
        """`d` (duration), `w` (wait) or `t` (natural order) on the current table: again reverses."""
        spec = self.spec(self.current)
        key = {"duration_us": spec.duration, "wait_us": spec.wait}.get(which, "row")
        current, desc = self.sorts[spec.name]
        self.sorts[spec.name] = (key, not desc) if current == key else (key, key != "row")
        self.refresh_tables((spec.name,))

    def sort_by(self, name: str, key: str, descending: bool) -> None:
        self.sorts[name] = (key, descending)
        self.refresh_tables((name,))

    def header_sort(self, table: FrameTable, key: str) -> None:
        spec = self.spec_of(table)
        if spec is None:
            return
        self.current = spec.name
        current, desc = self.sorts[spec.name]
        self.sorts[spec.name] = (key, not desc) if current == key else (key, True)
        self.refresh_tables((spec.name,))

    def next_sort_column(self) -> None:
        spec = self.spec(self.current)
        keys = [c.key for c in spec.columns]
        current, _ = self.sorts[spec.name]
        nxt = keys[(keys.index(current) + 1) % len(keys)] if current in keys else keys[0]
        self.sorts[spec.name] = (nxt, True)
        self.refresh_tables((spec.name,))

    def reverse(self) -> None:
        key, desc = self.sorts[self.current]
        self.sorts[self.current] = (key, not desc)
        self.refresh_tables((self.current,))

    def status_text(self) -> str:
        if not self.ready:
            return READING
        spec = self.spec(self.current)
        frame = self.frames.get(spec.name)
        total = frame.height if frame is not None else 0
        shown = self.current_table().row_count if total else 0
        key, desc = self.sorts[spec.name]
        if key == "row":
            order = "natural order, reversed" if desc else "natural order"
        else:
            order = f"sorted by {key} {'▼' if desc else '▲'}"
        text = f"{shown:,} of {total:,} {self.noun(spec)} · {order}"
        if self.filter_query.text:
            text += f" · filter: {self.filter_query.text}"
            ignored = ignored_terms(self.filter_query, spec.fields)
            if ignored:
                text += f" (ignored here: {' '.join(ignored)})"
        return text

    def noun(self, spec: TableSpec) -> str:
        """What a row of the table is, plural."""
        return spec.noun

    def drill_down(self, finding: Finding) -> None:
        """Show the evidence of `finding` (a finding of this tab's view); subclasses refine."""
