"""`npuscope inspect`: what a profile holds, as plain aligned text."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import polars as pl

from npuscope.parsers import Profile, ProfileError
from npuscope.parsers.frames import is_communication
from npuscope.parsers.msprof_op import Kernel, read_msprof_op
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
    if args.path:
        from npuscope.parsers.layout import msprof_op_alone

        alone = msprof_op_alone(args.path)
        if alone:
            _print_msprof_op(Path(args.path), alone)
            return 0
    ranks = None
    if args.path and args.capture is None:
        from npuscope.parsers.cluster import rank_folders

        ranks = rank_folders(Path(args.path))
    with profile_for_command(
        args.path,
        capture=args.capture,
        no_cache=args.no_cache,
        timeline=not args.no_timeline,
        strict=args.strict,
        source=args.source,
        pmu=False,
        details=False,
    ) as prof:
        _print(prof, args, ranks)
    return 0


def _kernel_line(kernel: Kernel) -> str:
    block = "-" if kernel.block_dim is None else f"{kernel.block_dim:,}"
    if kernel.mix_block_dim is not None:
        block += f" (mix {kernel.mix_block_dim:,})"
    duration = "-" if kernel.duration_us is None else f"{kernel.duration_us:,.3f} us"
    where = f"  in {kernel.launch}" if kernel.launch else ""
    return f"{kernel.op_name}  {kernel.op_type or '-'}  {duration}  block dim {block}  device {kernel.device or '-'}{where}"


def _msprof_op_lines(folders: tuple[Path, ...], root: Path, files: bool) -> list[str]:
    """What each msprof op folder holds: its kernels (and, alone, its files), or why not."""
    lines = []
    for folder in folders:
        try:
            op = read_msprof_op(folder)
        except ProfileError as exc:
            lines.append(f"msprof op {_rel(folder, root)}: UNREADABLE: {exc}\n")
            continue
        lines.append(
            f"msprof op {_rel(folder, root) if folder != root else folder.name}: {len(op.kernels):,} kernel(s)\n"
        )
        for i, kernel in enumerate(op.kernels):
            lines.append(f"  [{i}] {_kernel_line(kernel)}\n")
            if files:
                lines += [f"      {_rel(p, root)}  {_size(p)}\n" for p in kernel.files]
            lines += [f"      note: {n}\n" for n in kernel.notes]
        lines += [f"  note: {n}\n" for n in op.notes]
    return lines


def _print_msprof_op(path: Path, folders: tuple[Path, ...]) -> None:
    """`inspect` of msprof op folders with no capture beside them."""
    root = path if path.is_dir() else path.parent
    out = [
        f"path      {path.resolve()}\n",
        f"layout    msprof op (per-kernel profile of `msprof op`: {len(folders):,} folder(s))\n",
        *_msprof_op_lines(folders, root, files=True),
        "report    npuscope report PATH [--op NAME|#N]: pipe utilisation, memory traffic, L2, block dim, bound\n",
    ]
    sys.stdout.write(printable("".join(out)))  # folder and kernel names are untrusted text


# The card table's columns: the card left-aligned in 6, the figures right-aligned in at least
# these widths and always apart (a column widens for a figure that needs it).
_WIDTHS = (6, 10, 9, 16, 14, 16, 18, 9)


def _table(rows: list[list[str]]) -> str:
    widths = [max(w, *(len(r[i]) + (1 if i else 0) for r in rows)) for i, w in enumerate(_WIDTHS)]
    return "".join(r[0].ljust(widths[0]) + "".join(c.rjust(w) for c, w in zip(r[1:], widths[1:])) + "\n" for r in rows)


def _cluster_line(ranks: list[tuple[str, Path]], root: Path) -> str:
    """The ranks a cluster folder holds, in one line (the first and last few named)."""
    named = [f"{rank} {_rel(folder, root)}" for rank, folder in ranks]
    shown = named if len(named) <= 4 else [*named[:2], "...", *named[-2:]]
    return (
        f"cluster   {len(ranks):,} ranks: {', '.join(shown)} "
        "(npuscope report PATH: the cluster summary, rank by rank)\n"
    )


def _parallel_lines(ranks: list[tuple[str, Path]]) -> str:
    """The job's parallel layout as the rank folders declare it (profiler_metadata.json, a db
    export's META_DATA) or, where none does, as their communication files show it."""
    from npuscope.analysis.cluster_report import SOURCE_WORDS
    from npuscope.analysis.parallel import layout_of
    from npuscope.parsers.layout import pick_db
    from npuscope.parsers.parallel_meta import read_rank_meta
    from npuscope.parsers.rank_figures import comm_groups

    metas = [read_rank_meta(f, pick_db(f / "ASCEND_PROFILER_OUTPUT")) for _, f in ranks]
    comm = [] if any(m is not None and m.groups for m in metas) else [(r, comm_groups(f)) for r, f in ranks]
    layout = layout_of([r for r, _ in ranks], metas, comm)
    if layout is None:
        return "parallel  not declared (no profiler_metadata.json) and no communication groups to infer it from\n"
    sizes = ", ".join(f"{k} {v if v is not None else '?'}" for k, v in layout.sizes.items())
    stages: dict[int, list[str]] = {}
    for rank, stage in layout.stage_of.items():
        stages.setdefault(stage, []).append(rank)
    shown = "; ".join(
        f"stage {s}: {', '.join(r[:8])}{', ...' if len(r) > 8 else ''}" for s, r in sorted(stages.items())
    )
    lines = [
        f"parallel  {sizes}; world size {layout.world_size}; {SOURCE_WORDS.get(layout.source, layout.source)}",
        f"          {len(layout.groups):,} groups ({', '.join(dict.fromkeys(g.name for g in layout.groups))}); {shown}",
    ]
    return "\n".join(lines) + "\n"


def _print(prof: Profile, args: argparse.Namespace, ranks: list[tuple[str, Path]] | None = None) -> None:
    def out(text: str) -> None:  # folder, file and op names are untrusted text
        sys.stdout.write(printable(text))

    root = prof.path if prof.path.is_dir() else prof.path.parent
    out(f"path      {prof.path.resolve()}\n")
    if ranks is not None:
        out(_cluster_line(ranks, root))
        out(_parallel_lines(ranks))
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
    out(
        f"export    {prof.source_kind}"
        + (f"; {prof.skipped_rows:,} damaged row(s) skipped" if prof.skipped_rows else "")
        + "\n"
    )
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
        rows.append(
            [
                card,
                f"{row['tasks']:,}",
                f"{row['op_types']:,}",
                f"{row['compute']:,.3f}",
                f"{row['comm']:,.3f}",
                f"{row['wait']:,.3f}",
                span,
                f"{ev_counts.get(card, 0):,}",
            ]
        )
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
    for line in _msprof_op_lines(prof.capture.msprof_op, root, files=False):
        out(line)
