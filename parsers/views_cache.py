"""The training-level views of a profile through the frame cache.

Deriving the views of a big capture costs more than reopening its cached tasks (steps from
2M tasks: ~1.6 s against ~0.3 s), so a cached reopen should not derive them again. Each view
is one entry, and the sources found and notes one more; all are keyed by every file the
views may be read from (each regular file in the folders of the capture's places, a changed
or added file rebuilds them) and the profile's own files (which record the export read and
whether the timeline was), with the capture and `strict`.

A profile's views depend on its files and those options only: no view reads the PMU or
detail columns of the tasks or the timeline columns a light open leaves out (`pmu`,
`details` of open_profile; checked equal on every sample), so profiles opened either way
share the entries.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import polars as pl

from .cache import FrameCache
from .profile import Profile
from .training import SCHEMAS, VIEWS, TrainingViews, read_training_views
from .training_files import places

_META_SCHEMA: dict[str, pl.DataType] = {"kind": pl.String(), "text": pl.String()}


def views_files(profile: Profile) -> tuple[Path, ...]:
    """The files the views of `profile` may come from, in a stable order."""
    found: dict[Path, None] = dict.fromkeys(profile.files)
    for place in places(profile.capture):
        for folder in place.folders:
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except OSError:
                continue
            for entry in entries:
                try:
                    if entry.is_file():
                        found[Path(entry.path)] = None
                except OSError:
                    pass
        for db in (place.db, place.analysis_db):
            if db is not None:
                found[db] = None
    return tuple(found)


def cached_training_views(profile: Profile, cache: FrameCache, *, strict: bool = False) -> TrainingViews:
    """`read_training_views(profile, strict=strict)`, its frames kept in `cache`.

    A cache that is off (or unusable) derives them every time, as read_training_views does.
    """
    if not cache.enabled:
        return read_training_views(profile, strict=strict)
    files = views_files(profile)
    extra = [profile.capture.name, strict]
    built: list[TrainingViews] = []

    def views() -> TrainingViews:
        if not built:
            built.append(read_training_views(profile, strict=strict))
        return built[0]

    def meta() -> pl.DataFrame:
        v = views()
        rows = [("found", f) for f in v.found] + [("note", n) for n in v.notes]
        return pl.DataFrame(rows, schema=_META_SCHEMA, orient="row")

    def view(name: str) -> Callable[[], pl.DataFrame]:
        return lambda: getattr(views(), name)

    try:
        frames = {
            name: cache.load_or_build("view_" + name, files, view(name), extra, schema=SCHEMAS[name]) for name in VIEWS
        }
        kept = cache.load_or_build("view_meta", files, meta, extra, schema=_META_SCHEMA)
    except OSError:  # a file vanished while it was listed: read the views as they are now
        return read_training_views(profile, strict=strict)
    if built:
        return built[0]
    return TrainingViews(
        **frames,
        found=tuple(kept.filter(pl.col("kind") == "found")["text"].to_list()),
        notes=tuple(kept.filter(pl.col("kind") == "note")["text"].to_list()),
    )
