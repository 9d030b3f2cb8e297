"""`npuscope sql PATH "QUERY"`: SQL over a profile's tables (analysis/sql.py).

The tables are the frames the report uses, from the same path: open_profile, then the
diagnosis, the training-level views and every finding (analysis/session.py). On a cluster (a
folder of rank folders) `ranks` is the cluster summary (no rank is loaded for it) and the
per-rank tables hold every readable rank, each rank loaded once, when their tasks add up to
at most MAX_CLUSTER_TASKS; beyond that `--rank` names the ranks to load. The query is parsed before anything is read, so a bad
one costs no load.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from .arguments import add_source_args

if TYPE_CHECKING:
    import polars as pl

    from npuscope.analysis import Thresholds
    from npuscope.analysis.cluster import ClusterSummary
    from npuscope.analysis.sql import Tables

MAX_CLUSTER_TASKS = 4_000_000
"""Per-rank tables of a cluster hold every rank's rows in memory: this many tasks at most
(twice the 2M-row profile of BENCHMARKS.md) unless --rank names the ranks."""
DEMO = "demo"


def add_sql_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "sql",
        help="run a SQL query over a profile's tables (tasks, op_stats, steps, findings, ...)",
        description=(
            "Run QUERY (DuckDB's SQL) over the tables of the profile at PATH: tasks, op_stats, "
            "steps, communication, links, host_api, memory, memory_ops, events, findings, and "
            "on a cluster (a folder of rank folders) ranks, the per-rank tables gaining a rank "
            "column. The same tables for every input kind; columns and units in README (SQL). "
            f"PATH `{DEMO}` is the bundled demo profile (unless a file or folder of that name is "
            "there). Queries read only these tables: no file is read or written but --out. "
            "Exit 0, or 2 on bad input or a query the engine refuses (its one-line message)."
        ),
    )
    # PATH is required (a lone argument would read as a query or a path); the source options
    # are those of every command (arguments.add_source_args).
    parser.add_argument(
        "path", metavar="PATH", help=f"profile folder or file, or a cluster; `{DEMO}`: the bundled demo"
    )
    parser.add_argument(
        "query", metavar="QUERY", help='the query, e.g. "SELECT op_type, sum(duration_us) FROM tasks GROUP BY 1"'
    )
    parser.add_argument(
        "--format",
        choices=("table", "csv", "json", "parquet"),
        default="table",
        help="table (aligned text, default), csv, json (a list of row objects) or parquet",
    )
    add_source_args(parser, path=False, timeline_help="skip the timeline (no events table rows)")
    parser.add_argument("--out", metavar="FILE", help="write the result to FILE (written whole or not at all)")
    parser.add_argument("--rules", metavar="FILE", help="TOML file overriding rule thresholds (the findings table)")
    parser.add_argument(
        "--rank",
        metavar="RANK[,RANK...]|all",
        help=f"on a cluster: the ranks whose per-rank tables are loaded (default: all, up to {MAX_CLUSTER_TASKS:,} tasks)",
    )


def run_sql(args: argparse.Namespace) -> int:
    from npuscope.analysis import Thresholds
    from npuscope.analysis.sql import PER_RANK, TABLES, check_out, encode, referenced, write_atomic
    from npuscope.parsers import ProfileError

    if args.format == "parquet" and args.out is None and sys.stdout.isatty():
        raise ProfileError("parquet is binary: give --out FILE, or redirect the output to a file")
    if args.out is not None:
        check_out(Path(args.out))  # before the work, not after it
    thresholds = Thresholds.from_file(args.rules)
    wanted = referenced(args.query, tuple(TABLES))  # a query that does not parse fails before any load
    path = _path(args.path)
    flat = args.format in ("table", "csv")
    cluster = None
    if args.capture is None:
        from npuscope.parsers.cluster import rank_folders

        cluster = rank_folders(Path(path))
    if not wanted:  # a query of no table (SELECT 1, SET ...): the path is checked, nothing read
        from npuscope.analysis.sql import Tables, run_sql
        from npuscope.parsers import discover

        if cluster is None:
            discover(Path(path))
        names = TABLES if cluster is not None else PER_RANK
        frame = run_sql(Tables({name: _unread for name in names}), args.query, flat=flat)
    elif cluster is not None:
        frame = _cluster_query(args, thresholds, Path(path), cluster, [t for t in wanted if t in PER_RANK], flat)
    else:
        frame = _profile_query(args, thresholds, path, flat)
    data = encode(frame, args.format)
    if args.out is not None:
        written = write_atomic(Path(args.out), data)
        print(f"npuscope: {frame.height:,} row(s) written to {written}", file=sys.stderr)
        return 0
    sys.stdout.buffer.write(data)
    sys.stdout.flush()
    return 0


def _unread() -> NoReturn:
    raise AssertionError("a table the query does not name is never built")


def _path(given: str) -> str:
    if given == DEMO and not Path(given).exists():
        from npuscope.fixtures.demo_profile import ensure_demo

        return str(ensure_demo())
    return given


def _profile_query(args: argparse.Namespace, thresholds: Thresholds, path: str, flat: bool) -> pl.DataFrame:
    from npuscope.analysis.session import Options, diagnosed
    from npuscope.analysis.sql import profile_tables, run_sql
    from npuscope.parsers import FrameCache

    from .loading import profile_for_command, views_for_command

    with profile_for_command(
        path,
        capture=args.capture,
        no_cache=args.no_cache,
        timeline=not args.no_timeline,
        strict=args.strict,
        source=args.source,
    ) as profile:
        options = Options(thresholds, strict=args.strict, cache=FrameCache(enabled=not args.no_cache))
        tables = profile_tables(
            profile,
            lambda: diagnosed(profile, options).diagnosis,
            lambda: views_for_command(profile, no_cache=args.no_cache, strict=args.strict),
        )
        return run_sql(tables, args.query, flat=flat)


def _cluster_query(
    args: argparse.Namespace,
    thresholds: Thresholds,
    path: Path,
    found: Sequence[tuple[str, Path]],
    per_rank: list[str],
    flat: bool,
) -> pl.DataFrame:
    from npuscope.analysis.cluster import open_cluster, open_rank
    from npuscope.analysis.session import Options, analyse
    from npuscope.analysis.sql import cluster_tables, profile_tables, run_sql
    from npuscope.parsers import FrameCache, ProfileError, ReadOptions

    from .progress import StderrProgress

    options = ReadOptions(strict=args.strict, source=args.source, timeline=not args.no_timeline)
    with StderrProgress("ranks") as progress:
        summary = open_cluster(
            path,
            cache=FrameCache(enabled=not args.no_cache, background=True),
            progress=progress,
            options=options,
            thresholds=thresholds,
            ranks=found if path.expanduser() == path else None,
        )
    bad = [r for r in summary.ranks if r.error is not None]
    if args.strict and bad:
        raise ProfileError(f"rank {bad[0].rank} could not be read: {bad[0].error}")
    ranks = _chosen_ranks(summary, args.rank, bool(per_rank))
    root = summary.cache_root
    rank_cache = FrameCache(root) if root else FrameCache(enabled=False)

    def rank_tables(rank: str) -> Tables:
        profile = open_rank(summary, rank, cache=rank_cache)
        options = Options(thresholds, strict=args.strict, views_cache=rank_cache, cluster=summary, rank=rank)
        analysis = analyse(profile, options)
        return profile_tables(profile, analysis.operators, analysis.views, findings=analysis.findings)

    result = run_sql(cluster_tables(summary, ranks, rank_tables), args.query, flat=flat)
    for r in bad:
        print(f"npuscope: note: rank {r.rank} could not be read: {r.error}", file=sys.stderr)
    return result


def _chosen_ranks(summary: ClusterSummary, given: str | None, needed: bool) -> list[str]:
    """The ranks whose per-rank tables a query over them loads (see the module docstring)."""
    from npuscope.parsers import ProfileError

    readable = [r for r in summary.ranks if r.error is None]
    if given is None or given == "all":
        total = sum(r.tasks for r in readable)
        if needed and given is None and total > MAX_CLUSTER_TASKS:
            raise ProfileError(
                f"the cluster's {len(readable):,} ranks hold {total:,} tasks, more than the "
                f"{MAX_CLUSTER_TASKS:,} the per-rank tables load at once: name ranks with --rank 0,3 "
                "(or --rank all), or query the ranks table alone"
            )
        return [r.rank for r in readable]
    names = [n.strip() for n in given.split(",") if n.strip()]
    known = {r.rank: r for r in summary.ranks}
    for name in names:
        if name not in known:
            raise ProfileError(f"no rank {name!r} in {summary.path}; ranks: {', '.join(list(known)[:10])}")
        if known[name].error is not None:
            raise ProfileError(f"rank {name} could not be read: {known[name].error}")
    return list(dict.fromkeys(names))
