"""Asks for a path (the profile to compare with)."""

from __future__ import annotations

from collections.abc import Callable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Input, Label


class PathPrompt(ModalScreen[str | None]):
    """Dismissed with the path typed (None when closed); with `request`, the message it makes
    of the path (e.g. `CompareRequested`) is also posted to the app."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Close")]

    def __init__(self, title: str, *, request: Callable[[str], Message] | None = None) -> None:
        super().__init__()
        self.title_text = title
        self.request = request

    def compose(self) -> ComposeResult:
        with Vertical(id="prompt", classes="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            yield Input(placeholder="path to a profile folder or file", id="prompt-input")
            yield Label("Enter opens · Esc closes", classes="hint")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        path = event.value.strip() or None
        if path is not None and self.request is not None:
            self.app.post_message(self.request(path))
        self.dismiss(path)
