"""The cluster summary: per rank figures, slow ranks, spread, slow links, the slowest rank of
each op type, from the ranks' entries (npuscope.parsers.cluster), never from their tasks.

`open_cluster(path)` finds the ranks (`rank_folders`), reads each rank's entry (from the cache,
else parsed in worker processes) and summarises them; `open_rank(summary, rank)` opens one
rank as the usual Profile. Only the rank opened is ever loaded whole.

The rules are those of one profile (analysis/training_rules.py), run over the ranks' rows:
slow ranks by `slow_ranks` (msprof-analyze SlowRankAnalyzer: compute, communication not
overlapped and free per step, spread over the mean step time > Thresholds.slow_rank_pct),
`slow_rank` / `slow_link` for the findings, with the same names, wording and thresholds.
"""

from __future__ import annotations

import math
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Protocol

import polars as pl

from npuscope.parsers import FrameCache, Profile, ProfileError, ReadOptions
from npuscope.parsers.cluster import (
    DEFAULT_OPTIONS,
    RANK_LINKS_SCHEMA,
    RANK_STEPS_SCHEMA,
    Progress,
    RankEntry,
    RankSummary,
    open_rank_profile,
    parse_rank,
    rank_folders,
    read_ranks,
)
from npuscope.parsers.rank_figures import kinds_missing
from npuscope.parsers.training import empty_views

from . import parallel_rules, training_rules
from .device_kind import DeviceKind
from .findings import Finding, order
from .parallel import ParallelLayout, parallel_layout
from .rule_names import SLOW_RANK
from .rules import Framework
from .thresholds import Thresholds

__all__ = [
    "ClusterSummary",
    "RankEntry",
    "RankSummary",
    "cluster_json",
    "rank_findings",
    "open_cluster",
    "open_rank",
    "parse_rank",
    "rank_folders",
    "summarize",
]

OP_TYPE_SLOWEST_SCHEMA: dict[str, pl.DataType] = {
    "op_type": pl.String(),
    "rank": pl.String(),
    "total_us": pl.Float64(),
    "median_us": pl.Float64(),
    "ranks": pl.UInt32(),
}
DEFAULT_THRESHOLDS = Thresholds()
RANK_COLUMNS = tuple(f.name for f in fields(RankSummary))
_DAMAGE = re.compile(r"damaged|not read:|could not be read")
"""A rank's notes that say something of its files was left out (the rest are routine)."""
_FRAMEWORKS: dict[str, Framework] = {"torch_npu": "torch_npu", "mindspore": "mindspore", "paddle": "paddle"}


class RankHost(Protocol):
    """What holds the rank folders of a cluster on other machines (capture/dask_engine.py)."""

    def open_rank(self, folder: Path, options: ReadOptions) -> Profile: ...

    def run_on_rank(self, folder: str | Path, fn: Any, *args: Any) -> Any: ...

    def stop(self) -> None: ...


@dataclass(frozen=True)
class ClusterSummary:
    """A cluster at a glance: one RankSummary per rank (rank order), the slow ranks (worst
    first), the largest slow-rank spread (% of the mean step time, as SlowRankAnalyzer
    measures it, whether above the threshold or not), per op type the rank with the most time
    in it and the median over the ranks that ran it, the slow links ("src->dst transport",
    worst first) and the findings of the cluster (slow_rank, slow_link)."""

    path: Path
    ranks: tuple[RankSummary, ...]
    slow_ranks: tuple[str, ...]
    spread_pct: float
    op_type_slowest: pl.DataFrame  # op_type, rank, total_us, median_us, ranks
    slow_links: tuple[str, ...] = ()
    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()
    layout: str = ""
    options: ReadOptions = DEFAULT_OPTIONS
    cache_root: Path | None = None  # where the ranks' frames were cached (open_rank reads them)
    parallel: ParallelLayout | None = None  # the TP / PP / DP / EP layout, when declared or seen
    links: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=RANK_LINKS_SCHEMA))
    """Every readable rank's links (card = the rank that recorded it; src, dst as its files
    number them), for the communication matrix."""
    host: RankHost | None = field(default=None, compare=False)
    """Where the ranks' folders are when they are not on this machine (a nodes file: the
    Dask engine): open_rank reads a rank's frames through it."""

    def frame(self) -> pl.DataFrame:
        """One row per rank, the RankSummary columns (folder as text)."""
        rows = [
            {**{c: getattr(r, c) for c in RANK_COLUMNS}, "folder": str(r.folder), "missing": ", ".join(r.missing)}
            for r in self.ranks
        ]
        schema: dict[str, pl.DataType] = {
            "rank": pl.String(),
            "folder": pl.String(),
            "step_us": pl.Float64(),
            "compute_us": pl.Float64(),
            "communication_us": pl.Float64(),
            "exposed_comm_us": pl.Float64(),
            "free_us": pl.Float64(),
            "wait_us": pl.Float64(),
            "tasks": pl.Int64(),
            "error": pl.String(),
            "steps": pl.Int64(),
            "bubble_us": pl.Float64(),
            "moe_us": pl.Float64(),
            "stage": pl.Int64(),
            "missing": pl.String(),
        }
        return pl.DataFrame(rows, schema=schema) if rows else pl.DataFrame(schema=schema)

    def rank(self, rank: str) -> RankSummary:
        for r in self.ranks:
            if r.rank == rank:
                return r
        raise ProfileError(f"no rank {rank!r} in {self.path}; ranks: {', '.join(r.rank for r in self.ranks)}")


