"""The db export the generator writes (fixtures/generate_db.py).

First what the file is, read with sqlite3 / csv / json only: the tables and columns of the real
db samples, and the same run as the text export beside it, value for value. Then what the
parsers make of it: `open_profile(source="text")` and `open_profile(source="db")` of one
generated run give the same tasks, op statistics, steps and report; `auto` reads the db and
lists the text files as not read; a db-only folder reports the planted problems.
"""

from __future__ import annotations

import csv
import json
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from npuscope.fixtures import generate as gen
from npuscope.fixtures import generate_db as gdb

DEFAULT = ("recompilation", "host_op_wait", "ai_cpu", "long_task", "dominant_op_type")
SAMPLE_TORCH = Path("torch_npu_2025_db/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db")
SAMPLE_MSPROF = Path("msprof_db_2023/msprof_0.db")
RUN = dict(cards=2, steps=4, ops_per_step=120, seed=5, problems=DEFAULT)


# --------------------------------------------------------------------------- helpers


def _connect(path: Path) -> sqlite3.Connection:
    # Read-only and immutable: the samples are read-only files, and nothing may be written.
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)


def _columns(con: sqlite3.Connection) -> dict[str, list[tuple[str, str, int]]]:
    """table -> [(column, declared type, primary key)]."""
    tables = [n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {t: [(r[1], r[2].upper(), r[5]) for r in con.execute(f'PRAGMA table_info("{t}")')] for t in tables}


def _dbs(g: gen.Generated) -> list[Path]:
    return sorted(p for p in g.files if p.suffix == ".db")


def _ns(text: str) -> int:
    """'1717575960208020.758\\t' / '151.000' / '20.000000' / '0' -> integer ns."""
    text = text.strip().strip('\t"')
    if "." not in text:
        return int(text) * 1000
    whole, frac = text.split(".")
    return int(whole) * 1000 + int(frac[:3].ljust(3, "0"))


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, gen.Generated]:
    """One run per layout, written with its db beside the text export."""
    out = tmp_path_factory.mktemp("db_runs")
    return {layout: gen.generate(out / layout, layout=layout, db=True, **RUN) for layout in ("era_b", "torch_npu")}


# --------------------------------------------------------------------------- the file itself


def test_tables_and_columns_are_those_of_the_real_db_exports(runs, samples):
    real = samples / "real"
    torch_ref = _columns(_connect(real / SAMPLE_TORCH))
    msprof_ref = _columns(_connect(real / SAMPLE_MSPROF))
    # msprof added COMPUTE_TASK_INFO.opState / hf32Eligible in 2025 (the text export has OP
    # State and HF32 Eligible); the exporter that writes `Block Num` in op_summary renamed
    # blockDim / mixBlockDim and added the ids of COMMUNICATION_OP / _TASK_INFO below.
    added = {"COMPUTE_TASK_INFO": [("opState", "INTEGER", 0), ("hf32Eligible", "INTEGER", 0)]}
    msprof_added = {
        **added,
        "COMMUNICATION_OP": [("deviceId", "INTEGER", 0)],
        "COMMUNICATION_TASK_INFO": [("isMaster", "INTEGER", 0), ("bandwidth", "NUMERIC", 0)],
    }
    renamed = {"blockDim": "blockNum", "mixBlockDim": "mixBlockNum"}
    for layout, path in [(name, p) for name, g in runs.items() for p in _dbs(g)]:
        con = _connect(path)
        mine = _columns(con)
        msprof = layout == "era_b"
        assert set(mine) <= set(torch_ref), set(mine) - set(torch_ref)
        must = {
            "STRING_IDS",
            "TASK",
            "COMPUTE_TASK_INFO",
            "COMMUNICATION_OP",
            "CANN_API",
            "ENUM_API_TYPE",
            "NPU_INFO",
            "META_DATA",
            "SESSION_TIME_INFO",
            "TASK_PMU_INFO",
        }
        must |= set() if msprof else {"STEP_TIME", "RANK_DEVICE_MAP"}
        assert must <= set(mine), must - set(mine)
        if msprof:  # torch_npu's own tables are not in an msprof db
            assert not {"STEP_TIME", "RANK_DEVICE_MAP", "PYTORCH_API"} & set(mine)
        for table, cols in mine.items():
            want = list(torch_ref[table]) + (msprof_added if msprof else added).get(table, [])
            if msprof and table == "COMPUTE_TASK_INFO":
                want = [(renamed.get(n, n), t, pk) for n, t, pk in want]
            assert cols == want, table
            if table in msprof_ref:
                # Every column both real samples agree on is there (the 2023 msprof sample
                # was edited upstream and has extra columns of its own).
                common = {c[0] for c in msprof_ref[table]} & {c[0] for c in torch_ref[table]}
                names = {c[0] for c in cols}
                assert all(c in names or renamed.get(c) in names for c in common), table
        indexes = {r[0] for r in con.execute("SELECT sql FROM sqlite_master WHERE type = 'index'")}
        assert indexes == {
            "CREATE INDEX TaskIndex ON TASK (startNs,globalTaskId)",
            "CREATE INDEX CommunicationTaskIndex ON COMMUNICATION_TASK_INFO (globalTaskId)",
        }
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert not list(path.parent.glob(path.name + "-*"))  # no -journal / -wal left behind


