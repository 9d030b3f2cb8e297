"""The cluster section of the report: per rank figures, slow ranks, spread, slow links, the
cluster's findings and the slowest rank of each op type, as text or markdown.

`npuscope report CLUSTER` prints this section and then the usual report of one rank (the
slowest, or the one `--card` names; every rank with `--card all`). JSON carries the same
summary as `cluster_json` (analysis/cluster.py) under the report's `"cluster"` key.

No Textual, no Rich.
"""

from __future__ import annotations

from .cluster import ClusterSummary
from .findings import SEVERITY_MARK
from .table import table_for

RANK_HEADERS = (
    "Rank",
    "Step(us)",
    "Compute(us)",
    "Communication(us)",
    "Exposed comm(us)",
    "Free(us)",
    "Wait(us)",
    "Tasks",
    "Mark",
)
"""The per-rank table's columns (Mark: slow, the rank detailed below, or unreadable: the
one-line errors follow the table)."""


def slowest_rank(summary: ClusterSummary) -> str | None:
    """The rank the report details: the worst slow rank, else the readable rank with the
    longest mean step time (the most compute when no rank has steps); None when no rank could
    be read."""
    if summary.slow_ranks:
        return summary.slow_ranks[0]
    ok = [r for r in summary.ranks if r.error is None]
    if not ok:
        return None
    with_steps = [r for r in ok if r.step_us is not None]
    if with_steps:
        return max(with_steps, key=lambda r: (r.step_us or 0.0, r.compute_us)).rank
    return max(ok, key=lambda r: r.compute_us).rank


def _mark(rank: str, error: str | None, slow: set[str], detailed: str | None) -> str:
    if error is not None:
        return "UNREADABLE (below)"
    marks = []
    if rank in slow:
        marks.append("slow")
    if rank == detailed:
        marks.append("detailed below")
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
            r.step_us,
            r.compute_us,
            r.communication_us,
            r.exposed_comm_us,
            r.free_us,
            r.wait_us,
            r.tasks,
            _mark(r.rank, r.error, slow, detailed),
        ]
        if r.error is None
        else [r.rank, None, None, None, None, None, None, None, _mark(r.rank, r.error, slow, detailed)]
        for r in summary.ranks
    ]
    out += table(RANK_HEADERS, rows, {1, 2, 3, 4, 5, 6, 7})
    if bad:
        out += ["", f"Ranks that could not be read ({len(bad):,})"]
        out += [("- " if md else "  ") + f"rank {r.rank}: {r.error}" for r in bad]
    out.append("")
    slow_text = ", ".join(summary.slow_ranks) if summary.slow_ranks else "none"
    out.append(
        f"slow ranks: {slow_text}; spread {summary.spread_pct:.1f}% of the mean step time "
        "(the largest of compute, communication not overlapped and free per step, max - min over the ranks)"
    )
    out.append(f"slow links: {', '.join(summary.slow_links) if summary.slow_links else 'none'}")
    out += ["", "### Cluster findings" if md else "Cluster findings"]
    if not summary.findings:
        out.append("none")
    for f in summary.findings:
        sev = SEVERITY_MARK[f.severity]
        at_stake = f"{f.time_us:,.0f} us" if f.time_us else "-"
        if md:
            out.append(f"- **{sev}** `{f.rule}` (rank {f.card}): {f.title}. At stake: {at_stake}. {f.advice}")
        else:
            out.append(f"  [{sev}] {f.rule} (rank {f.card}): {f.title}")
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