class _ClusterContext(training_rules._Context):
    """The rules' context over the ranks' rows: views of every rank (card = rank), no single
    profile or diagnosis. slow_rank and slow_link read the views, the thresholds and
    `finding`; they read the profile only for a card without step time (`_span`): the stand-in
    says the start times are unusable there, so the span is 0. `finding` is this class's own,
    so the base's attributes for one profile (device kind, ...) are not needed."""

    def __init__(
        self, steps: pl.DataFrame, links: pl.DataFrame, th: Thresholds, framework: Framework, kind: DeviceKind = "NPU"
    ) -> None:
        self.views = replace(empty_views(), steps=steps, links=links)
        self.th = th
        self.framework = framework
        self.kind = kind
        self.profile = _NoProfile()  # type: ignore[assignment]

    def finding(self, rule: str, card: str, **kw: Any) -> Finding:
        return Finding(
            rule=rule,
            severity=kw.pop("severity", "warning"),
            card=card,
            op_types=kw.pop("op_types", ()),
            op_names=kw.pop("op_names", ()),
            advice=training_rules.advice(rule, self.framework, self.kind),
            **kw,
        )


class _NoProfile:
    time_problem = "a cluster: ranks have no common start time"


def _concat(frames: list[pl.DataFrame], schema: dict[str, pl.DataType]) -> pl.DataFrame:
    frames = [f for f in frames if f.height]
    return pl.concat(frames, how="vertical") if frames else pl.DataFrame(schema=schema)


def _op_type_slowest(entries: Sequence[RankEntry]) -> pl.DataFrame:
    parts = [
        e.ops.select("op_type", "total_us").with_columns(pl.lit(e.rank).alias("rank")) for e in entries if e.ops.height
    ]
    if not parts:
        return pl.DataFrame(schema=OP_TYPE_SLOWEST_SCHEMA)
    ops = pl.concat(parts, how="vertical").filter(pl.col("op_type").is_not_null())
    got = (
        ops.sort(["total_us", "rank"], descending=[True, False])
        .group_by("op_type", maintain_order=True)
        .agg(
            pl.col("rank").first(),
            pl.col("total_us").first(),
            pl.col("total_us").median().alias("median_us"),
            pl.len().cast(pl.UInt32).alias("ranks"),
        )
        .sort(["total_us", "op_type"], descending=[True, False])
    )
    return got.select([pl.col(c).cast(t) for c, t in OP_TYPE_SLOWEST_SCHEMA.items()])


