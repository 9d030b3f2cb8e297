"""A profile as a Perfetto trace: `perfetto_trace(profile, diagnosis)` -> the trace's bytes.

Perfetto's UI (ui.perfetto.dev, "Open trace file") reads its own protobuf format better than
the Chrome JSON msprof and torch_npu write: torch_npu's `trace_view.json` carries its times as
strings of microseconds and about a fifth of its kernels come out mis-nested, and msprof's JSON
is large and slow to load. This module writes `Trace { repeated TracePacket packet = 1; }` with
`TrackDescriptor`s and `TrackEvent` slice begin / end pairs, every timestamp an integer of
nanoseconds taken from the frames as they are (never through a float).

**Format, written by hand.** The few messages used (`TracePacket`, `TrackDescriptor`,
`ProcessDescriptor`, `TrackEvent`, `DebugAnnotation`, `InternedData` with `EventName` and
`DebugAnnotationName`) are encoded here with the field numbers of Perfetto's
`protos/perfetto/trace/perfetto_trace.proto` (as in the `perfetto` PyPI package 0.59.1):
varints, length-delimited fields and fixed64 flow ids, about a hundred lines. The alternative,
the `perfetto` package's `TraceProtoBuilder`, would make `perfetto` and `protobuf` run-time
dependencies of every install for one subcommand (and `perfetto` ships a trace processor
that downloads a binary when used, which these machines must never do), and protobuf's
message objects are slower to build than these byte strings. The tests decode the written
bytes with the package's `perfetto_trace_pb2` (a test dependency only), so a wrong field
number or wire type fails there. Event names and argument names are interned (one sequence,
`SEQ_INCREMENTAL_STATE_CLEARED` on its first event), which keeps a 2M-task trace small.

**Tracks.** Per card a process track (`card 0`), holding, in this order:

- `Steps`: one slice per training step, from the same step boundaries as the Steps tab
  (`parsers/steps.py`: Step Id, step_trace / STEP_TIME, `ProfilerStep#N`, or the capture).
- `Findings`: one instant event per finding of the diagnosis, at the start of its first
  evidence task (else at the card's first task), with the title, severity, time at stake,
  count and advice as args. The evidence tasks also carry the rules in a `findings` arg.
- `Waits`: every wait npuscope gave a cause, as a slice over the idle gap before its task
  (`wait: recompilation`), with the wait, cause, confidence and the task after it.
- `Stream <id>`: the tasks of the tasks frame (one slice per row: op_summary, kernel_details,
  the db's TASK or the timeline's device tasks) with op type, task type, stream, task id,
  shapes, data types, duration, wait, wait cause and block dims as args; `Collectives` holds
  the communication tasks, `Tasks (no stream id)` the others whose stream is unknown.
- `<process> <thread>` (`CANN Thread 41958`, `Python Thread 39559`): the host events of the
  timeline (`Level@api` CANN APIs, framework ops), one track per thread of each process.

Perfetto shows the slices of a track nested by their begin / end order: slices that partly
overlap cannot be drawn on one track. Where two slices of one track overlap partly (tasks of
one stream do in real captures, and host events whose rounded times cross), the later one goes
on a child track `<name> (overlap N)` under its track, so the slices of every track nest or are
disjoint. The device's synchronisation, memory copy and marker events and the timeline's
`Overlap Analysis` and HCCL plane threads are not tasks of the frames and are left out.

**Flows.** Every flow of the timeline (`s` / `f` events with one id: `HostToDevice` from a
host API to the task it launched, torch_npu's `async_npu` and its host-side flows) whose two
ends fall on slices of the trace: the start binds to the innermost host slice open at its
time on its thread; an end on a device stream to the task starting at its time (else the task
open at it) of that stream or of the collectives. A flow with an end on no written slice is
left out and counted (`flows_dropped`). Flow ids are renumbered (the source ids are opaque text
beyond 2^64); where the end slice starts before the start slice (clocks of host and device
apart), the flow is drawn from the earlier one.
"""

from __future__ import annotations

import heapq
import math
import re
import struct
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter

import polars as pl

