"""The parallel-training clusters the generator writes (fixtures/parallel_cluster.py).

Truth comes from the files (csv / json modules) and from Megatron's rank formula written out
here, never from the generator's own numbers: the groups, the step identities, the plants'
effects (by the rules of the module docstring) and the command line that writes the same.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import json
import re
import statistics
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

from npuscope.fixtures import generate as gen
from npuscope.fixtures.parallel_cluster import PARALLEL_PROBLEMS, generate_parallel, megatron_groups

STEP_HEADER = [
    "Step",
    "Computing",
    "Communication(Not Overlapped)",
    "Overlapped",
    "Communication",
    "Free",
    "Stage",
    "Bubble",
    "Communication(Not Overlapped and Exclude Receive)",
    "Preparing",
]

# name -> (layout, rules the default problems plant there)
LAYOUTS = {
    "tp1_pp2_dp2": (
        dict(tp=1, pp=2, dp=2, devices=(0, 1, 4, 5)),
        {"stage_imbalance", "slow_rank", "pipeline_bubble"},
    ),
    "tp2_pp2_dp2": (dict(tp=2, pp=2, dp=2), {"stage_imbalance", "slow_rank", "pipeline_bubble"}),
    "pp4": (dict(pp=4), {"stage_imbalance", "pipeline_bubble"}),
    "tp1_pp1_dp4_ep2": (dict(dp=4, ep=2), {"slow_rank", "expert_imbalance"}),
    "tp2_pp2_dp2_ep2": (
        dict(tp=2, pp=2, dp=2, ep=2),
        {"stage_imbalance", "slow_rank", "pipeline_bubble", "expert_imbalance"},
    ),
    "tp2_pp2_dp2_nometa": (dict(tp=2, pp=2, dp=2, metadata=False), {"stage_imbalance", "slow_rank", "pipeline_bubble"}),
    "tp2_cp2_dp2_pp2": (dict(tp=2, cp=2, dp=2, pp=2), {"stage_imbalance", "slow_rank", "pipeline_bubble"}),
}


# --------------------------------------------------------------------------- truth


def coords(r: int, tp: int, cp: int, dp: int) -> tuple[int, int, int, int]:
    """(stage, d, c, t) of rank r: tp fastest, then cp, then dp, then pp."""
    return r // (tp * cp * dp), (r // (tp * cp)) % dp, (r // tp) % cp, r % tp


def expected_groups(tp: int, pp: int, dp: int, cp: int, ep: int) -> dict[str, set[tuple[int, ...]]]:
    """Megatron's groups, by what their ranks share (the coordinates not in the group)."""
    world = tp * pp * dp * cp
    same = {
        "tp": lambda s, d, c, t: (s, d, c),
        "cp": lambda s, d, c, t: (s, d, t),
        "dp": lambda s, d, c, t: (s, c, t),
        "dp_cp": lambda s, d, c, t: (s, t),
        "pp": lambda s, d, c, t: (d, c, t),
        "mp": lambda s, d, c, t: (d, c),
    }
    out: dict[str, set[tuple[int, ...]]] = {}
    for kind, key in same.items():
        by: dict[tuple[int, ...], list[int]] = defaultdict(list)
        for r in range(world):
            by[key(*coords(r, tp, cp, dp))].append(r)
        out[kind] = {tuple(sorted(v)) for v in by.values()}
    out["ep"] = {g[i : i + ep] for g in out["dp_cp"] for i in range(0, len(g), ep)}
    return out


def test_groups_are_megatron_s():
    g = megatron_groups(1, 2, 2, 1, 1)
    assert g["pp"] == ((0, 2), (1, 3)) and g["dp"] == ((0, 1), (2, 3)) and g["tp"] == ((0,), (1,), (2,), (3,))
    g = megatron_groups(2, 2, 2, 1, 1)
    assert g["tp"] == ((0, 1), (2, 3), (4, 5), (6, 7))
    assert g["dp"] == ((0, 2), (1, 3), (4, 6), (5, 7))
    assert g["pp"] == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert g["mp"] == ((0, 1, 4, 5), (2, 3, 6, 7))
    g = megatron_groups(1, 1, 4, 1, 2)
    assert g["ep"] == ((0, 1), (2, 3)) and g["dp_cp"] == ((0, 1, 2, 3),)


