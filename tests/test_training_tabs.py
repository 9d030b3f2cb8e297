"""The explorer's training-level tabs (Steps, Communication, Host API, Memory) driven by Pilot.

Real samples (the GPT-3 two-rank torch_npu capture, the 2024 CNN capture) and one generated
profile; what a tab shows is checked against the views' frames cut to the card by hand (and,
for the steps, against step_trace_time.csv read with the csv module).
"""

from __future__ import annotations

import csv
import shutil
import threading

import pytest
from pilot_helpers import wait_loaded

from npuscope.analysis.drilldown import drill_down
from npuscope.analysis.query import parse_query
from npuscope.analysis.timeline_view import step_row
from npuscope.analysis.training_tables import StepBar, TableFields, bar_cells, view_positions
from npuscope.fixtures.generate import generate
from npuscope.parsers import ReadOptions
from npuscope.tui.app import NpuscopeApp
from npuscope.tui.screens import main_screen
from npuscope.tui.screens.main_screen import MainScreen
from npuscope.tui.widgets.cards_pane import CardsPane, FindingCard
from npuscope.tui.widgets.frame_table import FrameTable
from npuscope.tui.widgets.mini_timeline import MiniTimeline
from npuscope.tui.widgets.step_bars import StepBars
from npuscope.tui.widgets.view_pane import READING

GPT3 = "torch_npu_2023_gpt3_2rank"
CNN = "torch_npu_2024_cnn"


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """Two cards, four steps each (named `gen`, so the capture's name is the same every run)."""
    root = tmp_path_factory.mktemp("training") / "gen"
    generate(root, layout="torch_npu", cards=2, steps=4)
    return root


async def wait_views(pilot) -> MainScreen:
    screen = await wait_loaded(pilot)
    for _ in range(3000):
        if screen.views is not None:
            break
        await pilot.pause(0.01)
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    assert screen.views is not None, "the training views were never read"
    return screen


def _app(path, tmp_path) -> NpuscopeApp:
    return NpuscopeApp(path, cache=False, export_dir=tmp_path / "exports")


def _rows(frame, card):
    """The view's rows of `card` (else the whole capture's `host` rows), as dicts."""
    rows = [r for r in frame.to_dicts() if r["card"] == card]
    return rows or [r for r in frame.to_dicts() if r["card"] == "host"]


def _table(screen, name) -> FrameTable:
    return screen.query_one(f"#{name}-table", FrameTable)


def _status(screen) -> str:
    return str(screen.query_one("#status").render())


def _note(screen, name) -> str:
    return str(screen.query_one(f"#{name}-note").render())


# --------------------------------------------------------------------------- Steps


