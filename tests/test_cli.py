"""`npuscope inspect` end to end, in a subprocess as a user would run it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def _run(*args: str, env_cache: Path | None = None, **kw) -> subprocess.CompletedProcess:
    import os

    env = dict(os.environ)
    if env_cache is not None:
        env["NPUSCOPE_CACHE_DIR"] = str(env_cache)
    return subprocess.run([sys.executable, "-m", "npuscope", *args], capture_output=True, text=True, env=env, **kw)


def test_inspect_sample_prints_layout_cards_files_counts(samples, cache_dir):
    res = _run("inspect", str(samples / "msprof_golden"), env_cache=cache_dir)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "layout    Era B merged export" in out
    assert "cards     0" in out
    assert "mindstudio_profiler_output/op_summary_20240605100000.csv" in out
    assert "mindstudio_profiler_output/msprof_20240605100000.json" in out
    card_line = next(line for line in out.splitlines() if line.startswith("0 "))
    # tasks, op types, compute (151 + 15 + 0), communication, wait (0 + 20 + 5), span, events
    assert card_line.split() == ["0", "3", "1", "166.000", "0.000", "25.000", "151.000", "25"]
    assert "timeline  25 events" in out
    assert list(cache_dir.glob("*.parquet")), "the first load fills the cache"


def test_inspect_no_cache_writes_nothing(samples, cache_dir):
    res = _run("inspect", "--no-cache", str(samples / "torch_npu_ascend_pt"), env_cache=cache_dir)
    assert res.returncode == 0, res.stderr
    assert "torch_npu" in res.stdout
    assert list(cache_dir.iterdir()) == []


def test_inspect_lists_captures_newest_first(tmp_path, samples, cache_dir):
    import shutil

    root = tmp_path / "ascend_profiling"
    for stamp in ("20240101000000000", "20240301000000000"):
        shutil.copytree(
            samples / "msprof_golden" / "mindstudio_profiler_output",
            root / f"PROF_000001_{stamp}_ABCDEFGHIJKLMNOP" / "mindstudio_profiler_output",
        )
    res = _run("inspect", str(root), env_cache=cache_dir)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert "captures  2 (newest first; pick one with --capture)" in lines
    assert "  * [0] PROF_000001_20240301000000000_ABCDEFGHIJKLMNOP  (era_b, 1 source(s))" in lines
    res = _run("inspect", str(root), "--capture", "1", env_cache=cache_dir)
    assert "capture   PROF_000001_20240101000000000_ABCDEFGHIJKLMNOP" in res.stdout


def test_bad_path_exits_2_with_one_line(tmp_path, cache_dir):
    res = _run("inspect", str(tmp_path / "missing"), env_cache=cache_dir)
    assert res.returncode == 2
    assert res.stdout == ""
    assert res.stderr.count("\n") == 1
    assert res.stderr.startswith("npuscope: ") and "no such file or folder" in res.stderr
    assert "Traceback" not in res.stderr


def test_help_lists_inspect():
    res = _run("--help")
    assert res.returncode == 0
    assert "inspect" in res.stdout
    res = _run("inspect", "--help")
    assert "--no-cache" in res.stdout and "--capture" in res.stdout


def test_closed_pipe_is_not_an_error(cache_dir):
    import os

    env = dict(os.environ, NPUSCOPE_CACHE_DIR=str(cache_dir))
    res = subprocess.run(
        f"{sys.executable} -m npuscope report | head -n 1", shell=True, capture_output=True, text=True, env=env
    )
    assert res.stdout.startswith("npuscope report: ")
    assert res.stderr == ""


def test_explorer_bad_path_exits_2_before_the_ui(tmp_path, cache_dir):
    empty = tmp_path / "empty"
    empty.mkdir()
    res = _run(str(empty), env_cache=cache_dir, timeout=60)
    assert res.returncode == 2
    assert res.stderr.startswith("npuscope: ") and "no profile data found" in res.stderr
    assert res.stderr.count("\n") == 1 and res.stdout == ""


def test_explorer_bad_compare_path_exits_2(tmp_path, cache_dir):
    res = _run("--compare", str(tmp_path / "missing"), env_cache=cache_dir, timeout=60)
    assert res.returncode == 2
    assert "no such file or folder" in res.stderr and res.stderr.count("\n") == 1
