"""Fetch faults against the real test OpenSSH server (tests/sshd_server.py): the connection cut
in the middle of a fetch, the local disk full during a fetch, a host whose clock is hours off.

Each fault must end in one line (exit 1, no traceback), leave nothing of the fetch in OUT, and
leave the run fetchable: a second `--attach` fetches it whole.

Real components: the ssh client, sshd (its session process killed with SIGKILL), GNU tar on the
host and tarfile here, a real tmpfs for the full disk (skipped where it cannot be mounted), the
real `npuscope capture` command line. The stand-ins, named so: THROTTLE_TAR, the host's real tar
with its output slowed to a trickle (put first on the PATH of one sshd's sessions), so that a
fetch is still under way when its connection is cut; FAKE_TRACE_PYTHON, a python that writes a
trace (as in test_capture_hardening); OTHER_FETCH, a process holding a fetch's temporary folder
as a fetch under way does; libfaketime (Debian: faketime), preloaded into one sshd's sessions,
for a host whose processes live hours away from the clock that stamps its files. This module's
sshds give their sessions an empty HOME (see `plain_sshd`).
"""

from __future__ import annotations

import asyncio
import glob
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sshd_server import HOST, start_sshd

from npuscope.capture.run_record import RUN_RECORD
from npuscope.capture.runs import upload_script
from npuscope.capture.transport import SshTransport, ssh_problem
from npuscope.capture.upload import files_tar

# An OpenSSH server (and with it ssh and tar): `-m 'not slow'` leaves those tests out of a quick run.
slow = pytest.mark.slow

RUN = "20261129-143000-ab12"
TIMEOUT = 120  # a loaded 2-core machine: generous, never asserted on
STD_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"


def make_run(root: Path, files: dict[str, bytes], run_id: str = RUN) -> Path:
    """A run folder as run.sh leaves it after a good capture; the pid names no process."""
    run = root / "runs" / run_id
    run.mkdir(parents=True)
    (run / "log").write_text("step 1\nnpuscope: done\n")
    (run / "exit").write_text("0\n")
    (run / "pid").write_text("999999999\n")
    (run / "phase").write_text("done\n")
    (run / "run.json").write_text(json.dumps({"id": run_id, "spec": {"command": ["python", "t.py"]}}) + "\n")
    for name, data in files.items():
        path = run / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return run


def results(size: int) -> dict[str, bytes]:
    """Exported results of about `size` bytes (random: nothing on the way can shrink them), and
    a raw data file that must never travel."""
    rng = random.Random(size)
    return {
        "out/t.paddle_trace.json": rng.randbytes(size),
        "out/PROF_1/mindstudio_profiler_output/op_summary_0.csv": b"Op Name,Task Duration(us)\nMatMul,13.7\n",
        "out/PROF_1/device_0/data/raw.data.0": b"\0" * 4096,
    }


def cli_argv(server, remote: Path, out: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "npuscope",
        "capture",
        "--host",
        HOST,
        "--ssh-config",
        str(server.config),
        "--remote-cache",
        str(remote),
        "--out",
        str(out),
        *args,
    ]


def cli(server, remote: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(cli_argv(server, remote, out, *args), capture_output=True, text=True, timeout=TIMEOUT)


def one_error(res: subprocess.CompletedProcess) -> str:
    """The failure as the user sees it: exit 1, no traceback, exactly one error line."""
    assert "Traceback" not in res.stderr, res.stderr
    assert res.returncode == 1, res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("npuscope capture:")]
    assert len(errors) == 1, res.stderr
    return errors[0]


