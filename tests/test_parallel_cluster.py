"""Parallel training read right: every rank listed (partial ones too), figures per step from
each rank's own files, the TP / PP / DP / EP layout, ranks judged against their stage's peers,
stage imbalance, pipeline bubbles and expert imbalance named exactly on generated clusters of
several layouts (fixtures/parallel_cluster.py), none on a balanced job. Truth is read from
the files with csv / json / sqlite3."""

from __future__ import annotations

import csv
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from npuscope.analysis.cluster import cluster_json, open_cluster
from npuscope.fixtures.parallel_cluster import generate_parallel
from npuscope.parsers import FrameCache

REPO = Path(__file__).resolve().parent.parent
REAL = REPO / "fixtures" / "samples" / "real"
LAYOUTS = {  # name -> generate_parallel sizes
    "tp1pp2dp2": {"tp": 1, "pp": 2, "dp": 2},
    "tp2pp2dp2": {"tp": 2, "pp": 2, "dp": 2},
    "pp4": {"tp": 1, "pp": 4, "dp": 1},
    "dp4ep2": {"tp": 1, "pp": 1, "dp": 4, "ep": 2},
}
PARALLEL_RULES = {"stage_imbalance", "pipeline_bubble", "slow_rank", "expert_imbalance"}


def _summary(root: Path):
    return open_cluster(root, jobs=1, cache=FrameCache(enabled=False))


def _found(doc: dict) -> set[tuple[str, tuple[str, ...], int | None]]:
    out = set()
    for f in doc["findings"]:
        stages = f["stages"]
        out.add((f["rule"], tuple(f["ranks"]), stages[0] if len(stages) == 1 else None))
    return out


def _planted(gen) -> set[tuple[str, tuple[str, ...], int | None]]:
    return {(p.rule, tuple(p.ranks), p.stage) for p in gen.planted}


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _rank_dir(root: Path, rank: int) -> Path:
    (info,) = root.glob(f"*/profiler_info_{rank}.json")
    return info.parent


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    """Each layout with every plant (and its default partial ranks), and balanced."""
    out = {}
    for name, sizes in LAYOUTS.items():
        base = tmp_path_factory.mktemp(name)
        out[name] = generate_parallel(base / "planted", **sizes)
        out[name + "-clean"] = generate_parallel(base / "clean", **sizes, problems=())
    base = tmp_path_factory.mktemp("nometa")
    out["tp1pp2dp2-nometa"] = generate_parallel(base / "g", tp=1, pp=2, dp=2, metadata=False)
    out["tp1pp2dp2-whole"] = generate_parallel(base / "whole", tp=1, pp=2, dp=2, partial=())
    return out


@pytest.mark.parametrize("name", [*LAYOUTS, "tp1pp2dp2-nometa", "tp1pp2dp2-whole"])
def test_every_plant_named_exactly(clusters, name):
    gen = clusters[name]
    summary = _summary(gen.root)
    doc = cluster_json(summary)
    assert _found(doc) == _planted(gen)
    assert [r["rank"] for r in doc["ranks"]] == [str(i) for i in range(gen.world_size)]
    # A stage's imbalance is the stage's finding, never a slow rank of the heavy stage.
    heavy = {r for p in gen.planted if p.rule == "stage_imbalance" for r in p.ranks}
    assert not heavy & set(summary.slow_ranks)
    for f in doc["findings"]:
        assert f["severity"] in ("warning", "critical") and f["advice"] and f["time_us"] > 0
        if f["rule"] == "stage_imbalance":
            assert f"stage {f['stages'][0]}" in f["title"]


@pytest.mark.parametrize("name", LAYOUTS)
def test_balanced_job_fires_nothing(clusters, name):
    gen = clusters[name + "-clean"]
    assert gen.planted == ()
    doc = cluster_json(_summary(gen.root))
    fired = {f["rule"] for f in doc["findings"] if f["severity"] in ("warning", "critical")}
    assert not fired & PARALLEL_RULES, doc["findings"]
    assert doc["slow_ranks"] == []


