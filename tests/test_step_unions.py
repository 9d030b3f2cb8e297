"""Steps derived from tasks by time windows, against plain interval arithmetic.

derive_steps assigns each task to the last window of its card that starts at or before it
(cut at the window's end) and takes three unions per window in vectorised passes
(parsers/steps.py `_by_time`, `_union_lengths`). The truth here is computed task by task in
Python: the window found by a scan, the interval clipped, the unions by sorting. Several
cards, windows that leave gaps, tasks before the first window and after the last, cards with
no window, and the fallbacks the passes take when the moved times would not fit in 63 bits.
"""

from __future__ import annotations

import math

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from npuscope.parsers import steps as steps_mod
from npuscope.parsers.steps import WINDOW_SCHEMA, Windows, derive_steps

BASE = 1_700_000_000_000_000_000

TASK = st.tuples(
    st.sampled_from(["0", "1", "7", "x"]),  # card ("x" has no window)
    st.integers(-500, 12_000),  # start (ns, relative)
    st.integers(0, 3_000),  # duration (ns)
    st.booleans(),  # collective
)
# Windows per card: (start, length) pairs made disjoint and ordered below.
WINDOWS = st.dictionaries(
    st.sampled_from(["0", "1", "7"]),
    st.lists(st.tuples(st.integers(0, 2_000), st.integers(1, 4_000)), min_size=1, max_size=4),
    min_size=1,
)


def _union(intervals: list[tuple[int, int]]) -> int:
    total, cur = 0, None
    for s, e in sorted(intervals):
        if cur is None or s > cur[1]:
            if cur is not None:
                total += cur[1] - cur[0]
            cur = [s, e]
        else:
            cur[1] = max(cur[1], e)
    return total + (cur[1] - cur[0] if cur else 0)


def _windows(spec: dict[str, list[tuple[int, int]]]) -> list[tuple[str, int, int, int]]:
    """(card, step, start, end) with each card's windows in order, apart or touching."""
    out = []
    for card, parts in spec.items():
        at = 0
        for step, (gap, length) in enumerate(parts, start=1):
            start = at + gap
            out.append((card, step, BASE + start, BASE + start + length))
            at = start + length
    return out


def _truth(tasks, windows):
    got: dict[tuple[str, int], list[tuple[int, int, bool]]] = {(c, st): [] for c, st, _, _ in windows}
    for card, t, d, comm in tasks:
        s, e = BASE + t, BASE + t + d
        mine = [w for w in windows if w[0] == card and w[2] <= s]
        if not mine:
            continue
        _, step, ws, we = max(mine, key=lambda w: w[2])
        if s >= we:
            continue
        got[(card, step)].append((max(s, ws), min(e, we), comm))
    return got


def _check(tasks, spec):
    windows = _windows(spec)
    frame = pl.DataFrame(
        {
            "card": [c for c, _, _, _ in tasks],
            "step_id": [None] * len(tasks),
            "op_name": ["hcom_allReduce__1" if m else "MatMul" for _, _, _, m in tasks],
            "task_type": ["COMMUNICATION" if m else "AI_CORE" for _, _, _, m in tasks],
            "start_ns": [BASE + t for _, t, _, _ in tasks],
            "duration_us": [d / 1000 for _, _, d, _ in tasks],
        },
        schema_overrides={"step_id": pl.String},
    )
    win = pl.DataFrame(
        {
            "card": [w[0] for w in windows],
            "step": [w[1] for w in windows],
            "step_id": [None] * len(windows),
            "start_ns": [w[2] for w in windows],
            "end_ns": [w[3] for w in windows],
        },
        schema=WINDOW_SCHEMA,
    )
    cards = sorted(spec)
    derived = derive_steps(frame, Windows(win, {c: "step_trace" for c in cards}), cards)
    got = {(r["card"], r["step"]): r for r in derived.to_dicts()}
    truth = _truth(tasks, windows)
    assert set(got) == set(truth)
    for (card, step), items in truth.items():
        _, _, ws, we = next(w for w in windows if w[0] == card and w[1] == step)
        comp = _union([(s, e) for s, e, c in items if not c])
        comm = _union([(s, e) for s, e, c in items if c])
        both = _union([(s, e) for s, e, _ in items])
        g = got[(card, step)]
        assert math.isclose(g["step_us"], (we - ws) / 1000, abs_tol=1e-9)
        assert math.isclose(g["compute_us"], comp / 1000, abs_tol=1e-9)
        assert math.isclose(g["communication_us"], comm / 1000, abs_tol=1e-9)
        assert math.isclose(g["comm_not_overlapped_us"], (both - comp) / 1000, abs_tol=1e-9)
        assert math.isclose(g["free_us"], (we - ws - both) / 1000, abs_tol=1e-9)


@settings(max_examples=60, deadline=None)
@given(tasks=st.lists(TASK, min_size=1, max_size=40), spec=WINDOWS)
def test_steps_by_time_match_plain_interval_arithmetic(tasks, spec):
    _check(tasks, spec)


@settings(max_examples=40, deadline=None)
@given(tasks=st.lists(TASK, min_size=1, max_size=40), spec=WINDOWS)
def test_the_fallbacks_for_times_too_long_to_move_give_the_same(tasks, spec):
    """A limit of 1 sends both passes to their fallbacks: the unions window by window
    (`over`), the window search to polars' as-of join (kept in the intervals' order)."""
    saved = steps_mod._MOVED_MAX
    steps_mod._MOVED_MAX = 1
    try:
        _check(tasks, spec)
    finally:
        steps_mod._MOVED_MAX = saved
