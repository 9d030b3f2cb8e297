"""`npuscope report`: text and markdown renderings, the op report, options and errors."""

from __future__ import annotations

import subprocess
import sys

import pytest
from tiny import profile, task

from npuscope.analysis import diagnose
from npuscope.analysis.op_report import find_task, op_report
from npuscope.fixtures.demo_profile import ensure_demo
from npuscope.parsers import FrameCache, ProfileError, open_profile


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "npuscope", "report", *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def demo():
    prof = open_profile(ensure_demo(), cache=FrameCache(enabled=False))
    return prof, diagnose(prof)


def test_text_report_on_demo_lists_findings_first(cache_dir):
    res = _cli("--top", "3", "--card", "0")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("npuscope report: PROF_000001_")
    assert "== card 0 ==" in lines and "== card 1 ==" not in lines
    start = lines.index("Findings (by time at stake)")
    assert lines[start + 1].startswith("  [WARN] recompilation: ")
    for title in ("Op statistics", "Longest tasks", "Longest waits"):
        assert title in lines and lines.index(title) > start
    waits = lines[lines.index("Longest waits") + 3 :][:3]
    assert all("recompilation" in w or "expected" in w for w in waits)


def test_markdown_report_is_tables(cache_dir):
    res = _cli("--format", "markdown", "--top", "2")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert out.startswith("# npuscope report: ")
    assert "## card 0" in out and "## card 1" in out
    assert "| OP Type | Core Type | Count | Total(us) | Avg(us) | Max(us) | Ratio(%) |" in out
    assert "- **WARN** `host_op_wait`: " in out


def test_op_report_has_shapes_stats_and_findings(demo):
    prof, diag = demo
    t = find_task(diag, "ReduceSum", card="0")
    md = op_report(prof, diag, t)
    assert md.startswith(f"## Op report: `{t['op_name']}` (ReduceSum)")
    assert f"| Input Shapes | `{t['input_shapes']}` |" in md
    assert f"| Input Data Types | {t['input_dtypes']} |" in md
    assert "| Output Formats |" in md and "| Task Duration (us) |" in md
    assert "cause: recompilation, evidence" in md
    assert "### All ReduceSum tasks with these input shapes and dtypes on card 0" in md
    assert "- `recompilation` (warning)" in md
    assert "era_b (CANN 7.0+ (merged export))" in md
    # #ROW selects exactly that task
    assert find_task(diag, f"#{t['row']}")["row"] == t["row"]


def test_op_report_statistics_group_same_shape():
    tasks = [task("Conv", 0, 10, shapes="1,2"), task("Conv", 20, 30, shapes="1,2"), task("Conv", 60, 99, shapes="9,9")]
    prof = profile(tasks)
    diag = diagnose(prof)
    md = op_report(prof, diag, find_task(diag, "#1"))
    assert "| 2 | 40.000 | 10.000 | 20.000 | 30.000 |" in md


def test_unknown_op_is_a_clear_error(demo):
    _, diag = demo
    with pytest.raises(ProfileError, match="no task named 'Nope'"):
        find_task(diag, "Nope")


def test_cli_op_report(cache_dir):
    res = _cli("--op", "NonZero")
    assert res.returncode == 0, res.stderr
    assert "| Task Type | AI_CPU |" in res.stdout
    assert "`ai_cpu` (warning)" in res.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (("--card", "7"), "no card '7'"),
        (("--op", "Nope"), "no task named 'Nope'"),
        (("--rules", "/nonexistent/rules.toml"), "rules file not found"),
    ],
)
def test_cli_bad_input_exits_2(cache_dir, args, message):
    res = _cli(*args)
    assert res.returncode == 2
    assert res.stdout == ""
    assert res.stderr.startswith("npuscope: ") and message in res.stderr
    assert res.stderr.count("\n") == 1


def test_cli_rules_file_changes_thresholds(tmp_path, cache_dir):
    rules = tmp_path / "rules.toml"
    rules.write_text("[thresholds]\nlong_task_us = 1000000\nai_cpu_us = 1000000\n")
    res = _cli("--rules", str(rules), "--format", "json")
    assert res.returncode == 0, res.stderr
    assert '"rule": "long_task"' not in res.stdout and '"rule": "ai_cpu"' not in res.stdout
    assert '"long_task_us": 1000000.0' in res.stdout
    res = _cli("--format", "json")
    assert '"rule": "long_task"' in res.stdout and '"rule": "ai_cpu"' in res.stdout


def test_top_must_be_positive(cache_dir):
    res = _cli("--top", "0")
    assert res.returncode == 2 and "must be at least 1" in res.stderr


def test_text_report_shows_card_against_card(cache_dir):
    res = _cli("--top", "2")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    start = lines.index("== cards ==")
    assert lines[start + 1].startswith("slowest card 0; compute spread ")
    assert "FLAGGED" in lines[start + 1]
    assert lines.index("== cards ==") < lines.index("== card 0 ==")
    single = _cli("--card", "0")
    assert "== cards ==" in single.stdout  # the spread always covers every card of the capture
