"""Every key, gathered from the bindings themselves so the list cannot drift from the code."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence

from rich.cells import cell_len
from rich.markup import escape
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import ScrollableContainer
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from npuscope.analysis.query import QUERY_HELP

from ..ranks_state import RANKS_QUERY_HELP
from ..widgets.cards_pane import CardsPane
from ..widgets.communication_pane import CommunicationPane
from ..widgets.frame_table import FrameTable
from ..widgets.mini_timeline import MiniTimeline
from .capture_screen import CaptureScreen
from .experiment_screen import ExperimentScreen
from .matrix_screen import MatrixScreen
from .parallel_screen import ParallelScreen
from .text_screen import NARROW_WIDTH

KEY_NAMES = {
    "left_square_bracket": "[",
    "right_square_bracket": "]",
    "slash": "/",
    "question_mark": "?",
    "escape": "Esc",
    "enter": "Enter",
    "pageup": "PgUp",
    "pagedown": "PgDn",
    "plus": "+",
    "minus": "-",
    "equals_sign": "=",
    "less_than_sign": "<",
    "greater_than_sign": ">",
    "comma": ",",
    "full_stop": ".",
    "left": "←",
    "right": "→",
    "up": "↑",
    "down": "↓",
}


KeyRow = tuple[str, str, str]
"""(where, keys, what they do)"""


def key_rows(where: str, bindings: Iterable[Binding | tuple[str, ...]]) -> list[KeyRow]:
    rows = []
    for b in bindings:
        if isinstance(b, tuple):  # (key, action[, description]), as BINDINGS may list them
            b = Binding(b[0], b[1], b[2] if len(b) > 2 else "")
        keys = " ".join(KEY_NAMES.get(k.strip(), k.strip()) for k in b.key.split(","))
        rows.append((where, keys, b.description or b.action))
    return rows


def all_keys(
    app_bindings: Iterable[Binding | tuple[str, ...]],
    main_bindings: Iterable[Binding | tuple[str, ...]],
    ranks_bindings: Iterable[Binding | tuple[str, ...]] = (),
) -> list[KeyRow]:
    """Every key: the app's, the main screen's and the Ranks view's (as given), then each
    pane's and screen's."""
    rows = key_rows("everywhere", app_bindings)
    rows.append(("everywhere", "ctrl+p", "Command palette: every action"))
    rows.append(("everywhere", "Tab shift+Tab", "Move the focus: cards, table, timeline"))
    rows += key_rows("main", main_bindings)
    rows.append(("main", "", "(these work wherever the focus is, but in the filter bar)"))
    rows += key_rows("cards", CardsPane.BINDINGS)
    rows += key_rows("tables", FrameTable.BINDINGS)
    rows.append(("op statistics", "Enter", "Show that op type's tasks in the op summary"))
    rows.append(("training tabs", "/ d w t s r", "Filter and sort the visible tab's table (each tab its own)"))
    rows.append(("training tabs", "d / w", "Sort by its time / by its wait column (free, wait, max, total)"))
    rows.append(("steps", "↑ ↓", "Mark the step on its bar and on the timeline"))
    rows += key_rows("communication", CommunicationPane.BINDINGS)
    rows += key_rows("timeline", MiniTimeline.BINDINGS)
    rows += key_rows("ranks", ranks_bindings)
    if ranks_bindings:
        rows.append(("ranks", "↑ ↓", "Mark the rank on its bar; in the main screen [ ] open the previous / next rank"))
        rows += key_rows("parallel view", ParallelScreen.BINDINGS)
        rows.append(("parallel view", "↑ ↓ PgUp PgDn Home End", "Scroll"))
        rows += key_rows("comm matrix", MatrixScreen.BINDINGS)
        rows.append(("comm matrix", "← → ↑ ↓ PgUp PgDn Home End", "Move the cursor (the headers stay)"))
    rows += key_rows("capture", CaptureScreen.BINDINGS)
    rows += key_rows("experiment", ExperimentScreen.BINDINGS)
    rows.append(("capture", "Enter", "In the host field: fill in its remembered values; elsewhere: Start"))
    return rows


def keys_text(rows: Sequence[KeyRow], width: int | None = None) -> Text:
    """The rows as aligned lines, one per key; with `width`, a description longer than the
    room left wraps under itself (a hanging indent), so nothing runs past the edge."""
    head = ("where", "keys", "does")
    widths = [max(cell_len(r[i]) for r in (head, *rows)) for i in range(2)]
    indent = widths[0] + widths[1] + 4
    room = max(width - indent, 20) if width else None
    text = Text()
    text.append(f"{head[0]:<{widths[0]}}  {head[1]:<{widths[1]}}  {head[2]}\n", style="bold")
    for where, keys, does in rows:
        text.append(f"{where:<{widths[0]}}  ", style="dim")
        text.append(f"{keys:<{widths[1]}}  ", style="bold")
        lines = textwrap.wrap(does, room) if room and cell_len(does) > room else [does]
        text.append(("\n" + " " * indent).join(lines) + "\n")
    text.rstrip()
    return text


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close")]

    def __init__(self, rows: Sequence[KeyRow]) -> None:
        super().__init__()
        self.rows = rows

    def compose(self) -> ComposeResult:
        self.keys_table = keys_text(self.rows)
        with ScrollableContainer(id="help", classes="dialog"):
            yield Label("Keys", classes="dialog-title")
            yield Static(self.keys_table, id="help-keys")
            yield Label("Filter language", classes="section")
            yield Static(escape(QUERY_HELP), id="help-query")
            yield Label("Ranks filter (a cluster's Ranks view)", classes="section")
            yield Static(escape(RANKS_QUERY_HELP), id="help-ranks-query")
            yield Label("↑↓ ←→ scroll · Esc closes", classes="hint")

    def on_mount(self) -> None:
        self.query_one("#help").focus()

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(self.size.width < NARROW_WIDTH, "narrow")
        # The descriptions wrap to the page's width once it is known (its padding left out).
        width = self.query_one("#help-keys", Static).content_size.width
        if width:
            self.keys_table = keys_text(self.rows, width)
            self.query_one("#help-keys", Static).update(self.keys_table)
