"""The cluster section of the report: per rank figures, slow ranks, spread, slow links, the
cluster's findings and the slowest rank of each op type, as text or markdown.

`npuscope report CLUSTER` prints this section and then the usual report of one rank (the
slowest, or the one `--card` names; every rank with `--card all`). JSON carries the same
summary as `cluster_json` (analysis/cluster.py) under the report's `"cluster"` key.

No Textual, no Rich.
"""

from __future__ import annotations

from .cluster import ClusterSummary, RankSummary
from .findings import SEVERITY_MARK
from .parallel import ParallelLayout
from .table import table_for

SOURCE_WORDS = {
    "profiler_metadata": "declared in profiler_metadata.json",
    "db": "declared in the db exports' META_DATA",
    "inferred": "inferred from the communication files' HCCL groups (no rank declares it)",
}


def _ranks_text(ranks: tuple[int, ...] | tuple[str, ...], most: int = 16) -> str:
    shown = ", ".join(str(r) for r in ranks[:most])
    return f"[{shown}{', ...' if len(ranks) > most else ''}]" + (f" ({len(ranks)} ranks)" if len(ranks) > most else "")


def parallel_lines(layout: ParallelLayout, md: bool, most_groups: int = 12) -> list[str]:
    """The layout: sizes and where they come from, the groups of each kind, each stage's
    means per step (compute, pipeline receive wait, step)."""
    table = table_for(md)
    sizes = ", ".join(f"{k} {v if v is not None else '?'}" for k, v in layout.sizes.items())
    out = [f"{sizes}; world size {layout.world_size}; {SOURCE_WORDS.get(layout.source, layout.source)}"]
    names = list(dict.fromkeys(g.name for g in layout.groups))
    for name in names:
        groups = layout.groups_named(name)
        shown = " ".join(_ranks_text(g.ranks) for g in groups[:most_groups])
        more = f" and {len(groups) - most_groups} more" if len(groups) > most_groups else ""
        out.append(("- " if md else "  ") + f"{name}: {shown}{more}")
    out.append("")
    rows = [
        [
            s.stage,
            _ranks_text(s.ranks, 8),
            s.compute_us,
            s.bubble_us,
            s.step_us,
            f"{100 * s.bubble_us / s.step_us:.1f}%" if s.step_us else "-",
        ]
        for s in layout.stages
    ]
    out += table(["Stage", "Ranks", "Compute(us)", "Bubble(us)", "Step(us)", "Bubble share"], rows, {2, 3, 4, 5})
    return out  # the layout's notes are among the cluster's, at the top


RANK_HEADERS = (
    "Rank",
    "Stage",
    "Step(us)",
    "Compute(us)",
    "Communication(us)",
    "Exposed comm(us)",
    "Free(us)",
    "Wait(us)",
    "Tasks",
    "Mark",
)
"""The per-rank table's columns, every time a mean per step (Mark: slow, the rank detailed
below, the files it lacks, or unreadable: the one-line errors follow the table)."""


def slowest_rank(summary: ClusterSummary) -> str | None:
    """The rank the report details: the worst slow rank, else the readable rank with the
    longest mean step time (the most compute when no rank has steps); ranks with tasks first
    (a rank of training-level files only has no operators to show); None when no rank could
    be read."""
    ok = [r for r in summary.ranks if r.error is None]
    if not ok:
        return None
    with_tasks = {r.rank for r in ok if r.tasks > 0}
    for rank in summary.slow_ranks:
        if rank in with_tasks or not with_tasks:
            return rank
    pool = [r for r in ok if r.rank in with_tasks] or ok
    with_steps = [r for r in pool if r.step_us is not None]
    if with_steps:
        return max(with_steps, key=lambda r: (r.step_us or 0.0, r.compute_us)).rank
    return max(pool, key=lambda r: r.compute_us).rank


