"""Messages between the screens, the app and the workers.

Requests (imperative) are posted by screens to the app, which owns loading: a screen never
calls an app method to open, compare or cancel. Results (past tense, `Result`) come from the
workers and carry the generation of the request they answer (a load, a compare, the training
views or timeline of the profile shown, a SQL query): the app's jobs post theirs, a screen's
thread worker hands its result to its handler with `call_from_thread` (the worker ends once
the result is taken). Whoever asked takes a result only while `is_current` says its request
is still the latest, so a late result of an older request can never replace a newer one:
the one way stale results are dropped.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
from textual.message import Message

from npuscope.analysis import Diagnosis
from npuscope.analysis.cluster import ClusterSummary
from npuscope.analysis.timeline_view import TimelineModel
from npuscope.parsers import Profile
from npuscope.parsers.training import TrainingViews

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


# ---------------------------------------------------------------- results (workers -> app, screens)


class Result(Message):
    """What a worker came to, tagged with the generation of the request that started it."""

    def __init__(self, generation: int) -> None:
        super().__init__()
        self.generation = generation


def is_current(result: Result, generation: int | None, dropped: list[tuple[str, int]]) -> bool:
    """Whether `result` answers request `generation`, the latest (None: none is under way);
    else it is dropped, and noted in `dropped` as (message name, generation)."""
    if generation is not None and result.generation == generation:
        return True
    dropped.append((type(result).__name__, result.generation))
    return False


class LoadProgressed(Result):
    """Bytes parsed so far by load `generation`; floods coalesce, only the latest matters."""

    def __init__(self, done: int, total: int, label: str, generation: int = 0) -> None:
        super().__init__(generation)
        self.done = done
        self.total = total
        self.label = label

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, LoadProgressed) and message.generation == self.generation


class ProfileLoaded(Result):
    """Load `generation` parsed and diagnosed its profile (`rank`: the rank of the open
    cluster it is; None for a capture opened by itself)."""

    def __init__(
        self,
        profile: Profile,
        diagnosis: Diagnosis,
        generation: int = 0,
        rank: str | None = None,
        views: TrainingViews | None = None,
    ) -> None:
        super().__init__(generation)
        self.profile = profile
        self.diagnosis = diagnosis
        self.rank = rank
        self.views = views  # read with the profile (a rank analysed on its node), else None


class ClusterLoaded(Result):
    """Load `generation` found a cluster at its path and summarized its ranks."""

    def __init__(self, summary: ClusterSummary, generation: int = 0) -> None:
        super().__init__(generation)
        self.summary = summary


class LoadFailed(Result):
    """Load `generation` stopped on `error` (`what` leads its line: "rank 3: ")."""

    def __init__(self, error: Exception, what: str = "", generation: int = 0) -> None:
        super().__init__(generation)
        self.error = error
        self.what = what


class LoadCancelled(Result):
    """Load `generation` stopped because it was cancelled."""


class ComparisonReady(Result):
    """Compare `generation` finished: `text` is the comparison of `other` against the base."""

    def __init__(self, other: Path, text: str, generation: int = 0) -> None:
        super().__init__(generation)
        self.other = other
        self.text = text


class ComparisonFailed(Result):
    """Compare `generation` could not open or compare `other`: `error` says why."""

    def __init__(self, other: Path, error: Exception, generation: int = 0) -> None:
        super().__init__(generation)
        self.other = other
        self.error = error


class ViewsRead(Result):
    """The training views of shown profile `generation` were read: the diagnosis with the
    training findings, the views, the step windows, and why the training findings are
    missing (`problem`, None when they are not)."""

    def __init__(
        self,
        generation: int,
        diagnosis: Diagnosis,
        views: TrainingViews,
        windows: pl.DataFrame,
        problem: Exception | None = None,
    ) -> None:
        super().__init__(generation)
        self.diagnosis = diagnosis
        self.views = views
        self.windows = windows
        self.problem = problem


class ViewsFailed(Result):
    """The training views of shown profile `generation` could not be read."""

    def __init__(self, generation: int, error: Exception) -> None:
        super().__init__(generation)
        self.error = error


class TimelineBuilt(Result):
    """The timeline model of card `card` of shown profile `generation`."""

    def __init__(self, generation: int, card: str, model: TimelineModel) -> None:
        super().__init__(generation)
        self.card = card
        self.model = model


class QueryDone(Result):
    """SQL query `generation` (its number) returned `frame` in `seconds`."""

    def __init__(self, generation: int, frame: pl.DataFrame, seconds: float) -> None:
        super().__init__(generation)
        self.frame = frame
        self.seconds = seconds


class QueryFailed(Result):
    """SQL query `generation` stopped on `error`."""

    def __init__(self, generation: int, error: Exception) -> None:
        super().__init__(generation)
        self.error = error