def assert_fetched_whole(res: subprocess.CompletedProcess, run: Path, out: Path) -> None:
    """The fetch succeeded into a new folder of `out`, the only thing there, holding exactly the
    run's exported results with the host's bytes."""
    assert res.returncode == 0, res.stderr
    folder = Path(res.stdout.strip().splitlines()[-1])
    assert folder.parent == out and folder.name.startswith(f"{HOST}-20261129-143000")
    assert [p.name for p in out.iterdir()] == [folder.name]
    got = {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    want = {
        str(p.relative_to(run / "out")): p.read_bytes()
        for p in (run / "out").rglob("*")
        if p.is_file() and "/data/" not in str(p)
    }
    want["npuscope_capture.log"] = (run / "log").read_bytes()
    assert json.loads(got.pop(RUN_RECORD))["schema"] == "npuscope.run/1"  # how it was captured
    assert sorted(got) == sorted(want)
    assert all(got[name] == want[name] for name in want), "a fetched file differs from the host's"
    assert (run / "fetched").read_text().strip() == str(folder)


def plain_sshd(tmp_path_factory, name: str, **env: str):
    """An sshd of this module's own whose sessions get `env` and a plain empty HOME: a login
    whose ~/.bashrc runs `pyenv init` (this machine's root) costs each connection ~1 s, and a
    fetch test opens a dozen."""
    folder = tmp_path_factory.mktemp(name)
    (folder / "home").mkdir()
    env = {"HOME": str(folder / "home"), "PATH": STD_PATH, **env}
    return folder, start_sshd(folder / "sshd", "SetEnv " + " ".join(f"{k}={v}" for k, v in env.items()) + "\n")


def wait_for(predicate, what: str, timeout: float = TIMEOUT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def started(pid: int) -> str | None:
    """A process's start time (None once it has gone): tells it from a later one with its pid."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


# --- 1. the connection cut in the middle of a fetch --------------------------------------------------

THROTTLE_TAR = """#!/bin/sh
# THROTTLE_TAR: the host's real tar; while {flag} exists its output goes out in 16 KiB pieces
# every 0.1 s (a slow link), so a fetch is still under way when the test cuts its connection.
if [ -e {flag} ]; then
  {tar} "$@" | {python} -c '
import sys, time
while True:
    piece = sys.stdin.buffer.read1(16384)
    if not piece:
        break
    sys.stdout.buffer.write(piece)
    sys.stdout.buffer.flush()
    time.sleep(0.1)
'
else
  exec {tar} "$@"
fi
"""


@pytest.fixture(scope="module")
def fault_sshd(tmp_path_factory):
    """An sshd whose sessions find THROTTLE_TAR first on their PATH; it throttles while the
    file `server.throttle` exists, and is the plain tar otherwise."""
    tar = shutil.which("tar")
    assert tar, "no tar on this machine"
    base = tmp_path_factory.mktemp("throttle")
    (base / "bin").mkdir()
    (base / "bin" / "tar").write_text(THROTTLE_TAR.format(flag=base / "throttle", tar=tar, python=sys.executable))
    (base / "bin" / "tar").chmod(0o755)
    _, server = plain_sshd(tmp_path_factory, "sshd-faults", PATH=f"{base / 'bin'}:{STD_PATH}")
    server.throttle = base / "throttle"
    yield server
    server.stop()


OTHER_FETCH = """import sys, time
from pathlib import Path
from npuscope.capture.fetch import staging_dir
path = staging_dir(Path(sys.argv[1]), "other-20261129-101010")
(path / "part").write_bytes(b"x" * 100)
print(path, flush=True)
time.sleep(120)
"""


@slow
def test_a_connection_cut_mid_fetch_is_one_line_leaves_nothing_and_the_run_fetches_again(fault_sshd, tmp_path):
    """Another fetch writes into the same OUT meanwhile (its folder made to look old): the cut
    fetch removes its own folder only; once that other fetch has died, the next one sweeps it."""
    server = fault_sshd
    remote, out = tmp_path / "remote", tmp_path / "captures"
    run = make_run(remote, results(4 << 20))  # 4 MiB: 25 s at the trickle's pace, cut long before
    other = subprocess.Popen([sys.executable, "-c", OTHER_FETCH, str(out)], stdout=subprocess.PIPE, text=True)
    client = None
    served: list[tuple[int, str | None]] = []
    try:
        others = Path(other.stdout.readline().strip())
        os.utime(others, (time.time() - 3600, time.time() - 3600))
        server.throttle.touch()
        client = subprocess.Popen(
            cli_argv(server, remote, out, "--attach", RUN), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

        def fetch_under_way() -> bool:
            return any(os.path.getsize(p) > 0 for p in glob.glob(f"{out}/.*.partial-*/.fetch.tar"))

        wait_for(fetch_under_way, "the first bytes of the fetch")
        served = [(pid, started(pid)) for pid in server.served_pids()]
        assert server.kill_sessions(), "no sshd session process to kill"
        stdout, stderr = client.communicate(timeout=TIMEOUT)
        line = one_error(subprocess.CompletedProcess(client.args, client.returncode, stdout, stderr))
        assert "the connection was lost" in line and "closed by remote host" in line, line
        assert f"--attach {RUN}`" in line and "nothing was kept locally" in line, line
        assert [p.name for p in out.iterdir()] == [others.name], "the fetch left something in OUT, or took another's"
        assert (others / "part").is_file()
        assert not (run / "fetched").exists()
        # the host's tar and its pipe end with their connection (they write into nothing)
        wait_for(lambda: all(started(pid) != start for pid, start in served), "the cut session's processes to end")
    finally:
        server.throttle.unlink(missing_ok=True)
        for proc in (client, other):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.communicate()
        for pid, start in served:
            if start is not None and started(pid) == start:
                os.kill(pid, signal.SIGKILL)
    assert_fetched_whole(cli(server, remote, out, "--attach", RUN), run, out)


@pytest.mark.parametrize(
    "stderr",
    [
        "Connection to 10.0.0.5 closed by remote host.",
        "Timeout, server 10.0.0.5 not responding.",
        "client_loop: send disconnect: Broken pipe",
        "Read from remote host 10.0.0.5: Connection reset by peer",
    ],
)
def test_a_connection_lost_on_the_way_reads_as_lost(stderr):
    """What OpenSSH prints when an established connection goes (the first case is the one the
    test above produces with the real sshd)."""
    message = ssh_problem("h", ["Warning: something else", stderr])
    assert message == f"h: the connection was lost ({stderr.rstrip('.')})"


# --- 2. the local disk full during a fetch -----------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    """A real 2 MiB tmpfs (needs the right to mount; skipped without it), unmounted after."""
    disk = tmp_path / "disk"
    disk.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): {res.stderr.strip()}")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


@slow
@pytest.mark.parametrize("size", [3 << 20, 1300 << 10], ids=["while-the-archive-comes", "while-unpacking"])
def test_a_full_local_disk_is_one_line_leaves_nothing_and_the_run_fetches_elsewhere(
    fault_sshd, tmp_path, small_disk, size
):
    """3 MiB of results do not fit on the 2 MiB disk; 1.3 MiB do, as the fetched archive, but
    not twice (the archive and its unpacked files)."""
    remote, out = tmp_path / "remote", small_disk / "captures"
    run = make_run(remote, results(size))
    line = one_error(cli(fault_sshd, remote, out, "--attach", RUN))
    assert "the local disk is full (No space left on device; the fetch needs about" in line, line
    assert line.startswith(f"npuscope capture: {out}: "), line
    assert f"--attach {RUN}`" in line, line
    assert [p.name for p in small_disk.iterdir()] == ["captures"] and list(out.iterdir()) == [], (
        "the fetch left something on the full disk"
    )
    assert not (run / "fetched").exists()
    elsewhere = tmp_path / "elsewhere"
    assert_fetched_whole(cli(fault_sshd, remote, elsewhere, "--attach", RUN), run, elsewhere)


# --- 3. a host whose clock is hours off ------------------------------------------------------------

FAKE_TRACE_PYTHON = """#!/bin/sh
# FAKE: stands in for a python running the bootstrap: writes a trace naming its own run folder.
while [ $# -gt 0 ]; do [ "$1" = --out ] && out=$2; shift; done
mkdir -p "$out" && printf '{"run": "%s"}' "$out" > "$out/t.paddle_trace.json"
"""


@pytest.fixture(scope="module")
def skewed_sshd(tmp_path_factory):
    """An sshd whose sessions run under libfaketime: their clock (`date`, find, tar, python) is
    the offset written to `server.offset` away from this machine's, and from the client's; the
    kernel still stamps the files they write (as an NFS server whose clock differs does), and
    they read those stamps as they are (NO_FAKE_STAT)."""
    libs = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1") + glob.glob("/usr/lib/faketime/libfaketime.so.1"))
    if not libs:
        pytest.skip("libfaketime is not installed (Debian: apt-get install faketime)")
    offset = tmp_path_factory.mktemp("faketime") / "offset"
    offset.write_text("+0\n")
    _, server = plain_sshd(
        tmp_path_factory, "sshd-skewed", LD_PRELOAD=libs[0], FAKETIME_TIMESTAMP_FILE=str(offset), NO_FAKE_STAT="1"
    )
    server.offset = offset
    yield server
    server.stop()


@slow
@pytest.mark.parametrize("hours", [3, -3], ids=["host-3h-ahead", "host-3h-behind"])
def test_a_host_clock_hours_off_breaks_neither_capture_nor_clean(skewed_sshd, tmp_path, hours):
    server = skewed_sshd
    server.offset.write_text(f"{hours:+d}h\n")
    remote, out = tmp_path / "remote", tmp_path / "captures"
    transport = SshTransport(HOST, ssh_config=str(server.config))
    host_now = int(asyncio.run(transport.run("date +%s")).text.strip())
    assert abs(host_now - time.time() - hours * 3600) < 1800, "the host's clock is not off: libfaketime not working"
    fake = tmp_path / "fake_python"
    fake.write_text(FAKE_TRACE_PYTHON)
    fake.chmod(0o755)

    # a whole capture: run id and folder name by the client's clock, phases and fetch by the host's
    before = time.strftime("%Y%m%d-%H%M%S")
    res = cli(server, remote, out, "--device", "cpu", "--", str(fake), "train.py")
    after = time.strftime("%Y%m%d-%H%M%S")
    assert res.returncode == 0, res.stderr
    folder = Path(res.stdout.strip().splitlines()[-1])
    (captured,) = (remote / "runs").iterdir()
    assert before <= captured.name[:15] <= after and folder.name == f"{HOST}-{captured.name[:15]}"
    trace = json.loads((folder / "t.paddle_trace.json").read_text())
    assert trace["run"] == str(captured / "out")
    listed = cli(server, remote, out, "--list")
    header, first = listed.stdout.splitlines()[:2]
    assert listed.returncode == 0 and header.startswith("run") and first.startswith(f"{captured.name}  fetched"), (
        listed.stdout
    )

    # a run whose results were stamped hours in the future and in the past: fetched whole into
    # the same OUT, the times kept, the first capture untouched
    run = make_run(remote, results(64 << 10))
    stamps = {
        "out/t.paddle_trace.json": time.time() + 5 * 3600,
        "out/PROF_1/mindstudio_profiler_output/op_summary_0.csv": time.time() - 5 * 3600,
    }
    for name, stamp in stamps.items():
        os.utime(run / name, (stamp, stamp))
    res = cli(server, remote, out, "--attach", RUN)
    assert res.returncode == 0, res.stderr
    second = Path(res.stdout.strip().splitlines()[-1])
    assert sorted(p.name for p in out.iterdir()) == sorted([folder.name, second.name])
    for name, stamp in stamps.items():
        assert int((second / name.removeprefix("out/")).stat().st_mtime) == int(stamp)
    assert json.loads((folder / "t.paddle_trace.json").read_text()) == trace

    # --clean: a run being started (uploaded a moment ago, no pid yet) is kept; one that never
    # started and whose folder is an hour old is deleted, as is the fetched capture
    starting, abandoned = "20261129-150000-aaaa", "20261129-140000-bbbb"
    upload = files_tar({f"runs/{starting}/run.sh": "true\n", f"runs/{starting}/run.json": "{}\n"})
    assert asyncio.run(transport.run(upload_script(str(remote), starting), stdin=upload)).code == 0
    (remote / "runs" / abandoned).mkdir()
    hour_ago = time.time() - 3600  # by the clock that stamps the host's files
    os.utime(remote / "runs" / abandoned, (hour_ago, hour_ago))
    cleaned = cli(server, remote, out, "--clean")
    assert cleaned.returncode == 0, cleaned.stderr
    assert sorted(p.name for p in (remote / "runs").iterdir()) == [starting], cleaned.stderr
    assert "deleted 3 run(s)" in cleaned.stderr, cleaned.stderr
