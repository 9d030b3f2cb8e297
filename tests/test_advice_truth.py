"""Advice never contradicts the capture: what a finding says rests on what the files hold.

Truth comes from the files themselves (csv / sqlite3), read here without the project's code:
a wait before a collective is communication (never an online compile), free time beside such a
wait stays free, advice about online compilation needs aclop tasks of the type, an aclnn
kernel's op type is in its name, and a capture of a few tasks says it is a small sample.
"""

from __future__ import annotations

import csv
import json
import shutil
import sqlite3
from pathlib import Path

import polars as pl
import pytest
from tiny import event, profile, task

from npuscope import cli
from npuscope.analysis import Thresholds, diagnose
from npuscope.analysis.card_data import SMALL_SAMPLE_TASKS
from npuscope.analysis.waits import cause_text
from npuscope.fixtures.generate import generate_cluster
from npuscope.parsers import open_profile
from npuscope.parsers.timeline_tasks import kernel_op_type

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "samples"
REAL = SAMPLES / "real"

GPT3_RANK0 = REAL / "torch_npu_2023_gpt3_2rank" / "test_rank_0"
LONG_WAIT = Thresholds().long_wait_us


def _report_json(path: Path, *args: str, capsys: pytest.CaptureFixture[str]) -> dict:
    assert cli.main(["report", str(path), "--no-cache", "--format", "json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def _findings(doc: dict) -> list[dict]:
    return [f for card in doc["cards"] for f in card["findings"]]


def _collective_long_waits(kernel_details: Path) -> list[tuple[str, float]]:
    """(name, wait) of every collective row with a long wait, read with the csv module."""
    out = []
    with kernel_details.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        name, kind, core, wait = (header.index(c) for c in ("Name", "Type", "Accelerator Core", "Wait Time(us)"))
        for row in reader:
            if len(row) != len(header):
                continue  # the hand-edited line 17: the report skips it too
            if (row[kind].startswith("hcom_") or row[core] == "HCCL") and float(row[wait]) >= LONG_WAIT:
                out.append((row[name], float(row[wait])))
    return out


def test_real_capture_without_timeline_never_blames_recompilation_on_a_collective(capsys):
    truth = _collective_long_waits(GPT3_RANK0 / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    assert len(truth) == 3  # hcom_broadcast_ x2 and hcom_allReduce_: the case the issue shows
    doc = _report_json(GPT3_RANK0, capsys=capsys)
    recompilation = [f for f in _findings(doc) if f["rule"] == "recompilation"]
    assert not any(t.startswith("hcom_") for f in recompilation for t in f["op_types"])
    (comm,) = [f for f in _findings(doc) if f["rule"] == "communication_wait"]
    assert comm["count"] == len(truth)
    assert comm["time_us"] == pytest.approx(sum(w for _, w in truth), abs=1e-3)
    assert "== cards ==" not in comm["advice"]  # a one-card report prints no such section
    prof = open_profile(GPT3_RANK0)
    diag = diagnose(prof)
    causes = diag.tasks.filter(pl.col("op_name").is_in([n for n, _ in truth]))
    assert causes["wait_cause"].to_list() == ["communication"] * len(truth)


def test_a_compile_call_over_the_gap_before_a_collective_is_still_communication():
    # The host compiled an operator (aclopCompileAndExecute) while the device waited to start a
    # collective: the framework never compiles a collective, so the wait is communication.
    tasks = [
        task("Add", 0, 10),
        task("hcom_allReduce__1_0", 2_000, 50, op_type="hcom_allReduce_", task_type="HCCL", shapes=""),
        task("Mul", 2_100, 10),
    ]
    for t in tasks:
        t["wait_us"] = None
    events = [event("AscendCL@aclopCompileAndExecute", 20, 1_900), event("Node@launch", 1_990, 5)]
    prof = profile(tasks, events)
    tasks_frame = prof.tasks.with_columns(
        pl.when(pl.col("op_name").str.starts_with("hcom_")).then(1_990.0).otherwise(pl.col("wait_us")).alias("wait_us")
    )
    prof = profile(tasks, events)
    object.__setattr__(prof, "tasks", tasks_frame)
    diag = diagnose(prof)
    row = diag.tasks.filter(pl.col("op_name").str.starts_with("hcom_")).row(0, named=True)
    assert row["wait_us"] >= LONG_WAIT
    assert row["wait_cause"] == "communication"
    assert not [f for f in diag.findings if f.rule == "recompilation" and "hcom_allReduce_" in f.op_types]


def test_free_time_beside_a_wait_before_a_collective_is_found(tmp_path, capsys):
    # A generated rank with free time planted; every collective then given a long wait (edited
    # with the csv module). The waits are communication: the free time stays free, and
    # free_time reports all of it (step_trace_time.csv's Free, summed here with csv).
    cluster = generate_cluster(tmp_path / "gen", ranks=2, rows=400, timeline=False, problems=("free_time",)).root
    root = sorted(p for p in cluster.iterdir() if p.is_dir())[0]
    (details,) = root.rglob("kernel_details.csv")
    with details.open(newline="") as fh:
        rows = list(csv.reader(fh))
    head = rows[0]
    kind, wait = head.index("Type"), head.index("Wait Time(us)")
    edited = 0
    for row in rows[1:]:
        if row[kind].startswith("hcom_"):
            row[wait] = "9000.0"
            edited += 1
    assert edited >= 2
    with details.open("w", newline="") as fh:
        csv.writer(fh).writerows(rows)
    (trace,) = root.rglob("step_trace_time.csv")
    with trace.open(newline="") as fh:
        free = sum(float(r["Free"]) for r in csv.DictReader(fh))
    doc = _report_json(root, capsys=capsys)
    found = _findings(doc)
    assert not [f for f in found if f["rule"] == "recompilation"]
    (comm,) = [f for f in found if f["rule"] == "communication_wait"]
    assert comm["count"] == edited
    (free_time,) = [f for f in found if f["rule"] == "free_time"]
    assert free_time["severity"] == "warning"
    assert free_time["time_us"] == pytest.approx(free, rel=1e-6)
    assert "blamed on recompilation" not in free_time["title"]


def test_the_wait_detail_says_suspected_when_there_is_no_host_trace():
    assert "aclopCompileAndExecute" not in cause_text("recompilation", "suspected")
    assert "no host trace" in cause_text("recompilation", "suspected")
    assert "compil" in cause_text("recompilation", "evidence")
    assert "step boundary" in cause_text("expected", "evidence")
    assert "before one" in cause_text("communication", "evidence")


def _read_only(db: Path) -> sqlite3.Connection:
    """The db opened as a reader that writes nothing beside it: the 2023 msprof db is in WAL
    mode, where `mode=ro` alone creates its -shm and -wal in the samples folder."""
    return sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)


def _db_aclnn_share(db: Path) -> tuple[int, int]:
    """(operator tasks, aclop operator tasks) of a db export, with sqlite3."""
    con = _read_only(db)
    names = [r[0] for r in con.execute("SELECT s.value FROM COMPUTE_TASK_INFO c JOIN STRING_IDS s ON c.name = s.id")]
    con.close()
    return len(names), sum(1 for n in names if not n.startswith("aclnn"))


def test_no_compile_or_aclop_advice_without_aclop_tasks(capsys):
    db = REAL / "msprof_db_2023" / "msprof_0.db"
    n, aclop = _db_aclnn_share(db)
    assert n == 11 and aclop == 0
    doc = _report_json(REAL / "msprof_db_2023", capsys=capsys)
    found = _findings(doc)
    assert not [f for f in found if f["rule"] == "aclop_share"]
    for f in found:
        text = (f["title"] + " " + f["advice"]).lower()
        assert "online compilation" not in text and "jit_compile" not in text and "migrate" not in text, f
    (dominant,) = [f for f in found if f["rule"] == "dominant_op_type"]
    assert dominant["op_types"] == ["ZerosLike"]
    assert f"({n} task(s): a small sample)" in dominant["title"]
    (gaps,) = [f for f in found if f["rule"] == "data_gaps"]
    assert f"only {n} operator task(s): a small sample" in gaps["title"]
    assert "derived" not in gaps["title"]  # a derived op_statistic is no gap


def test_compile_advice_kept_where_the_type_has_aclop_tasks():
    tasks = [task("trans_TransData_1", 10 * i, 100, op_type="TransData") for i in range(SMALL_SAMPLE_TASKS)]
    tasks += [task("aclnnAdd_AddAiCore_Add", 5 + 10 * i, 1, op_type="Add") for i in range(SMALL_SAMPLE_TASKS)]
    diag = diagnose(profile(tasks))
    (dominant,) = [f for f in diag.findings if f.rule == "dominant_op_type"]
    assert dominant.op_types == ("TransData",)
    assert "online compilation" in dominant.advice and "small sample" not in dominant.title
    (share,) = [f for f in diag.findings if f.rule == "aclop_share"]
    assert share.count == SMALL_SAMPLE_TASKS


def _db_name_types() -> list[tuple[str, str]]:
    pairs: set[tuple[str, str]] = set()
    for db in [*REAL.rglob("msprof_*.db"), *REAL.rglob("ascend_pytorch_profiler_*.db")]:
        con = _read_only(db)
        pairs |= set(
            con.execute(
                "SELECT n.value, t.value FROM COMPUTE_TASK_INFO c JOIN STRING_IDS n ON c.name = n.id "
                "JOIN STRING_IDS t ON c.opType = t.id"
            )
        )
        con.close()
    return sorted(p for p in pairs if p[1] != "N/A")


def _csv_name_types() -> list[tuple[str, str]]:
    pairs: set[tuple[str, str]] = set()
    for path in SAMPLES.rglob("kernel_details.csv"):
        with path.open(newline="", encoding="utf-8-sig") as fh:
            for row in csv.DictReader(fh):
                if row.get("Type") not in (None, "", "N/A"):
                    pairs.add((row["Name"], row["Type"]))
    return sorted(pairs)


# The one aclnn name of the real samples whose type is not its third field.
KNOWN_EXCEPTION = ("aclnnMatmul_MatMulV3Common_MatMulV5", "MatMulV3")


def test_kernel_names_give_the_op_types_the_exports_record():
    pairs = [p for p in [*_db_name_types(), *_csv_name_types()] if p[0].startswith(("aclnn", "trans_"))]
    assert len(pairs) >= 40 and KNOWN_EXCEPTION in pairs
    names = pl.Series("name", [n for n, _ in pairs])
    derived = pl.select(kernel_op_type(pl.lit(names))).to_series().to_list()
    wrong = [(n, t, d) for (n, t), d in zip(pairs, derived, strict=True) if d != t]
    assert wrong == [(*KNOWN_EXCEPTION, "MatMulV5")]
    other = pl.select(kernel_op_type(pl.lit(pl.Series(["Conv2D12", "StatelessDropOutGenMask/DSASTATELESSGENBITMASK"]))))
    assert other.to_series().to_list() == ["Conv2D12", "StatelessDropOutGenMask/DSASTATELESSGENBITMASK"]


def test_timeline_only_capture_types_its_aclnn_kernels(tmp_path, capsys):
    # The torch_npu sample's timeline alone (no kernel_details.csv): its op types come from the
    # kernel names, never a whole aclnn kernel name taken for an Ascend C kernel.
    src = SAMPLES / "torch_npu_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    trace = tmp_path / "trace_view.json"
    shutil.copy(src, trace)
    events = [e for e in json.loads(src.read_bytes()) if isinstance(e, dict)]
    device = {
        e["pid"]
        for e in events
        if e.get("ph") == "M" and e.get("name") == "process_name" and e.get("args", {}).get("name") == "Ascend Hardware"
    }
    kernels = [
        e["name"]
        for e in events
        if e.get("ph") == "X" and e.get("pid") in device and str(e.get("name", "")).startswith("aclnn")
    ]
    assert kernels
    doc = _report_json(trace, capsys=capsys)
    for f in _findings(doc):
        assert not any(t.startswith("aclnn") for t in f["op_types"]), f
        assert "Ascend C" not in f["advice"], f
    types = {row["op_type"] for card in doc["cards"] for row in card["op_statistic"]}
    assert not any(t.startswith("aclnn") for t in types)
    assert {n.split("_")[2] for n in kernels} <= types


def test_free_time_leaves_out_only_what_the_operator_rules_blame(tmp_path, capsys):
    # Planted recompilation on the slow rank: its long waits are blamed on recompilation (first
    # calls of aclop shapes, never a collective) and free_time reports the rest of the free time.
    cluster = generate_cluster(
        tmp_path / "gen", ranks=2, rows=400, timeline=False, problems=("free_time", "slow_rank", "recompilation")
    ).root
    root = sorted(p for p in cluster.iterdir() if p.is_dir())[0]
    (trace,) = root.rglob("step_trace_time.csv")
    with trace.open(newline="") as fh:
        free = sum(float(r["Free"]) for r in csv.DictReader(fh))
    found = _findings(_report_json(root, capsys=capsys))
    recompilation = [f for f in found if f["rule"] == "recompilation"]
    assert recompilation and not any(t.startswith("hcom_") for f in recompilation for t in f["op_types"])
    blamed = sum(f["time_us"] for f in recompilation)
    (free_time,) = [f for f in found if f["rule"] == "free_time"]
    assert 0 < blamed < free
    assert free_time["time_us"] == pytest.approx(free - blamed, rel=1e-6)


@pytest.mark.parametrize(
    "capture",
    [
        "torch_npu_2024_cnn/level1/rank0_ascend_pt",
        "torch_npu_2024_cnn/level1/rank1_ascend_pt",
        "torch_npu_2025_db/level1/rank0_ascend_pt",
        "torch_npu_2025_db/level1/rank1_ascend_pt",
    ],
)
def test_real_captures_with_a_host_trace_never_blame_recompilation_on_a_collective(capture):
    prof = open_profile(REAL / capture)
    assert prof.events is not None and prof.events.filter(pl.col("name").str.contains("@", literal=True)).height
    diag = diagnose(prof)
    long_before_collectives = diag.tasks.filter(
        pl.col("task_type").is_in(["HCCL", "COMMUNICATION"]) & (pl.col("wait_us") >= LONG_WAIT)
    )
    assert long_before_collectives.height > 0  # the case is there in these captures
    assert set(long_before_collectives["wait_cause"].to_list()) == {"communication"}
    for f in diag.findings:
        if f.rule == "recompilation":
            assert not any(t.startswith("hcom_") for t in f.op_types), f
