"""The Parquet frame cache: hits, rebuilds, foreign and corrupt entries, atomic writes, the
switches that turn it off, where it lives, and read-only profile folders.

Every test copies the tiny golden sample (3 op_summary rows, 2 op_statistic rows, 25
timeline events) into tmp_path, so mtimes can be changed freely. The Parquet entries are
told apart by their columns: tasks have `start_ns`, events `ts_ns`, op_statistic `ratio_pct`.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from unpriv import (  # noqa: F401 - fixtures
    cli_env,
    make_dir,
    make_read_only,
    make_writable,
    open_unprivileged,
    run_python,
    snapshot,
    unpriv,
    world_dir,
)

from npuscope.parsers import FrameCache, open_profile
from npuscope.parsers.cache import _KEY, default_dir
from npuscope.parsers.training import VIEWS

MSOUT = "mindstudio_profiler_output"
OP_SUMMARY = "op_summary_20240605100000.csv"
GOLDEN_DURATIONS = [151.0, 15.0, 0.0]
GOLDEN_FIRST_START_NS = 1717575960208020758
ENTRY_NAME = re.compile(r"[0-9a-f]{32}\.parquet")
KIND_COLUMN = {"tasks": "start_ns", "events": "ts_ns", "statistic": "ratio_pct"}
# Entries of one open of the sample: tasks, op_statistic and timeline, beside each CSV
# table the notes its parse left, and the per-card checks of the tasks (TASK_ENTRIES of them
# depend on the op_summary file).
ENTRIES = 6
TASK_ENTRIES = 3


# --------------------------------------------------------------------------- helpers


@pytest.fixture
def golden(tmp_path, samples) -> Path:
    dst = tmp_path / "golden"
    shutil.copytree(samples / "msprof_golden", dst)
    return dst


def entries(cache: Path) -> list[Path]:
    return sorted(cache.iterdir()) if cache.exists() else []


def entry_of(cache: Path, kind: str) -> Path:
    col = KIND_COLUMN[kind]
    found = [p for p in entries(cache) if col in pl.read_parquet_schema(p)]
    assert len(found) == 1, (kind, [p.name for p in entries(cache)])
    return found[0]


def assert_only_complete_entries(cache: Path, count: int | None = None) -> None:
    names = [p.name for p in entries(cache)]
    assert all(ENTRY_NAME.fullmatch(n) for n in names), f"stray or temp files: {names}"
    if count is not None:
        assert len(names) == count, names


def assert_same_profile(a, b) -> None:
    assert_frame_equal(a.tasks, b.tasks)
    assert_frame_equal(a.op_statistic, b.op_statistic)
    assert_frame_equal(a.events, b.events)


def assert_golden_values(prof, durations=GOLDEN_DURATIONS) -> None:
    assert prof.tasks["duration_us"].to_list() == durations
    assert prof.tasks["start_ns"][0] == GOLDEN_FIRST_START_NS
    assert prof.op_statistic["card"].to_list() == ["0"]  # derived: the file disagrees with the tasks
    assert prof.events.height == 25


def bump_mtime(path: Path, seconds: int = 10) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + seconds * 1_000_000_000))


# --------------------------------------------------------------------------- hits


def test_second_open_is_a_hit_with_equal_frames(golden, cache_dir):
    first_cache = FrameCache(cache_dir)
    first = open_profile(golden, cache=first_cache)
    assert (first_cache.hits, first_cache.misses) == (0, ENTRIES)
    assert_only_complete_entries(cache_dir, ENTRIES)
    assert_golden_values(first)
    mtimes = {p.name: p.stat().st_mtime_ns for p in entries(cache_dir)}

    second_cache = FrameCache(cache_dir)  # a fresh object: the hit comes from disk
    second = open_profile(golden, cache=second_cache)
    assert (second_cache.hits, second_cache.misses) == (ENTRIES, 0)
    assert second_cache.problems == []
    assert_same_profile(first, second)
    assert_golden_values(second)
    assert {p.name: p.stat().st_mtime_ns for p in entries(cache_dir)} == mtimes, "a hit rewrote entries"


@pytest.mark.parametrize("sample", ["msprof_golden", "torch_npu_ascend_pt", "cann5x_device_summary", "paddle_cpu"])
def test_cached_frames_round_trip_every_layout(sample, samples, cache_dir):
    a, b = FrameCache(cache_dir), FrameCache(cache_dir)
    first = open_profile(samples / sample, cache=a)
    second = open_profile(samples / sample, cache=b)
    assert a.hits == 0 and a.misses > 0
    assert (b.hits, b.misses) == (a.misses, 0)
    assert_frame_equal(first.tasks, second.tasks)
    assert_frame_equal(first.op_statistic, second.op_statistic)
    if first.events is None:
        assert second.events is None
    else:
        assert_frame_equal(first.events, second.events)


def test_hit_does_not_call_build(tmp_path, cache_dir):
    src = tmp_path / "op_summary_1.csv"
    src.write_text("x\n")
    calls = []

    def build():
        calls.append(1)
        return pl.DataFrame({"a": [1, 2, 3]})

    cache = FrameCache(cache_dir)
    first = cache.load_or_build("tasks", [src], build)
    second = FrameCache(cache_dir).load_or_build("tasks", [src], build)
    assert len(calls) == 1
    assert_frame_equal(first, second)
    # Another kind or another card is another entry.
    FrameCache(cache_dir).load_or_build("statistic", [src], build)
    FrameCache(cache_dir).load_or_build("tasks", [src], build, "3")
    assert len(calls) == 3
    assert_only_complete_entries(cache_dir, 3)


# --------------------------------------------------------------------------- rebuilds


def test_changed_source_same_size_newer_mtime_is_rebuilt(golden, cache_dir):
    open_profile(golden, cache=FrameCache(cache_dir))
    f = golden / MSOUT / OP_SUMMARY
    data = f.read_bytes()
    assert data.count(b",151.000,") == 1
    f.write_bytes(data.replace(b",151.000,", b",999.000,"))  # same size
    bump_mtime(f)

    cache = FrameCache(cache_dir)
    prof = open_profile(golden, cache=cache)
    assert (cache.hits, cache.misses) == (ENTRIES - TASK_ENTRIES, TASK_ENTRIES)  # only the tasks entries are rebuilt
    assert_golden_values(prof, [999.0, 15.0, 0.0])
    # The new values are what the cache now holds.
    again = FrameCache(cache_dir)
    assert open_profile(golden, cache=again).tasks["duration_us"].to_list() == [999.0, 15.0, 0.0]
    assert (again.hits, again.misses) == (ENTRIES, 0)


def test_changed_source_other_size_same_mtime_is_rebuilt(golden, cache_dir):
    open_profile(golden, cache=FrameCache(cache_dir))
    f = golden / MSOUT / OP_SUMMARY
    st = f.stat()
    f.write_bytes(f.read_bytes().replace(b",151.000,", b",1234.500,"))
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime put back: only the size differs
    cache = FrameCache(cache_dir)
    prof = open_profile(golden, cache=cache)
    assert cache.misses == TASK_ENTRIES
    assert prof.tasks["duration_us"].to_list() == [1234.5, 15.0, 0.0]


def _warm(golden: Path, cache_dir: Path):
    prof = open_profile(golden, cache=FrameCache(cache_dir))
    entry = entry_of(cache_dir, "tasks")
    key = pl.read_parquet_metadata(entry)[_KEY]
    return prof, entry, key


@pytest.mark.parametrize("metadata", ["other_key", "no_metadata", "empty_key"])
def test_foreign_entry_is_rebuilt_not_trusted(metadata, golden, cache_dir):
    prof, entry, key = _warm(golden, cache_dir)
    # A decoy with the right schema and wrong values: if it were trusted, the test would see -1.
    decoy = prof.tasks.with_columns(pl.lit(-1.0).alias("duration_us"))
    meta = {"other_key": {_KEY: "f" * 64}, "no_metadata": None, "empty_key": {_KEY: ""}}[metadata]
    entry.unlink()
    decoy.write_parquet(entry, metadata=meta)

    cache = FrameCache(cache_dir)
    again = open_profile(golden, cache=cache)
    assert (cache.hits, cache.misses) == (ENTRIES - 1, 1)
    assert_golden_values(again)
    assert_frame_equal(again.tasks, prof.tasks)
    assert pl.read_parquet_metadata(entry)[_KEY] == key, "the foreign entry was not replaced"
    assert pl.read_parquet(entry)["duration_us"].to_list() == GOLDEN_DURATIONS
    assert_only_complete_entries(cache_dir, ENTRIES)


@pytest.mark.parametrize("damage", ["garbage", "zero_bytes", "truncated", "parquet_magic_only"])
def test_corrupt_entry_is_rebuilt_with_correct_values(damage, golden, cache_dir):
    prof, entry, key = _warm(golden, cache_dir)
    good = entry.read_bytes()
    bad = {
        "garbage": b"\x00not a parquet file\xff" * 50,
        "zero_bytes": b"",
        "truncated": good[: len(good) // 2],
        "parquet_magic_only": b"PAR1" + b"\x00" * 64 + b"PAR1",
    }[damage]
    entry.write_bytes(bad)

    cache = FrameCache(cache_dir)
    again = open_profile(golden, cache=cache)
    assert (cache.hits, cache.misses) == (ENTRIES - 1, 1)
    assert_golden_values(again)
    assert_same_profile(prof, again)
    assert any(entry.name in p for p in cache.problems), cache.problems
    assert pl.read_parquet_metadata(entry)[_KEY] == key
    assert_only_complete_entries(cache_dir, ENTRIES)


# --------------------------------------------------------------------------- atomic writes


def test_writes_leave_only_complete_entries(golden, cache_dir):
    open_profile(golden, cache=FrameCache(cache_dir))
    assert_only_complete_entries(cache_dir, ENTRIES)
    for p in entries(cache_dir):
        assert len(pl.read_parquet_metadata(p)[_KEY]) == 64


def test_failing_write_keeps_the_load_and_leaves_no_temp_file(golden, cache_dir, monkeypatch):
    reference = open_profile(golden, cache=FrameCache(enabled=False))
    written = []

    def failing_write(self, file, *args, **kwargs):
        Path(file).write_bytes(b"PAR1 half a file")  # a partial write, then the disk fills up
        written.append(Path(file))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", failing_write)
    cache = FrameCache(cache_dir)
    prof = open_profile(golden, cache=cache)
    assert_same_profile(prof, reference)
    assert len(written) == ENTRIES
    assert all(p.parent == cache_dir for p in written)
    assert entries(cache_dir) == [], [p.name for p in entries(cache_dir)]
    assert len(cache.problems) == ENTRIES and all("cache not written" in p for p in cache.problems)
    assert any("cache not written" in n for n in prof.notes)
    # Nothing was cached, so the next open builds again.
    monkeypatch.undo()
    nxt = FrameCache(cache_dir)
    open_profile(golden, cache=nxt)
    assert (nxt.hits, nxt.misses) == (0, ENTRIES)


def _write_to_dev_full(monkeypatch):
    """Make every Parquet write hit a full disk for real (ENOSPC from /dev/full)."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full to simulate a full disk")
    original = pl.DataFrame.write_parquet

    def to_full_disk(self, file, *args, **kwargs):
        return original(self, "/dev/full", *args, **kwargs)

    monkeypatch.setattr(pl.DataFrame, "write_parquet", to_full_disk)


