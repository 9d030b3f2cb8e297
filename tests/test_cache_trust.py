"""What the frame cache trusts: entries of this user only, in a folder only this user can
write, with the columns and dtypes the caller expects, for the very same source files.

An entry that fails any of these is rebuilt (with a note when something is off), never
served and never a traceback. Planted entries carry the right key and wrong values (-1 for
every duration), so serving one would show. Planting as another user forks and drops to
`nobody` (this needs root; without it those tests are skipped); the runs that file modes
must bind go through tests/unpriv.py like the other permission tests.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

import orjson
import polars as pl
import pytest
from polars.testing import assert_frame_equal
from unpriv import NOBODY, make_dir, make_writable, open_unprivileged, run_python, unpriv, world_dir  # noqa: F401 - fixtures

from npuscope.analysis import diagnose
from npuscope.fixtures.demo_profile import ensure_demo
from npuscope.parsers import FrameCache, open_profile
from npuscope.parsers.cache import _KEY

MSOUT = "mindstudio_profiler_output"
OP_SUMMARY = "op_summary_20240605100000.csv"
GOLDEN_DURATIONS = [151.0, 15.0, 0.0]
ENTRY_NAME = re.compile(r"[0-9a-f]{32}\.parquet")
# Entries are told apart by a column only their kind has.
KIND_COLUMN = {
    "tasks": "start_ns",
    "events": "ts_ns",
    "statistic": "ratio_pct",
    "steps": "iteration_id",
    "wait_causes": "wait_cause",
    "findings": "findings",
}

as_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="planting as another user needs root"
)


# --------------------------------------------------------------------------- helpers


@pytest.fixture
def golden(tmp_path, samples) -> Path:
    dst = tmp_path / "golden"
    shutil.copytree(samples / "msprof_golden", dst)
    return dst


def entries(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if ENTRY_NAME.fullmatch(p.name)) if folder.exists() else []


def entry_of(folder: Path, kind: str) -> Path:
    col = KIND_COLUMN[kind]
    found = [p for p in entries(folder) if col in pl.read_parquet_schema(p)]
    assert len(found) == 1, (kind, [p.name for p in entries(folder)])
    return found[0]


def warm(profile: Path, cache_dir: Path, kind: str = "tasks"):
    """Open once to fill the cache; the profile, the `kind` entry and its key."""
    prof = open_profile(profile, cache=FrameCache(cache_dir))
    entry = entry_of(cache_dir, kind)
    return prof, entry, pl.read_parquet_metadata(entry)[_KEY]


def count_entries(profile: Path, tmp_path: Path) -> int:
    """How many entries one open of `profile` writes (frames, and the notes kept beside them)."""
    cache = FrameCache(tmp_path / "count")
    open_profile(profile, cache=cache)
    return cache.misses


def decoy_bytes(prof, key: str) -> bytes:
    """A tasks entry with the right key and schema and wrong values."""
    buf = io.BytesIO()
    prof.tasks.with_columns(pl.lit(-1.0).alias("duration_us")).write_parquet(buf, metadata={_KEY: key})
    return buf.getvalue()


def as_user(uid: int, action: Callable[[], None]) -> None:
    """Run `action` (plain os calls only) in a forked child that is `uid`, not root."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            action()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the planting child failed"


def write_file(path: Path, data: bytes, mode: int = 0o644) -> Callable[[], None]:
    def action() -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        os.write(fd, data)
        os.close(fd)

    return action


def assert_golden(prof) -> None:
    assert prof.tasks["duration_us"].to_list() == GOLDEN_DURATIONS
    assert prof.events.height == 25


def assert_rebuilt(entry: Path, key: str) -> None:
    """The entry now is this user's own 0600 file with the real values."""
    st = entry.lstat()
    assert stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid()
    assert stat.S_IMODE(st.st_mode) == 0o600
    assert pl.read_parquet_metadata(entry)[_KEY] == key
    assert pl.read_parquet(entry)["duration_us"].to_list() == GOLDEN_DURATIONS


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


# --------------------------------------------------------------------------- who wrote the entry


@as_root
def test_entry_of_another_user_is_not_served(golden, cache_dir, tmp_path):
    n = count_entries(golden, tmp_path)
    prof, entry, key = warm(golden, cache_dir)
    entry.write_bytes(decoy_bytes(prof, key))
    os.chown(entry, NOBODY, NOBODY)

    cache = FrameCache(cache_dir)
    again = open_profile(golden, cache=cache)
    assert_golden(again)
    assert (cache.hits, cache.misses) == (n - 1, 1)
    assert any(entry.name in p and f"uid {NOBODY}" in p for p in cache.problems), cache.problems
    assert_rebuilt(entry, key)


