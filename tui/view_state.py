"""What the explorer's main screen shows, as one frozen value with pure transitions.

The card, the visible tab, the filter of each tab, the sort of each table, the table of each
tab the keys act on, the highlighted row of each table, how the Op statistics and the
Communication tab group their rows and whether the findings cards are open: everything a key
changes. Keys become transitions (`sort_by(state, "summary", "wait_us")`), the screen keeps
the latest state and renders from it (its panes too: they hold no view state of their own),
and the rules (a second press reverses, `t` starts earliest first, a new card starts at the
top) are here once, tested without an app. No Textual, no Rich.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TypeVar

V = TypeVar("V")
Sort = tuple[str, bool]
"""(column key, descending)"""

ROW = "row"
"""The natural order: time order for tasks, file order for the training views."""
OP_TABS = ("summary", "stats")
"""The op tabs share one filter (op statistics of the op types whose tasks match)."""
DEFAULT_SORTS: Mapping[str, Sort] = MappingProxyType({"summary": (ROW, False), "stats": ("total_us", True)})


def _frozen(mapping: Mapping[str, V]) -> Mapping[str, V]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class ViewState:
    """The view of the main screen. Build new ones with the transitions below."""

    card: str = ""
    tab: str = "summary"
    filters: Mapping[str, str] = field(default_factory=lambda: _frozen({}))
    """Filter text per filter scope (`filter_scope(tab)`)."""
    sorts: Mapping[str, Sort] = field(default_factory=lambda: DEFAULT_SORTS)
    """Sort per table ("summary", "stats", or a training table's name)."""
    selection: Mapping[str, object] = field(default_factory=lambda: _frozen({}))
    """Key of the highlighted row per table (the op summary's `row`)."""
    cards_open: bool = False
    """The findings cards shown in place of the tables (narrow terminals)."""
    stats_by_shape: bool = False
    """The Op statistics tab groups by op type and input shapes (`g`), else by op type."""
    tables: Mapping[str, str] = field(default_factory=lambda: _frozen({}))
    """The table the keys act on per tab that holds several (the one focused last)."""
    comm_by_type: bool = True
    """The Communication tab's collectives per op type, else per op (`o`)."""

    def sort_of(self, table: str) -> Sort:
        return self.sorts.get(table, (ROW, False))

    def table_of(self, tab: str, first: str) -> str:
        """The table of `tab` the keys act on (`first`: the tab's first table, until another is focused)."""
        return self.tables.get(tab, first)

    def filter_of(self, tab: str | None = None) -> str:
        return self.filters.get(filter_scope(self.tab if tab is None else tab), "")


def filter_scope(tab: str) -> str:
    """Tabs sharing a filter share its scope: the op tabs are one, each training tab its own."""
    return "op" if tab in OP_TABS else tab


def set_card(state: ViewState, card: str) -> ViewState:
    """Another card: filters and sorts stay, the highlighted rows start over."""
    if card == state.card:
        return state
    return replace(state, card=card, selection=_frozen({}))


def set_tab(state: ViewState, tab: str) -> ViewState:
    return state if tab == state.tab else replace(state, tab=tab)


def set_filter(state: ViewState, text: str, tab: str | None = None) -> ViewState:
    """The filter of `tab` (default: the visible one) becomes `text` (stripped)."""
    scope = filter_scope(state.tab if tab is None else tab)
    return replace(state, filters=_frozen({**state.filters, scope: text.strip()}))


def set_sort(state: ViewState, table: str, sort: Sort) -> ViewState:
    return replace(state, sorts=_frozen({**state.sorts, table: sort}))


def sort_by(state: ViewState, table: str, key: str, *, descending: bool | None = None) -> ViewState:
    """Sort `table` by `key`: the first press worst first (the natural order earliest first,
    or `descending` when given); the same key again reverses the order."""
    current, desc = state.sort_of(table)
    if current == key:
        return set_sort(state, table, (key, not desc))
    first = (key != ROW) if descending is None else descending
    return set_sort(state, table, (key, first))


def reverse(state: ViewState, table: str) -> ViewState:
    key, desc = state.sort_of(table)
    return set_sort(state, table, (key, not desc))


def next_sort_column(state: ViewState, table: str, columns: Sequence[str]) -> ViewState:
    """Sort by the column after the sorted one (the first after the last), worst first."""
    if not columns:
        return state
    current, _ = state.sort_of(table)
    nxt = columns[(list(columns).index(current) + 1) % len(columns)] if current in columns else columns[0]
    return set_sort(state, table, (nxt, True))


def select(state: ViewState, table: str, key: object) -> ViewState:
    """The row with `key` is highlighted in `table`."""
    if state.selection.get(table) == key:
        return state
    return replace(state, selection=_frozen({**state.selection, table: key}))


def toggle_cards(state: ViewState) -> ViewState:
    return replace(state, cards_open=not state.cards_open)


def toggle_stats_by_shape(state: ViewState) -> ViewState:
    """Op statistics by type+shape, or back by type; the table's highlighted row starts over."""
    selection = {k: v for k, v in state.selection.items() if k != "stats"}
    return replace(state, stats_by_shape=not state.stats_by_shape, selection=_frozen(selection))


def close_cards(state: ViewState) -> ViewState:
    return replace(state, cards_open=False) if state.cards_open else state


def focus_table(state: ViewState, tab: str, table: str) -> ViewState:
    """The keys of `tab` act on its table `table` (it was focused)."""
    if state.tables.get(tab) == table:
        return state
    return replace(state, tables=_frozen({**state.tables, tab: table}))


def set_comm_by_type(state: ViewState, by_type: bool) -> ViewState:
    """The Communication tab's collectives per op type (True) or per op (False)."""
    return state if by_type == state.comm_by_type else replace(state, comm_by_type=by_type)
