"""The explorer during a cold load of a 300 MB timeline, in a real terminal: the progress bar
moves, Esc cancels, `q` and ctrl+c end the process within a second.

tmux runs `npuscope PROFILE` on a profile written once per session by the project's generator
(a ~310 MB msprof JSON); every test gets an empty cache folder, so every load is cold. The
process is the pane shell's child: the test finds its pid and polls /proc for it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from npuscope.fixtures.generate import generate

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("tmux") is None and not os.environ.get("CI"),
        reason="tmux is not installed (.ci/run installs it; in CI this test must run)",
    ),
]

TIMELINE_BYTES = 300_000_000
QUIT_WITHIN = 1.0  # seconds from the key to the process gone (the bound the explorer promises)
PROGRESS = re.compile(r"timeline\s+([\d,]+\.\d) / ([\d,]+\.\d) MB")


@pytest.fixture(scope="session")
def big_profile(tmp_path_factory) -> Path:
    """One capture whose timeline is over 300 MB (about 20-40 s to write)."""
    generated = generate(tmp_path_factory.mktemp("big") / "profile", json_mb=310)
    (timeline,) = [p for p in generated.files if p.suffix == ".json"]
    assert timeline.stat().st_size >= TIMELINE_BYTES
    return generated.root


class Explorer:
    """`npuscope PROFILE` in a tmux pane; the shell writes the exit code to a file after it."""

    def __init__(self, name: str, profile: Path, tmp: Path) -> None:
        self.name = name
        # A tmux server of its own: sessions of other tests coming and going (a server exits
        # with its last session) never race with this one.
        self.tmux = ["tmux", "-L", name]
        self.code_file = tmp / "exit-code"
        env = (
            f"-u COLUMNS -u LINES NPUSCOPE_CACHE_DIR={shlex.quote(str(tmp / 'cache'))} "
            f"NPUSCOPE_EXPORT_DIR={shlex.quote(str(tmp / 'exports'))} TERM=xterm-256color"
        )
        run = f"env {env} {shlex.quote(sys.executable)} -m npuscope {shlex.quote(str(profile))}"
        command = f"{run}; echo $? > {shlex.quote(str(self.code_file))}; sleep 120"
        subprocess.run([*self.tmux, "new-session", "-d", "-s", name, "-x", "120", "-y", "32", command], check=True)
        subprocess.run([*self.tmux, "resize-window", "-t", name, "-x", "120", "-y", "32"], check=True)
        shell = subprocess.run(
            [*self.tmux, "display-message", "-p", "-t", name, "#{pane_pid}"], capture_output=True, text=True, check=True
        )
        self.shell_pid = int(shell.stdout.strip())
        socket = subprocess.run(
            [*self.tmux, "display-message", "-p", "#{socket_path}"], capture_output=True, text=True, check=True
        )
        self.socket = Path(socket.stdout.strip())
        self.pid = self._child()

    def _child(self) -> int:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for entry in os.listdir("/proc"):
                if entry.isdigit() and _parent(int(entry)) == self.shell_pid:
                    return int(entry)
            time.sleep(0.05)
        raise AssertionError("npuscope did not start in the pane")

    def screen(self) -> str:
        return subprocess.run(
            [*self.tmux, "capture-pane", "-p", "-t", self.name], capture_output=True, text=True
        ).stdout

    def keys(self, *keys: str) -> None:
        subprocess.run([*self.tmux, "send-keys", "-t", self.name, *keys], check=True)

    def wait_for(self, predicate, what: str, timeout: float = 120.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.screen()
            if predicate(text):
                return text
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}; screen:\n{self.screen()}")

    def mid_timeline(self) -> list[float]:
        """Wait until the timeline is being parsed; the distinct MB counts seen on the way."""
        seen: list[float] = []

        def parsing(text: str) -> bool:
            found = PROGRESS.search(text)
            if found is None:
                return False
            done = float(found.group(1).replace(",", ""))
            if done not in seen:
                seen.append(done)
            return len(seen) >= 3 and done < 0.6 * float(found.group(2).replace(",", ""))

        self.wait_for(parsing, "the timeline's progress to move")
        return seen

    def press_and_time_exit(self, key: str, limit: float = 15.0) -> float:
        """Seconds from the key reaching the terminal until the npuscope process is gone (at
        most `limit`). The clock starts once `tmux send-keys` returns, that is once the tmux
        server has written the key to the pane: starting a tmux client on a loaded 2-core
        machine once took 1.6 s by itself, time no user waits for after pressing a key."""
        self.keys(key)
        start = time.monotonic()
        while _running(self.pid) and time.monotonic() - start < limit:
            time.sleep(0.01)
        return time.monotonic() - start

    def exit_code(self) -> int:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.code_file.exists() and self.code_file.read_text().strip():
                return int(self.code_file.read_text())
            time.sleep(0.05)
        raise AssertionError("no exit code written")

    def close(self) -> None:
        subprocess.run([*self.tmux, "kill-server"], capture_output=True)
        self.socket.unlink(missing_ok=True)


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
def explorer(big_profile, tmp_path, request):
    term = Explorer(f"npuscope-load-{os.getpid()}-{request.node.name[-20:]}", big_profile, tmp_path)
    yield term
    term.close()


def test_q_during_a_cold_load_ends_the_process_within_a_second(explorer):
    seen = explorer.mid_timeline()
    assert seen == sorted(seen)  # bytes read, rising
    took = explorer.press_and_time_exit("q")
    assert took < QUIT_WITHIN, f"q took {took:.2f} s to end the process"
    assert explorer.exit_code() == 0


def test_ctrl_c_during_a_cold_load_exits_130_within_a_second(explorer):
    explorer.mid_timeline()
    took = explorer.press_and_time_exit("C-c")
    assert took < QUIT_WITHIN, f"ctrl+c took {took:.2f} s to end the process"
    assert explorer.exit_code() == 130


def test_escape_during_a_cold_load_cancels_it(explorer):
    explorer.mid_timeline()
    explorer.keys("Escape")
    screen = explorer.wait_for(lambda s: "loading cancelled" in s, "the cancel state", timeout=30)
    assert "q quits" in screen
    # The parse has stopped: the bar stays where it was, and q still quits.
    took = explorer.press_and_time_exit("q")
    assert took < QUIT_WITHIN, f"q took {took:.2f} s after the cancel"
    assert explorer.exit_code() == 0
