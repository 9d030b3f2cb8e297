"""The parallel layout of a cluster: its TP / PP / DP / CP / EP sizes, the groups of ranks, the
pipeline stage of each rank, and per stage the means per step of its ranks.

Where it comes from, most explicit first (`ParallelLayout.source`):
  profiler_metadata   the ranks' profiler_metadata.json (`distributed_args`,
                      `parallel_group_info`): torch_npu 2.x in Megatron / MindSpeed runs
  db                  the same objects in the db exports' META_DATA table
  inferred            no rank declares a layout: the HCCL groups of the communication files
                      (parsers/rank_figures.comm_groups) are the groups; one whose ops are P2P
                      sends / receives is a pipeline group, one with all-to-all an expert
                      group; the others are named `group <id>` (their role cannot be told)

Groups are completed where a rank's metadata leaves one out (real captures list `dp_cp` but
no `dp` on some ranks): `dp` is taken from `dp_cp` when cp = 1, else made from the sizes in
Megatron's order (tensor-parallel ranks fastest, then context, data, pipeline), and the
completion is said in the notes. A rank's stage is its place in its pipeline group (stage 0
first); without a pipeline group every rank is in stage 0.

No file is read here: the ranks' entries carry what their files say.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from npuscope.parsers.cluster import RankEntry
from npuscope.parsers.parallel_meta import RankMeta

SIZES = ("tp", "pp", "dp", "cp", "ep")
SOURCES = ("profiler_metadata", "db", "inferred")
_CANONICAL = ("tp", "cp", "dp", "pp")  # Megatron's order, fastest first


@dataclass(frozen=True)
class Group:
    name: str  # tp, pp, dp, dp_cp, cp, mp, ep, embd, default_group, ... or `group <id>`
    ranks: tuple[int, ...]
    gid: str = ""  # the HCCL group id, when the files give it


@dataclass(frozen=True)
class Stage:
    """One pipeline stage: its ranks and the means per step over those with steps."""

    stage: int
    ranks: tuple[str, ...]
    compute_us: float
    bubble_us: float
    step_us: float
    exposed_comm_us: float
    free_us: float


@dataclass(frozen=True)
class ParallelLayout:
    sizes: dict[str, int | None]  # tp, pp, dp, cp, ep (None: not declared and not inferable)
    world_size: int
    source: str  # one of SOURCES
    groups: tuple[Group, ...]
    stage_of: dict[str, int]  # rank label -> stage
    stages: tuple[Stage, ...]
    notes: tuple[str, ...] = ()

    def groups_named(self, name: str) -> tuple[Group, ...]:
        return tuple(g for g in self.groups if g.name == name)

    def peers(self, rank: str) -> tuple[str, ...]:
        """The ranks that do the same work as `rank`: those of its stage."""
        stage = self.stage_of.get(rank)
        return tuple(r for r, s in self.stage_of.items() if s == stage)

    def to_json(self) -> dict[str, Any]:
        return {
            **{k: self.sizes.get(k) for k in SIZES},
            "world_size": self.world_size,
            "source": self.source,
            "groups": [{"name": g.name, "ranks": list(g.ranks)} for g in self.groups],
            "stages": [
                {
                    "stage": s.stage,
                    "ranks": list(s.ranks),
                    "compute_us": round(s.compute_us, 3),
                    "bubble_us": round(s.bubble_us, 3),
                    "step_us": round(s.step_us, 3),
                }
                for s in self.stages
            ],
            "notes": list(self.notes),
        }


def _rank_number(label: str) -> int | None:
    return int(label) if label.isascii() and label.isdigit() else None


def megatron_groups(sizes: dict[str, int], world: int) -> dict[str, list[tuple[int, ...]]]:
    """The tp, cp, dp, pp (and ep, dp_cp) groups Megatron makes for these sizes: rank =
    ((pp_i * dp + dp_i) * cp + cp_i) * tp + tp_i; expert groups are consecutive blocks of ep
    ranks of each data-parallel group. {} when the sizes do not multiply to `world`."""
    tp, cp, dp, pp = (sizes.get(k, 1) or 1 for k in _CANONICAL)
    ep = sizes.get("ep", 1) or 1
    if tp * cp * dp * pp != world or world <= 0:
        return {}
    dims = {"tp": tp, "cp": cp, "dp": dp, "pp": pp}
    strides = {"tp": 1, "cp": tp, "dp": tp * cp, "pp": tp * cp * dp}
    out: dict[str, list[tuple[int, ...]]] = {}
    for name in _CANONICAL:
        seen: set[tuple[int, ...]] = set()
        for r in range(world):
            base = r - ((r // strides[name]) % dims[name]) * strides[name]
            seen.add(tuple(base + i * strides[name] for i in range(dims[name])))
        out[name] = sorted(seen)
    dp_cp: set[tuple[int, ...]] = set()
    for r in range(world):
        block = r // (tp * cp * dp)
        t = r % tp
        dp_cp.add(tuple(block * tp * cp * dp + i * tp + t for i in range(cp * dp)))
    out["dp_cp"] = sorted(dp_cp)
    if ep > 1 and (dp * cp) % ep == 0:
        out["ep"] = sorted({g[i : i + ep] for g in out["dp_cp"] for i in range(0, len(g), ep)})
    return out


def _declared(
    found: Sequence[RankMeta | None],
) -> tuple[dict[str, int], int | None, dict[tuple[str, tuple[int, ...]], str], str] | None:
    metas = [m for m in found if m is not None and (m.sizes or m.groups)]
    if not metas:
        return None
    sizes: dict[str, int] = {}
    for name in SIZES:
        values = [v for m in metas for n, v in m.sizes if n == name]
        if values:
            sizes[name] = max(set(values), key=values.count)
    worlds = [m.world_size for m in metas if m.world_size]
    world = max(worlds) if worlds else None
    groups: dict[tuple[str, tuple[int, ...]], str] = {}
    for m in metas:
        for name, gid, ranks in m.groups:
            groups.setdefault((name, ranks), gid)
    source = "profiler_metadata" if any(m.source == "profiler_metadata" for m in metas) else "db"
    return sizes, world, groups, source


def _inferred(
    comm: Sequence[tuple[str, tuple[tuple[str, str, tuple[int, ...]], ...]]],
) -> tuple[dict[tuple[str, tuple[int, ...]], str], dict[str, int], set[int]] | None:
    """Groups from the HCCL groups the ranks' communication files show, and every rank they
    name. Pipeline groups are the connected ranks of the P2P links (a rank's send / receive
    peers, where its own links start at its own rank: the files number links by global rank
    then; real torch_npu sends over the world communicator, so the group id alone does not
    tell the pipeline group); other groups are the ranks of the folder that recorded the
    group id (an all-to-all one is an expert group)."""
    peers: dict[int, set[int]] = {}
    by_id: dict[str, tuple[set[str], set[int]]] = {}
    named: set[int] = set()
    for label, seen in comm:
        own = _rank_number(label)
        if own is None:
            continue
        named.add(own)
        for gid, kind, ranks in seen:
            if kind == "p2p" and own in ranks:
                others = set(ranks) - {own}
                peers.setdefault(own, set()).update(others)
                for r in others:
                    peers.setdefault(r, set()).add(own)
                named.update(others)
                continue
            kinds, members = by_id.setdefault(gid, (set(), set()))
            kinds.add(kind)
            members.add(own)
    groups: dict[tuple[str, tuple[int, ...]], str] = {}
    left = set(peers)
    while left:  # connected components of the P2P links
        todo, component = [left.pop()], set()
        while todo:
            r = todo.pop()
            component.add(r)
            todo += [x for x in peers.get(r, ()) if x not in component]
        left -= component
        if len(component) > 1:
            groups.setdefault(("pp", tuple(sorted(component))), "")
    for gid, (kinds, members) in sorted(by_id.items()):
        if len(members) < 2:
            continue
        name = "ep" if "alltoall" in kinds else "pp" if "p2p" in kinds else f"group {gid}"
        groups.setdefault((name, tuple(sorted(members))), gid)
    if not groups:
        return None
    sizes: dict[str, int] = {}
    for name in ("pp", "ep"):
        lens = [len(r) for (n, r) in groups if n == name]
        if lens:
            sizes[name] = max(lens)
    return groups, sizes, named


def _complete(
    groups: dict[tuple[str, tuple[int, ...]], str], sizes: dict[str, int], world: int, notes: list[str]
) -> dict[tuple[str, tuple[int, ...]], str]:
    """Groups of tp / cp / dp / pp / ep that leave ranks of the world out, completed."""
    canonical = megatron_groups(sizes, world) if all(k in sizes for k in ("tp", "pp", "dp")) else {}
    out = dict(groups)
    for name in ("tp", "cp", "dp", "pp", "ep"):
        have = [r for (n, r) in out if n == name]
        covered = {x for r in have for x in r}
        if len(covered) >= world or not (have or name == "dp" or (sizes.get(name) or 1) > 1):
            continue
        dp_cp = [r for (n, r) in out if n == "dp_cp"]
        if name == "dp" and (sizes.get("cp") or 1) == 1 and dp_cp:
            added = [r for r in dp_cp if not set(r) & covered]
            why = "taken from dp_cp (cp = 1): some ranks' metadata lists dp_cp but no dp"
        else:
            added = [r for r in canonical.get(name, []) if not set(r) & covered]
            why = "made from the sizes (Megatron's order): no rank's metadata lists them"
        for r in added:
            out[(name, r)] = ""
        if added:
            notes.append(f"{len(added)} {name} group(s) {why}")
    return out


def _stage_of(ranks: Sequence[str], groups: dict[tuple[str, tuple[int, ...]], str]) -> dict[str, int]:
    pp = [r for (n, r) in groups if n == "pp"]
    place: dict[int, int] = {}
    for members in pp:
        for i, r in enumerate(sorted(members)):
            place.setdefault(r, i)
    out = {}
    for label in ranks:
        n = _rank_number(label)
        out[label] = place.get(n, 0) if n is not None else 0
    return out


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def stage_figures(entries: Sequence[RankEntry], stage_of: dict[str, int]) -> tuple[Stage, ...]:
    """Per stage, the means per step over its ranks that have steps (a rank without steps is
    listed but not counted)."""
    out = []
    for stage in sorted(set(stage_of.values())):
        members = [e for e in entries if stage_of.get(e.rank) == stage]
        timed = [e.summary for e in members if e.summary.error is None and e.summary.steps > 0]
        out.append(
            Stage(
                stage=stage,
                ranks=tuple(e.rank for e in members),
                compute_us=_mean([s.compute_us for s in timed]),
                bubble_us=_mean([s.bubble_us or 0.0 for s in timed]),
                step_us=_mean([s.step_us or 0.0 for s in timed]),
                exposed_comm_us=_mean([s.exposed_comm_us for s in timed]),
                free_us=_mean([s.free_us for s in timed]),
            )
        )
    return tuple(out)


def parallel_layout(entries: Sequence[RankEntry]) -> ParallelLayout | None:
    """The cluster's layout from its ranks' entries (those readable), None when nothing
    declares or shows one (no metadata, no communication groups)."""
    ok = [e for e in entries if e.summary.error is None]
    layout = layout_of([e.rank for e in entries], [e.meta for e in ok], [(e.rank, e.comm_groups) for e in ok])
    if layout is None:
        return None
    return replace(layout, stages=stage_figures(entries, layout.stage_of))


def layout_of(
    labels: Sequence[str],
    metas: Sequence[RankMeta | None],
    comm: Sequence[tuple[str, tuple[tuple[str, str, tuple[int, ...]], ...]]] = (),
) -> ParallelLayout | None:
    """The layout of ranks `labels` from what their files declare (`metas`) or, where none
    does, from the HCCL groups their communication files show (`comm`: rank, groups); the
    stages' figures are left empty (parallel_layout fills them)."""
    notes: list[str] = []
    declared = _declared(metas)
    if declared is not None:
        sizes, world_said, groups, source = declared
    else:
        inferred = _inferred(comm)
        if inferred is None:
            return None
        groups, sizes, named = inferred
        world_said, source = None, "inferred"
        notes.append(
            "no rank declares its layout (profiler_metadata.json, META_DATA): groups inferred from the "
            "communication files' HCCL groups"
        )
    members = {x for (_, r) in groups for x in r}
    numbers = [n for n in (_rank_number(label) for label in labels) if n is not None]
    if world_said:
        world = world_said
    elif source == "inferred":
        world = max([len(labels), *(x + 1 for x in named)])
        outside = sorted(named - set(numbers))
        if outside:
            notes.append(
                f"the communication files name ranks outside this folder ({', '.join(map(str, outside[:8]))}"
                f"{', ...' if len(outside) > 8 else ''}): the job has at least {world} ranks"
            )
    else:
        world = max([len(labels), *(x + 1 for x in members), *(n + 1 for n in numbers)])
    if source != "inferred":
        groups = _complete(groups, sizes, world, notes)
        product = 1
        for k in ("tp", "pp", "dp", "cp"):
            product *= sizes.get(k, 1) or 1
        if all(k in sizes for k in ("tp", "pp", "dp")) and product != world:
            notes.append(f"the declared sizes multiply to {product}, not the world size {world}")
        if len(labels) < world:
            notes.append(f"{len(labels)} of the job's {world} ranks are in this folder")
    stage_of = _stage_of(labels, groups)
    full: dict[str, int | None] = {k: sizes.get(k) for k in SIZES}
    if source == "inferred":
        full["pp"] = full["pp"] or 1
    ordered = sorted(groups.items(), key=lambda kv: (_group_order(kv[0][0]), kv[0][1]))
    return ParallelLayout(
        sizes=full,
        world_size=world,
        source=source,
        groups=tuple(Group(name, ranks, gid) for (name, ranks), gid in ordered),
        stage_of=stage_of,
        stages=(),
        notes=tuple(notes),
    )


_NAME_ORDER = ("tp", "cp", "dp", "dp_cp", "pp", "ep", "mp", "embd", "default_group")


def _group_order(name: str) -> tuple[int, str]:
    return (_NAME_ORDER.index(name), "") if name in _NAME_ORDER else (len(_NAME_ORDER), name)
