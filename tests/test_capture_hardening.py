"""The capture against a broken or hostile host: malformed progress lines and run records, pid
files that name other processes, odd host names, newlines in paths and file names, full disks,
fetches killed on the way, and escape sequences in everything the host sends back.

Real components: run scripts executed by `sh`, `--host local` runs of the real command line, a
real tmpfs for the full disks (skipped where it cannot be mounted), a pid namespace (`unshare`)
for the pid files naming process 1, and the project's sshd for the host names. The only stand-ins
are named FAKE: a bootstrap that fills the disk or sleeps, and a python that writes a trace.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npuscope.capture.events import LogLine, PhaseStarted, Progressed
from npuscope.capture.fetch import host_folders, staging_dir
from npuscope.capture.runs import cancel_script, launch_script, parse_record, parse_runs, run_script
from npuscope.capture.session import HostRun, cancel, clean, list_runs
from npuscope.capture.spec import CaptureError, CaptureSpec
from npuscope.capture_cmd import LIST_HEADER
from npuscope.text import one_line, printable

RUN = "20261129-143000-ab12"
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # what a terminal must never get from a host
TIMEOUT = 120


def make_run(
    root: Path,
    run_id: str = RUN,
    *,
    log: str = "",
    exit: str | None = "0",
    pid: str | None = "999999999",
    record: str | None = '{"spec": {"command": ["python", "t.py"], "start_step": 5, "steps": 1}}\n',
    files: dict | None = None,
) -> Path:
    """A run folder as run.sh leaves it. The default pid names no process (pid_max is below it)."""
    run = root / "runs" / run_id
    run.mkdir(parents=True)
    (run / "log").write_text(log)
    for name, value in (("exit", exit), ("pid", pid), ("run.json", record)):
        if value is not None:
            (run / name).write_text(value)
    for name, data in (files or {}).items():
        path = Path(os.fsdecode(os.path.join(os.fsencode(run), os.fsencode(name))))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return run


def spec_for(root: Path, **fields) -> CaptureSpec:
    return CaptureSpec(**{"host": "local", "command": (), "remote_root": str(root), **fields})


def host_run(root: Path, run_id: str = RUN, events: list | None = None) -> HostRun:
    run = HostRun(spec_for(root, start_step=5), run_id, (events if events is not None else []).append)
    run.root, run.run_dir = str(root), str(root / "runs" / run_id)
    return run


def cli(root: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "npuscope",
            "capture",
            "--host",
            "local",
            "--remote-cache",
            str(root),
            "--out",
            str(out),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def no_traceback(res: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in res.stderr, res.stderr


# --- 1. progress lines are untrusted --------------------------------------------------------------

MALFORMED = [
    '{"event":"step","step":"oops"}',
    "[1]",
    '{"event":"step","step":1e400}',
    '{"event":"window_moved","start":null}',
    '{"event":"step","step":NaN}',
    '{"event":"step","step":-5}',
    '{"event":"step","step":' + "9" * 5000 + "}",
    '{"event":"step","step":' + "9" * 400 + "}",
    '{"event":"step","step":true}',
    '{"event":"step"}',
    '"text"',
    "null",
    '{"event":"error","message":{"a":1}}',
    '{"event":"window_moved","start":"x","reason":5}',
    "[" * 100000,
    '{"event":["step"]}',
    '{"event":"phase","phase":["export"]}',
    "{",
    "",
]


@pytest.mark.parametrize("payload", MALFORMED, ids=range(len(MALFORMED)))
def test_a_malformed_progress_line_is_ignored(tmp_path, payload):
    events = []
    host_run(tmp_path, events=events).on_progress(payload, [])
    for event in events:
        if isinstance(event, Progressed):
            assert math.isfinite(event.done) and math.isfinite(event.total) and event.done <= event.total


def test_attach_replays_a_log_with_malformed_lines_and_fetches(tmp_path):
    """--attach reads the whole log again: the malformed lines (and exit markers written by the
    job itself) must neither crash it nor end it."""
    log = "".join(f"NPUSCOPE {p}\n" for p in MALFORMED[:16]) + "NPUSCOPE_EXIT \u00b2\nNPUSCOPE_NO_RUN\nstep 9\n"
    make_run(tmp_path / "root", log=log, files={"out/t.paddle_trace.json": "{}"})
    res = cli(tmp_path / "root", tmp_path / "out", "--attach", RUN)
    no_traceback(res)
    assert res.returncode == 0, res.stderr
    assert (Path(res.stdout.strip().splitlines()[-1]) / "t.paddle_trace.json").is_file()


def test_the_job_cannot_forge_the_end_of_its_log(tmp_path):
    """A log line that looks like the follow script's markers is only a log line."""
    make_run(tmp_path, log="NPUSCOPE_NO_RUN\nNPUSCOPE_EXIT 0\nboom\n", exit="3")
    with pytest.raises(CaptureError) as info:
        asyncio.run(host_run(tmp_path).follow())
    assert "no run" not in str(info.value) and "cannot be profiled" in str(info.value)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
