"""`npuscope report`: the diagnosis as text, markdown, JSON or an HTML page, or one op's report.

On a cluster (a folder of rank folders, parsers/cluster.py) it prints the cluster section
(analysis/cluster_report.py) and then the usual report of one rank: the slowest, the one
`--card` names, or every rank in turn with `--card all` (one rank loaded at a time).

`--format html` is the JSON document drawn as one self-contained page
(analysis/html_report.py). `--out FILE` writes any format to FILE whole or not at all (a
temporary file beside it, renamed over it once the report is complete), else stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import orjson

from npuscope.analysis import Thresholds
from npuscope.analysis.op_report import find_task, op_report
from npuscope.analysis.report import SCHEMA, build_report, render
from npuscope.analysis.session import Options, diagnosed
from npuscope.parsers import ProfileError

from .loading import profile_for_command, views_for_command
from .recording import note_run


def run_report(args: argparse.Namespace) -> int:
    if getattr(args, "out", None) is None:
        return _report(args, sys.stdout)
    _check_out(args.out)  # before the work, not after it
    buffer = io.StringIO()
    code = _report(args, buffer)
    _write_out(args.out, buffer.getvalue())
    return code


def _check_out(name: str) -> None:
    path = Path(name).expanduser()
    if path.is_dir():
        raise ProfileError(f"--out {name}: is a folder; name a file")
    if not path.parent.is_dir():
        raise ProfileError(f"--out {name}: no folder {path.parent}")


def _write_out(name: str, text: str) -> None:
    """Write the report to `name` whole or not at all: into a temporary file beside it, then
    renamed over it (an existing file is replaced, as `> FILE` would)."""
    path = Path(name).expanduser()
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8"))
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it 0600: give it the mode a new file gets
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise ProfileError(f"cannot write {name}: {exc.strerror or exc}") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _report(args: argparse.Namespace, out: Any) -> int:
    thresholds = Thresholds.from_file(args.rules)
    html = args.format == "html"
    if html and args.op:
        raise ProfileError("--op prints the op report as markdown: leave out --format html")
    if args.path:
        from npuscope.parsers.layout import msprof_op_alone

        alone = msprof_op_alone(args.path)
        if alone:
            if html:
                raise ProfileError("msprof op folders have no HTML report: use --format text, markdown or json")
            return _run_msprof_op(args, thresholds, alone, out)
    if args.path and args.capture is None:
        from npuscope.parsers.cluster import rank_folders
        from npuscope.parsers.nodes_file import looks_like_nodes_file

        if looks_like_nodes_file(args.path):
            return _run_nodes(args, thresholds, out)

        ranks = rank_folders(Path(args.path))
        if ranks is not None:
            return _run_cluster(args, thresholds, ranks, out)
    with profile_for_command(
        args.path,
        capture=args.capture,
        no_cache=args.no_cache,
        timeline=not args.no_timeline,
        strict=args.strict,
        source=args.source,
    ) as profile:
        cards = None
        card = args.card or "all"
        if card != "all":
            if card not in profile.cards:
                raise ProfileError(f"no card {card!r} in {profile.capture.name}; cards: {', '.join(profile.cards)}")
            cards = (card,)
        first = diagnosed(profile, Options(thresholds, cards, strict=args.strict))
        if args.op:
            task = find_task(first.diagnosis, args.op)
            out.write(op_report(profile, first.diagnosis, task))
            return 0
        analysis = first.with_views(views_for_command(profile, no_cache=args.no_cache, strict=args.strict))
        if args.path and cards is None:  # the demo and one card of a run are not runs
            from npuscope.analysis.run_registry import capture_key

            note_run(args.path, kind="report", analysis=analysis, capture=capture_key(profile))
        diagnosis = analysis.diagnosis
        report = build_report(profile, diagnosis, top=args.top, views=analysis.views)
        if args.format == "json":
            out.write(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n")
        elif html:
            from npuscope.analysis.html_report import render_html, timeline_pictures

            out.write(render_html(report, timeline_pictures(profile, diagnosis)))
        else:
            out.write(render(report, args.format))
    return 0


# --------------------------------------------------------------------------- msprof op alone


def _run_msprof_op(args: argparse.Namespace, thresholds: Thresholds, folders: tuple[Path, ...], out: Any) -> int:
    """`report` of msprof op folders with no capture: the kernels, and the op report of the
    one `--op` names (or the only one); JSON: every kernel's figures and its bound."""
    import dataclasses

    from npuscope.analysis.op_report import kernel_bound, msprof_op_report
    from npuscope.parsers.msprof_op import read_msprof_op

    ops = [read_msprof_op(f) for f in folders]
    min_pct = thresholds.bound_min_pct
    if args.format == "json":
        doc = {
            "schema": "npuscope.msprof_op/1",
            "folders": [
                {
                    "path": str(op.path.resolve()),
                    "notes": list(op.notes),
                    "simulator_files": len(op.simulator),
                    "kernels": [{**dataclasses.asdict(k), "bound": kernel_bound(k, min_pct)} for k in op.kernels],
                }
                for op in ops
            ],
        }
        out.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2, default=str).decode() + "\n")
        return 0
    out.write(msprof_op_report(ops, args.op, min_pct))
    return 0


