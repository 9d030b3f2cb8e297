"""The user's code behind the framework's operators: torch_npu's `operator_details.csv`.

torch_npu writes it beside kernel_details.csv (ASCEND_PROFILER_OUTPUT) when the profiler ran
with `with_stack=True` (and `record_shapes=True` for the shapes): one row per framework
operator, `Name,Input Shapes,Call Stack,Host Self Duration(us),Host Total Duration(us),
Device Self Duration(us),Device Total Duration(us),...`. A Call Stack is the Python frames,
innermost first, separated by `;` and a line break, each `path(line): function`.

torch_npu's db export (`export_type=db`) holds the same in ascend_pytorch_profiler_N.db: one
PYTORCH_API row per framework operator call (type `op` of ENUM_API_TYPE, startNs / endNs,
globalTid, callchainId) and its frames in PYTORCH_CALLCHAINS (id, stack, stackDepth; 0 the
innermost), names and frames in STRING_IDS. Calls nest (aten::conv2d runs aten::convolution
runs Conv2D): only the outermost framework operator of each thread (`aten::`, `npu::`,
`c10d::`) counts its host time, so none is counted twice, and the record_function ranges of
the same type (ProfilerStep#N, enumerate(DataLoader)) are not operators.

The user's frame of a stack is its first frame outside the framework and the interpreter:
not in site-packages / dist-packages, not in the Python library (`lib/pythonX.Y/`), not in a
`torch`, `torch_npu` or `paddle` source folder, not `<string>`-like. A stack made only of
such frames has none.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import polars as pl

from .db_snapshot import committed_uri
from .errors import ProfileError
from .layout import Capture
from .training_files import conform, places

STACK_SCHEMA: dict[str, pl.DataType] = {
    "card": pl.String(),
    "op_name": pl.String(),  # the framework operator, `aten::zero_`
    "input_shapes": pl.String(),
    "frame": pl.String(),  # the user's frame, `path:line (function)`; null when none
    "host_self_us": pl.Float64(),
    "host_total_us": pl.Float64(),
    "device_total_us": pl.Float64(),
    "source": pl.String(),
}

FRAMEWORK_FRAME = (
    r"[/\\](?:site-packages|dist-packages)[/\\]"
    r"|[/\\]lib[/\\]python\d+(?:\.\d+)?[/\\]"
    r"|(?:^|[/\\])(?:torch|torch_npu|paddle)[/\\]"
    r"|^<"
)
"""Paths of frames that are not the user's code (see the module docstring)."""

FRAME = r"^(?P<path>.*)\((?P<line>\d+)\):\s*(?P<function>.*)$"

_COLUMNS = {
    "Name": "op_name",
    "Input Shapes": "input_shapes",
    "Call Stack": "stack",
    "Host Self Duration(us)": "host_self_us",
    "Host Total Duration(us)": "host_total_us",
    "Device Total Duration(us)": "device_total_us",
}


def empty_stacks() -> pl.DataFrame:
    return pl.DataFrame(schema=STACK_SCHEMA)


FRAMEWORK_OP = r"^(?:aten|npu|c10d)::"
"""The PYTORCH_API names of framework operators (not record_function ranges)."""


def stack_files(capture: Capture) -> list[tuple[str | None, Path]]:
    """(card, operator_details.csv) of each source of the capture that has one, else its db
    export (whose PYTORCH_API may hold the same)."""
    out = []
    for place in places(capture):
        path = place.file("operator_details", "csv")
        if path is None and place.db is not None and place.db.name.startswith("ascend_pytorch_profiler"):
            path = place.db
        if path is not None:
            out.append((place.card, path))
    return out


def _label(card: str | None, cards: tuple[str, ...]) -> str | None:
    """The card of a source's stacks: a capture of one card is that card (a torch_npu rank's
    folder says rank 0 while its tasks say Device_id 6), else the source's own."""
    return cards[0] if len(cards) == 1 else card


