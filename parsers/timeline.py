"""Chrome-trace timelines (msprof_*.json, trace_view.json, *.paddle_trace.json) to one frame.

A timeline can be hundreds of MB: its event array is cut into pieces of ~8 MB, each parsed
by polars (by orjson when polars cannot) and turned at once into typed columns, so only one
piece is ever held as Python objects. Between pieces the caller's hook sees the bytes read so
far: a progress bar moves, a cancelled load stops, and no single call holds the GIL for long
(the explorer's event loop runs meanwhile). The garbage collector is left as it is: its
state is the whole process's, and a load runs beside the explorer's other threads.
Processes are named by their `process_name` metadata, never by pid value: three pid
encodings exist in the wild.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Callable, Collection, Generator, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO

import orjson
import polars as pl

from .columns import EVENT_SCHEMA
from .csv_table import times_to_ns
from .errors import ProfileError, reading
from .in_order import in_order
from .memory import ensure_fits
from .progress import BytesHook

Meta = dict[str, dict[Any, str]]
"""Names from the metadata events: process and labels by pid, thread by (pid, tid)."""

# `NPU 3` in Era B merged exports; torch_npu writes a bare `NPU` (one card per output).
_NPU_LABEL = re.compile(r"NPU\s*(\d*)")


def load_json(path: Path) -> object:
    with reading(path):
        data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):  # a UTF-8 BOM, as some editors save
        data = data[3:]
    if not data.strip():
        raise ProfileError(f"{path}: the file is empty; re-export the profile with msprof")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as bad:
            line = data.count(b"\n", 0, bad.start) + 1
            raise ProfileError(
                f"{path}: line {line} is not UTF-8 text (byte {bad.start}); re-export the "
                "timeline or convert it to UTF-8"
            ) from None
        pos = getattr(exc, "pos", None)
        where = f" at byte {pos} of {len(data)} (line {exc.lineno})" if pos is not None else ""
        if pos is not None and pos >= len(data.rstrip()) - 1:
            raise ProfileError(
                f"{path}: the JSON ends too early{where}; the file was truncated, export or copy it again"
            ) from None
        raise ProfileError(f"{path}: invalid JSON{where}: {exc.msg}; export or copy the file again") from None


def _events_of(path: Path, data: object) -> list[Any]:
    events = None
    if isinstance(data, list):
        events = data
    elif isinstance(data, dict) and isinstance(data.get("traceEvents"), list):
        events = data["traceEvents"]
    # A trace event always has a phase; an array of other objects is some other JSON.
    if events is None or (events and not any(isinstance(e, dict) and "ph" in e for e in events[:1000])):
        raise ProfileError(
            f"{path}: not a Chrome-trace timeline (expected a JSON array of events with a 'ph' "
            "field, or an object with 'traceEvents'); point npuscope at an msprof_*.json, "
            "trace_view.json or *.paddle_trace.json"
        )
    return events


# Every field is read as text: numbers and strings both occur for pid, tid, ts and id, and
# text keeps every digit of epoch-scale times and flow ids beyond 2^53.
_ARG_KEYS = ("Task Type", "Physic Stream Id", "Stream Id", "Task Id", "connection_id", "name", "labels")
_RAW_SCHEMA: dict[str, pl.DataType] = {
    **{k: pl.String() for k in ("name", "ph", "pid", "tid", "ts", "dur", "cat", "id")},
    "args": pl.Struct({k: pl.String for k in _ARG_KEYS}),
}


_OBJECT_WINDOW = 1 << 16
"""A piece holding this many bytes without an object's opening brace goes to orjson: polars'
reader is quadratic in an object's keys (one event of 10^6 duplicate keys, 11 MB: 56 s; orjson
0.1 s), while real events are a few hundred bytes. One `find` per window stops at the window's
first brace: microseconds for an 8 MB piece (counting its braces would take ~8 ms)."""


def _has_huge_object(buf: bytes) -> bool:
    """Whether some window of `_OBJECT_WINDOW` bytes of `buf` holds no `{` (the last window
    ends at the end of `buf`, so a short tail is never a window of its own)."""
    last = len(buf) - _OBJECT_WINDOW
    return any(
        buf.find(b"{", start, start + _OBJECT_WINDOW) < 0
        for start in (min(i, last) for i in range(0, len(buf), _OBJECT_WINDOW))
    )


def _raw_polars(buf: bytes) -> pl.DataFrame | None:
    """A chunk of events parsed by polars into text columns, or None if it cannot (or should
    not: `_has_huge_object`)."""
    if len(buf) > _OBJECT_WINDOW and _has_huge_object(buf):
        return None
    try:
        return pl.read_json(io.BytesIO(buf), schema=_RAW_SCHEMA)
    except (pl.exceptions.PolarsError, ValueError, OverflowError):
        return None


def _text(value: object) -> str | None:
    if value is None:
        return None
    if value.__class__ is str:
        return value
    return repr(value) if value.__class__ is float else str(value)


def _raw_dicts(events: list[Any]) -> pl.DataFrame:
    """The same text columns from already parsed event dicts (the fallback path)."""
    data = [e for e in events if e.__class__ is dict]
    cols = {
        k: pl.Series([_text(e.get(k)) for e in data], dtype=pl.String)
        for k in ("name", "ph", "pid", "tid", "ts", "dur", "cat", "id")
    }
    args: list[dict[str, Any]] = [e["args"] if isinstance(e.get("args"), dict) else {} for e in data]
    cols["args"] = pl.DataFrame(
        {k: pl.Series([_text(a.get(k)) for a in args], dtype=pl.String) for k in _ARG_KEYS}
    ).to_struct("args")
    return pl.DataFrame(cols)


def _typed(raw: pl.DataFrame, meta: Meta, keep: Collection[str] | None = None) -> pl.DataFrame:
    """Text columns to typed event columns; metadata events fill `meta` and are dropped."""
    rows, events = _split(raw, keep)
    _add_meta(rows, meta)
    return events


MetaRows = list[tuple[Any, ...]]
"""Metadata events of a piece: (name, pid, tid, value, labels), in file order."""


def _add_meta(rows: MetaRows, meta: Meta) -> None:
    for name, pid, tid, value, labels in rows:
        if name == "process_name":
            meta["process"][pid] = value or ""
        elif name == "process_labels":
            meta["labels"][pid] = labels or ""
        elif name == "thread_name":
            meta["thread"][(pid, tid)] = value or ""


# What resolving the events reads besides the columns kept: processes and threads by pid and
# tid, host threads' cards by their flows.
_RESOLVE_COLUMNS = frozenset({"pid", "tid", "flow_id"})


def _split(raw: pl.DataFrame, keep: Collection[str] | None = None) -> tuple[MetaRows, pl.DataFrame]:
    """A piece's metadata rows and its other events as typed columns (no shared state: this
    runs in the parse threads, `_add_meta` in the reader's, piece after piece); only the
    columns in `keep` (and what resolving reads) when it is given."""
    m = raw.filter(pl.col("ph") == "M").select(
        "name",
        "pid",
        "tid",
        pl.col("args").struct.field("name").alias("value"),
        pl.col("args").struct.field("labels").alias("labels"),
    )
    ev = raw.filter(pl.col("ph").is_not_null() & (pl.col("ph") != "M"))

    def arg(c: str) -> pl.Expr:
        return pl.col("args").struct.field(c)

    typed = ev.select(
        "pid",
        "tid",
        "name",
        "ph",
        times_to_ns(ev["ts"], 1000).alias("ts_ns"),
        # Durations are small: Float64 is exact enough, and rounds as the trace meant.
        # A duration that is not a finite number of a sane size (inf, 1e400) is no duration.
        pl.when(pl.col("dur").cast(pl.Float64, strict=False).abs() < 1e15)
        .then((pl.col("dur").cast(pl.Float64, strict=False) * 1000).round(0).cast(pl.Int64, strict=False))
        .alias("dur_ns"),
        "cat",
        pl.col("id").alias("flow_id"),
        pl.col("args").struct.field("Task Type").alias("task_type"),
        # Ids stay text: CANN 8.5 writes connection_id 2^64-1.
        pl.coalesce(arg("Physic Stream Id"), arg("Stream Id")).alias("stream_id"),
        arg("Task Id").alias("task_id"),
        arg("connection_id").alias("connection_id"),
    )
    if keep is not None:
        typed = typed.select(c for c in typed.columns if c in keep or c in _RESOLVE_COLUMNS)
    return m.rows(), typed


class _SplitFailed(Exception):
    """A chunk did not parse on its own: read the file whole (and report where it breaks)."""


# ~0.3 s of parsing per piece on a loaded 2-core machine (progress moves, cancel is seen, at
# least that often), and no slower in total than 32 MB pieces (300 MB: 7.2-12 s against 15-17 s).
CHUNK_BYTES = 8 << 20
# Between two events of the event array: `},{`, `}, {`, `},\n  {`.
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_TRACE_EVENTS = re.compile(rb'"traceEvents"\s*:\s*\[')


def _pieces(path: Path, chunk_bytes: int) -> Generator[bytes, None, None]:
    """The event array of a trace as JSON arrays of about `chunk_bytes` each.

    A 300 MB timeline held as Python dicts takes ~9x its size; cutting the array at event
    boundaries and parsing ~8 MB at a time keeps peak memory near 3x. A cut that lands
    inside a string leaves a piece that does not parse, which `_SplitFailed` turns into a
    whole-file read, so a wrong cut can never produce wrong events.

    The file is read piece by piece, never mapped: the pages of a mapped file count in the
    process's resident memory once touched, and a whole 1.8 GB timeline would add its size
    to the peak.
    """
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            raise _SplitFailed
        first = fh.read(4096)
        head = first.removeprefix(b"\xef\xbb\xbf").lstrip()
        if head.startswith(b"["):
            start = first.find(b"[") + 1
        else:  # Paddle: {"displayTimeUnit": ..., "traceEvents": [...], "ExtraInfo": {...}}
            found = _find(fh, _TRACE_EVENTS, 0, size) if head.startswith(b"{") else None
            if found is None:
                raise _SplitFailed
            start = found[1]
        last = _rfind(fh, b"]", size)
        if last < start:
            raise _SplitFailed
        while start < last:
            cut = _find(fh, _BOUNDARY, start + chunk_bytes, last) if start + chunk_bytes < last else None
            end = cut[0] + 1 if cut else last
            fh.seek(start)
            yield b"[" + fh.read(end - start) + b"]"
            start = cut[1] - 1 if cut else last


_BLOCK = 1 << 16


def _find(fh: BinaryIO, pattern: re.Pattern[bytes], pos: int, endpos: int) -> tuple[int, int] | None:
    """(start, end) in the file of the first match of `pattern` that starts at or after `pos`
    and ends by `endpos`, as `pattern.search(file, pos, endpos)` would give it.

    Read in growing windows; a match that reaches the window's end may be cut short by it
    (`\\s*`), so it counts only once the window reaches `endpos` or goes past the match.
    """
    if endpos <= pos:
        return None
    window = _BLOCK
    while True:
        stop = min(pos + window, endpos)
        fh.seek(pos)
        buf = fh.read(stop - pos)
        m = pattern.search(buf)
        if m is not None and (m.end() < len(buf) or stop == endpos):
            return pos + m.start(), pos + m.end()
        if stop == endpos:
            return None
        window *= 4


def _rfind(fh: BinaryIO, byte: bytes, size: int) -> int:
    """The offset of the last `byte` in the file, or -1."""
    end = size
    while end > 0:
        begin = max(0, end - _BLOCK)
        fh.seek(begin)
        at = fh.read(end - begin).rfind(byte)
        if at >= 0:
            return begin + at
        end = begin
    return -1


def _orjson_piece(buf: bytes) -> pl.DataFrame:
    """A piece polars refused, parsed by orjson (or `_SplitFailed` when it is no JSON)."""
    try:
        return _raw_dicts(orjson.loads(buf))
    except orjson.JSONDecodeError:
        raise _SplitFailed from None


# Pieces parsed at a time: polars releases the GIL while it parses, so a second piece uses the
# second core (337 MB: 4.7 s of read_json one piece at a time, 2.3 s two at a time).
_PIECES_AT_ONCE = 2


@dataclass(frozen=True)
class _Piece:
    size: int  # the piece's bytes of the file (without the two brackets `_pieces` added)
    meta: MetaRows
    events: pl.DataFrame  # typed
    no_phase: bool  # no event of the piece has a `ph`: not a trace


def _piece_of(buf: bytes, raw: pl.DataFrame, keep: Collection[str] | None = None) -> _Piece:
    rows, events = _split(raw, keep)
    return _Piece(len(buf) - 2, rows, events, bool(raw.height) and raw["ph"].null_count() == raw.height)


def _polars_piece(buf: bytes, keep: Collection[str] | None = None) -> _Piece | None:
    raw = _raw_polars(buf)
    return None if raw is None else _piece_of(buf, raw, keep)


def _parsed_pieces(path: Path, chunk_bytes: int, keep: Collection[str] | None = None) -> Iterator[_Piece]:
    """Each piece of `_pieces`, parsed and typed, in order.

    polars parses and types up to `_PIECES_AT_ONCE` pieces in threads; a piece it refuses is
    parsed by orjson here, in the caller's thread. Stopping early (a hook that raises) drops
    the parses in flight.
    """
    pieces = _pieces(path, chunk_bytes)
    parse = partial(_polars_piece, keep=keep)
    try:
        for buf, piece in in_order(parse, ((b, b) for b in pieces), at_once=_PIECES_AT_ONCE, name="npuscope-json"):
            yield piece if piece is not None else _piece_of(buf, _orjson_piece(buf), keep)
    finally:
        pieces.close()


def _check_trace(path: Path, no_phase: bool) -> None:
    if no_phase:
        raise ProfileError(
            f"{path}: not a Chrome-trace timeline (expected a JSON array of events with a 'ph' "
            "field, or an object with 'traceEvents'); point npuscope at an msprof_*.json, "
            "trace_view.json or *.paddle_trace.json"
        )


def read_timeline(
    paths: Sequence[Path],
    *,
    card: str | None = None,
    on_file: Callable[[Path], None] | None = None,
    chunk_bytes: int = CHUNK_BYTES,
    columns: Collection[str] | None = None,
    hook: BytesHook | None = None,
) -> pl.DataFrame:
    """Events of one timeline (its slices in order) with processes and cards resolved.

    `columns`, when given, are the event columns the caller reads: the others are null, and
    not held while the file is read. `hook(bytes_read)` runs in this thread after each piece
    (bytes over all of `paths`); it may raise (a cancelled load) to stop the read, and its
    exception leaves `read_timeline` as is.

    `card` is the card the files belong to when the layout says so (Era A `device_N`, one
    torch_npu output); otherwise the card comes from the process label (`NPU 3`), and host
    processes belong to the only card or, with several, to `host`.
    """
    ensure_fits(paths, "json")
    meta: Meta = {"process": {}, "labels": {}, "thread": {}}
    frames: list[pl.DataFrame] = []
    files_done = 0  # bytes of the files read to their end
    for path in paths:
        before = files_done
        mark = len(frames)
        whole = False
        try:
            for i, piece in enumerate(_parsed_pieces(path, chunk_bytes, columns)):
                if hook is not None:
                    before += piece.size
                    hook(before)
                if i == 0:
                    _check_trace(path, piece.no_phase)
                _add_meta(piece.meta, meta)
                frames.append(piece.events)
        except (_SplitFailed, OSError):
            whole = True
        if whole:
            # Whole-file read: either it parses (a cut fell inside a string) or it raises
            # the one-line error that says where the file is broken.
            del frames[mark:]
            if hook is not None:
                hook(before)  # a cancelled load stops before the long read
            events = _events_of(path, load_json(path))
            raw = _raw_dicts(events)
            del events
            frames.append(_typed(raw, meta, columns))
        files_done += _file_size(path)
        if hook is not None:
            hook(files_done)
        if on_file is not None:
            on_file(path)
    if not frames:
        return empty_events()
    return _resolve(frames, meta, card, columns)


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _resolve(
    frames: list[pl.DataFrame], meta: Meta, card: str | None, keep: Collection[str] | None = None
) -> pl.DataFrame:
    """The pieces' events with their process, thread and card, as one frame.

    Piece by piece: a column added to the whole frame would come out in one chunk and make
    polars copy every other column into one chunk too (on a 1.8 GB timeline, +3.3 GB).
    """
    proc = meta["process"]
    labels = meta["labels"]
    npu = {}
    for pid, label in labels.items():
        m = _NPU_LABEL.search(label)
        if m:
            npu[pid] = m.group(1) or "0"
    if card is not None:
        host_card = card
        pid_card = {pid: card for pid in proc}
    else:
        cards = sorted(set(npu.values()))
        # No NPU label at all: one card's timeline (a lone msprof_*.json or trace_view.json).
        host_card = cards[0] if len(cards) == 1 else ("0" if not cards else "host")
        pid_card = {pid: npu.get(pid, host_card) for pid in proc}
    # Thread names by "pid\x00tid" (a mapping, not a join: a join would copy every column).
    threads = {f"{pid}\x00{tid}": name for (pid, tid), name in meta["thread"].items()}
    resolved = [
        df.with_columns(
            pl.coalesce(
                pl.col("pid").replace_strict(proc, default=None, return_dtype=pl.String), pl.lit("pid ") + pl.col("pid")
            ).alias("process"),
            pl.col("pid").replace_strict(pid_card, default=host_card, return_dtype=pl.String).alias("card"),
            pl.coalesce(_by_thread(threads), pl.col("tid")).alias("thread"),
        )
        for df in frames
    ]
    if host_card == "host":
        resolved = _host_threads_to_cards(resolved)
    df = pl.concat(resolved, how="vertical", rechunk=False) if len(resolved) > 1 else resolved[0]
    return df.select(
        [
            pl.col(c).cast(t) if keep is None or c in keep else pl.lit(None, dtype=t).alias(c)
            for c, t in EVENT_SCHEMA.items()
        ]
    )


def _by_thread(mapping: dict[str, str]) -> pl.Expr:
    """The value `mapping` gives an event's "pid\x00tid", else null."""
    if not mapping:
        return pl.lit(None, dtype=pl.String)
    key = pl.concat_str(pl.col("pid"), pl.lit("\x00"), pl.col("tid"))
    return key.replace_strict(mapping, default=None, return_dtype=pl.String)


