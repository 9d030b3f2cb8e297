"""Every real or golden sample opens, with row counts, dtypes and values checked against an
independent reading with the csv / json modules."""

from __future__ import annotations

import csv
import json
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest

from npuscope.parsers import FrameCache, open_profile
from npuscope.parsers.columns import EVENT_SCHEMA, STAT_ORDER, TASK_ORDER, TASK_SCHEMA, UNKNOWN


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _ns(text: str, unit: int = 1000) -> int:
    return int(Decimal(text.strip().strip('"').strip()) * unit)


def _num(text: str) -> float | None:
    return None if text in ("N/A", "") else float(text)


def _open(path: Path):
    return open_profile(path, cache=FrameCache(enabled=False))


def _check_task_schema(tasks: pl.DataFrame) -> None:
    assert tasks.columns[: len(TASK_ORDER)] == list(TASK_ORDER)
    for name in TASK_ORDER:
        assert tasks.schema[name] == TASK_SCHEMA[name], name
    for extra in tasks.columns[len(TASK_ORDER) :]:
        assert tasks.schema[extra] == pl.Float64, extra


def test_golden_era_b_op_summary(samples):
    folder = samples / "msprof_golden"
    csv_path = folder / "mindstudio_profiler_output" / "op_summary_20240605100000.csv"
    rows = _rows(csv_path)
    prof = _open(folder)
    assert prof.layout == "era_b"
    assert prof.cards == ("0",)
    t = prof.tasks
    _check_task_schema(t)
    assert t.height == len(rows) == 3
    assert t["op_name"].to_list() == [r["Op Name"] for r in rows]
    assert t["start_ns"].to_list() == [_ns(r["Task Start Time(us)"]) for r in rows]
    assert t["start_ns"][0] == 1717575960208020758  # the TAB after the value is gone, every digit kept
    assert t["duration_us"].to_list() == [float(r["Task Duration(us)"]) for r in rows]
    assert t["wait_us"].to_list() == [float(r["Task Wait Time(us)"]) for r in rows]
    # Ids are opaque text (real captures hold 2^64-1).
    assert t["task_id"].to_list() == [r["Task ID"] for r in rows]
    assert t["model_id"].to_list() == ["4294967295"] * 3
    assert t["block_num"].to_list() == [int(r["Block Num"]) for r in rows]
    # Empty OP Type / Task Type cells are unknown types: labelled, never None or empty.
    assert t["op_type"].to_list() == [UNKNOWN] * 3 and t["task_type"].to_list() == [UNKNOWN] * 3
    # PMU columns: Float64 with N/A as null.
    assert t["cube_utilization(%)"].to_list() == [_num(r["cube_utilization(%)"]) for r in rows]
    assert t["cube_utilization(%)"].to_list() == [92.785, None, 0.0]
    assert t["context_id"].to_list() == ["1", None, None]
    assert t["is_aclnn"].to_list() == [False] * 3


def test_golden_era_b_op_statistic(samples):
    path = samples / "msprof_golden" / "mindstudio_profiler_output" / "op_statistic_20240605100000.csv"
    rows = _rows(path)
    from npuscope.parsers.csv_table import RowPolicy
    from npuscope.parsers.export_tables import read_statistic
    from npuscope.parsers.layout import Source

    stat = read_statistic(Source("0", statistic=(path,)), RowPolicy())
    assert stat.columns == list(STAT_ORDER)
    assert stat.height == len(rows)
    assert stat["op_type"].to_list() == [r["OP Type"] for r in rows]
    assert stat["count"].dtype == pl.Int64
    assert stat["count"].to_list() == [int(r["Count"]) for r in rows]
    # Integer-looking totals (no decimal point) read as floats without loss.
    assert stat["total_us"].to_list() == [5412825240.0, 771407100.0]
    assert stat["ratio_pct"].to_list() == [float(r["Ratio(%)"]) for r in rows]
    assert stat["card"].to_list() == ["0", "0"]
    # These rows (5.4e9 us) come from another upstream test than the op_summary beside them
    # (166 us): the profile says so and uses the statistic derived from the tasks.
    prof = _open(samples / "msprof_golden")
    assert prof.statistic_derived
    assert prof.op_statistic["total_us"].sum() == pytest.approx(166.0)
    assert any("op_statistic disagrees with the tasks on card 0" in n for n in prof.notes)


