"""The mini timeline's data: lanes, exact busy levels, idle causes, window helpers."""

from __future__ import annotations

import random
from fractions import Fraction

import polars as pl
import pytest

from npuscope.analysis import diagnose
from npuscope.analysis.timeline_view import (
    Intervals,
    Window,
    build_model,
    ensure_visible,
    fit,
    pan,
    render,
    zoom,
)
from npuscope.fixtures.demo_profile import ensure_demo
from npuscope.parsers import open_profile
from npuscope.parsers.columns import EVENT_SCHEMA

T0 = 1_717_575_960_000_000_000


def tasks(*rows: tuple) -> pl.DataFrame:
    """rows: (task_type, start offset ns, duration ns, wait ns, cause[, card])."""
    recs = []
    for r in rows:
        ttype, start, dur, wait, cause, *rest = r
        recs.append(
            {
                "card": rest[0] if rest else "0",
                "op_name": ttype,
                "op_type": ttype,
                "task_type": ttype,
                "start_ns": T0 + start,
                "duration_us": dur / 1000,
                "wait_us": wait / 1000,
                "wait_cause": cause,
            }
        )
    schema = {
        "card": pl.String,
        "op_name": pl.String,
        "op_type": pl.String,
        "task_type": pl.String,
        "start_ns": pl.Int64,
        "duration_us": pl.Float64,
        "wait_us": pl.Float64,
        "wait_cause": pl.String,
    }
    return pl.DataFrame(recs, schema=schema).with_row_index("row")


def events(*rows: tuple) -> pl.DataFrame:
    """rows: (name, start offset ns, duration ns[, card[, ph]])."""
    recs = []
    for name, start, dur, *rest in rows:
        card = rest[0] if rest else "0"
        ph = rest[1] if len(rest) > 1 else "X"
        recs.append(
            {
                "card": card,
                "process": "CANN",
                "thread": "t",
                "pid": "1",
                "tid": "1",
                "name": name,
                "ph": ph,
                "ts_ns": T0 + start,
                "dur_ns": dur,
                "cat": None,
                "flow_id": None,
                "task_type": None,
                "stream_id": None,
                "task_id": None,
                "connection_id": None,
            }
        )
    return pl.DataFrame(recs, schema=EVENT_SCHEMA)


def view(views, name):
    return next(v for v in views if v.name == name)


def test_a_task_covering_half_a_column_is_level_half():
    m = build_model(
        tasks(("AI_CORE", 0, 10, 0, None), ("AI_CORE", 1000, 500, 0, None), ("AI_CORE", 2500, 1000, 0, None)), None, "0"
    )
    views = render(m, T0, T0 + 4000, 4)
    assert view(views, "AI_CORE").levels == (0.01, 0.5, 0.5, 0.5)


def test_levels_at_fractional_column_edges_are_exact():
    # 3 columns of 1000/3 ns over [0, 1000): the task [0, 500) fills column 0, half of column 1.
    m = build_model(tasks(("AI_CORE", 0, 500, 0, None), ("AI_CORE", 1000, 1, 0, None)), None, "0")
    levels = view(render(m, T0, T0 + 1000, 3), "AI_CORE").levels
    assert levels[0] == pytest.approx(1.0)
    assert levels[1] == pytest.approx(0.5)
    assert levels[2] == pytest.approx(0.0)


def test_overlapping_tasks_in_one_lane_clip_at_one():
    m = build_model(
        tasks(("AI_CORE", 0, 1000, 0, None), ("AI_CORE", 0, 1000, 0, None), ("AI_CORE", 0, 500, 0, None)), None, "0"
    )
    assert view(render(m, T0, T0 + 2000, 2), "AI_CORE").levels == (1.0, 0.0)


def test_matches_a_brute_force_count_on_random_overlapping_intervals():
    rng = random.Random(7)
    rows = []
    for _ in range(300):
        start = rng.randrange(0, 100_000)
        rows.append(("AI_VECTOR_CORE", start, rng.randrange(0, 3000), 0, None))
    m = build_model(tasks(*rows), None, "0")
    ivs = [(T0 + s, T0 + s + d) for _, s, d, _, _ in rows]
    for _ in range(25):
        a = T0 + rng.randrange(-1000, 100_000)
        b = a + rng.randrange(1, 50_000)
        width = rng.randrange(1, 60)
        got = view(render(m, a, b, width), "AI_VECTOR_CORE").levels
        for i in range(width):
            lo = a + Fraction(b - a) * i / width
            hi = a + Fraction(b - a) * (i + 1) / width
            busy = sum(max(Fraction(0), min(hi, e) - max(lo, s)) for s, e in ivs)
            assert got[i] == pytest.approx(float(min(1, busy / (hi - lo))), abs=1e-9)


def test_prefix_sums_switch_to_int128_when_int64_could_overflow():
    big = 2**62
    iv = Intervals.build(pl.Series([0, big]), pl.Series([10, big + 10]), 0)
    assert iv.start_sums.dtype == pl.Int128
    busy = iv.busy_at(pl.Series([0, 5, big + 5, big + 20]), [0.0] * 4)
    assert busy == [0, 5, 15, 20]


