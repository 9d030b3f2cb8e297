"""The report of one rank of a cluster, the cluster's findings on it among its own: made where
the rank's frames are (this machine, or the node that holds the rank, capture/dask_engine.py),
for `npuscope report` on a cluster folder or a nodes file alike."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from npuscope.parsers import FrameCache

from .cluster import ClusterSummary, open_rank
from .op_report import find_task, op_report
from .report import build_report
from .session import Analysis, Options, analyse, diagnosed
from .thresholds import Thresholds


@dataclass(frozen=True)
class RankReport:
    report: dict[str, Any] | None  # the JSON document of the rank (None for --op)
    op_text: str | None = None  # --op: the op's report
    pictures: dict[str, Any] = field(default_factory=dict)  # html: the rank's timeline pictures


@dataclass(frozen=True)
class RankRequest:
    """What a rank's report is asked for with (the command's options)."""

    thresholds: Thresholds
    strict: bool = False
    top: int = 10
    op: str | None = None
    html: bool = False
    use_cache: bool = True  # False: the rank is read from scratch, nothing cached


def rank_report(
    summary: ClusterSummary,
    rank: str,
    request: RankRequest,
    rank_cache: FrameCache | None = None,
    views_cache: FrameCache | None = None,
) -> RankReport:
    """The usual report of `rank` (its frames from `rank_cache`, its views cached in
    `views_cache`)."""
    profile = open_rank(summary, rank, cache=rank_cache)
    options = Options(request.thresholds, strict=request.strict, views_cache=views_cache, cluster=summary, rank=rank)
    if request.op:
        first = diagnosed(profile, options)
        return RankReport(None, op_report(profile, first.diagnosis, find_task(first.diagnosis, request.op)))
    analysis = analyse(profile, options)
    report = build_report(profile, analysis.diagnosis, top=request.top, views=analysis.views)
    report["rank"] = rank
    pictures: dict[str, Any] = {}
    if request.html:
        from .html_report import timeline_pictures

        pictures = timeline_pictures(profile, analysis.diagnosis)
    return RankReport(report, None, pictures)


def rank_analysis_here(
    summary: ClusterSummary, rank: str, thresholds: Thresholds, strict: bool, use_cache: bool = True
) -> Analysis:
    """The whole analysis of `rank` on the node holding it (frames, diagnosis, training
    views: what the explorer shows of a rank), with the node's own cache."""
    bare = replace(summary, host=None)
    rank_cache = FrameCache(enabled=use_cache, background=True)
    try:
        profile = open_rank(bare, rank, cache=rank_cache, pmu="ratios")
        cache = FrameCache(enabled=use_cache)
        options = Options(thresholds, strict=strict, cache=cache, views_cache=cache, cluster=bare, rank=rank)
        return analyse(profile, options)
    finally:
        rank_cache.flush()


def rank_report_here(summary: ClusterSummary, rank: str, request: RankRequest) -> RankReport:
    """rank_report on the node holding the rank, with the node's own cache (where its parse
    left the frames)."""
    rank_cache = FrameCache(enabled=request.use_cache, background=True)
    views_cache = FrameCache(enabled=request.use_cache)
    try:
        return rank_report(replace(summary, host=None), rank, request, rank_cache, views_cache)
    finally:
        rank_cache.flush()
