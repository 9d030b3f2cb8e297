"""`npuscope export PATH --perfetto OUT`: the profile as a trace for Perfetto's UI.

The trace itself is made by `analysis/perfetto_export.py` (its docstring says what each track
holds and why the protobuf is written by hand). OUT is written whole or not at all: the bytes
go to a hidden temporary file in OUT's folder, synced, then linked to OUT (an existing OUT is
never replaced, also when it appears meanwhile) or, with `--force`, renamed over it. An
existing OUT without `--force`, a folder, or a folder that does not exist is one line before
the profile is read (exit 2). Nothing is written anywhere else: never into the profile folder,
unless OUT names a file there.
"""

from __future__ import annotations

import argparse
import errno
import os
import secrets
from pathlib import Path

from .arguments import add_source_args

# npuscope.parsers (and polars) are imported in the functions: cli imports this module to build
# its parser, and `--help` stays instant.


def add_export_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "export",
        help="write a profile as a Perfetto trace (ui.perfetto.dev)",
        description=(
            "Write the profile at PATH (default: the bundled demo) as a Perfetto protobuf trace: per "
            "card a process with its steps, findings, waits by cause, one track per device stream "
            "(collectives apart) and per host thread, and the host-to-device flows; integer "
            "nanosecond timestamps. Open it at https://ui.perfetto.dev (Open trace file). Exit 0, or "
            "2 on bad input."
        ),
    )
    add_source_args(parser, timeline_help="skip the timeline (no host tracks or flows)")
    parser.add_argument("--perfetto", metavar="OUT", required=True, help="the trace file to write (e.g. run.pftrace)")
    parser.add_argument("--card", default="all", help="card id, or all (default)")
    parser.add_argument("--force", action="store_true", help="replace OUT when it exists")
    parser.add_argument("--rules", metavar="FILE", help="TOML file overriding rule thresholds")


def run_export(args: argparse.Namespace) -> int:
    from npuscope.analysis import Thresholds
    from npuscope.analysis.perfetto_export import perfetto_trace
    from npuscope.analysis.session import Options, diagnosed
    from npuscope.parsers import ProfileError

    from .loading import profile_for_command, views_for_command

    out = Path(args.perfetto).expanduser()
    check_target(out, force=args.force)
    thresholds = Thresholds.from_file(args.rules)
    if args.path and args.capture is None:
        from npuscope.parsers.cluster import rank_folders

        ranks = rank_folders(Path(args.path))
        if ranks is not None:
            raise ProfileError(
                f"{args.path} is a cluster of {len(ranks):,} rank folders: export one rank "
                f"(npuscope export {ranks[0][1]} --perfetto OUT)"
            )
    with profile_for_command(
        args.path,
        capture=args.capture,
        no_cache=args.no_cache,
        timeline=not args.no_timeline,
        strict=args.strict,
        source=args.source,
    ) as profile:
        cards = None
        if args.card != "all":
            if args.card not in profile.cards:
                raise ProfileError(
                    f"no card {args.card!r} in {profile.capture.name}; cards: {', '.join(profile.cards)}"
                )
            cards = (args.card,)
        first = diagnosed(profile, Options(thresholds, cards, strict=args.strict))
        analysis = first.with_views(views_for_command(profile, no_cache=args.no_cache, strict=args.strict))
        trace = perfetto_trace(profile, analysis.diagnosis, cards)
    write_whole(out, trace.data, force=args.force)
    print(
        f"wrote {out} ({_size(len(trace.data))}): {len(trace.cards)} card(s), {trace.tracks:,} tracks: "
        f"{trace.tasks:,} tasks, {trace.host_slices:,} host events, {trace.steps:,} steps, "
        f"{trace.waits:,} waits, {trace.findings:,} findings, {trace.flows:,} flows"
    )
    print("open it at https://ui.perfetto.dev (Open trace file)")
    notes = []
    if trace.flows_dropped:
        notes.append(f"{trace.flows_dropped:,} flow(s) of the timeline left out: an end falls on no written slice")
    if trace.overlap_tracks:
        notes.append(
            f"{trace.overlap_tracks:,} overlap track(s): slices that partly overlap others of their track are "
            "drawn on a child track"
        )
    if trace.tasks_skipped or trace.host_skipped:
        notes.append(
            f"left out for want of a time: {trace.tasks_skipped:,} task(s), {trace.host_skipped:,} host event(s)"
        )
    if not profile.has_timeline:
        notes.append("no timeline read: no host tracks or flows")
    for note in notes:
        print(f"note: {note}")
    return 0


def _size(n: int) -> str:
    return f"{n / 1e6:,.1f} MB" if n >= 100_000 else f"{n:,} bytes"


def check_target(out: Path, *, force: bool) -> None:
    """Refuse, in one line, an OUT that cannot or must not be written."""
    from npuscope.parsers import ProfileError

    if out.is_dir():
        raise ProfileError(f"{out}: is a folder; name the trace file to write (e.g. {out / 'trace.pftrace'})")
    if os.path.lexists(out) and not force:
        raise ProfileError(f"{out}: exists; pass --force to replace it, or name another file")
    folder = out.parent
    if not folder.is_dir():
        raise ProfileError(f"{out}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ProfileError(f"{out}: cannot write into {folder} (permission denied)")


def write_whole(out: Path, data: bytes, *, force: bool) -> None:
    """`data` to `out`, whole or not at all (module docstring); a failure is one line."""
    from npuscope.parsers import ProfileError

    check_target(out, force=force)
    tmp = out.parent / f".{out.name[:80]}.npuscope-{secrets.token_hex(6)}.part"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            if force:
                os.replace(tmp, out)
            else:
                _link_new(tmp, out)
        finally:
            _discard(tmp)
    except FileExistsError:
        raise ProfileError(f"{out}: exists; pass --force to replace it, or name another file") from None
    except OSError as exc:
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        why = exc.strerror or type(exc).__name__
        raise ProfileError(f"{out}: cannot write the trace ({why}){'; free some space' if full else ''}") from None


def _link_new(tmp: Path, out: Path) -> None:
    """Put `tmp` at `out` unless `out` exists (FileExistsError), atomically where links work."""
    try:
        os.link(tmp, out)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS):
            raise
        if os.path.lexists(out):  # a file system without hard links: check, then rename
            raise FileExistsError(out) from None
        os.replace(tmp, out)


def _discard(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass
