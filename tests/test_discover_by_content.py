"""Profile files found by their content when no name matches: a torch_npu timeline renamed
`trace.json`, an op_summary renamed `tasks.csv`; bounded (the largest MAX_SNIFFED files, the
first SNIFF_BYTES of each), counted by the calls to the one function that opens them; and a
torch_npu trace given alone says torch_npu, not "file"."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from npuscope import cli
from npuscope.parsers import FrameCache, ProfileError, layout, open_profile
from npuscope.parsers.layout import MAX_SNIFFED, SNIFF_BYTES, discover

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "samples"
TRACE = SAMPLES / "torch_npu_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
MSPROF_JSON = SAMPLES / "msprof_golden" / "mindstudio_profiler_output" / "msprof_20240605100000.json"
OP_SUMMARY = SAMPLES / "msprof_golden" / "mindstudio_profiler_output" / "op_summary_20240605100000.csv"
OP_STAT = SAMPLES / "msprof_golden" / "mindstudio_profiler_output" / "op_statistic_20240605100000.csv"


@pytest.fixture
def opened(monkeypatch) -> list[tuple[Path, int]]:
    """Every (file, bytes asked) content sniffing reads."""
    calls: list[tuple[Path, int]] = []
    real = layout._read_prefix

    def counting(path: Path, size: int = SNIFF_BYTES) -> bytes:
        calls.append((path, size))
        return real(path, size)

    monkeypatch.setattr(layout, "_read_prefix", counting)
    return calls


def _events_in(path: Path) -> int:
    """Device task events of the trace, counted with the json module."""
    events = json.loads(path.read_text())
    hardware = {e["pid"] for e in events if e.get("ph") == "M" and e.get("args", {}).get("name") == "Ascend Hardware"}
    return sum(1 for e in events if e.get("ph") == "X" and e.get("pid") in hardware)


def test_renamed_trace_in_a_folder_is_found(tmp_path, capsys):
    shutil.copy(TRACE, tmp_path / "trace.json")
    (capture,) = discover(tmp_path)
    assert capture.sources[0].timeline == (tmp_path / "trace.json",)
    assert capture.layout == "torch_npu"
    assert cli.main(["inspect", str(tmp_path)]) == 0
    renamed = capsys.readouterr().out
    assert cli.main(["inspect", str(TRACE)]) == 0
    direct = capsys.readouterr().out
    table = lambda text: text[text.index("card ") : text.index("timeline  ")]  # noqa: E731
    assert table(renamed) == table(direct)  # the same numbers as the file given directly
    assert _events_in(TRACE) > 0


def test_a_torch_trace_alone_says_torch_npu(tmp_path, capsys):
    shutil.copy(TRACE, tmp_path / "trace.json")
    assert cli.main(["report", str(tmp_path / "trace.json"), "--top", "1"]) == 0
    head = capsys.readouterr().out.splitlines()[1]
    assert head.endswith("(torch_npu, torch_npu)"), head
    assert discover(MSPROF_JSON)[0].layout == "file"  # an msprof timeline stays a plain file


def test_renamed_csvs_are_found(tmp_path):
    shutil.copy(OP_SUMMARY, tmp_path / "tasks.csv")
    shutil.copy(OP_STAT, tmp_path / "stats.csv")
    captures = {c.name: c for c in discover(tmp_path)}
    assert captures["tasks.csv"].sources[0].tasks == (tmp_path / "tasks.csv",)
    assert captures["stats.csv"].sources[0].statistic == (tmp_path / "stats.csv",)
    with open(OP_SUMMARY, newline="", encoding="utf-8") as fh:
        rows = sum(1 for _ in csv.DictReader(fh))
    profile = open_profile(tmp_path, capture="tasks.csv", cache=FrameCache(enabled=False))
    assert profile.tasks.height == rows


def test_unrelated_json_and_csv_are_not_taken(tmp_path):
    (tmp_path / "config.json").write_text('{"lr": 0.1, "ph": 1, "ts": 2}')
    (tmp_path / "chrome.json").write_text('[{"ph": "X", "ts": 1, "pid": 1, "name": "paint"}]')  # a browser trace
    (tmp_path / "data.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ProfileError, match="no profile data found"):
        discover(tmp_path)


def test_files_matched_by_name_are_not_opened(tmp_path, opened):
    shutil.copytree(OP_SUMMARY.parent, tmp_path / "mindstudio_profiler_output")
    shutil.copy(OP_SUMMARY, tmp_path / "op_summary.csv")
    discover(tmp_path)
    assert opened == []


def test_a_capture_found_by_name_is_not_joined_by_stray_files(tmp_path, opened):
    """Content decides only when names find nothing: a stray copy beside a capture (the
    real cann5x sample's op_summary_spreadsheet_mangled.csv) is not a capture of its own."""
    shutil.copytree(OP_SUMMARY.parent, tmp_path / "mindstudio_profiler_output")
    shutil.copy(OP_SUMMARY, tmp_path / "op_summary copy.csv")
    shutil.copy(TRACE, tmp_path / "trace.json")
    assert [c.layout for c in discover(tmp_path)] == ["era_b"]
    assert opened == []


def test_thousands_of_unrelated_files_are_bounded(tmp_path, opened):
    for i in range(3000):
        (tmp_path / f"sample_{i:04}.json").write_text(f'{{"id": {i}}}')
        (tmp_path / f"row_{i:04}.csv").write_text("x,y\n1,2\n")
    shutil.copy(TRACE, tmp_path / "zz_renamed.json")  # last by name, largest by size
    (capture,) = discover(tmp_path)
    assert capture.name == "zz_renamed.json"
    assert len(opened) <= MAX_SNIFFED
    assert all(size == SNIFF_BYTES for _, size in opened)
    assert opened[0][0].name == "zz_renamed.json"


def test_the_bound_is_said_when_nothing_is_found(tmp_path, opened):
    for i in range(MAX_SNIFFED + 40):
        (tmp_path / f"blob_{i:03}.json").write_text("[" + "1," * (100 + i) + "1]")
    with pytest.raises(ProfileError) as err:
        discover(tmp_path)
    assert len(opened) == MAX_SNIFFED
    assert "40 smaller one(s) not looked into; give a file directly" in str(err.value)


def test_only_a_prefix_is_read(tmp_path):
    """A timeline whose Ascend markers all come after the sniffed prefix is not recognised:
    nothing past SNIFF_BYTES decides."""
    pad = [{"ph": "X", "ts": 1, "pid": 1, "tid": 1, "name": "x" * 50} for _ in range(2 * SNIFF_BYTES // 60)]
    late = [{"name": "process_name", "ph": "M", "pid": 2, "tid": 0, "args": {"name": "Ascend Hardware"}}]
    (tmp_path / "late.json").write_text(json.dumps(pad + late))
    with pytest.raises(ProfileError, match="no profile data found"):
        discover(tmp_path)
    (tmp_path / "early.json").write_text(json.dumps(late + pad))
    assert [c.name for c in discover(tmp_path)] == ["early.json"]


def test_sniffers_on_the_real_heads():
    assert layout.sniff_trace(TRACE.read_bytes()[:SNIFF_BYTES]) == "torch_npu"
    assert layout.sniff_trace(MSPROF_JSON.read_bytes()[:SNIFF_BYTES]) == "msprof"
    paddle = next((SAMPLES / "paddle_cpu").glob("*.paddle_trace.json"))
    assert layout.sniff_trace(paddle.read_bytes()[:SNIFF_BYTES]) == "paddle"
    assert layout.sniff_csv(OP_SUMMARY.read_bytes()[:SNIFF_BYTES]) == "tasks"
    assert layout.sniff_csv(OP_STAT.read_bytes()[:SNIFF_BYTES]) == "statistic"
    assert layout.sniff_csv(b"Op Name,Op Type,Task Duration(us)\n") is None  # msprof op's OpBasicInfo


def test_opprof_trace_is_not_sniffed(tmp_path):
    """A simulator's trace.json inside an OPPROF folder stays with that folder."""
    opprof = tmp_path / "OPPROF_20240101000000_ABC" / "simulator"
    opprof.mkdir(parents=True)
    shutil.copy(TRACE, opprof / "trace.json")
    shutil.copy(TRACE, tmp_path / "trace.json")
    (capture,) = discover(tmp_path)
    assert capture.name == "trace.json" and capture.msprof_op == (opprof.parent,)
