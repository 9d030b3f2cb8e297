"""The SQLite db export reader (parsers/db.py) on the real samples, checked against an
independent reading with the sqlite3 module; bad and hostile files; read-only opening."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import tempfile
import traceback
from collections import Counter
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from unpriv import make_dir, run_python, snapshot, unpriv, world_dir  # noqa: F401 - fixtures

from npuscope.parsers import ProfileError
from npuscope.parsers import db as dbmod
from npuscope.parsers.columns import EVENT_SCHEMA, STEP_SCHEMA, TASK_ORDER, TASK_SCHEMA, UNKNOWN
from npuscope.parsers.db import DB_NAME_RE, DbExport, is_db_export, read_db

TORCH = (
    "real/torch_npu_2025_db/level{level}/rank{rank}_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_{rank}.db"
)
REAL = {f"torch_l{level}_r{rank}": TORCH.format(level=level, rank=rank) for level in (0, 1) for rank in (0, 1)}
REAL["msprof_2023"] = "real/msprof_db_2023/msprof_0.db"
LEVELS = {"acl": "AscendCL", "node": "Node", "runtime": "Runtime", "model": "Model", "hccl": "Hccl", "op": "Op"}


# --------------------------------------------------------------------------- the truth, by sqlite3


class Truth:
    """What a db holds, computed with plain SQL: never with npuscope."""

    def __init__(self, path: Path) -> None:
        self.con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        self.tables = {r[0] for r in self.con.execute("SELECT name FROM sqlite_master WHERE type='table'")}

    def q(self, sql: str) -> list[tuple]:
        return self.con.execute(sql).fetchall()

    def card_sql(self, alias: str) -> str:
        if "RANK_DEVICE_MAP" in self.tables:
            return (
                f"COALESCE((SELECT CAST(rankId AS TEXT) FROM RANK_DEVICE_MAP r WHERE r.deviceId = {alias}.deviceId), "
                f"CAST({alias}.deviceId AS TEXT))"
            )
        return f"CAST({alias}.deviceId AS TEXT)"

    def compute_rows(self) -> list[tuple]:
        """(card, op_name, op_type, start_ns, dur_ns) of every compute task."""
        return self.q(f"""
            SELECT {self.card_sql("t")}, n.value, o.value, t.startNs, t.endNs - t.startNs
            FROM TASK t JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId
            LEFT JOIN STRING_IDS n ON n.id = c.name LEFT JOIN STRING_IDS o ON o.id = c.opType""")

    def comm_rows(self) -> list[tuple]:
        """(card, op_name, op_type, start_ns, dur_ns) of every COMMUNICATION_OP, its card from
        the TASK rows sharing its connectionId."""
        rows = self.q(f"""
            SELECT (SELECT {self.card_sql("t")} FROM TASK t WHERE t.connectionId = c.connectionId LIMIT 1),
                   n.value, o.value, c.startNs, c.endNs - c.startNs
            FROM COMMUNICATION_OP c LEFT JOIN STRING_IDS n ON n.id = c.opName
            LEFT JOIN STRING_IDS o ON o.id = c.opType""")
        out = []
        for card, name, op_type, start, dur in rows:
            if op_type in (None, "N/A"):
                op_type = re.sub(r"(_\d+)+$", "", name)
            out.append((card, name, op_type, start, dur))
        return out

    def api_counts(self) -> Counter:
        rows = self.q("""SELECT e.name, s.value, count(*) FROM CANN_API a
                         LEFT JOIN ENUM_API_TYPE e ON e.id = a.type LEFT JOIN STRING_IDS s ON s.id = a.name
                         GROUP BY 1, 2""")
        return Counter({f"{LEVELS.get(level, level.capitalize())}@{api}": n for level, api, n in rows})

    def steps(self) -> list[tuple]:
        if "STEP_TIME" not in self.tables:
            return []
        return self.q("SELECT id, startNs, endNs FROM STEP_TIME ORDER BY id")


def _op_type(value: str | None) -> str:
    return UNKNOWN if value in (None, "N/A") else value


@pytest.fixture(params=sorted(REAL))
def real(request, samples) -> tuple[str, Path, Truth, DbExport]:
    path = samples / REAL[request.param]
    return request.param, path, Truth(path), read_db(path)


def test_names():
    for name in ("msprof_0.db", "msprof_20240605100000.db", "ascend_pytorch_profiler_3.db"):
        assert DB_NAME_RE.match(name), name
    for name in ("analysis.db", "msprof.db", "msprof_0.db-wal", "ascend_pytorch_profiler_x.db", "msprof_0.json"):
        assert not DB_NAME_RE.match(name), name


def test_is_db_export(samples, tmp_path):
    assert is_db_export(samples / REAL["torch_l1_r0"])
    assert is_db_export(samples / REAL["msprof_2023"])
    fake = tmp_path / "msprof_1.db"
    fake.write_text("Device_id,OP Type\n0,MatMul\n")
    assert not is_db_export(fake)
    assert not is_db_export(tmp_path / "msprof_2.db")  # missing
    shutil.copy(samples / REAL["msprof_2023"], tmp_path / "analysis.db")
    assert not is_db_export(tmp_path / "analysis.db")  # SQLite, but not an export by name


# --------------------------------------------------------------------------- real samples


def test_frames_have_the_canonical_shape(real):
    _, _, truth, exp = real
    t = exp.tasks
    assert t.columns[: len(TASK_ORDER)] == list(TASK_ORDER)
    for name in TASK_ORDER:
        assert t.schema[name] == TASK_SCHEMA[name], name
    assert t.columns[len(TASK_ORDER) :] == list(exp.pmu_columns)
    assert all(t.schema[c] == pl.Float64 for c in exp.pmu_columns)
    assert exp.events is not None and dict(exp.events.schema) == EVENT_SCHEMA
    if exp.steps is not None:
        assert dict(exp.steps.schema) == STEP_SCHEMA
    assert exp.cards == tuple(sorted(set(t["card"].to_list())))
    # Time order per card; waits derived (first task of a card waits 0).
    for card in exp.cards:
        c = t.filter(pl.col("card") == card)
        assert c["start_ns"].is_sorted()
        assert c["wait_us"][0] == 0.0 and c["wait_us"].min() >= 0.0


def test_tasks_match_the_db(real):
    name, _, truth, exp = real
    t = exp.tasks
    compute, comm = truth.compute_rows(), truth.comm_rows()
    rows = compute + comm
    assert t.height == len(rows)
    got_compute = t.filter(pl.col("task_type") != "COMMUNICATION")
    got_comm = t.filter(pl.col("task_type") == "COMMUNICATION")
    assert Counter(got_compute["card"].to_list()) == Counter(r[0] for r in compute)
    assert Counter(got_comm["card"].to_list()) == Counter(r[0] for r in comm)
    # Total duration per op type (ns sums are exact; the frame holds us as Float64).
    want: Counter = Counter()
    for _, _, op_type, _, dur in compute:
        want[_op_type(op_type)] += dur
    for _, _, op_type, _, dur in comm:
        want[op_type] += dur
    got = {k: v for k, v in t.group_by("op_type").agg(pl.col("duration_us").sum()).iter_rows()}
    assert set(got) == set(want)
    for op_type, ns in want.items():
        assert got[op_type] == pytest.approx(ns / 1000, rel=1e-12, abs=1e-6), op_type
    assert t["duration_us"].sum() == pytest.approx(sum(r[4] for r in rows) / 1000, rel=1e-12)
    # The five longest tasks: name, exact start and duration.
    top = sorted(rows, key=lambda r: (-r[4], r[3]))[:5]
    got_top = t.sort(["duration_us", "start_ns"], descending=[True, False]).head(5)
    assert got_top.select("op_name", "start_ns").rows() == [(r[1], r[3]) for r in top]
    assert got_top["duration_us"].to_list() == pytest.approx([r[4] / 1000 for r in top], abs=1e-9)
    assert sorted(t["start_ns"].to_list()) == sorted(r[3] for r in rows)


def test_host_apis_match_the_db(real):
    _, _, truth, exp = real
    ev = exp.events
    assert Counter(dict(ev.group_by("name").len().iter_rows())) == truth.api_counts()
    assert set(ev["process"].unique()) == {"CANN"} and set(ev["ph"].unique()) == {"X"}
    first = truth.q(
        "SELECT startNs, endNs - startNs, CAST(globalTid AS TEXT), CAST(connectionId AS TEXT) "
        "FROM CANN_API ORDER BY startNs LIMIT 1"
    )[0]
    row = ev.sort("ts_ns").row(0, named=True)
    assert (row["ts_ns"], row["dur_ns"], row["tid"], row["connection_id"]) == first
    assert set(ev["card"].unique()) == set(exp.cards)  # one card per db here


def test_steps_match_the_db(real):
    _, _, truth, exp = real
    want = truth.steps()
    if not want:
        assert exp.steps is None
        return
    got = exp.steps.sort("iteration_id")
    assert got.select("iteration_id", "fp_start_ns", "iteration_end_ns").rows() == want
    assert got["bp_end_ns"].null_count() == got.height
    assert set(got["card"]) == set(exp.cards)


def test_torch_npu_level1_details(samples):
    path = samples / REAL["torch_l1_r0"]
    truth = Truth(path)
    exp = read_db(path)
    assert exp.cards == ("0",)
    t = exp.tasks
    first = t.filter(pl.col("op_name") == "trans_TransData_0").row(0, named=True)
    # Shapes lose their own quotes ("32,3,224,224" in STRING_IDS), as the CSV reader does.
    assert first["input_shapes"] == "32,3,224,224"
    assert (first["op_type"], first["task_type"], first["input_dtypes"], first["input_formats"]) == (
        "TransData",
        "AI_VECTOR_CORE",
        "FLOAT",
        "NCHW",
    )
    assert (first["stream_id"], first["model_id"], first["block_num"]) == ("2", "4294967295", 32)
    assert first["context_id"] is None  # 4294967295: no subtask, N/A in op_summary
    assert not any(s.startswith('"') for s in t["input_shapes"].drop_nulls().to_list())
    assert set(t["task_type"].unique()) == {"AI_CORE", "AI_VECTOR_CORE", "DSA_SQE", "MIX_AIV", "COMMUNICATION"}
    # PMU: one Float64 column per metric, op_summary's names, *_time in us (ns in the db).
    metrics = {r[0] for r in truth.q("SELECT DISTINCT s.value FROM TASK_PMU_INFO p JOIN STRING_IDS s ON s.id = p.name")}
    assert len(exp.pmu_columns) == len(metrics) == 28
    assert {"aicore_time(us)", "aiv_time(us)", "aic_mac_time(us)", "aic_mac_ratio", "aic_total_cycles"} <= set(
        exp.pmu_columns
    )
    ((gid, want_time, want_ratio),) = truth.q("""
        SELECT t.globalTaskId, max(CASE s.value WHEN 'aic_total_time' THEN p.value END),
               max(CASE s.value WHEN 'aic_mac_ratio' THEN p.value END)
        FROM TASK t JOIN TASK_PMU_INFO p ON p.globalTaskId = t.globalTaskId JOIN STRING_IDS s ON s.id = p.name
        JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId JOIN STRING_IDS n ON n.id = c.name
        WHERE n.value = 'Conv2D1' GROUP BY 1""")
    conv = t.filter(pl.col("op_name") == "Conv2D1").row(0, named=True)
    assert conv["aicore_time(us)"] == pytest.approx(want_time / 1000)
    assert conv["aic_mac_ratio"] == pytest.approx(want_ratio)
    comm = t.filter(pl.col("task_type") == "COMMUNICATION")
    assert comm["op_type"].unique().to_list() == ["hcom_allReduce_"]
    assert comm["stream_id"].null_count() == comm.height


def test_torch_npu_level0_types_unknown(samples):
    exp = read_db(samples / REAL["torch_l0_r1"])
    t = exp.tasks
    assert exp.cards == ("1",)  # RANK_DEVICE_MAP: rank 1
    compute = t.filter(pl.col("task_type") != "COMMUNICATION")
    # N/A in STRING_IDS is null for the reader; the canonical frame labels it unknown.
    assert set(compute["op_type"].unique()) == {UNKNOWN}
    assert set(compute["task_type"].unique()) == {UNKNOWN}
    for col in ("op_type", "task_type", "input_shapes", "input_dtypes", "op_name"):
        assert "N/A" not in t[col].to_list(), col
    comm = t.filter(pl.col("task_type") == "COMMUNICATION")
    assert comm.height == 4 and set(comm["op_type"]) == {"hcom_allReduce_"}  # from the name
    assert exp.pmu_columns == ()


def test_hand_edited_msprof_2023_opens(samples):
    path = samples / REAL["msprof_2023"]
    exp = read_db(path)
    truth = Truth(path)
    assert exp.cards == ("2",)  # TASK.deviceId, no RANK_DEVICE_MAP
    assert exp.tasks.height == len(truth.compute_rows()) == 11
    assert exp.steps is None
    # Its COMPUTE_TASK_INFO has waitNs (not opState): wait is derived, op_state stays null.
    assert exp.tasks["op_state"].null_count() == exp.tasks.height
    assert exp.tasks["is_aclnn"].all()
    assert exp.events.height == 4 and set(exp.events["card"]) == {"2"}


def test_device_ids_that_are_not_numbers(tmp_path):
    """Device ids are opaque text too: '²' is a digit to str.isdigit, not to int()."""
    path = tmp_path / "msprof_7.db"
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE TASK (startNs INTEGER, endNs INTEGER, deviceId TEXT, connectionId INTEGER, globalTaskId INTEGER);
        CREATE TABLE COMPUTE_TASK_INFO (name INTEGER, globalTaskId INTEGER);
        INSERT INTO TASK VALUES (10, 20, '²', 1, 1), (30, 50, 'npu b', 2, 2), (40, 45, '3', 3, 3);
        INSERT INTO COMPUTE_TASK_INFO VALUES (0, 1), (0, 2), (0, 3);
    """)
    con.close()
    exp = read_db(path)
    assert exp.cards == ("3", "npu b", "²")
    assert sorted(exp.tasks["card"]) == ["3", "npu b", "²"]