def test_full_disk_leaves_no_temp_file(golden, cache_dir, monkeypatch):
    _write_to_dev_full(monkeypatch)
    try:
        open_profile(golden, cache=FrameCache(cache_dir))
    except Exception:  # noqa: BLE001 - whether the load survives is the next test's business
        pass
    assert entries(cache_dir) == [], [p.name for p in entries(cache_dir)]


def test_full_disk_does_not_break_the_load(golden, cache_dir, monkeypatch):
    reference = open_profile(golden, cache=FrameCache(enabled=False))
    _write_to_dev_full(monkeypatch)
    cache = FrameCache(cache_dir)
    prof = open_profile(golden, cache=cache)
    assert_same_profile(prof, reference)
    assert any("cache not written" in p for p in cache.problems)


def test_failing_rename_leaves_no_temp_file(golden, tmp_path):
    learn = tmp_path / "learn"
    open_profile(golden, cache=FrameCache(learn))
    names = [p.name for p in entries(learn)]
    assert len(names) == ENTRIES
    blocked = tmp_path / "blocked"
    for n in names:  # a folder squats on every entry path: the rename into place fails
        (blocked / n).mkdir(parents=True)
    cache = FrameCache(blocked)
    prof = open_profile(golden, cache=cache)
    assert_golden_values(prof)
    assert sorted(p.name for p in entries(blocked)) == sorted(names)
    assert all(p.is_dir() and not any(p.iterdir()) for p in entries(blocked))
    assert len(cache.problems) == ENTRIES