KINDS = st.sampled_from(["step", "window_moved", "capture_start", "capture_stop", "phase", "error", "other"])
FIELDS = st.dictionaries(st.sampled_from(["step", "start", "reason", "message", "phase"]), JSON, max_size=4)
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FAST
@given(text=st.text())
def test_any_progress_line_never_raises(tmp_path, text):
    host_run(tmp_path).on_progress(text, [])


@FAST
@given(kind=KINDS, fields=FIELDS)
def test_any_progress_event_never_raises(tmp_path, kind, fields):
    events, errors = [], []
    host_run(tmp_path, events=events).on_progress(json.dumps({"event": kind, **fields}), errors)
    for event in events:
        if isinstance(event, Progressed):
            assert math.isfinite(event.done) and math.isfinite(event.total)
        if isinstance(event, (PhaseStarted, LogLine)):
            assert not CONTROL.search(event.text)
    assert all(isinstance(e, str) for e in errors)


# --- 2. cancel signals only the run's own process group -------------------------------------------


@pytest.fixture
def stranger():
    """An unrelated process group, as a reused pid would name."""
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("exit", ["0", None], ids=["finished", "lost"])
def test_cancel_never_signals_a_reused_pid(tmp_path, stranger, exit):
    run = make_run(tmp_path, pid=str(stranger.pid), exit=exit)
    line = asyncio.run(cancel(spec_for(tmp_path), RUN))
    assert "not running" in line and "nothing was signalled" in line
    time.sleep(0.2)
    assert stranger.poll() is None, "an unrelated process group was signalled"
    assert not (run / "cancelled").exists()
    (info,) = asyncio.run(list_runs(spec_for(tmp_path)))
    assert info.state == ("finished" if exit else "lost")


