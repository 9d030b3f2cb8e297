"""The explorer driven by Pilot on the bundled demo profile: every key path."""

from __future__ import annotations

import csv

from pilot_helpers import wait_loaded
from textual import events

from npuscope.fixtures.demo_profile import ensure_demo
from npuscope.tui.app import NpuscopeApp
from npuscope.tui.screens.finding_screen import FindingScreen
from npuscope.tui.screens.help_screen import HelpScreen, all_keys
from npuscope.tui.screens.main_screen import MainScreen
from npuscope.tui.widgets.cards_pane import CardsPane, FindingCard
from npuscope.tui.widgets.frame_table import FrameTable
from npuscope.tui.widgets.mini_timeline import MiniTimeline


async def _loaded(pilot) -> MainScreen:
    return await wait_loaded(pilot)


def _app(tmp_path, **kw) -> NpuscopeApp:
    return NpuscopeApp(ensure_demo(), cache=False, export_dir=tmp_path / "exports", **kw)


def _summary(screen) -> FrameTable:
    return screen.query_one("#summary-table", FrameTable)


async def test_first_screen_shows_header_cards_and_tasks(tmp_path):
    app = _app(tmp_path)
    async with app.run_test(size=(140, 44)) as pilot:
        screen = await _loaded(pilot)
        header = str(screen.query_one("#header").render())
        assert "PROF_000001_20240605100000123" in header and "card" in header and "1,120 tasks" in header
        cards = screen.query_one(CardsPane)
        findings = [c.finding for c in cards.query(FindingCard)]
        assert findings[0].rule == "recompilation" and findings[0].card == "0"
        assert [f.time_us for f in findings] == sorted((f.time_us for f in findings), reverse=True)
        table = _summary(screen)
        assert table.row_count == 1120
        starts = table.frame["start_us"].to_list()
        assert starts == sorted(starts)  # chronological by default
        assert "1,120 of 1,120 tasks" in str(screen.query_one("#status").render())


async def test_sort_keys_and_the_palette_offers_every_main_screen_action(tmp_path):
    app = _app(tmp_path)
    async with app.run_test(size=(140, 44)) as pilot:
        screen = await _loaded(pilot)
        table = _summary(screen)
        table.focus()
        await pilot.press("d")
        dur = table.frame["duration_us"]
        assert dur[0] == dur.max() and screen.sorts["summary"] == ("duration_us", True)
        await pilot.press("w")
        wait = table.frame["wait_us"]
        assert wait[0] == wait.max()
        await pilot.press("w")
        assert table.frame["wait_us"][0] == wait.min()  # again: ascending
        await pilot.press("t")
        assert table.frame["row"].to_list() == sorted(table.frame["row"].to_list())
        # The palette offers every main-screen action, and runs it as its key does.
        titles = {c.title for c in app.get_system_commands(screen)}
        for binding in MainScreen.BINDINGS:
            if binding.action != "escape":
                assert binding.description in titles, binding.description
        keys = {c.title: c.help for c in app.get_system_commands(screen)}
        # Keys named as people write them, not Textual's key names.
        assert keys["Prev card"] == "key: [" and keys["Next card"] == "key: ]" and keys["Filter"] == "key: /"
        assert not any("square_bracket" in h or "slash" in h for h in keys.values())
        command = next(c for c in app.get_system_commands(screen) if c.title == "Sort wait")
        await command.callback()
        await pilot.pause()
        assert screen.sorts["summary"] == ("wait_us", True)


async def test_filter_terms_and_escape(tmp_path):
    app = _app(tmp_path)
    async with app.run_test(size=(140, 44)) as pilot:
        screen = await _loaded(pilot)
        _summary(screen).focus()
        await pilot.press("slash")
        # Pasted (typed key by key, its 35 Pilot presses take ~5 s); the bad term below is typed.
        app.post_message(events.Paste("type:ReduceSum cause:recompilation"))
        await pilot.pause()
        assert screen.query_one("#filter").value == "type:ReduceSum cause:recompilation"
        await pilot.press("enter")
        table = _summary(screen)
        assert table.row_count == 28
        assert set(table.frame["wait_cause"]) == {"recompilation"}
        status = str(screen.query_one("#status").render())
        assert "28 of 1,120 tasks" in status and "filter: type:ReduceSum cause:recompilation" in status
        await pilot.press("escape")
        assert _summary(screen).row_count == 1120
        # A bad term keeps the previous view and says why.
        await pilot.press("slash")
        await pilot.press(*"dur>abc", "enter")
        assert _summary(screen).row_count == 1120
        assert any("dur>abc" in str(n.message) for n in app._notifications)


