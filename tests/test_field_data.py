"""Real captures from the field, each read and diagnosed as its own files say.

Truth comes from the files through the csv / json modules (never from npuscope): task counts,
compute and communication per card, totals per op type, the longest tasks, the findings' op
types and counts. Every quirk of FORMATS.md 5b shown by a real sample is checked on it.
"""

from __future__ import annotations

import csv
import io
import json
import warnings
from collections import Counter, defaultdict
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import polars as pl
import pytest

from npuscope.analysis import Thresholds, diagnose
from npuscope.analysis.report import build_report
from npuscope.cli import main
from npuscope.parsers import FrameCache, ProfileError, open_profile
from npuscope.parsers.columns import UNKNOWN

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "samples" / "real"
GPT3 = REAL / "torch_npu_2023_gpt3_2rank"
CNN = REAL / "torch_npu_2024_cnn"
COMM_CORES = {"HCCL", "COMMUNICATION"}


def _open(path: Path, **kw):
    return open_profile(path, cache=FrameCache(enabled=False), **kw)


def _kernel_rows(path: Path) -> list[dict[str, str]]:
    """kernel_details rows as the csv module reads them, without rows shorter than the header."""
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        return [dict(zip(header, r)) for r in reader if len(r) == len(header)]


def _is_comm(row: dict[str, str]) -> bool:
    core = row["Accelerator Core"]
    return core in COMM_CORES or (core == "N/A" and row["Name"].startswith("hcom_"))


def _op_type(row: dict[str, str]) -> str:
    if row["Type"] != "N/A":
        return row["Type"]
    if row["Name"].startswith("hcom_"):
        return row["Name"].rstrip("_0123456789") + "_" if "__" in row["Name"] else row["Name"]
    return UNKNOWN


