"""`open_profile`: any export layout in, one immutable `Profile` of canonical frames out.

An open runs in four steps, each a function over frozen values: `plan` (which capture, and of
each of its sources the one export to read: an `OpenPlan`), read (`read_source`, one
`SourceFrames` per source, parsers/source_frames.py), `combine` and `check` (the sources'
frames as one, then the checks across them: `Frames`, `Checks`) and `assemble` (the
`Profile`, its notes in the order the user reads them).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from .by_card import per_frame
from .cache import FrameCache
from .columns import COMMUNICATION_TASK_TYPES, UNKNOWN
from .csv_table import read_header
from .errors import ProfileError
from .frames import empty_statistic, empty_tasks, with_task_columns
from .layout import Capture, Layout, Source, discover
from .notes import (
    STATISTIC_DERIVED,
    TASKS_FROM_TIMELINE,
    TYPES_UNKNOWN,
    Note,
    NoteKind,
    counted,
    not_read,
    outlying_events,
    rendered,
)
from .progress import LoadProgress, Sink
from .read_options import SOURCES, ReadOptions, SourceChoice
from .sanity import outlying_events as far_events
from .sanity import time_problem
from .source_frames import SourceFrames, read_source
from .source_frames import SourceKind as SourceKind  # re-exported: where a Profile came from
from .source_frames import TasksFrom as TasksFrom

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .read_options import ReadChoices

LAYOUT_NAMES = {
    "era_b": "Era B merged export (CANN 7.0+ mindstudio_profiler_output)",
    "era_a": "Era A per-card export (CANN 5.x-7.0.RC1 device_N)",
    "torch_npu": "torch_npu ASCEND_PROFILER_OUTPUT",
    "mindspore": "MindSpore ASCEND_PROFILER_OUTPUT",
    "paddle": "Paddle profiler trace",
    "file": "single file",
}


@dataclass(frozen=True)
class Profile:
    """One capture, parsed: what the analysis and the UI work from."""

    path: Path
    capture: Capture
    captures: tuple[Capture, ...]
    layout: Layout
    era: str
    cards: tuple[str, ...]
    tasks: pl.DataFrame
    op_statistic: pl.DataFrame
    statistic_derived: bool
    events: pl.DataFrame | None
    tasks_from: TasksFrom
    files: tuple[Path, ...]
    note_data: tuple[Note, ...] = ()  # the notes as data; `notes` is their text
    steps: pl.DataFrame | None = None  # step_trace: card, iteration_id, fp_start_ns, ...
    pmu_columns: tuple[str, ...] = ()  # PMU counters in the files (loaded only if asked)
    source_kind: SourceKind = "text"
    # Why start times cannot give spans and wait causes (a spreadsheet re-save, a damaged
    # start), or None when they can.
    time_problem: str | None = None
    ignored: tuple[tuple[Path, str], ...] = ()  # files found but not read, and why

    @property
    def notes(self) -> tuple[str, ...]:
        """The notes as the user reads them, one line each."""
        return rendered(self.note_data)

    def notes_of(self, kind: NoteKind) -> tuple[Note, ...]:
        return tuple(n for n in self.note_data if n.kind == kind)

    @property
    def skipped_rows(self) -> int:
        """Damaged rows left out (the notes say where)."""
        return counted(self.note_data, "skipped_rows")

    @property
    def has_timeline(self) -> bool:
        return self.events is not None

    @property
    def types_known(self) -> bool:
        """False for a torch_npu Level0 capture: no OP Type on any compute task."""
        return _types_known(self.tasks)

    def span_ns(self, card: str | None = None) -> int | None:
        """First start to last end (ns), or None when the start times cannot be trusted."""
        if self.time_problem is not None:
            return None
        if card is None:
            return _span(self.tasks.select("start_ns", "duration_us"))
        # Every card's span in one pass over the tasks (a pass per card is slow with many cards).
        return per_frame(self.tasks, "span_ns", _card_spans).get(card, 0)


def _end_ns() -> pl.Expr:
    return pl.col("start_ns") + (pl.col("duration_us") * 1000).round(0).cast(pl.Int64)


def _span(t: pl.DataFrame) -> int:
    if t.height == 0:
        return 0
    end = t.select(_end_ns().max()).item()
    return int(end - t["start_ns"].min())


def _card_spans(tasks: pl.DataFrame) -> dict[str, int]:
    """Card -> first start to last end (ns)."""
    spans = tasks.group_by("card").agg((_end_ns().max() - pl.col("start_ns").min()).alias("span"))
    return {str(c): int(v or 0) for c, v in spans.iter_rows() if c is not None}


def open_profile(
    path: str | os.PathLike[str],
    *,
    capture: str | int | None = None,
    cache: FrameCache | None = None,
    progress: Sink | None = None,
    cancel: threading.Event | None = None,
    captures: Sequence[Capture] | None = None,
    **read: Unpack[ReadChoices],
) -> Profile:
    """Discover and parse one capture (the newest unless `capture` names one); `captures`:
    what `discover(path)` found already (the command line checks the path before the explorer
    starts), else discovered here.

    `read` are the fields of `ReadOptions` (strict, source, timeline, pmu, details,
    piece_bytes, batch_rows). `progress(done_bytes, total_bytes, label)` moves after each
    file, and inside a file after each piece of a CSV table or a timeline and each batch of
    a db query (a db's bytes counted in proportion to its rows read); `cancel` is checked at
    the same points and raises `Cancelled`. With the cache on, new entries are written once
    the profile is open (a light open, `details=False`, writes its tasks at once).
    """
    options = ReadOptions(**read)
    channel = LoadProgress(progress, cancel)
    cache = cache if cache is not None else FrameCache()
    plan = plan_open(Path(path).expanduser(), capture, options, captures)
    channel.start(plan.files, "discovered " + plan.capture.name)
    paddle = plan.capture.layout == "paddle"
    reads = [read_source(src, cache, options, channel, paddle=paddle) for src in plan.sources]
    frames = combine(plan.capture, reads, options.training_only)
    profile = assemble(plan, frames, check(frames), tuple(cache.problems))
    # New cache entries are written only now: a write running during the checks above would
    # compete with them for the CPU (on 2M rows it made them 3x slower).
    cache.start_writes()
    return profile


# --------------------------------------------------------------------------- plan


@dataclass(frozen=True)
class OpenPlan:
    """What an open reads: the capture, each of its sources reduced to the one export read
    (text or db), their files, and the files found but left out (and why)."""

    root: Path
    captures: tuple[Capture, ...]
    capture: Capture
    sources: tuple[Source, ...]
    files: tuple[Path, ...]
    ignored: tuple[tuple[Path, str], ...]


def plan_open(
    root: Path, which: str | int | None, options: ReadOptions, found: Sequence[Capture] | None = None
) -> OpenPlan:
    """The plan of an open of `root`: the captures `found` there (else discovered now), the
    one chosen, and the export read of each of its sources."""
    if options.source not in SOURCES:
        raise ProfileError(f"unknown source {options.source!r}; use one of {', '.join(SOURCES)}")
    captures = list(found) if found is not None else discover(root)
    chosen = select_capture(captures, which)
    planned = [_plan_source(src, options.source, options.timeline) for src in chosen.sources]
    return OpenPlan(
        root=root,
        captures=tuple(captures),
        capture=chosen,
        sources=tuple(src for src, _ in planned),
        files=tuple(p for src, _ in planned for p in src.files),
        ignored=tuple(item for _, left_out in planned for item in left_out),
    )


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


def _plan_source(src: Source, source: SourceChoice, timeline: bool) -> tuple[Source, list[tuple[Path, str]]]:
    """The one export of a source to read (text or db), and what is left out."""
    skipped: list[tuple[Path, str]] = []
    text = src.text_files
    if source == "db" and src.db is None:
        raise ProfileError(
            f"{(text or (Path('.'),))[0].parent}: no db export here (msprof_*.db or "
            "ascend_pytorch_profiler_*.db); leave out --source db to read the text export"
        )
    if source == "text" and not text:
        raise ProfileError(f"{src.db}: only a db export here; leave out --source text to read it")
    if src.db is not None and source in ("db", "auto"):
        for p in text:
            skipped.append((p, "the db export of the same run is read instead; --source text reads this"))
        return replace(src, tasks=(), statistic=(), steps=(), timeline=()), skipped
    if src.db is not None:
        skipped.append((src.db, "the text export of the same run is read instead; --source db reads this"))
    return replace(src, timeline=src.timeline if timeline else (), db=None), skipped


# --------------------------------------------------------------------------- combine, check


@dataclass(frozen=True)
class Frames:
    """The frames of all sources as one."""

    tasks: pl.DataFrame
    statistic: pl.DataFrame
    events: pl.DataFrame | None
    steps: pl.DataFrame | None
    tasks_from: TasksFrom
    statistic_derived: bool
    statistic_replaced: bool
    kinds: frozenset[SourceKind]
    notes: tuple[Note, ...]  # the sources' notes, in read order
    pmu_columns: tuple[str, ...]
    card_checks: pl.DataFrame | None = field(default=None, repr=False)  # of `tasks`, when made


def combine(capture: Capture, reads: Sequence[SourceFrames], training_only: bool = False) -> Frames:
    found = _concat([r.tasks for r in reads if r.tasks is not None])
    tasks = with_task_columns(found) if found is not None else empty_tasks()
    stat = _concat([r.statistic for r in reads if r.statistic is not None])
    stat = stat if stat is not None else empty_statistic()
    events = _concat([r.events for r in reads if r.events is not None])
    if tasks.height == 0 and stat.height == 0 and (events is None or events.height == 0):
        partial = [s for s in capture.sources if s.training and not s.text_files and s.db is None]
        if partial and training_only:
            pass  # a cluster's rank of training-level files: its steps and links are read beside
        elif partial and len(partial) == len(capture.sources):
            names = ", ".join(dict.fromkeys(p.name for s in partial for p in s.training))
            raise ProfileError(
                f"{capture.path}: training-level files only ({names}): no kernel_details.csv, db "
                "export or timeline, so no tasks to show; open the cluster folder above it to see "
                "this rank beside the others (`npuscope report CLUSTER`)"
            )
        else:
            raise ProfileError(f"{capture.path}: the capture holds no task, statistic or timeline rows")
    # The checks one source made of its tasks serve when those are the profile's tasks
    # (`with_task_columns` only adds null columns: the rows are the same).
    checked = next((r for r in reversed(reads) if r.card_checks is not None), None)
    return Frames(
        tasks=tasks,
        statistic=stat,
        events=events,
        steps=_concat([r.steps for r in reads if r.steps is not None]),
        tasks_from=next((r.tasks_from for r in reversed(reads) if r.tasks_from is not None), "none"),
        statistic_derived=any(r.statistic_derived for r in reads),
        statistic_replaced=any(r.statistic_replaced for r in reads),
        kinds=frozenset(r.kind for r in reads),
        notes=tuple(n for r in reads for n in r.notes),
        pmu_columns=tuple(dict.fromkeys(c for r in reads for c in r.pmu_columns)),
        card_checks=checked.card_checks if checked is not None and checked.tasks is found else None,
    )


@dataclass(frozen=True)
class Checks:
    """What the checks across the frames found."""

    events: pl.DataFrame | None  # the timeline without the events far outside the device activity
    far_events: int  # how many were left out
    time_problem: str | None


def check(frames: Frames) -> Checks:
    events, far = frames.events, 0
    if events is not None and frames.tasks.height:
        events, far = far_events(events, frames.tasks)
    return Checks(events, far, time_problem(frames.tasks, frames.card_checks))


# --------------------------------------------------------------------------- assemble


def assemble(plan: OpenPlan, frames: Frames, checks: Checks, cache_problems: Sequence[str]) -> Profile:
    capture, tasks, stat = plan.capture, frames.tasks, frames.statistic
    cards = set(tasks["card"].unique().to_list()) | set(stat["card"].unique().to_list())
    return Profile(
        path=plan.root,
        capture=capture,
        captures=plan.captures,
        layout=capture.layout,
        era=_era(capture, capture.sources[0], frames.kinds),
        cards=tuple(sorted(cards, key=_card_key)),
        tasks=tasks,
        op_statistic=stat,
        statistic_derived=frames.statistic_derived,
        events=checks.events,
        tasks_from=frames.tasks_from,
        files=plan.files,
        note_data=tuple(_notes(plan, frames, checks, cache_problems)),
        steps=frames.steps,
        pmu_columns=frames.pmu_columns,
        source_kind="db" if frames.kinds == {"db"} else "text",
        time_problem=checks.time_problem,
        ignored=plan.ignored,
    )


def _notes(plan: OpenPlan, frames: Frames, checks: Checks, cache_problems: Sequence[str]) -> list[Note]:
    """The profile's notes, in the order they are shown."""
    notes = [Note("layout", n) for n in plan.capture.notes]
    notes += [Note("cache", n) for n in cache_problems]
    notes += frames.notes
    if checks.far_events:
        notes.append(outlying_events(checks.far_events))
    if checks.time_problem is not None:
        notes.append(Note("time_problem", checks.time_problem))
    if frames.statistic_derived and frames.tasks_from != "db" and not frames.statistic_replaced:
        notes.append(STATISTIC_DERIVED)  # a replaced one has its own note
    if frames.tasks_from == "timeline":
        notes.append(TASKS_FROM_TIMELINE)
    notes += [not_read(path, why) for path, why in plan.ignored]
    if not _types_known(frames.tasks):
        notes.append(TYPES_UNKNOWN)
    return notes


def _types_known(tasks: pl.DataFrame) -> bool:
    compute = tasks.filter(~pl.col("task_type").is_in(COMMUNICATION_TASK_TYPES))
    return compute.height == 0 or bool((compute["op_type"] != UNKNOWN).any())


def _era(capture: Capture, source: Source, kinds: frozenset[SourceKind]) -> str:
    if kinds == {"db"}:
        base = "torch_npu" if capture.layout in ("torch_npu", "mindspore") else "msprof"
        return f"{base} db export (SQLite)"
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


def _card_key(card: str) -> tuple[int, int | str]:
    return (0, int(card)) if card.isdigit() else (1, card)


def _concat(frames: list[pl.DataFrame]) -> pl.DataFrame | None:
    """The frames as one, or None when there are none."""
    if not frames:
        return None
    if len(frames) == 1:
        return frames[0]
    return pl.concat(frames, how="diagonal_relaxed")
