"""SVG snapshots of the explorer at the sizes people run it in (update with --snapshot-update,
after looking at the difference in snapshot_report.html)."""

from __future__ import annotations

import pytest
from pilot_helpers import wait_loaded
from textual.widgets import Input

from npuscope.fixtures.demo_profile import ensure_demo
from npuscope.tui.app import NpuscopeApp


def _app() -> NpuscopeApp:
    return NpuscopeApp(ensure_demo(), cache=False)


async def _loaded(pilot) -> None:
    await wait_loaded(pilot)
    for field in pilot.app.screen.query(Input):  # a blinking cursor would differ between runs
        field.cursor_blink = False


def _after(*keys: str):
    async def run(pilot) -> None:
        await _loaded(pilot)
        for key in keys:
            await pilot.press(key)
        await pilot.pause()
        for field in pilot.app.screen.query(Input):
            field.cursor_blink = False

    return run


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 50)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_main_screen_after_w(snap_compare, size):
    assert snap_compare(_app(), terminal_size=size, run_before=_after("w"))


def test_task_detail_80x24(snap_compare):
    assert snap_compare(_app(), terminal_size=(80, 24), run_before=_after("w", "enter"))


def test_cards_view_80x24(snap_compare):
    assert snap_compare(_app(), terminal_size=(80, 24), run_before=_after("v"))


def test_finding_detail(snap_compare):
    assert snap_compare(_app(), terminal_size=(120, 40), run_before=_after("i"))


def test_capture_screen(snap_compare, tmp_path, monkeypatch):
    monkeypatch.setenv("NPUSCOPE_CONFIG_DIR", str(tmp_path))  # no remembered host
    assert snap_compare(_app(), terminal_size=(120, 40), run_before=_after("c"))
