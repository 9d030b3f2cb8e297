"""`npuscope runs` and `npuscope baseline`: the runs registry and its named baselines
(analysis/run_registry.py)."""

from __future__ import annotations

import argparse
import sys

from .arguments import count

SPARKS = "▁▂▃▄▅▆▇█"

RUNS_DESCRIPTION = (
    "List the runs recorded so far, oldest first: every profile `report` read, the explorer "
    "opened, `capture` fetched, `experiment` made or `gate` checked, with when, how, the host and change, the "
    "mean step time and device time, and the step-time trend. The registry is "
    "$NPUSCOPE_RUNS_DB, else $XDG_DATA_HOME/npuscope/runs.db, else "
    "~/.local/share/npuscope/runs.db; NPUSCOPE_RUNS_DB=off records nothing. JSON follows the "
    "npuscope.runs/1 schema."
)
BASELINE_DESCRIPTION = (
    "Name a run: `baseline set NAME RUN` (RUN a path, or #ID from `npuscope runs`), then "
    "`compare @NAME NEW` and `gate NEW --baseline @NAME` read it. `baseline list`, `baseline rm NAME`."
)


def add_runs_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    runs = sub.add_parser(
        "runs", help="the runs recorded so far, with the step-time trend", description=RUNS_DESCRIPTION
    )
    runs.add_argument("--limit", type=count(1), default=20, metavar="N", help="the last N runs (default 20)")
    runs.add_argument("--format", choices=("text", "json"), default="text", help="output format (default text)")
    base = sub.add_parser(
        "baseline", help="name a run as a baseline for compare and gate", description=BASELINE_DESCRIPTION
    )
    what = base.add_subparsers(dest="baseline_command", metavar="ACTION", required=True)
    set_ = what.add_parser("set", help="name a run: NAME RUN (a path, or #ID from npuscope runs)")
    set_.add_argument("name", metavar="NAME")
    set_.add_argument("run", metavar="RUN")
    what.add_parser("list", help="the baselines and the runs they name")
    rm = what.add_parser("rm", help="forget a baseline")
    rm.add_argument("name", metavar="NAME")


def _ms(us: float | None) -> str:
    return "-" if us is None else f"{us / 1000:,.2f} ms"


def sparkline(values: list[float]) -> str:
    """One block per value, from the lowest (▁) to the highest (█)."""
    if not values:
        return ""
    lo, hi = min(values), max(values)
    if hi <= lo:
        return SPARKS[0] * len(values)
    return "".join(SPARKS[round((v - lo) / (hi - lo) * (len(SPARKS) - 1))] for v in values)


def run_runs(args: argparse.Namespace) -> int:
    import dataclasses

    import orjson

    from npuscope.analysis import run_registry

    runs = run_registry.list_runs(args.limit)
    names = run_registry.baselines()
    db = run_registry.registry_path()
    if args.format == "json":
        doc = {
            "schema": "npuscope.runs/1",
            "registry": str(db) if db else None,
            "runs": [r.to_dict() for r in runs],
            "baselines": [dataclasses.asdict(b) for b in names],
        }
        sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    if db is None:
        print("the runs registry is off (NPUSCOPE_RUNS_DB=off)")
        return 0
    if not runs:
        print(f"no runs recorded yet in {db}")
        return 0
    named: dict[tuple[str, str], list[str]] = {}
    for b in names:
        named.setdefault((b.path, b.capture), []).append(b.name)
    print(f"{'#':>4}  {'first seen (UTC)':16}  {'how':10}  {'step mean':>10}  {'device':>11}  run")
    for r in runs:
        tags = named.get((r.path, r.capture), []) + (named.get((r.path, ""), []) if r.capture else [])
        label = r.path + (f" [{r.capture}]" if r.capture else "")
        extra = "".join(f" @{n}" for n in tags) + (f"  ({r.change})" if r.change else "")
        seen = r.first_seen.replace("T", " ")[:16]
        print(f"{r.id:>4}  {seen:16}  {r.kind:10}  {_ms(r.step_mean_us):>10}  {_ms(r.device_us):>11}  {label}{extra}")
    steps = [r.step_mean_us for r in runs if r.step_mean_us is not None]
    if len(steps) >= 2:
        print(f"step-time trend, oldest to newest: {sparkline(steps)}  ({_ms(steps[0])} .. {_ms(steps[-1])})")
    return 0


def run_baseline(args: argparse.Namespace) -> int:
    from npuscope.analysis import run_registry

    if args.baseline_command == "set":
        b = run_registry.set_baseline(args.name, args.run)
        print(f"@{b.name} -> {b.path}" + (f" [{b.capture}]" if b.capture else ""))
    elif args.baseline_command == "rm":
        run_registry.remove_baseline(args.name)
        print(f"@{args.name} removed")
    else:
        names = run_registry.baselines()
        if not names:
            print("no baselines (npuscope baseline set NAME RUN)")
        for b in names:
            print(f"@{b.name} -> {b.path}" + (f" [{b.capture}]" if b.capture else "") + f"  (set {b.set_at})")
    return 0
