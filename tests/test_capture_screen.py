"""The capture screen driven by Pilot: real captures of the tiny Paddle script, on this machine
(`local`) and over a real OpenSSH server, opened in the explorer once fetched.

Runs go to a remote cache folder under tmp_path (the screen's `remote_root=`), results to an
output folder under tmp_path, remembered values to $NPUSCOPE_CONFIG_DIR under tmp_path: nothing
is written to the user's folders. Waits poll with generous deadlines and assert no timings.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import pytest
from pilot_helpers import wait_loaded
from textual import events

from npuscope.analysis.run_registry import list_runs
from npuscope.capture import session
from npuscope.capture.hosts import load_remembered, remember
from npuscope.capture.spec import CaptureError, CaptureSpec, spec_from_form
from npuscope.fixtures.demo_profile import ensure_demo
from npuscope.tui.app import NpuscopeApp
from npuscope.tui.screens.capture_screen import CaptureScreen
from npuscope.tui.screens.main_screen import MainScreen

# Found without importing it: importing Paddle costs each test worker ~1 s at collection.
if importlib.util.find_spec("paddle") is None:
    pytest.skip("could not import 'paddle': No module named 'paddle'", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "fixtures" / "paddle_train_tiny.py"
TINY_ARGS = ["--steps", "120", "--batch-size", "8"]
DEADLINE_S = 180  # a capture takes a few seconds; a loaded 2-core machine may take much longer
SIZE = (120, 40)


@pytest.fixture(autouse=True)
def config_dir(tmp_path, monkeypatch):
    """Remembered values go to a private folder, never the user's config."""
    folder = tmp_path / "config"
    monkeypatch.setenv("NPUSCOPE_CONFIG_DIR", str(folder))
    return folder


def _app(tmp_path) -> NpuscopeApp:
    return NpuscopeApp(ensure_demo(), cache=False, export_dir=tmp_path / "exports")


def _command(*args) -> str:
    import shlex

    return shlex.join([sys.executable, *map(str, args)])


async def _open(pilot, tmp_path, **kw) -> CaptureScreen:
    screen = CaptureScreen(remote_root=str(tmp_path / "remote"), **kw)
    await pilot.app.push_screen(screen)
    await pilot.pause()
    return screen


def _fill(screen: CaptureScreen, host: str, tmp_path, **values) -> None:
    screen.query_one("#host").value = host
    screen.set_form({"device": "cpu", "start_step": "100", "steps": "1", "out": str(tmp_path / "captures"), **values})


async def _until(pilot, condition, what: str, screen: CaptureScreen | None = None, deadline_s=DEADLINE_S):
    deadline = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > deadline:
            status = screen.status_text if screen is not None else ""
            raise AssertionError(f"timed out waiting for {what}; status: {status}")
        await pilot.pause(0.1)


def _status(screen: CaptureScreen) -> str:
    return screen.status_text


async def _captured(pilot, screen: CaptureScreen) -> Path:
    """Wait for the capture to finish and the explorer to open what it fetched."""
    app = pilot.app
    await _until(
        pilot,
        lambda: screen.outcome is not None or "error" in screen.query_one("#capture-status").classes,
        "the capture to end",
        screen,
    )
    assert screen.outcome is not None, _status(screen)
    folder = screen.outcome.folder
    await _until(
        pilot,
        lambda: isinstance(app.screen, MainScreen) and app.main.profile is not None and app.main.profile.path == folder,
        "the explorer to open the capture",
    )
    await wait_loaded(pilot)
    return folder


async def test_c_opens_the_capture_screen_and_esc_leaves(tmp_path):
    app = _app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        await pilot.press("c")
        await pilot.pause()
        assert isinstance(app.screen, CaptureScreen)
        screen = app.screen
        assert screen.query_one("#host").has_focus  # nothing remembered yet: the host comes first
        assert screen.form_values()["out"] == "captures" and screen.form_values()["stop"] is True
        assert screen.query_one("#msprof").placeholder.endswith("/msprof")
        shown = {key for key, b in screen.active_bindings.items() if b.binding.show}
        assert {"ctrl+s", "ctrl+r", "ctrl+t", "escape"} <= shown
        await pilot.press("q")  # typed into the field, not a way out
        assert isinstance(app.screen, CaptureScreen) and screen.host == "q"
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)
        assert not any("keeps running" in str(n.message) for n in app._notifications)
        await pilot.press("c")
        await pilot.pause()
        app.screen.query_one("#capture-log").focus()
        await pilot.press("q")  # outside a field q closes the screen, it never quits the explorer
        assert isinstance(app.screen, MainScreen) and app.is_running


