"""One UI state: the main screen's tab, the training tabs' sorts, filters, focused table and
grouping live in its `ViewState`, the panes draw from it, and a worker's result for a profile
no longer shown is dropped by its generation."""

from __future__ import annotations

import polars as pl
import pytest
from pilot_helpers import wait_loaded

from npuscope.fixtures.generate import generate
from npuscope.tui.app import NpuscopeApp
from npuscope.tui.messages import TimelineBuilt, ViewsFailed
from npuscope.tui.view_state import ViewState, focus_table, set_comm_by_type, set_tab, sort_by
from npuscope.tui.widgets.frame_table import FrameTable
from npuscope.tui.widgets.view_pane import ViewPane


def test_the_table_a_tab_acts_on():
    s = ViewState()
    assert s.table_of("communication", "comm") == "comm"  # until another is focused: the first
    t = focus_table(s, "communication", "links")
    assert t.table_of("communication", "comm") == "links" and s.table_of("communication", "comm") == "comm"
    assert focus_table(t, "communication", "links") is t
    with pytest.raises(TypeError):
        t.tables["steps"] = "steps"  # type: ignore[index]


def test_the_communication_grouping():
    s = ViewState()
    assert s.comm_by_type
    t = set_comm_by_type(s, False)
    assert not t.comm_by_type and set_comm_by_type(t, False) is t and set_comm_by_type(t, True).comm_by_type


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = tmp_path_factory.mktemp("ui-state") / "gen"
    generate(root, layout="torch_npu", cards=2, steps=4, training=True)  # with links
    return root


async def _views(pilot):
    screen = await wait_loaded(pilot)
    for _ in range(3000):
        if screen.views is not None:
            break
        await pilot.pause(0.01)
    await pilot.pause()
    assert screen.views is not None
    return screen


async def test_keys_change_the_state_and_the_panes_draw_it(generated, tmp_path):
    app = NpuscopeApp(generated, cache=False, export_dir=tmp_path / "exports")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _views(pilot)
        for pane in screen.panes():  # no view state of their own
            assert not {"sorts", "filter_query", "current", "per_type"} & set(vars(pane))
        await pilot.press("4")
        assert screen.state.tab == "communication" and screen.query_one("#tabs").active == "communication"
        await pilot.press("d")
        assert screen.state.sort_of("comm") == sort_by(ViewState(), "comm", "total_us").sort_of("comm")
        await pilot.press("o")
        assert not screen.state.comm_by_type and "collectives (o: per op type)" in str(
            screen.query_one("#status").render()
        )
        links = screen.query_one("#links-table", FrameTable)
        links.focus()
        await pilot.pause()
        assert screen.state.table_of("communication", "comm") == "links"
        await pilot.press("w")  # on the links: by bandwidth
        assert screen.state.sort_of("links") == ("bandwidth_gbps", True)
        assert links.frame["bandwidth_gbps"].to_list() == sorted(links.frame["bandwidth_gbps"].to_list(), reverse=True)
        await pilot.press("slash", *"hccs", "enter")
        assert screen.state.filter_of("communication") == "hccs" and screen.state.filter_of("summary") == ""

        # A new state set from outside draws the same way: the panes read nothing else.
        screen.state = set_tab(set_comm_by_type(screen.state, True), "communication")
        pane = screen.query_one("#communication-pane", ViewPane)
        pane.render_tables(screen.state)
        comm = screen.query_one("#comm-table", FrameTable)
        assert comm.frame["op_type"].n_unique() == comm.row_count  # per op type again

        await pilot.press("1")
        assert screen.state.tab == "summary" and screen.current_table().id == "summary-table"


async def test_a_result_for_a_profile_no_longer_shown_is_dropped(generated, tmp_path):
    app = NpuscopeApp(generated, cache=False, export_dir=tmp_path / "exports")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _views(pilot)
        old = screen.generation - 1
        screen._views_failed(ViewsFailed(old, RuntimeError("late")))  # as its worker hands it over
        model = screen.query_one("#timeline").model
        screen._model_ready(TimelineBuilt(old, screen.card, model))
        await pilot.pause()
        assert ("ViewsFailed", old) in screen.dropped and ("TimelineBuilt", old) in screen.dropped
        assert screen.views is not None
        assert not any("late" in n.message for n in app._notifications)


async def test_reopening_gives_the_shown_profile_a_new_generation(generated, tmp_path):
    app = NpuscopeApp(generated, cache=False, export_dir=tmp_path / "exports")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _views(pilot)
        first = screen.generation
        app.open_path(generated)
        for _ in range(3000):
            if screen.generation > first and screen.views is not None:
                break
            await pilot.pause(0.01)
        assert screen.generation == first + 1 and screen.views is not None
        assert isinstance(screen.step_windows, pl.DataFrame)
