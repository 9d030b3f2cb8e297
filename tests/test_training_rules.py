"""The training-level rules: each fires just above its threshold and not just below (hand-built
views, thresholds from a --rules TOML honoured), their numbers on the real captures match a
stdlib computation from the files, and a clean generated profile raises none of them."""

from __future__ import annotations

import csv
import dataclasses
import json
import re
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import orjson
import polars as pl
import pytest

from npuscope.analysis import Diagnosis, Finding, Thresholds, diagnose
from npuscope.analysis.findings import order
from npuscope.analysis.training_rules import SYNC_API, TRAINING_RULES, training_findings
from npuscope.fixtures.generate import generate
from npuscope.parsers import FrameCache, open_profile
from npuscope.parsers.training import SCHEMAS, TrainingViews, empty_views, read_training_views

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "samples" / "real"
GPT3 = REAL / "torch_npu_2023_gpt3_2rank"
CNN = REAL / "torch_npu_2024_cnn" / "level1"
DB2025 = REAL / "torch_npu_2025_db" / "level1"


# --------------------------------------------------------------------------- hand-built views


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> tuple[object, Diagnosis]:
    """A real, clean two-card profile and its diagnosis: the rules read its cards, its
    framework and its tasks' wait causes (none blamed), the views are built by hand."""
    g = generate(tmp_path_factory.mktemp("clean"), layout="era_b", cards=2, problems=())
    profile = open_profile(g.root, cache=FrameCache(enabled=False))
    return profile, diagnose(profile)


def frame(view: str, rows: list[dict]) -> pl.DataFrame:
    schema = SCHEMAS[view]
    return pl.DataFrame([{k: r.get(k, "hand" if k == "source" else None) for k in schema} for r in rows], schema=schema)


def views(**frames: list[dict]) -> TrainingViews:
    return dataclasses.replace(empty_views(), **{v: frame(v, rows) for v, rows in frames.items()})


def step(card: str, compute: float, not_overlapped: float = 0.0, free: float = 0.0, n: int | None = 1) -> dict:
    return {
        "card": card,
        "step": n,
        "step_us": compute + not_overlapped + free,
        "compute_us": compute,
        "communication_us": not_overlapped,
        "comm_not_overlapped_us": not_overlapped,
        "overlapped_us": 0.0,
        "free_us": free,
    }


def comm_not_overlapped_views(pct: float) -> TrainingViews:
    # Two steps of 1000 us on card 0; card 1 hides all of its communication.
    return views(steps=[step("0", 1000 - 10 * pct, 10 * pct, n=i) for i in (1, 2)] + [step("1", 1000.0)])


def free_views(pct: float) -> TrainingViews:
    return views(steps=[step("0", 1000 - 10 * pct, free=10 * pct, n=i) for i in (1, 2)] + [step("1", 1000.0)])


def sync_views(pct: float) -> TrainingViews:
    # 10 ms of steps; the AscendCL calls hold pct of it, the runtime calls under them less
    # (never added to them), and an asynchronous copy is no synchronisation.
    t = 100.0 * pct
    api = [
        {"card": "0", "api": "aclrtSynchronizeStream", "level": "AscendCL", "count": 3, "total_us": 0.6 * t},
        {"card": "0", "api": "aclrtMemcpy", "level": "AscendCL", "count": 2, "total_us": 0.4 * t},
        {"card": "0", "api": "rtStreamSynchronize", "level": "Runtime", "count": 3, "total_us": 0.5 * t},
        {"card": "0", "api": "aclrtMemcpyAsync", "level": "AscendCL", "count": 50, "total_us": 5000.0},
        {"card": "1", "api": "aclrtMemcpyAsync", "level": "AscendCL", "count": 50, "total_us": 5000.0},
    ]
    return views(steps=[step("0", 10_000.0), step("1", 10_000.0)], host_api=api)


def slow_rank_views(pct: float) -> TrainingViews:
    # Card 0 computes d us more than cards 1 and 2: d / mean step time = pct.
    d = 10.0 * pct / (1 - pct / 300.0)
    return views(steps=[step("0", 1000.0 + d), step("1", 1000.0), step("2", 1000.0)])


