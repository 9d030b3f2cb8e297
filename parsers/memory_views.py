"""The memory views: per card peaks, the operators that allocate most, the memory curve.

Three canonical frames (MEMORY_SCHEMA, TOP_OPS_SCHEMA, CURVE_SCHEMA). Memory MB are 2^20
bytes, as torch_npu writes them (`Total Allocated(MB)` is bytes / 1024 / 1024, `Size(KB)`
bytes / 1024; the db keeps bytes).

torch_npu records memory per component: `PTA` (PyTorch's caching allocator), `GE` (the graph
engine), `PTA+GE` (both, when both exist) and `APP` (what the whole process reserved on the
device, no allocated figure). The peaks and the curve are those of the framework: the first
of PTA+GE, PTA, GE (else another component) that the card records; `app_reserved_mb` is the
APP peak, which includes workspaces and communication buffers beyond the allocator.

Sources, most detailed first: `memory_record.csv` (Component, Timestamp(us), Total
Allocated(MB), Total Reserved(MB)) or the db's MEMORY_RECORD (component, timestamp ns,
totalAllocated / totalReserved bytes); then `npu_module_mem.csv` (torch_npu, Total
Reserved(MB)) / `npu_module_mem_<ts>.csv` (msprof, Total Reserved(KB)) or NPU_MODULE_MEM
(bytes, moduleId through ENUM_MODULE), which give APP's reservation only. Top operators come
from `operator_memory.csv` (Name, Size(KB)) or OP_MEMORY (name, size bytes): per operator
name its largest single allocation, how many it made and their total. No file records the
device's capacity: `capacity_mb` stays null.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import polars as pl

from .columns import ColumnSpec
from .csv_table import RowPolicy, read_table, times_to_ns
from .db import _Cards, _check_file, _Db, _q, _select, _sqlite_error
from .sanity import time_problem
from .training_files import check_frame_numbers, conform, damaged, sort_cards

MEMORY_SCHEMA: dict[str, pl.DataType] = {
    "card": pl.String(),
    "peak_allocated_mb": pl.Float64(),  # null when only APP's reservation is recorded
    "peak_reserved_mb": pl.Float64(),
    "capacity_mb": pl.Float64(),  # not in any export
    "app_reserved_mb": pl.Float64(),  # the whole process' reservation (APP), when recorded
    "component": pl.String(),  # whose figures the peaks are: PTA+GE, PTA, GE, APP...
    "source": pl.String(),
}
TOP_OPS_SCHEMA: dict[str, pl.DataType] = {
    "card": pl.String(),
    "op_name": pl.String(),
    "size_mb": pl.Float64(),  # the largest single allocation
    "count": pl.Int64(),
    "total_mb": pl.Float64(),
    "source": pl.String(),
}
CURVE_SCHEMA: dict[str, pl.DataType] = {
    "card": pl.String(),
    "ts_ns": pl.Int64(),
    "allocated_mb": pl.Float64(),
    "reserved_mb": pl.Float64(),
    "source": pl.String(),
}
# What every memory source is read into: one row per record.
RECORD_SCHEMA: dict[str, pl.DataType] = {
    "card": pl.String(),
    "component": pl.String(),
    "ts_ns": pl.Int64(),
    "allocated_mb": pl.Float64(),
    "reserved_mb": pl.Float64(),
    "ts_lost": pl.Boolean(),  # the time was re-saved by a spreadsheet (`1.69512E+15`): digits lost
}
ALLOCATION_SCHEMA: dict[str, pl.DataType] = {"card": pl.String(), "op_name": pl.String(), "size_mb": pl.Float64()}

MEMORY_RECORD_COLUMNS: tuple[ColumnSpec, ...] = (
    ColumnSpec("component", ("Component",), "str", required=True),
    ColumnSpec("ts", ("Timestamp(us)",), "str"),
    ColumnSpec("allocated_mb", ("Total Allocated(MB)",), "float"),
    ColumnSpec("reserved_mb", ("Total Reserved(MB)",), "float", required=True),
    ColumnSpec("device", ("Device Type", "Device_id", "Device"), "str"),
)
MODULE_MEM_COLUMNS: tuple[ColumnSpec, ...] = (
    ColumnSpec("card", ("Device_id",), "str"),
    ColumnSpec("component", ("Component",), "str", required=True),
    ColumnSpec("ts", ("Timestamp(us)",), "str"),
    ColumnSpec("reserved_mb", ("Total Reserved(MB)",), "float"),
    ColumnSpec("reserved_kb", ("Total Reserved(KB)",), "float"),
    ColumnSpec("device", ("Device",), "str"),
)
OPERATOR_MEMORY_COLUMNS: tuple[ColumnSpec, ...] = (
    ColumnSpec("op_name", ("Name",), "str", required=True),
    ColumnSpec("size_kb", ("Size(KB)",), "float", required=True),
    ColumnSpec("device", ("Device Type", "Device_id", "Device"), "str"),
)

APP = "APP"
FRAMEWORK_COMPONENTS = ("PTA+GE", "PTA", "GE")
_MIB = float(1 << 20)


def _cards(df: pl.DataFrame, card: str | None) -> pl.DataFrame:
    """The card of each row: the source's card, else the `NPU:3` / `3` of its device column."""
    if card is not None or "device" not in df.columns:
        return df.with_columns(pl.lit(card or "0", dtype=pl.String).alias("card"))
    device = pl.col("device").str.extract(r"(\d+)\s*$", 1)
    return df.with_columns(device.fill_null("0").alias("card"))


