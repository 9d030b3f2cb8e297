"""Loading in the explorer: each load and compare has its own cancel event and generation, a
result of a job that is no longer current is dropped, Esc and ctrl+c act during a load.

Real samples and the real loader throughout. Where a test needs one load to be at a given
point while another runs, the loader's own function (open_profile, diagnose, compare_runs)
is wrapped by a gate: the wrapper waits for the test to open it, then calls the real one.
No sleeps: the tests wait for the app's state or for the job threads.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from npuscope.parsers import Cancelled, FrameCache, ProfileError, open_profile
from npuscope.parsers.timeline import read_timeline
from npuscope.tui import app as app_module
from npuscope.tui import load_job
from npuscope.tui.app import NpuscopeApp
from npuscope.tui.messages import CancelRequested, CompareRequested, LoadProgressed, LoadRequested
from npuscope.tui.screens.path_prompt import PathPrompt
from npuscope.tui.screens.text_screen import TextScreen

WAIT = 120.0  # seconds before a wait gives up (a timeout, not a timing assertion)


async def until(pilot, predicate: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause()


class Gate:
    """Holds calls of `real` whose first argument is `held` until `open()`; records how each ended."""

    def __init__(self, real: Callable, held: Path) -> None:
        self.real = real
        self.held = Path(held)
        self.entered = threading.Event()
        self.opened = threading.Event()
        self.outcomes: list[str] = []

    def __call__(self, first, *args, **kwargs):
        if Path(getattr(first, "path", first)) != self.held:
            return self.real(first, *args, **kwargs)
        self.entered.set()
        self.opened.wait(WAIT)
        try:
            result = self.real(first, *args, **kwargs)
        except Cancelled:
            self.outcomes.append("cancelled")
            raise
        self.outcomes.append("done")
        return result

    def open(self) -> None:
        self.opened.set()


@pytest.fixture
def golden(samples) -> Path:
    return samples / "msprof_golden"


@pytest.fixture
def paddle(samples) -> Path:
    return samples / "paddle_cpu"


def _label(app: NpuscopeApp) -> str:
    return str(app.main.query_one("#loading-label").render())


# ---------------------------------------------------------------- the timeline's pieces


def test_timeline_pieces_report_bytes_read_and_stop_when_the_hook_raises(paddle):
    (path,) = paddle.glob("*.paddle_trace.json")
    size = path.stat().st_size
    events = json.loads(path.read_text())["traceEvents"]
    seen: list[int] = []
    frame = read_timeline([path], chunk_bytes=16 << 10, hook=seen.append)
    assert frame.height == sum(1 for e in events if e.get("ph") not in (None, "M"))
    assert frame.equals(read_timeline([path]))  # pieces change nothing of the frame
    assert len(seen) > size // (16 << 10) // 2  # one report per piece of ~16 KB
    assert seen == sorted(seen) and seen[-1] == size

    class Stop(Exception):
        pass

    def stop_at_third(read: int) -> None:
        if read >= 3 * (16 << 10):
            raise Stop

    with pytest.raises(Stop):
        read_timeline([path], chunk_bytes=16 << 10, hook=stop_at_third)
    assert read_timeline([path]).equals(frame)  # no hook, nothing stops it


# ---------------------------------------------------------------- loads


async def test_an_older_load_that_finishes_last_is_dropped(golden, paddle, monkeypatch):
    """Load A is held inside its diagnosis (past every cancel check) while B loads: A's result,
    posted after B's, does not replace B."""
    gate = Gate(load_job.diagnosed, golden)
    monkeypatch.setattr(load_job, "diagnosed", gate)
    app = NpuscopeApp(golden, cache=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, gate.entered.is_set, "load A to reach its diagnosis")
        first = app.loading
        assert first is not None
        app.post_message(LoadRequested(paddle))
        await until(pilot, lambda: app.main.profile is not None, "load B")
        assert app.main.profile.path == paddle and app.loading is None
        assert first.cancel.is_set()
        gate.open()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert gate.outcomes == ["done"]  # A did finish, and posted its profile...
        assert ("ProfileLoaded", first.generation) in app.dropped  # ...which was dropped
        assert app.main.profile.path == paddle and app.path == paddle
        # Progress of the old load is dropped too, never drawn over the open profile.
        app.post_message(LoadProgressed(1, 2, "timeline", first.generation))
        await pilot.pause()
        assert ("LoadProgressed", first.generation) in app.dropped
        assert app.main.has_class("loaded")


