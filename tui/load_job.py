"""One load or compare of the explorer: its own thread, its own cancel event, its generation.

The work runs in a daemon thread awaited by an async Textual worker, not in a Textual thread
worker: those run in the event loop's default executor, which `App.run()` joins on exit, so
quitting during a load would wait for the parse to end. A daemon thread is left behind
instead (the CLI ends the process once Textual has restored the terminal), and cancelling the
worker sets the job's event. Each job has its own `cancel` event: a new load never clears
the event of an older one, and the app drops whatever an older job posts by its generation.

A path that is a cluster (a folder of rank folders) loads its summary (`load_cluster`: each
rank parsed in worker processes, progress by ranks and bytes, the cancel checked between
ranks); a rank of it then loads as a capture does (`load_rank`). A nodes file loads its
cluster through Dask (`load_node_cluster`), each rank analysed on the node that holds it.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from multiprocessing import resource_tracker
from pathlib import Path
from typing import Any

from npuscope.analysis import Diagnosis, Thresholds
from npuscope.analysis.cluster import ClusterSummary, open_cluster, open_rank
from npuscope.analysis.session import Options, diagnosed
from npuscope.parsers import Cancelled, FrameCache, Profile, ReadOptions, open_profile
from npuscope.parsers.cluster import rank_folders
from npuscope.parsers.layout import Capture
from npuscope.parsers.progress import Sink, files_size
from npuscope.parsers.training import TrainingViews

Progress = Sink  # (done_bytes, total_bytes, label), as open_profile reports it


@dataclass(eq=False)
class Job:
    """A load or compare in flight: the app keeps the newest of each kind."""

    generation: int
    kind: str  # "load" or "compare"
    cancel: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    async def run(self, work: Callable[[], Any]) -> None:
        """Run `work` in a daemon thread and wait for it; cancelled, set `cancel` and return
        at once (the thread stops at its next check, or is left behind)."""
        loop = asyncio.get_running_loop()
        finished: asyncio.Future[None] = loop.create_future()

        def resolve() -> None:
            if not finished.done():
                finished.set_result(None)

        def target() -> None:
            try:
                work()
            finally:
                try:
                    loop.call_soon_threadsafe(resolve)
                except RuntimeError:  # the event loop is closed: the app has gone
                    pass

        self.thread = threading.Thread(target=target, name=f"npuscope-{self.kind}-{self.generation}", daemon=True)
        self.thread.start()
        try:
            await finished
        except asyncio.CancelledError:
            self.cancel.set()
            raise

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()


def load_profile(
    path: Path,
    *,
    capture: str | int | None,
    read: ReadOptions,
    thresholds: Thresholds | None,
    use_cache: bool,
    cancel: threading.Event,
    progress: Progress | None = None,
    captures: Sequence[Capture] | None = None,
) -> tuple[Profile, Diagnosis]:
    """Open and diagnose `path`; raises `Cancelled` soon after `cancel` is set. `captures`:
    what discovery found at `path` already (else it runs again).

    Progress is in bytes of the capture's files, as `open_profile` reports it: per file, and
    inside a file per piece of a CSV table or a timeline and per batch of a db query.
    """

    def opener(**kwargs: Any) -> Profile:
        return open_profile(path, capture=capture, captures=captures, **kwargs)

    return _open_and_diagnose(
        opener, read=read, thresholds=thresholds, use_cache=use_cache, cancel=cancel, progress=progress
    )


def load_rank(
    summary: ClusterSummary,
    rank: str,
    *,
    read: ReadOptions,
    thresholds: Thresholds | None,
    use_cache: bool,
    cancel: threading.Event,
    progress: Progress | None = None,
) -> tuple[Profile, Diagnosis, TrainingViews | None]:
    """Open and diagnose rank `rank` of a cluster (from its cache entry when there is one),
    as `load_profile` opens a capture: progress by bytes, `Cancelled` soon after `cancel`.
    A rank on another machine (a nodes file) is analysed on its node, its training views
    with it (the third value; None: read them here)."""
    if summary.host is not None:
        from npuscope.analysis.cluster_rank import rank_analysis_here

        if progress is not None:
            progress(0, 1, f"rank {rank}: analysed on its node")
        folder = summary.rank(rank).folder
        bare = replace(summary, host=None)  # what travels to the node: no engine
        th = thresholds or Thresholds()
        analysis = summary.host.run_on_rank(folder, rank_analysis_here, bare, rank, th, read.strict, use_cache)
        if cancel.is_set():
            raise Cancelled()
        return analysis.profile, analysis.operators, analysis.views

    def opener(**kwargs: Any) -> Profile:
        return open_rank(summary, rank, **kwargs)

    profile, diagnosis = _open_and_diagnose(
        opener,
        read=read,
        thresholds=thresholds,
        use_cache=use_cache,
        cancel=cancel,
        progress=progress,
        cache_root=summary.cache_root,  # where the cluster's parse left the rank's frames
    )
    return profile, diagnosis, None


def _open_and_diagnose(
    opener: Callable[..., Profile],
    *,
    read: ReadOptions,
    thresholds: Thresholds | None,
    use_cache: bool,
    cancel: threading.Event,
    progress: Progress | None,
    cache_root: Path | None = None,
) -> tuple[Profile, Diagnosis]:
    cache = FrameCache(cache_root, enabled=use_cache, background=True)
    profile = opener(
        cache=cache,
        progress=progress,
        cancel=cancel,
        pmu="ratios",  # the bound types of the report's findings and op statistics
        strict=read.strict,
        source=read.source,
        timeline=read.timeline,
    )
    if cancel.is_set():  # set after the open's last check: the diagnosis is not started
        raise Cancelled()
    if progress is not None:
        total = files_size(profile.files)
        progress(total, total, "diagnosing")
    return profile, diagnosed(profile, Options(thresholds or Thresholds(), cache=cache)).diagnosis


def cluster_ranks(
    path: Path, capture: str | int | None, captures: Sequence[Capture] | None = None
) -> list[tuple[str, Path]] | None:
    """The ranks of `path` when it opens as a cluster (a folder of rank folders), else None; a
    capture picked by name never does. Raises ProfileError as opening the path would (nothing
    found, no permission). `captures`: what discovery found at `path` already."""
    return None if capture is not None else rank_folders(path, captures)


def _start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker with the real stderr.

    The ranks are parsed in spawned worker processes, and the first spawn starts the tracker,
    handing it `sys.stderr.fileno()`. Inside the app that is Textual's print capture, whose
    fileno is -1: the spawn fails ("bad value(s) in fds_to_keep"). The process's own stderr
    is put back for the moment the tracker starts (once; later spawns find it running).
    """
    captured, real = sys.stderr, sys.__stderr__
    if real is None or captured is real:
        resource_tracker.ensure_running()
        return
    sys.stderr = real
    try:
        resource_tracker.ensure_running()
    finally:
        sys.stderr = captured