# --------------------------------------------------------------------------- reading the files


@dataclass
class Rank:
    rank: int
    steps: list[dict[str, float]]
    kernels: list[dict[str, str]] | None
    comm: dict
    matrix: dict
    meta: dict | None


def read_cluster(root: Path) -> dict[int, Rank]:
    out: dict[int, Rank] = {}
    for folder in sorted(root.glob("rank*_ascend_pt")):
        (info,) = folder.glob("profiler_info_*.json")
        r = json.loads(info.read_text())["rank_id"]
        assert folder.name == f"rank{r}_ascend_pt" and info.name == f"profiler_info_{r}.json"
        o = folder / "ASCEND_PROFILER_OUTPUT"
        raw = (o / "step_trace_time.csv").read_bytes()
        assert raw.endswith(b"\r\n") and b"\n" not in raw.replace(b"\r\n", b"")
        rows = list(csv.DictReader(io.StringIO(raw.decode())))
        assert list(rows[0]) == STEP_HEADER
        steps = [{k: float(v) for k, v in row.items()} for row in rows]
        kernels = None
        if (o / "kernel_details.csv").exists():
            with open(o / "kernel_details.csv", newline="") as fh:
                reader = csv.DictReader(fh)
                kernels = list(reader)
            assert reader.fieldnames[:2] == ["Step Id", "Device_id"]
            assert all(len(k) == len(reader.fieldnames) and None not in k for k in kernels)
        meta_path = folder / "profiler_metadata.json"
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else None
        out[r] = Rank(
            r,
            steps,
            kernels,
            json.loads((o / "communication.json").read_text()),
            json.loads((o / "communication_matrix.json").read_text()),
            meta,
        )
    return out


def step_time(row: dict[str, float]) -> float:
    """A step's time (us): its `Step` column is its number; Stage is this less the Bubble."""
    return row["Computing"] + row["Communication(Not Overlapped)"] + row["Free"]


def ns(text: str) -> int:
    """`1727593954001617.250\t` -> integer ns, exactly (a float keeps 0.25 us of an epoch)."""
    whole, _, frac = text.strip().partition(".")
    return int(whole) * 1000 + int((frac + "000")[:3])


def is_comm(k: dict[str, str]) -> bool:
    return k["Accelerator Core"] == "HCCL"


def per_step(kernels: list[dict[str, str]], keep) -> dict[int, float]:
    out: dict[int, float] = defaultdict(float)
    for k in kernels:
        if keep(k):
            out[int(k["Step Id"])] += float(k["Duration(us)"])
    return out


def ops(rank: Rank, section: str | None = None):
    """(step, task name, group id, info) of every op of communication.json."""
    for step, doc in rank.comm.items():
        for sec, entries in doc.items():
            if section is not None and sec != section:
                continue
            for key, info in entries.items():
                if key != "Total Op Info":
                    name, _, gid = key.partition("@")
                    yield int(step.removeprefix("step")), name, gid, info


# --------------------------------------------------------------------------- the plants' rules


