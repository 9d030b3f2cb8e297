"""`npuscope gate` run as a subprocess on the bundled demo capture (fixtures/demo) and a sample.

The op type shares a budget bounds are computed here from the capture's op_statistic CSV with
the csv module, not by the code under test; the step and device figures are the ones a first
gate run reports, then bounded exactly (equal holds) and a hair below (breaks).
"""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "fixtures" / "demo" / "ascend_profiling"
NO_STEPS = ROOT / "fixtures" / "samples" / "cann5x_device_summary"  # op_summary and task_time only


def _gate(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    # conftest points the cache and the runs registry at private folders; the child inherits them.
    return subprocess.run(
        [sys.executable, "-m", "npuscope", "gate", *map(str, args)],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        cwd=cwd,
    )


def _npuscope(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "npuscope", *map(str, args)], capture_output=True, text=True, env=dict(os.environ)
    )


def _csv_shares(capture: Path) -> dict[str, float]:
    """Percent of compute per op type, summed over every card of the op_statistic CSV."""
    (path,) = capture.glob("PROF_*/mindstudio_profiler_output/op_statistic_*.csv")
    totals: dict[str, float] = defaultdict(float)
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            totals[row["OP Type"].strip()] += float(row["Total Time(us)"])
    whole = sum(totals.values())
    return {t: 100.0 * v / whole for t, v in totals.items()}


