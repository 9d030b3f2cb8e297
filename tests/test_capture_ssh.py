"""`npuscope capture` against a real OpenSSH server on 127.0.0.1 (tests/sshd_server.py).

Real components: the system ssh client, a real sshd with throwaway keys, real Paddle CPU
trainings (fixtures/paddle_train_tiny.py) run by the real bootstrap, real tar. The one fake is
the NPU side, which cannot exist here: `fake_npu_python` stands in for a Paddle process on an
NPU (it writes a raw PROF_* folder) and `fake_msprof` for CANN's msprof (it "exports" a real
sample). Both are named as fakes and used only in the export tests.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# Found without importing it: importing Paddle costs each test worker ~1 s at collection.
if importlib.util.find_spec("paddle") is None:
    pytest.skip("could not import 'paddle': No module named 'paddle'", allow_module_level=True)
# Real components (Paddle training, sshd, tmux): `-m 'not slow'` leaves them out of a quick run.
pytestmark = pytest.mark.slow

from sshd_server import HOST, NOKEY, UNKNOWN  # noqa: E402

from npuscope.parsers import open_profile  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "fixtures" / "paddle_train_tiny.py"
GOLDEN = ROOT / "fixtures" / "samples" / "msprof_golden" / "mindstudio_profiler_output"
TIMEOUT = 240  # a loaded 2-core machine: generous, never asserted on

FAKE_NPU_PYTHON = f"""#!{sys.executable}
# FAKE: stands in for a Paddle process on an Ascend NPU (none exists on this machine).
# Called as `fake_npu_python BOOTSTRAP --device npu ... --out OUT -- SCRIPT`; writes what the NPU
# plugin would: a raw PROF_* folder (device and host data, not exported), plus the manifest.
import json, os, sys
argv = sys.argv[2:]
out = argv[argv.index("--out") + 1]
script = argv[argv.index("--") + 1]
os.makedirs(out, exist_ok=True)
print('NPUSCOPE ' + json.dumps({{"event": "capture_start", "step": 100}}), flush=True)
print('NPUSCOPE ' + json.dumps({{"event": "capture_stop", "step": 101}}), flush=True)
if script != "no-prof":
    prof = os.path.join(out, "ascend_profiling", "PROF_000001_20261129000000000_FAKE")
    for sub in ("device_0/data", "host/data"):
        os.makedirs(os.path.join(prof, sub), exist_ok=True)
        with open(os.path.join(prof, sub, "raw.data.0"), "wb") as fh:
            fh.write(b"\\0" * 4096)
with open(os.path.join(out, "npuscope_capture.json"), "w") as fh:
    json.dump({{"format": "npuscope-capture/1", "status": "ok", "device": "npu"}}, fh)