def summarize(
    entries: Sequence[RankEntry], thresholds: Thresholds = DEFAULT_THRESHOLDS, path: Path | None = None
) -> ClusterSummary:
    """The cluster summary of the ranks' entries (any order; ranks keep the given order)."""
    th = thresholds
    ok = [e for e in entries if e.summary.error is None]
    bad = [e for e in entries if e.summary.error is not None]
    steps = _concat([e.steps for e in ok], RANK_STEPS_SCHEMA)
    links = _concat([e.links for e in ok], RANK_LINKS_SCHEMA)
    layouts = [e.layout for e in ok if e.layout]
    layout = max(set(layouts), key=layouts.count) if layouts else ""
    # Every export but a Paddle trace comes from an NPU; a Paddle cluster's device is not in
    # the rank entries (the trace's events say it), so its advice names no device's tools.
    kind: DeviceKind = "unknown" if layout == "paddle" else "NPU"
    ctx = _ClusterContext(steps, links, th, _FRAMEWORKS.get(layout, "unknown"), kind)
    names = tuple(e.rank for e in ok)
    par = parallel_layout(entries)
    findings: list[Finding] = parallel_rules.slow_ranks_by_stage(ctx, par, names, ok)
    notes: list[str] = []
    if par is not None:
        notes += par.notes
        imbalance = parallel_rules.stage_imbalance(ctx, par, ok)
        findings += [imbalance] if imbalance is not None else []
        findings += parallel_rules.pipeline_bubble(ctx, par, ok, imbalance)
        experts, why = parallel_rules.expert_imbalance(ctx, par, ok)
        findings += experts
        notes += why
    # Every slow link of a rank named, not only the evidence rows shown.
    wide = _ClusterContext(
        steps, links, replace(th, evidence_rows=max(th.evidence_rows, links.height)), ctx.framework, kind
    )
    slow_links: list[tuple[float, str]] = []
    for rank in _link_suspects(links, th, names):
        for f in training_rules.slow_link(wide, rank):
            for row in f.evidence:
                slow_links.append((_num(row.get("bandwidth_gbps")), f"{row['src']}->{row['dst']} {row['transport']}"))
            findings.append(replace(f, evidence=f.evidence[: th.evidence_rows]))
    spread_pct = 0.0
    for peers in parallel_rules.peer_sets(par, names):
        spread = training_rules.slow_ranks(steps.filter(pl.col("card").is_in(peers)), -math.inf)
        spread_pct = max([spread_pct, *(d.spread_pct for dims in spread.values() for d in dims)])
    slow = [f for f in findings if f.rule == SLOW_RANK]
    if bad:
        shown = "; ".join(f"rank {e.rank}: {e.summary.error}" for e in bad[:3])
        more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        notes.append(f"{len(bad)} of {len(entries)} ranks could not be read ({shown}{more})")
    damaged = [(e.rank, n) for e in ok for n in e.notes if _DAMAGE.search(n)]
    if damaged:
        shown = "; ".join(f"rank {r}: {n}" for r, n in damaged[:3])
        more = f" and {len(damaged) - 3} more" if len(damaged) > 3 else ""
        ranks = len({r for r, _ in damaged})
        notes.append(f"{ranks} rank(s) read with damaged rows or files left out ({shown}{more})")
    no_steps = [e.rank for e in ok if e.steps.height == 0]
    if no_steps and ok:
        notes.append(f"{len(no_steps)} rank(s) without steps are left out of the slow-rank comparison")
    every = [e.has for e in ok]
    partial = [(e.rank, kinds_missing(e.has, every)) for e in ok]
    lacking = [(r, m) for r, m in partial if m]
    if lacking:
        shown = "; ".join(f"rank {r}: no {', '.join(m)}" for r, m in lacking[:3])
        more = f" and {len(lacking) - 3} more" if len(lacking) > 3 else ""
        notes.append(
            f"{len(lacking)} rank(s) hold fewer files than the others ({shown}{more}): what they lack is left out of their figures"
        )
    missing = dict(partial)
    summaries = tuple(
        replace(
            e.summary,
            stage=par.stage_of.get(e.rank) if par is not None else None,
            missing=missing.get(e.rank, ()),
        )
        for e in entries
    )
    return ClusterSummary(
        path=path if path is not None else (entries[0].summary.folder.parent if entries else Path(".")),
        ranks=summaries,
        slow_ranks=tuple(f.card for f in sorted(slow, key=lambda f: -f.time_us)),
        spread_pct=round(spread_pct, 3),
        op_type_slowest=_op_type_slowest(ok),
        slow_links=tuple(dict.fromkeys(name for _, name in sorted(slow_links, key=lambda x: x[0]))),
        findings=tuple(order(findings)),
        notes=tuple(notes),
        layout=layout,
        parallel=par,
        links=links,
    )


def _link_suspects(links: pl.DataFrame, th: Thresholds, ranks: tuple[str, ...]) -> list[str]:
    """The ranks slow_link may flag, in rank order: those with a measured link (the rule's own
    `_measured_links`) below slow_link_pct of its transport's median. Only a pre-screen, so the
    rule (which computes the medians again on every call) runs on a few ranks, not on 1,000;
    the rule decides."""
    measured = training_rules._measured_links(links, th.small_packet_mb)
    if measured.height == 0:
        return []
    medians = measured.group_by("transport").agg(pl.col("bandwidth_gbps").median().alias("_median"))
    below = measured.join(medians, on="transport").filter(
        pl.col("bandwidth_gbps") < th.slow_link_pct / 100.0 * pl.col("_median")
    )
    found = set(below["card"].to_list())
    return [r for r in ranks if r in found]


def _num(x: object) -> float:
    return float(x) if isinstance(x, (int, float)) else math.inf


