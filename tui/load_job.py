"""One load or compare of the explorer: its own thread, its own cancel event, its generation.

The work runs in a daemon thread awaited by an async Textual worker, not in a Textual thread
worker: those run in the event loop's default executor, which `App.run()` joins on exit, so
quitting during a load would wait for the parse to end. A daemon thread is left behind
instead (the CLI ends the process once Textual has restored the terminal), and cancelling the
worker sets the job's event. Each job has its own `cancel` event: a new load never clears
the event of an older one, and the app drops whatever an older job posts by its generation.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from npuscope.analysis import Diagnosis, Thresholds, diagnose
from npuscope.parsers import Cancelled, FrameCache, Profile, ReadOptions, open_profile
from npuscope.parsers.timeline import watching

Progress = Callable[[int, int, str], None]


@dataclass(eq=False)
class Job:
    """A load or compare in flight: the app keeps the newest of each kind."""

    generation: int
    kind: str  # "load" or "compare"
    cancel: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    async def run(self, work: Callable[[], Any]) -> None:
        """Run `work` in a daemon thread and wait for it; cancelled, set `cancel` and return
        at once (the thread stops at its next check, or is left behind)."""
        loop = asyncio.get_running_loop()
        finished: asyncio.Future[None] = loop.create_future()

        def resolve() -> None:
            if not finished.done():
                finished.set_result(None)

        def target() -> None:
            try:
                work()
            finally:
                try:
                    loop.call_soon_threadsafe(resolve)
                except RuntimeError:  # the event loop is closed: the app has gone
                    pass

        self.thread = threading.Thread(target=target, name=f"npuscope-{self.kind}-{self.generation}", daemon=True)
        self.thread.start()
        try:
            await finished
        except asyncio.CancelledError:
            self.cancel.set()
            raise

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()


def load_profile(
    path: Path,
    *,
    capture: str | int | None,
    read: ReadOptions,
    thresholds: Thresholds | None,
    use_cache: bool,
    cancel: threading.Event,
    progress: Progress | None = None,
) -> tuple[Profile, Diagnosis]:
    """Open and diagnose `path`; raises `Cancelled` soon after `cancel` is set.

    Progress is in bytes of the capture's files: per file from `open_profile`, and per piece
    of ~8 MB while a timeline is parsed (the longest part of a cold load).
    """
    cache = FrameCache(enabled=use_cache, background=True)
    files = [0, 0]  # bytes done before the file being read, bytes of all files

    def on_file(done: int, total: int, label: str) -> None:
        files[:] = [done, total]
        if cancel.is_set():
            raise Cancelled()
        if progress is not None:
            progress(done, total, label)

    def on_piece(read_bytes: int) -> None:
        if cancel.is_set():
            raise Cancelled()
        if progress is not None:
            progress(min(files[0] + read_bytes, files[1]), files[1], "timeline")

    with watching(on_piece):
        profile = open_profile(
            path,
            capture=capture,
            cache=cache,
            progress=on_file,
            cancel=cancel,
            pmu="ratios",  # the bound types of the report's findings and op statistics
            strict=read.strict,
            source=read.source,
            timeline=read.timeline,
        )
    if cancel.is_set():
        raise Cancelled()
    if progress is not None:
        progress(files[1], files[1], "diagnosing")
    return profile, diagnose(profile, thresholds, cache=cache)


def open_for_compare(other: Path, *, use_cache: bool, cancel: threading.Event) -> Profile:
    """The NEW profile of a comparison; raises `Cancelled` soon after `cancel` is set."""

    def on_piece(read_bytes: int) -> None:
        if cancel.is_set():
            raise Cancelled()

    with watching(on_piece):
        return open_profile(other, cache=FrameCache(enabled=use_cache, background=True), cancel=cancel, pmu="ratios")