async def test_a_second_load_does_not_uncancel_the_first(golden, paddle, monkeypatch):
    """Load A is held before it opens its files; B is started (cancelling A) and shown; A,
    let go, sees its own cancel event still set and stops."""
    gate = Gate(load_job.open_profile, golden)
    monkeypatch.setattr(load_job, "open_profile", gate)
    app = NpuscopeApp(golden, cache=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, gate.entered.is_set, "load A to start")
        first = app.loading
        assert first is not None
        app.post_message(LoadRequested(paddle))
        await until(pilot, lambda: app.main.profile is not None, "load B")
        second = app.jobs[-1]
        assert second is not first and second.generation > first.generation
        assert first.cancel.is_set() and not second.cancel.is_set()
        gate.open()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert gate.outcomes == ["cancelled"]
        assert ("LoadCancelled", first.generation) in app.dropped
        assert app.main.profile.path == paddle


async def test_escape_during_the_first_load_cancels_it_and_says_so(golden, monkeypatch):
    gate = Gate(load_job.open_profile, golden)
    monkeypatch.setattr(load_job, "open_profile", gate)
    app = NpuscopeApp(golden, cache=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, gate.entered.is_set, "the load to start")
        job = app.loading
        await pilot.press("escape")
        assert job is not None and job.cancel.is_set() and app.loading is None
        assert "loading cancelled" in _label(app)
        gate.open()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert gate.outcomes == ["cancelled"]
        assert app.is_running and app.main.profile is None  # the app stays, saying so
        assert "loading cancelled" in _label(app)


async def test_cancel_request_during_a_reload_keeps_the_open_profile(golden, paddle, monkeypatch):
    gate = Gate(load_job.open_profile, paddle)
    monkeypatch.setattr(load_job, "open_profile", gate)
    app = NpuscopeApp(golden, cache=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: app.main.profile is not None, "load A")
        app.post_message(LoadRequested(paddle))
        await until(pilot, gate.entered.is_set, "load B to start")
        app.post_message(CancelRequested())
        await until(pilot, lambda: app.loading is None, "the cancel")
        assert app.main.has_class("loaded") and app.path == golden
        gate.open()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert gate.outcomes == ["cancelled"] and app.main.profile.path == golden


async def test_escape_during_a_reload_cancels_it_not_the_filter(golden, paddle, monkeypatch):
    gate = Gate(load_job.open_profile, paddle)
    monkeypatch.setattr(load_job, "open_profile", gate)
    app = NpuscopeApp(golden, cache=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: app.main.profile is not None, "load A")
        app.main.apply_filter("type:MatMul")
        app.post_message(LoadRequested(paddle))
        await until(pilot, gate.entered.is_set, "load B to start")
        job = app.loading
        await pilot.press("escape")
        assert job is not None and job.cancel.is_set() and app.loading is None
        assert app.main.has_class("loaded") and app.main.filter_query.text == "type:MatMul"
        await pilot.press("escape")  # no load now: the screen's Esc clears the filter
        assert app.main.filter_query.text == ""
        gate.open()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert gate.outcomes == ["cancelled"] and app.main.profile.path == golden


async def test_ctrl_c_during_a_load_quits_as_interrupted(golden, monkeypatch):
    gate = Gate(load_job.open_profile, golden)
    monkeypatch.setattr(load_job, "open_profile", gate)
    app = NpuscopeApp(golden, cache=False)
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, gate.entered.is_set, "the load to start")
            job = app.loading
            await pilot.press("ctrl+c")
            await until(pilot, lambda: not app.is_running, "the app to exit")
    finally:
        gate.open()
    assert app.return_code == 130 and job is not None and job.cancel.is_set()


async def test_a_bad_path_fails_the_first_load_with_one_line(tmp_path):
    app = NpuscopeApp(tmp_path / "missing", cache=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: not app.is_running, "the app to exit")
    assert app.return_code == 2 and app.error_message and "\n" not in app.error_message


# ---------------------------------------------------------------- compares


async def test_a_comparison_with_a_replaced_profile_is_dropped(golden, paddle, monkeypatch, samples):
    """The comparison against A is held in compare_runs while B is opened: its result, about
    a profile no longer shown, never opens."""
    other = samples / "msprof_golden"
    gate = Gate(app_module.compare_runs, golden)  # held when BASE is A
    monkeypatch.setattr(app_module, "compare_runs", gate)
    app = NpuscopeApp(golden, cache=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: app.main.profile is not None, "load A")
        app.post_message(CompareRequested(other))
        await until(pilot, gate.entered.is_set, "the comparison to start")
        comparing = app.comparing
        assert comparing is not None
        app.post_message(LoadRequested(paddle))
        await until(pilot, lambda: app.main.profile is not None and app.main.profile.path == paddle, "load B")
        assert comparing.cancel.is_set() and app.comparing is None
        gate.open()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert gate.outcomes == ["done"]
        assert ("ComparisonReady", comparing.generation) in app.dropped
        assert not isinstance(app.screen, TextScreen)