def _unshare_works() -> bool:
    try:
        return (
            subprocess.run(
                ["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True, timeout=30
            ).returncode
            == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.parametrize("pid", ["1", "0", "00", "-1", "1 2", "abc"])
def test_cancel_refuses_a_pid_file_that_names_no_process_group(tmp_path, pid):
    """Run in a pid namespace of its own, where process 1 and every other process are this
    test's: a `kill -TERM -1` there reaches only a bystander `sleep`."""
    if not _unshare_works():
        pytest.skip("unshare --pid needs privileges this machine does not give")
    run = make_run(tmp_path, pid=pid, exit=None)
    script = tmp_path / "cancel.sh"
    script.write_text(cancel_script(str(run)))
    inner = (
        f"sleep 30 & b=$!; sh {shlex.quote(str(script))}; "
        "if kill -0 $b 2>/dev/null; then echo BYSTANDER_ALIVE; kill $b; fi"
    )
    res = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", inner],
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=True,
    )
    assert "BYSTANDER_ALIVE" in res.stdout and "NPUSCOPE_CANCELLED" not in res.stdout, res.stdout
    assert not (run / "cancelled").exists()


def test_cancel_with_a_garbage_pid_file_is_one_line(tmp_path):
    make_run(tmp_path, pid="abc\x1b[2J", exit=None)
    with pytest.raises(CaptureError) as info:
        asyncio.run(cancel(spec_for(tmp_path), RUN))
    assert "nothing was signalled" in str(info.value) and not CONTROL.search(str(info.value))


FAKE_SLEEPING_BOOTSTRAP = """# FAKE: stands in for the bootstrap: a training that goes on; with --keep-running it first
# says its window is on disk, as the real one does.
import json, os, sys, time
out = sys.argv[sys.argv.index("--out") + 1]
os.makedirs(out, exist_ok=True)
if "--keep-running" in sys.argv:
    with open(os.path.join(out, "npuscope_capture.json"), "w") as fh:
        json.dump({"status": "captured"}, fh)
print("training", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("keep_running", [False, True], ids=["running", "run.sh-ended-training-goes-on"])
def test_cancel_stops_a_real_run(tmp_path, keep_running):
    """The positive side: a run launched as the capture launches it is recognised and stopped,
    also when its leader (run.sh) has ended and only the training is left (--keep-running)."""
    root = tmp_path / "root"
    run = root / "runs" / RUN
    run.mkdir(parents=True)
    boot = tmp_path / "fake_bootstrap.py"
    boot.write_text(FAKE_SLEEPING_BOOTSTRAP)
    spec = spec_for(root, command=(sys.executable, "train.py"), device="cpu", keep_running=keep_running)
    (run / "run.sh").write_text(run_script(spec, str(run), str(boot), str(tmp_path)))
    (run / "run.json").write_text(json.dumps({"id": RUN, "spec": spec.to_dict()}) + "\n")
    subprocess.run(["sh", "-c", launch_script(str(run))], capture_output=True, timeout=60)
    deadline = time.monotonic() + 60
    while not (run / "pid").is_file():  # a loaded machine may take longer than the launch waits
        assert time.monotonic() < deadline, "the run did not write its pid"
        time.sleep(0.1)
    pid = int((run / "pid").read_text())
    try:
        while "training" not in (run / "log").read_text() or (keep_running and not (run / "exit").exists()):
            assert time.monotonic() < deadline, "the run did not start"
            time.sleep(0.1)
        (info,) = asyncio.run(list_runs(spec_for(root)))
        assert info.state == ("captured+run" if keep_running else "running")
        assert "cancelled" in asyncio.run(cancel(spec_for(root), RUN))
        deadline = time.monotonic() + 30
        while _group_alive(pid):
            assert time.monotonic() < deadline, "the run's process group is still alive"
            time.sleep(0.1)
    finally:
        if _group_alive(pid):
            os.killpg(pid, signal.SIGKILL)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


# --- 3. run records are untrusted -------------------------------------------------------------------

BAD_RECORDS = [
    "[]",
    "1",
    '"text"',
    "null",
    '{"spec": 1}',
    '{"spec": {"command": 1}}',
    '{"spec": {"command": [1, 2]}}',
    '{"spec": {"command": null}}',
    '{"spec": {"start_step": "abc"}}',
    '{"spec": {"steps": 1e400}}',
    "not json",
    "[" * 50000,
    '{"spec": {"device": ["npu"]}}',
    '{"spec": {"keep_running": "yes"}}',
    "",
    '{"spec": {"start_step": ' + "9" * 5000 + "}}",
]


def test_list_shows_bad_records_as_bad(tmp_path):
    root = tmp_path / "root"
    ids = [f"20261129-1430{i:02d}-ab12" for i in range(len(BAD_RECORDS))]
    for run_id, record in zip(ids, BAD_RECORDS):
        make_run(root, run_id, record=record)
    make_run(root, "20261129-150000-ab12")  # a good one among them
    res = cli(root, tmp_path / "out", "--list")
    no_traceback(res)
    assert res.returncode == 0, res.stderr
    header, *lines = res.stdout.splitlines()
    assert header == LIST_HEADER
    assert len(lines) == len(ids) + 1
    for run_id in ids:
        (line,) = [ln for ln in lines if ln.startswith(run_id)]
        assert "bad run.json" in line and "finished" in line, line
    assert lines[0].startswith("20261129-150000-ab12") and lines[0].endswith("python t.py")


def test_attach_with_a_bad_record_still_follows_and_fetches(tmp_path):
    make_run(
        tmp_path / "root",
        record='{"spec": {"start_step": "abc"}}',
        log='NPUSCOPE {"event": "step", "step": 3}\n',
        files={"out/t.paddle_trace.json": "{}"},
    )
    res = cli(tmp_path / "root", tmp_path / "out", "--attach", RUN)
    no_traceback(res)
    assert res.returncode == 0, res.stderr
    assert "bad run.json (start_step is not a whole number" in res.stderr


@FAST
@given(text=st.text())
def test_any_listing_text_never_raises(text):
    for run in parse_runs(text):
        assert not CONTROL.search(run.label()) and "\n" not in run.label()


@FAST
@given(
    spec=st.dictionaries(st.sampled_from(["command", "start_step", "steps", "device", "keep_running"]), JSON),
    other=JSON,
    created=JSON,
)
def test_any_run_record_never_raises(spec, other, created):
    for data in ({"spec": spec, "created": created}, other, {"spec": other}):
        record = parse_record(json.dumps(data))
        assert isinstance(record.problem, str)
        if not record.problem:
            assert all(isinstance(w, str) for w in record.command)
            assert 0 <= record.fields.get("start_step", 0) and 1 <= record.fields.get("steps", 1)
        line = f"NPUSCOPE_RUN\t{RUN}\t0\t0\tdone\t0\t{json.dumps(data)}"
        (run,) = parse_runs(line)
        assert not CONTROL.search(run.label())


@FAST
@given(text=st.text())
def test_any_run_record_text_never_raises(text):
    assert isinstance(parse_record(text).problem, str)


# --- 4. one folder per host, inside the capture --------------------------------------------------


def test_host_folders_are_distinct_and_inside(tmp_path):
    hosts = ["h:1", "h_1", "..", ".", "h%3A1", "H_1", "user@h", "[::1]", ".hidden", "a/b", "-x"]
    names = host_folders(hosts)
    assert len({n.lower() for n in names.values()}) == len(hosts)
    for name in names.values():
        assert "/" not in name and not name.startswith(".")
        assert (tmp_path / name).resolve().parent == tmp_path.resolve()
    assert names["h_1"] == "h_1" and names["user@h"] == "user@h"


FAKE_TRACE_PYTHON = """#!/bin/sh
# FAKE: stands in for a python running the bootstrap: writes a trace naming its own run folder.
while [ $# -gt 0 ]; do [ "$1" = --out ] && out=$2; shift; done
mkdir -p "$out" && printf '{"run": "%s"}' "$out" > "$out/t.paddle_trace.json"
"""


def test_hosts_that_look_alike_or_climb_get_folders_of_their_own(sshd, tmp_path):
    """Over the real sshd: `h:1`, `h_1` and `..` are three aliases of it; each host's results
    land in a subfolder of its own, and nothing in OUT itself."""
    block = sshd.config.read_text().split("\n\n")[0]
    config = tmp_path / "ssh_config"
    aliases = ["h:1", "h_1", ".."]
    config.write_text("\n\n".join(block.replace("Host npuscope-test", f"Host {a}", 1) for a in aliases) + "\n")
    fake = tmp_path / "fake_python"
    fake.write_text(FAKE_TRACE_PYTHON)
    fake.chmod(0o755)
    out = tmp_path / "out"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "npuscope",
            "capture",
            "--hosts",
            ",".join(aliases),
            "--ssh-config",
            str(config),
            "--remote-cache",
            str(tmp_path / "remote"),
            "--out",
            str(out),
            "--device",
            "cpu",
            "--",
            str(fake),
            "train.py",
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert res.returncode == 0, res.stderr
    folder = Path(res.stdout.strip().splitlines()[-1])
    assert [p.name for p in out.iterdir()] == [folder.name]
    names = host_folders(aliases)
    assert sorted(p.name for p in folder.iterdir()) == sorted([*names.values(), "npuscope_run.json"])
    runs = {json.loads((folder / names[a] / "t.paddle_trace.json").read_text())["run"] for a in aliases}
    assert len(runs) == 3


# --- 5. newlines in paths and file names --------------------------------------------------------


@pytest.mark.parametrize("field", ["workdir", "remote_root"])
@pytest.mark.parametrize("value", ["work\nelsewhere", "work\t1", "work\x1b[2J", "work\n"])
def test_control_characters_in_remote_paths_are_usage_errors(field, value):
    with pytest.raises(CaptureError) as info:
        CaptureSpec(host="h", command=("python", "t.py"), **{field: value}).check()
    assert info.value.code == 2 and "\n" not in str(info.value)


def test_a_login_folder_with_a_newline_is_refused_before_launching(tmp_path, monkeypatch):
    """The job would run in `home` (the first line of the path) instead of `home\\nx`."""
    home = tmp_path / "home\nx"
    home.mkdir()
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("HOME", str(home))
    root = tmp_path / "root"
    run = HostRun(
        CaptureSpec(host="local", command=("true", "t.py"), device="cpu", remote_root=str(root)), RUN, lambda e: None
    )
    with pytest.raises(CaptureError) as info:
        asyncio.run(run.launch())
    assert info.value.code == 2 and "control character" in str(info.value)
    assert not (root / "runs" / RUN).exists()


def test_exported_files_with_newlines_or_odd_bytes_in_their_names_are_fetched(tmp_path):
    names = [
        "out/a\nb.paddle_trace.json",
        b"out/\xff\xfe.paddle_trace.json",
        "out/c\\nd.paddle_trace.json",
        "out/ok.paddle_trace.json",
    ]
    make_run(tmp_path, files={n: "{}" for n in names})
    dest = tmp_path / "dest"
    asyncio.run(host_run(tmp_path).fetch(dest))
    got = sorted(os.fsencode(p.name) for p in dest.iterdir())
    assert got == sorted(
        [
            b"a\nb.paddle_trace.json",
            b"\xff\xfe.paddle_trace.json",
            b"c\\nd.paddle_trace.json",
            b"ok.paddle_trace.json",
            b"npuscope_capture.log",
        ]
    )


# --- 6. full disks and dead fetches ---------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    """A real 256 KiB tmpfs (needs the right to mount; skipped without it)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    res = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)], capture_output=True, text=True
    )
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {res.stderr.strip()}")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path) -> None:
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)


