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
