"""The `/` filter bar: a query in the explorer's filter language, applied on Enter."""

from __future__ import annotations

from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input


class FilterBar(Input):
    BINDINGS = [Binding("escape", "clear_filter", "Clear filter", show=False)]

    class Applied(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    PLACEHOLDER = "/ filter: text  type:Cast  core:AI_CPU  dur>1000  wait>500  cause:recompilation  aclop  shape:8,4096"

    def __init__(self) -> None:
        super().__init__(placeholder=self.PLACEHOLDER, id="filter")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.post_message(self.Applied(self.value))

    def action_clear_filter(self) -> None:
        self.value = ""
        self.post_message(self.Applied(""))
