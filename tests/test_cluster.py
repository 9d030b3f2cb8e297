"""A cluster (a folder of rank folders) opens rank by rank: the planted slow rank and slow link
are found, each rank's figures match its files, a damaged rank is marked and the rest opens, a
cached reopen reads only the summary rows, nothing is written into the profile folder, and the
parent's peak memory does not grow with the number of ranks.

Generated clusters (fixtures/generate.py, torch_npu: one `*_ascend_pt` folder per rank, text
or db export; 8 and 64 ranks of each) with a planted slow rank and slow link; truth from the
files with csv / json / sqlite3 only.
"""

from __future__ import annotations

import csv
import json
import multiprocessing
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import threading
from collections import defaultdict
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from npuscope.analysis.cluster import cluster_json, open_cluster, open_rank, rank_folders, summarize
from npuscope.analysis.thresholds import Thresholds
from npuscope.fixtures.generate import generate
from npuscope.parsers import Cancelled, FrameCache, ProfileError, ReadOptions
from npuscope.parsers import cluster as parsers_cluster

TH = Thresholds()
REAL_2RANK = Path(__file__).parent.parent / "fixtures" / "samples" / "real" / "torch_npu_2023_gpt3_2rank"


def _generate(root: Path, cards: int, db: bool | str):
    return generate(
        root,
        layout="torch_npu",
        cards=cards,
        problems=("slow_rank", "slow_link"),
        training=True,
        db=db,
        timeline=False,
        steps=2,
        ops_per_step=60,
    )


@pytest.fixture(scope="module")
def text8(tmp_path_factory):
    return _generate(tmp_path_factory.mktemp("text8"), 8, False)


@pytest.fixture(scope="module")
def db8(tmp_path_factory):
    return _generate(tmp_path_factory.mktemp("db8"), 8, "only")


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


def _planted(gen, rule: str) -> str:
    (card,) = [p.card for p in gen.planted if p.rule == rule]
    return card


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


