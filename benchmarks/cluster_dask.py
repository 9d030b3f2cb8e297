"""A cluster parsed on Dask workers (a nodes file, capture/dask_engine.py) against the local pool.

    python benchmarks/cluster_dask.py                          # 1,024 ranks; workers 1, 2 and 4
    python benchmarks/cluster_dask.py --ranks 64 --workers 1,2 # a quick look

One generated torch_npu cluster (`python -m npuscope.fixtures.generate OUT --ranks N`, written
once into benchmarks/data/dask/ and kept while the parameters match), reported cold (`report
--format json`, an empty NPUSCOPE_CACHE_DIR per process, passed in the environment; a local
node inherits it) in whole processes timed from outside, as benchmarks/scale.py times them:

  pool      `report FOLDER`: the local process pool (--jobs, default: its own, the cores);
  nodes W   `report NODES.toml`: one node, `host = "local"` (its Dask worker started on this
            machine without SSH), `workers = W`, for each W of --workers.

Each round runs all of them back to back; the ratios to the pool are taken within a round
(medians over --repeat rounds). Peak memory is read from /proc while the process runs (the
main process's VmHWM, the sum of the process tree at its largest sample). Every report's
findings (ranks, slow ranks, slow links, spread) are checked against the pool's.

Then what reaches the head: the pickled size of every RankEntry that NodeEngine.read_ranks
returns (in process, cold), and the reads of a cold `report` run through `npuscope.cli.main`
in a driver process, the nodes file (workers = the largest of --workers) and the pool's
folder, against the bytes of the cluster's files. The cluster's files are dropped from the
page cache before each of these runs, so that a read of them is a disk read. At its end the
driver prints /proc/self/io (read_bytes: disk reads; rchar: every read(2), page cache and
pipes too) and getrusage's block reads of the process itself and of its reaped children: the
kernel adds the I/O of a reaped child to its parent's /proc/PID/io, and a local node's Dask
worker is a descendant of the head (sh, the supervisor, the worker and its nanny's
processes), as the pool's worker processes are. read_bytes of the head itself is getrusage's
RUSAGE_SELF (ru_inblock x 512).

Results are printed as markdown and saved as JSON in benchmarks/results/.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from scale import _check, _fresh_cache, _generate, _size_mb, _slim, measure, npuscope, results_saver  # noqa: E402

DATA = HERE / "data" / "dask"
RANKS = 1024
WORKERS = (1, 2, 4)
TIMEOUT_S = 1800.0

ENTRY_SIZES = """
import json, pickle, sys, time
t0 = time.perf_counter()
from npuscope.capture.dask_engine import NodeEngine
from npuscope.parsers import ReadOptions
from npuscope.parsers.nodes_file import read_nodes_file
t1 = time.perf_counter()
with NodeEngine(read_nodes_file(sys.argv[1])) as engine:
    t2 = time.perf_counter()
    entries = engine.read_ranks(ReadOptions())
    t3 = time.perf_counter()
sizes = [len(pickle.dumps(e)) for e in entries]
print(json.dumps({
    "entries": len(entries),
    "errors": sum(1 for e in entries if e.summary.error),
    "sizes": sizes,
    "imports_s": t1 - t0,
    "start_s": t2 - t1,
    "read_ranks_s": t3 - t2,
}))
"""
IO_DRIVER = """
import resource, sys
from npuscope.cli import main
code = main(sys.argv[1:])
sys.stdout.flush()
with open("/proc/self/io") as fh:
    io = dict(line.split(": ") for line in fh.read().splitlines() if ": " in line)