from npuscope.parsers import Profile, ProfileError
from npuscope.parsers.columns import COMMUNICATION_TASK_TYPES
from npuscope.parsers.steps import WINDOW_SCHEMA, step_windows
from npuscope.parsers.timeline_tasks import COMMUNICATION_PROCESSES, DEVICE_PROCESS

from .diagnose import Diagnosis
from .findings import Finding

# Timeline processes whose events are not written as host tracks: the device's tasks come from
# the tasks frame, and Overlap Analysis is derived from them.
NOT_HOST_PROCESSES = frozenset({DEVICE_PROCESS, *COMMUNICATION_PROCESSES, "Overlap Analysis"})

# TrackEvent.Type
_SLICE_BEGIN = 1
_SLICE_END = 2
_INSTANT = 3
# TracePacket.sequence_flags
_SEQ_INCREMENTAL_STATE_CLEARED = 1
_SEQ_NEEDS_INCREMENTAL_STATE = 2
# TrackDescriptor.ChildTracksOrdering
_EXPLICIT = 3
_SEQUENCE_ID = 1

_U64 = (1 << 64) - 1

# The task columns written as args of a task slice, in this order, and their arg names.
TASK_ARGS: tuple[tuple[str, str], ...] = (
    ("op_type", "op_type"),
    ("task_type", "task_type"),
    ("stream_id", "stream_id"),
    ("task_id", "task_id"),
    ("step_id", "step_id"),
    ("input_shapes", "input_shapes"),
    ("input_dtypes", "input_dtypes"),
    ("output_shapes", "output_shapes"),
    ("duration_us", "duration_us"),
    ("wait_us", "wait_us"),
    ("wait_cause", "wait_cause"),
    ("wait_confidence", "wait_confidence"),
    ("block_num", "block_dim"),
    ("mix_block_num", "mix_block_dim"),
)


# --------------------------------------------------------------------------- protobuf encoding


def _varint_of(n: int) -> bytes:
    if n < 0:
        n &= _U64
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL = [_varint_of(n) for n in range(1 << 14)]  # lengths, iids, uuids: one lookup


# Both 7-bit groups of a 14-bit value, each with the continuation bit: the low groups of a
# larger number.
_LOW14 = [bytes(((n & 0x7F) | 0x80, (n >> 7) | 0x80)) for n in range(1 << 14)]
_HIGH: dict[int, bytes] = {}


def _varint(n: int) -> bytes:
    """A protobuf varint of a non-negative integer (negative ones as 64-bit two's complement).

    Epoch nanoseconds (9 bytes) are most of a trace's varints: their low 28 bits come from two
    table lookups and the rest, the same for 268 ms of times on end, from a small cache.
    """
    if 0 <= n < 16384:
        return _SMALL[n]
    if n < (1 << 28) or n > _U64:
        return _varint_of(n)
    high = n >> 28
    tail = _HIGH.get(high)
    if tail is None:
        if len(_HIGH) > 4096:
            _HIGH.clear()
        tail = _HIGH[high] = _varint_of(high)
    return _LOW14[n & 0x3FFF] + _LOW14[(n >> 14) & 0x3FFF] + tail


def _key(field_number: int, wire: int) -> bytes:
    return _varint(field_number << 3 | wire)


def _uint(field_number: int, value: int) -> bytes:
    return _key(field_number, 0) + _varint(value)


def _bytes(field_number: int, payload: bytes) -> bytes:
    return _key(field_number, 2) + _varint(len(payload)) + payload


def _text(field_number: int, value: str) -> bytes:
    return _bytes(field_number, value.encode("utf-8", "replace"))


def _fixed64(field_number: int, value: int) -> bytes:
    return _key(field_number, 1) + struct.pack("<Q", value & _U64)


def _double(field_number: int, value: float) -> bytes:
    return _key(field_number, 1) + struct.pack("<d", value)


_PACKET = _key(1, 2)  # Trace.packet
_TS = _key(8, 0)  # TracePacket.timestamp
_SEQ = _uint(10, _SEQUENCE_ID)  # TracePacket.trusted_packet_sequence_id
_NEEDS_STATE = _uint(13, _SEQ_NEEDS_INCREMENTAL_STATE)  # TracePacket.sequence_flags
_FIRST_STATE = _uint(13, _SEQ_INCREMENTAL_STATE_CLEARED | _SEQ_NEEDS_INCREMENTAL_STATE)
_TRACK_EVENT = _key(11, 2)  # TracePacket.track_event