def test_card_from_the_layout(samples):
    exp = read_db(samples / REAL["torch_l1_r1"], card="rank7")
    assert exp.cards == ("rank7",)
    assert set(exp.tasks["card"]) == {"rank7"}
    assert set(exp.events["card"]) == {"rank7"}
    assert set(exp.steps["card"]) == {"rank7"}


def test_sqlite3_fallback_gives_the_same_frames(real, monkeypatch):
    """Without ADBC (not installed, or odd value types) the sqlite3 path reads the same."""
    _, path, _, fast = real
    monkeypatch.setattr(dbmod._Db, "_open_adbc", lambda self: None)
    slow = read_db(path)
    assert slow.tasks.equals(fast.tasks)
    assert slow.events.equals(fast.events)
    assert (slow.steps is None and fast.steps is None) or slow.steps.equals(fast.steps)
    assert (slow.cards, slow.pmu_columns, slow.notes) == (fast.cards, fast.pmu_columns, fast.notes)


def test_real_samples_take_the_fast_path(real, monkeypatch):
    """ADBC reads every table of a real export: the slow per-value path is never needed."""
    pytest.importorskip("adbc_driver_sqlite")
    _, path, _, fast = real

    def refuse(self, sql, kinds):
        raise AssertionError(f"sqlite3 fallback used for: {sql}")

    monkeypatch.setattr(dbmod._Db, "_sqlite3_frame", refuse)
    assert read_db(path).tasks.equals(fast.tasks)


