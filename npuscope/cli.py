"""The `npuscope` command: parse arguments, run one subcommand, map errors to exit codes.

Exit codes: 0 ok, 2 bad input (one line on stderr, never a traceback), 130 interrupted.
`--debug` (before a command, or anywhere in the explorer's arguments) adds the traceback of
an error on stderr: after bad input's line, and for the explorer the tracebacks its error
log received, once the explorer has given the terminal back.
Heavy imports (polars, the parsers, Textual, asyncio) are deferred into the subcommands so
`--help` is instant: every function-level import below is one of those.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from pathlib import Path

from . import __version__
from .arguments import add_source_args, count, percent
from .capture_cmd import add_capture_parser, run_capture, split_command
from .experiment_cmd import add_experiment_parser
from .export_cmd import add_export_parser
from .gate_cmd import add_gate_parser
from .runs_cmd import add_runs_parsers
from .sql_cmd import add_sql_parser

DESCRIPTION = "Terminal explorer for Huawei Ascend NPU profiles (msprof, torch_npu, Paddle)."
DEBUG = "--debug"
DEBUG_HELP = "on an error, print its traceback on stderr too (the explorer's: once it has closed)"


def _errors_epilog() -> str:
    # The error log's module is the standard library only: naming it keeps --help instant.
    from npuscope.tui.error_log import log_path

    return (
        "An unexpected error in the explorer shows one line and leaves its traceback in "
        f"{log_path()} ($XDG_STATE_HOME/npuscope, else ~/.local/state/npuscope): send it with a "
        f"bug report. {DEBUG} also prints it on stderr; it goes before a COMMAND too."
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="npuscope", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"npuscope {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    inspect = sub.add_parser(
        "inspect",
        help="print what a profile folder or file holds",
        description=(
            "Print what was found at PATH: captures (newest first), layout and CANN era, "
            "cards, the files used, row and event counts and the time span per card. "
            "With no PATH, the bundled demo profile."
        ),
    )
    add_source_args(inspect)
    report = sub.add_parser(
        "report",
        help="diagnose a profile: findings, op statistics, longest tasks and waits",
        description=(
            "Diagnose the profile at PATH (default: the bundled demo) and print the findings "
            "(by time at stake), op statistics, the longest tasks and the longest waits with "
            "their cause. On a cluster (a folder of rank folders) first the cluster: per rank "
            "step, compute, communication, exposed communication, free, wait and tasks, the slow "
            "ranks and links, the slowest rank per op type; then the slowest rank's report. "
            "PATH may be a nodes file (nodes.toml): rank folders on other machines, each parsed "
            "on its node by Dask workers started over SSH (or those of --scheduler). "
            'JSON follows the npuscope.report/1 schema (a cluster adds "cluster"). Exit 0, or 2 '
            "on bad input."
        ),
    )
    add_source_args(report)
    report.add_argument(
        "--card",
        default=None,
        help="card id, or all (default); on a cluster: a rank, or all ranks (default: the slowest rank)",
    )
    report.add_argument(
        "--jobs",
        type=count(1),
        default=None,
        metavar="N",
        help="on a cluster: worker processes reading the ranks (default: the cores)",
    )
    report.add_argument(
        "--scheduler",
        metavar="ADDRESS|FILE",
        default=None,
        help="with a nodes file: attach to this running Dask scheduler (an address such as "
        "tcp://10.0.0.1:8786, or a scheduler file) instead of starting one and a worker per node "
        "over SSH; its workers carry the resource npuscope-node-NAME (default: $NPUSCOPE_SCHEDULER)",
    )
    report.add_argument(
        "--format",
        choices=("text", "markdown", "json", "html"),
        default="text",
        help="output format (default text; html: one self-contained page with charts)",
    )
    report.add_argument(
        "--out", metavar="FILE", help="write the report to FILE (written whole or not at all) instead of stdout"
    )
    report.add_argument("--top", type=count(1), default=10, help="rows per table (default 10)")
    report.add_argument("--rules", metavar="FILE", help="TOML file overriding rule thresholds")
    report.add_argument("--op", metavar="NAME", help="print the op report of this Op Name, OP Type or #ROW instead")
    compare = sub.add_parser(
        "compare",
        help="compare two profiles: op types, totals, waits by cause, findings, a verdict",
        description=(
            "Compare the profile NEW against BASE: per op type (and core type) count, total, "
            "average and ratio before and after, sorted by the largest change; totals (compute, "
            "communication, wait by cause, span); findings resolved, new and unchanged; a "
            "verdict; mean step time and its parts, and communication per op type, before and "
            "after. JSON follows the npuscope.compare/1 schema. Exit 0; 1 when "
            "--fail-on-regression PCT is given and the mean step time, total device time or "
            "total wait grew by more than PCT percent; 2 on bad input."
        ),
    )
    _add_pair_args(compare)
    compare.add_argument(
        "--card", default="all", help="card id in both runs, or all (default: sum the cards both runs have)"
    )
    compare.add_argument(
        "--format", choices=("text", "markdown", "json"), default="text", help="output format (default text)"
    )
    compare.add_argument(
        "--by",
        choices=("type", "shape"),
        default="type",
        help="match by op type and core type (default), or by op name + input shapes (needs tasks)",
    )
    compare.add_argument(
        "--top", type=count(1), default=20, help="op rows in text and markdown (default 20; JSON has all)"
    )
    compare.add_argument(
        "--fail-on-regression",
        type=percent,
        metavar="PCT",
        help=(
            "exit 1 when the mean step time, total device time or total wait grew by more than PCT percent (a CI gate)"
        ),
    )
    compare.add_argument("--rules", metavar="FILE", help="TOML file overriding rule thresholds (both runs)")
    add_capture_parser(sub)
    add_sql_parser(sub)
    add_export_parser(sub)
    add_experiment_parser(sub)
    add_runs_parsers(sub)
    add_gate_parser(sub)
    nodes = sub.add_parser(
        "nodes",
        help="check the nodes of a nodes file (a cluster whose ranks lie on several machines)",
        description=(
            "npuscope nodes check NODES.toml: per node, whether it is reachable over SSH, its "
            "npuscope and Dask versions (the same code as here), cores, the rank folders found in "
            "each folder and the free disk for its cache. Nothing is started on the nodes. Exit 0 "
            "when every node can work, 1 when one cannot, 2 on a bad nodes file."
        ),
    )
    nodes.add_argument("action", choices=("check",), help="check: what each node has")
    nodes.add_argument(
        "nodes_file", metavar="NODES.toml", help="the nodes file (see README: Clusters beyond one machine)"
    )
    nodes.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="output format (default text; json: npuscope.nodes/1)",
    )
    nodes.add_argument(
        "--accept-new-host-key",
        action="store_true",
        help="accept a host key not yet in known_hosts (OpenSSH accept-new)",
    )
    return parser


def _add_pair_args(parser: argparse.ArgumentParser) -> None:
    """BASE, NEW, a capture for each and --no-cache: how `compare` picks and reads two profiles."""
    parser.add_argument(
        "base", metavar="BASE", help="the reference profile folder or file, or @NAME: a baseline (npuscope baseline)"
    )
    parser.add_argument("new", metavar="NEW", help="the profile folder or file to judge against BASE")
    parser.add_argument("--base-capture", metavar="NAME|N", help="which capture of BASE when it holds several")
    parser.add_argument("--new-capture", metavar="NAME|N", help="which capture of NEW when it holds several")
    parser.add_argument("--no-cache", action="store_true", help="parse from scratch and write no cache entry")


SUBCOMMANDS = (
    "inspect",
    "report",
    "compare",
    "capture",
    "sql",
    "export",
    "nodes",
    "experiment",
    "runs",
    "baseline",
    "gate",
)


def build_explorer_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="npuscope",
        description=DESCRIPTION + " With no command, opens the explorer on PATH (default: the "
        "bundled demo profile); a cluster folder or a nodes file (nodes.toml: ranks on other "
        "machines, analysed there on Dask) opens as its Ranks view. Commands: "
        + ", ".join(SUBCOMMANDS)
        + " (npuscope COMMAND --help).",
        epilog=_errors_epilog(),
    )
    parser.add_argument("--version", action="version", version=f"npuscope {__version__}")
    add_source_args(parser)
    parser.add_argument("--compare", metavar="NEW", help="open the comparison of NEW against PATH once PATH is loaded")
    parser.add_argument("--rules", metavar="FILE", help="TOML file overriding rule thresholds")
    parser.add_argument(
        "--all-cards",
        action="store_true",
        help="open a cluster (a folder of rank folders) as one capture whose cards are the ranks, "
        "every rank loaded at once, instead of its Ranks view",
    )
    parser.add_argument("--ssh-config", metavar="FILE", help="the capture screen's ssh config (default ~/.ssh/config)")
    parser.add_argument(
        "--remote-cache",
        metavar="DIR",
        help="the capture screen's folder on the hosts (default ~/.cache/npuscope/capture)",
    )
    parser.add_argument(DEBUG, action="store_true", help=DEBUG_HELP)
    return parser


def _bad_input(exc: BaseException, debug: bool) -> int:
    """Bad input: its one line on stderr (and with --debug its traceback); exit code 2."""
    from npuscope.text import one_line

    print(f"npuscope: {one_line(str(exc))}", file=sys.stderr)
    if debug:
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    debug = False
    while argv and argv[0] == DEBUG:  # the global option, before the command
        debug, argv = True, argv[1:]
    from .address_space import prepare

    too_small = prepare()  # before polars is imported: it configures polars' allocator
    if too_small is not None:
        print(f"npuscope: {too_small}", file=sys.stderr)
        return 2
    if not argv or argv[0] not in SUBCOMMANDS:
        args = build_explorer_parser().parse_args(argv)
        args.debug = args.debug or debug
        try:
            return run_explorer(args)
        except KeyboardInterrupt:  # ctrl+c before the explorer took the terminal
            print("npuscope: interrupted", file=sys.stderr)
            return 130
    parser = build_parser()
    if argv[0] == "capture":  # its training command follows `--`: split before argparse sees it
        opts, command = split_command(argv[1:])
        capture = parser.parse_args(["capture", *opts])
        code, folder = run_capture(capture, command)
        if folder is not None and capture.open:
            return main([*([DEBUG] if debug else []), str(folder)])
        return code
    args = parser.parse_args(argv)
    from npuscope.parsers import ProfileError
    from npuscope.parsers.memory import analysing

    analysing(args.command != "inspect")

    try:
        if args.command == "inspect":
            from .inspect_cmd import run_inspect

            return run_inspect(args)
        if args.command == "report":
            from .report_cmd import run_report

            return run_report(args)
        if args.command == "compare":
            from .compare_cmd import run_compare

            return run_compare(args)
        if args.command == "sql":
            from .sql_cmd import run_sql

            return run_sql(args)
        if args.command == "export":
            from .export_cmd import run_export

            return run_export(args)
        if args.command == "nodes":
            from .nodes_cmd import run_nodes

            return run_nodes(args)
        if args.command == "experiment":
            from .experiment_cmd import run_experiment

            return run_experiment(args)
        if args.command == "runs":
            from .runs_cmd import run_runs

            return run_runs(args)
        if args.command == "baseline":
            from .runs_cmd import run_baseline

            return run_baseline(args)
        if args.command == "gate":
            from .gate_cmd import run_gate

            return run_gate(args)
    except ProfileError as exc:
        return _bad_input(exc, debug)
    except KeyboardInterrupt:
        print("npuscope: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`npuscope report | head`): not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    parser.error(f"unknown command {args.command}")
    return 2


def run_explorer(args: argparse.Namespace) -> int:
    """Check the path before the UI starts (bad input exits 2 with one line), then run;
    with --debug, the tracebacks the explorer logged follow on stderr once it has closed."""
    from npuscope.parsers import ProfileError
    from npuscope.parsers.memory import analysing
    from npuscope.text import one_line

    analysing(True)

    try:
        from npuscope.analysis import Thresholds
        from npuscope.fixtures.demo_profile import ensure_demo
        from npuscope.parsers import discover
        from npuscope.parsers.nodes_file import looks_like_nodes_file, read_nodes_file
        from npuscope.parsers.profile import select_capture

        path = Path(args.path) if args.path else ensure_demo()
        captures = None
        if looks_like_nodes_file(path):  # ranks on other machines: nothing to discover here
            read_nodes_file(path)
        else:
            captures = discover(path)  # the first load starts from these: the folder is walked once
            select_capture(captures, args.capture)
        compare_with = Path(args.compare) if args.compare else None
        if compare_with is not None:
            discover(compare_with)
        thresholds = Thresholds.from_file(args.rules)
    except ProfileError as exc:
        return _bad_input(exc, args.debug)
    from npuscope.parsers import ReadOptions
    from npuscope.tui.app import NpuscopeApp

    app = NpuscopeApp(
        path,
        capture=args.capture,
        cache=not args.no_cache,
        thresholds=thresholds,
        compare_with=compare_with,
        read=ReadOptions(strict=args.strict, source=args.source, timeline=not args.no_timeline),
        # A folder of rank folders opens as its Ranks view, one rank loaded at a time; a
        # capture named with --capture or a comparison opens as one capture, as --all-cards.
        clusters=not (args.all_cards or args.capture is not None or compare_with is not None),
        ssh_config=args.ssh_config,
        discovered=captures,
        **({"remote_root": args.remote_cache} if args.remote_cache else {}),
    )
    try:
        app.run()
    finally:
        if app.cluster is not None and app.cluster.host is not None:
            app.cluster.host.stop()  # the workers it started on other machines
    if app.error_message:
        print(f"npuscope: {one_line(app.error_message)}", file=sys.stderr)
    if args.debug:
        for reported in app.errors.reported:
            print(f"npuscope: {reported.line}\n{reported.traceback}", file=sys.stderr, end="")
    code = app.return_code or 0
    global _explorer_ran
    _explorer_ran = True
    if app.left_busy or app.busy:
        # Quit during a load: Textual has restored the terminal; the parse left running in its
        # thread is not waited for (nor is a cache write it queued: later loads sweep it away).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


_explorer_ran = False  # set once the explorer has run in this process


def entry() -> None:
    """The `npuscope` command (and `python -m npuscope`): `main()`, then the end of the
    process. After the explorer the interpreter's teardown is skipped, once the cache entries
    handed to the writer thread are written: freeing the modules and frames of a loaded
    profile took 0.15 s on an idle machine (0.02 s with os._exit), time a user waits for
    after `q` with nothing left to do. `main()` itself never ends the process after a
    completed run, so tests call it in process."""
    code = main()
    if not _explorer_ran:
        sys.exit(code)
    from npuscope.parsers.cache import finish_writes

    finish_writes()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    entry()