def _timestamps(df: pl.DataFrame) -> pl.DataFrame:
    """Timestamp(us) text to ns, and whether a spreadsheet's `1.69512E+15` lost its digits."""
    if "ts" not in df.columns:
        return df.with_columns(pl.lit(None, dtype=pl.Int64).alias("ts_ns"), pl.lit(False).alias("ts_lost"))
    ts = times_to_ns(df["ts"], 1000)
    return df.with_columns(ts.alias("ts_ns"), df["ts"].str.contains("[eE]").fill_null(False).alias("ts_lost"))


def read_memory_record(paths: tuple[Path, ...], card: str | None, rows: RowPolicy) -> pl.DataFrame:
    """torch_npu memory_record.csv into RECORD rows."""
    df, _ = read_table(paths, MEMORY_RECORD_COLUMNS, what="memory_record", extra_as_float=False, rows=rows)
    df = check_frame_numbers(df, ("allocated_mb", "reserved_mb"), paths[0], "memory_record")
    return conform(_timestamps(_cards(df, card)), RECORD_SCHEMA)


def read_module_mem(paths: tuple[Path, ...], card: str | None, rows: RowPolicy) -> pl.DataFrame:
    """npu_module_mem (torch_npu: MB; msprof: KB) into RECORD rows, reserved only."""
    df, _ = read_table(paths, MODULE_MEM_COLUMNS, what="npu_module_mem", extra_as_float=False, rows=rows)
    df = check_frame_numbers(df, ("reserved_mb", "reserved_kb"), paths[0], "npu_module_mem")
    if "reserved_mb" not in df.columns:
        if "reserved_kb" not in df.columns:
            raise damaged(paths[0], "no Total Reserved(MB) or Total Reserved(KB) column")
        df = df.with_columns((pl.col("reserved_kb") / 1024.0).alias("reserved_mb"))
    if card is None and "card" in df.columns:
        df = df.with_columns(pl.col("card").str.strip_chars())
    else:
        df = _cards(df, card)
    return conform(_timestamps(df), RECORD_SCHEMA)


def read_operator_memory(paths: tuple[Path, ...], card: str | None, rows: RowPolicy) -> pl.DataFrame:
    """torch_npu operator_memory.csv into ALLOCATION rows."""
    df, _ = read_table(paths, OPERATOR_MEMORY_COLUMNS, what="operator_memory", extra_as_float=False, rows=rows)
    df = check_frame_numbers(df, ("size_kb",), paths[0], "operator_memory")
    df = _cards(df, card).with_columns((pl.col("size_kb") / 1024.0).alias("size_mb"))
    return conform(df, ALLOCATION_SCHEMA)


