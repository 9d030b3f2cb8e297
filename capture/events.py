"""What a capture reports while it runs: one frozen event per kind, matched by its consumers.

`session` emits them; `npuscope capture` turns them into stderr lines and the capture screen
into its phase labels, progress bar and log. Text that came from the host is made printable
(`printable_event`) before any consumer sees it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal, get_args

from npuscope.text import printable

Phase = Literal["connect", "upload", "launch", "warm-up", "capture", "export", "fetch", "open"]
PHASES: tuple[Phase, ...] = get_args(Phase)


@dataclass(frozen=True)
class PhaseStarted:
    """The capture on `host` reached `phase`; `text` says what it is doing."""

    host: str
    phase: Phase
    text: str = ""


@dataclass(frozen=True)
class Progressed:
    """`done` of `total` in `phase`: steps (warm-up, capture) or bytes (fetch)."""

    host: str
    phase: Phase
    done: float
    total: float


@dataclass(frozen=True)
class LogLine:
    """One line of the job's log (made printable)."""

    host: str
    text: str


@dataclass(frozen=True)
class RunStarted:
    """The job was launched on `host` as run `run_id`, in process group `pid`."""

    host: str
    run_id: str
    pid: int


Event = PhaseStarted | Progressed | LogLine | RunStarted
Emit = Callable[[Event], None]


def printable_event(event: Event) -> Event:
    """The event with the host's text made printable."""
    if isinstance(event, (PhaseStarted, LogLine)):
        return replace(event, text=printable(event.text))
    return event
