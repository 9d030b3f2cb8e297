"""The steps of an open (plan, read, check, assemble) and its notes as data.

The damaged rows of a real kernel_details.csv (a row cut short) are counted from the notes'
data, checked against what the csv module finds in the file; a cached reopen gives the same
notes from the cache's entry, and `--strict` refuses the file with the same numbers. The
plan reads one export of a run and names what it leaves out.
"""

from __future__ import annotations

import csv
import dataclasses
import shutil
from pathlib import Path

import pytest

from npuscope.fixtures.generate import generate
from npuscope.parsers import FrameCache, ProfileError, ReadOptions, open_profile
from npuscope.parsers.notes import NOTES_SCHEMA, Note, from_frame, skipped_rows, to_frame
from npuscope.parsers.profile import plan_open
from npuscope.parsers.read_options import ReadChoices

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "samples" / "real"
SHORT_ROW = REAL / "torch_npu_2023_gpt3_2rank" / "test_rank_0"


def _short_lines(path: Path) -> list[int]:
    """The line numbers of the rows with fewer fields than the header, by the csv module."""
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        return [reader.line_num for row in reader if row and len(row) < len(header)]


def test_skipped_rows_come_from_the_notes_data():
    (kernels,) = SHORT_ROW.rglob("kernel_details.csv")
    lines = _short_lines(kernels)
    assert lines  # the real file has a row cut short
    prof = open_profile(SHORT_ROW, cache=FrameCache(enabled=False))
    (note,) = prof.notes_of("skipped_rows")
    assert (note.file, note.line, note.count) == (kernels, lines[0], len(lines))
    assert prof.skipped_rows == len(lines)
    assert note.text in prof.notes and str(note) == note.text
    assert prof.notes == tuple(n.text for n in prof.note_data)
    # The text the report shows says the same numbers.
    assert f"skipped {len(lines):,} damaged row(s)" in note.text and f"line(s) {lines[0]}" in note.text


def test_a_cached_reopen_gives_the_same_notes_and_strict_the_same_refusal(tmp_path):
    root = tmp_path / "rank0"
    shutil.copytree(SHORT_ROW, root)
    cache_dir = tmp_path / "cache"
    first = open_profile(root, cache=FrameCache(cache_dir))
    FrameCache(cache_dir).flush()
    cache = FrameCache(cache_dir)
    again = open_profile(root, cache=cache)
    assert cache.hits and again.note_data == first.note_data and again.skipped_rows == first.skipped_rows == 1
    with pytest.raises(ProfileError, match=r"has 1 damaged row\(s\).*leave out --strict to skip them"):
        open_profile(root, cache=FrameCache(cache_dir), strict=True)


def test_notes_go_through_a_frame_unchanged(tmp_path):
    notes = (skipped_rows(tmp_path / "a.csv", [3, 9, 12]), Note("db", "no CANN_API table", file=tmp_path / "x.db"))
    frame = to_frame(notes)
    assert dict(frame.schema) == NOTES_SCHEMA
    assert from_frame(frame) == notes
    assert from_frame(to_frame(())) == ()
    assert notes[0].count == 3 and notes[0].line == 3


def test_the_keywords_of_an_open_are_the_read_options():
    assert set(ReadChoices.__annotations__) == {f.name for f in dataclasses.fields(ReadOptions)}


def test_the_plan_reads_one_export_and_names_what_it_leaves_out(tmp_path):
    g = generate(tmp_path / "p", rows=200, db=True)
    db = next(p for p in g.files if p.suffix == ".db")
    text = [p for p in g.files if p.suffix != ".db"]
    auto = plan_open(g.root, None, ReadOptions())
    assert auto.files == (db,) and {p for p, _ in auto.ignored} == set(text)
    plain = plan_open(g.root, None, ReadOptions(source="text"))
    assert set(plain.files) == set(text) and [p for p, _ in plain.ignored] == [db]
    no_timeline = plan_open(g.root, None, ReadOptions(source="text", timeline=False))
    assert not any(p.suffix == ".json" for p in no_timeline.files)
    prof = open_profile(g.root, cache=FrameCache(enabled=False), source="text")
    assert [n.file for n in prof.notes_of("not_read")] == [db]
    with pytest.raises(ProfileError, match="unknown source"):
        plan_open(g.root, None, ReadOptions(source="sql"))  # type: ignore[arg-type]