def read_db_memory(
    path: Path, card: str | None
) -> tuple[pl.DataFrame | None, pl.DataFrame | None, pl.DataFrame | None]:
    """A db export's MEMORY_RECORD, NPU_MODULE_MEM (as RECORD rows) and OP_MEMORY (as
    ALLOCATION rows); None for a missing table."""
    _check_file(path)
    try:
        with _Db(path) as db:
            db.load_strings()
            cards = _Cards(db, card)
            record = _query(
                db,
                "MEMORY_RECORD",
                (
                    ("component", ("component",), "ref"),
                    ("ts_ns", ("timestamp", "timestampNs"), "time"),
                    ("allocated", ("totalAllocated",), "float"),
                    ("reserved", ("totalReserved",), "float"),
                    ("device", ("deviceId",), "id"),
                ),
            )
            module = _query(
                db,
                "NPU_MODULE_MEM",
                (
                    ("module", ("moduleId",), "int"),
                    ("ts_ns", ("timestampNs", "timestamp"), "time"),
                    ("reserved", ("totalReserved",), "float"),
                    ("device", ("deviceId",), "id"),
                ),
            )
            modules = _modules(db) if module is not None else {}
            ops = _query(
                db,
                "OP_MEMORY",
                (("op_name", ("name",), "ref"), ("size", ("size",), "float"), ("device", ("deviceId",), "id")),
            )
            label = cards.label("device")
            only = pl.lit(cards.only, dtype=pl.String).alias("card")
    except sqlite3.Error as exc:
        raise _sqlite_error(path, exc) from None
    records = modules_out = allocations = None
    if record is not None:
        if "reserved" not in record.columns or "component" not in record.columns:
            raise damaged(path, "MEMORY_RECORD has no component or totalReserved column")
        record = check_frame_numbers(record, ("allocated", "reserved"), path, "MEMORY_RECORD")
        records = conform(
            record.with_columns(
                label if "device" in record.columns else only,
                (pl.col("allocated") / _MIB).alias("allocated_mb") if "allocated" in record.columns else pl.lit(None),
                (pl.col("reserved") / _MIB).alias("reserved_mb"),
            ).drop_nulls("card"),
            RECORD_SCHEMA,
        )
    if module is not None and "reserved" in module.columns and "module" in module.columns:
        module = check_frame_numbers(module, ("reserved",), path, "NPU_MODULE_MEM")
        modules_out = conform(
            module.with_columns(
                label if "device" in module.columns else only,
                pl.col("module").replace_strict(modules, default=None, return_dtype=pl.String).alias("component"),
                (pl.col("reserved") / _MIB).alias("reserved_mb"),
            ).drop_nulls("card"),
            RECORD_SCHEMA,
        )
    if ops is not None:
        if "size" not in ops.columns or "op_name" not in ops.columns:
            raise damaged(path, "OP_MEMORY has no name or size column")
        ops = check_frame_numbers(ops, ("size",), path, "OP_MEMORY")
        allocations = conform(
            ops.with_columns(label if "device" in ops.columns else only, (pl.col("size") / _MIB).alias("size_mb"))
            .drop_nulls("card")
            .drop_nulls("size_mb"),
            ALLOCATION_SCHEMA,
        )
    return records, modules_out, allocations


def _query(db: _Db, table: str, wanted: tuple[tuple[str, tuple[str, ...], str], ...]) -> pl.DataFrame | None:
    real = db.table(table)
    if real is None:
        return None
    items, kinds = _select(db, table, wanted)
    if not items:
        return None
    return db.frame(f"SELECT {', '.join(items)} FROM {_q(real)}", kinds)


def _modules(db: _Db) -> dict[int, str]:
    real, e_id, e_name = db.table("ENUM_MODULE"), db.col("ENUM_MODULE", "id"), db.col("ENUM_MODULE", "name")
    if real is None or e_id is None or e_name is None:
        return {}
    got = db.frame(f"SELECT {_q(e_id)} AS id, {_q(e_name)} AS name FROM {_q(real)}", {"id": "int", "name": "text"})
    return {i: n for i, n in got.iter_rows() if i is not None and n}