def test_values_are_integers_and_string_ids(runs):
    name_like = {
        "TASK": ["taskType"],
        "COMPUTE_TASK_INFO": [
            "name",
            "taskType",
            "opType",
            "inputFormats",
            "inputDataTypes",
            "inputShapes",
            "outputFormats",
            "outputDataTypes",
            "outputShapes",
            "attrInfo",
            "opState",
            "hf32Eligible",
        ],
        "COMMUNICATION_OP": ["opName", "groupName", "algType", "opType"],
        "COMMUNICATION_TASK_INFO": ["name", "taskType", "groupName"],
        "CANN_API": ["name"],
        "TASK_PMU_INFO": ["name"],
    }
    for path in [p for g in runs.values() for p in _dbs(g)]:
        con = _connect(path)
        ids = {i for (i,) in con.execute("SELECT id FROM STRING_IDS")}
        for table, cols in name_like.items():
            for col in cols:
                got = {v for (v,) in con.execute(f"SELECT DISTINCT {col} FROM {table}")}
                assert got and got <= ids, (path.name, table, col)
        for table, cols in _columns(con).items():
            for col, typ, _ in cols:
                if typ != "INTEGER":
                    continue
                kinds = {k for (k,) in con.execute(f"SELECT DISTINCT typeof({col}) FROM {table}")}
                assert kinds <= {"integer"}, (path.name, table, col, kinds)
        # Epoch nanoseconds, ends after starts, the session around the tasks.
        assert con.execute("SELECT min(startNs) > 1.7e18, min(endNs - startNs) >= 0 FROM TASK").fetchone() == (1, 1)
        assert con.execute("SELECT min(endNs - startNs) > 0 FROM CANN_API").fetchone() == (1,)
        api = dict(con.execute("SELECT id, name FROM ENUM_API_TYPE"))
        assert {api[t] for (t,) in con.execute("SELECT DISTINCT type FROM CANN_API")} <= {"acl", "node"}
        start, end = con.execute("SELECT startTimeNs, endTimeNs FROM SESSION_TIME_INFO").fetchone()
        lo, hi = con.execute("SELECT min(startNs), max(endNs) FROM TASK").fetchone()
        assert start <= lo and hi <= end


