"""`npuscope report` on a cluster, against generated 8-rank clusters (text and db layouts).

The clusters are written by the generator's CLI (`--ranks 8`): rank 0 planted slow, the link
1 -> 2 planted slow. The report is run as a user runs it (a subprocess); the per-rank figures
are checked against the files read with csv and sqlite3, never with npuscope. One cluster per
layout for the module, each report run once (memoised).
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

RANKS = 8
ROWS = 540  # 2 full steps and a partial one of 200 ops: a few rows per rank keep it cheap


def _run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env={**os.environ, **env}, timeout=300
    )


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cluster_report")


@pytest.fixture(scope="module")
def env(base) -> dict[str, str]:
    return {"NPUSCOPE_CACHE_DIR": str(base / "cache")}


@pytest.fixture(scope="module")
def clusters(base, env) -> dict[str, Path]:
    """layout -> cluster root, written by `python -m npuscope.fixtures.generate --ranks`."""
    out = {}
    for layout, extra in (("text", ()), ("db", ("--db-only",))):
        root = base / layout
        res = _run(
            "-m",
            "npuscope.fixtures.generate",
            str(root),
            "--ranks",
            str(RANKS),
            "--rows",
            str(ROWS),
            "--no-timeline",
            "--jobs",
            "1",
            *extra,
            env=env,
        )
        assert res.returncode == 0, res.stderr
        assert res.stdout.strip() == str(root)
        assert "planted slow_rank:  on card 0" in res.stderr and "planted slow_link:  on card 1" in res.stderr
        out[layout] = root
    return out


_RUNS: dict[tuple[str, ...], subprocess.CompletedProcess[str]] = {}


@pytest.fixture(scope="module")
def report(clusters, env):
    """report(layout, *args): `npuscope report CLUSTER *args --jobs 1`, run once per args."""

    def run(layout: str, *args: str) -> subprocess.CompletedProcess[str]:
        key = (str(clusters[layout]), *args)
        if key not in _RUNS:
            _RUNS[key] = _run("-m", "npuscope", "report", str(clusters[layout]), "--jobs", "1", *args, env=env)
        return _RUNS[key]

    return run


def _rank_folder(root: Path, rank: int) -> Path:
    (info,) = root.glob(f"*/profiler_info_{rank}.json")
    return info.parent / "ASCEND_PROFILER_OUTPUT"


def _truth_text(root: Path, rank: int) -> tuple[int, float]:
    """(tasks, compute us per step) of a rank: its kernel_details.csv rows, and the mean of
    step_trace_time.csv's Computing (the steps the file holds: the complete ones)."""
    with open(_rank_folder(root, rank) / "kernel_details.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    with open(_rank_folder(root, rank) / "step_trace_time.csv", newline="") as fh:
        steps = list(csv.DictReader(fh))
    return len(rows), sum(float(s["Computing"]) for s in steps) / len(steps)


def _truth_db(root: Path, rank: int) -> tuple[int, float]:
    """(tasks, compute us per step) of a rank from its db: compute tasks plus collectives,
    the compute over the steps of STEP_TIME (the generated kernels never overlap)."""
    (db,) = _rank_folder(root, rank).glob("ascend_pytorch_profiler_*.db")
    con = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    try:
        n, ns = con.execute(
            "SELECT count(*), sum(t.endNs - t.startNs) FROM TASK t "
            "JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId"
        ).fetchone()
        (comm,) = con.execute("SELECT count(*) FROM COMMUNICATION_OP").fetchone()
        (steps,) = con.execute("SELECT count(*) FROM STEP_TIME").fetchone()
    finally:
        con.close()
    return n + comm, ns / 1000 / steps


TRUTH = {"text": _truth_text, "db": _truth_db}


def _check_cluster(cluster: dict, root: Path, layout: str) -> None:
    assert [r["rank"] for r in cluster["ranks"]] == [str(i) for i in range(RANKS)]
    assert cluster["slow_ranks"] == ["0"]
    assert cluster["slow_links"] == ["1->2 HCCS"]
    assert cluster["spread_pct"] > 5.0  # the slow rank's 1.5x compute, far above the threshold
    by_rank = {r["rank"]: r for r in cluster["ranks"]}
    for rank in (0, 5):  # the slow rank and a clean one
        tasks, compute = TRUTH[layout](root, rank)
        got = by_rank[str(rank)]
        assert got["tasks"] == tasks
        assert got["steps"] > 0
        assert got["compute_us"] == pytest.approx(compute, abs=1e-3)
        assert got["step_us"] == pytest.approx(got["compute_us"] + got["exposed_comm_us"] + got["free_us"], abs=0.1)
        assert got["error"] is None
    for r in cluster["ranks"]:
        assert set(r) >= {"rank", "step_us", "compute_us", "communication_us", "free_us", "wait_us", "tasks"}


def test_generator_writes_one_folder_per_rank(clusters):
    for layout, root in clusters.items():
        folders = sorted(root.glob("*_ascend_pt"))
        assert len(folders) == RANKS, layout
        ranks = sorted(int(p.stem.rsplit("_", 1)[1]) for p in root.glob("*/profiler_info_*.json"))
        assert ranks == list(range(RANKS))
        if layout == "db":
            assert not list(root.glob("*/ASCEND_PROFILER_OUTPUT/kernel_details.csv"))
            assert len(list(root.glob("*/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_*.db"))) == RANKS
        else:
            assert len(list(root.glob("*/ASCEND_PROFILER_OUTPUT/communication_matrix.json"))) == RANKS


def test_db_json_names_the_slow_rank_and_link_and_details_the_slowest(report, clusters):
    res = report("db", "--format", "json")
    assert res.returncode == 0, res.stderr
    doc = orjson.loads(res.stdout)
    _check_cluster(doc["cluster"], clusters["db"], "db")
    assert doc["schema"] == "npuscope.report/1"
    assert doc["rank"] == "0"  # the slowest rank's own report follows the cluster
    assert [c["card"] for c in doc["cards"]] == ["0"]
    assert "slow_rank" in {f["rule"] for f in doc["cards"][0]["findings"]}


def test_text_json_with_every_rank(report, clusters):
    res = report("text", "--format", "json", "--card", "all", "--top", "2")
    assert res.returncode == 0, res.stderr
    doc = orjson.loads(res.stdout)
    _check_cluster(doc["cluster"], clusters["text"], "text")
    assert [(c["rank"], c["card"]) for c in doc["cards"]] == [(str(i), str(i)) for i in range(RANKS)]
    rules = {c["rank"]: {f["rule"] for f in c["findings"]} for c in doc["cards"]}
    assert "slow_rank" in rules["0"] and "slow_link" in rules["1"]
    assert not any("slow_rank" in rules[str(i)] for i in range(1, RANKS))
    for c in doc["cards"]:  # each rank's own totals, as the cluster table gives them
        mine = next(r for r in doc["cluster"]["ranks"] if r["rank"] == c["rank"])
        assert c["summary"]["tasks"] == mine["tasks"]
    assert doc["source"]["ranks"] == [str(i) for i in range(RANKS)]


def test_text_and_markdown_have_the_cluster_section(report):
    for layout, fmt in (("text", "text"), ("db", "markdown")):
        res = report(layout, "--format", fmt, "--top", "3")
        assert res.returncode == 0, res.stderr
        lines = res.stdout.splitlines()
        md = fmt == "markdown"
        for heading in ("## Ranks", "### Cluster findings", "### Slowest rank per op type", "## rank 0 (the slowest)"):
            assert (heading if md else _text_heading(heading)) in lines, (fmt, heading)
        assert "slow ranks: 0; spread" in res.stdout and "slow links: 1->2 HCCS" in res.stdout
        table = lines[lines.index("## Ranks" if md else "== ranks ==") + 1]
        for column in ("Rank", "Step(us)", "Compute(us)", "Exposed comm(us)", "Free(us)", "Wait(us)", "Tasks"):
            assert column in table
        # The slowest rank's usual report follows the section.
        assert lines.index("Findings (by time at stake)" if not md else "### Findings") > lines.index(
            "## rank 0 (the slowest)" if md else "== rank 0 (the slowest) =="
        )


def _text_heading(md: str) -> str:
    if md.startswith("### "):
        return md[4:]
    name = md[3:]
    return "== ranks ==" if name == "Ranks" else f"== {name} =="


def test_damaged_rank_is_marked_and_the_report_exits_0(clusters, env, tmp_path):
    """Three runs (JSON, text, --strict) on four of the ranks, rank 3 damaged (~5 s)."""
    root = tmp_path / "damaged"
    for rank in range(4):
        folder = _rank_folder(clusters["text"], rank).parent
        shutil.copytree(folder, root / folder.name)
    (_rank_folder(root, 3) / "kernel_details.csv").write_text("garbage,\n1,2\n")
    res = _run("-m", "npuscope", "report", str(root), "--format", "json", "--jobs", "1", "--top", "2", env=env)
    assert res.returncode == 0, res.stderr
    doc = orjson.loads(res.stdout)
    ranks = {r["rank"]: r for r in doc["cluster"]["ranks"]}
    assert "kernel_details.csv" in ranks["3"]["error"] and "\n" not in ranks["3"]["error"]
    assert sorted(ranks) == ["0", "1", "2", "3"]
    assert all(ranks[str(i)]["error"] is None for i in range(3))
    assert doc["cluster"]["slow_ranks"] == ["0"] and doc["rank"] == "0"
    text = _run("-m", "npuscope", "report", str(root), "--jobs", "1", "--top", "2", env=env)
    assert text.returncode == 0, text.stderr
    row = next(line for line in text.stdout.splitlines() if line.startswith("3 "))
    assert "UNREADABLE" in row
    assert f"rank 3: {ranks['3']['error']}" in text.stdout
    strict = _run("-m", "npuscope", "report", str(root), "--jobs", "1", "--strict", env=env)
    assert strict.returncode == 2 and "rank 3" in strict.stderr and "Traceback" not in strict.stderr
    assert strict.stderr.count("\n") == 1
    # A rank chosen with --card: its report, or one line and exit 2 (in process: cheap).
    code, out, err = _in_process("report", str(root), "--card", "1", "--top", "1")
    assert code == 0 and "== rank 1 (chosen) ==" in out.splitlines(), err
    for card, why in (("3", "rank 3 could not be read"), ("9", "no rank '9'")):
        code, out, err = _in_process("report", str(root), "--card", card)
        assert code == 2 and why in err and out == "", (card, err)


def _in_process(*args: str) -> tuple[int, str, str]:
    from npuscope.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*args, "--jobs", "1"])
    return code, out.getvalue(), err.getvalue()