@pytest.mark.slow
async def test_local_capture_opens_in_the_explorer_and_is_remembered(tmp_path):
    app = _app(tmp_path)
    command = _command(TINY, *TINY_ARGS)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        screen = await _open(pilot, tmp_path)
        log = screen.log_widget
        await pilot.click("#host")
        await pilot.press(*"local", "enter")  # Enter in the host field moves on to the next one
        assert screen.query_one("#workdir").has_focus
        await pilot.click("#command")
        # Pasted, as a long command usually is (typed key by key it takes ~100 Pilot key presses).
        app.post_message(events.Paste(command))
        await pilot.pause()
        assert screen.form_values()["command"] == command
        screen.set_form({"device": "cpu", "out": str(tmp_path / "captures")})
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert screen.running
        folder = await _captured(pilot, screen)

        assert folder.parent == tmp_path / "captures" and folder.name.startswith("local-")
        assert app.path == folder and app.main.profile.path == folder
        assert list(folder.glob("*.paddle_trace.json"))
        assert app.main.profile.tasks.height > 0
        assert any("step" in line for line in log.lines)  # the job's log was streamed
        assert screen.phase == "open"
        assert load_remembered("local")["command"] == command
        run = {r.path: r for r in list_runs()}[str(folder.resolve())]  # in the runs registry
        assert run.kind == "captured" and run.host == "local" and str(TINY) in run.command

        # Reopened: the last host and its values are filled in.
        await pilot.press("c")
        await pilot.pause()
        again = app.screen
        assert isinstance(again, CaptureScreen) and again is not screen
        assert again.host == "local"
        values = again.form_values()
        assert values["command"] == command and values["device"] == "cpu"
        assert values["out"] == str(tmp_path / "captures") and values["steps"] == "1"
        await pilot.press("escape")

        # A fresh form: entering the host fills in what was remembered for it.
        blank = await _open(pilot, tmp_path, host="")
        assert blank.form_values()["command"] == ""
        await pilot.click("#host")
        await pilot.press(*"local", "enter")
        values = blank.form_values()
        assert values["command"] == command and values["device"] == "cpu"
        assert "values of the last capture" in _status(blank)


INVALID = [
    ({"steps": "0"}, "the number of steps must be at least 1"),
    ({"command": ""}, "the training command is empty"),
    ({"command": "python"}, "the command must start with the python"),
    ({"command": "python 'train.py"}, "training command: No closing quotation"),
    ({"env": "FLAGS_x=1 BROKEN"}, "extra environment:"),
    ({"start_step": "-3"}, "the start step must be 0 or more"),
]


async def test_validation_error_shows_one_line_and_starts_nothing(tmp_path):
    """Every bad form in one explorer session (an app start-up each would cost ~3 s), each on a
    fresh capture screen."""
    app = _app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        for change, message in INVALID:
            screen = await _open(pilot, tmp_path)
            _fill(screen, "local", tmp_path, **{"command": _command(TINY), **change})
            await pilot.click("#start")
            await pilot.pause()
            status = _status(screen)
            assert message in status and "\n" not in status, (change, status)
            assert "error" in screen.query_one("#capture-status").classes, change
            assert not screen.running and screen.following is None, change
            assert not [w for w in screen.workers if w.group == "capture"], change
            assert not (tmp_path / "remote").exists() and not (tmp_path / "captures").exists(), change
            # Enter in a field starts too: the same error, still nothing started.
            screen.query_one("#out").focus()
            await pilot.press("enter")
            await pilot.pause()
            assert message in _status(screen) and not (tmp_path / "remote").exists(), change
            await pilot.press("escape")
            assert isinstance(app.screen, MainScreen), change