def _db_rows(path: Path) -> list[dict]:
    """op_summary rows rebuilt from one db with SQL alone: compute tasks and collectives."""
    con = _connect(path)
    s = dict(con.execute("SELECT id, value FROM STRING_IDS"))
    cols = [c[0] for c in _columns(con)["COMPUTE_TASK_INFO"]]
    block = "blockNum" if "blockNum" in cols else "blockDim"
    mix = "mixBlockNum" if "mixBlockNum" in cols else "mixBlockDim"
    rows = []
    for r in con.execute(
        f"SELECT t.deviceId, t.startNs, t.endNs, t.taskId, t.streamId, t.contextId, t.modelId, "
        f"c.name, c.opType, c.opState, c.taskType, c.{block}, c.{mix}, c.hf32Eligible, "
        "c.inputShapes, c.inputDataTypes, c.inputFormats, c.outputShapes, c.outputDataTypes, "
        "c.outputFormats FROM TASK t JOIN COMPUTE_TASK_INFO c USING (globalTaskId)"
    ):
        (dev, start, end, task_id, stream, ctx, model, *names) = r
        rows.append(
            {
                "card": str(dev),
                "start": start,
                "dur": end - start,
                "Task ID": str(task_id),
                "Stream ID": str(stream),
                "Model ID": str(model),
                "Context ID": "N/A" if ctx == 4294967295 else str(ctx),
                "Op Name": s[names[0]],
                "OP Type": s[names[1]],
                "OP State": s[names[2]],
                "Task Type": s[names[3]],
                "Block": str(names[4]),
                "Mix Block": str(names[5]),
                "HF32 Eligible": s[names[6]],
                "Input Shapes": s[names[7]],
                "Input Data Types": s[names[8]],
                "Input Formats": s[names[9]],
                "Output Shapes": s[names[10]],
                "Output Data Types": s[names[11]],
                "Output Formats": s[names[12]],
            }
        )
    # A collective: its device from the TASK rows of its steps (same connectionId).
    dev_of = dict(con.execute("SELECT connectionId, deviceId FROM TASK"))
    for name, start, end, cid, op_type in con.execute(
        "SELECT opName, startNs, endNs, connectionId, opType FROM COMMUNICATION_OP"
    ):
        rows.append(
            {
                "card": str(dev_of[cid]),
                "start": start,
                "dur": end - start,
                "Task ID": "N/A",
                "Stream ID": "N/A",
                "Model ID": "4294967295",
                "Context ID": "N/A",
                "Op Name": s[name],
                "OP Type": s[op_type],
                "OP State": "N/A",
                "Task Type": "COMMUNICATION",
                "Block": "0",
                "Mix Block": "N/A",
                "HF32 Eligible": "N/A",
                **{
                    k: "N/A"
                    for k in (
                        "Input Shapes",
                        "Input Data Types",
                        "Input Formats",
                        "Output Shapes",
                        "Output Data Types",
                        "Output Formats",
                    )
                },
            }
        )
    rows.sort(key=lambda r: (int(r["card"]), r["start"]))
    return rows


def _rank(path: Path) -> str:
    """A torch_npu output's rank, from profiler_info_<rank>.json beside it."""
    return next(path.parent.parent.glob("profiler_info_*.json")).stem.rsplit("_", 1)[1]


def _summaries(g: gen.Generated, db: Path) -> list[Path]:
    """The op_summary / kernel_details files of the run the db `db` holds."""
    if db.name.startswith("ascend_pytorch_profiler"):
        return [db.parent / "kernel_details.csv"]
    return sorted(p for p in g.files if p.name.startswith("op_summary"))


_TORCH = {
    "Name": "Op Name",
    "Type": "OP Type",
    "Accelerator Core": "Task Type",
    "Block Dim": "Block",
    "Mix Block Dim": "Mix Block",
    "Block Num": "Block",
    "Mix Block Num": "Mix Block",
}


def _text_rows(g: gen.Generated) -> list[dict]:
    rows = []
    for p in sorted(p for p in g.files if p.name.startswith(("op_summary", "kernel_details"))):
        for r in _csv(p):
            r = {_TORCH.get(k, k): v for k, v in r.items()}
            card = r.get("Device_id") or _rank(p)
            start = r.get("Task Start Time(us)") or r["Start Time(us)"]
            dur = r.get("Task Duration(us)") or r["Duration(us)"]
            keep = {
                k: v
                for k, v in r.items()
                if k
                in (
                    "Task ID",
                    "Stream ID",
                    "Model ID",
                    "Context ID",
                    "Op Name",
                    "OP Type",
                    "OP State",
                    "Task Type",
                    "Block",
                    "Mix Block",
                    "HF32 Eligible",
                    "Input Shapes",
                    "Input Data Types",
                    "Input Formats",
                    "Output Shapes",
                    "Output Data Types",
                    "Output Formats",
                )
            }
            rows.append({"card": card, "start": _ns(start), "dur": _ns(dur), **keep})
    rows.sort(key=lambda r: (int(r["card"]), r["start"]))
    return rows


