"""Chrome-trace timelines (msprof_*.json, trace_view.json, *.paddle_trace.json) to one frame.

A timeline can be hundreds of MB: it is parsed with orjson while Python's garbage collector
is paused (13 s -> 4.5 s for 300 MB, measured), turned at once into typed columns, and the
event dicts are dropped before the next slice is read, so only one slice is ever held as
Python objects. Processes are named by their `process_name` metadata, never by pid value:
three pid encodings exist in the wild.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from pathlib import Path

import orjson
import polars as pl

from .columns import EVENT_SCHEMA
from .csv_table import start_to_ns
from .errors import ProfileError

# `NPU 3` in Era B merged exports; torch_npu writes a bare `NPU` (one card per output).
_NPU_LABEL = re.compile(r"NPU\s*(\d*)")


@contextmanager
def _gc_paused():
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def load_json(path: Path) -> object:
    try:
        data = path.read_bytes()
    except PermissionError:
        raise ProfileError(f"{path}: permission denied; make the file readable (chmod +r)") from None
    except OSError as exc:
        raise ProfileError(f"{path}: cannot be read ({exc.strerror})") from None
    if not data.strip():
        raise ProfileError(f"{path}: the file is empty; re-export the profile with msprof")
    try:
        with _gc_paused():
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
                f"{path}: the JSON ends too early{where}; the file was truncated, export or "
                "copy it again"
            ) from None
        raise ProfileError(
            f"{path}: invalid JSON{where}: {exc.msg}; export or copy the file again"
        ) from None


def _events_of(path: Path, data: object) -> list:
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


def _time_ns(values: list, name: str) -> pl.Series:
    """Trace times (us) to Int64 ns without losing digits at epoch scale.

    Strings (Era B, torch_npu) and ints (Paddle) are exact; only float values (Era A device
    clock, durations) pass through Float64, which is how the file stored them anyway.
    """
    strs = [v if v.__class__ is str else None for v in values]
    ints = [v if v.__class__ is int else None for v in values]
    floats = [v if v.__class__ is float else None for v in values]
    frame = pl.DataFrame(
        {
            "s": pl.Series(strs, dtype=pl.String),
            "i": pl.Series(ints, dtype=pl.Int64),
            "f": pl.Series(floats, dtype=pl.Float64),
        }
    )
    return frame.select(
        pl.coalesce(
            start_to_ns("s", 1000),
            pl.col("i") * 1000,
            (pl.col("f") * 1000).round(0).cast(pl.Int64),
        ).alias(name)
    ).to_series()


def _columns(events: list, meta: dict) -> pl.DataFrame:
    """One slice's non-metadata events as raw typed columns; fills `meta` as a side effect."""
    names, phs, pids, tids, ts, durs, cats, ids = [], [], [], [], [], [], [], []
    ttypes, streams, tasks, conns = [], [], [], []
    for i, e in enumerate(events):
        events[i] = None  # drop each dict as soon as it is read: peak memory stays one slice
        if e.__class__ is not dict:
            continue
        ph = e.get("ph")
        if ph is None:
            continue  # Paddle ends its array with an empty {}
        if ph == "M":
            args = e.get("args") or {}
            key = e.get("name")
            if key == "process_name":
                meta["process"][str(e.get("pid"))] = str(args.get("name", ""))
            elif key == "process_labels":
                meta["labels"][str(e.get("pid"))] = str(args.get("labels", ""))
            elif key == "thread_name":
                meta["thread"][(str(e.get("pid")), str(e.get("tid")))] = str(args.get("name", ""))
            continue
        names.append(e.get("name"))
        phs.append(ph)
        pids.append(e.get("pid"))
        tids.append(e.get("tid"))
        ts.append(e.get("ts"))
        durs.append(e.get("dur"))
        cats.append(e.get("cat"))
        ids.append(e.get("id"))
        args = e.get("args")
        if args:
            ttypes.append(args.get("Task Type"))
            streams.append(args.get("Physic Stream Id", args.get("Stream Id")))
            tasks.append(args.get("Task Id"))
            conns.append(args.get("connection_id"))
        else:
            ttypes.append(None)
            streams.append(None)
            tasks.append(None)
            conns.append(None)
    events.clear()
    as_str = lambda xs: pl.Series([None if x is None else str(x) for x in xs], dtype=pl.String)  # noqa: E731
    as_int = lambda xs: pl.Series(xs, dtype=pl.Float64, strict=False).cast(pl.Int64)  # noqa: E731
    return pl.DataFrame(
        {
            "pid": as_str(pids),
            "tid": as_str(tids),
            "name": pl.Series(names, dtype=pl.String, strict=False),
            "ph": pl.Series(phs, dtype=pl.String, strict=False),
            "ts_ns": _time_ns(ts, "ts_ns"),
            "dur_ns": _time_ns(durs, "dur_ns"),
            "cat": pl.Series(cats, dtype=pl.String, strict=False),
            "flow_id": as_str(ids),
            "task_type": pl.Series(ttypes, dtype=pl.String, strict=False),
            "stream_id": as_int(streams),
            "task_id": as_int(tasks),
            "connection_id": as_int(conns),
        }
    )