# --------------------------------------------------------------------------- a cluster


def _names(ranks: list[str]) -> str:
    return ", ".join(ranks[:10]) + (f", ... ({len(ranks):,} ranks)" if len(ranks) > 10 else "")


def _run_cluster(args: argparse.Namespace, thresholds: Thresholds, ranks: list[tuple[str, Path]], out: Any) -> int:
    from npuscope.analysis.cluster import open_cluster
    from npuscope.analysis.cluster_rank import rank_report
    from npuscope.parsers import FrameCache

    from .progress import StderrProgress

    options = _read_options(args)
    cache = FrameCache(enabled=not args.no_cache, background=True)
    path = Path(args.path)
    with StderrProgress("ranks") as progress:
        summary = open_cluster(
            path,
            jobs=args.jobs,
            cache=cache,
            progress=progress,
            options=options,
            thresholds=thresholds,
            ranks=ranks if path.expanduser() == path else None,  # the ranks found at the same path
        )
    rank_cache = FrameCache(summary.cache_root, background=True) if summary.cache_root else FrameCache(enabled=False)
    # The views' few rows are written as they are made (a background cache writes only when
    # told to, which open_rank does before the views are read).
    views_cache = FrameCache(summary.cache_root) if summary.cache_root else FrameCache(enabled=False)
    request = _request(args, thresholds)
    try:
        return _cluster_output(
            args, thresholds, summary, lambda rank: rank_report(summary, rank, request, rank_cache, views_cache), out
        )
    finally:
        rank_cache.flush()


def _read_options(args: argparse.Namespace) -> Any:
    from npuscope.parsers import ReadOptions

    return ReadOptions(strict=args.strict, source=args.source, timeline=not args.no_timeline)


def _request(args: argparse.Namespace, thresholds: Thresholds) -> Any:
    from npuscope.analysis.cluster_rank import RankRequest

    return RankRequest(
        thresholds,
        strict=args.strict,
        top=args.top,
        op=args.op,
        html=args.format == "html",
        use_cache=not args.no_cache,
    )


def _run_nodes(args: argparse.Namespace, thresholds: Thresholds, out: Any) -> int:
    """`report nodes.toml`: every rank parsed on the node that holds it (capture/dask_engine.py),
    the cluster summed up here, the detailed rank's report made on its node."""
    from dataclasses import replace

    from npuscope.analysis.cluster import summarize
    from npuscope.analysis.cluster_rank import rank_report_here
    from npuscope.capture.dask_engine import NodeEngine
    from npuscope.parsers.nodes_file import read_nodes_file

    from .progress import StderrProgress

    nodes = read_nodes_file(args.path)
    options = _read_options(args)
    request = _request(args, thresholds)
    with NodeEngine(nodes, scheduler=args.scheduler, say=_say, use_cache=not args.no_cache) as engine:
        with StderrProgress("ranks") as progress:
            entries = engine.read_ranks(options, progress)
        summary = replace(summarize(entries, thresholds, nodes.path), options=options, host=engine)
        bare = replace(summary, host=None)  # what travels to a node: no engine

        def one(rank: str) -> Any:
            return engine.run_on_rank(summary.rank(rank).folder, rank_report_here, bare, rank, request)

        return _cluster_output(args, thresholds, summary, one, out)


def _say(line: str) -> None:
    if sys.stderr.isatty():
        sys.stderr.write(line + "\n")


