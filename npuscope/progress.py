"""A progress line on stderr for headless commands, shown only on a terminal."""

from __future__ import annotations

import sys
import time


class StderrProgress:
    """Callable `(done_bytes, total_bytes, label)` that redraws one stderr line."""

    def __init__(self, what: str, *, min_interval: float = 0.1) -> None:
        self.what = what
        self.enabled = sys.stderr.isatty()
        self.min_interval = min_interval
        self._last = 0.0
        self._drawn = False

    def __call__(self, done: int, total: int, label: str) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < self.min_interval and done < total:
            return
        self._last = now
        pct = 100 * done / total if total else 100
        sys.stderr.write(f"\r{self.what} {pct:5.1f}%  {done / 1e6:,.1f}/{total / 1e6:,.1f} MB  {label:<20}")
        sys.stderr.flush()
        self._drawn = True

    def __enter__(self) -> StderrProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._drawn:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
