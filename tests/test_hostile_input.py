"""Hostile profile input: each case is a correct read or one line (exit 2), never a traceback.

The cases come from an adversarial pass over the parsers: absurd numbers, symlink loops, odd
line endings, files reachable twice, a broken timeline beside a good op_summary, a BOM, a
FIFO, captures whose time stamps are of different kinds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from npuscope.parsers import FrameCache, ProfileError, discover, open_profile

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "samples"
GOLDEN = SAMPLES / "msprof_golden" / "mindstudio_profiler_output"
CANN5 = SAMPLES / "cann5x_device_summary" / "device_0" / "summary" / "op_summary_0_1.csv"
HEADER = "Model ID,Task ID,Stream ID,Op Name,OP Type,Task Type,Task Start Time(us),Task Duration(us),Task Wait Time(us),Block Dim"
PROF = "PROF_000001_20240605100000123_AAAAAAAAAAAAAAAA"


def _open(path: Path, **kw):
    return open_profile(path, cache=FrameCache(enabled=False), **kw)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "npuscope", *args, "--no-cache"], capture_output=True, text=True, timeout=120
    )


def _one_line_exit_2(res: subprocess.CompletedProcess, pattern: str) -> None:
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and pattern in lines[0], res.stderr


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("Task Duration(us)", "inf"),
        ("Task Duration(us)", "nan"),
        ("Task Duration(us)", "1e308"),
        ("Task Duration(us)", "1e400"),
        ("Task Wait Time(us)", "-inf"),
        ("Block Dim", "1e400"),
    ],
)
def test_absurd_numbers_are_one_line(tmp_path, column, value):
    row = {
        "Model ID": "1",
        "Task ID": "2",
        "Stream ID": "3",
        "Op Name": "A",
        "OP Type": "Add",
        "Task Type": "AI_CORE",
        "Task Start Time(us)": "1717575960208020.758\t",
        "Task Duration(us)": "1.0",
        "Task Wait Time(us)": "0",
        "Block Dim": "8",
    }
    row[column] = value
    path = tmp_path / "op_summary_1.csv"
    path.write_text(HEADER + "\n" + ",".join(row[h] for h in HEADER.split(",")) + "\n")
    _one_line_exit_2(_cli("report", str(path)), f"column '{column}' holds")


def test_ids_beyond_int64_are_kept_as_text(tmp_path):
    path = tmp_path / "op_summary_1.csv"
    path.write_text(HEADER + "\n4.29E+30,18446744073709551615,1e30,A,Add,AI_CORE,1717575960208020.758\t,1.0,0,8\n")
    prof = _open(path)
    assert prof.tasks.select("model_id", "task_id", "stream_id").row(0) == ("4.29E+30", "18446744073709551615", "1e30")


def test_op_statistic_count_1e400_is_one_line(tmp_path):
    path = tmp_path / "op_statistic_1.csv"
    path.write_text(
        "OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\n"
        "Add,AI_CORE,1e400,1,1,1,1,100\n"
    )
    _one_line_exit_2(_cli("report", str(path)), "column 'Count' holds")


def test_start_beyond_int64_does_not_wrap(tmp_path):
    path = tmp_path / "op_summary_1.csv"
    # 9.3e15 us * 1000 overflows Int64: it must be refused, not wrapped to a negative time.
    path.write_text(HEADER + "\n1,2,3,A,Add,AI_CORE,9300000000000000\t,1.0,0,8\n")
    _one_line_exit_2(_cli("report", str(path)), "out-of-range start time")


@pytest.mark.parametrize("dur", ['"1e400"', "1e300", "1e400"])
def test_timeline_absurd_duration_is_not_a_traceback(tmp_path, dur):
    path = tmp_path / "msprof_1.json"
    path.write_text(
        '[{"name":"process_name","pid":1,"tid":0,"ph":"M","args":{"name":"Ascend Hardware"}},'
        '{"name":"Add","pid":1,"tid":1,"ts":"1717575960208020.758","dur":' + dur + ',"ph":"X",'
        '"args":{"Task Type":"AI_CORE","Task Id":1e30}},'
        '{"name":"Mul","pid":1,"tid":1,"ts":"1717575960208030.758","dur":2,"ph":"X","args":{"Task Type":"AI_CORE"}}]'
    )
    res = _cli("report", str(path), "--format", "json")
    assert res.returncode in (0, 2) and "Traceback" not in res.stderr, res.stderr


def test_symlink_loops_in_the_tree(tmp_path):
    shutil.copytree(GOLDEN, tmp_path / "mindstudio_profiler_output")
    (tmp_path / "d").mkdir()
    os.symlink("loop", tmp_path / "d" / "loop")
    os.symlink("loop2", tmp_path / "loop2")
    os.symlink("self", tmp_path / "mindstudio_profiler_output" / "self")
    assert _open(tmp_path).tasks.height == 3


def test_cr_only_line_endings_are_one_line(tmp_path):
    path = tmp_path / "op_summary_1.csv"
    path.write_bytes((HEADER + "\r1,2,3,A,Add,AI_CORE,1717575960208020.758,1.0,0,8\r").encode())
    _one_line_exit_2(_cli("report", str(path)), "bare CR")


def test_header_over_128_kib(tmp_path):
    path = tmp_path / "op_summary_1.csv"
    # Long names: the header passes 128 KiB with 5,000 columns (the time to read one grows with
    # the square of the number of columns).
    extra = "".join(f",aic_pmu_event_counter_{i:06d}" for i in range(5000))
    assert len(HEADER + extra) > 128 * 1024
    path.write_text(HEADER + extra + "\n1,2,3,A,Add,AI_CORE,1717575960208020.758,1.0,0,8" + ",0" * 5000 + "\n")
    prof = _open(path)
    assert prof.tasks.height == 1 and len(prof.pmu_columns) == 5000


def test_a_copy_beside_summary_is_read_once(tmp_path):
    device = tmp_path / PROF / "device_0"
    (device / "summary").mkdir(parents=True)
    shutil.copy(CANN5, device / "summary")
    shutil.copy(CANN5, device)  # a copy in device_0/ itself
    assert _open(tmp_path).tasks.height == 4


def test_timeline_symlinked_to_summary_is_read_once(tmp_path):
    device = tmp_path / PROF / "device_0"
    (device / "summary").mkdir(parents=True)
    shutil.copy(CANN5, device / "summary")
    os.symlink("summary", device / "timeline")
    prof = _open(tmp_path)
    assert prof.tasks.height == 4
    assert len(prof.files) == 1


def test_empty_timeline_does_not_block_a_good_op_summary(tmp_path):
    out = tmp_path / "mindstudio_profiler_output"
    out.mkdir()
    shutil.copy(GOLDEN / "op_summary_20240605100000.csv", out)
    (out / "msprof_20240605100000.json").write_bytes(b"")
    prof = _open(tmp_path)
    assert prof.tasks.height == 3 and prof.events is None
    assert any("timeline not read" in n and "empty" in n for n in prof.notes)
    res = _cli("report", str(tmp_path), "--no-timeline")
    assert res.returncode == 0, res.stderr


def test_timeline_with_a_utf8_bom(tmp_path):
    path = tmp_path / "msprof_1.json"
    path.write_bytes(b"\xef\xbb\xbf" + (GOLDEN / "msprof_20240605100000.json").read_bytes())
    assert _open(path).events.height == 25


def test_fifo_as_path_says_what_it_is(tmp_path):
    fifo = tmp_path / "op_summary_1.csv"
    os.mkfifo(fifo)
    with pytest.raises(ProfileError, match="not a regular file or folder"):
        discover(fifo)


def test_newest_first_across_stamp_kinds(tmp_path):
    """A PROF name's 17-digit time, an export's 14-digit stamp and a folder's mtime compare as
    times: text comparison would put any 17-digit stamp first."""
    old_prof = tmp_path / "PROF_000001_20200101000000000_AAAAAAAAAAAAAAAA" / "mindstudio_profiler_output"
    shutil.copytree(GOLDEN, old_prof)
    pt = tmp_path / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    pt.mkdir(parents=True)
    shutil.copy(SAMPLES / "torch_npu_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", pt)
    captures = discover(tmp_path)
    assert [c.layout for c in captures] == ["torch_npu", "era_b"]  # made today vs in 2020


def test_a_parse_that_cannot_fit_is_refused_not_aborted(tmp_path):
    """polars aborts the process (SIGABRT) when an allocation fails: the size is checked first."""
    path = tmp_path / "op_summary_1.csv"
    row = "1,2,3,MatMulV3,MatMulV3,AI_CORE,{start}\t,151.000,0,8\n"
    with open(path, "w") as fh:
        fh.write(HEADER + "\n")
        for i in range(400_000):
            fh.write(row.format(start=f"{1717575960208020 + i}.758"))
    code = (
        "import resource, sys\n"
        "import polars, npuscope.parsers, npuscope.analysis\n"
        "from npuscope.cli import main\n"
        "from npuscope.parsers.memory import _vm_size\n"
        # 20 MB of address space left: far less than parsing the 30 MB file needs.
        "resource.setrlimit(resource.RLIMIT_AS, (_vm_size() + (20 << 20), resource.RLIM_INFINITY))\n"
        f"sys.exit(main(['report', {str(path)!r}, '--no-cache']))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    # Refused at once (the limit is under what npuscope needs to start; the per-file check is
    # tests/test_hardening_round3.py's), never an abort.
    _one_line_exit_2(res, "needs at least 1.5 GiB: raise it (ulimit -v")


ESC_NAME = "Evil\x1b]52;c;ZXZpbA==\x07\x1b[2JOp"


def _evil_profile(tmp_path: Path) -> Path:
    folder = tmp_path / "run\x1b[31mred"
    folder.mkdir()
    path = folder / "op_summary_1.csv"
    rows = [
        f"1,2,3,{ESC_NAME},=HYPERLINK(1),AI_CORE,1717575960208020.758\t,1500.0,0,8",
        "1,3,3,+cmd,@SUM,AI_CORE,1717575960210020.758\t,10.0,600,8",
    ]
    path.write_text(HEADER + "\n" + "\n".join(rows) + "\n")
    return folder


@pytest.mark.parametrize(
    "args",
    [("report",), ("report", "--format", "markdown"), ("report", "--op", ESC_NAME), ("inspect",)],
)
def test_escape_sequences_never_reach_the_terminal(tmp_path, args):
    folder = _evil_profile(tmp_path)
    res = subprocess.run(
        [sys.executable, "-m", "npuscope", args[0], str(folder), *args[1:], "--no-cache"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert "\x1b" not in res.stdout and "\x07" not in res.stdout
    assert "Evil" in res.stdout or args[0] == "inspect"


def test_a_bad_path_with_escapes_is_one_clean_line(tmp_path):
    res = _cli("report", str(tmp_path / "no\x1b]0;title\x07such"))
    assert res.returncode == 2 and "\x1b" not in res.stderr and "\x07" not in res.stderr


def test_exports_hold_no_escape_and_no_formula(tmp_path):
    from npuscope.analysis.export import export_table

    prof = _open(_evil_profile(tmp_path))
    columns = [("op_name", "op_name"), ("op_type", "op_type"), ("duration_us", "duration_us")]
    csv_path, md_path = export_table(prof.tasks, columns, tmp_path / "out", "tasks")
    for path in (csv_path, md_path):
        text = path.read_text()
        assert "\x1b" not in text and "\x07" not in text
    import csv as csv_module

    rows = list(csv_module.DictReader(open(csv_path, newline="")))
    assert {r["op_type"] for r in rows} == {"'=HYPERLINK(1)", "'@SUM"}
    assert rows[1]["op_name"] == "'+cmd"
    assert float(rows[0]["duration_us"]) == 1500.0  # numbers stay numbers


@pytest.mark.parametrize("name", ["ascend_pytorch_profiler.db", "ascend_mindspore_profiler_3.db"])
def test_db_exports_without_rank_or_from_mindspore_are_found(tmp_path, name):
    real = SAMPLES / "real" / "torch_npu_2025_db" / "level1" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out = tmp_path / "run_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    shutil.copy(real / "ascend_pytorch_profiler_0.db", out / name)
    prof = _open(tmp_path)
    assert prof.source_kind == "db" and prof.tasks.height == 191