@pytest.mark.parametrize("layout", ["era_b", "torch_npu"])
def test_db_holds_every_op_summary_row(runs, layout):
    g = runs[layout]
    db_rows = [r for p in _dbs(g) for r in _db_rows(p)]
    db_rows.sort(key=lambda r: (int(r["card"]), r["start"]))
    text = _text_rows(g)
    assert len(db_rows) == len(text) == sum(g.rows_per_card.values())
    for a, b in zip(db_rows, text):
        assert a == b


@pytest.mark.parametrize("layout", ["era_b", "torch_npu"])
def test_db_pmu_is_the_op_summary_pmu(runs, layout):
    g = runs[layout]
    names = {v: k for k, v in gdb.PMU_DB_NAMES.items()}
    for path in _dbs(g):
        con = _connect(path)
        s = dict(con.execute("SELECT id, value FROM STRING_IDS"))
        got: dict[tuple[int, int], dict[str, float]] = {}
        for dev, start, name, value in con.execute(
            "SELECT t.deviceId, t.startNs, p.name, p.value FROM TASK_PMU_INFO p JOIN TASK t USING (globalTaskId)"
        ):
            col = names[s[name]]
            got.setdefault((dev, start), {})[col] = value / 1000 if col.endswith("(us)") else value
        want = {}
        for r in (r for p in _summaries(g, path) for r in _csv(p)):
            dev = int(r.get("Device_id") or _rank(path))
            if r.get("aicore_time(us)", "N/A") == "N/A":
                continue
            want[(dev, _ns(r.get("Task Start Time(us)") or r["Start Time(us)"]))] = {
                c: float(r[c]) for c in gen.PMU_COLUMNS if c in gdb.PMU_DB_NAMES
            }
        assert got == want


def _timeline_host_events(g: gen.Generated) -> Counter:
    events = Counter()
    for p in g.files:
        if p.name.startswith(("msprof", "trace_view")) and p.suffix == ".json":
            data = json.loads(p.read_bytes())
            cann = {
                e["pid"]
                for e in data
                if e.get("ph") == "M" and e["name"] == "process_name" and e["args"]["name"] == "CANN"
            }
            for e in data:
                if e.get("ph") == "X" and e["pid"] in cann:
                    start = _ns(e["ts"])
                    events[(e["name"], start, start + round(e["dur"] * 1000))] += 1
    return events


@pytest.mark.parametrize("layout", ["era_b", "torch_npu"])
def test_db_host_apis_are_the_timeline_host_events(runs, layout):
    g = runs[layout]
    levels = {v: k for k, v in gdb.API_LEVELS.items() if k in ("AscendCL", "Node")}
    got = Counter()
    for path in _dbs(g):
        con = _connect(path)
        s = dict(con.execute("SELECT id, value FROM STRING_IDS"))
        for start, end, typ, name in con.execute("SELECT startNs, endNs, type, name FROM CANN_API"):
            got[(f"{levels[typ]}@{s[name]}", start, end)] += 1
    want = _timeline_host_events(g)
    assert got == want
    names = {k[0] for k in got}
    assert "AscendCL@aclopCompileAndExecute" in names
    assert "AscendCL@aclrtSynchronizeStream" in names
    assert ("Node@launch" in names) == (layout == "era_b")


def test_each_launch_shares_its_task_connection_id(runs):
    """Era B: `Node@launch` carries the connectionId of the task it launched (how a host
    thread's card is known in a merged db); ids are unique across the cards."""
    (path,) = _dbs(runs["era_b"])
    con = _connect(path)
    launch = con.execute("SELECT id FROM STRING_IDS WHERE value = 'launch'").fetchone()[0]
    linked = con.execute(
        "SELECT count(*), count(DISTINCT a.globalTid), count(DISTINCT t.deviceId) FROM CANN_API a "
        "JOIN (SELECT DISTINCT connectionId, deviceId FROM TASK) t USING (connectionId) "
        "WHERE a.name = ?",
        (launch,),
    ).fetchone()
    assert linked == (sum(runs["era_b"].rows_per_card.values()), 2, 2)
    per_thread = con.execute(
        "SELECT a.globalTid, count(DISTINCT t.deviceId) FROM CANN_API a JOIN TASK t USING (connectionId) GROUP BY 1"
    ).fetchall()
    assert all(n == 1 for _, n in per_thread)


