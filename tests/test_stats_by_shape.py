"""`g` on Op statistics: one row per op type and input shapes, figures equal the card's tasks."""

from __future__ import annotations

import csv
from collections import defaultdict

import pytest
from pilot_helpers import wait_loaded

from npuscope.analysis.shape_stats import statistic_by_shape
from npuscope.fixtures.demo_profile import ensure_demo
from npuscope.tui.app import NpuscopeApp
from npuscope.tui.widgets.frame_table import FrameTable


def _truth(card: str) -> dict[tuple[str, str, str], list[float]]:
    """(op type, task type, input shapes) -> durations of card's operator tasks, from the CSV."""
    (path,) = ensure_demo().rglob("op_summary_*.csv")
    out: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            if row["Device_id"] != card or row["Task Type"] in ("COMMUNICATION", "HCCL"):
                continue
            shapes = row["Input Shapes"].strip('"\t ')
            out[(row["OP Type"], row["Task Type"], shapes)].append(float(row["Task Duration(us)"]))
    return out


def test_statistic_by_shape_equals_the_csv():
    from npuscope.parsers import open_profile

    tasks = open_profile(ensure_demo()).tasks
    stat = statistic_by_shape(tasks.filter(tasks["card"] == "0"))
    truth = _truth("0")
    got = {(r["op_type"], r["core_type"], r["input_shapes"] or ""): r for r in stat.iter_rows(named=True)}
    assert set(got) == set(truth)
    total = sum(sum(v) for v in truth.values())
    for key, durations in truth.items():
        row = got[key]
        assert row["count"] == len(durations)
        assert row["total_us"] == pytest.approx(sum(durations))
        assert row["max_us"] == pytest.approx(max(durations))
        assert row["ratio_pct"] == pytest.approx(100 * sum(durations) / total)
    assert stat["total_us"].to_list() == sorted(stat["total_us"].to_list(), reverse=True)


async def test_g_groups_op_statistics_by_shape_and_enter_filters_to_them(tmp_path):
    app = NpuscopeApp(ensure_demo(), cache=False, export_dir=tmp_path / "exports")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await wait_loaded(pilot)
        await pilot.press("2")
        stats = screen.query_one("#stats-table", FrameTable)
        by_type = stats.row_count
        await pilot.press("g")
        assert screen.state.stats_by_shape and "input_shapes" in stats.frame.columns
        assert stats.row_count == len(_truth("0")) > by_type
        row = stats.current_row
        await pilot.press("enter")
        summary = screen.query_one("#summary-table", FrameTable)
        shown = summary.frame
        await pilot.press("down", "g")  # in the op summary `g` is still its first row
        assert summary.cursor == 0 and screen.state.stats_by_shape
        assert set(shown["op_type"].to_list()) == {row["op_type"]}
        assert shown.height == row["count"]
        # The op tabs share the filter: Op statistics shows that type's shapes, then (Esc) all.
        await pilot.press("2")
        assert set(stats.frame["op_type"].to_list()) == {row["op_type"]}
        await pilot.press("escape", "g")
        assert not screen.state.stats_by_shape and stats.row_count == by_type
