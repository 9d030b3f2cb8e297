"""`open_profile`: any export layout in, one immutable `Profile` of canonical frames out."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from .cache import FrameCache
from .columns import STAT_COLUMNS, STEP_COLUMNS, STEP_SCHEMA, TASK_COLUMNS, TASK_ORDER
from .csv_table import read_header, read_table
from .errors import ProfileError
from .frames import canonical_statistic, canonical_tasks, derive_statistic, empty_statistic, empty_tasks
from .layout import Capture, Source, discover
from .timeline import read_timeline
from .timeline_tasks import device_tasks, paddle_tasks

Progress = Callable[[int, int, str], None]

LAYOUT_NAMES = {
    "era_b": "Era B merged export (CANN 7.0+ mindstudio_profiler_output)",
    "era_a": "Era A per-card export (CANN 5.x-7.0.RC1 device_N)",
    "torch_npu": "torch_npu ASCEND_PROFILER_OUTPUT",
    "mindspore": "MindSpore ASCEND_PROFILER_OUTPUT",
    "paddle": "Paddle profiler trace",
    "file": "single file",
}


class Cancelled(Exception):
    """Loading was cancelled by the caller."""


@dataclass(frozen=True)
class Profile:
    """One capture, parsed: what the analysis and the UI work from."""

    path: Path
    capture: Capture
    captures: tuple[Capture, ...]
    layout: str
    era: str
    cards: tuple[str, ...]
    tasks: pl.DataFrame
    op_statistic: pl.DataFrame
    statistic_derived: bool
    events: pl.DataFrame | None
    tasks_from: str  # op_summary | timeline | paddle | none
    files: tuple[Path, ...]
    notes: tuple[str, ...] = ()
    steps: pl.DataFrame | None = None  # step_trace: card, iteration_id, fp_start_ns, ...
    pmu_columns: tuple[str, ...] = ()  # PMU counters in the files (loaded only if asked)

    @property
    def has_timeline(self) -> bool:
        return self.events is not None

    def span_ns(self, card: str | None = None) -> int:
        t = self.tasks.select("card", "start_ns", "duration_us")
        if card is not None:
            t = t.filter(pl.col("card") == card)
        if t.height == 0:
            return 0
        end = (t["start_ns"] + (t["duration_us"] * 1000).round(0).cast(pl.Int64)).max()
        return int(end - t["start_ns"].min())


def _era(capture: Capture, source: Source) -> str:
    if capture.layout in ("era_a", "file") and source.tasks:
        header = {h.strip() for h in read_header(source.tasks[0])}
        if "Task Start Time" in header:
            return "CANN 5.x (start times in ns)"
        if "Device_id" in header:
            return "CANN 7.0+ (merged export)"
        if "Start Time(us)" in header:
            return "torch_npu kernel_details"
        return "CANN 6.x-7.0.RC1 (per card)"
    return {
        "era_b": "CANN 7.0+ (merged export)",
        "era_a": "CANN 5.x-7.0.RC1 (per card)",
        "torch_npu": "torch_npu",
        "mindspore": "MindSpore",
        "paddle": "Paddle profiler",
    }.get(capture.layout, capture.layout)


def select_capture(captures: list[Capture], which: str | int | None) -> Capture:
    if which is None:
        return captures[0]
    if isinstance(which, int) or (isinstance(which, str) and which.isdigit()):
        i = int(which)
        if 0 <= i < len(captures):
            return captures[i]
    for cap in captures:
        if cap.name == which:
            return cap
    names = ", ".join(c.name for c in captures)
    raise ProfileError(f"no capture {which!r} here; captures found (newest first): {names}")


def _size(paths: Sequence[Path]) -> int:
    total = 0
    for p in paths:
        try:
            total += p.stat().st_size
        except OSError:
            pass
    return total


def open_profile(
    path: str | os.PathLike,
    *,
    capture: str | int | None = None,
    cache: FrameCache | None = None,
    timeline: bool = True,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    pmu: bool = True,
) -> Profile:
    """Discover and parse one capture (the newest unless `capture` names one).

    `pmu=False` leaves the PMU counter columns out of the tasks frame (their names are still
    reported): the explorer never shows them, and on 2M rows they are ~400 MB.
    """
    seen_pmu: list[str] = []

    def task_columns(names: list[str]) -> list[str]:
        extra = [n for n in names if n not in TASK_ORDER]
        seen_pmu.extend(n for n in extra if n not in seen_pmu)
        return names if pmu else [n for n in names if n in TASK_ORDER]

    root = Path(path).expanduser()
    captures = discover(root)
    chosen = select_capture(captures, capture)
    cache = cache if cache is not None else FrameCache()
    files = tuple(
        p
        for s in chosen.sources
        for p in (s.tasks + s.statistic + s.steps + (s.timeline if timeline else ()))
    )
    total = _size(files)
    done = 0

    def advance(paths: Sequence[Path], label: str) -> None:
        nonlocal done
        if cancel is not None and cancel.is_set():
            raise Cancelled()
        done += _size(paths)
        if progress is not None:
            progress(done, total, label)

    if progress is not None:
        progress(0, total, "discovered " + chosen.name)
    tasks_parts, stat_parts, event_parts, step_parts = [], [], [], []
    tasks_from = "none"
    derived = False
    for src in chosen.sources:
        if cancel is not None and cancel.is_set():
            raise Cancelled()
        events = None
        if src.timeline and timeline:
            events = cache.load_or_build(
                "events", src.timeline, lambda s=src: read_timeline(s.timeline, card=s.card), src.card
            )
            event_parts.append(events)
            advance(src.timeline, "timeline")
        if src.tasks:
            tasks = cache.load_or_build(
                "tasks", src.tasks, lambda s=src: _read_tasks(s), src.card, columns=task_columns
            )
            tasks_from = "op_summary"
            advance(src.tasks, "op summary")
        elif events is not None:
            if chosen.layout == "paddle":
                tasks, tasks_from = paddle_tasks(events), "paddle"
            else:
                tasks, tasks_from = device_tasks(events), "timeline"
        else:
            tasks = None
        if tasks is not None:
            tasks_parts.append(tasks)
        if src.statistic:
            stat = cache.load_or_build(
                "statistic", src.statistic, lambda s=src: _read_statistic(s), src.card
            )
            advance(src.statistic, "op statistic")
        elif tasks is not None:
            derived = True
            if src.tasks:  # cached with the tasks it comes from
                stat = cache.load_or_build(
                    "derived_statistic", src.tasks, lambda t=tasks: derive_statistic(t), src.card
                )
            else:
                stat = derive_statistic(tasks)
        else:
            stat = None
        if stat is not None:
            stat_parts.append(stat)
        if src.steps:
            step_parts.append(
                cache.load_or_build("steps", src.steps, lambda s=src: _read_steps(s), src.card)
            )
            advance(src.steps, "step trace")
    tasks = _concat(tasks_parts) if tasks_parts else empty_tasks()
    stat = _concat(stat_parts) if stat_parts else empty_statistic()
    events = _concat(event_parts) if event_parts else None
    if tasks.height == 0 and stat.height == 0 and (events is None or events.height == 0):
        raise ProfileError(f"{chosen.path}: the capture holds no task, statistic or timeline rows")
    cards = sorted(
        set(tasks["card"].unique().to_list()) | set(stat["card"].unique().to_list()),
        key=_card_key,
    )
    cache.start_writes()
    notes = list(chosen.notes) + cache.problems
    if derived:
        notes.append("op_statistic derived from the tasks (no op_statistic file)")
    if tasks_from == "timeline":
        notes.append("tasks derived from the timeline (no op_summary): OP Type is the kernel name")
    return Profile(
        path=root,
        capture=chosen,
        captures=tuple(captures),
        layout=chosen.layout,
        era=_era(chosen, chosen.sources[0]),
        cards=tuple(cards),
        tasks=tasks,
        op_statistic=stat,
        statistic_derived=derived,
        events=events,
        tasks_from=tasks_from,
        files=files,
        notes=tuple(notes),
        steps=_concat(step_parts) if step_parts else None,
        pmu_columns=tuple(seen_pmu),
    )


def _card_key(card: str) -> tuple[int, int | str]:
    return (0, int(card)) if card.isdigit() else (1, card)


def _concat(frames: list[pl.DataFrame]) -> pl.DataFrame:
    if len(frames) == 1:
        return frames[0]
    return pl.concat(frames, how="diagonal_relaxed")


def _read_tasks(src: Source) -> pl.DataFrame:
    df, pmu = read_table(src.tasks, TASK_COLUMNS, what="op_summary / kernel_details", extra_as_float=True)
    return canonical_tasks(df, card=src.card, pmu=pmu)


def _read_steps(src: Source) -> pl.DataFrame:
    df, _ = read_table(src.steps, STEP_COLUMNS, what="step_trace", extra_as_float=False)
    if "card" not in df.columns or df["card"].null_count() == df.height:
        df = df.with_columns(pl.lit(src.card or "0", dtype=pl.String).alias("card"))
    return df.select([pl.col(c).cast(t) for c, t in STEP_SCHEMA.items()])


def _read_statistic(src: Source) -> pl.DataFrame:
    df, _ = read_table(src.statistic, STAT_COLUMNS, what="op_statistic", extra_as_float=False)
    return canonical_statistic(df, card=src.card)
