"""`open_profile`: any export layout in, one immutable `Profile` of canonical frames out."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

import polars as pl

from .cache import FrameCache, Schema, including
from .columns import (
    COMMUNICATION_TASK_TYPES,
    DETAIL_COLUMNS,
    EVENT_SCHEMA,
    LIGHT_EVENT_COLUMNS,
    STAT_COLUMNS,
    STAT_SCHEMA,
    STEP_COLUMNS,
    STEP_SCHEMA,
    TASK_COLUMNS,
    TASK_ORDER,
    UNKNOWN,
)
from .csv_table import PIECE_BYTES, BytesHook, RowPolicy, read_header, read_table
from .errors import ProfileError
from .frames import (
    canonical_statistic,
    canonical_tasks,
    derive_statistic,
    empty_statistic,
    empty_tasks,
    with_event_columns,
    with_task_columns,
)
from .layout import Capture, Layout, Source, discover
from .sanity import card_checks, outlying_events, statistic_problem, time_problem
from .timeline import read_timeline
from .timeline_tasks import device_tasks, paddle_tasks

if TYPE_CHECKING:
    from .db import DbExport

Progress = Callable[[int, int, str], None]
TasksFrom = Literal["op_summary", "db", "timeline", "paddle", "none"]
"""Where a profile's tasks came from."""
SourceChoice = Literal["auto", "text", "db"]
"""Which export of a capture to read (`--source`)."""
SourceKind = Literal["text", "db"]
"""Which export of a capture was read."""

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
    layout: Layout
    era: str
    cards: tuple[str, ...]
    tasks: pl.DataFrame
    op_statistic: pl.DataFrame
    statistic_derived: bool
    events: pl.DataFrame | None
    tasks_from: TasksFrom
    files: tuple[Path, ...]
    notes: tuple[str, ...] = ()
    steps: pl.DataFrame | None = None  # step_trace: card, iteration_id, fp_start_ns, ...
    pmu_columns: tuple[str, ...] = ()  # PMU counters in the files (loaded only if asked)
    source_kind: SourceKind = "text"
    # Why start times cannot give spans and wait causes (a spreadsheet re-save, a damaged
    # start), or None when they can.
    time_problem: str | None = None
    skipped_rows: int = 0  # damaged rows left out (the notes say where)
    ignored: tuple[tuple[Path, str], ...] = ()  # files found but not read, and why

    @property
    def has_timeline(self) -> bool:
        return self.events is not None

    @property
    def types_known(self) -> bool:
        """False for a torch_npu Level0 capture: no OP Type on any compute task."""
        compute = self.tasks.filter(~pl.col("task_type").is_in(COMMUNICATION_TASK_TYPES))
        return compute.height == 0 or bool((compute["op_type"] != UNKNOWN).any())

    def span_ns(self, card: str | None = None) -> int | None:
        """First start to last end (ns), or None when the start times cannot be trusted."""
        if self.time_problem is not None:
            return None
        t = self.tasks.select("card", "start_ns", "duration_us")
        if card is not None:
            t = t.filter(pl.col("card") == card)
        if t.height == 0:
            return 0
        end = (t["start_ns"] + (t["duration_us"] * 1000).round(0).cast(pl.Int64)).max()
        return int(end - t["start_ns"].min())


def _era(capture: Capture, source: Source, kinds: set[str]) -> str:
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


def files_size(paths: Sequence[Path]) -> int:
    """Bytes of `paths` (a file gone or unreadable counts 0): what progress counts."""
    total = 0
    for p in paths:
        try:
            total += p.stat().st_size
        except OSError:
            pass
    return total


SOURCES: tuple[SourceChoice, ...] = get_args(SourceChoice)


@dataclass(frozen=True)
class ReadOptions:
    """How the user asked for files to be read (`--strict`, `--source`, `--no-timeline`)."""

    strict: bool = False
    source: SourceChoice = "auto"
    timeline: bool = True


