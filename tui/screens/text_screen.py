"""A full-screen, scrollable page of report text: the comparison and the card spread views.

Report lines are never wrapped (a wrapped table row reads as two rows): the page scrolls
sideways instead, and below 100 columns it takes the whole terminal.
"""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import ScrollableContainer
from textual.screen import ModalScreen
from textual.widgets import Label, Static

NARROW_WIDTH = 100


class TextScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q", "dismiss", "Close")]

    def __init__(self, title: str, text: str) -> None:
        super().__init__()
        self.title_text = title
        self.body = text

    def compose(self) -> ComposeResult:
        with ScrollableContainer(id="text-page", classes="dialog"):
            yield Label(self.title_text, classes="dialog-title", markup=False)
            # Plain text: names from the profile may hold markup characters.
            yield Static(Text(self.body, no_wrap=True), id="text-body")
            yield Label("↑↓ ←→ scroll · Esc closes", classes="hint")

    def on_mount(self) -> None:
        self.query_one("#text-page").focus()

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(self.size.width < NARROW_WIDTH, "narrow")
