"""Load benchmarks: npuscope's parsers side by side with the raw readers.

    python benchmarks/run.py                 # 2,000,000-row op_summary and a ~300 MB msprof JSON
    python benchmarks/run.py --rows 200000 --json-mb 30 --repeat 1 --skip-pandas   # a quick look

Data is generated once into benchmarks/data/ (reused while the parameters match). Every
measurement runs in a fresh Python process, so each figure includes nothing but the work
named, and the process's own peak RSS is reported beside it. Measurements run in rounds and
ratios are taken within a round. Prints a markdown table with the ratios the targets are
stated in; BENCHMARKS.md holds the figures of the last full run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"

# Each snippet prints "<seconds> <peak rss bytes>" as its last line.
PRELUDE = """
import resource, sys, time, gc
def done(t0):
    print(time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""

SNIPPETS = {
    "polars_read_csv": """
import polars as pl
t0 = time.perf_counter(); df = pl.read_csv(sys.argv[1]); done(t0)
""",
    "pandas_read_csv": """
import pandas as pd
t0 = time.perf_counter(); df = pd.read_csv(sys.argv[1]); done(t0)
""",
    "orjson_loads": """
import orjson
t0 = time.perf_counter()
gc.disable(); data = orjson.loads(open(sys.argv[1], 'rb').read()); gc.enable()
done(t0)
""",
    "npuscope_load": """
from npuscope.parsers import FrameCache, open_profile
# As the commands do: a new cache entry is written by a background thread while the
# frames are already in use; the process (and so the wall time measured outside) waits for it.
cache = FrameCache(enabled=sys.argv[2] != "off", background=True)
t0 = time.perf_counter(); p = open_profile(sys.argv[1], cache=cache); done(t0)
assert p.tasks.height > 0
""",
    "npuscope_report": """
from npuscope.parsers import FrameCache, open_profile
from npuscope.analysis import diagnose
from npuscope.analysis.report import build_report
import orjson
cache = FrameCache(enabled=False)
t0 = time.perf_counter()
p = open_profile(sys.argv[1], cache=cache)
text = orjson.dumps(build_report(p, diagnose(p), top=10))
done(t0)
""",
}


def run_snippet_wall(name: str, *args: str, env: dict | None = None) -> tuple[float, int, float]:
    """(seconds inside, peak RSS, whole-process wall seconds including start-up and exit)."""
    code = PRELUDE + SNIPPETS[name]
    w0 = time.perf_counter()
    res = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    if res.returncode != 0:
        raise SystemExit(f"{name} failed:\n{res.stderr}")
    wall = time.perf_counter() - w0
    secs, rss = res.stdout.strip().splitlines()[-1].split()
    return float(secs), int(rss), wall


def run_cat(path: Path) -> tuple[float, int]:
    t0 = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        subprocess.run(["cat", str(path)], stdout=sink, check=True)
    return time.perf_counter() - t0, 0


def ensure_data(rows: int, json_mb: int) -> tuple[Path, Path]:
    """The op_summary CSV and the msprof JSON to measure, generated once."""
    stamp = DATA / "params.json"
    want = {"rows": rows, "json_mb": json_mb, "version": 1}
    csv_root, json_root = DATA / "csv", DATA / "json"
    if not (stamp.is_file() and json.loads(stamp.read_text()) == want):
        shutil.rmtree(DATA, ignore_errors=True)
        DATA.mkdir(parents=True)
        gen = [sys.executable, "-m", "npuscope.fixtures.generate"]
        print(f"generating {rows:,}-row op_summary ...", file=sys.stderr)
        subprocess.run(
            gen
            + [
                str(csv_root),
                "--layout",
                "era_b",
                "--cards",
                "1",
                "--rows",
                str(rows),
                "--no-timeline",
                "--slice-rows",
                str(rows + 1),
                "--quiet",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        print(f"generating ~{json_mb} MB msprof JSON ...", file=sys.stderr)
        subprocess.run(
            gen
            + [
                str(json_root),
                "--layout",
                "era_b",
                "--cards",
                "1",
                "--rows",
                "2000",
                "--json-mb",
                str(json_mb),
                "--quiet",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        stamp.write_text(json.dumps(want))
    (csv_file,) = csv_root.rglob("op_summary_*.csv")
    (json_file,) = json_root.rglob("msprof_*.json")
    return csv_file, json_file


def _round(csv_file: Path, export: Path, json_file: Path) -> dict[str, tuple[float, int, float]]:
    """One run of every measurement, back to back, so the ratios of a round share the
    machine's state of the moment (this 2-core machine drifts by 30% between minutes)."""
    fig: dict[str, tuple[float, int, float]] = {}
    fig["cat csv"] = (*run_cat(csv_file), 0.0)
    fig["polars read_csv"] = run_snippet_wall("polars_read_csv", str(csv_file))
    fig["npuscope load, no cache"] = run_snippet_wall("npuscope_load", str(export), "off")
    cache = tempfile.mkdtemp(prefix="npuscope-bench-cache-")
    try:
        env = {"NPUSCOPE_CACHE_DIR": cache}
        fig["npuscope cold load"] = run_snippet_wall("npuscope_load", str(export), "on", env=env)
        fig["npuscope cached reopen"] = run_snippet_wall("npuscope_load", str(export), "on", env=env)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    fig["npuscope report"] = run_snippet_wall("npuscope_report", str(export))
    fig["cat json"] = (*run_cat(json_file), 0.0)
    fig["orjson.loads, GC off"] = run_snippet_wall("orjson_loads", str(json_file))
    fig["npuscope timeline load"] = run_snippet_wall("npuscope_load", str(json_file), "off")
    return fig


ROWS = [
    # label, key, baseline key, target
    ("cat", "cat csv", None, ""),
    ("polars read_csv (raw file)", "polars read_csv", None, "baseline"),
    ("npuscope load, no cache", "npuscope load, no cache", "polars read_csv", ""),
    (
        "npuscope cold load (frames ready; cache written after)",
        "npuscope cold load",
        "polars read_csv",
        "<= 1.5x polars",
    ),
    ("npuscope cached reopen", "npuscope cached reopen", "polars read_csv", "<= 0.4x polars"),
    (
        "npuscope report (load + diagnose + JSON, no cache)",
        "npuscope report",
        "npuscope load, no cache",
        "< 2x the load",
    ),
    ("cat", "cat json", None, ""),
    ("orjson.loads, GC off", "orjson.loads, GC off", None, "baseline"),
    (
        "npuscope timeline load, no cache",
        "npuscope timeline load",
        "orjson.loads, GC off",
        "<= 2.5x orjson; RSS <= 8x the JSON",
    ),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--json-mb", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=3, help="rounds; medians are shown")
    ap.add_argument("--skip-pandas", action="store_true")
    args = ap.parse_args()
    csv_file, json_file = ensure_data(args.rows, args.json_mb)
    # npuscope opens what users open: the export folder (op_summary + op_statistic + step_trace).
    export = csv_file.parent
    csv_mb = csv_file.stat().st_size / 1e6
    json_mb = json_file.stat().st_size / 1e6
    rounds = []
    for i in range(args.repeat):
        print(f"round {i + 1}/{args.repeat} ...", file=sys.stderr)
        rounds.append(_round(csv_file, export, json_file))
    pandas = None if args.skip_pandas else run_snippet_wall("pandas_read_csv", str(csv_file))

    def med(key: str, i: int) -> float:
        return statistics.median(r[key][i] for r in rounds)

    print(
        f"\nop_summary: {args.rows:,} rows, {csv_mb:,.0f} MB; msprof JSON: {json_mb:,.0f} MB; "
        f"{args.repeat} rounds, each figure in a fresh process; {os.cpu_count()} cores. "
        "Ratios are medians of per-round ratios.\n"
    )
    print("| measurement | seconds (median) | ratio to baseline | peak RSS (MB) | target |")
    print("|---|---:|---:|---:|---|")
    for label, key, base, target in ROWS:
        ratio = ""
        if base:
            ratio = f"{statistics.median(r[key][0] / r[base][0] for r in rounds):.2f}x"
        rss = max(r[key][1] for r in rounds)
        print(f"| {label} | {med(key, 0):.2f} | {ratio} | {rss / 1e6:,.0f} | {target} |".replace("| 0 |", "| - |"))
        if key == "polars read_csv" and pandas is not None:
            print(
                f"| pandas read_csv (raw file, 1 run) | {pandas[0]:.2f} | "
                f"{pandas[0] / med('polars read_csv', 0):.2f}x | {pandas[1] / 1e6:,.0f} | |"
            )
    print(
        f"\nRSS target for the timeline: 8 x {json_mb:,.0f} MB = {8 * json_mb:,.0f} MB. "
        f"Cold load, whole process (imports, load, background cache write, exit): "
        f"{med('npuscope cold load', 2):.2f} s."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
