"""`npuscope report`: the diagnosis as text, markdown or JSON, or one op's report."""

from __future__ import annotations

import argparse
import sys

import orjson

from npuscope.analysis import Thresholds, diagnose
from npuscope.analysis.op_report import find_task, op_report
from npuscope.analysis.report import build_report, render
from npuscope.analysis.training_rules import training_findings
from npuscope.parsers import ProfileError
from npuscope.parsers.training import read_training_views

from .loading import profile_for_command


def run_report(args: argparse.Namespace) -> int:
    thresholds = Thresholds.from_file(args.rules)
    with profile_for_command(
        args.path, capture=args.capture, no_cache=args.no_cache, timeline=not args.no_timeline,
        strict=args.strict, source=args.source,
    ) as profile:
        cards = None
        if args.card != "all":
            if args.card not in profile.cards:
                raise ProfileError(
                    f"no card {args.card!r} in {profile.capture.name}; cards: {', '.join(profile.cards)}"
                )
            cards = (args.card,)
        diagnosis = diagnose(profile, thresholds, cards)
        if args.op:
            task = find_task(diagnosis, args.op)
            sys.stdout.write(op_report(profile, diagnosis, task))
            return 0
        views = read_training_views(profile, strict=args.strict)
        diagnosis = diagnosis.with_findings(training_findings(profile, diagnosis, views, thresholds))
        report = build_report(profile, diagnosis, top=args.top, views=views)
        if args.format == "json":
            sys.stdout.write(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n")
        else:
            sys.stdout.write(render(report, args.format))
    return 0