async def test_card_drill_down_and_detail(tmp_path):
    app = _app(tmp_path)
    async with app.run_test(size=(140, 44)) as pilot:
        screen = await _loaded(pilot)
        cards = screen.query_one(CardsPane)
        cards.focus()
        cards.index = 0
        await pilot.press("enter")
        finding = cards.query(FindingCard).first().finding
        table = _summary(screen)
        assert screen.filter_query.text == "type:ReduceSum cause:recompilation"
        assert table.current_row["row"] == finding.evidence[0]["row"]  # jumped to the worst task
        assert table.current_row["wait_us"] == table.frame["wait_us"].max()
        timeline = screen.query_one(MiniTimeline)
        start, end = timeline.window
        assert start <= table.current_row["start_ns"] <= end  # the selected task is in view
        cards.focus()
        await pilot.press("i")
        assert isinstance(app.screen, FindingScreen)
        assert app.screen.finding.rule == "recompilation"
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)


async def test_card_switching(tmp_path):
    app = _app(tmp_path)
    async with app.run_test(size=(140, 44)) as pilot:
        screen = await _loaded(pilot)
        _summary(screen).focus()
        await pilot.press("right_square_bracket")
        assert screen.card == "1"
        assert set(_summary(screen).frame["card"]) == {"1"}
        findings = [c.finding for c in screen.query_one(CardsPane).query(FindingCard)]
        assert {f.card for f in findings} == {"1"}
        assert any(f.rule == "host_op_wait" for f in findings)
        await pilot.press("left_square_bracket")
        assert screen.card == "0"


async def test_op_statistics_enter_filters_summary(tmp_path):
    app = _app(tmp_path)
    async with app.run_test(size=(140, 44)) as pilot:
        screen = await _loaded(pilot)
        await pilot.press("2")
        stats = screen.query_one("#stats-table", FrameTable)
        assert stats.has_focus
        totals = stats.frame["total_us"].to_list()
        assert totals == sorted(totals, reverse=True)
        top = stats.current_row["op_type"]
        await pilot.press("enter")
        assert screen.filter_query.text == f"type:{top}"
        assert set(_summary(screen).frame["op_type"]) == {top}


async def test_timeline_zoom_and_pan(tmp_path):
    app = _app(tmp_path)
    async with app.run_test(size=(140, 44)) as pilot:
        screen = await _loaded(pilot)
        timeline = screen.query_one(MiniTimeline)
        timeline.focus()
        full = timeline.window
        await pilot.press("plus")
        zoomed = timeline.window
        assert zoomed[1] - zoomed[0] < full[1] - full[0]
        await pilot.press("right")
        assert timeline.window[0] > zoomed[0]
        await pilot.press("h")
        assert timeline.window[0] <= zoomed[0] + 1
        await pilot.press("0")
        assert timeline.window == full
        # From the table: `<` `>` pan, `d` still sorts (the timeline no longer takes it).
        _summary(screen).focus()
        await pilot.press("plus", "greater_than_sign")
        assert timeline.window[0] > full[0]
        await pilot.press("d")
        assert screen.sorts["summary"] == ("duration_us", True)


async def test_export_and_copy(tmp_path):
    app = _app(tmp_path)
    async with app.run_test(size=(140, 44)) as pilot:
        screen = await _loaded(pilot)
        _summary(screen).focus()
        await pilot.press("slash")
        await pilot.press(*"core:AI_CPU", "enter")
        await pilot.press("e")
        (csv_path,) = (tmp_path / "exports").glob("*op-summary*.csv")
        with open(csv_path, newline="") as fh:
            rows = list(csv.reader(fh))
        assert rows[0][:3] == ["Start(us)", "Op Name", "OP Type"]
        assert len(rows) - 1 == _summary(screen).row_count == 4
        assert {r[3] for r in rows[1:]} == {"AI_CPU"}
        await pilot.press("y")
        assert app.clipboard.startswith("## Op report: ")
        reports = list((tmp_path / "exports").glob("op-report-*.md"))
        assert len(reports) == 1 and reports[0].read_text() == app.clipboard


async def test_help_lists_every_key_the_capture_keys_too(tmp_path):
    app = _app(tmp_path)
    async with app.run_test(size=(140, 44)) as pilot:
        await _loaded(pilot)
        rows = all_keys(app.BINDINGS, app.main.BINDINGS)
        assert ("main", "c", "Capture") in rows
        assert {
            ("capture", "ctrl+s", "Start"),
            ("capture", "ctrl+r", "Runs"),
            ("capture", "ctrl+t", "Cancel run"),
            ("capture", "Esc q", "Close"),
        } <= set(rows)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        from rich.console import Console

        console = Console(width=160, record=True, file=open("/dev/null", "w"))
        console.print(app.screen.keys_table)
        text = console.export_text() + " ".join(str(w.render()) for w in app.screen.query("Static"))
        for words in (
            "Sort dur",
            "Filter",
            "Export",
            "Copy op report",
            "Detail of the highlighted finding",
            "Zoom in",
            "Tab",
            "cause:",
        ):
            assert words in text, words
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)


