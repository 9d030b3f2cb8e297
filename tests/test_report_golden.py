"""Report and compare JSON of every sample and generated case are the stored bytes
(tests/report_golden.py): a refactor changes no output. An intended change of output
rewrites them with `python tests/report_golden.py --update`, in the same commit."""

from __future__ import annotations

import report_golden


def test_report_json_is_the_stored_bytes():
    problems = report_golden.compare()
    assert not problems, "\n\n".join(problems)


def test_a_changed_output_is_seen(tmp_path, monkeypatch):
    stored = tmp_path / "golden"
    stored.mkdir()
    name, text = next(report_golden.outputs("sample-msprof_golden"))
    (stored / f"{name}.json").write_text(text.replace('"time_us"', '"time_ms"', 1), encoding="utf-8")
    monkeypatch.setattr(report_golden, "STORED", stored)
    problems = report_golden.compare("sample-msprof_golden.report")
    assert problems and problems[0].startswith(f"{name}:\n")
    assert any("no stored output" in p for p in problems[1:])