async def test_steps_tab_bars_sort_filter_card_switch_and_timeline(generated, tmp_path):
    app = _app(generated, tmp_path)
    async with app.run_test(size=(80, 40)) as pilot:
        screen = await wait_views(pilot)
        await pilot.press("3")
        table = _table(screen, "steps")
        assert screen.query_one("#tabs").active == "steps" and table.has_focus
        truth = sorted(_rows(screen.views.steps, "0"), key=lambda r: r["step"])
        assert len(truth) == 4
        shown = table.frame.to_dicts()
        keys = ("step", "step_us", "compute_us", "comm_not_overlapped_us", "free_us")
        assert [tuple(r[k] for k in keys) for r in shown] == [tuple(r[k] for k in keys) for r in truth]
        assert shown[0]["free_pct"] == pytest.approx(truth[0]["free_us"] / truth[0]["step_us"] * 100)
        assert "4 of 4 steps" in _status(screen)

        bars = screen.query_one(StepBars)
        assert [b.label for b in bars.bars] == [str(r["step"]) for r in truth]
        longest = max(r["compute_us"] + r["comm_not_overlapped_us"] + r["free_us"] for r in truth)
        assert bars.longest_us == pytest.approx(longest)
        lines = [bars.render_line(y).text for y in range(5)]
        assert "compute" in lines[0] and "free" in lines[0]
        assert all(f"step {r['step']}" in line for r, line in zip(truth, lines[1:]))
        # The longest step's bar fills the bar width; the others are shorter.
        widths = [line.count("█") for line in lines[1:]]
        assert widths[[r["step_us"] for r in truth].index(max(r["step_us"] for r in truth))] == max(widths)

        await pilot.press("d")
        assert table.frame["step_us"].to_list() == sorted((r["step_us"] for r in truth), reverse=True)
        # The bars follow the table: the same steps in the same order, the first one marked
        # and drawn on the first bar line (in step order it could be scrolled out of view).
        assert [b.label for b in bars.bars] == [str(s) for s in table.frame["step"].to_list()]
        await pilot.pause()
        assert bars.marked == 0 and f"step {table.frame['step'][0]}" in bars.render_line(1).text
        await pilot.press("d")
        assert table.frame["step_us"].to_list() == sorted(r["step_us"] for r in truth)
        await pilot.press("w")
        assert table.frame["free_us"].to_list() == sorted((r["free_us"] for r in truth), reverse=True)
        await pilot.press("t")
        assert table.frame["step"].to_list() == [r["step"] for r in truth]
        await pilot.press("t")  # again: reversed
        assert table.frame["step"].to_list() == [r["step"] for r in reversed(truth)]
        assert "natural order, reversed" in _status(screen)
        await pilot.press("t")
        assert table.frame["step"].to_list() == [r["step"] for r in truth]

        # The filter of this tab only: dur compares the step time.
        cut = sorted(r["step_us"] for r in truth)[1]
        await pilot.press("slash", *f"dur>{cut}", "enter")
        assert sorted(table.frame["step"].to_list()) == sorted(r["step"] for r in truth if r["step_us"] > cut)
        assert [b.label for b in bars.bars] == [str(s) for s in table.frame["step"].to_list()]
        assert f"filter: dur>{cut}" in _status(screen)
        assert screen.filter_query.text == ""  # the op tabs keep theirs
        await pilot.press("1")
        assert _table(screen, "summary").row_count == screen.card_tasks().height
        await pilot.press("3")
        assert table.row_count == 2
        await pilot.press("escape")
        assert table.row_count == 4

        # The timeline marks the card's step boundaries (80 columns: the numbers fit).
        timeline = screen.query_one(MiniTimeline)
        assert [m[0] for m in timeline.steps] == [r["step"] for r in truth]
        drawn = timeline.render_line(len(timeline.model.lanes)).text
        assert drawn.startswith("steps") and len(drawn) == 80
        assert drawn.count("│") == 5 and all(f"│{r['step']}" in drawn for r in truth)
        # The step under the cursor is selected on the timeline.
        await pilot.press("down")
        mark = next(m for m in timeline.steps if m[0] == table.current_row["step"])
        assert timeline.selected == (mark[1], mark[2])

        await pilot.press("right_square_bracket")
        assert screen.card == "1"
        truth1 = sorted(_rows(screen.views.steps, "1"), key=lambda r: r["step"])
        assert table.frame["step_us"].to_list() == [r["step_us"] for r in truth1]
        assert [m[0] for m in timeline.steps] == [r["step"] for r in truth1]


# --------------------------------------------------------------------------- real capture: every tab


