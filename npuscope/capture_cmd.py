"""`npuscope capture`: profile a window of a Paddle training on a host over SSH and fetch it.

Progress goes to stderr (phase lines; the job's log with --verbose); the last stdout line is the
local folder of the fetched capture. Exit 0 on success, 1 when the remote job or the capture
failed (one line with the reason, then the last log lines), 2 for bad arguments, 130 when
interrupted (the remote job goes on; the message says how to reattach). `run_capture` returns
the fetched folder too: the CLI opens it in the explorer for `--open`.

Text that comes from a host (its log, run records, error text) goes through
`npuscope.text.one_line` before it is printed: no escape sequence reaches the terminal.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from npuscope.capture.events import Event, LogLine, PhaseStarted, Progressed, RunStarted
from npuscope.capture.spec import (
    DEFAULT_MSPROF,
    DEFAULT_OUT,
    DEFAULT_REMOTE_ROOT,
    DEVICES,
    CaptureError,
    CaptureSpec,
    parse_env,
    parse_hosts,
    requested,
    usage_error,
)
from npuscope.text import one_line

from .arguments import count
from .recording import note_run

if TYPE_CHECKING:
    from npuscope.capture.runs import RunInfo

EPILOG = (
    "The command after -- is run by the bootstrap: its first word is the python that runs the "
    "training script. Example: npuscope capture --host ascend01 --workdir PaddleNLP --device npu "
    "-- python train.py --epochs 1"
)


def add_capture_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "capture",
        help="profile steps of a Paddle training on a host over SSH and fetch the result",
        usage="npuscope capture --host HOST [options] -- PYTHON SCRIPT [ARGS...]\n"
        "       npuscope capture --host HOST --list | --attach RUN | --cancel RUN | --clean",
        description=(
            "Start a Paddle training detached on HOST (over the system ssh; `local` runs on this "
            "machine), profile training steps START..START+STEPS, export with msprof (npu), fetch "
            "only the exported results into OUT/<host>-<time>/ and print that folder last on "
            "stdout. The job survives a lost connection: --list shows runs, --attach RUN follows "
            "one to its end and fetches it, --cancel RUN stops it. Exit 0 ok, 1 the job or the "
            "capture failed, 2 bad arguments."
        ),
        epilog=EPILOG,
    )
    where = p.add_argument_group("where")
    where.add_argument("--host", help="ssh host or Host alias, or `local` for this machine")
    where.add_argument("--hosts", help="several hosts: h1,h2,... or a hostfile (one host per line)")
    where.add_argument(
        "--workdir",
        default="",
        help=(
            "remote working directory, relative to the login folder (default: the login folder; "
            "with --host local, the current folder)"
        ),
    )
    where.add_argument("--ssh-config", metavar="FILE", help="ssh config file instead of ~/.ssh/config")
    where.add_argument(
        "--accept-new-host-key",
        action="store_true",
        help="accept and record the key of a host not yet in known_hosts (never a changed key)",
    )
    where.add_argument(
        "--remote-cache",
        default=DEFAULT_REMOTE_ROOT,
        metavar="DIR",
        help=f"where runs live on the host (default {DEFAULT_REMOTE_ROOT})",
    )
    what = p.add_argument_group("what")
    what.add_argument("--device", choices=DEVICES, default="npu", help="device to profile (default npu)")
    what.add_argument(
        "--start-step", type=count(0), default=100, metavar="N", help="profile from this training step (default 100)"
    )
    what.add_argument("--steps", type=count(1), default=1, metavar="K", help="number of steps to profile (default 1)")
    what.add_argument("--jit-compile", choices=("on", "off"), help="set FLAGS_npu_jit_compile (default: leave it)")
    what.add_argument(
        "--env", action="append", default=[], metavar="KEY=VALUE", help="extra environment for the job (repeatable)"
    )
    what.add_argument(
        "--msprof",
        default="",
        metavar="PATH",
        help=f"msprof on the host (default {DEFAULT_MSPROF}, else msprof on PATH)",
    )
    what.add_argument("--keep-running", action="store_true", help="let training go on after the capture")
    what.add_argument(
        "--out", default=DEFAULT_OUT, metavar="DIR", help=f"local folder for captures (default ./{DEFAULT_OUT})"
    )
    runs = p.add_argument_group("runs").add_mutually_exclusive_group()
    runs.add_argument("--list", action="store_true", help="list the runs on the host")
    runs.add_argument("--attach", metavar="RUN", help="follow run RUN to its end and fetch it")
    runs.add_argument("--cancel", metavar="RUN", help="stop run RUN (its whole process group)")
    runs.add_argument(
        "--clean",
        action="store_true",
        help="delete the host's runs that ended and were fetched, or failed (raw data included)",
    )
    p.add_argument("--open", action="store_true", help="open the fetched capture in the explorer")
    p.add_argument("-v", "--verbose", action="store_true", help="also print the job's log on stderr")
    return p


def split_command(argv: list[str]) -> tuple[list[str], list[str]]:
    """The options before `--` and the training command after it."""
    if "--" in argv:
        cut = argv.index("--")
        return argv[:cut], argv[cut + 1 :]
    return argv, []


def spec_from_args(args: argparse.Namespace, command: list[str]) -> CaptureSpec:
    hosts: tuple[str, ...] = ()
    if args.hosts:
        path = Path(args.hosts).expanduser()
        if path.is_file():
            try:
                hosts = parse_hosts(path.read_text())
            except (OSError, UnicodeDecodeError) as exc:
                raise usage_error(f"{args.hosts}: cannot read the hostfile: {exc}") from None
        else:
            hosts = parse_hosts(args.hosts)
        if not hosts:
            raise usage_error(f"--hosts {args.hosts!r}: no host in it")
    if args.host and hosts:
        raise usage_error("give --host or --hosts, not both")
    if not args.host and not hosts:
        raise usage_error("no host: give --host HOST (or `local`), or --hosts h1,h2")
    if hosts and (args.list or args.attach or args.cancel or args.clean):
        raise usage_error("--list, --attach, --cancel and --clean work on one --host")
    needs_command = not (args.list or args.attach or args.cancel or args.clean)
    if needs_command and not command:
        raise usage_error("no training command: add `-- PYTHON SCRIPT [ARGS...]`")
    return requested(
        (args.host,) if args.host else hosts,
        command,
        needs_command=needs_command,
        workdir=args.workdir,  # `local` without one: the current folder (capture.spec.requested)
        device=args.device,
        start_step=args.start_step,
        steps=args.steps,
        jit_compile=args.jit_compile,
        env=parse_env(args.env),
        msprof=args.msprof,
        keep_running=args.keep_running,
        out=args.out,
        ssh_config=args.ssh_config,
        accept_new_host_key=args.accept_new_host_key,
        remote_root=args.remote_cache,
    )


class StderrReporter:
    """Turns capture events into stderr lines: one per phase, warm-up every 10 %, log if asked."""

    def __init__(self, verbose: bool, several: bool):
        self.verbose = verbose
        self.several = several
        self.t0 = time.monotonic()
        self.tenth: dict[tuple[str, str], int] = {}
        self.runs: dict[str, str] = {}  # host -> run id, once launched

    def line(self, host: str, text: str) -> None:
        prefix = f"[{host}] " if self.several else ""
        sys.stderr.write(f"{time.monotonic() - self.t0:6.1f}s {prefix}{one_line(text)}\n")
        sys.stderr.flush()

    def __call__(self, event: Event) -> None:
        match event:
            case PhaseStarted(host, "open", text):  # the last phase: the fetched folder
                self.line(host, f"fetched into {text}")
            case PhaseStarted(host, phase, text):
                self.line(host, f"{phase}: {text}" if text else phase)
            case RunStarted(host, run_id, pid):
                self.runs[host] = run_id
                self.line(host, f"run {run_id} (pid {pid})")
            case Progressed(host, ("warm-up" | "fetch") as phase, done, total) if total:
                tenth = int(10 * done / total)
                if tenth > self.tenth.get((host, phase), -1):
                    self.tenth[(host, phase)] = tenth
                    if phase == "warm-up":
                        self.line(host, f"warm-up: step {int(done)}/{int(total)}")
                    else:
                        self.line(host, f"fetch: {done / 1e6:.1f}/{total / 1e6:.1f} MB")
            case LogLine(host, text) if self.verbose:
                sys.stderr.write(("  " if not self.several else f"  [{host}] ") + one_line(text) + "\n")


def run_capture(args: argparse.Namespace, command: list[str]) -> tuple[int, Path | None]:
    """Run `npuscope capture` (or --list, --attach, --cancel, --clean): the exit code, and the
    folder of the fetched capture when there is one."""
    # asyncio and the session (~50 ms) only when a capture runs: every command builds the parser.
    import asyncio

    from npuscope.capture import session

    report = None
    try:
        spec = spec_from_args(args, command)
        if args.list:
            return _print_runs(asyncio.run(session.list_runs(spec)), spec), None
        if args.cancel:
            print(one_line(asyncio.run(session.cancel(spec, args.cancel))), file=sys.stderr)
            return 0, None
        if args.clean:
            cleaned = asyncio.run(session.clean(spec))
            for run_id, kib in cleaned:
                print(f"{one_line(run_id)}  {kib / 1024:,.1f} MB", file=sys.stderr)
            total = sum(kib for _, kib in cleaned) / 1024
            print(
                f"{spec.host}: deleted {len(cleaned)} run(s), {total:,.1f} MB; running and unfetched runs are kept",
                file=sys.stderr,
            )
            return 0, None
        report = StderrReporter(args.verbose, len(spec.all_hosts()) > 1)
        if args.attach:
            outcome = asyncio.run(session.attach(spec, args.attach, report))
        else:
            outcome = asyncio.run(session.capture(spec, report))
    except CaptureError as exc:
        print(f"npuscope capture: {one_line(str(exc))}", file=sys.stderr)
        if exc.log_tail:
            print("last lines of the job's log:", file=sys.stderr)
            for line in exc.log_tail:
                print("  " + one_line(line), file=sys.stderr)
        return exc.code, None
    except KeyboardInterrupt:
        hint = ""
        if report is not None and report.runs:
            hint = "; the job goes on: reattach with " + ", ".join(
                f"`npuscope capture --host {h} --attach {r}`" for h, r in report.runs.items()
            )
        elif args.attach:
            hint = "; the job goes on"
        print(f"npuscope capture: interrupted{hint}", file=sys.stderr)
        return 130, None
    note_run(outcome.folder, kind="captured", spec=spec)
    print(outcome.folder)
    sys.stdout.flush()
    return 0, outcome.folder


def _print_runs(runs: list[RunInfo], spec: CaptureSpec) -> int:
    if not runs:
        print(f"no runs on {spec.host}", file=sys.stderr)
        return 0
    print(LIST_HEADER)
    for r in runs:
        print(one_line(r.label()))
    return 0


LIST_HEADER = f"{'run':<20}  {'state':<12} {'phase':<9} command"
"""The header of `--list`, over RunInfo.label()'s columns (a run id is 20 characters)."""