def slow_link_views(pct: float) -> TrainingViews:
    # HCCS links at 20 GB/s; card 0's link to rank 4 at pct% of that median. A LOCAL copy and a
    # tiny transfer (latency, not bandwidth) are slower still and never count.
    def link(card, src, dst, bw, size=100.0, transport="HCCS"):
        return {
            "card": card,
            "group": "g",
            "src": src,
            "dst": dst,
            "transport": transport,
            "size_mb": size,
            "time_us": size / bw * 1000.0,
            "bandwidth_gbps": bw,
        }

    rows = [link("0", 0, d, 20.0) for d in (1, 2, 3)] + [link("1", 1, d, 20.0) for d in (0, 2, 3, 4)]
    rows += [
        link("0", 0, 4, 20.0 * pct / 100.0),
        link("0", 0, 0, 0.5, transport="LOCAL"),
        link("1", 1, 5, 0.07, 0.0001),
    ]
    return views(links=rows)


def small_packet_views(pct: float) -> TrainingViews:
    # 1000 us of communication on card 0: ten 0.5 MB calls take pct% of it; a call that moved
    # nothing (no transit size) is not small.
    comm = [
        {"card": "0", "op_type": "allReduce", "op_name": "small", "count": 10, "total_us": 10.0 * pct, "size_mb": 5.0},
        {
            "card": "0",
            "op_type": "allReduce",
            "op_name": "big",
            "count": 1,
            "total_us": 950 - 10.0 * pct,
            "size_mb": 200.0,
        },
        {"card": "0", "op_type": "broadcast", "op_name": "empty", "count": 1, "total_us": 50.0, "size_mb": 0.0},
        {"card": "1", "op_type": "allReduce", "op_name": "big", "count": 1, "total_us": 1000.0, "size_mb": 200.0},
    ]
    return views(communication=comm)


def memory_views(pct: float) -> TrainingViews:
    # Card 1 has no capacity: however high its peak, the rule cannot say.
    return views(
        memory=[
            {"card": "0", "peak_allocated_mb": 1000.0, "peak_reserved_mb": 655.36 * pct, "capacity_mb": 65536.0},
            {"card": "1", "peak_allocated_mb": 1000.0, "peak_reserved_mb": 10**9, "capacity_mb": None},
        ]
    )


# rule -> (threshold, views with card 0's metric at the given value, fires below the threshold?)
CASES: dict[str, tuple[str, Callable[[float], TrainingViews], bool]] = {
    "comm_not_overlapped": ("comm_not_overlapped_pct", comm_not_overlapped_views, False),
    "free_time": ("free_pct", free_views, False),
    "sync_heavy": ("sync_pct", sync_views, False),
    "slow_rank": ("slow_rank_pct", slow_rank_views, False),
    "slow_link": ("slow_link_pct", slow_link_views, True),
    "small_packets": ("small_packet_pct", small_packet_views, False),
    "memory_peak": ("memory_peak_pct", memory_views, False),
}


def test_every_rule_has_a_case():
    assert set(CASES) == set(TRAINING_RULES)


def _fired(base, v: TrainingViews, rule: str, th: Thresholds | None = None) -> list[Finding]:
    profile, diagnosis = base
    return [f for f in training_findings(profile, diagnosis, v, th) if f.rule == rule]


@pytest.mark.parametrize("rule", sorted(CASES))
def test_fires_just_past_the_threshold_and_not_just_short(base, rule):
    name, make, below = CASES[rule]
    limit = getattr(Thresholds(), name)
    past, short = (limit * 0.99, limit * 1.01) if below else (limit * 1.01, limit * 0.99)
    (f,) = _fired(base, make(past), rule)
    assert f.card == "0" and f.severity == "warning"
    assert _fired(base, make(short), rule) == []


