"""Opening a profile for a headless command: progress on stderr, cache written behind."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from npuscope.fixtures.demo_profile import ensure_demo
from npuscope.parsers import FrameCache, Profile, open_profile
from npuscope.parsers.profile import SourceChoice

from .progress import StderrProgress


@contextmanager
def profile_for_command(
    path: str | None,
    *,
    capture: str | None,
    no_cache: bool,
    timeline: bool = True,
    strict: bool = False,
    source: SourceChoice = "auto",
) -> Iterator[Profile]:
    """The profile at `path` (default: the bundled demo); late cache problems go to stderr."""
    cache = FrameCache(enabled=not no_cache, background=True)
    with StderrProgress("loading") as progress:
        profile = open_profile(
            Path(path) if path else ensure_demo(),
            capture=capture,
            cache=cache,
            timeline=timeline,
            progress=progress,
            strict=strict,
            source=source,
        )
    known = len(cache.problems)
    yield profile
    cache.flush()
    for problem in cache.problems[known:]:
        print(f"npuscope: note: {problem}", file=sys.stderr)
