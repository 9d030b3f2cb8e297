"""`npuscope inspect`: what a profile holds, as plain aligned text."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import polars as pl

from npuscope.parsers import Profile
from npuscope.parsers.frames import is_communication
from npuscope.parsers.profile import LAYOUT_NAMES
from npuscope.text import printable

from .loading import profile_for_command, views_for_command


def _size(path: Path) -> str:
    try:
        n = float(path.stat().st_size)
    except OSError:
        return "?"
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def run_inspect(args: argparse.Namespace) -> int:
    ranks = None
    if args.path and args.capture is None:
        from npuscope.parsers.cluster import rank_folders

        ranks = rank_folders(Path(args.path))
    with profile_for_command(
        args.path, capture=args.capture, no_cache=args.no_cache, timeline=not args.no_timeline,
        strict=args.strict, source=args.source, pmu=False, details=False,
    ) as prof:
        _print(prof, args, ranks)
    return 0


# The card table's columns: the card left-aligned in 6, the figures right-aligned in at least
# these widths and always apart (a column widens for a figure that needs it).
_WIDTHS = (6, 10, 9, 16, 14, 16, 18, 9)


def _table(rows: list[list[str]]) -> str:
    widths = [max(w, *(len(r[i]) + (1 if i else 0) for r in rows)) for i, w in enumerate(_WIDTHS)]
    return "".join(
        r[0].ljust(widths[0]) + "".join(c.rjust(w) for c, w in zip(r[1:], widths[1:])) + "\n" for r in rows
    )


def _cluster_line(ranks: list[tuple[str, Path]], root: Path) -> str:
    """The ranks a cluster folder holds, in one line (the first and last few named)."""
    named = [f"{rank} {_rel(folder, root)}" for rank, folder in ranks]
    shown = named if len(named) <= 4 else [*named[:2], "...", *named[-2:]]
    return (f"cluster   {len(ranks):,} ranks: {', '.join(shown)} "
            "(npuscope report PATH: the cluster summary, rank by rank)\n")


def _print(prof: Profile, args: argparse.Namespace, ranks: list[tuple[str, Path]] | None = None) -> None:
    def out(text: str) -> None:  # folder, file and op names are untrusted text
        sys.stdout.write(printable(text))
    root = prof.path if prof.path.is_dir() else prof.path.parent
    out(f"path      {prof.path.resolve()}\n")
    if ranks is not None:
        out(_cluster_line(ranks, root))
    if len(prof.captures) > 1:
        out(f"captures  {len(prof.captures)} (newest first; pick one with --capture)\n")
        for i, cap in enumerate(prof.captures):
            mark = "*" if cap is prof.capture else " "
            out(f"  {mark} [{i}] {cap.name}  ({cap.layout}, {len(cap.sources)} source(s))\n")
    out(f"capture   {prof.capture.name}\n")
    out(f"layout    {LAYOUT_NAMES.get(prof.layout, prof.layout)}\n")
    out(f"era       {prof.era}\n")
    out(f"cards     {', '.join(prof.cards) or '-'}\n")
    out(f"tasks     from {prof.tasks_from}; op_statistic {'derived' if prof.statistic_derived else 'from file'}\n")
    out(f"export    {prof.source_kind}" + (f"; {prof.skipped_rows:,} damaged row(s) skipped" if prof.skipped_rows else "") + "\n")
    if prof.time_problem:
        out(f"times     UNUSABLE: {prof.time_problem}\n")
    out("files\n")
    for src in prof.capture.sources:
        kinds = (("tasks", src.tasks), ("statistic", src.statistic), ("steps", src.steps), ("timeline", src.timeline))
        for kind, paths in (*kinds, ("db", (src.db,) if src.db is not None else ())):
            for p in paths:
                used = "" if p in prof.files else "  (not read)"
                out(f"  {kind:<9} {_rel(p, root)}  {_size(p)}{used}\n")
    out("\n")
    t = prof.tasks
    comm = is_communication()
    per_card = (
        # Lazy: the eager group_by gathers each group's filtered strings (+280 MB on 2M rows).
        t.lazy()
        .group_by("card")
        .agg(
            pl.len().alias("tasks"),
            pl.col("op_type").filter(~comm).n_unique().alias("op_types"),
            pl.col("duration_us").filter(~comm).sum().alias("compute"),
            pl.col("duration_us").filter(comm).sum().alias("comm"),
            pl.col("wait_us").sum().alias("wait"),
        )
        .collect()
        .rows_by_key("card", named=True, unique=True)
    )
    ev_counts = {}
    if prof.events is not None:
        ev_counts = dict(prof.events.group_by("card").len().iter_rows())
    rows = [["card", "tasks", "op types", "compute us", "comm us", "wait us", "span us", "events"]]
    for card in prof.cards:
        row = per_card.get(card, {"tasks": 0, "op_types": 0, "compute": 0.0, "comm": 0.0, "wait": 0.0})
        span_ns = prof.span_ns(card)
        span = "unavailable" if span_ns is None else f"{span_ns / 1000:,.3f}"
        rows.append([
            card, f"{row['tasks']:,}", f"{row['op_types']:,}", f"{row['compute']:,.3f}", f"{row['comm']:,.3f}",
            f"{row['wait']:,.3f}", span, f"{ev_counts.get(card, 0):,}",
        ])
    for card in sorted(set(ev_counts) - set(prof.cards)):
        rows.append([card, "", "", "", "", "", "", f"{ev_counts[card]:,}"])
    out(_table(rows))
    if prof.events is None:
        out("\ntimeline  none" + (" (skipped)" if args.no_timeline else "") + "\n")
    else:
        out(f"\ntimeline  {prof.events.height:,} events\n")
    if prof.pmu_columns:
        out(f"pmu       {len(prof.pmu_columns)} columns ({', '.join(prof.pmu_columns[:4])}, ...)\n")
    for note in prof.notes:
        out(f"note      {note}\n")
    views = views_for_command(prof, no_cache=args.no_cache, strict=args.strict)
    if views.found:
        out("views     training-level views found, and where from\n")
        for entry in views.found:
            view, _, source = entry.partition(": ")
            out(f"  {view:<15} {source}\n")
    else:
        out("views     none found\n")
    for note in views.notes:
        out(f"note      {note}\n")