@pytest.mark.parametrize("rule", sorted(CASES))
def test_thresholds_from_a_rules_file(base, rule, tmp_path):
    name, make, below = CASES[rule]
    limit = getattr(Thresholds(), name)
    moved = limit * (0.5 if below else 2.0)
    path = tmp_path / "rules.toml"
    path.write_text(f"[thresholds]\n{name} = {moved}\n")
    th = Thresholds.load(path)
    past_default = limit * (0.99 if below else 1.01)
    assert _fired(base, make(past_default), rule) != []
    assert _fired(base, make(past_default), rule, th) == []
    (f,) = _fired(base, make(moved * (0.99 if below else 1.01)), rule, th)
    assert f"{moved:g}" in f.threshold


@pytest.mark.parametrize("rule", sorted(CASES))
def test_findings_carry_view_rows(base, rule):
    name, make, below = CASES[rule]
    limit = getattr(Thresholds(), name)
    v = make(limit * (0.5 if below else 3.0))
    (f,) = _fired(base, v, rule)
    assert f.view in ("steps", "communication", "links", "host_api", "memory")
    assert 0 < len(f.evidence) <= Thresholds().evidence_rows
    columns = list(getattr(v, f.view).columns)
    assert all(list(row) == columns for row in f.evidence)
    assert f.op_types == ()  # a view finding is about no op type: compare matches it by rule and card
    assert f.advice and f.title and f.threshold
    data = orjson.loads(orjson.dumps(f.to_dict()))
    assert data["view"] == f.view
    assert Finding.from_dict(data) == f


def test_numbers_of_each_rule(base):
    th = Thresholds()
    (f,) = _fired(base, comm_not_overlapped_views(30.0), "comm_not_overlapped")
    assert (f.time_us, f.share_pct, f.count) == (pytest.approx(600.0), pytest.approx(30.0), 2)
    (f,) = _fired(base, free_views(30.0), "free_time")
    assert (f.time_us, f.share_pct) == (pytest.approx(600.0), pytest.approx(30.0))
    (f,) = _fired(base, sync_views(30.0), "sync_heavy")
    assert (f.time_us, f.share_pct, f.count) == (pytest.approx(3000.0), pytest.approx(30.0), 8)
    assert [r["api"] for r in f.evidence] == ["aclrtSynchronizeStream", "rtStreamSynchronize", "aclrtMemcpy"]
    (f,) = _fired(base, slow_rank_views(30.0), "slow_rank")
    d = 300.0 / 0.9
    assert f.time_us == pytest.approx(d)  # the excess over the median card, one step
    assert "most compute" in f.title
    (f,) = _fired(base, slow_link_views(25.0), "slow_link")
    assert f.time_us == pytest.approx(100 / 5.0 * 1000 - 100 / 20.0 * 1000)  # beyond the median's time
    assert [(r["src"], r["dst"]) for r in f.evidence] == [(0, 4)]
    (f,) = _fired(base, small_packet_views(30.0), "small_packets")
    assert (f.time_us, f.share_pct, f.count, f.op_names) == (pytest.approx(300.0), pytest.approx(30.0), 10, ("small",))
    (f,) = _fired(base, memory_views(95.0), "memory_peak")
    assert (f.time_us, f.share_pct) == (0.0, pytest.approx(95.0))
    assert th == Thresholds()


def test_slow_rank_needs_two_cards_with_steps(base):
    assert _fired(base, views(steps=[step("0", 5000.0), step("host", 1000.0)]), "slow_rank") == []


def test_slow_rank_by_communication_names_the_rank_the_others_wait_for(base):
    # Cards 1 and 2 sit in the collectives 300 us longer than card 0: card 0 is late.
    v = views(steps=[step("0", 1000.0, 100.0), step("1", 1000.0, 400.0), step("2", 1000.0, 400.0)])
    (f,) = _fired(base, v, "slow_rank")
    assert f.card == "0" and "least communication not overlapped" in f.title and "wait for it" in f.title
    assert f.time_us == pytest.approx(300.0)