def test_cache_dir_that_is_a_file_does_not_break_the_load(golden, tmp_path):
    not_a_dir = tmp_path / "cachefile"
    not_a_dir.write_bytes(b"x")
    cache = FrameCache(not_a_dir)
    prof = open_profile(golden, cache=cache)
    assert_golden_values(prof)
    assert not_a_dir.read_bytes() == b"x"
    assert cache.problems


# --------------------------------------------------------------------------- switched off


def test_disabled_cache_reads_and_writes_nothing(golden, cache_dir, tmp_path):
    open_profile(golden, cache=FrameCache(cache_dir))  # a valid entry it must not read either
    root = tmp_path / "never"
    for target in (root, cache_dir):
        before = {p.name: p.stat().st_mtime_ns for p in entries(target)}
        cache = FrameCache(target, enabled=False)
        prof = open_profile(golden, cache=cache)
        assert_golden_values(prof)
        assert (cache.hits, cache.misses) == (0, 0)
        assert {p.name: p.stat().st_mtime_ns for p in entries(target)} == before
    assert not root.exists()


def test_disabled_cache_builds_even_over_a_poisoned_entry(golden, cache_dir):
    prof, entry, key = _warm(golden, cache_dir)
    decoy = prof.tasks.with_columns(pl.lit(-1.0).alias("duration_us"))
    decoy.write_parquet(entry, metadata={_KEY: key})  # right key, wrong values
    assert open_profile(golden, cache=FrameCache(cache_dir)).tasks["duration_us"][0] == -1.0  # trusted
    assert (
        open_profile(golden, cache=FrameCache(cache_dir, enabled=False)).tasks["duration_us"].to_list()
        == GOLDEN_DURATIONS
    )