def open_profile(
    path: str | os.PathLike[str],
    *,
    capture: str | int | None = None,
    cache: FrameCache | None = None,
    timeline: bool = True,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    pmu: bool | Literal["ratios"] = True,
    strict: bool = False,
    source: SourceChoice = "auto",
    piece_bytes: int = PIECE_BYTES,
    batch_rows: int | None = None,
    details: bool = True,
) -> Profile:
    """Discover and parse one capture (the newest unless `capture` names one).

    `pmu=False` leaves the PMU counter columns out of the tasks frame (their names are still
    reported): on 2M rows they are ~400 MB. `pmu="ratios"` keeps only the pipe ratio columns
    (`*_ratio`), what the bound type of an op type is computed from (the explorer: its
    findings and op statistics name the same bound as the report's).
    `details=False` leaves the columns that describe a task beyond its name, type and times
    (DETAIL_COLUMNS: tensors, state, block dims) null: a command that only counts time
    (inspect) reads over a third less; of the timeline it keeps LIGHT_EVENT_COLUMNS (the
    others null). Both read only those columns of a cache entry, and with the cache off the
    CSV columns left out are not parsed (nor the timeline's held); with the cache on, a new
    entry still holds every column, and is written before the open goes on.
    `strict=True` refuses a file with damaged rows instead of skipping them with a note.
    `source` picks the text or the db export when a capture has both (`auto`: the db, as
    Huawei's own analysers do); the other is never read.
    `progress(done_bytes, total_bytes, label)` moves after each file, and inside a file after
    each piece of `piece_bytes` of a CSV table or batch of `batch_rows` rows of a db query (a
    db's bytes counted in proportion to its rows read); `cancel` is checked at the same
    points and raises `Cancelled`. Timelines report through `timeline.watching`.
    """
    if source not in SOURCES:
        raise ProfileError(f"unknown source {source!r}; use one of {', '.join(SOURCES)}")
    seen_pmu: dict[str, None] = {}  # in file order; a dict, so a wide header is not quadratic

    def task_columns(names: list[str]) -> list[str]:
        seen_pmu.update((n, None) for n in names if n not in TASK_ORDER)
        ratios = pmu == "ratios"
        return [
            n
            for n in names
            if (details or n not in DETAIL_COLUMNS)
            and (pmu is True or n in TASK_ORDER or (ratios and n.endswith("_ratio")))
        ]

    # The timeline's columns a light open reads (the others are null; LIGHT_EVENT_COLUMNS).
    event_keep = None if details else LIGHT_EVENT_COLUMNS

    def event_columns(names: list[str]) -> list[str]:
        return [n for n in names if event_keep is None or n in event_keep]

    # What a tasks entry must hold to be used: the canonical columns this open reads.
    task_schema = including({n: t for n, t in empty_tasks().schema.items() if details or n not in DETAIL_COLUMNS})

    root = Path(path).expanduser()
    captures = discover(root)
    chosen = select_capture(captures, capture)
    cache = cache if cache is not None else FrameCache()
    plan = [_plan(src, source, timeline) for src in chosen.sources]
    files = tuple(p for _, paths, _ in plan for p in paths)
    ignored = tuple(item for _, _, skipped in plan for item in skipped)
    total = files_size(files)
    done = 0  # bytes of the files read
    shown = 0  # the most progress reported: a reread never moves it back

    def report(at: int, label: str) -> None:
        nonlocal shown
        if cancel is not None and cancel.is_set():
            raise Cancelled()
        shown = max(shown, min(at, total))
        if progress is not None:
            progress(shown, total, label)

    def advance(paths: Sequence[Path], label: str) -> None:
        nonlocal done
        done += files_size(paths)
        report(done, label)

    def within(paths: Sequence[Path], label: str) -> BytesHook | None:
        """The hook of a read of `paths`: its bytes read so far, after the files done."""
        if progress is None and cancel is None:
            return None
        size = files_size(paths)
        return lambda read: report(done + min(read, size), label)

    if progress is not None:
        progress(0, total, "discovered " + chosen.name)
    tasks_parts: list[pl.DataFrame] = []
    stat_parts: list[pl.DataFrame] = []
    event_parts: list[pl.DataFrame] = []
    step_parts: list[pl.DataFrame] = []
    parse_notes: list[str] = []
    tasks_from: TasksFrom = "none"
    derived = replaced = False
    kinds = set()
    checked: tuple[pl.DataFrame, pl.DataFrame] | None = None  # a tasks frame and its card_checks
    for src, _, _ in plan:
        if cancel is not None and cancel.is_set():
            raise Cancelled()
        kinds.add("db" if src.db is not None else "text")
        if src.db is not None:
            bytes_hook = within((src.db,), "db export")
            rows_hook = None if bytes_hook is None else partial(_rows_as_bytes, bytes_hook, files_size((src.db,)))
            read = _read_db_cached(
                cache, src, task_columns, timeline, rows_hook, batch_rows, task_schema, event_columns, strict
            )
            advance((src.db,), "db export")
            tasks_parts.append(read.tasks)
            tasks_from = "db"
            if read.events is not None:
                event_parts.append(read.events)
            if read.steps is not None:
                step_parts.append(read.steps)
            parse_notes.extend(read.notes)
            derived = True
            stat_parts.append(
                cache.load_or_build(
                    "derived_statistic",
                    (src.db,),
                    partial(derive_statistic, read.tasks),
                    src.card,
                    schema=STAT_SCHEMA,
                )
            )
            continue
        events = None
        tasks = None
        # A light open (details=False: inspect) writes a new entry at once and keeps only its
        # columns: the whole frame is not held while the rest is read (2M tasks, then a 1.8 GB
        # timeline: the tasks go first, so their whole frame is gone before the timeline's is
        # built). Others queue the write, which runs once the profile is open.
        write_now = not details
        if src.tasks:
            # With no cache to fill, the columns not asked for are not even parsed.
            light = not cache.enabled and (pmu is not True or not details)
            read_tasks = partial(
                _read_tasks,
                src,
                hook=within(src.tasks, "op summary"),
                piece_bytes=piece_bytes,
                keep_extra=task_columns if light else None,
                skip=() if details or not light else DETAIL_COLUMNS,
            )
            tasks = _cached_table(
                cache,
                "tasks",
                src.tasks,
                read_tasks,
                src.card,
                strict,
                parse_notes,
                columns=task_columns,
                schema=task_schema,
                write_now=write_now,
            )
            tasks_from = "op_summary"
            advance(src.tasks, "op summary")
        # Newer torch_npu kernel_details carry the device (Device_id 6) while the source's card
        # is the rank of profiler_info_<rank>.json (0): the rest of the source follows its tasks.
        own = _tasks_card(tasks, src.card)
        if src.timeline:
            # Tasks taken from the timeline (no op_summary) need all of its columns.
            keep = event_keep if src.tasks else None
            try:
                events = cache.load_or_build(
                    "events",
                    src.timeline,
                    partial(read_timeline, src.timeline, card=src.card, columns=None if cache.enabled else keep),
                    src.card,
                    schema=EVENT_SCHEMA,
                    write_now=keep is not None,
                    columns=None if keep is None else event_columns,
                )
                if keep is not None:
                    events = with_event_columns(events)
                events = _relabel(events, src.card, own)
            except ProfileError as exc:
                if not src.tasks:  # the timeline is all there is
                    raise
                # A broken timeline must not hide a good op_summary: go on without it.
                parse_notes.append(f"timeline not read: {exc}")
            else:
                event_parts.append(events)
            advance(src.timeline, "timeline")
        if tasks is None and events is not None:
            if chosen.layout == "paddle":
                tasks, tasks_from = paddle_tasks(events), "paddle"
            else:
                tasks, tasks_from = device_tasks(events), "timeline"
        if tasks is not None:
            tasks_parts.append(tasks)
        if src.statistic:
            read_stat = partial(
                _read_statistic, src, hook=within(src.statistic, "op statistic"), piece_bytes=piece_bytes
            )
            stat = _relabel(
                _cached_table(cache, "statistic", src.statistic, read_stat, src.card, strict, parse_notes),
                src.card,
                own,
            )
            if tasks is not None and tasks.height:
                # One pass per card for both checks: the time check reuses it below when
                # this is the profile's only tasks frame.
                checked = (tasks, card_checks(tasks))
                disagree = statistic_problem(tasks, stat, checked[1])
                if disagree is not None:
                    parse_notes.append(disagree)
                    stat = derive_statistic(tasks)
                    derived = replaced = True
            advance(src.statistic, "op statistic")
        elif tasks is not None:
            derived = True
            if src.tasks:  # cached with the tasks it comes from
                stat = cache.load_or_build(
                    "derived_statistic",
                    src.tasks,
                    partial(derive_statistic, tasks),
                    src.card,
                    schema=STAT_SCHEMA,
                )
            else:
                stat = derive_statistic(tasks)
        else:
            stat = None
        if stat is not None:
            stat_parts.append(stat)
        if src.steps:
            read_steps = partial(_read_steps, src, hook=within(src.steps, "step trace"), piece_bytes=piece_bytes)
            steps = _cached_table(cache, "steps", src.steps, read_steps, src.card, strict, parse_notes)
            step_parts.append(_relabel(steps, src.card, own))
            advance(src.steps, "step trace")
    tasks = with_task_columns(_concat(tasks_parts)) if tasks_parts else empty_tasks()
    stat = _concat(stat_parts) if stat_parts else empty_statistic()
    events = _concat(event_parts) if event_parts else None
    if tasks.height == 0 and stat.height == 0 and (events is None or events.height == 0):
        raise ProfileError(f"{chosen.path}: the capture holds no task, statistic or timeline rows")
    cards = sorted(
        set(tasks["card"].unique().to_list()) | set(stat["card"].unique().to_list()),
        key=_card_key,
    )
    notes = list(chosen.notes) + cache.problems + parse_notes
    if events is not None and tasks.height:
        events, far = outlying_events(events, tasks)
        if far:
            notes.append(
                f"{far:,} timeline event(s) lie far outside the device activity and are left "
                "out of the timeline (their times are damaged or from another run)"
            )
    problem = time_problem(tasks, checked[1] if checked is not None and checked[0] is tasks else None)
    if problem is not None:
        notes.append(problem)
    if derived and tasks_from != "db" and not replaced:  # a replaced one has its own note
        notes.append("op_statistic derived from the tasks (no op_statistic file)")
    if tasks_from == "timeline":
        notes.append("tasks derived from the timeline (no op_summary): OP Type read from the kernel name")
    for path, why in ignored:
        notes.append(f"not read: {path.name} ({why})")
    profile = Profile(
        path=root,
        capture=chosen,
        captures=tuple(captures),
        layout=chosen.layout,
        era=_era(chosen, chosen.sources[0], kinds),
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
        source_kind="db" if kinds == {"db"} else "text",
        time_problem=problem,
        skipped_rows=sum(_skipped(n) for n in parse_notes),
        ignored=ignored,
    )
    if not profile.types_known:
        profile = replace(
            profile,
            notes=(
                *profile.notes,
                "op types unknown: the files record no OP Type or core type (torch_npu Level0, "
                "its default level, leaves them N/A); tasks are shown as 'unknown', "
                "communication is told by its hcom_ name; capture at Level1 for op types",
            ),
        )
    # New cache entries are written only now: a write running during the checks above would
    # compete with them for the CPU (on 2M rows it made them 3x slower).
    cache.start_writes()
    return profile