def test_host_rows_stand_for_a_card_without_its_own(base):
    v = views(steps=[dict(step("host", 700.0, 300.0), step=None)])
    assert {f.card for f in _fired(base, v, "comm_not_overlapped")} == {"0", "1"}
    v = views(steps=[step("host", 700.0, 300.0), step("1", 1000.0)])
    assert {f.card for f in _fired(base, v, "comm_not_overlapped")} == {"0"}


def test_host_api_of_the_whole_capture_is_shared_by_its_cards(base):
    # msprof's api_statistic says `host`: 3000 us of synchronisation for two cards of 10 ms.
    api = [{"card": "host", "api": "aclrtSynchronizeDevice", "level": "AscendCL", "count": 2, "total_us": 3000.0}]
    v = views(steps=[step("0", 10_000.0), step("1", 10_000.0)], host_api=api)
    found = _fired(base, v, "sync_heavy")
    assert [(f.card, f.time_us, f.share_pct) for f in found] == [("0", 1500.0, 15.0), ("1", 1500.0, 15.0)]
    assert "shared by 2 cards" in found[0].title
    # A card with rows of its own keeps them, and the host rows are the other card's alone.
    api.append({"card": "1", "api": "aclrtSynchronizeDevice", "level": "AscendCL", "count": 1, "total_us": 10.0})
    v = views(steps=[step("0", 10_000.0), step("1", 10_000.0)], host_api=api)
    assert [(f.card, f.time_us) for f in _fired(base, v, "sync_heavy")] == [("0", 3000.0)]


def _blame(diagnosis: Diagnosis, card: str, wait_us: float, cause: str, step_id: str | None) -> Diagnosis:
    """The diagnosis with one task of `card` given a long wait the operator rules blame."""
    tasks = diagnosis.tasks
    row = tasks.filter(pl.col("card") == card)["row"][0]
    hit = pl.col("row") == row
    tasks = tasks.with_columns(
        pl.when(hit).then(pl.lit(cause)).otherwise(pl.col("wait_cause")).alias("wait_cause"),
        pl.when(hit).then(pl.lit(wait_us)).otherwise(pl.col("wait_us")).alias("wait_us"),
        pl.when(hit).then(pl.lit(step_id)).otherwise(pl.col("step_id")).alias("step_id"),
    )
    return dataclasses.replace(diagnosis, tasks=tasks)


def test_free_time_leaves_out_waits_already_blamed(base):
    profile, diagnosis = base
    # 200 us free of a 1000 us step (20%): 60 us of it blamed on a host op leaves 14% (silent),
    # 40 us leaves 16%.
    v = views(steps=[step("0", 800.0, free=200.0, n=7), step("1", 1000.0, n=7)])
    quiet = _blame(diagnosis, "0", 60.0, "host_op", "7")
    assert [f for f in training_findings(profile, quiet, v) if f.rule == "free_time"] == []
    loud = _blame(diagnosis, "0", 40.0, "recompilation", "7")
    (f,) = [f for f in training_findings(profile, loud, v) if f.rule == "free_time"]
    assert (f.time_us, f.share_pct) == (pytest.approx(160.0), pytest.approx(16.0))
    # A wait in a step the view does not hold is not taken away; nor is a communication wait.
    elsewhere = _blame(diagnosis, "0", 60.0, "host_op", "8")
    (f,) = [f for f in training_findings(profile, elsewhere, v) if f.rule == "free_time"]
    assert f.time_us == pytest.approx(200.0)
    comm = _blame(diagnosis, "0", 60.0, "communication", "7")
    (f,) = [f for f in training_findings(profile, comm, v) if f.rule == "free_time"]
    assert f.time_us == pytest.approx(200.0)


def test_free_time_is_silent_where_idle_device_speaks(base):
    profile, diagnosis = base
    idle = Finding(
        rule="idle_device",
        severity="warning",
        title="idle",
        card="0",
        op_types=(),
        op_names=(),
        count=1,
        time_us=900.0,
        share_pct=90.0,
        advice="a",
    )
    v = free_views(50.0)
    assert [f.card for f in training_findings(profile, diagnosis, v) if f.rule == "free_time"] == ["0"]
    assert [f for f in training_findings(profile, diagnosis.with_findings([idle]), v) if f.rule == "free_time"] == []