def _truth(rank_dirs: dict[str, Path]) -> dict[str, dict]:
    out = {}
    for card, folder in rank_dirs.items():
        rows = _kernel_rows(folder / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
        compute = [r for r in rows if not _is_comm(r)]
        comm = [r for r in rows if _is_comm(r)]
        per_type: dict[str, float] = defaultdict(float)
        for r in compute:
            per_type[_op_type(r)] += float(r["Duration(us)"])
        long = Counter(_op_type(r) for r in compute if float(r["Duration(us)"]) > 1000)
        out[card] = {
            "tasks": len(rows),
            "compute_us": sum(float(r["Duration(us)"]) for r in compute),
            "communication_us": sum(float(r["Duration(us)"]) for r in comm),
            "wait_us": sum(float(r["Wait Time(us)"]) for r in rows),
            "per_type": dict(per_type),
            "long": dict(long),
            "top": sorted((float(r["Duration(us)"]) for r in rows), reverse=True)[:5],
        }
    return out


def _report(path: Path, **kw) -> dict:
    prof = _open(path, **kw)
    return build_report(prof, diagnose(prof, Thresholds()), top=5)


CASES = {
    "gpt3_2rank": {"0": GPT3 / "test_rank_0", "1": GPT3 / "test_rank_1"},
    "cnn_level0": {"0": CNN / "level0" / "rank0_ascend_pt", "1": CNN / "level0" / "rank1_ascend_pt"},
    "cnn_level1": {"0": CNN / "level1" / "rank0_ascend_pt", "1": CNN / "level1" / "rank1_ascend_pt"},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_real_kernel_details_numbers(case):
    ranks = CASES[case]
    truth = _truth(ranks)
    root = next(iter(ranks.values())).parent
    report = _report(root)
    assert [c["card"] for c in report["cards"]] == sorted(ranks)
    for card in report["cards"]:
        want, s = truth[card["card"]], card["summary"]
        assert s["tasks"] == want["tasks"]
        assert s["compute_us"] == pytest.approx(want["compute_us"], abs=0.01)
        assert s["communication_us"] == pytest.approx(want["communication_us"], abs=0.01)
        assert s["wait_us"] == pytest.approx(want["wait_us"], abs=0.01)
        stat: dict[str, float] = defaultdict(float)
        for r in card["op_statistic"]:
            stat[r["op_type"]] += r["total_us"]
        top_types = sorted(want["per_type"], key=want["per_type"].get, reverse=True)[:5]
        for op_type in top_types:
            assert stat[op_type] == pytest.approx(want["per_type"][op_type], abs=0.01)
        assert [r["duration_us"] for r in card["top_duration"]] == pytest.approx(want["top"], abs=0.001)
        long = {f["op_types"][0]: f["count"] for f in card["findings"] if f["rule"] == "long_task"}
        assert long == want["long"]
        # Collectives are judged by communication analysis, not by the operator rules.
        for f in card["findings"]:
            if f["rule"] in ("long_task", "dominant_op_type", "duration_outlier", "ai_cpu"):
                assert not any(t.startswith("hcom_") for t in f["op_types"]), f
        text = json.dumps(card)
        assert "None" not in text and '"N/A"' not in text


def test_level0_types_are_labelled_and_findings_keep_names():
    report = _report(CNN / "level0")
    card = report["cards"][0]
    assert {r["op_type"] for r in card["op_statistic"]} == {UNKNOWN}
    assert not [f for f in card["findings"] if f["rule"] == "dominant_op_type"]
    per_type = [f for f in card["findings"] if f["rule"] not in ("aclop_share", "data_gaps")]
    assert per_type
    for f in per_type:
        if list(f["op_types"]) == [UNKNOWN]:
            assert f["op_names"], f  # the evidence names the ops
            assert f["evidence"], f
    gaps = next(f for f in card["findings"] if f["rule"] == "data_gaps")
    assert "no op types" in gaps["title"]
    assert any("op types unknown" in n for n in report["source"]["notes"])


def test_level0_report_has_no_python_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _report(CNN / "level0")


def test_rank_comes_from_profiler_info_beside_the_output():
    prof = _open(GPT3 / "test_rank_1")
    assert prof.cards == ("1",)
    assert _open(CNN / "level1" / "rank1_ascend_pt").cards == ("1",)
    assert _open(GPT3).cards == ("0", "1")


def test_short_row_is_skipped_with_file_and_line():
    path = GPT3 / "test_rank_0" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    lines = path.read_text().splitlines()
    header_fields = len(next(csv.reader([lines[0]])))
    short = [i + 1 for i, line in enumerate(lines) if len(next(csv.reader([line]))) < header_fields]
    assert short == [17]  # the upstream hand edit
    prof = _open(GPT3 / "test_rank_0")
    assert prof.tasks.height == len(lines) - 1 - len(short)
    assert prof.skipped_rows == 1
    note = next(n for n in prof.notes if "damaged row" in n)
    assert str(path) in note and "line(s) 17" in note
    # No value of the damaged row leaks in: every kept start time is in the file.
    starts = {r["Start Time(us)"] for r in _kernel_rows(path)}
    assert len(starts) == prof.tasks.height
    with pytest.raises(ProfileError, match=r"line 17 has fewer fields"):
        _open(GPT3 / "test_rank_0", strict=True)


def test_short_row_in_the_middle_of_an_inline_file(tmp_path):
    header = "Op Name,OP Type,Task Type,Task Start Time(us),Task Duration(us),Task Wait Time(us),Block Dim"
    rows = [
        "A,Add,AI_CORE,1717575960208020.758\t,10.0,0,8",
        "B,Add,AI_CORE,1717575960208040.758\t,10.0,0",  # Block Dim missing: must not become null
        "C,Mul,AI_CORE,1717575960208060.758\t,10.0,0,8",
    ]
    path = tmp_path / "op_summary_1.csv"
    path.write_text("\n".join([header, *rows]) + "\n")
    prof = _open(path)
    assert prof.tasks["op_name"].to_list() == ["A", "C"]
    assert prof.tasks["block_num"].null_count() == 0
    assert any("line(s) 3" in n for n in prof.notes)


def test_a_row_that_lost_its_last_na_field_is_found_where_every_row_ends_in_na(tmp_path):
    """Era B without PMU ends in `Context ID`, `N/A` in every row: the row that lost that
    field is still found (the `N/A` cells are read as text for the check), and the others'
    `N/A` comes out null."""
    header = (
        "Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,"
        "Task Start Time(us),Task Duration(us),Task Wait Time(us),Block Dim,Context ID"
    )
    rows = [
        "0,1,1,2,A,Add,dynamic,AI_CORE,1717575960208020.758\t,10.0,0,8,N/A",
        "0,1,2,2,B,Add,dynamic,AI_CORE,1717575960208040.758\t,10.0,0,8",  # Context ID lost
        "0,1,3,2,C,Mul,dynamic,AI_CORE,1717575960208060.758\t,10.0,0,8,N/A",
        "0,1,4,2,D,Mul,dynamic,AI_CORE,1717575960208080.758\t,10.0,0,8,7",
    ]
    path = tmp_path / "op_summary_0_1.csv"
    path.write_text("\n".join([header, *rows]) + "\n")
    lost = [i + 2 for i, r in enumerate(rows) if len(next(csv.reader([r]))) < len(header.split(","))]
    assert lost == [3]
    prof = _open(path)
    assert prof.tasks["op_name"].to_list() == ["A", "C", "D"]
    assert prof.tasks["context_id"].to_list() == [None, None, "7"]
    assert any(f"line(s) {lost[0]}" in n for n in prof.notes)


def test_timeline_only_capture_counts_kernels_and_collectives_apart():
    out = CNN / "level1" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    rows = _kernel_rows(out / "kernel_details.csv")
    kernels = [r for r in rows if not _is_comm(r)]
    collectives = [r for r in rows if _is_comm(r)]
    events = json.loads((out / "trace_view.json").read_text())
    device = {e["pid"] for e in events if e.get("ph") == "M" and e["args"].get("name") == "Ascend Hardware"}
    markers = [
        e for e in events if e.get("pid") in device and e.get("ph") == "X" and e["name"] in ("NOTIFY_WAIT", "Other")
    ]
    assert markers  # the capture has them: they must not count as compute
    report = _report(out / "trace_view.json")
    s = report["cards"][0]["summary"]
    assert s["tasks"] == len(rows)
    assert s["compute_us"] == pytest.approx(sum(float(r["Duration(us)"]) for r in kernels), abs=0.05)
    assert s["communication_us"] == pytest.approx(sum(float(r["Duration(us)"]) for r in collectives), abs=0.05)
    top = report["cards"][0]["op_statistic"][0]
    assert not top["op_type"].upper().startswith(("NOTIFY", "EVENT", "SDMA", "MEMCPY"))


def test_markers_are_not_tasks(tmp_path):
    def ev(name, ts, dur, task_type):
        return {
            "name": name,
            "pid": 1,
            "tid": 1,
            "ts": f"{ts:.3f}",
            "dur": dur,
            "ph": "X",
            "args": {"Task Type": task_type, "connection_id": 18446744073709551615},
        }

    meta = [{"name": "process_name", "pid": 1, "tid": 0, "ph": "M", "args": {"name": "Ascend Hardware"}}]
    base = 1717575960208020.0
    events = meta + [
        ev("PROFILING_ENABLE", base - 5_000_000, 0.02, "PROFILING_ENABLE"),
        ev("Add", base, 10.0, "AI_VECTOR_CORE"),
        ev("Notify Wait", base + 20, 500.0, "Notify Wait"),
        ev("Mul", base + 600, 5.0, "AI_CORE"),
        ev("PLACE_HOLDER_SQE", base + 700, 0.0, "PLACE_HOLDER_SQE"),
        ev("PROFILING_DISABLE", base + 9_000_000, 0.02, "PROFILING_DISABLE"),
    ]
    path = tmp_path / "msprof_1.json"
    path.write_text(json.dumps(events))
    prof = _open(path)
    assert prof.tasks["op_name"].to_list() == ["Add", "Mul"]
    assert prof.span_ns("0") == 605_000  # first kernel start to last kernel end
    assert prof.events["connection_id"].drop_nulls().unique().to_list() == ["18446744073709551615"]


def test_spreadsheet_mangled_times_are_said_and_not_used(samples):
    path = samples / "cann5x_device_summary" / "op_summary_spreadsheet_mangled.csv"
    with open(path, newline="") as fh:
        starts = [r["Task Start Time"] for r in csv.DictReader(fh)]
    assert all("E+" in s for s in starts)
    prof = _open(path)
    assert prof.time_problem is not None and "spreadsheet" in prof.time_problem
    assert prof.span_ns("0") is None
    report = _report(path)
    card = report["cards"][0]
    assert card["summary"]["span_us"] is None
    assert all(r["wait_cause"] is None for r in card["top_wait"])
    assert report["source"]["time_problem"] == prof.time_problem
    out, err = _cli("report", str(path), "--no-cache")
    assert "span unavailable" in out and "lost their digits" in out
    out, err = _cli("inspect", str(path), "--no-cache")
    assert "UNUSABLE" in out


def test_a_start_hours_away_is_flagged(samples):
    prof = _open(samples / "cann5x_device_summary")
    with open(next((samples / "cann5x_device_summary").rglob("op_summary_0_1.csv")), newline="") as fh:
        starts = [int(r["Task Start Time"]) for r in csv.DictReader(fh)]
    assert max(starts) - min(starts) > 3600 * 10**9  # 30,000 s between 4 tasks
    assert prof.time_problem is not None and "jump" in prof.time_problem
    assert prof.span_ns("0") is None


def _cli(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err), warnings.catch_warnings():
        warnings.simplefilter("error")
        code = main(list(args))
    assert code == 0, err.getvalue()
    return out.getvalue(), err.getvalue()


ALL_SAMPLES = sorted(
    {p.parent for p in (Path(__file__).resolve().parents[1] / "fixtures" / "samples").rglob("*") if p.is_file()}
    - {Path(__file__).resolve().parents[1] / "fixtures" / "samples"}
)


@pytest.mark.parametrize("folder", ALL_SAMPLES, ids=lambda p: str(p).split("samples/")[-1])
def test_every_sample_folder_opens_in_every_command(folder):
    """No traceback, no Python warning: inspect and report in the three formats."""
    try:
        _open(folder)
    except ProfileError:  # a folder of raw or partial files: one line from the command is fine
        return
    _cli("inspect", str(folder), "--no-cache")
    for fmt in ("text", "markdown", "json"):
        out, err = _cli("report", str(folder), "--no-cache", "--format", fmt, "--top", "3")
        assert "Traceback" not in err
        if fmt == "json":
            json.loads(out)


def test_counts_per_card_match_polars_free_truth_on_gpt3():
    """Per card and op type, the counts of the derived op_statistic equal the file's rows."""
    prof = _open(GPT3)
    for card, folder in CASES["gpt3_2rank"].items():
        rows = [r for r in _kernel_rows(folder / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv") if not _is_comm(r)]
        want = Counter((r["Type"], r["Accelerator Core"]) for r in rows)
        got = {
            (r["op_type"], r["core_type"]): r["count"]
            for r in prof.op_statistic.filter(pl.col("card") == card).iter_rows(named=True)
        }
        assert got == dict(want)
