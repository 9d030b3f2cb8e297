"""`npuscope inspect`: what a profile holds, as plain aligned text."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .loading import profile_for_command


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
    with profile_for_command(
        args.path, capture=args.capture, no_cache=args.no_cache, timeline=not args.no_timeline
    ) as prof:
        _print(prof, args)
    return 0


def _print(prof, args: argparse.Namespace) -> None:
    import polars as pl

    out = sys.stdout.write
    root = prof.path if prof.path.is_dir() else prof.path.parent
    out(f"path      {prof.path.resolve()}\n")
    if len(prof.captures) > 1:
        out(f"captures  {len(prof.captures)} (newest first; pick one with --capture)\n")
        for i, cap in enumerate(prof.captures):
            mark = "*" if cap is prof.capture else " "
            out(f"  {mark} [{i}] {cap.name}  ({cap.layout}, {len(cap.sources)} source(s))\n")
    out(f"capture   {prof.capture.name}\n")
    from npuscope.parsers.profile import LAYOUT_NAMES

    out(f"layout    {LAYOUT_NAMES.get(prof.layout, prof.layout)}\n")
    out(f"era       {prof.era}\n")
    out(f"cards     {', '.join(prof.cards) or '-'}\n")
    out(f"tasks     from {prof.tasks_from}; op_statistic {'derived' if prof.statistic_derived else 'from file'}\n")
    out("files\n")
    for src in prof.capture.sources:
        for kind, paths in (
            ("tasks", src.tasks), ("statistic", src.statistic), ("steps", src.steps), ("timeline", src.timeline)
        ):
            for p in paths:
                used = "" if p in prof.files else "  (skipped)"
                out(f"  {kind:<9} {_rel(p, root)}  {_size(p)}{used}\n")
    out("\n")
    header = f"{'card':<6}{'tasks':>12}{'op types':>10}{'compute us':>18}{'wait us':>18}{'span us':>18}{'events':>12}\n"
    out(header)
    t = prof.tasks
    per_card = (
        t.group_by("card")
        .agg(
            pl.len().alias("tasks"),
            pl.col("op_type").n_unique().alias("op_types"),
            pl.col("duration_us").sum().alias("compute"),
            pl.col("wait_us").sum().alias("wait"),
        )
        .rows_by_key("card", named=True, unique=True)
    )
    ev_counts = {}
    if prof.events is not None:
        ev_counts = dict(prof.events.group_by("card").len().iter_rows())
    for card in prof.cards:
        row = per_card.get(card, {"tasks": 0, "op_types": 0, "compute": 0.0, "wait": 0.0})
        span = prof.span_ns(card) / 1000
        out(
            f"{card:<6}{row['tasks']:>12,}{row['op_types']:>10,}{row['compute']:>18,.3f}"
            f"{row['wait']:>18,.3f}{span:>18,.3f}{ev_counts.get(card, 0):>12,}\n"
        )
    for card in sorted(set(ev_counts) - set(prof.cards)):
        out(f"{card:<6}{'':>12}{'':>10}{'':>18}{'':>18}{'':>18}{ev_counts[card]:>12,}\n")
    if prof.events is None:
        out("\ntimeline  none" + (" (skipped)" if args.no_timeline else "") + "\n")
    else:
        out(f"\ntimeline  {prof.events.height:,} events\n")
    if prof.pmu_columns:
        out(f"pmu       {len(prof.pmu_columns)} columns ({', '.join(prof.pmu_columns[:4])}, ...)\n")
    for note in prof.notes:
        out(f"note      {note}\n")
