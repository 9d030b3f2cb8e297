"""The explorer application: loads a profile in a worker and hands it to the main screen.

Thin on purpose: parsing and diagnosis live in `npuscope.parsers` / `npuscope.analysis`,
every pane is its own widget, the main screen wires them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Any

from textual import on, work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from npuscope.analysis import Thresholds, diagnose
from npuscope.analysis.compare import compare_runs
from npuscope.analysis.compare_render import render_comparison
from npuscope.parsers import Cancelled, FrameCache, ProfileError, ReadOptions, open_profile

from .messages import LoadFailed, LoadProgressed, ProfileLoaded
from .screens.help_screen import HelpScreen, all_keys
from .screens.main_screen import MainScreen
from .screens.text_screen import TextScreen


class NpuscopeApp(App):
    """npuscope explorer."""

    CSS_PATH = "app.tcss"
    TITLE = "npuscope"
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Keys"),
    ]

    def __init__(
        self,
        path: Path,
        *,
        capture: str | int | None = None,
        cache: bool = True,
        thresholds: Thresholds | None = None,
        export_dir: Path | None = None,
        compare_with: Path | None = None,
        read: ReadOptions | None = None,
    ) -> None:
        super().__init__()
        self.read = read or ReadOptions()
        self.compare_with = compare_with
        self.path = path
        self.capture = capture
        self.use_cache = cache
        self.thresholds = thresholds or Thresholds()
        self.export_dir = export_dir
        self.cancel_load = threading.Event()
        self.error_message: str | None = None
        self.main = MainScreen()

    async def on_mount(self) -> None:
        await self.push_screen(self.main)
        self.load(self.capture)

    def load(self, capture: str | int | None) -> None:
        self.cancel_load.clear()
        self.main.show_loading(f"opening {self.path}")
        self._load(capture)

    def open_path(self, path: Path) -> None:
        """Back to the main screen, loading the profile at `path` in place of the open one."""
        while self.screen is not self.main and len(self.screen_stack) > 1:
            self.pop_screen()
        self.path = Path(path)
        self.capture = None
        self.load(None)

    @work(thread=True, exclusive=True, exit_on_error=False, group="load", description="load profile")
    def _load(self, capture: str | int | None) -> None:
        def progress(done: int, total: int, label: str) -> None:
            self.post_message(LoadProgressed(done, total, label))

        cache = FrameCache(enabled=self.use_cache, background=True)
        try:
            profile = open_profile(
                self.path,
                capture=capture,
                cache=cache,
                progress=progress,
                cancel=self.cancel_load,
                pmu=False,
                strict=self.read.strict,
                source=self.read.source,
                timeline=self.read.timeline,
            )
            self.post_message(LoadProgressed(1, 1, "diagnosing"))
            diagnosis = diagnose(profile, self.thresholds, cache=cache)
        except Cancelled:
            self.post_message(LoadFailed("loading cancelled"))
            return
        except ProfileError as exc:
            self.post_message(LoadFailed(str(exc), exc.title))
            return
        self.post_message(ProfileLoaded(profile, diagnosis))

    @on(LoadProgressed)
    def _progressed(self, message: LoadProgressed) -> None:
        self.main.show_progress(message.done, message.total, message.label)

    @on(ProfileLoaded)
    def _loaded(self, message: ProfileLoaded) -> None:
        self.main.show_profile(message.profile, message.diagnosis)
        if self.compare_with is not None:
            self.compare(self.compare_with)
            self.compare_with = None

    def compare(self, other: Path) -> None:
        """Open `other` and show it against the loaded profile (BASE = loaded, NEW = other)."""
        self.notify(f"comparing with {other} …", markup=False)
        self._compare(other)

    @work(thread=True, exclusive=True, exit_on_error=False, group="compare", description="compare")
    def _compare(self, other: Path) -> None:
        cache = FrameCache(enabled=self.use_cache, background=True)
        try:
            new = open_profile(other, cache=cache, pmu=False)
            # The open profile's diagnosis is reused: only NEW is diagnosed.
            base, base_diagnosis = self.main.loaded
            comparison = compare_runs(base, new, thresholds=self.thresholds, base_diagnosis=base_diagnosis)
        except ProfileError as exc:
            self.call_from_thread(self.notify, str(exc), title="Cannot compare", severity="error", markup=False)
            return
        text = render_comparison(comparison, "text", top=None)
        self.call_from_thread(self.push_screen, TextScreen(f"Compare: {other} against the open profile", text))

    @on(LoadFailed)
    def _failed(self, message: LoadFailed) -> None:
        self.fail(message.message, message.title)

    @on(Worker.StateChanged)
    def _worker_changed(self, event: Worker.StateChanged) -> None:
        # Anything the loader did not expect: say it in one line, never crash the UI.
        if event.state == WorkerState.ERROR and event.worker.group in ("load", "compare"):
            error = event.worker.error
            self.fail(f"unexpected error while {event.worker.description}: {type(error).__name__}: {error}")

    def fail(self, message: str, title: str = "Cannot load") -> None:
        if self.main.profile is None:
            self.error_message = message
            self.exit(return_code=2)
        else:
            # Keep showing the profile that is open (and say which path it came from).
            self.path = self.main.profile.path
            self.main.add_class("loaded")
            self.notify(message, title=title, severity="error", markup=False)

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The palette offers every action of the main screen, named as in the footer."""
        yield from super().get_system_commands(screen)
        if self.main.profile is None:
            return
        for binding in MainScreen.BINDINGS:
            if not isinstance(binding, Binding) or binding.action.startswith("escape"):
                continue
            yield SystemCommand(
                binding.description,
                f"key: {binding.key}",
                partial(self.main.run_action, binding.action),
            )

    def action_help(self) -> None:
        self.push_screen(HelpScreen(all_keys(self.BINDINGS, MainScreen.BINDINGS)))

    def cancel_loading(self) -> None:
        self.cancel_load.set()
