"""The work a node does for a cluster that spans machines (capture/dask_engine.py sends it).

Plain functions of picklable arguments, run on the node that holds the rank folders, in a
Dask worker there (or, for `node_facts`, in a Python started over SSH before any worker): they
read the node's files and its own cache (its default folder, as `npuscope` on that node would)
and return what the head needs: a rank's RankEntry (a few rows), a rank's frames, the facts
`nodes check` prints. Nothing here imports Dask, so a node's facts can be read where Dask is
missing.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import shutil
import sys
from pathlib import Path
from typing import Any

from .cache import FrameCache, source_digest
from .cluster import default_jobs, key_files, parse_rank, rank_folders
from .errors import ProfileError
from .profile import Profile, open_profile
from .progress import files_size
from .read_options import ReadOptions

_ROOT = Path(__file__).resolve().parent.parent  # the npuscope package (installed or a checkout)


def code_digest() -> str:
    """What must be equal on the head and a node for their results to be the same: a digest
    of the parsers' and the analysis' sources (content, not version numbers or paths)."""
    here = Path(__file__).resolve().parent
    parts = [source_digest(here), source_digest(_ROOT / "analysis")]
    return hashlib.sha256("".join(parts).encode()).hexdigest()[:16]


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def cache_dir() -> Path | None:
    """The node's cache folder (as `npuscope` there uses it), None when it has none."""
    return FrameCache().directory


def node_facts(folders: list[str]) -> dict[str, Any]:
    """What `nodes check` says of a node: versions, cores, each folder's ranks, the cache's
    free disk."""
    found: dict[str, Any] = {}
    for folder in folders:
        ranks, error = find_ranks(folder)
        found[folder] = {"error": error} if error else {"ranks": len(ranks)}
    cache = cache_dir()
    free = None
    if cache is not None:
        probe = next((p for p in (cache, *cache.parents) if p.exists()), None)
        if probe is not None:
            free = shutil.disk_usage(probe).free
    return {
        "npuscope": _version("npuscope"),
        "code": code_digest(),
        "dask": _version("distributed"),
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "cpus": default_jobs(),
        "folders": found,
        "cache": str(cache) if cache is not None else None,
        "cache_free_bytes": free,
    }


def find_ranks(folder: str) -> tuple[list[tuple[str, str, int]], str | None]:
    """(rank, rank folder, bytes of its files) of the cluster folder `folder` on this node,
    and None; or no ranks and one line saying why (nothing found, unreadable)."""
    path = Path(folder).expanduser()
    if not path.is_dir():
        return [], f"{folder}: no such folder on this node"
    try:
        ranks = rank_folders(path)
    except ProfileError as exc:
        return [], str(exc).splitlines()[0]
    except OSError as exc:
        return [], f"{folder}: {exc.strerror or exc}"
    if ranks is None:
        # One rank folder named directly, or one capture: a rank of its own.
        ranks = [(path.name, path)]
    return [(rank, str(f), _size(f)) for rank, f in ranks], None


def _size(folder: Path) -> int:
    try:
        return files_size(key_files(folder))
    except (ProfileError, OSError):
        return 0


def parse_here(folder: str, options: ReadOptions, rank: str, use_cache: bool = True) -> Any:
    """parse_rank on this node, its frames left in this node's cache (`use_cache` False:
    parsed from scratch, nothing written)."""
    return parse_rank(Path(folder), cache_dir() if use_cache else None, options, rank)


def open_here(folder: str, options: ReadOptions, use_cache: bool = True) -> Profile:
    """A rank's Profile on this node: its frames from the node's cache (parse_here left them
    there), the raw files only for what the cache lacks."""
    return open_profile(
        Path(folder),
        cache=FrameCache(enabled=use_cache),
        strict=options.strict,
        source=options.source,
        timeline=options.timeline,
        training_only=True,
    )
