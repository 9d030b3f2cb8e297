"""The training-level views (parsers/training.py): steps, communication, host API, memory.

Truth comes from the files themselves, read here with the csv / json / sqlite3 modules and
plain Python interval arithmetic, never from npuscope: on every real sample that carries a
view, on generated runs (text, db, and both), and on hostile files, which give notes (or a
one-line ProfileError with strict=True), never another exception.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import shutil
import sqlite3
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from npuscope.fixtures.generate import generate
from npuscope.parsers import FrameCache, ProfileError, open_profile
from npuscope.parsers.steps import derive_steps, step_windows
from npuscope.parsers.training import SCHEMAS, VIEWS, TrainingViews, read_training_views

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "samples" / "real"
GPT3 = REAL / "torch_npu_2023_gpt3_2rank"
CNN = REAL / "torch_npu_2024_cnn"
DB2025 = REAL / "torch_npu_2025_db"
MSPROF_DB = REAL / "msprof_db_2023"
TEXT_SAMPLES = (GPT3, CNN / "level0", CNN / "level1")
DB_SAMPLES = (DB2025 / "level0", DB2025 / "level1")
LEVELS = {"acl": "AscendCL", "node": "Node", "runtime": "Runtime", "model": "Model", "hccl": "Hccl", "op": "Op"}
TOTAL = "Total Op Info"
SDMA_LINKS = {"HCCS", "PCIE", "SIO"}


def _open(path: Path, **kw) -> object:
    return open_profile(path, cache=FrameCache(enabled=False), **kw)


def _views(path: Path, **kw) -> TrainingViews:
    return read_training_views(_open(path, **kw))


def _ranks(root: Path) -> list[tuple[str, Path]]:
    """(rank, ASCEND_PROFILER_OUTPUT) of every torch_npu rank folder below `root`."""
    out = []
    for info in sorted(root.rglob("profiler_info_*.json")):
        out.append((info.stem.rsplit("_", 1)[1], info.parent / "ASCEND_PROFILER_OUTPUT"))
    return out


def _rows(frame: pl.DataFrame, card: str) -> list[dict]:
    return frame.filter(pl.col("card") == card).to_dicts()


def _close(a: float | None, b: float | None, tol: float = 1e-6) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=tol)


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)


def _op_type(name: str) -> str:
    return re.match(r"hcom_([A-Za-z]+)", name).group(1)


# --------------------------------------------------------------------------- interval truth


def _union(intervals: list[tuple[int, int]]) -> int:
    total, cur = 0, None
    for s, e in sorted(intervals):
        if cur is None or s > cur[1]:
            if cur is not None:
                total += cur[1] - cur[0]
            cur = [s, e]
        else:
            cur[1] = max(cur[1], e)
    return total + (cur[1] - cur[0] if cur else 0)


def _step_truth(tasks: list[tuple[int, int, bool]], lo: int, hi: int) -> dict[str, float]:
    """Step figures (us) of tasks (start, end, is_comm) clipped to [lo, hi]."""
    clipped = [(max(s, lo), min(e, hi), c) for s, e, c in tasks if s >= lo and s < hi or (s == lo == hi)]
    clipped = [(s, e, c) for s, e, c in clipped if e >= s]
    comp = _union([(s, e) for s, e, c in clipped if not c])
    comm = _union([(s, e) for s, e, c in clipped if c])
    both = _union([(s, e) for s, e, _ in clipped])
    return {
        "step_us": (hi - lo) / 1000,
        "compute_us": comp / 1000,
        "communication_us": comm / 1000,
        "comm_not_overlapped_us": (both - comp) / 1000,
        "overlapped_us": (comm - (both - comp)) / 1000,
        "free_us": (hi - lo - both) / 1000,
    }


def _ns(text: str) -> int:
    return int(Decimal(text.strip().strip('\t"')) * 1000)


# --------------------------------------------------------------------------- steps: real files


def _step_trace_time_truth(out: Path) -> list[dict]:
    rows = []
    for r in _csv_rows(out / "step_trace_time.csv"):
        f = {k: float(v) for k, v in r.items() if k != "Step" and v != ""}
        rows.append(
            {
                "step": int(r["Step"]),
                "compute_us": f["Computing"],
                "comm_not_overlapped_us": f["Communication(Not Overlapped)"],
                "overlapped_us": f["Overlapped"],
                "communication_us": f["Communication"],
                "free_us": f["Free"],
                "stage_us": f["Stage"],
                "bubble_us": f["Bubble"],
                "step_us": f["Computing"] + f["Communication(Not Overlapped)"] + f["Free"],
            }
        )
    return rows


@pytest.mark.parametrize("root", TEXT_SAMPLES, ids=lambda p: p.relative_to(REAL).as_posix())
def test_steps_equal_step_trace_time_csv(root):
    views = _views(root)
    assert "steps: step_trace_time.csv" in views.found
    for rank, out in _ranks(root):
        got = _rows(views.steps, rank)
        want = _step_trace_time_truth(out)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g["source"] == "step_trace_time.csv"
            for key, value in w.items():
                assert _close(g[key], value), (rank, key, g[key], value)


@pytest.mark.parametrize("root", DB_SAMPLES, ids=lambda p: p.relative_to(REAL).as_posix())
def test_steps_equal_analysis_db(root):
    views = _views(root)
    assert "steps: analysis.db StepTraceTime" in views.found
    for rank, out in _ranks(root):
        with _ro(out / "analysis.db") as con:
            rows = con.execute(
                "SELECT step, computing, communication_not_overlapped, overlapped, communication, free, stage, bubble "
                "FROM StepTraceTime"
            ).fetchall()
        got = _rows(views.steps, rank)
        assert len(got) == len(rows)
        for g, (step, comp, notov, ov, comm, free, stage, bubble) in zip(got, rows):
            assert g["step"] == int(str(step).removeprefix("step"))
            # StepTraceTime is in microseconds, like step_trace_time.csv.
            for key, value in (
                ("compute_us", comp),
                ("comm_not_overlapped_us", notov),
                ("overlapped_us", ov),
                ("communication_us", comm),
                ("free_us", free),
                ("stage_us", stage),
                ("bubble_us", bubble),
                ("step_us", comp + notov + free),
            ):
                assert _close(g[key], value), (rank, key)


def _kernel_tasks(out: Path) -> dict[str, list[tuple[int, int, bool]]]:
    """Step Id -> [(start ns, end ns, is collective)] of a kernel_details.csv."""
    steps: dict[str, list[tuple[int, int, bool]]] = defaultdict(list)
    for r in _csv_rows(out / "kernel_details.csv"):
        if None in r.values():  # a hand-edited short row: the parser skips it too
            continue
        start = _ns(r["Start Time(us)"])
        end = start + round(float(r["Duration(us)"]) * 1000)
        comm = r["Accelerator Core"] in ("HCCL", "COMMUNICATION") or r["Name"].startswith("hcom_")
        steps[r["Step Id"]].append((start, end, comm))
    return steps


def _copy_rank_files(root: Path, dest: Path, keep: tuple[str, ...]) -> Path:
    """A copy of a torch_npu capture with only `keep` in each ASCEND_PROFILER_OUTPUT."""
    for rank, out in _ranks(root):
        rank_dir = dest / f"rank{rank}_ascend_pt"
        (rank_dir / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
        shutil.copy(out.parent / f"profiler_info_{rank}.json", rank_dir)
        for name in keep:
            if (out / name).exists():
                shutil.copy(out / name, rank_dir / "ASCEND_PROFILER_OUTPUT" / name)
    return dest


def test_steps_from_overlap_analysis_equal_step_trace_time(tmp_path):
    """Without step_trace_time.csv the timeline's Overlap Analysis gives the same numbers."""
    copy = _copy_rank_files(CNN / "level1", tmp_path / "cnn", ("kernel_details.csv", "trace_view.json"))
    views = _views(copy)
    assert any(f.startswith("steps: timeline Overlap Analysis") for f in views.found)
    for rank, out in _ranks(CNN / "level1"):
        (got,) = _rows(views.steps, rank)
        (want,) = _step_trace_time_truth(out)
        for key in ("compute_us", "comm_not_overlapped_us", "communication_us", "free_us", "step_us"):
            assert abs(got[key] - want[key]) < 0.01, (rank, key, got[key], want[key])