def detect(
    cluster: dict[int, Rank], tp: int, pp: int, dp: int, cp: int, ep: int
) -> set[tuple[str, tuple[str, ...], int]]:
    """What the files show, by the rules of the generator's docstring: a plant holds when it
    holds on every step; a rank or stage is listed if it holds on any step (so both agree)."""
    world = tp * pp * dp * cp
    stage_of = {r: r // (world // pp) for r in range(world)}
    stages = {s: [r for r in range(world) if stage_of[r] == s] for s in range(pp)}
    step_ids = [int(s["Step"]) for s in cluster[0].steps]
    row = {r: {int(s["Step"]): s for s in cluster[r].steps} for r in cluster}
    ep_groups = expected_groups(tp, pp, dp, cp, ep)["ep"]
    gm = {
        r: per_step(c.kernels, lambda k: k["Type"] == "GroupedMatmul")
        for r, c in cluster.items()
        if c.kernels is not None
    }
    hits_all: dict[tuple[str, tuple[str, ...], int], int] = defaultdict(int)
    for n in step_ids:
        comp = {r: row[r][n]["Computing"] for r in range(world)}
        low = {s: statistics.median_low([comp[r] for r in stages[s]]) for s in stages}
        hits = set()
        for s in stages:
            others = [low[o] for o in stages if o != s]
            if others and low[s] >= 1.5 * max(others):
                hits.add(("stage_imbalance", tuple(map(str, stages[s])), s))
            unexplained = [
                (row[r][n]["Bubble"] - (max(low.values()) - low[s])) / step_time(row[r][n]) for r in stages[s]
            ]
            if pp > 1 and min(unexplained) > 0.30:
                hits.add(("pipeline_bubble", tuple(map(str, stages[s])), s))
        for r in range(world):
            peers = [comp[o] for o in stages[stage_of[r]] if o != r]
            if peers and comp[r] >= 1.2 * statistics.median_low(peers):
                hits.add(("slow_rank", (str(r),), stage_of[r]))
        for g in ep_groups:
            full = [r for r in g if r in gm]
            for r in full:
                peers = [gm[o][n] for o in full if o != r]
                if peers and gm[r][n] >= 1.5 * statistics.median_low(peers):
                    hits.add(("expert_imbalance", (str(r),), stage_of[r]))
        for h in hits:
            hits_all[h] += 1
    assert all(v == len(step_ids) for v in hits_all.values()), dict(hits_all)  # every step or none
    return set(hits_all)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    """name -> (kwargs, generated, files) for the default plants and for problems=()."""
    base = tmp_path_factory.mktemp("parallel")
    out = {}
    for name, (kw, _) in LAYOUTS.items():
        for variant, extra in (("planted", {}), ("clean", {"problems": ()})):
            g = generate_parallel(base / f"{name}_{variant}", **kw, **extra)
            out[name, variant] = (kw, g, read_cluster(g.root))
    return out


def sizes(kw: dict) -> tuple[int, int, int, int, int]:
    return tuple(kw.get(k, 1) for k in ("tp", "pp", "dp", "cp", "ep"))


ALL = [(name, variant) for name in LAYOUTS for variant in ("planted", "clean")]


# --------------------------------------------------------------------------- groups and ids


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_groups_and_stages_follow_megatron(clusters, name):
    kw, g, files = clusters[name, "planted"]
    tp, pp, dp, cp, ep = sizes(kw)
    truth = expected_groups(tp, pp, dp, cp, ep)
    assert g.world_size == tp * pp * dp * cp == len(files)
    assert set(g.groups) == set(truth)
    for kind, groups in g.groups.items():
        assert set(groups) == truth[kind], kind
        assert sorted(r for grp in groups for r in grp) == list(range(g.world_size)), kind
    assert g.stage_of == {r: coords(r, tp, cp, dp)[0] for r in range(g.world_size)}
    assert g.device_of == {r: d for r, d in enumerate(kw.get("devices", [r % 8 for r in range(g.world_size)]))}
    for r, c in files.items():
        if c.kernels is not None:
            assert {k["Device_id"] for k in c.kernels} == {str(g.device_of[r])}


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_metadata_lists_each_rank_s_groups(clusters, name):
    kw, g, files = clusters[name, "planted"]
    tp, pp, dp, cp, ep = sizes(kw)
    truth = expected_groups(tp, pp, dp, cp, ep)
    if kw.get("metadata", True) is False:
        assert all(c.meta is None for c in files.values())
        assert not any((g.root / f"rank{r}_ascend_pt" / "profiler_metadata.json").exists() for r in files)
        return
    names: dict[str, tuple[str, tuple[int, ...]]] = {}
    for r, c in files.items():
        args = c.meta["distributed_args"]
        assert args == {
            "tensor_model_parallel_size": tp,
            "pipeline_model_parallel_size": pp,
            "data_parallel_size": dp,
            "context_parallel_size": cp,
            "expert_model_parallel_size": ep,
            "sequence_parallel": False,
            "rank": r,
            "world_size": g.world_size,
        }
        assert all(k.startswith("HCCL_") or k.startswith("PYTORCH_") for k in c.meta["ENV_VARIABLES"])
        info = c.meta["parallel_group_info"]
        kinds = [v["group_name"] for v in info.values()]
        assert len(kinds) == len(set(kinds))
        assert "dp_cp" in kinds and "default_group" in kinds and ("dp" in kinds) == (r % 2 == 0)
        for key, v in info.items():
            ranks = tuple(v["global_ranks"])
            assert key.startswith("group_name_") and int(key.removeprefix("group_name_")) > 10**17
            assert r in ranks and v["group_rank"] == ranks.index(r)
            if v["group_name"] == "default_group":
                assert ranks == tuple(range(g.world_size))
            elif v["group_name"] == "embd":
                assert pp > 1 and ranks in {(p[0], p[-1]) for p in truth["pp"]}
            else:
                assert ranks in truth[v["group_name"]], (r, v)
            assert names.setdefault(key, (v["group_name"], ranks)) == (v["group_name"], ranks)  # one id per group
    assert len({v for v in names.values()}) == len(names)


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_communication_ids_name_one_group_each(clusters, name):
    """Without metadata the groups come from the ids after `@`: each id is used by exactly
    the ranks of one Megatron group, on every one of them, and the task names carry its last
    three digits; with metadata the id is that group's `group_name_<id>`."""
    kw, g, files = clusters[name, "planted"]
    tp, pp, dp, cp, ep = sizes(kw)
    truth = expected_groups(tp, pp, dp, cp, ep)
    users: dict[str, set[int]] = defaultdict(set)
    for r, c in files.items():
        for _, task, gid, _ in ops(c):
            users[gid].add(r)
            assert task.split("__")[1].split("_")[0] == gid[-3:] and task.endswith("_1")
    every = {grp for groups in truth.values() for grp in groups}
    assert all(tuple(sorted(u)) in every for u in users.values()), users
    declared = {}
    for c in files.values():
        for key, v in (c.meta or {}).get("parallel_group_info", {}).items():
            declared[key.removeprefix("group_name_")] = tuple(v["global_ranks"])
    for gid, u in users.items():
        if gid in declared:
            assert declared[gid] == tuple(sorted(u))
        else:  # only a dp group of odd ranks goes undeclared (their metadata lists no dp)
            assert kw.get("metadata", True) is False or all(r % 2 for r in u)
    suffix = [gid[-3:] for gid in users]
    assert len(suffix) == len(set(suffix))
    kinds = {"tp": tp > 1, "pp": pp > 1, "ep": ep > 1, "cp": cp > 1, "dp_cp": dp * cp > 1}
    for kind, used in kinds.items():
        assert any(tuple(sorted(u)) in truth[kind] and len(u) > 1 for u in users.values()) == used, kind


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_links_are_those_of_the_groups(clusters, name):
    kw, g, files = clusters[name, "planted"]
    for r, c in files.items():
        assert set(c.matrix) == set(c.comm)
        for step, doc in c.matrix.items():
            assert set(doc) == {"p2p", "collective"}
            for section, entries in doc.items():
                assert set(entries) == set(c.comm[step][section])
                for key, links in entries.items():
                    for link, v in links.items():
                        src, dst = map(int, link.split("-"))
                        assert v["Transport Type"] in ("LOCAL", "HCCS", "RDMA")
                        assert (v["Transport Type"] == "LOCAL") == (src == dst)
                        if key != "Total Op Info":
                            assert r in (src, dst)
                        assert v["Transit Size(MB)"] > 0 and v["Transit Time(ms)"] > 0
                        assert v["Bandwidth(GB/s)"] == pytest.approx(
                            v["Transit Size(MB)"] / v["Transit Time(ms)"], abs=1e-3
                        )
                    if key.startswith(("hcom_send_", "hcom_receive_")):
                        assert section == "p2p" and len(links) == 2
                    elif key != "Total Op Info":
                        assert section == "collective"


# --------------------------------------------------------------------------- the numbers


@pytest.mark.parametrize("name,variant", ALL)
def test_step_trace_identities(clusters, name, variant):
    kw, g, files = clusters[name, variant]
    n_steps = None
    for c in files.values():
        assert len(c.steps) == g.steps == 2
        n_steps = n_steps or [s["Step"] for s in c.steps]
        assert [s["Step"] for s in c.steps] == n_steps
        for s in c.steps:
            assert s["Step"] in (100, 101)  # the step's number (kernel_details' Step Id)
            assert s["Overlapped"] == 0 and s["Communication"] == s["Communication(Not Overlapped)"]
            assert s["Stage"] == pytest.approx(step_time(s) - s["Bubble"], abs=0.01)
            exclude = s["Communication(Not Overlapped and Exclude Receive)"]
            assert exclude == pytest.approx(s["Communication(Not Overlapped)"] - s["Bubble"], abs=0.01)
            assert min(s.values()) >= 0 and s["Computing"] > 0
            # Bubble = the receives (communication.json, every rank)
            recv = sum(
                info["Communication Time Info"]["Elapse Time(ms)"] * 1000
                for step, task, _, info in ops(c, "p2p")
                if step == s["Step"] and task.startswith("hcom_receive_")
            )
            assert s["Bubble"] == pytest.approx(recv, abs=0.01)
            comm = sum(
                info["Communication Time Info"]["Elapse Time(ms)"] * 1000
                for step, _, _, info in ops(c)
                if step == s["Step"]
            )
            assert s["Communication(Not Overlapped)"] == pytest.approx(comm, abs=0.01)
            assert (s["Bubble"] > 0) == (g.pp > 1)
    # Synchronous training: the same step time on every rank.
    for i in range(2):
        times = [step_time(c.steps[i]) for c in files.values()]
        assert max(times) <= min(times) * 1.001


@pytest.mark.parametrize("name,variant", ALL)
def test_kernel_details_add_up_to_the_step_trace(clusters, name, variant):
    kw, g, files = clusters[name, variant]
    starts = set()
    for r, c in files.items():
        assert (c.kernels is None) == (r in g.partial)
        if c.kernels is None:
            folder = g.root / f"rank{r}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
            assert sorted(p.name for p in folder.iterdir()) == [
                "communication.json",
                "communication_matrix.json",
                "step_trace_time.csv",
            ]
            continue
        assert 50 <= len(c.kernels) / g.steps <= 200
        compute = per_step(c.kernels, lambda k: not is_comm(k))
        comm = per_step(c.kernels, is_comm)
        recv = per_step(c.kernels, lambda k: k["Type"] == "hcom_receive_")
        for s in c.steps:
            n = int(s["Step"])
            assert s["Computing"] == pytest.approx(compute[n], abs=0.01)
            assert s["Communication(Not Overlapped)"] == pytest.approx(comm[n], abs=0.01)
            assert s["Bubble"] == pytest.approx(recv.get(n, 0.0), abs=0.01)
        # One stream, one task after the other: each starts its Wait Time after the last ends.
        for a, b in zip(c.kernels, c.kernels[1:]):
            if a["Step Id"] == b["Step Id"]:
                end = ns(a["Start Time(us)"]) + ns(a["Duration(us)"])
                assert ns(b["Start Time(us)"]) == end + ns(b["Wait Time(us)"])
        assert all(k["Start Time(us)"].endswith("\t") for k in c.kernels)  # as real exports write it
        starts.add(c.kernels[0]["Start Time(us)"])
        hccl = [k for k in c.kernels if is_comm(k)]
        assert all(k["Type"] == k["Name"].split("__")[0] + "_" for k in hccl)
        assert all(k["Task ID"] == "N/A" and k["OP State"] == "N/A" for k in hccl)
        types = {k["Type"] for k in c.kernels}
        assert {"MatMulV2", "FlashAttentionScore", "FlashAttentionScoreGrad"} <= types
        assert ({"GroupedMatmul", "MoeInitRouting", "MoeFinalizeRouting", "hcom_alltoallv_"} <= types) == (g.ep > 1)
        assert ("hcom_allGather_" in types and "hcom_reduceScatter_" in types) == (g.tp > 1 or g.cp > 1)
        assert "hcom_allReduce_" in types
        assert ({"hcom_send_", "hcom_receive_"} <= types) == (g.pp > 1)
    assert len(starts) == 1  # every rank's step starts together


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_balanced_job_shows_no_plant(clusters, name):
    kw, g, files = clusters[name, "clean"]
    assert g.planted == () and g.partial == ()
    tp, pp, dp, cp, ep = sizes(kw)
    assert detect(files, tp, pp, dp, cp, ep) == set()
    for i in range(2):
        comp = {r: c.steps[i]["Computing"] for r, c in files.items()}
        stage_low = [statistics.median_low(v for r, v in comp.items() if g.stage_of[r] == s) for s in range(pp)]
        assert max(stage_low) <= min(stage_low) * 1.02
        for s in range(pp):
            mine = [v for r, v in comp.items() if g.stage_of[r] == s]
            assert max(mine) <= min(mine) * 1.02
        for c in files.values():
            assert c.steps[i]["Bubble"] < 0.05 * step_time(c.steps[i])


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_each_plant_shows_exactly_on_its_ranks(clusters, name):
    kw, g, files = clusters[name, "planted"]
    tp, pp, dp, cp, ep = sizes(kw)
    expected = {(p.rule, p.ranks, p.stage) for p in g.planted}
    assert {p.rule for p in g.planted} == LAYOUTS[name][1]
    assert detect(files, tp, pp, dp, cp, ep) == expected
    assert all(p.rule in PARALLEL_PROBLEMS and p.rule != "partial" for p in g.planted)
    assert g.partial == (tuple(r for r in range(g.world_size) if g.stage_of[r] == pp - 1) if pp > 1 else (2, 3))


def _waits(c: Rank, prefix: str) -> float:
    """us of Wait Time in the ops whose task name starts with `prefix` (every step)."""
    return sum(
        info["Communication Time Info"]["Wait Time(ms)"] * 1000 for _, t, _, info in ops(c) if t.startswith(prefix)
    )


def test_slow_rank_s_peers_wait_in_their_gradient_all_reduce(clusters):
    """The slow rank's dp peers wait what it computes more, exposed, in their gradient
    allReduce (an ep peer of an overloaded expert in its all-to-all instead)."""
    for name in ("tp1_pp2_dp2", "tp2_pp2_dp2", "tp1_pp1_dp4_ep2", "tp2_pp2_dp2_ep2"):
        kw, g, files = clusters[name, "planted"]
        (slow,) = [int(p.ranks[0]) for p in g.planted if p.rule == "slow_rank"]
        expert = [int(p.ranks[0]) for p in g.planted if p.rule == "expert_imbalance"]
        expert_peers = {r for grp in g.groups["ep"] for r in grp if expert and expert[0] in grp} - set(expert)
        (group,) = [grp for grp in g.groups["dp_cp"] if slow in grp]

        def total(r: int, column: str, files: dict[int, Rank] = files) -> float:
            return sum(s[column] for s in files[r].steps)

        for r in group:
            if r == slow:
                continue
            more = total(slow, "Computing") - total(r, "Computing")
            assert more > 0.1 * total(r, "Computing"), (name, r)
            exposed = "Communication(Not Overlapped and Exclude Receive)"
            assert total(r, exposed) - total(slow, exposed) == pytest.approx(more, rel=0.1), (name, r)
            if r not in expert_peers:
                waited = _waits(files[r], "hcom_allReduce_") - _waits(files[slow], "hcom_allReduce_")
                assert waited == pytest.approx(more, rel=0.1), (name, r)


def test_expert_peers_wait_in_the_all_to_all(clusters):
    for name in ("tp1_pp1_dp4_ep2", "tp2_pp2_dp2_ep2"):
        kw, g, files = clusters[name, "planted"]
        (expert,) = [int(p.ranks[0]) for p in g.planted if p.rule == "expert_imbalance"]
        (group,) = [grp for grp in g.groups["ep"] if expert in grp]
        gm = {r: per_step(files[r].kernels, lambda k: k["Type"] == "GroupedMatmul") for r in group}
        extra = sum(gm[expert].values()) - min(sum(v.values()) for v in gm.values())
        assert extra > 0
        for r in group:
            if r != expert:
                waited = _waits(files[r], "hcom_alltoallv_") - _waits(files[expert], "hcom_alltoallv_")
                assert waited >= 0.9 * extra, (name, r)


def test_plants_are_independent(tmp_path):
    """Each plant alone shows alone, and together they show as each does alone."""
    kw = dict(tp=2, pp=2, dp=2, ep=2)
    alone = {}
    for p in ("stage_imbalance", "slow_rank", "pipeline_bubble", "expert_imbalance"):
        g = generate_parallel(tmp_path / p, problems=(p,), **kw)
        found = detect(read_cluster(g.root), 2, 2, 2, 1, 2)
        assert found == {(q.rule, q.ranks, q.stage) for q in g.planted} and {q.rule for q in g.planted} == {p}
        alone[p] = found
    both = generate_parallel(tmp_path / "both", problems=("stage_imbalance", "pipeline_bubble"), **kw)
    assert detect(read_cluster(both.root), 2, 2, 2, 1, 2) == alone["stage_imbalance"] | alone["pipeline_bubble"]
    every = generate_parallel(tmp_path / "every", problems=PARALLEL_PROBLEMS[:4], **kw)
    assert detect(read_cluster(every.root), 2, 2, 2, 1, 2) == set().union(*alone.values())
    assert every.partial == ()


def test_stage_imbalance_light_stages_wait_the_difference(clusters):
    kw, g, files = clusters["pp4", "planted"]
    clean = clusters["pp4", "clean"][2]
    for i in range(2):
        heavy = files[3].steps[i]["Computing"]
        assert heavy >= 1.6 * max(files[r].steps[i]["Computing"] for r in range(3))
        for r in range(3):
            grown = files[r].steps[i]["Bubble"] - clean[r].steps[i]["Bubble"]
            pb = 0.35 * step_time(files[r].steps[i])  # pipeline_bubble's share, on every stage
            assert grown - pb == pytest.approx(heavy - files[r].steps[i]["Computing"], rel=0.03)


# --------------------------------------------------------------------------- arguments


def test_partial_and_devices_arguments(tmp_path):
    g = generate_parallel(tmp_path / "a", tp=1, pp=2, dp=2, problems=(), partial=[1], devices=[0, 1, 0, 1])
    assert g.partial == (1,) and g.planted == ()
    assert not (g.root / "rank1_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").exists()
    assert (g.root / "rank2_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").exists()
    # devices 0,1,0,1: two nodes, so the pp partners (0-2, 1-3) talk over RDMA
    files = read_cluster(g.root)
    transports = {
        link: v["Transport Type"]
        for doc in files[0].matrix.values()
        for key, links in doc["p2p"].items()
        for link, v in links.items()
    }
    assert transports == {"0-0": "LOCAL", "0-2": "RDMA", "2-0": "RDMA"}
    with_partial = generate_parallel(tmp_path / "b", dp=4, problems=("partial",))
    assert with_partial.partial == (2, 3) and with_partial.planted == ()


def test_deterministic(tmp_path):
    def files(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

    a = generate_parallel(tmp_path / "a", tp=2, pp=2, dp=2, ep=2, seed=5)
    b = generate_parallel(tmp_path / "b", tp=2, pp=2, dp=2, ep=2, seed=5)
    c = generate_parallel(tmp_path / "c", tp=2, pp=2, dp=2, ep=2, seed=6)
    assert files(a.root) == files(b.root) and a == dataclasses.replace(b, root=a.root)
    assert files(a.root) != files(c.root)


@pytest.mark.parametrize(
    "kw,why",
    [
        (dict(dp=3, ep=2), "ep=2 must divide dp*cp=3"),
        (dict(tp=0, dp=2), "tp must be an integer >= 1"),
        (dict(), "at least 2 ranks"),
        (dict(dp=2, problems=("stage_imbalance",)), "stage_imbalance needs pp > 1"),
        (dict(dp=2, problems=("expert_imbalance",)), "expert_imbalance needs ep > 1"),
        (dict(pp=2, problems=("slow_rank",)), "slow_rank needs a stage of at least 2 ranks"),
        (dict(dp=2, problems=("nope",)), "unknown problems"),
        (dict(dp=2, ep=2, problems=("expert_imbalance", "slow_rank")), "expert_imbalance needs an ep group"),
        (dict(dp=2, devices=[0]), "devices names 1 device(s) for 2 ranks"),
        (dict(dp=2, partial=[2]), "partial ranks [2]"),
        (dict(dp=2, steps=0), "steps must be"),
    ],
)
def test_invalid_layouts_are_refused(tmp_path, kw, why):
    with pytest.raises(ValueError, match=re.escape(why)):
        generate_parallel(tmp_path, **kw)
    assert not any(tmp_path.iterdir())


# --------------------------------------------------------------------------- command line


def _main(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = gen.main(list(args))
        except SystemExit as e:
            code = int(e.code or 0)
    return code, out.getvalue(), err.getvalue()


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_command_line_writes_what_the_function_does(tmp_path):
    out = tmp_path / "cli"
    res = subprocess.run(
        [sys.executable, "-m", "npuscope.fixtures.generate", str(out), "--ranks", "8", "--tp", "2", "--pp", "2"]
        + ["--dp", "2", "--ep", "2", "--seed", "3"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == str(out)
    g = generate_parallel(tmp_path / "fn", tp=2, pp=2, dp=2, ep=2, seed=3)
    assert _tree(out) == _tree(g.root)
    lines = res.stderr.splitlines()
    for p in g.planted:
        assert any(line.startswith(f"planted {p.rule}: ranks {','.join(p.ranks)} (stage {p.stage})") for line in lines)
    assert "planted partial: ranks 4,5,6,7 (no kernel_details.csv)" in lines
    # The other flags, in process.
    code, stdout, _ = _main(
        str(tmp_path / "cli2"), "--dp", "4", "--partial", "1", "--no-metadata", "--problems", "slow_rank", "--quiet"
    )
    g2 = generate_parallel(tmp_path / "fn2", dp=4, partial=[1], metadata=False, problems=("slow_rank",))
    assert code == 0 and stdout.strip() == str(tmp_path / "cli2") and _tree(tmp_path / "cli2") == _tree(g2.root)
    code, _, _ = _main(str(tmp_path / "cli3"), "--pp", "2", "--dp", "2", "--clean", "--steps", "3", "--quiet")
    g3 = generate_parallel(tmp_path / "fn3", pp=2, dp=2, problems=(), steps=3)
    assert code == 0 and _tree(tmp_path / "cli3") == _tree(g3.root)


def test_command_line_errors_are_one_line(tmp_path):
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "npuscope.fixtures.generate",
            str(tmp_path / "x"),
            "--ranks",
            "5",
            "--pp",
            "2",
            "--dp",
            "2",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and "--ranks 5 must equal tp*pp*dp*cp" in res.stderr
    for args, why in (
        (("--dp", "3", "--ep", "2"), "ep=2 must divide dp*cp=3"),
        (("--dp", "2", "--problems", "expert_imbalance"), "expert_imbalance needs ep > 1"),
        (("--dp", "2", "--partial", "a,b"), "--partial takes comma-separated integers"),
        (("--dp", "2", "--devices", "0"), "devices names 1 device(s) for 2 ranks"),
        (("--dp", "2", "--demo"), "no --demo"),
        (("--cards", "2", "--no-metadata"), "need --tp/--pp/--dp/--cp/--ep"),
    ):
        code, out, err = _main(str(tmp_path / "y"), *args)
        assert code == 2 and out == "" and err.count("\n") == 1 and why in err and "Traceback" not in err, (args, err)
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