@pytest.mark.parametrize("name", ["tp1pp2dp2", "tp2pp2dp2", "pp4", "dp4ep2", "tp1pp2dp2-nometa"])
def test_rank_and_stage_figures_equal_the_files(clusters, name):
    gen = clusters[name]
    doc = cluster_json(_summary(gen.root))
    by_rank = {r["rank"]: r for r in doc["ranks"]}
    per_stage: dict[int, list[dict[str, float]]] = {}
    for rank in range(gen.world_size):
        folder = _rank_dir(gen.root, rank)
        rows = _csv(folder / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv")
        mean = {k: statistics.fmean(float(x[k]) for x in rows) for k in rows[0] if k != "Step"}
        got = by_rank[str(rank)]
        assert got["steps"] == len(rows) == gen.steps
        assert got["compute_us"] == pytest.approx(mean["Computing"], abs=0.01)
        assert got["exposed_comm_us"] == pytest.approx(mean["Communication(Not Overlapped)"], abs=0.01)
        assert got["free_us"] == pytest.approx(mean["Free"], abs=0.01)
        assert got["bubble_us"] == pytest.approx(mean["Bubble"], abs=0.01)
        assert got["step_us"] == pytest.approx(got["compute_us"] + got["exposed_comm_us"] + got["free_us"], abs=0.1)
        assert got["stage"] == gen.stage_of[rank]
        partial = rank in gen.partial
        assert got["missing"] == (["kernel_details.csv"] if partial else [])
        assert (got["tasks"] == 0) == partial and (got["wait_us"] is None) == partial
        if not partial:
            with open(folder / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", newline="") as fh:
                kernels = list(csv.DictReader(fh))
            assert got["tasks"] == len(kernels)
        per_stage.setdefault(gen.stage_of[rank], []).append(mean)
    stages = doc["parallel"]["stages"]
    assert [s["stage"] for s in stages] == sorted(per_stage)
    for s in stages:
        means = per_stage[s["stage"]]
        assert s["ranks"] == [str(r) for r in range(gen.world_size) if gen.stage_of[r] == s["stage"]]
        assert s["compute_us"] == pytest.approx(statistics.fmean(m["Computing"] for m in means), abs=0.01)
        assert s["bubble_us"] == pytest.approx(statistics.fmean(m["Bubble"] for m in means), abs=0.01)
        step = statistics.fmean(m["Computing"] + m["Communication(Not Overlapped)"] + m["Free"] for m in means)
        assert s["step_us"] == pytest.approx(step, abs=0.1)


@pytest.mark.parametrize("name", LAYOUTS)
def test_layout_equals_the_metadata(clusters, name):
    gen = clusters[name]
    par = cluster_json(_summary(gen.root))["parallel"]
    assert par["source"] == "profiler_metadata"
    assert par["world_size"] == gen.world_size
    assert (par["tp"], par["pp"], par["dp"], par["cp"], par["ep"]) == (gen.tp, gen.pp, gen.dp, gen.cp, gen.ep)
    declared: dict[str, set[tuple[int, ...]]] = {}
    for rank in range(gen.world_size):
        meta = json.loads((_rank_dir(gen.root, rank) / "profiler_metadata.json").read_text())
        for info in meta["parallel_group_info"].values():
            declared.setdefault(info["group_name"], set()).add(tuple(sorted(info["global_ranks"])))
    got: dict[str, set[tuple[int, ...]]] = {}
    for g in par["groups"]:
        got.setdefault(g["name"], set()).add(tuple(g["ranks"]))
    for group, ranks in declared.items():
        assert ranks <= got[group]
    # Complete where some ranks' metadata leaves a group out (dp on odd ranks): every rank in
    # exactly one group of each Megatron kind.
    for kind in ("tp", "pp", "dp"):
        assert got[kind] == set(gen.groups[kind]), kind
        members = sorted(r for g in got[kind] for r in g)
        assert members == list(range(gen.world_size)), kind


def test_inferred_layout_says_so(clusters):
    gen = clusters["tp1pp2dp2-nometa"]
    par = cluster_json(_summary(gen.root))["parallel"]
    assert par["source"] == "inferred"
    pp = {tuple(g["ranks"]) for g in par["groups"] if g["name"] == "pp"}
    assert pp == set(gen.groups["pp"])
    assert any("inferred" in n for n in par["notes"])


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME", "/tmp")}
    return subprocess.run(
        [sys.executable, "-m", "npuscope", *args], capture_output=True, text=True, env=env, timeout=300
    )


def test_report_json_contract_and_text(clusters, tmp_path):
    gen = clusters["tp1pp2dp2"]
    res = _run("report", str(gen.root), "--format", "json", "--card", "all", "--no-cache", "--jobs", "1")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    cluster = doc["cluster"]
    for r in cluster["ranks"]:
        assert {"rank", "stage", "missing", "step_us", "compute_us", "exposed_comm_us", "free_us"} <= set(r)
    assert set(cluster["parallel"]) >= {"tp", "pp", "dp", "cp", "ep", "world_size", "source", "groups", "stages"}
    assert {c["rank"] for c in doc["cards"]} == {"0", "1"}  # the partial ranks have no operators to show
    assert _found(cluster) == _planted(gen)
    text = _run("report", str(gen.root), "--no-cache", "--jobs", "1")
    assert text.returncode == 0, text.stderr
    assert "Parallel layout" in text.stdout and "no kernel_details.csv" in text.stdout
    assert "stage_imbalance (stage 1)" in text.stdout
    shown = _run("inspect", str(gen.root), "--no-cache")
    assert shown.returncode == 0, shown.stderr
    assert "parallel  tp 1, pp 2, dp 2, cp 1, ep 1; world size 4; declared in profiler_metadata.json" in shown.stdout
    # A partial rank opened alone: one line saying what it is, no traceback.
    alone = _run("report", str(_rank_dir(gen.root, 2)), "--no-cache")
    assert alone.returncode != 0
    assert "training-level files only" in alone.stderr and "Traceback" not in alone.stderr
    assert len(alone.stderr.strip().splitlines()) == 1


def test_real_capture_with_a_partial_rank(tmp_path):
    """The real 2024 CNN capture with rank 1's tasks and timeline removed (as in a real
    4-rank capture whose two rank folders hold step_trace_time.csv, communication*.json and
    metadata only): both ranks listed, rank 1's figures from its own step_trace_time.csv."""
    root = tmp_path / "cnn"
    shutil.copytree(REAL / "torch_npu_2024_cnn" / "level1", root)
    out = root / "rank1_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    keep = {"step_trace_time.csv", "communication.json", "communication_matrix.json"}
    for p in out.iterdir():
        if p.name not in keep:
            p.unlink()
    summary = _summary(root)
    doc = cluster_json(summary)
    assert [r["rank"] for r in doc["ranks"]] == ["0", "1"]
    r1 = doc["ranks"][1]
    assert r1["missing"] == ["kernel_details.csv", "trace_view.json"]
    assert r1["tasks"] == 0 and r1["error"] is None
    rows = _csv(out / "step_trace_time.csv")
    assert r1["compute_us"] == pytest.approx(statistics.fmean(float(x["Computing"]) for x in rows), abs=0.01)
    assert r1["free_us"] == pytest.approx(statistics.fmean(float(x["Free"]) for x in rows), abs=0.01)
    assert doc["parallel"]["source"] == "inferred"


def test_db_meta_data_declares_the_layout(tmp_path):
    """torch_npu's db export carries profiler_metadata.json's objects as META_DATA rows: a
    copy of the real 2025 db capture given them reads its layout from there (source db)."""
    root = tmp_path / "db"
    shutil.copytree(REAL / "torch_npu_2025_db" / "level1", root)
    groups = {"group_name_1": {"group_name": "dp", "group_rank": 0, "global_ranks": [0, 1]}}
    args = {
        "tensor_model_parallel_size": 1,
        "pipeline_model_parallel_size": 1,
        "data_parallel_size": 2,
        "context_parallel_size": 1,
        "expert_model_parallel_size": 1,
        "rank": 0,
        "world_size": 2,
    }
    for rank in (0, 1):
        (db,) = (root / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT").glob("ascend_pytorch_profiler_*.db")
        con = sqlite3.connect(db)
        try:
            con.execute(
                "INSERT INTO META_DATA (name, value) VALUES (?, ?)", ("parallel_group_info", json.dumps(groups))
            )
            con.execute(
                "INSERT INTO META_DATA (name, value) VALUES (?, ?)",
                ("distributed_args", json.dumps({**args, "rank": rank})),
            )
            con.commit()
        finally:
            con.close()
    par = cluster_json(_summary(root))["parallel"]
    assert par["source"] == "db"
    assert (par["tp"], par["pp"], par["dp"], par["world_size"]) == (1, 1, 2, 2)
    assert {"name": "dp", "ranks": [0, 1]} in par["groups"]


def test_real_gpt3_pipeline_peers_inferred():
    """The real 2023 GPT-3 capture (2 ranks of a bigger Megatron job, no metadata): its P2P
    sends go over the world communicator (the same group id carries an allGather of 9 ranks),
    from rank 0 to 8 and from rank 1 to 9 (communication_matrix.json): the pipeline groups
    are those peers, and both ranks of the folder are in stage 0."""
    root = REAL / "torch_npu_2023_gpt3_2rank"
    peers = set()
    for rank in (0, 1):
        matrix = json.loads(
            (root / f"test_rank_{rank}" / "ASCEND_PROFILER_OUTPUT" / "communication_matrix.json").read_text()
        )
        for step in matrix.values():
            for op, links in step["p2p"].items():
                if op != "Total Op Info":
                    peers |= {
                        tuple(sorted(int(x) for x in link.split("-")))
                        for link in links
                        if link.split("-")[0] != link.split("-")[1]
                    }
    assert peers == {(0, 8), (1, 9)}
    doc = cluster_json(_summary(root))
    par = doc["parallel"]
    assert par["source"] == "inferred"
    assert [g["ranks"] for g in par["groups"] if g["name"] == "pp"] == [list(p) for p in sorted(peers)]
    assert [r["stage"] for r in doc["ranks"]] == [0, 0]
    assert [s["stage"] for s in par["stages"]] == [0]
    assert not {f["rule"] for f in doc["findings"]} & {"stage_imbalance", "pipeline_bubble"}
