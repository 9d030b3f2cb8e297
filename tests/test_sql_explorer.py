"""The explorer's query prompt (`:`): a SQL query over the open profile, at 80x24.

Truth: the diagnosis' tasks the main screen shows, counted with polars; the CLI's result
of the same query. The snapshot is the prompt after a query at 80x24.
"""

from __future__ import annotations

import threading

import polars as pl
from pilot_helpers import wait_loaded
from textual.widgets import Input

from npuscope.fixtures.demo_profile import ensure_demo
from npuscope.tui.app import NpuscopeApp
from npuscope.tui.screens import sql_screen
from npuscope.tui.screens.help_screen import all_keys
from npuscope.tui.screens.main_screen import MainScreen
from npuscope.tui.screens.sql_screen import SqlScreen
from npuscope.tui.widgets.frame_table import FrameTable

QUERY = "SELECT op_type, count(*) AS n, sum(duration_us) AS total_us FROM tasks WHERE card = '0' GROUP BY ALL ORDER BY 3 DESC"


def _app(tmp_path) -> NpuscopeApp:
    return NpuscopeApp(ensure_demo(), cache=False, export_dir=tmp_path / "exports")


async def _ask(pilot, query: str) -> SqlScreen:
    screen = pilot.app.screen
    assert isinstance(screen, SqlScreen)
    field = screen.query_one("#sql-query", Input)
    field.focus()
    field.value = query
    await pilot.press("enter")
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    return screen


def _status(screen: SqlScreen) -> str:
    return str(screen.query_one("#sql-status").render())


async def test_query_prompt_runs_sorts_filters_copies_and_exports(tmp_path):
    app = _app(tmp_path)
    copied: list[str] = []
    app.copy_to_clipboard = copied.append  # type: ignore[method-assign]
    async with app.run_test(size=(80, 24)) as pilot:
        main = await wait_loaded(pilot)
        assert (("main", ":", "SQL query over the profile's tables")) in all_keys(app.BINDINGS, main.BINDINGS)
        await pilot.press(":")
        screen = await _ask(pilot, QUERY)
        truth = (
            main.diagnosis.tasks.filter(pl.col("card") == "0")
            .group_by("op_type")
            .agg(pl.len().alias("n"), pl.col("duration_us").sum().alias("total_us"))
            .sort("total_us", descending=True)
        )
        table = screen.query_one("#sql-table", FrameTable)
        assert table.has_focus and table.row_count == truth.height
        assert table.frame["op_type"].to_list() == truth["op_type"].to_list()
        assert table.frame["n"].to_list() == truth["n"].to_list()
        assert f"{truth.height} of {truth.height} rows" in _status(screen)
        await pilot.press("s")  # sort by the first column, largest first
        assert screen.sort == ("op_type", True)
        assert table.frame["op_type"].to_list() == sorted(truth["op_type"].to_list(), reverse=True)
        await pilot.press("r")
        assert table.frame["op_type"].to_list() == sorted(truth["op_type"].to_list())
        await pilot.press("slash")
        bar = screen.query_one("#sql-filter", Input)
        assert bar.has_focus
        bar.value = "Trans"
        await pilot.press("enter")
        assert table.frame["op_type"].to_list() == [t for t in sorted(truth["op_type"].to_list()) if "Trans" in t]
        assert "filter: Trans" in _status(screen)
        await pilot.press("y")
        assert copied and copied[-1].splitlines()[0] == "op_type,n,total_us"
        assert len(copied[-1].splitlines()) == table.row_count + 1
        await pilot.press("e")
        await pilot.pause()
        exported = sorted(p.name for p in (tmp_path / "exports").iterdir())
        assert [p.rsplit(".", 1)[1] for p in exported] == ["csv", "md"]
        text = (tmp_path / "exports" / exported[0]).read_text()
        assert text.splitlines()[0] == "op_type,n,total_us" and len(text.splitlines()) == table.row_count + 1
        await pilot.press(":")  # back to the query, another one replaces the result
        assert screen.query_one("#sql-query", Input).has_focus
        await _ask(pilot, "SELECT count(*) AS n FROM findings")
        assert table.frame["n"].to_list() == [len(main.diagnosis.findings)]
        # A refused or mistyped query is said on the status line; the screen and its result stay.
        status = screen.query_one("#sql-status")
        await _ask(pilot, "COPY tasks TO '/tmp/npuscope-sql-explorer.csv'")
        assert status.has_class("error") and "Permission Error" in _status(screen)
        await _ask(pilot, "SELEC 1")
        assert "syntax error" in _status(screen) and isinstance(app.screen, SqlScreen)
        assert table.frame["n"].to_list() == [len(main.diagnosis.findings)]
        await _ask(pilot, "SELECT 1 AS x")
        assert not status.has_class("error") and table.frame["x"].to_list() == [1]
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)


async def test_a_late_result_of_an_older_query_is_dropped(tmp_path, monkeypatch):
    """The first query is held in its worker until the second one's result is shown."""
    release = threading.Event()
    real = sql_screen.run_sql

    def held(tables, query, **kwargs):
        if "slow" in query:
            release.wait(10)
        return real(tables, query, **kwargs)

    monkeypatch.setattr(sql_screen, "run_sql", held)
    app = _app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_loaded(pilot)
        await pilot.press(":")
        screen = app.screen
        assert isinstance(screen, SqlScreen)
        screen.run_query("SELECT 'slow' AS which")
        await pilot.pause()
        assert "running" in _status(screen)
        screen.run_query("SELECT 'fast' AS which")
        for _ in range(500):
            if screen.result is not None:
                break
            await pilot.pause(0.01)
        assert screen.result is not None and screen.result["which"].to_list() == ["fast"]
        release.set()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert screen.result["which"].to_list() == ["fast"]  # the older one came later: dropped


async def _after_query(pilot) -> None:
    await wait_loaded(pilot)
    await pilot.press(":")
    screen = await _ask(pilot, QUERY)
    for field in screen.query(Input):  # a blinking cursor would differ between runs
        field.cursor_blink = False
    screen.seconds = 0.0  # and so would the query's time
    screen.refresh_table()
    await pilot.pause()


def test_query_prompt_80x24(snap_compare, tmp_path):
    assert snap_compare(_app(tmp_path), terminal_size=(80, 24), run_before=_after_query)