@pytest.mark.parametrize("level", ["level0", "level1"])
def test_steps_derived_from_real_tasks(tmp_path, level):
    """With only kernel_details.csv the steps are derived from the tasks: equal to a plain
    Python union of the intervals, and to torch_npu's own step_trace_time.csv within 0.05 us."""
    copy = _copy_rank_files(CNN / level, tmp_path / "cnn", ("kernel_details.csv",))
    views = _views(copy)
    assert "steps: tasks, steps by Step Id" in views.found
    assert any("steps derived from the tasks" in n for n in views.notes)
    for rank, out in _ranks(CNN / level):
        (got,) = _rows(views.steps, rank)
        tasks = _kernel_tasks(out)["50"]
        lo, hi = min(s for s, _, _ in tasks), max(e for _, e, _ in tasks)
        truth = _step_truth(tasks, lo, hi)
        for key, value in truth.items():
            assert _close(got[key], value, 1e-6), (key, got[key], value)
        (torch,) = _step_trace_time_truth(out)
        for key in ("compute_us", "communication_us", "comm_not_overlapped_us", "free_us", "step_us"):
            assert abs(got[key] - torch[key]) < 0.05, (key, got[key], torch[key])


def test_steps_derived_on_real_db_equal_its_analysis_db(tmp_path):
    """The db's tasks (Step Id from STEP_TIME) give what analysis.db says, to the microsecond."""
    for rank, out in _ranks(DB2025 / "level1"):
        dest = tmp_path / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        dest.mkdir(parents=True)
        shutil.copy(out / f"ascend_pytorch_profiler_{rank}.db", dest)
        shutil.copy(out.parent / f"profiler_info_{rank}.json", dest.parent)
    views = _views(tmp_path)
    assert "steps: tasks, steps by Step Id" in views.found
    truth = _views(DB2025 / "level1").steps
    assert_frame_equal(
        views.steps.drop("source", "stage_us", "bubble_us"),
        truth.drop("source", "stage_us", "bubble_us"),
        check_exact=False,
        abs_tol=0.002,
    )


# --------------------------------------------------------------------------- communication: real files


def _communication_truth(path: Path) -> dict[str, dict[str, float]]:
    """Per op type: count, elapse / transit / wait / sync (us) and data size (MB)."""
    data = json.loads(path.read_text())
    out: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for step in data.values():
        for kind in ("p2p", "collective"):
            for key, op in step.get(kind, {}).items():
                if key == TOTAL:
                    continue
                t = out[_op_type(key.split("@")[0])]
                info = op["Communication Time Info"]
                t["count"] += 1
                t["total_us"] += info["Elapse Time(ms)"] * 1000
                t["transit_us"] += info["Transit Time(ms)"] * 1000
                t["wait_us"] += info["Wait Time(ms)"] * 1000
                t["sync_us"] += info["Synchronization Time(ms)"] * 1000
                bw = op["Communication Bandwidth Info"]
                for name, v in bw.items():
                    if name == "LOCAL" or ("SDMA" in bw and name in SDMA_LINKS):
                        continue
                    t["size_mb"] += v["Transit Size(MB)"]
    return out


def _per_type(frame: pl.DataFrame, card: str) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for r in _rows(frame, card):
        t = out[r["op_type"]]
        t["count"] += r["count"]
        for k in ("total_us", "transit_us", "wait_us", "sync_us", "size_mb"):
            t[k] += r[k] or 0.0
    return out


@pytest.mark.parametrize("root", (GPT3, CNN / "level1"), ids=lambda p: p.relative_to(REAL).as_posix())
def test_communication_equals_communication_json(root):
    views = _views(root)
    assert "communication: communication.json" in views.found
    for rank, out in _ranks(root):
        truth = _communication_truth(out / "communication.json")
        got = _per_type(views.communication, rank)
        assert set(got) == set(truth)
        for op_type, want in truth.items():
            for key, value in want.items():
                assert _close(got[op_type][key], value, 1e-6), (rank, op_type, key)


def _bandwidth_truth(path: Path) -> dict[str, tuple[float, float]]:
    data = json.loads(path.read_text())
    out: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for step in data.values():
        for kind in ("p2p", "collective"):
            for key, op in step.get(kind, {}).items():
                if key == TOTAL:
                    continue
                for name, v in op["Communication Bandwidth Info"].items():
                    out[name][0] += v["Transit Size(MB)"]
                    out[name][1] += v["Transit Time(ms)"] * 1000
    return {k: (s, t) for k, (s, t) in out.items() if s > 0 or t > 0}


@pytest.mark.parametrize("root", (GPT3, CNN / "level1"), ids=lambda p: p.relative_to(REAL).as_posix())
def test_bandwidth_equals_communication_json(root):
    views = _views(root)
    for rank, out in _ranks(root):
        truth = _bandwidth_truth(out / "communication.json")
        got = {r["transport"]: r for r in _rows(views.bandwidth, rank)}
        assert set(got) == set(truth)
        for name, (size, time_us) in truth.items():
            assert _close(got[name]["size_mb"], size)
            assert _close(got[name]["time_us"], time_us)
            assert _close(got[name]["bandwidth_gbps"], size / (time_us / 1000))