"""

FAKE_MSPROF = f"""#!/bin/sh
# FAKE: stands in for CANN's msprof (not installable here). `--export=on --output=P` "exports"
# a real msprof sample into P/mindstudio_profiler_output.
for a in "$@"; do case "$a" in --output=*) P="${{a#--output=}}";; esac; done
mkdir -p "$P/mindstudio_profiler_output" && cp {GOLDEN}/* "$P/mindstudio_profiler_output/"
echo "fake msprof: exported $P"
"""

FAILING = """import paddle
print("about to fail", flush=True)
raise ValueError("boom in the training script")
"""

ENV_ECHO = """import json, os, sys
print("ENV=" + json.dumps(os.environ.get("NPUSCOPE_T")), flush=True)
print("CWD=" + json.dumps(os.getcwd()), flush=True)
sys.exit(5)
"""


@pytest.fixture
def remote(tmp_path):
    return tmp_path / "remote cache"  # a space on purpose: every path is quoted


def cli_argv(sshd, remote: Path, out: Path, *args: str, host: str | None = HOST) -> list[str]:
    where = ["--host", host] if host else []
    return [
        sys.executable,
        "-m",
        "npuscope",
        "capture",
        *where,
        "--ssh-config",
        str(sshd.config),
        "--remote-cache",
        str(remote),
        "--out",
        str(out),
        *args,
    ]


def cli(sshd, remote: Path, out: Path, *args: str, host: str = HOST, timeout: int = TIMEOUT):
    argv = cli_argv(sshd, remote, out, *args, host=host)
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=out.parent)


def start_client(sshd, remote: Path, out: Path, sleep_ms: int, started: str, **popen):
    """A capture client left running in the background; returns it with the run and its pid
    once the job's log shows `started`."""
    argv = cli_argv(sshd, remote, out, "--device", "cpu", "--start-step", "100", *tiny("--sleep-ms", str(sleep_ms)))
    before = set(run_dirs(remote))
    client = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)
    try:
        run = wait_for(lambda: next((r for r in run_dirs(remote) if r not in before), None), "the run folder")
        pid = int(wait_for(lambda: (run / "pid").is_file() and (run / "pid").read_text().strip(), "the pid"))
        log = run / "log"  # written by run.sh once it runs: the pid may come first
        wait_for(lambda: log.is_file() and started in log.read_text(), f"{started!r} in the log")
    except BaseException:
        client.kill()
        client.communicate()
        raise
    return client, run, pid


def tiny(*extra: str) -> list[str]:
    return ["--", sys.executable, str(TINY), "--steps", "120", "--batch-size", "8", *extra]


def run_dirs(remote: Path) -> list[Path]:
    return sorted((remote / "runs").iterdir()) if (remote / "runs").is_dir() else []


def wait_for(predicate, what: str, timeout: float = TIMEOUT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


# --- a real Paddle CPU capture over SSH ---------------------------------------------------------


@pytest.fixture(scope="module")
def window_capture(sshd, tmp_path_factory):
    """One real capture of steps 100-101 over SSH, read by the tests that need a finished one
    (they never write into its folders): its result, remote cache and output folder."""
    base = tmp_path_factory.mktemp("window")
    remote, out = base / "remote cache", base / "captures"
    with pytest.MonkeyPatch.context() as mp:  # set up before the per-test private cache is
        mp.setenv("NPUSCOPE_CACHE_DIR", str(base / "cache"))
        res = cli(sshd, remote, out, "--device", "cpu", "--start-step", "100", "--steps", "1", *tiny())
    yield res, remote, out
    shutil.rmtree(remote, ignore_errors=True)


def test_capture_window_100_101_over_ssh_opens_with_operator_events(sshd, window_capture):
    res, remote, out = window_capture
    assert res.returncode == 0, res.stderr
    folder = Path(res.stdout.strip().splitlines()[-1])
    assert folder.parent == out and folder.name.startswith(f"{HOST}-")
    for phase in ("connect:", "upload:", "launch:", "warm-up:", "capture: profiling step 100", "fetch:"):
        assert phase in res.stderr, phase
    assert f"fetched into {folder}" in res.stderr  # the last phase names the folder
    traces = list(folder.glob("*.paddle_trace.json"))
    assert len(traces) == 1
    manifest = json.loads((folder / "npuscope_capture.json").read_text())
    assert manifest["status"] == "ok" and manifest["window"]["start"] == 100 and manifest["window"]["stop"] == 101
    assert "step   80" in (folder / "npuscope_capture.log").read_text()
    profile = open_profile(folder)
    assert profile.events is not None and profile.events.height > 0
    names = set(profile.events["name"].to_list())
    assert any("matmul" in n.lower() for n in names), sorted(names)[:20]
    # nothing else was left beside the capture, and the run on the host says it was fetched
    assert sorted(p.name for p in out.iterdir()) == [folder.name]
    (run,) = run_dirs(remote)
    assert (run / "exit").read_text().strip() == "0"
    assert (run / "fetched").read_text().strip() == str(folder)
    listed = cli(sshd, remote, out, "--list")
    assert listed.returncode == 0 and run.name in listed.stdout and "fetched" in listed.stdout


def test_client_killed_mid_run_then_reattach_fetches(sshd, remote, tmp_path):
    out = tmp_path / "captures"
    out.mkdir()
    client, run, pid = start_client(sshd, remote, out, 40, "step   20", start_new_session=True)
    os.killpg(client.pid, signal.SIGKILL)  # the client and its ssh, as a lost connection
    client.communicate()
    assert not (run / "exit").exists(), "the job should still be running"
    assert group_alive(pid)
    listed = cli(sshd, remote, out, "--list")
    assert listed.returncode == 0 and f"{run.name}  running" in listed.stdout, listed.stdout
    res = cli(sshd, remote, out, "--attach", run.name)
    assert res.returncode == 0, res.stderr
    folder = Path(res.stdout.strip().splitlines()[-1])
    assert list(folder.glob("*.paddle_trace.json"))
    assert (run / "exit").read_text().strip() == "0"
    assert open_profile(folder).events.height > 0


def test_cancel_stops_the_remote_process_group(sshd, remote, tmp_path):
    out = tmp_path / "captures"
    out.mkdir()
    client, run, pid = start_client(sshd, remote, out, 500, "step    0")
    res = cli(sshd, remote, out, "--cancel", run.name)
    assert res.returncode == 0 and "cancelled" in res.stderr, res.stderr
    wait_for(lambda: not group_alive(pid), "the process group to end", timeout=30)
    stdout, stderr = client.communicate(timeout=TIMEOUT)
    assert client.returncode == 1
    assert "the job was stopped" in stderr
    assert stdout == ""  # no folder printed: nothing fetched
    assert list(out.iterdir()) == []
    again = cli(sshd, remote, out, "--cancel", run.name)
    assert again.returncode == 0 and "not running" in again.stderr


# --- errors: one line, the log tail, nothing left behind -----------------------------------------


def test_unknown_host_key_is_refused(sshd, remote, tmp_path):
    out = tmp_path / "captures"
    out.mkdir()
    res = cli(sshd, remote, out, "--device", "cpu", *tiny(), host=UNKNOWN)
    assert res.returncode == 1
    assert "host key refused" in res.stderr and "--accept-new-host-key" in res.stderr
    assert "Traceback" not in res.stderr
    assert (sshd.folder / "known_hosts_empty").read_text() == ""
    assert not remote.exists() and list(out.iterdir()) == []


def test_accept_new_host_key_records_it_then_checks_it(sshd, remote, tmp_path):
    config = tmp_path / "ssh_config"
    known = tmp_path / "known_hosts"
    known.write_text("")
    text = sshd.config.read_text().replace(str(sshd.folder / "known_hosts_empty"), str(known))
    config.write_text(text)
    out = tmp_path / "captures"
    out.mkdir()
    base = [
        sys.executable,
        "-m",
        "npuscope",
        "capture",
        "--host",
        UNKNOWN,
        "--ssh-config",
        str(config),
        "--remote-cache",
        str(remote),
        "--list",
    ]
    refused = subprocess.run(base, capture_output=True, text=True, timeout=TIMEOUT)
    assert refused.returncode == 1 and "host key refused" in refused.stderr
    accepted = subprocess.run([*base, "--accept-new-host-key"], capture_output=True, text=True, timeout=TIMEOUT)
    assert accepted.returncode == 0, accepted.stderr
    assert "127.0.0.1" in known.read_text()
    # a changed key is never accepted, even with the flag
    other = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")], check=True)
    assert other.returncode == 0
    host, _ = known.read_text().split(" ", 1)
    known.write_text(
        f"{host} {(tmp_path / 'k.pub').read_text().split()[0]} {(tmp_path / 'k.pub').read_text().split()[1]}\n"
    )
    changed = subprocess.run([*base, "--accept-new-host-key"], capture_output=True, text=True, timeout=TIMEOUT)
    assert changed.returncode == 1 and "host key refused" in changed.stderr and "CHANGED" in changed.stderr


def test_authentication_failure_is_one_line(sshd, remote, tmp_path):
    out = tmp_path / "captures"
    out.mkdir()
    res = cli(sshd, remote, out, "--device", "cpu", *tiny(), host=NOKEY)
    assert res.returncode == 1
    assert res.stderr.strip().splitlines()[-1].startswith("npuscope capture: npuscope-nokey: authentication failed")
    assert list(out.iterdir()) == []


def test_failing_training_shows_reason_and_log_tail(sshd, remote, tmp_path):
    script = tmp_path / "failing.py"
    script.write_text(FAILING)
    out = tmp_path / "captures"
    res = cli(sshd, remote, out, "--device", "cpu", "--", sys.executable, str(script))
    assert res.returncode == 1
    assert "training crashed: ValueError: boom in the training script" in res.stderr
    tail = res.stderr.split("last lines of the job's log:", 1)[1]
    assert "about to fail" in tail or "Traceback" in tail
    assert "ValueError: boom in the training script" in tail
    assert not out.exists() or list(out.iterdir()) == []


@pytest.mark.parametrize(
    "args, message",
    [
        (["--device", "cpu", "--", "no-such-python3", "train.py"], "command not found: no-such-python3"),
        (["--device", "npu", *tiny()], "no NPU custom device"),  # a real Paddle without the NPU plugin
    ],
)
def test_job_that_cannot_run_says_why(sshd, remote, tmp_path, args, message):
    out = tmp_path / "captures"
    out.mkdir()
    res = cli(sshd, remote, out, *args)
    assert res.returncode == 1
    assert message in res.stderr
    assert list(out.iterdir()) == []


def test_user_text_reaches_the_job_verbatim(sshd, remote, tmp_path):
    """Workdir, env values and arguments with spaces, quotes and $(...) are never run by a shell."""
    work = tmp_path / "work dir 'x' $(touch PWNED)"
    work.mkdir()
    (work / "echo env.py").write_text(ENV_ECHO)
    value = 'a b\'c "d" $(touch PWNED) `touch PWNED` ; touch PWNED'
    out = tmp_path / "captures"
    out.mkdir()
    res = cli(
        sshd,
        remote,
        out,
        "--device",
        "cpu",
        "--workdir",
        str(work),
        "--env",
        f"NPUSCOPE_T={value}",
        "--",
        sys.executable,
        "echo env.py",
    )
    assert res.returncode == 1  # the script exits 5 on purpose
    assert "ENV=" + json.dumps(value) in res.stderr
    assert "CWD=" + json.dumps(str(work)) in res.stderr
    assert not list(tmp_path.rglob("PWNED")) and not list(Path.home().glob("PWNED"))


# --- npu export and fetch: fake NPU process and fake msprof (neither can exist here) -------------


@pytest.fixture
def fakes(tmp_path):
    folder = tmp_path / "fakes"
    folder.mkdir()
    py = folder / "fake_npu_python"
    py.write_text(FAKE_NPU_PYTHON)
    msprof = folder / "fake_msprof"
    msprof.write_text(FAKE_MSPROF)
    for f in (py, msprof):
        f.chmod(0o755)
    return py, msprof


def test_npu_run_is_exported_with_msprof_and_only_exported_files_are_fetched(sshd, remote, tmp_path, fakes):
    py, msprof = fakes
    out = tmp_path / "captures"
    res = cli(sshd, remote, out, "--device", "npu", "--msprof", str(msprof), "--", str(py), "train.py")
    assert res.returncode == 0, res.stderr
    assert "export: msprof --export=on" in res.stderr
    folder = Path(res.stdout.strip().splitlines()[-1])
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    prof = "ascend_profiling/PROF_000001_20261129000000000_FAKE"
    assert f"{prof}/mindstudio_profiler_output/op_summary_20240605100000.csv" in files
    assert not [f for f in files if "/data/" in f], files  # raw data never travels
    (run,) = run_dirs(remote)
    assert (run / "out" / prof / "device_0" / "data" / "raw.data.0").exists()
    profile = open_profile(folder)
    assert profile.tasks.height > 0


def test_msprof_missing_and_no_prof_folder(sshd, remote, tmp_path, fakes):
    py, msprof = fakes
    out = tmp_path / "captures"
    out.mkdir()
    missing = cli(
        sshd,
        remote,
        out,
        "--device",
        "npu",
        "--msprof",
        str(tmp_path / "nowhere" / "msprof"),
        "--",
        str(py),
        "train.py",
    )
    assert missing.returncode == 1 and "msprof not found" in missing.stderr
    none = cli(sshd, remote, out, "--device", "npu", "--msprof", str(msprof), "--", str(py), "no-prof")
    assert none.returncode == 1 and "no PROF folder produced" in none.stderr
    assert list(out.iterdir()) == []


def test_bad_arguments_exit_2_without_connecting(sshd, remote, tmp_path):
    out = tmp_path / "captures"
    out.mkdir()
    for args in (
        ["--env", "1BAD=x", *tiny()],
        ["--steps", "0", *tiny()],
        [],
        ["--", sys.executable],
        ["--out", "/proc/npuscope-nope/captures", *tiny()],
        ["--attach", "../.."],
    ):
        res = cli(sshd, remote, out, *args)
        assert res.returncode == 2, (args, res.stderr)
        assert res.stderr.strip() and "Traceback" not in res.stderr
    assert not remote.exists() and list(out.iterdir()) == []


def test_two_hosts_with_distributed_launch_capture_every_rank(sshd, remote, tmp_path, window_capture):
    """--hosts: one run per host (the sshd host and `local`, both this machine), each a
    `python -m paddle.distributed.launch` of two workers: four ranks in one capture."""
    out = tmp_path / "captures"
    res, _, _ = window_capture  # a capture already in OUT: a copy of the module's one
    assert res.returncode == 0
    folder = Path(res.stdout.strip().splitlines()[-1])
    shutil.copytree(folder, out / folder.name)
    workdir = tmp_path / "work"  # the launcher writes its log/ folder here
    workdir.mkdir()
    both = subprocess.run(
        [
            *cli_argv(sshd, remote, out, "--device", "cpu", "--workdir", str(workdir), host=None),
            "--hosts",
            f"{HOST},local",
            "--",
            sys.executable,
            "-m",
            "paddle.distributed.launch",
            "--nproc_per_node",
            "2",
            str(TINY),
            "--steps",
            "120",
            "--batch-size",
            "8",
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert both.returncode == 0, both.stderr
    folder = Path(both.stdout.strip().splitlines()[-1])
    assert folder.name.startswith(f"{HOST}+1-")
    assert sorted(p.name for p in folder.iterdir()) == sorted([HOST, "local", "npuscope_run.json"])
    for host in (HOST, "local"):
        assert sorted(p.parent.name for p in (folder / host).glob("rank_*/*.paddle_trace.json")) == ["rank_0", "rank_1"]
    profile = open_profile(folder)
    assert sorted(profile.cards) == sorted(f"{h}/{r}" for h in (HOST, "local") for r in "01")
    assert len(list(out.iterdir())) == 2  # the earlier capture is still there


