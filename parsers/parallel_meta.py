"""What a rank folder says of the job's parallel layout (FORMATS.md 5c).

Three sources, most explicit first:

  profiler_metadata.json   torch_npu 2.x, in the rank folder or its ASCEND_PROFILER_OUTPUT:
                           `distributed_args` (tensor / pipeline / data / context / expert
                           parallel sizes, rank, world_size) and `parallel_group_info`
                           (`group_name_<id>` -> group_name, group_rank, global_ranks; the id is
                           the HCCL group id after `@` in the communication files' op names)
  db export META_DATA      torch_npu `export_type=db` writes the same two objects as rows
                           (name, value JSON) of META_DATA beside ENV_VARIABLES
  communication files      nothing declared: per HCCL group id (after `@`), the ops the rank
                           ran in it (a P2P send / receive marks a pipeline group, an all-to-all
                           an expert group) and the ranks its links name (communication_matrix
                           .json, analysis.db CommAnalyzerMatrix); the analysis infers groups
                           from these and says so

`read_rank_meta(folder)` gives a RankMeta (plain data: it travels in the cluster's cache
entries as JSON), None when no source declares anything. Damaged metadata is a note, never a
traceback: the rank still belongs to the cluster.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ProfileError

METADATA_FILE = "profiler_metadata.json"
MAX_METADATA_BYTES = 16 << 20
"""A metadata file larger than this is not one (the real ones are a few KB)."""

SIZE_KEYS: dict[str, tuple[str, ...]] = {
    "tp": ("tensor_model_parallel_size",),
    "pp": ("pipeline_model_parallel_size",),
    "dp": ("data_parallel_size",),
    "cp": ("context_parallel_size",),
    "ep": ("expert_model_parallel_size",),
}
"""Canonical size name -> the `distributed_args` keys that carry it."""

_P2P_RE = re.compile(r"send|receive|recv|batchsendrecv", re.IGNORECASE)
_ALL_TO_ALL_RE = re.compile(r"all_?to_?all", re.IGNORECASE)


@dataclass(frozen=True)
class RankMeta:
    """One rank's declared layout. `sizes`: tp, pp, dp, cp, ep as declared (missing keys left
    out); `groups`: (group name, HCCL group id or "", global ranks) of each group the rank is
    in; `source`: "profiler_metadata" or "db"; `notes`: what could not be used."""

    rank: int | None
    world_size: int | None
    sizes: tuple[tuple[str, int], ...]
    groups: tuple[tuple[str, str, tuple[int, ...]], ...]
    source: str
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "world_size": self.world_size,
            "sizes": [list(s) for s in self.sizes],
            "groups": [[n, i, list(r)] for n, i, r in self.groups],
            "source": self.source,
            "notes": list(self.notes),
        }

    @staticmethod
    def from_json(doc: dict[str, Any]) -> RankMeta:
        return RankMeta(
            rank=doc["rank"],
            world_size=doc["world_size"],
            sizes=tuple((str(n), int(v)) for n, v in doc["sizes"]),
            groups=tuple((str(n), str(i), tuple(int(r) for r in ranks)) for n, i, ranks in doc["groups"]),
            source=str(doc["source"]),
            notes=tuple(doc.get("notes", ())),
        )


def _whole(value: object) -> int | None:
    """A non-negative whole number from JSON (a bool is not one), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        return int(value.strip())
    return None


def parse_metadata(distributed: object, groups: object, source: str, where: str) -> RankMeta | None:
    """A RankMeta from the `distributed_args` and `parallel_group_info` objects (either may be
    missing: None when neither gives anything). Values that are not what the format says are
    left out with a note naming `where`."""
    notes: list[str] = []
    sizes: list[tuple[str, int]] = []
    rank = world = None
    if isinstance(distributed, dict):
        for name, keys in SIZE_KEYS.items():
            for key in keys:
                if key in distributed:
                    v = _whole(distributed[key])
                    if v is None or v == 0:
                        notes.append(f"{where}: distributed_args {key} = {distributed[key]!r} is not a size")
                    else:
                        sizes.append((name, v))
                    break
        rank = _whole(distributed.get("rank"))
        world = _whole(distributed.get("world_size"))
    elif distributed is not None:
        notes.append(f"{where}: distributed_args is not an object")
    found: list[tuple[str, str, tuple[int, ...]]] = []
    if isinstance(groups, dict):
        for key, info in groups.items():
            if not isinstance(info, dict):
                notes.append(f"{where}: parallel_group_info {key!r} is not an object")
                continue
            label = info.get("group_name")
            ranks = info.get("global_ranks")
            members = [_whole(r) for r in ranks] if isinstance(ranks, list) else None
            if members is None or None in members:
                notes.append(f"{where}: parallel_group_info {key!r} has no list of global_ranks")
                continue
            if not isinstance(label, str) or not label.strip():
                # torch_npu fills group_name only where the framework names its groups
                # (Megatron / MindSpeed do); the communicator's name stands for it.
                label = f"group {key}"
            found.append((label.strip(), str(key), tuple(sorted({m for m in members if m is not None}))))
    elif groups is not None:
        notes.append(f"{where}: parallel_group_info is not an object")
    if not sizes and not found and rank is None:
        return RankMeta(None, None, (), (), source, tuple(notes)) if notes else None
    return RankMeta(rank, world, tuple(sizes), tuple(sorted(found)), source, tuple(notes))


