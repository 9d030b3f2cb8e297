"""Load benchmarks: npuscope's parsers side by side with the raw readers.

    python benchmarks/run.py                 # 2,000,000-row op_summary and a ~300 MB msprof JSON
    python benchmarks/run.py --rows 200000 --json-mb 30 --repeat 1   # a quick look

Data is generated once into benchmarks/data/ (reused while the parameters match). Every
measurement runs in a fresh Python process, so each figure includes nothing but the work
named, and the process's own peak RSS is reported beside it. Prints a markdown table with
the ratios the targets are stated in; BENCHMARKS.md holds a copy of the last full run.
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


def run_snippet(name: str, *args: str, env: dict | None = None) -> tuple[float, int]:
    return run_snippet_wall(name, *args, env=env)[:2]


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
            gen + [str(csv_root), "--layout", "era_b", "--cards", "1", "--rows", str(rows),
                   "--no-timeline", "--slice-rows", str(rows + 1), "--quiet"],
            check=True, stdout=subprocess.DEVNULL,
        )
        print(f"generating ~{json_mb} MB msprof JSON ...", file=sys.stderr)
        subprocess.run(
            gen + [str(json_root), "--layout", "era_b", "--cards", "1", "--rows", "2000",
                   "--json-mb", str(json_mb), "--quiet"],
            check=True, stdout=subprocess.DEVNULL,
        )
        stamp.write_text(json.dumps(want))
    (csv_file,) = csv_root.rglob("op_summary_*.csv")
    (json_file,) = json_root.rglob("msprof_*.json")
    return csv_file, json_file


def measure(fn, repeat: int) -> tuple[float, int]:
    runs = [fn() for _ in range(repeat)]
    return statistics.median(r[0] for r in runs), max(r[1] for r in runs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--json-mb", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure; the median is shown")
    ap.add_argument("--skip-pandas", action="store_true")
    args = ap.parse_args()
    csv_file, json_file = ensure_data(args.rows, args.json_mb)
    csv_mb = csv_file.stat().st_size / 1e6
    json_mb = json_file.stat().st_size / 1e6
    results: list[tuple[str, str, float, int]] = []

    def add(label: str, what: str, fig: tuple[float, int]) -> None:
        results.append((label, what, *fig))
        print(f"  {label:<34} {fig[0]:8.2f} s  {fig[1] / 1e6:8.0f} MB", file=sys.stderr)

    r = args.repeat
    add("cat", "csv", measure(lambda: run_cat(csv_file), r))
    add("polars read_csv", "csv", measure(lambda: run_snippet("polars_read_csv", str(csv_file)), r))
    if not args.skip_pandas:
        add("pandas read_csv", "csv", measure(lambda: run_snippet("pandas_read_csv", str(csv_file)), 1))
    add("npuscope load, no cache", "csv", measure(lambda: run_snippet("npuscope_load", str(csv_file), "off"), r))

    def cold_then_cached() -> tuple[tuple[float, int], tuple[float, int]]:
        cache = tempfile.mkdtemp(prefix="npuscope-bench-cache-")
        try:
            env = {"NPUSCOPE_CACHE_DIR": cache}
            cold = run_snippet_wall("npuscope_load", str(csv_file), "on", env=env)
            cached = run_snippet("npuscope_load", str(csv_file), "on", env=env)
            return cold, cached
        finally:
            shutil.rmtree(cache, ignore_errors=True)

    pairs = [cold_then_cached() for _ in range(r)]
    add("npuscope cold load (frames ready)", "csv", (statistics.median(p[0][0] for p in pairs), max(p[0][1] for p in pairs)))
    add("npuscope cold process, start to exit", "csv", (statistics.median(p[0][2] for p in pairs), 0))
    add("npuscope cached reopen", "csv", (statistics.median(p[1][0] for p in pairs), max(p[1][1] for p in pairs)))
    add("npuscope report (load + diagnose + JSON)", "csv", measure(lambda: run_snippet("npuscope_report", str(csv_file)), r))
    add("cat", "json", measure(lambda: run_cat(json_file), r))
    add("orjson.loads, GC off", "json", measure(lambda: run_snippet("orjson_loads", str(json_file)), r))
    add("npuscope timeline load, no cache", "json", measure(lambda: run_snippet("npuscope_load", str(json_file), "off"), r))

    fig = {(label, what): (secs, rss) for label, what, secs, rss in results}
    polars_s = fig[("polars read_csv", "csv")][0]
    cold_s = fig[("npuscope load, no cache", "csv")][0]
    orjson_s = fig[("orjson.loads, GC off", "json")][0]
    print(f"\nop_summary: {args.rows:,} rows, {csv_mb:,.0f} MB; msprof JSON: {json_mb:,.0f} MB; "
          f"median of {r} run(s), each in a fresh process; {os.cpu_count()} cores\n")
    print("| measurement | file | seconds | vs baseline | peak RSS (MB) | target |")
    print("|---|---|---:|---:|---:|---|")
    targets = {
        ("npuscope load, no cache", "csv"): ("polars read_csv", ""),
        ("npuscope cold load (frames ready)", "csv"): ("polars read_csv", "<= 1.5x polars read_csv"),
        ("npuscope cold process, start to exit", "csv"): ("polars read_csv", "includes imports and the cache write"),
        ("npuscope cached reopen", "csv"): ("polars read_csv", "<= 0.4x polars read_csv"),
        ("npuscope report (load + diagnose + JSON)", "csv"): ("cold", "< 2x the load"),
        ("npuscope timeline load, no cache", "json"): ("orjson", f"<= 2.5x orjson; RSS <= 8x JSON ({8 * json_mb:,.0f} MB)"),
    }
    for label, what, secs, rss in results:
        base, target = targets.get((label, what), ("", ""))
        ratio = ""
        if base == "polars read_csv":
            ratio = f"{secs / polars_s:.2f}x polars"
        elif base == "orjson":
            ratio = f"{secs / orjson_s:.2f}x orjson"
        elif base == "cold":
            ratio = f"{secs / cold_s:.2f}x load"
        rss_txt = f"{rss / 1e6:,.0f}" if rss else "-"
        print(f"| {label} | {what} | {secs:.2f} | {ratio} | {rss_txt} | {target} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
