"""`FrameTable`: a keyboard-driven table over a polars DataFrame that stays fast with millions of rows.

Why not Textual's `DataTable`: it copies every cell into Python objects and keeps per-row
bookkeeping, so loading a profile's op table costs time and memory proportional to the row
count (measured: 387 s for 1,000,000 rows). `FrameTable` uses the Line API instead: it is a
`ScrollView` whose `virtual_size` says how many rows there are, and `render_line(y)` draws only
the lines on screen. The rows shown are cut from the frame with one `frame.slice(...)` plus one
`.rows()` per scroll window (cached, so the ~20 `render_line` calls of one refresh share it);
the frame itself is never converted to Python. Sorting and filtering stay in polars: build the
new frame there and hand it to `set_data`, which keeps the cursor on the same logical row.

Screen line 0 is a fixed header (column titles, ▲/▼ on the sorted column); the data rows
follow. The columns fit the widget's width: those of the best `priority` (and the sorted one)
are shown first, a `flex` column takes the room left, and the rest follow off to the right,
where the table scrolls sideways. Numbers are never cut inside a cell: a column with a `unit`
shows its values in the unit that fits (us, ms or s; the header says which), and any other
numeric column is as wide as its widest value.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import polars as pl
from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

__all__ = ["Column", "FrameTable", "Shown"]

ELLIPSIS = "…"
NULL_TEXT = "-"
EMPTY_TEXT = "no rows match"
SORT_ASCENDING = "▲"
SORT_DESCENDING = "▼"

_BAR_EIGHTHS = " ▏▎▍▌▋▊▉"
_BAR_FULL = "█"
# Tabs, newlines and other control characters would break a terminal line.
_CONTROL = {code: " " for code in (*range(32), 127)}
# C1 controls and the Unicode bidirectional controls (a right-to-left override would show a
# name reversed, "Trojan Source"): a visible replacement character, so the cell says that
# something is there and keeps its width.
_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
_CONTROL.update({code: "\ufffd" for code in (*range(0x80, 0xA0), *_BIDI)})
# Rows cut from the frame per scroll window: the visible page plus this many pages before and
# after, so scrolling by a line or a page usually reuses the cached slice.
_OVERSCAN_PAGES = 1
# Window size used before the widget has been laid out (no height known yet).
_UNSIZED_WINDOW = 64


@dataclass(frozen=True)
class Column:
    """How one frame column is shown."""

    key: str
    """Name of the frame column."""
    title: str
    """Header text."""
    width: int
    """Width in terminal cells; longer text is cut and ends with "…"."""
    numeric: bool = False
    """Right-aligned, with thousands separators; floats get `decimals` decimals."""
    decimals: int = 3
    """Decimals for float values of a numeric column."""
    bar: bool = False
    """A numeric 0..100 value drawn as the value plus a small inline bar (e.g. Ratio(%))."""
    style_key: str | None = None
    """Frame column whose value picks this cell's style from `FrameTable.cell_styles`."""
    unit: str = ""
    """Unit of the values ("us"): shown in the unit that fits the width, named in the header."""
    priority: int = 0
    """Lower shows first when the table is narrower than its columns (the sorted one always)."""
    flex: bool = False
    """Takes the room the shown columns leave (never narrower than `min_width`)."""
    min_width: int = 8
    """Narrowest a `flex` column gets."""

    @property
    def full_title(self) -> str:
        """The title with the unit of the frame's values (as exports name the column)."""
        return f"{self.title}({self.unit})" if self.unit else self.title

    def __post_init__(self) -> None:
        if self.width < 1:
            raise ValueError(f"column {self.key!r}: width must be at least 1, not {self.width}")
        if self.decimals < 0:
            raise ValueError(f"column {self.key!r}: decimals must be >= 0, not {self.decimals}")


