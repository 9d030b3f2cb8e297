"""End to end in a real terminal: tmux runs `npuscope`, keys go in with send-keys, and the
screen is read back with capture-pane."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

import polars as pl
import pytest

from npuscope.analysis import diagnose
from npuscope.fixtures.demo_profile import ensure_demo
from npuscope.parsers import FrameCache, open_profile

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("tmux") is None and not os.environ.get("CI"),
        reason="tmux is not installed (.ci/run installs it; in CI this test must run)",
    ),
]


class Terminal:
    def __init__(self, name: str, command: str, width: int = 140, height: int = 44) -> None:
        self.name = name
        subprocess.run(
            ["tmux", "new-session", "-d", "-s", name, "-x", str(width), "-y", str(height), command],
            check=True,
        )
        # Detached sessions may start at tmux's default size; set the one the test reads.
        subprocess.run(["tmux", "resize-window", "-t", name, "-x", str(width), "-y", str(height)], check=True)

    def screen(self) -> str:
        res = subprocess.run(["tmux", "capture-pane", "-p", "-t", self.name], capture_output=True, text=True)
        return res.stdout

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, *keys], check=True)

    def wait_for(self, predicate, what: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.screen()
            if predicate(text):
                return text
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}; screen:\n{self.screen()}")

    def alive(self) -> bool:
        return subprocess.run(["tmux", "has-session", "-t", self.name], capture_output=True).returncode == 0

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


def test_sort_and_filter_in_a_real_terminal(tmp_path):
    diag = diagnose(open_profile(ensure_demo(), cache=FrameCache(enabled=False)))
    card0 = diag.tasks.filter(pl.col("card") == "0")
    worst = card0.sort("wait_us", descending=True).row(0, named=True)
    n_reduce = card0.filter((pl.col("op_type") == "ReduceSum") & (pl.col("wait_cause") == "recompilation")).height
    # -u: a COLUMNS/LINES set by the test runner would override the terminal size.
    env = (
        f"-u COLUMNS -u LINES NPUSCOPE_CACHE_DIR={shlex.quote(str(tmp_path / 'cache'))} "
        f"NPUSCOPE_EXPORT_DIR={shlex.quote(str(tmp_path / 'exports'))} TERM=xterm-256color"
    )
    term = Terminal(f"npuscope-e2e-{os.getpid()}", f"env {env} {shlex.quote(sys.executable)} -m npuscope")
    try:
        term.wait_for(lambda s: "1,120 of 1,120 tasks" in s, "the first screen")
        term.keys("w")
        screen = term.wait_for(lambda s: "sorted by wait_us" in s, "the wait sort")
        lines = screen.splitlines()
        header = next(i for i, line in enumerate(lines) if "Start(" in line and "Op Name" in line)
        top = lines[header + 1]
        # Time columns scale their unit to fit (the header names it): the sorted column and the
        # start time, each in its own unit, identify the worst wait.
        scale = {"us": 1.0, "ms": 1e3, "s": 1e6}
        start_unit = re.search(r"Start\((us|ms|s)\)", lines[header]).group(1)
        wait_unit = re.search(r"Wait\((us|ms|s)\)", lines[header]).group(1)
        assert f"{worst['start_us'] / scale[start_unit]:,.3f}" in top and worst["op_type"] in top
        assert f"{worst['wait_us'] / scale[wait_unit]:,.3f}" in top
        term.keys("/")
        # Type only once the filter bar has focus: keys sent earlier would be read as bindings.
        term.wait_for(lambda s: "/ filter:" in s, "the filter bar")
        term.keys("type:ReduceSum cause:recompilation", "Enter")
        screen = term.wait_for(lambda s: f"{n_reduce} of 1,120 tasks" in s, "the filtered count")
        assert "type:ReduceSum cause:recompilation" in screen  # the filter bar keeps the query
        term.keys("q")
        deadline = time.monotonic() + 15
        while term.alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not term.alive(), "q did not quit"
    finally:
        term.close()


def test_capture_then_open_in_a_real_terminal(tmp_path):
    """`npuscope capture --host local ... --open`: a real Paddle CPU run, fetched, then the
    explorer opens on the fetched folder in the same terminal."""
    if importlib.util.find_spec("paddle") is None:  # the capture runs it; this process never does
        pytest.skip("could not import 'paddle': No module named 'paddle'")
    tiny = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "paddle_train_tiny.py")
    env = f"-u COLUMNS -u LINES NPUSCOPE_CACHE_DIR={shlex.quote(str(tmp_path / 'cache'))} TERM=xterm-256color"
    command = [
        sys.executable,
        "-m",
        "npuscope",
        "capture",
        "--host",
        "local",
        "--device",
        "cpu",
        "--remote-cache",
        str(tmp_path / "remote"),
        "--out",
        str(tmp_path / "captures"),
        "--open",
        "--",
        sys.executable,
        tiny,
        "--steps",
        "120",
        "--batch-size",
        "8",
    ]
    term = Terminal(
        f"npuscope-e2e-capture-{os.getpid()}", f"env {env} {' '.join(shlex.quote(c) for c in command)}; sleep 30"
    )
    try:
        screen = term.wait_for(lambda s: "local-" in s and "Op summary" in s, "the explorer on the capture", 240)
        (folder,) = (tmp_path / "captures").iterdir()
        assert folder.name in screen and "Paddle" in screen
        term.keys("q")
        term.wait_for(lambda s: "Op summary" not in s, "the explorer to quit")
    finally:
        term.close()
