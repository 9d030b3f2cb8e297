"""SVG snapshots of the explorer at fixed sizes (update with --snapshot-update)."""

from __future__ import annotations

from pilot_helpers import wait_loaded

from npuscope.fixtures.demo_profile import ensure_demo
from npuscope.tui.app import NpuscopeApp
from npuscope.tui.widgets.cards_pane import CardsPane


def _app() -> NpuscopeApp:
    return NpuscopeApp(ensure_demo(), cache=False)


async def _loaded(pilot) -> None:
    await wait_loaded(pilot)


def test_main_screen(snap_compare):
    assert snap_compare(_app(), terminal_size=(140, 44), run_before=_loaded)


def test_narrow_screen(snap_compare):
    assert snap_compare(_app(), terminal_size=(80, 24), run_before=_loaded)


def test_finding_detail(snap_compare):
    async def open_detail(pilot) -> None:
        await _loaded(pilot)
        pilot.app.main.query_one(CardsPane).focus()
        await pilot.press("i")
        await pilot.pause()

    assert snap_compare(_app(), terminal_size=(120, 40), run_before=open_detail)


def test_capture_screen(snap_compare, tmp_path, monkeypatch):
    monkeypatch.setenv("NPUSCOPE_CONFIG_DIR", str(tmp_path))  # no remembered host

    async def open_capture(pilot) -> None:
        await _loaded(pilot)
        await pilot.press("c")
        await pilot.pause()

    assert snap_compare(_app(), terminal_size=(120, 40), run_before=open_capture)