def fit(text: str, width: int, right: bool = False) -> str:
    """`text` cut with "…" or padded with spaces to exactly `width` cells."""
    if text.isascii():
        if not text.isprintable():
            text = text.translate(_CONTROL)
        length = len(text)
        if length > width:
            return text[: width - 1] + ELLIPSIS if width > 0 else ""
    else:
        if not text.isprintable():
            text = text.translate(_CONTROL)
        length = cell_len(text)
        if length > width:
            if width <= 0:
                return ""
            # set_cell_size never splits a wide character; it pads with a space instead.
            return set_cell_size(text, width - 1) + ELLIPSIS
    padding = " " * (width - length)
    return padding + text if right else text + padding


# Larger units of a column's `unit`, smallest first: (name, values per one of it).
UNIT_SCALES: dict[str, tuple[tuple[str, float], ...]] = {
    "us": (("us", 1.0), ("ms", 1e3), ("s", 1e6)),
    "ns": (("ns", 1.0), ("us", 1e3), ("ms", 1e6), ("s", 1e9)),
    "MB": (("MB", 1.0), ("GB", 1024.0)),
}


def _number(value: float, decimals: int) -> str:
    text = f"{value:,.{decimals}f}"
    if text.startswith("-") and not text.strip("-0.,"):
        return text[1:]  # "-0.000": a negative that rounds to zero reads as zero
    return text


def format_value(value: Any, column: Column, scale: float = 1.0) -> str:
    """The text of one cell before fitting: null as "-", numbers with thousands separators
    (divided by `scale`: the unit the column is shown in)."""
    if value is None:
        return NULL_TEXT
    if column.numeric:
        if isinstance(value, bool):
            return str(value)
        if isinstance(value, int) and scale == 1.0:
            return f"{value:,}"
        if isinstance(value, float) and value != value:
            return "NaN"
        try:
            return _number(float(value) / scale, column.decimals)
        except (TypeError, ValueError):
            return str(value)
    return value if isinstance(value, str) else str(value)


@dataclass(frozen=True)
class Shown:
    """A column as drawn: its width, the unit its numbers are shown in, and that unit's scale."""

    column: Column
    width: int
    title: str
    scale: float = 1.0


def number_width(extremes: Sequence[Any], column: Column, scale: float = 1.0) -> int:
    """Cells the widest of a numeric column's values takes (its min and max decide it)."""
    return max((len(format_value(v, column, scale)) for v in extremes if v is not None), default=0)


def shown_column(column: Column, extremes: Sequence[Any]) -> Shown:
    """`column` in the unit its values fit in, as wide as its widest value needs."""
    if not column.numeric:
        return Shown(column, column.width, column.title)
    if column.bar:  # the value, a space and the bar
        bar = _bar_width(column.width)
        return Shown(column, max(column.width, number_width(extremes, column) + 1 + bar), column.title)
    if column.unit:
        scales = UNIT_SCALES.get(column.unit, ((column.unit, 1.0),))
        for name, scale in scales:
            need = number_width(extremes, column, scale)
            if need <= column.width:
                return Shown(column, column.width, f"{column.title}({name})", scale)
        name, scale = scales[-1]
        title = f"{column.title}({name})"
        return Shown(column, max(column.width, number_width(extremes, column, scale)), title, scale)
    return Shown(column, max(column.width, number_width(extremes, column)), column.title)


def arrange(shown: Sequence[Shown], room: int, sort_key: str | None = None) -> list[Shown]:
    """The columns in drawing order for a table `room` cells wide (0: unknown, all as given).

    By priority (the sorted column first) columns are taken while they fit; they keep their
    given order, a `flex` one widened to the room left, and the others follow to the right.
    """
    if room <= 0:
        return list(shown)
    ranked = sorted(range(len(shown)), key=lambda i: (shown[i].column.key != sort_key, shown[i].column.priority))
    used = 1
    taken: set[int] = set()
    reserve: dict[int, int] = {}  # a flex column's room to grow, kept from later priorities
    for i in ranked:
        c = shown[i]
        need = (min(c.width, c.column.min_width) if c.column.flex else c.width) + 1
        held = sum(r for p, r in reserve.items() if p < c.column.priority)
        if used + need + held > room:
            break
        taken.add(i)
        used += need
        if c.column.flex:
            reserve[c.column.priority] = reserve.get(c.column.priority, 0) + max(c.width - c.column.min_width, 0)
    flex = [i for i in sorted(taken) if shown[i].column.flex]
    out: list[Shown] = []
    for i in sorted(taken):
        c = shown[i]
        if flex and i == flex[0]:
            c = Shown(c.column, max(room - used + min(c.width, c.column.min_width), 1), c.title, c.scale)
        out.append(c)
    return out + [shown[i] for i in range(len(shown)) if i not in taken]


