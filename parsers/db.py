"""msprof / torch_npu db exports (SQLite) to the canonical frames.

`msprof_<ts>.db` (CANN 8.x, `--type=db` or beside the text export) and torch_npu's
`ascend_pytorch_profiler_<rank>.db` hold what the text export holds, normalised: every
name-like column is an id into STRING_IDS. The tasks frame mirrors op_summary /
kernel_details (compute tasks from TASK + COMPUTE_TASK_INFO, one row per COMMUNICATION_OP,
PMU counters pivoted from TASK_PMU_INFO), the events frame holds the host APIs of CANN_API
as the timeline names them (`AscendCL@aclopCompileAndExecute`), and STEP_TIME gives steps.

The file is opened strictly read-only (`mode=ro&immutable=1`): no lock, journal, -wal or -shm
file is ever created beside it. Immutable also means SQLite ignores what lies beside the db: a
live or unfinished export (a -wal holding committed changes, a hot -journal, a writer's lock)
is first looked at by db_snapshot.py, which reads its committed state from a private copy
when it must and says in a note what it found (`strict` refuses a live or unfinished one).
Only tables are read: a view (which can run any query, one that never returns) or a virtual
table named like one the reader needs is refused with one line; a BLOB where an id, a
STRING_IDS reference or a time is expected is one line too, and a text value over 1 MB is
cut to its first characters, with a note. Big tables are read through ADBC's SQLite driver into Arrow
and handed to polars without a copy (3.8x faster than the sqlite3 module on a 2,000,000-row
TASK table, with 40% of its memory: BENCHMARKS.md). ADBC types a column from its first rows;
when a column holds odd values further down (an id stored as REAL or TEXT, a time as TEXT)
the query is read again with the sqlite3 module and every value is converted on its own, so
odd files are slow but never wrong. Ids (connectionId, globalTaskId, streamId...) are opaque
text: CANN writes 2^64-1, which SQLite can only keep as -1, a REAL or TEXT, so none is ever
held as a signed integer in the frames (-1 reads as 18446744073709551615, as msprof's JSON
prints it).
"""

from __future__ import annotations

import math
import os
import re
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import polars as pl

from .columns import EVENT_SCHEMA, NULL_VALUES, STEP_SCHEMA, TASK_ORDER, TASK_SCHEMA
from .db_snapshot import take as take_snapshot
from .errors import ProfileError, reading
from .frames import canonical_tasks, communication_type, ns_to_us

DB_NAME_RE = re.compile(r"^(?:msprof_\d+|(?:ascend_pytorch|ascend_mindspore)_profiler(?:_\d+)?)\.db$")
SQLITE_MAGIC = b"SQLite format 3\x00"

# Times are epoch nanoseconds; anything outside [0, 2^62) (year 2116) is damage, and keeping
# it would overflow the Int64 arithmetic of waits and spans.
_TIME_MAX = 1 << 62
_U64 = 1 << 64
_NO_CONTEXT = "4294967295"  # TASK.contextId of a task without subtasks: `N/A` in op_summary
TEXT_MAX_BYTES = 1 << 20
"""A text value longer than this (a name, a shape) is cut to TEXT_KEEP characters, with a note."""
TEXT_KEEP = 1000
_VIRTUAL_RE = re.compile(r"\s*CREATE\s+VIRTUAL\s+TABLE\b", re.IGNORECASE)
_FROM_RE = re.compile(r'(?:FROM|JOIN)\s+"((?:[^"]|"")+)"')
BATCH_ROWS = 65536
"""Rows per batch of a query (ADBC infers a column's type from its first batch: keep it large);
progress is reported and a cancel seen between batches (~0.05 s each)."""

RowsHook = Callable[[int, int], None]
"""Called with the rows read so far and the rows the read is expected to take; it may raise to
stop the read."""

# How each column is read. time/int/key: Int64; id: opaque text; ref: a STRING_IDS id,
# resolved to its text with `N/A` as null; list: a ref whose text is a `;`-list that may keep
# its quotes (shapes), stripped as the CSV reader strips them; float: Float64; text: String.
_KIND_DTYPES = {
    "time": pl.Int64,
    "int": pl.Int64,
    "key": pl.Int64,
    "id": pl.String,
    "ref": pl.String,
    "list": pl.String,
    "float": pl.Float64,
    "text": pl.String,
}
# What ADBC may hand back for each kind before conversion (Null: a column of NULLs).
_FAST_OK = {
    "time": (pl.Int64, pl.Null),
    "int": (pl.Int64, pl.Null),
    "key": (pl.Int64, pl.Null),
    "id": (pl.Int64, pl.Null),
    "ref": (pl.Int64, pl.Null),
    "list": (pl.Int64, pl.Null),
    "float": (pl.Float64, pl.Int64, pl.Null),
    "text": (pl.String, pl.Null),
}

# ENUM_API_TYPE names to the level the timeline prints before `@`.
_LEVELS = {"acl": "AscendCL", "node": "Node", "runtime": "Runtime", "model": "Model", "hccl": "Hccl", "op": "Op"}
# The documented ENUM_API_TYPE ids, for a db that lacks the table.
_DEFAULT_API_TYPES = {
    5000: "runtime",
    5500: "hccl",
    10000: "node",
    15000: "model",
    20000: "acl",
    50001: "op",
    50002: "queue",
    50003: "trace",
    50004: "mstx",
}
# PMU metric names in the db (times in ns) and in op_summary (times in us).
_PMU_NAMES = {"aic_total_time": "aicore_time(us)", "aiv_total_time": "aiv_time(us)"}


@dataclass(frozen=True)
class DbExport:
    tasks: pl.DataFrame
    events: pl.DataFrame | None
    steps: pl.DataFrame | None
    cards: tuple[str, ...]
    pmu_columns: tuple[str, ...]
    notes: tuple[str, ...]


def is_db_export(path: Path) -> bool:
    """A db export by name whose first bytes say SQLite."""
    path = Path(path)
    if not DB_NAME_RE.match(path.name):
        return False
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == SQLITE_MAGIC
    except OSError:
        return False