own = resource.getrusage(resource.RUSAGE_SELF).ru_inblock * 512
reaped = resource.getrusage(resource.RUSAGE_CHILDREN).ru_inblock * 512
print(
    f"npuscope-io read_bytes={io['read_bytes']} rchar={io['rchar']} own_read_bytes={own} reaped_read_bytes={reaped}",
    file=sys.stderr,
    flush=True,
)
sys.exit(code)
"""


# --------------------------------------------------------------------------- data


def cluster(ranks: int) -> Path:
    return _generate(DATA / f"cluster_{ranks}", ["--ranks", str(ranks)])


def _files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and p.name != ".params.json"]


def _warm(folder: Path) -> None:
    """Read every file once: every timed run finds the cluster in the page cache."""
    for p in _files(folder):
        with open(p, "rb") as fh:
            while fh.read(1 << 24):
                pass


def _evict(folder: Path) -> None:
    """Drop the cluster's files from the page cache: the next read of them is a disk read
    (written back first: a dirty page is not dropped)."""
    os.sync()
    for p in _files(folder):
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def source_digest() -> str:
    """A digest of the project's Python sources as they are now (the working tree, not a commit)."""
    h = hashlib.sha256()
    for sub in ("npuscope", "capture", "parsers", "analysis"):
        for p in sorted((ROOT / sub).rglob("*.py")):
            h.update(str(p.relative_to(ROOT)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:12]


def nodes_file(where: Path, folder: Path, workers: int) -> Path:
    path = where / f"nodes_w{workers}.toml"
    path.write_text(
        "[[node]]\n"
        'host = "local"\n'
        f"folders = [{json.dumps(str(folder))}]\n"
        f"python = {json.dumps(sys.executable)}\n"
        f"workers = {workers}\n"
    )
    return path


# --------------------------------------------------------------------------- measuring


def _found(res: dict[str, Any]) -> dict[str, Any] | None:
    """What the report found in the cluster (None when it did not print a cluster report)."""
    try:
        doc = json.loads(res["stdout"])
    except ValueError:
        return None
    c = doc.get("cluster")
    if not isinstance(c, dict):
        return None
    return {
        "ranks": len(c["ranks"]),
        "unreadable": sum(1 for r in c["ranks"] if r.get("error")),
        "slow_ranks": c["slow_ranks"],
        "slow_links": c.get("slow_links", []),
        "spread_pct": c["spread_pct"],
    }


def cold_report(path: Path, tag: str, jobs: int | None, timeout: float) -> dict[str, Any]:
    extra = ["--jobs", str(jobs)] if jobs else []
    cache = _fresh_cache(f"dask-{tag}")
    try:
        print(f"  {tag}: cold report ...", file=sys.stderr, flush=True)
        res = _check(npuscope("report", str(path), "--format", "json", *extra, cache=cache, timeout=timeout), tag)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    print(f"    {res['wall_s']} s", file=sys.stderr, flush=True)
    return {**_slim(res), "found": _found(res)}


def entry_sizes(nodes: Path, timeout: float) -> dict[str, Any]:
    cache = _fresh_cache("dask-entries")
    try:
        print("entry sizes: NodeEngine.read_ranks in process, cold ...", file=sys.stderr, flush=True)
        res = _check(
            measure([sys.executable, "-c", ENTRY_SIZES, str(nodes)], {"NPUSCOPE_CACHE_DIR": str(cache)}, timeout),
            "entry sizes",
        )
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    out: dict[str, Any] = {"run": _slim(res)}
    if res["rc"] == 0:
        doc = json.loads(res["stdout"].strip().splitlines()[-1])
        sizes = doc.pop("sizes")
        out.update(doc)
        out.update(
            mean_bytes=round(statistics.fmean(sizes), 1) if sizes else 0,
            max_bytes=max(sizes, default=0),
            min_bytes=min(sizes, default=0),
            total_bytes=sum(sizes),
        )
    return out


def head_io(path: Path, folder: Path, tag: str, jobs: int | None, timeout: float) -> dict[str, Any]:
    extra = ["--jobs", str(jobs)] if jobs else []
    _evict(folder)
    cache = _fresh_cache(f"dask-io-{tag}")
    try:
        print(f"head io: cold report ({tag}) through cli.main, cluster evicted ...", file=sys.stderr, flush=True)
        res = _check(
            measure(
                [sys.executable, "-c", IO_DRIVER, "report", str(path), "--format", "json", *extra],
                {"NPUSCOPE_CACHE_DIR": str(cache)},
                timeout,
            ),
            f"head io {tag}",
        )
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    out: dict[str, Any] = {"run": _slim(res), "found": _found(res)}
    for line in res["stderr_tail"].splitlines():
        if line.startswith("npuscope-io "):
            out.update({k: int(v) for k, v in (w.split("=") for w in line.split()[1:])})
    return out


# --------------------------------------------------------------------------- output


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def _findings(found: dict[str, Any] | None, base: dict[str, Any] | None) -> str:
    if found is None:
        return "no cluster report"
    what = (
        f"{found['ranks']:,} ranks, slow {','.join(found['slow_ranks']) or '-'}; "
        f"links {','.join(found['slow_links']) or '-'}; spread {found['spread_pct']:.1f}%"
    )
    if found["unreadable"]:
        what += f"; {found['unreadable']} unreadable"
    if base is None or found is base:
        return what
    return "same as the pool" if found == base else f"DIFFERENT: {what}"


def _size(n: float) -> str:
    if n >= 1e6:
        return f"{n / 1e6:,.1f} MB"
    if n >= 1e3:
        return f"{n / 1e3:,.1f} KB"
    return f"{n:,.0f} B"


def print_results(r: dict[str, Any]) -> None:
    def pct(n: float) -> str:
        return f"{_size(n)} = {100 * n / r['data_bytes']:.2f}% of the cluster"

    rounds = r["rounds"]
    labels = ["pool"] + [f"nodes_w{w}" for w in r["workers"]]
    print(
        f"\n### Cold `report --format json`, {r['ranks']:,} ranks ({r['data_mb']:,.0f} MB, {r['files']:,} files), "
        f"{len(rounds)} round(s)\n"
    )
    print("| run | seconds | ratio to the local pool | main / tree peak MB | findings |")
    print("|---|---:|---:|---:|---|")
    base = rounds[0]["pool"].get("found")
    for label in labels:
        runs = [rd[label] for rd in rounds]
        secs = _median([x["wall_s"] for x in runs])
        ratios = [rd[label]["wall_s"] / rd["pool"]["wall_s"] for rd in rounds]
        failed = [x["rc"] for x in runs if x["rc"] != 0]
        if label == "pool":
            what = f"local process pool (`report FOLDER`, --jobs {r['jobs'] or 'default: ' + str(r['cores'])})"
            ratio = "baseline"
        else:
            what = f"nodes file, one local node, workers = {label.split('_w')[1]}"
            ratio = f"{_median(ratios):.2f}x"
        peak = f"{max(x['main_peak_mb'] for x in runs):,.0f} / {max(x['tree_peak_mb'] for x in runs):,.0f}"
        note = _findings(runs[0].get("found"), base if label != "pool" else None)
        if failed:
            note += f" (exit {','.join(map(str, failed))})"
        print(f"| {what} | {secs:.2f} | {ratio} | {peak} | {note} |")
    e, io = r.get("entries", {}), r.get("head_io", {})
    data = r["data_bytes"]
    print(f"\n### Bytes to the head ({r['ranks']:,} ranks, cluster files {_size(data)})\n")
    print("| figure | measured |")
    print("|---|---:|")
    if "total_bytes" in e:
        print(
            f"| pickled RankEntry per rank (NodeEngine.read_ranks, workers = {r['entry_workers']}), mean / max "
            f"| {_size(e['mean_bytes'])} / {_size(e['max_bytes'])} |"
        )
        print(
            f"| pickled RankEntries, total ({e['entries']:,} entries, {e['errors']} errors) | {pct(e['total_bytes'])} |"
        )
        print(f"| read_ranks in process (engine started in {e['start_s']:.1f} s) | {e['read_ranks_s']:.1f} s |")
    else:
        print(f"| pickled RankEntry sizes | failed (exit {e.get('run', {}).get('rc')}) |")
    w = r["entry_workers"]
    for key, what in (("nodes", f"`report NODES.toml`, workers = {w}"), ("pool", "`report FOLDER`, local pool")):
        run = io.get(key, {})
        if "read_bytes" not in run:
            print(f"| {what}: reads | failed (exit {run.get('run', {}).get('rc')}) |")
            continue
        print(f"| {what}, cold, cluster evicted: head's own read_bytes (RUSAGE_SELF) | {pct(run['own_read_bytes'])} |")
        print(f"| same run: its reaped children's read_bytes (RUSAGE_CHILDREN) | {pct(run['reaped_read_bytes'])} |")
        print(
            f"| same run: /proc/self/io read_bytes at the end (itself + reaped children) | {pct(run['read_bytes'])} |"
        )
        print(f"| same run: /proc/self/io rchar (itself + reaped children) | {pct(run['rchar'])} |")
        print(
            f"| same run: whole process, findings | {run['run']['wall_s']:.2f} s, {_findings(run.get('found'), base)} |"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=RANKS, help=f"ranks of the generated cluster (default {RANKS})")
    ap.add_argument(
        "--workers", default=",".join(map(str, WORKERS)), help="comma-separated `workers` of the local node"
    )
    ap.add_argument("--repeat", type=int, default=1, help="rounds of the timed reports (default 1)")
    ap.add_argument("--jobs", type=int, default=None, help="the pool's report --jobs (default: its own, the cores)")
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds before one process is stopped")
    args = ap.parse_args()
    workers = [int(w) for w in args.workers.split(",") if w.strip()]
    results: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "python": sys.version.split()[0],
        "load_at_start": os.getloadavg(),
        "sources_at_start": source_digest(),
        "ranks": args.ranks,
        "workers": workers,
        "jobs": args.jobs,
        "entry_workers": max(workers),
        "rounds": [],
    }
    saved, save = results_saver(results, "cluster_dask")

    folder = cluster(args.ranks)
    files = _files(folder)
    results.update(
        files=len(files), data_bytes=sum(p.stat().st_size for p in files), data_mb=round(_size_mb(folder), 1)
    )
    where = Path(tempfile.mkdtemp(prefix="npuscope-dask-nodes-"))
    try:
        nodes = {w: nodes_file(where, folder, w) for w in workers}
        _warm(folder)
        for i in range(args.repeat):
            print(f"round {i + 1}/{args.repeat}, {args.ranks:,} ranks:", file=sys.stderr, flush=True)
            rd = {"pool": cold_report(folder, "pool", args.jobs, args.timeout)}
            for w in workers:
                rd[f"nodes_w{w}"] = cold_report(nodes[w], f"nodes_w{w}", None, args.timeout)
            results["rounds"].append(rd)
            save()
        results["entries"] = entry_sizes(nodes[max(workers)], args.timeout)
        save()
        results["head_io"] = {"nodes": head_io(nodes[max(workers)], folder, "nodes", None, args.timeout)}
        save()
        results["head_io"]["pool"] = head_io(folder, folder, "pool", args.jobs, args.timeout)
        save()
    finally:
        shutil.rmtree(where, ignore_errors=True)
    results["load_at_end"] = os.getloadavg()
    results["sources_at_end"] = source_digest()
    save()
    load = (
        "/".join(f"{x:.1f}" for x in results["load_at_start"])
        + " -> "
        + "/".join(f"{x:.1f}" for x in results["load_at_end"])
    )
    print(
        f"\n{results['date']}, commit {results.get('commit', '?')} (sources {results['sources_at_start']}), "
        f"{results['cores']} cores, load {load}; saved in {saved}"
    )
    if results["sources_at_end"] != results["sources_at_start"]:
        print("\nthe sources changed during the run: its figures mix two versions", file=sys.stderr)
    print_results(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
