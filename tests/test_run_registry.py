"""The runs registry (analysis/run_registry.py), `npuscope runs`, `npuscope baseline` and
`compare @NAME`: a real SQLite file (each test's own, tests/conftest.py), real samples, the
real CLI; the figures checked against the samples' own CSVs read with the csv module."""

from __future__ import annotations

import csv
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from npuscope.analysis import run_registry
from npuscope.analysis.headline import Headline
from npuscope.analysis.run_registry import record_run, registry_path
from npuscope.parsers import ProfileError

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "samples"
GOLDEN = SAMPLES / "msprof_golden"


def npuscope(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "npuscope", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def head(step_ms: float, device_ms: float = 10.0) -> Headline:
    return Headline(
        step_mean_us=step_ms * 1000,
        step_times_us=(step_ms * 1000,) * 3,
        exposed_communication_us=None,
        free_us=None,
        device_us=device_ms * 1000,
        compute_us=device_ms * 1000,
        communication_us=0.0,
        wait_us=0.0,
    )


def test_the_registry_is_where_the_environment_says(monkeypatch, tmp_path):
    monkeypatch.setenv("NPUSCOPE_RUNS_DB", str(tmp_path / "r.db"))
    assert registry_path() == tmp_path / "r.db"
    monkeypatch.setenv("NPUSCOPE_RUNS_DB", "off")
    assert registry_path() is None
    assert record_run(tmp_path, kind="report", headline=head(1)) is None  # off: nothing, no note
    assert not (tmp_path / "r.db").exists()
    monkeypatch.delenv("NPUSCOPE_RUNS_DB")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert registry_path() == tmp_path / "data" / "npuscope" / "runs.db"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert registry_path() == tmp_path / "home" / ".local" / "share" / "npuscope" / "runs.db"


def test_a_run_read_again_is_one_row_with_its_latest_figures(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    assert record_run(a, kind="captured", host="node1", command="python train.py", change="X=1") is None
    assert record_run(a, kind="report", headline=head(12.5)) is None
    assert record_run(b, kind="report", headline=head(10.0)) is None
    runs = run_registry.list_runs()
    assert [r.path for r in runs] == [str(a.resolve()), str(b.resolve())]
    first = runs[0]
    assert (first.kind, first.host, first.command, first.change) == ("captured", "node1", "python train.py", "X=1")
    assert first.step_mean_us == 12_500 and first.steps == 3 and first.headline == head(12.5)
    # read again without figures: the figures stay
    assert record_run(a, kind="opened") is None
    assert run_registry.list_runs()[0].step_mean_us == 12_500
    assert [r.path for r in run_registry.list_runs(1)] == [str(b.resolve())]


def test_a_registry_that_is_not_a_database_is_moved_aside(tmp_path):
    db = registry_path()
    assert db is not None
    db.parent.mkdir(parents=True, exist_ok=True)
    db.write_bytes(b"not a database, " * 100)
    note = record_run(tmp_path, kind="report", headline=head(1))
    assert note is not None and "moved to runs.db.corrupt-" in note
    assert [p.name for p in db.parent.iterdir() if p.name.startswith("runs.db.corrupt-")]
    assert [r.path for r in run_registry.list_runs()] == [str(tmp_path.resolve())]


def test_a_registry_that_cannot_be_written_is_a_note_not_a_failure(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("NPUSCOPE_RUNS_DB", str(blocker / "runs.db"))  # its folder is a file
    note = record_run(tmp_path, kind="report")
    assert note is not None and note.startswith(f"runs registry {blocker / 'runs.db'}: not recorded")


def test_report_records_the_run_with_the_figures_of_its_csv(tmp_path):
    res = npuscope("report", str(GOLDEN), "--format", "json")
    assert res.returncode == 0, res.stderr
    runs = run_registry.list_runs()
    assert len(runs) == 1 and runs[0].kind == "report" and runs[0].path == str(GOLDEN.resolve())
    # device time: the op_summary's task durations, summed with the csv module
    summary = next((GOLDEN / "mindstudio_profiler_output").glob("op_summary_*.csv"))
    with summary.open(newline="") as f:
        rows = list(csv.DictReader(f))
    duration = next(k for k in rows[0] if k.strip().startswith("Task Duration"))
    truth = sum(float(r[duration]) for r in rows if r[duration] not in ("", "N/A"))
    assert runs[0].headline is not None
    assert runs[0].headline.compute_us + runs[0].headline.communication_us == pytest.approx(truth, rel=1e-6)
    # a second report of the same folder: still one row
    assert npuscope("report", str(GOLDEN)).returncode == 0
    assert len(run_registry.list_runs()) == 1


def test_runs_lists_with_a_trend_and_json(tmp_path):
    for i, ms in enumerate((12.0, 11.0, 9.0)):
        folder = tmp_path / f"run{i}"
        folder.mkdir()
        assert record_run(folder, kind="report", headline=head(ms)) is None
    res = npuscope("runs")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert "12.00 ms" in lines[1] and "9.00 ms" in lines[3]
    assert lines[-1].startswith("step-time trend, oldest to newest: █▆▁")
    doc = json.loads(npuscope("runs", "--format", "json").stdout)
    assert doc["schema"] == "npuscope.runs/1"
    assert [r["step_mean_us"] for r in doc["runs"]] == [12_000, 11_000, 9_000]
    assert json.loads(npuscope("runs", "--limit", "1", "--format", "json").stdout)["runs"][0]["step_mean_us"] == 9_000


def test_an_empty_or_switched_off_registry_says_so():
    assert "no runs recorded yet" in npuscope("runs").stdout
    assert "off" in npuscope("runs", env={"NPUSCOPE_RUNS_DB": "off"}).stdout


def test_named_baselines_set_list_remove_and_compare(tmp_path):
    new = SAMPLES / "msprof_golden"
    res = npuscope("baseline", "set", "main", str(GOLDEN))
    assert res.returncode == 0 and res.stdout.strip() == f"@main -> {GOLDEN.resolve()}", res.stderr
    assert "@main" in npuscope("baseline", "list").stdout
    compared = npuscope("compare", "@main", str(new), "--format", "json")
    assert compared.returncode == 0, compared.stderr
    direct = npuscope("compare", str(GOLDEN), str(new), "--format", "json")
    assert json.loads(compared.stdout)["totals"] == json.loads(direct.stdout)["totals"]
    # set again: replaced; by #ID of a recorded run
    assert record_run(tmp_path, kind="report", headline=head(3)) is None
    run_id = run_registry.list_runs()[-1].id
    assert npuscope("baseline", "set", "main", f"#{run_id}").returncode == 0
    assert run_registry.resolve_ref("@main") == str(tmp_path.resolve())
    assert npuscope("baseline", "rm", "main").returncode == 0
    assert run_registry.baselines() == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("compare", "@nope", str(GOLDEN)), "no baseline 'nope'; none is set"),
        (("baseline", "set", "bad name", str(GOLDEN)), "baseline name 'bad name'"),
        (("baseline", "set", "main", "/no/such/run"), "/no/such/run: no such file or folder"),
        (("baseline", "set", "main", "#999"), "no recorded run #999"),
        (("baseline", "rm", "nope"), "no baseline 'nope'"),
    ],
)
def test_bad_references_are_one_line(args, message):
    res = npuscope(*args)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], res.stderr


def test_a_damaged_registry_is_one_line_when_read():
    db = registry_path()
    assert db is not None
    db.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE runs (x)")  # a table of that name, not ours
    res = npuscope("runs")
    assert res.returncode == 2
    assert len(res.stderr.strip().splitlines()) == 1 and "cannot be read" in res.stderr
    with pytest.raises(ProfileError, match="cannot be read"):
        run_registry.list_runs()