# --------------------------------------------------------------------------- views


def framework_component(components: list[str]) -> str | None:
    """Whose figures a card's peaks are: PTA+GE, PTA, GE, else the first other non-APP one."""
    for name in FRAMEWORK_COMPONENTS:
        if name in components:
            return name
    others = sorted(c for c in components if c and c != APP)
    return others[0] if others else None


def chosen_records(records: pl.DataFrame) -> pl.DataFrame:
    """Per card, the rows of its framework component (APP's when it records nothing else); a
    component whose name is lost (an unknown string id) is `unknown`."""
    records = records.with_columns(pl.col("component").fill_null("unknown"))
    parts = []
    for card in records["card"].unique().to_list():
        mine = records.filter(pl.col("card") == card)
        with_alloc = mine.filter(pl.col("allocated_mb").is_not_null())["component"].unique().to_list()
        name = framework_component([c for c in with_alloc if c is not None])
        if name is None:
            name = (
                APP
                if APP in mine["component"].to_list()
                else framework_component(mine["component"].drop_nulls().to_list())
            )
        if name is not None:
            parts.append(mine.filter(pl.col("component") == name))
    return pl.concat(parts) if parts else records.head(0)


def memory_view(records: pl.DataFrame, app: pl.DataFrame | None, source: str) -> pl.DataFrame:
    """Per card: peak allocated and reserved of the framework component, APP's reservation."""
    chosen = chosen_records(records)
    peaks = chosen.group_by("card").agg(
        pl.col("allocated_mb").max().alias("peak_allocated_mb"),
        pl.col("reserved_mb").max().alias("peak_reserved_mb"),
        pl.col("component").first(),
    )
    app_rows = records.filter(pl.col("component") == APP)
    if app_rows.height == 0 and app is not None:
        app_rows = app.filter(pl.col("component") == APP)
    app_peak = app_rows.group_by("card").agg(pl.col("reserved_mb").max().alias("app_reserved_mb"))
    out = peaks.join(app_peak, on="card", how="left").with_columns(pl.lit(source).alias("source"))
    return sort_cards(conform(out, MEMORY_SCHEMA))


def curve_view(records: pl.DataFrame, source: str, notes: list[str]) -> pl.DataFrame:
    """The framework component's records over time; a card whose times are damaged (a
    spreadsheet re-save) has no curve, with a note."""
    chosen = chosen_records(records)
    keep = []
    for card in sorted(chosen["card"].unique().to_list()):
        mine = chosen.filter(pl.col("card") == card)
        probe = mine.select("card", pl.col("ts_ns").alias("start_ns"), pl.lit(0.0).alias("duration_us"))
        if mine["ts_ns"].null_count() == mine.height:
            continue  # no times recorded at all
        lost = bool(mine["ts_lost"].fill_null(False).any())
        if lost or mine["ts_ns"].null_count() or time_problem(probe) is not None:
            notes.append(
                f"{source}: no memory curve for card {card}: its timestamps have lost their digits or jump "
                "(re-saved by a spreadsheet, or edited); the peaks stand"
            )
            continue
        keep.append(mine)
    if not keep:
        return pl.DataFrame(schema=CURVE_SCHEMA)
    out = pl.concat(keep).sort("card", "ts_ns", maintain_order=True).with_columns(pl.lit(source).alias("source"))
    return sort_cards(conform(out, CURVE_SCHEMA), "ts_ns")


def top_ops_view(allocations: pl.DataFrame, source: str) -> pl.DataFrame:
    """Per card and operator: largest single allocation, allocations, their total (MB)."""
    per = allocations.group_by("card", "op_name").agg(
        pl.col("size_mb").max(), pl.len().cast(pl.Int64).alias("count"), pl.col("size_mb").sum().alias("total_mb")
    )
    out = per.with_columns(pl.lit(source).alias("source"))
    return sort_cards(conform(out, TOP_OPS_SCHEMA), "size_mb", descending=True)