def load_cluster(
    path: Path,
    *,
    read: ReadOptions,
    thresholds: Thresholds | None,
    use_cache: bool,
    cancel: threading.Event,
    progress: Progress | None = None,
    ranks: list[tuple[str, Path]] | None = None,
) -> ClusterSummary:
    """The summary of the cluster at `path`: each rank parsed into its own cache entry (in
    worker processes), progress by ranks and bytes, `Cancelled` between ranks once `cancel`
    is set. Only the summary rows are held here, never a rank's tasks. `ranks`: the ranks
    cluster_ranks found (else found again)."""

    def on_rank(done: int, total: int, label: str) -> None:
        if cancel.is_set():
            raise Cancelled()
        if progress is not None:
            progress(done, total, label)

    _start_resource_tracker()
    summary = open_cluster(
        path,
        cache=FrameCache(enabled=use_cache),
        progress=on_rank,
        cancel=cancel,
        options=read,
        thresholds=thresholds or Thresholds(),
        ranks=ranks,
    )
    if cancel.is_set():
        raise Cancelled()
    return summary


def load_node_cluster(
    path: Path,
    *,
    read: ReadOptions,
    thresholds: Thresholds | None,
    use_cache: bool,
    cancel: threading.Event,
    progress: Progress | None = None,
) -> ClusterSummary:
    """The summary of the cluster a nodes file describes: every rank parsed on its node
    (capture/dask_engine.py); the engine stays up for the ranks opened later (the summary's
    `host`) until the app stops it."""
    from npuscope.analysis.cluster import summarize
    from npuscope.capture.dask_engine import NodeEngine
    from npuscope.parsers.nodes_file import read_nodes_file

    nodes = read_nodes_file(path)
    engine = NodeEngine(nodes, cancel=cancel, use_cache=use_cache)  # $NPUSCOPE_SCHEDULER, if set
    try:
        engine.start()
        entries = engine.read_ranks(read, progress, cancel)
    except BaseException:
        engine.stop()
        raise
    summary = summarize(entries, thresholds or Thresholds(), nodes.path)
    return replace(summary, options=read, host=engine)


def open_for_compare(other: Path, *, use_cache: bool, cancel: threading.Event) -> Profile:
    """The NEW profile of a comparison; raises `Cancelled` soon after `cancel` is set."""
    return open_profile(other, cache=FrameCache(enabled=use_cache, background=True), cancel=cancel, pmu="ratios")