@pytest.mark.parametrize("bits", [0o620, 0o602, 0o666], ids=oct)
def test_entry_others_can_write_is_not_served(bits, golden, cache_dir):
    prof, entry, key = warm(golden, cache_dir)
    entry.write_bytes(decoy_bytes(prof, key))
    entry.chmod(bits)

    cache = FrameCache(cache_dir)
    assert_golden(open_profile(golden, cache=cache))
    assert cache.misses == 1
    assert any(entry.name in p and "writable by others" in p for p in cache.problems), cache.problems
    assert_rebuilt(entry, key)


def test_entry_reached_through_a_symlink_is_not_served(golden, cache_dir, tmp_path):
    prof, entry, key = warm(golden, cache_dir)
    target = tmp_path / "elsewhere.parquet"
    target.write_bytes(decoy_bytes(prof, key))  # this user's own 0600-like file, right key
    target.chmod(0o600)
    entry.unlink()
    entry.symlink_to(target)

    cache = FrameCache(cache_dir)
    assert_golden(open_profile(golden, cache=cache))
    assert cache.misses == 1
    assert any(entry.name in p and "symbolic link" in p for p in cache.problems), cache.problems
    assert_rebuilt(entry, key)  # the link itself was replaced ...
    assert pl.read_parquet(target)["duration_us"][0] == -1.0  # ... not written through


# --------------------------------------------------------------------------- which folder


@pytest.mark.parametrize("bits", [0o1777, 0o777, 0o770, 0o755], ids=oct)
def test_folder_others_can_write_gets_a_private_user_folder(bits, golden, tmp_path, monkeypatch):
    shared = make_dir(tmp_path / "shared", bits)
    if bits == 0o755 and hasattr(os, "geteuid") and os.geteuid() == 0:
        os.chown(shared, NOBODY, NOBODY)  # not writable by others, but not this user's
    elif bits == 0o755:
        pytest.skip("a folder of another user needs root to make")
    monkeypatch.setenv("NPUSCOPE_CACHE_DIR", str(shared))
    cache = FrameCache()
    assert_golden(open_profile(golden, cache=cache))
    private = shared / f"u{os.geteuid()}"
    assert cache.directory == private
    assert cache.problems == []
    assert sorted(p.name for p in shared.iterdir()) == [private.name]  # nothing beside it
    st = private.lstat()
    assert stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and mode(private) == 0o700
    assert len(entries(private)) == cache.misses
    hit = FrameCache()
    open_profile(golden, cache=hit)
    assert (hit.hits, hit.misses) == (cache.misses, 0)


def test_own_private_folder_is_used_as_is(golden, tmp_path):
    own = make_dir(tmp_path / "own", 0o700)
    cache = FrameCache(own)
    open_profile(golden, cache=cache)
    assert cache.directory == own
    assert len(entries(own)) == cache.misses


def test_missing_folder_is_made_private(golden, tmp_path):
    root = tmp_path / "a" / "b" / "cache"
    old = os.umask(0o002)  # a umask that would leave it group-writable
    try:
        cache = FrameCache(root)
        open_profile(golden, cache=cache)
    finally:
        os.umask(old)
    assert cache.directory == root and mode(root) == 0o700
    assert len(entries(root)) == cache.misses


def test_own_user_folder_others_could_write_is_made_private(golden, tmp_path):
    shared = make_dir(tmp_path / "shared", 0o1777)
    mine = make_dir(shared / f"u{os.geteuid()}", 0o777)
    cache = FrameCache(shared)
    open_profile(golden, cache=cache)
    assert cache.directory == mine and mode(mine) == 0o700
    assert len(entries(mine)) == cache.misses


@as_root
def test_entry_planted_in_a_shared_folder_is_not_served(golden, tmp_path, world_dir):
    """The case of the report: another user writes the predictable entry name first."""
    n = count_entries(golden, tmp_path)
    prof, entry, key = warm(golden, tmp_path / "learn")
    shared = make_dir(world_dir / "shared", 0o1777)
    planted = shared / entry.name
    data = decoy_bytes(prof, key)
    as_user(NOBODY, write_file(planted, data))
    assert planted.stat().st_uid == NOBODY

    cache = FrameCache(shared)
    again = open_profile(golden, cache=cache)
    assert_golden(again)
    assert (cache.hits, cache.misses) == (0, n)
    assert planted.read_bytes() == data  # left alone: it is not ours
    assert cache.directory == shared / f"u{os.geteuid()}"
    assert_rebuilt(cache.directory / entry.name, key)


