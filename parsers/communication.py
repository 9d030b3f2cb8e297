"""The communication views: collectives per op, bandwidth per transport, the rank-to-rank links.

Three canonical frames (COMMUNICATION_SCHEMA, BANDWIDTH_SCHEMA, LINKS_SCHEMA), times in
microseconds, sizes in MB (10^6 bytes, as msprof-analyze counts them), bandwidth in GB/s
(MB per ms). Every source is first read into long frames of one row per op occurrence
(OP_TIMES_SCHEMA), per op occurrence and transport (OP_BANDWIDTH_SCHEMA) and per matrix
entry (MATRIX_SCHEMA); one set of aggregations turns them into the views, so a text export
and a db export of the same run give the same numbers.

Sources, most detailed first:
  torch_npu `communication.json` / `analysis.db` CommAnalyzerTime + CommAnalyzerBandwidth
      per step and op: Elapse, Transit, Wait, Synchronization Time(ms); per transport
      Transit Size(MB), Transit Time(ms) (the bandwidth table repeats a transport's figures
      on one row per packet size: read once)
  torch_npu `communication_matrix.json` / `analysis.db` CommAnalyzerMatrix
      per group, `src-dst` links: Transport Type, Transit Size(MB), Transit Time(ms); newer
      files group ops as `<type>-top1|middle|bottomN|total@<group>`: only the `-total`
      entries are summed (the others are samples of the same ops)
  db COMMUNICATION_OP + COMMUNICATION_TASK_INFO (+ TASK for durations)
      elapse from startNs / endNs; per task srcRank, dstRank, transportType
      (ENUM_HCCL_TRANSPORT_TYPE), linkType (ENUM_HCCL_LINK_TYPE), size in bytes: the data
      moved is what tasks with a size carry to another rank (as CommAnalyzerBandwidth counts
      it, checked on the real 2025 capture); wait and synchronisation are not stored
  msprof `communication_statistic_<ts>.csv`
      per OP Type: Count, Total Time(us)
  the tasks
      the collectives' durations per op

SDMA is the sum of the on-node links (HCCS, PCIE, SIO): the bandwidth view lists both, as
the files do; an op's data size is SDMA + RDMA, never the sum of every row, and the view
keeps each part (sdma_mb, rdma_mb) for the per-transport small-packet thresholds.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import polars as pl

from .columns import COMMUNICATION_TASK_TYPES, UNKNOWN, ColumnSpec
from .csv_table import RowPolicy, read_table
from .db import _Cards, _check_file, _Db, _keep_valid, _q, _select, _sqlite_error
from .frames import ns_to_us
from .steps import STEP_TRACE_TIME_TABLE
from .training_files import (
    by_cards,
    card_order,
    check_frame_numbers,
    collect,
    conform,
    conformed,
    damaged,
    normalise_op_types,
    number,
    op_type_mapping,
    sort_cards,
)

COMMUNICATION_SCHEMA: dict[str, pl.DataType] = {
    "card": pl.String(),
    "op_type": pl.String(),
    "op_name": pl.String(),  # null when the source counts per type only
    "count": pl.Int64(),
    "total_us": pl.Float64(),  # elapse
    "transit_us": pl.Float64(),
    "wait_us": pl.Float64(),
    "sync_us": pl.Float64(),
    "size_mb": pl.Float64(),
    "bandwidth_gbps": pl.Float64(),
    # The part of size_mb each transport moved: SDMA (on the node: HCCS, PCIE, SIO) and RDMA
    # (between nodes); msprof-analyze's packet analysis judges each by its own size.
    "sdma_mb": pl.Float64(),
    "rdma_mb": pl.Float64(),
    "source": pl.String(),
}
BANDWIDTH_SCHEMA: dict[str, pl.DataType] = {
    "card": pl.String(),
    "transport": pl.String(),
    "size_mb": pl.Float64(),
    "time_us": pl.Float64(),
    "bandwidth_gbps": pl.Float64(),
    "source": pl.String(),
}
LINKS_SCHEMA: dict[str, pl.DataType] = {
    "card": pl.String(),  # the rank whose files recorded the link
    "group": pl.String(),
    "src": pl.Int64(),  # ranks within the group, as the files number them
    "dst": pl.Int64(),
    "transport": pl.String(),
    "size_mb": pl.Float64(),
    "time_us": pl.Float64(),
    "bandwidth_gbps": pl.Float64(),
    "source": pl.String(),
}

OP_TIMES_SCHEMA: dict[str, pl.DataType] = {
    "card": pl.String(),
    "op_name": pl.String(),
    "group": pl.String(),
    "elapse_us": pl.Float64(),
    "transit_us": pl.Float64(),
    "wait_us": pl.Float64(),
    "sync_us": pl.Float64(),
}
OP_BANDWIDTH_SCHEMA: dict[str, pl.DataType] = {
    "card": pl.String(),
    "op_name": pl.String(),
    "group": pl.String(),
    "transport": pl.String(),
    "size_mb": pl.Float64(),
    "time_us": pl.Float64(),
}
MATRIX_SCHEMA: dict[str, pl.DataType] = {
    "card": pl.String(),
    "group": pl.String(),
    "entry": pl.String(),  # the op, or `allreduce-total`
    "src": pl.Int64(),
    "dst": pl.Int64(),
    "transport": pl.String(),
    "size_mb": pl.Float64(),
    "time_us": pl.Float64(),
}

# msprof mindstudio_profiler_output/communication_statistic_<ts>.csv
COMMUNICATION_STATISTIC_COLUMNS: tuple[ColumnSpec, ...] = (
    ColumnSpec("card", ("Device_id",), "str"),
    ColumnSpec("op_type", ("OP Type",), "str", required=True),
    ColumnSpec("count", ("Count",), "int", required=True),
    ColumnSpec("total_us", ("Total Time(us)",), "float", required=True),
)

TOTAL_OP_INFO = "Total Op Info"
TIME_INFO = "Communication Time Info"
BANDWIDTH_INFO = "Communication Bandwidth Info"
# communication.json "Communication Time Info" key -> OP_TIMES column (all in ms).
TIME_KEYS: dict[str, str] = {
    "Elapse Time(ms)": "elapse_us",
    "Transit Time(ms)": "transit_us",
    "Wait Time(ms)": "wait_us",
    "Synchronization Time(ms)": "sync_us",
}
# Links of one node, summed by SDMA; LOCAL is a copy on the card itself, no link.
SDMA_LINKS = ("HCCS", "PCIE", "SIO", "HCCS_SW", "ON_CHIP")
LOCAL = "LOCAL"
# srcRank / dstRank of a task with no peer (a reduce into the local buffer).
_NO_RANK = 4294967295
_MB = 1_000_000.0

# analysis.db tables: column -> (canonical, kind).
COMM_TIME_TABLE = {
    "hccl_op_name": ("op_name", "text"),
    "group_name": ("group", "text"),
    "elapse_time": ("elapse_us", "float"),
    "transit_time": ("transit_us", "float"),
    "wait_time": ("wait_us", "float"),
    "synchronization_time": ("sync_us", "float"),
    "step": ("step", "text"),
    "type": ("kind", "text"),
}
COMM_BANDWIDTH_TABLE = {
    "hccl_op_name": ("op_name", "text"),
    "group_name": ("group", "text"),
    "transport_type": ("transport", "text"),
    "transit_size": ("size_mb", "float"),
    "transit_time": ("time_us", "float"),
    "bandwidth": ("bandwidth", "float"),
    "step": ("step", "text"),
    "type": ("kind", "text"),
}
COMM_MATRIX_TABLE = {
    "hccl_op_name": ("entry", "text"),
    "group_name": ("group", "text"),
    "src_rank": ("src", "text"),
    "dst_rank": ("dst", "text"),
    "transport_type": ("transport", "text"),
    "transit_size": ("size_mb", "float"),
    "transit_time": ("time_us", "float"),
    "bandwidth": ("bandwidth", "float"),
    "step": ("step", "text"),
    "type": ("kind", "text"),
}


# --------------------------------------------------------------------------- aggregation


def _sum_or_null(name: str) -> pl.Expr:
    return pl.when(pl.col(name).is_not_null().any()).then(pl.col(name).sum()).alias(name)


def _gbps(size: str, time: str) -> pl.Expr:
    """MB over us as GB/s (MB per ms); null without time."""
    return pl.when(pl.col(time) > 0).then(pl.col(size) / (pl.col(time) / 1000.0)).alias("bandwidth_gbps")


def _data_rows(bw: pl.LazyFrame) -> pl.LazyFrame:
    """Per op, the transports that count for its data size: SDMA (or its links when there is
    no SDMA row) and RDMA; never LOCAL."""
    has_sdma = (pl.col("transport") == "SDMA").any().over("card", "op_name")
    return bw.filter((pl.col("transport") != LOCAL) & ~(has_sdma & pl.col("transport").is_in(SDMA_LINKS)))


def _view(
    frame: pl.LazyFrame,
    cards: pl.Series,
    schema: dict[str, pl.DataType],
    *by: str,
    descending: bool = False,
    missing: tuple[str, ...] = (),
) -> pl.DataFrame:
    """`frame` conformed to `schema` and sorted as sort_cards sorts it, in one query (`cards`:
    the card column it was made from; `missing`: the schema's columns it does not have)."""
    out = frame.select(conformed([c for c in schema if c not in missing], schema))
    return collect(by_cards(out, card_order(cards), *by, descending=descending))


def communication_view(times: pl.DataFrame, bw: pl.DataFrame | None, source: str) -> pl.DataFrame:
    """Per card and op: count, elapse, transit, wait, sync, data size and its bandwidth."""
    per_op = (
        times.lazy()
        .group_by("card", "op_name")
        .agg(
            pl.len().cast(pl.Int64).alias("count"),
            pl.col("elapse_us").sum().alias("total_us"),
            *(_sum_or_null(c) for c in ("transit_us", "wait_us", "sync_us")),
        )
    )
    if bw is not None and bw.height:
        rdma = pl.col("transport") == "RDMA"
        sdma = pl.col("transport").is_in(("SDMA", *SDMA_LINKS))
        data = (
            _data_rows(bw.lazy())
            .group_by("card", "op_name")
            .agg(
                pl.col("size_mb").sum(),
                pl.col("time_us").sum().alias("_data_us"),
                pl.col("size_mb").filter(sdma).sum().alias("sdma_mb"),
                pl.col("size_mb").filter(rdma).sum().alias("rdma_mb"),
            )
        )
        per_op = per_op.join(data, on=["card", "op_name"], how="left").with_columns(_gbps("size_mb", "_data_us"))
    mapping = op_type_mapping(times["op_name"])
    out = per_op.with_columns(
        pl.col("op_name")
        .replace_strict(mapping, default=None, return_dtype=pl.String)
        .fill_null(UNKNOWN)
        .alias("op_type"),
        pl.lit(source).alias("source"),
    )
    missing = () if bw is not None and bw.height else ("size_mb", "bandwidth_gbps", "sdma_mb", "rdma_mb")
    return _view(out, times["card"], COMMUNICATION_SCHEMA, "total_us", descending=True, missing=missing)


def bandwidth_view(bw: pl.DataFrame, source: str) -> pl.DataFrame:
    """Per card and transport: data moved, transfer time, bandwidth (LOCAL left out)."""
    per = (
        bw.lazy()
        .filter(pl.col("transport") != LOCAL)
        .group_by("card", "transport")
        .agg(pl.col("size_mb").sum(), pl.col("time_us").sum())
        .filter((pl.col("size_mb") > 0) | (pl.col("time_us") > 0))
    )
    out = per.with_columns(_gbps("size_mb", "time_us"), pl.lit(source).alias("source"))
    return _view(out, bw["card"], BANDWIDTH_SCHEMA, "transport")


def links_view(matrix: pl.DataFrame, source: str) -> pl.DataFrame:
    """Per card, group and src -> dst link: data, time, bandwidth, summed over the ops.

    Where a group lists `<type>-total` entries only those are summed: the `-top1`,
    `-middle`, `-bottomN` entries beside them repeat some of the same ops.
    """
    totals = pl.col("entry").str.ends_with("-total").fill_null(False)
    has_total = totals.any().over("card", "group")
    kept = matrix.lazy().filter(~has_total | totals)
    per = kept.group_by("card", "group", "src", "dst", "transport").agg(
        pl.col("size_mb").sum(), pl.col("time_us").sum()
    )
    out = per.with_columns(_gbps("size_mb", "time_us"), pl.lit(source).alias("source"))
    return _view(out, matrix["card"], LINKS_SCHEMA, "group", "src", "dst", "transport")


# --------------------------------------------------------------------------- communication.json


def _split_key(key: str) -> tuple[str | None, str | None]:
    """`hcom_allReduce__538_0_1@14972622761537322538` -> (op, group)."""
    name, _, group = key.partition("@")
    return (name.strip() or None), (group.strip() or None)


def _objects(path: Path, data: object, what: str) -> list[tuple[str, dict[str, object]]]:
    """(step, kind-of-op object) pairs: `{step: {"p2p": {...}, "collective": {...}}}`."""
    if not isinstance(data, dict):
        raise damaged(path, f"the top level is not an object of steps (expected {what})")
    out = []
    for step_key, step in data.items():
        if not isinstance(step, dict):
            raise damaged(path, f"step {step_key!r} is not an object")
        for kind in ("p2p", "collective"):
            ops = step.get(kind)
            if ops is None:
                continue
            if not isinstance(ops, dict):
                raise damaged(path, f"{step_key}/{kind} is not an object")
            out.append((f"{step_key}/{kind}", ops))
    return out


def parse_communication_json(data: object, path: Path, card: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """communication.json into (OP_TIMES, OP_BANDWIDTH) rows; `Total Op Info` is left out."""
    times: list[tuple[object, ...]] = []
    bws: list[tuple[object, ...]] = []
    for where, ops in _objects(path, data, "communication.json"):
        for key, op in ops.items():
            if key == TOTAL_OP_INFO:
                continue
            at = f"{where}/{key}"
            if not isinstance(op, dict):
                raise damaged(path, f"{at} is not an object")
            name, group = _split_key(key)
            info = op.get(TIME_INFO)
            if not isinstance(info, dict):
                raise damaged(path, f"{at} has no {TIME_INFO} object")
            values = [number(info.get(k), path, f"{at} {k}", required=(c == "elapse_us")) for k, c in TIME_KEYS.items()]
            times.append((card, name, group, *(None if v is None else v * 1000.0 for v in values)))
            transports = op.get(BANDWIDTH_INFO)
            if transports is None:
                continue
            if not isinstance(transports, dict):
                raise damaged(path, f"{at} {BANDWIDTH_INFO} is not an object")
            for transport, t in transports.items():
                if not isinstance(t, dict):
                    raise damaged(path, f"{at} {BANDWIDTH_INFO}/{transport} is not an object")
                size = number(t.get("Transit Size(MB)"), path, f"{at} {transport} Transit Size(MB)")
                ms = number(t.get("Transit Time(ms)"), path, f"{at} {transport} Transit Time(ms)")
                assert size is not None and ms is not None
                bws.append((card, name, group, transport, size, ms * 1000.0))
    return (
        pl.DataFrame(times, schema=OP_TIMES_SCHEMA, orient="row"),
        pl.DataFrame(bws, schema=OP_BANDWIDTH_SCHEMA, orient="row"),
    )


def _rank(text: str, path: Path, at: str) -> int:
    s = text.strip()
    if not (s.isascii() and s.isdigit() and len(s) <= 12):
        raise damaged(path, f"{at}: rank {text!r} is not a rank number")
    return int(s)


def parse_matrix_json(data: object, path: Path, card: str) -> pl.DataFrame:
    """communication_matrix.json into MATRIX rows (`Total Op Info` left out)."""
    rows: list[tuple[object, ...]] = []
    for where, entries in _objects(path, data, "communication_matrix.json"):
        for key, links in entries.items():
            if key == TOTAL_OP_INFO:
                continue
            at = f"{where}/{key}"
            if not isinstance(links, dict):
                raise damaged(path, f"{at} is not an object of src-dst links")
            entry, group = _split_key(key)
            for link, v in links.items():
                src_text, sep, dst_text = link.partition("-")
                if not sep:
                    raise damaged(path, f"{at}: link {link!r} is not src-dst")
                src, dst = _rank(src_text, path, at), _rank(dst_text, path, at)
                if not isinstance(v, dict):
                    raise damaged(path, f"{at}/{link} is not an object")
                transport = v.get("Transport Type")
                if not isinstance(transport, str) or not transport.strip():
                    raise damaged(path, f"{at}/{link} has no Transport Type")
                size = number(v.get("Transit Size(MB)"), path, f"{at}/{link} Transit Size(MB)")
                ms = number(v.get("Transit Time(ms)"), path, f"{at}/{link} Transit Time(ms)")
                assert size is not None and ms is not None
                rows.append((card, group, entry, src, dst, transport.strip(), size, ms * 1000.0))
    return pl.DataFrame(rows, schema=MATRIX_SCHEMA, orient="row")


# --------------------------------------------------------------------------- analysis.db


def _table(db: _Db, table: str, columns: dict[str, tuple[str, str]]) -> pl.DataFrame | None:
    """The rows of an analysis.db table, columns renamed and typed, or None without it."""
    real = db.table(table)
    if real is None:
        return None
    items, kinds = _select(db, table, ((out, (col,), kind) for col, (out, kind) in columns.items()))
    if not items:
        return None
    return db.frame(f"SELECT {', '.join(items)} FROM {_q(real)}", kinds)


def _require(frame: pl.DataFrame, columns: tuple[str, ...], path: Path, table: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise damaged(path, f"{table} has no {', '.join(missing)} column")
    for c in columns:
        if frame[c].null_count():
            raise damaged(path, f"{table} has an empty {c} on some row")


def _size_divisor(frame: pl.DataFrame, path: Path, table: str, notes: list[str]) -> float:
    """analysis.db sizes are MB in current exports; older msprof docs say bytes. The table's
    own bandwidth column (GB/s) tells which: size / time(ms) / bandwidth is 1 for MB, 10^6 for
    bytes. (`time_us` still holds the table's milliseconds here.)"""
    if "bandwidth" not in frame.columns:
        return 1.0
    ratio = (
        frame.filter((pl.col("time_us") > 0) & (pl.col("bandwidth") > 0))
        .select((pl.col("size_mb") / pl.col("time_us") / pl.col("bandwidth")).median())
        .item()
    )
    if ratio is not None and 1e5 <= ratio <= 1e7:
        notes.append(f"{path}: {table} sizes are in bytes (its bandwidth says so): read as MB")
        return _MB
    return 1.0


def read_analysis_db(
    path: Path, card: str, notes: list[str]
) -> tuple[pl.DataFrame | None, pl.DataFrame | None, pl.DataFrame | None, pl.DataFrame | None]:
    """analysis.db: (StepTraceTime rows, OP_TIMES, OP_BANDWIDTH, MATRIX); None for a missing table.

    Times of the CommAnalyzer tables are in ms, sizes in MB (see `_size_divisor`).
    """
    _check_file(path)
    try:
        with _Db(path) as db:
            steps = _table(db, "StepTraceTime", STEP_TRACE_TIME_TABLE)
            time = _table(db, "CommAnalyzerTime", COMM_TIME_TABLE)
            bandwidth = _table(db, "CommAnalyzerBandwidth", COMM_BANDWIDTH_TABLE)
            matrix = _table(db, "CommAnalyzerMatrix", COMM_MATRIX_TABLE)
    except sqlite3.Error as exc:
        raise _sqlite_error(path, exc) from None
    times = bws = links = None
    ms = ("elapse_us", "transit_us", "wait_us", "sync_us")
    if time is not None and time.height:
        _require(time, ("op_name", "elapse_us"), path, "CommAnalyzerTime")
        time = check_frame_numbers(time, ms, path, "CommAnalyzerTime")
        times = conform(
            time.with_columns(pl.lit(card).alias("card"), *(pl.col(c) * 1000.0 for c in ms if c in time.columns)),
            OP_TIMES_SCHEMA,
        )
    if bandwidth is not None and bandwidth.height:
        _require(bandwidth, ("op_name", "transport", "size_mb", "time_us"), path, "CommAnalyzerBandwidth")
        bandwidth = check_frame_numbers(bandwidth, ("size_mb", "time_us", "bandwidth"), path, "CommAnalyzerBandwidth")
        div = _size_divisor(bandwidth, path, "CommAnalyzerBandwidth", notes)
        # One row per packet size repeats the transport's figures: keep one per op occurrence.
        keys = [c for c in ("step", "kind", "group", "op_name", "transport") if c in bandwidth.columns]
        once = bandwidth.unique(subset=keys, keep="first", maintain_order=True)
        bws = conform(
            once.with_columns(pl.lit(card).alias("card"), pl.col("size_mb") / div, pl.col("time_us") * 1000.0),
            OP_BANDWIDTH_SCHEMA,
        )
    if matrix is not None and matrix.height:
        _require(matrix, ("src", "dst", "transport", "size_mb", "time_us"), path, "CommAnalyzerMatrix")
        matrix = check_frame_numbers(matrix, ("size_mb", "time_us", "bandwidth"), path, "CommAnalyzerMatrix")
        div = _size_divisor(matrix, path, "CommAnalyzerMatrix", notes)
        src = matrix["src"].str.strip_chars().cast(pl.Int64, strict=False)
        dst = matrix["dst"].str.strip_chars().cast(pl.Int64, strict=False)
        if src.null_count() or dst.null_count() or bool(((src < 0) | (dst < 0)).any()):
            raise damaged(path, "CommAnalyzerMatrix has a src_rank or dst_rank that is not a rank number")
        links = conform(
            matrix.with_columns(
                pl.lit(card).alias("card"),
                src.alias("src"),
                dst.alias("dst"),
                pl.col("size_mb") / div,
                pl.col("time_us") * 1000.0,
            ),
            MATRIX_SCHEMA,
        )
    return steps, times, bws, links


# --------------------------------------------------------------------------- db export


_DEFAULT_TRANSPORTS = {0: "SDMA", 1: "RDMA", 2: LOCAL}
_DEFAULT_LINKS = {0: "ON_CHIP", 1: "HCCS", 2: "PCIE", 3: "ROCE", 4: "SIO", 5: "HCCS_SW", 6: "STANDARD_ROCE"}


def _enum(db: _Db, table: str, default: dict[int, str]) -> dict[int, str]:
    names = dict(default)
    e_id, e_name = db.col(table, "id"), db.col(table, "name")
    real = db.table(table)
    if real is not None and e_id and e_name:
        got = db.frame(f"SELECT {_q(e_id)} AS id, {_q(e_name)} AS name FROM {_q(real)}", {"id": "int", "name": "text"})
        names.update((i, n) for i, n in got.iter_rows() if i is not None and n)
    return names


def _op_rows(db: _Db, cards: _Cards) -> pl.DataFrame | None:
    """COMMUNICATION_OP: card, op_name, group, elapse (us), one row per op."""
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
            ("group", ("groupName",), "ref"),
            ("device", ("deviceId",), "id"),
            ("connection_id", ("connectionId",), "id"),
        ),
    )
    if not {"op_name", "start_ns", "end_ns"} <= set(kinds):
        return None
    notes: list[str] = []  # the reader of the tasks says the same about damaged rows
    df = _keep_valid(db.frame(f"SELECT {', '.join(items)} FROM {_q(table)}", kinds), "COMMUNICATION_OP", notes)
    if df.height == 0:
        return None
    df = df.with_columns(
        cards.label("device") if "device" in df.columns else pl.lit(cards.only, dtype=pl.String).alias("card")
    )
    if df["card"].null_count() and "connection_id" in df.columns:
        df = (
            df.join(
                cards.by_connection().rename({"card": "linked"}), on="connection_id", how="left", maintain_order="left"
            )
            .with_columns(pl.coalesce("card", "linked").alias("card"))
            .drop("linked")
        )
    df = df.drop_nulls("card")
    if "group" not in df.columns:
        df = df.with_columns(pl.lit(None, dtype=pl.String).alias("group"))
    return conform(df.with_columns(ns_to_us(pl.col("end_ns") - pl.col("start_ns")).alias("elapse_us")), OP_TIMES_SCHEMA)


def _task_rows(db: _Db, cards: _Cards) -> pl.DataFrame | None:
    """COMMUNICATION_TASK_INFO joined to TASK: what each step of a collective moved."""
    cti, task = db.table("COMMUNICATION_TASK_INFO"), db.table("TASK")
    c_key, t_key = db.col("COMMUNICATION_TASK_INFO", "globalTaskId"), db.col("TASK", "globalTaskId")
    if cti is None or task is None or c_key is None or t_key is None:
        return None
    c_items, c_kinds = _select(
        db,
        "COMMUNICATION_TASK_INFO",
        (
            ("op_name", ("name",), "ref"),
            ("group", ("groupName",), "ref"),
            ("src", ("srcRank",), "int"),
            ("dst", ("dstRank",), "int"),
            ("transport_id", ("transportType",), "int"),
            ("link_id", ("linkType",), "int"),
            ("size", ("size",), "int"),
        ),
        "c",
    )
    t_items, t_kinds = _select(
        db,
        "TASK",
        (("start_ns", ("startNs",), "time"), ("end_ns", ("endNs",), "time"), ("device", ("deviceId",), "id")),
        "t",
    )
    if not {"op_name", "src", "size", "transport_id"} <= set(c_kinds) or not {"start_ns", "end_ns"} <= set(t_kinds):
        return None
    sql = f"SELECT {', '.join(c_items + t_items)} FROM {_q(cti)} c JOIN {_q(task)} t ON t.{_q(t_key)} = c.{_q(c_key)}"
    notes: list[str] = []
    df = _keep_valid(db.frame(sql, {**c_kinds, **t_kinds}), "COMMUNICATION_TASK_INFO", notes)
    df = df.filter(pl.col("size") > 0)
    if df.height == 0:
        return None
    transports = _enum(db, "ENUM_HCCL_TRANSPORT_TYPE", _DEFAULT_TRANSPORTS)
    links = _enum(db, "ENUM_HCCL_LINK_TYPE", _DEFAULT_LINKS)
    card = cards.label("device") if "device" in df.columns else pl.lit(cards.only, dtype=pl.String).alias("card")
    link = (
        pl.col("link_id").replace_strict(links, default=None, return_dtype=pl.String)
        if "link_id" in df.columns
        else pl.lit(None, dtype=pl.String)
    )
    if "dst" not in df.columns:
        df = df.with_columns(pl.lit(None, dtype=pl.Int64).alias("dst"))
    if "group" not in df.columns:
        df = df.with_columns(pl.lit(None, dtype=pl.String).alias("group"))
    return df.with_columns(
        card,
        pl.col("transport_id").replace_strict(transports, default=None, return_dtype=pl.String).alias("transport"),
        link.alias("link"),
        (pl.col("size") / _MB).alias("size_mb"),
        ((pl.col("end_ns") - pl.col("start_ns")) / 1000.0).alias("time_us"),
        pl.col("src").is_between(0, _NO_RANK - 1).alias("src_ok"),
        pl.col("dst").is_between(0, _NO_RANK - 1).fill_null(False).alias("dst_ok"),
    ).drop_nulls("card")


def read_db_communication(
    path: Path, card: str | None
) -> tuple[pl.DataFrame | None, pl.DataFrame | None, pl.DataFrame | None]:
    """A db export's collectives: (OP_TIMES, OP_BANDWIDTH, MATRIX), None where a table is missing."""
    _check_file(path)
    try:
        with _Db(path) as db:
            db.load_strings()
            cards = _Cards(db, card)
            ops = _op_rows(db, cards)
            tasks = _task_rows(db, cards)
    except sqlite3.Error as exc:
        raise _sqlite_error(path, exc) from None
    bws = matrix = None
    if tasks is not None and tasks.height:
        moved = tasks.filter(
            pl.col("src_ok")
            & pl.col("dst_ok")
            & (pl.col("src") != pl.col("dst"))
            & pl.col("transport").is_in(["SDMA", "RDMA"])
        )
        by_link = moved.filter((pl.col("transport") == "SDMA") & pl.col("link").is_in(SDMA_LINKS)).with_columns(
            pl.col("link").alias("transport")
        )
        bws = conform(pl.concat([moved, by_link], how="diagonal_relaxed"), OP_BANDWIDTH_SCHEMA)
        local = ~pl.col("dst_ok") | (pl.col("src") == pl.col("dst")) | (pl.col("transport") == LOCAL)
        label = (
            pl.when(local)
            .then(pl.lit(LOCAL))
            .when((pl.col("transport") == "SDMA") & pl.col("link").is_in(SDMA_LINKS))
            .then(pl.col("link"))
            .otherwise(pl.col("transport"))
        )
        matrix = conform(
            tasks.filter(pl.col("src_ok"))
            .with_columns(
                label.alias("transport"),
                pl.when(pl.col("dst_ok")).then(pl.col("dst")).otherwise(pl.col("src")).alias("dst"),
                pl.col("op_name").alias("entry"),
            )
            .drop_nulls("transport"),
            MATRIX_SCHEMA,
        )
    return ops, bws, matrix


# --------------------------------------------------------------------------- statistic, tasks


def read_communication_statistic(paths: tuple[Path, ...], card: str | None, rows: RowPolicy) -> pl.DataFrame:
    """msprof communication_statistic_<ts>.csv: per card and OP Type, count and total time."""
    df, _ = read_table(
        paths, COMMUNICATION_STATISTIC_COLUMNS, what="communication_statistic", extra_as_float=False, rows=rows
    )
    df = check_frame_numbers(df, ("total_us",), paths[0], "communication_statistic")
    if bool((df["count"] < 0).any()):
        raise damaged(paths[0], "a Count is negative")
    if card is not None or "card" not in df.columns:
        df = df.with_columns(pl.lit(card or "0", dtype=pl.String).alias("card"))
    df = df.with_columns(
        normalise_op_types(df["op_type"]).fill_null(UNKNOWN).alias("op_type"), pl.lit(paths[0].name).alias("source")
    )
    return sort_cards(conform(df, COMMUNICATION_SCHEMA), "total_us", descending=True)


def communication_from_tasks(tasks: pl.DataFrame, cards: list[str]) -> pl.DataFrame:
    """Per card and collective op, from the task rows: count and total duration only."""
    comm = tasks.filter(
        pl.col("card").is_in(cards)
        & (
            pl.col("task_type").is_in(COMMUNICATION_TASK_TYPES).fill_null(False)
            | pl.col("op_name").str.starts_with("hcom_").fill_null(False)
        )
    )
    times = comm.select(
        "card",
        pl.coalesce(pl.col("op_name"), pl.col("op_type")).alias("op_name"),
        pl.lit(None, dtype=pl.String).alias("group"),
        pl.col("duration_us").fill_null(0.0).alias("elapse_us"),
    )
    return communication_view(conform(times, OP_TIMES_SCHEMA), None, "tasks")