def test_ids_beyond_int64(tmp_path):
    """2^64-1 as SQLite can hold it: -1 (a uint64 written as int64), TEXT, or REAL."""
    path = tmp_path / "msprof_20250101000000.db"
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY, value TEXT);
        CREATE TABLE TASK (startNs, endNs, deviceId, connectionId, globalTaskId, streamId, taskId, modelId);
        CREATE TABLE COMPUTE_TASK_INFO (name INTEGER, globalTaskId INTEGER, taskType INTEGER, opType INTEGER);
        CREATE TABLE CANN_API (startNs INTEGER, endNs INTEGER, type INTEGER, globalTid, connectionId, name INTEGER);
        INSERT INTO STRING_IDS VALUES (0, 'Add'), (1, 'AI_CORE'), (2, 'aclnnAdd');
    """)
    max64 = str((1 << 64) - 1)
    for i, (stored, start) in enumerate(
        [(-1, 1_700_000_000_000_001_000), (max64, "1700000000000002000"), (float(max64), 1_700_000_000_000_004_096.0)]
    ):
        con.execute(
            "INSERT INTO TASK VALUES (?, ?, 0, ?, ?, ?, ?, 4294967295)",
            (start, 1_700_000_000_000_009_000, stored, i, stored, stored),
        )
        con.execute("INSERT INTO COMPUTE_TASK_INFO VALUES (0, ?, 1, 0)", (i,))
        con.execute(
            "INSERT INTO CANN_API VALUES (1700000000000000000, 1700000000000000500, 20000, ?, ?, 2)", (stored, stored)
        )
    con.commit()
    con.close()
    exp = read_db(path)
    t = exp.tasks
    # A start kept as TEXT or REAL is read too (a REAL is as exact as the float it holds).
    assert t["start_ns"].to_list() == [1_700_000_000_000_001_000, 1_700_000_000_000_002_000, 1_700_000_000_000_004_096]
    assert t["stream_id"].to_list() == t["task_id"].to_list() == [max64, max64, str(1 << 64)]
    assert exp.events["connection_id"].to_list() == [max64, max64, str(1 << 64)]
    assert exp.events["tid"].to_list() == [max64, max64, str(1 << 64)]
    assert set(exp.events["name"]) == {"AscendCL@aclnnAdd"}
    assert exp.cards == ("0",)


# --------------------------------------------------------------------------- read-only


def test_nothing_is_written_beside_the_db(samples, tmp_path):
    # A folder name SQLite's URI syntax would misread (?, #, %) and that is not UTF-8.
    folder = tmp_path / os.fsdecode(b"ASCEND_PROFILER_OUTPUT ?#% \xe9")
    folder.mkdir()
    plain = folder / "ascend_pytorch_profiler_0.db"
    shutil.copy(samples / REAL["torch_l1_r0"], plain)
    # A db left in WAL mode: a reader that is not immutable creates -wal and -shm beside it.
    wal = folder / "msprof_20250101000000.db"
    shutil.copy(samples / REAL["msprof_2023"], wal)
    con = sqlite3.connect(wal)
    assert con.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
    con.close()
    assert not (folder / (wal.name + "-wal")).exists()
    before = snapshot(folder)
    assert read_db(plain).tasks.height > 0
    assert read_db(wal).tasks.height == 11
    assert snapshot(folder) == before


def test_locked_db_is_read(samples, tmp_path):
    """immutable=1 takes no lock: a writer holding one neither blocks nor breaks the read."""
    path = tmp_path / "ascend_pytorch_profiler_0.db"
    shutil.copy(samples / REAL["torch_l0_r0"], path)
    want = read_db(path).tasks
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        writer.execute("BEGIN EXCLUSIVE")
        writer.execute("DELETE FROM STEP_TIME")
        assert read_db(path).tasks.equals(want)
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_wal_with_pending_changes_is_noted(samples, tmp_path):
    path = tmp_path / "msprof_0.db"
    shutil.copy(samples / REAL["msprof_2023"], path)
    (tmp_path / "msprof_0.db-wal").write_bytes(b"\0" * 64)
    assert any("msprof_0.db-wal" in n for n in read_db(path).notes)


# --------------------------------------------------------------------------- bad input


def _error(path: Path) -> str:
    with pytest.raises(ProfileError) as err:
        read_db(path)
    msg = str(err.value)
    assert "\n" not in msg and str(path) in msg
    return msg


def test_text_file_named_like_a_db(tmp_path):
    path = tmp_path / "msprof_1.db"
    path.write_text("Device_id,Model ID,Task ID\n0,1,2\n")
    assert "not an SQLite database" in _error(path)


def test_empty_missing_and_folder(tmp_path):
    empty = tmp_path / "msprof_1.db"
    empty.write_bytes(b"")
    assert "empty" in _error(empty)
    assert "no such file" in _error(tmp_path / "msprof_2.db")
    folder = tmp_path / "msprof_3.db"
    folder.mkdir()
    assert "folder" in _error(folder)


@pytest.mark.parametrize("keep", [50, 4096 * 3 + 17, 0.5])
def test_truncated_copy(samples, tmp_path, keep):
    data = (samples / REAL["torch_l1_r0"]).read_bytes()
    n = int(len(data) * keep) if isinstance(keep, float) else keep
    path = tmp_path / "ascend_pytorch_profiler_0.db"
    path.write_bytes(data[:n])
    msg = _error(path)
    assert "truncated" in msg or "cut short" in msg


def test_damaged_pages(samples, tmp_path):
    data = bytearray((samples / REAL["torch_l1_r0"]).read_bytes())
    data[4096:] = b"\xa5" * (len(data) - 4096)  # every page after the first is garbage
    path = tmp_path / "ascend_pytorch_profiler_0.db"
    path.write_bytes(bytes(data))
    assert "damaged" in _error(path) or "not an SQLite database" in _error(path)


def test_db_without_task_table(tmp_path):
    path = tmp_path / "msprof_5.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY, value TEXT)")
    con.commit()
    con.close()
    assert "no TASK table" in _error(path)


def test_optional_tables_missing(samples, tmp_path):
    """Only TASK: no compute tasks, no host APIs, each said in a note; never a crash."""
    path = tmp_path / "msprof_6.db"
    shutil.copy(samples / REAL["torch_l0_r0"], path)
    con = sqlite3.connect(path)
    for table in ("COMPUTE_TASK_INFO", "STRING_IDS", "CANN_API", "STEP_TIME"):
        con.execute(f"DROP TABLE {table}")
    con.commit()
    con.close()
    exp = read_db(path)
    assert exp.events is None and exp.steps is None
    comm = exp.tasks.filter(pl.col("task_type") == "COMMUNICATION")
    assert exp.tasks.height == comm.height == 4  # names unknown without STRING_IDS
    notes = " ".join(exp.notes)
    for what in ("COMPUTE_TASK_INFO", "STRING_IDS", "CANN_API"):
        assert what in notes


READ_SNIPPET = r"""
import json, sys, traceback
from pathlib import Path
from npuscope.parsers import ProfileError
from npuscope.parsers.db import read_db
try:
    x = read_db(Path(sys.argv[1]))
