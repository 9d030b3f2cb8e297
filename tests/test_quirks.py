"""Each format quirk of FORMATS.md on a tiny inline file."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npuscope.parsers import FrameCache, open_profile
from npuscope.parsers.csv_table import start_to_ns, times_to_ns

ERA_B = (
    "Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,"
    "Task Start Time(us),Task Duration(us),Task Wait Time(us),Block Num,Mix Block Num,"
    "HF32 Eligible,Input Shapes,Input Data Types,Input Formats,Output Shapes,"
    "Output Data Types,Output Formats"
)


def _write(tmp_path: Path, name: str, text: str, newline: str = "\n") -> Path:
    path = tmp_path / name
    body = textwrap.dedent(text).lstrip("\n")
    path.write_bytes(body.replace("\n", newline).encode())
    return path


def _tasks(path: Path) -> pl.DataFrame:
    return open_profile(path, cache=FrameCache(enabled=False)).tasks


def test_tab_quoted_and_plain_start_times(tmp_path):
    path = _write(
        tmp_path,
        "op_summary_20240101000000.csv",
        f"""
        {ERA_B}
        0,4294967295,1,2,aclnnAdd_AddAiCore_Add,Add,static,AI_VECTOR_CORE,1717575960208020.758\t,1.000,0.000000,8,0,NO,\"\"\"8,4096;8,4096\"\"\",DT_BF16;DT_BF16,ND;ND,\"\"\"8,4096\"\"\",DT_BF16,ND
        0,4294967295,2,2,Cast,Cast,dynamic,AI_CORE,"1717575960208030.001\t",2.500,9.000000,8,0,NO,\"\"\"\"\"\",FLOAT16,ND,\"\"\"8\"\"\",FLOAT,ND
        0,4294967295,3,2,Cast,Cast,N/A,AI_CORE,1717575960208040,2.000,N/A,,,N/A,N/A,N/A,N/A,,,
        """,
    )
    t = _tasks(path)
    assert t["start_ns"].to_list() == [1717575960208020758, 1717575960208030001, 1717575960208040000]
    # Literal quotes inside shape cells are stripped; a scalar tensor is an empty string;
    # N/A and empty cells are nulls.
    assert t["input_shapes"].to_list() == ["8,4096;8,4096", "", None]
    assert t["output_shapes"].to_list() == ["8,4096", "8", None]
    assert t["op_state"].to_list() == ["static", "dynamic", None]
    assert t["block_num"].to_list() == [8, 8, None]
    assert t["wait_us"].to_list() == [0.0, 9.0, 0.0]  # N/A wait reads as 0
    assert t["is_aclnn"].to_list() == [True, False, False]
    assert t["hf32_eligible"].to_list() == ["NO", "NO", None]


def test_crlf_line_endings(tmp_path):
    text = f"""
        {ERA_B}
        0,4294967295,1,2,MatMulV2,MatMulV2,static,AI_CORE,1717575960208020.758\t,100.000,0.000000,20,0,NO,"4,4",DT_BF16,ND,"4,4",DT_BF16,ND
        """
    crlf = _tasks(_write(tmp_path, "op_summary_20240101000000.csv", text, "\r\n"))
    assert crlf["output_formats"].to_list() == ["ND"]  # no stray \r in the last column
    assert crlf["start_ns"].to_list() == [1717575960208020758]


def test_block_dim_and_graph_mode_columns(tmp_path):
    path = _write(
        tmp_path,
        "op_summary_0_1_1.csv",
        """
        Model Name,Model ID,Task ID,Stream ID,Infer ID,Op Name,OP Type,Task Type,Task Start Time(us),Task Duration(us),Task Wait Time(us),Block Dim,Mix Block Dim,Input Shapes,Input Data Types,Input Formats,Output Shapes,Output Data Types,Output Formats
        ge_default,1,7,3,2,trans_Cast_0,Cast,AI_CORE,1717575960208020.500\t,3.000,0.000,4,2,"2,2",FLOAT,ND,"2,2",FLOAT16,ND
        """,
    )
    t = _tasks(path)
    row = t.row(0, named=True)
    assert (row["model_name"], row["model_id"], row["infer_id"]) == ("ge_default", "1", "2")
    assert (row["block_num"], row["mix_block_num"]) == (4, 2)
    assert row["op_state"] is None  # optional OP State absent


def test_torch_npu_renamed_columns(tmp_path):
    out = tmp_path / "host_1_2_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    _write(
        out,
        "kernel_details.csv",
        '''
        Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),Block Dim,Input Shapes,Input Data Types,Input Formats,Output Shapes,Output Data Types,Output Formats
        3,aclnnMul_MulAiCore_Mul,Mul,AI_VECTOR_CORE,"1736413971558972.912\t",4.5,1.25,48,"""8,8;8,8""",FLOAT;FLOAT,ND;ND,"""8,8""",FLOAT,ND
        ''',
    )
    prof = open_profile(tmp_path, cache=FrameCache(enabled=False))
    row = prof.tasks.row(0, named=True)
    assert prof.layout == "torch_npu"
    assert (row["op_name"], row["op_type"], row["task_type"]) == ("aclnnMul_MulAiCore_Mul", "Mul", "AI_VECTOR_CORE")
    assert (row["step_id"], row["start_ns"], row["duration_us"], row["wait_us"]) == (
        "3",
        1736413971558972912,
        4.5,
        1.25,
    )
    assert row["input_shapes"] == "8,8;8,8"


def test_wait_derived_when_missing(tmp_path):
    path = _write(
        tmp_path,
        "op_summary_20240101000000.csv",
        """
        Device_id,Op Name,OP Type,Task Type,Task Start Time(us),Task Duration(us)
        0,A,A,AI_CORE,1000.000,10.000
        0,B,B,AI_CORE,1015.500,1.000
        0,C,C,AI_CORE,1016.000,1.000
        1,D,D,AI_CORE,2000.000,1.000
        """,
    )
    t = _tasks(path)
    # max(0, start - prev start - prev duration), per card, first task of each card 0.
    assert t["wait_us"].to_list() == [0.0, 5.5, 0.0, 0.0]
    assert t["card"].to_list() == ["0", "0", "0", "1"]


@settings(max_examples=200, deadline=None)
@given(
    whole=st.integers(min_value=0, max_value=9 * 10**15),
    frac=st.integers(min_value=0, max_value=999),
    tab=st.booleans(),
    quoted=st.booleans(),
)
def test_start_to_ns_is_exact(whole, frac, tab, quoted):
    text = f"{whole}.{frac:03d}" + ("\t" if tab else "")
    if quoted:
        text = f'"{text}"'
    got = pl.DataFrame({"s": [text]}).select(start_to_ns("s", 1000)).item()
    assert got == whole * 1000 + frac
    assert times_to_ns(pl.Series([text]), 1000).item() == whole * 1000 + frac


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "1717575960208020.758\t",
                "1717575960208020.75",
                "1717575960208020",
                "5.42118E+14",
                '"1717575960208020.001\t"',
                None,
            ]
        ),
        min_size=1,
        max_size=8,
    )
)
def test_fast_and_general_time_paths_agree(cells):
    series = pl.Series(cells, dtype=pl.String)
    general = series.to_frame("s").select(start_to_ns("s", 1000))["s"]
    assert times_to_ns(series, 1000).to_list() == general.to_list()


def _trace(tmp_path: Path, name: str, events: object) -> Path:
    path = tmp_path / name
    path.write_bytes(json.dumps(events).encode())
    return path


def test_timeline_float_and_string_ts_and_big_flow_ids(tmp_path):
    big = "18446744073709551557"  # beyond 2^53: must survive as text
    events = [
        {"name": "process_name", "pid": 7, "tid": 0, "ph": "M", "args": {"name": "Ascend Hardware"}},
        {"name": "process_labels", "pid": 7, "tid": 0, "ph": "M", "args": {"labels": "NPU 3"}},
        {"name": "process_name", "pid": 5, "tid": 0, "ph": "M", "args": {"name": "CANN"}},
        {
            "name": "AscendCL@aclopCompileAndExecute",
            "pid": 5,
            "tid": 9,
            "ts": "1717575960208020.750",
            "dur": 990.0,
            "ph": "X",
            "args": {"connection_id": 1},
        },
        {
            "name": "HostToDevice1",
            "pid": 5,
            "tid": 9,
            "ph": "s",
            "cat": "HostToDevice",
            "id": big,
            "ts": "1717575960208020.750",
        },
        {
            "name": "Add",
            "pid": 7,
            "tid": 1,
            "ts": "1717575960209020.758",
            "dur": 1.5,
            "ph": "X",
            "args": {"Task Type": "AI_VECTOR_CORE", "Physic Stream Id": 1, "Task Id": 10, "connection_id": 1},
        },
        {
            "name": "HostToDevice1",
            "pid": 7,
            "tid": 1,
            "ph": "f",
            "bp": "e",
            "cat": "HostToDevice",
            "id": big,
            "ts": "1717575960209020.758",
        },
        {
            "name": "Mul",
            "pid": 7,
            "tid": 1,
            "ts": 542118179416.19,
            "dur": 2.0,
            "ph": "X",
            "args": {"Task Type": "AI_CORE", "Stream Id": 2, "Task Id": 11},
        },
    ]
    prof = open_profile(_trace(tmp_path, "msprof_20240101000000.json", events), cache=FrameCache(enabled=False))
    ev = prof.events
    assert ev.filter(pl.col("ph") == "s")["flow_id"].item() == big
    assert ev.filter(pl.col("name") == "Add")["ts_ns"].item() == 1717575960209020758
    assert ev.filter(pl.col("name") == "Mul")["ts_ns"].item() == 542118179416190
    assert ev.filter(pl.col("name") == "Mul")["stream_id"].item() == "2"  # Era A "Stream Id"
    assert set(ev["card"].unique()) == {"3"}  # host events go to the only NPU card
    # No op_summary: the device task events become the tasks.
    assert prof.tasks_from == "timeline"
    assert sorted(prof.tasks["op_name"].to_list()) == ["Add", "Mul"]


def test_paddle_trace_quirks(tmp_path):
    trace = {
        "displayTimeUnit": "ms",
        "traceEvents": [
            {
                "name": "ProfileStep#100[3.735 ms]",
                "pid": 1,
                "tid": "1(Python)",
                "ts": 1795955688274312,
                "dur": 3735.001,
                "ph": "X",
                "cat": "ProfileStep",
                "args": {},
            },
            {
                "name": "matmul dygraph[144.544 us]",
                "pid": 1,
                "tid": "1(C++)",
                "ts": 1795955688274738,
                "dur": 144.544,
                "ph": "X",
                "cat": "Operator",
                "args": {},
            },
            {
                "name": "relu dygraph[1.200 ms]",
                "pid": 1,
                "tid": "1(C++)",
                "ts": 1795955688276000,
                "dur": 1200.0,
                "ph": "X",
                "cat": "Operator",
                "args": {},
            },
            {"name": "thread_name", "pid": 1, "tid": "1(C++)", "ph": "M", "args": {"name": "thread 1:MainThread(C++)"}},
            {},
        ],
    }
    prof = open_profile(_trace(tmp_path, "x.paddle_trace.json", trace), cache=FrameCache(enabled=False))
    t = prof.tasks
    assert t["op_name"].to_list() == ["matmul dygraph", "relu dygraph"]
    assert t["op_type"].to_list() == ["matmul", "relu"]
    assert t["start_ns"].to_list() == [1795955688274738000, 1795955688276000000]
    assert t["wait_us"].to_list() == pytest.approx([0.0, 1262.0 - 144.544])
    assert prof.events.filter(pl.col("cat") == "Operator")["thread"].unique().to_list() == ["thread 1:MainThread(C++)"]
