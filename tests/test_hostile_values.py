"""Arbitrary values in the id, number and time columns: frames or one line, nothing else.

Real captures hold ids of 2^64-1, spreadsheets write `4.29E+30`, hand edits leave `inf`, `nan`
or text in numeric cells. Whatever a cell holds, reading gives frames (and the analysis runs
on them) or a one-line ProfileError: never another exception, never a wrapped-around number.
"""

from __future__ import annotations

import json

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npuscope.analysis import Thresholds, diagnose
from npuscope.analysis.report import build_report
from npuscope.parsers import FrameCache, ProfileError, open_profile

HOSTILE = st.one_of(
    st.sampled_from(
        [
            "",
            "N/A",
            "inf",
            "-inf",
            "nan",
            "NaN",
            "1e400",
            "-1e400",
            "1e308",
            "4.29E+30",
            "1.69512E+15",
            "18446744073709551615",
            "9223372036854775808",
            "-9223372036854775809",
            "0",
            "-1",
            "1.5",
            "99999999999999999999999.999",
            "abc",
            "0x10",
            "1_000",
            " 7 ",
            "\t12.5\t",
        ]
    ),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(alphabet=st.characters(blacklist_characters=',"\r\n', blacklist_categories=("Cs",)), max_size=12),
)
ID_COLUMNS = ("Model ID", "Task ID", "Stream ID")
NUMBER_COLUMNS = ("Task Duration(us)", "Task Wait Time(us)", "Block Dim")
TIME_COLUMNS = ("Task Start Time(us)",)
HEADER = (
    "Model ID",
    "Task ID",
    "Stream ID",
    "Op Name",
    "OP Type",
    "Task Type",
    *TIME_COLUMNS,
    "Task Duration(us)",
    "Task Wait Time(us)",
    "Block Dim",
    "Input Shapes",
)
GOOD = {
    "Model ID": "4294967295",
    "Task ID": "10",
    "Stream ID": "1",
    "Op Name": "MatMulV3",
    "OP Type": "MatMulV3",
    "Task Type": "AI_CORE",
    "Task Start Time(us)": "1717575960208020.758\t",
    "Task Duration(us)": "151.000",
    "Task Wait Time(us)": "0",
    "Block Dim": "8",
    "Input Shapes": '"""8,4096"""',
}


def _check(path) -> None:
    try:
        prof = open_profile(path, cache=FrameCache(enabled=False))
    except ProfileError as exc:
        assert "\n" not in str(exc) and str(exc)
        return
    assert prof.tasks["start_ns"].dtype == pl.Int64
    starts = prof.tasks["start_ns"].drop_nulls()
    assert starts.len() == 0 or int(starts.min()) >= -9_000_000_000_000_000_000
    build_report(prof, diagnose(prof, Thresholds()), top=3)


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(
    column=st.sampled_from(ID_COLUMNS + NUMBER_COLUMNS + TIME_COLUMNS),
    values=st.lists(HOSTILE, min_size=1, max_size=3),
)
def test_op_summary_cells(tmp_path_factory, column, values):
    folder = tmp_path_factory.mktemp("csv")
    rows = []
    for i, value in enumerate(values):
        row = dict(GOOD)
        row["Task Start Time(us)"] = f"1717575960208{i:03d}.758\t"
        row[column] = value
        rows.append(row)
    lines = [",".join(HEADER)] + [",".join(r[h] for h in HEADER) for r in rows]
    path = folder / "op_summary_1.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _check(path)


JSON_VALUES = st.one_of(
    HOSTILE,
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.none(),
)


@SETTINGS
@given(
    field=st.sampled_from(["ts", "dur", "Task Id", "Physic Stream Id", "connection_id", "pid", "tid"]),
    value=JSON_VALUES,
)
def test_timeline_fields(tmp_path_factory, field, value):
    folder = tmp_path_factory.mktemp("json")
    event = {
        "name": "Add",
        "pid": 7,
        "tid": 1,
        "ts": "1717575960208020.758",
        "dur": 1.5,
        "ph": "X",
        "args": {"Task Type": "AI_CORE", "Physic Stream Id": 1, "Task Id": 10, "connection_id": 1},
    }
    if field in event:
        event[field] = value
    else:
        event["args"][field] = value
    events = [
        {"name": "process_name", "pid": 7, "tid": 0, "ph": "M", "args": {"name": "Ascend Hardware"}},
        event,
        {
            "name": "Mul",
            "pid": 7,
            "tid": 1,
            "ts": "1717575960208030.758",
            "dur": 2.0,
            "ph": "X",
            "args": {"Task Type": "AI_CORE"},
        },
    ]
    path = folder / "msprof_1.json"
    # Python's json writes Infinity/NaN for non-finite floats; big ints as digits.
    path.write_text(json.dumps(events), encoding="utf-8")
    _check(path)


KD_HEADER = b"Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),Block Dim\n"
OS_HEADER = (",".join(HEADER) + "\n").encode()
TRACE_HEAD = b'[{"name":"process_name","pid":1,"tid":0,"ph":"M","args":{"name":"Ascend Hardware"}},'


@SETTINGS
@given(
    name=st.sampled_from(["op_summary_1.csv", "kernel_details.csv", "msprof_1.json"]),
    prefix=st.booleans(),
    body=st.binary(max_size=600),
)
def test_arbitrary_bytes(tmp_path_factory, name, prefix, body):
    """Whole files of arbitrary bytes (after a valid header half of the time)."""
    folder = tmp_path_factory.mktemp("bytes")
    head = {"op_summary_1.csv": OS_HEADER, "kernel_details.csv": KD_HEADER, "msprof_1.json": TRACE_HEAD}[name]
    path = folder / name
    path.write_bytes((head if prefix else b"") + body)
    _check(path)


ROW_TOKENS = st.sampled_from(
    [
        "1",
        "0",
        "1717575960208020.758\t",
        "N/A",
        "",
        '"""8,4096"""',
        "AI_CORE",
        "hcom_allReduce__1_0_1",
        "HCCL",
        "1e400",
        "-5",
        "x",
        '"',
        "\r",
        ",",
    ]
)


@SETTINGS
@given(rows=st.lists(st.lists(ROW_TOKENS, min_size=0, max_size=14), min_size=1, max_size=6))
def test_arbitrary_rows_of_plausible_cells(tmp_path_factory, rows):
    """Rows built from the cells real files hold, in any number and order."""
    folder = tmp_path_factory.mktemp("rows")
    path = folder / "kernel_details.csv"
    path.write_bytes(KD_HEADER + "".join(",".join(r) + "\n" for r in rows).encode())
    _check(path)
