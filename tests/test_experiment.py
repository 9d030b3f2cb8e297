"""`npuscope experiment` against a real OpenSSH server on 127.0.0.1 (tests/sshd_server.py) with
real Paddle CPU trainings (fixtures/paddle_train_tiny.py).

The test plants the change: the training's step does NPUSCOPE_TINY_STEP_MS milliseconds of host
work between its forward and backward pass, so the environment variable an experiment sets
decides the step time (20 ms in the base run, 0 faster, 60 slower). The verdicts are then
checked against what was planted: "improved" with an interval below 0, "no measurable change"
for the same setting again, "regressed" (exit 1 with --fail-on-regression) for the slower one.
--min-change 25 keeps a loaded machine's drift between two runs of one job (a few percent)
from reading as a change; the planted ones are -88% and +170%.
"""

from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

if importlib.util.find_spec("paddle") is None:
    pytest.skip("could not import 'paddle': No module named 'paddle'", allow_module_level=True)
pytestmark = pytest.mark.slow

from test_capture_ssh import TIMEOUT, cli, group_alive, run_dirs, wait_for  # noqa: E402

from npuscope.capture.run_record import RUN_RECORD  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "fixtures" / "paddle_train_tiny.py"
STEPS = 5


def training(*extra: str) -> list[str]:
    # 5 warm-up steps, then 5 profiled (--start-step 5 --steps 5), then 4 more
    return ["--", sys.executable, str(TINY), "--steps", "14", "--batch-size", "8", *extra]


def experiment_argv(run: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "npuscope", "experiment", str(run), "--min-change", "25", *args]


def experiment(run: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(experiment_argv(run, *args), capture_output=True, text=True, timeout=TIMEOUT, cwd=run.parent)


@pytest.fixture(scope="module")
def base_run(sshd, tmp_path_factory):
    """A captured base run: 5 profiled steps of 20 ms of planted work each."""
    root = tmp_path_factory.mktemp("experiment")
    remote, out = root / "remote", root / "captures"
    out.mkdir()
    res = cli(
        sshd,
        remote,
        out,
        "--device",
        "cpu",
        "--start-step",
        "5",
        "--steps",
        str(STEPS),
        "--env",
        "NPUSCOPE_TINY_STEP_MS=20",
        *training(),
    )
    assert res.returncode == 0, res.stderr
    folder = Path(res.stdout.strip().splitlines()[-1])
    assert (folder / RUN_RECORD).is_file()
    return folder, remote


def test_the_run_record_says_how_to_capture_again(base_run, sshd):
    folder, remote = base_run
    record = json.loads((folder / RUN_RECORD).read_text())
    assert record["schema"] == "npuscope.run/1"
    spec = record["spec"]
    assert spec["steps"] == STEPS and spec["device"] == "cpu" and spec["start_step"] == 5
    assert ["NPUSCOPE_TINY_STEP_MS", "20"] in spec["env"]
    assert spec["ssh_config"] == str(sshd.config) and spec["remote_root"] == str(remote)
    assert str(TINY) in spec["command"]
    assert len(record["runs"]) == 1


def test_the_faster_setting_improves_with_an_interval_below_zero(base_run):
    folder, _ = base_run
    res = experiment(folder, "--env", "NPUSCOPE_TINY_STEP_MS=0", "--format", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["schema"] == "npuscope.experiment/1" and doc["verdict"] == "improved"
    step = doc["step_time"]
    lo, hi = step["ci_pct"]
    assert lo <= step["delta_pct"] <= hi < 0  # the interval excludes 0
    assert step["steps"] == {"base": STEPS, "new": STEPS}
    assert step["new_mean_us"] < step["base_mean_us"] - 15_000  # 20 ms of planted work gone, per step
    assert doc["change"]["env"] == {"NPUSCOPE_TINY_STEP_MS": "0"}
    assert Path(doc["base"]) == folder and Path(doc["new"]).parent == folder.parent
    new_record = json.loads((Path(doc["new"]) / RUN_RECORD).read_text())
    assert ["NPUSCOPE_TINY_STEP_MS", "0"] in new_record["spec"]["env"]
    # both runs are in the registry, the new one with its change
    runs = subprocess.run(
        [sys.executable, "-m", "npuscope", "runs", "--format", "json"], capture_output=True, text=True, check=True
    )
    recorded = {r["path"]: r for r in json.loads(runs.stdout)["runs"]}
    assert recorded[str(Path(doc["new"]).resolve())]["kind"] == "experiment"
    assert recorded[str(Path(doc["new"]).resolve())]["change"] == "NPUSCOPE_TINY_STEP_MS=0"
    assert str(folder.resolve()) in recorded


def test_the_same_setting_again_is_no_measurable_change(base_run):
    folder, _ = base_run
    res = experiment(folder, "--env", "NPUSCOPE_TINY_STEP_MS=20")
    assert res.returncode == 0, res.stderr
    assert "no measurable change" in res.stdout
    verdict = next(line for line in res.stdout.splitlines() if "no measurable change" in line)
    assert "step time" in verdict or "%" in verdict, res.stdout


def test_the_slower_setting_regresses_and_fails_the_gate(base_run):
    folder, _ = base_run
    res = experiment(folder, "--env", "NPUSCOPE_TINY_STEP_MS=60", "--fail-on-regression", "--format", "json")
    assert res.returncode == 1, res.stderr
    doc = json.loads(res.stdout)
    assert doc["verdict"] == "regressed"
    lo, hi = doc["step_time"]["ci_pct"]
    assert 0 < lo <= doc["step_time"]["delta_pct"] <= hi
    assert "regression" in res.stderr and "Traceback" not in res.stderr


def test_a_cancelled_experiment_leaves_nothing_running_on_the_host(base_run):
    folder, remote = base_run
    before = set(run_dirs(remote))
    # 14 steps of 2 s each: the job is still running when Ctrl-C comes
    argv = experiment_argv(folder, "--env", "NPUSCOPE_TINY_STEP_MS=2000")
    client = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=folder.parent)
    try:
        run = wait_for(lambda: next((r for r in run_dirs(remote) if r not in before), None), "the new run")
        pid = int(wait_for(lambda: (run / "pid").is_file() and (run / "pid").read_text().strip(), "the pid"))
        wait_for(lambda: (run / "log").is_file() and "step    0" in (run / "log").read_text(), "step 0")
        assert group_alive(pid)
        client.send_signal(signal.SIGINT)
        stdout, stderr = client.communicate(timeout=TIMEOUT)
    finally:
        if client.poll() is None:
            client.kill()
            client.communicate()
    assert client.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr and stdout == ""
    wait_for(lambda: not group_alive(pid), "the job to end on the host", timeout=30)
    fetched = sorted(p.name for p in folder.parent.iterdir())
    assert not any(name.endswith(".partial") for name in fetched)


def test_a_folder_without_a_run_record_is_one_line(tmp_path):
    res = experiment(tmp_path, "--env", "A=1")
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "no run record" in lines[0], res.stderr