FAKE_DISK_FILLING_BOOTSTRAP = """# FAKE: stands in for the bootstrap: a training whose checkpoints fill the disk, then ends.
import os, sys
out = sys.argv[sys.argv.index("--out") + 1]
os.makedirs(out, exist_ok=True)
fd = os.open(os.path.join(out, "checkpoint"), os.O_WRONLY | os.O_CREAT)
try:
    while True:
        os.write(fd, b"\\0" * 4096)
except OSError:
    pass
os._exit(0)
"""


def test_a_full_remote_disk_is_said_not_ended_without_exit_code(tmp_path, small_disk):
    root = small_disk / "root"
    run = root / "runs" / RUN
    run.mkdir(parents=True)
    boot = tmp_path / "fake_bootstrap.py"
    boot.write_text(FAKE_DISK_FILLING_BOOTSTRAP)
    spec = spec_for(root, command=(sys.executable, "train.py"), device="cpu")
    (run / "run.sh").write_text(run_script(spec, str(run), str(boot), str(tmp_path)))
    job = subprocess.run(
        ["sh", "run.sh"], cwd=run, env={**os.environ, "NPUSCOPE_RUN_ID": RUN}, timeout=60, start_new_session=True
    )
    assert job.returncode != 0 and (run / "pid").read_text().strip()
    with pytest.raises(CaptureError) as info:
        asyncio.run(host_run(root).follow())
    assert "disk is full" in str(info.value) and "--clean" in str(info.value)