# --------------------------------------------------------------------------- the file


def _check_file(path: Path) -> None:
    """Refuse what SQLite would fail on later, with a message that says what to do."""
    with reading(path, "an msprof_*.db or ascend_pytorch_profiler_*.db file"), open(path, "rb") as fh:
        head = fh.read(100)
        size = fh.seek(0, 2)
    if size == 0:
        raise ProfileError(f"{path}: the file is empty; export the profile again")
    if not head.startswith(SQLITE_MAGIC):
        raise ProfileError(
            f"{path}: not an SQLite database (a db export starts with 'SQLite format 3'); point "
            "npuscope at the msprof_*.db or ascend_pytorch_profiler_*.db that msprof / torch_npu wrote"
        )
    if len(head) < 100:
        raise ProfileError(
            f"{path}: the file is cut short ({size} bytes); the copy was truncated, copy or export it again"
        )
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(head[28:32], "big")
    counter_ok = head[24:28] == head[92:96]  # the in-header page count is valid
    if page < 512 or page & (page - 1):
        raise ProfileError(f"{path}: the SQLite header is damaged (page size {page}); copy or export the file again")
    if size % page or (counter_ok and pages and size < pages * page):
        expected = f" of {pages * page:,}" if counter_ok and pages else ""
        raise ProfileError(
            f"{path}: the database is truncated ({size:,}{expected} bytes); the copy was cut "
            "short, copy or export it again"
        )


def _sqlite_error(path: Path, exc: BaseException) -> ProfileError:
    msg = " ".join(str(exc).split())
    low = msg.lower()
    if "locked" in low or "busy" in low:
        return ProfileError(
            f"{path}: the database is locked by another process (is the profiler still writing "
            "it?); wait until it finishes, or copy the file and open the copy"
        )
    if "not a database" in low or "encrypted" in low:
        return ProfileError(f"{path}: not an SQLite database or encrypted; export the profile again")
    if "malformed" in low or "corrupt" in low or "short read" in low:
        return ProfileError(f"{path}: the database is damaged or truncated ({msg}); copy or export it again")
    if "unable to open" in low or "permission" in low:
        return ProfileError(f"{path}: cannot be opened ({msg}); check that the file is readable")
    if "i/o error" in low:
        return ProfileError(f"{path}: read error ({msg}); copy the file to a local disk and open the copy")
    return ProfileError(f"{path}: cannot be read as a db export ({msg}); export the profile again")


def _q(name: str | None) -> str:
    """An SQL identifier, quoted; callers ask only for tables and columns they found."""
    assert name is not None, "no such table or column"
    return '"' + name.replace('"', '""') + '"'


# --------------------------------------------------------------------------- values


def _int(v: object) -> int | None:
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v if -(1 << 63) <= v < (1 << 63) else None
    if isinstance(v, float):
        return int(v) if math.isfinite(v) and v.is_integer() and abs(v) < (1 << 63) else None
    if isinstance(v, str):
        s = v.strip()
        if re.fullmatch(r"[+-]?\d{1,19}", s):
            return _int(int(s))
    return None


def _id(v: object) -> str | None:
    if v is None:
        return None
    if isinstance(v, int):
        return str(v % _U64) if -(1 << 63) <= v < _U64 else str(v)
    if isinstance(v, float):
        return str(int(v)) if math.isfinite(v) and v.is_integer() else repr(v)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v).strip()


def _float(v: object) -> float | None:
    if not isinstance(v, (int, float, str)):  # None, bytes
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _text(v: object) -> str | None:
    if v is None:
        return None
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _utf8(df: pl.DataFrame, columns: list[str]) -> bool:
    """Whether the text columns ADBC handed over are valid UTF-8 (SQLite does not check what
    is stored as TEXT; polars must never hold invalid UTF-8)."""
    try:
        for c in columns:
            if df.schema[c] == pl.String:
                df[c].cast(pl.Binary).cast(pl.String)
    except pl.exceptions.PolarsError:
        return False
    return True


def _clean(value: str | None, kind: str) -> str | None:
    """A STRING_IDS text as the CSV reader would give it: `N/A` is null, list quotes go."""
    if value is None or value in NULL_VALUES:
        return None
    if kind == "list" and value.startswith('"'):
        return value.strip('"\t ')
    return value


