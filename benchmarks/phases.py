"""Where a cold load of the benchmark op_summary spends its time, phase by phase, in process.

    python benchmarks/phases.py              # the export benchmarks/run.py generated
    python benchmarks/phases.py --repeat 5   # best of 5 loads

Each phase is timed from its call to its return, in wall seconds and in CPU seconds of the
whole process (all threads): on a machine shared with other work the CPU figure moves much
less than the wall one, and it is what the choice between two versions of a phase can rest
on. A phase called inside another is counted in both (read_table holds the CSV scan).
The load runs with the cache off, so every phase runs each time.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

# module, function: the phases of open_profile on a text export.
PHASES = (
    # (module the phase is called from, function): wrapped where it is looked up.
    ("export_tables", "read_table"),
    ("csv_table", "_read_polars"),
    ("csv_table", "_check_numbers"),
    ("csv_table", "_check_starts"),
    ("export_tables", "canonical_tasks"),
    ("source_frames", "card_checks"),
    ("source_frames", "statistic_problem"),
    ("profile", "time_problem"),
    ("profile", "outlying_events"),
    ("source_frames", "read_statistic"),
    ("source_frames", "read_steps"),
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("export", nargs="?", type=Path, help="export folder (default: the benchmark's)")
    ap.add_argument("--repeat", type=int, default=3, help="loads; the one of least CPU is shown")
    args = ap.parse_args()
    export = args.export
    if export is None:
        found = sorted((HERE / "data" / "csv").rglob("op_summary_*.csv"))
        if not found:
            raise SystemExit("no benchmark data: run benchmarks/run.py once, or name an export folder")
        export = found[0].parent

    from npuscope.parsers import FrameCache, csv_table, export_tables, profile, source_frames

    modules = {
        "csv_table": csv_table,
        "profile": profile,
        "export_tables": export_tables,
        "source_frames": source_frames,
    }
    spent: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*a: Any, **k: Any) -> Any:
            w0, c0 = time.perf_counter(), time.process_time()
            try:
                return fn(*a, **k)
            finally:
                spent[name][0] += time.perf_counter() - w0
                spent[name][1] += time.process_time() - c0

        return wrapper

    for mod, name in PHASES:
        target = modules[mod]
        if not hasattr(target, name):  # a phase renamed or moved: say so, never time nothing
            raise SystemExit(f"benchmarks/phases.py: no {name} in npuscope.parsers.{mod}")
        setattr(target, name, timed(name, getattr(target, name)))

    best: tuple[float, float, dict[str, list[float]]] | None = None
    for _ in range(args.repeat):
        spent.clear()
        w0, c0 = time.perf_counter(), time.process_time()
        prof = profile.open_profile(export, cache=FrameCache(enabled=False))
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        if best is None or cpu < best[1]:
            best = (wall, cpu, {k: list(v) for k, v in spent.items()})
    assert best is not None
    wall, cpu, phases = best
    print(f"{export}: {prof.tasks.height:,} tasks; best of {args.repeat} loads by CPU")
    print(f"{'phase':<20} {'wall s':>8} {'CPU s':>8}")
    print(f"{'open_profile':<20} {wall:>8.3f} {cpu:>8.3f}")
    for name, (w, c) in sorted(phases.items(), key=lambda kv: -kv[1][1]):
        print(f"  {name:<18} {w:>8.3f} {c:>8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
