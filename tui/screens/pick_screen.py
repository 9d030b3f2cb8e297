"""A small modal list to pick a card or a capture."""

from __future__ import annotations

from collections.abc import Callable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList


class PickScreen(ModalScreen[str | None]):
    """Dismissed with the choice (None when closed); with `request`, the message it makes of
    a choice other than `current` (e.g. `LoadRequested(None, capture)`) is also posted to the app."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Close")]

    def __init__(
        self, title: str, choices: list[str], current: str, *, request: Callable[[str], Message] | None = None
    ) -> None:
        super().__init__()
        self.title_text = title
        self.choices = choices
        self.current = current
        self.request = request

    def compose(self) -> ComposeResult:
        with Vertical(id="pick", classes="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            yield OptionList(*self.choices, id="pick-list")
            yield Label("Enter picks · Esc closes", classes="hint")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        if self.current in self.choices:
            options.highlighted = self.choices.index(self.current)
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        choice = self.choices[event.option_index]
        if self.request is not None and choice != self.current:
            self.app.post_message(self.request(choice))
        self.dismiss(choice)