def _cluster_output(args: argparse.Namespace, thresholds: Thresholds, summary: Any, one: Any, out: Any) -> int:
    """The cluster's report: its section, then the rank reports `one(rank)` (a RankReport)
    makes: the slowest rank's, `--card`'s or every rank's."""
    from npuscope.analysis.cluster import cluster_json
    from npuscope.analysis.cluster_report import cluster_lines, rank_heading, slowest_rank
    from npuscope.text import printable

    bad = [r for r in summary.ranks if r.error is not None]
    if args.strict and bad:
        raise ProfileError(f"rank {bad[0].rank} could not be read: {bad[0].error}")
    readable = [r.rank for r in summary.ranks if r.error is None]
    if args.card == "all":
        if args.op:
            raise ProfileError("--op reports one op of one rank: name the rank with --card RANK")
        chosen, why = readable, None
    else:
        rank = args.card if args.card is not None else slowest_rank(summary)
        if rank is None:
            raise ProfileError(f"no rank of {summary.path} could be read: rank {bad[0].rank}: {bad[0].error}")
        if rank not in {r.rank for r in summary.ranks}:
            raise ProfileError(f"no rank {rank!r} in {summary.path}; ranks: {_names([r.rank for r in summary.ranks])}")
        if summary.rank(rank).error is not None:
            raise ProfileError(f"rank {rank} could not be read: {summary.rank(rank).error}")
        chosen, why = [rank], ("chosen" if args.card is not None else "the slowest")
    detailed = chosen[0] if why is not None else None
    pictures: dict[str, Any] = {}  # html: each rank's timeline pictures, drawn while it is open

    def rank_report(rank: str) -> dict[str, Any] | None:
        made = one(rank)
        if made.op_text is not None:
            out.write(made.op_text)
        pictures[rank] = made.pictures
        report: dict[str, Any] | None = made.report
        return report

    if args.op:
        rank_report(chosen[0])
        return 0
    if args.format == "json":
        cluster = cluster_json(summary)
        if why is not None:
            report = rank_report(chosen[0])
            assert report is not None
            report["cluster"] = cluster
            out.write(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n")
        else:
            _stream_json(summary, cluster, thresholds, args.top, chosen, rank_report, out)
        return 0
    if args.format == "html":
        _cluster_html(summary, cluster_json(summary), chosen, why, rank_report, pictures, out)
        return 0
    md = args.format == "markdown"
    out.write(printable("\n".join(cluster_lines(summary, md, args.top, detailed)) + "\n"))
    for i, rank in enumerate(chosen):
        report = rank_report(rank)
        assert report is not None
        label = why or f"{i + 1:,} of {len(chosen):,}"
        out.write(printable("\n" + rank_heading(rank, md, label) + "\n\n") + render(report, args.format))
        out.flush()
    if why is None:
        for r in bad:
            out.write(printable("\n" + rank_heading(r.rank, md, "could not be read") + f"\n{r.error}\n"))
    return 0


def _cluster_html(
    summary: Any,
    cluster: dict[str, Any],
    chosen: list[str],
    why: str | None,
    rank_report: Any,
    pictures: dict[str, Any],
    out: Any,
) -> None:
    """The cluster's page: its section, then the detailed rank's report (the document `--format
    json` prints) or, with `--card all`, every rank's in turn (each drawn and dropped)."""
    from npuscope.analysis.html_report import cluster_html, page, render_html, report_html

    if why is not None:
        report = rank_report(chosen[0])
        report["cluster"] = cluster
        out.write(render_html(report, pictures.pop(chosen[0], {}), f"npuscope cluster: {summary.path.name}"))
        return
    body = [cluster_html(cluster, None)]
    for rank in chosen:
        body.append(report_html(rank_report(rank), pictures.pop(rank, {}), rank))
    out.write(page(f"npuscope cluster: {summary.path.name}", body))


def _stream_json(
    summary: Any,
    cluster: dict[str, Any],
    thresholds: Thresholds,
    top: int,
    ranks: list[str],
    rank_report: Any,
    out: Any,
) -> None:
    """Every rank's cards in one `npuscope.report/1` document, written rank by rank (each card
    names its rank); `source` follows the cards (the cluster's path and layout, the files,
    views and notes of every rank, the notes prefixed with their rank), then `cluster`."""
    head = {
        "schema": SCHEMA,
        "top": top,
        "thresholds": {k: getattr(thresholds, k) for k in thresholds.__dataclass_fields__},
    }
    source: dict[str, Any] = {
        "path": str(summary.path.resolve()),
        "layout": summary.layout,
        "era": None,
        "capture": summary.path.name,
        "files": [],
        "export": None,
        "skipped_rows": 0,
        "time_problem": None,
        "notes": list(summary.notes),
        "views": [],
        "view_notes": [],
        "ranks": [r.rank for r in summary.ranks],
    }
    text = orjson.dumps(head, option=orjson.OPT_INDENT_2).decode()
    out.write(text[: text.rstrip().rfind("}")].rstrip() + ',\n  "cards": [')
    first = True
    for rank in ranks:
        report = rank_report(rank)
        src = report["source"]
        source["era"] = source["era"] or src["era"]
        source["export"] = source["export"] or src["export"]
        source["time_problem"] = source["time_problem"] or src["time_problem"]
        source["skipped_rows"] += src["skipped_rows"] or 0
        source["files"] += src["files"]
        source["notes"] += [f"rank {rank}: {n}" for n in src["notes"]]
        source["views"] += [v for v in src["views"] if v not in source["views"]]
        source["view_notes"] += [f"rank {rank}: {n}" for n in src["view_notes"]]
        for card in report["cards"]:
            card = {"rank": rank, **card}
            body = textwrap.indent(orjson.dumps(card, option=orjson.OPT_INDENT_2).decode(), "    ")
            out.write(("\n" if first else ",\n") + body)
            first = False
        out.flush()
    out.write("\n  ]" if not first else "]")
    for key, value in (("source", source), ("cluster", cluster)):
        body = textwrap.indent(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode(), "  ").lstrip()
        out.write(f',\n  "{key}": ' + body)
    out.write("\n}\n")
