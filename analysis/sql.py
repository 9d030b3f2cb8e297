"""SQL over a profile's tables: the frames the report uses, one schema for every input kind.

`profile_tables(profile, diagnosis, views)` names the frames of one opened profile as SQL
tables (TABLES lists them; README "SQL" gives every column and its unit): `tasks` is the
diagnosis' tasks (the report's and the explorer's rows, with their wait causes and steps),
`op_stats` the op statistics with their bound, `steps`, `communication`, `links`,
`host_api`, `memory` and `memory_ops` the training-level views, `events` the timeline
events and `findings` every finding the report shows. `cluster_tables(summary, ...)` adds
`ranks` (one row per rank of the cluster summary) and gives the per-rank tables a `rank`
column. A table is built only when a query names it (`Tables.frame`), so a query over
`ranks` loads no rank, and one over `tasks` reads no training view.

`run_sql(tables, query)` runs the query in DuckDB (chosen over polars' SQL context by
benchmarks/sql.py: BENCHMARKS.md "SQL engine") over the frames as Arrow streams, without a
copy on our side, and returns a polars frame. Each query gets a fresh in-memory database
whose configuration is locked before the query runs: no file is read or written (COPY,
ATTACH, EXPORT, read_csv / read_parquet / glob and every other file function fail), no
extension is installed or loaded, nothing spills to disk, and Python variables are not
tables. An engine error is a one-line SqlError (a ProfileError: exit 2 on the command line).

`render_text`, `encode` and `write_atomic` turn a result into what `npuscope sql` prints or
writes; DuckDB is imported only by `run_sql`, so importing this module stays cheap.
"""

from __future__ import annotations

import io
import os
import re
import secrets
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import orjson
import polars as pl

from npuscope.parsers import Profile, ProfileError
from npuscope.parsers.columns import EVENT_SCHEMA
from npuscope.parsers.frames import is_communication
from npuscope.parsers.training import TrainingViews
from npuscope.text import one_line, printable

from .bound import with_bound
from .diagnose import Diagnosis
from .findings import Finding
from .session import Diagnosed
from .table import text_table
from .training_tables import card_step_windows

T = TypeVar("T")
Format = Literal["table", "csv", "json", "parquet"]
FORMATS: tuple[Format, ...] = ("table", "csv", "json", "parquet")

TABLES: dict[str, str] = {
    "tasks": "one row per device task: times, wait and its cause, step, shapes (the report's tasks)",
    "op_stats": "per card and op type (core type): count, total, min, avg, max, ratio, bound",
    "steps": "per card and step: step time, compute, communication, not overlapped, free",
    "communication": "per card and collective: count, total, transit, wait, sync, size, bandwidth",
    "links": "per card and link: group, src, dst, transport, size, time, bandwidth",
    "host_api": "per card and host API: count, total, avg, max",
    "memory": "per card: peak allocated and reserved memory, capacity",
    "memory_ops": "per card and operator: largest allocation, allocations, total allocated",
    "events": "timeline events: process, thread, name, phase, start, duration (ns)",
    "findings": "every finding of the report: rule, severity, title, time at stake, advice",
    "ranks": "a cluster: one row per rank, its stage and figures per step, what it lacks (cluster only)",
}
"""The tables, in the order the help lists them (README "SQL" has every column)."""
PER_RANK = tuple(t for t in TABLES if t != "ranks")