# --------------------------------------------------------------------------- truth from the files


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _text_truth(folder: Path) -> dict[str, float]:
    """compute / communication / wait (us) and tasks of one torch_npu rank's kernel_details.csv."""
    # A row with fewer fields than the header is damaged (the real GPT-3 capture has one).
    rows = [r for r in _csv(folder / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv") if None not in r.values()]
    comm = [r for r in rows if r["Accelerator Core"] in ("COMMUNICATION", "HCCL") or r["Name"].startswith("hcom_")]
    comp = [r for r in rows if r not in comm]
    return {
        "compute_us": sum(float(r["Duration(us)"]) for r in comp),
        "communication_us": sum(float(r["Duration(us)"]) for r in comm),
        "wait_us": sum(float(r["Wait Time(us)"]) for r in rows),
        "tasks": len(rows),
    }


def _db_truth(folder: Path) -> dict[str, float]:
    """The same figures from a rank's ascend_pytorch_profiler_<rank>.db."""
    (path,) = folder.glob("ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_*.db")
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        comp = con.execute(
            "SELECT count(*), sum(t.endNs - t.startNs) FROM TASK t "
            "JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId"
        ).fetchone()
        comm = con.execute("SELECT count(*), sum(endNs - startNs) FROM COMMUNICATION_OP").fetchone()
        (steps,) = con.execute("SELECT count(*) FROM STEP_TIME").fetchone()
    finally:
        con.close()
    return {
        "compute_us": comp[1] / 1000,
        "communication_us": comm[1] / 1000,
        "tasks": comp[0] + comm[0],
        "steps": steps,
    }


def _slow_link_truth(root: Path) -> list[str]:
    """Links of every rank's communication_matrix.json (per-op entries summed over steps) below
    slow_link_pct of their transport's median bandwidth, as "src->dst transport"."""
    links: dict[tuple[str, int, int, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for path in sorted(root.glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/communication_matrix.json")):
        for step in json.loads(path.read_text()).values():
            for op, per_link in step["collective"].items():
                if op == "Total Op Info":
                    continue
                for name, v in per_link.items():
                    src, dst = (int(x) for x in name.split("-"))
                    acc = links[(str(path), src, dst, v["Transport Type"])]
                    acc[0] += v["Transit Size(MB)"]
                    acc[1] += v["Transit Time(ms)"]
    bandwidth = {k: size / ms for k, (size, ms) in links.items() if ms > 0 and size >= TH.small_packet_mb}
    median = {t: statistics.median(b for k, b in bandwidth.items() if k[3] == t) for t in {k[3] for k in bandwidth}}
    return sorted(f"{s}->{d} {t}" for (_, s, d, t), b in bandwidth.items() if b < TH.slow_link_pct / 100 * median[t])


# --------------------------------------------------------------------------- the tests


def test_rank_folders(text8, db8, tmp_path):
    for gen in (text8, db8):
        ranks = rank_folders(gen.root)
        assert ranks is not None
        assert [r for r, _ in ranks] == [str(i) for i in range(8)]
        for rank, folder in ranks:
            assert folder.name.endswith("_ascend_pt")
            assert (folder / f"profiler_info_{rank}.json").is_file()
    # One rank, or one capture: not a cluster.
    one = rank_folders(rank_folders(text8.root)[0][1])
    assert one is None
    with pytest.raises(ProfileError):
        rank_folders(tmp_path / "missing")


@pytest.mark.parametrize("which", ["text", "db"])
def test_planted_slow_rank_and_link(which, text8, db8, cache_root):
    gen = text8 if which == "text" else db8
    before = _snapshot(gen.root)
    summary = open_cluster(gen.root, jobs=2 if which == "text" else 1, cache=FrameCache(cache_root / which))
    assert _snapshot(gen.root) == before  # nothing written into the profile folder
    assert [r.rank for r in summary.ranks] == [str(i) for i in range(8)]
    assert all(r.error is None for r in summary.ranks)
    assert summary.slow_ranks == (_planted(gen, "slow_rank"),)
    slow_link_rank = int(_planted(gen, "slow_link"))
    assert summary.slow_links == (f"{slow_link_rank}->{slow_link_rank + 1} HCCS",)
    if which == "text":
        assert list(summary.slow_links) == _slow_link_truth(gen.root)
    assert summary.spread_pct > TH.slow_rank_pct
    rules = sorted((f.rule, f.card) for f in summary.findings)
    assert rules == sorted([("slow_rank", _planted(gen, "slow_rank")), ("slow_link", str(slow_link_rank))])
    # The slow rank's compute is the largest of every op type it shares with the others.
    top = summary.op_type_slowest.filter(pl.col("ranks") == 8)
    assert top.height > 3 and set(top["rank"].to_list()) == {_planted(gen, "slow_rank")}
    doc = cluster_json(summary)
    assert doc["slow_ranks"] == [_planted(gen, "slow_rank")] and doc["spread_pct"] == summary.spread_pct
    assert {"rank", "step_us", "compute_us", "communication_us", "free_us", "wait_us", "tasks"} <= set(doc["ranks"][0])
    json.dumps(doc)


@pytest.mark.parametrize("which", ["text", "db"])
def test_rank_figures_match_files(which, text8, db8):
    gen = text8 if which == "text" else db8
    summary = open_cluster(gen.root, jobs=1, cache=FrameCache(enabled=False))
    for r in summary.ranks:
        truth = _text_truth(r.folder) if which == "text" else _db_truth(r.folder)
        assert r.tasks == truth["tasks"]
        assert r.step_us is not None and r.step_us > 0
        # Every figure is a mean per step; the parts add up to the step.
        assert r.step_us == pytest.approx(r.compute_us + r.exposed_comm_us + r.free_us, abs=0.1)
        if which == "text":
            rows = _csv(r.folder / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv")
            assert r.steps == len(rows)
            mean = {k: statistics.fmean(float(x[k]) for x in rows) for k in rows[0] if k != "Step"}
            assert r.compute_us == pytest.approx(mean["Computing"], abs=0.01)
            assert r.communication_us == pytest.approx(mean["Communication"], abs=0.01)
            assert r.exposed_comm_us == pytest.approx(mean["Communication(Not Overlapped)"], abs=0.01)
            assert r.free_us == pytest.approx(mean["Free"], abs=0.01)
            assert r.step_us == pytest.approx(mean["Stage"] + mean["Bubble"], abs=0.01)
            assert r.wait_us == pytest.approx(truth["wait_us"] / len(rows), abs=0.01)
            # The generated kernels never overlap: Computing is their sum.
            assert r.compute_us == pytest.approx(truth["compute_us"] / len(rows), abs=0.01)
        else:
            assert r.steps == truth["steps"]
            assert r.compute_us == pytest.approx(truth["compute_us"] / truth["steps"], abs=0.01)
            assert r.communication_us == pytest.approx(truth["communication_us"] / truth["steps"], abs=0.01)


def test_real_two_rank_capture():
    summary = open_cluster(REAL_2RANK, jobs=1, cache=FrameCache(enabled=False))
    assert [(r.rank, r.folder.name) for r in summary.ranks] == [("0", "test_rank_0"), ("1", "test_rank_1")]
    for r in summary.ranks:
        truth = _text_truth(r.folder)
        assert (r.tasks, r.error) == (truth["tasks"], None)
        # One source per figure: step_trace_time.csv's columns (us), means per step (this
        # sample's kernel_details.csv holds only some of the step's kernels).
        rows = _csv(r.folder / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv")
        mean = {k: statistics.fmean(float(x[k]) for x in rows) for k in rows[0] if k != "Step"}
        assert r.steps == len(rows)
        assert r.compute_us == pytest.approx(mean["Computing"], abs=0.01)
        assert r.communication_us == pytest.approx(mean["Communication"], abs=0.01)
        assert r.exposed_comm_us == pytest.approx(mean["Communication(Not Overlapped)"], abs=0.01)
        assert r.free_us == pytest.approx(mean["Free"], abs=0.01)
        assert r.step_us == pytest.approx(r.compute_us + r.exposed_comm_us + r.free_us, abs=0.1)
        assert r.wait_us == pytest.approx(truth["wait_us"] / len(rows), abs=0.01)


def test_real_db_two_rank_capture():
    """The real 2025 torch_npu db capture (level1: two ranks, ascend_pytorch_profiler_<rank>.db
    and analysis.db each): figures per rank from sqlite3."""
    level1 = REAL_2RANK.parent / "torch_npu_2025_db" / "level1"
    summary = open_cluster(level1, jobs=1, cache=FrameCache(enabled=False))
    assert [(r.rank, r.folder.name, r.error) for r in summary.ranks] == [
        ("0", "rank0_ascend_pt", None),
        ("1", "rank1_ascend_pt", None),
    ]
    for r in summary.ranks:
        truth = _db_truth(r.folder)
        assert r.tasks == truth["tasks"]
        # Means per step of analysis.db's StepTraceTime (us), one row per step.
        db = r.folder / "ASCEND_PROFILER_OUTPUT" / "analysis.db"
        con = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
        try:
            rows = con.execute(
                "SELECT computing, communication_not_overlapped, free, communication FROM StepTraceTime"
            ).fetchall()
        finally:
            con.close()
        assert r.steps == len(rows)
        compute, exposed, free, comm = (statistics.fmean(x[i] for x in rows) for i in range(4))
        assert (r.compute_us, r.exposed_comm_us, r.free_us, r.communication_us) == pytest.approx(
            (compute, exposed, free, comm), abs=0.01
        )
        assert r.step_us == pytest.approx(compute + exposed + free, abs=0.1)


def test_runs_side_by_side_are_not_one_cluster():
    """The real CNN capture holds one 2-rank run per profiler level (level0/, level1/): rank ids
    0 and 1 twice. The folder of both is not a cluster (the ranks of one job never repeat an
    id); each level's folder is."""
    cnn = REAL_2RANK.parent / "torch_npu_2024_cnn"
    assert rank_folders(cnn) is None
    for level in ("level0", "level1"):
        ranks = rank_folders(cnn / level)
        assert ranks is not None
        assert [(r, f.name) for r, f in ranks] == [("0", "rank0_ascend_pt"), ("1", "rank1_ascend_pt")]


def test_damaged_rank_is_marked(text8, tmp_path):
    root = tmp_path / "damaged"
    shutil.copytree(text8.root, root)
    ranks = rank_folders(root)
    assert ranks is not None
    bad = ranks[3][1] / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    bad.write_bytes(b"\x00\x01garbage\xff\n" * 3)
    # Rank 5: one row cut short (fewer fields than the header) is skipped with a note.
    short = ranks[5][1] / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    lines = short.read_bytes().splitlines(keepends=True)
    lines[10] = b",".join(lines[10].rstrip(b"\r\n").split(b",")[:-2]) + b"\n"
    short.write_bytes(b"".join(lines))
    summary = open_cluster(root, jobs=1, cache=FrameCache(enabled=False))
    errors = {r.rank: r.error for r in summary.ranks if r.error}
    assert list(errors) == ["3"]
    assert "\n" not in errors["3"] and "Traceback" not in errors["3"]
    assert sum(r.error is None for r in summary.ranks) == 7
    assert summary.slow_ranks == (_planted(text8, "slow_rank"),)
    assert any("1 of 8 ranks could not be read" in n for n in summary.notes)
    assert summary.rank("5").tasks == len(_csv(short)) - 1 == _text_truth(ranks[5][1])["tasks"]
    assert any(n.startswith("1 rank(s) read with damaged rows") and "rank 5:" in n for n in summary.notes)


def test_cached_reopen_reads_only_summary_rows(text8, tmp_path, monkeypatch):
    cache_dir = tmp_path / "cache"
    first = open_cluster(text8.root, jobs=1, cache=FrameCache(cache_dir))
    entries = list((cache_dir).rglob("*.parquet"))
    assert len(entries) > 8  # the ranks' frames and their summary rows

    def no_parse(*args, **kwargs):
        raise AssertionError("a rank was parsed again")

    monkeypatch.setattr(parsers_cluster, "open_profile", no_parse)
    cache = FrameCache(cache_dir)
    # The ranks found already (as the report finds them) are taken as they are.
    again = open_cluster(text8.root, jobs=1, cache=cache, ranks=rank_folders(text8.root))
    assert cache.hits == 1 and cache.misses == 0  # one small entry: every rank's summary rows
    assert again.ranks == first.ranks
    assert_frame_equal(again.frame(), first.frame())
    assert_frame_equal(again.op_type_slowest, first.op_type_slowest)
    assert (again.slow_ranks, again.slow_links, again.spread_pct) == (
        first.slow_ranks,
        first.slow_links,
        first.spread_pct,
    )
    assert [f.to_dict() for f in again.findings] == [f.to_dict() for f in first.findings]
    monkeypatch.undo()
    # One rank changed (its mtime, put back after): it is parsed again, the others come from
    # their own entries.
    ranks = rank_folders(text8.root)
    changed = ranks[5][1] / "ASCEND_PROFILER_OUTPUT" / "communication.json"
    st = changed.stat()
    os.utime(changed, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    try:
        cache = FrameCache(cache_dir)
        third = open_cluster(text8.root, jobs=1, cache=cache)
    finally:
        os.utime(changed, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert cache.hits == 7
    assert third.ranks == first.ranks and third.slow_links == first.slow_links
    # Opening one rank reads its frames from the entries its parse left.
    rank_cache = FrameCache(cache_dir)
    profile = open_rank(again, _planted(text8, "slow_rank"), cache=rank_cache)
    assert profile.cards == (_planted(text8, "slow_rank"),)
    assert rank_cache.hits > 0 and rank_cache.misses == 0
    assert profile.tasks.height == again.rank(_planted(text8, "slow_rank")).tasks


def test_progress_and_cancel(text8):
    seen: list[tuple[int, int, str]] = []
    summary = open_cluster(
        text8.root, jobs=1, cache=FrameCache(enabled=False), progress=lambda d, t, s: seen.append((d, t, s))
    )
    total = sum(f.stat().st_size for _, folder in rank_folders(text8.root) for f in folder.rglob("*.*") if f.is_file())
    assert seen[0][0] == 0 and seen[-1][0] == seen[-1][1] > 0
    assert seen[-1][1] == total  # every file of the rank folders
    assert [d for d, _, _ in seen] == sorted(d for d, _, _ in seen)
    assert seen[-1][2].startswith("rank 8/8")
    assert len(summary.ranks) == 8

    cancel = threading.Event()

    def stop_after_two(done: int, total: int, label: str) -> None:
        if label.startswith("rank 2/"):
            cancel.set()

    with pytest.raises(Cancelled):
        open_cluster(text8.root, jobs=1, cache=FrameCache(enabled=False), progress=stop_after_two, cancel=cancel)


def test_worker_killed_mid_cluster(text8, monkeypatch):
    """A worker process that dies (here killed with SIGKILL once five ranks are in; in the
    field: out of memory) breaks the pool: its ranks are parsed again one at a time and the
    rest in a new pool, so every rank still opens. ~4 s: it starts three worker processes."""
    killed: list[int] = []

    def kill_a_worker(done: int, total: int, label: str) -> None:
        if label.startswith("rank 5/") and not killed:
            workers = [p for p in multiprocessing.active_children() if p.pid is not None]
            assert workers
            killed.append(workers[0].pid)
            os.kill(workers[0].pid, signal.SIGKILL)

    alone: list[int] = []
    one_by_one = parsers_cluster._one_by_one

    def recorded(ranks, todo, *args):
        alone.extend(todo)
        return one_by_one(ranks, todo, *args)

    monkeypatch.setattr(parsers_cluster, "_one_by_one", recorded)
    summary = open_cluster(text8.root, jobs=2, cache=FrameCache(enabled=False), progress=kill_a_worker)
    assert killed and alone  # the pool broke, and the ranks in flight were parsed again alone
    assert [r.error for r in summary.ranks] == [None] * 8
    assert summary.slow_ranks == (_planted(text8, "slow_rank"),)


def test_summarize_of_entries_is_order_free(text8):
    ranks = rank_folders(text8.root)
    assert ranks is not None
    entries = [parsers_cluster.parse_rank(folder, None, ReadOptions(), rank) for rank, folder in ranks]
    a = summarize(entries, TH)
    b = summarize(list(reversed(entries)), TH)
    assert (a.slow_ranks, a.slow_links, a.spread_pct) == (b.slow_ranks, b.slow_links, b.spread_pct)
    # Thresholds are those of the rules: a spread threshold above the spread finds no slow rank.
    assert summarize(entries, Thresholds(slow_rank_pct=a.spread_pct + 1)).slow_ranks == ()


def test_msprof_device_folders_are_ranks(tmp_path):
    """msprof Era A: a device_N folder per card; with one PROF per node the device numbers
    repeat, and ranks are numbered in folder order. An Era B merged export (every card in one
    file set) is one capture, not a cluster."""
    gen = generate(
        tmp_path / "era_a",
        layout="era_a",
        cards=8,
        problems=("slow_rank",),
        training=True,
        timeline=False,
        steps=2,
        ops_per_step=60,
    )
    ranks = rank_folders(gen.root)
    assert ranks is not None and [(r, f.name) for r, f in ranks] == [(str(i), f"device_{i}") for i in range(8)]
    summary = open_cluster(gen.root, jobs=1, cache=FrameCache(enabled=False))
    assert summary.slow_ranks == (_planted(gen, "slow_rank"),)
    for r in summary.ranks:
        (path,) = r.folder.glob("summary/op_summary_*.csv")
        rows = _csv(path)
        assert r.tasks == len(rows)
        assert r.steps == 2  # the figures are means per step (the generated kernels never overlap)
        assert r.compute_us == pytest.approx(
            sum(float(x["Task Duration(us)"]) for x in rows if x["Task Type"] not in ("COMMUNICATION", "HCCL")) / 2,
            abs=0.01,
        )
    nodes = tmp_path / "nodes"
    for node in ("PROF_000001_20240605100000123_NODEAAAAAAAAAAAA", "PROF_000001_20240605100000456_NODEBBBBBBBBBBBB"):
        generate(nodes, layout="era_a", cards=2, problems=(), timeline=False, steps=2, ops_per_step=60, prof_name=node)
    ranks = rank_folders(nodes)
    assert ranks is not None
    assert [(r, f.parent.name[-4:], f.name) for r, f in ranks] == [
        ("0", "AAAA", "device_0"),
        ("1", "AAAA", "device_1"),
        ("2", "BBBB", "device_0"),
        ("3", "BBBB", "device_1"),
    ]
    era_b = generate(tmp_path / "era_b", layout="era_b", cards=4, problems=(), timeline=False, steps=2, ops_per_step=60)
    assert rank_folders(era_b.root) is None


def test_paddle_rank_folders(tmp_path):
    """Paddle traces in rank_N folders (as `npuscope capture` lays them out) are ranks."""
    (trace,) = (Path(__file__).parent.parent / "fixtures" / "samples" / "paddle_cpu").glob("*.paddle_trace.json")
    for n in (0, 1):
        (tmp_path / "host" / f"rank_{n}").mkdir(parents=True)
        shutil.copy(trace, tmp_path / "host" / f"rank_{n}" / trace.name)
    ranks = rank_folders(tmp_path)
    assert ranks is not None and [f.name for _, f in ranks] == ["rank_0", "rank_1"]
    summary = open_cluster(tmp_path, jobs=1, cache=FrameCache(enabled=False))
    assert [r.error for r in summary.ranks] == [None, None]
    assert summary.ranks[0].tasks == summary.ranks[1].tasks > 0
    assert summary.slow_ranks == ()


def test_not_a_cluster(text8):
    one = rank_folders(text8.root)[0][1]
    with pytest.raises(ProfileError, match="not a cluster"):
        open_cluster(one, jobs=1, cache=FrameCache(enabled=False))


_RSS = """
import json, resource, sys
def main():
    from npuscope.analysis.cluster import open_cluster
    from npuscope.parsers import FrameCache
    out = []
    for path in sys.argv[1:]:
        s = open_cluster(path, jobs=2, cache=FrameCache(enabled=False))
        out.append({"ranks": len(s.ranks), "slow_ranks": list(s.slow_ranks), "slow_links": list(s.slow_links),
                    "errors": sum(r.error is not None for r in s.ranks),
                    "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})
    print(json.dumps(out))
if __name__ == "__main__":
    main()
"""


@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss in KB is Linux's")
def test_64_ranks_and_parent_memory(text8, tmp_path):
    """64 ranks: the planted slow rank and link are found, and the parent's peak RSS after
    opening them is within 25 MB of its peak after 8 (the summary of 56 more ranks is a few
    hundred KB; holding their tasks, as one profile of the whole folder does, adds ~90 MB at
    800 tasks a rank, measured here: this cluster has 120). ~9 s: 72 ranks parsed in spawned
    workers, the cheapest 64-rank case."""
    gen64 = _generate(tmp_path / "c64", 64, False)
    script = tmp_path / "rss.py"
    script.write_text(_RSS)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    got = subprocess.run(
        [sys.executable, str(script), str(text8.root), str(gen64.root)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=True,
    )
    eight, sixty_four = json.loads(got.stdout.strip().splitlines()[-1])
    assert (eight["ranks"], sixty_four["ranks"]) == (8, 64)
    assert eight["errors"] == sixty_four["errors"] == 0
    assert sixty_four["slow_ranks"] == [_planted(gen64, "slow_rank")]
    link = int(_planted(gen64, "slow_link"))
    assert sixty_four["slow_links"] == [f"{link}->{link + 1} HCCS"]
    assert sixty_four["peak_mb"] - eight["peak_mb"] < 25, (eight, sixty_four)


def test_64_db_ranks_planted_slow_rank_and_link(tmp_path):
    """The db layout at 64 ranks (ascend_pytorch_profiler_<rank>.db only): the planted slow
    rank and link are found. Parsed in this process (jobs=1): ~7 s of CPU with the data's
    generation, the cheapest 64-rank db case."""
    gen = _generate(tmp_path / "db64", 64, "only")
    assert not list(gen.root.rglob("*.csv"))  # the db export is all there is
    summary = open_cluster(gen.root, jobs=1, cache=FrameCache(enabled=False))
    assert len(summary.ranks) == 64 and not any(r.error for r in summary.ranks)
    assert summary.slow_ranks == (_planted(gen, "slow_rank"),)
    link = int(_planted(gen, "slow_link"))
    assert summary.slow_links == (f"{link}->{link + 1} HCCS",)


def _entry(rank: str, layout: str, compute_us: float):
    from npuscope.parsers.cluster import RANK_STEPS_SCHEMA, RankEntry, RankSummary

    steps = pl.DataFrame(
        [
            {"card": rank, "step": s, "step_us": compute_us + 10.0, "compute_us": compute_us,
             "communication_us": 0.0, "comm_not_overlapped_us": 0.0, "free_us": 10.0}
            for s in (1, 2)
        ],
        schema=RANK_STEPS_SCHEMA,
    )  # fmt: skip
    summary = RankSummary(rank, Path(rank), compute_us + 10.0, compute_us, 0.0, 0.0, 10.0, 0.0, 2, steps=2)
    return RankEntry(summary, steps=steps, layout=layout)


@pytest.mark.parametrize(
    ("layout", "words", "never"),
    [("torch_npu", ("npu-smi",), ()), ("paddle", (), ("npu-smi", "HCCL", "hccn_tool", "NPU"))],
)
def test_slow_rank_advice_names_the_device_tools_only_on_an_npu(layout, words, never):
    """A Paddle trace may come from a CPU or GPU: the rank entries do not say which, so the
    advice of a Paddle cluster names no NPU tool; an NPU export's advice does."""
    summary = summarize([_entry("0", layout, 100.0), _entry("1", layout, 300.0)])
    (finding,) = [f for f in summary.findings if f.rule == "slow_rank"]
    assert all(w in finding.advice for w in words)
    assert not any(w in finding.advice for w in never)