def _links_truth(path: Path) -> dict[tuple, tuple[float, float]]:
    """(group, src, dst, transport) -> (MB, us), summed over the ops of the matrix; where a
    group has `<type>-total` entries, only those."""
    data = json.loads(path.read_text())
    entries: dict[str, list[tuple[str, dict]]] = defaultdict(list)
    for step in data.values():
        for kind in ("p2p", "collective"):
            for key, links in step.get(kind, {}).items():
                if key == TOTAL:
                    continue
                name, _, group = key.partition("@")
                entries[group].append((name, links))
    out: dict[tuple, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for group, items in entries.items():
        totals = [links for name, links in items if name.endswith("-total")]
        for links in totals or [links for _, links in items]:
            for link, v in links.items():
                src, dst = (int(x) for x in link.split("-"))
                cell = out[(group, src, dst, v["Transport Type"])]
                cell[0] += v["Transit Size(MB)"]
                cell[1] += v["Transit Time(ms)"] * 1000
    return {k: (s, t) for k, (s, t) in out.items()}


@pytest.mark.parametrize("root", (GPT3, CNN / "level1"), ids=lambda p: p.relative_to(REAL).as_posix())
def test_links_equal_communication_matrix_json(root):
    views = _views(root)
    assert "links: communication_matrix.json" in views.found
    for rank, out in _ranks(root):
        truth = _links_truth(out / "communication_matrix.json")
        got = {(r["group"], r["src"], r["dst"], r["transport"]): r for r in _rows(views.links, rank)}
        assert set(got) == set(truth)
        for key, (size, time_us) in truth.items():
            assert _close(got[key]["size_mb"], size)
            assert _close(got[key]["time_us"], time_us)
            want = size / (time_us / 1000) if time_us > 0 else None
            assert _close(got[key]["bandwidth_gbps"], want)


def test_link_bandwidth_of_a_single_op_is_the_files_own():
    """Where a link carries one op, its bandwidth is the file's Bandwidth(GB/s) (4 decimals)."""
    views = _views(CNN / "level1")
    data = json.loads((CNN / "level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/communication_matrix.json").read_text())
    total = data["step50"]["collective"]["allreduce-total@14972622761537322538"]
    for link, v in total.items():
        src, dst = (int(x) for x in link.split("-"))
        (row,) = views.links.filter(
            (pl.col("card") == "0") & (pl.col("src") == src) & (pl.col("dst") == dst)
        ).to_dicts()
        assert abs(row["bandwidth_gbps"] - v["Bandwidth(GB/s)"]) < 1e-3


@pytest.mark.parametrize("level", ["level1"])
def test_communication_equals_analysis_db_and_db_tasks(level):
    """analysis.db CommAnalyzer* (ms, MB) read as they are; and the db's own
    COMMUNICATION_OP + COMMUNICATION_TASK_INFO give the same elapse, sizes, bandwidth and links."""
    root = DB2025 / level
    views = _views(root)
    assert "communication: analysis.db CommAnalyzerTime" in views.found
    for rank, out in _ranks(root):
        with _ro(out / "analysis.db") as con:
            rows = con.execute(
                "SELECT hccl_op_name, elapse_time, transit_time, wait_time, synchronization_time FROM CommAnalyzerTime"
            ).fetchall()
        got = {r["op_name"]: r for r in _rows(views.communication, rank)}
        assert set(got) == {r[0] for r in rows}
        for name, elapse, transit, wait, sync in rows:
            g = got[name]
            assert g["op_type"] == _op_type(name) and g["count"] == 1
            for key, ms in (("total_us", elapse), ("transit_us", transit), ("wait_us", wait), ("sync_us", sync)):
                assert _close(g[key], ms * 1000), (name, key)
    # The same capture's db without analysis.db: the tasks' sizes give the same bandwidth and links.
    from npuscope.parsers.communication import bandwidth_view, communication_view, links_view, read_db_communication

    for rank, out in _ranks(root):
        ops, bws, matrix = read_db_communication(out / f"ascend_pytorch_profiler_{rank}.db", rank)
        comm = communication_view(ops, bws, "db")
        mine = views.communication.filter(pl.col("card") == rank).sort("op_name")
        assert_frame_equal(
            comm.sort("op_name").select("op_name", "count", "total_us", "size_mb", "bandwidth_gbps"),
            mine.select("op_name", "count", "total_us", "size_mb", "bandwidth_gbps"),
            check_exact=False,
            abs_tol=2e-3,
        )
        for derived, view in ((bandwidth_view(bws, "db"), views.bandwidth), (links_view(matrix, "db"), views.links)):
            keys = [c for c in ("src", "dst", "transport") if c in derived.columns]
            assert_frame_equal(
                derived.sort(keys).select(*keys, "size_mb", "time_us"),
                view.filter(pl.col("card") == rank).sort(keys).select(*keys, "size_mb", "time_us"),
                check_exact=False,
                abs_tol=2e-2,
            )


# --------------------------------------------------------------------------- host API


@pytest.mark.parametrize("root", (*DB_SAMPLES, MSPROF_DB), ids=lambda p: p.relative_to(REAL).as_posix())
def test_host_api_equals_cann_api(root):
    views = _views(root)
    assert "host_api: CANN_API" in views.found
    dbs = sorted(root.rglob("*.db"))
    truth: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for path in dbs:
        if path.name == "analysis.db":
            continue
        with _ro(path) as con:
            types = dict(con.execute("SELECT id, name FROM ENUM_API_TYPE").fetchall())
            rows = con.execute(
                "SELECT s.value, c.type, c.endNs - c.startNs FROM CANN_API c JOIN STRING_IDS s ON s.id = c.name"
            ).fetchall()
        rank = re.search(r"_(\d+)\.db$", path.name).group(1) if "pytorch" in path.name else None
        for name, kind, dur in rows:
            level = LEVELS.get(types[kind], types[kind])
            cell = truth[(rank or "", level, name)] if rank else truth[("", level, name)]
            cell[0] += 1
            cell[1] += dur / 1000
            cell[2] = max(cell[2], dur / 1000)
    got: dict[tuple, dict] = {}
    for r in views.host_api.to_dicts():
        key = (r["card"] if any("pytorch" in p.name for p in dbs) else "", r["level"], r["api"])
        got[key] = r
    assert set(got) == set(truth)
    for key, (count, total, longest) in truth.items():
        assert got[key]["count"] == count
        assert _close(got[key]["total_us"], total, 1e-3)
        assert _close(got[key]["max_us"], longest, 1e-3)
        assert _close(got[key]["avg_us"], total / count, 1e-3)


def test_host_api_from_the_timeline(tmp_path):
    """A text capture without api_statistic: the CANN process' `Level@api` events, counted here."""
    views = _views(CNN / "level1")
    assert "host_api: timeline" in views.found
    for rank, out in _ranks(CNN / "level1"):
        events = json.loads((out / "trace_view.json").read_text())
        names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
        truth: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
        for e in events:
            if e.get("ph") == "X" and names.get(e.get("pid")) == "CANN" and "@" in e["name"]:
                level, api = e["name"].split("@", 1)
                truth[(level, api)][0] += 1
                truth[(level, api)][1] += float(e["dur"])
        got = {(r["level"], r["api"]): r for r in _rows(views.host_api, rank)}
        assert set(got) == set(truth)
        for key, (count, total) in truth.items():
            assert got[key]["count"] == count and abs(got[key]["total_us"] - total) < 1e-3 * count


def test_api_statistic_csv_wins_and_levels_are_the_timelines(tmp_path):
    copy = _copy_rank_files(CNN / "level1", tmp_path / "cnn", ("kernel_details.csv", "trace_view.json"))
    out = copy / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    (out / "api_statistic.csv").write_text(
        "Device_id,Level,API Name,Time(us),Count,Avg(us),Min(us),Max(us),Variance\n"
        "host,acl,aclopCompileAndExecute,300.5,3,100.1666,90,120.5,1.0\n"
        "host,node,launch,20,10,2,1,4,0.1\n"
    )
    views = _views(copy)
    rows = {(r["level"], r["api"]): r for r in _rows(views.host_api, "0")}
    assert set(rows) == {("AscendCL", "aclopCompileAndExecute"), ("Node", "launch")}
    assert rows[("AscendCL", "aclopCompileAndExecute")]["count"] == 3
    assert rows[("AscendCL", "aclopCompileAndExecute")]["max_us"] == 120.5
    assert {r["source"] for r in _rows(views.host_api, "0")} == {"api_statistic.csv"}
    assert {r["source"] for r in _rows(views.host_api, "1")} == {"timeline"}  # rank 1 has no file


# --------------------------------------------------------------------------- memory


def _memory_truth(path: Path) -> dict[str, float | str | None]:
    by: dict[str, dict[str, list[float]]] = defaultdict(lambda: {"a": [], "r": []})
    for r in _csv_rows(path):
        c = by[r["Component"]]
        if r["Total Allocated(MB)"]:
            c["a"].append(float(r["Total Allocated(MB)"]))
        if r["Total Reserved(MB)"]:
            c["r"].append(float(r["Total Reserved(MB)"]))
    name = next(n for n in ("PTA+GE", "PTA", "GE") if by.get(n, {}).get("a"))
    return {
        "component": name,
        "peak_allocated_mb": max(by[name]["a"]),
        "peak_reserved_mb": max(by[name]["r"]),
        "app_reserved_mb": max(by["APP"]["r"]) if "APP" in by else None,
    }


@pytest.mark.parametrize("root", TEXT_SAMPLES, ids=lambda p: p.relative_to(REAL).as_posix())
def test_memory_peaks_equal_memory_record_csv(root):
    views = _views(root)
    assert "memory: memory_record.csv" in views.found
    for rank, out in _ranks(root):
        (got,) = _rows(views.memory, rank)
        for key, value in _memory_truth(out / "memory_record.csv").items():
            assert got[key] == value if isinstance(value, str) else _close(got[key], value), (rank, key)
        assert got["capacity_mb"] is None


def test_memory_curve_and_top_ops_from_csv():
    views = _views(CNN / "level1")
    for rank, out in _ranks(CNN / "level1"):
        rows = [r for r in _csv_rows(out / "memory_record.csv") if r["Component"] == "PTA+GE"]
        curve = _rows(views.memory_curve, rank)
        assert len(curve) == len(rows)
        assert [c["ts_ns"] for c in curve] == sorted(_ns(r["Timestamp(us)"]) for r in rows)
        allocs: dict[str, list[float]] = defaultdict(list)
        for r in _csv_rows(out / "operator_memory.csv"):
            allocs[r["Name"]].append(float(r["Size(KB)"]) / 1024)
        top = {r["op_name"]: r for r in _rows(views.memory_top_ops, rank)}
        assert set(top) == set(allocs)
        for name, sizes in allocs.items():
            assert _close(top[name]["size_mb"], max(sizes)) and top[name]["count"] == len(sizes)
            assert _close(top[name]["total_mb"], sum(sizes))


def test_memory_curve_left_out_where_a_spreadsheet_mangled_the_times():
    """GPT-3 rank 1's memory_record was re-saved by a spreadsheet (1.69512E+15): peaks, no curve."""
    views = _views(GPT3)
    assert views.memory_curve.filter(pl.col("card") == "1").height == 0
    assert views.memory_curve.filter(pl.col("card") == "0").height == 3
    assert any("no memory curve for card 1" in n for n in views.notes)


@pytest.mark.parametrize("root", DB_SAMPLES, ids=lambda p: p.relative_to(REAL).as_posix())
def test_memory_equals_memory_record_table(root):
    views = _views(root)
    assert "memory: MEMORY_RECORD" in views.found and "memory_top_ops: OP_MEMORY" in views.found
    for rank, out in _ranks(root):
        with _ro(out / f"ascend_pytorch_profiler_{rank}.db") as con:
            rows = con.execute(
                "SELECT s.value, m.totalAllocated, m.totalReserved FROM MEMORY_RECORD m "
                "JOIN STRING_IDS s ON s.id = m.component"
            ).fetchall()
            app = con.execute(
                "SELECT max(n.totalReserved) FROM NPU_MODULE_MEM n JOIN ENUM_MODULE e ON e.id = n.moduleId "
                "WHERE e.name = 'APP'"
            ).fetchone()[0]
            ops = con.execute("SELECT s.value, o.size FROM OP_MEMORY o JOIN STRING_IDS s ON s.id = o.name").fetchall()
        mib = 1 << 20  # the db keeps bytes; torch_npu's MB are bytes / 1024 / 1024
        chosen = [r for r in rows if r[0] == "PTA+GE"]
        (got,) = _rows(views.memory, rank)
        assert got["component"] == "PTA+GE"
        assert _close(got["peak_allocated_mb"], max(r[1] for r in chosen) / mib)
        assert _close(got["peak_reserved_mb"], max(r[2] for r in chosen) / mib)
        assert _close(got["app_reserved_mb"], app / mib)
        assert len(_rows(views.memory_curve, rank)) == len(chosen)
        biggest: dict[str, int] = defaultdict(int)
        for name, size in ops:
            biggest[name] = max(biggest[name], size)
        top = {r["op_name"]: r["size_mb"] for r in _rows(views.memory_top_ops, rank)}
        assert top == pytest.approx({k: v / mib for k, v in biggest.items()})


# --------------------------------------------------------------------------- what is there, what is not


def test_missing_views_are_empty_frames_with_their_schema():
    views = _views(GPT3)  # no timeline, no api_statistic, no db
    assert views.host_api.height == 0 and views.host_api.schema == pl.Schema(SCHEMAS["host_api"])
    assert not any(f.startswith("host_api:") for f in views.found)
    for view in VIEWS:
        assert getattr(views, view).schema == pl.Schema(SCHEMAS[view]), view


def test_a_db_profile_writes_nothing_beside_its_files(tmp_path):
    copy = tmp_path / "db"
    shutil.copytree(DB2025 / "level1", copy)

    def listing() -> dict[str, tuple[int, int]]:
        return {str(p.relative_to(copy)): (p.stat().st_size, p.stat().st_mtime_ns) for p in copy.rglob("*")}

    before = listing()
    views = _views(copy)
    assert views.steps.height and views.memory.height
    assert listing() == before


def test_profile_read_as_text_or_db_when_both_exist(tmp_path):
    """generate(db=True): the text and the db reading of one run give the same views."""
    g = generate(tmp_path, layout="torch_npu", cards=2, steps=3, ops_per_step=80, db=True)
    text = _views(g.root, source="text")
    db = _views(g.root, source="db")
    for view in VIEWS:
        a, b = getattr(text, view), getattr(db, view)
        assert a.height == b.height, view
        if a.height:
            assert_frame_equal(a.drop("source"), b.drop("source"), check_exact=False, abs_tol=1e-6)


# --------------------------------------------------------------------------- generated runs


def _generated_truth_torch(root: Path) -> dict[tuple[str, int], dict[str, float]]:
    out = {}
    for rank, folder in _ranks(root):
        for step, tasks in _kernel_tasks(folder).items():
            lo, hi = min(s for s, _, _ in tasks), max(e for _, e, _ in tasks)
            out[(rank, int(step))] = _step_truth(tasks, lo, hi)
    return out


def _generated_truth_era_b(root: Path) -> dict[tuple[str, int], dict[str, float]]:
    out_dir = next(root.rglob("mindstudio_profiler_output"))
    tasks: dict[str, list[tuple[int, int, bool]]] = defaultdict(list)
    for r in _csv_rows(next(out_dir.glob("op_summary_*.csv"))):
        start = _ns(r["Task Start Time(us)"])
        tasks[r["Device_id"]].append(
            (start, start + round(float(r["Task Duration(us)"]) * 1000), r["Task Type"] == "COMMUNICATION")
        )
    out = {}
    for r in _csv_rows(next(out_dir.glob("step_trace_*.csv"))):
        lo, hi = _ns(r["FP Start(us)"]), _ns(r["Iteration End(us)"])
        out[(r["Device_id"], int(r["Iteration ID"]))] = _step_truth(tasks[r["Device_id"]], lo, hi)
    return out


@pytest.mark.parametrize("layout", ["torch_npu", "era_b"])
def test_derived_steps_on_a_generated_run(tmp_path, layout):
    g = generate(tmp_path, layout=layout, cards=2, steps=3, ops_per_step=80, timeline=False)
    views = _views(g.root)
    truth = _generated_truth_torch(g.root) if layout == "torch_npu" else _generated_truth_era_b(g.root)
    got = {(r["card"], r["step"]): r for r in views.steps.to_dicts()}
    assert set(got) == set(truth)
    for key, want in truth.items():
        assert got[key]["source"].startswith("tasks, steps by")
        for col, value in want.items():
            assert _close(got[key][col], value, 1e-6), (key, col, got[key][col], value)


@pytest.mark.parametrize("layout", ["torch_npu", "era_b"])
def test_text_and_db_exports_of_one_generated_run(tmp_path, layout):
    """The same run written as text only and as db only: equal views where both carry them."""
    kw = dict(layout=layout, cards=2, steps=3, ops_per_step=80, seed=3)
    text = _views(generate(tmp_path / "text", **kw).root)
    db = _views(generate(tmp_path / "db", db="only", **kw).root)
    key = ["card", "op_name"]
    assert_frame_equal(
        text.communication.sort(key).select(*key, "op_type", "count", "total_us"),
        db.communication.sort(key).select(*key, "op_type", "count", "total_us"),
        check_exact=False,
        abs_tol=1e-6,
    )
    assert text.communication["source"].unique().to_list() == ["tasks"]
    assert db.communication["source"].unique().to_list() == ["COMMUNICATION_OP"]
    assert db.bandwidth.height and db.links.height  # only the db records sizes
    key = ["card", "level", "api"]
    assert_frame_equal(
        text.host_api.sort(key).drop("source"), db.host_api.sort(key).drop("source"), check_exact=False, abs_tol=1e-6
    )
    if layout == "torch_npu":  # both carry steps: Step Id in kernel_details, STEP_TIME in the db
        assert_frame_equal(text.steps.drop("source"), db.steps.drop("source"), check_exact=False, abs_tol=1e-6)
    else:  # msprof's db has no step table: one row per card, the steps' sums
        sums = text.steps.group_by("card").agg(pl.col("compute_us", "communication_us").sum()).sort("card")
        assert db.steps["step"].null_count() == db.steps.height
        assert_frame_equal(
            sums, db.steps.sort("card").select("card", "compute_us", "communication_us"), check_exact=False
        )


# --------------------------------------------------------------------------- interval arithmetic


TASK = st.tuples(
    st.integers(0, 3),  # step
    st.integers(0, 5_000),  # start (ns, relative)
    st.integers(0, 2_000),  # duration (ns)
    st.booleans(),  # collective
)


@settings(max_examples=40, deadline=None)
@given(tasks=st.lists(TASK, min_size=1, max_size=30))
def test_derived_steps_match_plain_interval_arithmetic(tasks):
    base = 1_700_000_000_000_000_000
    frame = pl.DataFrame(
        {
            "card": ["0"] * len(tasks),
            "step_id": [str(s) for s, _, _, _ in tasks],
            "op_name": ["hcom_allReduce__1" if c else "MatMul" for _, _, _, c in tasks],
            "task_type": ["COMMUNICATION" if c else "AI_CORE" for _, _, _, c in tasks],
            "start_ns": [base + t for _, t, _, _ in tasks],
            "duration_us": [d / 1000 for _, _, d, _ in tasks],
        }
    )
    windows = step_windows(frame, None, None, ["0"], "step_trace")
    got = {r["step"]: r for r in derive_steps(frame, windows, ["0"]).to_dicts()}
    by_step: dict[int, list[tuple[int, int, bool]]] = defaultdict(list)
    for s, t, d, c in tasks:
        by_step[s].append((base + t, base + t + d, c))
    assert set(got) == set(by_step)
    for step, items in by_step.items():
        lo, hi = min(s for s, _, _ in items), max(e for _, e, _ in items)
        comp = _union([(s, e) for s, e, c in items if not c])
        comm = _union([(s, e) for s, e, c in items if c])
        both = _union([(s, e) for s, e, _ in items])
        g = got[step]
        assert math.isclose(g["compute_us"], comp / 1000, abs_tol=1e-9)
        assert math.isclose(g["communication_us"], comm / 1000, abs_tol=1e-9)
        assert math.isclose(g["comm_not_overlapped_us"], (both - comp) / 1000, abs_tol=1e-9)
        assert math.isclose(g["overlapped_us"], (comm - both + comp) / 1000, abs_tol=1e-9)
        assert math.isclose(g["free_us"], (hi - lo - both) / 1000, abs_tol=1e-9)
        assert math.isclose(g["step_us"], g["compute_us"] + g["comm_not_overlapped_us"] + g["free_us"], abs_tol=1e-6)


# --------------------------------------------------------------------------- hostile files


@pytest.fixture(scope="module")
def hostile_capture(tmp_path_factory):
    """GPT-3 rank 1 (small), opened once; the tests rewrite its training-level files."""
    root = tmp_path_factory.mktemp("hostile") / "capture"
    shutil.copytree(GPT3 / "test_rank_1", root / "test_rank_1")
    return root, _open(root)


JSON_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
)
JSON = st.recursive(
    JSON_LEAF,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=10,
)


def _mostly(valid: st.SearchStrategy) -> st.SearchStrategy:
    """`valid` nine times in ten, any JSON value otherwise."""
    return st.integers(0, 9).flatmap(lambda i: valid if i else JSON)


NUMBERISH = _mostly(st.one_of(st.floats(min_value=0, max_value=1e6), st.integers(0, 10**6)))


TIME_INFO = st.fixed_dictionaries(
    {"Elapse Time(ms)": NUMBERISH},
    optional={"Transit Time(ms)": NUMBERISH, "Wait Time(ms)": NUMBERISH, "Synchronization Time(ms)": NUMBERISH},
)
TRANSPORT = st.fixed_dictionaries({"Transit Size(MB)": NUMBERISH, "Transit Time(ms)": NUMBERISH})
OP = st.fixed_dictionaries(
    {"Communication Time Info": _mostly(TIME_INFO)},
    optional={
        "Communication Bandwidth Info": _mostly(
            st.dictionaries(st.sampled_from(["HCCS", "SDMA", "RDMA", "PCIE", "LOCAL", ""]), _mostly(TRANSPORT))
        ),
    },
)
LINK = st.fixed_dictionaries(
    {
        "Transport Type": _mostly(st.sampled_from(["HCCS", "LOCAL", "RDMA", " "])),
        "Transit Size(MB)": NUMBERISH,
        "Transit Time(ms)": NUMBERISH,
    },
)
OP_KEY = st.one_of(
    st.sampled_from(
        ["hcom_allReduce__1_0@123", "hcom_send__2@9", "allreduce-total@123", "allreduce-top1@123", TOTAL, "@", ""]
    ),
    st.text(max_size=8),
)
LINK_KEY = st.one_of(
    st.sampled_from(["0-1", "1-0", "0-0", "3-7", "a-b", "-", "01", "99999999999999-1"]), st.text(max_size=6)
)


