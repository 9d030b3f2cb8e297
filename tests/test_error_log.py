"""One error route: an unexpected error in a worker shows one line in the app and leaves its
traceback in the log under the user's state folder; bad input keeps its own line and logs
nothing; `--debug` prints the tracebacks on stderr."""

from __future__ import annotations

from pathlib import Path

import pytest
from pilot_helpers import wait_loaded

from npuscope import cli
from npuscope.fixtures.demo_profile import ensure_demo
from npuscope.parsers import ProfileError
from npuscope.tui import error_log, load_job
from npuscope.tui.app import NpuscopeApp
from npuscope.tui.errors import ErrorRoute
from npuscope.tui.screens import main_screen, sql_screen
from npuscope.tui.screens.sql_screen import SqlScreen


@pytest.fixture
def state_home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(home))
    return home


def _log(state_home: Path) -> Path:
    return state_home / "npuscope" / "npuscope.log"


def _said(app) -> list[str]:
    return [str(n.message) for n in app._notifications]


def _boom(*args, **kwargs):
    raise RuntimeError("boom in the worker")


def test_the_log_is_under_the_state_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert error_log.log_path() == tmp_path / "npuscope" / "npuscope.log"
    monkeypatch.setenv("XDG_STATE_HOME", "relative/state")  # invalid under the XDG spec: ignored
    assert error_log.log_path() == Path.home() / ".local" / "state" / "npuscope" / "npuscope.log"
    monkeypatch.delenv("XDG_STATE_HOME")
    assert error_log.log_path() == Path.home() / ".local" / "state" / "npuscope" / "npuscope.log"


def test_expected_errors_log_nothing_and_bugs_log_their_traceback(state_home):
    route = ErrorRoute()
    assert route.describe(ProfileError("no tasks in x.csv"), lead="rank 3: ") == "rank 3: no tasks in x.csv"
    assert not state_home.exists() and route.reported == []  # the folder is made on the first bug only
    try:
        _boom()
    except RuntimeError as exc:
        line = route.describe(exc, during=" while loading")
    assert line == f"unexpected error while loading: RuntimeError: boom in the worker (traceback in {_log(state_home)})"
    text = _log(state_home).read_text()
    assert "Traceback (most recent call last)" in text and "in _boom" in text and text.count("boom in the worker") >= 2
    assert (state_home / "npuscope").stat().st_mode & 0o777 == 0o700
    assert _log(state_home).stat().st_mode & 0o777 == 0o600
    assert [r.line for r in route.reported] == [line] and "in _boom" in route.reported[0].traceback


def test_an_unwritable_log_still_gives_one_line(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_STATE_HOME", str(blocker))  # a file where the folder would go
    line = ErrorRoute().describe(ValueError("x"))
    assert line.startswith("unexpected error: ValueError: x (no traceback written:")


async def test_a_failing_worker_shows_one_line_and_logs_the_traceback(state_home, monkeypatch):
    monkeypatch.setattr(main_screen, "read_views", _boom)
    app = NpuscopeApp(ensure_demo(), cache=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await wait_loaded(pilot)
        for _ in range(3000):
            if any("boom" in m for m in _said(app)):
                break
            await pilot.pause(0.01)
        log = _log(state_home)
        line = f"unexpected error: RuntimeError: boom in the worker (traceback in {log})"
        assert line in _said(app)  # one line, naming the log
        await pilot.press("3")
        note = str(screen.query_one("#steps-note").render())
        assert note == f"could not be read: {line}" and app.is_running
        text = log.read_text()
        assert "Traceback (most recent call last)" in text and "_read_views" in text and "in _boom" in text


async def test_a_worker_that_raises_reaches_the_state_changed_route(state_home, monkeypatch):
    monkeypatch.setattr(main_screen, "build_model", _boom)  # the timeline's worker catches nothing
    app = NpuscopeApp(ensure_demo(), cache=False)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(3000):
            if any("boom" in m for m in _said(app)):
                break
            await pilot.pause(0.01)
        said = [m for m in _said(app) if "boom" in m]
        assert said == [
            f"build timeline: unexpected error: RuntimeError: boom in the worker (traceback in {_log(state_home)})"
        ]
        assert "_build_model" in _log(state_home).read_text() and app.is_running


async def test_bad_input_keeps_its_line_and_logs_nothing(state_home, monkeypatch):
    def bad(*args, **kwargs):
        raise ProfileError("step_trace_time.csv: row 2 is damaged")

    monkeypatch.setattr(main_screen, "read_views", bad)
    app = NpuscopeApp(ensure_demo(), cache=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await wait_loaded(pilot)
        for _ in range(3000):
            if any("damaged" in m for m in _said(app)):
                break
            await pilot.pause(0.01)
        assert "step_trace_time.csv: row 2 is damaged" in _said(app)
        await pilot.press("3")
        assert (
            str(screen.query_one("#steps-note").render()) == "could not be read: step_trace_time.csv: row 2 is damaged"
        )
        assert not state_home.exists() and app.errors.reported == []


async def test_a_failing_query_says_it_on_the_status_line(state_home, monkeypatch):
    monkeypatch.setattr(sql_screen, "run_sql", _boom)
    app = NpuscopeApp(ensure_demo(), cache=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_loaded(pilot)
        await pilot.press("colon")
        sql = app.screen
        assert isinstance(sql, SqlScreen)
        sql.run_query("SELECT 1")
        status = sql.query_one("#sql-status")
        for _ in range(3000):
            if "boom" in str(status.render()):
                break
            await pilot.pause(0.01)
        assert str(status.render()) == (
            f"unexpected error: RuntimeError: boom in the worker (traceback in {_log(state_home)})"
        )
        assert "_run" in _log(state_home).read_text()


async def test_a_first_load_that_fails_exits_2_with_the_line(state_home, monkeypatch):
    monkeypatch.setattr(load_job, "open_profile", _boom)
    app = NpuscopeApp(ensure_demo(), cache=False)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(3000):
            if not app.is_running:
                break
            await pilot.pause(0.01)
    assert app.return_code == 2
    assert app.error_message == (
        f"unexpected error while loading: RuntimeError: boom in the worker (traceback in {_log(state_home)})"
    )
    assert "in _boom" in _log(state_home).read_text()


def test_help_names_the_log_and_debug(state_home, capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert "--debug" in out and str(_log(state_home)) in "".join(out.split())  # however it wraps


def test_debug_before_a_command_prints_the_traceback_of_bad_input(tmp_path, capsys):
    missing = str(tmp_path / "missing")
    assert cli.main(["inspect", missing]) == 2
    plain = capsys.readouterr().err
    assert plain.startswith("npuscope: ") and "Traceback" not in plain
    assert cli.main(["--debug", "inspect", missing]) == 2
    err = capsys.readouterr().err
    assert err.startswith(plain) and "Traceback (most recent call last)" in err and "ProfileError" in err


def test_debug_prints_what_the_explorer_logged_once_it_closed(state_home, monkeypatch, capsys):
    def run(self, *args, **kwargs):
        try:
            _boom()
        except RuntimeError as exc:
            self.errors.describe(exc)

    monkeypatch.setattr(NpuscopeApp, "run", run)
    assert cli.main([str(ensure_demo())]) == 0
    assert "Traceback" not in capsys.readouterr().err
    assert cli.main([str(ensure_demo()), "--debug"]) == 0
    err = capsys.readouterr().err
    assert "npuscope: unexpected error: RuntimeError: boom in the worker" in err
    assert "Traceback (most recent call last)" in err and "in _boom" in err
