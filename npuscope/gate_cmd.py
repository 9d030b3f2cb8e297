"""`npuscope gate NEW --budgets FILE [--baseline @NAME|PATH]`: budgets for CI.

The budgets file (analysis/budgets.py) bounds NEW's headline figures (analysis/headline.py):
absolute bounds, shares of compute per op type, and increases over a baseline's same figure.
Exit 0 when every budget holds (a figure the run lacks is listed as not measured and does not
break), 1 when one broke, 2 on bad input (the budgets file, a path, an unknown baseline).
"""

from __future__ import annotations

import argparse
import sys
import textwrap

from .recording import note_run

DESCRIPTION = (
    "Check the run NEW against the budgets of a TOML file (--budgets): [step_time], "
    "[device_time], [exposed_communication], [free_time] and [wait.<cause>] take max_us "
    "(microseconds) and max_increase_pct (over the --baseline run's same figure); "
    "[op_type.<TYPE>] takes max_share_pct (percent of compute) and max_increase_pct. A budget "
    "breaks when its figure is greater than its bound (equal holds); a figure the run lacks is "
    "listed as not measured and does not break. JSON follows the npuscope.gate/1 schema. Exit 0 "
    "when every budget holds, 1 when one broke, 2 on bad input."
)
EXAMPLE = """\
# budgets.toml: what every new run is held to
[step_time]                 # mean step time (per step, the slowest card's)
max_us = 90000              # microseconds
max_increase_pct = 5        # at most 5% over the --baseline run's

[exposed_communication]     # communication not overlapped by compute, mean per step
max_us = 2000

[wait.recompilation]        # wait of this cause, every card summed
max_us = 150000

[op_type.TransData]         # share of the compute time (op_statistic)
max_share_pct = 25
"""
"""A budgets file, as README and `npuscope gate --help` show it."""
EPILOG = "Example: npuscope gate runs/new --budgets budgets.toml --baseline @main"


def add_gate_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "gate",
        help="check a run against budgets (a CI gate)",
        description=textwrap.fill(DESCRIPTION, 78),
        epilog=f"{EPILOG}\n\nA budgets file:\n\n{EXAMPLE}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("new", metavar="NEW", help="the profile folder or file to check, or @NAME: a baseline")
    p.add_argument("--budgets", metavar="FILE", required=True, help="the budgets file (TOML)")
    p.add_argument(
        "--baseline",
        metavar="@NAME|PATH",
        help="the run max_increase_pct budgets are relative to: a profile, or @NAME (npuscope baseline set)",
    )
    p.add_argument(
        "--format", choices=("text", "json"), default="text", help="output format (default text; json: npuscope.gate/1)"
    )
    p.add_argument("--no-cache", action="store_true", help="parse from scratch and write no cache entry")
    p.add_argument("--rules", metavar="FILE", help="TOML file overriding rule thresholds (both runs)")


def run_gate(args: argparse.Namespace) -> int:
    import orjson

    from npuscope.analysis import Thresholds
    from npuscope.analysis.budgets import broken, check_baseline, check_budgets, gate_json, read_budgets, render_gate
    from npuscope.analysis.headline import headline
    from npuscope.analysis.run_registry import resolve_capture, resolve_ref

    from .loading import analysis_for_command

    # Every input is checked before a profile is read: a bad file fails in a moment.
    budgets = read_budgets(args.budgets)
    check_baseline(budgets, args.baseline is not None)
    thresholds = Thresholds.from_file(args.rules)
    new_path = resolve_ref(args.new)
    base_path = resolve_ref(args.baseline) if args.baseline is not None else None
    if base_path is not None and not budgets.relative:
        print("npuscope: note: --baseline is not read: no budget is a max_increase_pct", file=sys.stderr)

    new = headline(
        analysis_for_command(
            new_path, capture=resolve_capture(args.new, None), no_cache=args.no_cache, thresholds=thresholds
        )
    )
    base = None
    if base_path is not None and budgets.relative:
        base = headline(
            analysis_for_command(
                base_path, capture=resolve_capture(args.baseline, None), no_cache=args.no_cache, thresholds=thresholds
            )
        )
    results = check_budgets(budgets, new, base)
    note_run(new_path, kind="gate", figures=new)
    where = {"run": new_path, "baseline": base_path, "budgets_file": args.budgets}
    if args.format == "json":
        sys.stdout.write(orjson.dumps(gate_json(results, **where), option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(render_gate(results, **where))
    sys.stdout.flush()
    return 1 if broken(results) else 0
