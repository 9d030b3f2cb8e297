"""Opening only what a command reads (`open_profile(pmu=False, details=False)`, as inspect does).

The columns kept are what the full open gives, to the last bit, on real captures (text and db,
cache off, cold and cached); the columns left out are null, and the PMU names are still known;
of the timeline only the event columns that count time are kept, the same way.
With the cache off the left-out CSV columns are not parsed at all: the check for rows that lost
a field then reads three columns of the PMU block, and still finds the damaged rows of a real
kernel_details.csv edited with the csv module (one field taken out inside the PMU block, one
before it), skipping the same lines as the full read. The timeline's pieces are parsed two at a
time: the events equal a one-piece-at-a-time read, and a piece polars refuses is read by orjson
in its place.
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import polars as pl
import pytest

from npuscope.parsers import FrameCache, open_profile
from npuscope.parsers import timeline as timeline_mod
from npuscope.parsers.columns import DETAIL_COLUMNS, EVENT_SCHEMA, LIGHT_EVENT_COLUMNS, TASK_ORDER

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "samples"
CNN_RANK = SAMPLES / "real" / "torch_npu_2024_cnn" / "level1" / "rank0_ascend_pt"
DB_RANK = SAMPLES / "real" / "torch_npu_2025_db" / "level1" / "rank0_ascend_pt"
GOLDEN = SAMPLES / "msprof_golden"
KEPT = [c for c in TASK_ORDER if c not in DETAIL_COLUMNS]


def _full(path: Path):
    return open_profile(path, cache=FrameCache(enabled=False))


@pytest.mark.parametrize("sample", [CNN_RANK, DB_RANK, GOLDEN], ids=["cnn-text", "db", "golden"])
@pytest.mark.parametrize("how", ["no-cache", "cold", "cached"])
def test_light_open_keeps_what_it_reads_exactly(sample, how, tmp_path):
    full = _full(sample)
    cache = FrameCache(tmp_path, enabled=how != "no-cache")
    if how == "cached":
        open_profile(sample, cache=FrameCache(tmp_path))  # the entries a full open writes
    light = open_profile(sample, cache=cache, pmu=False, details=False)
    if how == "cached":
        assert cache.misses == 0 and cache.hits > 0
    assert light.tasks.columns == list(TASK_ORDER)  # one shape for every consumer
    assert light.tasks.select(KEPT).equals(full.tasks.select(KEPT))
    assert light.tasks.select(pl.col(list(DETAIL_COLUMNS)).null_count()).row(0) == (light.tasks.height,) * len(
        DETAIL_COLUMNS
    )
    # The check above can fail: the full open has values in the columns left out.
    assert any(full.tasks[c].null_count() < full.tasks.height for c in DETAIL_COLUMNS)
    assert light.pmu_columns == full.pmu_columns and full.pmu_columns
    assert light.op_statistic.equals(full.op_statistic)
    assert light.notes == full.notes
    # The timeline: the columns counting time reads, as the full open has them; the rest null.
    seen, left = sorted(LIGHT_EVENT_COLUMNS), [c for c in EVENT_SCHEMA if c not in LIGHT_EVENT_COLUMNS]
    assert light.events.columns == list(EVENT_SCHEMA)
    assert light.events.select(seen).equals(full.events.select(seen))
    assert all(light.events[c].null_count() == light.events.height for c in left)
    assert any(full.events[c].null_count() < full.events.height for c in left)


def test_light_open_durations_against_the_csv_module():
    path = CNN_RANK / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    light = open_profile(CNN_RANK, cache=FrameCache(enabled=False), pmu=False, details=False)
    assert light.tasks.height == len(rows)
    assert sorted(light.tasks["duration_us"].to_list()) == sorted(float(r["Duration(us)"]) for r in rows)


def _damaged_copy(tmp_path: Path) -> tuple[Path, list[int]]:
    """The CNN rank with two rows short of a field: one inside the PMU block, one before it."""
    rank = tmp_path / "rank0_ascend_pt"
    shutil.copytree(CNN_RANK, rank)
    path = rank / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    with path.open(newline="") as fh:
        rows = list(csv.reader(fh))
    header = rows[0]
    mac = header.index("mac_ratio")
    state = header.index("OP State")
    # Rows whose PMU cells all hold numbers, so a shift inside the block shows.
    numeric = [i for i, r in enumerate(rows[1:], start=1) if all(v not in ("N/A", "") for v in r[mac:])]
    assert len(numeric) >= 2
    first, second = numeric[3], numeric[-3]
    del rows[first][mac]
    del rows[second][state]
    with path.open("w", newline="") as fh:
        csv.writer(fh).writerows(rows)
    return rank, [first + 1, second + 1]  # file lines (the header is line 1)


def test_short_rows_are_found_when_the_pmu_block_is_not_parsed(tmp_path):
    rank, lines = _damaged_copy(tmp_path)
    full = _full(rank)
    light = open_profile(rank, cache=FrameCache(enabled=False), pmu=False, details=False)
    assert full.skipped_rows == light.skipped_rows == 2
    damaged = [n for n in full.notes if "fewer fields" in n]
    assert damaged == [n for n in light.notes if "fewer fields" in n]
    assert f"line(s) {lines[0]}, {lines[1]}" in damaged[0]
    assert light.tasks.select(KEPT).equals(full.tasks.select(KEPT))


def test_timeline_pieces_two_at_a_time_equal_one_at_a_time(monkeypatch):
    (trace,) = sorted((SAMPLES / "real" / "torch_npu_2024_cnn" / "level1" / "rank0_ascend_pt").rglob("trace_view.json"))
    piece = 64 << 10
    together = timeline_mod.read_timeline([trace], chunk_bytes=piece)
    monkeypatch.setattr(timeline_mod, "_PIECES_AT_ONCE", 1)
    alone = timeline_mod.read_timeline([trace], chunk_bytes=piece)
    assert together.height > 1000 and together.equals(alone)
    # Pieces polars refuses are read by orjson, in order, to the same events.
    monkeypatch.setattr(timeline_mod, "_PIECES_AT_ONCE", 2)
    calls = []

    real = timeline_mod._raw_polars

    def refuse_every_other(buf: bytes):
        calls.append(len(buf))
        return None if len(calls) % 2 else real(buf)

    monkeypatch.setattr(timeline_mod, "_raw_polars", refuse_every_other)
    mixed = timeline_mod.read_timeline([trace], chunk_bytes=piece)
    assert len(calls) > 4
    assert mixed.equals(together)


def test_inspect_card_table_keeps_figures_apart_at_any_size():
    from npuscope.inspect_cmd import _table

    head = ["card", "tasks", "op types", "compute us", "comm us", "wait us", "span us", "events"]
    big = [
        "1",
        "10,000,000",
        "123,456",
        "193,174,553,000.064",
        "7,115,255.671",
        "141,305,275.674",
        "341,595,084.409",
        "4,405,392",
    ]
    lines = _table([head, big]).splitlines()
    assert lines[1].split() == big  # every figure its own field (the events count once touched the span)
    assert len({len(line) for line in lines}) == 1  # the header widens with its column


@pytest.mark.parametrize("block", [1, 2, 7, 64])
def test_boundary_search_in_windows_equals_a_search_of_the_whole_file(tmp_path, monkeypatch, block):
    # Boundaries with whitespace runs longer than the read window, and a trailing `}, ` cut by it.
    data = b'[{"a":1},   \n\n  {"b":2},{"c":3}' + b" " * 40 + b',{"d":4}, \t {"e":5}, '
    path = tmp_path / "t.json"
    path.write_bytes(data)
    monkeypatch.setattr(timeline_mod, "_BLOCK", block)
    pattern = timeline_mod._BOUNDARY
    with path.open("rb") as fh:
        for pos in range(len(data)):
            for endpos in (len(data), len(data) - 3, pos + 5):
                want = pattern.search(data, pos, endpos)
                got = timeline_mod._find(fh, pattern, pos, endpos)
                assert got == (None if want is None else (want.start(), want.end())), (pos, endpos)
        assert timeline_mod._rfind(fh, b"}", len(data)) == data.rfind(b"}")
        assert timeline_mod._rfind(fh, b"#", len(data)) == -1


@pytest.mark.parametrize(
    "sample",
    [SAMPLES / "paddle_cpu", GOLDEN, SAMPLES / "cann5x_device_summary", CNN_RANK.parent, DB_RANK.parent],
    ids=["paddle-tasks-from-timeline", "golden", "cann5x", "cnn-cluster", "db-cluster"],
)
@pytest.mark.parametrize("cache", ["--no-cache", "cache"])
def test_inspect_prints_what_a_full_open_gives(sample, cache, tmp_path, monkeypatch, capsys):
    import npuscope.inspect_cmd as inspect_cmd
    from npuscope.cli import main

    monkeypatch.setenv("NPUSCOPE_CACHE_DIR", str(tmp_path))
    light_open = inspect_cmd.profile_for_command

    def full_open(*args, **kwargs):
        return light_open(*args, **{**kwargs, "pmu": True, "details": True})

    args = ["inspect", str(sample)] + (["--no-cache"] if cache == "--no-cache" else [])
    texts = []
    for opener in (light_open, full_open, light_open):  # light, full, light again on what both left
        monkeypatch.setattr(inspect_cmd, "profile_for_command", opener)
        assert main(args) == 0
        texts.append(capsys.readouterr().out)
    assert texts[0] == texts[1] == texts[2]
    assert "tasks" in texts[0]
