"""What `npuscope capture` says: the window as a person counts it, a header over `--list`, the
fetched folder as what it is, and `--host local` running where the command was typed."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout

from npuscope.capture.events import PhaseStarted
from npuscope.capture.runs import RunInfo
from npuscope.capture.session import window_text
from npuscope.capture_cmd import LIST_HEADER, StderrReporter, _print_runs, spec_from_args
from npuscope.cli import build_parser


def _spec(*opts: str):
    args = build_parser().parse_args(["capture", *opts])
    return spec_from_args(args, ["python", "train.py"])


def test_the_window_is_the_steps_profiled():
    # The profiler starts at step N and stops at N + K: K steps, N .. N + K - 1.
    assert window_text(100, 1) == "profiling step 100"
    assert window_text(100, 5) == "profiling steps 100-104"


def test_local_runs_in_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _spec("--host", "local").workdir == str(tmp_path)
    assert _spec("--host", "local", "--workdir", "elsewhere").workdir == "elsewhere"
    assert _spec("--host", "ascend01").workdir == ""  # a remote host: its login folder


def test_list_has_a_header_over_its_columns():
    run = RunInfo(
        id="20261129-143000-ab12",
        exit=0,
        alive=False,
        phase="done",
        fetched=True,
        record={},
        words=("python", "train.py"),
    )
    out = io.StringIO()
    with redirect_stdout(out):
        assert _print_runs([run], _spec("--host", "ascend01")) == 0
    header, line = out.getvalue().splitlines()
    assert header == LIST_HEADER
    # Each column name starts where its column does.
    for name, value in (("state", run.state), ("phase", "done"), ("command", "python train.py")):
        assert header.index(name) == line.index(value), (name, header, line)


def test_the_last_line_names_the_fetched_folder_not_an_open():
    err = io.StringIO()
    with redirect_stderr(err):
        StderrReporter(verbose=False, several=False)(PhaseStarted("ascend01", "open", "captures/ascend01-1"))
    text = err.getvalue()
    assert "fetched into captures/ascend01-1" in text and "open:" not in text


def test_the_host_key_hint_runs_ssh_as_the_capture_does():
    from npuscope.capture.transport import ssh_problem

    plain = ssh_problem("ascend01", ["Host key verification failed."])
    assert "connect once with `ssh ascend01`" in plain
    given = ssh_problem("ascend01", ["Host key verification failed."], "~/my ssh/config")
    assert "connect once with `ssh -F '~/my ssh/config' ascend01`" in given
    denied = ssh_problem("ascend01", ["Permission denied (publickey)."], "/x/config")
    assert "`ssh -F /x/config -o BatchMode=yes ascend01 true`" in denied


async def test_the_capture_screen_has_the_ssh_config_and_remote_cache(tmp_path, monkeypatch):
    from pilot_helpers import wait_loaded
    from textual.widgets import Input

    from npuscope.capture import spec as capture_spec
    from npuscope.fixtures.demo_profile import ensure_demo
    from npuscope.tui.app import NpuscopeApp
    from npuscope.tui.screens.capture_screen import CaptureScreen

    monkeypatch.setenv("NPUSCOPE_CONFIG_DIR", str(tmp_path / "config"))  # no remembered values
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "ssh_config"
    config.write_text("Host ascend01\n  HostName 127.0.0.1\n")
    app = NpuscopeApp(ensure_demo(), cache=False, ssh_config=str(config), remote_root="/scratch/npuscope")
    async with app.run_test(size=(120, 44)) as pilot:
        await wait_loaded(pilot)
        await pilot.press("c")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, CaptureScreen)
        assert screen.query_one("#ssh-config", Input).value == str(config)
        assert screen.query_one("#remote-cache", Input).value == "/scratch/npuscope"
        screen.query_one("#host", Input).value = "local"
        screen.query_one("#command", Input).value = "python train.py"
        spec = capture_spec.spec_from_form(
            screen.host, screen.form_values(), ssh_config=screen.ssh_config, remote_root=screen.remote_root
        )
        assert (spec.ssh_config, spec.remote_root, spec.workdir) == (str(config), "/scratch/npuscope", str(tmp_path))
        # What the form says wins over what the explorer was started with, for runs too.
        other = tmp_path / "other_config"
        other.write_text("Host x\n")
        screen.query_one("#ssh-config", Input).value = str(other)
        screen.query_one("#remote-cache", Input).value = ""
        spec = capture_spec.spec_from_form(
            screen.host, screen.form_values(), ssh_config=screen.ssh_config, remote_root=screen.remote_root
        )
        assert (spec.ssh_config, spec.remote_root) == (str(other), "/scratch/npuscope")
        assert screen.host_spec("ascend01").ssh_config == str(other)


def test_the_explorer_takes_the_capture_settings():
    from npuscope.cli import build_explorer_parser

    args = build_explorer_parser().parse_args(["--ssh-config", "/x/config", "--remote-cache", "/scratch"])
    assert (args.ssh_config, args.remote_cache) == ("/x/config", "/scratch")