class _Db:
    """One read-only db: the schema, STRING_IDS, and queries into typed frames."""

    def __init__(
        self, path: Path, hook: RowsHook | None = None, batch_rows: int = BATCH_ROWS, strict: bool = False
    ) -> None:
        self.path = path
        self.hook = hook
        self.batch_rows = batch_rows
        self.rows_read = 0  # over every query, for `hook`
        self.rows_expected = 0
        self._counts: dict[str, int] = {}
        # The file itself, or a private copy of its committed state (a -wal, a hot -journal).
        self.snapshot = take_snapshot(path, strict)
        # fsencode: a file name that is not UTF-8 still reaches SQLite byte for byte.
        self.uri = "file:" + quote(os.fsencode(self.snapshot.path.absolute())) + "?mode=ro&immutable=1"
        self.notes: list[str] = list(self.snapshot.notes)
        # STRING_IDS, cleaned once per kind (ref, list) instead of once per row.
        self.keys = pl.Series("id", [], dtype=pl.Int64)
        self.values = {k: pl.Series("value", [], dtype=pl.String) for k in ("ref", "list")}
        self.strings: dict[int, str] = {}
        self._adbc: Any = None  # the ADBC connection and database, when the driver is installed
        self._adbc_db: Any = None
        try:
            self.con = sqlite3.connect(self.uri, uri=True)
            self.con.text_factory = _decode  # a TEXT value that is not UTF-8 reads, with U+FFFD
        except sqlite3.Error as exc:
            self.snapshot.close()
            raise _sqlite_error(path, exc) from None
        except BaseException:
            self.snapshot.close()
            raise
        try:
            rows = self.con.execute(
                "SELECT type, name, sql FROM sqlite_master WHERE type IN ('table', 'view')"
            ).fetchall()
        except sqlite3.Error as exc:
            self.close()
            raise _sqlite_error(path, exc) from None
        except BaseException:
            self.close()
            raise
        self.tables: dict[str, str] = {}
        self._not_tables: dict[str, str] = {}  # real name -> what it is instead (a view...)
        for kind, name, sql in rows:
            if isinstance(name, str) and name.upper() not in self.tables:
                self.tables[name.upper()] = name
                if kind != "table":
                    self._not_tables[name] = "a view"
                elif isinstance(sql, str) and _VIRTUAL_RE.match(sql):
                    self._not_tables[name] = "a virtual table"
        self._columns: dict[str, dict[str, str]] = {}
        try:
            self._open_adbc()
        except BaseException:
            self.close()
            raise

    def _open_adbc(self) -> None:
        try:
            import adbc_driver_manager
            import adbc_driver_sqlite
        except ImportError:
            self.notes.append(
                "adbc-driver-sqlite is not installed: the db is read with the slower sqlite3 "
                "module (pip install adbc-driver-sqlite)"
            )
            return
        try:
            self._adbc_db = adbc_driver_sqlite.connect(self.uri)
            self._adbc = adbc_driver_manager.AdbcConnection(self._adbc_db)
        except adbc_driver_manager.Error:
            self._adbc = None  # sqlite3 reads it, and says what is wrong if it cannot

    def close(self) -> None:
        for res in (self._adbc, self._adbc_db):
            try:
                if res is not None:
                    res.close()
            except Exception:  # noqa: BLE001 - closing a read-only handle cannot lose data
                pass
        self._adbc = self._adbc_db = None
        try:
            self.con.close()
        finally:
            self.snapshot.close()

    def __enter__(self) -> _Db:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- schema

    def table(self, name: str) -> str | None:
        """The real name of table `name`, or None; a view or virtual table by that name is
        refused (it can run any query: one that never returns, or returns gigabytes)."""
        real = self.tables.get(name.upper())
        if real is not None and real in self._not_tables:
            raise ProfileError(
                f"{self.path}: {real} is {self._not_tables[real]}, not a table; a db export holds "
                "tables only, so this file was made or edited by hand: export the profile again"
            )
        return real

    def columns(self, name: str) -> dict[str, str]:
        """Column names of a table, upper-cased name -> real name ({} if no such table)."""
        real = self.table(name)
        if real is None:
            return {}
        if real not in self._columns:
            try:
                info = self.con.execute(f"PRAGMA table_info({_q(real)})").fetchall()
            except sqlite3.Error as exc:
                raise _sqlite_error(self.path, exc) from None
            self._columns[real] = {str(r[1]).upper(): str(r[1]) for r in info}
        return self._columns[real]

    def col(self, table: str, *names: str) -> str | None:
        """The first of `names` that `table` has (real spelling), or None."""
        cols = self.columns(table)
        for n in names:
            if n.upper() in cols:
                return cols[n.upper()]
        return None

    # -- reading

    def load_strings(self) -> None:
        if not (self.col("STRING_IDS", "id") and self.col("STRING_IDS", "value")):
            self.notes.append("no STRING_IDS table: op names, types and shapes are unknown")
            return
        ids = self.frame(
            f"SELECT {_q(self.col('STRING_IDS', 'id'))} AS id, {_q(self.col('STRING_IDS', 'value'))} AS value "
            f"FROM {_q(self.table('STRING_IDS'))}",
            {"id": "int", "value": "text"},
        )
        ids = ids.drop_nulls("id").unique(subset="id", keep="first", maintain_order=True)
        self.keys = ids["id"]
        self.strings = dict(zip(ids["id"].to_list(), ids["value"].to_list()))
        texts = ids["value"].to_list()
        self.values = {
            kind: pl.Series("value", [_clean(v, kind) for v in texts], dtype=pl.String) for kind in ("ref", "list")
        }

    def frame(self, sql: str, kinds: dict[str, str]) -> pl.DataFrame:
        """The rows of `sql` (its columns named as in `kinds`) converted per kind; a text
        value over TEXT_MAX_BYTES is cut to its first TEXT_KEEP characters, with a note."""
        texts = [c for c, k in kinds.items() if k == "text"]
        if not texts:
            return self._frame(sql, kinds)
        size = {c: f"length(CAST({_q(c)} AS BLOB))" for c in texts}
        items = [
            f"CASE WHEN {size[c]} > {TEXT_MAX_BYTES} THEN substr({_q(c)}, 1, {TEXT_KEEP}) ELSE {_q(c)} END AS {_q(c)}"
            if c in size
            else _q(c)
            for c in kinds
        ]
        items.append("(" + " + ".join(f"coalesce({size[c]} > {TEXT_MAX_BYTES}, 0)" for c in texts) + ") AS _cut")
        df = self._frame(f"SELECT {', '.join(items)} FROM ({sql})", {**kinds, "_cut": "int"})
        cut = int(df["_cut"].sum() or 0)
        if cut:
            tables = ", ".join(dict.fromkeys(_FROM_RE.findall(sql))) or "the db"
            self.notes.append(
                f"{cut:,} text value(s) of {tables} over {TEXT_MAX_BYTES >> 20} MB cut to their first "
                f"{TEXT_KEEP:,} characters (a name or shape is never that long: the file was made or "
                "edited by hand)"
            )
        return df.drop("_cut")

    def _frame(self, sql: str, kinds: dict[str, str]) -> pl.DataFrame:
        if self._adbc is not None:
            raw = self._adbc_frame(sql)
            if (
                raw is not None
                and raw.columns == list(kinds)
                and all(raw.schema[c] in _FAST_OK[k] for c, k in kinds.items())
                and _utf8(raw, [c for c, k in kinds.items() if k == "text"])
            ):
                self.rows_read += raw.height
                df = raw
                for c, k in kinds.items():  # one column at a time: a cancel is seen between them
                    df = df.with_columns(self._convert(c, k, raw.schema[c]))
                    self.tick()
                return df
        df = self._sqlite3_frame(sql, kinds)
        self.tick()
        return df

    def _check_values(self, sql: str, name: str, kind: str, values: Iterable[object]) -> None:
        """Refuse what the schema never holds: a BLOB where a number or id is expected, a
        fractional number where a STRING_IDS id or a join key is (one line naming the column)."""
        for v in values:
            if isinstance(v, bytes):
                what = "a BLOB (binary) value"
            elif kind in ("ref", "list", "key") and isinstance(v, float) and not (math.isfinite(v) and v.is_integer()):
                what = f"the fractional number {v!r}"
            else:
                continue
            column = m.group(1) if (m := re.search(r'([\w."]+) AS ' + re.escape(_q(name)), sql)) else name
            tables = ", ".join(dict.fromkeys(_FROM_RE.findall(sql))) or "the db"
            expected = {
                "ref": "a STRING_IDS id",
                "list": "a STRING_IDS id",
                "key": "an INTEGER id",
                "id": "an INTEGER id",
                "float": "a number",
            }.get(kind, "an INTEGER")
            raise ProfileError(
                f"{self.path}: {tables} holds {what} in {column.split('.')[-1]}, where {expected} is "
                "expected; the file was made or edited by hand: export the profile again"
            )

    # -- progress

    def expect(self, table: str | None, times: int = 1) -> None:
        """Count the rows of `table` `times` into the expected rows (~0.1 s for 2M rows)."""
        if self.hook is None or table is None or times < 1:
            return
        if table not in self._counts:
            try:
                (rows,) = self.con.execute(f"SELECT COUNT(*) FROM {_q(table)}").fetchone()
            except sqlite3.Error:  # damage: the read itself says what is wrong
                rows = 0
            self._counts[table] = rows if isinstance(rows, int) else 0
        self.rows_expected += self._counts[table] * times

    def _rows(self, rows: int) -> None:
        """`rows` of the current query read: the hook sees every query's rows so far."""
        if self.hook is not None:
            done = self.rows_read + rows
            self.hook(done, max(done, self.rows_expected))

    def tick(self) -> None:
        """Between two steps of work: the hook may stop the read here too."""
        self._rows(0)

    def _adbc_frame(self, sql: str) -> pl.DataFrame | None:
        import adbc_driver_manager

        from .arrow_stream import Watched

        stmt = watched = None
        stopped: BaseException | None = None  # what the hook raised to stop the read
        try:
            stmt = adbc_driver_manager.AdbcStatement(self._adbc)
            stmt.set_options(**{"adbc.sqlite.query.batch_rows": str(self.batch_rows)})
            stmt.set_sql_query(sql)
            stream, _ = stmt.execute_query()
            if self.hook is None:
                df = pl.DataFrame(stream)
            else:
                watched = Watched(stream, self._rows)
                try:
                    df = pl.DataFrame(watched)
                except BaseException:
                    if watched.error is None:
                        raise
                    stopped = watched.error
        except (adbc_driver_manager.Error, pl.exceptions.PolarsError, ValueError, TypeError):
            return None  # a type ADBC did not expect, or damage: sqlite3 reads it or says why
        finally:
            if watched is not None:
                watched.close()
            if stmt is not None:
                try:
                    stmt.close()
                except Exception:  # noqa: BLE001
                    pass
        if stopped is not None:
            raise stopped
        return df.rechunk() if df.n_chunks() > 1 else df

    def _convert(self, name: str, kind: str, dtype: pl.DataType) -> pl.Expr:
        col = pl.col(name)
        if dtype == pl.Null:
            return pl.lit(None, dtype=_KIND_DTYPES[kind]).alias(name)
        if kind == "id":
            # Ids are unsigned in CANN: -1 is how SQLite keeps 2^64-1.
            return col.reinterpret(signed=False).cast(pl.String).alias(name)
        if kind in ("ref", "list"):
            return col.replace_strict(self.keys, self.values[kind], default=None, return_dtype=pl.String).alias(name)
        return col.cast(_KIND_DTYPES[kind]).alias(name)

    def _sqlite3_frame(self, sql: str, kinds: dict[str, str]) -> pl.DataFrame:
        rows: list[Any] = []
        try:
            cur = self.con.execute(sql)
        except (sqlite3.Error, OverflowError, ValueError) as exc:
            raise _sqlite_error(self.path, exc) from None
        while True:
            try:
                batch = cur.fetchmany(self.batch_rows)
            except (sqlite3.Error, OverflowError, ValueError) as exc:
                raise _sqlite_error(self.path, exc) from None
            if not batch:
                break
            rows += batch
            self._rows(len(rows))  # outside the try: what the hook raises is its own
        self.rows_read += len(rows)
        cols = list(zip(*rows)) if rows else [()] * len(kinds)
        del rows
        out = {}
        for (name, kind), values in zip(kinds.items(), cols):
            if kind != "text":
                self._check_values(sql, name, kind, values)
            data: list[object]
            if kind in ("time", "int", "key"):
                data = [_int(v) for v in values]
            elif kind == "id":
                data = [_id(v) for v in values]
            elif kind in ("ref", "list"):
                get = self.strings.get  # a text value is the name itself, not an id
                data = [
                    _clean(v if isinstance(v, str) else get(n) if (n := _int(v)) is not None else None, kind)
                    for v in values
                ]
            elif kind == "float":
                data = [_float(v) for v in values]
            else:
                data = [_text(v) for v in values]
            out[name] = pl.Series(name, data, dtype=_KIND_DTYPES[kind])
            self.tick()  # a column of values converted one by one takes a while
        return pl.DataFrame(out)


