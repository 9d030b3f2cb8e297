"""A cluster: a folder of rank folders, each parsed by itself into its own cache entry.

`rank_folders(path)` tells a cluster from one capture by the layout (parsers/layout.py): a
torch_npu / MindSpore folder of `*_ascend_pt` ranks (text or db export per rank), an msprof
PROF_* with a `device_N` folder per card (one PROF per node or all in one), Paddle traces in
`rank_N` folders. Each rank folder opens as a capture of its own (`open_profile(folder)`).

`parse_rank(folder, cache_dir, options)` is the unit of work: a pure function of a folder
(picklable arguments and result) that parses the rank, leaves its frames in the cache (the
usual FrameCache entries, so opening the rank later reads them) and returns its RankEntry:
the summary row, its per-op-type totals, its links and its steps (a few rows each). The
entry itself is cached too, keyed by the files of the rank folder: a cached reopen reads only
these small rows, never the tasks.

`read_ranks(...)` runs `parse_rank` over the ranks in worker processes (spawned, never
forked: a threaded parent is safe), so the parent holds only the entries: its memory does not
grow with the tasks of the ranks. One more cache entry holds every rank's rows, so a cached
reopen reads one small file. The cluster summary (slow ranks, slow links, spread) is made
from the entries in `npuscope.analysis.cluster`, which also holds `open_cluster` (this layer
cannot import the analysis).

Nothing is written into the profile folders: only into the cache folder.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import multiprocessing
import os
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl

from .cache import FrameCache, source_digest
from .errors import ProfileError
from .frames import is_communication
from .layout import DB_RE, DEVICE_RE, Capture, discover
from .parallel_meta import RankMeta, read_rank_meta
from .profile import Profile, open_profile
from .progress import Cancelled, files_size
from .rank_figures import comm_groups, file_kinds, per_step
from .read_options import ReadOptions
from .training import read_training_views
from .training_files import card_key, collect

Progress = Callable[[int, int, str], None]

DEFAULT_OPTIONS = ReadOptions()
ENTRY_KIND = "cluster_rank"
# The summary of a rank depends on the parsers (the cache key's version) and on this module.
_VERSION = source_digest(Path(__file__).parent)
_ENTRY_SCHEMA: dict[str, pl.DataType] = {"entry": pl.String()}

OPS_SCHEMA: dict[str, pl.DataType] = {"op_type": pl.String(), "total_us": pl.Float64(), "count": pl.Int64()}
RANK_STEPS_SCHEMA: dict[str, pl.DataType] = {
    "card": pl.String(),
    "step": pl.Int64(),
    "step_us": pl.Float64(),
    "compute_us": pl.Float64(),
    "communication_us": pl.Float64(),
    "comm_not_overlapped_us": pl.Float64(),
    "free_us": pl.Float64(),
    "bubble_us": pl.Float64(),
    "stage_us": pl.Float64(),
}
RANK_LINKS_SCHEMA: dict[str, pl.DataType] = {
    "card": pl.String(),
    "group": pl.String(),
    "src": pl.Int64(),
    "dst": pl.Int64(),
    "transport": pl.String(),
    "size_mb": pl.Float64(),
    "time_us": pl.Float64(),
    "bandwidth_gbps": pl.Float64(),
}


@dataclass(frozen=True)
class RankSummary:
    """One rank of a cluster, in the words of analysis/totals.py.

    Every time is a mean per step of the rank's steps view (step_trace_time.csv,
    StepTraceTime, the timeline's Overlap Analysis, else derived from the tasks), over
    `steps` steps: step_us; compute_us (step_trace's Computing: the union of overlapping
    kernels, so step_us = compute_us + exposed_comm_us + free_us); communication_us (all of
    it), exposed_comm_us (not overlapped), free_us; bubble_us (the time the rank waits in
    pipeline receives: step_trace's Bubble, else its P2P receive tasks), moe_us (its MoE
    compute: GroupedMatmul and Moe* op types); wait_us (Task Wait Time). `steps` 0: the rank
    has no steps, and its figures are totals over its tasks (step_us None). `tasks` counts
    the rank's tasks. `stage` (the pipeline stage, from the parallel layout) and `missing`
    (files other ranks of the cluster have and this one lacks) are set by the cluster summary.
    """

    rank: str
    folder: Path
    step_us: float | None
    compute_us: float
    communication_us: float
    exposed_comm_us: float
    free_us: float
    wait_us: float | None  # None: no tasks to wait (a rank of training-level files only)
    tasks: int
    error: str | None = None  # one line when this rank could not be read
    steps: int = 0
    bubble_us: float | None = None
    moe_us: float | None = None
    stage: int | None = None
    missing: tuple[str, ...] = ()


@dataclass(frozen=True)
class RankEntry:
    """What the cluster keeps of a rank: its summary row and a few small frames.

    ops: per op type (communication left out, as op statistics do) the total duration and
    count; steps: the steps view (card = the rank); links: the links view (card = the rank);
    bytes: the size of the rank's files (the progress counts them)."""

    summary: RankSummary
    ops: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=OPS_SCHEMA))
    steps: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=RANK_STEPS_SCHEMA))
    links: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=RANK_LINKS_SCHEMA))
    layout: str = ""
    notes: tuple[str, ...] = ()
    bytes: int = 0
    meta: RankMeta | None = None  # the layout the rank's files declare (parallel_meta.py)
    comm_groups: tuple[tuple[str, str, tuple[int, ...]], ...] = ()  # (group id, op kind, ranks) seen
    has: tuple[str, ...] = ()  # the kinds of file the rank folder holds (file_kinds)

    @property
    def rank(self) -> str:
        return self.summary.rank