def test_build_spec_reads_the_form():
    spec = spec_from_form(
        " trainer ",
        {
            "command": "python3 train.py --config 'a b.yaml'",
            "workdir": " /data/job ",
            "device": "gpu",
            "start_step": " 50 ",
            "steps": "3",
            "jit_compile": "off",
            "env": "A=1 B='x y'",
            "msprof": "",
            "stop": False,
            "out": "",
        },
        ssh_config=None,
        remote_root="/tmp/r",
    )
    assert spec.host == "trainer" and spec.command == ("python3", "train.py", "--config", "a b.yaml")
    assert spec.workdir == "/data/job" and spec.device == "gpu"
    assert (spec.start_step, spec.steps, spec.jit_compile) == (50, 3, "off")
    assert spec.env == (("A", "1"), ("B", "x y")) and spec.keep_running and spec.out == "captures"
    assert spec.remote_root == "/tmp/r"
    assert spec_from_form("h", {"command": "python t.py", "jit_compile": "leave"}).jit_compile is None
    with pytest.raises(CaptureError, match="steps: not a whole number: 'two'") as err:
        spec_from_form("h", {"command": "python t.py", "steps": "two"})
    assert err.value.code == 2
    with pytest.raises(CaptureError, match="not a host name"):
        spec_from_form("", {"command": "python t.py"})


@pytest.mark.slow
async def test_failing_command_shows_the_failure_and_the_log_tail(tmp_path):
    script = tmp_path / "failing_train.py"
    script.write_text(
        'print("loading the data", flush=True)\nraise RuntimeError("boom in training [bold]x[/bold] [cfg]")\n'
    )
    app = _app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        screen = await _open(pilot, tmp_path)
        _fill(screen, "local", tmp_path, command=_command(script))
        await pilot.press("ctrl+s")
        await _until(pilot, lambda: not screen.running, "the capture to fail", screen)
        status = _status(screen)
        # remote text is shown as it is, never read as markup
        assert "training crashed" in status and "boom in training [bold]x[/bold] [cfg]" in status
        shown = str(screen.query_one("#capture-status").render())
        assert "boom in training [bold]x[/bold] [cfg]" in shown
        assert "\n" not in status
        assert "error" in screen.query_one("#capture-status").classes
        lines = list(screen.log_widget.lines)
        tail = lines[lines.index("── last lines of the job's log ──") + 1 :]
        assert tail and tail[-1] == "RuntimeError: boom in training [bold]x[/bold] [cfg]"
        assert isinstance(app.screen, CaptureScreen) and screen.outcome is None
        assert load_remembered("local") == {}  # only a successful capture is remembered
        assert not (tmp_path / "captures").exists() or not any((tmp_path / "captures").iterdir())


async def test_host_change_fills_remembered_values(tmp_path):
    remember(
        "trainer-a",
        {
            "command": "python a.py",
            "workdir": "/data/a",
            "device": "cpu",
            "stop": False,
            "jit_compile": "off",
            "steps": 4,
            "bogus": "ignored",
        },
    )
    app = _app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        screen = await _open(pilot, tmp_path)
        assert screen.host == "trainer-a"  # the last host is offered on open, with its values
        assert screen.form_values()["command"] == "python a.py"
        screen.set_form({"command": "python edited.py"})
        screen.query_one("#host").focus()
        await pilot.press("tab")  # leaving an unchanged host keeps what was typed
        assert screen.form_values()["command"] == "python edited.py"
        screen.query_one("#host").value = ""
        screen.query_one("#host").focus()
        await pilot.press(*"trainer-b", "tab")  # nothing remembered there: the form stays
        assert screen.form_values()["command"] == "python edited.py"
        screen.query_one("#host").value = ""
        screen.query_one("#host").focus()
        await pilot.press(*"trainer-a", "tab")
        values = screen.form_values()
        assert values["command"] == "python a.py" and values["workdir"] == "/data/a"
        assert values["device"] == "cpu" and values["stop"] is False and values["jit_compile"] == "off"
        assert values["steps"] == "4"


