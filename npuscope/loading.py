"""Opening a profile for a headless command: progress on stderr, cache written behind."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from npuscope.fixtures.demo_profile import ensure_demo
from npuscope.parsers import FrameCache, Profile, open_profile
from npuscope.parsers.read_options import SourceChoice
from npuscope.parsers.training import TrainingViews
from npuscope.parsers.views_cache import cached_training_views

from .progress import StderrProgress

if TYPE_CHECKING:  # the analysis is imported where it runs: `inspect` never loads it
    from npuscope.analysis import Thresholds
    from npuscope.analysis.session import Analysis


@contextmanager
def profile_for_command(
    path: str | None,
    *,
    capture: str | None,
    no_cache: bool,
    timeline: bool = True,
    strict: bool = False,
    source: SourceChoice = "auto",
    pmu: bool = True,
    details: bool = True,
) -> Iterator[Profile]:
    """The profile at `path` (default: the bundled demo); late cache problems go to stderr.
    `pmu` and `details` as open_profile takes them (what the command reads of the tasks)."""
    cache = FrameCache(enabled=not no_cache, background=True)
    with StderrProgress("loading") as progress:
        profile = open_profile(
            Path(path) if path else ensure_demo(),
            capture=capture,
            cache=cache,
            progress=progress,  # by bytes of the whole capture, inside each file too
            timeline=timeline,
            strict=strict,
            source=source,
            pmu=pmu,
            details=details,
        )
    known = len(cache.problems)
    yield profile
    cache.flush()
    for problem in cache.problems[known:]:
        print(f"npuscope: note: {problem}", file=sys.stderr)


def views_for_command(profile: Profile, *, no_cache: bool, strict: bool = False) -> TrainingViews:
    """The training-level views of a profile a command opened: from the cache, unless
    `no_cache`, when its files have not changed; cache problems go to stderr."""
    cache = FrameCache(enabled=not no_cache)
    views = cached_training_views(profile, cache, strict=strict)
    for problem in cache.problems:
        print(f"npuscope: note: {problem}", file=sys.stderr)
    return views


def analysis_for_command(
    path: str | None,
    *,
    capture: str | None = None,
    no_cache: bool = False,
    thresholds: Thresholds | None = None,
    cards: tuple[str, ...] | None = None,
) -> Analysis:
    """The whole analysis of the profile at `path` (both stages, as `report` makes it): what
    the headline figures (analysis/headline.py) of gate, experiment and the runs registry
    are read from."""
    from npuscope.analysis import Thresholds
    from npuscope.analysis.session import Options, diagnosed

    with profile_for_command(path, capture=capture, no_cache=no_cache) as profile:
        first = diagnosed(profile, Options(thresholds or Thresholds(), cards))
        return first.with_views(views_for_command(profile, no_cache=no_cache))