def _tree(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


def _values(doc: dict) -> dict[str, dict]:
    return {b["name"]: b for b in doc["budgets"]}


@pytest.fixture(scope="module")
def demo_figures(tmp_path_factory) -> dict[str, float]:
    """The demo's step and device figures as a gate run reports them (generous bounds)."""
    folder = tmp_path_factory.mktemp("figures")
    budgets = folder / "budgets.toml"
    budgets.write_text("[step_time]\nmax_us = 1e12\n[device_time]\nmax_us = 1e12\n")
    env = dict(os.environ, NPUSCOPE_CACHE_DIR=str(folder / "cache"), NPUSCOPE_RUNS_DB=str(folder / "runs.db"))
    res = subprocess.run(
        [sys.executable, "-m", "npuscope", "gate", str(DEMO), "--budgets", str(budgets), "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert res.returncode == 0, res.stderr
    values = _values(json.loads(res.stdout))
    return {name.split(".")[0]: values[name]["value"] for name in values}


def test_one_budget_holds_one_breaks_at_the_real_figures(tmp_path, demo_figures):
    capture = tmp_path / "demo"
    shutil.copytree(DEMO, capture)
    before = _tree(capture)
    shares = _csv_shares(capture)
    top, second = sorted(shares, key=lambda t: -shares[t])[:2]
    step, device = demo_figures["step_time"], demo_figures["device_time"]
    assert step > 0 and device > 0
    budgets = tmp_path / "budgets.toml"
    budgets.write_text(
        f"[step_time]\nmax_us = {step!r}\n"  # exactly the figure: holds
        f"[device_time]\nmax_us = {math.nextafter(device, 0.0)!r}\n"  # a hair below: breaks
        f'[op_type."{top}"]\nmax_share_pct = {shares[top] + 0.01:.6f}\n'
        f'[op_type."{second}"]\nmax_share_pct = {shares[second] - 0.01:.6f}\n'
        "[op_type.NoSuchOp]\nmax_share_pct = 0\n"  # absent: share 0, holds at 0
    )
    res = _gate(capture, "--budgets", budgets, "--format", "json")
    assert res.returncode == 1, res.stderr
    doc = json.loads(res.stdout)
    assert doc["schema"] == "npuscope.gate/1"
    assert (doc["run"], doc["baseline"], doc["budgets_file"], doc["passed"]) == (
        str(capture),
        None,
        str(budgets),
        False,
    )
    got = _values(doc)
    assert [b["name"] for b in doc["budgets"]] == [
        "step_time.max_us",
        "device_time.max_us",
        f"op_type.{top}.max_share_pct",
        f"op_type.{second}.max_share_pct",
        "op_type.NoSuchOp.max_share_pct",
    ]
    assert {n: b["status"] for n, b in got.items()} == {
        "step_time.max_us": "ok",
        "device_time.max_us": "broken",
        f"op_type.{top}.max_share_pct": "ok",
        f"op_type.{second}.max_share_pct": "broken",
        "op_type.NoSuchOp.max_share_pct": "ok",
    }
    assert got["step_time.max_us"]["value"] == got["step_time.max_us"]["bound"] == step
    assert got["device_time.max_us"]["value"] == device
    assert got["step_time.max_us"]["figure"] == "step_mean_us"
    for op in (top, second):
        entry = got[f"op_type.{op}.max_share_pct"]
        assert entry["figure"] == f"op_type_share_pct.{op}"
        assert entry["value"] == pytest.approx(shares[op], abs=0.0006)  # the headline keeps 3 decimals
    assert got["op_type.NoSuchOp.max_share_pct"]["value"] == 0.0
    assert doc["broken"] == ["device_time.max_us", f"op_type.{second}.max_share_pct"]

    text = _gate(capture, "--budgets", budgets)
    assert text.returncode == 1
    lines = text.stdout.splitlines()
    assert lines[1].startswith(f"ok      step_time.max_us {step:.10g}: {step:,.1f} us, bound {step:,.1f} us")
    assert lines[2].startswith("BROKEN  device_time.max_us ")
    assert lines[-1] == f"gate: 2 of 5 budgets broken: device_time.max_us, op_type.{second}.max_share_pct"
    assert _tree(capture) == before  # nothing written into the profile folder


def test_baseline_path_same_run_zero_increase_holds(tmp_path):
    budgets = tmp_path / "budgets.toml"
    budgets.write_text(
        "[step_time]\nmax_increase_pct = 0\n[device_time]\nmax_increase_pct = 0\n"
        "[wait.recompilation]\nmax_increase_pct = 0\nmax_us = 1e12\n"
        "[op_type.MatMulV3]\nmax_increase_pct = 0\n"
    )
    res = _gate(DEMO, "--budgets", budgets, "--baseline", DEMO, "--format", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["passed"] is True and doc["baseline"] == str(DEMO)
    for entry in doc["budgets"]:
        assert entry["status"] == "ok", entry
        assert entry["value"] > 0
        if entry["name"].endswith("max_increase_pct"):
            assert entry["value"] == entry["baseline"] == entry["bound"]
    text = _gate(DEMO, "--budgets", budgets, "--baseline", DEMO)
    assert text.returncode == 0
    assert "ok      step_time.max_increase_pct 0: " in text.stdout
    assert " vs baseline " in text.stdout and "(+0.0%)" in text.stdout
    assert text.stdout.splitlines()[-1] == "gate: all 5 budgets hold"


def test_figure_the_run_lacks_is_listed_not_measured(tmp_path):
    budgets = tmp_path / "budgets.toml"
    budgets.write_text("[step_time]\nmax_us = 1\n[free_time]\nmax_us = 1\n[device_time]\nmax_us = 1e12\n")
    res = _gate(NO_STEPS, "--budgets", budgets)
    assert res.returncode == 0, res.stderr
    assert "not measured  step_time.max_us 1: the run has no steps" in res.stdout
    assert "ok      device_time.max_us" in res.stdout
    assert res.stdout.splitlines()[-1] == (
        "gate: no budget broken, 1 of 3 hold; 2 not measured (skipped): step_time.max_us, free_time.max_us"
    )
    # a baseline no budget is relative to is not read, and said so
    res = _gate(NO_STEPS, "--budgets", budgets, "--format", "json", "--baseline", DEMO)
    assert res.returncode == 0
    assert res.stderr == "npuscope: note: --baseline is not read: no budget is a max_increase_pct\n"
    doc = json.loads(res.stdout)
    assert doc["baseline"] == str(DEMO) and all(b["baseline"] is None for b in doc["budgets"])
    assert doc["passed"] is True and doc["not_measured"] == ["step_time.max_us", "free_time.max_us"]
    assert _values(doc)["step_time.max_us"]["value"] is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[step_time]\nmax_increase_pct = 5\n",
            "budgets.toml: step_time.max_increase_pct is relative to a baseline: give --baseline @NAME|PATH",
        ),
        ("[step_time]\nmax_ms = 5\n", "budgets.toml: unknown key step_time.max_ms; known: max_us, max_increase_pct"),
        ("[step_time]\nmax_us = 5\n[wait.recompile]\nmax_us = 1\n", "budgets.toml: unknown wait cause wait.recompile"),
        ("\n[step_time\nmax_us = 5\n", "budgets.toml: invalid TOML: "),
        ("", "budgets.toml: no budget in the file"),
    ],
)
def test_bad_budgets_file_exits_2_with_one_line(tmp_path, text, message):
    (tmp_path / "budgets.toml").write_text(text)
    res = _gate(DEMO, "--budgets", "budgets.toml", cwd=tmp_path)
    assert res.returncode == 2
    assert res.stdout == ""
    assert res.stderr.startswith(f"npuscope: {message}")
    assert len(res.stderr.splitlines()) == 1 and "Traceback" not in res.stderr
    if "invalid TOML" in message:
        assert "(at line 2, column " in res.stderr


def test_missing_budgets_file_and_run_exit_2(tmp_path):
    res = _gate(DEMO, "--budgets", tmp_path / "none.toml")
    assert (res.returncode, res.stderr) == (2, f"npuscope: {tmp_path / 'none.toml'}: budgets file not found\n")
    (tmp_path / "b.toml").write_text("[device_time]\nmax_us = 1\n")
    res = _gate(tmp_path / "no_such_run", "--budgets", tmp_path / "b.toml")
    assert res.returncode == 2 and len(res.stderr.splitlines()) == 1 and "Traceback" not in res.stderr


def test_baseline_by_name(tmp_path):
    """Last in the module: @NAME resolves through the runs registry (analysis/run_registry.py)."""
    budgets = tmp_path / "budgets.toml"
    budgets.write_text("[step_time]\nmax_increase_pct = 0\n")
    missing = _gate(DEMO, "--budgets", budgets, "--baseline", "@main")
    assert missing.returncode == 2
    assert missing.stderr.startswith("npuscope: no baseline 'main'") and len(missing.stderr.splitlines()) == 1
    assert _npuscope("baseline", "set", "main", DEMO).returncode == 0
    res = _gate(DEMO, "--budgets", budgets, "--baseline", "@main", "--format", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["baseline"] == str(DEMO.resolve())
    (entry,) = doc["budgets"]
    assert entry["status"] == "ok" and entry["value"] == entry["baseline"] > 0