def test_lanes_are_ordered_grouped_and_empty_device_lanes_omitted():
    m = build_model(
        tasks(
            ("CPU", 0, 100, 0, None),
            ("HCCL", 0, 100, 0, None),
            ("MIX_AIV", 0, 100, 0, None),
            ("MIX_AIC", 200, 100, 0, None),
            ("AI_CORE", 0, 100, 0, None),
            ("COMMUNICATION", 400, 100, 0, None),
            ("AI_CPU", 0, 100, 0, None, "1"),
        ),
        None,
        "0",
    )
    assert m.lane_names == ("AI_CORE", "MIX", "COMM", "OTHER", "idle")
    lanes = {lane.name: len(lane.intervals) for lane in m.lanes}
    assert lanes == {"AI_CORE": 1, "MIX": 2, "COMM": 2, "OTHER": 1, "idle": 0}


def test_idle_lane_covers_the_wait_before_each_task_with_its_cause():
    m = build_model(
        tasks(
            ("AI_CORE", 0, 1000, 0, None),
            ("AI_CORE", 2000, 1000, 1000, "recompilation"),  # idle [1000, 2000)
            ("AI_CORE", 4000, 1000, 1000, None),  # short wait: no cause
            ("AI_CORE", 6000, 1000, 500, "host_op"),
        ),
        None,
        "0",
    )  # idle [5500, 6000)
    idle = view(render(m, T0, T0 + 7000, 7), "idle")
    assert idle.levels == (0.0, 1.0, 0.0, 1.0, 0.0, 0.5, 0.0)
    assert idle.causes == (None, "recompilation", None, None, None, "host_op", None)
    # Device lanes carry no causes.
    assert set(view(render(m, T0, T0 + 7000, 7), "AI_CORE").causes) == {None}


def test_idle_cause_of_a_column_is_the_one_with_the_most_idle_time():
    m = build_model(
        tasks(
            ("AI_CORE", 300, 100, 300, "host_op"),  # idle [0, 300)
            ("AI_CORE", 1000, 100, 600, "recompilation"),  # idle [400, 1000)
            ("AI_CORE", 1500, 100, 400, "expected"),  # idle [1100, 1500)
            ("AI_CORE", 2000, 100, 400, "unexplained"),
        ),  # idle [1600, 2000)
        None,
        "0",
    )
    idle = view(render(m, T0, T0 + 2000, 2), "idle")
    assert idle.causes == ("recompilation", "unexplained")  # tie 400/400: unexplained first
    assert idle.levels == (0.9, 0.8)


def test_host_lanes_come_from_this_card_and_host_api_events_only():
    ev = events(
        ("AscendCL@aclopCompileAndExecute", 0, 1000),  # compile, card 0
        ("AscendCL@aclrtSynchronizeStream", 1000, 500),  # sync
        ("AscendCL@aclrtMemcpy", 1500, 500, "host"),  # sync, host-wide
        ("AscendCL@aclopCompileAndExecute", 2000, 1000, "1"),  # other card
        ("Compile without api marker", 2000, 1000),  # not a host API event
        ("AscendCL@aclopCompileAndExecute", 2000, 1000, "0", "i"),  # instant, not X
        ("Node@launch", 3000, 1000),  # host API, neither lane
    )
    m = build_model(tasks(("AI_CORE", 0, 4000, 0, None)), ev, "0")
    assert m.lane_names == ("AI_CORE", "idle", "host compile", "host sync")
    views = render(m, T0, T0 + 4000, 4)
    assert view(views, "host compile").levels == (1.0, 0.0, 0.0, 0.0)
    assert view(views, "host sync").levels == (0.0, 1.0, 0.0, 0.0)


def test_no_host_lanes_without_host_events_for_the_card():
    ev = events(("AscendCL@aclopCompileAndExecute", 0, 1000, "1"), ("Compile", 0, 1000))
    m = build_model(tasks(("AI_CORE", 0, 4000, 0, None)), ev, "0")
    assert m.lane_names == ("AI_CORE", "idle")
    # A card with only `host` events still gets both lanes, even the empty sync lane.
    ev = events(("AscendCL@aclopCompileAndExecute", 0, 1000, "host"))
    assert build_model(tasks(("AI_CORE", 0, 4000, 0, None)), ev, "0").lane_names[-2:] == ("host compile", "host sync")


def test_fit_spans_idle_gaps_and_host_calls_before_the_first_task():
    ev = events(("AscendCL@aclopCompileAndExecute", -5000, 1000), ("AscendCL@aclrtMemcpy", 9000, 2000))
    m = build_model(tasks(("AI_CORE", 1000, 1000, 3000, "recompilation")), ev, "0")
    assert m.origin_ns == T0 + 1000
    assert fit(m) == (T0 - 5000, T0 + 11000)
    assert fit(m).bounds == (T0 - 5000, T0 + 11000)


