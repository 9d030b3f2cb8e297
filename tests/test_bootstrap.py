"""The capture bootstrap, run for real: a Paddle CPU training under the profiler in a subprocess.

All runs start together in one module fixture (each is a separate Python process, ~1-3 s) and
the tests read their results. The tiny script's DataLoader has 1024 samples: 16 steps per epoch
at the default batch size 64, 128 at ``--batch-size 8``. The bootstrap moves the window to the
end of the first epoch when the epoch has no more than ``--start-step`` steps, so the
"window at step 100" runs use ``--batch-size 8``.
"""

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

# Found without importing it: importing Paddle costs each test worker ~1 s at collection.
if importlib.util.find_spec("paddle") is None:
    pytest.skip("could not import 'paddle': No module named 'paddle'", allow_module_level=True)
# Real components (Paddle training, sshd, tmux): `-m 'not slow'` leaves them out of a quick run.
pytestmark = pytest.mark.slow

from npuscope.capture import BOOTSTRAP_PATH, bootstrap_source  # noqa: E402
from npuscope.parsers import open_profile  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "fixtures" / "paddle_train_tiny.py"
from npuscope.capture.session import PREFIX  # noqa: E402  (the prefix the session reads)

FAILING = """
import paddle
paddle.seed(0)
model = paddle.nn.Linear(4, 2)
opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=model.parameters())
scaler = paddle.amp.GradScaler(init_loss_scaling=1024)
for step in range(10):
    loss = model(paddle.randn([8, 4])).mean()
    scaler.scale(loss).backward()
    scaler.step(opt)  # GradScaler.step calls opt.step(): one training step, not two
    scaler.update()
    opt.clear_grad()
    if step == 2:
        raise ValueError("boom after step 3\\nsecond line")
"""

