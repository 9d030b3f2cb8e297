"""The explorer in real terminal sizes: what the op summary shows after `w` and `d`, the
cards strip, the task detail panel, and the screen's keys from any focus.

One app per size: every check of a size runs in the same session. The headers are read from
what the FrameTable draws (its header line, cropped to the screen), the numbers checked
against the op_summary CSV read with the csv module.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from pilot_helpers import wait_loaded

from npuscope.fixtures.demo_profile import ensure_demo
from npuscope.tui.app import NpuscopeApp
from npuscope.tui.screens.finding_screen import FindingScreen
from npuscope.tui.screens.main_screen import MainScreen
from npuscope.tui.screens.task_screen import TaskScreen
from npuscope.tui.widgets.cards_pane import CardsPane
from npuscope.tui.widgets.cards_strip import CardsStrip
from npuscope.tui.widgets.frame_table import FrameTable
from npuscope.tui.widgets.mini_timeline import MiniTimeline

MUST_SHOW = ("Start(", "OP Type", "Duration(", "Wait(", "Cause")


def card0_rows() -> list[dict[str, str]]:
    root = Path(ensure_demo())
    (path,) = root.rglob("op_summary_*.csv")
    with path.open(newline="") as f:
        return [r for r in csv.DictReader(f) if r["Device_id"] == "0"]


def header_titles(table: FrameTable) -> list[str]:
    """The column titles wholly on screen in the header line the table draws."""
    line = table.render_line(0).text
    return [s.title for s in table.shown_columns if s.title in line]


def cells(table: FrameTable, y: int) -> dict[str, str]:
    """Screen line `y` of the table cut into its drawn columns (those on screen)."""
    line = table.render_line(y).text
    out, x = {}, 1
    for shown in table.shown_columns:
        if x + shown.width <= len(line):
            out[shown.column.key] = line[x : x + shown.width].strip()
        x += shown.width + 1
    return out


def unit_of(table: FrameTable, key: str) -> float:
    shown = next(s for s in table.shown_columns if s.column.key == key)
    return shown.scale


async def check_size(size: tuple[int, int], tmp_path: Path, beside: bool) -> None:
    app = NpuscopeApp(ensure_demo(), cache=False, export_dir=tmp_path)
    rows = card0_rows()
    async with app.run_test(size=size) as pilot:
        screen = await wait_loaded(pilot)
        table = screen.query_one("#summary-table", FrameTable)
        width = size[0]
        # The cards: beside the tables from 140 columns, a one-line strip below.
        strip = screen.query_one(CardsStrip)
        cards = screen.query_one(CardsPane)
        if beside:
            assert cards.region.width > 30 and not strip.display
        else:
            assert cards.region.width == 0 and strip.region.height == 1
            assert table.region.width == width

        await pilot.press("w")
        titles = header_titles(table)
        for title in MUST_SHOW:
            assert any(t.startswith(title) for t in titles), (size, title, table.render_line(0).text)
        assert "Op Name" in titles
        first = cells(table, 1)
        worst = max(rows, key=lambda r: float(r["Task Wait Time(us)"]))
        scale = unit_of(table, "wait_us")
        assert first["wait_us"] == f"{float(worst['Task Wait Time(us)']) / scale:,.3f}"
        assert first["wait_cause"] == "recompilation"
        for y in range(1, 8):  # numbers never cut inside a cell
            row = cells(table, y)
            for key in ("start_us", "duration_us", "wait_us"):
                assert "…" not in row[key], (y, key, row[key])

        await pilot.press("d")
        titles = header_titles(table)
        for title in MUST_SHOW:
            assert any(t.startswith(title) for t in titles), (size, title)
        longest = max(rows, key=lambda r: float(r["Task Duration(us)"]))
        first = cells(table, 1)
        assert first["duration_us"] == f"{float(longest['Task Duration(us)']) / unit_of(table, 'duration_us'):,.3f}"

        # Enter on a task row: its detail, names whole; y copies; Esc closes.
        await pilot.press("enter")
        assert isinstance(app.screen, TaskScreen)
        detail = app.screen
        assert detail.row_task["op_name"] == longest["Op Name"]
        assert detail.row_task["input_shapes"] == longest["Input Shapes"].strip('"')
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)

        # The screen's keys work from the timeline (when shown) and the cards.
        timeline = screen.query_one(MiniTimeline)
        focus = timeline if timeline.display and timeline.region.height else cards
        if focus is cards and not beside:
            await pilot.press("f")
        else:
            focus.focus()
        await pilot.pause()
        if focus is timeline:  # Enter with the timeline focused: the table row's action
            await pilot.press("enter")
            assert isinstance(app.screen, TaskScreen)
            await pilot.press("escape")
            assert timeline.has_focus
        await pilot.press("i")
        assert isinstance(app.screen, FindingScreen)
        await pilot.press("escape")
        await pilot.press("t")
        assert screen.sorts["summary"] == ("row", False)
        await pilot.press("t")
        assert screen.sorts["summary"] == ("row", True)
        starts = table.frame["start_us"].to_list()
        assert starts == sorted(starts, reverse=True)  # `t` again: latest first


async def test_80x24(tmp_path):
    await check_size((80, 24), tmp_path, beside=False)


async def test_100x30(tmp_path):
    await check_size((100, 30), tmp_path, beside=False)


@pytest.mark.parametrize("size", [(160, 50)])
async def test_160x50(tmp_path, size):
    await check_size(size, tmp_path, beside=True)


async def test_detail_panel_shows_the_wait_evidence(tmp_path):
    app = NpuscopeApp(ensure_demo(), cache=False, export_dir=tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await wait_loaded(pilot)
        table = screen.query_one("#summary-table", FrameTable)
        table.focus()
        await pilot.press("w", "enter")
        detail = app.screen
        assert isinstance(detail, TaskScreen)
        assert detail.row_task["wait_cause"] == "recompilation"
        names = [e["name"] for e in detail.evidence]
        assert names and names[0].endswith("aclopCompileAndExecute")
        assert detail.evidence[0]["overlap_us"] <= detail.row_task["wait_us"] + 1e-6
        assert [f.rule for f in detail.findings][:1] == ["recompilation"]
        await pilot.press("y")
        assert any(p.name.startswith("op-report-ReduceSum") for p in tmp_path.iterdir())