def _packet(body: bytes) -> bytes:
    return _PACKET + _varint(len(body)) + body


# --------------------------------------------------------------------------- the trace model


@dataclass(eq=False, slots=True)
class _Slice:
    """One slice to write: [start, end] in ns on a track, its name, its args encoded (a
    DebugAnnotation each), the rules of the findings it is evidence of, and its flows."""

    start: int
    end: int
    name: str
    args: bytes = b""
    rules: list[str] | None = None
    flows_out: list[int] | None = None
    flows_in: list[int] | None = None


# Every arg name the trace uses: interned once, in the first event of the trace.
ARG_NAMES: tuple[str, ...] = (
    *(name for _, name in TASK_ARGS),
    "findings",
    "before",
    "rule",
    "severity",
    "title",
    "confidence",
    "count",
    "time_at_stake_us",
    "share_pct",
    "op_types",
    "advice",
    "threshold",
)
_ARG_IID = {name: i + 1 for i, name in enumerate(dict.fromkeys(ARG_NAMES))}


class _Args:
    """Args to DebugAnnotation bytes; text and whole numbers repeat (op types, shapes, block
    dims) and are encoded once each."""

    def __init__(self) -> None:
        self._memo: dict[tuple[int, type, object], bytes] = {}
        self._double = {iid: _key(4, 2) + _varint(len(_uint(1, iid)) + 9) + _uint(1, iid) for iid in _ARG_IID.values()}
        self._double_key = _key(5, 1)

    def one(self, name: str, value: object) -> bytes:
        if value is None or value == "":
            return b""
        iid = _ARG_IID[name]
        if isinstance(value, float) and math.isfinite(value):
            return self._double[iid] + self._double_key + struct.pack("<d", value)
        key = (iid, value.__class__, value)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = _annotation(iid, value)
        return hit

    def __call__(self, pairs: Iterable[tuple[str, object]]) -> bytes:
        return b"".join(self.one(name, value) for name, value in pairs)

    def column(self, name: str, values: Sequence[object]) -> list[bytes]:
        """The annotation of each value of one column (b"" for none)."""
        one = self.one
        return [one(name, v) for v in values]


@dataclass(eq=False)
class _Track:
    uuid: int
    name: str
    parent: int
    rank: int
    slices: list[_Slice] = field(default_factory=list)
    instants: list[_Slice] = field(default_factory=list)


@dataclass(frozen=True)
class PerfettoTrace:
    """The trace's bytes and what they hold (the counts a command reports)."""

    data: bytes
    cards: tuple[str, ...]
    tracks: int
    tasks: int  # task slices written (rows of the tasks frame)
    tasks_skipped: int  # task rows without a start time
    host_slices: int  # host events written
    host_skipped: int  # host complete events without a usable time or duration
    steps: int
    waits: int
    findings: int  # instant events
    flows: int
    flows_dropped: int  # flows of the timeline with an end on no written slice
    overlap_tracks: int  # child tracks holding slices that partly overlapped others


# --------------------------------------------------------------------------- building


class _Builder:
    def __init__(self) -> None:
        self.tracks: list[_Track] = []
        self.processes: list[tuple[int, int, str]] = []  # uuid, pid, name
        self.args = _Args()
        self._next_uuid = 1000

    def uuid(self) -> int:
        self._next_uuid += 1
        return self._next_uuid

    def process(self, name: str) -> int:
        uuid = self.uuid()
        self.processes.append((uuid, len(self.processes) + 1, name))
        return uuid

    def track(self, name: str, parent: int, rank: int) -> _Track:
        track = _Track(self.uuid(), name, parent, rank)
        self.tracks.append(track)
        return track


