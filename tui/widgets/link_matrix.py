"""`LinkMatrix`: the communication matrix of a cluster, a rank x rank grid of its links.

A row is a link's source, a column its destination, numbered as the ranks' communication
files number them (`ClusterSummary.links` src, dst: not always the global rank). A cell sums
every record of the link (each rank that recorded it, each communication group) over the
transport filter: its size (MB), its time (us) and its bandwidth, size over time (GB/s, as
the links view computes it); `value` picks which the cell shows. A link the cluster names
slow (`ClusterSummary.slow_links`, "src->dst transport") is marked with `!` before its value
and drawn reversed, so it reads without colour; no link is `·`.

Cells are 6 characters (the mark and a value of at most 5, "12.1", "8.8k", "1.2M"); the row
header (the source) and the column header (the destination) stay on screen while the grid
scrolls. A cursor moves with the arrows, PgUp / PgDn (a page of rows), Home / End (first /
last column) and the view follows it; the screen shows the cell under it in full.

Pure parts (`compact`, `link_cells`, `transports`, `axis`) work without an app.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import polars as pl
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

CELL = 6
ALL = "all"
VALUES = ("bandwidth_gbps", "time_us", "size_mb")
VALUE_NAMES = {"bandwidth_gbps": "GB/s", "time_us": "us", "size_mb": "MB"}
SLOW_MARK = "!"
NO_LINK = "·"
_TRANSPORT_ORDER = ("HCCS", "RDMA", "PCIE", "SIO", "SDMA", "LOCAL")


def compact(value: float) -> str:
    """A value in at most 5 characters: <0.01, 9.67, 12.1, 236, 8827, 11.1k, 111k, 1.11M (a
    negative value, which no link has, takes one more for its sign)."""
    if value < 0:
        return "-" + compact(-value)
    if 0 < value < 0.005:
        return "<0.01"
    for unit, scale in (("", 1.0), ("k", 1e3), ("M", 1e6), ("G", 1e9), ("T", 1e12)):
        x = value / scale
        if x < 9.995:
            return f"{x:.2f}{unit}"
        if x < 99.95:
            return f"{x:.1f}{unit}"
        if x < (9999.5 if not unit else 999.5):
            return f"{x:.0f}{unit}"
    return f"{value:.0e}".replace("+", "")


@dataclass(frozen=True)
class Cell:
    """One src -> dst link over the transport filter."""

    src: int
    dst: int
    size_mb: float
    time_us: float
    transports: tuple[str, ...]
    cards: tuple[str, ...]  # the ranks whose files recorded it
    slow: bool

    @property
    def bandwidth_gbps(self) -> float | None:
        return self.size_mb / self.time_us * 1000.0 if self.time_us > 0 else None

    def value(self, key: str) -> float | None:
        if key == "bandwidth_gbps":
            return self.bandwidth_gbps
        return self.size_mb if key == "size_mb" else self.time_us


def transports(links: pl.DataFrame) -> tuple[str, ...]:
    """The transports of the links, the usual ones first (HCCS, RDMA, PCIE, SIO, ...)."""
    seen = {t for t in links["transport"].drop_nulls().unique().to_list()} if links.height else set()
    known = [t for t in _TRANSPORT_ORDER if t in seen]
    return (*known, *sorted(seen - set(known)))


def axis(links: pl.DataFrame) -> tuple[int, ...]:
    """The numbers on both axes: every src and dst of the links, in order (the same for every
    transport filter, so a cell keeps its place)."""
    if links.height == 0:
        return ()
    values = pl.concat([links["src"], links["dst"]]).drop_nulls().unique().sort()
    return tuple(int(v) for v in values.to_list())


def _slow_set(slow_links: Sequence[str]) -> set[tuple[int, int, str]]:
    out = set()
    for name in slow_links:
        pair, _, transport = name.partition(" ")
        src, _, dst = pair.partition("->")
        try:
            out.add((int(src), int(dst), transport))
        except ValueError:
            continue
    return out


def link_cells(
    links: pl.DataFrame, transport: str = ALL, slow_links: Sequence[str] = ()
) -> dict[tuple[int, int], Cell]:
    """(src, dst) -> its cell over `transport` (ALL: every transport)."""
    rows = links.filter(pl.col("src").is_not_null() & pl.col("dst").is_not_null())
    if transport != ALL:
        rows = rows.filter(pl.col("transport") == transport)
    if rows.height == 0:
        return {}
    slow = _slow_set(slow_links)
    per = (
        rows.group_by("src", "dst")
        .agg(
            pl.col("size_mb").fill_null(0.0).sum(),
            pl.col("time_us").fill_null(0.0).sum(),
            pl.col("transport").drop_nulls().unique().sort().alias("transports"),
            pl.col("card").drop_nulls().unique().sort().alias("cards"),
        )
        .sort("src", "dst")
    )
    out = {}
    for r in per.iter_rows(named=True):
        key = (int(r["src"]), int(r["dst"]))
        ts = tuple(r["transports"])
        out[key] = Cell(
            src=key[0],
            dst=key[1],
            size_mb=float(r["size_mb"]),
            time_us=float(r["time_us"]),
            transports=ts,
            cards=tuple(sorted(r["cards"], key=lambda c: (not c.isdigit(), int(c) if c.isdigit() else 0, c))),
            slow=any((key[0], key[1], t) in slow for t in ts),
        )
    return out


class LinkMatrix(ScrollView, can_focus=True):
    """The rank x rank grid, headers fixed, a cell cursor."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "move(0,-1)", "Up", show=False),
        Binding("down,j", "move(0,1)", "Down", show=False),
        Binding("left,h", "move(-1,0)", "Left", show=False),
        Binding("right,l", "move(1,0)", "Right", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown,space", "page(1)", "Page down", show=False),
        Binding("ctrl+pageup", "page_columns(-1)", "Page left", show=False),
        Binding("ctrl+pagedown", "page_columns(1)", "Page right", show=False),
        Binding("home", "edge(-1)", "First column", show=False),
        Binding("end", "edge(1)", "Last column", show=False),
    ]

    DEFAULT_CSS = """
    LinkMatrix {
        background: $surface;
        overflow-x: auto;
        overflow-y: auto;
        scrollbar-size-vertical: 1;
        scrollbar-size-horizontal: 1;
    }
    LinkMatrix > .link-matrix--header {
        text-style: bold;
        background: $panel;
    }
    LinkMatrix > .link-matrix--empty {
        color: $text-muted;
    }
    LinkMatrix > .link-matrix--local {
        color: $text-muted;
    }
    LinkMatrix > .link-matrix--slow {
        color: $warning;
        text-style: bold reverse;
    }
    LinkMatrix > .link-matrix--cursor {
        background: $accent;
        color: $text;
        text-style: bold;
    }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "link-matrix--header",
        "link-matrix--empty",
        "link-matrix--local",
        "link-matrix--slow",
        "link-matrix--cursor",
    }

    class CursorMoved(Message):
        """The cursor is on (src, dst) (its cell, None: no link there)."""

        def __init__(self, src: int | None, dst: int | None, cell: Cell | None) -> None:
            super().__init__()
            self.src, self.dst, self.cell = src, dst, cell

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.axis: tuple[int, ...] = ()
        self.cells: dict[tuple[int, int], Cell] = {}
        self.value = VALUES[0]
        self.row = 0
        self.col = 0
        self.empty_text = "no links"

    # ------------------------------------------------------------ data
    def set_cells(self, axis: tuple[int, ...], cells: dict[tuple[int, int], Cell], value: str, empty: str) -> None:
        self.axis, self.cells, self.value, self.empty_text = axis, cells, value, empty
        self.row = min(self.row, max(len(axis) - 1, 0))
        self.col = min(self.col, max(len(axis) - 1, 0))
        self._size_grid()
        self.refresh()
        self._moved()

    def _size_grid(self) -> None:
        """The virtual size: the headers and every cell, plus the room a part of a cell would
        take at the right edge, so the last scroll position shows whole cells too."""
        room = max((self.scrollable_content_region.width or self.size.width) - self.header_width, 0)
        slack = room % CELL if room >= CELL else 0
        self.virtual_size = Size(self.header_width + CELL * len(self.axis) + slack, len(self.axis) + 1)

    def on_resize(self) -> None:
        self._size_grid()

    @property
    def header_width(self) -> int:
        widest = max((len(str(a)) for a in self.axis), default=1)
        return max(widest + 3, len("src\\dst") + 2)

    @property
    def current(self) -> tuple[int, int] | None:
        if not self.axis:
            return None
        return self.axis[self.row], self.axis[self.col]

    def _moved(self) -> None:
        at = self.current
        cell = self.cells.get(at) if at is not None else None
        self.post_message(self.CursorMoved(at[0] if at else None, at[1] if at else None, cell))

    # ------------------------------------------------------------ cursor
    def _data_room(self) -> tuple[int, int]:
        """(columns, rows) of cells on screen."""
        region = self.scrollable_content_region
        return max((region.width - self.header_width) // CELL, 1), max(region.height - 1, 1)

    def _follow(self) -> None:
        cols, rows = self._data_room()
        first_col = round(self.scroll_x) // CELL
        first_row = round(self.scroll_y)
        if self.col < first_col:
            first_col = self.col
        elif self.col >= first_col + cols:
            first_col = self.col - cols + 1
        if self.row < first_row:
            first_row = self.row
        elif self.row >= first_row + rows:
            first_row = self.row - rows + 1
        self.scroll_to(x=first_col * CELL, y=first_row, animate=False)
        self.refresh()
        self._moved()

    def move_to(self, row: int, col: int) -> None:
        if not self.axis:
            return
        self.row = min(max(row, 0), len(self.axis) - 1)
        self.col = min(max(col, 0), len(self.axis) - 1)
        self._follow()

    def action_move(self, dx: int, dy: int) -> None:
        self.move_to(self.row + dy, self.col + dx)

    def action_page(self, step: int) -> None:
        self.move_to(self.row + step * self._data_room()[1], self.col)

    def action_page_columns(self, step: int) -> None:
        self.move_to(self.row, self.col + step * self._data_room()[0])

    def action_edge(self, step: int) -> None:
        self.move_to(self.row, 0 if step < 0 else len(self.axis) - 1)

    # ------------------------------------------------------------ drawing
    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(f"link-matrix--{name}", default=Style())

    def cell_text(self, src: int, dst: int) -> str:
        """The cell as drawn: the slow mark (or a space) and the value in 5 characters."""
        cell = self.cells.get((src, dst))
        if cell is None:
            return f" {NO_LINK:>5}"
        value = cell.value(self.value)
        text = compact(value) if value is not None else "-"
        return f"{SLOW_MARK if cell.slow else ' '}{text:>5}"

    def _row_segments(self, index: int) -> list[Segment]:
        src = self.axis[index]
        out = []
        for j, dst in enumerate(self.axis):
            cell = self.cells.get((src, dst))
            style = Style()
            if cell is None:
                style = self._style("empty")
            elif cell.slow:
                style = self._style("slow")
            elif src == dst:
                style = self._style("local")
            if index == self.row and j == self.col and self.has_focus:
                style = style + self._style("cursor")
            elif index == self.row and j == self.col:
                style = style + Style(reverse=True)
            out.append(Segment(self.cell_text(src, dst), style))
        return out

    def render_line(self, y: int) -> Strip:
        region = self.scrollable_content_region
        width = region.width or self.size.width
        head_w = self.header_width
        header = self._style("header")
        if not self.axis:
            return Strip([Segment(f" {self.empty_text}" if y == 0 else "", self._style("empty"))]).crop_extend(
                0, width, None
            )
        x0 = round(self.scroll_x) // CELL * CELL  # whole cells, however it was scrolled
        room = max(width - head_w, 0) // CELL * CELL
        if y == 0:
            corner = Segment("src\\dst".rjust(head_w - 2) + " │", header)
            titles = [Segment(f" {str(d):>5}", header) for d in self.axis]
            data = Strip(titles).crop_extend(x0, x0 + room, header)
            return Strip([corner, *data]).crop_extend(0, width, None)
        index = y - 1 + round(self.scroll_y)
        if not 0 <= index < len(self.axis):
            return Strip.blank(width)
        label_style = header + Style(bold=True) if index == self.row else header
        label = Segment(f"{self.axis[index]:>{head_w - 2}} │", label_style)
        data = Strip(self._row_segments(index)).crop_extend(x0, x0 + room, None)
        return Strip([label, *data]).crop_extend(0, width, None)

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    def row_text(self, index: int) -> str:
        """Row `index` of the grid as plain text, every column (for the tests and copying)."""
        return "".join(self.cell_text(self.axis[index], dst) for dst in self.axis)
