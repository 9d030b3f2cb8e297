"""The mini timeline widget: lines drawn from levels, the axis, the marker, key bindings."""

from __future__ import annotations

from unittest.mock import PropertyMock, patch

import polars as pl
import pytest
from textual.app import App, ComposeResult
from textual.geometry import Size

from npuscope.analysis.timeline_view import build_model, fit
from npuscope.tui.widgets.mini_timeline import (
    CAUSE_STYLES,
    LABEL_WIDTH,
    LANE_STYLES,
    MiniTimeline,
    block,
    format_time,
)

T0 = 1_717_575_960_000_000_000


def model(rows=None, events=None):
    """Default: AI_CORE busy [0, 1000) and [3000, 4000); a 2 µs recompilation wait before the second."""
    rows = rows or [("AI_CORE", 0, 1000, 0, None), ("AI_CORE", 3000, 1000, 2000, "recompilation")]
    frame = pl.DataFrame(
        {
            "card": ["0"] * len(rows),
            "task_type": [r[0] for r in rows],
            "start_ns": [T0 + r[1] for r in rows],
            "duration_us": [r[2] / 1000 for r in rows],
            "wait_us": [r[3] / 1000 for r in rows],
            "wait_cause": [r[4] for r in rows],
        },
        schema_overrides={"wait_cause": pl.String},
    )
    return build_model(frame, events, "0")


def lines(widget: MiniTimeline, width: int, height: int) -> list[str]:
    """render_line(y).text for every line, without an app (the size is patched in)."""
    with patch.object(MiniTimeline, "size", new_callable=PropertyMock, return_value=Size(width, height)):
        return [widget.render_line(y).text for y in range(height)]


def cells(line: str) -> str:
    return line[LABEL_WIDTH:]


def test_block_characters_by_level():
    assert [block(x) for x in (0, 0.01, 0.5, 1.0, 1.7)] == [" ", "▁", "▄", "█", "█"]


def test_lanes_labels_marker_and_axis_lines():
    w = MiniTimeline(model())
    out = lines(w, LABEL_WIDTH + 8, 4)
    assert out[0] == "AI_CORE      ██    ██"
    assert out[1] == "idle           ████  "
    assert out[2].strip() == ""  # no selection yet
    assert out[3].startswith("zoom ×1 ")
    assert cells(out[3]).startswith("0 us")


def test_axis_shows_the_window_relative_to_the_card_start():
    m = model([("AI_CORE", 0, 1000, 0, None), ("AI_CORE", 374_000_000, 1_100_000, 0, None)])
    out = lines(MiniTimeline(m), 80, len(m.lanes) + 2)
    axis = out[-1]
    assert axis.startswith("zoom ×1")
    assert cells(axis).startswith("0 ms")
    assert axis.endswith("375.1 ms")


def test_half_busy_columns_draw_half_blocks():
    w = MiniTimeline(model([("AI_VECTOR_CORE", 0, 500, 0, None), ("AI_VECTOR_CORE", 1000, 500, 0, None)]))
    out = lines(w, LABEL_WIDTH + 3, 3)
    # Window [0, 1500): columns of 500 ns, the middle one idle.
    assert out[0] == "AI_VECTOR    █ █"
    w.window = (T0 + 250, T0 + 1250)
    assert lines(w, LABEL_WIDTH + 2, 3)[0] == "AI_VECTOR    ▄▄"


def test_idle_cells_are_coloured_by_cause_and_lanes_by_lane():
    w = MiniTimeline(model())
    with patch.object(MiniTimeline, "size", new_callable=PropertyMock, return_value=Size(LABEL_WIDTH + 8, 4)):
        idle = list(w.render_line(1))
        core = list(w.render_line(0))
    assert any(seg.text.strip() and seg.style == CAUSE_STYLES["recompilation"] for seg in idle)
    assert all(seg.style == LANE_STYLES["AI_CORE"] for seg in core if "█" in seg.text)


def test_selected_task_is_marked_at_its_columns():
    w = MiniTimeline(model())
    w.select(T0 + 3000, T0 + 4000)
    marker = cells(lines(w, LABEL_WIDTH + 8, 4)[2])
    assert marker == "      ▲▲"


def test_selection_off_screen_points_to_it():
    w = MiniTimeline(model())
    w.select(T0 + 3000, T0 + 4000)
    w.window = (T0, T0 + 1000)  # panned away by hand
    assert "selected ▶" in lines(w, LABEL_WIDTH + 20, 4)[2]


def test_render_runs_once_per_window_and_width():
    w = MiniTimeline(model())
    lines(w, 40, 4)
    lines(w, 40, 4)
    assert w.render_count == 1
    w.window = (T0, T0 + 2000)
    lines(w, 40, 4)
    assert w.render_count == 2
    lines(w, 50, 4)
    assert w.render_count == 3