@pytest.fixture(autouse=True)
def _no_leftover_jobs(remote):
    yield
    for run in run_dirs(remote):
        pid = run / "pid"
        if pid.is_file() and not (run / "exit").exists():
            try:
                os.killpg(int(pid.read_text()), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
    shutil.rmtree(remote, ignore_errors=True)


def test_keep_running_fetches_after_the_window_while_training_goes_on(sshd, remote, tmp_path):
    out = tmp_path / "captures"
    res = cli(
        sshd,
        remote,
        out,
        "--device",
        "cpu",
        "--start-step",
        "20",
        "--keep-running",
        "--",
        sys.executable,
        str(TINY),
        "--steps",
        "4000",
        "--batch-size",
        "8",
        "--sleep-ms",
        "50",
    )
    assert res.returncode == 0, res.stderr
    folder = Path(res.stdout.strip().splitlines()[-1])
    manifest = json.loads((folder / "npuscope_capture.json").read_text())
    assert manifest["status"] == "captured" and manifest["window"]["start"] == 20
    assert len(list(folder.glob("*.paddle_trace.json"))) == 1
    (run,) = run_dirs(remote)
    pid = int((run / "pid").read_text())
    assert group_alive(pid), "training should still be running after the capture"
    assert "done:" not in (run / "log").read_text()
    cancelled = cli(sshd, remote, out, "--cancel", run.name)
    assert cancelled.returncode == 0 and "cancelled" in cancelled.stderr, cancelled.stderr
    wait_for(lambda: not group_alive(pid), "the training to stop", timeout=30)


def test_ctrl_c_detaches_and_says_how_to_reattach(sshd, remote, tmp_path):
    out = tmp_path / "captures"
    out.mkdir()
    client, run, pid = start_client(sshd, remote, out, 500, "step    0")
    client.send_signal(signal.SIGINT)
    stdout, stderr = client.communicate(timeout=TIMEOUT)
    assert client.returncode == 130 and stdout == ""
    assert f"--attach {run.name}`" in stderr.strip().splitlines()[-1] and "Traceback" not in stderr
    assert group_alive(pid) and not (run / "exit").exists()
    assert list(out.iterdir()) == []
    assert cli(sshd, remote, out, "--cancel", run.name).returncode == 0


def test_attach_or_cancel_an_unknown_run(sshd, remote, tmp_path):
    out = tmp_path / "captures"
    out.mkdir()
    for action in ("--attach", "--cancel"):
        res = cli(sshd, remote, out, action, "20200101-000000-dead")
        assert res.returncode == 1 and "no run 20200101-000000-dead" in res.stderr, res.stderr
    assert list(out.iterdir()) == []
    listed = cli(sshd, remote, out, "--list")
    assert listed.returncode == 0 and "no runs on" in listed.stderr


def test_a_run_without_results_leaves_nothing_locally(sshd, remote, tmp_path):
    """FAKE python: a process that "trains" successfully but whose profiler wrote nothing."""
    fake = tmp_path / "fake_python_no_trace"
    fake.write_text("#!/bin/sh\necho 'training done, no trace written'\nexit 0\n")
    fake.chmod(0o755)
    out = tmp_path / "captures"
    out.mkdir()
    res = cli(sshd, remote, out, "--device", "cpu", "--", str(fake), "train.py")
    assert res.returncode == 1
    assert "the run left no exported results" in res.stderr
    assert list(out.iterdir()) == []  # the temporary folder is gone too


def test_training_that_ends_before_the_window_says_so(sshd, remote, tmp_path):
    out = tmp_path / "captures"
    out.mkdir()
    res = cli(
        sshd,
        remote,
        out,
        "--device",
        "cpu",
        "--start-step",
        "100",
        "--",
        sys.executable,
        str(TINY),
        "--steps",
        "30",
        "--batch-size",
        "8",
    )
    assert res.returncode == 1
    assert "training ended after 30 steps, before the capture window (start step 100)" in res.stderr
    assert list(out.iterdir()) == []


def test_short_epoch_moves_the_window_and_says_so(sshd, remote, tmp_path):
    out = tmp_path / "captures"
    res = cli(
        sshd,
        remote,
        out,
        "--device",
        "cpu",
        "--start-step",
        "500",
        "--",
        sys.executable,
        str(TINY),
        "--steps",
        "200",
        "--batch-size",
        "8",
    )
    assert res.returncode == 0, res.stderr
    assert "warm-up: the first epoch has 128 steps, not more than --start-step 500" in res.stderr
    folder = Path(res.stdout.strip().splitlines()[-1])
    window = json.loads((folder / "npuscope_capture.json").read_text())["window"]
    assert window == {"start": 127, "stop": 128, "moved": True, "epoch_length": 128}


def test_one_host_failing_to_start_cancels_the_others(sshd, remote, tmp_path):
    out = tmp_path / "captures"
    out.mkdir()
    res = subprocess.run(
        [
            *cli_argv(sshd, remote, out, "--device", "cpu", host=None),
            "--hosts",
            f"{HOST},{NOKEY}",
            *tiny("--sleep-ms", "500"),
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert res.returncode == 1
    last = res.stderr.strip().splitlines()[-1]
    assert "npuscope-nokey: authentication failed" in last
    assert f"(the run started on {HOST} was cancelled)" in last
    (run,) = run_dirs(remote)
    wait_for(lambda: (run / "exit").is_file(), "the cancelled run's exit code", timeout=30)
    assert (run / "exit").read_text().strip() == "143" and (run / "cancelled").is_file()
    assert list(out.iterdir()) == []


def test_clean_deletes_fetched_and_failed_runs_and_keeps_the_others(sshd, remote, tmp_path):
    out = tmp_path / "captures"
    out.mkdir()
    failed = cli(sshd, remote, out, "--device", "cpu", "--", "no-such-python3", "t.py")
    assert failed.returncode == 1  # stopped before launching: leaves no run
    assert run_dirs(remote) == []
    script = tmp_path / "failing.py"
    script.write_text(FAILING)
    # The fetched run, the crashed one and the one left running, side by side (their Paddle
    # start-ups overlap). Each starts once the one before has read the bootstrap: the runs share
    # its file, which every upload writes again.
    side = {}
    try:
        for name, command in (("fetched", tiny()), ("crashed", ["--", sys.executable, str(script)])):
            before = set(run_dirs(remote))
            side[name] = subprocess.Popen(
                cli_argv(sshd, remote, out, "--device", "cpu", *command),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=out.parent,
            )
            run = wait_for(
                lambda before=before: next((r for r in run_dirs(remote) if r not in before), None),
                f"the {name} run folder",
            )
            wait_for(
                lambda log=run / "log": log.is_file() and '"event": "started"' in log.read_text(),
                f"the {name} run's bootstrap to start",
            )
        client, running, pid = start_client(sshd, remote, out, 500, "step    0")
    finally:
        ended = {name: (proc, *proc.communicate(timeout=TIMEOUT)) for name, proc in side.items()}
    fetched, _, fetched_err = ended["fetched"]
    assert fetched.returncode == 0, fetched_err
    crashed = ended["crashed"][0]
    assert crashed.returncode == 1
    try:
        client.kill()  # leave the job running, unfollowed
        client.communicate()
        before = {p.name for p in run_dirs(remote)}
        assert len(before) == 3
        res = cli(sshd, remote, out, "--clean")
        assert res.returncode == 0, res.stderr
        assert "deleted 2 run(s)" in res.stderr
        assert {p.name for p in run_dirs(remote)} == {running.name}
        assert group_alive(pid)
        assert [p.name for p in out.iterdir()] and all(p.is_dir() for p in out.iterdir())  # local copies stay
    finally:
        cli(sshd, remote, out, "--cancel", running.name)


def test_keep_running_with_a_distributed_launch_fetches_every_rank_while_training_goes_on(sshd, remote, tmp_path):
    out = tmp_path / "captures"
    workdir = tmp_path / "work"
    workdir.mkdir()
    res = cli(
        sshd,
        remote,
        out,
        "--device",
        "cpu",
        "--start-step",
        "20",
        "--keep-running",
        "--workdir",
        str(workdir),
        "--",
        sys.executable,
        "-m",
        "paddle.distributed.launch",
        "--nproc_per_node",
        "2",
        str(TINY),
        "--steps",
        "4000",
        "--batch-size",
        "8",
        "--sleep-ms",
        "50",
    )
    assert res.returncode == 0, res.stderr
    folder = Path(res.stdout.strip().splitlines()[-1])
    for rank in ("0", "1"):
        assert list((folder / f"rank_{rank}").glob("*.paddle_trace.json"))
        assert json.loads((folder / f"rank_{rank}" / "npuscope_capture.json").read_text())["status"] == "captured"
    (run,) = run_dirs(remote)
    pid = int((run / "pid").read_text())
    assert group_alive(pid)
    listed = cli(sshd, remote, out, "--list")
    assert f"{run.name}  fetched+run" in listed.stdout, listed.stdout
    assert len(processes_in(workdir)) >= 3  # the launcher and two workers train on
    assert cli(sshd, remote, out, "--cancel", run.name).returncode == 0
    wait_for(lambda: not group_alive(pid), "the launcher to stop", timeout=30)
    # Paddle starts each worker in a session of its own: the launcher must have stopped them too
    wait_for(lambda: not processes_in(workdir), "the workers to stop", timeout=30)


def processes_in(folder: Path) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and os.readlink(proc / "cwd") == str(folder):
                found.append(int(proc.name))
        except OSError:
            continue
    return found
