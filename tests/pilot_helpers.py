"""Waiting for the explorer to settle in Pilot tests: profile loaded, timeline built."""

from __future__ import annotations

from npuscope.tui.screens.main_screen import MainScreen
from npuscope.tui.widgets.mini_timeline import MiniTimeline


async def wait_loaded(pilot) -> MainScreen:
    app = pilot.app
    await app.workers.wait_for_complete()
    await pilot.pause()
    screen = app.main
    assert screen.profile is not None, "the demo profile did not load"
    timeline = screen.query_one(MiniTimeline)
    for _ in range(3000):  # the timeline is built once the first screen has settled
        if timeline.model is not None:
            break
        await pilot.pause(0.01)
    await app.workers.wait_for_complete()
    await pilot.pause()
    assert timeline.model is not None, "the timeline was never built"
    return screen