def _tasks_card(tasks: pl.DataFrame | None, card: str | None) -> str | None:
    """The one card a source's tasks name when it is not the source's own card, else None."""
    if tasks is None or card is None or tasks.height == 0:
        return None
    cards = tasks["card"].unique()
    return str(cards[0]) if cards.len() == 1 and cards[0] != card else None


def _relabel(frame: pl.DataFrame, card: str | None, own: str | None) -> pl.DataFrame:
    """`frame` with its rows of `card` moved to `own` (the card of the source's tasks)."""
    if own is None or card is None or "card" not in frame.columns:
        return frame
    return frame.with_columns(pl.when(pl.col("card") == card).then(pl.lit(own)).otherwise(pl.col("card")).alias("card"))


def _plan(src: Source, source: SourceChoice, timeline: bool) -> tuple[Source, tuple[Path, ...], list[tuple[Path, str]]]:
    """The one export of a source to read (text or db), its files, and what is left out."""
    skipped: list[tuple[Path, str]] = []
    text = src.tasks + src.statistic + src.steps + src.timeline
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
        return replace(src, tasks=(), statistic=(), steps=(), timeline=()), (src.db,), skipped
    if src.db is not None:
        skipped.append((src.db, "the text export of the same run is read instead; --source db reads this"))
    timeline_files = src.timeline if timeline else ()
    kept = replace(src, timeline=timeline_files, db=None)
    return kept, kept.tasks + kept.statistic + kept.steps + kept.timeline, skipped