def user_frames(stacks: pl.Expr) -> pl.Expr:
    """The user's frame of each Call Stack, `path:line (function)`, or null (vectorised: the
    frames are split, the framework's dropped, the first kept)."""
    frames = stacks.str.split(";").list.eval(
        pl.element()
        .str.strip_chars()
        .filter((pl.element().str.strip_chars() != "") & ~pl.element().str.strip_chars().str.contains(FRAMEWORK_FRAME))
    )
    first = frames.list.first()
    parts = first.str.extract_groups(FRAME)
    return (
        pl.when(parts.struct.field("line").is_not_null())
        .then(
            pl.concat_str(
                parts.struct.field("path").str.strip_chars(),
                pl.lit(":"),
                parts.struct.field("line"),
                pl.lit(" ("),
                parts.struct.field("function").str.strip_chars(),
                pl.lit(")"),
            )
        )
        .otherwise(first)
    )


def read_operator_details(path: Path, card: str) -> pl.DataFrame:
    """One operator_details.csv as STACK_SCHEMA rows; a file without a Call Stack column
    (the profiler ran without with_stack) gives no rows."""
    try:
        raw = pl.read_csv(path, infer_schema=False, encoding="utf8-lossy", truncate_ragged_lines=True)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise ProfileError(f"{path}: cannot read operator_details ({str(exc).splitlines()[0]})") from None
    if "Call Stack" not in raw.columns or "Name" not in raw.columns:
        return empty_stacks()
    have = {k: v for k, v in _COLUMNS.items() if k in raw.columns}
    df = raw.select(pl.col(k).alias(v) for k, v in have.items())
    numbers = ("host_self_us", "host_total_us", "device_total_us")
    df = df.with_columns(
        *(
            (
                pl.col(c).str.strip_chars().cast(pl.Float64, strict=False)
                if c in df.columns
                else pl.lit(None, pl.Float64)
            ).alias(c)
            for c in numbers
        ),
        (pl.col("input_shapes") if "input_shapes" in df.columns else pl.lit(None, pl.String)).alias("input_shapes"),
    )
    out = df.with_columns(
        pl.lit(card).alias("card"),
        user_frames(pl.col("stack").fill_null("")).alias("frame"),
        pl.col("input_shapes").str.replace_all(r"[;\r\n]+", ";").str.strip_chars("; "),
        pl.lit(path.name).alias("source"),
    )
    return conform(out, STACK_SCHEMA)


API_FRAME_SCHEMA: dict[str, pl.DataType] = {
    "card": pl.String(),
    "api": pl.String(),  # the CANN API, `aclopCompileAndExecute`
    "frame": pl.String(),  # the user's frame of the framework operator that called it
    "calls": pl.Int64(),
    "total_us": pl.Float64(),
}


def empty_api_frames() -> pl.DataFrame:
    return pl.DataFrame(schema=API_FRAME_SCHEMA)


_TIMES = {"start": pl.String, "end": pl.String, "tid": pl.String}


def _frame(rows: list[tuple[object, ...]], schema: dict[str, type[pl.DataType]]) -> pl.DataFrame:
    df = pl.DataFrame(rows, schema=schema, orient="row", strict=False)
    if "start" in df.columns:
        df = df.with_columns(pl.col("start").cast(pl.Int64, strict=False), pl.col("end").cast(pl.Int64, strict=False))
        df = df.filter(pl.col("end") >= pl.col("start"))
    return df


def _db_query(path: Path, api_calls: bool) -> dict[str, pl.DataFrame] | None:
    """The db's framework operator calls, call chains and, with `api_calls`, the queue events and
    CANN API calls; None when it has no call stacks. The committed state is read (db_snapshot);
    a value of the wrong type (a BLOB thread id) is one line."""
    try:
        with committed_uri(path) as uri:
            return _db_tables(uri, api_calls)
    except sqlite3.Error as exc:
        raise ProfileError(f"{path}: cannot read the call stacks ({exc})") from None
    except (pl.exceptions.PolarsError, TypeError, ValueError, OverflowError) as exc:
        raise ProfileError(f"{path}: the call stack tables hold values of the wrong type ({exc})") from None