# --------------------------------------------------------------------------- frames


def _valid_times(start: str, end: str) -> pl.Expr:
    return (
        pl.col(start).is_not_null()
        & pl.col(end).is_not_null()
        & (pl.col(start) >= 0)
        & (pl.col(end) >= pl.col(start))
        & (pl.col(end) < _TIME_MAX)
    )


def _keep_valid(
    df: pl.DataFrame, table: str, notes: list[str], start: str = "start_ns", end: str = "end_ns"
) -> pl.DataFrame:
    ok = df.filter(_valid_times(start, end))
    if ok.height < df.height:
        notes.append(
            f"{df.height - ok.height:,} {table} row(s) skipped: start or end time missing, negative or out of order"
        )
    return ok


def _card_key(card: str) -> tuple[int, int | str]:
    return (0, int(card)) if card.isascii() and card.isdigit() else (1, card)


def _select(
    db: _Db, table: str, wanted: Iterable[tuple[str, tuple[str, ...], str]], alias: str = ""
) -> tuple[list[str], dict[str, str]]:
    """SQL select items and kinds for the columns of `table` that exist: (out, names, kind)."""
    items, kinds = [], {}
    prefix = f"{alias}." if alias else ""
    for out, names, kind in wanted:
        real = db.col(table, *names)
        if real is not None:
            items.append(f"{prefix}{_q(real)} AS {_q(out)}")
            kinds[out] = kind
    return items, kinds