# --------------------------------------------------------------------------- finding the ranks


def _rank_folder(capture: Capture, index: int) -> Path | None:
    """The folder holding the files of source `index` of a capture, as one rank opens it."""
    files = capture.sources[index].files
    if not files:
        return None
    parent = files[0].parent
    if capture.layout in ("torch_npu", "mindspore"):
        # <rank>_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv -> <rank>_ascend_pt
        return parent.parent if parent.name == "ASCEND_PROFILER_OUTPUT" else parent
    if capture.layout == "era_a":
        # PROF_*/device_N/summary/op_summary_N_1.csv -> device_N
        for folder in (parent, *parent.parents):
            if DEVICE_RE.match(folder.name):
                return folder
        return None
    if capture.layout == "paddle":
        return parent
    return None


def rank_folders(
    path: str | os.PathLike[str], captures: Sequence[Capture] | None = None
) -> list[tuple[str, Path]] | None:
    """(rank, folder) of each rank when `path` is a cluster, sorted by rank; None when it is
    one capture (one card, or cards whose files are shared: an msprof merged export).

    A cluster is a capture whose cards each have a folder of their own: the `*_ascend_pt`
    folders of torch_npu / MindSpore (text or db export; ranks named by their
    profiler_info_<rank>.json), the `device_N` folders of msprof PROF_* (one PROF per node:
    ranks are then numbered in order when device numbers repeat), Paddle's `rank_N` folders.
    torch_npu ranks whose ids repeat in folders side by side are separate runs (a capture of
    each profiler level): not a cluster. Raises ProfileError as `discover` does (nothing
    found, permission denied). `captures`: what `discover(path)` found already.
    """
    if captures is None:
        captures = discover(path)
    by_layout: dict[str, list[tuple[str | None, Path]]] = {}
    for capture in captures:
        if capture.layout not in ("torch_npu", "mindspore", "era_a", "paddle"):
            continue
        for i, src in enumerate(capture.sources):
            folder = _rank_folder(capture, i)
            if folder is None:
                continue
            by_layout.setdefault(capture.layout, []).append((src.card, folder))
    if not by_layout:
        return None
    # One layout makes the cluster: the one with the most ranks (a stray capture of another
    # layout beside them is not a rank).
    layout = max(by_layout, key=lambda k: len(by_layout[k]))
    found: list[tuple[str | None, Path]] = []
    seen: set[Path] = set()
    for card, folder in by_layout[layout]:
        if folder not in seen:
            seen.add(folder)
            found.append((card, folder))
    if len(found) < 2:
        return None
    if layout in ("torch_npu", "mindspore"):
        # The layout numbers clashing ranks in order; the files' own rank ids tell whether
        # they clash: ranks of one job never do, so folders beside each other with the same
        # ids (level0/rank0_ascend_pt and level1/rank0_ascend_pt) are separate runs.
        ids = [_torch_rank(folder) for _, folder in found]
        if None not in ids and len(set(ids)) == len(ids):
            found = [(rank, folder) for rank, (_, folder) in zip(ids, found)]
        elif None not in ids and len({folder.parent for _, folder in found}) > 1:
            return None
    names = [c for c, _ in found]
    if any(n is None for n in names) or len(set(names)) != len(names):
        # device_0 of every node, or ranks the files do not name: number them in folder order.
        ordered = sorted(found, key=lambda cf_: _folder_key(cf_[1]))
        return [(str(i), folder) for i, (_, folder) in enumerate(ordered)]
    return sorted(((str(c), f) for c, f in found), key=lambda r: (card_key(r[0]), str(r[1])))