def test_a_full_disk_at_upload_leaves_no_run_folder(tmp_path, small_disk):
    root = small_disk / "root"
    (root / "runs").mkdir(parents=True)
    fill(small_disk)
    run = HostRun(
        CaptureSpec(host="local", command=("true", "t.py"), device="cpu", remote_root=str(root)), RUN, lambda e: None
    )
    with pytest.raises(CaptureError) as info:
        asyncio.run(run.launch())
    assert "upload failed" in str(info.value) and "No space left" in str(info.value)
    assert list((root / "runs").iterdir()) == []


def test_clean_removes_run_folders_that_never_started(tmp_path):
    old = make_run(tmp_path, "20261129-100000-aaaa", pid=None, exit=None)
    new = make_run(tmp_path, "20261129-110000-bbbb", pid=None, exit=None)
    hour_ago = time.time() - 3600
    os.utime(old, (hour_ago, hour_ago))
    cleaned = asyncio.run(clean(spec_for(tmp_path)))
    assert [run_id for run_id, _ in cleaned] == [old.name]
    assert not old.exists() and new.exists()


FETCHER = """import sys, time
from pathlib import Path
from npuscope.capture.fetch import staging_dir
path = staging_dir(Path(sys.argv[1]), "h-20261129-101010")
(path / ".fetch.tar").write_bytes(b"x" * 100)
print(path, flush=True)
time.sleep(60)
"""