def _cli(args, cache: Path, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "npuscope", "inspect", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=cli_env(cache),
        timeout=120,
    )


def test_cli_no_cache_writes_nothing(golden, tmp_path):
    cache = tmp_path / "cli-cache"
    before = snapshot(golden)
    proc = _cli([golden, "--no-cache"], cache, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^0\s+3\s+1\s", proc.stdout, re.M), proc.stdout  # card 0: 3 tasks, 1 type
    assert not cache.exists()
    # Control: the same command without --no-cache does write the entries.
    proc = _cli([golden], cache, tmp_path)
    assert proc.returncode == 0, proc.stderr
    # inspect also keeps the training-level views it lists: one entry each and one of notes.
    assert_only_complete_entries(cache, ENTRIES + len(VIEWS) + 1)
    assert snapshot(golden) == before


# --------------------------------------------------------------------------- where it lives


def test_default_dir_honours_npuscope_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("NPUSCOPE_CACHE_DIR", str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # the specific one wins
    assert default_dir() == tmp_path / "mine"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("NPUSCOPE_CACHE_DIR", "~/npc")
    assert default_dir() == tmp_path / "home" / "npc"


def test_default_dir_honours_xdg_cache_home(monkeypatch, tmp_path):
    monkeypatch.delenv("NPUSCOPE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_dir() == tmp_path / "xdg" / "npuscope"
    monkeypatch.setenv("NPUSCOPE_CACHE_DIR", "")  # empty means unset
    assert default_dir() == tmp_path / "xdg" / "npuscope"


def test_default_dir_falls_back_to_home_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("NPUSCOPE_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_dir() == tmp_path / "home" / ".cache" / "npuscope"
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    assert default_dir() == tmp_path / "home" / ".cache" / "npuscope"


def test_default_dir_ignores_relative_xdg_cache_home(monkeypatch, tmp_path):
    monkeypatch.delenv("NPUSCOPE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_dir() == tmp_path / "home" / ".cache" / "npuscope"


def test_open_profile_default_cache_uses_the_env_folders(golden, cache_dir, monkeypatch, tmp_path):
    open_profile(golden)  # no cache given: FrameCache() at default_dir()
    assert_only_complete_entries(cache_dir, ENTRIES)
    monkeypatch.delenv("NPUSCOPE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    open_profile(golden)
    assert_only_complete_entries(tmp_path / "xdg" / "npuscope", ENTRIES)


# --------------------------------------------------------------------------- read-only profile


def test_read_only_profile_folder_opens_with_cache(golden, cache_dir):
    make_read_only(golden)
    try:
        before = snapshot(golden)
        cache = FrameCache(cache_dir)
        prof = open_profile(golden, cache=cache)
        assert_golden_values(prof)
        assert cache.problems == []
        assert_only_complete_entries(cache_dir, ENTRIES)
        hit = FrameCache(cache_dir)
        assert_same_profile(prof, open_profile(golden, cache=hit))
        assert hit.hits == ENTRIES
        assert snapshot(golden) == before
    finally:
        make_writable(golden)


# ------------------------------------------------------------- as an unprivileged process
# Root ignores file modes, so the read-only and unwritable cases are also run in a process
# that obeys them: `nobody` when it can start this interpreter, else root without the
# CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH capabilities (the interpreter may live under 0700
# /root); a non-root user runs them in-process. The harness is tests/unpriv.py.


def _child_uid(mode: str) -> int:
    """The uid the unprivileged process runs as (nocaps: root without DAC capabilities)."""
    return {"nobody": 65534, "nocaps": 0}.get(mode, os.getuid())


def _profile_in(world_dir: Path, samples: Path) -> Path:
    prof = world_dir / "profile"
    shutil.copytree(samples / "msprof_golden", prof)
    make_writable(prof)  # known modes whatever the umask
    return prof


def test_read_only_profile_folder_as_unprivileged_process(unpriv, world_dir, samples):
    mode, kw = unpriv
    prof = _profile_in(world_dir, samples)
    make_read_only(prof)
    cache = make_dir(world_dir / "cache", 0o777)
    before = snapshot(prof)

    res = open_unprivileged(prof, cache, mode, kw, world_dir)
    assert res["outcome"] == "ok", res["message"]
    assert res["durations"] == GOLDEN_DURATIONS and res["events"] == 25
    assert (res["hits"], res["misses"]) == (0, ENTRIES) and res["problems"] == []
    # A folder others can write is not used as is: the entries go to a private subfolder.
    private = cache / f"u{_child_uid(mode)}"
    assert [p.name for p in entries(cache)] == [private.name]
    assert (private.stat().st_mode & 0o777, private.stat().st_uid) == (0o700, _child_uid(mode))
    assert_only_complete_entries(private, ENTRIES)
    res = open_unprivileged(prof, cache, mode, kw, world_dir)
    assert (res["hits"], res["misses"]) == (ENTRIES, 0), res
    assert snapshot(prof) == before


def test_unwritable_cache_dir_as_unprivileged_process(unpriv, world_dir, samples):
    mode, kw = unpriv
    prof = _profile_in(world_dir, samples)
    cache = make_dir(world_dir / "cache", 0o555)
    before = snapshot(prof)

    res = open_unprivileged(prof, cache, mode, kw, world_dir)
    assert res["outcome"] == "ok", res["message"]
    assert res["durations"] == GOLDEN_DURATIONS
    assert res["misses"] == ENTRIES
    # One note for the run. Its owner cannot write it ("not written"); another user cannot
    # make a private folder in it either ("not used").
    assert len(res["problems"]) == 1, res["problems"]
    assert re.match(r"cache not (written|used) ", res["problems"][0]), res["problems"]
    assert entries(cache) == [], [p.name for p in entries(cache)]  # no entry, no temp file
    assert snapshot(prof) == before

    # The CLI goes on too, and says why nothing was cached.
    proc = run_python(["-m", "npuscope", "inspect", prof], cache=cache, cwd=world_dir, **kw)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^note      cache not (written|used) ", proc.stdout, re.M), proc.stdout
    assert entries(cache) == []


def test_finish_writes_waits_for_the_entries_handed_to_the_writer(tmp_path):
    """The command ends the process without the interpreter's teardown after the explorer:
    `finish_writes` first lets the writer thread write what it was given."""
    import polars as pl

    from npuscope.parsers.cache import FrameCache, finish_writes

    source = tmp_path / "op_summary.csv"
    source.write_text("a\n1\n")
    cache = FrameCache(tmp_path / "cache", background=True)
    frame = pl.DataFrame({"a": list(range(200_000))})
    cache.load_or_build("tasks", (source,), lambda: frame)
    entry = cache.path_for(cache.key("tasks", (source,)))
    cache.start_writes()
    finish_writes()
    assert entry is not None and entry.is_file()
    assert FrameCache(tmp_path / "cache").load_or_build("tasks", (source,), lambda: pl.DataFrame()).equals(frame)
    # The writer still takes entries afterwards (the same process may load again).
    cache.load_or_build("tasks", (source,), lambda: frame, extra="again")
    cache.flush()
    assert cache.path_for(cache.key("tasks", (source,), "again")).is_file()