def _host_threads_to_cards(frames: list[pl.DataFrame]) -> list[pl.DataFrame]:
    """In a merged multi-card timeline, give each host thread the card it launches to.

    A HostToDevice flow starts (`s`) on the host thread that launched a task and finishes
    (`f`) on the device task; the card most of a thread's flows end on is its card.
    Threads with no flows stay `host`.
    """
    starts = pl.concat(
        [
            df.select("pid", "tid", "flow_id", "ph", "card").filter((pl.col("ph") == "s") & (pl.col("card") == "host"))
            for df in frames
        ]
    ).select("pid", "tid", "flow_id")
    ends = pl.concat(
        [
            df.select("flow_id", "ph", pl.col("card").alias("to_card")).filter(
                (pl.col("ph") == "f") & (pl.col("to_card") != "host")
            )
            for df in frames
        ]
    ).select("flow_id", "to_card")
    if starts.height == 0 or ends.height == 0:
        return frames
    owner = (
        starts.join(ends.unique("flow_id"), on="flow_id")
        .group_by("pid", "tid")
        .agg(pl.col("to_card").mode().sort().first())
    )
    owners = {f"{pid}\x00{tid}": to for pid, tid, to in owner.iter_rows() if to is not None}
    if not owners:
        return frames
    card = pl.when(pl.col("card") == "host").then(pl.coalesce(_by_thread(owners), pl.col("card")))
    return [df.with_columns(card.otherwise(pl.col("card")).alias("card")) for df in frames]


def empty_events() -> pl.DataFrame:
    return pl.DataFrame(schema=EVENT_SCHEMA)