def test_golden_msprof_json(samples):
    path = samples / "msprof_golden" / "mindstudio_profiler_output" / "msprof_20240605100000.json"
    raw = json.loads(path.read_text())
    non_meta = [e for e in raw if e.get("ph") != "M"]
    events = _open(samples / "msprof_golden").events
    assert events is not None
    assert dict(events.schema) == EVENT_SCHEMA
    assert events.height == len(non_meta)
    assert events["name"].to_list() == [e["name"] for e in non_meta]
    assert events["ts_ns"].to_list() == [_ns(e["ts"]) for e in non_meta]
    assert events["dur_ns"].to_list() == [None if "dur" not in e else round(e["dur"] * 1000) for e in non_meta]
    # Processes come from process_name metadata, even when it follows the events.
    by_name = dict(zip(events["name"], events["process"]))
    assert by_name["Node@launch"] == "CANN"
    assert by_name["MatMulV3"] == "Ascend Hardware"
    assert by_name["hcom_broadcast__674_0_1"] == "Communication"
    threads = dict(zip(events["name"], events["thread"]))
    assert threads["MatMulV3"] == "Stream 1"
    mm = events.filter(pl.col("name") == "MatMulV3").row(0, named=True)
    assert (mm["task_type"], mm["stream_id"], mm["task_id"], mm["connection_id"]) == (
        "AI_VECTOR_CORE",
        "1",
        "10",
        "2345",
    )
    flows = events.filter(pl.col("cat") == "HostToDevice")
    assert flows["flow_id"].to_list() == [e["id"] for e in non_meta if e.get("cat") == "HostToDevice"]
    assert set(events["card"].unique()) == {"0"}


def test_cann5x_ns_start_times_and_quoted_shapes(samples):
    path = samples / "cann5x_device_summary" / "device_0" / "summary" / "op_summary_0_1.csv"
    rows = _rows(path)
    prof = _open(samples / "cann5x_device_summary")
    assert prof.layout == "era_a"
    assert prof.era.startswith("CANN 5.x")
    t = prof.tasks
    _check_task_schema(t)
    assert t.height == len(rows) == 4
    expected = sorted(
        (_ns(r["Task Start Time"], 1), r["Input Shapes"].strip('"'), float(r["Task Duration(us)"])) for r in rows
    )
    got = list(zip(t["start_ns"], t["input_shapes"], t["duration_us"]))
    assert got == expected  # rows come out in time order
    assert t["start_ns"].to_list()[1] == 542118179416190  # ns, no unit in the header
    assert t["model_id"].unique().to_list() == ["4.29E+09"]  # the spreadsheet's text, kept as it is
    assert t["input_shapes"].to_list()[1] == "2,5"
    assert t["card"].unique().to_list() == ["0"]  # from device_0, no Device_id column
    assert t["op_state"].null_count() == 4  # no OP State before CANN 8.0.RC1
    assert prof.statistic_derived


def test_spreadsheet_mangled_exponent_start(samples):
    t = _open(samples / "cann5x_device_summary" / "op_summary_spreadsheet_mangled.csv").tasks
    assert t.height == 4
    assert sorted(t["start_ns"].to_list()) == [512118000000000] + [542118000000000] * 3


def test_torch_npu_kernel_details(samples):
    folder = samples / "torch_npu_ascend_pt"
    path = folder / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    rows = _rows(path)
    prof = _open(folder)
    assert prof.layout == "torch_npu"
    t = prof.tasks
    _check_task_schema(t)
    assert t.height == len(rows) == 29
    expected = sorted(
        (
            _ns(r["Start Time(us)"]),
            r["Name"],
            r["Type"],
            r["Accelerator Core"],
            float(r["Duration(us)"]),
            float(r["Wait Time(us)"]),
            r["Step Id"],
            int(r["Block Dim"]),
            r["Input Shapes"].strip('"'),
            r["Input Data Types"],
        )
        for r in rows
    )
    got = list(
        zip(
            t["start_ns"],
            t["op_name"],
            t["op_type"],
            t["task_type"],
            t["duration_us"],
            t["wait_us"],
            t["step_id"],
            t["block_num"],
            t["input_shapes"],
            t["input_dtypes"],
        )
    )
    assert got == expected
    assert t["is_aclnn"].sum() == sum(r["Name"].startswith("aclnn") for r in rows)
    assert "aic_mac_ratio" in prof.pmu_columns