def _db_tables(uri: str, api_calls: bool) -> dict[str, pl.DataFrame] | None:
    """`_db_query` of an open URI."""
    con = sqlite3.connect(uri, uri=True)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"PYTORCH_API", "PYTORCH_CALLCHAINS", "STRING_IDS", "ENUM_API_TYPE"} <= tables:
            return None

        def of_type(kind: str, extra: str) -> list[tuple[object, ...]]:
            return con.execute(
                f"SELECT a.startNs, a.endNs, a.globalTid, n.value, {extra} "
                "FROM PYTORCH_API a JOIN STRING_IDS n ON n.id = a.name "
                "LEFT JOIN STRING_IDS sh ON sh.id = a.inputShapes "
                f"WHERE a.type = (SELECT id FROM ENUM_API_TYPE WHERE name = '{kind}')"
            ).fetchall()

        out = {
            "ops": _frame(
                of_type("op", "a.callchainId, sh.value"),
                {**_TIMES, "op_name": pl.String, "chain": pl.Int64, "input_shapes": pl.String},
            ),
            "chains": _frame(
                con.execute(
                    "SELECT c.id, c.stackDepth, s.value FROM PYTORCH_CALLCHAINS c JOIN STRING_IDS s ON s.id = c.stack"
                ).fetchall(),
                {"chain": pl.Int64, "depth": pl.Int64, "frame": pl.String},
            ),
        }
        if api_calls and {"CANN_API", "CONNECTION_IDS"} <= tables:
            out["queue"] = _frame(
                of_type("queue", "(SELECT MIN(ci.connectionId) FROM CONNECTION_IDS ci WHERE ci.id = a.connectionId)"),
                {**_TIMES, "name": pl.String, "connection": pl.Int64},
            )
            out["cann"] = _frame(
                con.execute(
                    "SELECT c.startNs, c.endNs, c.globalTid, s.value FROM CANN_API c JOIN STRING_IDS s ON s.id = c.name"
                ).fetchall(),
                {**_TIMES, "api": pl.String},
            )
        return out
    finally:
        con.close()


