"""A cached diagnosis is the same diagnosis, and a second one is read, not recomputed."""

from __future__ import annotations

from polars.testing import assert_frame_equal

from npuscope.analysis import Thresholds, diagnose
from npuscope.fixtures.demo_profile import ensure_demo
from npuscope.parsers import FrameCache, open_profile


def test_cached_diagnosis_equals_a_fresh_one(cache_dir):
    profile = open_profile(ensure_demo(), cache=FrameCache(enabled=False))
    fresh = diagnose(profile)
    cache = FrameCache(cache_dir)
    first = diagnose(profile, cache=cache)
    assert cache.misses == 2 and cache.hits == 0
    again_cache = FrameCache(cache_dir)
    again = diagnose(profile, cache=again_cache)
    assert again_cache.hits == 2 and again_cache.misses == 0
    for d in (first, again):
        assert d.findings == fresh.findings
        assert_frame_equal(d.tasks, fresh.tasks)
        assert d.compile_events == fresh.compile_events


def test_other_thresholds_are_not_served_from_the_cache(cache_dir):
    profile = open_profile(ensure_demo(), cache=FrameCache(enabled=False))
    diagnose(profile, cache=FrameCache(cache_dir))
    strict = Thresholds(long_wait_us=100_000)
    cache = FrameCache(cache_dir)
    d = diagnose(profile, strict, cache=cache)
    assert cache.hits == 0
    assert d.tasks["wait_cause"].null_count() == d.tasks.height  # no wait that long
    assert d.findings == diagnose(profile, strict).findings