RUNS = {
    "window": [
        "--device",
        "cpu",
        "--start-step",
        "100",
        "--steps",
        "1",
        "--",
        str(TINY),
        "--steps",
        "120",
        "--batch-size",
        "8",
    ],
    "keep": [
        "--device",
        "cpu",
        "--start-step",
        "100",
        "--steps",
        "2",
        "--keep-running",
        "--jit-compile",
        "off",
        "--",
        str(TINY),
        "--steps",
        "120",
        "--batch-size",
        "8",
    ],
    "short_epoch": ["--device", "cpu", "--start-step", "500", "--steps", "1", "--", str(TINY), "--steps", "120"],
    "too_late": ["--device", "cpu", "--start-step", "500", "--", str(TINY), "--steps", "120", "--batch-size", "8"],
    "npu": ["--device", "npu", "--start-step", "100", "--", str(TINY), "--steps", "120"],
    "failing": ["--device", "cpu", "--start-step", "100", "--", "FAILING"],
    # `python -m paddle.distributed.launch`: every worker profiles itself into OUT/rank_N
    "launch": [
        "--device",
        "cpu",
        "--start-step",
        "100",
        "--",
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
    "module": [
        "--device",
        "cpu",
        "--start-step",
        "100",
        "--",
        "-m",
        "tiny_module",
        "--steps",
        "120",
        "--batch-size",
        "8",
    ],
}


class Run:
    def __init__(self, out: Path, proc: subprocess.CompletedProcess):
        self.out = out
        self.code = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.events = [json.loads(ln[len(PREFIX) :]) for ln in proc.stdout.splitlines() if ln.startswith(PREFIX)]
        manifest = out / "npuscope_capture.json"
        self.manifest = json.loads(manifest.read_text()) if manifest.exists() else None

    def names(self, skip_steps=True):
        return [e["event"] for e in self.events if not (skip_steps and e["event"] == "step")]

    def one(self, name):
        (event,) = [e for e in self.events if e["event"] == name]
        return event

    def traces(self):
        return sorted(self.out.glob("*.paddle_trace.json"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("bootstrap")
    failing = base / "failing_train.py"
    failing.write_text(FAILING)
    (base / "tiny_module.py").write_text(TINY.read_text())  # importable from the working folder
    procs = {}
    for name, args in RUNS.items():
        out = base / name
        args = [str(failing) if a == "FAILING" else a for a in args]
        cmd = [sys.executable, str(BOOTSTRAP_PATH), "--out", str(out), *args]
        procs[name] = (out, subprocess.Popen(cmd, cwd=base, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = {}
    for name, (out, proc) in procs.items():
        stdout, stderr = proc.communicate(timeout=180)
        results[name] = Run(out, subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr))
    return results


def test_bootstrap_is_self_contained():
    assert bootstrap_source() == BOOTSTRAP_PATH.read_text()
    tree = ast.parse(bootstrap_source())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert "paddle" in imported
    assert imported - {"paddle"} <= set(sys.stdlib_module_names), imported


def test_window_at_step_100_is_captured_and_exported(runs):
    r = runs["window"]
    assert r.code == 0, r.stderr
    assert r.names() == ["started", "capture_start", "capture_stop", "exported", "finished"]
    assert r.one("started")["pid"] > 0
    assert r.one("capture_start")["step"] == 100 and r.one("capture_stop")["step"] == 101
    assert r.one("finished")["exit"] == 0
    steps = [e["step"] for e in r.events if e["event"] == "step"]
    assert steps and steps == sorted(steps) and steps[-1] <= 101
    # os._exit right after the manifest: the rest of training never ran.
    assert "step  100 loss" not in r.stdout and "done:" not in r.stdout
    (trace,) = r.traces()
    assert r.one("exported")["files"] == [str(trace)]
    m = r.manifest
    assert m["status"] == "ok" and m["exit"] == 0 and m["device"] == "cpu"
    assert (m["start_step"], m["steps"], m["steps_seen"]) == (100, 1, 101)
    assert m["window"] == {"start": 100, "stop": 101, "moved": False, "epoch_length": 128}
    assert m["files"] == [trace.name]
    assert m["paddle_version"] == __import__("paddle").__version__
    assert m["started_at"] <= m["capture_started_at"] <= m["capture_stopped_at"] <= m["finished_at"]
    prof = open_profile(trace)
    assert prof.layout == "paddle" and prof.tasks_from == "paddle"
    assert prof.tasks.height > 0 and set(prof.tasks["task_type"].unique()) == {"CPU"}
    op_types = set(prof.tasks["op_type"].to_list())
    assert {"matmul", "adam_"} <= op_types  # forward and optimizer of one step


def test_keep_running_two_steps(runs):
    r = runs["keep"]
    assert r.code == 0, r.stderr
    assert r.one("capture_start")["step"] == 100 and r.one("capture_stop")["step"] == 102
    assert r.names()[-1] == "finished" and r.one("finished")["exit"] == 0
    assert "done: 120 steps" in r.stdout  # the script's own last line: training ran to its end
    lines = r.stdout.splitlines()
    exported = next(i for i, ln in enumerate(lines) if '"exported"' in ln)
    assert exported < next(i for i, ln in enumerate(lines) if ln.startswith("done:"))
    m = r.manifest
    assert m["status"] == "ok" and m["keep_running"] and m["jit_compile"] == "off"
    assert m["window"]["start"] == 100 and m["window"]["stop"] == 102 and m["steps_seen"] == 120
    assert len(r.traces()) == 1 and m["files"] == [r.traces()[0].name]


def test_short_epoch_moves_window_to_end_of_first_epoch(runs):
    r = runs["short_epoch"]
    assert r.code == 0, r.stderr
    assert r.names() == ["started", "window_moved", "capture_start", "capture_stop", "exported", "finished"]
    moved = r.one("window_moved")
    assert (moved["epoch_length"], moved["requested_start"], moved["start"], moved["stop"]) == (16, 500, 15, 16)
    assert r.one("capture_start")["step"] == 15 and r.one("capture_stop")["step"] == 16
    assert r.manifest["window"] == {"start": 15, "stop": 16, "moved": True, "epoch_length": 16}
    assert r.manifest["start_step"] == 500 and len(r.traces()) == 1


def test_training_ending_before_the_window_is_reported(runs):
    r = runs["too_late"]  # epoch of 128 steps -> window moved to 127, but the script stops at 120
    assert r.code == 4
    assert r.one("window_moved")["start"] == 127
    assert "capture_start" not in r.names()
    assert "before the capture window" in r.one("error")["message"]
    assert r.names()[-1] == "finished" and r.one("finished")["exit"] == 4
    assert "done: 120 steps" in r.stdout
    assert r.manifest["status"] == "no_capture" and r.manifest["steps_seen"] == 120
    assert r.manifest["files"] == [] and r.traces() == []


def test_npu_without_npu_fails_early_and_cleanly(runs):
    r = runs["npu"]
    assert r.code == 3
    message = r.one("error")["message"]
    assert "npu" in message.lower() and "\n" not in message
    assert r.names() == ["started", "error", "finished"]
    assert "Traceback" not in r.stderr
    errors = [ln for ln in r.stderr.splitlines() if "npuscope capture: error" in ln]
    assert errors == [f"npuscope capture: error: {message}"]
    assert "step    0 loss" not in r.stdout  # the script never ran
    assert r.manifest["status"] == "device_unavailable" and r.manifest["exit"] == 3


def test_failing_script(runs):
    r = runs["failing"]
    assert r.code == 1
    assert r.one("error")["message"] == "ValueError: boom after step 3"
    assert r.names()[-1] == "finished" and r.one("finished")["exit"] == 1
    assert "Traceback" in r.stderr and "second line" in r.stderr
    assert r.manifest["status"] == "failed" and r.manifest["exit"] == 1
    assert r.manifest["steps_seen"] == 3  # GradScaler.step -> SGD.step counted once per step


def test_distributed_launch_profiles_every_rank(runs):
    r = runs["launch"]
    assert r.code == 0, r.stderr[-3000:]
    m = r.manifest
    assert m["status"] == "ok" and m["module"] == "paddle.distributed.launch"
    assert sorted(m["ranks"]) == ["0", "1"]
    for rank in ("0", "1"):
        assert m["ranks"][rank]["status"] == "ok"
        assert m["ranks"][rank]["window"]["start"] == 100 and m["ranks"][rank]["window"]["stop"] == 101
        (trace,) = (r.out / f"rank_{rank}").glob("*.paddle_trace.json")
        assert f"rank_{rank}/{trace.name}" in m["files"]
    profile = open_profile(r.out)
    assert profile.cards == ("0", "1") and profile.events.height > 0  # cards named by rank folder


def test_module_entry_point_is_run_like_python_dash_m(runs):
    r = runs["module"]
    assert r.code == 0, r.stderr[-3000:]
    assert r.manifest["status"] == "ok" and r.manifest["module"] == "tiny_module"
    assert len(r.traces()) == 1