def _skipped(note: str) -> int:
    m = re.search(r"skipped ([\d,]+) damaged row", note)
    return int(m.group(1).replace(",", "")) if m else 0


_NOTES_SCHEMA: dict[str, pl.DataType] = {"note": pl.String()}
# What each table's reader returns: canonical tasks (PMU columns may follow), statistic, steps.
_TABLE_SCHEMAS: dict[str, Schema] = {
    "tasks": including(empty_tasks().schema),
    "statistic": STAT_SCHEMA,
    "steps": STEP_SCHEMA,
}


def _cached_table(
    cache: FrameCache,
    kind: str,
    paths: Sequence[Path],
    read: Callable[[RowPolicy], pl.DataFrame],
    card: str | None,
    strict: bool,
    notes: list[str],
    columns: Callable[[list[str]], list[str]] | None = None,
    schema: Schema | None = None,
    write_now: bool = False,
) -> pl.DataFrame:
    """A CSV table through the cache, with the notes its parse left (damaged rows) kept
    beside it, so a cached reopen says the same and `strict` refuses the same files."""
    policy = RowPolicy(strict=strict)
    frame = cache.load_or_build(
        kind,
        paths,
        partial(read, policy),
        card,
        columns=columns,
        schema=schema or _TABLE_SCHEMAS.get(kind),
        write_now=write_now,
    )
    if cache.enabled:
        built = list(policy.notes)
        kept = cache.load_or_build(
            kind + "_notes",
            paths,
            lambda: pl.DataFrame({"note": built}, schema=_NOTES_SCHEMA),
            card,
            schema=_NOTES_SCHEMA,
        )
        found = [n for n in kept["note"].to_list() if n]
    else:
        found = list(policy.notes)
    if strict and found:
        raise ProfileError(found[0].replace("skipped", "has", 1) + "; leave out --strict to skip them")
    notes.extend(found)
    return frame


