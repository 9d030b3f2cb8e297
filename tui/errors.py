"""The explorer's one route for errors: one line on the screen, the traceback in the log.

An expected error (bad input: `ProfileError` and its kin, a filter that does not parse, a
capture that fails) says what is wrong in its own one line, as the commands do, and leaves
nothing in the log. Anything else is a bug: the screen shows one line that names the log file,
and the whole traceback is appended to the log (tui/error_log.py) for the user to send.

Every failure goes through `ErrorRoute.describe`: the workers that show a failure where it
happened (the loading panel, the SQL status line, the training tabs, the capture form) hand
it their exception, and a worker that ends in an error of its own reaches it through the
`Worker.StateChanged` handlers of the app and of the screens that run workers
(`worker_failed`), which notify it. `reported` keeps what was logged this run, for `--debug`.
"""

from __future__ import annotations

import os
import platform
import time
import traceback
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from textual.worker import Worker, WorkerState

from npuscope.analysis.query import QueryError
from npuscope.capture.spec import CaptureError
from npuscope.parsers import ProfileError

from . import error_log

EXPECTED: tuple[type[Exception], ...] = (ProfileError, CaptureError, QueryError)
"""Errors of the input or of a remote host, said in their own words (no traceback)."""


def expected(error: BaseException) -> bool:
    return isinstance(error, EXPECTED)


def _version() -> str:
    try:
        return metadata.version("npuscope")
    except metadata.PackageNotFoundError:
        return "unknown"


@dataclass(frozen=True)
class Reported:
    """An unexpected error of this run: the line shown, its traceback, where it was logged."""

    line: str
    traceback: str
    log: Path | None


class ErrorRoute:
    """Turns an exception into the line the screen shows, logging the unexpected ones."""

    def __init__(self) -> None:
        self.reported: list[Reported] = []

    def describe(self, error: BaseException, *, lead: str = "", during: str = "") -> str:
        """The one line for `error`: an expected one's own message after `lead`; else
        `lead`, "unexpected error", `during` (" while loading"), the error and where its
        traceback was written."""
        if expected(error):
            return f"{lead}{error}"
        text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        head = f"{lead}unexpected error{during}: {type(error).__name__}: {error}"
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        about = f"npuscope {_version()}, Python {platform.python_version()}, pid {os.getpid()}"
        record = f"---- {stamp} ({about})\n{head}\n{text}\n"
        try:
            log: Path | None = error_log.append(record)
        except OSError as exc:
            log = None
            where = f"(no traceback written: {exc})"
        else:
            where = f"(traceback in {log})"
        line = " ".join(f"{head} {where}".split())
        self.reported.append(Reported(line, text, log))
        return line

    def worker_failed(self, worker: Worker[object], state: WorkerState) -> str | None:
        """The line for a worker that ended in an error (None: it did not)."""
        if state is not WorkerState.ERROR or worker.error is None:
            return None
        return self.describe(worker.error, lead=f"{worker.description or worker.name}: ")