_TASK_COLS = (
    ("start_ns", ("startNs",), "time"),
    ("end_ns", ("endNs",), "time"),
    ("device", ("deviceId",), "id"),
    ("stream_id", ("streamId",), "id"),
    ("task_id", ("taskId",), "id"),
    ("model_id", ("modelId",), "id"),
    ("context_id", ("contextId",), "id"),
)
_COMPUTE_COLS = (
    ("op_name", ("name",), "ref"),
    ("task_type", ("taskType",), "ref"),
    ("op_type", ("opType",), "ref"),
    ("block_num", ("blockNum", "blockDim", "block_dim"), "int"),
    ("mix_block_num", ("mixBlockNum", "mixBlockDim", "mix_block_dim"), "int"),
    ("input_shapes", ("inputShapes",), "list"),
    ("input_dtypes", ("inputDataTypes",), "list"),
    ("input_formats", ("inputFormats",), "list"),
    ("output_shapes", ("outputShapes",), "list"),
    ("output_dtypes", ("outputDataTypes",), "list"),
    ("output_formats", ("outputFormats",), "list"),
    ("op_state", ("opState",), "ref"),
    ("hf32_eligible", ("hf32Eligible",), "ref"),
)


class _Cards:
    """Device ids to card labels: the layout's label, the rank of RANK_DEVICE_MAP, the id."""

    def __init__(self, db: _Db, card: str | None) -> None:
        self.db = db
        self.given = card
        self.devices: list[str] = []
        task = db.table("TASK")
        dev = db.col("TASK", "deviceId")
        if dev is not None:
            # Read whole and made unique by polars: SQL DISTINCT builds a B-tree, 2x slower.
            got = db.frame(f"SELECT {_q(dev)} AS device FROM {_q(task)}", {"device": "id"})
            self.devices = sorted(got["device"].drop_nulls().unique().to_list(), key=_card_key)
        ranks: dict[str, str] = {}
        rank_col, rank_dev = db.col("RANK_DEVICE_MAP", "rankId"), db.col("RANK_DEVICE_MAP", "deviceId")
        if rank_col and rank_dev:
            got = db.frame(
                f"SELECT {_q(rank_col)} AS rank, {_q(rank_dev)} AS device FROM {_q(db.table('RANK_DEVICE_MAP'))}",
                {"rank": "int", "device": "id"},
            )
            for rank, device in got.iter_rows():
                if rank is not None and rank >= 0 and device is not None:
                    ranks.setdefault(device, str(rank))
        if card is not None and len(self.devices) > 1:
            db.notes.append(
                f"the db holds {len(self.devices)} devices ({', '.join(self.devices)}): each keeps "
                f"its own card instead of the folder's card {card}"
            )
        if card is not None and len(self.devices) <= 1:
            self.labels = {d: card for d in self.devices}
        else:
            self.labels = {d: ranks.get(d, d) for d in self.devices}
        labels = sorted(set(self.labels.values()), key=_card_key)
        if not labels:
            labels = [card if card is not None else "0"]
        self.cards = labels
        self.only = labels[0] if len(labels) == 1 else None
        self._by_connection: pl.DataFrame | None = None

    def label(self, device: str) -> pl.Expr:
        """Card of each row from its device id; a missing id goes to the only card."""
        expr = (
            pl.col(device).replace_strict(
                list(self.labels), list(self.labels.values()), default=None, return_dtype=pl.String
            )
            if self.labels
            else pl.lit(None, dtype=pl.String)
        )
        if self.only is not None:
            expr = expr.fill_null(self.only)
        return expr.alias("card")

    def model_by_connection(self) -> pl.DataFrame:
        """connection_id -> model_id of the TASK rows (a collective's Model ID in op_summary)."""
        task, conn, model = self.db.table("TASK"), self.db.col("TASK", "connectionId"), self.db.col("TASK", "modelId")
        if conn is None or model is None:
            return pl.DataFrame(schema={"connection_id": pl.String, "model_id": pl.String})
        got = self.db.frame(
            f"SELECT {_q(conn)} AS connection_id, {_q(model)} AS model_id FROM {_q(task)}",
            {"connection_id": "id", "model_id": "id"},
        )
        return got.drop_nulls().unique(subset="connection_id", keep="first", maintain_order=True)

    def by_connection(self) -> pl.DataFrame:
        """connection_id -> card, from every TASK row (compute, communication, markers)."""
        if self._by_connection is None:
            task, conn, dev = (
                self.db.table("TASK"),
                self.db.col("TASK", "connectionId"),
                self.db.col("TASK", "deviceId"),
            )
            if conn is None or dev is None:
                self._by_connection = pl.DataFrame(schema={"connection_id": pl.String, "card": pl.String})
            else:
                got = self.db.frame(
                    f"SELECT {_q(conn)} AS connection_id, {_q(dev)} AS device FROM {_q(task)}",
                    {"connection_id": "id", "device": "id"},
                )
                got = got.drop_nulls().unique(subset="connection_id", keep="first", maintain_order=True)
                self.db.tick()
                self._by_connection = got.select("connection_id", self.label("device")).drop_nulls("card")
        return self._by_connection