@dataclass(frozen=True)
class _DbFrames:
    tasks: pl.DataFrame
    events: pl.DataFrame | None
    steps: pl.DataFrame | None
    notes: tuple[str, ...]


def _rows_as_bytes(hook: BytesHook, size: int, rows: int, expected: int) -> None:
    """A db read's rows as bytes of its file, in proportion."""
    hook(size * rows // expected if expected else 0)


def _read_db_cached(
    cache: FrameCache,
    src: Source,
    columns: Callable[[list[str]], list[str]],
    timeline: bool,
    hook: Callable[[int, int], None] | None = None,
    batch_rows: int | None = None,
    task_schema: Schema | None = None,
    event_columns: Callable[[list[str]], list[str]] | None = None,
    strict: bool = False,
) -> _DbFrames:
    """The frames of a db export, each cached on its own, read from SQLite at most once.

    The entries are keyed by the db and the `-wal` / `-journal` beside it (a WAL writer changes
    only the `-wal`); with `strict`, a live or unfinished export is refused, cached or not."""
    from .db import BATCH_ROWS, read_db  # SQLite is only opened for db exports
    from .db_snapshot import refusal

    assert src.db is not None
    db_path = src.db
    keyed = (db_path, *(p for p in (db_path.with_name(db_path.name + s) for s in ("-wal", "-journal")) if p.exists()))
    memo: dict[str, DbExport] = {}

    def export() -> DbExport:
        if "x" not in memo:
            memo["x"] = read_db(db_path, card=src.card, hook=hook, batch_rows=batch_rows or BATCH_ROWS, strict=strict)
        return memo["x"]

    notes = cache.load_or_build(
        "db_notes",
        keyed,
        lambda: pl.DataFrame({"note": list(export().notes)}, schema=_NOTES_SCHEMA),
        src.card,
        schema=_NOTES_SCHEMA,
    )
    refused = refusal(notes["note"].to_list()) if strict else None
    if refused is not None:
        raise ProfileError(f"{db_path}: {refused}; leave out --strict to read it anyway")

    tasks = cache.load_or_build(
        "db_tasks",
        keyed,
        lambda: export().tasks,
        src.card,
        columns=columns,
        schema=task_schema or including(empty_tasks().schema),
    )
    events = None
    if timeline:
        events = cache.load_or_build(
            "db_events",
            keyed,
            lambda: _or_empty(export().events, EVENT_SCHEMA),
            src.card,
            schema=EVENT_SCHEMA,
            columns=event_columns,
        )
        events = with_event_columns(events)
        if events.height == 0:
            events = None
    steps = cache.load_or_build(
        "db_steps",
        keyed,
        lambda: _or_empty(export().steps, STEP_SCHEMA),
        src.card,
        schema=STEP_SCHEMA,
    )
    return _DbFrames(tasks, events, steps if steps.height else None, tuple(notes["note"].to_list()))


def _or_empty(frame: pl.DataFrame | None, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    return frame if frame is not None else pl.DataFrame(schema=schema)


def _card_key(card: str) -> tuple[int, int | str]:
    return (0, int(card)) if card.isdigit() else (1, card)


def _concat(frames: list[pl.DataFrame]) -> pl.DataFrame:
    if len(frames) == 1:
        return frames[0]
    return pl.concat(frames, how="diagonal_relaxed")


def _read_tasks(
    src: Source,
    rows: RowPolicy,
    hook: BytesHook | None = None,
    piece_bytes: int = PIECE_BYTES,
    keep_extra: Callable[[list[str]], list[str]] | None = None,
    skip: Sequence[str] = (),
) -> pl.DataFrame:
    df, pmu = read_table(
        src.tasks,
        TASK_COLUMNS,
        what="op_summary / kernel_details",
        extra_as_float=True,
        rows=rows,
        hook=hook,
        piece_bytes=piece_bytes,
        keep_extra=keep_extra,
        skip=skip,
    )
    return canonical_tasks(df, card=src.card, pmu=pmu)


def _read_steps(
    src: Source, rows: RowPolicy, hook: BytesHook | None = None, piece_bytes: int = PIECE_BYTES
) -> pl.DataFrame:
    df, _ = read_table(
        src.steps,
        STEP_COLUMNS,
        what="step_trace",
        extra_as_float=False,
        rows=rows,
        hook=hook,
        piece_bytes=piece_bytes,
    )
    if "card" not in df.columns or df["card"].null_count() == df.height:
        df = df.with_columns(pl.lit(src.card or "0", dtype=pl.String).alias("card"))
    return df.select([pl.col(c).cast(t) for c, t in STEP_SCHEMA.items()])


def _read_statistic(
    src: Source, rows: RowPolicy, hook: BytesHook | None = None, piece_bytes: int = PIECE_BYTES
) -> pl.DataFrame:
    df, _ = read_table(
        src.statistic,
        STAT_COLUMNS,
        what="op_statistic",
        extra_as_float=False,
        rows=rows,
        hook=hook,
        piece_bytes=piece_bytes,
    )
    return canonical_statistic(df, card=src.card)