def _document(ops: st.SearchStrategy) -> st.SearchStrategy:
    kinds = st.fixed_dictionaries({"collective": _mostly(ops)}, optional={"p2p": _mostly(ops)})
    return _mostly(
        st.dictionaries(st.sampled_from(["step1", "step2", "", "x"]), _mostly(kinds), min_size=1, max_size=3)
    )


COMMUNICATION_DOC = _document(st.dictionaries(OP_KEY, _mostly(OP), min_size=1, max_size=3))
MATRIX_DOC = _document(
    st.dictionaries(
        OP_KEY, _mostly(st.dictionaries(LINK_KEY, _mostly(LINK), min_size=1, max_size=3)), min_size=1, max_size=3
    )
)

FUZZED = ("communication.json", "communication_matrix.json", "step_trace_time.csv")


def _only(root: Path, name: str) -> Path:
    """The path of one fuzzed file, the other fuzzed files removed (the capture is shared)."""
    out = root / "test_rank_1" / "ASCEND_PROFILER_OUTPUT"
    for other in FUZZED:
        (out / other).unlink(missing_ok=True)
    return out / name


HOSTILE = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _check_hostile(profile, name: str) -> None:
    """Views with their schemas and usable numbers, notes of one line; with strict=True a
    one-line ProfileError where the file was left out, nothing else."""
    views = read_training_views(profile)  # never raises
    for view in VIEWS:
        frame = getattr(views, view)
        assert frame.schema == pl.Schema(SCHEMAS[view])
    for note in views.notes:
        assert "\n" not in note
    for view in ("communication", "bandwidth", "links"):
        frame = getattr(views, view)
        for col in ("total_us", "size_mb", "time_us", "bandwidth_gbps"):
            if col in frame.columns:
                values = frame[col].drop_nulls()
                assert values.is_finite().all() and (values >= 0).all()
    if any(f"{name}:" in n for n in views.notes):
        with pytest.raises(ProfileError) as err:
            read_training_views(profile, strict=True)
        assert "\n" not in str(err.value) and name in str(err.value)