def _bar_width(width: int) -> int:
    """Cells of the inline bar in a `bar` column of `width` cells (0: too narrow for a bar)."""
    if width < 7:
        return 0
    return min(10, (width - 1) // 3)


def _bar_text(value: Any, cells: int) -> str:
    """A horizontal bar of `cells` cells for a 0..100 value, in eighths of a cell."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value != value:
        return " " * cells
    eighths = round(min(max(float(value), 0.0), 100.0) / 100.0 * cells * 8)
    full, part = divmod(eighths, 8)
    text = _BAR_FULL * full + (_BAR_EIGHTHS[part] if part else "")
    return text + " " * (cells - len(text))


class _Styles(NamedTuple):
    base: Style
    header: Style
    header_sorted: Style
    cursor: Style
    empty: Style
    bar: Style


class FrameTable(ScrollView, can_focus=True):
    """A scrollable, keyboard-driven table over a polars DataFrame (Line API, any row count)."""

    ALLOW_SELECT = False

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "cursor_up", "Up", show=False),
        Binding("down,j", "cursor_down", "Down", show=False),
        Binding("pageup,ctrl+b", "cursor_page_up", "Page up", show=False),
        Binding("pagedown,ctrl+f,space", "cursor_page_down", "Page down", show=False),
        Binding("home,g", "cursor_first", "First row", show=False),
        Binding("end,G", "cursor_last", "Last row", show=False),
        Binding("enter", "select_cursor", "Select", show=False),
    ]
    """
    | Key(s) | Description |
    | :- | :- |
    | up, k | Move the cursor up one row. |
    | down, j | Move the cursor down one row. |
    | pageup, ctrl+b | Move the cursor (and the view) up one page. |
    | pagedown, ctrl+f, space | Move the cursor (and the view) down one page. |
    | home, g | Move the cursor to the first row. |
    | end, G | Move the cursor to the last row. |
    | enter | Select the row under the cursor (posts `FrameTable.RowSelected`). |
    | left, right | Scroll horizontally (inherited from `ScrollView`). |
    | ctrl+pageup, ctrl+pagedown | Scroll one page left / right (inherited). |

    Mouse: clicking a row moves the cursor there, double-clicking it also selects it;
    clicking a header cell posts `FrameTable.HeaderSelected` (for sorting).
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "frame-table--header",
        "frame-table--header-sorted",
        "frame-table--cursor",
        "frame-table--empty",
        "frame-table--bar",
    }
    """
    | Class | Description |
    | :- | :- |
    | `frame-table--header` | The fixed header line. |
    | `frame-table--header-sorted` | The header cell of the sorted column (on top of the header). |
    | `frame-table--cursor` | The row under the cursor. |
    | `frame-table--empty` | The "no rows match" line of an empty frame. |
    | `frame-table--bar` | The inline bar of `bar` columns. |
    """

    DEFAULT_CSS = """
    FrameTable {
        background: $surface;
        color: $foreground;
        height: 1fr;

        & > .frame-table--header {
            text-style: bold;
            background: $panel;
            color: $foreground;
        }
        & > .frame-table--header-sorted {
            text-style: bold;
            color: $accent;
        }
        & > .frame-table--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        &:focus > .frame-table--cursor {
            background: $block-cursor-background;
            color: $block-cursor-foreground;
            text-style: $block-cursor-text-style;
        }
        & > .frame-table--empty {
            color: $text-muted;
        }
        & > .frame-table--bar {
            color: $primary;
        }
        &:ansi > .frame-table--header {
            background: ansi_bright_blue;
            color: ansi_default;
        }
    }
    """

    class _RowMessage(Message):
        def __init__(self, table: FrameTable, index: int, row: dict[str, Any]) -> None:
            super().__init__()
            self.table = table
            """The table that posted it."""
            self.index = index
            """Position of the row in the table's current frame."""
            self.row = row
            """The whole frame row (all its columns) as a dict."""

        @property
        def control(self) -> FrameTable:
            return self.table

    class RowHighlighted(_RowMessage):
        """The cursor moved to another row (or the rows changed under it).

        Only the latest one matters: a newer one waiting in the queue replaces it.
        """

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, FrameTable.RowHighlighted) and message.table is self.table

    class RowSelected(_RowMessage):
        """Enter (or a double click) on a row."""

    class HeaderSelected(Message):
        """A header cell was clicked (the app decides how to sort)."""

        def __init__(self, table: FrameTable, key: str) -> None:
            super().__init__()
            self.table = table
            self.key = key
            """`Column.key` of the clicked header cell."""

        @property
        def control(self) -> FrameTable:
            return self.table

    cursor: reactive[int] = reactive(0, repaint=False, init=False)
    """Position of the highlighted row in the current frame."""

    def __init__(
        self,
        frame: pl.DataFrame | None = None,
        columns: Sequence[Column] = (),
        *,
        sort: tuple[str, bool] | None = None,
        cell_styles: dict[str, str] | None = None,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
        disabled: bool = False,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes, disabled=disabled)
        self._frame: pl.DataFrame = pl.DataFrame()
        self._order: pl.Series | None = None  # positions into _frame, in display order
        self._shown: pl.DataFrame | None = None  # _frame in display order, built on demand
        self._view: pl.DataFrame = pl.DataFrame()  # only the columns drawn or used for styles
        self._columns: tuple[Column, ...] = ()
        self._all_shown: list[Shown] = []
        self._display: list[Shown] = []
        self._needed: dict[str, int] = {}
        self._room = -1
        self._sort: tuple[str, bool] | None = None
        self._row_count = 0
        self._line_width = 1
        self._column_starts: list[int] = []
        self._value_positions: list[int] = []
        self._style_positions: list[int | None] = []
        self._bar_widths: list[int] = []
        self._cell_styles: dict[str, str] = {}
        self._parsed_cell_styles: dict[Any, Style] = {}
        self._window_start = 0
        self._window_rows: list[tuple[Any, ...]] = []
        self._window_loads = 0  # number of frame slices taken (for tests and profiling)
        self._line_cache: LRUCache[tuple[int, bool], Strip] = LRUCache(1024)
        self._header_strip: Strip | None = None
        self._table_styles: _Styles | None = None
        if cell_styles:
            self.cell_styles = cell_styles
        if frame is not None:
            self.set_data(frame, columns, sort=sort)

    # ------------------------------------------------------------------ public API

    @property
    def frame(self) -> pl.DataFrame:
        """The frame shown, in display order (gathered on first use when an order was given)."""
        if self._order is None:
            return self._frame
        if self._shown is None:
            self._shown = self._frame[self._order]
        return self._shown

    def _row(self, index: int) -> dict[str, Any]:
        position = index if self._order is None else int(self._order[index])
        return self._frame.row(position, named=True)

    @property
    def columns(self) -> tuple[Column, ...]:
        """The columns shown, left to right."""
        return self._columns

    @property
    def sort(self) -> tuple[str, bool] | None:
        """`(key, descending)` of the column marked as sorted, if any."""
        return self._sort

    @property
    def row_count(self) -> int:
        """Number of rows in the current frame."""
        return self._row_count

    @property
    def current_row(self) -> dict[str, Any] | None:
        """The row under the cursor as a dict of all frame columns (None if the frame is empty)."""
        if not self._row_count:
            return None
        return self._row(self.cursor)

    @property
    def cell_styles(self) -> dict[str, str]:
        """Value of a `Column.style_key` column -> Rich style string for that row's cell.

        Assign a new dict to change it (the strings are parsed, and checked, on assignment).
        """
        return dict(self._cell_styles)

    @cell_styles.setter
    def cell_styles(self, styles: dict[str, str]) -> None:
        self._parsed_cell_styles = {value: Style.parse(style) for value, style in styles.items()}
        self._cell_styles = dict(styles)
        self._line_cache.clear()
        self.refresh()

    def set_data(
        self,
        frame: pl.DataFrame,
        columns: Sequence[Column],
        *,
        sort: tuple[str, bool] | None = None,
        keep_key: str | None = "row",
        order: pl.Series | None = None,
    ) -> None:
        """Show `frame` with `columns`.

        Args:
            frame: The rows, already filtered and sorted by the caller, or in any order when
                `order` is given.
            order: Positions into `frame` to show, in display order: sorting or filtering 2M
                rows then costs one integer column, not a copy of every column.
            columns: What to show, left to right; every `key` and `style_key` must be a column of `frame`.
            sort: `(key, descending)` of the column to mark with ▲ (ascending) or ▼ (descending).
            keep_key: A column identifying rows: if the row under the cursor has a value in it that
                is also in the new frame, the cursor stays on that row (at the same height on
                screen); otherwise it goes to row 0.
        """
        columns = tuple(columns)
        needed: list[str] = []
        for column in columns:
            for key in (column.key, column.style_key):
                if key is not None and key not in needed:
                    needed.append(key)
        missing = [key for key in needed if key not in frame.columns]
        if missing:
            names = ", ".join(map(repr, missing))
            raise ValueError(f"FrameTable.set_data: the frame has no column(s) {names}")

        old_value: Any = _MISSING
        old_screen_offset: int | None = None
        if keep_key is not None and self._row_count and keep_key in self._frame.columns:
            old_value = self._row(self.cursor)[keep_key]
            old_screen_offset = self.cursor - round(self.scroll_y)

        self._frame = frame
        self._order = order
        self._shown = None
        self._view = frame.select(needed)
        self._columns = columns
        self._sort = sort
        self._row_count = frame.height if order is None else order.len()
        self._needed = {key: index for index, key in enumerate(needed)}
        numeric = [c.key for c in columns if c.numeric]
        extremes: dict[str, tuple[Any, Any]] = {}
        if numeric and frame.height:
            row = frame.select(
                *(pl.col(k).min().alias(f"{k}\0min") for k in numeric),
                *(pl.col(k).max().alias(f"{k}\0max") for k in numeric),
            ).row(0)
            extremes = {k: (row[i], row[i + len(numeric)]) for i, k in enumerate(numeric)}
        self._all_shown = [shown_column(c, extremes.get(c.key, ())) for c in columns]
        self._room = -1
        self._arrange()
        self._clear_caches()

        index = 0
        kept = False
        if old_value is not _MISSING and keep_key in frame.columns:
            found = self._find(keep_key, old_value)
            if found is not None:
                index, kept = found, True

        self._set_virtual_size()
        self.set_reactive(FrameTable.cursor, index)
        self._scroll_cursor_into_view(screen_offset=old_screen_offset if kept else None, top=not kept)
        self.refresh()
        self._post_highlighted()

    def _set_virtual_size(self) -> None:
        height = self._row_count + 1 if self._row_count else 2
        width = self._line_width if self._row_count else max(self._line_width, cell_len(EMPTY_TEXT) + 2)
        self.virtual_size = Size(width, height)

    def _room_now(self) -> int:
        """Cells a line has on screen (0 before layout): the width less the vertical scrollbar."""
        width = self.size.width if self.is_attached else 0
        if width <= 0:
            return 0
        if self._row_count + 1 > self.size.height:
            width -= self.styles.scrollbar_size_vertical
        return max(width, 1)

    def _arrange(self) -> bool:
        """Lay the columns out for the current width; False if nothing changed."""
        room = self._room_now()
        if room == self._room:
            return False
        self._room = room
        self._display = arrange(self._all_shown, room, self._sort[0] if self._sort else None)
        positions = self._needed
        self._value_positions = [positions[d.column.key] for d in self._display]
        self._style_positions = [
            None if d.column.style_key is None else positions[d.column.style_key] for d in self._display
        ]
        self._bar_widths = [_bar_width(d.width) if d.column.bar else 0 for d in self._display]
        starts = []
        x = 1
        for d in self._display:
            starts.append(x)
            x += d.width + 1
        self._column_starts = starts
        self._line_width = x
        return True

    @property
    def shown_columns(self) -> tuple[Shown, ...]:
        """The columns in drawing order, as wide as drawn, with the unit of their numbers."""
        return tuple(self._display)

    def visible_titles(self) -> list[str]:
        """Header titles of the columns wholly on screen at the current horizontal scroll."""
        left = round(self.scroll_x)
        right = left + (self._room_now() or self._line_width)
        return [d.title for d, x in zip(self._display, self._column_starts) if x >= left and x + d.width <= right]

    def move_to(self, index: int) -> None:
        """Put the cursor on row `index` (clamped to the frame) and scroll it into view."""
        previous = self.cursor
        self.cursor = index
        if self.cursor == previous:
            self._scroll_cursor_into_view()

    def move_to_key(self, value: Any, key: str = "row") -> bool:
        """Move the cursor to the first row whose `key` column equals `value`.

        Returns:
            False (and the cursor stays) if the frame has no such column or no such row.
        """
        if key not in self._frame.columns:
            return False
        index = self._find(key, value)
        if index is None:
            return False
        self.move_to(index)
        return True

    # ------------------------------------------------------------------ cursor

    def validate_cursor(self, value: int) -> int:
        return min(max(int(value), 0), max(self._row_count - 1, 0))

    def watch_cursor(self, previous: int, current: int) -> None:
        self.refresh_line(previous + 1)
        self.refresh_line(current + 1)
        self._scroll_cursor_into_view()
        self._post_highlighted()

    def refresh_line(self, y: int) -> None:
        if self.is_attached:
            super().refresh_line(y)

    def _page_rows(self) -> int:
        """Data rows that fit on screen under the header (0 before layout)."""
        return max(self.scrollable_content_region.height - 1, 0)

    def _scroll_cursor_into_view(self, *, screen_offset: int | None = None, top: bool = False) -> None:
        """Scroll vertically so the cursor row is on screen.

        Args:
            screen_offset: Put the cursor this many rows below the first shown row, if possible.
            top: Scroll to the very top if the cursor then is on screen (used for new data).
        """
        if not self.is_attached:
            return
        page = self._page_rows()
        if page <= 0:
            if top:
                self.scroll_to(y=0, animate=False, force=True)
            return
        cursor = self.cursor
        first = round(self.scroll_y)
        if screen_offset is not None:
            target = cursor - min(max(screen_offset, 0), page - 1)
        elif top and cursor < page:
            target = 0
        elif cursor < first:
            target = cursor
        elif cursor >= first + page:
            target = cursor - page + 1
        else:
            return
        self.scroll_to(y=target, animate=False, force=True)

    def _post_highlighted(self) -> None:
        # Before the table is in the DOM (e.g. data given to the constructor) `_on_mount` posts it.
        if self._row_count and self.is_attached:
            cursor = self.cursor
            self.post_message(self.RowHighlighted(self, cursor, self._row(cursor)))

    def _find(self, key: str, value: Any) -> int | None:
        """First position whose `key` column equals `value` (vectorised), or None."""
        series = self._frame.get_column(key)
        try:
            mask = series.is_null() if value is None else series == value
            if self._order is not None:
                mask = mask.gather(self._order)
            hits = mask.arg_true()
        except (pl.exceptions.PolarsError, TypeError, ValueError):
            return None
        return int(hits[0]) if len(hits) else None

    # ------------------------------------------------------------------ actions

    def action_cursor_up(self) -> None:
        self.move_to(self.cursor - 1)

    def action_cursor_down(self) -> None:
        self.move_to(self.cursor + 1)

    def action_cursor_page_up(self) -> None:
        page = max(self._page_rows(), 1)
        if self.is_attached:
            self.scroll_to(y=self.scroll_y - page, animate=False, force=True)
        self.move_to(self.cursor - page)

    def action_cursor_page_down(self) -> None:
        page = max(self._page_rows(), 1)
        if self.is_attached:
            self.scroll_to(y=self.scroll_y + page, animate=False, force=True)
        self.move_to(self.cursor + page)

    def action_cursor_first(self) -> None:
        self.move_to(0)

    def action_cursor_last(self) -> None:
        self.move_to(self._row_count - 1)

    def action_select_cursor(self) -> None:
        if self._row_count:
            cursor = self.cursor
            self.post_message(self.RowSelected(self, cursor, self._row(cursor)))

    # ------------------------------------------------------------------ mouse

    def column_at(self, x: int) -> Column | None:
        """The column drawn at virtual x coordinate `x` (a separator belongs to the column on its left)."""
        index = bisect.bisect_right(self._column_starts, x) - 1
        if index < 0 or x >= self._line_width - 1:
            return None
        return self._display[index].column

    async def _on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        scroll_x, scroll_y = self.scroll_offset
        if offset.y == 0:
            column = self.column_at(offset.x + scroll_x)
            if column is not None:
                self.post_message(self.HeaderSelected(self, column.key))
            return
        index = scroll_y + offset.y - 1
        if 0 <= index < self._row_count:
            self.move_to(index)
            if event.chain == 2:
                self.action_select_cursor()

    def _on_mount(self, event: events.Mount) -> None:
        self._post_highlighted()

    def on_resize(self, event: events.Resize) -> None:
        if self._arrange():
            self._clear_caches(keep_window=True)
            self._set_virtual_size()
            self.refresh()
        self._scroll_cursor_into_view()

    # ------------------------------------------------------------------ rendering

    def notify_style_update(self) -> None:
        # Focus, hover and theme changes restyle the cursor and header: drop the drawn lines.
        super().notify_style_update()
        self._clear_caches(keep_window=True)
        self.refresh()

    def _clear_caches(self, keep_window: bool = False) -> None:
        self._line_cache.clear()
        self._header_strip = None
        self._table_styles = None
        if not keep_window:
            self._window_rows = []
            self._window_start = 0

    def _get_table_styles(self) -> _Styles:
        if self._table_styles is None:
            try:
                if not self.is_attached:
                    raise KeyError("not attached")
                base = self.rich_style
                get = self.get_component_rich_style
                header = base + get("frame-table--header")
                self._table_styles = _Styles(
                    base=base,
                    header=header,
                    header_sorted=header + get("frame-table--header-sorted", partial=True),
                    cursor=base + get("frame-table--cursor"),
                    empty=base + get("frame-table--empty"),
                    bar=get("frame-table--bar", partial=True),
                )
            except KeyError:
                # Outside an app (or before the CSS is applied): plain, still distinguishable.
                self._table_styles = _Styles(
                    base=Style(),
                    header=Style(bold=True),
                    header_sorted=Style(bold=True, underline=True),
                    cursor=Style(reverse=True),
                    empty=Style(dim=True),
                    bar=Style(),
                )
        return self._table_styles

    def _row_values(self, index: int) -> tuple[Any, ...]:
        """Row `index` of the drawn columns, from the cached window (sliced on a miss)."""
        offset = index - self._window_start
        if 0 <= offset < len(self._window_rows):
            return self._window_rows[offset]
        page = self._page_rows()
        if page > 0:
            first = round(self.scroll_y)
            if not first <= index < first + page:
                first = index
            start = max(first - _OVERSCAN_PAGES * page, 0)
            count = (2 * _OVERSCAN_PAGES + 1) * page
        else:
            start, count = max(index - _UNSIZED_WINDOW // 2, 0), _UNSIZED_WINDOW
        self._window_start = start
        if self._order is None:
            self._window_rows = self._view.slice(start, count).rows()
        else:
            self._window_rows = self._view[self._order.slice(start, count)].rows()
        self._window_loads += 1
        return self._window_rows[index - start]

    def _render_header(self) -> Strip:
        styles = self._get_table_styles()
        sort_key, descending = self._sort if self._sort else (None, False)
        arrow = SORT_DESCENDING if descending else SORT_ASCENDING
        # The arrow takes the separator after the title when the title fills its cell, so a
        # sorted header is never cut.
        cells: list[tuple[str, Style]] = [(" ", styles.header)]
        for d in self._display:
            sorted_here = d.column.key == sort_key
            style = styles.header_sorted if sorted_here else styles.header
            title = d.title
            if sorted_here:
                if cell_len(title) + 2 <= d.width:
                    cells.append((fit(f"{title} {arrow}", d.width, d.column.numeric), style))
                    cells.append((" ", styles.header))
                else:
                    cells.append((fit(title, d.width, d.column.numeric), style))
                    cells.append((arrow, style))
            else:
                cells.append((fit(title, d.width, d.column.numeric), style))
                cells.append((" ", styles.header))
        return Strip([Segment(text, style) for text, style in cells], self._line_width)

    def _render_row(self, index: int, is_cursor: bool) -> Strip:
        styles = self._get_table_styles()
        values = self._row_values(index)
        row_style = styles.cursor if is_cursor else styles.base
        space = Segment(" ", row_style)
        segments = [space]
        cell_styles = self._parsed_cell_styles
        for shown, position, style_position, bar_width in zip(
            self._display, self._value_positions, self._style_positions, self._bar_widths
        ):
            column, width = shown.column, shown.width
            value = values[position]
            style = row_style
            if style_position is not None:
                extra = cell_styles.get(values[style_position])
                if extra is not None:
                    style = row_style + extra
            text = format_value(value, column, shown.scale)
            if bar_width:
                segments.append(Segment(fit(text, width - bar_width - 1, True) + " ", style))
                segments.append(Segment(_bar_text(value, bar_width), row_style + styles.bar))
            else:
                segments.append(Segment(fit(text, width, column.numeric), style))
            segments.append(space)
        return Strip(segments, self._line_width)

    def _render_full_line(self, y: int) -> tuple[Strip, Style]:
        """Line `y` of the screen (0 is the header) at full virtual width, and its fill style."""
        if y == 0:
            if self._header_strip is None:
                self._header_strip = self._render_header()
            return self._header_strip, self._get_table_styles().header
        styles = self._get_table_styles()
        if not self._row_count:
            if y == 1:
                text = f" {EMPTY_TEXT}"
                return Strip([Segment(text, styles.empty)], cell_len(text)), styles.base
            return Strip.blank(0), styles.base
        index = round(self.scroll_y) + y - 1
        if index >= self._row_count:
            return Strip.blank(0), styles.base
        is_cursor = index == self.cursor
        key = (index, is_cursor)
        strip = self._line_cache.get(key)
        if strip is None:
            strip = self._render_row(index, is_cursor)
            self._line_cache[key] = strip
        return strip, styles.cursor if is_cursor else styles.base

    def render_line(self, y: int) -> Strip:
        """Screen line `y`: the header for 0, else the data row at `scroll_y + y - 1`.

        Outside an app (no size yet) the line comes back uncropped, at its full width.
        """
        strip, fill = self._render_full_line(y)
        width = self.size.width
        if width <= 0:
            return strip
        scroll_x = round(self.scroll_x)
        return strip.crop_extend(scroll_x, scroll_x + width, fill)


_MISSING = object()