def read_timeline(
    paths: Sequence[Path],
    *,
    card: str | None = None,
    on_file: Callable[[Path], None] | None = None,
) -> pl.DataFrame:
    """Events of one timeline (its slices in order) with processes and cards resolved.

    `card` is the card the files belong to when the layout says so (Era A `device_N`, one
    torch_npu output); otherwise the card comes from the process label (`NPU 3`), and host
    processes belong to the only card or, with several, to `host`.
    """
    meta: dict = {"process": {}, "labels": {}, "thread": {}}
    frames = []
    for path in paths:
        data = load_json(path)
        events = _events_of(path, data)
        del data
        frames.append(_columns(events, meta))
        del events
        if on_file is not None:
            on_file(path)
    df = pl.concat(frames, how="vertical") if len(frames) > 1 else frames[0]
    return _resolve(df, meta, card)


def _resolve(df: pl.DataFrame, meta: dict, card: str | None) -> pl.DataFrame:
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
        host_card = cards[0] if len(cards) == 1 else "host"
        pid_card = {pid: npu.get(pid, host_card) for pid in proc}
    threads = pl.DataFrame(
        {
            "pid": [k[0] for k in meta["thread"]],
            "tid": [k[1] for k in meta["thread"]],
            "thread": list(meta["thread"].values()),
        },
        schema={"pid": pl.String, "tid": pl.String, "thread": pl.String},
    )
    df = df.with_columns(
        pl.col("pid").replace_strict(proc, default=None, return_dtype=pl.String).alias("process"),
        pl.col("pid")
        .replace_strict(pid_card, default=host_card, return_dtype=pl.String)
        .alias("card"),
    ).join(threads, on=["pid", "tid"], how="left", maintain_order="left")
    df = df.with_columns(
        pl.coalesce(pl.col("process"), pl.lit("pid ") + pl.col("pid")).alias("process"),
        pl.coalesce(pl.col("thread"), pl.col("tid")).alias("thread"),
    )
    if host_card == "host":
        df = _host_threads_to_cards(df)
    return df.select([pl.col(c).cast(t) for c, t in EVENT_SCHEMA.items()])


def _host_threads_to_cards(df: pl.DataFrame) -> pl.DataFrame:
    """In a merged multi-card timeline, give each host thread the card it launches to.

    A HostToDevice flow starts (`s`) on the host thread that launched a task and finishes
    (`f`) on the device task; the card most of a thread's flows end on is its card.
    Threads with no flows stay `host`.
    """
    starts = df.filter((pl.col("ph") == "s") & (pl.col("card") == "host")).select("pid", "tid", "flow_id")
    ends = df.filter((pl.col("ph") == "f") & (pl.col("card") != "host")).select(
        "flow_id", pl.col("card").alias("to_card")
    )
    if starts.height == 0 or ends.height == 0:
        return df
    owner = (
        starts.join(ends.unique("flow_id"), on="flow_id")
        .group_by("pid", "tid")
        .agg(pl.col("to_card").mode().sort().first())
    )
    return (
        df.join(owner, on=["pid", "tid"], how="left", maintain_order="left")
        .with_columns(
            pl.when(pl.col("card") == "host")
            .then(pl.coalesce("to_card", "card"))
            .otherwise(pl.col("card"))
            .alias("card")
        )
        .drop("to_card")
    )


def empty_events() -> pl.DataFrame:
    return pl.DataFrame(schema=EVENT_SCHEMA)