async def test_the_compare_prompt_posts_its_request(golden):
    app = NpuscopeApp(golden, cache=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: app.main.profile is not None, "the load")
        app.push_screen(PathPrompt("Compare with", request=lambda p: CompareRequested(Path(p))))
        await pilot.pause()
        await pilot.press(*str(golden), "enter")
        await until(pilot, lambda: isinstance(app.screen, TextScreen), "the comparison")
        assert "Verdict" in app.screen.body


def test_the_loader_stops_on_its_own_cancel_event(golden):
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        load_job.load_profile(
            golden, capture=None, read=app_module.ReadOptions(), thresholds=None, use_cache=False, cancel=cancel
        )
    # Not cancelled: the same profile as open_profile gives.
    seen: list[tuple[int, int, str]] = []
    profile, _ = load_job.load_profile(
        golden,
        capture=None,
        read=app_module.ReadOptions(),
        thresholds=None,
        use_cache=False,
        cancel=threading.Event(),
        progress=lambda *a: seen.append(a),
    )
    assert profile.tasks.equals(open_profile(golden, cache=FrameCache(enabled=False), pmu="ratios").tasks)
    total = sum(p.stat().st_size for p in profile.files)
    assert seen[-1] == (total, total, "diagnosing")
    assert all(done <= t == total for done, t, _ in seen)
    with pytest.raises(ProfileError):
        load_job.load_profile(
            golden / "missing",
            capture=None,
            read=app_module.ReadOptions(),
            thresholds=None,
            use_cache=False,
            cancel=threading.Event(),
        )


def test_progress_moves_by_bytes_while_the_timeline_is_parsed(tmp_path):
    """A 20 MB timeline is parsed in pieces of 8 MB: progress is reported after each, by bytes
    read, before the timeline is done (not only once per file)."""
    from npuscope.fixtures.generate import generate
    from npuscope.parsers.timeline import CHUNK_BYTES

    generated = generate(tmp_path / "profile", json_mb=20)
    (timeline,) = [p for p in generated.files if p.suffix == ".json"]
    size = timeline.stat().st_size
    assert size > 2 * CHUNK_BYTES
    seen: list[tuple[int, int, str]] = []
    load_job.load_profile(
        generated.root,
        capture=None,
        read=app_module.ReadOptions(),
        thresholds=None,
        use_cache=False,
        cancel=threading.Event(),
        progress=lambda *a: seen.append(a),
    )
    total = sum(p.stat().st_size for p in generated.files)
    pieces = [done for done, _, label in seen if label == "timeline"]
    assert len(pieces) >= size // CHUNK_BYTES  # one report per piece
    assert pieces == sorted(pieces) and pieces[0] < size // 2
    assert [d for d, _, _ in seen] == sorted(d for d, _, _ in seen)  # bytes only ever rise
    assert all(t == total for _, t, _ in seen)


@pytest.mark.parametrize("choice", ["reopen", "another", "quit"])
async def test_escape_after_a_cancelled_first_load_offers_what_next(golden, paddle, monkeypatch, choice):
    gate = Gate(load_job.open_profile, golden)
    monkeypatch.setattr(load_job, "open_profile", gate)
    app = NpuscopeApp(golden, cache=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, gate.entered.is_set, "the load to start")
        await pilot.press("escape")
        gate.open()
        await app.workers.wait_for_complete()
        await pilot.pause()
        hint = str(app.main.query_one("#loading-hint").render())
        assert hint == app_module.AFTER_CANCEL_HINT and "Esc cancels" not in hint
        await pilot.press("escape")  # nothing loads, nothing is open: the choices
        options = app.screen.query_one("#pick-list")
        labels = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert labels == [f"Reopen {golden}", "Open another path…", "Quit"]
        if choice == "reopen":
            await pilot.press("enter")
            await until(pilot, lambda: app.main.profile is not None, "the reopen")
            assert app.main.profile.path == golden
            assert str(app.main.query_one("#loading-hint").render()) == "Esc cancels"  # for the next load
        elif choice == "another":
            await pilot.press("down", "enter")
            assert isinstance(app.screen, PathPrompt)
            await pilot.press(*str(paddle), "enter")
            await until(pilot, lambda: app.main.profile is not None, "the other path")
            assert app.main.profile.path == paddle
        else:
            await pilot.press("down", "down", "enter")
            await until(pilot, lambda: not app.is_running, "the app to quit")