def perfetto_trace(profile: Profile, diagnosis: Diagnosis, cards: Sequence[str] | None = None) -> PerfettoTrace:
    """The Perfetto trace of `cards` (default: the diagnosis' cards, and the host events no
    card owns) of `profile`, with the wait causes and findings of `diagnosis`.

    Raises ProfileError when the start times cannot make a timeline (a spreadsheet re-save) or
    there is nothing with a time to write.
    """
    if profile.time_problem is not None:
        raise ProfileError(f"{profile.capture.name}: no timeline to export: {profile.time_problem}")
    chosen = tuple(cards) if cards is not None else diagnosis.cards
    tasks = diagnosis.tasks.filter(pl.col("card").is_in(list(chosen)))
    events = profile.events
    host_cards = [*chosen, "host"] if cards is None else list(chosen)
    host = _host_events(events, host_cards)
    if tasks.height == 0 and host.height == 0:
        raise ProfileError(
            f"{profile.capture.name}: nothing to export: no task or timeline event with a time on "
            f"card(s) {', '.join(chosen) or 'none'}"
        )
    b = _Builder()
    windows = _windows(profile, chosen)
    index = _Index()
    counts: dict[str, int] = {k: 0 for k in ("tasks", "tasks_skipped", "host", "host_skipped", "steps", "waits")}
    findings_written = 0
    order = list(chosen)
    if cards is None and "host" in set(host["card"].to_list()) and "host" not in order:
        order.append("host")
    for card in order:
        proc = b.process(f"card {card}" if card != "host" else "host (no card)")
        mine = tasks.filter(pl.col("card") == card)
        counts["steps"] += _add_steps(b, proc, windows.filter(pl.col("card") == card))
        task_slices = _task_slices(mine, b.args)
        findings_written += _add_findings(b, proc, diagnosis.for_card(card), mine, task_slices)
        counts["waits"] += _add_waits(b, proc, mine)
        counts["tasks"] += _add_tasks(b, proc, card, mine, task_slices, index)
        counts["tasks_skipped"] += mine.height - len(task_slices)
        written, skipped = _add_host(b, proc, card, host.filter(pl.col("card") == card), index)
        counts["host"] += written
        counts["host_skipped"] += skipped
    flows, dropped = _bind_flows(events, set(order), index)
    data, overlap_tracks, total_tracks = _encode(b)
    return PerfettoTrace(
        data=data,
        cards=tuple(order),
        tracks=total_tracks,
        tasks=counts["tasks"],
        tasks_skipped=counts["tasks_skipped"],
        host_slices=counts["host"],
        host_skipped=counts["host_skipped"],
        steps=counts["steps"],
        waits=counts["waits"],
        findings=findings_written,
        flows=flows,
        flows_dropped=dropped,
        overlap_tracks=overlap_tracks,
    )


def _windows(profile: Profile, cards: Sequence[str]) -> pl.DataFrame:
    if profile.tasks.height == 0:
        return pl.DataFrame(schema=WINDOW_SCHEMA)
    steps_from = "STEP_TIME" if profile.source_kind == "db" else "step_trace"
    return step_windows(profile.tasks, profile.steps, profile.events, list(cards), steps_from).frame


def _host_events(events: pl.DataFrame | None, cards: list[str]) -> pl.DataFrame:
    schema = {"card": pl.String, "process": pl.String, "thread": pl.String, "name": pl.String}
    if events is None or events.height == 0:
        return pl.DataFrame(schema={**schema, "ts_ns": pl.Int64, "dur_ns": pl.Int64})
    return events.filter(
        (pl.col("ph") == "X")
        & pl.col("card").is_in(cards)
        & ~pl.col("process").is_in(list(NOT_HOST_PROCESSES)).fill_null(False)
    ).select("card", "process", "thread", "name", "ts_ns", "dur_ns")


def _ns(us: pl.Expr) -> pl.Expr:
    return (us.fill_null(0.0).clip(lower_bound=0.0) * 1000).round(0).cast(pl.Int64)


def _task_slices(tasks: pl.DataFrame, encode: _Args) -> dict[int, _Slice]:
    """A slice per task row with a start time, by the diagnosis' row number."""
    cols = [c for c, _ in TASK_ARGS if c in tasks.columns]
    frame = tasks.filter(pl.col("start_ns").is_not_null() & (pl.col("start_ns") >= 0)).select(
        "row", "op_name", "start_ns", (pl.col("start_ns") + _ns(pl.col("duration_us"))).alias("_end"), *cols
    )
    names = dict(TASK_ARGS)
    encoded = [encode.column(names[c], frame[c].to_list()) for c in cols]
    args = map(b"".join, zip(*encoded)) if encoded else iter(lambda: b"", None)
    rows = frame.select("row", "op_name", "start_ns", "_end").iter_rows()
    return {row: _Slice(start, end, name or "(no name)", arg) for (row, name, start, end), arg in zip(rows, args)}


