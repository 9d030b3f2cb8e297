"""Explorer benchmarks on a 2,000,000-row profile with a warm cache.

    python benchmarks/explorer.py            # uses (and if needed makes) benchmarks/data/csv
    python benchmarks/explorer.py --repeat 5

Runs the real app headless (`App.run_test`, 140x44) in a fresh process per round and
measures, inside that process:
- first screen: from interpreter start (before any import) to the first frame with the
  cards and the first table page drawn;
- the work behind each key, timed around the action and the rendering of the lines it
  changed (Textual's own event-loop overhead, ~60 ms per simulated key press in Pilot, is
  not part of it): sort by wait, filter, page-down, timeline zoom redraw;
- peak RSS of the process.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

ROUND = r"""
import time
T0 = time.perf_counter()
import asyncio, json, os, resource, sys
from pathlib import Path

from npuscope.parsers import FrameCache, open_profile
from npuscope.tui.app import NpuscopeApp
from npuscope.tui.widgets.frame_table import FrameTable
from npuscope.tui.widgets.mini_timeline import MiniTimeline

path = Path(sys.argv[1])
out = {}


def draw(widget) -> None:
    for y in range(widget.size.height):
        widget.render_line(y)


async def main() -> None:
    app = NpuscopeApp(path, cache=True)
    async with app.run_test(size=(140, 44)) as pilot:
        while app.main.profile is None:
            await asyncio.sleep(0.005)
        await pilot.pause()
        out["first_screen_s"] = time.perf_counter() - T0
        screen = app.main
        table = screen.query_one("#summary-table", FrameTable)
        timeline = screen.query_one(MiniTimeline)
        out["rows"] = table.row_count

        t = time.perf_counter(); screen.action_sort("wait_us"); draw(table)
        out["sort_wait_ms"] = (time.perf_counter() - t) * 1000
        t = time.perf_counter(); screen.apply_filter("type:ReduceSum cause:recompilation"); draw(table)
        out["filter_ms"] = (time.perf_counter() - t) * 1000
        out["filtered_rows"] = table.row_count
        t = time.perf_counter(); screen.apply_filter(""); draw(table)
        out["clear_filter_ms"] = (time.perf_counter() - t) * 1000
        table.focus()
        while timeline.model is None:  # built off the UI thread after the first screen
            await asyncio.sleep(0.01)
        await pilot.pause()
        t = time.perf_counter(); table.action_cursor_page_down(); draw(table)
        out["page_down_ms"] = (time.perf_counter() - t) * 1000
        t = time.perf_counter(); timeline.action_zoom_in(); draw(timeline)
        out["timeline_zoom_ms"] = (time.perf_counter() - t) * 1000
        t = time.perf_counter(); timeline.action_pan_right(); draw(timeline)
        out["timeline_pan_ms"] = (time.perf_counter() - t) * 1000
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


asyncio.run(main())
print(json.dumps(out))
"""

TARGETS = {
    "first_screen_s": ("first screen (cards + first table page), from process start", "s", "<= 1.5 s"),
    "sort_wait_ms": ("sort by wait (d/w) and redraw", "ms", "<= 300 ms"),
    "filter_ms": ("filter `type:ReduceSum cause:recompilation` and redraw", "ms", "<= 300 ms"),
    "clear_filter_ms": ("clear the filter (Esc) and redraw", "ms", "<= 300 ms"),
    "page_down_ms": ("page-down and redraw", "ms", "<= 50 ms"),
    "timeline_zoom_ms": ("timeline zoom and redraw", "ms", "<= 50 ms"),
    "timeline_pan_ms": ("timeline pan and redraw", "ms", "<= 50 ms"),
    "peak_rss_mb": ("peak RSS", "MB", "<= 1,536 MB"),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from run import ensure_data  # the same generated data as the load benchmarks

    csv_file, _ = ensure_data(args.rows, 300)
    export = csv_file.parent
    cache = HERE / "data" / "explorer-cache"
    env = {**os.environ, "NPUSCOPE_CACHE_DIR": str(cache)}
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    # Warm the cache (frames and diagnosis) with one uncounted round: the targets are stated
    # for a warm cache, i.e. a profile opened before.
    subprocess.run([sys.executable, "-c", ROUND, str(export)], env=env, check=True, capture_output=True)
    rounds = []
    for i in range(args.repeat):
        print(f"round {i + 1}/{args.repeat} ...", file=sys.stderr)
        res = subprocess.run([sys.executable, "-c", ROUND, str(export)], env=env, capture_output=True, text=True)
        if res.returncode != 0:
            raise SystemExit(res.stderr)
        rounds.append(json.loads(res.stdout.strip().splitlines()[-1]))
    print(
        f"\n{rounds[0]['rows']:,} tasks on the card shown, warm cache, 140x44, {args.repeat} rounds "
        f"(median, min-max), {os.cpu_count()} cores\n"
    )
    print("| measurement | median | min - max | target |")
    print("|---|---:|---:|---|")
    for key, (label, unit, target) in TARGETS.items():
        values = [r[key] for r in rounds]
        fmt = "{:,.2f}" if unit == "s" else "{:,.0f}" if unit == "MB" else "{:,.1f}"
        print(
            f"| {label} | {fmt.format(statistics.median(values))} {unit} | "
            f"{fmt.format(min(values))} - {fmt.format(max(values))} | {target} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
