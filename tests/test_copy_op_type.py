"""`y` on the Op statistics tab reports on the highlighted op type, not the op summary's row."""

from __future__ import annotations

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