def test_window_is_clamped_to_the_model():
    w = MiniTimeline(model())
    w.window = (T0 - 10_000, T0 - 8_000)
    assert w.window == (T0, T0 + 2000)
    w.window = (T0, T0 + 10)
    assert w.window[1] - w.window[0] == 1000


def test_no_model_draws_one_dim_line():
    w = MiniTimeline()
    out = lines(w, 30, 2)
    assert out[0].startswith("no timeline")
    assert out[1].strip() == ""


def test_format_time_resolves_the_window():
    assert format_time(0, 375e6) == "0 ms"
    assert format_time(375_100_000, 375e6) == "375.1 ms"
    assert format_time(300_123_400, 1000) == "300.1234 ms"
    assert format_time(2_500_000_000, 3e9) == "2.5 s"
    assert format_time(-20, 375e6) == "0.0 ms"  # before the card start by less than the precision
    assert format_time(1_500, 2_000) == "1.5 us"


def test_only_the_zoom_bindings_are_shown():
    shown = {b.action: b.show for b in MiniTimeline.BINDINGS}
    assert shown == {"zoom_in": True, "zoom_out": True, "pan_left": False, "pan_right": False, "fit": False}


class Host(App):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def compose(self) -> ComposeResult:
        yield MiniTimeline(self.m)


def wide_model():
    """100 tasks of 1 µs every 10 µs, a recompilation wait before task 90."""
    rows = [
        ("AI_CORE", i * 10_000, 1000, 5000 if i == 90 else 0, "recompilation" if i == 90 else None) for i in range(100)
    ]
    return model(rows)


async def test_keys_zoom_pan_and_fit():
    m = wide_model()
    app = Host(m)
    async with app.run_test(size=(100, 20)) as pilot:
        w = app.query_one(MiniTimeline)
        w.focus()
        full = fit(m)
        assert w.region.height == len(m.lanes) + 2
        assert w.window == full

        await pilot.press("+")
        s, e = w.window
        assert e - s == (full[1] - full[0]) // 2
        await pilot.press("=")
        assert w.window[1] - w.window[0] == (full[1] - full[0]) // 4

        before = w.window
        await pilot.press("l")
        assert w.window[0] > before[0]
        await pilot.press("right")
        await pilot.press("h", "left", "left")
        assert w.window[0] < before[0]
        assert w.window[1] - w.window[0] == before[1] - before[0]  # panning keeps the zoom

        await pilot.press("-")
        assert w.window[1] - w.window[0] == (full[1] - full[0]) // 2
        await pilot.press("0")
        assert w.window == full

        await pilot.press("left")  # at the left edge already: clamped
        assert w.window == full


async def test_selected_task_stays_in_view_while_zooming():
    m = wide_model()
    app = Host(m)
    async with app.run_test(size=(100, 20)) as pilot:
        w = app.query_one(MiniTimeline)
        w.focus()
        start, end = T0 + 950_000, T0 + 951_000  # the 96th of 100 tasks, near the right end
        w.select(start, end)
        for _ in range(12):
            await pilot.press("+")
            await pilot.pause()
            s, e = w.window
            assert s <= (start + end) // 2 <= e
            if e - s >= 1250:  # the task fits: all of it stays in view
                assert s <= start and end <= e
            marker = w.render_line(len(m.lanes)).text
            assert "▲" in marker
        assert e - s == 1000  # zoomed to the 1 µs limit, on the task
        # Selecting a task outside the zoomed window pans to it (as long as the window:
        # its start a tenth from the left).
        w.select(T0 + 10_000, T0 + 11_000)
        await pilot.pause()
        assert w.window == (T0 + 9_900, T0 + 10_900)
        assert "▲" in w.render_line(len(m.lanes)).text


async def test_set_model_none_then_a_model_resizes():
    m = wide_model()
    app = Host(None)
    async with app.run_test(size=(100, 20)) as pilot:
        w = app.query_one(MiniTimeline)
        await pilot.pause()
        assert w.region.height == 1
        assert w.render_line(0).text.startswith("no timeline")
        w.set_model(m)
        await pilot.pause()
        assert w.region.height == len(m.lanes) + 2
        assert w.render_line(0).text.startswith("AI_CORE")
        w.focus()
        await pilot.press("+")
        assert w.window != fit(m)
        w.set_model(None)
        await pilot.pause()
        assert w.window is None
        await pilot.press("+", "l", "0")  # no model: the actions do nothing
        assert w.window is None


@pytest.mark.parametrize("key", ["+", "-", "l", "h", "0"])
async def test_key_presses_repaint_once(key):
    m = wide_model()
    app = Host(m)
    async with app.run_test(size=(100, 20)) as pilot:
        w = app.query_one(MiniTimeline)
        w.focus()
        await pilot.press("+")  # somewhere every key can move
        await pilot.press("l")
        await pilot.pause()
        before = (w.render_count, w.window)
        await pilot.press(key)
        await pilot.pause()
        assert w.window != before[1]
        assert w.render_count == before[0] + 1
