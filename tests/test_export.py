"""Exports of the explorer's tables and op reports: contents, no overwrite, atomicity, location."""

from __future__ import annotations

import csv
import errno
import os
from pathlib import Path

import polars as pl
import pytest
from tiny import profile, task

from npuscope.analysis import diagnose, export
from npuscope.analysis.export import export_dir, export_table, write_text_atomic
from npuscope.parsers import ProfileError

FRAME = pl.DataFrame(
    {
        "row": pl.Series([0, 1, 2], dtype=pl.UInt32),
        "op_name": ["MatMul|fused", "Cast\nline two", None],
        "op_type": ["MatMulV2", "Cast", "Add"],
        "duration_us": [1234.5, 2.25, None],
        "input_shapes": ['8,4096;"4096"', "8", ""],
    }
)
COLUMNS = [
    ("op_name", "Op Name"),
    ("op_type", "OP Type"),
    ("duration_us", "Duration(us)"),
    ("input_shapes", "Input Shapes, all"),
]


def read_csv(path: Path) -> list[list[str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    monkeypatch.delenv(export.EXPORT_DIR_ENV, raising=False)


def test_export_writes_csv_and_markdown(tmp_path):
    out = tmp_path / "new" / "nested"
    csv_path, md_path = export_table(FRAME, COLUMNS, out, "tasks")
    assert (csv_path, md_path) == (out / "tasks.csv", out / "tasks.md")
    assert read_csv(csv_path) == [
        ["Op Name", "OP Type", "Duration(us)", "Input Shapes, all"],
        ["MatMul|fused", "MatMulV2", "1234.5", '8,4096;"4096"'],
        ["Cast\nline two", "Cast", "2.25", "8"],
        ["", "Add", "", ""],
    ]
    md = md_path.read_text(encoding="utf-8").splitlines()
    assert md == [
        "| Op Name | OP Type | Duration(us) | Input Shapes, all |",
        "| --- | --- | ---: | --- |",
        '| MatMul\\|fused | MatMulV2 | 1,234.500 | 8,4096;"4096" |',
        "| Cast line two | Cast | 2.250 | 8 |",
        "|  | Add |  |  |",
    ]
    assert sorted(p.name for p in out.iterdir()) == ["tasks.csv", "tasks.md"]


def test_export_keeps_column_order_titles_and_repeated_keys(tmp_path):
    cols = [("op_type", "Type"), ("row", "#"), ("op_type", "Type again")]
    csv_path, _ = export_table(FRAME, cols, tmp_path, "t")
    assert read_csv(csv_path) == [
        ["Type", "#", "Type again"],
        ["MatMulV2", "0", "MatMulV2"],
        ["Cast", "1", "Cast"],
        ["Add", "2", "Add"],
    ]


def test_export_of_an_unknown_column_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="'nope'"):
        export_table(FRAME, [("nope", "Nope")], tmp_path, "t")
    assert list(tmp_path.iterdir()) == []


def test_markdown_stops_at_1000_rows_and_says_how_many_are_left_out(tmp_path):
    big = pl.DataFrame({"i": range(1234), "name": [f"op{i}" for i in range(1234)]})
    csv_path, md_path = export_table(big, [("i", "I"), ("name", "Name")], tmp_path, "big")
    assert len(read_csv(csv_path)) == 1 + 1234
    lines = md_path.read_text().splitlines()
    table = [line for line in lines if line.startswith("|")]
    assert len(table) == 2 + 1000
    assert table[-1] == "| 999 | op999 |"
    assert lines[-1] == "234 more rows left out; the CSV file has all 1,234 rows."


def test_markdown_of_exactly_1000_rows_leaves_nothing_out(tmp_path):
    frame = pl.DataFrame({"i": range(1000)})
    _, md_path = export_table(frame, [("i", "I")], tmp_path, "k")
    lines = md_path.read_text().splitlines()
    assert len(lines) == 1002 and "left out" not in lines[-1]


def test_empty_table_exports_a_header(tmp_path):
    csv_path, md_path = export_table(FRAME.head(0), COLUMNS, tmp_path, "none")
    assert read_csv(csv_path) == [["Op Name", "OP Type", "Duration(us)", "Input Shapes, all"]]
    assert len(md_path.read_text().splitlines()) == 2


def test_an_existing_stem_is_never_overwritten(tmp_path):
    first = export_table(FRAME, COLUMNS, tmp_path, "tasks")
    before = first[0].read_bytes()
    second = export_table(FRAME.head(1), COLUMNS, tmp_path, "tasks")
    third = export_table(FRAME.head(2), COLUMNS, tmp_path, "tasks")
    assert [p.name for p in second] == ["tasks-2.csv", "tasks-2.md"]
    assert [p.name for p in third] == ["tasks-3.csv", "tasks-3.md"]
    assert first[0].read_bytes() == before
    assert len(read_csv(second[0])) == 2 and len(read_csv(third[0])) == 3


def test_one_existing_file_of_the_pair_moves_both_to_a_new_stem(tmp_path):
    (tmp_path / "ops.md").write_text("mine")
    csv_path, md_path = export_table(FRAME, COLUMNS, tmp_path, "ops")
    assert (csv_path.name, md_path.name) == ("ops-2.csv", "ops-2.md")
    assert (tmp_path / "ops.md").read_text() == "mine"
    assert not (tmp_path / "ops.csv").exists()


def test_stem_cannot_leave_the_folder(tmp_path):
    out = tmp_path / "out"
    csv_path, md_path = export_table(FRAME, COLUMNS, out, "../a/b c")
    assert csv_path.parent == out and md_path.parent == out
    assert csv_path.name == "a_b_c.csv"
    assert export_table(FRAME, COLUMNS, out, "///")[0].name == "export.csv"


def test_files_get_ordinary_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        csv_path, md_path = export_table(FRAME, COLUMNS, tmp_path, "perm")
        report = write_text_atomic(tmp_path / "r.md", "x")
    finally:
        os.umask(old)
    for path in (csv_path, md_path, report):
        assert path.stat().st_mode & 0o777 == 0o644


def _full_disk(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_failed_write_leaves_no_file(tmp_path, monkeypatch):
    monkeypatch.setattr(pl.DataFrame, "write_csv", _full_disk)
    with pytest.raises(ProfileError) as info:
        export_table(FRAME, COLUMNS, tmp_path, "tasks")
    msg = str(info.value)
    assert msg.startswith(f"{tmp_path}: cannot write the export (No space left on device)")
    assert "\n" not in msg and "free some space" in msg
    assert list(tmp_path.iterdir()) == []


def test_a_failed_rename_of_the_second_file_removes_the_first(tmp_path, monkeypatch):
    real = os.replace
    calls = []

    def replace(src, dst):
        calls.append(Path(dst).name)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(src, dst)

    monkeypatch.setattr(export.os, "replace", replace)
    with pytest.raises(ProfileError, match=r"tasks\.md: cannot write the export \(No space left on device\)"):
        export_table(FRAME, COLUMNS, tmp_path, "tasks")
    assert calls == ["tasks.csv", "tasks.md"]
    assert list(tmp_path.iterdir()) == []


def test_an_interrupted_export_leaves_no_temporary_file(tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(pl.DataFrame, "write_csv", interrupted)
    with pytest.raises(KeyboardInterrupt):
        export_table(FRAME, COLUMNS, tmp_path, "tasks")
    assert list(tmp_path.iterdir()) == []


def test_an_unwritable_folder_is_a_profile_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    for out in (blocker / "sub", blocker):
        with pytest.raises(ProfileError) as info:
            export_table(FRAME, COLUMNS, out, "tasks")
        msg = str(info.value)
        assert msg.startswith(f"{out}: ") and "\n" not in msg
        assert export.EXPORT_DIR_ENV in msg
    assert info.value.title == "Cannot write export"
    assert blocker.read_text() == "not a folder"


def test_write_text_atomic(tmp_path):
    target = tmp_path / "reports" / "op-MatMulV2.md"
    assert write_text_atomic(target, "## Op report\n") == target
    assert target.read_text(encoding="utf-8") == "## Op report\n"
    again = write_text_atomic(target, "second ü\n")
    assert again == tmp_path / "reports" / "op-MatMulV2-2.md"
    assert again.read_text(encoding="utf-8") == "second ü\n"
    assert target.read_text(encoding="utf-8") == "## Op report\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["op-MatMulV2-2.md", "op-MatMulV2.md"]


def test_write_text_atomic_failure_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(export.os, "replace", _full_disk)
    target = tmp_path / "r.md"
    with pytest.raises(ProfileError, match=r"r\.md: cannot write the export \(No space left on device\)"):
        write_text_atomic(target, "text")
    assert list(tmp_path.iterdir()) == []


def test_export_of_diagnosed_tasks(tmp_path):
    diag = diagnose(profile([task("MatMul_1", 0, 100, op_type="MatMulV2"), task("Add_2", 150, 5)]))
    cols = [
        ("row", "#"),
        ("op_name", "Op Name"),
        ("duration_us", "Duration(us)"),
        ("wait_us", "Wait(us)"),
        ("wait_cause", "Wait Cause"),
        ("is_aclnn", "aclnn"),
    ]
    csv_path, md_path = export_table(diag.tasks, cols, tmp_path, "tasks-card0")
    got = read_csv(csv_path)
    assert got[0] == ["#", "Op Name", "Duration(us)", "Wait(us)", "Wait Cause", "aclnn"]
    assert [r[1] for r in got[1:]] == ["MatMul_1", "Add_2"]
    assert [float(r[2]) for r in got[1:]] == [100.0, 5.0]
    assert "| 1 | Add_2 | 5.000 |" in md_path.read_text()


# --- where exports go ---------------------------------------------------------------------------


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    return h


def test_export_dir_from_the_environment(tmp_path, monkeypatch, home):
    monkeypatch.setenv(export.EXPORT_DIR_ENV, str(tmp_path / "mine"))
    assert export_dir(tmp_path / "prof") == tmp_path / "mine"
    monkeypatch.setenv(export.EXPORT_DIR_ENV, "~/exp")
    assert export_dir(tmp_path / "prof") == home / "exp"


def test_export_dir_is_under_the_working_directory(tmp_path, monkeypatch, home):
    prof = tmp_path / "runs" / "prof"
    prof.mkdir(parents=True)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert export_dir(prof) == work.resolve() / "npuscope-exports"
    monkeypatch.chdir(tmp_path / "runs")  # beside the profile, not inside it
    assert export_dir(prof) == (tmp_path / "runs").resolve() / "npuscope-exports"


def test_export_dir_never_inside_the_profile_folder(tmp_path, monkeypatch, home):
    prof = tmp_path / "prof"
    (prof / "device_0" / "summary").mkdir(parents=True)
    monkeypatch.chdir(prof)
    assert export_dir(prof) == home / "npuscope-exports"
    monkeypatch.chdir(prof / "device_0" / "summary")
    assert export_dir(prof) == home / "npuscope-exports"
    assert export_dir(Path("..") / "..") == home / "npuscope-exports"


def test_export_dir_for_a_profile_file_avoids_its_folder(tmp_path, monkeypatch, home):
    folder = tmp_path / "traces"
    folder.mkdir()
    trace = folder / "paddle_trace.json"
    trace.write_text("{}")
    monkeypatch.chdir(folder)
    assert export_dir(trace) == home / "npuscope-exports"
    monkeypatch.chdir(tmp_path)
    assert export_dir(trace) == tmp_path.resolve() / "npuscope-exports"


def test_export_dir_treats_the_whole_prof_capture_as_the_profile(tmp_path, monkeypatch, home):
    capture = tmp_path / "PROF_000001_20240605163600123_ABCDEFGHIJ"
    device = capture / "device_0"
    device.mkdir(parents=True)
    monkeypatch.chdir(capture)
    assert export_dir(device) == home / "npuscope-exports"
    monkeypatch.chdir(tmp_path)
    assert export_dir(device) == tmp_path.resolve() / "npuscope-exports"