def test_zoom_narrows_around_the_center_and_clamps():
    w = Window(0, 100_000, bounds=(0, 100_000))
    assert zoom(w, 2, 50_000) == (25_000, 75_000)
    # A center inside the window keeps its place on screen.
    assert zoom(w, 4, 20_000) == (15_000, 40_000)
    # A center outside the window becomes the middle.
    assert zoom(Window(0, 10_000, bounds=(0, 100_000)), 2, 60_000) == (57_500, 62_500)
    # At least 1 µs, and never beyond the span.
    assert zoom(w, 1e9, 50_000) == (49_500, 50_500)
    assert zoom(zoom(w, 2, 90_000), 0.001, 90_000) == (0, 100_000)
    assert zoom(Window(90_000, 100_000, bounds=(0, 100_000)), 0.5, 99_000) == (80_000, 100_000)
    # Bounds travel with the window, or come as a keyword for plain tuples.
    assert zoom(w, 2, 50_000).bounds == (0, 100_000)
    assert zoom((0, 100_000), 0.5, 0, bounds=(0, 100_000)) == (0, 100_000)
    assert zoom((0, 100_000), 0.5, 50_000) == (-50_000, 150_000)  # no bounds: no clamping


def test_pan_shifts_by_a_fraction_of_the_width_and_clamps():
    w = Window(20_000, 40_000, bounds=(0, 100_000))
    assert pan(w, 0.5) == (30_000, 50_000)
    assert pan(w, -0.25) == (15_000, 35_000)
    assert pan(w, -5) == (0, 20_000)
    assert pan(w, 50) == (80_000, 100_000)
    assert pan(pan(w, 50), 1) == (80_000, 100_000)


def test_ensure_visible_pans_without_zooming():
    w = Window(20_000, 40_000, bounds=(0, 100_000))
    assert ensure_visible(w, 25_000, 26_000) is w
    # Far away: centred.
    moved = ensure_visible(w, 70_000, 72_000)
    assert moved == (61_000, 81_000)
    assert moved.bounds == (0, 100_000)
    assert ensure_visible(w, 99_000, 99_500) == (80_000, 100_000)
    # Near or partly visible: scrolled in to a tenth of the window from the edge.
    assert ensure_visible(w, 45_000, 46_000) == (28_000, 48_000)
    assert ensure_visible(w, 39_000, 41_000) == (23_000, 43_000)
    assert ensure_visible(w, 15_000, 16_000) == (13_000, 33_000)
    assert ensure_visible(w, 500, 1000) == (0, 20_000)
    # A task longer than most of the window: its start lands a tenth from the left.
    assert ensure_visible(w, 50_000, 90_000) == (48_000, 68_000)
    # Plain tuples with explicit bounds.
    assert ensure_visible((20_000, 40_000), 99_000, 99_500, bounds=(0, 100_000)) == (80_000, 100_000)


def test_window_arithmetic_is_exact_at_epoch_scale():
    # float64 cannot hold epoch nanoseconds exactly (steps of 256 ns near 1.7e18).
    w = Window(T0 + 20_001, T0 + 40_001, bounds=(T0, T0 + 100_003))
    assert pan(w, 0.25) == (T0 + 25_001, T0 + 45_001)
    assert zoom(w, 2, T0 + 30_001) == (T0 + 25_001, T0 + 35_001)
    assert zoom(w, 1e9, T0 + 30_001) == (T0 + 29_501, T0 + 30_501)
    assert ensure_visible(w, T0 + 45_001, T0 + 46_001) == (T0 + 28_001, T0 + 48_001)
    assert pan(w, 10) == (T0 + 80_003, T0 + 100_003)


def test_empty_card_has_a_usable_window():
    m = build_model(tasks(("AI_CORE", 0, 10, 0, None, "1")), None, "0")
    assert m.lane_names == ("idle",)
    s, e = fit(m)
    assert e - s == 1000
    assert render(m, s, e, 5)[0].levels == (0.0,) * 5


@pytest.fixture(scope="module")
def demo():
    profile = open_profile(ensure_demo())
    return profile, diagnose(profile)


def test_demo_card0_idle_lane_shows_recompilation_under_host_compiles(demo):
    profile, d = demo
    m = build_model(d.tasks, profile.events, "0")
    assert m.lane_names == ("AI_CORE", "AI_VECTOR_CORE", "AI_CPU", "MIX", "COMM", "idle", "host compile", "host sync")
    views = render(m, *fit(m), 120)
    idle = view(views, "idle")
    compile_ = view(views, "host compile")
    red = [i for i, c in enumerate(idle.causes) if c == "recompilation"]
    assert len(red) >= 10
    assert "host_op" not in idle.causes
    # The host was compiling for (nearly) all of the recompilation idle time.
    assert sum(compile_.levels[i] for i in red) >= 0.9 * sum(idle.levels[i] for i in red)


def test_demo_card1_idle_lane_shows_host_op_waits(demo):
    profile, d = demo
    m = build_model(d.tasks, profile.events, "1")
    assert "AI_CPU" not in m.lane_names
    causes = set(view(render(m, *fit(m), 120), "idle").causes)
    assert "host_op" in causes
    assert "recompilation" not in causes