# tasks: the canonical columns first (every input kind has them, null where a file has no such
# column), then what the diagnosis adds; the capture's PMU counters follow.
TASK_COLUMNS: tuple[str, ...] = (
    "row", "card", "op_name", "op_type", "task_type", "stream_id", "task_id", "model_id", "step",
    "step_id", "start_ns", "end_ns", "start_us", "duration_us", "wait_us", "wait_cause",
    "wait_confidence", "is_communication", "op_state", "block_num", "mix_block_num", "input_shapes",
    "input_dtypes", "input_formats", "output_shapes", "output_dtypes", "output_formats", "is_aclnn",
    "model_name", "infer_id", "hf32_eligible", "context_id",
)  # fmt: skip
FINDING_SCHEMA: dict[str, pl.DataType] = {
    "card": pl.String(),
    "rule": pl.String(),
    "severity": pl.String(),
    "title": pl.String(),
    "time_us": pl.Float64(),
    "share_pct": pl.Float64(),
    "count": pl.Int64(),
    "op_types": pl.List(pl.String()),
    "op_names": pl.List(pl.String()),
    "confidence": pl.String(),
    "view": pl.String(),
    "threshold": pl.String(),
    "advice": pl.String(),
    "evidence": pl.String(),
}
RANKS_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.String(),
    "folder": pl.String(),
    "stage": pl.Int64(),
    "slow": pl.Boolean(),
    "steps": pl.Int64(),
    "step_us": pl.Float64(),
    "compute_us": pl.Float64(),
    "communication_us": pl.Float64(),
    "exposed_comm_us": pl.Float64(),
    "free_us": pl.Float64(),
    "bubble_us": pl.Float64(),
    "moe_us": pl.Float64(),
    "wait_us": pl.Float64(),
    "tasks": pl.Int64(),
    "missing": pl.String(),
    "error": pl.String(),
}
# The DuckDB settings every query runs under, in this order: spilling is turned off while it
# still may be, then every file and extension access; the lock keeps a query from undoing any.
SAFETY = (
    "SET temp_directory = ''",
    "SET enable_external_access = false",
    "SET python_enable_replacements = false",
    "SET autoinstall_known_extensions = false",
    "SET autoload_known_extensions = false",
    "SET allow_community_extensions = false",
    "SET lock_configuration = true",
)
# DuckDB result types polars reads as they are; any other is handed over as text (intervals,
# blobs, bit strings, unions, enums, times with a zone), and HUGEINT (what SUM of a BIGINT
# gives) as BIGINT.
_PLAIN = frozenset({
    "boolean", "tinyint", "smallint", "integer", "bigint", "utinyint", "usmallint", "uinteger",
    "ubigint", "float", "double", "varchar", "date", "time", "timestamp", "timestamp_s",
    "timestamp_ms", "timestamp_ns", "timestamp with time zone", "uuid", '"null"', "null",
})  # fmt: skip
_NESTED = frozenset({"list", "array", "struct"})


class SqlError(ProfileError):
    """A query the engine refused or could not run; the message is the engine's, on one line."""

    title = "SQL"


# --------------------------------------------------------------------------- the tables


def once(make: Callable[[], T]) -> Callable[[], T]:
    """`make`, called at most once (thread-safe: the explorer builds tables in a worker)."""
    lock = threading.Lock()
    box: list[T] = []

    def get() -> T:
        with lock:
            if not box:
                box.append(make())
            return box[0]

    return get


def _getter(value: T | Callable[[], T]) -> Callable[[], T]:
    return once(value) if callable(value) else (lambda: value)


@dataclass
class Tables:
    """SQL tables by name, each built the first time it is asked for (then kept)."""

    builders: Mapping[str, Callable[[], pl.DataFrame]]
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.builders = {name: once(make) for name, make in self.builders.items()}

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.builders)

    def frame(self, name: str) -> pl.DataFrame:
        return self.builders[name]()


def profile_tables(
    profile: Profile,
    diagnosis: Diagnosis | Callable[[], Diagnosis],
    views: TrainingViews | Callable[[], TrainingViews],
    *,
    findings: Sequence[Finding] | Callable[[], Sequence[Finding]] | None = None,
    windows: pl.DataFrame | Callable[[], pl.DataFrame] | None = None,
) -> Tables:
    """The tables of one diagnosed profile. `diagnosis`, `views`, `findings` and `windows`
    may be given as functions, called only when a table needs them. `findings` (default: the
    diagnosis' findings and the training-level ones, as the report has them: the second stage
    of analysis/session.py) is what the `findings` table holds; `windows` the step windows
    (default: card_step_windows)."""
    diag = _getter(diagnosis)
    view = _getter(views)
    steps_of = _getter(windows) if windows is not None else once(lambda: card_step_windows(profile))

    def all_findings() -> Sequence[Finding]:
        return Diagnosed.of(profile, diag()).with_views(view()).findings

    found = _getter(findings) if findings is not None else once(all_findings)
    builders: dict[str, Callable[[], pl.DataFrame]] = {
        "tasks": lambda: tasks_table(diag().tasks, steps_of()),
        "op_stats": lambda: op_stats_table(profile, diag()),
        "steps": lambda: view().steps.select(pl.exclude("source"), "source"),
        "communication": lambda: view().communication,
        "links": lambda: view().links,
        "host_api": lambda: view().host_api,
        "memory": lambda: view().memory,
        "memory_ops": lambda: view().memory_top_ops,
        "events": lambda: profile.events if profile.events is not None else pl.DataFrame(schema=EVENT_SCHEMA),
        "findings": lambda: findings_table(found()),
    }
    return Tables(builders)