def _torch_rank(folder: Path) -> str | None:
    """The rank a torch_npu / MindSpore rank folder's `profiler_info_<rank>.json` names."""
    try:
        names = sorted(e.name for e in os.scandir(folder) if e.name.startswith("profiler_info_"))
    except OSError:
        return None
    for name in names:
        m = re.fullmatch(r"profiler_info_(\d+)\.json", name)
        if m:
            return str(int(m.group(1)))
    return None


def _folder_key(folder: Path) -> tuple[object, ...]:
    """Natural order of folder paths (PROF_2 before PROF_10, device_2 before device_10)."""
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(folder)))


# --------------------------------------------------------------------------- one rank


_EXPORT_DIRS = ("ASCEND_PROFILER_OUTPUT", "mindstudio_profiler_output", "summary", "timeline")
"""Subfolders of a rank folder that hold its exports (torch_npu / MindSpore, msprof device_N)."""


def key_files(folder: Path, options: ReadOptions = DEFAULT_OPTIONS) -> tuple[Path, ...]:
    """The files a rank's entry depends on: every regular file in the rank folder and in its
    export subfolders (_EXPORT_DIRS: the training-level files sit beside the tasks), so any
    change rebuilds the entry. Names only, no parsing and no discovery (a cached reopen of
    1,000 ranks lists them all). `options` is accepted for callers that choose by it."""
    out: list[Path] = []
    for d in (folder, *(folder / name for name in _EXPORT_DIRS)):
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except PermissionError:
            raise ProfileError(f"{d}: permission denied; make the folder readable (chmod +rx)") from None
        except OSError:  # missing, not a folder
            continue
        for e in entries:
            try:
                if e.is_file():
                    out.append(Path(e.path))
            except OSError:
                pass
    return tuple(out)


def _steps_without_timeline(files: Sequence[Path]) -> bool:
    """Whether the rank's steps come from a file, so the summary needs no timeline: torch_npu's
    step_trace_time.csv or analysis.db, or a db export (its steps view is read from the db and
    its tasks). Only the Overlap Analysis of a text timeline gives steps no other file has."""
    return any(p.name in ("step_trace_time.csv", "analysis.db") or DB_RE.match(p.name) for p in files)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    line = text[0] if text else type(exc).__name__
    return line if isinstance(exc, ProfileError) else f"{type(exc).__name__}: {line}"


def error_entry(rank: str, folder: Path, why: str, size: int = 0) -> RankEntry:
    summary = RankSummary(rank, folder, None, 0.0, 0.0, 0.0, 0.0, 0.0, 0, error=why)
    return RankEntry(summary, bytes=size)


def summarize_profile(
    profile: Profile, rank: str, folder: Path, size: int, strict: bool = False, files: Sequence[Path] = ()
) -> RankEntry:
    """The RankEntry of an opened rank (all its cards count as the rank); `files`: the rank
    folder's key_files (the kinds of file it holds)."""
    tasks = profile.tasks
    comm = is_communication()
    if tasks.height:
        per_type = (
            tasks.lazy()
            .filter(~comm)
            .group_by("op_type")
            .agg(pl.col("duration_us").sum().alias("total_us"), pl.len().cast(pl.Int64).alias("count"))
            .sort("total_us", descending=True)
        )
    else:  # a lone op_statistic: what it sums
        per_type = (
            profile.op_statistic.lazy()
            .group_by("op_type")
            .agg(pl.col("total_us").sum().alias("total_us"), pl.col("count").sum().cast(pl.Int64).alias("count"))
        )
    ops = collect(per_type.select([pl.col(c).cast(t) for c, t in OPS_SCHEMA.items()]))
    views = read_training_views(profile, strict=strict, collectives=False)  # steps and links are what it keeps
    steps = _as_rank(views.steps, rank, RANK_STEPS_SCHEMA)
    links = _as_rank(views.links, rank, RANK_LINKS_SCHEMA)
    fig = per_step(steps, tasks)
    summary = RankSummary(
        rank=rank,
        folder=folder,
        step_us=fig.step_us,
        compute_us=fig.compute_us,
        communication_us=fig.communication_us,
        exposed_comm_us=fig.exposed_comm_us,
        free_us=fig.free_us,
        wait_us=fig.wait_us,
        tasks=tasks.height,
        steps=fig.steps,
        bubble_us=fig.bubble_us,
        moe_us=fig.moe_us,
    )
    notes = tuple(profile.notes) + tuple(views.notes)
    if len(profile.cards) > 1:
        notes += (f"{len(profile.cards)} cards in this rank folder ({', '.join(profile.cards)}): counted as one rank",)
    db = next((p for p in files if DB_RE.match(p.name)), None)
    meta = read_rank_meta(folder, db)
    if meta is not None:
        notes += meta.notes
    # The communication files name the groups only where no metadata declares them.
    groups = comm_groups(folder) if meta is None or not meta.groups else ()
    return RankEntry(summary, ops, steps, links, profile.layout, notes, size, meta, groups, file_kinds(files))


