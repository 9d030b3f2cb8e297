"""Scale benchmarks: whole processes as a user runs them, from big single files to clusters.

    python benchmarks/scale.py                         # every part (heavy: an hour or more)
    python benchmarks/scale.py --parts growth,clusters # cluster growth, then the big clusters
    python benchmarks/scale.py --parts files           # the big single files of benchmarks/run.py
    python benchmarks/scale.py --growth 1,8 --clusters 16x5000 --parts growth,clusters  # a quick look

Every figure is one fresh process started the way a user starts it (`python -m npuscope
report ...`, imports, output and exit included), timed from outside. Peak memory is read from
/proc while the process runs (every 20 ms): the main process's high-water mark (VmHWM, exact),
the largest worker's, and the sum of the whole process tree at its largest sample. Each
process gets its own cache folder (NPUSCOPE_CACHE_DIR): "cold" starts from an empty one,
"cached" runs again on the one the cold run filled.

Parts:
  files     the issue's single-file rows: cold `inspect --no-cache` and cached `inspect` of the
            2,000,000-row op_summary of benchmarks/run.py against a typed polars `read_csv`
            (null_values=['N/A']) of the same file; memory per loaded task row; cold
            `report --format json` on an export of 433,600 rows with a ~337 MB timeline against
            read_csv of its op_summary plus `orjson.loads` (GC off) of its timeline; cold
            `inspect` and `report` of 2 cards x 1M rows with a ~1.8 GB timeline against
            `orjson.loads` of it (`--big`: that export takes long to write and ~5 GB to read).
  growth    clusters of 1, 8, 64 and 512 ranks x 540 tasks: cold report, cached report,
            opening one rank (in process), peak memory; how each grows with the ranks.
  clusters  128 ranks x 50,000 tasks and 1,024 ranks x 5,000 tasks: the same figures.
  msprof    msprof-analyze's cluster analysis (`msprof-analyze cluster -d DIR`) on the same
            cluster folders, when it is installed (pip install msprof-analyze: the `bench`
            extra): its time, peak memory, exit code and what it wrote.

Data is generated once into benchmarks/data/scale/ (kept while the parameters match); the
clusters are torch_npu rank folders with the training-level files and no timeline, rank 0
planted slow and the link 1 -> 2 planted slow (`python -m npuscope.fixtures.generate --ranks`).
Results are printed as markdown and saved as JSON in benchmarks/results/.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "scale"
RESULTS = HERE / "results"
SAMPLE_S = 0.02

GROWTH = (1, 8, 64, 512)
GROWTH_ROWS = 540
CLUSTERS = ((128, 50_000), (1024, 5_000))

OPEN_RANK = """
import resource, sys, time
t0 = time.perf_counter()
from npuscope.analysis.cluster import open_cluster, open_rank
from npuscope.parsers import FrameCache
t1 = time.perf_counter()
summary = open_cluster(sys.argv[1], cache=FrameCache())
t2 = time.perf_counter()
rank = summary.ranks[len(summary.ranks) // 2].rank
profile = open_rank(summary, rank)
t3 = time.perf_counter()
assert profile.tasks.height > 0
print(t1 - t0, t2 - t1, t3 - t2, profile.tasks.height, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""
COLD_SUMMARY = """
import sys, time
t0 = time.perf_counter()
from npuscope.analysis.cluster import open_cluster
from npuscope.parsers import FrameCache
t1 = time.perf_counter()
summary = open_cluster(sys.argv[1], cache=FrameCache(background=True))
print(t1 - t0, time.perf_counter() - t1, len(summary.ranks))
"""
READ_CSV = """
import sys, polars as pl
df = pl.read_csv(sys.argv[1], null_values=["N/A"])
print(df.height)
"""
FULL_LOAD = """
import sys
from npuscope.parsers import FrameCache, open_profile
p = open_profile(sys.argv[1], cache=FrameCache(enabled=False), pmu="ratios")
print(p.tasks.height)
"""
ORJSON = """
import gc, sys, orjson
gc.disable()
data = orjson.loads(open(sys.argv[1], "rb").read())
gc.enable()
print(len(data))
"""


# --------------------------------------------------------------------------- measuring


def _status_kb(pid: int, field: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _tree(pid: int) -> list[int]:
    """pid and its descendants (from /proc: children of every thread)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo += [int(c) for c in fh.read().split()]
        except OSError:
            pass
    return out


def measure(cmd: list[str], env: dict[str, str] | None = None, timeout: float | None = None) -> dict[str, Any]:
    """Run `cmd` to its end; wall seconds, exit code, memory (MB), the tail of its output."""
    out = tempfile.TemporaryFile()
    err = tempfile.TemporaryFile()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=out, stderr=err, env={**os.environ, **(env or {})})
    main_hwm = worker_hwm = tree_peak = 0
    timed_out = False
    while proc.poll() is None:
        pids = _tree(proc.pid)
        main_hwm = max(main_hwm, _status_kb(proc.pid, "VmHWM"))
        rss = [_status_kb(p, "VmRSS") for p in pids]
        tree_peak = max(tree_peak, sum(rss))
        for p in pids[1:]:
            worker_hwm = max(worker_hwm, _status_kb(p, "VmHWM"))
        if timeout is not None and time.perf_counter() - t0 > timeout:
            timed_out = True
            for p in reversed(pids):
                try:
                    os.kill(p, 9)
                except OSError:
                    pass
            proc.wait()
            break
        time.sleep(SAMPLE_S)
    wall = time.perf_counter() - t0
    out.seek(0)
    err.seek(0)
    stdout = out.read().decode(errors="replace")
    stderr = err.read().decode(errors="replace")
    return {
        "cmd": " ".join(cmd),
        "wall_s": round(wall, 2),
        "rc": proc.returncode,
        "timed_out": timed_out,
        "main_peak_mb": round(main_hwm / 1024, 1),
        "worker_peak_mb": round(worker_hwm / 1024, 1),
        "tree_peak_mb": round(tree_peak / 1024, 1),
        "stdout": stdout,
        "stdout_tail": stdout[-2000:],
        "stdout_bytes": len(stdout),
        "stderr_tail": stderr[-2000:],
    }


def npuscope(*args: str, cache: Path | None, timeout: float | None = None) -> dict[str, Any]:
    env = {"NPUSCOPE_CACHE_DIR": str(cache)} if cache is not None else {}
    return measure([sys.executable, "-m", "npuscope", *args], env, timeout)


def snippet(code: str, *args: str, cache: Path | None = None) -> dict[str, Any]:
    env = {"NPUSCOPE_CACHE_DIR": str(cache)} if cache is not None else {}
    return measure([sys.executable, "-c", code, *args], env)


def _fresh_cache(tag: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"npuscope-scale-{tag}-"))


def _check(res: dict[str, Any], what: str) -> dict[str, Any]:
    if res["rc"] != 0:
        print(f"  !! {what} exited {res['rc']}: {res['stderr_tail'][-500:]}", file=sys.stderr)
    return res


# --------------------------------------------------------------------------- data


def _generate(folder: Path, args: list[str]) -> Path:
    """`python -m npuscope.fixtures.generate folder *args`, once (a stamp keeps the args)."""
    stamp = folder / ".params.json"
    if stamp.is_file() and json.loads(stamp.read_text()) == args:
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    t0 = time.perf_counter()
    print(f"generating {folder.name}: {' '.join(args)} ...", file=sys.stderr, flush=True)
    subprocess.run(
        [sys.executable, "-m", "npuscope.fixtures.generate", str(folder), *args, "--quiet"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    print(f"  written in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    stamp.write_text(json.dumps(args))
    return folder


def cluster_data(ranks: int, rows: int) -> Path:
    return _generate(DATA / f"cluster_{ranks}x{rows}", ["--ranks", str(ranks), "--rows", str(rows), "--no-timeline"])


def _size_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6


# --------------------------------------------------------------------------- parts


def run_cluster(ranks: int, rows: int, jobs: int | None) -> dict[str, Any]:
    folder = cluster_data(ranks, rows)
    extra = ["--jobs", str(jobs)] if jobs else []
    summary: dict[str, Any] = {"rc": None}
    if ranks > 1:  # the summary alone, cold, in a cache of its own
        cache = _fresh_cache(f"{ranks}x{rows}-summary")
        try:
            print(f"cluster {ranks} x {rows:,}: cold summary ...", file=sys.stderr, flush=True)
            summary = _check(snippet(COLD_SUMMARY, str(folder), cache=cache), "cold summary")
        finally:
            shutil.rmtree(cache, ignore_errors=True)
    cache = _fresh_cache(f"{ranks}x{rows}")
    try:
        print(f"cluster {ranks} x {rows:,}: cold report ...", file=sys.stderr, flush=True)
        cold = _check(npuscope("report", str(folder), "--format", "json", *extra, cache=cache), "cold report")
        print(f"  {cold['wall_s']} s; cached report ...", file=sys.stderr, flush=True)
        cached = _check(npuscope("report", str(folder), "--format", "json", *extra, cache=cache), "cached report")
        # One rank folder is one capture, not a cluster: nothing to open a rank of.
        one = _check(snippet(OPEN_RANK, str(folder), cache=cache), "open one rank") if ranks > 1 else {"rc": None}
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    fig: dict[str, Any] = {
        "ranks": ranks,
        "rows_per_rank": rows,
        "tasks": ranks * rows,
        "data_mb": round(_size_mb(folder), 1),
        "cold_summary": _slim(summary),
        "cold_report": _slim(cold),
        "cached_report": _slim(cached),
        "open_one_rank": _slim(one),
    }
    try:
        doc = json.loads(cold["stdout"])
    except ValueError:
        doc = None
    if doc is not None and "cluster" in doc:
        c = doc["cluster"]
        fig["found"] = {
            "slow_ranks": c["slow_ranks"],
            "slow_links": c.get("slow_links", []),
            "spread_pct": c["spread_pct"],
            "unreadable": sum(1 for r in c["ranks"] if r.get("error")),
        }
    if summary.get("rc") == 0:
        imports, summary_s, _ = summary["stdout_tail"].split()[-3:]
        fig["cold_summary"].update(imports_s=round(float(imports), 2), summary_s=round(float(summary_s), 2))
    if one.get("rc") == 0:
        imports, summary_s, rank_s, rank_rows, rss = one["stdout_tail"].split()[-5:]
        fig["open_one_rank"].update(
            imports_s=round(float(imports), 2),
            cached_summary_s=round(float(summary_s), 2),
            open_rank_s=round(float(rank_s), 2),
            rank_rows=int(rank_rows),
        )
    return fig


def _slim(res: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in res.items() if k not in ("stdout", "stdout_tail", "stderr_tail")} | (
        {"stderr_tail": res.get("stderr_tail", "")[-300:]} if res["rc"] not in (0, None) else {}
    )


def run_msprof(ranks: int, rows: int, timeout: float) -> dict[str, Any]:
    exe = shutil.which("msprof-analyze") or os.environ.get("MSPROF_ANALYZE")
    if not exe:
        return {"ranks": ranks, "rows_per_rank": rows, "skipped": "msprof-analyze not installed"}
    folder = cluster_data(ranks, rows)
    out = Path(tempfile.mkdtemp(prefix="npuscope-scale-msprof-"))
    try:
        print(f"msprof-analyze cluster on {ranks} x {rows:,} ...", file=sys.stderr, flush=True)
        res = measure([exe, "cluster", "-d", str(folder), "-o", str(out)], timeout=timeout)
        written = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
        found: dict[str, Any] = {"files": written}
        steps = out / "cluster_analysis_output" / "cluster_step_trace_time.csv"
        if steps.is_file():
            lines = steps.read_text().splitlines()
            found["step_rows"] = len(lines) - 1
            ranks_seen = {line.split(",")[2] for line in lines[1:] if line.split(",")[1] == "rank"}
            found["ranks_in_step_table"] = len(ranks_seen)
        matrix = out / "cluster_analysis_output" / "cluster_communication_matrix.json"
        if matrix.is_file():
            doc = json.loads(matrix.read_text() or "{}")
            links = 0
            for group in doc.values():
                for step in group.values():
                    for op in step.values():
                        links += len(op)
            found["matrix_links"] = links
        log = res["stdout_tail"] + res["stderr_tail"]
        found["unmapped_rank_warnings"] = "cannot be mapped to the global rank" in log
        return {"ranks": ranks, "rows_per_rank": rows, "run": _slim(res), "found": found}
    finally:
        shutil.rmtree(out, ignore_errors=True)


def run_files(big: bool) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    from run import ensure_data  # the 2,000,000-row op_summary of benchmarks/run.py

    csv_file, _ = ensure_data(2_000_000, 300)
    export = csv_file.parent
    out: dict[str, Any] = {"csv_mb": round(csv_file.stat().st_size / 1e6, 1), "csv_rows": 2_000_000}
    print("files: read_csv, cold and cached inspect ...", file=sys.stderr, flush=True)
    out["read_csv"] = _slim(_check(snippet(READ_CSV, str(csv_file)), "read_csv"))
    cache = _fresh_cache("inspect")
    try:
        out["inspect_no_cache"] = _slim(_check(npuscope("inspect", "--no-cache", str(export), cache=cache), "inspect"))
        out["inspect_cold"] = _slim(_check(npuscope("inspect", str(export), cache=cache), "inspect (fills the cache)"))
        out["inspect_cached"] = _slim(_check(npuscope("inspect", str(export), cache=cache), "cached inspect"))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    # What the explorer loads (every canonical column, the PMU ratios), cache off, in process.
    out["full_load"] = _slim(_check(snippet(FULL_LOAD, str(export)), "full load"))
    report = _generate(
        DATA / "report_433600", ["--layout", "era_b", "--cards", "1", "--rows", "433600", "--json-mb", "337"]
    )
    print("files: cold report on 433,600 rows + timeline ...", file=sys.stderr, flush=True)
    (report_csv,) = report.rglob("op_summary_*.csv")
    (report_json,) = report.rglob("msprof_*.json")
    out["report_read_csv"] = _slim(_check(snippet(READ_CSV, str(report_csv)), "read_csv"))
    out["report_orjson"] = _slim(_check(snippet(ORJSON, str(report_json)), "orjson"))
    out["report_json"] = _slim(
        _check(npuscope("report", str(report), "--format", "json", "--no-cache", cache=None), "report")
    )
    out["report_data_mb"] = round(_size_mb(report), 1)
    if big:
        two = _generate(
            DATA / "two_cards_1M", ["--layout", "era_b", "--cards", "2", "--rows", "1000000", "--json-mb", "1800"]
        )
        (timeline,) = two.rglob("msprof_*.json")
        print("files: orjson.loads and cold inspect of the 1.8 GB timeline ...", file=sys.stderr, flush=True)
        out["big_timeline_mb"] = round(timeline.stat().st_size / 1e6, 1)
        out["big_orjson"] = _slim(_check(snippet(ORJSON, str(timeline)), "orjson"))
        out["big_inspect_no_cache"] = _slim(
            _check(npuscope("inspect", "--no-cache", str(two), cache=None), "big inspect")
        )
        cache = _fresh_cache("big")
        try:
            out["big_inspect"] = _slim(_check(npuscope("inspect", str(two), cache=cache), "big inspect"))
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        print("files: cold report of the 1.8 GB timeline export ...", file=sys.stderr, flush=True)
        out["big_report"] = _slim(
            _check(npuscope("report", str(two), "--format", "json", "--no-cache", cache=None), "big report")
        )
    return out


# --------------------------------------------------------------------------- output


def _mb(x: float) -> str:
    return f"{x:,.0f}"


def print_files(f: dict[str, Any]) -> None:
    rc = f["read_csv"]["wall_s"]
    print(f"\n### Single files (op_summary {f['csv_rows']:,} rows, {f['csv_mb']:,.0f} MB)\n")
    print("| figure | measured | target |")
    print("|---|---:|---|")
    cold, cached = f["inspect_no_cache"], f["inspect_cached"]
    print(
        f"| typed polars read_csv (null_values=['N/A']), whole process | {rc:.2f} s, {_mb(f['read_csv']['main_peak_mb'])} MB | baseline |"
    )
    print(
        f"| cold `inspect --no-cache` / read_csv | {cold['wall_s']:.2f} s = {cold['wall_s'] / rc:.2f}x, {_mb(cold['main_peak_mb'])} MB | <= 1.5x |"
    )
    print(
        f"| cached `inspect` / read_csv | {cached['wall_s']:.2f} s = {cached['wall_s'] / rc:.2f}x, {_mb(cached['main_peak_mb'])} MB | <= 0.4x |"
    )
    if "inspect_cold" in f:
        first = f["inspect_cold"]
        print(
            f"| cold `inspect` (cache on: every column parsed and written) / read_csv | {first['wall_s']:.2f} s = {first['wall_s'] / rc:.2f}x, {_mb(first['main_peak_mb'])} MB | |"
        )
    per_row = cold["main_peak_mb"] * 1024 / f["csv_rows"]
    print(f"| memory per loaded task row (cold `inspect --no-cache` peak / rows) | {per_row:.2f} KB | <= 0.4 KB |")
    if "full_load" in f:
        full = f["full_load"]
        print(
            f"| memory per loaded task row, the explorer's load (every column, PMU ratios; cache off) | {full['main_peak_mb'] * 1024 / f['csv_rows']:.2f} KB, {full['wall_s']:.2f} s | |"
        )
    r, base = f["report_json"], f["report_read_csv"]["wall_s"] + f["report_orjson"]["wall_s"]
    print(
        f"| cold `report --format json`, 433,600 rows + timeline ({f['report_data_mb']:,.0f} MB) / (read_csv "
        f"{f['report_read_csv']['wall_s']:.2f} s + orjson.loads {f['report_orjson']['wall_s']:.2f} s) | "
        f"{r['wall_s']:.2f} s = {r['wall_s'] / base:.2f}x, {_mb(r['main_peak_mb'])} MB | <= 0.5x |"
    )
    keys = (
        ("big_inspect_no_cache", "`inspect --no-cache`", "<= 2.5x orjson, peak <= 2x the file"),
        ("big_inspect", "cold `inspect` (cache on)", "<= 2.5x orjson, peak <= 2x the file"),
        ("big_report", "cold `report --format json`", "<= 2x orjson, peak <= 1x the file"),
    )
    for key, what, target in keys:
        if key not in f:
            continue
        o, b = f["big_orjson"], f[key]
        print(
            f"| 2 cards x 1M rows + {f['big_timeline_mb']:,.0f} MB timeline, {what} | {b['wall_s']:.2f} s = "
            f"{b['wall_s'] / o['wall_s']:.2f}x orjson ({o['wall_s']:.2f} s, {_mb(o['main_peak_mb'])} MB), {_mb(b['main_peak_mb'])} MB = "
            f"{b['main_peak_mb'] / (f['big_timeline_mb'] / 1.048576):.2f}x the file | {target} |"
        )


def print_clusters(rows: list[dict[str, Any]], title: str) -> None:
    print(f"\n### {title}\n")
    print(
        "| ranks x tasks | data MB | cold summary s (in process) | cold summary main / tree peak MB | cold report s | "
        "cold main / worker / tree peak MB | cached report s | cached main peak MB | open one rank s (cached summary s) "
        "| found |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for f in rows:
        c, k, o = f["cold_report"], f["cached_report"], f["open_one_rank"]
        found = f.get("found")
        what = (
            f"slow {','.join(found['slow_ranks']) or '-'}; links {','.join(found['slow_links']) or '-'}"
            if found
            else ("one capture" if f["ranks"] == 1 else "-")
        )
        if "open_rank_s" in o:
            opened = f"{o['open_rank_s']:.2f} ({o['cached_summary_s']:.2f})"
        else:
            opened = "-" if o.get("rc") is None else f"rc {o['rc']}"
        cs = f.get("cold_summary", {})
        if "summary_s" in cs:
            summ = f"{cs['wall_s']:.2f} ({cs['summary_s']:.2f}) | {_mb(cs['main_peak_mb'])} / {_mb(cs['tree_peak_mb'])}"
        else:
            summ = "- | -"
        print(
            f"| {f['ranks']:,} x {f['rows_per_rank']:,} | {f['data_mb']:,.0f} | {summ} | {c['wall_s']:.2f}"
            + ("" if c["rc"] == 0 else f" (rc {c['rc']})")
            + f" | {_mb(c['main_peak_mb'])} / {_mb(c['worker_peak_mb'])} / {_mb(c['tree_peak_mb'])} | {k['wall_s']:.2f} | "
            f"{_mb(k['main_peak_mb'])} | {opened} | {what} |"
        )


def print_msprof(rows: list[dict[str, Any]]) -> None:
    print("\n### msprof-analyze cluster on the same folders\n")
    print("| ranks x tasks | seconds | peak MB (tree) | exit code | what it wrote |")
    print("|---|---:|---:|---:|---|")
    for m in rows:
        if "skipped" in m:
            print(f"| {m['ranks']:,} x {m['rows_per_rank']:,} | - | - | - | {m['skipped']} |")
            continue
        r, f = m["run"], m["found"]
        wrote = ", ".join(Path(p).name for p in f["files"]) or "nothing"
        extra = []
        if "ranks_in_step_table" in f:
            extra.append(f"{f['ranks_in_step_table']} ranks in its step table")
        if "matrix_links" in f:
            extra.append(f"{f['matrix_links']} links in its matrix")
        if f.get("unmapped_rank_warnings"):
            extra.append("warned: local ranks cannot be mapped to the global rank")
        timed = " (stopped: timeout)" if r["timed_out"] else ""
        print(
            f"| {m['ranks']:,} x {m['rows_per_rank']:,} | {r['wall_s']:.1f}{timed} | {_mb(r['tree_peak_mb'])} | "
            f"{r['rc']} | {wrote}; {'; '.join(extra)} |"
        )


def results_saver(results: dict[str, Any], name: str) -> tuple[Path, Callable[[], None]]:
    """`results` stamped with the commit, and where and how to save it (RESULTS/NAME-DATE.json,
    `results["date"]` set by the caller); `save()` rewrites the file with what it holds now."""
    try:
        results["commit"] = subprocess.run(
            ["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        pass
    RESULTS.mkdir(parents=True, exist_ok=True)
    saved = RESULTS / f"{name}-{results['date'][:19].replace(':', '')}.json"

    def save() -> None:
        saved.write_text(json.dumps(results, indent=2))

    return saved, save


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="files,growth,clusters,msprof", help="comma-separated parts to run")
    ap.add_argument("--growth", default=",".join(map(str, GROWTH)), help="rank counts of the growth rows")
    ap.add_argument("--growth-rows", type=int, default=GROWTH_ROWS, help="tasks per rank of the growth rows")
    ap.add_argument(
        "--clusters", default=",".join(f"{r}x{t}" for r, t in CLUSTERS), help="RANKSxTASKS of the big clusters"
    )
    ap.add_argument("--jobs", type=int, default=None, help="npuscope report --jobs (default: its own, the cores)")
    ap.add_argument("--big", action="store_true", help="files: also the 2 x 1M rows + 1.8 GB timeline export")
    ap.add_argument("--msprof-timeout", type=float, default=1800.0, help="seconds before msprof-analyze is stopped")
    args = ap.parse_args()
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    growth = [int(x) for x in args.growth.split(",") if x.strip()]
    clusters = [tuple(int(v) for v in c.split("x")) for c in args.clusters.split(",") if c.strip()]
    results: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "python": sys.version.split()[0],
    }
    saved, save = results_saver(results, "scale")

    if "files" in parts:
        results["files"] = run_files(args.big)
        save()
    if "growth" in parts:
        results["growth"] = []
        for n in growth:
            results["growth"].append(run_cluster(n, args.growth_rows, args.jobs))
            save()
    if "clusters" in parts:
        results["clusters"] = []
        for n, t in clusters:
            results["clusters"].append(run_cluster(n, t, args.jobs))
            save()
    if "msprof" in parts:
        results["msprof"] = []
        for n, t in clusters:
            results["msprof"].append(run_msprof(n, t, args.msprof_timeout))
            save()
    print(f"\n{results['date']}, commit {results.get('commit', '?')}, {results['cores']} cores; saved in {saved}")
    if "files" in results:
        print_files(results["files"])
    if "growth" in results:
        print_clusters(results["growth"], f"Cluster growth ({args.growth_rows} tasks per rank)")
    if "clusters" in results:
        print_clusters(results["clusters"], "Big clusters")
    if "msprof" in results:
        print_msprof(results["msprof"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
