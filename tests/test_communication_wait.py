"""Waits inside a collective of the same card are communication, never the host's (issue 16)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import polars as pl
import pytest

from npuscope.analysis.diagnose import diagnose
from npuscope.analysis.query import parse_query, task_positions
from npuscope.analysis.thresholds import Thresholds
from npuscope.analysis.totals import card_totals
from npuscope.analysis.waits import attribute_waits
from npuscope.parsers import open_profile

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "samples" / "real" / "torch_npu_2025_db"


def _truth(level: str, rank: int) -> tuple[int, float]:
    """From the SQLite file: the start of the first TensorMove after the longest collective,
    and the gap before it (to the end of the previous compute task), checked to lie inside
    that collective."""
    db = REAL / level / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / f"ascend_pytorch_profiler_{rank}.db"
    con = sqlite3.connect(db)
    try:
        a_start, a_end = con.execute(
            "SELECT startNs, endNs FROM COMMUNICATION_OP ORDER BY endNs - startNs DESC LIMIT 1"
        ).fetchone()
        (start,) = con.execute(
            "SELECT min(t.startNs) FROM TASK t JOIN COMPUTE_TASK_INFO i ON i.globalTaskId = t.globalTaskId "
            "JOIN STRING_IDS s ON s.id = i.name WHERE s.value LIKE '%TensorMove%' AND t.startNs >= ?",
            (a_end,),
        ).fetchone()
        (prev_end,) = con.execute(
            "SELECT max(t.endNs) FROM TASK t JOIN COMPUTE_TASK_INFO i ON i.globalTaskId = t.globalTaskId "
            "WHERE t.endNs <= ?",
            (start,),
        ).fetchone()
    finally:
        con.close()
    assert start - a_end < 10_000  # TensorMove starts microseconds after the allReduce ends
    covered = min(a_end, start) - max(a_start, prev_end)
    assert covered >= 0.99 * (start - prev_end)  # the gap lies inside the allReduce
    return start, (start - prev_end) / 1000


@pytest.mark.parametrize("level", ["level0", "level1"])
def test_real_capture_wait_inside_allreduce_is_communication(level: str) -> None:
    profile = open_profile(REAL / level)
    d = diagnose(profile)
    totals = card_totals(profile, d.tasks, d.cards)
    for rank, card in ((0, "0"), (1, "1")):
        start, gap_us = _truth(level, rank)
        row = d.tasks.filter((pl.col("card") == card) & (pl.col("start_ns") == start)).row(0, named=True)
        assert "TensorMove" in row["op_name"]
        assert row["wait_us"] == pytest.approx(gap_us, abs=0.01)
        assert row["wait_cause"] == "communication"
        assert row["wait_confidence"] == "evidence"
        # The finding and the totals carry exactly the waits tagged communication.
        tagged = d.tasks.filter((pl.col("card") == card) & (pl.col("wait_cause") == "communication"))
        assert start in tagged["start_ns"].to_list()
        found = [f for f in d.for_card(card) if f.rule == "communication_wait"]
        assert len(found) == 1
        assert found[0].time_us == pytest.approx(float(tagged["wait_us"].sum()))
        assert found[0].count == tagged.height
        assert f"{found[0].time_us:,.0f} us" in found[0].title
        assert "another rank is late" in found[0].advice
        assert totals[card]["wait_communication_us"] == pytest.approx(float(tagged["wait_us"].sum()), abs=0.01)
        # Never a host or recompilation wait for this gap.
        for f in d.for_card(card):
            if f.rule in ("host_op_wait", "recompilation"):
                assert all(e["start_us"] != row["start_us"] for e in f.evidence)
        # It is the card's top finding: the largest time at stake.
        assert d.for_card(card)[0].rule == "communication_wait"
    # The filter language selects them.
    picked = task_positions(d.tasks, parse_query("cause:communication"), "row", False)
    assert picked.len() == d.tasks.filter(pl.col("wait_cause") == "communication").height > 0
    assert task_positions(d.tasks, parse_query("cause:comm"), "row", False).len() == picked.len()


def _tasks(rows: list[tuple[str, str, int, float, float]]) -> pl.DataFrame:
    """card, op_name, task_type, start (us), duration (us), wait (us) -> a canonical-enough frame."""
    return pl.DataFrame(
        {
            "card": ["0"] * len(rows),
            "op_name": [r[0] for r in rows],
            "op_type": [r[0] for r in rows],
            "task_type": [r[1] for r in rows],
            "start_ns": [r[2] * 1000 for r in rows],
            "duration_us": [r[3] for r in rows],
            "wait_us": [r[4] for r in rows],
            "step_id": pl.Series([None] * len(rows), dtype=pl.Int64),
            "input_shapes": ["1"] * len(rows),
            "input_dtypes": ["FLOAT"] * len(rows),
            "is_aclnn": [False] * len(rows),
            "op_state": pl.Series([None] * len(rows), dtype=pl.String),
        }
    )


# An allReduce on [1000, 9000) us; Add ends at 1000, Cast starts at 9003 after a 8003 us wait
# (inside the collective); Mul waits 2000 us after Cast with nothing on the device.
INLINE = [
    ("Add", "AI_CORE", 900, 100.0, 0.0),
    ("hcom_allReduce__1_0_1", "COMMUNICATION", 1000, 8000.0, 0.0),
    ("Cast", "AI_CORE", 9003, 10.0, 8003.0),
    ("Mul", "AI_CORE", 11013, 10.0, 2000.0),
]


def test_inline_without_timeline() -> None:
    out = attribute_waits(_tasks(INLINE), None, Thresholds())
    causes = dict(zip(out["op_name"], out["wait_cause"]))
    assert causes["Cast"] == "communication"
    assert causes["Mul"] == "recompilation"  # first call of its shape: suspected as before
    assert out.filter(pl.col("op_name") == "Cast")["wait_confidence"][0] == "evidence"


def test_inline_with_timeline_checked_before_host_causes() -> None:
    # The host compiled and synchronised during both gaps: only the one outside the
    # collective may be the host's.
    events = pl.DataFrame(
        {
            "card": ["host", "host"],
            "name": ["AscendCL@aclopCompileAndExecute", "AscendCL@aclrtSynchronizeStream"],
            "ph": ["X", "X"],
            "ts_ns": [1_000_000, 9_013_000],
            "dur_ns": [8_000_000, 2_000_000],
        }
    )
    out = attribute_waits(_tasks(INLINE), events, Thresholds())
    causes = dict(zip(out["op_name"], out["wait_cause"]))
    assert causes["Cast"] == "communication"
    assert causes["Mul"] == "host_op"


def test_half_covered_is_the_boundary() -> None:
    # The collective covers 40% of the gap: not a communication wait.
    rows = [
        ("Add", "AI_CORE", 0, 100.0, 0.0),
        ("hcom_allReduce__1_0_1", "COMMUNICATION", 100, 400.0, 0.0),
        ("Cast", "AI_CORE", 1100, 10.0, 1000.0),
    ]
    out = attribute_waits(_tasks(rows), None, Thresholds())
    assert out.filter(pl.col("op_name") == "Cast")["wait_cause"][0] != "communication"
    rows[1] = ("hcom_allReduce__1_0_1", "COMMUNICATION", 100, 500.0, 0.0)
    out = attribute_waits(_tasks(rows), None, Thresholds())
    assert out.filter(pl.col("op_name") == "Cast")["wait_cause"][0] == "communication"


def test_collective_of_another_card_does_not_count() -> None:
    frame = _tasks(INLINE).with_columns(
        pl.when(pl.col("task_type") == "COMMUNICATION").then(pl.lit("1")).otherwise(pl.col("card")).alias("card")
    )
    out = attribute_waits(frame, None, Thresholds())
    assert out.filter(pl.col("op_name") == "Cast")["wait_cause"][0] != "communication"


def test_compare_splits_out_the_communication_wait() -> None:
    from npuscope.analysis.compare import compare_runs
    from npuscope.analysis.compare_render import comparison_json

    base, new = open_profile(REAL / "level0"), open_profile(REAL / "level1")
    doc = comparison_json(compare_runs(base, new))
    totals = doc["totals"]
    for key in ("wait_recompilation_us", "wait_host_op_us", "wait_expected_us", "wait_unexplained_us"):
        assert key in totals  # the existing keys stay
    comm = totals["wait_communication_us"]
    expected = {}
    for name, profile in (("base", base), ("new", new)):
        d = diagnose(profile)
        expected[name] = float(d.tasks.filter(pl.col("wait_cause") == "communication")["wait_us"].sum())
    assert comm["base"] == pytest.approx(expected["base"], abs=0.01)
    assert comm["new"] == pytest.approx(expected["new"], abs=0.01)
