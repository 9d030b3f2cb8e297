"""What the screens ask of the app they run in, typed without importing it.

The app imports its screens; a screen importing the app back would be a cycle. The screens
reach the app through this protocol instead (`explorer(screen)`), and the app implements it.
What the explorer was started with is one frozen `Settings`: a worker is handed it (or the
values it needs) as an argument, never reads the app from its thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

from textual.app import App
from textual.worker import Worker

from npuscope.analysis import Thresholds
from npuscope.analysis.cluster import ClusterSummary
from npuscope.capture.spec import DEFAULT_REMOTE_ROOT
from npuscope.parsers import ReadOptions

from .errors import ErrorRoute


@dataclass(frozen=True)
class Settings:
    """The command line of the explorer: the same for every profile it opens."""

    read: ReadOptions = field(default_factory=ReadOptions)
    thresholds: Thresholds = field(default_factory=Thresholds)
    use_cache: bool = True  # frames and views go through the cache (not --no-cache)
    export_dir: Path | None = None  # where `e` and `y` write (None: ./npuscope-exports)
    clusters: bool = False  # a folder of rank folders opens as its Ranks view
    ssh_config: str | None = None  # the capture screen's ssh config (--ssh-config), None: ~/.ssh/config
    remote_root: str = DEFAULT_REMOTE_ROOT  # the capture screen's remote cache folder (--remote-cache)


class Explorer(Protocol):
    """What the screens read of the app; they ask it to act by posting messages
    (tui/messages.py), never by calling it."""

    settings: Settings
    errors: ErrorRoute
    cluster: ClusterSummary | None  # the open cluster, or None
    rank: str | None  # the cluster's rank the main screen shows, or None

    def report_worker(self, event: Worker.StateChanged) -> None:
        """A worker of a screen changed state: one that failed is said and logged."""


def explorer(app: App[Any]) -> Explorer:
    """`app` as the explorer (NpuscopeApp is the only app the screens run in)."""
    return cast(Explorer, app)