@as_root
@pytest.mark.parametrize("squat", ["folder", "symlink"])
def test_user_folder_taken_by_another_user_turns_the_cache_off(squat, golden, tmp_path, world_dir):
    n = count_entries(golden, tmp_path)
    prof, entry, key = warm(golden, tmp_path / "learn")
    shared = make_dir(world_dir / "shared", 0o1777)
    theirs = shared / "theirs"
    mine = shared / f"u{os.geteuid()}"
    data = decoy_bytes(prof, key)

    def plant() -> None:
        os.mkdir(theirs, 0o777)
        os.chmod(theirs, 0o777)
        write_file(theirs / entry.name, data, 0o666)()
        if squat == "folder":
            os.rename(theirs, mine)
        else:
            os.symlink(theirs, mine)

    as_user(NOBODY, plant)
    cache = FrameCache(shared)
    again = open_profile(golden, cache=cache)
    assert_golden(again)
    assert (cache.hits, cache.misses) == (0, n)
    assert cache.directory is None
    assert len(cache.problems) == 1 and cache.problems[0].startswith(f"cache not used ({shared}: ")
    assert "NPUSCOPE_CACHE_DIR" in cache.problems[0]
    assert any("cache not used" in n for n in again.notes)
    # Nothing was written into the other user's folder.
    folder = mine.resolve()
    assert [p.name for p in folder.iterdir()] == [entry.name]
    assert (folder / entry.name).read_bytes() == data


# --------------------------------------------------------------------------- what the entry holds


def _changed(frame: pl.DataFrame, change: str, column: str) -> pl.DataFrame:
    if change == "dtype":
        return frame.with_columns(pl.col(column).cast(pl.String))
    if change == "missing":
        return frame.drop(column)
    return frame.with_columns(pl.lit(1.0).alias("surplus"))


@pytest.mark.parametrize(
    "kind,change,column",
    [
        ("tasks", "dtype", "duration_us"),
        ("tasks", "dtype", "start_ns"),
        ("tasks", "missing", "start_ns"),
        ("statistic", "dtype", "ratio_pct"),
        ("statistic", "missing", "total_us"),
        ("statistic", "extra", None),
        ("events", "dtype", "ts_ns"),
        ("events", "missing", "name"),
        ("events", "extra", None),
        ("steps", "dtype", "iteration_end_ns"),
        ("steps", "missing", "iteration_id"),
    ],
)
def test_entry_with_other_columns_or_dtypes_is_rebuilt(kind, change, column, tmp_path, cache_dir):
    demo = tmp_path / "demo"
    shutil.copytree(ensure_demo(), demo)
    reference = open_profile(demo, cache=FrameCache(enabled=False))
    _, entry, key = warm(demo, cache_dir, kind)
    good = pl.read_parquet(entry)
    entry.write_bytes(b"")  # keeps the file (mode 0600, this user's) for the rewrite
    _changed(good, change, column).write_parquet(entry, metadata={_KEY: key})

    cache = FrameCache(cache_dir)
    prof = open_profile(demo, cache=cache)
    assert cache.misses == 1
    assert any(entry.name in p and "other columns or dtypes" in p for p in cache.problems), cache.problems
    assert_frame_equal(prof.tasks, reference.tasks)
    assert_frame_equal(prof.op_statistic, reference.op_statistic)
    assert_frame_equal(prof.events, reference.events)
    assert_frame_equal(prof.steps, reference.steps)
    assert prof.span_ns() == reference.span_ns()
    assert_frame_equal(pl.read_parquet(entry), good)  # rebuilt and written back
    again = FrameCache(cache_dir)
    open_profile(demo, cache=again)
    assert again.misses == 0 and again.problems == []


def test_tasks_entry_may_hold_more_columns(golden, cache_dir, tmp_path):
    """PMU counters follow the canonical tasks columns: extra columns are no mismatch."""
    n = count_entries(golden, tmp_path)
    _, entry, key = warm(golden, cache_dir)
    pl.read_parquet(entry).with_columns(pl.lit(2.0).alias("surplus_counter")).write_parquet(entry, metadata={_KEY: key})
    cache = FrameCache(cache_dir)
    prof = open_profile(golden, cache=cache)
    assert (cache.hits, cache.misses) == (n, 0)
    assert prof.pmu_columns[-1] == "surplus_counter"