@HOSTILE
@given(doc=COMMUNICATION_DOC)
def test_hostile_communication_json(hostile_capture, doc):
    root, profile = hostile_capture
    _only(root, "communication.json").write_text(json.dumps(doc, allow_nan=True))
    _check_hostile(profile, "communication.json")


@HOSTILE
@given(doc=MATRIX_DOC)
def test_hostile_communication_matrix_json(hostile_capture, doc):
    root, profile = hostile_capture
    _only(root, "communication_matrix.json").write_text(json.dumps(doc, allow_nan=True))
    _check_hostile(profile, "communication_matrix.json")


VALID_OP = st.tuples(
    st.sampled_from(["allReduce", "allGather", "reduceScatter", "broadcast", "send", "receive"]),
    st.integers(0, 10**6),  # op index in the name
    st.sampled_from(["p2p", "collective"]),
    st.lists(st.floats(min_value=0, max_value=1e9), min_size=4, max_size=4),  # elapse, transit, wait, sync (ms)
    st.dictionaries(
        st.sampled_from(["HCCS", "PCIE", "SIO", "SDMA", "RDMA"]),
        st.tuples(st.floats(min_value=0, max_value=1e9), st.floats(min_value=0, max_value=1e9)),
        max_size=4,
    ),
)


@HOSTILE
@given(ops=st.lists(VALID_OP, min_size=1, max_size=6), steps=st.integers(1, 3))
def test_any_valid_communication_json_reads_as_written(hostile_capture, ops, steps):
    root, profile = hostile_capture
    doc: dict = {}
    truth: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for i, (op_type, n, kind, times, transports) in enumerate(ops):
        step = doc.setdefault(f"step{i % steps}", {"p2p": {}, "collective": {}})
        name = f"hcom_{op_type}__{n}_{i}"
        step[kind][f"{name}@77"] = {
            "Communication Time Info": dict(
                zip(("Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)", "Synchronization Time(ms)"), times)
            ),
            "Communication Bandwidth Info": {
                t: {"Transit Size(MB)": size, "Transit Time(ms)": ms} for t, (size, ms) in transports.items()
            },
        }
        t = truth[op_type]
        t["count"] += 1
        for key, ms in zip(("total_us", "transit_us", "wait_us", "sync_us"), times):
            t[key] += ms * 1000
        for name_, (size, _) in transports.items():
            if not ("SDMA" in transports and name_ in SDMA_LINKS):
                t["size_mb"] += size
    _only(root, "communication.json").write_text(json.dumps(doc))
    views = read_training_views(profile)
    assert not any("communication.json:" in n for n in views.notes)
    got = _per_type(views.communication, "1")
    assert set(got) == set(truth)
    for op_type, want in truth.items():
        for key, value in want.items():
            assert math.isclose(got[op_type][key], value, rel_tol=1e-9, abs_tol=1e-6), (op_type, key)


