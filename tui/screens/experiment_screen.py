"""The experiment screen (`x`): capture the open run's job again with a change and show the verdict.

The open profile is a folder `npuscope capture` fetched: its run record (capture/run_record.py)
says where and how the job ran. The form holds the change, prefilled with the switch the
highlighted finding's advice names (analysis/actions.py) and editable: environment items
`KEY=VALUE ...`, the JIT setting, the profiled steps and the smallest change called a change.
Start captures the job again on its host (as the capture screen does: phases, progress, the
job's log), fetches it beside the run, analyses both runs and shows the verdict
(analysis/experiment.py) in place of the log. Esc while the job runs cancels it on its host
first: an experiment half done measures nothing.

| key | action |
|---|---|
| ctrl+s, Enter in a field | start the experiment |
| o | open the new run in the explorer (once measured) |
| Esc, q | close; a job under way is cancelled on its host first (q types a q in a field) |
"""

from __future__ import annotations

import time
from pathlib import Path

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Button, Footer, Input, Label, Log, ProgressBar, Select, Static
from textual.worker import Worker, get_current_worker

from npuscope.analysis import Finding
from npuscope.analysis.actions import NO_ACTION
from npuscope.analysis.experiment import Change, Experiment, analyse_run, measure, render_experiment
from npuscope.analysis.headline import headline
from npuscope.analysis.run_registry import record_run
from npuscope.capture import session
from npuscope.capture import spec as capture_spec
from npuscope.capture.events import PHASES, Event, LogLine, PhaseStarted, Progressed, RunStarted
from npuscope.capture.run_record import RunRecord, again
from npuscope.text import printable

from ..explorer import explorer
from ..messages import LoadRequested

JIT_CHOICES = (("as the run", "leave"), ("on", "on"), ("off", "off"))
LOG_LINES = 2000
DEFAULT_MIN_CHANGE = "1"


def prefilled(finding: Finding | None) -> tuple[str, str]:
    """The change the finding's actions suggest (`KEY=VALUE ...`) and a line saying why."""
    if finding is None:
        return "", "No finding highlighted: type the change to try (KEY=VALUE ...)."
    if not finding.actions:
        return "", f"{finding.rule}: {NO_ACTION}; type a change to try (KEY=VALUE ...)."
    return " ".join(a.text for a in finding.actions), f"From {finding.rule}: {finding.actions[0].effect}."


