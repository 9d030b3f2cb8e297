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
from npuscope.analysis.session import Options, analyse, diagnosed
from npuscope.parsers import ProfileError

from .loading import profile_for_command, views_for_command


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
    from npuscope.analysis.cluster import cluster_json, open_cluster, open_rank
    from npuscope.analysis.cluster_report import cluster_lines, rank_heading, slowest_rank
    from npuscope.parsers import FrameCache, ReadOptions
    from npuscope.text import printable

    from .progress import StderrProgress

    options = ReadOptions(strict=args.strict, source=args.source, timeline=not args.no_timeline)
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
    rank_cache = FrameCache(summary.cache_root, background=True) if summary.cache_root else FrameCache(enabled=False)
    # The views' few rows are written as they are made (a background cache writes only when
    # told to, which open_rank does before the views are read).
    views_cache = FrameCache(summary.cache_root) if summary.cache_root else FrameCache(enabled=False)
    pictures: dict[str, Any] = {}  # html: each rank's timeline pictures, drawn while it is open

    def rank_report(rank: str) -> dict[str, Any] | None:
        """The usual report of one rank, the cluster's findings on it among its own."""
        profile = open_rank(summary, rank, cache=rank_cache)
        options = Options(thresholds, strict=args.strict, views_cache=views_cache, cluster=summary, rank=rank)
        if args.op:
            first = diagnosed(profile, options)
            out.write(op_report(profile, first.diagnosis, find_task(first.diagnosis, args.op)))
            return None
        analysis = analyse(profile, options)
        diagnosis = analysis.diagnosis
        report = build_report(profile, diagnosis, top=args.top, views=analysis.views)
        report["rank"] = rank
        if args.format == "html":
            from npuscope.analysis.html_report import timeline_pictures

            pictures[rank] = timeline_pictures(profile, diagnosis)
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
        rank_cache.flush()
        return 0
    if args.format == "html":
        _cluster_html(summary, cluster_json(summary), chosen, why, rank_report, pictures, out)
        rank_cache.flush()
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
    rank_cache.flush()
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