except ProfileError as e:
    out = {"outcome": "error", "message": str(e)}
except BaseException:
    out = {"outcome": "crash", "message": traceback.format_exc()}
else:
    out = {"outcome": "ok", "tasks": x.tasks.height}
print(json.dumps(out))
"""


def _read_unprivileged(path: Path, mode: str, kw: dict, cwd: Path) -> dict:
    if mode == "inprocess":
        try:
            return {"outcome": "ok", "tasks": read_db(path).tasks.height}
        except ProfileError as e:
            return {"outcome": "error", "message": str(e)}
        except Exception:  # noqa: BLE001 - reported as the snippet does
            return {"outcome": "crash", "message": traceback.format_exc()}
    cache = cwd / "cache"
    if not cache.exists():
        make_dir(cache, 0o777)
    r = run_python(["-c", READ_SNIPPET, path], cache=cache, cwd=cwd, **kw)
    assert r.returncode == 0 and r.stdout.strip(), r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_unreadable_file_and_read_only_folder(unpriv, world_dir, samples):
    mode, kw = unpriv
    folder = make_dir(world_dir / "out", 0o755)
    locked = folder / "msprof_0.db"
    shutil.copy(samples / REAL["msprof_2023"], locked)
    locked.chmod(0)
    res = _read_unprivileged(locked, mode, kw, world_dir)
    assert res["outcome"] == "error" and "permission denied" in res["message"], res
    # A WAL-mode db in a folder the reader cannot write to still opens (no -shm is needed).
    sealed = make_dir(world_dir / "sealed", 0o755)
    wal = sealed / "msprof_1.db"
    shutil.copy(samples / REAL["msprof_2023"], wal)
    con = sqlite3.connect(wal)
    con.execute("PRAGMA journal_mode=WAL")
    con.close()
    wal.chmod(0o444)
    sealed.chmod(0o555)
    res = _read_unprivileged(wal, mode, kw, world_dir)
    assert res == {"outcome": "ok", "tasks": 11}, res
    assert sorted(p.name for p in sealed.iterdir()) == ["msprof_1.db"]


# --------------------------------------------------------------------------- hostile values

U64 = 1 << 64
I63 = 1 << 63


def _stored(value: int, how: str):
    """An id as msprof might store it: an INTEGER when it fits, else TEXT or REAL."""
    if value < I63 and how != "text":
        return value
    if how == "wrap":  # the C writer's int64 view of a uint64
        return value - U64 if value >= I63 else value
    return str(value) if how == "text" else float(value)


IDS = st.integers(0, U64 - 1)
HOW = st.sampled_from(["int", "text", "real", "wrap"])
TIMES = st.one_of(
    st.integers(-I63, I63 - 1),
    st.integers(1_700_000_000_000_000_000, 1_700_000_000_010_000_000),
    st.none(),
    st.text(max_size=6),
    st.floats(allow_nan=False),
)
ROW = st.tuples(IDS, IDS, IDS, IDS, TIMES, TIMES, HOW, st.integers(0, 5))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(ROW, max_size=6),
    apis=st.lists(st.tuples(TIMES, TIMES, IDS, HOW), max_size=4),
    comm=st.lists(st.tuples(TIMES, TIMES, IDS, HOW), max_size=3),
    with_rank=st.booleans(),
)
def test_hostile_ids_and_times(rows, apis, comm, with_rank):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "msprof_1.db"
        con = sqlite3.connect(path)
        con.executescript("""
            PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;
            CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY, value TEXT);
            CREATE TABLE TASK (startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER,
                globalTaskId INTEGER, globalPid INTEGER, taskType INTEGER, contextId INTEGER,
                streamId INTEGER, taskId INTEGER, modelId INTEGER);
            CREATE TABLE COMPUTE_TASK_INFO (name INTEGER, globalTaskId INTEGER, blockDim INTEGER,
                mixBlockDim INTEGER, taskType INTEGER, opType INTEGER, inputFormats INTEGER,
                inputDataTypes INTEGER, inputShapes INTEGER, outputFormats INTEGER,
                outputDataTypes INTEGER, outputShapes INTEGER);
            CREATE TABLE TASK_PMU_INFO (globalTaskId INTEGER, name INTEGER, value NUMERIC);
            CREATE TABLE COMMUNICATION_OP (opName INTEGER, startNs INTEGER, endNs INTEGER,
                connectionId INTEGER, groupName INTEGER, opId INTEGER, opType INTEGER);
            CREATE TABLE CANN_API (startNs INTEGER, endNs INTEGER, type INTEGER, globalTid INTEGER,
                connectionId INTEGER, name INTEGER);
            CREATE TABLE ENUM_API_TYPE (id INTEGER PRIMARY KEY, name TEXT);
            CREATE TABLE STEP_TIME (id INTEGER, startNs INTEGER, endNs INTEGER);
            CREATE TABLE RANK_DEVICE_MAP (rankId INTEGER, deviceId INTEGER);
            INSERT INTO STRING_IDS VALUES (0, 'MatMul'), (1, 'AI_CORE'), (2, '"8,16"'), (3, 'N/A'),
                (4, 'hcom_allReduce__1_0_1'), (5, 'aic_mac_time');
            INSERT INTO ENUM_API_TYPE VALUES (20000, 'acl');
        """)
        for device, conn, gtid, stream, start, end, how, ref in rows:
            ids = [_stored(v, how) for v in (device, conn, gtid, stream)]
            con.execute(
                "INSERT INTO TASK VALUES (?,?,?,?,?,0,0,4294967295,?,1,4294967295)",
                (start, end, ids[0], ids[1], ids[2], ids[3]),
            )
            con.execute(
                "INSERT INTO COMPUTE_TASK_INFO VALUES (?,?,1,0,1,?,?,?,?,?,?,?)",
                (ref, ids[2], ref, ref, ref, ref, ref, ref, ref),
            )
            con.execute("INSERT INTO TASK_PMU_INFO VALUES (?, 5, ?)", (ids[2], ref * 1.5))
            if with_rank:
                con.execute("INSERT INTO RANK_DEVICE_MAP VALUES (?, ?)", (ref, ids[0]))
        for start, end, conn, how in apis:
            con.execute("INSERT INTO CANN_API VALUES (?, ?, 20000, 7, ?, 0)", (start, end, _stored(conn, how)))
            con.execute("INSERT INTO STEP_TIME VALUES (?, ?, ?)", (_stored(conn, how), start, end))
        for start, end, conn, how in comm:
            con.execute("INSERT INTO COMMUNICATION_OP VALUES (4, ?, ?, ?, 0, 1, 3)", (start, end, _stored(conn, how)))
        con.commit()
        con.close()
        try:
            exp = read_db(path)
        except ProfileError:
            return
        t = exp.tasks
        assert t.columns[: len(TASK_ORDER)] == list(TASK_ORDER)
        assert all(t.schema[c] == TASK_SCHEMA[c] for c in TASK_ORDER)
        # Every task is a generated row (duplicated globalTaskIds join as SQL joins them).
        starts = {r[4] for r in rows} | {c[0] for c in comm}
        assert set(t["start_ns"].to_list()) <= {v for v in starts if isinstance(v, int)} | {
            int(v) for v in starts if isinstance(v, float) and v.is_integer()
        } | {int(v) for v in starts if isinstance(v, str) and v.strip().lstrip("+-").isdigit()}
        assert (t["duration_us"] >= 0).all() and (t["start_ns"] >= 0).all()
        assert not any(s.startswith('"') for s in t["input_shapes"].drop_nulls().to_list())
        # Ids are text; none is negative (a wrapped 2^64-1 reads as 18446744073709551615).
        assert not any(s.startswith("-") for s in t["stream_id"].drop_nulls().to_list())
        stored_ints = {str(r[3]) for r in rows if r[6] in ("int", "text", "wrap") or r[3] < I63}
        ints = [s for s in t["stream_id"].drop_nulls().to_list() if s.isdigit() and int(s) < U64]
        assert set(ints) <= stored_ints | {str(int(float(r[3]))) for r in rows}
        if exp.events is not None:
            assert dict(exp.events.schema) == EVENT_SCHEMA
            assert (exp.events["dur_ns"] >= 0).all()
            assert set(exp.events["card"]) <= set(exp.cards) | {"host"}
        if exp.steps is not None:
            assert dict(exp.steps.schema) == STEP_SCHEMA
        assert set(t["card"]) <= set(exp.cards)
