"""Many cards in one export: `report` on an op_summary of 100 to 10,000 cards.

    python benchmarks/cards.py                      # 100, 1,000, 3,000 and 10,000 cards
    python benchmarks/cards.py --cards 100,1000     # a quick look

Each card holds the demo's first 3 op_summary rows (CSVs of many machines concatenated, the
case a per-card pass made slow). Every figure is one fresh process, `python -m npuscope report
DIR --format json --no-cache` (imports, output and exit included), the median of --repeat
runs, with its peak memory; the last column is the time per card above the smallest export's.
Data is written once into benchmarks/data/cards/. Results are printed as markdown and saved as
JSON in benchmarks/results/.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import statistics
import sys
from pathlib import Path

from scale import _check, _slim, npuscope, results_saver

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "cards"
DEMO = HERE.parent / "fixtures" / "demo" / "ascend_profiling"


def export(cards: int) -> Path:
    """An Era B export of `cards` cards (kept while its op_summary is there)."""
    root = DATA / f"cards{cards}"
    out = root / "mindstudio_profiler_output"
    (summary,) = DEMO.rglob("op_summary_*.csv")
    target = out / summary.name
    if target.is_file():
        return root
    with summary.open(newline="", encoding="utf-8") as fh:
        head, *body = list(csv.reader(fh))
    out.mkdir(parents=True, exist_ok=True)
    part = target.with_suffix(".part")
    with part.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(head)
        for card in range(cards):
            w.writerows([str(card), *row[1:]] for row in body[:3])
    part.rename(target)
    return root


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cards", default="100,1000,3000,10000", help="comma-separated card counts")
    ap.add_argument("--repeat", type=int, default=3, help="runs per export (the median is shown)")
    args = ap.parse_args()
    counts = sorted(int(n) for n in args.cards.split(","))
    results: dict = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(), "rows": []}
    saved, save = results_saver(results, "cards")
    print("| cards | rows | seconds (median) | peak RSS (MB) | ms per card above the first |")
    print("|---:|---:|---:|---:|---:|")
    first: tuple[int, float] | None = None
    for n in counts:
        root = export(n)
        runs = [_check(npuscope("report", str(root), "--format", "json", "--no-cache", cache=None), f"{n} cards")]
        runs += [
            npuscope("report", str(root), "--format", "json", "--no-cache", cache=None) for _ in range(args.repeat - 1)
        ]
        seconds = statistics.median(r["wall_s"] for r in runs)
        rss = max(r["main_peak_mb"] for r in runs)
        per = "" if first is None else f"{1000 * (seconds - first[1]) / (n - first[0]):.2f}"
        first = first or (n, seconds)
        results["rows"].append({"cards": n, "seconds": seconds, "peak_rss_mb": rss, "runs": [_slim(r) for r in runs]})
        save()
        print(f"| {n:,} | {3 * n:,} | {seconds:.2f} | {rss:,.0f} | {per} |", flush=True)
    print(f"saved {saved}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
