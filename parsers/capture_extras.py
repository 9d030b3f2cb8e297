"""What the findings read beside a profile's own files: call stacks and core counts.

`capture_extras(profile)` gathers them into one `CaptureExtras` value that the diagnosis is
handed (analysis/diagnose.py), so no rule opens a file:

- `devices`: each card's core counts (parsers/device_info.py: `info.json.N`, NPU_INFO), read
  here, once per value (the rules ask once per card);
- `stack_key`: path, size and modification time of each stack file (parsers/stacks.py
  `stack_files`), read here: the diagnosis cache is keyed by them besides the profile's files;
- `stacks`, `api_frames`, `optimizer_steps`: the frames of those files, read on first use and
  kept with the value (a diagnosis found in the cache never needs them). A damaged stack file
  is left out: no claim about that card's code, the rest stands.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import polars as pl

from .device_info import DeviceInfo, device_info
from .layout import Capture
from .profile import Profile
from .stacks import read_api_frames, read_optimizer_steps, read_stacks, stack_files


@dataclass(frozen=True, eq=False)
class CaptureExtras:
    """The extra files of one capture as values (see the module docstring)."""

    capture: Capture
    cards: tuple[str, ...]
    devices: Mapping[str, DeviceInfo]
    stack_key: tuple[tuple[str, int, int], ...]  # (path, size, mtime_ns) of each stack file
    events: pl.DataFrame | None = field(default=None, repr=False)  # the timeline: optimizer steps

    @cached_property
    def stacks(self) -> pl.DataFrame:
        """The framework operators' call stacks of every card (parsers/stacks.STACK_SCHEMA)."""
        return read_stacks(self.capture, self.cards, skip_damaged=True)

    @cached_property
    def api_frames(self) -> pl.DataFrame:
        """The CANN API calls by the user frame that made them (db exports only)."""
        return read_api_frames(self.capture, self.cards, skip_damaged=True)

    @cached_property
    def optimizer_steps(self) -> pl.DataFrame:
        """The optimizer steps of each card, from the db exports or the timeline's events."""
        return read_optimizer_steps(self.capture, self.cards, self.events, skip_damaged=True)


def capture_extras(profile: Profile) -> CaptureExtras:
    """The extras of `profile`: core counts and stack files' keys now, their frames on use."""
    return CaptureExtras(
        capture=profile.capture,
        cards=profile.cards,
        devices=device_info(profile.capture, profile.cards),
        stack_key=_stat_key(path for _, path in stack_files(profile.capture)),
        events=profile.events,
    )


def _stat_key(paths: Iterable[Path]) -> tuple[tuple[str, int, int], ...]:
    key: list[tuple[str, int, int]] = []
    for path in paths:
        try:
            st = path.stat()
        except OSError:
            continue
        key.append((str(path), st.st_size, st.st_mtime_ns))
    return tuple(key)