def _compute_tasks(db: _Db, cards: _Cards) -> pl.DataFrame | None:
    task, cti = db.table("TASK"), db.table("COMPUTE_TASK_INFO")
    if cti is None:
        db.notes.append("no COMPUTE_TASK_INFO table: the db holds no compute tasks (only communication, if any)")
        return None
    t_key, c_key = db.col("TASK", "globalTaskId"), db.col("COMPUTE_TASK_INFO", "globalTaskId")
    if t_key is None or c_key is None:
        db.notes.append("TASK or COMPUTE_TASK_INFO has no globalTaskId column: compute tasks cannot be read")
        return None
    # The card comes from deviceId only when the db holds several; the key only joins PMU rows.
    wanted = [w for w in _TASK_COLS if not (w[0] == "device" and cards.only is not None)]
    t_items, t_kinds = _select(db, "TASK", wanted, "t")
    c_items, c_kinds = _select(db, "COMPUTE_TASK_INFO", _COMPUTE_COLS, "c")
    if db.table("TASK_PMU_INFO") is not None:
        c_items.append(f"t.{_q(t_key)} AS global_task_id")
        c_kinds["global_task_id"] = "key"
    for out, names, _ in _COMPUTE_COLS[:3]:
        if out not in c_kinds:
            db.notes.append(f"COMPUTE_TASK_INFO has no {names[0]} column: {out.replace('_', ' ')}s are unknown")
    sql = f"SELECT {', '.join(t_items + c_items)} FROM {_q(task)} t JOIN {_q(cti)} c ON c.{_q(c_key)} = t.{_q(t_key)}"
    df = db.frame(sql, {**t_kinds, **c_kinds})
    df = _keep_valid(df, "compute task", db.notes)
    db.tick()
    extra = []
    if "context_id" in df.columns:
        extra.append(
            pl.when(pl.col("context_id") == _NO_CONTEXT).then(None).otherwise(pl.col("context_id")).alias("context_id")
        )
    extra.append(cards.label("device") if "device" in df.columns else pl.lit(cards.only, dtype=pl.String).alias("card"))
    df = df.with_columns(ns_to_us(pl.col("end_ns") - pl.col("start_ns")).alias("duration_us"), *extra)
    if "card" in df.columns and df["card"].null_count():
        db.notes.append(
            f"{df['card'].null_count():,} compute task(s) skipped: no deviceId, and the db holds several devices"
        )
        df = df.drop_nulls("card")
    return df


