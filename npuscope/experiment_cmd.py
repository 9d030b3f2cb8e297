"""`npuscope experiment RUN`: capture RUN's job again with a change, and measure whether it helped.

RUN is a folder `npuscope capture` fetched: its run record (capture/run_record.py) says on
which host, in which folder and with which command and environment it ran. The job runs again
there with the change (`--env KEY=VALUE`, `--jit-compile`), over several profiled steps; the new
capture is fetched beside RUN, both are analysed and the verdict printed (analysis/experiment.py).
Progress goes to stderr as `capture` prints it. Exit 0; 1 when the capture failed, or on
"regressed" with --fail-on-regression; 2 on bad input; 130 when interrupted (the job on the
host is cancelled: an experiment half done measures nothing).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .arguments import count, percent
from .recording import note_run

if TYPE_CHECKING:
    from npuscope.capture.spec import CaptureSpec

    from .capture_cmd import StderrReporter

DESCRIPTION = (
    "Capture the job of RUN (a folder `npuscope capture` fetched: its npuscope_run.json names the "
    "host, working directory, command and environment) again on the same host with a change, "
    "fetch it beside RUN, compare and print a verdict: improved, regressed, or no measurable "
    "change. The verdict rests on the mean step time over several profiled steps (--steps, "
    "default RUN's when it has 2 or more, else 5) with a 95%% confidence interval from the "
    "per-step spread (Welch's t): improved or regressed only when the interval excludes 0 and "
    "the change is at least --min-change percent. Also device time, wait by cause, the finding "
    "that motivated the change (gone, smaller, larger, unchanged) and findings resolved and new. "
    "JSON follows the npuscope.experiment/1 schema. Exit 0; 1 when the capture failed, or on "
    "regressed with --fail-on-regression; 2 on bad input; 130 when interrupted (the new job is "
    "cancelled on its host)."
)


def add_experiment_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "experiment",
        help="capture a fetched run again with a change (--env, --jit-compile) and measure the change",
        description=DESCRIPTION,
        epilog="Example: npuscope experiment captures/ascend01-20261203-101500 --env FLAGS_npu_jit_compile=false",
    )
    p.add_argument("run", metavar="RUN", help="a folder `npuscope capture` fetched (it holds npuscope_run.json)")
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set this environment variable in the job (repeatable; over RUN's own --env)",
    )
    p.add_argument("--jit-compile", choices=("on", "off"), help="set FLAGS_npu_jit_compile (default: as RUN)")
    p.add_argument(
        "--steps", type=count(2), metavar="K", help="steps to profile (default RUN's when 2 or more, else 5)"
    )
    p.add_argument(
        "--min-change",
        type=percent,
        default=1.0,
        metavar="PCT",
        help=(
            "smallest change of the mean step time called improved or regressed (default 1): two runs of "
            "one job drift apart by some percent that the per-step spread does not show"
        ),
    )
    p.add_argument("--out", metavar="DIR", help="where the new capture goes (default: RUN's parent folder)")
    p.add_argument(
        "--format", choices=("text", "json"), default="text", help="output format (default text; json: schema above)"
    )
    p.add_argument("--fail-on-regression", action="store_true", help="exit 1 when the verdict is regressed")
    p.add_argument("--rules", metavar="FILE", help="TOML file overriding rule thresholds (both runs)")
    p.add_argument("--no-cache", action="store_true", help="parse from scratch and write no cache entry")
    p.add_argument("-v", "--verbose", action="store_true", help="also print the job's log on stderr")


def run_experiment(args: argparse.Namespace) -> int:
    import asyncio

    import orjson

    from npuscope.analysis import Thresholds
    from npuscope.analysis.experiment import Change, experiment_json, measure, render_experiment
    from npuscope.capture import session
    from npuscope.capture.run_record import again, read_run_record
    from npuscope.capture.spec import CaptureError, parse_env
    from npuscope.text import one_line

    from .capture_cmd import StderrReporter
    from .loading import analysis_for_command

    thresholds = Thresholds.from_file(args.rules)  # a bad rules file before anything runs
    report: StderrReporter | None = None
    spec: CaptureSpec | None = None
    try:
        record = read_run_record(Path(args.run).expanduser())
        env = parse_env(args.env)
        spec = again(record, env=env, jit_compile=args.jit_compile, steps=args.steps, out=args.out)
        change = Change(env=env, jit_compile=args.jit_compile, steps=spec.steps)
        print(f"experiment: {change.text}, {spec.steps} steps on {', '.join(spec.all_hosts())}", file=sys.stderr)
        report = StderrReporter(args.verbose, len(spec.all_hosts()) > 1)
        outcome = asyncio.run(session.capture(spec, report))
    except CaptureError as exc:
        print(f"npuscope experiment: {one_line(str(exc))}", file=sys.stderr)
        for line in exc.log_tail:
            print("  " + one_line(line), file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        _cancel(spec, report)
        return 130
    base = analysis_for_command(args.run, no_cache=args.no_cache, thresholds=thresholds)
    new = analysis_for_command(str(outcome.folder), no_cache=args.no_cache, thresholds=thresholds)
    result = measure(
        base,
        new,
        change,
        min_change_pct=args.min_change,
        base_path=str(Path(args.run).expanduser().resolve()),
        new_path=str(outcome.folder),
    )
    note_run(args.run, kind="captured", analysis=base)
    note_run(outcome.folder, kind="experiment", analysis=new, spec=spec, change=change.text)
    if args.format == "json":
        sys.stdout.write(orjson.dumps(experiment_json(result), option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(render_experiment(result))
    sys.stdout.flush()
    if args.fail_on_regression and result.verdict == "regressed":
        print(f"npuscope: regression: {result.verdict}", file=sys.stderr)
        return 1
    return 0


def _cancel(spec: CaptureSpec | None, report: StderrReporter | None) -> None:
    """Ctrl-C: stop the new job on its host(s); half an experiment measures nothing."""
    import asyncio

    from npuscope.capture import session
    from npuscope.capture.spec import CaptureError

    runs = report.runs if report is not None else {}
    if spec is None or not runs:
        print("npuscope experiment: interrupted before the job started", file=sys.stderr)
        return
    for host, run_id in runs.items():
        try:
            said = asyncio.run(session.cancel(spec.for_host(host), run_id))
        except (CaptureError, OSError) as exc:
            said = f"could not cancel run {run_id} on {host}: {exc}"
        print(f"npuscope experiment: interrupted; {said}", file=sys.stderr)