def open_cluster(
    path: str | os.PathLike[str],
    *,
    jobs: int | None = None,
    cache: FrameCache | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    options: ReadOptions = DEFAULT_OPTIONS,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    ranks: Sequence[tuple[str, Path]] | None = None,
) -> ClusterSummary:
    """The summary of the cluster at `path` (ProfileError when it is not a cluster: one
    capture, or nothing found). Each rank is read by itself (see read_ranks); a rank that
    cannot be read is a RankSummary with `error` set, the others still count. `ranks`: what
    `rank_folders(path)` gave, when the caller asked it already (finding 1,000 ranks takes
    ~0.2 s)."""
    root = Path(path).expanduser()
    if ranks is None:
        ranks = rank_folders(root)
    if ranks is None:
        raise ProfileError(f"{root}: one capture, not a cluster (a folder of rank folders); open it as a profile")
    cache = cache if cache is not None else FrameCache()
    entries = read_ranks(ranks, jobs=jobs, cache=cache, progress=progress, cancel=cancel, options=options)
    summary = summarize(entries, thresholds, root)
    return replace(summary, options=options, cache_root=cache.root if cache.enabled else None)


def open_rank(summary: ClusterSummary, rank: str, **open_profile_kwargs: Any) -> Profile:
    """The usual Profile of one rank of the cluster: its frames come from the cache entries
    its parse left (the summary's cache folder) unless `cache=` says otherwise."""
    r = summary.rank(rank)
    if summary.host is not None:
        return summary.host.open_rank(r.folder, summary.options)
    kwargs: dict[str, Any] = {
        "strict": summary.options.strict,
        "source": summary.options.source,
        "timeline": summary.options.timeline,
        "training_only": True,  # a rank of training-level files only opens with no tasks
        **open_profile_kwargs,
    }
    if "cache" not in kwargs:
        kwargs["cache"] = FrameCache(summary.cache_root) if summary.cache_root is not None else None
    return open_rank_profile(r.folder, **kwargs)


def rank_findings(
    summary: ClusterSummary, rank: str, own: Sequence[Finding], cards: tuple[str, ...], folder: Path | None = None
) -> list[Finding]:
    """`own` (a rank's own training findings) and the cluster's findings about `rank` (slow
    rank, slow links from it, its pipeline stage's imbalance or bubble) on the rank's one card, for the report and the explorer alike.
    None of the cluster's when the rank has several cards (no one card to put them on) or when
    `folder` is not that rank's folder (a rank opened from elsewhere)."""
    if len(cards) != 1:
        return list(own)
    if folder is not None and not any(r.rank == rank and r.folder == folder for r in summary.ranks):
        return list(own)
    seen = {(f.rule, f.title) for f in own}
    stage = next((r.stage for r in summary.ranks if r.rank == rank), None)
    about = {rank} | ({parallel_rules.stage_card(stage)} if stage is not None and summary.parallel else set())
    theirs = [replace(f, card=cards[0]) for f in summary.findings if f.card in about and (f.rule, f.title) not in seen]
    return [*own, *theirs]


def cluster_json(summary: ClusterSummary) -> dict[str, Any]:
    """The report's JSON `cluster` object."""

    def num(x: float | None) -> float | None:
        return None if x is None or not math.isfinite(x) else round(x, 3)

    return {
        "ranks": [
            {
                "rank": r.rank,
                "stage": r.stage,
                "missing": list(r.missing),
                "steps": r.steps,
                "step_us": num(r.step_us),
                "compute_us": num(r.compute_us),
                "communication_us": num(r.communication_us),
                "exposed_comm_us": num(r.exposed_comm_us),
                "free_us": num(r.free_us),
                "bubble_us": num(r.bubble_us),
                "moe_us": num(r.moe_us),
                "wait_us": num(r.wait_us),
                "tasks": r.tasks,
                "error": r.error,
            }
            for r in summary.ranks
        ],
        "slow_ranks": list(summary.slow_ranks),
        "spread_pct": summary.spread_pct,
        "slow_links": list(summary.slow_links),
        "parallel": summary.parallel.to_json() if summary.parallel is not None else None,
        "findings": [_finding_json(f, summary) for f in summary.findings],
    }


def finding_scope(f: Finding, summary: ClusterSummary) -> tuple[list[str], list[int]]:
    """The ranks and stages a cluster finding is about (a stage's finding: its ranks)."""
    if f.card.startswith(parallel_rules.STAGE_CARD):
        stage = int(f.card[len(parallel_rules.STAGE_CARD) :])
        ranks = [r.rank for r in summary.ranks if r.stage == stage]
        return ranks, [stage]
    r = next((r for r in summary.ranks if r.rank == f.card), None)
    return [f.card], ([r.stage] if r is not None and r.stage is not None else [])


def _finding_json(f: Finding, summary: ClusterSummary) -> dict[str, Any]:
    ranks, stages = finding_scope(f, summary)
    return {
        "rule": f.rule,
        "severity": f.severity,
        "title": f.title,
        "advice": f.advice,
        "time_us": round(f.time_us, 3),
        "share_pct": f.share_pct,
        "ranks": ranks,
        "stages": stages,
        "threshold": f.threshold,
    }
