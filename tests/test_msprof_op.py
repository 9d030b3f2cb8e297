"""msprof op folders (OPPROF_*): the real 910B2 set in fixtures/samples/msprof_op read into
figures equal to its CSVs read here with the csv module; inspect and report --op as real CLI
calls, alone and beside a capture; bad files give one line, never a traceback; nothing is
written into the profile folder."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from npuscope import cli
from npuscope.analysis import Thresholds, diagnose
from npuscope.analysis.bound import BOUND_WORDS, PIPE_NAMES
from npuscope.analysis.op_report import find_task, op_report
from npuscope.parsers import FrameCache, open_profile
from npuscope.parsers.layout import MsprofOpOnly, discover
from npuscope.parsers.msprof_op import BOUND_PIPES, read_msprof_op

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "samples" / "msprof_op"
REAL = SAMPLES / "vec_add_910b2"  # holds OPPROF_001 (renamed upstream)
OPPROF = REAL / "OPPROF_001"
APP = SAMPLES / "tilelang_app_910b2"  # a real msprof PROF whose task is `main_kernel`
MIN_PCT = Thresholds().bound_min_pct


def _rows(name: str, folder: Path = OPPROF) -> list[dict[str, str]]:
    with open(folder / name, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _num(cell: str | None) -> float | None:
    return None if cell in (None, "", "NA", "N/A") else float(cell)


def _mean(name: str, column: str) -> float | None:
    values = [v for v in (_num(r[column]) for r in _rows(name)) if v is not None]
    return sum(values) / len(values) if values else None


def _sum(name: str, column: str) -> float:
    return sum(v for v in (_num(r[column]) for r in _rows(name)) if v is not None)


def _pct(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio * 100:.1f}%"


def _truth_bound() -> tuple[str, dict[str, float | None]]:
    """The bound from the CSVs: each pipe the largest mean of its columns, the busiest wins."""
    header = _rows("PipeUtilization.csv")[0].keys()
    pipes: dict[str, float | None] = {}
    for pipe, cols in BOUND_PIPES:
        means = [m for c in cols if c in header and (m := _mean("PipeUtilization.csv", c)) is not None]
        pipes[pipe] = max(means) if means else None
    pipe, best = max(((p, v) for p, v in pipes.items() if v is not None), key=lambda pv: pv[1])
    return (pipe if best * 100 >= MIN_PCT else "mixed"), pipes


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(folder.rglob("*"))}


def _copy(tmp_path: Path) -> Path:
    dest = tmp_path / "opprof" / "OPPROF_001"
    shutil.copytree(OPPROF, dest)
    return dest


# --------------------------------------------------------------------------- the parser


def test_basic_info_equals_the_csv():
    row = _rows("OpBasicInfo.csv")[0]
    kernel = read_msprof_op(OPPROF).kernels[0]
    assert kernel.op_name == row["Op Name"] == "main_kernel_mix_aic"
    assert kernel.op_type == row["Op Type"]
    assert kernel.duration_us == float(row["Task Duration(us)"])
    assert kernel.block_dim == int(row["Block Dim"])
    assert kernel.mix_block_dim == int(row["Mix Block Dim"])
    assert kernel.device == row["Device Id"]
    assert kernel.current_freq_mhz == float(row["Current Freq"])
    assert kernel.rated_freq_mhz == float(row["Rated Freq"])
    assert kernel.base_name == "main_kernel"


def test_pipe_ratios_are_the_mean_of_each_column():
    kernel = read_msprof_op(OPPROF).kernels[0]
    header = [c for c in _rows("PipeUtilization.csv")[0] if c.endswith("_ratio") and c.count("_") == 2]
    assert header, "the sample has ratio columns"
    got = {f"{core}_{unit}_ratio": v for core, unit, v in kernel.ratios}
    for column in header:
        assert got[column] == pytest.approx(_mean("PipeUtilization.csv", column), rel=1e-12), column
    assert set(got) == set(header)


def test_bound_is_the_busiest_pipe():
    from npuscope.analysis.op_report import kernel_bound

    kernel = read_msprof_op(OPPROF).kernels[0]
    assert tuple(p for p, _ in BOUND_PIPES) == PIPE_NAMES  # the parser spells analysis/bound.py's pipes
    bound, pipes = _truth_bound()
    assert dict(kernel.bound_pipes) == pytest.approx(pipes)
    assert kernel_bound(kernel, MIN_PCT) == bound == "memory-in"  # aiv_mte2_ratio, 20.2%
    assert kernel_bound(kernel, 25.0) == "mixed"  # no pipe reaches 25% of the time


def test_memory_and_l2_equal_the_csvs():
    kernel = read_msprof_op(OPPROF).kernels[0]
    memory = {f.source.split(" ", 1)[1].split(",")[0]: f.value for f in kernel.memory}
    for column in (c for c in _rows("Memory.csv")[0] if "_datas(KB)" in c):
        assert memory[column] == pytest.approx(_sum("Memory.csv", column)), column
    assert memory["read_main_memory_datas(KB)"] == pytest.approx(263.625)
    rows = _rows("L2Cache.csv")
    hits = sum(_num(r[c]) or 0 for r in rows for c in r if c.endswith("_hit"))
    misses = sum(_num(r[c]) or 0 for r in rows for c in r if c.endswith("_miss_allocate"))
    l2 = {f.label: f.value for f in kernel.l2}
    assert l2["L2 hit rate (total)"] == pytest.approx(100 * hits / (hits + misses))
    assert l2["L2 requests"] == hits + misses == 2368
    # Each row's own rate is given back by the same rule (the rule is msprof op's).
    cube = rows[0]
    h = sum(float(cube[c]) for c in cube if c.startswith("aic") and c.endswith("_hit"))
    m = sum(float(cube[c]) for c in cube if c.startswith("aic") and c.endswith("_miss_allocate"))
    assert 100 * h / (h + m) == pytest.approx(float(cube["aic_total_hit_rate(%)"]), rel=1e-6)
    fops = {f.label: f.value for f in kernel.other}
    assert fops["aiv_vec_fops"] == _sum("ArithmeticUtilization.csv", "aiv_vec_fops")
    assert [p.name for p in kernel.files] == [
        "OpBasicInfo.csv",
        "PipeUtilization.csv",
        "ArithmeticUtilization.csv",
        "Memory.csv",
        "L2Cache.csv",
        "ResourceConflictRatio.csv",
    ]


def test_several_kernels_in_op_and_launch_folders(tmp_path):
    """The multi-kernel layout of the msopprof guide: OPPROF/<OpName>/<launch>/<Metric>_<ts>.csv."""
    root = tmp_path / "OPPROF_20240603022812_ABCDEFGH"
    for op, launch in (("Add", "0"), ("Add", "1"), ("Sub", "0")):
        d = root / op / launch
        d.mkdir(parents=True)
        for f in OPPROF.iterdir():
            shutil.copy(f, d / f"{f.stem}_20240603022812284.csv")
    (root / "dump").mkdir()
    result = read_msprof_op(root)
    assert [k.launch for k in result.kernels] == ["Add/0", "Add/1", "Sub/0"]
    assert all(k.duration_us == 7.98 for k in result.kernels)


# --------------------------------------------------------------------------- the CLI, alone


def test_inspect_alone(capsys):
    assert cli.main(["inspect", str(REAL)]) == 0
    out = capsys.readouterr().out
    row = _rows("OpBasicInfo.csv")[0]
    assert "msprof op OPPROF_001: 1 kernel(s)" in out
    assert f"{row['Op Name']}  {row['Op Type']}  {float(row['Task Duration(us)']):,.3f} us  block dim 1 (mix 2)" in out
    for name in ("OpBasicInfo.csv", "PipeUtilization.csv", "Memory.csv", "L2Cache.csv"):
        assert f"OPPROF_001/{name}" in out


def test_report_op_alone(capsys):
    assert cli.main(["report", str(OPPROF), "--op", "main_kernel_mix_aic"]) == 0
    out = capsys.readouterr().out
    bound, pipes = _truth_bound()
    assert f"| Bound | {bound}: {BOUND_WORDS[bound]}" in out
    assert f"busiest pipe: memory-in {_pct(pipes['memory-in'])}" in out
    assert "| Block Dim | 1 (Mix Block Dim 2) |" in out
    aiv = _mean("PipeUtilization.csv", "aiv_mte2_ratio")
    aic = _mean("PipeUtilization.csv", "aic_mte2_ratio")
    assert f"| mte2 | {_pct(aic)} | {_pct(aiv)} |" in out
    assert f"| vec | - | {_pct(_mean('PipeUtilization.csv', 'aiv_vec_ratio'))} |" in out
    assert f"| GM -> UB | {_sum('Memory.csv', 'GM_to_UB_datas(KB)'):,.3f} KB |" in out
    rows = _rows("L2Cache.csv")
    hits = sum(_num(r[c]) or 0 for r in rows for c in r if c.endswith("_hit"))
    misses = sum(_num(r[c]) or 0 for r in rows for c in r if c.endswith("_miss_allocate"))
    assert f"| L2 hit rate (total) | {100 * hits / (hits + misses):.2f}% |" in out


def test_report_without_op_lists_the_kernels(capsys, tmp_path):
    root = tmp_path / "OPPROF_20240603022812_ABCDEFGH"
    for op in ("Add", "Sub"):
        shutil.copytree(OPPROF, root / op / "0")
    assert cli.main(["report", str(root)]) == 0
    out = capsys.readouterr().out
    assert (
        "| #0 | `main_kernel_mix_aic` | mix | 7.980 | 1 | 0 | memory-in | `OPPROF_20240603022812_ABCDEFGH/Add/0` |"
        in out
    )
    assert "`OPPROF_20240603022812_ABCDEFGH/Sub/0`" in out
    assert "--op NAME" in out and "## msprof op" not in out
    assert cli.main(["report", str(root), "--op", "#1"]) == 0
    assert "## msprof op: `main_kernel_mix_aic` (Sub/0)" in capsys.readouterr().out


def test_report_json_alone(capsys):
    assert cli.main(["report", str(REAL), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    kernel = doc["folders"][0]["kernels"][0]
    assert doc["schema"] == "npuscope.msprof_op/1"
    assert kernel["op_name"] == "main_kernel_mix_aic" and kernel["bound"] == "memory-in"
    assert kernel["duration_us"] == float(_rows("OpBasicInfo.csv")[0]["Task Duration(us)"])


def test_unknown_kernel_is_one_line(capsys):
    assert cli.main(["report", str(REAL), "--op", "NoSuchKernel"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no kernel named 'NoSuchKernel'" in err and "main_kernel_mix_aic" in err


def test_real_subprocess():
    proc = subprocess.run(
        [sys.executable, "-m", "npuscope", "report", str(REAL), "--op", "main_kernel"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "## msprof op: `main_kernel_mix_aic` (OPPROF_001)" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_explorer_path_says_what_it_is():
    """The explorer opens through discover: alone, an OPPROF folder is one line, not a crash."""
    with pytest.raises(MsprofOpOnly) as err:
        discover(REAL)
    assert "npuscope report" in str(err.value) and "\n" not in str(err.value)


# --------------------------------------------------------------------------- beside a capture


@pytest.fixture
def beside(tmp_path) -> Path:
    """A real PROF (task `main_kernel`) and the real OPPROF (`main_kernel_mix_aic`, another run
    of a TileLang mix kernel named `main_kernel`) side by side: what the name match sees."""
    root = tmp_path / "run"
    shutil.copytree(APP, root)
    shutil.copytree(OPPROF, root / "OPPROF_001")
    return root


def test_discover_attaches_the_folder(beside):
    (capture,) = discover(beside)
    assert capture.layout == "era_b" and capture.msprof_op == (beside / "OPPROF_001",)


def test_report_op_beside_a_capture(beside, capsys):
    assert cli.main(["report", str(beside), "--op", "main_kernel"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## Op report: `main_kernel` (main_kernel)")
    assert "### msprof op: `main_kernel_mix_aic` (OPPROF_001)" in out
    assert f"| mte2 | {_pct(_mean('PipeUtilization.csv', 'aic_mte2_ratio'))} |" in out
    assert "| Task Duration (us) | 7.980 |" in out and "| Task Duration (us) | 92.600 |" in out


def test_inspect_beside_a_capture(beside, capsys):
    assert cli.main(["inspect", str(beside)]) == 0
    out = capsys.readouterr().out
    assert "capture   PROF_000001_20260606121223051_GECRNPRPFIQLEHLA" in out
    assert "msprof op OPPROF_001: 1 kernel(s)\n  [0] main_kernel_mix_aic  mix  7.980 us" in out


def test_the_explorers_op_report_has_the_section(beside):
    """The explorer's `y` (MainScreen.copy_report) and the task detail's copy call op_report
    with the profile it opened: the section is there."""
    profile = open_profile(beside, cache=FrameCache(enabled=False))
    diagnosis = diagnose(profile, Thresholds())
    text = op_report(profile, diagnosis, find_task(diagnosis, "main_kernel"))
    assert "### msprof op: `main_kernel_mix_aic`" in text


def test_no_matching_kernel_says_so(beside, capsys):
    basic = beside / "OPPROF_001" / "OpBasicInfo.csv"
    basic.write_text(basic.read_text().replace("main_kernel_mix_aic", "other_kernel"))
    assert cli.main(["report", str(beside), "--op", "main_kernel"]) == 0
    out = capsys.readouterr().out
    assert "### msprof op" not in out
    assert "no kernel of the msprof op folder(s) beside the capture is `main_kernel`" in out
    assert "`other_kernel`" in out


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "content, says",
    [
        ("", "the file is empty"),
        ("Op Name,Op Type,Task Duration(us),Block Dim,\n", "no kernel row"),
        ("Op Name,Op Type,Task Duration(us),Block Dim,\nk,vector,fast,8,\n", "'Task Duration(us)', row 1: 'fast'"),
        ("Op Name,Op Type,Task Duration(us),Block Dim,\nk,vector,inf,8,\n", "is not a number"),
        ("Name,Type\nk,vector\n", "no 'Op Name', 'Task Duration(us)' column"),
    ],
)
def test_damaged_basic_info_is_one_line(tmp_path, capsys, content, says):
    folder = _copy(tmp_path)
    (folder / "OpBasicInfo.csv").write_text(content)
    for command in ("report", "inspect"):
        code = cli.main([command, str(folder)])
        captured = capsys.readouterr()
        if command == "report":
            assert code == 2 and captured.err.count("\n") == 1 and says in captured.err, captured.err
        else:  # inspect names the folder it cannot read and goes on
            assert code == 0 and "UNREADABLE" in captured.out and says in captured.out
        assert "Traceback" not in captured.err


@pytest.mark.parametrize(
    "name, content, says",
    [
        ("L2Cache.csv", "", "L2Cache.csv: the file is empty"),
        ("PipeUtilization.csv", "block_id,sub_block_id,aiv_vec_ratio\n0,vector0,lots\n", "'aiv_vec_ratio', row 1"),
        ("Memory.csv", "block_id,sub_block_id,read_main_memory_datas(KB)\n", "Memory.csv: no rows"),
    ],
)
def test_damaged_metric_file_is_a_note(tmp_path, capsys, name, content, says):
    folder = _copy(tmp_path)
    (folder / name).write_text(content)
    assert cli.main(["report", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "- note: " in out and says in out
    assert f"`{name}`" not in out.rsplit("Files: ", 1)[1]  # left out of the files read


def test_ratios_fall_back_to_the_other_files(tmp_path):
    folder = _copy(tmp_path)
    (folder / "PipeUtilization.csv").unlink()
    kernel = read_msprof_op(folder).kernels[0]
    got = {f"{c}_{u}_ratio": v for c, u, v in kernel.ratios}
    assert got["aiv_vec_ratio"] == pytest.approx(_mean("ArithmeticUtilization.csv", "aiv_vec_ratio"))
    assert got["aiv_mte2_ratio"] == pytest.approx(_mean("Memory.csv", "aiv_mte2_ratio"))
    assert "aic_scalar_ratio" not in got  # only PipeUtilization has it


def test_nothing_is_written_into_the_profile_folder(beside, tmp_path, capsys):
    before = _snapshot(beside)
    for argv in (
        ["inspect", str(beside)],
        ["report", str(beside)],
        ["report", str(beside), "--op", "main_kernel"],
        ["inspect", str(beside / "OPPROF_001")],
        ["report", str(beside / "OPPROF_001")],
    ):
        assert cli.main(argv) == 0, argv
    capsys.readouterr()
    assert _snapshot(beside) == before


async def test_the_explorers_y_writes_the_section(beside, tmp_path):
    """In the explorer itself (Pilot): `y` on the op summary's task copies and writes the op
    report with the msprof op figures of the kernel beside the capture."""
    from npuscope.tui.app import NpuscopeApp
    from npuscope.tui.widgets.frame_table import FrameTable

    app = NpuscopeApp(beside, cache=False, export_dir=tmp_path / "exports")
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        screen = app.main
        assert screen.profile is not None
        screen.query_one("#summary-table", FrameTable).focus()
        await pilot.press("y")
        await pilot.pause()
        assert "### msprof op: `main_kernel_mix_aic` (OPPROF_001)" in app.clipboard
        assert f"| mte2 | {_pct(_mean('PipeUtilization.csv', 'aic_mte2_ratio'))} |" in app.clipboard
        (written,) = (tmp_path / "exports").glob("op-report-*.md")
        assert written.read_text() == app.clipboard
    assert sorted(p.name for p in beside.iterdir()) == ["OPPROF_001", "PROF_000001_20260606121223051_GECRNPRPFIQLEHLA"]
