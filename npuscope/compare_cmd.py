"""`npuscope compare BASE NEW`: did a change help? The comparison as text, markdown or JSON,
and a CI gate (`--fail-on-regression PCT`: exit 1 when the mean step time, total device time or
total wait grew by more; exit 2 on bad input)."""

from __future__ import annotations

import argparse
import sys

import orjson

from npuscope.analysis import Thresholds
from npuscope.analysis.compare import compare_runs, regression
from npuscope.analysis.compare_render import comparison_json, render_comparison

from .loading import profile_for_command


def run_compare(args: argparse.Namespace) -> int:
    thresholds = Thresholds.from_file(args.rules)
    cards = None if args.card == "all" else (args.card,)
    from npuscope.analysis.run_registry import resolve_capture, resolve_ref

    base_path = resolve_ref(args.base)  # @NAME: a baseline (npuscope baseline set NAME RUN)
    base_capture = resolve_capture(args.base, args.base_capture)
    with profile_for_command(base_path, capture=base_capture, no_cache=args.no_cache) as base:
        with profile_for_command(
            resolve_ref(args.new), capture=resolve_capture(args.new, args.new_capture), no_cache=args.no_cache
        ) as new:
            comparison = compare_runs(base, new, cards=cards, by=args.by, thresholds=thresholds)
    if args.format == "json":
        sys.stdout.write(orjson.dumps(comparison_json(comparison), option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(render_comparison(comparison, args.format, top=args.top))
    sys.stdout.flush()
    if args.fail_on_regression is not None:
        reason = regression(comparison, args.fail_on_regression)
        if reason:
            print(f"npuscope: regression: {reason}", file=sys.stderr)
            return 1
    return 0
