"""A progress sink for load tests: it records every report and can cancel the load."""

from __future__ import annotations

import threading


class Seen:
    """The progress calls of one load; `stop_at` sets `cancel` once a label passes that many bytes."""

    def __init__(self, label: str | None = None, stop_at: int | None = None) -> None:
        self.calls: list[tuple[int, int, str]] = []
        self.cancel = threading.Event()
        self.label, self.stop_at = label, stop_at

    def __call__(self, done: int, total: int, label: str) -> None:
        self.calls.append((done, total, label))
        if self.stop_at is not None and label == self.label and done >= self.stop_at:
            self.cancel.set()

    def of(self, label: str) -> list[int]:
        return [done for done, _, name in self.calls if name == label]
