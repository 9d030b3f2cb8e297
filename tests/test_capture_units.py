"""The capture layer's pieces on their own: spec checks, fetch rules, folders, ssh messages, scripts."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile

import pytest

from npuscope.capture import bootstrap, session
from npuscope.capture.events import LogLine
from npuscope.capture.fetch import claim_folder, is_exported, local_name, parse_listing, staging_dir, unpack
from npuscope.capture.runs import parse_probe, parse_runs, root_expr, run_script
from npuscope.capture.session import folder_name
from npuscope.capture.spec import CaptureError, CaptureSpec, parse_env, parse_hosts
from npuscope.capture.transport import SshTransport, ssh_problem
from npuscope.capture.upload import files_tar

SPEC = CaptureSpec(host="h", command=("python", "train.py"), device="cpu")


@pytest.mark.parametrize(
    "path, fetched",
    [
        ("log.fetch", True),
        ("log", False),
        ("out/rank_1/npuscope_capture.json", True),
        ("out/rank_1/deeper/npuscope_capture.json", False),
        ("out/npuscope_capture.json", True),
        ("out/host_vmpid_1_time_x.paddle_trace.json", True),
        ("out/a/PROF_1/mindstudio_profiler_output/op_summary_1.csv", True),
        ("out/a/PROF_1/device_0/summary/op_summary_0_1.csv", True),
        ("out/a/PROF_1/device_3/timeline/msprof_0_1.json", True),
        ("out/a/PROF_1/device_0/info.json.0", True),
        ("out/x_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv", True),
        ("out/x_ascend_pt/profiler_info_3.json", True),
        ("out/a/PROF_1/device_0/data/ts_track.data.0.slice_0", False),
        ("out/a/PROF_1/host/data/api_event.data.slice_0", False),
        ("out/a/PROF_1/device_0/sqlite/op_summary.db", False),
        ("out/x_ascend_pt/FRAMEWORK/torch.op_range", False),
        ("out/../../etc/passwd", False),
        ("run.sh", False),
        ("elsewhere/op_summary_1.csv", False),
    ],
)
def test_only_exported_results_are_fetched(path, fetched):
    assert is_exported(path) is fetched


def test_listing_keeps_exported_files_with_sizes():
    data = (
        b"12\tlog.fetch\0"
        b"4096\tout/a/PROF_1/device_0/data/raw\0"
        b"77\tout/t.paddle_trace.json\0"
        b"5\tout/a\nb.paddle_trace.json\0"
        b"bad entry\0"
        b"\xb2\tout/c.paddle_trace.json\0"
    )
    assert parse_listing(data) == [
        ("log.fetch", 12),
        ("out/t.paddle_trace.json", 77),
        ("out/a\nb.paddle_trace.json", 5),
    ]
    assert local_name("log.fetch") == "npuscope_capture.log"
    assert local_name("out/a/b.csv") == "a/b.csv"


def test_claim_folder_never_overwrites(tmp_path):
    out = tmp_path / "captures"
    names = []
    for i in range(3):
        staging = staging_dir(out, "h-20261129-101010")
        (staging / "f.txt").write_text(str(i))
        names.append(claim_folder(staging, out, "h-20261129-101010"))
    assert [p.name for p in names] == ["h-20261129-101010", "h-20261129-101010-2", "h-20261129-101010-3"]
    assert [(p / "f.txt").read_text() for p in names] == ["0", "1", "2"]
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in names)


def test_unpack_refuses_paths_out_of_the_folder(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in ("out/../../escape.paddle_trace.json", "out/ok.paddle_trace.json", "out/raw/data/x"):
            data = b"{}"
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    archive = tmp_path / "f.tar"
    archive.write_bytes(buf.getvalue())
    dest = tmp_path / "dest"
    dest.mkdir()
    assert unpack(archive, dest) == 1
    assert [p.name for p in dest.iterdir()] == ["ok.paddle_trace.json"]
    assert not (tmp_path / "escape.paddle_trace.json").exists()


def test_spec_checks_are_one_line_usage_errors(tmp_path):
    bad = [
        dict(host="-oProxyCommand=x"),
        dict(host="a b"),
        dict(command=()),
        dict(command=("python",)),
        dict(device="tpu"),
        dict(start_step=-1),
        dict(steps=0),
        dict(jit_compile="maybe"),
        dict(ssh_config=str(tmp_path / "missing_config")),
    ]
    for change in bad:
        with pytest.raises(CaptureError) as info:
            CaptureSpec(**{**SPEC.__dict__, **change}).check()
        assert info.value.code == 2 and "\n" not in str(info.value), change
    assert SPEC.check() is SPEC


def test_env_and_hosts_parsing(tmp_path):
    assert parse_env(["A=1", "B=x=y", "C="]) == (("A", "1"), ("B", "x=y"), ("C", ""))
    for item in ("NOVALUE", "1A=x", "=x"):
        with pytest.raises(CaptureError):
            parse_env([item])
    assert parse_hosts("h1,h2, h1") == ("h1", "h2")
    assert parse_hosts("# ranks\nnode1 slots=8\n\nnode2  # second\n") == ("node1", "node2")


def test_ssh_failures_read_as_one_line():
    cases = {
        "Host key verification failed.": "host key refused",
        "@ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @": "CHANGED",
        "root@1.2.3.4: Permission denied (publickey).": "authentication failed",
        "ssh: Could not resolve hostname nohost: Name or service not known": "unknown host",
        "ssh: connect to host 127.0.0.1 port 1: Connection refused": "connection refused",
        "kex_exchange_identification: read: Connection reset by peer": "ssh failed: kex_exchange",
    }
    for stderr, expected in cases.items():
        message = ssh_problem("h", [stderr])
        assert expected in message and "\n" not in message


def test_ssh_argv_is_strict_and_batch_and_quotes_one_word():
    t = SshTransport("h", ssh_config="/x/config")
    argv = t.argv("echo 'a b' $HOME")
    assert argv[:3] == ["ssh", "-F", "/x/config"]
    assert "BatchMode=yes" in argv and "StrictHostKeyChecking=yes" in argv
    assert argv[-3:-1] == ["h", "--"]
    assert argv[-1] == "sh -c 'echo '\"'\"'a b'\"'\"' $HOME'"
    assert "StrictHostKeyChecking=accept-new" in SshTransport("h", accept_new_host_key=True).argv("true")


def test_remote_root_keeps_home_unquoted_and_the_rest_quoted():
    assert root_expr("~/.cache/npuscope") == '"$HOME"/.cache/npuscope'
    assert root_expr("/srv/a b") == "'/srv/a b'"
    assert root_expr("~/$(x)") == "\"$HOME\"/'$(x)'"


def test_run_script_is_valid_sh_and_separates_the_job(tmp_path):
    spec = CaptureSpec(
        host="h",
        command=("python3", "train.py", "--lr", "1e-3; rm -rf /"),
        device="npu",
        env=(("A", "x y'z"),),
        keep_running=True,
    )
    text = run_script(spec, "/r/runs/1", "/r/bootstrap-x.py", "/w d")
    script = tmp_path / "run.sh"
    script.write_text(text)
    assert subprocess.run(["sh", "-n", str(script)]).returncode == 0
    assert "'1e-3; rm -rf /'" in text and "export A='x y'\"'\"'z'" in text
    assert "cd '/w d'" in text and "--keep-running" in text and "--export=on" in text


def test_probe_and_runs_parsing():
    probe = parse_probe("NPUSCOPE_ROOT /r\nNPUSCOPE_MISSING setsid\nNPUSCOPE_WORKDIR /w\nNPUSCOPE_PROBLEM python\n")
    assert (probe.root, probe.workdir, probe.missing, probe.problems) == ("/r", "/w", ("setsid",), ("python",))
    runs = parse_runs(
        'NPUSCOPE_RUN\t2\t\t1\ttraining\t0\t{"spec": {"command": ["python", "t.py"]}}\n'
        "NPUSCOPE_RUN\t1\t0\t0\tdone\t1\t{}\n"
        "NPUSCOPE_RUN\t3\t143\t0\ttraining\t0\tnot json\n"
        "NPUSCOPE_RUN\t4\t0\t1\tdone\t1\t{}\n"
        "noise\n"
    )
    assert [(r.id, r.state) for r in runs] == [
        ("4", "fetched+run"),
        ("3", "failed (143)"),
        ("2", "running"),
        ("1", "fetched"),
    ]
    assert runs[2].command == "python t.py"


def test_folder_names():
    assert folder_name(("user@gpu01",), "20261129-101010-ab12") == "gpu01-20261129-101010"
    assert folder_name(("a", "b", "c"), "20261129-101010-ab12") == "a+2-20261129-101010"


def test_upload_tar_has_executable_run_script():
    data = files_tar({"b.py": "print(1)", "runs/1/run.sh": "true"})
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        modes = {m.name: m.mode for m in tar}
    assert modes == {"b.py": 0o644, "runs/1/run.sh": 0o755}


def test_capture_help_is_quick_and_lists_the_options():
    res = subprocess.run([sys.executable, "-m", "npuscope", "capture", "--help"], capture_output=True, text=True)
    assert res.returncode == 0
    for option in (
        "--host",
        "--hosts",
        "--workdir",
        "--device",
        "--start-step",
        "--steps",
        "--jit-compile",
        "--env",
        "--msprof",
        "--keep-running",
        "--out",
        "--ssh-config",
        "--accept-new-host-key",
        "--list",
        "--attach",
        "--cancel",
    ):
        assert option in res.stdout, option


def test_probe_reads_a_tilde_workdir_as_the_remote_home(tmp_path):
    from npuscope.capture.runs import probe_script

    text = probe_script(CaptureSpec(host="h", command=("python", "t.py"), workdir="~/my work"))
    assert "cd \"$HOME\"/'my work' ||" in text
    text = probe_script(CaptureSpec(host="h", command=(), workdir="/abs/$(x)"))
    assert "cd '/abs/$(x)' ||" in text and "NPUSCOPE_PROBLEM python" not in text
    script = tmp_path / "probe.sh"
    script.write_text(text)
    assert subprocess.run(["sh", "-n", str(script)]).returncode == 0


@pytest.mark.parametrize("case", ["workdir", "msprof"])
def test_run_script_messages_quote_user_text(tmp_path, case):
    """run.sh executed for real: its error messages carry user text verbatim, never run it."""
    evil = "x\" $(touch PWNED) `touch PWNED` '"
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    workdir = str(tmp_path / evil) if case == "workdir" else str(tmp_path)
    spec = CaptureSpec(host="h", command=("true", "train.py"), device="npu", msprof=str(tmp_path / evil))
    (run_dir / "run.sh").write_text(run_script(spec, str(run_dir), str(tmp_path / "boot.py"), workdir))
    subprocess.run(["sh", "run.sh"], cwd=run_dir, timeout=60, check=False)
    log = (run_dir / "log").read_text()
    expected = {
        "workdir": ("20", f"npuscope: cannot enter the working directory {workdir}"),
        "msprof": ("21", f"npuscope: msprof not found: {tmp_path / evil} (check --msprof)"),
    }[case]
    assert (run_dir / "exit").read_text().strip() == expected[0]
    assert expected[1] in log.splitlines()
    assert not list(tmp_path.rglob("PWNED"))


def test_unpack_stops_between_files_when_asked(tmp_path):
    import threading

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for i in range(3):
            info = tarfile.TarInfo(f"out/{i}.paddle_trace.json")
            info.size = 2
            tar.addfile(info, io.BytesIO(b"{}"))
    archive = tmp_path / "f.tar"
    archive.write_bytes(buf.getvalue())
    stop = threading.Event()
    stop.set()
    dest = tmp_path / "dest"
    dest.mkdir()
    assert unpack(archive, dest, stop) == 0 and list(dest.iterdir()) == []


def test_staging_folder_follows_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        staging = staging_dir(tmp_path / "captures", "h-1")
    finally:
        os.umask(old)
    assert staging.name.startswith(".h-1.partial-") and (staging.stat().st_mode & 0o777) == 0o755


def test_run_ids_are_checked_before_anything_runs():
    import asyncio

    from npuscope.capture.session import attach, cancel

    spec = CaptureSpec(host="local", command=())
    for bad in ("../..", "20261129-143000-ab12/../x", "x"):
        for call in (attach(spec, bad, lambda e: None), cancel(spec, bad)):
            with pytest.raises(CaptureError) as info:
                asyncio.run(call)
            assert info.value.code == 2 and "not a run id" in str(info.value)


def test_follow_reads_the_exit_code_after_a_log_without_final_newline(tmp_path):
    """The job's last line may lack its newline (a progress bar's \\r): the exit code still reads."""
    import asyncio

    from npuscope.capture.session import HostRun

    run_dir = tmp_path / "runs" / "20261129-143000-ab12"
    run_dir.mkdir(parents=True)
    (run_dir / "pid").write_text("999999999\n")
    (run_dir / "log").write_text("step 1\nepoch 5/10\r")
    (run_dir / "exit").write_text("0\n")
    events = []
    run = HostRun(CaptureSpec(host="local", command=()), run_dir.name, events.append)
    run.root, run.run_dir = str(tmp_path), str(run_dir)
    asyncio.run(run.follow())  # raises when the exit code is lost
    assert [e.text for e in events if isinstance(e, LogLine)] == ["step 1", "epoch 5/10"]


def test_the_bootstrap_and_the_session_agree_on_the_progress_prefix():
    """The bootstrap is uploaded alone and cannot import the session: its copy must match."""
    assert bootstrap.PREFIX == session.PREFIX