def _pmu(db: _Db, compute: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """TASK_PMU_INFO pivoted into one Float64 column per metric, op_summary's names and units."""
    table = db.table("TASK_PMU_INFO")
    key, name, value = (db.col("TASK_PMU_INFO", c) for c in ("globalTaskId", "name", "value"))
    if (
        table is None
        or key is None
        or name is None
        or value is None
        or "global_task_id" not in compute.columns
        or compute.height == 0
    ):
        return compute, []
    v = _q(value)
    pmu = db.frame(
        f"SELECT {_q(key)} AS global_task_id, {_q(name)} AS metric, "
        f"CASE WHEN typeof({v}) IN ('integer', 'real') THEN CAST({v} AS REAL) END AS value FROM {_q(table)}",
        {"global_task_id": "key", "metric": "int", "value": "float"},
    )
    metric_ids = [m for m in pmu["metric"].unique(maintain_order=True).to_list() if m is not None]
    names: dict[int, str] = {}
    in_ns: list[int] = []  # `*_time` metrics are in ns in the db, in us in op_summary
    taken = set(TASK_ORDER) | set(compute.columns)
    for m in metric_ids:
        raw = db.strings.get(m)
        if raw is None:
            continue
        label = _PMU_NAMES.get(raw) or (raw + "(us)" if raw.endswith("_time") else raw)
        if label not in taken:
            names[m] = label
            taken.add(label)
            if label != raw:
                in_ns.append(m)
    dropped = pmu.height - pmu.filter(pl.col("metric").is_in(list(names))).height
    if dropped:
        db.notes.append(f"{dropped:,} TASK_PMU_INFO row(s) skipped: metric name unknown or clashing with a task column")
    if not names:
        return compute, []
    wide = (
        pmu.filter(pl.col("metric").is_in(list(names)) & pl.col("global_task_id").is_not_null())
        .with_columns(
            pl.when(pl.col("metric").is_in(in_ns))
            # Whole nanoseconds read as the 3-decimal text does; fractional ones as they are.
            .then(
                pl.when(pl.col("value") == pl.col("value").floor())
                .then(ns_to_us(pl.col("value")))
                .otherwise(pl.col("value") / 1000)
            )
            .otherwise(pl.col("value"))
            .alias("value")
        )
        .pivot(on="metric", index="global_task_id", values="value", aggregate_function="first")
    )
    wide = wide.rename({str(m): n for m, n in names.items() if str(m) in wide.columns})
    labels = [n for n in names.values() if n in wide.columns]
    joined = compute.join(
        wide.select("global_task_id", *labels), on="global_task_id", how="left", maintain_order="left"
    )
    return joined.with_columns(pl.col(c).cast(pl.Float64) for c in labels), labels


def _communication(db: _Db, cards: _Cards) -> pl.DataFrame | None:
    table = db.table("COMMUNICATION_OP")
    if table is None:
        return None
    items, kinds = _select(
        db,
        "COMMUNICATION_OP",
        (
            ("op_name", ("opName",), "ref"),
            ("start_ns", ("startNs",), "time"),
            ("end_ns", ("endNs",), "time"),
            ("connection_id", ("connectionId",), "id"),
            ("op_type", ("opType",), "ref"),
            ("device", ("deviceId",), "id"),
        ),
    )
    if not {"op_name", "start_ns", "end_ns"} <= set(kinds):
        db.notes.append("COMMUNICATION_OP lacks opName, startNs or endNs: communication ops are not read")
        return None
    df = db.frame(f"SELECT {', '.join(items)} FROM {_q(table)}", kinds)
    if df.height == 0:
        return None
    df = _keep_valid(df, "COMMUNICATION_OP", db.notes)
    derived = communication_type(pl.col("op_name"))  # `hcom_allReduce__538_0_1` -> `hcom_allReduce_`
    op_type = pl.col("op_type") if "op_type" in df.columns else pl.lit(None, dtype=pl.String)
    df = df.with_columns(
        pl.coalesce(op_type, derived).alias("op_type"),
        pl.lit("COMMUNICATION").alias("task_type"),
        ns_to_us(pl.col("end_ns") - pl.col("start_ns")).alias("duration_us"),
    )
    # The card: its deviceId (newer schemas), else the TASK rows of its connection, else the only one.
    card = cards.label("device") if "device" in df.columns else pl.lit(cards.only, dtype=pl.String).alias("card")
    df = df.with_columns(card)
    if df["card"].null_count() and "connection_id" in df.columns:
        df = (
            df.join(
                cards.by_connection().rename({"card": "linked"}), on="connection_id", how="left", maintain_order="left"
            )
            .with_columns(pl.coalesce("card", "linked").alias("card"))
            .drop("linked")
        )
    lost = df["card"].null_count()
    if lost:
        db.notes.append(f"{lost:,} communication op(s) skipped: no device and no TASK row tells their card")
        df = df.drop_nulls("card")
    # As op_summary writes a collective: the Model ID of its tasks, Block Num 0.
    if "connection_id" in df.columns:
        df = df.join(cards.model_by_connection(), on="connection_id", how="left", maintain_order="left")
    return df.with_columns(pl.lit(0, dtype=pl.Int64).alias("block_num"))


def _events(db: _Db, cards: _Cards) -> pl.DataFrame | None:
    table = db.table("CANN_API")
    if table is None:
        db.notes.append("no CANN_API table: host API calls are unknown, so wait causes can only be suspected")
        return None
    items, kinds = _select(
        db,
        "CANN_API",
        (
            ("ts_ns", ("startNs",), "time"),
            ("end_ns", ("endNs",), "time"),
            ("type", ("type",), "int"),
            ("thread", ("globalTid",), "id"),
            ("connection_id", ("connectionId",), "id"),
            ("api", ("name",), "ref"),
        ),
    )
    if not {"ts_ns", "end_ns"} <= set(kinds):
        db.notes.append("CANN_API lacks startNs or endNs: host API calls are not read")
        return None
    df = db.frame(f"SELECT {', '.join(items)} FROM {_q(table)}", kinds)
    df = _keep_valid(df, "CANN_API", db.notes, "ts_ns", "end_ns")
    levels = dict(_DEFAULT_API_TYPES)
    e_id, e_name = db.col("ENUM_API_TYPE", "id"), db.col("ENUM_API_TYPE", "name")
    if e_id and e_name:
        enum = db.frame(
            f"SELECT {_q(e_id)} AS id, {_q(e_name)} AS name FROM {_q(db.table('ENUM_API_TYPE'))}",
            {"id": "int", "name": "text"},
        )
        levels.update((i, n) for i, n in enum.iter_rows() if i is not None and n is not None)
    level_names = {i: _LEVELS.get(n.lower(), n[:1].upper() + n[1:]) for i, n in levels.items() if n}
    level = (
        pl.col("type").replace_strict(
            list(level_names), list(level_names.values()), default=None, return_dtype=pl.String
        )
        if "type" in df.columns and level_names
        else pl.lit(None, dtype=pl.String)
    )
    type_text = pl.col("type").cast(pl.String) if "type" in df.columns else pl.lit(None, dtype=pl.String)
    api = pl.col("api") if "api" in df.columns else pl.lit(None, dtype=pl.String)
    for name in ("thread", "connection_id"):
        if name not in df.columns:
            df = df.with_columns(pl.lit(None, dtype=pl.String).alias(name))
    df = df.with_columns(
        (pl.coalesce(level, type_text, pl.lit("Unknown")) + "@" + api.fill_null("unknown")).alias("name"),
        (pl.col("end_ns") - pl.col("ts_ns")).alias("dur_ns"),
    )
    if cards.only is not None:
        df = df.with_columns(pl.lit(cards.only, dtype=pl.String).alias("card"))
    else:
        # As the text reader does: a host thread belongs to the card most of its launches go
        # to (its compile and sync calls share no connection with any task); a thread that
        # launched nothing stays "host".
        df = df.join(cards.by_connection(), on="connection_id", how="left", maintain_order="left")
        db.tick()
        owner = df.drop_nulls("card").group_by("thread").agg(pl.col("card").mode().sort().first().alias("owner"))
        df = (
            df.join(owner, on="thread", how="left", maintain_order="left")
            .with_columns(pl.coalesce("card", "owner", pl.lit("host")).alias("card"))
            .drop("owner")
        )
    df = df.with_columns(
        pl.lit("CANN").alias("process"),
        pl.col("thread").alias("pid"),
        pl.col("thread").alias("tid"),
        pl.lit("X").alias("ph"),
        pl.lit(None, dtype=pl.String).alias("cat"),
        pl.lit(None, dtype=pl.String).alias("flow_id"),
        pl.lit(None, dtype=pl.String).alias("task_type"),
        pl.lit(None, dtype=pl.String).alias("stream_id"),
        pl.lit(None, dtype=pl.String).alias("task_id"),
    )
    return df.select([pl.col(c).cast(t) for c, t in EVENT_SCHEMA.items()])


def _steps(db: _Db, cards: _Cards) -> pl.DataFrame | None:
    table = db.table("STEP_TIME")
    if table is None:
        return None
    items, kinds = _select(
        db,
        "STEP_TIME",
        (
            ("iteration_id", ("id",), "int"),
            ("fp_start_ns", ("startNs",), "time"),
            ("iteration_end_ns", ("endNs",), "time"),
        ),
    )
    if not {"iteration_id", "iteration_end_ns"} <= set(kinds):
        db.notes.append("STEP_TIME lacks id or endNs: steps are not read")
        return None
    df = db.frame(f"SELECT {', '.join(items)} FROM {_q(table)}", kinds)
    if "fp_start_ns" not in df.columns:
        df = df.with_columns(pl.lit(None, dtype=pl.Int64).alias("fp_start_ns"))
    ok = df.filter(
        pl.col("iteration_id").is_not_null()
        & pl.col("iteration_end_ns").is_between(0, _TIME_MAX, closed="left")
        & (pl.col("fp_start_ns").is_null() | pl.col("fp_start_ns").is_between(0, _TIME_MAX, closed="left"))
    )
    if ok.height < df.height:
        db.notes.append(f"{df.height - ok.height:,} STEP_TIME row(s) skipped: id or times missing or out of range")
    # Steps are the host's: with several cards they mark every card's boundaries ("host").
    card = cards.only if cards.only is not None else "host"
    ok = ok.with_columns(pl.lit(card).alias("card"), pl.lit(None, dtype=pl.Int64).alias("bp_end_ns"))
    return ok.select([pl.col(c).cast(t) for c, t in STEP_SCHEMA.items()])


def _with_step_ids(tasks: pl.DataFrame, steps: pl.DataFrame, tick: Callable[[], None]) -> pl.DataFrame:
    """Each task's Step Id: the STEP_TIME range its start lies in (kernel_details has it)."""
    ranges = (
        steps.drop_nulls("fp_start_ns")
        .select(
            pl.col("fp_start_ns").alias("_from"),
            pl.col("iteration_end_ns").alias("_to"),
            pl.col("iteration_id").cast(pl.String).alias("_step"),
        )
        .sort("_from")
    )
    if ranges.height == 0:
        return tasks
    order = tasks.with_row_index("_row").sort("start_ns")
    tick()
    hit = order.join_asof(ranges, left_on="start_ns", right_on="_from", strategy="backward")
    hit = hit.with_columns(
        pl.when(pl.col("start_ns") < pl.col("_to")).then(pl.col("_step")).otherwise(pl.col("step_id")).alias("step_id")
    )
    tick()
    return hit.sort("_row").drop("_row", "_from", "_to", "_step")


def read_db(
    path: Path,
    *,
    card: str | None = None,
    hook: RowsHook | None = None,
    batch_rows: int = BATCH_ROWS,
    strict: bool = False,
) -> DbExport:
    """The canonical frames of one db export.

    `card` is the card label the layout knows (torch_npu: the rank of profiler_info_<rank>.json);
    without it the card is TASK.deviceId through RANK_DEVICE_MAP, or the device id itself.
    `hook(rows_read, rows_expected)` is called after each batch of `batch_rows` rows of every
    query and between the steps that follow; whatever it raises ends the read. The expected
    rows are an estimate made before reading (each table's largest rowid, once per query that
    reads it), never below the rows read.
    A db being written or left unfinished reads as its committed state, with a note
    (`db_snapshot.refusal` finds it among the notes); `strict` refuses it instead.
    """
    path = Path(path)
    _check_file(path)
    try:
        with _Db(path, hook, batch_rows, strict) as db:
            return _read(db, path, card)
    except sqlite3.Error as exc:
        raise _sqlite_error(path, exc) from None


def _expect_rows(db: _Db) -> None:
    """The rows the read will take, by the tables its queries scan (see `_read`)."""
    task = db.table("TASK")
    db.expect(db.table("STRING_IDS"))
    db.expect(task, 1 if db.col("TASK", "deviceId") is not None else 0)  # the devices of `_Cards`
    db.expect(db.table("COMPUTE_TASK_INFO"))  # joined with TASK: one row per compute task
    db.expect(db.table("TASK_PMU_INFO"))
    db.expect(db.table("COMMUNICATION_OP"))
    if db.table("COMMUNICATION_OP") is not None and db.col("TASK", "connectionId") and db.col("TASK", "modelId"):
        db.expect(task)  # the Model ID of each collective
    db.expect(db.table("STEP_TIME"))
    db.expect(db.table("CANN_API"))


def _read(db: _Db, path: Path, card: str | None) -> DbExport:
    if db.table("TASK") is None:
        found = ", ".join(sorted(db.tables.values())[:8]) or "no tables"
        raise ProfileError(
            f"{path}: no TASK table ({found}); not an msprof / torch_npu db export, or the "
            "export did not finish: export the profile again"
        )
    missing = [c for c in ("startNs", "endNs") if db.col("TASK", c) is None]
    if missing:
        raise ProfileError(f"{path}: the TASK table has no {' or '.join(missing)} column; export the profile again")
    _expect_rows(db)
    db.load_strings()
    cards = _Cards(db, card)
    if cards.only is None:  # each card's connections, read once for communication and events
        db.expect(db.table("TASK"))
    parts: list[pl.DataFrame] = []
    pmu_names: list[str] = []
    compute = _compute_tasks(db, cards)
    db.tick()
    if compute is not None:
        compute, pmu_names = _pmu(db, compute)
        parts.append(compute)
    db.tick()
    comm = _communication(db, cards)
    if comm is not None and comm.height:
        parts.append(comm)
    keep = [c for c in TASK_ORDER if c not in ("wait_us", "is_aclnn")]
    frames = [
        p.select(
            *[pl.col(c).cast(TASK_SCHEMA[c]) for c in keep if c in p.columns], *[c for c in pmu_names if c in p.columns]
        )
        for p in parts
    ]
    if frames:
        tasks = pl.concat(frames, how="diagonal_relaxed") if len(frames) > 1 else frames[0]
    else:
        tasks = pl.DataFrame(
            schema={c: TASK_SCHEMA[c] for c in ("card", "op_name", "op_type", "task_type", "start_ns", "duration_us")}
        )
    steps = _steps(db, cards)
    if steps is not None and steps.height:
        if "step_id" not in tasks.columns:
            tasks = tasks.with_columns(pl.lit(None, dtype=pl.String).alias("step_id"))
        tasks = _with_step_ids(tasks, steps, db.tick)
    db.tick()
    tasks = canonical_tasks(tasks, card=cards.only or card, pmu=pmu_names, tick=db.tick)
    db.tick()
    events = _events(db, cards)
    all_cards = set(cards.cards) | set(tasks["card"].unique().to_list())
    return DbExport(
        tasks=tasks,
        events=events,
        steps=steps,
        cards=tuple(sorted(all_cards, key=_card_key)),
        pmu_columns=tuple(pmu_names),
        notes=tuple(db.notes),
    )