def _as_rank(view: pl.DataFrame, rank: str, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """A view's rows with the rank as their card, in `schema` (its columns taken as they are:
    no query for a few rows)."""
    if view.height == 0:
        return pl.DataFrame(schema=schema)
    columns = [
        pl.Series(c, [rank] * view.height, dtype=t)
        if c == "card"
        else (view[c] if view.schema[c] == t else view[c].cast(t))
        for c, t in schema.items()
    ]
    return pl.DataFrame(columns)


def _extra(rank: str, options: ReadOptions) -> object:
    return [_VERSION, rank, options.strict, options.source, options.timeline]


Stamp = list[object]


def stamps(files: Sequence[Path]) -> list[Stamp]:
    """What keys a rank's entries: each file's absolute path, size, mtime, inode and ctime
    (what FrameCache.key takes of a file, but without resolving the path's links: a key of
    1,000 ranks' files is a stat each, where resolving them took ~0.5 s). Raises OSError for
    a file that went away."""
    out: list[Stamp] = []
    for f in files:
        st = os.stat(f)
        out.append([os.path.abspath(f), st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns])
    return out


def _entry_frame(entry: RankEntry) -> pl.DataFrame:
    doc = {
        "summary": {**asdict(entry.summary), "folder": str(entry.summary.folder)},
        "ops": entry.ops.to_dict(as_series=False),
        "steps": entry.steps.to_dict(as_series=False),
        "links": entry.links.to_dict(as_series=False),
        "layout": entry.layout,
        "notes": list(entry.notes),
        "bytes": entry.bytes,
        "meta": entry.meta.to_json() if entry.meta is not None else None,
        "comm_groups": [[g, k, list(r)] for g, k, r in entry.comm_groups],
        "has": list(entry.has),
    }
    return pl.DataFrame({"entry": [json.dumps(doc)]}, schema=_ENTRY_SCHEMA)


def _entry_of_frame(frame: pl.DataFrame) -> RankEntry:
    return _entry_of_json(frame["entry"][0])


def _entry_of_json(text: str) -> RankEntry:
    doc: dict[str, Any] = json.loads(text)
    s = doc["summary"]
    summary = RankSummary(**{**s, "folder": Path(s["folder"]), "missing": tuple(s.get("missing", ()))})
    return RankEntry(
        summary,
        pl.DataFrame(doc["ops"], schema=OPS_SCHEMA),
        pl.DataFrame(doc["steps"], schema=RANK_STEPS_SCHEMA),
        pl.DataFrame(doc["links"], schema=RANK_LINKS_SCHEMA),
        doc["layout"],
        tuple(doc["notes"]),
        int(doc["bytes"]),
        RankMeta.from_json(doc["meta"]) if doc.get("meta") is not None else None,
        tuple((str(g), str(k), tuple(int(r) for r in ranks)) for g, k, ranks in doc.get("comm_groups", ())),
        tuple(doc.get("has", ())),
    )


class _NotCached(Exception):
    pass


def _entry_extra(rank: str, options: ReadOptions, stamped: list[Stamp]) -> object:
    return [_extra(rank, options), stamped]


def cached_entry(
    cache: FrameCache,
    rank: str,
    folder: Path,
    options: ReadOptions,
    files: Sequence[Path] | None = None,
    stamped: list[Stamp] | None = None,
) -> RankEntry | None:
    """The rank's entry from the cache (its summary rows only), or None. `files`: the rank's
    key_files when the caller has them (`stamped`: their stamps)."""
    if not cache.enabled:
        return None

    def missing() -> pl.DataFrame:
        raise _NotCached()

    try:
        if files is None:
            files = key_files(folder, options)
        if stamped is None:
            stamped = stamps(files)
        extra = _entry_extra(rank, options, stamped)
        frame = cache.load_or_build(ENTRY_KIND, (), missing, extra, schema=_ENTRY_SCHEMA)
        return _entry_of_frame(frame)
    except _NotCached:
        return None
    except (ProfileError, OSError, ValueError, KeyError, TypeError, pl.exceptions.PolarsError):
        return None


def parse_rank(
    folder: Path, cache_dir: Path | None, options: ReadOptions = DEFAULT_OPTIONS, rank: str | None = None
) -> RankEntry:
    """Parse one rank folder into its cache entry and return its RankEntry (pure: picklable
    arguments and result, nothing shared with the caller). `cache_dir` None reads and writes
    no cache. A rank that cannot be read gives an entry with `summary.error` set (one line);
    this never raises for bad input."""
    folder = Path(folder)
    cache = FrameCache(cache_dir) if cache_dir is not None else FrameCache(enabled=False)
    name = rank if rank is not None else folder.name
    try:
        files = key_files(folder, options)
    except ProfileError as exc:
        return error_entry(name, folder, _one_line(exc))
    except Exception as exc:  # noqa: BLE001 - one bad rank never stops the cluster
        return error_entry(name, folder, _one_line(exc))
    size = files_size(files)
    built: list[RankEntry] = []

    def build() -> pl.DataFrame:
        profile = open_profile(
            folder,
            cache=cache,
            timeline=options.timeline and not _steps_without_timeline(files),
            pmu=False,
            strict=options.strict,
            source=options.source,
            training_only=True,
        )
        entry = summarize_profile(profile, name, folder, size, options.strict, files)
        built.append(entry)
        return _entry_frame(entry)

    try:
        extra = _entry_extra(name, options, stamps(files))
        frame = cache.load_or_build(ENTRY_KIND, (), build, extra, schema=_ENTRY_SCHEMA)
    except Exception as exc:  # noqa: BLE001 - one bad rank never stops the cluster
        return error_entry(name, folder, _one_line(exc), size)
    finally:
        cache.flush()
    entry = built[0] if built else _entry_of_frame(frame)
    if cache.problems:
        entry = replace(entry, notes=entry.notes + tuple(cache.problems))
    return entry


# --------------------------------------------------------------------------- many ranks


def _context() -> multiprocessing.context.BaseContext:
    """spawn: every worker a fresh interpreter. Never fork, nor forkserver (its server imports
    the main module, and so polars, then forks): importing polars starts threads (jemalloc,
    polars' own) and polars can deadlock in a child forked after that; the explorer runs
    threads too."""
    return multiprocessing.get_context("spawn")


IN_PROCESS_BYTES = 16 * 1024 * 1024
"""Ranks to parse whose files add up to no more than this are parsed in this process when the
caller leaves `jobs` to the default: starting the workers (~1 s) would take longer, and this
process holds one such rank at a time."""


def default_jobs() -> int:
    """The cores this process may run on (os.cpu_count() counts the machine's, also those a
    CPU affinity mask leaves out)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def read_ranks(
    ranks: Sequence[tuple[str, Path]],
    *,
    jobs: int | None = None,
    cache: FrameCache | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    options: ReadOptions = DEFAULT_OPTIONS,
) -> list[RankEntry]:
    """The entries of `ranks`, in their order: from the cache where it holds them, else parsed
    by `parse_rank` in up to `jobs` worker processes (default: default_jobs(); 1 parses in
    this process, one rank at a time, as the default does for small ranks: IN_PROCESS_BYTES).
    `progress(done_bytes, total_bytes, label)` after each rank; `cancel` is checked between
    ranks (raises Cancelled)."""
    cache = cache if cache is not None else FrameCache()
    chosen = jobs
    jobs = max(1, jobs if jobs is not None else default_jobs())
    files: list[tuple[Path, ...] | str] = []  # each rank's key files, or why they cannot be had
    for _, folder in ranks:
        try:
            files.append(key_files(folder, options))
        except Exception as exc:  # noqa: BLE001 - one bad rank never stops the cluster
            files.append(_one_line(exc))
    sizes = [files_size(f) if isinstance(f, tuple) else 0 for f in files]
    stamped: list[list[Stamp] | None] = []  # each rank's stamps (keys), None when a file went away
    for f in files:
        try:
            stamped.append(stamps(f) if isinstance(f, tuple) and cache.enabled else None)
        except OSError:
            stamped.append(None)
    total = sum(sizes)
    done = 0
    n = len(ranks)
    out: list[RankEntry | None] = [None] * n
    count = 0

    def finish(i: int, entry: RankEntry) -> None:
        nonlocal done, count
        out[i] = entry
        done += sizes[i]
        count += 1
        if progress is not None:
            state = "error" if entry.summary.error else "ok"
            progress(done, total, f"rank {count}/{n} {entry.rank} ({state})")

    def check() -> None:
        if cancel is not None and cancel.is_set():
            raise Cancelled()

    if progress is not None:
        progress(0, total, f"rank 0/{n}")
    every = [f for f in stamped if f is not None]
    whole = _cached_cluster(cache, ranks, every, options) if len(every) == n else None
    if whole is not None:  # one entry holds every rank's rows: one read instead of n
        for i, entry in enumerate(whole):
            check()
            finish(i, entry)
        return whole
    todo: list[int] = []
    for i, (rank, folder) in enumerate(ranks):
        check()
        mine = files[i]
        if isinstance(mine, str):
            finish(i, error_entry(rank, folder, mine))
            continue
        mine_stamped = stamped[i]
        got = cached_entry(cache, rank, folder, options, mine, mine_stamped) if mine_stamped is not None else None
        if got is not None:
            finish(i, replace(got, summary=replace(got.summary, folder=folder)))
        else:
            todo.append(i)
    cache_dir = cache.directory if cache.enabled else None
    small = chosen is None and sum(sizes[i] for i in todo) <= IN_PROCESS_BYTES
    if todo and (jobs == 1 or small):
        for i in todo:
            check()
            rank, folder = ranks[i]
            finish(i, parse_rank(folder, cache_dir, options, rank))
    elif todo:
        _in_pool(ranks, todo, min(jobs, len(todo)), cache_dir, options, finish, check)
    entries = [e for e in out if e is not None]
    if len(every) == n and all(e.summary.error is None for e in entries):
        _cache_cluster(cache, ranks, every, options, entries)
    return entries


CLUSTER_KIND = "cluster_ranks"


def _cluster_extra(ranks: Sequence[tuple[str, Path]], options: ReadOptions, stamped: Sequence[list[Stamp]]) -> object:
    return [_VERSION, [r for r, _ in ranks], options.strict, options.source, options.timeline, list(stamped)]


def _cached_cluster(
    cache: FrameCache, ranks: Sequence[tuple[str, Path]], stamped: Sequence[list[Stamp]], options: ReadOptions
) -> list[RankEntry] | None:
    """Every rank's entry from the one entry of the whole cluster (keyed by every rank's
    files: `stamped`), or None."""
    if not cache.enabled:
        return None

    def missing() -> pl.DataFrame:
        raise _NotCached()

    try:
        frame = cache.load_or_build(
            CLUSTER_KIND, (), missing, _cluster_extra(ranks, options, stamped), schema=_ENTRY_SCHEMA
        )
        if frame.height != len(ranks):
            return None
        entries = [_entry_of_json(doc) for doc in frame["entry"].to_list()]
    except _NotCached:
        return None
    except (OSError, ValueError, KeyError, TypeError, pl.exceptions.PolarsError):
        return None
    return [replace(e, summary=replace(e.summary, rank=r, folder=f)) for e, (r, f) in zip(entries, ranks)]


def _cache_cluster(
    cache: FrameCache,
    ranks: Sequence[tuple[str, Path]],
    stamped: Sequence[list[Stamp]],
    options: ReadOptions,
    entries: Sequence[RankEntry],
) -> None:
    """Write the entry of the whole cluster (no rank with an error: a damaged rank is read
    again on the next open, so the files fixed are seen)."""
    if not cache.enabled:
        return
    rows = pl.concat([_entry_frame(e) for e in entries], how="vertical")
    try:
        cache.load_or_build(
            CLUSTER_KIND, (), lambda: rows, _cluster_extra(ranks, options, stamped), schema=_ENTRY_SCHEMA
        )
        cache.flush()
    except (OSError, pl.exceptions.PolarsError):
        pass  # a read-only or vanished cache: the ranks' own entries are there


def _in_pool(
    ranks: Sequence[tuple[str, Path]],
    todo: list[int],
    jobs: int,
    cache_dir: Path | None,
    options: ReadOptions,
    finish: Callable[[int, RankEntry], None],
    check: Callable[[], None],
) -> None:
    """Parse `todo` in a pool of `jobs` workers. A worker that dies (killed, out of memory)
    breaks the pool: the ranks in flight then are parsed one at a time in a process of their
    own (the one that kills it again is marked), and the rest go on in a new pool."""
    queue = list(todo)
    while queue:
        suspects = _pool_pass(ranks, queue, jobs, cache_dir, options, finish, check)
        _one_by_one(ranks, suspects, cache_dir, options, finish, check)


def _result(fut: cf.Future[RankEntry], check: Callable[[], None]) -> None:
    """Wait for `fut`, checking for cancellation meanwhile."""
    while not fut.done():
        check()
        cf.wait([fut], timeout=0.2)


def _died(rank: str, folder: Path) -> RankEntry:
    return error_entry(rank, folder, "the worker process parsing this rank died (killed, or out of memory)")


def _pool_pass(
    ranks: Sequence[tuple[str, Path]],
    queue: list[int],
    jobs: int,
    cache_dir: Path | None,
    options: ReadOptions,
    finish: Callable[[int, RankEntry], None],
    check: Callable[[], None],
) -> list[int]:
    """Ranks of `queue` (taken off it as they are handed out) parsed in one pool, until the
    queue is done or the pool breaks; returns the ranks in flight when it broke."""
    pool = cf.ProcessPoolExecutor(max_workers=jobs, mp_context=_context())
    running: dict[cf.Future[RankEntry], int] = {}
    try:
        while queue or running:
            # At most two ranks handed out per worker: cancelling drops the rest at once.
            while queue and len(running) < 2 * jobs:
                i = queue.pop(0)
                rank, folder = ranks[i]
                running[pool.submit(parse_rank, folder, cache_dir, options, rank)] = i
            check()
            finished, _ = cf.wait(running, timeout=0.2, return_when=cf.FIRST_COMPLETED)
            broken: list[int] = []
            for fut in finished:
                i = running.pop(fut)
                exc = fut.exception()
                if isinstance(exc, cf.process.BrokenProcessPool):
                    broken.append(i)
                elif exc is not None:  # parse_rank never raises: this is the pickling or the pool
                    finish(i, error_entry(*ranks[i], f"worker process failed: {_one_line(exc)}"))
                else:
                    finish(i, fut.result())
            if broken:
                broken += running.values()
                running.clear()
                pool.shutdown(wait=False, cancel_futures=True)
                return sorted(broken)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return []


def _one_by_one(
    ranks: Sequence[tuple[str, Path]],
    todo: list[int],
    cache_dir: Path | None,
    options: ReadOptions,
    finish: Callable[[int, RankEntry], None],
    check: Callable[[], None],
) -> None:
    """Each rank of `todo` alone in a one-worker pool; a rank whose worker dies is marked."""
    pool: cf.ProcessPoolExecutor | None = None
    try:
        for i in todo:
            rank, folder = ranks[i]
            if pool is None:
                pool = cf.ProcessPoolExecutor(max_workers=1, mp_context=_context())
            fut = pool.submit(parse_rank, folder, cache_dir, options, rank)
            _result(fut, check)
            exc = fut.exception()
            if isinstance(exc, cf.process.BrokenProcessPool):
                finish(i, _died(rank, folder))
                pool.shutdown(wait=False)
                pool = None
            elif exc is not None:
                finish(i, error_entry(rank, folder, f"worker process failed: {_one_line(exc)}"))
            else:
                finish(i, fut.result())
    finally:
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


def open_rank_profile(folder: Path, cache: FrameCache | None = None, **kwargs: Any) -> Profile:
    """The usual Profile of one rank folder (its frames from the cache when parse_rank left
    them there)."""
    return open_profile(folder, cache=cache, **kwargs)