def _add_steps(b: _Builder, proc: int, windows: pl.DataFrame) -> int:
    if windows.height == 0:
        return 0
    track = b.track("Steps", proc, 0)
    for step, start, end in windows.sort("start_ns").select("step", "start_ns", "end_ns").iter_rows():
        if start is None or end is None or start < 0:
            continue
        end = max(end, start)
        name = f"step {step}" if step is not None else "capture"
        track.slices.append(_Slice(start, end, name, b.args([("duration_us", (end - start) / 1000)])))
    return len(track.slices)


def _add_findings(
    b: _Builder, proc: int, findings: Iterable[Finding], tasks: pl.DataFrame, slices: dict[int, _Slice]
) -> int:
    found = list(findings)
    if not found:
        return 0
    first = min((s.start for s in slices.values()), default=None)
    track = b.track("Findings", proc, 1)
    for f in found:
        rows = [e.get("row") for e in f.evidence] if not f.view else []
        evidence = [slices[r] for r in rows if isinstance(r, int) and r in slices]
        for s in evidence:
            if s.rules is None:
                s.rules = []
            if f.rule not in s.rules:
                s.rules.append(f.rule)
        at = evidence[0].start if evidence else first
        if at is None:
            continue
        args: list[tuple[str, object]] = [
            ("rule", f.rule),
            ("severity", f.severity),
            ("title", f.title),
            ("confidence", f.confidence),
            ("count", f.count),
            # Rounded: the last digits of a float sum vary with the order polars adds in.
            ("time_at_stake_us", round(f.time_us, 3)),
            ("share_pct", round(f.share_pct, 2)),
            ("op_types", ", ".join(f.op_types)),
            ("advice", f.advice),
            ("threshold", f.threshold),
        ]
        name = f"{f.severity.upper()} {f.rule}"
        track.instants.append(_Slice(at, at, name, b.args(args)))
    return len(track.instants)


def _add_waits(b: _Builder, proc: int, tasks: pl.DataFrame) -> int:
    if "wait_cause" not in tasks.columns:
        return 0
    waits = tasks.filter(
        pl.col("wait_cause").is_not_null() & pl.col("start_ns").is_not_null() & (pl.col("wait_us") > 0)
    ).select(
        "start_ns",
        (pl.col("start_ns") - _ns(pl.col("wait_us"))).alias("_from"),
        "wait_us",
        "wait_cause",
        "wait_confidence",
        "op_name",
    )
    if waits.height == 0:
        return 0
    track = b.track("Waits", proc, 2)
    for start, begin, wait, cause, confidence, op in waits.sort("_from").iter_rows():
        args: list[tuple[str, object]] = [("wait_us", wait), ("wait_cause", cause), ("before", op or "")]
        if confidence:
            args.insert(2, ("wait_confidence", confidence))
        track.slices.append(_Slice(max(begin, 0), start, f"wait: {cause}", b.args(args)))
    return waits.height


def _stream_key(stream: str) -> tuple[int, int | str]:
    return (0, int(stream)) if stream.isdigit() else (1, stream)


def _add_tasks(b: _Builder, proc: int, card: str, tasks: pl.DataFrame, slices: dict[int, _Slice], index: _Index) -> int:
    if not slices:
        return 0
    comm = tasks.select(
        "row",
        pl.col("task_type").is_in(COMMUNICATION_TASK_TYPES).fill_null(False).alias("_comm"),
        pl.col("stream_id"),
    )
    streams: dict[str, list[_Slice]] = {}
    collectives: list[_Slice] = []
    loose: list[_Slice] = []
    for row, is_comm, stream in comm.iter_rows():
        s = slices.get(row)
        if s is None:
            continue
        if is_comm:
            collectives.append(s)
        elif stream is None or stream == "":
            loose.append(s)
        else:
            streams.setdefault(stream, []).append(s)
    rank = 10
    for stream in sorted(streams, key=_stream_key):
        track = b.track(f"Stream {stream}", proc, rank)
        track.slices = streams[stream]
        index.add((card, "stream", stream), track.slices)
        rank += 1
    if collectives:
        track = b.track("Collectives", proc, rank)
        track.slices = collectives
        index.add((card, "comm", ""), collectives)
    if loose:
        track = b.track("Tasks (no stream id)", proc, rank + 1)
        track.slices = loose
        index.add((card, "loose", ""), loose)
    index.add((card, "tasks", ""), list(slices.values()))
    return len(slices)