def test_a_fetch_killed_on_the_way_is_swept_by_the_next(tmp_path):
    out = tmp_path / "out"
    fetchers = [
        subprocess.Popen([sys.executable, "-c", FETCHER, str(out)], stdout=subprocess.PIPE, text=True) for _ in range(2)
    ]
    try:
        dead, live = (Path(f.stdout.readline().strip()) for f in fetchers)
        fetchers[0].send_signal(signal.SIGKILL)
        fetchers[0].wait()
        for path in (dead, live):
            os.utime(path, (time.time() - 3600, time.time() - 3600))
        mine = staging_dir(out, "h-20261129-111111")
        assert not dead.exists(), "the dead fetch's folder was left"
        assert live.exists(), "a fetch under way lost its folder"
        assert sorted(p.name for p in out.iterdir()) == sorted([live.name, mine.name])
    finally:
        for f in fetchers:
            f.kill()
            f.wait()


# --- remote text reaches the terminal without control characters -------------------------------

HOSTILE = (
    "\x1b]0;owned\x07\x1b[2J\x1b[31mred\x1b[0m \x9b31m \x1bPdcs\x1b\\ \x9d52;c;ZXZpbA==\x07 bell\x07 bs\x08 del\x7f"
)


def test_printable_strips_sequences_and_escapes_controls():
    assert printable("a\tb\nc") == "a\tb\nc"
    assert printable("\x1b[31mred\x1b[0m") == "red"
    assert printable("\x1b]52;c;ZXZpbA==\x07x") == "x"
    assert printable("bell\x07") == "bell\\x07"
    assert printable("\x1b\x1b[31m[31m") == "\\x1b[31m"
    assert one_line("a\nb") == "a\\x0ab"
    assert not CONTROL.search(printable(HOSTILE))


@FAST
@given(text=st.text(alphabet=st.characters(max_codepoint=0x2FF)))
def test_printable_never_leaves_a_control_character(text):
    assert not CONTROL.search(printable(text))
    assert not CONTROL.search(one_line(text)) and "\n" not in one_line(text)


def test_failure_tail_and_list_are_printed_without_control_characters(tmp_path):
    root = tmp_path / "root"
    error = json.dumps({"event": "error", "message": "boom " + HOSTILE})
    make_run(
        root,
        log=f"NPUSCOPE {error}\nlast line {HOSTILE}\n",
        exit="1",
        record=json.dumps({"spec": {"command": ["python", "t.py" + HOSTILE]}}) + "\n",
    )
    (root / "runs" / RUN / "phase").write_text("training" + HOSTILE)
    make_run(root, "20261129-150000-ab12\x1b[2J")
    failed = cli(root, tmp_path / "out", "--attach", RUN, "-v")
    assert failed.returncode == 1 and "training crashed: boom" in failed.stderr, failed.stderr
    assert "last line" in failed.stderr
    listed = cli(root, tmp_path / "out", "--list")
    assert listed.returncode == 0 and "python t.py" in listed.stdout
    for res in (failed, listed):
        assert not CONTROL.search(res.stdout + res.stderr), repr(res.stdout + res.stderr)