def test_with_findings_returns_a_new_ordered_diagnosis(base):
    profile, diagnosis = base
    extra = training_findings(profile, diagnosis, comm_not_overlapped_views(40.0))
    merged = diagnosis.with_findings(extra)
    assert merged is not diagnosis and merged.tasks is diagnosis.tasks
    assert merged.findings == tuple(order([*diagnosis.findings, *extra]))
    assert len(merged.findings) == len(diagnosis.findings) + len(extra) and extra
    assert all(f in merged.findings for f in diagnosis.findings)


def test_no_capacity_no_memory_finding(base):
    v = views(memory=[{"card": "0", "peak_allocated_mb": 10.0**6, "peak_reserved_mb": 10.0**6}])
    assert _fired(base, v, "memory_peak") == []


# --------------------------------------------------------------------------- real captures


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _step_trace(rank_dir: Path) -> tuple[float, float, float]:
    """(compute, communication not overlapped, free) summed over the steps of step_trace_time.csv."""
    rows = _csv_rows(rank_dir / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv")
    return tuple(sum(float(r[k]) for r in rows) for k in ("Computing", "Communication(Not Overlapped)", "Free"))


@pytest.fixture(scope="module")
def gpt3():
    profile = open_profile(GPT3, cache=FrameCache(enabled=False))
    diagnosis = diagnose(profile)
    return profile, diagnosis, training_findings(profile, diagnosis, read_training_views(profile))


def _of(findings, rule, card=None):
    return [f for f in findings if f.rule == rule and (card is None or f.card == card)]


def test_gpt3_communication_not_overlapped(gpt3):
    _, _, found = gpt3
    for card in ("0", "1"):
        compute, exposed, free = _step_trace(GPT3 / f"test_rank_{card}")
        (f,) = _of(found, "comm_not_overlapped", card)
        assert f.time_us == pytest.approx(exposed)
        assert f.share_pct == pytest.approx(100 * exposed / (compute + exposed + free), abs=1e-3)
        assert f.share_pct > 50  # Megatron without overlap: half of every step in collectives


def test_gpt3_free_time_not_counted_twice(gpt3):
    _, diagnosis, found = gpt3
    # Rank 0's device is idle most of its span: idle_device says it, free_time does not repeat it.
    assert _of(diagnosis.findings, "idle_device", "0") and not _of(found, "free_time", "0")
    compute, exposed, free = _step_trace(GPT3 / "test_rank_1")
    (f,) = _of(found, "free_time", "1")
    # Rank 1's only long waits (kernel_details.csv: 960.6 and 1,732.2 us) come before its two
    # hcom_broadcast_ tasks: communication, never a recompilation, so none of its free time
    # is blamed on one and free_time reports all of it.
    blamed = sum(x.time_us for x in diagnosis.for_card("1") if x.rule in ("recompilation", "host_op_wait"))
    assert blamed == 0
    (comm,) = _of(diagnosis.findings, "communication_wait", "1")
    assert comm.time_us == pytest.approx(960.6 + 1732.22)
    assert f.time_us == pytest.approx(free)
    assert f.share_pct == pytest.approx(100 * free / (compute + exposed + free), abs=1e-3)


def _communication_json(rank_dir: Path) -> list[tuple[float, float]]:
    """(elapse us, MB moved) of every collective in communication.json (SDMA is HCCS + PCIE)."""
    data = json.loads((rank_dir / "ASCEND_PROFILER_OUTPUT" / "communication.json").read_text())
    out = []
    for step_ops in data.values():
        for kind in step_ops.values():
            for name, op in kind.items():
                if name == "Total Op Info":
                    continue
                bw = op["Communication Bandwidth Info"]
                size = bw.get("RDMA", {}).get("Transit Size(MB)", 0) + bw.get("SDMA", {}).get("Transit Size(MB)", 0)
                out.append((op["Communication Time Info"]["Elapse Time(ms)"] * 1000.0, size))
    return out


def test_gpt3_small_packets_under_and_over_a_rules_file(gpt3, tmp_path):
    profile, diagnosis, found = gpt3
    shares = {}
    for card in ("0", "1"):
        ops = _communication_json(GPT3 / f"test_rank_{card}")
        small = sum(t for t, mb in ops if 0 < mb < 1.0)
        shares[card] = (small, 100 * small / sum(t for t, _ in ops))
    assert all(pct < 20 for _, pct in shares.values()) and not _of(found, "small_packets")
    path = tmp_path / "rules.toml"
    path.write_text("[thresholds]\nsmall_packet_pct = 12\n")
    again = training_findings(profile, diagnosis, read_training_views(profile), Thresholds.load(path))
    (f,) = _of(again, "small_packets")
    assert shares["0"][1] < 12 < shares["1"][1] and f.card == "1"
    assert (f.time_us, f.share_pct) == (pytest.approx(shares["1"][0]), pytest.approx(shares["1"][1], abs=1e-3))


def test_gpt3_nothing_else(gpt3):
    _, _, found = gpt3
    # Ranks within 5% of each other, links within their transport's range, no host API file,
    # no device capacity.
    assert {f.rule for f in found} == {"comm_not_overlapped", "free_time"}


def _trace_sync(rank_dir: Path) -> float:
    """Synchronising host API time of a torch_npu timeline: per level, the larger level total."""
    events = json.loads((rank_dir / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    per: dict[str, float] = {}
    for e in events:
        name = e.get("name", "")
        if e.get("ph") == "X" and "@" in name:
            level, api = name.split("@", 1)
            if re.match(SYNC_API, api):
                per[level] = per.get(level, 0.0) + float(e["dur"])
    return max(per.values())


def test_cnn_slow_rank_and_sync(tmp_path):
    profile = open_profile(CNN, cache=FrameCache(enabled=False))
    diagnosis = diagnose(profile)
    found = training_findings(profile, diagnosis, read_training_views(profile))
    trace = {card: _step_trace(CNN / f"rank{card}_ascend_pt") for card in ("0", "1")}
    # msprof-analyze: per dimension (max - min) over the mean step time, > 5%.
    mean_step = sum(sum(t) for t in trace.values()) / 2
    exposed = {card: t[1] for card, t in trace.items()}
    spread = 100 * (max(exposed.values()) - min(exposed.values())) / mean_step
    assert spread > 5
    for i in (0, 2):  # compute and free are even
        assert 100 * abs(trace["0"][i] - trace["1"][i]) / mean_step < 5
    (f,) = _of(found, "slow_rank")
    late = min(exposed, key=exposed.get)  # the rank the other one waits for
    assert f.card == late == "1"
    assert f.time_us == pytest.approx((exposed["0"] + exposed["1"]) / 2 - exposed["1"])
    for card in ("0", "1"):
        sync = _trace_sync(CNN / f"rank{card}_ascend_pt")
        (s,) = _of(found, "sync_heavy", card)
        assert s.time_us == pytest.approx(sync, rel=1e-6)
        assert s.share_pct == pytest.approx(100 * sync / sum(trace[card]), abs=1e-3)


def _db_sync(rank_dir: Path) -> tuple[float, float]:
    """(synchronising CANN_API time, step time) of a torch_npu db export, in us."""
    out = rank_dir / "ASCEND_PROFILER_OUTPUT"
    db = next(out.glob("ascend_pytorch_profiler_*.db"))
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        rows = con.execute(
            "SELECT e.name, s.value, SUM(c.endNs - c.startNs) FROM CANN_API c JOIN STRING_IDS s ON s.id = c.name "
            "JOIN ENUM_API_TYPE e ON e.id = c.type GROUP BY e.name, s.value"
        ).fetchall()
    con.close()
    per: dict[str, float] = {}
    for level, api, ns in rows:
        if re.match(SYNC_API, api):
            per[level] = per.get(level, 0.0) + ns / 1000.0
    with sqlite3.connect(f"file:{out / 'analysis.db'}?mode=ro", uri=True) as con:
        (step_us,) = con.execute(
            "SELECT SUM(computing + communication_not_overlapped + free) FROM StepTraceTime"
        ).fetchone()
    con.close()
    return max(per.values()), float(step_us)


def test_db_export_sync_heavy():
    profile = open_profile(DB2025, cache=FrameCache(enabled=False))
    diagnosis = diagnose(profile)
    found = training_findings(profile, diagnosis, read_training_views(profile))
    for card in ("0", "1"):
        sync, step_us = _db_sync(DB2025 / f"rank{card}_ascend_pt")
        (f,) = _of(found, "sync_heavy", card)
        assert f.time_us == pytest.approx(sync, rel=1e-6)
        assert f.share_pct == pytest.approx(100 * sync / step_us, abs=1e-3)
        assert f.view == "host_api" and f.evidence[0]["api"].startswith("aclrtSynchronizeStream")


def test_single_card_msprof_db_only_idle():
    profile = open_profile(REAL / "msprof_db_2023", cache=FrameCache(enabled=False))
    diagnosis = diagnose(profile)
    # One card, busy 0.5% of the capture: idle_device, and free_time does not repeat it; no
    # rank to compare, no communication, no memory.
    assert _of(diagnosis.findings, "idle_device")
    assert training_findings(profile, diagnosis, read_training_views(profile)) == []


def test_report_json_text_and_rules_file(tmp_path):
    def report(*extra: str) -> subprocess.CompletedProcess[str]:
        # GPT3 is a cluster of two rank folders: `--card all` reports every rank after the
        # cluster section (the default is the slowest rank only).
        cmd = [sys.executable, "-m", "npuscope", "report", str(GPT3), "--no-cache", "--card", "all", *extra]
        return subprocess.run(cmd, capture_output=True, text=True, check=False)

    res = report("--format", "json")
    assert res.returncode == 0, res.stderr
    cards = {c["card"]: c for c in json.loads(res.stdout)["cards"]}
    (f,) = [f for f in cards["0"]["findings"] if f["rule"] == "comm_not_overlapped"]
    assert f["view"] == "steps" and set(f["evidence"][0]) == set(SCHEMAS["steps"])
    assert all(f["view"] == "" for c in cards.values() for f in c["findings"] if f["rule"] not in TRAINING_RULES)
    text = report().stdout
    assert "comm_not_overlapped: Communication not overlapped" in text and "(see Steps)" in text
    rules = tmp_path / "rules.toml"
    rules.write_text("[thresholds]\ncomm_not_overlapped_pct = 60\n")
    res = report("--format", "json", "--rules", str(rules))
    assert res.returncode == 0, res.stderr
    assert not [f for c in json.loads(res.stdout)["cards"] for f in c["findings"] if f["rule"] == "comm_not_overlapped"]


# --------------------------------------------------------------------------- generated profiles


@pytest.mark.parametrize(
    ("layout", "db"), [("era_b", False), ("era_b", "only"), ("era_a", False), ("torch_npu", False)]
)
def test_clean_generated_profile_raises_none(tmp_path, layout, db):
    g = generate(tmp_path, layout=layout, cards=2, problems=(), db=db)
    profile = open_profile(g.root, cache=FrameCache(enabled=False))
    diagnosis = diagnose(profile)
    assert training_findings(profile, diagnosis, read_training_views(profile)) == []


@pytest.mark.parametrize("rule", sorted(CASES))
def test_finding_screen_shows_view_rows(base, rule):
    from rich.console import Console

    from npuscope.tui.screens.finding_screen import evidence_table

    name, make, below = CASES[rule]
    v = make(getattr(Thresholds(), name) * (0.5 if below else 3.0))
    (f,) = _fired(base, v, rule)
    console = Console(width=400, record=True)
    console.print(evidence_table(f))
    text = console.export_text()
    header = [c for c in getattr(v, f.view).columns if c != "source"]
    assert all(c in text for c in header)
    assert len(text.strip().splitlines()) == 1 + len(f.evidence)
