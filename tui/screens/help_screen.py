"""Every key, gathered from the bindings themselves so the list cannot drift from the code."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.markup import escape
from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from npuscope.analysis.query import QUERY_HELP

from ..widgets.cards_pane import CardsPane
from ..widgets.communication_pane import CommunicationPane
from ..widgets.frame_table import FrameTable
from ..widgets.mini_timeline import MiniTimeline
from .capture_screen import CaptureScreen

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
    app_bindings: Iterable[Binding | tuple[str, ...]], main_bindings: Iterable[Binding | tuple[str, ...]]
) -> list[KeyRow]:
    """Every key: the app's and the main screen's (as given), then each pane's and screen's."""
    rows = key_rows("everywhere", app_bindings)
    rows.append(("everywhere", "ctrl+p", "Command palette: every action"))
    rows += key_rows("main", main_bindings)
    rows += key_rows("cards", CardsPane.BINDINGS)
    rows.append(
        ("cards", "Enter", "Filter the tables to the finding and jump to its worst task; a training finding: its tab")
    )
    rows += key_rows("tables", FrameTable.BINDINGS)
    rows.append(("op statistics", "Enter", "Show that op type's tasks in the op summary"))
    rows.append(("training tabs", "/ d w t s r", "Filter and sort the visible tab's table (each tab its own)"))
    rows.append(("training tabs", "d / w", "Sort by its time / by its wait column (free, wait, max, total)"))
    rows.append(("steps", "↑ ↓", "Mark the step on its bar and on the timeline"))
    rows += key_rows("communication", CommunicationPane.BINDINGS)
    rows += key_rows("timeline", MiniTimeline.BINDINGS)
    rows += key_rows("capture", CaptureScreen.BINDINGS)
    rows.append(("capture", "Enter", "In the host field: fill in its remembered values; elsewhere: Start"))
    return rows


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close")]

    def __init__(self, rows: Sequence[KeyRow]) -> None:
        super().__init__()
        self.rows = rows

    def compose(self) -> ComposeResult:
        table = Table(box=None, header_style="bold", expand=True)
        table.add_column("where")
        table.add_column("keys")
        table.add_column("does")
        for where, keys, does in self.rows:
            table.add_row(where, escape(keys), escape(does))
        self.keys_table = table
        with VerticalScroll(id="help", classes="dialog"):
            yield Label("Keys", classes="dialog-title")
            yield Static(table)
            yield Label("Filter language", classes="section")
            yield Static(escape(QUERY_HELP))
            yield Label("Esc closes", classes="hint")