class ExperimentScreen(Screen[None]):
    BINDINGS = [
        Binding("ctrl+s", "start", "Start"),
        Binding("o", "open_new", "Open the new run"),
        Binding("escape,q", "close", "Close (cancels a job under way)"),
    ]

    def __init__(self, run: Path, record: RunRecord, finding: Finding | None = None) -> None:
        super().__init__()
        self.run = run
        self.record = record
        self.finding = finding
        self.running = False
        self.started: list[tuple[str, str]] = []  # (host, run id) of the job under way
        self.spec: capture_spec.CaptureSpec | None = None
        self.result: Experiment | None = None
        self.new_folder: Path | None = None
        self.phase = ""
        self._started_at = 0.0

    def compose(self) -> ComposeResult:
        spec = self.record.spec
        change, why = prefilled(self.finding)
        hosts = ", ".join(spec.all_hosts())
        yield Label(printable(f"Experiment: {self.run.name} again on {hosts}, with a change"), id="experiment-title")
        with Grid(id="experiment-form"):
            yield Label("Change")
            yield Input(change, placeholder="KEY=VALUE KEY2=VALUE2", id="change", compact=True, classes="wide")
            yield Label("JIT compile")
            yield Select(JIT_CHOICES, value="leave", allow_blank=False, id="jit", compact=True)
            yield Label("Steps")
            steps = spec.steps if spec.steps >= 2 else 5
            yield Input(str(steps), type="integer", id="steps", compact=True)
            yield Label("Min change %")
            yield Input(DEFAULT_MIN_CHANGE, type="number", id="min-change", compact=True)
        with Horizontal(id="experiment-buttons"):
            yield Button("Start", id="start", variant="primary", compact=True)
            yield Button("Close", id="close", compact=True)
        yield Static(why, id="experiment-status", markup=False)
        with Horizontal(id="experiment-phases"):
            for name in PHASES:
                yield Label(name, id=f"phase-{name}", classes="phase")
        with Horizontal(id="experiment-progress"):
            yield ProgressBar(total=1, show_eta=False, id="experiment-bar")
            yield Label("", id="experiment-elapsed")
        yield Log(max_lines=LOG_LINES, id="experiment-log")
        with VerticalScroll(id="experiment-verdict"):
            yield Static("", id="verdict-text", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#experiment-verdict").display = False
        self.query_one("#change", Input).focus()

    # ---------------------------------------------------------------- status
    def set_status(self, text: str, *, error: bool = False) -> None:
        status = self.query_one("#experiment-status", Static)
        status.update(text)
        status.set_class(error, "error")

    @property
    def status_text(self) -> str:
        return str(self.query_one("#experiment-status", Static).content)

    @property
    def verdict_text(self) -> str:
        return str(self.query_one("#verdict-text", Static).content)

    def show_phase(self, phase: str) -> None:
        self.phase = phase
        reached = PHASES.index(phase) if phase in PHASES else -1
        for i, name in enumerate(PHASES):
            label = self.query_one(f"#phase-{name}", Label)
            label.set_class(i == reached, "current")
            label.set_class(i < reached, "done")

    def _tick(self) -> None:
        if self.running:
            seconds = int(time.time() - self._started_at)
            self.query_one("#experiment-elapsed", Label).update(f"elapsed {seconds // 60}:{seconds % 60:02d}")

    def show_event(self, event: Event) -> None:
        bar = self.query_one("#experiment-bar", ProgressBar)
        match event:
            case PhaseStarted(_, phase, text):
                if phase != self.phase:
                    bar.update(total=None, progress=0)
                self.show_phase(phase)
                if phase != "open":
                    self.set_status(f"{phase}: {text}" if text else phase)
            case Progressed(_, phase, done, total):
                if phase != self.phase:
                    self.show_phase(phase)
                bar.update(total=max(total, 1), progress=done)
            case LogLine(_, text):
                self.query_one("#experiment-log", Log).write_line(text)
            case RunStarted(host, run_id, _):
                self.started.append((host, run_id))

    # ---------------------------------------------------------------- start
    def _change(self) -> tuple[Change, capture_spec.CaptureSpec, float]:
        env = capture_spec.parse_env_text(self.query_one("#change", Input).value)
        jit = self.query_one("#jit", Select).value
        jit_compile = jit if jit in ("on", "off") else None
        steps = capture_spec.whole("steps", self.query_one("#steps", Input).value)
        if steps < 2:
            raise capture_spec.usage_error("steps: 2 or more (the verdict needs the spread of several steps)")
        text = self.query_one("#min-change", Input).value.strip() or DEFAULT_MIN_CHANGE
        try:
            floor = float(text)
        except ValueError:
            raise capture_spec.usage_error(f"min change: a percentage, got {text!r}") from None
        if not 0 <= floor < 1000:
            raise capture_spec.usage_error(f"min change: from 0 to 1000 percent, got {text}")
        spec = again(self.record, env=env, jit_compile=jit_compile, steps=steps)
        return Change(env=env, jit_compile=jit_compile, steps=spec.steps), spec, floor

    def action_start(self) -> None:
        if self.running:
            self.set_status("the experiment is under way: wait for it, or Esc to cancel it", error=True)
            return
        try:
            change, spec, floor = self._change()
        except capture_spec.CaptureError as exc:
            self.set_status(str(exc), error=True)
            return
        if not change.env and change.jit_compile is None:
            self.set_status(
                "no change: give KEY=VALUE or a JIT setting (the same job again measures nothing)", error=True
            )
            return
        self.running, self.started, self.spec, self.result = True, [], spec, None
        self._started_at = time.time()
        self.set_interval(1.0, self._tick)
        self.query_one("#experiment-log", Log).clear()
        self.query_one("#experiment-log").display = True
        self.query_one("#experiment-verdict").display = False
        self.set_status(f"{change.text}: {spec.steps} steps on {', '.join(spec.all_hosts())}")
        self._capture(spec, change, floor)

    @work(exclusive=True, group="experiment", exit_on_error=False, description="experiment capture")
    async def _capture(self, spec: capture_spec.CaptureSpec, change: Change, floor: float) -> None:
        try:
            outcome = await session.capture(spec, self.show_event)
        except Exception as exc:  # the host's error, or a bug: the error route says which
            self.running = False
            tail = exc.log_tail if isinstance(exc, capture_spec.CaptureError) else ()
            log = self.query_one("#experiment-log", Log)
            if tail:
                log.write_line("── last lines of the job's log ──")
                log.write_lines(list(tail))
            self.set_status(explorer(self.app).errors.describe(exc), error=True)
            return
        self.new_folder = outcome.folder
        self.set_status(f"fetched into {outcome.folder}; measuring both runs …")
        self._measure(outcome.folder, change, floor)

    @work(thread=True, exclusive=True, group="measure", exit_on_error=False, description="measure experiment")
    def _measure(self, new: Path, change: Change, floor: float) -> None:
        settings = explorer(self.app).settings
        try:
            base_run = analyse_run(self.run, settings.thresholds, use_cache=settings.use_cache)
            new_run = analyse_run(new, settings.thresholds, use_cache=settings.use_cache)
            result = measure(
                base_run, new_run, change, min_change_pct=floor, base_path=str(self.run), new_path=str(new)
            )
        except Exception as exc:  # bad input or a bug: one line through the error route
            if not get_current_worker().is_cancelled:
                self.app.call_from_thread(self._measure_failed, exc)
            return
        spec = self.spec
        record_run(
            new,
            kind="experiment",
            headline=headline(new_run),
            host=",".join(spec.all_hosts()) if spec else "",
            command=" ".join(spec.command) if spec else "",
            change=change.text,
        )
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._measured, result)

    def _measure_failed(self, exc: Exception) -> None:
        self.running = False
        self.set_status(explorer(self.app).errors.describe(exc, lead="cannot measure: "), error=True)

    def _measured(self, result: Experiment) -> None:
        self.running = False
        self.result = result
        self.show_phase("open")
        self.query_one("#experiment-bar", ProgressBar).update(total=1, progress=1)
        self.query_one("#verdict-text", Static).update(render_experiment(result))
        self.query_one("#experiment-log").display = False
        self.query_one("#experiment-verdict").display = True
        self.set_status(f"{result.verdict} · o opens the new run · Esc closes")

    # ---------------------------------------------------------------- leaving
    def action_open_new(self) -> None:
        if self.result is None or self.new_folder is None:
            self.set_status("no new run yet: Start (ctrl+s) captures it", error=True)
            return
        self.app.pop_screen()
        self.app.post_message(LoadRequested(self.new_folder))

    def action_close(self) -> None:
        if not self.running:
            self.app.pop_screen()
            return
        self.workers.cancel_group(self, "experiment")
        self.workers.cancel_group(self, "measure")
        if not self.started:
            self.running = False
            self.app.notify("experiment left while the job was starting", title="Experiment", markup=False)
            self.app.pop_screen()
            return
        self.set_status("cancelling " + ", ".join(f"run {r} on {h}" for h, r in self.started) + " …")
        self._cancel_then_close(list(self.started))

    @work(exclusive=True, group="cancel", exit_on_error=False, description="cancel experiment")
    async def _cancel_then_close(self, targets: list[tuple[str, str]]) -> None:
        spec = self.spec
        lines = []
        for host, run_id in targets:
            try:
                assert spec is not None
                lines.append(await session.cancel(spec.for_host(host), run_id))
            except Exception as exc:  # the host's error: said, the screen still closes
                lines.append(f"could not cancel run {run_id} on {host}: {explorer(self.app).errors.describe(exc)}")
        self.running = False
        self.app.notify("; ".join(lines), title="Experiment cancelled", markup=False, timeout=8)
        self.app.pop_screen()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        self.action_start()

    @on(Button.Pressed)
    def _button(self, event: Button.Pressed) -> None:
        if event.button.id == "start":
            self.action_start()
        elif event.button.id == "close":
            self.action_close()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        explorer(self.app).report_worker(event)