def _add_host(b: _Builder, proc: int, card: str, host: pl.DataFrame, index: _Index) -> tuple[int, int]:
    usable = host.filter(pl.col("ts_ns").is_not_null() & (pl.col("ts_ns") >= 0) & (pl.col("dur_ns") >= 0))
    skipped = host.height - usable.height
    threads: dict[tuple[str, str], list[_Slice]] = {}
    for process, thread, name, ts, dur in usable.select("process", "thread", "name", "ts_ns", "dur_ns").iter_rows():
        key = (process or "", thread or "")
        threads.setdefault(key, []).append(_Slice(ts, ts + dur, name or "(no name)"))
    rank = 1000
    for (process, thread), slices in sorted(threads.items()):
        track = b.track(f"{process} {thread}".strip() or "host", proc, rank)
        track.slices = slices
        index.add((card, "host", f"{process}\x00{thread}"), slices)
        rank += 1
    return usable.height, skipped


# --------------------------------------------------------------------------- flows


class _Lookup:
    """The slices of one thread or stream, to find the one a flow end falls on."""

    def __init__(self, slices: list[_Slice]) -> None:
        ordered = _by_start(slices)
        self.slices = ordered
        self.starts = [s.start for s in ordered]
        # The innermost of the slices starting at one time (the shortest, the last in order).
        self.exact: dict[int, _Slice] = dict(zip(self.starts, ordered))

    def at(self, ts: int) -> _Slice | None:
        """The slice starting at `ts`, else the innermost one open at it."""
        hit = self.exact.get(ts)
        if hit is not None:
            return hit
        # Walking back from the last slice starting by `ts`, the first one still open at it
        # is the innermost (the slices of one thread nest); a bounded walk.
        i = bisect_right(self.starts, ts) - 1
        for j in range(i, max(-1, i - 256), -1):
            if self.slices[j].end >= ts:
                return self.slices[j]
        return None


class _Index:
    def __init__(self) -> None:
        self._slices: dict[tuple[str, str, str], list[_Slice]] = {}
        self._lookups: dict[tuple[str, str, str], _Lookup] = {}

    def add(self, key: tuple[str, str, str], slices: list[_Slice]) -> None:
        self._slices.setdefault(key, []).extend(slices)

    def find(self, key: tuple[str, str, str], ts: int) -> _Slice | None:
        lookup = self._lookups.get(key)
        if lookup is None:
            slices = self._slices.get(key)
            if not slices:
                return None
            lookup = self._lookups[key] = _Lookup(slices)
        return lookup.at(ts)


_STREAM = re.compile(r"^Stream\s+(\S+)$")


def _end_keys(card: str, process: str, thread: str) -> list[tuple[str, str, str]]:
    """Where a flow end on this thread of the timeline may fall, in order (module docstring)."""
    if process == DEVICE_PROCESS or process in COMMUNICATION_PROCESSES:
        m = _STREAM.match(thread)
        keys: list[tuple[str, str, str]] = []
        if process in COMMUNICATION_PROCESSES or "Communication" in thread:
            keys.append((card, "comm", ""))
        if m:
            keys.append((card, "stream", m.group(1)))
        keys.append((card, "tasks", ""))  # any task of the card starting at the time
        return keys
    return [(card, "host", f"{process}\x00{thread}")]


def _end_slice(index: _Index, keys: list[tuple[str, str, str]], ts: int) -> _Slice | None:
    for key in keys:
        hit = index.find(key, ts)
        if hit is not None and (hit.start == ts or key[1] != "tasks"):
            return hit
    return None


