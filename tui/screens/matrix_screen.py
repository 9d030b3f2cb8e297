"""The communication matrix of a cluster: a rank x rank grid of its links, slow links marked.

Shown from the Ranks view with `m`; Esc goes back to it, `p` shows the parallel view in its
place. The grid (widgets/link_matrix.py) is `ClusterSummary.links`, every rank's links: a
row is a link's source, a column its destination, as the communication files number them.
`v` cycles what a cell shows (bandwidth GB/s, time us, size MB), `t` the transport filter
(all, then each transport of the links: HCCS, RDMA, PCIE, ...). A slow link of the summary
is marked `!` and drawn reversed. The line under the grid says the cell under the cursor in
full: its link, transports, size, time, bandwidth, the ranks that recorded it, slow or not.
"""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Static

from npuscope.analysis.cluster import ClusterSummary

from ..widgets.link_matrix import (
    ALL,
    NO_LINK,
    SLOW_MARK,
    VALUE_NAMES,
    VALUES,
    Cell,
    LinkMatrix,
    axis,
    link_cells,
    transports,
)

PARALLEL = "parallel"
"""What the view is dismissed with when `p` asks for the parallel view."""


def cell_line(src: int | None, dst: int | None, cell: Cell | None, transport: str) -> Text:
    """The status line of the cell under the cursor."""
    if src is None or dst is None:
        return Text("no links", style="dim")
    if cell is None:
        where = "" if transport == ALL else f" on {transport}"
        return Text(f"{src} -> {dst}: no link{where}", style="dim")
    text = Text()
    text.append(f"{src} -> {dst}", style="bold")
    text.append(f" · {'/'.join(cell.transports)}")
    bw = cell.bandwidth_gbps
    text.append(f" · {bw:,.2f} GB/s" if bw is not None else " · bandwidth -")
    text.append(f" · {cell.time_us:,.1f} us · {cell.size_mb:,.2f} MB")
    who = ", ".join(cell.cards)
    text.append(f" · recorded by rank{'s' if len(cell.cards) != 1 else ''} {who}", style="dim")
    if cell.slow:
        text.append(" · slow link", style="bold yellow")
    return text


class MatrixScreen(Screen[str | None]):
    """The cluster's links as a src x dst grid; Esc goes back to the Ranks view."""

    BINDINGS = [
        Binding("escape", "back", "Back to the ranks"),
        Binding("v", "next_value", "Cell: GB/s, us, MB"),
        Binding("t", "next_transport", "Transport filter"),
        Binding("p", "parallel", "Parallel view"),
    ]
    """
    | key | action |
    |---|---|
    | `Esc` | back to the Ranks view |
    | `v` | what a cell shows: bandwidth GB/s, time us, size MB (cycles) |
    | `t` | the transport filter: all, HCCS, RDMA, PCIE, ... (cycles) |
    | `p` | the parallel view in place of this one |
    | `←` `→` `↑` `↓` | move the cursor (the view follows; the headers stay) |
    | `PgUp` `PgDn` / `ctrl+PgUp` `ctrl+PgDn` | a page of rows / of columns |
    | `Home` `End` | the first / last column |
    """

    def __init__(self, summary: ClusterSummary) -> None:
        super().__init__()
        self.summary = summary
        self.transports = (ALL, *transports(summary.links))
        self.transport = ALL
        self.value = VALUES[0]
        self.axis = axis(summary.links)

    def compose(self) -> ComposeResult:
        yield Static(self._header(), id="matrix-header")
        yield Static("", id="matrix-legend")
        yield LinkMatrix(id="link-matrix")
        yield Static("", id="matrix-status")
        yield Footer()

    def on_mount(self) -> None:
        self.refresh_matrix()
        self.matrix.focus()

    @property
    def matrix(self) -> LinkMatrix:
        return self.query_one(LinkMatrix)

    def _header(self) -> Text:
        s = self.summary
        links = s.links.height
        recorded = s.links["card"].n_unique() if links else 0
        text = Text()
        text.append(" links ", style="bold reverse")
        text.append(f"  {s.path.name} · {links:,} link records from {recorded:,} of {len(s.ranks):,} ranks")
        slow = len(s.slow_links)
        text.append(f" · {slow:,} slow", style="bold yellow" if slow else "")
        return text

    def legend(self) -> Text:
        text = Text()
        text.append("src row × dst column · cell ")
        text.append(VALUE_NAMES[self.value], style="bold")
        text.append(" · transport ")
        text.append(self.transport, style="bold")
        text.append(f" · {SLOW_MARK} slow link · {NO_LINK} no link")
        return text

    def refresh_matrix(self) -> None:
        cells = link_cells(self.summary.links, self.transport, self.summary.slow_links)
        if not self.axis:
            empty = "no links: the ranks' files hold no communication matrix (communication_matrix.json, CommAnalyzerMatrix)"
        else:
            empty = f"no {self.transport} links"
        self.matrix.set_cells(self.axis, cells, self.value, empty)
        self.query_one("#matrix-legend", Static).update(self.legend())

    @on(LinkMatrix.CursorMoved)
    def _cursor(self, message: LinkMatrix.CursorMoved) -> None:
        self.query_one("#matrix-status", Static).update(
            cell_line(message.src, message.dst, message.cell, self.transport)
        )

    def action_next_value(self) -> None:
        self.value = VALUES[(VALUES.index(self.value) + 1) % len(VALUES)]
        self.refresh_matrix()

    def action_next_transport(self) -> None:
        self.transport = self.transports[(self.transports.index(self.transport) + 1) % len(self.transports)]
        self.refresh_matrix()

    def action_back(self) -> None:
        self.dismiss(None)

    def action_parallel(self) -> None:
        self.dismiss(PARALLEL)  # the Ranks view shows the parallel view in its place
