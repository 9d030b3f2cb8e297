"""Training-level views through the frame cache (parsers/views_cache.py).

A second open reads every view from the cache (nothing derived: read_training_views is
replaced by a function that fails) and gets what read_training_views gives, on real captures
(text with training files, a db export, a text export with derived steps); a changed training
file or option (`strict`) reads them again; a cache that is off writes nothing.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import polars as pl
import pytest

from npuscope.parsers import FrameCache, open_profile, views_cache
from npuscope.parsers.training import VIEWS, read_training_views
from npuscope.parsers.views_cache import cached_training_views

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "samples" / "real"
GPT_RANK = REAL / "torch_npu_2023_gpt3_2rank" / "test_rank_0"
DB_RANK = REAL / "torch_npu_2025_db" / "level1" / "rank0_ascend_pt"
CNN_RANK = REAL / "torch_npu_2024_cnn" / "level1" / "rank0_ascend_pt"


def _rows(frame: pl.DataFrame) -> list[tuple]:
    # Row order among equal sort keys is not fixed by the views: compare as sorted rows.
    return sorted(frame.rows(), key=repr)


def _same(a, b) -> bool:
    return (
        all(getattr(a, v).schema == getattr(b, v).schema for v in VIEWS)
        and all(_rows(getattr(a, v)) == _rows(getattr(b, v)) for v in VIEWS)
        and a.found == b.found
        and a.notes == b.notes
    )


def _never(*args, **kwargs):
    raise AssertionError("the views were derived again")


@pytest.mark.parametrize("sample", [GPT_RANK, DB_RANK, CNN_RANK], ids=["gpt3-text", "db", "cnn-text"])
def test_second_open_reads_the_views_from_the_cache(sample, tmp_path, monkeypatch):
    profile = open_profile(sample, cache=FrameCache(enabled=False))
    truth = read_training_views(profile)
    assert truth.found  # each sample has views: the comparison below is of something
    first = cached_training_views(profile, FrameCache(tmp_path))
    assert _same(first, truth)
    monkeypatch.setattr(views_cache, "read_training_views", _never)
    cache = FrameCache(tmp_path)
    again = cached_training_views(profile, cache)
    assert cache.misses == 0 and cache.hits == len(VIEWS) + 1 and not cache.problems
    assert _same(again, truth)


def test_a_changed_file_or_option_reads_the_views_again(tmp_path):
    rank = tmp_path / "rank"
    shutil.copytree(GPT_RANK, rank)
    root = tmp_path / "cache"
    profile = open_profile(rank, cache=FrameCache(enabled=False))
    cached_training_views(profile, FrameCache(root))

    def misses(prof, **kw) -> int:
        cache = FrameCache(root)
        cached_training_views(prof, cache, **kw)
        return cache.misses

    assert misses(profile) == 0
    assert misses(profile, strict=True) == len(VIEWS) + 1
    # A training file the tasks do not come from: its change alone must be seen.
    comm = rank / "ASCEND_PROFILER_OUTPUT" / "communication.json"
    assert comm not in profile.files
    st = comm.stat()
    os.utime(comm, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert misses(profile) == len(VIEWS) + 1
    assert misses(profile) == 0


def test_views_cache_off_writes_nothing(tmp_path):
    profile = open_profile(GPT_RANK, cache=FrameCache(enabled=False))
    cache = FrameCache(tmp_path / "c", enabled=False)
    views = cached_training_views(profile, cache)
    assert _same(views, read_training_views(profile))
    assert not (tmp_path / "c").exists()