async def test_gpt3_tabs_against_the_files_and_views(samples, tmp_path):
    root = samples / "real" / GPT3
    app = _app(root, tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await wait_views(pilot)
        views = screen.views
        for card in ("0", "1"):
            if screen.card != card:
                await pilot.press("right_square_bracket")
            await pilot.press("3")
            with open(root / f"test_rank_{card}" / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv", newline="") as f:
                rows = list(csv.DictReader(f))
            shown = _table(screen, "steps").frame.to_dicts()
            assert [r["step"] for r in shown] == [int(r["Step"]) for r in rows]
            for got, want in zip(shown, rows):
                assert got["compute_us"] == pytest.approx(float(want["Computing"]))
                assert got["comm_not_overlapped_us"] == pytest.approx(float(want["Communication(Not Overlapped)"]))
                assert got["free_us"] == pytest.approx(float(want["Free"]))

        # Communication [4]: the collectives and the links of card 1.
        await pilot.press("4")
        comm = _table(screen, "comm")
        truth = _rows(views.communication, "1")
        assert comm.has_focus
        # Per op type first: the counts and times of each type summed.
        types = sorted({r["op_type"] for r in truth})
        assert sorted(comm.frame["op_type"].to_list()) == types
        for row in comm.frame.to_dicts():
            mine = [r for r in truth if r["op_type"] == row["op_type"]]
            assert row["count"] == sum(r["count"] for r in mine)
            assert row["total_us"] == pytest.approx(sum(r["total_us"] for r in mine))
        assert comm.frame["total_us"].to_list() == sorted(comm.frame["total_us"].to_list(), reverse=True)
        assert f"{len(types)} of {len(types)} op types" in _status(screen)
        await pilot.press("o")  # per op: the view's rows
        assert comm.row_count == len(truth) > len(types)
        assert sorted(comm.frame["op_name"].to_list()) == sorted(r["op_name"] for r in truth)
        assert f"{len(truth)} of {len(truth)} collectives" in _status(screen)
        assert comm.frame["total_us"].sum() == pytest.approx(sum(r["total_us"] for r in truth))
        await pilot.press("d")
        assert comm.frame["total_us"].to_list() == sorted((r["total_us"] for r in truth), reverse=True)
        await pilot.press("slash", *"allreduce", "enter")
        want = [r for r in truth if "allreduce" in (r["op_name"] + r["op_type"]).lower()]
        assert 0 < comm.row_count == len(want) < len(truth)
        await pilot.press("escape")
        assert comm.row_count == len(truth)
        links = _table(screen, "links")
        link_truth = _rows(views.links, "1")
        keys = ("src", "dst", "transport", "size_mb", "bandwidth_gbps")
        assert sorted(tuple(r[k] for k in keys) for r in links.frame.to_dicts()) == sorted(
            tuple(r[k] for k in keys) for r in link_truth
        )
        links.focus()
        await pilot.pause()  # the focus message reaches the pane before the key
        await pilot.press("d")
        assert links.frame["size_mb"].to_list() == sorted((r["size_mb"] for r in link_truth), reverse=True)
        for _ in range(500):  # the status line follows the focused table on a later refresh
            if f"{len(link_truth)} of {len(link_truth)} links" in _status(screen):
                break
            await pilot.pause(0.01)
        assert f"{len(link_truth)} of {len(link_truth)} links" in _status(screen)
        await pilot.press("e")  # export the table under focus
        exported = sorted((tmp_path / "exports").glob("*-links.csv"))
        with open(exported[0], newline="") as f:
            assert len(list(csv.DictReader(f))) == len(link_truth)

        # Host API [5]: no source in this capture, and inspect's words for what there is.
        await pilot.press("5")
        note = _note(screen, "host_api")
        assert "not in this capture" in note and "api_statistic.csv" in note
        assert "steps: step_trace_time.csv" in note
        assert not _table(screen, "host_api").display

        # Memory [6]: the peaks and the operators by their largest allocation.
        await pilot.press("6")
        peak = _rows(views.memory, "1")[0]
        peaks = str(screen.query_one("#memory-peaks").render())
        assert f"{peak['peak_reserved_mb']:,.1f} MB" in peaks and f"{peak['peak_allocated_mb']:,.1f} MB" in peaks
        ops = _table(screen, "memory")
        op_truth = _rows(views.memory_top_ops, "1")
        assert ops.frame["size_mb"].to_list() == sorted((r["size_mb"] for r in op_truth), reverse=True)
        assert sorted(ops.frame["op_name"].to_list()) == sorted(r["op_name"] for r in op_truth)
        await pilot.press("d", "d")  # by size, largest first; again: smallest first
        assert ops.frame["size_mb"].to_list() == sorted(r["size_mb"] for r in op_truth)
        await pilot.press("w")
        assert ops.frame["total_mb"].to_list() == sorted((r["total_mb"] for r in op_truth), reverse=True)
        await pilot.press("slash", *"norm", "enter")
        assert ops.row_count == sum("norm" in r["op_name"].lower() for r in op_truth) > 0
        await pilot.press("escape")
        # Card 1's memory_record.csv lost its timestamps' digits: peaks, no curve; card 0 has one.
        assert not screen.query_one("#memory-curve").display
        await pilot.press("left_square_bracket")
        curve = screen.query_one("#memory-curve")
        allocated = [r["allocated_mb"] for r in _rows(views.memory_curve, "0")]
        assert curve.display and allocated
        assert f"{min(allocated):,.0f}–{max(allocated):,.0f} of" in str(curve.render())


async def test_host_api_tab_and_a_card_without_rows(samples, tmp_path):
    app = _app(samples / "real" / CNN, tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await wait_views(pilot)
        views = screen.views
        await pilot.press("5")
        assert screen.card == "0" and not _rows(views.host_api, "0")
        assert "card 0 has no host api rows" in _note(screen, "host_api")
        await pilot.press("right_square_bracket", "right_square_bracket")
        assert screen.card == "2"
        table = _table(screen, "host_api")
        truth = _rows(views.host_api, "2")
        span = sum(r["step_us"] for r in _rows(views.steps, "2"))
        assert table.display and table.row_count == len(truth) > 0
        by_api = {(r["api"], r["level"]): r for r in table.frame.to_dicts()}
        for r in truth:
            got = by_api[(r["api"], r["level"])]
            assert (got["count"], got["total_us"], got["max_us"]) == (r["count"], r["total_us"], r["max_us"])
            assert got["share_pct"] == pytest.approx(r["total_us"] / span * 100)
        table.focus()
        await pilot.press("d")
        assert table.frame["total_us"].to_list() == sorted((r["total_us"] for r in truth), reverse=True)
        await pilot.press("s")  # the next column after Total: Span(%)
        assert screen.state.sort_of("host_api") == ("share_pct", True)
        await pilot.press("slash", *"synchronize", "enter")
        assert table.row_count == sum("synchronize" in r["api"].lower() for r in truth) > 0


# --------------------------------------------------------------------------- findings


async def test_training_finding_drills_down_to_its_tab(samples, tmp_path):
    app = _app(samples / "real" / GPT3, tmp_path)
    async with app.run_test(size=(140, 40)) as pilot:
        screen = await wait_views(pilot)
        cards = screen.query_one(CardsPane)
        items = list(cards.query(FindingCard))
        rules = [item.finding.rule for item in items]
        assert "comm_not_overlapped" in rules
        chosen = items[rules.index("comm_not_overlapped")].finding
        assert chosen.view == "steps" and chosen.card == "0"
        cards.focus()
        cards.index = rules.index("comm_not_overlapped")
        await pilot.press("enter")
        assert screen.query_one("#tabs").active == "steps"
        assert screen.state.sort_of("steps") == ("comm_not_overlapped_us", True) and _table(screen, "steps").has_focus
        assert _table(screen, "steps").current_row["step"] == chosen.evidence[0]["step"]
        # An op-level finding, chosen from the Steps tab, filters the op summary (not the steps).
        ops = [i for i, item in enumerate(items) if not item.finding.view]
        assert ops
        cards.focus()
        cards.index = ops[0]
        await pilot.press("enter")
        text, _ = drill_down(items[ops[0]].finding, app.thresholds)
        assert screen.query_one("#tabs").active == "summary" and screen.filter_query.text == text
        assert screen.state.filter_of("steps") == ""


# --------------------------------------------------------------------------- loading


async def test_the_op_tabs_are_usable_while_the_views_are_read(generated, tmp_path, monkeypatch):
    gate = threading.Event()
    real = main_screen.read_views

    def held(profile, options):
        gate.wait(60)  # released by the test below; never hangs the suite
        return real(profile, options)

    monkeypatch.setattr(main_screen, "read_views", held)
    app = _app(generated, tmp_path)
    async with app.run_test(size=(100, 40)) as pilot:
        screen = app.main
        for _ in range(3000):
            if screen.profile is not None:
                break
            await pilot.pause(0.01)
        await pilot.pause()
        assert screen.views is None
        await pilot.press("d")
        summary = _table(screen, "summary")
        assert summary.frame["duration_us"][0] == summary.frame["duration_us"].max()
        await pilot.press("3")
        assert _note(screen, "steps") == READING and _status(screen) == READING
        await pilot.press("5")
        assert _note(screen, "host_api") == READING
        gate.set()
        for _ in range(3000):
            if screen.views is not None:
                break
            await pilot.pause(0.01)
        await pilot.pause()
        assert _table(screen, "host_api").row_count == len(_rows(screen.views.host_api, "0")) > 0
        assert "of" in _status(screen) and "APIs" in _status(screen)


async def test_a_damaged_view_file_under_strict_is_said_on_the_tabs(generated, tmp_path):
    root = tmp_path / "gen"
    shutil.copytree(generated, root)
    out = sorted(root.glob("*/ASCEND_PROFILER_OUTPUT"))[0]
    (out / "step_trace_time.csv").write_text(
        "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble\n1,abc,1,1,1,1,1,0\n"
    )
    app = NpuscopeApp(root, cache=False, read=ReadOptions(strict=True))
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await wait_loaded(pilot)
        await pilot.press("3")
        note = _note(screen, "steps")
        assert note.startswith("could not be read:") and "step_trace_time.csv" in note and "'abc'" in note
        assert _note(screen, "memory").startswith("could not be read:")
        assert screen.views is None and app.is_running
        await pilot.press("1", "d")  # the op tabs stay usable
        summary = _table(screen, "summary")
        assert summary.row_count == screen.card_tasks().height
        assert summary.frame["duration_us"][0] == summary.frame["duration_us"].max()


# --------------------------------------------------------------------------- the analysis behind


def test_bar_cells_end_where_their_running_sums_do():
    bar = StepBar("1", 50.0, 25.0, 25.0)
    assert bar_cells(bar, 100.0, 40) == (20, 10, 10)
    assert bar_cells(bar, 200.0, 40) == (10, 5, 5)
    thirds = StepBar("2", 1.0, 1.0, 1.0)
    assert sum(bar_cells(thirds, 3.0, 10)) == 10  # rounding never adds a cell
    assert bar_cells(bar, 0.0, 40) == (0, 0, 0)


def test_step_row_marks_each_start_and_the_last_end():
    marks = ((1, 0, 100), (2, 100, 200), (None, 200, 300))
    row = step_row(marks, 0, 300, 30)
    assert len(row) == 30
    assert row.startswith("│1") and row[10:12] == "│2" and row[20] == "│" and row[29] == "│"
    assert step_row(marks, 0, 300, 3) == "│││"  # no room for the numbers
    assert step_row(marks, 1000, 2000, 10) == " " * 10  # none in the window


def test_view_positions_filter_and_sort():
    import polars as pl

    frame = pl.DataFrame(
        {"op_name": ["hcom_allReduce_1", "hcom_broadcast_2", "hcom_allReduce_3"], "total_us": [5.0, 9.0, 7.0]}
    )
    fields = TableFields(("op_name",), duration="total_us")
    assert view_positions(frame, parse_query("allreduce"), fields, "total_us", True).to_list() == [2, 0]
    assert view_positions(frame, parse_query("-allreduce"), fields, "row", False).to_list() == [1]
    assert view_positions(frame, parse_query("dur>6"), fields, "total_us", False).to_list() == [2, 1]
    assert view_positions(frame, parse_query("cause:host"), fields, "total_us", True).to_list() == [1, 2, 0]
    # A lone | separates alternatives, as on the op tables: either side keeps its rows.
    assert view_positions(frame, parse_query("broadcast | dur>6"), fields, "total_us", True).to_list() == [1, 2]
    assert view_positions(frame, parse_query("allreduce dur>6 | broadcast"), fields, "row", False).to_list() == [1, 2]
    assert view_positions(frame, parse_query("cause:host | nothing"), fields, "row", False).to_list() == [0, 1, 2]


# --------------------------------------------------------------------------- snapshot


def test_steps_tab_snapshot_80x24(snap_compare, generated):
    async def steps(pilot) -> None:
        await wait_views(pilot)
        await pilot.press("3")
        await pilot.pause()

    assert snap_compare(NpuscopeApp(generated, cache=False), terminal_size=(80, 24), run_before=steps)


async def test_a_missing_table_of_a_two_table_tab_names_which(tmp_path):
    # The demo (an msprof text export) has collectives (from its tasks) but no link data: the
    # Communication tab's note under its populated table says it is the links that are missing.
    from npuscope.fixtures.demo_profile import ensure_demo

    app = _app(ensure_demo(), tmp_path)
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await wait_views(pilot)
        await pilot.press("4")
        assert _table(screen, "comm").row_count > 0 and _note(screen, "comm") == ""
        assert _note(screen, "links").startswith("links: not in this capture")