def tasks_table(tasks: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """The diagnosis' tasks in their order (`row`), the canonical columns first, with `end_ns`,
    `is_communication` and `step`: the step window of the card that holds the task's start (by
    the task's own Step Id where the windows come from it; null outside every step or when the
    capture has no step boundaries)."""
    t = tasks.with_columns(
        (pl.col("start_ns") + (pl.col("duration_us").fill_null(0.0) * 1000).round(0).cast(pl.Int64)).alias("end_ns"),
        is_communication().alias("is_communication"),
    )
    for name, dtype in (("wait_cause", pl.String()), ("wait_confidence", pl.String()), ("start_us", pl.Float64())):
        if name not in t.columns:
            t = t.with_columns(pl.lit(None, dtype=dtype).alias(name))
    t = t.with_columns(_steps(t, windows))
    extra = [c for c in t.columns if c not in TASK_COLUMNS]
    return t.select(*TASK_COLUMNS, *extra)


def _steps(tasks: pl.DataFrame, windows: pl.DataFrame) -> pl.Series:
    """The step of each task (see tasks_table), in the tasks' order."""
    none = pl.Series("step", [None] * tasks.height, dtype=pl.Int64)
    if windows.height == 0 or tasks.height == 0:
        return none
    keys = tasks.select("card", "step_id", "start_ns").with_row_index("_i")
    by_id = windows.filter(pl.col("step_id").is_not_null()).select("card", "step_id", pl.col("step").alias("_a"))
    by_id = by_id.unique(["card", "step_id"], keep="first")
    named = keys.join(by_id, on=["card", "step_id"], how="left", maintain_order="left")["_a"]
    by_time = windows.filter(pl.col("step_id").is_null() & pl.col("step").is_not_null())
    if by_time.height == 0:
        return named.alias("step")
    w = by_time.select("card", pl.col("start_ns").alias("_s"), pl.col("end_ns").alias("_e"), pl.col("step").alias("_b"))
    within = (
        keys.drop_nulls("start_ns")
        .sort("start_ns")
        .join_asof(
            w.sort("_s"), left_on="start_ns", right_on="_s", by="card", strategy="backward", check_sortedness=False
        )
        .filter(pl.col("start_ns") <= pl.col("_e"))
        .select("_i", "_b")
    )
    timed = keys.select("_i").join(within, on="_i", how="left", maintain_order="left")["_b"]
    return pl.Series("step", named, dtype=pl.Int64).fill_null(timed)


def op_stats_table(profile: Profile, diagnosis: Diagnosis) -> pl.DataFrame:
    """The op statistics of the diagnosed cards with each op type's bound, per card in the
    report's order (total time, largest first)."""
    parts = []
    for card in diagnosis.cards:
        stat = profile.op_statistic.filter(pl.col("card") == card).sort(
            ["total_us", "op_type"], descending=[True, False]
        )
        tasks = diagnosis.tasks if profile.cards == (card,) else diagnosis.tasks.filter(pl.col("card") == card)
        parts.append(with_bound(stat, tasks, diagnosis.thresholds.bound_min_pct))
    if not parts:
        return with_bound(profile.op_statistic.clear(), diagnosis.tasks.clear(), diagnosis.thresholds.bound_min_pct)
    return pl.concat(parts, how="diagonal_relaxed")


def findings_table(findings: Iterable[Finding]) -> pl.DataFrame:
    """One row per finding, in display order; `evidence` as JSON text."""
    rows = []
    for f in findings:
        rows.append(
            {
                "card": f.card,
                "rule": f.rule,
                "severity": f.severity,
                "title": f.title,
                "time_us": float(f.time_us),
                "share_pct": float(f.share_pct),
                "count": int(f.count),
                "op_types": list(f.op_types),
                "op_names": list(f.op_names),
                "confidence": f.confidence,
                "view": f.view,
                "threshold": f.threshold,
                "advice": f.advice,
                "evidence": orjson.dumps(list(f.evidence), default=str).decode(),
            }
        )
    return pl.DataFrame(rows, schema=FINDING_SCHEMA) if rows else pl.DataFrame(schema=FINDING_SCHEMA)


def ranks_table(summary: Any) -> pl.DataFrame:
    """One row per rank of a ClusterSummary (analysis/cluster.py), rank order: its `frame()`
    and whether the rank is slow."""
    slow = list(summary.slow_ranks)
    ranks: pl.DataFrame = summary.frame()
    frame = ranks.with_columns(pl.col("rank").is_in(slow).alias("slow")).select(list(RANKS_SCHEMA))
    # A rank that could not be read has no figures: null, never a zero.
    figures = [c for c in RANKS_SCHEMA if c.endswith("_us") or c == "tasks"]
    return frame.with_columns(pl.when(pl.col("error").is_null()).then(pl.col(c)).alias(c) for c in figures)


def cluster_tables(summary: Any, ranks: Sequence[str], rank_tables: Callable[[str], Tables]) -> Tables:
    """`ranks` of the cluster `summary`, and each per-rank table over the ranks `ranks`
    (`rank_tables(rank)` gives one rank's tables; each rank is opened once, the first time a
    query needs one of its tables), with a `rank` column first."""
    opened: dict[str, Callable[[], Tables]] = {r: once(lambda r=r: rank_tables(r)) for r in ranks}  # type: ignore[misc]

    def union(name: str) -> pl.DataFrame:
        parts = [opened[r]().frame(name).select(pl.lit(r, dtype=pl.String).alias("rank"), pl.all()) for r in ranks]
        if not parts:
            return _empty_rank_table(name)
        return pl.concat(parts, how="diagonal_relaxed")

    builders: dict[str, Callable[[], pl.DataFrame]] = {"ranks": lambda: ranks_table(summary)}
    builders |= {name: (lambda name=name: union(name)) for name in PER_RANK}  # type: ignore[misc]
    return Tables(builders)


def _empty_rank_table(name: str) -> pl.DataFrame:
    schemas: dict[str, dict[str, pl.DataType]] = {"findings": FINDING_SCHEMA, "events": EVENT_SCHEMA}
    return pl.DataFrame(schema={"rank": pl.String(), **schemas.get(name, {"card": pl.String()})})


def with_rank(tables: Tables, rank: str, summary: Any) -> Tables:
    """One rank's tables with a `rank` column first, and the cluster's `ranks` (the explorer's
    open rank of a cluster)."""
    builders: dict[str, Callable[[], pl.DataFrame]] = {
        name: (lambda name=name: tables.frame(name).select(pl.lit(rank, dtype=pl.String).alias("rank"), pl.all()))  # type: ignore[misc]
        for name in tables.names
    }
    builders["ranks"] = lambda: ranks_table(summary)
    return Tables(builders)


# --------------------------------------------------------------------------- running a query


class _Frame:
    """A polars frame as an Arrow C stream (DuckDB scans it without pyarrow; polars hands
    its buffers over, no copy). A new stream each time DuckDB scans the table."""

    def __init__(self, frame: pl.DataFrame) -> None:
        self.frame = frame

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        return self.frame.__arrow_c_stream__(requested_schema)


def one_line_error(exc: BaseException) -> str:
    """The engine's message on one line: the caret lines under a quoted query are left out."""
    lines = [ln.strip() for ln in str(exc).splitlines()]
    kept = [ln for ln in lines if ln and not ln.startswith("LINE ") and set(ln) - {"^", " "}]
    return one_line(" ".join(kept) or type(exc).__name__)


def _with_tables(message: str, names: Sequence[str]) -> str:
    """A missing table's message names the tables there are (DuckDB suggests its own
    catalog's, `pg_sequences`, unless a name of ours is close)."""
    if "Table with name" not in message or "does not exist" not in message:
        return message
    head, _, hint = message.partition(" Did you mean ")
    if hint and hint.strip('"?. ') in names:
        return message
    return f"{head} The tables: {', '.join(names)}"


def referenced(query: str, names: Sequence[str]) -> list[str]:
    """The tables of `names` that `query` reads (DuckDB's parser says which; a query it
    cannot parse is its one-line error)."""
    return list(_parsed(query, names))


Needed = dict[str, "frozenset[str] | None"]
"""Per table a query reads, the names of the columns it may use (lower case), or None: all."""


def _parsed(query: str, names: Sequence[str]) -> Needed:
    """The tables of `names` that `query` reads, each with the columns it may use (see
    `_columns`). Parsed on a database of its own, with no data and no extension loading."""
    import duckdb

    text = query.strip().rstrip(";").strip()
    if not text:
        raise SqlError("empty query: give a SELECT over the tables " + ", ".join(names))
    con = duckdb.connect(":memory:")
    try:
        for statement in SAFETY:  # planning a statement may touch files (EXPORT makes its folder)
            con.execute(statement)
        try:
            found = {n.lower() for n in con.get_table_names(text, qualified=False)}
        except (duckdb.ParserException, duckdb.PermissionException):
            raise  # a syntax error, or a statement planned to touch a file: refused before any load
        except duckdb.Error:
            # Binding without the tables fails on some valid queries (an ASOF join): the tables
            # named in the text, every column of them, and the query itself tells the rest.
            return {n: None for n in names if re.search(rf"(?<![\w.]){n}(?!\w)", text, re.IGNORECASE)}
        wanted = [n for n in names if n in found]
        try:
            tree = con.execute("SELECT json_serialize_sql(?::VARCHAR)", [text]).fetchall()[0][0]
        except duckdb.Error:
            tree = None
    except duckdb.Error as exc:
        raise SqlError(one_line_error(exc)) from None
    finally:
        con.close()
    return _columns(tree, wanted)


def _columns(tree: str | None, wanted: list[str]) -> Needed:
    """Projection pushdown, which an Arrow stream does not do: the frames are handed to DuckDB
    with only the columns the query names (2M tasks x 60 columns take ~1.5 s to scan whole).
    Every column is kept when the query's syntax tree (json_serialize_sql: SELECT statements
    only) cannot say which it uses: a star (`*`, `t.*`, COLUMNS), a positional reference, a
    NATURAL join, a table used as a value (`SELECT t FROM tasks t`), columns renamed by
    position (`tasks AS t(a, b)`), PIVOT, or any other statement. Names are over-collected
    (aliases, struct fields): a column too many costs a little time, never a wrong result."""
    everything: Needed = {t: None for t in wanted}
    if tree is None:
        return everything
    doc = orjson.loads(tree)
    if doc.get("error"):
        return everything
    columns: set[str] = set()
    single: set[str] = set()
    refs: dict[str, str] = {}
    whole: set[str] = set()
    stack: list[Any] = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        kind, cls = node.get("type"), node.get("class")
        if cls in ("STAR", "POSITIONAL_REFERENCE") or kind in ("PIVOT", "UNPIVOT") or node.get("ref_type") == "NATURAL":
            return everything
        if cls == "COLUMN_REF":
            parts = [str(p).lower() for p in node.get("column_names", [])]
            columns.update(parts)
            if len(parts) == 1:
                single.update(parts)
        if kind == "BASE_TABLE":
            table = str(node.get("table_name", "")).lower()
            refs[table] = table
            if node.get("alias"):
                refs[str(node["alias"]).lower()] = table
            if node.get("column_name_alias"):
                whole.add(table)
        if kind == "JOIN":
            columns.update(str(c).lower() for c in node.get("using_columns") or [])
        stack.extend(v for v in node.values() if isinstance(v, (dict, list)))
    whole |= {refs[s] for s in single if s in refs}
    return {t: (None if t in whole else frozenset(columns)) for t in wanted}


def _projected(frame: pl.DataFrame, needed: frozenset[str] | None) -> pl.DataFrame:
    if needed is None:
        return frame
    keep = [c for c in frame.columns if c.lower() in needed]
    return frame.select(keep or frame.columns[:1])  # one column keeps the row count (count(*))


def run_sql(
    tables: Tables,
    query: str,
    *,
    flat: bool = False,
    on_start: Callable[[Callable[[], None]], None] | None = None,
) -> pl.DataFrame:
    """The result of `query` over `tables` (see the module docstring). `flat`: list and
    struct columns as text too (for a text table or CSV). `on_start(interrupt)` is called
    once the query runs: `interrupt()` stops it (from another thread), and run_sql then
    raises SqlError."""
    text = query.strip().rstrip(";").strip()
    if not text:
        raise SqlError("empty query: give a SELECT over the tables " + ", ".join(tables.names))
    try:
        import duckdb
    except ImportError:  # pragma: no cover - a dependency
        raise SqlError("DuckDB is not installed (pip install 'duckdb>=2,<3')") from None
    from npuscope.parsers.arrow_stream import Watched

    needed = _parsed(text, tables.names)
    frames = {name: _projected(tables.frame(name), cols) for name, cols in needed.items()}
    con = duckdb.connect(":memory:")
    try:
        for statement in SAFETY:
            con.execute(statement)
        for name, frame in frames.items():
            con.register(name, _Frame(frame))
        if on_start is not None:
            on_start(con.interrupt)
        rel = con.sql(text)
        if rel is None:  # a statement without rows (CREATE, SET ...)
            return pl.DataFrame()
        rel = _plain(rel, flat)
        watched = Watched(rel, lambda rows: None)
        try:
            return pl.DataFrame(watched)
        finally:
            watched.close()
    except duckdb.Error as exc:
        raise SqlError(_with_tables(one_line_error(exc), tables.names)) from None
    except (pl.exceptions.PolarsError, ValueError, TypeError) as exc:
        raise SqlError(f"the result could not be read: {one_line_error(exc)}") from None
    finally:
        con.close()


def _plain(rel: Any, flat: bool) -> Any:
    """`rel` with every column of a type polars reads as it is; others cast (see _PLAIN)."""
    exprs = []
    changed = False
    for name, dtype in zip(rel.columns, rel.types):
        quoted = '"' + name.replace('"', '""') + '"'
        target = _target(dtype, flat)
        if target is None:
            exprs.append(quoted)
        else:
            changed = True
            exprs.append(f"CAST({quoted} AS {target}) AS {quoted}")
    return rel.project(", ".join(exprs)) if changed else rel


def _target(dtype: Any, flat: bool) -> str | None:
    """The type a result column is cast to, or None to keep it."""
    kind = str(dtype.id)
    if kind in ("hugeint", "uhugeint"):
        return "BIGINT"
    if kind == "decimal":
        return "DOUBLE"
    if kind in _PLAIN:
        return None
    if kind in _NESTED and not flat and _nested_plain(dtype):
        return None
    return "VARCHAR"


def _nested_plain(dtype: Any) -> bool:
    kind = str(dtype.id)
    if kind in _PLAIN:
        return True
    if kind not in _NESTED:
        return False
    children = [child for _, child in dtype.children if hasattr(child, "id")]
    return bool(children) and all(_nested_plain(c) for c in children)


# --------------------------------------------------------------------------- the result as output


def render_text(frame: pl.DataFrame) -> str:
    """An aligned text table (analysis/table.py, as every report prints), then the row count;
    text from the files made safe for a terminal."""
    numeric = {i for i, dtype in enumerate(frame.dtypes) if dtype.is_numeric()}
    rows = [[_text_cell(v) for v in row] for row in frame.iter_rows()]
    lines = text_table(frame.columns, rows, numeric) if frame.width else []
    lines.append(f"({frame.height:,} row{'s' if frame.height != 1 else ''})")
    return printable("\n".join(lines) + "\n")


def _text_cell(value: object) -> object:
    if isinstance(value, bool):  # before int: a bool is one
        return "true" if value else "false"
    if value is None or isinstance(value, (int, float, str)):
        return value
    return str(value)


def encode(frame: pl.DataFrame, fmt: Format) -> bytes:
    """The result as CSV (a header, then the rows), JSON (a list of row objects), Parquet, or
    the text table."""
    if fmt == "table":
        return render_text(frame).encode()
    if fmt == "csv":
        return frame.write_csv().encode()
    if fmt == "json":
        rows = list(frame.iter_rows(named=True))
        return orjson.dumps(rows, default=str, option=orjson.OPT_NON_STR_KEYS) + b"\n"
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    return buffer.getvalue()


def check_out(path: Path) -> Path:
    """`path` as --out takes it: a file name in a folder that exists (checked before any work)."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise ProfileError(f"--out {path}: is a folder; name a file")
    if not path.parent.is_dir():
        raise ProfileError(f"--out {path}: no such folder {path.parent}")
    return path


def write_atomic(path: Path, data: bytes) -> Path:
    """`data` written to `path` whole or not at all: into a temporary file beside it, synced,
    then renamed over it (an existing file is replaced only by a complete one)."""
    path = check_out(path)
    folder = path.parent
    tmp = folder / f".{path.name}.{secrets.token_hex(6)}.part"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise ProfileError(f"{path}: cannot write the result ({exc.strerror or type(exc).__name__})") from None
    finally:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
    return path
