"""What the screens ask of the app they run in, typed without importing it.

The app imports its screens; a screen importing the app back would be a cycle. The screens
reach the app through this protocol instead (`explorer(screen)`), and the app implements it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, cast

from textual.app import App

from npuscope.analysis import Thresholds
from npuscope.parsers import ReadOptions


class Explorer(Protocol):
    """What the screens read of the app; they ask it to act by posting messages
    (tui/messages.py), never by calling it."""

    export_dir: Path | None
    read: ReadOptions
    thresholds: Thresholds
    cluster: Any  # the ClusterSummary of the open cluster, or None
    rank: str | None  # the cluster's rank the main screen shows, or None
    use_cache: bool  # frames and views go through the cache (not --no-cache)
    ssh_config: str | None  # the capture screen's ssh config (--ssh-config), None: ~/.ssh/config
    remote_root: str  # the capture screen's remote cache folder (--remote-cache)


def explorer(app: App[Any]) -> Explorer:
    """`app` as the explorer (NpuscopeApp is the only app the screens run in)."""
    return cast(Explorer, app)
