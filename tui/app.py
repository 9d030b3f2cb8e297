"""The explorer application: owns loading, hands each loaded profile to the main screen.

Thin on purpose: parsing and diagnosis live in `npuscope.parsers` / `npuscope.analysis`,
every pane is its own widget, the main screen wires them.

Loading never holds the event loop: each load (and compare) is a `Job` with its own thread,
cancel event and generation (load_job.py). Screens ask for work with request messages
(`LoadRequested`, `CompareRequested`, `CancelRequested`); jobs answer with result messages
tagged with their generation, and a result whose job is no longer the current one is
dropped (`is_current`), so nothing an older load or compare posts can replace what a newer
one showed. A job's thread is handed what it needs (the path, the `Settings`, the base of a
comparison) and reads nothing of the app.

Errors take one route (tui/errors.py): a failed load or compare says its line where the
screen shows it, a worker that ends in an error is notified by `on_worker_state_changed`
(the screens forward theirs to `report_worker`), and the traceback of anything unexpected
goes to the log (`errors.reported` keeps them for `--debug`).

With `clusters=True` a path that is a cluster (a folder of rank folders) loads its summary
and shows the Ranks view (screens/ranks_screen.py) first; a rank chosen there (`RankRequested`) or the next or
previous one from the main screen (`RankStepRequested`) loads as a capture does, in a job of
its own, and the main screen names the rank. `RanksRequested` shows the Ranks view again as
it was (it stays installed: nothing is reloaded).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

from textual import on, work
from textual.actions import SkipAction
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.worker import Worker

from npuscope.analysis import Diagnosis, Thresholds
from npuscope.analysis.cluster import ClusterSummary
from npuscope.analysis.compare import compare_runs
from npuscope.analysis.compare_render import render_comparison
from npuscope.capture.spec import DEFAULT_REMOTE_ROOT
from npuscope.parsers import Cancelled, Profile, ProfileError, ReadOptions
from npuscope.parsers.layout import Capture
from npuscope.parsers.nodes_file import looks_like_nodes_file

from .errors import ErrorRoute
from .explorer import Settings
from .load_job import (
    Job,
    Progress,
    cluster_ranks,
    load_cluster,
    load_node_cluster,
    load_profile,
    load_rank,
    open_for_compare,
)
from .messages import (
    CancelRequested,
    ClusterLoaded,
    CompareRequested,
    ComparisonFailed,
    ComparisonReady,
    LoadCancelled,
    LoadFailed,
    LoadProgressed,
    LoadRequested,
    ProfileLoaded,
    RankRequested,
    RanksRequested,
    RankStepRequested,
    Result,
    is_current,
)
from .ranks_state import neighbour
from .screens.help_screen import HelpScreen, all_keys
from .screens.main_screen import MainScreen
from .screens.matrix_screen import MatrixScreen
from .screens.parallel_screen import ParallelScreen
from .screens.path_prompt import PathPrompt
from .screens.pick_screen import PickScreen
from .screens.ranks_screen import RanksScreen
from .screens.text_screen import TextScreen

INTERRUPTED = 130  # the exit code of a start interrupted by ctrl+c, as for any command
RANKS_SCREEN = "ranks"  # the installed Ranks view of the open cluster


AFTER_CANCEL_HINT = "Esc: reopen, open another path or quit"
"""The hint of the loading panel once a load was cancelled with nothing open."""


class _LoopExecutor(ThreadPoolExecutor):
    """The event loop's default executor (Textual's thread workers run in it), not waited for
    on exit when the app was quit during a load.

    `asyncio.run` joins it on exit: a long worker (the training views of the profile shown
    before a reload) would hold `q`. The CLI then ends the process without waiting either.
    """

    def __init__(self, app: NpuscopeApp) -> None:
        super().__init__(thread_name_prefix="npuscope-worker")
        self.app = app

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if self.app.left_busy:
            wait, cancel_futures = False, True
        super().shutdown(wait=wait, cancel_futures=cancel_futures)


class NpuscopeApp(App[None]):
    """npuscope explorer."""

    CSS_PATH = "app.tcss"
    TITLE = "npuscope"
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Keys"),
        # Textual's ctrl+c only says how to quit; during a load it stops it and quits (130).
        Binding("ctrl+c", "interrupt", "Stop loading and quit", show=False, system=True),
        # Before the screen's own Esc (clear the filter) while a load runs on the main screen.
        Binding("escape", "cancel_load", "Cancel loading", show=False, priority=True),
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
        clusters: bool = False,
        ssh_config: str | None = None,
        remote_root: str = DEFAULT_REMOTE_ROOT,
        discovered: Sequence[Capture] | None = None,
    ) -> None:
        """`clusters`: a folder of rank folders opens as a cluster, the Ranks view first (else
        as one capture whose cards are the ranks, every rank loaded into one frame).
        `discovered`: the captures the command line found at `path` when it checked it; the
        first load starts from them instead of walking the folder again.
        `ssh_config`, `remote_root`: what the capture screen starts with (--ssh-config,
        --remote-cache)."""
        super().__init__()
        self.settings = Settings(
            read=read or ReadOptions(),
            thresholds=thresholds or Thresholds(),
            use_cache=cache,
            export_dir=export_dir,
            clusters=clusters,
            ssh_config=ssh_config,
            remote_root=remote_root,
        )
        self.errors = ErrorRoute()
        self.compare_with = compare_with
        self.path = path
        self.capture = capture
        self._discovered = tuple(discovered) if discovered is not None else None
        self.error_message: str | None = None
        self.main = MainScreen()
        self._generations = itertools.count(1)
        self.loading: Job | None = None  # the load whose results are taken
        self.comparing: Job | None = None  # the compare whose result is taken
        self.jobs: list[Job] = []  # every job started (their threads may outlive the app)
        self.dropped: list[tuple[str, int]] = []  # (message, generation) of jobs no longer current
        self.cluster: ClusterSummary | None = None  # the open cluster, if the path is one
        self.ranks: RanksScreen | None = None  # its Ranks view (installed while it is open)
        self.rank: str | None = None  # the rank of the cluster the main screen shows
        self.loading_rank: str | None = None  # the rank the current load opens
        # Quit while a load or compare ran: the process ends without waiting for anything it
        # left (its thread, a cache write it queued), even if the thread has noticed the cancel.
        self.left_busy = False

    # What the explorer was started with, by name.
    @property
    def read(self) -> ReadOptions:
        return self.settings.read

    @property
    def thresholds(self) -> Thresholds:
        return self.settings.thresholds

    @property
    def use_cache(self) -> bool:
        return self.settings.use_cache

    @property
    def export_dir(self) -> Path | None:
        return self.settings.export_dir

    @property
    def clusters(self) -> bool:
        return self.settings.clusters

    async def on_mount(self) -> None:
        asyncio.get_running_loop().set_default_executor(_LoopExecutor(self))
        await self.push_screen(self.main)
        found, self._discovered = self._discovered, None  # the first load's only
        self.start_load(self.path, self.capture, found=found)

    # ---------------------------------------------------------------- errors
    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        self.report_worker(event)

    def report_worker(self, event: Worker.StateChanged) -> None:
        """A worker (the app's, or a screen's forwarded here) that ended in an error: its
        line is notified, its traceback logged."""
        line = self.errors.worker_failed(event.worker, event.state)
        if line is not None:
            self.notify(line, title="Error", severity="error", markup=False, timeout=10)

    # ---------------------------------------------------------------- jobs
    def _job(self, kind: str) -> Job:
        job = Job(next(self._generations), kind)
        self.jobs = [j for j in self.jobs if j.running]
        self.jobs.append(job)
        return job

    @property
    def busy(self) -> bool:
        """A load or compare thread is still running (the process must not wait for it)."""
        return any(job.running for job in self.jobs)

    def _current(self, message: Result, job: Job | None) -> bool:
        """Whether `message` comes from `job`, the current one; else it is dropped."""
        return is_current(message, job.generation if job is not None else None, self.dropped)

    @work(group="load", exit_on_error=False, description="load profile")
    async def _run_load(self, job: Job, path: Path, capture: str | int | None, found: Sequence[Capture] | None) -> None:
        await job.run(partial(self._load, job, path, capture, self.settings, found))

    @work(group="compare", exit_on_error=False, description="compare")
    async def _run_compare(self, job: Job, other: Path, base: Profile, base_diagnosis: Diagnosis) -> None:
        await job.run(partial(self._compare, job, other, base, base_diagnosis, self.settings))

    def _post(self, message: Message) -> None:
        """Post from a job's thread; after the app has closed there is no one to tell."""
        try:
            self.post_message(message)
        except RuntimeError:  # the event loop is closed
            pass

    # ---------------------------------------------------------------- loading
    def start_load(self, path: Path, capture: str | int | None, found: Sequence[Capture] | None = None) -> int:
        """Load `path` in place of the open profile; an older load is cancelled. Its generation.
        `found`: the captures discovered at `path` already, else discovered by the load."""
        if self.loading is not None:
            self.loading.cancel.set()
        job = self.loading = self._job("load")
        self.path, self.capture = path, capture
        self.main.show_loading(f"opening {path}")
        self._run_load(job, path, capture, found)
        return job.generation

    def _load(
        self, job: Job, path: Path, capture: str | int | None, settings: Settings, found: Sequence[Capture] | None
    ) -> None:
        def read(progress: Progress) -> Message:
            if settings.clusters and looks_like_nodes_file(path):
                nodes = load_node_cluster(
                    path,
                    read=settings.read,
                    thresholds=settings.thresholds,
                    use_cache=settings.use_cache,
                    cancel=job.cancel,
                    progress=progress,
                )
                return ClusterLoaded(nodes, job.generation)
            ranks = cluster_ranks(path, capture, found) if settings.clusters else None
            if ranks is not None:
                summary = load_cluster(
                    path,
                    read=settings.read,
                    thresholds=settings.thresholds,
                    use_cache=settings.use_cache,
                    cancel=job.cancel,
                    progress=progress,
                    ranks=ranks,
                )
                return ClusterLoaded(summary, job.generation)
            profile, diagnosis = load_profile(
                path,
                capture=capture,
                captures=found,
                read=settings.read,
                thresholds=settings.thresholds,
                use_cache=settings.use_cache,
                cancel=job.cancel,
                progress=progress,
            )
            return ProfileLoaded(profile, diagnosis, job.generation)

        self._load_outcome(job, read)

    def _load_outcome(self, job: Job, read: Callable[[Progress], Message], what: str = "") -> None:
        """Run `read` (given the progress callback) in the job's thread and post what came of
        it: its message, the cancel, or the failure (`what` leads its line)."""

        def progress(done: int, total: int, label: str) -> None:
            self._post(LoadProgressed(done, total, label, job.generation))

        try:
            message = read(progress)
        except Cancelled:
            self._post(LoadCancelled(job.generation))
        except Exception as exc:  # bad input or a bug: the error route says which (`_failed`)
            self._post(LoadFailed(exc, what, job.generation))
        else:
            self._post(message)

    # ---------------------------------------------------------------- clusters
    @work(group="load", exit_on_error=False, description="load rank")
    async def _run_rank(self, job: Job, summary: ClusterSummary, rank: str) -> None:
        await job.run(partial(self._load_rank, job, summary, rank, self.settings))

    def start_rank(self, rank: str) -> int:
        """Load rank `rank` of the open cluster into the main screen; an older load is
        cancelled. From the Ranks view its progress shows there (Esc cancels). Its generation."""
        assert self.cluster is not None, "no cluster is open"
        if self.loading is not None:
            self.loading.cancel.set()
        job = self.loading = self._job("load")
        self.loading_rank = rank
        if self.ranks is not None and self.screen is self.ranks:
            self.ranks.show_loading(rank)
        else:
            self.main.show_loading(f"opening rank {rank}")
        self._run_rank(job, self.cluster, rank)
        return job.generation

    def _load_rank(self, job: Job, summary: ClusterSummary, rank: str, settings: Settings) -> None:
        def read(progress: Progress) -> Message:
            profile, diagnosis, views = load_rank(
                summary,
                rank,
                read=settings.read,
                thresholds=settings.thresholds,
                use_cache=settings.use_cache,
                cancel=job.cancel,
                progress=progress,
            )
            return ProfileLoaded(profile, diagnosis, job.generation, rank=rank, views=views)

        self._load_outcome(job, read, f"rank {rank}: ")

    @on(ClusterLoaded)
    def _cluster_loaded(self, message: ClusterLoaded) -> None:
        if not self._current(message, self.loading):
            return
        self.loading = None
        if self.comparing is not None:
            self.comparing.cancel.set()
            self.comparing = None
        self._close_cluster()
        self.cluster = message.summary
        self.ranks = RanksScreen(message.summary)
        self.install_screen(self.ranks, RANKS_SCREEN)
        self.main.show_loading(f"cluster {message.summary.path} · R: the Ranks view")
        while self.screen is not self.main and len(self.screen_stack) > 1:
            self.pop_screen()
        self.push_screen(RANKS_SCREEN)
        for note in message.summary.notes:
            self.notify(note, title="Cluster", markup=False, timeout=8)

    def _close_cluster(self) -> None:
        """The open cluster (if any) is closed: its Ranks view goes, and what it started on
        other machines stops (in a thread: a stop waits for the nodes)."""
        host = self.cluster.host if self.cluster is not None else None
        if host is not None:
            threading.Thread(target=host.stop, name="npuscope-stop-nodes", daemon=True).start()
        ranks, self.ranks = self.ranks, None
        self.cluster, self.rank = None, None
        if ranks is None:
            return
        if ranks in self.screen_stack:
            while self.screen is not self.main and len(self.screen_stack) > 1:
                self.pop_screen()
        self.uninstall_screen(RANKS_SCREEN)
        self.main.set_rank(None)

    @on(RankRequested)
    def _rank_requested(self, message: RankRequested) -> None:
        if self.cluster is None:
            return
        self.start_rank(message.rank)

    @on(RankStepRequested)
    def _rank_step(self, message: RankStepRequested) -> None:
        if self.ranks is None:
            return
        rank = neighbour(self.ranks.frame, self.rank, message.step)
        if rank is None:
            self.notify("No other rank of this cluster can be opened.", markup=False)
            return
        self.start_rank(rank)

    @on(RanksRequested)
    def _ranks_requested(self, message: RanksRequested) -> None:
        if self.ranks is None or self.screen is self.ranks:
            return
        while self.screen is not self.main and len(self.screen_stack) > 1:
            self.pop_screen()
        self.ranks.select_rank(self.rank)
        self.push_screen(RANKS_SCREEN)

    @on(LoadRequested)
    def _load_requested(self, message: LoadRequested) -> None:
        path = Path(message.path).expanduser() if message.path is not None else self.path
        self.open_path(path, message.capture)

    def open_path(self, path: Path, capture: str | int | None = None) -> int:
        """Back to the main screen, loading the profile at `path` in place of the open one."""
        while self.screen is not self.main and len(self.screen_stack) > 1:
            self.pop_screen()
        return self.start_load(Path(path), capture)

    @on(CancelRequested)
    def _cancel_requested(self, message: CancelRequested) -> None:
        if self.loading is None and self.screen is self.main and self.main.profile is None:
            self.offer_after_cancel()  # Esc with nothing open and nothing loading: what next
            return
        self.cancel_loading()

    def cancel_loading(self) -> None:
        """Stop the current load: its thread stops at its next check, the screen says so now."""
        job, self.loading = self.loading, None
        if job is None:
            return
        job.cancel.set()
        self._stopped("loading cancelled")

    @on(LoadProgressed)
    def _progressed(self, message: LoadProgressed) -> None:
        if self._current(message, self.loading):
            if self.ranks is not None and self.screen is self.ranks and self.ranks.loading_rank is not None:
                self.ranks.show_progress(message.done, message.total, message.label)
            else:
                self.main.show_progress(message.done, message.total, message.label)

    @on(ProfileLoaded)
    def _loaded(self, message: ProfileLoaded) -> None:
        if not self._current(message, self.loading):
            return
        self.loading = None
        if self.comparing is not None:  # it compared against the profile replaced now
            self.comparing.cancel.set()
            self.comparing = None
        if message.rank is None or self.cluster is None:
            self._close_cluster()  # a capture opened by itself
        else:
            self.rank = message.rank
            ranks = [r.rank for r in self.cluster.ranks]
            self.main.set_rank(message.rank, f"{ranks.index(message.rank) + 1}/{len(ranks)}")
            if self.ranks is not None:
                self.ranks.show_idle()
                self.ranks.select_rank(message.rank)
                if self.screen is self.ranks:
                    self.pop_screen()
        self.main.show_profile(message.profile, message.diagnosis, message.views)
        if self.compare_with is not None:
            self.start_compare(self.compare_with)
            self.compare_with = None

    @on(LoadCancelled)
    def _cancelled(self, message: LoadCancelled) -> None:
        # A load is cancelled by `cancel_loading` (which said so) or replaced by a newer one:
        # either way it is no longer current by the time its thread notices.
        if self._current(message, self.loading):
            self.loading = None
            self._stopped("loading cancelled")

    @on(LoadFailed)
    def _failed(self, message: LoadFailed) -> None:
        if self._current(message, self.loading):
            self.loading = None
            error = message.error
            title = error.title if isinstance(error, ProfileError) else "Cannot load"
            self.fail(self.errors.describe(error, lead=message.what, during=" while loading"), title)

    def _stopped(self, message: str) -> None:
        """A load ended without a profile: back to the open one, or say so on the empty screen."""
        if self.ranks is not None and self.screen is self.ranks:  # a rank chosen in the Ranks view
            self.ranks.show_idle(message)
            self.notify(message, markup=False)
            return
        if self.main.profile is None and self.ranks is not None:
            self.main.show_loading(f"{message} · R: the Ranks view · q quits", hint=AFTER_CANCEL_HINT)
            return
        if self.main.profile is None:
            self.main.show_loading(f"{message} · q quits", hint=AFTER_CANCEL_HINT)
            return
        if self.cluster is None:
            self.path = self.main.profile.path
        self.main.add_class("loaded")
        self.notify(message, markup=False)

    def fail(self, message: str, title: str = "Cannot load") -> None:
        if self.ranks is not None and (self.screen is self.ranks or self.main.profile is None):
            # A rank of the open cluster: the Ranks view stays and says why.
            self.ranks.show_idle(message)
            self.notify(message, title=title, severity="error", markup=False)
            return
        if self.main.profile is None:
            self.error_message = message
            self.exit(return_code=2)
        else:
            # Keep showing the profile that is open (and say which path it came from).
            if self.cluster is None:
                self.path = self.main.profile.path
            self.main.add_class("loaded")
            self.notify(message, title=title, severity="error", markup=False)

    # ---------------------------------------------------------------- comparing
    def start_compare(self, other: Path) -> int:
        """Open `other` and show it against the loaded profile (BASE = loaded, NEW = other)."""
        if self.comparing is not None:
            self.comparing.cancel.set()
        job = self.comparing = self._job("compare")
        self.notify(f"comparing with {other} …", markup=False)
        base, base_diagnosis = self.main.loaded
        self._run_compare(job, other, base, base_diagnosis)
        return job.generation

    def _compare(self, job: Job, other: Path, base: Profile, base_diagnosis: Diagnosis, settings: Settings) -> None:
        try:
            new = open_for_compare(other, use_cache=settings.use_cache, cancel=job.cancel)
            # The open profile's diagnosis is reused: only NEW is diagnosed.
            comparison = compare_runs(base, new, thresholds=settings.thresholds, base_diagnosis=base_diagnosis)
            text = render_comparison(comparison, "text", top=None)
        except Cancelled:
            return
        except Exception as exc:  # bad input or a bug: the error route says which (`_compare_failed`)
            self._post(ComparisonFailed(other, exc, job.generation))
        else:
            self._post(ComparisonReady(other, text, job.generation))

    @on(CompareRequested)
    def _compare_requested(self, message: CompareRequested) -> None:
        if self.main.profile is None:
            return
        self.start_compare(Path(message.other))

    @on(ComparisonReady)
    def _compared(self, message: ComparisonReady) -> None:
        if self._current(message, self.comparing):
            self.comparing = None
            self.push_screen(TextScreen(f"Compare: {message.other} against the open profile", message.text))

    @on(ComparisonFailed)
    def _compare_failed(self, message: ComparisonFailed) -> None:
        if self._current(message, self.comparing):
            self.comparing = None
            line = self.errors.describe(message.error)
            self.notify(line, title="Cannot compare", severity="error", markup=False)

    # ---------------------------------------------------------------- direct calls
    # Screens post request messages; these remain for callers that still call the app.
    def load(self, capture: str | int | None) -> None:
        self.start_load(self.path, capture)

    def compare(self, other: Path) -> None:
        self.start_compare(other)

    # ---------------------------------------------------------------- keys
    def action_interrupt(self) -> None:
        """ctrl+c: during a load, stop it and quit as an interrupted command does; else
        Textual's hint of how to quit."""
        if self.loading is None and (self.main.profile is not None or self.cluster is not None):
            self.action_help_quit()
            return
        self._cancel_all()
        self.exit(return_code=INTERRUPTED)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel_load":  # only while a load runs on the main screen: else hidden
            return self.loading is not None and self.screen in (self.main, self.ranks)
        return super().check_action(action, parameters)

    def action_cancel_load(self) -> None:
        if self.loading is None or self.screen not in (self.main, self.ranks):
            raise SkipAction()  # Esc does what the screen binds it to
        self.cancel_loading()

    def offer_after_cancel(self) -> None:
        """After a cancelled load with nothing open: reopen it, open another path, or quit."""
        reopen, other, leave = f"Reopen {self.path}", "Open another path…", "Quit"

        def chosen(choice: str | None) -> None:
            if choice == reopen:
                self.start_load(self.path, self.capture)
            elif choice == other:
                self.push_screen(PathPrompt("Open (a profile folder or file)"), opened)
            elif choice == leave:
                self.exit()

        def opened(path: str | None) -> None:
            if path:
                self.start_load(Path(path).expanduser(), None)

        self.push_screen(PickScreen("Loading was cancelled", [reopen, other, leave], ""), chosen)

    async def action_quit(self) -> None:
        self._cancel_all()
        self.exit()

    def _cancel_all(self) -> None:
        self.left_busy = self.left_busy or self.busy
        for job in self.jobs:
            job.cancel.set()

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The palette offers every action of the main screen, named as in the footer."""
        yield from super().get_system_commands(screen)
        if isinstance(screen, (RanksScreen, ParallelScreen, MatrixScreen)):
            for binding in type(screen).BINDINGS:
                if isinstance(binding, Binding) and not binding.action.startswith("escape"):
                    yield SystemCommand(
                        binding.description, f"key: {binding.key}", partial(screen.run_action, binding.action)
                    )
            return
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
        self.push_screen(HelpScreen(all_keys(self.BINDINGS, MainScreen.BINDINGS, RanksScreen.BINDINGS)))
