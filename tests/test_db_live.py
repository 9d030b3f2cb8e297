"""A db export that is live, unfinished or hostile: its committed state or one line, never a
wrong number without a note, never a traceback or a hang, nothing written beside it.

Every case is built with the sqlite3 module from a copy of a real export, the writers and
lock holders are real processes, and the truth is what sqlite3 reads from the same files when
it opens them normally (in a copy of its own, so the files under test are never touched).
"""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl
import pytest

from npuscope.parsers import FrameCache, ProfileError, open_profile
from npuscope.parsers import db as dbmod
from npuscope.parsers.db import read_db

TORCH = "real/torch_npu_2025_db/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db"
MSPROF = "real/msprof_db_2023/msprof_0.db"
REAL = {"msprof_2023": MSPROF, "torch_l1_r0": TORCH}
MEMORY_CAP = 4 << 30  # address space of the subprocesses that read hostile files


# --------------------------------------------------------------------------- helpers


def _copy(samples: Path, which: str, folder: Path, journal_mode: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / Path(REAL[which]).name
    shutil.copyfile(samples / REAL[which], path)
    if journal_mode is not None:
        con = sqlite3.connect(path)
        assert con.execute(f"PRAGMA journal_mode={journal_mode}").fetchone()[0] == journal_mode.lower()
        con.close()
    for side in ("-wal", "-shm", "-journal"):
        Path(str(path) + side).unlink(missing_ok=True)
    return path


def _truth(path: Path, *sides: str) -> list[tuple[int, int]]:
    """(startNs, duration ns) of every compute task, as sqlite3 reads the db with the files
    beside it when it opens them normally: in a private copy, so it may merge and roll back."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / path.name
        shutil.copyfile(path, copy)
        for side in sides:
            if Path(str(path) + side).exists():
                shutil.copyfile(str(path) + side, str(copy) + side)
        con = sqlite3.connect(copy)
        rows = con.execute(
            "SELECT t.startNs, t.endNs - t.startNs FROM TASK t "
            "JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId"
        ).fetchall()
        con.close()
    return sorted(rows)


def _figures(exp) -> list[tuple[int, int]]:
    compute = exp.tasks.filter(exp.tasks["task_type"] != "COMMUNICATION")
    return sorted(zip(compute["start_ns"].to_list(), [round(d * 1000) for d in compute["duration_us"].to_list()]))


def _state(folder: Path) -> dict[str, tuple[int, str]]:
    """Every file of `folder`: its size and the hash of its bytes."""
    return {p.name: (p.stat().st_size, hashlib.sha256(p.read_bytes()).hexdigest()) for p in sorted(folder.iterdir())}


@pytest.fixture
def private_tmp(tmp_path, monkeypatch) -> Path:
    """TMPDIR for the reader's private copies, checked empty afterwards."""
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)
    yield tmp
    assert list(tmp.iterdir()) == [], "a private copy was left behind"