async def test_narrow_terminal_folds_the_cards_into_a_strip(tmp_path):
    from npuscope.tui.widgets.cards_strip import CardsStrip

    app = _app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _loaded(pilot)
        assert screen.has_class("narrow") and screen.has_class("short")
        cards = screen.query_one(CardsPane)
        strip = screen.query_one(CardsStrip)
        assert cards.region.width == 0 and strip.region.height == 1
        worst = cards.query(FindingCard).first().finding
        text = str(strip.render())
        assert "WARN 136 ms" in text and f"{len(cards.query(FindingCard))} findings" in text
        assert worst.title[:20] in text
        table = _summary(screen)
        assert table.region.width == 80 and table.region.height > 10
        await pilot.press("f")  # the cards open in place of the tables
        assert cards.region.width == 80 and cards.has_focus and table.region.width == 0
        await pilot.press("enter")  # drill down: back to the tables, filtered
        assert not screen.has_class("cards-open") and table.region.width == 80
        assert screen.filter_query.text


async def test_load_error_exits_2_with_the_message(tmp_path):
    bad = tmp_path / "PROF_000001_20240605100000123_ABCDEFGHIJKLMNOP" / "mindstudio_profiler_output"
    bad.mkdir(parents=True)
    (bad / "op_summary_20240605100000.csv").write_text("Device_id,Op Name\n0,x\n")
    app = NpuscopeApp(tmp_path, cache=False)
    async with app.run_test(size=(100, 30)) as pilot:
        for _ in range(200):
            if app.return_code is not None:
                break
            await pilot.pause(0.05)
    assert app.return_code == 2
    assert "missing column" in app.error_message


async def test_card_picker(tmp_path):
    app = _app(tmp_path)
    async with app.run_test(size=(140, 44)) as pilot:
        screen = await _loaded(pilot)
        await pilot.press("p")
        from npuscope.tui.screens.pick_screen import PickScreen

        assert isinstance(app.screen, PickScreen)
        await pilot.press("down", "enter")
        await pilot.pause()
        assert screen.card == "1"
        await pilot.press("P")  # one capture only: says so
        assert any("one capture" in str(n.message) for n in app._notifications)


async def test_cards_view_shows_the_spread(tmp_path):
    from npuscope.tui.screens.text_screen import TextScreen

    app = _app(tmp_path)
    async with app.run_test(size=(140, 44)) as pilot:
        await _loaded(pilot)
        await pilot.press("v")
        assert isinstance(app.screen, TextScreen)
        assert "slowest card 0" in app.screen.body and "compute spread" in app.screen.body
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)


async def test_compare_view_from_the_command_line_option(tmp_path):
    from npuscope.fixtures.generate import write_demo
    from npuscope.tui.screens.text_screen import TextScreen

    # NEW = the demo written again without changes: the verdict must say nothing moved much.
    other = write_demo(tmp_path / "other").root
    app = _app(tmp_path, compare_with=other)
    async with app.run_test(size=(140, 44)) as pilot:
        await _loaded(pilot)
        for _ in range(3000):
            if isinstance(app.screen, TextScreen):
                break
            await pilot.pause(0.01)
        assert isinstance(app.screen, TextScreen)
        body = app.screen.body
        assert "Verdict" in body and "Op types" in body
        assert "About the same: device time + wait 0.0 us (+0.0%)" in body


async def test_compare_prompt(tmp_path):
    from npuscope.tui.screens.path_prompt import PathPrompt
    from npuscope.tui.screens.text_screen import TextScreen

    app = _app(tmp_path)
    async with app.run_test(size=(140, 44)) as pilot:
        await _loaded(pilot)
        await pilot.press("C")
        assert isinstance(app.screen, PathPrompt)
        app.post_message(events.Paste(str(ensure_demo())))  # pasted (typed, its 41 Pilot presses take ~2.5 s)
        await pilot.pause()
        await pilot.press("enter")
        for _ in range(3000):
            if isinstance(app.screen, TextScreen):
                break
            await pilot.pause(0.01)
        assert isinstance(app.screen, TextScreen) and "Verdict" in app.screen.body


async def test_open_path_returns_to_the_explorer_and_loads_it(tmp_path, samples):
    from npuscope.tui.screens.text_screen import TextScreen

    paddle = samples / "paddle_cpu"
    app = _app(tmp_path)
    async with app.run_test(size=(140, 44)) as pilot:
        screen = await _loaded(pilot)
        await app.push_screen(TextScreen("below", "text"))
        await app.push_screen(HelpScreen(all_keys(app.BINDINGS, screen.BINDINGS)))  # above another: both are left
        await pilot.pause()
        app.open_path(paddle)
        screen = await _loaded(pilot)
        assert app.screen is screen and app.path == paddle
        assert screen.profile.path == paddle and screen.profile.tasks_from == "paddle"
        # A path with nothing to load: said in one line, the open profile stays on screen.
        app.open_path(tmp_path / "empty")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.is_running and app.path == paddle and screen.profile.path == paddle
        assert screen.has_class("loaded")
        assert any(n.severity == "error" for n in app._notifications)
