"""The README tells the truth: its test command is what CI runs, its defaults are the code's."""

from __future__ import annotations

from pathlib import Path

from npuscope.analysis.thresholds import documented_defaults

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    command = "pip install -e '.[test]' && python -m pytest"
    assert f"```\n{command}\n```" in README
    assert command in ci.splitlines()


def test_readme_thresholds_table_matches_the_code():
    for name, default, meaning in documented_defaults():
        assert f"| `{name}` | {default} | {meaning} |" in README, name


def test_readme_lists_every_subcommand():
    from npuscope.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name in sub.choices:
        assert f"`npuscope {name}" in README, name