def _outer_ops(data: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """The outermost framework operator calls of each thread with their stack and user frame."""
    stacks = data["chains"].sort("chain", "depth").group_by("chain").agg(pl.col("frame").str.join(";").alias("stack"))
    ops = (
        data["ops"]
        .filter(pl.col("op_name").str.contains(FRAMEWORK_OP).fill_null(False))
        .sort("tid", "start", pl.col("end"), descending=[False, False, True])
    )
    # Outermost: it starts at or after every earlier call of its thread has ended.
    before = pl.col("end").cum_max().shift(1).over("tid")
    outer = ops.filter(before.is_null() | (pl.col("start") >= before))
    return outer.join(stacks, on="chain", how="left").with_columns(
        user_frames(pl.col("stack").fill_null("")).alias("frame")
    )


def _inside(calls: pl.DataFrame, spans: pl.DataFrame, keep: list[str]) -> pl.DataFrame:
    """For each call (tid, start, end), the `keep` columns of the span of the same thread that
    holds it (the last one starting at or before it, if it also ends after it), else nulls."""
    right = spans.select(pl.col("tid"), pl.col("start").alias("_s"), pl.col("end").alias("_e"), *keep).sort("_s")
    joined = calls.sort("start").join_asof(
        right, left_on="start", right_on="_s", by="tid", strategy="backward", check_sortedness=False
    )
    held = pl.col("_e").is_not_null() & (pl.col("end") <= pl.col("_e"))
    return joined.with_columns(pl.when(held).then(pl.col(c)).alias(c) for c in keep).drop("_s", "_e")


def read_db_stacks(path: Path, card: str) -> pl.DataFrame:
    """The framework operators of a torch_npu db export as STACK_SCHEMA rows: the outermost
    operator calls of each thread with their host time (end - start) and user frame; nested
    calls are left out (their time is inside their caller's). A db without PYTORCH_API or
    PYTORCH_CALLCHAINS (the profiler ran without with_stack) gives no rows."""
    data = _db_query(path, api_calls=False)
    if data is None:
        return empty_stacks()
    out = _outer_ops(data).with_columns(
        pl.lit(card).alias("card"),
        ((pl.col("end") - pl.col("start")) / 1000.0).alias("host_self_us"),
        ((pl.col("end") - pl.col("start")) / 1000.0).alias("host_total_us"),
        pl.lit(None, pl.Float64).alias("device_total_us"),
        pl.col("input_shapes").str.replace_all(r"[;\r\n]+", ";").str.strip_chars("; "),
        pl.lit(path.name).alias("source"),
    )
    return conform(out, STACK_SCHEMA)


def read_db_api_frames(path: Path, card: str) -> pl.DataFrame:
    """Per CANN API and user frame of a torch_npu db export: calls and time (API_FRAME_SCHEMA).

    A CANN API call belongs to the framework operator whose call holds it on the same thread;
    with torch_npu's task queue it runs on the dequeue thread instead, inside a `Dequeue@...`
    event that shares its connection with the `Enqueue` the operator made on its own thread:
    that operator is the caller. Calls with neither are left out."""
    data = _db_query(path, api_calls=True)
    if data is None or "cann" not in data:
        return empty_api_frames()
    ops = _outer_ops(data).select("tid", "start", "end", "frame")
    cann = data["cann"].select("tid", "start", "end", "api")
    direct = _inside(cann, ops, ["frame"])
    queue = data["queue"]
    dequeue = queue.filter(pl.col("name").str.starts_with("Dequeue"))
    enqueue = queue.filter(pl.col("name").str.starts_with("Enqueue")).select(
        "connection", pl.col("tid").alias("e_tid"), pl.col("start").alias("e_start"), pl.col("end").alias("e_end")
    )
    queued = _inside(direct.filter(pl.col("frame").is_null()).drop("frame"), dequeue, ["connection"])
    linked = queued.join(enqueue, on="connection", how="inner")
    callers = _inside(
        linked.select(
            pl.col("e_tid").alias("tid"),
            pl.col("e_start").alias("start"),
            pl.col("e_end").alias("end"),
            pl.col("api"),
            (pl.col("end") - pl.col("start")).alias("dur"),
        ),
        ops,
        ["frame"],
    )
    both = pl.concat(
        [
            direct.filter(pl.col("frame").is_not_null()).select(
                "api", "frame", (pl.col("end") - pl.col("start")).alias("dur")
            ),
            callers.filter(pl.col("frame").is_not_null()).select("api", "frame", "dur"),
        ]
    )
    out = both.group_by("api", "frame").agg(
        pl.len().cast(pl.Int64).alias("calls"), (pl.col("dur").sum() / 1000.0).alias("total_us")
    )
    return conform(out.with_columns(pl.lit(card).alias("card")), API_FRAME_SCHEMA)


OPTIMIZER_STEP = r"^Optimizer\.step#(\w+)\.step$"
"""The framework event of one optimizer step (torch's profiler record_function)."""

STEP_SCHEMA: dict[str, pl.DataType] = {
    "card": pl.String(),
    "optimizer": pl.String(),  # `AdamW`
    "op_name": pl.String(),  # the event, `Optimizer.step#AdamW.step`
    "host_us": pl.Float64(),
    "frame": pl.String(),  # the user's frame that called step(); null when unknown
}


def optimizer_steps_from_events(events: pl.DataFrame | None) -> pl.DataFrame:
    """The `Optimizer.step#<Name>.step` complete events of a timeline (STEP_SCHEMA, no frame)."""
    if events is None:
        return pl.DataFrame(schema=STEP_SCHEMA)
    steps = events.filter(
        (pl.col("ph") == "X") & pl.col("name").str.contains(OPTIMIZER_STEP).fill_null(False) & (pl.col("dur_ns") >= 0)
    )
    out = steps.select(
        "card",
        pl.col("name").str.extract(OPTIMIZER_STEP, 1).alias("optimizer"),
        pl.col("name").alias("op_name"),
        (pl.col("dur_ns") / 1000.0).alias("host_us"),
        pl.lit(None, pl.String).alias("frame"),
    )
    return conform(out, STEP_SCHEMA)


def read_db_optimizer_steps(path: Path, card: str) -> pl.DataFrame:
    """The `Optimizer.step#<Name>.step` calls of a torch_npu db export's PYTORCH_API, with the
    user's frame that called step() where the call chain is recorded (STEP_SCHEMA)."""
    data = _db_query(path, api_calls=False)
    if data is None:
        return pl.DataFrame(schema=STEP_SCHEMA)
    stacks = data["chains"].sort("chain", "depth").group_by("chain").agg(pl.col("frame").str.join(";").alias("stack"))
    steps = data["ops"].filter(pl.col("op_name").str.contains(OPTIMIZER_STEP).fill_null(False))
    out = steps.join(stacks, on="chain", how="left").select(
        pl.lit(card).alias("card"),
        pl.col("op_name").str.extract(OPTIMIZER_STEP, 1).alias("optimizer"),
        "op_name",
        ((pl.col("end") - pl.col("start")) / 1000.0).alias("host_us"),
        user_frames(pl.col("stack").fill_null("")).alias("frame"),
    )
    return conform(out, STEP_SCHEMA)


def read_optimizer_steps(
    capture: Capture, cards: tuple[str, ...], events: pl.DataFrame | None, skip_damaged: bool = False
) -> pl.DataFrame:
    """The optimizer steps of each card: from the db exports' PYTORCH_API where the capture has
    them (with the caller's frame), else from the timeline's framework events."""
    parts = []
    for card, path in stack_files(capture):
        label = _label(card, cards)
        if label is not None and path.suffix == ".db":
            try:
                parts.append(read_db_optimizer_steps(path, label))
            except ProfileError:
                if not skip_damaged:
                    raise
    from_db = pl.concat(parts) if parts else pl.DataFrame(schema=STEP_SCHEMA)
    timeline = optimizer_steps_from_events(events)
    return pl.concat([from_db, timeline.filter(~pl.col("card").is_in(from_db["card"].unique().to_list()))])


def read_stacks(capture: Capture, cards: tuple[str, ...], skip_damaged: bool = False) -> pl.DataFrame:
    """The operator stacks of every card of the capture (STACK_SCHEMA); a capture of one card
    takes them all, a source that does not say its card is otherwise left out. With `skip_damaged`, a file that
    cannot be read is left out instead of raising ProfileError."""
    parts = []
    for card, path in stack_files(capture):
        label = _label(card, cards)
        if label is None:
            continue
        read = read_db_stacks if path.suffix == ".db" else read_operator_details
        try:
            parts.append(read(path, label))
        except ProfileError:
            if not skip_damaged:
                raise
    return pl.concat(parts) if parts else empty_stacks()


def read_api_frames(capture: Capture, cards: tuple[str, ...], skip_damaged: bool = False) -> pl.DataFrame:
    """The CANN API calls of each card by the user's frame that made them (API_FRAME_SCHEMA):
    torch_npu db exports only (operator_details.csv says nothing of CANN API calls)."""
    parts = []
    for card, path in stack_files(capture):
        label = _label(card, cards)
        if label is not None and path.suffix == ".db":
            try:
                parts.append(read_db_api_frames(path, label))
            except ProfileError:
                if not skip_damaged:
                    raise
    return pl.concat(parts) if parts else empty_api_frames()
