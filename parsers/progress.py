"""The one progress channel of an open: bytes of the whole capture read so far, and its cancel.

`open_profile` makes one `LoadProgress` from the caller's sink `(done_bytes, total_bytes,
label)` and cancel event. Every reader reports through it: once per file, and inside a file
after each piece of a CSV table or a timeline and each batch of a db query (`inside` hands a
reader its `BytesHook`). The bytes of the files read before are added here, a report never
moves back, and the cancel event is checked at each report, so a cancelled load stops at the
next piece wherever it is.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

Sink = Callable[[int, int, str], None]
"""Told `(done_bytes, total_bytes, label)` as a load moves; it may raise to stop the load."""

BytesHook = Callable[[int], None]
"""Called by a reader with the bytes of its files read so far; it may raise to stop the read."""


class Cancelled(Exception):
    """Loading was cancelled by the caller."""


def files_size(paths: Sequence[Path]) -> int:
    """Bytes of `paths` (a file gone or unreadable counts 0): what progress counts."""
    total = 0
    for p in paths:
        try:
            total += p.stat().st_size
        except OSError:
            pass
    return total


class LoadProgress:
    """Progress of one open in bytes of all its files, told to `sink`; `Cancelled` is raised
    at the first report (or `check`) after `cancel` is set."""

    def __init__(self, sink: Sink | None = None, cancel: threading.Event | None = None) -> None:
        self.sink = sink
        self.cancel = cancel
        self.total = 0
        self._done = 0  # bytes of the files read to their end
        self._shown = 0  # the most reported: a reread never moves it back

    def start(self, files: Sequence[Path], label: str) -> None:
        """The files to read are known: their bytes are the total."""
        self.total = files_size(files)
        self.check()
        if self.sink is not None:
            self.sink(0, self.total, label)

    def check(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled()

    def inside(self, paths: Sequence[Path], label: str) -> BytesHook | None:
        """The hook of a read of `paths`: its bytes read so far, after the files done (None
        when no one listens and nothing can cancel)."""
        if self.sink is None and self.cancel is None:
            return None
        size = files_size(paths)
        return lambda read: self._report(self._done + min(read, size), label)

    def past(self, paths: Sequence[Path], label: str) -> None:
        """`paths` are read to their end."""
        self._done += files_size(paths)
        self._report(self._done, label)

    def _report(self, at: int, label: str) -> None:
        self.check()
        self._shown = max(self._shown, min(at, self.total))
        if self.sink is not None:
            self.sink(self._shown, self.total, label)