@pytest.mark.slow
async def test_leaving_keeps_the_job_runs_reattaches_and_cancels(tmp_path):
    script = tmp_path / "slow_train.py"
    script.write_text('import time\nprint("warming up slowly", flush=True)\ntime.sleep(600)\n')
    spec = CaptureSpec("local", (sys.executable, str(script)), remote_root=str(tmp_path / "remote"))
    app = _app(tmp_path)
    run_id = None
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot)
            screen = await _open(pilot, tmp_path)
            _fill(screen, "local", tmp_path, command=_command(script))
            await pilot.press("ctrl+s")
            await _until(pilot, lambda: screen.following is not None or not screen.running, "the run id", screen)
            assert screen.following is not None, _status(screen)
            run_id = screen.following[1]

            await pilot.press("escape")  # leave: the job goes on
            await pilot.pause()
            assert isinstance(app.screen, MainScreen)
            assert any("keeps running" in str(n.message) and run_id in str(n.message) for n in app._notifications)
            (info,) = await session.list_runs(spec)
            assert info.id == run_id and info.state == "running"

            again = await _open(pilot, tmp_path, host="local")
            await pilot.press("ctrl+r")
            runs = again.query_one("#runs")
            await _until(pilot, lambda: runs.display and runs.option_count == 1, "the run list", again)
            assert run_id in str(runs.get_option_at_index(0).prompt) and "running" in str(
                runs.get_option_at_index(0).prompt
            )
            await pilot.press("enter")  # follow it again: its log from the start
            await pilot.pause()
            assert again.running and again.following == ("local", run_id)
            log = again.log_widget
            await _until(pilot, lambda: "warming up slowly" in log.lines, "the log of the reattached run", again)

            await pilot.press("ctrl+t")
            await _until(
                pilot,
                lambda: not again.running and not [w for w in again.workers if w.is_running],
                "the run to be cancelled",
                again,
            )
            assert "cancelled" in _status(again)
            assert any(f"run {run_id} cancelled" in line for line in log.lines)
            (info,) = await session.list_runs(spec)
            assert info.state == "failed (143)" and not info.alive
            run_id = None
    finally:
        if run_id is not None:  # never leave the sleeping job behind
            await session.cancel(spec, run_id)


@pytest.mark.slow
async def test_two_hosts_in_the_host_field_capture_both_and_open_every_card(tmp_path, sshd):
    """The host is completed from the ssh config's aliases, then a second host added: one
    capture over the real sshd and one on this machine (a single host's capture over SSH is
    test_capture_ssh.py's first test), its log streamed, both opened as cards."""
    from sshd_server import HOST

    app = _app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        screen = await _open(pilot, tmp_path, ssh_config=str(sshd.config), host="")
        await pilot.click("#host")
        await pilot.press(*HOST[:-3])
        for _ in range(100):  # the suggestion comes from a worker; right accepts it once shown
            await pilot.pause()
            await pilot.press("right")
            if screen.host == HOST:
                break
        assert screen.host == HOST  # completed from the ssh config's aliases
        log = screen.log_widget
        _fill(screen, f"{HOST}, local", tmp_path, command=_command(TINY, *TINY_ARGS))
        await pilot.click("#start")
        folder = await _captured(pilot, screen)
        assert folder.name.startswith(f"{HOST}+1-") and app.path == folder
        assert sorted(h for h, _ in screen.started) == sorted([HOST, "local"])
        assert sorted(app.main.profile.cards) == sorted([HOST, "local"])
        for host in (HOST, "local"):
            assert list((folder / host).glob("*.paddle_trace.json")), host
        assert any("step" in line for line in log.lines)  # the jobs' logs were streamed
        assert load_remembered(f"{HOST},local")["command"] == _command(TINY, *TINY_ARGS)
        # Runs works on one host at a time
        await pilot.press("c")
        await pilot.pause()
        again = app.screen
        assert again.host == f"{HOST},local"
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert "one host" in again.status_text
