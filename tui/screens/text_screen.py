"""A full-screen, scrollable page of report text: the comparison and the card spread views."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static


class TextScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q", "dismiss", "Close")]

    def __init__(self, title: str, text: str) -> None:
        super().__init__()
        self.title_text = title
        self.body = text

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="text-page", classes="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            # Plain text: names from the profile may hold markup characters.
            yield Static(Text(self.body, no_wrap=True, overflow="ellipsis"), id="text-body")
            yield Label("↑↓ scroll · Esc closes", classes="hint")

    def on_mount(self) -> None:
        self.query_one("#text-page").focus()
