"""`y` on the Op statistics tab reports on the highlighted op type, not the op summary's row."""

from __future__ import annotations

import pytest
from pilot_helpers import wait_loaded

from npuscope.fixtures.demo_profile import ensure_demo
from npuscope.tui.app import NpuscopeApp
from npuscope.tui.widgets.frame_table import FrameTable


async def test_y_on_op_statistics_reports_the_highlighted_type(tmp_path):
    app = NpuscopeApp(ensure_demo(), cache=False, export_dir=tmp_path / "exports")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await wait_loaded(pilot)
        await pilot.press("2")
        stats = screen.query_one("#stats-table", FrameTable)
        assert stats.has_focus
        await pilot.press("down", "down")
        row = stats.current_row
        assert row is not None and row["op_type"] != stats.frame["op_type"][0]
        await pilot.press("y")
        await pilot.pause()
        tasks = screen.card_tasks()
        of_type = tasks.filter((tasks["op_type"] == row["op_type"]) & (tasks["task_type"] == row["core_type"]))
        longest = of_type.sort("duration_us", descending=True).row(0, named=True)
        assert app.clipboard.startswith(f"## Op report: `{longest['op_name']}` ({row['op_type']})"), app.clipboard[:120]
        # On the op summary, `y` still reports the highlighted task.
        await pilot.press("1")
        summary = screen.query_one("#summary-table", FrameTable)
        task = summary.current_row
        await pilot.press("y")
        await pilot.pause()
        assert app.clipboard.startswith(f"## Op report: `{task['op_name']}` ({task['op_type']})")


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 50), (200, 50)])
async def test_the_header_shows_whole_parts_only(tmp_path, size):
    """At any width the header leaves out whole parts (era, capture, communication), never cuts one."""
    from npuscope.tui.widgets.header_bar import HeaderBar

    app = NpuscopeApp(ensure_demo(), cache=False, export_dir=tmp_path / "exports")
    async with app.run_test(size=size) as pilot:
        screen = await wait_loaded(pilot)
        header = screen.query_one(HeaderBar)
        text = str(header.render())
        assert len(text) <= header.content_size.width, text
        assert text.startswith("card  0  1/2  1,120 tasks · compute 221.2 ms")
        assert text.endswith(("ms", "ABCDEFGHIJKLMNOP", "(merged export)")), text
        if size[0] >= 200:
            assert text.endswith("CANN 7.0+ (merged export)")


async def test_a_long_status_line_wraps_instead_of_being_cut(tmp_path):
    app = NpuscopeApp(ensure_demo(), cache=False, export_dir=tmp_path / "exports")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await wait_loaded(pilot)
        await pilot.press("w", "slash", *"cause:recompilation type:ReduceSum", "enter")
        await pilot.pause()
        status = screen.query_one("#status")
        text = str(status.render())
        assert "sorted by wait_us" in text and "filter: cause:recompilation type:ReduceSum" in text
        assert len(text) > status.content_size.width  # it would not fit one line
        assert status.size.height == 2  # so it takes two, whole


async def test_help_rows_wrap_at_80_columns(tmp_path):
    from npuscope.tui.screens.help_screen import HelpScreen

    app = NpuscopeApp(ensure_demo(), cache=False, export_dir=tmp_path / "exports")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_loaded(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        keys = app.screen.query_one("#help-keys")
        lines = str(keys.render()).splitlines()
        assert max(len(line) for line in lines) <= keys.content_size.width, max(lines, key=len)
        joined = " ".join(" ".join(line.split()) for line in lines)
        assert "Filter the tables to the finding, jump to its worst task" in joined


@pytest.mark.parametrize("size", [(80, 24), (160, 50)])
async def test_the_evidence_of_a_finding_keeps_its_names_readable(tmp_path, size):
    from rich.console import Console

    from npuscope.tui.screens.finding_screen import FindingScreen

    app = NpuscopeApp(ensure_demo(), cache=False, export_dir=tmp_path / "exports")
    async with app.run_test(size=size) as pilot:
        await wait_loaded(pilot)
        await pilot.press("i")  # the worst finding: recompilation before ReduceSum
        await pilot.pause()
        assert isinstance(app.screen, FindingScreen)
        evidence = app.screen.query_one("#finding-evidence")
        console = Console(width=evidence.content_size.width, record=True, file=open("/dev/null", "w"))
        console.print(evidence.content)  # the Rich table the panel draws
        text = console.export_text()
        assert "ReduceSum" in text and "Reduc…" not in text and "7,948.919" in text
        assert ("Input Shapes" in text) == (size[0] >= 110)