def _metadata_file(folder: Path) -> Path | None:
    for d in (folder, folder / "ASCEND_PROFILER_OUTPUT"):
        p = d / METADATA_FILE
        try:
            if p.is_file():
                return p
        except OSError:
            continue
    return None


def _read_json(path: Path) -> tuple[object | None, str | None]:
    """(the parsed file, None) or (None, why it cannot be used)."""
    try:
        size = os.stat(path).st_size
        if size > MAX_METADATA_BYTES:
            return None, f"{path}: {size:,} bytes, not a profiler metadata file; left out"
        with open(path, "rb") as fh:
            return json.loads(fh.read()), None
    except (OSError, ValueError, RecursionError) as exc:
        return None, f"{path}: could not be read ({type(exc).__name__}); the parallel layout it declares is left out"


def _db_meta(db: Path) -> tuple[object | None, object | None, str | None]:
    """META_DATA's distributed_args and parallel_group_info of a db export (parsed JSON)."""
    from .db import _Db  # the db reader's read-only, table-only connection

    try:
        with _Db(db) as con:
            table = con.table("META_DATA")
            name, value = con.col("META_DATA", "name"), con.col("META_DATA", "value")
            if table is None or name is None or value is None:
                return None, None, None
            rows = con.frame(
                f'SELECT "{name}" AS name, "{value}" AS value FROM "{table}" '
                f"WHERE \"{name}\" IN ('distributed_args', 'parallel_group_info')",
                {"name": "text", "value": "text"},
            )
    except (ProfileError, sqlite3.Error, OSError) as exc:
        return None, None, f"{db}: META_DATA could not be read ({str(exc).splitlines()[0] if str(exc) else exc})"
    got: dict[str, object] = {}
    for n, v in rows.iter_rows():
        try:
            got[str(n)] = json.loads(v) if isinstance(v, str) else None
        except (ValueError, RecursionError):
            return None, None, f"{db}: META_DATA {n} is not JSON; the parallel layout it declares is left out"
    return got.get("distributed_args"), got.get("parallel_group_info"), None


def read_rank_meta(folder: Path, db: Path | None = None) -> RankMeta | None:
    """The rank's declared layout: profiler_metadata.json, else the db export's META_DATA
    (`db`: the rank's db export, when it has one); None when neither declares one."""
    path = _metadata_file(folder)
    if path is not None:
        data, why = _read_json(path)
        if why is not None:
            return RankMeta(None, None, (), (), "profiler_metadata", (why,))
        if not isinstance(data, dict):
            return RankMeta(None, None, (), (), "profiler_metadata", (f"{path}: not a JSON object; left out",))
        got = parse_metadata(
            data.get("distributed_args"), data.get("parallel_group_info"), "profiler_metadata", str(path)
        )
        if got is not None:
            return got
    if db is not None:
        distributed, groups, why = _db_meta(db)
        if why is not None:
            return RankMeta(None, None, (), (), "db", (why,))
        return parse_metadata(distributed, groups, "db", f"{db} META_DATA")
    return None


def op_kind(op_name: str | None) -> str:
    """What an HCCL op's name says of its group: "p2p" (send / receive: a pipeline group),
    "alltoall" (an expert group) or "collective"."""
    name = op_name or ""
    if _P2P_RE.search(name):
        return "p2p"
    if _ALL_TO_ALL_RE.search(name):
        return "alltoall"
    return "collective"