def _bind_flows(events: pl.DataFrame | None, cards: set[str], index: _Index) -> tuple[int, int]:
    """Attach every flow of the timeline whose ends fall on written slices; (written, left out)."""
    if events is None or events.height == 0:
        return 0, 0
    ends = events.filter(
        pl.col("ph").is_in(["s", "f"]) & pl.col("flow_id").is_not_null() & pl.col("ts_ns").is_not_null()
    ).select("card", "process", "thread", "ph", "ts_ns", "flow_id", "cat")
    if ends.height == 0:
        return 0, 0
    fields = ("card", "process", "thread", "ts_ns")
    pairs = (
        ends.with_columns(pl.col("process", "thread").fill_null(""))
        .sort("ts_ns")
        .group_by("cat", "flow_id", maintain_order=True)
        .agg(
            *(pl.col(c).filter(pl.col("ph") == "s").first().alias(f"s_{c}") for c in fields),
            *(pl.col(c).filter(pl.col("ph") == "f").first().alias(f"f_{c}") for c in fields),
        )
        .drop("cat", "flow_id")
    )
    keys: dict[tuple[str, str, str], list[tuple[str, str, str]]] = {}
    written = dropped = 0
    for s_card, s_proc, s_thread, s_ts, f_card, f_proc, f_thread, f_ts in pairs.iter_rows():
        if s_card not in cards and f_card not in cards:
            continue  # a flow of cards not exported
        if s_ts is None or f_ts is None:
            dropped += 1
            continue
        s_at = (s_card, s_proc, s_thread)
        f_at = (f_card, f_proc, f_thread)
        if s_at not in keys:
            keys[s_at] = _end_keys(*s_at)
        if f_at not in keys:
            keys[f_at] = _end_keys(*f_at)
        src = _end_slice(index, keys[s_at], s_ts)
        dst = _end_slice(index, keys[f_at], f_ts)
        if src is None or dst is None or src is dst:
            dropped += 1
            continue
        if dst.start < src.start:
            src, dst = dst, src
        written += 1
        if src.flows_out is None:
            src.flows_out = []
        src.flows_out.append(written)
        if dst.flows_in is None:
            dst.flows_in = []
        dst.flows_in.append(written)
    return written, dropped


# --------------------------------------------------------------------------- lanes


def _by_start(slices: list[_Slice]) -> list[_Slice]:
    """By start, the longest first at one start (two stable sorts: no key tuples)."""
    return sorted(sorted(slices, key=attrgetter("end"), reverse=True), key=attrgetter("start"))


def _lanes(slices: list[_Slice]) -> list[list[tuple[int, _Slice | None]]]:
    """The slices of one track as lanes of (ts, slice) begin / (ts, None) end events.

    Sorted by start (longest first): a slice goes on the first lane where it nests in the
    open slice or follows it, so every lane's slices nest or are disjoint, and each lane's
    events are in time order, ends before begins at one time.
    """
    order = _by_start(slices)
    stacks: list[list[int]] = [[]]
    lanes: list[list[tuple[int, _Slice | None]]] = [[]]
    first_stack, first_lane = stacks[0], lanes[0]
    for s in order:
        start, end = s.start, s.end
        while first_stack and first_stack[-1] <= start:  # the first lane, inline: most slices
            first_lane.append((first_stack.pop(), None))
        if not first_stack or end <= first_stack[-1]:
            first_stack.append(end)
            first_lane.append((start, s))
            continue
        for i in range(1, len(stacks) + 1):
            if i == len(stacks):
                stacks.append([])
                lanes.append([])
            stack, events = stacks[i], lanes[i]
            while stack and stack[-1] <= start:
                events.append((stack.pop(), None))
            if not stack or end <= stack[-1]:
                stack.append(end)
                events.append((start, s))
                break
    for stack, events in zip(stacks, lanes):
        while stack:
            events.append((stack.pop(), None))
    return lanes


# --------------------------------------------------------------------------- writing


