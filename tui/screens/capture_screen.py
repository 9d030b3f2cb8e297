"""The capture screen: profile a window of a training job on a host, then open what was fetched.

A form describes the capture (`CaptureSpec`, built by `capture.spec.spec_from_form`); Start runs `npuscope.capture.session.capture` on
the app's event loop in a worker and shows its events: the phase, a progress bar, the elapsed
time and the job's log. The job on the host is detached: leaving the screen stops following it,
never the job itself; Runs lists the host's runs, and picking one follows it again (its log from
the start) and fetches it when it ends. On success the form is remembered for that host and the
fetched folder opens in the explorer.

| key | action |
|---|---|
| ctrl+s, Enter in a field | start the capture (Enter in the host field fills in its remembered values) |
| ctrl+r | list the runs on the host; Enter on one follows it |
| ctrl+t | cancel the run being followed (or the run picked in the list) |
| Esc, q | close; a job that is running goes on (q types a q in a field) |
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Iterable, Mapping
from typing import TypeVar, cast

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal
from textual.content import Content
from textual.screen import Screen
from textual.suggester import SuggestFromList
from textual.timer import Timer
from textual.widgets import Button, Checkbox, Footer, Input, Label, Log, OptionList, ProgressBar, Select, Static
from textual.widgets.option_list import Option
from textual.widgets.select import NoSelection
from textual.worker import Worker

from npuscope.analysis.run_registry import record_run
from npuscope.capture import hosts as remembered
from npuscope.capture import session
from npuscope.capture import spec as capture_spec
from npuscope.capture.events import PHASES, Event, LogLine, PhaseStarted, Progressed, RunStarted
from npuscope.capture.run_record import change_text
from npuscope.capture.runs import RunInfo

from ..explorer import explorer
from ..messages import LoadRequested

JIT_CHOICES = (("leave as is", "leave"), ("on", "on"), ("off", "off"))
LOG_LINES = 5000
# Remembered per host: every field but the host itself (values as the form shows them).
FIELDS = (
    "workdir",
    "command",
    "device",
    "start_step",
    "steps",
    "jit_compile",
    "env",
    "msprof",
    "stop",
    "out",
    "ssh_config",
    "remote_cache",
)
WIDGET_IDS = {name: name.replace("_", "-") for name in FIELDS}
# The widgets of FIELDS, and the form's values as they show them (a Select is never blank here).
FormField = Input | Checkbox | Select[str]
FormValues = dict[str, str | bool | NoSelection]
T = TypeVar("T")


class CaptureScreen(Screen[None]):
    BINDINGS = [
        Binding("ctrl+s", "start", "Start"),
        Binding("ctrl+r", "runs", "Runs"),
        Binding("ctrl+t", "cancel_run", "Cancel run"),
        # q closes here too (as in the other screens), rather than quitting under a running capture.
        Binding("escape,q", "close", "Close"),
    ]

    def __init__(
        self,
        *,
        ssh_config: str | None = None,
        remote_root: str = capture_spec.DEFAULT_REMOTE_ROOT,
        host: str | None = None,
    ) -> None:
        super().__init__()
        self.ssh_config = ssh_config
        self.remote_root = remote_root
        self.initial_host = host
        self.running = False
        self.following: tuple[str, str] | None = None  # (host, run id) of the run being followed
        self.started: list[tuple[str, str]] = []  # every (host, run id) of the capture under way
        self.phase = ""
        self.outcome: session.Outcome | None = None
        self._generation = 0  # events of a follow that was replaced are dropped
        self._filled_for: str | None = None
        self._started_at = 0.0
        self._ticker: Timer | None = None
        self._runs: list[RunInfo] = []
        self._runs_host = ""

    # ---------------------------------------------------------------- layout
    def compose(self) -> ComposeResult:
        hosts = remembered.ssh_config_hosts(self.ssh_config)
        yield Label("Capture a profile: a window of training steps, profiled on the host", id="capture-title")
        with Grid(id="capture-form"):
            yield Label("Host")
            yield Input(
                placeholder="ssh host alias, or local",
                id="host",
                compact=True,
                suggester=SuggestFromList(hosts, case_sensitive=True),
            )
            yield Label("Working dir")
            yield Input(placeholder="default: the login folder (local: here)", id="workdir", compact=True)
            yield Label("Command")
            yield Input(
                placeholder="PYTHON SCRIPT [ARGS...]   e.g. python train.py --config a.yaml",
                id="command",
                compact=True,
                classes="wide",
            )
            yield Label("Device")
            yield Select(
                [(d, d) for d in capture_spec.DEVICES], value="npu", allow_blank=False, id="device", compact=True
            )
            yield Label("JIT compile")
            yield Select(JIT_CHOICES, value="leave", allow_blank=False, id="jit-compile", compact=True)
            yield Label("Start step")
            yield Input(str(capture_spec.FORM_DEFAULTS["start_step"]), type="integer", id="start-step", compact=True)
            yield Label("Steps")
            yield Input(str(capture_spec.FORM_DEFAULTS["steps"]), type="integer", id="steps", compact=True)
            yield Label("Environment")
            yield Input(placeholder="KEY=VALUE KEY2=VALUE2", id="env", compact=True, classes="wide")
            yield Label("msprof")
            yield Input(placeholder=capture_spec.DEFAULT_MSPROF, id="msprof", compact=True)
            yield Label("Output folder")
            yield Input(capture_spec.DEFAULT_OUT, id="out", compact=True)
            yield Label("SSH config")
            yield Input(self.ssh_config or "", placeholder="default: ~/.ssh/config", id="ssh-config", compact=True)
            yield Label("Remote cache")
            yield Input(
                self.remote_root if self.remote_root != capture_spec.DEFAULT_REMOTE_ROOT else "",
                placeholder=f"default: {capture_spec.DEFAULT_REMOTE_ROOT}",
                id="remote-cache",
                compact=True,
            )
            yield Label("")
            yield Checkbox(
                "Stop the job after the capture (off: training goes on)",
                value=True,
                id="stop",
                compact=True,
                classes="wide",
            )
        with Horizontal(id="capture-buttons"):
            yield Button("Start", id="start", variant="primary", compact=True)
            yield Button("Runs", id="runs-button", compact=True)
            yield Button("Cancel run", id="cancel-run", compact=True)
            yield Button("Close", id="close", compact=True)
        yield Static("", id="capture-status", markup=False)  # remote messages: plain text
        yield OptionList(id="runs")
        with Horizontal(id="phases"):
            for name in PHASES:
                yield Label(name, id=f"phase-{name}", classes="phase")
        with Horizontal(id="capture-progress"):
            yield ProgressBar(total=1, show_eta=False, id="capture-bar")
            yield Label("", id="elapsed")
        yield Log(max_lines=LOG_LINES, id="capture-log")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#runs", OptionList).display = False
        host = self.initial_host if self.initial_host is not None else remembered.last_host()
        host_input = self.query_one("#host", Input)
        host_input.value = host
        if host:
            self.fill_from_remembered(host)
            self.query_one("#command", Input).focus()
        else:
            host_input.focus()
        self.set_status("Fill in the form; ctrl+s or Enter starts. The job runs detached on the host.")

    # ---------------------------------------------------------------- form
    def field(self, name: str) -> FormField:
        return cast(FormField, self.query_one(f"#{WIDGET_IDS[name]}"))

    def form_values(self) -> FormValues:
        values: FormValues = {}
        for name in FIELDS:
            widget = self.field(name)
            values[name] = bool(widget.value) if isinstance(widget, Checkbox) else widget.value
        return values

    def set_form(self, values: Mapping[str, object]) -> None:
        for name in FIELDS:
            if name not in values:
                continue
            widget, value = self.field(name), values[name]
            if isinstance(widget, Checkbox):
                widget.value = bool(value)
            elif isinstance(widget, Select):
                options = capture_spec.DEVICES if name == "device" else [v for _, v in JIT_CHOICES]
                if isinstance(value, str) and value in options:
                    widget.value = value
            elif isinstance(value, (str, int)) and not isinstance(value, bool):
                widget.value = str(value)

    @property
    def host(self) -> str:
        return self.query_one("#host", Input).value.strip()

    def fill_from_remembered(self, host: str) -> bool:
        """Put the values last used for `host` into the form (once per host change)."""
        host = ",".join(capture_spec.parse_hosts(host)) or host  # `h1, h2` is remembered as h1,h2
        if host == self._filled_for:
            return False
        self._filled_for = host
        values = remembered.load_remembered(host)
        if values:
            self.set_form(values)
            self.set_status(f"{host}: the values of the last capture there")
        return bool(values)

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "host":  # Enter in the host field fills the form, then moves on
            if self.host:
                self.fill_from_remembered(self.host)
            self.query_one("#workdir", Input).focus()
        else:
            self.action_start()

    @on(Input.Blurred, "#host")
    def _host_left(self, event: Input.Blurred) -> None:
        if self.host:
            self.fill_from_remembered(self.host)

    # ---------------------------------------------------------------- status and progress
    def set_status(self, text: str, *, error: bool = False) -> None:
        status = self.query_one("#capture-status", Static)
        status.update(text)
        status.set_class(error, "error")

    @property
    def status_text(self) -> str:
        return str(self.query_one("#capture-status", Static).content)

    @property
    def log_widget(self) -> Log:
        return self.query_one("#capture-log", Log)

    def show_phase(self, phase: str) -> None:
        self.phase = phase
        reached = PHASES.index(phase) if phase in PHASES else -1
        for i, name in enumerate(PHASES):
            label = self.query_one(f"#phase-{name}", Label)
            label.set_class(i == reached, "current")
            label.set_class(i < reached, "done")

    def _tick(self) -> None:
        if not self.running:
            return
        seconds = int(time.time() - self._started_at)
        run = f"run {self.following[1]} on {self.following[0]} · " if self.following else ""
        self.query_one("#elapsed", Label).update(f"{run}elapsed {seconds // 60}:{seconds % 60:02d}")

    def _begin(self, started_at: float | None = None) -> int:
        self._generation += 1
        self.running = True
        self.outcome = None
        self._started_at = started_at or time.time()
        if self._ticker is not None:
            self._ticker.stop()
        self._ticker = self.set_interval(1.0, self._tick)
        self.log_widget.clear()
        self.show_phase("")
        self.query_one("#capture-bar", ProgressBar).update(total=None, progress=0)
        self._tick()
        return self._generation

    def _end(self) -> None:
        self.running = False
        if self._ticker is not None:
            self._ticker.stop()
            self._ticker = None
        self._tick_final()

    def _tick_final(self) -> None:
        seconds = int(time.time() - self._started_at)
        self.query_one("#elapsed", Label).update(f"took {seconds // 60}:{seconds % 60:02d}")

    def show_event(self, event: Event) -> None:
        bar = self.query_one("#capture-bar", ProgressBar)
        match event:
            case PhaseStarted(_, phase, text):
                if phase != self.phase:
                    bar.update(total=None, progress=0)
                self.show_phase(phase)
                self.set_status(f"opening {text}" if phase == "open" else f"{phase}: {text}")
            case Progressed(_, phase, done, total):
                if phase != self.phase:
                    self.show_phase(phase)
                bar.update(total=max(total, 1), progress=done)
            case LogLine(_, text):
                self.log_widget.write_line(text)
            case RunStarted(host, run_id, _):
                self.following = (host, run_id)
                self.started.append(self.following)
                self._tick()

    # ---------------------------------------------------------------- start / follow
    def action_start(self) -> None:
        if self.running:
            self.set_status(f"a capture is in progress ({self._following_text()}); cancel it or wait", error=True)
            return
        try:
            spec = capture_spec.spec_from_form(
                self.host, self.form_values(), ssh_config=self.ssh_config, remote_root=self.remote_root
            )
        except capture_spec.CaptureError as exc:
            self.set_status(str(exc), error=True)
            return
        self.following = None
        self.started = []
        generation = self._begin()
        self.set_status(f"starting on {spec.host}")
        self._follow(spec, None, generation, self.form_values())

    def attach(self, run: RunInfo) -> None:
        """Follow `run` (on the form's host) from the start of its log, and fetch it when it ends."""
        spec = self.host_spec(self._runs_host, out=self._out_folder())
        previous = self._following_text() if self.running else ""
        self.following = (spec.host, run.id)
        self.started = [self.following]
        created = run.record.get("created")
        generation = self._begin(created if isinstance(created, (int, float)) else None)
        note = f" ({previous} goes on, no longer followed)" if previous else ""
        self.set_status(f"following run {run.id} on {spec.host}{note}")
        self._follow(spec, run.id, generation, None)

    def host_spec(self, host: str, *, out: str = capture_spec.DEFAULT_OUT) -> capture_spec.CaptureSpec:
        """A spec that only says where runs live (listing, following, cancelling a run)."""
        return capture_spec.CaptureSpec(
            host=host, command=(), ssh_config=self.form_ssh_config, remote_root=self.form_remote_root, out=out
        )

    @property
    def form_ssh_config(self) -> str | None:
        """The ssh config the form names, else the one the explorer was started with."""
        return self.query_one("#ssh-config", Input).value.strip() or self.ssh_config

    @property
    def form_remote_root(self) -> str:
        """The remote cache folder the form names, else the explorer's (or the default)."""
        return self.query_one("#remote-cache", Input).value.strip() or self.remote_root

    def _out_folder(self) -> str:
        return self.query_one("#out", Input).value.strip() or capture_spec.DEFAULT_OUT

    def _following_text(self) -> str:
        return f"run {self.following[1]} on {self.following[0]}" if self.following else "starting"

    @work(exclusive=True, group="capture", exit_on_error=False, description="capture")
    async def _follow(
        self, spec: capture_spec.CaptureSpec, run_id: str | None, generation: int, values: FormValues | None
    ) -> None:
        def emit(event: Event) -> None:
            if generation == self._generation:
                self.show_event(event)

        try:
            if run_id is None:
                outcome = await session.capture(spec, emit)
            else:
                outcome = await session.attach(spec, run_id, emit)
        except Exception as exc:  # the host's or the form's error, or a bug: the error route says which
            if generation == self._generation:
                tail = exc.log_tail if isinstance(exc, capture_spec.CaptureError) else ()
                self._failed(explorer(self.app).errors.describe(exc), tail)
            return
        if generation != self._generation:
            return
        self._succeeded(spec, outcome, values)

    def _failed(self, message: str, tail: Iterable[str]) -> None:
        self._end()
        self.query_one("#capture-bar", ProgressBar).update(total=1, progress=0)
        tail = list(tail)
        if tail:
            log = self.log_widget
            log.write_line("── last lines of the job's log ──")
            log.write_lines(tail)
        self.set_status(message, error=True)

    def _succeeded(self, spec: capture_spec.CaptureSpec, outcome: session.Outcome, values: FormValues | None) -> None:
        self._end()
        self.outcome = outcome
        self.query_one("#capture-bar", ProgressBar).update(total=1, progress=1)
        self.show_phase("open")
        if values is not None:
            try:
                remembered.remember(",".join(spec.all_hosts()), values)
            except OSError as exc:
                self.notify(f"the form was not remembered: {exc}", severity="warning", markup=False)
        problem = record_run(
            outcome.folder,
            kind="captured",
            host=",".join(spec.all_hosts()),
            command=" ".join(spec.command),
            change=change_text(spec),
        )
        if problem:
            self.notify(problem, title="Runs registry", severity="warning", markup=False)
        self.set_status(f"fetched into {outcome.folder}; opening it")
        self.app.notify(f"Captured on {', '.join(spec.all_hosts())}: {outcome.folder}", title="Capture", markup=False)
        self.app.post_message(LoadRequested(outcome.folder))

    # ---------------------------------------------------------------- runs
    def action_runs(self) -> None:
        host = self.host
        if not host:
            self.set_status("give a host first", error=True)
            return
        if len(capture_spec.parse_hosts(host)) > 1:
            self.set_status("Runs lists the runs of one host: give a single host", error=True)
            return
        self.set_status(f"listing the runs on {host} …")
        self._list_runs(host)

    @work(exclusive=True, group="runs", exit_on_error=False, description="list runs")
    async def _list_runs(self, host: str) -> None:
        runs = await self._ask(session.list_runs(self.host_spec(host)), "cannot list the runs")
        if runs is None:
            return
        self._runs, self._runs_host = runs, host
        options = self.query_one("#runs", OptionList)
        options.clear_options()
        # Commands come from the host: plain text, never markup.
        options.add_options([Option(Content(r.label()), id=r.id) for r in runs])
        options.display = bool(runs)
        if not runs:
            self.set_status(f"no runs on {host} (in {self.form_remote_root})")
            return
        options.highlighted = 0
        options.focus()
        self.set_status(f"{len(runs)} run(s) on {host}, newest first: Enter follows one, ctrl+t cancels it")

    @on(OptionList.OptionSelected, "#runs")
    def _run_chosen(self, event: OptionList.OptionSelected) -> None:
        run = next((r for r in self._runs if r.id == event.option_id), None)
        if run is None:
            return
        event.option_list.display = False
        self.attach(run)

    def picked_run(self) -> str | None:
        options = self.query_one("#runs", OptionList)
        if not options.display or options.highlighted is None:
            return None
        return options.get_option_at_index(options.highlighted).id

    def action_cancel_run(self) -> None:
        if self.running and self.started:
            targets = list(self.started)  # every host of the capture under way
        elif (picked := self.picked_run()) is not None:
            targets = [(self._runs_host, picked)]
        else:
            self.set_status("no run to cancel: start one, or pick one from Runs (ctrl+r)", error=True)
            return
        self.set_status("cancelling " + ", ".join(f"run {r} on {h}" for h, r in targets) + " …")
        for host, run_id in targets:
            self._cancel(host, run_id)

    @work(group="cancel", exit_on_error=False, description="cancel run")
    async def _cancel(self, host: str, run_id: str) -> None:
        line = await self._ask(session.cancel(self.host_spec(host), run_id), "cannot cancel")
        if line is None:
            return
        self.log_widget.write_line(f"── {line} ──")
        self.set_status(line)
        if self.query_one("#runs", OptionList).display:
            self._list_runs(host)

    async def _ask(self, call: Awaitable[T], what: str) -> T | None:
        """Await a short remote call; on failure show one line (through the error route) and
        return None."""
        try:
            return await call
        except Exception as exc:  # the host's error, or a bug (`what` leads the line of a bug)
            lead = "" if isinstance(exc, capture_spec.CaptureError) else f"{what}: "
            self.set_status(explorer(self.app).errors.describe(exc, lead=lead), error=True)
        return None

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        explorer(self.app).report_worker(event)

    # ---------------------------------------------------------------- leaving
    def action_close(self) -> None:
        if self.running:
            if self.following:
                host, run_id = self.following
                message = f"run {run_id} keeps running on {host}; press c, then Runs (ctrl+r) to follow it again"
            else:
                message = "left while the job was starting; it may be running: Runs (ctrl+r) lists it"
            self.set_status(message)
            self.app.notify(message, title="Capture", markup=False, timeout=8)
        self.workers.cancel_group(self, "capture")
        self.app.pop_screen()

    @on(Button.Pressed)
    def _button(self, event: Button.Pressed) -> None:
        actions = {
            "start": self.action_start,
            "runs-button": self.action_runs,
            "cancel-run": self.action_cancel_run,
            "close": self.action_close,
        }
        if event.button.id in actions:
            actions[event.button.id]()