def _both_readers(path: Path, monkeypatch, **kw):
    """The export as ADBC reads it and as the sqlite3 fallback reads it: they must agree."""
    fast = read_db(path, **kw)
    with monkeypatch.context() as m:
        m.setattr(dbmod._Db, "_open_adbc", lambda self: None)
        slow = read_db(path, **kw)
    assert _figures(fast) == _figures(slow)
    assert [n for n in fast.notes if "adbc" not in n] == [n for n in slow.notes if "adbc" not in n]
    return fast


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def _report(path: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """`npuscope report` as a real process; a hang or a runaway read fails the test."""
    try:
        return subprocess.run(
            [sys.executable, "-m", "npuscope", "report", str(path), "--no-cache", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            preexec_fn=_limit_memory,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"npuscope report {path.name} did not return within {timeout} s")


def _one_line_exit_2(res: subprocess.CompletedProcess, *words: str) -> str:
    assert res.returncode == 2, (res.returncode, res.stderr[-2000:])
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr[-2000:]
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


# --------------------------------------------------------------------------- (a) a WAL


@pytest.mark.parametrize("which", sorted(REAL))
def test_committed_rows_only_in_the_wal_are_read(samples, tmp_path, private_tmp, monkeypatch, which):
    """A writer in WAL mode committed new durations; the db file still holds the old ones."""
    work = tmp_path / "work"
    src = _copy(samples, which, work, "WAL")
    before = _truth(src)
    writer = sqlite3.connect(src, isolation_level=None)
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("UPDATE TASK SET endNs = startNs + (endNs - startNs) * 2")
    # The files as they are while the writer is open, before any checkpoint: db + its -wal.
    case = tmp_path / "case"
    case.mkdir()
    path = case / src.name
    shutil.copyfile(src, path)
    shutil.copyfile(str(src) + "-wal", str(path) + "-wal")
    writer.close()
    assert Path(str(path) + "-wal").stat().st_size > 0
    want = _truth(path, "-wal")
    assert want != before and [d for _, d in want] == [2 * d for _, d in before]
    state = _state(case)
    exp = _both_readers(path, monkeypatch)
    assert _figures(exp) == want
    assert any("-wal" in n and "merged" in n for n in exp.notes), exp.notes
    assert not any("being written" in n or "unfinished" in n for n in exp.notes), exp.notes
    assert _state(case) == state  # nothing written beside it; the -wal byte for byte as it was


def test_a_wal_that_is_not_one_is_ignored_with_a_note(samples, tmp_path, private_tmp):
    path = _copy(samples, "torch_l1_r0", tmp_path / "case")
    Path(str(path) + "-wal").write_bytes(b"\xa5" * 4096)
    state = _state(path.parent)
    exp = read_db(path)
    assert _figures(exp) == _truth(path)
    assert any("not a valid write-ahead log" in n for n in exp.notes)
    assert _state(path.parent) == state


# --------------------------------------------------------------------------- (b) a hot journal

_DIES_MID_TRANSACTION = r"""
import sqlite3, sys, time
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("CREATE TABLE pad(x)")
con.execute("INSERT INTO pad SELECT randomblob(3000) FROM (WITH RECURSIVE r(n) AS "
            "(SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 600) SELECT n FROM r)")
print("padded", flush=True)
sys.stdin.readline()  # the test has read the committed state: go on
con.execute("PRAGMA cache_size=2")  # spill: the changed pages reach the db file before commit
con.execute("BEGIN")
con.execute("UPDATE TASK SET endNs = startNs + 120")
con.execute("UPDATE pad SET x = randomblob(3000)")
print("ready", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("which", sorted(REAL))
def test_a_hot_journal_reads_as_the_committed_state(samples, tmp_path, private_tmp, monkeypatch, which):
    path = _copy(samples, which, tmp_path / "case", "DELETE")
    writer = subprocess.Popen(
        [sys.executable, "-c", _DIES_MID_TRANSACTION, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout.readline().strip() == "padded"
        # Read before the writer begins its transaction (it waits for the line below): on a
        # loaded machine it could otherwise spill its first pages while the copy is made.
        committed = _truth(path)
        image = path.read_bytes()
        writer.stdin.write("go\n")
        writer.stdin.flush()
        assert writer.stdout.readline().strip() == "ready"
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    journal = Path(str(path) + "-journal")
    assert journal.stat().st_size > 0
    # The case is real: the db file holds half a transaction, sqlite3 rolls it back.
    assert path.read_bytes() != image
    with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as con:
        torn = sorted(
            con.execute(
                "SELECT t.startNs, t.endNs - t.startNs FROM TASK t "
                "JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId"
            ).fetchall()
        )
    assert torn != committed and {d for _, d in torn} == {120}
    assert _truth(path, "-journal") == committed
    state = _state(path.parent)
    exp = _both_readers(path, monkeypatch)
    assert _figures(exp) == committed
    assert any("is unfinished" in n and journal.name in n for n in exp.notes), exp.notes
    assert _state(path.parent) == state  # the journal is left, byte for byte
    with pytest.raises(ProfileError) as err:
        read_db(path, strict=True)
    assert "unfinished" in str(err.value) and "\n" not in str(err.value)


# --------------------------------------------------------------------------- (c) a live writer

_HOLDS_A_LOCK = r"""
import sqlite3, sys
con = sqlite3.connect(sys.argv[1], isolation_level=None)
mode = sys.argv[2]
if mode == "wal":
    con.execute("PRAGMA journal_mode=WAL")
con.execute("BEGIN EXCLUSIVE" if mode == "exclusive" else "BEGIN IMMEDIATE")
con.execute("UPDATE TASK SET endNs = startNs + 120")
print("ready", flush=True)
sys.stdin.read()  # until the test is done
con.execute("ROLLBACK")
"""


@pytest.fixture
def live_writer(samples, tmp_path, request):
    which, mode = request.param
    path = _copy(samples, which, tmp_path / "case", "DELETE")
    committed = _truth(path)
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDS_A_LOCK, str(path), mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        yield path, committed, proc.pid
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


LIVE = [("torch_l1_r0", "reserved"), ("torch_l1_r0", "exclusive"), ("msprof_2023", "exclusive"), ("torch_l1_r0", "wal")]


@pytest.mark.parametrize("live_writer", LIVE, indirect=True, ids=["-".join(c) for c in LIVE])
def test_a_live_writer_is_said(live_writer, private_tmp, monkeypatch):
    path, committed, pid = live_writer
    state = _state(path.parent)
    exp = _both_readers(path, monkeypatch)
    assert _figures(exp) == committed  # its changes are not committed: the committed state
    want = f"{path.name} is being written (a lock is held by process {pid}): its figures may be incomplete"
    assert any(n.startswith(want) for n in exp.notes), exp.notes
    assert _state(path.parent) == state
    with pytest.raises(ProfileError) as err:
        read_db(path, strict=True)
    msg = str(err.value)
    assert "\n" not in msg and str(path) in msg and "being written" in msg and "--strict" in msg


@pytest.mark.parametrize("live_writer", [("torch_l1_r0", "exclusive")], indirect=True, ids=["exclusive"])
def test_report_says_a_live_writer(live_writer):
    path, _, _ = live_writer
    res = _report(path)
    assert res.returncode == 0, res.stderr
    assert "is being written (a lock is held" in res.stdout
    # --strict refuses it with one line, with the cache off and from a cached entry alike.
    _one_line_exit_2(_report(path, "--strict"), "being written", "--strict")
    cache = path.parent / "cache"
    env = {**os.environ, "NPUSCOPE_CACHE_DIR": str(cache)}
    cached = [sys.executable, "-m", "npuscope", "report", str(path), "--format", "json"]
    first = subprocess.run(cached, capture_output=True, text=True, timeout=60, env=env)
    assert first.returncode == 0, first.stderr
    again = subprocess.run([*cached, "--strict"], capture_output=True, text=True, timeout=60, env=env)
    _one_line_exit_2(again, "being written", "--strict")


def test_a_new_wal_is_seen_by_a_cached_reopen(samples, tmp_path, private_tmp):
    # The cache entry of a db is keyed by its -wal too: a writer that commits into the WAL
    # changes the figures of the next open though the db file itself is untouched.
    path = _copy(samples, "torch_l1_r0", tmp_path / "case", "WAL")
    first = open_profile(path, cache=FrameCache(root=tmp_path / "cache"))
    stamp = path.stat()
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        writer.execute("PRAGMA wal_autocheckpoint=0")
        writer.execute("UPDATE TASK SET endNs = startNs + (endNs - startNs) * 2")
        assert Path(str(path) + "-wal").stat().st_size > 0
        assert (path.stat().st_mtime_ns, path.stat().st_size) == (stamp.st_mtime_ns, stamp.st_size)
        reopened = open_profile(path, cache=FrameCache(root=tmp_path / "cache"))
    finally:
        writer.close()
    compute = pl.col("task_type") != "COMMUNICATION"
    twice = 2 * first.tasks.filter(compute)["duration_us"].sum()
    assert reopened.tasks.filter(compute)["duration_us"].sum() == pytest.approx(twice, rel=1e-6)


# --------------------------------------------------------------------------- (e) the private copy


def test_the_copy_is_removed_on_error_and_interrupt(samples, tmp_path, private_tmp, monkeypatch):
    path = _copy(samples, "torch_l1_r0", tmp_path / "case", "WAL")
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("UPDATE TASK SET endNs = endNs + 1")
    seen = []

    def stop(rows, expected):
        seen.append([p.name for p in private_tmp.iterdir()])  # the copy exists while reading
        raise KeyboardInterrupt

    try:
        with pytest.raises(KeyboardInterrupt):
            read_db(path, hook=stop)
        assert seen and seen[0], "the read did not go through a private copy"
        assert list(private_tmp.iterdir()) == []
        # Interrupted while SQLite merges the copy.
        from npuscope.parsers import db_snapshot

        def interrupted(shown, copy):
            assert copy.parent.stat().st_mode & 0o777 == 0o700
            raise KeyboardInterrupt

        monkeypatch.setattr(db_snapshot, "_merge", interrupted)
        with pytest.raises(KeyboardInterrupt):
            read_db(path)
        assert list(private_tmp.iterdir()) == []
    finally:
        writer.close()


def test_no_room_for_the_copy_is_one_line(samples, tmp_path, private_tmp, monkeypatch):
    from npuscope.parsers import db_snapshot

    path = _copy(samples, "torch_l1_r0", tmp_path / "case", "WAL")
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("UPDATE TASK SET endNs = endNs + 1")
    try:
        monkeypatch.setattr(
            db_snapshot.shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10 << 20, 10 << 20, 1 << 20)
        )
        with pytest.raises(ProfileError) as err:
            read_db(path)
        msg = str(err.value)
        assert "\n" not in msg and "TMPDIR" in msg and str(path) in msg
    finally:
        writer.close()


# --------------------------------------------------------------------------- item 4: hostile content


def _edit(path: Path, sql: str) -> None:
    con = sqlite3.connect(path)
    con.executescript(sql)
    con.close()


def test_recursive_view_returns_with_one_line(samples, tmp_path):
    path = _copy(samples, "torch_l1_r0", tmp_path / "case", "DELETE")
    _edit(
        path,
        """
        ALTER TABLE TASK RENAME TO TASK_ROWS;
        CREATE VIEW TASK AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r)
            SELECT t.* FROM r, TASK_ROWS t;
    """,
    )
    _one_line_exit_2(_report(path, timeout=30), str(path), "TASK is a view")


def test_string_ids_view_of_20mb_blobs_is_one_line(samples, tmp_path):
    path = _copy(samples, "torch_l1_r0", tmp_path / "case", "DELETE")
    _edit(
        path,
        """
        ALTER TABLE STRING_IDS RENAME TO STRINGS;
        CREATE VIEW STRING_IDS AS SELECT id, randomblob(20000000) AS value FROM STRINGS;
    """,
    )
    _one_line_exit_2(_report(path, timeout=60), str(path), "STRING_IDS is a view")
    with pytest.raises(ProfileError, match="STRING_IDS is a view"):
        read_db(path)


def test_a_virtual_table_is_one_line(samples, tmp_path):
    path = _copy(samples, "torch_l1_r0", tmp_path / "case", "DELETE")
    try:
        _edit(
            path,
            "ALTER TABLE STEP_TIME RENAME TO STEPS; CREATE VIRTUAL TABLE STEP_TIME USING fts5(id, startNs, endNs);",
        )
    except sqlite3.OperationalError:
        pytest.skip("this SQLite has no fts5")
    with pytest.raises(ProfileError, match="STEP_TIME is a virtual table"):
        read_db(path)


def test_string_ids_table_of_20mb_values_is_cut_with_a_note(samples, tmp_path):
    path = _copy(samples, "torch_l1_r0", tmp_path / "case", "DELETE")
    con = sqlite3.connect(path)
    name_id, name = con.execute(
        "SELECT s.id, s.value FROM COMPUTE_TASK_INFO c JOIN STRING_IDS s ON s.id = c.name LIMIT 1"
    ).fetchone()
    huge = name + "x" * (20 << 20)
    con.execute("UPDATE STRING_IDS SET value = ? WHERE id = ?", (huge, name_id))
    con.execute("UPDATE STRING_IDS SET value = ? WHERE id = (SELECT max(id) FROM STRING_IDS)", (b"\xff" * (20 << 20),))
    con.commit()
    named = con.execute("SELECT count(*) FROM COMPUTE_TASK_INFO WHERE name = ?", (name_id,)).fetchone()[0]
    con.close()
    exp = read_db(path)
    got = exp.tasks.filter(exp.tasks["op_name"].str.starts_with(name))["op_name"]
    assert got.len() == named and set(got) == {huge[:1000]}
    assert any("2 text value(s) of STRING_IDS over 1 MB cut" in n for n in exp.notes), exp.notes
    assert _figures(exp) == _truth(path)


def _ids(path: Path, table: str, column: str, expr: str) -> None:
    _edit(path, f"UPDATE {table} SET {column} = {expr};")


@pytest.mark.parametrize(
    ("table", "column", "expr", "error"),
    [
        ("COMPUTE_TASK_INFO", "name", "CAST(CAST(name AS TEXT) AS BLOB)", "BLOB"),
        ("COMPUTE_TASK_INFO", "opType", "opType + 0.5", "fractional"),
        ("TASK", "streamId", "CAST(CAST(streamId AS TEXT) AS BLOB)", "BLOB"),
        ("TASK", "startNs", "CAST(CAST(startNs AS TEXT) AS BLOB)", "BLOB"),
        ("CANN_API", "globalTid", "CAST(CAST(globalTid AS TEXT) AS BLOB)", "BLOB"),
    ],
)
def test_blob_and_fractional_ids_are_one_line(samples, tmp_path, table, column, expr, error):
    path = _copy(samples, "torch_l1_r0", tmp_path / "case", "DELETE")
    _ids(path, table, column, expr)
    with pytest.raises(ProfileError) as err:
        read_db(path)
    msg = str(err.value)
    assert "\n" not in msg and error in msg and column in msg and table in msg, msg


def test_blob_op_names_through_report_are_one_line(samples, tmp_path):
    """The TypeError `_wait_findings` ended in: names that are BLOBs, not STRING_IDS ids."""
    path = _copy(samples, "torch_l1_r0", tmp_path / "case", "DELETE")
    _ids(path, "COMPUTE_TASK_INFO", "name", "CAST(CAST(name AS TEXT) AS BLOB)")
    _ids(path, "COMPUTE_TASK_INFO", "opType", "CAST(CAST(opType AS TEXT) AS BLOB)")
    _one_line_exit_2(_report(path), str(path), "BLOB", "name")


def test_whole_real_ids_read_as_the_integers(samples, tmp_path, monkeypatch):
    """An id kept as a whole REAL (how 2^64-1 may be stored) reads as the integer it holds."""
    plain = read_db(_copy(samples, "torch_l1_r0", tmp_path / "plain", "DELETE"))
    path = _copy(samples, "torch_l1_r0", tmp_path / "case", "DELETE")
    for table, column in (("COMPUTE_TASK_INFO", "name"), ("COMPUTE_TASK_INFO", "opType"), ("TASK", "streamId")):
        _ids(path, table, column, f"CAST({column} AS REAL)")
    exp = _both_readers(path, monkeypatch)
    assert exp.tasks.equals(plain.tasks)


def test_text_that_is_not_utf8_reads_with_replacement_characters(samples, tmp_path, monkeypatch):
    """SQLite keeps whatever bytes were stored as TEXT; polars must never hold invalid UTF-8."""
    path = _copy(samples, "torch_l1_r0", tmp_path / "case", "DELETE")
    con = sqlite3.connect(path)
    (name_id,) = con.execute("SELECT c.name FROM COMPUTE_TASK_INFO c LIMIT 1").fetchone()
    con.execute("UPDATE STRING_IDS SET value = CAST(x'ff4164640a' AS TEXT) WHERE id = ?", (name_id,))
    con.commit()
    con.close()
    exp = _both_readers(path, monkeypatch)
    assert "\ufffdAdd\n" in exp.tasks["op_name"].to_list()
    assert _figures(exp) == _truth(path)
