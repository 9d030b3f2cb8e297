"""Messages between the screens, the app and its loading workers.

Requests (imperative) are posted by screens to the app, which owns loading: a screen never
calls an app method to open, compare or cancel. Results (past tense) are posted by the
loading workers and carry the generation of the load (or compare) they belong to: the app
drops any whose generation is no longer the current one, so a late result of an older load
can never replace a newer one.
"""

from __future__ import annotations

from pathlib import Path

from textual.message import Message

from npuscope.analysis import Diagnosis
from npuscope.analysis.cluster import ClusterSummary
from npuscope.parsers import Profile

# ---------------------------------------------------------------- requests (screens -> app)


class LoadRequested(Message):
    """Open `path` (None: the path of the open profile) at `capture` in place of the open one."""

    def __init__(self, path: Path | None, capture: str | int | None = None) -> None:
        super().__init__()
        self.path = path
        self.capture = capture


class CompareRequested(Message):
    """Open `other` and show it against the open profile (BASE = open, NEW = other)."""

    def __init__(self, other: Path) -> None:
        super().__init__()
        self.other = other


class CancelRequested(Message):
    """Stop the load in progress (if any); the open profile stays."""


class RankRequested(Message):
    """Open rank `rank` of the open cluster in the main screen (in place of the open rank)."""

    def __init__(self, rank: str) -> None:
        super().__init__()
        self.rank = rank


class RankStepRequested(Message):
    """Open the rank `step` places after the open one (-1: the previous) in rank order."""

    def __init__(self, step: int) -> None:
        super().__init__()
        self.step = step


class RanksRequested(Message):
    """Show the open cluster's Ranks view again (as it was: nothing is reloaded)."""


# ---------------------------------------------------------------- results (workers -> app)


class LoadProgressed(Message):
    """Bytes parsed so far by load `generation`; floods coalesce, only the latest matters."""

    def __init__(self, done: int, total: int, label: str, generation: int = 0) -> None:
        super().__init__()
        self.done = done
        self.total = total
        self.label = label
        self.generation = generation

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, LoadProgressed) and message.generation == self.generation


class ProfileLoaded(Message):
    """Load `generation` parsed and diagnosed its profile (`rank`: the rank of the open
    cluster it is; None for a capture opened by itself)."""

    def __init__(self, profile: Profile, diagnosis: Diagnosis, generation: int = 0, rank: str | None = None) -> None:
        super().__init__()
        self.profile = profile
        self.diagnosis = diagnosis
        self.generation = generation
        self.rank = rank


class ClusterLoaded(Message):
    """Load `generation` found a cluster at its path and summarized its ranks."""

    def __init__(self, summary: ClusterSummary, generation: int = 0) -> None:
        super().__init__()
        self.summary = summary
        self.generation = generation


class LoadFailed(Message):
    """Load `generation` stopped on bad input (one line, never a traceback)."""

    def __init__(self, message: str, title: str = "Cannot load", generation: int = 0) -> None:
        super().__init__()
        self.message = message
        self.title = title
        self.generation = generation


class LoadCancelled(Message):
    """Load `generation` stopped because it was cancelled."""

    def __init__(self, generation: int = 0) -> None:
        super().__init__()
        self.generation = generation


class ComparisonReady(Message):
    """Compare `generation` finished: `text` is the comparison of `other` against the base."""

    def __init__(self, other: Path, text: str, generation: int = 0) -> None:
        super().__init__()
        self.other = other
        self.text = text
        self.generation = generation


class ComparisonFailed(Message):
    """Compare `generation` could not open or compare `other`."""

    def __init__(self, other: Path, message: str, generation: int = 0) -> None:
        super().__init__()
        self.other = other
        self.message = message
        self.generation = generation