def test_torch_npu_trace_view(samples):
    path = samples / "torch_npu_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    raw = json.loads(path.read_text())
    events = _open(path).events
    non_meta = [e for e in raw if e.get("ph") != "M"]
    assert events.height == len(non_meta) == 3638
    counts = dict(events.group_by("process").len().iter_rows())
    assert counts == {"Python": 1611, "Ascend Hardware": 824, "CANN": 656, "Overlap Analysis": 547}
    # Flow ids arrive as ints and strings; both are kept as opaque strings.
    ids = events.filter(pl.col("ph").is_in(["s", "f"]))["flow_id"]
    assert ids.null_count() == 0
    assert ids.to_list() == [str(e["id"]) for e in non_meta if e["ph"] in ("s", "f")]


def test_timeline_of_another_run_is_left_out_with_a_note(samples):
    """The sample pairs a 2025 kernel_details with a 2024 trace_view (two upstream test files):
    every event lies a year before the tasks, so none may stretch the axis or the span."""
    raw = json.loads((samples / "torch_npu_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
    last_event_ns = max(int(Decimal(str(e["ts"])) * 1000) for e in raw if "ts" in e)
    prof = _open(samples / "torch_npu_ascend_pt")
    assert last_event_ns < prof.tasks["start_ns"].min() - 86_400 * 10**9  # a day or more before
    assert prof.events.height == 0
    note = next(n for n in prof.notes if "far outside the device activity" in n)
    assert "3,638 timeline event(s)" in note
    assert (
        prof.span_ns("0")
        == prof.tasks.select(
            (pl.col("start_ns") + (pl.col("duration_us") * 1000).round(0).cast(pl.Int64)).max()
            - pl.col("start_ns").min()
        ).item()
    )


def test_paddle_cpu_trace(samples):
    folder = samples / "paddle_cpu"
    (path,) = folder.glob("*.paddle_trace.json")
    raw = json.loads(path.read_text())["traceEvents"]
    ops = [e for e in raw if e.get("cat") == "Operator"]
    prof = _open(folder)
    assert prof.layout == "paddle"
    assert prof.tasks_from == "paddle"
    t = prof.tasks
    _check_task_schema(t)
    assert t.height == len(ops) == 332
    assert set(t["task_type"].unique()) == {"CPU"}
    # `matmul dygraph[144.544 us]` -> name `matmul dygraph`, type `matmul`
    names = sorted(t["op_name"].unique().to_list())
    assert all("[" not in n for n in names)
    assert "matmul dygraph" in names and "matmul" in t["op_type"].to_list()
    assert sorted(t["start_ns"].to_list()) == sorted(e["ts"] * 1000 for e in ops)
    assert sorted(t["duration_us"].to_list()) == pytest.approx(sorted(e["dur"] for e in ops), abs=1e-9)
    # String tids resolve to their thread_name metadata; the trailing {} is ignored.
    ev = prof.events
    assert ev.height == sum(1 for e in raw if e.get("ph") not in (None, "M"))
    assert "thread 4513:MainThread(C++)" in ev["thread"].to_list()
    # Host CPU operators: op_statistic is derived, ratios of the card's total sum to 100.
    assert prof.statistic_derived
    assert prof.op_statistic["ratio_pct"].sum() == pytest.approx(100.0)


@pytest.mark.parametrize(
    "header_file, expected_pmu",
    [("header_variant_no_pmu.csv", []), ("header_variant_communication_only.csv", [])],
)
def test_golden_header_variants(samples, tmp_path, header_file, expected_pmu):
    header = next(csv.reader(open(samples / "msprof_golden" / header_file)))
    values = {
        "Device_id": "1",
        "Model ID": "4294967295",
        "Task ID": "N/A",
        "Stream ID": "N/A",
        "Op Name": "hcom_allReduce__123_0_1",
        "OP Type": "hcom_allReduce_",
        "OP State": "N/A",
        "Task Type": "COMMUNICATION",
        "Task Start Time(us)": "1717575960208020.758\t",
        "Task Duration(us)": "12.500",
        "Task Wait Time(us)": "0.000000",
        "Context ID": "N/A",
    }
    target = tmp_path / "op_summary_20240605100000.csv"
    with open(target, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerow([values.get(h, "N/A") for h in header])
    prof = _open(target)
    t = prof.tasks
    assert t.height == 1
    assert list(prof.pmu_columns) == expected_pmu
    row = t.row(0, named=True)
    assert (row["card"], row["task_type"], row["task_id"], row["stream_id"]) == ("1", "COMMUNICATION", None, None)
    assert row["start_ns"] == 1717575960208020758
    # Communication is left out of the derived op_statistic, as msprof does.
    assert prof.op_statistic.height == 0