def test_step_time_covers_each_step_id(runs):
    g = runs["torch_npu"]
    for path in _dbs(g):
        con = _connect(path)
        steps = con.execute("SELECT id, startNs, endNs FROM STEP_TIME ORDER BY id").fetchall()
        kernel = path.parent / "kernel_details.csv"
        by_step: dict[int, list[int]] = {}
        for r in _csv(kernel):
            by_step.setdefault(int(r["Step Id"]), []).append(_ns(r["Start Time(us)"]))
        assert [s[0] for s in steps] == sorted(by_step)
        for (sid, lo, hi), nxt in zip(steps, [*steps[1:], None]):
            assert all(lo <= t < hi for t in by_step[sid])
            if nxt is not None:
                assert nxt[1] == hi  # contiguous: the boundary is the start of the step gap


def test_same_call_same_bytes_and_options(tmp_path):
    kw = dict(layout="era_b", cards=2, steps=2, ops_per_step=80, problems=DEFAULT, db=True)
    a = gen.generate(tmp_path / "a", **kw)
    b = gen.generate(tmp_path / "b", **kw)
    (da,), (db,) = _dbs(a), _dbs(b)
    assert da.read_bytes() == db.read_bytes()
    assert da.name == f"msprof_{gen.DEFAULT_EXPORT_TS}.db" and da.parent.name == gen.DEFAULT_PROF_NAME
    # Regenerated without a db into the same folder: the old db does not linger.
    c = gen.generate(tmp_path / "a", **{**kw, "db": False})
    assert not _dbs(c) and not list((tmp_path / "a").rglob("*.db"))
    with pytest.raises(ValueError, match="Era A"):
        gen.generate(tmp_path / "e", layout="era_a", db=True)
    with pytest.raises(ValueError):
        gen.generate(tmp_path / "e", layout="era_b", db="yes")


def test_db_follows_the_options_of_the_text_export(tmp_path):
    """No timeline: no host API table; no PMU: no TASK_PMU_INFO; one card: no collective."""
    g = gen.generate(tmp_path, layout="era_b", steps=2, ops_per_step=80, timeline=False, pmu=False, db=True)
    (path,) = _dbs(g)
    tables = set(_columns(_connect(path)))
    assert not tables & {"CANN_API", "TASK_PMU_INFO", "AICORE_FREQ", "COMMUNICATION_OP", "COMMUNICATION_TASK_INFO"}
    assert {"TASK", "COMPUTE_TASK_INFO", "STRING_IDS", "ENUM_API_TYPE"} <= tables
    db, text = _open(g.root, "db"), _open(g.root, "text")
    assert not db.has_timeline and db.pmu_columns == () == text.pmu_columns
    cols = [c for c in db.tasks.columns if c != "step_id"]
    assert_frame_equal(_sorted(db.tasks).select(cols), _sorted(text.tasks).select(cols))


@pytest.mark.parametrize("layout", ["era_b", "torch_npu"])
def test_db_only_writes_no_text_export(tmp_path, layout):
    g = gen.generate(tmp_path, layout=layout, cards=2, steps=2, ops_per_step=80, db="only")
    on_disk = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    assert on_disk == sorted(g.files)
    assert {p.suffix for p in on_disk} <= {".db", ".json"}
    assert not [p for p in on_disk if p.suffix == ".json" and not p.name.startswith("profiler_info")]
    if layout == "era_b":
        assert [p.relative_to(tmp_path).as_posix() for p in on_disk] == [
            f"ascend_profiling/{gen.DEFAULT_PROF_NAME}/msprof_{gen.DEFAULT_EXPORT_TS}.db"
        ]
    else:
        assert sorted(p.name for p in on_disk) == [
            "ascend_pytorch_profiler_0.db",
            "ascend_pytorch_profiler_1.db",
            "profiler_info_0.json",
            "profiler_info_1.json",
        ]
    # The db-only run holds the same host events as a run with a text timeline.
    full = gen.generate(tmp_path / "full", layout=layout, cards=2, steps=2, ops_per_step=80, db=True)
    for mine, other in zip(_dbs(g), _dbs(full)):
        assert mine.read_bytes() == other.read_bytes()