def test_load_or_build_schema_argument(tmp_path, cache_dir):
    src = tmp_path / "op_summary_1.csv"
    src.write_text("x\n")
    calls = []

    def build() -> pl.DataFrame:
        calls.append(1)
        return pl.DataFrame({"a": [1, 2], "b": ["x", "y"]})

    FrameCache(cache_dir).load_or_build("t", [src], build)
    for schema, hit in [
        ({"a": pl.Int64, "b": pl.String}, True),
        ({"b": pl.String, "a": pl.Int64}, True),  # order is not compared
        ({"a": pl.Int64}, False),
        ({"a": pl.Float64, "b": pl.String}, False),
        ({"a": pl.Int64, "b": pl.String, "c": pl.Int64}, False),
        (lambda f: f.height == 2, True),
        (lambda f: f.height == 3, False),
        (lambda f: f["nope"], False),  # a check that raises is a mismatch, not a traceback
    ]:
        calls.clear()
        cache = FrameCache(cache_dir)
        frame = cache.load_or_build("t", [src], build, schema=schema)
        assert frame.shape == (2, 2)
        assert (cache.hits, len(calls)) == ((1, 0) if hit else (0, 1)), schema
        assert bool(cache.problems) is not hit


# --------------------------------------------------------------------------- the diagnosis beside them


@pytest.mark.parametrize("kind", ["wait_causes", "findings"])
def test_diagnosis_entry_that_does_not_fit_is_rebuilt(kind, cache_dir):
    profile = open_profile(ensure_demo(), cache=FrameCache(enabled=False))
    fresh = diagnose(profile)
    diagnose(profile, cache=FrameCache(cache_dir))
    entry = entry_of(cache_dir, kind)
    key = pl.read_parquet_metadata(entry)[_KEY]
    stored = pl.read_parquet(entry)
    bad = stored.head(3) if kind == "wait_causes" else pl.DataFrame({"findings": ["[{not json"]})
    entry.write_bytes(b"")
    bad.write_parquet(entry, metadata={_KEY: key})

    cache = FrameCache(cache_dir)
    d = diagnose(profile, cache=cache)
    assert cache.misses == 1
    assert d.findings == fresh.findings
    assert_frame_equal(d.tasks, fresh.tasks)
    assert_frame_equal(pl.read_parquet(entry), stored)
    if kind == "findings":
        assert orjson.loads(stored["findings"][0])


# --------------------------------------------------------------------------- same name, other file


def test_source_replaced_by_another_file_same_size_and_mtime_is_rebuilt(golden, cache_dir):
    open_profile(golden, cache=FrameCache(cache_dir))
    f = golden / MSOUT / OP_SUMMARY
    st = f.stat()
    data = f.read_bytes()
    assert data.count(b",151.000,") == 1
    new = f.with_name("new.tmp")
    new.write_bytes(data.replace(b",151.000,", b",999.000,"))  # same size
    os.utime(new, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(new, f)  # a new inode under the old name, with the old size and mtime
    assert (f.stat().st_size, f.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    assert f.stat().st_ino != st.st_ino

    cache = FrameCache(cache_dir)
    prof = open_profile(golden, cache=cache)
    assert cache.hits and cache.misses  # the entries of the other files still serve
    assert prof.tasks["duration_us"].to_list() == [999.0, 15.0, 0.0]


def test_source_rewritten_in_place_with_its_mtime_put_back_is_rebuilt(golden, cache_dir):
    open_profile(golden, cache=FrameCache(cache_dir))
    f = golden / MSOUT / OP_SUMMARY
    st = f.stat()
    f.write_bytes(f.read_bytes().replace(b",151.000,", b",999.000,"))  # same inode, same size
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # only the ctime tells
    assert (f.stat().st_ino, f.stat().st_size, f.stat().st_mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns)

    cache = FrameCache(cache_dir)
    prof = open_profile(golden, cache=cache)
    assert cache.hits and cache.misses  # the entries of the other files still serve
    assert prof.tasks["duration_us"].to_list() == [999.0, 15.0, 0.0]


# --------------------------------------------------------------------------- unreachable folder


def test_cache_folder_below_an_unreadable_folder_as_unprivileged_process(unpriv, world_dir, samples):
    mode_, kw = unpriv
    prof = world_dir / "profile"
    shutil.copytree(samples / "msprof_golden", prof)
    make_writable(prof)
    locked = make_dir(world_dir / "locked", 0o000)  # denies even its owner without DAC caps
    cache = locked / "cache"

    res = open_unprivileged(prof, cache, mode_, kw, world_dir)
    assert res["outcome"] == "ok", res["message"]
    assert res["durations"] == GOLDEN_DURATIONS and res["events"] == 25
    assert len(res["problems"]) == 1, res["problems"]
    assert res["problems"][0].startswith(f"cache not used ({cache}: "), res["problems"]

    proc = run_python(["-m", "npuscope", "inspect", prof], cache=cache, cwd=world_dir, **kw)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert re.search(r"^note      cache not used ", proc.stdout, re.M), proc.stdout
    assert re.search(r"^0\s+3\s+1\s", proc.stdout, re.M), proc.stdout  # card 0: 3 tasks, 1 type
    locked.chmod(0o755)
    assert not cache.exists()
