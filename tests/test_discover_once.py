"""The command line discovers the path it checks once: the explorer's first load starts from
those captures (the folder is not walked again), a later load of the same path walks it anew
(files may have changed)."""

from __future__ import annotations

from pilot_helpers import wait_loaded

from npuscope.fixtures.demo_profile import ensure_demo
from npuscope.parsers import cluster, layout, profile
from npuscope.tui.app import NpuscopeApp


def _counting(monkeypatch) -> list[str]:
    calls: list[str] = []
    real = layout.discover

    def counted(path):
        calls.append(str(path))
        return real(path)

    for module in (profile, cluster):
        monkeypatch.setattr(module, "discover", counted)
    return calls


async def test_first_load_uses_the_captures_the_command_line_found(monkeypatch, tmp_path):
    demo = ensure_demo()
    found = layout.discover(demo)
    calls = _counting(monkeypatch)
    app = NpuscopeApp(demo, cache=False, clusters=True, discovered=found, export_dir=tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await wait_loaded(pilot)
        assert screen.profile is not None and screen.profile.capture == found[0]
        assert calls == []  # neither the cluster check nor the open walked the folder
        app.start_load(demo, None)  # a reload: discovered again
        await wait_loaded(pilot)
        assert len(calls) >= 1 and all(c == str(demo) for c in calls)


async def test_without_captures_the_load_discovers(monkeypatch, tmp_path):
    demo = ensure_demo()
    calls = _counting(monkeypatch)
    app = NpuscopeApp(demo, cache=False, clusters=True, export_dir=tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_loaded(pilot)
        assert calls and all(c == str(demo) for c in calls)