def test_command_line_writes_the_db(tmp_path):
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "npuscope.fixtures.generate",
            str(tmp_path),
            "--layout",
            "torch_npu",
            "--cards",
            "2",
            "--steps",
            "2",
            "--ops-per-step",
            "80",
            "--db-only",
            "--quiet",
        ],
        check=False,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in tmp_path.rglob("*.db")) == [
        "ascend_pytorch_profiler_0.db",
        "ascend_pytorch_profiler_1.db",
    ]
    assert not list(tmp_path.rglob("*.csv"))


# --------------------------------------------------------------------------- what the parsers read


def _open(root: Path, source: str):
    from npuscope.parsers import FrameCache, open_profile

    return open_profile(root, source=source, cache=FrameCache(enabled=False))


def _sorted(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.sort(["card", "start_ns", "op_name"], maintain_order=True)


def _without_step_trace(root: Path, out: Path) -> Path:
    """A copy of a text export without its step_trace file (and without the db): what an
    msprof db holds, as the db has no step table (step_trace is in the text export only)."""
    import shutil

    shutil.copytree(root, out)
    for p in out.rglob("*"):
        if p.name.startswith("step_trace") or p.suffix == ".db":
            p.unlink()
    return out


@pytest.fixture(scope="module")
def opened(runs, tmp_path_factory):
    """Each run opened as its text export and as its db export; `one_card` is an Era B run
    of one card (all problems on it); Era B text also without its step_trace."""
    tmp = tmp_path_factory.mktemp("opened")
    all_runs = dict(runs)
    all_runs["one_card"] = gen.generate(tmp / "one_card", layout="era_b", db=True, **{**RUN, "cards": 1})
    out = {}
    for name, g in all_runs.items():
        out[name] = {"run": g, "text": _open(g.root, "text"), "db": _open(g.root, "db")}
        if g.layout == "era_b":
            out[name]["text_no_steps"] = _open(_without_step_trace(g.root, tmp / f"{name}_bare"), "text")
    return out


def _task_order() -> list[str]:
    from npuscope.parsers.columns import TASK_ORDER

    return list(TASK_ORDER)


def _pmu(profile) -> list[str]:
    return [c for c in profile.tasks.columns if c not in _task_order()]


def _comm() -> pl.Expr:
    return pl.col("task_type").is_in(["COMMUNICATION", "HCCL"])


RUNS = ["era_b", "one_card", "torch_npu"]


@pytest.mark.parametrize("name", RUNS)
def test_text_and_db_give_the_same_tasks(opened, name):
    text, db, g = opened[name]["text"], opened[name]["db"], opened[name]["run"]
    assert (text.source_kind, db.source_kind) == ("text", "db")
    assert text.tasks_from == "op_summary" and db.tasks_from == "db"
    assert db.cards == text.cards == g.cards
    assert db.tasks.height == text.tasks.height == sum(g.rows_per_card.values())
    t, d = _sorted(text.tasks), _sorted(db.tasks)
    gaps = {"model_id", "block_num", "step_id"}
    cols = [c for c in _task_order() if c not in gaps]
    assert_frame_equal(d.select(cols), t.select(cols))
    compute = ~_comm()
    assert_frame_equal(
        d.filter(compute).select(sorted(gaps - {"step_id"})), t.filter(compute).select(sorted(gaps - {"step_id"}))
    )
    # PMU: every counter of the text export but cube_utilization(%), which the text
    # exporter computes and the db does not store (TASK_PMU_INFO has no such metric).
    pmu = [c for c in _pmu(text) if c in gdb.PMU_DB_NAMES]
    assert _pmu(text) == pmu + ["cube_utilization(%)"]
    assert _pmu(db) == pmu == list(db.pmu_columns)
    assert_frame_equal(d.select(pmu), t.select(pmu))
    assert db.time_problem is None and db.skipped_rows == 0


def test_db_durations_are_the_text_durations_exactly(opened):
    t, d = _sorted(opened["one_card"]["text"].tasks), _sorted(opened["one_card"]["db"].tasks)
    cols = ["duration_us", "wait_us", *opened["one_card"]["db"].pmu_columns]
    assert_frame_equal(d.select(cols), t.select(cols), check_exact=True)


def test_db_communication_rows_are_op_summary_rows(opened):
    t, d = _sorted(opened["era_b"]["text"].tasks), _sorted(opened["era_b"]["db"].tasks)
    assert t.filter(_comm()).height == 24
    assert_frame_equal(d.filter(_comm()), t.filter(_comm()).select(d.columns))


def test_db_tasks_have_the_step_id_of_kernel_details(opened):
    t, d = _sorted(opened["torch_npu"]["text"].tasks), _sorted(opened["torch_npu"]["db"].tasks)
    assert_frame_equal(d.select("card", "start_ns", "step_id"), t.select("card", "start_ns", "step_id"))


@pytest.mark.parametrize("name", RUNS)
def test_text_and_db_give_the_same_op_statistics(opened, name):
    from npuscope.parsers.frames import derive_statistic

    text, db = opened[name]["text"], opened[name]["db"]
    assert db.statistic_derived  # no op_statistic in a db: derived from the tasks, as msprof does
    assert_frame_equal(db.op_statistic, derive_statistic(text.tasks))
    # ... and the text export's own op_statistic file says the same, to its 3 decimals.
    key = ["card", "op_type", "core_type"]
    assert_frame_equal(
        db.op_statistic.sort(key), text.op_statistic.sort(key), check_exact=False, abs_tol=1e-3, rel_tol=0
    )


def _host(profile) -> pl.DataFrame:
    events = profile.events
    return (
        events.filter(pl.col("name").str.contains("@", literal=True) & (pl.col("ph") == "X"))
        .select("card", "name", "ts_ns", "dur_ns")
        .sort(pl.all())
    )


@pytest.mark.parametrize("name", RUNS)
def test_text_and_db_give_the_same_steps_and_host_events(opened, name):
    from npuscope.analysis.waits import step_boundaries

    text, db = opened[name]["text"], opened[name]["db"]
    if text.steps is not None and db.steps is not None:
        assert_frame_equal(db.steps, text.steps)
    if text.layout == "era_b":
        assert text.steps is not None and db.steps is None  # msprof's db has no step table
    else:
        # torch_npu: Step Id in kernel_details, STEP_TIME in the db; either way each step
        # boundary lies in the gap before the step's first task.
        assert text.steps is None and db.steps.height == RUN["steps"] * len(text.cards)
        for card in text.cards:
            t = _sorted(text.tasks).filter(pl.col("card") == card)
            firsts = t.filter(pl.col("step_id") != pl.col("step_id").shift(1))
            bounds = step_boundaries(db.tasks, db.events, db.steps).filter(pl.col("card") == card)
            assert firsts.height == RUN["steps"] - 1
            for start, wait in firsts.select("start_ns", "wait_us").rows():
                gap = (start - round(wait * 1000), start)
                assert bounds.filter(pl.col("ts_ns").is_between(*gap)).height, (card, start)
    # The host API events: the same names at the same times.
    assert_frame_equal(_host(db).drop("card").sort(pl.all()), _host(text).drop("card").sort(pl.all()))
    if len(text.cards) == 1 or text.layout != "era_b":
        assert_frame_equal(_host(db), _host(text))


def test_db_host_events_have_the_card_of_their_thread(opened):
    text, db = opened["era_b"]["text"], opened["era_b"]["db"]
    assert set(_host(text)["card"]) == {"0", "1"}
    assert_frame_equal(_host(db), _host(text))


def _report(profile) -> dict:
    from npuscope.analysis import diagnose
    from npuscope.analysis.report import build_report

    return build_report(profile, diagnose(profile))


def _findings(report: dict) -> list[tuple]:
    return sorted(
        (f["rule"], card["card"], tuple(f["op_types"]), f["count"], f["time_us"])
        for card in report["cards"]
        for f in card["findings"]
        if f["rule"] != "data_gaps"
    )


def _gaps(report: dict) -> dict[str, set[str]]:
    """Per card, the items of its data_gaps finding."""
    out = {}
    for card in report["cards"]:
        titles = [f["title"] for f in card["findings"] if f["rule"] == "data_gaps"]
        out[card["card"]] = set(titles[0].split(": ", 1)[1].split("; ")) if titles else set()
    return out


def _same_report(text, db, planted) -> None:
    rt, rd = _report(text), _report(db)
    assert rd["source"]["export"] == "db" and rt["source"]["export"] == "text"
    assert _findings(rd) == _findings(rt)
    # What the capture cannot show is the same: a db has no op_statistic table, but a statistic
    # derived from the same tasks is what msprof computes, no gap.
    assert _gaps(rd) == _gaps(rt)
    for ct, cd in zip(rt["cards"], rd["cards"], strict=True):
        assert cd["card"] == ct["card"]
        assert cd["summary"] == ct["summary"]
        for key in ("top_duration", "top_wait"):
            assert cd[key] == ct[key], (ct["card"], key)
    assert rd["card_spread"] == rt["card_spread"]
    warned = {(f[0], f[2][0], f[1]) for f in _findings(rd)}
    assert {(p.rule, p.op_type, p.card) for p in planted} <= warned


@pytest.mark.parametrize("name", ["one_card", "torch_npu"])
def test_text_and_db_give_the_same_report(opened, name):
    # msprof's db has no step table: the text export to compare an Era B db with is the one
    # without its step_trace (with it, the step-boundary gaps are expected, which nothing in
    # the db can tell).
    run = opened[name]
    _same_report(run["text_no_steps" if run["run"].layout == "era_b" else "text"], run["db"], run["run"].planted)


def test_text_and_db_give_the_same_report_of_two_cards(opened):
    run = opened["era_b"]
    _same_report(run["text_no_steps"], run["db"], run["run"].planted)


def test_auto_reads_the_db_and_says_the_text_files_are_not_read(runs):
    from npuscope.parsers import FrameCache, open_profile

    for g in runs.values():
        prof = open_profile(g.root, cache=FrameCache(enabled=False))  # source="auto"
        assert prof.source_kind == "db" and prof.tasks_from == "db"
        assert set(prof.files) == set(_dbs(g))
        text = {p for p in g.files if p.suffix in (".csv", ".json") and not p.name.startswith("profiler_info")}
        assert {p for p, _ in prof.ignored} == text
        assert all("db export" in why for _, why in prof.ignored)
        read_text = open_profile(g.root, source="text", cache=FrameCache(enabled=False))
        assert [p for p, _ in read_text.ignored] == _dbs(g)


def _planted_found(g: gen.Generated, two_cards: bool) -> None:
    from npuscope.analysis import diagnose

    prof = _open(g.root, "auto")
    assert prof.source_kind == "db" and prof.ignored == ()
    diag = diagnose(prof)
    warnings = [f for f in diag.findings if f.severity in ("warning", "critical")]
    got = {(f.rule, f.op_types[0], f.card): f.count for f in warnings}
    if g.layout == "era_b":
        # No step table in msprof's db: the gap before each step's first op (GatherV2) is
        # the host's, as in a text export without step_trace (see the report tests).
        got = {k: v for k, v in got.items() if k[:2] != ("host_op_wait", "GatherV2")}
    assert got == {(p.rule, p.op_type, p.card): p.count for p in g.planted}
    assert {p.card for p in g.planted} == ({"0", "1"} if two_cards else {"0"})
    recompile = next(f for f in warnings if f.rule == "recompilation")
    assert recompile.confidence == "evidence"  # the host APIs are in the db
    for f in warnings:
        for ev in f.evidence:
            row = diag.tasks.row(ev["row"], named=True)
            assert (row["op_type"], row["card"]) == (f.op_types[0], f.card)


@pytest.mark.parametrize(
    "layout, cards",
    [
        ("torch_npu", 2),
        ("era_b", 1),
        pytest.param("era_b", 2),
    ],
)
def test_db_only_run_reports_the_planted_problems(tmp_path, layout, cards):
    g = gen.generate(tmp_path, layout=layout, db="only", **{**RUN, "cards": cards})
    _planted_found(g, cards == 2)


def test_report_command_reads_the_db_and_the_text_alike(runs):
    """`npuscope report --format json`, once per export of the torch_npu run."""
    root = runs["torch_npu"].root
    out = {}
    for source in ("text", "db"):
        res = subprocess.run(
            [
                sys.executable,
                "-m",
                "npuscope",
                "report",
                str(root),
                "--format",
                "json",
                "--no-cache",
                "--source",
                source,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert res.returncode == 0, res.stderr
        out[source] = json.loads(res.stdout)
    assert out["db"]["source"]["export"] == "db" and out["text"]["source"]["export"] == "text"
    assert _findings(out["db"]) == _findings(out["text"])
    assert [c["summary"] for c in out["db"]["cards"]] == [c["summary"] for c in out["text"]["cards"]]