def _mark(rank: RankSummary, slow: set[str], detailed: str | None) -> str:
    if rank.error is not None:
        return "UNREADABLE (below)"
    marks = []
    if rank.rank in slow:
        marks.append("slow")
    if rank.rank == detailed:
        marks.append("detailed below")
    if rank.missing:
        marks.append("no " + ", ".join(rank.missing))
    return ", ".join(marks)


def cluster_lines(summary: ClusterSummary, md: bool, top: int, detailed: str | None) -> list[str]:
    """The cluster section; `detailed`: the rank whose report follows (marked in the table)."""
    table = table_for(md)
    bad = [r for r in summary.ranks if r.error is not None]
    out = [("# npuscope cluster: " if md else "npuscope cluster: ") + summary.path.name]
    unread = f", {len(bad)} could not be read" if bad else ""
    out.append(f"{summary.path}  ({summary.layout or 'unknown layout'}, {len(summary.ranks):,} ranks{unread})")
    for note in summary.notes:
        out.append(("- note: " if md else "note: ") + note)
    out += ["", "## Ranks" if md else "== ranks =="]
    slow = set(summary.slow_ranks)
    rows = [
        [
            r.rank,
            r.stage,
            r.step_us,
            r.compute_us,
            r.communication_us,
            r.exposed_comm_us,
            r.free_us,
            r.wait_us,
            r.tasks,
            _mark(r, slow, detailed),
        ]
        if r.error is None
        else [r.rank, r.stage, None, None, None, None, None, None, None, _mark(r, slow, detailed)]
        for r in summary.ranks
    ]
    out += table(RANK_HEADERS, rows, {1, 2, 3, 4, 5, 6, 7, 8})
    if bad:
        out += ["", f"Ranks that could not be read ({len(bad):,})"]
        out += [("- " if md else "  ") + f"rank {r.rank}: {r.error}" for r in bad]
    if summary.parallel is not None:
        out += ["", "### Parallel layout" if md else "Parallel layout"]
        out += parallel_lines(summary.parallel, md)
    out.append("")
    slow_text = ", ".join(summary.slow_ranks) if summary.slow_ranks else "none"
    peers = "the ranks of each pipeline stage" if summary.parallel and len(summary.parallel.stages) > 1 else "the ranks"
    out.append(
        f"slow ranks: {slow_text}; spread {summary.spread_pct:.1f}% of the mean step time "
        f"(the largest of compute, communication not overlapped and free per step, max - min over {peers})"
    )
    out.append(f"slow links: {', '.join(summary.slow_links) if summary.slow_links else 'none'}")
    out += ["", "### Cluster findings" if md else "Cluster findings"]
    if not summary.findings:
        out.append("none")
    for f in summary.findings:
        sev = SEVERITY_MARK[f.severity]
        at_stake = f"{f.time_us:,.0f} us" if f.time_us else "-"
        where = f.card if f.card.startswith("stage ") else f"rank {f.card}"
        if md:
            out.append(f"- **{sev}** `{f.rule}` ({where}): {f.title}. At stake: {at_stake}. {f.advice}")
        else:
            out.append(f"  [{sev}] {f.rule} ({where}): {f.title}")
            out.append(f"         at stake {at_stake}; {f.advice}")
    out += ["", "### Slowest rank per op type" if md else "Slowest rank per op type"]
    ops = summary.op_type_slowest.head(top)
    out += table(
        ["OP Type", "Rank", "Total(us)", "Median over ranks(us)", "Ranks"],
        [[r["op_type"], r["rank"], r["total_us"], r["median_us"], r["ranks"]] for r in ops.iter_rows(named=True)],
        {2, 3, 4},
    )
    return out


def rank_heading(rank: str, md: bool, why: str) -> str:
    """The line before a rank's own report (`why`: slowest, chosen, or its place in all)."""
    return ("## " if md else "== ") + f"rank {rank} ({why})" + ("" if md else " ==")
