"""The explorer's experiment (`x`) driven by Pilot, against a real OpenSSH server on 127.0.0.1
and real Paddle CPU trainings (fixtures/paddle_train_tiny.py).

The test plants the change, as tests/test_experiment.py does: NPUSCOPE_TINY_STEP_MS adds that
many milliseconds of host work to each step; the base run has 20, the experiment sets 0.
A copy of a real sample with a run record shows the change prefilled from the finding's action.
"""

from __future__ import annotations

import importlib.util
import shutil
import time
from pathlib import Path

import pytest
from pilot_helpers import wait_loaded

if importlib.util.find_spec("paddle") is None:
    pytest.skip("could not import 'paddle': No module named 'paddle'", allow_module_level=True)
pytestmark = pytest.mark.slow

from test_capture_ssh import cli, group_alive, run_dirs  # noqa: E402
from test_experiment import STEPS, training  # noqa: E402

from npuscope.analysis.actions import NO_ACTION  # noqa: E402
from npuscope.capture.run_record import RUN_RECORD, write_run_record  # noqa: E402
from npuscope.capture.spec import CaptureSpec  # noqa: E402
from npuscope.tui.app import NpuscopeApp  # noqa: E402
from npuscope.tui.screens.experiment_screen import ExperimentScreen  # noqa: E402
from npuscope.tui.screens.main_screen import MainScreen  # noqa: E402
from npuscope.tui.widgets.cards_pane import CardsPane, FindingCard  # noqa: E402

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "samples"
SIZE = (80, 24)
DEADLINE_S = 240


async def until(pilot, condition, what: str, screen: ExperimentScreen | None = None) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            status = screen.status_text if screen is not None else ""
            raise AssertionError(f"timed out waiting for {what}; status: {status}")
        await pilot.pause(0.1)


@pytest.fixture
def base_run(sshd, tmp_path):
    remote, out = tmp_path / "remote", tmp_path / "captures"
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
    return Path(res.stdout.strip().splitlines()[-1]), remote


def app_on(path: Path, tmp_path: Path) -> NpuscopeApp:
    return NpuscopeApp(path, cache=False, export_dir=tmp_path / "exports")


async def open_experiment(pilot) -> ExperimentScreen:
    await pilot.press("x")
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, ExperimentScreen), type(screen)
    return screen


async def test_x_captures_again_and_ends_in_the_verdict(base_run, tmp_path):
    folder, _ = base_run
    app = app_on(folder, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        screen = await open_experiment(pilot)
        assert screen.run == folder.resolve()
        change = screen.query_one("#change")
        change.value = "NPUSCOPE_TINY_STEP_MS=0"
        screen.query_one("#min-change").value = "25"
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert screen.running
        await until(pilot, lambda: not screen.running, "the experiment to end", screen)
        assert screen.result is not None, screen.status_text
        assert screen.result.verdict == "improved"
        text = screen.verdict_text
        assert text.startswith("Experiment: NPUSCOPE_TINY_STEP_MS=0")
        assert f"base  {folder.resolve()}" in text and "Verdict: improved: mean step time -" in text
        assert screen.status_text.startswith("improved")
        # o opens the new run in the explorer
        new = screen.new_folder
        assert new is not None and new.parent == folder.parent and (new / RUN_RECORD).is_file()
        screen.query_one("#experiment-verdict").focus()
        await pilot.press("o")
        await until(
            pilot,
            lambda: (
                isinstance(app.screen, MainScreen) and app.main.profile is not None and app.main.profile.path == new
            ),
            "the new run to open",
        )


async def test_esc_cancels_the_job_on_the_host(base_run, tmp_path):
    folder, remote = base_run
    before = set(run_dirs(remote))
    app = app_on(folder, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        screen = await open_experiment(pilot)
        screen.query_one("#change").value = "NPUSCOPE_TINY_STEP_MS=2000"  # 14 steps of 2 s
        await pilot.press("ctrl+s")
        await until(pilot, lambda: bool(screen.started), "the job to start", screen)
        run = next(r for r in run_dirs(remote) if r not in before)
        await until(pilot, lambda: (run / "pid").is_file() and (run / "pid").read_text().strip(), "its pid")
        pid = int((run / "pid").read_text())
        assert group_alive(pid)
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, MainScreen), "the screen to close")
        await until(pilot, lambda: not group_alive(pid), "the job to end on the host")
    assert sorted(p.name for p in folder.parent.iterdir()) == [folder.name]  # nothing fetched


async def test_the_change_is_prefilled_from_the_findings_action(tmp_path):
    # a real sample (its dominant_op_type advice names FLAGS_npu_jit_compile=false) made a
    # fetched run by a run record beside it
    folder = tmp_path / "fetched"
    shutil.copytree(SAMPLES / "cann5x_device_summary", folder)
    write_run_record(folder, CaptureSpec(host="local", command=("python", "train.py")).check(), (("local", "x"),))
    app = app_on(folder, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        pane = app.main.query_one(CardsPane)
        cards = [c.finding.rule for c in pane.query(FindingCard)]
        # a finding whose advice is a code change: nothing prefilled, and the line says so
        pane.index = next(i for i, c in enumerate(pane.query(FindingCard)) if not c.finding.actions)
        screen = await open_experiment(pilot)
        assert screen.query_one("#change").value == ""
        assert NO_ACTION in screen.status_text
        await pilot.press("ctrl+s")  # no change: refused, nothing starts
        await pilot.pause()
        assert not screen.running and "no change" in screen.status_text
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)
        # the finding whose advice names the switch
        pane.index = cards.index("dominant_op_type")
        screen = await open_experiment(pilot)
        assert screen.finding is not None and screen.finding.rule == "dominant_op_type"
        assert screen.query_one("#change").value == "FLAGS_npu_jit_compile=false"
        assert "From dominant_op_type: turns off online (JIT) operator compilation" in screen.status_text
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)


async def test_x_on_a_profile_without_a_run_record_says_so(tmp_path):
    app = app_on(SAMPLES / "cann5x_device_summary", tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_loaded(pilot)
        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)
        notes = [n.message for n in app._notifications]
        assert any("no run record" in n for n in notes), notes