class _Interner:
    def __init__(self, field_number: int) -> None:
        self.field = field_number
        self.ids: dict[str, int] = {}
        self.pending: list[bytes] = []

    def __call__(self, name: str) -> int:
        iid = self.ids.get(name)
        if iid is None:
            iid = self.ids[name] = len(self.ids) + 1
            self.pending.append(_bytes(self.field, _uint(1, iid) + _text(2, name)))
        return iid

    def take(self) -> bytes:
        out = b"".join(self.pending)
        self.pending.clear()
        return out


def _annotation(name_iid: int, value: object) -> bytes:
    head = _uint(1, name_iid)
    if isinstance(value, bool):
        body = _uint(2, int(value))
    elif isinstance(value, int):
        body = _uint(4, value)
    elif isinstance(value, float):
        body = _double(5, value) if math.isfinite(value) else _text(6, str(value))
    else:
        body = _text(6, str(value))
    return _bytes(4, head + body)


def _track_descriptors(b: _Builder) -> Iterator[bytes]:
    for uuid, pid, name in b.processes:
        desc = _uint(1, uuid) + _bytes(3, _uint(1, pid) + _text(6, name)) + _uint(11, _EXPLICIT)
        yield _packet(_SEQ + _bytes(60, desc))
    for track in b.tracks:
        desc = _uint(1, track.uuid) + _text(2, track.name) + _uint(5, track.parent) + _uint(12, track.rank)
        yield _packet(_SEQ + _bytes(60, desc))


def _encode(b: _Builder) -> tuple[bytes, int, int]:
    """The trace's bytes, the number of overlap tracks and of all tracks."""
    streams: list[Iterator[tuple[int, int, _Slice | None]]] = []
    extra: list[_Track] = []
    for track in b.tracks:
        if track.instants:
            streams.append(iter([(s.start, track.uuid, s) for s in sorted(track.instants, key=lambda s: s.start)]))
        if not track.slices:
            continue
        for n, events in enumerate(_lanes(track.slices)):
            uuid = track.uuid
            if n:
                lane = _Track(b.uuid(), f"{track.name} (overlap {n})", track.uuid, n)
                extra.append(lane)
                uuid = lane.uuid
            streams.append(iter([(ts, uuid, s) for ts, s in events]))
    b.tracks.extend(extra)
    names = _Interner(2)  # InternedData.event_names
    arg_names = b"".join(_bytes(3, _uint(1, iid) + _text(2, name)) for name, iid in _ARG_IID.items())
    findings_iid = _ARG_IID["findings"]
    out = list(_track_descriptors(b))
    first = True
    ends: dict[int, bytes] = {}
    heads: dict[int, bytes] = {}  # TrackEvent.type and .track_uuid, per track
    name_fields: dict[str, bytes] = {}  # TrackEvent.name_iid, per name
    instants = {t.uuid for t in b.tracks if t.instants}
    for ts, uuid, s in heapq.merge(*streams, key=itemgetter(0)):
        if s is None:
            tail = ends.get(uuid)
            if tail is None:
                tail = ends[uuid] = _SEQ + _NEEDS_STATE + _bytes(11, _uint(9, _SLICE_END) + _uint(11, uuid))
            body = _TS + _varint(ts) + tail
            out.append(_PACKET + _SMALL[len(body)] + body)
            continue
        head = heads.get(uuid)
        if head is None:
            head = heads[uuid] = _uint(9, _INSTANT if uuid in instants else _SLICE_BEGIN) + _uint(11, uuid)
        name = name_fields.get(s.name)
        if name is None:
            name = name_fields[s.name] = _uint(10, names(s.name))
        event = [head, name, s.args]
        if s.rules:
            event.append(_annotation(findings_iid, ", ".join(s.rules)))
        if s.flows_out:
            event += [_fixed64(47, f) for f in s.flows_out]
        if s.flows_in:
            event += [_fixed64(48, f) for f in s.flows_in]
        interned = names.take() if names.pending else b""
        flags = _NEEDS_STATE
        if first:
            interned += arg_names
            flags = _FIRST_STATE
            first = False
        te = b"".join(event)
        packet = _TS + _varint(ts) + _SEQ + flags + (_bytes(12, interned) if interned else b"")
        out.append(_packet(packet + _TRACK_EVENT + _varint(len(te)) + te))
    return b"".join(out), len(extra), len(b.processes) + len(b.tracks)