CELL = st.one_of(
    st.sampled_from(["", "N/A", "inf", "-inf", "nan", "1e400", "-5", "1.69512E+15", "abc", "step12", "12", " 7 "]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-(2**70), 2**70).map(str),
    st.text(max_size=6),
)
STEP_HEADER = [
    "Step",
    "Computing",
    "Communication(Not Overlapped)",
    "Overlapped",
    "Communication",
    "Free",
    "Stage",
    "Bubble",
]


@HOSTILE
@given(rows=st.lists(st.lists(CELL, min_size=0, max_size=10), max_size=4), header=st.booleans())
def test_hostile_step_trace_time_csv(hostile_capture, rows, header):
    root, profile = hostile_capture
    with open(_only(root, "step_trace_time.csv"), "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        if header:
            writer.writerow(STEP_HEADER)
        writer.writerows(rows)
    _check_hostile(profile, "step_trace_time.csv")


def test_broken_files_are_notes_and_the_next_source_is_used(tmp_path):
    copy = tmp_path / "cnn"
    shutil.copytree(CNN / "level1", copy)
    out = copy / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    text = (out / "communication.json").read_text()
    (out / "communication.json").write_text(text[: len(text) // 2])  # truncated
    (out / "communication_matrix.json").write_text(
        '{"step50": {"collective": {"x@1": {"0-1": {"Transport Type": "HCCS", '
        '"Transit Size(MB)": NaN, "Transit Time(ms)": 1}}}}}'
    )
    (out / "step_trace_time.csv").write_text(
        "Step,Computing,Communication(Not Overlapped),Overlapped,Free\n50,1e400,1,1,1\n"
    )
    (out / "memory_record.csv").write_bytes(b"\x00\xff garbage")
    views = _views(copy)
    notes = " | ".join(views.notes)
    for name in ("communication.json", "communication_matrix.json", "step_trace_time.csv", "memory_record.csv"):
        assert name in notes
    # Rank 0 falls back to what the tasks and the timeline give; rank 1 keeps its files.
    sources = {(r["card"], r["source"]) for r in views.steps.to_dicts()}
    assert ("1", "step_trace_time.csv") in sources and any(c == "0" and s.startswith("timeline") for c, s in sources)
    assert set(views.communication.filter(pl.col("card") == "0")["source"]) == {"tasks"}
    assert views.links.filter(pl.col("card") == "0").height == 0
    assert views.memory.filter(pl.col("card") == "0").height == 0
    with pytest.raises(ProfileError) as err:
        read_training_views(_open(copy), strict=True)
    assert "\n" not in str(err.value)


def test_a_damaged_analysis_db_is_a_note(tmp_path):
    copy = tmp_path / "db"
    shutil.copytree(DB2025 / "level1", copy)
    target = copy / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "analysis.db"
    os.chmod(target, 0o644)
    target.write_bytes(target.read_bytes()[:1000])  # cut short
    views = _views(copy)
    assert any("analysis.db" in n for n in views.notes)
    # Card 0's steps come from its tasks now, card 1's from its analysis.db.
    sources = dict(zip(views.steps["card"], views.steps["source"]))
    assert sources == {"0": "tasks, steps by Step Id", "1": "analysis.db StepTraceTime"}
    assert set(views.communication.filter(pl.col("card") == "0")["source"]) == {"COMMUNICATION_OP"}


# --------------------------------------------------------------------------- msprof text files


def _msprof_out(root: Path) -> Path:
    return next(root.rglob("mindstudio_profiler_output"))


def test_msprof_statistics_files(tmp_path):
    """msprof's api_statistic_<ts>.csv, communication_statistic_<ts>.csv, npu_module_mem_<ts>.csv
    (headers of msprof's assemblers): the newest export of each is read, units converted."""
    g = generate(tmp_path, layout="era_b", cards=1, steps=2, ops_per_step=80, timeline=False)
    out = _msprof_out(g.root)
    header = "Device_id,Level,API Name,Time(us),Count,Avg(us),Min(us),Max(us),Variance\n"
    (out / "api_statistic_20240101000000.csv").write_text(header + "host,acl,aclOld,1,1,1,1,1,0\n")
    (out / "api_statistic_20240605100000.csv").write_text(
        header
        + "host,acl,aclopCompileAndExecute,2500.5,25,100.02,50,400.25,9.5\nhost,runtime,rtKernelLaunch,80,40,2,1,3,0\n"
    )
    (out / "communication_statistic_20240605100000.csv").write_text(
        "Device_id,OP Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\n"
        "0,hcom_allReduce_,4,1234.5,100,308.625,500,80\n0,hcom_broadcast_,1,300,300,300,300,20\n"
    )
    (out / "npu_module_mem_20240605100000.csv").write_text(
        "Device_id,Component,Timestamp(us),Total Reserved(KB),Device\n"
        "0,APP,1717575960208020.750\t,1048576,NPU:0\n0,APP,1717575960228020.750\t,2097152,NPU:0\n"
        "0,HCCL,1717575960208020.750\t,4096,NPU:0\n"
    )
    views = _views(g.root)
    api = {r["api"]: r for r in views.host_api.to_dicts()}
    assert set(api) == {"aclopCompileAndExecute", "rtKernelLaunch"}
    assert api["aclopCompileAndExecute"] == {
        "card": "0",
        "api": "aclopCompileAndExecute",
        "level": "AscendCL",
        "count": 25,
        "total_us": 2500.5,
        "avg_us": 100.02,
        "max_us": 400.25,
        "source": "api_statistic_20240605100000.csv",
    }
    assert api["rtKernelLaunch"]["level"] == "Runtime"
    comm = {r["op_type"]: r for r in views.communication.to_dicts()}
    assert comm["allReduce"]["count"] == 4 and comm["allReduce"]["total_us"] == 1234.5
    assert comm["allReduce"]["op_name"] is None and comm["broadcast"]["total_us"] == 300
    assert "communication: communication_statistic_20240605100000.csv" in views.found
    (memory,) = views.memory.to_dicts()
    assert memory["component"] == "APP" and memory["peak_allocated_mb"] is None
    assert memory["peak_reserved_mb"] == 2048.0 and memory["app_reserved_mb"] == 2048.0  # KB / 1024
    assert views.memory_curve["reserved_mb"].to_list() == [1024.0, 2048.0]
    assert views.memory_curve["ts_ns"].to_list() == [1717575960208020750, 1717575960228020750]


def test_merged_api_statistic_counts_every_card_once(tmp_path):
    """An Era B api_statistic says `host` for every card's calls: with a timeline the per-card
    events are used instead, without one its rows stay `host`; never both."""
    header = "Device_id,Level,API Name,Time(us),Count,Avg(us),Min(us),Max(us),Variance\n"
    for timeline in (True, False):
        g = generate(tmp_path / str(timeline), layout="era_b", cards=2, steps=2, ops_per_step=80, timeline=timeline)
        (_msprof_out(g.root) / "api_statistic_20240605100000.csv").write_text(header + "host,acl,aclFoo,10,2,5,4,6,1\n")
        views = _views(g.root)
        sources = set(views.host_api["source"].to_list())
        if timeline:
            assert sources == {"timeline"} and "aclFoo" not in views.host_api["api"].to_list()
            assert set(views.host_api["card"].to_list()) <= {"0", "1", "host"}
        else:
            assert sources == {"api_statistic_20240605100000.csv"}
            assert views.host_api["card"].to_list() == ["host"]


def test_steps_by_profile_step_events_of_a_paddle_trace():
    """Paddle's `ProfileStep#100[3.735 ms]` events mark the steps of a CPU trace."""
    profile = _open(REAL.parent / "paddle_cpu")
    views = read_training_views(profile)
    assert views.steps["step"].to_list() == [100, 101]
    assert set(views.steps["source"].to_list()) == {"tasks, steps by ProfilerStep"}
    events = profile.events.filter(pl.col("name").str.starts_with("ProfileStep#")).sort("ts_ns")
    tasks = [(s, s + round(d * 1000), False) for s, d in profile.tasks.select("start_ns", "duration_us").iter_rows()]
    for row, (ts, dur) in zip(views.steps.to_dicts(), events.select("ts_ns", "dur_ns").iter_rows()):
        mine = [t for t in tasks if ts <= t[0] < ts + dur]
        lo, hi = min(s for s, _, _ in mine), max(e for _, e, _ in mine)
        truth = _step_truth(mine, lo, hi)
        for key, value in truth.items():
            assert _close(row[key], value), key


def test_analysis_db_sizes_in_bytes_are_told_by_its_bandwidth(tmp_path):
    """Older msprof docs give CommAnalyzer transit_size in bytes: the table's own bandwidth
    column (GB/s) tells bytes from MB, and both read as the same MB."""
    copy = tmp_path / "db"
    shutil.copytree(DB2025 / "level1", copy)
    for _, out in _ranks(copy):
        target = out / "analysis.db"
        os.chmod(target, 0o644)
        with sqlite3.connect(target) as con:
            con.execute("UPDATE CommAnalyzerBandwidth SET transit_size = transit_size * 1000000")
            con.execute("UPDATE CommAnalyzerMatrix SET transit_size = transit_size * 1000000")
    bytes_views = _views(copy)
    mb_views = _views(DB2025 / "level1")
    assert any("sizes are in bytes" in n for n in bytes_views.notes)
    for view in ("bandwidth", "links", "communication"):
        assert_frame_equal(getattr(bytes_views, view), getattr(mb_views, view), check_exact=False, rel_tol=1e-9)


@pytest.mark.parametrize(
    ("db", "sql", "view"),
    [
        ("analysis.db", "UPDATE CommAnalyzerTime SET elapse_time = -5 WHERE rowid = 1", "communication"),
        ("analysis.db", "UPDATE CommAnalyzerTime SET elapse_time = 'abc'", "communication"),
        ("analysis.db", "UPDATE StepTraceTime SET computing = 1e400", "steps"),
        ("analysis.db", "UPDATE StepTraceTime SET step = 'x12'", "steps"),
        ("analysis.db", "UPDATE CommAnalyzerMatrix SET src_rank = 'r0' WHERE rowid = 2", "links"),
        ("analysis.db", "DROP TABLE CommAnalyzerBandwidth", None),
        ("profiler", "UPDATE MEMORY_RECORD SET totalReserved = 1e400 WHERE rowid = 3", "memory"),
        ("profiler", "UPDATE OP_MEMORY SET size = -1e300 WHERE rowid = 1", "memory_top_ops"),
        ("profiler", "UPDATE MEMORY_RECORD SET component = 999999", None),
        ("profiler", "DROP TABLE ENUM_MODULE", None),
    ],
)
def test_hostile_db_values_are_notes(tmp_path, db, sql, view):
    """A damaged value in a db table: a note naming the file, the next source; strict: one line."""
    copy = tmp_path / "db"
    shutil.copytree(DB2025 / "level1", copy)
    out = copy / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    target = out / ("analysis.db" if db == "analysis.db" else "ascend_pytorch_profiler_0.db")
    os.chmod(target, 0o644)
    with sqlite3.connect(target) as con:
        con.execute(sql)
    profile = _open(copy)
    views = read_training_views(profile)
    for name in VIEWS:
        assert getattr(views, name).schema == pl.Schema(SCHEMAS[name])
    if view is not None:
        assert any(target.name in n and "\n" not in n for n in views.notes), views.notes
        with pytest.raises(ProfileError) as err:
            read_training_views(profile, strict=True)
        assert "\n" not in str(err.value)
